//! A login flood while a drive streams, against a real `reel serve`: one client sends 10,000
//! bad logins with 1 MB usernames while reel's own initiator writes to a tape drive over
//! iSCSI. The server must stay up and answer, the data directory must not grow with the
//! flood (under 10 MB beyond what the writer's own data adds), and the writer must keep
//! writing.
//!
//! The writer's throughput with and without the flood is printed. On a shared 2-core machine
//! (the flood's client competes with reel and the writer for the same cores) it is too noisy
//! for a 10 % assertion in CI, so the test only rejects a pathological slowdown (below a
//! quarter of the baseline); `REEL_FLOOD_MAX_SLOWDOWN=0.10` asserts the 10 % bound
//! (`bench/login-flood/run.sh` runs that).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_iscsi_net::Client;
use reel_scsi::initiator::smc::{
    ElementType, move_medium, parse_element_status, read_element_status,
};
use reel_scsi::initiator::spc::TEST_UNIT_READY;
use reel_scsi::initiator::ssc::{Transfer, write6};
use reel_testkit::{Server, free_portal, good, login_config, ready};

const IQN: &str = "iqn.2026-11.org.reel:library";
/// `REEL_FLOOD_ATTEMPTS` makes it shorter (to watch an older reel fail it in minutes).
fn attempts() -> usize {
    std::env::var("REEL_FLOOD_ATTEMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}
/// Connections the client keeps busy at once (`REEL_FLOOD_THREADS`, default 2: one more than
/// the server lets one client log in with at once).
fn flood_threads() -> usize {
    std::env::var("REEL_FLOOD_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}
const RECORD: u32 = 256 << 10;
const BASELINE: Duration = Duration::from_secs(10);

async fn connect(portal: SocketAddr) -> Client {
    let config = login_config("iqn.2026-11.org.reel.test:flood", Some(IQN), 2);
    let client = reel_testkit::connect(portal, config).await.unwrap();
    ready(&client, 0..5).await;
    client
}

/// Loads the cartridge of the first full slot into the first drive (LUN 1).
async fn load_drive(client: &Client) {
    let first = |kind: ElementType| async move {
        let cdb = read_element_status(kind, 0xFFFF);
        let data = good(client, 0, &cdb, Bytes::new(), 0xFFFF).await;
        parse_element_status(&data).unwrap()[0].address
    };
    let slot = first(ElementType::STORAGE).await;
    let drive = first(ElementType::DATA_TRANSFER).await;
    good(client, 0, &move_medium(0, slot, drive), Bytes::new(), 0).await;
    // The unit attention for the medium change, then ready.
    let _ = client.execute(1, &TEST_UNIT_READY, Bytes::new(), 0).await;
    good(client, 1, &TEST_UNIT_READY, Bytes::new(), 0).await;
}

fn du(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(path).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            du(&entry.path())
        } else {
            meta.blocks() * 512
        };
    }
    total
}

/// One bad login with a 1 MB username over its own connection; the status, if one came (the
/// server may close the connection on a refused body before the client has sent it).
fn bad_login(addr: &str, body: &Arc<Vec<u8>>) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    let _ = stream.write_all(body);
    let mut line = String::new();
    BufReader::new(&mut stream).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU seconds (user + system) of process `pid`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name in parentheses: fields 14 and 15 (utime, stime) in clock ticks.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The flood's client, run by the flood test in a process of its own (at nice 19). Without
/// `REEL_FLOOD_CLIENT_OF` (any ordinary test run) it has nothing to do.
#[test]
fn flood_client() {
    let Ok(addr) = std::env::var("REEL_FLOOD_CLIENT_OF") else {
        return;
    };
    let body = Arc::new(
        serde_json::json!({"username": "u".repeat(1 << 20), "password": "wrong-password"})
            .to_string()
            .into_bytes(),
    );
    let attempts = attempts() as u64;
    let next = AtomicU64::new(0);
    let statuses = parking_lot::Mutex::new(std::collections::BTreeMap::<String, u64>::new());
    std::thread::scope(|s| {
        for _ in 0..flood_threads() {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < attempts {
                    let key =
                        bad_login(&addr, &body).map_or("no answer".to_string(), |s| s.to_string());
                    *statuses.lock().entry(key).or_default() += 1;
                }
            });
        }
    });
    println!(
        "statuses: {}",
        serde_json::to_string(&statuses.into_inner()).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_flood_does_not_stall_a_streaming_drive_or_fill_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let portal = free_portal();
    let server = Server::start(&data, portal, &[]);
    let base = server.http.clone().unwrap();
    let addr = base.trim_start_matches("http://").to_string();
    let admin = common::api::admin(&server, &data);

    let client = Arc::new(connect(portal).await);
    load_drive(&client).await;

    // The writer: 256 KiB records, the same ones over and over (the store dedups them, so its
    // own growth is small and steady), counted as they complete.
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, written, stop) = (client.clone(), written.clone(), stop.clone());
        tokio::spawn(async move {
            let record = Bytes::from(
                (0..RECORD as usize)
                    .map(|i| (i * 7 % 251) as u8)
                    .collect::<Vec<u8>>(),
            );
            let cdb = write6(Transfer::Variable(RECORD));
            while !stop.load(Ordering::Relaxed) {
                good(&client, 1, &cdb, record.clone(), 0).await;
                written.fetch_add(u64::from(RECORD), Ordering::Relaxed);
            }
        })
    };
    // Warm up, then the baseline: the writer alone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (bytes0, disk0, t0) = (written.load(Ordering::Relaxed), du(&data), Instant::now());
    let cpu0 = cpu_seconds(server.pid());
    tokio::time::sleep(BASELINE).await;
    let (bytes1, disk1, t1) = (written.load(Ordering::Relaxed), du(&data), Instant::now());
    let baseline_cpu = cpu_seconds(server.pid()) - cpu0;
    let baseline_rate = (bytes1 - bytes0) as f64 / (t1 - t0).as_secs_f64();
    let baseline_growth_rate = disk1.saturating_sub(disk0) as f64 / (t1 - t0).as_secs_f64();

    // The flood: 10,000 bad logins with 1 MB usernames from one client address.
    let attempts = attempts();
    // The client runs in its own process at nice 19: on a machine this small its own CPU
    // (10 GB of usernames to send) would otherwise be what slows the writer, not reel's.
    let cpu1 = cpu_seconds(server.pid());
    let flood = {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new("nice")
                .args(["-n", "19"])
                .arg(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "flood_client",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env("REEL_FLOOD_CLIENT_OF", &addr)
                .env("REEL_FLOOD_ATTEMPTS", attempts.to_string())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(out.status.success(), "the flood client: {text}");
            let line = text
                .lines()
                .find_map(|l| l.split_once("statuses: ").map(|(_, tally)| tally))
                .unwrap_or_else(|| panic!("the flood client's tally: {text}"))
                .to_string();
            serde_json::from_str::<std::collections::BTreeMap<String, u64>>(&line).unwrap()
        })
    };
    let statuses = flood.await.unwrap();
    let (bytes2, disk2, t2) = (written.load(Ordering::Relaxed), du(&data), Instant::now());
    let flood_cpu = cpu_seconds(server.pid()) - cpu1;
    let flood_secs = (t2 - t1).as_secs_f64();
    let flood_rate = (bytes2 - bytes1) as f64 / flood_secs;
    let growth = disk2.saturating_sub(disk1) as f64;
    let attack_growth = growth - baseline_growth_rate * flood_secs;
    let slowdown = 1.0 - flood_rate / baseline_rate;
    println!(
        "baseline: {:.1} MB/s, reel {:.0} % CPU, data dir +{:.2} MB in {:.1} s\n\
         flood: {attempts} logins in {flood_secs:.1} s ({statuses:?}), reel {:.0} % CPU; \
         writer {:.1} MB/s ({:+.1} %); data dir +{:.2} MB ({:.2} MB beyond the writer's own rate)",
        baseline_rate / 1e6,
        baseline_cpu / (t1 - t0).as_secs_f64() * 100.0,
        disk1.saturating_sub(disk0) as f64 / 1e6,
        (t1 - t0).as_secs_f64(),
        flood_cpu / flood_secs * 100.0,
        flood_rate / 1e6,
        -slowdown * 100.0,
        growth / 1e6,
        attack_growth / 1e6,
    );
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();

    // Nothing of the flood was kept: under 10 MB beyond the writer's own growth.
    assert!(
        attack_growth < 10e6,
        "the data directory grew {:.1} MB with the flood",
        attack_growth / 1e6
    );
    // None got through to a password check with its megabyte, none broke the server.
    assert!(
        statuses
            .keys()
            .all(|k| k == "413" || k == "429" || k == "no answer"),
        "{statuses:?}"
    );
    assert!(
        statuses.get("429").copied().unwrap_or(0) > (attempts / 2) as u64,
        "most are turned away by the rate limit: {statuses:?}"
    );
    // The writer kept going.
    let max_slowdown: f64 = std::env::var("REEL_FLOOD_MAX_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.75);
    assert!(
        slowdown <= max_slowdown,
        "the writer slowed by {:.1} % during the flood (at most {:.0} %)",
        slowdown * 100.0,
        max_slowdown * 100.0
    );
    // The server is up and answers: the admin's session works, and the audit log holds few
    // of the flood's attempts, each with a bounded name.
    let events = admin
        .events(&reel_api::monitor::EventsQuery {
            limit: Some(10_000),
            before: None,
        })
        .unwrap();
    assert!(events.len() < 100, "{} audit events", events.len());
    assert!(
        events
            .iter()
            .all(|e| serde_json::to_string(e).unwrap().len() < 2000),
        "audit events stay small"
    );
    drop(client);
    server.stop();
}
