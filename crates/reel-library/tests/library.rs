//! The library composition over a real chunk store: a library that uses (nearly) the whole
//! 16-bit element address space, reported in full by READ ELEMENT STATUS, and a drive in
//! BUFFERED MODE 0 whose writes are durable in the store when they complete.

use std::sync::Arc;
use std::time::Instant;

use reel_backend::MemoryBackend;
use reel_chunkstore::{ChunkStore, StoreConfig};
use reel_library::{BarcodeFilter, Cartridges, LibrarySpec, VirtualLibrary};
use reel_media::{Barcode, CartridgeInfo, MediaType, PartitionStore, UnixTime, Unsynced};
use reel_scsi::{Bytes, ItNexus, LunTable, Request, Response, Status, TaskAttribute};
use reel_smc::{ChangerModel, Layout};
use reel_ssc::DriveModel;

const SLOTS: u16 = 60_000;
/// Element descriptor with a primary volume tag (SMC-3 §6.10.3): 12 + 36 bytes.
const DESCRIPTOR: usize = 48;

fn library(slots: u16, drives: u16, cartridges: usize) -> (tempfile::TempDir, VirtualLibrary) {
    let dir = tempfile::tempdir().unwrap();
    let store = ChunkStore::open(
        dir.path(),
        Arc::new(MemoryBackend::new()),
        StoreConfig::default(),
    )
    .unwrap();
    let carts = Arc::new(Cartridges::new(store));
    for i in 0..cartridges {
        let barcode = Barcode::new(&format!("B{i:05}L9")).unwrap();
        carts
            .create(&CartridgeInfo::new(barcode, MediaType::Lto9, UnixTime(0)))
            .unwrap();
    }
    let spec = LibrarySpec {
        name: "iqn.2026-11.org.reel:big".into(),
        changer: ChangerModel::by_name("ibm-3584").unwrap(),
        drive: DriveModel::by_name("ibm-td9").unwrap(),
        layout: Layout {
            drives,
            slots,
            import_export: 32,
            magazines: None,
        },
        barcodes: BarcodeFilter::any(),
        physical: None,
        index: 0,
    };
    let mut libs = VirtualLibrary::open_all(carts, &[spec]).unwrap();
    (dir, libs.remove(0))
}

fn run(table: &LunTable, nexus: &ItNexus, lun: u64, cdb: &[u8], data_out: &[u8]) -> Response {
    table.execute(
        lun,
        Request {
            nexus,
            cdb,
            data_out: Bytes::copy_from_slice(data_out),
            data_in_len: u32::MAX,
            attribute: TaskAttribute::Simple,
        },
    )
}

/// Runs until GOOD, consuming the power-on unit attention.
fn good(table: &LunTable, nexus: &ItNexus, lun: u64, cdb: &[u8], data_out: &[u8]) -> Bytes {
    let mut r = run(table, nexus, lun, cdb, data_out);
    if r.status == Status::CheckCondition {
        r = run(table, nexus, lun, cdb, data_out);
    }
    assert_eq!(r.status, Status::Good, "{cdb:02x?}: {:02x?}", r.sense);
    r.data_in
}

/// READ ELEMENT STATUS (B8h) with VOLTAG.
fn res(element_type: u8, start: u16, count: u16, allocation: u32) -> [u8; 12] {
    let (s, n, a) = (
        start.to_be_bytes(),
        count.to_be_bytes(),
        allocation.to_be_bytes(),
    );
    [
        0xB8,
        0x10 | element_type,
        s[0],
        s[1],
        n[0],
        n[1],
        0,
        a[1],
        a[2],
        a[3],
        0,
        0,
    ]
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn be24(d: &[u8], at: usize) -> usize {
    usize::from(d[at]) << 16 | usize::from(d[at + 1]) << 8 | usize::from(d[at + 2])
}

#[test]
fn a_60000_slot_library_starts_and_reports_every_slot() {
    let cartridges = 600;
    let (_dir, lib) = library(SLOTS, 4, cartridges);
    let table = lib.lun_table();
    let nexus = ItNexus::new("iqn.test:host,i,0x000000000001", 1);

    // All storage elements (what `mtx status` asks for), as big an allocation as the CDB holds.
    let started = Instant::now();
    let d = good(&table, &nexus, 0, &res(2, 0, 0xFFFF, 0xFF_FFFF), &[]);
    let took = started.elapsed();
    // Generous: only catches pathological (per-element quadratic) work.
    assert!(took.as_secs() < 5, "READ ELEMENT STATUS took {took:?}");
    let body = usize::from(SLOTS) * DESCRIPTOR;
    assert_eq!(be16(&d, 0), 0x0401, "first element address reported");
    assert_eq!(be16(&d, 2), SLOTS, "number of elements available");
    assert_eq!(be24(&d, 5), 8 + body, "byte count of report available");
    assert_eq!(d.len(), 8 + 8 + body);
    // One storage element status page: VOLTAG, 48-byte descriptors.
    assert_eq!(
        (d[8], d[9] & 0x80, be16(&d, 10)),
        (2, 0x80, DESCRIPTOR as u16)
    );
    assert_eq!(be24(&d, 13), body);
    let mut full = 0;
    for i in 0..usize::from(SLOTS) {
        let at = 16 + i * DESCRIPTOR;
        assert_eq!(usize::from(be16(&d, at)), 0x0401 + i, "descriptor {i}");
        if d[at + 2] & 0x01 != 0 {
            // New cartridges fill the first free slots, in barcode order.
            let tag = String::from_utf8_lossy(&d[at + 12..at + 44])
                .trim()
                .to_string();
            assert_eq!(tag, format!("B{i:05}L9"));
            full += 1;
        }
    }
    assert_eq!(full, cartridges);

    // A short allocation cuts the data, not the counts (SMC-3 §6.10.2).
    let d = good(&table, &nexus, 0, &res(2, 0, 0xFFFF, 8 + 8 + 10 * 48), &[]);
    assert_eq!(d.len(), 8 + 8 + 10 * DESCRIPTOR);
    assert_eq!((be16(&d, 2), be24(&d, 5)), (SLOTS, 8 + body));
    let d = good(&table, &nexus, 0, &res(2, 0, 0xFFFF, 8), &[]);
    assert_eq!((d.len(), be16(&d, 2)), (8, SLOTS));

    // From the last slots on: the addresses end at 0401h + 59,999.
    let last = 0x0401 + SLOTS - 1;
    let d = good(&table, &nexus, 0, &res(2, last - 1, 10, 0xFF_FFFF), &[]);
    assert_eq!((be16(&d, 0), be16(&d, 2)), (last - 1, 2));
    assert_eq!(be16(&d, 16 + DESCRIPTOR), last);

    // Every element of the library: transport, 4 drives, 32 import/export, 60,000 slots.
    let d = good(&table, &nexus, 0, &res(0, 0, 0xFFFF, 0xFF_FFFF), &[]);
    assert_eq!(be16(&d, 2), 1 + 4 + 32 + SLOTS);

    // The last slot takes a cartridge and gives it back (the inventory is saved each time).
    let (from, to) = (0x0401u16.to_be_bytes(), last.to_be_bytes());
    let mv = |a: [u8; 2], b: [u8; 2]| [0xA5, 0, 0, 0, a[0], a[1], b[0], b[1], 0, 0, 0, 0];
    good(&table, &nexus, 0, &mv(from, to), &[]);
    let d = good(&table, &nexus, 0, &res(2, last, 1, 0xFF_FFFF), &[]);
    assert_eq!(d[16 + 2] & 0x01, 1, "the last slot is full");
    good(&table, &nexus, 0, &mv(to, from), &[]);
}

#[test]
fn buffered_mode_zero_writes_are_durable_in_the_store_when_good() {
    let (_dir, lib) = library(10, 1, 1);
    let table = lib.lun_table();
    let nexus = ItNexus::new("iqn.test:host,i,0x000000000001", 1);
    // Slot 0401h to the drive (0101h on the 3584).
    good(
        &table,
        &nexus,
        0,
        &[0xA5, 0, 0, 0, 0x04, 0x01, 0x01, 0x01, 0, 0, 0, 0],
        &[],
    );
    let unsynced = || {
        lib.drives()[0].with_personality(|d| {
            let c = d.medium().unwrap();
            (c.unsynced(), c.partitions()[0].unsynced())
        })
    };
    let write = |len: usize| {
        let data = vec![0x5A; len];
        let l = (len as u32).to_be_bytes();
        good(&table, &nexus, 1, &[0x0A, 0, l[1], l[2], l[3], 0], &data);
    };
    write(4096);
    let one = Unsynced {
        objects: 1,
        bytes: 4096,
    };
    assert_eq!(unsynced(), (one, one), "buffered mode 1: not durable yet");
    // READ POSITION (extended) reports the chunk store's unsynchronised object and bytes.
    let d = good(
        &table,
        &nexus,
        1,
        &[0x34, 0x08, 0, 0, 0, 0, 0, 0, 32, 0],
        &[],
    );
    assert_eq!(be24(&d, 5), 1);
    assert_eq!(u64::from_be_bytes(d[24..32].try_into().unwrap()), 4096);
    // mt drvbuffer 0.
    good(&table, &nexus, 1, &[0x15, 0x10, 0, 0, 4, 0], &[0, 0, 0, 0]);
    write(1000);
    let none = Unsynced::default();
    assert_eq!(
        unsynced(),
        (none, none),
        "buffered mode 0: synced before GOOD"
    );
    let d = good(
        &table,
        &nexus,
        1,
        &[0x34, 0x08, 0, 0, 0, 0, 0, 0, 32, 0],
        &[],
    );
    assert_eq!(be24(&d, 5), 0);
    assert_eq!(u64::from_be_bytes(d[24..32].try_into().unwrap()), 0);
}
