//! Bytes on a TCP connection, shared by the target and the client: framing reads, the
//! writer task, and the random seed for logins.

use bytes::BytesMut;
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
        if buf.capacity() - buf.len() < 64 * 1024 {
            buf.reserve(256 * 1024);
        }
        match stream.read_buf(buf).await {
            Ok(0) => return Err(ReadError::Closed),
            Ok(_) => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
}

/// Starts the task that owns the write half: it encodes PDUs in order and writes them,
/// large data segments without a copy, flushing when the queue runs dry. Dropping the
/// sender ends it (after a flush and a TCP shutdown).
pub(crate) fn spawn_writer(
    writer: OwnedWriteHalf,
    limits: FrameLimits,
) -> (mpsc::UnboundedSender<Pdu>, JoinHandle<std::io::Result<()>>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Pdu>();
    let task = tokio::spawn(async move {
        let mut writer = tokio::io::BufWriter::with_capacity(64 * 1024, writer);
        while let Some(pdu) = rx.recv().await {
            let encoded = pdu.encode(&limits);
            writer.write_all(&encoded.head).await?;
            writer.write_all(&encoded.data).await?;
            writer.write_all(encoded.tail()).await?;
            if rx.is_empty() {
                writer.flush().await?;
            }
        }
        writer.flush().await?;
        writer.into_inner().shutdown().await
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
