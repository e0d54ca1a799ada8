//! Several nodes on one bucket: which node serves a store's libraries, by a lease object.
//!
//! Every store (one `[store.s3]` prefix: its catalog journal and packs, and the libraries a
//! node's configuration defines on it) has a lease object `<cluster prefix>leases/<name>.json`
//! in the bucket. The node that holds it serves the libraries; it renews the lease every third
//! of its time to live with a compare-and-swap write (`If-Match` on the ETag), so a node that
//! stopped renewing is noticed by every other node that reads the same version for a whole time
//! to live, measured on *its own* monotonic clock: no node trusts another's wall clock.
//!
//! Safety does not rest on the lease: the catalog journal's create-only sequence numbers fence
//! a stale writer (docs/design/object-storage.md). The lease gives liveness and routing: a
//! second node refuses a live store (or, as a standby, waits for it), and every node redirects
//! iSCSI logins for targets another node holds to that node's portal (RFC 7143 §11.13.5).
//!
//! A holder that cannot renew for two thirds of the time to live stops the process: another
//! node may take over a third of a time to live later, and by then this one must have stopped
//! serving. A holder that finds its lease taken stops at once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use reel_backend::{BackendError, Key, Version, VersionedObjects};
use reel_iscsi::login::{PortalConfig, RedirectTable};
use reel_iscsi::params::Limits;
use reel_iscsi_net::{TargetServer, TargetServerConfig};
use serde::{Deserialize, Serialize};

use crate::config::{ClusterSection, Config, TargetKind};

/// The lease object's format number.
const LEASE_FORMAT: u32 = 1;
/// File in the data directory naming this node's store copy (see [`node_id`]).
pub const NODE_ID_FILE: &str = "node-id";

/// What a lease object says (JSON, so operators can read it with any S3 tool).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    pub format: u32,
    /// The holder's name (`[cluster] node`), for people.
    pub node: String,
    /// The holder's data directory identity: a node that finds its own id may take the lease
    /// back at once (it is the same store copy, restarted).
    pub node_id: String,
    /// Where initiators are redirected to: `host:port`.
    pub portal: String,
    /// `s3://bucket/prefix`: the store the lease is for.
    pub store: String,
    pub libraries: Vec<String>,
    pub targets: Vec<LeasedTarget>,
    pub ttl_ms: u64,
    /// The holder's wall clock at the last renewal: only used to refuse quickly, never to
    /// take over.
    pub renewed_unix_ms: u64,
    /// Renewals so far; makes every write's body unique (a retried write can tell it won).
    pub renewal: u64,
    /// Set by a holder that stopped cleanly: the store may be taken over at once.
    pub released: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LeasedTarget {
    pub name: String,
    pub tpgt: u16,
}

impl LeaseBody {
    fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// Seconds since the holder says it renewed, by our clock (may be skewed; for messages and
    /// the quick refusal only).
    fn age_by_wall_clock(&self) -> Duration {
        Duration::from_millis(unix_ms().saturating_sub(self.renewed_unix_ms))
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// This node and the store it wants to serve.
#[derive(Clone, Debug)]
pub struct Membership {
    /// The lease this node writes (`renewed_unix_ms` is set at each write).
    pub lease: LeaseBody,
    pub standby: bool,
}

/// The lease object's key for a store prefix: `leases/<prefix, / as ->-<hash>.json`; the hash of
/// the exact prefix keeps `a/b/` and `a-b/` apart.
pub fn lease_key(store_prefix: &str) -> Key {
    let readable = store_prefix.trim_matches('/').replace('/', "-");
    let hash = blake3::hash(store_prefix.as_bytes()).to_hex();
    let name = if readable.is_empty() {
        "root"
    } else {
        &readable
    };
    Key::new(format!("leases/{name}-{}.json", &hash[..12]))
        .expect("a validated store prefix makes a valid lease key")
}

/// Why a node may not serve the store now.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "{store} is served by node {node} (portal {portal}), whose lease was renewed {age:.0?} ago \
         and lives {ttl:?}: this node does not serve it. Stop that node, wait for its lease to \
         expire, or run this one with [cluster] standby = true to take over when it does"
    )]
    Live {
        store: String,
        node: String,
        portal: String,
        age: Duration,
        ttl: Duration,
    },
    #[error("the lease {key} is not a reel lease: {why}")]
    Unreadable { key: Key, why: String },
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A lease this node holds.
pub struct Held {
    objects: Arc<dyn VersionedObjects>,
    key: Key,
    body: LeaseBody,
    version: Version,
    /// The node id of the holder before us, when it was another data directory: our local
    /// copy of the store may be behind or diverged, so it is set aside and rebuilt.
    pub taken_from: Option<String>,
}

/// Takes the lease for `me`'s store: at once when it is free, released, or ours; after it went
/// unrenewed for a whole time to live (by our own clock) when another node held it. Without
/// `standby`, a lease that looks live is refused at once. `on_wait` is called with the other
/// holder's lease at each look while waiting.
pub fn acquire(
    objects: Arc<dyn VersionedObjects>,
    key: Key,
    me: &Membership,
    on_wait: &mut dyn FnMut(&LeaseBody),
) -> Result<Held, Refusal> {
    let mut watched: Option<(Version, Instant)> = None;
    loop {
        let current = objects.read_versioned(&key)?;
        let (expected, previous) = match current {
            None => (None, None),
            Some((bytes, version)) => {
                let body: LeaseBody =
                    serde_json::from_slice(&bytes).map_err(|e| Refusal::Unreadable {
                        key: key.clone(),
                        why: e.to_string(),
                    })?;
                if body.format != LEASE_FORMAT {
                    return Err(Refusal::Unreadable {
                        key,
                        why: format!("format {} (this reel reads {LEASE_FORMAT})", body.format),
                    });
                }
                let free = body.released || body.node_id == me.lease.node_id;
                if !free {
                    let since = match &watched {
                        Some((v, since)) if *v == version => *since,
                        _ => {
                            let now = Instant::now();
                            watched = Some((version.clone(), now));
                            now
                        }
                    };
                    // Another node's lease: expired only once we saw the same version for a
                    // whole time to live, plus a margin for the holder's own stop (it stops
                    // at two thirds).
                    let expired = since.elapsed() >= body.ttl() + body.ttl() / 10;
                    if !expired {
                        if !me.standby && body.age_by_wall_clock() < body.ttl() {
                            return Err(Refusal::Live {
                                store: body.store.clone(),
                                node: body.node.clone(),
                                portal: body.portal.clone(),
                                age: body.age_by_wall_clock(),
                                ttl: body.ttl(),
                            });
                        }
                        on_wait(&body);
                        std::thread::sleep((body.ttl() / 5).min(Duration::from_secs(1)));
                        continue;
                    }
                }
                let previous = (body.node_id != me.lease.node_id).then(|| body.node_id.clone());
                (Some(version), previous)
            }
        };
        let body = LeaseBody {
            renewed_unix_ms: unix_ms(),
            ..me.lease.clone()
        };
        let bytes = serde_json::to_vec_pretty(&body).expect("a lease encodes");
        match objects.write_versioned(&key, &bytes, expected.as_ref()) {
            Ok(version) => {
                if expected.is_some() && !still_ours(&*objects, &key, &version, body.ttl())? {
                    // Another contender's swap landed after ours: a server whose `If-Match`
                    // is not atomic let both through (s3proxy does). The last write holds it.
                    watched = None;
                    continue;
                }
                return Ok(Held {
                    objects,
                    key,
                    body,
                    version,
                    taken_from: previous,
                });
            }
            // Another node got there first: look again.
            Err(BackendError::AlreadyExists(_) | BackendError::VersionMismatch(_)) => {
                watched = None;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether the lease is still at the version our swap was given, a moment after the swap.
/// On a server that checks `If-Match` and writes in one step this is always so; on one that
/// does not (`conformance::concurrent_swaps`), a contender whose check passed at the same
/// version writes within that moment, and only the last writer keeps the lease. A contender
/// that writes even later is caught by the overwritten holder's next renewal, which fails at
/// its old version and stops that process.
fn still_ours(
    objects: &dyn VersionedObjects,
    key: &Key,
    version: &Version,
    ttl: Duration,
) -> Result<bool, BackendError> {
    std::thread::sleep((ttl / 20).min(Duration::from_millis(500)));
    Ok(objects
        .read_versioned(key)?
        .is_some_and(|(_, now)| now == *version))
}

/// A renewal found the lease rewritten by another node.
#[derive(Debug, thiserror::Error)]
#[error("another node took the lease {0}")]
pub struct LeaseTaken(Key);

impl Held {
    #[cfg(test)]
    pub fn body(&self) -> &LeaseBody {
        &self.body
    }

    /// How long renewals may keep failing before the holder must stop (see the module doc).
    pub fn stop_after(&self) -> Duration {
        self.body.ttl() * 2 / 3
    }

    /// How often to renew.
    pub fn renew_every(&self) -> Duration {
        self.body.ttl() / 3
    }

    /// Renews the lease once: `Ok(false)` when the bucket did not take the write (whether
    /// that lasted too long is the [`Renewer`]'s watchdog's call).
    pub fn renew(&mut self) -> Result<bool, LeaseTaken> {
        let mut next = self.body.clone();
        next.renewal += 1;
        next.renewed_unix_ms = unix_ms();
        let bytes = serde_json::to_vec_pretty(&next).expect("a lease encodes");
        match self
            .objects
            .write_versioned(&self.key, &bytes, Some(&self.version))
        {
            Ok(version) => {
                self.version = version;
                self.body = next;
                Ok(true)
            }
            Err(BackendError::VersionMismatch(_)) => Err(LeaseTaken(self.key.clone())),
            Err(e) => {
                tracing::warn!(key = %self.key, "renewing the lease: {e}");
                Ok(false)
            }
        }
    }

    /// Marks the lease released, so a standby takes over at once (a clean stop).
    pub fn release(mut self) -> Result<(), BackendError> {
        self.body.released = true;
        self.body.renewal += 1;
        let bytes = serde_json::to_vec_pretty(&self.body).expect("a lease encodes");
        self.objects
            .write_versioned(&self.key, &bytes, Some(&self.version))
            .map(|_| ())
    }
}

/// Every target another node holds a lease for, and where: `(target name, "host:port,tpgt")`
/// for the iSCSI redirect table. Released leases are left out; unreadable ones are skipped.
pub fn redirects(
    objects: &dyn VersionedObjects,
    me_node_id: &str,
) -> Result<Vec<(String, String)>, BackendError> {
    let mut out = Vec::new();
    for key in objects.list_versioned("leases/")? {
        let Some((bytes, _)) = objects.read_versioned(&key)? else {
            continue;
        };
        let Ok(body) = serde_json::from_slice::<LeaseBody>(&bytes) else {
            continue;
        };
        if body.released || body.node_id == me_node_id {
            continue;
        }
        for t in &body.targets {
            out.push((t.name.clone(), format!("{},{}", body.portal, t.tpgt)));
        }
    }
    Ok(out)
}

/// The node whose lease on the store at `key` looks live by our wall clock (a guard for the
/// offline tools, not a safety mechanism: judged without waiting a time to live).
pub fn live_holder(
    objects: &dyn VersionedObjects,
    key: &Key,
) -> Result<Option<LeaseBody>, BackendError> {
    let Some((bytes, _)) = objects.read_versioned(key)? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<LeaseBody>(&bytes)
        .ok()
        .filter(|b| !b.released && b.age_by_wall_clock() < b.ttl()))
}

/// This data directory's identity as a copy of a store: random, made at first use. A lease held
/// under another id means our local catalog and cache may be behind or diverged.
pub fn node_id(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| anyhow::anyhow!("random node id: {e}"))?;
    let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&path, format!("{id}\n"))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(id)
}

/// Moves a store copy that another node's lease superseded out of the way (`DIR/superseded-<unix
/// seconds>/`), so the store is rebuilt from the bucket. Kept, not deleted: it is evidence, and
/// what it held that never reached the bucket was never acknowledged at durability `bucket`.
pub fn set_aside_superseded_copy(dir: &Path) -> anyhow::Result<Option<std::path::PathBuf>> {
    let parts = ["catalog", "cache"];
    if !parts.iter().any(|p| dir.join(p).exists()) {
        return Ok(None);
    }
    let aside = dir.join(format!("superseded-{}", unix_ms() / 1000));
    std::fs::create_dir_all(&aside).with_context(|| format!("creating {}", aside.display()))?;
    for p in parts {
        let from = dir.join(p);
        if from.exists() {
            std::fs::rename(&from, aside.join(p))
                .with_context(|| format!("moving {} aside", from.display()))?;
        }
    }
    Ok(Some(aside))
}

/// A held lease being renewed in the background while the node serves.
pub struct Renewer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<Held>>,
}

impl Renewer {
    /// Renews `held` every third of its time to live and refreshes `table` from the other
    /// nodes' leases. The process exits (status 3) when the lease is taken, or unrenewed for
    /// two thirds of its time to live: a watchdog thread measures that, so a renewal hanging
    /// in a slow request cannot hide it.
    pub fn start(
        mut held: Held,
        objects: Arc<dyn VersionedObjects>,
        table: RedirectTable,
        node_id: String,
    ) -> Renewer {
        let stop = Arc::new(AtomicBool::new(false));
        let origin = Instant::now();
        let renewed_ms = Arc::new(AtomicU64::new(0));
        let stop_after = held.stop_after();
        {
            let (stop, renewed_ms, key) = (stop.clone(), renewed_ms.clone(), held.key.clone());
            std::thread::Builder::new()
                .name("reel-lease-watch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let last = Duration::from_millis(renewed_ms.load(Ordering::Relaxed));
                        let since = origin.elapsed().saturating_sub(last);
                        if since >= stop_after {
                            fence(&format!(
                                "the lease {key} was not renewed for {since:.1?} (the bucket does \
                                 not answer in time)"
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                })
                .expect("starting the lease watchdog");
        }
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("reel-lease".into())
                .spawn(move || {
                    loop {
                        let next = Instant::now() + held.renew_every();
                        while Instant::now() < next {
                            if stop.load(Ordering::Relaxed) {
                                return Some(held);
                            }
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        match held.renew() {
                            Ok(true) => {
                                renewed_ms
                                    .store(origin.elapsed().as_millis() as u64, Ordering::Relaxed);
                                if let Ok(entries) = redirects(&*objects, &node_id) {
                                    table.set(entries);
                                }
                            }
                            Ok(false) => {}
                            Err(taken) => fence(&taken.to_string()),
                        }
                    }
                })
                .expect("starting the lease renewer")
        };
        Renewer { stop, thread }
    }

    /// Stops renewing and releases the lease, so a standby takes over at once. Call after the
    /// store is synced (and its uploads flushed): the next holder reads what we wrote.
    pub fn release(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(Some(held)) = self.thread.join() {
            match held.release() {
                Ok(()) => println!("cluster: lease released"),
                Err(e) => eprintln!(
                    "reel: releasing the lease: {e} (another node takes over when it expires)"
                ),
            }
        }
    }
}

/// Stops the process at once: another node holds (or may take) the store, so this one must not
/// serve another command. The catalog journal's fence keeps the bucket safe meanwhile.
fn fence(why: &str) -> ! {
    eprintln!("reel: {why}: stopping now so that only the lease holder serves this store");
    std::process::exit(3)
}

/// Joins the cluster for `config`'s store: takes its lease (as a standby, waiting and
/// redirecting logins to the holder meanwhile) and sets aside a local store copy that another
/// node's lease superseded. Returns the lease and the bucket it lives in.
pub fn join(
    config: &Config,
    cluster: &ClusterSection,
    dir: &Path,
    table: &RedirectTable,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<(Held, Arc<dyn VersionedObjects>, String)> {
    crate::data_dir::ensure_private(dir)?;
    let node_id = node_id(dir)?;
    let s3 = config
        .store
        .s3
        .as_ref()
        .context("[cluster] needs [store.s3]")?;
    let objects: Arc<dyn VersionedObjects> =
        Arc::new(crate::data_dir::open_bucket(s3, &cluster.prefix, None)?);
    let me = Membership {
        lease: LeaseBody {
            format: LEASE_FORMAT,
            node: cluster.node.clone().unwrap_or_else(host_name),
            node_id: node_id.clone(),
            portal: cluster.portal_address(&config.iscsi)?,
            store: format!("s3://{}/{}", s3.bucket, s3.prefix),
            libraries: config
                .iscsi
                .targets
                .iter()
                .filter(|t| t.kind == TargetKind::Library)
                .map(|t| t.name.clone())
                .collect(),
            targets: config
                .iscsi
                .targets
                .iter()
                .map(|t| LeasedTarget {
                    name: t.name.clone(),
                    tpgt: 1,
                })
                .collect(),
            ttl_ms: cluster.lease_seconds * 1000,
            renewed_unix_ms: 0,
            renewal: 0,
            released: false,
        },
        standby: cluster.standby,
    };
    let key = lease_key(&s3.prefix);
    let mut portal: Option<TargetServer> = None;
    let mut refreshed: Option<Instant> = None;
    let mut portal_error = None;
    let acquired = acquire(objects.clone(), key, &me, &mut |body| {
        if refreshed.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)) {
            if refreshed.is_none() {
                println!(
                    "standby: {} is served by node {} (portal {}); taking over when its lease expires",
                    body.store, body.node, body.portal
                );
            }
            refreshed = Some(Instant::now());
            if let Ok(entries) = redirects(&*objects, &node_id) {
                table.set(entries);
            }
        }
        if portal.is_none() && portal_error.is_none() {
            // Meanwhile, logins at this node's portal go to the holder.
            match runtime.block_on(TargetServer::start(redirect_only(config, table))) {
                Ok(server) => {
                    for addr in server.local_addrs() {
                        println!("iSCSI portal (redirecting logins to the lease holders): {addr}");
                    }
                    portal = Some(server);
                }
                Err(e) => portal_error = Some(e),
            }
        }
    });
    if let Some(server) = portal {
        runtime.block_on(server.shutdown(Duration::from_secs(1)));
    }
    if let Some(e) = portal_error {
        eprintln!("reel: the standby's redirecting portal did not start: {e}");
    }
    let held = acquired?;
    println!(
        "cluster: node {} holds the lease for {} ({} s)",
        me.lease.node, me.lease.store, cluster.lease_seconds
    );
    if let Some(previous) = &held.taken_from
        && let Some(aside) = set_aside_superseded_copy(dir)?
    {
        println!(
            "cluster: took the store over from node id {previous}; the local copy it superseded is in {}",
            aside.display()
        );
    }
    if let Ok(entries) = redirects(&*objects, &node_id) {
        table.set(entries);
    }
    Ok((held, objects, node_id))
}

/// A portal with no targets of its own, redirecting logins to where the table says.
fn redirect_only(config: &Config, table: &RedirectTable) -> TargetServerConfig {
    TargetServerConfig {
        listen: config
            .iscsi
            .listen
            .iter()
            .filter_map(|l| l.parse().ok())
            .collect(),
        portal: PortalConfig {
            targets: Vec::new(),
            addresses: Vec::new(),
            limits: Limits::target_default(),
            discovery_chap: None,
            redirects: table.clone(),
        },
        luns: Vec::new(),
        queue_depth: config.iscsi.queue_depth,
        nop_interval: Duration::from_secs(config.iscsi.nop_interval_secs),
        login_timeout: Duration::from_secs(30),
        max_sessions: config.iscsi.max_sessions,
    }
}

pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "reel".into())
}

#[cfg(test)]
mod lease_kill_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use reel_backend::MemoryVersioned;
    use std::sync::Mutex;

    pub(super) fn member(id: &str, standby: bool, ttl_ms: u64) -> Membership {
        Membership {
            lease: LeaseBody {
                format: LEASE_FORMAT,
                node: format!("node-{id}"),
                node_id: id.into(),
                portal: format!("192.0.2.{}:3260", id.len()),
                store: "s3://b/site/".into(),
                libraries: vec!["lib".into()],
                targets: vec![LeasedTarget {
                    name: "iqn.2026-11.test:lib".into(),
                    tpgt: 1,
                }],
                ttl_ms,
                renewed_unix_ms: 0,
                renewal: 0,
                released: false,
            },
            standby,
        }
    }

    #[test]
    fn lease_keys_are_valid_and_distinct() {
        assert!(lease_key("").as_str().starts_with("leases/root-"));
        assert!(lease_key("site/a/").as_str().starts_with("leases/site-a-"));
        assert_ne!(lease_key("site/a/"), lease_key("site-a/"));
    }

    #[test]
    fn a_live_lease_is_refused_and_an_unrenewed_one_taken_over() {
        let objects: Arc<dyn VersionedObjects> = Arc::new(MemoryVersioned::new());
        let key = lease_key("site/");
        let mut a = acquire(
            objects.clone(),
            key.clone(),
            &member("a", false, 600),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(a.taken_from, None);
        assert!(a.renew().unwrap());

        // B without standby: refused while A renews.
        match acquire(
            objects.clone(),
            key.clone(),
            &member("b", false, 600),
            &mut |_| {},
        ) {
            Err(Refusal::Live { node, .. }) => assert_eq!(node, "node-a"),
            other => panic!("expected a refusal, got {:?}", other.map(|h| h.body)),
        }
        // The other nodes' redirect table names A's target at A's portal.
        assert_eq!(
            redirects(&*objects, "b").unwrap(),
            vec![("iqn.2026-11.test:lib".into(), "192.0.2.1:3260,1".into())]
        );
        assert!(redirects(&*objects, "a").unwrap().is_empty());

        // B as a standby: waits while A renews, takes over once A stops.
        let renewing = std::thread::spawn(move || {
            for _ in 0..4 {
                std::thread::sleep(Duration::from_millis(150));
                a.renew().unwrap();
            }
            a
        });
        let started = Instant::now();
        let mut waits = 0;
        let b = acquire(
            objects.clone(),
            key.clone(),
            &member("b", true, 600),
            &mut |_| waits += 1,
        )
        .unwrap();
        let mut a = renewing.join().unwrap();
        assert!(waits > 0);
        // A renewed until ~600 ms; B waited a whole time to live (+10 %) after that.
        assert!(
            started.elapsed() >= Duration::from_millis(600 + 600),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(b.taken_from.as_deref(), Some("a"));
        // A finds its lease taken at its next renewal.
        assert!(matches!(a.renew(), Err(LeaseTaken(_))));
    }

    #[test]
    fn a_released_or_own_lease_is_taken_at_once() {
        let objects: Arc<dyn VersionedObjects> = Arc::new(MemoryVersioned::new());
        let key = lease_key("x/");
        let a = acquire(
            objects.clone(),
            key.clone(),
            &member("a", false, 60_000),
            &mut |_| {},
        )
        .unwrap();
        a.release().unwrap();
        let started = Instant::now();
        let b = acquire(
            objects.clone(),
            key.clone(),
            &member("b", false, 60_000),
            &mut |_| {},
        )
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(b.taken_from.as_deref(), Some("a"));
        drop(b); // killed: not released
        // B restarted (same data directory id) takes its own lease back at once.
        let b2 = acquire(objects, key, &member("b", false, 60_000), &mut |_| {}).unwrap();
        assert_eq!(b2.taken_from, None);
        assert_eq!(b2.body().renewal, 0);
    }

    /// Fault injection: a server whose `If-Match` check and write are not one step, and a
    /// contender whose write at the same version lands just after ours.
    struct RacingSwap {
        inner: MemoryVersioned,
        rival: Mutex<Option<Vec<u8>>>,
    }

    impl VersionedObjects for RacingSwap {
        fn read_versioned(&self, key: &Key) -> reel_backend::Result<Option<(Vec<u8>, Version)>> {
            self.inner.read_versioned(key)
        }
        fn write_versioned(
            &self,
            key: &Key,
            data: &[u8],
            expected: Option<&Version>,
        ) -> reel_backend::Result<Version> {
            let ours = self.inner.write_versioned(key, data, expected)?;
            if expected.is_some()
                && let Some(rival) = self.rival.lock().unwrap().take()
            {
                // Passed the same check before ours was written.
                self.inner.write_versioned(key, &rival, Some(&ours))?;
            }
            Ok(ours)
        }
        fn list_versioned(&self, prefix: &str) -> reel_backend::Result<Vec<Key>> {
            self.inner.list_versioned(prefix)
        }
    }

    #[test]
    fn a_takeover_overwritten_by_a_racing_contender_is_not_taken() {
        let racing = Arc::new(RacingSwap {
            inner: MemoryVersioned::new(),
            rival: Mutex::new(None),
        });
        let objects: Arc<dyn VersionedObjects> = racing.clone();
        let key = lease_key("r/");
        acquire(
            objects.clone(),
            key.clone(),
            &member("a", false, 60_000),
            &mut |_| {},
        )
        .unwrap()
        .release()
        .unwrap();
        let mut c = member("c", false, 60_000).lease;
        c.renewed_unix_ms = unix_ms();
        *racing.rival.lock().unwrap() = Some(serde_json::to_vec(&c).unwrap());
        // B's swap of the released lease succeeds, but C's lands after it: B must not serve.
        match acquire(
            objects.clone(),
            key.clone(),
            &member("b", false, 60_000),
            &mut |_| {},
        ) {
            Err(Refusal::Live { node, .. }) => assert_eq!(node, "node-c"),
            other => panic!(
                "expected C's lease to stand, got {:?}",
                other.map(|h| h.body)
            ),
        }
    }
}
