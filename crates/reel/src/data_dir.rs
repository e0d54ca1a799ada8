//! The data directory: where one reel instance keeps its store.
//!
//! Layout: `DIR/objects/` (pack objects, the local back end) and `DIR/catalog/` (the catalog).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use reel_backend::LocalBackend;
use reel_chunkstore::{ChunkStore, StoreConfig, StoreError};
use reel_library::Cartridges;

/// Default data directory, relative to where reel is started.
pub const DEFAULT_DATA_DIR: &str = "reel-data";

#[derive(clap::Args, Debug, Clone)]
pub struct DataDirArg {
    /// Data directory (created if missing). Several instances need several directories.
    #[arg(long = "data", value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    pub dir: PathBuf,
}

/// Opens (or creates) the library's cartridges in `dir`.
pub fn open(dir: &Path) -> anyhow::Result<Cartridges> {
    Ok(Cartridges::new(open_store(dir)?))
}

/// Opens (or creates) the chunk store in `dir`.
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
