//! `reel bench soak`: a long run of a real `reel serve` under mixed load, killed with SIGKILL
//! and restarted every few minutes, checked against a reference model after every restart.
//!
//! Four libraries (by default) share one server. Each has tape workers (one session and one
//! drive each: loads, appends with several writes in flight, filemarks, LOCATE and read-back,
//! READ POSITION, rewinds, unloads — [`drive`]) and changer sessions that do nothing but
//! MOVE MEDIUM between slots and the library's spare drives ([`movers`]). Beside them an API
//! client creates, imports, moves, exports and deletes cartridges through the REST API
//! ([`api_client`]). Every actor reserves the elements it uses in a shared model of the
//! inventory ([`library`]), so no command has a reason to fail.
//!
//! After each restart every cartridge is read back in full before the next kill and compared
//! with what the model allows ([`model`]): what was acknowledged at a synchronising point
//! must be there byte for byte, later writes may be missing but never wrong, and no record may
//! carry another cartridge's header. The changers' element status must show every cartridge
//! whose move was acknowledged where it was put. The server's RSS is sampled, its log searched
//! for panics. See bench/soak/README.md.

mod api_client;
mod drive;
mod library;
mod model;
mod movers;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use serde::Serialize;

use crate::api::ReelApi;
use crate::harness::procs::{self, ReelServe};
use crate::session::Drive;
use library::Library;
use model::{CartModel, Rng};
use reel_scsi::initiator::smc::{self, ElementStatus, ElementType};

/// `reel bench soak` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// How long to run the load (the final restart and read-back come on top).
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Seconds between SIGKILLs (default: a tenth of the run, 30 to 180 s). Each interval
    /// varies by up to a quarter so kills land at different moments.
    #[arg(long, value_name = "SECONDS")]
    pub kill_every: Option<f64>,
    #[arg(long, default_value_t = 4)]
    pub libraries: usize,
    /// iSCSI sessions in all (split evenly between the libraries: one per tape drive, the
    /// rest are changer sessions).
    #[arg(long, default_value_t = 64)]
    pub sessions: usize,
    /// Commands in flight per session.
    #[arg(long, default_value_t = 8)]
    pub queue_depth: usize,
    /// Drives per library used by the tape workers.
    #[arg(long, default_value_t = 6)]
    pub tape_drives: usize,
    /// Further drives per library that only the changer sessions load and unload.
    #[arg(long, default_value_t = 4)]
    pub spare_drives: usize,
    /// Cartridges per library.
    #[arg(long, default_value_t = 24)]
    pub cartridges: usize,
    /// Storage slots per library.
    #[arg(long, default_value_t = 64)]
    pub slots: usize,
    /// Import/export elements per library (the API client's way in and out).
    #[arg(long, default_value_t = 4)]
    pub import_export: usize,
    /// A cartridge holding this much is rewritten from the beginning (bounds the read-back).
    #[arg(long, default_value = "16M", value_name = "SIZE")]
    pub cartridge_bytes: String,
    /// Concurrent REST API clients.
    #[arg(long, default_value_t = 2)]
    pub api_clients: usize,
    /// Largest server RSS that still counts as bounded.
    #[arg(long, default_value = "2G", value_name = "SIZE")]
    pub rss_limit: String,
    /// Seconds one command may take before it counts as hung.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the data and logs go (default: a new directory under /var/tmp, removed after
    /// a passing run unless --keep).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    #[arg(long)]
    pub keep: bool,
    /// The `reel` binary (default: next to this program).
    #[arg(long)]
    pub reel_bin: Option<PathBuf>,
    /// Write the results as Markdown here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The source's git commit, for the report (bench/soak/run.sh passes it).
    #[arg(long, default_value = "unknown")]
    pub commit: String,
}

/// Counters of the whole run.
#[derive(Default, Debug)]
pub struct Stats {
    pub records_written: AtomicU64,
    pub bytes_written: AtomicU64,
    pub records_read: AtomicU64,
    pub filemarks: AtomicU64,
    pub sync_filemarks: AtomicU64,
    pub locates: AtomicU64,
    pub rewinds: AtomicU64,
    pub read_positions: AtomicU64,
    pub loads: AtomicU64,
    pub unloads: AtomicU64,
    /// Every MOVE MEDIUM that completed GOOD (loads, unloads, changer sessions, clearing).
    pub moves: AtomicU64,
    pub changer_moves: AtomicU64,
    pub failed_moves: AtomicU64,
    pub unit_attentions: AtomicU64,
    pub verifications: AtomicU64,
    pub bytes_verified: AtomicU64,
    pub synced_bytes_verified: AtomicU64,
    pub mismatches: AtomicU64,
    pub api_requests: AtomicU64,
    pub api_creates: AtomicU64,
    pub api_imports: AtomicU64,
    pub api_moves: AtomicU64,
    pub api_exports: AtomicU64,
    pub api_deletes: AtomicU64,
    pub api_cleared: AtomicU64,
    pub api_4xx: AtomicU64,
    pub api_5xx: AtomicU64,
    pub api_429: AtomicU64,
}

/// State shared by every actor across epochs.
pub struct Soak {
    pub seed: u64,
    pub queue_depth: usize,
    pub cartridge_bytes: u64,
    pub libs: Vec<Arc<Library>>,
    pub carts: Mutex<HashMap<String, CartModel>>,
    /// Cartridge → the epoch in which it was last read back in full.
    pub verified: Mutex<HashMap<String, u32>>,
    pub stats: Stats,
    pub seq: AtomicU64,
    pub api_seq: AtomicU64,
    pub failures: Mutex<Vec<String>>,
    pub failure_count: AtomicU64,
}

impl Soak {
    /// How a worker of `epoch` named `name` ended: an error is a failure unless the server's
    /// kill had begun (then it is the kill's).
    pub fn worker_ended(&self, epoch: &Epoch, name: &str, result: anyhow::Result<()>) {
        if let Err(e) = result
            && !epoch.killing.load(Ordering::SeqCst)
        {
            self.fail(format!("{name}: {e:#}"));
        }
    }

    pub fn fail(&self, what: String) {
        eprintln!("soak: FAILURE: {what}");
        self.failure_count.fetch_add(1, Ordering::Relaxed);
        let mut f = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if f.len() < 50 {
            f.push(what);
        }
    }

    pub fn with_cart<T>(&self, barcode: &str, f: impl FnOnce(&mut CartModel) -> T) -> T {
        let mut carts = self
            .carts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(carts
            .entry(barcode.to_string())
            .or_insert_with(|| CartModel::new(barcode)))
    }

    fn verified_in(&self, barcode: &str) -> Option<u32> {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(barcode)
            .copied()
    }

    /// Read back since the last restart: the model is exact.
    pub fn is_exact(&self, barcode: &str, epoch: u32) -> bool {
        self.verified_in(barcode) == Some(epoch)
    }

    pub fn needs_verify(&self, barcode: &str, epoch: u32) -> bool {
        !self.is_exact(barcode, epoch) && !self.with_cart(barcode, |m| m.quarantined)
    }

    pub fn mark_verified(&self, barcode: &str, epoch: u32) {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(barcode.to_string(), epoch);
    }

    /// Every tape cartridge read back (or set aside) since the last restart.
    pub fn all_verified(&self, epoch: u32) -> bool {
        self.unverified(epoch) == 0
    }

    /// Where the unverified cartridges are, for the failure message.
    pub fn unverified_places(&self, epoch: u32) -> String {
        let mut out = Vec::new();
        for lib in &self.libs {
            let inv = lib.lock();
            for (address, b) in &inv.at {
                let Some(b) = b else { continue };
                if library::is_tape_cartridge(b) && self.needs_verify(b, epoch) {
                    out.push(format!(
                        "{b} at {address:#06x} of library {}{}{}{}",
                        lib.index,
                        if inv.busy.contains(b) { ", busy" } else { "" },
                        if inv.reserved.contains(address) {
                            ", reserved"
                        } else {
                            ""
                        },
                        if inv.in_doubt.contains(b) {
                            ", being moved"
                        } else {
                            ""
                        },
                    ));
                }
            }
        }
        out.join("; ")
    }

    pub fn unverified(&self, epoch: u32) -> usize {
        let barcodes: Vec<String> = self
            .carts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        barcodes
            .iter()
            .filter(|b| self.needs_verify(b, epoch))
            .count()
    }
}

/// One server lifetime.
pub struct Epoch {
    pub n: u32,
    pub addr: SocketAddr,
    pub timeout: Duration,
    /// The server is being killed: errors from now on are the kill's.
    pub killing: AtomicBool,
    /// Finish and return (the final, read-back-only epoch).
    pub stop: AtomicBool,
    /// Only read back (after the last kill): no writes, no changer sessions.
    pub verify_only: bool,
}

impl Epoch {
    pub fn over(&self) -> bool {
        self.killing.load(Ordering::SeqCst) || self.stop.load(Ordering::SeqCst)
    }
}

/// One server lifetime in the report.
#[derive(Clone, Debug, Serialize)]
pub struct EpochReport {
    pub n: u32,
    /// Start until it listened (recovery included).
    pub start_s: f64,
    pub ran_s: f64,
    pub moves: u64,
    pub max_rss_mib: f64,
    pub panics: usize,
    /// How it ended: "SIGKILL" or "SIGTERM".
    pub ended: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub tool: String,
    pub command: String,
    pub commit: String,
    pub date: String,
    pub machine: crate::harness::Machine,
    pub short_run: bool,
    pub minutes: f64,
    pub wall_s: f64,
    pub libraries: usize,
    pub sessions: usize,
    pub queue_depth: usize,
    pub kills: u64,
    pub restarts_verified: u64,
    pub counters: Vec<(String, u64)>,
    pub moves: u64,
    pub moves_per_s: f64,
    pub bytes_written: u64,
    pub bytes_verified: u64,
    pub synced_bytes_verified: u64,
    pub max_rss_mib: f64,
    pub rss_limit_mib: f64,
    pub panics: usize,
    pub failures: u64,
    pub failure_list: Vec<String>,
    pub epochs: Vec<EpochReport>,
    pub passed: bool,
}

const IQN_BASE: &str = "iqn.2026-11.org.reel.soak:library";

fn iqn(i: usize) -> String {
    format!("{IQN_BASE}{i}")
}

fn prefix(i: usize) -> String {
    format!("T{}", (b'A' + i as u8) as char)
}

fn vm_rss_kib(pid: u32) -> Option<u64> {
    reel_sysinfo::status_kib(reel_sysinfo::Proc::Pid(pid), "VmRSS")
}

/// Samples the server's VmRSS four times a second; the largest since the last `take`.
struct RssSampler {
    pid: Arc<AtomicU32>,
    max_kib: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let s = RssSampler {
            pid: Arc::new(AtomicU32::new(0)),
            max_kib: Arc::new(AtomicU64::new(0)),
            done: Arc::new(AtomicBool::new(false)),
        };
        let (pid, max, done) = (s.pid.clone(), s.max_kib.clone(), s.done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let p = pid.load(Ordering::Relaxed);
                if p != 0
                    && let Some(kib) = vm_rss_kib(p)
                {
                    max.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        s
    }

    fn take(&self) -> f64 {
        self.max_kib.swap(0, Ordering::Relaxed) as f64 / 1024.0
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn count_panics(log: &Path) -> usize {
    fs::read_to_string(log)
        .map(|t| t.lines().filter(|l| l.contains("panicked")).count())
        .unwrap_or(0)
}

fn write_config(
    args: &SoakArgs,
    path: &Path,
    addr: SocketAddr,
    http: SocketAddr,
) -> anyhow::Result<()> {
    let mut text = format!(
        "# written by reel bench soak\n\
         [iscsi]\n\
         listen = [\"{addr}\"]\n\
         queue_depth = 64\n\
         \n\
         [http]\n\
         listen = \"{http}\"\n"
    );
    for i in 0..args.libraries {
        let _ = write!(
            text,
            "\n[[iscsi.target]]\n\
             name = \"{}\"\n\
             kind = \"library\"\n\
             drives = {}\n\
             slots = {}\n\
             import_export = {}\n\
             barcode_prefix = \"{}\"\n",
            iqn(i),
            args.tape_drives + args.spare_drives,
            args.slots,
            args.import_export,
            prefix(i)
        );
    }
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// READ ELEMENT STATUS of every element type with volume tags.
async fn all_elements(session: &Drive, changer_lun: u64) -> anyhow::Result<Vec<ElementStatus>> {
    let alloc = 1 << 20;
    let data = session
        .good(
            changer_lun,
            &smc::read_element_status(ElementType::ALL, alloc),
            Bytes::new(),
            alloc,
            "reading the inventory",
        )
        .await?;
    Ok(smc::parse_element_status(&data)?)
}

async fn control_session(addr: SocketAddr, i: usize, timeout: Duration) -> anyhow::Result<Drive> {
    let client = crate::session::connect(addr, &iqn(i)).await?;
    Ok(Drive {
        name: format!("library {i} control session"),
        client,
        lun: 0,
        changer: None,
        timeout,
    })
}

/// After a (re)start: the libraries' element status, compared with the model; the first time,
/// the libraries themselves. Then the spare drives are emptied so that every cartridge can be
/// reached by the tape workers' read-back.
async fn survey(
    args: &SoakArgs,
    addr: SocketAddr,
    timeout: Duration,
    soak: Option<&Soak>,
) -> anyhow::Result<(Vec<Library>, Vec<String>)> {
    let mut libs = Vec::new();
    let mut problems = Vec::new();
    for i in 0..args.libraries {
        let session = control_session(addr, i, timeout).await?;
        match soak {
            None => {
                let layout = crate::session::inspect(&session).await?;
                let changer_lun = layout
                    .changer_lun
                    .with_context(|| format!("library {i} has no changer"))?;
                let elements = all_elements(&session, changer_lun).await?;
                libs.push(Library::new(
                    i,
                    &iqn(i),
                    changer_lun,
                    &layout.tape_luns,
                    &elements,
                    args.tape_drives,
                )?);
            }
            Some(soak) => {
                let lib = &soak.libs[i];
                session.clear_attentions(lib.changer_lun).await?;
                let elements = all_elements(&session, lib.changer_lun).await?;
                for p in lib.rebuild(&elements) {
                    problems.push(format!("library {i} after restart: {p}"));
                }
                let mut rng = Rng::new(soak.seed ^ i as u64);
                for &d in &lib.mover_drives {
                    let Some(mv) = lib.plan_unload(&mut rng, d) else {
                        continue;
                    };
                    lib.lock().busy.insert(mv.barcode.clone());
                    drive::move_medium(soak, lib, &session, &mv, false).await?;
                }
            }
        }
        let _ = session.client.logout().await;
    }
    Ok((libs, problems))
}

fn login(http: SocketAddr, password: &str) -> anyhow::Result<ReelApi> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match crate::api::login(&format!("http://{http}"), "admin", password) {
            Ok(api) => return Ok(api),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn date_utc() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Runs the soak; the summary (also written where asked). An error only when the soak could
/// not run at all; failures found are in the summary.
pub fn run(args: SoakArgs) -> anyhow::Result<Summary> {
    let per_library = args.sessions / args.libraries.max(1);
    if args.libraries == 0 || args.libraries > 26 {
        bail!("--libraries must be 1 to 26");
    }
    if per_library <= args.tape_drives {
        bail!(
            "--sessions {} over {} libraries leaves {per_library} per library: more than --tape-drives {} are needed (the rest are changer sessions)",
            args.sessions,
            args.libraries,
            args.tape_drives
        );
    }
    if args.spare_drives == 0 || args.tape_drives == 0 {
        bail!("--tape-drives and --spare-drives must be at least 1");
    }
    if args.cartridges + args.spare_drives + 2 > args.slots {
        bail!(
            "--slots must leave room: {} cartridges need more free slots",
            args.cartridges
        );
    }
    let movers = per_library - args.tape_drives;
    let cartridge_bytes = crate::harness::parse_size("--cartridge-bytes", &args.cartridge_bytes)?;
    let rss_limit = crate::harness::parse_size("--rss-limit", &args.rss_limit)?;
    let kill_every = args
        .kill_every
        .unwrap_or((args.minutes * 6.0).clamp(30.0, 180.0));
    crate::harness::output::check_output_dirs(
        [&args.json, &args.markdown]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path),
    )?;
    let bin = procs::reel_binary(args.reel_bin.as_deref())?;
    crate::harness::on_interrupt();
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("/var/tmp/reel-soak-{}", std::process::id())));
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("clearing {}", work.display()))?;
    }
    fs::create_dir_all(work.join("logs"))?;
    let data = work.join("data");
    let mut barcodes = Vec::new();
    for i in 0..args.libraries {
        procs::run_tool(
            Command::new(&bin)
                .args(["cartridges", "create", "--prefix", &prefix(i), "--count"])
                .arg(args.cartridges.to_string())
                .arg("--data")
                .arg(&data),
            "reel cartridges create",
        )?;
        for n in 1..=args.cartridges {
            barcodes.push(format!("{}{:04}L9", prefix(i), n));
        }
    }
    let addr = procs::free_loopback()?;
    let http = procs::free_loopback()?;
    let config = work.join("reel.toml");
    write_config(&args, &config, addr, http)?;
    let timeout = Duration::from_secs(args.timeout);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::thread::available_parallelism()
                .map_or(2, std::num::NonZero::get)
                .clamp(2, 4),
        )
        .thread_name("soak")
        .enable_all()
        .build()?;
    let machine = crate::harness::Machine::at_start();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.minutes * 60.0);
    let rss = RssSampler::start();
    let mut epochs: Vec<EpochReport> = Vec::new();
    let mut soak: Option<Arc<Soak>> = None;
    let mut password = String::new();
    let mut kills = 0u64;
    let mut plan_rng = Rng::new(args.seed ^ 0x4b11);
    let mut n = 0u32;
    eprintln!(
        "soak: {} libraries, {} sessions ({} tape + {movers} changer per library), queue depth {}, {} min, SIGKILL about every {kill_every:.0} s; data in {}",
        args.libraries,
        per_library * args.libraries,
        args.tape_drives,
        args.queue_depth,
        args.minutes,
        data.display()
    );
    loop {
        n += 1;
        let verify_only = Instant::now() >= deadline && n > 1;
        let log = work.join("logs").join(format!("serve-{n:03}.log"));
        let t0 = Instant::now();
        let serve = ReelServe::start(&bin, &config, &data, &log, addr, &[])
            .with_context(|| format!("starting reel serve (restart {})", n - 1))?;
        let start_s = t0.elapsed().as_secs_f64();
        rss.pid.store(serve.pid(), Ordering::Relaxed);
        if n == 1 {
            password = ReelServe::initial_admin_password(&data, Duration::from_secs(30))?;
        }
        let api = login(http, &password)?;
        let s = match &soak {
            None => {
                let (libs, _) = runtime.block_on(survey(&args, addr, timeout, None))?;
                let found: Vec<String> = libs.iter().flat_map(Library::tape_cartridges).collect();
                let mut want = barcodes.clone();
                let mut have = found.clone();
                want.sort();
                have.sort();
                if want != have {
                    bail!(
                        "the libraries hold {} cartridges ({}…), the soak created {}",
                        have.len(),
                        have.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                        want.len()
                    );
                }
                let s = Arc::new(Soak {
                    seed: args.seed,
                    queue_depth: args.queue_depth.max(1),
                    cartridge_bytes,
                    libs: libs.into_iter().map(Arc::new).collect(),
                    carts: Mutex::new(
                        barcodes
                            .iter()
                            .map(|b| (b.clone(), CartModel::new(b)))
                            .collect(),
                    ),
                    verified: Mutex::new(HashMap::new()),
                    stats: Stats::default(),
                    seq: AtomicU64::new(1),
                    api_seq: AtomicU64::new(1),
                    failures: Mutex::new(Vec::new()),
                    failure_count: AtomicU64::new(0),
                });
                soak = Some(s.clone());
                s
            }
            Some(s) => {
                let (_, problems) = runtime.block_on(survey(&args, addr, timeout, Some(s)))?;
                for p in problems {
                    s.fail(p);
                }
                s.clone()
            }
        };
        let moves_before = s.stats.moves.load(Ordering::Relaxed);
        let epoch = Arc::new(Epoch {
            n,
            addr,
            timeout,
            killing: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            verify_only,
        });
        let interval = kill_every * (0.75 + plan_rng.below(501) as f64 / 1000.0);
        let kill_at = (Instant::now() + Duration::from_secs_f64(interval)).min(deadline);
        eprintln!(
            "soak: epoch {n}{} (reel serve pid {}, started in {start_s:.1} s)",
            if verify_only {
                ": final read-back after the last kill"
            } else {
                ""
            },
            serve.pid()
        );
        api_client::clear_up(&s, &epoch, &api);
        let ran = Instant::now();
        let mut tape_tasks = Vec::new();
        let mut other_tasks = Vec::new();
        let mut api_threads = Vec::new();
        for lib in &s.libs {
            for d in 0..lib.tape_drives.len() {
                tape_tasks.push(runtime.spawn(drive::worker(
                    s.clone(),
                    epoch.clone(),
                    lib.clone(),
                    d,
                )));
            }
            if !verify_only {
                for k in 0..movers {
                    other_tasks.push(runtime.spawn(movers::worker(
                        s.clone(),
                        epoch.clone(),
                        lib.clone(),
                        k,
                    )));
                }
            }
        }
        for k in 0..args.api_clients.max(1) {
            let (s, e, api) = (s.clone(), epoch.clone(), api.clone());
            api_threads.push(std::thread::spawn(move || api_client::worker(s, e, api, k)));
        }
        // Kill once the interval is over and every cartridge has been read back since the
        // restart (or give up waiting for that after three more intervals: a failure).
        let mut last_note = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if crate::harness::interrupted() {
                epoch.killing.store(true, Ordering::SeqCst);
                serve.kill()?;
                wait_all(&runtime, tape_tasks, other_tasks, api_threads);
                bail!("interrupted; data and logs are in {}", work.display());
            }
            let unverified = s.unverified(n);
            if verify_only {
                if tape_tasks.iter().all(tokio::task::JoinHandle::is_finished) {
                    break;
                }
            } else if Instant::now() >= kill_at && unverified == 0 {
                break;
            }
            let overdue = Instant::now() > kill_at + Duration::from_secs_f64(3.0 * kill_every);
            if overdue {
                s.fail(format!(
                    "epoch {n}: {unverified} cartridge(s) not read back {:.0} s after the restart: {}",
                    ran.elapsed().as_secs_f64(),
                    s.unverified_places(n)
                ));
                break;
            }
            if last_note.elapsed() > Duration::from_secs(30) {
                last_note = Instant::now();
                eprintln!(
                    "soak: {:.0} s: {} moves, {} MB written, {} MB verified, {} unverified, {} failure(s)",
                    started.elapsed().as_secs_f64(),
                    s.stats.moves.load(Ordering::Relaxed),
                    s.stats.bytes_written.load(Ordering::Relaxed) / 1_000_000,
                    s.stats.bytes_verified.load(Ordering::Relaxed) / 1_000_000,
                    unverified,
                    s.failure_count.load(Ordering::Relaxed)
                );
            }
        }
        let ended = if verify_only {
            epoch.stop.store(true, Ordering::SeqCst);
            wait_all(&runtime, tape_tasks, other_tasks, api_threads);
            let unverified = s.unverified(n);
            if unverified > 0 {
                s.fail(format!(
                    "{unverified} cartridge(s) not read back after the last restart"
                ));
            }
            if let Err(e) = serve.stop(Duration::from_secs(60)) {
                s.fail(format!("the final SIGTERM: {e:#}"));
            }
            "SIGTERM"
        } else {
            epoch.killing.store(true, Ordering::SeqCst);
            serve.kill()?;
            kills += 1;
            wait_all(&runtime, tape_tasks, other_tasks, api_threads);
            "SIGKILL"
        };
        let panics = count_panics(&log);
        if panics > 0 {
            s.fail(format!("reel serve panicked (see {})", log.display()));
        }
        epochs.push(EpochReport {
            n,
            start_s,
            ran_s: ran.elapsed().as_secs_f64(),
            moves: s.stats.moves.load(Ordering::Relaxed) - moves_before,
            max_rss_mib: rss.take(),
            panics,
            ended: ended.into(),
        });
        eprintln!(
            "soak: epoch {n} ended ({ended}) after {:.0} s",
            ran.elapsed().as_secs_f64()
        );
        if verify_only {
            break;
        }
    }
    drop(rss);
    let s = soak.context("no epoch ran")?;
    let wall_s = started.elapsed().as_secs_f64();
    let summary = summarize(&args, &s, epochs, kills, wall_s, machine, rss_limit);
    println!("{}", markdown(&summary));
    if let Some(path) = &args.markdown {
        fs::write(path, markdown(&summary))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.json {
        fs::write(path, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if summary.passed && !args.keep {
        let _ = fs::remove_dir_all(&work);
    } else {
        eprintln!("soak: data and logs kept in {}", work.display());
    }
    Ok(summary)
}

fn wait_all(
    runtime: &tokio::runtime::Runtime,
    tape: Vec<tokio::task::JoinHandle<()>>,
    other: Vec<tokio::task::JoinHandle<()>>,
    api: Vec<std::thread::JoinHandle<()>>,
) {
    runtime.block_on(async {
        for t in tape.into_iter().chain(other) {
            let _ = tokio::time::timeout(Duration::from_secs(150), t).await;
        }
    });
    for t in api {
        let _ = t.join();
    }
}

fn summarize(
    args: &SoakArgs,
    s: &Soak,
    epochs: Vec<EpochReport>,
    kills: u64,
    wall_s: f64,
    machine: crate::harness::Machine,
    rss_limit: u64,
) -> Summary {
    let st = &s.stats;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let counters: Vec<(String, u64)> = [
        ("records written (WRITE(6))", &st.records_written),
        ("records read and compared (READ(6))", &st.records_read),
        ("filemarks written", &st.filemarks),
        ("  of them IMMED=0 (synchronising)", &st.sync_filemarks),
        ("LOCATE(10)", &st.locates),
        ("REWIND", &st.rewinds),
        ("READ POSITION", &st.read_positions),
        ("loads (MOVE MEDIUM slot → tape worker's drive)", &st.loads),
        ("unloads (MOVE MEDIUM drive → slot)", &st.unloads),
        (
            "changer-session moves (slot ↔ slot, slot ↔ spare drive)",
            &st.changer_moves,
        ),
        ("failed moves", &st.failed_moves),
        ("unit attentions retried", &st.unit_attentions),
        ("full read-backs of a cartridge", &st.verifications),
        ("read-backs that did not match", &st.mismatches),
        ("API requests", &st.api_requests),
        ("API cartridges created", &st.api_creates),
        ("API imports", &st.api_imports),
        ("API moves", &st.api_moves),
        ("API exports", &st.api_exports),
        ("API deletes", &st.api_deletes),
        ("API cartridges cleared after a kill", &st.api_cleared),
        ("API 4xx (unexpected)", &st.api_4xx),
        ("API 5xx", &st.api_5xx),
        ("API 429 (waited out)", &st.api_429),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), get(v)))
    .collect();
    let moves = get(&st.moves);
    let max_rss = epochs.iter().map(|e| e.max_rss_mib).fold(0.0, f64::max);
    let panics: usize = epochs.iter().map(|e| e.panics).sum();
    let failures = s.failure_count.load(Ordering::Relaxed);
    let rss_limit_mib = rss_limit as f64 / (1u64 << 20) as f64;
    let short_run = args.minutes < 30.0;
    let passed = failures == 0
        && panics == 0
        && max_rss <= rss_limit_mib
        && get(&st.api_5xx) == 0
        && (short_run || moves >= 100_000);
    Summary {
        tool: format!("reel-bench {} soak", env!("CARGO_PKG_VERSION")),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        commit: args.commit.clone(),
        date: date_utc(),
        machine,
        short_run,
        minutes: args.minutes,
        wall_s,
        libraries: args.libraries,
        sessions: args.sessions / args.libraries * args.libraries,
        queue_depth: args.queue_depth,
        kills,
        restarts_verified: epochs.len().saturating_sub(1) as u64,
        counters,
        moves,
        moves_per_s: moves as f64 / epochs.iter().map(|e| e.ran_s).sum::<f64>().max(1.0),
        bytes_written: get(&st.bytes_written),
        bytes_verified: get(&st.bytes_verified),
        synced_bytes_verified: get(&st.synced_bytes_verified),
        max_rss_mib: max_rss,
        rss_limit_mib,
        panics,
        failures,
        failure_list: s
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
        epochs,
        passed,
    }
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

/// The report: verdict, totals, counters by kind, one row per server lifetime, failures.
pub fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Soak test results{}\n",
        if s.short_run {
            format!(
                " (SHORT RUN: {} minutes, not the 30-minute soak)",
                s.minutes
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "**{}** — {} failure(s), {} panic(s), {} SIGKILLs survived, {} MOVE MEDIUM ({:.1}/s), max RSS {:.0} MiB (limit {:.0} MiB)\n",
        if s.passed { "PASS" } else { "FAIL" },
        s.failures,
        s.panics,
        s.kills,
        s.moves,
        s.moves_per_s,
        s.max_rss_mib,
        s.rss_limit_mib
    );
    let m = &s.machine;
    let _ = writeln!(
        out,
        "- date: {}\n- commit: {}\n- machine: {} CPUs ({}), {} memory, kernel {}, load average at start {}\n- command: `{}`\n- {} libraries, {} iSCSI sessions, queue depth {}, {:.1} min of load, {:.1} min wall time\n",
        s.date,
        s.commit,
        m.host.nproc,
        m.host.cpu_model,
        m.host.memory,
        m.host.kernel,
        m.load_average_start,
        s.command,
        s.libraries,
        s.sessions,
        s.queue_depth,
        s.minutes,
        s.wall_s / 60.0
    );
    let _ = writeln!(out, "| what | count |\n|---|---:|");
    let _ = writeln!(out, "| SIGKILLs survived | {} |", s.kills);
    let _ = writeln!(
        out,
        "| restarts checked against the model (every cartridge read back) | {} |",
        s.restarts_verified
    );
    let _ = writeln!(out, "| MOVE MEDIUM completed (robot moves) | {} |", s.moves);
    let _ = writeln!(out, "| bytes written | {} |", mb(s.bytes_written));
    let _ = writeln!(
        out,
        "| bytes read back and compared | {} |",
        mb(s.bytes_verified)
    );
    let _ = writeln!(
        out,
        "| of them acknowledged at a synchronising point before a kill, read after the restart | {} |",
        mb(s.synced_bytes_verified)
    );
    for (k, v) in &s.counters {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    let _ = writeln!(out, "| server panics | {} |", s.panics);
    let _ = writeln!(out, "| failures | {} |", s.failures);
    let _ = writeln!(
        out,
        "\n| server lifetime | start s | ran s | moves | max RSS MiB | panics | ended |\n|---:|---:|---:|---:|---:|---:|---|"
    );
    for e in &s.epochs {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.0} | {} | {:.0} | {} | {} |",
            e.n, e.start_s, e.ran_s, e.moves, e.max_rss_mib, e.panics, e.ended
        );
    }
    if !s.failure_list.is_empty() {
        let _ = writeln!(out, "\n## Failures (first {})\n", s.failure_list.len());
        for f in &s.failure_list {
            let _ = writeln!(out, "- {}", f.replace('\n', " "));
        }
    }
    out
}
