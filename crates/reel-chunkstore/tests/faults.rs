use reel_backend::{Backend, MemoryBackend};
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};
use std::sync::Arc;

#[test]
fn repro_drop_without_sync() {
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    {
        let store = ChunkStore::open(
            &dir.path().join("catalog"),
            mem.clone(),
            StoreConfig::default(),
        )
        .unwrap();
        let s = store.open_stream(StreamId(1)).unwrap();
        s.append_record(&vec![7u8; 100_000]).unwrap();
        s.flush().unwrap();
    }
    let store = ChunkStore::open(
        &dir.path().join("catalog"),
        mem.clone(),
        StoreConfig::default(),
    )
    .unwrap();
    let s = store.open_stream(StreamId(1)).unwrap();
    eprintln!("len after reopen {}", s.len());
    let mut buf = vec![0u8; s.len() as usize];
    eprintln!("read: {:?}", s.read_at(0, &mut buf).err());
    let r = store.scrub(&mut |_, _| {}).unwrap();
    eprintln!("scrub: {:?}", r);
    assert!(r.is_clean());
}
