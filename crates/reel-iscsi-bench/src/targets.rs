//! Starting and stopping the targets under test, each as its own process so its CPU time
//! can be read from `/proc/PID/stat`:
//!
//! - reel: `reel serve --data TMP/data --config TMP/reel.toml` with one `null-disk` target;
//! - tgt: `tgtd -f -C PORT --iscsi portal=127.0.0.1:PORT`, then `tgtadm` adds a target with a
//!   `--bstype null` LUN 1 and the same limits reel offers.
//!
//! Both listen on free loopback ports. The guards stop the processes (and remove tgtd's
//! control socket) when dropped, so an error or a panic does not leave them running.

use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};

use crate::args::{Plan, Source, TargetKind};

/// Limits both targets are configured with (and reel's initiator asks for).
pub const MAX_RECV_DATA_SEGMENT: u32 = 256 << 10;
pub const MAX_BURST: u32 = 1 << 20;
pub const FIRST_BURST: u32 = 64 << 10;

const REEL_IQN: &str = "iqn.2026-11.org.reel.bench:null";
const TGT_IQN: &str = "iqn.2026-11.org.reel.bench:tgt-null";
const TGTD_SOCKET_DIR: &str = "/var/run/tgtd";

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

/// Connects once to see that something listens (a clear error instead of a failed login).
pub fn check_reachable(what: &str, addr: SocketAddr) -> anyhow::Result<()> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map(drop)
        .map_err(|e| anyhow!("{what} at {addr} is unreachable: {e} (is it running?)"))
}

/// Finds `name` on PATH (or checks it when it names a path).
fn which(name: &str) -> Option<PathBuf> {
    let candidate = Path::new(name);
    if name.contains('/') {
        return candidate.is_file().then(|| candidate.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The `reel` binary: `--reel-bin`, else `reel` next to this program.
fn reel_binary(plan: &Plan) -> anyhow::Result<PathBuf> {
    let path = match &plan.reel_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("finding this program's directory")?
            .with_file_name("reel"),
    };
    if !path.is_file() {
        bail!(
            "reel binary {} not found (build it with `cargo build --release -p reel` or pass --reel-bin)",
            path.display()
        );
    }
    Ok(path)
}

/// Everything that can be checked before a target starts: binaries, external targets'
/// ports and PIDs, output directories.
pub fn preflight(plan: &Plan) -> anyhow::Result<()> {
    for target in &plan.targets {
        match (&target.source, target.kind) {
            (Source::Launch, TargetKind::Reel) => {
                reel_binary(plan)?;
            }
            (Source::Launch, TargetKind::Tgt) => {
                for tool in [&plan.tgtd, &plan.tgtadm] {
                    if which(tool).is_none() {
                        bail!(
                            "{tool} not found (install Debian's tgt package or pass --tgtd/--tgtadm)"
                        );
                    }
                }
                if !Path::new(TGTD_SOCKET_DIR).is_dir() {
                    fs::create_dir_all(TGTD_SOCKET_DIR)
                        .with_context(|| format!("tgtd needs {TGTD_SOCKET_DIR}"))?;
                }
            }
            (Source::External { addr, pid, .. }, kind) => {
                check_reachable(&format!("the {} target", kind.name()), *addr)?;
                if let Some(pid) = pid {
                    crate::cpu::cpu_seconds(crate::cpu::Proc::Pid(*pid))
                        .with_context(|| format!("--{}-pid {pid}: no such process", kind.name()))?;
                }
            }
        }
    }
    for path in [&plan.json, &plan.markdown].into_iter().flatten() {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            bail!(
                "{}: directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// A loopback port nobody listens on right now.
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Waits until `addr` accepts connections, failing early if the process exits.
fn wait_listening(
    child: &mut Child,
    addr: SocketAddr,
    log: &Path,
    what: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!(
                "{what} exited ({status}) before listening on {addr}:\n{}",
                tail(log)
            );
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{what} did not listen on {addr} within 60 s:\n{}",
                tail(log)
            );
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The last lines of a log file, for error messages.
fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(15);
    let shown = lines[start..].join("\n");
    if shown.is_empty() {
        format!("({} is empty)", log.display())
    } else {
        format!("{shown}\n(from {})", log.display())
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Waits up to `limit` for the child to exit.
fn wait_exit(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() > deadline => return false,
            Ok(None) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`.
fn terminate(child: &mut Child, grace: Duration) {
    if wait_exit(child, Duration::ZERO) {
        return;
    }
    signal(child.id(), "TERM");
    if !wait_exit(child, grace) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

struct ReelProcess {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for ReelProcess {
    fn drop(&mut self) {
        // reel serve logs sessions out and syncs on SIGTERM.
        terminate(&mut self.child, Duration::from_secs(10));
    }
}

struct TgtProcess {
    child: Child,
    tgtadm: String,
    control_port: u16,
    log: PathBuf,
}

impl TgtProcess {
    fn admin(&self, args: &[&str]) -> anyhow::Result<()> {
        tgtadm(&self.tgtadm, self.control_port, args)
    }
}

fn tgtadm(tool: &str, control_port: u16, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(tool)
        .arg("-C")
        .arg(control_port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {tool}"))?;
    if !output.status.success() {
        bail!(
            "{tool} -C {control_port} {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

impl Drop for TgtProcess {
    fn drop(&mut self) {
        // tgtd ignores SIGTERM while targets exist; the orderly way down is offline, delete
        // the target, delete the system.
        if !wait_exit(&mut self.child, Duration::ZERO) {
            let _ = self.admin(&[
                "--op", "update", "--mode", "sys", "--name", "State", "-v", "offline",
            ]);
            let _ = self.admin(&[
                "--lld", "iscsi", "--op", "delete", "--mode", "target", "--tid", "1", "--force",
            ]);
            let _ = self.admin(&["--op", "delete", "--mode", "system"]);
            if !wait_exit(&mut self.child, Duration::from_secs(3)) {
                terminate(&mut self.child, Duration::from_secs(2));
            }
        }
        for suffix in ["", ".lock"] {
            let _ = fs::remove_file(format!(
                "{TGTD_SOCKET_DIR}/socket.{}{suffix}",
                self.control_port
            ));
        }
        let _ = fs::remove_file(&self.log);
    }
}

fn version_of(tool: &Path, flag: &str) -> String {
    Command::new(tool)
        .arg(flag)
        .output()
        .ok()
        .map(|o| {
            let mut text = String::from_utf8_lossy(&o.stdout).to_string();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            text.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

fn start_reel(plan: &Plan) -> anyhow::Result<(ReelProcess, SocketAddr, String)> {
    let bin = reel_binary(plan)?;
    let dir = tempfile::Builder::new()
        .prefix("reel-iscsi-bench-")
        .tempdir()
        .context("creating a temporary directory for reel")?;
    let port = free_port()?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
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
         [[iscsi.target]]\n\
         name = \"{REEL_IQN}\"\n\
         kind = \"null-disk\"\n"
    );
    fs::File::create(&config)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", config.display()))?;
    let log = dir.path().join("reel.log");
    let out = fs::File::create(&log)?;
    let child = Command::new(&bin)
        .arg("serve")
        .arg("--data")
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .arg("--cartridges")
        .arg("0")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut process = ReelProcess { child, _dir: dir };
    wait_listening(&mut process.child, addr, &log, "reel serve")?;
    let software = format!(
        "{} serve ({})",
        bin.display(),
        version_of(&bin, "--version")
    );
    Ok((process, addr, software))
}

fn start_tgt(plan: &Plan) -> anyhow::Result<(TgtProcess, SocketAddr, String)> {
    let tgtd = which(&plan.tgtd).ok_or_else(|| anyhow!("{} not found", plan.tgtd))?;
    let port = free_port()?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    // The control port only names tgtd's management socket (/var/run/tgtd/socket.N, N at
    // most 32767); derive it from the iSCSI port, skipping names in use.
    let control_port = (0..22_000u16)
        .map(|i| 10_000 + (port % 22_000 + i) % 22_000)
        .find(|c| !Path::new(&format!("{TGTD_SOCKET_DIR}/socket.{c}")).exists())
        .ok_or_else(|| anyhow!("no free tgtd control port in {TGTD_SOCKET_DIR}"))?;
    let log = std::env::temp_dir().join(format!("reel-iscsi-bench-tgtd-{port}.log"));
    let out = fs::File::create(&log)?;
    let child = Command::new(&tgtd)
        .arg("-f")
        .arg("-C")
        .arg(control_port.to_string())
        .arg("--iscsi")
        .arg(format!("portal={addr}"))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", tgtd.display()))?;
    let mut process = TgtProcess {
        child,
        tgtadm: plan.tgtadm.clone(),
        control_port,
        log: log.clone(),
    };
    wait_listening(&mut process.child, addr, &log, "tgtd")?;
    let mrdsl = MAX_RECV_DATA_SEGMENT.to_string();
    let mbl = MAX_BURST.to_string();
    let fbl = FIRST_BURST.to_string();
    let tid = ["--lld", "iscsi", "--tid", "1"];
    let mut steps: Vec<Vec<&str>> = vec![vec!["--op", "new", "--mode", "target", "-T", TGT_IQN]];
    // tgt's own defaults: MaxRecvDataSegmentLength 256 KiB, MaxXmitDataSegmentLength 8 KiB
    // (the most it sends per Data-In), MaxBurstLength 256 KiB, FirstBurstLength 64 KiB,
    // InitialR2T No, ImmediateData Yes. Match reel's limits; leave InitialR2T at its default.
    for (name, value) in [
        ("MaxRecvDataSegmentLength", mrdsl.as_str()),
        ("MaxXmitDataSegmentLength", mrdsl.as_str()),
        ("MaxBurstLength", mbl.as_str()),
        ("FirstBurstLength", fbl.as_str()),
        ("ImmediateData", "Yes"),
    ] {
        steps.push(vec![
            "--op", "update", "--mode", "target", "--name", name, "--value", value,
        ]);
    }
    steps.push(vec![
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
    ]);
    steps.push(vec!["--op", "bind", "--mode", "target", "-I", "ALL"]);
    for step in steps {
        let args: Vec<&str> = tid.iter().copied().chain(step).collect();
        process
            .admin(&args)
            .with_context(|| format!("configuring tgt (tgtd log: {})", log.display()))?;
    }
    let software = format!("{} ({})", tgtd.display(), version_of(&tgtd, "--version"));
    Ok((process, addr, software))
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
                    pid: Some(process.child.id()),
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
                    pid: Some(process.child.id()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_ports_are_reported_as_unreachable() {
        let port = free_port().unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let err = check_reachable("the tgt target", addr)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unreachable") && err.contains(&port.to_string()),
            "{err}"
        );
        let listener = TcpListener::bind(addr).unwrap();
        check_reachable("the tgt target", listener.local_addr().unwrap()).unwrap();
    }

    #[test]
    fn which_finds_programs() {
        assert!(which("sh").is_some());
        assert!(which("/bin/sh").is_some());
        assert!(which("no-such-program-here").is_none());
    }
}
