//! Bytes on a TCP connection, shared by the target and the client: framing reads, the
//! writer task, and the random seed for logins.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Buf, Bytes, BytesMut};
use reel_iscsi::pdu::{Frame, FrameError, FrameLimits, Framer, Pdu};
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
        // Room for the rest of the frame being read plus slack for the next: a frame that
        // does not fit is copied into a new allocation, and a 256 KiB data segment never fits
        // a 256 KiB reservation (so every such frame used to be copied once).
        let needed = framer
            .frame_len(buf)
            .map_or(0, |total| total.saturating_sub(buf.len()));
        if buf.capacity() - buf.len() < needed.max(64 * 1024) {
            buf.reserve(needed + 256 * 1024);
        }
        match stream.read_buf(buf).await {
            Ok(0) => return Err(ReadError::Closed),
            Ok(_) => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
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
