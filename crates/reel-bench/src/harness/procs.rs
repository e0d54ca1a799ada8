//! Target processes for the benchmarks: `reel serve` and Debian's `tgtd`, each started as its
//! own process on a free loopback port so that its CPU time can be read from `/proc/PID/stat`,
//! waited for until it listens, and stopped in an orderly way. The guards stop their process when dropped, so an error or a panic does not
//! leave it running.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};

use super::targets::SessionLimits;

/// Where tgtd keeps its management sockets (`socket.N` for control port N).
pub const TGTD_SOCKET_DIR: &str = "/var/run/tgtd";

/// Finds `name` on PATH (and in /usr/sbin, /sbin), or checks it when it names a path.
pub fn which(name: &str) -> Option<PathBuf> {
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

/// The `reel` binary: `explicit` if given, else `reel` next to this program (where cargo puts
/// both), else its parent directory (this program may be a test in `target/PROFILE/deps`).
pub fn reel_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let exe = std::env::current_exe().context("finding this program's directory")?;
            let beside = exe.with_file_name("reel");
            let above = exe
                .parent()
                .and_then(Path::parent)
                .map(|d| d.join("reel"))
                .filter(|p| p.is_file());
            match above {
                Some(p) if !beside.is_file() => p,
                _ => beside,
            }
        }
    };
    if !path.is_file() {
        bail!(
            "reel binary {} not found (build it with `cargo build --release -p reel` or pass --reel-bin)",
            path.display()
        );
    }
    Ok(path)
}

/// A loopback port nobody listens on right now, outside the kernel's ephemeral range so that
/// no connection takes it before its server binds it ([`reel_sysinfo::ports`]).
pub fn free_port() -> anyhow::Result<u16> {
    reel_sysinfo::ports::unused_loopback_port().context("finding a free port")
}

/// `127.0.0.1:PORT` with a port that was free a moment ago.
pub fn free_loopback() -> anyhow::Result<SocketAddr> {
    Ok(([127, 0, 0, 1], free_port()?).into())
}

/// Connects once to see that something listens (a clear error instead of a failed login).
pub fn check_reachable(what: &str, addr: SocketAddr) -> anyhow::Result<()> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map(drop)
        .map_err(|e| anyhow!("{what} at {addr} is unreachable: {e} (is it running?)"))
}

/// Waits until `addr` accepts connections, failing early if the process exits.
pub fn wait_listening(
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
pub fn tail(log: &Path) -> String {
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

/// Runs a tool to its end; its standard output, or an error with what it printed.
pub fn run_tool(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The first line `tool FLAG` prints (stdout or stderr), for reports.
pub fn version_of(tool: &Path, flag: &str) -> String {
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

/// SIGTERM, then SIGKILL after `grace`; false if it had to be killed.
fn terminate(child: &mut Child, grace: Duration) -> bool {
    if wait_exit(child, Duration::ZERO) {
        return true;
    }
    signal(child.id(), "TERM");
    if wait_exit(child, grace) {
        return true;
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// A running `reel serve`; SIGTERM when dropped (reel logs sessions out and syncs on it).
pub struct ReelServe {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
    bin: PathBuf,
}

impl ReelServe {
    /// `BIN serve --data DATA --config CONFIG --cartridges 0 [extra...]` with its output in
    /// `log`, ready once it listens on `addr` (which the configuration must name).
    pub fn start(
        bin: &Path,
        config: &Path,
        data: &Path,
        log: &Path,
        addr: SocketAddr,
        extra: &[&str],
    ) -> anyhow::Result<ReelServe> {
        let out = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(bin)
            .arg("serve")
            .arg("--data")
            .arg(data)
            .arg("--config")
            .arg(config)
            .arg("--cartridges")
            .arg("0")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut serve = ReelServe {
            child,
            addr,
            log: log.to_path_buf(),
            bin: bin.to_path_buf(),
        };
        wait_listening(&mut serve.child, addr, log, "reel serve")?;
        Ok(serve)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// `BIN serve (reel x.y.z)`, for reports.
    pub fn software(&self) -> String {
        format!(
            "{} serve ({})",
            self.bin.display(),
            version_of(&self.bin, "--version")
        )
    }

    /// The admin's first password, which `reel serve` writes into its data directory `data`
    /// once its console listens (which may be just after the iSCSI portal): waits up to
    /// `limit` for the whole line.
    pub fn initial_admin_password(data: &Path, limit: Duration) -> anyhow::Result<String> {
        let file = data.join("initial-admin-password");
        let deadline = Instant::now() + limit;
        loop {
            match fs::read_to_string(&file) {
                Ok(p) if p.ends_with('\n') => return Ok(p.trim().to_string()),
                Err(e) if Instant::now() > deadline => {
                    return Err(e).with_context(|| format!("reading {}", file.display()));
                }
                _ => thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// SIGKILL and reap: a crash, as far as the store can tell (the soak test's restarts).
    pub fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().context("SIGKILL to reel serve")?;
        self.child.wait().context("reaping reel serve")?;
        Ok(())
    }

    /// SIGTERM and wait (up to `grace`, then SIGKILL); an error unless it exited cleanly.
    pub fn stop(mut self, grace: Duration) -> anyhow::Result<()> {
        if !terminate(&mut self.child, grace) {
            bail!(
                "reel serve did not stop within {} s of SIGTERM (killed):\n{}",
                grace.as_secs(),
                tail(&self.log)
            );
        }
        let status = self.child.wait()?;
        if !status.success() {
            bail!("reel serve exited with {status}:\n{}", tail(&self.log));
        }
        Ok(())
    }
}

impl Drop for ReelServe {
    fn drop(&mut self) {
        terminate(&mut self.child, Duration::from_secs(10));
    }
}

/// Runs `TOOL -C CONTROL_PORT args...`; its standard output on success.
pub fn tgtadm(tool: &str, control_port: u16, args: &[&str]) -> anyhow::Result<String> {
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
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A running `tgtd -f -C CONTROL_PORT --iscsi portal=ADDR`. Dropping it (or [`Tgtd::stop`])
/// takes it down the orderly way: tgtd ignores SIGTERM while it has targets, so the system is
/// set offline, every target created through [`Tgtd::new_target`] deleted, then the system.
pub struct Tgtd {
    child: Child,
    tgtadm: String,
    control_port: u16,
    addr: SocketAddr,
    log: PathBuf,
    bin: PathBuf,
    tids: Vec<u32>,
}

impl Tgtd {
    /// Checks that tgtd's tools exist and its socket directory can be used.
    pub fn preflight(tgtd: &str, tgtadm: &str) -> anyhow::Result<()> {
        for tool in [tgtd, tgtadm] {
            if which(tool).is_none() {
                bail!("{tool} not found (install Debian's tgt package or pass --tgtd/--tgtadm)");
            }
        }
        if !Path::new(TGTD_SOCKET_DIR).is_dir() {
            fs::create_dir_all(TGTD_SOCKET_DIR)
                .with_context(|| format!("tgtd needs {TGTD_SOCKET_DIR}"))?;
        }
        Ok(())
    }

    /// Starts tgtd on a free loopback port with its output in `log`.
    pub fn start(tgtd: &str, tgtadm: &str, log: &Path) -> anyhow::Result<Tgtd> {
        let bin = which(tgtd).ok_or_else(|| anyhow!("{tgtd} not found"))?;
        let addr = free_loopback()?;
        // The control port only names tgtd's management socket (/var/run/tgtd/socket.N, N at
        // most 32767); derive it from the iSCSI port, skipping names in use.
        let control_port = (0..22_000u16)
            .map(|i| 10_000 + (addr.port() % 22_000 + i) % 22_000)
            .find(|c| !Path::new(&format!("{TGTD_SOCKET_DIR}/socket.{c}")).exists())
            .ok_or_else(|| anyhow!("no free tgtd control port in {TGTD_SOCKET_DIR}"))?;
        let out = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&bin)
            .arg("-f")
            .arg("-C")
            .arg(control_port.to_string())
            .arg("--iscsi")
            .arg(format!("portal={addr}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut tgtd = Tgtd {
            child,
            tgtadm: tgtadm.to_string(),
            control_port,
            addr,
            log: log.to_path_buf(),
            bin,
            tids: Vec::new(),
        };
        wait_listening(&mut tgtd.child, addr, log, "tgtd")?;
        Ok(tgtd)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// `BIN (version)`, for reports.
    pub fn software(&self) -> String {
        format!(
            "{} ({})",
            self.bin.display(),
            version_of(&self.bin, "--version")
        )
    }

    /// `tgtadm -C PORT args...`.
    pub fn admin(&self, args: &[&str]) -> anyhow::Result<String> {
        tgtadm(&self.tgtadm, self.control_port, args)
            .with_context(|| format!("configuring tgt (tgtd log: {})", self.log.display()))
    }

    /// `tgtadm --lld iscsi --tid TID args...`.
    pub fn target_admin(&self, tid: u32, args: &[&str]) -> anyhow::Result<String> {
        let tid = tid.to_string();
        let mut all = vec!["--lld", "iscsi", "--tid", tid.as_str()];
        all.extend_from_slice(args);
        self.admin(&all)
    }

    /// Creates target `tid` named `iqn` (deleted again when tgtd is stopped).
    pub fn new_target(&mut self, tid: u32, iqn: &str) -> anyhow::Result<()> {
        self.target_admin(tid, &["--op", "new", "--mode", "target", "-T", iqn])?;
        self.tids.push(tid);
        Ok(())
    }

    /// Sets a session parameter (MaxBurstLength, …) of target `tid`.
    pub fn target_param(&self, tid: u32, name: &str, value: &str) -> anyhow::Result<()> {
        self.target_admin(
            tid,
            &[
                "--op", "update", "--mode", "target", "--name", name, "--value", value,
            ],
        )
        .map(drop)
    }

    /// Leaves tgtd running when this process ends, for `reel bench tgt start`: its pid and
    /// control port, which [`stop_detached_tgtd`] takes it down with.
    pub fn detach(self) -> (u32, u16) {
        // No Drop: the child handle is left as it is (dropping a `Child` does not kill it).
        let tgtd = std::mem::ManuallyDrop::new(self);
        (tgtd.child.id(), tgtd.control_port)
    }

    /// Target `tid`'s session limits as reel is configured with them (tgt's defaults:
    /// MaxRecvDataSegmentLength 256 KiB, MaxXmitDataSegmentLength 8 KiB, the most it sends per
    /// Data-In, MaxBurstLength 256 KiB, FirstBurstLength 64 KiB), and ImmediateData Yes.
    /// InitialR2T stays at tgt's default, as reel has no setting for it.
    pub fn set_session_limits(&self, tid: u32, limits: SessionLimits) -> anyhow::Result<()> {
        for (name, value) in [
            (
                "MaxRecvDataSegmentLength",
                limits.max_recv_data_segment_length,
            ),
            (
                "MaxXmitDataSegmentLength",
                limits.max_recv_data_segment_length,
            ),
            ("MaxBurstLength", limits.max_burst_length),
            ("FirstBurstLength", limits.first_burst_length),
        ] {
            self.target_param(tid, name, &value.to_string())?;
        }
        self.target_param(tid, "ImmediateData", "Yes")
    }

    /// A new logical unit `lun` of target `tid`: `--bstype BSTYPE --backing-store PATH`, and
    /// `extra` (`--device-type tape`…).
    pub fn new_lun(
        &self,
        tid: u32,
        lun: u32,
        bstype: &str,
        backing_store: &str,
        extra: &[&str],
    ) -> anyhow::Result<()> {
        let lun = lun.to_string();
        let mut args = vec![
            "--op",
            "new",
            "--mode",
            "logicalunit",
            "--lun",
            lun.as_str(),
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--bstype", bstype, "--backing-store", backing_store]);
        self.target_admin(tid, &args).map(drop)
    }

    /// Lets every initiator log in to target `tid`.
    pub fn bind_all(&self, tid: u32) -> anyhow::Result<()> {
        self.target_admin(tid, &["--op", "bind", "--mode", "target", "-I", "ALL"])
            .map(drop)
    }

    /// Stops tgtd; an error if it had to be killed.
    pub fn stop(mut self) -> anyhow::Result<()> {
        if self.shut_down() {
            Ok(())
        } else {
            bail!(
                "tgtd did not stop after its targets were deleted (killed):\n{}",
                tail(&self.log)
            )
        }
    }

    /// The orderly way down; true if tgtd exited by itself.
    fn shut_down(&mut self) -> bool {
        let mut clean = true;
        if !wait_exit(&mut self.child, Duration::ZERO) {
            take_tgtd_down(
                &self.tgtadm,
                self.control_port,
                &std::mem::take(&mut self.tids),
            );
            if !wait_exit(&mut self.child, Duration::from_secs(5)) {
                clean = false;
                terminate(&mut self.child, Duration::from_secs(2));
            }
        }
        remove_tgtd_socket(self.control_port);
        clean
    }
}

/// Asks tgtd to end: tgtd ignores SIGTERM while it has targets, so the system is set
/// offline, targets `tids` deleted, then the system (errors ignored: it may be going already).
fn take_tgtd_down(tgtadm_tool: &str, control_port: u16, tids: &[u32]) {
    let admin = |args: &[&str]| tgtadm(tgtadm_tool, control_port, args);
    let _ = admin(&[
        "--op", "update", "--mode", "sys", "--name", "State", "-v", "offline",
    ]);
    for tid in tids {
        let tid = tid.to_string();
        let _ = admin(&[
            "--lld", "iscsi", "--tid", &tid, "--op", "delete", "--mode", "target", "--force",
        ]);
    }
    let _ = admin(&["--op", "delete", "--mode", "system"]);
}

/// tgtd's management socket and its lock (tgtd leaves them behind when killed).
fn remove_tgtd_socket(control_port: u16) {
    for suffix in ["", ".lock"] {
        let _ = fs::remove_file(format!("{TGTD_SOCKET_DIR}/socket.{control_port}{suffix}"));
    }
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet).
fn process_gone(pid: u32) -> bool {
    reel_sysinfo::process_state(pid).is_none_or(|state| state == 'Z')
}

/// Takes down a tgtd [`Tgtd::detach`] left running (not this process's child) the way
/// [`Tgtd::stop`] does; an error if it had to be killed.
pub fn stop_detached_tgtd(
    tgtadm: &str,
    pid: u32,
    control_port: u16,
    tids: &[u32],
) -> anyhow::Result<()> {
    let wait_gone = |limit: Duration| {
        let deadline = Instant::now() + limit;
        while !process_gone(pid) {
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
        true
    };
    let mut clean = true;
    if !process_gone(pid) {
        take_tgtd_down(tgtadm, control_port, tids);
        if !wait_gone(Duration::from_secs(5)) {
            clean = false;
            signal(pid, "TERM");
            if !wait_gone(Duration::from_secs(2)) {
                signal(pid, "KILL");
                wait_gone(Duration::from_secs(2));
            }
        }
    }
    remove_tgtd_socket(control_port);
    ensure!(
        clean,
        "tgtd {pid} did not stop after its targets were deleted (killed)"
    );
    Ok(())
}

impl Drop for Tgtd {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The versitygw program: `$REEL_TOOLS_DIR/bin/versitygw`, else
/// `~/.cache/reel-tools/bin/versitygw`, else on PATH; `explicit` if given.
pub fn versitygw_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        ensure!(p.is_file(), "--versitygw {} does not exist", p.display());
        return Ok(p.to_path_buf());
    }
    let mut tried = Vec::new();
    let dirs = [
        std::env::var_os("REEL_TOOLS_DIR").map(PathBuf::from),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/reel-tools")),
    ];
    for dir in dirs.into_iter().flatten() {
        let p = dir.join("bin/versitygw");
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p.display().to_string());
    }
    if let Some(p) = which("versitygw") {
        return Ok(p);
    }
    bail!(
        "versitygw not found (looked at {} and on PATH): install it with `scripts/s3-servers.sh install` \
         (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 into $REEL_TOOLS_DIR/bin, \
         default ~/.cache/reel-tools/bin) or pass --versitygw PATH",
        tried.join(", ")
    )
}

/// `2 * bytes` hex digits from the kernel's random source (throw-away S3 keys).
fn random_hex(bytes: usize) -> anyhow::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .context("reading /dev/urandom")?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// The status of a plain HTTP/1.0 GET on loopback, or `None` if nothing answered.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").ok()?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.split(' ').nth(1)?.parse().ok()
}

/// SHA-256 of the empty body, for the signed bucket creation.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A versitygw S3 gateway (posix back end) started by the benchmark: its own process on a free
/// loopback port, a fresh data directory under the directory given, random throw-away keys and
/// one bucket. Dropping it stops that process (SIGTERM, then SIGKILL) — only the PID it
/// started — and removes its data.
pub struct S3Gateway {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    access_key: String,
    secret_key: String,
    bucket: String,
}

impl S3Gateway {
    pub const REGION: &str = "us-east-1";

    /// Starts `bin` on 127.0.0.1 with a data directory in `base`, waits until `GET /health`
    /// answers 200 and creates `bucket` (a SigV4-signed PUT through `curl --aws-sigv4`).
    pub fn start(bin: &Path, base: &Path, bucket: &str) -> anyhow::Result<S3Gateway> {
        ensure!(
            which("curl").is_some(),
            "curl is not on PATH: the benchmark creates its bucket with `curl --aws-sigv4`"
        );
        let dir = tempfile::Builder::new()
            .prefix("reel-bench-versitygw.")
            .tempdir_in(base)
            .with_context(|| format!("making a directory in {}", base.display()))?;
        let data = dir.path().join("data");
        fs::create_dir(&data)?;
        let log = dir.path().join("versitygw.log");
        let out = fs::File::create(&log)?;
        let port = free_port()?;
        let access_key = random_hex(10)?;
        let secret_key = random_hex(20)?;
        let child = Command::new(bin)
            .env("ROOT_ACCESS_KEY", &access_key)
            .env("ROOT_SECRET_KEY", &secret_key)
            .arg("--port")
            .arg(format!("127.0.0.1:{port}"))
            .args(["--region", Self::REGION, "--health", "/health", "posix"])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut gw = S3Gateway {
            child,
            port,
            dir,
            bin: bin.to_path_buf(),
            access_key,
            secret_key,
            bucket: bucket.to_string(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = gw.child.try_wait()? {
                bail!(
                    "versitygw exited ({status}) before answering on port {port}:\n{}",
                    tail(&log)
                );
            }
            if http_status(port, "/health") == Some(200) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "versitygw did not answer on port {port} within 30 s:\n{}",
                    tail(&log)
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
        gw.create_bucket()?;
        Ok(gw)
    }

    fn create_bucket(&self) -> anyhow::Result<()> {
        let out = Command::new("curl")
            .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10"])
            .args(["-X", "PUT"])
            .args(["--aws-sigv4", &format!("aws:amz:{}:s3", Self::REGION)])
            // On the command line: a random key for a server that lives as long as this run.
            .args([
                "--user",
                &format!("{}:{}", self.access_key, self.secret_key),
            ])
            .args(["-H", &format!("x-amz-content-sha256: {EMPTY_SHA256}")])
            .arg(format!("{}/{}", self.endpoint(), self.bucket))
            .stdin(Stdio::null())
            .output()
            .context("running curl")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        ensure!(
            code.trim() == "200",
            "versitygw: creating bucket {} answered {}: {body}",
            self.bucket,
            code.trim()
        );
        Ok(())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// Where the server keeps its objects.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `BIN (version)`, for reports.
    pub fn software(&self) -> String {
        format!(
            "{} ({})",
            self.bin.display(),
            version_of(&self.bin, "--version")
        )
    }
}

impl Drop for S3Gateway {
    fn drop(&mut self) {
        // Only the child this value started; `wait` reaps it, so its PID is not reused meanwhile.
        terminate(&mut self.child, Duration::from_secs(5));
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_ports_are_reported_as_unreachable() {
        let addr = free_loopback().unwrap();
        let err = check_reachable("the tgt target", addr)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unreachable") && err.contains(&addr.port().to_string()),
            "{err}"
        );
        let listener = std::net::TcpListener::bind(addr).unwrap();
        check_reachable("the tgt target", listener.local_addr().unwrap()).unwrap();
    }

    #[test]
    fn which_finds_programs() {
        assert!(which("sh").is_some());
        assert!(which("/bin/sh").is_some());
        assert!(which("no-such-program-here").is_none());
    }

    #[test]
    fn missing_reel_binary_is_named() {
        let err = reel_binary(Some(Path::new("/nonexistent/reel")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/reel") && err.contains("--reel-bin"),
            "{err}"
        );
    }

    #[test]
    fn log_tails() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        assert!(tail(&log).contains("is empty"));
        let text: String = (0..40).map(|i| format!("line {i}\n")).collect();
        fs::write(&log, text).unwrap();
        let t = tail(&log);
        assert!(t.starts_with("line 25\n") && t.contains("line 39"), "{t}");
        assert!(!t.contains("line 24\n"));
    }
}
