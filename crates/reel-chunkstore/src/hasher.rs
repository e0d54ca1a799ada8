//! Chunking and hashing of whole records on a pool of threads, so that one stream uses every
//! core. Only records that start on a chunk boundary and are long enough to end on one (at least
//! the average chunk size) are sent here: their cut points then depend on nothing outside the
//! record, and the result is exactly what the stream's own chunker would produce.
//!
//! Backup streams repeat whole records (the same file block written again), so the pool also
//! remembers recent records ([`RecentCuts`]): a record of up to 384 KiB by its BLAKE3 with its
//! chunks' ids, so a repeat costs one hash of the record instead of a scan and a hash of each
//! chunk; a longer one by an xxh3 fingerprint with its cuts, so a repeat is split at the same
//! lengths without scanning it again, and only hashed. A record that does
//! not repeat whole often repeats in pieces (a 1 MiB record of blocks seen before in another
//! order), so the pool also remembers where recently scanned chunks ended, by the bytes they
//! start with ([`ChunkCuts`]). Ids come from the bytes themselves: hashed again, or taken from a
//! record whose BLAKE3 is this record's (the same assumption that makes a chunk's id its
//! identity), so an xxh3 collision could only give a record other cut points (it would dedup
//! worse), never a wrong id.

use std::sync::Arc;

use parking_lot::Mutex;

use crossbeam_channel::{Receiver, Sender};

use crate::chunker::{Chunker, ChunkerParams};
use crate::format::ChunkId;
use crate::workers::Workers;

/// A record's bytes on their way through the pool: a copy the stream made (into a buffer it
/// reuses), or the caller's own bytes, shared without a copy.
pub enum RecordBytes {
    Copied(Vec<u8>),
    Shared(bytes::Bytes),
}

impl std::ops::Deref for RecordBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            RecordBytes::Copied(v) => v,
            RecordBytes::Shared(b) => b,
        }
    }
}

/// A record and its chunks: (id, length) in order, covering the record exactly.
pub struct Hashed {
    pub data: RecordBytes,
    pub chunks: Vec<(ChunkId, u32)>,
}

struct Job {
    data: RecordBytes,
    reply: Sender<Hashed>,
}

pub struct HashPool {
    params: ChunkerParams,
    recent: Arc<RecentCuts>,
    workers: Workers<Job>,
}

impl HashPool {
    pub fn new(params: ChunkerParams, threads: usize) -> std::io::Result<HashPool> {
        let recent = Arc::new(RecentCuts::new());
        let workers = Workers::spawn("reel-hash", threads, || {
            let recent = Arc::clone(&recent);
            move |job: Job| {
                let chunks = recent.chunk_and_hash(params, &job.data);
                // The stream may have gone; then nobody wants the result.
                let _ = job.reply.send(Hashed {
                    data: job.data,
                    chunks,
                });
            }
        })?;
        Ok(HashPool {
            params,
            recent,
            workers,
        })
    }

    /// Queues a record; the result arrives on the returned channel.
    pub fn submit(&self, data: RecordBytes) -> Receiver<Hashed> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        if let Err(job) = self.workers.send(Job { data, reply }) {
            let chunks = self.recent.chunk_and_hash(self.params, &job.data);
            let _ = job.reply.send(Hashed {
                data: job.data,
                chunks,
            });
        }
        rx
    }
}

/// Recently seen records, in two direct-mapped tables (a newer record takes its slot), so they
/// need no eviction bookkeeping and their size is bounded:
/// - records of up to [`RecentCuts::MAX_NAMED_RECORD`] bytes by their BLAKE3, with their chunks'
///   ids and lengths ([`RecentCuts::SLOTS`] × at most [`RecentCuts::MAX_NAMED_CHUNKS`] chunks of
///   36 bytes: 47 MB at worst, ~34 MB for 256 KiB records, ~8 MB for 64 KiB ones). A repeat
///   costs one BLAKE3 of the record at the hash's full SIMD width (~0.2 CPU-s/GB on a 2.1 GHz
///   Xeon) instead of an xxh3 fingerprint and a BLAKE3 of each 2 KiB chunk (~0.15 + 0.45);
/// - longer records by a 128-bit xxh3 fingerprint, with where they were cut (at most
///   [`RecentCuts::MAX_CHUNKS`] lengths each, 16 MiB at worst): their chunks are hashed again.
pub struct RecentCuts {
    named: Box<[Mutex<Option<NamedRecord>>]>,
    slots: Box<[Mutex<Option<Cuts>>]>,
    chunks: ChunkCuts,
}

struct NamedRecord {
    record: [u8; 32],
    chunks: Box<[(ChunkId, u32)]>,
}

struct Cuts {
    fingerprint: u128,
    lengths: Box<[u32]>,
}

impl Default for RecentCuts {
    fn default() -> Self {
        Self::new()
    }
}

impl RecentCuts {
    /// Enough for four streams that repeat records within 1024 records of each other (the
    /// tapewrite workload's window), with room for collisions between slots.
    pub const SLOTS: usize = 8192;
    /// Records of more chunks (about 1.5 MiB at the default chunk size) are not remembered.
    pub const MAX_CHUNKS: usize = 512;
    /// Records up to this long are remembered by their BLAKE3 with their chunks' ids.
    pub const MAX_NAMED_RECORD: usize = 384 << 10;
    /// ... if they were cut into at most this many chunks.
    pub const MAX_NAMED_CHUNKS: usize = 160;

    pub fn new() -> RecentCuts {
        RecentCuts {
            named: (0..Self::SLOTS).map(|_| Mutex::new(None)).collect(),
            slots: (0..Self::SLOTS).map(|_| Mutex::new(None)).collect(),
            chunks: ChunkCuts::new(),
        }
    }

    /// [`chunk_and_hash`], scanning only records not seen recently, and hashing the chunks only
    /// of records not seen recently or too long to be remembered with their ids.
    pub fn chunk_and_hash(&self, params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
        if data.len() > Self::MAX_NAMED_RECORD {
            return self.cut_and_hash(params, data);
        }
        let record = *blake3::hash(data).as_bytes();
        let slot = &self.named[Self::slot_of(&record)];
        if let Some(known) = slot.lock().as_ref()
            && known.record == record
        {
            return known.chunks.to_vec();
        }
        let chunks = hash_pieces(data, &self.chunks.cut(params, data));
        if chunks.len() <= Self::MAX_NAMED_CHUNKS {
            *slot.lock() = Some(NamedRecord {
                record,
                chunks: Box::from(chunks.as_slice()),
            });
        }
        chunks
    }

    fn slot_of(record: &[u8; 32]) -> usize {
        let low: [u8; 8] = record[..8].try_into().expect("8 of 32 bytes");
        (u64::from_le_bytes(low) as usize) % Self::SLOTS
    }

    /// A record too long to be remembered with its ids: cut where it was cut last time if its
    /// fingerprint was seen, and hashed.
    fn cut_and_hash(&self, params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
        let fingerprint = xxhash_rust::xxh3::xxh3_128(data);
        // The low bits pick the slot; the whole fingerprint (which also covers the length,
        // since the lengths must add up to it) decides a hit.
        let slot = &self.slots[(fingerprint as usize) % Self::SLOTS];
        let known = slot
            .lock()
            .as_ref()
            .and_then(|cuts| (cuts.fingerprint == fingerprint).then(|| cuts.lengths.clone()));
        if let Some(lengths) = known
            && lengths.iter().map(|&n| n as usize).sum::<usize>() == data.len()
        {
            return hash_pieces(data, &lengths);
        }
        let lengths = self.chunks.cut(params, data);
        if lengths.len() <= Self::MAX_CHUNKS {
            *slot.lock() = Some(Cuts {
                fingerprint,
                lengths: Box::from(lengths.as_slice()),
            });
        }
        hash_pieces(data, &lengths)
    }
}

/// Where recently scanned chunks ended, keyed by a fingerprint of their first `min` bytes.
///
/// Why a remembered cut is exact: a record sent to the pool starts on a chunk boundary, and the
/// chunker starts afresh at every cut, so where a chunk ends depends only on its own bytes
/// (`Chunker::scan` returns `Some(n)` after the first n bytes that pass the cut test, or at
/// `max`). A chunk whose bytes equal those of a chunk the scan once ended at n therefore ends
/// at n again. Equality is decided by a 128-bit xxh3 of the whole candidate chunk: as for whole
/// records, a collision could only give other cut points, never a wrong id. Only chunks the scan
/// cut are remembered, not a record's last piece (that one ended where its record did).
///
/// Direct-mapped like [`RecentCuts`] (a newer chunk takes the slot), in shards so the hash
/// threads seldom wait for each other; bounded at [`ChunkCuts::SLOTS`] × 32 bytes.
pub(crate) struct ChunkCuts {
    shards: Box<[Mutex<Box<[ChunkCut]>>]>,
    /// Chunks cut where a remembered one ended (tests check the table is used).
    #[cfg(test)]
    hits: std::sync::atomic::AtomicU64,
}

#[derive(Clone, Copy, Default)]
struct ChunkCut {
    /// xxh3-64 of the chunk's first `min` bytes (the key; the low bits chose the slot).
    start: u64,
    /// 0: an empty slot.
    len: u32,
    /// xxh3-128 of the whole chunk.
    whole: u128,
}

impl ChunkCuts {
    /// About 1.5 GiB of 2 KiB-average chunks (the tapewrite workload's 256 MiB repeat window
    /// for several streams, with room for slot collisions); 16 MiB.
    pub const SLOTS: usize = 1 << 19;
    const SHARDS: usize = 64;

    fn new() -> ChunkCuts {
        let per_shard = Self::SLOTS / Self::SHARDS;
        ChunkCuts {
            shards: (0..Self::SHARDS)
                .map(|_| Mutex::new(vec![ChunkCut::default(); per_shard].into_boxed_slice()))
                .collect(),
            #[cfg(test)]
            hits: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn slot(start: u64) -> (usize, usize) {
        let per_shard = Self::SLOTS / Self::SHARDS;
        let i = (start as usize) % Self::SLOTS;
        (i / per_shard, i % per_shard)
    }

    fn get(&self, start: u64) -> Option<(u32, u128)> {
        let (shard, i) = Self::slot(start);
        let cut = self.shards[shard].lock()[i];
        (cut.len > 0 && cut.start == start).then_some((cut.len, cut.whole))
    }

    fn put(&self, start: u64, len: u32, whole: u128) {
        let (shard, i) = Self::slot(start);
        self.shards[shard].lock()[i] = ChunkCut { start, len, whole };
    }

    /// The chunk lengths of a record that starts on a chunk boundary: exactly those a plain scan
    /// gives (`chunk_and_hash`, the tests' reference), taken from remembered chunks where the
    /// bytes match one and scanned elsewhere.
    fn cut(&self, params: ChunkerParams, data: &[u8]) -> Vec<u32> {
        // Every chunk the scan cuts is at least `min` long (the last piece of a record may be
        // shorter: it is never looked up).
        let key_len = params.min as usize;
        let mut lengths = Vec::with_capacity(data.len() / params.avg as usize + 2);
        let mut rest = data;
        while rest.len() >= key_len {
            let start = xxhash_rust::xxh3::xxh3_64(&rest[..key_len]);
            let known = self.get(start).filter(|&(len, whole)| {
                let len = len as usize;
                len <= rest.len() && xxhash_rust::xxh3::xxh3_128(&rest[..len]) == whole
            });
            let n = match known {
                Some((len, _)) => {
                    #[cfg(test)]
                    self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    len as usize
                }
                None => match Chunker::new(params).scan(rest) {
                    Some(n) => {
                        let whole = xxhash_rust::xxh3::xxh3_128(&rest[..n]);
                        // `n` ≤ `max` ≤ 16 MiB (`ChunkerParams::validate`).
                        self.put(start, n as u32, whole);
                        n
                    }
                    None => break,
                },
            };
            lengths.push(n as u32);
            rest = &rest[n..];
        }
        if !rest.is_empty() {
            lengths.push(rest.len() as u32);
        }
        lengths
    }
}

/// Splits `data` at `lengths` (which add up to its length) and hashes the pieces in one batch.
fn hash_pieces(data: &[u8], lengths: &[u32]) -> Vec<(ChunkId, u32)> {
    let mut pieces: Vec<&[u8]> = Vec::with_capacity(lengths.len());
    let mut rest = data;
    for &n in lengths {
        let (piece, tail) = rest.split_at(n as usize);
        pieces.push(piece);
        rest = tail;
    }
    let mut ids = Vec::with_capacity(pieces.len());
    crate::multihash::hash_all(&pieces, &mut ids);
    ids.into_iter().zip(lengths.iter().copied()).collect()
}

/// Cuts a record that starts on a chunk boundary and ends on one (its end is a cut because it
/// is at least `params.avg` long, see `Chunker::boundary`), then hashes all its chunks in one
/// batch (`multihash`: twice the rate of hashing them one by one). The reference the pool's
/// remembered cuts must agree with.
#[cfg(test)]
pub fn chunk_and_hash(params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
    let mut chunker = Chunker::new(params);
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(data.len() / params.avg as usize + 2);
    let mut rest = data;
    while let Some(n) = chunker.scan(rest) {
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    if !rest.is_empty() {
        chunks.push(rest);
    }
    let mut ids = Vec::with_capacity(chunks.len());
    crate::multihash::hash_all(&chunks, &mut ids);
    ids.into_iter()
        .zip(&chunks)
        .map(|(id, chunk)| (id, chunk.len() as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn a_repeated_record_is_cut_and_named_as_the_first_time() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        for (seed, len) in [(1, 256 << 10), (2, 64 << 10), (3, 5000), (4, 1 << 20)] {
            let data = record(seed, len);
            let scanned = chunk_and_hash(params, &data);
            assert!(scanned.len() > 1, "the record must span several chunks");
            assert_eq!(recent.chunk_and_hash(params, &data), scanned, "first time");
            assert_eq!(recent.chunk_and_hash(params, &data), scanned, "repeat");
        }
    }

    /// Records made of the same blocks in other orders, shifted by a few bytes, and of
    /// low-entropy runs (where many chunks start with the same bytes): remembered chunk cuts
    /// must give exactly the scan's cuts and ids.
    #[test]
    fn records_of_reordered_blocks_are_cut_exactly_as_a_scan_cuts_them() {
        let params = ChunkerParams::with_avg(256);
        let recent = RecentCuts::new();
        let blocks: Vec<Vec<u8>> = (0..6)
            .map(|i| record(100 + i, 3000 + 700 * i as usize))
            .collect();
        let mut order = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            order ^= order << 13;
            order ^= order >> 7;
            order ^= order << 17;
            order
        };
        for round in 0..200 {
            let mut data = Vec::new();
            for _ in 0..4 {
                let b = &blocks[(next() % blocks.len() as u64) as usize];
                // Sometimes a block starts a few bytes in: the cuts then differ until the
                // chunker finds its way back onto the block's own cut points.
                let skip = if next() % 4 == 0 {
                    (next() % 50) as usize
                } else {
                    0
                };
                data.extend_from_slice(&b[skip..]);
            }
            match round % 10 {
                3 => data.extend(std::iter::repeat_n(0u8, 5000)),
                7 => data.extend((0..4000u32).map(|i| (i % 7) as u8)),
                _ => {}
            }
            let expected = chunk_and_hash(params, &data);
            assert_eq!(
                recent.chunk_and_hash(params, &data),
                expected,
                "round {round}"
            );
        }
        // The reordered blocks' chunks were found again: the test exercised remembered cuts,
        // not just the scan.
        let hits = recent
            .chunks
            .hits
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            hits > 5000,
            "only {hits} chunks were cut where a remembered one ended"
        );
    }

    #[test]
    fn a_remembered_chunk_is_used_only_when_its_whole_bytes_match() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        let data = record(11, 100_000);
        let start = xxhash_rust::xxh3::xxh3_64(&data[..params.min as usize]);
        // A planted cut the chunker would not make, with the fingerprint of those bytes: used
        // (which shows the table is consulted), and the ids still name the bytes.
        recent
            .chunks
            .put(start, 40_000, xxhash_rust::xxh3::xxh3_128(&data[..40_000]));
        let lengths = recent.chunks.cut(params, &data);
        assert_eq!(lengths[0], 40_000);
        assert_eq!(
            lengths.iter().map(|&n| n as usize).sum::<usize>(),
            data.len()
        );
        let got = hash_pieces(&data, &lengths);
        assert_eq!(got[0], (ChunkId::of(&data[..40_000]), 40_000));
        // The same key with bytes that do not match, or a length past the record: scanned.
        for (len, whole) in [(40_000, 1u128), (200_000, 0)] {
            recent.chunks.put(start, len, whole);
            let scanned: Vec<u32> = chunk_and_hash(params, &data).iter().map(|c| c.1).collect();
            assert_eq!(recent.chunks.cut(params, &data), scanned);
        }
    }

    /// A short record's repeat takes the remembered ids: planted ids under the record's BLAKE3
    /// are returned as they are (the table is consulted and trusted); under another record's
    /// BLAKE3 in the same slot they are not, and the record is cut and hashed from its bytes.
    #[test]
    fn a_short_record_is_named_from_memory_only_under_its_own_blake3() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        let data = record(21, 64 << 10);
        let record_hash = *blake3::hash(&data).as_bytes();
        let slot = RecentCuts::slot_of(&record_hash);
        let planted: Box<[(ChunkId, u32)]> = vec![(ChunkId([7; 32]), 64 << 10)].into();
        *recent.named[slot].lock() = Some(NamedRecord {
            record: record_hash,
            chunks: planted.clone(),
        });
        assert_eq!(recent.chunk_and_hash(params, &data), planted.to_vec());
        let mut other = record_hash;
        other[31] ^= 1;
        *recent.named[slot].lock() = Some(NamedRecord {
            record: other,
            chunks: planted,
        });
        let expected = chunk_and_hash(params, &data);
        assert_eq!(recent.chunk_and_hash(params, &data), expected);
        // The record just cut took the slot: its repeat is named from memory.
        let remembered = recent.named[slot].lock().as_ref().map(|r| r.record);
        assert_eq!(remembered, Some(record_hash));
        assert_eq!(recent.chunk_and_hash(params, &data), expected);
    }

    /// Records past the named size are remembered by fingerprint and cuts only.
    #[test]
    fn a_long_record_is_remembered_by_its_cuts_only() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        let data = record(22, RecentCuts::MAX_NAMED_RECORD + 1);
        let expected = chunk_and_hash(params, &data);
        assert_eq!(recent.chunk_and_hash(params, &data), expected);
        assert!(recent.named.iter().all(|slot| slot.lock().is_none()));
        let fingerprint = xxhash_rust::xxh3::xxh3_128(&data);
        let cuts = recent.slots[(fingerprint as usize) % RecentCuts::SLOTS].lock();
        let lengths: Vec<u32> = expected.iter().map(|c| c.1).collect();
        assert_eq!(cuts.as_ref().map(|c| c.lengths.to_vec()), Some(lengths));
    }

    #[test]
    fn a_fingerprint_collision_gives_other_cuts_never_wrong_ids() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        // Long enough to be remembered by its xxh3 fingerprint, not by its BLAKE3.
        let data = record(7, RecentCuts::MAX_NAMED_RECORD + 100_000);
        let fingerprint = xxhash_rust::xxh3::xxh3_128(&data);
        // Plant cuts for this fingerprint that the chunker would never make.
        *recent.slots[(fingerprint as usize) % RecentCuts::SLOTS].lock() = Some(Cuts {
            fingerprint,
            lengths: vec![60_000, data.len() as u32 - 60_000].into(),
        });
        let got = recent.chunk_and_hash(params, &data);
        assert_eq!(
            got,
            vec![
                (ChunkId::of(&data[..60_000]), 60_000),
                (ChunkId::of(&data[60_000..]), data.len() as u32 - 60_000)
            ]
        );
        // Lengths that do not add up to the record are ignored: the record is scanned.
        *recent.slots[(fingerprint as usize) % RecentCuts::SLOTS].lock() = Some(Cuts {
            fingerprint,
            lengths: vec![10, 20].into(),
        });
        assert_eq!(
            recent.chunk_and_hash(params, &data),
            chunk_and_hash(params, &data)
        );
    }
}
