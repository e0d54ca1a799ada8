//! Tape data encryption (SSC-4 §4.2.27, §8.5) as `stenc` and backup applications use it:
//! SECURITY PROTOCOL OUT sets a key, records go to the medium sealed, and READ gives them back
//! only with that key, with the sense an LTO drive returns otherwise.

mod common;

use common::*;
use reel_media::{MediaType, ObjectKind, PartitionStore};
use reel_scsi::{Asc, SenseKey};

const GB: u64 = 1 << 30;
const TDE: u8 = 0x20;

/// A Set Data Encryption page the way stenc 1.0.7 builds it: scope ALL I_T NEXUS, CEEM 01b,
/// a 32-byte key (zeros when both modes are DISABLE) and an optional uKAD.
fn sde(encrypt: u8, decrypt: u8, key: &[u8; 32], ukad: &[u8], ckod: bool) -> Vec<u8> {
    let mut page = vec![0u8; 20];
    page[..2].copy_from_slice(&0x0010u16.to_be_bytes());
    page[4] = 2 << 5;
    page[5] = 1 << 6 | u8::from(ckod) << 2;
    page[6] = encrypt;
    page[7] = decrypt;
    page[8] = 1;
    page[18..20].copy_from_slice(&32u16.to_be_bytes());
    page.extend_from_slice(key);
    if !ukad.is_empty() {
        // stenc leaves the reserved byte uninitialised: the drive ignores it.
        page.extend_from_slice(&[0x00, 0xA5]);
        page.extend_from_slice(&(ukad.len() as u16).to_be_bytes());
        page.extend_from_slice(ukad);
    }
    let len = (page.len() - 4) as u16;
    page[2..4].copy_from_slice(&len.to_be_bytes());
    page
}

fn set(rig: &Rig, page: &[u8]) {
    rig.good(&security_protocol_out(TDE, 0x0010, page.len() as u32), page);
}

fn set_refused(rig: &Rig, page: &[u8]) -> reel_scsi::Sense {
    rig.check(&security_protocol_out(TDE, 0x0010, page.len() as u32), page)
        .0
}

fn spin(rig: &Rig, page: u16) -> Vec<u8> {
    rig.good(&security_protocol_in(TDE, page, 8192), &[])
        .to_vec()
}

/// (encryption status, algorithm index, the KADs) from Next Block Encryption Status.
fn next_block(rig: &Rig) -> (u8, u8, Vec<(u8, Vec<u8>)>) {
    let d = spin(rig, 0x0021);
    assert_eq!(&d[..2], &[0x00, 0x21]);
    assert_eq!(usize::from(u16::from_be_bytes([d[2], d[3]])) + 4, d.len());
    (d[12] & 0x0F, d[13], kads(&d[16..]))
}

fn kads(mut d: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while d.len() >= 4 {
        let len = usize::from(u16::from_be_bytes([d[2], d[3]]));
        out.push((d[0], d[4..4 + len].to_vec()));
        d = &d[4 + len..];
    }
    out
}

fn refused(rig: &Rig, len: u32) -> Asc {
    let (s, data) = rig.check(&read6(Transfer::Variable(len), false), &[]);
    assert_eq!(s.key, SenseKey::DATA_PROTECT, "{s:?}");
    assert!(data.is_empty());
    s.asc
}

const KEY: [u8; 32] = [0x5A; 32];
const OTHER_KEY: [u8; 32] = [0xC3; 32];

#[test]
fn records_written_with_a_key_read_back_only_with_that_key() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    let plain = record(1, 10240);
    let secret: Vec<Vec<u8>> = (2..4).map(|s| record(s, 10240)).collect();
    rig.good(&write6(Transfer::Variable(10240)), &plain);
    // stenc -e mixed: encrypt everything written, read both kinds.
    set(&rig, &sde(2, 3, &KEY, b"weekly-full-key", false));
    for r in &secret {
        rig.good(&write6(Transfer::Variable(10240)), r);
    }
    rig.good(&write_filemarks(1, false), &[]);

    // What the store holds: sealed forms that contain neither the data nor the key.
    rig.with_drive(|d| {
        let mut parts = d.medium().unwrap().partitions().to_vec();
        let p = &mut parts[0];
        assert_eq!(p.object(0).unwrap(), ObjectKind::Record { len: 10240 });
        for (n, r) in secret.iter().enumerate() {
            let n = n as u64 + 1;
            assert!(
                matches!(p.object(n).unwrap(), ObjectKind::EncryptedRecord { len } if len > 10240)
            );
            let mut stored = Vec::new();
            p.read_record(n, &mut stored).unwrap();
            assert!(!stored.windows(64).any(|w| r.windows(64).any(|x| x == w)));
            assert!(!stored.windows(32).any(|w| w == KEY));
        }
    });

    rig.good(&REWIND, &[]);
    assert_eq!(next_block(&rig).0, 0x3, "a plain record");
    assert_eq!(
        rig.good(&read6(Transfer::Variable(10240), false), &[]),
        plain
    );
    let (status, algorithm, kads) = next_block(&rig);
    assert_eq!((status, algorithm), (0x5, 1), "encrypted, this key");
    assert_eq!(kads, vec![(0x00, b"weekly-full-key".to_vec())]);
    assert_eq!(
        rig.good(&read6(Transfer::Variable(10240), false), &[]),
        secret[0]
    );

    // Another key: 74h/03h, and the position stays before the record.
    set(&rig, &sde(2, 3, &OTHER_KEY, b"other", false));
    assert_eq!(refused(&rig, 10240), Asc::INCORRECT_DATA_ENCRYPTION_KEY);
    assert_eq!(long_position(&rig).1, 2);
    let (status, _, kads) = next_block(&rig);
    assert_eq!(status, 0x6, "encrypted, a key this drive does not hold");
    assert_eq!(
        kads,
        vec![(0x00, b"weekly-full-key".to_vec())],
        "the record's own KAD"
    );

    // No key (stenc -e off): 74h/01h.
    set(&rig, &sde(0, 0, &[0; 32], b"", false));
    assert_eq!(refused(&rig, 10240), Asc::UNABLE_TO_DECRYPT_DATA);
    assert_eq!(long_position(&rig).1, 2);

    // stenc -e on (DECRYPT): encrypted records only; a plain one is 74h/02h.
    set(&rig, &sde(2, 2, &KEY, b"", false));
    rig.good(&REWIND, &[]);
    assert_eq!(
        refused(&rig, 10240),
        Asc::UNENCRYPTED_DATA_ENCOUNTERED_WHILE_DECRYPTING
    );
    assert_eq!(long_position(&rig).1, 0);
    rig.good(&locate10(2, None), &[]);
    assert_eq!(
        rig.good(&read6(Transfer::Variable(10240), false), &[]),
        secret[1]
    );
    // Filemark and end-of-data read as always; their status is "not a logical block".
    assert_eq!(next_block(&rig).0, 0x2);
    let (s, _) = rig.check(&read6(Transfer::Variable(10240), false), &[]);
    assert!(s.filemark);
}

#[test]
fn short_and_long_reads_of_encrypted_records_report_the_host_length() {
    let rig = Rig::loaded("hpe-ultrium9", MediaType::Lto9, GB);
    set(&rig, &sde(2, 3, &KEY, b"", false));
    let r = record(7, 4000);
    rig.good(&write6(Transfer::Variable(4000)), &r);
    rig.good(&write6(Transfer::Variable(4000)), &r);
    rig.good(&REWIND, &[]);
    // Asked for less: ILI, residue −(4000 − 1000), the first 1000 bytes, position past it.
    let (s, data) = rig.check(&read6(Transfer::Variable(1000), false), &[]);
    assert!(s.ili);
    assert_eq!(residue(&s), 1000 - 4000);
    assert_eq!(&data[..], &r[..1000]);
    // Asked for more, SILI: the whole record, GOOD.
    assert_eq!(rig.good(&read6(Transfer::Variable(9000), true), &[]), r);
    assert_eq!(long_position(&rig).1, 2);
}

#[test]
fn fixed_block_writes_and_reads_encrypt_each_block() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    rig.good(
        &mode_select6(12),
        &[0, 0, 0x10, 8, 0, 0, 0, 0, 0, 0, 0x02, 0x00],
    );
    set(&rig, &sde(2, 3, &KEY, b"", false));
    let data = record(9, 4 * 512);
    rig.good(&write6(Transfer::Fixed(4)), &data);
    rig.good(&REWIND, &[]);
    assert_eq!(rig.good(&read6(Transfer::Fixed(4), false), &[]), data);
    // Without the key a fixed read stops at once, residue all blocks, nothing moved.
    set(&rig, &sde(0, 0, &[0; 32], b"", false));
    rig.good(&REWIND, &[]);
    let (s, got) = rig.check(&read6(Transfer::Fixed(4), false), &[]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::DATA_PROTECT, Asc::UNABLE_TO_DECRYPT_DATA)
    );
    assert_eq!(residue(&s), 4);
    assert!(got.is_empty());
    assert_eq!(long_position(&rig).1, 0);
}

#[test]
fn the_key_stays_across_unload_unless_ckod_clears_it() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    set(&rig, &sde(2, 3, &KEY, b"", false));
    rig.good(&write6(Transfer::Variable(512)), &record(3, 512));
    rig.good(&UNLOAD, &[]);
    rig.good(&LOAD, &[]);
    assert_eq!(
        rig.good(&read6(Transfer::Variable(512), false), &[]).len(),
        512
    );

    set(&rig, &sde(2, 3, &KEY, b"", true));
    rig.good(&UNLOAD, &[]);
    rig.good(&LOAD, &[]);
    assert_eq!(refused(&rig, 512), Asc::UNABLE_TO_DECRYPT_DATA);
    let status = spin(&rig, 0x0020);
    assert_eq!((status[5], status[6]), (0, 0), "modes back to DISABLE");
    // A cartridge taken out by the changer is demounted too.
    set(&rig, &sde(2, 3, &KEY, b"", true));
    let c = rig.remove().unwrap();
    rig.insert(c).unwrap();
    rig.run(&request_sense(18), &[]);
    let status = spin(&rig, 0x0020);
    assert_eq!((status[5], status[6]), (0, 0));
}

#[test]
fn pages_report_what_the_drive_supports_and_its_state() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    // Security protocol information: protocols 00h and 20h.
    let d = rig.good(&security_protocol_in(0x00, 0x0000, 64), &[]);
    assert_eq!(&d[6..], &[0, 2, 0x00, 0x20]);
    let d = spin(&rig, 0x0000);
    assert_eq!(
        &d[..],
        &[
            0, 0, 0, 14, 0, 0, 0, 1, 0, 0x10, 0, 0x11, 0, 0x12, 0, 0x20, 0, 0x21
        ]
    );
    assert_eq!(spin(&rig, 0x0001), vec![0, 1, 0, 2, 0, 0x10]);
    let caps = spin(&rig, 0x0010);
    let descriptor = &caps[20..];
    assert_eq!(descriptor[0], 1, "algorithm index");
    assert_eq!(
        u16::from_be_bytes([descriptor[10], descriptor[11]]),
        32,
        "key length"
    );
    assert_eq!(
        &descriptor[20..24],
        &[0x00, 0x01, 0x00, 0x14],
        "AES-256-GCM"
    );
    assert_eq!(spin(&rig, 0x0011), vec![0, 0x11, 0, 1, 0]);

    let status = spin(&rig, 0x0020);
    assert_eq!(status.len(), 24);
    assert_eq!((status[5], status[6], status[7]), (0, 0, 0));
    set(&rig, &sde(2, 3, &KEY, b"k1", false));
    let status = spin(&rig, 0x0020);
    assert_eq!(status[4] >> 5, 2, "ALL I_T NEXUS");
    assert_eq!((status[5], status[6], status[7]), (2, 3, 1));
    let instance = u32::from_be_bytes(status[8..12].try_into().unwrap());
    assert_eq!(kads(&status[24..]), vec![(0, b"k1".to_vec())]);
    assert!(
        !status.windows(32).any(|w| w == KEY),
        "the key is never reported"
    );
    set(&rig, &sde(2, 3, &KEY, b"k1", false));
    let status = spin(&rig, 0x0020);
    assert_eq!(
        u32::from_be_bytes(status[8..12].try_into().unwrap()),
        instance + 1
    );
    // Another nexus sees the same parameters (scope ALL I_T NEXUS).
    let other = rig.run_as(&rig.other, &security_protocol_in(TDE, 0x0020, 8192), &[]);
    assert_eq!(&other.data_in[..], &status[..]);
    // The allocation length truncates.
    assert_eq!(
        rig.good(&security_protocol_in(TDE, 0x0020, 6), &[]).len(),
        6
    );
    // An empty drive answers the drive pages but not the next block's.
    let _ = rig.remove().unwrap();
    assert_eq!(spin(&rig, 0x0011), vec![0, 0x11, 0, 1, 0]);
    let (s, _) = rig.check(&security_protocol_in(TDE, 0x0021, 64), &[]);
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT)
    );
}

#[test]
fn malformed_requests_are_refused_with_a_pointer_and_change_nothing() {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
    set(&rig, &sde(2, 3, &KEY, b"", false));
    let before = spin(&rig, 0x0020);
    let field = |s: reel_scsi::Sense| match s.key_specific {
        Some(reel_scsi::KeySpecific::FieldPointer { byte, .. }) => (s.asc, byte),
        other => panic!("no field pointer: {other:?}"),
    };
    let mut p = sde(2, 3, &KEY, b"", false);
    p[4] = 1 << 5; // LOCAL scope
    assert_eq!(
        field(set_refused(&rig, &p)),
        (Asc::INVALID_FIELD_IN_PARAMETER_LIST, 4)
    );
    let mut p = sde(2, 3, &KEY, b"", false);
    p[6] = 1; // EXTERNAL
    assert_eq!(field(set_refused(&rig, &p)).1, 6);
    let mut p = sde(2, 3, &KEY, b"", false);
    p[7] = 1; // RAW
    assert_eq!(field(set_refused(&rig, &p)).1, 7);
    let mut p = sde(2, 3, &KEY, b"", false);
    p[8] = 2; // an algorithm the drive does not have
    assert_eq!(field(set_refused(&rig, &p)).1, 8);
    let mut p = sde(2, 3, &KEY, b"", false);
    p[9] = 1; // a wrapped key
    assert_eq!(field(set_refused(&rig, &p)).1, 9);
    // A 16-byte key.
    let mut p = sde(2, 3, &KEY, b"", false);
    p.truncate(36);
    p[18..20].copy_from_slice(&16u16.to_be_bytes());
    p[2..4].copy_from_slice(&32u16.to_be_bytes());
    assert_eq!(field(set_refused(&rig, &p)).1, 18);
    // A uKAD longer than 32 bytes, a nonce descriptor.
    assert_eq!(
        field(set_refused(&rig, &sde(2, 3, &KEY, &[b'x'; 33], false))).1,
        52
    );
    let mut p = sde(2, 3, &KEY, b"nonce-123456", false);
    p[52] = 0x02;
    assert_eq!(field(set_refused(&rig, &p)).1, 52);
    // A page length that disagrees with the transfer.
    let mut p = sde(2, 3, &KEY, b"", false);
    p[3] += 1;
    assert_eq!(set_refused(&rig, &p).asc, Asc::PARAMETER_LIST_LENGTH_ERROR);
    assert_eq!(
        set_refused(&rig, &p[..10]).asc,
        Asc::PARAMETER_LIST_LENGTH_ERROR
    );
    // CDB fields: other protocols, pages, INC_512.
    let p = sde(2, 3, &KEY, b"", false);
    let (s, _) = rig.check(&security_protocol_out(0x21, 0x0010, p.len() as u32), &p);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    let (s, _) = rig.check(&security_protocol_in(TDE, 0x0030, 64), &[]);
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_CDB);
    let mut cdb = security_protocol_in(TDE, 0x0020, 64);
    cdb[4] = 0x80;
    assert_eq!(rig.check(&cdb, &[]).0.asc, Asc::INVALID_FIELD_IN_CDB);
    assert_eq!(spin(&rig, 0x0020), before, "nothing changed");
}
