//! Bytes on a TCP connection, shared by the target and the client: framing reads, the
//! writer task, and the random seed for logins.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use reel_iscsi::pdu::{Frame, FrameError, FrameLimits, Framer, Pdu};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

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
pub(crate) fn spawn_writer(
    mut writer: OwnedWriteHalf,
    limits: FrameLimits,
) -> (mpsc::UnboundedSender<Pdu>, JoinHandle<std::io::Result<()>>) {
    /// Most buffers handed to one writev (Linux allows 1024).
    const MAX_SLICES: usize = 128;
    let (tx, mut rx) = mpsc::unbounded_channel::<Pdu>();
    let task = tokio::spawn(async move {
        let mut pending: VecDeque<Bytes> = VecDeque::new();
        let queue = |pending: &mut VecDeque<Bytes>, pdu: Pdu| {
            let encoded = pdu.encode(&limits);
            pending.push_back(encoded.head.clone());
            if !encoded.data.is_empty() {
                pending.push_back(encoded.data.clone());
            }
            if !encoded.tail().is_empty() {
                pending.push_back(Bytes::copy_from_slice(encoded.tail()));
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
                    .map(|b| IoSlice::new(b))
                    .collect();
                let mut written = writer.write_vectored(&slices).await?;
                if written == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                while written > 0 {
                    let Some(front) = pending.front_mut() else {
                        break;
                    };
                    if written >= front.len() {
                        written -= front.len();
                        pending.pop_front();
                    } else {
                        front.advance(written);
                        written = 0;
                    }
                }
            }
        }
        writer.shutdown().await
    });
    (tx, task)
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
