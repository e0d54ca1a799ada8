//! The command line ([`TapeArgs`]) and its validation into a [`Plan`]. Everything here is
//! checked without touching the system, so a bad argument stops the run before any target
//! starts; what needs the targets (how many drives they have, their block limits, whether the
//! IQN exists) is checked after they start and before anything is written.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::harness::targets::External;
use crate::harness::{ReportFlags, TargetFlags, TargetKind, parse_size};

/// Largest record: READ(6)/WRITE(6) carry a 24-bit transfer length.
pub const MAX_RECORD: u32 = (1 << 24) - 1;
/// A big VTL node has 256 drives (the vtl-node preset).
pub const MAX_DRIVES: u32 = 256;
pub const MAX_QUEUE_DEPTH: u32 = 64;
/// More cells than this is a typo, not a plan (each cell starts every target afresh).
pub const MAX_CELLS: usize = 200;

/// Tape throughput: reel's library next to tgt's SSC emulation, side by side in one run.
#[derive(clap::Args, Debug, Clone)]
pub struct TapeArgs {
    /// Targets to measure, comma separated: reel, tgt, file. Each cell runs on each in turn.
    /// `file` writes the same records with plain write(2) calls to the paths of `--device`
    /// (a file, or a tape device such as /dev/nst0 behind the kernel's own initiator). A reel
    /// at --reel-addr must have at least as many cartridges in its storage slots as drives
    /// are used; the cells then share its store, so later cells dedup against earlier ones.
    #[arg(long, value_delimiter = ',', default_value = "reel,tgt")]
    pub targets: Vec<String>,
    /// A sweep preset: `obltape` (record size x compressible share, one drive), `tapewrite`
    /// (drive count x randomness x redundancy), `filemark` (filemark interval x IMMED) or
    /// `queue-depth`. It fills in the dimensions it sweeps that are not given explicitly.
    #[arg(long, value_enum)]
    pub sweep: Option<Sweep>,
    /// Drives writing at once (one session each), comma separated: one cell per count
    /// [default: 1,4].
    #[arg(long, value_delimiter = ',')]
    pub drives: Vec<u32>,
    /// Tape record sizes (K/M suffixes are binary), comma separated: one cell per size
    /// [default: 64K,256K,1M].
    #[arg(long = "record-size", value_delimiter = ',')]
    pub record_sizes: Vec<String>,
    /// Bytes written (and read back) per drive in each cell.
    #[arg(long, default_value = "2G", value_name = "SIZE")]
    pub size: String,
    /// WRITE(6)/READ(6) commands in flight per drive (tape commands run in CmdSN order),
    /// comma separated: one cell per depth [default: 8].
    #[arg(long = "queue-depth", value_delimiter = ',')]
    pub queue_depths: Vec<u32>,
    /// Also write a filemark after every SIZE bytes of records (the last one is always
    /// there); comma separated, `none` for only the last one: one cell per interval.
    #[arg(long, value_delimiter = ',', value_name = "SIZE")]
    pub filemark_every: Vec<String>,
    /// Write those intermediate filemarks with IMMED=1 (no synchronisation); `--filemark-immed
    /// no,yes` runs both.
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..=1,
        default_missing_value = "yes",
        value_name = "yes|no"
    )]
    pub filemark_immed: Vec<String>,
    /// Every drive writes the same stream (otherwise drive i uses seed + i, so drives do not
    /// dedup against each other).
    #[arg(long)]
    pub same_data: bool,
    /// Generator: fraction of each compressible block's bytes that are random (0.25 ≈ 4:1
    /// compressible); comma separated: one cell per value [default: 0.25].
    #[arg(long, value_delimiter = ',')]
    pub randomness: Vec<f64>,
    /// Generator: average appearances of each unique block (R; 1 = nothing to dedup); comma
    /// separated: one cell per value [default: 8].
    #[arg(long, value_delimiter = ',')]
    pub redundancy: Vec<u32>,
    /// Generator: fraction of the unique blocks that are compressible (the rest are entirely
    /// random), oblTape's "compressible share"; comma separated [default: 1].
    #[arg(long = "compressible-share", value_delimiter = ',')]
    pub compressible_shares: Vec<f64>,
    /// Generator: unique block size.
    #[arg(long, default_value = "256K", value_name = "SIZE")]
    pub block_size: String,
    /// Generator: slots per shuffle window (repeats of a block stay within one window).
    #[arg(long, default_value_t = 1024)]
    pub window_blocks: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Each drive's writer produces its records at most this fast (e.g. `30M/s`: binary
    /// suffixes, per second): a host, disk or network link slower than the drive. Against an
    /// emulated library (`[iscsi.target.emulation]`) a rate below the drive's lowest speed
    /// step makes it back-hitch.
    #[arg(long, value_name = "RATE")]
    pub source_rate: Option<String>,
    /// The reel this benchmark launches emulates this physical drive's timing
    /// (`[iscsi.target.emulation]`; `reel model drives` lists them, e.g. lto5-fh): rehearse
    /// a workload at real hardware speed. For a reel at --reel-addr, configure it there.
    #[arg(long, value_name = "DRIVE")]
    pub emulate: Option<String>,
    /// Also run the flat-throughput check: one drive per target writing (and reading back)
    /// SIZE at --flat-record-size, sampled every second.
    #[arg(long, value_name = "SIZE")]
    pub flat: Option<String>,
    #[arg(long, default_value = "256K", value_name = "SIZE")]
    pub flat_record_size: String,
    /// `file` target: the paths written, one per drive (files are created; a tape device must
    /// exist). Default: a file per drive in the work directory.
    #[arg(long, value_delimiter = ',', value_name = "PATH")]
    pub device: Vec<PathBuf>,
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
    #[command(flatten)]
    pub target: TargetFlags,
    /// tgt's tape image tool.
    #[arg(long, default_value = "tgtimg", value_name = "PATH")]
    pub tgtimg: String,
    /// Run tgt with cartridges preloaded in its drives instead of loading them through its
    /// changer (MOVE MEDIUM).
    #[arg(long)]
    pub tgt_no_changer: bool,
    /// reel's REST API for the reel at --reel-addr (e.g. http://127.0.0.1:8080): the report
    /// then shows its own compression and dedup ratios and CPU. The token comes from
    /// --reel-token or REEL_TOKEN (a launched reel is asked with its admin login).
    #[arg(long, value_name = "URL", requires = "reel_addr")]
    pub reel_url: Option<String>,
    #[arg(long, value_name = "TOKEN", requires = "reel_url")]
    pub reel_token: Option<String>,
    #[command(flatten)]
    pub report: ReportFlags,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sweep {
    /// Record size x compressible share on one drive, no redundancy (the loader review's
    /// oblTape plot).
    #[value(name = "obltape")]
    OblTape,
    /// Drive count x randomness x redundancy at 256 KiB records (the VTL report's tapewrite).
    Tapewrite,
    /// Filemark interval x IMMED on one drive (the segment-size effect).
    Filemark,
    /// Commands in flight per drive.
    QueueDepth,
}

/// How to reach one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Start it (fresh for every cell) and stop it afterwards.
    Launch,
    /// Already running.
    External(External),
    /// `file`: these paths, one per drive (empty: a fresh file per drive in the cell's work
    /// directory).
    Paths(Vec<PathBuf>),
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
    /// Fraction of unique blocks that are entirely random (1 - compressible share).
    #[serde(default)]
    pub incompressible_share: f64,
    pub block_size: usize,
    pub window_blocks: usize,
    pub seed: u64,
    /// The writer produces records at most this fast (bytes/s): a host, disk or network
    /// slower than the drive (`--source-rate`); unlimited when `None`.
    #[serde(default)]
    pub source_rate: Option<f64>,
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
            incompressible_share: self.incompressible_share,
            total_bytes: self.size,
        }
    }

    /// The best dedup ratio `drives` drives' streams allow together: bytes written over the
    /// distinct blocks' bytes. R when every stream spans whole shuffle windows; less for a
    /// stream shorter than a window, whose blocks have not all come round R times.
    pub fn ideal_dedup(&self, drives: u32) -> f64 {
        let streams = if self.same_data { 1 } else { drives.max(1) };
        let unique: u64 = (0..streams as usize)
            .filter_map(|d| reel_datagen::Generator::new(self.generator(d)).ok())
            .map(|g| g.expected().unique_bytes)
            .sum();
        let logical = self.size * u64::from(drives.max(1));
        if unique == 0 {
            1.0
        } else {
            logical as f64 / unique as f64
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
    pub target: TargetFlags,
    pub tgtimg: String,
    pub tgt_changer: bool,
    pub reel_url: Option<String>,
    pub reel_token: Option<String>,
    pub report: ReportFlags,
    /// A launched reel's library emulates this physical drive's timing (`--emulate`).
    pub emulate: Option<&'static reel_drivemodel::DriveSpec>,
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

fn parse_yes_no(flag: &str, text: &str) -> anyhow::Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" | "1" | "on" => Ok(true),
        "no" | "n" | "false" | "0" | "off" => Ok(false),
        _ => bail!("--{flag} {text:?}: expected yes or no"),
    }
}

fn parse_fraction(flag: &str, value: f64) -> anyhow::Result<f64> {
    if !(0.0..=1.0).contains(&value) {
        bail!("--{flag} {value}: must be 0 to 1");
    }
    Ok(value)
}

/// `values` without repeats, in the order given; `default` when none were given.
fn distinct<T: PartialEq + Clone>(values: &[T], default: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for v in if values.is_empty() { default } else { values } {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

/// The dimensions a sweep preset fills in when they are not given.
#[derive(Default)]
struct SweepDefaults {
    drives: Option<&'static [u32]>,
    record_sizes: Option<&'static [&'static str]>,
    randomness: Option<&'static [f64]>,
    redundancy: Option<&'static [u32]>,
    compressible_shares: Option<&'static [f64]>,
    queue_depths: Option<&'static [u32]>,
    filemark_every: Option<&'static [&'static str]>,
    filemark_immed: Option<&'static [&'static str]>,
}

fn sweep_defaults(sweep: Option<Sweep>) -> SweepDefaults {
    match sweep {
        None => SweepDefaults::default(),
        Some(Sweep::OblTape) => SweepDefaults {
            drives: Some(&[1]),
            record_sizes: Some(&["16K", "64K", "256K", "1M"]),
            redundancy: Some(&[1]),
            compressible_shares: Some(&[0.0, 0.25, 0.5, 0.75, 1.0]),
            ..SweepDefaults::default()
        },
        Some(Sweep::Tapewrite) => SweepDefaults {
            drives: Some(&[1, 2, 4]),
            record_sizes: Some(&["256K"]),
            randomness: Some(&[0.1, 0.25, 0.5]),
            redundancy: Some(&[1, 4, 8]),
            ..SweepDefaults::default()
        },
        Some(Sweep::Filemark) => SweepDefaults {
            drives: Some(&[1]),
            record_sizes: Some(&["256K"]),
            filemark_every: Some(&["none", "4M", "16M", "64M", "256M"]),
            filemark_immed: Some(&["no", "yes"]),
            ..SweepDefaults::default()
        },
        Some(Sweep::QueueDepth) => SweepDefaults {
            drives: Some(&[1]),
            record_sizes: Some(&["256K"]),
            queue_depths: Some(&[1, 2, 4, 8, 16, 32]),
            ..SweepDefaults::default()
        },
    }
}

fn owned(values: Option<&'static [&'static str]>, default: &[&str]) -> Vec<String> {
    values
        .unwrap_or(default)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Turns the command line into a plan, or says which argument is wrong.
pub fn validate(args: &TapeArgs) -> anyhow::Result<Plan> {
    let mut targets: Vec<TargetPlan> = Vec::new();
    for t in &args.targets {
        let kind = TargetKind::parse(t, &TargetKind::ALL)?;
        if targets.iter().any(|p| p.kind == kind) {
            continue;
        }
        let source = match kind {
            TargetKind::Reel | TargetKind::Tgt => match args.target.external(kind)? {
                Some(external) => Source::External(external),
                None => Source::Launch,
            },
            TargetKind::File => {
                if args.device.iter().any(|p| p.as_os_str().is_empty()) {
                    bail!("--device: empty path");
                }
                Source::Paths(args.device.clone())
            }
        };
        targets.push(TargetPlan { kind, source });
    }
    if targets.is_empty() {
        bail!("--targets: no targets");
    }
    let kinds: Vec<TargetKind> = targets.iter().map(|t| t.kind).collect();
    args.target.check_used(&kinds)?;
    if !args.device.is_empty() && !kinds.contains(&TargetKind::File) {
        bail!("--device given but file is not in --targets");
    }

    let preset = sweep_defaults(args.sweep);
    let drives = distinct(&args.drives, preset.drives.unwrap_or(&[1, 4]));
    for &d in &drives {
        if !(1..=MAX_DRIVES).contains(&d) {
            bail!("--drives {d}: must be 1 to {MAX_DRIVES}");
        }
    }
    let mut record_sizes = Vec::new();
    for s in &distinct(
        &args.record_sizes,
        &owned(preset.record_sizes, &["64K", "256K", "1M"]),
    ) {
        let size = parse_record_size("--record-size", s)?;
        if !record_sizes.contains(&size) {
            record_sizes.push(size);
        }
    }
    let queue_depths = distinct(&args.queue_depths, preset.queue_depths.unwrap_or(&[8]));
    for &q in &queue_depths {
        if !(1..=MAX_QUEUE_DEPTH).contains(&q) {
            bail!("--queue-depth {q}: must be 1 to {MAX_QUEUE_DEPTH}");
        }
    }
    let size = parse_size("--size", &args.size)?;
    let mut filemark_every: Vec<Option<u64>> = Vec::new();
    for s in &distinct(
        &args.filemark_every,
        &owned(preset.filemark_every, &["none"]),
    ) {
        let every = match s.trim() {
            "none" | "end" => None,
            s => Some(parse_size("--filemark-every", s)?),
        };
        if !filemark_every.contains(&every) {
            filemark_every.push(every);
        }
    }
    let mut filemark_immed: Vec<bool> = Vec::new();
    for s in &distinct(&args.filemark_immed, &owned(preset.filemark_immed, &["no"])) {
        let immed = parse_yes_no("filemark-immed", s)?;
        if !filemark_immed.contains(&immed) {
            filemark_immed.push(immed);
        }
    }
    if filemark_immed.contains(&true) && filemark_every.iter().all(Option::is_none) {
        bail!("--filemark-immed needs --filemark-every (the last filemark is always IMMED=0)");
    }
    let randomness = distinct(&args.randomness, preset.randomness.unwrap_or(&[0.25]));
    for &r in &randomness {
        parse_fraction("randomness", r)?;
    }
    let redundancy = distinct(&args.redundancy, preset.redundancy.unwrap_or(&[8]));
    let shares = distinct(
        &args.compressible_shares,
        preset.compressible_shares.unwrap_or(&[1.0]),
    );
    for &c in &shares {
        parse_fraction("compressible-share", c)?;
    }
    let block_size = parse_size("--block-size", &args.block_size)?;
    let source_rate = match &args.source_rate {
        None => None,
        Some(text) => {
            let per_second = text.strip_suffix("/s").unwrap_or(text);
            let rate = parse_size("--source-rate", per_second)?;
            if rate == 0 {
                bail!("--source-rate must be above 0");
            }
            Some(rate as f64)
        }
    };
    let base = Workload {
        size,
        record_size: record_sizes[0],
        queue_depth: queue_depths[0],
        filemark_every: filemark_every[0],
        filemark_immed: filemark_immed[0] && filemark_every[0].is_some(),
        same_data: args.same_data,
        randomness: randomness[0],
        redundancy: redundancy[0],
        incompressible_share: 1.0 - shares[0],
        block_size: usize::try_from(block_size).unwrap_or(usize::MAX),
        window_blocks: args.window_blocks,
        seed: args.seed,
        source_rate,
    };
    if args.seed.checked_add(u64::from(MAX_DRIVES)).is_none() {
        bail!("--seed {} is too large", args.seed);
    }

    // Every combination, record size outermost (the order the tables list them in).
    let mut cells = Vec::new();
    for &record_size in &record_sizes {
        for &d in &drives {
            for &randomness in &randomness {
                for &redundancy in &redundancy {
                    for &share in &shares {
                        for &queue_depth in &queue_depths {
                            for &every in &filemark_every {
                                for &immed in &filemark_immed {
                                    // Without intermediate filemarks IMMED changes nothing.
                                    if every.is_none() && immed && filemark_immed.contains(&false) {
                                        continue;
                                    }
                                    let workload = Workload {
                                        record_size,
                                        queue_depth,
                                        filemark_every: every,
                                        filemark_immed: immed && every.is_some(),
                                        randomness,
                                        redundancy,
                                        incompressible_share: 1.0 - share,
                                        ..base.clone()
                                    };
                                    workload
                                        .generator(0)
                                        .validate()
                                        .map_err(|e| anyhow!("generator settings: {e}"))?;
                                    cells.push(Cell {
                                        drives: d,
                                        workload,
                                        flat: false,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if targets.iter().any(|t| t.kind == TargetKind::File)
        && filemark_every.iter().any(Option::is_some)
    {
        bail!(
            "--filemark-every: the file target writes no intermediate filemarks (write(2) has no way to; st writes one when the device is closed)"
        );
    }
    if let Some(most) = drives.iter().max()
        && !args.device.is_empty()
        && args.device.len() < *most as usize
    {
        bail!(
            "--drives {most}: only {} path(s) in --device (one per drive)",
            args.device.len()
        );
    }
    if cells.len() > MAX_CELLS {
        bail!(
            "{} cells (the product of every list given): more than {MAX_CELLS}; sweep fewer values at once",
            cells.len()
        );
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
    args.report.check_names()?;
    Ok(Plan {
        targets,
        cells,
        work_dir: args.work_dir.clone(),
        keep: args.keep,
        command_timeout: Duration::from_secs(args.command_timeout),
        target: args.target.clone(),
        tgtimg: args.tgtimg.clone(),
        tgt_changer: !args.tgt_no_changer,
        reel_url: args.reel_url.clone(),
        reel_token: args
            .reel_token
            .clone()
            .or_else(|| std::env::var("REEL_TOKEN").ok()),
        report: args.report.clone(),
        emulate: match &args.emulate {
            None => None,
            Some(id) => Some(reel_drivemodel::drive(id).ok_or_else(|| {
                anyhow!("--emulate {id:?}: not a modelled drive (`reel model drives` lists them)")
            })?),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: TapeArgs,
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
        assert!(err(&["--drives", "257"]).contains("1 to 256"));
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
        assert!(plan(&["--reel-url", "http://x"]).is_err());
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
    fn sweeps_fill_in_what_is_not_given() {
        let p = plan(&["--sweep", "obltape"]).unwrap();
        assert_eq!(p.cells.len(), 20);
        let c = &p.cells[1].workload;
        assert_eq!((c.record_size, c.redundancy), (16 << 10, 1));
        assert_eq!(c.incompressible_share, 0.75);
        assert!(p.cells.iter().all(|c| c.drives == 1));
        // An explicit list wins over the preset's.
        let p = plan(&["--sweep", "obltape", "--record-size", "256K"]).unwrap();
        assert_eq!(p.cells.len(), 5);
        let p = plan(&["--sweep", "tapewrite"]).unwrap();
        assert_eq!(p.cells.len(), 27);
        let p = plan(&["--sweep", "filemark"]).unwrap();
        let marks: Vec<(Option<u64>, bool)> = p
            .cells
            .iter()
            .map(|c| (c.workload.filemark_every, c.workload.filemark_immed))
            .collect();
        // "end only" once, every interval with and without IMMED.
        assert_eq!(marks.len(), 9);
        assert_eq!(marks[0], (None, false));
        assert_eq!(marks[1..3], [(Some(4 << 20), false), (Some(4 << 20), true)]);
        let p = plan(&["--sweep", "queue-depth"]).unwrap();
        let depths: Vec<u32> = p.cells.iter().map(|c| c.workload.queue_depth).collect();
        assert_eq!(depths, [1, 2, 4, 8, 16, 32]);
    }

    #[test]
    fn lists_multiply_and_are_checked() {
        let p = plan(&[
            "--drives",
            "1,2",
            "--record-size",
            "256K",
            "--randomness",
            "0.1,0.5",
            "--redundancy",
            "1,8,8",
        ])
        .unwrap();
        assert_eq!(p.cells.len(), 2 * 2 * 2);
        assert!(err(&["--compressible-share", "1.5"]).contains("--compressible-share 1.5"));
        assert!(err(&["--queue-depth", "8,0"]).contains("--queue-depth 0"));
        assert!(
            err(&["--filemark-immed", "maybe", "--filemark-every", "1M"]).contains("yes or no")
        );
        assert!(err(&["--filemark-immed"]).contains("needs --filemark-every"));
        assert!(
            err(&[
                "--drives",
                "1,2,3,4,5,6,7,8",
                "--record-size",
                "1K,2K,4K,8K,16K,32K",
                "--randomness",
                "0.1,0.2,0.3,0.4,0.5"
            ])
            .contains("more than 200")
        );
        let p = plan(&[
            "--filemark-every",
            "none,1M",
            "--filemark-immed",
            "--size",
            "4M",
        ])
        .unwrap();
        let marks: Vec<(Option<u64>, bool)> = p
            .cells
            .iter()
            .map(|c| (c.workload.filemark_every, c.workload.filemark_immed))
            .collect();
        assert!(marks.contains(&(Some(1 << 20), true)));
    }

    /// Two runs in one work directory would clear each other's cells under running targets:
    /// the second is refused while the first holds the directory's lock.
    #[test]
    fn a_second_run_in_the_same_work_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("tape0");
        let work = dir.path().join("work");
        let p = plan(&[
            "--targets",
            "file",
            "--device",
            device.to_str().unwrap(),
            "--drives",
            "1",
            "--work-dir",
            work.to_str().unwrap(),
        ])
        .unwrap();
        let first = crate::tape::targets::preflight(&p).unwrap();
        let refused = format!("{:#}", crate::tape::targets::preflight(&p).unwrap_err());
        assert!(
            refused.contains("another benchmark run is using the work directory"),
            "{refused}"
        );
        drop(first);
        crate::tape::targets::preflight(&p).unwrap();
    }

    #[test]
    fn the_file_target_takes_paths() {
        let p = plan(&[
            "--targets",
            "file",
            "--device",
            "/tmp/a,/tmp/b",
            "--drives",
            "2",
        ])
        .unwrap();
        assert_eq!(
            p.targets[0].source,
            Source::Paths(vec!["/tmp/a".into(), "/tmp/b".into()])
        );
        assert!(
            err(&["--targets", "file", "--device", "/tmp/a", "--drives", "2"])
                .contains("one per drive")
        );
        assert!(err(&["--device", "/tmp/a"]).contains("not in --targets"));
        assert!(
            err(&["--targets", "file", "--filemark-every", "1M"])
                .contains("no intermediate filemarks")
        );
        // Default: fresh files in the work directory.
        let p = plan(&["--targets", "file,reel"]).unwrap();
        assert_eq!(p.targets[0].source, Source::Paths(Vec::new()));
    }

    #[test]
    fn record_counts() {
        let p = plan(&["--size", "1000", "--record-size", "300"]).unwrap();
        assert_eq!(p.cells[0].workload.records(), 4);
        let p = plan(&["--size", "1M", "--record-size", "256K"]).unwrap();
        assert_eq!(p.cells[0].workload.records(), 4);
    }
}
