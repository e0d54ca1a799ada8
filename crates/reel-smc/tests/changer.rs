//! The changer driven through a LunTable as mtx, the Linux ch driver and PBS drive it, with
//! fake drive bays.

mod common;

use common::*;
use reel_scsi::initiator::smc::{exchange_medium, move_medium};
use reel_scsi::initiator::spc;
use reel_scsi::{Asc, KeySpecific, SenseKey, Status};
use reel_smc::testing::BayEvent;
use reel_smc::{BayError, ChangerModel, Element, ElementType, Layout, OperatorError};

const L700: [&str; 3] = ["A00001L9", "A00002L9", "A00003L9"];

#[test]
fn inquiry_identifies_a_standalone_changer() {
    let rig = rig("stk-l700", None, &L700);
    let d = rig.good(&spc::inquiry(96));
    assert_eq!(d[0], 0x08, "peripheral device type: medium changer");
    assert_eq!(d[1], 0x80, "RMB");
    assert_eq!(d[6] & 0x08, 0, "MCHNGR is for attached changers");
    assert_eq!(&d[8..16], b"STK     ");
    assert_eq!(&d[16..32], b"L700            ");
    let serial = rig.good(&spc::inquiry_vpd(0x80, 255));
    assert_eq!(&serial[4..], b"CHG0000001");
    assert_eq!(rig.good(&[0, 0, 0, 0, 0, 0]), b"");
}

#[test]
fn mode_sense_pages_with_and_without_dbd() {
    let rig = rig("stk-l700", None, &L700);
    assert_eq!(
        assignment(&rig),
        [(0, 1), (1000, 100), (10, 20), (500, 4)],
        "STK: MT 0, ST 1000, IE 10, DT 500"
    );
    // Without DBD the answer is the same (a changer has no block descriptor).
    let d = rig.good(&spc::mode_sense6(0x1D, 255));
    assert_eq!(d[3], 0);
    // MODE SENSE(10), all pages: 0Ah (core), 1Dh, 1Eh, 1Fh.
    let d = rig.good(&[0x5A, 0x08, 0x3F, 0, 0, 0, 0, 0x10, 0, 0]);
    let mut at = 8;
    let mut pages = Vec::new();
    while at < d.len() {
        pages.push(d[at]);
        at += 2 + usize::from(d[at + 1]);
    }
    assert_eq!(pages, [0x0A, 0x1D, 0x1E, 0x1F]);
    // Device capabilities: moves and exchanges among ST, I/E and DT.
    let d = rig.good(&[0x1A, 0x08, 0x1F, 0, 255, 0]);
    assert_eq!(&d[4..6], &[0x1F, 0x12]);
    assert_eq!(d[6], 0x0E);
    assert_eq!(&d[8..12], &[0, 0x0E, 0x0E, 0x0E]);
    assert_eq!(&d[16..20], &[0, 0x0E, 0x0E, 0x0E]);
    // Saved values are not supported.
    let s = rig.check(&[0x1A, 0x08, 0xDD, 0, 255, 0]);
    assert_eq!(s.asc, Asc::SAVING_PARAMETERS_NOT_SUPPORTED);
    // Geometry page: one transport.
    let d = rig.good(&[0x1A, 0x08, 0x1E, 0, 255, 0]);
    assert_eq!(&d[4..], &[0x1E, 0x02, 0, 0]);
}

#[test]
fn read_element_status_all_types_in_address_order() {
    let rig = rig("stk-l700", None, &L700);
    let data = rig.good(&read_element_status(0, true, 0, 0xFFFF, false, 0xFFFFFF));
    let (first, count, _, descriptors) = parse_status(&data, false);
    assert_eq!(first, 0);
    assert_eq!(count, 1 + 20 + 4 + 100);
    let addresses: Vec<u16> = descriptors.iter().map(|d| d.address).collect();
    let mut sorted = addresses.clone();
    sorted.sort_unstable();
    assert_eq!(addresses, sorted);
    let types: Vec<u8> = descriptors.iter().map(|d| d.type_code).collect();
    assert_eq!(types[0], 1);
    assert!(types[1..21].iter().all(|&t| t == 3));
    assert!(types[21..25].iter().all(|&t| t == 4));
    assert!(types[25..].iter().all(|&t| t == 2));
    let slot = &descriptors[25];
    assert_eq!(slot.address, 1000);
    assert!(slot.full());
    assert_eq!(slot.flags & 0x08, 0x08, "ACCESS");
    assert_eq!(slot.tag().as_deref(), Some("A00001L9"));
    assert_eq!(&slot.primary.as_ref().unwrap()[32..], &[0, 0, 0, 0]);
    assert_eq!(slot.byte9 & 0x07, 1, "data medium");
    assert!(!slot.svalid());
    let empty = &descriptors[28];
    assert!(!empty.full());
    assert_eq!(empty.primary.as_deref(), Some(&[0u8; 36][..]));
    let ie = &descriptors[1];
    assert_eq!(ie.flags, 0x38, "INENAB, EXENAB, ACCESS, empty");
}

#[test]
fn read_element_status_ranges_and_types() {
    let rig = rig("ibm-3584", None, &L700);
    // Storage only, from address 0 (PBS starts at 0 for every type).
    let data = rig.good(&read_element_status(2, true, 0, 1000, false, 0x10000));
    let (first, count, _, d) = parse_status(&data, false);
    assert_eq!((first, count), (0x0401, 64));
    assert!(d.iter().all(|d| d.type_code == 2));
    // A starting address inside the range and a count.
    let data = rig.good(&read_element_status(2, false, 0x0402, 2, false, 0x10000));
    let (first, count, total, d) = parse_status(&data, false);
    assert_eq!((first, count, total), (0x0402, 2, 8 + 2 * 12));
    assert_eq!(d[0].tag(), None, "no VOLTAG, no tag field");
    // Type filter with a start beyond that type's range: nothing, GOOD.
    let data = rig.good(&read_element_status(4, true, 0x0200, 10, false, 0x10000));
    assert_eq!(&data, &[0, 0, 0, 0, 0, 0, 0, 0]);
    // Number of elements 0: an empty report.
    let data = rig.good(&read_element_status(0, true, 0, 0, false, 0x10000));
    assert_eq!(data.len(), 8);
    // Beyond every element: INVALID ELEMENT ADDRESS.
    let s = rig.check(&read_element_status(0, true, 0xF000, 1, false, 0x10000));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::INVALID_ELEMENT_ADDRESS)
    );
    // Element type code 5: invalid field, byte 1.
    let s = rig.check(&read_element_status(5, true, 0, 1, false, 0x10000));
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    assert_eq!(
        s.key_specific,
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 1,
            bit: Some(3)
        })
    );
}

#[test]
fn small_allocation_lengths_keep_full_counts() {
    let rig = rig("stk-l700", None, &L700);
    let full = rig.good(&read_element_status(0, true, 0, 0xFFFF, false, 0xFFFFFF));
    // mtx first asks for the header only; ch asks for 255 bytes, one element at a time.
    for allocation in [0u32, 8, 16, 100, 255, 1000] {
        let part = rig.good(&read_element_status(0, true, 0, 0xFFFF, false, allocation));
        assert_eq!(part.len(), (allocation as usize).min(full.len()));
        assert_eq!(
            &part[..],
            &full[..part.len()],
            "a prefix of the full report"
        );
    }
    let header = rig.good(&read_element_status(0, true, 0, 0xFFFF, false, 8));
    let available =
        usize::from(header[5]) << 16 | usize::from(header[6]) << 8 | usize::from(header[7]);
    assert_eq!(
        available,
        full.len() - 8,
        "byte count of report available is not cut"
    );
    assert_eq!(u16::from_be_bytes([header[2], header[3]]), 125);
    // The Linux ch driver: one element, 255 bytes, descriptor at offset 16.
    let d = rig.good(&read_element_status(2, true, 1000, 1, false, 255));
    assert_eq!(&d[16..18], &1000u16.to_be_bytes());
    assert_eq!(d[18] & 1, 1);
    assert_eq!(&d[28..36], b"A00001L9");
}

#[test]
fn mtx_load_unload_and_transfer() {
    let rig = rig("stk-l700", None, &L700);
    // mtx load 1 0: slot 1000 → drive 500.
    rig.good(&move_medium(0, 1000, 500));
    assert_eq!(rig.bays[0].loaded().as_deref(), Some("A00001L9"));
    assert_eq!(rig.barcode_at(500).as_deref(), Some("A00001L9"));
    assert_eq!(rig.barcode_at(1000), None);
    assert_eq!(
        rig.saved.lock().unwrap().len(),
        1,
        "saved before completing"
    );
    // Status shows the drive full with its source slot (mtx: "Storage Element 1 Loaded").
    let data = rig.good(&read_element_status(4, true, 0, 4, false, 0x10000));
    let (_, _, _, d) = parse_status(&data, false);
    assert!(d[0].full() && d[0].svalid());
    assert_eq!(d[0].source, 1000);
    assert_eq!(d[0].tag().as_deref(), Some("A00001L9"));
    // mtx unload 5 0: drive → another slot.
    rig.good(&move_medium(0, 500, 1004));
    assert_eq!(rig.bays[0].loaded(), None);
    assert_eq!(
        rig.bays[0].events(),
        [
            BayEvent::Load("A00001L9".into()),
            BayEvent::Unload("A00001L9".into())
        ]
    );
    // The source stays the slot it originally came from.
    let data = rig.good(&read_element_status(2, true, 1004, 1, false, 0x10000));
    let (_, _, _, d) = parse_status(&data, false);
    assert_eq!((d[0].svalid(), d[0].source), (true, 1000));
    // mtx transfer 2 7: slot → slot, the default transport or the real one.
    rig.good(&move_medium(0, 1001, 1006));
    assert_eq!(rig.barcode_at(1006).as_deref(), Some("A00002L9"));
    // A transport address that is not a transport: invalid element address.
    let s = rig.check(&move_medium(1000, 1006, 1007));
    assert_eq!(s.asc, Asc::INVALID_ELEMENT_ADDRESS);
    // Moving a cartridge onto itself is a no-op.
    rig.good(&move_medium(0, 1006, 1006));
    // mtx inventory, position.
    rig.good(&[0x07, 0, 0, 0, 0, 0]);
    rig.good(&[0x37, 0x01, 0x03, 0xE8, 0, 0, 0, 10, 0, 0]);
    rig.good(&[0x2B, 0, 0, 0, 0x03, 0xE8, 0, 0, 0, 0]);
    assert_eq!(
        rig.check(&[0x2B, 0, 0, 0, 0x7F, 0xFF, 0, 0, 0, 0]).asc,
        Asc::INVALID_ELEMENT_ADDRESS
    );
}

#[test]
fn move_errors_leave_the_inventory_unchanged() {
    let rig = rig("stk-l700", None, &L700);
    let before = rig.with(|c| c.inventory().clone());
    let s = rig.check(&move_medium(0, 1050, 1051));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::MEDIUM_SOURCE_ELEMENT_EMPTY)
    );
    let s = rig.check(&move_medium(0, 1000, 1001));
    assert_eq!(s.asc, Asc::MEDIUM_DESTINATION_ELEMENT_FULL);
    let s = rig.check(&move_medium(0, 1000, 7000));
    assert_eq!(s.asc, Asc::INVALID_ELEMENT_ADDRESS);
    let s = rig.check(&move_medium(0, 7000, 1000));
    assert_eq!(s.asc, Asc::INVALID_ELEMENT_ADDRESS);
    // Into the transport element.
    let s = rig.check(&move_medium(0, 1000, 0));
    assert_eq!(s.asc, Asc::INVALID_ELEMENT_ADDRESS);
    // INVERT is not supported.
    let mut cdb = move_medium(0, 1000, 1010);
    cdb[10] = 1;
    let s = rig.check(&cdb);
    assert_eq!(
        s.key_specific,
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 10,
            bit: Some(0)
        })
    );
    // The drive refuses: its host prevents removal.
    rig.good(&move_medium(0, 1000, 500));
    rig.bays[0].refuse_unload(Some(BayError::RemovalPrevented));
    let mid = rig.with(|c| c.inventory().clone());
    let s = rig.check(&move_medium(0, 500, 1050));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::MEDIUM_REMOVAL_PREVENTED)
    );
    assert_eq!(rig.with(|c| c.inventory().clone()), mid);
    rig.bays[0].refuse_unload(None);
    // Incompatible medium.
    rig.bays[1].refuse_load(Some(BayError::IncompatibleMedium));
    let s = rig.check(&move_medium(0, 1001, 501));
    assert_eq!(s.asc, Asc::INCOMPATIBLE_MEDIUM_INSTALLED);
    // Drive failure → HARDWARE ERROR; a drive→drive move whose load fails reloads the source.
    rig.bays[1].refuse_load(Some(BayError::DriveFailure("broken".into())));
    let s = rig.check(&move_medium(0, 500, 501));
    assert_eq!(s.key, SenseKey::HARDWARE_ERROR);
    assert_eq!(rig.bays[0].loaded().as_deref(), Some("A00001L9"), "undone");
    assert_eq!(rig.with(|c| c.inventory().clone()), mid);
    rig.bays[1].refuse_load(None);
    rig.good(&move_medium(0, 500, 501));
    assert_eq!(rig.bays[1].loaded().as_deref(), Some("A00001L9"));
    assert_ne!(before, mid);
}

#[test]
fn saver_failure_rolls_back() {
    let rig = rig("stk-l700", None, &L700);
    let before = rig.with(|c| c.inventory().clone());
    *rig.fail_save.lock().unwrap() = true;
    let s = rig.check(&move_medium(0, 1000, 500));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::HARDWARE_ERROR, Asc::INTERNAL_TARGET_FAILURE)
    );
    assert_eq!(rig.with(|c| c.inventory().clone()), before);
    assert_eq!(rig.bays[0].loaded(), None, "the load was undone");
    let s = rig.check(&move_medium(0, 1000, 1001 + 10));
    assert_eq!(s.key, SenseKey::HARDWARE_ERROR);
    assert_eq!(rig.with(|c| c.inventory().clone()), before);
    *rig.fail_save.lock().unwrap() = false;
    rig.good(&move_medium(0, 1000, 500));
    assert_eq!(
        rig.saved.lock().unwrap().last(),
        Some(&rig.with(|c| c.inventory().clone()))
    );
}

#[test]
fn exchange_swaps_and_rotates() {
    let rig = rig("stk-l700", None, &L700);
    rig.good(&move_medium(0, 1000, 500));
    // Swap: drive ↔ slot 1001 (second destination = source).
    rig.good(&exchange_medium(0, 1001, 500, 1001));
    assert_eq!(rig.barcode_at(500).as_deref(), Some("A00002L9"));
    assert_eq!(rig.barcode_at(1001).as_deref(), Some("A00001L9"));
    assert_eq!(rig.bays[0].loaded().as_deref(), Some("A00002L9"));
    // Three-way: 1002 → 500, 500's cartridge → 1010.
    rig.good(&exchange_medium(0, 1002, 500, 1010));
    assert_eq!(rig.barcode_at(500).as_deref(), Some("A00003L9"));
    assert_eq!(rig.barcode_at(1010).as_deref(), Some("A00002L9"));
    assert_eq!(rig.barcode_at(1002), None);
    // Errors: second destination full, first destination empty.
    let s = rig.check(&exchange_medium(0, 1001, 500, 1010));
    assert_eq!(s.asc, Asc::MEDIUM_DESTINATION_ELEMENT_FULL);
    let s = rig.check(&exchange_medium(0, 1001, 1020, 1001));
    assert_eq!(s.asc, Asc::MEDIUM_SOURCE_ELEMENT_EMPTY);
    let s = rig.check(&exchange_medium(0, 1001, 1001, 1020));
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    // The autoloader has a single picker: no EXCHANGE MEDIUM.
    let auto = common::rig("hp-1x8-g2", None, &L700);
    let s = auto.check(&exchange_medium(0, 1, 2, 1));
    assert_eq!(s.asc, Asc::INVALID_COMMAND_OPERATION_CODE);
}

#[test]
fn prevent_blocks_moves_into_import_export_and_operator_removal() {
    let rig = rig("stk-l700", None, &L700);
    rig.good(&spc::prevent_allow_medium_removal(true));
    let s = rig.check(&move_medium(0, 1000, 10));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::MEDIUM_REMOVAL_PREVENTED)
    );
    // Moves elsewhere still work.
    rig.good(&move_medium(0, 1000, 1050));
    // Another nexus allowing does not lift this nexus's prevention.
    assert_eq!(
        rig.run(&rig.b, &spc::prevent_allow_medium_removal(false), &[])
            .status,
        Status::Good
    );
    assert!(sense_of(&rig.run(&rig.a, &move_medium(0, 1050, 10), &[])).is_some());
    rig.good(&spc::prevent_allow_medium_removal(false));
    rig.good(&move_medium(0, 1050, 10));
    rig.good(&spc::prevent_allow_medium_removal(true));
    let r = rig
        .device
        .with_context(&rig.a, |c, ctx| c.operator_remove(10, ctx));
    assert_eq!(r, Err(OperatorError::RemovalPrevented));
    // A LU reset clears it.
    use reel_scsi::LogicalUnit;
    rig.device
        .task_management(reel_scsi::TaskManagement::LogicalUnitReset, &rig.a);
    let r = rig
        .device
        .with_context(&rig.a, |c, ctx| c.operator_remove(10, ctx));
    assert_eq!(r.as_deref(), Ok("A00001L9"));
    // PREVENT 10b is not for a standalone changer.
    rig.run(&rig.a, &[0, 0, 0, 0, 0, 0], &[]); // the reset UA
    let s = rig.check(&[0x1E, 0, 0, 0, 2, 0]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
}

#[test]
fn operator_import_export_raises_unit_attention() {
    let rig = rig("stk-l700", None, &L700);
    rig.device
        .with_context(&rig.a, |c, ctx| c.operator_insert(10, "NEW001L9", ctx))
        .unwrap();
    for n in [&rig.a, &rig.b] {
        let s = sense_of(&rig.run(n, &[0, 0, 0, 0, 0, 0], &[])).unwrap();
        assert_eq!(
            (s.key, s.asc),
            (
                SenseKey::UNIT_ATTENTION,
                Asc::IMPORT_OR_EXPORT_ELEMENT_ACCESSED
            )
        );
        assert_eq!(rig.run(n, &[0, 0, 0, 0, 0, 0], &[]).status, Status::Good);
    }
    let data = rig.good(&read_element_status(3, true, 0, 20, false, 0x10000));
    let (_, _, _, d) = parse_status(&data, false);
    assert_eq!(
        d[0].flags,
        0x38 | 0x02 | 0x01,
        "IMPEXP: placed by the operator"
    );
    assert_eq!(d[0].tag().as_deref(), Some("NEW001L9"));
    // Import it into a slot (IMPEXP cleared, source = the I/E element).
    rig.good(&move_medium(0, 10, 1050));
    let data = rig.good(&read_element_status(2, true, 1050, 1, false, 0x10000));
    let (_, _, _, d) = parse_status(&data, false);
    assert_eq!((d[0].svalid(), d[0].source), (true, 10));
    // Export: slot → I/E, the operator takes it out.
    rig.good(&move_medium(0, 1000, 11));
    let data = rig.good(&read_element_status(3, true, 11, 1, false, 0x10000));
    let (_, _, _, d) = parse_status(&data, false);
    assert_eq!(d[0].flags, 0x38 | 0x01, "placed by the transport");
    let barcode = rig
        .device
        .with_context(&rig.a, |c, ctx| c.operator_remove(11, ctx))
        .unwrap();
    assert_eq!(barcode, "A00001L9");
    assert_eq!(rig.with(|c| c.inventory().find("A00001L9")), None);
    // Refusals.
    let insert = |addr, barcode: &str| {
        rig.device
            .with_context(&rig.a, |c, ctx| c.operator_insert(addr, barcode, ctx))
    };
    assert_eq!(
        insert(1000, "X1"),
        Err(OperatorError::NotOperatorAccessible(1000))
    );
    assert_eq!(insert(9, "X1"), Err(OperatorError::InvalidElement(9)));
    assert_eq!(
        insert(11, "A00002L9"),
        Err(OperatorError::DuplicateBarcode("A00002L9".into()))
    );
    assert_eq!(
        insert(11, "bad code"),
        Err(OperatorError::InvalidBarcode("bad code".into()))
    );
    assert_eq!(insert(10, "X1"), Ok(()));
    assert_eq!(insert(10, "X2"), Err(OperatorError::ElementFull(10)));
    *rig.fail_save.lock().unwrap() = true;
    assert!(matches!(insert(12, "X3"), Err(OperatorError::Persist(_))));
    assert_eq!(rig.barcode_at(12), None);
}

#[test]
fn autoloader_magazines() {
    let rig = rig("hp-1x8-g2", None, &["T00001L8", "T00002L8"]);
    assert_eq!(assignment(&rig), [(0, 1), (1, 8), (0x10, 0), (0x100, 1)]);
    // The operator swaps cartridges in a magazine slot: 28h/00h to everyone.
    rig.device
        .with_context(&rig.a, |c, ctx| c.operator_insert(8, "T00008L8", ctx))
        .unwrap();
    let s = sense_of(&rig.run(&rig.b, &[0, 0, 0, 0, 0, 0], &[])).unwrap();
    assert_eq!(
        s.asc,
        Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
    );
    rig.run(&rig.a, &[0, 0, 0, 0, 0, 0], &[]);
    rig.good(&move_medium(0, 8, 0x100));
    assert_eq!(rig.bays[0].loaded().as_deref(), Some("T00008L8"));
    // DVCID: serial only on this model.
    let data = rig.good(&read_element_status(4, false, 0, 1, true, 0x10000));
    let (_, _, _, d) = parse_status(&data, true);
    assert_eq!(d[0].dvcid, Some((2, 0, b"1013000000".to_vec())));
    // No volume tag commands on this model.
    let s = rig.check(&[0xB6, 0, 0, 1, 0, 0x0B, 0, 0, 0, 40, 0, 0]);
    assert_eq!(s.asc, Asc::INVALID_COMMAND_OPERATION_CODE);
}

#[test]
fn dvcid_t10_vendor_id_as_pbs_parses_it() {
    let rig = rig("ibm-3584", None, &L700);
    // PBS: data transfer elements with DVCID and without VOLTAG.
    let data = rig.good(&read_element_status(4, false, 0, 1000, true, 0x10000));
    let (_, count, _, d) = parse_status(&data, true);
    assert_eq!(count, 4);
    let (code_set, id_type, id) = d[1].dvcid.clone().unwrap();
    assert_eq!(
        (code_set, id_type, id.len()),
        (2, 1, 34),
        "PBS wants exactly 34 bytes"
    );
    assert_eq!(&id, b"IBM     ULT3580-TD9     1013000001");
    // With VOLTAG and DVCID together.
    rig.good(&move_medium(0, 0x0401, 0x0102));
    let data = rig.good(&read_element_status(4, true, 0, 1000, true, 0x10000));
    let (_, _, _, d) = parse_status(&data, true);
    assert_eq!(d[1].tag().as_deref(), Some("A00001L9"));
    assert_eq!(
        d[1].dvcid.as_ref().unwrap().2,
        b"IBM     ULT3580-TD9     1013000001"
    );
    // Other element types with DVCID get an empty identifier.
    let data = rig.good(&read_element_status(0, true, 0, 3, true, 0x10000));
    let (_, _, _, d) = parse_status(&data, true);
    assert_eq!(d[0].dvcid, Some((0, 0, vec![])));
}

#[test]
fn send_volume_tag_and_request_volume_element_address() {
    let rig = rig("stk-l700", None, &L700);
    let svt = |address: u16, action: u8, id: &str, seq: u16| {
        let mut cdb = vec![0xB6, 0];
        cdb.extend_from_slice(&address.to_be_bytes());
        cdb.extend_from_slice(&[0, action, 0, 0, 0, 40, 0, 0]);
        let mut p = [b' '; 40];
        p[..id.len()].copy_from_slice(id.as_bytes());
        p[32..].fill(0);
        p[34..36].copy_from_slice(&seq.to_be_bytes());
        p[38..40].copy_from_slice(&0xFFFFu16.to_be_bytes());
        rig.run(&rig.a, &cdb, &p)
    };
    // REQUEST VOLUME ELEMENT ADDRESS before any translate.
    let rvea = [0xB5, 0x10, 0, 0, 0xFF, 0xFF, 0, 0, 0x10, 0, 0, 0];
    assert_eq!(rig.check(&rvea).asc, Asc::COMMAND_SEQUENCE_ERROR);
    // Assert an alternate tag, then assert again: refused; replace works.
    assert_eq!(svt(1001, 0x09, "POOL-B", 7).status, Status::Good);
    assert!(sense_of(&svt(1001, 0x09, "POOL-C", 7)).is_some());
    assert_eq!(svt(1001, 0x0B, "POOL-C", 8).status, Status::Good);
    assert_eq!(rig.saved.lock().unwrap().len(), 2);
    // Empty element, primary tag actions, wildcards in an identifier.
    assert_eq!(
        sense_of(&svt(1050, 0x09, "X", 0)).unwrap().asc,
        Asc::MEDIUM_SOURCE_ELEMENT_EMPTY
    );
    assert_eq!(
        sense_of(&svt(1000, 0x0A, "X", 0)).unwrap().asc,
        Asc::INVALID_FIELD_IN_CDB
    );
    assert_eq!(
        sense_of(&svt(1000, 0x0B, "X*", 0)).unwrap().asc,
        Asc::INVALID_FIELD_IN_PARAMETER_LIST
    );
    // READ ELEMENT STATUS shows the alternate tag (AVOLTAG) for the storage page.
    let data = rig.good(&read_element_status(2, true, 1000, 3, false, 0x10000));
    let (_, _, _, d) = parse_status(&data, false);
    let alt = d[1].alternate.as_ref().unwrap();
    assert_eq!(&alt[..6], b"POOL-C");
    assert_eq!(&alt[34..36], &8u16.to_be_bytes());
    assert_eq!(d[0].alternate.as_deref(), Some(&[0u8; 36][..]));
    // Translate: all tags matching "A0000?L9" from address 0.
    assert_eq!(svt(0, 0x00, "A0000?L9", 0).status, Status::Good);
    let data = rig.good(&rvea);
    assert_eq!(data[4] & 0x1F, 0x00, "send action code echoed");
    let (first, count, _, d) = parse_status(&data, false);
    assert_eq!((first, count), (1000, 3));
    assert_eq!(d[2].tag().as_deref(), Some("A00003L9"));
    // Translate alternate tags only.
    assert_eq!(svt(0, 0x02, "POOL*", 8).status, Status::Good);
    let (_, count, _, d) = parse_status(&rig.good(&rvea), false);
    assert_eq!((count, d[0].address), (1, 1001));
    // Sequence number outside the range: nothing.
    assert_eq!(svt(0, 0x02, "POOL*", 9).status, Status::Good);
    let (_, count, _, _) = parse_status(&rig.good(&rvea), false);
    assert_eq!(count, 0);
    // Undefine.
    assert_eq!(svt(1001, 0x0D, "", 0).status, Status::Good);
    let data = rig.good(&read_element_status(2, true, 1000, 3, false, 0x10000));
    assert_eq!(
        data[9] & 0x40,
        0,
        "no AVOLTAG once no alternate tag is defined"
    );
    // The translation is per nexus.
    let r = rig.run(&rig.b, &rvea, &[]);
    assert_eq!(sense_of(&r).unwrap().asc, Asc::COMMAND_SEQUENCE_ERROR);
}

#[test]
fn open_close_import_export_element() {
    let rig = rig("stk-l700", None, &L700);
    rig.good(&[0x1B, 0, 0, 10, 0, 0]);
    rig.good(&[0x1B, 0, 0, 10, 1, 0]);
    rig.good(&[0x1B, 0, 0, 0, 2, 0]); // mtx eject
    assert_eq!(
        rig.check(&[0x1B, 0, 0x03, 0xE8, 0, 0]).asc,
        Asc::INVALID_ELEMENT_ADDRESS
    );
    assert_eq!(
        rig.check(&[0x1B, 0, 0, 10, 0x10, 0]).asc,
        Asc::INVALID_FIELD_IN_CDB
    );
}

#[test]
fn unsupported_commands_are_invalid_opcodes() {
    let rig = rig("ibm-3584", None, &L700);
    // MOVE MEDIUM ATTACHED, READ ELEMENT STATUS ATTACHED, ERASE, SEND DIAGNOSTIC,
    // READ ATTRIBUTE, WRITE BUFFER.
    for op in [0xA7u8, 0xB4, 0x19, 0x1D, 0x8C, 0x3B] {
        let mut cdb = vec![op];
        cdb.resize(16, 0);
        let s = rig.check(&cdb);
        assert_eq!(s.asc, Asc::INVALID_COMMAND_OPERATION_CODE, "{op:#x}");
    }
    // REPORT SUPPORTED OPERATION CODES lists the changer's commands.
    let d = rig.good(&[0xA3, 0x0C, 0x01, 0xA5, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(d[1] & 0x07, 0x03, "MOVE MEDIUM supported");
}

#[test]
fn every_model_reports_its_addresses() {
    for model in ChangerModel::all() {
        let rig = rig(model.name, None, &L700);
        let [mt, st, ie, dt] = assignment(&rig);
        let b = model.bases;
        let l = model.default_layout;
        assert_eq!(mt, (b.transport, 1), "{}", model.name);
        assert_eq!(st, (b.storage, l.slots), "{}", model.name);
        assert_eq!(ie, (b.import_export, l.import_export), "{}", model.name);
        assert_eq!(dt, (b.drives, l.drives), "{}", model.name);
        let d = rig.good(&spc::inquiry(96));
        assert_eq!(String::from_utf8_lossy(&d[8..16]).trim_end(), model.vendor);
        assert_eq!(
            String::from_utf8_lossy(&d[16..32]).trim_end(),
            model.product
        );
        // Full status parses and the first cartridge sits in the first slot.
        let data = rig.good(&read_element_status(0, true, 0, 0xFFFF, false, 0xFFFFFF));
        let (_, count, _, d) = parse_status(&data, false);
        assert_eq!(
            usize::from(count),
            1 + usize::from(l.slots + l.drives + l.import_export)
        );
        let slot = d.iter().find(|d| d.address == b.storage).unwrap();
        assert_eq!(slot.tag().as_deref(), Some("A00001L9"));
        // slot → drive → slot works everywhere.
        rig.good(&move_medium(0, b.storage, b.drives));
        rig.good(&move_medium(0, b.drives, b.storage + 5));
        assert_eq!(rig.barcode_at(b.storage + 5).as_deref(), Some("A00001L9"));
    }
}

#[test]
fn construction_checks() {
    use reel_smc::{Changer, ChangerError, Inventory};
    let model = ChangerModel::by_name("stk-l700").unwrap();
    let layout = model.default_layout;
    let err = Changer::new(model, layout, "S", Vec::new(), Inventory::empty(&layout)).err();
    assert_eq!(
        err,
        Some(ChangerError::BayCount {
            expected: 4,
            got: 0
        })
    );
    let small = Layout {
        drives: 0,
        slots: 2,
        import_export: 0,
        magazines: Some((2, 2)),
    };
    let err = Changer::new(model, small, "S", Vec::new(), Inventory::empty(&small)).err();
    assert!(matches!(err, Some(ChangerError::Magazines { .. })));
    let small = Layout {
        magazines: None,
        ..small
    };
    let dup = Changer::initial_inventory(&small, &["X".into(), "X".into()]);
    let err = Changer::new(model, small, "S", Vec::new(), dup).err();
    assert!(matches!(err, Some(ChangerError::Inventory(_))));
    let other = Inventory::empty(&Layout { slots: 3, ..small });
    let err = Changer::new(model, small, "S", Vec::new(), other).err();
    assert_eq!(err, Some(ChangerError::InventoryLayout));
    let ok = Changer::initial_inventory(&small, &["X".into(), "Y".into(), "Z".into()]);
    let changer = Changer::new(model, small, "S", Vec::new(), ok).unwrap();
    assert_eq!(changer.inventory().barcodes(), ["X", "Y"]);
    let e = changer.elements();
    assert_eq!(e[0].element, Element::new(ElementType::Transport, 0));
    assert_eq!(e[1].address, 1000);
    assert_eq!(e[1].barcode.as_deref(), Some("X"));
}

#[test]
fn pages_are_not_changeable_and_there_are_no_log_pages() {
    let rig = rig("stk-l700", None, &L700);
    // MODE SELECT(6) of page 1Dh with other first addresses.
    let mut list = vec![0, 0, 0, 0, 0x1D, 0x12];
    list.extend_from_slice(&[0, 0, 0, 1, 0, 1, 0, 100, 0, 0, 0, 0, 0, 2, 0, 4, 0, 0]);
    let r = rig.run(&rig.a, &spc::mode_select6(list.len() as u8), &list);
    assert_eq!(
        sense_of(&r).unwrap().asc,
        Asc::INVALID_FIELD_IN_PARAMETER_LIST
    );
    assert_eq!(assignment(&rig)[1], (1000, 100));
    let s = rig.check(&spc::log_sense(0x2E, 255));
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
}

#[test]
fn nexus_loss_and_nexus_reset_lift_that_nexus_prevention() {
    use reel_scsi::{LogicalUnit, TaskManagement};
    let rig = rig("stk-l700", None, &L700);
    rig.good(&spc::prevent_allow_medium_removal(true));
    assert_eq!(
        rig.run(&rig.b, &spc::prevent_allow_medium_removal(true), &[])
            .status,
        Status::Good
    );
    rig.device.nexus_lost(&rig.a);
    assert!(sense_of(&rig.run(&rig.b, &move_medium(0, 1000, 10), &[])).is_some());
    rig.device
        .task_management(TaskManagement::ItNexusReset, &rig.b);
    rig.run(&rig.b, &[0, 0, 0, 0, 0, 0], &[]); // I_T NEXUS LOSS OCCURRED
    assert_eq!(
        rig.run(&rig.b, &move_medium(0, 1000, 10), &[]).status,
        Status::Good
    );
}

#[test]
fn dvcid_identifiers_of_different_lengths_share_one_descriptor_length() {
    use reel_smc::testing::FakeBay;
    use reel_smc::{Changer, DriveBay};
    use std::sync::Arc;
    let model = ChangerModel::by_name("hp-1x8-g2").unwrap();
    let layout = Layout {
        drives: 2,
        slots: 8,
        import_export: 0,
        magazines: Some((2, 4)),
    };
    let bays: Vec<Arc<dyn DriveBay>> = vec![
        Arc::new(FakeBay::new("SHORT")),
        Arc::new(FakeBay::new("A-MUCH-LONGER-SERIAL-NUMBER")),
    ];
    let changer = Changer::new(
        model,
        layout,
        "S1",
        bays,
        reel_smc::Inventory::empty(&layout),
    )
    .unwrap();
    let device = reel_scsi::ScsiDevice::new(changer);
    let nexus = reel_scsi::ItNexus::new("x", 1);
    use reel_scsi::LogicalUnit;
    let run = |cdb: &[u8]| device.execute(reel_scsi::initiator::request(&nexus, cdb, &[]));
    run(&spc::TEST_UNIT_READY); // power-on UA
    let r = run(&read_element_status(4, true, 0, 10, true, 4096));
    let (_, _, _, d) = parse_status(&r.data_in, true);
    assert_eq!(d[0].dvcid.as_ref().unwrap().2, b"SHORT");
    assert_eq!(
        d[1].dvcid.as_ref().unwrap().2,
        b"A-MUCH-LONGER-SERIAL-NUMBER"
    );
    let descriptor_len = u16::from_be_bytes([r.data_in[10], r.data_in[11]]);
    assert_eq!(usize::from(descriptor_len), 12 + 36 + 4 + 27);
}

#[test]
fn new_cartridges_go_into_the_lowest_free_storage_slots_all_or_none() {
    let rig = rig("stk-l700", None, &["A00001L9", "A00002L9"]);
    let slots = rig.device.with_personality(|c| c.layout().slots);
    let saves = rig.saved.lock().unwrap().len();
    let used = rig
        .device
        .with_context(&rig.a, |c, ctx| {
            c.insert_into_storage(&["B00001L9".into(), "B00002L9".into()], ctx)
        })
        .unwrap();
    assert_eq!(rig.saved.lock().unwrap().len(), saves + 1, "saved once");
    let elements = rig.device.with_personality(|c| c.elements());
    let slot_addresses: Vec<u16> = elements
        .iter()
        .filter(|e| e.element.kind == ElementType::Storage)
        .map(|e| e.address)
        .collect();
    assert_eq!(used, slot_addresses[2..4].to_vec());
    let s = sense_of(&rig.run(&rig.b, &[0, 0, 0, 0, 0, 0], &[])).unwrap();
    assert_eq!(
        (s.key, s.asc),
        (
            SenseKey::UNIT_ATTENTION,
            Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
        )
    );
    // A duplicate or too many cartridges: nothing changes.
    let before = rig.device.with_personality(|c| c.inventory().clone());
    let dup = rig.device.with_context(&rig.a, |c, ctx| {
        c.insert_into_storage(&["C00001L9".into(), "A00001L9".into()], ctx)
    });
    assert_eq!(dup, Err(OperatorError::DuplicateBarcode("A00001L9".into())));
    let many: Vec<String> = (0..slots).map(|i| format!("D{i:05}L9")).collect();
    let full = rig
        .device
        .with_context(&rig.a, |c, ctx| c.insert_into_storage(&many, ctx));
    assert_eq!(full, Err(OperatorError::NoFreeSlot));
    assert_eq!(
        rig.device.with_personality(|c| c.inventory().clone()),
        before
    );
}
