//! What the catalog's tables take on disk, table by table (issue 14's metadata goals): rows,
//! the bytes of their keys and values, redb's index pages, and the slack in partly filled pages.
//! Read from one snapshot; a few page reads per table, so it runs beside writers.

use redb::{ReadableTableMetadata, TableHandle};

use crate::Result;
use crate::store::ChunkStore;

/// One table's share of the catalog.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableSpace {
    pub name: String,
    pub rows: u64,
    /// Keys and values as inserted.
    pub stored_bytes: u64,
    /// Branch pages' keys and other index metadata.
    pub metadata_bytes: u64,
    /// Unused space inside the table's pages.
    pub fragmented_bytes: u64,
}

impl TableSpace {
    /// Everything the table's pages take.
    pub fn total_bytes(&self) -> u64 {
        self.stored_bytes + self.metadata_bytes + self.fragmented_bytes
    }
}

/// The catalog's live tables, largest first. The file is larger than their sum by pages redb
/// freed but keeps and by its growth in doubling steps (docs/design/efficiency.md §2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatalogSpace {
    pub tables: Vec<TableSpace>,
}

impl CatalogSpace {
    pub fn total_bytes(&self) -> u64 {
        self.tables.iter().map(TableSpace::total_bytes).sum()
    }
}

impl ChunkStore {
    /// The space each catalog table takes, from one read snapshot.
    pub fn catalog_space(&self) -> Result<CatalogSpace> {
        let txn = self.inner.db.begin_read()?;
        let mut tables = Vec::new();
        for handle in txn.list_tables()? {
            let name = handle.name().to_string();
            let table = txn.open_untyped_table(handle)?;
            let stats = table.stats()?;
            tables.push(TableSpace {
                name,
                rows: table.len()?,
                stored_bytes: stats.stored_bytes(),
                metadata_bytes: stats.metadata_bytes(),
                fragmented_bytes: stats.fragmented_bytes(),
            });
        }
        tables.sort_by(|a, b| {
            b.total_bytes()
                .cmp(&a.total_bytes())
                .then(a.name.cmp(&b.name))
        });
        Ok(CatalogSpace { tables })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use reel_backend::MemoryBackend;

    use crate::test_support::noise;
    use crate::{ChunkStore, StoreConfig, StreamId};

    #[test]
    fn every_table_is_counted_and_the_index_grows_with_unique_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(
            dir.path(),
            Arc::new(MemoryBackend::new()),
            StoreConfig::default(),
        )
        .unwrap();
        let empty = store.catalog_space().unwrap();
        let names: Vec<&str> = empty.tables.iter().map(|t| t.name.as_str()).collect();
        for table in [
            "chunk_index",
            "chunk_index_recent",
            "packs",
            "pack_names",
            "extents",
            "span_index",
            "span_bodies",
            "meta",
        ] {
            assert!(names.contains(&table), "{table} missing from {names:?}");
        }
        let stream = store.open_stream(StreamId(1)).unwrap();
        let data = noise(4 << 20, 7);
        stream.append_record(&data).unwrap();
        stream.sync().unwrap();
        let stats = store.stats().unwrap();
        let space = store.catalog_space().unwrap();
        // The key rows' two tables, main and recent (format 11).
        let table = |name: &str| space.tables.iter().find(|t| t.name == name).unwrap();
        let (main, recent) = (table("chunk_index"), table("chunk_index_recent"));
        // No two of a few thousand ids share their first 6 bytes: every row is a key row.
        assert_eq!(main.rows + recent.rows, stats.chunks);
        // A 6-byte key and a 48-bit pack id per row (catalog format 10).
        assert_eq!(
            main.stored_bytes + recent.stored_bytes,
            stats.chunks * 12,
            "{main:?} {recent:?}"
        );
        assert!(space.total_bytes() > empty.total_bytes());
        let sorted = space
            .tables
            .windows(2)
            .all(|w| w[0].total_bytes() >= w[1].total_bytes());
        assert!(sorted, "{space:?}");
    }
}
