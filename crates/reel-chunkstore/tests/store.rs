//! Store behaviour through the public API, on real back ends.

use std::sync::Arc;

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use worker::fill;

use reel_backend::{Backend, LocalBackend, MemoryBackend};
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};

fn open(dir: &std::path::Path, backend: Arc<dyn Backend>) -> ChunkStore {
    ChunkStore::open(&dir.join("catalog"), backend, StoreConfig::default()).unwrap()
}

fn read_all(s: &reel_chunkstore::Stream) -> Vec<u8> {
    let mut out = vec![0u8; s.len() as usize];
    s.read_at(0, &mut out).unwrap();
    out
}

#[test]
fn bytes_round_trip_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> =
        Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
    let mut expect = Vec::new();
    {
        let store = open(dir.path(), backend.clone());
        let s = store.open_stream(StreamId(1)).unwrap();
        for (i, size) in [1usize, 100, 65536, 262144, 7, 1 << 20, 3]
            .into_iter()
            .enumerate()
        {
            let rec = fill(i as u64, size);
            s.append_record(&rec).unwrap();
            expect.extend_from_slice(&rec);
        }
        assert_eq!(read_all(&s), expect, "read before sync");
        s.sync().unwrap();
    }
    let store = open(dir.path(), backend);
    let s = store.open_stream(StreamId(1)).unwrap();
    assert_eq!(s.len(), expect.len() as u64);
    assert_eq!(read_all(&s), expect, "read after reopen");
    let mut mid = vec![0u8; 1000];
    s.read_at(65000, &mut mid).unwrap();
    assert_eq!(mid, expect[65000..66000]);
    assert!(
        s.read_at(expect.len() as u64 - 10, &mut mid).is_err(),
        "read past end must fail"
    );
    // The appending read gives the same bytes after whatever `out` held, across chunk, record
    // and row boundaries.
    for (at, len) in [
        (0, expect.len()),
        (65000, 1000),
        (100, 262144 + 70000),
        (7, 0),
    ] {
        let mut out = b"kept".to_vec();
        s.read_at_append(at as u64, len, &mut out).unwrap();
        assert_eq!(&out[..4], b"kept");
        assert_eq!(out[4..], expect[at..at + len], "{len} bytes at {at}");
    }
    let mut out = Vec::new();
    assert!(
        s.read_at_append(expect.len() as u64 - 10, 11, &mut out)
            .is_err(),
        "appending read past end must fail"
    );
    // The shared read gives the same bytes as slices of the store's blobs: new chunks stored
    // together come out as one slice, not one per chunk (~2 KiB each here).
    for (at, len) in [
        (0, expect.len()),
        (65000, 1000),
        (100, 262144 + 70000),
        (7, 0),
    ] {
        let mut parts = vec![bytes::Bytes::from_static(b"kept")];
        s.read_shared(at as u64, len, &mut parts).unwrap();
        assert_eq!(parts[0], b"kept"[..]);
        assert_eq!(
            parts[1..].concat(),
            expect[at..at + len],
            "{len} bytes at {at}"
        );
        assert!(
            parts.len() - 1 <= len / (64 << 10) + 3,
            "{len} bytes at {at} in {} slices",
            parts.len() - 1
        );
    }
    assert!(
        s.read_shared(expect.len() as u64 - 10, 11, &mut Vec::new())
            .is_err(),
        "shared read past end must fail"
    );
    assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
}

#[test]
fn truncate_keeps_the_prefix_and_appends_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Arc::new(MemoryBackend::new()));
    let s = store.open_stream(StreamId(9)).unwrap();
    let a = fill(1, 3 << 20);
    s.append_record(&a).unwrap();
    s.flush().unwrap();
    for cut in [3 << 20, 2_500_001, 1_000_000, 12345, 0] {
        s.truncate(cut).unwrap();
        assert_eq!(s.len(), cut);
        assert_eq!(read_all(&s), a[..cut as usize]);
    }
    let b = fill(2, 100_000);
    s.truncate(0).unwrap();
    s.append_record(&a[..777_777]).unwrap();
    s.truncate(500_000).unwrap();
    s.append_record(&b).unwrap();
    s.sync().unwrap();
    let mut expect = a[..500_000].to_vec();
    expect.extend_from_slice(&b);
    assert_eq!(read_all(&s), expect);
    assert!(s.truncate(expect.len() as u64 + 1).is_err());
}

#[test]
fn identical_records_dedup_across_streams_and_sidecars_commit_with_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Arc::new(MemoryBackend::new()));
    let rec = fill(5, 1 << 20);
    for id in 0..4 {
        let s = store.open_stream(StreamId(id)).unwrap();
        s.append_record(&fill(100 + id, 1000 + id as usize * 333))
            .unwrap();
        s.append_record(&rec).unwrap();
        s.set_sidecar(7, Some(vec![id as u8; 3]));
        assert_eq!(s.sidecar(7).unwrap(), Some(vec![id as u8; 3]));
        s.sync().unwrap();
    }
    let stats = store.stats().unwrap();
    assert!(
        stats.unique_bytes < (1 << 20) + 4 * 5000,
        "1 MiB record stored more than once: {stats:?}"
    );
    assert_eq!(stats.streams, 4);
    let s = store.open_stream(StreamId(2)).unwrap();
    assert_eq!(s.sidecar_range(0..100).unwrap(), vec![(7, vec![2u8; 3])]);
}

/// The chunker parameters belong to the store: recorded when it is created, kept whatever a
/// later opening asks for (chunks cut differently would not dedup against the stored ones),
/// and a store with data but none recorded (made before they were) keeps the 2 KiB ones it
/// was written with.
#[test]
fn a_store_keeps_the_chunker_it_was_created_with() {
    use reel_chunkstore::ChunkerParams;
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> =
        Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
    let catalog = dir.path().join("catalog");
    let with = |chunker| StoreConfig {
        chunker,
        ..StoreConfig::default()
    };
    let custom = ChunkerParams::with_avg(4096);
    let data = fill(9, 3 << 20);
    {
        let store = ChunkStore::open(&catalog, backend.clone(), with(custom)).unwrap();
        assert_eq!(store.chunker(), custom);
        let s = store.open_stream(StreamId(1)).unwrap();
        s.append_record(&data).unwrap();
        s.sync().unwrap();
    }
    {
        let store = ChunkStore::open(&catalog, backend.clone(), StoreConfig::default()).unwrap();
        assert_eq!(store.chunker(), custom, "the recorded parameters win");
        // Same cut, so the same bytes again add no chunk.
        let before = store.stats().unwrap().chunks;
        let s = store.open_stream(StreamId(2)).unwrap();
        s.append_record(&data).unwrap();
        s.sync().unwrap();
        assert_eq!(store.stats().unwrap().chunks, before);
    }
    // As an older reel left it: data, and no parameters in the catalog's meta table.
    {
        let db = redb::Database::open(catalog.join("catalog.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
            let mut meta = txn.open_table(meta).unwrap();
            for key in ["chunk_min", "chunk_avg", "chunk_max", "chunk_boundary_min"] {
                assert!(meta.remove(key).unwrap().is_some(), "{key} was recorded");
            }
        }
        txn.commit().unwrap();
    }
    for _ in 0..2 {
        let store = ChunkStore::open(&catalog, backend.clone(), StoreConfig::default()).unwrap();
        assert_eq!(store.chunker(), ChunkerParams::LEGACY);
        assert_eq!(read_all(&store.open_stream(StreamId(1)).unwrap()), data);
    }
    // A new store takes what it is asked for.
    let other = tempfile::tempdir().unwrap();
    let store = open(other.path(), Arc::new(MemoryBackend::new()));
    assert_eq!(store.chunker(), ChunkerParams::DEFAULT);
}
