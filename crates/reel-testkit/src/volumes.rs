//! A cartridge catalog on a fresh chunk store for tests of the volume layer and of the
//! library composition: the catalog file in a temporary directory, packs in memory.

use std::sync::Arc;

use reel_backend::MemoryBackend;
use reel_chunkstore::{ChunkStore, StoreConfig};
use reel_volume::Cartridges;

/// An empty catalog and the directory holding its store (removed when dropped, so keep it).
pub fn memory_catalog() -> (tempfile::TempDir, Cartridges) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = ChunkStore::open(
        dir.path(),
        Arc::new(MemoryBackend::new()),
        StoreConfig::default(),
    )
    .expect("a new store opens");
    (dir, Cartridges::new(store))
}
