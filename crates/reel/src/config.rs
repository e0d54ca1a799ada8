//! reel's configuration file (TOML), validated before anything starts.
//!
//! Only the `reel` binary reads configuration; libraries get typed values.
//! Every error names the file, and where the TOML parser knows it, the line,
//! column and key.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use reel_volume::BarcodeFilter;
use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub iscsi: IscsiConfig,
    #[serde(default)]
    pub http: HttpConfig,
    #[serde(default)]
    pub store: StoreSection,
    /// Cartridge pools: named barcode ranges that libraries and partitions take from.
    #[serde(default, rename = "pool")]
    pub pools: Vec<PoolEntry>,
    /// Several nodes on one bucket (docs/design/object-storage.md, "Several nodes").
    pub cluster: Option<ClusterSection>,
    /// Where archived cartridges go (docs/design/archive.md); none: archiving is off.
    pub archive: Option<ArchiveSection>,
}

/// `[cluster]`: this node's part in a cluster of nodes on one bucket.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// This node's name in leases and messages (default: the host name).
    pub node: Option<String>,
    /// The iSCSI portal other nodes redirect initiators to, `host:port` (default: the first
    /// `[iscsi] listen` address, which must then name a host and a port).
    pub portal: Option<String>,
    /// Wait for the store's lease to expire and take over, instead of refusing a live one.
    #[serde(default)]
    pub standby: bool,
    /// A lease unrenewed for this long is taken over; the holder renews every third of it and
    /// stops serving after two thirds without a renewal (an S3 outage longer than that stops it).
    #[serde(default = "default_lease_seconds")]
    pub lease_seconds: u64,
    /// Where the nodes on the bucket keep their leases: a prefix all of them share.
    #[serde(default = "default_cluster_prefix")]
    pub prefix: String,
}

fn default_lease_seconds() -> u64 {
    30
}

pub(crate) fn default_cluster_prefix() -> String {
    "reel-cluster".into()
}

impl ClusterSection {
    /// The portal address leases advertise.
    pub fn portal_address(&self, iscsi: &IscsiConfig) -> anyhow::Result<String> {
        let portal = match &self.portal {
            Some(p) => p.clone(),
            None => iscsi.listen.first().cloned().unwrap_or_default(),
        };
        let Ok(addr) = portal.parse::<SocketAddr>() else {
            anyhow::bail!(
                "cluster.portal: {portal:?} is not an address:port such as 192.0.2.1:3260"
            );
        };
        if addr.port() == 0 || addr.ip().is_unspecified() {
            anyhow::bail!(
                "cluster.portal: {portal:?} cannot be given to other nodes' initiators: set \
                 [cluster] portal to this node's reachable address and port"
            );
        }
        Ok(portal)
    }
}

/// `[archive]`: a directory, or `[archive.s3]` (another bucket and/or prefix; credentials as
/// for `[store.s3]`, from the environment).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSection {
    pub directory: Option<PathBuf>,
    pub s3: Option<S3Section>,
    /// The S3 storage class of image objects (e.g. `STANDARD_IA`, `GLACIER_IR`); only with
    /// `[archive.s3]`. Classes that need an S3 restore request before a GET (`GLACIER`,
    /// `DEEP_ARCHIVE`) are refused: reel does not issue that request.
    pub storage_class: Option<String>,
    /// Size of one image piece (default 32M): about what an archive or restore holds in memory.
    pub piece_size: Option<String>,
}

impl ArchiveSection {
    /// The piece size in bytes (validated when the configuration is loaded).
    pub fn piece_size_bytes(&self) -> anyhow::Result<usize> {
        match &self.piece_size {
            None => Ok(reel_volume::archive::DEFAULT_PIECE_SIZE),
            Some(text) => Ok(reel_datagen::parse_size(text)
                .map_err(|e| anyhow::anyhow!("archive.piece_size: {e}"))?
                as usize),
        }
    }
}

/// Checks `[archive]` on its own and against `[store]`.
pub fn validate_archive(archive: &ArchiveSection, store: &StoreSection) -> anyhow::Result<()> {
    match (&archive.directory, &archive.s3) {
        (Some(_), Some(_)) | (None, None) => {
            anyhow::bail!("archive: give either directory or an [archive.s3] section")
        }
        (Some(dir), None) => {
            if dir.as_os_str().is_empty() {
                anyhow::bail!("archive.directory: must not be empty");
            }
            if archive.storage_class.is_some() {
                anyhow::bail!("archive.storage_class applies to [archive.s3]");
            }
        }
        (None, Some(s3)) => {
            if s3.bucket.is_empty() {
                anyhow::bail!("archive.s3.bucket: must not be empty");
            }
            if let Some(endpoint) = &s3.endpoint
                && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
            {
                anyhow::bail!(
                    "archive.s3.endpoint: {endpoint:?} must start with http:// or https://"
                );
            }
            if !s3.prefix.is_empty() && reel_backend::Key::new(s3.prefix.clone()).is_err() {
                anyhow::bail!(
                    "archive.s3.prefix: {:?} must be /-separated segments of letters, digits, '.', '_' and '-'",
                    s3.prefix
                );
            }
            // The store's own objects and the archive's must never share names.
            if let Some(store_s3) = store
                .s3
                .as_ref()
                .filter(|_| store.backend == BackendKind::S3)
                && store_s3.bucket == s3.bucket
                && store_s3.endpoint == s3.endpoint
            {
                let nested =
                    |a: &str, b: &str| a.is_empty() || b == a || b.starts_with(&format!("{a}/"));
                if nested(&store_s3.prefix, &s3.prefix) || nested(&s3.prefix, &store_s3.prefix) {
                    anyhow::bail!(
                        "archive.s3.prefix: {:?} overlaps the store's prefix {:?} in bucket {}: use a prefix of its own",
                        s3.prefix,
                        store_s3.prefix,
                        s3.bucket
                    );
                }
            }
            if let Some(class) = &archive.storage_class {
                let ok = !class.is_empty()
                    && class
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                if !ok {
                    anyhow::bail!(
                        "archive.storage_class: {class:?} is not an S3 storage class such as STANDARD_IA"
                    );
                }
                if matches!(class.as_str(), "GLACIER" | "DEEP_ARCHIVE") {
                    anyhow::bail!(
                        "archive.storage_class: {class} objects need an S3 restore request before they can be read, which reel does not make; use GLACIER_IR, STANDARD_IA or ONEZONE_IA"
                    );
                }
            }
        }
    }
    let piece = archive.piece_size_bytes()?;
    if !(64 << 10..=256 << 20).contains(&piece) {
        anyhow::bail!("archive.piece_size: 64K to 256M");
    }
    Ok(())
}

/// Where the data lives.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// The data directory (`--data` overrides it; default ./reel-data).
    pub data_dir: Option<PathBuf>,
    /// The back end that holds the chunk packs and the catalog.
    #[serde(default)]
    pub backend: BackendKind,
    /// When a synchronising point (a filemark without IMMED, a rewind, an unload) is
    /// acknowledged on the s3 back end: data fsynced in the local cache, or in the bucket.
    #[serde(default)]
    pub durability: DurabilityLevel,
    /// The bucket, for `backend = "s3"`.
    pub s3: Option<S3Section>,
    /// The local write-back cache in front of the bucket, for `backend = "s3"`.
    pub cache: Option<CacheSection>,
    /// Client-side encryption of what goes to the bucket, for `backend = "s3"`.
    pub encryption: Option<EncryptionSection>,
    /// Memory for the catalog's page cache (default 512M). The chunk index is looked up and
    /// inserted at random keys: once it outgrows this, ingest of new data slows down
    /// (docs/guide/sizing.md). Any back end.
    pub catalog_cache: Option<String>,
    /// The average chunk size of a new store (default 2K; a power of two from 1K to 64K).
    /// Fixed when the store is created: an existing store keeps its own. Larger chunks cost
    /// less CPU and catalog per GB and read faster, but a copy of earlier data written with
    /// other record sizes or shifted by a few bytes dedups less (docs/guide/sizing.md).
    pub chunk_size: Option<String>,
    /// Seconds without a catalog write after which a running server gives the catalog file's
    /// unused pages back to the disk, when a tenth of the file is such pages and the file is
    /// at most 256 MiB (default 30). A write that begins meanwhile waits for it (~10–20 ms per MB
    /// of catalog). 0: never while running nor when the store closes; a clean stop of
    /// `reel serve` still compacts.
    pub catalog_compact_idle_secs: Option<u64>,
}

/// The smallest `[store] catalog_cache`: below it every lookup of a large index reads the disk.
pub const MIN_CATALOG_CACHE: u64 = 16 << 20;

impl StoreSection {
    /// `catalog_cache` in bytes (validated when the configuration is loaded); `None`: the
    /// store's default.
    pub fn catalog_cache_bytes(&self) -> anyhow::Result<Option<usize>> {
        let Some(text) = &self.catalog_cache else {
            return Ok(None);
        };
        let bytes = reel_datagen::parse_size(text)
            .map_err(|e| anyhow::anyhow!("store.catalog_cache: {e}"))?;
        if bytes < MIN_CATALOG_CACHE {
            anyhow::bail!("store.catalog_cache: {text} is below the 16M minimum");
        }
        let bytes = usize::try_from(bytes)
            .map_err(|_| anyhow::anyhow!("store.catalog_cache: {text} is too large"))?;
        Ok(Some(bytes))
    }

    /// `catalog_compact_idle_secs` as the store's setting: `None` (outer): the store's
    /// default; `Some(None)`: never.
    pub fn catalog_compact_idle(&self) -> Option<Option<std::time::Duration>> {
        self.catalog_compact_idle_secs
            .map(|secs| (secs > 0).then(|| std::time::Duration::from_secs(secs)))
    }

    /// `chunk_size` as the chunker of a new store (validated when the configuration is
    /// loaded); `None`: the store's default.
    pub fn chunker(&self) -> anyhow::Result<Option<reel_chunkstore::ChunkerParams>> {
        let Some(text) = &self.chunk_size else {
            return Ok(None);
        };
        let bytes =
            reel_datagen::parse_size(text).map_err(|e| anyhow::anyhow!("store.chunk_size: {e}"))?;
        if !bytes.is_power_of_two() || !(1 << 10..=64 << 10).contains(&bytes) {
            anyhow::bail!("store.chunk_size: {text} is not a power of two from 1K to 64K");
        }
        Ok(Some(reel_chunkstore::ChunkerParams::with_avg(bytes as u32)))
    }
}

/// `[store.encryption]`: object bodies leaving the node are sealed with this key
/// (docs/design/object-storage.md, "Encryption at rest"). The key is never stored in the data
/// directory or the bucket; **losing it is losing the data**.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct EncryptionSection {
    /// A file holding the 32-byte key as 64 hex digits (`reel key generate FILE` makes one),
    /// readable by its owner only. Without it the key comes from `REEL_STORE_KEY` (hex).
    pub key_file: Option<PathBuf>,
    /// Key rotation: files of keys the store was sealed with before `key_file`'s. Objects
    /// they sealed stay readable; everything written is sealed with the current key, and
    /// `reel key reseal` moves the older objects to it, after which these can go.
    #[serde(default)]
    pub previous_key_files: Vec<PathBuf>,
}

#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// Files under the data directory (docs/design/backend.md).
    #[default]
    Local,
    /// S3-compatible object storage with a local write-back cache; the catalog is journaled
    /// to the bucket, so the bucket alone can rebuild a node (docs/design/object-storage.md).
    S3,
}

#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DurabilityLevel {
    /// Fsynced in the local cache; uploaded in the background.
    #[default]
    Local,
    /// In the bucket.
    Bucket,
}

/// `[store.s3]`. Credentials are never read from here: they come from the environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), the AWS shared
/// credentials file (`~/.aws/credentials`, profile `AWS_PROFILE` or `default`; read again when
/// it changes), the platform's credentials service the environment names (web identity, EKS Pod
/// Identity, ECS task role), or, if `instance_metadata` is set, the EC2 instance profile
/// (`reel_backend::S3Credentials::Environment`).
#[derive(Debug, Deserialize, serde::Serialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct S3Section {
    /// e.g. `http://127.0.0.1:7070` for a local server; omitted for AWS itself.
    pub endpoint: Option<String>,
    pub bucket: String,
    /// Every object of this node goes under this prefix (one prefix per node).
    #[serde(default)]
    pub prefix: String,
    #[serde(default = "default_region")]
    pub region: String,
    /// PEM file of CA certificates trusted besides the system's, for an https endpoint whose
    /// certificate a private CA signed. Not part of which bucket this is: it may change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The EC2 instance metadata service, `http://169.254.169.254` on EC2: the instance
    /// profile's role is then the last place keys are looked for. Unset, no request goes to a
    /// metadata address. Not part of which bucket this is either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_metadata: Option<String>,
}

impl S3Section {
    /// Whether both name the same objects: endpoint, bucket, prefix and region (not how the
    /// server's certificate is checked, nor where keys come from).
    pub fn same_bucket(&self, other: &S3Section) -> bool {
        (&self.endpoint, &self.bucket, &self.prefix, &self.region)
            == (&other.endpoint, &other.bucket, &other.prefix, &other.region)
    }
}

fn default_region() -> String {
    "us-east-1".into()
}

/// `[store.cache]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// Local disk for not-yet-uploaded and recently read objects, e.g. `"20G"`. Writers wait
    /// (they never fail) while data not yet in the bucket fills it.
    #[serde(default = "default_cache_size")]
    pub size: String,
    /// Uploads in flight.
    #[serde(default = "default_upload_threads")]
    pub upload_threads: usize,
    /// Memory for copies of packs waiting to upload, so an upload need not read them back
    /// from disk (default 512M; "0" reads every upload from disk).
    #[serde(default = "default_upload_memory")]
    pub upload_memory: String,
    /// Memory for blocks just fetched from the bucket for a reader (default 64M; "0" keeps
    /// none: a restore then reads each block back from the cache's disk).
    #[serde(default = "default_read_memory")]
    pub read_memory: String,
}

impl Default for CacheSection {
    fn default() -> Self {
        CacheSection {
            size: default_cache_size(),
            upload_threads: default_upload_threads(),
            upload_memory: default_upload_memory(),
            read_memory: default_read_memory(),
        }
    }
}

pub(crate) fn default_upload_memory() -> String {
    "512M".into()
}

pub(crate) fn default_read_memory() -> String {
    "64M".into()
}

/// The most `[store.cache] upload_memory` or `read_memory` may ask for: far beyond any use,
/// below what a typo (a "T" for a "G") would take from the machine.
pub const CACHE_MEMORY_MAX: u64 = 64 << 30;

/// A `[store.cache]` memory setting in bytes: a size no larger than [`CACHE_MEMORY_MAX`].
pub fn cache_memory_bytes(name: &str, text: &str) -> anyhow::Result<u64> {
    let bytes = if text.trim() == "0" {
        0
    } else {
        reel_datagen::parse_size(text).map_err(|e| anyhow::anyhow!("store.cache.{name}: {e}"))?
    };
    if bytes > CACHE_MEMORY_MAX {
        anyhow::bail!("store.cache.{name}: {text} is more than the 64G maximum");
    }
    Ok(bytes)
}

fn default_cache_size() -> String {
    "20G".into()
}

fn default_upload_threads() -> usize {
    4
}

impl CacheSection {
    /// The cache size in bytes (validated when the configuration is loaded).
    pub fn size_bytes(&self) -> anyhow::Result<u64> {
        reel_datagen::parse_size(&self.size).map_err(|e| anyhow::anyhow!("store.cache.size: {e}"))
    }
}

/// A cartridge pool: the cartridges whose barcodes fall in its ranges or start with its
/// prefixes.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PoolEntry {
    pub name: String,
    /// Inclusive ranges, `FIRST-LAST` (e.g. "DLY000L9-DLY499L9").
    #[serde(default)]
    pub barcodes: Vec<String>,
    #[serde(default)]
    pub prefixes: Vec<String>,
}

impl PoolEntry {
    pub fn filter(&self) -> anyhow::Result<BarcodeFilter> {
        let mut filter = BarcodeFilter::any();
        for p in &self.prefixes {
            filter = filter.with_prefix(p);
        }
        for range in &self.barcodes {
            let (first, last) = BarcodeFilter::parse_range(range)
                .map_err(|e| anyhow::anyhow!("pool {}: {e}", self.name))?;
            filter = filter
                .with_range(&first, &last)
                .map_err(|e| anyhow::anyhow!("pool {}: {e}", self.name))?;
        }
        Ok(filter)
    }
}

/// A logical partition of a physical library target: a library of its own (changer at LUN 0,
/// its drives, its slots and import/export elements, its own element addresses) under its
/// own iSCSI name, given to its own initiators — like an IBM TS4500 logical library.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PartitionEntry {
    /// iSCSI name of the partition's target.
    pub name: String,
    pub alias: Option<String>,
    pub drives: u16,
    pub slots: u16,
    #[serde(default)]
    pub import_export: u16,
    /// The cartridge pool this partition takes its cartridges from.
    pub pool: Option<String>,
    #[serde(default)]
    pub barcode_prefix: String,
    pub allow_initiators: Option<Vec<String>>,
    pub chap: Option<Chap>,
    pub mutual_chap: Option<Chap>,
}

/// The web console, REST API and metrics.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address of the console/API. Loopback by default; another address only when asked for.
    #[serde(default = "default_http_listen")]
    pub listen: String,
    /// PEM certificate chain and private key: serve HTTPS instead of HTTP.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Set to false to run without the console and API.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Who may read `/metrics`: "loopback" (default: peers on this host only) or "token"
    /// (others too, with a bearer token).
    #[serde(default)]
    pub metrics: crate::http::MetricsAccess,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: default_http_listen(),
            tls_cert: None,
            tls_key: None,
            enabled: true,
            metrics: crate::http::MetricsAccess::default(),
        }
    }
}

fn default_http_listen() -> String {
    "127.0.0.1:8080".into()
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IscsiConfig {
    /// Portals to listen on. Loopback by default; "0.0.0.0:3260" only when asked for.
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Commands in flight per session (the CmdSN window).
    #[serde(default = "default_queue_depth")]
    pub queue_depth: u32,
    /// Seconds of silence after which the target pings an initiator (NOP-In).
    #[serde(default = "default_nop_interval")]
    pub nop_interval_secs: u64,
    /// Most iSCSI sessions (normal and discovery) at once; one more login is refused with
    /// "out of resources". With queue_depth and the devices' transfer limits it bounds the
    /// memory initiators can make the server hold.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Largest data segment we accept per PDU (MaxRecvDataSegmentLength).
    #[serde(default = "default_max_recv_segment")]
    pub max_recv_data_segment_length: u32,
    /// Largest burst (MaxBurstLength) we offer.
    #[serde(default = "default_max_burst")]
    pub max_burst_length: u32,
    /// Largest unsolicited burst (FirstBurstLength) we offer.
    #[serde(default = "default_first_burst")]
    pub first_burst_length: u32,
    /// CHAP for discovery sessions (optional).
    pub discovery_chap: Option<Chap>,
    #[serde(default, rename = "target")]
    pub targets: Vec<TargetEntry>,
}

impl Default for IscsiConfig {
    /// The zero-configuration library: IBM 3584 changer, 4 IBM LTO-9 drives, 40 slots,
    /// 4 import/export elements, on 127.0.0.1:3260.
    fn default() -> Self {
        IscsiConfig {
            listen: default_listen(),
            queue_depth: default_queue_depth(),
            nop_interval_secs: default_nop_interval(),
            max_sessions: default_max_sessions(),
            max_recv_data_segment_length: default_max_recv_segment(),
            max_burst_length: default_max_burst(),
            first_burst_length: default_first_burst(),
            discovery_chap: None,
            targets: vec![TargetEntry {
                name: DEFAULT_LIBRARY_IQN.into(),
                alias: Some("reel-library".into()),
                kind: TargetKind::Library,
                luns: 1,
                preset: None,
                changer: None,
                drive: None,
                drives: None,
                slots: None,
                import_export: None,
                barcode_prefix: String::new(),
                pool: None,
                allow_initiators: None,
                chap: None,
                mutual_chap: None,
                partitions: Vec::new(),
                physical: None,
                emulation: None,
            }],
        }
    }
}

/// The target name of the zero-configuration library.
pub const DEFAULT_LIBRARY_IQN: &str = "iqn.2026-11.org.reel:library";
pub const DEFAULT_CHANGER: &str = "ibm-3584";
pub const DEFAULT_DRIVE: &str = "ibm-td9";

impl TargetEntry {
    /// The changer and drive models and element counts of a library target.
    pub fn library_layout(
        &self,
    ) -> anyhow::Result<(
        &'static reel_smc::ChangerModel,
        &'static reel_ssc::DriveModel,
        reel_smc::Layout,
    )> {
        let preset = self.preset.map(Preset::parts);
        let changer_name = self
            .changer
            .as_deref()
            .or(preset.as_ref().map(|p| p.0))
            .unwrap_or(DEFAULT_CHANGER);
        let changer = reel_smc::ChangerModel::by_name(changer_name).ok_or_else(|| {
            let names: Vec<&str> = reel_smc::ChangerModel::all()
                .iter()
                .map(reel_smc::ChangerModel::name)
                .collect();
            anyhow::anyhow!(
                "target {}: unknown changer {changer_name:?} (one of: {})",
                self.name,
                names.join(", ")
            )
        })?;
        let drive_name = self
            .drive
            .as_deref()
            .or(preset.as_ref().map(|p| p.1))
            .unwrap_or(DEFAULT_DRIVE);
        let drive = reel_ssc::DriveModel::by_name(drive_name).ok_or_else(|| {
            let names: Vec<&str> = reel_ssc::DriveModel::all()
                .iter()
                .map(reel_ssc::DriveModel::name)
                .collect();
            anyhow::anyhow!(
                "target {}: unknown drive {drive_name:?} (one of: {})",
                self.name,
                names.join(", ")
            )
        })?;
        let mut layout = changer.default_layout;
        if let Some((_, _, preset_layout)) = preset {
            layout = preset_layout;
        } else if changer.default_layout.magazines.is_none() {
            layout = reel_smc::Layout {
                drives: 4,
                slots: 40,
                import_export: 4,
                magazines: None,
            };
        }
        if let Some(d) = self.drives {
            layout.drives = d;
        }
        if let Some(s) = self.slots {
            layout.slots = s;
            layout.magazines = None;
        }
        if let Some(ie) = self.import_export {
            layout.import_export = ie;
        }
        // One LUN per drive on the library's one target, the changer at LUN 0: 256 drives
        // end at LUN 256 (docs/design/smc.md, "Library size", says why not more).
        if !(1..=MAX_DRIVES).contains(&layout.drives) {
            anyhow::bail!(
                "target {}: drives must be 1 to {MAX_DRIVES} (one LUN each on the library's \
                 target; use more libraries or logical partitions for more drives)",
                self.name
            );
        }
        if layout.import_export > 255 {
            anyhow::bail!("target {}: import_export must be at most 255", self.name);
        }
        // SMC-3 element addresses are 16 bits: the storage range of the model must fit.
        let max_slots = changer.max_slots(&layout);
        if !(1..=max_slots).contains(&layout.slots) {
            anyhow::bail!(
                "target {}: slots must be 1 to {max_slots} on the {} (16-bit element \
                 addresses; its storage elements start at {:04X}h)",
                self.name,
                changer.name(),
                changer.first_address(reel_smc::ElementType::Storage)
            );
        }
        changer
            .check_layout(&layout)
            .map_err(|e| anyhow::anyhow!("target {}: {e} on the {}", self.name, changer.name()))?;
        Ok((changer, drive, layout))
    }
}

/// Largest `[iscsi] max_sessions` accepted (TSIHs are 16-bit, RFC 7143 §11.12.6).
const MAX_SESSIONS_LIMIT: usize = 4096;

/// Drives of one library (LUNs 1..=256 of its target).
pub const MAX_DRIVES: u16 = 256;

fn default_listen() -> Vec<String> {
    vec!["127.0.0.1:3260".into()]
}
fn default_queue_depth() -> u32 {
    64
}
fn default_nop_interval() -> u64 {
    15
}
fn default_max_sessions() -> usize {
    reel_iscsi_net::DEFAULT_MAX_SESSIONS
}
fn default_max_recv_segment() -> u32 {
    262_144
}
fn default_max_burst() -> u32 {
    1 << 20
}
fn default_first_burst() -> u32 {
    262_144
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// A tape library: an SMC changer at LUN 0 and SSC drives at LUNs 1…n.
    Library,
    /// A direct-access LUN that discards writes and reads zeros: protocol tests and the
    /// iSCSI throughput benchmark.
    NullDisk,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetEntry {
    /// iSCSI name (iqn., eui. or naa. form, RFC 7143 §4.2.7).
    pub name: String,
    pub alias: Option<String>,
    pub kind: TargetKind,
    /// Number of LUNs (null-disk targets).
    #[serde(default = "one")]
    pub luns: u32,
    /// Library targets: a ready-made library ([`Preset`]); the keys below override it.
    pub preset: Option<Preset>,
    /// Library targets: the changer model (`reel models` lists them; default ibm-3584).
    pub changer: Option<String>,
    /// Library targets: the drive model (default ibm-td9).
    pub drive: Option<String>,
    /// Library targets: element counts (defaults: 4 drives, 40 slots, 4 import/export; an
    /// autoloader model brings its own).
    pub drives: Option<u16>,
    pub slots: Option<u16>,
    pub import_export: Option<u16>,
    /// Library targets: only cartridges whose barcode starts with this are placed here.
    #[serde(default)]
    pub barcode_prefix: String,
    /// Library targets: only cartridges of this pool are placed here.
    pub pool: Option<String>,
    /// Only these initiators may log in (all when absent).
    pub allow_initiators: Option<Vec<String>>,
    /// Initiators must authenticate with these credentials (one-way CHAP).
    pub chap: Option<Chap>,
    /// The target authenticates itself with these (mutual CHAP; needs `chap`).
    pub mutual_chap: Option<Chap>,
    /// Library targets: split into logical libraries. The target itself is then not served:
    /// each partition is, with the physical library's changer and drive models.
    #[serde(default, rename = "partition")]
    pub partitions: Vec<PartitionEntry>,
    /// Set by [`parse`] on the targets made from partitions: the physical library's name.
    #[serde(skip)]
    pub physical: Option<String>,
    /// Library targets: emulate a physical drive's and robot's timing (`[iscsi.target.emulation]`,
    /// issue 17; off when absent). Partitions inherit it.
    pub emulation: Option<EmulationEntry>,
}

/// `[iscsi.target.emulation]`: the drives answer at the rate the physical drive model gives
/// (back-hitches, filemark flushes, loads, locates, rewinds) and MOVE MEDIUM takes the robot's
/// time. `emulation = {}` takes every default.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct EmulationEntry {
    /// The physical drive (`reel model drives` lists them; default: the LTO generation and form
    /// factor of the library's `drive`).
    pub drive: Option<String>,
    /// Only these drives (0-based, in drive element order); all when absent.
    pub drives: Option<Vec<u16>>,
    /// The robot: autoloader, midrange or enterprise (default: autoloader for an autoloader
    /// changer, midrange otherwise).
    pub robot: Option<String>,
}

impl TargetEntry {
    /// The library's emulation settings resolved against the model catalogs.
    pub fn emulation(
        &self,
        drive: &'static reel_ssc::DriveModel,
        layout: &reel_smc::Layout,
    ) -> anyhow::Result<Option<reel_library::Emulation>> {
        let Some(entry) = &self.emulation else {
            return Ok(None);
        };
        let ids = |list: Vec<&str>| list.join(", ");
        let physical = match &entry.drive {
            Some(id) => reel_drivemodel::drive(id).ok_or_else(|| {
                anyhow::anyhow!(
                    "target {}: emulation.drive {id:?} is not a modelled drive (one of: {})",
                    self.name,
                    ids(reel_drivemodel::drives().iter().map(|d| d.id).collect())
                )
            })?,
            None => reel_drivemodel::lto(
                drive.generation(),
                drive.form_factor() == reel_ssc::FormFactor::FullHeight,
            )
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "target {}: no physical model of {}; set emulation.drive (`reel model drives`)",
                    self.name,
                    drive.name()
                )
            })?,
        };
        let robot_id = entry
            .robot
            .as_deref()
            .unwrap_or(if layout.magazines.is_some() {
                "autoloader"
            } else {
                "midrange"
            });
        let robot = reel_drivemodel::robot(robot_id).ok_or_else(|| {
            anyhow::anyhow!(
                "target {}: emulation.robot {robot_id:?} is not a modelled robot (one of: {})",
                self.name,
                ids(reel_drivemodel::robots().iter().map(|r| r.id).collect())
            )
        })?;
        Ok(Some(reel_library::Emulation {
            drive: physical,
            drives: entry.drives.clone(),
            robot,
        }))
    }
}

fn one() -> u32 {
    1
}

/// Libraries modelled on the systems of the field reports and their modern equivalents.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// A 1U autoloader: HPE 1/8 G2, one half-height LTO drive, two magazines of 4.
    Autoloader,
    /// A midrange library: StorageTek SL150, 4 drives, 48 slots, 4 mail slots.
    Midrange,
    /// A large library: IBM TS4500 (3584), 24 drives, 2,000 slots, 10 I/O slots.
    Large,
    /// A big VTL node: IBM 3584 personality, 256 drives, 10,000 slots, 32 I/O slots.
    VtlNode,
}

impl Preset {
    /// Changer, drive and layout of the preset.
    pub fn parts(self) -> (&'static str, &'static str, reel_smc::Layout) {
        let layout = |drives, slots, import_export, magazines| reel_smc::Layout {
            drives,
            slots,
            import_export,
            magazines,
        };
        match self {
            Preset::Autoloader => (
                "hp-1x8-g2",
                "hpe-ultrium9-hh",
                layout(1, 8, 0, Some((2, 4))),
            ),
            Preset::Midrange => ("stk-sl150", "hpe-ultrium9-hh", layout(4, 48, 4, None)),
            Preset::Large => ("ibm-3584", "ibm-td9", layout(24, 2000, 10, None)),
            Preset::VtlNode => ("ibm-3584", "ibm-td9", layout(256, 10_000, 32, None)),
        }
    }
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Chap {
    pub user: String,
    pub secret: String,
}

impl std::fmt::Debug for Chap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chap")
            .field("user", &self.user)
            .field("secret", &"<secret>")
            .finish()
    }
}

/// Loads and validates a configuration file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Parses and validates configuration text; partitioned libraries come back as one library
/// target per partition (with `physical` set).
pub fn parse(text: &str) -> anyhow::Result<Config> {
    let mut config: Config = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    validate(&config).map_err(|e| match locate(text, &e.to_string()) {
        Some(line) => anyhow::anyhow!("line {line}: {e}"),
        None => e,
    })?;
    expand_partitions(&mut config)?;
    Ok(config)
}

/// The line of the `name = "…"` that a semantic error's message names first (errors about a
/// target, partition or pool start with its name), so every error points into the file.
fn locate(text: &str, message: &str) -> Option<usize> {
    let mut best: Option<(usize, usize, usize)> = None; // (position in message, -length, line)
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("name") else {
            continue;
        };
        let Some(value) = rest.trim_start().strip_prefix('=') else {
            continue;
        };
        let name = value.trim().trim_matches('"');
        // The name mentioned first wins; at the same place the longer one (a partition
        // "x:lib-a" over its library "x:lib").
        let Some(at) = message.find(name).filter(|_| !name.is_empty()) else {
            continue;
        };
        let key = (at, usize::MAX - name.len(), n + 1);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
    }
    best.map(|(_, _, line)| line)
}

impl Config {
    /// The cartridges library target `entry` takes: its pool's and its barcode prefix's.
    pub fn barcode_filter(&self, entry: &TargetEntry) -> anyhow::Result<BarcodeFilter> {
        let mut filter = match &entry.pool {
            Some(name) => self
                .pools
                .iter()
                .find(|p| &p.name == name)
                .ok_or_else(|| anyhow::anyhow!("target {}: no pool {name:?}", entry.name))?
                .filter()?,
            None => BarcodeFilter::any(),
        };
        filter = filter.with_prefix(&entry.barcode_prefix);
        Ok(filter)
    }
}

/// Replaces every partitioned library target by one library target per partition.
fn expand_partitions(config: &mut Config) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for target in std::mem::take(&mut config.iscsi.targets) {
        if target.partitions.is_empty() {
            out.push(target);
            continue;
        }
        let (changer, drive, _) = target.library_layout()?;
        for p in &target.partitions {
            out.push(TargetEntry {
                name: p.name.clone(),
                alias: p.alias.clone(),
                kind: TargetKind::Library,
                luns: 1,
                preset: None,
                changer: Some(changer.name().to_string()),
                drive: Some(drive.name().to_string()),
                drives: Some(p.drives),
                slots: Some(p.slots),
                import_export: Some(p.import_export),
                barcode_prefix: p.barcode_prefix.clone(),
                pool: p.pool.clone(),
                // A partition without its own access rules has the physical library's.
                allow_initiators: p
                    .allow_initiators
                    .clone()
                    .or_else(|| target.allow_initiators.clone()),
                chap: p.chap.clone().or_else(|| target.chap.clone()),
                mutual_chap: p.mutual_chap.clone().or_else(|| target.mutual_chap.clone()),
                partitions: Vec::new(),
                physical: Some(target.name.clone()),
                emulation: target.emulation.clone(),
            });
        }
    }
    config.iscsi.targets = out;
    Ok(())
}

fn validate_pools(config: &Config) -> anyhow::Result<()> {
    let mut filters: Vec<(&str, BarcodeFilter)> = Vec::new();
    for pool in &config.pools {
        if pool.name.is_empty() || pool.name.len() > 64 {
            anyhow::bail!("pool {:?}: the name must be 1 to 64 characters", pool.name);
        }
        if filters.iter().any(|(n, _)| *n == pool.name) {
            anyhow::bail!("pool {} is defined twice", pool.name);
        }
        if pool.barcodes.is_empty() && pool.prefixes.is_empty() {
            anyhow::bail!(
                "pool {}: give barcodes = [\"FIRST-LAST\", …] or prefixes = [\"…\"]",
                pool.name
            );
        }
        let filter = pool.filter()?;
        if let Some((other, _)) = filters.iter().find(|(_, f)| f.overlaps(&filter)) {
            anyhow::bail!(
                "pool {}: its barcodes ({}) overlap pool {other}'s: a cartridge belongs to one pool",
                pool.name,
                filter.describe()
            );
        }
        filters.push((&pool.name, filter));
    }
    Ok(())
}

fn validate_partitions(config: &Config, target: &TargetEntry) -> anyhow::Result<()> {
    if target.partitions.is_empty() {
        return Ok(());
    }
    if target.kind != TargetKind::Library {
        anyhow::bail!(
            "target {}: only library targets have partitions",
            target.name
        );
    }
    let (changer, _, layout) = target.library_layout()?;
    if layout.magazines.is_some() {
        anyhow::bail!(
            "target {}: the {} is an autoloader with magazines; it has no logical partitions",
            target.name,
            changer.name()
        );
    }
    let (mut drives, mut slots, mut import_export) = (0u32, 0u32, 0u32);
    for p in &target.partitions {
        if !valid_iscsi_name(&p.name) {
            anyhow::bail!(
                "partition {:?} of target {}: not a valid iSCSI name",
                p.name,
                target.name
            );
        }
        if p.drives == 0 || p.slots == 0 {
            anyhow::bail!(
                "partition {} of target {}: needs at least one drive and one slot",
                p.name,
                target.name
            );
        }
        if let Some(pool) = &p.pool
            && !config.pools.iter().any(|q| &q.name == pool)
        {
            anyhow::bail!(
                "partition {}: no pool {pool:?} (define it with [[pool]])",
                p.name
            );
        }
        for initiator in p.allow_initiators.iter().flatten() {
            if !valid_iscsi_name(initiator) {
                anyhow::bail!(
                    "partition {}: allow_initiators: {initiator:?} is not a valid iSCSI name",
                    p.name
                );
            }
        }
        if let Some(chap) = &p.chap {
            validate_chap(&p.name, "chap", chap)?;
        }
        if let Some(mutual) = &p.mutual_chap {
            validate_chap(&p.name, "mutual_chap", mutual)?;
            validate_mutual(&p.name, p.chap.as_ref().or(target.chap.as_ref()), mutual)?;
            if p.chap.is_none() && target.chap.is_none() {
                anyhow::bail!("partition {}: mutual_chap needs chap", p.name);
            }
        }
        drives += u32::from(p.drives);
        slots += u32::from(p.slots);
        import_export += u32::from(p.import_export);
    }
    for (what, used, have) in [
        ("drives", drives, u32::from(layout.drives)),
        ("slots", slots, u32::from(layout.slots)),
        (
            "import_export",
            import_export,
            u32::from(layout.import_export),
        ),
    ] {
        if used > have {
            anyhow::bail!(
                "target {}: its partitions have {used} {what} together; the library has {have}",
                target.name
            );
        }
    }
    Ok(())
}

/// A valid iSCSI name (RFC 7143 §4.2.7.1–§4.2.7.4, RFC 3722 stringprep aside: we
/// accept the lowercase ASCII subset everyone uses).
pub fn valid_iscsi_name(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.:".contains(c);
    if name.len() > 223 || !name.chars().all(allowed) {
        return false;
    }
    if let Some(rest) = name.strip_prefix("iqn.") {
        // iqn.yyyy-mm.reversed.domain[:anything]
        let bytes = rest.as_bytes();
        bytes.len() > 8
            && bytes[..4].iter().all(u8::is_ascii_digit)
            && bytes[4] == b'-'
            && bytes[5..7].iter().all(u8::is_ascii_digit)
            && bytes[7] == b'.'
    } else if let Some(hex) = name.strip_prefix("eui.") {
        hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit())
    } else if let Some(hex) = name.strip_prefix("naa.") {
        (hex.len() == 16 || hex.len() == 32) && hex.chars().all(|c| c.is_ascii_hexdigit())
    } else {
        false
    }
}

fn validate_chap(target: &str, which: &str, chap: &Chap) -> anyhow::Result<()> {
    if chap.user.is_empty() || chap.user.len() > 255 {
        anyhow::bail!("target {target}: {which}.user must be 1 to 255 characters");
    }
    // RFC 7143 §12.1.3 asks for secrets of at least 96 bits; the Linux initiator wants 12–16 characters.
    if chap.secret.len() < 12 || chap.secret.len() > 255 {
        anyhow::bail!(
            "target {target}: {which}.secret must be 12 to 255 characters (RFC 7143 §12.1.3)"
        );
    }
    Ok(())
}

/// RFC 7143 §12.1.3: the secret an initiator uses to authenticate a target must differ from
/// the one the target uses to authenticate it (else a rogue target can reflect the
/// challenge back and learn the answer).
fn validate_mutual(target: &str, chap: Option<&Chap>, mutual: &Chap) -> anyhow::Result<()> {
    if chap.is_some_and(|c| c.secret == mutual.secret) {
        anyhow::bail!(
            "target {target}: mutual_chap.secret must differ from chap.secret (RFC 7143 §12.1.3)"
        );
    }
    Ok(())
}

/// What the configuration leaves open to the network, as warnings for the start banner:
/// iSCSI portals off loopback with a target without CHAP, and plain HTTP off loopback.
pub fn exposure_warnings(config: &Config) -> Vec<String> {
    let off_loopback = |addr: &str| {
        addr.parse::<SocketAddr>()
            .is_ok_and(|a| !a.ip().to_canonical().is_loopback())
    };
    let mut warnings = Vec::new();
    let open_portals: Vec<&str> = config
        .iscsi
        .listen
        .iter()
        .map(String::as_str)
        .filter(|l| off_loopback(l))
        .collect();
    if !open_portals.is_empty() {
        let unprotected: Vec<&str> = config
            .iscsi
            .targets
            .iter()
            // Partitions are targets of their own by now (`expand_partitions`).
            .filter(|t| t.chap.is_none())
            .map(|t| t.name.as_str())
            .collect();
        if !unprotected.is_empty() {
            warnings.push(format!(
                "iSCSI listens on {} without CHAP for {}: anyone who reaches the portal can use \
                 those targets (set chap in [[iscsi.target]], or listen on 127.0.0.1)",
                open_portals.join(", "),
                unprotected.join(", ")
            ));
        }
    }
    if config.http.enabled && off_loopback(&config.http.listen) && config.http.tls_cert.is_none() {
        warnings.push(format!(
            "HTTP listens on {} without TLS: passwords and tokens cross the network in clear \
             (set tls_cert and tls_key in [http], or listen on 127.0.0.1)",
            config.http.listen
        ));
    }
    warnings
}

pub fn validate_store(store: &StoreSection) -> anyhow::Result<()> {
    store.catalog_cache_bytes()?;
    store.chunker()?;
    match store.backend {
        BackendKind::Local => {
            if store.s3.is_some() || store.cache.is_some() || store.encryption.is_some() {
                anyhow::bail!(
                    "store: [store.s3], [store.cache] and [store.encryption] apply to backend = \"s3\" (backend is \"local\", which is not encrypted)"
                );
            }
            if store.durability != DurabilityLevel::Local {
                anyhow::bail!(
                    "store.durability = \"bucket\" applies to backend = \"s3\" (the local back end is always durable on its disk)"
                );
            }
        }
        BackendKind::S3 => {
            let Some(s3) = &store.s3 else {
                anyhow::bail!("store: backend = \"s3\" needs a [store.s3] section with a bucket");
            };
            if s3.bucket.is_empty() {
                anyhow::bail!("store.s3.bucket: must not be empty");
            }
            if let Some(endpoint) = &s3.endpoint
                && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
            {
                anyhow::bail!(
                    "store.s3.endpoint: {endpoint:?} must start with http:// or https://"
                );
            }
            if !s3.prefix.is_empty() && reel_backend::Key::new(s3.prefix.clone()).is_err() {
                anyhow::bail!(
                    "store.s3.prefix: {:?} must be /-separated segments of letters, digits, '.', '_' and '-'",
                    s3.prefix
                );
            }
            let cache = store.cache.clone().unwrap_or_default();
            let size = cache.size_bytes()?;
            if size < 256 << 20 {
                anyhow::bail!(
                    "store.cache.size: {} is below the 256M minimum (a pack object is 32M)",
                    cache.size
                );
            }
            if !(1..=64).contains(&cache.upload_threads) {
                anyhow::bail!("store.cache.upload_threads: must be 1 to 64");
            }
            cache_memory_bytes("upload_memory", &cache.upload_memory)?;
            cache_memory_bytes("read_memory", &cache.read_memory)?;
        }
    }
    Ok(())
}

fn validate_cluster(config: &Config) -> anyhow::Result<()> {
    let Some(cluster) = &config.cluster else {
        return Ok(());
    };
    if config.store.backend != BackendKind::S3 {
        anyhow::bail!("[cluster] needs backend = \"s3\": the nodes share the bucket");
    }
    if !(2..=3600).contains(&cluster.lease_seconds) {
        anyhow::bail!("cluster.lease_seconds: must be 2 to 3600");
    }
    if reel_backend::Key::new(cluster.prefix.clone()).is_err() {
        anyhow::bail!(
            "cluster.prefix: {:?} must be /-separated segments of letters, digits, '.', '_' and '-'",
            cluster.prefix
        );
    }
    let nests = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
    if let Some(s3) = &config.store.s3
        && (s3.prefix.is_empty()
            || nests(&s3.prefix, &cluster.prefix)
            || nests(&cluster.prefix, &s3.prefix))
    {
        anyhow::bail!(
            "cluster.prefix {:?} and store.s3.prefix {:?} must be set and must not contain each other: \
             the leases live beside the stores",
            cluster.prefix,
            s3.prefix
        );
    }
    if let Some(node) = &cluster.node
        && (node.is_empty() || node.len() > 64)
    {
        anyhow::bail!("cluster.node: 1 to 64 characters");
    }
    cluster.portal_address(&config.iscsi)?;
    Ok(())
}

fn validate(config: &Config) -> anyhow::Result<()> {
    validate_store(&config.store)?;
    validate_cluster(config)?;
    if let Some(archive) = &config.archive {
        validate_archive(archive, &config.store)?;
    }
    let http = &config.http;
    http.listen.parse::<SocketAddr>().map_err(|_| {
        anyhow::anyhow!(
            "http.listen: {:?} is not an address:port such as 127.0.0.1:8080",
            http.listen
        )
    })?;
    if http.tls_cert.is_some() != http.tls_key.is_some() {
        anyhow::bail!("http: tls_cert and tls_key go together");
    }
    let iscsi = &config.iscsi;
    for listen in &iscsi.listen {
        listen.parse::<SocketAddr>().map_err(|_| {
            anyhow::anyhow!(
                "iscsi.listen: {listen:?} is not an address:port such as 127.0.0.1:3260"
            )
        })?;
    }
    if !(1..=4096).contains(&iscsi.queue_depth) {
        anyhow::bail!(
            "iscsi.queue_depth must be 1 to 4096, not {}",
            iscsi.queue_depth
        );
    }
    if iscsi.nop_interval_secs == 0 {
        anyhow::bail!("iscsi.nop_interval_secs must be at least 1");
    }
    if !(1..=MAX_SESSIONS_LIMIT).contains(&iscsi.max_sessions) {
        anyhow::bail!(
            "iscsi.max_sessions must be 1 to {MAX_SESSIONS_LIMIT}, not {}",
            iscsi.max_sessions
        );
    }
    for (key, value) in [
        (
            "max_recv_data_segment_length",
            iscsi.max_recv_data_segment_length,
        ),
        ("max_burst_length", iscsi.max_burst_length),
        ("first_burst_length", iscsi.first_burst_length),
    ] {
        if !(512..=16_777_215).contains(&value) {
            anyhow::bail!(
                "iscsi.{key} must be 512 to 16777215 (RFC 7143 §13.12–§13.14), not {value}"
            );
        }
    }
    if let Some(chap) = &iscsi.discovery_chap {
        validate_chap("(discovery)", "discovery_chap", chap)?;
    }
    validate_pools(config)?;
    let mut names = HashSet::new();
    for partition in iscsi.targets.iter().flat_map(|t| &t.partitions) {
        if !names.insert(partition.name.as_str()) {
            anyhow::bail!("iscsi.target: {} is defined twice", partition.name);
        }
    }
    for target in &iscsi.targets {
        validate_partitions(config, target)?;
        if let Some(pool) = &target.pool
            && !config.pools.iter().any(|q| &q.name == pool)
        {
            anyhow::bail!(
                "target {}: no pool {pool:?} (define it with [[pool]])",
                target.name
            );
        }
        if !valid_iscsi_name(&target.name) {
            anyhow::bail!(
                "iscsi.target: {:?} is not a valid iSCSI name (lowercase iqn.yyyy-mm.domain[:id], eui.<16 hex> or naa.<hex>)",
                target.name
            );
        }
        if !names.insert(target.name.as_str()) {
            anyhow::bail!("iscsi.target: {} is defined twice", target.name);
        }
        if target.kind == TargetKind::Library {
            target.library_layout()?;
        }
        if !(1..=256).contains(&target.luns) {
            anyhow::bail!("target {}: luns must be 1 to 256", target.name);
        }
        for initiator in target.allow_initiators.iter().flatten() {
            if !valid_iscsi_name(initiator) {
                anyhow::bail!(
                    "target {}: allow_initiators: {initiator:?} is not a valid iSCSI name",
                    target.name
                );
            }
        }
        if let Some(chap) = &target.chap {
            validate_chap(&target.name, "chap", chap)?;
        }
        if let Some(mutual) = &target.mutual_chap {
            validate_chap(&target.name, "mutual_chap", mutual)?;
            validate_mutual(&target.name, target.chap.as_ref(), mutual)?;
            if target.chap.is_none() {
                anyhow::bail!(
                    "target {}: mutual_chap needs chap (the initiator authenticates first)",
                    target.name
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_example_parses() {
        let config = parse(
            r#"
            [iscsi]
            listen = ["127.0.0.1:3260"]
            [[iscsi.target]]
            name = "iqn.2026-11.org.reel.test:open"
            alias = "open"
            kind = "null-disk"
            [[iscsi.target]]
            name = "iqn.2026-11.org.reel.test:mutual"
            kind = "null-disk"
            allow_initiators = ["iqn.2026-11.org.reel.test:guest"]
            chap = { user = "reel-user", secret = "reel-secret-12" }
            mutual_chap = { user = "reel-target", secret = "target-secret-1" }
            "#,
        )
        .unwrap();
        assert_eq!(config.iscsi.targets.len(), 2);
        assert_eq!(
            config.iscsi.targets[1].mutual_chap.as_ref().unwrap().user,
            "reel-target"
        );
    }

    #[test]
    fn max_sessions_defaults_parses_and_is_bounded() {
        let config = parse("[iscsi]\nlisten = [\"127.0.0.1:3260\"]\n").unwrap();
        assert_eq!(
            config.iscsi.max_sessions,
            reel_iscsi_net::DEFAULT_MAX_SESSIONS
        );
        let config = parse("[iscsi]\nmax_sessions = 3\n").unwrap();
        assert_eq!(config.iscsi.max_sessions, 3);
        for bad in ["0", "4097"] {
            let err = parse(&format!("[iscsi]\nmax_sessions = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("iscsi.max_sessions must be 1 to 4096"),
                "{err}"
            );
        }
        let err = parse("[iscsi]\nmax_sessions = -1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_sessions"), "{err}");
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let err = parse("[iscsi]\nlisten = [\"127.0.0.1:3260\"]\nqueue_dept = 4\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3") && err.contains("queue_dept"),
            "{err}"
        );
        let err = parse("[[iscsi.target]]\nname = \"IQN.bad\"\nkind = \"null-disk\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid iSCSI name"), "{err}");
        let err = parse("[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"tape\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3") && err.contains("null-disk"), "{err}");
        let err = parse("[iscsi]\nlisten = [\"localhost\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an address:port"), "{err}");
    }

    #[test]
    fn weak_or_lonely_secrets_are_refused_without_echoing_them() {
        let err = parse(
            "[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"null-disk\"\nchap = { user = \"u\", secret = \"short\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("12 to 255") && !err.contains("short"), "{err}");
        let err = parse(
            "[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"null-disk\"\nmutual_chap = { user = \"u\", secret = \"long-enough-secret\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("needs chap"), "{err}");
        let err = parse(
            "[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"null-disk\"\nchap = { user = \"u\", secret = \"same-secret-both\" }\nmutual_chap = { user = \"t\", secret = \"same-secret-both\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("must differ") && !err.contains("same-secret-both"),
            "{err}"
        );
        let debug = format!(
            "{:?}",
            Chap {
                user: "u".into(),
                secret: "hunter2hunter2".into()
            }
        );
        assert!(!debug.contains("hunter2"));
    }

    #[test]
    fn the_s3_back_end_is_configured_and_checked() {
        let config = parse(
            "[store]\nbackend = \"s3\"\ndurability = \"bucket\"\n[store.s3]\nendpoint = \"http://127.0.0.1:7070\"\nbucket = \"reel\"\nprefix = \"node-a\"\n[store.cache]\nsize = \"2G\"\n",
        )
        .unwrap();
        assert_eq!(config.store.backend, BackendKind::S3);
        assert_eq!(config.store.durability, DurabilityLevel::Bucket);
        let s3 = config.store.s3.as_ref().unwrap();
        assert_eq!(
            (s3.bucket.as_str(), s3.region.as_str()),
            ("reel", "us-east-1")
        );
        assert_eq!(
            config.store.cache.as_ref().unwrap().size_bytes().unwrap(),
            2 << 30
        );
        assert_eq!(config.store.cache.as_ref().unwrap().upload_threads, 4);
        assert_eq!(s3.ca_file, None);
        // A private CA's file is how the server's certificate is checked, and the metadata
        // service where keys may come from, not which bucket this is: a data directory bound
        // to the bucket accepts them being added or moved.
        let with_both = parse(
            "[store]\nbackend = \"s3\"\ndurability = \"bucket\"\n[store.s3]\nendpoint = \"http://127.0.0.1:7070\"\nbucket = \"reel\"\nprefix = \"node-a\"\nca_file = \"/etc/reel/s3-ca.pem\"\ninstance_metadata = \"http://169.254.169.254\"\n",
        )
        .unwrap();
        let s3_both = with_both.store.s3.as_ref().unwrap();
        assert_eq!(
            (
                s3_both.ca_file.as_deref(),
                s3_both.instance_metadata.as_deref()
            ),
            (
                Some(Path::new("/etc/reel/s3-ca.pem")),
                Some("http://169.254.169.254")
            )
        );
        assert!(s3_both.same_bucket(s3) && s3 != s3_both);
        let mut other = s3.clone();
        other.prefix = "node-b".into();
        assert!(!other.same_bucket(s3));
        let cache = config.store.cache.as_ref().unwrap();
        assert_eq!(
            (
                cache_memory_bytes("upload_memory", &cache.upload_memory).unwrap(),
                cache_memory_bytes("read_memory", &cache.read_memory).unwrap()
            ),
            (
                reel_backend::DEFAULT_UPLOAD_MEMORY,
                reel_backend::DEFAULT_READ_MEMORY
            )
        );
        let budgets = parse(
            "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\n[store.cache]\nupload_memory = \"0\"\nread_memory = \"256M\"\n",
        )
        .unwrap();
        let cache = budgets.store.cache.as_ref().unwrap();
        assert_eq!(
            cache_memory_bytes("upload_memory", &cache.upload_memory).unwrap(),
            0
        );
        assert_eq!(
            cache_memory_bytes("read_memory", &cache.read_memory).unwrap(),
            256 << 20
        );
        let encrypted = parse(
            "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\n[store.encryption]\nkey_file = \"/etc/reel/store.key\"\n",
        )
        .unwrap();
        assert_eq!(
            encrypted.store.encryption.unwrap().key_file.unwrap(),
            PathBuf::from("/etc/reel/store.key")
        );
        let idle = parse("[store]\ncatalog_compact_idle_secs = 300\n").unwrap();
        assert_eq!(
            idle.store.catalog_compact_idle(),
            Some(Some(std::time::Duration::from_secs(300)))
        );
        let never = parse("[store]\ncatalog_compact_idle_secs = 0\n").unwrap();
        assert_eq!(never.store.catalog_compact_idle(), Some(None));
        assert_eq!(parse("").unwrap().store.catalog_compact_idle(), None);
        let cached = parse("[store]\ncatalog_cache = \"2G\"\n").unwrap();
        assert_eq!(cached.store.catalog_cache_bytes().unwrap(), Some(2 << 30));
        assert_eq!(
            parse("").unwrap().store.catalog_cache_bytes().unwrap(),
            None
        );
        let chunked = parse("[store]\nchunk_size = \"8K\"\n").unwrap();
        assert_eq!(
            chunked.store.chunker().unwrap(),
            Some(reel_chunkstore::ChunkerParams::with_avg(8192))
        );
        assert_eq!(parse("").unwrap().store.chunker().unwrap(), None);

        for (text, needle) in [
            ("[store]\nbackend = \"s3\"\n", "needs a [store.s3]"),
            (
                "[store]\n[store.s3]\nbucket = \"b\"\n",
                "apply to backend = \"s3\"",
            ),
            ("[store]\ndurability = \"bucket\"\n", "applies to backend"),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\nendpoint = \"ftp://x\"\n",
                "http://",
            ),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\nprefix = \"../x\"\n",
                "store.s3.prefix",
            ),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\n[store.cache]\nupload_memory = \"lots\"\n",
                "store.cache.upload_memory",
            ),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\n[store.cache]\nread_memory = \"1T\"\n",
                "64G maximum",
            ),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\n[store.cache]\nsize = \"10M\"\n",
                "256M minimum",
            ),
            ("[store]\ncatalog_cache = \"8M\"\n", "16M minimum"),
            ("[store]\ncatalog_cache = \"lots\"\n", "store.catalog_cache"),
            (
                "[store]\nchunk_size = \"6K\"\n",
                "power of two from 1K to 64K",
            ),
            (
                "[store]\nchunk_size = \"128K\"\n",
                "power of two from 1K to 64K",
            ),
            (
                "[store]\nchunk_size = \"512\"\n",
                "power of two from 1K to 64K",
            ),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\nsecret_access_key = \"x\"\n",
                "secret_access_key",
            ),
            (
                "[store]\n[store.encryption]\nkey_file = \"k\"\n",
                "not encrypted",
            ),
            (
                "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\n[store.encryption]\nkey = \"00\"\n",
                "unknown field",
            ),
        ] {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn the_archive_location_is_configured_and_checked() {
        let config = parse("[archive]\ndirectory = \"/srv/archive\"\n").unwrap();
        let archive = config.archive.unwrap();
        assert_eq!(archive.directory.unwrap(), PathBuf::from("/srv/archive"));
        let config = parse(
            "[archive]\nstorage_class = \"STANDARD_IA\"\npiece_size = \"8M\"\n[archive.s3]\nbucket = \"cold\"\nprefix = \"tapes\"\n",
        )
        .unwrap();
        let archive = config.archive.unwrap();
        assert_eq!(archive.s3.as_ref().unwrap().bucket, "cold");
        assert_eq!(archive.piece_size_bytes().unwrap(), 8 << 20);
        assert!(parse("").unwrap().archive.is_none());

        let store = "[store]\nbackend = \"s3\"\n[store.s3]\nbucket = \"b\"\nprefix = \"node\"\n";
        for (text, needle) in [
            ("[archive]\n".to_string(), "either directory or"),
            (
                "[archive]\ndirectory = \"/a\"\n[archive.s3]\nbucket = \"b\"\n".into(),
                "either directory or",
            ),
            (
                "[archive]\ndirectory = \"/a\"\nstorage_class = \"STANDARD\"\n".into(),
                "applies to [archive.s3]",
            ),
            (
                "[archive]\nstorage_class = \"GLACIER\"\n[archive.s3]\nbucket = \"b\"\n".into(),
                "restore request",
            ),
            (
                "[archive]\nstorage_class = \"cold please\"\n[archive.s3]\nbucket = \"b\"\n".into(),
                "not an S3 storage class",
            ),
            (
                "[archive]\npiece_size = \"1K\"\ndirectory = \"/a\"\n".into(),
                "64K to 256M",
            ),
            (
                "[archive]\n[archive.s3]\nbucket = \"b\"\nprefix = \"../x\"\n".into(),
                "archive.s3.prefix",
            ),
            (
                format!("{store}[archive]\n[archive.s3]\nbucket = \"b\"\nprefix = \"node/cold\"\n"),
                "overlaps the store's prefix",
            ),
        ] {
            let err = format!("{:#}", parse(&text).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
        // Another prefix of the same bucket is fine.
        parse(&format!(
            "{store}[archive]\n[archive.s3]\nbucket = \"b\"\nprefix = \"cold\"\n"
        ))
        .unwrap();
    }

    const PARTITIONED: &str = r#"
[store]
data_dir = "/var/lib/reel"
backend = "local"

[[pool]]
name = "finance"
barcodes = ["FIN000L9-FIN099L9"]

[[pool]]
name = "eng"
prefixes = ["ENG"]

[[iscsi.target]]
name = "iqn.2026-11.org.reel:large"
kind = "library"
preset = "large"
allow_initiators = ["iqn.2026-11.org.reel.test:backup"]

  [[iscsi.target.partition]]
  name = "iqn.2026-11.org.reel:large-finance"
  drives = 8
  slots = 500
  import_export = 4
  pool = "finance"
  allow_initiators = ["iqn.2026-11.org.reel.test:finance"]

  [[iscsi.target.partition]]
  name = "iqn.2026-11.org.reel:large-eng"
  drives = 16
  slots = 1500
  import_export = 6
  pool = "eng"
"#;

    #[test]
    fn partitions_become_libraries_of_their_own() {
        let config = parse(PARTITIONED).unwrap();
        assert_eq!(
            config.store.data_dir.as_deref(),
            Some(Path::new("/var/lib/reel"))
        );
        let names: Vec<&str> = config
            .iscsi
            .targets
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "iqn.2026-11.org.reel:large-finance",
                "iqn.2026-11.org.reel:large-eng"
            ]
        );
        let finance = &config.iscsi.targets[0];
        let (changer, drive, layout) = finance.library_layout().unwrap();
        assert_eq!((changer.name(), drive.name()), ("ibm-3584", "ibm-td9"));
        assert_eq!(
            (layout.drives, layout.slots, layout.import_export),
            (8, 500, 4)
        );
        assert_eq!(
            finance.physical.as_deref(),
            Some("iqn.2026-11.org.reel:large")
        );
        assert_eq!(
            finance.allow_initiators.as_deref(),
            Some(&["iqn.2026-11.org.reel.test:finance".to_string()][..])
        );
        // Without its own list, a partition has the physical library's.
        assert_eq!(
            config.iscsi.targets[1].allow_initiators.as_deref(),
            Some(&["iqn.2026-11.org.reel.test:backup".to_string()][..])
        );
        let pool = config.barcode_filter(finance).unwrap();
        assert!(pool.matches("FIN042L9") && !pool.matches("ENG001L9"));
        let eng = config.barcode_filter(&config.iscsi.targets[1]).unwrap();
        assert!(eng.matches("ENG001L9") && !eng.matches("FIN001L9"));
    }

    #[test]
    fn partition_and_pool_errors_name_the_line() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let over = PARTITIONED.replace("drives = 16", "drives = 17");
        let e = err(&over);
        assert!(
            e.contains("25 drives together; the library has 24") && e.contains("line 15"),
            "{e}"
        );
        let e = err(&PARTITIONED.replace("pool = \"eng\"", "pool = \"ops\""));
        assert!(
            e.contains("no pool \"ops\"") && e.contains("line 29"),
            "{e}"
        );
        let e = err(&PARTITIONED.replace("prefixes = [\"ENG\"]", "prefixes = [\"FIN0\"]"));
        assert!(
            e.contains("overlap pool finance") && e.contains("line 11"),
            "{e}"
        );
        let e = err(&PARTITIONED.replace("FIN000L9-FIN099L9", "FIN099L9-FIN000L9"));
        assert!(e.contains("first is after the last"), "{e}");
        let e = err(&PARTITIONED.replace("backend = \"local\"", "backend = \"s4\""));
        assert!(e.contains("line 4") && e.contains("local"), "{e}");
        let e = err(&PARTITIONED.replace("preset = \"large\"", "preset = \"autoloader\""));
        assert!(e.contains("no logical partitions"), "{e}");
        let e = err(&PARTITIONED.replace("large-eng", "large-finance"));
        assert!(e.contains("defined twice"), "{e}");
        let e = err(&PARTITIONED.replace("slots = 500", "slots = 0"));
        assert!(e.contains("at least one drive and one slot"), "{e}");
    }

    #[test]
    fn a_library_may_use_the_whole_element_address_space() {
        let lib = |extra: &str| {
            format!(
                "[[iscsi.target]]\nname = \"iqn.2026-11.org.reel:big\"\nkind = \"library\"\n\
                 changer = \"ibm-3584\"\n{extra}"
            )
        };
        // 60,000 slots (a TS4500 holds about 23,000) and the 3584's last storage address.
        for slots in [60_000u16, 0xFFFF - 0x0401 + 1] {
            let config = parse(&lib(&format!("slots = {slots}\ndrives = 256\n"))).unwrap();
            let (_, _, layout) = config.iscsi.targets[0].library_layout().unwrap();
            assert_eq!((layout.slots, layout.drives), (slots, 256));
        }
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let e = err(&lib("slots = 64512\n"));
        assert!(
            e.contains("slots must be 1 to 64511 on the ibm-3584") && e.contains("0401h"),
            "{e}"
        );
        // The HP MSL numbers storage from 1000h: fewer slots fit.
        let e = err(&lib("slots = 62000\n").replace("ibm-3584", "hp-msl-g3"));
        assert!(e.contains("slots must be 1 to 61440"), "{e}");
        let e = err(&lib("drives = 257\n"));
        assert!(e.contains("drives must be 1 to 256"), "{e}");
    }

    #[test]
    fn iscsi_names() {
        assert!(valid_iscsi_name("iqn.2026-11.org.reel:lib0"));
        assert!(valid_iscsi_name("eui.02004567a425678d"));
        assert!(!valid_iscsi_name("iqn.26-11.org"));
        assert!(!valid_iscsi_name("iqn.2026-11.org.reel:Lib0"));
        assert!(!valid_iscsi_name("target0"));
    }
}
