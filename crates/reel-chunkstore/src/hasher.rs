//! Chunking and hashing of whole records on a pool of threads, so that one stream uses every
//! core. Only records that start on a chunk boundary and are long enough to end on one (at least
//! the average chunk size) are sent here: their cut points then depend on nothing outside the
//! record, and the result is exactly what the stream's own chunker would produce.
//!
//! Backup streams repeat whole records (the same file block written again), so the pool also
//! remembers where recent records were cut ([`RecentCuts`]): a record whose fingerprint was seen
//! is split at the same lengths without scanning it again, and only hashed. The ids are always
//! hashed from the bytes themselves, so a fingerprint collision could only give a record other
//! cut points (it would dedup worse), never a wrong id.

use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crossbeam_channel::{Receiver, Sender};

use crate::chunker::{Chunker, ChunkerParams};
use crate::format::ChunkId;

/// A record and its chunks: (id, length) in order, covering the record exactly.
pub struct Hashed {
    pub data: Vec<u8>,
    pub chunks: Vec<(ChunkId, u32)>,
}

struct Job {
    data: Vec<u8>,
    reply: Sender<Hashed>,
}

pub struct HashPool {
    params: ChunkerParams,
    recent: Arc<RecentCuts>,
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl HashPool {
    pub fn new(params: ChunkerParams, threads: usize) -> std::io::Result<HashPool> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(threads * 4);
        let recent = Arc::new(RecentCuts::new());
        let threads = (0..threads)
            .map(|i| {
                let rx = rx.clone();
                let recent = Arc::clone(&recent);
                std::thread::Builder::new()
                    .name(format!("reel-hash-{i}"))
                    .spawn(move || {
                        for job in rx {
                            let chunks = recent.chunk_and_hash(params, &job.data);
                            // The stream may have gone; then nobody wants the result.
                            let _ = job.reply.send(Hashed {
                                data: job.data,
                                chunks,
                            });
                        }
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(HashPool {
            params,
            recent,
            tx: Some(tx),
            threads,
        })
    }

    /// Queues a record; the result arrives on the returned channel.
    pub fn submit(&self, data: Vec<u8>) -> Receiver<Hashed> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        let job = Job { data, reply };
        let unsent = match &self.tx {
            Some(tx) => tx
                .send(job)
                .err()
                .map(crossbeam_channel::SendError::into_inner),
            None => Some(job),
        };
        if let Some(job) = unsent {
            let chunks = self.recent.chunk_and_hash(self.params, &job.data);
            let _ = job.reply.send(Hashed {
                data: job.data,
                chunks,
            });
        }
        rx
    }
}

impl Drop for HashPool {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Where recently seen records were cut, by a 128-bit xxh3 fingerprint of their bytes: a
/// direct-mapped table (a newer record takes its slot), so it needs no eviction bookkeeping and
/// its size is bounded: [`RecentCuts::SLOTS`] records of at most [`RecentCuts::MAX_CHUNKS`]
/// chunks each (16 MiB at worst, ~3 MiB for 256 KiB records).
pub struct RecentCuts {
    slots: Box<[Mutex<Option<Cuts>>]>,
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

    pub fn new() -> RecentCuts {
        RecentCuts {
            slots: (0..Self::SLOTS).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// [`chunk_and_hash`], scanning only records not seen recently.
    pub fn chunk_and_hash(&self, params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
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
        let chunks = chunk_and_hash(params, data);
        if chunks.len() <= Self::MAX_CHUNKS {
            *slot.lock() = Some(Cuts {
                fingerprint,
                lengths: chunks.iter().map(|&(_, n)| n).collect(),
            });
        }
        chunks
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
/// batch (`multihash`: twice the rate of hashing them one by one).
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

    #[test]
    fn a_fingerprint_collision_gives_other_cuts_never_wrong_ids() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        let data = record(7, 100_000);
        let fingerprint = xxhash_rust::xxh3::xxh3_128(&data);
        // Plant cuts for this fingerprint that the chunker would never make.
        *recent.slots[(fingerprint as usize) % RecentCuts::SLOTS].lock() = Some(Cuts {
            fingerprint,
            lengths: vec![60_000, 40_000].into(),
        });
        let got = recent.chunk_and_hash(params, &data);
        assert_eq!(
            got,
            vec![
                (ChunkId::of(&data[..60_000]), 60_000),
                (ChunkId::of(&data[60_000..]), 40_000)
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
