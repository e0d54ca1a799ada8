//! SIGKILL crash test: a worker process (`src/bin/reel-crash-worker.rs`) runs a random workload
//! on a store in a directory and is killed with SIGKILL at a random moment; this process then
//! reopens the store and checks it against the worker's journal: scrub must be clean and every
//! stream must hold exactly the state of the last completed sync, or of the sync in progress
//! when the kill hit (the same one for all streams: a sync is atomic across streams). The next
//! worker continues on the same directory, so the store goes through hundreds of crashes and
//! recoveries in a row.
//!
//! `REEL_CRASH_KILLS` sets the number of kills (default 200, about a minute on 2 cores);
//! `REEL_CRASH_SEED` the base seed. A longer soak:
//!
//! ```text
//! REEL_CRASH_KILLS=5000 cargo test -p reel-chunkstore --release --test crash -- --nocapture
//! ```
//!
//! On failure the store directory is kept and its path printed, with the seeds to replay.

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reel_backend::{Backend, LocalBackend};
use reel_chunkstore::{ChunkStore, StoreConfig};
use worker::{
    Model, Pace, Reaper, Rng, assert_work_done, check_after_kill, compare, env_u64, read_journal,
    read_state, write_state,
};

/// What a run stores through.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// The local back end, no journal.
    Plain,
    /// The local back end with the catalog journal.
    Journal,
    /// The journal, and the objects behind a write-back cache (object storage's shape).
    Cached,
}

impl Mode {
    fn env(self) -> &'static str {
        match self {
            Mode::Plain => "0",
            Mode::Journal => "1",
            Mode::Cached => "cache",
        }
    }
}

fn open_store(dir: &Path, mode: Mode) -> ChunkStore {
    let backend = worker::backend_for(dir, mode == Mode::Cached);
    open_catalog(backend, &dir.join("catalog"), mode != Mode::Plain).expect("reopen after kill")
}

fn open_catalog(
    backend: Arc<dyn Backend>,
    catalog: &Path,
    journal: bool,
) -> reel_chunkstore::Result<ChunkStore> {
    let config = StoreConfig {
        journal,
        ..StoreConfig::default()
    };
    ChunkStore::open(catalog, backend, config)
}

#[derive(Default, Debug)]
struct Tally {
    kills: u64,
    /// Iterations after which the store held a newer state than before.
    advanced: u64,
    /// The store matched an intent whose "done" line the kill prevented.
    matched_pending_intent: u64,
    /// A sync was in flight (intent without done) at the kill.
    killed_in_sync: u64,
    syncs: u64,
    torn_journal_lines: u64,
    max_store_bytes: u64,
    /// Cycles whose catalog was also rebuilt from the objects alone (journal runs).
    recovered: u64,
    /// Of those, rebuilt from a catalog checkpoint (`checkpoint.rs`) and the journal after it.
    from_checkpoint: u64,
    /// Catalog compactions completed, and kills that landed inside one.
    compactions: u64,
    killed_in_compaction: u64,
}

/// One kill-and-check cycle. Returns an error describing what is wrong with the store.
fn cycle(
    dir: &Path,
    seed: u64,
    sleep: Duration,
    mode: Mode,
    compact_pct: u64,
    tally: &mut Tally,
) -> Result<(), String> {
    let start = read_state(dir);
    let _ = std::fs::remove_file(dir.join("journal"));
    let stderr = std::fs::File::create(dir.join("worker.err")).map_err(|e| e.to_string())?;
    let child = Command::new(env!("CARGO_BIN_EXE_reel-crash-worker"))
        .arg("kill")
        .arg(dir)
        .arg(seed.to_string())
        .env("REEL_CRASH_JOURNAL", mode.env())
        .env("REEL_CRASH_COMPACT", compact_pct.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("spawning worker: {e}"))?;
    let reaper = Reaper(Some(child));
    std::thread::sleep(sleep);
    reaper.kill(&dir.join("worker.err"))?;
    tally.kills += 1;

    let text = std::fs::read_to_string(dir.join("journal")).unwrap_or_default();
    let view = read_journal(&text, &start)?;
    tally.syncs += view.syncs_done;
    tally.torn_journal_lines += view.torn_lines;
    if view.pending_intent.is_some() {
        tally.killed_in_sync += 1;
    }
    tally.compactions += view.compactions;
    if view.in_compaction {
        tally.killed_in_compaction += 1;
    }

    let store = open_store(dir, mode);
    let (state, interrupted) = check_after_kill(&store, &view)?;
    if interrupted {
        tally.matched_pending_intent += 1;
    }
    if state != start {
        tally.advanced += 1;
    }
    // Keep the store from growing without bound (and reclaim right after recovery).
    store
        .reclaim(0.5, &mut |_, _| {})
        .map_err(|e| format!("reclaim after recovery: {e}"))?;
    tally.max_store_bytes = tally
        .max_store_bytes
        .max(store.stats().map_err(|e| e.to_string())?.stored_bytes);
    let fingerprint = store.catalog_fingerprint().map_err(|e| e.to_string())?;
    if mode == Mode::Cached {
        // Everything queued (also what the kill left in the cache) reaches the remote.
        store
            .backend()
            .flush()
            .map_err(|e| format!("uploading the cache's queue: {e}"))?;
    }
    drop(store);
    if mode != Mode::Plain {
        // The objects alone (packs and journal, no local catalog) rebuild the same catalog.
        let fresh = dir.join("recovered");
        let _ = std::fs::remove_dir_all(&fresh);
        let objects = dir.join(if mode == Mode::Cached {
            "remote"
        } else {
            "objects"
        });
        let backend: Arc<dyn Backend> =
            Arc::new(LocalBackend::open(&objects).expect("open objects"));
        let manifests = backend
            .list("catalog/checkpoint/")
            .map_err(|e| e.to_string())?
            .iter()
            .filter(|o| o.key.as_str().ends_with(".ckpt"))
            .count();
        if manifests > 0 {
            tally.from_checkpoint += 1;
        }
        let recovered = open_catalog(backend, &fresh, true)
            .map_err(|e| format!("recovery from the objects alone: {e}"))?;
        let again = recovered.catalog_fingerprint().map_err(|e| e.to_string())?;
        if again != fingerprint {
            return Err("the catalog recovered from the journal differs from the local one".into());
        }
        compare(&recovered, &state).map_err(|e| format!("recovered catalog: {e}"))?;
        drop(recovered);
        let _ = std::fs::remove_dir_all(&fresh);
        tally.recovered += 1;
    }
    write_state(dir, &state);
    Ok(())
}

#[test]
fn sigkill_at_random_moments_never_loses_synced_data() {
    kill_run(env_u64("REEL_CRASH_KILLS", 200), Mode::Plain, 0);
}

/// A service manager's SIGKILL at the end of its stop timeout may land inside the catalog
/// file's compaction (a clean stop compacts, `catalog_file::CompactMoment`): redb's compaction
/// is a series of durable commits, so the next open finds the last synced state, every row
/// (the checks of every cycle), and a file that opens (redb rebuilds its allocator state).
/// Two syncs in five are followed by a compaction of any spare page.
#[test]
fn sigkill_during_catalog_compaction_never_loses_synced_data() {
    kill_run(env_u64("REEL_CRASH_COMPACT_KILLS", 100), Mode::Plain, 40);
}

/// The same with the catalog journal (as on object storage): after every kill the catalog is
/// also rebuilt from the objects alone and must equal the local one.
#[test]
fn sigkill_with_the_catalog_journal_never_loses_synced_data_and_recovers_from_objects() {
    kill_run(env_u64("REEL_CRASH_JOURNAL_KILLS", 100), Mode::Journal, 0);
}

/// The same through a write-back cache in front of the objects (a local directory standing in
/// for the bucket; `tests/object_storage.rs` in the reel crate uses a real S3 server): kills land
/// while uploads are queued and writers wait for the cache. After each, the restarted store
/// uploads the queue and the remote alone rebuilds the catalog.
#[test]
fn sigkill_through_a_write_back_cache_never_loses_synced_data_and_recovers_from_the_remote() {
    kill_run(env_u64("REEL_CRASH_CACHE_KILLS", 100), Mode::Cached, 0);
}

fn kill_run(kills: u64, mode: Mode, compact_pct: u64) {
    let base = env_u64("REEL_CRASH_SEED", 0xC0FFEE);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write_state(dir, &Model::empty());
    let mut rng = Rng::new(base);
    let mut tally = Tally::default();
    let mut pace = Pace::new(1.0);
    let began = Instant::now();
    for i in 0..kills {
        let seed = base.wrapping_add(i).wrapping_mul(0x9E37_79B9);
        // Mostly early kills (startup, first syncs), some later ones.
        let ms = if rng.chance(70) {
            rng.range(5, 120)
        } else {
            rng.range(120, 300)
        };
        let ms = pace.stretched(ms);
        let (syncs_before, advanced_before) = (tally.syncs, tally.advanced);
        let result = cycle(
            dir,
            seed,
            Duration::from_millis(ms),
            mode,
            compact_pct,
            &mut tally,
        );
        pace.note(tally.syncs - syncs_before, tally.advanced > advanced_before);
        if let Err(e) = result {
            let kept = tmp.keep();
            panic!(
                "kill {i} (worker seed {seed}, killed after {ms} ms): {e}\n\
                 store kept at {} (REEL_CRASH_SEED={base})",
                kept.display()
            );
        }
    }
    eprintln!(
        "{tally:?} in {:.1?}; kill moments stretched up to {:.1}x",
        began.elapsed(),
        pace.max_stretch
    );
    assert_eq!(tally.kills, kills);
    assert_work_done(kills, tally.syncs, kills, tally.advanced);
    if kills >= 100 {
        assert!(
            tally.killed_in_sync > 0,
            "no kill landed inside a sync in {kills} runs"
        );
    }
    if compact_pct > 0 && kills >= 100 {
        assert!(
            tally.compactions > 0 && tally.killed_in_compaction > 0,
            "{} compactions, {} kills inside one: the kills missed the compactions",
            tally.compactions,
            tally.killed_in_compaction
        );
    }
    // The final state is still readable by a fresh store.
    if mode != Mode::Plain {
        assert_eq!(tally.recovered, kills, "every cycle was recovered");
        if kills >= 50 {
            assert!(
                tally.from_checkpoint > 0,
                "no recovery started from a catalog checkpoint"
            );
        }
    }
    let store = open_store(dir, mode);
    compare(&store, &read_state(dir)).expect("final state");
}
