//! Bytes on a TCP connection, shared by the target and the client: framing reads, the
//! writer task, and the random seed for logins.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Buf, Bytes, BytesMut};
use reel_iscsi::pdu::{BHS_LEN, Frame, FrameError, FrameLimits, Framer, Header, Pdu};
use reel_iscsi::session::TargetConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

/// Data segments handed to a connection's writer and not yet written to the socket. A peer
/// that sends commands and does not read what they return leaves their Data-In here; the
/// target starts no command while this and what running commands may return exceed its
/// budget (`target.rs`, `DataInBudget`), so such a peer cannot make it hold much more.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    bytes: AtomicU64,
    /// The writer ended (the socket failed or closed): nothing will drain any more.
    ended: AtomicBool,
    /// Signalled whenever bytes leave (and when the writer ends).
    drained: Notify,
    /// Every connection's backlog together (the server's gauge), if counted.
    total: Option<Arc<AtomicU64>>,
}

impl Backlog {
    pub(crate) fn counted_in(total: Arc<AtomicU64>) -> Backlog {
        Backlog {
            total: Some(total),
            ..Backlog::default()
        }
    }

    fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
        if let Some(t) = &self.total {
            t.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn sub(&self, n: u64) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        if let Some(t) = &self.total {
            t.fetch_sub(n, Ordering::Relaxed);
        }
        self.drained.notify_one();
    }

    /// Bytes waiting to be written (0 once the writer ended: they never will be).
    pub(crate) fn bytes(&self) -> u64 {
        if self.ended.load(Ordering::Relaxed) {
            return 0;
        }
        self.bytes.load(Ordering::Relaxed)
    }

    /// Resolves once some bytes were written (or the writer ended).
    pub(crate) async fn drained(&self) {
        self.drained.notified().await;
    }

    fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
        let left = self.bytes.swap(0, Ordering::Relaxed);
        if let Some(t) = &self.total {
            t.fetch_sub(left, Ordering::Relaxed);
        }
        self.drained.notify_one();
    }
}

/// Why no frame could be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(std::io::Error),
    /// The peer closed the connection.
    Closed,
}

/// Reads bytes until the framer yields a frame, or an error it can name (which the
/// protocol layer answers). Cancel-safe: bytes read stay in `buf`.
pub(crate) async fn read_frame(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut BytesMut,
    framer: &Framer,
) -> Result<Result<Frame, FrameError>, ReadError> {
    loop {
        match framer.decode(buf) {
            Ok(Some(frame)) => return Ok(Ok(frame)),
            Ok(None) => {}
            Err(e) => return Ok(Err(e)),
        }
        read_into(stream, buf, framer, None).await?;
    }
}

/// A Data-Out whose data segment is being read straight into its command's buffer
/// (`TargetConnection::data_out_sink`), kept across reads that are cancelled.
pub(crate) struct Placing {
    header: Header,
    /// Bytes of the data segment read so far.
    placed: usize,
    /// Its command went away meanwhile: the rest of the segment is read and dropped.
    dropping: bool,
}

/// What [`read_placing`] got.
pub(crate) enum Received {
    /// A whole PDU (or an error the framer can name).
    Frame(Result<Frame, FrameError>),
    /// A Data-Out whose data segment is in its command's buffer.
    Placed(Header),
}

/// [`read_frame`] for a target's full-feature phase, which reads the data segment of an
/// in-order Data-Out straight into its command's buffer instead of into `buf`: the command's
/// data is then one buffer without a join (a copy of every byte) or a grown read buffer
/// (another, for large segments). Cancel-safe: progress is in `buf`, `placing` and the
/// command's buffer.
pub(crate) async fn read_placing(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut BytesMut,
    framer: &Framer,
    placing: &mut Option<Placing>,
    conn: &mut TargetConnection,
) -> Result<Received, ReadError> {
    loop {
        if let Some(p) = placing.as_mut() {
            while p.placed < p.header.data_len {
                let left = p.header.data_len - p.placed;
                let sink = if p.dropping {
                    None
                } else {
                    conn.placing_sink(&p.header, p.placed)
                };
                let Some(sink) = sink else {
                    p.dropping = true;
                    if buf.is_empty() {
                        read_into(stream, buf, framer, Some(left)).await?;
                    }
                    let n = left.min(buf.len());
                    buf.advance(n);
                    p.placed += n;
                    continue;
                };
                if !buf.is_empty() {
                    // Read ahead with the header.
                    let n = left.min(buf.len());
                    sink.extend_from_slice(&buf[..n]);
                    buf.advance(n);
                    p.placed += n;
                    continue;
                }
                // The sink has room for the whole segment (data_out_sink reserved it), so
                // this never reallocates it.
                let n = match (&mut *stream).take(left as u64).read_buf(sink).await {
                    Ok(0) => return Err(ReadError::Closed),
                    Ok(n) => n,
                    Err(e) => return Err(ReadError::Io(e)),
                };
                p.placed += n;
            }
            while buf.len() < p.header.padding {
                read_into(stream, buf, framer, Some(p.header.padding - buf.len())).await?;
            }
            buf.advance(p.header.padding);
            let Some(done) = placing.take() else {
                continue;
            };
            if done.dropping {
                // Like Data-Out for a task that is gone: discarded.
                continue;
            }
            return Ok(Received::Placed(done.header));
        }
        match framer.decode(buf) {
            Ok(Some(frame)) => return Ok(Received::Frame(Ok(frame))),
            Ok(None) => {}
            Err(e) => return Ok(Received::Frame(Err(e))),
        }
        if let Some(header) = framer.peek_header(buf)
            && conn.data_out_sink(&header).is_some()
        {
            buf.advance(header.len);
            *placing = Some(Placing {
                header,
                placed: 0,
                dropping: false,
            });
            continue;
        }
        // While a command waits for Data-Out, reads stop at the end of the header (or of the
        // PDU, once its header is here and it is not placed), so a Data-Out's segment is not
        // read ahead into `buf` and copied out of it. Otherwise they take whatever has
        // arrived, as `read_frame` does: one system call for many small PDUs.
        let wanted = if conn.awaits_data_out() {
            Some(match (framer.header_len(buf), framer.frame_len(buf)) {
                (Some(header), Some(total)) if buf.len() >= header => total - buf.len(),
                (Some(header), _) => header - buf.len(),
                _ => BHS_LEN - buf.len(),
            })
        } else {
            None
        };
        read_into(stream, buf, framer, wanted).await?;
    }
}

/// Reads into `buf`: at most `limit` bytes if given (at least one, or an error).
async fn read_into(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut BytesMut,
    framer: &Framer,
    limit: Option<usize>,
) -> Result<usize, ReadError> {
    // Room for the rest of the frame being read plus slack for the next: a frame that does
    // not fit is copied into a new allocation, and a 256 KiB data segment never fits a
    // 256 KiB reservation (so every such frame used to be copied once).
    let needed = framer
        .frame_len(buf)
        .map_or(0, |total| total.saturating_sub(buf.len()));
    if buf.capacity() - buf.len() < needed.max(64 * 1024) {
        buf.reserve(needed + 256 * 1024);
    }
    let read = match limit {
        Some(limit) => (&mut *stream).take(limit.max(1) as u64).read_buf(buf).await,
        None => stream.read_buf(buf).await,
    };
    match read {
        Ok(0) => Err(ReadError::Closed),
        Ok(n) => Ok(n),
        Err(e) => Err(ReadError::Io(e)),
    }
}

/// Starts the task that owns the write half: it encodes PDUs in order and writes whatever
/// is queued with vectored writes — header, data and padding of each PDU, and of several
/// PDUs, in one system call, large data segments without a copy. Dropping the sender ends
/// it (after a TCP shutdown).
/// Each PDU's data segment counts in `backlog` from [`Outbox::send`] until it is written.
pub(crate) fn spawn_writer(
    writer: OwnedWriteHalf,
    limits: FrameLimits,
    backlog: Arc<Backlog>,
) -> (Outbox, JoinHandle<std::io::Result<()>>) {
    let (tx, rx) = mpsc::unbounded_channel::<Pdu>();
    let outbox = Outbox {
        tx,
        backlog: backlog.clone(),
    };
    let task = tokio::spawn(async move {
        let result = write_all(writer, limits, rx, &backlog).await;
        backlog.end();
        result
    });
    (outbox, task)
}

/// The sending end of a connection's writer.
pub(crate) struct Outbox {
    tx: mpsc::UnboundedSender<Pdu>,
    backlog: Arc<Backlog>,
}

impl Outbox {
    /// Queues `pdu`; false once the writer has ended (the connection is gone).
    pub(crate) fn send(&self, pdu: Pdu) -> bool {
        // Counted before the writer can see it, so the writer never takes off more than was
        // put on.
        let counted = pdu.data().len() as u64;
        self.backlog.add(counted);
        if self.tx.send(pdu).is_err() {
            self.backlog.sub(counted);
            return false;
        }
        true
    }
}

async fn write_all(
    mut writer: OwnedWriteHalf,
    limits: FrameLimits,
    mut rx: mpsc::UnboundedReceiver<Pdu>,
    backlog: &Backlog,
) -> std::io::Result<()> {
    /// Most buffers handed to one writev (Linux allows 1024).
    const MAX_SLICES: usize = 128;
    {
        // Each buffer with the backlog bytes it stands for (a data segment's length, else 0).
        let mut pending: VecDeque<(Bytes, u64)> = VecDeque::new();
        let queue = |pending: &mut VecDeque<(Bytes, u64)>, pdu: Pdu| {
            let counted = pdu.data().len() as u64;
            let encoded = pdu.encode(&limits);
            pending.push_back((encoded.head.clone(), 0));
            if !encoded.data.is_empty() {
                pending.push_back((encoded.data.clone(), counted));
            } else if counted > 0 {
                backlog.sub(counted);
            }
            if !encoded.tail().is_empty() {
                pending.push_back((Bytes::copy_from_slice(encoded.tail()), 0));
            }
        };
        while let Some(pdu) = rx.recv().await {
            queue(&mut pending, pdu);
            while pending.len() < MAX_SLICES {
                match rx.try_recv() {
                    Ok(pdu) => queue(&mut pending, pdu),
                    Err(_) => break,
                }
            }
            while !pending.is_empty() {
                let slices: Vec<IoSlice<'_>> = pending
                    .iter()
                    .take(MAX_SLICES)
                    .map(|(b, _)| IoSlice::new(b))
                    .collect();
                let mut written = writer.write_vectored(&slices).await?;
                if written == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                while written > 0 {
                    let Some((front, counted)) = pending.front_mut() else {
                        break;
                    };
                    if written >= front.len() {
                        written -= front.len();
                        let counted = *counted;
                        pending.pop_front();
                        if counted > 0 {
                            backlog.sub(counted);
                        }
                    } else {
                        front.advance(written);
                        written = 0;
                    }
                }
            }
        }
    }
    writer.shutdown().await
}

/// 32 random bytes for CHAP challenges and initial sequence numbers.
pub(crate) fn random_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    // A failing OS RNG leaves zeros: CHAP challenges would repeat, so say so loudly.
    if getrandom::fill(&mut seed).is_err() {
        tracing::warn!("OS random source failed; CHAP challenges are predictable");
    }
    seed
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use reel_iscsi::initiator::{InitiatorSession, Outcome, SessionConfig};
    use reel_iscsi::params::Negotiated;
    use reel_iscsi::pdu::TaskAttr;
    use reel_iscsi::session::{ConnectionConfig, DataOutLimit, Event, ScsiOutcome};
    use tokio::io::AsyncWriteExt;

    fn record(len: usize, seed: u8) -> Bytes {
        Bytes::from(
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
                .collect::<Vec<_>>(),
        )
    }

    /// What [`drive`] saw: the commands' data as the initiator wrote it and as the device got
    /// it, and how many Data-Out PDUs were read in place.
    struct Driven {
        expected: Vec<(u32, Bytes)>,
        written: Vec<(u32, Bytes)>,
        placed: usize,
        all_good: bool,
        /// How many of the flips landed in PDUs that were sent.
        damaged: usize,
    }

    /// Writes `records` from an initiator through a real `read_placing` over an in-memory
    /// stream cut into writes of `cuts` bytes, the read dropped at every pending poll (as
    /// `select!` in the target's loop drops it whenever another branch is ready); each
    /// `(n, at, mask)` in `flips` XORs byte `at` of the initiator's n-th PDU with `mask`. Ends when every command completed, the
    /// connection closed, or nothing moved for a while (a damaged length can leave the target
    /// waiting for bytes that never come, as a real one would until its ping times out).
    async fn drive(
        params: Negotiated,
        records: &[usize],
        cuts: &[usize],
        flips: &[(usize, usize, u8)],
    ) -> Driven {
        let mut initiator =
            InitiatorSession::new(params.clone(), SessionConfig::default(), 1, 100, 8);
        let mut conn = TargetConnection::new(
            params,
            ConnectionConfig {
                queue_depth: 8,
                discovery: false,
                data_out_limit: DataOutLimit::unlimited(),
                data_out_budget: u64::MAX,
            },
            None,
            1,
            100,
        );
        let framer = Framer::new(conn.receive_limits());
        let to_initiator = Framer::new(initiator.receive_limits());
        let (mut tx, mut rx) = tokio::io::duplex(1 << 22);
        let (mut buf, mut placing, mut back) = (BytesMut::new(), None, BytesMut::new());
        let cdb = [0x0a, 0, 0, 0, 0, 0];
        let mut expected = Vec::new();
        for (i, &len) in records.iter().enumerate() {
            let data = record(len, i as u8);
            let itt = initiator.scsi(0, &cdb, data.clone(), 0, TaskAttr::Simple);
            expected.push((itt, data));
        }
        let (mut written, mut done, mut cut, mut placed) = (Vec::new(), 0, 0, 0usize);
        let (mut pdus, mut idle, mut all_good, mut damaged) = (0usize, 0usize, true, 0usize);
        // Rounds that moved something without a new byte written: each reads buffered bytes
        // or hands out an event, so a few per PDU; endless ones are a spin, a failure here
        // rather than a hung test.
        let mut quiet = 0usize;
        let mut outgoing = BytesMut::new();
        while done < records.len() && !conn.is_closed() && idle < 1000 {
            let mut moved = false;
            let mut wrote = false;
            while let Some(pdu) = initiator.poll_transmit() {
                let mut bytes = pdu.to_bytes(&initiator.send_limits());
                for &(_, at, mask) in flips.iter().filter(|f| f.0 == pdus) {
                    let at = at % bytes.len();
                    bytes[at] ^= mask.max(1);
                    damaged += 1;
                }
                pdus += 1;
                outgoing.extend_from_slice(&bytes);
            }
            if !outgoing.is_empty() {
                let n = cuts[cut % cuts.len()].clamp(1, outgoing.len());
                cut += 1;
                tx.write_all(&outgoing.split_to(n)).await.unwrap();
                moved = true;
                wrote = true;
            }
            // One poll: a read that is not done is dropped and the next one resumes it.
            tokio::select! {
                biased;
                got = read_placing(&mut rx, &mut buf, &framer, &mut placing, &mut conn) => {
                    moved = true;
                    match got.expect("the stream stays open") {
                        Received::Frame(frame) => conn.on_frame(frame),
                        Received::Placed(header) => {
                            placed += 1;
                            conn.on_placed_data_out(header);
                        }
                    }
                }
                () = std::future::ready(()) => {}
            }
            while let Some(event) = conn.poll_event() {
                moved = true;
                match event {
                    Event::Execute(command) => {
                        written.push((command.itt, command.data_out.clone()));
                        conn.complete(command.itt, ScsiOutcome::default());
                    }
                    Event::Close(_) => {}
                    other => panic!("unexpected event {other:?}"),
                }
            }
            while let Some(pdu) = conn.poll_transmit() {
                back.extend_from_slice(&pdu.to_bytes(&conn.send_limits()));
            }
            while let Ok(Some(frame)) = to_initiator.decode(&mut back) {
                let pdu = Pdu::parse(frame).expect("the target sends valid PDUs");
                // A damaged stream may draw answers the initiator did not expect.
                if initiator.on_pdu(pdu).is_err() {
                    all_good = false;
                }
            }
            while let Some(c) = initiator.poll_completion() {
                all_good &= matches!(c.outcome, Outcome::Scsi(ref r) if r.status == 0);
                done += 1;
                moved = true;
            }
            idle = if moved { 0 } else { idle + 1 };
            quiet += usize::from(moved && !wrote);
            assert!(
                quiet < 100_000,
                "a spin: {quiet} rounds moved with no new bytes"
            );
        }
        Driven {
            expected,
            written,
            placed,
            all_good: all_good && done == records.len(),
            damaged,
        }
    }

    /// Everything an initiator writes through `read_placing` reaches the device byte for byte,
    /// however the stream is cut into reads and however often a read is interrupted.
    async fn writes_arrive_whole(
        params: Negotiated,
        records: Vec<usize>,
        cuts: Vec<usize>,
    ) -> usize {
        let run = drive(params, &records, &cuts, &[]).await;
        assert!(run.all_good, "every command completed with GOOD status");
        assert_eq!(run.written.len(), run.expected.len());
        for ((itt, data), (got_itt, got)) in run.expected.iter().zip(&run.written) {
            assert_eq!(itt, got_itt);
            assert!(got == data, "command {itt}: {} bytes differ", data.len());
        }
        run.placed
    }

    /// Login results for the placement tests: `segment`-byte PDUs, 64 KiB first burst.
    fn params(segment: u32, max_burst: u32, immediate: bool, initial_r2t: bool) -> Negotiated {
        let mut p = Negotiated::defaults();
        p.max_recv_data_segment_length = segment;
        p.max_xmit_data_segment_length = segment;
        p.max_burst_length = max_burst;
        p.first_burst_length = 65536;
        p.immediate_data = immediate;
        p.initial_r2t = initial_r2t;
        p
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(future)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn data_out_read_in_place_arrives_whole(
            records in prop::collection::vec(1usize..300_000, 1..6),
            cuts in prop::collection::vec(1usize..100_000, 1..8),
            segment in prop::sample::select(vec![8192u32, 65536, 262144]),
            immediate in any::<bool>(),
            initial_r2t in any::<bool>(),
            header_digest in any::<bool>(),
            data_digest in prop::bool::weighted(0.2),
        ) {
            let mut p = params(segment, 262144, immediate, initial_r2t);
            p.header_digest = header_digest;
            p.data_digest = data_digest;
            let placed = block_on(writes_arrive_whole(p, records, cuts));
            if data_digest {
                prop_assert_eq!(placed, 0, "placing needs the data digest off");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// A damaged byte stream (headers, lengths, offsets, tags, data) read in place never
        /// panics or spins: the connection refuses what it must, closes or waits. A run whose
        /// flips all fell on PDUs never sent is an undamaged one and must deliver everything.
        #[test]
        fn damaged_data_out_read_in_place_never_panics(
            records in prop::collection::vec(1usize..200_000, 1..4),
            cuts in prop::collection::vec(1usize..100_000, 1..6),
            flips in prop::collection::vec((0usize..16, 0usize..64, any::<u8>()), 1..4),
            header_digest in any::<bool>(),
        ) {
            let mut p = params(65536, 262144, true, true);
            p.header_digest = header_digest;
            let run = block_on(drive(p, &records, &cuts, &flips));
            if run.damaged == 0 {
                prop_assert!(run.all_good);
                prop_assert_eq!(run.written, run.expected);
            }
        }
    }

    /// The case the placement is for: large records in several Data-Out PDUs, all read
    /// straight into their command's buffer (and none of them copied on the way: the
    /// command's data is the buffer the segments were read into).
    #[test]
    fn multi_pdu_writes_are_placed() {
        let p = params(262144, 1 << 20, false, true);
        let placed = block_on(writes_arrive_whole(
            p,
            vec![1 << 20; 4],
            vec![70_000, 300_000],
        ));
        // Four 1 MiB writes of four 256 KiB Data-Out PDUs each; a PDU whose header and data
        // arrive in one write of the stream is still placed (its data is copied out of the
        // read buffer only as far as it was read ahead).
        assert_eq!(placed, 16);
    }
}
