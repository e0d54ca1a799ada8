//! The data directory: where one reel instance keeps its store.
//!
//! Layout: `DIR/objects/` (pack objects, the local back end) and `DIR/catalog/` (the catalog).
//!
//! The directory holds every backup, the password hashes and the audit log: it is created
//! 0700, and one that other users can enter or read is refused (its mode says nothing about
//! the files below it, which are created with the process's umask).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use reel_backend::LocalBackend;
use reel_chunkstore::{ChunkStore, StoreConfig, StoreError};
use reel_volume::Cartridges;

/// Default data directory, relative to where reel is started.
pub const DEFAULT_DATA_DIR: &str = "reel-data";

#[derive(clap::Args, Debug, Clone)]
pub struct DataDirArg {
    /// Data directory (created if missing). Several instances need several directories.
    #[arg(long = "data", value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    pub dir: PathBuf,
}

/// Opens (or creates) the library's cartridges in `dir`, a private directory (see
/// [`ensure_private`]).
pub fn open(dir: &Path) -> anyhow::Result<Cartridges> {
    ensure_private(dir)?;
    Ok(Cartridges::new(open_store(dir)?))
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

/// Opens (or creates) the chunk store in `dir` (the store benchmark's own scratch stores open
/// it directly).
pub fn open_store(dir: &Path) -> anyhow::Result<ChunkStore> {
    let objects = dir.join("objects");
    let backend = LocalBackend::open(&objects)
        .with_context(|| format!("opening the object directory {}", objects.display()))?;
    let store = ChunkStore::open(&dir.join("catalog"), Arc::new(backend), StoreConfig::default())
        .map_err(|e| match e {
            StoreError::Catalog(why) if why.contains("already open") || why.contains("lock") => anyhow::anyhow!(
                "the data directory {} is in use by another reel process (stop `reel serve` first): {why}",
                dir.display()
            ),
            other => anyhow::Error::new(other),
        })
        .with_context(|| format!("opening the store in {}", dir.display()))?;
    Ok(store)
}
