//! The data directory: where one reel instance keeps its store.
//!
//! Layout: `DIR/objects/` (pack objects, the local back end) and `DIR/catalog/` (the catalog).
//! On a bucket (`[store] backend = "s3"`): `DIR/catalog/` (a cache of the bucket's catalog
//! journal), `DIR/cache/` (the write-back cache) and `DIR/bucket.toml` (which bucket, and the
//! id of the store key when the bucket is encrypted: never the key).
//!
//! The directory holds every backup, the password hashes and the audit log: it is created
//! 0700, and one that other users can enter or read is refused (its mode says nothing about
//! the files below it, which are created with the process's umask).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store_key::StoreKeys;
use anyhow::Context;
use reel_backend::{Backend, CacheConfig, LocalBackend, S3Backend, S3Config, WriteBackCache};
use reel_chunkstore::{ChunkStore, DurableAt, RecoveryProgress, StoreConfig, StoreError};

use crate::config::{BackendKind, DurabilityLevel, S3Section, StoreSection};
use reel_volume::Cartridges;

/// Default data directory, relative to where reel is started.
pub const DEFAULT_DATA_DIR: &str = "reel-data";

/// The catalog's directory inside a data directory (the redb file and nothing else).
pub const CATALOG_DIR: &str = "catalog";

#[derive(clap::Args, Debug, Clone)]
pub struct DataDirArg {
    /// Data directory (created if missing). Several instances need several directories.
    #[arg(long = "data", value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    pub dir: PathBuf,
}

/// Opens (or creates) the library's cartridges in `dir`, a private directory (see
/// [`ensure_private`]), on the back end the directory was set up with: a bucket it caches
/// (see [`BUCKET_FILE`]), else the local back end. For the offline tools.
pub fn open(dir: &Path) -> anyhow::Result<Cartridges> {
    Ok(open_with(dir, None, &mut |_| {})?.carts)
}

/// A data directory's store, opened.
pub struct Opened {
    pub carts: Cartridges,
    /// The write-back cache in front of the bucket (`backend = "s3"`): its queue and counters.
    pub cache: Option<Arc<WriteBackCache>>,
    /// The bucket itself: request counters.
    pub bucket: Option<Arc<S3Backend>>,
    /// Which bucket, and how (from `bucket.toml`).
    pub binding: Option<BucketBinding>,
    /// The store keys, when the bucket is encrypted.
    pub key: Option<StoreKeys>,
}

/// Opens the other stores of the bucket whose packs adopted cartridges are read from (the
/// shared vault): a source names a store by its prefix (`reel_volume::shared_vault`). Their
/// objects are sealed with the same key as ours (one key per bucket).
struct BucketStores {
    s3: S3Section,
    key: Option<StoreKeys>,
}

impl reel_chunkstore::ForeignStores for BucketStores {
    fn open(&self, source: &str) -> Result<Arc<dyn Backend>, String> {
        let prefix = reel_volume::shared_vault::source_store(source);
        let bucket: Arc<dyn Backend> =
            Arc::new(open_bucket(&self.s3, prefix, None).map_err(|e| crate::error_text(&e))?);
        Ok(match &self.key {
            Some(keys) => Arc::new(keys.seal(bucket)),
            None => bucket,
        })
    }
}

/// The bucket under `prefix` as this store writes it: sealed with the store key if any.
pub fn sealed_bucket(
    s3: &S3Section,
    prefix: &str,
    key: Option<&StoreKeys>,
) -> anyhow::Result<Arc<dyn Backend>> {
    let bucket: Arc<dyn Backend> = Arc::new(open_bucket(s3, prefix, None)?);
    Ok(match key {
        Some(keys) => Arc::new(keys.seal(bucket)),
        None => bucket,
    })
}

/// In a data directory that caches a bucket: which one, and how (`[store]` without secrets).
/// Written when the directory is first opened on a bucket, so that restarts, `reel recover`
/// and the offline tools find the bucket again, and a directory is never pointed at another.
pub const BUCKET_FILE: &str = "bucket.toml";

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BucketBinding {
    pub s3: S3Section,
    pub durability: String,
    pub cache_size: String,
    pub upload_threads: usize,
    /// `[store.cache] upload_memory` and `read_memory` (absent in bindings written before
    /// they were settings: the defaults they had as constants).
    #[serde(default = "crate::config::default_upload_memory")]
    pub upload_memory: String,
    #[serde(default = "crate::config::default_read_memory")]
    pub read_memory: String,
    /// Set when what goes to the bucket is encrypted (`[store.encryption]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionBinding>,
}

/// Which key the bucket's objects are sealed with: its id, and where the key was read from if
/// a file (for the offline tools). Never the key itself.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EncryptionBinding {
    pub key_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// Keys of objects not yet resealed with the current one (key rotation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_key_files: Vec<PathBuf>,
}

impl BucketBinding {
    pub fn from_section(store: &StoreSection) -> Option<BucketBinding> {
        if store.backend != BackendKind::S3 {
            return None;
        }
        let cache = store.cache.clone().unwrap_or_default();
        Some(BucketBinding {
            s3: store.s3.clone()?,
            durability: match store.durability {
                DurabilityLevel::Local => "local".into(),
                DurabilityLevel::Bucket => "bucket".into(),
            },
            cache_size: cache.size,
            upload_threads: cache.upload_threads,
            upload_memory: cache.upload_memory,
            read_memory: cache.read_memory,
            // Filled in by `open_with` once the key is loaded.
            encryption: None,
        })
    }

    fn read(dir: &Path) -> anyhow::Result<Option<BucketBinding>> {
        let path = dir.join(BUCKET_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                toml::from_str(&text).with_context(|| format!("reading {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join(BUCKET_FILE);
        let text = toml::to_string(self).context("encoding the bucket binding")?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// `s3://bucket/prefix at endpoint`, for messages.
    pub fn describe(&self) -> String {
        let s3 = &self.s3;
        format!(
            "s3://{}/{}{}",
            s3.bucket,
            s3.prefix,
            s3.endpoint
                .as_ref()
                .map(|e| format!(" at {e}"))
                .unwrap_or_default()
        )
    }
}

/// Opens `dir` with the `[store]` section of the configuration (`None`: as the directory was
/// set up). On a bucket, the catalog journal newer than the local catalog is replayed first,
/// with `progress`: on an empty directory that is the recovery of the node from the bucket.
pub fn open_with(
    dir: &Path,
    section: Option<&StoreSection>,
    progress: &mut dyn FnMut(RecoveryProgress),
) -> anyhow::Result<Opened> {
    ensure_private(dir)?;
    let mut store_config = StoreConfig::default();
    if let Some(bytes) = section
        .map(StoreSection::catalog_cache_bytes)
        .transpose()?
        .flatten()
    {
        store_config.catalog_cache_bytes = bytes;
    }
    if let Some(chunker) = section.map(StoreSection::chunker).transpose()?.flatten() {
        store_config.chunker = chunker;
    }
    if let Some(idle) = section.and_then(StoreSection::catalog_compact_idle) {
        store_config.catalog_compact_idle = idle;
    }
    let bound = BucketBinding::read(dir)?;
    let wanted = section.and_then(BucketBinding::from_section);
    let binding = match (bound, wanted) {
        (Some(bound), Some(wanted)) => {
            if !bound.s3.same_bucket(&wanted.s3) {
                anyhow::bail!(
                    "the data directory {} caches {}, not {}: use another directory (or `reel recover`) for another bucket",
                    dir.display(),
                    bound.describe(),
                    wanted.describe()
                );
            }
            Some((wanted, Some(bound)))
        }
        (Some(bound), None) => Some((bound.clone(), Some(bound))),
        (None, Some(wanted)) => {
            if dir.join(CATALOG_DIR).exists() {
                anyhow::bail!(
                    "the data directory {} holds a store on the local back end: use an empty directory for {}",
                    dir.display(),
                    wanted.describe()
                );
            }
            Some((wanted, None))
        }
        (None, None) => None,
    };
    let Some((mut binding, bound)) = binding else {
        return Ok(Opened {
            carts: Cartridges::new(open_local_store(dir, store_config)?),
            cache: None,
            bucket: None,
            binding: None,
            key: None,
        });
    };
    // The key: from the configured key file, else the one this directory was set up with
    // (offline tools), else REEL_STORE_KEY. Only the binary reads the environment.
    let (key_file, previous_key_files) = match section.filter(|s| s.backend == BackendKind::S3) {
        Some(store) => store.encryption.as_ref().map_or((None, Vec::new()), |e| {
            (e.key_file.clone(), e.previous_key_files.clone())
        }),
        // No bucket configured (the offline tools, `reel serve` without `[store]`).
        None => bound
            .as_ref()
            .and_then(|b| b.encryption.as_ref())
            .map_or((None, Vec::new()), |e| {
                (e.key_file.clone(), e.previous_key_files.clone())
            }),
    };
    let key = crate::store_key::load(key_file.as_deref(), &previous_key_files, &|name| {
        std::env::var(name).ok()
    })?;
    if section.is_some_and(|s| s.encryption.is_some()) && key.is_none() {
        anyhow::bail!(
            "[store.encryption] without key_file needs the key in {}",
            crate::store_key::KEY_ENV
        );
    }
    check_bound_key(dir, bound.as_ref(), key.as_ref())?;
    let bucket = Arc::new(open_bucket(&binding.s3, &binding.s3.prefix, None)?);
    // Before anything is written (here or in the bucket): a key that does not fit the bucket
    // is refused with a clear message, not a journal decode error later.
    check_bucket_key(&bucket, &binding, key.as_ref())?;
    let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    // Kept absolute for the offline tools, which read it from here in another working directory.
    binding.s3.ca_file = binding.s3.ca_file.as_deref().map(absolute);
    binding.encryption = key.as_ref().map(|key| EncryptionBinding {
        key_id: key.id().to_string(),
        key_file: key_file.as_deref().map(absolute),
        previous_key_files: previous_key_files.iter().map(|p| absolute(p)).collect(),
    });
    if bound.as_ref() != Some(&binding) {
        binding.write(dir)?;
    }
    // Encryption sits between the cache (plaintext on this node's disk) and the bucket.
    let remote: Arc<dyn Backend> = match &key {
        Some(keys) => Arc::new(keys.seal(bucket.clone())),
        None => bucket.clone(),
    };
    let capacity = reel_datagen::parse_size(&binding.cache_size)
        .map_err(|e| anyhow::anyhow!("{BUCKET_FILE}: cache_size: {e}"))?;
    let cache_config = CacheConfig {
        capacity_bytes: capacity,
        upload_threads: binding.upload_threads.max(1),
        upload_memory_bytes: crate::config::cache_memory_bytes(
            "upload_memory",
            &binding.upload_memory,
        )?,
        read_memory_bytes: crate::config::cache_memory_bytes("read_memory", &binding.read_memory)?,
        // No remote probe at put: a synchronising point at durability `local` must not wait
        // for the bucket. A journal object another node wrote first is found at upload, which
        // fences the cache (and the store stops at its next journal put).
        remote_check: reel_backend::RemoteCheck::Never,
        ..CacheConfig::default()
    };
    let cache_dir = dir.join("cache");
    let cache = Arc::new(
        WriteBackCache::open(&cache_dir, remote, cache_config)
            .with_context(|| format!("opening the cache {}", cache_dir.display()))?,
    );
    let store_config = StoreConfig {
        journal: true,
        durable_at: if binding.durability == "bucket" {
            DurableAt::Bucket
        } else {
            DurableAt::Local
        },
        ..store_config
    };
    let store = ChunkStore::open_with_progress(
        &dir.join(CATALOG_DIR),
        cache.clone(),
        store_config,
        progress,
    )
    .map_err(|e| in_use(dir, e))
    .with_context(|| {
        format!(
            "opening the store in {} on {}",
            dir.display(),
            binding.describe()
        )
    })?;
    // Cartridges adopted through the shared vault are read from other stores' packs.
    store.set_foreign_stores(Arc::new(BucketStores {
        s3: binding.s3.clone(),
        key: key.clone(),
    }));
    Ok(Opened {
        carts: Cartridges::new(store),
        cache: Some(cache),
        bucket: Some(bucket),
        binding: Some(binding),
        key,
    })
}

/// What `reel key reseal` did.
pub struct ResealReport {
    pub key_id: String,
    pub objects: u64,
    pub resealed: u64,
    /// Objects not in the sealed format (leases, when a prefix holds them), left alone.
    pub not_encrypted: u64,
}

/// `reel key reseal`: every object under the store's prefix (and `extra_prefixes` of the same
/// bucket, and the `extra_locations` elsewhere: an archive location, named for messages) that a
/// previous key sealed is rewritten sealed with the current key. The data
/// directory's binding names the keys (written when `reel serve` opened it with them), so a
/// node still running with the old key as its current one is refused: it could not read what
/// this rewrites.
pub fn reseal(
    dir: &Path,
    extra_prefixes: &[String],
    extra_locations: &[(String, Arc<dyn Backend>)],
    progress: &mut dyn FnMut(&str, u64, u64),
) -> anyhow::Result<ResealReport> {
    let bound = BucketBinding::read(dir)?.ok_or_else(|| {
        anyhow::anyhow!(
            "{} is not a data directory on a bucket (no {BUCKET_FILE})",
            dir.display()
        )
    })?;
    let enc = bound.encryption.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "{} is not encrypted: there is nothing to reseal",
            bound.describe()
        )
    })?;
    let keys = crate::store_key::load(enc.key_file.as_deref(), &enc.previous_key_files, &|name| {
        std::env::var(name).ok()
    })?
    .ok_or_else(|| {
        anyhow::anyhow!(
            "no store key: {} names no key file and {} is not set",
            dir.join(BUCKET_FILE).display(),
            crate::store_key::KEY_ENV
        )
    })?;
    if keys.id().to_string() != enc.key_id {
        anyhow::bail!(
            "{} records key {} as the current one, but its key file holds {}: restart `reel serve` with the new key first",
            dir.join(BUCKET_FILE).display(),
            enc.key_id,
            keys.id()
        );
    }
    let mut report = ResealReport {
        key_id: keys.id().to_string(),
        objects: 0,
        resealed: 0,
        not_encrypted: 0,
    };
    let mut locations: Vec<(String, Arc<dyn Backend>)> = Vec::new();
    for prefix in std::iter::once(&bound.s3.prefix).chain(extra_prefixes) {
        let name = format!("s3://{}/{prefix}", bound.s3.bucket);
        locations.push((name, Arc::new(open_bucket(&bound.s3, prefix, None)?)));
    }
    locations.extend(extra_locations.iter().cloned());
    for (name, location) in &locations {
        let sealed = keys.seal(location.clone());
        let objects = location
            .list("")
            .with_context(|| format!("listing {name}"))?;
        let total = objects.len() as u64;
        for (n, object) in objects.iter().enumerate() {
            match sealed.reseal(&object.key) {
                Ok(reel_backend::Resealed::Rewritten) => report.resealed += 1,
                Ok(reel_backend::Resealed::AlreadyCurrent) => {}
                Ok(reel_backend::Resealed::NotEncrypted) => report.not_encrypted += 1,
                // Deleted since the listing (the node reclaimed a pack, compacted its journal).
                Err(reel_backend::BackendError::NotFound(_)) => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("resealing {} in {name}", object.key));
                }
            }
            report.objects += 1;
            progress(name, n as u64 + 1, total);
        }
    }
    Ok(report)
}

/// The bucket of `s3`, with keys under `prefix` (the store's own, the cluster's or the
/// archive's); every PUT in `storage_class` when one is given (the bucket's default otherwise).
pub fn open_bucket(
    s3: &S3Section,
    prefix: &str,
    storage_class: Option<&str>,
) -> anyhow::Result<S3Backend> {
    let mut config = S3Config::new(s3.bucket.clone(), prefix.to_string());
    config.endpoint = s3.endpoint.clone();
    config.region = s3.region.clone();
    config.allow_http = s3
        .endpoint
        .as_deref()
        .is_some_and(|e| e.starts_with("http://"));
    config.storage_class = storage_class.map(str::to_string);
    config.instance_metadata = s3.instance_metadata.clone();
    if let Some(path) = &s3.ca_file {
        config.ca_certificates_pem = Some(
            std::fs::read(path)
                .with_context(|| format!("reading the S3 CA file {}", path.display()))?,
        );
    }
    // Only the binary reads the environment (credentials: AWS_* and the credentials file).
    S3Backend::open_with_env(&config, &|name| std::env::var(name).ok()).with_context(|| {
        format!(
            "opening s3://{}/{prefix}{}",
            s3.bucket,
            s3.endpoint
                .as_ref()
                .map(|e| format!(" at {e}"))
                .unwrap_or_default()
        )
    })
}

/// The key against the one `bucket.toml` names.
fn check_bound_key(
    dir: &Path,
    bound: Option<&BucketBinding>,
    key: Option<&StoreKeys>,
) -> anyhow::Result<()> {
    let Some(bound) = bound else { return Ok(()) };
    match (&bound.encryption, key) {
        (None, None) => Ok(()),
        // The current key, or the one being rotated away from (a previous key).
        (Some(enc), Some(key))
            if enc.key_id == key.id().to_string()
                || key
                    .previous
                    .iter()
                    .any(|k| enc.key_id == k.id().to_string()) =>
        {
            Ok(())
        }
        (Some(enc), Some(key)) => anyhow::bail!(
            "the data directory {} caches {}, encrypted with key {}; the configured key is {}: \
             configure the key the store was written with (to change keys, keep the old one in previous_key_files until `reel key reseal` has run)",
            dir.display(),
            bound.describe(),
            enc.key_id,
            key.id()
        ),
        (Some(enc), None) => anyhow::bail!(
            "the data directory {} caches {}, encrypted with key {}: configure that key \
             ([store.encryption] key_file, or {})",
            dir.display(),
            bound.describe(),
            enc.key_id,
            crate::store_key::KEY_ENV
        ),
        (None, Some(key)) => anyhow::bail!(
            "the data directory {} caches {}, which is not encrypted, but a store key ({}) is \
             configured: encryption cannot be turned on for an existing store (remove the key, \
             or start a new store on another prefix)",
            dir.display(),
            bound.describe(),
            key.id()
        ),
    }
}

/// The key against the bucket: the header of a catalog journal object (or, once a checkpoint
/// replaced the journal, of a checkpoint object) says whether the store there is encrypted,
/// and with which key.
fn check_bucket_key(
    bucket: &S3Backend,
    binding: &BucketBinding,
    key: Option<&StoreKeys>,
) -> anyhow::Result<()> {
    // The chunk store's catalog prefixes (reel-chunkstore journal.rs and checkpoint.rs).
    let mut first = None;
    for prefix in ["catalog/journal/", "catalog/checkpoint/"] {
        let listed = bucket
            .list(prefix)
            .with_context(|| format!("listing {prefix} in {}", binding.describe()))?;
        if let Some(object) = listed.into_iter().next() {
            first = Some(object);
            break;
        }
    }
    let Some(first) = first else {
        // A new store (or one whose first journal is not uploaded yet): nothing to compare.
        return Ok(());
    };
    let found = reel_backend::crypt::sealed_key_id(bucket, &first.key)
        .with_context(|| format!("reading {} in {}", first.key, binding.describe()))?;
    match (found, key) {
        (None, None) => Ok(()),
        (Some(found), Some(key)) if key.opens(found) => Ok(()),
        (Some(found), Some(key)) => anyhow::bail!(
            "{} was encrypted with key {found}, this node has key {}: configure the key the \
             store was written with (nothing was changed)",
            binding.describe(),
            key.id()
        ),
        (Some(found), None) => anyhow::bail!(
            "{} is encrypted (key {found}) and no store key is configured: set \
             [store.encryption] key_file, or {} (nothing was changed)",
            binding.describe(),
            crate::store_key::KEY_ENV
        ),
        (None, Some(key)) => anyhow::bail!(
            "{} holds a store that is not encrypted, but a store key ({}) is configured: \
             remove the key to open it (nothing was changed)",
            binding.describe(),
            key.id()
        ),
    }
}

fn in_use(dir: &Path, e: StoreError) -> anyhow::Error {
    match e {
        StoreError::Catalog(why) if why.contains("already open") || why.contains("lock") => {
            anyhow::anyhow!(
                "the data directory {} is in use by another reel process (stop `reel serve` first): {why}",
                dir.display()
            )
        }
        other => anyhow::Error::new(other),
    }
}

/// Creates `dir` 0700 if missing; refuses it if its group or others have any access.
pub fn ensure_private(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
    }
    let meta =
        std::fs::metadata(dir).with_context(|| format!("the data directory {}", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!("the data directory {} is not a directory", dir.display());
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "the data directory {} has mode {mode:03o}: other users could read the backups, \
             password hashes and audit log in it; make it private with `chmod 700 {}`",
            dir.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Opens (or creates) the chunk store of a data directory on the local back end.
fn open_local_store(dir: &Path, config: StoreConfig) -> anyhow::Result<ChunkStore> {
    let objects = dir.join("objects");
    let backend = LocalBackend::open(&objects)
        .with_context(|| format!("opening the object directory {}", objects.display()))?;
    let store = ChunkStore::open(&dir.join(CATALOG_DIR), Arc::new(backend), config)
        .map_err(|e| in_use(dir, e))
        .with_context(|| format!("opening the store in {}", dir.display()))?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binding written before the cache's memory budgets were settings reads with the
    /// defaults they had as constants; a new one round-trips them.
    #[test]
    fn bucket_bindings_without_memory_budgets_read_with_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(BUCKET_FILE),
            "durability = \"local\"\ncache_size = \"20G\"\nupload_threads = 4\n[s3]\nbucket = \"b\"\nprefix = \"p\"\nregion = \"us-east-1\"\n",
        )
        .unwrap();
        let old = BucketBinding::read(dir.path()).unwrap().unwrap();
        assert_eq!(
            (old.upload_memory.as_str(), old.read_memory.as_str()),
            ("512M", "64M")
        );
        let new = BucketBinding {
            upload_memory: "0".into(),
            read_memory: "1G".into(),
            ..old
        };
        new.write(dir.path()).unwrap();
        assert_eq!(BucketBinding::read(dir.path()).unwrap().unwrap(), new);
    }
}
