//! `reel-bench`: tape throughput of reel's virtual tape library next to Debian tgt's SSC
//! emulation, both driven over iSCSI by reel's own initiator ([`reel_iscsi_net::Client`]) in
//! this process, side by side in the same run.
//!
//! For every cell (drive count × record size) each target is started fresh (its data in a
//! directory of its own under `--work-dir`), every drive gets its own session and runs the
//! same sequence — load through the changer, variable block mode, write, filemark, rewind,
//! read back and verify, unload — at once with the other drives. Phases are timed as a whole
//! and sampled every second; the CPU time of the target process and of this one is read
//! around each phase. See BENCHMARKING.md ("Tape throughput").
//!
//! [`procs`] (starting and stopping `reel serve` and `tgtd`) is shared with
//! `reel-iscsi-bench`.

pub mod api;
mod args;
mod cell;
mod chart;
pub mod cpu;
mod filemode;
pub mod procs;
mod report;
mod scsi;
mod session;
pub mod soak;
mod tape;
mod targets;

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;

pub use args::{BenchArgs, Sweep, TargetKind};
pub use report::{CellReport, Dim, Flatness, Goal, PhaseResult, Report, TargetRun, flatness};
pub use scsi::{CommandFailure, describe_sense};

/// Set by Ctrl-C / SIGTERM: drives stop issuing commands and the targets are stopped.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn machine(load_average_start: String) -> report::Machine {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".into(), |(_, v)| v.trim().to_string());
    let memory = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or("unknown".into(), |kb| {
            format!("{:.1} GiB", kb as f64 / (1u64 << 20) as f64)
        });
    report::Machine {
        nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        memory,
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        load_average_start,
        load_average_end: String::new(),
    }
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Validates `args`, checks the tools and the disk, runs every cell on every target and
/// returns the report (nothing is printed or written besides progress on stderr).
pub fn measure(args: &BenchArgs) -> anyhow::Result<Report> {
    let plan = args::validate(args)?;
    targets::preflight(&plan)?;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 4);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("initiator")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let started_unix = now_unix();
    let mut machine = machine(load_average());
    let mut cells = Vec::new();
    let total = plan.cells.len();
    for (n, cell) in plan.cells.iter().enumerate() {
        let name = format!(
            "cell{}-{}x{}{}",
            n + 1,
            cell.drives,
            report::size_label(u64::from(cell.workload.record_size)),
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
                report::size_label(u64::from(cell.workload.record_size)),
                report::size_label(cell.workload.size),
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
    machine.load_average_end = load_average();
    if !plan.keep {
        // Only succeeds when empty: the cells removed their own directories.
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
        finished_unix: now_unix(),
        machine,
        workload: base,
        initiator: format!(
            "reel_iscsi_net::Client, one session per drive, {threads} tokio worker threads"
        ),
        goals: report::goals(&cells),
        cells,
    })
}

fn running_log_hint(running: &targets::Running) -> String {
    running
        .log_tail()
        .map(|t| format!("; the target's log ends:\n{t}"))
        .unwrap_or_default()
}

/// Writes the charts into `dir`: write and read throughput against every swept dimension,
/// and the flat run over time; (title, file name) of each.
fn write_charts(report: &Report, dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut charts = Vec::new();
    for dim in Dim::ALL {
        for (write, word) in [(true, "write"), (false, "read")] {
            if let Some(chart) = chart::by_dim(&report.cells, dim, write) {
                charts.push((format!("throughput-{word}-vs-{}.svg", dim.slug()), chart));
            }
        }
    }
    for (write, word) in [(true, "write"), (false, "read")] {
        if let Some(chart) = chart::over_time(&report.cells, write) {
            charts.push((format!("flat-{word}.svg"), chart));
        }
    }
    let mut out = Vec::new();
    for (file, chart) in charts {
        let path = dir.join(&file);
        fs::write(&path, chart.render()).with_context(|| format!("writing {}", path.display()))?;
        out.push((chart.title.clone(), file));
    }
    Ok(out)
}

/// `reel-bench` / `reel bench`: measure, print the tables, write what was asked for.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let report = match &args.from_json {
        Some(path) => {
            let text =
                fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let mut report = serde_json::from_str::<Report>(&text)
                .with_context(|| format!("{}: not a reel-bench report", path.display()))?;
            report.fill_workloads();
            // Judged again: the goals may have changed since the run.
            report.goals = report::goals(&report.cells);
            report
        }
        None => {
            let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
            measure(&args)?
        }
    };
    println!("{}", report::terminal(&report));
    let mut charts = Vec::new();
    if let Some(dir) = &args.charts {
        charts = write_charts(&report, dir)?;
        // Link them relative to the Markdown file when it is in or above the chart directory.
        if let Some(md) = &args.markdown {
            let base = md.parent().unwrap_or(Path::new(""));
            for (_, file) in &mut charts {
                let full = dir.join(&*file);
                *file = full
                    .strip_prefix(base)
                    .unwrap_or(&full)
                    .to_string_lossy()
                    .into_owned();
            }
        }
    }
    if let Some(path) = args.json.as_ref().filter(|_| args.from_json.is_none()) {
        let text = serde_json::to_string_pretty(&report)?;
        fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.markdown {
        fs::write(path, report::markdown(&report, &charts))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
