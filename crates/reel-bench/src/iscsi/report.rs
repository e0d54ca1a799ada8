//! The iSCSI benchmark's report: medians over the repetitions, the acceptance goals, the
//! terminal table and the Markdown section; the JSON is the [`Report`] itself.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::args::Cell;
use super::load::Measurement;
use super::probe::ProbeReport;
use crate::harness::table::{markdown_table, text_table};
use crate::harness::{TargetKind, median, size_label};

/// The goal at 256 KiB, queue depth 8.
pub const GOAL_RATIO: f64 = 1.5;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub seconds: f64,
    pub warmup_seconds: f64,
    pub repeat: u32,
    pub sizes: Vec<u32>,
    pub queue_depths: Vec<u32>,
    pub sessions: Vec<u32>,
    pub directions: Vec<String>,
    pub initiator: String,
    pub initiator_threads: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetReport {
    pub kind: TargetKind,
    pub addr: String,
    pub iqn: String,
    pub lun: u64,
    pub pid: Option<u32>,
    pub launched: bool,
    pub software: String,
    pub probe: ProbeReport,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    pub mb_per_s: f64,
    pub iops: f64,
    pub target_cpu_s_per_gb: Option<f64>,
    pub initiator_cpu_s_per_gb: f64,
    pub target_cores: Option<f64>,
    pub initiator_cores: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetResult {
    pub target: TargetKind,
    /// Medians over the repetitions (each figure on its own).
    pub median: Summary,
    pub runs: Vec<Measurement>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellReport {
    #[serde(flatten)]
    pub cell: Cell,
    pub results: Vec<TargetResult>,
    /// reel MB/s ÷ tgt MB/s (medians).
    pub ratio: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Acceptance {
    pub goal_ratio_256k_qd8: f64,
    /// (cell, ratio) of every 256 KiB, queue depth 8 cell.
    pub cells_256k_qd8: Vec<(String, f64)>,
    pub goal_met_256k_qd8: bool,
    pub min_ratio: f64,
    pub min_ratio_cell: String,
    /// Cells where reel was slower than tgt.
    pub below_tgt: Vec<(String, f64)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub started_unix: u64,
    pub load_average_start: String,
    pub load_average_end: String,
    pub settings: Settings,
    pub targets: Vec<TargetReport>,
    pub cells: Vec<CellReport>,
    pub acceptance: Option<Acceptance>,
}

pub fn summarize(runs: &[Measurement]) -> Summary {
    let med = |f: &dyn Fn(&Measurement) -> f64| {
        median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let opt = |f: &dyn Fn(&Measurement) -> Option<f64>| {
        runs.iter()
            .all(|m| f(m).is_some())
            .then(|| med(&|m| f(m).unwrap_or(f64::NAN)))
    };
    Summary {
        mb_per_s: med(&|m| m.mb_per_s),
        iops: med(&|m| m.iops),
        target_cpu_s_per_gb: opt(&|m| m.target_cpu_s_per_gb),
        initiator_cpu_s_per_gb: med(&|m| m.initiator_cpu_s_per_gb),
        target_cores: opt(&|m| m.target_cores),
        initiator_cores: med(&|m| m.initiator_cores),
    }
}

pub fn cell_label(c: &Cell) -> String {
    format!(
        "{} QD{} x{} {}",
        size_label(u64::from(c.size)),
        c.queue_depth,
        c.sessions,
        c.direction.name()
    )
}

impl CellReport {
    pub fn new(cell: Cell, results: Vec<TargetResult>) -> Self {
        let mb = |k: TargetKind| {
            results
                .iter()
                .find(|r| r.target == k)
                .map(|r| r.median.mb_per_s)
        };
        let ratio = mb(TargetKind::Reel)
            .zip(mb(TargetKind::Tgt))
            .filter(|(_, t)| *t > 0.0)
            .map(|(r, t)| r / t);
        CellReport {
            cell,
            results,
            ratio,
        }
    }

    pub fn result(&self, kind: TargetKind) -> Option<&Summary> {
        self.results
            .iter()
            .find(|r| r.target == kind)
            .map(|r| &r.median)
    }
}

pub fn acceptance(cells: &[CellReport]) -> Option<Acceptance> {
    let ratios: Vec<(String, f64, &Cell)> = cells
        .iter()
        .filter_map(|c| c.ratio.map(|r| (cell_label(&c.cell), r, &c.cell)))
        .collect();
    let (min_label, min) = ratios
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(l, r, _)| (l.clone(), *r))?;
    let key: Vec<(String, f64)> = ratios
        .iter()
        .filter(|(_, _, c)| c.size == 256 << 10 && c.queue_depth == 8)
        .map(|(l, r, _)| (l.clone(), *r))
        .collect();
    Some(Acceptance {
        goal_ratio_256k_qd8: GOAL_RATIO,
        goal_met_256k_qd8: !key.is_empty() && key.iter().all(|(_, r)| *r >= GOAL_RATIO),
        cells_256k_qd8: key,
        min_ratio: min,
        min_ratio_cell: min_label,
        below_tgt: ratios
            .iter()
            .filter(|(_, r, _)| *r < 1.0)
            .map(|(l, r, _)| (l.clone(), *r))
            .collect(),
    })
}

fn f0(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or("-".into(), |x| format!("{x:.0}"))
}
fn f3(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or("-".into(), |x| format!("{x:.3}"))
}

const HEADER: [&str; 13] = [
    "size",
    "qd",
    "sessions",
    "dir",
    "reel MB/s",
    "tgt MB/s",
    "reel/tgt",
    "reel CPU s/GB",
    "tgt CPU s/GB",
    "reel IOPS",
    "tgt IOPS",
    "init s/GB (reel)",
    "init s/GB (tgt)",
];

fn rows(report: &Report) -> Vec<Vec<String>> {
    report
        .cells
        .iter()
        .map(|c| {
            let r = c.result(TargetKind::Reel);
            let t = c.result(TargetKind::Tgt);
            vec![
                size_label(u64::from(c.cell.size)),
                c.cell.queue_depth.to_string(),
                c.cell.sessions.to_string(),
                c.cell.direction.name().to_string(),
                f0(r.map(|s| s.mb_per_s)),
                f0(t.map(|s| s.mb_per_s)),
                c.ratio.map_or("-".into(), |x| format!("{x:.2}x")),
                f3(r.and_then(|s| s.target_cpu_s_per_gb)),
                f3(t.and_then(|s| s.target_cpu_s_per_gb)),
                f0(r.map(|s| s.iops)),
                f0(t.map(|s| s.iops)),
                f3(r.map(|s| s.initiator_cpu_s_per_gb)),
                f3(t.map(|s| s.initiator_cpu_s_per_gb)),
            ]
        })
        .collect()
}

/// The table for the terminal (aligned columns).
pub fn terminal_table(report: &Report) -> String {
    let mut out = text_table(&HEADER, &rows(report), 4);
    if let Some(a) = &report.acceptance {
        out.push('\n');
        out.push_str(&acceptance_text(a));
    }
    out
}

fn acceptance_text(a: &Acceptance) -> String {
    let mut out = String::new();
    let key: Vec<String> = a
        .cells_256k_qd8
        .iter()
        .map(|(l, r)| format!("{l}: {r:.2}x"))
        .collect();
    let _ = writeln!(
        out,
        "- Goal reel >= {:.1}x tgt at 256K, QD 8: {} ({})",
        a.goal_ratio_256k_qd8,
        if a.cells_256k_qd8.is_empty() {
            "not measured"
        } else if a.goal_met_256k_qd8 {
            "met"
        } else {
            "MISSED"
        },
        if key.is_empty() {
            "-".into()
        } else {
            key.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "- Goal never below tgt: {} (lowest ratio {:.2}x at {}{})",
        if a.below_tgt.is_empty() {
            "met"
        } else {
            "MISSED"
        },
        a.min_ratio,
        a.min_ratio_cell,
        if a.below_tgt.is_empty() {
            String::new()
        } else {
            format!(
                "; below 1.0x in {} cell(s): {}",
                a.below_tgt.len(),
                a.below_tgt
                    .iter()
                    .map(|(l, r)| format!("{l} {r:.2}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "Yes" } else { "No" }
}

/// The Markdown report (a section; `bench/iscsi/run.sh` puts the machine above it), with
/// links to the `(title, file)` charts.
pub fn markdown(report: &Report, charts: &[(String, String)]) -> String {
    let s = &report.settings;
    let mut out = String::new();
    let _ = writeln!(out, "### reel bench iscsi\n");
    let _ = writeln!(
        out,
        "{} s measured per cell after {} s of warm-up, {} repetition(s) per cell with the targets \
         alternating (medians shown), initiator: {} on {} tokio worker thread(s). MB = 10^6 bytes. \
         Load average at start: {}; at end: {}.\n",
        s.seconds,
        s.warmup_seconds,
        s.repeat,
        s.initiator,
        s.initiator_threads,
        report.load_average_start,
        report.load_average_end
    );
    let _ = writeln!(out, "Targets:\n");
    for t in &report.targets {
        let _ = writeln!(
            out,
            "- **{}**: {} — `{}` LUN {} at {} (pid {}{})",
            t.kind.name(),
            t.software,
            t.iqn,
            t.lun,
            t.addr,
            t.pid.map_or("unknown".into(), |p| p.to_string()),
            if t.launched {
                ", started by the benchmark"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        out,
        "\nNegotiated (and observed on one 1 MiB READ and WRITE):\n"
    );
    let mut header = "| parameter |".to_string();
    let mut rule = "|---|".to_string();
    for t in &report.targets {
        let _ = write!(header, " {} |", t.kind.name());
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    type Getter = Box<dyn Fn(&ProbeReport) -> String>;
    let params: Vec<(&str, Getter)> = vec![
        (
            "MaxRecvDataSegmentLength (target's, our Data-Out size)",
            Box::new(|p| p.negotiated.target_max_recv_data_segment_length.to_string()),
        ),
        (
            "MaxRecvDataSegmentLength (initiator's)",
            Box::new(|p| {
                p.negotiated
                    .initiator_max_recv_data_segment_length
                    .to_string()
            }),
        ),
        (
            "MaxBurstLength",
            Box::new(|p| p.negotiated.max_burst_length.to_string()),
        ),
        (
            "FirstBurstLength",
            Box::new(|p| p.negotiated.first_burst_length.to_string()),
        ),
        (
            "ImmediateData",
            Box::new(|p| yes_no(p.negotiated.immediate_data).into()),
        ),
        (
            "InitialR2T",
            Box::new(|p| yes_no(p.negotiated.initial_r2t).into()),
        ),
        (
            "MaxOutstandingR2T",
            Box::new(|p| p.negotiated.max_outstanding_r2t.to_string()),
        ),
        (
            "HeaderDigest / DataDigest",
            Box::new(|p| {
                format!(
                    "{} / {}",
                    if p.negotiated.header_digest {
                        "CRC32C"
                    } else {
                        "None"
                    },
                    if p.negotiated.data_digest {
                        "CRC32C"
                    } else {
                        "None"
                    }
                )
            }),
        ),
        (
            "command window after login / after 3 commands",
            Box::new(|p| format!("{} / {}", p.window_after_login, p.window_after_commands)),
        ),
        (
            "Data-In PDUs per 1 MiB READ (largest)",
            Box::new(|p| format!("{} ({})", p.data_in_pdus_per_1m_read, p.largest_data_in)),
        ),
        (
            "status in the last Data-In",
            Box::new(|p| yes_no(p.read_status_in_data_in).into()),
        ),
        (
            "R2Ts per 1 MiB WRITE (bytes asked)",
            Box::new(|p| format!("{} ({})", p.r2ts_per_1m_write, p.r2t_bytes_per_1m_write)),
        ),
    ];
    for (name, get) in params {
        let _ = write!(out, "| {name} |");
        for t in &report.targets {
            let _ = write!(out, " {} |", get(&t.probe));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\nResults (CPU s/GB: CPU seconds, user + system, of the target process / of the initiator process per 10^9 bytes moved):\n"
    );
    out.push_str(&markdown_table(&HEADER, &rows(report), 4));
    if let Some(a) = &report.acceptance {
        let _ = writeln!(out, "\n{}", acceptance_text(a));
    }
    for (title, file) in charts {
        let _ = writeln!(out, "![{title}]({file})\n");
    }
    if report.settings.repeat > 1 {
        let _ = writeln!(out, "Spread over the repetitions (min–max MB/s):\n");
        let _ = writeln!(out, "| cell | reel | tgt |\n|---|---:|---:|");
        for c in &report.cells {
            let spread = |k: TargetKind| {
                c.results
                    .iter()
                    .find(|r| r.target == k)
                    .map_or("-".into(), |r| {
                        let v: Vec<f64> = r.runs.iter().map(|m| m.mb_per_s).collect();
                        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        format!("{lo:.0}–{hi:.0}")
                    })
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                cell_label(&c.cell),
                spread(TargetKind::Reel),
                spread(TargetKind::Tgt)
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iscsi::args::Direction;

    fn result(target: TargetKind, mb: f64) -> TargetResult {
        let m = Measurement {
            seconds: 1.0,
            commands: 1,
            bytes: 1,
            mb_per_s: mb,
            iops: 1.0,
            target_cpu_s_per_gb: Some(1.0),
            initiator_cpu_s_per_gb: 1.0,
            target_cores: Some(1.0),
            initiator_cores: 1.0,
        };
        TargetResult {
            target,
            median: summarize(std::slice::from_ref(&m)),
            runs: vec![m],
        }
    }

    #[test]
    fn acceptance_checks_the_key_cells_and_the_floor() {
        let cell = |size, queue_depth| Cell {
            size,
            queue_depth,
            sessions: 1,
            direction: Direction::Write,
        };
        let cells = vec![
            CellReport::new(
                cell(256 << 10, 8),
                vec![
                    result(TargetKind::Reel, 300.0),
                    result(TargetKind::Tgt, 150.0),
                ],
            ),
            CellReport::new(
                cell(64 << 10, 1),
                vec![
                    result(TargetKind::Reel, 90.0),
                    result(TargetKind::Tgt, 100.0),
                ],
            ),
        ];
        let a = acceptance(&cells).unwrap();
        assert!(a.goal_met_256k_qd8);
        assert_eq!(a.below_tgt.len(), 1);
        assert!((a.min_ratio - 0.9).abs() < 1e-9);
        assert_eq!(a.min_ratio_cell, "64K QD1 x1 write");
    }
}
