//! Management-surface latency of a big library: READ ELEMENT STATUS of every slot over
//! iSCSI, MOVE MEDIUM (each move saves the inventory), the API's library and cartridge
//! listings, and the CPU cost of a /metrics scrape. The library is the `vtl-node` preset
//! (256 drives, 32 I/O slots) with 10,000 slots, or `--slots N` (every slot full).
//! Run with `bench/library/run.sh [--slots N]`; prints a markdown table.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi::params::Limits;
use reel_iscsi_net::{Client, ClientOptions};

const IQN: &str = "iqn.2026-11.org.reel:bench";
/// The library view and cartridge listing of a 60,000-slot library pass ureq's 10 MB default.
const BODY_LIMIT: u64 = 256 << 20;

/// Stops `reel serve` however the benchmark ends (a panic included).
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}
const RUNS: usize = 30;
/// Bytes each of the 256 drives writes (and reads back) in the streaming phase.
const STREAM_SIZE: &str = "48M";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn summary(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 95 / 100]),
        ms(*samples.last().unwrap()),
    )
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let slots: u32 = match args.iter().position(|a| a == "--slots") {
        Some(i) => {
            let n = args
                .get(i + 1)
                .and_then(|n| n.parse().ok())
                .expect("--slots N");
            args.drain(i..i + 2);
            n
        }
        None => 10_000,
    };
    // --data DIR: start from a copy of a data directory that already holds the cartridges
    // (one per slot, from an earlier `reel cartridges create`), to compare builds quickly.
    let seed: Option<String> = args.iter().position(|a| a == "--data").map(|i| {
        let dir = args.get(i + 1).cloned().expect("--data DIR");
        args.drain(i..i + 2);
        dir
    });
    let reel = args
        .first()
        .cloned()
        .unwrap_or_else(|| "target/release/reel".into());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[[iscsi.target]]\nname = \"{IQN}\"\nkind = \"library\"\npreset = \"vtl-node\"\nslots = {slots}\n"
        ),
    )
    .unwrap();
    let (portal, http) = (free_port(), free_port());
    // One cartridge per slot: every slot is full.
    let t = Instant::now();
    let created = match &seed {
        Some(seed) => Command::new("cp")
            .arg("-a")
            .arg(seed)
            .arg(dir.path().join("data"))
            .status()
            .unwrap(),
        None => Command::new(&reel)
            .args(["cartridges", "create", "--prefix", "B", "--count"])
            .arg(slots.to_string())
            .arg("--data")
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .status()
            .unwrap(),
    };
    assert!(created.success());
    let create_time = t.elapsed();
    let t = Instant::now();
    let mut child = Command::new(&reel)
        .args([
            "serve",
            "--cartridges",
            "0",
            "--listen",
            &format!("127.0.0.1:{portal}"),
            "--http",
            &format!("127.0.0.1:{http}"),
            "--data",
        ])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Server(child);
    for line in lines.by_ref() {
        if line.unwrap().starts_with("Ctrl-C") {
            break;
        }
    }
    let start_time = t.elapsed();
    std::thread::spawn(move || for _ in lines {});
    let password = std::fs::read_to_string(dir.path().join("data/initial-admin-password")).unwrap();
    let base = format!("http://127.0.0.1:{http}");
    let answer = ureq::post(format!("{base}/api/v1/login"))
        .header("Content-Type", "application/json")
        .send(serde_json::json!({"username": "admin", "password": password.trim()}).to_string())
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    let token: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let token = token["token"].as_str().unwrap().to_string();
    let get = |path: &str| {
        let t = Instant::now();
        let body = ureq::get(format!("{base}{path}"))
            .header("Authorization", format!("Bearer {token}"))
            .call()
            .unwrap()
            .into_body()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_string()
            .unwrap();
        (t.elapsed(), body.len())
    };

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (res, res_bytes, moves) = runtime.block_on(async {
        let client = Client::connect(
            format!("127.0.0.1:{portal}").parse().unwrap(),
            InitiatorLoginConfig {
                initiator_name: "iqn.2026-11.org.reel.bench:library".into(),
                initiator_alias: None,
                target_name: Some(IQN.into()),
                isid: [0x80, 0, 0, 0, 0, 9],
                tsih: 0,
                cid: 0,
                chap: None,
                mutual_chap: None,
                limits: Limits::initiator_default(),
                cmd_sn: 1,
            },
            ClientOptions::default(),
        )
        .await
        .unwrap();
        // All storage elements with volume tags (what `mtx status` asks for).
        let cdb = [0xB8, 0x12, 0, 0, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0xFF, 0, 0];
        let _ = client
            .execute(0, &cdb, Bytes::new(), 0xFF_FFFF)
            .await
            .unwrap();
        let mut samples = Vec::new();
        let mut bytes = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            let r = client
                .execute(0, &cdb, Bytes::new(), 0xFF_FFFF)
                .await
                .unwrap();
            samples.push(t.elapsed());
            assert_eq!(r.status, 0);
            bytes = r.data.len();
        }
        // MOVE MEDIUM: every slot is full, so the first slot's cartridge goes to the first
        // (empty) I/O slot and back. Each move saves the whole inventory durably first.
        let first_slot: u16 = 0x0401;
        let io_slot: u16 = 0x0301;
        let mut moves = Vec::new();
        for i in 0..RUNS {
            let (from, to) = if i % 2 == 0 {
                (first_slot, io_slot)
            } else {
                (io_slot, first_slot)
            };
            let (f, t2) = (from.to_be_bytes(), to.to_be_bytes());
            let cdb = [0xA5, 0, 0, 0, f[0], f[1], t2[0], t2[1], 0, 0, 0, 0];
            let t = Instant::now();
            let r = client.execute(0, &cdb, Bytes::new(), 0).await.unwrap();
            moves.push(t.elapsed());
            assert_eq!(r.status, 0, "MOVE MEDIUM {from:04x} -> {to:04x}");
        }
        (samples, bytes, moves)
    });

    let mut library = Vec::new();
    let mut cartridges = Vec::new();
    let (mut lib_bytes, mut cart_bytes) = (0, 0);
    for _ in 0..RUNS {
        let (d, n) = get(&format!("/api/v1/libraries/{IQN}"));
        library.push(d);
        lib_bytes = n;
        let (d, n) = get("/api/v1/cartridges");
        cartridges.push(d);
        cart_bytes = n;
    }
    // CPU of the server per /metrics scrape, as a share of one core at a 15 s interval.
    let pid = child.0.id();
    let cpu_of = || reel_bench::cpu::cpu_seconds(reel_bench::cpu::Proc::Pid(pid)).unwrap();
    let before = cpu_of();
    let started = Instant::now();
    let mut metrics_bytes = 0;
    let scrapes = 50;
    for _ in 0..scrapes {
        metrics_bytes = ureq::get(format!("{base}/metrics"))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap()
            .len();
    }
    let wall = started.elapsed();
    let cpu = cpu_of() - before;
    let per_scrape = cpu / scrapes as f64;

    // The console while 256 drives stream: reel-bench loads a cartridge into every drive and
    // writes (then reads back) on all of them at once, while this process asks what the
    // console asks — the library view and the monitor — and listens to the live stream.
    let streaming = args.get(1).cloned().map(|bench| {
        let work = dir.path().join("bench-work");
        let mut writer = Command::new(&bench)
            .args([
                "--targets",
                "reel",
                "--reel-addr",
                &format!("127.0.0.1:{portal}"),
                "--reel-iqn",
                IQN,
                "--reel-pid",
                &pid.to_string(),
                "--drives",
                "256",
                "--record-size",
                "256K",
                "--size",
                STREAM_SIZE,
                "--queue-depth",
                "2",
                "--window-blocks",
                "64",
                "--work-dir",
            ])
            .arg(&work)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(writer.stderr.take().unwrap());
        // Wait until the drives are loaded and writing, then measure until the writer ends.
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut log = Vec::new();
        for line in rx.iter() {
            let loaded = line.contains("loaded and in variable block mode");
            log.push(line);
            if loaded {
                break;
            }
        }
        let events =
            std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Instant, usize, usize)>::new()));
        {
            let (events, base, token) = (events.clone(), base.clone(), token.clone());
            std::thread::spawn(move || {
                let response = ureq::get(format!("{base}/api/v1/monitor/stream?token={token}"))
                    .call()
                    .unwrap();
                let reader = BufReader::new(response.into_body().into_reader());
                for line in reader.lines().map_while(Result::ok) {
                    if let Some(data) = line.strip_prefix("data:") {
                        let v: serde_json::Value =
                            serde_json::from_str(data.trim()).unwrap_or_default();
                        let moving = v["drives"].as_array().map_or(0, |d| {
                            d.iter()
                                .filter(|d| {
                                    d["write_bps"].as_f64().unwrap_or(0.0) > 0.0
                                        || d["read_bps"].as_f64().unwrap_or(0.0) > 0.0
                                })
                                .count()
                        });
                        events
                            .lock()
                            .unwrap()
                            .push((Instant::now(), data.len(), moving));
                    }
                }
            });
        }
        let (mut library, mut monitor) = (Vec::new(), Vec::new());
        let cpu0 = cpu_of();
        let t0 = Instant::now();
        while writer.try_wait().unwrap().is_none() {
            library.push(get(&format!("/api/v1/libraries/{IQN}")).0);
            monitor.push(get("/api/v1/monitor").0);
            std::thread::sleep(Duration::from_millis(200));
        }
        let seconds = t0.elapsed().as_secs_f64();
        let cores = (cpu_of() - cpu0) / seconds;
        log.extend(rx.try_iter());
        let ok = writer.wait().unwrap().success();
        assert!(ok, "reel-bench failed:\n{}", log.join("\n"));
        let events = events.lock().unwrap().clone();
        let gaps: Vec<Duration> = events.windows(2).map(|w| w[1].0 - w[0].0).collect();
        let most_moving = events.iter().map(|e| e.2).max().unwrap_or(0);
        let event_bytes = events.iter().map(|e| e.1).max().unwrap_or(0);
        let throughput: Vec<String> = log
            .iter()
            .filter(|l| l.contains("wrote") || l.contains("read and verified"))
            .cloned()
            .collect();
        (
            library,
            monitor,
            gaps,
            most_moving,
            event_bytes,
            seconds,
            cores,
            throughput,
        )
    });
    drop(child);

    println!(
        "{slots} cartridges {} in {:.1} s; `reel serve` ready in {:.1} s",
        if seed.is_some() { "copied" } else { "created" },
        create_time.as_secs_f64(),
        start_time.as_secs_f64()
    );
    println!();
    println!(
        "| What (vtl-node preset: 256 drives, {slots} full slots) | median ms | p95 ms | max ms | bytes |"
    );
    println!("|---|---:|---:|---:|---:|");
    let row = |what: &str, s: Vec<Duration>, bytes: usize| {
        let (m, p, x) = summary(s);
        println!("| {what} | {m:.1} | {p:.1} | {x:.1} | {bytes} |");
    };
    row(
        &format!("READ ELEMENT STATUS, all {slots} slots with VOLTAG (iSCSI, reel's initiator)"),
        res,
        res_bytes,
    );
    row(
        "MOVE MEDIUM slot to I/O slot or back (inventory saved durably)",
        moves,
        0,
    );
    row(
        &format!(
            "GET /api/v1/libraries/{{name}} ({} elements, 256 drives)",
            slots + 256 + 32 + 1
        ),
        library,
        lib_bytes,
    );
    row(
        &format!("GET /api/v1/cartridges ({slots} cartridges)"),
        cartridges,
        cart_bytes,
    );
    println!();
    println!(
        "/metrics: {scrapes} scrapes in {:.2} s, {metrics_bytes} bytes each; server CPU {:.1} ms per scrape = {:.3} % of one core at a 15 s scrape interval",
        wall.as_secs_f64(),
        per_scrape * 1e3,
        per_scrape / 15.0 * 100.0
    );
    if let Some((library, monitor, gaps, moving, event_bytes, seconds, cores, throughput)) =
        streaming
    {
        println!();
        println!(
            "While 256 drives streamed (reel-bench, {STREAM_SIZE} per drive written and read back, 256K records, 2 in flight per drive; {seconds:.0} s measured, reel at {cores:.2} cores):"
        );
        println!();
        println!("| What the console asks | median ms | p95 ms | max ms | samples |");
        println!("|---|---:|---:|---:|---:|");
        let n = (library.len(), monitor.len(), gaps.len());
        let row = |what: &str, s: Vec<Duration>, count: usize| {
            let (m, p, x) = summary(s);
            println!("| {what} | {m:.1} | {p:.1} | {x:.1} | {count} |");
        };
        row(
            "GET /api/v1/libraries/{name} (the library view)",
            library,
            n.0,
        );
        row(
            "GET /api/v1/monitor (the monitor's first paint)",
            monitor,
            n.1,
        );
        row(
            "interval between live-stream events (SSE, every 1 s)",
            gaps,
            n.2,
        );
        println!();
        println!(
            "Live stream: up to {moving} drives moving data in one event, events up to {event_bytes} bytes."
        );
        for line in throughput {
            println!("- {}", line.trim_start_matches("reel-bench:").trim());
        }
    }
}
