//! The catalog's file, with a fence.
//!
//! redb makes a pending non-durable commit durable when the database is closed. That is wrong
//! for us when the store stops after a failure: those commits may name chunks whose packs were
//! never stored. Fencing makes every later write and sync fail, which redb latches as an I/O
//! error and then leaves the file as it was — at the last durable commit, exactly as a power cut
//! would.

use std::io;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use redb::StorageBackend;
use redb::backends::FileBackend;

#[derive(Debug)]
pub struct FencedFile {
    file: FileBackend,
    fenced: Arc<AtomicBool>,
}

impl FencedFile {
    pub fn new(file: FileBackend, fenced: Arc<AtomicBool>) -> FencedFile {
        FencedFile { file, fenced }
    }

    fn check(&self) -> io::Result<()> {
        if self.fenced.load(Ordering::Acquire) {
            Err(io::Error::other(
                "catalog fenced: the store stopped; non-durable commits are discarded",
            ))
        } else {
            Ok(())
        }
    }
}

impl StorageBackend for FencedFile {
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check()?;
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.check()?;
        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check()?;
        self.file.write(offset, data)
    }
    fn close(&self) -> io::Result<()> {
        self.file.close()
    }
    fn try_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, redb::BackendError> {
        self.file.try_lock_range(s, e)
    }
    fn try_lock_shared_range(
        &self,
        s: Bound<u64>,
        e: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.file.try_lock_shared_range(s, e)
    }
    fn lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), redb::BackendError> {
        self.file.lock_range(s, e)
    }
    fn lock_shared_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), redb::BackendError> {
        self.file.lock_shared_range(s, e)
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), redb::BackendError> {
        self.file.unlock_range(s, e)
    }
    fn query_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, redb::BackendError> {
        self.file.query_lock_range(s, e)
    }
}

/// The catalog's database, behind a lock that only compaction takes exclusively.
///
/// redb frees a copy-on-write page only once no snapshot can see it, and keeps the pages of
/// the last durable commit until the next one; between synchronising points a stream's
/// flushes and the index batches rewrite leaves all over the index, so the file grows to hold
/// both copies and stays that size (`efficiency.md` §41). [`CatalogDb::try_compact`] gives
/// those pages back when the catalog is idle. Every transaction begins through this type: a
/// begin holds the shared lock only for the call (redb's transactions do not borrow the
/// database), and compaction only ever *tries* the exclusive lock, so it never waits on a
/// begin, and a begin waits only while a compaction runs.
pub(crate) struct CatalogDb {
    db: parking_lot::RwLock<redb::Database>,
    path: std::path::PathBuf,
    epoch: std::time::Instant,
    /// When a write transaction last began or ended, in ms since `epoch`. Reads do not count:
    /// a console polling the catalog would keep it from ever being idle, and a read open at
    /// the time only makes compaction wait for the next look.
    last_use_ms: AtomicU64,
    /// Write transactions begun and not yet committed or dropped, bookkeeping included.
    live_writes: AtomicUsize,
    /// Non-durable commits so far (counted before they commit).
    nondurable: AtomicU64,
    /// Non-durable commits a durable commit has covered.
    durable_covers: AtomicU64,
    /// `last_use_ms` when compaction last looked (it looks once per spell of use).
    checked_at_use: AtomicU64,
}

/// Why [`CatalogDb::try_compact`] did not compact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCompacted {
    /// A transaction was live or beginning, or the catalog was used within the idle period.
    Busy,
    /// A non-durable commit is pending: redb's compaction would make it durable at a moment
    /// no caller chose (it may name packs not stored yet, or run ahead of the journal).
    Pending,
    /// Nothing began since the last look.
    Unused,
    /// Too little spare space to be worth moving pages for.
    Small,
    /// Too large for the moment: an idle spell would hold up the next command for seconds
    /// (left to the clean stop), a stop could outlast the service manager's stop timeout
    /// (left to `reel compact`, with the server stopped).
    Large,
    /// The catalog refuses writes: a failed sync or a catalog error stopped the store.
    Fenced,
}

impl std::fmt::Display for NotCompacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotCompacted::Busy => "the catalog is in use",
            NotCompacted::Pending => "a commit is waiting for the next sync",
            NotCompacted::Unused => "nothing was written since the last compaction",
            NotCompacted::Small => "too little of the file is spare",
            NotCompacted::Large => "the file is too large to compact at this moment",
            NotCompacted::Fenced => "the store refuses writes after an error",
        })
    }
}

impl CatalogDb {
    pub(crate) fn new(db: redb::Database, path: std::path::PathBuf) -> CatalogDb {
        CatalogDb {
            db: parking_lot::RwLock::new(db),
            path,
            epoch: std::time::Instant::now(),
            last_use_ms: AtomicU64::new(0),
            live_writes: AtomicUsize::new(0),
            nondurable: AtomicU64::new(0),
            durable_covers: AtomicU64::new(0),
            checked_at_use: AtomicU64::new(u64::MAX),
        }
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_use_ms.fetch_max(now, Ordering::AcqRel);
    }

    /// How long since a write transaction last began or ended.
    pub(crate) fn idle_for(&self) -> std::time::Duration {
        let last = self.last_use_ms.load(Ordering::Acquire);
        let now = self.epoch.elapsed().as_millis() as u64;
        std::time::Duration::from_millis(now.saturating_sub(last))
    }

    pub(crate) fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
        use redb::ReadableDatabase;
        self.db.read().begin_read()
    }

    pub(crate) fn begin_write(&self) -> Result<CatalogWrite<'_>, redb::TransactionError> {
        let db = self.db.read();
        self.touch();
        // Counted under the shared lock, before the begin: a compactor holding the exclusive
        // lock sees every write transaction that could still commit.
        self.live_writes.fetch_add(1, Ordering::AcqRel);
        let live = LiveWrite(self);
        let txn = db.begin_write()?;
        // The only writer now: no commit lands between this and ours.
        let covers = self.nondurable.load(Ordering::Acquire);
        Ok(CatalogWrite {
            txn,
            durable: true,
            covers,
            live,
        })
    }

    /// The database itself, for helpers written against `&redb::Database` (the journal's
    /// dump, the filter's hooks). Holding it keeps compaction out.
    pub(crate) fn database(&self) -> parking_lot::RwLockReadGuard<'_, redb::Database> {
        self.db.read()
    }

    /// Counts every write so far as looked at: what opening the store wrote does not call for
    /// a compaction (a command that only reads, `reel stats`, leaves the file alone).
    pub(crate) fn mark_looked(&self) {
        let used = self.last_use_ms.load(Ordering::Acquire);
        self.checked_at_use.store(used, Ordering::Release);
    }

    /// Whether a non-durable commit is not yet covered by a durable one.
    pub(crate) fn nondurable_pending(&self) -> bool {
        self.nondurable.load(Ordering::Acquire) > self.durable_covers.load(Ordering::Acquire)
    }

    #[cfg(test)]
    /// The catalog file's size on disk (allocated blocks, as `du` counts them).
    pub(crate) fn file_bytes(&self) -> u64 {
        file_bytes(&self.path)
    }

    /// Compacts the file if the catalog has been idle for the moment's period, was used since
    /// the last compaction, no non-durable commit is pending, and enough of the file is pages
    /// no table uses ([`CompactMoment`]). Never waits for the lock; begins wait while it runs.
    pub(crate) fn try_compact(
        &self,
        moment: CompactMoment,
    ) -> Result<Result<Compacted, NotCompacted>, redb::Error> {
        let Some(mut db) = self.db.try_write() else {
            return Ok(Err(NotCompacted::Busy));
        };
        let idle = match moment {
            CompactMoment::Idle(idle) => idle,
            CompactMoment::Stopping | CompactMoment::Asked => std::time::Duration::ZERO,
        };
        // No transaction begins while the lock is held; one begun before might still commit.
        if self.live_writes.load(Ordering::Acquire) != 0 || self.idle_for() < idle {
            return Ok(Err(NotCompacted::Busy));
        }
        let used = self.last_use_ms.load(Ordering::Acquire);
        if self.checked_at_use.swap(used, Ordering::AcqRel) == used
            && moment != CompactMoment::Asked
        {
            return Ok(Err(NotCompacted::Unused));
        }
        if self.nondurable_pending() {
            return Ok(Err(NotCompacted::Pending));
        }
        let outcome = compact_file(&self.path, &mut db, moment);
        if matches!(outcome, Ok(Err(NotCompacted::Busy))) {
            // A reader kept it out: look again next time, used or not.
            self.checked_at_use.store(u64::MAX, Ordering::Release);
        }
        outcome
    }

    /// [`CatalogDb::try_compact`]'s checks but idleness, with the database owned (closing).
    /// Looking costs a walk of every table (redb's page count), so a store that wrote nothing
    /// since the last look closes without one.
    pub(crate) fn compact_owned(&mut self) -> Result<Result<Compacted, NotCompacted>, redb::Error> {
        if *self.checked_at_use.get_mut() == *self.last_use_ms.get_mut() {
            return Ok(Err(NotCompacted::Unused));
        }
        if self.nondurable_pending() {
            return Ok(Err(NotCompacted::Pending));
        }
        compact_file(&self.path, self.db.get_mut(), CompactMoment::Stopping)
    }
}

/// When a compaction is tried, which decides how much spare space makes it worth it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompactMoment {
    /// A store idle for this long: a write that begins meanwhile waits for the compaction,
    /// so only when a tenth of the file is spare.
    Idle(std::time::Duration),
    /// A clean stop or the close, after the last sync: nothing waits, and what is left is
    /// what `du` shows until the next start, so from a fiftieth (`efficiency.md` §43), up to
    /// [`STOP_COMPACT_MAX_FILE_BYTES`].
    Stopping,
    /// An operator asked (`reel compact`, the server stopped): any spare page, any size.
    Asked,
}

/// Compacts `db` (whose file is `path`) if at least 1 MiB, and the share `moment` asks for, of
/// the file is pages no table uses.
fn compact_file(
    path: &std::path::Path,
    db: &mut redb::Database,
    moment: CompactMoment,
) -> Result<Result<Compacted, NotCompacted>, redb::Error> {
    let (before, spare) = spare_bytes(path, db)?;
    if let Err(why) = worth_compacting(moment, before, spare) {
        return Ok(Err(why));
    }
    let started = std::time::Instant::now();
    match db.compact() {
        Ok(_) => Ok(Ok(Compacted {
            before,
            after: file_bytes(path),
            took: started.elapsed(),
        })),
        // A read transaction (a checkpoint's snapshot, a scrub) is open.
        Err(redb::CompactionError::TransactionInProgress) => Ok(Err(NotCompacted::Busy)),
        Err(e) => Err(e.into()),
    }
}

/// Whether a file of `size` bytes, `spare` of them unused, is compacted at `moment`.
fn worth_compacting(moment: CompactMoment, size: u64, spare: u64) -> Result<(), NotCompacted> {
    let (share, largest) = match moment {
        CompactMoment::Idle(_) => (10, IDLE_COMPACT_MAX_FILE_BYTES),
        CompactMoment::Stopping => (50, STOP_COMPACT_MAX_FILE_BYTES),
        CompactMoment::Asked if spare > 0 => return Ok(()),
        CompactMoment::Asked => return Err(NotCompacted::Small),
    };
    if spare < COMPACT_MIN_SPARE_BYTES || spare * share < size {
        return Err(NotCompacted::Small);
    }
    if size > largest {
        return Err(NotCompacted::Large);
    }
    Ok(())
}

/// The largest file an idle spell compacts. Compaction takes about 9 ms per MB of file (a
/// 418 MB catalog in 3.6 s on the benchmark machine, `efficiency.md` §43), and every catalog
/// transaction waits for it, the next command's included: above this, a few seconds.
/// Freed pages inside the file are reused by later writes, so the spare share stays bounded
/// until the clean stop compacts.
const IDLE_COMPACT_MAX_FILE_BYTES: u64 = 256 << 20;

/// The largest file a stop compacts: about 40 s at the rate above, a third of the packaged
/// unit's `TimeoutStopSec=120`, which also covers the last sync and the uploads. A service
/// manager's SIGKILL mid-compaction loses nothing (redb's compaction is a series of durable
/// commits; the crash test kills there), but the next open must then rebuild redb's allocator
/// state, and the file stays large. Larger files are left to `reel compact`.
pub const STOP_COMPACT_MAX_FILE_BYTES: u64 = 4 << 30;

/// The file's size on disk, and how much of it is pages no table (nor redb itself) uses.
fn spare_bytes(path: &std::path::Path, db: &redb::Database) -> Result<(u64, u64), redb::Error> {
    let size = file_bytes(path);
    let txn = db.begin_write()?;
    let stats = txn.stats()?;
    txn.abort()?;
    let in_use = stats.allocated_pages() * stats.page_size() as u64;
    Ok((size, size.saturating_sub(in_use)))
}

fn file_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// Spare pages below this are left in the file.
const COMPACT_MIN_SPARE_BYTES: u64 = 1 << 20;

/// What a compaction of the catalog file gave back.
#[derive(Clone, Copy, Debug)]
pub struct Compacted {
    /// The file's size on disk (allocated blocks) before and after.
    pub before: u64,
    pub after: u64,
    pub took: std::time::Duration,
}

/// One counted live write transaction (see [`CatalogDb::begin_write`]).
struct LiveWrite<'a>(&'a CatalogDb);

impl Drop for LiveWrite<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.live_writes.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A catalog write transaction; derefs to redb's. It keeps the catalog's count of pending
/// non-durable commits, and stays counted live until that bookkeeping is done, so a compaction
/// never runs between a commit and its record.
pub(crate) struct CatalogWrite<'a> {
    txn: redb::WriteTransaction,
    durable: bool,
    covers: u64,
    live: LiveWrite<'a>,
}

impl CatalogWrite<'_> {
    /// As redb's, and remembered: a non-durable commit is pending until a durable one.
    pub(crate) fn set_durability(
        &mut self,
        durability: redb::Durability,
    ) -> Result<(), redb::SetDurabilityError> {
        self.txn.set_durability(durability)?;
        self.durable = !matches!(durability, redb::Durability::None);
        Ok(())
    }

    pub(crate) fn commit(self) -> Result<(), redb::CommitError> {
        let CatalogWrite {
            txn,
            durable,
            covers,
            live,
        } = self;
        let db = live.0;
        if durable {
            txn.commit()?;
            db.durable_covers.fetch_max(covers, Ordering::AcqRel);
        } else {
            // Counted first: pending from before the commit lands.
            db.nondurable.fetch_add(1, Ordering::AcqRel);
            txn.commit()?;
        }
        drop(live);
        Ok(())
    }
}

impl std::ops::Deref for CatalogWrite<'_> {
    type Target = redb::WriteTransaction;
    fn deref(&self) -> &redb::WriteTransaction {
        &self.txn
    }
}

impl std::ops::DerefMut for CatalogWrite<'_> {
    fn deref_mut(&mut self) -> &mut redb::WriteTransaction {
        &mut self.txn
    }
}

#[cfg(test)]
mod tests {
    use redb::{Database, ReadableDatabase, TableDefinition};

    use super::*;

    const ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("rows");

    /// A file with a few per cent of it spare is left alone by an idle server (writers would
    /// wait for little) and compacted at a stop (`CompactMoment`).
    #[test]
    fn a_stop_compacts_a_smaller_spare_share_than_an_idle_spell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.redb");
        let mut db = Database::create(&path).unwrap();
        type Rows<'t> = redb::Table<'t, u64, &'static [u8]>;
        let commit = |db: &Database, f: &dyn Fn(&mut Rows<'_>)| {
            let txn = db.begin_write().unwrap();
            f(&mut txn.open_table(ROWS).unwrap());
            txn.commit().unwrap();
        };
        commit(&db, &|t| {
            for i in 0..4096u64 {
                t.insert(i, &[i as u8; 4000][..]).unwrap();
            }
        });
        // About 7 % of the rows, from the middle of the file; the next commit frees their pages.
        commit(&db, &|t| {
            for i in 1000..1300u64 {
                t.remove(i).unwrap();
            }
        });
        commit(&db, &|t| {
            t.insert(1 << 20, &b"last"[..]).unwrap();
        });
        let (size, spare) = spare_bytes(&path, &db).unwrap();
        assert!(
            spare >= COMPACT_MIN_SPARE_BYTES && spare * 50 >= size && spare * 10 < size,
            "{spare} of {size} bytes spare: not between a fiftieth and a tenth"
        );
        let idle = CompactMoment::Idle(std::time::Duration::ZERO);
        assert_eq!(
            compact_file(&path, &mut db, idle).unwrap().unwrap_err(),
            NotCompacted::Small
        );
        let c = compact_file(&path, &mut db, CompactMoment::Stopping)
            .unwrap()
            .unwrap();
        assert_eq!(c.before, size);
        assert!(c.after + spare / 2 <= c.before, "{c:?}, {spare} spare");
        // Every row is still there.
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(ROWS).unwrap();
        for i in (0..1000u64).chain(1300..4096) {
            assert_eq!(t.get(i).unwrap().unwrap().value(), &[i as u8; 4000][..]);
        }
        assert!(t.get(1100).unwrap().is_none());
    }

    /// An idle spell leaves a large catalog to the stop, a stop a larger one to the operator;
    /// the shares and the 1 MiB floor.
    #[test]
    fn each_moment_has_its_share_floor_and_size_cap() {
        let idle = CompactMoment::Idle(std::time::Duration::from_secs(30));
        let stop = CompactMoment::Stopping;
        let mib = 1u64 << 20;
        assert_eq!(worth_compacting(idle, 100 * mib, 20 * mib), Ok(()));
        assert_eq!(
            worth_compacting(idle, 100 * mib, 5 * mib),
            Err(NotCompacted::Small)
        );
        assert_eq!(worth_compacting(stop, 100 * mib, 5 * mib), Ok(()));
        assert_eq!(
            worth_compacting(stop, 100 * mib, mib / 2),
            Err(NotCompacted::Small)
        );
        assert_eq!(
            worth_compacting(idle, 1024 * mib, 300 * mib),
            Err(NotCompacted::Large)
        );
        assert_eq!(worth_compacting(stop, 1024 * mib, 300 * mib), Ok(()));
        // A stop leaves a file that could outlast the stop timeout; an operator's ask does
        // not, and takes any spare page.
        assert_eq!(
            worth_compacting(stop, 8192 * mib, 1024 * mib),
            Err(NotCompacted::Large)
        );
        let asked = CompactMoment::Asked;
        assert_eq!(worth_compacting(asked, 8192 * mib, 1024 * mib), Ok(()));
        assert_eq!(worth_compacting(asked, 100 * mib, 4096), Ok(()));
        assert_eq!(
            worth_compacting(asked, 100 * mib, 0),
            Err(NotCompacted::Small)
        );
    }
}
