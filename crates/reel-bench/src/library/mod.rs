//! `reel bench library`: management-surface latency of a big library — READ ELEMENT STATUS of
//! every slot over iSCSI, MOVE MEDIUM (each move saves the inventory), the API's library and
//! cartridge listings, and the CPU cost of a /metrics scrape — then, unless `--no-stream`,
//! what the console asks while 256 drives stream (`reel bench tape` against the same server).
//! The library is the `vtl-node` preset (256 drives, 32 I/O slots) with 10,000 slots, or
//! `--slots N`, every slot full. Prints Markdown tables; see BENCHMARKING.md.

mod chart;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use bytes::Bytes;
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi_net::{Client, ClientOptions};
use reel_scsi::initiator::smc;
use reel_sysinfo::Proc;
use serde::{Deserialize, Serialize};

use crate::harness::procs::{self, ReelServe};
use crate::harness::stats::percentile;
use crate::harness::{self, ReelToml};

const IQN: &str = "iqn.2026-11.org.reel:bench";
/// The library view and cartridge listing of a 60,000-slot library pass the API client's
/// 10 MB default.
const BODY_LIMIT: u64 = 256 << 20;
const RUNS: usize = 30;
/// Bytes each of the 256 drives writes (and reads back) in the streaming phase.
const STREAM_SIZE: &str = "48M";
const METRICS_SCRAPES: usize = 50;

/// Management-surface latency of a big library (see BENCHMARKING.md).
#[derive(clap::Args, Debug, Clone)]
pub struct LibraryArgs {
    /// Storage slots of the library, each holding a cartridge.
    #[arg(long, default_value_t = 10_000)]
    pub slots: u32,
    /// Start from a copy of DIR, a data directory that already holds the cartridges (one per
    /// slot, from an earlier `reel cartridges create`), to compare builds quickly.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Skip the streaming phase (256 drives writing while the console asks).
    #[arg(long)]
    pub no_stream: bool,
    /// The `reel` binary to start (default: `reel` next to this program).
    #[arg(long, value_name = "PATH")]
    pub reel_bin: Option<PathBuf>,
    /// --json, --markdown (the tables; they are printed too), --charts (the latency of each
    /// request), --from-json.
    #[command(flatten)]
    pub report: harness::ReportFlags,
}

/// Latency of one kind of request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Latency {
    /// What the table says.
    pub what: String,
    /// What the chart's axis says.
    pub short: String,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    /// Bytes of the answer (the first table) or samples taken (the streaming table).
    pub count: usize,
}

impl Latency {
    fn new(what: String, short: &str, samples: &[Duration], count: usize) -> Latency {
        let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        let at = |p| percentile(&ms, p).unwrap_or(f64::NAN);
        Latency {
            what,
            short: short.into(),
            median_ms: at(50),
            p95_ms: at(95),
            max_ms: at(100),
            count,
        }
    }
}

/// The console while 256 drives stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Streaming {
    pub seconds: f64,
    /// reel's CPU over the measured time, in cores.
    pub cores: f64,
    pub requests: Vec<Latency>,
    /// Most drives moving data in one live-stream event.
    pub most_moving: usize,
    pub event_bytes: usize,
    /// The tape benchmark's throughput lines.
    pub throughput: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub slots: u32,
    /// The cartridges were copied from `--data` rather than created.
    pub copied: bool,
    pub create_s: f64,
    pub start_s: f64,
    pub requests: Vec<Latency>,
    pub metrics_scrapes: usize,
    pub metrics_s: f64,
    pub metrics_bytes: usize,
    /// Server CPU seconds per /metrics scrape.
    pub metrics_cpu_s: f64,
    pub streaming: Option<Streaming>,
}

/// `reel bench library`: measure (or read `--from-json`), print the tables, write what was
/// asked for.
pub fn run(args: LibraryArgs) -> anyhow::Result<()> {
    let report = args
        .report
        .measure_or_replay("reel bench library", || measure(&args))?;
    let text = args
        .report
        .write(&report, &chart::charts(&report), |links| {
            markdown(&report, links)
        })?;
    print!("{text}");
    Ok(())
}

/// The timed GETs of API paths as the admin.
struct Api {
    client: reel_api::Client,
}

impl Api {
    /// Logs in to reel's API at `base` as the admin.
    fn log_in(base: &str, password: &str) -> anyhow::Result<Api> {
        let client =
            reel_api::Client::log_in(base, reel_api::ClientOptions::default(), "admin", password)
                .with_context(|| format!("logging in to reel's API at {base}"))?;
        Ok(Api {
            client: client.with_body_limit(BODY_LIMIT),
        })
    }

    /// One GET of `path`, timed from sending the request to the last byte of the answer:
    /// (time, bytes of the answer).
    fn get(&self, path: &str) -> anyhow::Result<(Duration, usize)> {
        let t = Instant::now();
        let answer = self.client.raw("GET", path, None)?;
        let elapsed = t.elapsed();
        ensure!(
            answer.is_success() && !answer.text.is_empty(),
            "GET {path}: status {}, {} bytes",
            answer.status,
            answer.text.len()
        );
        Ok((elapsed, answer.text.len()))
    }
}

fn measure(args: &LibraryArgs) -> anyhow::Result<Report> {
    let slots = args.slots;
    let reel = procs::reel_binary(args.reel_bin.as_deref())?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let data = dir.path().join("data");
    let (portal, http) = (procs::free_loopback()?, procs::free_loopback()?);
    let config = dir.path().join("reel.toml");
    ReelToml {
        written_by: "reel bench library".into(),
        listen: portal,
        queue_depth: 64,
        limits: None,
        // The streaming phase opens a session per drive (256) and one for the changer.
        max_sessions: Some(300),
        http: Some(http),
        targets: vec![format!(
            "name = \"{IQN}\"\nkind = \"library\"\npreset = \"vtl-node\"\nslots = {slots}\n"
        )],
    }
    .write(&config)?;
    // One cartridge per slot: every slot is full.
    let t = Instant::now();
    let created = match &args.data {
        Some(seed) => Command::new("cp").arg("-a").arg(seed).arg(&data).status(),
        None => Command::new(&reel)
            .args(["cartridges", "create", "--prefix", "B", "--count"])
            .arg(slots.to_string())
            .arg("--data")
            .arg(&data)
            .stdout(Stdio::null())
            .status(),
    }
    .context("creating the cartridges")?;
    ensure!(
        created.success(),
        "creating the cartridges failed ({created})"
    );
    let create_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let server = ReelServe::start(
        &reel,
        &config,
        &data,
        &dir.path().join("reel.log"),
        portal,
        &[],
    )?;
    let password = ReelServe::initial_admin_password(&data, Duration::from_secs(60))?;
    let start_s = t.elapsed().as_secs_f64();
    let api = Api::log_in(&format!("http://{http}"), &password)?;

    let runtime = harness::runtime("initiator", 2)?;
    let (res, res_bytes, moves) = runtime.block_on(changer_requests(portal))?;

    let mut library = Vec::new();
    let mut cartridges = Vec::new();
    let (mut lib_bytes, mut cart_bytes) = (0, 0);
    for _ in 0..RUNS {
        let (d, n) = api.get(&format!("/api/v1/libraries/{IQN}"))?;
        library.push(d);
        lib_bytes = n;
        let (d, n) = api.get("/api/v1/cartridges")?;
        cartridges.push(d);
        cart_bytes = n;
    }
    // CPU of the server per /metrics scrape, as a share of one core at a 15 s interval.
    let pid = server.pid();
    let cpu_of = || reel_sysinfo::cpu_seconds(Proc::Pid(pid));
    let before = cpu_of()?;
    let started = Instant::now();
    let mut metrics_bytes = 0;
    // As Prometheus scrapes: without a token.
    let scraper = api.client.anonymous();
    for _ in 0..METRICS_SCRAPES {
        metrics_bytes = scraper.metrics()?.len();
    }
    let metrics_s = started.elapsed().as_secs_f64();
    let metrics_cpu_s = (cpu_of()? - before) / METRICS_SCRAPES as f64;

    let streaming = if args.no_stream {
        None
    } else {
        Some(stream(
            &reel,
            &api,
            portal,
            pid,
            &dir.path().join("bench-work"),
        )?)
    };
    server.stop(Duration::from_secs(120))?;

    Ok(Report {
        tool: format!("reel bench library {}", env!("CARGO_PKG_VERSION")),
        slots,
        copied: args.data.is_some(),
        create_s,
        start_s,
        requests: vec![
            Latency::new(
                format!(
                    "READ ELEMENT STATUS, all {slots} slots with VOLTAG (iSCSI, reel's initiator)"
                ),
                "element status",
                &res,
                res_bytes,
            ),
            Latency::new(
                "MOVE MEDIUM slot to I/O slot or back (inventory saved durably)".into(),
                "move medium",
                &moves,
                0,
            ),
            Latency::new(
                format!(
                    "GET /api/v1/libraries/{{name}} ({} elements, 256 drives)",
                    slots + 256 + 32 + 1
                ),
                "library view",
                &library,
                lib_bytes,
            ),
            Latency::new(
                format!("GET /api/v1/cartridges ({slots} cartridges)"),
                "cartridges",
                &cartridges,
                cart_bytes,
            ),
        ],
        metrics_scrapes: METRICS_SCRAPES,
        metrics_s,
        metrics_bytes,
        metrics_cpu_s,
        streaming,
    })
}

/// READ ELEMENT STATUS of every slot and MOVE MEDIUM there and back, `RUNS` times each:
/// (element status times, its answer's bytes, move times).
async fn changer_requests(
    portal: SocketAddr,
) -> anyhow::Result<(Vec<Duration>, usize, Vec<Duration>)> {
    let client = Client::connect(
        portal,
        InitiatorLoginConfig::new_session("iqn.2026-11.org.reel.bench:library", Some(IQN), 9),
        ClientOptions::default(),
    )
    .await?;
    // All storage elements with volume tags (what `mtx status` asks for).
    let cdb = smc::read_element_status(smc::ElementType::STORAGE, 0xFF_FFFF);
    let _ = client.execute(0, &cdb, Bytes::new(), 0xFF_FFFF).await?;
    let mut samples = Vec::new();
    let mut bytes = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let r = client.execute(0, &cdb, Bytes::new(), 0xFF_FFFF).await?;
        samples.push(t.elapsed());
        ensure!(r.status == 0, "READ ELEMENT STATUS: status {:#x}", r.status);
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
        let cdb = smc::move_medium(0, from, to);
        let t = Instant::now();
        let r = client.execute(0, &cdb, Bytes::new(), 0).await?;
        moves.push(t.elapsed());
        ensure!(r.status == 0, "MOVE MEDIUM {from:04x} -> {to:04x}");
    }
    Ok((samples, bytes, moves))
}

/// The console while 256 drives stream: `reel bench tape` loads a cartridge into every drive
/// and writes (then reads back) on all of them at once, while this process asks what the
/// console asks — the library view and the monitor — and listens to the live stream.
fn stream(
    reel: &Path,
    api: &Api,
    portal: SocketAddr,
    pid: u32,
    work: &Path,
) -> anyhow::Result<Streaming> {
    let mut writer = Command::new(reel)
        .args(["bench", "tape", "--targets", "reel", "--reel-addr"])
        .arg(portal.to_string())
        .args(["--reel-iqn", IQN, "--reel-pid", &pid.to_string()])
        .args([
            "--drives",
            "256",
            "--record-size",
            "256K",
            "--size",
            STREAM_SIZE,
        ])
        .args(["--queue-depth", "2", "--window-blocks", "64", "--work-dir"])
        .arg(work)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting reel bench tape")?;
    let stderr = BufReader::new(writer.stderr.take().context("no stderr")?);
    // Wait until the drives are loaded and writing, then measure until the writer ends.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    for line in &rx {
        let loaded = line.contains("loaded and in variable block mode");
        log.push(line);
        if loaded {
            break;
        }
    }
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Instant, usize, usize)>::new()));
    {
        let events = events.clone();
        let samples = api.client.monitor_stream()?;
        std::thread::spawn(move || {
            for sample in samples.map_while(Result::ok) {
                let moving = sample
                    .drives
                    .iter()
                    .filter(|d| d.write_bps > 0.0 || d.read_bps > 0.0)
                    .count();
                // The event's JSON as the server wrote it: reel_api::MonitorSample both ways.
                let bytes = serde_json::to_string(&sample).map_or(0, |json| json.len());
                if let Ok(mut events) = events.lock() {
                    events.push((Instant::now(), bytes, moving));
                }
            }
        });
    }
    let (mut library, mut monitor) = (Vec::new(), Vec::new());
    let cpu_of = || reel_sysinfo::cpu_seconds(Proc::Pid(pid));
    let cpu0 = cpu_of()?;
    let t0 = Instant::now();
    while writer.try_wait()?.is_none() {
        library.push(api.get(&format!("/api/v1/libraries/{IQN}"))?.0);
        monitor.push(api.get("/api/v1/monitor")?.0);
        std::thread::sleep(Duration::from_millis(200));
    }
    let seconds = t0.elapsed().as_secs_f64();
    let cores = (cpu_of()? - cpu0) / seconds;
    log.extend(rx.try_iter());
    if !writer.wait()?.success() {
        bail!("reel bench tape failed:\n{}", log.join("\n"));
    }
    let events = events
        .lock()
        .map_err(|_| anyhow!("the stream reader panicked"))?
        .clone();
    let gaps: Vec<Duration> = events.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let (n_library, n_monitor, n_gaps) = (library.len(), monitor.len(), gaps.len());
    Ok(Streaming {
        seconds,
        cores,
        requests: vec![
            Latency::new(
                "GET /api/v1/libraries/{name} (the library view)".into(),
                "library view",
                &library,
                n_library,
            ),
            Latency::new(
                "GET /api/v1/monitor (the monitor's first paint)".into(),
                "monitor",
                &monitor,
                n_monitor,
            ),
            Latency::new(
                "interval between live-stream events (SSE, every 1 s)".into(),
                "live events",
                &gaps,
                n_gaps,
            ),
        ],
        most_moving: events.iter().map(|e| e.2).max().unwrap_or(0),
        event_bytes: events.iter().map(|e| e.1).max().unwrap_or(0),
        throughput: log
            .iter()
            .filter(|l| l.contains("wrote") || l.contains("read and verified"))
            .cloned()
            .collect(),
    })
}

/// The tables, as the benchmark has always printed them, then the `(title, link)` charts.
fn markdown(r: &Report, charts: &[(String, String)]) -> String {
    let slots = r.slots;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{slots} cartridges {} in {:.1} s; `reel serve` ready in {:.1} s\n",
        if r.copied { "copied" } else { "created" },
        r.create_s,
        r.start_s
    );
    let _ = writeln!(
        out,
        "| What (vtl-node preset: 256 drives, {slots} full slots) | median ms | p95 ms | max ms | bytes |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let row = |out: &mut String, l: &Latency| {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {} |",
            l.what, l.median_ms, l.p95_ms, l.max_ms, l.count
        );
    };
    for l in &r.requests {
        row(&mut out, l);
    }
    let per_scrape = r.metrics_cpu_s;
    let _ = writeln!(
        out,
        "\n/metrics: {} scrapes in {:.2} s, {} bytes each; server CPU {:.1} ms per scrape = {:.3} % of one core at a 15 s scrape interval",
        r.metrics_scrapes,
        r.metrics_s,
        r.metrics_bytes,
        per_scrape * 1e3,
        per_scrape / 15.0 * 100.0
    );
    if let Some(s) = &r.streaming {
        let _ = writeln!(
            out,
            "\nWhile 256 drives streamed (reel bench tape, {STREAM_SIZE} per drive written and read back, 256K records, 2 in flight per drive; {:.0} s measured, reel at {:.2} cores):\n",
            s.seconds, s.cores
        );
        let _ = writeln!(
            out,
            "| What the console asks | median ms | p95 ms | max ms | samples |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        for l in &s.requests {
            row(&mut out, l);
        }
        let _ = writeln!(
            out,
            "\nLive stream: up to {} drives moving data in one event, events up to {} bytes.",
            s.most_moving, s.event_bytes
        );
        for line in &s.throughput {
            let _ = writeln!(out, "- {}", line.trim_start_matches("reel-bench:").trim());
        }
    }
    for (title, file) in charts {
        let _ = writeln!(out, "\n![{title}]({file})");
    }
    out
}
