//! Building pack objects: chunks → compressed blobs → packs.

use crate::format::{
    BlobAt, BlobEntry, ChunkId, Codec, PackTrailer, blob_checksum, encode_pack_header, finish_pack,
};
use crate::workers::Workers;

/// Bytes of a blob compressed first to decide whether compressing the whole blob pays.
const SAMPLE: usize = 16 * 1024;

/// Blobs a builder may have out for compressing at once: enough to keep the compressing
/// threads busy while the stream's thread adds chunks.
const MAX_PENDING_BLOBS: usize = 4;

/// Pack buffers kept for the next packs. A fresh pack-sized allocation (33 MiB by default) is
/// mapped, faulted in and zeroed by the kernel page by page — 5–10 % of the CPU of ingesting
/// unique data — while a reused one is written over as it is. At most [`PackBuffers::KEEP`]
/// idle buffers are kept.
#[derive(Default)]
pub struct PackBuffers {
    free: parking_lot::Mutex<Vec<Vec<u8>>>,
}

impl PackBuffers {
    /// Enough for the packs in flight at once on a two-core machine (one being built while one
    /// is written); more would only hold memory.
    pub const KEEP: usize = 2;

    /// An empty buffer, reused if one is idle.
    pub fn take(&self) -> Vec<u8> {
        let mut buffer = self.free.lock().pop().unwrap_or_default();
        buffer.clear();
        buffer
    }

    /// Returns a pack's buffer once its bytes are stored.
    pub fn give(&self, buffer: Vec<u8>) {
        if buffer.capacity() == 0 {
            return;
        }
        let mut free = self.free.lock();
        if free.len() < Self::KEEP {
            free.push(buffer);
        }
    }

    /// Idle buffers.
    #[cfg(test)]
    pub fn idle(&self) -> usize {
        self.free.lock().len()
    }
}

/// A pack ready to be stored.
/// Threads that compress closed blobs while the stream's thread goes on with the next chunks.
/// On unique data zstd is about a third of the stream thread's work (the thread that also
/// answers the initiator), and on two cores the hash threads leave room beside it
/// (`efficiency.md` §31). A builder without a pool compresses inline.
pub struct BlobCompressors {
    workers: Workers<CompressJob>,
}

struct CompressJob {
    raw: Vec<u8>,
    level: i32,
    reply: crossbeam_channel::Sender<Compressed>,
}

/// A blob back from a compressing thread: its raw bytes and, if compressing pays, the
/// compressed form.
struct Compressed {
    raw: Vec<u8>,
    compressed: Option<Vec<u8>>,
}

impl BlobCompressors {
    pub fn new(threads: usize) -> std::io::Result<BlobCompressors> {
        let workers = Workers::spawn("reel-zstd", threads, || {
            let mut compressors = Compressors::default();
            move |job: CompressJob| {
                // A panic inside zstd costs the blob its compression, not its bytes: the
                // builder waits for every answer.
                let compressed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    compressors.compress(job.level, &job.raw)
                }))
                .unwrap_or_else(|_| {
                    compressors = Compressors::default();
                    None
                });
                // The builder may have gone; then nobody wants the result.
                let _ = job.reply.send(Compressed {
                    raw: job.raw,
                    compressed,
                });
            }
        })?;
        Ok(BlobCompressors { workers })
    }

    /// Queues `raw` for compressing at `level`; the result arrives on the returned channel.
    /// With the threads gone it is compressed here.
    fn submit(&self, raw: Vec<u8>, level: i32) -> crossbeam_channel::Receiver<Compressed> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        if let Err(job) = self.workers.send(CompressJob { raw, level, reply }) {
            let compressed = Compressors::default().compress(job.level, &job.raw);
            let _ = job.reply.send(Compressed {
                raw: job.raw,
                compressed,
            });
        }
        rx
    }
}

/// One zstd context per level used (a store uses one).
#[derive(Default)]
struct Compressors {
    by_level: Vec<(i32, zstd::bulk::Compressor<'static>)>,
}

impl Compressors {
    /// `raw` compressed at `level`, or None when compressing does not pay (level 0, or a
    /// sample from the middle does not shrink by 3 %: a blob is one stream's consecutive new
    /// chunks, so of one kind, and the full pass is skipped).
    fn compress(&mut self, level: i32, raw: &[u8]) -> Option<Vec<u8>> {
        if level <= 0 {
            return None;
        }
        let at = match self.by_level.iter().position(|(l, _)| *l == level) {
            Some(at) => at,
            None => {
                self.by_level.push((
                    level,
                    zstd::bulk::Compressor::new(level).expect("zstd level"),
                ));
                self.by_level.len() - 1
            }
        };
        let compressor = &mut self.by_level[at].1;
        let len = raw.len();
        let sample = &raw[len / 2 - len.min(SAMPLE) / 2..][..len.min(SAMPLE)];
        let pays = len <= SAMPLE
            || compressor
                .compress(sample)
                .is_ok_and(|c| c.len() * 100 <= sample.len() * 97);
        if pays {
            compressor.compress(raw).ok()
        } else {
            None
        }
    }
}

/// A blob handed to the compressing threads, not yet in the pack.
struct PendingBlob {
    chunks: Vec<(ChunkId, u32)>,
    result: crossbeam_channel::Receiver<Compressed>,
}

pub struct SealedPack {
    pub id: u64,
    pub bytes: Vec<u8>,
    pub trailer: PackTrailer,
    /// Chunk names in pack order (kept in the catalog, not in the pack).
    pub ids: Vec<ChunkId>,
    pub raw_bytes: u64,
    /// The stream whose new chunks these are (none for reclaim's rewritten packs).
    pub owner: Option<u64>,
}

impl SealedPack {
    /// Each chunk's name and location.
    pub fn entries(&self) -> Vec<(ChunkId, crate::format::ChunkLoc)> {
        self.ids
            .iter()
            .zip(self.trailer.slots())
            .map(|(id, slot)| (*id, self.trailer.loc(self.id, &slot)))
            .collect()
    }
}

/// Accumulates one stream's new chunks. Consecutive chunks are compressed together in blobs of
/// about `blob_target` raw bytes (small pieces compress worse, and one zstd frame per 4 KiB chunk
/// would cost ratio); a blob whose compressed form is not at least 3 % smaller is stored raw.
pub struct PackBuilder {
    id: Option<u64>,
    bytes: Vec<u8>,
    trailer: PackTrailer,
    ids: Vec<ChunkId>,
    raw_bytes: u64,
    blob: Vec<u8>,
    blob_chunks: Vec<(ChunkId, u32)>,
    blob_target: usize,
    pack_target: usize,
    zstd_level: i32,
    compressors: Compressors,
    /// Blobs out for compressing, oldest first; they enter the pack in this order.
    pending: std::collections::VecDeque<PendingBlob>,
    pool: Option<std::sync::Arc<BlobCompressors>>,
    /// Blob buffers back from the compressing threads, for the next blobs.
    spare_blobs: Vec<Vec<u8>>,
    /// Raw bytes of the blobs in `pending`.
    pending_raw: usize,
    owner: Option<u64>,
    buffers: Option<std::sync::Arc<PackBuffers>>,
    /// Tests only: write blobs as pack format 1 did (no checksum), to read them back.
    #[cfg(test)]
    format_1: bool,
}

impl PackBuilder {
    pub fn new(blob_target: usize, pack_target: usize, zstd_level: i32) -> PackBuilder {
        PackBuilder {
            id: None,
            bytes: Vec::new(),
            trailer: PackTrailer::default(),
            ids: Vec::new(),
            raw_bytes: 0,
            blob: Vec::with_capacity(blob_target + (1 << 16)),
            blob_chunks: Vec::new(),
            blob_target,
            pack_target,
            zstd_level,
            compressors: Compressors::default(),
            pending: std::collections::VecDeque::new(),
            pool: None,
            spare_blobs: Vec::new(),
            pending_raw: 0,
            owner: None,
            buffers: None,
            #[cfg(test)]
            format_1: false,
        }
    }

    /// Takes pack buffers from `buffers` (the caller gives them back once a pack is stored).
    pub fn with_buffers(mut self, buffers: std::sync::Arc<PackBuffers>) -> PackBuilder {
        self.buffers = Some(buffers);
        self
    }

    /// Compresses blobs on `pool`'s threads instead of the caller's.
    pub fn with_compressors(mut self, pool: std::sync::Arc<BlobCompressors>) -> PackBuilder {
        self.pool = Some(pool);
        self
    }

    /// Adds a new chunk. Returns a sealed pack when this one reached its target size.
    pub fn add(
        &mut self,
        next_id: impl FnOnce() -> u64,
        id: ChunkId,
        data: &[u8],
    ) -> Option<SealedPack> {
        if self.id.is_none() {
            let pack = next_id();
            self.id = Some(pack);
            self.bytes = match &self.buffers {
                Some(buffers) => buffers.take(),
                None => Vec::new(),
            };
            self.bytes.extend_from_slice(&encode_pack_header(pack));
            self.bytes.reserve(self.pack_target + (1 << 20));
        }
        self.blob_chunks.push((id, data.len() as u32));
        self.blob.extend_from_slice(data);
        self.raw_bytes += data.len() as u64;
        if self.blob.len() >= self.blob_target {
            self.close_blob();
            if self.reaches_target() {
                return self.seal();
            }
        }
        None
    }

    /// Whether the pack is at its target size. Blobs out for compressing count at the
    /// compression the pack's blobs had so far; when that would reach the target they are
    /// waited for and the pack's real size decides. A pack ends past its target by at most
    /// the blobs that were out (inline, by one blob).
    fn reaches_target(&mut self) -> bool {
        if self.bytes.len() >= self.pack_target || self.pending.is_empty() {
            return self.bytes.len() >= self.pack_target;
        }
        let appended_raw = self.raw_bytes as usize - self.pending_raw - self.blob.len();
        let estimate = if appended_raw == 0 {
            self.pending_raw
        } else {
            (self.pending_raw as u128 * self.bytes.len() as u128 / appended_raw as u128) as usize
        };
        if self.bytes.len() + estimate < self.pack_target {
            return false;
        }
        self.take_compressed(0);
        self.bytes.len() >= self.pack_target
    }

    fn close_blob(&mut self) {
        if self.blob_chunks.is_empty() {
            return;
        }
        let chunks = std::mem::take(&mut self.blob_chunks);
        match &self.pool {
            Some(pool) => {
                let next = self
                    .spare_blobs
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(self.blob_target + (1 << 16)));
                let raw = std::mem::replace(&mut self.blob, next);
                self.pending_raw += raw.len();
                let result = pool.submit(raw, self.zstd_level);
                self.pending.push_back(PendingBlob { chunks, result });
                // Blobs enter the pack in order as they come back; a few may be out at once
                // (the pack then ends up to that many blobs past its target).
                self.take_compressed(MAX_PENDING_BLOBS);
            }
            None => {
                let raw = std::mem::take(&mut self.blob);
                let compressed = self.compressors.compress(self.zstd_level, &raw);
                self.append_blob(chunks, raw, compressed);
            }
        }
    }

    /// Appends the compressed blobs that are back, oldest first, and waits for the oldest
    /// while more than `keep` are out.
    fn take_compressed(&mut self, keep: usize) {
        while let Some(front) = self.pending.front() {
            let done = if self.pending.len() > keep {
                front.result.recv().ok()
            } else {
                match front.result.try_recv() {
                    Ok(done) => Some(done),
                    Err(crossbeam_channel::TryRecvError::Empty) => break,
                    Err(crossbeam_channel::TryRecvError::Disconnected) => None,
                }
            };
            let Some(PendingBlob { chunks, .. }) = self.pending.pop_front() else {
                break;
            };
            // Every job is answered (the threads catch a panic in zstd and answer "store it
            // raw"), and a builder holds the pool, so its threads outlive this wait.
            let Some(Compressed { raw, compressed }) = done else {
                unreachable!("a blob compressing thread stopped without answering");
            };
            self.pending_raw -= raw.len();
            self.append_blob(chunks, raw, compressed);
        }
    }

    /// Appends one blob to the pack: compressed if that saved at least 3 %, else raw.
    fn append_blob(
        &mut self,
        chunks: Vec<(ChunkId, u32)>,
        raw: Vec<u8>,
        compressed: Option<Vec<u8>>,
    ) {
        // A builder holding chunks has a pack id (`add` takes one before the first chunk).
        let Some(pack) = self.id else {
            return;
        };
        let offset = self.bytes.len() as u64;
        let raw_len = raw.len();
        let codec = match compressed {
            Some(c) if c.len() * 100 <= raw_len * 97 => {
                self.bytes.extend_from_slice(&c);
                Codec::ZstdChecked
            }
            _ => {
                self.bytes.extend_from_slice(&raw);
                Codec::RawChecked
            }
        };
        #[cfg(test)]
        let codec = match (self.format_1, codec) {
            (true, Codec::ZstdChecked) => Codec::Zstd,
            (true, _) => Codec::Raw,
            (false, codec) => codec,
        };
        if codec.is_checked() {
            self.bytes
                .extend_from_slice(&blob_checksum(BlobAt { pack, offset }, &raw));
        }
        self.trailer.blobs.push(BlobEntry {
            offset,
            stored: (self.bytes.len() as u64 - offset) as u32,
            raw: raw_len as u32,
            codec,
            chunks: chunks.len() as u32,
        });
        for (id, len) in chunks {
            self.ids.push(id);
            self.trailer.chunk_lens.push(len);
        }
        // The buffer serves a later blob.
        let mut raw = raw;
        raw.clear();
        if self.pool.is_none() && self.blob.capacity() == 0 {
            self.blob = raw;
        } else if self.spare_blobs.len() <= MAX_PENDING_BLOBS {
            self.spare_blobs.push(raw);
        }
    }

    /// Tests only: blobs without checksums, as pack format 1 wrote them.
    #[cfg(test)]
    pub(crate) fn writing_format_1(mut self) -> PackBuilder {
        self.format_1 = true;
        self
    }

    /// Names the stream whose chunks this builder packs (reported with each sealed pack).
    pub fn with_owner(mut self, stream: u64) -> PackBuilder {
        self.owner = Some(stream);
        self
    }

    /// Whether a pack is open (chunks added since the last seal).
    #[cfg(test)]
    pub fn is_open(&self) -> bool {
        self.id.is_some()
    }

    /// Finishes the open pack, if any.
    pub fn seal(&mut self) -> Option<SealedPack> {
        self.close_blob();
        self.take_compressed(0);
        let id = self.id.take()?;
        let mut bytes = std::mem::take(&mut self.bytes);
        let trailer = std::mem::take(&mut self.trailer);
        finish_pack(&mut bytes, &trailer);
        let ids = std::mem::take(&mut self.ids);
        Some(SealedPack {
            id,
            bytes,
            trailer,
            ids,
            raw_bytes: std::mem::take(&mut self.raw_bytes),
            owner: self.owner,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{decode_blob, decode_pack};

    #[test]
    fn incompressible_blobs_are_stored_raw_and_compressible_ones_zstd_both_checked() {
        let mut b = PackBuilder::new(1000, 1 << 20, 1);
        let zeros = vec![0u8; 1200];
        let mut s = 1u64;
        let noise: Vec<u8> = (0..1200)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect();
        b.add(|| 5, ChunkId::of(&zeros), &zeros);
        b.add(|| unreachable!(), ChunkId::of(&noise), &noise);
        let sealed = b.seal().unwrap();
        let (id, trailer) = decode_pack(&sealed.bytes).unwrap();
        assert_eq!(id, 5);
        assert_eq!(trailer.blobs[0].codec, Codec::ZstdChecked);
        assert_eq!(trailer.blobs[1].codec, Codec::RawChecked);
        assert_eq!(sealed.ids.len(), 2);
        for (id, loc) in sealed.entries() {
            assert_eq!(
                loc,
                trailer.loc(
                    5,
                    &trailer.slots()[sealed.ids.iter().position(|i| *i == id).unwrap()]
                )
            );
            let stored = &sealed.bytes[loc.blob_offset as usize..][..loc.blob_stored as usize];
            let at = BlobAt {
                pack: 5,
                offset: loc.blob_offset,
            };
            let raw = decode_blob(loc.codec, stored, loc.blob_raw, at).unwrap();
            assert_eq!(raw.checksum_ok, Some(true));
            assert_eq!(
                ChunkId::of(&raw.data[loc.offset as usize..][..loc.len as usize]),
                id
            );
        }
        assert!(b.seal().is_none());
    }

    /// A pack built in a reused buffer holds exactly its own bytes: the same pack as one built
    /// in a fresh buffer, whatever the buffer held before.
    #[test]
    fn a_reused_buffer_makes_the_same_pack_as_a_fresh_one() {
        let buffers = std::sync::Arc::new(PackBuffers::default());
        let chunk = |seed: u8| vec![seed; 3000];
        let build = |pooled: bool, seed: u8| {
            let mut b = PackBuilder::new(1000, 1 << 20, 1);
            if pooled {
                b = b.with_buffers(buffers.clone());
            }
            let data = chunk(seed);
            b.add(|| 9, ChunkId::of(&data), &data);
            b.seal().unwrap()
        };
        // A big pack fills a buffer with other bytes, then goes back to the pool.
        let mut first = build(true, 1);
        first.bytes.resize(1 << 20, 0xAB);
        let first_buffer = first.bytes.as_ptr();
        buffers.give(first.bytes);
        assert_eq!(buffers.idle(), 1);
        let reused = build(true, 2);
        assert_eq!(
            reused.bytes.as_ptr(),
            first_buffer,
            "the idle buffer is taken"
        );
        assert_eq!(buffers.idle(), 0);
        assert_eq!(reused.bytes, build(false, 2).bytes);
        decode_pack(&reused.bytes).unwrap();
        // No more than KEEP idle buffers are kept.
        for _ in 0..PackBuffers::KEEP + 2 {
            buffers.give(Vec::with_capacity(16));
        }
        assert_eq!(buffers.idle(), PackBuffers::KEEP);
    }

    /// Chunks of three kinds (zeros, a short period, noise), so blobs go both ways.
    fn mixed_chunks(n: usize) -> Vec<Vec<u8>> {
        let mut state = 7u64;
        (0..n)
            .map(|i| {
                let len = 1500 + (i * 7919) % 3000;
                match i % 3 {
                    0 => vec![0; len],
                    1 => (0..len)
                        .map(|j| ((j % 5) as u8).wrapping_add(i as u8))
                        .collect(),
                    _ => (0..len)
                        .map(|_| {
                            state = state
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            (state >> 56) as u8
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Blobs compressed on the compressing threads make the same pack, byte for byte, as
    /// blobs compressed inline: they enter the pack in the order they were closed.
    #[test]
    fn compressing_threads_make_the_same_pack_as_inline_compression() {
        let pool = std::sync::Arc::new(BlobCompressors::new(2).unwrap());
        let chunks = mixed_chunks(300);
        let build = |threads: bool| {
            let mut b = PackBuilder::new(4000, 64 << 20, 1);
            if threads {
                b = b.with_compressors(pool.clone());
            }
            for c in &chunks {
                assert!(b.add(|| 3, ChunkId::of(c), c).is_none());
            }
            b.seal().unwrap()
        };
        let inline = build(false);
        let threaded = build(true);
        let (_, trailer) = decode_pack(&threaded.bytes).unwrap();
        assert!(trailer.blobs.len() > 100, "{} blobs", trailer.blobs.len());
        assert!(trailer.blobs.iter().any(|b| b.codec == Codec::ZstdChecked));
        assert!(trailer.blobs.iter().any(|b| b.codec == Codec::RawChecked));
        assert!(threaded.bytes == inline.bytes, "the packs differ");
        assert_eq!(threaded.ids, inline.ids);
    }

    /// With blobs out for compressing, packs still end within the blobs that were out of
    /// their target, and every chunk is in one pack, in order.
    #[test]
    fn packs_built_with_compressing_threads_end_near_their_target() {
        let pool = std::sync::Arc::new(BlobCompressors::new(2).unwrap());
        let chunks = mixed_chunks(600);
        let target = 40_000;
        let mut b = PackBuilder::new(4000, target, 1).with_compressors(pool);
        let mut next = 0u64;
        let mut packs = Vec::new();
        for c in &chunks {
            packs.extend(b.add(
                || {
                    next += 1;
                    next
                },
                ChunkId::of(c),
                c,
            ));
        }
        packs.extend(b.seal());
        assert!(packs.len() > 10, "{} packs", packs.len());
        let mut ids = Vec::new();
        for (i, pack) in packs.iter().enumerate() {
            let (_, trailer) = decode_pack(&pack.bytes).unwrap();
            if i + 1 < packs.len() {
                assert!(pack.bytes.len() >= target, "pack {i} sealed short");
            }
            // The blobs that were out when the estimate said "full" all went in.
            let n = trailer.blobs.len();
            let last_out = &trailer.blobs[n.saturating_sub(MAX_PENDING_BLOBS + 1)];
            assert!(
                (last_out.offset as usize) < target,
                "pack {i}: {} bytes before its last {} blobs",
                last_out.offset,
                MAX_PENDING_BLOBS + 1
            );
            ids.extend(pack.ids.iter().copied());
        }
        let expected: Vec<ChunkId> = chunks.iter().map(|c| ChunkId::of(c)).collect();
        assert_eq!(ids, expected);
    }
}
