//! What the S3 test files share: starting a server and running checks against it, a back end on
//! its bucket under a fresh prefix, and test data.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reel_backend::{
    Backend, CacheConfig, Key, RemoteCheck, S3Backend, S3Config, S3Credentials, WriteBackCache,
    conformance,
};
use reel_s3test::{Kind, S3Server};

pub type Check = fn(&S3Server);

/// Starts a `kind` server and runs `checks` against it in turn, each timed; returns the server
/// for checks that need it mutably (a restart).
pub fn run_checks(kind: Kind, checks: &[(&str, Check)]) -> S3Server {
    let t = Instant::now();
    let server = S3Server::start(kind).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[{kind}] started in {:?} at {}",
        t.elapsed(),
        server.endpoint()
    );
    for (name, check) in checks {
        let t = Instant::now();
        check(&server);
        eprintln!("[{kind}] {name}: ok in {:?}", t.elapsed());
    }
    server
}

/// A prefix no other check or run uses.
pub fn fresh_prefix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "t{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The bucket of `server` under `prefix`, over plain HTTP with the server's credentials.
pub fn config(server: &S3Server, prefix: &str) -> S3Config {
    let mut c = S3Config::new(server.bucket(), prefix);
    c.endpoint = Some(server.endpoint());
    c.region = server.region().to_string();
    c.allow_http = true;
    c.credentials = S3Credentials::Static {
        access_key_id: server.access_key().to_string(),
        secret_access_key: server.secret_key().to_string(),
        session_token: None,
    };
    // Long enough for the restart check's 2-second outage, short enough to fail a broken run.
    c.retry_window = Duration::from_secs(60);
    c.request_timeout = Duration::from_secs(30);
    c
}

pub fn backend(server: &S3Server, prefix: &str) -> S3Backend {
    S3Backend::open(&config(server, prefix)).unwrap_or_else(|e| panic!("open: {e}"))
}

/// The back-end conformance suite through the write-back cache (what `reel serve` runs), each
/// check's cache in a temporary directory over a fresh `remote()`.
pub fn cached_conformance(remote: &dyn Fn() -> Arc<dyn Backend>) {
    let dirs = Mutex::new(Vec::new());
    conformance::run_all(&|| {
        let dir = tempfile::tempdir().expect("a cache directory");
        let cache = WriteBackCache::open(
            dir.path(),
            remote(),
            CacheConfig {
                // The key-conflict checks need the remote asked at put time.
                remote_check: RemoteCheck::Always,
                ..CacheConfig::default()
            },
        )
        .expect("the cache opens");
        dirs.lock().unwrap().push(dir);
        Box::new(cache)
    });
}

pub fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}
