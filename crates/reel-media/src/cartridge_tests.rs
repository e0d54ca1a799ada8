//! Targeted unit tests of the cartridge semantics.

use super::*;
use crate::error::LayoutError;
use crate::mam::MamError;
use crate::store::{MemoryPartition, MemoryPartitionError};

type Cart = Cartridge<MemoryPartition>;
type Err = MediaError<MemoryPartitionError>;

fn cart_with(media: MediaType, capacity: u64, ew: u8) -> Cart {
    let info = CartridgeInfo::new(
        Barcode::new("TST001L9").unwrap(),
        media,
        UnixTime(1_700_000_000),
    )
    .with_capacity(capacity)
    .unwrap()
    .with_early_warning_percent(ew)
    .unwrap();
    let mut c = Cartridge::new(info, vec![MemoryPartition::new()]).unwrap();
    c.load(UnixTime(1_700_000_100)).unwrap();
    c
}

fn cart() -> Cart {
    cart_with(MediaType::Lto9, 64 << 20, 98)
}

/// Build a partition from a pattern: 'R' = 10-byte record, 'F' = filemark.
fn layout(c: &mut Cart, pattern: &str) {
    for (i, ch) in pattern.chars().enumerate() {
        match ch {
            'R' => {
                c.write_record(&[i as u8; 10]).unwrap();
            }
            'F' => {
                c.write_filemarks(1).unwrap();
            }
            _ => unreachable!(),
        }
    }
}

fn pos(c: &Cart) -> (u64, u64, u64) {
    let p = c.position().unwrap();
    (p.object, p.file, p.block_in_file)
}

fn kind<T: std::fmt::Debug>(r: Result<T, Err>) -> &'static str {
    r.expect_err("expected an error").kind()
}

#[test]
fn short_and_long_reads_report_actual_length() {
    let mut c = cart();
    let rec: Vec<u8> = (0..100u8).collect();
    c.write_record(&rec).unwrap();
    c.write_record(&rec[..30]).unwrap();
    c.write_record(&rec[..5]).unwrap();
    c.rewind().unwrap();
    let mut buf = vec![0xEE; 7];

    // Short read (ILI, overlength record): truncated data, actual length, moved past.
    let r = c.read(40, &mut buf).unwrap();
    assert_eq!(
        r,
        ReadOutcome::Record {
            data_len: 100,
            transferred: 40
        }
    );
    assert_eq!(buf, &rec[..40]);
    assert_eq!(pos(&c), (1, 0, 1));

    // Long read (ILI, underlength record): full record.
    let r = c.read(1000, &mut buf).unwrap();
    assert_eq!(
        r,
        ReadOutcome::Record {
            data_len: 30,
            transferred: 30
        }
    );
    assert_eq!(buf, &rec[..30]);

    // Exact read and max_len 0 still skips the record with nothing transferred.
    c.locate(0, 2).unwrap();
    assert_eq!(
        c.read(0, &mut buf).unwrap(),
        ReadOutcome::Record {
            data_len: 5,
            transferred: 0
        }
    );
    assert!(buf.is_empty());
    assert_eq!(c.read(5, &mut buf).unwrap(), ReadOutcome::EndOfData);
    assert_eq!(pos(&c), (3, 0, 3));
    assert_eq!(c.counters().bytes_read_total, 70);
    assert_eq!(c.counters().records_read, 3);
}

#[test]
fn reading_a_filemark_moves_past_it_and_eod_does_not_move() {
    let mut c = cart();
    layout(&mut c, "RF");
    c.rewind().unwrap();
    let mut buf: Vec<u8> = Vec::new();
    assert!(matches!(
        c.read(100, &mut buf).unwrap(),
        ReadOutcome::Record { .. }
    ));
    assert_eq!(c.read(100, &mut buf).unwrap(), ReadOutcome::Filemark);
    assert_eq!(pos(&c), (2, 1, 0));
    assert_eq!(c.read(100, &mut buf).unwrap(), ReadOutcome::EndOfData);
    assert_eq!(c.read(100, &mut buf).unwrap(), ReadOutcome::EndOfData);
    assert_eq!(pos(&c), (2, 1, 0));
    assert_eq!(c.counters().filemarks_read, 1);
}

#[test]
fn space_records_forward_stops_after_filemark_with_residue() {
    let mut c = cart();
    layout(&mut c, "RRFRR");
    c.rewind().unwrap();
    assert_eq!(
        c.space_records(5).unwrap(),
        SpaceOutcome::Filemark { residue: 3 }
    );
    // EOM side of the filemark: first block of file 1.
    assert_eq!(pos(&c), (3, 1, 0));
    assert_eq!(c.space_records(1).unwrap(), SpaceOutcome::Completed);
    assert_eq!(pos(&c), (4, 1, 1));
    assert_eq!(
        c.space_records(10).unwrap(),
        SpaceOutcome::EndOfData { residue: 9 }
    );
    assert!(c.position().unwrap().at_eod);
    assert_eq!(
        c.space_records(1).unwrap(),
        SpaceOutcome::EndOfData { residue: 1 }
    );
    assert_eq!(c.space_records(0).unwrap(), SpaceOutcome::Completed);
    assert_eq!(
        c.space_records(i64::MAX).unwrap(),
        SpaceOutcome::EndOfData { residue: i64::MAX }
    );
}

#[test]
fn space_records_backward_stops_before_filemark_and_at_bop() {
    let mut c = cart();
    layout(&mut c, "RRFRR");
    assert_eq!(c.space_records(-1).unwrap(), SpaceOutcome::Completed);
    assert_eq!(pos(&c), (4, 1, 1));
    // Crosses one record, then hits the filemark: BOP side of it.
    assert_eq!(
        c.space_records(-5).unwrap(),
        SpaceOutcome::Filemark { residue: -4 }
    );
    assert_eq!(pos(&c), (2, 0, 2));
    assert_eq!(c.space_records(-2).unwrap(), SpaceOutcome::Completed);
    assert!(c.position().unwrap().at_bop);
    c.locate(0, 2).unwrap();
    assert_eq!(
        c.space_records(i64::MIN).unwrap(),
        SpaceOutcome::BeginningOfPartition {
            residue: i64::MIN + 2
        }
    );
    assert_eq!(pos(&c), (0, 0, 0));
    assert_eq!(
        c.space_records(-1).unwrap(),
        SpaceOutcome::BeginningOfPartition { residue: -1 }
    );
}

#[test]
fn space_filemarks_both_directions() {
    let mut c = cart();
    layout(&mut c, "RFRFR");
    // Backward from EOD: BOP side of the last filemark crossed.
    assert_eq!(c.space_filemarks(-1).unwrap(), SpaceOutcome::Completed);
    assert_eq!(pos(&c), (3, 1, 1));
    assert_eq!(c.space_filemarks(-1).unwrap(), SpaceOutcome::Completed);
    assert_eq!(pos(&c), (1, 0, 1));
    assert_eq!(
        c.space_filemarks(-1).unwrap(),
        SpaceOutcome::BeginningOfPartition { residue: -1 }
    );
    assert_eq!(pos(&c), (0, 0, 0));
    c.space_to_eod().unwrap();
    assert_eq!(
        c.space_filemarks(-5).unwrap(),
        SpaceOutcome::BeginningOfPartition { residue: -3 }
    );
    // Forward: EOM side.
    assert_eq!(c.space_filemarks(2).unwrap(), SpaceOutcome::Completed);
    assert_eq!(pos(&c), (4, 2, 0));
    c.rewind().unwrap();
    assert_eq!(
        c.space_filemarks(5).unwrap(),
        SpaceOutcome::EndOfData { residue: 3 }
    );
    assert!(c.position().unwrap().at_eod);
    assert_eq!(
        c.space_filemarks(i64::MAX).unwrap(),
        SpaceOutcome::EndOfData { residue: i64::MAX }
    );
    assert_eq!(
        c.space_filemarks(i64::MIN).unwrap(),
        SpaceOutcome::BeginningOfPartition {
            residue: i64::MIN + 2
        }
    );
}

#[test]
fn writing_in_the_middle_truncates_the_rest() {
    let mut c = cart();
    layout(&mut c, "RRFRR");
    c.locate(0, 1).unwrap();
    c.write_record(b"new").unwrap();
    assert_eq!(c.partitions()[0].object_count(), 2);
    assert_eq!(c.used_bytes(0).unwrap(), 13);
    assert!(c.position().unwrap().at_eod);
    c.locate(0, 1).unwrap();
    let mut buf: Vec<u8> = Vec::new();
    c.read(100, &mut buf).unwrap();
    assert_eq!(buf, b"new");
    // Filemarks also truncate; erase truncates without writing.
    c.locate(0, 0).unwrap();
    c.write_filemarks(2).unwrap();
    assert_eq!(c.partitions()[0].object_count(), 2);
    c.locate(0, 1).unwrap();
    c.erase(false).unwrap();
    assert_eq!(c.partitions()[0].object_count(), 1);
    assert_eq!(c.used_bytes(0).unwrap(), 0);
}

#[test]
fn worm_allows_only_appending() {
    let mut c = cart_with(MediaType::Lto8Worm, 1 << 20, 98);
    layout(&mut c, "RRF");
    c.locate(0, 1).unwrap();
    assert_eq!(kind(c.write_record(b"x")), "WormOverwrite");
    assert_eq!(kind(c.write_filemarks(1)), "WormOverwrite");
    assert_eq!(kind(c.erase(true)), "WormOverwrite");
    assert_eq!(
        kind(c.format(&[1000], |_| Ok(MemoryPartition::new()))),
        "WormOverwrite"
    );
    assert_eq!(
        c.partitions()[0].object_count(),
        3,
        "nothing was overwritten"
    );
    assert_eq!(pos(&c), (1, 0, 1), "position unchanged by refused writes");
    // Sync request is fine anywhere.
    assert!(c.write_filemarks(0).unwrap().synced);
    c.space_to_eod().unwrap();
    c.write_record(b"appended").unwrap();
    c.write_filemarks(1).unwrap();
    c.erase(false).unwrap();
    assert_eq!(c.partitions()[0].object_count(), 5);
}

#[test]
fn erase_all_empties_every_partition_but_keeps_the_identity() {
    let mut c = cart();
    c.format(&[1 << 20, 1 << 20], |_| Ok(MemoryPartition::new()))
        .unwrap();
    layout(&mut c, "RRF");
    c.set_partition(1).unwrap();
    c.write_record(b"second partition").unwrap();
    let before = c.info().clone();
    c.unload().unwrap();
    c.erase_all(UnixTime(1_800_000_000)).unwrap();
    assert!(c.partitions().iter().all(|p| p.object_count() == 0));
    assert!(c.partitions().iter().all(|p| p.sync_count() > 0), "synced");
    assert_eq!(c.partition_count(), 2, "the partitioning stays");
    assert_eq!(c.barcode(), before.barcode());
    assert_eq!(c.counters(), before.counters());
    assert_eq!(c.load_count(), before.load_count());
    assert_eq!(c.info().last_written(), Some(UnixTime(1_800_000_000)));
    // Writable again from BOP.
    c.load(UnixTime(1_800_000_001)).unwrap();
    c.write_record(b"new").unwrap();
    assert_eq!(pos(&c), (1, 0, 1));
}

#[test]
fn erase_all_refuses_write_protected_and_worm_with_data() {
    let mut c = cart();
    layout(&mut c, "R");
    c.set_write_protected(true);
    assert_eq!(kind(c.erase_all(UnixTime(0))), "WriteProtected");
    assert_eq!(c.partitions()[0].object_count(), 1);
    let mut w = cart_with(MediaType::Lto8Worm, 1 << 20, 98);
    w.erase_all(UnixTime(0)).unwrap();
    assert_eq!(w.info().last_written(), None, "nothing to erase");
    layout(&mut w, "F");
    assert_eq!(kind(w.erase_all(UnixTime(0))), "WormOverwrite");
    assert_eq!(w.partitions()[0].object_count(), 1);
}

#[test]
fn write_protect_refuses_all_writes_but_allows_reads() {
    let mut c = cart();
    layout(&mut c, "RF");
    c.set_write_protected(true);
    assert_eq!(kind(c.write_record(b"x")), "WriteProtected");
    assert_eq!(kind(c.write_filemarks(3)), "WriteProtected");
    assert_eq!(kind(c.erase(false)), "WriteProtected");
    assert_eq!(
        kind(c.format(&[1000], |_| Ok(MemoryPartition::new()))),
        "WriteProtected"
    );
    assert!(c.write_filemarks(0).unwrap().synced);
    c.rewind().unwrap();
    let mut buf: Vec<u8> = Vec::new();
    assert!(matches!(
        c.read(10, &mut buf).unwrap(),
        ReadOutcome::Record { .. }
    ));
    c.set_write_protected(false);
    c.write_record(b"ok").unwrap();
    assert_eq!(c.counters().records_written, 2);
}

#[test]
fn early_warning_then_end_of_medium() {
    let mut c = cart_with(MediaType::Lto9, 1000, 90);
    assert_eq!(c.early_warning_threshold(0).unwrap(), 900);
    assert_eq!(
        c.write_record(&[1; 800]).unwrap(),
        WriteOutcome {
            early_warning: false,
            synced: false
        }
    );
    assert!(!c.position().unwrap().beyond_early_warning);
    assert!(
        c.write_record(&[2; 100]).unwrap().early_warning,
        "900 of 1000 = EW"
    );
    assert!(c.position().unwrap().beyond_early_warning);
    assert!(
        c.write_record(&[3; 100]).unwrap().early_warning,
        "exactly full still succeeds"
    );
    match c.write_record(&[4; 1]) {
        Err(MediaError::EndOfMedium {
            needed: 1,
            available: 0,
        }) => {}
        other => panic!("expected EndOfMedium, got {other:?}"),
    }
    assert_eq!(pos(&c), (3, 0, 3));
    assert_eq!(c.remaining_capacity(0).unwrap(), 0);
    // Filemarks take no space.
    assert!(c.write_filemarks(1).unwrap().early_warning);
    // Early warning is only reported at EOD.
    c.rewind().unwrap();
    assert!(!c.position().unwrap().beyond_early_warning);
    // Overwriting frees space again.
    c.locate(0, 1).unwrap();
    assert!(!c.write_record(&[5; 50]).unwrap().early_warning);
    assert_eq!(c.used_bytes(0).unwrap(), 850);
    // A record bigger than what is left fails after the truncation it implies.
    c.locate(0, 0).unwrap();
    match c.write_record(&[6; 1001]) {
        Err(MediaError::EndOfMedium {
            needed: 1001,
            available: 1000,
        }) => {}
        other => panic!("expected EndOfMedium, got {other:?}"),
    }
    assert_eq!(c.partitions()[0].object_count(), 0);
}

#[test]
fn record_and_filemark_limits() {
    let mut c = cart_with(MediaType::Lto9, 64 << 20, 98);
    let big = vec![0u8; MAX_RECORD_LEN as usize + 1];
    assert_eq!(kind(c.write_record(&big)), "RecordTooLarge");
    c.write_record(&big[..MAX_RECORD_LEN as usize]).unwrap();
    assert_eq!(
        kind(c.write_filemarks(MAX_FILEMARKS_PER_WRITE + 1)),
        "TooManyFilemarks"
    );
    assert_eq!(kind(c.write_filemarks(u32::MAX)), "TooManyFilemarks");
    assert_eq!(c.partitions()[0].object_count(), 1);
    // Empty write: no-op.
    assert!(!c.write_record(&[]).unwrap().early_warning);
    assert_eq!(c.partitions()[0].object_count(), 1);
}

#[test]
fn locate_beyond_eod_leaves_position_at_eod() {
    let mut c = cart();
    layout(&mut c, "RFRR");
    c.rewind().unwrap();
    assert_eq!(kind(c.locate(0, 99)), "EndOfData");
    assert_eq!(pos(&c), (4, 1, 2));
    c.locate(0, 4).unwrap();
    c.locate(0, 2).unwrap();
    assert_eq!(pos(&c), (2, 1, 0));
    assert_eq!(kind(c.locate(1, 0)), "InvalidPartition");
    assert_eq!(
        pos(&c),
        (2, 1, 0),
        "invalid partition leaves position alone"
    );
    c.locate_file(1).unwrap();
    assert_eq!(pos(&c), (2, 1, 0));
    c.locate_file(0).unwrap();
    assert_eq!(pos(&c), (0, 0, 0));
    assert_eq!(kind(c.locate_file(2)), "EndOfData");
    assert_eq!(pos(&c), (4, 1, 2));
    assert_eq!(kind(c.locate_file(u64::MAX)), "EndOfData");
}

#[test]
fn partitions_are_independent_and_format_validates() {
    let mut c = cart_with(MediaType::Lto6, 1 << 20, 98);
    assert_eq!(
        kind(c.format(&[1, 1, 1], |_| Ok(MemoryPartition::new()))),
        "Layout"
    );
    assert_eq!(
        kind(c.format(&[1 << 20, 1], |_| Ok(MemoryPartition::new()))),
        "Layout"
    );
    assert!(matches!(
        c.format(&[0, 5], |_| Ok(MemoryPartition::new())),
        Err(MediaError::Layout(LayoutError::ZeroPartitionSize {
            index: 0
        }))
    ));
    layout(&mut c, "RR");
    let removed = c
        .format(&[1000, 2000], |_| Ok(MemoryPartition::new()))
        .unwrap();
    assert!(removed.is_empty());
    assert_eq!(c.partition_count(), 2);
    assert_eq!(c.used_bytes(0).unwrap(), 0, "format erased partition 0");
    assert_eq!(c.partition_capacity(1).unwrap(), 2000);
    c.set_partition(1).unwrap();
    layout(&mut c, "RRF");
    let p = c.position().unwrap();
    assert_eq!((p.partition, p.object, p.file), (1, 3, 1));
    c.set_partition(0).unwrap();
    assert!(c.position().unwrap().at_eod && c.position().unwrap().at_bop);
    assert_eq!(c.used_bytes(1).unwrap(), 20);
    assert_eq!(kind(c.set_partition(2)), "InvalidPartition");
    // Rewind goes to partition 0.
    c.locate(1, 1).unwrap();
    c.rewind().unwrap();
    assert_eq!(c.position().unwrap().partition, 0);
    // Shrinking returns the surplus store, emptied.
    let removed = c.format(&[500], |_| Ok(MemoryPartition::new())).unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0].object_count(), 0);
    assert_eq!(c.info().partition_capacities(), &[500]);
}

#[test]
fn format_factory_failure_changes_nothing() {
    let mut c = cart();
    layout(&mut c, "RR");
    let r = c.format(&[100, 100], |_| {
        Err(MemoryPartitionError::InvalidRecordLength(0))
    });
    assert_eq!(kind(r), "Store");
    assert_eq!(c.partitions()[0].object_count(), 2);
    assert_eq!(c.partition_count(), 1);
}

#[test]
fn not_loaded_refuses_data_operations() {
    let mut c = cart();
    c.unload().unwrap();
    let mut buf: Vec<u8> = Vec::new();
    assert_eq!(kind(c.read(10, &mut buf)), "NotLoaded");
    assert_eq!(kind(c.write_record(b"x")), "NotLoaded");
    assert_eq!(kind(c.write_filemarks(0)), "NotLoaded");
    assert_eq!(kind(c.space_records(1)), "NotLoaded");
    assert_eq!(kind(c.position()), "NotLoaded");
    assert_eq!(kind(c.rewind()), "NotLoaded");
    assert_eq!(kind(c.locate(0, 0)), "NotLoaded");
    c.unload().unwrap();
    assert!(
        c.read_attribute(0x0003, 0).unwrap().is_some(),
        "MAM readable while unloaded"
    );
}

#[test]
fn load_count_and_counters() {
    let mut c = cart(); // loaded once
    assert_eq!(c.load_count(), 1);
    c.write_record(&vec![7; 3 << 20]).unwrap();
    c.write_filemarks(2).unwrap();
    c.rewind().unwrap();
    let mut buf: Vec<u8> = Vec::new();
    c.read(u32::MAX, &mut buf).unwrap();
    c.read(10, &mut buf).unwrap();
    let k = c.counters();
    assert_eq!(
        (k.bytes_written_total, k.bytes_written_load),
        (3 << 20, 3 << 20)
    );
    assert_eq!((k.bytes_read_total, k.bytes_read_load), (3 << 20, 3 << 20));
    assert_eq!(
        (
            k.records_written,
            k.records_read,
            k.filemarks_written,
            k.filemarks_read
        ),
        (1, 1, 2, 1)
    );
    assert_eq!(c.info().last_written(), Some(UnixTime(1_700_000_100)));

    let syncs = c.partitions()[0].sync_count();
    c.unload().unwrap();
    assert!(c.partitions()[0].sync_count() > syncs, "unload syncs");
    c.load(UnixTime(1_800_000_000)).unwrap();
    assert_eq!(c.load_count(), 2);
    let k = c.counters();
    assert_eq!((k.bytes_written_total, k.bytes_written_load), (3 << 20, 0));
    assert_eq!((k.bytes_read_total, k.bytes_read_load), (3 << 20, 0));
    // Loading again while loaded only rewinds.
    c.space_to_eod().unwrap();
    c.load(UnixTime(1_800_000_001)).unwrap();
    assert_eq!(c.load_count(), 2);
    assert!(c.position().unwrap().at_bop);

    let attr = |c: &Cart, id| {
        u64::from_be_bytes(
            c.read_attribute(id, 0)
                .unwrap()
                .unwrap()
                .value
                .try_into()
                .unwrap(),
        )
    };
    assert_eq!(attr(&c, 0x0003), 2);
    assert_eq!(attr(&c, 0x0220), 3);
    assert_eq!(attr(&c, 0x0221), 3);
    assert_eq!(attr(&c, 0x0222), 0);
    assert_eq!(attr(&c, 0x0001), 64);
    assert_eq!(attr(&c, 0x0000), 61);
}

#[test]
fn sync_points_reach_the_store() {
    let mut c = cart();
    c.write_record(b"a").unwrap();
    assert_eq!(c.partitions()[0].synced_objects(), 0);
    assert_eq!(
        c.write_filemarks(0).unwrap(),
        WriteOutcome {
            early_warning: false,
            synced: true
        }
    );
    assert_eq!(c.partitions()[0].synced_objects(), 1);
    c.write_record(b"b").unwrap();
    c.rewind().unwrap();
    assert_eq!(c.partitions()[0].synced_objects(), 2);
    c.space_to_eod().unwrap();
    c.write_record(b"c").unwrap();
    c.sync().unwrap();
    assert_eq!(c.partitions()[0].synced_objects(), 3);
}

#[test]
fn mam_rejects_read_only_and_malformed_writes() {
    let mut c = cart();
    let e = |r: Result<(), Err>| match r {
        Err(MediaError::Mam(m)) => m,
        other => panic!("expected MAM error, got {other:?}"),
    };
    use AttributeFormat::*;
    assert_eq!(
        e(c.write_attribute(0x0000, Binary, &[0; 8])),
        MamError::ReadOnly { id: 0x0000 }
    );
    assert_eq!(
        e(c.write_attribute(0x0401, Ascii, &[b'A'; 32])),
        MamError::ReadOnly { id: 0x0401 }
    );
    assert_eq!(
        e(c.write_attribute(0x0123, Binary, &[0])),
        MamError::ReadOnly { id: 0x0123 }
    );
    assert!(matches!(
        e(c.write_attribute(0x0800, Ascii, b"SHORT")),
        MamError::WrongLength {
            id: 0x0800,
            len: 5,
            ..
        }
    ));
    assert!(matches!(
        e(c.write_attribute(0x0800, Text, b"REEL    ")),
        MamError::WrongFormat { .. }
    ));
    assert_eq!(
        e(c.write_attribute(0x0801, Ascii, &[0x07; 32])),
        MamError::InvalidAscii { id: 0x0801 }
    );
    assert_eq!(
        e(c.write_attribute(0x1800, Binary, &[1])),
        MamError::Unsupported { id: 0x1800 }
    );
    assert_eq!(
        e(c.write_attribute(0x0810, Binary, &[1])),
        MamError::Unsupported { id: 0x0810 }
    );
    assert!(
        c.read_attribute(0x0800, 0).unwrap().is_none(),
        "refused writes store nothing"
    );

    c.write_attribute(0x0800, Ascii, b"REEL    ").unwrap();
    c.write_attribute(0x080C, Binary, &[9; 70]).unwrap();
    c.write_attribute(0x1400, Text, b"vendor").unwrap();
    let a = c.read_attribute(0x0800, 0).unwrap().unwrap();
    assert_eq!(
        (a.read_only, a.format, a.value.as_slice()),
        (false, Ascii, &b"REEL    "[..])
    );
    let ids: Vec<u16> = c.attributes(0).unwrap().iter().map(|a| a.id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
    assert!(ids.contains(&0x0000) && ids.contains(&0x0800) && ids.contains(&0x1400));
    // Delete with an empty value.
    c.write_attribute(0x1400, Text, &[]).unwrap();
    assert!(c.read_attribute(0x1400, 0).unwrap().is_none());
    // Computed identity attributes.
    let serial = c.read_attribute(0x0401, 0).unwrap().unwrap();
    assert!(serial.read_only);
    assert_eq!(&serial.value[..8], b"TST001L9");
    assert_eq!(serial.value.len(), 32);
    assert_eq!(
        c.read_attribute(0x0406, 0).unwrap().unwrap().value,
        b"20231114"
    );
    assert_eq!(c.read_attribute(0x0408, 0).unwrap().unwrap().value, [0x00]);
    assert_eq!(c.read_attribute(0x0006, 0).unwrap().unwrap().value, [0x60]);
    assert_eq!(kind(c.read_attribute(0x0000, 3)), "InvalidPartition");
}

#[test]
fn mam_space_is_bounded() {
    let mut c = cart_with(MediaType::Lto5, 1 << 20, 98); // 8 KiB MAM
    let before = c.mam().space_remaining();
    let mut id = 0x1400;
    let r = loop {
        match c.write_attribute(id, AttributeFormat::Binary, &[0; 1024]) {
            Ok(()) => id += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(r, MediaError::Mam(MamError::Full { .. })));
    assert_eq!(id - 0x1400, 7, "seven 1029-byte attributes fit in 8 KiB");
    assert_eq!(before - c.mam().space_remaining(), 7 * 1029);
    // Replacing an attribute reuses its own space.
    c.write_attribute(0x1400, AttributeFormat::Binary, &[1; 1024])
        .unwrap();
}

#[test]
fn persisted_state_round_trips_with_the_stores() {
    let mut c = cart();
    layout(&mut c, "RFR");
    c.write_attribute(0x0806, AttributeFormat::Ascii, &[b'B'; 32])
        .unwrap();
    c.unload().unwrap();
    let (info, stores) = c.into_parts();
    let bytes = info.to_bytes();
    let info2 = CartridgeInfo::from_bytes(&bytes).unwrap();
    assert_eq!(info2, info);
    let mut c2 = Cartridge::new(info2, stores).unwrap();
    c2.load(UnixTime(0)).unwrap();
    assert_eq!(c2.load_count(), 2);
    c2.space_to_eod().unwrap();
    assert_eq!(pos(&c2), (3, 1, 1));
    assert_eq!(
        c2.read_attribute(0x0806, 0).unwrap().unwrap().value,
        [b'B'; 32]
    );

    let (info, _) = c2.into_parts();
    assert!(matches!(
        Cartridge::<MemoryPartition>::new(info, vec![]),
        Err(MediaError::Layout(LayoutError::StoreCount {
            expected: 1,
            got: 0
        }))
    ));
}

/// A store that lies about record lengths must yield a typed error, not a panic.
#[derive(Default)]
struct LyingStore(MemoryPartition);

impl PartitionStore for LyingStore {
    type Error = MemoryPartitionError;
    fn object_count(&self) -> u64 {
        self.0.object_count()
    }
    fn object(&self, n: u64) -> Result<ObjectKind, Self::Error> {
        self.0.object(n)
    }
    fn read_record(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), Self::Error> {
        self.0.read_record(n, buf)?;
        buf.push(0);
        Ok(())
    }
    fn append_record(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        self.0.append_record(data)
    }
    fn append_encrypted_record(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        self.0.append_encrypted_record(data)
    }
    fn append_filemarks(&mut self, count: u32) -> Result<(), Self::Error> {
        self.0.append_filemarks(count)
    }
    fn truncate(&mut self, n: u64) -> Result<(), Self::Error> {
        self.0.truncate(n)
    }
    fn filemarks_before(&self, n: u64) -> Result<u64, Self::Error> {
        // Claims one filemark more than exists.
        Ok(self.0.filemarks_before(n)? + u64::from(n > 0))
    }
    fn filemark_position(&self, k: u64) -> Result<Option<u64>, Self::Error> {
        self.0.filemark_position(k)
    }
    fn data_bytes(&self) -> u64 {
        self.0.data_bytes()
    }
    fn sync(&mut self) -> Result<(), Self::Error> {
        self.0.sync()
    }
    fn unsynced(&self) -> Unsynced {
        self.0.unsynced()
    }
}

#[test]
fn inconsistent_store_gives_typed_errors() {
    let info = CartridgeInfo::new(Barcode::new("LIE").unwrap(), MediaType::Lto7, UnixTime(0));
    let mut c = Cartridge::new(info, vec![LyingStore::default()]).unwrap();
    c.load(UnixTime(0)).unwrap();
    c.write_record(b"abc").unwrap();
    c.write_record(b"def").unwrap();
    assert_eq!(kind(c.position()), "Inconsistent");
    c.rewind().unwrap();
    let mut buf: Vec<u8> = Vec::new();
    assert_eq!(kind(c.read(10, &mut buf)), "Inconsistent");
    c.locate(0, 2).unwrap();
    assert_eq!(kind(c.space_records(-1)), "Inconsistent");
    assert_eq!(kind(c.space_filemarks(-1)), "Inconsistent");
    assert_eq!(pos_unchecked(&c), 2, "failed spaces do not move");
}

fn pos_unchecked(c: &Cartridge<LyingStore>) -> u64 {
    c.object
}

#[test]
fn encrypted_records_are_read_in_two_steps_and_stay_put_until_finished() {
    let mut c = cart();
    c.write_record(b"plain").unwrap();
    c.write_encrypted_record(b"sealed form").unwrap();
    c.write_filemarks(1).unwrap();
    assert_eq!(c.used_bytes(0).unwrap(), 5 + 11);
    c.rewind().unwrap();
    assert_eq!(
        c.next_object().unwrap(),
        Some(ObjectKind::Record { len: 5 })
    );
    let mut buf: Vec<u8> = Vec::new();
    assert!(matches!(
        c.read(100, &mut buf),
        Ok(ReadOutcome::Record { data_len: 5, .. })
    ));
    assert_eq!(
        c.next_object().unwrap(),
        Some(ObjectKind::EncryptedRecord { len: 11 })
    );
    // The sealed form comes whole, whatever the transfer length, and the position holds.
    assert_eq!(
        c.read(3, &mut buf).unwrap(),
        ReadOutcome::Encrypted { sealed_len: 11 }
    );
    assert_eq!(buf, b"sealed form");
    assert_eq!(pos(&c), (1, 0, 1));
    assert_eq!(
        c.read(3, &mut buf).unwrap(),
        ReadOutcome::Encrypted { sealed_len: 11 }
    );
    let read_before = c.counters().records_read;
    c.finish_encrypted_read(7).unwrap();
    assert_eq!(pos(&c), (2, 0, 2));
    assert_eq!(c.counters().records_read, read_before + 1);
    // Only an encrypted record can be finished; spacing treats it as any record.
    assert_eq!(kind(c.finish_encrypted_read(7)), "Inconsistent");
    c.rewind().unwrap();
    c.space_records(2).unwrap();
    assert_eq!(c.next_object().unwrap(), Some(ObjectKind::Filemark));
    c.space_filemarks(1).unwrap();
    assert_eq!(c.next_object().unwrap(), None);
}

#[test]
fn encrypted_records_may_exceed_the_record_limit_by_the_sealing_overhead_only() {
    let mut c = cart();
    let big = vec![0u8; (MAX_RECORD_LEN + MAX_SEALING_OVERHEAD) as usize];
    c.write_encrypted_record(&big).unwrap();
    let too_big = vec![0u8; big.len() + 1];
    assert_eq!(kind(c.write_encrypted_record(&too_big)), "RecordTooLarge");
    assert_eq!(kind(c.write_record(&big)), "RecordTooLarge");
}
