//! `reel bench tape`: tape throughput of reel's virtual tape library next to Debian tgt's SSC
//! emulation, both driven over iSCSI by reel's own initiator ([`reel_iscsi_net::Client`]) in
//! this process, side by side in the same run.
//!
//! For every cell (drive count × record size) each target is started fresh (its data in a
//! directory of its own under `--work-dir`), every drive gets its own session and runs the
//! same sequence — load through the changer, variable block mode, write, filemark, rewind,
//! read back and verify, unload — at once with the other drives. Phases are timed as a whole
//! and sampled every second; the CPU time of the target process and of this one is read
//! around each phase. See BENCHMARKING.md ("Tape throughput").

mod args;
mod cell;
mod chart;
mod filemode;
pub(crate) mod pipeline;
mod report;
pub(crate) mod targets;

use std::fs;

use anyhow::Context;

use crate::harness::{self, Machine, size_label};

pub use args::{Sweep, TapeArgs, Workload};
pub use report::{CellReport, Dim, Flatness, Goal, PhaseResult, Report, TargetRun, flatness};

/// Validates `args`, checks the tools and the disk, runs every cell on every target and
/// returns the report (nothing is printed or written besides progress on stderr).
pub fn measure(args: &TapeArgs) -> anyhow::Result<Report> {
    let plan = args::validate(args)?;
    let _work_lock = targets::preflight(&plan)?;
    let threads = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(2)
        .clamp(2, 4);
    let runtime = harness::runtime("initiator", threads)?;
    let started_unix = harness::now_unix();
    let mut machine = Machine::at_start();
    let mut cells = Vec::new();
    let total = plan.cells.len();
    for (n, cell) in plan.cells.iter().enumerate() {
        let name = format!(
            "cell{}-{}x{}{}",
            n + 1,
            cell.drives,
            size_label(u64::from(cell.workload.record_size)),
            if cell.flat { "-flat" } else { "" }
        );
        // Alternate which target goes first so drift over time hits both alike.
        let mut order: Vec<_> = plan.targets.iter().collect();
        if n % 2 == 1 {
            order.reverse();
        }
        let mut runs = Vec::new();
        for t in order {
            eprintln!(
                "reel-bench [{}/{total}] {}: {} drive(s), {} records, {} per drive{}",
                n + 1,
                t.kind.name(),
                cell.drives,
                size_label(u64::from(cell.workload.record_size)),
                size_label(cell.workload.size),
                if cell.flat {
                    " (flat-throughput run)"
                } else {
                    ""
                }
            );
            let running = targets::start(&plan, t, &name, cell.drives, cell.workload.size)
                .with_context(|| format!("starting {}", t.kind.name()))?;
            let result = runtime.block_on(cell::run(&running, cell, plan.command_timeout));
            let mut run = match result {
                Ok(run) => run,
                Err(e) => {
                    let log = running_log_hint(&running);
                    drop(running);
                    return Err(e.context(format!(
                        "{} with {} drive(s), {}-byte records{log}",
                        t.kind.name(),
                        cell.drives,
                        cell.workload.record_size
                    )));
                }
            };
            let logical = cell.workload.size * u64::from(cell.drives);
            run.storage = running
                .finish(logical)
                .with_context(|| format!("stopping {}", t.kind.name()))?;
            runs.push(run);
        }
        cells.push(CellReport::new(
            cell.drives,
            &cell.workload,
            cell.flat,
            runs,
        ));
    }
    machine.finish();
    if !plan.keep {
        // Only succeeds when empty: the cells removed their own directories. The lock file
        // goes first; the lock itself is held until this function returns.
        let _ = fs::remove_file(plan.work_dir.join(targets::WORK_LOCK));
        let _ = fs::remove_dir(&plan.work_dir);
    }
    let base = plan
        .cells
        .first()
        .map(|c| c.workload.clone())
        .context("no cells")?;
    Ok(Report {
        tool: format!("reel-bench {}", env!("CARGO_PKG_VERSION")),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_unix,
        finished_unix: harness::now_unix(),
        machine,
        workload: base,
        initiator: format!(
            "reel_iscsi_net::Client, one session per drive, {threads} tokio worker threads"
        ),
        goals: report::goals(&cells),
        cells,
        emulated: plan.emulate.map(|spec| spec.id.to_string()),
    })
}

fn running_log_hint(running: &targets::Running) -> String {
    running
        .log_tail()
        .map(|t| format!("; the target's log ends:\n{t}"))
        .unwrap_or_default()
}

/// The charts of a report: write and read throughput against every swept dimension, and the
/// flat run over time; (file name, chart) of each.
fn charts(report: &Report) -> Vec<(String, harness::chart::LineChart)> {
    let mut out = Vec::new();
    for dim in Dim::ALL {
        for (write, word) in [(true, "write"), (false, "read")] {
            if let Some(chart) = chart::by_dim(&report.cells, dim, write) {
                out.push((format!("throughput-{word}-vs-{}.svg", dim.slug()), chart));
            }
        }
    }
    for (write, word) in [(true, "write"), (false, "read")] {
        if let Some(chart) = chart::over_time(&report.cells, write) {
            out.push((format!("flat-{word}.svg"), chart));
        }
    }
    // Against an emulated library: what the physical drive model predicts for its drive.
    if let Some(spec) = report.emulated.as_deref().and_then(reel_drivemodel::drive) {
        let (by_size, by_share) = crate::model::curve_line_charts(spec);
        out.push((format!("model-{}-record-size.svg", spec.id), by_size));
        out.push((format!("model-{}-compressible.svg", spec.id), by_share));
    }
    out
}

/// `reel bench tape`: measure (or read `--from-json`), print the tables, write what was asked
/// for.
pub fn run(args: TapeArgs) -> anyhow::Result<()> {
    let report = match args.report.from_json::<Report>("reel bench tape")? {
        Some(mut report) => {
            report.fill_workloads();
            // Judged again: the goals may have changed since the run.
            report.goals = report::goals(&report.cells);
            report
        }
        None => {
            harness::on_interrupt();
            measure(&args)?
        }
    };
    println!("{}", report::terminal(&report));
    args.report.write(&report, &charts(&report), |links| {
        report::markdown(&report, links)
    })?;
    Ok(())
}
