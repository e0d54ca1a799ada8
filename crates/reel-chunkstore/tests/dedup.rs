//! Dedup acceptance on tapewrite-style data (issue: storage engine, "Acceptance").
//!
//! The ideal is computed independently of the store: every distinct 256 KiB block compressed
//! once with zstd level 1 (the store's level), times its repeats.

use std::sync::Arc;

use reel_backend::MemoryBackend;
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};
use reel_datagen::{GenConfig, Generator, Order, ShiftConfig};

const BLOCK: usize = 256 * 1024;

fn tapewrite(total: u64, redundancy: u32, seed: u64) -> GenConfig {
    GenConfig {
        seed,
        block_size: BLOCK,
        randomness: 0.25,
        redundancy,
        // Windows of 64 MiB: repeats are scattered far apart and across cartridges.
        order: Order::Scattered { window_blocks: 256 },
        incompressible_share: 0.0,
        total_bytes: total,
    }
}

/// Bytes the ideal store keeps: each distinct block compressed on its own, once.
fn ideal_stored(cfg: &GenConfig) -> u64 {
    let mut g = Generator::new(cfg.clone()).unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut buf = Vec::new();
    let mut stored = 0u64;
    while g.next_record(&mut buf, BLOCK) > 0 {
        if seen.insert(*blake3::hash(&buf).as_bytes()) {
            stored += zstd::bulk::compress(&buf, 1).unwrap().len() as u64;
        }
    }
    stored
}

fn store() -> (tempfile::TempDir, ChunkStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = ChunkStore::open(
        dir.path(),
        Arc::new(MemoryBackend::new()),
        StoreConfig::default(),
    )
    .unwrap();
    (dir, s)
}

/// Writes the generator's stream as records of `record` bytes, spread over `cartridges`
/// streams starting at id `first`.
fn write(store: &ChunkStore, mut g: Generator, record: usize, first: u64, cartridges: u64) -> u64 {
    let total = g.expected().output_bytes;
    let per = total.div_ceil(cartridges);
    let mut buf = Vec::new();
    let mut written = 0u64;
    for c in 0..cartridges {
        let s = store.open_stream(StreamId(first + c)).unwrap();
        while s.len() < per {
            if g.next_record(&mut buf, record) == 0 {
                break;
            }
            s.append_record(&buf).unwrap();
            written += buf.len() as u64;
        }
        s.sync().unwrap();
    }
    written
}

#[test]
fn block_aligned_scattered_repeats_reach_97_percent_of_ideal() {
    let cfg = tapewrite(256 << 20, 8, 11);
    let ideal = ideal_stored(&cfg);
    let (_dir, store) = store();
    let logical = write(&store, Generator::new(cfg.clone()).unwrap(), BLOCK, 0, 4);
    let stats = store.stats().unwrap();
    let ideal_ratio = logical as f64 / ideal as f64;
    let ratio = stats.reduction_ratio();
    eprintln!(
        "tapewrite R=8: ideal {ideal_ratio:.2}:1, store {ratio:.2}:1 ({:.1} % of ideal), dedup {:.2}:1, compression {:.2}:1",
        100.0 * ratio / ideal_ratio,
        stats.dedup_ratio(),
        stats.compression_ratio()
    );
    assert!(
        ideal_ratio > 25.0,
        "generator no longer makes tapewrite data ({ideal_ratio:.1}:1)"
    );
    assert!(
        ratio >= 0.97 * ideal_ratio,
        "reduction {ratio:.2}:1 is below 97 % of ideal {ideal_ratio:.2}:1"
    );
}

/// Writes a stream with 256 KiB records, then a second copy of it written differently. Ideally
/// the second copy adds nothing, so the store's reduction over both copies is twice that of the
/// first alone; returns the achieved fraction of that ideal (stored bytes, U / (U + added)).
fn second_copy_dedup(record: usize, shift: Option<ShiftConfig>, redundancy: u32) -> f64 {
    let cfg = tapewrite(128 << 20, redundancy, 21);
    let (_dir, store) = store();
    write(&store, Generator::new(cfg.clone()).unwrap(), BLOCK, 0, 2);
    let first = store.stats().unwrap();
    let g = match shift {
        Some(s) => Generator::with_shift(cfg, s).unwrap(),
        None => Generator::new(cfg).unwrap(),
    };
    write(&store, g, record, 10, 2);
    let both = store.stats().unwrap();
    let added = both.stored_bytes - first.stored_bytes;
    let share = first.stored_bytes as f64 / both.stored_bytes as f64;
    eprintln!(
        "second copy, {} KiB records, R={redundancy}: adds {added} bytes to {}; reduction {:.2}:1 vs ideal {:.2}:1 ({:.1} %)",
        record / 1024,
        first.stored_bytes,
        both.reduction_ratio(),
        2.0 * first.reduction_ratio(),
        100.0 * share,
    );
    share
}

#[test]
fn rewritten_with_64k_records_dedups_90_percent() {
    for r in [1, 8] {
        let share = second_copy_dedup(64 * 1024, None, r);
        assert!(
            share >= 0.90,
            "64 KiB re-blocked copy (R={r}) reaches only {:.1} % of ideal",
            share * 100.0
        );
    }
}

#[test]
fn rewritten_with_1m_records_dedups_90_percent() {
    for r in [1, 8] {
        let share = second_copy_dedup(1 << 20, None, r);
        assert!(
            share >= 0.90,
            "1 MiB re-blocked copy (R={r}) reaches only {:.1} % of ideal",
            share * 100.0
        );
    }
}

#[test]
fn shifted_by_inserted_bytes_dedups_90_percent() {
    for r in [1, 8] {
        let shift = ShiftConfig {
            insert_every: 3 << 20,
            insert_len: 1..=16,
        };
        let share = second_copy_dedup(BLOCK, Some(shift), r);
        assert!(
            share >= 0.90,
            "shifted copy (R={r}) reaches only {:.1} % of ideal",
            share * 100.0
        );
    }
}

/// Next week's full backup: the store is reopened (empty locality cache), so duplicates can
/// only be found through the on-disk index, reached by hook chunks. A few chunks at the start
/// of each repeated stretch may be stored again; the copy must still reach 95 % of ideal.
#[test]
fn second_copy_after_reopen_dedups_through_hooks() {
    let cfg = tapewrite(64 << 20, 1, 31);
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(MemoryBackend::new());
    let open = || ChunkStore::open(dir.path(), backend.clone(), StoreConfig::default()).unwrap();
    let first = {
        let store = open();
        write(&store, Generator::new(cfg.clone()).unwrap(), BLOCK, 0, 1);
        store.stats().unwrap()
    };
    let store = open();
    assert_eq!(
        store.stats().unwrap().cache_memory_bytes,
        0,
        "a reopened store starts cold"
    );
    write(&store, Generator::new(cfg).unwrap(), BLOCK, 10, 1);
    let both = store.stats().unwrap();
    let share = first.stored_bytes as f64 / both.stored_bytes as f64;
    eprintln!(
        "second copy after reopen: adds {} bytes to {} ({:.1} % of ideal)",
        both.stored_bytes - first.stored_bytes,
        first.stored_bytes,
        100.0 * share
    );
    assert!(
        share >= 0.95,
        "cold-cache second copy reaches only {:.1} % of ideal",
        100.0 * share
    );
}
