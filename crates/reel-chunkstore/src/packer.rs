//! Building pack objects: chunks → compressed blobs → packs.

use crate::format::{
    BlobAt, BlobEntry, ChunkId, Codec, PackTrailer, blob_checksum, encode_pack_header, finish_pack,
};

/// Bytes of a blob compressed first to decide whether compressing the whole blob pays.
const SAMPLE: usize = 16 * 1024;

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
    compressor: Option<zstd::bulk::Compressor<'static>>,
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
            compressor: None,
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
            if self.bytes.len() >= self.pack_target {
                return self.seal();
            }
        }
        None
    }

    fn close_blob(&mut self) {
        // A builder holding chunks has a pack id (`add` takes one before the first chunk).
        let (Some(pack), false) = (self.id, self.blob_chunks.is_empty()) else {
            return;
        };
        let offset = self.bytes.len() as u64;
        let raw = self.blob.len();
        let level = self.zstd_level;
        let compressed = if level > 0 {
            let compressor = self
                .compressor
                .get_or_insert_with(|| zstd::bulk::Compressor::new(level).expect("zstd level"));
            // Early exit: if a sample from the middle does not shrink, the blob (one stream's
            // consecutive new chunks, so of one kind) will not either; skip the full pass.
            let sample = &self.blob[raw / 2 - raw.min(SAMPLE) / 2..][..raw.min(SAMPLE)];
            let pays = raw <= SAMPLE
                || compressor
                    .compress(sample)
                    .is_ok_and(|c| c.len() * 100 <= sample.len() * 97);
            if pays {
                compressor.compress(&self.blob).ok()
            } else {
                None
            }
        } else {
            None
        };
        let codec = match compressed {
            Some(c) if c.len() * 100 <= raw * 97 => {
                self.bytes.extend_from_slice(&c);
                Codec::ZstdChecked
            }
            _ => {
                self.bytes.extend_from_slice(&self.blob);
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
                .extend_from_slice(&blob_checksum(BlobAt { pack, offset }, &self.blob));
        }
        self.trailer.blobs.push(BlobEntry {
            offset,
            stored: (self.bytes.len() as u64 - offset) as u32,
            raw: raw as u32,
            codec,
            chunks: self.blob_chunks.len() as u32,
        });
        for (id, len) in self.blob_chunks.drain(..) {
            self.ids.push(id);
            self.trailer.chunk_lens.push(len);
        }
        self.blob.clear();
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
}
