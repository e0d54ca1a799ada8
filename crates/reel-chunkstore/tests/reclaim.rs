//! Space reclamation: deleting and truncating streams that share chunks, then `reclaim`.

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use std::collections::BTreeMap;
use std::sync::Arc;

use reel_backend::{Backend, MemoryBackend};
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};
use worker::{Rec, expected_range, fill, total_len};

fn open(dir: &std::path::Path, backend: Arc<dyn Backend>) -> ChunkStore {
    ChunkStore::open(&dir.join("catalog"), backend, StoreConfig::default()).unwrap()
}

/// Every stream in `model` reads back exactly, no other stream exists, and scrub is clean.
fn verify(store: &ChunkStore, model: &BTreeMap<u64, Vec<Rec>>, when: &str) {
    let listed: BTreeMap<u64, u64> = store
        .streams()
        .unwrap()
        .into_iter()
        .map(|(s, l)| (s.0, l))
        .collect();
    let want: BTreeMap<u64, u64> = model.iter().map(|(id, r)| (*id, total_len(r))).collect();
    assert_eq!(listed, want, "{when}: streams and lengths");
    for (id, recs) in model {
        let s = store.open_stream(StreamId(*id)).unwrap();
        let len = total_len(recs);
        let mut buf = vec![0u8; len as usize];
        s.read_at(0, &mut buf)
            .unwrap_or_else(|e| panic!("{when}: reading stream {id}: {e:?}"));
        assert!(
            buf == expected_range(recs, 0, len),
            "{when}: stream {id} reads back wrong"
        );
    }
    let r = store.scrub(&mut |_, _| {}).unwrap();
    assert!(
        r.is_clean(),
        "{when}: scrub: {:?} / {:?}",
        r.bad_chunks.first(),
        r.damage.first()
    );
}

/// Appends and flushes; the handle is returned to be kept until the sync (a handle dropped
/// before the sync loses its unsealed pack: see `faults.rs`,
/// `dropping_a_stream_handle_before_sync_keeps_its_flushed_data`).
fn write(store: &ChunkStore, id: u64, recs: &[Rec]) -> reel_chunkstore::Stream {
    let s = store.open_stream(StreamId(id)).unwrap();
    for r in recs {
        s.append_record(&fill(r.0, r.1 as usize)).unwrap();
    }
    s.flush().unwrap();
    s
}

#[test]
fn reclaim_frees_dead_chunks_and_keeps_shared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mem = Arc::new(MemoryBackend::new());
    let store = open(dir.path(), mem.clone());
    // Twenty distinct incompressible records (keys ≢ 0 mod 3), 100..250 KB.
    let r: Vec<Rec> = (0..20u64)
        .map(|i| (i * 3 + 1, 100_000 + (i as u32 % 7) * 25_000))
        .collect();
    let mut model: BTreeMap<u64, Vec<Rec>> = BTreeMap::new();
    model.insert(1, r[0..10].to_vec()); // A
    model.insert(2, r[0..10].to_vec()); // B: a copy of A
    model.insert(3, r[10..20].to_vec()); // C
    model.insert(4, [&r[10..15], &r[0..5]].concat()); // D: half C, half A
    let handles: Vec<_> = model
        .iter()
        .map(|(id, recs)| write(&store, *id, recs))
        .collect();
    store.sync().unwrap();
    drop(handles);
    let before = store.stats().unwrap();
    let unique: u64 = r.iter().map(|x| u64::from(x.1)).sum();
    assert!(
        before.unique_bytes >= unique && before.unique_bytes < unique + unique / 10,
        "every record stored once: {} unique bytes for {unique} distinct bytes",
        before.unique_bytes
    );
    verify(&store, &model, "before reclaim");

    // Nothing is dead yet: reclaim must not free anything.
    let idle = store.reclaim(0.5, &mut |_, _| {}).unwrap();
    assert_eq!(
        (
            idle.packs_deleted,
            idle.packs_rewritten,
            idle.chunks_dropped
        ),
        (0, 0, 0),
        "{idle:?}"
    );
    assert_eq!(store.stats().unwrap().stored_bytes, before.stored_bytes);

    // B dies (its chunks live on in A), C dies, D keeps r10..r11: r12..r19 are dead.
    store.delete_stream(StreamId(2)).unwrap();
    store.delete_stream(StreamId(3)).unwrap();
    let d = store.open_stream(StreamId(4)).unwrap();
    let keep: Vec<Rec> = r[10..12].to_vec();
    d.truncate(total_len(&keep)).unwrap();
    // An open stream with unflushed data across the reclaim.
    let extra: Rec = (999 * 3 + 1, 77_777);
    let mut grown = keep.clone();
    d.append_record(&fill(extra.0, extra.1 as usize)).unwrap();
    grown.push(extra);
    model.remove(&2);
    model.remove(&3);
    model.insert(4, grown);

    let report = store.reclaim(0.5, &mut |_, _| {}).unwrap();
    drop(d);
    store.sync().unwrap();
    let after = store.stats().unwrap();
    let dead: u64 = r[12..20].iter().map(|x| u64::from(x.1)).sum();
    assert!(
        report.chunks_dropped > 0 && report.bytes_freed > 0,
        "{report:?}"
    );
    assert!(
        after.stored_bytes + dead * 8 / 10 <= before.stored_bytes + u64::from(extra.1) + 4096,
        "reclaim freed too little: {} → {} stored bytes with {dead} bytes dead ({report:?})",
        before.stored_bytes,
        after.stored_bytes
    );
    assert_eq!(
        mem.total_bytes(),
        after.stored_bytes,
        "the back end holds exactly the cataloged packs"
    );
    verify(&store, &model, "after reclaim");

    // The dead records written again must be stored again, not deduplicated against chunks
    // reclaim dropped.
    let again: Vec<Rec> = r[12..20].to_vec();
    let h = write(&store, 5, &again);
    store.sync().unwrap();
    drop(h);
    model.insert(5, again);
    verify(&store, &model, "after rewriting dead records");

    drop(store);
    let store = open(dir.path(), mem.clone());
    verify(&store, &model, "after reopen");
    // And once more with everything but stream 1 gone.
    for id in [4, 5] {
        store.delete_stream(StreamId(id)).unwrap();
        model.remove(&id);
    }
    store.reclaim(0.5, &mut |_, _| {}).unwrap();
    store.sync().unwrap();
    let last = store.stats().unwrap();
    let live: u64 = r[0..10].iter().map(|x| u64::from(x.1)).sum();
    assert!(
        last.unique_bytes < live + live / 10,
        "{} unique bytes left for {live} live",
        last.unique_bytes
    );
    drop(store);
    let store = open(dir.path(), mem);
    verify(&store, &model, "after the final reclaim and reopen");
}

/// Regression (found by the SIGKILL crash test): a chunk can have an unindexed duplicate copy in
/// another pack. After reclaim dropped the chunk's index entry (its indexed copy's pack was
/// compacted away) while the duplicate's pack survived, loading that pack's table of contents
/// into the locality cache made dedup trust a chunk the index no longer knew: the reference
/// dangled after a restart. Duplicates are now tombstoned in `pack_ids`.
#[test]
fn dedup_never_trusts_an_unindexed_duplicate_copy() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let config = StoreConfig {
        pack_target: 1 << 20,
        ..StoreConfig::default()
    };
    let open = || ChunkStore::open(dir.path(), backend.clone(), config.clone()).unwrap();
    let records: Vec<Vec<u8>> = (0..12).map(|i| fill(900 + i, 300_000)).collect();
    let unique = fill(77, 2_000_000);
    {
        // The records' first, indexed copies (their own packs).
        let store = open();
        let s = store.open_stream(StreamId(1)).unwrap();
        for r in &records {
            s.append_record(r).unwrap();
        }
        s.sync().unwrap();
    }
    {
        // A cold store: chunks before each record's first hook are stored again (unindexed
        // duplicates), in packs shared with live unique data.
        let store = open();
        let s = store.open_stream(StreamId(2)).unwrap();
        for r in &records {
            s.append_record(r).unwrap();
        }
        s.append_record(&unique).unwrap();
        s.sync().unwrap();
        // Only the unique data stays referenced; the first copies' packs become all dead.
        s.truncate(0).unwrap();
        s.append_record(&unique).unwrap();
        s.sync().unwrap();
        drop(s);
        store.delete_stream(StreamId(1)).unwrap();
        let r = store.reclaim(0.5, &mut |_, _| {}).unwrap();
        assert!(
            r.packs_deleted > 0,
            "the first copies' packs must go: {r:?}"
        );
    }
    {
        // Write the records again on a cold store: the unique data's pack is warmed first.
        let store = open();
        let s = store.open_stream(StreamId(3)).unwrap();
        s.append_record(&unique).unwrap();
        for r in &records {
            s.append_record(r).unwrap();
        }
        s.sync().unwrap();
    }
    let store = open();
    let report = store.scrub(&mut |_, _| {}).unwrap();
    assert!(
        report.is_clean(),
        "dangling references: {:?}",
        report.damage.first()
    );
    let s = store.open_stream(StreamId(3)).unwrap();
    let mut at = unique.len() as u64;
    for r in &records {
        let mut buf = vec![0u8; r.len()];
        s.read_at(at, &mut buf).unwrap();
        assert!(buf == *r, "record at {at} reads back wrong");
        at += r.len() as u64;
    }
}

/// Records made of the same blocks in other orders share their *pieces* (catalog format 3), not
/// whole spans: once a reordering stored the pieces, another costs a fraction of the first
/// copy's reference lists, an exact repeat costs none, every stream reads back exactly, and
/// the pieces outlive the records that first stored them through a reclaim and a reopen.
#[test]
fn pieces_shared_between_records_outlive_the_records_that_stored_them() {
    const BLOCK: usize = 256 << 10;
    let dir = tempfile::tempdir().unwrap();
    let mem = Arc::new(MemoryBackend::new());
    let store = open(dir.path(), mem.clone());
    let blocks: Vec<Vec<u8>> = (0..16u64).map(|i| fill(i * 3 + 1, BLOCK)).collect();
    let record = |order: &[usize]| -> Vec<u8> {
        order
            .iter()
            .flat_map(|&b| blocks[b].iter().copied())
            .collect()
    };
    // Stream 1: the blocks in order, four to a 1 MiB record (new chunks: stored flat). Streams
    // 2 and 3: the same blocks in two other orders, shuffled within and across records.
    let first: Vec<Vec<u8>> = (0..4)
        .map(|r| record(&[4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3]))
        .collect();
    let second: Vec<Vec<u8>> = [[5, 0, 10, 15], [3, 12, 6, 9], [14, 1, 8, 7], [11, 2, 13, 4]]
        .iter()
        .map(|order| record(order))
        .collect();
    let third: Vec<Vec<u8>> = [[9, 4, 15, 2], [0, 13, 7, 10], [6, 11, 1, 12], [8, 3, 14, 5]]
        .iter()
        .map(|order| record(order))
        .collect();
    let spans_bytes = |store: &ChunkStore| -> u64 {
        let space = store.catalog_space().unwrap();
        // Bodies and the id → body index (`spans.rs`).
        let tables: Vec<_> = space
            .tables
            .iter()
            .filter(|t| t.name == "span_bodies" || t.name == "span_index")
            .collect();
        assert_eq!(tables.len(), 2);
        tables.iter().map(|t| t.stored_bytes).sum::<u64>()
    };
    let write_all = |id: u64, records: &[Vec<u8>]| {
        let s = store.open_stream(StreamId(id)).unwrap();
        for r in records {
            s.append_record(r).unwrap();
        }
        s.flush().unwrap();
        s
    };
    let read_all = |store: &ChunkStore, id: u64, records: &[Vec<u8>], when: &str| {
        let want: Vec<u8> = records.concat();
        let s = store.open_stream(StreamId(id)).unwrap();
        let mut buf = vec![0u8; want.len()];
        s.read_at(0, &mut buf)
            .unwrap_or_else(|e| panic!("{when}: reading stream {id}: {e:?}"));
        assert!(buf == want, "{when}: stream {id} reads back wrong");
    };

    let h1 = write_all(1, &first);
    store.sync().unwrap();
    let after_first = spans_bytes(&store);
    // Every chunk of the first stream is new, and every other stream refers to each once.
    let chunks = store.stats().unwrap().chunks;
    // Known chunks in a new order: the records are cut into pieces, stored now.
    let h2 = write_all(2, &second);
    store.sync().unwrap();
    let after_second = spans_bytes(&store);
    let h3 = write_all(3, &third);
    store.sync().unwrap();
    let third_cost = spans_bytes(&store) - after_second;
    // Lists spelling every id would cost the third stream 36 bytes per chunk; its records hold
    // the second's pieces, so it adds the pieces around the block seams and a short body per
    // record. (The first copy's flat lists are stored placed, a few bytes per chunk.)
    assert!(
        third_cost * 4 < chunks * 36,
        "the reordered records added {third_cost} bytes of spans for {chunks} chunks (the \
         first copy: {after_first})"
    );
    // An exact repeat of flat records names the flat spans again: no new span, no pieces.
    let h4 = write_all(4, &first);
    store.sync().unwrap();
    assert_eq!(
        spans_bytes(&store),
        after_second + third_cost,
        "repeated records stored spans again"
    );
    drop((h1, h2, h3, h4));
    for (id, records) in [(1, &first), (2, &second), (3, &third), (4, &first)] {
        read_all(&store, id, records, "all written");
    }

    // The records that stored the pieces go; the pieces stay for stream 3.
    for id in [1, 2, 4] {
        store.delete_stream(StreamId(id)).unwrap();
    }
    store.reclaim(0.5, &mut |_, _| {}).unwrap();
    store.sync().unwrap();
    read_all(&store, 3, &third, "after reclaim");
    assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
    // Stream 3's bodies are placed in the packs reclaim dropped: they read the retired names.
    let retired = |store: &ChunkStore| -> u64 {
        let space = store.catalog_space().unwrap();
        let table = space.tables.iter().find(|t| t.name == "retired_pack_names");
        table.map_or(0, |t| t.rows)
    };
    assert!(
        retired(&store) > 0,
        "no placed body reads a dropped pack's names"
    );
    drop(store);
    let store = open(dir.path(), mem.clone());
    read_all(&store, 3, &third, "after reopen");
    assert!(retired(&store) > 0);
    // And with stream 3 gone too, reclaim frees the pieces with everything else.
    store.delete_stream(StreamId(3)).unwrap();
    store.reclaim(0.5, &mut |_, _| {}).unwrap();
    store.sync().unwrap();
    assert_eq!(spans_bytes(&store), 0, "no span outlives every reference");
    assert_eq!(
        retired(&store),
        0,
        "retired names outlive every body that read them"
    );
    assert_eq!(store.stats().unwrap().unique_bytes, 0);
}
