//! The load of one cell: `sessions` logged-in [`Client`]s, each with `queue_depth` tasks
//! that issue READ(10) or WRITE(10) of `size` bytes back to back. Counting starts after the
//! warm-up; CPU time of the target process and of this process is read at the same two
//! instants.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use reel_iscsi::initiator::SessionConfig;
use reel_iscsi_net::{Client, ClientOptions};
use serde::{Deserialize, Serialize};

use reel_sysinfo::{self as cpu, Proc};

use super::args::{self, BLOCK, Cell, Direction};
use super::probe::login_config;
use reel_scsi::initiator::sbc::{read10, write10};

/// LBAs used: the first 4 GiB (both null disks are larger).
const REGION_BLOCKS: u32 = 1 << 23;

/// Where the load goes.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub iqn: String,
    pub lun: u64,
    pub pid: Option<u32>,
}

/// One measured interval of one cell on one target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub seconds: f64,
    pub commands: u64,
    pub bytes: u64,
    pub mb_per_s: f64,
    pub iops: f64,
    /// Target process CPU seconds (user + system) per 10^9 bytes moved.
    pub target_cpu_s_per_gb: Option<f64>,
    /// This process (the initiator) likewise.
    pub initiator_cpu_s_per_gb: f64,
    /// Target and initiator CPU as a share of one core over the interval.
    pub target_cores: Option<f64>,
    pub initiator_cores: f64,
}

struct Snapshot {
    at: Instant,
    commands: u64,
    target_cpu: Option<f64>,
    initiator_cpu: f64,
}

fn snapshot(commands: &AtomicU64, pid: Option<u32>) -> anyhow::Result<Snapshot> {
    let target_cpu = pid
        .map(|p| cpu::cpu_seconds(Proc::Pid(p)).context("the target process is gone"))
        .transpose()?;
    Ok(Snapshot {
        at: Instant::now(),
        commands: commands.load(Ordering::Relaxed),
        target_cpu,
        initiator_cpu: cpu::cpu_seconds(Proc::This)?,
    })
}

fn measurement(a: &Snapshot, b: &Snapshot, size: u32) -> Measurement {
    let seconds = (b.at - a.at).as_secs_f64();
    let commands = b.commands - a.commands;
    let bytes = commands * u64::from(size);
    let gb = bytes as f64 / 1e9;
    let per_gb = |cpu: f64| if gb > 0.0 { cpu / gb } else { f64::NAN };
    let target = a.target_cpu.zip(b.target_cpu).map(|(x, y)| y - x);
    let initiator = b.initiator_cpu - a.initiator_cpu;
    Measurement {
        seconds,
        commands,
        bytes,
        mb_per_s: bytes as f64 / seconds / 1e6,
        iops: commands as f64 / seconds,
        target_cpu_s_per_gb: target.map(per_gb),
        initiator_cpu_s_per_gb: per_gb(initiator),
        target_cores: target.map(|t| t / seconds),
        initiator_cores: initiator / seconds,
    }
}

/// Logs in and clears the power-on unit attention.
async fn open_session(ep: &Endpoint) -> anyhow::Result<Client> {
    let client = Client::connect(
        ep.addr,
        login_config(&ep.iqn),
        ClientOptions {
            session: SessionConfig {
                discard_data_in: true,
            },
        },
    )
    .await
    .with_context(|| format!("logging in to {} at {}", ep.iqn, ep.addr))?;
    for _ in 0..5 {
        let r = client.execute(ep.lun, &[0; 6], Bytes::new(), 0).await?;
        if r.status == 0 {
            return Ok(client);
        }
    }
    bail!("LUN {} of {} does not become ready", ep.lun, ep.iqn)
}

/// Sleeps `d`, waking early if a worker failed or the user interrupted.
async fn watch(d: Duration, failed: &AtomicBool) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if crate::harness::interrupted() {
            bail!("interrupted");
        }
        if failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        tokio::time::sleep((end - Instant::now()).min(Duration::from_millis(50))).await;
    }
    Ok(())
}

/// Runs one cell against one target: warm-up, then `measure` of counted load.
pub async fn run_cell(
    ep: &Endpoint,
    cell: Cell,
    warmup: Duration,
    measure: Duration,
) -> anyhow::Result<Measurement> {
    let mut logins = Vec::new();
    for _ in 0..cell.sessions {
        logins.push(open_session(ep));
    }
    let mut clients = Vec::new();
    for login in logins {
        clients.push(login.await?);
    }
    let commands = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicBool::new(false));
    let data = Bytes::from(vec![0xa5u8; cell.size as usize]);
    let blocks = cell.size / BLOCK;
    let mut workers = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        for q in 0..cell.queue_depth {
            let client = client.clone();
            let (commands, stop, failed) = (commands.clone(), stop.clone(), failed.clone());
            let data = data.clone();
            let (lun, size, direction) = (ep.lun, cell.size, cell.direction);
            // Each worker streams through its own stretch of the region.
            let worker = (s as u32) * cell.queue_depth + q;
            let mut lba = (worker * 8191 * blocks) % REGION_BLOCKS;
            workers.push(tokio::spawn(async move {
                let result: anyhow::Result<()> = async {
                    while !stop.load(Ordering::Relaxed) {
                        if lba + blocks > REGION_BLOCKS {
                            lba = 0;
                        }
                        let r = match direction {
                            Direction::Write => {
                                client
                                    .execute(
                                        lun,
                                        &write10(lba, args::blocks(size)),
                                        data.clone(),
                                        0,
                                    )
                                    .await?
                            }
                            Direction::Read => {
                                client
                                    .execute(
                                        lun,
                                        &read10(lba, args::blocks(size)),
                                        Bytes::new(),
                                        size,
                                    )
                                    .await?
                            }
                        };
                        if r.status != 0 {
                            bail!(
                                "{} at LBA {lba} ended with status {:#04x}",
                                direction.name(),
                                r.status
                            );
                        }
                        if r.residual != 0 {
                            bail!(
                                "{} at LBA {lba} ended with residual {}",
                                direction.name(),
                                r.residual
                            );
                        }
                        commands.fetch_add(1, Ordering::Relaxed);
                        lba += blocks;
                    }
                    Ok(())
                }
                .await;
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                }
                result
            }));
        }
    }
    let timing: anyhow::Result<Measurement> = async {
        watch(warmup, &failed).await?;
        let a = snapshot(&commands, ep.pid)?;
        watch(measure, &failed).await?;
        let b = snapshot(&commands, ep.pid)?;
        Ok(measurement(&a, &b, cell.size))
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for worker in workers {
        match tokio::time::timeout(Duration::from_secs(60), worker).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                first_error.get_or_insert(e);
            }
            Ok(Err(join)) => {
                first_error.get_or_insert(anyhow!("a load task failed: {join}"));
            }
            Err(_) => {
                first_error.get_or_insert(anyhow!("a command did not complete within 60 s"));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e.context(format!("{} at {}", ep.iqn, ep.addr)));
    }
    let measurement = timing?;
    for client in &clients {
        let _ = tokio::time::timeout(Duration::from_secs(10), client.logout()).await;
    }
    if measurement.commands == 0 {
        bail!("no command completed in {:.1} s", measurement.seconds);
    }
    Ok(measurement)
}

/// The first target SendTargets lists at `addr` (for targets given only by address).
pub async fn discover(addr: SocketAddr) -> anyhow::Result<String> {
    crate::session::discover(addr)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("{addr} lists no targets"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_from_two_snapshots() {
        let t0 = Instant::now();
        let a = Snapshot {
            at: t0,
            commands: 10,
            target_cpu: Some(1.0),
            initiator_cpu: 2.0,
        };
        let b = Snapshot {
            at: t0 + Duration::from_secs(2),
            commands: 10 + 4000,
            target_cpu: Some(2.5),
            initiator_cpu: 2.5,
        };
        let m = measurement(&a, &b, 256 << 10);
        assert_eq!(m.bytes, 4000 * 262_144);
        assert!((m.mb_per_s - 4000.0 * 262_144.0 / 2e6).abs() < 1e-6);
        assert!((m.iops - 2000.0).abs() < 1e-9);
        let gb = 4000.0 * 262_144.0 / 1e9;
        assert!((m.target_cpu_s_per_gb.unwrap() - 1.5 / gb).abs() < 1e-9);
        assert!((m.initiator_cpu_s_per_gb - 0.5 / gb).abs() < 1e-9);
        assert!((m.target_cores.unwrap() - 0.75).abs() < 1e-9);
    }
}
