//! The tape model's conformance and reference-model tests, run on partitions stored in the
//! real chunk store (local directory back end), not the in-memory store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use reel_backend::LocalBackend;
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};
use reel_media_testing::{
    check_partition_store, partition_ops, reference_cases, run_reference_model,
};
use reel_volume::ChunkPartition;

fn shared_store() -> &'static (tempfile::TempDir, ChunkStore) {
    static STORE: std::sync::OnceLock<(tempfile::TempDir, ChunkStore)> = std::sync::OnceLock::new();
    STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
        let store =
            ChunkStore::open(&dir.path().join("catalog"), backend, StoreConfig::default()).unwrap();
        (dir, store)
    })
}

/// A fresh, empty partition on the shared store.
fn fresh_partition() -> ChunkPartition {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let store = &shared_store().1;
    ChunkPartition::open(
        store
            .open_stream(StreamId(NEXT.fetch_add(1, Ordering::Relaxed)))
            .unwrap(),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn chunk_partition_conforms(ops in partition_ops(60)) {
        check_partition_store(fresh_partition, &ops);
    }

    #[test]
    fn cartridge_on_chunk_store_matches_reference_model(case in reference_cases(60)) {
        run_reference_model(fresh_partition, &case);
    }
}

/// The record map and bytes survive closing and reopening the store.
#[test]
fn partition_reopens_with_its_record_map() {
    use reel_media::{ObjectKind, PartitionStore};
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let backend = Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
        ChunkStore::open(&dir.path().join("catalog"), backend, StoreConfig::default()).unwrap()
    };
    let records: Vec<Vec<u8>> = (0..20u64)
        .map(|i| reel_media_testing::record_bytes(i, 1 + (i as usize * 7919) % 70_000))
        .collect();
    {
        let store = open();
        let mut p = ChunkPartition::open(store.open_stream(StreamId(4)).unwrap()).unwrap();
        for (i, r) in records.iter().enumerate() {
            p.append_record(r).unwrap();
            if i % 6 == 5 {
                p.append_filemarks(2).unwrap();
            }
        }
        p.truncate(20).unwrap();
        p.append_record(&records[0]).unwrap();
        p.sync().unwrap();
    }
    let store = open();
    let mut p = ChunkPartition::open(store.open_stream(StreamId(4)).unwrap()).unwrap();
    assert_eq!(p.object_count(), 21);
    assert_eq!(p.filemarks_before(21).unwrap(), 4);
    assert_eq!(p.filemark_position(0).unwrap(), Some(6));
    let mut buf = Vec::new();
    p.read_record(20, &mut buf).unwrap();
    assert_eq!(buf, records[0]);
    p.read_record(16, &mut buf).unwrap();
    assert_eq!(buf, records[12]);
    assert_eq!(p.object(6).unwrap(), ObjectKind::Filemark);
}
