//! `reel serve` as a child process for the integration tests: started on a free loopback
//! port, ready once its banner is out, stopped with SIGTERM (or killed) by its PID.

#![allow(dead_code)] // each test binary uses part of it

pub mod api;
pub mod tape;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    /// Base URL of the console/API (`http://127.0.0.1:PORT`), when it runs.
    pub http: Option<String>,
}

/// A loopback address with a port that was free a moment ago.
pub fn free_portal() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

impl Server {
    /// `reel serve --listen PORTAL --data DATA [extra...]`, ready when it prints its
    /// "Ctrl-C" line (after every portal and target is up). The console/API listens on a
    /// free loopback port unless `extra` says `--http`.
    pub fn start(data: &Path, portal: SocketAddr, extra: &[&str]) -> Server {
        Self::start_with_stderr(data, portal, extra, Stdio::null())
    }

    /// `start`, with the server's standard error going to `stderr`.
    pub fn start_with_stderr(
        data: &Path,
        portal: SocketAddr,
        extra: &[&str],
        stderr: Stdio,
    ) -> Server {
        // reel refuses a data directory others can read; a test's temporary one may be.
        if data.exists() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let http_default: &[&str] = if extra.contains(&"--http") {
            &[]
        } else {
            &["--http", "127.0.0.1:0"]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(["serve", "--listen", &portal.to_string(), "--data"])
            .arg(data)
            .args(http_default)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut http = None;
        loop {
            assert!(Instant::now() < deadline, "reel serve did not start");
            match lines.next() {
                Some(Ok(line)) if line.starts_with("Ctrl-C") => break,
                Some(Ok(line)) if line.starts_with("web console and REST API: ") => {
                    let url = line["web console and REST API: ".len()..]
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .trim_end_matches('/');
                    http = Some(url.to_string());
                }
                Some(Ok(_)) => {}
                _ => panic!("reel serve exited before serving"),
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Server { child, http }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// SIGTERM, and insists on a clean exit.
    pub fn stop(mut self) {
        self.terminate();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "reel serve exited with {status:?}");
        std::mem::forget(self);
    }

    /// SIGTERM; returns how the server exited.
    pub fn stop_status(mut self) -> std::process::ExitStatus {
        self.terminate();
        let status = self.child.wait().unwrap();
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
