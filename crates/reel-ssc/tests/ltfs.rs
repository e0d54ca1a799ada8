//! What LTFS 2.4.8 (the reference implementation, run against reel in the VM's `ltfs` section)
//! sends a drive beyond the plain tape commands, byte for byte as its sg backend builds it, and
//! what it needs back. Each test reproduces a request that reel once refused or answered
//! differently from an IBM drive.

mod common;

use common::*;
use reel_media::MediaType;
use reel_scsi::{Asc, SenseKey};

const GB: u64 = 1 << 30;
const MB: u64 = 1_000_000;

/// MODE SENSE(10) of `page`/`subpage` with the block descriptor, as LTFS's sg_modesense asks.
fn mode_sense10_sub(page: u8, subpage: u8) -> [u8; 10] {
    [0x5A, 0, page, subpage, 0, 0, 0, 0x02, 0, 0]
}

/// A log page's parameters: (code, value).
fn log_params(page: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let len = usize::from(u16::from_be_bytes([page[2], page[3]]));
    let mut out = Vec::new();
    let mut at = 4;
    while at + 4 <= 4 + len {
        let code = u16::from_be_bytes([page[at], page[at + 1]]);
        let n = usize::from(page[at + 3]);
        out.push((code, page[at + 4..at + 4 + n].to_vec()));
        at += 4 + n;
    }
    out
}

/// Partition records of a page 17h parameter: (partition, MB).
fn partition_records(value: &[u8]) -> Vec<(u16, u32)> {
    value
        .chunks(8)
        .map(|r| {
            assert_eq!(r[0], 7, "record length");
            (
                u16::from_be_bytes([r[2], r[3]]),
                u32::from_be_bytes([r[4], r[5], r[6], r[7]]),
            )
        })
        .collect()
}

#[test]
fn volume_statistics_report_each_partitions_capacity_as_ltfs_reads_it_on_lto6_and_later() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, 20 * GB);
    ltfs_two_partitions(&rig);
    rig.good(&locate16(LocateDestination::Object(0), Some(1)), &[]);
    rig.good(&write6(Transfer::Variable(1 << 20)), &record(1, 1 << 20));
    let page = rig.good(&log_sense(0x17, 0xFFFF), &[]);
    let params = log_params(&page);
    let get = |code: u16| {
        params
            .iter()
            .find(|(c, _)| *c == code)
            .unwrap_or_else(|| panic!("parameter {code:04x}"))
            .1
            .clone()
    };
    let caps = rig.with_drive(|d| d.medium().unwrap().info().partition_capacities().to_vec());
    let native = partition_records(&get(0x0202));
    assert_eq!(
        native,
        [(0, (caps[0] / MB) as u32), (1, (caps[1] / MB) as u32)]
    );
    assert_eq!(partition_records(&get(0x0203)), [(0, 0), (1, 1)]);
    let remaining = partition_records(&get(0x0204));
    assert_eq!(remaining[0], (0, (caps[0] / MB) as u32));
    assert!(remaining[1].1 < native[1].1);
    // LTFS's cartridge health reads these too: a virtual cartridge makes no passes.
    assert_eq!(get(0x0101), [0, 0, 0, 0]);
    assert_eq!(get(0x0102), [0, 0, 0, 0]);
}

#[test]
fn programmable_early_warning_is_set_through_page_10h_01h_and_reported_once() {
    // 100 MB cartridge: early warning at 98 % (98 MB); LTFS sets PEWS to half its index
    // partition. Here 10 MB: the warning comes at 88 MB written.
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, 100 * MB);
    let m = rig.good(&mode_sense10_sub(0x10, 0x01), &[]);
    assert_eq!(
        m.len(),
        48,
        "LTFS insists on 48 bytes (TC_MP_DEV_CONFIG_EXT_SIZE)"
    );
    let mut list = m.to_vec();
    list[0] = 0;
    list[1] = 0;
    list[16] &= 0x7F;
    list[22..24].copy_from_slice(&10u16.to_be_bytes());
    rig.good(&mode_select10(48), &list);
    let back = rig.good(&mode_sense10_sub(0x10, 0x01), &[]);
    assert_eq!(&back[22..24], &[0, 10]);

    let block = 1_000_000;
    let mut reported = Vec::new();
    for i in 0..97u32 {
        let r = rig.run(
            &write6(Transfer::Variable(block)),
            &record(i as u8, block as usize),
        );
        if let Some(s) = sense_of(&r) {
            assert_eq!(s.key, SenseKey::NO_SENSE);
            reported.push((i + 1, s.asc));
        }
    }
    assert_eq!(
        reported,
        [(88, Asc::PROGRAMMABLE_EARLY_WARNING_DETECTED)],
        "once, at the first write ending in the zone"
    );
    // Early warning itself still comes at 98 MB.
    let (s, _) = rig.check(
        &write6(Transfer::Variable(block)),
        &record(9, block as usize),
    );
    assert!(s.eom);
    assert_eq!(s.asc, Asc::END_OF_PARTITION_MEDIUM_DETECTED);
}

#[test]
fn ibm_drive_dump_is_forced_and_read_back_through_buffer_1() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // SEND DIAGNOSTIC, PF, 8-byte list: page 80h, length 4, DIAG ID 0160h (force dump).
    rig.good(
        &[0x1D, 0x10, 0, 0, 0x08, 0],
        &[0x80, 0, 0, 4, 0x01, 0x60, 0, 0],
    );
    // READ BUFFER mode 03h (descriptor) of buffer 1, then the data in 4-byte pieces.
    let d = rig.good(&[0x3C, 0x03, 0x01, 0, 0, 0, 0, 0, 4, 0], &[]);
    let size = u32::from_be_bytes([0, d[1], d[2], d[3]]) as usize;
    assert!(size > 0);
    let mut dump = Vec::new();
    while dump.len() < size {
        let offset = dump.len() as u32;
        let [_, a, b, c] = offset.to_be_bytes();
        let piece = rig.good(&[0x3C, 0x02, 0x01, a, b, c, 0, 0, 4, 0], &[]);
        dump.extend_from_slice(&piece);
    }
    let text = String::from_utf8(dump).unwrap();
    assert!(text.starts_with("reel drive dump\n"), "{text}");
    assert!(text.contains("ULT3580-TD9"));
    // An HPE drive has no IBM diagnostic page 80h.
    let hpe = Rig::loaded("hpe-ultrium9", MediaType::Lto9, GB);
    let (s, _) = hpe.check(
        &[0x1D, 0x10, 0, 0, 0x08, 0],
        &[0x80, 0, 0, 4, 0x01, 0x60, 0, 0],
    );
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
}

#[test]
fn volume_change_reference_changes_with_the_volume_and_only_then() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // READ ATTRIBUTE of 0009h with LTFS's 13-byte buffer: the value at bytes 9–12.
    let vcr = || {
        let d = rig.good(
            &[0x8C, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x09, 0, 0, 0, 13, 0, 0],
            &[],
        );
        assert_eq!(&d[4..9], &[0x00, 0x09, 0x80, 0x00, 0x04]);
        u32::from_be_bytes([d[9], d[10], d[11], d[12]])
    };
    let blank = vcr();
    rig.good(&write6(Transfer::Variable(512)), &record(1, 512));
    rig.good(&write_filemarks(1, false), &[]);
    let written = vcr();
    assert_ne!(written, blank);
    assert_ne!(written, u32::MAX, "u32::MAX means unusable to LTFS");
    // Reading, positioning, unloading and loading change nothing.
    rig.good(&REWIND, &[]);
    rig.good(&read6(Transfer::Variable(512), false), &[]);
    rig.good(&UNLOAD, &[]);
    rig.good(&LOAD, &[]);
    assert_eq!(vcr(), written);
    // Nor does writing the cartridge memory (LTFS writes its coherency data after reading it).
    rig.good(
        &[0x8D, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0, 0],
        &[
            0, 0, 0, 0x11, 0x08, 0x00, 0x01, 0x00, 0x08, b'R', b'E', b'E', b'L', b'T', b'E', b'S',
            b'T',
        ],
    );
    assert_eq!(vcr(), written);
    // An overwrite does.
    rig.good(&REWIND, &[]);
    rig.good(&write6(Transfer::Variable(512)), &record(2, 512));
    assert_ne!(vcr(), written);
}

#[test]
fn ibm_page_25h_reports_application_managed_encryption_and_its_state() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let m = rig.good(&mode_sense10_sub(0x25, 0), &[]);
    assert_eq!(
        m.len(),
        48,
        "LTFS reads 48 bytes (TC_MP_READ_WRITE_CTRL_SIZE)"
    );
    let page = &m[16..];
    assert_eq!((page[0] & 0x3F, page[1]), (0x25, 30));
    assert_eq!(page[20] & 0x03, 0, "encryption off");
    assert_eq!(page[24] & 0x01, 1, "the cartridge supports encryption");
    assert_eq!(page[27], 0x50, "application-managed encryption");
    // stenc -e on: the state follows.
    let mut sde = vec![0u8; 52];
    sde[..4].copy_from_slice(&[0x00, 0x10, 0x00, 48]);
    sde[4] = 2 << 5;
    sde[6] = 2;
    sde[7] = 3;
    sde[8] = 1;
    sde[18..20].copy_from_slice(&32u16.to_be_bytes());
    sde[20..].copy_from_slice(&[7; 32]);
    rig.good(&security_protocol_out(0x20, 0x0010, 52), &sde);
    let m = rig.good(&mode_sense10_sub(0x25, 0), &[]);
    assert_eq!(m[16 + 20] & 0x03, 1, "encryption on");
    // HPE and Quantum personalities have no IBM vendor pages.
    let hpe = Rig::loaded("hpe-ultrium9", MediaType::Lto9, GB);
    let (s, _) = hpe.check(&mode_sense10_sub(0x25, 0), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
}
