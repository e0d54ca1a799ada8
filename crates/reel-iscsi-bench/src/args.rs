//! Command line and its validation. Everything here is checked without touching the
//! system; [`crate::targets::preflight`] then checks what needs I/O (binaries, ports, PIDs),
//! so a bad argument stops the run before any target starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde::Serialize;

/// Largest transfer: READ(10)/WRITE(10) carry at most 65535 blocks; 16 MiB keeps well inside.
pub const MAX_SIZE: u32 = 16 << 20;
/// Block size of both null disks (tgt's `--bstype null` and reel's `NullDisk`).
pub const BLOCK: u32 = 512;
pub const MAX_QUEUE_DEPTH: u32 = 64;
pub const MAX_SESSIONS: u32 = 16;

#[derive(clap::Parser, Debug)]
#[command(
    name = "reel-iscsi-bench",
    about = "iSCSI data-path throughput of reel's target next to tgt, driven by reel's initiator \
             (null devices; see BENCHMARKING.md)"
)]
pub struct Cli {
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
    /// The `reel` binary to start (default: `reel` next to this program).
    #[arg(long, value_name = "PATH")]
    pub reel_bin: Option<PathBuf>,
    /// tgt's daemon and admin tool.
    #[arg(long, default_value = "tgtd", value_name = "PATH")]
    pub tgtd: String,
    #[arg(long, default_value = "tgtadm", value_name = "PATH")]
    pub tgtadm: String,
    /// Use a reel target that is already running at ADDR instead of starting one.
    #[arg(long, value_name = "ADDR")]
    pub reel_addr: Option<String>,
    /// PID of that reel process (its CPU is reported only when given).
    #[arg(long, value_name = "PID", requires = "reel_addr")]
    pub reel_pid: Option<u32>,
    /// Target name at --reel-addr (default: the first one SendTargets lists).
    #[arg(long, value_name = "IQN", requires = "reel_addr")]
    pub reel_iqn: Option<String>,
    /// LUN of reel's null disk.
    #[arg(long, default_value_t = 0)]
    pub reel_lun: u64,
    /// Use a tgt target that is already running at ADDR instead of starting tgtd.
    #[arg(long, value_name = "ADDR")]
    pub tgt_addr: Option<String>,
    #[arg(long, value_name = "PID", requires = "tgt_addr")]
    pub tgt_pid: Option<u32>,
    #[arg(long, value_name = "IQN", requires = "tgt_addr")]
    pub tgt_iqn: Option<String>,
    /// LUN of tgt's null disk (LUN 0 is tgt's controller).
    #[arg(long, default_value_t = 1)]
    pub tgt_lun: u64,
    /// Also write every figure, each repetition and the negotiated parameters as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the report as Markdown.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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
    External {
        addr: SocketAddr,
        pid: Option<u32>,
        iqn: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPlan {
    pub kind: TargetKind,
    pub source: Source,
    pub lun: u64,
}

/// One point of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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
    pub reel_bin: Option<PathBuf>,
    pub tgtd: String,
    pub tgtadm: String,
    pub json: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
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

/// A size such as `65536`, `64K`, `256k`, `1M`, `1MiB` (binary units).
pub fn parse_size(text: &str) -> anyhow::Result<u32> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        bail!("size {text:?} is not a number with an optional K/M suffix (e.g. 64K, 1M)");
    }
    let value = digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(1 << shift))
        .ok_or_else(|| anyhow!("size {text:?} is too large"))?;
    if value == 0 {
        bail!("size {text:?}: transfers must be at least one {BLOCK}-byte block");
    }
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

fn parse_target(text: &str) -> anyhow::Result<TargetKind> {
    match text.trim().to_ascii_lowercase().as_str() {
        "reel" => Ok(TargetKind::Reel),
        "tgt" | "tgtd" => Ok(TargetKind::Tgt),
        _ => bail!("unknown target {text:?} (known: reel, tgt)"),
    }
}

fn parse_direction(text: &str) -> anyhow::Result<Direction> {
    match text.trim().to_ascii_lowercase().as_str() {
        "write" | "w" => Ok(Direction::Write),
        "read" | "r" => Ok(Direction::Read),
        _ => bail!("unknown direction {text:?} (known: write, read)"),
    }
}

fn parse_addr(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    text.parse()
        .map_err(|_| anyhow!("--{flag} {text:?} is not an address:port such as 127.0.0.1:3260"))
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
pub fn validate(cli: Cli) -> anyhow::Result<Plan> {
    let mut kinds = Vec::new();
    for t in &cli.targets {
        let kind = parse_target(t)?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        bail!("--targets: no targets");
    }
    let mut targets = Vec::new();
    for kind in kinds {
        let (addr, pid, iqn, lun, flag) = match kind {
            TargetKind::Reel => (
                &cli.reel_addr,
                cli.reel_pid,
                &cli.reel_iqn,
                cli.reel_lun,
                "reel-addr",
            ),
            TargetKind::Tgt => (
                &cli.tgt_addr,
                cli.tgt_pid,
                &cli.tgt_iqn,
                cli.tgt_lun,
                "tgt-addr",
            ),
        };
        let source = match addr {
            None => Source::Launch,
            Some(addr) => {
                let addr = parse_addr(flag, addr)?;
                if addr.port() == 0 {
                    bail!("--{flag} {addr}: port 0 cannot be connected to");
                }
                Source::External {
                    addr,
                    pid,
                    iqn: iqn.clone(),
                }
            }
        };
        if lun > 16383 {
            bail!("--{}-lun {lun}: LUNs go up to 16383", kind.name());
        }
        targets.push(TargetPlan { kind, source, lun });
    }
    for (flag, given, kind) in [
        ("reel-addr", cli.reel_addr.is_some(), TargetKind::Reel),
        ("tgt-addr", cli.tgt_addr.is_some(), TargetKind::Tgt),
    ] {
        if given && !targets.iter().any(|t| t.kind == kind) {
            bail!("--{flag} given but {} is not in --targets", kind.name());
        }
    }
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
    for (flag, path) in [("json", &cli.json), ("markdown", &cli.markdown)] {
        if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            bail!("--{flag}: empty file name");
        }
    }
    Ok(Plan {
        targets,
        sizes,
        queue_depths: counts("qd", &cli.queue_depths, MAX_QUEUE_DEPTH)?,
        sessions: counts("sessions", &cli.sessions, MAX_SESSIONS)?,
        directions,
        measure: seconds("seconds", cli.seconds, 0.1, 3600.0)?,
        warmup: seconds("warmup", cli.warmup, 0.0, 600.0)?,
        repeat: cli.repeat,
        reel_bin: cli.reel_bin,
        tgtd: cli.tgtd,
        tgtadm: cli.tgtadm,
        json: cli.json,
        markdown: cli.markdown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        let mut argv = vec!["reel-iscsi-bench"];
        argv.extend_from_slice(args);
        validate(Cli::try_parse_from(argv).map_err(|e| anyhow!("{e}"))?)
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
        assert!(
            parse_size("0")
                .unwrap_err()
                .to_string()
                .contains("at least one")
        );
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
            Source::External {
                addr: "127.0.0.1:3260".parse().unwrap(),
                pid: Some(77),
                iqn: None
            }
        );
        assert_eq!(p.sizes, vec![1 << 20]);
    }
}
