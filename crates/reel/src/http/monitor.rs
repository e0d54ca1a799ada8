//! The live monitor: a sampler thread turns counters into rates once a second; the API
//! serves the latest sample, a Server-Sent Events stream of them, and Prometheus metrics.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use parking_lot::Mutex;
use reel_api::Role;
use reel_api::monitor::{
    BucketView, DriveRate, EventsQuery, InitiatorRate, MonitorSample, PendingCartridge,
    SessionView, StoreView, Totals,
};
use reel_api::session::AuditEvent;
use reel_iscsi_net::{InitiatorStats, LATENCY_BUCKETS_US, TargetServer};
use reel_library::VirtualLibrary;
use reel_volume::Cartridges;
use tokio::sync::watch;

use super::auth::Caller;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::library::state_name;
use super::{AppState, blocking};

/// Raw counters of one moment.
#[derive(Clone, Default)]
struct Counters {
    at: Option<Instant>,
    cpu_seconds: f64,
    drives: HashMap<(usize, usize), [u64; 4]>,
    initiators: HashMap<(String, Option<String>), [u64; 3]>,
}

pub struct Monitor {
    libraries: Vec<Arc<VirtualLibrary>>,
    cartridges: Arc<Cartridges>,
    target: Arc<TargetServer>,
    data_dir: PathBuf,
    bucket: Option<BucketSource>,
    previous: Mutex<Counters>,
    latest: watch::Sender<Arc<MonitorSample>>,
    store: Mutex<(Option<Instant>, Result<StoreView, String>)>,
}

/// CPU seconds (user + system) of this process so far; 0 if /proc is unreadable.
fn process_cpu_seconds() -> f64 {
    reel_sysinfo::cpu_seconds(reel_sysinfo::Proc::This).unwrap_or(0.0)
}

/// What the monitor reads of a store on object storage.
pub struct BucketSource {
    pub cache: Arc<reel_backend::WriteBackCache>,
    pub bucket: Arc<reel_backend::S3Backend>,
    pub location: String,
    pub durability: String,
    pub cache_capacity: u64,
}

impl BucketSource {
    fn view(&self, cartridges: &Cartridges) -> BucketView {
        let stats = self.cache.stats();
        let counters = self.bucket.counters();
        let store = cartridges.store();
        let pending = self.cache.pending();
        let now = std::time::SystemTime::now();
        let age = |t: std::time::SystemTime| now.duration_since(t).unwrap_or_default();
        // Pack owner → cartridge number → barcode; journal objects and reclaim's packs have
        // no cartridge.
        let mut by_number: std::collections::BTreeMap<u64, (u64, Duration)> = Default::default();
        for item in pending.iter().filter(|i| !i.delete) {
            if let Some(stream) = store.pack_owner(item.key.as_str()) {
                let e = by_number
                    .entry(reel_volume::cartridge_of(stream))
                    .or_default();
                e.0 += item.bytes;
                e.1 = e.1.max(age(item.queued_at));
            }
        }
        store.retain_pack_owners(&mut |key| pending.iter().any(|i| i.key.as_str() == key));
        let barcodes: HashMap<u64, String> = cartridges
            .list()
            .map(|l| {
                l.into_iter()
                    .map(|(n, info)| (n, info.barcode().as_str().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let journal = store.journal_status();
        BucketView {
            catalog_checkpoint_seq: journal.checkpoint_seq,
            catalog_checkpoint_bytes: journal.checkpoint_bytes,
            catalog_journal_objects: journal.objects_since_checkpoint,
            catalog_journal_bytes: journal.bytes_since_checkpoint,
            location: self.location.clone(),
            durability: self.durability.clone(),
            pending_bytes: stats.pending_bytes,
            pending_objects: stats.pending_objects,
            oldest_pending_seconds: stats.oldest_pending_age.map(|d| d.as_secs_f64()),
            uploaded_bytes: stats.uploaded_bytes,
            uploaded_objects: stats.uploaded_objects,
            upload_retries: stats.retries,
            blocked_puts: stats.blocked_puts,
            cached_bytes: stats.clean_bytes,
            memory_bytes: stats.upload_memory_bytes + stats.read_memory_bytes,
            cache_capacity: self.cache_capacity,
            requests: counters.requests(),
            bytes_up: counters.bytes_up,
            bytes_down: counters.bytes_down,
            last_error: stats.last_error,
            failed: stats.failed,
            by_cartridge: by_number
                .into_iter()
                .map(|(n, (bytes, oldest))| PendingCartridge {
                    barcode: barcodes.get(&n).cloned().unwrap_or_else(|| format!("#{n}")),
                    pending_bytes: bytes,
                    oldest_pending_seconds: oldest.as_secs_f64(),
                })
                .collect(),
        }
    }
}

impl Monitor {
    pub fn new(
        libraries: Vec<Arc<VirtualLibrary>>,
        cartridges: Arc<Cartridges>,
        target: Arc<TargetServer>,
        data_dir: PathBuf,
        bucket: Option<BucketSource>,
    ) -> Arc<Monitor> {
        let (latest, _) = watch::channel(Arc::new(MonitorSample::default()));
        let monitor = Arc::new(Monitor {
            libraries,
            cartridges,
            target,
            data_dir,
            bucket,
            previous: Mutex::new(Counters::default()),
            latest,
            store: Mutex::new((None, Err("not read yet".into()))),
        });
        monitor.sample();
        monitor
    }

    /// Starts the once-a-second sampler; it ends when the monitor is dropped elsewhere.
    pub fn start(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("reel-monitor".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                    let Some(m) = weak.upgrade() else { return };
                    m.sample();
                }
            })
            .expect("spawning the monitor thread");
    }

    pub fn latest(&self) -> Arc<MonitorSample> {
        self.latest.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<MonitorSample>> {
        self.latest.subscribe()
    }

    pub fn initiator_stats(&self) -> Vec<InitiatorStats> {
        self.target.initiator_stats()
    }

    /// The store's figures, at most 5 s old unless `fresh` (the catalog is read again). An error
    /// when the catalog or the data directory cannot be read: never zeros in their place.
    pub fn store_view(&self, fresh: bool) -> Result<StoreView, String> {
        let mut cached = self.store.lock();
        if !fresh
            && cached
                .0
                .is_some_and(|t| t.elapsed() < Duration::from_secs(5))
        {
            return cached.1.clone();
        }
        let view = self.read_store_view();
        *cached = (Some(Instant::now()), view.clone());
        view
    }

    fn read_store_view(&self) -> Result<StoreView, String> {
        let s = self
            .cartridges
            .store()
            .stats()
            .map_err(|e| format!("the store's statistics could not be read: {e}"))?;
        let on_disk_bytes = crate::disk_usage::bytes_on_disk(&self.data_dir).map_err(|e| {
            format!(
                "the size of the data directory {} could not be read: {e}",
                self.data_dir.display()
            )
        })?;
        let catalog = self.data_dir.join(crate::data_dir::CATALOG_DIR);
        let catalog_bytes = crate::disk_usage::bytes_on_disk(&catalog).map_err(|e| {
            format!(
                "the size of the catalog {} could not be read: {e}",
                catalog.display()
            )
        })?;
        let fs = nix::sys::statvfs::statvfs(&self.data_dir).map_err(|e| {
            format!(
                "the file system of {} could not be read: {e}",
                self.data_dir.display()
            )
        })?;
        let frag = fs.fragment_size();
        Ok(StoreView {
            logical_bytes: s.logical_bytes,
            unique_bytes: s.unique_bytes,
            stored_bytes: s.stored_bytes,
            on_disk_bytes,
            catalog_bytes,
            chunks: s.chunks,
            packs: s.packs,
            dedup_ratio: s.dedup_ratio(),
            compression_ratio: s.compression_ratio(),
            reduction_ratio: s.reduction_ratio(),
            reduction_ratio_on_disk: if on_disk_bytes > 0 {
                s.logical_bytes as f64 / on_disk_bytes as f64
            } else {
                1.0
            },
            disk_total: fs.blocks() * frag,
            disk_free: fs.blocks_available() * frag,
            bucket: self.bucket.as_ref().map(|b| b.view(&self.cartridges)),
        })
    }

    fn sample(&self) {
        let now = Instant::now();
        let mut current = Counters {
            at: Some(now),
            cpu_seconds: process_cpu_seconds(),
            ..Counters::default()
        };
        let mut drives = Vec::new();
        for (li, lib) in self.libraries.iter().enumerate() {
            // Published by each drive after its last command: no waiting for busy drives.
            for (di, status) in lib.drive_statuses().into_iter().enumerate() {
                let (stats, state, barcode) = (status.stats, status.state, status.barcode);
                current.drives.insert(
                    (li, di),
                    [
                        stats.bytes_read,
                        stats.bytes_written,
                        stats.read_commands,
                        stats.write_commands,
                    ],
                );
                let (state, activity) = state_name(state);
                drives.push(DriveRate {
                    library: lib.spec().name.clone(),
                    index: di as u16,
                    barcode,
                    state: state.to_string(),
                    activity: activity.to_string(),
                    ..DriveRate::default()
                });
            }
        }
        for s in self.target.initiator_stats() {
            let mut sum = [0u64; 3];
            for c in s.by_lun.values() {
                sum[0] += c.bytes_read;
                sum[1] += c.bytes_written;
                sum[2] += c.commands;
            }
            current.initiators.insert((s.initiator, s.target), sum);
        }
        let mut previous = self.previous.lock();
        let seconds = previous
            .at
            .map_or(0.0, |t| now.duration_since(t).as_secs_f64());
        let rate = |a: u64, b: u64| {
            if seconds > 0.0 {
                a.saturating_sub(b) as f64 / seconds
            } else {
                0.0
            }
        };
        let mut totals = Totals::default();
        let mut i = 0;
        for (li, lib) in self.libraries.iter().enumerate() {
            for di in 0..lib.drives().len() {
                let cur = current.drives[&(li, di)];
                let old = previous.drives.get(&(li, di)).copied().unwrap_or(cur);
                let d = &mut drives[i];
                d.read_bps = rate(cur[0], old[0]);
                d.write_bps = rate(cur[1], old[1]);
                d.read_iops = rate(cur[2], old[2]);
                d.write_iops = rate(cur[3], old[3]);
                // The drive remembers its last medium command; with no transfer in the last
                // second, a monitor shows it idle.
                if d.read_iops == 0.0
                    && d.write_iops == 0.0
                    && matches!(d.activity.as_str(), "reading" | "writing")
                {
                    d.activity = "idle".into();
                }
                totals.read_bps += d.read_bps;
                totals.write_bps += d.write_bps;
                i += 1;
            }
        }
        let mut initiators: Vec<InitiatorRate> = current
            .initiators
            .iter()
            .map(|((initiator, target), cur)| {
                let old = previous
                    .initiators
                    .get(&(initiator.clone(), target.clone()))
                    .copied()
                    .unwrap_or(*cur);
                InitiatorRate {
                    initiator: initiator.clone(),
                    target: target.clone(),
                    read_bps: rate(cur[0], old[0]),
                    write_bps: rate(cur[1], old[1]),
                    commands_per_s: rate(cur[2], old[2]),
                }
            })
            .collect();
        initiators.sort_by(|a, b| (&a.initiator, &a.target).cmp(&(&b.initiator, &b.target)));
        let cpu_percent = if seconds > 0.0 {
            (current.cpu_seconds - previous.cpu_seconds).max(0.0) / seconds * 100.0
        } else {
            0.0
        };
        *previous = current;
        drop(previous);
        let sample = MonitorSample {
            time: super::auth::now(),
            cpu_percent,
            drives,
            initiators,
            totals,
            store: None,
            store_error: None,
        };
        let sample = match self.store_view(false) {
            Ok(view) => MonitorSample {
                store: Some(view),
                ..sample
            },
            Err(why) => MonitorSample {
                store_error: Some(why),
                ..sample
            },
        };
        self.latest.send_replace(Arc::new(sample));
    }
}

#[utoipa::path(get, path = "/api/v1/monitor", tag = "monitor",
    responses((status = 200, body = MonitorSample), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn monitor(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<MonitorSample>> {
    caller.require(Role::Viewer)?;
    Ok(Json((*state.monitor.latest()).clone()))
}

#[utoipa::path(get, path = "/api/v1/monitor/stream", tag = "monitor",
    params(("token" = Option<String>, Query, description = "the bearer token (EventSource cannot send headers)")),
    responses((status = 200, description = "text/event-stream of MonitorSample JSON, event `monitor`, once a second"),
        (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    caller.require(Role::Viewer)?;
    let rx = state.monitor.subscribe();
    let token = caller.token_id;
    let stream = futures_util::stream::unfold(rx, move |mut rx| {
        let (state, token) = (state.clone(), token.clone());
        async move {
            // The token is checked again before every sample: the stream ends with a logout, a
            // revocation, an expiry or the user's deletion.
            if !state.auth.still_valid(&token) {
                return None;
            }
            // The first item is the current sample, then one per change.
            let sample = rx.borrow_and_update().clone();
            let event = Event::default()
                .event("monitor")
                .json_data(&*sample)
                .unwrap_or_else(|_| Event::default().comment("unserialisable sample"));
            if rx.changed().await.is_err() {
                return None;
            }
            Some((Ok(event), rx))
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[utoipa::path(get, path = "/api/v1/stats", tag = "monitor",
    responses((status = 200, body = StoreView), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn stats(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<StoreView>> {
    caller.require(Role::Viewer)?;
    // Fresh: a caller comparing before and after (a benchmark, a script) needs this moment's.
    blocking(state, |s| {
        s.monitor.store_view(true).map_err(ApiError::internal)
    })
    .await
    .map(Json)
}

#[utoipa::path(get, path = "/api/v1/sessions", tag = "monitor",
    responses((status = 200, body = [SessionView]), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn sessions(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<Vec<SessionView>>> {
    caller.require(Role::Viewer)?;
    let mut v: Vec<SessionView> = state
        .target
        .sessions()
        .into_iter()
        .map(|s| SessionView {
            initiator: s.initiator,
            target: s.target,
            isid: s.isid.iter().map(|b| format!("{b:02x}")).collect(),
            tsih: s.tsih,
            peer: s.peer.to_string(),
        })
        .collect();
    v.sort_by_key(|s| s.tsih);
    Ok(Json(v))
}

#[utoipa::path(get, path = "/api/v1/events", tag = "monitor", params(EventsQuery),
    responses((status = 200, body = [AuditEvent]), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn events(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    query: Result<axum::extract::Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<AuditEvent>>> {
    caller.require(Role::Viewer)?;
    let axum::extract::Query(q) = query?;
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > 10_000 {
        return Err(ApiError::bad_request("limit: 1 to 10000"));
    }
    let before = q.before;
    blocking(state, move |s| s.auth.events(limit, before))
        .await
        .map(Json)
}

const SENSE_KEYS: [&str; 16] = [
    "no_sense",
    "recovered_error",
    "not_ready",
    "medium_error",
    "hardware_error",
    "illegal_request",
    "unit_attention",
    "data_protect",
    "blank_check",
    "vendor_specific",
    "copy_aborted",
    "aborted_command",
    "equal",
    "volume_overflow",
    "miscompare",
    "completed",
];

/// Prometheus text exposition format 0.0.4, written family by family.
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample; label values are escaped here.
    fn sample<S: AsRef<str>>(
        &mut self,
        name: &str,
        labels: &[(&str, S)],
        value: impl std::fmt::Display,
    ) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let escaped: Vec<String> = labels
                .iter()
                .map(|(k, v)| {
                    let v = v
                        .as_ref()
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n");
                    format!("{k}=\"{v}\"")
                })
                .collect();
            let _ = write!(self.0, "{{{}}}", escaped.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// The exposition, or why the store's figures could not be read (the scrape then fails, and
/// Prometheus's `up` says so, rather than reporting zeros).
pub fn render_metrics(state: &AppState) -> Result<String, String> {
    let store = state.monitor.store_view(false)?;
    let mut m = Exposition(String::with_capacity(16 * 1024));
    // (library, drive index, counters, loaded), and the physical model of emulated drives
    let mut drives = Vec::new();
    let mut physical = Vec::new();
    for lib in &state.libraries {
        for (i, status) in lib.drive_statuses().into_iter().enumerate() {
            let (stats, st) = (status.stats, status.state);
            if let Some((_, p)) = status.physical {
                physical.push((lib.spec().name.clone(), i.to_string(), p));
            }
            drives.push((
                lib.spec().name.clone(),
                i.to_string(),
                stats,
                state_name(st).0 == "loaded",
            ));
        }
    }
    /// A drive's value from its counters and whether it is loaded.
    type DriveValue = fn(&reel_ssc::DriveStats, bool) -> u64;
    let per_drive: [(&str, &str, &str, Option<&str>, DriveValue); 7] = [
        (
            "reel_drive_bytes_total",
            "counter",
            "Bytes moved by a tape drive, by direction.",
            Some("read"),
            |s, _| s.bytes_read,
        ),
        (
            "reel_drive_bytes_total",
            "counter",
            "",
            Some("write"),
            |s, _| s.bytes_written,
        ),
        (
            "reel_drive_commands_total",
            "counter",
            "READ and WRITE commands of a tape drive.",
            Some("read"),
            |s, _| s.read_commands,
        ),
        (
            "reel_drive_commands_total",
            "counter",
            "",
            Some("write"),
            |s, _| s.write_commands,
        ),
        (
            "reel_drive_filemarks_total",
            "counter",
            "Filemarks written by a tape drive.",
            None,
            |s, _| s.filemarks_written,
        ),
        (
            "reel_drive_loads_total",
            "counter",
            "Cartridge loads of a tape drive.",
            None,
            |s, _| s.loads,
        ),
        (
            "reel_drive_loaded",
            "gauge",
            "1 when a cartridge is threaded in the drive.",
            None,
            |_, loaded| u64::from(loaded),
        ),
    ];
    for (name, kind, help, direction, value) in per_drive {
        // A family's second direction continues the family started by the first.
        if !help.is_empty() {
            m.family(name, kind, help);
        }
        for (lib, i, stats, loaded) in &drives {
            let mut labels = vec![("library", lib.as_str()), ("drive", i.as_str())];
            if let Some(d) = direction {
                labels.push(("direction", d));
            }
            m.sample(name, &labels, value(stats, *loaded));
        }
    }

    m.family(
        "reel_drive_command_seconds",
        "gauge",
        "How long the command a tape drive is executing has been running; 0 when idle.",
    );
    for lib in &state.libraries {
        for (i, drive) in lib.drives().iter().enumerate() {
            let busy = drive.busy_for().unwrap_or_default().as_secs_f64();
            let i = i.to_string();
            m.sample(
                "reel_drive_command_seconds",
                &[("library", lib.spec().name.as_str()), ("drive", i.as_str())],
                busy,
            );
        }
    }

    // The physical model of emulated drives (issue 17): samples only for those.
    type PhysicalValue = fn(&reel_drivemodel::DriveStats) -> f64;
    let physical_families: [(&str, &str, &str, PhysicalValue); 3] = [
        (
            "reel_drive_back_hitches_total",
            "counter",
            "Back-hitches (stops that had to reposition) of an emulated drive's physical model.",
            |p| p.back_hitches as f64,
        ),
        (
            "reel_drive_repositioning_seconds_total",
            "counter",
            "Time an emulated drive's physical model spent repositioning.",
            |p| p.repositioning.as_secs_f64(),
        ),
        (
            "reel_drive_tape_speed_bytes",
            "gauge",
            "Tape speed of an emulated drive's physical model, native bytes per second (0 when stopped).",
            |p| p.tape_speed,
        ),
    ];
    for (name, kind, help, value) in physical_families {
        m.family(name, kind, help);
        for (lib, i, p) in &physical {
            m.sample(
                name,
                &[("library", lib.as_str()), ("drive", i.as_str())],
                value(p),
            );
        }
    }

    let stats = state.monitor.initiator_stats();
    let rows: Vec<(Vec<(&str, String)>, &reel_iscsi_net::LunCounters)> = stats
        .iter()
        .flat_map(|s| {
            s.by_lun.iter().map(move |(lun, c)| {
                let labels = vec![
                    ("initiator", s.initiator.clone()),
                    ("target", s.target.clone().unwrap_or_default()),
                    ("lun", lun.to_string()),
                ];
                (labels, c)
            })
        })
        .collect();
    let with =
        |labels: &[(&'static str, String)],
         extra: &[(&'static str, String)]|
         -> Vec<(&'static str, String)> { labels.iter().chain(extra).cloned().collect() };
    m.family(
        "reel_initiator_bytes_total",
        "counter",
        "Bytes moved per initiator and LUN, by direction.",
    );
    for (l, c) in &rows {
        m.sample(
            "reel_initiator_bytes_total",
            &with(l, &[("direction", "read".into())]),
            c.bytes_read,
        );
        m.sample(
            "reel_initiator_bytes_total",
            &with(l, &[("direction", "write".into())]),
            c.bytes_written,
        );
    }
    m.family(
        "reel_initiator_commands_total",
        "counter",
        "SCSI commands per initiator and LUN.",
    );
    for (l, c) in &rows {
        m.sample("reel_initiator_commands_total", l, c.commands);
    }
    m.family(
        "reel_scsi_errors_total",
        "counter",
        "Commands that ended in CHECK CONDITION, by sense key, per initiator and LUN.",
    );
    for (l, c) in &rows {
        for (key, n) in c
            .check_conditions
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
        {
            m.sample(
                "reel_scsi_errors_total",
                &with(l, &[("sense_key", SENSE_KEYS[key].into())]),
                n,
            );
        }
    }
    m.family(
        "reel_command_latency_seconds",
        "histogram",
        "SCSI command latency per initiator and LUN (target side, from dispatch to completion).",
    );
    for (l, c) in &rows {
        let mut cumulative = 0;
        let bounds = LATENCY_BUCKETS_US
            .iter()
            .map(|b| (*b as f64 / 1e6).to_string())
            .chain(["+Inf".to_string()]);
        for (count, le) in c.latency_buckets.iter().zip(bounds) {
            cumulative += count;
            m.sample(
                "reel_command_latency_seconds_bucket",
                &with(l, &[("le", le)]),
                cumulative,
            );
        }
        m.sample(
            "reel_command_latency_seconds_sum",
            l,
            c.latency_sum_us as f64 / 1e6,
        );
        m.sample("reel_command_latency_seconds_count", l, c.commands);
    }

    let gauges: [(&str, &str, f64); 17] = [
        (
            "reel_iscsi_sessions",
            "Logged-in iSCSI sessions.",
            state.target.sessions().len() as f64,
        ),
        (
            "reel_store_logical_bytes",
            "Bytes the hosts wrote that the store keeps.",
            store.logical_bytes as f64,
        ),
        (
            "reel_store_unique_bytes",
            "Distinct chunk bytes before compression.",
            store.unique_bytes as f64,
        ),
        (
            "reel_store_stored_bytes",
            "Bytes of pack objects on the back end.",
            store.stored_bytes as f64,
        ),
        ("reel_store_chunks", "Distinct chunks.", store.chunks as f64),
        ("reel_store_packs", "Pack objects.", store.packs as f64),
        (
            "reel_store_dedup_ratio",
            "Logical bytes per unique byte.",
            store.dedup_ratio,
        ),
        (
            "reel_store_compression_ratio",
            "Unique bytes per stored byte.",
            store.compression_ratio,
        ),
        (
            "reel_store_on_disk_bytes",
            "Allocated bytes of everything under the data directory (packs, catalog, logs).",
            store.on_disk_bytes as f64,
        ),
        (
            "reel_store_catalog_bytes",
            "Allocated bytes of the catalog (part of reel_store_on_disk_bytes).",
            store.catalog_bytes as f64,
        ),
        (
            "reel_store_reduction_ratio",
            "Logical bytes per byte of pack objects.",
            store.reduction_ratio,
        ),
        (
            "reel_store_reduction_on_disk_ratio",
            "Logical bytes per byte the data directory takes on disk.",
            store.reduction_ratio_on_disk,
        ),
        (
            "reel_disk_free_bytes",
            "Free bytes on the data directory's file system.",
            store.disk_free as f64,
        ),
        (
            "reel_disk_total_bytes",
            "Size of the data directory's file system.",
            store.disk_total as f64,
        ),
        (
            "reel_verify_progress_ratio",
            "Share of packs the current (or last) verify has checked; 1 when done.",
            super::verify::progress(state.jobs()),
        ),
        (
            "reel_verify_damaged_chunks",
            "Chunks the last verify found damaged (0 when clean or never run); the damaged \
             cartridges and records are in GET /api/v1/verify.",
            state.jobs().verify.lock().bad_chunks as f64,
        ),
        (
            "reel_reclaim_progress_ratio",
            "Share of packs the current (or last) reclaim has examined; 1 when done.",
            state.jobs().reclaim.lock().progress.ratio(),
        ),
    ];
    for (name, help, value) in gauges {
        m.family(name, "gauge", help);
        m.sample::<&str>(name, &[], value);
    }
    for (name, help, value) in super::archive::metrics(state)
        .into_iter()
        .chain(super::shared_vault::metrics(state))
    {
        m.family(name, "gauge", help);
        m.sample::<&str>(name, &[], value);
    }
    if let Some(b) = &store.bucket {
        let bucket: [(&str, &str, &str, f64); 12] = [
            (
                "reel_bucket_pending_bytes",
                "gauge",
                "Bytes accepted but not yet uploaded to the bucket.",
                b.pending_bytes as f64,
            ),
            (
                "reel_bucket_pending_objects",
                "gauge",
                "Objects (puts and deletes) queued for the bucket.",
                b.pending_objects as f64,
            ),
            (
                "reel_bucket_oldest_pending_seconds",
                "gauge",
                "Age of the oldest object not yet in the bucket; 0 when none is queued.",
                b.oldest_pending_seconds.unwrap_or(0.0),
            ),
            (
                "reel_bucket_uploaded_bytes_total",
                "counter",
                "Bytes uploaded to the bucket by the write-back cache.",
                b.uploaded_bytes as f64,
            ),
            (
                "reel_bucket_upload_retries_total",
                "counter",
                "Failed uploads that were retried.",
                b.upload_retries as f64,
            ),
            (
                "reel_bucket_requests_total",
                "counter",
                "Requests made to the bucket.",
                b.requests as f64,
            ),
            (
                "reel_bucket_cached_bytes",
                "gauge",
                "Recently read bucket data kept in the local cache.",
                b.cached_bytes as f64,
            ),
            (
                "reel_bucket_cache_memory_bytes",
                "gauge",
                "Memory the local cache holds: copies of packs waiting to upload, blocks just fetched.",
                b.memory_bytes as f64,
            ),
            (
                "reel_bucket_failed",
                "gauge",
                "1 when uploads stopped for good (another node wrote this store's journal).",
                f64::from(u8::from(b.failed.is_some())),
            ),
            (
                "reel_bucket_catalog_checkpoint_bytes",
                "gauge",
                "Size of the newest catalog checkpoint in the bucket; 0 before the first.",
                b.catalog_checkpoint_bytes as f64,
            ),
            (
                "reel_bucket_catalog_journal_objects",
                "gauge",
                "Catalog journal objects after the newest checkpoint: what a recovery replays.",
                b.catalog_journal_objects as f64,
            ),
            (
                "reel_bucket_catalog_journal_bytes",
                "gauge",
                "Bytes of the catalog journal objects after the newest checkpoint.",
                b.catalog_journal_bytes as f64,
            ),
        ];
        for (name, kind, help, value) in bucket {
            m.family(name, kind, help);
            m.sample::<&str>(name, &[], value);
        }
        m.family(
            "reel_bucket_cartridge_pending_bytes",
            "gauge",
            "Bytes of a cartridge not yet in the bucket (cartridges with some).",
        );
        for c in &b.by_cartridge {
            m.sample(
                "reel_bucket_cartridge_pending_bytes",
                &[("cartridge", c.barcode.as_str())],
                c.pending_bytes,
            );
        }
        m.family(
            "reel_bucket_cartridge_oldest_pending_seconds",
            "gauge",
            "Age of a cartridge's oldest data not yet in the bucket.",
        );
        for c in &b.by_cartridge {
            m.sample(
                "reel_bucket_cartridge_oldest_pending_seconds",
                &[("cartridge", c.barcode.as_str())],
                c.oldest_pending_seconds,
            );
        }
    }
    m.family(
        "reel_process_cpu_seconds_total",
        "counter",
        "CPU time of the reel process.",
    );
    m.sample::<&str>("reel_process_cpu_seconds_total", &[], process_cpu_seconds());
    Ok(m.0)
}

/// Prometheus metrics: loopback peers only, or with a token as well when `[http] metrics =
/// "token"` (docs/design/api.md).
pub async fn metrics(
    State(state): State<Arc<AppState>>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<std::net::SocketAddr>,
    caller: Option<Caller>,
) -> ApiResult<impl IntoResponse> {
    if !peer.ip().to_canonical().is_loopback() {
        match (state.metrics, caller) {
            (super::MetricsAccess::Token, Some(_)) => {}
            (super::MetricsAccess::Token, None) => {
                return Err(ApiError::unauthenticated(
                    "metrics: send Authorization: Bearer <token> from this address",
                ));
            }
            (super::MetricsAccess::Loopback, _) => {
                return Err(ApiError::forbidden(format!(
                    "metrics answer loopback peers only, not {} (set [http] metrics = \"token\" to allow others with a token)",
                    peer.ip()
                )));
            }
        }
    }
    let text = blocking(state, |s| render_metrics(&s).map_err(ApiError::internal)).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}
