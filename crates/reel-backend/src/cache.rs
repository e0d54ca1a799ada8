//! [`WriteBackCache`]: a local, durable write-back cache in front of a slow remote back end (S3
//! in production), so ingest runs at local-disk speed and several uploads are in flight at once.
//!
//! # Design
//!
//! A put is written durably (temporary file, fsync, rename, directory fsync) into the cache
//! directory's *pending area* and appended to an in-memory FIFO *upload queue* under a sequence
//! number; then it returns: durability level `local`. Upload threads drain the queue into the
//! remote. [`Backend::flush`] waits until everything queued before it is in the remote: durability
//! level `bucket`. Deletes are queued the same way (a small pending entry with no data).
//!
//! The pending area is self-describing: file `pending/<seq:020>.put|.del` holds a header (magic,
//! kind and put mode, sequence, queue time, key, data length, data hash, header hash) followed by
//! the data. [`WriteBackCache::open`] re-queues every entry in sequence order; a damaged entry
//! makes `open` fail with an error naming the file, and a data hash mismatch found when an entry
//! is read for upload stops the cache, so nothing is ever uploaded wrong.
//!
//! # Invariants
//!
//! - **Ordering barrier.** A delete, and a put whose key starts with one of
//!   [`CacheConfig::barrier_prefixes`] (catalog journal objects), is a *barrier*: it starts only
//!   after every earlier item has completed, and no later item starts before it has completed.
//!   Between barriers, items upload in parallel and may overtake each other, except that two
//!   items for the same key never run at once or out of order. So the remote always holds every
//!   item before the last completed barrier: a journal object in the bucket implies that the
//!   packs put before it are there too, and a delete never overtakes an earlier put.
//! - **Durability.** `put`/`delete` return only once the pending entry is durable. An item leaves
//!   the pending area (by rename, then a directory fsync) only after the remote acknowledged it,
//!   and the next barrier or same-key item starts only after that, so a crash re-uploads at most
//!   items whose later successors have not started. Re-uploading a `Create` that an earlier,
//!   unacknowledged attempt already stored is recognised by comparing the remote bytes.
//! - **Capacity.** Pending bytes plus clean (cached, already uploaded or read) bytes stay within
//!   [`CacheConfig::capacity_bytes`]: clean data is evicted least recently used first; if the
//!   pending data alone would not fit, `put` waits for uploads (backpressure; writers wait, never
//!   fail). An object larger than the whole capacity is accepted when nothing else is pending.
//!   Sizes count object data only, not the per-entry headers.
//! - **Fencing.** An upload of a `Create` that finds the key already in the remote (with other
//!   bytes), or a key conflict in the remote, means another writer owns this key space: the cache
//!   stops for good (every later put, delete and flush fails, saying so; reads still work) and the
//!   pending entries stay on disk for an operator.
//! - **Transient failures** (`Io`, `NoSpace` from the remote) are retried with exponential
//!   backoff forever; they show in [`CacheStats`].
//!
//! # Reads
//!
//! Newest pending copy, else the clean cache, else the remote. Remote ranged reads fetch aligned
//! blocks of [`CacheConfig::read_block_bytes`] (clamped to the object size, learnt from uploads,
//! lists or the remote's `InvalidRange`) and keep them in the clean cache. The clean cache is not
//! durable: it is emptied on open.
//!
//! # What a crash leaves
//!
//! | Step | Left on disk after a crash | On the next open |
//! |---|---|---|
//! | put/delete writing its temporary file | `tmp/p<seq>` | deleted; the put had not returned |
//! | renamed into `pending/`, before the directory fsync | maybe a complete entry | re-queued if present (the put had not returned: either outcome is allowed) |
//! | put returned | a complete pending entry | re-queued in order |
//! | uploaded, before the entry left `pending/` | the entry | uploaded again (idempotent; a `Create` finding its own bytes counts as done) |
//! | entry renamed to `clean/` or `tmp/` | a clean copy or garbage | deleted (the clean cache starts empty) |

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::ops::Bound::{Included, Unbounded};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::local::{DIRECT_MIN, map_io, sync_dir, write_direct};
use crate::{
    Backend, BackendError, Key, MAX_KEY_LEN, ObjectMeta, PutMode, Result, check_range, lock,
};

/// When `put` asks the remote about a key it does not know locally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteCheck {
    /// Never: conflicts with objects the cache has not seen are found at upload time (and stop
    /// the cache, see the module docs).
    Never,
    /// A `Create` of a key under a barrier prefix first checks that the key is absent in the
    /// remote (one `get_range(key, 0..0)`), so a fenced node usually learns it at `put`.
    BarrierPrefixes,
    /// Every put checks the remote: a `Create` for the key, and every put for key conflicts
    /// (its ancestors and `key/`). Several requests per put; for tests and small deployments.
    Always,
}

/// Settings of a [`WriteBackCache`].
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Upper bound on pending plus clean bytes in the cache directory.
    pub capacity_bytes: u64,
    /// Uploads in flight at once (at least 1).
    pub upload_threads: usize,
    /// Block size of remote ranged reads kept in the clean cache (at least 1).
    pub read_block_bytes: u64,
    /// Blocks fetched ahead of a sequential reader (a restore reads each pack front to back),
    /// one ranged GET each, in parallel on as many threads: the reader then finds them in the
    /// clean cache instead of waiting for one GET after another. 0 turns read-ahead off.
    pub read_ahead_blocks: usize,
    /// Keys starting with one of these are ordering barriers (see the module docs).
    pub barrier_prefixes: Vec<String>,
    pub remote_check: RemoteCheck,
    /// First delay before retrying a failed upload; doubled per failure up to `retry_max`.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// Memory for copies of queued puts' bytes, so an upload need not read its entry back
    /// from disk (where it was written around the page cache): enough for every upload
    /// thread's pack and the next ones. Beyond it an upload reads its entry from disk; 0 makes
    /// every upload do so.
    pub upload_memory_bytes: u64,
    /// Memory for blocks just fetched (or read ahead), newest first: the reader a block was
    /// fetched for takes its pieces from memory, so the block's file is written around the
    /// page cache and not read back while a restore runs. 0 keeps none.
    pub read_memory_bytes: u64,
}

/// [`CacheConfig::upload_memory_bytes`] by default.
pub const DEFAULT_UPLOAD_MEMORY: u64 = 512 << 20;
/// [`CacheConfig::read_memory_bytes`] by default.
pub const DEFAULT_READ_MEMORY: u64 = 64 << 20;

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            capacity_bytes: 16 << 30,
            upload_threads: 4,
            read_block_bytes: 4 << 20,
            read_ahead_blocks: 4,
            barrier_prefixes: vec!["catalog/".to_string()],
            remote_check: RemoteCheck::BarrierPrefixes,
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(30),
            upload_memory_bytes: DEFAULT_UPLOAD_MEMORY,
            read_memory_bytes: DEFAULT_READ_MEMORY,
        }
    }
}

/// Counters and gauges for metrics and the console.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Data bytes of queued puts not yet in the remote.
    pub pending_bytes: u64,
    /// Queued puts and deletes not yet in the remote.
    pub pending_objects: u64,
    pub oldest_pending_age: Option<Duration>,
    pub clean_bytes: u64,
    pub uploaded_bytes: u64,
    pub uploaded_objects: u64,
    /// Remote read requests made for callers, and their bytes (read-ahead included).
    pub remote_gets: u64,
    pub remote_get_bytes: u64,
    /// Of those, the read-ahead's.
    pub read_ahead_gets: u64,
    /// Failed upload attempts that were retried.
    pub retries: u64,
    /// Of those, how many failed because the remote was full (`NoSpace`).
    pub no_space_retries: u64,
    /// Puts that had to wait for uploads to free capacity.
    pub blocked_puts: u64,
    pub last_error: Option<String>,
    /// Bytes held in memory: copies of queued puts for their uploads
    /// ([`CacheConfig::upload_memory_bytes`]) and blocks just fetched
    /// ([`CacheConfig::read_memory_bytes`]).
    pub upload_memory_bytes: u64,
    pub read_memory_bytes: u64,
    /// Why the cache stopped for good (fenced or a damaged entry), if it did.
    pub failed: Option<String>,
}

/// One queued item, as reported by [`WriteBackCache::pending`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingItem {
    pub key: Key,
    /// Data bytes (0 for a delete).
    pub bytes: u64,
    pub queued_at: SystemTime,
    pub delete: bool,
}

/// A write-back cache over a remote back end. See the module documentation.
pub struct WriteBackCache {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

struct Shared {
    remote: Arc<dyn Backend>,
    config: CacheConfig,
    dir: PathBuf,
    pending_dir: PathBuf,
    tmp_dir: PathBuf,
    clean_dir: PathBuf,
    state: Mutex<State>,
    /// Upload threads wait here for work, retry timers and shutdown.
    work: Condvar,
    /// Blocked puts, flushes and `close` wait here for items to complete.
    progress: Condvar,
    /// Read-ahead threads wait here for blocks to fetch, and shutdown.
    ahead_work: Condvar,
    /// Readers wait here for a block being read ahead to arrive.
    ahead_done: Condvar,
    /// Held (locked) for the cache's lifetime: one process per cache directory.
    _lock_file: File,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Put(PutMode, u64),
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemState {
    /// Sequence reserved, pending entry being written: invisible to readers, not uploadable.
    Writing,
    Queued,
    InFlight,
    /// Uploaded and renamed out of `pending/`; waiting for the directory fsync.
    Finishing,
}

struct Item {
    key: Key,
    op: Op,
    state: ItemState,
    path: PathBuf,
    queued_at: SystemTime,
    /// An earlier upload attempt may have stored the object (it failed ambiguously, or the
    /// item was recovered from disk).
    attempted: bool,
    /// A copy of a put's bytes, kept while [`CacheConfig::upload_memory_bytes`] allows, so the
    /// upload need not read the entry back from disk (where it was written around the page
    /// cache).
    data: Option<Arc<Vec<u8>>>,
}
/// Buffers kept in `State::spare_copies` at most, beyond the upload threads' count.
const SPARE_COPIES_EXTRA: usize = 2;

/// A file in the clean cache: object bytes `len` long at `offset` in `path`.
struct CleanFile {
    path: PathBuf,
    offset: u64,
    len: u64,
    tick: u64,
    /// A block just fetched, also in memory (see [`CacheConfig::read_memory_bytes`]).
    memory: Option<Arc<Vec<u8>>>,
}

/// Fetched blocks kept in memory at most, whatever their bytes (the queue of them also holds
/// stale entries of blocks since evicted).
const BLOCK_MEMORY_ENTRIES: usize = 1024;

#[derive(Default)]
struct CleanObject {
    whole: Option<CleanFile>,
    /// By block index.
    blocks: BTreeMap<u64, CleanFile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum CleanId {
    Whole(Key),
    Block(Key, u64),
}

#[derive(Default)]
struct State {
    queue: BTreeMap<u64, Item>,
    /// Sequences of queue items per key, oldest first.
    by_key: BTreeMap<Key, VecDeque<u64>>,
    next_seq: u64,
    pending_bytes: u64,
    /// Bytes held by items' `data`.
    memory_bytes: u64,
    /// Buffers of copies whose upload is done, for the next copies: a fresh buffer of a pack's
    /// size is a fresh mapping whose pages the kernel faults in and zeroes on every put.
    spare_copies: Vec<Vec<u8>>,
    /// Clean blocks holding `memory`, oldest first (entries of blocks since removed are
    /// skipped), and the bytes they hold.
    block_memory: VecDeque<(Key, u64)>,
    block_memory_bytes: u64,
    clean: HashMap<Key, CleanObject>,
    clean_bytes: u64,
    lru: BTreeMap<u64, CleanId>,
    tick: u64,
    next_file: u64,
    /// Objects known to exist in the remote, with their sizes.
    known: BTreeMap<Key, u64>,
    /// Remote reads in progress: id -> (key, stale). A local put or delete of the key makes
    /// them stale, so what they fetched is not cached.
    fetches: HashMap<u64, (Key, bool)>,
    next_fetch: u64,
    /// Bumped by every local mutation and completion; a list learns sizes only if unchanged.
    generation: u64,
    /// Targets of flushes in progress (sequence -> waiters): items at or below are not cancelled.
    flushes: BTreeMap<u64, usize>,
    /// Read-ahead: blocks queued or being fetched (readers of them wait), the queue with each
    /// object's size, and the last block each object was read at (to tell sequential reads).
    ahead_inflight: HashSet<(Key, u64)>,
    ahead_queue: VecDeque<(Key, u64, u64)>,
    last_block_read: HashMap<Key, u64>,
    failed: Option<String>,
    shutdown: bool,
    stats: CacheStats,
}

/// What the remote said about a key before a put, where asked (see [`RemoteCheck`]).
#[derive(Default)]
struct RemoteFacts {
    exists: bool,
    ancestors: Vec<String>,
    descendants: Vec<Key>,
}

impl RemoteFacts {
    /// Drops what the remote said exists of keys whose delete was queued when it was asked
    /// (`deleting`) and has since completed: the answer may predate the delete.
    fn forget_completed_deletes(&mut self, st: &State, key: &Key, deleting: &HashSet<Key>) {
        let gone = |k: &str| deleting.contains(k) && !st.by_key.contains_key(k);
        if gone(key.as_str()) {
            self.exists = false;
        }
        self.ancestors.retain(|a| !gone(a));
        self.descendants.retain(|d| !gone(d.as_str()));
    }
}

/// A located source of an object's bytes.
enum Source {
    Local { file: File, offset: u64, size: u64 },
    Deleted,
    Remote,
}

/// Most remote object sizes remembered (about 100 bytes each).
const KNOWN_MAX: usize = 1 << 20;

fn other(what: impl fmt::Display, msg: String) -> BackendError {
    BackendError::io(what, io::Error::other(msg))
}

fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

fn now_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl WriteBackCache {
    /// Opens (creating if needed) a cache in `dir` over `remote`, re-queues the pending entries
    /// left by an earlier run in their original order, and starts the upload threads.
    pub fn open(dir: &Path, remote: Arc<dyn Backend>, config: CacheConfig) -> Result<Self> {
        let bad_config = |msg: &str| {
            BackendError::io(
                dir.display(),
                io::Error::new(io::ErrorKind::InvalidInput, msg.to_string()),
            )
        };
        if config.upload_threads == 0 {
            return Err(bad_config("upload_threads must be at least 1"));
        }
        if config.read_block_bytes == 0 {
            return Err(bad_config("read_block_bytes must be at least 1"));
        }
        let err = |p: &Path| {
            let p = p.display().to_string();
            move |e| BackendError::io(p, e)
        };
        fs::create_dir_all(dir).map_err(err(dir))?;
        let lock_path = dir.join("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(err(&lock_path))?;
        let locked = crate::lock_file::lock_exclusive(&lock_file, crate::lock_file::LOCK_PATIENCE)
            .map_err(err(&lock_path))?;
        if !locked {
            return Err(other(
                lock_path.display(),
                "the write-back cache directory is in use by another process".to_string(),
            ));
        }
        let pending_dir = dir.join("pending");
        let tmp_dir = dir.join("tmp");
        let clean_dir = dir.join("clean");
        fs::create_dir_all(&pending_dir).map_err(err(&pending_dir))?;
        for d in [&tmp_dir, &clean_dir] {
            match fs::remove_dir_all(d) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(err(d)(e)),
                _ => {}
            }
            fs::create_dir(d).map_err(err(d))?;
        }
        sync_dir(dir).map_err(err(dir))?;

        let mut state = State::default();
        for (seq, entry, path) in recover(&pending_dir)? {
            let op = match entry.kind {
                EntryKind::Delete => Op::Delete,
                EntryKind::Put(mode) => Op::Put(mode, entry.data_len),
            };
            state.pending_bytes += entry.data_len;
            state
                .by_key
                .entry(entry.key.clone())
                .or_default()
                .push_back(seq);
            state.queue.insert(
                seq,
                Item {
                    key: entry.key,
                    op,
                    state: ItemState::Queued,
                    path,
                    queued_at: UNIX_EPOCH + Duration::from_nanos(entry.queued_at_nanos),
                    attempted: true,
                    data: None,
                },
            );
            state.next_seq = seq + 1;
        }
        let threads = config.upload_threads;
        let shared = Arc::new(Shared {
            remote,
            config,
            dir: dir.to_path_buf(),
            pending_dir,
            tmp_dir,
            clean_dir,
            state: Mutex::new(state),
            work: Condvar::new(),
            progress: Condvar::new(),
            ahead_work: Condvar::new(),
            ahead_done: Condvar::new(),
            _lock_file: lock_file,
        });
        let mut cache = WriteBackCache {
            shared,
            workers: Vec::new(),
        };
        for i in 0..threads {
            let shared = Arc::clone(&cache.shared);
            // Not `reel-upload-N`, the store's pack uploaders: profiles split by thread name.
            let handle = std::thread::Builder::new()
                .name(format!("reel-bucket-{i}"))
                .spawn(move || shared.worker())
                .map_err(|e| BackendError::io(dir.display(), e))?;
            cache.workers.push(handle);
        }
        for i in 0..cache.shared.config.read_ahead_blocks {
            let shared = Arc::clone(&cache.shared);
            let handle = std::thread::Builder::new()
                .name(format!("reel-readahead-{i}"))
                .spawn(move || shared.read_ahead_worker())
                .map_err(|e| BackendError::io(dir.display(), e))?;
            cache.workers.push(handle);
        }
        Ok(cache)
    }

    pub fn stats(&self) -> CacheStats {
        let st = self.shared.lock();
        let mut stats = st.stats.clone();
        stats.pending_bytes = st.pending_bytes;
        stats.pending_objects = st.queue.len() as u64;
        stats.oldest_pending_age = st
            .queue
            .values()
            .map(|i| i.queued_at)
            .min()
            .map(|t| t.elapsed().unwrap_or_default());
        stats.clean_bytes = st.clean_bytes;
        stats.upload_memory_bytes = st.memory_bytes;
        stats.read_memory_bytes = st.block_memory_bytes;
        stats.failed.clone_from(&st.failed);
        stats
    }

    /// Every queued item, in queue order.
    pub fn pending(&self) -> Vec<PendingItem> {
        let st = self.shared.lock();
        st.queue
            .values()
            .map(|i| PendingItem {
                key: i.key.clone(),
                bytes: match i.op {
                    Op::Put(_, size) => size,
                    Op::Delete => 0,
                },
                queued_at: i.queued_at,
                delete: i.op == Op::Delete,
            })
            .collect()
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Stops the cache cleanly: waits up to `timeout` for every queued item to reach the remote,
    /// then stops the upload threads. Returns whether the queue was empty (`false`: items stay
    /// pending on disk for the next open), or the error that stopped the cache.
    pub fn close(self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if let Some(reason) = &st.failed {
                return Err(stopped_error(&self.shared.dir.display(), reason));
            }
            if st.queue.is_empty() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            st = self
                .shared
                .progress
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for WriteBackCache {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        self.shared.progress.notify_all();
        self.shared.ahead_work.notify_all();
        self.shared.ahead_done.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn stopped_error(what: &dyn fmt::Display, reason: &str) -> BackendError {
    other(what, format!("write-back cache stopped: {reason}"))
}

impl State {
    /// The newest queue item for `key` that counts: readers skip every item still being written
    /// (`skip_writing_puts`), conflict checks only deletes being written (a put being written
    /// already reserves its key).
    fn last_op(&self, key: &str, skip_writing_puts: bool) -> Option<(u64, &Item)> {
        let seqs = self.by_key.get(key)?;
        seqs.iter()
            .rev()
            .map(|s| (*s, &self.queue[s]))
            .find(|(_, i)| {
                i.state != ItemState::Writing || (matches!(i.op, Op::Put(..)) && !skip_writing_puts)
            })
    }

    /// The keys among `key`, its ancestors and its descendants whose newest queued item is a
    /// delete.
    fn queued_deletes_around(&self, key: &Key) -> HashSet<Key> {
        let inside = format!("{key}/");
        let below = self
            .by_key
            .range::<str, _>((Included(inside.as_str()), Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.as_str().starts_with(&inside));
        let around = self.by_key.get_key_value(key.as_str()).map(|(k, _)| k);
        let above = key
            .ancestors()
            .filter_map(|a| self.by_key.get_key_value(a).map(|(k, _)| k));
        around
            .into_iter()
            .chain(above)
            .chain(below)
            .filter(|k| {
                self.last_op(k.as_str(), true)
                    .is_some_and(|(_, i)| i.op == Op::Delete)
            })
            .cloned()
            .collect()
    }

    /// Whether `key` exists, as far as a put's checks can tell: the queue decides, else what the
    /// cache knows of the remote, else what the remote said (`remote`).
    fn live(&self, key: &str, remote: bool) -> bool {
        match self.last_op(key, false) {
            Some((_, i)) => matches!(i.op, Op::Put(..)),
            None => remote || self.known.contains_key(key) || self.clean.contains_key(key),
        }
    }

    /// Records that `key` exists in the remote with `size` bytes. The map is bounded: past
    /// [`KNOWN_MAX`] entries the alphabetically first are forgotten (they are then checked
    /// against the remote as [`RemoteCheck`] says, or at upload).
    fn learn(&mut self, key: Key, size: u64) {
        self.known.insert(key, size);
        while self.known.len() > KNOWN_MAX {
            self.known.pop_first();
        }
    }

    fn touch(&mut self, id: &CleanId) {
        self.tick += 1;
        let tick = self.tick;
        let file = match id {
            CleanId::Whole(k) => self.clean.get_mut(k).and_then(|o| o.whole.as_mut()),
            CleanId::Block(k, b) => self.clean.get_mut(k).and_then(|o| o.blocks.get_mut(b)),
        };
        if let Some(f) = file {
            self.lru.remove(&f.tick);
            f.tick = tick;
            self.lru.insert(tick, id.clone());
        }
    }

    fn remove_clean(&mut self, id: &CleanId) {
        let Some(obj) = self.clean.get_mut(match id {
            CleanId::Whole(k) | CleanId::Block(k, _) => k,
        }) else {
            return;
        };
        let file = match id {
            CleanId::Whole(_) => obj.whole.take(),
            CleanId::Block(_, b) => obj.blocks.remove(b),
        };
        let empty = obj.whole.is_none() && obj.blocks.is_empty();
        if empty && let CleanId::Whole(k) | CleanId::Block(k, _) = id {
            self.clean.remove(k);
        }
        if let Some(f) = file {
            self.lru.remove(&f.tick);
            self.clean_bytes -= f.len;
            if let Some(m) = &f.memory {
                self.block_memory_bytes -= m.len() as u64;
            }
            // Readers that opened the file keep reading it; the name is garbage now.
            let _ = fs::remove_file(&f.path);
        }
    }

    fn drop_clean_key(&mut self, key: &Key) {
        let ids: Vec<CleanId> = match self.clean.get(key) {
            None => return,
            Some(o) => o
                .whole
                .iter()
                .map(|_| CleanId::Whole(key.clone()))
                .chain(o.blocks.keys().map(|b| CleanId::Block(key.clone(), *b)))
                .collect(),
        };
        for id in ids {
            self.remove_clean(&id);
        }
    }

    /// Evicts clean data, least recently used first, until `extra` more bytes fit. Returns
    /// whether they fit.
    fn make_room(&mut self, extra: u64, capacity: u64) -> bool {
        while self.pending_bytes + self.clean_bytes + extra > capacity {
            let Some((tick, id)) = self.lru.first_key_value().map(|(t, id)| (*t, id.clone()))
            else {
                break;
            };
            self.remove_clean(&id);
            // remove_clean drops the LRU entry; never loop on an inconsistent one.
            self.lru.remove(&tick);
        }
        self.pending_bytes + self.clean_bytes + extra <= capacity
    }

    fn add_clean(&mut self, id: CleanId, path: PathBuf, offset: u64, len: u64, capacity: u64) {
        if !self.make_room(len, capacity) {
            let _ = fs::remove_file(&path);
            return;
        }
        self.remove_clean(&id);
        self.tick += 1;
        let file = CleanFile {
            path,
            offset,
            len,
            tick: self.tick,
            memory: None,
        };
        self.lru.insert(self.tick, id.clone());
        self.clean_bytes += len;
        let obj = self.clean.entry(match &id {
            CleanId::Whole(k) | CleanId::Block(k, _) => k.clone(),
        });
        let obj = obj.or_default();
        match id {
            CleanId::Whole(_) => obj.whole = Some(file),
            CleanId::Block(_, b) => {
                obj.blocks.insert(b, file);
            }
        }
    }

    /// Keeps a copy of clean block `b` of `key` (just added) in memory, dropping the oldest
    /// copies beyond `limit` bytes ([`CacheConfig::read_memory_bytes`]).
    fn hold_block(&mut self, key: &Key, b: u64, data: Arc<Vec<u8>>, limit: u64) {
        let Some(file) = self.clean.get_mut(key).and_then(|o| o.blocks.get_mut(&b)) else {
            return;
        };
        let len = data.len() as u64;
        if let Some(old) = file.memory.replace(data) {
            self.block_memory_bytes -= old.len() as u64;
        }
        self.block_memory_bytes += len;
        self.block_memory.push_back((key.clone(), b));
        // The queue is bounded too: blocks evicted from the cache leave stale entries.
        while self.block_memory_bytes > limit || self.block_memory.len() > BLOCK_MEMORY_ENTRIES {
            let Some((k, oldest)) = self.block_memory.pop_front() else {
                break;
            };
            let dropped = self
                .clean
                .get_mut(&k)
                .and_then(|o| o.blocks.get_mut(&oldest))
                .and_then(|f| f.memory.take());
            if let Some(m) = dropped {
                self.block_memory_bytes -= m.len() as u64;
            }
        }
    }

    fn new_file_name(&mut self) -> String {
        self.next_file += 1;
        format!("f{}", self.next_file)
    }

    fn begin_fetch(&mut self, key: &Key) -> u64 {
        self.next_fetch += 1;
        self.fetches.insert(self.next_fetch, (key.clone(), false));
        self.next_fetch
    }

    /// Ends a fetch; true if it is still current (no local put or delete of its key meanwhile).
    fn end_fetch(&mut self, id: u64) -> bool {
        self.fetches.remove(&id).is_some_and(|(_, stale)| !stale)
    }

    fn fetch_current(&self, id: u64) -> bool {
        self.fetches.get(&id).is_some_and(|(_, stale)| !stale)
    }

    fn remove_item(&mut self, seq: u64) -> Option<Item> {
        let item = self.queue.remove(&seq)?;
        if let Some(q) = self.by_key.get_mut(&item.key) {
            q.retain(|s| *s != seq);
            if q.is_empty() {
                self.by_key.remove(&item.key);
            }
        }
        if let Op::Put(_, size) = item.op {
            self.pending_bytes -= size;
        }
        if let Some(data) = &item.data {
            self.memory_bytes -= data.len() as u64;
        }
        self.generation += 1;
        Some(item)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn is_barrier_key(&self, key: &Key) -> bool {
        self.config
            .barrier_prefixes
            .iter()
            .any(|p| key.as_str().starts_with(p.as_str()))
    }

    fn is_barrier(&self, item: &Item) -> bool {
        item.op == Op::Delete || self.is_barrier_key(&item.key)
    }

    fn check_running(&self, st: &State, key: &Key) -> Result<()> {
        if let Some(reason) = &st.failed {
            return Err(stopped_error(key, reason));
        }
        if st.shutdown {
            return Err(stopped_error(key, "shutting down"));
        }
        Ok(())
    }

    fn fail(&self, st: &mut State, reason: String) {
        if st.failed.is_none() {
            st.stats.last_error = Some(reason.clone());
            st.failed = Some(reason);
        }
        self.work.notify_all();
        self.progress.notify_all();
    }

    fn note_error(&self, e: &BackendError) {
        self.lock().stats.last_error = Some(e.to_string());
    }

    // ----- puts and deletes -----

    /// What [`RemoteCheck`] says to ask the remote before a put of `key`: whether the key
    /// exists (`head`), and which of its ancestors and descendants do (`tree`).
    fn remote_questions(&self, key: &Key, mode: PutMode) -> (bool, bool) {
        match self.config.remote_check {
            RemoteCheck::Never => (false, false),
            RemoteCheck::BarrierPrefixes => {
                (mode == PutMode::Create && self.is_barrier_key(key), false)
            }
            RemoteCheck::Always => (mode == PutMode::Create, true),
        }
    }

    /// Asks the remote the questions of [`Shared::remote_questions`]. Errors (remote down)
    /// leave the facts unknown: a put never waits for the remote; the upload is the final
    /// check.
    fn remote_facts(&self, key: &Key, head: bool, tree: bool) -> RemoteFacts {
        let mut facts = RemoteFacts::default();
        let known_locally = {
            let st = self.lock();
            st.last_op(key.as_str(), false).is_some() || st.known.contains_key(key.as_str())
        };
        let exists = |k: &str| -> Option<bool> {
            let k = Key::new(k).ok()?;
            match self.remote.get_range(&k, 0..0) {
                Ok(_) => Some(true),
                Err(BackendError::NotFound(_)) => Some(false),
                Err(e) => {
                    self.note_error(&e);
                    None
                }
            }
        };
        if head && !known_locally {
            facts.exists = exists(key.as_str()).unwrap_or(false);
        }
        if tree {
            for a in key.ancestors() {
                if exists(a) == Some(true) {
                    facts.ancestors.push(a.to_string());
                }
            }
            match self.remote.list(&format!("{key}/")) {
                Ok(list) => facts.descendants = list.into_iter().map(|m| m.key).collect(),
                Err(e) => self.note_error(&e),
            }
        }
        facts
    }

    /// The key rules against local state and `facts`: no conflicting live key; `Create` only
    /// of a key that does not exist.
    fn check_key(&self, st: &State, key: &Key, mode: PutMode, facts: &RemoteFacts) -> Result<()> {
        let conflict = |existing: &str| BackendError::KeyConflict {
            key: key.clone(),
            existing: existing.to_string(),
        };
        for a in key.ancestors() {
            if st.live(a, facts.ancestors.iter().any(|x| x == a)) {
                return Err(conflict(a));
            }
        }
        let inside = format!("{key}/");
        let below = |k: &&Key| k.as_str().starts_with(&inside);
        let queued = st
            .by_key
            .range::<str, _>((Included(inside.as_str()), Unbounded))
            .map(|(k, _)| k);
        let known = st
            .known
            .range::<str, _>((Included(inside.as_str()), Unbounded))
            .map(|(k, _)| k);
        for k in queued.take_while(below).chain(known.take_while(below)) {
            if st.live(k.as_str(), false) {
                return Err(conflict(k.as_str()));
            }
        }
        for k in &facts.descendants {
            if st.live(k.as_str(), true) {
                return Err(conflict(k.as_str()));
            }
        }
        if mode == PutMode::Create && st.live(key.as_str(), facts.exists) {
            return Err(BackendError::AlreadyExists(key.clone()));
        }
        Ok(())
    }

    /// Reserves a sequence for a put (after the checks and, if needed, waiting for capacity) or
    /// a delete, as a `Writing` item.
    fn reserve(&self, key: &Key, op: Op) -> Result<(u64, SystemTime)> {
        // What the remote says is asked outside the lock. A delete of ours that completes
        // meanwhile leaves the queue without its item and the remote's "exists" possibly
        // older than the delete, and the put would be refused for a key that is gone: such
        // answers are dropped. (Asking again until the queue stood still was not enough: other
        // uploads completing kept it moving, seen as a rare conflict over versitygw.)
        let mut facts = RemoteFacts::default();
        let mut st = self.lock();
        if let Op::Put(mode, _) = op {
            let (head, tree) = self.remote_questions(key, mode);
            // Most puts (packs) ask nothing, and need no note of the queued deletes.
            if head || tree {
                // A conflict the cache's own state shows needs no question to the remote; the
                // answer would only add to it. (s3proxy on a file system answers a GET of a key
                // under an existing object with 500s, retried for the whole retry window.)
                self.check_running(&st, key)?;
                self.check_key(&st, key, mode, &RemoteFacts::default())?;
                let deleting = st.queued_deletes_around(key);
                drop(st);
                facts = self.remote_facts(key, head, tree);
                st = self.lock();
                facts.forget_completed_deletes(&st, key, &deleting);
            }
        }
        let cap = self.config.capacity_bytes;
        let mut blocked = false;
        loop {
            self.check_running(&st, key)?;
            let Op::Put(mode, size) = op else { break };
            self.check_key(&st, key, mode, &facts)?;
            if st.pending_bytes == 0 || st.pending_bytes + size <= cap {
                st.make_room(size, cap);
                break;
            }
            if !blocked {
                blocked = true;
                st.stats.blocked_puts += 1;
            }
            st = wait(&self.progress, st);
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        let queued_at = SystemTime::now();
        if let Op::Put(_, size) = op {
            st.pending_bytes += size;
        }
        st.by_key.entry(key.clone()).or_default().push_back(seq);
        st.queue.insert(
            seq,
            Item {
                key: key.clone(),
                op,
                state: ItemState::Writing,
                path: PathBuf::new(),
                queued_at,
                attempted: false,
                data: None,
            },
        );
        Ok((seq, queued_at))
    }

    /// Writes a pending entry durably: temporary file, fsync, rename into `pending/`, fsync.
    fn write_entry(&self, seq: u64, header: &EntryHeader, data: &[u8]) -> Result<PathBuf> {
        let tmp = self.tmp_dir.join(format!("p{seq}"));
        let path = self.pending_dir.join(entry_name(seq, header.kind));
        let write = || -> io::Result<()> {
            let head = header.encode(seq);
            // Large entries (packs) around the page cache, as the local back end writes packs
            // (docs/design/efficiency.md); their upload reads the copy in memory instead.
            if data.len() < DIRECT_MIN || !write_direct(&tmp, &[&head, data], true)? {
                let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
                f.write_all(&head)?;
                f.write_all(data)?;
                f.sync_all()?;
            }
            fs::rename(&tmp, &path)?;
            sync_dir(&self.pending_dir)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            let _ = fs::remove_file(&path);
            map_io(&header.key, e)
        })?;
        Ok(path)
    }

    /// A copy of a large put's bytes for its upload, if [`CacheConfig::upload_memory_bytes`]
    /// has room (counted from here; the item holds it from its commit).
    fn hold_copy(&self, data: &[u8]) -> Option<Arc<Vec<u8>>> {
        let len = data.len() as u64;
        let mut buffer = {
            let mut st = self.lock();
            if data.len() < DIRECT_MIN || st.memory_bytes + len > self.config.upload_memory_bytes {
                return None;
            }
            st.memory_bytes += len;
            st.spare_copies.pop().unwrap_or_default()
        };
        buffer.clear();
        buffer.extend_from_slice(data);
        Some(Arc::new(buffer))
    }

    /// Keeps the buffer of an uploaded item's copy for the next copy, if nothing else holds it
    /// (a back end that gave up waiting on a request may still).
    fn recycle_copy(&self, copy: Arc<Vec<u8>>) {
        if let Ok(buffer) = Arc::try_unwrap(copy) {
            let mut st = self.lock();
            if st.spare_copies.len() < self.config.upload_threads + SPARE_COPIES_EXTRA {
                st.spare_copies.push(buffer);
            }
        }
    }

    /// Makes a reserved item visible and uploadable, or undoes the reservation.
    fn commit(&self, seq: u64, written: Result<PathBuf>, copy: Option<Arc<Vec<u8>>>) -> Result<()> {
        let mut st = self.lock();
        let path = match written {
            Ok(path) => path,
            Err(e) => {
                if let Some(copy) = &copy {
                    st.memory_bytes -= copy.len() as u64;
                }
                st.remove_item(seq);
                self.progress.notify_all();
                self.work.notify_all();
                return Err(e);
            }
        };
        let item = st
            .queue
            .get_mut(&seq)
            .expect("a Writing item is only removed by its own commit");
        item.state = ItemState::Queued;
        item.path = path;
        item.data = copy;
        let key = item.key.clone();
        // The key changes now: forget what is known or cached of its older versions.
        st.known.remove(&key);
        st.drop_clean_key(&key);
        for (k, stale) in st.fetches.values_mut() {
            if *k == key {
                *stale = true;
            }
        }
        st.generation += 1;
        self.cancel_superseded(&mut st, &key, seq);
        self.work.notify_all();
        Ok(())
    }

    /// Drops queued puts of `key` made obsolete by item `seq` (a newer put or a delete): only
    /// those not yet started, not awaited by a flush, and with no barrier between them and
    /// `seq`, so the remote never misses a version an uploaded barrier was written after.
    fn cancel_superseded(&self, st: &mut State, key: &Key, seq: u64) {
        let floor = st.flushes.keys().next_back().copied();
        let Some(seqs) = st.by_key.get(key) else {
            return;
        };
        let mut cancel = Vec::new();
        for &old in seqs.iter().filter(|s| **s < seq).rev() {
            let item = &st.queue[&old];
            let barrier_between = st
                .queue
                .range(old + 1..seq)
                .any(|(_, i)| self.is_barrier(i));
            if barrier_between {
                break;
            }
            if item.state == ItemState::Queued
                && matches!(item.op, Op::Put(..))
                && floor.is_none_or(|f| old > f)
            {
                cancel.push(old);
            }
        }
        for old in cancel {
            if let Some(item) = st.remove_item(old) {
                // Not fsynced: if the unlink is lost in a crash, both versions upload in order.
                let _ = fs::remove_file(&item.path);
            }
        }
        self.progress.notify_all();
    }

    // ----- uploads -----

    /// The next item an upload thread may start: before the first barrier, any queued item that
    /// is the oldest for its key; a barrier only when it is the oldest item of all.
    fn pick(&self, st: &State) -> Option<u64> {
        let first = *st.queue.keys().next()?;
        for (&seq, item) in &st.queue {
            let eligible =
                item.state == ItemState::Queued && st.by_key[&item.key].front() == Some(&seq);
            if self.is_barrier(item) {
                return (eligible && seq == first).then_some(seq);
            }
            if eligible {
                return Some(seq);
            }
        }
        None
    }

    fn worker(&self) {
        let mut st = self.lock();
        loop {
            if st.shutdown {
                return;
            }
            if st.failed.is_none()
                && let Some(seq) = self.pick(&st)
            {
                let item = st.queue.get_mut(&seq).expect("picked from the queue");
                item.state = ItemState::InFlight;
                let (key, op, path, attempted, copy) = (
                    item.key.clone(),
                    item.op,
                    item.path.clone(),
                    item.attempted,
                    item.data.clone(),
                );
                drop(st);
                let run = || self.upload(seq, &key, op, &path, copy.as_ref(), attempted);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
                if let Some(copy) = copy {
                    // Done with it here; the item still holds it if the upload did not finish.
                    self.recycle_copy(copy);
                }
                if outcome.is_err() {
                    // A panicking remote must not leave the item in flight forever (a flush
                    // would hang): stop, as for any unexplained permanent failure.
                    let mut st = self.lock();
                    if let Some(item) = st.queue.get_mut(&seq) {
                        item.state = ItemState::Queued;
                    }
                    let reason = format!("the upload of {key} panicked");
                    self.fail(&mut st, reason);
                }
                st = self.lock();
                continue;
            }
            st = wait(&self.work, st);
        }
    }

    /// Sleeps `delay` (doubling it for next time) unless shutdown comes first; false if it did.
    fn pause(&self, delay: &mut Duration) -> bool {
        let deadline = Instant::now() + *delay;
        *delay = (*delay * 2).min(self.config.retry_max);
        let mut st = self.lock();
        while !st.shutdown {
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            st = self
                .work
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        false
    }

    /// Puts an item back in the queue (shutdown, or the cache failed).
    fn requeue(&self, seq: u64, attempted: bool) {
        let mut st = self.lock();
        if let Some(item) = st.queue.get_mut(&seq) {
            item.state = ItemState::Queued;
            item.attempted |= attempted;
        }
        self.progress.notify_all();
    }

    fn upload(
        &self,
        seq: u64,
        key: &Key,
        op: Op,
        path: &Path,
        copy: Option<&Arc<Vec<u8>>>,
        mut attempted: bool,
    ) {
        // The entry's data for each attempt: the copy in memory (the remote holds a handle on
        // it, no copy), else read (and checked) afresh from disk.
        let load = || {
            if let Some(copy) = copy {
                return Some(Arc::clone(copy));
            }
            let data = read_entry(path).map(Arc::new);
            if let Err(reason) = &data {
                let mut st = self.lock();
                if let Some(item) = st.queue.get_mut(&seq) {
                    item.state = ItemState::Queued;
                }
                self.fail(&mut st, reason.clone());
            }
            data.ok()
        };
        let mut delay = self.config.retry_initial;
        loop {
            let result = match op {
                Op::Delete => self.remote.delete(key),
                Op::Put(mode, _) => {
                    let Some(data) = load() else { return };
                    self.remote.put_shared(key, data, mode)
                }
            };
            let permanent = match result {
                Ok(()) => break,
                Err(BackendError::AlreadyExists(_)) if attempted => {
                    // An earlier attempt may have stored it: it is ours if the bytes match.
                    let Some(data) = load() else { return };
                    match self.remote.get(key) {
                        Ok(remote) if remote == *data => break,
                        Ok(_) => Some(format!(
                            "uploading {key} (create) found other bytes already in {}: another \
                             writer owns this key space (fenced)",
                            self.remote.describe()
                        )),
                        Err(e) => {
                            self.note_retry(&e);
                            None
                        }
                    }
                }
                Err(BackendError::AlreadyExists(_)) => Some(format!(
                    "uploading {key} (create) found it already in {}: another writer owns this \
                     key space (fenced)",
                    self.remote.describe()
                )),
                Err(e @ BackendError::KeyConflict { .. }) => Some(format!(
                    "uploading to {}: {e}: another writer owns this key space (fenced)",
                    self.remote.describe()
                )),
                Err(e) => {
                    attempted = true;
                    self.note_retry(&e);
                    None
                }
            };
            if let Some(reason) = permanent {
                let mut st = self.lock();
                let pending = st.queue.len();
                if let Some(item) = st.queue.get_mut(&seq) {
                    item.state = ItemState::Queued;
                }
                let reason = format!(
                    "{reason}; {pending} queued items stay pending in {}",
                    self.pending_dir.display()
                );
                self.fail(&mut st, reason);
                return;
            }
            if !self.pause(&mut delay) {
                self.requeue(seq, attempted);
                return;
            }
        }
        self.finish(seq, key, op, path);
    }

    fn note_retry(&self, e: &BackendError) {
        let mut st = self.lock();
        st.stats.retries += 1;
        if matches!(e, BackendError::NoSpace(_)) {
            st.stats.no_space_retries += 1;
        }
        st.stats.last_error = Some(match e {
            BackendError::NoSpace(_) => format!("remote full, retrying: {e}"),
            _ => format!("retrying: {e}"),
        });
    }

    /// Retires an uploaded item: out of `pending/` (into the clean cache if it is the key's
    /// newest version, else to garbage), durably, then out of the queue.
    fn finish(&self, seq: u64, key: &Key, op: Op, path: &Path) {
        let fail_local = |e: io::Error, what: &str| {
            let mut st = self.lock();
            if let Some(item) = st.queue.get_mut(&seq) {
                item.state = ItemState::Queued;
            }
            let reason = format!(
                "cannot {what} uploaded entry {}: {e}; stopping so it is not uploaded again \
                 over newer data",
                path.display()
            );
            self.fail(&mut st, reason);
        };
        let mut retired = None;
        {
            let mut st = self.lock();
            if let Op::Put(_, size) = op {
                st.stats.uploaded_bytes += size;
                st.learn(key.clone(), size);
                let name = st.new_file_name();
                let newest = st.by_key.get(key).is_some_and(|q| q.len() == 1);
                let dest = if newest {
                    self.clean_dir.join(name)
                } else {
                    self.tmp_dir.join(name)
                };
                // Under the lock, so readers that find the item open the right name.
                if let Err(e) = fs::rename(path, &dest) {
                    drop(st);
                    fail_local(e, "retire");
                    return;
                }
                if let Some(item) = st.queue.get_mut(&seq) {
                    item.path.clone_from(&dest);
                }
                retired = Some((dest, newest));
            } else {
                st.known.remove(key);
                if let Err(e) = fs::remove_file(path) {
                    drop(st);
                    fail_local(e, "remove");
                    return;
                }
            }
            st.stats.uploaded_objects += 1;
            if let Some(item) = st.queue.get_mut(&seq) {
                item.state = ItemState::Finishing;
            }
        }
        if let Err(e) = sync_dir(&self.pending_dir) {
            fail_local(e, "sync the removal of");
            return;
        }
        let mut st = self.lock();
        st.remove_item(seq);
        if let (Some((dest, newest)), Op::Put(_, size)) = (retired, op) {
            // Still the newest? A put or delete of the key may have come meanwhile.
            if newest && !st.by_key.contains_key(key) {
                let offset = header_len(key);
                let cap = self.config.capacity_bytes;
                st.add_clean(CleanId::Whole(key.clone()), dest, offset, size, cap);
            } else {
                let _ = fs::remove_file(&dest);
            }
        }
        self.progress.notify_all();
        self.work.notify_all();
    }

    // ----- reads -----

    fn open_local(&self, key: &Key, path: &Path) -> Result<File> {
        File::open(path).map_err(|e| {
            other(
                key,
                format!("cannot open cached copy {}: {e}", path.display()),
            )
        })
    }

    /// Where the newest version of `key` is. Files are opened under the lock, so a concurrent
    /// retire or eviction cannot pull a name away between finding and opening it.
    fn locate(&self, key: &Key) -> Result<Source> {
        let mut st = self.lock();
        if let Some((_, item)) = st.last_op(key.as_str(), true) {
            return match item.op {
                Op::Delete => Ok(Source::Deleted),
                Op::Put(_, size) => Ok(Source::Local {
                    file: self.open_local(key, &item.path)?,
                    offset: header_len(key),
                    size,
                }),
            };
        }
        let whole = st
            .clean
            .get(key)
            .and_then(|o| o.whole.as_ref())
            .map(|f| (f.path.clone(), f.offset, f.len));
        if let Some((path, offset, size)) = whole {
            st.touch(&CleanId::Whole(key.clone()));
            return Ok(Source::Local {
                file: self.open_local(key, &path)?,
                offset,
                size,
            });
        }
        Ok(Source::Remote)
    }

    fn read_at(key: &Key, file: &File, offset: u64, len: u64) -> Result<Vec<u8>> {
        let len = usize::try_from(len)
            .map_err(|_| map_io(key, io::Error::from(io::ErrorKind::OutOfMemory)))?;
        crate::local::read_exact_at(file, offset, len).map_err(|e| map_io(key, e))
    }

    fn count_get(&self, bytes: u64, ahead: bool) {
        let mut st = self.lock();
        st.stats.remote_gets += 1;
        st.stats.remote_get_bytes += bytes;
        st.stats.read_ahead_gets += u64::from(ahead);
    }

    /// Writes bytes fetched from the remote to a new clean-cache file (not fsynced: the clean
    /// cache is emptied on open).
    fn write_clean(&self, data: &[u8]) -> Option<PathBuf> {
        let name = self.lock().new_file_name();
        let path = self.clean_dir.join(name);
        // Around the page cache (the cache need not be durable: no fsync): a block just fetched
        // is read from its copy in memory (`State::hold_block`); the file serves later reads.
        let write = || -> io::Result<()> {
            if data.len() < DIRECT_MIN || !write_direct(&path, &[data], false)? {
                fs::write(&path, data)?;
            }
            Ok(())
        };
        match write() {
            Ok(()) => Some(path),
            Err(_) => {
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Runs a remote read of `key` registered as a fetch, so its results are cached only if no
    /// local put or delete of the key happened meanwhile.
    fn with_fetch<T>(&self, key: &Key, f: impl FnOnce(u64) -> Result<T>) -> Result<T> {
        let id = self.lock().begin_fetch(key);
        let result = f(id);
        self.lock().end_fetch(id);
        result
    }

    fn remote_get(&self, key: &Key) -> Result<Vec<u8>> {
        self.with_fetch(key, |id| {
            let data = self.remote.get(key);
            if let Ok(d) = &data {
                self.count_get(d.len() as u64, false);
            }
            let data = match data {
                Err(BackendError::NotFound(k)) => {
                    let mut st = self.lock();
                    if st.fetch_current(id) {
                        st.known.remove(key);
                        st.drop_clean_key(key);
                    }
                    return Err(BackendError::NotFound(k));
                }
                other => other?,
            };
            let size = data.len() as u64;
            if size <= self.config.capacity_bytes
                && let Some(path) = self.write_clean(&data)
            {
                let mut st = self.lock();
                if st.fetch_current(id) {
                    st.learn(key.clone(), size);
                    // The whole object supersedes any blocks of it.
                    st.drop_clean_key(key);
                    let cap = self.config.capacity_bytes;
                    st.add_clean(CleanId::Whole(key.clone()), path, 0, size, cap);
                } else {
                    let _ = fs::remove_file(&path);
                }
            }
            Ok(data)
        })
    }

    /// The remote object's size: known, or from a list of the exact key.
    fn remote_size(&self, key: &Key, id: u64) -> Result<u64> {
        if let Some(size) = self.lock().known.get(key.as_str()) {
            return Ok(*size);
        }
        let listed = self.remote.list(key.as_str())?;
        let size = listed
            .into_iter()
            .find(|m| m.key == *key)
            .map(|m| m.size)
            .ok_or_else(|| BackendError::NotFound(key.clone()))?;
        let mut st = self.lock();
        if st.fetch_current(id) {
            st.learn(key.clone(), size);
        }
        Ok(size)
    }

    fn remote_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        self.with_fetch(key, |id| {
            let mut size = self.lock().known.get(key.as_str()).copied();
            if size.is_some() || range.start >= range.end {
                let s = self.remote_size(key, id)?;
                check_range(key, &range, s)?;
                if range.is_empty() {
                    return Ok(Vec::new());
                }
                size = Some(s);
            }
            // Once to learn the size if unknown, once with it; a third round means the remote
            // changed under us.
            for _ in 0..3 {
                match self.remote_blocks(key, &range, size, id)? {
                    Ok(data) => {
                        self.read_ahead(key, &range, size, id);
                        return Ok(data);
                    }
                    Err(learnt) => {
                        // The guess ran past the end: now the size is known.
                        check_range(key, &range, learnt)?;
                        size = Some(learnt);
                    }
                }
            }
            Err(other(
                key,
                "object size changed during a ranged read".to_string(),
            ))
        })
    }

    /// Serves `range` from cached blocks and fetches the missing ones. With the size unknown, a
    /// fetch may run past the end: then returns `Ok(Err(size))` to retry with the size.
    fn remote_blocks(
        &self,
        key: &Key,
        range: &Range<u64>,
        size: Option<u64>,
        id: u64,
    ) -> Result<Result<Vec<u8>, u64>> {
        let bs = self.config.read_block_bytes;
        let first = range.start / bs;
        let last = (range.end - 1) / bs;
        // The part of block `b` the range needs, as offsets into the block.
        let part = |b: u64| {
            let base = b * bs;
            (
                range.start.max(base) - base,
                range.end.min(base + bs) - base,
            )
        };
        // Block index -> the needed part of it, or `Err(block length)` if the block ends
        // before that part does (the object ends inside the range).
        let mut have: BTreeMap<u64, Result<Part, u64>> = BTreeMap::new();
        let mut cached = Vec::new();
        let mut in_memory = Vec::new();
        {
            let mut st = self.lock();
            // A block being read ahead arrives soon: waiting beats fetching it twice.
            while (first..=last).any(|b| st.ahead_inflight.contains(&(key.clone(), b))) {
                st = wait(&self.ahead_done, st);
            }
            for b in first..=last {
                let block = st.clean.get(key).and_then(|o| o.blocks.get(&b));
                if let Some(memory) = block.and_then(|f| f.memory.clone()) {
                    st.touch(&CleanId::Block(key.clone(), b));
                    in_memory.push((b, memory));
                    continue;
                }
                let file = block.map(|f| (f.path.clone(), f.offset, f.len));
                if let Some((path, offset, len)) = file
                    && let Ok(file) = File::open(&path)
                {
                    st.touch(&CleanId::Block(key.clone(), b));
                    cached.push((b, file, offset, len));
                }
            }
        }
        for (b, memory) in in_memory {
            let (from, to) = part(b);
            have.insert(b, Part::held(memory, from, to));
        }
        for (b, file, offset, len) in cached {
            // Only the needed part is read: a restore reads a block in many small pieces.
            let (from, to) = part(b);
            let got = if len < to {
                Err(len)
            } else {
                Ok(Part::Read(Self::read_at(
                    key,
                    &file,
                    offset + from,
                    to - from,
                )?))
            };
            have.insert(b, got);
        }
        // Fetch runs of consecutive missing blocks, one request each.
        let mut b = first;
        while b <= last {
            if have.contains_key(&b) {
                b += 1;
                continue;
            }
            let mut end = b;
            while end < last && !have.contains_key(&(end + 1)) {
                end += 1;
            }
            let start_byte = b * bs;
            let mut end_byte = (end + 1) * bs;
            if let Some(s) = size {
                end_byte = end_byte.min(s);
            }
            let data = match self.remote.get_range(key, start_byte..end_byte) {
                Ok(data) => data,
                Err(BackendError::InvalidRange { size: s, .. }) if size.is_none() => {
                    let mut st = self.lock();
                    if st.fetch_current(id) {
                        st.learn(key.clone(), s);
                    }
                    return Ok(Err(s));
                }
                Err(BackendError::NotFound(k)) => {
                    let mut st = self.lock();
                    if st.fetch_current(id) {
                        st.known.remove(key);
                        st.drop_clean_key(key);
                    }
                    return Err(BackendError::NotFound(k));
                }
                Err(e) => return Err(e),
            };
            self.count_get(data.len() as u64, false);
            // A fetch of one block (the usual case: read-ahead fetches the rest) becomes the
            // held block as it is; a longer one is cut into blocks.
            let blocks: Vec<Arc<Vec<u8>>> = if data.is_empty() {
                Vec::new()
            } else if data.len() as u64 <= bs {
                vec![Arc::new(data)]
            } else {
                data.chunks(usize::try_from(bs).unwrap_or(usize::MAX))
                    .map(|c| Arc::new(c.to_vec()))
                    .collect()
            };
            let mut fetched = Vec::new();
            for (i, block) in blocks.into_iter().enumerate() {
                let idx = b + i as u64;
                let (from, to) = part(idx);
                have.insert(idx, Part::held(block.clone(), from, to));
                if let Some(path) = self.write_clean(&block) {
                    fetched.push((idx, path, block));
                }
            }
            let mut st = self.lock();
            let cap = self.config.capacity_bytes;
            for (idx, path, block) in fetched {
                if st.fetch_current(id) {
                    let len = block.len() as u64;
                    st.add_clean(CleanId::Block(key.clone(), idx), path, 0, len, cap);
                    st.hold_block(key, idx, block, self.config.read_memory_bytes);
                } else {
                    let _ = fs::remove_file(&path);
                }
            }
            b = end + 1;
        }
        // A range within one block that was read from its file is returned as read; every
        // other range is copied once, from the parts, into the answer.
        if first == last
            && matches!(have.get(&first), Some(Ok(Part::Read(_))))
            && let Some(Ok(Part::Read(data))) = have.remove(&first)
        {
            return Ok(Ok(data));
        }
        let mut out = Vec::with_capacity(usize::try_from(range.end - range.start).unwrap_or(0));
        for b in first..=last {
            match have.remove(&b) {
                Some(Ok(p)) => out.extend_from_slice(p.bytes()),
                // The object ends inside the range: this is its last block.
                Some(Err(len)) => return Ok(Err(b * bs + len)),
                // A fetch shorter than asked ended before this block.
                None => {
                    let end = have
                        .range(..b)
                        .next_back()
                        .map_or(b * bs, |(i, g)| match g {
                            Err(len) => i * bs + len,
                            Ok(_) => (i + 1) * bs,
                        });
                    return Ok(Err(end));
                }
            }
        }
        Ok(Ok(out))
    }

    // ----- read-ahead -----

    /// After a read of `range` that went to the remote: if the reader is going through `key`
    /// front to back (this read starts in the block the last one ended in, or the next, or at
    /// the object's start), queues the next [`CacheConfig::read_ahead_blocks`] blocks that are
    /// neither cached nor on their way. Best effort: errors only mean no read-ahead.
    fn read_ahead(&self, key: &Key, range: &Range<u64>, size: Option<u64>, id: u64) {
        let n = self.config.read_ahead_blocks as u64;
        if n == 0 || range.is_empty() {
            return;
        }
        let bs = self.config.read_block_bytes;
        let (first, last) = (range.start / bs, (range.end - 1) / bs);
        let sequential = {
            let mut st = self.lock();
            if st.last_block_read.len() >= 4096 {
                st.last_block_read.clear();
            }
            let prev = st.last_block_read.insert(key.clone(), last);
            match prev {
                Some(p) => p == first || p + 1 == first,
                None => first == 0,
            }
        };
        if !sequential {
            return;
        }
        // The size bounds the read-ahead; one list of the key learns it when unknown.
        let size = match size {
            Some(s) => s,
            None => match self.remote_size(key, id) {
                Ok(s) => s,
                Err(_) => return,
            },
        };
        let mut st = self.lock();
        // A newer local version (or a delete) since this read began: nothing to read ahead.
        if !st.fetch_current(id) || st.by_key.contains_key(key) {
            return;
        }
        let mut queued = false;
        for b in last + 1..=last + n {
            if b.saturating_mul(bs) >= size {
                break;
            }
            let cached = st.clean.get(key).is_some_and(|o| o.blocks.contains_key(&b));
            if cached || !st.ahead_inflight.insert((key.clone(), b)) {
                continue;
            }
            st.ahead_queue.push_back((key.clone(), b, size));
            queued = true;
        }
        if queued {
            self.ahead_work.notify_all();
        }
    }

    fn read_ahead_worker(&self) {
        let mut st = self.lock();
        loop {
            if st.shutdown {
                // Readers must not wait for blocks nobody will fetch.
                st.ahead_queue.clear();
                st.ahead_inflight.clear();
                self.ahead_done.notify_all();
                return;
            }
            let Some((key, b, size)) = st.ahead_queue.pop_front() else {
                st = wait(&self.ahead_work, st);
                continue;
            };
            // Registered under the same lock that saw no local version: a put or delete of
            // the key from now on makes the fetch stale, so it is not cached.
            let fresh = !st.by_key.contains_key(&key);
            let id = st.begin_fetch(&key);
            drop(st);
            if fresh {
                self.fetch_ahead(&key, b, size, id);
            }
            st = self.lock();
            st.end_fetch(id);
            st.ahead_inflight.remove(&(key, b));
            self.ahead_done.notify_all();
        }
    }

    /// Fetches block `b` of `key` (of `size` bytes) into the clean cache.
    fn fetch_ahead(&self, key: &Key, b: u64, size: u64, id: u64) {
        let bs = self.config.read_block_bytes;
        let range = b * bs..((b + 1) * bs).min(size);
        let Ok(data) = self.remote.get_range(key, range) else {
            // The reader fetches the block itself and sees the error, if it persists.
            return;
        };
        self.count_get(data.len() as u64, true);
        let Some(path) = self.write_clean(&data) else {
            return;
        };
        let mut st = self.lock();
        let cached = st.clean.get(key).is_some_and(|o| o.blocks.contains_key(&b));
        if st.fetch_current(id) && !cached {
            let cap = self.config.capacity_bytes;
            st.add_clean(
                CleanId::Block(key.clone(), b),
                path,
                0,
                data.len() as u64,
                cap,
            );
            st.hold_block(key, b, Arc::new(data), self.config.read_memory_bytes);
        } else {
            let _ = fs::remove_file(&path);
        }
    }
}

/// The part of one read block a ranged read needs: a slice of a block held in memory (copied
/// once, into the answer) or bytes already read from the block's file.
enum Part {
    Held(Arc<Vec<u8>>, Range<usize>),
    Read(Vec<u8>),
}

impl Part {
    /// Bytes `from..to` of `block`, or `Err(block length)` if the block ends before `to`.
    fn held(block: Arc<Vec<u8>>, from: u64, to: u64) -> Result<Part, u64> {
        match (usize::try_from(from), usize::try_from(to)) {
            (Ok(from), Ok(to)) if from <= to && to <= block.len() => {
                Ok(Part::Held(block, from..to))
            }
            _ => Err(block.len() as u64),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Part::Held(block, range) => &block[range.clone()],
            Part::Read(data) => data,
        }
    }
}

impl Backend for WriteBackCache {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        let s = &*self.shared;
        let (seq, queued_at) = s.reserve(key, Op::Put(mode, data.len() as u64))?;
        let header = EntryHeader {
            kind: EntryKind::Put(mode),
            key: key.clone(),
            queued_at_nanos: now_nanos(queued_at),
            data_len: data.len() as u64,
            data_hash: hash64(data),
        };
        let copy = s.hold_copy(data);
        let written = s.write_entry(seq, &header, data);
        s.commit(seq, written, copy)
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        match self.shared.locate(key)? {
            Source::Local { file, offset, size } => Shared::read_at(key, &file, offset, size),
            Source::Deleted => Err(BackendError::NotFound(key.clone())),
            Source::Remote => self.shared.remote_get(key),
        }
    }

    fn is_local(&self, key: &Key, range: Range<u64>) -> bool {
        let s = &*self.shared;
        match s.locate(key) {
            Ok(Source::Local { .. } | Source::Deleted) => return true,
            Ok(Source::Remote) => {}
            Err(_) => return false,
        }
        // Not held whole: local if every read block the range touches is held (in memory or
        // in its file), as `remote_blocks` would find them.
        let st = s.lock();
        let end = match st.known.get(key.as_str()) {
            Some(&size) => range.end.min(size),
            None if range.end == u64::MAX => return false,
            None => range.end,
        };
        if range.start >= end {
            return true;
        }
        let bs = s.config.read_block_bytes;
        let Some(object) = st.clean.get(key) else {
            return false;
        };
        (range.start / bs..=(end - 1) / bs).all(|b| object.blocks.contains_key(&b))
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        match self.shared.locate(key)? {
            Source::Local { file, offset, size } => {
                check_range(key, &range, size)?;
                Shared::read_at(key, &file, offset + range.start, range.end - range.start)
            }
            Source::Deleted => Err(BackendError::NotFound(key.clone())),
            Source::Remote => self.shared.remote_range(key, range),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let s = &*self.shared;
        // The queue's view first: an item completing during the remote list is then counted
        // by one or the other.
        let (overlay, generation) = {
            let st = s.lock();
            let overlay: Vec<(Key, Option<u64>)> = st
                .by_key
                .range::<str, _>((Included(prefix), Unbounded))
                .take_while(|(k, _)| k.as_str().starts_with(prefix))
                .filter_map(|(k, _)| {
                    let (_, item) = st.last_op(k.as_str(), true)?;
                    Some((
                        k.clone(),
                        match item.op {
                            Op::Put(_, size) => Some(size),
                            Op::Delete => None,
                        },
                    ))
                })
                .collect();
            (overlay, st.generation)
        };
        let remote = s.remote.list(prefix)?;
        {
            let mut st = s.lock();
            if st.generation == generation {
                for m in &remote {
                    if !st.by_key.contains_key(m.key.as_str()) {
                        st.learn(m.key.clone(), m.size);
                    }
                }
            }
        }
        let mut merged: BTreeMap<Key, u64> = remote.into_iter().map(|m| (m.key, m.size)).collect();
        for (key, size) in overlay {
            match size {
                Some(size) => merged.insert(key, size),
                None => merged.remove(&key),
            };
        }
        Ok(merged
            .into_iter()
            .map(|(key, size)| ObjectMeta { key, size })
            .collect())
    }

    fn delete(&self, key: &Key) -> Result<()> {
        let s = &*self.shared;
        let (seq, queued_at) = s.reserve(key, Op::Delete)?;
        let header = EntryHeader {
            kind: EntryKind::Delete,
            key: key.clone(),
            queued_at_nanos: now_nanos(queued_at),
            data_len: 0,
            data_hash: hash64(&[]),
        };
        let written = s.write_entry(seq, &header, &[]);
        s.commit(seq, written, None)
    }

    fn describe(&self) -> String {
        format!(
            "write-back cache {} over {}",
            self.shared.dir.display(),
            self.shared.remote.describe()
        )
    }

    fn flush(&self) -> Result<()> {
        let s = &*self.shared;
        {
            let mut st = s.lock();
            let Some(target) = st.next_seq.checked_sub(1) else {
                drop(st);
                return s.remote.flush();
            };
            *st.flushes.entry(target).or_default() += 1;
            let result = loop {
                if let Some(reason) = &st.failed {
                    break Err(stopped_error(&s.dir.display(), reason));
                }
                if st.shutdown {
                    break Err(stopped_error(&s.dir.display(), "shutting down"));
                }
                if st.queue.keys().next().is_none_or(|first| *first > target) {
                    break Ok(());
                }
                st = wait(&s.progress, st);
            };
            if let Some(n) = st.flushes.get_mut(&target) {
                *n -= 1;
                if *n == 0 {
                    st.flushes.remove(&target);
                }
            }
            result?;
        }
        s.remote.flush()
    }
}

// ----- the pending entry format -----

const MAGIC: [u8; 8] = *b"reelWBC1";
// Fixed part: magic, kind (u8), put mode (u8), key length (u16), reserved (u32), sequence,
// queue time (Unix nanoseconds), data length, data hash (u64 each, little-endian); then the
// key, then a hash of all of the above. Each offset follows from the previous field.
const OFF_KIND: usize = MAGIC.len();
const OFF_MODE: usize = OFF_KIND + 1;
const OFF_KEY_LEN: usize = OFF_MODE + 1;
const OFF_SEQ: usize = OFF_KEY_LEN + 2 + 4;
const OFF_QUEUED: usize = OFF_SEQ + 8;
const OFF_DATA_LEN: usize = OFF_QUEUED + 8;
const OFF_DATA_HASH: usize = OFF_DATA_LEN + 8;
const FIXED_LEN: usize = OFF_DATA_HASH + 8;
const HASH_LEN: usize = 8;

/// Bytes before an entry's data.
fn header_len(key: &Key) -> u64 {
    (FIXED_LEN + key.as_str().len() + HASH_LEN) as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EntryKind {
    Put(PutMode),
    Delete,
}

struct EntryHeader {
    kind: EntryKind,
    key: Key,
    queued_at_nanos: u64,
    data_len: u64,
    data_hash: u64,
}

fn entry_name(seq: u64, kind: EntryKind) -> String {
    let ext = match kind {
        EntryKind::Put(_) => "put",
        EntryKind::Delete => "del",
    };
    format!("{seq:020}.{ext}")
}

impl EntryHeader {
    fn encode(&self, seq: u64) -> Vec<u8> {
        let (kind, mode) = match self.kind {
            EntryKind::Put(PutMode::Overwrite) => (1u8, 1u8),
            EntryKind::Put(PutMode::Create) => (1, 2),
            EntryKind::Delete => (2, 0),
        };
        let key = self.key.as_str().as_bytes();
        let mut out = Vec::with_capacity(FIXED_LEN + key.len() + HASH_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(kind);
        out.push(mode);
        // Keys are at most MAX_KEY_LEN (512) bytes, so the length fits a u16.
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&self.queued_at_nanos.to_le_bytes());
        out.extend_from_slice(&self.data_len.to_le_bytes());
        out.extend_from_slice(&self.data_hash.to_le_bytes());
        out.extend_from_slice(key);
        let h = hash64(&out);
        out.extend_from_slice(&h.to_le_bytes());
        out
    }

    /// Parses a header from the start of an entry; returns it with its sequence number.
    fn decode(b: &[u8]) -> Result<(EntryHeader, u64), String> {
        let u64_at = |at: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        if b.len() < FIXED_LEN + HASH_LEN {
            return Err(format!("truncated header ({} bytes)", b.len()));
        }
        if b[..MAGIC.len()] != MAGIC {
            return Err("not a pending entry (bad magic)".to_string());
        }
        let key_len = usize::from(u16::from_le_bytes([b[OFF_KEY_LEN], b[OFF_KEY_LEN + 1]]));
        if key_len > MAX_KEY_LEN || b.len() < FIXED_LEN + key_len + HASH_LEN {
            return Err(format!("bad or truncated key length {key_len}"));
        }
        let hashed = FIXED_LEN + key_len;
        if hash64(&b[..hashed]) != u64_at(hashed) {
            return Err("header checksum mismatch".to_string());
        }
        let kind = match (b[OFF_KIND], b[OFF_MODE]) {
            (1, 1) => EntryKind::Put(PutMode::Overwrite),
            (1, 2) => EntryKind::Put(PutMode::Create),
            (2, 0) => EntryKind::Delete,
            (k, m) => return Err(format!("unknown entry kind {k}/{m}")),
        };
        let key = std::str::from_utf8(&b[FIXED_LEN..hashed])
            .ok()
            .and_then(|k| Key::new(k).ok())
            .ok_or_else(|| "invalid key".to_string())?;
        let header = EntryHeader {
            kind,
            key,
            queued_at_nanos: u64_at(OFF_QUEUED),
            data_len: u64_at(OFF_DATA_LEN),
            data_hash: u64_at(OFF_DATA_HASH),
        };
        Ok((header, u64_at(OFF_SEQ)))
    }
}

/// Reads and checks every entry of the pending area, in sequence order.
fn recover(pending: &Path) -> Result<Vec<(u64, EntryHeader, PathBuf)>> {
    let err = |p: &Path, msg: String| {
        other(
            p.display(),
            format!(
                "damaged write-back cache pending entry: {msg}; move the file away to continue without it (its object is then not uploaded)"
            ),
        )
    };
    let mut out = Vec::new();
    let entries = fs::read_dir(pending).map_err(|e| BackendError::io(pending.display(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| BackendError::io(pending.display(), e))?;
        let path = entry.path();
        let name = entry.file_name();
        let parsed = name.to_str().and_then(|n| {
            let (seq, _ext) = n.split_once('.')?;
            (seq.len() == 20).then_some(())?;
            seq.parse::<u64>().ok()
        });
        let Some(seq) = parsed else {
            return Err(err(&path, "unexpected file name".to_string()));
        };
        let mut f = File::open(&path).map_err(|e| BackendError::io(path.display(), e))?;
        let file_len = f
            .metadata()
            .map_err(|e| BackendError::io(path.display(), e))?
            .len();
        let mut head = Vec::new();
        (&mut f)
            .take((FIXED_LEN + MAX_KEY_LEN + HASH_LEN) as u64)
            .read_to_end(&mut head)
            .map_err(|e| BackendError::io(path.display(), e))?;
        let (header, header_seq) = EntryHeader::decode(&head).map_err(|m| err(&path, m))?;
        if header_seq != seq || entry_name(seq, header.kind) != name.to_string_lossy() {
            return Err(err(
                &path,
                "file name does not match its header".to_string(),
            ));
        }
        if file_len != header_len(&header.key) + header.data_len {
            return Err(err(
                &path,
                format!(
                    "{file_len} bytes, the header says {}",
                    header_len(&header.key) + header.data_len
                ),
            ));
        }
        out.push((seq, header, path));
    }
    out.sort_by_key(|(seq, _, _)| *seq);
    Ok(out)
}

/// Reads a pending put's data for upload, checking the header and the data hash. The data is
/// read straight into a buffer of its own (one copy out of the page cache, no second one).
fn read_entry(path: &Path) -> Result<Vec<u8>, String> {
    let cannot = |e: io::Error| format!("cannot read {}: {e}", path.display());
    let damaged = |m: String| format!("damaged pending entry {}: {m}", path.display());
    let f = File::open(path).map_err(cannot)?;
    let file_len = f.metadata().map_err(cannot)?.len();
    let mut head = Vec::new();
    (&f).take((FIXED_LEN + MAX_KEY_LEN + HASH_LEN) as u64)
        .read_to_end(&mut head)
        .map_err(cannot)?;
    let (header, _) = EntryHeader::decode(&head).map_err(damaged)?;
    let start = header_len(&header.key);
    let data_len = file_len.saturating_sub(start);
    if data_len != header.data_len {
        return Err(damaged(format!(
            "{data_len} data bytes, the header says {}",
            header.data_len
        )));
    }
    let len = usize::try_from(data_len).map_err(|_| damaged("too large".to_string()))?;
    let data = crate::local::read_exact_at(&f, start, len).map_err(cannot)?;
    if hash64(&data) != header.data_hash {
        return Err(damaged("data checksum mismatch".to_string()));
    }
    Ok(data)
}

/// A fast 64-bit checksum against damage (not an adversary): every step is a bijection of the
/// state for a given input word, so a change confined to one 8-byte word is always detected.
fn hash64(data: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = 0x243F_6A88_85A3_08D3 ^ (data.len() as u64).wrapping_mul(K);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = [0; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^= h >> 31;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 29)
}
