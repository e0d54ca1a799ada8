//! SPC behaviour of a `LunTable` holding a `NullDisk`, driven through the transport-facing API
//! exactly as the iSCSI target calls it.

use std::sync::Arc;

use proptest::prelude::*;
use reel_scsi::initiator::{request, sbc, spc};
use reel_scsi::{
    Asc, ItNexus, KeySpecific, LogicalUnit, LunTable, NullDisk, Response, ScsiDevice, Sense,
    SenseKey, Status, TaskManagement, WLUN_REPORT_LUNS, encode_lun, parse_sense,
};

const BLOCKS: u64 = 4 << 30; // 2 TiB of 512-byte blocks

struct Target {
    table: LunTable,
    a: ItNexus,
    b: ItNexus,
}

impl Target {
    fn new() -> Self {
        let mut table = LunTable::new();
        let disk = ScsiDevice::new(NullDisk::new(512, BLOCKS)).with_clock(Arc::new(|| 1_000_000));
        table.insert(0, Arc::new(disk));
        Self {
            table,
            a: ItNexus::new("iqn.2024-01.test:a,i,0x000000000001", 1),
            b: ItNexus::new("iqn.2024-01.test:b,i,0x000000000002", 2),
        }
    }

    /// A target whose nexuses have both consumed their power-on unit attention.
    fn ready() -> Self {
        let t = Self::new();
        for n in [&t.a, &t.b] {
            assert_eq!(
                t.run_on(n, 0, &spc::TEST_UNIT_READY, &[]).status,
                Status::CheckCondition
            );
            assert_eq!(
                t.run_on(n, 0, &spc::TEST_UNIT_READY, &[]).status,
                Status::Good
            );
        }
        t
    }

    fn run_on(&self, nexus: &ItNexus, lun: u64, cdb: &[u8], data_out: &[u8]) -> Response {
        self.table.execute(lun, request(nexus, cdb, data_out))
    }

    fn a(&self, cdb: &[u8]) -> Response {
        self.run_on(&self.a, 0, cdb, &[])
    }

    fn b(&self, cdb: &[u8]) -> Response {
        self.run_on(&self.b, 0, cdb, &[])
    }
}

fn sense_of(response: &Response) -> Sense {
    assert_eq!(response.status, Status::CheckCondition, "{response:?}");
    parse_sense(response.sense.as_ref().expect("sense")).expect("parseable sense")
}

fn assert_check(response: &Response, key: SenseKey, asc: Asc) -> Sense {
    let sense = sense_of(response);
    assert_eq!((sense.key, sense.asc), (key, asc), "{sense:?}");
    sense
}

fn field_pointer(sense: &Sense) -> Option<KeySpecific> {
    sense.key_specific
}

fn pr_out(action: u8, pr_type: u8, key: u64, sa_key: u64) -> ([u8; 10], Vec<u8>) {
    let cdb = [0x5F, action, pr_type, 0, 0, 0, 0, 0, 24, 0];
    let mut data = vec![0u8; 24];
    data[..8].copy_from_slice(&key.to_be_bytes());
    data[8..16].copy_from_slice(&sa_key.to_be_bytes());
    (cdb, data)
}

#[test]
fn standard_inquiry_layout() {
    let t = Target::new();
    let r = t.a(&spc::inquiry(255));
    assert_eq!(r.status, Status::Good);
    let d = &r.data_in;
    assert_eq!(d.len(), 96);
    assert_eq!(d[0], 0x00, "qualifier 000b, direct access");
    assert_eq!(d[2], 0x06, "SPC-4");
    assert_eq!(d[3] & 0x0F, 2, "response data format");
    assert_eq!(usize::from(d[4]), d.len() - 5, "additional length");
    assert_ne!(d[7] & 0x02, 0, "CMDQUE");
    assert_eq!(&d[8..16], b"REEL    ");
    assert_eq!(&d[16..32], b"NULLDISK        ");
    assert_eq!(&d[58..64], &[0x00, 0xA0, 0x04, 0x60, 0x04, 0xC0]);
}

#[test]
fn inquiry_is_not_blocked_by_unit_attention_and_truncates() {
    let t = Target::new();
    // First contact: INQUIRY still answers, and does not consume the unit attention.
    let r = t.a(&spc::inquiry(5));
    assert_eq!(r.status, Status::Good);
    assert_eq!(
        &r.data_in[..],
        &[0, 0, 6, 0x12, 91],
        "additional length is not truncated"
    );
    assert_eq!(t.a(&spc::inquiry(0)).data_in.len(), 0);
    assert_check(
        &t.a(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET_OCCURRED,
    );
    assert_eq!(t.a(&spc::TEST_UNIT_READY).status, Status::Good);
    // The other nexus still has its own.
    assert_check(
        &t.b(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET_OCCURRED,
    );
}

#[test]
fn vpd_pages() {
    let t = Target::ready();
    let r = t.a(&spc::inquiry_vpd(0x00, 255));
    assert_eq!(
        &r.data_in[..],
        &[0, 0, 0, 6, 0x00, 0x80, 0x83, 0x86, 0xB0, 0xB1]
    );
    let r = t.a(&spc::inquiry_vpd(0x80, 255));
    assert_eq!(&r.data_in[..4], &[0, 0x80, 0, 9]);
    assert_eq!(&r.data_in[4..], b"NULLDISK0");
    let r = t.a(&spc::inquiry_vpd(0x83, 255));
    let d = &r.data_in;
    assert_eq!(d[1], 0x83);
    assert_eq!(usize::from(u16::from_be_bytes([d[2], d[3]])), d.len() - 4);
    // NAA designator: binary, LU association, type 3, 8 bytes, NAA in the top nibble.
    assert_eq!(&d[4..8], &[0x01, 0x03, 0x00, 0x08]);
    assert_eq!(d[8] >> 4, 0x3);
    // T10 vendor ID: ASCII, type 1, vendor + product + serial.
    assert_eq!(&d[16..20], &[0x02, 0x01, 0x00, 33]);
    assert_eq!(&d[20..28], b"REEL    ");
    // Relative target port of nexus A (port 1): target port association, type 4.
    assert_eq!(&d[53..61], &[0x01, 0x14, 0, 4, 0, 0, 0, 1]);
    let r = t.b(&spc::inquiry_vpd(0x83, 255));
    assert_eq!(&r.data_in[57..61], &[0, 0, 0, 2]);
    let r = t.a(&spc::inquiry_vpd(0xB0, 255));
    assert_eq!(&r.data_in[..4], &[0, 0xB0, 0, 0x3C]);
    assert_eq!(t.a(&spc::inquiry_vpd(0x86, 255)).data_in.len(), 64);
}

#[test]
fn invalid_fields_have_field_pointers() {
    let t = Target::ready();
    let s = assert_check(
        &t.a(&[0x12, 0, 0x80, 0, 255, 0]), // a page code without EVPD
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 2,
            bit: Some(7)
        })
    );
    let s = assert_check(
        &t.a(&spc::inquiry_vpd(0xC7, 255)),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 2,
            bit: Some(7)
        })
    );
    // NACA in the control byte.
    let s = assert_check(
        &t.a(&[0x00, 0, 0, 0, 0, 0x04]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 5,
            bit: Some(2)
        })
    );
    let mut read10 = [0u8; 10];
    read10[0] = 0x28;
    read10[9] = 0x04;
    let s = assert_check(
        &t.a(&read10),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 9,
            bit: Some(2)
        })
    );
    // MODE SENSE of saved values.
    assert_check(
        &t.a(&[0x1A, 0, 0xC0 | 0x3F, 0, 255, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::SAVING_PARAMETERS_NOT_SUPPORTED,
    );
}

#[test]
fn unknown_opcodes_and_service_actions() {
    let t = Target::ready();
    assert_check(
        &t.a(&[0x02, 0, 0, 0, 0, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_COMMAND_OPERATION_CODE,
    );
    assert_check(
        &t.a(&[0x66; 16]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_COMMAND_OPERATION_CODE,
    );
    assert_check(
        &t.a(&[0xC5; 16]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_COMMAND_OPERATION_CODE,
    );
    assert_check(
        &t.a(&[]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_COMMAND_OPERATION_CODE,
    );
    let s = assert_check(
        &t.a(&[0xA3, 0x1E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 1,
            bit: Some(4)
        })
    );
    // Too short: the first missing byte is pointed at.
    let s = assert_check(
        &t.a(&[0x28, 0, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 3,
            bit: None
        })
    );
}

#[test]
fn request_sense_reports_and_clears_unit_attention() {
    let t = Target::new();
    let r = t.a(&spc::request_sense(252));
    assert_eq!(r.status, Status::Good);
    let s = parse_sense(&r.data_in).unwrap();
    assert_eq!(
        (s.key, s.asc),
        (
            SenseKey::UNIT_ATTENTION,
            Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET_OCCURRED
        )
    );
    assert_eq!(t.a(&spc::TEST_UNIT_READY).status, Status::Good);
    let r = t.a(&[0x03, 1, 0, 0, 252, 0]);
    assert_eq!(r.data_in[0], 0x72, "DESC = 1 gives descriptor format");
    assert_eq!(parse_sense(&r.data_in).unwrap(), Sense::no_sense());
}

#[test]
fn mode_sense_and_select() {
    let t = Target::ready();
    // MODE SENSE(6), all pages: header, one 8-byte block descriptor, caching and control.
    let r = t.a(&spc::mode_sense6(spc::ALL_PAGES, 255));
    let d = &r.data_in;
    assert_eq!(usize::from(d[0]), d.len() - 1);
    assert_eq!(d[2], 0x10, "DPOFUA");
    assert_eq!(d[3], 8);
    assert_eq!(
        &d[4..12],
        &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 2, 0],
        "block count clamps, 512-byte blocks"
    );
    assert_eq!(&d[12..14], &[0x08, 18]);
    assert_eq!(&d[32..34], &[0x0A, 10]);
    // DBD, MODE SENSE(10) with LLBAA: long descriptor.
    let r = t.a(&[0x5A, 0x10, 0x0A, 0, 0, 0, 0, 0, 255, 0]);
    let d = &r.data_in;
    assert_eq!(d[4] & 1, 1, "LONGLBA");
    assert_eq!(&d[6..8], &[0, 16]);
    assert_eq!(&d[8..16], &BLOCKS.to_be_bytes());
    assert_eq!(&d[24..26], &[0x0A, 10]);
    // Changeable values of the control page: only D_SENSE.
    let r = t.a(&[0x1A, 0x08, 0x4A, 0, 255, 0]);
    assert_eq!(&r.data_in[4..8], &[0x0A, 10, 0x04, 0]);

    // MODE SELECT(6) setting D_SENSE.
    let list = [0, 0, 0, 0, 0x0A, 10, 0x04, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    let r = t.run_on(&t.a, 0, &spc::mode_select6(list.len() as u8), &list);
    assert_eq!(r.status, Status::Good);
    // The other nexus gets MODE PARAMETERS CHANGED, now in descriptor format.
    let r = t.b(&spc::TEST_UNIT_READY);
    assert_eq!(r.sense.as_ref().unwrap()[0], 0x72);
    assert_check(&r, SenseKey::UNIT_ATTENTION, Asc::MODE_PARAMETERS_CHANGED);
    assert_eq!(
        t.a(&spc::TEST_UNIT_READY).status,
        Status::Good,
        "not to the nexus that changed them"
    );

    // Changing a non-changeable bit: INVALID FIELD IN PARAMETER LIST with C/D = 0.
    let mut bad = list;
    bad[8] = 0x80;
    let r = t.run_on(&t.a, 0, &spc::mode_select6(bad.len() as u8), &bad);
    let s = assert_check(
        &r,
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    assert_eq!(
        field_pointer(&s),
        Some(KeySpecific::FieldPointer {
            cd: false,
            byte: 8,
            bit: Some(7)
        })
    );
    // SP = 1 without saveable pages: INVALID FIELD IN CDB at byte 1 bit 0 (SPC-4 §6.11).
    let r = t.run_on(&t.a, 0, &[0x15, 0x11, 0, 0, list.len() as u8, 0], &list);
    assert_check(&r, SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_CDB);
    // Truncated parameter list.
    let r = t.run_on(&t.a, 0, &spc::mode_select6(10), &list[..10]);
    assert_check(
        &r,
        SenseKey::ILLEGAL_REQUEST,
        Asc::PARAMETER_LIST_LENGTH_ERROR,
    );
}

#[test]
fn log_sense_supported_pages() {
    let t = Target::ready();
    let r = t.a(&[0x4D, 0, 0x00, 0, 0, 0, 0, 0, 255, 0]);
    assert_eq!(&r.data_in[..], &[0, 0, 0, 1, 0]);
    let r = t.a(&[0x4D, 0, 0x00, 0xFF, 0, 0, 0, 0, 255, 0]);
    assert_eq!(&r.data_in[..], &[0x40, 0xFF, 0, 4, 0, 0, 0, 0xFF]);
    assert_check(
        &t.a(&[0x4D, 0, 0x2E, 0, 0, 0, 0, 0, 255, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_check(
        &t.a(&[0x4D, 1, 0x00, 0, 0, 0, 0, 0, 255, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
}

#[test]
fn report_supported_operation_codes() {
    let t = Target::ready();
    let r = t.a(&[0xA3, 0x0C, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0]);
    let d = &r.data_in;
    let len = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize;
    assert_eq!(len, d.len() - 4);
    let opcodes: Vec<u8> = d[4..].chunks(8).map(|c| c[0]).collect();
    for op in [0x00, 0x12, 0x28, 0x2A, 0x5E, 0x5F, 0x9E, 0xA0, 0xA3] {
        assert!(opcodes.contains(&op), "{op:#x} listed");
    }
    // With timeouts descriptors: 20 bytes per command.
    let r = t.a(&[0xA3, 0x0C, 0x80, 0, 0, 0, 0, 0, 0x10, 0, 0, 0]);
    assert_eq!((r.data_in.len() - 4) % 20, 0);
    // One command: READ(10).
    let r = t.a(&[0xA3, 0x0C, 0x01, 0x28, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(&r.data_in[..4], &[0, 3, 0, 10]);
    assert_eq!(r.data_in[4], 0x28);
    // One command with service action: READ CAPACITY(16), with timeouts.
    let r = t.a(&[0xA3, 0x0C, 0x82, 0x9E, 0, 0x10, 0, 0, 1, 0, 0, 0]);
    assert_eq!(&r.data_in[..4], &[0, 0x83, 0, 16]);
    assert_eq!(r.data_in.len(), 4 + 16 + 12);
    // Unsupported: SUPPORT = 001b.
    let r = t.a(&[0xA3, 0x0C, 0x01, 0x04, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(&r.data_in[..], &[0, 1, 0, 0]);
    assert_check(
        &t.a(&[0xA3, 0x0C, 0x01, 0x9E, 0, 0, 0, 0, 1, 0, 0, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    assert_check(
        &t.a(&[0xA3, 0x0C, 0x05, 0, 0, 0, 0, 0, 1, 0, 0, 0]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
}

#[test]
fn timestamps() {
    let t = Target::ready();
    let r = t.a(&[0xA3, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0]);
    assert_eq!(&r.data_in[..4], &[0, 0x0A, 0x03, 0]);
    assert_eq!(&r.data_in[4..10], &1_000_000u64.to_be_bytes()[2..]);
    let mut list = [0u8; 12];
    list[4..10].copy_from_slice(&5_000_000u64.to_be_bytes()[2..]);
    let r = t.run_on(&t.a, 0, &[0xA4, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0], &list);
    assert_eq!(r.status, Status::Good);
    let r = t.a(&[0xA3, 0x0F, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0]);
    assert_eq!(r.data_in[2], 0x02, "origin: SET TIMESTAMP");
    assert_eq!(&r.data_in[4..10], &5_000_000u64.to_be_bytes()[2..]);
    assert_check(
        &t.b(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::TIMESTAMP_CHANGED,
    );
}

#[test]
fn spc2_reservations() {
    let t = Target::ready();
    assert_eq!(t.a(&[0x16, 0, 0, 0, 0, 0]).status, Status::Good);
    assert_eq!(
        t.b(&[0x16, 0, 0, 0, 0, 0]).status,
        Status::ReservationConflict
    );
    assert_eq!(
        t.b(&spc::TEST_UNIT_READY).status,
        Status::ReservationConflict,
        "TEST UNIT READY conflicts"
    );
    let mut read10 = [0u8; 10];
    read10[0] = 0x28;
    assert_eq!(t.b(&read10).status, Status::ReservationConflict);
    assert_eq!(t.b(&spc::inquiry(36)).status, Status::Good);
    assert_eq!(t.b(&spc::request_sense(18)).status, Status::Good);
    assert_eq!(
        t.run_on(&t.b, 0, &spc::report_luns(256), &[]).status,
        Status::Good
    );
    assert_eq!(
        t.b(&[0x17, 0, 0, 0, 0, 0]).status,
        Status::Good,
        "RELEASE by a non-holder is harmless"
    );
    assert_eq!(
        t.b(&spc::TEST_UNIT_READY).status,
        Status::ReservationConflict
    );
    assert_eq!(t.a(&read10).status, Status::Good);
    // The holder's nexus goes away: the reservation goes with it.
    t.table.nexus_lost(&t.a);
    assert_eq!(t.b(&spc::TEST_UNIT_READY).status, Status::Good);
    assert_check(
        &t.a(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::I_T_NEXUS_LOSS_OCCURRED,
    );
    // LU reset releases too, and tells everyone.
    assert_eq!(t.b(&[0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0]).status, Status::Good);
    t.table
        .task_management(Some(0), TaskManagement::LogicalUnitReset, &t.a);
    assert_check(
        &t.a(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED,
    );
    assert_check(
        &t.b(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED,
    );
    assert_eq!(t.a(&spc::TEST_UNIT_READY).status, Status::Good);
}

#[test]
fn persistent_reservations_between_two_nexuses() {
    let t = Target::ready();
    let run = |n: &ItNexus, (cdb, data): ([u8; 10], Vec<u8>)| t.run_on(n, 0, &cdb, &data);
    let read_keys = |n: &ItNexus| t.run_on(n, 0, &[0x5E, 0, 0, 0, 0, 0, 0, 1, 0, 0], &[]);
    let read_reservation = |n: &ItNexus| t.run_on(n, 0, &[0x5E, 1, 0, 0, 0, 0, 0, 1, 0, 0], &[]);

    assert_eq!(run(&t.a, pr_out(0, 0, 0, 0xAAAA)).status, Status::Good);
    assert_eq!(run(&t.b, pr_out(0, 0, 0, 0xBBBB)).status, Status::Good);
    let keys = read_keys(&t.a).data_in;
    assert_eq!(&keys[..8], &[0, 0, 0, 2, 0, 0, 0, 16]);
    assert_eq!(&keys[8..16], &0xAAAAu64.to_be_bytes());
    assert_eq!(&keys[16..24], &0xBBBBu64.to_be_bytes());
    // Wrong key: conflict.
    assert_eq!(
        run(&t.a, pr_out(0, 0, 0x1234, 0)).status,
        Status::ReservationConflict
    );
    // A takes Exclusive Access.
    assert_eq!(run(&t.a, pr_out(1, 0x03, 0xAAAA, 0)).status, Status::Good);
    let rr = read_reservation(&t.b).data_in;
    assert_eq!(&rr[4..8], &[0, 0, 0, 16]);
    assert_eq!(&rr[8..16], &0xAAAAu64.to_be_bytes());
    assert_eq!(rr[21], 0x03);
    let mut read10 = [0u8; 10];
    read10[0] = 0x28;
    read10[8] = 1;
    assert_eq!(t.b(&read10).status, Status::ReservationConflict);
    assert_eq!(
        t.b(&spc::TEST_UNIT_READY).status,
        Status::Good,
        "TEST UNIT READY is allowed"
    );
    assert_eq!(t.a(&read10).status, Status::Good);
    // B preempts A.
    assert_eq!(
        run(&t.b, pr_out(4, 0x01, 0xBBBB, 0xAAAA)).status,
        Status::Good
    );
    assert_check(
        &t.a(&spc::TEST_UNIT_READY),
        SenseKey::UNIT_ATTENTION,
        Asc::REGISTRATIONS_PREEMPTED,
    );
    assert_eq!(
        t.a(&read10).status,
        Status::Good,
        "Write Exclusive allows reads"
    );
    let mut write10 = [0u8; 10];
    write10[0] = 0x2A;
    assert_eq!(t.a(&write10).status, Status::ReservationConflict);
    assert_eq!(&read_keys(&t.a).data_in[4..8], &[0, 0, 0, 8]);
    // B releases; A may write again.
    assert_eq!(run(&t.b, pr_out(2, 0x01, 0xBBBB, 0)).status, Status::Good);
    assert_eq!(t.a(&write10).status, Status::Good);
    assert_eq!(&read_reservation(&t.a).data_in[4..8], &[0, 0, 0, 0]);
    // APTPL is refused.
    let (cdb, mut data) = pr_out(0, 0, 0, 0xCCCC);
    data[20] = 0x01;
    let r = t.run_on(&t.a, 0, &cdb, &data);
    assert_check(
        &r,
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    // REPORT CAPABILITIES.
    let caps = t
        .run_on(&t.a, 0, &[0x5E, 2, 0, 0, 0, 0, 0, 0, 8, 0], &[])
        .data_in;
    assert_eq!(&caps[..], &[0, 8, 0x10, 0x80, 0xEA, 0x01, 0, 0]);
    // Registrations survive nexus loss; CLEAR removes them.
    t.table.nexus_lost(&t.b);
    assert_eq!(&read_keys(&t.a).data_in[4..8], &[0, 0, 0, 8]);
    assert_eq!(
        run(&t.b, pr_out(3, 0, 0xBBBB, 0)).status,
        Status::CheckCondition,
        "unit attention first"
    );
    assert_eq!(run(&t.b, pr_out(3, 0, 0xBBBB, 0)).status, Status::Good);
    assert_eq!(&read_keys(&t.a).data_in[4..8], &[0, 0, 0, 0]);
}

#[test]
fn report_luns_and_absent_luns() {
    let mut t = Target::ready();
    t.table
        .insert(0x123, Arc::new(ScsiDevice::new(NullDisk::new(4096, 10))));
    let report = spc::report_luns(256);
    for lun in [0, 7, WLUN_REPORT_LUNS] {
        let r = t.run_on(&t.a, lun, &report, &[]);
        assert_eq!(r.status, Status::Good);
        assert_eq!(&r.data_in[..8], &[0, 0, 0, 16, 0, 0, 0, 0]);
        assert_eq!(&r.data_in[8..16], &encode_lun(0));
        assert_eq!(&r.data_in[16..24], &[0x41, 0x23, 0, 0, 0, 0, 0, 0]);
    }
    let r = t.run_on(&t.a, 0, &[0xA0, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_eq!(&r.data_in[..4], &[0, 0, 0, 24]);
    assert_eq!(&r.data_in[24..32], &[0xC1, 0x01, 0, 0, 0, 0, 0, 0]);
    let r = t.run_on(&t.a, 0, &spc::report_luns(10), &[]);
    assert_eq!(r.data_in.len(), 10, "allocation length truncates");
    let r = t.run_on(&t.a, 0, &[0xA0, 0, 9, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_check(&r, SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_CDB);

    // Absent LUN 7.
    let r = t.run_on(&t.a, 7, &spc::inquiry(96), &[]);
    assert_eq!(r.status, Status::Good);
    assert_eq!(r.data_in[0], 0x7F);
    let r = t.run_on(&t.a, 7, &spc::request_sense(18), &[]);
    assert_eq!(r.status, Status::Good);
    let s = parse_sense(&r.data_in).unwrap();
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
    );
    assert_check(
        &t.run_on(&t.a, 7, &spc::TEST_UNIT_READY, &[]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::LOGICAL_UNIT_NOT_SUPPORTED,
    );
    // The well-known LUN.
    let r = t.run_on(&t.a, WLUN_REPORT_LUNS, &spc::inquiry(96), &[]);
    assert_eq!(r.data_in[0], 0x1E);
    assert_eq!(
        t.run_on(&t.a, WLUN_REPORT_LUNS, &spc::TEST_UNIT_READY, &[])
            .status,
        Status::Good
    );
}

#[test]
fn read_capacity_and_lba_range() {
    let t = Target::ready();
    let r = t.a(&[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&r.data_in[..], &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 2, 0]);
    let r = t.a(&[0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(r.data_in.len(), 32);
    assert_eq!(&r.data_in[..8], &(BLOCKS - 1).to_be_bytes());
    assert_eq!(&r.data_in[8..12], &512u32.to_be_bytes());
    // READ(16) of the last block, then one past the end.
    let mut read16 = [0u8; 16];
    read16[0] = 0x88;
    read16[2..10].copy_from_slice(&(BLOCKS - 1).to_be_bytes());
    read16[13] = 1;
    let r = t.a(&read16);
    assert_eq!(r.status, Status::Good);
    assert_eq!(r.data_in.len(), 512);
    assert!(r.data_in.iter().all(|&b| b == 0));
    read16[2..10].copy_from_slice(&BLOCKS.to_be_bytes());
    let s = assert_check(
        &t.a(&read16),
        SenseKey::ILLEGAL_REQUEST,
        Asc::LOGICAL_BLOCK_ADDRESS_OUT_OF_RANGE,
    );
    assert_eq!(
        s.information, None,
        "LBA above 32 bits does not fit fixed format"
    );
    let read10 = sbc::read10(u32::MAX, 2);
    let disk = ScsiDevice::new(NullDisk::new(512, 1000));
    let nexus = ItNexus::new("x", 1);
    let req = |cdb: &[u8]| disk.execute(request(&nexus, cdb, &[]));
    req(&spc::TEST_UNIT_READY);
    let s = assert_check(
        &req(&read10),
        SenseKey::ILLEGAL_REQUEST,
        Asc::LOGICAL_BLOCK_ADDRESS_OUT_OF_RANGE,
    );
    assert_eq!(s.information, Some(u64::from(u32::MAX)));
}

#[test]
fn writes_need_matching_data() {
    let t = Target::ready();
    let write10 = [0x2A, 0, 0, 0, 0, 0x10, 0, 0, 2, 0];
    assert_eq!(t.run_on(&t.a, 0, &write10, &[0; 1024]).status, Status::Good);
    assert_check(
        &t.run_on(&t.a, 0, &write10, &[0; 512]),
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
    );
    // VERIFY with BYTCHK = 1 compares with zeros.
    let verify = [0x2F, 0x02, 0, 0, 0, 0, 0, 0, 1, 0];
    assert_eq!(t.run_on(&t.a, 0, &verify, &[0; 512]).status, Status::Good);
    let mut data = [0u8; 512];
    data[100] = 1;
    let s = assert_check(
        &t.run_on(&t.a, 0, &verify, &data),
        SenseKey::MISCOMPARE,
        Asc::MISCOMPARE_DURING_VERIFY_OPERATION,
    );
    assert_eq!(s.information, Some(100));
    assert_eq!(t.a(&[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0]).status, Status::Good);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any CDB of any length on any LUN, from either nexus, gets a response whose sense (if
    /// any) parses; never a panic.
    #[test]
    fn any_cdb_gets_a_proper_response(
        opcode in prop_oneof![
            any::<u8>(),
            proptest::sample::select(vec![
                0x00u8, 0x03, 0x08, 0x0A, 0x12, 0x15, 0x16, 0x17, 0x1A, 0x25, 0x28, 0x2A, 0x2F,
                0x35, 0x4C, 0x4D, 0x55, 0x56, 0x57, 0x5A, 0x5E, 0x5F, 0x7F, 0x88, 0x8A, 0x8F,
                0x91, 0x9E, 0xA0, 0xA3, 0xA4, 0xA8, 0xAA,
            ]),
        ],
        rest in proptest::collection::vec(any::<u8>(), 0..40),
        data_out in proptest::collection::vec(any::<u8>(), 0..64),
        selector in any::<u8>(),
    ) {
        let t = Target::ready();
        let mut cdb = vec![opcode];
        cdb.extend_from_slice(&rest);
        let mut input = vec![selector, cdb.len() as u8];
        input.extend_from_slice(&cdb);
        input.extend_from_slice(&data_out);
        reel_scsi::fuzzing::run(&t.table, &input);
        reel_scsi::fuzzing::run(&t.table, &input);
    }
}
