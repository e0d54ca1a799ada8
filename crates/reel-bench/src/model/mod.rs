//! `reel model …`: the physical-drive model (`reel-drivemodel`) from the command line — the
//! catalog, one simulated job, a sweep over one parameter (table and SVG chart), and the
//! planner. Nothing is measured here: every number comes from the model and its sourced
//! parameters (docs/design/drive-model.md).
//!
//! Record sizes and filemark intervals take binary units like every other reel-bench flag
//! (`256K`, `1MiB`, `1G`); data volumes and rates take decimal units as vendors state them
//! (`40TB`, `80MB/s`; `MiB`/`GiB`/`TiB` stay binary).

mod charts;

use anyhow::{Result, anyhow, bail};
use reel_drivemodel::{
    Compressibility, DriveSpec, PlanRequest, Report, Source, Workload, drive, drives, plan, robot,
    simulate,
};

use crate::harness::{self, size_label, table::text_table};

pub use charts::{curve_charts, curve_line_charts, sweep_charts};

/// A source rate from the command line: bytes/s, or None for unlimited.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate(pub Option<f64>);

/// `reel model …`.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub command: ModelCommand,
}

/// One `reel model` action.
#[derive(clap::Subcommand, Debug)]
pub enum ModelCommand {
    /// The drive and robot catalog.
    Drives,
    /// Simulates one job on one drive and prints the report.
    Simulate(JobArgs),
    /// Simulates a job for each value of one parameter: a table, and optionally SVG charts.
    Sweep(SweepArgs),
    /// Plans a job on several drives: time, cartridges, record size, filemark policy.
    Plan(PlanArgs),
}

/// A job on one drive.
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// Drive model id (see `reel model drives`).
    #[arg(long, default_value = "lto5-fh", value_parser = parse_drive)]
    pub drive: &'static DriveSpec,
    /// Source rate (`80MB/s`, `1.2GB/s`) or `unlimited`.
    #[arg(long, default_value = "unlimited", value_parser = parse_source_rate)]
    pub source_rate: Rate,
    /// Host bytes per WRITE (binary units).
    #[arg(long, default_value = "256K", value_parser = parse_record)]
    pub record_size: u64,
    /// Share of the data that compresses (0..=1).
    #[arg(long, default_value_t = 0.0, value_parser = parse_share)]
    pub compressible: f64,
    /// Compression ratio of the compressible share.
    #[arg(long, default_value_t = 2.0)]
    pub ratio: f64,
    /// Drive compression off (overrides --compressible/--ratio).
    #[arg(long)]
    pub no_compression: bool,
    /// Host bytes between filemarks (binary units); none by default.
    #[arg(long, value_parser = parse_record)]
    pub filemark_every: Option<u64>,
    /// Filemarks with IMMED (no flush, no stop).
    #[arg(long)]
    pub immed: bool,
    /// Record buffers between the source and the drive.
    #[arg(long, default_value_t = 2)]
    pub queue_depth: u32,
    /// Host bytes in the job (decimal units; `GiB` binary).
    #[arg(long, default_value = "100GiB", value_parser = parse_amount)]
    pub total: u64,
}

impl JobArgs {
    fn compressibility(&self) -> Compressibility {
        if self.no_compression {
            Compressibility::OFF
        } else {
            Compressibility {
                compressible_share: self.compressible,
                ratio: self.ratio,
            }
        }
    }

    /// The workload these flags describe.
    pub fn workload(&self) -> Workload {
        Workload {
            source: self.source_rate.0.map_or(Source::Unlimited, Source::Rate),
            record_size: self.record_size,
            compressibility: self.compressibility(),
            filemark_every: self.filemark_every,
            immed: self.immed,
            queue_depth: self.queue_depth,
            total_bytes: self.total,
        }
    }
}

/// The parameter a sweep varies.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vary {
    /// 16 KiB … 4 MiB.
    RecordSize,
    /// 0 … 1 in steps of 0.1.
    Compressible,
    /// 256 MiB … 64 GiB, and none.
    FilemarkInterval,
}

/// `reel model sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The parameter to vary (the others come from the job flags).
    #[arg(long, value_enum)]
    pub vary: Vary,
    /// Write the throughput chart here (and the back-hitch chart beside it, `-backhitches.svg`).
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
}

/// `reel model plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Host bytes to write (decimal units: `40TB`).
    #[arg(long, value_parser = parse_amount)]
    pub data: u64,
    /// Drives writing in parallel.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub drives: u32,
    /// Drive model id.
    #[arg(long, default_value = "lto8-hh", value_parser = parse_drive)]
    pub drive: &'static DriveSpec,
    /// Aggregate source rate over all drives (`300MB/s`) or `unlimited`.
    #[arg(long, default_value = "unlimited", value_parser = parse_source_rate)]
    pub source_rate: Rate,
    /// Share of the data that compresses (0..=1).
    #[arg(long, default_value_t = 0.0, value_parser = parse_share)]
    pub compressible: f64,
    /// Compression ratio of the compressible share.
    #[arg(long, default_value_t = 2.0)]
    pub ratio: f64,
    /// Host bytes between filemarks (the application's file boundaries, binary units).
    #[arg(long, value_parser = parse_record)]
    pub filemark_every: Option<u64>,
    /// Robot id for cartridge changes (autoloader, midrange, enterprise).
    #[arg(long, default_value = "midrange")]
    pub robot: String,
}

/// Runs one `reel model` command, printing to stdout.
pub fn run(args: ModelArgs) -> Result<()> {
    match args.command {
        ModelCommand::Drives => print!("{}", catalog_text()),
        ModelCommand::Simulate(job) => {
            let report = simulate(job.drive, &job.workload());
            print!("{}", report_text(job.drive, &job.workload(), &report));
        }
        ModelCommand::Sweep(sweep) => {
            let rows = sweep_rows(&sweep.job, sweep.vary);
            print!("{}", sweep_text(&sweep.job, sweep.vary, &rows));
            if let Some(path) = &sweep.svg {
                let (throughput, hitches) = sweep_charts(sweep.job.drive, sweep.vary, &rows);
                std::fs::write(path, throughput)
                    .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
                let stem = path.with_extension("");
                let hitch_path = stem.with_file_name(format!(
                    "{}-backhitches.svg",
                    stem.file_name().and_then(|s| s.to_str()).unwrap_or("sweep")
                ));
                std::fs::write(&hitch_path, hitches)
                    .map_err(|e| anyhow!("writing {}: {e}", hitch_path.display()))?;
                println!("charts: {} {}", path.display(), hitch_path.display());
            }
        }
        ModelCommand::Plan(p) => {
            let robot = robot(&p.robot).ok_or_else(|| anyhow!("unknown robot {:?}", p.robot))?;
            let request = PlanRequest {
                data_bytes: p.data,
                drives: p.drives,
                drive: p.drive,
                source_rate: p.source_rate.0,
                compressibility: Compressibility {
                    compressible_share: p.compressible,
                    ratio: p.ratio,
                },
                filemark_every: p.filemark_every,
                record_sizes: Vec::new(),
                robot: Some(robot),
            };
            print!("{}", plan_text(&request));
        }
    }
    Ok(())
}

fn mb(rate: f64) -> String {
    format!("{:.1}", rate / 1e6)
}

fn hours(secs: f64) -> String {
    if secs >= 3600.0 {
        format!("{:.1} h", secs / 3600.0)
    } else {
        format!("{secs:.1} s")
    }
}

/// `reel model drives`.
pub fn catalog_text() -> String {
    let rows: Vec<Vec<String>> = drives()
        .iter()
        .map(|d| {
            let steps: Vec<String> = d
                .speed_steps
                .iter()
                .map(|s| format!("{:.0}", s / 1e6))
                .collect();
            vec![
                d.id.to_string(),
                d.name.to_string(),
                format!("{:.0}", d.native_rate / 1e6),
                steps.join(" "),
                size_label(d.buffer_bytes),
                format!("{:.1}", d.reposition_s),
                format!("{:.0} GB", d.native_capacity as f64 / 1e9),
            ]
        })
        .collect();
    let mut out = text_table(
        &[
            "id",
            "name",
            "native MB/s",
            "speed steps MB/s",
            "buffer",
            "back-hitch s",
            "capacity",
        ],
        &rows,
        2,
    );
    out.push('\n');
    let robots: Vec<Vec<String>> = reel_drivemodel::robots()
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.name.to_string(),
                format!("{:.1}", r.move_time.as_secs_f64()),
            ]
        })
        .collect();
    out.push_str(&text_table(&["robot", "name", "move s"], &robots, 2));
    out
}

/// `reel model simulate`'s report.
pub fn report_text(spec: &DriveSpec, w: &Workload, r: &Report) -> String {
    let source = match w.source {
        Source::Unlimited => "unlimited".to_string(),
        Source::Rate(rate) => format!("{} MB/s", mb(rate)),
        Source::Agents {
            count,
            buffer_bytes,
            refill_rate,
        } => {
            format!(
                "{count} agents × {} at {} MB/s",
                size_label(buffer_bytes),
                mb(refill_rate)
            )
        }
    };
    let rows = vec![
        vec!["drive".into(), format!("{} ({})", spec.name, spec.id)],
        vec!["source".into(), source],
        vec!["record size".into(), size_label(w.record_size)],
        vec![
            "compression".into(),
            if w.compressibility.is_off() {
                "off".into()
            } else {
                format!(
                    "{:.0} % at {:.2}:1 (overall {:.2}:1)",
                    w.compressibility.compressible_share * 100.0,
                    w.compressibility.ratio,
                    w.compressibility.effective_ratio()
                )
            },
        ],
        vec![
            "filemarks".into(),
            match w.filemark_every {
                Some(f) => format!(
                    "every {}{}",
                    size_label(f),
                    if w.immed { ", IMMED" } else { "" }
                ),
                None => "none".into(),
            },
        ],
        vec![
            "host bytes".into(),
            format!("{:.2} GB", w.total_bytes as f64 / 1e9),
        ],
        vec!["elapsed".into(), hours(r.elapsed.as_secs_f64())],
        vec!["throughput".into(), format!("{} MB/s", mb(r.throughput))],
        vec![
            "tape speed (avg while streaming)".into(),
            format!("{} MB/s", mb(r.tape_speed)),
        ],
        vec![
            "back-hitches".into(),
            format!(
                "{} ({} from filemarks/final flush)",
                r.back_hitches, r.sync_back_hitches
            ),
        ],
        vec!["repositioning".into(), hours(r.repositioning.as_secs_f64())],
        vec![
            "native bytes".into(),
            format!("{:.2} GB", r.native_bytes as f64 / 1e9),
        ],
        vec![
            "capacity used".into(),
            format!("{:.1} %", r.capacity_used * 100.0),
        ],
        vec![
            "streaming".into(),
            if r.streaming {
                "yes".into()
            } else {
                "no: the source does not keep up".into()
            },
        ],
    ];
    text_table(&["", ""], &rows, 2)
}

/// One sweep point: the varied value's label, its x coordinate, and the report.
#[derive(Clone, Debug)]
pub struct SweepRow {
    pub label: String,
    pub x: f64,
    pub report: Report,
}

/// The values a sweep runs.
pub fn sweep_rows(job: &JobArgs, vary: Vary) -> Vec<SweepRow> {
    let base = job.workload();
    let mut rows = Vec::new();
    match vary {
        Vary::RecordSize => {
            for (i, size) in (14..=22).map(|p| 1u64 << p).enumerate() {
                let w = Workload {
                    record_size: size,
                    ..base.clone()
                };
                rows.push(SweepRow {
                    label: size_label(size),
                    x: i as f64,
                    report: simulate(job.drive, &w),
                });
            }
        }
        Vary::Compressible => {
            for i in 0..=10 {
                let share = f64::from(i) / 10.0;
                let w = Workload {
                    compressibility: Compressibility {
                        compressible_share: share,
                        ratio: job.ratio,
                    },
                    ..base.clone()
                };
                rows.push(SweepRow {
                    label: format!("{share:.1}"),
                    x: share,
                    report: simulate(job.drive, &w),
                });
            }
        }
        Vary::FilemarkInterval => {
            let intervals: Vec<Option<u64>> = (28..=36)
                .step_by(2)
                .map(|p| Some(1u64 << p))
                .chain(std::iter::once(None))
                .collect();
            for (i, every) in intervals.into_iter().enumerate() {
                let w = Workload {
                    filemark_every: every,
                    ..base.clone()
                };
                let label = every.map_or_else(|| "none".to_string(), size_label);
                rows.push(SweepRow {
                    label,
                    x: i as f64,
                    report: simulate(job.drive, &w),
                });
            }
        }
    }
    rows
}

fn sweep_text(job: &JobArgs, vary: Vary, rows: &[SweepRow]) -> String {
    let name = match vary {
        Vary::RecordSize => "record size",
        Vary::Compressible => "compressible",
        Vary::FilemarkInterval => "filemark every",
    };
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                mb(r.report.throughput),
                mb(r.report.tape_speed),
                r.report.back_hitches.to_string(),
                format!("{:.1}", r.report.repositioning.as_secs_f64()),
                format!("{:.2}", r.report.capacity_used * 100.0),
                if r.report.streaming { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    format!(
        "{} ({}), {} host bytes per point\n{}",
        job.drive.name,
        job.drive.id,
        size_label(job.total),
        text_table(
            &[
                name,
                "MB/s",
                "tape MB/s",
                "back-hitches",
                "repositioning s",
                "capacity %",
                "streaming"
            ],
            &table,
            1,
        )
    )
}

/// `reel model plan`'s answer.
pub fn plan_text(request: &PlanRequest) -> String {
    let p = plan(request);
    let mut out = format!(
        "Plan: {:.2} TB on {} × {} ({})\n",
        request.data_bytes as f64 / 1e12,
        request.drives,
        request.drive.name,
        request.drive.id
    );
    out.push_str(&format!(
        "  record size {}, filemarks {}\n  elapsed {} (cartridge changes {} per drive), {} MB/s aggregate\n  cartridges {}; streaming: {}\n",
        size_label(p.record_size),
        if p.immed { "with IMMED" } else { "without IMMED" },
        hours(p.elapsed.as_secs_f64()),
        hours(p.change_time.as_secs_f64()),
        mb(p.throughput),
        p.cartridges,
        if p.streaming { "yes" } else { "no" }
    ));
    out.push_str("Why:\n");
    for r in &p.reasons {
        out.push_str(&format!("  - {r}\n"));
    }
    let rows: Vec<Vec<String>> = p
        .candidates
        .iter()
        .map(|c| {
            vec![
                size_label(c.record_size),
                if c.immed { "yes" } else { "no" }.to_string(),
                mb(c.report.throughput),
                c.report.back_hitches.to_string(),
                if c.report.streaming { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    out.push_str("Candidates (one drive, sampled):\n");
    out.push_str(&text_table(
        &["record", "IMMED", "MB/s", "back-hitches", "streaming"],
        &rows,
        2,
    ));
    out
}

fn parse_drive(s: &str) -> Result<&'static DriveSpec> {
    drive(s).ok_or_else(|| {
        let ids: Vec<&str> = drives().iter().map(|d| d.id).collect();
        anyhow!("unknown drive {s:?} (one of: {})", ids.join(", "))
    })
}

fn parse_record(s: &str) -> Result<u64> {
    harness::parse_size("size", s)
}

fn parse_share(s: &str) -> Result<f64> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| anyhow!("{s:?} is not a number"))?;
    if !(0.0..=1.0).contains(&v) {
        bail!("{s:?} is not within 0..=1");
    }
    Ok(v)
}

/// A byte amount: `40TB`, `1.5GB`, `100GiB`, `4096`. Decimal for K/M/G/T(B), binary for
/// KiB/MiB/GiB/TiB.
pub fn parse_amount(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| anyhow!("{s:?}: expected a number with an optional unit"))?;
    let unit = unit.trim();
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "p" | "pb" => 1e15,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        _ => bail!("{s:?}: unknown unit {unit:?}"),
    };
    let bytes = value * scale;
    if !(1.0..1.8e19).contains(&bytes) {
        bail!("{s:?} is out of range");
    }
    Ok(bytes.round() as u64)
}

fn parse_source_rate(s: &str) -> Result<Rate> {
    parse_rate(s).map(Rate)
}

/// A rate: `80MB/s`, `1.2GB/s`, `500MiB/s`, or `unlimited` (None).
pub fn parse_rate(s: &str) -> Result<Option<f64>> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("inf") {
        return Ok(None);
    }
    let t = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("ps"))
        .unwrap_or(t);
    Ok(Some(parse_amount(t)? as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        model: ModelArgs,
    }

    #[test]
    fn amounts_and_rates_parse() {
        assert_eq!(parse_amount("40TB").unwrap(), 40_000_000_000_000);
        assert_eq!(parse_amount("100GiB").unwrap(), 100 << 30);
        assert_eq!(parse_amount("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_amount("4096").unwrap(), 4096);
        assert!(parse_amount("0").is_err());
        assert!(parse_amount("12QB").is_err());
        assert!(parse_amount("lots").is_err());
        assert_eq!(parse_rate("80MB/s").unwrap(), Some(80e6));
        assert_eq!(parse_rate("1.2GB/s").unwrap(), Some(1.2e9));
        assert_eq!(parse_rate("unlimited").unwrap(), None);
        assert!(parse_rate("fast").is_err());
        assert!(parse_share("1.5").is_err());
        assert!(
            parse_drive("lto11")
                .unwrap_err()
                .to_string()
                .contains("lto5-fh")
        );
    }

    #[test]
    fn command_lines_parse() {
        let cli = Cli::try_parse_from([
            "model",
            "simulate",
            "--drive",
            "lto5-fh",
            "--source-rate",
            "80MB/s",
            "--record-size",
            "256KiB",
            "--compressible",
            "0.5",
            "--ratio",
            "2",
            "--filemark-every",
            "1GiB",
            "--immed",
            "--total",
            "100GiB",
        ])
        .unwrap();
        let ModelCommand::Simulate(job) = cli.model.command else {
            panic!("simulate")
        };
        let w = job.workload();
        assert_eq!(w.source, Source::Rate(80e6));
        assert_eq!(w.record_size, 256 << 10);
        assert_eq!(w.filemark_every, Some(1 << 30));
        assert!(w.immed);
        assert_eq!(w.total_bytes, 100 << 30);
        assert_eq!(
            w.compressibility,
            Compressibility {
                compressible_share: 0.5,
                ratio: 2.0
            }
        );

        let cli = Cli::try_parse_from([
            "model",
            "plan",
            "--data",
            "40TB",
            "--drives",
            "2",
            "--drive",
            "lto8-hh",
            "--source-rate",
            "300MB/s",
            "--compressible",
            "0.6",
        ])
        .unwrap();
        let ModelCommand::Plan(p) = cli.model.command else {
            panic!("plan")
        };
        assert_eq!(p.data, 40_000_000_000_000);
        assert_eq!(p.drive.id, "lto8-hh");
        assert_eq!(p.source_rate, Rate(Some(300e6)));

        let cli = Cli::try_parse_from([
            "model",
            "sweep",
            "--drive",
            "lto5-hh",
            "--vary",
            "record-size",
        ])
        .unwrap();
        let ModelCommand::Sweep(s) = cli.model.command else {
            panic!("sweep")
        };
        assert_eq!(s.vary, Vary::RecordSize);
        assert!(Cli::try_parse_from(["model", "sweep", "--vary", "colour"]).is_err());
        assert!(Cli::try_parse_from(["model", "simulate", "--drive", "nope"]).is_err());
    }

    #[test]
    fn texts_carry_the_numbers() {
        let catalog = catalog_text();
        assert!(
            catalog.contains("lto5-fh")
                && catalog.contains("256M")
                && catalog.contains("enterprise")
        );
        let spec = drive("lto5-fh").unwrap();
        let w = Workload {
            source: Source::Rate(20e6),
            record_size: 256 << 10,
            compressibility: Compressibility::OFF,
            filemark_every: None,
            immed: false,
            queue_depth: 2,
            total_bytes: 4 << 30,
        };
        let text = report_text(spec, &w, &simulate(spec, &w));
        assert!(text.contains("no: the source does not keep up"), "{text}");
        let request = PlanRequest {
            data_bytes: 10_000_000_000_000,
            drives: 2,
            drive: drive("lto8-hh").unwrap(),
            source_rate: Some(300e6),
            compressibility: Compressibility {
                compressible_share: 0.6,
                ratio: 2.0,
            },
            filemark_every: None,
            record_sizes: Vec::new(),
            robot: robot("midrange"),
        };
        let text = plan_text(&request);
        assert!(
            text.contains("Why:") && text.contains("below its slowest step"),
            "{text}"
        );
    }

    #[test]
    fn sweeps_and_charts() {
        let job = JobArgs {
            drive: drive("lto4-hh").unwrap(),
            source_rate: Rate(None),
            record_size: 256 << 10,
            compressible: 0.5,
            ratio: 2.0,
            no_compression: false,
            filemark_every: Some(1 << 30),
            immed: false,
            queue_depth: 2,
            total: 2 << 30,
        };
        let rows = sweep_rows(&job, Vary::FilemarkInterval);
        assert_eq!(rows.len(), 6);
        assert_eq!(rows.last().unwrap().label, "none");
        // Fewer filemarks, fewer back-hitches, more throughput.
        assert!(rows[0].report.back_hitches > rows[5].report.back_hitches);
        assert!(rows[0].report.throughput < rows[5].report.throughput);
        let rows = sweep_rows(
            &JobArgs {
                filemark_every: None,
                ..job.clone()
            },
            Vary::Compressible,
        );
        assert_eq!(rows.len(), 11);
        assert!(rows[10].report.throughput > 1.9 * rows[0].report.throughput);
        let (a, b) = sweep_charts(job.drive, Vary::Compressible, &rows);
        assert!(a.starts_with("<svg") && b.starts_with("<svg"));
        let (by_size, by_share) = curve_charts(drive("lto3-hh").unwrap());
        assert!(by_size.contains("<svg") && by_size.contains("record size"));
        assert!(by_share.contains("<svg") && by_share.contains("compressible"));
    }
}
