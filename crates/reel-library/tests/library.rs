//! The library composition over a real chunk store: a library that uses (nearly) the whole
//! 16-bit element address space, reported in full by READ ELEMENT STATUS, and a drive in
//! BUFFERED MODE 0 whose writes are durable in the store when they complete.

use std::sync::Arc;
use std::time::Instant;

use reel_library::{LibrarySpec, VirtualLibrary};
use reel_media::{Barcode, CartridgeInfo, MediaType, PartitionStore, UnixTime, Unsynced};
use reel_scsi::initiator::smc::{
    ElementType, move_medium, parse_element_status, read_element_status_range,
};
use reel_scsi::initiator::spc::mode_select6;
use reel_scsi::initiator::ssc::{
    PositionForm, Transfer, parse_read_position, read_position, write6,
};
use reel_scsi::{Bytes, ItNexus, LunTable, Response, Status};
use reel_smc::{ChangerModel, Layout};
use reel_ssc::DriveModel;
use reel_testkit::memory_catalog;
use reel_volume::BarcodeFilter;

const SLOTS: u16 = 60_000;
/// Element descriptor with a primary volume tag (SMC-3 §6.10.3): 12 + 36 bytes.
const DESCRIPTOR: usize = 48;

fn library(slots: u16, drives: u16, cartridges: usize) -> (tempfile::TempDir, VirtualLibrary) {
    let (dir, carts) = memory_catalog();
    let carts = Arc::new(carts);
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
        emulation: None,
    };
    let mut libs = VirtualLibrary::open_all(carts, &[spec]).unwrap();
    (dir, libs.remove(0))
}

fn run(table: &LunTable, nexus: &ItNexus, lun: u64, cdb: &[u8], data_out: &[u8]) -> Response {
    table.execute(lun, reel_scsi::initiator::request(nexus, cdb, data_out))
}

/// Runs until GOOD, consuming the power-on unit attention.
fn good(table: &LunTable, nexus: &ItNexus, lun: u64, cdb: &[u8], data_out: &[u8]) -> Bytes {
    let mut r = run(table, nexus, lun, cdb, data_out);
    if r.status == Status::CheckCondition {
        r = run(table, nexus, lun, cdb, data_out);
    }
    assert_eq!(r.status, Status::Good, "{cdb:02x?}: {:02x?}", r.sense);
    r.data_in.to_bytes()
}

/// READ ELEMENT STATUS (B8h) with VOLTAG.
fn res(element_type: u8, start: u16, count: u16, allocation: u32) -> [u8; 12] {
    read_element_status_range(
        ElementType(element_type),
        true,
        start,
        count,
        false,
        allocation,
    )
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
    // The descriptors, through the initiator kit's parser.
    let elements = parse_element_status(&d).unwrap();
    assert_eq!(elements.len(), usize::from(SLOTS));
    let mut full = 0;
    for (i, e) in elements.iter().enumerate() {
        assert_eq!(usize::from(e.address), 0x0401 + i, "descriptor {i}");
        assert_eq!(e.element_type, ElementType::STORAGE);
        if e.full {
            // New cartridges fill the first free slots, in barcode order.
            assert_eq!(e.barcode, Some(format!("B{i:05}L9")));
            full += 1;
        } else {
            assert_eq!(e.barcode, None);
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
    good(&table, &nexus, 0, &move_medium(0, 0x0401, last), &[]);
    let d = good(&table, &nexus, 0, &res(2, last, 1, 0xFF_FFFF), &[]);
    let e = parse_element_status(&d).unwrap();
    assert!(e[0].full, "the last slot is full");
    assert_eq!(
        e[0].source,
        Some(0x0401),
        "and knows where its cartridge came from"
    );
    good(&table, &nexus, 0, &move_medium(0, last, 0x0401), &[]);
}

#[test]
fn buffered_mode_zero_writes_are_durable_in_the_store_when_good() {
    let (_dir, lib) = library(10, 1, 1);
    let table = lib.lun_table();
    let nexus = ItNexus::new("iqn.test:host,i,0x000000000001", 1);
    // Slot 0401h to the drive (0101h on the 3584).
    good(&table, &nexus, 0, &move_medium(0, 0x0401, 0x0101), &[]);
    let unsynced = || {
        lib.drives()[0].with_personality(|d| {
            let c = d.medium().unwrap();
            (c.unsynced(), c.partitions()[0].unsynced())
        })
    };
    let write = |len: usize| {
        let data = vec![0x5A; len];
        let cdb = write6(Transfer::Variable(len as u32));
        good(&table, &nexus, 1, &cdb, &data);
    };
    write(4096);
    let one = Unsynced {
        objects: 1,
        bytes: 4096,
    };
    assert_eq!(unsynced(), (one, one), "buffered mode 1: not durable yet");
    // READ POSITION (extended) reports the chunk store's unsynchronised object and bytes.
    let position = || {
        let d = good(
            &table,
            &nexus,
            1,
            &read_position(PositionForm::Extended),
            &[],
        );
        let p = parse_read_position(PositionForm::Extended, &d).unwrap();
        (p.buffered_objects, p.buffered_bytes)
    };
    assert_eq!(position(), (Some(1), Some(4096)));
    // mt drvbuffer 0: a mode parameter header with BUFFERED MODE 0 and no block descriptor.
    good(&table, &nexus, 1, &mode_select6(4), &[0, 0, 0, 0]);
    write(1000);
    let none = Unsynced::default();
    assert_eq!(
        unsynced(),
        (none, none),
        "buffered mode 0: synced before GOOD"
    );
    assert_eq!(position(), (Some(0), Some(0)));
}
