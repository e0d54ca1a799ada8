//! Two stores on two directories (two prefixes of one bucket, in miniature): export from A,
//! import into B, read in place; pins against A's reclaim; release through B's reclaim.

use std::path::Path;
use std::sync::Arc;

use reel_backend::{Backend, LocalBackend};

use super::*;
use crate::StoreConfig;
use crate::test_support::noise;

const SOURCE: &str = "store-a#share-1";

fn backend(dir: &Path) -> Arc<dyn Backend> {
    Arc::new(LocalBackend::open(&dir.join("objects")).unwrap())
}

fn open(dir: &Path, catalog: &str) -> ChunkStore {
    let config = StoreConfig {
        journal: true,
        pack_target: 256 << 10,
        // Small chunks: the tests count on many chunks per pack and many rows per stream.
        chunker: crate::ChunkerParams::LEGACY,
        ..StoreConfig::default()
    };
    ChunkStore::open(&dir.join(catalog), backend(dir), config).unwrap()
}

/// Resolves [`SOURCE`] to A's back end.
struct OnlyA(Arc<dyn Backend>);

impl ForeignStores for OnlyA {
    fn open(&self, source: &str) -> std::result::Result<Arc<dyn Backend>, String> {
        (source == SOURCE)
            .then(|| self.0.clone())
            .ok_or_else(|| format!("unknown store {source}"))
    }
}

fn write(store: &ChunkStore, stream: u64, records: &[Vec<u8>]) -> Vec<u8> {
    let s = store.open_stream(StreamId(stream)).unwrap();
    let mut all = Vec::new();
    for r in records {
        s.append_record(r).unwrap();
        all.extend_from_slice(r);
    }
    s.sync().unwrap();
    all
}

fn read(store: &ChunkStore, stream: u64) -> Result<Vec<u8>> {
    let s = store.open_stream(StreamId(stream))?;
    let mut out = vec![0; s.len() as usize];
    s.read_at(0, &mut out)?;
    Ok(out)
}

/// The export's parts (of about `part_bytes`).
fn export(store: &ChunkStore, stream: u64, part_bytes: usize) -> Result<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    let n = store.export_stream(StreamId(stream), b"to b", part_bytes, &mut |p| {
        parts.push(p);
        Ok(())
    })?;
    assert_eq!(n, parts.len() as u64);
    Ok(parts)
}

fn import(store: &ChunkStore, parts: &[Vec<u8>], stream: u64) -> Result<ImportReport> {
    store.import_stream(SOURCE, &mut parts.iter().cloned().map(Ok), StreamId(stream))
}

fn pack_objects(b: &dyn Backend) -> Vec<String> {
    b.list("packs/")
        .unwrap()
        .into_iter()
        .map(|o| o.key.to_string())
        .collect()
}

#[test]
fn an_imported_stream_is_read_in_place_after_restart_and_recovery() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path(), "catalog");
    let shared = noise(300_000, 1);
    // Repeated records become spans; the bundle must carry them.
    let written = write(
        &a,
        4,
        &[shared.clone(), noise(500_000, 2), shared.clone(), shared],
    );
    let bundle = export(&a, 4, 1 << 30).unwrap();
    assert_eq!(
        a.pinned_streams().unwrap(),
        vec![(StreamId(4), b"to b".to_vec())]
    );
    {
        // Pinned: readable, but nothing it references may change.
        let s = a.open_stream(StreamId(4)).unwrap();
        assert!(matches!(s.append(b"more"), Err(StoreError::Invalid(_))));
        assert!(matches!(
            s.append_record(&[7; 9000]),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(s.truncate(0), Err(StoreError::Invalid(_))));
        let mut first = vec![0; 1000];
        s.read_at(0, &mut first).unwrap();
        assert_eq!(first, written[..1000]);
    }

    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    let report = import(&b, &bundle, 9).unwrap();
    assert_eq!(report.stream_bytes, written.len() as u64);
    assert!(report.foreign_packs > 0 && report.chunks_added > 0);
    assert_eq!(read(&b, 9).unwrap(), written);
    assert!(
        pack_objects(&**b.backend()).is_empty(),
        "nothing was copied into B"
    );
    let stats = b.stats().unwrap();
    assert_eq!((stats.stored_bytes, stats.packs), (0, 0));
    assert_eq!(stats.foreign_packs, report.foreign_packs);
    assert_eq!(stats.logical_bytes, written.len() as u64);
    assert_eq!(b.foreign_sources(), BTreeSet::from([SOURCE.to_string()]));
    assert!(b.scrub(&mut |_, _| {}).unwrap().is_clean());

    // B writes on after the adopted data (tape: append at EOD): its own packs, its own bytes.
    let more = noise(200_000, 3);
    {
        let s = b.open_stream(StreamId(9)).unwrap();
        s.append_record(&more).unwrap();
        s.sync().unwrap();
    }
    let mut expected = written.clone();
    expected.extend_from_slice(&more);
    let fingerprint = b.catalog_fingerprint().unwrap();
    drop(b);

    // Restart, then recovery of B from its back end alone: the foreign rows come back.
    for catalog in ["catalog", "recovered"] {
        let b = open(b_dir.path(), catalog);
        assert_eq!(b.catalog_fingerprint().unwrap(), fingerprint, "{catalog}");
        assert!(
            matches!(read(&b, 9), Err(StoreError::Invalid(_))),
            "{catalog}: no resolver"
        );
        b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
        assert_eq!(read(&b, 9).unwrap(), expected, "{catalog}");
    }
}

#[test]
fn a_pin_keeps_packs_in_place_and_release_follows_the_importers_reclaim() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path(), "catalog");
    let common = noise(400_000, 10);
    // Stream 1 holds `common` in its packs with data that dies below; stream 2 (exported)
    // reuses `common` from stream 1's packs.
    write(&a, 1, &[common.clone(), noise(600_000, 11)]);
    let exported = write(&a, 2, &[common, noise(100_000, 12)]);
    let bundle = export(&a, 2, 1 << 30).unwrap();
    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    import(&b, &bundle, 7).unwrap();

    // Stream 1 goes; reclaim would rewrite its mostly dead packs, but not the pinned ones.
    assert!(matches!(
        a.delete_stream(StreamId(2)),
        Err(StoreError::Invalid(_))
    ));
    a.delete_stream(StreamId(1)).unwrap();
    let before = pack_objects(&**a.backend());
    let report = a.reclaim(1.0, &mut |_, _| {}).unwrap();
    assert_eq!(report.packs_rewritten, 0, "{report:?}");
    assert!(
        report.packs_deleted > 0,
        "stream 1's own packs went: {report:?}"
    );
    let kept = pack_objects(&**a.backend());
    assert!(kept.iter().all(|k| before.contains(k)));
    assert_eq!(read(&b, 7).unwrap(), exported);

    // B lets go: the stream goes, B's reclaim forgets A's packs and never touches them.
    b.delete_stream(StreamId(7)).unwrap();
    let report = b.reclaim(0.5, &mut |_, _| {}).unwrap();
    assert!(report.foreign_packs_forgotten > 0, "{report:?}");
    assert_eq!(report.bytes_freed, 0);
    assert!(b.foreign_sources().is_empty());
    assert_eq!(b.stats().unwrap().foreign_packs, 0);
    assert_eq!(pack_objects(&**a.backend()), kept);

    // Now A may unpin, delete and reclaim: the packs the pin held go.
    a.unpin_stream(StreamId(2)).unwrap();
    a.delete_stream(StreamId(2)).unwrap();
    a.reclaim(0.5, &mut |_, _| {}).unwrap();
    assert!(pack_objects(&**a.backend()).is_empty());
}

#[test]
fn without_the_pin_a_reclaim_moves_what_the_importer_reads() {
    // The control for the test above: the pin is what keeps the importer readable.
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path(), "catalog");
    let common = noise(400_000, 20);
    write(&a, 1, &[common.clone(), noise(600_000, 21)]);
    write(&a, 2, &[common, noise(100_000, 22)]);
    let bundle = export(&a, 2, 1 << 30).unwrap();
    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    import(&b, &bundle, 7).unwrap();
    a.unpin_stream(StreamId(2)).unwrap();
    a.delete_stream(StreamId(1)).unwrap();
    let report = a.reclaim(1.0, &mut |_, _| {}).unwrap();
    assert!(report.packs_rewritten > 0, "{report:?}");
    assert!(matches!(read(&b, 7), Err(StoreError::Corrupt(_))));
}

#[test]
fn bad_bundles_are_refused_and_change_nothing() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path(), "catalog");
    write(&a, 3, &[noise(300_000, 30)]);
    let parts = export(&a, 3, 1 << 30).unwrap();
    assert_eq!(parts.len(), 1);
    let bundle = parts[0].clone();
    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    write(&b, 5, &[noise(1000, 31)]);
    let before = b.catalog_fingerprint().unwrap();

    let ops = journal::decode(&bundle, 0).unwrap();
    let without_chunks: Vec<Op> = ops
        .iter()
        .filter(|op| !matches!(op, Op::PutChunk(..)))
        .cloned()
        .collect();
    let with_a_delete: Vec<Op> = ops.iter().cloned().chain([Op::DelStream(5)]).collect();
    let mut flipped = bundle.clone();
    flipped[40] ^= 1;
    for (what, bad) in [
        ("garbage", b"not a bundle".to_vec()),
        ("a flipped bit", flipped),
        ("chunks missing", journal::encode(0, &without_chunks)),
        ("a delete", journal::encode(0, &with_a_delete)),
        ("another part number", journal::encode(1, &ops)),
    ] {
        assert!(
            matches!(import(&b, &[bad], 8), Err(StoreError::Invalid(_))),
            "{what}"
        );
    }
    assert!(
        matches!(import(&b, &[], 8), Err(StoreError::Invalid(_))),
        "no parts"
    );
    assert!(matches!(
        import(&b, std::slice::from_ref(&bundle), 5),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        b.import_stream("", &mut std::iter::once(Ok(bundle.clone())), StreamId(8)),
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(b.catalog_fingerprint().unwrap(), before);

    // An adopted stream is not exported again (its chunks are A's, not B's to pin).
    import(&b, std::slice::from_ref(&bundle), 8).unwrap();
    assert!(matches!(
        export(&b, 8, 1 << 30),
        Err(StoreError::Invalid(_))
    ));
    assert!(
        b.pinned_streams().unwrap().is_empty(),
        "the refused export left no pin"
    );
    // Nor is a stream that does not exist, or one that is open.
    assert!(matches!(
        export(&a, 99, 1 << 30),
        Err(StoreError::Invalid(_))
    ));
    let open_stream = a.open_stream(StreamId(3)).unwrap();
    assert!(matches!(export(&a, 3, 1 << 30), Err(StoreError::InUse(3))));
    drop(open_stream);
}

#[test]
fn a_bundle_in_many_small_parts_imports_whole_and_a_broken_part_stops_the_import() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path(), "catalog");
    // Parts are cut at extent rows (about 1024 entries each): many small records make many
    // rows. Every tenth record repeats an earlier one, and a whole large record (a span)
    // repeats too, so parts share chunks and spans.
    let big = noise(200_000, 50);
    let mut records: Vec<Vec<u8>> = (0..6000u64)
        .map(|i| noise(1500, if i % 10 == 9 { i % 7 } else { 1000 + i }))
        .collect();
    records.insert(100, big.clone());
    records.push(big);
    let written = write(&a, 6, &records);
    let parts = export(&a, 6, 16 << 10).unwrap();
    assert!(parts.len() >= 4, "{} parts", parts.len());

    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    // Parts out of order are refused (each names its place).
    let mut swapped = parts.clone();
    swapped.swap(0, 1);
    assert!(matches!(
        import(&b, &swapped, 11),
        Err(StoreError::Invalid(_))
    ));
    // A damaged later part stops the import after the parts before it: the caller deletes.
    let mut damaged = parts.clone();
    let last = damaged.len() - 1;
    damaged[last][30] ^= 1;
    assert!(matches!(
        import(&b, &damaged, 12),
        Err(StoreError::Invalid(_))
    ));
    b.delete_stream(StreamId(12)).unwrap();

    let report = import(&b, &parts, 13).unwrap();
    assert_eq!(report.stream_bytes, written.len() as u64);
    assert_eq!(read(&b, 13).unwrap(), written);
    assert!(pack_objects(&**b.backend()).is_empty());
    // The damaged attempt's rows go with a reclaim; the whole import's stay.
    b.reclaim(0.5, &mut |_, _| {}).unwrap();
    assert_eq!(read(&b, 13).unwrap(), written);
    assert!(b.scrub(&mut |_, _| {}).unwrap().is_clean());
}

/// Spans stored as pieces (catalog format 3) travel with the stream: the bundle carries every
/// piece its spans name (import refuses a bundle that lacks one), and the importer reads the
/// stream back exactly, before and after a reopen.
#[test]
fn a_stream_whose_records_are_stored_in_pieces_imports_whole() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path(), "catalog");
    let blocks: Vec<Vec<u8>> = (0..8).map(|i| noise(256 << 10, 40 + i)).collect();
    let record =
        |order: [usize; 4]| -> Vec<u8> { order.iter().flat_map(|&b| blocks[b].clone()).collect() };
    // Stream 1 stores the blocks (new chunks: flat spans); stream 2 holds them in a new order,
    // so its records are stored as pieces.
    write(&a, 1, &[record([0, 1, 2, 3]), record([4, 5, 6, 7])]);
    let written = write(&a, 2, &[record([5, 2, 7, 0]), record([3, 6, 1, 4])]);
    let nested = {
        let txn = a.inner.db.begin_read().unwrap();
        let mut nested = 0;
        crate::spans::read(&txn)
            .unwrap()
            .for_each(|_, body| {
                nested += usize::from(!format::span_is_flat(body));
                Ok(())
            })
            .unwrap();
        nested
    };
    assert!(
        nested >= 2,
        "stream 2's records were not stored in pieces ({nested} nested spans)"
    );

    let parts = export(&a, 2, 1 << 30).unwrap();
    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    import(&b, &parts, 9).unwrap();
    assert_eq!(read(&b, 9).unwrap(), written);
    assert!(b.scrub(&mut |_, _| {}).unwrap().is_clean());
    drop(b);
    let b = open(b_dir.path(), "catalog");
    b.set_foreign_stores(Arc::new(OnlyA(a.backend().clone())));
    assert_eq!(
        read(&b, 9).unwrap(),
        written,
        "after reopening the importer"
    );
}
