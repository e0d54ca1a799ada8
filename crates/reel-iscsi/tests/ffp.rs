//! Full-feature phase: initiator and target state machines pumped through byte
//! buffers, including tampered traffic (RFC 7143 §4, §7, §11).

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use reel_iscsi::initiator::{InitiatorSession, Outcome, ScsiResult, SessionConfig};
use reel_iscsi::params::Negotiated;
use reel_iscsi::pdu::*;
use reel_iscsi::session::*;

/// A fake logical unit: READ-like CDBs (first byte 0x28) return a pattern of the
/// requested length, WRITE-like ones (0x2a) are recorded, 0x00 fails with sense.
#[derive(Default)]
struct Device {
    written: Vec<Bytes>,
    executed: usize,
    /// Hold completions instead of answering at once (to test aborts and drops).
    hold: bool,
    held: Vec<u32>,
    /// Return this many bytes on reads instead of the requested length.
    short_read: Option<usize>,
    /// Commands handed over with their Data-Out refused.
    refused: usize,
    /// Return reads in buffers of these lengths (the last one takes the rest); each buffer
    /// returned is kept in `read_parts_sent`.
    read_parts: Option<Vec<usize>>,
    read_parts_sent: Vec<Bytes>,
}

fn check(key: u8, asc: u8) -> ScsiOutcome {
    let mut sense = vec![0u8; 18];
    sense[0] = 0x70;
    sense[2] = key;
    sense[7] = 10;
    sense[12] = asc;
    ScsiOutcome {
        status: 2,
        sense: Some(Bytes::from(sense)),
        data_in: Vec::new(),
    }
}

fn pattern(len: usize) -> Bytes {
    Bytes::from((0..len).map(|i| (i * 7 % 251) as u8).collect::<Vec<_>>())
}

impl Device {
    fn run(&mut self, command: &Command) -> ScsiOutcome {
        self.executed += 1;
        if command.data_out_refused {
            // What a SCSI device answers: ILLEGAL REQUEST, INVALID FIELD IN CDB.
            assert!(command.data_out.is_empty());
            self.refused += 1;
            return check(0x05, 0x24);
        }
        match command.cdb[0] {
            0x28 => {
                // No W bit, no Data-Out: the expected length is the Data-In's.
                assert!(command.data_out.is_empty(), "a READ carries Data-Out");
                let len = self.short_read.unwrap_or(command.data_in_len as usize);
                let mut data = pattern(len);
                let mut parts = Vec::new();
                for &part in self.read_parts.iter().flatten() {
                    parts.push(data.split_to(part.min(data.len())));
                }
                parts.push(data);
                self.read_parts_sent.extend(parts.iter().cloned());
                ScsiOutcome {
                    status: 0,
                    sense: None,
                    data_in: parts,
                }
            }
            0x2a => {
                self.written.push(command.data_out.clone());
                ScsiOutcome::default()
            }
            // ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
            _ => check(0x05, 0x20),
        }
    }
}

/// Rewrites an initiator PDU's wire bytes before the target sees them.
type Tamper = Box<dyn FnMut(&Pdu, &mut BytesMut)>;

struct Pair {
    initiator: InitiatorSession,
    target: TargetConnection,
    to_target: BytesMut,
    to_initiator: BytesMut,
    device: Device,
    closed: Option<CloseReason>,
    completions: Vec<(u32, Outcome)>,
    /// Applied to each initiator PDU's bytes before the target sees them.
    tamper: Option<Tamper>,
    pdus_to_initiator: Vec<Pdu>,
    /// The same PDUs as the target made them (before encoding: their buffers are its own).
    pdus_from_target: Vec<Pdu>,
}

fn params(tweak: impl FnOnce(&mut Negotiated)) -> Negotiated {
    let mut p = Negotiated::defaults();
    p.max_recv_data_segment_length = 65536;
    p.max_xmit_data_segment_length = 65536;
    p.max_burst_length = 262144;
    p.first_burst_length = 65536;
    p.immediate_data = true;
    p.initial_r2t = false;
    p.max_outstanding_r2t = 1;
    tweak(&mut p);
    p
}

impl Pair {
    fn new(p: Negotiated, queue_depth: u32) -> Pair {
        Pair::with_config(
            p,
            ConnectionConfig {
                queue_depth,
                discovery: false,
                data_out_limit: DataOutLimit::unlimited(),
                data_out_budget: u64::MAX,
            },
        )
    }

    /// A pair whose target connection has `config` (Data-Out limit and budget).
    fn with_config(p: Negotiated, config: ConnectionConfig) -> Pair {
        let queue_depth = config.queue_depth;
        let target = TargetConnection::new(p.clone(), config, None, 1, 100);
        let initiator = InitiatorSession::new(p, SessionConfig::default(), 1, 100, queue_depth);
        Pair {
            initiator,
            target,
            to_target: BytesMut::new(),
            to_initiator: BytesMut::new(),
            device: Device::default(),
            closed: None,
            completions: Vec::new(),
            tamper: None,
            pdus_to_initiator: Vec::new(),
            pdus_from_target: Vec::new(),
        }
    }

    /// Moves bytes both ways until nothing changes.
    fn pump(&mut self) {
        for _ in 0..10_000 {
            let mut progress = false;
            while let Some(pdu) = self.initiator.poll_transmit() {
                let mut bytes = pdu.to_bytes(&self.initiator.send_limits());
                if let Some(tamper) = self.tamper.as_mut() {
                    tamper(&pdu, &mut bytes);
                }
                self.to_target.extend_from_slice(&bytes);
                progress = true;
            }
            if self.closed.is_none() {
                let framer = Framer::new(self.target.receive_limits());
                loop {
                    match framer.decode(&mut self.to_target) {
                        Ok(Some(frame)) => self.target.on_frame(Ok(frame)),
                        Ok(None) => break,
                        Err(e) => {
                            self.target.on_frame(Err(e));
                            self.to_target.clear();
                            break;
                        }
                    }
                    progress = true;
                }
            }
            while let Some(event) = self.target.poll_event() {
                progress = true;
                match event {
                    Event::Execute(command) => {
                        if self.device.hold {
                            self.device.held.push(command.itt);
                            self.device.run(&command);
                        } else {
                            let outcome = self.device.run(&command);
                            self.target.complete(command.itt, outcome);
                        }
                    }
                    Event::TaskManagement { itt, .. } => self
                        .target
                        .tmf_complete(itt, tmf_response::FUNCTION_COMPLETE),
                    Event::Close(reason) => self.closed = Some(reason),
                }
            }
            while let Some(pdu) = self.target.poll_transmit() {
                self.to_initiator
                    .extend_from_slice(&pdu.to_bytes(&self.target.send_limits()));
                self.pdus_from_target.push(pdu);
                progress = true;
            }
            let framer = Framer::new(self.initiator.receive_limits());
            while let Ok(Some(frame)) = framer.decode(&mut self.to_initiator) {
                let pdu = Pdu::parse(frame).expect("target sends valid PDUs");
                self.pdus_to_initiator.push(pdu.clone());
                self.initiator
                    .on_pdu(pdu)
                    .expect("initiator accepts target PDUs");
                progress = true;
            }
            while let Some(c) = self.initiator.poll_completion() {
                self.completions.push((c.itt, c.outcome));
            }
            if !progress {
                return;
            }
        }
        panic!("pump did not settle");
    }

    /// A READ of `len` bytes from `lun`.
    fn read(&mut self, lun: u64, len: u32) -> u32 {
        self.initiator
            .scsi(lun, &read_cdb(), Bytes::new(), len, TaskAttr::Simple)
    }

    /// A WRITE of `data` to `lun`.
    fn write(&mut self, lun: u64, data: Bytes) -> u32 {
        self.initiator
            .scsi(lun, &write_cdb(), data, 0, TaskAttr::Simple)
    }

    /// Completes every command the device holds, with GOOD status and `data_in`.
    fn complete_held(&mut self, data_in: Bytes) {
        for itt in std::mem::take(&mut self.device.held) {
            let outcome = ScsiOutcome {
                status: 0,
                sense: None,
                data_in: vec![data_in.clone()],
            };
            self.target.complete(itt, outcome);
        }
    }

    /// The PDUs of one kind the target sent, picked by `pick`.
    fn sent<'a, T>(&'a self, pick: impl Fn(&'a Pdu) -> Option<T>) -> Vec<T> {
        self.pdus_to_initiator.iter().filter_map(pick).collect()
    }

    fn r2ts(&self) -> Vec<&R2t> {
        self.sent(|p| if let Pdu::R2t(r) = p { Some(r) } else { None })
    }

    fn result(&self, itt: u32) -> &ScsiResult {
        match self.completions.iter().find(|(i, _)| *i == itt) {
            Some((_, Outcome::Scsi(r))) => r,
            other => panic!("no SCSI result for {itt}: {other:?}"),
        }
    }
}

fn read_cdb() -> [u8; 10] {
    [0x28, 0, 0, 0, 0, 0, 0, 0, 0, 0]
}
fn write_cdb() -> [u8; 10] {
    [0x2a, 0, 0, 0, 0, 0, 0, 0, 0, 0]
}

#[test]
fn read_is_split_into_data_in_pdus_with_collapsed_status() {
    let mut pair = Pair::new(params(|_| {}), 8);
    let itt = pair.read(0, 1 << 20);
    pair.pump();
    let result = pair.result(itt);
    assert_eq!(result.status, 0);
    assert_eq!(result.residual, 0);
    assert_eq!(result.data, pattern(1 << 20));
    let data_ins: Vec<&DataIn> = pair.sent(|p| {
        if let Pdu::DataIn(d) = p {
            Some(d)
        } else {
            None
        }
    });
    // 1 MiB in 64 KiB segments; F at the end of each 256 KiB burst (§13.13); status on the last only.
    assert_eq!(data_ins.len(), 16);
    assert_eq!(data_ins.iter().filter(|d| d.final_).count(), 4);
    assert!(data_ins.last().unwrap().has_status);
    assert_eq!(data_ins.iter().filter(|d| d.has_status).count(), 1);
    assert!(
        data_ins
            .iter()
            .enumerate()
            .all(|(i, d)| d.data_sn == i as u32 && d.buffer_offset == (i as u32) << 16)
    );
    assert!(
        !pair
            .pdus_to_initiator
            .iter()
            .any(|p| matches!(p, Pdu::ScsiResponse(_)))
    );
    assert_eq!(pair.target.task_count(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Data-In handed over in buffers of any sizes reaches the initiator whole and in order,
    /// truncated to the expected length, in segments no longer than the initiator takes, with
    /// F at the end of each burst; a buffer of DATA_IN_COPY_BELOW or more is sent as slices of
    /// itself, not copied.
    #[test]
    fn data_in_in_several_buffers_arrives_whole_and_large_buffers_are_not_copied(
        sizes in proptest::collection::vec(
            prop_oneof![0usize..64, 1usize..(DATA_IN_COPY_BELOW + 100), 1usize..200_000],
            0..8,
        ),
        expected in 1u32..400_000,
        short in proptest::option::of(0usize..400_000),
    ) {
        let mut pair = Pair::new(params(|_| {}), 8);
        pair.device.read_parts = Some(sizes);
        pair.device.short_read = short;
        let itt = pair.read(0, expected);
        pair.pump();
        let available = short.unwrap_or(expected as usize);
        let sent = available.min(expected as usize);
        let result = pair.result(itt).clone();
        prop_assert_eq!(result.status, 0);
        prop_assert_eq!(result.data, pattern(available).slice(..sent));
        let data_ins: Vec<&DataIn> = pair
            .pdus_from_target
            .iter()
            .filter_map(|p| match p {
                Pdu::DataIn(d) => Some(d),
                _ => None,
            })
            .collect();
        let mut offset = 0u32;
        let mut burst = 0u32;
        for (i, d) in data_ins.iter().enumerate() {
            prop_assert_eq!(d.data_sn, i as u32);
            prop_assert_eq!(d.buffer_offset, offset);
            prop_assert!(!d.data.is_empty() && d.data.len() <= 65536);
            offset += d.data.len() as u32;
            burst += d.data.len() as u32;
            prop_assert!(burst <= 262_144);
            let last = i + 1 == data_ins.len();
            prop_assert_eq!(d.final_, last || burst == 262_144, "F at PDU {}", i);
            if d.final_ {
                burst = 0;
            }
            // A PDU that carries bytes of a buffer with DATA_IN_COPY_BELOW or more of it still
            // to send is a slice of that buffer, at their place in it (shorter rests are copied
            // together with their neighbours).
            let mut start = 0usize;
            for part in &pair.device.read_parts_sent {
                let (from, to) = (d.buffer_offset as usize, d.buffer_offset as usize + d.data.len());
                let end = start + part.len();
                // What is left of the buffer to send (the command may take less of it).
                let rest = end.min(sent).saturating_sub(from.max(start));
                if rest >= DATA_IN_COPY_BELOW && from < end && start < to {
                    prop_assert!(
                        from >= start && d.data.as_ptr() as usize == part.as_ptr() as usize + (from - start),
                        "PDU {} ({} bytes at {}) copied bytes of the {}-byte buffer at {}",
                        i, d.data.len(), from, part.len(), start
                    );
                }
                start += part.len();
            }
        }
        prop_assert_eq!(offset as usize, sent);
    }
}

#[test]
fn short_and_long_reads_report_residuals() {
    let mut pair = Pair::new(params(|_| {}), 8);
    pair.device.short_read = Some(1000);
    let itt = pair.read(0, 4096);
    pair.pump();
    let r = pair.result(itt).clone();
    assert_eq!((r.residual, r.data.len()), (3096, 1000));
    pair.device.short_read = Some(10_000);
    let itt = pair.read(0, 4096);
    pair.pump();
    let r = pair.result(itt);
    assert_eq!((r.residual, r.data.len()), (-(10_000 - 4096), 4096));
}

#[test]
fn write_with_immediate_and_unsolicited_data_then_r2ts() {
    let mut pair = Pair::new(params(|p| p.max_recv_data_segment_length = 16384), 8);
    // The initiator sends what the target can receive: mirror the limits.
    pair.initiator = InitiatorSession::new(
        params(|p| p.max_xmit_data_segment_length = 16384),
        SessionConfig::default(),
        1,
        100,
        8,
    );
    let data = pattern(1_000_000);
    let itt = pair.write(0, data.clone());
    pair.pump();
    assert_eq!(pair.result(itt).status, 0);
    assert_eq!(pair.device.written, vec![data]);
    let r2ts = pair
        .pdus_to_initiator
        .iter()
        .filter(|p| matches!(p, Pdu::R2t(_)))
        .count();
    // 64 KiB went unsolicited; the rest in bursts of at most 256 KiB.
    assert_eq!(r2ts, (1_000_000usize - 65536).div_ceil(262144));
}

/// A write longer than the LUN's limit: nothing of it is kept or solicited, the device answers
/// it (CHECK CONDITION), the connection goes on, and a write within the limit still works.
#[test]
fn write_over_the_lun_limit_is_refused_without_buffering_or_r2t() {
    for (immediate, initial_r2t) in [(true, false), (false, true), (true, true)] {
        let p = params(|p| {
            p.immediate_data = immediate;
            p.initial_r2t = initial_r2t;
        });
        let mut pair = Pair::with_config(
            p,
            ConnectionConfig {
                queue_depth: 8,
                discovery: false,
                // LUN 1 takes up to 1 MiB per command, others 4 KiB.
                data_out_limit: DataOutLimit::new(|lun| if lun[1] == 1 { 1 << 20 } else { 4096 }),
                data_out_budget: u64::MAX,
            },
        );
        let big = pair.write(1, pattern(4 << 20));
        let small = pair.write(1, pattern(1 << 20));
        let other_lun = pair.write(0, pattern(4097));
        pair.pump();
        assert!(pair.closed.is_none(), "{:?}", pair.closed);
        let r = pair.result(big);
        assert_eq!(r.status, 2);
        assert_eq!(r.sense.as_ref().map(|s| (s[2], s[12])), Some((0x05, 0x24)));
        assert_eq!(pair.result(small).status, 0);
        assert_eq!(pair.result(other_lun).status, 2);
        assert_eq!(pair.device.refused, 2);
        assert_eq!(pair.device.written, vec![pattern(1 << 20)]);
        // R2Ts only for the write within the limit.
        let r2t_itts: std::collections::BTreeSet<u32> = pair.r2ts().iter().map(|r| r.itt).collect();
        assert!(!r2t_itts.contains(&big) && !r2t_itts.contains(&other_lun));
        assert!(r2t_itts.contains(&small));
        assert_eq!(pair.target.task_count(), 0);
    }
}

/// Bytes the target asked for with R2Ts so far.
fn solicited(pair: &Pair) -> u64 {
    pair.r2ts()
        .iter()
        .map(|r| u64::from(r.desired_length))
        .sum()
}

/// With commands held on the device, R2Ts stop at the connection's Data-Out budget and resume
/// as running commands end; every write still completes, in order, with its data.
#[test]
fn data_out_beyond_the_budget_waits_for_running_commands() {
    let p = params(|p| {
        p.immediate_data = false;
        p.initial_r2t = true;
        p.max_outstanding_r2t = 4;
    });
    let mut pair = Pair::with_config(
        p,
        ConnectionConfig {
            queue_depth: 16,
            discovery: false,
            data_out_limit: DataOutLimit::unlimited(),
            data_out_budget: 1 << 20,
        },
    );
    pair.device.hold = true;
    let data: Vec<Bytes> = (0..8)
        .map(|i| Bytes::from(vec![i as u8; 512 << 10]))
        .collect();
    let itts: Vec<u32> = data.iter().map(|d| pair.write(0, d.clone())).collect();
    pair.pump();
    // Two 512 KiB writes fill the 1 MiB budget; they run (held), the rest wait for R2Ts.
    assert_eq!(pair.device.held.len(), 2);
    assert_eq!(solicited(&pair), 1 << 20);
    let mut completed = 0u64;
    while !pair.device.held.is_empty() {
        let itt = pair.device.held.remove(0);
        pair.target.complete(itt, ScsiOutcome::default());
        completed += 512 << 10;
        pair.pump();
        assert!(
            solicited(&pair) - completed <= 1 << 20,
            "{} bytes admitted with {completed} released",
            solicited(&pair)
        );
    }
    assert_eq!(pair.device.written, data);
    assert!(itts.iter().all(|itt| pair.result(*itt).status == 0));
    assert_eq!(pair.target.task_count(), 0);
}

#[test]
fn write_with_initial_r2t_and_no_immediate_data() {
    let p = params(|p| {
        p.immediate_data = false;
        p.initial_r2t = true;
        p.max_outstanding_r2t = 4;
    });
    let mut pair = Pair::new(p, 8);
    let data = pattern(3 * 262144 + 5);
    let itt = pair.write(0, data.clone());
    pair.pump();
    assert_eq!(pair.result(itt).status, 0);
    assert_eq!(pair.device.written, vec![data]);
    let r2ts = pair.r2ts();
    assert_eq!(r2ts.len(), 4);
    assert_eq!(r2ts[0].buffer_offset, 0);
    assert!(r2ts.iter().enumerate().all(|(i, r)| r.r2t_sn == i as u32));
}

#[test]
fn window_limits_commands_in_flight_and_all_complete() {
    let mut pair = Pair::new(params(|_| {}), 4);
    pair.device.hold = true;
    let itts: Vec<u32> = (0..8).map(|_| pair.read(0, 512)).collect();
    pair.pump();
    // Only the window (4) reached the target.
    assert_eq!(pair.device.held.len(), 4);
    assert_eq!(pair.target.task_count(), 4);
    for round in 0..2 {
        pair.complete_held(pattern(512));
        pair.pump();
        assert_eq!(pair.completions.len(), 4 * (round + 1));
    }
    assert!(itts.iter().all(|itt| pair.result(*itt).status == 0));
    assert_eq!(pair.target.task_count(), 0);
}

#[test]
fn check_condition_carries_sense_in_a_scsi_response() {
    let mut pair = Pair::new(params(|_| {}), 8);
    let itt = pair
        .initiator
        .scsi(0, &[0u8; 6], Bytes::new(), 0, TaskAttr::Simple);
    pair.pump();
    let r = pair.result(itt);
    assert_eq!(r.status, 2);
    let sense = r.sense.as_ref().expect("sense data");
    assert_eq!((sense[2] & 0x0f, sense[12]), (0x05, 0x20));
}

#[test]
fn commands_reach_the_device_in_cmdsn_order_even_when_a_write_waits_for_data() {
    let p = params(|p| {
        p.immediate_data = false;
        p.initial_r2t = true;
    });
    let mut pair = Pair::new(p, 8);
    let w = pair.write(0, pattern(100_000));
    let r = pair.read(0, 100);
    pair.pump();
    let order: Vec<u32> = pair.completions.iter().map(|(itt, _)| *itt).collect();
    assert_eq!(order, vec![w, r]);
}

fn rejects(pair: &Pair) -> Vec<u8> {
    pair.sent(|p| {
        if let Pdu::Reject(r) = p {
            Some(r.reason)
        } else {
            None
        }
    })
}

#[test]
fn bad_data_digest_is_rejected_and_ends_the_connection() {
    let p = params(|p| {
        p.header_digest = true;
        p.data_digest = true;
    });
    let mut pair = Pair::new(p, 8);
    pair.tamper = Some(Box::new(|pdu, bytes| {
        if matches!(pdu, Pdu::ScsiCommand(_)) {
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff; // the data digest's last byte
        }
    }));
    pair.write(0, pattern(4096));
    pair.pump();
    assert_eq!(rejects(&pair), vec![RejectReason::DataDigestError as u8]);
    assert!(matches!(pair.closed, Some(CloseReason::ProtocolError(_))));
    assert_eq!(pair.device.executed, 0);
}

#[test]
fn bad_header_digest_ends_the_connection_without_executing() {
    let p = params(|p| p.header_digest = true);
    let mut pair = Pair::new(p, 8);
    pair.tamper = Some(Box::new(|_, bytes| bytes[BHS_LEN] ^= 1));
    pair.read(0, 512);
    pair.pump();
    assert!(matches!(pair.closed, Some(CloseReason::ProtocolError(_))));
    assert_eq!(pair.device.executed, 0);
    assert_eq!(pair.target.task_count(), 0);
}

#[test]
fn commands_outside_the_cmdsn_window_are_ignored() {
    let mut pair = Pair::new(params(|_| {}), 4);
    pair.tamper = Some(Box::new(|pdu, bytes| {
        if let Pdu::ScsiCommand(c) = pdu
            && c.cdb[1] == 0xee
        {
            bytes[24..28].copy_from_slice(&(c.cmd_sn + 1000).to_be_bytes());
        }
    }));
    let mut cdb = read_cdb();
    cdb[1] = 0xee;
    pair.initiator
        .scsi(0, &cdb, Bytes::new(), 512, TaskAttr::Simple);
    pair.pump();
    assert_eq!(pair.device.executed, 0);
    assert!(pair.closed.is_none());
    assert!(pair.pdus_to_initiator.is_empty());
    assert_eq!(pair.target.task_count(), 0);
}

#[test]
fn data_segment_longer_than_negotiated_is_rejected_and_closes() {
    let mut pair = Pair::new(params(|p| p.max_recv_data_segment_length = 8192), 8);
    // The initiator believes it may send 64 KiB per PDU.
    pair.write(0, pattern(65536));
    pair.pump();
    assert_eq!(rejects(&pair), vec![RejectReason::ProtocolError as u8]);
    assert!(pair.closed.is_some());
    assert_eq!(pair.device.executed, 0);
}

#[test]
fn unsolicited_data_beyond_first_burst_fails_the_command() {
    let mut pair = Pair::new(params(|p| p.first_burst_length = 8192), 8);
    pair.initiator = InitiatorSession::new(
        params(|p| p.first_burst_length = 65536),
        SessionConfig::default(),
        1,
        100,
        8,
    );
    let itt = pair.write(0, pattern(65536));
    pair.pump();
    // §11.4.7.2: CHECK CONDITION, ABORTED COMMAND, "unexpected unsolicited data" (0Ch/0Ch).
    let r = pair.result(itt);
    assert_eq!(r.status, 2);
    let sense = r.sense.as_ref().unwrap();
    assert_eq!((sense[2] & 0x0f, sense[12], sense[13]), (0x0b, 0x0c, 0x0c));
    assert!(pair.closed.is_none());
    assert_eq!(pair.device.executed, 0);
    assert_eq!(pair.target.task_count(), 0);
    // The connection still works.
    let itt = pair.read(0, 100);
    pair.pump();
    assert_eq!(pair.result(itt).data.len(), 100);
}

#[test]
fn a_wrong_data_sn_fails_the_command_and_its_later_data_is_dropped() {
    let p = params(|p| {
        p.immediate_data = false;
        p.initial_r2t = true;
        p.max_recv_data_segment_length = 8192;
        p.max_xmit_data_segment_length = 8192;
    });
    let mut pair = Pair::new(p, 8);
    pair.tamper = Some(Box::new(|pdu, bytes| {
        if let Pdu::DataOut(d) = pdu
            && d.data_sn == 1
        {
            bytes[36..40].copy_from_slice(&7u32.to_be_bytes());
        }
    }));
    let itt = pair.write(0, pattern(40_000));
    pair.pump();
    let r = pair.result(itt);
    assert_eq!(r.status, 2);
    let sense = r.sense.as_ref().unwrap();
    assert_eq!((sense[2] & 0x0f, sense[12]), (0x0b, 0x4b));
    assert!(pair.closed.is_none());
    assert_eq!((pair.device.executed, pair.target.task_count()), (0, 0));
}

#[test]
fn pdus_in_the_wrong_phase_are_rejected() {
    let mut pair = Pair::new(params(|_| {}), 8);
    let login = Pdu::LoginRequest(LoginRequest {
        transit: true,
        continue_: false,
        csg: 1,
        nsg: 3,
        version_max: 0,
        version_min: 0,
        isid: [0; 6],
        tsih: 0,
        itt: 9,
        cid: 0,
        cmd_sn: 1,
        exp_stat_sn: 0,
        data: Bytes::new(),
    });
    let nop_in = Pdu::NopIn(NopIn {
        lun: [0; 8],
        itt: 3,
        ttt: RESERVED_TAG,
        stat_sn: 0,
        exp_cmd_sn: 0,
        max_cmd_sn: 0,
        data: Bytes::new(),
    });
    for pdu in [login, nop_in] {
        pair.to_target
            .extend_from_slice(&pdu.to_bytes(&FrameLimits::default()));
    }
    let mut unknown = [0u8; BHS_LEN];
    unknown[0] = 0x1c; // a reserved initiator opcode
    pair.to_target.extend_from_slice(&unknown);
    pair.pump();
    assert_eq!(
        rejects(&pair),
        vec![
            RejectReason::ProtocolError as u8,
            RejectReason::ProtocolError as u8,
            RejectReason::CommandNotSupported as u8
        ]
    );
    assert!(pair.closed.is_none());
    // The connection still works.
    let itt = pair.read(0, 100);
    pair.pump();
    assert_eq!(pair.result(itt).data.len(), 100);
}

#[test]
fn truncated_pdu_waits_then_connection_loss_leaks_nothing() {
    let mut pair = Pair::new(params(|_| {}), 8);
    pair.device.hold = true;
    let _running = pair.read(0, 512);
    pair.pump();
    // Half a write command with its data: the target waits for the rest.
    let itt = pair.write(0, pattern(4096));
    let _ = itt;
    let pdu = pair.initiator.poll_transmit().unwrap();
    let bytes = pdu.to_bytes(&pair.initiator.send_limits());
    pair.to_target.extend_from_slice(&bytes[..bytes.len() / 2]);
    pair.pump();
    assert_eq!(pair.target.task_count(), 1);
    let executing = pair.target.connection_lost();
    assert_eq!(executing.len(), 1);
    // The running task finishes on the device afterwards: swallowed, nothing leaks.
    pair.complete_held(Bytes::new());
    assert_eq!(pair.target.task_count(), 0);
    assert!(pair.target.poll_transmit().is_none());
}

#[test]
fn abort_task_answers_after_the_task_ends_and_suppresses_its_response() {
    let mut pair = Pair::new(params(|_| {}), 8);
    pair.device.hold = true;
    let victim = pair.read(0, 512);
    pair.pump();
    let tmf = pair
        .initiator
        .task_management(TmfFunction::AbortTask, 0, victim);
    pair.pump();
    assert!(
        pair.completions.is_empty(),
        "no TMF response while the task still runs"
    );
    pair.complete_held(pattern(512));
    pair.pump();
    assert_eq!(
        pair.completions,
        vec![(
            tmf,
            Outcome::TaskManagement(tmf_response::FUNCTION_COMPLETE)
        )]
    );
    assert_eq!(pair.target.task_count(), 0);
    // The aborted task never answers; the initiator forgets it on its own.
    assert_eq!(pair.initiator.in_flight(), 1);
}

#[test]
fn lun_reset_aborts_waiting_writes_and_reaches_the_device() {
    let p = params(|p| {
        p.immediate_data = false;
        p.initial_r2t = true;
    });
    let mut pair = Pair::new(p, 8);
    pair.write(0, pattern(100_000));
    // Keep the Data-Out from reaching the target: the write waits forever.
    pair.tamper = Some(Box::new(|pdu, bytes| {
        if matches!(pdu, Pdu::DataOut(_)) {
            bytes.clear();
        }
    }));
    pair.pump();
    assert_eq!(pair.target.task_count(), 1);
    let tmf = pair
        .initiator
        .task_management(TmfFunction::LogicalUnitReset, 0, RESERVED_TAG);
    pair.pump();
    assert!(
        pair.completions
            .contains(&(tmf, Outcome::TaskManagement(0)))
    );
    assert_eq!(pair.target.task_count(), 0);
    assert_eq!(pair.device.executed, 0);
}

#[test]
fn target_ping_is_answered_and_an_unanswered_ping_closes() {
    let mut pair = Pair::new(params(|_| {}), 8);
    assert!(pair.target.ping());
    pair.pump();
    assert!(pair.target.ping(), "the answered ping is cleared");
    // Now the initiator is gone silent: drop what it would send.
    let _ = pair.target.poll_transmit();
    assert!(!pair.target.ping());
    assert_eq!(
        pair.target
            .poll_event()
            .map(|e| matches!(e, Event::Close(CloseReason::PeerUnresponsive))),
        Some(true)
    );
}

#[test]
fn logout_waits_for_running_tasks() {
    let mut pair = Pair::new(params(|_| {}), 8);
    pair.device.hold = true;
    let cmd = pair.read(0, 512);
    pair.pump();
    let logout = pair.initiator.logout();
    pair.pump();
    assert!(pair.closed.is_none());
    pair.complete_held(pattern(512));
    pair.pump();
    let order: Vec<u32> = pair.completions.iter().map(|(itt, _)| *itt).collect();
    assert_eq!(order, vec![cmd, logout]);
    assert_eq!(pair.closed, Some(CloseReason::Logout));
}

#[test]
fn duplicate_task_tag_is_rejected() {
    let mut pair = Pair::new(params(|_| {}), 8);
    pair.device.hold = true;
    pair.read(0, 512);
    pair.pump();
    let pdu = Pdu::ScsiCommand(ScsiCommand {
        immediate: true,
        final_: true,
        read: true,
        write: false,
        attr: TaskAttr::Simple,
        lun: [0; 8],
        itt: 1,
        expected_data_length: 512,
        cmd_sn: 2,
        exp_stat_sn: 0,
        cdb: Bytes::from_static(&[0x28, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        bidi_read_length: None,
        data: Bytes::new(),
    });
    pair.to_target
        .extend_from_slice(&pdu.to_bytes(&FrameLimits::default()));
    pair.pump();
    assert_eq!(rejects(&pair), vec![RejectReason::TaskInProgress as u8]);
}

#[test]
fn nop_out_ping_is_echoed() {
    let mut pair = Pair::new(params(|_| {}), 8);
    let itt = pair.initiator.nop(Bytes::from_static(b"hello"));
    pair.pump();
    assert_eq!(
        pair.completions,
        vec![(itt, Outcome::Nop(Bytes::from_static(b"hello")))]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// Any corruption of valid traffic: the target never panics, never hangs, and
    /// holds at most queue-depth tasks.
    #[test]
    fn tampered_traffic_never_panics(flips in prop::collection::vec((0usize..5000, any::<u8>()), 1..8),
                                     digests in any::<bool>()) {
        let p = params(|p| { p.header_digest = digests; p.data_digest = digests; p.max_outstanding_r2t = 2; });
        let mut target = TargetConnection::new(p.clone(), ConnectionConfig { queue_depth: 8, discovery: false, data_out_limit: DataOutLimit::fixed(4096), data_out_budget: 2048 }, None, 1, 1);
        let mut initiator = InitiatorSession::new(p, SessionConfig::default(), 1, 1, 8);
        initiator.scsi(0, &write_cdb(), pattern(3000), 0, TaskAttr::Simple);
        initiator.scsi(0, &read_cdb(), Bytes::new(), 3000, TaskAttr::Ordered);
        initiator.task_management(TmfFunction::AbortTaskSet, 0, RESERVED_TAG);
        initiator.nop(Bytes::from_static(b"x"));
        let mut wire = BytesMut::new();
        while let Some(pdu) = initiator.poll_transmit() {
            wire.extend_from_slice(&pdu.to_bytes(&initiator.send_limits()));
        }
        for (at, value) in flips {
            if !wire.is_empty() {
                let i = at % wire.len();
                wire[i] ^= value;
            }
        }
        let framer = Framer::new(target.receive_limits());
        for _ in 0..100 {
            match framer.decode(&mut wire) {
                Ok(Some(frame)) => target.on_frame(Ok(frame)),
                Ok(None) => break,
                Err(e) => { target.on_frame(Err(e)); break; }
            }
            while let Some(event) = target.poll_event() {
                match event {
                    Event::Execute(c) => target.complete(c.itt, ScsiOutcome::default()),
                    Event::TaskManagement { itt, .. } => target.tmf_complete(itt, 0),
                    Event::Close(_) => {}
                }
            }
            while target.poll_transmit().is_some() {}
        }
        prop_assert!(target.task_count() <= 8);
        target.connection_lost();
        prop_assert_eq!(target.task_count(), 0);
    }
}
