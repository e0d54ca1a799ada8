//! Cartridge catalog: create, list, mount, write, persist, delete.

use std::sync::Arc;

use reel_backend::MemoryBackend;
use reel_chunkstore::{ChunkStore, StoreConfig};
use reel_library::{CartridgeError, Cartridges};
use reel_media::{Barcode, CartridgeInfo, MediaType, ReadOutcome, UnixTime};

fn catalog() -> (tempfile::TempDir, Cartridges) {
    let dir = tempfile::tempdir().unwrap();
    let store = ChunkStore::open(
        dir.path(),
        Arc::new(MemoryBackend::new()),
        StoreConfig::default(),
    )
    .unwrap();
    (dir, Cartridges::new(store))
}

fn info(barcode: &str, media: MediaType) -> CartridgeInfo {
    CartridgeInfo::new(
        Barcode::new(barcode).unwrap(),
        media,
        UnixTime(1_700_000_000),
    )
}

#[test]
fn cartridges_are_created_once_listed_mounted_and_deleted() {
    let (_dir, carts) = catalog();
    for n in 1..=3 {
        carts
            .create(&info(&format!("REL{n:03}L9"), MediaType::Lto9))
            .unwrap();
    }
    assert!(matches!(
        carts.create(&info("REL002L9", MediaType::Lto9)),
        Err(CartridgeError::Exists(_))
    ));
    let barcodes: Vec<String> = carts
        .list()
        .unwrap()
        .iter()
        .map(|(_, i)| i.barcode().as_str().to_string())
        .collect();
    assert_eq!(barcodes, ["REL001L9", "REL002L9", "REL003L9"]);

    let mut c = carts.mount("REL002L9").unwrap();
    c.load(UnixTime(1_700_000_100)).unwrap();
    c.write_record(b"hello tape").unwrap();
    c.write_filemarks(1).unwrap();
    c.rewind().unwrap();
    carts.save(&c).unwrap();
    carts.store().sync().unwrap();
    drop(c);

    let mut c = carts.mount("REL002L9").unwrap();
    assert_eq!(c.load_count(), 1, "load count persisted");
    c.load(UnixTime(1_700_000_200)).unwrap();
    let mut buf = Vec::new();
    assert!(matches!(
        c.read(100, &mut buf).unwrap(),
        ReadOutcome::Record { data_len: 10, .. }
    ));
    assert_eq!(buf, b"hello tape");
    assert!(matches!(
        c.read(100, &mut buf).unwrap(),
        ReadOutcome::Filemark
    ));
    drop(c);

    carts.delete("REL002L9").unwrap();
    assert!(matches!(
        carts.mount("REL002L9"),
        Err(CartridgeError::NotFound(_))
    ));
    assert_eq!(carts.list().unwrap().len(), 2);
}

#[test]
fn worm_cartridges_cannot_be_deleted() {
    let (_dir, carts) = catalog();
    carts
        .create(&info("WRM001LZ", MediaType::Lto9Worm))
        .unwrap();
    assert!(matches!(
        carts.delete("WRM001LZ"),
        Err(CartridgeError::Worm(_))
    ));
}
