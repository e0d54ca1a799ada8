//! SIGKILL tests with a real bucket: the chunk store, journal on, behind the write-back cache,
//! over a real versitygw (started by `reel-s3test`, never a mock). A child process runs the
//! random workload of `src/bin/reel-crash-worker.rs` (appends, truncates, flushes, syncs and
//! reclaims on three streams) and is SIGKILLed at a random moment: while records are written,
//! while packs and journal objects wait in the upload queue or are being uploaded, while a
//! writer waits for the cache to make room, inside a sync or a reclaim (some kills are aimed:
//! the parent waits for a sync point's intent line and kills within 15 ms). The child reaches
//! versitygw through `reel-s3test`'s `FaultProxy`: some cycles meet `503 SlowDown` for a while
//! or a slow server, and some take the server away (a real SIGKILL of versitygw and a restart
//! on the same data) around the kill. After each kill this process checks the store against
//! the child's journal of acknowledged sync points (the reference model):
//!
//! - **Restart** (both durability levels): the same data directory (cache and catalog) is
//!   reopened; scrub must be clean and every stream must hold exactly the last acknowledged
//!   state, or the state of the sync the kill interrupted. Then the queue is uploaded and the
//!   bucket alone, recovered into an empty directory, must give the same catalog and data.
//! - **Node lost** (durability `bucket`, every other cycle): the node's directory is thrown
//!   away without being opened again; the bucket alone is recovered into an empty directory and
//!   must hold the last acknowledged state (or the interrupted one). That directory is the node
//!   from then on.
//!
//! Why the store in a child process rather than `reel serve` with an iSCSI initiator: a cycle
//! has to cost about a second for 100 kills in two minutes on two shared cores, and starting
//! the server, logging in and reading every cartridge back over iSCSI costs several; the layers
//! above the store hold no state of their own across a kill (their records are catalog records,
//! `crates/reel/tests/object_storage.rs` kills a real `reel serve` on versitygw).
//!
//! The child is this test binary itself, running the ignored test `bucket_kill_child` with its
//! parameters in the environment, so no extra binary is needed.
//!
//! `REEL_KILL_CYCLES` sets the kills per durability level (default 60: 120 kills, about two
//! minutes on 2 cores); `REEL_KILL_SEED` the base seed. A soak run:
//!
//! ```text
//! REEL_KILL_CYCLES=2000 cargo test -p reel-chunkstore --release --test crash_s3 -- --nocapture
//! ```
//!
//! Lease renewal: leases belong to the server (`crates/reel/src/cluster.rs`), not to the store,
//! so the kills that land inside a renewal are that module's test
//! (`cluster/lease_kill_tests.rs`, against versitygw as well).

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reel_backend::{
    Backend, CacheConfig, RemoteCheck, S3Backend, S3Config, S3Credentials, WriteBackCache,
};
use reel_chunkstore::{ChunkStore, DurableAt, StoreConfig};
use reel_s3test::{Fault, FaultProxy, Kind, S3Server};
use worker::{
    Driver, Journal, JournalView, Mix, Model, Pace, Reaper, Rng, Step, assert_work_done,
    check_after_kill, compare, env_u64, read_journal, read_state,
};

/// Set (to the node directory) in the child's environment; the other `REEL_KILL_*` variables
/// below carry the rest of its parameters.
const CHILD_DIR: &str = "REEL_KILL_CHILD_DIR";

/// A fresh prefix (an empty store) every this many cycles, so a run covers the first openings
/// of a store (no checkpoint yet, the whole journal replayed) as well as later ones.
const CYCLES_PER_STORE: u64 = 30;

/// Percent of completed sync points after which the child runs a reclaim as its next sync point.
const RECLAIM_PCT: u64 = 20;

// ---------------------------------------------------------------------------------------------
// The stack under test: store → write-back cache → S3 back end → versitygw
// ---------------------------------------------------------------------------------------------

/// Where the bucket is and how to sign in (passed to the child in its environment).
#[derive(Clone, Debug)]
struct Bucket {
    endpoint: String,
    bucket: String,
    prefix: String,
    access_key: String,
    secret_key: String,
}

impl Bucket {
    fn of(server: &S3Server, prefix: String) -> Bucket {
        Bucket {
            endpoint: server.endpoint(),
            bucket: server.bucket().to_string(),
            prefix,
            access_key: server.access_key().to_string(),
            secret_key: server.secret_key().to_string(),
        }
    }

    fn to_env(&self, cmd: &mut Command) {
        cmd.env("REEL_KILL_ENDPOINT", &self.endpoint)
            .env("REEL_KILL_BUCKET", &self.bucket)
            .env("REEL_KILL_PREFIX", &self.prefix)
            .env("REEL_KILL_ACCESS", &self.access_key)
            .env("REEL_KILL_SECRET", &self.secret_key);
    }

    fn from_env() -> Bucket {
        let var = |n: &str| std::env::var(n).unwrap_or_else(|_| panic!("{n} is not set"));
        Bucket {
            endpoint: var("REEL_KILL_ENDPOINT"),
            bucket: var("REEL_KILL_BUCKET"),
            prefix: var("REEL_KILL_PREFIX"),
            access_key: var("REEL_KILL_ACCESS"),
            secret_key: var("REEL_KILL_SECRET"),
        }
    }

    fn backend(&self) -> Arc<dyn Backend> {
        let mut config = S3Config::new(self.bucket.clone(), self.prefix.clone());
        config.endpoint = Some(self.endpoint.clone());
        config.allow_http = true;
        config.credentials = S3Credentials::Static {
            access_key_id: self.access_key.clone(),
            secret_access_key: self.secret_key.clone(),
            session_token: None,
        };
        // Outlasts a server restart (well under a second) many times over.
        config.retry_window = Duration::from_secs(60);
        config.request_timeout = Duration::from_secs(20);
        Arc::new(S3Backend::open(&config).expect("open the S3 back end"))
    }
}

/// A write-back cache in `<node>/cache` over the bucket, set up as `reel serve` does (no remote
/// probe at put) but small, with two upload threads and fast retries, so kills land while
/// writers wait for uploads and the queue is rarely empty.
fn cache(node: &Path, bucket: &Bucket) -> Arc<WriteBackCache> {
    let config = CacheConfig {
        capacity_bytes: 6 << 20,
        upload_threads: 2,
        read_block_bytes: 256 << 10,
        remote_check: RemoteCheck::Never,
        retry_initial: Duration::from_millis(20),
        retry_max: Duration::from_millis(400),
        ..CacheConfig::default()
    };
    Arc::new(
        WriteBackCache::open(&node.join("cache"), bucket.backend(), config).expect("open cache"),
    )
}

fn store_config(durable_at: DurableAt, pack_target: usize) -> StoreConfig {
    StoreConfig {
        journal: true,
        durable_at,
        pack_target,
        // Groups of several pieces, so kills land between them (`journal.rs`).
        journal_piece_bytes: 16 << 10,
        // Checkpoints every few journal objects, in parts, so kills land in them and in the
        // deletion of the journal they replace (`checkpoint.rs`).
        checkpoint_min_bytes: 1 << 20,
        checkpoint_part_bytes: 64 << 10,
        ..StoreConfig::default()
    }
}

fn open_node(
    node: &Path,
    bucket: &Bucket,
    durable_at: DurableAt,
) -> reel_chunkstore::Result<ChunkStore> {
    let backend: Arc<dyn Backend> = cache(node, bucket);
    ChunkStore::open(
        &node.join("catalog"),
        backend,
        store_config(durable_at, 4 << 20),
    )
}

fn durability_name(d: DurableAt) -> &'static str {
    match d {
        DurableAt::Local => "local",
        DurableAt::Bucket => "bucket",
    }
}

// ---------------------------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------------------------

/// The child process: runs the workload on the node directory in `REEL_KILL_CHILD_DIR` until it
/// is killed. Journal lines as in `reel-crash-worker` (`<dir>/journal`); before the intent of a
/// reclaim sync point its number is appended to `<dir>/reclaims`, so the parent can tell which
/// kills hit a reclaim.
#[test]
#[ignore = "the child process of the bucket kill tests; they start it with its parameters"]
fn bucket_kill_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR).map(PathBuf::from) else {
        eprintln!("bucket_kill_child runs only as the child of the bucket kill tests");
        return;
    };
    let seed = env_u64("REEL_KILL_SEED", 0);
    let durable_at = match std::env::var("REEL_KILL_DURABILITY").as_deref() {
        Ok("bucket") => DurableAt::Bucket,
        _ => DurableAt::Local,
    };
    let bucket = Bucket::from_env();
    let start = read_state(&dir);
    let mut rng = Rng::new(seed ^ 0xB0C4E7);
    let pack_target = [256 << 10, 1 << 20, 4 << 20][rng.below(3) as usize];
    let backend: Arc<dyn Backend> = cache(&dir, &bucket);
    let store = ChunkStore::open(
        &dir.join("catalog"),
        backend,
        store_config(durable_at, pack_target),
    )
    .expect("open store");
    let mix = Mix {
        max_record: 512 << 10,
        stream_cap: 2 << 20,
        sync_every: 8,
        // Reclaims are sync points this loop runs itself, to mark them.
        reclaim_pct: 0,
        ..Mix::default()
    };
    let mut d = Driver::new(store, &start, seed, mix).expect("open streams");
    let mut journal = Journal::open(&dir, true);
    let mut reclaims = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("reclaims"))
        .expect("open reclaims");
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match d.step(&mut journal) {
            Ok(Step::Synced) if rng.chance(RECLAIM_PCT) => {
                // A reclaim as a sync point: every stream flushed, then one durable commit.
                for (_, s) in &d.streams {
                    s.flush().expect("flush before reclaim");
                }
                d.committed = d.cur.clone();
                d.syncs += 1;
                let n = d.syncs;
                writeln!(reclaims, "{n}").expect("write reclaims");
                reclaims.sync_data().expect("fsync reclaims");
                worker::SyncHooks::intent(&mut journal, n, &d.cur);
                d.store
                    .reclaim(0.8, &mut |_, _| {})
                    .expect("reclaim on a healthy bucket");
                d.synced = d.committed.clone();
                worker::SyncHooks::done(&mut journal, n);
            }
            Ok(_) => {}
            // The bucket may be away (a restart) but the cache and S3 client wait it out.
            Err(e) => panic!("workload step failed: {e:?}"),
        }
    }
    eprintln!("not killed within 60 s");
    std::process::exit(3);
}

// ---------------------------------------------------------------------------------------------
// The parent
// ---------------------------------------------------------------------------------------------

#[derive(Default, Debug)]
struct Tally {
    kills: u64,
    /// Kills after which the store held a newer state than before the cycle.
    advanced: u64,
    syncs: u64,
    /// A sync point was in flight (intent without done) at the kill.
    killed_in_sync: u64,
    /// Of those, reclaims.
    killed_in_reclaim: u64,
    /// The cache still held queued puts or deletes at the kill.
    killed_with_queue: u64,
    queued_at_kill: u64,
    /// The store matched the interrupted sync's state rather than the last acknowledged one.
    matched_interrupted: u64,
    /// Cycles in which the S3 server was killed and restarted; of those, kills while it was away.
    server_restarts: u64,
    killed_while_server_down: u64,
    /// Cycles whose child met `503 SlowDown` for a while, or a slow server throughout.
    slowdown_503: u64,
    /// Kills timed to land just after a sync point's intent line (inside the sync).
    aimed_at_sync: u64,
    slow_server: u64,
    /// Cycles whose node directory was thrown away and recovered from the bucket alone.
    node_lost: u64,
    /// Restart cycles also recovered from the bucket alone and compared.
    recovered_after_restart: u64,
    /// Cycles after whose kill the bucket held a catalog checkpoint (so the recoveries
    /// restored one) and, of those, journal objects the checkpoint covers not yet deleted.
    with_checkpoint: u64,
    checkpoint_debris: u64,
    stores: u64,
}

struct Run {
    server: S3Server,
    /// Between the child and the server (same port across server restarts).
    proxy: FaultProxy,
    durable_at: DurableAt,
    root: tempfile::TempDir,
    node: PathBuf,
    bucket: Bucket,
    tally: Tally,
    nodes_made: u64,
}

impl Run {
    fn new_store(&mut self) {
        if self.tally.stores > 0 {
            // A soak run must not fill the disk with the stores it is done with.
            let old = self.bucket.backend();
            for o in old.list("").expect("list the old store") {
                old.delete(&o.key).expect("delete from the old store");
            }
            let _ = std::fs::remove_dir_all(&self.node);
        }
        self.tally.stores += 1;
        self.bucket = Bucket::of(
            &self.server,
            format!("{}-{}", durability_name(self.durable_at), self.tally.stores),
        );
        self.node = self.fresh_node();
        // The parent creates the catalog, so every kill here lands in a running store (kills
        // during the creation are `sigkill_while_a_new_catalog_is_created`'s).
        drop(open_node(&self.node, &self.bucket, self.durable_at).expect("create the store"));
    }

    fn fresh_node(&mut self) -> PathBuf {
        self.nodes_made += 1;
        let p = self.root.path().join(format!("node{}", self.nodes_made));
        std::fs::create_dir_all(&p).expect("node dir");
        p
    }

    /// One kill and its checks.
    fn cycle(&mut self, seed: u64, rng: &mut Rng, pace: &Pace) -> Result<(), String> {
        let node = self.node.clone();
        let start = read_state(&node);
        let _ = std::fs::remove_file(node.join("journal"));
        let _ = std::fs::remove_file(node.join("reclaims"));
        // The child reaches the server through the fault proxy; this process goes direct.
        let via_proxy = Bucket {
            endpoint: self.proxy.endpoint(),
            ..self.bucket.clone()
        };
        // Mostly kills within the first few syncs, some later; opening the store (catch-up
        // replay, re-queued uploads, orphan deletion) is covered by the earliest ones.
        let ms = pace.stretched(if rng.chance(70) {
            rng.range(30, 250)
        } else {
            rng.range(250, 700)
        });
        let plan = rng.below(100);
        if plan < 8 {
            // A slow server: every new connection waits, so uploads lag behind the writers.
            self.tally.slow_server += 1;
            self.proxy
                .set(Fault::Delay(Duration::from_millis(rng.range(5, 40))));
        }
        let reaper = spawn_child(&node, seed, &via_proxy, self.durable_at)?;
        let mut server_down = false;
        if plan >= 90 {
            // Take the server away mid-run (uploads retry, syncs at `bucket` wait), and in half
            // of these cycles kill the child before it comes back.
            self.tally.server_restarts += 1;
            let before = ms / 2;
            std::thread::sleep(Duration::from_millis(before));
            self.server.stop();
            std::thread::sleep(Duration::from_millis(rng.range(20, 200)));
            if rng.chance(50) {
                server_down = true;
            } else {
                self.server.restart().map_err(|e| e.to_string())?;
                std::thread::sleep(Duration::from_millis(ms - before));
            }
        } else if plan >= 80 {
            // An overloaded server: `503 SlowDown` to everything for a while, around or up to
            // the kill.
            self.tally.slowdown_503 += 1;
            let before = ms / 2;
            std::thread::sleep(Duration::from_millis(before));
            self.proxy.set(Fault::Unavailable);
            let stretch = rng.range(20, 300);
            if stretch < ms - before {
                std::thread::sleep(Duration::from_millis(stretch));
                self.proxy.set(Fault::None);
                std::thread::sleep(Duration::from_millis(ms - before - stretch));
            } else {
                std::thread::sleep(Duration::from_millis(ms - before));
            }
        } else if plan >= 50 {
            // Aim at a sync point: the moments packs and the journal object are uploaded and,
            // at `bucket`, the flush waits for them (where upload order matters most).
            std::thread::sleep(Duration::from_millis(ms / 2));
            if wait_for_intent(&node.join("journal"), Duration::from_millis(600)) {
                self.tally.aimed_at_sync += 1;
                std::thread::sleep(Duration::from_micros(rng.range(0, 15_000)));
            }
        } else {
            std::thread::sleep(Duration::from_millis(ms));
        }
        reaper.kill(&node.join("child.err"))?;
        self.tally.kills += 1;
        self.proxy.set(Fault::None);
        if server_down {
            self.tally.killed_while_server_down += 1;
            self.server.restart().map_err(|e| e.to_string())?;
        }

        let text = std::fs::read_to_string(node.join("journal")).unwrap_or_default();
        let view = read_journal(&text, &start)?;
        self.tally.syncs += view.syncs_done;
        if view.pending_intent.is_some() {
            self.tally.killed_in_sync += 1;
            // Sync points are numbered 1, 2, … per child: the pending one is the last intent.
            let reclaims = std::fs::read_to_string(node.join("reclaims")).unwrap_or_default();
            if reclaims.lines().any(|l| l == view.intents.to_string()) {
                self.tally.killed_in_reclaim += 1;
            }
        }
        // What checkpoints the killed child left in the bucket (`checkpoint.rs`).
        let catalog_keys = |prefix: &str| -> Result<Vec<String>, String> {
            Ok(self
                .bucket
                .backend()
                .list(prefix)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|o| o.key.as_str().to_string())
                .collect())
        };
        let newest_checkpoint = catalog_keys("catalog/checkpoint/")?
            .iter()
            .filter_map(|k| {
                let hex = k
                    .strip_prefix("catalog/checkpoint/")?
                    .strip_suffix(".ckpt")?;
                u64::from_str_radix(hex, 16).ok()
            })
            .max();
        if let Some(c) = newest_checkpoint {
            self.tally.with_checkpoint += 1;
            let covered = catalog_keys("catalog/journal/")?.iter().any(|k| {
                k.strip_prefix("catalog/journal/")
                    .and_then(|k| k.strip_suffix(".jrnl"))
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .is_some_and(|s| s <= c)
            });
            if covered {
                self.tally.checkpoint_debris += 1;
            }
        }
        let queued = count_pending(&node.join("cache"));
        if queued > 0 {
            self.tally.killed_with_queue += 1;
            self.tally.queued_at_kill += queued;
        }
        let node_lost = self.durable_at == DurableAt::Bucket && rng.chance(50);
        let state = if node_lost {
            self.tally.node_lost += 1;
            // The node is gone with its disk: only what reached the bucket counts, and at
            // durability `bucket` that is everything acknowledged. A request the killed child
            // had fully sent may still be finishing in the server: let it land before listing.
            std::thread::sleep(Duration::from_millis(50));
            let fresh = self.fresh_node();
            let store = open_node(&fresh, &self.bucket, self.durable_at)
                .map_err(|e| format!("recovery from the bucket alone: {e}"))?;
            let state = check(&store, &view, &mut self.tally)
                .map_err(|e| format!("recovered from the bucket alone: {e}"))?;
            drop(store);
            let _ = std::fs::remove_dir_all(&node);
            self.node = fresh;
            state
        } else {
            let store = open_node(&node, &self.bucket, self.durable_at)
                .map_err(|e| format!("reopening the node: {e}"))?;
            let state = check(&store, &view, &mut self.tally)?;
            // Keep the store small, and reclaim right after a recovery too.
            store
                .reclaim(0.5, &mut |_, _| {})
                .map_err(|e| format!("reclaim after the restart: {e}"))?;
            let fingerprint = store.catalog_fingerprint().map_err(|e| e.to_string())?;
            // Everything queued (also what the kill left in the cache) reaches the bucket.
            store
                .backend()
                .flush()
                .map_err(|e| format!("uploading the queue: {e}"))?;
            drop(store);
            // The bucket alone rebuilds the same catalog.
            let fresh = self.root.path().join("recovered");
            let _ = std::fs::remove_dir_all(&fresh);
            let recovered = open_node(&fresh, &self.bucket, self.durable_at)
                .map_err(|e| format!("recovery from the bucket alone: {e}"))?;
            if recovered.catalog_fingerprint().map_err(|e| e.to_string())? != fingerprint {
                return Err(
                    "the catalog recovered from the bucket differs from the node's".to_string(),
                );
            }
            compare(&recovered, &state).map_err(|e| format!("recovered from the bucket: {e}"))?;
            drop(recovered);
            let _ = std::fs::remove_dir_all(&fresh);
            self.tally.recovered_after_restart += 1;
            state
        };
        if state != start {
            self.tally.advanced += 1;
        }
        worker::write_state(&self.node, &state);
        Ok(())
    }
}

/// Starts the child on `node`; its stderr goes to `<node>/child.err`.
fn spawn_child(
    node: &Path,
    seed: u64,
    bucket: &Bucket,
    durable_at: DurableAt,
) -> Result<Reaper, String> {
    let stderr = std::fs::File::create(node.join("child.err")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args([
        "--exact",
        "bucket_kill_child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_DIR, node)
    .env("REEL_KILL_SEED", seed.to_string())
    .env("REEL_KILL_DURABILITY", durability_name(durable_at))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(stderr);
    bucket.to_env(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| format!("spawning the child: {e}"))?;
    Ok(Reaper(Some(child)))
}

/// [`check_after_kill`], counting a match of the interrupted sync's state.
fn check(store: &ChunkStore, view: &JournalView, tally: &mut Tally) -> Result<Model, String> {
    let (state, interrupted) = check_after_kill(store, view)?;
    if interrupted {
        tally.matched_interrupted += 1;
    }
    Ok(state)
}

/// Polls the child's journal until its last complete line is an intent (a sync point has
/// begun and not completed); false if none shows within `limit`.
fn wait_for_intent(journal: &Path, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let text = std::fs::read_to_string(journal).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |i| &text[..i]);
        let last = complete.rsplit('\n').next().unwrap_or("");
        if last.starts_with("I ") {
            return true;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    false
}

/// Queued puts and deletes a killed cache left in `<cache>/pending`.
fn count_pending(cache: &Path) -> u64 {
    std::fs::read_dir(cache.join("pending")).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.ends_with(".put") || n.ends_with(".del")
            })
            .count() as u64
    })
}

fn kill_run(durable_at: DurableAt) {
    let kills = env_u64("REEL_KILL_CYCLES", 60);
    let base = env_u64("REEL_KILL_SEED", 0x5EED_B0C4) ^ (durable_at as u64);
    let server = S3Server::start(Kind::Versitygw).unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::start(server.port()).unwrap_or_else(|e| panic!("{e}"));
    let mut run = Run {
        proxy,
        bucket: Bucket::of(&server, String::new()),
        server,
        durable_at,
        root: tempfile::tempdir().expect("tempdir"),
        node: PathBuf::new(),
        tally: Tally::default(),
        nodes_made: 0,
    };
    let mut rng = Rng::new(base);
    // At `bucket` every sync waits for uploads, so a child completes fewer before its kill.
    let min_syncs_per_kill = match durable_at {
        DurableAt::Local => 1.0,
        DurableAt::Bucket => 0.5,
    };
    let mut pace = Pace::new(min_syncs_per_kill);
    let began = Instant::now();
    for i in 0..kills {
        if i % CYCLES_PER_STORE == 0 {
            run.new_store();
        }
        let seed = base.wrapping_add(i).wrapping_mul(0x9E37_79B9);
        let (syncs_before, advanced_before) = (run.tally.syncs, run.tally.advanced);
        let result = run.cycle(seed, &mut rng, &pace);
        pace.note(
            run.tally.syncs - syncs_before,
            run.tally.advanced > advanced_before,
        );
        if let Err(e) = result {
            let log = run.server.log();
            let tail = &log[log.len().saturating_sub(2000)..];
            let kept = run.root.keep();
            panic!(
                "durability {}: kill {i} (child seed {seed}): {e}\n\
                 node directories kept in {} (REEL_KILL_SEED={base}); server log tail:\n{tail}",
                durability_name(durable_at),
                kept.display(),
            );
        }
    }
    let t = &run.tally;
    eprintln!(
        "durability {}: {t:?} in {:.1?}; kill moments stretched up to {:.1}x",
        durability_name(durable_at),
        began.elapsed(),
        pace.max_stretch
    );
    assert_eq!(t.kills, kills);
    // The test means something only if the children got work done, and kills landed in each
    // of the places it is about.
    let min_syncs = (kills as f64 * min_syncs_per_kill) as u64;
    assert_work_done(kills, t.syncs, min_syncs, t.advanced);
    if kills >= 40 {
        assert!(t.killed_in_sync > 0, "no kill landed inside a sync point");
        assert!(t.killed_with_queue > 0, "no kill left queued uploads");
        assert!(t.killed_in_reclaim > 0, "no kill landed inside a reclaim");
        assert!(
            t.with_checkpoint > 0,
            "no recovery started from a catalog checkpoint"
        );
    }
    if durable_at == DurableAt::Bucket && kills >= 20 {
        assert!(t.node_lost > 0 && t.recovered_after_restart > 0);
    }
}

/// Durability `local`: a synchronising point returns when the data is fsynced in the cache; a
/// killed node restarts on its directory with nothing acknowledged lost, and uploads its queue.
#[test]
fn sigkill_with_a_real_bucket_at_durability_local_loses_nothing_acknowledged() {
    kill_run(DurableAt::Local);
}

/// Durability `bucket`: a synchronising point returns when the data is in the bucket; a killed
/// node restarts with nothing acknowledged lost, and a lost node's bucket alone has it all.
#[test]
fn sigkill_with_a_real_bucket_at_durability_bucket_loses_nothing_acknowledged() {
    kill_run(DurableAt::Bucket);
}

/// A SIGKILL while `ChunkStore::open` creates a new catalog file. redb sizes a new file before
/// it writes its header, so a kill there used to leave a file the next open refused ("Not a
/// redb database: magic number mismatch"): a node killed during its very first start could not
/// start again. `store.rs` now creates the catalog under another name and renames it. Here: 40
/// kills early in the first start, each followed by a successful open. The window is a few
/// milliseconds and these kills rarely land in it (the test also passed with the old code in
/// a run of 40), so the leftover of a kill inside it is checked deterministically by
/// `store.rs`'s `a_catalog_left_half_created_by_a_killed_first_start_is_started_afresh`.
#[test]
fn sigkill_while_a_new_catalog_is_created() {
    let server = S3Server::start(Kind::Versitygw).unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(env_u64("REEL_KILL_SEED", 7));
    for i in 0..40u64 {
        let node = root.path().join(format!("node{i}"));
        std::fs::create_dir_all(&node).expect("node dir");
        let bucket = Bucket::of(&server, format!("create-{i}"));
        let reaper = spawn_child(&node, i, &bucket, DurableAt::Local).expect("spawn");
        std::thread::sleep(Duration::from_millis(rng.range(5, 60)));
        drop(reaper); // SIGKILL (and wait)
        if let Err(e) = open_node(&node, &bucket, DurableAt::Local) {
            let kept = root.keep();
            panic!(
                "kill {i}: reopening a node killed at its first start: {e} (kept in {})",
                kept.display()
            );
        }
    }
}
