//! `reel bench iscsi`: iSCSI data-path throughput of reel's target next to Debian's tgt.
//!
//! Both targets serve a null device (writes discarded, reads return zeros), each runs as its
//! own process on loopback, and both are driven by the same initiator — reel's
//! [`reel_iscsi_net::Client`] in this process — over the matrix of transfer sizes, queue
//! depths, session counts and directions. Every cell runs on each target in turn (order
//! alternating between repetitions) so that machine noise falls on both alike. See
//! BENCHMARKING.md ("iSCSI data path") for what each column means.

mod args;
mod chart;
mod load;
mod probe;
mod report;
mod targets;

use anyhow::Context;

use crate::harness::{self, TargetKind};

pub use args::IscsiArgs;
use args::Plan;
use load::Endpoint;
use report::{CellReport, Report, Settings, TargetReport, TargetResult};

/// `reel bench iscsi`: measure (or read `--from-json`), print the table, write what was asked
/// for.
pub fn run(args: IscsiArgs) -> anyhow::Result<()> {
    let report = match args.report.from_json::<Report>("reel bench iscsi")? {
        Some(report) => report,
        None => {
            let plan = args::validate(args.clone())?;
            targets::preflight(&plan)?;
            harness::on_interrupt();
            // `measure` owns the target processes: they are stopped when it returns.
            measure(&plan)?
        }
    };
    println!("{}", report::terminal_table(&report));
    args.report
        .write(&report, &chart::charts(&report), |links| {
            report::markdown(&report, links)
        })?;
    Ok(())
}

fn measure(plan: &Plan) -> anyhow::Result<Report> {
    let threads = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(2)
        .min(4);
    let runtime = harness::runtime("initiator", threads)?;
    let started_unix = harness::now_unix();
    let load_average_start = reel_sysinfo::load_average();
    let running = targets::start_all(plan)?;

    // Probe each target: negotiated parameters, PDU sizes.
    let mut endpoints = Vec::new();
    let mut target_reports = Vec::new();
    for t in &running {
        let iqn = match &t.iqn {
            Some(iqn) => iqn.clone(),
            None => runtime.block_on(load::discover(t.addr))?,
        };
        let probe = runtime.block_on(probe::probe(t.addr, &iqn, t.lun))?;
        let n = &probe.negotiated;
        eprintln!(
            "iscsi bench: {}: MaxRecvDataSegmentLength {} (target) / {} (initiator), MaxBurstLength {}, \
             FirstBurstLength {}, ImmediateData {}, InitialR2T {}; 1 MiB READ in {} Data-In PDUs, \
             1 MiB WRITE with {} R2T(s)",
            t.kind.name(),
            n.target_max_recv_data_segment_length,
            n.initiator_max_recv_data_segment_length,
            n.max_burst_length,
            n.first_burst_length,
            n.immediate_data,
            n.initial_r2t,
            probe.data_in_pdus_per_1m_read,
            probe.r2ts_per_1m_write
        );
        endpoints.push((
            t.kind,
            Endpoint {
                addr: t.addr,
                iqn: iqn.clone(),
                lun: t.lun,
                pid: t.pid,
            },
        ));
        target_reports.push(TargetReport {
            kind: t.kind,
            addr: t.addr.to_string(),
            iqn,
            lun: t.lun,
            pid: t.pid,
            launched: t.launched,
            software: t.software.clone(),
            probe,
        });
    }

    let cells = plan.cells();
    let total = cells.len() * plan.repeat as usize * endpoints.len();
    let mut done = 0;
    let mut cell_reports = Vec::new();
    for cell in cells {
        let mut runs: Vec<(TargetKind, Vec<load::Measurement>)> =
            endpoints.iter().map(|(k, _)| (*k, Vec::new())).collect();
        for rep in 0..plan.repeat {
            // Alternate which target goes first so drift over time hits both alike.
            let mut order: Vec<usize> = (0..endpoints.len()).collect();
            if rep % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let (kind, ep) = &endpoints[i];
                done += 1;
                let m = runtime
                    .block_on(load::run_cell(ep, cell, plan.warmup, plan.measure))
                    .with_context(|| format!("{} {}", kind.name(), report::cell_label(&cell)))?;
                eprintln!(
                    "iscsi bench [{done}/{total}] {:<5} {:<22} {:>7.0} MB/s {:>7.0} IOPS  target {} CPU s/GB ({} cores)  initiator {:.3} CPU s/GB",
                    kind.name(),
                    report::cell_label(&cell),
                    m.mb_per_s,
                    m.iops,
                    m.target_cpu_s_per_gb
                        .map_or("-".into(), |v| format!("{v:.3}")),
                    m.target_cores.map_or("-".into(), |v| format!("{v:.2}")),
                    m.initiator_cpu_s_per_gb,
                );
                runs[i].1.push(m);
            }
        }
        let results = runs
            .into_iter()
            .map(|(target, runs)| TargetResult {
                target,
                median: report::summarize(&runs),
                runs,
            })
            .collect();
        cell_reports.push(CellReport::new(cell, results));
    }

    let report = Report {
        tool: format!("reel bench iscsi {}", env!("CARGO_PKG_VERSION")),
        started_unix,
        load_average_start,
        load_average_end: reel_sysinfo::load_average(),
        settings: Settings {
            seconds: plan.measure.as_secs_f64(),
            warmup_seconds: plan.warmup.as_secs_f64(),
            repeat: plan.repeat,
            sizes: plan.sizes.clone(),
            queue_depths: plan.queue_depths.clone(),
            sessions: plan.sessions.clone(),
            directions: plan.directions.iter().map(|d| d.name().into()).collect(),
            initiator:
                "reel_iscsi_net::Client (Data-In payloads discarded, one shared Data-Out buffer)"
                    .into(),
            initiator_threads: threads,
        },
        targets: target_reports,
        acceptance: report::acceptance(&cell_reports),
        cells: cell_reports,
    };
    // Stop the targets before writing (their shutdown is not measured anyway).
    drop(running);
    Ok(report)
}
