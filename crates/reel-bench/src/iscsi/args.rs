//! Command line and its validation. Everything here is checked without touching the
//! system; [`super::targets::preflight`] then checks what needs I/O (binaries, ports, PIDs),
//! so a bad argument stops the run before any target starts.

use std::time::Duration;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::harness::targets::External;
use crate::harness::{ReportFlags, TargetFlags, TargetKind};

/// Largest transfer: READ(10)/WRITE(10) carry at most 65535 blocks; 16 MiB keeps well inside.
pub const MAX_SIZE: u32 = 16 << 20;
/// Block size of both null disks (tgt's `--bstype null` and reel's `NullDisk`).
pub const BLOCK: u32 = 512;
pub const MAX_QUEUE_DEPTH: u32 = 64;

/// The TRANSFER LENGTH of READ(10)/WRITE(10) for `bytes` (whole blocks, validated to fit).
pub fn blocks(bytes: u32) -> u16 {
    u16::try_from(bytes / BLOCK).expect("sizes are validated to fit READ(10)")
}
pub const MAX_SESSIONS: u32 = 16;

/// iSCSI data-path throughput of reel's target next to tgt, driven by reel's initiator (null
/// devices; see BENCHMARKING.md).
#[derive(clap::Args, Debug, Clone)]
pub struct IscsiArgs {
    /// Targets to measure, comma separated: reel, tgt. Cells alternate between them.
    #[arg(long, value_delimiter = ',', default_value = "reel,tgt")]
    pub targets: Vec<String>,
    /// Transfer sizes (K/M suffixes are binary), comma separated; multiples of 512 bytes.
    #[arg(long, value_delimiter = ',', default_value = "64K,256K,1M")]
    pub sizes: Vec<String>,
    /// Commands in flight per session, comma separated.
    #[arg(long = "qd", value_delimiter = ',', default_value = "1,8")]
    pub queue_depths: Vec<u32>,
    /// Sessions (one TCP connection each), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub sessions: Vec<u32>,
    /// Directions, comma separated: write (WRITE(10)), read (READ(10)).
    #[arg(long = "dir", value_delimiter = ',', default_value = "write,read")]
    pub directions: Vec<String>,
    /// Seconds measured per cell, after the warm-up.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Seconds of load before measuring each cell.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Measure every cell this many times (targets alternating) and report the medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    #[command(flatten)]
    pub target: TargetFlags,
    /// LUN of reel's null disk.
    #[arg(long, default_value_t = 0)]
    pub reel_lun: u64,
    /// LUN of tgt's null disk (LUN 0 is tgt's controller).
    #[arg(long, default_value_t = 1)]
    pub tgt_lun: u64,
    #[command(flatten)]
    pub report: ReportFlags,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Write,
    Read,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Write => "write",
            Direction::Read => "read",
        }
    }
}

/// How to reach one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Start it ourselves (and stop it at the end).
    Launch,
    /// Already running.
    External(External),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPlan {
    pub kind: TargetKind,
    pub source: Source,
    pub lun: u64,
}

/// One point of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub size: u32,
    pub queue_depth: u32,
    pub sessions: u32,
    pub direction: Direction,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub targets: Vec<TargetPlan>,
    pub sizes: Vec<u32>,
    pub queue_depths: Vec<u32>,
    pub sessions: Vec<u32>,
    pub directions: Vec<Direction>,
    pub measure: Duration,
    pub warmup: Duration,
    pub repeat: u32,
    pub target: TargetFlags,
    pub report: ReportFlags,
}

impl Plan {
    /// Cells in report order: size, then queue depth, then sessions, then direction.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &size in &self.sizes {
            for &queue_depth in &self.queue_depths {
                for &sessions in &self.sessions {
                    for &direction in &self.directions {
                        cells.push(Cell {
                            size,
                            queue_depth,
                            sessions,
                            direction,
                        });
                    }
                }
            }
        }
        cells
    }
}

/// A transfer size such as `65536`, `64K`, `1M` (binary units): whole 512-byte blocks, at
/// most [`MAX_SIZE`].
pub fn parse_size(text: &str) -> anyhow::Result<u32> {
    let value = crate::harness::parse_size("size", text)?;
    if !value.is_multiple_of(u64::from(BLOCK)) {
        bail!("size {text:?} is not a multiple of the {BLOCK}-byte block size");
    }
    if value > u64::from(MAX_SIZE) {
        bail!(
            "size {text:?} is larger than the {} MiB maximum",
            MAX_SIZE >> 20
        );
    }
    Ok(value as u32)
}

fn parse_direction(text: &str) -> anyhow::Result<Direction> {
    match text.trim().to_ascii_lowercase().as_str() {
        "write" | "w" => Ok(Direction::Write),
        "read" | "r" => Ok(Direction::Read),
        _ => bail!("unknown direction {text:?} (known: write, read)"),
    }
}

fn counts(flag: &str, values: &[u32], max: u32) -> anyhow::Result<Vec<u32>> {
    let mut out = Vec::new();
    for &v in values {
        if !(1..=max).contains(&v) {
            bail!("--{flag} {v}: must be 1 to {max}");
        }
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        bail!("--{flag}: no values");
    }
    Ok(out)
}

fn seconds(flag: &str, value: f64, min: f64, max: f64) -> anyhow::Result<Duration> {
    if !value.is_finite() || value < min || value > max {
        bail!("--{flag} {value}: must be {min} to {max} seconds");
    }
    Ok(Duration::from_secs_f64(value))
}

/// Checks every argument and builds the plan (no I/O).
pub fn validate(cli: IscsiArgs) -> anyhow::Result<Plan> {
    let kinds = TargetKind::parse_list(&cli.targets, &[TargetKind::Reel, TargetKind::Tgt])?;
    let mut targets = Vec::new();
    for &kind in &kinds {
        let lun = if kind == TargetKind::Reel {
            cli.reel_lun
        } else {
            cli.tgt_lun
        };
        let source = match cli.target.external(kind)? {
            Some(external) => Source::External(external),
            None => Source::Launch,
        };
        if lun > 16383 {
            bail!("--{}-lun {lun}: LUNs go up to 16383", kind.name());
        }
        targets.push(TargetPlan { kind, source, lun });
    }
    cli.target.check_used(&kinds)?;
    let mut sizes = Vec::new();
    for s in &cli.sizes {
        let size = parse_size(s)?;
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }
    if sizes.is_empty() {
        bail!("--sizes: no sizes");
    }
    let mut directions = Vec::new();
    for d in &cli.directions {
        let d = parse_direction(d)?;
        if !directions.contains(&d) {
            directions.push(d);
        }
    }
    if directions.is_empty() {
        bail!("--dir: no directions");
    }
    if !(1..=99).contains(&cli.repeat) {
        bail!("--repeat {}: must be 1 to 99", cli.repeat);
    }
    cli.report.check_names()?;
    Ok(Plan {
        targets,
        sizes,
        queue_depths: counts("qd", &cli.queue_depths, MAX_QUEUE_DEPTH)?,
        sessions: counts("sessions", &cli.sessions, MAX_SESSIONS)?,
        directions,
        measure: seconds("seconds", cli.seconds, 0.1, 3600.0)?,
        warmup: seconds("warmup", cli.warmup, 0.0, 600.0)?,
        repeat: cli.repeat,
        target: cli.target,
        report: cli.report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: IscsiArgs,
    }

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        let mut argv = vec!["reel-bench-iscsi"];
        argv.extend_from_slice(args);
        validate(
            Cli::try_parse_from(argv)
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .args,
        )
    }

    fn err(args: &[&str]) -> String {
        plan(args).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_issue_matrix() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.sizes, vec![64 << 10, 256 << 10, 1 << 20]);
        assert_eq!(p.queue_depths, vec![1, 8]);
        assert_eq!(p.sessions, vec![1, 4]);
        assert_eq!(p.directions, vec![Direction::Write, Direction::Read]);
        assert_eq!(p.cells().len(), 24);
        assert_eq!(
            p.targets
                .iter()
                .map(|t| (t.kind, t.lun))
                .collect::<Vec<_>>(),
            vec![(TargetKind::Reel, 0), (TargetKind::Tgt, 1)]
        );
        assert!(p.targets.iter().all(|t| t.source == Source::Launch));
        assert_eq!(p.measure, Duration::from_secs(5));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("256k").unwrap(), 262144);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("0").unwrap_err().to_string().contains("zero"));
        assert!(parse_size("0K").is_err());
        assert!(
            parse_size("1000")
                .unwrap_err()
                .to_string()
                .contains("multiple")
        );
        assert!(
            parse_size("32M")
                .unwrap_err()
                .to_string()
                .contains("maximum")
        );
        assert!(parse_size("K").is_err());
        assert!(parse_size("-1K").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn bad_arguments_are_named() {
        assert!(err(&["--sizes", "64K,0"]).contains("\"0\""));
        assert!(err(&["--targets", "reel,lio"]).contains("unknown target \"lio\""));
        assert!(err(&["--dir", "sideways"]).contains("unknown direction"));
        assert!(err(&["--qd", "0"]).contains("--qd 0"));
        assert!(err(&["--sessions", "100"]).contains("1 to 16"));
        assert!(err(&["--seconds", "0"]).contains("--seconds"));
        assert!(err(&["--seconds", "NaN"]).contains("--seconds"));
        assert!(err(&["--repeat", "0"]).contains("--repeat"));
        assert!(err(&["--reel-addr", "localhost"]).contains("not an address:port"));
        assert!(err(&["--tgt-addr", "127.0.0.1:0"]).contains("port 0"));
        assert!(
            err(&["--targets", "reel", "--tgt-addr", "127.0.0.1:3260"])
                .contains("not in --targets")
        );
        // clap: a PID without the address it belongs to.
        assert!(plan(&["--reel-pid", "12"]).is_err());
    }

    #[test]
    fn external_targets_and_duplicates() {
        let p = plan(&[
            "--targets",
            "tgt,reel,tgt",
            "--tgt-addr",
            "127.0.0.1:3260",
            "--tgt-pid",
            "77",
            "--sizes",
            "1M,1M",
        ])
        .unwrap();
        assert_eq!(p.targets[0].kind, TargetKind::Tgt);
        assert_eq!(p.targets.len(), 2);
        assert_eq!(
            p.targets[0].source,
            Source::External(External {
                addr: "127.0.0.1:3260".parse().unwrap(),
                pid: Some(77),
                iqn: None
            })
        );
        assert_eq!(p.sizes, vec![1 << 20]);
    }
}
