//! `reel serve` as a child process: started on a free loopback portal with the console/API on
//! a free loopback port, ready once its "Ctrl-C" banner line is out (after every portal and
//! target is up), stopped with SIGTERM (or killed) by its PID.
//!
//! Unless a test names its portal, reel binds port 0 itself and the portal is read from its
//! banner: a port picked by the test and released before reel binds it can be taken in between
//! by another test running in parallel (a start-up failure CI once saw).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long `reel serve` may take to print its banner.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The banner line that says where the console and API listen.
const HTTP_BANNER: &str = "web console and REST API: ";

/// The banner line that says which address an iSCSI portal bound.
const PORTAL_BANNER: &str = "iSCSI portal: ";

/// How many of the server's last standard-error lines a start-up failure shows.
const STDERR_TAIL_LINES: usize = 40;

/// "Any free loopback port": reel binds port 0 and [`Server::portal`] says which it got.
pub const ANY_PORTAL: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    0,
));

/// A loopback address with a free port outside the kernel's ephemeral range, so no
/// connection made meanwhile can take it (for a test that must know the port before the
/// server starts; [`ANY_PORTAL`] otherwise). See [`reel_sysinfo::ports`].
pub fn free_portal() -> SocketAddr {
    let port = reel_sysinfo::ports::unused_loopback_port().expect("a free loopback port");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The `reel` binary of this build: `CARGO_BIN_EXE_reel` when Cargo set it, else `reel` next
/// to the `deps` directory the running test binary is in (`target/<profile>/reel`, which
/// Cargo builds before the `reel` crate's integration tests).
pub fn reel_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_reel") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().expect("the test binary is in a directory");
    let profile = if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    profile.join("reel")
}

/// What to start: `reel serve --listen PORTAL [--data DATA] [--http 127.0.0.1:0] [args...]`.
pub struct ServeCommand {
    binary: PathBuf,
    /// `None`: the data directory comes from the configuration file.
    data: Option<PathBuf>,
    /// `None`: reel picks a free loopback port and says which in its banner.
    portal: Option<SocketAddr>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    /// `None`: kept in memory (the last lines), shown if the server fails to start.
    stderr: Option<Stdio>,
    /// `None`: the test's own.
    current_dir: Option<PathBuf>,
}

impl ServeCommand {
    /// `reel serve` of [`reel_binary`] on a free loopback portal with its data in `data`; its
    /// standard error is shown only if it fails to start.
    pub fn new(data: &Path) -> Self {
        Self {
            data: Some(data.to_path_buf()),
            ..Self::configured()
        }
    }

    /// As [`ServeCommand::new`] without `--data`: the configuration given with
    /// [`ServeCommand::args`] names the data directory.
    pub fn configured() -> Self {
        Self {
            binary: reel_binary(),
            data: None,
            portal: None,
            args: Vec::new(),
            env: Vec::new(),
            stderr: None,
            current_dir: None,
        }
    }

    /// The iSCSI portal to listen on (port 0: reel picks one and the banner says which).
    pub fn portal(mut self, portal: SocketAddr) -> Self {
        self.portal = (portal.port() != 0).then_some(portal);
        self
    }

    /// More arguments (`--config FILE`, `--cartridges 0`, `--http ADDR`...).
    pub fn args<S: Into<OsString> + Clone>(mut self, args: &[S]) -> Self {
        self.args.extend(args.iter().cloned().map(Into::into));
        self
    }

    /// An environment variable for the server (S3 credentials, `REEL_LOG`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The server's working directory (relative paths in its configuration start there).
    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.current_dir = Some(dir.to_path_buf());
        self
    }

    /// Where the server's standard error goes.
    pub fn stderr(mut self, stderr: Stdio) -> Self {
        self.stderr = Some(stderr);
        self
    }

    /// Starts the server and waits for its banner. Panics if it exits first or takes longer
    /// than a minute: a test cannot go on without it.
    pub fn start(self) -> Server {
        // reel refuses a data directory others can read; a test's temporary one may be.
        let mut command = Command::new(&self.binary);
        let listen = self
            .portal
            .map_or_else(|| "127.0.0.1:0".to_string(), |p| p.to_string());
        command.args(["serve", "--listen", &listen]);
        if let Some(data) = &self.data {
            if data.exists() {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700))
                    .expect("the data directory's mode can be set");
            }
            command.arg("--data").arg(data);
        }
        let http_given = self.args.iter().any(|a| a == "--http");
        if !http_given {
            command.args(["--http", "127.0.0.1:0"]);
        }
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        let keep_stderr = self.stderr.is_none();
        let mut child = command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(self.stderr.unwrap_or_else(Stdio::piped))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.binary.display()));
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_reader = keep_stderr.then(|| {
            let stderr = child.stderr.take().expect("stderr is piped");
            let tail = stderr_tail.clone();
            // Read for the server's whole life, so it never blocks on a full pipe.
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut tail = tail
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            })
        });
        // What the server said on standard error, for a failure message: once it has exited,
        // its reader has read the last line.
        let said = |child: &mut Child| {
            let _ = child.wait();
            if let Some(reader) = stderr_reader {
                let _ = reader.join();
            }
            let tail = stderr_tail
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if tail.is_empty() {
                String::new()
            } else {
                let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
                format!("; its standard error ended with:\n{}", lines.join("\n"))
            }
        };
        let stdout = child.stdout.take().expect("stdout is piped");
        // A reader thread, so the deadline holds even when the server prints nothing; it keeps
        // reading after the banner so the server never blocks on a full pipe.
        let (line_tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Once the banner is read nobody listens; the lines are still read (and dropped).
            for line in BufReader::new(stdout).lines() {
                let failed = line.is_err();
                let _ = line_tx.send(line);
                if failed {
                    break;
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let (mut http, mut portal, mut banner) = (None, self.portal, String::new());
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match lines.recv_timeout(wait) {
                Ok(Ok(line)) => line,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    panic!(
                        "reel serve did not start within {START_TIMEOUT:?}{}",
                        said(&mut child)
                    );
                }
                Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "reel serve exited before serving (banner so far:\n{banner}){}",
                        said(&mut child)
                    );
                }
            };
            banner.push_str(&line);
            banner.push('\n');
            if line.starts_with("Ctrl-C") {
                break;
            }
            if let Some(rest) = line.strip_prefix(PORTAL_BANNER) {
                // The first portal is the one asked for (`--listen` names one).
                if portal.is_none() {
                    portal = rest.trim().parse().ok();
                }
            }
            if let Some(rest) = line.strip_prefix(HTTP_BANNER) {
                let url = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_end_matches('/');
                http = Some(url.to_string());
            }
        }
        // The reader thread drains the rest of standard output until the server exits.
        drop(lines);
        let Some(portal) = portal else {
            let _ = child.kill();
            panic!("reel serve did not say which iSCSI portal it bound:\n{banner}");
        };
        Server {
            child,
            portal,
            http,
            banner,
        }
    }
}

/// A running `reel serve`; SIGTERM and wait on drop.
pub struct Server {
    child: Child,
    portal: SocketAddr,
    /// Base URL of the console/API (`http://127.0.0.1:PORT`), when it runs.
    pub http: Option<String>,
    /// What it printed on standard output up to its "Ctrl-C" line.
    pub banner: String,
}

impl Server {
    /// `reel serve --listen PORTAL --data DATA [extra...]`; the console/API listens on a free
    /// loopback port unless `extra` says `--http`.
    pub fn start(data: &Path, portal: SocketAddr, extra: &[&str]) -> Server {
        ServeCommand::new(data).portal(portal).args(extra).start()
    }

    /// [`Server::start`], with the server's standard error going to `stderr`.
    pub fn start_with_stderr(
        data: &Path,
        portal: SocketAddr,
        extra: &[&str],
        stderr: Stdio,
    ) -> Server {
        ServeCommand::new(data)
            .portal(portal)
            .args(extra)
            .stderr(stderr)
            .start()
    }

    /// The server's process id (for `/proc/<pid>/stat` and `status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The iSCSI portal it listens on.
    pub fn portal(&self) -> SocketAddr {
        self.portal
    }

    /// A field of `/proc/<pid>/status` in KiB (VmRSS now, VmHWM the peak so far).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the server is running");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"))
    }

    fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// SIGTERM, and insists on a clean exit.
    pub fn stop(self) {
        let status = self.stop_status();
        assert!(status.success(), "reel serve exited with {status:?}");
    }

    /// SIGTERM; returns how the server exited.
    pub fn stop_status(mut self) -> ExitStatus {
        self.terminate();
        let status = self.child.wait().expect("waiting for reel serve");
        std::mem::forget(self);
        status
    }

    /// SIGKILL: no clean stop, nothing synchronised beyond what the protocol made durable.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::forget(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.terminate();
        let _ = self.child.wait();
    }
}
