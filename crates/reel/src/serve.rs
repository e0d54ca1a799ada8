//! `reel serve`: the library on its embedded default, and the iSCSI target.
//!
//! A new data directory gets 20 blank LTO-9 cartridges (REL001L9…REL020L9). Without a
//! configuration file, reel serves one tape library on 127.0.0.1:3260: an IBM 3584 changer
//! at LUN 0, four IBM LTO-9 drives at LUNs 1–4, 40 slots and 4 import/export elements, with
//! the cartridges in the first slots. Everything persists across restarts, including which
//! cartridge is where. Ctrl-C or SIGTERM lets running commands finish, logs sessions out,
//! synchronises loaded cartridges and the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use reel_iscsi::chap::ChapCredentials;
use reel_iscsi::login::{PortalConfig, RedirectTable, TargetConfig};
use reel_iscsi::params::Limits;
use reel_iscsi_net::{TargetServer, TargetServerConfig};
use reel_library::{LibrarySpec, VirtualLibrary};
use reel_media::{CartridgeInfo, MediaType};
use reel_scsi::{Identity, LunTable, NullDisk, ScsiDevice};
use reel_volume::Cartridges;

use crate::admin::{barcodes, human, now};
use crate::cluster;
use crate::config::{self, Chap, Config, TargetKind};
use crate::data_dir::{self, DEFAULT_DATA_DIR};
use crate::http;

/// Writes a file only its owner can read (first-login password), also over an existing file
/// of any mode: it is emptied and made 0600 before the text goes in.
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} private", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// How long a stopping server waits for queued uploads to reach the bucket.
const SHUTDOWN_UPLOAD_WAIT: Duration = Duration::from_secs(60);

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Data directory (created if missing; default: the configuration's store.data_dir, else
    /// ./reel-data). Several instances need several directories.
    #[arg(long = "data", value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Blank LTO-9 cartridges to create when the data directory is new.
    #[arg(long, default_value_t = 20)]
    pub cartridges: u32,
    /// Configuration file (TOML): portals, targets, CHAP, initiator ACLs.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// iSCSI portal(s) to listen on, overriding the configuration (port 0 picks a free port).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Vec<String>,
    /// Address of the web console and REST API, overriding the configuration
    /// (default 127.0.0.1:8080; port 0 picks a free port; `off` disables them).
    #[arg(long, value_name = "ADDR:PORT|off")]
    pub http: Option<String>,
}

fn credentials(chap: &Option<Chap>) -> Option<ChapCredentials> {
    chap.as_ref()
        .map(|c| ChapCredentials::new(c.user.clone(), c.secret.as_str()))
}

/// A 1 TiB null disk (2^31 blocks, so 32-bit LBAs can address past its end) with a serial number and NAA identifier unique in this server.
fn null_disk(target: usize, lun: u32) -> NullDisk {
    let serial = format!("REELNULL{target:03}{lun:03}");
    // NAA 6 (IEEE registered extended) with a zero company id: locally unique only.
    let naa = 0x6000_0000_0000_0000 | ((target as u64) << 16) | u64::from(lun);
    let mut identity = Identity::new(0x00, "REEL", "NULLDISK", "0001", &serial, naa);
    identity.version_descriptors = vec![0x04C0]; // SBC-3
    NullDisk::new(512, 1 << 31).with_identity(identity)
}

/// Opens the configured libraries over the store's cartridges (in target order).
/// The shared vault: `<cluster prefix>/vault` in the store's bucket, sealed with the store's
/// key; this store is named by its prefix, this node by `[cluster] node` (or the host name).
fn open_shared_vault(
    config: &Config,
    binding: &data_dir::BucketBinding,
    key: Option<&crate::store_key::StoreKeys>,
    carts: &Arc<Cartridges>,
) -> anyhow::Result<reel_volume::SharedVault> {
    let cluster_prefix = config
        .cluster
        .as_ref()
        .map_or_else(config::default_cluster_prefix, |c| c.prefix.clone());
    let node = config
        .cluster
        .as_ref()
        .and_then(|c| c.node.clone())
        .unwrap_or_else(cluster::host_name);
    let vault_prefix = format!("{}/vault", cluster_prefix.trim_end_matches('/'));
    let vault = data_dir::sealed_bucket(&binding.s3, &vault_prefix, key)?;
    Ok(reel_volume::SharedVault::new(
        (**carts).clone(),
        vault,
        &binding.s3.prefix,
        &node,
    ))
}

fn open_libraries(
    config: &Config,
    cartridges: &Arc<Cartridges>,
) -> anyhow::Result<Vec<Arc<VirtualLibrary>>> {
    let mut specs = Vec::new();
    for entry in config
        .iscsi
        .targets
        .iter()
        .filter(|t| t.kind == TargetKind::Library)
    {
        let (changer, drive, layout) = entry.library_layout()?;
        specs.push(LibrarySpec {
            name: entry.name.clone(),
            changer,
            drive,
            layout,
            barcodes: config.barcode_filter(entry)?,
            physical: entry.physical.clone(),
            index: specs.len() as u16,
            emulation: entry.emulation(drive, &layout)?,
        });
    }
    Ok(VirtualLibrary::open_all(cartridges.clone(), &specs)?
        .into_iter()
        .map(Arc::new)
        .collect())
}

/// Builds the iSCSI server settings and logical units from the configuration.
fn target_server_config(
    config: &Config,
    libraries: &[Arc<VirtualLibrary>],
    redirects: RedirectTable,
) -> anyhow::Result<TargetServerConfig> {
    let iscsi = &config.iscsi;
    let mut targets = Vec::new();
    let mut luns = Vec::new();
    let mut libraries = libraries.iter();
    for (index, entry) in iscsi.targets.iter().enumerate() {
        targets.push(TargetConfig {
            name: entry.name.clone(),
            alias: entry.alias.clone(),
            allow_initiators: entry.allow_initiators.clone(),
            chap: credentials(&entry.chap),
            mutual_chap: credentials(&entry.mutual_chap),
            portal_group_tag: 1,
        });
        let table = match entry.kind {
            TargetKind::NullDisk => {
                let mut table = LunTable::new();
                for lun in 0..entry.luns {
                    table.insert(lun as u64, Arc::new(ScsiDevice::new(null_disk(index, lun))));
                }
                table
            }
            TargetKind::Library => libraries
                .next()
                .context("a library for every library target")?
                .lun_table(),
        };
        luns.push(Arc::new(table));
    }
    let limits = Limits {
        max_recv_data_segment_length: iscsi.max_recv_data_segment_length,
        max_burst_length: iscsi.max_burst_length,
        first_burst_length: iscsi.first_burst_length.min(iscsi.max_burst_length),
        ..Limits::target_default()
    };
    let listen = iscsi
        .listen
        .iter()
        .map(|l| l.parse().with_context(|| format!("listen address {l}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(TargetServerConfig {
        listen,
        portal: PortalConfig {
            targets,
            // Empty: the server advertises the addresses it bound.
            addresses: Vec::new(),
            limits,
            discovery_chap: credentials(&iscsi.discovery_chap),
            redirects,
        },
        luns,
        queue_depth: iscsi.queue_depth,
        nop_interval: Duration::from_secs(iscsi.nop_interval_secs),
        login_timeout: Duration::from_secs(30),
        max_sessions: iscsi.max_sessions,
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => config::load(path)?,
        None => Config::default(),
    };
    if !args.listen.is_empty() {
        config.iscsi.listen = args.listen.clone();
    }
    match args.http.as_deref() {
        Some("off") => config.http.enabled = false,
        Some(addr) => {
            addr.parse::<std::net::SocketAddr>()
                .with_context(|| format!("--http {addr}: not an address:port or `off`"))?;
            config.http.listen = addr.to_string();
        }
        None => {}
    }
    let dir = &args
        .data
        .clone()
        .or_else(|| config.store.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("reel-io")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // Several nodes on one bucket: hold the store's lease before touching the store (opening
    // it deletes packs no journal names yet, which a live holder may be about to name).
    let redirects = RedirectTable::default();
    let renewer = match &config.cluster {
        Some(section) => {
            let (held, objects, node_id) =
                cluster::join(&config, section, dir, &redirects, &runtime)?;
            Some(cluster::Renewer::start(
                held,
                objects,
                redirects.clone(),
                node_id,
            ))
        }
        None => None,
    };
    // Check the TLS material and bind the console before the store opens: a bad certificate
    // or a port conflict stops reel before it touches the store. (After the lease: a standby
    // does not hold the console's port, unanswered, while it waits.)
    let tls_config = match (&config.http.tls_cert, &config.http.tls_key) {
        (Some(cert), Some(key)) if config.http.enabled => {
            let tls = http::Tls {
                cert: cert.clone(),
                key: key.clone(),
            };
            let probe = tokio::runtime::Builder::new_current_thread()
                .build()
                .context("starting the async runtime")?;
            Some(probe.block_on(tls.load())?)
        }
        _ => None,
    };
    let http_listener = if config.http.enabled {
        let addr: std::net::SocketAddr = config.http.listen.parse()?;
        Some(http::bind(addr).with_context(|| {
            format!("web console on {addr} (is another reel using the port? --http picks another)")
        })?)
    } else {
        None
    };
    let mut last_report = std::time::Instant::now();
    let opened = data_dir::open_with(dir, Some(&config.store), &mut |p| {
        if p.done == p.total || last_report.elapsed().as_secs() >= 1 {
            last_report = std::time::Instant::now();
            println!(
                "catching up with the bucket's catalog (checkpoint parts, then journal): {}/{} objects, {} changes",
                p.done, p.total, p.ops
            );
        }
    })?;
    let opened_cache = opened.cache.clone();
    let mut bucket_source = match (&opened.cache, &opened.bucket, &opened.binding) {
        (Some(cache), Some(bucket), Some(binding)) => Some(http::monitor::BucketSource {
            cache: cache.clone(),
            bucket: bucket.clone(),
            location: binding.describe(),
            durability: binding.durability.clone(),
            cache_capacity: reel_datagen::parse_size(&binding.cache_size).unwrap_or(0),
        }),
        _ => None,
    };
    if let Some(b) = &bucket_source {
        println!(
            "store on {} (durability {}, cache {} in {})",
            b.location,
            b.durability,
            human(b.cache_capacity),
            dir.join("cache").display()
        );
    }
    let carts = Arc::new(opened.carts);
    if carts.list()?.is_empty() && args.cartridges > 0 {
        for b in barcodes("REL", 1, args.cartridges, MediaType::Lto9)? {
            carts.create(&CartridgeInfo::new(b, MediaType::Lto9, now()))?;
        }
    }
    let list = carts.list()?;
    let stats = carts.store().stats()?;
    println!(
        "reel {} — data directory {}",
        env!("CARGO_PKG_VERSION"),
        dir.display()
    );
    let on_disk = crate::disk_usage::bytes_on_disk(dir)
        .with_context(|| format!("measuring {}", dir.display()))?;
    println!(
        "library store ready: {} cartridges ({} … {}), {} written, {} in packs ({:.2}:1), {} on disk ({:.2}:1)",
        list.len(),
        list.first().map_or("-", |(_, i)| i.barcode().as_str()),
        list.last().map_or("-", |(_, i)| i.barcode().as_str()),
        human(stats.logical_bytes),
        human(stats.stored_bytes),
        stats.reduction_ratio(),
        human(on_disk),
        if on_disk > 0 {
            stats.logical_bytes as f64 / on_disk as f64
        } else {
            1.0
        }
    );
    println!(
        "catalog cache: up to {} MiB ([store] catalog_cache)",
        carts.store().config().catalog_cache_bytes >> 20
    );
    match carts.store().config().catalog_compact_idle {
        Some(idle) => println!(
            "catalog compaction: after {} s without a write, and at a clean stop \
             ([store] catalog_compact_idle_secs)",
            idle.as_secs()
        ),
        None => println!(
            "catalog compaction: at a clean stop only ([store] catalog_compact_idle_secs = 0)"
        ),
    }
    let chunker = carts.store().chunker();
    println!(
        "chunks: {} KiB on average (fixed when the store was created)",
        chunker.avg >> 10
    );
    if let Some(asked) = config.store.chunker()?
        && asked != chunker
    {
        println!(
            "warning: [store] chunk_size = {} KiB applies to new stores only; this one keeps {} KiB",
            asked.avg >> 10,
            chunker.avg >> 10
        );
    }
    // Interrupted archive and restore jobs first: a half-archived cartridge goes back to the
    // vault as available before any library looks for newcomers (docs/design/archive.md).
    for (barcode, done) in reel_volume::Archive::recover(&carts)? {
        println!("archive tier: {barcode}: {done:?}");
    }
    // The shared vault (a store on a bucket): shares and adoptions a crash interrupted are
    // settled before any library looks for newcomers, like the archive's.
    let shared_vault = match &opened.binding {
        Some(binding) => {
            let vault = open_shared_vault(&config, binding, opened.key.as_ref(), &carts)?;
            match vault.recover() {
                Ok(done) => {
                    for (barcode, what) in done {
                        println!("shared vault: {barcode}: {what}");
                    }
                }
                Err(e) => eprintln!("shared vault: settling interrupted shares: {e}"),
            }
            Some(vault)
        }
        None => None,
    };
    let archive = match &config.archive {
        Some(section) => {
            let archive = crate::archive_location::open(section, &carts, dir, opened.key.as_ref())?;
            println!(
                "archive location: {}{}",
                crate::archive_location::describe(section),
                if opened.key.is_some() {
                    " (sealed with the store key)"
                } else {
                    ""
                }
            );
            // Images of deleted or restored cartridges a failure or an offline
            // `reel cartridges delete` left in the location.
            match archive.purge_images() {
                Ok(done) => {
                    for (barcode, generation, objects) in done {
                        println!(
                            "archive tier: {barcode}: image {generation:x} deleted ({objects} objects)"
                        );
                    }
                }
                Err(e) => eprintln!(
                    "archive tier: deleting images no cartridge names (kept for the next start): {e}"
                ),
            }
            Some(archive)
        }
        None => None,
    };
    let libraries = open_libraries(&config, &carts)?;
    let server_config = target_server_config(&config, &libraries, redirects.clone())?;
    let target_names: Vec<String> = config
        .iscsi
        .targets
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let server = runtime
        .block_on(TargetServer::start(server_config))
        .map(Arc::new)
        .with_context(|| {
            format!(
                "listening on {} (is another target using the port?)",
                config.iscsi.listen.join(", ")
            )
        })?;
    for addr in server.local_addrs() {
        println!("iSCSI portal: {addr}");
    }
    let mut libraries_shown = libraries.iter();
    for (name, entry) in target_names.iter().zip(&config.iscsi.targets) {
        match entry.kind {
            TargetKind::Library => {
                let library = libraries_shown
                    .next()
                    .context("a library per library target")?;
                let spec = library.spec();
                let cartridges = library
                    .changer()
                    .with_personality(|c| c.inventory().barcodes().len());
                println!(
                    "iSCSI target: {name} — tape library{}: {} changer at LUN 0, {} {} drives at LUN 1-{}, \
                     {} slots, {} import/export, {} cartridges",
                    spec.physical
                        .as_deref()
                        .map(|p| format!(" (logical partition of {p})"))
                        .unwrap_or_default(),
                    spec.changer.name(),
                    spec.layout.drives,
                    spec.drive.name(),
                    spec.layout.drives,
                    spec.layout.slots,
                    spec.layout.import_export,
                    cartridges
                );
            }
            TargetKind::NullDisk => {
                println!("iSCSI target: {name} — {} null disk LUN(s)", entry.luns);
            }
        }
    }
    if target_names.is_empty() {
        println!("iSCSI target: none configured");
    }
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut http_task = None;
    if let Some(listener) = http_listener {
        let (auth, initial_password) = http::auth::Auth::open(carts.store().clone())?;
        auth.start();
        let monitor = http::monitor::Monitor::new(
            libraries.clone(),
            carts.clone(),
            server.clone(),
            dir.clone(),
            bucket_source.take(),
        );
        monitor.start();
        let state = Arc::new(http::AppState {
            libraries: libraries.clone(),
            cartridges: carts.clone(),
            auth,
            target: server.clone(),
            monitor,
            maintenance: http::maintenance::Jobs::new(),
            logins: http::limits::LoginLimits::new(),
            metrics: config.http.metrics,
            archive,
            shared_vault,
        });
        let addr = listener.local_addr()?;
        let scheme = if tls_config.is_some() {
            "https"
        } else {
            "http"
        };
        let _guard = runtime.enter();
        http_task = Some(
            runtime.spawn(http::serve(listener, state, tls_config, async move {
                let _ = http_stopped.await;
            })),
        );
        println!(
            "web console and REST API: {scheme}://{addr}/ (OpenAPI: {scheme}://{addr}/api/v1/openapi.json, metrics: {scheme}://{addr}/metrics)"
        );
        if let Some(password) = initial_password {
            let file = dir.join("initial-admin-password");
            write_private(&file, &format!("{password}\n"))?;
            println!(
                "first login: user admin, password {password} (also in {}; change it in the console)",
                file.display()
            );
        }
    }
    for warning in config::exposure_warnings(&config) {
        eprintln!("reel: warning: {warning}");
    }
    // The handler is in place before the line that says it is: a SIGTERM right after it must
    // stop reel cleanly, not kill it.
    let (tx, rx) = std::sync::mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .context("installing the signal handler")?;
    println!("Ctrl-C or SIGTERM stops reel cleanly");
    // systemd (Type=notify): the portals and the console listen, the store is open.
    crate::notify::ready(&format!(
        "serving {} librar{} on {}",
        libraries.len(),
        if libraries.len() == 1 { "y" } else { "ies" },
        config.iscsi.listen.join(", ")
    ));
    let _ = rx.recv();
    crate::notify::stopping();
    let _ = stop_http.send(());
    if let Some(mut task) = http_task {
        // Graceful shutdown waits for open connections, and a console keeps its monitor
        // stream open: give requests a moment, then close the rest.
        let ended = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(3), &mut task).await });
        match ended {
            Ok(Ok(Err(e))) => eprintln!("reel: web console: {e}"),
            Ok(Err(e)) => eprintln!("reel: web console: {e}"),
            Ok(Ok(Ok(()))) => {}
            Err(_) => task.abort(),
        }
    }
    runtime.block_on(server.shutdown(Duration::from_secs(10)));
    runtime.shutdown_timeout(Duration::from_secs(2));
    let mut unsynced = 0;
    for library in &libraries {
        for (drive, why) in library.flush() {
            unsynced += 1;
            eprintln!(
                "reel: drive {drive} of {}: could not synchronise its cartridge: {why}",
                library.spec().name
            );
        }
    }
    drop(libraries);
    carts
        .store()
        .sync()
        .context("syncing the store on shutdown")?;
    // The pages the catalog's copy-on-write left spare go back to the disk (efficiency.md §41).
    match carts.store().compact_catalog() {
        Ok(Ok(c)) => tracing::info!(
            "catalog compacted: {:.1} -> {:.1} MB in {} ms",
            c.before as f64 / 1e6,
            c.after as f64 / 1e6,
            c.took.as_millis()
        ),
        Ok(Err(reel_chunkstore::CatalogNotCompacted::Large)) => tracing::info!(
            "catalog not compacted at this stop: over {} GiB, it could outlast a service \
             manager's stop timeout; `reel compact --data {}` compacts it with the server stopped",
            reel_chunkstore::CATALOG_STOP_COMPACT_MAX_BYTES >> 30,
            dir.display()
        ),
        Ok(Err(_)) => {}
        Err(e) => eprintln!("reel: compacting the catalog on shutdown: {e}"),
    }
    drop(carts);
    if unsynced == 0 {
        tracing::info!("stopped cleanly: every drive's data and the store are synchronised");
    }
    if let Some(cache) = opened_cache {
        // Data synced at durability `local` may still be queued: upload it now if the bucket
        // answers soon; what is left stays in the cache and goes up at the next start.
        let (done_tx, done) = std::sync::mpsc::channel();
        let flusher = cache.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(reel_backend::Backend::flush(&*flusher));
        });
        match done.recv_timeout(SHUTDOWN_UPLOAD_WAIT) {
            Ok(Ok(())) => println!("everything is in the bucket"),
            Ok(Err(e)) => eprintln!("reel: uploading to the bucket on shutdown: {e}"),
            Err(_) => {
                let s = cache.stats();
                eprintln!(
                    "reel: {} in {} objects not yet in the bucket after {SHUTDOWN_UPLOAD_WAIT:?}: \
                     kept in the cache and uploaded at the next start",
                    human(s.pending_bytes),
                    s.pending_objects
                );
            }
        }
    }
    if let Some(renewer) = renewer {
        renewer.release();
    }
    if unsynced > 0 {
        // What the drives held since their last synchronising point was never acknowledged as
        // durable (SSC: only a synchronising point is), so it may be lost; say so, and fail.
        anyhow::bail!(
            "reel stopped, but {unsynced} drive(s) could not synchronise their cartridges: data \
             written to them since their last synchronising point may be lost"
        );
    }
    println!("reel stopped; everything is synced");
    Ok(())
}
