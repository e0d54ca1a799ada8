//! The targets under test, each as its own process so its CPU time can be read from
//! `/proc/PID/stat`:
//!
//! - reel: `reel serve --data TMP/data --config TMP/reel.toml` with one `null-disk` target;
//! - tgt: `tgtd -f -C PORT --iscsi portal=127.0.0.1:PORT`, then `tgtadm` adds a target with a
//!   `--bstype null` LUN 1 and the same limits reel offers.
//!
//! Starting, waiting for and stopping the processes is [`reel_bench::procs`], shared with the
//! tape benchmark; the guards stop them when dropped, so an error or a panic does not leave
//! them running.

use std::fs;
use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;
use reel_bench::procs::{self, ReelServe, Tgtd};

use crate::args::{Plan, Source, TargetKind};

/// Limits both targets are configured with (and reel's initiator asks for).
pub const MAX_RECV_DATA_SEGMENT: u32 = 256 << 10;
pub const MAX_BURST: u32 = 1 << 20;
pub const FIRST_BURST: u32 = 64 << 10;

const REEL_IQN: &str = "iqn.2026-11.org.reel.bench:null";
const TGT_IQN: &str = "iqn.2026-11.org.reel.bench:tgt-null";

/// A target ready to be measured.
pub struct Target {
    pub kind: TargetKind,
    pub addr: SocketAddr,
    /// `None`: discover with SendTargets.
    pub iqn: Option<String>,
    pub lun: u64,
    /// The process whose CPU time is the target's.
    pub pid: Option<u32>,
    pub launched: bool,
    /// What runs it, for the report (binary path and version).
    pub software: String,
    _guard: Option<Guard>,
}

/// Held only for its `Drop`, which stops the process.
#[allow(dead_code)]
enum Guard {
    Reel(ReelProcess),
    Tgt(TgtProcess),
}

/// Everything that can be checked before a target starts: binaries, external targets'
/// ports and PIDs, output directories.
pub fn preflight(plan: &Plan) -> anyhow::Result<()> {
    for target in &plan.targets {
        match (&target.source, target.kind) {
            (Source::Launch, TargetKind::Reel) => {
                procs::reel_binary(plan.reel_bin.as_deref())?;
            }
            (Source::Launch, TargetKind::Tgt) => {
                Tgtd::preflight(&plan.tgtd, &plan.tgtadm)?;
            }
            (Source::External { addr, pid, .. }, kind) => {
                procs::check_reachable(&format!("the {} target", kind.name()), *addr)?;
                if let Some(pid) = pid {
                    reel_bench::cpu::cpu_seconds(reel_bench::cpu::Proc::Pid(*pid))
                        .with_context(|| format!("--{}-pid {pid}: no such process", kind.name()))?;
                }
            }
        }
    }
    procs::check_output_dirs(
        [&plan.json, &plan.markdown]
            .into_iter()
            .flatten()
            .map(|p| p.as_path()),
    )?;
    Ok(())
}

/// `reel serve` and the temporary directory holding its configuration, data and log
/// (removed after the process has stopped: fields drop in order).
struct ReelProcess {
    serve: ReelServe,
    _dir: tempfile::TempDir,
}

impl ReelProcess {
    fn pid(&self) -> u32 {
        self.serve.pid()
    }
}

/// tgtd and its log file (removed when it is dropped).
struct TgtProcess {
    tgtd: Tgtd,
}

impl TgtProcess {
    fn pid(&self) -> u32 {
        self.tgtd.pid()
    }
}

impl Drop for TgtProcess {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.tgtd.log());
    }
}

fn start_reel(plan: &Plan) -> anyhow::Result<(ReelProcess, SocketAddr, String)> {
    let bin = procs::reel_binary(plan.reel_bin.as_deref())?;
    let dir = tempfile::Builder::new()
        .prefix("reel-iscsi-bench-")
        .tempdir()
        .context("creating a temporary directory for reel")?;
    let addr = procs::free_loopback()?;
    let config = dir.path().join("reel.toml");
    let text = format!(
        "# written by reel-iscsi-bench\n\
         [iscsi]\n\
         listen = [\"{addr}\"]\n\
         queue_depth = 64\n\
         max_recv_data_segment_length = {MAX_RECV_DATA_SEGMENT}\n\
         max_burst_length = {MAX_BURST}\n\
         first_burst_length = {FIRST_BURST}\n\
         \n\
         [http]\n\
         enabled = false\n\
         \n\
         [[iscsi.target]]\n\
         name = \"{REEL_IQN}\"\n\
         kind = \"null-disk\"\n"
    );
    fs::File::create(&config)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", config.display()))?;
    let serve = ReelServe::start(
        &bin,
        &config,
        &dir.path().join("data"),
        &dir.path().join("reel.log"),
        addr,
        &[],
    )?;
    let software = serve.software();
    Ok((ReelProcess { serve, _dir: dir }, addr, software))
}

fn start_tgt(plan: &Plan) -> anyhow::Result<(TgtProcess, SocketAddr, String)> {
    let log = std::env::temp_dir().join(format!(
        "reel-iscsi-bench-tgtd-{}-{}.log",
        std::process::id(),
        procs::free_port()?
    ));
    let mut tgtd = Tgtd::start(&plan.tgtd, &plan.tgtadm, &log)?;
    let addr = tgtd.addr();
    let tid = 1;
    tgtd.new_target(tid, TGT_IQN)?;
    // tgt's own defaults: MaxRecvDataSegmentLength 256 KiB, MaxXmitDataSegmentLength 8 KiB
    // (the most it sends per Data-In), MaxBurstLength 256 KiB, FirstBurstLength 64 KiB,
    // InitialR2T No, ImmediateData Yes. Match reel's limits; leave InitialR2T at its default.
    for (name, value) in [
        (
            "MaxRecvDataSegmentLength",
            MAX_RECV_DATA_SEGMENT.to_string(),
        ),
        (
            "MaxXmitDataSegmentLength",
            MAX_RECV_DATA_SEGMENT.to_string(),
        ),
        ("MaxBurstLength", MAX_BURST.to_string()),
        ("FirstBurstLength", FIRST_BURST.to_string()),
        ("ImmediateData", "Yes".to_string()),
    ] {
        tgtd.target_param(tid, name, &value)?;
    }
    tgtd.target_admin(
        tid,
        &[
            "--op",
            "new",
            "--mode",
            "logicalunit",
            "--lun",
            "1",
            "--bstype",
            "null",
            "--backing-store",
            "/dev/null",
        ],
    )?;
    tgtd.target_admin(tid, &["--op", "bind", "--mode", "target", "-I", "ALL"])?;
    let software = tgtd.software();
    Ok((TgtProcess { tgtd }, addr, software))
}

/// Starts (or adopts) every target of the plan.
pub fn start_all(plan: &Plan) -> anyhow::Result<Vec<Target>> {
    let mut out = Vec::new();
    for t in &plan.targets {
        let target = match (&t.source, t.kind) {
            (Source::External { addr, pid, iqn }, kind) => Target {
                kind,
                addr: *addr,
                iqn: iqn.clone(),
                lun: t.lun,
                pid: *pid,
                launched: false,
                software: format!("already running at {addr}"),
                _guard: None,
            },
            (Source::Launch, TargetKind::Reel) => {
                let (process, addr, software) = start_reel(plan)?;
                Target {
                    kind: TargetKind::Reel,
                    addr,
                    iqn: Some(REEL_IQN.into()),
                    lun: t.lun,
                    pid: Some(process.pid()),
                    launched: true,
                    software,
                    _guard: Some(Guard::Reel(process)),
                }
            }
            (Source::Launch, TargetKind::Tgt) => {
                let (process, addr, software) = start_tgt(plan)?;
                Target {
                    kind: TargetKind::Tgt,
                    addr,
                    iqn: Some(TGT_IQN.into()),
                    lun: t.lun,
                    pid: Some(process.pid()),
                    launched: true,
                    software,
                    _guard: Some(Guard::Tgt(process)),
                }
            }
        };
        eprintln!(
            "iscsi bench: {} target at {} (pid {}), {}",
            target.kind.name(),
            target.addr,
            target.pid.map_or("unknown".into(), |p| p.to_string()),
            target.software
        );
        out.push(target);
    }
    Ok(out)
}
