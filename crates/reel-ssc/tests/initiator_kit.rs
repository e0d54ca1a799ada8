//! The initiator kit (`reel_scsi::initiator`) against the drive that decodes its CDBs: every
//! tape builder does what it names and every tape answer parses back to what was done.
//! reel-scsi cannot depend on reel-ssc, so the SSC half of the kit's round trip lives here.

mod common;

use common::*;
use proptest::prelude::*;
use reel_media::MediaType;
use reel_scsi::SenseKey;

const GB: u64 = 1_000_000_000;

/// One step of a tape session as an initiator would send it.
#[derive(Clone, Debug)]
enum Step {
    Write(u16),
    Filemarks(u8),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![
            3 => (1u16..2048).prop_map(Step::Write),
            1 => (1u8..3).prop_map(Step::Filemarks),
        ],
        1..24,
    )
}

/// All three READ POSITION forms, parsed, must agree on the partition and the object.
fn positions(rig: &Rig) -> [Position; 3] {
    [
        PositionForm::Short,
        PositionForm::Long,
        PositionForm::Extended,
    ]
    .map(|form| {
        let data = rig.good(&read_position(form), &[]);
        let p = parse_read_position(form, &data).unwrap();
        assert_eq!(p.partition, 0);
        p
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn positions_spaces_and_locates_agree_with_what_was_written(steps in steps(), pick: prop::sample::Index) {
        let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
        // (object, file) after each logical object, from an independent count.
        let (mut object, mut file) = (0u64, 0u64);
        let mut records = Vec::new(); // (object, file, length) of every record
        for step in &steps {
            match *step {
                Step::Write(len) => {
                    let data = record(object as u8, usize::from(len));
                    rig.good(&write6(Transfer::Variable(u32::from(len))), &data);
                    records.push((object, file, len));
                    object += 1;
                }
                Step::Filemarks(n) => {
                    rig.good(&write_filemarks(u32::from(n), false), &[]);
                    object += u64::from(n);
                    file += u64::from(n);
                }
            }
            let [short, long, extended] = positions(&rig);
            prop_assert_eq!((short.object, long.object, extended.object), (object, object, object));
            prop_assert_eq!(long.file, Some(file));
            prop_assert!(!short.bop && !long.bop);
        }

        // REWIND: beginning of partition in every form.
        rig.good(&REWIND, &[]);
        prop_assert!(positions(&rig).iter().all(|p| p.bop && p.object == 0));

        // LOCATE(10) and LOCATE(16) to a record's object; it reads back whole.
        if !records.is_empty() {
            let (at, at_file, len) = records[pick.index(records.len())];
            rig.good(&locate10(at as u32, None), &[]);
            prop_assert_eq!(long_position(&rig), (0, at, at_file));
            rig.good(&REWIND, &[]);
            rig.good(&locate16(LocateDestination::Object(at), Some(0)), &[]);
            let data = rig.good(&read6(Transfer::Variable(u32::from(len)), false), &[]);
            prop_assert_eq!(data.len(), usize::from(len));
            prop_assert_eq!(&data[..], &record(at as u8, usize::from(len))[..]);
        }

        // SPACE to end of data lands where writing stopped; SPACE(16) back over the last
        // objects and SPACE(6) forward again.
        rig.good(&space6(SpaceCode::EndOfData, 0), &[]);
        prop_assert_eq!(long_position(&rig), (0, object, file));
        rig.good(&REWIND, &[]);
        rig.good(&space16(SpaceCode::EndOfData, 0), &[]);
        prop_assert_eq!(long_position(&rig).1, object);
        if file > 0 {
            rig.good(&REWIND, &[]);
            rig.good(&space6(SpaceCode::Filemarks, file as i32), &[]);
            prop_assert_eq!(long_position(&rig).2, file);
            rig.good(&locate16(LocateDestination::EndOfData, None), &[]);
            prop_assert_eq!(long_position(&rig).1, object);
        }
    }
}

#[test]
fn block_limits_and_block_mode_through_the_parsers() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let limits = parse_block_limits(&rig.good(&READ_BLOCK_LIMITS, &[])).unwrap();
    assert_eq!((limits.max, limits.min), (8 << 20, 1));

    // Variable-length records by default; MODE SELECT a fixed block length built from the
    // drive's own MODE SENSE, read it back, and switch back to variable.
    let mode = parse_mode_sense6(&rig.good(&mode_sense6(0, 12), &[])).unwrap();
    assert_eq!(mode.block_length(), Some(0));
    assert_eq!(mode.device_specific & WRITE_PROTECT, 0);
    let list = mode.select_block_length(4096);
    rig.good(&mode_select6(list.len() as u8), &list);
    let fixed = parse_mode_sense6(&rig.good(&mode_sense6(0, 12), &[])).unwrap();
    assert_eq!(fixed.block_length(), Some(4096));
    assert_eq!(
        fixed.block_descriptor.map(|d| d.density),
        mode.block_descriptor.map(|d| d.density)
    );
    rig.good(&write6(Transfer::Fixed(2)), &record(3, 2 * 4096));
    let list = fixed.select_block_length(0);
    rig.good(&mode_select6(list.len() as u8), &list);
    rig.good(&REWIND, &[]);
    let data = rig.good(&read6(Transfer::Variable(16384), true), &[]);
    assert_eq!(
        data.len(),
        4096,
        "each fixed block is a record of the block length"
    );

    // UNLOAD, then the drive is not ready until LOAD.
    rig.good(&UNLOAD, &[]);
    let (sense, _) = rig.check(&TEST_UNIT_READY, &[]);
    assert_eq!(sense.key, SenseKey::NOT_READY);
    rig.good(&LOAD, &[]);
    rig.good(&TEST_UNIT_READY, &[]);
}
