//! `reel-datagen`: write a deterministic tapewrite-style stream to stdout,
//! or measure the generator's speed with `--speed`.

use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use reel_datagen::{GenConfig, Generator, Order, ShiftConfig, unique_block};

/// Write a deterministic dedup/compression test stream to stdout.
///
/// Sizes take K/M/G/T suffixes (binary: KiB, MiB, GiB, TiB).
#[derive(Parser, Debug)]
#[command(name = "reel-datagen", version)]
struct Args {
    /// Unique block size.
    #[arg(long, default_value = "256K", value_parser = parse_size)]
    block_size: u64,
    /// Fraction of each compressible block's bytes that are random.
    #[arg(long, default_value_t = 0.25)]
    randomness: f64,
    /// Average appearances of each unique block (1 = all unique).
    #[arg(long, default_value_t = 1)]
    redundancy: u32,
    /// Stream length (before shift inserts).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    total: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Insert random bytes after every this many stream bytes.
    #[arg(long, value_parser = parse_size)]
    shift_every: Option<u64>,
    /// Length range of each insert, `A..B` (inclusive) or `N`.
    #[arg(long, default_value = "1..16", value_parser = parse_range)]
    shift_len: RangeInclusive<usize>,
    /// Emit the unique sequence R times in order instead of scattering repeats.
    #[arg(long)]
    in_order: bool,
    /// Slots per shuffle window for scattered repeats.
    #[arg(long, default_value_t = 1024)]
    window_blocks: usize,
    /// Fraction of unique blocks that are entirely random.
    #[arg(long, default_value_t = 0.0)]
    incompressible_share: f64,
    /// Write bytes in pieces of this size.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    record_size: u64,
    /// Print the ideal dedup figures to stderr.
    #[arg(long)]
    stats: bool,
    /// Measure generation speed (single thread) instead of writing the stream.
    #[arg(long)]
    speed: bool,
}

use reel_datagen::parse_size;

fn parse_range(s: &str) -> Result<RangeInclusive<usize>, String> {
    let parse = |x: &str| {
        x.trim()
            .parse::<usize>()
            .map_err(|e| format!("bad range {s:?}: {e}"))
    };
    match s.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (parse(a)?, parse(b.trim_start_matches('='))?);
            if a > b {
                return Err(format!("empty range {s:?}"));
            }
            Ok(a..=b)
        }
        None => parse(s).map(|n| n..=n),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (e.g. `| head`) is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reel-datagen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> io::Result<()> {
    let cfg = GenConfig {
        seed: args.seed,
        block_size: usize::try_from(args.block_size).unwrap_or(usize::MAX),
        randomness: args.randomness,
        redundancy: args.redundancy,
        order: if args.in_order {
            Order::InOrder
        } else {
            Order::Scattered {
                window_blocks: args.window_blocks,
            }
        },
        incompressible_share: args.incompressible_share,
        total_bytes: args.total,
    };
    let invalid = |e: reel_datagen::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e);
    let mut generator = match args.shift_every {
        Some(every) => Generator::with_shift(
            cfg.clone(),
            ShiftConfig {
                insert_every: every,
                insert_len: args.shift_len.clone(),
            },
        ),
        None => Generator::new(cfg.clone()),
    }
    .map_err(invalid)?;
    if args.stats {
        eprintln!("{:?}", generator.expected());
    }
    let record = usize::try_from(args.record_size.max(1)).unwrap_or(usize::MAX);
    if args.speed {
        speed(&cfg, &mut generator, record);
        return Ok(());
    }
    let mut out = io::stdout().lock();
    let mut buf = Vec::with_capacity(record);
    while generator.next_record(&mut buf, record) > 0 {
        out.write_all(&buf)?;
    }
    out.flush()
}

fn speed(cfg: &GenConfig, generator: &mut Generator, record: usize) {
    let gbs = |bytes: u64, t: Instant| bytes as f64 / t.elapsed().as_secs_f64() / 1e9;
    // Raw unique-block synthesis into one buffer.
    let mut block = vec![0u8; cfg.block_size];
    let blocks = (cfg.total_bytes / cfg.block_size as u64).max(1);
    let t = Instant::now();
    for id in 0..blocks {
        unique_block(cfg, id, &mut block);
    }
    println!(
        "block generation: {:.2} GB/s ({} x {} B blocks)",
        gbs(blocks * cfg.block_size as u64, t),
        blocks,
        cfg.block_size
    );
    // The full stream path (slot map, shift, record cutting).
    let mut buf = vec![0u8; record];
    let t = Instant::now();
    let mut n = 0u64;
    loop {
        let k = generator.fill(&mut buf);
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    println!(
        "stream ({} B records): {:.2} GB/s ({n} bytes)",
        record,
        gbs(n, t)
    );
}
