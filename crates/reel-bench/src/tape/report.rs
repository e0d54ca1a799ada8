//! Results: per-phase figures, the flatness check, the goals, and the terminal,
//! JSON and Markdown forms of the report.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::harness::table::{markdown_table, text_table};
use crate::harness::{Machine, TargetKind, median, size_label};
use crate::session::{DrivePlan, NegotiatedReport};
use crate::tape::args::Workload;

/// The goals.
pub const GOAL_ONE_DRIVE: f64 = 1.2;
pub const GOAL_FOUR_DRIVES: f64 = 1.5;
pub const GOAL_RECORD_SIZE: u32 = 256 << 10;
pub const GOAL_DEDUP_OF_IDEAL: f64 = 0.97;
/// The API's ratios and those from the pack files are computed from the same bytes: they
/// may differ only by what the catalog counts that the files do not (nothing, today).
pub const GOAL_RATIO_AGREEMENT: f64 = 0.01;
/// Flatness: samples after the first `FLAT_SKIP_SECONDS` may be at most this far below the
/// median.
pub const FLAT_TOLERANCE: f64 = 0.20;
pub const FLAT_SKIP_SECONDS: usize = 5;

/// JSON writes NaN as null; read it back as NaN.
fn numbers_or_nulls<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v: Vec<Option<f64>> = Deserialize::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

/// Per-second samples of one phase, judged for flatness.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Flatness {
    /// Samples judged (those after the first `skip_seconds`).
    pub samples: usize,
    pub skip_seconds: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// `1 - min / median`.
    pub worst_dip: f64,
    /// (second, MB/s) of every judged sample more than `tolerance` below the median; second
    /// `k` is the interval from k-1 to k seconds after the phase started.
    pub below: Vec<(usize, f64)>,
    pub tolerance: f64,
    pub flat: bool,
}

/// Judges one-second samples (MB/s; `samples[0]` is the first second): after the first
/// `skip` seconds, none may be more than `tolerance` below their median. `None` when no
/// sample is left to judge.
pub fn flatness(samples: &[f64], skip: usize, tolerance: f64) -> Option<Flatness> {
    let judged = samples.get(skip..).filter(|s| !s.is_empty())?;
    let median = median(judged)?;
    let min = judged.iter().copied().fold(f64::INFINITY, f64::min);
    let max = judged.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let floor = median * (1.0 - tolerance);
    let below: Vec<(usize, f64)> = judged
        .iter()
        .enumerate()
        .filter(|(_, v)| **v < floor)
        .map(|(i, v)| (skip + i + 1, *v))
        .collect();
    Some(Flatness {
        samples: judged.len(),
        skip_seconds: skip,
        min,
        median,
        max,
        worst_dip: if median > 0.0 {
            1.0 - min / median
        } else {
            0.0
        },
        flat: below.is_empty(),
        below,
        tolerance,
    })
}

/// Per-second MB/s from cumulative byte counts taken at 1 s, 2 s, … after the phase
/// started, keeping only intervals that end by `steady_seconds` (while every drive was still
/// moving data).
pub fn per_second(cumulative: &[u64], steady_seconds: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut previous = 0u64;
    for (k, &c) in cumulative.iter().enumerate() {
        if (k + 1) as f64 > steady_seconds + 1e-9 {
            break;
        }
        out.push(c.saturating_sub(previous) as f64 / 1e6);
        previous = c;
    }
    out
}

/// One data phase (write or read) of one run, all drives together.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Wall-clock start (seconds since the Unix epoch), to line samples up with target logs.
    #[serde(default)]
    pub started_unix: f64,
    pub bytes: u64,
    pub records: u64,
    pub filemarks: u64,
    /// From the phase's start to the last drive's last command (for writes: the final
    /// WRITE FILEMARKS with IMMED=0, so the target's synchronisation is included).
    pub seconds: f64,
    /// 10^6 bytes per second over `seconds`.
    pub mb_per_s: f64,
    /// From the phase's start to the last data command.
    pub data_seconds: f64,
    pub per_drive_mb_per_s: Vec<f64>,
    /// Target process CPU seconds (user + system) per 10^9 bytes, and in cores.
    pub server_cpu_s_per_gb: Option<f64>,
    pub server_cores: Option<f64>,
    /// The same from the server's own counter (reel's `reel_process_cpu_seconds_total` in
    /// `/metrics`), when its API is reachable.
    #[serde(default)]
    pub server_api_cpu_s_per_gb: Option<f64>,
    /// This process (initiator, data generation and verification) likewise.
    pub client_cpu_s_per_gb: f64,
    pub client_cores: f64,
    /// MB/s of every whole second while all drives were moving data.
    pub samples_mb_per_s: Vec<f64>,
    /// The target's CPU in those seconds, in cores (NaN without its PID): a dip with idle
    /// cores is the target waiting (I/O, locks), a dip with busy cores is work or contention.
    #[serde(default, deserialize_with = "numbers_or_nulls")]
    pub samples_server_cores: Vec<f64>,
    pub flatness: Option<Flatness>,
}

/// Durations of the untimed steps around the data phases.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Steps {
    pub load_and_prepare_s: f64,
    pub rewind_s: f64,
    pub finish_and_unload_s: f64,
}

/// What the target kept on disk after the run.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Storage {
    /// Disk space (allocated blocks) of the target's data: reel's data directory, tgt's
    /// tape image files.
    pub disk_bytes: u64,
    /// reel: the ratios its API reports (`api`).
    pub dedup: Option<f64>,
    pub compression: Option<f64>,
    pub reduction: Option<f64>,
    /// reel: `/api/v1/stats` after the cell.
    #[serde(default)]
    pub api: Option<crate::api::ApiStore>,
    /// reel: the same ratios from its pack files (launched reel only).
    #[serde(default)]
    pub packs: Option<crate::api::DiskStore>,
}

impl Storage {
    /// Logical bytes over everything the target keeps on disk (reel: its whole data directory,
    /// catalog included): the reduction a user sees with `du`.
    pub fn reduction_on_disk(&self, logical: u64) -> Option<f64> {
        (self.disk_bytes > 0).then(|| logical as f64 / self.disk_bytes as f64)
    }

    /// The dedup the disk shows: the on-disk reduction without the compression's share. Below
    /// the store's dedup by what the catalog and other metadata take.
    pub fn dedup_on_disk(&self, logical: u64) -> Option<f64> {
        let compression = self.compression.filter(|c| *c > 0.0)?;
        Some(self.reduction_on_disk(logical)? / compression)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetRun {
    pub target: TargetKind,
    pub software: String,
    pub addr: String,
    pub iqn: String,
    pub pid: Option<u32>,
    pub launched: bool,
    pub negotiated: NegotiatedReport,
    /// How tgt's cartridges were loaded: "changer" or "preloaded".
    pub media: String,
    pub drives: Vec<DrivePlan>,
    pub steps: Steps,
    pub write: PhaseResult,
    pub read: PhaseResult,
    pub storage: Option<Storage>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellReport {
    pub drives: u32,
    pub record_size: u32,
    pub size_per_drive: u64,
    pub flat: bool,
    /// The cell's whole workload (reports before sweeps lack it: see
    /// [`Report::fill_workloads`]).
    #[serde(default)]
    pub workload: Option<Workload>,
    pub runs: Vec<TargetRun>,
    /// reel MB/s ÷ tgt MB/s.
    pub write_ratio: Option<f64>,
    pub read_ratio: Option<f64>,
}

impl CellReport {
    pub fn new(drives: u32, workload: &Workload, flat: bool, runs: Vec<TargetRun>) -> Self {
        let get = |kind: TargetKind| runs.iter().find(|r| r.target == kind);
        let ratio = |f: fn(&TargetRun) -> f64| {
            get(TargetKind::Reel)
                .zip(get(TargetKind::Tgt))
                .map(|(r, t)| f(r) / f(t))
                .filter(|x| x.is_finite())
        };
        let write_ratio = ratio(|r| r.write.mb_per_s);
        let read_ratio = ratio(|r| r.read.mb_per_s);
        CellReport {
            drives,
            record_size: workload.record_size,
            size_per_drive: workload.size,
            flat,
            workload: Some(workload.clone()),
            runs,
            write_ratio,
            read_ratio,
        }
    }

    pub fn run(&self, kind: TargetKind) -> Option<&TargetRun> {
        self.runs.iter().find(|r| r.target == kind)
    }

    pub fn label(&self) -> String {
        format!(
            "{} drive{} x {}",
            self.drives,
            if self.drives == 1 { "" } else { "s" },
            size_label(u64::from(self.record_size))
        )
    }

    /// The label with the values of `dims` (the swept dimensions besides drives and record
    /// size).
    pub fn label_with(&self, dims: &[Dim]) -> String {
        let mut out = self.label();
        for d in dims {
            if !matches!(d, Dim::Drives | Dim::RecordSize) {
                let _ = write!(out, ", {} {}", d.short(), d.label(self));
            }
        }
        out
    }

    pub fn workload(&self) -> &Workload {
        self.workload
            .as_ref()
            .expect("Report::fill_workloads runs after loading")
    }

    /// The workload the goals are stated for: 25 % random, R = 8, every block
    /// compressible, no intermediate filemarks.
    pub fn is_tapewrite_default(&self) -> bool {
        let w = self.workload();
        w.randomness == 0.25
            && w.redundancy == 8
            && w.incompressible_share == 0.0
            && w.filemark_every.is_none()
    }
}

/// A workload dimension a sweep can vary (one column and one chart axis each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    RecordSize,
    Drives,
    CompressibleShare,
    Randomness,
    Redundancy,
    QueueDepth,
    FilemarkEvery,
    FilemarkImmed,
}

impl Dim {
    pub const ALL: [Dim; 8] = [
        Dim::RecordSize,
        Dim::Drives,
        Dim::CompressibleShare,
        Dim::Randomness,
        Dim::Redundancy,
        Dim::QueueDepth,
        Dim::FilemarkEvery,
        Dim::FilemarkImmed,
    ];

    /// Column header / legend word.
    pub fn short(self) -> &'static str {
        match self {
            Dim::RecordSize => "record",
            Dim::Drives => "drives",
            Dim::CompressibleShare => "compressible",
            Dim::Randomness => "random",
            Dim::Redundancy => "R",
            Dim::QueueDepth => "QD",
            Dim::FilemarkEvery => "filemark every",
            Dim::FilemarkImmed => "IMMED",
        }
    }

    /// Chart axis label, with units.
    pub fn axis(self) -> &'static str {
        match self {
            Dim::RecordSize => "record size (bytes, K/M = 2^10/2^20)",
            Dim::Drives => "drives writing at once",
            Dim::CompressibleShare => "share of compressible blocks (the rest random)",
            Dim::Randomness => "random share of each compressible block",
            Dim::Redundancy => "redundancy R (appearances of each unique block)",
            Dim::QueueDepth => "commands in flight per drive",
            Dim::FilemarkEvery => "filemark interval (bytes of records)",
            Dim::FilemarkImmed => "intermediate filemarks with IMMED=1",
        }
    }

    /// File-name part of the chart.
    pub fn slug(self) -> &'static str {
        match self {
            Dim::RecordSize => "record-size",
            Dim::Drives => "drives",
            Dim::CompressibleShare => "compressible-share",
            Dim::Randomness => "randomness",
            Dim::Redundancy => "redundancy",
            Dim::QueueDepth => "queue-depth",
            Dim::FilemarkEvery => "filemark-interval",
            Dim::FilemarkImmed => "filemark-immed",
        }
    }

    /// The cell's value, for ordering (no intermediate filemark sorts first).
    pub fn value(self, c: &CellReport) -> f64 {
        let w = c.workload();
        match self {
            Dim::RecordSize => f64::from(c.record_size),
            Dim::Drives => f64::from(c.drives),
            Dim::CompressibleShare => 1.0 - w.incompressible_share,
            Dim::Randomness => w.randomness,
            Dim::Redundancy => f64::from(w.redundancy),
            Dim::QueueDepth => f64::from(w.queue_depth),
            Dim::FilemarkEvery => w.filemark_every.map_or(0.0, |k| k as f64),
            Dim::FilemarkImmed => f64::from(u8::from(w.filemark_immed)),
        }
    }

    pub fn label(self, c: &CellReport) -> String {
        let w = c.workload();
        match self {
            Dim::RecordSize => size_label(u64::from(c.record_size)),
            Dim::Drives => c.drives.to_string(),
            Dim::CompressibleShare => format!("{:.0} %", (1.0 - w.incompressible_share) * 100.0),
            Dim::Randomness => format!("{:.0} %", w.randomness * 100.0),
            Dim::Redundancy => w.redundancy.to_string(),
            Dim::QueueDepth => w.queue_depth.to_string(),
            Dim::FilemarkEvery => w.filemark_every.map_or("end only".into(), size_label),
            Dim::FilemarkImmed => if w.filemark_immed { "yes" } else { "no" }.into(),
        }
    }
}

/// The dimensions whose value differs between the (non-flat) cells, in [`Dim::ALL`] order.
pub fn varying(cells: &[CellReport]) -> Vec<Dim> {
    let matrix: Vec<&CellReport> = cells.iter().filter(|c| !c.flat).collect();
    Dim::ALL
        .into_iter()
        .filter(|d| matrix.iter().any(|c| d.value(c) != d.value(matrix[0])))
        .collect()
}

/// The targets that took part, in [`TargetKind::ALL`] order.
pub fn targets_in(cells: &[CellReport]) -> Vec<TargetKind> {
    TargetKind::ALL
        .into_iter()
        .filter(|k| cells.iter().any(|c| c.run(*k).is_some()))
        .collect()
}

/// One of the goals.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Goal {
    pub goal: String,
    /// `Some(true)` met, `Some(false)` missed, `None` not measured in this run.
    pub met: Option<bool>,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub command: String,
    pub started_unix: u64,
    pub finished_unix: u64,
    pub machine: Machine,
    pub workload: Workload,
    pub initiator: String,
    pub cells: Vec<CellReport>,
    pub goals: Vec<Goal>,
    /// The physical drive a launched reel emulated (`--emulate`), by its model id.
    #[serde(default)]
    pub emulated: Option<String>,
}

impl Report {
    /// Gives every cell of a report written before sweeps existed its workload: the
    /// report's, with the cell's record size and size.
    pub fn fill_workloads(&mut self) {
        for c in &mut self.cells {
            if c.workload.is_none() {
                c.workload = Some(Workload {
                    record_size: c.record_size,
                    size: c.size_per_drive,
                    ..self.workload.clone()
                });
            }
        }
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}x"))
}

/// The goals judged on the cells of this run.
pub fn goals(cells: &[CellReport]) -> Vec<Goal> {
    let mut out = Vec::new();
    // The cell of the goals' workload (at the default queue depth when several were run).
    let matrix = |drives: u32| {
        let mut found = cells.iter().filter(|c| {
            !c.flat
                && c.drives == drives
                && c.record_size == GOAL_RECORD_SIZE
                && c.is_tapewrite_default()
        });
        let first = found.next()?;
        Some(
            std::iter::once(first)
                .chain(found)
                .find(|c| c.workload().queue_depth == 8)
                .unwrap_or(first),
        )
    };
    for (drives, goal) in [(1, GOAL_ONE_DRIVE), (4, GOAL_FOUR_DRIVES)] {
        let name = format!(
            "{} reel drive{} >= {goal}x {} tgt drive{} (write, 256 KiB records)",
            if drives == 1 { "one" } else { "four" },
            if drives == 1 { "" } else { "s together" },
            if drives == 1 { "one" } else { "four" },
            if drives == 1 { "" } else { "s" },
        );
        let (met, detail) = match matrix(drives).and_then(|c| c.write_ratio.map(|r| (c, r))) {
            Some((c, r)) => (
                Some(r >= goal),
                format!(
                    "{r:.2}x ({} vs {} MB/s; margin {:+.0} %)",
                    opt(c.run(TargetKind::Reel).map(|r| r.write.mb_per_s), 0),
                    opt(c.run(TargetKind::Tgt).map(|r| r.write.mb_per_s), 0),
                    (r / goal - 1.0) * 100.0
                ),
            ),
            None => (None, "not measured in this run".into()),
        };
        out.push(Goal {
            goal: name,
            met,
            detail,
        });
    }
    // Data reduction: dedup within 3 % of R on the goals' workload (tgt stores everything),
    // judged on disk: the catalog counts, as it does for a user's `du`.
    let reduced: Vec<(&CellReport, &Storage)> = cells
        .iter()
        .filter(|c| !c.flat && c.is_tapewrite_default())
        .filter_map(|c| Some((c, c.run(TargetKind::Reel)?.storage.as_ref()?)))
        .filter(|(_, s)| s.dedup.is_some())
        .collect();
    let ideal = |c: &CellReport| c.workload().ideal_dedup(c.drives);
    let logical = |c: &CellReport| c.size_per_drive * u64::from(c.drives);
    let on_disk = |c: &CellReport, s: &Storage| s.dedup_on_disk(logical(c)).unwrap_or(0.0);
    out.push(Goal {
        goal: format!(
            "reel's dedup on disk >= {GOAL_DEDUP_OF_IDEAL} of the stream's ideal (25 % random, R = 8: ideal 8 when the stream spans whole shuffle windows; catalog included)"
        ),
        met: (!reduced.is_empty()).then(|| {
            reduced
                .iter()
                .all(|(c, s)| on_disk(c, s) >= GOAL_DEDUP_OF_IDEAL * ideal(c))
        }),
        detail: if reduced.is_empty() {
            "not measured in this run".into()
        } else {
            reduced
                .iter()
                .map(|(c, s)| {
                    format!(
                        "{}: dedup on disk {:.2} of {:.2} ({:.1} %; packs alone {:.2}), compression {:.2}, reduction {:.1}:1 store, {:.1}:1 on disk",
                        c.label(),
                        on_disk(c, s),
                        ideal(c),
                        on_disk(c, s) / ideal(c) * 100.0,
                        s.dedup.unwrap_or(0.0),
                        s.compression.unwrap_or(0.0),
                        s.reduction.unwrap_or(0.0),
                        s.reduction_on_disk(logical(c)).unwrap_or(0.0)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        },
    });
    // reel's reported ratios against those computed from its pack files.
    let checked: Vec<(&CellReport, f64)> = cells
        .iter()
        .filter_map(|c| {
            let s = c.run(TargetKind::Reel)?.storage.as_ref()?;
            Some((
                c,
                crate::api::disagreement(s.api.as_ref()?, s.packs.as_ref()?),
            ))
        })
        .collect();
    let worst = checked.iter().map(|(_, d)| *d).fold(0.0, f64::max);
    out.push(Goal {
        goal: format!(
            "reel's API ratios = ratios from its pack files (within {:.0} %)",
            GOAL_RATIO_AGREEMENT * 100.0
        ),
        met: (!checked.is_empty()).then_some(worst <= GOAL_RATIO_AGREEMENT),
        detail: if checked.is_empty() {
            "not measured in this run".into()
        } else {
            format!(
                "{} cells; largest difference {:.2} %",
                checked.len(),
                worst * 100.0
            )
        },
    });
    // Reads at least as fast as writes, for reel in every cell.
    let mut slower = Vec::new();
    let mut judged = 0;
    for c in cells {
        if let Some(r) = c.run(TargetKind::Reel) {
            judged += 1;
            if r.read.mb_per_s < r.write.mb_per_s {
                slower.push(format!(
                    "{}{}: read {:.0} < write {:.0} MB/s",
                    c.label(),
                    if c.flat { " (flat run)" } else { "" },
                    r.read.mb_per_s,
                    r.write.mb_per_s
                ));
            }
        }
    }
    out.push(Goal {
        goal: "reel reads >= reel writes (every cell)".into(),
        met: (judged > 0).then_some(slower.is_empty()),
        detail: if judged == 0 {
            "not measured in this run".into()
        } else if slower.is_empty() {
            format!("read >= write in all {judged} cells")
        } else {
            format!("{} of {judged} cells: {}", slower.len(), slower.join("; "))
        },
    });
    // Flat throughput of reel's long single-drive write.
    let flat = cells
        .iter()
        .find(|c| c.flat)
        .and_then(|c| c.run(TargetKind::Reel));
    let (met, detail) = match flat.map(|r| (r, r.write.flatness.as_ref())) {
        Some((_, Some(f))) => (
            Some(f.flat),
            format!(
                "{} samples after the first {} s: min {:.0}, median {:.0} MB/s, worst dip {:.0} % below the median{}",
                f.samples,
                f.skip_seconds,
                f.min,
                f.median,
                f.worst_dip * 100.0,
                if f.below.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} sample(s) more than {:.0} % below",
                        f.below.len(),
                        f.tolerance * 100.0
                    )
                }
            ),
        ),
        Some((_, None)) => (None, "the run was too short to judge".into()),
        None => (None, "not measured in this run".into()),
    };
    out.push(Goal {
        goal: format!(
            "flat write throughput (reel, one drive): no 1 s sample > {:.0} % below the median after {} s",
            FLAT_TOLERANCE * 100.0,
            FLAT_SKIP_SECONDS
        ),
        met,
        detail,
    });
    out
}

fn met_word(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "n/a",
    }
}

/// The main table (aligned text on the terminal, Markdown in the report): one row per cell,
/// the swept dimensions first, then every target's throughput, reel/tgt ratios and CPU.
fn matrix_table(report: &Report) -> (Vec<String>, Vec<Vec<String>>, usize) {
    let dims = varying(&report.cells);
    let extra: Vec<Dim> = dims
        .iter()
        .copied()
        .filter(|d| !matches!(d, Dim::Drives | Dim::RecordSize))
        .collect();
    let targets = targets_in(&report.cells);
    let both = targets.contains(&TargetKind::Reel) && targets.contains(&TargetKind::Tgt);
    let mut header: Vec<String> = vec!["drives".into(), "record".into()];
    header.extend(extra.iter().map(|d| d.short().to_string()));
    let first_number = header.len();
    for phase in ["write", "read"] {
        for t in &targets {
            header.push(format!("{} {phase} MB/s", t.name()));
        }
        if both {
            header.push("reel/tgt".into());
        }
    }
    for t in targets.iter().filter(|t| **t != TargetKind::File) {
        header.push(format!("{} CPU s/GB (w/r)", t.name()));
    }
    header.push(format!(
        "client CPU s/GB write ({})",
        targets
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join("/")
    ));
    let mut rows = Vec::new();
    for c in report.cells.iter().filter(|c| !c.flat) {
        let mut row = vec![c.drives.to_string(), size_label(u64::from(c.record_size))];
        row.extend(extra.iter().map(|d| d.label(c)));
        for (write, ratio_value) in [(true, c.write_ratio), (false, c.read_ratio)] {
            for t in &targets {
                row.push(opt(
                    c.run(*t)
                        .map(|r| if write { &r.write } else { &r.read }.mb_per_s),
                    0,
                ));
            }
            if both {
                row.push(ratio(ratio_value));
            }
        }
        for t in targets.iter().filter(|t| **t != TargetKind::File) {
            let r = c.run(*t);
            let cpu = |p: &PhaseResult| p.server_cpu_s_per_gb.or(p.server_api_cpu_s_per_gb);
            row.push(format!(
                "{} / {}",
                opt(r.and_then(|r| cpu(&r.write)), 2),
                opt(r.and_then(|r| cpu(&r.read)), 2)
            ));
        }
        row.push(
            targets
                .iter()
                .map(|t| opt(c.run(*t).map(|r| r.write.client_cpu_s_per_gb), 2))
                .collect::<Vec<_>>()
                .join(" / "),
        );
        rows.push(row);
    }
    (header, rows, first_number)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn flat_rows(report: &Report) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for c in report.cells.iter().filter(|c| c.flat) {
        for run in &c.runs {
            for (phase, p) in [("write", &run.write), ("read", &run.read)] {
                let f = p.flatness.as_ref();
                rows.push(vec![
                    run.target.name().to_string(),
                    phase.to_string(),
                    size_label(c.size_per_drive),
                    format!("{:.0}", p.mb_per_s),
                    p.samples_mb_per_s.len().to_string(),
                    opt(f.map(|f| f.min), 0),
                    opt(f.map(|f| f.median), 0),
                    opt(f.map(|f| f.max), 0),
                    opt(f.map(|f| f.worst_dip * 100.0), 0),
                    f.map_or("-".into(), |f| f.below.len().to_string()),
                    f.map_or(
                        "-".into(),
                        |f| if f.flat { "yes".into() } else { "no".into() },
                    ),
                ]);
            }
        }
    }
    rows
}

const FLAT_HEADER: [&str; 11] = [
    "target",
    "phase",
    "size",
    "MB/s (whole phase)",
    "1 s samples",
    "min",
    "median",
    "max",
    "worst dip %",
    "samples > 20 % below",
    "flat",
];

/// What each target kept: reel's ratios as its API reports them and as its pack files give
/// them, the targets' disk use.
fn storage_table(report: &Report) -> (Vec<String>, Vec<Vec<String>>) {
    let dims = varying(&report.cells);
    let targets = targets_in(&report.cells);
    let reel = targets.contains(&TargetKind::Reel);
    let mut header: Vec<String> = vec!["cell".into(), "written GB".into()];
    if reel {
        header.extend(
            [
                "reel on disk GB",
                "reel dedup",
                "reel compression",
                "reel reduction (store)",
                "reel reduction (on disk)",
                "from pack files (dedup / compression / reduction)",
                "reel CPU s/GB write (API)",
            ]
            .map(String::from),
        );
    }
    for t in targets.iter().filter(|t| **t != TargetKind::Reel) {
        header.push(format!("{} on disk GB", t.name()));
    }
    let mut rows = Vec::new();
    for c in &report.cells {
        let logical = c.size_per_drive * u64::from(c.drives);
        let mut row = vec![
            format!(
                "{}{}",
                c.label_with(&dims),
                if c.flat { " (flat)" } else { "" }
            ),
            format!("{:.2}", logical as f64 / 1e9),
        ];
        if reel {
            let run = c.run(TargetKind::Reel);
            let r = run.and_then(|r| r.storage.as_ref());
            row.extend([
                opt(r.map(|s| s.disk_bytes as f64 / 1e9), 3),
                opt(r.and_then(|s| s.dedup), 2),
                opt(r.and_then(|s| s.compression), 2),
                opt(r.and_then(|s| s.reduction), 2),
                opt(r.and_then(|s| s.reduction_on_disk(logical)), 2),
                r.and_then(|s| s.packs.as_ref()).map_or("-".into(), |p| {
                    format!(
                        "{:.2} / {:.2} / {:.2}",
                        p.dedup_ratio, p.compression_ratio, p.reduction_ratio
                    )
                }),
                opt(run.and_then(|r| r.write.server_api_cpu_s_per_gb), 2),
            ]);
        }
        for t in targets.iter().filter(|t| **t != TargetKind::Reel) {
            let s = c.run(*t).and_then(|r| r.storage.as_ref());
            row.push(opt(s.map(|s| s.disk_bytes as f64 / 1e9), 3));
        }
        rows.push(row);
    }
    (header, rows)
}

fn negotiated_rows(report: &Report) -> (Vec<String>, Vec<Vec<String>>) {
    let mut runs: Vec<&TargetRun> = Vec::new();
    for c in &report.cells {
        for r in &c.runs {
            if !runs.iter().any(|x| x.target == r.target) {
                runs.push(r);
            }
        }
    }
    let header: Vec<String> = std::iter::once("parameter".to_string())
        .chain(runs.iter().map(|r| r.target.name().to_string()))
        .collect();
    let yes = |b: bool| if b { "Yes" } else { "No" }.to_string();
    let row = |name: &str, f: &dyn Fn(&NegotiatedReport) -> String| {
        std::iter::once(name.to_string())
            .chain(runs.iter().map(|r| f(&r.negotiated)))
            .collect::<Vec<_>>()
    };
    let rows = vec![
        row(
            "MaxRecvDataSegmentLength (target's: our Data-Out PDUs)",
            &|n| n.target_max_recv_data_segment_length.to_string(),
        ),
        row(
            "MaxRecvDataSegmentLength (initiator's: Data-In PDUs)",
            &|n| n.initiator_max_recv_data_segment_length.to_string(),
        ),
        row("MaxBurstLength", &|n| n.max_burst_length.to_string()),
        row("FirstBurstLength", &|n| n.first_burst_length.to_string()),
        row("ImmediateData", &|n| yes(n.immediate_data)),
        row("InitialR2T", &|n| yes(n.initial_r2t)),
        row("HeaderDigest / DataDigest", &|n| {
            format!("{} / {}", yes(n.header_digest), yes(n.data_digest))
        }),
        row("command window after login", &|n| {
            n.window_after_login.to_string()
        }),
    ];
    (header, rows)
}

pub fn terminal(report: &Report) -> String {
    let mut out = String::new();
    let (header, rows, _) = matrix_table(report);
    if !rows.is_empty() {
        out.push_str(&text_table(&strs(&header), &rows, 0));
    }
    let flat = flat_rows(report);
    if !flat.is_empty() {
        out.push('\n');
        out.push_str(&text_table(&FLAT_HEADER, &flat, 0));
    }
    out.push('\n');
    let (header, rows) = storage_table(report);
    out.push_str(&text_table(&strs(&header), &rows, 0));
    out.push('\n');
    for g in &report.goals {
        let _ = writeln!(out, "{}: {} — {}", met_word(g.met), g.goal, g.detail);
    }
    out
}

/// The report as Markdown; `charts` are (title, relative path) pairs to link.
pub fn markdown(report: &Report, charts: &[(String, String)]) -> String {
    let mut out = String::new();
    let w = &report.workload;
    let _ = writeln!(out, "### reel-bench\n");
    let _ = writeln!(
        out,
        "{} per drive per cell (flat run: see below), tapewrite-style data from reel-datagen \
         (randomness {}, redundancy R = {}, {} blocks, scattered in {}-block windows, seed {}{}), \
         variable-length records, {} WRITE(6)/READ(6) in flight per drive, {}. Every byte read \
         back is compared with the regenerated stream. MB = 10^6 bytes. Initiator: {}.\n",
        size_label(w.size),
        w.randomness,
        w.redundancy,
        size_label(w.block_size as u64),
        w.window_blocks,
        w.seed,
        if w.same_data {
            ", every drive the same stream"
        } else {
            " + drive index"
        },
        w.queue_depth,
        match w.filemark_every {
            Some(k) => format!(
                "a filemark every {} ({}) and one IMMED=0 filemark at the end",
                size_label(k),
                if w.filemark_immed {
                    "IMMED=1"
                } else {
                    "IMMED=0"
                }
            ),
            None => "one filemark (IMMED=0) at the end".into(),
        },
        report.initiator
    );
    let _ = writeln!(
        out,
        "Load average at start: {}; at end: {}.\n",
        report.machine.load_average_start, report.machine.load_average_end
    );
    let mut seen = Vec::new();
    let _ = writeln!(out, "Targets:\n");
    for c in &report.cells {
        for r in &c.runs {
            if seen.contains(&r.target) {
                continue;
            }
            seen.push(r.target);
            let product = r
                .drives
                .first()
                .map(|d| d.drive_product.clone())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "- **{}**: {} — `{}`, drives: {}, cartridges {}{}",
                r.target.name(),
                r.software,
                r.iqn,
                product,
                match r.media.as_str() {
                    "changer" => "loaded with MOVE MEDIUM through the target's changer",
                    "file" => "are plain files written with write(2)",
                    "device" => "are tape devices written with write(2) (one record each)",
                    _ => "preloaded in the drives (no changer)",
                },
                if r.launched {
                    ", started fresh for every cell"
                } else {
                    ", already running"
                }
            );
        }
    }
    let _ = writeln!(out);
    let (header, rows, first_number) = matrix_table(report);
    if !rows.is_empty() {
        let _ = writeln!(
            out,
            "Throughput (write: first WRITE to the final filemark's GOOD status; read: first to last READ; all drives together). \
             CPU s/GB: CPU seconds (user + system) of the target process per 10^9 bytes; client: this process \
             (initiator, data generation, verification).\n"
        );
        out.push_str(&markdown_table(&strs(&header), &rows, first_number));
        out.push('\n');
    }
    let flat = flat_rows(report);
    if !flat.is_empty() {
        let _ = writeln!(
            out,
            "Flat-throughput run (one drive; 1 s samples while data moved; judged after the first {FLAT_SKIP_SECONDS} s against their median):\n"
        );
        out.push_str(&markdown_table(&FLAT_HEADER, &flat, 3));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Storage after each run (reel: the ratios from its REST API `/api/v1/stats`, the same \
         computed independently from its pack files' trailers with the bytes this run wrote as the \
         logical side, its data directory's allocated size, and its CPU from `/metrics`; tgt: its \
         tape image files; file: the files written):\n"
    );
    let (header, rows) = storage_table(report);
    out.push_str(&markdown_table(&strs(&header), &rows, 1));
    out.push('\n');
    let (header, rows) = negotiated_rows(report);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let _ = writeln!(out, "Negotiated:\n");
    out.push_str(&markdown_table(&header, &rows, 1));
    out.push('\n');
    if let Some(id) = &report.emulated {
        let _ = writeln!(
            out,
            "reel emulated a physical `{id}` (`--emulate`): its drives answered when the drive \
             model said the real drive would (docs/design/drive-model.md); the model's curves \
             for that drive are among the charts.\n"
        );
    }
    if !charts.is_empty() {
        let _ = writeln!(out, "Charts:\n");
        for (title, path) in charts {
            let _ = writeln!(out, "- [{title}]({path})");
        }
        out.push('\n');
        for (title, path) in charts {
            let _ = writeln!(out, "![{title}]({path})\n");
        }
    }
    let _ = writeln!(out, "Goals:\n");
    for g in &report.goals {
        let _ = writeln!(out, "- **{}** {} — {}", met_word(g.met), g.goal, g.detail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatness_skips_the_start_and_flags_dips() {
        // A slow start does not count; a later dip of 25 % does.
        let mut samples = vec![10.0, 50.0, 80.0, 90.0, 95.0];
        samples.extend([100.0, 102.0, 98.0, 75.0, 101.0, 100.0]);
        let f = flatness(&samples, 5, 0.2).unwrap();
        assert_eq!(f.samples, 6);
        assert_eq!(f.median, 100.0);
        assert_eq!((f.min, f.max), (75.0, 102.0));
        assert_eq!(f.below, vec![(9, 75.0)]);
        assert!(!f.flat);
        assert!((f.worst_dip - 0.25).abs() < 1e-12);
        // 19 % below is within the tolerance.
        samples[8] = 81.0;
        let f = flatness(&samples, 5, 0.2).unwrap();
        assert!(f.flat && f.below.is_empty());
        // Nothing after the skipped seconds: nothing to judge.
        assert!(flatness(&samples[..5], 5, 0.2).is_none());
        assert!(flatness(&[], 0, 0.2).is_none());
    }

    #[test]
    fn per_second_rates_stop_when_data_stops() {
        let cumulative = [100_000_000, 250_000_000, 400_000_000, 420_000_000];
        assert_eq!(per_second(&cumulative, 3.5), vec![100.0, 150.0, 150.0]);
        assert_eq!(per_second(&cumulative, 10.0).len(), 4);
        assert!(per_second(&cumulative, 0.9).is_empty());
        assert_eq!(per_second(&cumulative, 3.0).len(), 3);
    }

    fn phase(mb_per_s: f64) -> PhaseResult {
        PhaseResult {
            started_unix: 0.0,
            bytes: 1,
            records: 1,
            filemarks: 1,
            seconds: 1.0,
            mb_per_s,
            data_seconds: 1.0,
            per_drive_mb_per_s: vec![mb_per_s],
            server_cpu_s_per_gb: Some(1.0),
            server_api_cpu_s_per_gb: None,
            server_cores: Some(1.0),
            client_cpu_s_per_gb: 0.5,
            client_cores: 0.5,
            samples_mb_per_s: Vec::new(),
            samples_server_cores: Vec::new(),
            flatness: None,
        }
    }

    fn run(target: TargetKind, write: f64, read: f64) -> TargetRun {
        TargetRun {
            target,
            software: "x".into(),
            addr: "127.0.0.1:1".into(),
            iqn: "iqn.x".into(),
            pid: None,
            launched: true,
            negotiated: NegotiatedReport {
                target_max_recv_data_segment_length: 262144,
                initiator_max_recv_data_segment_length: 262144,
                max_burst_length: 1 << 20,
                first_burst_length: 262144,
                immediate_data: true,
                initial_r2t: true,
                max_outstanding_r2t: 1,
                header_digest: false,
                data_digest: false,
                window_after_login: 64,
            },
            media: "changer".into(),
            drives: Vec::new(),
            steps: Steps::default(),
            write: phase(write),
            read: phase(read),
            storage: None,
        }
    }

    fn workload(record_size: u32) -> Workload {
        Workload {
            size: 1 << 30,
            record_size,
            queue_depth: 8,
            filemark_every: None,
            filemark_immed: false,
            same_data: false,
            randomness: 0.25,
            redundancy: 8,
            incompressible_share: 0.0,
            block_size: 256 << 10,
            window_blocks: 1024,
            seed: 1,
            source_rate: None,
        }
    }

    #[test]
    fn goals_are_judged_with_margins() {
        let cells = vec![
            CellReport::new(
                1,
                &workload(256 << 10),
                false,
                vec![
                    run(TargetKind::Reel, 600.0, 700.0),
                    run(TargetKind::Tgt, 400.0, 500.0),
                ],
            ),
            CellReport::new(
                4,
                &workload(256 << 10),
                false,
                vec![
                    run(TargetKind::Reel, 700.0, 650.0),
                    run(TargetKind::Tgt, 500.0, 900.0),
                ],
            ),
        ];
        assert_eq!(cells[0].write_ratio, Some(1.5));
        let g = goals(&cells);
        assert_eq!(g[0].met, Some(true));
        assert!(
            g[0].detail
                .starts_with("1.50x (600 vs 400 MB/s; margin +25 %)"),
            "{}",
            g[0].detail
        );
        assert_eq!(g[1].met, Some(false));
        assert!(
            g[1].detail.contains("1.40x") && g[1].detail.contains("margin -7 %"),
            "{}",
            g[1].detail
        );
        let named = |start: &str| g.iter().find(|g| g.goal.starts_with(start)).unwrap();
        let reads = named("reel reads >= reel writes");
        assert_eq!(reads.met, Some(false));
        assert!(
            reads
                .detail
                .contains("4 drives x 256K: read 650 < write 700"),
            "{}",
            reads.detail
        );
        assert_eq!(named("flat write").met, None);
        // No storage figures: neither reduction nor agreement was measured.
        assert_eq!(named("reel's dedup").met, None);
        assert_eq!(named("reel's API ratios").met, None);
        // Without tgt there is no ratio.
        let alone = vec![CellReport::new(
            1,
            &workload(256 << 10),
            false,
            vec![run(TargetKind::Reel, 1.0, 2.0)],
        )];
        assert_eq!(goals(&alone)[0].met, None);
    }

    /// Storage of a 1 GiB cell whose data directory is the packs plus `catalog` of them.
    fn storage(dedup: f64, packs_dedup: f64) -> Storage {
        storage_with_catalog(dedup, packs_dedup, 0.0)
    }

    fn storage_with_catalog(dedup: f64, packs_dedup: f64, catalog: f64) -> Storage {
        Storage {
            disk_bytes: ((1u64 << 30) as f64 / (dedup * 3.6) * (1.0 + catalog)) as u64,
            dedup: Some(dedup),
            compression: Some(3.6),
            reduction: Some(dedup * 3.6),
            api: Some(crate::api::ApiStore {
                dedup_ratio: dedup,
                compression_ratio: 3.6,
                reduction_ratio: dedup * 3.6,
                ..Default::default()
            }),
            packs: Some(crate::api::DiskStore {
                dedup_ratio: packs_dedup,
                compression_ratio: 3.6,
                reduction_ratio: packs_dedup * 3.6,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn reduction_and_ratio_agreement_goals() {
        let with = |dedup: f64, packs: f64, w: Workload| {
            let mut r = run(TargetKind::Reel, 1.0, 1.0);
            r.storage = Some(storage(dedup, packs));
            CellReport::new(1, &w, false, vec![r])
        };
        let judged = |cells: &[CellReport], start: &str| {
            goals(cells)
                .into_iter()
                .find(|g| g.goal.starts_with(start))
                .unwrap()
        };
        let good = [with(7.9, 7.9, workload(256 << 10))];
        assert_eq!(judged(&good, "reel's dedup").met, Some(true));
        assert_eq!(judged(&good, "reel's API ratios").met, Some(true));
        let poor = [with(7.7, 7.9, workload(256 << 10))];
        let dedup = judged(&poor, "reel's dedup");
        assert_eq!(dedup.met, Some(false));
        assert!(
            dedup.detail.contains("dedup on disk 7.70 of 8.00 (96."),
            "{}",
            dedup.detail
        );
        assert!(
            dedup.detail.contains("packs alone 7.70"),
            "{}",
            dedup.detail
        );
        // Good packs, but a catalog a third of their size: the disk does not show the dedup.
        let mut heavy = run(TargetKind::Reel, 1.0, 1.0);
        heavy.storage = Some(storage_with_catalog(7.9, 7.9, 0.33));
        let heavy = [CellReport::new(1, &workload(256 << 10), false, vec![heavy])];
        let dedup = judged(&heavy, "reel's dedup");
        assert_eq!(dedup.met, Some(false), "{}", dedup.detail);
        assert!(
            dedup.detail.contains("packs alone 7.90"),
            "{}",
            dedup.detail
        );
        let agreement = judged(&poor, "reel's API ratios");
        assert_eq!(agreement.met, Some(false));
        assert!(agreement.detail.contains("2.53 %"), "{}", agreement.detail);
        // Another workload (R = 1) is not what the reduction goal is stated for.
        let other = [with(
            1.0,
            1.0,
            Workload {
                redundancy: 1,
                ..workload(256 << 10)
            },
        )];
        assert_eq!(judged(&other, "reel's dedup").met, None);
        assert_eq!(judged(&other, "reel's API ratios").met, Some(true));
    }

    #[test]
    fn swept_dimensions_get_columns_labels_and_charts() {
        let w = |share: f64, record: u32| Workload {
            incompressible_share: 1.0 - share,
            redundancy: 1,
            ..workload(record)
        };
        let mut cells = Vec::new();
        for record in [64 << 10, 1 << 20] {
            for share in [0.0, 0.5, 1.0] {
                cells.push(CellReport::new(
                    1,
                    &w(share, record),
                    false,
                    vec![
                        run(TargetKind::Reel, 100.0 + share * 100.0, 1.0),
                        run(TargetKind::Tgt, 100.0, 1.0),
                    ],
                ));
            }
        }
        assert_eq!(varying(&cells), [Dim::RecordSize, Dim::CompressibleShare]);
        assert_eq!(
            cells[1].label_with(&varying(&cells)),
            "1 drive x 64K, compressible 50 %"
        );
        let (header, rows, first) = matrix_table(&Report {
            emulated: None,
            tool: String::new(),
            command: String::new(),
            started_unix: 0,
            finished_unix: 0,
            machine: Machine {
                host: reel_sysinfo::Machine {
                    nproc: 2,
                    ..Default::default()
                },
                load_average_start: String::new(),
                load_average_end: String::new(),
            },
            workload: w(0.0, 64 << 10),
            initiator: String::new(),
            goals: Vec::new(),
            cells: cells.clone(),
        });
        assert_eq!(
            header[..4],
            ["drives", "record", "compressible", "reel write MB/s"]
        );
        assert_eq!(first, 3);
        assert_eq!(rows[2][..6], ["1", "64K", "100 %", "200", "100", "2.00x"]);
        // One line per target and record size against the compressible share.
        let chart = crate::tape::chart::by_dim(&cells, Dim::CompressibleShare, true).unwrap();
        let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "reel, record 64K",
                "reel, record 1M",
                "tgt, record 64K",
                "tgt, record 1M"
            ]
        );
        assert_eq!(
            chart.series[0].points,
            [(0.0, 100.0), (1.0, 150.0), (2.0, 200.0)]
        );
        let ticks: Vec<&str> = chart.x_ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(ticks, ["0 %", "50 %", "100 %"]);
        assert!(chart.x_label.contains("compressible"));
        // Drives do not vary: no chart for them.
        assert!(crate::tape::chart::by_dim(&cells, Dim::Drives, true).is_none());
    }

    #[test]
    fn markdown_has_the_tables() {
        let cells = vec![CellReport::new(
            1,
            &workload(64 << 10),
            false,
            vec![
                run(TargetKind::Reel, 600.0, 700.0),
                run(TargetKind::Tgt, 400.0, 500.0),
            ],
        )];
        let report = Report {
            emulated: None,
            tool: "reel-bench".into(),
            command: "reel-bench".into(),
            started_unix: 0,
            finished_unix: 0,
            machine: Machine {
                host: reel_sysinfo::Machine {
                    nproc: 2,
                    cpu_model: "cpu".into(),
                    memory: "1 GiB".into(),
                    kernel: "6".into(),
                },
                load_average_start: "0".into(),
                load_average_end: "0".into(),
            },
            workload: workload(64 << 10),
            initiator: "reel_iscsi_net::Client".into(),
            goals: goals(&cells),
            cells,
        };
        let md = markdown(&report, &[("write".into(), "w.svg".into())]);
        // A saved report reads back (--from-json) and renders the same.
        let json = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(markdown(&back, &[("write".into(), "w.svg".into())]), md);
        assert!(
            md.contains("| 1 | 64K | 600 | 400 | 1.50x | 700 | 500 | 1.40x |"),
            "{md}"
        );
        assert!(md.contains("![write](w.svg)"));
        assert!(md.contains("| InitialR2T | Yes | Yes |"), "{md}");
        let text = terminal(&report);
        assert!(
            text.contains("1.50x") && text.contains("n/a: one reel drive"),
            "{text}"
        );
    }
}
