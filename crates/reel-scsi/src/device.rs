//! The generic device: [`ScsiDevice`] executes the SPC commands every device type shares and
//! hands the rest to its [`Personality`] (tape, changer, [`crate::NullDisk`]).
//!
//! Two locks: the personality's (held for the whole command, so tape I/O can block) and the
//! core state's (unit attentions, reservations, sense format, timestamp; held briefly). The
//! order is always personality first, then core state, never the reverse.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::cdb::{Cdb, Opcode, SpcCommand, has_service_action};
use crate::log::{self, LogPageControl, LogParameter};
use crate::mode::{
    self, BlockDescriptor, ModePage, ModePageControl, ModeSelectParams, parse_mode_select,
};
use crate::opcodes::{self, OpcodeDescriptor};
use crate::reservation::{Access, PrOutCdb, ReservationError, Reservations};
use crate::sense::{Asc, Sense, SenseFormat};
use crate::unit_attention::UnitAttentions;
use crate::{
    ItNexus, LogicalUnit, Request, Response, Status, TaskAttribute, TaskManagement, inquiry,
};

/// Result of an operation that fails with sense data.
pub type ScsiResult<T> = Result<T, Sense>;

/// A clock giving milliseconds since the Unix epoch (time is an input, so tests can fix it).
pub type TimestampClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Encodes the TransportID (SPC-4 §7.6.4) of a nexus's initiator port for READ FULL STATUS.
pub type TransportIdEncoder = Arc<dyn Fn(&ItNexus) -> Vec<u8> + Send + Sync>;

/// Who a logical unit says it is (INQUIRY, SPC-4 §6.6.2 and VPD pages 80h, 83h).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// PERIPHERAL DEVICE TYPE: 00h direct access, 01h sequential access, 08h medium changer.
    pub peripheral_type: u8,
    /// RMB: removable medium.
    pub removable: bool,
    /// MCHNGR (obsolete in SPC-4): an attached medium changer.
    pub medium_changer: bool,
    /// T10 VENDOR IDENTIFICATION, padded with spaces.
    pub vendor: [u8; 8],
    /// PRODUCT IDENTIFICATION, padded with spaces.
    pub product: [u8; 16],
    /// PRODUCT REVISION LEVEL, padded with spaces.
    pub revision: [u8; 4],
    /// Unit serial number (VPD 80h), ASCII.
    pub serial: String,
    /// NAA designator (VPD 83h): an 8-byte NAA-5 value, or the first 8 bytes of a NAA-6 value
    /// whose last 8 bytes are `naa_extension`.
    pub naa: u64,
    pub naa_extension: Option<u64>,
    /// Version descriptors reported after SAM-5 (00A0h) and SPC-4 (0460h), e.g. SBC-3 04C0h
    /// (SPC-4 §6.6.2, table 144); at most 6 are reported.
    pub version_descriptors: Vec<u16>,
}

impl Identity {
    /// An identity with space-padded (or truncated) ASCII strings and no version descriptors.
    pub fn new(
        peripheral_type: u8,
        vendor: &str,
        product: &str,
        revision: &str,
        serial: &str,
        naa: u64,
    ) -> Self {
        Self {
            peripheral_type,
            removable: false,
            medium_changer: false,
            vendor: pad(vendor),
            product: pad(product),
            revision: pad(revision),
            serial: serial.to_owned(),
            naa,
            naa_extension: None,
            version_descriptors: Vec::new(),
        }
    }
}

fn pad<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [b' '; N];
    for (o, b) in out.iter_mut().zip(s.bytes()) {
        *o = if b.is_ascii_graphic() || b == b' ' {
            b
        } else {
            b'?'
        };
    }
    out
}

/// [`Personality::max_transfer_length`] of a device that does not say.
pub const DEFAULT_MAX_TRANSFER_LENGTH: u32 = 8 << 20;

/// A command handed to a personality.
pub struct Command<'a> {
    pub cdb: Cdb<'a>,
    pub data_out: &'a Bytes,
    pub data_in_len: u32,
    pub attribute: TaskAttribute,
}

/// What a device type adds to the SPC core. Every method but `identity` and `execute` has a
/// default for "nothing to add".
pub trait Personality: Send {
    /// INQUIRY identity.
    fn identity(&self) -> &Identity;

    /// Whether commands may block on I/O (see [`LogicalUnit::may_block`]); asked once, when
    /// the device is created.
    fn may_block(&self) -> bool {
        true
    }

    /// The most bytes one command may transfer to the device (Data-Out); asked once, when the
    /// device is created. A transport refuses a longer transfer before receiving its data
    /// (see [`LogicalUnit::refuse_data_out`]), so this bounds the memory a command can take.
    fn max_transfer_length(&self) -> u32 {
        DEFAULT_MAX_TRANSFER_LENGTH
    }

    /// The sense for a command whose data transfer exceeds [`Self::max_transfer_length`]:
    /// ILLEGAL REQUEST, INVALID FIELD IN CDB (what SBC-3 §6.5.3 prescribes for a transfer
    /// beyond MAXIMUM TRANSFER LENGTH and SSC-4 for a block beyond READ BLOCK LIMITS), without
    /// a field pointer unless the device knows where the CDB's transfer length is.
    fn transfer_too_long(&self, _cdb: &Cdb<'_>) -> Sense {
        Sense::illegal_request(Asc::INVALID_FIELD_IN_CDB)
    }

    /// TEST UNIT READY (and REQUEST SENSE when nothing else is pending): `Err` is the sense
    /// describing why the unit is not ready (e.g. NOT READY / MEDIUM NOT PRESENT).
    fn ready(&self) -> ScsiResult<()> {
        Ok(())
    }

    /// Extra VPD page codes this device provides.
    fn vpd_pages(&self) -> Vec<u8> {
        Vec::new()
    }

    /// The body (after the 4-byte header) of an extra VPD page.
    fn vpd_page(&self, _page: u8) -> Option<Vec<u8>> {
        None
    }

    /// The device's mode pages (the control mode page 0Ah is the core's).
    fn mode_pages(&self) -> Vec<ModePage> {
        Vec::new()
    }

    /// The block descriptor MODE SENSE returns for `pc` (unless DBD is set), if any.
    fn block_descriptor(&self, _pc: ModePageControl) -> Option<BlockDescriptor> {
        None
    }

    /// MEDIUM TYPE of the mode parameter header (SPC-4 §7.5.4).
    fn medium_type(&self) -> u8 {
        0
    }

    /// DEVICE-SPECIFIC PARAMETER of the mode parameter header (WP, buffered mode, ...).
    fn device_specific_parameter(&self) -> u8 {
        0
    }

    /// Applies a MODE SELECT whose pages were validated against the changeable masks. The
    /// control mode page is not included. `Err` rejects the whole parameter list.
    fn mode_select(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        params: &ModeSelectParams,
    ) -> ScsiResult<()> {
        if params.block_descriptors.is_empty() {
            Ok(())
        } else {
            // No block descriptor to change by default.
            Err(Sense::invalid_field_in_parameter_list(3, None))
        }
    }

    /// The device's log pages as (page, subpage) pairs (page 00h is the core's).
    fn log_pages(&self) -> Vec<(u8, u8)> {
        Vec::new()
    }

    /// The parameters of one log page listed by `log_pages`.
    fn log_page(
        &mut self,
        _page: u8,
        _subpage: u8,
        _pc: LogPageControl,
    ) -> Option<Vec<LogParameter>> {
        None
    }

    /// LOG SELECT with PCR = 1: reset the log parameters for `pc` (SPC-4 §6.7).
    fn log_reset(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        _pc: LogPageControl,
        _page: u8,
        _subpage: u8,
    ) -> ScsiResult<()> {
        Ok(())
    }

    /// LOG SELECT with a parameter list. Default: nothing is changeable.
    fn log_select(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        _pc: LogPageControl,
        _page: u8,
        _subpage: u8,
        _parameters: &[u8],
    ) -> ScsiResult<()> {
        Err(Sense::invalid_field_in_parameter_list(0, Some(5)))
    }

    /// The device's commands for REPORT SUPPORTED OPERATION CODES.
    fn supported_opcodes(&self) -> Vec<OpcodeDescriptor> {
        Vec::new()
    }

    /// How one of the device's commands is affected by reservations. Default: a write.
    fn access(&self, _cdb: &Cdb<'_>) -> Access {
        Access::Write
    }

    /// Executes a device-specific command; `None`: not mine (INVALID COMMAND OPERATION CODE).
    fn execute(&mut self, ctx: &mut DeviceContext<'_>, command: &Command<'_>) -> Option<Response>;

    /// Device side effects of a task management function (after the core's).
    fn task_management(&mut self, _ctx: &mut DeviceContext<'_>, _function: TaskManagement) {}

    /// The nexus is gone (after the core released its SPC-2 reservation).
    fn nexus_lost(&mut self, _nexus: &ItNexus) {}
}

/// Timestamp origin values (SPC-4 §6.38, table 243).
const TIMESTAMP_ORIGIN_SET_TIMESTAMP: u8 = 0b010;
const TIMESTAMP_ORIGIN_OUTSIDE: u8 = 0b011;

/// Logical unit state shared by all nexuses.
struct CoreState {
    uas: UnitAttentions,
    deferred: HashMap<ItNexus, Sense>,
    reservations: Reservations,
    d_sense: bool,
    timestamp_offset_ms: i64,
    timestamp_origin: u8,
}

impl CoreState {
    fn format(&self) -> SenseFormat {
        if self.d_sense {
            SenseFormat::Descriptor
        } else {
            SenseFormat::Fixed
        }
    }
}

/// The view of the logical unit a personality gets while executing.
pub struct DeviceContext<'a> {
    nexus: &'a ItNexus,
    core: &'a Mutex<CoreState>,
    clock: &'a TimestampClock,
}

impl DeviceContext<'_> {
    /// The I_T nexus of the command (or of the task management function).
    pub fn nexus(&self) -> &ItNexus {
        self.nexus
    }

    /// The sense format of autosense data (D_SENSE of the control mode page).
    pub fn sense_format(&self) -> SenseFormat {
        self.core.lock().format()
    }

    /// CHECK CONDITION with `sense` in this logical unit's format.
    pub fn check_condition(&self, sense: &Sense) -> Response {
        Response::check_condition(sense, self.sense_format())
    }

    /// GOOD with `data`, or CHECK CONDITION with the error's sense.
    pub fn respond(&self, result: ScsiResult<Bytes>) -> Response {
        match result {
            Ok(data) => Response::good(data),
            Err(sense) => self.check_condition(&sense),
        }
    }

    /// Establishes a unit attention for one nexus.
    pub fn raise_unit_attention(&mut self, nexus: &ItNexus, asc: Asc) {
        self.core.lock().uas.raise(nexus, asc);
    }

    /// Establishes a unit attention for every nexus, this one included (e.g. NOT READY TO
    /// READY CHANGE, MEDIUM MAY HAVE CHANGED after a load).
    pub fn raise_unit_attention_all(&mut self, asc: Asc) {
        self.core.lock().uas.raise_all(asc, None);
    }

    /// Establishes a unit attention for every nexus but this one.
    pub fn raise_unit_attention_others(&mut self, asc: Asc) {
        self.core.lock().uas.raise_all(asc, Some(self.nexus));
    }

    /// Queues a deferred error for this nexus (SPC-4 §4.5.5), reported on its next command.
    pub fn defer(&mut self, sense: Sense) {
        self.core
            .lock()
            .deferred
            .insert(self.nexus.clone(), sense.deferred());
    }

    /// Whether another nexus holds a reservation that excludes writes from this one.
    pub fn reserved_by_other(&self) -> bool {
        self.core.lock().reservations.reserved_by_other(self.nexus)
    }

    /// The logical unit's timestamp in milliseconds (SET TIMESTAMP applied).
    pub fn timestamp_ms(&self) -> u64 {
        let offset = self.core.lock().timestamp_offset_ms;
        (self.clock)().wrapping_add_signed(offset)
    }
}

/// A logical unit: the SPC core around a device personality.
pub struct ScsiDevice<P: Personality> {
    /// Read once at creation: asking the personality would wait for its lock while a
    /// long command runs.
    may_block: bool,
    /// Read once at creation, for the same reason.
    max_transfer_length: u32,
    personality: Mutex<P>,
    core: Mutex<CoreState>,
    clock: TimestampClock,
    transport_id: TransportIdEncoder,
    /// Called with the personality after every command and every `with_*` access, before
    /// its lock is released: publishes what a status display needs, so the display never
    /// waits for the lock behind a long command (a WRITE waiting for the store).
    observer: Option<Observer<P>>,
    /// When the command now holding the personality started, in microseconds since `born`
    /// plus one (0: no command runs): what a stuck-drive alert watches.
    busy_since_us: AtomicU64,
    born: Instant,
}

type Observer<P> = Box<dyn Fn(&P) + Send + Sync>;

impl<P: Personality> ScsiDevice<P> {
    /// A device around `personality` with the system clock.
    pub fn new(personality: P) -> Self {
        Self {
            may_block: personality.may_block(),
            max_transfer_length: personality.max_transfer_length(),
            personality: Mutex::new(personality),
            core: Mutex::new(CoreState {
                uas: UnitAttentions::default(),
                deferred: HashMap::new(),
                reservations: Reservations::default(),
                d_sense: false,
                timestamp_offset_ms: 0,
                timestamp_origin: TIMESTAMP_ORIGIN_OUTSIDE,
            }),
            clock: Arc::new(system_clock_ms),
            transport_id: Arc::new(default_transport_id),
            observer: None,
            busy_since_us: AtomicU64::new(0),
            born: Instant::now(),
        }
    }

    /// How long the command in progress has been running, `None` when none runs. Read
    /// without the personality's lock.
    pub fn busy_for(&self) -> Option<std::time::Duration> {
        match self.busy_since_us.load(Ordering::Relaxed) {
            0 => None,
            since => Some(
                self.born
                    .elapsed()
                    .saturating_sub(std::time::Duration::from_micros(since - 1)),
            ),
        }
    }

    /// Installs the observer (see the field) and calls it once for the initial state.
    pub fn with_observer(mut self, observer: impl Fn(&P) + Send + Sync + 'static) -> Self {
        observer(&self.personality.lock());
        self.observer = Some(Box::new(observer));
        self
    }

    fn observe(&self, personality: &P) {
        if let Some(observer) = &self.observer {
            observer(personality);
        }
    }

    /// The command with the personality locked: reservations, then SPC or the personality.
    fn execute_locked(
        &self,
        personality: &mut P,
        nexus: &ItNexus,
        opcode: u8,
        cdb: Cdb<'_>,
        spc: Option<SpcCommand>,
        request: &Request<'_>,
    ) -> Response {
        let access = match &spc {
            Some(command) => core_access(command),
            None => personality.access(&cdb),
        };
        if self.core.lock().reservations.conflicts(nexus, access) {
            return Response::status(Status::ReservationConflict);
        }
        if let Some(command) = spc {
            return self
                .execute_spc(personality, command, request)
                .unwrap_or_else(|sense| self.check(&sense));
        }
        let command = Command {
            cdb,
            data_out: &request.data_out,
            data_in_len: request.data_in_len,
            attribute: request.attribute,
        };
        if let Some(response) = personality.execute(&mut self.context(nexus), &command) {
            return response;
        }
        // SPC-4 §4.5.6: an unknown service action of a known operation code is a bad field.
        let known_opcode = self
            .descriptors(personality)
            .iter()
            .any(|d| d.opcode == opcode && d.service_action.is_some());
        if known_opcode && has_service_action(opcode) {
            self.check(&Sense::invalid_field_in_cdb(1, Some(4)))
        } else {
            self.check(&Sense::invalid_opcode())
        }
    }

    /// Replaces the clock (tests, simulated time).
    pub fn with_clock(mut self, clock: TimestampClock) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the TransportID encoder used by PERSISTENT RESERVE IN READ FULL STATUS; the
    /// default is transport-neutral (see [`default_transport_id`]).
    pub fn with_transport_id(mut self, encoder: TransportIdEncoder) -> Self {
        self.transport_id = encoder;
        self
    }

    /// Runs `f` on the personality (for the composition root and tests).
    pub fn with_personality<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        let mut personality = self.personality.lock();
        let result = f(&mut personality);
        self.observe(&personality);
        result
    }

    /// Runs `f` on the personality with a context for `nexus` (e.g. a medium changed by the
    /// library raises a unit attention to all nexuses).
    pub fn with_context<R>(
        &self,
        nexus: &ItNexus,
        f: impl FnOnce(&mut P, &mut DeviceContext<'_>) -> R,
    ) -> R {
        let mut personality = self.personality.lock();
        let mut ctx = self.context(nexus);
        let result = f(&mut personality, &mut ctx);
        self.observe(&personality);
        result
    }

    fn context<'a>(&'a self, nexus: &'a ItNexus) -> DeviceContext<'a> {
        DeviceContext {
            nexus,
            core: &self.core,
            clock: &self.clock,
        }
    }

    fn check(&self, sense: &Sense) -> Response {
        Response::check_condition(sense, self.core.lock().format())
    }

    /// SAM-5 §5.14: a pending unit attention (then a deferred error) is reported on any
    /// command but INQUIRY, REPORT LUNS and REQUEST SENSE, and the command is not executed.
    fn pending_condition(&self, nexus: &ItNexus, opcode: u8) -> Option<Response> {
        let reports_pending = !matches!(
            Opcode(opcode),
            Opcode::INQUIRY | Opcode::REPORT_LUNS | Opcode::REQUEST_SENSE
        );
        let mut core = self.core.lock();
        core.uas.touch(nexus);
        if reports_pending {
            let format = core.format();
            if let Some(asc) = core.uas.pop(nexus) {
                return Some(Response::check_condition(
                    &Sense::unit_attention(asc),
                    format,
                ));
            }
            if let Some(sense) = core.deferred.remove(nexus) {
                return Some(Response::check_condition(&sense, format));
            }
        }
        None
    }

    fn descriptors(&self, personality: &P) -> Vec<OpcodeDescriptor> {
        let mut all = opcodes::core_descriptors();
        all.extend(personality.supported_opcodes());
        all.sort_by_key(|d| (d.opcode, d.service_action));
        all.dedup_by_key(|d| (d.opcode, d.service_action));
        all
    }

    fn mode_pages(&self, personality: &P) -> Vec<ModePage> {
        let mut pages: Vec<ModePage> = personality
            .mode_pages()
            .into_iter()
            .filter(|p| !(p.page == 0x0A && p.subpage == 0))
            .collect();
        pages.push(mode::control_page(self.core.lock().d_sense));
        pages.sort_by_key(|p| (p.page, p.subpage));
        pages
    }

    fn execute_spc(
        &self,
        personality: &mut P,
        command: SpcCommand,
        request: &Request<'_>,
    ) -> ScsiResult<Response> {
        let nexus = request.nexus;
        let good = |data: Vec<u8>, allocation_length: usize| {
            Ok(Response::good(inquiry::truncate(data, allocation_length)))
        };
        match command {
            SpcCommand::Inquiry {
                evpd,
                page,
                allocation_length,
            } => {
                let identity = personality.identity();
                let data = if evpd {
                    let extra = personality.vpd_pages();
                    inquiry::vpd(identity, page, nexus, &extra, |p| personality.vpd_page(p))?
                } else {
                    inquiry::standard(identity)
                };
                good(data, usize::from(allocation_length))
            }
            SpcCommand::TestUnitReady => {
                personality.ready()?;
                Ok(Response::good_empty())
            }
            SpcCommand::RequestSense {
                desc,
                allocation_length,
            } => {
                // SPC-4 §6.39: report (and clear) a pending unit attention or deferred error,
                // else why the unit is not ready, else NO SENSE.
                let pending = {
                    let mut core = self.core.lock();
                    core.uas
                        .pop(nexus)
                        .map(Sense::unit_attention)
                        .or_else(|| core.deferred.remove(nexus))
                };
                let sense = pending
                    .or_else(|| personality.ready().err())
                    .unwrap_or_else(Sense::no_sense);
                let format = if desc {
                    SenseFormat::Descriptor
                } else {
                    SenseFormat::Fixed
                };
                good(sense.encode(format), usize::from(allocation_length))
            }
            SpcCommand::ModeSense {
                ten,
                dbd,
                llbaa,
                pc,
                page,
                subpage,
                allocation_length,
            } => {
                let pc = ModePageControl::from_bits(pc);
                if pc == ModePageControl::Saved {
                    return Err(mode::saving_not_supported());
                }
                let pages = self.mode_pages(personality);
                let selected = mode::select_pages(&pages, page, subpage)?;
                let mut descriptors = Vec::new();
                if !dbd && let Some(bd) = personality.block_descriptor(pc) {
                    let direct = personality.identity().peripheral_type == 0;
                    bd.encode(ten && llbaa, direct, &mut descriptors);
                }
                let mut body = Vec::new();
                for p in selected {
                    p.encode(pc, &mut body);
                }
                let medium = personality.medium_type();
                let dsp = personality.device_specific_parameter();
                let mut data = if ten {
                    let long = u8::from(llbaa && !descriptors.is_empty());
                    let bd_len = u16::try_from(descriptors.len()).unwrap_or(0).to_be_bytes();
                    vec![0, 0, medium, dsp, long, 0, bd_len[0], bd_len[1]]
                } else {
                    vec![0, medium, dsp, u8::try_from(descriptors.len()).unwrap_or(0)]
                };
                data.extend_from_slice(&descriptors);
                data.extend_from_slice(&body);
                // MODE DATA LENGTH excludes itself (SPC-4 §7.5.4).
                if ten {
                    let len = u16::try_from(data.len() - 2).unwrap_or(u16::MAX);
                    data[..2].copy_from_slice(&len.to_be_bytes());
                } else {
                    data.truncate(256);
                    data[0] = (data.len() - 1) as u8;
                }
                good(data, usize::from(allocation_length))
            }
            SpcCommand::ModeSelect {
                ten,
                sp,
                parameter_list_length,
                ..
            } => {
                if sp {
                    // SPC-4 §6.11: SP = 1 without saveable pages is an invalid CDB field
                    // (39h/00h is MODE SENSE's answer to PC = 11b).
                    return Err(Sense::invalid_field_in_cdb(1, Some(0)));
                }
                let length = usize::from(parameter_list_length);
                if length == 0 {
                    return Ok(Response::good_empty());
                }
                let list = request
                    .data_out
                    .get(..length)
                    .ok_or(Sense::parameter_list_length_error())?;
                let pages = self.mode_pages(personality);
                let direct = personality.identity().peripheral_type == 0;
                let mut params = parse_mode_select(list, ten, direct, &pages)?;
                let control = params
                    .pages
                    .iter()
                    .position(|&(p, s, _)| p == 0x0A && s == 0)
                    .map(|i| params.pages.remove(i));
                personality.mode_select(&mut self.context(nexus), &params)?;
                let mut core = self.core.lock();
                if let Some((_, _, values)) = control {
                    core.d_sense = values.first().is_some_and(|b| b & 0x04 != 0);
                }
                // SPC-4 §7.5.1: other nexuses learn of the change.
                core.uas
                    .raise_all(Asc::MODE_PARAMETERS_CHANGED, Some(nexus));
                Ok(Response::good_empty())
            }
            SpcCommand::LogSense {
                ppc,
                sp,
                pc,
                page,
                subpage,
                parameter_pointer,
                allocation_length,
            } => {
                if sp {
                    return Err(Sense::invalid_field_in_cdb(1, Some(0)));
                }
                if ppc {
                    return Err(Sense::invalid_field_in_cdb(1, Some(1)));
                }
                let pages = personality.log_pages();
                let data = match (page, subpage) {
                    (0, 0) => log::supported_pages(&pages),
                    (0, 0xFF) => log::supported_pages_and_subpages(&pages),
                    _ if pages.contains(&(page, subpage)) => {
                        let params = personality
                            .log_page(page, subpage, LogPageControl::from_bits(pc))
                            .ok_or(Sense::invalid_field_in_cdb(2, Some(5)))?;
                        let body = log::encode_parameters(&params, parameter_pointer)?;
                        log::encode_page(page, subpage, &body)
                    }
                    _ if pages.iter().any(|&(p, _)| p == page) => {
                        return Err(Sense::invalid_field_in_cdb(3, Some(7)));
                    }
                    _ => return Err(Sense::invalid_field_in_cdb(2, Some(5))),
                };
                good(data, usize::from(allocation_length))
            }
            SpcCommand::LogSelect {
                pcr,
                sp,
                pc,
                page,
                subpage,
                parameter_list_length,
            } => {
                if sp {
                    return Err(Sense::invalid_field_in_cdb(1, Some(0)));
                }
                let pc = LogPageControl::from_bits(pc);
                let length = usize::from(parameter_list_length);
                let mut ctx = self.context(nexus);
                if pcr {
                    if length != 0 {
                        return Err(Sense::invalid_field_in_cdb(7, Some(7)));
                    }
                    personality.log_reset(&mut ctx, pc, page, subpage)?;
                } else if length != 0 {
                    let list = request
                        .data_out
                        .get(..length)
                        .ok_or(Sense::parameter_list_length_error())?;
                    personality.log_select(&mut ctx, pc, page, subpage, list)?;
                } else {
                    return Ok(Response::good_empty());
                }
                ctx.raise_unit_attention_others(Asc::LOG_PARAMETERS_CHANGED);
                Ok(Response::good_empty())
            }
            SpcCommand::ReportLuns {
                select_report,
                allocation_length,
            } => {
                // Without a LunTable this unit only knows itself, as LUN 0.
                let count = match select_report {
                    0 | 2 => 1u32,
                    1 => 0,
                    _ => return Err(Sense::invalid_field_in_cdb(2, Some(7))),
                };
                let mut data = (count * 8).to_be_bytes().to_vec();
                data.resize(8 + 8 * count as usize, 0);
                good(
                    data,
                    usize::try_from(allocation_length).unwrap_or(usize::MAX),
                )
            }
            SpcCommand::ReportSupportedOpcodes {
                rctd,
                reporting_options,
                opcode,
                service_action,
                allocation_length,
            } => {
                let descriptors = self.descriptors(personality);
                let data = if reporting_options == 0 {
                    opcodes::report_all(&descriptors, rctd)
                } else {
                    opcodes::report_one(
                        &descriptors,
                        reporting_options,
                        opcode,
                        service_action,
                        rctd,
                    )?
                };
                good(
                    data,
                    usize::try_from(allocation_length).unwrap_or(usize::MAX),
                )
            }
            SpcCommand::ReportTimestamp { allocation_length } => {
                let core = self.core.lock();
                let now = (self.clock)().wrapping_add_signed(core.timestamp_offset_ms);
                // SPC-4 §6.38, table 242: the timestamp is 48 bits.
                let mut data = vec![0, 0x0A, core.timestamp_origin, 0];
                data.extend_from_slice(&now.to_be_bytes()[2..]);
                data.extend_from_slice(&[0, 0]);
                good(
                    data,
                    usize::try_from(allocation_length).unwrap_or(usize::MAX),
                )
            }
            SpcCommand::SetTimestamp {
                parameter_list_length,
            } => {
                if parameter_list_length == 0 {
                    return Ok(Response::good_empty());
                }
                // SPC-4 §6.45, table 271: 12 bytes, TIMESTAMP in bytes 4..10.
                let list = request
                    .data_out
                    .get(..12)
                    .filter(|_| parameter_list_length >= 12);
                let list = list.ok_or(Sense::parameter_list_length_error())?;
                let set = list[4..10]
                    .iter()
                    .fold(0u64, |a, &b| (a << 8) | u64::from(b));
                let mut core = self.core.lock();
                core.timestamp_offset_ms = set.wrapping_sub((self.clock)()) as i64;
                core.timestamp_origin = TIMESTAMP_ORIGIN_SET_TIMESTAMP;
                core.uas.raise_all(Asc::TIMESTAMP_CHANGED, Some(nexus));
                Ok(Response::good_empty())
            }
            SpcCommand::Reserve => {
                let result = self.core.lock().reservations.reserve(nexus);
                reservation_response(result)
            }
            SpcCommand::Release => {
                let result = self.core.lock().reservations.release(nexus);
                reservation_response(result)
            }
            SpcCommand::PersistentReserveIn {
                service_action,
                allocation_length,
            } => {
                let data = self
                    .core
                    .lock()
                    .reservations
                    .persistent_reserve_in(service_action, &*self.transport_id);
                good(data, usize::from(allocation_length))
            }
            SpcCommand::PersistentReserveOut {
                service_action,
                scope,
                pr_type,
                parameter_list_length,
            } => {
                let mut core = self.core.lock();
                let CoreState {
                    uas, reservations, ..
                } = &mut *core;
                let cdb = PrOutCdb {
                    action: service_action,
                    scope,
                    pr_type,
                    parameter_list_length,
                };
                let result =
                    reservations.persistent_reserve_out(nexus, cdb, &request.data_out, uas);
                reservation_response(result)
            }
        }
    }
}

fn reservation_response(result: Result<(), ReservationError>) -> ScsiResult<Response> {
    match result {
        Ok(()) => Ok(Response::good_empty()),
        Err(ReservationError::Conflict) => Ok(Response::status(Status::ReservationConflict)),
        Err(ReservationError::Check(sense)) => Err(sense),
    }
}

/// How the core's own commands are affected by reservations (SPC-2 §5.5.1; SPC-4 §5.9.1).
fn core_access(command: &SpcCommand) -> Access {
    match command {
        SpcCommand::Inquiry { .. }
        | SpcCommand::RequestSense { .. }
        | SpcCommand::ReportLuns { .. }
        | SpcCommand::LogSense { .. }
        | SpcCommand::PersistentReserveIn { .. }
        | SpcCommand::ReportSupportedOpcodes { .. }
        | SpcCommand::ReportTimestamp { .. }
        // RESERVE and RELEASE apply their own rules.
        | SpcCommand::Reserve
        | SpcCommand::Release => Access::Always,
        SpcCommand::TestUnitReady | SpcCommand::PersistentReserveOut { .. } => {
            Access::PersistentAllowed
        }
        SpcCommand::ModeSense { .. } => Access::Read,
        SpcCommand::ModeSelect { .. }
        | SpcCommand::LogSelect { .. }
        | SpcCommand::SetTimestamp { .. } => Access::Write,
    }
}

fn system_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The transport-neutral TransportID: FORMAT CODE 00b, PROTOCOL IDENTIFIER Fh ("no specific
/// protocol"), a 2-byte length and the initiator port name, NUL-terminated and padded to a
/// multiple of 4 bytes (the shape of SPC-4 §7.6.4.6, without claiming a protocol). The
/// transport installs its own with [`ScsiDevice::with_transport_id`].
pub fn default_transport_id(nexus: &ItNexus) -> Vec<u8> {
    let mut name = nexus.initiator_port.as_bytes().to_vec();
    name.truncate(u16::MAX as usize - 8);
    name.push(0);
    while !name.len().is_multiple_of(4) {
        name.push(0);
    }
    let mut out = vec![0x0F, 0];
    out.extend_from_slice(&u16::try_from(name.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&name);
    out
}

impl<P: Personality> LogicalUnit for ScsiDevice<P> {
    fn may_block(&self) -> bool {
        self.may_block
    }

    fn max_data_out(&self) -> u32 {
        self.max_transfer_length
    }

    fn refuse_data_out(&self, request: Request<'_>) -> Response {
        let Some(&opcode) = request.cdb.first() else {
            return self.check(&Sense::invalid_opcode());
        };
        if let Some(pending) = self.pending_condition(request.nexus, opcode) {
            return pending;
        }
        let cdb = match Cdb::parse(request.cdb) {
            Ok(cdb) => cdb,
            Err(error) => return self.check(&error.into()),
        };
        let sense = self.personality.lock().transfer_too_long(&cdb);
        self.check(&sense)
    }

    fn execute(&self, request: Request<'_>) -> Response {
        let nexus = request.nexus;
        let Some(&opcode) = request.cdb.first() else {
            return self.check(&Sense::invalid_opcode());
        };
        if let Some(pending) = self.pending_condition(nexus, opcode) {
            return pending;
        }
        let cdb = match Cdb::parse(request.cdb) {
            Ok(cdb) => cdb,
            Err(error) => return self.check(&error.into()),
        };
        let spc = match SpcCommand::parse(&cdb) {
            Ok(spc) => spc,
            Err(sense) => return self.check(&sense),
        };
        let mut personality = self.personality.lock();
        let started = self.born.elapsed().as_micros() as u64 + 1;
        self.busy_since_us.store(started, Ordering::Relaxed);
        let response = self.execute_locked(&mut personality, nexus, opcode, cdb, spc, &request);
        self.busy_since_us.store(0, Ordering::Relaxed);
        self.observe(&personality);
        response
    }

    fn task_management(&self, function: TaskManagement, nexus: &ItNexus) {
        {
            let mut core = self.core.lock();
            match function {
                TaskManagement::AbortTaskSet | TaskManagement::ClearAca => {}
                // SAM-5 §7.4: with one task set shared by all nexuses (TST = 000b).
                TaskManagement::ClearTaskSet => core
                    .uas
                    .raise_all(Asc::COMMANDS_CLEARED_BY_ANOTHER_INITIATOR, Some(nexus)),
                TaskManagement::LogicalUnitReset | TaskManagement::TargetWarmReset => {
                    reset(&mut core, Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
                }
                TaskManagement::TargetColdReset => reset(&mut core, Asc::POWER_ON_OCCURRED),
                TaskManagement::ItNexusReset => {
                    core.reservations.release_spc2_of(nexus);
                    core.deferred.remove(nexus);
                    core.uas.raise(nexus, Asc::I_T_NEXUS_LOSS_OCCURRED);
                }
            }
        }
        let mut personality = self.personality.lock();
        personality.task_management(&mut self.context(nexus), function);
        self.observe(&personality);
    }

    fn nexus_lost(&self, nexus: &ItNexus) {
        {
            let mut core = self.core.lock();
            core.reservations.release_spc2_of(nexus);
            core.deferred.remove(nexus);
            // SAM-5 §6.3.4: the nexus, when it returns, learns that its state was lost.
            core.uas.raise(nexus, Asc::I_T_NEXUS_LOSS_OCCURRED);
        }
        self.personality.lock().nexus_lost(nexus);
    }
}

/// Logical unit reset side effects (SAM-5 §6.3.3): unit attention to every nexus, SPC-2
/// reservation released (persistent reservations stay), deferred errors dropped.
fn reset(core: &mut CoreState, asc: Asc) {
    core.uas.raise_all(asc, None);
    core.reservations.release_spc2();
    core.deferred.clear();
}
