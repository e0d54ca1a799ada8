//! The catalog journal (`StoreConfig::journal`): the back end alone rebuilds the catalog, a
//! catalog behind the back end catches up, a gap or a second writer is refused.

#[path = "../src/bin/reel-crash-worker.rs"]
mod worker;

use std::path::Path;
use std::sync::Arc;

use reel_backend::{Backend, Key, MemoryBackend, PutMode};
use reel_chunkstore::{ChunkStore, StoreConfig, StoreError, StreamId};
use worker::fill;

fn journaled() -> StoreConfig {
    StoreConfig {
        journal: true,
        // Small packs: several per stream, so reclaim has packs to rewrite and delete.
        pack_target: 256 << 10,
        ..StoreConfig::default()
    }
}

fn open(catalog: &Path, backend: &Arc<MemoryBackend>, config: StoreConfig) -> ChunkStore {
    let backend: Arc<dyn Backend> = backend.clone();
    ChunkStore::open(catalog, backend, config).unwrap()
}

fn read_all(store: &ChunkStore) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for (id, len) in store.streams().unwrap() {
        let s = store.open_stream(id).unwrap();
        let mut buf = vec![0u8; len as usize];
        s.read_at(0, &mut buf).unwrap();
        out.push((id.0, buf));
    }
    out
}

fn journal_keys(backend: &MemoryBackend) -> Vec<String> {
    backend
        .list("catalog/journal/")
        .unwrap()
        .into_iter()
        .map(|o| o.key.as_str().to_string())
        .collect()
}

/// Streams with records, truncation, deletion, sidecars, caller records and a reclaim: every
/// kind of catalog change. Returns after a final sync.
fn workload(store: &ChunkStore, round: u64) {
    for s in 0..4u64 {
        let stream = store.open_stream(StreamId(s)).unwrap();
        for r in 0..30u64 {
            // Repeats across streams and rounds, so dedup references earlier packs.
            let key = (s * 7 + r + round * 3) % 50;
            stream
                .append_record(&fill(key, 8_000 + (key as usize * 997) % 60_000))
                .unwrap();
        }
        stream.set_sidecar(round, Some(format!("map {s} {round}").into_bytes()));
        if s == 1 {
            stream.truncate(stream.len() / 2 + 123).unwrap();
        }
        stream.sync().unwrap();
    }
    store
        .put_record(format!("cartridge/R{round}").as_bytes(), Some(b"info"))
        .unwrap();
    store
        .put_records(&[
            (b"users/a".to_vec(), Some(vec![round as u8])),
            (b"cartridge/gone".to_vec(), None),
        ])
        .unwrap();
    if round % 2 == 1 {
        store.delete_stream(StreamId(3)).unwrap();
        store.reclaim(0.9, &mut |_, _| {}).unwrap();
    }
    store.sync().unwrap();
}

#[test]
fn a_fresh_catalog_is_rebuilt_from_the_back_end_alone() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let (fingerprint, contents, seq) = {
        let store = open(&dir.path().join("a"), &backend, journaled());
        for round in 0..3 {
            workload(&store, round);
        }
        (
            store.catalog_fingerprint().unwrap(),
            read_all(&store),
            store.journal_seq(),
        )
    };
    assert!(seq >= 3, "a journal object per sync: {seq}");
    assert_eq!(journal_keys(&backend).len() as u64, seq);

    let mut reports = Vec::new();
    let recovered = ChunkStore::open_with_progress(
        &dir.path().join("fresh"),
        backend.clone(),
        journaled(),
        &mut |p| reports.push(p),
    )
    .unwrap();
    assert_same_store(&recovered, fingerprint, &contents);
    // Recovery replays 1..=seq, then the opening's own pack-id floor is journal seq + 1.
    assert_eq!(recovered.journal_seq(), seq + 1);
    let last = reports.last().expect("progress was reported");
    assert_eq!((last.done, last.total), (seq, seq));
    assert_eq!(
        recovered.record(b"cartridge/R2").unwrap().as_deref(),
        Some(&b"info"[..])
    );
    let stream = recovered.open_stream(StreamId(0)).unwrap();
    assert_eq!(stream.sidecar(2).unwrap(), Some(b"map 0 2".to_vec()));
}

/// A catalog rebuilt from the journal cuts with the chunker its store was created with, not
/// the one the recovering node would give a new store.
#[test]
fn a_recovered_catalog_keeps_the_stores_chunker() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let custom = reel_chunkstore::ChunkerParams::with_avg(4096);
    {
        let store = open(
            &dir.path().join("a"),
            &backend,
            StoreConfig {
                chunker: custom,
                ..journaled()
            },
        );
        workload(&store, 0);
    }
    let recovered = open(&dir.path().join("fresh"), &backend, journaled());
    assert_eq!(recovered.chunker(), custom);
}

/// Ops between two synchronising points go out in pieces; a group never ended (the node
/// stopped between two synchronising points) is skipped by recovery, which gives the catalog
/// as of the last synchronising point, and the next group written after it is replayed.
#[test]
fn a_catalog_written_in_pieces_recovers_to_its_last_synchronising_point() {
    let config = || StoreConfig {
        journal_piece_bytes: 2048,
        ..journaled()
    };
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let (fingerprint, contents, synced_keys) = {
        let store = open(&dir.path().join("a"), &backend, config());
        for round in 0..2 {
            workload(&store, round);
        }
        let synced = (
            store.catalog_fingerprint().unwrap(),
            read_all(&store),
            journal_keys(&backend).len(),
        );
        // Appended, never synced: pieces of a group that never ends.
        let stream = store.open_stream(StreamId(0)).unwrap();
        for r in 0..200u64 {
            stream.append_record(&fill(1000 + r, 20_000)).unwrap();
        }
        stream.flush().unwrap();
        // A crash: a clean close would sync (and end the group).
        std::mem::forget(stream);
        std::mem::forget(store);
        synced
    };
    let pieces_after = journal_keys(&backend).len();
    assert!(
        pieces_after > synced_keys + 2,
        "unsynced ops went out in pieces: {synced_keys} objects at the last sync, {pieces_after} now"
    );
    let recovered = open(&dir.path().join("fresh"), &backend, config());
    assert_same_store(&recovered, fingerprint, &contents);
    // Numbers taken by the abandoned pieces stay taken: the next object follows them.
    assert!(recovered.journal_seq() > pieces_after as u64);

    // A new group after the abandoned one is replayed, the abandoned one still skipped.
    workload(&recovered, 2);
    let (fingerprint, contents) = (
        recovered.catalog_fingerprint().unwrap(),
        read_all(&recovered),
    );
    drop(recovered);
    let again = open(&dir.path().join("again"), &backend, config());
    assert_same_store(&again, fingerprint, &contents);
}

/// `store` holds exactly the catalog and stream contents given, and scrubs clean.
fn assert_same_store(store: &ChunkStore, fingerprint: [u8; 32], contents: &[(u64, Vec<u8>)]) {
    assert_eq!(read_all(store), contents);
    assert_eq!(store.catalog_fingerprint().unwrap(), fingerprint);
    assert!(store.scrub(&mut |_, _| {}).unwrap().is_clean());
}

#[test]
fn a_catalog_behind_the_back_end_catches_up_on_open() {
    // As after a crash between a journal put and the local commit that records it.
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    let old = dir.path().join("old");
    let (fingerprint, contents) = {
        let store = open(&catalog, &backend, journaled());
        workload(&store, 0);
        drop(store);
        copy_dir(&catalog, &old);
        let store = open(&catalog, &backend, journaled());
        workload(&store, 1);
        workload(&store, 2);
        (store.catalog_fingerprint().unwrap(), read_all(&store))
    };
    let caught_up = open(&old, &backend, journaled());
    assert_eq!(caught_up.catalog_fingerprint().unwrap(), fingerprint);
    assert_eq!(read_all(&caught_up), contents);
}

#[test]
fn unsynced_changes_never_reach_the_journal() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let synced = {
        let store = open(&dir.path().join("a"), &backend, journaled());
        workload(&store, 0);
        let synced = read_all(&store);
        let s = store.open_stream(StreamId(9)).unwrap();
        s.append_record(&fill(4242, 100_000)).unwrap();
        s.flush().unwrap();
        store.put_record(b"late", Some(b"x")).unwrap();
        store.abandon();
        synced
    };
    let recovered = open(&dir.path().join("fresh"), &backend, journaled());
    assert_eq!(read_all(&recovered), synced);
    assert_eq!(recovered.record(b"late").unwrap(), None);
}

#[test]
fn a_missing_journal_object_is_refused_by_name() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir.path().join("a"), &backend, journaled());
        workload(&store, 0);
        workload(&store, 1);
    }
    let keys = journal_keys(&backend);
    assert!(keys.len() >= 3, "{keys:?}");
    backend.delete(&Key::new(keys[1].clone()).unwrap()).unwrap();
    let backend: Arc<dyn Backend> = backend;
    let err = ChunkStore::open(&dir.path().join("fresh"), backend, journaled())
        .err()
        .expect("a gap in the journal is refused");
    assert!(
        matches!(&err, StoreError::Corrupt(why) if why.contains(&keys[1])),
        "{err}"
    );
}

#[test]
fn a_damaged_journal_object_is_refused() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir.path().join("a"), &backend, journaled());
        workload(&store, 0);
    }
    let key = Key::new(journal_keys(&backend)[0].clone()).unwrap();
    let mut bytes = backend.get(&key).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    backend.put(&key, &bytes, PutMode::Overwrite).unwrap();
    let backend: Arc<dyn Backend> = backend;
    let err = ChunkStore::open(&dir.path().join("fresh"), backend, journaled())
        .err()
        .expect("a damaged journal is refused");
    assert!(
        matches!(&err, StoreError::Corrupt(why) if why.contains("checksum")),
        "{err}"
    );
}

#[test]
fn a_second_writer_on_the_same_journal_is_fenced() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let a = open(&dir.path().join("a"), &backend, journaled());
    workload(&a, 0);
    // B takes over from the bucket while A still runs (a stale node): B's opening already
    // claims the next journal object (its pack-id floor), so A's next one is refused.
    let b = open(&dir.path().join("b"), &backend, journaled());
    assert_eq!(b.journal_seq(), a.journal_seq() + 1);
    b.put_record(b"owner", Some(b"b")).unwrap();
    b.sync().unwrap();
    a.put_record(b"owner", Some(b"a")).unwrap();
    let err = a.sync().expect_err("the stale writer loses the race");
    assert!(
        matches!(&err, StoreError::Stopped(why) if why.contains("another node")),
        "{err}"
    );
    // It stays stopped: nothing more from A reaches the back end.
    assert!(a.put_record(b"x", Some(b"y")).is_err());
    drop(a);
    drop(b);
    let c = open(&dir.path().join("c"), &backend, journaled());
    assert_eq!(c.record(b"owner").unwrap().as_deref(), Some(&b"b"[..]));
}

#[test]
fn a_store_that_starts_journaling_writes_its_whole_catalog_first() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    {
        let store = open(&catalog, &backend, StoreConfig::default());
        workload(&store, 0);
        assert!(
            journal_keys(&backend).is_empty(),
            "no journal when it is off"
        );
    }
    let (fingerprint, contents) = {
        let store = open(&catalog, &backend, journaled());
        assert_eq!(
            store.journal_seq(),
            2,
            "the base journal, then the pack-id floor"
        );
        workload(&store, 1);
        (store.catalog_fingerprint().unwrap(), read_all(&store))
    };
    let recovered = open(&dir.path().join("fresh"), &backend, journaled());
    assert_eq!(recovered.catalog_fingerprint().unwrap(), fingerprint);
    assert_eq!(read_all(&recovered), contents);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn pack_ids(backend: &MemoryBackend) -> Vec<u64> {
    backend
        .list("packs/")
        .unwrap()
        .into_iter()
        .filter_map(|o| {
            let hex = o
                .key
                .as_str()
                .strip_prefix("packs/")?
                .strip_suffix(".pack")?;
            u64::from_str_radix(hex, 16).ok()
        })
        .collect()
}

/// Writes a stream, deletes it and reclaims, so the back end holds no pack; returns the ids
/// the packs had.
fn write_and_forget(store: &ChunkStore, backend: &MemoryBackend, key: u64) -> Vec<u64> {
    let stream = store.open_stream(StreamId(key)).unwrap();
    for r in 0..20 {
        stream.append_record(&fill(key * 100 + r, 50_000)).unwrap();
    }
    stream.sync().unwrap();
    let used = pack_ids(backend);
    assert!(!used.is_empty());
    drop(stream);
    store.delete_stream(StreamId(key)).unwrap();
    store.reclaim(0.5, &mut |_, _| {}).unwrap();
    store.sync().unwrap();
    assert_eq!(
        pack_ids(backend),
        Vec::<u64>::new(),
        "reclaim deleted every pack"
    );
    used
}

/// A pack key is never used twice, even when every pack was deleted: a killed process's
/// upload that lands after the next opening listed the bucket must find an orphan of its own
/// id, never take a key the new opening writes (which fenced the node in the crash test).
/// The floor travels in the journal, so a catalog rebuilt from the bucket keeps it too.
#[test]
fn pack_ids_are_never_reused_across_openings_or_recovery() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let mut used = Vec::new();
    for (round, catalog) in ["a", "a", "fresh", "a-again"].iter().enumerate() {
        // "fresh" rebuilds from the journal alone; "a-again" after it, from the bucket too.
        let store = open(&dir.path().join(catalog), &backend, journaled());
        let ids = write_and_forget(&store, &backend, round as u64 + 1);
        let newest_before = used.iter().copied().max().unwrap_or(0);
        assert!(
            ids.iter().all(|&id| id > newest_before),
            "opening {round} ({catalog}) reused a pack id: {ids:?} vs up to {newest_before}"
        );
        used.extend(ids);
    }
    // Without a journal (the local back end), the floor lives in the catalog alone.
    let local = tempfile::tempdir().unwrap();
    let backend = Arc::new(MemoryBackend::new());
    let first = {
        let store = open(local.path(), &backend, StoreConfig::default());
        write_and_forget(&store, &backend, 1)
    };
    let store = open(local.path(), &backend, StoreConfig::default());
    let second = write_and_forget(&store, &backend, 2);
    assert!(
        second.iter().min() > first.iter().max(),
        "{first:?} then {second:?}"
    );
}

fn checkpoint_keys(backend: &MemoryBackend) -> Vec<String> {
    backend
        .list("catalog/checkpoint/")
        .unwrap()
        .into_iter()
        .map(|o| o.key.as_str().to_string())
        .collect()
}

fn journal_seqs(backend: &MemoryBackend) -> Vec<u64> {
    journal_keys(backend)
        .iter()
        .map(|k| {
            let hex = k
                .strip_prefix("catalog/journal/")
                .and_then(|k| k.strip_suffix(".jrnl"))
                .unwrap();
            u64::from_str_radix(hex, 16).unwrap()
        })
        .collect()
}

/// Checkpoints by hand only, in parts of 4 KiB of rows.
fn checkpointed() -> StoreConfig {
    StoreConfig {
        checkpoint_min_bytes: u64::MAX,
        checkpoint_part_bytes: 4 << 10,
        ..journaled()
    }
}

#[test]
fn a_checkpoint_replaces_the_journal_it_covers_and_recovery_starts_from_it() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let (fingerprint, contents, report, status) = {
        let store = open(&dir.path().join("a"), &backend, checkpointed());
        for round in 0..3 {
            workload(&store, round);
        }
        let report = store
            .checkpoint()
            .unwrap()
            .expect("a checkpoint was written");
        assert!(report.parts > 1, "several parts: {report:?}");
        assert!(report.deleted_objects >= 3, "{report:?}");
        // Every journal object it covers is gone; what is written after it is journaled.
        assert!(
            journal_seqs(&backend).is_empty(),
            "{:?}",
            journal_keys(&backend)
        );
        assert_eq!(
            store.checkpoint().unwrap(),
            None,
            "nothing new to checkpoint"
        );
        workload(&store, 3);
        assert!(journal_seqs(&backend).iter().all(|&s| s > report.seq));
        assert!(!journal_seqs(&backend).is_empty());
        (
            store.catalog_fingerprint().unwrap(),
            read_all(&store),
            report,
            store.journal_status(),
        )
    };
    assert_eq!(status.checkpoint_seq, report.seq);
    assert_eq!(
        status.objects_since_checkpoint,
        journal_seqs(&backend).len() as u64
    );
    let parts = checkpoint_keys(&backend)
        .iter()
        .filter(|k| k.ends_with(".part"))
        .count();
    assert_eq!(parts as u32, report.parts);

    let mut reports = Vec::new();
    let recovered = ChunkStore::open_with_progress(
        &dir.path().join("fresh"),
        backend.clone(),
        checkpointed(),
        &mut |p| reports.push(p),
    )
    .unwrap();
    assert_same_store(&recovered, fingerprint, &contents);
    let last = reports.last().expect("progress was reported");
    assert_eq!(last.done, last.total);
    assert_eq!(
        last.total,
        u64::from(report.parts) + journal_seqs(&backend).len() as u64 - 1,
        "the checkpoint's parts and the journal after it (not the opening's own object)"
    );
    assert_eq!(recovered.journal_status().checkpoint_seq, report.seq);
    // The next checkpoint replaces this one.
    workload(&recovered, 4);
    let second = recovered.checkpoint().unwrap().unwrap();
    assert!(second.seq > report.seq);
    assert!(
        checkpoint_keys(&backend)
            .iter()
            .all(|k| k.contains(&format!("{:016x}", second.seq))),
        "older checkpoints are deleted: {:?}",
        checkpoint_keys(&backend)
    );
}

#[test]
fn a_catalog_behind_a_checkpoint_is_rebuilt_from_it_without_its_stale_rows() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node");
    let stale = dir.path().join("stale");
    {
        let store = open(&node, &backend, checkpointed());
        workload(&store, 0);
        workload(&store, 1);
    }
    copy_dir(&node, &stale);
    let (fingerprint, contents) = {
        let store = open(&node, &backend, checkpointed());
        // Deletes and reclaims rows the stale copy still has.
        for round in 2..5 {
            workload(&store, round);
        }
        store.delete_stream(StreamId(0)).unwrap();
        store.sync().unwrap();
        store.checkpoint().unwrap().unwrap();
        (store.catalog_fingerprint().unwrap(), read_all(&store))
    };
    // The stale copy's next journal object is gone: only the checkpoint can bring it up.
    let caught_up = open(&stale, &backend, checkpointed());
    assert_same_store(&caught_up, fingerprint, &contents);
}

/// Fails reads of checkpoint parts after `budget` of them, as a node killed mid-restore.
struct FailingParts {
    inner: Arc<MemoryBackend>,
    budget: std::sync::atomic::AtomicI64,
}

impl Backend for FailingParts {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> reel_backend::Result<()> {
        self.inner.put(key, data, mode)
    }
    fn get(&self, key: &Key) -> reel_backend::Result<Vec<u8>> {
        if key.as_str().ends_with(".part")
            && self
                .budget
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
                <= 0
        {
            return Err(reel_backend::BackendError::io(
                key,
                std::io::Error::other("injected: killed mid-restore"),
            ));
        }
        self.inner.get(key)
    }
    fn get_range(&self, key: &Key, range: std::ops::Range<u64>) -> reel_backend::Result<Vec<u8>> {
        self.inner.get_range(key, range)
    }
    fn delete(&self, key: &Key) -> reel_backend::Result<()> {
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> reel_backend::Result<Vec<reel_backend::ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn describe(&self) -> String {
        "a back end that fails checkpoint reads".into()
    }
}

#[test]
fn an_interrupted_restore_resumes_where_it_stopped() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let (fingerprint, contents, parts) = {
        let store = open(&dir.path().join("a"), &backend, checkpointed());
        for round in 0..3 {
            workload(&store, round);
        }
        let report = store.checkpoint().unwrap().unwrap();
        workload(&store, 3);
        (
            store.catalog_fingerprint().unwrap(),
            read_all(&store),
            report.parts,
        )
    };
    assert!(parts >= 3, "{parts} parts");
    let fresh = dir.path().join("fresh");
    let failing = Arc::new(FailingParts {
        inner: backend.clone(),
        budget: 2.into(),
    });
    let err = ChunkStore::open(&fresh, failing.clone(), checkpointed())
        .err()
        .expect("the restore fails after two parts");
    assert!(err.to_string().contains("killed mid-restore"), "{err}");
    // Resumes at part 2: it needs only the parts it has not applied.
    failing
        .budget
        .store(i64::from(parts) - 2, std::sync::atomic::Ordering::SeqCst);
    let mut reports = Vec::new();
    let store =
        ChunkStore::open_with_progress(&fresh, failing, checkpointed(), &mut |p| reports.push(p))
            .unwrap();
    assert_same_store(&store, fingerprint, &contents);
}

#[test]
fn checkpoints_are_written_on_their_own_once_the_journal_weighs_enough() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let config = || StoreConfig {
        // Every journal object weighs more than this: a checkpoint after each durable commit.
        checkpoint_min_bytes: 1,
        ..journaled()
    };
    let (fingerprint, contents, seq) = {
        let store = open(&dir.path().join("a"), &backend, config());
        for round in 0..4 {
            workload(&store, round);
        }
        // The checkpoint thread runs behind the commits: wait for it to catch up.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while store.journal_status().checkpoint_seq == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint was written"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (
            store.catalog_fingerprint().unwrap(),
            read_all(&store),
            store.journal_seq(),
        )
    };
    assert!(
        (journal_seqs(&backend).len() as u64) < seq,
        "checkpoints deleted journal objects: {} of {seq} left",
        journal_seqs(&backend).len()
    );
    assert!(
        checkpoint_keys(&backend)
            .iter()
            .any(|k| k.ends_with(".ckpt"))
    );
    let recovered = open(&dir.path().join("fresh"), &backend, config());
    assert_same_store(&recovered, fingerprint, &contents);
}

#[test]
fn a_local_store_refuses_to_checkpoint() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &backend, StoreConfig::default());
    let err = store.checkpoint().unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
}

/// Runs `compact` (once) just before the first read of a journal object: another node
/// checkpointing, and deleting the journal it covers, while this one recovers from the listing
/// it took before.
struct CompactsUnderTheReader {
    inner: Arc<MemoryBackend>,
    compact: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl CompactsUnderTheReader {
    fn before_read(&self, key: &Key) {
        if key.as_str().starts_with("catalog/journal/") {
            let compact = self.compact.lock().unwrap().take();
            if let Some(compact) = compact {
                compact();
            }
        }
    }
}

impl Backend for CompactsUnderTheReader {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> reel_backend::Result<()> {
        self.inner.put(key, data, mode)
    }
    fn get(&self, key: &Key) -> reel_backend::Result<Vec<u8>> {
        self.before_read(key);
        self.inner.get(key)
    }
    fn get_range(&self, key: &Key, range: std::ops::Range<u64>) -> reel_backend::Result<Vec<u8>> {
        self.before_read(key);
        self.inner.get_range(key, range)
    }
    fn delete(&self, key: &Key) -> reel_backend::Result<()> {
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> reel_backend::Result<Vec<reel_backend::ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn describe(&self) -> String {
        "a bucket another node compacts".into()
    }
}

#[test]
fn a_recovery_whose_journal_is_compacted_under_it_lists_again_and_restores_the_checkpoint() {
    let backend = Arc::new(MemoryBackend::new());
    let dir = tempfile::tempdir().unwrap();
    let node = open(&dir.path().join("node"), &backend, checkpointed());
    for round in 0..3 {
        workload(&node, round);
    }
    let (fingerprint, contents) = (node.catalog_fingerprint().unwrap(), read_all(&node));
    let listed_before = journal_seqs(&backend);
    assert!(listed_before.len() >= 3, "{listed_before:?}");
    let compacted = Arc::new(std::sync::Mutex::new(None));
    let report_slot = Arc::clone(&compacted);
    let racing = Arc::new(CompactsUnderTheReader {
        inner: backend.clone(),
        compact: std::sync::Mutex::new(Some(Box::new(move || {
            *report_slot.lock().unwrap() = Some(node.checkpoint().unwrap().unwrap());
            drop(node);
        }))),
    });
    let recovered = ChunkStore::open(&dir.path().join("fresh"), racing, checkpointed())
        .expect("the recovery lists the bucket again and restores the new checkpoint");
    let report = compacted
        .lock()
        .unwrap()
        .take()
        .expect("the other node compacted during the recovery");
    assert!(
        journal_seqs(&backend).iter().all(|&s| s > report.seq),
        "the journal the recovery listed first is gone: {:?}",
        journal_keys(&backend)
    );
    assert_eq!(recovered.journal_status().checkpoint_seq, report.seq);
    assert_same_store(&recovered, fingerprint, &contents);
}
