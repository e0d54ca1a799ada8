//! Space accounting for a set of streams (a cartridge's partitions): the bytes they hold, the
//! distinct chunks they reference, what those take in packs, and — on request — what only they
//! reference, which deleting them and reclaiming would free.
//!
//! Everything is read from one catalog snapshot, so it runs beside writers and reclaim, and it
//! counts what the streams' owners flushed. Cost: one pass over the streams' extent rows, each
//! span they name expanded once (while the span memo holds it), and one index lookup per distinct
//! chunk. Memory is bounded: once more than [`EXACT_CHUNKS`] distinct chunks are seen, only
//! chunks whose id lies below a threshold are tracked, and the threshold is halved whenever the
//! sample fills up again (adaptive sampling: ids are BLAKE3 hashes, so a range of ids is a
//! uniform sample). Sums over the sample are scaled up and [`StreamUsage::exact`] is false.

use std::collections::{BTreeSet, HashMap, HashSet};

use redb::ReadableTable;

use crate::Result;
use crate::catalog::{EXTENTS, STREAMS};
use crate::catalog::{PACKS, PackRow};
use crate::format::{ChunkId, ChunkRef, Entry, SpanId};
use crate::spans::decode_row;
use crate::store::{ChunkStore, Located};
use crate::stream::StreamId;

/// Distinct chunks counted one by one (about 2 GiB of unique data at the default chunk size,
/// about 50 MB of memory); beyond that the chunk sums are estimated from a sample.
pub const EXACT_CHUNKS: usize = 1 << 20;

/// Spans remembered as already expanded. Forgetting one only costs time: expanding a span
/// again adds chunks the sample already holds.
const SPAN_MEMO: usize = 1 << 18;

/// Whether [`ChunkStore::usage`] also finds the chunks no other stream references. That walks
/// every stream's rows (the whole catalog), so it is asked for, not done by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exclusive {
    Skip,
    Count,
}

/// Space used by a set of streams.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamUsage {
    /// Bytes the streams hold (their committed lengths): what the hosts wrote and kept.
    pub logical_bytes: u64,
    /// Stream bytes covered by chunk references, each reference counted: a chunk referenced
    /// twice counts twice. Every stream byte is covered by exactly one reference, so this equals
    /// `logical_bytes` for a consistent catalog.
    pub referenced_bytes: u64,
    /// Raw bytes of the distinct chunks referenced (a chunk a truncation cut short counts whole:
    /// it is stored whole).
    pub unique_bytes: u64,
    /// What those chunks take in packs, estimated: each chunk is charged its blob's stored size
    /// in proportion to its raw size (chunks are compressed together in blobs). Chunks not yet
    /// in a stored pack count uncompressed. Pack headers, tables and blob checksums (well under
    /// 1 %) are not charged. The bucket is never read for this: a chunk whose pack's table of
    /// contents is only in the bucket (not in the local cache) is charged its pack's average,
    /// the pack's size over its raw bytes (headers included), for its longest reference.
    pub stored_bytes: u64,
    /// The part of `unique_bytes` and `stored_bytes` no other stream references; `None` unless
    /// asked for with [`Exclusive::Count`].
    pub exclusive: Option<ExclusiveUsage>,
    /// False when the chunk sums were estimated from a sample (see the module doc).
    pub exact: bool,
}

/// Chunks referenced by the streams and by no other stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExclusiveUsage {
    pub unique_bytes: u64,
    pub stored_bytes: u64,
}

impl StreamUsage {
    /// Referenced bytes per unique byte (1 when nothing is stored).
    pub fn dedup_ratio(&self) -> f64 {
        ratio(self.referenced_bytes, self.unique_bytes)
    }
    /// Unique bytes per stored byte.
    pub fn compression_ratio(&self) -> f64 {
        ratio(self.unique_bytes, self.stored_bytes)
    }
    /// Logical bytes per stored byte: both reductions together.
    pub fn reduction_ratio(&self) -> f64 {
        ratio(self.logical_bytes, self.stored_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

impl ChunkStore {
    /// Space used by `streams` taken together (chunks shared between them count once). Streams
    /// that do not exist count as empty.
    pub fn usage(&self, streams: &[StreamId], exclusive: Exclusive) -> Result<StreamUsage> {
        self.usage_sampled(streams, exclusive, EXACT_CHUNKS)
    }

    pub(crate) fn usage_sampled(
        &self,
        streams: &[StreamId],
        exclusive: Exclusive,
        budget: usize,
    ) -> Result<StreamUsage> {
        let wanted: BTreeSet<u64> = streams.iter().map(|s| s.0).collect();
        let txn = self.inner.db.begin_read()?;
        let lengths = txn.open_table(STREAMS)?;
        let extents = txn.open_table(EXTENTS)?;
        let spans = crate::spans::read(&txn)?;
        let mut usage = StreamUsage::default();
        let mut sample = ChunkSample::new(budget);
        let mut memo = SpanMemo::default();
        for &stream in &wanted {
            usage.logical_bytes += lengths.get(stream)?.map_or(0, |v| v.value());
            for row in extents.range((stream, 0)..=(stream, u64::MAX))? {
                for entry in decode_row(&spans, row?.1.value())? {
                    usage.referenced_bytes += u64::from(entry.bytes());
                    for r in refs_of(&spans, &mut memo, entry)? {
                        sample.add(r);
                    }
                }
            }
        }

        // Chunks of the sample that some other stream references too.
        let mut shared: HashSet<ChunkId> = HashSet::new();
        if exclusive == Exclusive::Count {
            let mut memo = SpanMemo::default();
            for row in extents.iter()? {
                let (key, value) = row?;
                if wanted.contains(&key.value().0) {
                    continue;
                }
                for entry in decode_row(&spans, value.value())? {
                    for r in refs_of(&spans, &mut memo, entry)? {
                        if sample.chunks.contains_key(&r.id) {
                            shared.insert(r.id);
                        }
                    }
                }
            }
        }

        let mut tracked: Vec<(ChunkId, u32)> =
            sample.chunks.iter().map(|(k, v)| (*k, *v)).collect();
        tracked.sort_unstable_by_key(|(id, _)| *id);
        let ids: Vec<ChunkId> = tracked.iter().map(|(id, _)| *id).collect();
        // Referenced but not found (its pack is still being built, or was just rewritten by a
        // reclaim running beside this): charged as not yet stored.
        let locs = self.inner.locate_many(&txn, &ids)?;
        let mut all = Charges::default();
        let pack_rows = txn.open_table(PACKS)?;
        for loc in &locs {
            if let Located::InPack(pack) = *loc
                && !all.pack_rows.contains_key(&pack)
                && let Some(row) = pack_rows.get(pack)?
            {
                all.pack_rows.insert(pack, PackRow::decode(row.value())?);
            }
        }

        let mut only_ours = Charges {
            pack_rows: all.pack_rows.clone(),
            ..Charges::default()
        };
        for ((id, longest_ref), loc) in tracked.into_iter().zip(locs) {
            all.add(loc, longest_ref);
            if !shared.contains(&id) {
                only_ours.add(loc, longest_ref);
            }
        }
        usage.unique_bytes = sample.scale(all.unique);
        usage.stored_bytes = sample.scale(all.stored());
        if exclusive == Exclusive::Count {
            usage.exclusive = Some(ExclusiveUsage {
                unique_bytes: sample.scale(only_ours.unique),
                stored_bytes: sample.scale(only_ours.stored()),
            });
        }
        usage.exact = sample.halvings == 0;
        Ok(usage)
    }
}

/// The chunk references behind an extent entry: the chunk itself, or a span's chunks the first
/// time the memo sees that span (nothing on a repeat).
fn refs_of(
    spans: &crate::spans::ReadSpans,
    memo: &mut SpanMemo,
    entry: Entry,
) -> Result<Vec<ChunkRef>> {
    match entry {
        Entry::Chunk(r) => Ok(vec![r]),
        Entry::Span { id, len } => {
            if !memo.first_time(id) {
                return Ok(Vec::new());
            }
            let mut refs = Vec::new();
            for entry in crate::spans::span_entries(spans, id, len)? {
                match entry {
                    Entry::Chunk(r) => refs.push(r),
                    // A piece shared with other records is counted the first time only.
                    Entry::Span { id: piece, len } if memo.first_time(piece) => {
                        refs.extend(crate::spans::piece_refs(spans, piece, len)?);
                    }
                    Entry::Span { .. } => {}
                }
            }
            Ok(refs)
        }
    }
}

#[derive(Default)]
struct SpanMemo {
    seen: HashSet<SpanId>,
}

impl SpanMemo {
    fn first_time(&mut self, id: SpanId) -> bool {
        if self.seen.contains(&id) {
            return false;
        }
        if self.seen.len() >= SPAN_MEMO {
            self.seen.clear();
        }
        self.seen.insert(id);
        true
    }
}

/// The distinct chunks seen, or a uniform sample of them once there are too many.
struct ChunkSample {
    /// Tracked chunks with their longest reference (their size when the index lacks them).
    chunks: HashMap<ChunkId, u32>,
    /// Only chunks whose id key is at most `u64::MAX >> halvings` are tracked, so each tracked
    /// chunk stands for `2^halvings`.
    halvings: u32,
    budget: usize,
}

impl ChunkSample {
    fn new(budget: usize) -> ChunkSample {
        ChunkSample {
            chunks: HashMap::new(),
            halvings: 0,
            budget: budget.max(1),
        }
    }

    fn key(id: &ChunkId) -> u64 {
        let mut first = [0u8; 8];
        first.copy_from_slice(&id.0[..8]);
        u64::from_be_bytes(first)
    }

    fn limit(&self) -> u64 {
        u64::MAX.checked_shr(self.halvings).unwrap_or(0)
    }

    fn add(&mut self, r: ChunkRef) {
        if Self::key(&r.id) > self.limit() {
            return;
        }
        let longest = self.chunks.entry(r.id).or_insert(0);
        *longest = (*longest).max(r.len);
        while self.chunks.len() > self.budget {
            self.halvings += 1;
            let limit = self.limit();
            self.chunks.retain(|id, _| Self::key(id) <= limit);
        }
    }

    /// A sum over the sample, scaled to all chunks.
    fn scale(&self, sum: u64) -> u64 {
        let scaled = u128::from(sum) << self.halvings.min(64);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }
}

/// Raw bytes of chunks, and their shares of the blobs that hold them.
#[derive(Default)]
struct Charges {
    unique: u64,
    /// Raw bytes of chunks no stored pack holds yet (charged uncompressed).
    unindexed: u64,
    /// (pack, blob offset) → (blob stored size, blob raw size, raw bytes charged to it).
    blobs: HashMap<(u64, u64), (u32, u32, u64)>,
    /// Pack → raw bytes charged to it as a whole (its table of contents only in the bucket).
    packs: HashMap<u64, u64>,
    /// The catalog rows of the packs in `packs`.
    pack_rows: HashMap<u64, PackRow>,
}

impl Charges {
    fn add(&mut self, loc: Located, longest_ref: u32) {
        match loc {
            Located::At(loc) => {
                self.unique += u64::from(loc.len);
                // A blob's checksum is pack overhead, like headers and tables.
                let data = loc.blob_stored.saturating_sub(loc.codec.overhead() as u32);
                let blob = self.blobs.entry((loc.pack, loc.blob_offset)).or_insert((
                    data,
                    loc.blob_raw,
                    0,
                ));
                blob.2 += u64::from(loc.len);
            }
            Located::InPack(pack) if self.pack_rows.contains_key(&pack) => {
                self.unique += u64::from(longest_ref);
                *self.packs.entry(pack).or_insert(0) += u64::from(longest_ref);
            }
            Located::InPack(_) | Located::Missing => {
                self.unique += u64::from(longest_ref);
                self.unindexed += u64::from(longest_ref);
            }
        }
    }

    /// Charged per blob, so a blob whose chunks are all charged costs exactly its stored size.
    fn stored(&self) -> u64 {
        let blobs: u64 = self
            .blobs
            .values()
            .map(|&(stored, raw, charged)| {
                if raw == 0 {
                    return charged;
                }
                let share = u128::from(charged) * u128::from(stored) / u128::from(raw);
                u64::try_from(share).unwrap_or(u64::MAX)
            })
            .sum();
        let packs: u64 = self
            .packs
            .iter()
            .map(|(pack, &charged)| match self.pack_rows.get(pack) {
                Some(row) if row.raw_bytes > 0 => {
                    let share =
                        u128::from(charged) * u128::from(row.size) / u128::from(row.raw_bytes);
                    u64::try_from(share).unwrap_or(u64::MAX)
                }
                _ => charged,
            })
            .sum();
        blobs + packs + self.unindexed
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use reel_backend::{Backend, MemoryBackend};

    use super::*;
    use crate::format::decode_pack;
    use crate::{ChunkerParams, StoreConfig};

    /// Deterministic incompressible bytes (splitmix64).
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed;
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// Text-like bytes that zstd shrinks well; a running counter keeps every chunk distinct.
    fn text(seed: u64, len: usize) -> Vec<u8> {
        let words = ["tape", "reel", "chunk", "pack", "blob", "span", "record"];
        let mut out = Vec::with_capacity(len + 32);
        let mut n = 0u64;
        while out.len() < len {
            let word = words[((n + seed) % 7) as usize];
            out.extend_from_slice(format!("{word} {seed}.{n}\n").as_bytes());
            n += 1;
        }
        out.truncate(len);
        out
    }

    fn open(dir: &std::path::Path, config: StoreConfig) -> (ChunkStore, Arc<MemoryBackend>) {
        let backend = Arc::new(MemoryBackend::new());
        let store = ChunkStore::open(&dir.join("catalog"), backend.clone(), config).unwrap();
        (store, backend)
    }

    fn write(store: &ChunkStore, id: u64, records: &[&[u8]]) -> crate::Stream {
        let s = store.open_stream(StreamId(id)).unwrap();
        for r in records {
            s.append_record(r).unwrap();
        }
        s.flush().unwrap();
        s
    }

    fn len(records: &[&[u8]]) -> u64 {
        records.iter().map(|r| r.len() as u64).sum()
    }

    /// Stored raw (zstd off), so stored = unique, and every record at least the average chunk
    /// size starts and ends on a chunk boundary: a stream's distinct chunks are exactly the bytes
    /// of its distinct records, whatever the cuts inside them.
    #[test]
    fn two_streams_sharing_records() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            zstd_level: 0,
            ..StoreConfig::default()
        };
        let (store, _) = open(dir.path(), config);
        let r: Vec<Vec<u8>> = (0..10)
            .map(|i| noise(i, 10_000 + 3_000 * i as usize))
            .collect();
        let rs = |idx: &[usize]| idx.iter().map(|&i| r[i].as_slice()).collect::<Vec<_>>();
        // A holds records 0..6; B holds 3..10 and repeats record 3 at its end.
        let a = rs(&[0, 1, 2, 3, 4, 5]);
        let b = rs(&[3, 4, 5, 6, 7, 8, 9, 3]);
        let sa = write(&store, 1, &a);
        let sb = write(&store, 2, &b);

        // Before the sync the chunks are in open packs: charged uncompressed, still exact.
        let early = store.usage(&[StreamId(1)], Exclusive::Skip).unwrap();
        assert_eq!(early.unique_bytes, len(&a));
        assert_eq!(early.stored_bytes, len(&a));
        store.sync().unwrap();

        let only_a = len(&rs(&[0, 1, 2]));
        let shared = len(&rs(&[3, 4, 5]));
        let only_b = len(&rs(&[6, 7, 8, 9]));
        let ua = store.usage(&[StreamId(1)], Exclusive::Count).unwrap();
        assert_eq!(
            ua,
            StreamUsage {
                logical_bytes: only_a + shared,
                referenced_bytes: only_a + shared,
                unique_bytes: only_a + shared,
                stored_bytes: only_a + shared,
                exclusive: Some(ExclusiveUsage {
                    unique_bytes: only_a,
                    stored_bytes: only_a,
                }),
                exact: true,
            }
        );
        assert_eq!(ua.dedup_ratio(), 1.0);
        let ub = store.usage(&[StreamId(2)], Exclusive::Count).unwrap();
        assert_eq!(ub.logical_bytes, len(&b));
        assert_eq!(ub.referenced_bytes, len(&b));
        assert_eq!(ub.unique_bytes, shared + only_b);
        assert_eq!(ub.stored_bytes, shared + only_b);
        assert_eq!(
            ub.exclusive,
            Some(ExclusiveUsage {
                unique_bytes: only_b,
                stored_bytes: only_b,
            })
        );
        let want = len(&b) as f64 / (shared + only_b) as f64;
        assert!((ub.dedup_ratio() - want).abs() < 1e-12);
        // Both together (a cartridge's two partitions): shared chunks count once, and nothing
        // outside references them.
        let both = store
            .usage(&[StreamId(1), StreamId(2), StreamId(2)], Exclusive::Count)
            .unwrap();
        let all = only_a + shared + only_b;
        assert_eq!(both.logical_bytes, len(&a) + len(&b));
        assert_eq!(both.unique_bytes, all);
        assert_eq!(
            both.exclusive,
            Some(ExclusiveUsage {
                unique_bytes: all,
                stored_bytes: all,
            })
        );
        assert!(both.exclusive.is_some());
        // The store's own totals agree.
        let stats = store.stats().unwrap();
        assert_eq!(stats.unique_bytes, all);
        // A stream that does not exist is empty.
        let none = store.usage(&[StreamId(9)], Exclusive::Count).unwrap();
        assert_eq!(
            none,
            StreamUsage {
                exclusive: Some(ExclusiveUsage::default()),
                exact: true,
                ..StreamUsage::default()
            }
        );
        assert_eq!(none.dedup_ratio(), 1.0);
        // Deleting B leaves record 3..6 to A alone.
        drop(sb);
        store.delete_stream(StreamId(2)).unwrap();
        let ua = store.usage(&[StreamId(1)], Exclusive::Count).unwrap();
        assert_eq!(ua.exclusive.unwrap().unique_bytes, only_a + shared);
        drop(sa);
    }

    /// Compressed blobs: a stream that references every chunk of its pack is charged exactly
    /// the pack's blobs; one referencing the first blob's records, that blob.
    #[test]
    fn stored_bytes_are_blob_shares() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            blob_target: 64 * 1024,
            ..StoreConfig::default()
        };
        let (store, backend) = open(dir.path(), config);
        // Records of 16 KiB, four to a blob: a blob closes once it holds 64 KiB raw, which
        // happens exactly at the end of every fourth record.
        let r: Vec<Vec<u8>> = (0..8).map(|i| text(i + 1, 16 * 1024)).collect();
        let all: Vec<&[u8]> = r.iter().map(Vec::as_slice).collect();
        let s1 = write(&store, 1, &all);
        store.sync().unwrap();
        let s2 = write(&store, 2, &all[..4]);
        store.sync().unwrap();

        let packs = backend.list("packs/").unwrap();
        assert_eq!(packs.len(), 1, "stream 2 stored nothing new");
        let bytes = backend.get(&packs[0].key).unwrap();
        let (_, trailer) = decode_pack(&bytes).unwrap();
        assert_eq!(trailer.blobs.len(), 2);
        assert_eq!(trailer.blobs[0].raw, 64 * 1024);
        // Charged: each blob's data, not its checksum (pack overhead).
        let blob_stored = |b: usize| {
            let blob = trailer.blobs[b];
            u64::from(blob.stored) - blob.codec.overhead() as u64
        };

        let u1 = store.usage(&[StreamId(1)], Exclusive::Count).unwrap();
        assert_eq!(u1.unique_bytes, 128 * 1024);
        assert_eq!(u1.stored_bytes, blob_stored(0) + blob_stored(1));
        assert!(u1.compression_ratio() > 1.5, "{u1:?}");
        assert_eq!(u1.exclusive.unwrap().stored_bytes, blob_stored(1));
        let u2 = store.usage(&[StreamId(2)], Exclusive::Count).unwrap();
        assert_eq!(u2.unique_bytes, 64 * 1024);
        assert_eq!(u2.stored_bytes, blob_stored(0));
        assert_eq!(u2.exclusive, Some(ExclusiveUsage::default()));
        drop((s1, s2));
    }

    /// A record that is one chunk, truncated inside: the reference covers the kept bytes, the
    /// chunk is stored (and counted) whole.
    #[test]
    fn a_truncated_chunk_counts_whole() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            zstd_level: 0,
            // No content cut before 4096 bytes; a 4096-byte record ends its chunk.
            chunker: ChunkerParams {
                min: 4096,
                avg: 8192,
                max: 65536,
                boundary_min: 1024,
            },
            ..StoreConfig::default()
        };
        let (store, _) = open(dir.path(), config);
        let s = write(&store, 1, &[&noise(7, 4096)]);
        s.truncate(1000).unwrap();
        s.flush().unwrap();
        store.sync().unwrap();
        let u = store.usage(&[StreamId(1)], Exclusive::Skip).unwrap();
        assert_eq!(u.logical_bytes, 1000);
        assert_eq!(u.referenced_bytes, 1000);
        assert_eq!(u.unique_bytes, 4096);
        assert_eq!(u.stored_bytes, 4096);
        assert_eq!(u.exclusive, None);
    }

    /// Past the budget the sums come from a sample of chunk ids, close to the true values.
    #[test]
    fn many_chunks_are_sampled() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            zstd_level: 0,
            // Small chunks: more than the sampling budget in a few MiB.
            chunker: ChunkerParams::LEGACY,
            ..StoreConfig::default()
        };
        let (store, _) = open(dir.path(), config);
        let records: Vec<Vec<u8>> = (0..64).map(|i| noise(100 + i, 128 * 1024)).collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let s = write(&store, 1, &refs);
        store.sync().unwrap();
        let exact = store.usage(&[StreamId(1)], Exclusive::Skip).unwrap();
        assert!(exact.exact);
        assert_eq!(exact.unique_bytes, 64 * 128 * 1024);
        let chunks = store.stats().unwrap().chunks;
        assert!(chunks > 2000, "{chunks} chunks");
        let sampled = store
            .usage_sampled(&[StreamId(1)], Exclusive::Count, 256)
            .unwrap();
        assert!(!sampled.exact);
        assert_eq!(sampled.logical_bytes, exact.logical_bytes);
        assert_eq!(sampled.referenced_bytes, exact.referenced_bytes);
        let error = sampled.unique_bytes as f64 / exact.unique_bytes as f64 - 1.0;
        assert!(error.abs() < 0.25, "estimate off by {:.1} %", error * 100.0);
        assert_eq!(sampled.stored_bytes, sampled.unique_bytes);
        assert_eq!(
            sampled.exclusive.unwrap().unique_bytes,
            sampled.unique_bytes
        );
        drop(s);
    }
}

#[cfg(test)]
mod bucket_tests {
    use std::ops::Range;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use reel_backend::{Backend, Key, MemoryBackend, ObjectMeta, PutMode};

    use super::*;
    use crate::StoreConfig;

    /// A back end that says nothing is local (an object store without a cache) and counts reads.
    struct RemoteOnly {
        inner: MemoryBackend,
        reads: AtomicU64,
    }

    impl Backend for RemoteOnly {
        fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> reel_backend::Result<()> {
            self.inner.put(key, data, mode)
        }
        fn get(&self, key: &Key) -> reel_backend::Result<Vec<u8>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.get(key)
        }
        fn get_range(&self, key: &Key, range: Range<u64>) -> reel_backend::Result<Vec<u8>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.get_range(key, range)
        }
        fn list(&self, prefix: &str) -> reel_backend::Result<Vec<ObjectMeta>> {
            self.inner.list(prefix)
        }
        fn delete(&self, key: &Key) -> reel_backend::Result<()> {
            self.inner.delete(key)
        }
        fn describe(&self) -> String {
            "remote-only".into()
        }
        fn is_local(&self, _key: &Key, _range: Range<u64>) -> bool {
            false
        }
    }

    fn text(seed: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 32);
        let mut n = 0u64;
        while out.len() < len {
            out.extend_from_slice(format!("record {seed} line {n}\n").as_bytes());
            n += 1;
        }
        out.truncate(len);
        out
    }

    /// Accounting never reads the bucket: packs only there are charged their average, which
    /// for a stream that owns every pack is what the packs take.
    #[test]
    fn usage_of_packs_only_in_the_bucket_reads_nothing_and_charges_pack_averages() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(RemoteOnly {
            inner: MemoryBackend::new(),
            reads: AtomicU64::new(0),
        });
        let records: Vec<Vec<u8>> = (0..32).map(|i| text(i, 64 * 1024)).collect();
        {
            let store = ChunkStore::open(
                &dir.path().join("catalog"),
                backend.clone(),
                StoreConfig::default(),
            )
            .unwrap();
            let s = store.open_stream(StreamId(1)).unwrap();
            for r in &records {
                s.append_record(r).unwrap();
            }
            s.sync().unwrap();
        }
        // Reopened: nothing in the locality cache.
        let store = ChunkStore::open(
            &dir.path().join("catalog"),
            backend.clone(),
            StoreConfig::default(),
        )
        .unwrap();
        let rows: Vec<PackRow> = {
            let txn = store.inner.db.begin_read().unwrap();
            let t = txn.open_table(PACKS).unwrap();
            t.iter()
                .unwrap()
                .map(|r| PackRow::decode(r.unwrap().1.value()).unwrap())
                .collect()
        };
        assert!(!rows.is_empty());
        let raw: u64 = rows.iter().map(|r| r.raw_bytes).sum();
        let size: u64 = rows.iter().map(|r| r.size).sum();
        assert!(size < raw / 2, "the text compresses: {size} of {raw}");

        let before = backend.reads.load(Ordering::SeqCst);
        let u = store.usage(&[StreamId(1)], Exclusive::Count).unwrap();
        assert_eq!(
            backend.reads.load(Ordering::SeqCst),
            before,
            "usage read the bucket"
        );
        let logical = 32 * 64 * 1024;
        assert_eq!(u.logical_bytes, logical);
        assert_eq!(u.unique_bytes, raw);
        // Each pack's share rounds down once.
        assert!(
            u.stored_bytes <= size && u.stored_bytes + rows.len() as u64 >= size,
            "{u:?}"
        );
        assert_eq!(u.exclusive.unwrap().stored_bytes, u.stored_bytes);
        assert!(u.exact);
    }
}
