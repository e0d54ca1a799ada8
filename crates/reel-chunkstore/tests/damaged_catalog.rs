//! A damaged catalog file (bit flips, truncation) is refused or reported: never a panic, and a
//! read never returns bytes other than those written.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use worker::fill;

use reel_backend::{Backend, LocalBackend};
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};

fn open(dir: &Path) -> reel_chunkstore::Result<ChunkStore> {
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&dir.join("objects")).unwrap());
    ChunkStore::open(&dir.join("catalog"), backend, StoreConfig::default())
}

/// Opens the store and reads everything; returns a description of what happened. Panics (the
/// test's failure) only if wrong bytes come back.
fn try_everything(dir: &Path, streams: &[Vec<u8>]) -> &'static str {
    let Ok(store) = open(dir) else {
        return "open refused";
    };
    let _ = store.scrub(&mut |_, _| {});
    for (i, expected) in streams.iter().enumerate() {
        let Ok(s) = store.open_stream(StreamId(i as u64)) else {
            return "stream refused";
        };
        if s.len() != expected.len() as u64 {
            // A stream that lost its length cannot pass off other bytes as its own.
            let mut buf = vec![0u8; s.len().min(expected.len() as u64) as usize];
            if s.read_at(0, &mut buf).is_ok() {
                assert_eq!(
                    buf,
                    expected[..buf.len()],
                    "stream {i}: wrong bytes after damage"
                );
            }
            return "length differs";
        }
        let mut buf = vec![0u8; expected.len()];
        match s.read_at(0, &mut buf) {
            Ok(()) => assert!(buf == *expected, "stream {i}: wrong bytes after damage"),
            Err(_) => return "read refused",
        }
    }
    "intact"
}

#[test]
fn damaged_catalog_is_refused_or_reported_never_served_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let streams: Vec<Vec<u8>> = (0..3)
        .map(|s| {
            (0..40)
                .flat_map(|r| fill(s * 100 + r, 30_000 + r as usize * 977))
                .collect()
        })
        .collect();
    {
        let store = open(dir.path()).unwrap();
        for (i, data) in streams.iter().enumerate() {
            let s = store.open_stream(StreamId(i as u64)).unwrap();
            for rec in data.chunks(50_000) {
                s.append_record(rec).unwrap();
            }
            s.sync().unwrap();
        }
    }
    assert_eq!(try_everything(dir.path(), &streams), "intact");
    let catalog = dir.path().join("catalog/catalog.redb");
    let pristine = std::fs::read(&catalog).unwrap();
    let mut outcomes = std::collections::BTreeMap::new();
    let mut rng = 0x1234_5678_9abc_def1u64;
    for trial in 0..60 {
        let mut damaged = pristine.clone();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if trial % 6 == 5 {
            damaged.truncate((rng % pristine.len() as u64) as usize);
        } else {
            for k in 0..4 {
                let at = ((rng >> (k * 8)) as usize).wrapping_mul(2_654_435_761) % damaged.len();
                damaged[at] ^= 1 << (k + trial % 4);
            }
        }
        std::fs::write(&catalog, &damaged).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| try_everything(dir.path(), &streams)))
            .unwrap_or_else(|_| panic!("trial {trial}: panicked on a damaged catalog"));
        *outcomes.entry(outcome).or_insert(0) += 1;
    }
    std::fs::write(&catalog, &pristine).unwrap();
    eprintln!("outcomes over 60 damaged catalogs: {outcomes:?}");
    assert!(
        outcomes.keys().any(|k| *k != "intact"),
        "no damage was ever noticed: {outcomes:?}"
    );
}
