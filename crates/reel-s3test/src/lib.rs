//! # reel-s3test — real S3 servers on loopback for reel's object-storage tests (dev-only)
//!
//! [`S3Server::start`] runs a real S3-compatible server, never a mock: versitygw (Go, a posix
//! directory as storage) or s3proxy (Java, jclouds `filesystem-nio2`). Each instance gets a free
//! port on 127.0.0.1 only, a fresh data directory, a random access key and secret, and one bucket;
//! it is ready when [`S3Server::start`] returns. [`S3Server::stop`] and [`S3Server::restart`]
//! (same port, same data) let a test take the server away mid-operation. Dropping the value kills
//! the one process it started and waits for it.
//!
//! The servers are installed by `scripts/s3-servers.sh install` into `$REEL_TOOLS_DIR` (default
//! `~/.cache/reel-tools`): `bin/versitygw` and `s3proxy.jar`. A missing server is an error that
//! says how to install it, so a test fails instead of silently skipping. Signed requests
//! (readiness, bucket creation) go through `curl --aws-sigv4`; `curl` and `java` must be on PATH.
//!
//! [`FaultProxy`] sits between a client and a server and, on demand, answers `503 SlowDown` or
//! delays connections: what a real server does while it is overloaded or restarting, on a
//! schedule a test controls. The server behind it still does all the work.
//!
//! No dependency on other reel crates, so any crate's tests can use it.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which server to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// versitygw v1.8.0 over a posix directory; starts in well under a second.
    Versitygw,
    /// s3proxy 4.1.0 over jclouds' filesystem-nio2; a JVM, so starting takes seconds.
    S3proxy,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Versitygw => "versitygw",
            Kind::S3proxy => "s3proxy",
        })
    }
}

/// Why a server could not be started or reached. The message says what to do.
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

type Result<T> = std::result::Result<T, Error>;

fn err(msg: impl Into<String>) -> Error {
    Error(msg.into())
}

/// The region every server is started with (any name works; SigV4 needs one).
pub const REGION: &str = "us-east-1";

/// SHA-256 of the empty body, the payload hash of a signed request without a body.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// How long a server may take to answer after being started; a JVM on a loaded 2-core machine
/// has been seen to need 9 s.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Where `scripts/s3-servers.sh install` puts the servers.
pub fn tools_dir() -> PathBuf {
    match std::env::var_os("REEL_TOOLS_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/reel-tools")
        }
    }
}

/// One running (or stopped) S3 server with one bucket.
pub struct S3Server {
    kind: Kind,
    port: u16,
    access_key: String,
    secret_key: String,
    bucket: String,
    /// Holds `data/` (the storage), `server.log` (all output, across restarts) and, for s3proxy,
    /// its properties file. Removed on drop, after the process is gone.
    dir: tempfile::TempDir,
    program: PathBuf,
    child: Option<Child>,
    /// Serves https with a certificate for 127.0.0.1 that a throw-away CA signed
    /// ([`S3Server::start_https`]).
    https: bool,
}

impl fmt::Debug for S3Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Server")
            .field("kind", &self.kind)
            .field("endpoint", &self.endpoint())
            .field("bucket", &self.bucket)
            .field("pid", &self.pid())
            .finish_non_exhaustive()
    }
}

impl S3Server {
    /// Starts a server of `kind` on a free loopback port with a fresh data directory and random
    /// keys, waits until it answers, and creates the bucket [`S3Server::bucket`].
    pub fn start(kind: Kind) -> Result<S3Server> {
        Self::start_with(kind, false)
    }

    /// [`S3Server::start`] serving https (versitygw only): a CA made for this server signs its
    /// certificate for `127.0.0.1` (openssl); clients trust it through
    /// [`S3Server::ca_certificate_pem`], and no system trusts it.
    pub fn start_https(kind: Kind) -> Result<S3Server> {
        if kind != Kind::Versitygw {
            return Err(err(format!(
                "https is set up for versitygw only, not {kind}"
            )));
        }
        Self::start_with(kind, true)
    }

    fn start_with(kind: Kind, https: bool) -> Result<S3Server> {
        let program = find_program(kind)?;
        find_on_path("curl", "apt-get install curl")?;
        if kind == Kind::S3proxy {
            find_on_path("java", "apt-get install default-jre-headless")?;
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("reel-s3test-{kind}-"))
            .tempdir()
            .map_err(|e| err(format!("temporary directory for {kind}: {e}")))?;
        fs::create_dir(dir.path().join("data"))
            .map_err(|e| err(format!("data directory for {kind}: {e}")))?;
        let mut server = S3Server {
            kind,
            port: free_port()?,
            // Access keys are upper-case alphanumerics by convention; secrets are free-form.
            access_key: format!("RT{}", random_hex(9).to_ascii_uppercase()),
            secret_key: random_hex(20),
            bucket: "reel-test".to_string(),
            dir,
            program,
            child: None,
            https,
        };
        if https {
            find_on_path("openssl", "apt-get install openssl")?;
            make_certificates(server.dir.path())?;
        }
        server.spawn_and_wait()?;
        server.create_bucket()?;
        Ok(server)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// `http://127.0.0.1:PORT`, or `https://` for [`S3Server::start_https`].
    pub fn endpoint(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The PEM certificate of the CA that signed an https server's certificate.
    pub fn ca_certificate_pem(&self) -> Result<Vec<u8>> {
        fs::read(self.dir.path().join("ca.pem")).map_err(|e| err(format!("ca.pem: {e}")))
    }

    pub fn port(&self) -> u16 {
        self.port
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

    pub fn region(&self) -> &str {
        REGION
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's output so far (for a failing test's message).
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Kills the server process (SIGKILL: like a crash; acknowledged objects are on disk) and
    /// waits for it. The port and data stay for [`S3Server::restart`]. No-op when stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Only the PID this value started; `wait` reaps it, so the PID is never reused
            // while we might still signal it.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server if it runs, then starts it again on the same port and data directory
    /// and waits until it answers.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.spawn_and_wait()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Where the server keeps the bucket's objects as files (tests look at what was stored).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self) -> Result<Command> {
        match self.kind {
            Kind::Versitygw => {
                let mut cmd = Command::new(&self.program);
                cmd.env("ROOT_ACCESS_KEY", &self.access_key)
                    .env("ROOT_SECRET_KEY", &self.secret_key)
                    .arg("--port")
                    .arg(format!("127.0.0.1:{}", self.port))
                    .args(["--region", REGION, "--health", "/health"]);
                if self.https {
                    cmd.arg("--cert")
                        .arg(self.dir.path().join("server.pem"))
                        .arg("--key")
                        .arg(self.dir.path().join("server.key"));
                }
                cmd.arg("posix").arg(self.data_dir());
                Ok(cmd)
            }
            Kind::S3proxy => {
                let props = self.dir.path().join("s3proxy.properties");
                let text = format!(
                    "s3proxy.endpoint=http://127.0.0.1:{port}\n\
                     s3proxy.authorization=aws-v2-or-v4\n\
                     s3proxy.identity={key}\n\
                     s3proxy.credential={secret}\n\
                     jclouds.provider=filesystem-nio2\n\
                     jclouds.filesystem.basedir={data}\n\
                     jclouds.regions={REGION}\n",
                    port = self.port,
                    key = self.access_key,
                    secret = self.secret_key,
                    data = self.data_dir().display(),
                );
                fs::write(&props, text)
                    .map_err(|e| err(format!("writing {}: {e}", props.display())))?;
                let mut cmd = Command::new("java");
                // A small heap and the quick JIT tier: the JVM starts faster on 2 shared cores.
                cmd.args([
                    "-Xmx512m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-jar",
                ])
                .arg(&self.program)
                .arg("--properties")
                .arg(&props);
                Ok(cmd)
            }
        }
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| err(format!("server log: {e}")))?;
        let log2 = log
            .try_clone()
            .map_err(|e| err(format!("server log: {e}")))?;
        let child = self
            .command()?
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| {
                err(format!(
                    "starting {} ({}): {e}",
                    self.kind,
                    self.program.display()
                ))
            })?;
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(err(format!(
                    "{} exited ({status}) before answering on port {}; its output:\n{}",
                    self.kind,
                    self.port,
                    tail(&self.log(), 40)
                )));
            }
            if self.ready() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                let log = tail(&self.log(), 40);
                self.stop();
                return Err(err(format!(
                    "{} did not answer on port {} within {READY_TIMEOUT:?}; its output:\n{log}",
                    self.kind, self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn ready(&self) -> bool {
        match self.kind {
            // versitygw has a health endpoint that needs no signature.
            // Over https through curl, which checks the server's certificate against its CA.
            Kind::Versitygw if self.https => self
                .signed("GET", "/health")
                .is_ok_and(|(code, _)| code == 200),
            Kind::Versitygw => http_status(self.port, "/health") == Some(200),
            // s3proxy has none: a signed ListBuckets answering 200 means it serves requests.
            Kind::S3proxy => {
                TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                    && self.signed("GET", "/").is_ok_and(|(code, _)| code == 200)
            }
        }
    }

    fn create_bucket(&self) -> Result<()> {
        let path = format!("/{}", self.bucket);
        let (code, body) = self.signed("PUT", &path)?;
        if code != 200 {
            return Err(err(format!(
                "{}: creating bucket {} answered {code}: {body}",
                self.kind, self.bucket
            )));
        }
        Ok(())
    }

    /// A SigV4-signed request without a body through curl: the status code and the body.
    fn signed(&self, method: &str, path: &str) -> Result<(u16, String)> {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
                "--max-time",
                "10",
                "-X",
                method,
            ])
            .args(["--aws-sigv4", &format!("aws:amz:{REGION}:s3")])
            // Through the argument list, not a file: visible in `ps` only on this test machine,
            // for a random, throw-away key.
            .args([
                "--user",
                &format!("{}:{}", self.access_key, self.secret_key),
            ])
            .args(["-H", &format!("x-amz-content-sha256: {EMPTY_SHA256}")])
            .args(self.curl_trust())
            .arg(format!("{}{path}", self.endpoint()))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| err(format!("running curl: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        let code = code.trim().parse().unwrap_or(0);
        Ok((code, body.to_string()))
    }

    /// curl's arguments to trust an https server's CA (none for http).
    fn curl_trust(&self) -> Vec<std::ffi::OsString> {
        if !self.https {
            return Vec::new();
        }
        vec!["--cacert".into(), self.dir.path().join("ca.pem").into()]
    }
}

/// A CA (`ca.pem`) and a certificate for `127.0.0.1` it signed (`server.pem`, `server.key`)
/// in `dir`, by the openssl command (P-256 keys, valid for two days).
fn make_certificates(dir: &Path) -> Result<()> {
    let openssl = |args: &[&str]| -> Result<()> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| err(format!("running openssl: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "openssl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    };
    let p256 = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = ["req", "-x509", "-days", "2", "-subj", "/CN=reel-s3test CA"];
    openssl(&[&ca[..], &p256[..], &["-keyout", "ca.key", "-out", "ca.pem"]].concat())?;
    openssl(
        &[
            &["req"],
            &p256[..],
            &[
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        ]
        .concat(),
    )?;
    fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| err(format!("server.ext: {e}")))?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    ])
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What [`FaultProxy`] does with a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward bytes both ways unchanged.
    None,
    /// Read the request, answer `503 Slow Down` with an S3 `SlowDown` error, close.
    Unavailable,
    /// Read the request, answer `507 Insufficient Storage` (what versitygw answers when its
    /// disk is full), close.
    InsufficientStorage,
    /// Wait this long, then forward: a slow server.
    Delay(Duration),
    /// Forward requests at once but hold back each answer to a PUT this long: a server that
    /// stores an object and answers late (a client's timeout then leaves the outcome unknown to
    /// it). Other requests pass unchanged, so only the upload itself meets the delay.
    DelayPutAnswers(Duration),
    /// Forward requests, but close the connection instead of passing on the answer to a PUT:
    /// the server stored the object, the client saw the connection drop.
    DropPutAnswers,
    /// Forward a PUT's head and at most this many bytes of its body, then close the connection
    /// both ways: a client killed (or a network lost) in the middle of an upload. The server
    /// sees a body shorter than its `Content-Length`, and must store nothing.
    CutPutBodies(usize),
}

/// A TCP proxy on a free loopback port in front of a server on `127.0.0.1:upstream`, injecting
/// [`Fault`]s per connection. Signed requests pass unchanged: the `Host` the client signed is
/// the one the server sees. Dropping it stops accepting and closes every connection.
pub struct FaultProxy {
    port: u16,
    shared: Arc<ProxyShared>,
    accept: Option<JoinHandle<()>>,
}

struct ProxyShared {
    upstream: u16,
    fault: Mutex<Fault>,
    /// Client sides of open connections, so a change of fault applies from the next request.
    open: Mutex<Vec<TcpStream>>,
    stopping: AtomicBool,
    unavailable_answers: AtomicU64,
}

impl FaultProxy {
    pub fn start(upstream: u16) -> Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| err(format!("fault proxy: binding a port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| err(format!("fault proxy: {e}")))?
            .port();
        let shared = Arc::new(ProxyShared {
            upstream,
            fault: Mutex::new(Fault::None),
            open: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            unavailable_answers: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = Arc::clone(&s);
                std::thread::spawn(move || s.serve(conn));
            }
        });
        Ok(FaultProxy {
            port,
            shared,
            accept: Some(accept),
        })
    }

    /// `http://127.0.0.1:PORT` of the proxy: the endpoint to give the client.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Applies `fault` to new connections and closes the open ones, so a client's next request
    /// meets it (a client reconnects; idle pooled connections see the close first).
    pub fn set(&self, fault: Fault) {
        *self
            .shared
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = fault;
        self.shared.close_open();
    }

    /// How many requests were answered with 503 so far.
    pub fn unavailable_answers(&self) -> u64 {
        self.shared.unavailable_answers.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stopping`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.shared.close_open();
    }
}

impl ProxyShared {
    fn close_open(&self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        for c in open.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn serve(&self, client: TcpStream) {
        let fault = *self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        match fault {
            Fault::Unavailable => {
                self.unavailable_answers.fetch_add(1, Ordering::SeqCst);
                answer_error(
                    client,
                    "503 Slow Down",
                    "SlowDown",
                    "Please reduce your request rate.",
                );
                return;
            }
            Fault::InsufficientStorage => {
                answer_error(
                    client,
                    "507 Insufficient Storage",
                    "InsufficientStorage",
                    "Insufficient storage to perform the operation.",
                );
                return;
            }
            Fault::Delay(d) => std::thread::sleep(d),
            Fault::None
            | Fault::DelayPutAnswers(_)
            | Fault::DropPutAnswers
            | Fault::CutPutBodies(_) => {}
        }
        let (watch_puts, put_delay) = match fault {
            Fault::DelayPutAnswers(d) => (true, Some(d)),
            Fault::DropPutAnswers => (true, None),
            _ => (false, None),
        };
        let Ok(upstream) = TcpStream::connect(("127.0.0.1", self.upstream)) else {
            return; // the client sees the connection close, as with a server that is down
        };
        let (Ok(c2), Ok(u2), Ok(tracked)) =
            (client.try_clone(), upstream.try_clone(), client.try_clone())
        else {
            return;
        };
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tracked);
        // Set when a PUT's head goes up, cleared when its answer comes down. The flag is set
        // before the request is forwarded, so the answer cannot overtake it.
        let put_pending = Arc::new(AtomicBool::new(false));
        let pending = Arc::clone(&put_pending);
        let cut_after = match fault {
            Fault::CutPutBodies(n) => Some(n),
            _ => None,
        };
        let up = std::thread::spawn(move || {
            // Body bytes of the current PUT forwarded so far, once its head has been seen.
            let mut put_body: Option<usize> = None;
            pump(c2, u2, |chunk| {
                // A client writes a request head in one piece; a body chunk starting with
                // "PUT " is not expected from the tests' data.
                let starts_put = chunk.starts_with(b"PUT ");
                if watch_puts && starts_put {
                    pending.store(true, Ordering::SeqCst);
                }
                let Some(limit) = cut_after else {
                    return Pass::Forward;
                };
                let body_in_chunk = if starts_put {
                    match chunk.windows(4).position(|w| w == b"\r\n\r\n") {
                        Some(end) => chunk.len() - (end + 4),
                        None => 0,
                    }
                } else {
                    chunk.len()
                };
                if starts_put {
                    put_body = Some(0);
                } else if [&b"GET "[..], b"HEAD ", b"POST ", b"DELETE "]
                    .iter()
                    .any(|m| chunk.starts_with(m))
                {
                    put_body = None; // another request on a kept-alive connection
                }
                match put_body.as_mut() {
                    Some(sent) => {
                        *sent += body_in_chunk;
                        if *sent > limit {
                            let keep = chunk.len() - (*sent - limit);
                            Pass::ForwardThenClose(keep)
                        } else {
                            Pass::Forward
                        }
                    }
                    None => Pass::Forward,
                }
            });
        });
        pump(upstream, client, |_| {
            if put_pending.swap(false, Ordering::SeqCst) {
                match put_delay {
                    Some(d) => std::thread::sleep(d),
                    None => return Pass::Close,
                }
            }
            Pass::Forward
        });
        let _ = up.join();
    }
}

/// What [`pump`] does with a chunk.
#[derive(PartialEq, Eq)]
enum Pass {
    Forward,
    Close,
    /// Forward the chunk's first bytes, then close.
    ForwardThenClose(usize),
}

/// Copies `from` to `to` until either side closes, then closes both directions. `before` sees
/// each chunk and decides whether it is forwarded or the connection is closed.
fn pump(mut from: TcpStream, mut to: TcpStream, mut before: impl FnMut(&[u8]) -> Pass) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let pass = before(&buf[..n]);
        let forward = match pass {
            Pass::Forward => n,
            Pass::Close => break,
            Pass::ForwardThenClose(keep) => keep.min(n),
        };
        if to.write_all(&buf[..forward]).is_err() || pass != Pass::Forward {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Reads one request from `client`, answers with an S3 error document, and closes.
fn answer_error(mut client: TcpStream, status: &str, code: &str, message: &str) {
    if drain_request(&mut client).is_ok() {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
             <Message>{message}</Message></Error>"
        );
        // One write: a reader may take the first segment for the whole answer.
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = client.write_all(answer.as_bytes());
    }
    let _ = client.shutdown(Shutdown::Both);
}

/// Reads one HTTP request (head and `Content-Length` body) and discards it, so that the client
/// finishes sending before it reads the answer.
fn drain_request(c: &mut TcpStream) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 << 10 || c.read(&mut byte)? == 0 {
            return Err(std::io::Error::other("no request head"));
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    std::io::copy(&mut Read::take(&mut *c, len), &mut std::io::sink())?;
    Ok(())
}

/// The installed server program for `kind`, or an error saying how to install it.
fn find_program(kind: Kind) -> Result<PathBuf> {
    find_program_in(&tools_dir(), kind)
}

fn find_program_in(dir: &Path, kind: Kind) -> Result<PathBuf> {
    let path = match kind {
        Kind::Versitygw => dir.join("bin/versitygw"),
        Kind::S3proxy => dir.join("s3proxy.jar"),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(err(format!(
            "{kind} is not installed: {} is missing. Install the S3 test servers with \
             `scripts/s3-servers.sh install` (versitygw v1.8.0 via `go install`, s3proxy 4.1.0 \
             from Maven Central, into $REEL_TOOLS_DIR, default ~/.cache/reel-tools); the S3 \
             tests never skip",
            path.display()
        )))
    }
}

fn find_on_path(program: &str, install: &str) -> Result<()> {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()));
    if found {
        Ok(())
    } else {
        Err(err(format!(
            "{program} is not on PATH; the S3 test servers need it ({install})"
        )))
    }
}

/// A free port on 127.0.0.1 outside the kernel's ephemeral range, so no connection made
/// before the server binds it can take it ([`reel_sysinfo::ports`]).
fn free_port() -> Result<u16> {
    reel_sysinfo::ports::unused_loopback_port()
        .map_err(|e| err(format!("finding a free port: {e}")))
}

/// `2 * bytes` hex digits from the kernel's random source.
fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // /dev/urandom never blocks and is always there on Linux; a failure is a broken machine.
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("reading /dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The status of a plain HTTP/1.0 GET, or `None` if nothing answered.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").ok()?;
    // The status line may come in several segments: read up to its end.
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") && line.len() < 256 {
        if s.read(&mut byte).ok()? == 0 {
            break;
        }
        line.push(byte[0]);
    }
    let line = std::str::from_utf8(&line).ok()?;
    line.split(' ').nth(1)?.parse().ok()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_keys_differ() {
        let (a, b) = (random_hex(8), random_hex(8));
        assert_eq!(a.len(), 16);
        assert_ne!(a, b);
    }

    #[test]
    fn missing_server_says_how_to_install() {
        let dir = tempfile::tempdir().unwrap();
        for kind in [Kind::Versitygw, Kind::S3proxy] {
            let e = find_program_in(dir.path(), kind).unwrap_err().to_string();
            assert!(e.contains("scripts/s3-servers.sh install"), "{e}");
            assert!(e.contains(&kind.to_string()), "{e}");
        }
    }

    #[test]
    fn starts_stops_and_restarts_versitygw() {
        start_stop_restart(Kind::Versitygw);
    }

    #[test]
    fn starts_stops_and_restarts_s3proxy() {
        start_stop_restart(Kind::S3proxy);
    }

    #[test]
    fn fault_proxy_forwards_and_answers_slowdown() {
        let s = S3Server::start(Kind::Versitygw).unwrap_or_else(|e| panic!("{e}"));
        let proxy = FaultProxy::start(s.port()).unwrap();
        let health = |p: &FaultProxy| {
            let port = p.endpoint().rsplit(':').next().unwrap().parse().unwrap();
            http_status(port, "/health")
        };
        assert_eq!(health(&proxy), Some(200));
        proxy.set(Fault::Unavailable);
        assert_eq!(health(&proxy), Some(503));
        assert_eq!(proxy.unavailable_answers(), 1);
        proxy.set(Fault::Delay(Duration::from_millis(200)));
        let t = Instant::now();
        assert_eq!(health(&proxy), Some(200));
        assert!(t.elapsed() >= Duration::from_millis(200));
    }

    fn start_stop_restart(kind: Kind) {
        let mut s = S3Server::start(kind).unwrap_or_else(|e| panic!("{e}"));
        let pid = s.pid().unwrap();
        assert_eq!(s.signed("GET", "/").unwrap().0, 200);
        s.stop();
        assert!(s.pid().is_none());
        assert!(TcpStream::connect(("127.0.0.1", s.port())).is_err());
        s.restart().unwrap();
        assert_ne!(s.pid(), Some(pid));
        // The bucket survived the restart.
        let (code, body) = s.signed("GET", &format!("/{}", s.bucket())).unwrap();
        assert_eq!(code, 200, "{body}");
    }
}
