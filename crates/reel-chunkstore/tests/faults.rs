//! The store on a misbehaving medium: power loss of the back end, random I/O errors, a full
//! disk, and damaged or truncated pack objects. The workload and its model come from the crash
//! worker (`src/bin/reel-crash-worker.rs`), shared as a module.
//!
//! Cycle counts scale with `REEL_FAULT_CYCLES` (default 100 in-process power-loss cycles, 40
//! power-loss cycles with a worker process).

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use reel_backend::{
    Backend, CrashBackend, FaultRates, FlakyBackend, LocalBackend, MemoryBackend, QuotaBackend,
};
use reel_chunkstore::{ChunkStore, StoreConfig, StoreError, StreamId};
use worker::{
    Driver, Mix, Model, NoHooks, Rec, Rng, compare, config_for, expected_range, fill, read_journal,
    write_state,
};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn open(
    dir: &Path,
    backend: Arc<dyn Backend>,
    config: StoreConfig,
) -> Result<ChunkStore, StoreError> {
    ChunkStore::open(&dir.join("catalog"), backend, config)
}

/// Scrub must find nothing wrong.
fn assert_clean(store: &ChunkStore, when: &str) {
    let r = store
        .scrub(&mut |_, _| {})
        .unwrap_or_else(|e| panic!("scrub {when}: {e:?}"));
    assert!(
        r.is_clean(),
        "scrub {when}: {} bad chunks, {} damaged ranges; first {:?} / {:?}",
        r.bad_chunks.len(),
        r.damage.len(),
        r.bad_chunks.first(),
        r.damage.first()
    );
    // Every indexed chunk is checked; a chunk may also have an extra, unindexed copy (a
    // duplicate the cold cache did not recognise), which scrub checks too.
    let indexed = store.stats().unwrap().chunks;
    assert!(
        r.chunks_checked >= indexed,
        "scrub {when} checked {} chunks of {indexed} indexed",
        r.chunks_checked
    );
}

fn small_mix() -> Mix {
    Mix {
        max_record: 300 << 10,
        stream_cap: 2 << 20,
        sync_every: 4,
        reclaim_pct: 8,
        ..Mix::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Power loss
// ---------------------------------------------------------------------------------------------

/// The smallest form of the bug the in-process power-loss test runs into: dropping a store
/// (a clean shutdown, or a process dying through unwinding) after a flush but before a sync
/// persists catalog rows that name chunks which were never stored. redb's `Database::drop`
/// makes pending non-durable commits durable, and the store's drop neither syncs nor discards
/// them.
#[test]
fn drop_after_flush_without_sync_leaves_no_dangling_references() {
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let synced = fill(1, 50_000);
    {
        let store = open(dir.path(), mem.clone(), StoreConfig::default()).unwrap();
        let s = store.open_stream(StreamId(1)).unwrap();
        s.append_record(&synced).unwrap();
        s.sync().unwrap();
        s.append_record(&fill(2, 100_000)).unwrap();
        s.flush().unwrap();
    }
    let store = open(dir.path(), mem, StoreConfig::default()).unwrap();
    let s = store.open_stream(StreamId(1)).unwrap();
    let mut buf = vec![0u8; s.len() as usize];
    let read = s.read_at(0, &mut buf);
    let scrub = store.scrub(&mut |_, _| {}).unwrap();
    assert!(
        scrub.is_clean() && read.is_ok(),
        "after flush + drop the stream is {} bytes (synced: {}), read: {:?}, scrub damage: {} ranges, first {:?}",
        s.len(),
        synced.len(),
        read.err(),
        scrub.damage.len(),
        scrub.damage.first()
    );
    // Either the flushed bytes were made durable properly, or the stream is back at its sync.
    assert!(buf.starts_with(&synced));
}

/// `ChunkStore::sync` makes durable "everything every stream has flushed". A stream handle
/// dropped after its flush but before the sync takes its open pack builder (and the only copy of
/// its new chunks) with it; the sync then commits references to chunks that were never stored.
#[test]
fn dropping_a_stream_handle_before_sync_keeps_its_flushed_data() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(
        dir.path(),
        Arc::new(MemoryBackend::new()),
        StoreConfig::default(),
    )
    .unwrap();
    let data = fill(1, 100_000);
    {
        let s = store.open_stream(StreamId(1)).unwrap();
        s.append_record(&data).unwrap();
        s.flush().unwrap();
    }
    store.sync().unwrap();
    let s = store.open_stream(StreamId(1)).unwrap();
    assert_eq!(s.len(), data.len() as u64);
    let mut buf = vec![0u8; data.len()];
    let read = s.read_at(0, &mut buf);
    assert!(
        read.is_ok(),
        "flushed and synced data is lost: {:?}",
        read.err()
    );
    assert!(buf == data);
    assert_clean(&store, "after sync");
}

/// Dropping the last handle of a store must close it: reopening right away must work. (Pins a
/// bug: the pack uploader thread held a strong reference while it uploaded, so the store — and
/// its catalog database — outlived the drop, and the reopen failed with "Database already
/// open".)
#[test]
fn reopen_right_after_drop_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> =
        Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
    let config = StoreConfig {
        pack_target: 64 << 10,
        ..StoreConfig::default()
    };
    for round in 0..20u64 {
        let store = match open(dir.path(), backend.clone(), config.clone()) {
            Ok(s) => s,
            Err(e) => panic!("round {round}: reopening right after drop failed: {e:?}"),
        };
        let s = store.open_stream(StreamId(round)).unwrap();
        for i in 0..8 {
            s.append_record(&fill(round * 100 + i * 3 + 1, 100_000))
                .unwrap();
        }
        s.sync().unwrap();
        for i in 8..12 {
            // Sealed packs are queued for the uploader; the drop races with it.
            s.append_record(&fill(round * 100 + i * 3 + 1, 100_000))
                .unwrap();
        }
        drop(s);
        drop(store);
    }
}

/// Opens a store just dropped (a dropped store is closed: no waiting, no retry). A
/// crash-induced failure of the open itself (recovery's orphan deletion) is returned as `None`.
fn open_after_drop(
    dir: &Path,
    backend: Arc<dyn Backend>,
    config: StoreConfig,
) -> Option<ChunkStore> {
    match open(dir, backend, config) {
        Ok(s) => Some(s),
        Err(e) if e.is_transient() => None,
        Err(e) => panic!("open: {e:?}"),
    }
}

/// In-process power loss: `CrashBackend` stops applying operations after a random number of
/// puts/deletes; the store is then dropped (the process dies), the back end "reboots", and the
/// reopened store must be scrub-clean and hold exactly what the last successful sync covered.
/// Sometimes the crash hits during the next open's recovery instead.
#[test]
fn power_loss_in_process_keeps_exactly_the_synced_state() {
    let cycles = env_u64("REEL_FAULT_CYCLES", 100);
    let dir = tempfile::tempdir().unwrap();
    let mem = Arc::new(MemoryBackend::new());
    let crash = Arc::new(CrashBackend::new(mem.clone()));
    let mut state = Model::empty();
    let mut crashes = 0;
    let mut syncs = 0;
    for cycle in 0..cycles {
        let seed = 1000 + cycle;
        let mut rng = Rng::new(seed);
        if rng.chance(15) {
            // Power fails during recovery (orphan deletion) itself.
            crash.arm_crash_after(rng.range(1, 3));
            drop(open_after_drop(dir.path(), crash.clone(), config_for(seed)));
            crash.reset();
        }
        let store = open_after_drop(dir.path(), crash.clone(), config_for(seed))
            .expect("open after reboot");
        assert_clean(&store, &format!("at the start of cycle {cycle}"));
        if let Err(e) = compare(&store, &state) {
            panic!(
                "cycle {cycle}: after power loss the store is not at its last synced state: {e}"
            );
        }
        let mut d = Driver::new(store, &state, seed, small_mix()).unwrap();
        crash.arm_crash_after(rng.range(1, 30));
        for _ in 0..1000 {
            match d.step(&mut NoHooks) {
                Ok(_) => {}
                Err(e) => {
                    assert!(
                        crash.crashed(),
                        "cycle {cycle}: failed before the crash: {e:?}"
                    );
                    assert!(
                        e.is_transient(),
                        "cycle {cycle}: a back-end failure surfaced as {e:?}"
                    );
                    crashes += 1;
                    break;
                }
            }
        }
        syncs += d.syncs;
        state = d.synced.clone();
        d.store.abandon(); // the process dies: no clean close
        drop(d);
        crash.reset(); // power returns
    }
    assert!(
        crashes * 10 >= cycles * 9,
        "only {crashes} of {cycles} cycles reached the crash"
    );
    assert!(syncs >= cycles, "only {syncs} syncs in {cycles} cycles");
    let store = open_after_drop(dir.path(), crash, StoreConfig::default()).expect("final open");
    assert_clean(&store, "at the end");
    compare(&store, &state).unwrap();
}

/// Power loss with the process dying without destructors (no clean catalog close): a worker
/// process runs the workload over `CrashBackend(LocalBackend)` and calls `exit` at the first
/// failure. The reopened store must hold exactly the state of the last sync that returned.
#[test]
fn power_loss_with_process_exit_keeps_exactly_the_synced_state() {
    // A process per cycle, with real fsyncs: fewer cycles than the in-process test by default.
    let cycles = env_u64("REEL_FAULT_CYCLES", 100) * 2 / 5;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut state = Model::empty();
    write_state(dir, &state);
    let (mut crashes, mut syncs, mut advanced) = (0, 0, 0);
    let mut rng = Rng::new(77);
    for cycle in 0..cycles {
        let seed = 5000 + cycle;
        let crash_after = rng.range(1, 16);
        let _ = std::fs::remove_file(dir.join("journal"));
        let out = Command::new(env!("CARGO_BIN_EXE_reel-crash-worker"))
            .args([
                "power",
                dir.to_str().unwrap(),
                &seed.to_string(),
                &crash_after.to_string(),
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cycle {cycle} (seed {seed}, crash after {crash_after}): worker failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(dir.join("journal")).unwrap_or_default();
        let view = read_journal(&text, &state).unwrap();
        let how = view
            .crashed
            .clone()
            .expect("the worker journals how it ended");
        if how != "C none" {
            crashes += 1;
        }
        syncs += view.syncs_done;
        let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&dir.join("objects")).unwrap());
        let store = open(dir, backend, StoreConfig::default()).unwrap();
        assert_clean(
            &store,
            &format!("after power loss in cycle {cycle} (seed {seed})"),
        );
        if let Err(e) = compare(&store, &view.done) {
            panic!("cycle {cycle} (seed {seed}, crash after {crash_after}, {how}): {e}");
        }
        if view.done != state {
            advanced += 1;
        }
        state = view.done;
        write_state(dir, &state);
    }
    assert!(
        crashes * 10 >= cycles * 9,
        "only {crashes} of {cycles} cycles reached the crash"
    );
    assert!(
        syncs >= cycles / 2 && advanced * 3 >= cycles,
        "{syncs} syncs, {advanced} cycles advanced"
    );
}

// ---------------------------------------------------------------------------------------------
// I/O errors
// ---------------------------------------------------------------------------------------------

/// Syncs until one succeeds, turning faults off after a few failures so it must.
fn sync_through(store: &ChunkStore, flaky: &FlakyBackend<Arc<MemoryBackend>>) {
    for attempt in 0.. {
        match store.sync() {
            Ok(()) => break,
            Err(e) => {
                assert!(
                    e.is_transient() && !matches!(e, StoreError::NoSpace(_)),
                    "sync failed with {e:?}"
                );
                if attempt >= 3 {
                    flaky.set_enabled(false);
                }
                assert!(attempt < 10, "sync keeps failing with faults off: {e:?}");
            }
        }
    }
    flaky.set_enabled(true);
}

fn open_through(
    dir: &Path,
    flaky: &Arc<FlakyBackend<Arc<MemoryBackend>>>,
    seed: u64,
) -> ChunkStore {
    for attempt in 0..20 {
        match open(dir, flaky.clone(), config_for(seed)) {
            Ok(s) => return s,
            Err(e) => assert!(e.is_transient(), "open attempt {attempt} failed with {e:?}"),
        }
    }
    panic!("open failed 20 times");
}

#[test]
fn random_io_errors_lose_nothing_that_was_synced() {
    for seed in [11u64, 12, 13] {
        let dir = tempfile::tempdir().unwrap();
        let mem = Arc::new(MemoryBackend::new());
        let rates = FaultRates {
            put: 0.05,
            put_after: 0.05,
            get: 0.02,
            delete: 0.02,
            list: 0.05,
        };
        let flaky = Arc::new(FlakyBackend::new(mem.clone(), rates, seed));
        let mut d = Driver::new(
            open_through(dir.path(), &flaky, seed),
            &Model::empty(),
            seed,
            small_mix(),
        )
        .unwrap();
        let (mut errors, mut reopens) = (0, 0);
        for step in 0..400u64 {
            match d.step(&mut NoHooks) {
                Ok(_) => {}
                Err(e) => {
                    assert!(
                        e.is_transient() && !matches!(e, StoreError::NoSpace(_)),
                        "seed {seed} step {step}: injected I/O errors surfaced as {e:?}"
                    );
                    errors += 1;
                    // Writers refuse data while an upload has failed: a sync stores it.
                    sync_through(&d.store, &flaky);
                }
            }
            if step % 100 == 99 && !d.sync_pending() {
                // Close cleanly (everything flushed and synced) and reopen with faults on.
                for (_, s) in &d.streams {
                    s.flush().unwrap();
                }
                sync_through(&d.store, &flaky);
                let cur = d.cur.clone();
                drop(d);
                let store = open_through(dir.path(), &flaky, seed);
                d = Driver::new(store, &cur, seed + 1000 * (reopens + 1), small_mix()).unwrap();
                reopens += 1;
            }
        }
        assert!(
            errors >= 5,
            "seed {seed}: only {errors} operations failed: the test injected too little"
        );
        assert!(
            flaky.injected_faults() >= 10,
            "seed {seed}: {} faults",
            flaky.injected_faults()
        );
        flaky.set_enabled(false);
        for (_, s) in &d.streams {
            s.flush().unwrap();
        }
        d.store.sync().unwrap();
        let (store, model) = (d.store.clone(), d.cur.clone());
        drop(d);
        compare(&store, &model).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_clean(&store, "after the flaky run");
        drop(store);
        let store = open(dir.path(), flaky.clone(), StoreConfig::default()).unwrap();
        compare(&store, &model).unwrap_or_else(|e| panic!("seed {seed} after reopen: {e}"));
        assert_clean(&store, "after reopening");
        // Nothing unreferenced is left behind in the back end: every object is a cataloged pack.
        assert_eq!(
            mem.object_count() as u64,
            store.stats().unwrap().packs,
            "seed {seed}: stray objects"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Disk full
// ---------------------------------------------------------------------------------------------

struct Filler {
    rng: Rng,
    key: u64,
    model: Model,
}

impl Filler {
    fn new(seed: u64) -> Filler {
        Filler {
            rng: Rng::new(seed),
            key: seed << 32,
            model: Model::empty(),
        }
    }
    /// A fresh incompressible record.
    fn record(&mut self) -> Rec {
        self.key += 1;
        // Keys ≢ 0 mod 3 are noise.
        if self.key.is_multiple_of(3) {
            self.key += 1;
        }
        (self.key, self.rng.range(64 << 10, 256 << 10) as u32)
    }
}

fn append(
    store_streams: &BTreeMap<u64, reel_chunkstore::Stream>,
    f: &mut Filler,
    id: u64,
) -> Result<(), StoreError> {
    let rec = f.record();
    let s = &store_streams[&id];
    s.append_record(&fill(rec.0, rec.1 as usize))?;
    let recs = f.model.streams.get_mut(&id).unwrap();
    recs.push(rec);
    s.set_sidecar(worker::SIDECAR_KEY, Some(worker::summary(recs)));
    Ok(())
}

fn check_prefix(s: &reel_chunkstore::Stream, recs: &[Rec]) {
    let len = worker::total_len(recs);
    let mut buf = vec![0u8; len as usize];
    s.read_at(0, &mut buf).unwrap();
    assert!(
        buf == expected_range(recs, 0, len),
        "synced data of stream {:?} reads back wrong",
        s.id()
    );
}

/// Fills a quota'd back end until the store reports `NoSpace`; returns the store, its open
/// streams, the quota, the model of everything accepted and the model as of the last sync.
type Full = (
    ChunkStore,
    BTreeMap<u64, reel_chunkstore::Stream>,
    Arc<QuotaBackend<Arc<MemoryBackend>>>,
    Filler,
    Model,
);

fn fill_until_full(dir: &Path, quota_bytes: u64) -> Full {
    let mem = Arc::new(MemoryBackend::new());
    let quota = Arc::new(QuotaBackend::new(mem, quota_bytes).unwrap());
    // Small packs: background uploads fail too, not only sync.
    let config = StoreConfig {
        pack_target: 512 << 10,
        ..StoreConfig::default()
    };
    let store = open(dir, quota.clone(), config).unwrap();
    let streams: BTreeMap<u64, _> = [1u64, 2]
        .iter()
        .map(|&i| (i, store.open_stream(StreamId(i)).unwrap()))
        .collect();
    let mut f = Filler::new(3);
    let mut synced = Model::empty();
    for n in 0..1000 {
        let r = append(&streams, &mut f, 1 + n % 2).and_then(|()| {
            if n % 3 == 2 {
                streams[&1].flush()?;
                streams[&2].sync()?;
                synced = f.model.clone();
            }
            Ok(())
        });
        match r {
            Ok(()) => {}
            Err(StoreError::NoSpace(_)) => return (store, streams, quota, f, synced),
            Err(e) => panic!("disk full must be reported as NoSpace, got {e:?}"),
        }
    }
    panic!("never ran out of space");
}

#[test]
fn disk_full_reports_no_space_keeps_data_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let quota_bytes = 3 << 20;
    let (store, streams, quota, mut f, synced) = fill_until_full(dir.path(), quota_bytes);
    assert!(
        worker::total_len(synced.recs(1)) > 0,
        "something was synced before the disk filled"
    );
    assert!(quota.used_bytes() <= quota_bytes);

    // While full: appends are refused whole, sync keeps failing with NoSpace.
    let len_before = streams[&1].len();
    let e = append(&streams, &mut f, 1).unwrap_err();
    assert!(
        matches!(e, StoreError::NoSpace(_)),
        "append while full: {e:?}"
    );
    assert_eq!(
        streams[&1].len(),
        len_before,
        "a refused append appended something"
    );
    let e = store.sync().unwrap_err();
    assert!(
        matches!(e, StoreError::NoSpace(_)),
        "sync while full: {e:?}"
    );
    // What was synced is intact.
    for id in [1, 2] {
        check_prefix(&streams[&id], synced.recs(id));
    }
    // Nothing synced is damaged. (Bytes accepted since the last sync reference chunks whose
    // packs are still waiting for space; scrub's view of those is checked separately, by
    // `scrub_does_not_report_data_waiting_for_upload_as_damaged`.)
    let r = store.scrub(&mut |_, _| {}).unwrap();
    assert!(
        r.bad_chunks.is_empty(),
        "stored chunks went bad while full: {:?}",
        r.bad_chunks.first()
    );
    for d in &r.damage {
        assert!(
            d.offset >= synced.len(d.stream.0),
            "synced bytes reported damaged while the disk is full: {d:?} (synced length {})",
            synced.len(d.stream.0)
        );
    }

    // Space returns: sync stores what was accepted before the error, and writing continues.
    quota.set_quota(u64::MAX);
    store.sync().unwrap();
    for _ in 0..6 {
        append(&streams, &mut f, 2).unwrap();
    }
    streams[&1].flush().unwrap();
    streams[&2].sync().unwrap();
    for id in [1, 2] {
        check_prefix(&streams[&id], f.model.recs(id));
    }
    drop(streams);
    compare(&store, &f.model).unwrap();
    assert_clean(&store, "after space returned");
    let backend = store.backend().clone();
    drop(store);
    let store = open(dir.path(), backend, StoreConfig::default()).unwrap();
    compare(&store, &f.model).unwrap();
    assert_clean(&store, "after reopening");
}

/// Scrub "may run with everything" (lib.rs): bytes a stream has flushed whose chunks are still
/// in an open pack (or a pack waiting for upload) are healthy, not damaged.
#[test]
fn scrub_does_not_report_data_waiting_for_upload_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(
        dir.path(),
        Arc::new(MemoryBackend::new()),
        StoreConfig::default(),
    )
    .unwrap();
    let s = store.open_stream(StreamId(1)).unwrap();
    s.append_record(&fill(1, 100_000)).unwrap();
    s.flush().unwrap();
    let r = store.scrub(&mut |_, _| {}).unwrap();
    assert!(
        r.damage.is_empty(),
        "{} ranges of healthy, flushed data reported damaged, first {:?}",
        r.damage.len(),
        r.damage.first()
    );
    s.sync().unwrap();
    assert_clean(&store, "after sync");
}

/// With accepted data waiting for space, reclaim refuses with a clear `NoSpace` (its durable
/// commit would make references to the unstored data durable) and changes nothing; once space
/// is freed outside reel, the waiting data is stored and reclaim frees what was deleted.
#[test]
fn disk_full_then_delete_and_reclaim_frees_space() {
    let dir = tempfile::tempdir().unwrap();
    let (store, streams, quota, mut f, synced) = fill_until_full(dir.path(), 3 << 20);
    // Give up stream 1 (synced data is its bulk), keep stream 2.
    drop(streams);
    store.delete_stream(StreamId(1)).unwrap();
    let used = quota.used_bytes();
    match store.reclaim(0.5, &mut |_, _| {}) {
        Err(StoreError::NoSpace(why)) => {
            assert!(why.contains("free space"), "unhelpful error: {why}");
        }
        other => panic!("reclaim on a full disk with unstored data: {other:?}"),
    }
    assert_eq!(
        quota.used_bytes(),
        used,
        "a refused reclaim changed the back end"
    );
    // Space is freed outside reel (here: the quota grows by a little).
    quota.set_quota(quota.quota() + (1 << 20));
    let r = store
        .reclaim(0.5, &mut |_, _| {})
        .expect("reclaim after space was freed");
    assert!(
        r.bytes_freed > 0 && quota.used_bytes() < used,
        "reclaim freed nothing: {r:?}"
    );
    store.sync().unwrap();
    f.model.streams.insert(1, Vec::new());
    let _ = synced;
    compare(&store, &f.model).unwrap();
    assert_clean(&store, "after reclaiming on a full disk");
}

// ---------------------------------------------------------------------------------------------
// Damaged pack objects
// ---------------------------------------------------------------------------------------------

enum Damage {
    FlipBits,
    Truncate,
    Delete,
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    model: Model,
    /// Stream 1's pack file.
    pack: std::path::PathBuf,
}

/// Stream 1: eight records (one repeated); stream 2: unrelated records; stream 3: one record
/// stream 1 also holds. Stream 1 is synced first, so its pack is the first pack file.
fn damaged_fixture(compressible: bool) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&dir.join("objects")).unwrap());
    let store = open(&dir, backend, StoreConfig::default()).unwrap();
    let key = |n: u64| if compressible { n * 3 } else { n * 3 + 1 };
    let mut model = Model::empty();
    let s1: Vec<Rec> = (1..=7)
        .map(|n| (key(n), 150_000 + n as u32 * 1000))
        .chain([(key(2), 152_000)])
        .collect();
    let s2: Vec<Rec> = (100..104).map(|n| (key(n), 100_000)).collect();
    let s3: Vec<Rec> = vec![s1[4]];
    for (id, recs) in [(1u64, &s1), (2, &s2), (3, &s3)] {
        let s = store.open_stream(StreamId(id)).unwrap();
        for r in recs {
            s.append_record(&fill(r.0, r.1 as usize)).unwrap();
        }
        s.set_sidecar(worker::SIDECAR_KEY, Some(worker::summary(recs)));
        s.sync().unwrap();
        model.streams.insert(id, recs.clone());
    }
    drop(store);
    let mut packs: Vec<_> = std::fs::read_dir(dir.join("objects/packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    packs.sort();
    assert!(
        packs.len() >= 2,
        "expected a pack per stream, found {packs:?}"
    );
    Fixture {
        pack: packs[0].clone(),
        _tmp: tmp,
        dir,
        model,
    }
}

/// Reads `stream` in small pieces; returns which pieces failed (as Corrupt: anything else
/// fails the test) and checks every piece that succeeded returned the right bytes.
fn scan(store: &ChunkStore, id: u64, recs: &[Rec], piece: u64) -> Vec<(u64, u64)> {
    let s = store.open_stream(StreamId(id)).unwrap();
    let len = worker::total_len(recs);
    let want = expected_range(recs, 0, len);
    let mut bad = Vec::new();
    let mut off = 0;
    while off < len {
        let n = piece.min(len - off);
        let mut buf = vec![0u8; n as usize];
        match s.read_at(off, &mut buf) {
            Ok(()) => assert!(
                buf[..] == want[off as usize..(off + n) as usize],
                "stream {id}: WRONG DATA at {off}"
            ),
            Err(StoreError::Corrupt(_)) => bad.push((off, off + n)),
            Err(e) => {
                panic!("stream {id}: reading damaged data at {off} failed with {e:?}, not Corrupt")
            }
        }
        off += n;
    }
    bad
}

fn check_damage(kind: Damage, compressible: bool) {
    let fx = damaged_fixture(compressible);
    let bytes = std::fs::read(&fx.pack).unwrap();
    match kind {
        Damage::FlipBits => {
            let mut b = bytes.clone();
            let at = b.len() / 2;
            for i in 0..4 {
                b[at + i * 7] ^= 0x5a;
            }
            std::fs::write(&fx.pack, b).unwrap();
        }
        Damage::Truncate => std::fs::write(&fx.pack, &bytes[..bytes.len() / 2]).unwrap(),
        Damage::Delete => std::fs::remove_file(&fx.pack).unwrap(),
    }
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&fx.dir.join("objects")).unwrap());
    let store = open(&fx.dir, backend, StoreConfig::default()).unwrap();

    // A whole read of the damaged stream fails as Corrupt.
    {
        let s = store.open_stream(StreamId(1)).unwrap();
        let mut all = vec![0u8; s.len() as usize];
        match s.read_at(0, &mut all) {
            Err(StoreError::Corrupt(_)) => {}
            other => panic!("reading the damaged stream returned {other:?}, not Corrupt"),
        }
    }
    let report = store.scrub(&mut |_, _| {}).unwrap();
    assert!(
        !report.bad_chunks.is_empty() && !report.damage.is_empty(),
        "scrub saw nothing: {report:?}"
    );
    let mut damaged: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for d in &report.damage {
        damaged
            .entry(d.stream.0)
            .or_default()
            .push((d.offset, d.offset + d.len));
    }
    assert!(
        damaged.contains_key(&1),
        "scrub does not name stream 1: {:?}",
        report.damage
    );
    assert!(
        !damaged.contains_key(&2),
        "scrub names the untouched stream 2: {:?}",
        damaged.get(&2)
    );
    for id in [1u64, 2, 3] {
        let recs = fx.model.recs(id);
        let bad = scan(&store, id, recs, 1024);
        let ranges = damaged.get(&id).cloned().unwrap_or_default();
        let overlaps = |(a, b): (u64, u64)| ranges.iter().any(|&(s, e)| s < b && a < e);
        for &p in &bad {
            assert!(
                overlaps(p),
                "stream {id}: bytes {p:?} are unreadable but scrub reports no damage there"
            );
        }
        if matches!(kind, Damage::FlipBits) {
            // Chunk-exact: everything scrub reports damaged is unreadable, and only that.
            let len = worker::total_len(recs);
            let mut off = 0;
            while off < len {
                let p = (off, (off + 1024).min(len));
                assert_eq!(
                    overlaps(p),
                    bad.contains(&p),
                    "stream {id}: scrub and reads disagree about {p:?}"
                );
                off += 1024;
            }
        }
        if id == 2 {
            assert!(
                bad.is_empty(),
                "the untouched stream 2 has unreadable bytes {bad:?}"
            );
        }
        if id == 1 && matches!(kind, Damage::FlipBits) {
            let lost: u64 = ranges.iter().map(|(s, e)| e - s).sum();
            assert!(
                lost * 4 < worker::total_len(recs),
                "a few flipped bits damaged {lost} bytes"
            );
        }
    }
    drop(store);
}

#[test]
fn flipped_bits_in_a_raw_pack_are_reported_never_returned() {
    check_damage(Damage::FlipBits, false);
}

#[test]
fn flipped_bits_in_a_compressed_pack_are_reported_never_returned() {
    check_damage(Damage::FlipBits, true);
}

#[test]
fn truncated_pack_is_reported_never_returned() {
    check_damage(Damage::Truncate, false);
}

#[test]
fn deleted_pack_is_reported_never_returned() {
    check_damage(Damage::Delete, false);
}
