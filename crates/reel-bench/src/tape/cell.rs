//! One cell on one target: sessions, inspection, then the phases with every drive at once
//! (load → write → rewind → read → finish), each phase timed as a whole and sampled every
//! second, with the CPU time of the target process and of this one.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};

use crate::api::{ReelApi, ReelFigures};
use crate::harness::TargetKind;
use crate::session::{self, Drive, DrivePlan, NegotiatedReport};
use crate::tape::args::{Cell, Workload};
use crate::tape::filemode;
use crate::tape::pipeline::{self as tape, Aborted, DrivePhase, Shared};
use crate::tape::report::{self, PhaseResult, Steps, TargetRun};
use crate::tape::targets::Running;
use reel_sysinfo::{self as cpu, Proc};

/// Where one drive's data goes: a drive behind an iSCSI session, or a path written with
/// write(2) (the `file` target).
#[derive(Clone)]
enum Lane {
    Scsi(Drive),
    Path(PathBuf),
}

impl Lane {
    async fn data(
        self,
        write: bool,
        w: Workload,
        i: usize,
        sh: Arc<Shared>,
    ) -> anyhow::Result<DrivePhase> {
        match self {
            Lane::Scsi(d) if write => tape::write(&d, &w, i, &sh).await,
            Lane::Scsi(d) => tape::read(&d, &w, i, &sh).await,
            Lane::Path(p) => tokio::task::spawn_blocking(move || {
                if write {
                    filemode::write(&p, &w, i, &sh)
                } else {
                    filemode::read(&p, &w, i, &sh)
                }
            })
            .await
            .context("a file writer thread failed")?,
        }
    }

    /// Load through the changer and set variable block mode; for a path, rewind it.
    async fn prepare(self, record_size: u32) -> anyhow::Result<()> {
        match self {
            Lane::Scsi(d) => tape::load_and_prepare(&d, record_size).await,
            Lane::Path(p) => blocking(move || filemode::prepare(&p)).await,
        }
    }

    async fn rewind(self) -> anyhow::Result<()> {
        match self {
            Lane::Scsi(d) => tape::rewind(&d, "rewind before reading").await,
            Lane::Path(p) => blocking(move || filemode::rewind(&p)).await,
        }
    }

    /// Check the end, rewind and unload; for a path, rewind it.
    async fn finish(self, record_size: u32) -> anyhow::Result<()> {
        match self {
            Lane::Scsi(d) => tape::finish(&d, record_size).await,
            Lane::Path(p) => blocking(move || filemode::rewind(&p)).await,
        }
    }
}

async fn blocking(f: impl FnOnce() -> anyhow::Result<()> + Send + 'static) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(f)
        .await
        .context("a file thread failed")?
}

/// Where the target's CPU time comes from: its process (a PID on this machine) and its API.
struct ServerCpu {
    pid: Option<u32>,
    api: Option<ReelApi>,
}

impl ServerCpu {
    fn proc_seconds(&self) -> anyhow::Result<Option<f64>> {
        server_cpu(self.pid)
    }

    async fn api_seconds(&self) -> Option<f64> {
        let api = self.api.clone()?;
        tokio::task::spawn_blocking(move || api.cpu_seconds().ok())
            .await
            .ok()
            .flatten()
    }
}

/// Runs `f` for every drive at once; the first real error (not a drive that stopped because
/// of another's failure) wins, and a failure makes the other drives stop issuing commands.
async fn all<D, T, F, Fut>(drives: &[D], shared: &Arc<Shared>, f: F) -> anyhow::Result<Vec<T>>
where
    D: Clone,
    T: Send + 'static,
    F: Fn(usize, D, Arc<Shared>) -> Fut,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let handles: Vec<_> = drives
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let fut = f(i, d.clone(), shared.clone());
            let shared = shared.clone();
            tokio::spawn(async move {
                let r = fut.await;
                if r.is_err() {
                    shared.abort.store(true, Ordering::Relaxed);
                }
                r
            })
        })
        .collect();
    let mut out = Vec::new();
    let mut error: Option<anyhow::Error> = None;
    for h in handles {
        match h.await {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(e)) => {
                let secondary = e.downcast_ref::<Aborted>().is_some();
                if error
                    .as_ref()
                    .is_none_or(|first| !secondary && first.downcast_ref::<Aborted>().is_some())
                {
                    error = Some(e);
                }
            }
            Err(join) => {
                error.get_or_insert(anyhow!("a drive task failed: {join}"));
            }
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn server_cpu(pid: Option<u32>) -> anyhow::Result<Option<f64>> {
    pid.map(|p| cpu::cpu_seconds(Proc::Pid(p)).context("the target process is gone"))
        .transpose()
}

/// One data phase on every drive, sampled every second.
async fn data_phase(
    lanes: &[Lane],
    workload: &Workload,
    shared: &Arc<Shared>,
    cpu: &ServerCpu,
    write: bool,
) -> anyhow::Result<PhaseResult> {
    shared.reset();
    let pid = cpu.pid;
    let api0 = cpu.api_seconds().await;
    let server0 = cpu.proc_seconds()?;
    let client0 = cpu::cpu_seconds(Proc::This)?;
    let t0 = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    // At every whole second: bytes acknowledged so far and the target's CPU seconds so far.
    let cumulative = Arc::new(Mutex::new(Vec::<(u64, Option<f64>)>::new()));
    let sampler = {
        let (cumulative, shared) = (cumulative.clone(), shared.clone());
        tokio::spawn(async move {
            for k in 1u64.. {
                tokio::time::sleep_until((t0 + Duration::from_secs(k)).into()).await;
                let total = shared.total();
                let cpu = pid.and_then(|p| cpu::cpu_seconds(Proc::Pid(p)).ok());
                if let Ok(mut c) = cumulative.lock() {
                    c.push((total, cpu));
                }
            }
        })
    };
    let phases: anyhow::Result<Vec<DrivePhase>> = all(lanes, shared, |i, lane, sh| {
        lane.data(write, workload.clone(), i, sh)
    })
    .await;
    sampler.abort();
    let phases = phases?;
    let server1 = cpu.proc_seconds()?;
    let api1 = cpu.api_seconds().await;
    let client1 = cpu::cpu_seconds(Proc::This)?;
    let since = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let bytes: u64 = phases.iter().map(|p| p.bytes).sum();
    let seconds = phases.iter().map(|p| since(p.finished)).fold(0.0, f64::max);
    let data_seconds = phases.iter().map(|p| since(p.data_end)).fold(0.0, f64::max);
    let steady = phases
        .iter()
        .map(|p| since(p.data_end))
        .fold(f64::INFINITY, f64::min);
    let ticks = cumulative.lock().map(|c| c.clone()).unwrap_or_default();
    let bytes_at: Vec<u64> = ticks.iter().map(|t| t.0).collect();
    let samples = report::per_second(&bytes_at, steady);
    // The target's CPU (in cores) during each of those seconds.
    let server_samples: Vec<f64> = std::iter::once(server0)
        .chain(ticks.iter().map(|t| t.1))
        .collect::<Vec<_>>()
        .windows(2)
        .take(samples.len())
        .map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        })
        .collect();
    let gb = bytes as f64 / 1e9;
    let per_gb = |cpu: f64| if gb > 0.0 { cpu / gb } else { f64::NAN };
    let server = server0.zip(server1).map(|(a, b)| b - a);
    let client = client1 - client0;
    Ok(PhaseResult {
        started_unix,
        bytes,
        records: phases.iter().map(|p| p.records).sum(),
        filemarks: phases.iter().map(|p| p.filemarks).sum(),
        seconds,
        mb_per_s: bytes as f64 / seconds.max(1e-9) / 1e6,
        data_seconds,
        per_drive_mb_per_s: phases
            .iter()
            .map(|p| {
                let s = p
                    .finished
                    .saturating_duration_since(p.started)
                    .as_secs_f64();
                p.bytes as f64 / s.max(1e-9) / 1e6
            })
            .collect(),
        server_cpu_s_per_gb: server.map(per_gb),
        server_api_cpu_s_per_gb: api0.zip(api1).map(|(a, b)| per_gb(b - a)),
        server_cores: server.map(|s| s / seconds.max(1e-9)),
        client_cpu_s_per_gb: per_gb(client),
        client_cores: client / seconds.max(1e-9),
        flatness: report::flatness(&samples, report::FLAT_SKIP_SECONDS, report::FLAT_TOLERANCE),
        samples_mb_per_s: samples,
        samples_server_cores: server_samples,
    })
}

/// Runs `cell` on `target`; nothing is written until every drive is loaded and prepared.
pub async fn run(target: &Running, cell: &Cell, timeout: Duration) -> anyhow::Result<TargetRun> {
    let cpu = ServerCpu {
        pid: target.pid,
        api: target.api.clone(),
    };
    if target.kind == TargetKind::File {
        let lanes: Vec<Lane> = target.paths.iter().cloned().map(Lane::Path).collect();
        let (steps, write, read) = phases(target, cell, &lanes, &cpu).await?;
        return Ok(TargetRun {
            target: target.kind,
            software: target.software.clone(),
            addr: String::new(),
            iqn: String::new(),
            pid: None,
            launched: target.launched,
            negotiated: NegotiatedReport::default(),
            media: target.media.clone(),
            drives: target
                .paths
                .iter()
                .map(|p| DrivePlan {
                    lun: 0,
                    changer: None,
                    barcode: None,
                    drive_product: p.display().to_string(),
                })
                .collect(),
            steps,
            write,
            read,
            storage: None,
        });
    }
    let kind = target.kind.name();
    let addr = target.addr;
    let iqn = match &target.iqn {
        Some(iqn) => iqn.clone(),
        None => session::discover(addr)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("{kind} at {addr} lists no targets"))?,
    };
    // The first login names an unknown IQN together with the ones the portal has.
    let probe = Drive {
        name: kind.to_string(),
        client: session::connect(addr, &iqn).await?,
        lun: 0,
        changer: None,
        timeout,
    };
    let layout = session::inspect(&probe).await?;
    let _ = probe.client.logout().await;
    let negotiated = session::negotiate(addr, &iqn).await?;
    let plans = session::plan_drives(&layout, cell.drives, kind)?;

    let mut drives = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let drive = Drive {
            name: format!("{kind} drive {}", i + 1),
            client: session::connect(addr, &iqn).await?,
            lun: plan.lun,
            changer: plan.changer,
            timeout,
        };
        if let Some(c) = plan.changer {
            drive.clear_attentions(c.lun).await?;
        }
        drive.clear_attentions(plan.lun).await?;
        drives.push(drive);
    }
    let lanes: Vec<Lane> = drives.iter().cloned().map(Lane::Scsi).collect();
    let result = phases(target, cell, &lanes, &cpu).await;
    if result.is_err() && !target.launched {
        // Leave an external library as it was (a launched target is simply stopped).
        for d in &drives {
            tape::unload_best_effort(d).await;
        }
    }
    for d in &drives {
        let _ = tokio::time::timeout(Duration::from_secs(10), d.client.logout()).await;
    }
    let (steps, write, read) = result?;
    Ok(TargetRun {
        target: target.kind,
        software: target.software.clone(),
        addr: addr.to_string(),
        iqn,
        pid: target.pid,
        launched: target.launched,
        negotiated,
        media: target.media.clone(),
        drives: plans,
        steps,
        write,
        read,
        storage: None,
    })
}

async fn phases(
    target: &Running,
    cell: &Cell,
    lanes: &[Lane],
    cpu: &ServerCpu,
) -> anyhow::Result<(Steps, PhaseResult, PhaseResult)> {
    let shared = Shared::new(lanes.len());
    let w = &cell.workload;
    let record_size = w.record_size;
    let mut steps = Steps::default();
    let kind = target.kind.name();

    let t = Instant::now();
    all(lanes, &shared, |_, lane, _| lane.prepare(record_size)).await?;
    steps.load_and_prepare_s = t.elapsed().as_secs_f64();
    eprintln!(
        "reel-bench:   {kind}: {} drive(s) loaded and in variable block mode",
        lanes.len()
    );

    let write = data_phase(lanes, w, &shared, cpu, true).await?;
    eprintln!(
        "reel-bench:   {kind}: wrote {:.2} GB in {:.1} s: {:.0} MB/s (target {} CPU s/GB)",
        write.bytes as f64 / 1e9,
        write.seconds,
        write.mb_per_s,
        write
            .server_cpu_s_per_gb
            .or(write.server_api_cpu_s_per_gb)
            .map_or("-".into(), |v| format!("{v:.2}"))
    );

    let t = Instant::now();
    all(lanes, &shared, |_, lane, _| lane.rewind()).await?;
    steps.rewind_s = t.elapsed().as_secs_f64();

    let read = data_phase(lanes, w, &shared, cpu, false).await?;
    eprintln!(
        "reel-bench:   {kind}: read and verified {:.2} GB in {:.1} s: {:.0} MB/s (target {} CPU s/GB)",
        read.bytes as f64 / 1e9,
        read.seconds,
        read.mb_per_s,
        read.server_cpu_s_per_gb
            .or(read.server_api_cpu_s_per_gb)
            .map_or("-".into(), |v| format!("{v:.2}"))
    );

    let t = Instant::now();
    all(lanes, &shared, |_, lane, _| lane.finish(record_size)).await?;
    steps.finish_and_unload_s = t.elapsed().as_secs_f64();
    Ok((steps, write, read))
}
