//! SIGKILL during lease renewal, against a real versitygw (issue 13's kill tests: "writes,
//! uploads, reclaim and lease renewal"; the first three are `reel-chunkstore`'s
//! `tests/crash_s3.rs`, whose child has no lease: leases live in this crate).
//!
//! A child process (this test binary, running the ignored `lease_kill_child`) takes a lease
//! with a two-second time to live and renews it back to back, journalling each renewal before
//! (`r <n>`) and after (`R <n>`) its compare-and-swap write; the parent kills it at a random
//! moment (a quarter or more of the kills land inside a renewal). After each kill the lease in
//! the bucket must be readable, the child's, and at the renewal the journal acknowledged or the
//! one in flight; a second node must be refused while it is live. Every twelfth kill a standby
//! waits the time to live out and takes the lease over (it names the dead holder), then
//! releases it, and the next child takes it back at once. `REEL_LEASE_KILLS` sets the kills
//! (default 60; about 40 s).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reel_backend::{S3Backend, S3Config, S3Credentials, VersionedObjects};
use reel_s3test::{Kind, S3Server};

use super::tests::member;
use super::*;

const CHILD_ENV: &str = "REEL_LEASE_KILL_CHILD";
/// Long enough that a check right after a kill finds the lease live on a loaded host.
const TTL_MS: u64 = 2000;
const CHILD_NODE_ID: &str = "child";

/// The bucket, as the child finds it in its environment: `endpoint|bucket|access|secret|journal`.
struct Spec {
    endpoint: String,
    bucket: String,
    access: String,
    secret: String,
    journal: PathBuf,
}

impl Spec {
    fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.endpoint,
            self.bucket,
            self.access,
            self.secret,
            self.journal.display()
        )
    }

    fn decode(s: &str) -> Spec {
        let p: Vec<&str> = s.split('|').collect();
        Spec {
            endpoint: p[0].into(),
            bucket: p[1].into(),
            access: p[2].into(),
            secret: p[3].into(),
            journal: PathBuf::from(p[4]),
        }
    }

    fn objects(&self) -> Arc<dyn VersionedObjects> {
        let mut config = S3Config::new(self.bucket.clone(), String::new());
        config.endpoint = Some(self.endpoint.clone());
        config.allow_http = true;
        config.credentials = S3Credentials::Static {
            access_key_id: self.access.clone(),
            secret_access_key: self.secret.clone(),
            session_token: None,
        };
        Arc::new(S3Backend::open(&config).expect("open the bucket"))
    }
}

fn key() -> Key {
    lease_key("kill/")
}

/// Appends one line to the journal and makes it durable before going on.
fn journal_line(path: &Path, line: &str) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open the journal");
    f.write_all(format!("{line}\n").as_bytes())
        .expect("write the journal");
    f.sync_data().expect("fsync the journal");
}

#[test]
#[ignore = "the child of the lease kill test; it starts it with its parameters"]
fn lease_kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("lease_kill_child runs only as the child of the lease kill test");
        return;
    };
    let spec = Spec::decode(&spec);
    let mut held = acquire(
        spec.objects(),
        key(),
        &member(CHILD_NODE_ID, false, TTL_MS),
        &mut |_| {},
    )
    .expect("the child takes its lease (free, released or its own)");
    journal_line(&spec.journal, "A 0");
    let mut seed = std::process::id() as u64 | 1;
    loop {
        let n = held.body.renewal + 1;
        journal_line(&spec.journal, &format!("r {n}"));
        match held.renew() {
            Ok(true) => journal_line(&spec.journal, &format!("R {n}")),
            Ok(false) => panic!("a renewal failed on a healthy server"),
            Err(taken) => panic!("{taken}"),
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_micros(seed % 3000));
    }
}

/// What the killed child's journal says.
#[derive(Debug, Default)]
struct Seen {
    acquired: bool,
    /// The last renewal whose write returned.
    acknowledged: u64,
    /// A renewal begun and not returned when the kill came.
    in_flight: Option<u64>,
}

fn read_journal(path: &Path) -> Seen {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut seen = Seen::default();
    // A torn last line (no newline) is a write the kill interrupted: it never happened.
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    for line in complete.lines() {
        let (tag, n) = line.split_once(' ').expect("journal line");
        let n: u64 = n.parse().expect("journal number");
        match tag {
            "A" => seen.acquired = true,
            "r" => seen.in_flight = Some(n),
            "R" => {
                seen.acknowledged = n;
                seen.in_flight = None;
            }
            other => panic!("unknown journal line {other:?}"),
        }
    }
    seen
}

#[derive(Debug, Default)]
struct Tally {
    kills: u64,
    killed_in_renewal: u64,
    killed_before_acquiring: u64,
    renewals: u64,
    takeovers: u64,
}

#[test]
fn sigkill_during_lease_renewal_leaves_a_readable_lease_that_fences_and_expires() {
    let kills: u64 = std::env::var("REEL_LEASE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let server = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let spec = Spec {
        endpoint: server.endpoint(),
        bucket: server.bucket().into(),
        access: server.access_key().into(),
        secret: server.secret_key().into(),
        journal: dir.path().join("journal"),
    };
    let objects = spec.objects();
    let other = member("other", false, TTL_MS);
    let standby = member("other", true, TTL_MS);
    let mut seed = 0x1EA5E_u64;
    let mut tally = Tally::default();
    for i in 0..kills {
        let _ = std::fs::remove_file(&spec.journal);
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "cluster::lease_kill_tests::lease_kill_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, spec.encode())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(250 + seed % 300));
        let mut child = child;
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "kill {i}: the child exited by itself ({status}):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        tally.kills += 1;
        let seen = read_journal(&spec.journal);
        tally.renewals += seen.acknowledged;
        if !seen.acquired {
            tally.killed_before_acquiring += 1;
            continue;
        }
        if seen.in_flight.is_some() {
            tally.killed_in_renewal += 1;
        }

        // Readable, the child's, and at the acknowledged renewal or the one in flight.
        let (bytes, _) = objects
            .read_versioned(&key())
            .unwrap()
            .expect("the lease is in the bucket");
        let body: LeaseBody = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("kill {i}: the lease does not parse: {e}"));
        assert_eq!(body.node_id, CHILD_NODE_ID, "kill {i}: {body:?}");
        assert!(!body.released, "kill {i}: {body:?}");
        let allowed = [Some(seen.acknowledged), seen.in_flight];
        assert!(
            allowed.contains(&Some(body.renewal)),
            "kill {i}: the bucket holds renewal {} after {seen:?}",
            body.renewal
        );
        // Live: another node is refused at once.
        match acquire(objects.clone(), key(), &other, &mut |_| {}) {
            Err(Refusal::Live { node, .. }) => assert_eq!(node, format!("node-{CHILD_NODE_ID}")),
            other => panic!(
                "kill {i}: a second node was not refused: {:?}",
                other.map(|h| h.body)
            ),
        }
        if i % 12 == 11 {
            // Nobody renews it now: a standby takes it over after a whole time to live.
            let began = Instant::now();
            let held = acquire(objects.clone(), key(), &standby, &mut |_| {})
                .unwrap_or_else(|e| panic!("kill {i}: the standby did not take over: {e}"));
            assert!(
                began.elapsed() >= Duration::from_millis(TTL_MS),
                "kill {i}: taken over after {:?}, before the time to live",
                began.elapsed()
            );
            assert_eq!(held.taken_from.as_deref(), Some(CHILD_NODE_ID));
            held.release().unwrap();
            tally.takeovers += 1;
        }
    }
    eprintln!("{tally:?}");
    assert_eq!(tally.kills, kills);
    if kills >= 30 {
        assert!(
            tally.killed_in_renewal * 4 >= kills,
            "only {} of {kills} kills landed inside a renewal",
            tally.killed_in_renewal
        );
        assert!(
            tally.renewals >= kills,
            "only {} renewals in {kills} runs",
            tally.renewals
        );
        assert!(tally.takeovers >= kills / 12);
    }
}
