//! [`TapeDrive`]: the state of one drive and its [`Personality`] implementation, which routes
//! each SSC command to its handler (`io.rs`, `format.rs`, `pages.rs`, `attributes.rs`,
//! `info.rs`).

use std::collections::HashSet;

use reel_media::{Cartridge, CartridgeInfo, PartitionStore, UnixTime};
use reel_scsi::{
    Access, Asc, BlockDescriptor, Cdb, Command, DeviceContext, Identity, ItNexus, LogPageControl,
    LogParameter, ModePage, ModePageControl, ModeSelectParams, OpcodeDescriptor, Personality,
    Response, ScsiResult, Sense, SenseKey, TaskManagement,
};

use crate::encryption::{self, Encryption, NextBlock};
use crate::errors::{self, InsertError, RemoveError};

/// Fixed-block transfers may move this many of the largest records in one command.
pub const FIXED_TRANSFER_FACTOR: u32 = 2;

/// The most bytes one READ or WRITE moves: the largest record READ BLOCK LIMITS reports
/// (`MAX_RECORD_LEN`) times [`FIXED_TRANSFER_FACTOR`]. Bounds what a command makes the drive
/// (and the transport, for Data-Out) hold.
pub const MAX_TRANSFER_LENGTH: u32 = reel_media::MAX_RECORD_LEN * FIXED_TRANSFER_FACTOR;
use crate::format::PartitionSettings;
use crate::model::DriveModel;
use crate::physical::{PacedCommand, Physical};

/// Persists a cartridge's info (MAM, counters, write protection) for the drive's owner.
pub type Saver<S> = Box<dyn FnMut(&Cartridge<S>) -> Result<(), String> + Send>;

/// Makes the store of a new partition when FORMAT MEDIUM adds partitions.
pub type PartitionFactory<S> =
    Box<dyn FnMut(&CartridgeInfo, u8) -> Result<S, <S as PartitionStore>::Error> + Send>;

/// A command's outcome: a response (possibly CHECK CONDITION with data) or sense.
pub(crate) type Reply = Result<Response, Sense>;

/// What the drive is doing, for the console: the last medium command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Activity {
    Idle,
    Reading,
    Writing,
    Positioning,
    Rewinding,
    Erasing,
    Formatting,
}

/// Whether a cartridge is in the drive and threaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DriveState {
    /// No cartridge: NOT READY, MEDIUM NOT PRESENT.
    Empty,
    /// Threaded and ready; `activity` is the last medium command.
    Loaded { activity: Activity },
    /// In the drive but unthreaded after UNLOAD: NOT READY, INITIALIZING COMMAND REQUIRED
    /// until LOAD, or until the changer takes it.
    Unloaded,
}

/// Counters since the drive was created (for metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriveStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_commands: u64,
    pub write_commands: u64,
    pub filemarks_written: u64,
    pub loads: u64,
}

/// Counters of the log pages 0Ch, 1Bh and 32h, cleared by LOG SELECT (PCR = 1).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LogCounters {
    pub bytes_from_host: u64,
    pub bytes_to_host: u64,
}

/// One SSC-4 tape drive with an LTO identity: a [`Personality`] for
/// [`reel_scsi::ScsiDevice`] over a [`Cartridge`] when one is inserted.
pub struct TapeDrive<S: PartitionStore + Send> {
    pub(crate) model: &'static DriveModel,
    pub(crate) identity: Identity,
    pub(crate) medium: Option<Cartridge<S>>,
    /// The cartridge is threaded (ready); false after UNLOAD.
    pub(crate) threaded: bool,
    saver: Option<Saver<S>>,
    pub(crate) factory: Option<PartitionFactory<S>>,
    /// Block length of the mode block descriptor: 0 is variable-block mode.
    pub(crate) block_length: u32,
    /// BUFFERED MODE of the mode parameter header (0 or 1).
    pub(crate) buffered_mode: u8,
    /// Data compression enabled (DCE; reported only: the chunk store compresses).
    pub(crate) compression: bool,
    /// Informational exceptions control page bits: DEXCPT, TEST, MRIE.
    pub(crate) dexcpt: bool,
    pub(crate) ie_test: bool,
    pub(crate) mrie: u8,
    /// Medium partition page values set by MODE SELECT, applied by FORMAT MEDIUM.
    pub(crate) pending_partitions: Option<PartitionSettings>,
    /// Nexuses holding PREVENT MEDIUM REMOVAL (SPC-4 §6.13).
    prevent: HashSet<ItNexus>,
    /// TapeAlert flags 1..=64 as bit `flag - 1`; reading log page 2Eh clears them.
    pub(crate) tape_alerts: u64,
    /// SEND DIAGNOSTIC asked for the supported pages list (RECEIVE DIAGNOSTIC, PCV = 0).
    pub(crate) diagnostic_page_list: bool,
    pub(crate) activity: Activity,
    pub(crate) stats: DriveStats,
    pub(crate) log: LogCounters,
    /// Reused buffer for the encrypted record SECURITY PROTOCOL IN looks at (READ hands the
    /// store's own buffers on instead: `io.rs`).
    pub(crate) buffer: Vec<u8>,
    /// Tape data encryption parameters and key (SSC-4 §4.2.27): in memory only.
    pub(crate) encryption: Encryption,
    /// The drive dump the last forced-dump SEND DIAGNOSTIC took (IBM, READ BUFFER buffer 1).
    pub(crate) forced_dump: Option<Vec<u8>>,
    /// PROGRAMMABLE EARLY WARNING SIZE in MB (mode page 10h/01h, SSC-4 §4.2.5; 0: none).
    pub(crate) pews_mb: u16,
    /// The programmable early warning was reported for the write position: once per crossing.
    pub(crate) pew_reported: bool,
    /// The physical drive this one emulates the timing of, when emulation is on.
    physical: Option<Physical>,
}

/// TapeAlert flag 09h, "write protect": a write was attempted on a protected cartridge.
pub(crate) const TAPE_ALERT_WRITE_PROTECT: u8 = 0x09;

impl<S: PartitionStore + Send> TapeDrive<S> {
    /// An empty drive of `model` with serial number `serial` (VPD 80h).
    pub fn new(model: &'static DriveModel, serial: &str) -> Self {
        let mut identity = Identity::new(
            0x01,
            model.vendor(),
            model.product(),
            model.revision(),
            serial,
            naa_of(model, serial),
        );
        identity.removable = true;
        // SSC-4 (0520h) after the core's SAM-5 and SPC-4 descriptors.
        identity.version_descriptors = vec![0x0520];
        Self {
            model,
            identity,
            medium: None,
            threaded: false,
            saver: None,
            factory: None,
            block_length: 0,
            buffered_mode: 1,
            compression: true,
            dexcpt: false,
            ie_test: false,
            mrie: 3,
            pending_partitions: None,
            prevent: HashSet::new(),
            tape_alerts: 0,
            diagnostic_page_list: false,
            activity: Activity::Idle,
            stats: DriveStats::default(),
            log: LogCounters::default(),
            buffer: Vec::new(),
            encryption: Encryption::default(),
            forced_dump: None,
            pews_mb: 0,
            pew_reported: false,
            physical: None,
        }
    }

    /// Called after every synchronising point (WRITE FILEMARKS without IMMED, REWIND,
    /// UNLOAD, ERASE, FORMAT MEDIUM, WRITE ATTRIBUTE) and on removal, so the owner can
    /// persist the cartridge's info (MAM, counters, write protection).
    pub fn with_saver(mut self, saver: Saver<S>) -> Self {
        self.saver = Some(saver);
        self
    }

    /// Makes partition stores when FORMAT MEDIUM creates more partitions than the cartridge
    /// has. Without one such a FORMAT MEDIUM fails (HARDWARE ERROR, INTERNAL TARGET FAILURE).
    pub fn with_partition_factory(mut self, factory: PartitionFactory<S>) -> Self {
        self.factory = Some(factory);
        self
    }

    /// Replaces the NAA designator of VPD page 83h (default: a locally assigned NAA 3h value
    /// derived from the model and serial number).
    pub fn with_naa(mut self, naa: u64) -> Self {
        self.identity.naa = naa;
        self
    }

    /// The serial number (VPD 80h; the changer reports it in DVCID).
    pub fn serial(&self) -> &str {
        &self.identity.serial
    }

    /// The emulated model.
    pub fn model(&self) -> &'static DriveModel {
        self.model
    }

    /// The cartridge in the drive, threaded or not.
    pub fn medium(&self) -> Option<&Cartridge<S>> {
        self.medium.as_ref()
    }

    /// Empty, loaded (with the last activity) or unloaded.
    pub fn state(&self) -> DriveState {
        match (&self.medium, self.threaded) {
            (None, _) => DriveState::Empty,
            (Some(_), true) => DriveState::Loaded {
                activity: self.activity,
            },
            (Some(_), false) => DriveState::Unloaded,
        }
    }

    /// Counters since the drive was created.
    pub fn stats(&self) -> DriveStats {
        self.stats
    }

    /// Whether some nexus holds PREVENT MEDIUM REMOVAL.
    pub fn removal_prevented(&self) -> bool {
        !self.prevent.is_empty()
    }

    /// A cartridge enters the drive (the changer's MOVE MEDIUM): it is loaded and threaded,
    /// and every I_T nexus gets NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED (28h/00h).
    /// Handed back when the drive is full or cannot read the cartridge's generation.
    // The cartridge goes back by value on failure, as the changer's API wants it.
    #[allow(clippy::result_large_err)]
    pub fn insert(
        &mut self,
        mut cartridge: Cartridge<S>,
        ctx: &mut DeviceContext<'_>,
    ) -> Result<(), (Cartridge<S>, InsertError)> {
        if self.medium.is_some() {
            return Err((cartridge, InsertError::Occupied));
        }
        let media = cartridge.media_type();
        if !self.model.can_read(media) {
            return Err((cartridge, InsertError::Incompatible { media }));
        }
        if let Err(e) = cartridge.load(now(ctx)) {
            let message = e.to_string();
            return Err((cartridge, InsertError::Load(message)));
        }
        self.medium = Some(cartridge);
        self.threaded = true;
        self.pending_partitions = None;
        self.pew_reported = false;
        self.activity = Activity::Idle;
        self.stats.loads += 1;
        if let Some(physical) = self.physical.as_mut() {
            physical.inserted();
        }
        ctx.raise_unit_attention_all(Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED);
        Ok(())
    }

    /// The changer takes the cartridge out. Refused while any nexus prevents medium removal;
    /// otherwise a threaded cartridge is unloaded (synchronised, rewound), the saver is
    /// called and the cartridge returned. The drive then reports NOT READY, MEDIUM NOT
    /// PRESENT.
    pub fn remove(&mut self, _ctx: &mut DeviceContext<'_>) -> Result<Cartridge<S>, RemoveError> {
        let Some(cartridge) = self.medium.as_mut() else {
            return Err(RemoveError::Empty);
        };
        if !self.prevent.is_empty() {
            return Err(RemoveError::Prevented);
        }
        if self.threaded {
            cartridge
                .unload()
                .map_err(|e| RemoveError::Unload(e.to_string()))?;
            self.threaded = false;
            self.encryption.medium_demounted();
        }
        if let Some(saver) = self.saver.as_mut() {
            saver(cartridge).map_err(RemoveError::Save)?;
        }
        self.pending_partitions = None;
        self.activity = Activity::Idle;
        self.medium.take().ok_or(RemoveError::Empty)
    }

    /// The threaded cartridge, or why the drive is not ready.
    pub(crate) fn ready_cartridge(&mut self) -> Result<&mut Cartridge<S>, Sense> {
        match (self.medium.as_mut(), self.threaded) {
            (None, _) => Err(errors::not_present()),
            (Some(_), false) => Err(errors::not_threaded()),
            (Some(c), true) => Ok(c),
        }
    }

    /// The threaded cartridge and the encryption settings, borrowed together for a READ.
    pub(crate) fn cartridge_and_encryption(
        &mut self,
    ) -> Result<(&mut Cartridge<S>, &Encryption), Sense> {
        match (self.medium.as_mut(), self.threaded) {
            (None, _) => Err(errors::not_present()),
            (Some(_), false) => Err(errors::not_threaded()),
            (Some(c), true) => Ok((c, &self.encryption)),
        }
    }

    /// The cartridge in the drive, threaded or not (cartridge memory is readable either way).
    pub(crate) fn present_cartridge(&mut self) -> Result<&mut Cartridge<S>, Sense> {
        self.medium.as_mut().ok_or_else(errors::not_present)
    }

    /// A write to the threaded cartridge is allowed: write protect tab (DATA PROTECT, WRITE
    /// PROTECTED; also raises TapeAlert flag 09h) and a generation the drive only reads (DATA
    /// PROTECT, CANNOT WRITE MEDIUM - INCOMPATIBLE FORMAT). WORM rules are the model's.
    pub(crate) fn writable_cartridge(&mut self) -> Result<&mut Cartridge<S>, Sense> {
        let model = self.model;
        let cartridge = match (self.medium.as_mut(), self.threaded) {
            (None, _) => return Err(errors::not_present()),
            (Some(_), false) => return Err(errors::not_threaded()),
            (Some(c), true) => c,
        };
        if cartridge.is_write_protected() {
            self.tape_alerts |= 1 << (TAPE_ALERT_WRITE_PROTECT - 1);
            return Err(errors::write_protected());
        }
        if !model.can_write(cartridge.media_type()) {
            return Err(errors::cannot_write_generation());
        }
        Ok(cartridge)
    }

    /// Whether the loaded cartridge cannot be written (WP bit of the mode header).
    pub(crate) fn write_protected(&self) -> bool {
        self.medium
            .as_ref()
            .is_some_and(|c| c.is_write_protected() || !self.model.can_write(c.media_type()))
    }

    /// Makes everything written to the cartridge durable and saves its state, as a
    /// synchronising point does, without moving it (a clean server stop). No-op when empty.
    pub fn flush(&mut self) -> Result<(), String> {
        if let Some(cartridge) = self.medium.as_mut() {
            cartridge.sync().map_err(|e| e.to_string())?;
        }
        self.save()
            .map_err(|_| "the cartridge state could not be saved".to_string())
    }

    /// Calls the saver (after a synchronising point or a cartridge memory change).
    pub(crate) fn save(&mut self) -> Result<(), Sense> {
        match (self.saver.as_mut(), self.medium.as_ref()) {
            (Some(saver), Some(cartridge)) => {
                saver(cartridge).map_err(|_| Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR))
            }
            _ => Ok(()),
        }
    }

    /// Turns the physical model on (`Some`) or off for this drive (issue 17, `physical.rs`).
    pub fn emulate(&mut self, spec: Option<&'static reel_drivemodel::DriveSpec>) {
        self.physical = spec.map(Physical::new);
    }

    /// The physical model's state, when the drive emulates one.
    pub fn physical(
        &self,
    ) -> Option<(
        &'static reel_drivemodel::DriveSpec,
        reel_drivemodel::DriveStats,
    )> {
        self.physical.as_ref().map(|p| (p.spec(), p.stats()))
    }

    /// Waits as the physical drive would have for a command that succeeded.
    fn pace(&mut self, arrived: std::time::Duration, command: &Command<'_>, response: &Response) {
        let Some(mut paced) = PacedCommand::of(&command.cdb, command.data_out, self.block_length)
        else {
            return;
        };
        if let PacedCommand::Move { object } = &mut paced {
            *object = self
                .medium
                .as_ref()
                .and_then(|c| c.position().ok())
                .map_or(0, |p| p.object);
        }
        let compression = self.compression;
        if let Some(physical) = self.physical.as_mut() {
            physical.pace(arrived, paced, response, compression);
        }
    }

    fn dispatch(&mut self, ctx: &mut DeviceContext<'_>, command: &Command<'_>) -> Option<Reply> {
        let cdb = &command.cdb;
        Some(match cdb.opcode().0 {
            0x01 => self.rewind(ctx, cdb),
            0x04 => self.format_medium(ctx, cdb),
            0x05 => self.read_block_limits(cdb),
            0x08 => self.read(ctx, cdb),
            0x0A => self.write(ctx, cdb, command.data_out),
            0x0B => self.set_capacity(ctx, cdb),
            0x10 => self.write_filemarks(ctx, cdb),
            0x11 | 0x91 => self.space(cdb),
            0x19 => self.erase(ctx, cdb),
            0x1B => self.load_unload(ctx, cdb),
            0x1C => self.receive_diagnostic(cdb),
            0x1D => self.send_diagnostic(cdb, command.data_out),
            0x1E => self.prevent_allow(ctx, cdb),
            0x2B | 0x92 => self.locate(ctx, cdb),
            0x34 => self.read_position(cdb),
            0x3C => self.read_buffer(cdb),
            0x44 => self.report_density_support(cdb),
            0x82 => self.allow_overwrite(cdb),
            0x8C => self.read_attribute(cdb),
            0x8D => self.write_attribute(cdb, command.data_out),
            0xA2 => self.security_protocol_in(cdb),
            0xB5 => self
                .encryption
                .security_protocol_out(cdb, command.data_out)
                .map(|()| Response::good_empty()),
            _ => return None,
        })
    }

    /// SECURITY PROTOCOL IN (SPC-4 §6.30): the tape data encryption pages (`encryption.rs`).
    fn security_protocol_in(&mut self, cdb: &Cdb<'_>) -> Reply {
        let medium = self.medium.is_some() && self.threaded;
        let data = if encryption::wants_next_block(cdb) && medium {
            let mut sealed = std::mem::take(&mut self.buffer);
            let cartridge = self.ready_cartridge()?;
            let object = cartridge
                .position()
                .map_err(|e| errors::media(&e, errors::Op::Read, 0))?
                .object;
            let kind = cartridge
                .next_object()
                .map_err(|e| errors::media(&e, errors::Op::Read, 0))?;
            sealed.clear();
            if let Some(reel_media::ObjectKind::EncryptedRecord { .. }) = kind {
                // An encrypted record is read whole without moving (ReadOutcome::Encrypted).
                cartridge
                    .read(0, &mut sealed)
                    .map_err(|e| errors::media(&e, errors::Op::Read, 0))?;
            }
            let next = NextBlock {
                object,
                kind,
                sealed: &sealed,
            };
            let data = self
                .encryption
                .security_protocol_in(cdb, medium, Some(next));
            self.buffer = sealed;
            data?
        } else {
            self.encryption.security_protocol_in(cdb, medium, None)?
        };
        Ok(Response::good(data))
    }

    fn prevent_allow(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        // SPC-4 §6.13: PREVENT 00b allows, 01b prevents; 1xb are obsolete.
        match cdb.byte(4) & 0x03 {
            0 => {
                self.prevent.remove(ctx.nexus());
            }
            1 => {
                self.prevent.insert(ctx.nexus().clone());
            }
            _ => return Err(Sense::invalid_field_in_cdb(4, Some(1))),
        }
        Ok(Response::good_empty())
    }
}

/// The logical unit's clock as the cartridge model's time.
pub(crate) fn now(ctx: &DeviceContext<'_>) -> UnixTime {
    UnixTime(ctx.timestamp_ms() / 1000)
}

/// A locally assigned NAA (3h, SPC-4 §7.8.6.6.3) from an FNV-1a hash of model and serial.
fn naa_of(model: &DriveModel, serial: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in model.name().bytes().chain([0]).chain(serial.bytes()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (0x3 << 60) | (hash >> 4)
}

impl<S: PartitionStore + Send> Personality for TapeDrive<S> {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn max_transfer_length(&self) -> u32 {
        MAX_TRANSFER_LENGTH
    }

    /// SSC-4 READ(6)/WRITE(6): a transfer the drive cannot take is an invalid TRANSFER
    /// LENGTH (bytes 2–4), as for a variable block beyond READ BLOCK LIMITS.
    fn transfer_too_long(&self, cdb: &Cdb<'_>) -> Sense {
        match cdb.opcode().0 {
            0x08 | 0x0A => Sense::invalid_field_in_cdb(2, None),
            _ => Sense::illegal_request(Asc::INVALID_FIELD_IN_CDB),
        }
    }

    fn ready(&self) -> ScsiResult<()> {
        match (&self.medium, self.threaded) {
            (None, _) => Err(errors::not_present()),
            (Some(_), false) => Err(errors::not_threaded()),
            (Some(_), true) => Ok(()),
        }
    }

    fn vpd_pages(&self) -> Vec<u8> {
        crate::info::VPD_PAGES.to_vec()
    }

    fn vpd_page(&self, page: u8) -> Option<Vec<u8>> {
        self.vpd(page)
    }

    fn mode_pages(&self) -> Vec<ModePage> {
        self.pages()
    }

    fn block_descriptor(&self, pc: ModePageControl) -> Option<BlockDescriptor> {
        Some(self.descriptor(pc))
    }

    fn medium_type(&self) -> u8 {
        self.medium
            .as_ref()
            .map_or(0, |c| crate::model::medium_type_code(c.media_type()))
    }

    fn device_specific_parameter(&self) -> u8 {
        // SSC-4 §8.3.1 (mode parameter header): WP (bit 7), BUFFERED MODE (bits 6:4), SPEED 0.
        u8::from(self.write_protected()) << 7 | (self.buffered_mode & 0x07) << 4
    }

    fn mode_select(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        params: &ModeSelectParams,
    ) -> ScsiResult<()> {
        self.select(params)
    }

    fn log_pages(&self) -> Vec<(u8, u8)> {
        crate::pages::LOG_PAGES.to_vec()
    }

    fn log_page(&mut self, page: u8, subpage: u8, pc: LogPageControl) -> Option<Vec<LogParameter>> {
        self.log_parameters(page, subpage, pc)
    }

    fn log_reset(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        _pc: LogPageControl,
        _page: u8,
        _subpage: u8,
    ) -> ScsiResult<()> {
        self.log = LogCounters::default();
        self.tape_alerts = 0;
        Ok(())
    }

    fn supported_opcodes(&self) -> Vec<OpcodeDescriptor> {
        crate::info::opcode_descriptors()
    }

    fn access(&self, cdb: &Cdb<'_>) -> Access {
        // SPC-4 §5.9.1 and SSC-4 (reservations): reading the medium is a read; asking about
        // the drive is always allowed; everything that moves or changes the medium is a write.
        match cdb.opcode().0 {
            0x05 | 0x1C | 0x34 | 0x44 | 0x8C => Access::Always,
            0x08 | 0x3C | 0xA2 => Access::Read,
            _ => Access::Write,
        }
    }

    fn execute(&mut self, ctx: &mut DeviceContext<'_>, command: &Command<'_>) -> Option<Response> {
        let arrived = self.physical.as_ref().map(Physical::arrival);
        let reply = self.dispatch(ctx, command)?;
        if let (Some(arrived), Ok(response)) = (arrived, &reply) {
            self.pace(arrived, command, response);
        }
        Some(reply.unwrap_or_else(|sense| ctx.check_condition(&sense)))
    }

    fn task_management(&mut self, ctx: &mut DeviceContext<'_>, function: TaskManagement) {
        // SPC-4 §6.13: a logical unit reset (and target resets) clears every prevention, an
        // I_T nexus reset that nexus's.
        match function {
            TaskManagement::LogicalUnitReset
            | TaskManagement::TargetWarmReset
            | TaskManagement::TargetColdReset => self.prevent.clear(),
            TaskManagement::ItNexusReset => {
                self.prevent.remove(ctx.nexus());
            }
            _ => {}
        }
    }

    fn nexus_lost(&mut self, nexus: &ItNexus) {
        self.prevent.remove(nexus);
    }
}
