//! The Basic Header Segment (RFC 7143 §11.2): the 48 bytes every PDU starts with.
//!
//! Bytes 0–19 mean the same in every PDU (opcode and immediate bit, flags, AHS and data lengths,
//! LUN or opcode-specific bytes, Initiator Task Tag); bytes 20–47 are opcode-specific but follow
//! one pattern: requests carry CmdSN and ExpStatSN at 24 and 28, responses StatSN, ExpCmdSN and
//! MaxCmdSN at 24, 28 and 32. The family modules read and write fields only through the named
//! offsets in [`at`] and the accessors of [`Bhs`].

/// Size of the Basic Header Segment (§11.2).
pub const BHS_LEN: usize = 48;

/// Byte offsets of BHS fields. One offset has different names in different PDUs; each name is
/// the RFC's, from the PDU section given.
pub(crate) mod at {
    /// Opcode (low 6 bits) and the immediate-delivery bit (§11.2.1.1, §11.2.1.2).
    pub const OPCODE: usize = 0;
    /// The final bit and opcode-specific flags (§11.2.1.3).
    pub const FLAGS: usize = 1;
    /// SCSI Response, Task Management and Logout Response "Response" (§11.4.3, §11.6.1, §11.15.1).
    pub const RESPONSE: usize = 2;
    /// Reject reason (§11.17.1).
    pub const REASON: usize = 2;
    /// Login Version-max (§11.12.4).
    pub const VERSION_MAX: usize = 2;
    /// SCSI status (§11.4.2, §11.7.4).
    pub const STATUS: usize = 3;
    /// Login Request Version-min, Login Response Version-active (§11.12.5, §11.13.2).
    pub const VERSION_MIN: usize = 3;
    /// TotalAHSLength in 4-byte words (§11.2.1.4).
    pub const TOTAL_AHS_LENGTH: usize = 4;
    /// DataSegmentLength, 3 bytes (§11.2.1.5).
    pub const DATA_SEGMENT_LENGTH: usize = 5;
    /// Logical Unit Number, 8 bytes (§11.2.1.6).
    pub const LUN: usize = 8;
    /// Login ISID, 6 bytes (§11.12.5).
    pub const ISID: usize = 8;
    /// Login TSIH (§11.12.6).
    pub const TSIH: usize = 14;
    /// Initiator Task Tag (§11.2.1.7).
    pub const ITT: usize = 16;
    /// Target Transfer Tag (§11.7.4, §11.8.3, §11.18.2).
    pub const TTT: usize = 20;
    /// SCSI Command Expected Data Transfer Length (§11.3.3).
    pub const EXPECTED_DATA_LENGTH: usize = 20;
    /// Task Management Referenced Task Tag (§11.5.2).
    pub const REFERENCED_TASK_TAG: usize = 20;
    /// SCSI Response SNACK Tag (§11.4.4).
    pub const SNACK_TAG: usize = 20;
    /// Login and Logout Request CID (§11.12.7, §11.14.3).
    pub const CID: usize = 20;
    /// CmdSN of a request (§11.2.1 of each request PDU).
    pub const CMD_SN: usize = 24;
    /// StatSN of a response.
    pub const STAT_SN: usize = 24;
    /// ExpStatSN of a request.
    pub const EXP_STAT_SN: usize = 28;
    /// ExpCmdSN of a response.
    pub const EXP_CMD_SN: usize = 28;
    /// MaxCmdSN of a response.
    pub const MAX_CMD_SN: usize = 32;
    /// Task Management RefCmdSN (§11.5.4).
    pub const REF_CMD_SN: usize = 32;
    /// SCSI Command CDB, 16 bytes (§11.3.5).
    pub const CDB: usize = 32;
    /// Task Management ExpDataSN, SCSI Response ExpDataSN (§11.5.5, §11.4.6).
    pub const EXP_DATA_SN: usize = 36;
    /// Data-In/Data-Out DataSN (§11.7.5).
    pub const DATA_SN: usize = 36;
    /// R2TSN (§11.8.5).
    pub const R2T_SN: usize = 36;
    /// Login Response Status-Class and Status-Detail (§11.13.5).
    pub const STATUS_CLASS: usize = 36;
    pub const STATUS_DETAIL: usize = 37;
    /// Asynchronous Message AsyncEvent, AsyncVCode, Parameter1–3 (§11.9.1–§11.9.3).
    pub const ASYNC_EVENT: usize = 36;
    pub const ASYNC_VCODE: usize = 37;
    pub const ASYNC_PARAMETERS: usize = 38;
    /// Data-In/Data-Out and R2T Buffer Offset (§11.7.6, §11.8.6).
    pub const BUFFER_OFFSET: usize = 40;
    /// SCSI Response Bidirectional Read Residual Count (§11.4.5).
    pub const BIDI_RESIDUAL: usize = 40;
    /// Logout Response Time2Wait and Time2Retain (§11.15.2, §11.15.3).
    pub const TIME2WAIT: usize = 40;
    pub const TIME2RETAIN: usize = 42;
    /// SNACK BegRun and RunLength (§11.16.4, §11.16.5).
    pub const BEG_RUN: usize = 40;
    pub const RUN_LENGTH: usize = 44;
    /// SCSI Response and Data-In Residual Count (§11.4.5, §11.7.6).
    pub const RESIDUAL: usize = 44;
    /// R2T Desired Data Transfer Length (§11.8.7).
    pub const DESIRED_LENGTH: usize = 44;
}

/// Flag bits: [`IMMEDIATE`](flag::IMMEDIATE) lives in byte 0, the others in byte 1 (§11.2.1.3).
pub(crate) mod flag {
    pub const IMMEDIATE: u8 = 0x40;
    pub const FINAL: u8 = 0x80;
    /// Login T (transit) bit (§11.12.2).
    pub const TRANSIT: u8 = 0x80;
    /// Login and Text C (continue) bit (§11.10.2, §11.12.2).
    pub const CONTINUE: u8 = 0x40;
    /// SCSI Command R and W bits (§11.3.1).
    pub const READ: u8 = 0x40;
    pub const WRITE: u8 = 0x20;
    /// Data-In A (acknowledge) bit (§11.7.2).
    pub const ACKNOWLEDGE: u8 = 0x40;
    /// SCSI Response o, u, O, U and Data-In O, U, S bits (§11.4.1, §11.7.3).
    pub const BIDI_OVERFLOW: u8 = 0x10;
    pub const BIDI_UNDERFLOW: u8 = 0x08;
    pub const OVERFLOW: u8 = 0x04;
    pub const UNDERFLOW: u8 = 0x02;
    pub const STATUS: u8 = 0x01;
}

/// A Basic Header Segment being read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bhs(pub [u8; BHS_LEN]);

impl Bhs {
    /// An all-zero header with `opcode` (reserved fields are written as zero, §11.2.1).
    pub fn new(opcode: u8) -> Self {
        let mut bytes = [0u8; BHS_LEN];
        bytes[at::OPCODE] = opcode;
        Bhs(bytes)
    }

    pub fn opcode(&self) -> u8 {
        self.0[at::OPCODE] & 0x3f
    }
    pub fn immediate(&self) -> bool {
        self.0[at::OPCODE] & flag::IMMEDIATE != 0
    }
    pub fn set_immediate(&mut self, on: bool) {
        if on {
            self.0[at::OPCODE] |= flag::IMMEDIATE;
        }
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.0[at::FLAGS]
    }
    pub fn flag(&self, bit: u8) -> bool {
        self.0[at::FLAGS] & bit != 0
    }
    pub fn set_flags(&mut self, flags: u8) {
        self.0[at::FLAGS] = flags;
    }

    pub fn u8(&self, at: usize) -> u8 {
        self.0[at]
    }
    pub fn set_u8(&mut self, at: usize, value: u8) {
        self.0[at] = value;
    }
    pub fn u16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.0[at], self.0[at + 1]])
    }
    pub fn set_u16(&mut self, at: usize, value: u16) {
        self.0[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }
    pub fn u32(&self, at: usize) -> u32 {
        be32(&self.0, at)
    }
    pub fn set_u32(&mut self, at: usize, value: u32) {
        self.0[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }
    pub fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        self.0[at..at + N].try_into().expect("field within the BHS")
    }
    pub fn set_bytes(&mut self, at: usize, value: &[u8]) {
        self.0[at..at + value.len()].copy_from_slice(value);
    }

    pub fn lun(&self) -> [u8; 8] {
        self.bytes(at::LUN)
    }
    pub fn set_lun(&mut self, lun: &[u8; 8]) {
        self.set_bytes(at::LUN, lun);
    }
    pub fn itt(&self) -> u32 {
        self.u32(at::ITT)
    }
    pub fn set_itt(&mut self, itt: u32) {
        self.set_u32(at::ITT, itt);
    }

    /// CmdSN and ExpStatSN, the sequence numbers of every request.
    pub fn request_sns(&self) -> (u32, u32) {
        (self.u32(at::CMD_SN), self.u32(at::EXP_STAT_SN))
    }
    pub fn set_request_sns(&mut self, cmd_sn: u32, exp_stat_sn: u32) {
        self.set_u32(at::CMD_SN, cmd_sn);
        self.set_u32(at::EXP_STAT_SN, exp_stat_sn);
    }

    /// StatSN, ExpCmdSN and MaxCmdSN, the sequence numbers of every response.
    pub fn response_sns(&self) -> (u32, u32, u32) {
        (
            self.u32(at::STAT_SN),
            self.u32(at::EXP_CMD_SN),
            self.u32(at::MAX_CMD_SN),
        )
    }
    pub fn set_response_sns(&mut self, stat_sn: u32, exp_cmd_sn: u32, max_cmd_sn: u32) {
        self.set_u32(at::STAT_SN, stat_sn);
        self.set_u32(at::EXP_CMD_SN, exp_cmd_sn);
        self.set_u32(at::MAX_CMD_SN, max_cmd_sn);
    }

    /// TotalAHSLength in bytes (§11.2.1.4).
    pub fn ahs_len(&self) -> usize {
        self.0[at::TOTAL_AHS_LENGTH] as usize * 4
    }
    /// DataSegmentLength (§11.2.1.5).
    pub fn data_len(&self) -> usize {
        (self.u32(at::TOTAL_AHS_LENGTH) & 0x00ff_ffff) as usize
    }
    /// Sets TotalAHSLength and DataSegmentLength.
    pub fn set_lengths(&mut self, ahs_len: usize, data_len: usize) {
        self.0[at::TOTAL_AHS_LENGTH] = (ahs_len / 4) as u8;
        self.0[at::DATA_SEGMENT_LENGTH..at::DATA_SEGMENT_LENGTH + 3]
            .copy_from_slice(&(data_len as u32).to_be_bytes()[1..]);
    }
}

/// A big-endian u32 at `at`.
pub(crate) fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// `flag` when `on`, else 0: for assembling a flags byte.
pub(crate) fn bit(on: bool, flag: u8) -> u8 {
    if on { flag } else { 0 }
}

/// Padding that brings `len` to a multiple of 4 (§11.1).
pub(crate) fn pad4(len: usize) -> usize {
    (4 - len % 4) % 4
}
