//! The archive tier on a real store and a real directory as the archive location: round trip,
//! damage refused, and a crash simulated at every step of both jobs.

use std::path::Path;
use std::sync::Arc;

use reel_backend::{Backend, LocalBackend};
use reel_chunkstore::{ChunkStore, StoreConfig};
use reel_media::{Barcode, CartridgeInfo, MediaType, ReadOutcome, UnixTime};

use super::*;

const BARCODE: &str = "ARC001L9";
const OTHER: &str = "ARC002L9";

fn open(dir: &Path) -> Cartridges {
    let objects = LocalBackend::open(&dir.join("objects")).unwrap();
    let store = ChunkStore::open(
        &dir.join("catalog"),
        Arc::new(objects),
        StoreConfig::default(),
    )
    .unwrap();
    Cartridges::new(store)
}

fn location(dir: &Path) -> Arc<dyn Backend> {
    Arc::new(LocalBackend::open(&dir.join("archive")).unwrap())
}

/// Record `i`: sizes vary, and half the content is shared with the other cartridge (dedup).
fn record(i: u64) -> Vec<u8> {
    let len = 1 + (i as usize * 977) % 5000;
    (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect()
}

/// What a cartridge holds: records and filemarks in tape order.
#[derive(Debug, PartialEq)]
enum Obj {
    Record(Vec<u8>),
    /// A drive-encrypted record's sealed form (kept and restored as it is).
    Encrypted(Vec<u8>),
    Filemark,
}

fn layout() -> Vec<Obj> {
    let mut out = Vec::new();
    for i in 0..40u64 {
        out.push(if i % 5 == 3 {
            Obj::Encrypted(record(i))
        } else {
            Obj::Record(record(i))
        });
        if i % 7 == 6 {
            out.push(Obj::Filemark);
        }
        if i == 20 {
            out.push(Obj::Filemark);
            out.push(Obj::Filemark);
        }
    }
    out
}

fn create_and_write(carts: &Cartridges, barcode: &str) -> CartridgeInfo {
    let info = CartridgeInfo::new(
        Barcode::new(barcode).unwrap(),
        MediaType::Lto9,
        UnixTime(1_700_000_000),
    );
    carts.create(&info).unwrap();
    let mut c = carts.mount(barcode).unwrap();
    c.load(UnixTime(1_700_000_001)).unwrap();
    for o in layout() {
        match o {
            Obj::Record(d) => {
                c.write_record(&d).unwrap();
            }
            Obj::Encrypted(d) => {
                c.write_encrypted_record(&d).unwrap();
            }
            Obj::Filemark => {
                c.write_filemarks(1).unwrap();
            }
        }
    }
    c.sync().unwrap();
    carts.save(&c).unwrap();
    carts.store().sync().unwrap();
    c.info().clone()
}

fn read_all(carts: &Cartridges, barcode: &str) -> Vec<Obj> {
    let mut c = carts.mount(barcode).unwrap();
    c.load(UnixTime(1_700_000_002)).unwrap();
    c.rewind().unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        match c.read(1 << 20, &mut buf).unwrap() {
            ReadOutcome::Record { .. } => out.push(Obj::Record(buf.clone())),
            ReadOutcome::Filemark => out.push(Obj::Filemark),
            ReadOutcome::EndOfData => break,
            ReadOutcome::Encrypted { sealed_len } => {
                out.push(Obj::Encrypted(buf.clone()));
                c.finish_encrypted_read(sealed_len).unwrap();
            }
        }
    }
    out
}

fn streams_of(carts: &Cartridges, barcode: &str) -> usize {
    let (number, _) = carts.info(barcode).unwrap();
    carts
        .store()
        .streams()
        .unwrap()
        .iter()
        .filter(|(id, len)| crate::cartridge_of(*id) == number && *len > 0)
        .count()
}

fn keep_going(_: Progress) -> bool {
    true
}

/// Archives `barcode` from start to end (`now` for both steps); returns the generation.
fn archive_whole(archive: &Archive, barcode: &str, now: u64) -> u64 {
    let generation = archive.begin_archive(barcode, now).unwrap();
    archive.run_archive(barcode, now, &mut keep_going).unwrap();
    generation
}

/// Restores `barcode` from start to end.
fn restore_whole(archive: &Archive, barcode: &str) {
    archive.begin_restore(barcode).unwrap();
    archive.run_restore(barcode, &mut keep_going).unwrap();
}

/// A store with `BARCODE` written and an archive of small pieces on a directory.
fn written_store(dir: &Path) -> (Cartridges, Archive) {
    let carts = open(dir);
    create_and_write(&carts, BARCODE);
    let archive = Archive::new(carts.clone(), location(dir)).with_piece_size(4096);
    (carts, archive)
}

#[test]
fn archive_then_restore_brings_back_every_record_filemark_and_the_info() {
    let dir = tempfile::tempdir().unwrap();
    let carts = open(dir.path());
    let info = create_and_write(&carts, BARCODE);
    create_and_write(&carts, OTHER);
    let archive = Archive::new(carts.clone(), location(dir.path())).with_piece_size(4096);

    let generation = archive.begin_archive(BARCODE, 77).unwrap();
    assert_eq!(
        carts.archive_state(BARCODE).unwrap(),
        Some(ArchiveState::Archiving { generation })
    );
    let mut reports = Vec::new();
    let state = archive
        .run_archive(BARCODE, 1_700_000_100, &mut |p| {
            reports.push(p);
            true
        })
        .unwrap();
    let ArchiveState::Archived {
        data_bytes,
        image_bytes,
        ..
    } = state
    else {
        panic!("{state:?}")
    };
    let want_bytes: u64 = layout()
        .iter()
        .map(|o| match o {
            Obj::Record(d) | Obj::Encrypted(d) => d.len() as u64,
            Obj::Filemark => 0,
        })
        .sum();
    assert_eq!(data_bytes, want_bytes);
    assert!(image_bytes > data_bytes);
    // Many small pieces, all written then all checked.
    let objects = archive.location().list("").unwrap();
    assert!(objects.len() > 10, "{} objects", objects.len());
    assert!(reports.iter().any(|p| p.step == Step::Verifying));
    assert_eq!(reports.last().unwrap().step, Step::Dropping);
    // The data left the store; the identity stayed; the other cartridge is untouched.
    assert_eq!(streams_of(&carts, BARCODE), 0);
    assert_eq!(carts.info(BARCODE).unwrap().1, info);
    assert_eq!(carts.archive_state(BARCODE).unwrap(), Some(state));
    assert_eq!(read_all(&carts, OTHER), layout());
    // Not again.
    assert!(matches!(
        archive.begin_archive(BARCODE, 78),
        Err(ArchiveError::State {
            state: "archived",
            ..
        })
    ));

    archive.begin_restore(BARCODE).unwrap();
    archive.run_restore(BARCODE, &mut keep_going).unwrap();
    assert_eq!(carts.archive_state(BARCODE).unwrap(), None);
    assert_eq!(carts.info(BARCODE).unwrap().1, info);
    assert_eq!(read_all(&carts, BARCODE), layout());
    // The image is gone once the store holds the data again.
    assert!(archive.location().list("").unwrap().is_empty());
    assert!(matches!(
        archive.begin_restore(BARCODE),
        Err(ArchiveError::State {
            state: "available",
            ..
        })
    ));
}

#[test]
fn an_empty_cartridge_archives_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let carts = open(dir.path());
    let info = CartridgeInfo::new(Barcode::new(BARCODE).unwrap(), MediaType::Lto9, UnixTime(1));
    carts.create(&info).unwrap();
    let archive = Archive::new(carts.clone(), location(dir.path()));
    archive.begin_archive(BARCODE, 1).unwrap();
    archive.run_archive(BARCODE, 2, &mut keep_going).unwrap();
    archive.begin_restore(BARCODE).unwrap();
    archive.run_restore(BARCODE, &mut keep_going).unwrap();
    assert_eq!(read_all(&carts, BARCODE), vec![]);
}

#[test]
fn a_damaged_piece_is_refused_and_the_cartridge_stays_restoring() {
    let dir = tempfile::tempdir().unwrap();
    let carts = open(dir.path());
    create_and_write(&carts, BARCODE);
    let archive = Archive::new(carts.clone(), location(dir.path())).with_piece_size(4096);
    archive.begin_archive(BARCODE, 1).unwrap();
    archive.run_archive(BARCODE, 2, &mut keep_going).unwrap();
    let piece = archive
        .location()
        .list("")
        .unwrap()
        .into_iter()
        .find(|o| o.key.as_str().ends_with(".00000003.piece"))
        .unwrap();
    let path = dir.path().join("archive").join(piece.key.as_str());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    archive.begin_restore(BARCODE).unwrap();
    let err = archive.run_restore(BARCODE, &mut keep_going).unwrap_err();
    assert!(
        matches!(
            &err,
            ArchiveError::Image {
                source: ImageError::Checksum { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    assert!(matches!(
        carts.archive_state(BARCODE).unwrap(),
        Some(ArchiveState::Restoring { .. })
    ));
    // Repaired (here: the bit flipped back), the restore runs again from the start.
    bytes[100] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    archive.run_restore(BARCODE, &mut keep_going).unwrap();
    assert_eq!(read_all(&carts, BARCODE), layout());
}

#[test]
fn a_failing_archive_location_leaves_the_cartridge_available() {
    let dir = tempfile::tempdir().unwrap();
    let carts = open(dir.path());
    create_and_write(&carts, BARCODE);
    let crash = Arc::new(reel_backend::CrashBackend::new(
        LocalBackend::open(&dir.path().join("archive")).unwrap(),
    ));
    crash.arm_crash_after(5);
    let archive = Archive::new(carts.clone(), crash.clone()).with_piece_size(4096);
    archive.begin_archive(BARCODE, 1).unwrap();
    let err = archive
        .run_archive(BARCODE, 2, &mut keep_going)
        .unwrap_err();
    assert!(matches!(err, ArchiveError::Location(_)), "{err}");
    assert_eq!(carts.archive_state(BARCODE).unwrap(), None);
    assert_eq!(read_all(&carts, BARCODE), layout());
    // The location is back: a new attempt replaces the partial image.
    crash.reset();
    archive.begin_archive(BARCODE, 3).unwrap();
    archive.run_archive(BARCODE, 4, &mut keep_going).unwrap();
    archive.begin_restore(BARCODE).unwrap();
    archive.run_restore(BARCODE, &mut keep_going).unwrap();
    assert_eq!(read_all(&carts, BARCODE), layout());
}

/// Stops the job at its `stop_at`-th progress report as a crash would (with everything so far
/// made durable when `durable`, as a concurrent tape sync may do), reopens the store and runs
/// the start-up recovery: the cartridge must be available with its data, archived with a
/// restorable image, or restoring.
fn crash_during(stop_at: usize, durable: bool, restore: bool) -> Option<ArchiveState> {
    let dir = tempfile::tempdir().unwrap();
    {
        let carts = open(dir.path());
        create_and_write(&carts, BARCODE);
        let archive = Archive::new(carts.clone(), location(dir.path())).with_piece_size(8192);
        let mut calls = 0;
        let mut stop = |_: Progress| {
            calls += 1;
            calls < stop_at
        };
        archive.begin_archive(BARCODE, 10).unwrap();
        if restore {
            archive.run_archive(BARCODE, 11, &mut keep_going).unwrap();
            archive.begin_restore(BARCODE).unwrap();
            match archive.run_restore(BARCODE, &mut stop) {
                Err(ArchiveError::Interrupted) | Ok(()) => {}
                Err(e) => panic!("{e}"),
            }
        } else {
            match archive.run_archive(BARCODE, 11, &mut stop) {
                Err(ArchiveError::Interrupted) | Ok(_) => {}
                Err(e) => panic!("{e}"),
            }
        }
        if durable {
            carts.store().sync().unwrap();
        }
    }
    let carts = open(dir.path());
    Archive::recover(&carts).unwrap();
    let state = carts.archive_state(BARCODE).unwrap();
    let archive = Archive::new(carts.clone(), location(dir.path()));
    match state {
        None => assert_eq!(read_all(&carts, BARCODE), layout()),
        Some(ArchiveState::Archived { .. }) => {
            assert_eq!(
                streams_of(&carts, BARCODE),
                0,
                "archived: the store's copy is gone"
            );
            archive.begin_restore(BARCODE).unwrap();
            archive.run_restore(BARCODE, &mut keep_going).unwrap();
            assert_eq!(read_all(&carts, BARCODE), layout());
        }
        Some(ArchiveState::Restoring { .. }) => {
            archive.begin_restore(BARCODE).unwrap();
            archive.run_restore(BARCODE, &mut keep_going).unwrap();
            assert_eq!(read_all(&carts, BARCODE), layout());
        }
        Some(
            s @ (ArchiveState::Archiving { .. }
            | ArchiveState::Sharing { .. }
            | ArchiveState::Shared { .. }
            | ArchiveState::Adopting { .. }),
        ) => panic!("recovery left {s:?}"),
    }
    // Whatever the crash interrupted, no image is left behind once the purge has run: an
    // undone archive's partial image and a restored one's are both noted for it.
    archive.purge_images().unwrap();
    assert_eq!(carts.archive_state(BARCODE).unwrap(), None);
    assert!(
        archive.location().list("").unwrap().is_empty(),
        "an image outlived its cartridge's state (stop at {stop_at}, durable {durable})"
    );
    assert!(carts.images_to_purge().unwrap().is_empty());
    state
}

#[test]
fn a_crash_at_any_step_of_an_archive_leaves_the_old_or_the_new_state_with_the_data() {
    let mut seen = std::collections::BTreeSet::new();
    for stop_at in 1..40 {
        for durable in [false, true] {
            let state = crash_during(stop_at, durable, false);
            seen.insert(state.map_or("available", |s| s.name()));
        }
    }
    // Both outcomes happen: before and after the commit.
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        vec!["archived", "available"]
    );
}

#[test]
fn a_crash_at_any_step_of_a_restore_can_be_restored_again() {
    let mut seen = std::collections::BTreeSet::new();
    for stop_at in 1..30 {
        for durable in [false, true] {
            let state = crash_during(stop_at, durable, true);
            seen.insert(state.map_or("available", |s| s.name()));
        }
    }
    assert!(
        seen.contains("restoring") && seen.contains("available"),
        "{seen:?}"
    );
}

/// The keys of the objects in the archive location.
fn objects(archive: &Archive) -> Vec<String> {
    archive
        .location()
        .list("")
        .unwrap()
        .into_iter()
        .map(|o| o.key.as_str().to_string())
        .collect()
}

#[test]
fn an_archived_cartridge_is_deleted_with_its_image_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (generation, others) = {
        let carts = open(dir.path());
        create_and_write(&carts, BARCODE);
        create_and_write(&carts, OTHER);
        let archive = Archive::new(carts.clone(), location(dir.path())).with_piece_size(4096);
        let mut generations = Vec::new();
        for b in [BARCODE, OTHER] {
            generations.push(archive_whole(&archive, b, 50));
        }
        let others: Vec<String> = objects(&archive)
            .into_iter()
            .filter(|k| k.starts_with(OTHER))
            .collect();
        assert!(others.len() > 5);

        assert_eq!(carts.delete(BARCODE).unwrap(), Some(generations[0]));
        assert!(matches!(
            carts.info(BARCODE),
            Err(CartridgeError::NotFound(_))
        ));
        assert_eq!(carts.archive_state(BARCODE).unwrap(), None);
        // Deleted from the catalog at once; the image goes with the purge (here: after a
        // restart, as an offline `reel cartridges delete` leaves it).
        assert!(objects(&archive).iter().any(|k| k.starts_with(BARCODE)));
        (generations[0], others)
    };
    let carts = open(dir.path());
    assert_eq!(
        carts.images_to_purge().unwrap(),
        vec![(BARCODE.to_string(), generation)]
    );
    // Start-up recovery has nothing to say about a cartridge that is gone.
    assert_eq!(Archive::recover(&carts).unwrap(), vec![]);
    let archive = Archive::new(carts.clone(), location(dir.path()));
    let done = archive.purge_images().unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].0.as_str(), done[0].1), (BARCODE, generation));
    assert!(done[0].2 > 5, "{done:?}");
    assert_eq!(objects(&archive), others, "only its own image went");
    assert!(carts.images_to_purge().unwrap().is_empty());
    // The other one is untouched: it restores and reads back.
    restore_whole(&archive, OTHER);
    assert_eq!(read_all(&carts, OTHER), layout());
    assert!(objects(&archive).is_empty());
    // A new cartridge may take the barcode again.
    create_and_write(&carts, BARCODE);
    assert_eq!(read_all(&carts, BARCODE), layout());
}

#[test]
fn objects_this_store_did_not_write_are_never_deleted() {
    // Another node sharing the archive location keeps an image under the same barcode.
    let dir = tempfile::tempdir().unwrap();
    let (carts, archive) = written_store(dir.path());
    let theirs = Key::new(manifest_key(BARCODE, 0xabc)).unwrap();
    archive
        .location()
        .put(&theirs, b"another node's", PutMode::Create)
        .unwrap();
    let generation = archive_whole(&archive, BARCODE, 7);
    restore_whole(&archive, BARCODE);
    archive_whole(&archive, BARCODE, generation);
    carts.delete(BARCODE).unwrap();
    archive.purge_images().unwrap();
    assert_eq!(objects(&archive), vec![theirs.as_str().to_string()]);
}

#[test]
fn a_cartridge_a_job_has_cannot_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (carts, archive) = written_store(dir.path());
    archive.begin_archive(BARCODE, 1).unwrap();
    let err = carts.delete(BARCODE).unwrap_err();
    assert!(
        matches!(
            err,
            CartridgeError::Busy {
                state: "archiving",
                ..
            }
        ),
        "{err}"
    );
    archive.run_archive(BARCODE, 2, &mut keep_going).unwrap();
    archive.begin_restore(BARCODE).unwrap();
    let err = carts.delete(BARCODE).unwrap_err();
    assert!(err.to_string().contains("is restoring"), "{err}");
    archive.run_restore(BARCODE, &mut keep_going).unwrap();
    assert_eq!(read_all(&carts, BARCODE), layout());
}

#[test]
fn an_image_left_by_an_interrupted_clean_up_is_purged_and_never_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let (carts, archive) = written_store(dir.path());
    let first = archive_whole(&archive, BARCODE, 100);
    archive.begin_restore(BARCODE).unwrap();
    // Stopped as the image's deletion begins, as a crash there would.
    let err = archive
        .run_restore(BARCODE, &mut |p| p.step != Step::Cleaning)
        .unwrap_err();
    assert!(matches!(err, ArchiveError::Interrupted), "{err}");
    assert_eq!(carts.archive_state(BARCODE).unwrap(), None);
    assert!(!objects(&archive).is_empty());
    assert_eq!(
        carts.images_to_purge().unwrap(),
        vec![(BARCODE.to_string(), first)]
    );
    // Archived again within the same second: the new image takes another generation, so the
    // pending purge of the old one cannot touch it.
    let second = archive.begin_archive(BARCODE, first).unwrap();
    assert_ne!(second, first);
    archive.run_archive(BARCODE, 102, &mut keep_going).unwrap();
    archive.purge_images().unwrap();
    assert!(carts.images_to_purge().unwrap().is_empty());
    assert!(!objects(&archive).is_empty());
    restore_whole(&archive, BARCODE);
    assert_eq!(read_all(&carts, BARCODE), layout());
    assert!(objects(&archive).is_empty());
}

#[test]
fn state_records_round_trip_and_refuse_garbage() {
    for s in [
        ArchiveState::Archiving { generation: 3 },
        ArchiveState::Archived {
            generation: u64::MAX,
            data_bytes: 1,
            image_bytes: 2,
            archived_at: 3,
        },
        ArchiveState::Restoring {
            generation: 9,
            data_bytes: 8,
        },
    ] {
        assert_eq!(ArchiveState::decode(&s.encode()), Ok(s));
    }
    assert!(ArchiveState::decode(&[1, 2, 3]).is_err());
    let mut bad = ArchiveState::Archiving { generation: 1 }.encode();
    bad[1] = 9;
    assert!(ArchiveState::decode(&bad).is_err());
    bad[0] = 2;
    assert!(ArchiveState::decode(&bad).is_err());
}
