//! Target side of one connection in the full-feature phase (RFC 7143 §4–§11), sans-I/O.
//!
//! The transport feeds framed PDUs in ([`TargetConnection::on_frame`]), runs the SCSI
//! work the connection hands out ([`Event::Execute`]), reports completions back
//! ([`TargetConnection::complete`]) and writes whatever [`TargetConnection::poll_transmit`]
//! yields. Nothing here sleeps, reads a clock or touches a socket.
//!
//! Invariants:
//! - Commands are handed out in CmdSN order: a command still waiting for its
//!   Data-Out holds back the commands behind it (tape needs ordered execution).
//! - Every task ends exactly once: with a response, or silently when aborted
//!   by task management or connection close. `tasks` never outlives its tags.
//! - The command window (MaxCmdSN) only opens as tasks finish, so a peer can
//!   never make us hold more than `queue_depth` tasks.
//! - At ErrorRecoveryLevel 0 (all we negotiate), a protocol violation we cannot
//!   answer in place ends the connection (§7.1.4.1 / §7.11).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::params::Negotiated;
use crate::pdu::*;
use crate::text::TextResponder;

/// Task management functions (§11.5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmfFunction {
    AbortTask,
    AbortTaskSet,
    ClearAca,
    ClearTaskSet,
    LogicalUnitReset,
    TargetWarmReset,
    TargetColdReset,
    TaskReassign,
}

impl TmfFunction {
    pub fn from_code(code: u8) -> Option<Self> {
        use TmfFunction::*;
        Some(match code {
            1 => AbortTask,
            2 => AbortTaskSet,
            3 => ClearAca,
            4 => ClearTaskSet,
            5 => LogicalUnitReset,
            6 => TargetWarmReset,
            7 => TargetColdReset,
            8 => TaskReassign,
            _ => return None,
        })
    }
}

/// Task management response codes (§11.6.1).
pub mod tmf_response {
    pub const FUNCTION_COMPLETE: u8 = 0;
    pub const TASK_DOES_NOT_EXIST: u8 = 1;
    pub const LUN_DOES_NOT_EXIST: u8 = 2;
    pub const TASK_STILL_ALLEGIANT: u8 = 3;
    pub const REASSIGNMENT_NOT_SUPPORTED: u8 = 4;
    pub const NOT_SUPPORTED: u8 = 5;
    pub const AUTHORIZATION_FAILED: u8 = 6;
    pub const REJECTED: u8 = 255;
}

/// What a finished SCSI command returns to the connection.
#[derive(Clone, Debug, Default)]
pub struct ScsiOutcome {
    /// SCSI status byte (SAM-5 §5.3).
    pub status: u8,
    /// Sense data, sent in the SCSI Response data segment with its 2-byte length (§11.4.7).
    pub sense: Option<Bytes>,
    /// Data for the initiator, in order, in as many buffers as it is in (each is sent without
    /// a copy where it is large enough: see [`DATA_IN_COPY_BELOW`]); truncated to the expected
    /// length and reported as residual.
    pub data_in: Vec<Bytes>,
}

/// Data-In buffers shorter than this are copied together into one PDU with their neighbours;
/// longer ones go out as PDUs of their own, without a copy. A PDU costs the initiator about
/// what copying this much costs us, so many tiny PDUs would be worse than the copy.
pub const DATA_IN_COPY_BELOW: usize = 16 << 10;

/// Work the connection hands to the transport.
#[derive(Debug)]
pub enum Event {
    /// Execute this command; answer with [`TargetConnection::complete`] using `itt`.
    Execute(Command),
    /// Apply the device-side effects of a task management function (unit attentions,
    /// resets), then answer with [`TargetConnection::tmf_complete`]. Tasks on this
    /// connection affected by it have already been aborted here.
    TaskManagement {
        itt: u32,
        function: TmfFunction,
        lun: [u8; 8],
        referenced_itt: u32,
    },
    /// The connection is over: close the socket after sending what is queued.
    Close(CloseReason),
}

/// A SCSI command ready to execute: all of its Data-Out has arrived.
#[derive(Debug)]
pub struct Command {
    pub itt: u32,
    pub lun: [u8; 8],
    pub cdb: Bytes,
    pub attr: TaskAttr,
    pub data_out: Bytes,
    pub data_in_len: u32,
    /// The command's Expected Data Transfer Length for Data-Out exceeded its LUN's
    /// [`DataOutLimit`]: none of its Data-Out was solicited or kept (`data_out` is empty).
    /// The transport must not execute it but answer it with the CHECK CONDITION its device
    /// chooses (the protocol core knows no SCSI meaning).
    pub data_out_refused: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Logout completed (§11.14).
    Logout,
    /// The peer broke the protocol; the string says how (for the log).
    ProtocolError(String),
    /// The peer did not answer our NOP-In ping.
    PeerUnresponsive,
}

/// How the transport treats a frame it could not cut (returned by [`Framer::decode`]).
pub type FrameResult = Result<Frame, FrameError>;

#[derive(Debug)]
enum TaskState {
    /// Receiving Data-Out; `received` bytes are in place.
    Collecting,
    /// Waiting in the CmdSN-ordered queue for the commands ahead of it.
    Ready,
    /// Handed to the transport.
    Executing,
    /// Handed out, then aborted: its completion is swallowed.
    Aborted,
}

#[derive(Debug)]
struct Task {
    lun: [u8; 8],
    cdb: Bytes,
    attr: TaskAttr,
    expected_length: u32,
    read: bool,
    write: bool,
    state: TaskState,
    /// Data-Out received in order so far (DataPDUInOrder, the usual case): bytes
    /// `[0, joined.len())` of the command's buffer, which has room for all of it. The reader
    /// may append a Data-Out's segment here itself (see [`TargetConnection::data_out_sink`]).
    joined: BytesMut,
    /// Data-Out not kept in `joined`, as (buffer offset, segment) in arrival order: a whole
    /// command's data in one segment (passed on without a copy), or everything once a
    /// segment arrived out of order; joined when the command is handed out (see [`assemble`]).
    data: Vec<(u32, Bytes)>,
    received: u32,
    /// Bytes the initiator may still send without an R2T.
    unsolicited_left: u32,
    /// DataSN the next unsolicited Data-Out must carry.
    unsolicited_data_sn: u32,
    /// Next offset we have not yet asked for with an R2T.
    next_r2t_offset: u32,
    /// Over the LUN's Data-Out limit: its data is discarded as it arrives, never solicited.
    refused: bool,
    /// Data-Out bytes admitted for this task (counted in `TargetConnection::committed`).
    committed: u32,
    /// Outstanding R2Ts: ttt -> (offset, length, received within it).
    r2ts: Vec<R2tWindow>,
    r2t_sn: u32,
}

impl Task {
    /// Keeps a segment of the command's data (immediate data or a Data-Out) at `offset`.
    fn keep(&mut self, offset: u32, segment: Bytes) {
        if self.data.is_empty() && offset as usize == self.joined.len() {
            if self.joined.is_empty() && segment.len() == self.expected_length as usize {
                // All of the command's data in one segment: passed on as it is.
                self.data.push((offset, segment));
            } else {
                self.reserve_joined();
                self.joined.extend_from_slice(&segment);
            }
            return;
        }
        // Out of order (or after a whole segment): everything is placed by offset at the end.
        if !self.joined.is_empty() {
            let joined = self.joined.split().freeze();
            self.data.push((0, joined));
        }
        self.data.push((offset, segment));
    }

    /// Gives `joined` room for all of the command's data admitted so far (immediate,
    /// unsolicited, and asked for with R2Ts): appending that never reallocates, and a peer
    /// that sends a large Expected Data Transfer Length makes us hold no more memory than
    /// the Data-Out budget admitted (see [`ConnectionConfig::data_out_budget`]).
    fn reserve_joined(&mut self) {
        let admitted = self.committed.min(self.expected_length) as usize;
        let room = admitted.saturating_sub(self.joined.len());
        if self.joined.capacity() - self.joined.len() < room {
            self.joined.reserve(room);
        }
    }

    /// `joined`, for appending the rest of a Data-Out segment of `len` bytes at `offset` of
    /// which `placed` bytes are in: when it continues the data kept in order and fits the
    /// room reserved for what was admitted (a segment beyond that is refused when checked,
    /// so it is read whole instead).
    fn sink(&mut self, offset: u32, len: usize, placed: usize) -> Option<&mut BytesMut> {
        let end = offset as usize + len;
        let continues = !self.refused
            && matches!(self.state, TaskState::Collecting)
            && self.data.is_empty()
            && self.joined.len() == offset as usize + placed
            && end <= self.expected_length as usize;
        if !continues {
            return None;
        }
        if placed == 0 {
            self.reserve_joined();
        }
        (end <= self.joined.capacity()).then_some(&mut self.joined)
    }

    /// The command's data, whole, for handing it out.
    fn take_data(&mut self) -> Bytes {
        if self.data.is_empty() && self.joined.len() == self.expected_length as usize {
            return std::mem::take(&mut self.joined).freeze();
        }
        if !self.joined.is_empty() {
            let joined = std::mem::take(&mut self.joined).freeze();
            self.data.insert(0, (0, joined));
        }
        assemble(std::mem::take(&mut self.data), self.expected_length)
    }
}

#[derive(Debug, Clone, Copy)]
struct R2tWindow {
    ttt: u32,
    offset: u32,
    length: u32,
    received: u32,
    /// DataSN the next Data-Out of this sequence must carry (§11.7.5: from 0 per R2T).
    next_data_sn: u32,
}

/// A pending TMF response: sent once the aborted tasks it waits for have drained.
#[derive(Debug)]
struct PendingTmf {
    itt: u32,
    response: Option<u8>,
    waiting_for: Vec<u32>,
}

/// The most Data-Out bytes one command may carry, by LUN field, as the transport's devices
/// can take them. A command whose Expected Data Transfer Length exceeds it has none of its
/// data buffered or solicited (see [`Command::data_out_refused`]), so what a peer makes us
/// hold is bounded by the devices, not by the 4 GiB the field allows.
#[derive(Clone)]
pub struct DataOutLimit(Arc<LimitFn>);

/// Bytes of Data-Out allowed for a command to this 8-byte LUN field.
type LimitFn = dyn Fn(&[u8; 8]) -> u32 + Send + Sync;

impl DataOutLimit {
    /// A limit computed from the 8-byte LUN field of each command.
    pub fn new(limit: impl Fn(&[u8; 8]) -> u32 + Send + Sync + 'static) -> Self {
        DataOutLimit(Arc::new(limit))
    }

    /// The same limit for every LUN.
    pub fn fixed(bytes: u32) -> Self {
        Self::new(move |_| bytes)
    }

    /// No limit but the field's own (tests, and peers we trust).
    pub fn unlimited() -> Self {
        Self::fixed(u32::MAX)
    }

    /// The limit for a command addressed to `lun`.
    pub fn of(&self, lun: &[u8; 8]) -> u32 {
        (self.0)(lun)
    }
}

impl std::fmt::Debug for DataOutLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataOutLimit(..)")
    }
}

/// Settings that are not negotiated keys.
#[derive(Clone, Debug)]
pub struct ConnectionConfig {
    /// Most tasks in flight; the CmdSN window never exceeds it (§4.2.2.1).
    pub queue_depth: u32,
    /// True for a discovery session: only Text, NOP and Logout are allowed (RFC 7143 §4.3, discovery sessions).
    pub discovery: bool,
    /// Most Data-Out bytes a command may carry, per LUN.
    pub data_out_limit: DataOutLimit,
    /// Most Data-Out bytes the connection admits at once: immediate and unsolicited data it
    /// allows plus what its R2Ts ask for, held until the task ends. A later command is
    /// solicited only within it; the oldest command not yet handed out only waits for running
    /// commands to end (never for later ones, which cannot run before it), so with them the
    /// connection holds at most about twice the budget plus one command.
    pub data_out_budget: u64,
}

/// Target side of one full-feature connection.
pub struct TargetConnection {
    params: Negotiated,
    config: ConnectionConfig,
    text: Option<TextResponder>,
    stat_sn: u32,
    exp_cmd_sn: u32,
    tasks: HashMap<u32, Task>,
    /// Sum of the tasks' admitted Data-Out (see [`ConnectionConfig::data_out_budget`]).
    committed: u64,
    /// Non-immediate PDUs that arrived ahead of ExpCmdSN, by CmdSN.
    early: BTreeMap<u32, Pdu>,
    /// Tasks in CmdSN order, not yet handed out.
    dispatch_order: VecDeque<u32>,
    ttts: TransferTags,
    outbox: VecDeque<Pdu>,
    events: VecDeque<Event>,
    pending_tmfs: Vec<PendingTmf>,
    /// TTT of our unanswered NOP-In ping.
    ping_ttt: Option<u32>,
    logout: Option<(u32, u8)>,
    closed: bool,
}

/// Joins a command's Data-Out segments into one buffer of `length` bytes. One segment
/// covering it all is passed on without a copy; segments that tile the buffer in order
/// (DataPDUInOrder, the usual case) are appended without zero-filling first; anything else
/// (out of order, overlapping) is placed by offset into a zeroed buffer.
fn assemble(mut pieces: Vec<(u32, Bytes)>, length: u32) -> Bytes {
    if pieces.len() == 1 && pieces[0].0 == 0 && pieces[0].1.len() == length as usize {
        return pieces.pop().map(|(_, b)| b).unwrap_or_default();
    }
    let mut in_order = true;
    let mut next = 0u64;
    for (offset, piece) in &pieces {
        in_order &= u64::from(*offset) == next;
        next = u64::from(*offset) + piece.len() as u64;
    }
    if in_order && next == u64::from(length) {
        let mut out = BytesMut::with_capacity(length as usize);
        for (_, piece) in &pieces {
            out.extend_from_slice(piece);
        }
        return out.freeze();
    }
    let mut out = BytesMut::zeroed(length as usize);
    for (offset, piece) in &pieces {
        // Bounds were checked against the expected length when each segment arrived.
        let start = *offset as usize;
        out[start..start + piece.len()].copy_from_slice(piece);
    }
    out.freeze()
}

/// A SCSI Response data segment: SenseLength then the sense bytes (§11.4.7).
fn sense_segment(sense: Bytes) -> Bytes {
    let len = sense.len().min(0xffff);
    let mut segment = BytesMut::with_capacity(len + 2);
    segment.extend_from_slice(&(len as u16).to_be_bytes());
    segment.extend_from_slice(&sense[..len]);
    segment.freeze()
}

/// Sense data for iSCSI-detected errors (§11.4.7.2): ABORTED COMMAND with these ASC/ASCQ.
fn iscsi_sense(asc: u8, ascq: u8) -> Bytes {
    let mut s = vec![0u8; 18];
    s[0] = 0x70;
    s[2] = 0x0b; // ABORTED COMMAND
    s[7] = 10;
    s[12] = asc;
    s[13] = ascq;
    Bytes::from(s)
}

fn sn_lt(a: u32, b: u32) -> bool {
    // Serial number arithmetic (RFC 1982, §4.2.2.1).
    a != b && b.wrapping_sub(a) < 0x8000_0000
}

impl TargetConnection {
    pub fn new(
        params: Negotiated,
        config: ConnectionConfig,
        text: Option<TextResponder>,
        exp_cmd_sn: u32,
        stat_sn: u32,
    ) -> Self {
        TargetConnection {
            params,
            config,
            text,
            stat_sn,
            exp_cmd_sn,
            tasks: HashMap::new(),
            committed: 0,
            early: BTreeMap::new(),
            dispatch_order: VecDeque::new(),
            ttts: TransferTags::default(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            pending_tmfs: Vec::new(),
            ping_ttt: None,
            logout: None,
            closed: false,
        }
    }

    /// Limits for frames we receive: our declared MaxRecvDataSegmentLength and digests.
    pub fn receive_limits(&self) -> FrameLimits {
        FrameLimits {
            header_digest: self.params.header_digest,
            data_digest: self.params.data_digest,
            max_data_segment: self.params.max_recv_data_segment_length,
        }
    }

    /// Limits for frames we send.
    pub fn send_limits(&self) -> FrameLimits {
        FrameLimits {
            header_digest: self.params.header_digest,
            data_digest: self.params.data_digest,
            max_data_segment: self.params.max_xmit_data_segment_length,
        }
    }

    pub fn params(&self) -> &Negotiated {
        &self.params
    }

    /// Tasks this connection holds (any state). Zero once the connection is idle.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn poll_transmit(&mut self) -> Option<Pdu> {
        self.outbox.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn max_cmd_sn(&self) -> u32 {
        let free = self
            .config
            .queue_depth
            .saturating_sub(self.tasks.len() as u32);
        // MaxCmdSN = ExpCmdSN - 1 closes the window (§4.2.2.1).
        self.exp_cmd_sn.wrapping_add(free).wrapping_sub(1)
    }

    fn next_stat_sn(&mut self) -> u32 {
        let sn = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        sn
    }

    fn reject(&mut self, reason: RejectReason, bhs: &[u8; BHS_LEN]) {
        let pdu = Pdu::Reject(Reject {
            reason: reason as u8,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            data_sn: 0,
            data: Bytes::copy_from_slice(bhs),
        });
        self.outbox.push_back(pdu);
    }

    fn close(&mut self, reason: CloseReason) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.events.push_back(Event::Close(reason));
    }

    fn protocol_error(&mut self, bhs: &[u8; BHS_LEN], why: impl Into<String>) {
        self.reject(RejectReason::ProtocolError, bhs);
        self.close(CloseReason::ProtocolError(why.into()));
    }

    /// Sends a NOP-In ping (§11.19) unless one is outstanding; returns false when the
    /// previous ping was never answered (the transport should then drop the connection).
    pub fn ping(&mut self) -> bool {
        if self.ping_ttt.is_some() {
            self.close(CloseReason::PeerUnresponsive);
            return false;
        }
        let ttt = self.ttts.allocate();
        self.ping_ttt = Some(ttt);
        let pdu = Pdu::NopIn(NopIn {
            lun: [0; 8],
            itt: RESERVED_TAG,
            ttt,
            // Not advanced for an unsolicited NOP-In (§11.19: StatSN carries the next value).
            stat_sn: self.stat_sn,
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            data: Bytes::new(),
        });
        self.outbox.push_back(pdu);
        true
    }

    /// Asks the initiator to log out within `seconds` (Async Message event 1, §11.9.1),
    /// e.g. when the server shuts down.
    pub fn request_logout(&mut self, seconds: u16) {
        let pdu = Pdu::AsyncMessage(AsyncMessage {
            lun: [0; 8],
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            event: 1,
            vcode: 0,
            parameters: [0, 0, seconds],
            data: Bytes::new(),
        });
        self.outbox.push_back(pdu);
    }

    /// Handles what the framer produced.
    /// Where the reader may put the data segment of the PDU whose header it has cut
    /// ([`Framer::peek_header`]) straight away, without a copy: the end of its command's
    /// buffer, when it is a Data-Out that continues the command's data in order and fits it
    /// (DataPDUInOrder, the usual case). The reader then appends exactly the segment's
    /// `data_len` bytes (resuming with [`TargetConnection::placing_sink`] after an
    /// interruption) and hands the header to [`TargetConnection::on_placed_data_out`], which
    /// checks it as [`TargetConnection::on_frame`] would and takes the bytes back out if
    /// the Data-Out is refused. `None`: read the PDU whole and hand it to `on_frame`.
    pub fn data_out_sink(&mut self, header: &Header) -> Option<&mut BytesMut> {
        if self.closed || header.opcode() != opcode::DATA_OUT {
            return None;
        }
        self.placing_sink(header, 0)
    }

    /// Whether a command is waiting for Data-Out (solicited or not): the next PDUs read are
    /// likely to carry it.
    pub fn awaits_data_out(&self) -> bool {
        self.tasks
            .values()
            .any(|t| !t.refused && matches!(t.state, TaskState::Collecting))
    }

    /// The buffer a placement begun with [`TargetConnection::data_out_sink`] goes on
    /// appending to, `placed` bytes in: `None` if its task is no longer there to take it.
    pub fn placing_sink(&mut self, header: &Header, placed: usize) -> Option<&mut BytesMut> {
        let itt = Frame::header_itt(&header.bhs);
        let offset = Frame::header_buffer_offset(&header.bhs);
        self.tasks
            .get_mut(&itt)?
            .sink(offset, header.data_len, placed)
    }

    /// A Data-Out whose whole data segment the reader appended to the buffer
    /// [`TargetConnection::data_out_sink`] gave it.
    pub fn on_placed_data_out(&mut self, header: Header) {
        if self.closed {
            return;
        }
        let len = header.data_len as u32;
        let bhs = header.bhs;
        let frame = Frame {
            bhs,
            ahs: header.ahs,
            data: Bytes::new(),
        };
        match Pdu::parse(frame) {
            Ok(Pdu::DataOut(data)) => self.on_data_out(data, &bhs, Some(len)),
            _ => self.reject(RejectReason::InvalidPduField, &bhs),
        }
        self.drain_dispatch();
    }

    pub fn on_frame(&mut self, frame: FrameResult) {
        if self.closed {
            return;
        }
        let frame = match frame {
            Ok(frame) => frame,
            Err(FrameError::HeaderDigest) => {
                // The header can't be trusted, not even its length: nothing to quote (§7.8).
                self.close(CloseReason::ProtocolError("header digest error".into()));
                return;
            }
            Err(FrameError::DataDigest { bhs }) => {
                // §7.8: discard the PDU and Reject it; at ERL 0 the affected task can't be
                // recovered, so the connection ends after the Reject.
                self.reject(RejectReason::DataDigestError, &bhs);
                self.close(CloseReason::ProtocolError("data digest error".into()));
                return;
            }
            Err(FrameError::DataSegmentTooLong { bhs, length, max }) => {
                self.protocol_error(
                    &bhs,
                    format!(
                        "data segment of {length} bytes exceeds MaxRecvDataSegmentLength {max}"
                    ),
                );
                return;
            }
        };
        let bhs = frame.bhs;
        let pdu = match Pdu::parse(frame) {
            Ok(pdu) => pdu,
            Err(ParseError::UnknownOpcode(_)) => {
                self.reject(RejectReason::CommandNotSupported, &bhs);
                return;
            }
            Err(e) => {
                self.reject(RejectReason::InvalidPduField, &bhs);
                let _ = e;
                return;
            }
        };
        self.on_pdu(pdu, &bhs);
        self.drain_dispatch();
    }

    fn on_pdu(&mut self, pdu: Pdu, bhs: &[u8; BHS_LEN]) {
        if self.logout.is_some() && !matches!(pdu, Pdu::DataOut(_) | Pdu::NopOut(_)) {
            // §11.14: after a Logout Request only data for tasks in progress may follow.
            self.reject(RejectReason::WaitingForLogout, bhs);
            return;
        }
        match pdu {
            Pdu::DataOut(data) => self.on_data_out(data, bhs, None),
            Pdu::SnackRequest(_) => self.reject(RejectReason::SnackReject, bhs),
            Pdu::NopOut(ref nop) if nop.itt == RESERVED_TAG => {
                // An answer to our ping, or an immediate "no response wanted" NOP-Out (§11.18).
                if nop.ttt != RESERVED_TAG {
                    if self.ping_ttt == Some(nop.ttt) {
                        self.ping_ttt = None;
                    }
                } else if !nop.immediate {
                    self.reject(RejectReason::ProtocolError, bhs);
                }
            }
            Pdu::LoginRequest(_) => self.reject(RejectReason::ProtocolError, bhs),
            Pdu::NopOut(_)
            | Pdu::ScsiCommand(_)
            | Pdu::TaskMgmtRequest(_)
            | Pdu::TextRequest(_)
            | Pdu::LogoutRequest(_) => self.sequence(pdu, bhs),
            // Target-to-initiator opcodes are not valid from an initiator.
            _ => self.reject(RejectReason::ProtocolError, bhs),
        }
    }

    /// CmdSN ordering (§4.2.2.1): immediate PDUs go at once; others only at ExpCmdSN,
    /// ahead-of-window arrivals wait, and anything outside the window is ignored.
    fn sequence(&mut self, pdu: Pdu, bhs: &[u8; BHS_LEN]) {
        let (immediate, cmd_sn) = match &pdu {
            Pdu::NopOut(p) => (p.immediate, p.cmd_sn),
            Pdu::ScsiCommand(p) => (p.immediate, p.cmd_sn),
            Pdu::TaskMgmtRequest(p) => (p.immediate, p.cmd_sn),
            Pdu::TextRequest(p) => (p.immediate, p.cmd_sn),
            Pdu::LogoutRequest(p) => (p.immediate, p.cmd_sn),
            _ => unreachable!("only command PDUs are sequenced"),
        };
        if immediate {
            self.perform(pdu, bhs);
            return;
        }
        let max = self
            .exp_cmd_sn
            .wrapping_add(self.config.queue_depth.max(1))
            .wrapping_sub(1);
        if sn_lt(cmd_sn, self.exp_cmd_sn) || sn_lt(max, cmd_sn) {
            // Outside the window: silently ignored (§4.2.2.1).
            return;
        }
        if cmd_sn != self.exp_cmd_sn {
            if self.early.len() < self.config.queue_depth as usize {
                self.early.entry(cmd_sn).or_insert(pdu);
            }
            return;
        }
        self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
        self.perform(pdu, bhs);
        while let Some(next) = self.early.remove(&self.exp_cmd_sn) {
            self.exp_cmd_sn = self.exp_cmd_sn.wrapping_add(1);
            let header = next.header();
            let mut quoted = [0u8; BHS_LEN];
            quoted.copy_from_slice(&header[..BHS_LEN]);
            self.perform(next, &quoted);
        }
    }

    fn perform(&mut self, pdu: Pdu, bhs: &[u8; BHS_LEN]) {
        if self.config.discovery && matches!(pdu, Pdu::ScsiCommand(_) | Pdu::TaskMgmtRequest(_)) {
            // Only Text, NOP and Logout are allowed in a discovery session (RFC 7143 §4.3).
            self.reject(RejectReason::ProtocolError, bhs);
            return;
        }
        match pdu {
            Pdu::NopOut(nop) => {
                let pdu = Pdu::NopIn(NopIn {
                    lun: nop.lun,
                    itt: nop.itt,
                    ttt: RESERVED_TAG,
                    stat_sn: self.next_stat_sn(),
                    exp_cmd_sn: self.exp_cmd_sn,
                    max_cmd_sn: self.max_cmd_sn(),
                    data: nop.data,
                });
                self.outbox.push_back(pdu);
            }
            Pdu::ScsiCommand(cmd) => self.on_command(cmd, bhs),
            Pdu::TaskMgmtRequest(tmf) => self.on_tmf(tmf),
            Pdu::TextRequest(req) => {
                let max_xmit = self.params.max_xmit_data_segment_length;
                let answer = match self.text.as_mut() {
                    Some(text) => text.on_request(&req, max_xmit).ok(),
                    None => None,
                };
                match answer {
                    Some(mut response) => {
                        response.stat_sn = self.next_stat_sn();
                        response.exp_cmd_sn = self.exp_cmd_sn;
                        response.max_cmd_sn = self.max_cmd_sn();
                        self.outbox.push_back(Pdu::TextResponse(response));
                    }
                    None => self.reject(RejectReason::ProtocolError, bhs),
                }
            }
            Pdu::LogoutRequest(req) => {
                // Reason 2 (remove connection for recovery) needs ERL 2 (§11.14.1).
                let response = if req.reason == 2 { 2 } else { 0 };
                self.logout = Some((req.itt, response));
                // Tasks still waiting for data would never finish: abort them.
                let collecting: Vec<u32> = self
                    .tasks
                    .iter()
                    .filter(|(_, t)| matches!(t.state, TaskState::Collecting | TaskState::Ready))
                    .map(|(itt, _)| *itt)
                    .collect();
                for itt in collecting {
                    self.forget(itt);
                    self.dispatch_order.retain(|t| *t != itt);
                }
                self.maybe_finish_logout();
            }
            _ => unreachable!("sequence() passes only command PDUs"),
        }
    }

    fn maybe_finish_logout(&mut self) {
        let Some((itt, response)) = self.logout else {
            return;
        };
        if !self.tasks.is_empty() || self.closed {
            return;
        }
        let pdu = Pdu::LogoutResponse(LogoutResponse {
            response,
            itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            time2wait: 0,
            time2retain: 0,
        });
        self.outbox.push_back(pdu);
        self.close(CloseReason::Logout);
    }

    fn on_command(&mut self, cmd: ScsiCommand, bhs: &[u8; BHS_LEN]) {
        if self.tasks.contains_key(&cmd.itt) || cmd.itt == RESERVED_TAG {
            self.reject(RejectReason::TaskInProgress, bhs);
            return;
        }
        if self.tasks.len() >= self.config.queue_depth as usize && !cmd.immediate {
            // Can only happen with a window violation by the peer; answer TASK SET FULL.
            self.respond_status(cmd.itt, 0x28, None, 0, false);
            return;
        }
        let edtl = cmd.expected_data_length;
        let immediate_len = cmd.data.len() as u32;
        if !cmd.write && immediate_len > 0 {
            self.protocol_error(bhs, "immediate data on a command without the W bit");
            return;
        }
        if cmd.write && immediate_len > 0 && !self.params.immediate_data {
            self.protocol_error(bhs, "immediate data when ImmediateData=No");
            return;
        }
        let first_burst = self.params.first_burst_length;
        if immediate_len > edtl || immediate_len > first_burst {
            // §11.4.7.2: ABORTED COMMAND, "unexpected unsolicited data"; nothing runs.
            let sense = sense_segment(iscsi_sense(0x0c, 0x0c));
            self.respond_status(cmd.itt, 0x02, Some(sense), 0, false);
            return;
        }
        let refused = cmd.write && edtl > self.config.data_out_limit.of(&cmd.lun);
        let mut task = Task {
            lun: cmd.lun,
            cdb: cmd.cdb,
            attr: cmd.attr,
            expected_length: edtl,
            read: cmd.read,
            write: cmd.write,
            state: TaskState::Ready,
            joined: BytesMut::new(),
            data: Vec::new(),
            received: 0,
            unsolicited_left: 0,
            unsolicited_data_sn: 0,
            next_r2t_offset: 0,
            refused,
            committed: 0,
            r2ts: Vec::new(),
            r2t_sn: 0,
        };
        let data_out = if cmd.write { edtl } else { 0 };
        // Kept once the first R2Ts are out, so that the buffer it starts has room for them.
        let mut immediate = None;
        if refused {
            // Too long for the device: keep none of it and solicit nothing (no R2T). The
            // command goes out in CmdSN order to be answered with CHECK CONDITION; unsolicited
            // Data-Out the initiator may still send (§13.10) is dropped on arrival.
            drop(cmd.data);
        } else if data_out > 0 {
            if immediate_len > 0 {
                immediate = Some(cmd.data);
            }
            task.received = immediate_len;
            // Unsolicited Data-Out PDUs may follow when InitialR2T=No and F was not set (§13.10).
            let unsolicited_total = if self.params.initial_r2t || cmd.final_ {
                immediate_len
            } else {
                first_burst.min(edtl)
            };
            task.unsolicited_left = unsolicited_total - immediate_len;
            task.next_r2t_offset = unsolicited_total;
            // What the initiator may send unasked is admitted whatever the budget (at most
            // FirstBurstLength per command, queue_depth commands).
            task.committed = unsolicited_total;
            self.committed += u64::from(unsolicited_total);
            if task.received < data_out {
                task.state = TaskState::Collecting;
            }
        } else if cmd.write && !cmd.final_ {
            self.protocol_error(bhs, "F bit clear on a command that expects no data");
            return;
        }
        let itt = cmd.itt;
        self.tasks.insert(itt, task);
        self.dispatch_order.push_back(itt);
        self.issue_r2ts(itt);
        if let Some(data) = immediate
            && let Some(task) = self.tasks.get_mut(&itt)
        {
            task.keep(0, data);
        }
    }

    /// Sends R2Ts for the data not yet solicited, keeping at most MaxOutstandingR2T (§13.17)
    /// in flight, each at most MaxBurstLength long (§13.13).
    fn issue_r2ts(&mut self, itt: u32) {
        let max_outstanding = self.params.max_outstanding_r2t.max(1) as usize;
        let max_burst = self.params.max_burst_length.max(512);
        // The oldest command not yet handed out must not wait for later ones (they cannot run
        // before it): it waits only for commands already running, which end on their own.
        let oldest = self.dispatch_order.front() == Some(&itt);
        let running: u64 = if oldest {
            self.tasks
                .values()
                .filter(|t| matches!(t.state, TaskState::Executing | TaskState::Aborted))
                .map(|t| u64::from(t.committed))
                .sum()
        } else {
            0
        };
        loop {
            let (exp_cmd_sn, max_cmd_sn, stat_sn) =
                (self.exp_cmd_sn, self.max_cmd_sn(), self.stat_sn);
            let ttt_candidate = self.ttts.peek();
            let committed = self.committed;
            let Some(task) = self.tasks.get_mut(&itt) else {
                return;
            };
            if !matches!(task.state, TaskState::Collecting) {
                return;
            }
            // Unsolicited data must arrive first; R2Ts wait until it has (§13.10 allows either, this is simpler).
            if task.unsolicited_left > 0 || task.r2ts.len() >= max_outstanding {
                return;
            }
            if task.next_r2t_offset >= task.expected_length {
                return;
            }
            let length = (task.expected_length - task.next_r2t_offset).min(max_burst);
            let budget = self.config.data_out_budget;
            let admitted = if oldest {
                running == 0 || running + u64::from(task.committed + length) <= budget
            } else {
                committed + u64::from(length) <= budget
            };
            if !admitted {
                // Asked for once running tasks release theirs (see `solicit_waiting`).
                return;
            }
            task.committed += length;
            self.committed += u64::from(length);
            let window = R2tWindow {
                ttt: ttt_candidate,
                offset: task.next_r2t_offset,
                length,
                received: 0,
                next_data_sn: 0,
            };
            task.next_r2t_offset += length;
            task.r2ts.push(window);
            let r2t_sn = task.r2t_sn;
            task.r2t_sn += 1;
            let lun = task.lun;
            self.ttts.allocate();
            self.outbox.push_back(Pdu::R2t(R2t {
                lun,
                itt,
                ttt: window.ttt,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                r2t_sn,
                buffer_offset: window.offset,
                desired_length: length,
            }));
        }
    }

    /// A Data-Out; `placed` when the reader already appended its segment (that many bytes)
    /// to the task's `joined` buffer (see [`TargetConnection::data_out_sink`]).
    fn on_data_out(&mut self, data: DataOut, bhs: &[u8; BHS_LEN], placed: Option<u32>) {
        let itt = data.itt;
        let offset = data.buffer_offset;
        let accepted = self.accept_data_out(data, bhs, placed);
        if !accepted
            && placed.is_some()
            && let Some(task) = self.tasks.get_mut(&itt)
            && task.data.is_empty()
            && task.joined.len() > offset as usize
        {
            // Refused after all: the bytes the reader placed are not the command's.
            task.joined.truncate(offset as usize);
        }
    }

    /// Checks and counts a Data-Out, keeps its data (unless placed) and moves its task on;
    /// false when it was refused (the task failed or the connection ends).
    fn accept_data_out(&mut self, data: DataOut, bhs: &[u8; BHS_LEN], placed: Option<u32>) -> bool {
        let Some(task) = self.tasks.get_mut(&data.itt) else {
            // Data for a task we don't have (aborted or never seen): discard (after ABORT
            // TASK the initiator may still send data it had in flight).
            return false;
        };
        let len = placed.unwrap_or(data.data.len() as u32);
        if task.refused {
            // Unsolicited data of a refused command (see on_command) is dropped; once the
            // command is answered its tag is gone and late data is dropped as unknown.
            if data.ttt != RESERVED_TAG {
                self.protocol_error(bhs, "solicited Data-Out for a command we solicited none of");
            }
            return false;
        }
        if !matches!(task.state, TaskState::Collecting) {
            self.protocol_error(bhs, "Data-Out for a task that expects no more data");
            return false;
        }
        let end = data.buffer_offset as u64 + len as u64;
        if end > task.expected_length as u64 {
            self.protocol_error(bhs, "Data-Out beyond the expected data transfer length");
            return false;
        }
        // With DataPDUInOrder=Yes each sequence's DataSN counts up from 0 (§11.7.5); a gap or
        // repeat means lost or forged data, which ERL 0 cannot recover: the command fails with
        // CHECK CONDITION and the connection goes on (later Data-Out for it is discarded).
        let in_order = self.params.data_pdu_in_order;
        if data.ttt == RESERVED_TAG {
            if len > task.unsolicited_left {
                // §11.4.7.2: ABORTED COMMAND, "unexpected unsolicited data".
                self.fail_task(data.itt, 0x0c, 0x0c);
                return false;
            }
            if in_order && data.data_sn != task.unsolicited_data_sn {
                self.fail_task(data.itt, 0x4b, 0x00); // DATA PHASE ERROR (SPC-4)
                return false;
            }
            task.unsolicited_data_sn += 1;
            task.unsolicited_left -= len;
        } else {
            let Some(window) = task.r2ts.iter_mut().find(|w| w.ttt == data.ttt) else {
                self.protocol_error(bhs, "Data-Out with an unknown Target Transfer Tag");
                return false;
            };
            if data.buffer_offset < window.offset || end > (window.offset + window.length) as u64 {
                self.protocol_error(bhs, "Data-Out outside the range its R2T asked for");
                return false;
            }
            if in_order && data.data_sn != window.next_data_sn {
                self.fail_task(data.itt, 0x4b, 0x00); // DATA PHASE ERROR (SPC-4)
                return false;
            }
            window.next_data_sn += 1;
            window.received += len;
        }
        if placed.is_none() {
            task.keep(data.buffer_offset, data.data);
        }
        task.received = task.received.saturating_add(len);
        // A window ends with its F bit; we count bytes because that is what must be whole.
        task.r2ts.retain(|w| w.received < w.length);
        if task.received >= task.expected_length
            && task.r2ts.is_empty()
            && task.unsolicited_left == 0
        {
            task.state = TaskState::Ready;
        } else if data.final_ && data.ttt == RESERVED_TAG && task.unsolicited_left > 0 {
            // The initiator ended its unsolicited burst early (F bit): solicit the rest.
            task.next_r2t_offset = task.next_r2t_offset.min(data.buffer_offset + len);
            task.unsolicited_left = 0;
        }
        let itt = data.itt;
        self.issue_r2ts(itt);
        true
    }

    /// Hands out, in CmdSN order, every command whose data is complete.
    fn drain_dispatch(&mut self) {
        while let Some(&itt) = self.dispatch_order.front() {
            let Some(task) = self.tasks.get_mut(&itt) else {
                self.dispatch_order.pop_front();
                continue;
            };
            if !matches!(task.state, TaskState::Ready) {
                break;
            }
            self.dispatch_order.pop_front();
            task.state = TaskState::Executing;
            // A command without the W bit has no Data-Out, whatever its expected length (which
            // for a READ is the Data-In length, §11.3.1: not a buffer to fill with zeros).
            let data_out = if task.refused || !task.write {
                Bytes::new()
            } else {
                task.take_data()
            };
            let data_in_len = if task.read { task.expected_length } else { 0 };
            self.events.push_back(Event::Execute(Command {
                itt,
                lun: task.lun,
                cdb: task.cdb.clone(),
                attr: task.attr,
                data_out,
                data_in_len,
                data_out_refused: task.refused,
            }));
        }
        // The oldest command still collecting may have changed: it is always served.
        self.solicit_waiting();
    }

    /// Ends a task that is still receiving data with CHECK CONDITION, ABORTED COMMAND and the
    /// given ASC/ASCQ (§11.4.7.2); Data-Out still in flight for it is discarded on arrival.
    fn fail_task(&mut self, itt: u32, asc: u8, ascq: u8) {
        if self.forget(itt).is_none() {
            return;
        }
        self.dispatch_order.retain(|t| *t != itt);
        self.respond_status(
            itt,
            0x02,
            Some(sense_segment(iscsi_sense(asc, ascq))),
            0,
            false,
        );
    }

    /// Reports the end of a command handed out with [`Event::Execute`].
    pub fn complete(&mut self, itt: u32, outcome: ScsiOutcome) {
        let Some(task) = self.forget(itt) else {
            return;
        };
        let aborted = matches!(task.state, TaskState::Aborted);
        if !aborted && !self.closed {
            let expected = if task.read { task.expected_length } else { 0 };
            self.send_result(itt, task.lun, expected, task.write, outcome);
        }
        self.settle_tmfs(itt);
        self.maybe_finish_logout();
        // Its admitted Data-Out is released: commands waiting for R2Ts may get them.
        self.solicit_waiting();
    }

    /// Removes a task and releases its admitted Data-Out.
    fn forget(&mut self, itt: u32) -> Option<Task> {
        let task = self.tasks.remove(&itt)?;
        self.committed -= u64::from(task.committed);
        Some(task)
    }

    /// Sends the R2Ts the budget held back, oldest command first.
    fn solicit_waiting(&mut self) {
        if self.closed {
            return;
        }
        let waiting: Vec<u32> = self
            .dispatch_order
            .iter()
            .copied()
            .filter(|itt| {
                self.tasks
                    .get(itt)
                    .is_some_and(|t| matches!(t.state, TaskState::Collecting))
            })
            .collect();
        for itt in waiting {
            self.issue_r2ts(itt);
        }
    }

    fn send_result(
        &mut self,
        itt: u32,
        lun: [u8; 8],
        expected: u32,
        write: bool,
        outcome: ScsiOutcome,
    ) {
        let available: u64 = outcome.data_in.iter().map(|b| b.len() as u64).sum();
        let sent = available.min(expected as u64) as u32;
        let mut data = DataInParts::new(outcome.data_in, sent as usize);
        let max_seg = self.params.max_xmit_data_segment_length.max(512);
        let max_burst = self.params.max_burst_length.max(max_seg);
        // Residual (§11.4.5): for reads against the read length; for writes the data
        // was all taken, so only reads produce one here.
        let (overflow, underflow, residual) = if !write || expected > 0 {
            if available > expected as u64 {
                (
                    true,
                    false,
                    (available - expected as u64).min(u32::MAX as u64) as u32,
                )
            } else {
                (
                    false,
                    available < expected as u64,
                    expected - available as u32,
                )
            }
        } else {
            (false, false, 0)
        };
        let collapse = outcome.sense.is_none() && outcome.status == 0 && sent > 0;
        let mut offset = 0u32;
        let mut data_sn = 0u32;
        let mut burst_left = max_burst;
        while !data.is_empty() {
            let chunk = data.next_segment(max_seg.min(burst_left) as usize);
            let len = chunk.len() as u32;
            burst_left -= len;
            let last = data.is_empty();
            let end_of_burst = last || burst_left == 0;
            if burst_left == 0 {
                burst_left = max_burst;
            }
            let has_status = last && collapse;
            let pdu = Pdu::DataIn(DataIn {
                final_: end_of_burst,
                acknowledge: false,
                overflow: has_status && overflow,
                underflow: has_status && underflow,
                has_status,
                status: if has_status { outcome.status } else { 0 },
                lun,
                itt,
                ttt: RESERVED_TAG,
                stat_sn: if has_status { self.next_stat_sn() } else { 0 },
                exp_cmd_sn: self.exp_cmd_sn,
                max_cmd_sn: self.max_cmd_sn(),
                data_sn,
                buffer_offset: offset,
                residual: if has_status { residual } else { 0 },
                data: chunk,
            });
            self.outbox.push_back(pdu);
            data_sn += 1;
            offset += len;
        }
        if !collapse {
            let sense = outcome.sense.map(sense_segment);
            self.respond_status_full(
                itt,
                outcome.status,
                sense,
                residual,
                overflow,
                underflow,
                data_sn,
            );
        }
    }

    fn respond_status(
        &mut self,
        itt: u32,
        status: u8,
        sense: Option<Bytes>,
        residual: u32,
        underflow: bool,
    ) {
        self.respond_status_full(itt, status, sense, residual, false, underflow, 0);
    }

    #[allow(clippy::too_many_arguments)]
    fn respond_status_full(
        &mut self,
        itt: u32,
        status: u8,
        data: Option<Bytes>,
        residual: u32,
        overflow: bool,
        underflow: bool,
        exp_data_sn: u32,
    ) {
        let pdu = Pdu::ScsiResponse(ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            overflow,
            underflow,
            response: 0,
            status,
            itt,
            snack_tag: 0,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
            exp_data_sn,
            bidi_residual: 0,
            residual: if overflow || underflow { residual } else { 0 },
            data: data.unwrap_or_default(),
        });
        self.outbox.push_back(pdu);
    }

    fn on_tmf(&mut self, tmf: TaskMgmtRequest) {
        let Some(function) = TmfFunction::from_code(tmf.function) else {
            self.send_tmf_response(tmf.itt, tmf_response::NOT_SUPPORTED);
            return;
        };
        let affected: Vec<u32> = match function {
            TmfFunction::AbortTask => {
                let Some(task) = self.tasks.get(&tmf.referenced_task_tag) else {
                    // §11.5.1 b/c: a tag we don't hold whose RefCmdSN lies in the command window
                    // was lost on the way and counts as aborted; otherwise (e.g. the task already
                    // completed) it does not exist.
                    let in_window = !sn_lt(tmf.ref_cmd_sn, self.exp_cmd_sn)
                        && !sn_lt(self.max_cmd_sn(), tmf.ref_cmd_sn);
                    let code = if in_window {
                        tmf_response::FUNCTION_COMPLETE
                    } else {
                        tmf_response::TASK_DOES_NOT_EXIST
                    };
                    self.send_tmf_response(tmf.itt, code);
                    return;
                };
                if task.lun != tmf.lun {
                    self.send_tmf_response(tmf.itt, tmf_response::TASK_DOES_NOT_EXIST);
                    return;
                }
                vec![tmf.referenced_task_tag]
            }
            TmfFunction::AbortTaskSet
            | TmfFunction::ClearTaskSet
            | TmfFunction::LogicalUnitReset => self
                .tasks
                .iter()
                .filter(|(_, t)| t.lun == tmf.lun)
                .map(|(itt, _)| *itt)
                .collect(),
            TmfFunction::TargetWarmReset | TmfFunction::TargetColdReset => {
                self.tasks.keys().copied().collect()
            }
            TmfFunction::ClearAca => Vec::new(),
            TmfFunction::TaskReassign => {
                self.send_tmf_response(tmf.itt, tmf_response::REASSIGNMENT_NOT_SUPPORTED);
                return;
            }
        };
        let mut waiting_for = Vec::new();
        for itt in affected {
            let Some(task) = self.tasks.get_mut(&itt) else {
                continue;
            };
            match task.state {
                TaskState::Executing | TaskState::Aborted => {
                    task.state = TaskState::Aborted;
                    waiting_for.push(itt);
                }
                _ => {
                    self.forget(itt);
                    self.dispatch_order.retain(|t| *t != itt);
                }
            }
        }
        self.pending_tmfs.push(PendingTmf {
            itt: tmf.itt,
            response: None,
            waiting_for,
        });
        if function == TmfFunction::AbortTask {
            // Nothing device-side to do for one task: answer as soon as it has drained.
            self.tmf_complete(tmf.itt, tmf_response::FUNCTION_COMPLETE);
        } else {
            self.events.push_back(Event::TaskManagement {
                itt: tmf.itt,
                function,
                lun: tmf.lun,
                referenced_itt: tmf.referenced_task_tag,
            });
        }
        // Freed window slots may let queued commands go.
        self.drain_dispatch();
    }

    /// Reports the device-side result of a task management function.
    pub fn tmf_complete(&mut self, itt: u32, response: u8) {
        if let Some(pending) = self.pending_tmfs.iter_mut().find(|p| p.itt == itt) {
            pending.response = Some(response);
        }
        self.settle_tmfs(u32::MAX);
    }

    /// Sends TMF responses whose aborted tasks have all drained (§11.5.1: the response
    /// follows the end of every task it affected).
    fn settle_tmfs(&mut self, finished_itt: u32) {
        for pending in &mut self.pending_tmfs {
            pending.waiting_for.retain(|itt| *itt != finished_itt);
        }
        let mut ready = Vec::new();
        self.pending_tmfs.retain(|p| {
            let done = p.response.is_some() && p.waiting_for.is_empty();
            if done {
                ready.push((p.itt, p.response.unwrap_or(0)));
            }
            !done
        });
        for (itt, response) in ready {
            self.send_tmf_response(itt, response);
        }
    }

    fn send_tmf_response(&mut self, itt: u32, response: u8) {
        if self.closed {
            return;
        }
        let pdu = Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response,
            itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        });
        self.outbox.push_back(pdu);
    }

    /// The socket is gone: every task is over. Returns the tags of tasks still executing
    /// (the transport lets them finish and discards their results via [`Self::complete`]).
    pub fn connection_lost(&mut self) -> Vec<u32> {
        self.closed = true;
        let mut executing = Vec::new();
        self.tasks.retain(|itt, task| match task.state {
            TaskState::Executing | TaskState::Aborted => {
                task.state = TaskState::Aborted;
                executing.push(*itt);
                true
            }
            _ => false,
        });
        self.committed = self.tasks.values().map(|t| u64::from(t.committed)).sum();
        self.dispatch_order.clear();
        self.early.clear();
        self.outbox.clear();
        executing
    }
}

/// The Data-In bytes of one command, cut into PDU data segments (RFC 7143 §11.7: a segment may
/// be any length up to the initiator's MaxRecvDataSegmentLength).
struct DataInParts {
    parts: VecDeque<Bytes>,
    left: usize,
}

impl DataInParts {
    /// The first `len` bytes of `parts` (no more than they hold).
    fn new(parts: Vec<Bytes>, len: usize) -> Self {
        let mut left = len;
        let mut kept = VecDeque::with_capacity(parts.len());
        for mut part in parts {
            if left == 0 {
                break;
            }
            part.truncate(left);
            left -= part.len();
            if !part.is_empty() {
                kept.push_back(part);
            }
        }
        DataInParts {
            left: len - left,
            parts: kept,
        }
    }

    fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// The next data segment, at most `max` bytes (`max` > 0): a slice of the front buffer when
    /// it is at least [`DATA_IN_COPY_BELOW`] long (so a segment may end where a buffer does),
    /// otherwise a copy of the short buffers in a row from there.
    fn next_segment(&mut self, max: usize) -> Bytes {
        let max = max.min(self.left);
        let Some(front) = self.parts.front_mut() else {
            return Bytes::new();
        };
        let segment = if front.len() >= DATA_IN_COPY_BELOW.min(max) {
            let take = front.len().min(max);
            let segment = front.split_to(take);
            if front.is_empty() {
                self.parts.pop_front();
            }
            segment
        } else {
            let mut joined = BytesMut::with_capacity(max);
            while joined.len() < max {
                let Some(front) = self.parts.front_mut() else {
                    break;
                };
                if !joined.is_empty() && front.len() >= DATA_IN_COPY_BELOW {
                    break;
                }
                let take = front.len().min(max - joined.len());
                joined.extend_from_slice(&front.split_to(take));
                if front.is_empty() {
                    self.parts.pop_front();
                }
            }
            joined.freeze()
        };
        self.left -= segment.len();
        segment
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(offset: u32, len: usize, fill: u8) -> (u32, Bytes) {
        (offset, Bytes::from(vec![fill; len]))
    }

    /// A command's buffer grows with what the Data-Out budget admitted, never straight to a
    /// large Expected Data Transfer Length a peer names: memory follows the budget.
    #[test]
    fn a_command_buffer_holds_room_only_for_admitted_data() {
        let mut params = Negotiated::defaults();
        params.immediate_data = true;
        params.initial_r2t = true;
        params.first_burst_length = 65536;
        params.max_burst_length = 262144;
        params.max_recv_data_segment_length = 65536;
        let mut conn = TargetConnection::new(
            params,
            ConnectionConfig {
                queue_depth: 4,
                discovery: false,
                data_out_limit: DataOutLimit::unlimited(),
                data_out_budget: 1 << 20,
            },
            None,
            1,
            100,
        );
        let limits = conn.receive_limits();
        let command = Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_: true,
            read: false,
            write: true,
            attr: TaskAttr::Simple,
            lun: [0; 8],
            itt: 7,
            expected_data_length: 1 << 30,
            cmd_sn: 1,
            exp_stat_sn: 100,
            cdb: Bytes::from_static(&[0x0a, 0, 0, 0, 0, 0]),
            bidi_read_length: None,
            data: Bytes::from(vec![5u8; 512]),
        });
        let mut wire = command.to_bytes(&limits);
        let frame = Framer::new(limits).decode(&mut wire).unwrap().unwrap();
        conn.on_frame(Ok(frame));
        let task = &conn.tasks[&7];
        assert_eq!(task.joined.len(), 512);
        // The immediate data and the one R2T of MaxBurstLength the budget admitted.
        assert_eq!(task.committed, 512 + 262144);
        assert!(
            task.joined.capacity() < 2 * (512 + 262144),
            "{}",
            task.joined.capacity()
        );
        // A Data-Out header for the admitted window is offered a sink; beyond it, none.
        let header = |offset: u32, len: usize| {
            let mut bhs = [0u8; BHS_LEN];
            bhs[0] = opcode::DATA_OUT;
            bhs[16..20].copy_from_slice(&7u32.to_be_bytes());
            bhs[40..44].copy_from_slice(&offset.to_be_bytes());
            Header {
                bhs,
                ahs: Bytes::new(),
                len: BHS_LEN,
                data_len: len,
                padding: 0,
            }
        };
        assert!(conn.data_out_sink(&header(512, 65536)).is_some());
        assert!(
            conn.data_out_sink(&header(1024, 65536)).is_none(),
            "not in order"
        );
        assert!(
            conn.data_out_sink(&header(512, 1 << 20)).is_none(),
            "beyond the admitted"
        );
    }

    #[test]
    fn assemble_joins_segments_whatever_their_order() {
        // One segment: passed on as it is (same allocation).
        let one = Bytes::from(vec![7u8; 100]);
        let joined = assemble(vec![(0, one.clone())], 100);
        assert_eq!(joined.as_ptr(), one.as_ptr());
        // In order.
        let joined = assemble(vec![piece(0, 10, 1), piece(10, 20, 2)], 30);
        assert_eq!(&joined[..], [vec![1u8; 10], vec![2u8; 20]].concat());
        // Out of order and overlapping: placed by offset.
        let joined = assemble(vec![piece(10, 20, 2), piece(0, 12, 1)], 30);
        assert_eq!(&joined[..12], &[1u8; 12]);
        assert_eq!(&joined[12..], &[2u8; 18]);
        // Gaps stay zero.
        let joined = assemble(vec![piece(20, 10, 3)], 30);
        assert_eq!(&joined[..], [vec![0u8; 20], vec![3u8; 10]].concat());
    }
}
