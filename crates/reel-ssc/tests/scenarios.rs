//! What real consumers do, step by step: the Linux st driver and mt, tar, Bacula's btape,
//! LTFS, PBS, plus write protection, WORM, early warning and the changer's insert/remove.

mod common;

use common::*;
use reel_media::MediaType;
use reel_scsi::{Asc, SenseKey, Status};
use reel_ssc::{DriveModel, DriveState, InsertError, RemoveError};

const GB: u64 = 1_000_000_000;

#[test]
fn inquiry_and_vpd_identify_the_drive() {
    let rig = Rig::empty("ibm-td9-hh");
    let d = rig.good(&inquiry(96), &[]);
    assert_eq!(d[0], 0x01, "sequential-access device");
    assert_eq!(d[1], 0x80, "RMB");
    assert_eq!(&d[8..16], b"IBM     ");
    assert_eq!(&d[16..32], b"ULT3580-HH9     ");
    assert_eq!(&d[32..36], b"R9H1");
    assert!(
        d[58..74].chunks(2).any(|v| v == [0x05, 0x20]),
        "SSC-4 descriptor"
    );
    let serial = rig.good(&inquiry_vpd(0x80, 255), &[]);
    assert_eq!(&serial[4..], b"1068000123");
    let pages = rig.good(&inquiry_vpd(0x00, 255), &[]);
    assert_eq!(
        &pages[4..],
        &[0x00, 0x80, 0x83, 0x86, 0xB0, 0xB1, 0xC0, 0xC1]
    );
    let c1 = rig.good(&inquiry_vpd(0xC1, 255), &[]);
    assert_eq!(&c1[4..16], b"1068000123  ");
    let hpe = Rig::empty("hpe-ultrium8");
    let d = hpe.good(&inquiry(96), &[]);
    assert_eq!(&d[8..32], b"HPE     Ultrium 8-SCSI  ");
    for model in DriveModel::all() {
        let rig = Rig::empty(model.name());
        let d = rig.good(&inquiry(96), &[]);
        assert_eq!(
            std::str::from_utf8(&d[16..32]).unwrap().trim_end(),
            model.product()
        );
    }
}

#[test]
fn empty_drive_is_not_ready_and_media_commands_say_why() {
    let rig = Rig::empty("ibm-td9");
    let (s, _) = rig.check(&TEST_UNIT_READY, &[]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT)
    );
    for cdb in [
        &read6(Transfer::Variable(10), false)[..],
        &read_position(PositionForm::Short),
        &REWIND,
        &space6(SpaceCode::Filemarks, 1),
    ] {
        let (s, _) = rig.check(cdb, &[]);
        assert_eq!(s.asc, Asc::MEDIUM_NOT_PRESENT, "{cdb:02x?}");
    }
    // Drive information works without a cartridge.
    let limits = rig.good(&READ_BLOCK_LIMITS, &[]);
    assert_eq!(&limits[..], &[0, 0x80, 0x00, 0x00, 0, 1]);
    assert_eq!(rig.with_drive(|d| d.state()), DriveState::Empty);
}

#[test]
fn linux_st_open_sequence() {
    let rig = Rig::empty("ibm-td8");
    rig.insert(cartridge("ST0001L8", MediaType::Lto8, 4 * GB))
        .unwrap();
    // First command after the load: the unit attention, then ready.
    let (s, _) = rig.check(&TEST_UNIT_READY, &[]);
    assert_eq!(
        (s.key, s.asc),
        (
            SenseKey::UNIT_ATTENTION,
            Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
        )
    );
    rig.good(&TEST_UNIT_READY, &[]);
    let limits = rig.good(&READ_BLOCK_LIMITS, &[]);
    assert_eq!(
        u32::from_be_bytes([0, limits[1], limits[2], limits[3]]),
        0x80_0000
    );
    // MODE SENSE(6) `1a 00 00 00 0c 00`: header + block descriptor.
    let m = rig.good(&mode_sense6(0, 12), &[]);
    assert_eq!(m.len(), 12);
    assert_eq!(m[2], 0x10, "buffered mode 1, not write protected");
    assert_eq!(m[3], 8);
    assert_eq!(m[4], 0x5E, "LTO-8 density");
    assert_eq!(&m[9..12], &[0, 0, 0], "variable block mode");
    assert_eq!(m[1], 0x88, "medium type");
}

#[test]
fn mt_setblk_fixed_mode_and_back() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // mt setblk 65536
    let list = [0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00];
    rig.good(&mode_select6(12), &list);
    let m = rig.good(&mode_sense6(0, 12), &[]);
    assert_eq!(&m[9..12], &[0x01, 0, 0]);
    // Fixed mode: two 64 KiB blocks in one WRITE.
    let data = record(3, 2 * 65536);
    rig.good(&write6(Transfer::Fixed(2)), &data);
    rig.good(&REWIND, &[]);
    let back = rig.good(&read6(Transfer::Fixed(2), false), &[]);
    assert_eq!(&back[..], &data[..]);
    // FIXED = 1 with SILI = 1 is invalid.
    let (s, _) = rig.check(&read6(Transfer::Fixed(1), true), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    // mt setblk 0: variable again; FIXED reads are refused.
    let list = [0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0, 0, 0];
    rig.good(&mode_select6(12), &list);
    let (s, _) = rig.check(&read6(Transfer::Fixed(1), false), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    // A block length over 8 MiB is refused.
    let list = [0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0x80, 0, 1];
    let (s, _) = rig.check(&mode_select6(12), &list);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
}

#[test]
fn fixed_mode_read_stops_at_filemark_with_block_residue() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let list = [0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0, 0x02, 0x00];
    rig.good(&mode_select6(12), &list);
    rig.good(&write6(Transfer::Fixed(3)), &record(1, 3 * 512));
    rig.good(&write_filemarks(1, false), &[]);
    rig.good(&REWIND, &[]);
    let (s, data) = rig.check(&read6(Transfer::Fixed(5), false), &[]);
    assert!(s.filemark);
    assert_eq!((s.key, s.asc), (SenseKey::NO_SENSE, Asc::FILEMARK_DETECTED));
    assert_eq!(residue(&s), 2);
    assert_eq!(data.len(), 3 * 512);
    assert_eq!(long_position(&rig).1, 4, "after the filemark");
    // A 512-byte fixed read of a 100-byte record: ILI, residue in blocks.
    rig.good(&mode_select6(12), &[0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
    rig.good(&write6(Transfer::Variable(100)), &record(2, 100));
    rig.good(&mode_select6(12), &list);
    rig.good(&locate10(4, None), &[]);
    let (s, _) = rig.check(&read6(Transfer::Fixed(3), false), &[]);
    assert!(s.ili);
    assert_eq!(residue(&s), 3);
}

#[test]
fn tar_writes_then_closes_with_a_filemark_and_mt_eod_finds_the_end() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    for file in 0..3u8 {
        for block in 0..4u8 {
            rig.good(
                &write6(Transfer::Variable(10240)),
                &record(file * 16 + block, 10240),
            );
        }
        // st writes a filemark when a file opened for writing is closed.
        rig.good(&write_filemarks(1, false), &[]);
    }
    rig.good(&REWIND, &[]);
    // mt eod (st without fast_mteom): SPACE 0x7fffff filemarks, then SPACE to EOD.
    let (s, _) = rig.check(&space6(SpaceCode::Filemarks, 0x7F_FFFF), &[]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::BLANK_CHECK, Asc::END_OF_DATA_DETECTED)
    );
    assert_eq!(
        residue(&s),
        0x7F_FFFF - 3,
        "st computes the file number from it"
    );
    rig.good(&space6(SpaceCode::EndOfData, 0), &[]);
    assert_eq!(long_position(&rig), (0, 15, 3));
    // Append a fourth file after EOD.
    rig.good(&write6(Transfer::Variable(100)), &record(99, 100));
    rig.good(&write_filemarks(1, false), &[]);
    assert_eq!(long_position(&rig), (0, 17, 4));
    // Synchronising points call the saver.
    assert!(rig.saved.lock().unwrap().len() >= 5);
}

#[test]
fn mt_fsf_bsf_fsr_bsr() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // file 0: 2 records, FM, file 1: 3 records, FM, file 2: 1 record
    for len in [10, 20] {
        rig.good(
            &write6(Transfer::Variable(len)),
            &record(len as u8, len as usize),
        );
    }
    rig.good(&write_filemarks(1, false), &[]);
    for len in [30, 40, 50] {
        rig.good(
            &write6(Transfer::Variable(len)),
            &record(len as u8, len as usize),
        );
    }
    rig.good(&write_filemarks(1, false), &[]);
    rig.good(&write6(Transfer::Variable(60)), &record(60, 60));
    rig.good(&REWIND, &[]);
    rig.good(&space6(SpaceCode::Filemarks, 1), &[]); // fsf 1
    assert_eq!(long_position(&rig), (0, 3, 1));
    let d = rig.good(&read6(Transfer::Variable(100), true), &[]);
    assert_eq!(d.len(), 30);
    rig.good(&space6(SpaceCode::Blocks, 1), &[]); // fsr 1
    let d = rig.good(&read6(Transfer::Variable(100), true), &[]);
    assert_eq!(d.len(), 50);
    // fsr over the filemark: stops after it, FILEMARK, residue.
    let (s, _) = rig.check(&space6(SpaceCode::Blocks, 3), &[]);
    assert!(s.filemark);
    assert_eq!(residue(&s), 3);
    assert_eq!(long_position(&rig), (0, 7, 2));
    // bsf 1: lands on the BOP side of the filemark just crossed.
    rig.good(&space6(SpaceCode::Filemarks, -1), &[]);
    assert_eq!(long_position(&rig), (0, 6, 1));
    // bsr 5 from there: 3 records back, then the filemark stops it (residue -2).
    let (s, _) = rig.check(&space6(SpaceCode::Blocks, -5), &[]);
    assert!(s.filemark);
    assert_eq!(residue(&s), -2);
    assert_eq!(long_position(&rig), (0, 2, 0));
    // bsf 5: BOP, EOM, residue -5 + 0 filemarks crossed... only the one at object 2 exists.
    let (s, _) = rig.check(&space6(SpaceCode::Filemarks, -5), &[]);
    assert!(s.eom);
    assert_eq!(s.asc, Asc::BEGINNING_OF_PARTITION_MEDIUM_DETECTED);
    assert_eq!(residue(&s), -5);
    assert_eq!(position(&rig), (0, 0, true, false));
    // Read at BOP after a backspace: the data is there.
    let d = rig.good(&read6(Transfer::Variable(10), false), &[]);
    assert_eq!(&d[..], &record(10, 10)[..]);
}

#[test]
fn ili_reads_both_ways() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    rig.good(&write6(Transfer::Variable(10000)), &record(1, 10000));
    rig.good(&write6(Transfer::Variable(65536)), &record(2, 65536));
    rig.good(&REWIND, &[]);
    // 64 KiB buffer on a 10000-byte block: ILI, positive residue, the data.
    let (s, d) = rig.check(&read6(Transfer::Variable(65536), false), &[]);
    assert!(s.ili && !s.filemark && !s.eom);
    assert_eq!(s.key, SenseKey::NO_SENSE);
    assert_eq!(residue(&s), 65536 - 10000);
    assert_eq!(&d[..], &record(1, 10000)[..]);
    // 32 KiB buffer on a 64 KiB block: ILI, negative residue, 32 KiB, position after it.
    let (s, d) = rig.check(&read6(Transfer::Variable(32768), false), &[]);
    assert!(s.ili);
    assert_eq!(residue(&s), 32768 - 65536);
    assert_eq!(&d[..], &record(2, 65536)[..32768]);
    assert_eq!(long_position(&rig).1, 2);
    // SILI in variable mode (block length 0) suppresses both reports (SSC-4 READ(6)): the
    // short record comes back whole, the long one truncated, both GOOD.
    rig.good(&REWIND, &[]);
    let d = rig.good(&read6(Transfer::Variable(65536), true), &[]);
    assert_eq!(d.len(), 10000);
    let d = rig.good(&read6(Transfer::Variable(100), true), &[]);
    assert_eq!(&d[..100], &record(2, 65536)[..100]);
    // At EOD: BLANK CHECK with the whole request as residue.
    let (s, d) = rig.check(&read6(Transfer::Variable(512), false), &[]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::BLANK_CHECK, Asc::END_OF_DATA_DETECTED)
    );
    assert_eq!(residue(&s), 512);
    assert!(d.is_empty());
}

#[test]
fn btape_append_and_backspace_across_filemarks() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // btape: label (64512 bytes), data blocks, EOF, then append after reopening at EOD.
    rig.good(&write6(Transfer::Variable(64512)), &record(7, 64512));
    rig.good(&write_filemarks(1, false), &[]);
    rig.good(&REWIND, &[]);
    rig.good(&space6(SpaceCode::EndOfData, 0), &[]);
    assert_eq!(
        long_position(&rig),
        (0, 2, 1),
        "EOD after append keeps the file count"
    );
    rig.good(&write6(Transfer::Variable(1 << 20)), &record(8, 1 << 20));
    rig.good(&write_filemarks(2, false), &[]);
    assert_eq!(long_position(&rig), (0, 5, 3));
    // bsf 2 then fsf 1: after the first of the two filemarks.
    rig.good(&space6(SpaceCode::Filemarks, -2), &[]);
    assert_eq!(long_position(&rig), (0, 3, 1));
    rig.good(&space6(SpaceCode::Filemarks, 1), &[]);
    assert_eq!(long_position(&rig), (0, 4, 2));
    // bsr across a filemark stops on it.
    let (s, _) = rig.check(&space6(SpaceCode::Blocks, -1), &[]);
    assert!(s.filemark);
    assert_eq!(residue(&s), -1);
    assert_eq!(long_position(&rig), (0, 3, 1));
    // Reading the filemark: FILEMARK, position after it.
    let (s, _) = rig.check(&read6(Transfer::Variable(1 << 20), true), &[]);
    assert!(s.filemark);
    assert_eq!(residue(&s), 1 << 20);
    assert_eq!(long_position(&rig), (0, 4, 2));
}

#[test]
fn write_filemarks_immed_and_zero_count() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let before = rig.saved.lock().unwrap().len();
    rig.good(&write6(Transfer::Variable(10)), &record(1, 10));
    rig.good(&write_filemarks(1, true), &[]);
    assert_eq!(
        rig.saved.lock().unwrap().len(),
        before,
        "IMMED: no synchronising point"
    );
    let synced = rig.with_drive(|d| d.medium().unwrap().partitions()[0].synced_objects());
    assert_eq!(synced, 0);
    rig.good(&write_filemarks(0, false), &[]);
    assert_eq!(rig.saved.lock().unwrap().len(), before + 1);
    let synced = rig.with_drive(|d| d.medium().unwrap().partitions()[0].synced_objects());
    assert_eq!(synced, 2);
    let (s, _) = rig.check(&[0x10, 0x02, 0, 0, 1, 0], &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB, "setmarks");
}

#[test]
fn early_warning_then_volume_overflow() {
    // 100 KiB cartridge: early warning at 98 %.
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, 100 * 1024);
    for i in 0..9 {
        rig.good(
            &write6(Transfer::Variable(10 * 1024)),
            &record(i, 10 * 1024),
        );
    }
    // 90 KiB used; the next 10 KiB reaches 100 KiB: past early warning, written.
    let (s, _) = rig.check(
        &write6(Transfer::Variable(10 * 1024)),
        &record(9, 10 * 1024),
    );
    assert_eq!(
        (s.key, s.asc, s.eom),
        (
            SenseKey::NO_SENSE,
            Asc::END_OF_PARTITION_MEDIUM_DETECTED,
            true
        )
    );
    assert_eq!(s.information, Some(0));
    assert_eq!(long_position(&rig).1, 10);
    let (_, _, bop, eop) = position(&rig);
    assert!(!bop && eop, "EOP/BPEW at EOD beyond early warning");
    // Full: VOLUME OVERFLOW, nothing written, residue = the record.
    let (s, _) = rig.check(&write6(Transfer::Variable(1)), &[1]);
    assert_eq!(
        (s.key, s.asc, s.eom),
        (
            SenseKey::VOLUME_OVERFLOW,
            Asc::END_OF_PARTITION_MEDIUM_DETECTED,
            true
        )
    );
    assert_eq!(residue(&s), 1);
    assert_eq!(long_position(&rig).1, 10);
    // Filemarks still fit (they take no space), reported with EOM.
    let (s, _) = rig.check(&write_filemarks(1, false), &[]);
    assert!(s.eom && s.key == SenseKey::NO_SENSE);
}

#[test]
fn write_protect_and_read_only_generations() {
    let rig = Rig::empty("ibm-td9");
    let mut c = cartridge("WP0001L9", MediaType::Lto9, GB);
    c.set_write_protected(true);
    rig.insert(c).unwrap();
    rig.run(&TEST_UNIT_READY, &[]);
    let m = rig.good(&mode_sense6(0, 12), &[]);
    assert_eq!(m[2] & 0x80, 0x80, "WP bit");
    let (s, _) = rig.check(&write6(Transfer::Variable(4)), &[1, 2, 3, 4]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DATA_PROTECT, Asc::WRITE_PROTECTED)
    );
    let (s, _) = rig.check(&write_filemarks(1, false), &[]);
    assert_eq!(s.asc, Asc::WRITE_PROTECTED);
    let (s, _) = rig.check(&[0x19, 0, 0, 0, 0, 0], &[]);
    assert_eq!(s.asc, Asc::WRITE_PROTECTED);
    // TapeAlert flag 09h (write protect), cleared by reading page 2Eh.
    let page = rig.good(&log_sense(0x12, 255), &[]);
    assert_eq!(page[8] & 0x80, 0, "flag 1 clear");
    assert_eq!(page[9], 0x80, "flag 9 set (msb-first)");
    let page = rig.good(&log_sense(0x2E, 255), &[]);
    assert_eq!(page[4 + 8 * 5 + 4], 1, "flag 9 in page 2Eh");
    let page = rig.good(&log_sense(0x2E, 255), &[]);
    assert_eq!(page[4 + 8 * 5 + 4], 0, "reading cleared it");
    // An LTO-7 drive reads LTO-5 but does not write it.
    let rig = Rig::loaded("ibm-td7", MediaType::Lto5, GB);
    let m = rig.good(&mode_sense6(0, 12), &[]);
    assert_eq!(m[2] & 0x80, 0x80);
    let (s, _) = rig.check(&write6(Transfer::Variable(1)), &[1]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DATA_PROTECT, Asc::new(0x30, 0x05))
    );
    let (s, _) = rig.check(&read6(Transfer::Variable(10), false), &[]);
    assert_eq!(s.key, SenseKey::BLANK_CHECK);
}

#[test]
fn worm_appends_only() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9Worm, GB);
    rig.good(&write6(Transfer::Variable(10)), &record(1, 10));
    rig.good(&write_filemarks(1, false), &[]);
    rig.good(&write6(Transfer::Variable(10)), &record(2, 10));
    rig.good(&REWIND, &[]);
    let (s, _) = rig.check(&write6(Transfer::Variable(10)), &record(3, 10));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DATA_PROTECT, Asc::new(0x30, 0x0C))
    );
    let (s, _) = rig.check(&[0x04, 0, 0, 0, 0, 0], &[]);
    assert_eq!(s.asc, Asc::new(0x30, 0x0C), "no format on WORM");
    rig.good(&space6(SpaceCode::EndOfData, 0), &[]);
    rig.good(&write6(Transfer::Variable(10)), &record(4, 10));
    let m = rig.good(&mode_sense6(0x1D, 255), &[]);
    assert_eq!(&m[12..14], &[0x1D, 30]);
    assert_eq!(m[14] & 1, 1, "WORMM");
}

#[test]
fn insert_remove_and_prevent() {
    let rig = Rig::empty("ibm-td9");
    let (c, e) = rig
        .insert(cartridge("OLD001L7", MediaType::Lto7, GB))
        .unwrap_err();
    assert_eq!(
        e,
        InsertError::Incompatible {
            media: MediaType::Lto7
        }
    );
    assert_eq!(c.barcode().as_str(), "OLD001L7");
    rig.insert(cartridge("NEW001L8", MediaType::Lto8, GB))
        .unwrap();
    let (_, e) = rig
        .insert(cartridge("NEW002L9", MediaType::Lto9, GB))
        .unwrap_err();
    assert_eq!(e, InsertError::Occupied);
    // Both nexuses learn of the new medium.
    for n in [rig.nexus.clone(), rig.other.clone()] {
        let r = rig.run_as(&n, &TEST_UNIT_READY, &[]);
        assert_eq!(
            sense_of(&r).unwrap().asc,
            Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
        );
    }
    rig.good(&write6(Transfer::Variable(5)), &[1, 2, 3, 4, 5]);
    // PREVENT from the other nexus blocks removal; its nexus loss releases it.
    assert_eq!(
        rig.run_as(&rig.other, &prevent_allow_medium_removal(true), &[])
            .status,
        Status::Good
    );
    assert_eq!(rig.remove().unwrap_err(), RemoveError::Prevented);
    let (s, _) = rig.check(&[0x1E, 0, 0, 0, 2, 0], &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    rig.good(&prevent_allow_medium_removal(false), &[]); // ALLOW from this nexus changes nothing
    assert_eq!(rig.remove().unwrap_err(), RemoveError::Prevented);
    use reel_scsi::LogicalUnit;
    rig.device.nexus_lost(&rig.other);
    // UNLOAD: not ready, INITIALIZING COMMAND REQUIRED; LOAD threads again.
    rig.good(&UNLOAD, &[]);
    assert_eq!(rig.with_drive(|d| d.state()), DriveState::Unloaded);
    let (s, _) = rig.check(&TEST_UNIT_READY, &[]);
    assert_eq!(
        (s.key, s.asc),
        (
            SenseKey::NOT_READY,
            Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_COMMAND_REQUIRED
        )
    );
    rig.good(&LOAD, &[]);
    rig.good(&TEST_UNIT_READY, &[]);
    let d = rig.good(&read6(Transfer::Variable(5), false), &[]);
    assert_eq!(&d[..], &[1, 2, 3, 4, 5]);
    let saves = rig.saved.lock().unwrap().len();
    let c = rig.remove().unwrap();
    assert_eq!(rig.saved.lock().unwrap().len(), saves + 1);
    assert!(!c.is_loaded());
    assert_eq!(
        c.partitions()[0].synced_objects(),
        1,
        "synchronised on removal"
    );
    let (s, _) = rig.check(&TEST_UNIT_READY, &[]);
    assert_eq!(s.asc, Asc::MEDIUM_NOT_PRESENT);
    assert_eq!(rig.remove().unwrap_err(), RemoveError::Empty);
    // A LU reset clears every prevention.
    rig.insert(c).unwrap();
    rig.run(&TEST_UNIT_READY, &[]);
    rig.good(&prevent_allow_medium_removal(true), &[]);
    rig.device
        .task_management(reel_scsi::TaskManagement::LogicalUnitReset, &rig.nexus);
    assert!(rig.remove().is_ok());
}

#[test]
fn ltfs_format_two_partitions_and_switch() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, 20 * GB);
    // MODE SENSE(10) page 11h with block descriptor, as LTFS reads it.
    let m = rig.good(&[0x5A, 0, 0x11, 0, 0, 0, 0, 0x01, 0, 0], &[]);
    assert_eq!(m[7], 8, "block descriptor length");
    let page = &m[16..];
    assert_eq!(page[0], 0x11);
    assert_eq!(page[1], 14, "6 + 4 partition size descriptors");
    assert_eq!(page[2], 3, "maximum additional partitions");
    // LTFS: 1 additional partition, IDP, units of 10^9 bytes: 1 GB index, rest data.
    ltfs_two_partitions(&rig);
    let caps = rig.with_drive(|d| d.medium().unwrap().info().partition_capacities().to_vec());
    assert_eq!(caps, [GB, 19 * GB]);
    // Write the index in partition 0 and data in partition 1 (LOCATE(16) with CP).
    rig.good(&write6(Transfer::Variable(100)), &record(1, 100));
    rig.good(&write_filemarks(1, false), &[]);
    rig.good(&locate16(LocateDestination::Object(0), Some(1)), &[]);
    assert_eq!(long_position(&rig), (1, 0, 0));
    rig.good(&write6(Transfer::Variable(200)), &record(2, 200));
    rig.good(&write_filemarks(1, false), &[]);
    rig.good(&write6(Transfer::Variable(300)), &record(3, 300));
    // READ POSITION long, extended.
    assert_eq!(long_position(&rig), (1, 3, 1));
    let ext = rig.good(&read_position(PositionForm::Extended), &[]);
    assert_eq!(ext[1], 1);
    assert_eq!(u16::from_be_bytes([ext[2], ext[3]]), 28);
    assert_eq!(u64::from_be_bytes(ext[8..16].try_into().unwrap()), 3);
    // LOCATE(16) to a file: the BOP side of filemark 0 of partition 1.
    rig.good(&locate16(LocateDestination::File(0), None), &[]);
    assert_eq!(long_position(&rig), (1, 1, 0));
    rig.good(&space6(SpaceCode::Filemarks, 1), &[]);
    let d = rig.good(&read6(Transfer::Variable(300), false), &[]);
    assert_eq!(&d[..], &record(3, 300)[..]);
    // To EOD of partition 0, then a missing file.
    rig.good(&locate16(LocateDestination::EndOfData, Some(0)), &[]);
    assert_eq!(long_position(&rig), (0, 2, 1));
    let (s, _) = rig.check(&locate16(LocateDestination::File(5), None), &[]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::BLANK_CHECK, Asc::END_OF_DATA_DETECTED)
    );
    // LOCATE(10) with CP, and a partition that does not exist.
    rig.good(&locate10(1, Some(1)), &[]);
    assert_eq!(long_position(&rig), (1, 1, 0));
    let (s, _) = rig.check(&locate10(0, Some(3)), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    // Tape capacity page 31h: partition 1 max = 19000 MB.
    let page = rig.good(&log_sense(0x31, 255), &[]);
    assert_eq!(&page[4 + 24..4 + 28], &[0, 4, 0x03, 4]);
    assert_eq!(
        u32::from_be_bytes(page[4 + 28..4 + 32].try_into().unwrap()),
        19_000
    );
    // FORMAT 0 makes one partition again.
    rig.good(&REWIND, &[]);
    rig.good(&[0x04, 0, 0x00, 0, 0, 0], &[]);
    let caps = rig.with_drive(|d| d.medium().unwrap().info().partition_capacities().to_vec());
    assert_eq!(caps, [20 * GB]);
}

#[test]
fn ltfs_volume_coherency_attributes_per_partition() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, 20 * GB);
    rig.good(&mode_select6(0), &[]);
    // Two partitions via SDP.
    let m = rig.good(&mode_sense6(0x11, 255), &[]);
    let mut list = m.to_vec();
    list[0] = 0;
    list[12 + 3] = 1;
    list[12 + 4] = 0x40 | (list[12 + 4] & 0x07);
    rig.good(&mode_select6(list.len() as u8), &list);
    rig.good(&[0x04, 0, 0x02, 0, 0, 0], &[]);
    // Absent attribute: INVALID FIELD IN CDB (LTFS learns it is not set).
    let read_attr = |partition: u8, id: u16| {
        let i = id.to_be_bytes();
        [
            0x8C, 0, 0, 0, 0, 0, 0, partition, i[0], i[1], 0, 0, 0x10, 0, 0, 0,
        ]
    };
    let (s, _) = rig.check(&read_attr(0, 0x080C), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    let write_vci = |partition: u8, vci: &[u8]| {
        let mut list = ((5 + vci.len()) as u32).to_be_bytes().to_vec();
        list.extend_from_slice(&[0x08, 0x0C, 0x00]);
        list.extend_from_slice(&(vci.len() as u16).to_be_bytes());
        list.extend_from_slice(vci);
        let l = (list.len() as u32).to_be_bytes();
        let cdb = [
            0x8D, 0x01, 0, 0, 0, 0, 0, partition, 0, 0, l[0], l[1], l[2], l[3], 0, 0,
        ];
        rig.good(&cdb, &list);
    };
    write_vci(0, b"index-partition-vci");
    write_vci(1, b"data-partition-vci");
    for (p, expect) in [(0, &b"index-partition-vci"[..]), (1, b"data-partition-vci")] {
        let d = rig.good(&read_attr(p, 0x080C), &[]);
        assert_eq!(&d[4..6], &[0x08, 0x0C]);
        assert_eq!(d[6], 0x00, "binary, writable");
        assert_eq!(usize::from(u16::from_be_bytes([d[7], d[8]])), expect.len());
        assert_eq!(&d[9..9 + expect.len()], expect);
    }
    // The shadow identifiers stay hidden and cannot be written.
    let list = rig.good(
        &[0x8C, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x10, 0, 0, 0],
        &[],
    );
    let ids: Vec<u16> = list[4..]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    assert!(ids.contains(&0x080C) && ids.contains(&0x0000));
    assert!(ids.iter().all(|id| !(0x17F0..=0x17FF).contains(id)));
    let bad = [0, 0, 0, 6, 0x17, 0xF1, 0, 0, 1, 9];
    let (s, _) = rig.check(&[0x8D, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0], &bad);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    // Read-only attribute refused, partition list.
    let ro = [0, 0, 0, 13, 0x00, 0x03, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1];
    let (s, _) = rig.check(&[0x8D, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0], &ro);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
    let d = rig.good(
        &[0x8C, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0],
        &[],
    );
    assert_eq!(&d[..], &[0, 2, 0, 2]);
    // PBS reads everything from attribute 0.
    let d = rig.good(&[0x8C, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0], &[]);
    let len = u32::from_be_bytes(d[..4].try_into().unwrap()) as usize;
    assert_eq!(len, d.len() - 4);
}

#[test]
fn report_density_support_forms() {
    let rig = Rig::loaded("ibm-td8", MediaType::Lto8, GB);
    let d = rig.good(&[0x44, 0, 0, 0, 0, 0, 0, 0x04, 0, 0], &[]);
    let len = usize::from(u16::from_be_bytes([d[0], d[1]]));
    assert_eq!(len + 2, d.len());
    assert_eq!((d.len() - 4) % 52, 0);
    let codes: Vec<(u8, bool, bool)> = d[4..]
        .chunks(52)
        .map(|c| (c[0], c[2] & 0x80 != 0, c[2] & 0x20 != 0))
        .collect();
    assert_eq!(
        codes,
        [(0x5C, true, false), (0x5D, true, false), (0x5E, true, true)]
    );
    assert_eq!(&d[4 + 2 * 52 + 16..4 + 2 * 52 + 24], b"LTO-CVE ");
    assert_eq!(
        u32::from_be_bytes(d[4 + 2 * 52 + 12..4 + 2 * 52 + 16].try_into().unwrap()),
        12_000_000
    );
    let d = rig.good(&[0x44, 0x01, 0, 0, 0, 0, 0, 0x04, 0, 0], &[]);
    assert_eq!(d.len(), 4 + 52);
    assert_eq!(d[4], 0x5E);
    let d = rig.good(&[0x44, 0x02, 0, 0, 0, 0, 0, 0x04, 0, 0], &[]);
    assert_eq!((d.len() - 4) % 56, 0);
    assert_eq!(d[4], 0x78, "LTO-7 data medium type first");
}

#[test]
fn log_pages_for_pbs_and_ltfs() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    rig.good(&write6(Transfer::Variable(1000)), &record(1, 1000));
    let supported = rig.good(&[0x4D, 0, 0, 0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(
        &supported[4..],
        &[0x00, 0x0C, 0x11, 0x12, 0x17, 0x1B, 0x2E, 0x31, 0x32]
    );
    // DT device status: DINIT (page valid for PBS), medium present, threaded.
    let page = rig.good(&log_sense(0x11, 255), &[]);
    assert_eq!(&page[4..8], &[0, 0, 0x03, 4]);
    assert_eq!(page[8] & 0x01, 1);
    assert_eq!(page[9] & 0x13, 0x13);
    // Volume statistics: page valid, mounts.
    let page = rig.good(&log_sense(0x17, 255), &[]);
    assert_eq!(&page[4..9], &[0, 0, 0x03, 1, 1]);
    assert_eq!(&page[9..13], &[0, 1, 0x03, 4]);
    assert_eq!(u32::from_be_bytes(page[13..17].try_into().unwrap()), 1);
    // Sequential-access page counts host bytes; LOG SELECT PCR resets it.
    let page = rig.good(&log_sense(0x0C, 255), &[]);
    assert_eq!(u64::from_be_bytes(page[8..16].try_into().unwrap()), 1000);
    rig.good(&[0x4C, 0x02, 0x40, 0, 0, 0, 0, 0, 0, 0], &[]);
    let page = rig.good(&log_sense(0x0C, 255), &[]);
    assert_eq!(u64::from_be_bytes(page[8..16].try_into().unwrap()), 0);
}

#[test]
fn mode_pages_compression_and_informational_exceptions() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let m = rig.good(&mode_sense6(0x0F, 255), &[]);
    assert_eq!(&m[12..14], &[0x0F, 14]);
    assert_eq!(m[14] & 0xC0, 0xC0, "DCE and DCC");
    assert_eq!(&m[16..20], &[0, 0, 0, 1]);
    // mt compression 0
    let mut list = m.to_vec();
    list[0] = 0;
    list[14] &= 0x7F;
    rig.good(&mode_select6(list.len() as u8), &list);
    let m = rig.good(&mode_sense6(0x0F, 255), &[]);
    assert_eq!(m[14] & 0x80, 0);
    // Page 1Ch: DEXCPT changeable, MRIE 3.
    let m = rig.good(&mode_sense6(0x1C, 255), &[]);
    assert_eq!(&m[12..16], &[0x1C, 10, 0, 3]);
    let m = rig.good(&[0x1A, 0, 0x40 | 0x1C, 0, 255, 0], &[]);
    assert_eq!(&m[14..16], &[0x0C, 0x0F], "changeable mask");
    // All pages and subpages, MODE SENSE(10).
    let all = rig.good(&[0x5A, 0x08, 0x3F, 0xFF, 0, 0, 0, 0x10, 0, 0], &[]);
    assert_eq!(
        usize::from(u16::from_be_bytes([all[0], all[1]])) + 2,
        all.len()
    );
    // The control data protection subpage F0h exists and LBP is not changeable.
    let m = rig.good(&[0x5A, 0x08, 0x0A, 0xF0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(&m[8..12], &[0x4A, 0xF0, 0, 28]);
}

#[test]
fn supported_opcodes_list_the_tape_commands_with_timeouts() {
    let rig = Rig::empty("ibm-td9");
    let d = rig.good(&[0xA3, 0x0C, 0x80, 0, 0, 0, 0, 0, 0x40, 0, 0, 0], &[]);
    let len = u32::from_be_bytes(d[..4].try_into().unwrap()) as usize;
    assert_eq!(len + 4, d.len());
    let mut ops = Vec::new();
    let mut i = 4;
    while i < d.len() {
        ops.push(d[i]);
        i += 20;
    }
    for op in [
        0x01, 0x04, 0x05, 0x08, 0x0A, 0x0B, 0x10, 0x11, 0x19, 0x1B, 0x1E, 0x2B, 0x34, 0x44, 0x82,
        0x8C, 0x8D, 0x91, 0x92, 0xA2, 0xB5,
    ] {
        assert!(ops.contains(&op), "{op:#x}");
    }
    // One command: LOCATE(16) with its timeout.
    let one = rig.good(&[0xA3, 0x0C, 0x81, 0x92, 0, 0, 0, 0, 0, 64, 0, 0], &[]);
    assert_eq!(one[1] & 0x07, 3);
    assert_eq!(
        u32::from_be_bytes(one[4 + 16 + 8..4 + 16 + 12].try_into().unwrap()),
        2400
    );
    // Not implemented commands: INVALID COMMAND OPERATION CODE.
    for op in [0x0F, 0x13, 0x14, 0x80, 0x88, 0x8A, 0x3B] {
        let mut cdb = vec![op];
        cdb.resize(16, 0);
        let (s, _) = rig.check(&cdb, &[]);
        assert_eq!(s.asc, Asc::INVALID_COMMAND_OPERATION_CODE, "{op:#x}");
    }
}

#[test]
fn diagnostics_and_read_buffer() {
    let rig = Rig::empty("ibm-td9");
    rig.good(&[0x1D, 0x04, 0, 0, 0, 0], &[]);
    let d = rig.good(&[0x1C, 0x01, 0, 0, 64, 0], &[]);
    assert_eq!(&d[..], &[0, 0, 0, 1, 0]);
    rig.good(&[0x1D, 0x10, 0, 0, 4, 0], &[0, 0, 0, 0]);
    let d = rig.good(&[0x1C, 0, 0, 0, 64, 0], &[]);
    assert_eq!(&d[..], &[0, 0, 0, 1, 0]);
    let d = rig.good(&[0x3C, 0x03, 0, 0, 0, 0, 0, 0, 4, 0], &[]);
    assert_eq!(&d[..], &[0, 0, 0, 0]);
    let (s, _) = rig.check(&[0x3C, 0x1C, 0, 0, 0, 0, 0, 0, 4, 0], &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
}

#[test]
fn immediate_rewind_space16_and_refused_sequential_filemarks() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    rig.good(&[0x01, 0x01, 0, 0, 0, 0], &[]);
    let (s, _) = rig.check(&space6(SpaceCode::SequentialFilemarks, 1), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    rig.good(&space16(SpaceCode::EndOfData, 0), &[]);
    let (s, _) = rig.check(&space16(SpaceCode::Blocks, -1), &[]);
    assert_eq!(s.asc, Asc::BEGINNING_OF_PARTITION_MEDIUM_DETECTED);
}

/// The extended READ POSITION form (08h): (objects in buffer, bytes in buffer, first, last).
fn buffer_counts_extended(rig: &Rig) -> (u32, u64, u64, u64) {
    let d = rig.good(&read_position(PositionForm::Extended), &[]);
    assert_eq!(d.len(), 32);
    (
        u32::from_be_bytes([0, d[5], d[6], d[7]]),
        u64::from_be_bytes(d[24..32].try_into().unwrap()),
        u64::from_be_bytes(d[8..16].try_into().unwrap()),
        u64::from_be_bytes(d[16..24].try_into().unwrap()),
    )
}

/// The short READ POSITION form (00h): (objects in buffer, bytes in buffer, BCU, BYCU).
fn buffer_counts_short(rig: &Rig) -> (u32, u32, bool, bool) {
    let d = rig.good(&read_position(PositionForm::Short), &[]);
    (
        u32::from_be_bytes([0, d[13], d[14], d[15]]),
        u32::from_be_bytes(d[16..20].try_into().unwrap()),
        d[0] & 0x20 != 0,
        d[0] & 0x10 != 0,
    )
}

fn synced_objects(rig: &Rig) -> u64 {
    rig.with_drive(|d| d.medium().unwrap().partitions()[0].synced_objects())
}

#[test]
fn buffered_mode_zero_makes_every_write_durable_before_good() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // Buffered mode 1 (the default): a WRITE is GOOD before it is durable.
    rig.good(&write6(Transfer::Variable(1000)), &record(1, 1000));
    assert_eq!(synced_objects(&rig), 0);
    // mt drvbuffer 0: MODE SELECT with BUFFERED MODE 0 in the header, echoed by MODE SENSE.
    let list = [0, 0, 0x00, 0];
    rig.good(&mode_select6(4), &list);
    let m = rig.good(&mode_sense6(0, 12), &[]);
    assert_eq!(m[2] & 0x70, 0, "buffered mode 0");
    // Every WRITE is now on the medium when it completes, the earlier one with it.
    rig.good(&write6(Transfer::Variable(500)), &record(2, 500));
    assert_eq!(synced_objects(&rig), 2);
    assert_eq!(buffer_counts_short(&rig), (0, 0, false, false));
    // Fixed-block writes too.
    rig.good(
        &mode_select6(12),
        &[0, 0, 0x00, 8, 0, 0, 0, 0, 0, 0, 0x10, 0],
    );
    rig.good(&write6(Transfer::Fixed(3)), &record(3, 3 * 4096));
    assert_eq!(synced_objects(&rig), 5);
    // Back to buffered mode 1: writes are buffered again.
    rig.good(&mode_select6(12), &[0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
    rig.good(&write6(Transfer::Variable(10)), &record(4, 10));
    assert_eq!(synced_objects(&rig), 5);
}

#[test]
fn read_position_reports_the_unsynced_objects_and_bytes() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    assert_eq!(buffer_counts_short(&rig), (0, 0, false, false));
    assert_eq!(buffer_counts_extended(&rig), (0, 0, 0, 0));
    rig.good(&write6(Transfer::Variable(1000)), &record(1, 1000));
    rig.good(&write6(Transfer::Variable(24)), &record(2, 24));
    rig.good(&write_filemarks(1, true), &[]);
    // Two records and a filemark written, none synchronised: 3 objects, 1024 bytes. The last
    // logical object location is the next object to go to the medium (SSC-4 READ POSITION).
    assert_eq!(buffer_counts_short(&rig), (3, 1024, false, false));
    assert_eq!(buffer_counts_extended(&rig), (3, 1024, 3, 0));
    let d = rig.good(&read_position(PositionForm::Short), &[]);
    assert_eq!(u32::from_be_bytes(d[4..8].try_into().unwrap()), 3);
    assert_eq!(u32::from_be_bytes(d[8..12].try_into().unwrap()), 0);
    // WRITE FILEMARKS(0) without IMMED is a synchronising point: the buffer is empty.
    rig.good(&write_filemarks(0, false), &[]);
    assert_eq!(buffer_counts_short(&rig), (0, 0, false, false));
    assert_eq!(buffer_counts_extended(&rig), (0, 0, 3, 3));
    rig.good(&write6(Transfer::Variable(7)), &record(3, 7));
    assert_eq!(buffer_counts_extended(&rig), (1, 7, 4, 3));
    // Truncating unsynchronised objects takes them out of the buffer.
    rig.good(&space6(SpaceCode::Blocks, -1), &[]);
    rig.good(&write6(Transfer::Variable(5)), &record(4, 5));
    assert_eq!(buffer_counts_extended(&rig), (1, 5, 4, 3));
    rig.good(&REWIND, &[]);
    assert_eq!(buffer_counts_extended(&rig), (0, 0, 0, 0));
}
