//! The targets under test, each as its own process so its CPU time can be read from
//! `/proc/PID/stat`:
//!
//! - reel: `reel serve --data TMP/data --config TMP/reel.toml` with one `null-disk` target;
//! - tgt: `tgtd -f -C PORT --iscsi portal=127.0.0.1:PORT`, then `tgtadm` adds a target with a
//!   `--bstype null` LUN 1 and the same limits reel offers.
//!
//! Starting, waiting for and stopping the processes is [`crate::harness::procs`], shared
//! with the tape benchmark; the guards stop them when dropped, so an error or a panic does not leave
//! them running.

use std::fs;
use std::net::SocketAddr;

use anyhow::{Context, bail};

use super::args::{Plan, Source};
use crate::harness::TargetKind;
use crate::harness::procs::{self, ReelServe, Tgtd};
use crate::harness::targets::{ReelToml, SessionLimits, preflight_external};

/// FirstBurstLength of this benchmark: smaller than the tape benchmark's, so that a write
/// larger than 64 KiB needs R2Ts (what the probe counts).
pub const FIRST_BURST: u32 = 64 << 10;
/// Limits both targets are configured with (and reel's initiator asks for): the tape
/// benchmark's, but for [`FIRST_BURST`].
pub const SESSION_LIMITS: SessionLimits = SessionLimits {
    first_burst_length: FIRST_BURST,
    ..crate::session::SESSION_LIMITS
};

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
        match &target.source {
            Source::Launch => plan.target.preflight_launch(target.kind)?,
            Source::External(external) => preflight_external(target.kind, external)?,
        }
    }
    plan.report.check()
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
    let bin = procs::reel_binary(plan.target.reel_bin.as_deref())?;
    let dir = tempfile::Builder::new()
        .prefix("reel-bench-iscsi-")
        .tempdir()
        .context("creating a temporary directory for reel")?;
    let addr = procs::free_loopback()?;
    let config = dir.path().join("reel.toml");
    ReelToml {
        written_by: "reel bench iscsi".into(),
        listen: addr,
        queue_depth: 64,
        limits: Some(SESSION_LIMITS),
        max_sessions: None,
        http: None,
        targets: vec![format!("name = \"{REEL_IQN}\"\nkind = \"null-disk\"\n")],
    }
    .write(&config)?;
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
        "reel-bench-iscsi-tgtd-{}-{}.log",
        std::process::id(),
        procs::free_port()?
    ));
    let mut tgtd = Tgtd::start(&plan.target.tgtd, &plan.target.tgtadm, &log)?;
    let addr = tgtd.addr();
    let tid = 1;
    tgtd.new_target(tid, TGT_IQN)?;
    // InitialR2T stays at tgt's default (No): reel has no setting for it.
    tgtd.set_session_limits(tid, SESSION_LIMITS)?;
    tgtd.new_lun(tid, 1, "null", "/dev/null", &[])?;
    tgtd.bind_all(tid)?;
    let software = tgtd.software();
    Ok((TgtProcess { tgtd }, addr, software))
}

/// Starts (or adopts) every target of the plan.
pub fn start_all(plan: &Plan) -> anyhow::Result<Vec<Target>> {
    let mut out = Vec::new();
    for t in &plan.targets {
        let target = match (&t.source, t.kind) {
            (Source::External(external), kind) => Target {
                kind,
                addr: external.addr,
                iqn: external.iqn.clone(),
                lun: t.lun,
                pid: external.pid,
                launched: false,
                software: format!("already running at {}", external.addr),
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
            (Source::Launch, TargetKind::File) => {
                bail!("the iSCSI benchmark has no file target")
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
