//! The command line ([`BenchArgs`]) and its validation into a [`Plan`]. Everything here is
//! checked without touching the system, so a bad argument stops the run before any target
//! starts; what needs the targets (how many drives they have, their block limits, whether the
//! IQN exists) is checked after they start and before anything is written.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};

/// Largest record: READ(6)/WRITE(6) carry a 24-bit transfer length.
pub const MAX_RECORD: u32 = (1 << 24) - 1;
pub const MAX_DRIVES: u32 = 64;
pub const MAX_QUEUE_DEPTH: u32 = 64;

/// Tape throughput: reel's library next to tgt's SSC emulation, side by side in one run.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Targets to measure, comma separated: reel, tgt. Each cell runs on each in turn.
    #[arg(long, value_delimiter = ',', default_value = "reel,tgt")]
    pub targets: Vec<String>,
    /// Drives writing at once (one session each), comma separated: one cell per count.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub drives: Vec<u32>,
    /// Tape record sizes (K/M suffixes are binary), comma separated: one cell per size.
    #[arg(
        long = "record-size",
        value_delimiter = ',',
        default_value = "64K,256K,1M"
    )]
    pub record_sizes: Vec<String>,
    /// Bytes written (and read back) per drive in each cell.
    #[arg(long, default_value = "2G", value_name = "SIZE")]
    pub size: String,
    /// WRITE(6)/READ(6) commands in flight per drive (tape commands run in CmdSN order).
    #[arg(long = "queue-depth", default_value_t = 8)]
    pub queue_depth: u32,
    /// Also write a filemark after every SIZE bytes of records (the last one is always there).
    #[arg(long, value_name = "SIZE")]
    pub filemark_every: Option<String>,
    /// Write those intermediate filemarks with IMMED=1 (no synchronisation).
    #[arg(long, requires = "filemark_every")]
    pub filemark_immed: bool,
    /// Every drive writes the same stream (otherwise drive i uses seed + i, so drives do not
    /// dedup against each other).
    #[arg(long)]
    pub same_data: bool,
    /// Generator: fraction of each block's bytes that are random (0.25 ≈ 4:1 compressible).
    #[arg(long, default_value_t = 0.25)]
    pub randomness: f64,
    /// Generator: average appearances of each unique block (R; 1 = nothing to dedup).
    #[arg(long, default_value_t = 8)]
    pub redundancy: u32,
    /// Generator: unique block size.
    #[arg(long, default_value = "256K", value_name = "SIZE")]
    pub block_size: String,
    /// Generator: slots per shuffle window (repeats of a block stay within one window).
    #[arg(long, default_value_t = 1024)]
    pub window_blocks: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also run the flat-throughput check: one drive per target writing (and reading back)
    /// SIZE at --flat-record-size, sampled every second.
    #[arg(long, value_name = "SIZE")]
    pub flat: Option<String>,
    #[arg(long, default_value = "256K", value_name = "SIZE")]
    pub flat_record_size: String,
    /// Where targets keep their data during the run (a fresh directory per cell, removed
    /// afterwards; both targets on the same filesystem).
    #[arg(long, default_value = "/var/tmp/reel-bench-work", value_name = "DIR")]
    pub work_dir: PathBuf,
    /// Keep the work directory's contents (for inspection).
    #[arg(long)]
    pub keep: bool,
    /// Seconds a single command may take before the run is stopped as hung.
    #[arg(long, default_value_t = 300)]
    pub command_timeout: u64,
    /// The `reel` binary to start (default: `reel` next to this program).
    #[arg(long, value_name = "PATH")]
    pub reel_bin: Option<PathBuf>,
    /// tgt's tools.
    #[arg(long, default_value = "tgtd", value_name = "PATH")]
    pub tgtd: String,
    #[arg(long, default_value = "tgtadm", value_name = "PATH")]
    pub tgtadm: String,
    #[arg(long, default_value = "tgtimg", value_name = "PATH")]
    pub tgtimg: String,
    /// Run tgt with cartridges preloaded in its drives instead of loading them through its
    /// changer (MOVE MEDIUM).
    #[arg(long)]
    pub tgt_no_changer: bool,
    /// Use a reel library that is already running at ADDR instead of starting one (its
    /// storage slots must hold at least as many cartridges as drives are used; the cells
    /// then share its store, so later cells dedup against earlier ones).
    #[arg(long, value_name = "ADDR")]
    pub reel_addr: Option<String>,
    /// Target name at --reel-addr (default: the first SendTargets lists).
    #[arg(long, value_name = "IQN", requires = "reel_addr")]
    pub reel_iqn: Option<String>,
    /// PID of that reel process (its CPU is reported only when given).
    #[arg(long, value_name = "PID", requires = "reel_addr")]
    pub reel_pid: Option<u32>,
    /// Use a tgt target that is already running at ADDR.
    #[arg(long, value_name = "ADDR")]
    pub tgt_addr: Option<String>,
    #[arg(long, value_name = "IQN", requires = "tgt_addr")]
    pub tgt_iqn: Option<String>,
    #[arg(long, value_name = "PID", requires = "tgt_addr")]
    pub tgt_pid: Option<u32>,
    /// Write the whole report (every phase, every per-second sample) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as Markdown.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the charts (SVG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Measure nothing: print the report a previous run wrote with --json, and write its
    /// --markdown and --charts again (after a change to the report's layout).
    #[arg(long, value_name = "FILE")]
    pub from_json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Reel,
    Tgt,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Reel => "reel",
            TargetKind::Tgt => "tgt",
        }
    }
}

/// How to reach one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Start it (fresh for every cell) and stop it afterwards.
    Launch,
    /// Already running.
    External {
        addr: SocketAddr,
        iqn: Option<String>,
        pid: Option<u32>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPlan {
    pub kind: TargetKind,
    pub source: Source,
}

/// What is written on each drive of a run: generator settings and the record layout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Bytes per drive.
    pub size: u64,
    pub record_size: u32,
    pub queue_depth: u32,
    pub filemark_every: Option<u64>,
    pub filemark_immed: bool,
    pub same_data: bool,
    pub randomness: f64,
    pub redundancy: u32,
    pub block_size: usize,
    pub window_blocks: usize,
    pub seed: u64,
}

impl Workload {
    /// The generator configuration of drive `drive`'s stream.
    pub fn generator(&self, drive: usize) -> reel_datagen::GenConfig {
        reel_datagen::GenConfig {
            seed: if self.same_data {
                self.seed
            } else {
                self.seed + drive as u64
            },
            block_size: self.block_size,
            randomness: self.randomness,
            redundancy: self.redundancy,
            order: reel_datagen::Order::Scattered {
                window_blocks: self.window_blocks,
            },
            incompressible_share: 0.0,
            total_bytes: self.size,
        }
    }

    /// Records per drive (the last one may be short).
    pub fn records(&self) -> u64 {
        self.size.div_ceil(u64::from(self.record_size))
    }
}

/// One run: `drives` drives at once with `workload` each.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub drives: u32,
    pub workload: Workload,
    /// The flat-throughput run (one drive, large size) rather than a matrix cell.
    pub flat: bool,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub targets: Vec<TargetPlan>,
    pub cells: Vec<Cell>,
    pub work_dir: PathBuf,
    pub keep: bool,
    pub command_timeout: Duration,
    pub reel_bin: Option<PathBuf>,
    pub tgtd: String,
    pub tgtadm: String,
    pub tgtimg: String,
    pub tgt_changer: bool,
    pub json: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub charts: Option<PathBuf>,
}

impl Plan {
    /// The most bytes one cell writes over all its drives (tgt stores them all).
    pub fn max_cell_bytes(&self) -> u64 {
        self.cells
            .iter()
            .map(|c| c.workload.size * u64::from(c.drives))
            .max()
            .unwrap_or(0)
    }
}

/// A byte count such as `65536`, `64K`, `2G`, `1MiB` (binary units); zero is refused.
pub fn parse_size(what: &str, text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let t = t.strip_suffix("iB").unwrap_or(t);
    reel_datagen::parse_size(t).map_err(|e| anyhow!("{what} {text:?}: {e}"))
}

/// A record size: 1 byte to 16 MiB - 1 (WRITE(6)'s 24-bit transfer length).
pub fn parse_record_size(what: &str, text: &str) -> anyhow::Result<u32> {
    let t = text.trim();
    if t.bytes().all(|b| b.is_ascii_digit()) && t.bytes().all(|b| b == b'0') && !t.is_empty() {
        bail!(
            "{what} {text:?}: records must be at least 1 byte (variable-length records of size 0 do not exist)"
        );
    }
    let value = parse_size(what, text)?;
    if value > u64::from(MAX_RECORD) {
        bail!("{what} {text:?} is larger than {MAX_RECORD} bytes, the most a WRITE(6) can carry");
    }
    Ok(value as u32)
}

fn parse_target(text: &str) -> anyhow::Result<TargetKind> {
    match text.trim().to_ascii_lowercase().as_str() {
        "reel" => Ok(TargetKind::Reel),
        "tgt" | "tgtd" => Ok(TargetKind::Tgt),
        _ => bail!("unknown target {text:?} (known: reel, tgt)"),
    }
}

fn parse_addr(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    let addr: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| anyhow!("--{flag} {text:?} is not an address:port (e.g. 127.0.0.1:3260)"))?;
    if addr.port() == 0 {
        bail!("--{flag} {text:?}: port 0");
    }
    Ok(addr)
}

/// Turns the command line into a plan, or says which argument is wrong.
pub fn validate(args: &BenchArgs) -> anyhow::Result<Plan> {
    let mut targets: Vec<TargetPlan> = Vec::new();
    for t in &args.targets {
        let kind = parse_target(t)?;
        if targets.iter().any(|p| p.kind == kind) {
            continue;
        }
        let source = match kind {
            TargetKind::Reel => match &args.reel_addr {
                Some(a) => Source::External {
                    addr: parse_addr("reel-addr", a)?,
                    iqn: args.reel_iqn.clone(),
                    pid: args.reel_pid,
                },
                None => Source::Launch,
            },
            TargetKind::Tgt => match &args.tgt_addr {
                Some(a) => Source::External {
                    addr: parse_addr("tgt-addr", a)?,
                    iqn: args.tgt_iqn.clone(),
                    pid: args.tgt_pid,
                },
                None => Source::Launch,
            },
        };
        targets.push(TargetPlan { kind, source });
    }
    if targets.is_empty() {
        bail!("--targets: no targets");
    }
    for (flag, given, kind) in [
        ("reel-addr", args.reel_addr.is_some(), TargetKind::Reel),
        ("tgt-addr", args.tgt_addr.is_some(), TargetKind::Tgt),
    ] {
        if given && !targets.iter().any(|t| t.kind == kind) {
            bail!("--{flag} given but {} is not in --targets", kind.name());
        }
    }

    let mut drives = Vec::new();
    for &d in &args.drives {
        if !(1..=MAX_DRIVES).contains(&d) {
            bail!("--drives {d}: must be 1 to {MAX_DRIVES}");
        }
        if !drives.contains(&d) {
            drives.push(d);
        }
    }
    let mut record_sizes = Vec::new();
    for s in &args.record_sizes {
        let size = parse_record_size("--record-size", s)?;
        if !record_sizes.contains(&size) {
            record_sizes.push(size);
        }
    }
    if drives.is_empty() || record_sizes.is_empty() {
        bail!("--drives and --record-size need at least one value each");
    }
    if !(1..=MAX_QUEUE_DEPTH).contains(&args.queue_depth) {
        bail!(
            "--queue-depth {}: must be 1 to {MAX_QUEUE_DEPTH}",
            args.queue_depth
        );
    }
    let size = parse_size("--size", &args.size)?;
    let filemark_every = args
        .filemark_every
        .as_deref()
        .map(|s| parse_size("--filemark-every", s))
        .transpose()?;
    if !(0.0..=1.0).contains(&args.randomness) {
        bail!("--randomness {}: must be 0 to 1", args.randomness);
    }
    let block_size = parse_size("--block-size", &args.block_size)?;
    let base = Workload {
        size,
        record_size: record_sizes[0],
        queue_depth: args.queue_depth,
        filemark_every,
        filemark_immed: args.filemark_immed,
        same_data: args.same_data,
        randomness: args.randomness,
        redundancy: args.redundancy,
        block_size: usize::try_from(block_size).unwrap_or(usize::MAX),
        window_blocks: args.window_blocks,
        seed: args.seed,
    };
    base.generator(0)
        .validate()
        .map_err(|e| anyhow!("generator settings: {e}"))?;
    if args.seed.checked_add(u64::from(MAX_DRIVES)).is_none() {
        bail!("--seed {} is too large", args.seed);
    }

    let mut cells = Vec::new();
    for &record_size in &record_sizes {
        for &d in &drives {
            cells.push(Cell {
                drives: d,
                workload: Workload {
                    record_size,
                    ..base.clone()
                },
                flat: false,
            });
        }
    }
    if let Some(flat) = &args.flat {
        let flat_size = parse_size("--flat", flat)?;
        let record_size = parse_record_size("--flat-record-size", &args.flat_record_size)?;
        cells.push(Cell {
            drives: 1,
            workload: Workload {
                size: flat_size,
                record_size,
                ..base.clone()
            },
            flat: true,
        });
    }

    if args.command_timeout == 0 {
        bail!("--command-timeout must be at least 1 second");
    }
    if args.work_dir.as_os_str().is_empty() {
        bail!("--work-dir: empty path");
    }
    for (flag, path) in [("json", &args.json), ("markdown", &args.markdown)] {
        if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            bail!("--{flag}: empty file name");
        }
    }
    Ok(Plan {
        targets,
        cells,
        work_dir: args.work_dir.clone(),
        keep: args.keep,
        command_timeout: Duration::from_secs(args.command_timeout),
        reel_bin: args.reel_bin.clone(),
        tgtd: args.tgtd.clone(),
        tgtadm: args.tgtadm.clone(),
        tgtimg: args.tgtimg.clone(),
        tgt_changer: !args.tgt_no_changer,
        json: args.json.clone(),
        markdown: args.markdown.clone(),
        charts: args.charts.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        let mut argv = vec!["reel-bench"];
        argv.extend_from_slice(args);
        validate(&Cli::try_parse_from(argv).map_err(|e| anyhow!("{e}"))?.args)
    }

    fn err(args: &[&str]) -> String {
        format!("{:#}", plan(args).unwrap_err())
    }

    #[test]
    fn defaults_are_the_issue_matrix() {
        let p = plan(&[]).unwrap();
        let cells: Vec<(u32, u32)> = p
            .cells
            .iter()
            .map(|c| (c.drives, c.workload.record_size))
            .collect();
        assert_eq!(
            cells,
            [
                (1, 64 << 10),
                (4, 64 << 10),
                (1, 256 << 10),
                (4, 256 << 10),
                (1, 1 << 20),
                (4, 1 << 20)
            ]
        );
        let w = &p.cells[0].workload;
        assert_eq!(w.size, 2 << 30);
        assert_eq!(
            (w.randomness, w.redundancy, w.block_size),
            (0.25, 8, 256 << 10)
        );
        assert_eq!(w.queue_depth, 8);
        assert_eq!(
            p.targets.iter().map(|t| t.kind).collect::<Vec<_>>(),
            [TargetKind::Reel, TargetKind::Tgt]
        );
        assert!(p.targets.iter().all(|t| t.source == Source::Launch));
        assert!(p.tgt_changer);
        assert_eq!(p.max_cell_bytes(), 8 << 30);
    }

    #[test]
    fn flat_run_is_one_drive() {
        let p = plan(&["--flat", "20G", "--drives", "2", "--record-size", "1M"]).unwrap();
        let flat = p.cells.last().unwrap();
        assert!(flat.flat);
        assert_eq!((flat.drives, flat.workload.size), (1, 20 << 30));
        assert_eq!(flat.workload.record_size, 256 << 10);
        assert_eq!(p.max_cell_bytes(), 20 << 30);
    }

    #[test]
    fn record_sizes() {
        assert_eq!(parse_record_size("r", "64K").unwrap(), 65536);
        assert_eq!(parse_record_size("r", "1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_record_size("r", "1000").unwrap(), 1000);
        assert_eq!(parse_record_size("r", "16777215").unwrap(), MAX_RECORD);
        assert!(
            parse_record_size("r", "16M")
                .unwrap_err()
                .to_string()
                .contains("WRITE(6)")
        );
        assert!(
            parse_record_size("r", "0")
                .unwrap_err()
                .to_string()
                .contains("at least 1 byte")
        );
        assert!(parse_record_size("r", "0K").is_err());
        assert!(parse_record_size("r", "lots").is_err());
    }

    #[test]
    fn bad_arguments_are_named() {
        assert!(err(&["--record-size", "64K,0"]).contains("at least 1 byte"));
        assert!(err(&["--targets", "reel,lio"]).contains("unknown target \"lio\""));
        assert!(err(&["--drives", "0"]).contains("--drives 0"));
        assert!(err(&["--drives", "65"]).contains("1 to 64"));
        assert!(err(&["--queue-depth", "0"]).contains("--queue-depth 0"));
        assert!(err(&["--size", "0"]).contains("--size"));
        assert!(err(&["--randomness", "1.5"]).contains("--randomness"));
        assert!(err(&["--redundancy", "0"]).contains("generator"));
        assert!(err(&["--block-size", "100"]).contains("generator"));
        assert!(err(&["--reel-addr", "localhost"]).contains("not an address:port"));
        assert!(err(&["--tgt-addr", "127.0.0.1:0"]).contains("port 0"));
        assert!(
            err(&["--targets", "reel", "--tgt-addr", "127.0.0.1:1"]).contains("not in --targets")
        );
        assert!(err(&["--command-timeout", "0"]).contains("--command-timeout"));
        // clap: IMMED filemarks without filemarks, an IQN without the address.
        assert!(plan(&["--filemark-immed"]).is_err());
        assert!(plan(&["--reel-iqn", "iqn.x"]).is_err());
    }

    #[test]
    fn seeds_differ_per_drive_unless_same_data() {
        let p = plan(&["--seed", "7"]).unwrap();
        let w = &p.cells[0].workload;
        assert_eq!(w.generator(0).seed, 7);
        assert_eq!(w.generator(3).seed, 10);
        let p = plan(&["--seed", "7", "--same-data"]).unwrap();
        assert_eq!(p.cells[0].workload.generator(3).seed, 7);
    }

    #[test]
    fn record_counts() {
        let p = plan(&["--size", "1000", "--record-size", "300"]).unwrap();
        assert_eq!(p.cells[0].workload.records(), 4);
        let p = plan(&["--size", "1M", "--record-size", "256K"]).unwrap();
        assert_eq!(p.cells[0].workload.records(), 4);
    }
}
