//! `reel bench growth`: how the catalog grows over a long write (issue 14's size table).
//!
//! `reel bench store` holds a run's data in memory to verify it; this one streams it instead:
//! a generator thread fills 64 MiB buffers that one writer appends as tape records, so the
//! write can be far larger than RAM (100 GiB and more). At every checkpoint the writer makes a
//! synchronising point and the catalog is measured: its file (allocated blocks, what `du`
//! shows), its tables, the store's index memory and the process's resident memory, with the
//! ingest rate and CPU of the interval since the previous checkpoint. Nothing is read back:
//! `reel bench store` checks contents.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, ensure};
use reel_chunkstore::{ChunkerParams, StoreConfig, StreamId};
use reel_datagen::{GenConfig, Generator, Order};
use serde::{Deserialize, Serialize};

use super::{
    GB, MB, MIB, TableSpaceJson, dir_bytes, open_store_with, parse_block_size, parse_chunk_size,
    parse_fraction, parse_record_size, parse_size, per_s, process_cpu_seconds, progress, ratio,
    thread_cpu_ns,
};
use crate::harness::{self, size_label};

/// The generator's buffer (rounded down to whole records): what the writer appends between
/// two looks at the channel.
const BUFFER: usize = 64 * MIB as usize;

/// Arguments of `reel bench growth`. Sizes take K/M/G/T suffixes (binary).
#[derive(clap::Args, Debug)]
pub struct GrowthArgs {
    /// Bytes written in all (one stream).
    #[arg(long, default_value = "100G", value_parser = parse_size)]
    total: u64,
    /// A checkpoint (synchronising point and measurement) every this many bytes.
    #[arg(long, default_value = "10G", value_parser = parse_size)]
    every: u64,
    /// Tape record size.
    #[arg(long, default_value = "256K", value_parser = parse_record_size)]
    record_size: usize,
    /// Fraction of each compressible block's bytes that are random (0..=1).
    #[arg(long, default_value_t = 0.25, value_parser = parse_fraction)]
    randomness: f64,
    /// Average appearances of each unique block (R; 1 = nothing to dedup).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    redundancy: u32,
    /// Generator unique-block size (what repeats).
    #[arg(long, default_value = "256K", value_parser = parse_block_size)]
    block_size: usize,
    /// Generator shuffle window in blocks.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 26))]
    window_blocks: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Average chunk size of the store (a power of two from 256 to 1M) [default: a new
    /// store's, 2K].
    #[arg(long, value_parser = parse_chunk_size)]
    chunk_size: Option<u32>,
    /// The store's catalog cache (`[store] catalog_cache`) [default: the store's default].
    #[arg(long, value_parser = parse_size)]
    catalog_cache: Option<u64>,
    /// Directory in which the temporary store is made (and removed afterwards).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// --json, --markdown (--charts and --from-json as for the other benchmarks).
    #[command(flatten)]
    report: harness::ReportFlags,
}

/// What `reel bench growth` measured.
#[derive(Serialize, Deserialize, Debug)]
pub struct GrowthReport {
    tool: String,
    version: String,
    unix_time: u64,
    loadavg_at_start: String,
    loadavg_at_end: String,
    record_size: usize,
    randomness: f64,
    redundancy: u32,
    block_size: usize,
    window_blocks: u64,
    seed: u64,
    catalog_cache_bytes: usize,
    /// The store's average chunk size (2 KiB in results from before it was recorded).
    #[serde(default = "super::legacy_chunk_avg")]
    chunk_avg: u32,
    checkpoints: Vec<Checkpoint>,
}

/// The store after `written` bytes, and the interval that led there.
#[derive(Serialize, Deserialize, Debug)]
struct Checkpoint {
    written: u64,
    interval_bytes: u64,
    interval_wall_s: f64,
    /// Process CPU in the interval, less the generator thread's.
    interval_store_cpu_s: f64,
    interval_generator_cpu_s: f64,
    unique_bytes: u64,
    unique_chunks: u64,
    packs_bytes: u64,
    catalog_file_bytes: u64,
    catalog_apparent_bytes: u64,
    catalog_tables: Vec<TableSpaceJson>,
    filter_memory_bytes: u64,
    cache_memory_bytes: u64,
    /// VmRSS of this process (the store, its caches and the generator's two buffers).
    resident_bytes: u64,
}

impl Checkpoint {
    fn avg_chunk(&self) -> f64 {
        ratio(self.unique_bytes as f64, self.unique_chunks as f64)
    }
    /// Chunk references the streams hold: the bytes written over the average chunk.
    fn references_estimate(&self) -> f64 {
        ratio(self.written as f64, self.avg_chunk())
    }
    /// Pages of the named tables (`None`: all of them).
    fn table_bytes(&self, names: Option<&[&str]>) -> u64 {
        self.catalog_tables
            .iter()
            .filter(|t| names.is_none_or(|n| n.contains(&t.name.as_str())))
            .map(|t| t.stored_bytes + t.metadata_bytes + t.fragmented_bytes)
            .sum()
    }
}

pub fn run(args: GrowthArgs) -> Result<()> {
    args.report.check_names()?;
    let report = args
        .report
        .measure_or_replay("reel bench growth", || measure(&args))?;
    let text = args
        .report
        .write(&report, &[], |_| render_markdown(&report))?;
    print!("{text}");
    Ok(())
}

fn measure(args: &GrowthArgs) -> Result<GrowthReport> {
    ensure!(
        args.every >= args.record_size as u64 && args.total >= args.every,
        "--every must be at least one record and --total at least --every"
    );
    ensure!(
        args.dir.is_dir(),
        "--dir {} is not a directory",
        args.dir.display()
    );
    let gen_cfg = GenConfig {
        seed: args.seed,
        block_size: args.block_size,
        randomness: args.randomness,
        redundancy: args.redundancy,
        order: Order::Scattered {
            window_blocks: args.window_blocks as usize,
        },
        incompressible_share: 0.0,
        total_bytes: args.total,
    };
    gen_cfg.validate().map_err(|e| anyhow!("{e}"))?;
    let mut config = StoreConfig {
        chunker: ChunkerParams::with_avg(args.chunk_size.unwrap_or(ChunkerParams::DEFAULT.avg)),
        ..StoreConfig::default()
    };
    if let Some(bytes) = args.catalog_cache {
        config.catalog_cache_bytes =
            usize::try_from(bytes).map_err(|_| anyhow!("--catalog-cache is too large"))?;
    }
    let catalog_cache_bytes = config.catalog_cache_bytes;
    let chunk_avg = config.chunker.avg;
    let loadavg_at_start = reel_sysinfo::load_average();

    let tmp = tempfile::Builder::new()
        .prefix("reel-growth-bench.")
        .tempdir_in(&args.dir)
        .with_context(|| format!("making a temporary directory in {}", args.dir.display()))?;
    let root = tmp.path();
    let store = open_store_with(root, config)?;
    let stream = store
        .open_stream(StreamId(0))
        .context("opening the stream")?;

    // The generator runs ahead by two buffers; its CPU is kept apart from the store's.
    let generator_cpu_ns = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    let generator = {
        let cpu = generator_cpu_ns.clone();
        let total = args.total;
        let buffer = (BUFFER / args.record_size).max(1) * args.record_size;
        std::thread::Builder::new()
            .name("generator".into())
            .spawn(move || -> Result<()> {
                let start = thread_cpu_ns().unwrap_or(0);
                let mut generator = Generator::new(gen_cfg).map_err(|e| anyhow!("{e}"))?;
                let mut left = total;
                while left > 0 {
                    let mut buf = vec![0u8; (buffer as u64).min(left) as usize];
                    let mut filled = 0;
                    while filled < buf.len() {
                        let n = generator.fill(&mut buf[filled..]);
                        ensure!(n > 0, "the generator ended {left} bytes early");
                        filled += n;
                    }
                    left -= filled as u64;
                    cpu.store(
                        thread_cpu_ns().unwrap_or(0).saturating_sub(start),
                        Ordering::Relaxed,
                    );
                    if tx.send(buf).is_err() {
                        break; // the writer stopped
                    }
                }
                Ok(())
            })?
    };

    progress(format!(
        "growth: {} in {} records, a checkpoint every {}, store in {}",
        size_label(args.total),
        size_label(args.record_size as u64),
        size_label(args.every),
        root.display()
    ));
    let mut checkpoints = Vec::new();
    let (mut written, mut interval_bytes) = (0u64, 0u64);
    let mut next_checkpoint = args.every;
    let mut interval = (
        Instant::now(),
        process_cpu_seconds()?,
        generator_cpu_ns.load(Ordering::Relaxed),
    );
    // Buffers are whole records (but the last), so a record never straddles two.
    while let Ok(buf) = rx.recv() {
        for record in buf.chunks(args.record_size) {
            stream.append_record(record)?;
            written += record.len() as u64;
            interval_bytes += record.len() as u64;
            // At the first record boundary at or after each multiple of --every, and the end.
            if written < next_checkpoint && written < args.total {
                continue;
            }
            while next_checkpoint <= written {
                next_checkpoint += args.every;
            }
            stream.sync()?;
            let wall = interval.0.elapsed().as_secs_f64();
            let cpu = process_cpu_seconds()? - interval.1;
            let generator_ns = generator_cpu_ns.load(Ordering::Relaxed);
            let generator_cpu = generator_ns.saturating_sub(interval.2) as f64 / 1e9;
            let stats = store.stats()?;
            let (catalog_apparent_bytes, catalog_file_bytes) = dir_bytes(&root.join("catalog"))?;
            let point = Checkpoint {
                written,
                interval_bytes,
                interval_wall_s: wall,
                interval_store_cpu_s: (cpu - generator_cpu).max(0.0),
                interval_generator_cpu_s: generator_cpu,
                unique_bytes: stats.unique_bytes,
                unique_chunks: stats.chunks,
                packs_bytes: stats.stored_bytes,
                catalog_file_bytes,
                catalog_apparent_bytes,
                catalog_tables: store
                    .catalog_space()?
                    .tables
                    .iter()
                    .map(TableSpaceJson::from)
                    .collect(),
                filter_memory_bytes: stats.filter_memory_bytes,
                cache_memory_bytes: stats.cache_memory_bytes,
                resident_bytes: reel_sysinfo::status_kib(reel_sysinfo::Proc::This, "VmRSS")
                    .unwrap_or(0)
                    * 1024,
            };
            progress(format!(
                "  {}: {:.0} MB/s, {:.2} store CPU-s/GB, catalog {:.1} MB ({:.1} B per unique chunk)",
                size_label(written),
                per_s(point.interval_bytes, MB, wall),
                point.interval_store_cpu_s / (point.interval_bytes as f64 / GB),
                point.catalog_file_bytes as f64 / MB,
                ratio(point.catalog_file_bytes as f64, point.unique_chunks as f64)
            ));
            checkpoints.push(point);
            interval_bytes = 0;
            // The measuring is not the next interval's work.
            interval = (
                Instant::now(),
                process_cpu_seconds()?,
                generator_cpu_ns.load(Ordering::Relaxed),
            );
        }
    }
    drop(rx);
    generator
        .join()
        .map_err(|_| anyhow!("the generator thread panicked"))??;
    ensure!(
        written == args.total,
        "wrote {written} of {} bytes",
        args.total
    );
    drop(stream);
    drop(store);
    Ok(GrowthReport {
        tool: "reel bench growth".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        unix_time: harness::now_unix(),
        loadavg_at_start,
        loadavg_at_end: reel_sysinfo::load_average(),
        record_size: args.record_size,
        randomness: args.randomness,
        redundancy: args.redundancy,
        block_size: args.block_size,
        window_blocks: args.window_blocks,
        seed: args.seed,
        catalog_cache_bytes,
        chunk_avg,
        checkpoints,
    })
}

fn render_markdown(r: &GrowthReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "`reel bench growth`: one stream of {} records (randomness {}, R = {}, {} blocks in \
         {}-block windows, seed {}), a synchronising point and a measurement at each row; \
         catalog cache {} MiB, chunks {} on average. Load average at start {}, at end {}.\n",
        size_label(r.record_size as u64),
        r.randomness,
        r.redundancy,
        size_label(r.block_size as u64),
        r.window_blocks,
        r.seed,
        r.catalog_cache_bytes >> 20,
        size_label(u64::from(r.chunk_avg)),
        r.loadavg_at_start,
        r.loadavg_at_end
    );
    let _ = writeln!(
        s,
        "| written | unique chunks | packs | catalog file (`du`) | % of written | % of packs | \
         catalog B per unique chunk | tables B per unique chunk | record maps B per reference | \
         index filter MB | resident MB | interval MB/s | interval store CPU-s/GB |"
    );
    let _ = writeln!(
        s,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for c in &r.checkpoints {
        let tables = c.table_bytes(None);
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} GB | {:.1} MB | {:.2} % | {:.1} % | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} |",
            size_label(c.written),
            c.unique_chunks,
            c.packs_bytes as f64 / GB,
            c.catalog_file_bytes as f64 / MB,
            100.0 * ratio(c.catalog_file_bytes as f64, c.written as f64),
            100.0 * ratio(c.catalog_file_bytes as f64, c.packs_bytes as f64),
            ratio(c.catalog_file_bytes as f64, c.unique_chunks as f64),
            ratio(tables as f64, c.unique_chunks as f64),
            ratio(
                c.table_bytes(Some(&["span_index", "span_bodies", "extents"])) as f64,
                c.references_estimate()
            ),
            c.filter_memory_bytes as f64 / MB,
            c.resident_bytes as f64 / MB,
            per_s(c.interval_bytes, MB, c.interval_wall_s),
            c.interval_store_cpu_s / (c.interval_bytes as f64 / GB),
        );
    }
    let _ = writeln!(
        s,
        "\nPer reference: the record-map tables (`spans`, `extents`) over the chunk references \
         the stream holds, estimated as the bytes written over the average unique chunk. Store \
         CPU: the process's CPU in the interval less the generator thread's."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GrowthArgs,
    }

    #[test]
    fn a_small_growth_run_has_a_checkpoint_per_interval_and_a_growing_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let cli = Cli::parse_from([
            "growth",
            "--total",
            "24M",
            "--every",
            "8M",
            "--record-size",
            "96K", // not a divisor of the generator's 64 MiB
            "--redundancy",
            "1",
            "--dir",
            dir.path().to_str().unwrap(),
        ]);
        let report = measure(&cli.args).unwrap();
        let written: Vec<u64> = report.checkpoints.iter().map(|c| c.written).collect();
        // Checkpoints on the first record boundary at or after 8M and 16M, then the end.
        let rs = 96 << 10;
        assert_eq!(
            written,
            vec![
                (8u64 << 20).div_ceil(rs) * rs,
                (16u64 << 20).div_ceil(rs) * rs,
                24 << 20
            ]
        );
        assert_eq!(
            report
                .checkpoints
                .iter()
                .map(|c| c.interval_bytes)
                .sum::<u64>(),
            24 << 20
        );
        let chunks: Vec<u64> = report.checkpoints.iter().map(|c| c.unique_chunks).collect();
        assert!(chunks.windows(2).all(|w| w[0] < w[1]), "{chunks:?}");
        for c in &report.checkpoints {
            assert!(c.catalog_file_bytes > 0 && c.packs_bytes > 0);
            assert!(
                c.table_bytes(Some(&["chunk_index"])) > 0,
                "{:?}",
                c.catalog_tables
            );
        }
        let text = render_markdown(&report);
        assert_eq!(text.matches("\n| 24M |").count(), 1, "{text}");
        // Nothing is left behind in --dir.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
