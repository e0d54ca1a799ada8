//! Initiator side of one session in the full-feature phase, sans-I/O.
//!
//! Used by reel's tests and benchmark to drive any iSCSI target (reel, tgt, LIO).
//! Submit work with [`InitiatorSession::scsi`] and friends, write what
//! [`InitiatorSession::poll_transmit`] yields, feed received PDUs to
//! [`InitiatorSession::on_pdu`] and collect [`Completion`]s.
//!
//! Invariants: non-immediate commands leave only inside the target's CmdSN
//! window (§4.2.2.1); write data leaves only as immediate data, unsolicited
//! data within FirstBurstLength, or in answer to an R2T (§13.10, §13.11).

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};

use crate::params::Negotiated;
use crate::pdu::*;
use crate::session::TmfFunction;

/// The end of a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub itt: u32,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Scsi(ScsiResult),
    /// NOP-In answer to our NOP-Out, with the echoed ping data.
    Nop(Bytes),
    /// Task management response code (§11.6.1).
    TaskManagement(u8),
    /// Text response data (all continuation PDUs joined).
    Text(Bytes),
    /// Logout response code (§11.15.1).
    Logout(u8),
    /// The target rejected the PDU (§11.17.1 reason).
    Rejected(u8),
    /// The iSCSI response code was not "command completed at target" (§11.4.3).
    TargetFailure(u8),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScsiResult {
    pub status: u8,
    pub sense: Option<Bytes>,
    pub data: Bytes,
    /// Positive: underflow (that many expected bytes did not come); negative: overflow.
    pub residual: i64,
}

/// Things the target said that are not task completions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Async Message (§11.9): event code, parameters, sense data.
    Async {
        event: u8,
        parameters: [u16; 3],
        data: Bytes,
    },
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitiatorError {
    #[error("protocol error from target: {0}")]
    Protocol(String),
}

#[derive(Debug)]
enum Kind {
    Scsi {
        data_out: Bytes,
        /// Assembled Data-In, allocated when a second PDU (or one not at offset 0) arrives.
        data_in: BytesMut,
        /// The first Data-In PDU's payload at offset 0, kept as it came (no copy): most reads
        /// fit in one PDU.
        first_in: Option<Bytes>,
        expected_in: u32,
        received_in: u32,
    },
    Nop,
    Tmf,
    Text {
        collected: BytesMut,
    },
    Logout,
}

#[derive(Debug)]
struct Task {
    lun: [u8; 8],
    /// CmdSN the task's command carried (RefCmdSN of an ABORT TASK for it).
    cmd_sn: u32,
    kind: Kind,
}

/// Knobs that are not negotiated keys.
#[derive(Clone, Debug, Default)]
pub struct SessionConfig {
    /// Send Data-In payloads nowhere (benchmarks of the target's read path); `data` in the
    /// result is then empty and only lengths are tracked.
    pub discard_data_in: bool,
}

pub struct InitiatorSession {
    params: Negotiated,
    config: SessionConfig,
    cmd_sn: u32,
    exp_stat_sn: u32,
    max_cmd_sn: u32,
    next_itt: u32,
    tasks: HashMap<u32, Task>,
    /// Non-immediate PDUs waiting for the command window to open.
    held: VecDeque<Pdu>,
    outbox: VecDeque<Pdu>,
    completions: VecDeque<Completion>,
    notices: VecDeque<Notice>,
}

fn sn_le(a: u32, b: u32) -> bool {
    a == b || b.wrapping_sub(a) < 0x8000_0000
}

/// Encodes a LUN for the 8-byte field (SAM-5 §4.7: peripheral < 256, flat space < 16384).
pub fn lun_field(lun: u64) -> [u8; 8] {
    let mut out = [0u8; 8];
    if lun < 256 {
        out[1] = lun as u8;
    } else {
        out[0] = 0x40 | ((lun >> 8) as u8 & 0x3f);
        out[1] = lun as u8;
    }
    out
}

impl InitiatorSession {
    /// Starts the full-feature phase after login: `cmd_sn` is the next CmdSN to use,
    /// `exp_stat_sn` the StatSN after the final login response, `max_cmd_sn` from it.
    pub fn new(
        params: Negotiated,
        config: SessionConfig,
        cmd_sn: u32,
        exp_stat_sn: u32,
        max_cmd_sn: u32,
    ) -> Self {
        InitiatorSession {
            params,
            config,
            cmd_sn,
            exp_stat_sn,
            max_cmd_sn,
            next_itt: 1,
            tasks: HashMap::new(),
            held: VecDeque::new(),
            outbox: VecDeque::new(),
            completions: VecDeque::new(),
            notices: VecDeque::new(),
        }
    }

    pub fn params(&self) -> &Negotiated {
        &self.params
    }

    pub fn send_limits(&self) -> FrameLimits {
        FrameLimits {
            header_digest: self.params.header_digest,
            data_digest: self.params.data_digest,
            max_data_segment: self.params.max_xmit_data_segment_length,
        }
    }

    pub fn receive_limits(&self) -> FrameLimits {
        FrameLimits {
            header_digest: self.params.header_digest,
            data_digest: self.params.data_digest,
            max_data_segment: self.params.max_recv_data_segment_length,
        }
    }

    /// Tasks submitted and not completed.
    pub fn in_flight(&self) -> usize {
        self.tasks.len()
    }

    /// Non-immediate commands the target's window would accept right now.
    pub fn window(&self) -> u32 {
        if sn_le(self.cmd_sn, self.max_cmd_sn) {
            self.max_cmd_sn.wrapping_sub(self.cmd_sn).wrapping_add(1)
        } else {
            0
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Pdu> {
        self.outbox.pop_front()
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    fn alloc_itt(&mut self) -> u32 {
        loop {
            let itt = self.next_itt;
            self.next_itt = self.next_itt.wrapping_add(1);
            if itt != RESERVED_TAG && !self.tasks.contains_key(&itt) {
                return itt;
            }
        }
    }

    /// Registers a task of `kind` at the current CmdSN under a fresh Initiator Task Tag.
    fn open_task(&mut self, lun: [u8; 8], kind: Kind) -> u32 {
        let itt = self.alloc_itt();
        let cmd_sn = self.cmd_sn;
        self.tasks.insert(itt, Task { lun, cmd_sn, kind });
        itt
    }

    /// Queues a non-immediate PDU, consuming a CmdSN; it leaves when the window allows.
    fn queue_command(&mut self, pdu: Pdu) {
        self.held.push_back(pdu);
        self.release_held();
    }

    fn release_held(&mut self) {
        while let Some(front) = self.held.front() {
            let cmd_sn = match front {
                Pdu::ScsiCommand(p) => p.cmd_sn,
                Pdu::NopOut(p) => p.cmd_sn,
                Pdu::TaskMgmtRequest(p) => p.cmd_sn,
                Pdu::TextRequest(p) => p.cmd_sn,
                Pdu::LogoutRequest(p) => p.cmd_sn,
                // Data-Out queued behind its command goes with it.
                _ => {
                    let pdu = self.held.pop_front().expect("front exists");
                    self.outbox.push_back(pdu);
                    continue;
                }
            };
            if !sn_le(cmd_sn, self.max_cmd_sn) {
                break;
            }
            let pdu = self.held.pop_front().expect("front exists");
            self.outbox.push_back(pdu);
        }
    }

    fn take_cmd_sn(&mut self) -> u32 {
        let sn = self.cmd_sn;
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        sn
    }

    /// Submits a SCSI command. `data_out` is written (W bit when non-empty);
    /// `data_in_len` bytes are expected back (R bit when non-zero).
    pub fn scsi(
        &mut self,
        lun: u64,
        cdb: &[u8],
        data_out: Bytes,
        data_in_len: u32,
        attr: TaskAttr,
    ) -> u32 {
        let itt = self.alloc_itt();
        let lun = lun_field(lun);
        let write_len = data_out.len() as u32;
        let max_seg = self.params.max_xmit_data_segment_length.max(512);
        let first_burst = self.params.first_burst_length.min(write_len);
        let immediate_len = if self.params.immediate_data {
            first_burst.min(max_seg)
        } else {
            0
        };
        let unsolicited_end = if self.params.initial_r2t {
            immediate_len
        } else {
            first_burst
        };
        let cmd = ScsiCommand {
            immediate: false,
            final_: unsolicited_end == immediate_len,
            read: data_in_len > 0,
            write: write_len > 0,
            attr,
            lun,
            itt,
            expected_data_length: if write_len > 0 {
                write_len
            } else {
                data_in_len
            },
            cmd_sn: self.take_cmd_sn(),
            exp_stat_sn: self.exp_stat_sn,
            cdb: Bytes::copy_from_slice(cdb),
            bidi_read_length: None,
            data: data_out.slice(..immediate_len as usize),
        };
        // Allocated on demand (see `Kind::Scsi::first_in`).
        let data_in = BytesMut::new();
        self.tasks.insert(
            itt,
            Task {
                lun,
                cmd_sn: cmd.cmd_sn,
                kind: Kind::Scsi {
                    data_out: data_out.clone(),
                    data_in,
                    first_in: None,
                    expected_in: data_in_len,
                    received_in: 0,
                },
            },
        );
        self.queue_command(Pdu::ScsiCommand(cmd));
        // Unsolicited Data-Out (InitialR2T=No), one sequence ending with F (§13.10).
        self.queue_data_out(
            itt,
            lun,
            RESERVED_TAG,
            &data_out,
            immediate_len,
            unsolicited_end - immediate_len,
            true,
        );
        itt
    }

    #[allow(clippy::too_many_arguments)]
    fn queue_data_out(
        &mut self,
        itt: u32,
        lun: [u8; 8],
        ttt: u32,
        data: &Bytes,
        offset: u32,
        length: u32,
        held: bool,
    ) {
        let max_seg = self.params.max_xmit_data_segment_length.max(512);
        let mut sent = 0u32;
        let mut data_sn = 0u32;
        while sent < length {
            let len = (length - sent).min(max_seg);
            let start = (offset + sent) as usize;
            let pdu = Pdu::DataOut(DataOut {
                final_: sent + len == length,
                lun,
                itt,
                ttt,
                exp_stat_sn: self.exp_stat_sn,
                data_sn,
                buffer_offset: offset + sent,
                data: data.slice(start..start + len as usize),
            });
            if held {
                self.held.push_back(pdu);
            } else {
                self.outbox.push_back(pdu);
            }
            sent += len;
            data_sn += 1;
        }
        if held {
            self.release_held();
        }
    }

    /// Pings the target (NOP-Out with a tag, §11.18); completes with [`Outcome::Nop`].
    pub fn nop(&mut self, data: Bytes) -> u32 {
        let itt = self.open_task([0; 8], Kind::Nop);
        let pdu = Pdu::NopOut(NopOut {
            immediate: true,
            lun: [0; 8],
            itt,
            ttt: RESERVED_TAG,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            data,
        });
        self.outbox.push_back(pdu);
        itt
    }

    /// Sends a task management request (immediate, §11.5).
    pub fn task_management(&mut self, function: TmfFunction, lun: u64, referenced_itt: u32) -> u32 {
        let code = match function {
            TmfFunction::AbortTask => 1,
            TmfFunction::AbortTaskSet => 2,
            TmfFunction::ClearAca => 3,
            TmfFunction::ClearTaskSet => 4,
            TmfFunction::LogicalUnitReset => 5,
            TmfFunction::TargetWarmReset => 6,
            TmfFunction::TargetColdReset => 7,
            TmfFunction::TaskReassign => 8,
        };
        let lun = lun_field(lun);
        let ref_cmd_sn = match self.tasks.get(&referenced_itt) {
            Some(task) => task.cmd_sn,
            None => self.cmd_sn.wrapping_sub(1),
        };
        let itt = self.open_task(lun, Kind::Tmf);
        let pdu = Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function: code,
            lun,
            itt,
            referenced_task_tag: referenced_itt,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            // RefCmdSN: the CmdSN of the task to abort (§11.5.4); for a tag we don't know, the
            // last CmdSN used, so the target answers "task does not exist".
            ref_cmd_sn,
            exp_data_sn: 0,
        });
        self.outbox.push_back(pdu);
        itt
    }

    /// Sends a Text Request (e.g. `SendTargets=All` in a discovery session, §11.10).
    pub fn text(&mut self, data: Bytes) -> u32 {
        let itt = self.open_task(
            [0; 8],
            Kind::Text {
                collected: BytesMut::new(),
            },
        );
        let pdu = Pdu::TextRequest(TextRequest {
            immediate: false,
            final_: true,
            continue_: false,
            lun: [0; 8],
            itt,
            ttt: RESERVED_TAG,
            cmd_sn: self.take_cmd_sn(),
            exp_stat_sn: self.exp_stat_sn,
            data,
        });
        self.queue_command(pdu);
        itt
    }

    /// Logs out (reason 0: close the session, §11.14).
    pub fn logout(&mut self) -> u32 {
        let itt = self.open_task([0; 8], Kind::Logout);
        let pdu = Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason: 0,
            itt,
            cid: 0,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        });
        self.outbox.push_back(pdu);
        itt
    }

    fn update_window(&mut self, stat_sn: Option<u32>, exp_cmd_sn: u32, max_cmd_sn: u32) {
        if let Some(sn) = stat_sn
            && sn_le(self.exp_stat_sn, sn)
        {
            self.exp_stat_sn = sn.wrapping_add(1);
        }
        // §4.2.2.1: a MaxCmdSN below ExpCmdSN - 1 is invalid and ignored.
        if sn_le(exp_cmd_sn.wrapping_sub(1), max_cmd_sn) && sn_le(self.max_cmd_sn, max_cmd_sn) {
            self.max_cmd_sn = max_cmd_sn;
        }
        self.release_held();
    }

    fn finish(&mut self, itt: u32, outcome: Outcome) {
        self.tasks.remove(&itt);
        self.completions.push_back(Completion { itt, outcome });
    }

    /// Handles one PDU from the target.
    pub fn on_pdu(&mut self, pdu: Pdu) -> Result<(), InitiatorError> {
        match pdu {
            Pdu::DataIn(d) => {
                self.update_window(
                    d.has_status.then_some(d.stat_sn),
                    d.exp_cmd_sn,
                    d.max_cmd_sn,
                );
                let discard = self.config.discard_data_in;
                let Some(Task {
                    kind:
                        Kind::Scsi {
                            data_in,
                            first_in,
                            expected_in,
                            received_in,
                            ..
                        },
                    ..
                }) = self.tasks.get_mut(&d.itt)
                else {
                    return Err(InitiatorError::Protocol(format!(
                        "Data-In for unknown task {:#x}",
                        d.itt
                    )));
                };
                let end = d.buffer_offset as u64 + d.data.len() as u64;
                if end > *expected_in as u64 {
                    return Err(InitiatorError::Protocol(
                        "Data-In beyond the expected length".into(),
                    ));
                }
                if !discard {
                    if data_in.is_empty() && first_in.is_none() && d.buffer_offset == 0 {
                        *first_in = Some(d.data.clone());
                    } else {
                        if data_in.is_empty() {
                            *data_in = BytesMut::zeroed(*expected_in as usize);
                            if let Some(first) = first_in.take() {
                                data_in[..first.len()].copy_from_slice(&first);
                            }
                        }
                        data_in[d.buffer_offset as usize..end as usize].copy_from_slice(&d.data);
                    }
                }
                *received_in = (*received_in).max(end as u32);
                if d.has_status {
                    let residual = residual_of(d.overflow, d.underflow, d.residual);
                    let data = self.take_data_in(d.itt, residual);
                    self.finish(
                        d.itt,
                        Outcome::Scsi(ScsiResult {
                            status: d.status,
                            sense: None,
                            data,
                            residual,
                        }),
                    );
                }
            }
            Pdu::ScsiResponse(r) => {
                self.update_window(Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn);
                if !self.tasks.contains_key(&r.itt) {
                    return Err(InitiatorError::Protocol(format!(
                        "SCSI Response for unknown task {:#x}",
                        r.itt
                    )));
                }
                if r.response != 0 {
                    self.finish(r.itt, Outcome::TargetFailure(r.response));
                    return Ok(());
                }
                let sense = if r.data.len() >= 2 {
                    let len = u16::from_be_bytes([r.data[0], r.data[1]]) as usize;
                    (len > 0).then(|| r.data.slice(2..(2 + len).min(r.data.len())))
                } else {
                    None
                };
                let residual = residual_of(r.overflow, r.underflow, r.residual);
                let data = self.take_data_in(r.itt, residual);
                self.finish(
                    r.itt,
                    Outcome::Scsi(ScsiResult {
                        status: r.status,
                        sense,
                        data,
                        residual,
                    }),
                );
            }
            Pdu::R2t(r) => {
                self.update_window(None, r.exp_cmd_sn, r.max_cmd_sn);
                let Some(Task {
                    lun,
                    kind: Kind::Scsi { data_out, .. },
                    ..
                }) = self.tasks.get(&r.itt)
                else {
                    return Err(InitiatorError::Protocol(format!(
                        "R2T for unknown task {:#x}",
                        r.itt
                    )));
                };
                let end = r.buffer_offset as u64 + r.desired_length as u64;
                if end > data_out.len() as u64 {
                    return Err(InitiatorError::Protocol(
                        "R2T beyond the data we have".into(),
                    ));
                }
                let (lun, data) = (*lun, data_out.clone());
                self.queue_data_out(
                    r.itt,
                    lun,
                    r.ttt,
                    &data,
                    r.buffer_offset,
                    r.desired_length,
                    false,
                );
            }
            Pdu::NopIn(n) => {
                let is_answer = n.itt != RESERVED_TAG;
                self.update_window(is_answer.then_some(n.stat_sn), n.exp_cmd_sn, n.max_cmd_sn);
                if is_answer {
                    if matches!(
                        self.tasks.get(&n.itt),
                        Some(Task {
                            kind: Kind::Nop,
                            ..
                        })
                    ) {
                        self.finish(n.itt, Outcome::Nop(n.data));
                    }
                } else if n.ttt != RESERVED_TAG {
                    // The target pings us: answer with its TTT (§11.18).
                    let pdu = Pdu::NopOut(NopOut {
                        immediate: true,
                        lun: n.lun,
                        itt: RESERVED_TAG,
                        ttt: n.ttt,
                        cmd_sn: self.cmd_sn,
                        exp_stat_sn: self.exp_stat_sn,
                        data: Bytes::new(),
                    });
                    self.outbox.push_back(pdu);
                }
            }
            Pdu::TaskMgmtResponse(t) => {
                self.update_window(Some(t.stat_sn), t.exp_cmd_sn, t.max_cmd_sn);
                self.finish(t.itt, Outcome::TaskManagement(t.response));
            }
            Pdu::TextResponse(t) => {
                self.update_window(Some(t.stat_sn), t.exp_cmd_sn, t.max_cmd_sn);
                let Some(Task {
                    kind: Kind::Text { collected },
                    ..
                }) = self.tasks.get_mut(&t.itt)
                else {
                    return Err(InitiatorError::Protocol(
                        "Text Response for unknown task".into(),
                    ));
                };
                collected.extend_from_slice(&t.data);
                if t.final_ {
                    let data = collected.split().freeze();
                    self.finish(t.itt, Outcome::Text(data));
                } else {
                    // Continue a long answer with an empty request carrying its TTT (RFC 7143 §11.10).
                    let pdu = Pdu::TextRequest(TextRequest {
                        immediate: false,
                        final_: true,
                        continue_: false,
                        lun: [0; 8],
                        itt: t.itt,
                        ttt: t.ttt,
                        cmd_sn: self.take_cmd_sn(),
                        exp_stat_sn: self.exp_stat_sn,
                        data: Bytes::new(),
                    });
                    self.queue_command(pdu);
                }
            }
            Pdu::LogoutResponse(l) => {
                self.update_window(Some(l.stat_sn), l.exp_cmd_sn, l.max_cmd_sn);
                self.finish(l.itt, Outcome::Logout(l.response));
            }
            Pdu::Reject(r) => {
                self.update_window(Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn);
                if r.data.len() >= BHS_LEN {
                    let itt = u32::from_be_bytes(r.data[16..20].try_into().expect("4 bytes"));
                    if self.tasks.contains_key(&itt) {
                        self.finish(itt, Outcome::Rejected(r.reason));
                    }
                }
            }
            Pdu::AsyncMessage(a) => {
                self.update_window(Some(a.stat_sn), a.exp_cmd_sn, a.max_cmd_sn);
                self.notices.push_back(Notice::Async {
                    event: a.event,
                    parameters: a.parameters,
                    data: a.data,
                });
            }
            other => {
                return Err(InitiatorError::Protocol(format!(
                    "unexpected opcode {:#04x} from target",
                    other.opcode()
                )));
            }
        }
        Ok(())
    }

    fn take_data_in(&mut self, itt: u32, residual: i64) -> Bytes {
        match self.tasks.get_mut(&itt) {
            Some(Task {
                kind:
                    Kind::Scsi {
                        data_in,
                        first_in,
                        received_in,
                        expected_in,
                        ..
                    },
                ..
            }) => {
                let valid = if residual > 0 {
                    (*expected_in as i64 - residual).max(0) as usize
                } else {
                    *received_in as usize
                };
                if let Some(mut first) = first_in.take() {
                    first.truncate(valid.min(first.len()));
                    return first;
                }
                let mut data = std::mem::take(data_in);
                data.truncate(valid.min(data.len()));
                data.freeze()
            }
            _ => Bytes::new(),
        }
    }

    /// The connection is gone: every task fails. Returns their tags.
    pub fn connection_lost(&mut self) -> Vec<u32> {
        self.held.clear();
        self.outbox.clear();
        self.tasks.drain().map(|(itt, _)| itt).collect()
    }
}

fn residual_of(overflow: bool, underflow: bool, count: u32) -> i64 {
    if underflow {
        count as i64
    } else if overflow {
        -(count as i64)
    } else {
        0
    }
}
