//! `reel bench store --backend local,s3`: the same cells on object storage, side by side with
//! the local store and with a plain S3 client, against one versitygw the benchmark starts on
//! loopback ([`S3Gateway`]).
//!
//! Per record size × stream count, after the local cell:
//!
//! 1. **S3 ingest**: a fresh store composed as `reel serve` does for `backend = "s3"` (see
//!    `crates/reel/src/data_dir.rs`): catalog with the journal on, `DurableAt::Bucket`, over a
//!    [`WriteBackCache`] (fresh directory, `--upload-threads` uploads in flight) over an
//!    [`S3Backend`] on its own key prefix. Timed from the first append to the moment everything
//!    is **in the bucket**: every stream's `sync()` (which, at durability `bucket`, waits for the
//!    cache to upload every pack and the journal object) and then one more `flush()` of the cache.
//! 2. **Plain client**: the `object_store` crate (the client reel's back end uses) PUTs the same
//!    bytes in `--object-size` objects, `--upload-threads` in flight, on a 2-thread runtime like
//!    the back end's: what this server and client can do without reel.
//! 3. **Cold read**: the store is closed, its cache directory is replaced by an empty one (the
//!    catalog stays local), and every stream is read back and verified as in the local cell:
//!    every pack byte comes from the bucket (ranged GETs of the cache's read blocks).
//!
//! The server's CPU time (`/proc/PID/stat` of versitygw) and the back end's request and byte
//! counters are taken around each phase.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::{ObjectStoreExt, PutPayload};
use reel_backend::{
    Backend, CacheConfig, S3Backend, S3Config, S3Counters, S3Credentials, WriteBackCache,
};
use reel_chunkstore::{ChunkStore, ChunkerParams, DurableAt, StoreConfig, Stream, StreamId};
use reel_sysinfo::Proc;
use serde::{Deserialize, Serialize};

use super::{GB, MB, Meter, Row, join_all, named, per_s, progress, ratio, split, verify_stream};
use crate::harness::procs::S3Gateway;
use crate::harness::size_label;

/// Which store(s) a cell runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// `LocalBackend`: packs in a local directory.
    Local,
    /// Write-back cache → S3 back end → versitygw on loopback (started by the benchmark).
    S3,
}

/// The server and the settings every S3 cell shares.
pub struct S3Env {
    pub gw: S3Gateway,
    pub upload_threads: usize,
    pub object_size: usize,
    /// The stores' chunker (`--chunk-size`).
    pub chunker: ChunkerParams,
}

/// Requests and bytes of one phase (a difference of [`S3Counters`]).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default)]
pub struct Requests {
    pub puts: u64,
    pub gets: u64,
    pub heads: u64,
    pub lists: u64,
    pub deletes: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

impl Requests {
    fn between(a: S3Counters, b: S3Counters) -> Requests {
        Requests {
            puts: b.puts - a.puts,
            gets: b.gets - a.gets,
            heads: b.heads - a.heads,
            lists: b.lists - a.lists,
            deletes: b.deletes - a.deletes,
            bytes_up: b.bytes_up - a.bytes_up,
            bytes_down: b.bytes_down - a.bytes_down,
        }
    }
    pub fn total(&self) -> u64 {
        self.puts + self.gets + self.heads + self.lists + self.deletes
    }
}

/// One sample of the S3 ingest, every 200 ms.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Sample {
    pub t_s: f64,
    /// Bytes in the cache's upload queue (written locally, not yet in the bucket).
    pub pending_bytes: u64,
    /// Bytes the cache has uploaded so far.
    pub uploaded_bytes: u64,
    /// CPU seconds so far of versitygw and of this process.
    pub server_cpu_s: f64,
    pub client_cpu_s: f64,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct S3Row {
    pub record_size: usize,
    pub streams: usize,
    pub bytes: u64,
    /// First append → everything in the bucket (every `sync()` at `DurableAt::Bucket`, then a
    /// final cache `flush()`).
    pub ingest_wall_s: f64,
    /// When the last stream's last `append_record` returned (before its `sync`).
    pub appends_done_s: f64,
    /// The final `flush()` alone (normally nothing is left by then).
    pub final_flush_s: f64,
    pub ingest_cpu_s: f64,
    pub ingest_server_cpu_s: f64,
    pub ingest_mb_per_s: f64,
    pub ingest_requests: Requests,
    /// Pack (and journal) bytes the store wrote, as `StoreStats::stored_bytes` (packs only).
    pub stored_bytes: u64,
    pub reduction_ratio: f64,
    pub cache_uploaded_objects: u64,
    pub cache_uploaded_bytes: u64,
    pub cache_retries: u64,
    pub cache_blocked_puts: u64,
    pub max_pending_bytes: u64,
    pub samples: Vec<Sample>,
    /// Requests (all kinds) during ingest per 10^9 bytes written / per 10^9 bytes in the bucket.
    pub requests_per_gb_written: f64,
    pub requests_per_gb_stored: f64,
    /// Bytes uploaded per 10^9 bytes written, in GB.
    pub gb_up_per_gb_written: f64,
    // plain client
    pub plain_objects: u64,
    pub plain_bytes: u64,
    pub plain_wall_s: f64,
    pub plain_cpu_s: f64,
    pub plain_server_cpu_s: f64,
    pub plain_mb_per_s: f64,
    // cold read
    pub cold_reopen_s: f64,
    pub cold_read_wall_s: f64,
    pub cold_read_cpu_s: f64,
    pub cold_read_server_cpu_s: f64,
    pub cold_read_mb_per_s: f64,
    pub cold_read_requests: Requests,
    // side by side (None when the cell had no local run)
    pub local_ingest_mb_per_s: Option<f64>,
    pub local_read_mb_per_s: Option<f64>,
    pub ingest_vs_local: Option<f64>,
    pub ingest_vs_plain: f64,
    pub cold_read_vs_local: Option<f64>,
}

/// Everything the S3 cells share, for the report.
#[derive(Serialize, Deserialize, Debug)]
pub struct S3Report {
    /// The server program and its version line.
    pub server: String,
    pub upload_threads: usize,
    pub object_size: usize,
    pub pack_target: usize,
    pub read_block_bytes: u64,
    /// `None` in reports from before read-ahead and unsigned payloads existed.
    #[serde(default)]
    pub read_ahead_blocks: Option<usize>,
    #[serde(default)]
    pub unsigned_payload: Option<bool>,
    pub rows: Vec<S3Row>,
}

fn config(env: &S3Env, prefix: &str) -> S3Config {
    let mut c = S3Config::new(env.gw.bucket(), prefix);
    c.endpoint = Some(env.gw.endpoint());
    c.region = S3Gateway::REGION.to_string();
    c.allow_http = true;
    c.credentials = S3Credentials::Static {
        access_key_id: env.gw.access_key().to_string(),
        secret_access_key: env.gw.secret_key().to_string(),
        session_token: None,
    };
    c
}

/// Whether the back end sends PUT bodies unsigned to this server (the plain client does the same).
pub fn unsigned(env: &S3Env) -> bool {
    config(env, "x").payload_unsigned()
}

fn cache_config(env: &S3Env) -> CacheConfig {
    CacheConfig {
        upload_threads: env.upload_threads,
        ..CacheConfig::default()
    }
}

fn store_config(env: &S3Env) -> StoreConfig {
    StoreConfig {
        chunker: env.chunker,
        journal: true,
        durable_at: DurableAt::Bucket,
        ..StoreConfig::default()
    }
}

fn server_cpu(env: &S3Env) -> Result<f64> {
    Ok(reel_sysinfo::cpu_seconds(Proc::Pid(env.gw.pid()))?)
}

/// Opens the S3 store in `root` (`catalog/` and the cache directory `cache_dir`) on `prefix`.
fn open(
    env: &S3Env,
    root: &Path,
    cache_dir: &str,
    prefix: &str,
) -> Result<(ChunkStore, Arc<WriteBackCache>, Arc<S3Backend>)> {
    let backend = Arc::new(S3Backend::open(&config(env, prefix)).context("opening S3Backend")?);
    let cache = Arc::new(
        WriteBackCache::open(
            &root.join(cache_dir),
            backend.clone() as Arc<dyn Backend>,
            cache_config(env),
        )
        .context("opening the write-back cache")?,
    );
    let store = ChunkStore::open(
        &root.join("catalog"),
        cache.clone() as Arc<dyn Backend>,
        store_config(env),
    )
    .context("opening the store on S3")?;
    Ok((store, cache, backend))
}

/// Closes the store, waits for the cache's queue to empty (it should be empty already).
fn close(store: ChunkStore, cache: Arc<WriteBackCache>) -> Result<()> {
    drop(store);
    let cache = Arc::try_unwrap(cache).map_err(|_| anyhow!("the cache is still shared"))?;
    ensure!(
        cache.close(Duration::from_secs(120))?,
        "the write-back cache still had pending uploads after 120 s"
    );
    Ok(())
}

/// One S3 cell (see the module docs); `local` is the local cell just measured, if any.
pub fn run_cell(
    env: &S3Env,
    data: &Bytes,
    rs: usize,
    n: usize,
    base: &Path,
    cell: usize,
    local: Option<&Row>,
) -> Result<S3Row> {
    let slices = split(data, rs, n);
    let tmp = tempfile::Builder::new()
        .prefix("reel-store-bench-s3.")
        .tempdir_in(base)
        .with_context(|| format!("making a temporary directory in {}", base.display()))?;
    let root = tmp.path();
    let prefix = format!("cell-{cell}");
    let bytes = data.len() as u64;

    progress(format!(
        "S3 ingest: {} records, {n} stream(s), {}, {} uploads in flight, until in the bucket",
        size_label(rs as u64),
        size_label(bytes),
        env.upload_threads
    ));
    let (store, cache, backend) = open(env, root, "cache", &prefix)?;
    let streams: Vec<Stream> = (0..n)
        .map(|i| store.open_stream(StreamId(i as u64)))
        .collect::<Result<_, _>>()
        .context("opening streams")?;
    let c0 = backend.counters();
    let s0 = server_cpu(env)?;
    let meter = Meter::start()?;
    let stop = AtomicBool::new(false);
    let (appends_done, samples, final_flush_s) = std::thread::scope(|s| -> Result<_> {
        let sampler = named("s3-sampler").spawn_scoped(s, || {
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let st = cache.stats();
                out.push(Sample {
                    t_s: meter.wall.elapsed().as_secs_f64(),
                    pending_bytes: st.pending_bytes,
                    uploaded_bytes: st.uploaded_bytes,
                    server_cpu_s: server_cpu(env).unwrap_or(0.0) - s0,
                    client_cpu_s: super::process_cpu_seconds().unwrap_or(0.0) - meter.cpu,
                });
                std::thread::sleep(Duration::from_millis(200));
            }
            out
        })?;
        let handles = streams
            .iter()
            .zip(&slices)
            .enumerate()
            .map(|(i, (stream, slice))| {
                let meter = &meter;
                named(&format!("ingest-{i}")).spawn_scoped(s, move || -> Result<f64> {
                    for record in slice.chunks(rs) {
                        stream.append_record(record)?;
                    }
                    let appended = meter.wall.elapsed().as_secs_f64();
                    stream.sync()?;
                    Ok(appended)
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let result = join_all(handles).context("S3 ingest");
        let t = Instant::now();
        let flushed = result.and_then(|a| {
            cache.flush().context("final flush")?;
            Ok(a)
        });
        let final_flush_s = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let samples = sampler
            .join()
            .map_err(|_| anyhow!("the sampler panicked"))?;
        Ok((flushed?, samples, final_flush_s))
    })?;
    let (ingest_wall, ingest_cpu) = meter.stop()?;
    let ingest_server_cpu_s = server_cpu(env)? - s0;
    // A checkpoint the last synchronising point started is background work no writer waits
    // for: not timed (those started earlier in the run overlap it and are), its requests
    // counted; its objects must be in the bucket before the check below.
    store.wait_for_background_checkpoint();
    cache.flush().context("flush after the last checkpoint")?;
    let ingest_requests = Requests::between(c0, backend.counters());
    let cstats = cache.stats();
    ensure!(
        cstats.pending_objects == 0,
        "{} objects still pending after the final flush",
        cstats.pending_objects
    );
    let stats = store.stats()?;
    ensure!(
        stats.logical_bytes == bytes,
        "S3 store holds {} logical bytes after ingest, expected {bytes}",
        stats.logical_bytes
    );
    drop(streams);
    close(store, cache)?;
    drop(backend);

    progress(format!(
        "  S3 ingest {:.0} MB/s; plain client: {} objects, {} in flight",
        per_s(bytes, MB, ingest_wall),
        size_label(env.object_size as u64),
        env.upload_threads
    ));
    let plain = plain_put(env, data, &format!("plain-{cell}"))?;

    progress("S3 cold read: empty cache directory, local catalog");
    let t = Instant::now();
    let (store, cache, backend) = open(env, root, "cache-cold", &prefix)?;
    let streams: Vec<Stream> = (0..n)
        .map(|i| store.open_stream(StreamId(i as u64)))
        .collect::<Result<_, _>>()
        .context("reopening streams")?;
    let cold_reopen_s = t.elapsed().as_secs_f64();
    let c0 = backend.counters();
    let s0 = server_cpu(env)?;
    let meter = Meter::start()?;
    std::thread::scope(|s| {
        let handles = streams
            .iter()
            .zip(&slices)
            .enumerate()
            .map(|(i, (stream, slice))| {
                named(&format!("read-{i}"))
                    .spawn_scoped(s, move || verify_stream(stream, slice, rs))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        join_all(handles)
    })
    .context("S3 cold read")?;
    let (read_wall, read_cpu) = meter.stop()?;
    let cold_read_server_cpu_s = server_cpu(env)? - s0;
    let cold_read_requests = Requests::between(c0, backend.counters());
    drop(streams);
    close(store, cache)?;
    drop(backend);
    // Untimed: the bucket keeps one cell at a time (a 4G run's cells and their plain copies
    // would otherwise need several times the machine's free disk under the server).
    clear_prefix(env, &prefix)?;
    clear_prefix(env, &format!("plain-{cell}"))?;

    let gb = bytes as f64 / GB;
    let ingest_mb_per_s = per_s(bytes, MB, ingest_wall);
    let cold_read_mb_per_s = per_s(bytes, MB, read_wall);
    let max_pending_bytes = samples.iter().map(|s| s.pending_bytes).max().unwrap_or(0);
    Ok(S3Row {
        record_size: rs,
        streams: n,
        bytes,
        ingest_wall_s: ingest_wall,
        appends_done_s: appends_done.iter().copied().fold(0.0, f64::max),
        final_flush_s,
        ingest_cpu_s: ingest_cpu,
        ingest_server_cpu_s,
        ingest_mb_per_s,
        requests_per_gb_written: ratio(ingest_requests.total() as f64, gb),
        requests_per_gb_stored: ratio(
            ingest_requests.total() as f64,
            stats.stored_bytes as f64 / GB,
        ),
        gb_up_per_gb_written: ratio(ingest_requests.bytes_up as f64 / GB, gb),
        ingest_requests,
        stored_bytes: stats.stored_bytes,
        reduction_ratio: stats.reduction_ratio(),
        cache_uploaded_objects: cstats.uploaded_objects,
        cache_uploaded_bytes: cstats.uploaded_bytes,
        cache_retries: cstats.retries,
        cache_blocked_puts: cstats.blocked_puts,
        max_pending_bytes,
        samples,
        plain_objects: plain.objects,
        plain_bytes: plain.bytes,
        plain_wall_s: plain.wall_s,
        plain_cpu_s: plain.cpu_s,
        plain_server_cpu_s: plain.server_cpu_s,
        plain_mb_per_s: per_s(plain.bytes, MB, plain.wall_s),
        cold_reopen_s,
        cold_read_wall_s: read_wall,
        cold_read_cpu_s: read_cpu,
        cold_read_server_cpu_s,
        cold_read_mb_per_s,
        cold_read_requests,
        local_ingest_mb_per_s: local.map(|l| l.ingest_mb_per_s),
        local_read_mb_per_s: local.map(|l| l.read_mb_per_s),
        ingest_vs_local: local.map(|l| ratio(ingest_mb_per_s, l.ingest_mb_per_s)),
        ingest_vs_plain: ratio(ingest_mb_per_s, per_s(plain.bytes, MB, plain.wall_s)),
        cold_read_vs_local: local.map(|l| ratio(cold_read_mb_per_s, l.read_mb_per_s)),
    })
}

/// Deletes every object under `prefix` in the benchmark's bucket.
fn clear_prefix(env: &S3Env, prefix: &str) -> Result<()> {
    let backend = S3Backend::open(&config(env, prefix))
        .with_context(|| format!("opening S3Backend on {prefix} to clear it"))?;
    for object in backend
        .list("")
        .with_context(|| format!("listing {prefix}"))?
    {
        backend
            .delete(&object.key)
            .with_context(|| format!("deleting {prefix}/{}", object.key))?;
    }
    Ok(())
}

struct Plain {
    objects: u64,
    bytes: u64,
    wall_s: f64,
    cpu_s: f64,
    server_cpu_s: f64,
}

/// PUTs `data` in `object_size` pieces under `prefix/`, `upload_threads` at once, with a
/// plain `object_store` client configured as the back end's (path-style, plain http, payloads
/// signed or not as the back end's: unsigned to loopback) on a 2-thread runtime like the back
/// end's. So the comparison is with a client that pays no more per byte than reel's.
fn plain_put(env: &S3Env, data: &Bytes, prefix: &str) -> Result<Plain> {
    reel_backend::use_ring_for_tls();
    let store = Arc::new(
        AmazonS3Builder::new()
            .with_bucket_name(env.gw.bucket())
            .with_region(S3Gateway::REGION)
            .with_access_key_id(env.gw.access_key())
            .with_secret_access_key(env.gw.secret_key())
            .with_endpoint(env.gw.endpoint())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_unsigned_payload(unsigned(env))
            .build()
            .context("building the plain object_store client")?,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("plain-s3")
        .enable_all()
        .build()?;
    let size = env.object_size.max(1);
    let pieces: Arc<Vec<Bytes>> = Arc::new(
        (0..data.len())
            .step_by(size)
            .map(|o| data.slice(o..(o + size).min(data.len())))
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let s0 = server_cpu(env)?;
    let meter = Meter::start()?;
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..env.upload_threads {
            let (store, pieces, next) = (store.clone(), pieces.clone(), next.clone());
            let prefix = prefix.to_string();
            set.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(piece) = pieces.get(i) else {
                        return Ok::<(), object_store::Error>(());
                    };
                    let path = object_store::path::Path::from(format!("{prefix}/{i:06}.obj"));
                    store.put(&path, PutPayload::from(piece.clone())).await?;
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(|e| anyhow!("plain PUT task: {e}"))?
                .context("plain PUT")?;
        }
        Ok::<(), anyhow::Error>(())
    })?;
    let (wall_s, cpu_s) = meter.stop()?;
    let server_cpu_s = server_cpu(env)? - s0;
    Ok(Plain {
        objects: pieces.len() as u64,
        bytes: data.len() as u64,
        wall_s,
        cpu_s,
        server_cpu_s,
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// One goal line: MET/MISSED, the figure, what is needed and the margin.
fn goal(s: &mut String, what: &str, got: Option<f64>, need: f64) {
    use std::fmt::Write as _;
    let _ = match got {
        Some(v) => writeln!(
            s,
            "- {what}: **{}** — {v:.2} (needs ≥ {need:.2}; margin {:+.0} %)",
            if v >= need { "MET" } else { "MISSED" },
            (v / need - 1.0) * 100.0
        ),
        None => writeln!(s, "- {what}: not measured (needs `--backend local,s3`)"),
    };
}

/// The S3 tables and the goals that apply to this workload.
pub fn render(r: &S3Report, incompressible: bool, s: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        s,
        "\n#### On object storage: {}, loopback\n\n\
         S3 = store (catalog journal on, durability `bucket`) → write-back cache ({} uploads in flight, \
         packs of up to {}) → `S3Backend` → the server. **S3 ingest is timed from the first append \
         until everything is in the bucket** (every stream's `sync()` at `DurableAt::Bucket`, then a \
         final cache `flush()`; a checkpoint the last `sync()` started is waited for afterwards, untimed). Plain PUT = the `object_store` client putting the same bytes as \
         {} objects, {} in flight{}. Cold read = the store reopened with an empty cache directory \
         (catalog local), every byte fetched from the bucket in {} ranged GETs{} and verified. \
         Local columns are the local cell just before, on the same data.\n",
        r.server,
        r.upload_threads,
        size_label(r.pack_target as u64),
        size_label(r.object_size as u64),
        r.upload_threads,
        match r.unsigned_payload {
            Some(true) => ", payloads unsigned like reel's",
            Some(false) => ", payloads signed like reel's",
            None => "",
        },
        size_label(r.read_block_bytes),
        match r.read_ahead_blocks {
            Some(0) => ", no read-ahead".to_string(),
            Some(n) => format!(" ({n} read ahead of a sequential reader)"),
            None => String::new(),
        },
    );
    let _ = writeln!(
        s,
        "| record | streams | local ingest MB/s | S3 ingest MB/s | S3/local | plain PUT MB/s | S3/plain \
         | local read MB/s | S3 cold read MB/s | cold/local | requests per GB written | requests per GB stored \
         | GB uploaded per GB written |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} | {} | {:.0} | {:.2} | {} | {:.0} | {} | {:.1} | {:.1} | {:.3} |",
            size_label(row.record_size as u64),
            row.streams,
            opt(row.local_ingest_mb_per_s, 0),
            row.ingest_mb_per_s,
            opt(row.ingest_vs_local, 2),
            row.plain_mb_per_s,
            row.ingest_vs_plain,
            opt(row.local_read_mb_per_s, 0),
            row.cold_read_mb_per_s,
            opt(row.cold_read_vs_local, 2),
            row.requests_per_gb_written,
            row.requests_per_gb_stored,
            row.gb_up_per_gb_written,
        );
    }
    let _ = writeln!(
        s,
        "\nWhere the time and the requests go (\"GB\" = 10^9 bytes; server = versitygw's CPU from \
         `/proc`, reel = this whole process):\n\n\
         | record | streams | appends done s | ingest s | upload MB/s (bucket bytes / ingest s) | max queued MB \
         | PUT | HEAD | LIST | GET | reel CPU-s/GB written | server CPU-s/GB uploaded | plain: server CPU-s/GB \
         | plain: client CPU-s/GB | CPU-s/GB reel+server: S3 / plain (ratio) | cold read: GETs | cold read: GB down \
         | cold read: reel CPU-s/GB | cold read: server CPU-s/GB |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in &r.rows {
        let q = &row.ingest_requests;
        let gb_up = q.bytes_up as f64 / GB;
        let plain_gb = row.plain_bytes as f64 / GB;
        // Both sides' CPU per GB written: on 2 shared cores, MB/s follows its inverse.
        let s3_cpu = ratio(
            row.ingest_cpu_s + row.ingest_server_cpu_s,
            row.bytes as f64 / GB,
        );
        let plain_cpu = ratio(row.plain_cpu_s + row.plain_server_cpu_s, plain_gb);
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} / {:.1} ({:.2}) | {} | {:.2} | {:.2} | {:.2} |",
            size_label(row.record_size as u64),
            row.streams,
            row.appends_done_s,
            row.ingest_wall_s,
            per_s(q.bytes_up, MB, row.ingest_wall_s),
            row.max_pending_bytes as f64 / MB,
            q.puts,
            q.heads,
            q.lists,
            q.gets,
            ratio(row.ingest_cpu_s, row.bytes as f64 / GB),
            ratio(row.ingest_server_cpu_s, gb_up),
            ratio(row.plain_server_cpu_s, plain_gb),
            ratio(row.plain_cpu_s, plain_gb),
            s3_cpu,
            plain_cpu,
            ratio(plain_cpu, s3_cpu),
            row.cold_read_requests.gets,
            row.cold_read_requests.bytes_down as f64 / GB,
            ratio(row.cold_read_cpu_s, row.bytes as f64 / GB),
            ratio(
                row.cold_read_server_cpu_s,
                row.cold_read_requests.bytes_down as f64 / GB
            ),
        );
    }
    let _ = writeln!(s, "\nGoals (every cell):\n");
    for row in &r.rows {
        let cell = format!(
            "{} records, {} stream(s)",
            size_label(row.record_size as u64),
            row.streams
        );
        if incompressible {
            goal(
                s,
                &format!("{cell}: S3 ingest ≥ 0.8 × plain client (incompressible)"),
                Some(row.ingest_vs_plain),
                0.8,
            );
        } else {
            goal(
                s,
                &format!("{cell}: S3 ingest ≥ 0.9 × local ingest (dedup workload)"),
                row.ingest_vs_local,
                0.9,
            );
        }
        goal(
            s,
            &format!("{cell}: cold-cache S3 read ≥ 0.5 × local read"),
            row.cold_read_vs_local,
            0.5,
        );
    }
}
