//! Chunking and hashing of whole records on a pool of threads, so that one stream uses every
//! core. Only records that start on a chunk boundary and are long enough to end on one (at least
//! the average chunk size) are sent here: their cut points then depend on nothing outside the
//! record, and the result is exactly what the stream's own chunker would produce.
//!
//! Backup streams repeat whole records (the same file block written again), so the pool also
//! remembers recent records ([`RecentCuts`]): a record of up to 384 KiB by its BLAKE3 with its
//! chunks' ids, so a repeat costs one hash of the record instead of a scan and a hash of each
//! chunk (every record while some repeat, a sample while none do). Longer records, and records
//! that do not repeat whole but in pieces (a 1 MiB record of blocks seen before in another
//! order), are cut where recently scanned chunks ended, found by the bytes they start with
//! ([`ChunkCuts`]), and hashed; a remembered cut counts only if the chunk it gives has the id
//! remembered with it. Ids come from the bytes themselves: hashed
//! again, or taken from a record whose BLAKE3 is this record's (the same assumption that makes
//! a chunk's id its identity), so a key collision could only cost a second cut, never a wrong
//! id or other cut points.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32};

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

/// Recently seen records of up to [`RecentCuts::MAX_NAMED_RECORD`] bytes, by their BLAKE3, with
/// their chunks' ids and lengths, in a direct-mapped table (a newer record takes its slot), so
/// it needs no eviction bookkeeping and its size is bounded: [`RecentCuts::SLOTS`] × at most
/// [`RecentCuts::MAX_NAMED_CHUNKS`] chunks of 36 bytes, 47 MB at worst, ~34 MB for 256 KiB
/// records, ~8 MB for 64 KiB ones. A repeat costs one BLAKE3 of the record at the hash's full
/// SIMD width (~0.2 CPU-s/GB on a 2.1 GHz Xeon) instead of a BLAKE3 of each 2 KiB chunk (~0.45).
/// Every other record is cut where remembered chunks ended ([`ChunkCuts`]) and hashed. While
/// few records repeat whole, only a sample of them is named ([`Naming`]).
pub struct RecentCuts {
    named: Box<[Mutex<Option<NamedRecord>>]>,
    naming: Naming,
    chunks: ChunkCuts,
}

/// Which records are named by their BLAKE3. Naming costs one BLAKE3 of the record (~0.3
/// CPU-s/GB) and pays only when the record comes again whole while its slot holds it; in a
/// stream of unique records that hash is a sixth to a third of the pool's work for nothing.
/// So the pool counts, over each [`Naming::EPOCH`] records it names, how many it found: while
/// one in 16 is found it names every record; after two epochs that find fewer, one in
/// [`Naming::SAMPLE`]. The sample is chosen by a fingerprint of the record's bytes, so a
/// record and its repeats are chosen alike and the sampled records go on measuring how often
/// records repeat. Only CPU depends on this: a record not named is cut and hashed as any
/// other, to the same chunks (`docs/design/efficiency.md` §50).
struct Naming {
    named: AtomicU32,
    found: AtomicU32,
    poor_epochs: AtomicU32,
    sampling: AtomicBool,
    /// Records named by their BLAKE3 (tests check the sampling).
    #[cfg(test)]
    hashed: std::sync::atomic::AtomicU64,
}

impl Naming {
    const EPOCH: u32 = 64;
    const SAMPLE: u64 = 16;
    /// Records are all named while at least one in this many named is found ...
    const FOUND_SHARE: u32 = 16;
    /// ... or until this many epochs in a row find fewer: the first records of a fresh stretch
    /// of data repeat little even where the stretch repeats much (the tapewrite workload at
    /// 64 KiB records finds ~5 % of its first 64 records in a window, ~15 % of the next).
    const POOR_EPOCHS: u32 = 2;

    fn new() -> Naming {
        Naming {
            named: AtomicU32::new(0),
            found: AtomicU32::new(0),
            poor_epochs: AtomicU32::new(0),
            sampling: AtomicBool::new(false),
            #[cfg(test)]
            hashed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether `record` is to be named (records too short to fingerprint always are; the
    /// pool gets none: its records are at least an average chunk long).
    fn chooses(&self, record: &[u8]) -> bool {
        if !self.sampling.load(Relaxed) || record.len() < 96 {
            return true;
        }
        // The first, middle and last 32 bytes: records that begin alike (headers, padding)
        // are still told apart.
        let n = record.len();
        let mut probe = [0u8; 96];
        probe[..32].copy_from_slice(&record[..32]);
        probe[32..64].copy_from_slice(&record[n / 2 - 16..n / 2 + 16]);
        probe[64..].copy_from_slice(&record[n - 32..]);
        xxhash_rust::xxh3::xxh3_64_with_seed(&probe, 0x6e61_6d65).is_multiple_of(Self::SAMPLE)
    }

    /// Counts a named record, found in the table or not, and ends the epoch when it is full.
    /// Counts of two threads that end an epoch together may blur that epoch: a matter of CPU.
    fn count(&self, found: bool) {
        #[cfg(test)]
        self.hashed.fetch_add(1, Relaxed);
        if found {
            self.found.fetch_add(1, Relaxed);
        }
        if self.named.fetch_add(1, Relaxed) + 1 >= Self::EPOCH {
            self.named.store(0, Relaxed);
            let found = self.found.swap(0, Relaxed);
            if found * Self::FOUND_SHARE >= Self::EPOCH {
                self.poor_epochs.store(0, Relaxed);
                self.sampling.store(false, Relaxed);
            } else if self.poor_epochs.fetch_add(1, Relaxed) + 1 >= Self::POOR_EPOCHS {
                self.sampling.store(true, Relaxed);
            }
        }
    }
}

struct NamedRecord {
    record: [u8; 32],
    chunks: Box<[(ChunkId, u32)]>,
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
    /// Records up to this long are remembered by their BLAKE3 with their chunks' ids.
    pub const MAX_NAMED_RECORD: usize = 384 << 10;
    /// ... if they were cut into at most this many chunks.
    pub const MAX_NAMED_CHUNKS: usize = 160;

    pub fn new() -> RecentCuts {
        RecentCuts {
            named: (0..Self::SLOTS).map(|_| Mutex::new(None)).collect(),
            naming: Naming::new(),
            chunks: ChunkCuts::new(),
        }
    }

    /// `chunk_and_hash` (the tests' reference), hashing the chunks only of records not seen
    /// recently, too long to be remembered with their ids, or not in the sample ([`Naming`]),
    /// and scanning only chunks not seen recently.
    pub fn chunk_and_hash(&self, params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
        if data.len() > Self::MAX_NAMED_RECORD || !self.naming.chooses(data) {
            return self.chunks.cut_and_hash(params, data);
        }
        let record = *blake3::hash(data).as_bytes();
        let slot = &self.named[Self::slot_of(&record)];
        if let Some(known) = slot.lock().as_ref()
            && known.record == record
        {
            self.naming.count(true);
            return known.chunks.to_vec();
        }
        self.naming.count(false);
        let chunks = self.chunks.cut_and_hash(params, data);
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
}

/// Where recently scanned chunks ended, keyed by a fingerprint of their first `min` bytes, with
/// the first half of their id.
///
/// Why a remembered cut is exact: a record sent to the pool starts on a chunk boundary, and the
/// chunker starts afresh at every cut, so where a chunk ends depends only on its own bytes
/// (`Chunker::scan` returns `Some(n)` after the first n bytes that pass the cut test, or at
/// `max`). A chunk whose bytes equal those of a chunk the scan once ended at n therefore ends
/// at n again. A record is cut speculatively (remembered lengths where the table has the key,
/// scans elsewhere) and hashed; then every chunk taken from the table must have the id
/// remembered with it (a 128-bit BLAKE3 prefix: equal bytes), else the window is cut again from
/// that chunk on, by scanning alone for as many bytes as were hashed in vain
/// ([`ChunkCuts::cut_and_hash`]). So the check costs nothing beyond the ids the store needs
/// anyway, and a false key match (or a planted entry) costs a second cut and hash of at most a
/// window, never other cuts than a scan's, and never a wrong id: ids are always the BLAKE3 of
/// the bytes.
/// Only chunks the scan cut are remembered, not a record's last piece (that one ended where its
/// record did).
///
/// Runs of chunks seen twice are remembered as well, by the BLAKE3 of their bytes ([`Run`]).
///
/// Direct-mapped like [`RecentCuts`] (a newer chunk takes the slot), in shards so the hash
/// threads seldom wait for each other; bounded at [`ChunkCuts::SLOTS`] × 32 bytes (16 MiB)
/// for chunks and [`ChunkCuts::RUN_SLOTS`] runs (28 MB of ids at most) for runs.
pub(crate) struct ChunkCuts {
    shards: Box<[Mutex<Box<[ChunkCut]>>]>,
    runs: Box<[Mutex<Option<Run>>]>,
    /// Runs named from memory (tests check they are used).
    #[cfg(test)]
    run_hits: std::sync::atomic::AtomicU64,
    /// Chunks cut where a remembered one ended (tests check the table is used).
    #[cfg(test)]
    hits: std::sync::atomic::AtomicU64,
    /// Windows ended early by a remembered chunk whose id differed.
    #[cfg(test)]
    recuts: std::sync::atomic::AtomicU64,
    /// Bytes hashed chunk by chunk (tests bound the work wrong entries cost).
    #[cfg(test)]
    hashed: std::sync::atomic::AtomicU64,
}

#[derive(Clone, Copy, Default)]
struct ChunkCut {
    /// xxh3-64 of the chunk's first `min` bytes (the key; the low bits chose the slot).
    start: u64,
    /// 0: an empty slot.
    len: u32,
    /// [`end_of`] the chunk: checked before the chunk is taken, so a chunk that starts like a
    /// remembered one and ends otherwise (the usual case: one that crossed into other data
    /// after a block boundary) is scanned at once instead of failing its window.
    end: u32,
    /// The first 16 bytes of the chunk's id.
    id: [u8; 16],
}

/// A 32-bit fingerprint of a chunk's last 32 bytes (or fewer: a chunk is at least `min` long).
fn end_of(chunk: &[u8]) -> u32 {
    xxhash_rust::xxh3::xxh3_64(&chunk[chunk.len().saturating_sub(32)..]) as u32
}

/// One chunk of a speculative cut: its length, and the id prefix the table remembered it with
/// (to be checked), the key to remember it under (scanned, not a record's last piece), or its
/// id (a chunk of a run named from memory).
#[derive(Clone, Copy)]
enum Cut {
    Remembered {
        len: u32,
        start: u64,
        id: [u8; 16],
    },
    Scanned {
        len: u32,
        start: u64,
        end: u32,
    },
    Last {
        len: u32,
    },
    /// A chunk of a remembered run whose bytes had the run's BLAKE3: its id is known.
    Named {
        len: u32,
        id: ChunkId,
    },
}

impl Cut {
    fn len(self) -> u32 {
        match self {
            Cut::Remembered { len, .. }
            | Cut::Scanned { len, .. }
            | Cut::Last { len }
            | Cut::Named { len, .. } => len,
        }
    }
}

/// A run of chunks seen at least twice (every one taken from [`ChunkCuts`] and its id
/// confirmed), remembered by the BLAKE3 of its bytes with the chunks' ids, so the next time its
/// bytes come they are named by one hash at BLAKE3's full SIMD width instead of a table probe
/// and a hash per chunk. Runs start after an anchor chunk and end at one (content-defined, as
/// `format::split_into_pieces` cuts records), so the same run recurs wherever its blocks do.
/// They also start at the first chunk taken from the table after one that was not, and end
/// before the next such chunk: where a block's known chunks begin and end after and before
/// the seams with its neighbours, which recurs with the block whatever its neighbours.
struct Run {
    /// The key of its first chunk, as in [`ChunkCut::start`].
    start: u64,
    len: u32,
    end: u32,
    hash: [u8; 32],
    chunks: Box<[(ChunkId, u32)]>,
}

/// A chunk after which a run may start, and at which one ends once it holds
/// [`ChunkCuts::MIN_RUN`] chunks (one chunk in 16).
fn is_anchor(id: &ChunkId) -> bool {
    id.0[29].is_multiple_of(16)
}

/// A run being gathered by [`ChunkCuts::remember_runs`] from one window to the next: its first
/// chunk's index among the data's chunks, its start key and its byte offset; whether the last
/// chunk seen was an anchor, and whether it was not taken from the table (or none was seen).
struct RunGathering {
    run: Option<(usize, u64, usize)>,
    after_anchor: bool,
    after_break: bool,
}

impl Default for RunGathering {
    fn default() -> Self {
        // The data's start is a chunk boundary like a seam: a run may start there.
        RunGathering {
            run: None,
            after_anchor: false,
            after_break: true,
        }
    }
}

fn id_prefix(id: &ChunkId) -> [u8; 16] {
    id.0[..16].try_into().expect("16 of 32 bytes")
}

impl ChunkCuts {
    /// About 1.5 GiB of 2 KiB-average chunks (the tapewrite workload's 256 MiB repeat window
    /// for several streams, with room for slot collisions); 16 MiB.
    pub const SLOTS: usize = 1 << 19;
    const SHARDS: usize = 64;
    /// Chunks cut and hashed at a time (about 700 KiB at the default size): `multihash` fills
    /// its SIMD lanes best from many chunks at once (windows of 32 chunks hashed 1 MiB records
    /// at twice the CPU of whole records), and since [`end_of`] is checked before a chunk is
    /// taken, a window seldom fails.
    const WINDOW: usize = 256;
    /// Runs remembered: about 750 MB of data in runs of 16 average chunks; at most
    /// `RUN_SLOTS` × [`ChunkCuts::MAX_RUN`] × 36 bytes of ids (28 MB), ~10 MB typically.
    const RUN_SLOTS: usize = 1 << 14;
    const MIN_RUN: usize = 4;
    const MAX_RUN: usize = 48;

    fn new() -> ChunkCuts {
        let per_shard = Self::SLOTS / Self::SHARDS;
        ChunkCuts {
            shards: (0..Self::SHARDS)
                .map(|_| Mutex::new(vec![ChunkCut::default(); per_shard].into_boxed_slice()))
                .collect(),
            runs: (0..Self::RUN_SLOTS).map(|_| Mutex::new(None)).collect(),
            #[cfg(test)]
            run_hits: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            hits: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            recuts: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            hashed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn slot(start: u64) -> (usize, usize) {
        let per_shard = Self::SLOTS / Self::SHARDS;
        let i = (start as usize) % Self::SLOTS;
        (i / per_shard, i % per_shard)
    }

    fn get(&self, start: u64) -> Option<ChunkCut> {
        let (shard, i) = Self::slot(start);
        let cut = self.shards[shard].lock()[i];
        (cut.len > 0 && cut.start == start).then_some(cut)
    }

    fn put(&self, cut: ChunkCut) {
        let (shard, i) = Self::slot(cut.start);
        self.shards[shard].lock()[i] = cut;
    }

    /// The chunks of a record that starts on a chunk boundary: exactly those a plain scan gives
    /// (`chunk_and_hash`, the tests' reference), cut where remembered chunks ended when their
    /// ids agree.
    ///
    /// The record is cut and hashed in windows of about [`ChunkCuts::WINDOW`] chunks. A
    /// remembered chunk whose id differs ends its window there: the chunks before it are kept, and what follows is cut by scanning alone
    /// for at least as many bytes as the window hashed in vain. So a false key match wastes at
    /// most one window's hashing, and data whose chunks mostly mismatch (many chunks that start
    /// alike) is hashed at most about twice.
    fn cut_and_hash(&self, params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
        let mut chunks = Vec::with_capacity(data.len() / params.avg as usize + 2);
        let mut offset = 0;
        // Bytes to cut by scanning alone before the table is asked again.
        let mut scan_owed = 0;
        // Runs are gathered across windows: a window's edge is not the data's.
        let mut gathering = RunGathering::default();
        while offset < data.len() {
            let rest = &data[offset..];
            let cuts = self.cut(params, rest, scan_owed);
            let lengths: Vec<u32> = cuts.iter().map(|c| c.len()).collect();
            let hashed = hash_cuts(rest, &cuts);
            #[cfg(test)]
            self.hashed.fetch_add(
                cuts.iter()
                    .filter(|c| !matches!(c, Cut::Named { .. }))
                    .map(|c| u64::from(c.len()))
                    .sum(),
                Relaxed,
            );
            let mismatch = cuts.iter().zip(&hashed).position(|(cut, (id, _))| {
                matches!(cut, Cut::Remembered { id: want, .. } if *want != id_prefix(id))
            });
            let good = mismatch.unwrap_or(hashed.len());
            self.remember(&cuts[..good], &hashed[..good]);
            chunks.extend_from_slice(&hashed[..good]);
            self.remember_runs(data, offset, &cuts[..good], &chunks, &mut gathering);
            offset += lengths[..good].iter().map(|&n| n as usize).sum::<usize>();
            scan_owed = lengths[good..].iter().map(|&n| n as usize).sum();
            #[cfg(test)]
            if mismatch.is_some() {
                self.recuts.fetch_add(1, Relaxed);
            }
        }
        chunks
    }

    /// Remembers the runs of confirmed remembered chunks among `cuts`, one window of `data`
    /// that starts at `offset` and whose chunks are the last of `chunks` (the data's chunks so
    /// far), cut at anchors and seams (see [`Run`]). A run being gathered at the window's end
    /// goes on in the next through `gathering`. This is the one extra cost of runs: a BLAKE3
    /// over bytes seen for the second time.
    fn remember_runs(
        &self,
        data: &[u8],
        mut offset: usize,
        cuts: &[Cut],
        chunks: &[(ChunkId, u32)],
        gathering: &mut RunGathering,
    ) {
        let first = chunks.len() - cuts.len();
        for (i, cut) in (first..).zip(cuts) {
            let (id, len) = &chunks[i];
            match *cut {
                Cut::Remembered { start, .. } => {
                    if gathering.run.is_none() && (gathering.after_anchor || gathering.after_break)
                    {
                        gathering.run = Some((i, start, offset));
                    }
                    gathering.after_break = false;
                }
                _ => {
                    // A chunk not taken from the table (a seam between blocks, the record's
                    // last chunk, a chunk named by a run) ends the run before it: where a
                    // block's known chunks end recurs with the block.
                    if let Some((run_first, start, from)) = gathering.run.take()
                        && i - run_first >= Self::MIN_RUN
                    {
                        self.put_run(start, &data[from..offset], &chunks[run_first..i]);
                    }
                    gathering.after_break = true;
                }
            }
            offset += *len as usize;
            let anchor = is_anchor(id);
            if let Some((run_first, start, from)) = gathering.run {
                let n = i + 1 - run_first;
                if (anchor && n >= Self::MIN_RUN) || n == Self::MAX_RUN {
                    self.put_run(start, &data[from..offset], &chunks[run_first..=i]);
                    gathering.run = None;
                }
            }
            gathering.after_anchor = anchor;
        }
    }

    fn put_run(&self, start: u64, bytes: &[u8], chunks: &[(ChunkId, u32)]) {
        *self.runs[(start as usize) % Self::RUN_SLOTS].lock() = Some(Run {
            start,
            len: bytes.len() as u32,
            end: end_of(bytes),
            hash: *blake3::hash(bytes).as_bytes(),
            chunks: Box::from(chunks),
        });
    }

    /// The chunks of the remembered run that `data` starts with, if its bytes have the run's
    /// BLAKE3. A run whose bytes differ is forgotten, so a false match costs one hash once.
    fn run_at(&self, start: u64, data: &[u8]) -> Option<Box<[(ChunkId, u32)]>> {
        let slot = &self.runs[(start as usize) % Self::RUN_SLOTS];
        let (len, hash, chunks) = {
            let run = slot.lock();
            let run = run.as_ref().filter(|r| {
                r.start == start
                    && r.len as usize <= data.len()
                    && end_of(&data[..r.len as usize]) == r.end
            })?;
            (run.len as usize, run.hash, run.chunks.clone())
        };
        if *blake3::hash(&data[..len]).as_bytes() == hash {
            #[cfg(test)]
            self.run_hits.fetch_add(1, Relaxed);
            return Some(chunks);
        }
        let mut run = slot.lock();
        if run.as_ref().is_some_and(|r| r.hash == hash) {
            *run = None;
        }
        None
    }

    /// Remembers the scanned chunks among `cuts` (hashed as `chunks`).
    fn remember(&self, cuts: &[Cut], chunks: &[(ChunkId, u32)]) {
        for (cut, (id, len)) in cuts.iter().zip(chunks) {
            if let Cut::Scanned { start, end, .. } = *cut {
                self.put(ChunkCut {
                    start,
                    len: *len,
                    end,
                    id: id_prefix(id),
                });
            }
        }
    }

    /// Cuts one window off the start of `data`, which starts on a chunk boundary: where a
    /// remembered chunk ended if the table knows the bytes it starts with, else by scanning; or,
    /// when `scan_owed` > 0, by scanning alone. A window ends after [`ChunkCuts::WINDOW`] chunks
    /// or as many average chunks' bytes, or (scanning alone) once it holds `scan_owed` bytes;
    /// the last piece of `data` is cut only if reached.
    fn cut(&self, params: ChunkerParams, data: &[u8], scan_owed: usize) -> Vec<Cut> {
        let use_table = scan_owed == 0;
        let window_bytes = Self::WINDOW * params.avg as usize;
        let mut bytes = 0;
        // Every chunk the scan cuts is at least `min` long (the last piece of a record may be
        // shorter: it is never looked up).
        let key_len = params.min as usize;
        let mut cuts = Vec::with_capacity(Self::WINDOW + 1);
        let mut rest = data;
        while rest.len() >= key_len {
            let full = if use_table {
                cuts.len() >= Self::WINDOW || bytes >= window_bytes
            } else {
                !cuts.is_empty() && bytes >= scan_owed
            };
            if full {
                return cuts;
            }
            let start = xxhash_rust::xxh3::xxh3_64(&rest[..key_len]);
            if use_table && let Some(run) = self.run_at(start, rest) {
                for &(id, len) in &run {
                    cuts.push(Cut::Named { len, id });
                    bytes += len as usize;
                    rest = &rest[len as usize..];
                }
                continue;
            }
            let known = use_table.then(|| self.get(start)).flatten().filter(|c| {
                c.len as usize <= rest.len() && end_of(&rest[..c.len as usize]) == c.end
            });
            let cut = match known {
                Some(c) => {
                    #[cfg(test)]
                    self.hits.fetch_add(1, Relaxed);
                    Cut::Remembered {
                        len: c.len,
                        start,
                        id: c.id,
                    }
                }
                // `n` ≤ `max` ≤ 16 MiB (`ChunkerParams::validate`).
                None => match Chunker::new(params).scan(rest) {
                    Some(n) => Cut::Scanned {
                        len: n as u32,
                        start,
                        end: end_of(&rest[..n]),
                    },
                    None => break,
                },
            };
            cuts.push(cut);
            bytes += cut.len() as usize;
            rest = &rest[cut.len() as usize..];
        }
        if !rest.is_empty() {
            cuts.push(Cut::Last {
                len: rest.len() as u32,
            });
        }
        cuts
    }
}

/// The ids of `cuts` (which cover `data`): known for named chunks, the others hashed in one
/// batch.
fn hash_cuts(data: &[u8], cuts: &[Cut]) -> Vec<(ChunkId, u32)> {
    let mut pieces: Vec<&[u8]> = Vec::with_capacity(cuts.len());
    let mut offset = 0;
    for cut in cuts {
        let n = cut.len() as usize;
        if !matches!(cut, Cut::Named { .. }) {
            pieces.push(&data[offset..offset + n]);
        }
        offset += n;
    }
    let mut ids = Vec::with_capacity(pieces.len());
    crate::multihash::hash_all(&pieces, &mut ids);
    let mut ids = ids.into_iter();
    cuts.iter()
        .map(|cut| match *cut {
            Cut::Named { len, id } => (id, len),
            other => (ids.next().expect("one id per piece hashed"), other.len()),
        })
        .collect()
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
        // The reordered blocks' chunks were found again: the test exercised remembered cuts
        // and runs, not just the scan (most repeats are named by runs, whose chunks are not
        // counted as hits).
        let hits = recent.chunks.hits.load(Relaxed);
        let run_hits = recent.chunks.run_hits.load(Relaxed);
        assert!(
            hits > 500,
            "only {hits} chunks were cut where a remembered one ended"
        );
        assert!(
            run_hits > 500,
            "only {run_hits} runs were named from memory"
        );
    }

    /// The starts of the chunks a plain scan cuts `data` into, with their keys (not the last
    /// piece: that one is never remembered, so a planted entry there would stay).
    fn scanned_starts(params: ChunkerParams, data: &[u8]) -> Vec<(usize, u64)> {
        let mut offset = 0;
        let mut starts = Vec::new();
        let chunks = chunk_and_hash(params, data);
        for &(_, len) in &chunks[..chunks.len() - 1] {
            if data.len() - offset >= params.min as usize {
                let key = xxhash_rust::xxh3::xxh3_64(&data[offset..offset + params.min as usize]);
                starts.push((offset, key));
            }
            offset += len as usize;
        }
        starts
    }

    #[test]
    fn a_remembered_chunk_is_used_only_when_its_id_matches() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        let data = record(11, 100_000);
        let start = xxhash_rust::xxh3::xxh3_64(&data[..params.min as usize]);
        // A planted cut the chunker would not make, with the id of those bytes: used (which
        // shows the table is consulted and its id decides), and the ids still name the bytes.
        let id = ChunkId::of(&data[..40_000]);
        let plant = |len: u32, end: u32, id: [u8; 16]| {
            recent.chunks.put(ChunkCut {
                start,
                len,
                end,
                id,
            });
        };
        plant(40_000, end_of(&data[..40_000]), id_prefix(&id));
        let got = recent.chunks.cut_and_hash(params, &data);
        assert_eq!(got[0], (id, 40_000));
        assert_eq!(got.iter().map(|c| c.1 as usize).sum::<usize>(), data.len());
        for chunk in &got {
            assert_ne!(chunk.1, 0);
        }
        let mut offset = 0;
        for (id, len) in &got {
            assert_eq!(*id, ChunkId::of(&data[offset..offset + *len as usize]));
            offset += *len as usize;
        }
        // The same key with another end, another id, or a length past the record: cut as a
        // scan cuts, and the scanned chunk takes the slot back. Only the wrong id costs a
        // second cut (the end is checked before the chunk is taken).
        let expected = chunk_and_hash(params, &data);
        let end = end_of(&data[..40_000]);
        for (len, end, id, recuts) in [
            (40_000, end ^ 1, id_prefix(&id), 0),
            (40_000, end, [1u8; 16], 1),
            (200_000, end, id_prefix(&id), 1),
        ] {
            plant(len, end, id);
            assert_eq!(recent.chunks.cut_and_hash(params, &data), expected);
            let slot = recent.chunks.get(start).map(|c| (c.len, c.id));
            assert_eq!(slot, Some((expected[0].1, id_prefix(&expected[0].0))));
            let got = recent.chunks.recuts.load(Relaxed);
            assert_eq!(got, recuts);
        }
    }

    /// Every chunk start of a record planted with a wrong id and the right end (data whose
    /// chunks start and end alike does this): the record is still cut as a scan cuts it, and it is hashed at most twice
    /// over (a wrong chunk ends its window; the next window is scanned alone).
    #[test]
    fn wrong_remembered_chunks_cost_at_most_a_second_hash_of_the_record() {
        let params = ChunkerParams::with_avg(256);
        let data = record(12, 300_000);
        let expected = chunk_and_hash(params, &data);
        for wrong_len in [params.min, params.max, 1000] {
            let recent = RecentCuts::new();
            for (offset, start) in scanned_starts(params, &data) {
                // The end of what the wrong length covers, so only the id tells.
                let covered = &data[offset..(offset + wrong_len as usize).min(data.len())];
                recent.chunks.put(ChunkCut {
                    start,
                    len: wrong_len,
                    end: end_of(covered),
                    id: [0xee; 16],
                });
            }
            let recut = |cuts: &ChunkCuts| cuts.recuts.load(Relaxed);
            assert_eq!(recent.chunks.cut_and_hash(params, &data), expected);
            // Each wrong chunk costs its window; as many bytes scanned alone follow it.
            assert!(
                recut(&recent.chunks) >= 1,
                "the planted entries were consulted"
            );
            let hashed = recent.chunks.hashed.load(Relaxed) as usize;
            // Twice the record, and the last window's waste if the record ends before the
            // scanning that repays it.
            let bound =
                2 * data.len() + ChunkCuts::WINDOW * params.avg as usize + params.max as usize;
            assert!(hashed <= bound, "{hashed} bytes hashed for {}", data.len());
            // The scanned chunks replaced the wrong ones: the repeat takes no second pass.
            let before = recut(&recent.chunks);
            assert_eq!(recent.chunks.cut_and_hash(params, &data), expected);
            assert_eq!(recut(&recent.chunks), before);
        }
    }

    /// A run is named from memory only under its own BLAKE3: planted ids under the bytes'
    /// hash are taken as they are (the run table is consulted and trusted), under another hash
    /// they are not (the record is cut and hashed, and the run forgotten).
    #[test]
    fn a_run_is_named_from_memory_only_under_its_own_blake3() {
        let params = ChunkerParams::DEFAULT;
        let cuts = ChunkCuts::new();
        let data = record(31, 100_000);
        let start = xxhash_rust::xxh3::xxh3_64(&data[..params.min as usize]);
        let slot = (start as usize) % ChunkCuts::RUN_SLOTS;
        let planted: Box<[(ChunkId, u32)]> =
            vec![(ChunkId([5; 32]), 30_000), (ChunkId([6; 32]), 20_000)].into();
        let plant = |hash: [u8; 32]| {
            *cuts.runs[slot].lock() = Some(Run {
                start,
                len: 50_000,
                end: end_of(&data[..50_000]),
                hash,
                chunks: planted.clone(),
            });
        };
        plant(*blake3::hash(&data[..50_000]).as_bytes());
        let got = cuts.cut_and_hash(params, &data);
        assert_eq!(&got[..2], &planted[..]);
        assert_eq!(got.iter().map(|c| c.1 as usize).sum::<usize>(), data.len());
        let mut other = *blake3::hash(&data[..50_000]).as_bytes();
        other[0] ^= 1;
        plant(other);
        let cuts_fresh = ChunkCuts::new();
        assert_eq!(
            cuts.cut_and_hash(params, &data),
            cuts_fresh.cut_and_hash(params, &data)
        );
        assert_eq!(
            cuts.cut_and_hash(params, &data),
            chunk_and_hash(params, &data)
        );
        assert!(
            cuts.runs[slot]
                .lock()
                .as_ref()
                .is_none_or(|r| r.hash != other)
        );
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

    /// A stream of unique records names only a sample of them after two epochs; records that
    /// repeat bring every record back to being named. Every record is cut as a scan cuts it
    /// throughout.
    #[test]
    fn unique_records_are_named_by_sample_until_records_repeat() {
        let params = ChunkerParams::with_avg(256);
        let recent = RecentCuts::new();
        let hashed = || recent.naming.hashed.load(Relaxed);
        let sampling = || recent.naming.sampling.load(Relaxed);
        let check = |seed: u64| {
            let data = record(seed, 1024);
            assert_eq!(
                recent.chunk_and_hash(params, &data),
                chunk_and_hash(params, &data)
            );
        };
        // The first epochs name every record; none is found, so sampling starts after two.
        let epoch = u64::from(Naming::EPOCH);
        for seed in 0..epoch {
            check(1000 + seed);
        }
        assert!(!sampling(), "one poor epoch is not enough");
        for seed in epoch..2 * epoch {
            check(1000 + seed);
        }
        assert_eq!(hashed(), 2 * epoch);
        assert!(sampling());
        // Unique records from then on: about one in SAMPLE is named (expected 256 of 4096).
        let before = hashed();
        for seed in 0..4096 {
            check(10_000 + seed);
        }
        let named = hashed() - before;
        assert!(
            (160..=360).contains(&named),
            "{named} of 4096 records named"
        );
        assert!(sampling(), "unique records keep the sampling on");
        // Records that each come twice: half the sampled ones are found, every record is
        // named again.
        for seed in 0..2048 {
            check(20_000 + seed);
            check(20_000 + seed);
        }
        assert!(!sampling(), "repeated records end the sampling");
        let before = hashed();
        for seed in 0..16 {
            check(30_000 + seed);
        }
        assert_eq!(hashed() - before, 16);
    }

    /// Records past the named size are not remembered whole; their chunks are, so a repeat is
    /// cut from the table (every chunk but the last piece) and hashed.
    #[test]
    fn a_long_record_is_remembered_by_its_chunks_only() {
        let params = ChunkerParams::DEFAULT;
        let recent = RecentCuts::new();
        let data = record(22, RecentCuts::MAX_NAMED_RECORD + 1);
        let expected = chunk_and_hash(params, &data);
        assert_eq!(recent.chunk_and_hash(params, &data), expected);
        assert!(recent.named.iter().all(|slot| slot.lock().is_none()));
        let hits = || recent.chunks.hits.load(Relaxed);
        assert_eq!(hits(), 0);
        assert_eq!(recent.chunk_and_hash(params, &data), expected);
        assert_eq!(hits() as usize, expected.len() - 1);
    }

    /// Runs are gathered across the windows a long record is cut in: on its third sighting
    /// (scanned, then taken from the table, then named by runs) only its last chunk is hashed
    /// one by one (1,614 of its 2 MiB). Runs that ended at each window's edge left 55,746 bytes
    /// to be hashed again (7.8 % before runs also started at the record's first chunk).
    #[test]
    fn runs_go_on_across_windows() {
        let params = ChunkerParams::DEFAULT;
        let cuts = ChunkCuts::new();
        let data = record(41, 2 << 20);
        let expected = chunk_and_hash(params, &data);
        assert!(
            expected.len() > 3 * ChunkCuts::WINDOW,
            "{} chunks",
            expected.len()
        );
        let hashed = || cuts.hashed.load(Relaxed);
        for _ in 0..2 {
            assert_eq!(cuts.cut_and_hash(params, &data), expected);
        }
        let before = hashed();
        assert_eq!(cuts.cut_and_hash(params, &data), expected);
        let third = (hashed() - before) as usize;
        assert!(
            third <= params.max as usize,
            "the third sighting hashed {third} of {} bytes one chunk at a time",
            data.len()
        );
    }

    /// A block that comes back after other neighbours is named by runs from its first known
    /// chunk after the seam to its last: on its third sighting only the chunks across the seam
    /// and the record's last are hashed one by one (13.7 kB of the block's 128 KiB). Runs that
    /// had to start after an anchor and end at one left 99.8 kB of it to be hashed each time.
    #[test]
    fn a_block_between_other_neighbours_is_named_by_runs_from_seam_to_seam() {
        let params = ChunkerParams::DEFAULT;
        let cuts = ChunkCuts::new();
        let block = record(51, 128 << 10);
        let hashed = || cuts.hashed.load(Relaxed) as usize;
        let mut before = 0;
        for seed in [52, 53, 54] {
            let neighbour = record(seed, 96 << 10);
            let data = [&neighbour[..], &block[..]].concat();
            before = hashed();
            assert_eq!(
                cuts.cut_and_hash(params, &data),
                chunk_and_hash(params, &data)
            );
        }
        // The third record: its new neighbour is hashed whole, the block almost not at all.
        let of_block = (hashed() - before).saturating_sub(96 << 10);
        assert!(
            of_block < 32 << 10,
            "the block's third sighting hashed {of_block} of its {} bytes one chunk at a time",
            block.len()
        );
    }
}
