//! # reel-scsi — the SCSI core shared by every reel device type
//!
//! This crate turns CDBs into responses for the parts of SCSI that every device type shares
//! (SPC-4): INQUIRY and VPD pages, REQUEST SENSE, TEST UNIT READY, the MODE and LOG page
//! frameworks, REPORT SUPPORTED OPERATION CODES, timestamps, SPC-2 and persistent reservations,
//! unit attentions per I_T nexus, and REPORT LUNS / absent-LUN handling in [`LunTable`].
//! Device types (tape, changer, the [`NullDisk`] test disk) plug in as a [`Personality`] of a
//! [`ScsiDevice`].
//!
//! **Architecture invariant:** reel-scsi knows nothing of iSCSI or any other transport: no PDUs,
//! no sessions, no sockets, no async runtime. An I_T nexus is an opaque identity ([`ItNexus`])
//! given by the transport. Everything is synchronous; the transport calls
//! [`LogicalUnit::execute`] from worker threads and is responsible for executing the commands of
//! one logical unit in order. Task attributes are the transport's business.
//!
//! Sense data is built in one place ([`sense`]); every CDB byte pattern produces a proper
//! response (never a panic).

pub mod cdb;
pub mod conformance;
mod data_in;
mod device;
pub mod initiator;
mod inquiry;
mod log;
mod lun_table;
mod mode;
mod null_disk;
mod opcodes;
mod reservation;
pub mod sense;
mod unit_attention;

use std::sync::Arc;

pub use bytes::Bytes;
pub use cdb::{Cdb, CdbError, Opcode, SpcCommand};
pub use data_in::DataIn;
pub use device::{
    Command, DEFAULT_MAX_TRANSFER_LENGTH, DeviceContext, Identity, Personality, ScsiDevice,
    ScsiResult, TimestampClock, TransportIdEncoder, default_transport_id,
};
pub use log::{LogPageControl, LogParameter};
pub use lun_table::{LunTable, WLUN_REPORT_LUNS, decode_lun, encode_lun};
pub use mode::{BlockDescriptor, ModePage, ModePageControl, ModeSelectParams};
pub use null_disk::NullDisk;
pub use opcodes::OpcodeDescriptor;
pub use reservation::Access;
pub use sense::{Asc, KeySpecific, Sense, SenseFormat, SenseKey, SenseParseError, parse_sense};

/// An I_T nexus: initiator port + target port (SAM-5 §4.6). For iSCSI, `initiator_port` is
/// `"<initiator iqn>,i,0x<12 hex digit ISID>"` and `target_port` the relative target port id
/// (1-based). The core treats both as opaque.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ItNexus {
    pub initiator_port: Arc<str>,
    pub target_port: u16,
}

impl ItNexus {
    /// A nexus from its two parts.
    pub fn new(initiator_port: &str, target_port: u16) -> Self {
        Self {
            initiator_port: Arc::from(initiator_port),
            target_port,
        }
    }
}

/// Task attribute of a command (SAM-5 §8.9). Ordering is the transport's business.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskAttribute {
    Simple,
    Ordered,
    HeadOfQueue,
    Aca,
}

/// One SCSI command as received by the transport.
pub struct Request<'a> {
    pub nexus: &'a ItNexus,
    /// 1..=260 bytes as received (iSCSI gives 16 + AHS); may be garbage.
    pub cdb: &'a [u8],
    /// All data the initiator sent with the command (empty if none).
    pub data_out: Bytes,
    /// Expected data-in transfer length the initiator allows.
    pub data_in_len: u32,
    pub attribute: TaskAttribute,
}

/// SCSI status codes (SAM-5 §5.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Good = 0x00,
    CheckCondition = 0x02,
    ConditionMet = 0x04,
    Busy = 0x08,
    ReservationConflict = 0x18,
    TaskSetFull = 0x28,
    AcaActive = 0x30,
    TaskAborted = 0x40,
}

/// The outcome of one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: Status,
    /// Sense data bytes (fixed or descriptor format) when `CheckCondition`.
    pub sense: Option<Bytes>,
    /// Data to return; the transport truncates to `data_in_len` and reports residuals.
    pub data_in: DataIn,
}

impl Response {
    /// GOOD status with data-in bytes.
    pub fn good(data_in: impl Into<Bytes>) -> Self {
        Self {
            status: Status::Good,
            sense: None,
            data_in: DataIn::from(data_in.into()),
        }
    }

    /// GOOD status with data-in bytes in several shared parts (see [`DataIn`]).
    pub fn good_parts(parts: Vec<Bytes>) -> Self {
        Self {
            status: Status::Good,
            sense: None,
            data_in: DataIn::from_parts(parts),
        }
    }

    /// GOOD status, no data.
    pub fn good_empty() -> Self {
        Self::good(Bytes::new())
    }

    /// A status without sense or data (RESERVATION CONFLICT, BUSY, TASK SET FULL, ...).
    pub fn status(status: Status) -> Self {
        Self {
            status,
            sense: None,
            data_in: DataIn::new(),
        }
    }

    /// CHECK CONDITION with `sense` encoded in `format`.
    pub fn check_condition(sense: &Sense, format: SenseFormat) -> Self {
        Self {
            status: Status::CheckCondition,
            sense: Some(sense.to_bytes(format)),
            data_in: DataIn::new(),
        }
    }

    /// Attaches data-in bytes (for example the partial data of a READ that hit a filemark).
    pub fn with_data(mut self, data_in: impl Into<Bytes>) -> Self {
        self.data_in = DataIn::from(data_in.into());
        self
    }

    /// [`Response::with_data`] in several shared parts (see [`DataIn`]).
    pub fn with_data_parts(mut self, parts: Vec<Bytes>) -> Self {
        self.data_in = DataIn::from_parts(parts);
        self
    }
}

/// Task management functions (SAM-5 §7) as far as they affect logical unit state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskManagement {
    AbortTaskSet,
    ClearTaskSet,
    LogicalUnitReset,
    TargetWarmReset,
    TargetColdReset,
    ClearAca,
    ItNexusReset,
}

/// One logical unit. Implementations are `Send + Sync`; `execute` may block (tape I/O).
pub trait LogicalUnit: Send + Sync {
    /// Executes one command and returns its status, sense and data.
    fn execute(&self, request: Request<'_>) -> Response;
    /// Side effects of a task management function on this LU (unit attentions, reservation
    /// release per SAM-5 §5.7 / SPC-4 §5.9). Aborting tasks is the transport's business.
    fn task_management(&self, function: TaskManagement, nexus: &ItNexus);
    /// The I_T nexus is gone (for iSCSI: session closed): release the SPC-2 RESERVE held by it
    /// and drop its pending sense; persistent reservation registrations persist.
    fn nexus_lost(&self, nexus: &ItNexus);
    /// Whether `execute` may block (storage I/O). A transport runs units that never block
    /// inline instead of handing their commands to a worker thread.
    fn may_block(&self) -> bool {
        true
    }
    /// The most bytes of Data-Out one command may carry ([`Personality::max_transfer_length`]);
    /// must not wait for a running command. A transport refuses longer transfers before
    /// receiving their data and answers them with [`Self::refuse_data_out`].
    fn max_data_out(&self) -> u32 {
        DEFAULT_MAX_TRANSFER_LENGTH
    }
    /// Answers a command whose Data-Out exceeded [`Self::max_data_out`] and was not received:
    /// the command is not executed; CHECK CONDITION, ILLEGAL REQUEST, INVALID FIELD IN CDB
    /// (SBC-3 §6.5.3, SSC-4 READ BLOCK LIMITS), after any pending unit attention.
    fn refuse_data_out(&self, _request: Request<'_>) -> Response {
        Response::check_condition(
            &Sense::illegal_request(Asc::INVALID_FIELD_IN_CDB),
            SenseFormat::Fixed,
        )
    }
}

/// Entry points for fuzz targets.
#[doc(hidden)]
pub mod fuzzing {
    use crate::{ItNexus, LunTable, NullDisk, Request, ScsiDevice, Status, TaskAttribute};
    use bytes::Bytes;
    use std::sync::Arc;

    /// Feeds arbitrary bytes as a CDB plus data-out to a [`LunTable`] holding a [`NullDisk`] at
    /// LUN 0. Byte 0 picks the nexus (bit 0) and the LUN (bit 1: absent LUN 1; bit 2: W-LUN),
    /// byte 1 the CDB length; the rest after the CDB is data-out. Panics only if an invariant
    /// breaks: CHECK CONDITION always carries parseable sense, other statuses carry none.
    pub fn fuzz_cdb(data: &[u8]) {
        let mut table = LunTable::new();
        table.insert(0, Arc::new(ScsiDevice::new(NullDisk::new(512, 1 << 22))));
        run(&table, data);
    }

    /// As [`fuzz_cdb`] on a given table (lets tests reuse one table across inputs).
    pub fn run(table: &LunTable, data: &[u8]) {
        let (Some(&selector), Some(&len)) = (data.first(), data.get(1)) else {
            return;
        };
        let rest = data.get(2..).unwrap_or_default();
        let len = usize::from(len).min(rest.len());
        let (cdb, data_out) = rest.split_at(len);
        let nexus = ItNexus::new(
            if selector & 1 == 0 {
                "iqn.fuzz-a,i,0x000000000001"
            } else {
                "iqn.fuzz-b,i,0x000000000002"
            },
            1,
        );
        let lun = match selector & 6 {
            0 | 4 => 0,
            2 => 1,
            _ => crate::WLUN_REPORT_LUNS,
        };
        let response = table.execute(
            lun,
            Request {
                nexus: &nexus,
                cdb,
                data_out: Bytes::copy_from_slice(data_out),
                data_in_len: u32::from(selector) << 8,
                attribute: TaskAttribute::Simple,
            },
        );
        match response.status {
            Status::CheckCondition => {
                let sense = response.sense.expect("CHECK CONDITION carries sense");
                crate::parse_sense(&sense).expect("sense parses");
            }
            _ => assert!(response.sense.is_none(), "sense only with CHECK CONDITION"),
        }
    }
}
