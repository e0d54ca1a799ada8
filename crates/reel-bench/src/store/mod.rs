//! `reel bench store`: the chunk store measured end to end on generated tapewrite-style data.
//!
//! For every (record size × stream count) pair a fresh store (a [`LocalBackend`] plus its catalog,
//! in a temporary directory) ingests the same pre-generated stream, split into one distinct
//! slice per stream, one thread per stream; then the store is reopened and every stream is read
//! back in record-size reads and compared byte for byte with what was written. Generation is not
//! timed. Single-core speeds of the pipeline's stages on the same data give the CPU floor the
//! store is measured against, and `--peers` runs `bench/peers/run.sh` (restic, borg) on the same
//! workload for comparison. See `BENCHMARKING.md` for what every column means.
//!
//! CPU time is the whole process's (all threads: writers, the pack uploader, redb), from
//! `utime + stime` in `/proc/self/stat` ([`reel_sysinfo::cpu_seconds`]), so it has a 10 ms
//! resolution.

mod chart;
pub mod growth;
mod s3;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail, ensure};
use reel_backend::LocalBackend;
use reel_chunkstore::chunker::chunk_lengths;
use reel_chunkstore::{ChunkStore, ChunkerParams, StoreConfig, StoreStats, Stream, StreamId};
use reel_datagen::{GenConfig, Generator, Order};
use reel_sysinfo::Proc;
use serde::{Deserialize, Serialize};

use crate::harness::{self, size_label};

const MB: f64 = 1e6;
const GB: f64 = 1e9;
const MIB: u64 = 1 << 20;
/// Piece size for the zstd stage speed (the store's default blob target).
const ZSTD_PIECE: usize = 128 * 1024;

/// Arguments of `reel bench store`. Sizes take K/M/G/T suffixes (binary: KiB, MiB, GiB, TiB).
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// Fraction of each compressible block's bytes that are random (0..=1).
    #[arg(long, default_value_t = 0.25, value_parser = parse_fraction)]
    randomness: f64,
    /// Average appearances of each unique block (R; 1 = nothing to dedup).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    redundancy: u32,
    /// Tape record sizes, comma separated (e.g. 64K,256K,1M); each is a separate run.
    #[arg(long, value_delimiter = ',', default_value = "256K", value_parser = parse_record_size)]
    record_size: Vec<usize>,
    /// Concurrent stream counts, comma separated; each stream is written by its own thread.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = parse_streams)]
    streams: Vec<usize>,
    /// Bytes per run, split across the streams (held in RAM).
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    total: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Shortcut for `--randomness 1 --redundancy 1`: nothing to dedup or compress.
    #[arg(long, conflicts_with_all = ["randomness", "redundancy"])]
    incompressible: bool,
    /// Average chunk size of the stores the benchmark makes (a power of two from 256 to 1M;
    /// min a quarter, max eight times it) [default: a new store's, 2K].
    #[arg(long, value_parser = parse_chunk_size)]
    chunk_size: Option<u32>,
    /// Generator unique-block size (what repeats).
    #[arg(long, default_value = "256K", value_parser = parse_block_size)]
    block_size: usize,
    /// Generator shuffle window in blocks: each block's repeats fall within one window.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 26))]
    window_blocks: u64,
    /// Bytes of the generated data used for the single-core stage speeds.
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    stage_size: u64,
    /// Directory in which each run's temporary store is made (and removed afterwards).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// Also run bench/peers/run.sh (restic, borg, kopia) on the same workload.
    #[arg(long)]
    peers: bool,
    /// The peers script [default: bench/peers/run.sh of the source tree or the current directory].
    #[arg(long, requires = "peers")]
    peers_script: Option<PathBuf>,
    /// Tools the peers script runs, comma separated.
    #[arg(long, default_value = "restic,borg,kopia")]
    peer_tools: String,
    /// Stores to measure, comma separated: `local` (packs in a directory), `s3` (write-back
    /// cache → S3 back end → a versitygw the benchmark starts on loopback; also a plain S3
    /// client's PUT rate and a cold-cache read). With both, each cell runs on both, side by side.
    #[arg(long, value_delimiter = ',', default_value = "local")]
    backend: Vec<s3::BackendKind>,
    /// S3: uploads in flight (the write-back cache's upload threads, and the plain client's
    /// concurrent PUTs).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    upload_threads: u16,
    /// S3: object size of the plain client's PUTs.
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    object_size: u64,
    /// S3: the versitygw program [default: $REEL_TOOLS_DIR/bin/versitygw, else
    /// ~/.cache/reel-tools/bin/versitygw, else PATH].
    #[arg(long)]
    versitygw: Option<PathBuf>,
    /// --json, --markdown (the tables; they are printed too), --charts (ingest and read MB/s
    /// against the record size), --from-json.
    #[command(flatten)]
    report: harness::ReportFlags,
}

// ---- argument parsing ---------------------------------------------------------------------

fn parse_size(s: &str) -> Result<u64> {
    harness::parse_size("size", s)
}

fn parse_record_size(s: &str) -> Result<usize> {
    let v = parse_size(s)?;
    ensure!(v <= 64 * MIB, "record size {s} is over 64M");
    usize::try_from(v).map_err(|_| anyhow!("record size {s} is too large"))
}

fn parse_block_size(s: &str) -> Result<usize> {
    let v = parse_size(s)?;
    let (lo, hi) = (
        reel_datagen::MIN_BLOCK_SIZE as u64,
        reel_datagen::MAX_BLOCK_SIZE as u64,
    );
    ensure!(
        (lo..=hi).contains(&v),
        "block size {s} is outside {lo}..={hi} bytes"
    );
    usize::try_from(v).map_err(|_| anyhow!("block size {s} is too large"))
}

fn parse_chunk_size(s: &str) -> Result<u32> {
    let v = parse_size(s)?;
    ensure!(
        v.is_power_of_two() && (256..=1 << 20).contains(&v),
        "chunk size {s} must be a power of two from 256 to 1M"
    );
    Ok(v as u32)
}

fn parse_streams(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n @ 1..=256) => Ok(n),
        _ => Err(format!("stream count {s:?} must be a number from 1 to 256")),
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} must be a number from 0 to 1")),
    }
}

// ---- results ------------------------------------------------------------------------------

#[derive(Serialize, Deserialize, Debug, Clone)]
struct Workload {
    seed: u64,
    block_size: usize,
    randomness: f64,
    redundancy: u32,
    window_blocks: u64,
    total_bytes: u64,
    incompressible: bool,
    /// The stores' average chunk size (`--chunk-size`; results from before it was recorded
    /// were made with 2 KiB).
    #[serde(default = "legacy_chunk_avg")]
    chunk_avg: u32,
    /// The same stream as `reel-datagen` with these flags.
    datagen_flags: String,
}

fn legacy_chunk_avg() -> u32 {
    ChunkerParams::LEGACY.avg
}

impl Workload {
    fn chunker(&self) -> ChunkerParams {
        ChunkerParams::with_avg(self.chunk_avg)
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct Ideal {
    /// Dedup ratio the generator promises (`Generator::expected`).
    generator_dedup: f64,
    /// Distinct blocks found by hashing the data at block size.
    unique_blocks: u64,
    unique_bytes: u64,
    /// Sum over distinct blocks of min(zstd level 1 of the block, the block).
    compressed_bytes: u64,
    dedup_ratio: f64,
    compression_ratio: f64,
    reduction_ratio: f64,
    /// Dedup of plain content-defined chunking of the whole stream (the store's chunker
    /// parameters, no record boundaries): what chunk-level dedup alone finds.
    cdc_dedup_ratio: f64,
    seconds: f64,
}

#[derive(Serialize, Deserialize, Debug)]
struct StageSpeed {
    stage: String,
    bytes: u64,
    /// Wall time.
    seconds: f64,
    /// On-CPU time of the measuring thread (`/proc/thread-self/schedstat`).
    cpu_seconds: f64,
    /// `bytes` per CPU second: less sensitive to other load than wall time.
    gb_per_s: f64,
    note: String,
}

#[derive(Serialize, Deserialize, Debug, Default)]
struct StatsJson {
    logical_bytes: u64,
    unique_bytes: u64,
    stored_bytes: u64,
    chunks: u64,
    packs: u64,
    streams: u64,
    filter_memory_bytes: u64,
    cache_memory_bytes: u64,
}

impl From<&StoreStats> for StatsJson {
    fn from(s: &StoreStats) -> Self {
        StatsJson {
            logical_bytes: s.logical_bytes,
            unique_bytes: s.unique_bytes,
            stored_bytes: s.stored_bytes,
            chunks: s.chunks,
            packs: s.packs,
            streams: s.streams,
            filter_memory_bytes: s.filter_memory_bytes,
            cache_memory_bytes: s.cache_memory_bytes,
        }
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct Row {
    record_size: usize,
    streams: usize,
    bytes: u64,
    ingest_wall_s: f64,
    ingest_cpu_s: f64,
    ingest_mb_per_s: f64,
    ingest_cpu_s_per_gb: f64,
    /// Closing the store and opening it again (catalog scan, Bloom filter rebuild); not in read.
    reopen_s: f64,
    read_wall_s: f64,
    read_cpu_s: f64,
    read_mb_per_s: f64,
    read_cpu_s_per_gb: f64,
    /// `store.stats()` right after ingest.
    stats: StatsJson,
    /// Filter bytes after reopening (rebuilt from the catalog at its resting size).
    filter_memory_after_reopen: u64,
    dedup_ratio: f64,
    compression_ratio: f64,
    reduction_ratio: f64,
    ideal_reduction_ratio: f64,
    avg_chunk_bytes: f64,
    index_bytes_per_chunk: f64,
    /// Index RAM per TB (1e12 bytes) of unique data, scaled linearly from this run.
    index_mb_per_tb_unique: f64,
    /// Disk space (allocated blocks) of the catalog directory after ingest.
    catalog_bytes: u64,
    /// Apparent size (file lengths) of the catalog directory after ingest.
    catalog_apparent_bytes: u64,
    /// Disk space of the catalog directory once the store closed (closing compacts it).
    #[serde(default)]
    catalog_bytes_after_close: u64,
    /// Bloom filter bytes per chunk after reopening (the filter is sized from the catalog then,
    /// the locality cache is empty), scaled to 1e12 bytes of unique data.
    filter_mb_per_tb_unique: f64,
    catalog_pct_of_stored: f64,
    /// Apparent size of the pack directory (should equal `stats.stored_bytes`).
    packs_dir_bytes: u64,
    /// The catalog's tables after ingest, largest first (`ChunkStore::catalog_space`).
    #[serde(default)]
    catalog_tables: Vec<TableSpaceJson>,
}

/// One catalog table's space after ingest.
#[derive(Serialize, Deserialize, Debug)]
struct TableSpaceJson {
    name: String,
    rows: u64,
    stored_bytes: u64,
    metadata_bytes: u64,
    fragmented_bytes: u64,
}

impl From<&reel_chunkstore::TableSpace> for TableSpaceJson {
    fn from(t: &reel_chunkstore::TableSpace) -> Self {
        TableSpaceJson {
            name: t.name.clone(),
            rows: t.rows,
            stored_bytes: t.stored_bytes,
            metadata_bytes: t.metadata_bytes,
            fragmented_bytes: t.fragmented_bytes,
        }
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct Report {
    tool: String,
    version: String,
    unix_time: u64,
    clock_ticks_per_s: u64,
    /// `/proc/loadavg` when the benchmark started (other load skews wall-clock speeds).
    loadavg_at_start: String,
    /// Bytes of generated data the stage speeds were measured on.
    stage_data_bytes: u64,
    workload: Workload,
    ideal: Ideal,
    stages: Vec<StageSpeed>,
    rows: Vec<Row>,
    /// JSON lines from bench/peers/run.sh, as it wrote them.
    peers: Vec<serde_json::Value>,
    peers_error: Option<String>,
    /// With `--backend …,s3`: the S3 cells.
    #[serde(default)]
    s3: Option<s3::S3Report>,
}

// ---- measuring ----------------------------------------------------------------------------

fn progress(msg: impl AsRef<str>) {
    eprintln!("store-bench: {}", msg.as_ref());
}

/// CPU seconds (user + system) used so far by every thread of this process, live or exited.
fn process_cpu_seconds() -> Result<f64> {
    Ok(reel_sysinfo::cpu_seconds(Proc::This)?)
}

struct Meter {
    wall: Instant,
    cpu: f64,
}

impl Meter {
    fn start() -> Result<Meter> {
        Ok(Meter {
            wall: Instant::now(),
            cpu: process_cpu_seconds()?,
        })
    }
    /// (wall seconds, CPU seconds) since start.
    fn stop(&self) -> Result<(f64, f64)> {
        let wall = self.wall.elapsed().as_secs_f64();
        Ok((wall, process_cpu_seconds()? - self.cpu))
    }
}

/// Wall and on-CPU time of the calling thread, for single-threaded measurements.
struct ThreadTimer {
    wall: Instant,
    cpu_ns: Option<u64>,
}

struct Timing {
    wall: f64,
    /// On-CPU seconds of this thread; wall time where schedstat is unavailable.
    cpu: f64,
}

/// Nanoseconds this thread has spent on a CPU (first field of `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> Option<u64> {
    let s = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

impl ThreadTimer {
    fn start() -> ThreadTimer {
        ThreadTimer {
            wall: Instant::now(),
            cpu_ns: thread_cpu_ns(),
        }
    }
    fn elapsed(&self) -> Timing {
        let wall = self.wall.elapsed().as_secs_f64();
        let cpu = match (self.cpu_ns, thread_cpu_ns()) {
            (Some(a), Some(b)) if b >= a => (b - a) as f64 / 1e9,
            _ => wall,
        };
        Timing { wall, cpu }
    }
}

fn per_s(bytes: u64, unit: f64, secs: f64) -> f64 {
    bytes as f64 / unit / secs.max(1e-9)
}

/// (apparent size, allocated bytes) of every file under `dir`.
fn dir_bytes(dir: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut len, mut alloc) = (0, 0);
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let (l, a) = if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            (meta.len(), meta.blocks() * 512)
        };
        len += l;
        alloc += a;
    }
    Ok((len, alloc))
}

// ---- the benchmark ------------------------------------------------------------------------

/// `reel bench store`: measure (or read `--from-json`), print the tables, write what was
/// asked for.
pub fn run(args: StoreArgs) -> Result<()> {
    let report = args
        .report
        .measure_or_replay("reel bench store", || measure(&args))?;
    let text = args
        .report
        .write(&report, &chart::charts(&report), |links| {
            render_markdown(&report, links)
        })?;
    print!("{text}");
    Ok(())
}

fn measure(args: &StoreArgs) -> Result<Report> {
    let loadavg_at_start = reel_sysinfo::load_average();
    let (randomness, redundancy) = if args.incompressible {
        (1.0, 1)
    } else {
        (args.randomness, args.redundancy)
    };
    let workload = Workload {
        seed: args.seed,
        block_size: args.block_size,
        randomness,
        redundancy,
        window_blocks: args.window_blocks,
        total_bytes: args.total,
        incompressible: args.incompressible,
        chunk_avg: args.chunk_size.unwrap_or(ChunkerParams::DEFAULT.avg),
        datagen_flags: format!(
            "--total {} --block-size {} --randomness {randomness} --redundancy {redundancy} --seed {} --window-blocks {}",
            args.total, args.block_size, args.seed, args.window_blocks
        ),
    };
    let gen_cfg = GenConfig {
        seed: args.seed,
        block_size: args.block_size,
        randomness,
        redundancy,
        order: Order::Scattered {
            window_blocks: args.window_blocks as usize,
        },
        incompressible_share: 0.0,
        total_bytes: args.total,
    };
    gen_cfg.validate().map_err(|e| anyhow!("{e}"))?;

    let max_rs = args.record_size.iter().copied().max().unwrap_or(1) as u64;
    let max_streams = args.streams.iter().copied().max().unwrap_or(1) as u64;
    ensure!(
        args.total >= max_rs * max_streams,
        "--total {} is too small for {max_streams} streams of {}-byte records",
        args.total,
        max_rs
    );
    let total = usize::try_from(args.total)
        .map_err(|_| anyhow!("--total is too large for this machine"))?;
    if let Some(avail) = reel_sysinfo::meminfo_bytes("MemAvailable") {
        ensure!(
            args.total < avail / 10 * 9,
            "--total {} does not fit in memory ({} bytes available): the data is held in RAM",
            args.total,
            avail
        );
    }
    ensure!(
        args.dir.is_dir(),
        "--dir {} is not a directory",
        args.dir.display()
    );
    let peers_script = if args.peers {
        Some(find_peers_script(args.peers_script.as_deref())?)
    } else {
        None
    };

    progress(format!(
        "generating {} ({})",
        size_label(args.total),
        workload.datagen_flags
    ));
    let t = Instant::now();
    let mut generator = Generator::new(gen_cfg.clone()).map_err(|e| anyhow!("{e}"))?;
    let expected = generator.expected();
    let mut data = vec![0u8; total];
    let mut filled = 0;
    while filled < total {
        let n = generator.fill(&mut data[filled..(filled + 64 * MIB as usize).min(total)]);
        ensure!(n > 0, "generator ended after {filled} of {total} bytes");
        filled += n;
    }
    progress(format!("generated in {:.1} s", t.elapsed().as_secs_f64()));
    let data = bytes::Bytes::from(data);

    progress("ideal reduction: block-size dedup + zstd -1 of each distinct block");
    let ideal = ideal_reduction(
        &data,
        args.block_size,
        expected.dedup_ratio,
        workload.chunker(),
    )?;

    let stage_len = usize::try_from(args.stage_size)
        .unwrap_or(usize::MAX)
        .min(total);
    progress(format!(
        "stage speeds on one core ({})",
        size_label(stage_len as u64)
    ));
    let stages = stage_speeds(&gen_cfg, &data[..stage_len], workload.chunker())?;

    let s3_env = match args.backend.contains(&s3::BackendKind::S3) {
        true => {
            let bin = harness::procs::versitygw_binary(args.versitygw.as_deref())?;
            progress(format!("starting {} on loopback", bin.display()));
            Some(s3::S3Env {
                gw: harness::procs::S3Gateway::start(&bin, &args.dir, "reel-bench")?,
                upload_threads: usize::from(args.upload_threads),
                object_size: usize::try_from(args.object_size)
                    .map_err(|_| anyhow!("--object-size is too large"))?,
                chunker: workload.chunker(),
            })
        }
        false => None,
    };
    let mut rows = Vec::new();
    let mut s3_rows = Vec::new();
    for &rs in &args.record_size {
        for &n in &args.streams {
            let what = || format!("run with {} records, {n} streams", size_label(rs as u64));
            let mut local = None;
            if args.backend.contains(&s3::BackendKind::Local) {
                let row = run_one(
                    &data,
                    rs,
                    n,
                    &args.dir,
                    ideal.reduction_ratio,
                    workload.chunker(),
                )
                .with_context(what)?;
                progress(format!(
                    "  ingest {:.0} MB/s, read {:.0} MB/s, reduction {:.2}x",
                    row.ingest_mb_per_s, row.read_mb_per_s, row.reduction_ratio
                ));
                rows.push(row);
                local = rows.last();
            }
            if let Some(env) = &s3_env {
                let row = s3::run_cell(env, &data, rs, n, &args.dir, s3_rows.len(), local)
                    .with_context(|| format!("S3 {}", what()))?;
                progress(format!(
                    "  S3 ingest {:.0} MB/s, plain PUT {:.0} MB/s, cold read {:.0} MB/s",
                    row.ingest_mb_per_s, row.plain_mb_per_s, row.cold_read_mb_per_s
                ));
                s3_rows.push(row);
            }
        }
    }
    drop(data);
    let s3 = s3_env.map(|env| s3::S3Report {
        server: env.gw.software(),
        upload_threads: env.upload_threads,
        object_size: env.object_size,
        pack_target: StoreConfig::default().pack_target,
        read_block_bytes: reel_backend::CacheConfig::default().read_block_bytes,
        read_ahead_blocks: Some(reel_backend::CacheConfig::default().read_ahead_blocks),
        unsigned_payload: Some(s3::unsigned(&env)),
        rows: s3_rows,
    });

    let (peers, peers_error) = match &peers_script {
        Some(script) => match run_peers(script, args, &workload) {
            Ok(p) => (p, None),
            Err(e) => {
                progress(format!("peers failed: {e:#}"));
                (Vec::new(), Some(format!("{e:#}")))
            }
        },
        None => (Vec::new(), None),
    };

    Ok(Report {
        tool: "reel bench store".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        unix_time: harness::now_unix(),
        clock_ticks_per_s: reel_sysinfo::ticks_per_second(),
        loadavg_at_start,
        stage_data_bytes: stage_len as u64,
        workload,
        ideal,
        stages,
        rows,
        peers,
        peers_error,
        s3,
    })
}

/// The store in `dir` as `reel serve` lays it out: packs under `objects/`, the catalog in
/// `catalog/`.
fn open_store_with(dir: &Path, config: StoreConfig) -> Result<ChunkStore> {
    let objects = dir.join("objects");
    let backend = LocalBackend::open(&objects)
        .with_context(|| format!("opening the object directory {}", objects.display()))?;
    ChunkStore::open(&dir.join("catalog"), Arc::new(backend), config)
        .with_context(|| format!("opening the store in {}", dir.display()))
}

/// Record-aligned slices, one per stream, covering `data` in order.
fn split(data: &[u8], record_size: usize, streams: usize) -> Vec<&[u8]> {
    let records = data.len().div_ceil(record_size);
    (0..streams)
        .map(|i| {
            let start = (records * i / streams * record_size).min(data.len());
            let end = (records * (i + 1) / streams * record_size).min(data.len());
            &data[start..end]
        })
        .collect()
}

/// A thread builder with a name, so `perf report --comm ingest-0` separates the phases.
fn named(name: &str) -> std::thread::Builder {
    std::thread::Builder::new().name(name.to_string())
}

fn join_all<T>(handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(
            h.join()
                .map_err(|_| anyhow!("a stream thread panicked"))??,
        );
    }
    Ok(out)
}

fn run_one(
    data: &[u8],
    rs: usize,
    n: usize,
    base: &Path,
    ideal: f64,
    chunker: ChunkerParams,
) -> Result<Row> {
    let config = || StoreConfig {
        chunker,
        ..StoreConfig::default()
    };
    let slices = split(data, rs, n);
    let tmp = tempfile::Builder::new()
        .prefix("reel-store-bench.")
        .tempdir_in(base)
        .with_context(|| format!("making a temporary directory in {}", base.display()))?;
    let root = tmp.path();

    progress(format!(
        "ingest: {} records, {n} stream(s), {}",
        size_label(rs as u64),
        size_label(data.len() as u64)
    ));
    let store = open_store_with(root, config())?;
    let streams: Vec<Stream> = (0..n)
        .map(|i| store.open_stream(StreamId(i as u64)))
        .collect::<Result<_, _>>()
        .context("opening streams")?;
    let meter = Meter::start()?;
    let streams = std::thread::scope(|s| {
        let handles = streams
            .into_iter()
            .zip(&slices)
            .enumerate()
            .map(|(i, (stream, slice))| {
                named(&format!("ingest-{i}")).spawn_scoped(s, move || -> Result<Stream> {
                    for record in slice.chunks(rs) {
                        stream.append_record(record)?;
                    }
                    stream.sync()?;
                    Ok(stream)
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        join_all(handles)
    })
    .context("ingest")?;
    let (ingest_wall, ingest_cpu) = meter.stop()?;

    let stats = store.stats()?;
    ensure!(
        stats.logical_bytes == data.len() as u64,
        "store holds {} logical bytes after ingest, expected {}",
        stats.logical_bytes,
        data.len()
    );
    let catalog_tables = store
        .catalog_space()?
        .tables
        .iter()
        .map(TableSpaceJson::from)
        .collect();
    let (catalog_apparent_bytes, catalog_bytes) = dir_bytes(&root.join("catalog"))?;
    let packs_dir_bytes = dir_bytes(&root.join("objects"))?.0;
    if packs_dir_bytes != stats.stored_bytes {
        progress(format!(
            "warning: pack directory holds {packs_dir_bytes} bytes but stats say {} stored",
            stats.stored_bytes
        ));
    }
    drop(streams);
    drop(store);
    // Closing compacts the catalog file if a tenth of it is spare pages (efficiency.md §41);
    // a server idle for `catalog_compact_idle` does the same.
    let catalog_bytes_after_close = dir_bytes(&root.join("catalog"))?.1;

    progress("read-back: reopen and verify");
    let t = Instant::now();
    let store = open_store_with(root, config())?;
    let streams: Vec<Stream> = (0..n)
        .map(|i| store.open_stream(StreamId(i as u64)))
        .collect::<Result<_, _>>()
        .context("reopening streams")?;
    let reopen_s = t.elapsed().as_secs_f64();
    let filter_memory_after_reopen = store.stats()?.filter_memory_bytes;
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
    .context("read-back")?;
    let (read_wall, read_cpu) = meter.stop()?;
    drop(streams);
    drop(store);

    let bytes = data.len() as u64;
    // What grows with unique data is the filter; the locality cache is a fixed budget
    // (`StoreConfig::cache_chunks`), reported separately in the JSON.
    let per_chunk = ratio(stats.filter_memory_bytes as f64, stats.chunks as f64);
    let avg_chunk = ratio(stats.unique_bytes as f64, stats.chunks as f64);
    Ok(Row {
        record_size: rs,
        streams: n,
        bytes,
        ingest_wall_s: ingest_wall,
        ingest_cpu_s: ingest_cpu,
        ingest_mb_per_s: per_s(bytes, MB, ingest_wall),
        ingest_cpu_s_per_gb: ingest_cpu / (bytes as f64 / GB),
        reopen_s,
        read_wall_s: read_wall,
        read_cpu_s: read_cpu,
        read_mb_per_s: per_s(bytes, MB, read_wall),
        read_cpu_s_per_gb: read_cpu / (bytes as f64 / GB),
        dedup_ratio: stats.dedup_ratio(),
        compression_ratio: stats.compression_ratio(),
        reduction_ratio: stats.reduction_ratio(),
        ideal_reduction_ratio: ideal,
        avg_chunk_bytes: avg_chunk,
        index_bytes_per_chunk: per_chunk,
        // At scale the filter's floor no longer matters: bits per chunk come from its design.
        index_mb_per_tb_unique: ratio(
            reel_chunkstore::FILTER_BITS_PER_CHUNK_MAX / 8.0 * 1e12,
            avg_chunk,
        ) / MB,
        catalog_bytes,
        catalog_apparent_bytes,
        catalog_bytes_after_close,
        filter_mb_per_tb_unique: ratio(
            ratio(filter_memory_after_reopen as f64, stats.chunks as f64) * 1e12,
            avg_chunk,
        ) / MB,
        catalog_pct_of_stored: 100.0 * ratio(catalog_bytes as f64, stats.stored_bytes as f64),
        packs_dir_bytes,
        catalog_tables,
        stats: StatsJson::from(&stats),
        filter_memory_after_reopen,
    })
}

/// Where the catalog's bytes are, per table: the file (allocated blocks) is the sum of the
/// tables plus pages redb freed but still holds.
fn write_catalog_tables(s: &mut String, row: &Row) {
    let chunks = row.stats.chunks as f64;
    let logical_kib = row.bytes as f64 / 1024.0;
    let _ = writeln!(
        s,
        "\nCatalog after ingest, {} records, {} stream(s): {} on disk for {} unique chunks, {} of \
         packs (B/chunk = per unique chunk; B/KiB = per KiB written):\n",
        size_label(row.record_size as u64),
        row.streams,
        mb(row.catalog_bytes),
        row.stats.chunks,
        mb(row.stats.stored_bytes),
    );
    let _ = writeln!(
        s,
        "| table | rows | keys+values | index | slack in pages | total | B/chunk | B/KiB |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut sum = 0;
    for t in &row.catalog_tables {
        let total = t.stored_bytes + t.metadata_bytes + t.fragmented_bytes;
        sum += total;
        if total < 64 << 10 {
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.2} |",
            t.name,
            t.rows,
            mb(t.stored_bytes),
            mb(t.metadata_bytes),
            mb(t.fragmented_bytes),
            mb(total),
            ratio(total as f64, chunks),
            ratio(total as f64, logical_kib),
        );
    }
    let freed = row.catalog_bytes.saturating_sub(sum);
    let _ = writeln!(
        s,
        "| (tables under 64K) | | | | | | | |\n| all tables | | | | | {} | {:.0} | {:.2} |\n\
         | file beyond the tables (freed pages, allocator state) | | | | | {} | {:.0} | {:.2} |",
        mb(sum),
        ratio(sum as f64, chunks),
        ratio(sum as f64, logical_kib),
        mb(freed),
        ratio(freed as f64, chunks),
        ratio(freed as f64, logical_kib),
    );
    if row.catalog_bytes_after_close > 0 {
        let _ = writeln!(
            s,
            "\nAfter the store closed (closing compacts the file when a fiftieth of it is spare, \
             a server idle for a while when a tenth is): {} on disk, {:.2} % of the packs.",
            mb(row.catalog_bytes_after_close),
            100.0
                * ratio(
                    row.catalog_bytes_after_close as f64,
                    row.stats.stored_bytes as f64
                ),
        );
    }
}

/// Bytes as decimal megabytes, two places (measured sizes are rarely whole units).
fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / MB)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// Reads `stream` sequentially in `rs`-byte reads and compares it with `expect`.
fn verify_stream(stream: &Stream, expect: &[u8], rs: usize) -> Result<()> {
    let id = stream.id().0;
    ensure!(
        stream.len() == expect.len() as u64,
        "stream {id} is {} bytes long after reopening, expected {}",
        stream.len(),
        expect.len()
    );
    let mut buf = vec![0u8; rs];
    for (i, want) in expect.chunks(rs).enumerate() {
        let offset = (i * rs) as u64;
        let got = &mut buf[..want.len()];
        stream
            .read_at(offset, got)
            .with_context(|| format!("stream {id}: reading {} bytes at {offset}", want.len()))?;
        if got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            bail!(
                "stream {id}: data differs at byte {} (read of {} bytes at {offset})",
                offset + at as u64,
                want.len()
            );
        }
    }
    Ok(())
}

/// Dedup by hashing the data in block-size pieces, then zstd level 1 of each distinct piece.
fn ideal_reduction(
    data: &[u8],
    block_size: usize,
    generator_dedup: f64,
    chunker: ChunkerParams,
) -> Result<Ideal> {
    let t = Instant::now();
    let mut seen = HashSet::new();
    let mut zstd = zstd::bulk::Compressor::new(1)?;
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(block_size));
    let (mut unique_blocks, mut unique_bytes, mut compressed_bytes) = (0u64, 0u64, 0u64);
    for block in data.chunks(block_size) {
        if seen.insert(*blake3::hash(block).as_bytes()) {
            out.clear();
            let n = zstd.compress_to_buffer(block, &mut out)?;
            unique_blocks += 1;
            unique_bytes += block.len() as u64;
            compressed_bytes += n.min(block.len()) as u64;
        }
    }
    let mut chunk_ids = HashSet::new();
    let mut cdc_unique = 0u64;
    let mut offset = 0;
    for len in chunk_lengths(chunker, data) {
        let chunk = &data[offset..offset + len];
        if chunk_ids.insert(*blake3::hash(chunk).as_bytes()) {
            cdc_unique += len as u64;
        }
        offset += len;
    }
    let total = data.len() as f64;
    Ok(Ideal {
        cdc_dedup_ratio: ratio(total, cdc_unique as f64),
        generator_dedup,
        unique_blocks,
        unique_bytes,
        compressed_bytes,
        dedup_ratio: ratio(total, unique_bytes as f64),
        compression_ratio: ratio(unique_bytes as f64, compressed_bytes as f64),
        reduction_ratio: ratio(total, compressed_bytes as f64),
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// Single-threaded speed of each stage of the ingest pipeline on `data`.
fn stage_speeds(cfg: &GenConfig, data: &[u8], params: ChunkerParams) -> Result<Vec<StageSpeed>> {
    let len = data.len() as u64;
    let stage = |stage: &str, bytes: u64, took: Timing, note: String| StageSpeed {
        stage: stage.to_string(),
        bytes,
        seconds: took.wall,
        cpu_seconds: took.cpu,
        gb_per_s: per_s(bytes, GB, took.cpu),
        note,
    };
    let mut out = Vec::new();

    const COPIES: u64 = 4;
    let mut buf = vec![0u8; data.len()];
    buf.copy_from_slice(data); // fault the pages in, untimed
    let t = ThreadTimer::start();
    for _ in 0..COPIES {
        buf.copy_from_slice(black_box(data));
        black_box(&mut buf);
    }
    out.push(stage(
        "memcpy",
        len * COPIES,
        t.elapsed(),
        "copy_from_slice, warm destination".into(),
    ));

    let mut generator = Generator::new(GenConfig {
        total_bytes: len,
        ..cfg.clone()
    })
    .map_err(|e| anyhow!("{e}"))?;
    let t = ThreadTimer::start();
    let n = generator.fill(&mut buf);
    out.push(stage(
        "datagen",
        n as u64,
        t.elapsed(),
        "reel-datagen, same workload, warm destination".into(),
    ));
    drop(buf);

    let t = ThreadTimer::start();
    let lengths = chunk_lengths(params, black_box(data));
    let took = t.elapsed();
    let avg = ratio(len as f64, lengths.len() as f64);
    out.push(stage(
        "chunking",
        len,
        took,
        format!(
            "FastCDC {}/{}/{}, {avg:.0} B average chunk",
            params.min, params.avg, params.max
        ),
    ));

    let t = ThreadTimer::start();
    let mut offset = 0;
    for &l in &lengths {
        black_box(blake3::hash(&data[offset..offset + l]));
        offset += l;
    }
    out.push(stage(
        "BLAKE3",
        len,
        t.elapsed(),
        "one hash per chunk".into(),
    ));

    // What the store does: a record's chunks hashed together (`multihash`).
    const BATCH_BYTES: usize = 256 << 10;
    let t = ThreadTimer::start();
    let mut ids = Vec::new();
    let mut batch: Vec<&[u8]> = Vec::new();
    let (mut offset, mut batched) = (0, 0);
    for &l in &lengths {
        batch.push(&data[offset..offset + l]);
        offset += l;
        batched += l;
        if batched >= BATCH_BYTES || offset == data.len() {
            reel_chunkstore::multihash::hash_all(black_box(&batch), &mut ids);
            black_box(&ids);
            batch.clear();
            batched = 0;
        }
    }
    out.push(stage(
        "BLAKE3 batched",
        len,
        t.elapsed(),
        "the chunks of each 256 KiB hashed together, as the store does".into(),
    ));

    let mut zstd = zstd::bulk::Compressor::new(1)?;
    let mut pieces = Vec::with_capacity(data.len() / ZSTD_PIECE + 1);
    let mut packed = 0u64;
    let t = ThreadTimer::start();
    for piece in data.chunks(ZSTD_PIECE) {
        let mut dst = Vec::with_capacity(zstd::zstd_safe::compress_bound(piece.len()));
        packed += zstd.compress_to_buffer(piece, &mut dst)? as u64;
        pieces.push(dst);
    }
    let took = t.elapsed();
    out.push(stage(
        "zstd -1 compress",
        len,
        took,
        format!("128 KiB pieces, {:.2}x", ratio(len as f64, packed as f64)),
    ));

    let mut unzstd = zstd::bulk::Decompressor::new()?;
    let mut dst = Vec::with_capacity(ZSTD_PIECE);
    let t = ThreadTimer::start();
    for piece in &pieces {
        dst.clear();
        unzstd.decompress_to_buffer(piece, &mut dst)?;
        black_box(&dst);
    }
    out.push(stage(
        "zstd decompress",
        len,
        t.elapsed(),
        "the same pieces".into(),
    ));
    Ok(out)
}

// ---- peers --------------------------------------------------------------------------------

fn find_peers_script(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = given {
        ensure!(p.is_file(), "--peers-script {} does not exist", p.display());
        return Ok(p.to_path_buf());
    }
    let candidates = [
        PathBuf::from("bench/peers/run.sh"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers/run.sh"),
    ];
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        anyhow!("bench/peers/run.sh not found: run from the source tree or pass --peers-script")
    })
}

fn run_peers(
    script: &Path,
    args: &StoreArgs,
    workload: &Workload,
) -> Result<Vec<serde_json::Value>> {
    let tmp = tempfile::Builder::new()
        .prefix("reel-store-bench-peers.")
        .tempdir_in(&args.dir)?;
    let json = tmp.path().join("peers.jsonl");
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .arg("--json")
        .arg(&json)
        .arg("--tools")
        .arg(&args.peer_tools);
    cmd.args(workload.datagen_flags.split_whitespace());
    if std::env::var_os("PEERS_TMPDIR").is_none() {
        cmd.env("PEERS_TMPDIR", &args.dir);
    }
    if std::env::var_os("REEL_DATAGEN").is_none() {
        // A `cargo build --release -p reel -p reel-datagen` puts it next to us.
        let beside_us = std::env::current_exe()
            .ok()
            .and_then(|e| Some(e.parent()?.join("reel-datagen")));
        if let Some(datagen) = beside_us.filter(|p| p.is_file()) {
            cmd.env("REEL_DATAGEN", datagen);
        }
    }
    progress(format!(
        "peers: {} {}",
        script.display(),
        workload.datagen_flags
    ));
    let output = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running the peers script")?;
    ensure!(
        output.status.success(),
        "{} failed ({})",
        script.display(),
        output.status
    );
    let text = fs::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("peers JSON line {l:?}")))
        .collect()
}

// ---- output -------------------------------------------------------------------------------

/// The tables, then the `(title, link)` charts.
fn render_markdown(r: &Report, charts: &[(String, String)]) -> String {
    let w = &r.workload;
    let mut s = String::new();
    let what = if w.incompressible {
        "incompressible (randomness 1, R=1)".to_string()
    } else {
        format!("randomness {}, R={}", w.randomness, w.redundancy)
    };
    let _ = writeln!(
        s,
        "### reel bench store: {what}, {} per run, seed {}\n\nLoad average at start: {}.\n",
        size_label(w.total_bytes),
        w.seed,
        r.loadavg_at_start
    );
    let _ = writeln!(
        s,
        "Data: `reel-datagen {}`. Ideal: dedup {:.2}x (generator promises {:.2}x), zstd -1 per distinct \
         {} block {:.2}x, reduction {:.2}x. Plain CDC of the whole stream (store chunker, no record \
         boundaries) dedups {:.2}x. Chunks: {} on average.\n",
        w.datagen_flags,
        r.ideal.dedup_ratio,
        r.ideal.generator_dedup,
        size_label(w.block_size as u64),
        r.ideal.compression_ratio,
        r.ideal.reduction_ratio,
        r.ideal.cdc_dedup_ratio,
        size_label(u64::from(w.chunk_avg))
    );
    let _ = writeln!(
        s,
        "| record | streams | ingest MB/s | read MB/s | ingest CPU-s/GB | read CPU-s/GB | dedup | compression \
         | reduction | ideal | filter B/chunk (this run) | filter MB/TB at scale (max) | filter MB/TB (this run, reopened) | catalog % of stored |"
    );
    let _ = writeln!(
        s,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.1} | {:.0} | {:.0} | {:.2} |",
            size_label(row.record_size as u64),
            row.streams,
            row.ingest_mb_per_s,
            row.read_mb_per_s,
            row.ingest_cpu_s_per_gb,
            row.read_cpu_s_per_gb,
            row.dedup_ratio,
            row.compression_ratio,
            row.reduction_ratio,
            row.ideal_reduction_ratio,
            row.index_bytes_per_chunk,
            row.index_mb_per_tb_unique,
            row.filter_mb_per_tb_unique,
            row.catalog_pct_of_stored,
        );
    }
    for row in r.rows.iter().filter(|row| !row.catalog_tables.is_empty()) {
        write_catalog_tables(&mut s, row);
    }
    let _ = writeln!(
        s,
        "\nStage speeds, one thread, first {} of the same data (GB/s per CPU-second of the thread; \
         wall-clock GB/s alongside):\n",
        size_label(r.stage_data_bytes)
    );
    let _ = writeln!(
        s,
        "| stage | GB/s | CPU-s/GB | wall GB/s | note |\n|---|---:|---:|---:|---|"
    );
    for st in &r.stages {
        let _ = writeln!(
            s,
            "| {} | {:.2} | {:.2} | {:.2} | {} |",
            st.stage,
            st.gb_per_s,
            ratio(1.0, st.gb_per_s),
            per_s(st.bytes, GB, st.seconds),
            st.note
        );
    }
    if !r.peers.is_empty() || r.peers_error.is_some() {
        let _ = writeln!(
            s,
            "\nPeers on the same stream (bench/peers/run.sh; single stream from a pipe, 1 MiB writes):\n"
        );
        let _ = writeln!(
            s,
            "| tool | config | ingest MB/s | CPU-s/GB | reduction (whole repository) | note |\n|---|---|---:|---:|---:|---|"
        );
        // The peers' reduction counts their whole repository (index and metadata included),
        // so reel's row counts the catalog too, not only the packs.
        for row in r.rows.iter().filter(|row| row.streams == 1) {
            let _ = writeln!(
                s,
                "| reel {} | {} records | {:.0} | {:.2} | {:.2}x | packs alone {:.2}x; catalog {:.0} % of the packs |",
                r.version,
                size_label(row.record_size as u64),
                row.ingest_mb_per_s,
                row.ingest_cpu_s_per_gb,
                row.reduction_ratio / (1.0 + row.catalog_pct_of_stored / 100.0),
                row.reduction_ratio,
                row.catalog_pct_of_stored
            );
        }
        for p in &r.peers {
            let get = |k: &str| p.get(k).and_then(serde_json::Value::as_f64);
            let text = |k: &str| {
                p.get(k)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let tool = format!("{} {}", text("tool"), text("version"))
                .trim()
                .to_string();
            match (
                text("status").as_str(),
                get("mb_per_s"),
                get("cpu_s"),
                get("input_bytes"),
                get("reduction"),
            ) {
                ("ok", Some(mbps), Some(cpu), Some(input), Some(red)) => {
                    let _ = writeln!(
                        s,
                        "| {tool} | defaults, zstd 1 | {mbps:.0} | {:.2} | {red:.2}x | |",
                        cpu / (input / GB).max(1e-9)
                    );
                }
                (status, ..) => {
                    let _ = writeln!(s, "| {tool} | | | | | {} |", status.replace('|', "/"));
                }
            }
        }
        if let Some(e) = &r.peers_error {
            let _ = writeln!(s, "\npeers script failed: {}", e.replace('\n', " "));
        }
    }
    if let Some(s3) = &r.s3 {
        s3::render(s3, w.incompressible, &mut s);
    }
    for (title, file) in charts {
        let _ = writeln!(s, "\n![{title}]({file})");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_reject() {
        assert_eq!(parse_record_size("256K").unwrap(), 256 << 10);
        assert!(parse_record_size("128M").is_err());
        assert!(parse_block_size("100").is_err());
        assert!(parse_streams("0").is_err());
        assert!(parse_fraction("1.5").is_err());
    }

    #[test]
    fn split_is_record_aligned_and_complete() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        for streams in 1..5 {
            let parts = split(&data, 64, streams);
            assert_eq!(parts.len(), streams);
            assert_eq!(parts.concat(), data);
            for p in &parts[..streams - 1] {
                assert_eq!(p.len() % 64, 0);
            }
        }
    }

    #[test]
    fn small_end_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = GenConfig {
            seed: 3,
            redundancy: 4,
            order: Order::Scattered { window_blocks: 16 },
            total_bytes: 8 << 20,
            ..GenConfig::default()
        };
        let mut generator = Generator::new(cfg).unwrap();
        let mut data = vec![0u8; 8 << 20];
        assert_eq!(generator.fill(&mut data), data.len());
        let row = run_one(&data, 64 << 10, 2, dir.path(), 1.0, ChunkerParams::DEFAULT).unwrap();
        assert_eq!(row.stats.logical_bytes, data.len() as u64);
        assert!(row.dedup_ratio > 2.0, "dedup {}", row.dedup_ratio);
    }

    /// The S3 cell against a versitygw the test starts (skipped, saying so, when versitygw is
    /// not installed: the S3 back end's own tests are the ones that never skip).
    #[test]
    fn small_s3_cell() {
        let Ok(bin) = harness::procs::versitygw_binary(None) else {
            eprintln!("versitygw not installed: skipping small_s3_cell");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let env = s3::S3Env {
            gw: harness::procs::S3Gateway::start(&bin, dir.path(), "reel-bench-test").unwrap(),
            upload_threads: 2,
            object_size: 1 << 20,
            chunker: ChunkerParams::DEFAULT,
        };
        let pid = env.gw.pid();
        let mut generator = Generator::new(GenConfig {
            seed: 5,
            total_bytes: 4 << 20,
            ..GenConfig::default()
        })
        .unwrap();
        let mut data = vec![0u8; 4 << 20];
        assert_eq!(generator.fill(&mut data), data.len());
        let data = bytes::Bytes::from(data);
        let local = run_one(&data, 64 << 10, 1, dir.path(), 1.0, ChunkerParams::DEFAULT).unwrap();
        let row = s3::run_cell(&env, &data, 64 << 10, 2, dir.path(), 0, Some(&local)).unwrap();
        assert!(row.ingest_requests.puts >= 2, "{:?}", row.ingest_requests);
        assert!(row.cold_read_requests.bytes_down >= row.stored_bytes);
        assert_eq!(row.plain_objects, 4);
        let mut md = String::new();
        s3::render(
            &s3::S3Report {
                server: env.gw.software(),
                upload_threads: 2,
                object_size: 1 << 20,
                pack_target: 1,
                read_block_bytes: 1,
                read_ahead_blocks: Some(4),
                unsigned_payload: Some(true),
                rows: vec![row],
            },
            false,
            &mut md,
        );
        assert!(md.contains("cold-cache S3 read"), "{md}");
        drop(env);
        // The gateway's process is gone once its guard is dropped.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }
}
