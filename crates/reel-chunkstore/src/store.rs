//! The store: opening and recovery, the dedup decision, pack uploads, `sync`, chunk reads.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use reel_backend::{Backend, PutMode};

use crate::catalog::{
    self, EXTENTS, FOREIGN_PACKS, ForeignPack, META, PACKS, PINS, PackRow, RECORDS, SIDECAR,
    STREAMS, pack_key,
};
use crate::catalog_file::CompactMoment;
use crate::checkpoint;
use crate::chunker::ChunkerParams;
use crate::format::{self, ChunkId, ChunkLoc, FormatError};
use crate::index::{Bloom, LocalityCache, is_hook};
use crate::journal;
use crate::packer::{PackBuffers, PackBuilder, SealedPack};
use crate::stream::{StreamId, StreamState};
use crate::{Result, StoreError};

/// Tunables. The defaults are what the benchmark and the dedup acceptance tests use.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub chunker: ChunkerParams,
    /// Raw bytes of consecutive new chunks compressed together.
    pub blob_target: usize,
    /// Pack objects are sealed at about this size (or at every `sync`).
    pub pack_target: usize,
    /// zstd level; 0 stores everything raw.
    pub zstd_level: i32,
    /// Chunks whose locations the locality cache may hold.
    pub cache_chunks: usize,
    /// redb page cache. The chunk index is keyed by hash, so every new chunk's insert lands on
    /// a random page: once the index outgrows this cache, unique-data ingest slows by a third
    /// (docs/design/efficiency.md §4).
    pub catalog_cache_bytes: usize,
    /// Rows the chunk index's recent table holds before runs of it merge into the main table
    /// (`chunk_index::merge_due`; also at least a sixteenth of the main table's rows). New
    /// chunks are indexed in the recent table once the main one holds 64 times this.
    pub index_merge_floor: u64,
    /// Sealed packs queued for upload before writers wait.
    pub upload_queue: usize,
    /// Threads storing packs: a put ends with an fsync, so several overlap the waits.
    pub upload_threads: usize,
    /// Also record every catalog change as journal objects in the back end, so the back end
    /// alone can rebuild the catalog (`journal.rs`). On for object storage, where the local
    /// catalog is a cache; off for the local back end, whose catalog is on the same disk.
    pub journal: bool,
    /// When a synchronising point is acknowledged (see [`DurableAt`]).
    pub durable_at: DurableAt,
    /// Journal ops are written as a piece of their group once they encode to this many bytes
    /// (`journal.rs`), so a synchronising point uploads only what came after the last piece.
    pub journal_piece_bytes: usize,
    /// Decoded blobs kept for reads, per open stream (one to [`READ_CACHE_STREAMS_MAX`]): a
    /// restore's repeats fall within its backup's dedup window, and a blob evicted before they
    /// come round is read, decompressed and hash-checked again. 64 MiB holds the unique eighth
    /// of a 512 MiB window at 8:1.
    pub read_cache_per_stream: usize,
    /// With the journal on, a checkpoint of the whole catalog is written in the background
    /// (and the journal objects it covers deleted) once the journal objects since the last
    /// checkpoint weigh at least this much, or as much as that checkpoint if it was larger:
    /// their bytes plus [`checkpoint::JOURNAL_OBJECT_WEIGHT`] each (`checkpoint.rs`).
    /// `u64::MAX` turns automatic checkpoints off.
    pub checkpoint_min_bytes: u64,
    /// A checkpoint is cut into objects of about this many bytes of catalog rows.
    pub checkpoint_part_bytes: usize,
    /// The catalog file is compacted once no write transaction has begun for this long (and
    /// none is open, nor any read) if a tenth of it is pages no table uses, and when the store
    /// closes if a fiftieth is (`efficiency.md` §41, §43). `None`: never.
    pub catalog_compact_idle: Option<std::time::Duration>,
}

/// The open streams [`StoreConfig::read_cache_per_stream`] is counted for, at most.
pub const READ_CACHE_STREAMS_MAX: usize = 16;

/// Where data must be before a synchronising point (`sync`) returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DurableAt {
    /// Stored by the back end's `put` (for a write-back cache: fsynced in the cache).
    #[default]
    Local,
    /// Also in the back end's final home: `sync` waits for `Backend::flush` (the bucket).
    Bucket,
}

/// Progress of replaying the catalog journal on open (recovery from the back end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryProgress {
    /// Checkpoint parts and journal objects applied so far, of `total`.
    pub done: u64,
    pub total: u64,
    /// Catalog changes applied so far.
    pub ops: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            chunker: ChunkerParams::DEFAULT,
            read_cache_per_stream: 64 << 20,
            blob_target: 256 * 1024,
            pack_target: 32 << 20,
            zstd_level: 1,
            cache_chunks: 1 << 20,
            catalog_cache_bytes: 512 << 20,
            index_merge_floor: crate::chunk_index::MERGE_FLOOR,
            upload_queue: 4,
            upload_threads: 3,
            journal: false,
            durable_at: DurableAt::Local,
            journal_piece_bytes: journal::PIECE_BYTES,
            checkpoint_min_bytes: 64 << 20,
            checkpoint_part_bytes: checkpoint::PART_RAW_BYTES,
            catalog_compact_idle: Some(std::time::Duration::from_secs(30)),
        }
    }
}

/// Space accounting, from the catalog.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes in all streams (what callers wrote and did not truncate).
    pub logical_bytes: u64,
    /// Raw bytes of the distinct chunks stored.
    pub unique_bytes: u64,
    /// Bytes of pack objects (what the back end holds).
    pub stored_bytes: u64,
    pub chunks: u64,
    pub packs: u64,
    pub streams: u64,
    /// RAM held by the dedup index's filter, which grows with unique data.
    pub filter_memory_bytes: u64,
    /// RAM held by the locality cache, bounded by `StoreConfig::cache_chunks`.
    pub cache_memory_bytes: u64,
    /// Packs of other stores that adopted streams read in place, and their bytes (not in
    /// `stored_bytes`: this store neither holds nor frees them).
    pub foreign_packs: u64,
    pub foreign_bytes: u64,
}

impl StoreStats {
    pub fn dedup_ratio(&self) -> f64 {
        ratio(self.logical_bytes, self.unique_bytes)
    }
    pub fn compression_ratio(&self) -> f64 {
        ratio(self.unique_bytes, self.stored_bytes)
    }
    pub fn reduction_ratio(&self) -> f64 {
        ratio(self.logical_bytes, self.stored_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// Decoded blobs, by (pack, offset), within a byte budget, evicted by CLOCK (second chance):
/// a blob read again since the hand last passed it goes round once more, so the blobs a
/// restore keeps coming back to (its dedup repeats) outlive those it read once. Each remembers
/// which of its chunks were already hash-checked, so repeats are not re-hashed.
#[derive(Default)]
struct BlobCache {
    /// Each blob with its "read since the hand passed" bit.
    map: HashMap<(u64, u64), (Arc<Blob>, bool)>,
    /// The clock: keys in the order the hand visits them.
    order: VecDeque<(u64, u64)>,
    bytes: usize,
}

pub(crate) struct Blob {
    /// Shared, so a read can hand out slices of it without copying (`Stream::read_shared`).
    pub(crate) data: bytes::Bytes,
    /// The blob's checksum matched when it was read (pack format 2): every chunk in it is
    /// good, none needs its hash checked. Otherwise (a format-1 blob, or one whose checksum
    /// failed) each chunk is checked by its BLAKE3 before it is served, once: `verified`.
    whole_checked: bool,
    verified: Mutex<HashSet<u32>>,
}

impl BlobCache {
    fn get(&mut self, key: &(u64, u64)) -> Option<Arc<Blob>> {
        let (blob, read_again) = self.map.get_mut(key)?;
        *read_again = true;
        Some(blob.clone())
    }

    fn insert(&mut self, key: (u64, u64), blob: Arc<Blob>, budget: usize) {
        self.bytes += blob.data.len();
        match self.map.insert(key, (blob, false)) {
            None => self.order.push_back(key),
            Some((old, _)) => self.bytes -= old.data.len(),
        }
        // Every blob is passed at most twice: its bit is cleared on the first pass.
        while self.bytes > budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            match self.map.get_mut(&oldest) {
                Some((_, read_again)) if *read_again && oldest != key => {
                    *read_again = false;
                    self.order.push_back(oldest);
                }
                Some(_) => {
                    if let Some((b, _)) = self.map.remove(&oldest) {
                        self.bytes -= b.data.len();
                    }
                }
                None => {}
            }
        }
    }

    fn clear(&mut self) {
        *self = BlobCache::default();
    }
}

#[derive(Default)]
struct Uploads {
    /// Packs submitted and not yet stored *and* indexed (or failed).
    in_flight: usize,
    /// Packs whose put failed: stored again by the next `seal_and_store_all`.
    failed: Vec<SealedPack>,
    /// Packs stored whose indexing failed: indexed again by the next `seal_and_store_all`.
    unindexed: Vec<StoredPack>,
    error: Option<String>,
    error_is_space: bool,
}

impl Uploads {
    fn note_error(&mut self, e: &StoreError) {
        self.error_is_space = matches!(e, StoreError::NoSpace(_));
        self.error = Some(e.to_string());
    }
}

/// Counts a caller of `seal_and_store_all` in `Inner::index_waiters` while it lives.
struct IndexWaiter<'a>(&'a AtomicUsize);

impl<'a> IndexWaiter<'a> {
    fn new(waiters: &'a AtomicUsize) -> IndexWaiter<'a> {
        waiters.fetch_add(1, Ordering::SeqCst);
        IndexWaiter(waiters)
    }
}

impl Drop for IndexWaiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A pack in the back end, its bytes given back, waiting to be indexed.
struct StoredPack {
    pack: SealedPack,
    /// The stored object's size.
    size: u64,
}

/// Packs stored in the back end whose names wait to be written and indexed, in one catalog
/// transaction for several packs (`Inner::index_queued`). Their bytes are already given back;
/// their chunks stay pending until they are indexed.
#[derive(Default)]
struct IndexQueue {
    packs: Vec<StoredPack>,
    chunks: usize,
}

/// Queued chunks at which the queue is indexed without waiting for a sync: at most 128 Ki
/// (9 full packs of incompressible data, 3 of compressible unique data, about 3 GB written at
/// 29:1), at least 32 Ki, and in between a 32nd of the rows the index holds.
///
/// A pack's thousands of random index keys touch most of the index's leaves, and redb rebuilds
/// each leaf a transaction touches: one transaction for several packs rebuilds each leaf once
/// instead of once per pack (`efficiency.md` §30), which pays once the index has many leaves.
/// But a batch is a burst of CPU (~0.4 CPU-s for 128 Ki chunks): with 2 cores busy, a one-drive
/// write dipped 15–43 % in the second of a burst (§47; 512 Ki chunks, 26–36 %, §39). An index
/// of fewer than 4 Mi rows has few enough leaves that a smaller batch rebuilds them at little
/// cost, and its bursts are a quarter as large; past that the leaves are many and the batch is
/// as it was (32 Ki at 4–7 Mi rows cost 10–30 % more store CPU per GB on unique data, §47).
fn index_batch_chunks(index_rows: u64) -> usize {
    const SMALLEST: u64 = 32 << 10;
    const LARGEST: u64 = 128 << 10;
    (index_rows / 32).clamp(SMALLEST, LARGEST) as usize
}

pub(crate) struct Inner {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) db: crate::catalog_file::CatalogDb,
    pub(crate) config: StoreConfig,
    filter: RwLock<Bloom>,
    pending: Mutex<crate::index::IdSet>,
    pub(crate) cache: Mutex<LocalityCache>,
    blob_cache: Mutex<BlobCache>,
    /// Packs' names as span placing searches them (`spans::Placer`).
    pub(crate) placer_names: crate::spans::NameCache,
    /// Span bodies flushes stored as written since the last durable commit because a chunk's
    /// pack was not named yet (`spans::WriteSpans::place_pending`).
    pub(crate) unplaced_spans: Mutex<Vec<u64>>,
    /// Tests only: new packs are written as pack format 1 (blobs without checksums).
    #[cfg(test)]
    write_format_1: AtomicBool,
    next_pack: AtomicU64,
    uploads: Mutex<Uploads>,
    uploads_done: Condvar,
    index_queue: Mutex<IndexQueue>,
    /// Held while a batch of queued packs is indexed (one indexer at a time).
    indexer: Mutex<()>,
    /// Callers waiting for every pack to be stored (`seal_and_store_all`): while any waits,
    /// an uploader indexes its pack at once instead of leaving it queued.
    index_waiters: AtomicUsize,
    /// Catalog transactions that indexed packs (tests compare it with the packs stored).
    pub(crate) index_commits: AtomicU64,
    /// Rows in the chunk index as of the opening or the last batch indexed: sizes the next
    /// batch (`index_batch_chunks`). A hint: reclaim and imports change the index without it.
    index_rows: AtomicU64,
    /// Where the next merge of recent index rows into the main table starts
    /// (`chunk_index::merge_step`); only the indexer moves it.
    merge_cursor: Mutex<crate::chunk_index::Key>,
    upload_tx: Mutex<Option<crossbeam_channel::Sender<SealedPack>>>,
    uploaders: Mutex<Vec<JoinHandle<()>>>,
    builders: Mutex<Vec<Weak<Mutex<PackBuilder>>>>,
    pub(crate) streams: Mutex<HashMap<StreamId, Weak<Mutex<StreamState>>>>,
    /// Held shared by stream flushes, exclusively by `sync` while it makes packs durable.
    pub(crate) commit_lock: RwLock<()>,
    /// Span bodies the durable commits placed, a flush having stored them as written: each
    /// rewrite leaves the pages it replaced free in the catalog file (`efficiency.md` §29).
    pub(crate) bodies_placed_late: AtomicU64,
    /// Held shared by anything that references chunks, exclusively by reclaim.
    pub(crate) ingest_lock: RwLock<()>,
    stopped: Mutex<Option<String>>,
    /// Set to make the catalog file refuse all writes (see `catalog_file`).
    fenced: Arc<AtomicBool>,
    pub(crate) hash_pool: crate::hasher::HashPool,
    /// Compresses the stream builders' blobs beside the streams' threads.
    compressors: Arc<crate::packer::BlobCompressors>,
    /// Buffers of stored packs, for the streams' next packs.
    pack_buffers: Arc<PackBuffers>,
    /// Non-durable catalog commits made, and how many of them the last durable commit covered.
    /// Catalog changes since the last journal object (only with `config.journal`).
    journal: Mutex<JournalState>,
    /// Which stream wrote each pack stored by this process (see `ChunkStore::pack_owner`).
    pack_owners: Mutex<HashMap<u64, u64>>,
    /// The FOREIGN_PACKS table in memory: consulted on every blob read.
    pub(crate) foreign: RwLock<HashMap<u64, ForeignPack>>,
    /// The PINS table's stream ids in memory: writes to these streams are refused.
    pub(crate) pinned: RwLock<HashSet<u64>>,
    /// Opens other stores' back ends for foreign packs (`ChunkStore::set_foreign_stores`).
    pub(crate) foreign_stores: RwLock<Option<Arc<dyn crate::ForeignStores>>>,
    foreign_backends: Mutex<HashMap<String, Arc<dyn Backend>>>,
    /// Hands the checkpoint thread the snapshot of a durable commit that found one due.
    checkpoint_tx: Mutex<Option<crossbeam_channel::Sender<CatalogSnapshot>>>,
    /// The checkpoint thread holds a snapshot: no other is taken meanwhile.
    checkpoint_busy: AtomicBool,
    checkpointer: Mutex<Option<JoinHandle<()>>>,
    /// The thread compacting the catalog when idle (`StoreConfig::catalog_compact_idle`).
    compactor: Mutex<Option<JoinHandle<()>>>,
    /// Compactions of the catalog file so far.
    pub(crate) catalog_compactions: AtomicU64,
    /// One checkpoint at a time (the thread's and `ChunkStore::checkpoint`'s).
    checkpoint_lock: Mutex<()>,
    /// The store is closing: a checkpoint being written gives up between rows.
    closing: AtomicBool,
}

/// The journal's writer side: ops not yet written, and the object being written.
#[derive(Default)]
struct JournalState {
    /// Ops not yet in a journal object, encoded (`journal::append_op`), and how many.
    raw: Vec<u8>,
    count: u32,
    /// The last sequence number in the back end (or staged there: see `write_journal`).
    seq: u64,
    /// A piece of the current group is in the back end: the next piece continues it.
    group_open: bool,
    /// An object whose put failed, and whether it ends its group: written again, byte for
    /// byte, before anything newer.
    staged: Option<(u64, Vec<u8>, bool)>,
    /// Journal objects in the back end after the newest checkpoint, and their bytes.
    since_checkpoint_objects: u64,
    since_checkpoint_bytes: u64,
    /// The newest checkpoint in the back end (0: none), and its parts' bytes.
    checkpoint_seq: u64,
    checkpoint_bytes: u64,
}

impl JournalState {
    /// Whether the journal since the last checkpoint weighs enough for a new one.
    fn checkpoint_due(&self, min_bytes: u64) -> bool {
        let weight = self.since_checkpoint_bytes.saturating_add(
            self.since_checkpoint_objects
                .saturating_mul(checkpoint::JOURNAL_OBJECT_WEIGHT),
        );
        self.seq > self.checkpoint_seq && weight >= min_bytes.max(self.checkpoint_bytes)
    }
}

/// The journal's state, for metrics (`ChunkStore::journal_status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStatus {
    /// The last journal object's sequence number.
    pub seq: u64,
    /// The newest checkpoint's sequence (0: none) and size.
    pub checkpoint_seq: u64,
    pub checkpoint_bytes: u64,
    /// Journal objects after it (what a recovery replays on top of it), and their bytes.
    pub objects_since_checkpoint: u64,
    pub bytes_since_checkpoint: u64,
}

/// What [`ChunkStore::checkpoint`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The journal sequence it stands for.
    pub seq: u64,
    pub parts: u32,
    pub bytes: u64,
    /// Catalog rows in it.
    pub ops: u64,
    /// Journal objects and older checkpoint objects deleted after it.
    pub deleted_objects: u64,
}

/// A handle to an open store. Cheap to clone; all clones share one store.
///
/// Dropping the last handle (and every [`crate::Stream`]) closes the store with a final `sync`;
/// if that fails, the catalog is left at its last durable commit, as after a power cut.
#[derive(Clone)]
pub struct ChunkStore {
    pub(crate) inner: Arc<Inner>,
    _shutdown: Arc<ShutdownGuard>,
}

/// Stops the upload thread when the last handle goes, so the thread never outlives the store
/// (or holds its catalog open) after its owner dropped it.
struct ShutdownGuard {
    inner: Arc<Inner>,
}

impl Drop for ShutdownGuard {
    fn drop(&mut self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.checkpoint_tx.lock().take();
        if let Some(h) = self.inner.checkpointer.lock().take() {
            let _ = h.join();
        }
        if let Some(h) = self.inner.compactor.lock().take() {
            h.thread().unpark();
            let _ = h.join();
        }
        self.inner.upload_tx.lock().take();
        let uploaders = std::mem::take(&mut *self.inner.uploaders.lock());
        for h in uploaders {
            let _ = h.join();
        }
    }
}

impl ChunkStore {
    /// Opens (or creates) a store whose catalog lives in `catalog_dir` and whose packs live in
    /// `backend`. Recovery: pack objects that no committed catalog entry names (an interrupted
    /// commit) are deleted. Packs the catalog names but the back end lacks are reported by
    /// [`ChunkStore::scrub`], and reading their chunks fails with `StoreError::Corrupt`.
    pub fn open(
        catalog_dir: &Path,
        backend: Arc<dyn Backend>,
        config: StoreConfig,
    ) -> Result<ChunkStore> {
        Self::open_with_progress(catalog_dir, backend, config, &mut |_| {})
    }

    /// [`ChunkStore::open`], reporting the replay of catalog journals newer than the local
    /// catalog (with `StoreConfig::journal`): on an empty catalog directory that is the
    /// recovery of the whole catalog from the back end.
    pub fn open_with_progress(
        catalog_dir: &Path,
        backend: Arc<dyn Backend>,
        mut config: StoreConfig,
        progress: &mut dyn FnMut(RecoveryProgress),
    ) -> Result<ChunkStore> {
        config.chunker.validate().map_err(StoreError::Invalid)?;
        std::fs::create_dir_all(catalog_dir)
            .map_err(|e| StoreError::Catalog(format!("creating {}: {e}", catalog_dir.display())))?;
        let path = catalog_dir.join("catalog.redb");
        if !path.exists() {
            create_catalog(catalog_dir, &path)?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::Catalog(format!("opening {}: {e}", path.display())))?;
        let fenced = Arc::new(AtomicBool::new(false));
        let backend_file = redb::backends::FileBackend::new(file)?;
        // redb can panic while opening a damaged file (an `unreachable!` on a damaged
        // allocator-state key, found by tests/damaged_catalog.rs), before the integrity check
        // below can run: a panic here is a refusal, never a crash of the server.
        let fenced_file = crate::catalog_file::FencedFile::new(backend_file, fenced.clone());
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Database::builder()
                .set_cache_size(config.catalog_cache_bytes)
                .create_with_backend(fenced_file)
        }));
        let mut db = match opened {
            Ok(db) => db?,
            Err(_) => {
                return Err(StoreError::Corrupt(format!(
                    "the catalog {} is damaged beyond opening",
                    path.display()
                )));
            }
        };
        // Every page's checksum is verified before anything is served: redb can panic on a
        // damaged page it meets later (an index out of bounds), and a damaged catalog must be
        // refused, never half-read. A catalog redb had to repair is refused too: what it
        // dropped cannot be trusted to match the packs.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.check_integrity())) {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                return Err(StoreError::Corrupt(format!(
                    "the catalog {} failed its integrity check",
                    path.display()
                )));
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                return Err(StoreError::Corrupt(format!(
                    "the catalog {} is damaged beyond reading",
                    path.display()
                )));
            }
        }
        init_catalog(&db)?;
        // Before the orphan scan below: on a fresh directory every pack is an orphan until the
        // journal that names it is replayed.
        let journal_start = if config.journal {
            Some(replay_journal_listing_again(&db, &*backend, progress)?)
        } else {
            None
        };
        let journal_seq = journal_start.as_ref().map_or(0, |j| j.seq);
        // A format-4 catalog, or rows replayed from journal objects before version 8: the
        // chunk rows become the derived index before anything reads it.
        {
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            let converted = crate::chunk_index::convert_legacy(&txn)?;
            if converted > 0 {
                txn.commit()?;
            } else {
                txn.abort()?;
            }
        }
        // A replay may index into the recent table: one that outgrew its share is merged now,
        // before it makes every new chunk's insert as dear as the main table's.
        crate::chunk_index::merge_while_due(&db, config.index_merge_floor)?;

        // Bodies replayed, imported or upgraded from an older format are stored placed, and
        // retired names no placed body reads are dropped (a replay retires every pack it drops).
        {
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            let report = crate::spans::place_new_bodies(&txn, &Default::default())?;
            let dropped = {
                let spans = crate::spans::write(&txn)?;
                let mut retired = txn.open_table(crate::pack_names::RETIRED_NAMES)?;
                crate::spans::drop_unread_retired_names(&spans, &mut retired)?
            };
            if report.offered > 0 || dropped > 0 {
                txn.commit()?;
            } else {
                txn.abort()?;
            }
        }

        let mut catalog_packs = HashSet::new();
        let mut foreign = HashMap::new();
        let mut pinned = HashSet::new();
        let chunk_count;
        let pack_id_floor;
        {
            let txn = db.begin_read()?;
            pack_id_floor = txn
                .open_table(META)?
                .get(catalog::META_PACK_ID_FLOOR)?
                .map_or(0, |v| v.value());
            for row in txn.open_table(PINS)?.iter()? {
                pinned.insert(row?.0.value());
            }
            for row in txn.open_table(FOREIGN_PACKS)?.iter()? {
                let (k, v) = row?;
                foreign.insert(k.value(), ForeignPack::decode(v.value())?);
            }
            let packs = txn.open_table(PACKS)?;
            for row in packs.iter()? {
                catalog_packs.insert(row?.0.value());
            }
            chunk_count = crate::chunk_index::len(&txn)?;
            // The chunker parameters are the store's, fixed at its creation (a different cut
            // would not dedup against what is stored); `config.chunker` only chooses them for a
            // new store. A store with data but none recorded predates recording them.
            let fresh = chunk_count == 0 && txn.open_table(STREAMS)?.is_empty()?;
            config.chunker = match catalog::get_chunker(&txn.open_table(META)?)? {
                Some(recorded) => recorded,
                None if fresh => config.chunker,
                None => ChunkerParams::LEGACY,
            };
        }
        let listed = backend.list("packs/").map_err(StoreError::from_backend)?;
        let mut max_id = catalog_packs.iter().copied().max().unwrap_or(0);
        for obj in listed {
            let Some(id) = catalog::parse_pack_key(obj.key.as_str()) else {
                continue;
            };
            max_id = max_id.max(id);
            if !catalog_packs.contains(&id) {
                // Written, but the catalog commit that would name it never happened.
                backend.delete(&obj.key).map_err(StoreError::from_backend)?;
            }
        }

        let first_pack_id = pack_id_floor.max(max_id + 1);
        let next_floor = first_pack_id
            .checked_add(catalog::PACK_IDS_PER_OPEN)
            .ok_or_else(|| {
                StoreError::Corrupt(format!("pack ids are exhausted at {first_pack_id}"))
            })?;

        let filter = Bloom::with_capacity(chunk_count / u64::from(crate::index::HOOK_ONE_IN) * 2);
        insert_named_hooks(&db, &filter)?;

        let (tx, rx) = crossbeam_channel::bounded::<SealedPack>(config.upload_queue.max(1));
        let hash_pool = crate::hasher::HashPool::new(
            config.chunker,
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
        )
        .map_err(|e| StoreError::Catalog(format!("starting hash threads: {e}")))?;
        let compressors = crate::packer::BlobCompressors::new(
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
        )
        .map_err(|e| StoreError::Catalog(format!("starting compressing threads: {e}")))?;
        let inner = Arc::new(Inner {
            backend,
            db: crate::catalog_file::CatalogDb::new(db, path.clone()),
            hash_pool,
            compressors: Arc::new(compressors),
            pack_buffers: Arc::default(),
            cache: Mutex::new(LocalityCache::new(config.cache_chunks)),
            placer_names: Default::default(),
            unplaced_spans: Mutex::new(Vec::new()),
            config,
            filter: RwLock::new(filter),
            pending: Mutex::new(crate::index::IdSet::default()),
            blob_cache: Mutex::new(BlobCache::default()),
            #[cfg(test)]
            write_format_1: AtomicBool::new(false),
            next_pack: AtomicU64::new(first_pack_id),
            uploads: Mutex::new(Uploads::default()),
            uploads_done: Condvar::new(),
            index_queue: Mutex::new(IndexQueue::default()),
            indexer: Mutex::new(()),
            index_waiters: AtomicUsize::new(0),
            index_commits: AtomicU64::new(0),
            index_rows: AtomicU64::new(chunk_count),
            merge_cursor: Mutex::new([0; crate::chunk_index::KEY_BYTES]),
            upload_tx: Mutex::new(Some(tx)),
            uploaders: Mutex::new(Vec::new()),
            builders: Mutex::new(Vec::new()),
            streams: Mutex::new(HashMap::new()),
            commit_lock: RwLock::new(()),
            bodies_placed_late: AtomicU64::new(0),
            ingest_lock: RwLock::new(()),
            stopped: Mutex::new(None),
            fenced,
            pack_owners: Mutex::new(HashMap::new()),
            foreign: RwLock::new(foreign),
            pinned: RwLock::new(pinned),
            foreign_stores: RwLock::new(None),
            foreign_backends: Mutex::new(HashMap::new()),
            journal: Mutex::new(JournalState {
                seq: journal_seq,
                since_checkpoint_objects: journal_start
                    .as_ref()
                    .map_or(0, |j| j.since_checkpoint_objects),
                since_checkpoint_bytes: journal_start
                    .as_ref()
                    .map_or(0, |j| j.since_checkpoint_bytes),
                checkpoint_seq: journal_start.as_ref().map_or(0, |j| j.checkpoint_seq),
                checkpoint_bytes: journal_start.as_ref().map_or(0, |j| j.checkpoint_bytes),
                ..JournalState::default()
            }),
            checkpoint_tx: Mutex::new(None),
            checkpointer: Mutex::new(None),
            compactor: Mutex::new(None),
            catalog_compactions: AtomicU64::new(0),
            checkpoint_lock: Mutex::new(()),
            checkpoint_busy: AtomicBool::new(false),
            closing: AtomicBool::new(false),
        });
        if inner.config.journal && journal_seq == 0 {
            // A catalog that has rows but no journal yet (a store that starts journaling):
            // its first journal object is the whole catalog, so the back end is complete.
            let base = journal::dump(&inner.db.database(), journal::Form::AsStored)?;
            if !base.is_empty() {
                let mut j = inner.journal.lock();
                for op in &base {
                    journal::append_op(&mut j.raw, op);
                }
                j.count = base.len() as u32;
                drop(j);
                inner.commit_durably()?;
            }
        }
        // Before any pack of this opening is stored (the uploaders are not running yet).
        inner.reserve_pack_ids(next_floor)?;
        for i in 0..inner.config.upload_threads.max(1) {
            let weak = Arc::downgrade(&inner);
            let rx = rx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("reel-upload-{i}"))
                .spawn(move || {
                    for pack in rx {
                        let Some(inner) = weak.upgrade() else { return };
                        inner.upload(pack, PutMode::Create);
                    }
                })
                .map_err(|e| StoreError::Catalog(format!("starting uploader: {e}")))?;
            inner.uploaders.lock().push(handle);
        }
        if let Some(idle) = inner.config.catalog_compact_idle {
            let weak = Arc::downgrade(&inner);
            let handle = std::thread::Builder::new()
                .name("reel-compact".into())
                .spawn(move || {
                    let tick = (idle / 2).clamp(
                        std::time::Duration::from_millis(10),
                        std::time::Duration::from_secs(5),
                    );
                    loop {
                        std::thread::park_timeout(tick);
                        let Some(inner) = weak.upgrade() else { return };
                        if inner.closing.load(Ordering::Acquire) {
                            return;
                        }
                        match inner.compact_catalog(CompactMoment::Idle(idle)) {
                            Ok(Ok(c)) => tracing::info!(
                                "catalog compacted after {} s idle: {:.1} -> {:.1} MB in {} ms",
                                idle.as_secs(),
                                c.before as f64 / 1e6,
                                c.after as f64 / 1e6,
                                c.took.as_millis()
                            ),
                            Ok(Err(_)) => {}
                            Err(e) => tracing::warn!("{e}"),
                        }
                    }
                })
                .map_err(|e| StoreError::Catalog(format!("starting the compactor: {e}")))?;
            *inner.compactor.lock() = Some(handle);
        }
        if inner.config.journal {
            let (tx, rx) = crossbeam_channel::bounded::<CatalogSnapshot>(1);
            let weak = Arc::downgrade(&inner);
            let handle = std::thread::Builder::new()
                .name("reel-checkpoint".into())
                .spawn(move || {
                    for view in rx {
                        let Some(inner) = weak.upgrade() else { return };
                        let result = {
                            let _one = inner.checkpoint_lock.lock();
                            inner.write_checkpoint_of(view)
                        };
                        inner.checkpoint_busy.store(false, Ordering::Release);
                        // A failed checkpoint changes nothing acknowledged: the journal it
                        // would have replaced stays, and a later durable commit tries again.
                        if let Err(e) = result
                            && !inner.closing.load(Ordering::Acquire)
                        {
                            tracing::warn!("catalog checkpoint failed: {e}");
                        }
                    }
                })
                .map_err(|e| StoreError::Catalog(format!("starting checkpointer: {e}")))?;
            *inner.checkpoint_tx.lock() = Some(tx);
            *inner.checkpointer.lock() = Some(handle);
        }
        inner.db.mark_looked();
        let guard = Arc::new(ShutdownGuard {
            inner: inner.clone(),
        });
        Ok(ChunkStore {
            inner,
            _shutdown: guard,
        })
    }

    /// Makes everything every stream has flushed durable: open packs are sealed and stored,
    /// then the catalog is committed to disk. A synchronising point (SSC: a filemark without
    /// IMMED, a rewind) calls this after flushing its stream.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    /// The chunker parameters this store cuts with: those recorded at its creation
    /// (`ChunkerParams::LEGACY` for a store made before they were recorded).
    pub fn chunker(&self) -> ChunkerParams {
        self.inner.config.chunker
    }

    pub fn stats(&self) -> Result<StoreStats> {
        let inner = &self.inner;
        let txn = inner.db.begin_read()?;
        let mut stats = StoreStats::default();
        for row in txn.open_table(STREAMS)?.iter()? {
            stats.logical_bytes += row?.1.value();
            stats.streams += 1;
        }
        let foreign = inner.foreign.read();
        for row in txn.open_table(PACKS)?.iter()? {
            let (k, v) = row?;
            let r = PackRow::decode(v.value())?;
            if foreign.contains_key(&k.value()) {
                // Another store's bytes: not ours to count (or to free).
                stats.foreign_packs += 1;
                stats.foreign_bytes += r.size;
                continue;
            }
            stats.stored_bytes += r.size;
            stats.unique_bytes += r.raw_bytes;
            stats.packs += 1;
        }
        stats.chunks = crate::chunk_index::len(&txn)?;
        stats.filter_memory_bytes = inner.filter.read().memory_bytes();
        stats.cache_memory_bytes = inner.cache.lock().memory_bytes();
        Ok(stats)
    }

    /// Streams that exist in the catalog, with their committed lengths.
    pub fn streams(&self) -> Result<Vec<(StreamId, u64)>> {
        let txn = self.inner.db.begin_read()?;
        let table = txn.open_table(STREAMS)?;
        let mut out = Vec::new();
        for row in table.iter()? {
            let (k, v) = row?;
            out.push((StreamId(k.value()), v.value()));
        }
        Ok(out)
    }

    /// Deletes a stream and its sidecar. Its chunks become garbage for [`ChunkStore::reclaim`].
    pub fn delete_stream(&self, id: StreamId) -> Result<()> {
        let inner = &self.inner;
        if inner
            .db
            .begin_read()?
            .open_table(PINS)?
            .get(id.0)?
            .is_some()
        {
            return Err(StoreError::Invalid(format!(
                "stream {} is pinned: another store reads it in place (unpin it first)",
                id.0
            )));
        }
        // The map's lock is let go before the stream's is taken: a reader holds its stream's
        // lock and then takes the map's (`read_cache_budget`, `Stream::drop`).
        let open = inner.streams.lock().get(&id).and_then(Weak::upgrade);
        if let Some(open) = open {
            open.lock().reset_after_delete();
        }
        let _commit = inner.commit_lock.read();
        let mut txn = inner.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        {
            txn.open_table(STREAMS)?.remove(id.0)?;
            txn.open_table(EXTENTS)?
                .retain_in((id.0, 0)..=(id.0, u64::MAX), |_, _| false)?;
            txn.open_table(SIDECAR)?
                .retain_in((id.0, 0)..=(id.0, u64::MAX), |_, _| false)?;
        }
        inner.journal([
            journal::Op::DelStream(id.0),
            journal::Op::DelExtents {
                stream: id.0,
                first: 0,
                last: u64::MAX,
            },
            journal::Op::DelSidecars {
                stream: id.0,
                first: 0,
                last: u64::MAX,
            },
        ]);
        txn.commit()?;
        Ok(())
    }

    /// Stores a small caller record (e.g. a cartridge's identity), committed with the next sync.
    pub fn put_record(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let inner = &self.inner;
        inner.check_stopped()?;
        let _commit = inner.commit_lock.read();
        let mut txn = inner.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        {
            let mut t = txn.open_table(RECORDS)?;
            match value {
                Some(v) => {
                    t.insert(key, v)?;
                }
                None => {
                    t.remove(key)?;
                }
            }
        }
        inner.journal([record_op(key, value)]);
        txn.commit()?;
        Ok(())
    }

    /// Stores or deletes several caller records in one catalog transaction, committed with the
    /// next sync (or [`ChunkStore::commit_records`]).
    pub fn put_records(&self, records: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        inner.check_stopped()?;
        let _commit = inner.commit_lock.read();
        let mut txn = inner.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        {
            let mut t = txn.open_table(RECORDS)?;
            for (key, value) in records {
                match value {
                    Some(v) => {
                        t.insert(key.as_slice(), v.as_slice())?;
                    }
                    None => {
                        t.remove(key.as_slice())?;
                    }
                }
            }
        }
        inner.journal(records.iter().map(|(k, v)| record_op(k, v.as_deref())));
        txn.commit()?;
        Ok(())
    }

    /// Makes every catalog change so far durable *without sealing any open pack*, when that is
    /// safe; returns false (and commits nothing) when it is not, or when a flush, sync or
    /// reclaim holds the catalog right now. For callers whose records may wait for the next
    /// sync but should not force one (the server's audit log and sessions).
    ///
    /// Safe means: no chunk is pending (written but not yet in a stored, indexed pack). Every
    /// row a flush committed names chunks that are indexed or pending (`reserve`), and an
    /// indexed chunk's pack was durably stored before its index commit (write path step 3).
    /// With nothing pending, and the commit lock held exclusively so no flush can name a new
    /// chunk meanwhile, the durable commit references only durable packs: the invariant of
    /// `sync` (docs/design/chunk-store.md, "Committing records without a sync") holds.
    pub fn commit_records(&self) -> Result<bool> {
        let inner = &self.inner;
        inner.check_stopped()?;
        // Reclaim holds the ingest lock exclusively while it moves chunks between packs.
        let Some(_ingest) = inner.ingest_lock.try_read() else {
            return Ok(false);
        };
        let Some(_commit) = inner.commit_lock.try_write() else {
            return Ok(false);
        };
        if !inner.pending.lock().is_empty() {
            return Ok(false);
        }
        inner.commit_durably()?;
        Ok(true)
    }

    /// Up to `limit` records whose keys start with `prefix` and sort before `before` (all of
    /// them when `None`), newest key first: a page of a log, without reading the rest.
    pub fn records_rev(
        &self,
        prefix: &[u8],
        before: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let txn = self.inner.db.begin_read()?;
        let t = txn.open_table(RECORDS)?;
        let mut out = Vec::new();
        // The first key after every key with this prefix: the prefix with its last byte below
        // 0xFF incremented (none if it is all 0xFF).
        let mut end = prefix.to_vec();
        while end.last() == Some(&0xFF) {
            end.pop();
        }
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let upper: &[u8] = match before {
            Some(b) if end.is_empty() || b < end.as_slice() => b,
            _ => &end,
        };
        let rows = if upper.is_empty() {
            t.range(prefix..)?
        } else {
            t.range(prefix..upper)?
        };
        for row in rows.rev() {
            if out.len() >= limit {
                break;
            }
            let (k, v) = row?;
            out.push((k.value().to_vec(), v.value().to_vec()));
        }
        Ok(out)
    }

    pub fn record(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.inner.db.begin_read()?;
        let t = txn.open_table(RECORDS)?;
        Ok(t.get(key)?.map(|v| v.value().to_vec()))
    }

    /// Records whose keys start with `prefix`, in key order.
    pub fn records(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let txn = self.inner.db.begin_read()?;
        let t = txn.open_table(RECORDS)?;
        let mut out = Vec::new();
        for row in t.range(prefix..)? {
            let (k, v) = row?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push((k.value().to_vec(), v.value().to_vec()));
        }
        Ok(out)
    }

    /// Stops the store as a crash would: nothing more is written, and when the last handle and
    /// stream are dropped the catalog stays at its last durable commit (everything since the last
    /// `sync` is discarded). For fault-injection tests and emergency stops; an ordinary drop
    /// closes cleanly with a final `sync` instead.
    pub fn abandon(&self) {
        self.inner
            .stopped
            .lock()
            .get_or_insert_with(|| "the store was abandoned".into());
    }

    /// A hash of every catalog row (chunk index, packs, streams, extents, spans, sidecars,
    /// records): equal for two catalogs with the same content, e.g. a catalog and the one
    /// recovered from the back end's journal.
    pub fn catalog_fingerprint(&self) -> Result<[u8; 32]> {
        let mut raw = Vec::new();
        for row in journal::dump(&self.inner.db.database(), journal::Form::AsWritten)? {
            journal::append_op(&mut raw, &row);
        }
        for (key, pack) in crate::chunk_index::rows(&self.inner.db.begin_read()?)? {
            raw.extend_from_slice(&key);
            raw.extend_from_slice(&pack.to_le_bytes());
        }
        Ok(*blake3::hash(&raw).as_bytes())
    }

    /// The stream whose new chunks pack object `key` holds, for packs this process stored
    /// (reclaim's rewritten packs have none): lets a write-back cache's upload queue be
    /// reported per stream, i.e. per cartridge. `None` for other keys.
    pub fn pack_owner(&self, key: &str) -> Option<StreamId> {
        let pack = catalog::parse_pack_key(key)?;
        self.inner
            .pack_owners
            .lock()
            .get(&pack)
            .map(|s| StreamId(*s))
    }

    /// Forgets the owners of packs for which `keep(pack key)` is false (packs no longer
    /// queued for upload), so the map stays as small as the queue.
    pub fn retain_pack_owners(&self, keep: &mut dyn FnMut(&str) -> bool) {
        self.inner
            .pack_owners
            .lock()
            .retain(|pack, _| keep(pack_key(*pack).as_str()));
    }

    /// The last catalog journal object in the back end: the one the local catalog includes,
    /// or a piece of a group never ended after it, skipped by replay (0 without a journal).
    pub fn journal_seq(&self) -> u64 {
        self.inner.journal.lock().seq
    }

    /// The journal and its newest checkpoint (all zero with the journal off).
    pub fn journal_status(&self) -> JournalStatus {
        let j = self.inner.journal.lock();
        JournalStatus {
            seq: j.seq,
            checkpoint_seq: j.checkpoint_seq,
            checkpoint_bytes: j.checkpoint_bytes,
            objects_since_checkpoint: j.since_checkpoint_objects,
            bytes_since_checkpoint: j.since_checkpoint_bytes,
        }
    }

    /// Writes a checkpoint of the catalog now (the store also does on its own, see
    /// `StoreConfig::checkpoint_min_bytes`), then deletes the journal objects it covers.
    /// `None` when nothing was journaled since the last one. Refused with the journal off.
    pub fn checkpoint(&self) -> Result<Option<CheckpointReport>> {
        self.inner.write_checkpoint()
    }

    /// Waits until a checkpoint the store started on its own (after a synchronising point) is
    /// written: its objects are then in the back end, for a caller that counts what is there
    /// (a benchmark's final flush, a test).
    pub fn wait_for_background_checkpoint(&self) {
        while self.inner.checkpoint_busy.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.upload_tx.lock().take();
        let me = std::thread::current().id();
        for h in std::mem::take(&mut *self.uploaders.lock()) {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
        let behind = self.db.nondurable_pending();
        if behind && self.sync().is_err() {
            // redb would make the pending commits durable on close; they may name chunks that
            // were never stored. Fence so the catalog stays at its last durable commit.
            self.fenced.store(true, Ordering::Release);
        }
        if self.stopped.lock().is_some() {
            self.fenced.store(true, Ordering::Release);
        }
        if self.config.catalog_compact_idle.is_some() && !self.fenced.load(Ordering::Acquire) {
            match self.db.compact_owned() {
                Ok(Ok(c)) => tracing::info!(
                    "catalog compacted on close: {:.1} -> {:.1} MB in {} ms",
                    c.before as f64 / 1e6,
                    c.after as f64 / 1e6,
                    c.took.as_millis()
                ),
                Ok(Err(_)) => {}
                Err(e) => tracing::warn!("compacting the catalog on close: {e}"),
            }
        }
    }
}

fn record_op(key: &[u8], value: Option<&[u8]>) -> journal::Op {
    match value {
        Some(v) => journal::Op::PutRecord(key.to_vec(), v.to_vec()),
        None => journal::Op::DelRecord(key.to_vec()),
    }
}

/// Creates an empty catalog at `path` atomically: initialised under another name, synced, then
/// renamed. A process killed while redb lays out a new file would otherwise leave a file redb
/// cannot open; a leftover of such an attempt is discarded here (it never held a commit).
fn create_catalog(catalog_dir: &Path, path: &Path) -> Result<()> {
    let io = |what: &str, e: std::io::Error| StoreError::Catalog(format!("{what}: {e}"));
    let fresh = catalog_dir.join("catalog.redb.new");
    match std::fs::remove_file(&fresh) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&format!("removing {}", fresh.display()), e)),
    }
    {
        let db = Database::create(&fresh)?;
        init_catalog(&db)?;
    }
    std::fs::File::open(&fresh)
        .and_then(|f| f.sync_all())
        .map_err(|e| io(&format!("syncing {}", fresh.display()), e))?;
    std::fs::rename(&fresh, path).map_err(|e| io(&format!("creating {}", path.display()), e))?;
    std::fs::File::open(catalog_dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(&format!("syncing {}", catalog_dir.display()), e))
}

/// A failed read of a pack the catalog names: a missing or short object is damage.
fn pack_read_error(e: reel_backend::BackendError) -> StoreError {
    match e {
        reel_backend::BackendError::NotFound(k) => {
            StoreError::Corrupt(format!("pack object {k} is missing"))
        }
        reel_backend::BackendError::InvalidRange { key, size, .. } => {
            StoreError::Corrupt(format!("pack object {key} is truncated ({size} bytes)"))
        }
        other => StoreError::from_backend(other),
    }
}

/// Puts every indexed chunk's id that is a hook into `filter`, from the packs' names (the
/// index keeps only prefixes; a hook is chosen by the id's last byte).
fn insert_named_hooks(db: &Database, filter: &Bloom) -> Result<()> {
    let txn = db.begin_read()?;
    crate::pack_names::for_each(
        &txn.open_table(crate::pack_names::PACK_NAMES)?,
        |_, names| {
            for name in names.chunks_exact(32) {
                let mut id = [0u8; 32];
                id.copy_from_slice(name);
                let id = ChunkId(id);
                if is_hook(&id) && id != format::TOMBSTONE {
                    filter.insert(&id);
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}

fn init_catalog(db: &Database) -> Result<()> {
    let txn = db.begin_write()?;
    {
        let mut meta = txn.open_table(META)?;
        let version = meta.get(catalog::META_FORMAT)?.map(|v| v.value());
        match version {
            Some(v) if v > catalog::CATALOG_VERSION => {
                return Err(StoreError::Invalid(format!(
                    "catalog format version {v} is newer than this reel (reads versions 1 to {})",
                    catalog::CATALOG_VERSION
                )));
            }
            // New, or an upgrade from 1 to 7: the tables version 2 adds are created empty
            // below; versions 3 and 4 change no row written before them; version 5's index is
            // converted from the legacy chunk rows once the journal is replayed (`open`);
            // version 6's name parts are moved from the whole rows just below; version 8's
            // placed bodies are made from the written ones once the journal is replayed;
            // version 10's index is rebuilt from the names just below; version 11's recent index
            // table is created empty below.
            Some(v) if v == catalog::CATALOG_VERSION => {}
            _ => {
                meta.insert(catalog::META_FORMAT, catalog::CATALOG_VERSION)?;
            }
        }
        // Versions 6 and 7: names kept whole per pack, and spans kept one row each, move into
        // parts before anything reads them.
        crate::pack_names::convert_legacy(&txn)?;
        crate::spans::convert_legacy(&txn)?;
        // Versions 5 to 9: the index keyed 8 bytes to 64-bit packs is rebuilt from the names
        // before a replay indexes more chunks against it.
        if matches!(version, Some(5..=9)) {
            crate::chunk_index::rebuild_from_names(&txn)?;
        }
        txn.open_table(catalog::LEGACY_CHUNKS)?;
        txn.open_table(crate::chunk_index::INDEX)?;
        txn.open_table(crate::chunk_index::INDEX_FULL)?;
        txn.open_table(crate::chunk_index::RECENT)?;
        txn.open_table(PACKS)?;
        txn.open_table(catalog::LEGACY_PACK_IDS)?;
        txn.open_table(crate::pack_names::PACK_NAMES)?;
        txn.open_table(STREAMS)?;
        txn.open_table(EXTENTS)?;
        txn.open_table(SIDECAR)?;
        txn.open_table(catalog::LEGACY_SPANS)?;
        txn.open_table(crate::spans::SPAN_INDEX)?;
        txn.open_table(crate::spans::SPAN_BODIES)?;
        txn.open_table(crate::spans::SPANS_PLACED_BELOW)?;
        txn.open_table(crate::pack_names::RETIRED_NAMES)?;
        txn.open_table(RECORDS)?;
        txn.open_table(FOREIGN_PACKS)?;
        txn.open_table(PINS)?;
    }
    txn.commit()?;
    Ok(())
}

/// Where the journal stands after [`replay_journal`].
struct JournalStart {
    /// The last sequence number in the back end, which the next journal object follows.
    seq: u64,
    since_checkpoint_objects: u64,
    since_checkpoint_bytes: u64,
    checkpoint_seq: u64,
    checkpoint_bytes: u64,
}

/// How many times a recovery lists the bucket's catalog objects again when they changed
/// under an attempt that failed.
const REPLAY_ATTEMPTS: u32 = 5;

/// [`replay_journal`], again from a new listing when an attempt fails while the catalog
/// objects in the back end changed: another node compacting (a checkpoint, then the deletion
/// of the journal it covers) can delete what an attempt listed before it reads it. Each
/// attempt resumes where the last left the catalog (every step it applies is durable), and the
/// next one sees the new checkpoint. A failure on an unchanged listing is returned as it is.
fn replay_journal_listing_again(
    db: &Database,
    backend: &dyn Backend,
    progress: &mut dyn FnMut(RecoveryProgress),
) -> Result<JournalStart> {
    let catalog_objects = || -> Result<Vec<(String, u64)>> {
        let mut keys = Vec::new();
        for prefix in [journal::JOURNAL_PREFIX, checkpoint::CHECKPOINT_PREFIX] {
            let listed = backend.list(prefix).map_err(StoreError::from_backend)?;
            keys.extend(
                listed
                    .into_iter()
                    .map(|o| (o.key.as_str().to_string(), o.size)),
            );
        }
        keys.sort_unstable();
        Ok(keys)
    };
    let mut attempt = 1;
    loop {
        let before = catalog_objects()?;
        let err = match replay_journal(db, backend, progress) {
            Ok(start) => return Ok(start),
            Err(e) => e,
        };
        if attempt >= REPLAY_ATTEMPTS || catalog_objects()? == before {
            return Err(err);
        }
        tracing::warn!(
            "recovering the catalog from {}: {err}; its catalog objects changed meanwhile \
             (another node compacting?), listing again (attempt {} of {REPLAY_ATTEMPTS})",
            backend.describe(),
            attempt + 1
        );
        attempt += 1;
    }
}

/// Brings the catalog up to the back end: restores the newest checkpoint if the catalog is
/// empty, behind the journal objects still present, or half-restored (`checkpoint.rs`), then
/// replays the complete groups among the journal objects newer than the catalog and skips
/// the groups never ended (`journal.rs`).
fn replay_journal(
    db: &Database,
    backend: &dyn Backend,
    progress: &mut dyn FnMut(RecoveryProgress),
) -> Result<JournalStart> {
    let (local, restoring, restored_parts) = {
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        let get = |key: &str| -> Result<Option<u64>> { Ok(meta.get(key)?.map(|v| v.value())) };
        (
            get(catalog::META_JOURNAL_SEQ)?.unwrap_or(0),
            get(catalog::META_RESTORING)?,
            get(catalog::META_RESTORED_PARTS)?.unwrap_or(0),
        )
    };
    let corrupt = |key: &reel_backend::Key, e: FormatError| {
        StoreError::Corrupt(format!("{key} in {}: {e}", backend.describe()))
    };
    let listed = backend
        .list(journal::JOURNAL_PREFIX)
        .map_err(StoreError::from_backend)?;
    let mut journals: Vec<(u64, u64)> = listed
        .iter()
        .filter_map(|o| Some((journal::parse_journal_key(o.key.as_str())?, o.size)))
        .collect();
    journals.sort_unstable();
    let mut manifests: Vec<u64> = backend
        .list(checkpoint::CHECKPOINT_PREFIX)
        .map_err(StoreError::from_backend)?
        .iter()
        .filter_map(|o| match checkpoint::parse_key(o.key.as_str())? {
            checkpoint::CheckpointKey::Manifest { seq } => Some(seq),
            checkpoint::CheckpointKey::Part { .. } => None,
        })
        .collect();
    manifests.sort_unstable();
    let newest = manifests.last().copied();
    let has_journal = |seq: u64| journals.binary_search_by_key(&seq, |j| j.0).is_ok();
    // Which checkpoint to restore, and from which part.
    let restore = match restoring {
        Some(c) if manifests.contains(&c) => Some((c, restored_parts)),
        Some(c) => match newest {
            // The one being restored was replaced by a newer one (another node compacted).
            Some(n) => Some((n, 0)),
            None => {
                return Err(StoreError::Corrupt(format!(
                    "restoring catalog checkpoint {} was interrupted, and {} holds no \
                     checkpoint any more",
                    checkpoint::manifest_key(c),
                    backend.describe()
                )));
            }
        },
        // Restoring beats replaying every journal into an empty catalog, and is the only way
        // once the journal objects after the catalog are gone.
        None => newest
            .filter(|&n| {
                n > local
                    && (local == 0
                        || !has_journal(local + 1)
                        || journals.last().is_none_or(|j| j.0 < n))
            })
            .map(|n| (n, 0)),
    };
    let manifest = match restore.or(newest.map(|n| (n, 0))) {
        Some((c, _)) => {
            let key = checkpoint::manifest_key(c);
            let bytes = backend.get(&key).map_err(StoreError::from_backend)?;
            Some(checkpoint::Manifest::decode(&bytes, c).map_err(|e| corrupt(&key, e))?)
        }
        None => None,
    };
    let base = match restore {
        Some((c, _)) => c,
        None => local,
    };
    let newer: Vec<u64> = journals
        .iter()
        .map(|j| j.0)
        .filter(|&seq| seq > base)
        .collect();
    let mut seq = base;
    for &next in &newer {
        if next != seq + 1 {
            return Err(StoreError::Corrupt(format!(
                "catalog journal {} is missing from {} (the catalog includes up to {seq}, the \
                 next one present is {next})",
                journal::journal_key(seq + 1),
                backend.describe()
            )));
        }
        seq = next;
    }
    let checkpoint_seq = manifest.as_ref().map_or(0, |m| m.seq);
    let since: Vec<&(u64, u64)> = journals.iter().filter(|j| j.0 > checkpoint_seq).collect();
    let start = JournalStart {
        seq: seq.max(checkpoint_seq),
        since_checkpoint_objects: since.len() as u64,
        since_checkpoint_bytes: since.iter().map(|j| j.1).sum(),
        checkpoint_seq,
        checkpoint_bytes: manifest.as_ref().map_or(0, checkpoint::Manifest::bytes),
    };
    // Pass 1, headers only: which objects belong to a group that was ended. Leading pieces
    // that continue a group are the rest of one whose replay an earlier open began (the
    // catalog only ever records a group's end otherwise), which was ended, or it would not
    // have been replayed.
    let mut pieces = Vec::with_capacity(newer.len());
    for &next in &newer {
        let key = journal::journal_key(next);
        let header = backend
            .get_range(&key, 0..journal::PEEK_LEN as u64)
            .map_err(StoreError::from_backend)?;
        pieces.push(journal::peek_piece(&header, next).map_err(|e| corrupt(&key, e))?);
    }
    let mut apply = vec![false; pieces.len()];
    // Where the group the next piece belongs to began; a first piece abandons what is before.
    let mut group_start = 0;
    for (i, piece) in pieces.iter().enumerate() {
        if piece.first {
            group_start = i;
        } else if i > 0 && group_start == i {
            return Err(StoreError::Corrupt(format!(
                "catalog journal {} continues a group that {} ended, in {}",
                journal::journal_key(newer[i]),
                journal::journal_key(newer[i - 1]),
                backend.describe()
            )));
        }
        if piece.last {
            apply[group_start..=i].fill(true);
            group_start = i + 1;
        }
    }
    let parts_left = match (restore, &manifest) {
        (Some((_, from)), Some(m)) => (m.parts.len() as u64).saturating_sub(from),
        _ => 0,
    };
    let mut report = RecoveryProgress {
        done: 0,
        total: parts_left + apply.iter().filter(|&&a| a).count() as u64,
        ops: 0,
    };
    if report.total > 0 {
        progress(report);
    }
    if let (Some((c, from)), Some(m)) = (restore, &manifest) {
        restore_checkpoint(
            db,
            backend,
            m,
            if restoring == Some(c) { from } else { 0 },
            &mut |ops| {
                report.done += 1;
                report.ops += ops;
                progress(report);
            },
        )?;
    }
    // Pass 2: apply them in order, each durably, so a crash mid-recovery resumes after it.
    for (i, &next) in newer.iter().enumerate() {
        if !apply[i] {
            continue;
        }
        let key = journal::journal_key(next);
        let bytes = backend.get(&key).map_err(StoreError::from_backend)?;
        let (ops, piece) = journal::decode_piece(&bytes, next).map_err(|e| corrupt(&key, e))?;
        if piece != pieces[i] {
            return Err(StoreError::Corrupt(format!(
                "{key} in {} changed while it was read",
                backend.describe()
            )));
        }
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        journal::apply(&txn, &ops)?;
        txn.open_table(META)?
            .insert(catalog::META_JOURNAL_SEQ, next)?;
        txn.commit()?;
        report.done += 1;
        report.ops += ops.len() as u64;
        progress(report);
    }
    Ok(start)
}

/// Restores checkpoint `manifest` into the catalog from part `from` on: part 0 first empties
/// the catalog's tables; each part is applied in its own durable transaction with the count
/// of parts applied, so a restore interrupted half way resumes after the last one.
fn restore_checkpoint(
    db: &Database,
    backend: &dyn Backend,
    manifest: &checkpoint::Manifest,
    from: u64,
    applied: &mut dyn FnMut(u64),
) -> Result<()> {
    let c = manifest.seq;
    if from == 0 {
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        journal::clear(&txn)?;
        {
            let mut meta = txn.open_table(META)?;
            meta.insert(catalog::META_JOURNAL_SEQ, 0)?;
            meta.insert(catalog::META_RESTORING, c)?;
            meta.insert(catalog::META_RESTORED_PARTS, 0)?;
        }
        txn.commit()?;
    }
    for (k, info) in manifest.parts.iter().enumerate().skip(from as usize) {
        let key = checkpoint::part_key(c, k as u32);
        let bytes = backend.get(&key).map_err(StoreError::from_backend)?;
        if checkpoint::PartInfo::of(&bytes) != *info {
            return Err(StoreError::Corrupt(format!(
                "{key} in {} is not the part its manifest names ({} bytes, expected {})",
                backend.describe(),
                bytes.len(),
                info.bytes
            )));
        }
        let ops = journal::decode(&bytes, k as u64)
            .map_err(|e| StoreError::Corrupt(format!("{key} in {}: {e}", backend.describe())))?;
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        journal::apply(&txn, &ops)?;
        txn.open_table(META)?
            .insert(catalog::META_RESTORED_PARTS, k as u64 + 1)?;
        txn.commit()?;
        applied(ops.len() as u64);
    }
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut meta = txn.open_table(META)?;
        meta.insert(catalog::META_JOURNAL_SEQ, c)?;
        meta.remove(catalog::META_RESTORING)?;
        meta.remove(catalog::META_RESTORED_PARTS)?;
    }
    txn.commit()?;
    Ok(())
}

/// The catalog exactly as replaying journals `..=seq` builds it: a read transaction opened
/// at the durable commit that ended group `seq`, when no catalog change after it had been
/// made (see `Inner::commit_txn_durably_with_snapshot` for how each path makes sure).
struct CatalogSnapshot {
    seq: u64,
    txn: redb::ReadTransaction,
    /// The journal objects since the last checkpoint at that moment (what this one replaces).
    since_objects: u64,
    since_bytes: u64,
}

/// Cuts a checkpoint's ops into parts and stores each as it fills.
struct PartWriter<'a> {
    inner: &'a Inner,
    seq: u64,
    raw: Vec<u8>,
    count: u32,
    ops: u64,
    parts: Vec<checkpoint::PartInfo>,
}

impl PartWriter<'_> {
    fn push(&mut self, op: &journal::Op) -> Result<()> {
        if self.inner.closing.load(Ordering::Acquire) {
            return Err(StoreError::Stopped(
                "the store is closing: checkpoint abandoned".into(),
            ));
        }
        journal::append_op(&mut self.raw, op);
        self.count += 1;
        self.ops += 1;
        if self.raw.len() >= self.inner.config.checkpoint_part_bytes.max(1) {
            self.store_part()?;
        }
        Ok(())
    }

    fn store_part(&mut self) -> Result<()> {
        let part = self.parts.len() as u32;
        let bytes = journal::encode_raw(
            u64::from(part),
            &self.raw,
            self.count,
            journal::Piece::WHOLE,
        );
        self.inner
            .put_checkpoint_object(&checkpoint::part_key(self.seq, part), &bytes)?;
        self.parts.push(checkpoint::PartInfo::of(&bytes));
        self.raw.clear();
        self.count = 0;
        Ok(())
    }

    /// Stores the last part (an empty catalog still has one part, with no ops).
    fn finish(&mut self) -> Result<()> {
        if self.count > 0 || self.parts.is_empty() {
            self.store_part()?;
        }
        Ok(())
    }
}

/// What a compaction asked for did: the file's sizes, or why it was left as it was.
pub type CompactionOutcome =
    std::result::Result<crate::CatalogCompaction, crate::CatalogNotCompacted>;

impl ChunkStore {
    /// Compacts the catalog file now if a fiftieth of it (and 1 MiB) is pages no table uses,
    /// the file is at most 4 GiB (a stop must end within the service manager's timeout), and
    /// nothing needs it: no transaction open, no non-durable commit waiting for a sync. For a
    /// server stopping, after its last sync (handles elsewhere may keep the store open past
    /// its exit, so closing alone would not).
    pub fn compact_catalog(&self) -> Result<CompactionOutcome> {
        self.inner.check_stopped()?;
        self.inner.compact_catalog(CompactMoment::Stopping)
    }

    /// Compacts the catalog file if any page of it is spare, whatever its size: an operator's
    /// `reel compact` on a stopped server's data directory. Every catalog transaction waits
    /// while it runs (about 9 ms per MB of file on the benchmark machine).
    pub fn compact_catalog_now(&self) -> Result<CompactionOutcome> {
        self.inner.check_stopped()?;
        self.inner.compact_catalog(CompactMoment::Asked)
    }
}

impl Inner {
    /// Gives the catalog file's unused pages back when `moment` allows (`CatalogDb::try_compact`
    /// says when it may).
    pub(crate) fn compact_catalog(&self, moment: CompactMoment) -> Result<CompactionOutcome> {
        if self.fenced.load(Ordering::Acquire) || self.stopped.lock().is_some() {
            return Ok(Err(crate::CatalogNotCompacted::Fenced));
        }
        match self.db.try_compact(moment) {
            Ok(Ok(c)) => {
                self.catalog_compactions.fetch_add(1, Ordering::Relaxed);
                Ok(Ok(c))
            }
            Ok(Err(why)) => Ok(Err(why)),
            Err(e) => Err(StoreError::Catalog(format!("compacting the catalog: {e}"))),
        }
    }

    pub(crate) fn is_pending(&self, id: &ChunkId) -> bool {
        self.pending.lock().contains(id)
    }

    pub(crate) fn check_stopped(&self) -> Result<()> {
        match &*self.stopped.lock() {
            Some(why) => Err(StoreError::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Fail-stop: after a catalog failure nothing more is written until reopen (as redb's own
    /// `PreviousIo`), so a half-applied state is never built upon.
    pub(crate) fn stop_on_catalog_error<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(StoreError::Catalog(why)) = &r {
            self.stopped.lock().get_or_insert_with(|| why.clone());
        }
        r
    }

    /// The sticky upload error, if a pack could not be stored. Writers refuse new data until a
    /// `sync` has stored every failed pack.
    pub(crate) fn upload_error(&self) -> Option<StoreError> {
        let u = self.uploads.lock();
        u.error.as_ref().map(|e| {
            if u.error_is_space {
                StoreError::NoSpace(e.clone())
            } else {
                StoreError::Backend(reel_backend::BackendError::Io {
                    key: "packs".into(),
                    source: std::io::Error::other(e.clone()),
                })
            }
        })
    }

    pub(crate) fn new_builder(&self, stream: u64) -> Arc<Mutex<PackBuilder>> {
        let builder = PackBuilder::new(
            self.config.blob_target,
            self.config.pack_target,
            self.config.zstd_level,
        )
        .with_owner(stream)
        .with_buffers(self.pack_buffers.clone())
        .with_compressors(self.compressors.clone());
        #[cfg(test)]
        let builder = match self.write_format_1.load(Ordering::Relaxed) {
            true => builder.writing_format_1(),
            false => builder,
        };
        let b = Arc::new(Mutex::new(builder));
        let mut builders = self.builders.lock();
        builders.retain(|w| w.strong_count() > 0);
        builders.push(Arc::downgrade(&b));
        b
    }

    pub(crate) fn alloc_pack_id(&self) -> u64 {
        self.next_pack.fetch_add(1, Ordering::Relaxed)
    }

    /// Decides whether `id` is new; if so it is reserved (pending) and the caller must store it.
    /// See `index.rs` for why only hooks are looked up on disk.
    pub(crate) fn reserve(&self, id: &ChunkId) -> Result<bool> {
        if self.cache.lock().get(id).is_some() {
            return Ok(false);
        }
        let hook = is_hook(id);
        if hook
            && self.filter.read().may_contain(id)
            && !self.pending.lock().contains(id)
            // A failed lookup (a pack's table of contents unreadable now, or a catalog error
            // that indexing will meet and report) costs dedup, not the write: the chunk is
            // stored again, and indexing finds the first copy (a tombstone here).
            && let Some(loc) = self.lookup_catalog(id).ok().flatten()
        {
            self.warm_cache(loc.pack);
            return Ok(false);
        }
        if !self.pending.lock().insert(*id) {
            return Ok(false);
        }
        if !hook {
            return Ok(true);
        }
        let overfull = {
            let filter = self.filter.read();
            filter.insert(id);
            filter.is_overfull()
        };
        if overfull {
            self.grow_filter()?;
        }
        Ok(true)
    }

    /// A chunk row added outside the write path (an import): hooks go into the filter, so
    /// later writes dedup against it.
    pub(crate) fn note_indexed(&self, id: &ChunkId) -> Result<()> {
        if !is_hook(id) {
            return Ok(());
        }
        let overfull = {
            let filter = self.filter.read();
            filter.insert(id);
            filter.is_overfull()
        };
        if overfull {
            self.grow_filter()?;
        }
        Ok(())
    }

    fn grow_filter(&self) -> Result<()> {
        let mut filter = self.filter.write();
        if !filter.is_overfull() {
            return Ok(());
        }
        let pending = self.pending.lock();
        let bigger = Bloom::with_capacity(filter.capacity() * 2);
        insert_named_hooks(&self.db.database(), &bigger)?;
        for id in pending.iter().filter(|id| is_hook(id)) {
            bigger.insert(id);
        }
        *filter = bigger;
        Ok(())
    }

    /// Where the index says chunk `id` is: its pack from the index, its place in the pack
    /// from the pack's table of contents (loaded into the locality cache on the way). A prefix
    /// hit counts only if that pack holds the whole id (`chunk_index.rs`).
    pub(crate) fn lookup_catalog(&self, id: &ChunkId) -> Result<Option<ChunkLoc>> {
        let candidates = {
            let txn = self.db.begin_read()?;
            crate::chunk_index::candidates(
                &crate::chunk_index::KeyRows::read(&txn)?,
                &txn.open_table(crate::chunk_index::INDEX_FULL)?,
                id,
            )?
        };
        for pack in candidates.into_iter().flatten() {
            if let Some(loc) = self.find_in_pack(pack, id)? {
                return Ok(Some(loc));
            }
        }
        Ok(None)
    }

    /// Where each of `ids` is, as the index of snapshot `txn` says, for many chunks at once,
    /// for accounting, without waiting on the network: each pack's table of contents is read
    /// once for all the ids it holds if the back end has it locally ([`Located::At`]); a pack
    /// only in the bucket answers from its names in the catalog ([`Located::InPack`]).
    /// [`Located::Missing`] for a chunk not found, or whose pack's table of contents cannot be
    /// read now (a foreign store out of reach, a pack a reclaim beside this removed).
    pub(crate) fn locate_many(
        &self,
        txn: &redb::ReadTransaction,
        ids: &[ChunkId],
    ) -> Result<Vec<Located>> {
        let index = crate::chunk_index::KeyRows::read(txn)?;
        let full = txn.open_table(crate::chunk_index::INDEX_FULL)?;
        // Chunks whose packs the locality cache holds need no table of contents read.
        let mut out: Vec<Located> = {
            let cache = self.cache.lock();
            ids.iter()
                .map(|id| cache.get(id).map_or(Located::Missing, Located::At))
                .collect()
        };
        let mut second: Vec<Option<u64>> = vec![None; ids.len()];
        let mut by_pack: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            if !matches!(out[i], Located::Missing) {
                continue;
            }
            match crate::chunk_index::candidates(&index, &full, id)? {
                [Some(p), w] => {
                    by_pack.entry(p).or_default().push(i);
                    second[i] = w;
                }
                [None, Some(w)] => by_pack.entry(w).or_default().push(i),
                [None, None] => {}
            }
        }
        for round in 0..2 {
            let mut retry: HashMap<u64, Vec<usize>> = HashMap::new();
            for (pack, wanted) in by_pack {
                let (toc, names): (HashMap<ChunkId, ChunkLoc>, HashSet<ChunkId>) =
                    match self.read_pack_toc_if_local(pack) {
                        Ok(Some(toc)) => (
                            toc.into_iter()
                                .filter(|(n, _)| *n != format::TOMBSTONE)
                                .collect(),
                            HashSet::new(),
                        ),
                        // Only in the bucket: its names (in the catalog) say whether it holds
                        // the chunk, not where.
                        Ok(None) => (
                            HashMap::new(),
                            self.pack_ids(pack)
                                .unwrap_or_default()
                                .into_iter()
                                .filter(|n| *n != format::TOMBSTONE)
                                .collect(),
                        ),
                        Err(_) => (HashMap::new(), HashSet::new()),
                    };
                for i in wanted {
                    let found = match toc.get(&ids[i]) {
                        Some(loc) => Some(Located::At(*loc)),
                        None => names.contains(&ids[i]).then_some(Located::InPack(pack)),
                    };
                    match found {
                        Some(place) => out[i] = place,
                        None if round == 0 => {
                            if let Some(w) = second[i].take() {
                                retry.entry(w).or_default().push(i);
                            }
                        }
                        None => {}
                    }
                }
            }
            by_pack = retry;
        }
        Ok(out)
    }

    /// Chunk `id` in pack `pack`'s table of contents (tombstones never match), through the
    /// locality cache: a repeated stretch, or a restore, finds its next chunks there.
    fn find_in_pack(&self, pack: u64, id: &ChunkId) -> Result<Option<ChunkLoc>> {
        let cached = {
            let cache = self.cache.lock();
            if let Some(loc) = cache.get(id).filter(|l| l.pack == pack) {
                return Ok(Some(loc));
            }
            cache.contains_pack(pack)
        };
        let toc = self.read_pack_toc(pack)?;
        let found = toc.iter().find(|(name, _)| name == id).map(|(_, loc)| *loc);
        if !cached {
            let named = toc.into_iter().filter(|(n, _)| *n != format::TOMBSTONE);
            self.cache.lock().insert_pack(pack, named);
        }
        Ok(found)
    }

    /// Loads a pack's table of contents into the locality cache (best effort: a failure only
    /// costs speed).
    fn warm_cache(&self, pack: u64) {
        if self.cache.lock().contains_pack(pack) {
            return;
        }
        if let Ok(entries) = self.read_pack_toc(pack) {
            let named = entries
                .into_iter()
                .filter(|(id, _)| *id != format::TOMBSTONE);
            self.cache.lock().insert_pack(pack, named);
        }
    }

    /// A pack's chunks: names from the catalog, locations from the pack's trailer.
    pub(crate) fn read_pack_toc(&self, pack: u64) -> Result<Vec<(ChunkId, ChunkLoc)>> {
        let trailer = self.read_trailer_from(pack, false)?;
        self.toc_of(
            pack,
            trailer.ok_or_else(|| StoreError::Corrupt(format!("pack {pack}: no trailer read")))?,
        )
    }

    /// [`Self::read_pack_toc`] if the back end holds the pack's footer and trailer locally
    /// (always for a local store; for a bucket, if the cache has them), else `None`.
    pub(crate) fn read_pack_toc_if_local(
        &self,
        pack: u64,
    ) -> Result<Option<Vec<(ChunkId, ChunkLoc)>>> {
        match self.read_trailer_from(pack, true)? {
            Some(trailer) => Ok(Some(self.toc_of(pack, trailer)?)),
            None => Ok(None),
        }
    }

    fn toc_of(&self, pack: u64, trailer: format::PackTrailer) -> Result<Vec<(ChunkId, ChunkLoc)>> {
        let ids = self.pack_ids(pack)?;
        let slots = trailer.slots();
        if ids.len() != slots.len() {
            return Err(StoreError::Corrupt(format!(
                "pack {pack} holds {} chunks but the catalog names {}",
                slots.len(),
                ids.len()
            )));
        }
        Ok(ids
            .into_iter()
            .zip(slots)
            .map(|(id, slot)| (id, trailer.loc(pack, &slot)))
            .collect())
    }

    pub(crate) fn pack_ids(&self, pack: u64) -> Result<Vec<ChunkId>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(crate::pack_names::PACK_NAMES)?;
        let names = crate::pack_names::get(&t, pack)?
            .ok_or_else(|| StoreError::Corrupt(format!("pack {pack} has no chunk names")))?;
        Ok(format::decode_pack_ids(&names)?)
    }

    /// A pack's trailer; with `local_only`, `None` unless the back end can serve it without
    /// a remote request.
    pub(crate) fn read_trailer_from(
        &self,
        pack: u64,
        local_only: bool,
    ) -> Result<Option<format::PackTrailer>> {
        let (backend, key, _) = self.pack_object(pack)?;
        let size = {
            let txn = self.db.begin_read()?;
            let t = txn.open_table(PACKS)?;
            let row = t
                .get(pack)?
                .ok_or_else(|| StoreError::Corrupt(format!("pack {pack} not in catalog")))?;
            PackRow::decode(row.value())?.size
        };
        let footer_at = size
            .checked_sub(format::PACK_FOOTER_LEN as u64)
            .ok_or_else(|| StoreError::Corrupt(format!("pack {pack} too small")))?;
        if local_only && !backend.is_local(&key, footer_at..size) {
            return Ok(None);
        }
        let footer = backend
            .get_range(&key, footer_at..size)
            .map_err(pack_read_error)?;
        let (trailer_at, crc) = format::decode_pack_footer(&footer)?;
        if trailer_at > footer_at {
            return Err(StoreError::Corrupt(format!(
                "pack {pack}: trailer offset out of range"
            )));
        }
        if local_only && !backend.is_local(&key, trailer_at..footer_at) {
            return Ok(None);
        }
        let bytes = backend
            .get_range(&key, trailer_at..footer_at)
            .map_err(pack_read_error)?;
        Ok(Some(format::decode_pack_trailer(&bytes, crc, trailer_at)?))
    }

    /// Where pack `pack` is: our back end and `packs/<pack>`, or, for a foreign pack, the
    /// other store's back end and its own key; with the id the pack's header carries.
    pub(crate) fn pack_object(
        &self,
        pack: u64,
    ) -> Result<(Arc<dyn Backend>, reel_backend::Key, u64)> {
        let Some(foreign) = self.foreign.read().get(&pack).cloned() else {
            return Ok((self.backend.clone(), pack_key(pack), pack));
        };
        let backend = self.foreign_backend(&foreign.source)?;
        Ok((backend, pack_key(foreign.pack), foreign.pack))
    }

    pub(crate) fn foreign_backend(&self, source: &str) -> Result<Arc<dyn Backend>> {
        if let Some(b) = self.foreign_backends.lock().get(source) {
            return Ok(b.clone());
        }
        let stores = self.foreign_stores.read().clone().ok_or_else(|| {
            StoreError::Invalid(format!(
                "data adopted from store {source} is read from there, and this store was \
                 opened without access to other stores"
            ))
        })?;
        let backend = stores.open(source).map_err(|why| {
            StoreError::Invalid(format!(
                "opening store {source} to read adopted data: {why}"
            ))
        })?;
        self.foreign_backends
            .lock()
            .insert(source.to_string(), backend.clone());
        Ok(backend)
    }

    /// Queues a sealed pack for upload (blocks while the queue is full: back-pressure).
    pub(crate) fn submit(&self, pack: SealedPack) {
        if let Some(stream) = pack.owner {
            self.pack_owners.lock().insert(pack.id, stream);
        }
        self.uploads.lock().in_flight += 1;
        let tx = self.upload_tx.lock().clone();
        match tx {
            Some(tx) => {
                if let Err(e) = tx.send(pack) {
                    self.upload(e.into_inner(), PutMode::Create);
                }
            }
            None => self.upload(pack, PutMode::Create),
        }
    }

    /// Stores a pack, then queues it to have its chunks named in the catalog (non-durably:
    /// `sync` makes it so).
    fn upload(&self, mut pack: SealedPack, mode: PutMode) {
        match self
            .backend
            .put(&pack_key(pack.id), &pack.bytes, mode)
            .map_err(StoreError::from_backend)
        {
            Ok(()) => {
                let size = pack.bytes.len() as u64;
                self.pack_buffers.give(std::mem::take(&mut pack.bytes));
                self.queue_for_index(StoredPack { pack, size });
            }
            Err(e) => {
                let mut u = self.uploads.lock();
                u.in_flight -= 1;
                u.note_error(&e);
                u.failed.push(pack);
                drop(u);
                self.uploads_done.notify_all();
            }
        }
    }

    /// Queues a stored pack for indexing; indexes the queue when it is full or a sync waits.
    fn queue_for_index(&self, stored: StoredPack) {
        let full = {
            let mut q = self.index_queue.lock();
            q.chunks += stored.pack.ids.len();
            q.packs.push(stored);
            q.chunks >= index_batch_chunks(self.index_rows.load(Ordering::Relaxed))
        };
        // SeqCst pairs with `seal_and_store_all`: either it sees this pack in the queue, or
        // this sees its waiter count and indexes the pack itself.
        if full || self.index_waiters.load(Ordering::SeqCst) > 0 {
            self.index_queued();
        }
    }

    /// Indexes every queued pack, in one catalog transaction.
    pub(crate) fn index_queued(&self) {
        let _one = self.indexer.lock();
        let batch = std::mem::take(&mut *self.index_queue.lock());
        if batch.packs.is_empty() {
            return;
        }
        let result = self.index_packs(&batch.packs);
        let mut u = self.uploads.lock();
        u.in_flight -= batch.packs.len();
        if let Err(e) = result {
            u.note_error(&e);
            u.unindexed.extend(batch.packs);
        }
        drop(u);
        self.uploads_done.notify_all();
    }

    /// Names the chunks of stored packs in the catalog, in one non-durable transaction.
    fn index_packs(&self, packs: &[StoredPack]) -> Result<()> {
        // Chunks already indexed elsewhere (a racing or cold-cache duplicate) keep their first
        // location; their copy here is garbage and is named by a tombstone, so a pack's table
        // of contents only ever offers chunks the index points at (see `format::TOMBSTONE`).
        let mut duplicates: Vec<HashSet<ChunkId>> = vec![HashSet::new(); packs.len()];
        let result = (|| -> Result<()> {
            let mut txn = self.db.begin_write()?;
            txn.set_durability(Durability::None)?;
            {
                let mut rows = txn.open_table(PACKS)?;
                let mut index = crate::chunk_index::Tables::open(&txn)?;
                index.index_into_recent_from(crate::chunk_index::recent_from(
                    self.config.index_merge_floor,
                ))?;
                for (StoredPack { pack, size }, dups) in packs.iter().zip(&mut duplicates) {
                    let row = PackRow {
                        size: *size,
                        chunks: pack.ids.len() as u32,
                        raw_bytes: pack.raw_bytes,
                    };
                    rows.insert(pack.id, row.encode().as_slice())?;
                    let elsewhere = crate::chunk_index::put_names(&mut index, pack.id, &pack.ids)?;
                    let mut names = pack.ids.clone();
                    for i in elsewhere {
                        dups.insert(pack.ids[i]);
                        names[i] = format::TOMBSTONE;
                    }
                    if self.config.journal {
                        self.journal([
                            journal::Op::PutPack(pack.id, row.encode().to_vec()),
                            journal::Op::PutPackIds(pack.id, format::encode_pack_ids(&names)),
                        ]);
                    }
                }
                // Once the main table is large, rows indexed above went to the recent one; a
                // run of twice as many moves to the main one when it is due, so the recent
                // table stays a small share of it.
                if crate::chunk_index::merge_due(&index.index, self.config.index_merge_floor)? {
                    let chunks: usize = packs.iter().map(|p| p.pack.ids.len()).sum();
                    crate::chunk_index::merge_step(
                        &mut index.index,
                        &mut self.merge_cursor.lock(),
                        2 * chunks.max(1) as u64,
                    )?;
                }
                let rows = index.index.len()? + index.full.len()?;
                self.index_rows.store(rows, Ordering::Relaxed);
            }
            txn.commit()?;
            self.index_commits.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })();
        self.stop_on_catalog_error(result)?;
        for (StoredPack { pack, .. }, dups) in packs.iter().zip(duplicates) {
            let entries = pack.entries();
            {
                let mut pending = self.pending.lock();
                for (id, _) in &entries {
                    pending.remove(id);
                }
            }
            let owned = entries.into_iter().filter(|(id, _)| !dups.contains(id));
            self.cache.lock().insert_pack(pack.id, owned);
        }
        Ok(())
    }

    /// Seals every open pack and waits until all are stored and indexed (retrying failed
    /// ones once).
    pub(crate) fn seal_and_store_all(&self) -> Result<()> {
        let builders: Vec<_> = self
            .builders
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let _waiting = IndexWaiter::new(&self.index_waiters);
        for b in builders {
            let sealed = b.lock().seal();
            if let Some(p) = sealed {
                self.submit(p);
            }
        }
        // Packs queued before this waiter was counted are indexed here; later ones by the
        // uploads that store them, which see the waiter.
        self.index_queued();
        self.wait_for_uploads();
        let mut u = self.uploads.lock();
        let retry = std::mem::take(&mut u.failed);
        let unindexed = std::mem::take(&mut u.unindexed);
        u.error = None;
        u.in_flight += retry.len();
        drop(u);
        for pack in retry {
            // The failed attempt may have stored the object after all: overwrite it.
            self.upload(pack, PutMode::Overwrite);
        }
        if !unindexed.is_empty() {
            self.uploads.lock().in_flight += unindexed.len();
            self.index_queue.lock().packs.extend(unindexed);
            self.index_queued();
        }
        self.wait_for_uploads();
        match self.upload_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn wait_for_uploads(&self) {
        let mut u = self.uploads.lock();
        while u.in_flight > 0 {
            self.uploads_done.wait(&mut u);
        }
    }

    pub(crate) fn sync(&self) -> Result<()> {
        self.check_stopped()?;
        let _commit = self.commit_lock.write();
        self.seal_and_store_all()?;
        self.commit_durably()
    }

    /// Commits the catalog durably, covering every earlier non-durable commit. The caller holds
    /// the commit lock exclusively and has stored every pack (the write path's step 5).
    pub(crate) fn commit_durably(&self) -> Result<()> {
        let txn = self.db.begin_write();
        let result = txn.map_err(StoreError::from).and_then(|txn| {
            // Every pack is named now: bodies written before their chunks' packs were named
            // are stored placed (`spans::place_new_bodies`) in the same commit.
            let report = crate::spans::place_new_bodies(&txn, &self.placer_names)?;
            self.bodies_placed_late
                .fetch_add(report.placed, Ordering::Relaxed);
            self.unplaced_spans.lock().clear();
            self.commit_txn_durably(txn)
        });
        self.stop_on_catalog_error(result)
    }

    /// Commits `txn` durably, covering every earlier non-durable commit. With the journal on,
    /// the changes since the last journal object are first written as the next one (and, for
    /// [`DurableAt::Bucket`], flushed to the back end's final home), and its number goes into
    /// this commit: the local catalog never gets ahead of the back end's journal.
    pub(crate) fn commit_txn_durably(
        &self,
        txn: crate::catalog_file::CatalogWrite<'_>,
    ) -> Result<()> {
        self.commit_txn_durably_with_snapshot(txn, false)
            .map(|_| ())
    }

    /// [`Inner::commit_txn_durably`]; with `snapshot` (for a `txn` that changes nothing but
    /// the journal sequence), also a read snapshot of the catalog as of the journal object
    /// that ended the group (see [`CatalogSnapshot`]). Without, when a
    /// checkpoint is due and none is being written, the same snapshot goes to the checkpoint
    /// thread: checkpoints are taken at the durable commits the store makes anyway (its
    /// synchronising points), never by a durable commit of their own, which would make the
    /// streams' flushed but unsynchronised changes durable at a moment no caller chose.
    fn commit_txn_durably_with_snapshot(
        &self,
        mut txn: crate::catalog_file::CatalogWrite<'_>,
        snapshot: bool,
    ) -> Result<Option<CatalogSnapshot>> {
        txn.set_durability(Durability::Immediate)?;
        txn.set_quick_repair(true);
        let mut seq = 0;
        let mut view = None;
        if self.config.journal {
            // Holding a write transaction: no other catalog change can add ops meanwhile.
            seq = self.write_journal()?;
            txn.open_table(META)?
                .insert(catalog::META_JOURNAL_SEQ, seq)?;
            let j = self.journal.lock();
            // Only for a transaction without changes of its own (`write_checkpoint`'s): a
            // snapshot opened before the commit does not see them, though `seq` holds them.
            if snapshot && seq > j.checkpoint_seq {
                // A failure is reported after the commit, which must happen either way: the
                // journal object it records is already in the back end.
                view = Some(self.db.begin_read().map(|txn| CatalogSnapshot {
                    seq,
                    txn,
                    since_objects: j.since_checkpoint_objects,
                    since_bytes: j.since_checkpoint_bytes,
                }));
            }
        }
        if self.config.durable_at == DurableAt::Bucket {
            self.backend.flush().map_err(StoreError::from_backend)?;
        }
        txn.commit()?;
        if snapshot || !self.config.journal {
            return Ok(view.transpose()?);
        }
        let due = self
            .journal
            .lock()
            .checkpoint_due(self.config.checkpoint_min_bytes);
        if due && !self.checkpoint_busy.load(Ordering::Acquire) {
            // Opened after the commit, so another writer may have committed in between; it
            // journals its ops before its commit, so a journal unchanged since `seq` (checked
            // after the snapshot is open) proves the snapshot is the catalog as of `seq`.
            // The commit succeeded: a snapshot that cannot be opened only skips a checkpoint.
            let Ok(read) = self.db.begin_read() else {
                return Ok(None);
            };
            let j = self.journal.lock();
            let clean = j.seq == seq
                && j.count == 0
                && !j.group_open
                && j.staged.is_none()
                && seq > j.checkpoint_seq;
            if clean && let Some(tx) = self.checkpoint_tx.lock().as_ref() {
                let view = CatalogSnapshot {
                    seq,
                    txn: read,
                    since_objects: j.since_checkpoint_objects,
                    since_bytes: j.since_checkpoint_bytes,
                };
                // Busy before the thread can see the snapshot, so its "done" is never
                // overwritten.
                self.checkpoint_busy.store(true, Ordering::Release);
                if tx.try_send(view).is_err() {
                    self.checkpoint_busy.store(false, Ordering::Release);
                }
            }
        }
        Ok(None)
    }

    /// Writes a checkpoint of the catalog now, at a durable commit of its own (a
    /// synchronising point, as `sync`), and deletes the journal objects and older checkpoints
    /// it replaces (`checkpoint.rs`). `None` when nothing was journaled since the last one.
    pub(crate) fn write_checkpoint(&self) -> Result<Option<CheckpointReport>> {
        if !self.config.journal {
            return Err(StoreError::Invalid(
                "the catalog journal is off (a local store): there is nothing to checkpoint".into(),
            ));
        }
        let _one = self.checkpoint_lock.lock();
        self.check_stopped()?;
        let view = {
            let _commit = self.commit_lock.write();
            self.seal_and_store_all()?;
            let result = self
                .db
                .begin_write()
                .map_err(StoreError::from)
                .and_then(|txn| self.commit_txn_durably_with_snapshot(txn, true));
            self.stop_on_catalog_error(result)?
        };
        match view {
            Some(view) => self.write_checkpoint_of(view),
            None => Ok(None),
        }
    }

    /// Writes checkpoint `view` (parts, then the manifest) and deletes what it replaces;
    /// `None` if a newer checkpoint was written since the snapshot was taken. The caller holds
    /// the checkpoint lock.
    fn write_checkpoint_of(&self, view: CatalogSnapshot) -> Result<Option<CheckpointReport>> {
        let CatalogSnapshot {
            seq,
            txn: snapshot,
            since_objects,
            since_bytes,
        } = view;
        if seq <= self.journal.lock().checkpoint_seq {
            return Ok(None);
        }
        let mut parts = PartWriter {
            inner: self,
            seq,
            raw: Vec::new(),
            count: 0,
            ops: 0,
            parts: Vec::new(),
        };
        journal::dump_into(&snapshot, journal::Form::AsStored, &mut |op| {
            parts.push(&op)
        })?;
        {
            // The store-wide values a recovered catalog needs (`reserve_pack_ids`).
            let meta = snapshot.open_table(META)?;
            if let Some(floor) = meta.get(catalog::META_PACK_ID_FLOOR)? {
                parts.push(&journal::Op::RaisePackIdFloor(floor.value()))?;
            }
            if let Some(chunker) = catalog::get_chunker(&meta)? {
                parts.push(&journal::Op::SetChunker(chunker))?;
            }
        }
        drop(snapshot);
        parts.finish()?;
        let manifest = checkpoint::Manifest {
            seq,
            ops: parts.ops,
            parts: parts.parts,
        };
        self.put_checkpoint_object(&checkpoint::manifest_key(seq), &manifest.encode())?;
        {
            let mut j = self.journal.lock();
            j.checkpoint_seq = seq;
            j.checkpoint_bytes = manifest.bytes();
            j.since_checkpoint_objects = j.since_checkpoint_objects.saturating_sub(since_objects);
            j.since_checkpoint_bytes = j.since_checkpoint_bytes.saturating_sub(since_bytes);
        }
        let deleted_objects = self.delete_replaced_by_checkpoint(seq)?;
        Ok(Some(CheckpointReport {
            seq,
            parts: manifest.parts.len() as u32,
            bytes: manifest.bytes(),
            ops: manifest.ops,
            deleted_objects,
        }))
    }

    /// Creates a checkpoint object; one already there with the same bytes (an earlier attempt
    /// of this checkpoint) counts as written.
    fn put_checkpoint_object(&self, key: &reel_backend::Key, bytes: &[u8]) -> Result<()> {
        match self.backend.put(key, bytes, PutMode::Create) {
            Ok(()) => Ok(()),
            Err(reel_backend::BackendError::AlreadyExists(_)) => match self.backend.get(key) {
                Ok(existing) if existing == bytes => Ok(()),
                Ok(_) => Err(StoreError::Corrupt(format!(
                    "{key} in {} holds other bytes than this checkpoint",
                    self.backend.describe()
                ))),
                Err(e) => Err(StoreError::from_backend(e)),
            },
            Err(e) => Err(StoreError::from_backend(e)),
        }
    }

    /// Deletes, once checkpoint `seq`'s manifest is stored, the older checkpoints (manifests
    /// first, so none is left half) and the journal objects `..=seq`; returns how many.
    /// Debris of interrupted checkpoints older than `seq` goes too.
    fn delete_replaced_by_checkpoint(&self, seq: u64) -> Result<u64> {
        let backend = &self.backend;
        let listed = backend
            .list(checkpoint::CHECKPOINT_PREFIX)
            .map_err(StoreError::from_backend)?;
        let old: Vec<(checkpoint::CheckpointKey, &reel_backend::Key)> = listed
            .iter()
            .filter_map(|o| Some((checkpoint::parse_key(o.key.as_str())?, &o.key)))
            .filter(|(k, _)| k.seq() < seq)
            .collect();
        let mut deleted = 0;
        let manifests_first = old
            .iter()
            .filter(|(k, _)| matches!(k, checkpoint::CheckpointKey::Manifest { .. }))
            .chain(
                old.iter()
                    .filter(|(k, _)| matches!(k, checkpoint::CheckpointKey::Part { .. })),
            );
        for (_, key) in manifests_first {
            backend.delete(key).map_err(StoreError::from_backend)?;
            deleted += 1;
        }
        let mut journals: Vec<(u64, reel_backend::Key)> = backend
            .list(journal::JOURNAL_PREFIX)
            .map_err(StoreError::from_backend)?
            .into_iter()
            .filter_map(|o| Some((journal::parse_journal_key(o.key.as_str())?, o.key)))
            .filter(|(s, _)| *s <= seq)
            .collect();
        // Oldest first: an interrupted deletion leaves a run that still ends at `seq`.
        journals.sort_unstable_by_key(|j| j.0);
        for (_, key) in journals {
            backend.delete(&key).map_err(StoreError::from_backend)?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Records that this opening gives out pack ids below `floor` (`catalog::META_PACK_ID_FLOOR`),
    /// durably in the catalog and in the journal. Not flushed to the bucket even at durability
    /// `bucket`: nothing acknowledged rests on it, and a write-back cache uploads this journal
    /// object before any pack queued after it, so no pack of this opening reaches the bucket
    /// without the floor that covers it.
    /// The chunker parameters ride along (every opening, so a catalog recovered from the journal
    /// has them however old its base is).
    fn reserve_pack_ids(&self, floor: u64) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        {
            let mut meta = txn.open_table(META)?;
            meta.insert(catalog::META_PACK_ID_FLOOR, floor)?;
            catalog::put_chunker(&mut meta, self.config.chunker)?;
        }
        if self.config.journal {
            self.journal([
                journal::Op::RaisePackIdFloor(floor),
                journal::Op::SetChunker(self.config.chunker),
            ]);
            let seq = self.write_journal()?;
            txn.open_table(META)?
                .insert(catalog::META_JOURNAL_SEQ, seq)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Records catalog changes for the next journal object. Called while holding the write
    /// transaction that makes them, before its commit, so ops are in commit order.
    /// Once the pending ops reach `journal::PIECE_BYTES` they are written as a piece of the
    /// current group, so that a durable commit uploads only what came after (the sync tail on
    /// object storage). A failed piece stays staged; the next piece or the durable commit
    /// writes it again first and reports the error.
    pub(crate) fn journal(&self, ops: impl IntoIterator<Item = journal::Op>) {
        if self.config.journal {
            let mut j = self.journal.lock();
            for op in ops {
                journal::append_op(&mut j.raw, &op);
                j.count += 1;
            }
            if j.raw.len() >= self.config.journal_piece_bytes {
                // An error leaves the piece staged; the durable commit retries and reports it.
                let _ = self.write_journal_piece(&mut j, false);
            }
        }
    }

    /// Writes the pending ops as the last piece of the current group (a durable commit);
    /// returns the last sequence number in the back end.
    fn write_journal(&self) -> Result<u64> {
        let mut j = self.journal.lock();
        self.write_journal_piece(&mut j, true)
    }

    /// Writes the pending ops as the next journal object, ending the group if `last`. A failed
    /// put leaves the object staged, and the next call writes those same bytes again before
    /// anything newer, so a sequence number never names two contents.
    fn write_journal_piece(&self, j: &mut JournalState, last: bool) -> Result<u64> {
        if let Some((seq, bytes, ends_group)) = j.staged.take() {
            if let Err(e) = self.put_journal(seq, &bytes) {
                j.staged = Some((seq, bytes, ends_group));
                return Err(e);
            }
            j.seq = seq;
            j.group_open = !ends_group;
            j.since_checkpoint_objects += 1;
            j.since_checkpoint_bytes += bytes.len() as u64;
        }
        // Nothing to write, unless a group written in pieces must be ended (if empty).
        if j.count == 0 && !(last && j.group_open) {
            return Ok(j.seq);
        }
        let seq = j.seq + 1;
        let piece = journal::Piece {
            first: !j.group_open,
            last,
        };
        let bytes = journal::encode_raw(seq, &j.raw, j.count, piece);
        j.raw.clear();
        j.count = 0;
        if let Err(e) = self.put_journal(seq, &bytes) {
            j.staged = Some((seq, bytes, last));
            return Err(e);
        }
        j.seq = seq;
        j.group_open = !last;
        j.since_checkpoint_objects += 1;
        j.since_checkpoint_bytes += bytes.len() as u64;
        Ok(seq)
    }

    fn put_journal(&self, seq: u64, bytes: &[u8]) -> Result<()> {
        let key = journal::journal_key(seq);
        match self.backend.put(&key, bytes, PutMode::Create) {
            Ok(()) => Ok(()),
            Err(reel_backend::BackendError::AlreadyExists(_)) => {
                // Our own earlier attempt may have landed after reporting an error; anything
                // else is another writer's: this node no longer owns the store.
                match self.backend.get(&key) {
                    Ok(existing) if existing == bytes => Ok(()),
                    _ => {
                        let why = format!(
                            "catalog journal {key} was written by another node: this node no \
                             longer owns the store in {}",
                            self.backend.describe()
                        );
                        self.stopped.lock().get_or_insert_with(|| why.clone());
                        Err(StoreError::Stopped(why))
                    }
                }
            }
            Err(e) => Err(StoreError::from_backend(e)),
        }
    }

    /// Where chunk `id` is stored, sealing open packs if it is still being built.
    pub(crate) fn locate(&self, id: &ChunkId) -> Result<ChunkLoc> {
        if let Some(loc) = self.cache.lock().get(id) {
            return Ok(loc);
        }
        if let Some(loc) = self.lookup_catalog(id)? {
            // A restore reads a pack's chunks in order: one lookup serves the rest of it.
            self.warm_cache(loc.pack);
            return Ok(loc);
        }
        if self.pending.lock().contains(id) {
            // Read-after-write: the pack may be stored and waiting to be indexed.
            self.index_queued();
            if let Some(loc) = self.lookup_catalog(id)? {
                return Ok(loc);
            }
            // Or not sealed yet: store it now.
            self.seal_and_store_all()?;
            if let Some(loc) = self.lookup_catalog(id)? {
                return Ok(loc);
            }
        }
        Err(StoreError::Corrupt(format!(
            "chunk {id} is referenced but not stored"
        )))
    }

    /// The blobs holding chunks `ids`, with every chunk hash-checked, and where each chunk is
    /// in its blob. Chunks not yet checked in their cached blob are hashed in one batch
    /// (`multihash`), each at most once while its blob stays cached.
    ///
    /// The lookups are batched too: one lock of the locality cache for all the ids, then one of
    /// the blob cache. The locality cache is far larger than the CPU's caches and its keys are
    /// random, so every lookup misses; taking a lock between lookups (an atomic, a fence on
    /// x86) kept those misses from overlapping.
    pub(crate) fn read_chunks(&self, ids: &[ChunkId]) -> Result<Vec<(Arc<Blob>, ChunkLoc)>> {
        let cached: Vec<Option<ChunkLoc>> = {
            let cache = self.cache.lock();
            ids.iter().map(|id| cache.get(id)).collect()
        };
        let locs = ids
            .iter()
            .zip(cached)
            .map(|(id, loc)| loc.map_or_else(|| self.locate(id), Ok))
            .collect::<Result<Vec<ChunkLoc>>>()?;
        let cached_blobs: Vec<Option<Arc<Blob>>> = {
            let mut blob_cache = self.blob_cache.lock();
            locs.iter()
                .map(|loc| blob_cache.get(&(loc.pack, loc.blob_offset)))
                .collect()
        };
        let mut fetched: Vec<(Arc<Blob>, ChunkLoc)> = Vec::with_capacity(locs.len());
        for (loc, cached) in locs.into_iter().zip(cached_blobs) {
            let blob = match (cached, fetched.last()) {
                (Some(blob), _) => blob,
                // Neighbours usually share a blob: load it once for all of them.
                (None, Some((blob, prev)))
                    if (prev.pack, prev.blob_offset) == (loc.pack, loc.blob_offset) =>
                {
                    blob.clone()
                }
                (None, _) => self.load_blob(&loc)?,
            };
            fetched.push((blob, loc));
        }
        let mut unchecked: Vec<(usize, &[u8])> = Vec::new();
        for (i, (blob, loc)) in fetched.iter().enumerate() {
            if blob.whole_checked || blob.verified.lock().contains(&loc.offset) {
                continue;
            }
            let end = loc.offset as usize + loc.len as usize;
            let bytes = blob.data.get(loc.offset as usize..end).ok_or_else(|| {
                StoreError::Corrupt(format!("chunk {} lies outside its blob", ids[i]))
            })?;
            unchecked.push((i, bytes));
        }
        if !unchecked.is_empty() {
            let inputs: Vec<&[u8]> = unchecked.iter().map(|&(_, bytes)| bytes).collect();
            let mut hashes = Vec::with_capacity(inputs.len());
            crate::multihash::hash_all(&inputs, &mut hashes);
            for (&(i, _), hash) in unchecked.iter().zip(&hashes) {
                let (blob, loc) = &fetched[i];
                if *hash != ids[i] {
                    return Err(StoreError::Corrupt(format!(
                        "chunk {} in pack {} does not match its hash",
                        ids[i], loc.pack
                    )));
                }
                blob.verified.lock().insert(loc.offset);
            }
        }
        Ok(fetched)
    }

    /// The blob `loc` points into, from the blob cache or fetched and decoded (and then
    /// cached); its chunks are not hash-checked here ([`Inner::read_chunks`] does).
    fn load_blob(&self, loc: &ChunkLoc) -> Result<Arc<Blob>> {
        let key = (loc.pack, loc.blob_offset);
        if let Some(blob) = self.blob_cache.lock().get(&key) {
            return Ok(blob);
        }
        let (backend, pack_object, id_inside) = self.pack_object(loc.pack)?;
        let stored = backend
            .get_range(
                &pack_object,
                loc.blob_offset..loc.blob_offset + u64::from(loc.blob_stored),
            )
            .map_err(pack_read_error)?;
        let at = format::BlobAt {
            pack: id_inside,
            offset: loc.blob_offset,
        };
        let decoded =
            format::decode_blob_owned(loc.codec, stored, loc.blob_raw, at).map_err(|e| {
                StoreError::Corrupt(format!(
                    "pack {} blob at {}: {e}",
                    loc.pack, loc.blob_offset
                ))
            })?;
        if decoded.checksum_ok == Some(false) {
            // Damaged (or not where it was written): its chunks are checked one by one below,
            // so the undamaged ones are still served and the damaged ones refused.
            tracing::warn!(
                pack = loc.pack,
                blob = loc.blob_offset,
                "blob fails its checksum; checking its chunks by hash"
            );
        }
        let blob = Arc::new(Blob {
            data: decoded.data.into(),
            whole_checked: decoded.checksum_ok == Some(true),
            verified: Mutex::new(HashSet::new()),
        });
        let budget = self.read_cache_budget();
        self.blob_cache.lock().insert(key, blob.clone(), budget);
        Ok(blob)
    }

    /// [`StoreConfig::read_cache_per_stream`] for each open stream. Lock order: a stream's
    /// state, then the stream map (the caller may hold its stream's lock).
    fn read_cache_budget(&self) -> usize {
        let open = self
            .streams
            .lock()
            .values()
            .filter(|s| s.strong_count() > 0)
            .count();
        self.config
            .read_cache_per_stream
            .saturating_mul(open.clamp(1, READ_CACHE_STREAMS_MAX))
    }

    /// A row's entries as chunk references, spans expanded (each checked to cover its length).
    pub(crate) fn expand(&self, entries: &[format::Entry]) -> Result<Vec<format::ChunkRef>> {
        let mut out = Vec::with_capacity(entries.len());
        // One snapshot and one opening of the span tables for all the entries' spans.
        let mut spans = None;
        for e in entries {
            match e {
                format::Entry::Chunk(r) => out.push(*r),
                format::Entry::Span { id, len } => {
                    let spans = match &mut spans {
                        Some(s) => s,
                        None => spans.insert(crate::spans::read(&self.db.begin_read()?)?),
                    };
                    out.extend(crate::spans::span_refs(spans, *id, *len)?);
                }
            }
        }
        Ok(out)
    }

    pub(crate) fn drop_caches(&self) {
        self.cache.lock().clear();
        self.blob_cache.lock().clear();
    }

    pub(crate) fn register_stream(
        &self,
        id: StreamId,
        state: &Arc<Mutex<StreamState>>,
    ) -> Result<()> {
        let mut streams = self.streams.lock();
        if streams.get(&id).is_some_and(|w| w.strong_count() > 0) {
            return Err(StoreError::InUse(id.0));
        }
        streams.retain(|_, w| w.strong_count() > 0);
        streams.insert(id, Arc::downgrade(state));
        Ok(())
    }
}

/// Where [`Inner::locate_many`] found a chunk.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Located {
    /// Its place, from its pack's table of contents.
    At(ChunkLoc),
    /// In this pack (its names say so), whose table of contents is only in the bucket.
    InPack(u64),
    /// Not indexed, or its pack's table of contents could not be read.
    Missing,
}

#[cfg(test)]
mod record_commit_tests {
    use std::sync::Arc;

    use reel_backend::{Backend, LocalBackend};

    use super::*;
    use crate::StreamId;
    use crate::test_support::{noise, read_stream};

    fn open(dir: &Path) -> ChunkStore {
        let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&dir.join("objects")).unwrap());
        ChunkStore::open(&dir.join("catalog"), backend, StoreConfig::default()).unwrap()
    }

    fn packs(store: &ChunkStore) -> usize {
        store.backend().list("packs/").unwrap().len()
    }

    /// CLOCK: a blob read again since it came in survives the next eviction; blobs read once
    /// leave in the order they came; the budget holds.
    #[test]
    fn the_read_cache_keeps_the_blobs_read_again() {
        let blob = || {
            Arc::new(Blob {
                data: vec![0; 100].into(),
                whole_checked: false,
                verified: Mutex::new(HashSet::new()),
            })
        };
        let mut cache = BlobCache::default();
        for k in 0..3 {
            cache.insert((k, 0), blob(), 300);
        }
        assert!(cache.get(&(0, 0)).is_some());
        cache.insert((3, 0), blob(), 300);
        let held = |c: &BlobCache| {
            let mut keys: Vec<u64> = c.map.keys().map(|k| k.0).collect();
            keys.sort_unstable();
            keys
        };
        assert_eq!(
            held(&cache),
            [0, 2, 3],
            "1 was read once and is the oldest such"
        );
        cache.insert((4, 0), blob(), 300);
        assert_eq!(held(&cache), [0, 3, 4]);
        // 0 went round behind 3; with its second chance used it leaves after 3.
        cache.insert((5, 0), blob(), 300);
        assert_eq!(held(&cache), [0, 4, 5]);
        cache.insert((6, 0), blob(), 300);
        assert_eq!(held(&cache), [4, 5, 6]);
        assert_eq!(cache.bytes, 300);
        // Inserting a key again replaces it and counts it once.
        cache.insert((6, 0), blob(), 300);
        assert_eq!((held(&cache), cache.bytes), (vec![4, 5, 6], 300));
    }

    /// The blobs a read of `stream` leaves in the read cache: (whole_checked, chunks checked
    /// by hash) for each.
    fn cached_blobs(store: &ChunkStore) -> Vec<(bool, usize)> {
        let cache = store.inner.blob_cache.lock();
        cache
            .map
            .values()
            .map(|(b, _)| (b.whole_checked, b.verified.lock().len()))
            .collect()
    }

    /// Pack format 2 blobs are checked once, by their checksum, and their chunks are not
    /// hashed on read; format-1 blobs (no checksum) are still read, each chunk checked by its
    /// hash; and a blob whose checksum is damaged but whose data is not still serves it, each
    /// chunk checked by its hash instead.
    #[test]
    fn reads_check_blobs_by_checksum_and_fall_back_to_chunk_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let text = |seed: u64, len: usize| -> Vec<u8> {
            (0..len as u64)
                .map(|i| b"abcdefgh"[((i * seed) >> 7) as usize % 8] ^ (i % 251) as u8)
                .collect()
        };
        let write = |stream: u64, seed: u64| -> Vec<u8> {
            let s = store.open_stream(StreamId(stream)).unwrap();
            let data: Vec<u8> = (0..4).flat_map(|r| text(seed * 10 + r, 100_000)).collect();
            for record in data.chunks(100_000) {
                s.append_record(record).unwrap();
            }
            s.sync().unwrap();
            data
        };
        store.inner.write_format_1.store(true, Ordering::Relaxed);
        let old = write(1, 1);
        store.inner.write_format_1.store(false, Ordering::Relaxed);
        let new = write(2, 2);
        assert_eq!(packs(&store), 2);

        store.inner.drop_caches();
        assert_eq!(read_stream(&store, 1), old);
        let blobs = cached_blobs(&store);
        assert!(!blobs.is_empty());
        assert!(
            blobs.iter().all(|&(whole, hashed)| !whole && hashed > 0),
            "format-1 blobs are checked chunk by chunk: {blobs:?}"
        );
        store.inner.drop_caches();
        assert_eq!(read_stream(&store, 2), new);
        let blobs = cached_blobs(&store);
        assert!(
            blobs.iter().all(|&(whole, hashed)| whole && hashed == 0),
            "format-2 blobs are checked whole, no chunk hashed: {blobs:?}"
        );

        // Damage the checksum (only) of every blob of stream 2's pack.
        drop(store);
        let mut pack_files: Vec<_> = std::fs::read_dir(dir.path().join("objects/packs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        pack_files.sort();
        let newest = pack_files.last().unwrap();
        let mut bytes = std::fs::read(newest).unwrap();
        let (_, trailer) = format::decode_pack(&bytes).unwrap();
        for blob in &trailer.blobs {
            assert!(blob.codec.is_checked());
            let last = (blob.offset + u64::from(blob.stored)) as usize - 1;
            bytes[last] ^= 0x40;
        }
        std::fs::write(newest, &bytes).unwrap();
        let store = open(dir.path());
        assert_eq!(read_stream(&store, 2), new, "the data itself is intact");
        let blobs = cached_blobs(&store);
        assert!(
            blobs.iter().all(|&(whole, hashed)| !whole && hashed > 0),
            "blobs failing their checksum are checked chunk by chunk: {blobs:?}"
        );
        assert_eq!(read_stream(&store, 1), old);
    }

    #[test]
    fn records_commit_durably_only_when_no_pack_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        // Idle: the record is made durable without a sync.
        store.put_record(b"a/1", Some(b"one")).unwrap();
        assert!(store.commit_records().unwrap());
        store.abandon();
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.record(b"a/1").unwrap().as_deref(), Some(&b"one"[..]));

        // A writer with flushed rows in an open pack: nothing is sealed, nothing committed.
        let stream = store.open_stream(StreamId(7)).unwrap();
        stream.append(&noise(1 << 20, 3)).unwrap();
        stream.flush().unwrap();
        let before = packs(&store);
        store
            .put_records(&[(b"a/2".to_vec(), Some(b"two".to_vec()))])
            .unwrap();
        assert!(!store.commit_records().unwrap());
        assert_eq!(packs(&store), before, "no pack was sealed for the record");
        // The writer's own sync makes both durable.
        stream.sync().unwrap();
        store
            .put_records(&[(b"a/3".to_vec(), Some(b"three".to_vec()))])
            .unwrap();
        assert!(
            store.commit_records().unwrap(),
            "nothing pending after the sync"
        );
        store.abandon();
        drop(stream);
        drop(store);
        let store = open(dir.path());
        assert!(store.record(b"a/2").unwrap().is_some());
        assert!(store.record(b"a/3").unwrap().is_some());
        assert_eq!(store.streams().unwrap(), vec![(StreamId(7), 1 << 20)]);
        assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
    }

    #[test]
    fn a_catalog_left_half_created_by_a_killed_first_start_is_started_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = dir.path().join("catalog");
        std::fs::create_dir_all(&catalog).unwrap();
        // What redb leaves when killed after sizing a new file, before writing its header.
        std::fs::write(catalog.join("catalog.redb.new"), vec![0u8; 1 << 20]).unwrap();
        let store = open(dir.path());
        store.put_record(b"k", Some(b"v")).unwrap();
        store.sync().unwrap();
        drop(store);
        assert!(!catalog.join("catalog.redb.new").exists());
        assert_eq!(
            open(dir.path()).record(b"k").unwrap().as_deref(),
            Some(&b"v"[..])
        );
        // The same bytes as the catalog itself are refused, not silently replaced: a catalog
        // that exists may hold commits.
        std::fs::write(catalog.join("catalog.redb"), vec![0u8; 1 << 20]).unwrap();
        let backend: Arc<dyn Backend> =
            Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
        assert!(ChunkStore::open(&catalog, backend, StoreConfig::default()).is_err());
    }

    #[test]
    fn records_page_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for i in 0..20u32 {
            store
                .put_record(format!("log/{i:04}").as_bytes(), Some(b"x"))
                .unwrap();
        }
        store.put_record(b"loh/0", Some(b"after")).unwrap();
        store.put_record(b"lof/0", Some(b"before")).unwrap();
        let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<String> {
            v.into_iter()
                .map(|(k, _)| String::from_utf8(k).unwrap())
                .collect()
        };
        assert_eq!(
            keys(store.records_rev(b"log/", None, 3).unwrap()),
            ["log/0019", "log/0018", "log/0017"]
        );
        assert_eq!(
            keys(store.records_rev(b"log/", Some(b"log/0002"), 5).unwrap()),
            ["log/0001", "log/0000"]
        );
        assert!(store.records_rev(b"nope/", None, 5).unwrap().is_empty());
    }
}

#[cfg(test)]
mod pack_owner_tests {
    use std::sync::Arc;

    use reel_backend::{Backend, MemoryBackend};

    use super::*;
    use crate::StreamId;

    #[test]
    fn each_stored_pack_names_the_stream_that_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let config = StoreConfig {
            pack_target: 64 << 10,
            ..StoreConfig::default()
        };
        let store = ChunkStore::open(dir.path(), backend, config).unwrap();
        for s in [3u64, 8] {
            let stream = store.open_stream(StreamId(s)).unwrap();
            let mut x = s | 1;
            let data: Vec<u8> = (0..300_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            stream.append_record(&data).unwrap();
            stream.sync().unwrap();
        }
        let keys: Vec<String> = store
            .backend()
            .list("packs/")
            .unwrap()
            .into_iter()
            .map(|o| o.key.as_str().to_string())
            .collect();
        let mut owners: Vec<u64> = keys
            .iter()
            .map(|k| store.pack_owner(k).expect("an owner for every pack").0)
            .collect();
        owners.dedup();
        assert_eq!(owners, [3, 8], "packs are numbered in write order");
        assert_eq!(
            store.pack_owner("catalog/journal/0000000000000001.jrnl"),
            None
        );
        store.retain_pack_owners(&mut |k| k == keys[0]);
        assert!(store.pack_owner(&keys[0]).is_some());
        assert_eq!(store.pack_owner(&keys[1]), None);
    }

    /// Records appended as shared bytes (the SCSI Data-Out buffers) are stored, named and read
    /// back exactly as copied ones, large (hash threads) and small (the stream's own chunker).
    #[test]
    fn shared_records_are_stored_as_copied_ones_are() {
        let records: Vec<Vec<u8>> = [300_000, 100, 65_536, 1_000, 262_144]
            .into_iter()
            .zip(1u64..)
            .map(|(n, seed)| crate::test_support::noise(n, seed))
            .collect();
        let mut streams = Vec::new();
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let store = ChunkStore::open(dir.path(), backend, StoreConfig::default()).unwrap();
        for (s, shared) in [(1u64, false), (2, true)] {
            let stream = store.open_stream(StreamId(s)).unwrap();
            for r in &records {
                if shared {
                    stream
                        .append_record_shared(bytes::Bytes::from(r.clone()))
                        .unwrap();
                } else {
                    stream.append_record(r).unwrap();
                }
            }
            stream.sync().unwrap();
            streams.push(stream);
        }
        let all = records.concat();
        for stream in &streams {
            let mut back = Vec::new();
            stream.read_at_append(0, all.len(), &mut back).unwrap();
            assert!(
                back == all,
                "stream {} reads back what was written",
                stream.id().0
            );
        }
        // The second stream stored nothing new: the same records cut the same way.
        let usage = store
            .usage(&[StreamId(2)], crate::Exclusive::Count)
            .unwrap();
        assert_eq!(usage.exclusive.map(|e| e.unique_bytes), Some(0));
    }
}

#[cfg(test)]
mod index_batch_tests {
    use std::ops::Range;
    use std::sync::Arc;

    use parking_lot::{Condvar, Mutex};
    use reel_backend::{Backend, Key, MemoryBackend, ObjectMeta};

    use super::*;
    use crate::StreamId;
    use crate::stream::Stream;
    use crate::test_support::noise;

    /// A memory back end whose pack puts wait while the gate is shut: the test decides when
    /// the uploads end (timing only; every operation is the memory back end's).
    #[derive(Default)]
    struct Gated {
        inner: MemoryBackend,
        shut: Mutex<bool>,
        opened: Condvar,
    }

    impl Gated {
        fn set_shut(&self, shut: bool) {
            *self.shut.lock() = shut;
            self.opened.notify_all();
        }
    }

    impl Backend for Gated {
        fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> reel_backend::Result<()> {
            if key.as_str().starts_with("packs/") {
                let mut shut = self.shut.lock();
                while *shut {
                    self.opened.wait(&mut shut);
                }
            }
            self.inner.put(key, data, mode)
        }
        fn get(&self, key: &Key) -> reel_backend::Result<Vec<u8>> {
            self.inner.get(key)
        }
        fn get_range(&self, key: &Key, range: Range<u64>) -> reel_backend::Result<Vec<u8>> {
            self.inner.get_range(key, range)
        }
        fn list(&self, prefix: &str) -> reel_backend::Result<Vec<ObjectMeta>> {
            self.inner.list(prefix)
        }
        fn delete(&self, key: &Key) -> reel_backend::Result<()> {
            self.inner.delete(key)
        }
        fn describe(&self) -> String {
            "gated memory".into()
        }
    }

    /// Small packs, and an upload queue that holds all of them while the gate is shut.
    fn config() -> StoreConfig {
        StoreConfig {
            pack_target: 64 << 10,
            upload_queue: 64,
            ..StoreConfig::default()
        }
    }

    /// Distinct records (`noise` gives seeds 2k and 2k + 1 the same bytes).
    fn records(n: u64, len: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| noise(len, 2 * i + 1)).collect()
    }

    /// Appends `records` to stream 1 while pack puts wait at the gate, then flushes: the
    /// flush finds no pack stored, so it indexes none.
    fn write_behind_the_gate(store: &ChunkStore, gate: &Gated, records: &[Vec<u8>]) -> Stream {
        let stream = store.open_stream(StreamId(1)).unwrap();
        gate.set_shut(true);
        for r in records {
            stream.append_record(r).unwrap();
        }
        stream.flush().unwrap();
        assert_eq!(store.inner.index_commits.load(Ordering::Relaxed), 0);
        gate.set_shut(false);
        stream
    }

    fn assert_reads_back(store: &ChunkStore, records: &[Vec<u8>]) {
        let stream = store.open_stream(StreamId(1)).unwrap();
        let mut offset = 0u64;
        for r in records {
            let mut back = vec![0; r.len()];
            stream.read_at(offset, &mut back).unwrap();
            assert!(back == *r, "record at {offset} read back wrong");
            offset += r.len() as u64;
        }
    }

    fn stored_packs(store: &ChunkStore) -> usize {
        store.backend().list("packs/").unwrap().len()
    }

    /// A small index is indexed in small batches (short bursts of CPU), a large one in the
    /// largest (each of its many leaves rebuilt once for more rows).
    #[test]
    fn index_batches_are_a_32nd_of_the_index_between_32_and_128_ki_chunks() {
        assert_eq!(index_batch_chunks(0), 32 << 10);
        assert_eq!(index_batch_chunks(1 << 20), 32 << 10);
        assert_eq!(index_batch_chunks(2 << 20), 64 << 10);
        assert_eq!(index_batch_chunks((4 << 20) - 32), (128 << 10) - 1);
        assert_eq!(index_batch_chunks(4 << 20), 128 << 10);
        assert_eq!(index_batch_chunks(u64::MAX), 128 << 10);
    }

    /// Stored packs wait in a queue and are named and indexed several to a catalog
    /// transaction (at the latest by the next flush or sync). A read of a chunk in a queued
    /// pack indexes the queue instead of sealing the open pack. After a sync and a reopen
    /// every chunk is named and indexed.
    #[test]
    fn stored_packs_are_indexed_several_to_a_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Gated::default());
        let store = ChunkStore::open(dir.path(), gate.clone(), config()).unwrap();
        let inner = &store.inner;
        let open_pack = || {
            let builders = inner.builders.lock();
            builders
                .iter()
                .filter_map(Weak::upgrade)
                .any(|b| b.lock().is_open())
        };
        // Records that do not fill packs exactly: one pack stays open.
        let records = records(40, 100_000);
        let stream = write_behind_the_gate(&store, &gate, &records);
        let start = std::time::Instant::now();
        while inner.uploads.lock().in_flight != inner.index_queue.lock().packs.len() {
            assert!(start.elapsed().as_secs() < 30, "uploads never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let queued = inner.index_queue.lock().packs.len();
        assert!(queued >= 8, "only {queued} packs queued");
        assert_eq!(inner.index_commits.load(Ordering::Relaxed), 0);
        assert!(open_pack());

        let mut first = vec![0; records[0].len()];
        stream.read_at(0, &mut first).unwrap();
        assert!(first == records[0], "a queued pack's chunk read back wrong");
        assert!(open_pack(), "the read sealed the open pack");
        assert!(inner.index_queue.lock().packs.is_empty());
        assert_eq!(inner.index_commits.load(Ordering::Relaxed), 1);

        stream.sync().unwrap();
        let packs = stored_packs(&store);
        let commits = inner.index_commits.load(Ordering::Relaxed);
        assert!(
            commits == 2 && packs == queued + 1,
            "{commits} index transactions for {packs} packs"
        );
        let chunks = store.stats().unwrap().chunks;
        // The next batch is sized by the rows indexed (`index_batch_chunks`), counted in the
        // batch's transaction and, after a restart, at open.
        assert_eq!(inner.index_rows.load(Ordering::Relaxed), chunks);
        drop(stream);
        drop(store);

        let store = ChunkStore::open(dir.path(), gate, config()).unwrap();
        assert_eq!(store.stats().unwrap().chunks, chunks);
        assert_eq!(store.inner.index_rows.load(Ordering::Relaxed), chunks);
        assert_eq!(stored_packs(&store), packs, "a stored pack was orphaned");
        assert_reads_back(&store, &records);
    }

    /// New chunks are indexed in the main table while it is small, then in the recent one,
    /// whose runs merge into the main one once it holds a sixteenth of the main one's rows
    /// (`chunk_index::merge_step`; in unit tests a floor of 16 rows, the recent table from
    /// 1 Ki main rows): every chunk is indexed once, in one of the two, and the store reads
    /// back, scrubs clean and reopens so.
    #[test]
    fn new_chunks_go_to_the_recent_table_once_the_main_one_is_large_and_merge_back() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = ChunkStore::open(dir.path(), backend.clone(), config()).unwrap();
        let stream = store.open_stream(StreamId(1)).unwrap();
        let records = records(40, 150_000);
        let mut sizes = Vec::new();
        for r in &records {
            stream.append_record(r).unwrap();
            stream.sync().unwrap();
            let txn = store.inner.db.begin_read().unwrap();
            let index = crate::chunk_index::KeyRows::read(&txn).unwrap();
            let (main, recent) = (index.main.len().unwrap(), index.recent.len().unwrap());
            assert_eq!(main + recent, store.stats().unwrap().chunks);
            sizes.push((main, recent));
        }
        drop(stream);
        let chunks = store.stats().unwrap().chunks;
        assert!(chunks > 2500, "{chunks} chunks");
        // A small main table takes new rows itself; past 1 Ki rows the recent one does, and
        // the main one grows by merges (a sync that grew it while recent rows were waiting).
        let limit = crate::chunk_index::recent_from(crate::chunk_index::MERGE_FLOOR);
        assert_eq!(sizes[0].1, 0, "{sizes:?}");
        assert!(
            sizes
                .iter()
                .all(|(main, recent)| *recent == 0 || *main >= limit)
        );
        let merges = sizes
            .windows(2)
            .filter(|w| w[0].1 > 0 && w[1].0 > w[0].0)
            .count();
        assert!(merges > 2, "{sizes:?}");
        let (main, recent) = *sizes.last().unwrap();
        assert!(main > limit && recent > 0 && recent * 8 < main, "{sizes:?}");
        assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
        assert_reads_back(&store, &records);
        let rows = crate::chunk_index::rows(&store.inner.db.begin_read().unwrap()).unwrap();
        drop(store);
        let store = ChunkStore::open(dir.path(), backend, config()).unwrap();
        assert_eq!(store.stats().unwrap().chunks, chunks);
        assert_eq!(
            crate::chunk_index::rows(&store.inner.db.begin_read().unwrap()).unwrap(),
            rows
        );
        assert_reads_back(&store, &records);
    }

    /// A flush names chunks of packs still queued for indexing; dropping the store then (no
    /// sync) makes them durable with the packs indexed: everything flushed reads back.
    #[test]
    fn flushed_records_in_queued_packs_survive_a_drop() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Gated::default());
        let store = ChunkStore::open(dir.path(), gate.clone(), config()).unwrap();
        let records = records(8, 256 << 10);
        drop(write_behind_the_gate(&store, &gate, &records));
        drop(store);
        let store = ChunkStore::open(dir.path(), gate, config()).unwrap();
        assert_reads_back(&store, &records);
    }
}

#[cfg(test)]
mod format_4_upgrade_tests {
    use std::sync::Arc;

    use reel_backend::{Backend, MemoryBackend, PutMode};

    use super::*;
    use crate::StreamId;
    use crate::test_support::noise;

    fn config() -> StoreConfig {
        StoreConfig {
            journal: true,
            pack_target: 256 << 10,
            ..StoreConfig::default()
        }
    }

    fn contents(store: &ChunkStore) -> Vec<(StreamId, Vec<u8>)> {
        let mut out = Vec::new();
        for (id, len) in store.streams().unwrap() {
            let s = store.open_stream(id).unwrap();
            let mut data = vec![0; len as usize];
            s.read_at(0, &mut data).unwrap();
            out.push((id, data));
        }
        out
    }

    /// Streams 1 and 2, synced: a record they share and one of their own each.
    fn write_two_streams(store: &ChunkStore) {
        let common = noise(600_000, 1);
        for (s, seed) in [(1u64, 2u64), (2, 3)] {
            let stream = store.open_stream(StreamId(s)).unwrap();
            stream.append_record(&common).unwrap();
            stream.append_record(&noise(300_000, seed)).unwrap();
            stream.sync().unwrap();
        }
    }

    /// The rows format 4 kept: every indexed chunk's whole id and location.
    fn legacy_rows(store: &ChunkStore) -> Vec<([u8; 32], Vec<u8>)> {
        let inner = &store.inner;
        let mut rows = Vec::new();
        let packs: Vec<u64> = {
            let txn = inner.db.begin_read().unwrap();
            let t = txn.open_table(PACKS).unwrap();
            t.iter().unwrap().map(|r| r.unwrap().0.value()).collect()
        };
        for pack in packs {
            for (id, loc) in inner.read_pack_toc(pack).unwrap() {
                if id != format::TOMBSTONE {
                    rows.push((id.0, loc.encode().to_vec()));
                }
            }
        }
        rows
    }

    /// A format-9 catalog (the index keyed by 8 bytes to 64-bit packs, in the table of the
    /// same name) comes up with format 10's index rebuilt from the names: the same rows by
    /// the same rule, the same data, a clean scrub, and the old table gone.
    #[test]
    fn a_format_9_index_is_rebuilt_from_the_names() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let config = || StoreConfig {
            pack_target: 256 << 10,
            ..StoreConfig::default()
        };
        let store = ChunkStore::open(dir.path(), backend.clone(), config()).unwrap();
        write_two_streams(&store);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let before = contents(&store);
        // Format 9's rows: each indexed chunk's first 8 bytes → its pack, from the names.
        let mut legacy_rows = Vec::new();
        {
            let txn = store.inner.db.begin_read().unwrap();
            let index = crate::chunk_index::KeyRows::read(&txn).unwrap();
            let full = txn.open_table(crate::chunk_index::INDEX_FULL).unwrap();
            assert!(full.is_empty().unwrap());
            crate::pack_names::for_each(
                &txn.open_table(crate::pack_names::PACK_NAMES).unwrap(),
                |pack, names| {
                    for id in format::decode_pack_ids(names)? {
                        if id != format::TOMBSTONE
                            && crate::chunk_index::indexed_at(&index, &full, &id, pack)?
                        {
                            legacy_rows.push((crate::chunk_index::prefix(&id), pack));
                        }
                    }
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(legacy_rows.len() as u64, index.len().unwrap());
        }
        assert!(legacy_rows.len() > 300, "{} chunks", legacy_rows.len());
        drop(store);
        {
            let db = Database::create(dir.path().join("catalog.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            txn.delete_table(crate::chunk_index::INDEX).unwrap();
            txn.delete_table(crate::chunk_index::RECENT).unwrap();
            {
                let mut old = txn.open_table(crate::chunk_index::LEGACY_INDEX).unwrap();
                for (prefix, pack) in &legacy_rows {
                    old.insert(prefix, pack).unwrap();
                }
                txn.open_table(META)
                    .unwrap()
                    .insert(catalog::META_FORMAT, 9)
                    .unwrap();
            }
            txn.commit().unwrap();
        }

        let store = ChunkStore::open(dir.path(), backend, config()).unwrap();
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&store), before);
        assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
        let txn = store.inner.db.begin_read().unwrap();
        assert_eq!(
            txn.open_table(META)
                .unwrap()
                .get(catalog::META_FORMAT)
                .unwrap()
                .unwrap()
                .value(),
            catalog::CATALOG_VERSION
        );
        // The rebuild merged every row into the main table.
        let index = crate::chunk_index::KeyRows::read(&txn).unwrap();
        assert_eq!(index.main.len().unwrap(), legacy_rows.len() as u64);
        assert!(index.recent.is_empty().unwrap());
        drop((index, txn));

        // Packs of this opening are numbered past 2^32 and still indexed by 6-byte keys.
        let stream = store.open_stream(StreamId(3)).unwrap();
        stream.append_record(&noise(300_000, 4)).unwrap();
        stream.sync().unwrap();
        let txn = store.inner.db.begin_read().unwrap();
        let packs: Vec<u64> = txn
            .open_table(PACKS)
            .unwrap()
            .iter()
            .unwrap()
            .map(|r| r.unwrap().0.value())
            .collect();
        assert!(packs.iter().any(|p| *p > u64::from(u32::MAX)), "{packs:?}");
        let full = txn.open_table(crate::chunk_index::INDEX_FULL).unwrap();
        assert!(full.is_empty().unwrap());
        let index = crate::chunk_index::KeyRows::read(&txn).unwrap();
        assert!(index.len().unwrap() > legacy_rows.len() as u64);
    }

    /// A format-4 catalog (chunk rows by whole id) and a bucket whose journal objects are of
    /// version 7 (which carried those rows, and whose pack-names ops did not index) both come
    /// up as the same store: the rows become the derived index on open.
    #[test]
    fn a_format_4_catalog_and_a_version_7_journal_are_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        write_two_streams(&store);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let expected = contents(&store);
        let chunks = store.stats().unwrap().chunks;
        assert!(chunks > 100);
        let rows = legacy_rows(&store);
        assert_eq!(rows.len() as u64, chunks);
        let mut legacy_ops: Vec<journal::Op> = rows
            .iter()
            .map(|(id, loc)| journal::Op::PutChunk(*id, loc.clone()))
            .collect();
        legacy_ops
            .extend(journal::dump(&store.inner.db.database(), journal::Form::AsWritten).unwrap());
        drop(store);

        // The catalog as format 4 left it.
        {
            let db = Database::create(dir.path().join("a/catalog.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut legacy = txn.open_table(catalog::LEGACY_CHUNKS).unwrap();
                for (id, loc) in &rows {
                    legacy.insert(id, loc.as_slice()).unwrap();
                }
                txn.open_table(crate::chunk_index::INDEX)
                    .unwrap()
                    .retain(|_, _| false)
                    .unwrap();
                txn.open_table(crate::chunk_index::RECENT)
                    .unwrap()
                    .retain(|_, _| false)
                    .unwrap();
                txn.open_table(META)
                    .unwrap()
                    .insert(catalog::META_FORMAT, 4)
                    .unwrap();
                // Names whole, one row per pack, as formats 5 and before kept them.
                move_names_to_legacy_rows(&db, &txn);
            }
            txn.commit().unwrap();
        }
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        let (placed, total) = placed_bodies(&store);
        assert!(
            placed > 0 && placed == total,
            "{placed} of {total} bodies placed"
        );
        assert_eq!(store.stats().unwrap().chunks, chunks);
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&store), expected);
        drop(store);

        // A bucket of version-7 journal objects: the packs, and the whole catalog as one group.
        let old_bucket = Arc::new(MemoryBackend::new());
        for obj in backend.list("packs/").unwrap() {
            let bytes = backend.get(&obj.key).unwrap();
            old_bucket.put(&obj.key, &bytes, PutMode::Create).unwrap();
        }
        let mut object = journal::encode(1, &legacy_ops);
        object[8..10].copy_from_slice(&7u16.to_le_bytes());
        let body = object.len() - 32;
        let hash = *blake3::hash(&object[..body]).as_bytes();
        object[body..].copy_from_slice(&hash);
        let ops = journal::decode(&object, 1).unwrap();
        assert!(
            ops.iter()
                .any(|op| matches!(op, journal::Op::LegacyPutPackIds(..))),
            "a version-7 object's pack names are read as names only"
        );
        old_bucket
            .put(&journal::journal_key(1), &object, PutMode::Create)
            .unwrap();
        let recovered =
            ChunkStore::open(&dir.path().join("b"), old_bucket.clone(), config()).unwrap();
        assert_eq!(recovered.stats().unwrap().chunks, chunks);
        assert_eq!(recovered.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&recovered), expected);
    }

    /// Moves every pack's names from parts back into whole rows (`catalog::LEGACY_PACK_IDS`),
    /// and every span into one row each (`catalog::LEGACY_SPANS`).
    fn move_names_to_legacy_rows(db: &Database, txn: &redb::WriteTransaction) {
        let mut named = Vec::new();
        {
            let t = txn.open_table(crate::pack_names::PACK_NAMES).unwrap();
            crate::pack_names::for_each(&t, |p, n| {
                named.push((p, n.to_vec()));
                Ok(())
            })
            .unwrap();
        }
        assert!(!named.is_empty());
        txn.open_table(crate::pack_names::PACK_NAMES)
            .unwrap()
            .retain(|_, _| false)
            .unwrap();
        let mut legacy = txn.open_table(catalog::LEGACY_PACK_IDS).unwrap();
        for (p, n) in &named {
            legacy.insert(*p, n.as_slice()).unwrap();
        }
        // And spans as written (formats before 8 place none), one row each (formats 6 and
        // before). `txn` has not changed them: the last commit's are the same.
        let mut spans = Vec::new();
        crate::spans::read(&db.begin_read().unwrap())
            .unwrap()
            .for_each(|id, body| {
                spans.push((*id, body.to_vec()));
                Ok(())
            })
            .unwrap();
        assert!(!spans.is_empty());
        crate::spans::write(txn).unwrap().clear().unwrap();
        let mut legacy = txn.open_table(catalog::LEGACY_SPANS).unwrap();
        for (id, body) in &spans {
            legacy.insert(id, body.as_slice()).unwrap();
        }
    }

    /// How many span bodies are stored placed, of how many flat or placed ones (bodies of
    /// pieces are never placed).
    fn placed_bodies(store: &ChunkStore) -> (usize, usize) {
        let txn = store.inner.db.begin_read().unwrap();
        let bodies = txn.open_table(crate::spans::SPAN_BODIES).unwrap();
        let mut placed = 0;
        let mut total = 0;
        for row in bodies.iter().unwrap() {
            let (key, part) = row.unwrap();
            let part = part.value();
            if key.value().1 == 0 && (format::span_is_flat(part) || format::span_is_placed(part)) {
                total += 1;
                placed += usize::from(format::span_is_placed(part));
            }
        }
        (placed, total)
    }

    /// A stream's sync seals its pack before its flush, so the flush places every span body
    /// and the durable commit rewrites none; a flush followed by a store sync (the order
    /// before) stored the bodies of chunks in the open pack as written for the durable commit
    /// to rewrite placed, leaving the pages they took free in the catalog file.
    #[test]
    fn a_stream_sync_places_every_body_in_its_flush() {
        let dir = tempfile::tempdir().unwrap();
        let placed_late = |name: &str, stream_sync: bool| {
            let store = ChunkStore::open(
                &dir.path().join(name),
                Arc::new(MemoryBackend::new()),
                StoreConfig::default(),
            )
            .unwrap();
            let stream = store.open_stream(StreamId(1)).unwrap();
            for seed in 0..24 {
                stream.append_record(&noise(256 << 10, seed)).unwrap();
            }
            if stream_sync {
                stream.sync().unwrap();
            } else {
                stream.flush().unwrap();
                store.sync().unwrap();
            }
            let (placed, flat) = placed_bodies(&store);
            assert!(
                flat > 0 && placed == flat,
                "{name}: {placed} of {flat} bodies placed"
            );
            (store.inner.bodies_placed_late.load(Ordering::Relaxed), flat)
        };
        let (late, flat) = placed_late("flush, then store sync", false);
        assert_eq!(
            late, flat as u64,
            "the open pack's bodies wait for the durable commit"
        );
        assert_eq!(placed_late("stream sync", true).0, 0);
    }

    /// Streams 1 to 3, each a shared record, one of its own and the shared record's start,
    /// synced: bodies placed in their flushes, chunks shared across packs.
    fn three_streams_sharing_a_record(store: &ChunkStore) {
        let common = noise(700_000, 1);
        for s in 1..=3u64 {
            let stream = store.open_stream(StreamId(s)).unwrap();
            stream.append_record(&common).unwrap();
            stream.append_record(&noise(500_000, 10 + s)).unwrap();
            stream.append_record(&common[..300_000]).unwrap();
            stream.sync().unwrap();
        }
    }

    /// Deletes stream 1 and reclaims: the packs its own record leaves partly dead are
    /// rewritten, their names retired.
    fn delete_stream_1_and_reclaim(store: &ChunkStore) {
        store.delete_stream(StreamId(1)).unwrap();
        store.reclaim(0.99, &mut |_, _| {}).unwrap();
        store.sync().unwrap();
    }

    fn assert_scrubs_clean(store: &ChunkStore) {
        let scrub = store.scrub(&mut |_, _| {}).unwrap();
        assert!(
            scrub.damage.is_empty()
                && scrub.bad_chunks.is_empty()
                && scrub.index_problems.is_empty(),
            "{scrub:?}"
        );
    }

    /// The span ops of every journal object in `backend`: (placed, as written).
    fn journaled_span_bodies(backend: &MemoryBackend) -> (usize, usize) {
        let (mut placed, mut written) = (0, 0);
        for obj in backend.list("catalog/journal/").unwrap() {
            let seq = journal::parse_journal_key(obj.key.as_str()).unwrap();
            let bytes = backend.get(&obj.key).unwrap();
            for op in journal::decode_piece(&bytes, seq).unwrap().0 {
                if let journal::Op::PutSpan(_, body) = op {
                    if format::span_is_placed(&body) {
                        placed += 1;
                    } else {
                        written += 1;
                    }
                }
            }
        }
        (placed, written)
    }

    /// The journal carries a span body as the catalog stores it: placed when its flush placed
    /// it (a few bytes per run of chunks instead of a 32-byte id per chunk), and a catalog
    /// rebuilt from the bucket alone stores the same bytes and reads the same data, also after
    /// a reclaim moved the chunks such bodies name (their names are kept as retired names).
    #[test]
    fn span_bodies_are_journaled_placed_and_a_rebuilt_catalog_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        three_streams_sharing_a_record(&store);
        let (placed, written) = journaled_span_bodies(&backend);
        assert!(
            placed > 0 && placed >= written,
            "journaled bodies: {placed} placed, {written} as written"
        );
        // Placed bodies naming the packs the reclaim rewrites read their names from the retired
        // table, locally and after a rebuild.
        delete_stream_1_and_reclaim(&store);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let expected = contents(&store);
        drop(store);

        let rebuilt = ChunkStore::open(&dir.path().join("b"), backend.clone(), config()).unwrap();
        assert_eq!(rebuilt.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&rebuilt), expected);
        let (placed_rebuilt, _) = placed_bodies(&rebuilt);
        assert!(placed_rebuilt > 0);
        let retired = |store: &ChunkStore| {
            let txn = store.inner.db.begin_read().unwrap();
            let t = txn.open_table(crate::pack_names::RETIRED_NAMES).unwrap();
            t.len().unwrap()
        };
        assert!(
            retired(&rebuilt) > 0,
            "the reclaim retired names placed bodies read"
        );
        assert_scrubs_clean(&rebuilt);
    }

    /// Extent rows and bodies of pieces are stored compact (spans named by 8-byte prefixes,
    /// `efficiency.md` §40); a catalog rebuilt from the journal reads them the same, and a
    /// damaged prefix is caught by the row's check: the read fails and scrub names the row,
    /// never another span's bytes served.
    #[test]
    fn rows_are_compact_and_a_damaged_prefix_is_never_read_as_another_span() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        let blocks: Vec<Vec<u8>> = (0..8).map(|b| noise(256 << 10, 100 + b)).collect();
        let first = store.open_stream(StreamId(1)).unwrap();
        for b in &blocks {
            first.append_record(b).unwrap();
        }
        first.sync().unwrap();
        // The same blocks in 1 MiB records, in another order: records in pieces.
        let second = store.open_stream(StreamId(2)).unwrap();
        for order in [[3, 1, 0, 2], [7, 5, 4, 6], [2, 6, 1, 5]] {
            second
                .append_record(&order.map(|b| blocks[b].as_slice()).concat())
                .unwrap();
        }
        second.sync().unwrap();
        drop((first, second));
        let first_bytes = |table: &str| -> Vec<u8> {
            let txn = store.inner.db.begin_read().unwrap();
            if table == "extents" {
                let t = txn.open_table(EXTENTS).unwrap();
                t.iter().unwrap().map(|r| r.unwrap().1.value()[0]).collect()
            } else {
                let t = txn.open_table(crate::spans::SPAN_BODIES).unwrap();
                t.iter()
                    .unwrap()
                    .filter(|r| r.as_ref().unwrap().0.value().1 == 0)
                    .map(|r| r.unwrap().1.value()[0])
                    .collect()
            }
        };
        let rows = first_bytes("extents");
        assert!(!rows.is_empty() && rows.iter().all(|&v| v == 4), "{rows:?}");
        let pieces_rows = first_bytes("bodies").iter().filter(|&&v| v == 4).count();
        assert!(
            pieces_rows >= 3,
            "{pieces_rows} bodies of pieces stored compact"
        );
        let expected = contents(&store);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let rebuilt = ChunkStore::open(&dir.path().join("b"), backend.clone(), config()).unwrap();
        assert_eq!(rebuilt.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&rebuilt), expected);
        assert_scrubs_clean(&rebuilt);
        drop(rebuilt);

        // Flip a bit of the first span prefix of stream 2's row: version, count, check, kind.
        {
            let txn = store.inner.db.begin_write().unwrap();
            {
                let mut t = txn.open_table(EXTENTS).unwrap();
                let mut row = t.get((2, 0)).unwrap().unwrap().value().to_vec();
                assert_eq!((row[0], row[1], row[10]), (4, 3, 1), "three span entries");
                row[12] ^= 0x10;
                t.insert((2, 0), row.as_slice()).unwrap();
            }
            txn.commit().unwrap();
        }
        store.inner.drop_caches();
        let mut data = vec![0; 1 << 20];
        let err = store
            .open_stream(StreamId(2))
            .and_then(|s| s.read_at(0, &mut data))
            .expect_err("a damaged row was read");
        assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
        let scrub = store.scrub(&mut |_, _| {}).unwrap();
        assert!(
            scrub
                .damage
                .iter()
                .any(|d| d.stream == StreamId(2) && d.reason.contains("extent row unreadable")),
            "{:?}",
            scrub.damage
        );
    }

    /// The ops of every part of the checkpoint of `seq` in `backend`.
    fn checkpoint_ops(backend: &MemoryBackend, seq: u64) -> Vec<journal::Op> {
        let manifest = checkpoint::Manifest::decode(
            &backend.get(&checkpoint::manifest_key(seq)).unwrap(),
            seq,
        )
        .unwrap();
        let mut ops = Vec::new();
        for part in 0..manifest.parts.len() as u32 {
            let bytes = backend.get(&checkpoint::part_key(seq, part)).unwrap();
            ops.extend(journal::decode(&bytes, u64::from(part)).unwrap());
        }
        ops
    }

    /// A checkpoint carries span bodies as the catalog stores them (placed) with the retired
    /// names such bodies read after a reclaim, and a catalog restored from it stores the same
    /// bytes: it reads the same data, places nothing on open, and scrubs clean.
    #[test]
    fn a_checkpoint_carries_placed_bodies_and_the_retired_names_they_read() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let config = || StoreConfig {
            checkpoint_min_bytes: u64::MAX,
            ..config()
        };
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        three_streams_sharing_a_record(&store);
        delete_stream_1_and_reclaim(&store);
        let report = store
            .checkpoint()
            .unwrap()
            .expect("a checkpoint was written");
        let fingerprint = store.catalog_fingerprint().unwrap();
        let expected = contents(&store);
        let (placed_here, flat_here) = placed_bodies(&store);
        drop(store);

        let ops = checkpoint_ops(&backend, report.seq);
        let placed = ops
            .iter()
            .filter(|op| matches!(op, journal::Op::PutSpan(_, b) if format::span_is_placed(b)))
            .count();
        let retired = ops
            .iter()
            .filter(|op| matches!(op, journal::Op::PutRetiredNames(..)))
            .count();
        assert_eq!(placed, placed_here, "every placed body as placed");
        assert!(
            placed > 0 && retired > 0,
            "{placed} placed bodies, {retired} retired names"
        );

        let restored = ChunkStore::open(&dir.path().join("b"), backend.clone(), config()).unwrap();
        assert_eq!(restored.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&restored), expected);
        assert_eq!(placed_bodies(&restored), (placed_here, flat_here));
        assert_eq!(restored.inner.bodies_placed_late.load(Ordering::Relaxed), 0);
        assert_scrubs_clean(&restored);
    }

    /// A format-5 catalog (names whole per pack, a row per span) opens as format 8 with the
    /// same contents, its bodies placed.
    #[test]
    fn a_format_5_catalog_is_upgraded_to_name_and_span_parts() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let config = || StoreConfig {
            journal: false,
            ..StoreConfig::default()
        };
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        for (s, seed) in [(1u64, 12u64), (2, 13)] {
            let stream = store.open_stream(StreamId(s)).unwrap();
            stream.append_record(&noise(400_000, seed)).unwrap();
            stream.append_record(&noise(300_000, 99)).unwrap();
            stream.sync().unwrap();
        }
        let fingerprint = store.catalog_fingerprint().unwrap();
        let expected = contents(&store);
        let chunks = store.stats().unwrap().chunks;
        drop(store);
        {
            let db = Database::create(dir.path().join("a/catalog.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            move_names_to_legacy_rows(&db, &txn);
            txn.open_table(META)
                .unwrap()
                .insert(catalog::META_FORMAT, 5)
                .unwrap();
            txn.commit().unwrap();
        }
        let store = ChunkStore::open(&dir.path().join("a"), backend.clone(), config()).unwrap();
        assert_eq!(store.stats().unwrap().chunks, chunks);
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(contents(&store), expected);
        assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
        {
            let txn = store.inner.db.begin_read().unwrap();
            assert!(
                txn.open_table(catalog::LEGACY_PACK_IDS)
                    .unwrap()
                    .is_empty()
                    .unwrap()
            );
            assert!(
                txn.open_table(catalog::LEGACY_SPANS)
                    .unwrap()
                    .is_empty()
                    .unwrap()
            );
            let version = txn
                .open_table(META)
                .unwrap()
                .get(catalog::META_FORMAT)
                .unwrap()
                .unwrap()
                .value();
            assert_eq!(version, catalog::CATALOG_VERSION);
        }
    }
}

#[cfg(test)]
mod catalog_compaction_tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use reel_backend::MemoryBackend;

    use super::*;
    use crate::StreamId;
    use crate::catalog_file::NotCompacted;
    use crate::test_support::{noise, read_stream};

    fn open(dir: &Path, backend: &Arc<MemoryBackend>, idle: Option<Duration>) -> ChunkStore {
        let config = StoreConfig {
            catalog_compact_idle: idle,
            ..StoreConfig::default()
        };
        ChunkStore::open(dir, backend.clone(), config).unwrap()
    }

    /// Writes streams 1–3 (96 MiB of distinct records), deletes 2 and 3 and reclaims their
    /// packs: their rows leave the tables, their pages stay in the file. Returns stream 1's.
    fn write_three_keep_one(store: &ChunkStore) -> Vec<u8> {
        let mut kept = Vec::new();
        for s in 1..=3u64 {
            let stream = store.open_stream(StreamId(s)).unwrap();
            for i in 0..128u64 {
                let record = noise(256 << 10, 2 * (s * 1000 + i) + 1);
                stream.append_record(&record).unwrap();
                if s == 1 {
                    kept.extend_from_slice(&record);
                }
            }
            stream.sync().unwrap();
        }
        store.delete_stream(StreamId(2)).unwrap();
        store.delete_stream(StreamId(3)).unwrap();
        store.reclaim(0.5, &mut |_, _| {}).unwrap();
        store.sync().unwrap();
        kept
    }

    #[test]
    fn an_idle_catalog_gives_its_spare_pages_back_and_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = open(dir.path(), &backend, Some(Duration::from_millis(300)));
        let kept = write_three_keep_one(&store);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let tables = store.catalog_space().unwrap().total_bytes();
        let before = store.inner.db.file_bytes();
        assert!(
            before > tables + tables / 5,
            "the test needs spare pages: file {before} B, tables {tables} B"
        );

        // The compactor looks every 150 ms and acts after 300 ms without a transaction.
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.inner.catalog_compactions.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "no compaction within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let after = store.inner.db.file_bytes();
        assert!(
            after < before && after <= tables + tables / 10 + (1 << 20),
            "file {before} -> {after} B for {tables} B of tables"
        );
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(read_stream(&store, 1), kept);
        assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());

        // Once per spell of use: idle and untouched, it does not compact again.
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(store.inner.catalog_compactions.load(Ordering::Relaxed), 1);

        // And the store reopens to the same catalog.
        drop(store);
        let store = open(dir.path(), &backend, None);
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(read_stream(&store, 1), kept);
    }

    #[test]
    fn compaction_waits_for_readers_writers_and_the_next_durable_commit() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = open(dir.path(), &backend, None);
        let db = &store.inner.db;
        write_three_keep_one(&store);
        // Used within the idle period.
        assert_eq!(
            db.try_compact(CompactMoment::Idle(Duration::from_secs(3600)))
                .unwrap()
                .unwrap_err(),
            NotCompacted::Busy
        );
        // A reader's snapshot (a checkpoint's, a scrub's) keeps the pages it sees.
        let reader = db.begin_read().unwrap();
        assert_eq!(
            db.try_compact(CompactMoment::Idle(Duration::ZERO))
                .unwrap()
                .unwrap_err(),
            NotCompacted::Busy
        );
        drop(reader);
        // A live write transaction might commit under it.
        let writer = db.begin_write().unwrap();
        assert_eq!(
            db.try_compact(CompactMoment::Idle(Duration::ZERO))
                .unwrap()
                .unwrap_err(),
            NotCompacted::Busy
        );
        drop(writer);

        // A flush is a non-durable commit: compacting would make it durable before its
        // stream's sync, so it waits for one.
        let stream = store.open_stream(StreamId(4)).unwrap();
        stream.append_record(&noise(1 << 20, 9001)).unwrap();
        stream.flush().unwrap();
        assert_eq!(
            db.try_compact(CompactMoment::Idle(Duration::ZERO))
                .unwrap()
                .unwrap_err(),
            NotCompacted::Pending
        );
        // Not compacted, so the next look (nothing begun since) does not count as done.
        stream.sync().unwrap();
        let before = db.file_bytes();
        let c = db
            .try_compact(CompactMoment::Idle(Duration::ZERO))
            .unwrap()
            .unwrap();
        assert_eq!(c.before, before);
        assert!(c.after < c.before, "{c:?}");
        assert_eq!(
            db.try_compact(CompactMoment::Idle(Duration::ZERO))
                .unwrap()
                .unwrap_err(),
            NotCompacted::Unused
        );
    }

    /// A stop leaves spare pages under its 1 MiB floor; an operator's `reel compact` takes them
    /// (used since the last look or not), and the catalog reads the same after a reopen.
    #[test]
    fn an_operator_compacts_what_a_stop_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = open(dir.path(), &backend, None);
        let stream = store.open_stream(StreamId(1)).unwrap();
        let mut kept = Vec::new();
        for i in 0..24u64 {
            let record = noise(64 << 10, 7000 + i);
            stream.append_record(&record).unwrap();
            stream.sync().unwrap();
            kept.extend_from_slice(&record);
        }
        drop(stream);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let tables = store.catalog_space().unwrap().total_bytes();
        let before = store.inner.db.file_bytes();
        assert!(
            before > tables + tables / 2,
            "{before} bytes for {tables} in tables"
        );
        assert_eq!(
            store.compact_catalog().unwrap().unwrap_err(),
            NotCompacted::Small
        );
        let c = store.compact_catalog_now().unwrap().unwrap();
        assert_eq!(c.before, before);
        assert!(c.after < c.before, "{c:?}");
        // Asked again at once: nothing more comes back.
        let _ = store.compact_catalog_now().unwrap();
        assert_eq!(store.inner.db.file_bytes(), c.after);
        drop(store);
        let store = open(dir.path(), &backend, None);
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(read_stream(&store, 1), kept);
    }

    /// The catalog file's size on disk, the store closed.
    fn file_on_disk(dir: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir.join("catalog.redb"))
            .unwrap()
            .blocks()
            * 512
    }

    #[test]
    fn closing_compacts_a_catalog_it_wrote_to_and_leaves_one_it_only_read() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(MemoryBackend::new());
        let store = open(dir.path(), &backend, None);
        let kept = write_three_keep_one(&store);
        let tables = store.catalog_space().unwrap().total_bytes();
        drop(store);
        let spared = file_on_disk(dir.path());
        assert!(
            spared > tables + tables / 5,
            "the test needs spare pages: file {spared} B, tables {tables} B"
        );

        // Opened and read only: closing neither walks the tables nor compacts.
        let store = open(dir.path(), &backend, Some(Duration::from_secs(3600)));
        assert_eq!(read_stream(&store, 1), kept);
        drop(store);
        let read_only = file_on_disk(dir.path());
        assert!(
            read_only <= spared && read_only > tables + tables / 5,
            "closing after reads only: file {spared} -> {read_only} B for {tables} B of tables"
        );

        // Written to in this opening: closing compacts.
        let store = open(dir.path(), &backend, Some(Duration::from_secs(3600)));
        let stream = store.open_stream(StreamId(9)).unwrap();
        stream.append_record(&noise(64 << 10, 77)).unwrap();
        stream.sync().unwrap();
        drop(stream);
        let fingerprint = store.catalog_fingerprint().unwrap();
        let tables = store.catalog_space().unwrap().total_bytes();
        drop(store);
        let after = file_on_disk(dir.path());
        assert!(
            after < read_only && after <= tables + tables / 10 + (1 << 20),
            "closing after a write: file {read_only} -> {after} B for {tables} B of tables"
        );
        let store = open(dir.path(), &backend, None);
        assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
        assert_eq!(read_stream(&store, 1), kept);
    }
}
