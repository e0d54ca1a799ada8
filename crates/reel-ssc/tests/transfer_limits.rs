//! The drive's transfer limit: the largest record READ BLOCK LIMITS reports times the
//! fixed-block factor bounds what one command moves, so neither a WRITE's Data-Out nor a
//! fixed-block READ can make the drive hold more than that.

mod common;

use common::*;
use reel_media::MediaType;
use reel_scsi::{Asc, LogicalUnit, Request, Sense, SenseKey, Status, TaskAttribute, parse_sense};
use reel_ssc::MAX_TRANSFER_LENGTH;

const GB: u64 = 1_000_000_000;

/// MODE SELECT(6) with a block descriptor of `block` bytes (fixed mode).
fn set_block_length(rig: &Rig, block: u32) {
    let b = block.to_be_bytes();
    let list = [0, 0, 0x10, 8, 0, 0, 0, 0, 0, b[1], b[2], b[3]];
    rig.good(&mode_select6(12), &list);
}

#[test]
fn the_limit_is_the_largest_record_times_the_fixed_factor() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let limits = rig.good(&READ_BLOCK_LIMITS, &[]);
    let max_record = u32::from_be_bytes([0, limits[1], limits[2], limits[3]]);
    assert_eq!(MAX_TRANSFER_LENGTH % max_record, 0);
    assert!(MAX_TRANSFER_LENGTH >= max_record);
    assert_eq!(rig.device.max_data_out(), MAX_TRANSFER_LENGTH);
    assert_eq!(rig.table.max_data_out([0; 8]), MAX_TRANSFER_LENGTH);
}

#[test]
fn a_fixed_read_beyond_the_limit_is_refused_before_the_tape_moves() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let block = 512 * 1024;
    set_block_length(&rig, block);
    rig.good(&write6(Transfer::Fixed(3)), &record(1, 3 * block as usize));
    rig.good(&REWIND, &[]);
    // 2^24 - 1 blocks of 512 KiB: 8 TiB asked for in one command.
    let (s, data) = rig.check(&read6(Transfer::Fixed(0xFF_FFFF), false), &[]);
    assert_eq!(s, Sense::invalid_field_in_cdb(2, None));
    assert!(data.is_empty());
    assert_eq!(long_position(&rig).1, 0, "the tape did not move");
    // Exactly the limit is fine: it reads the three blocks and stops at end of data.
    let count = MAX_TRANSFER_LENGTH / block;
    let (s, data) = rig.check(&read6(Transfer::Fixed(count), false), &[]);
    assert_eq!(s.key, SenseKey::BLANK_CHECK);
    assert_eq!(data.len(), 3 * block as usize);
    // One block more than the limit is refused.
    rig.good(&REWIND, &[]);
    let (s, _) = rig.check(&read6(Transfer::Fixed(count + 1), false), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
}

#[test]
fn a_refused_write_is_answered_invalid_field_in_cdb_and_writes_nothing() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let response = rig.device.refuse_data_out(Request {
        nexus: &rig.nexus,
        cdb: &write6(Transfer::Variable(0xFF_FFFF)),
        data_out: Default::default(),
        data_in_len: 0,
        attribute: TaskAttribute::Simple,
    });
    assert_eq!(response.status, Status::CheckCondition);
    let sense = parse_sense(response.sense.as_deref().unwrap()).unwrap();
    assert_eq!(sense, Sense::invalid_field_in_cdb(2, None));
    assert_eq!(long_position(&rig).1, 0);
}
