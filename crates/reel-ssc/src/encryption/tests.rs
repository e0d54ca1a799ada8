use proptest::prelude::*;

use super::*;

fn keyed(key: [u8; KEY_LEN], kads: Vec<Kad>) -> Encryption {
    Encryption {
        encrypt: true,
        decrypt: DecryptionMode::Mixed,
        key: Some(Zeroizing::new(key)),
        kads,
        set: true,
        ..Encryption::default()
    }
}

fn ukad(data: &[u8]) -> Kad {
    Kad {
        kind: KAD_UKAD,
        data: data.to_vec(),
    }
}

#[test]
fn a_sealed_record_names_its_kads_in_clear_and_hides_its_data() {
    let drive = keyed(
        [7; KEY_LEN],
        vec![
            ukad(b"label"),
            Kad {
                kind: KAD_AKAD,
                data: b"a".to_vec(),
            },
        ],
    );
    let record = vec![0x42u8; 1000];
    let sealed = drive.seal(&record).unwrap();
    assert_eq!(
        sealed.len(),
        record.len() + 4 + 2 + (3 + 5) + (3 + 1) + 4 + 12 + 16
    );
    let parsed = parse_sealed(&sealed).unwrap();
    assert_eq!(
        parsed.kads,
        vec![(KAD_UKAD, b"label".to_vec()), (KAD_AKAD, b"a".to_vec())]
    );
    assert!(!sealed.windows(16).any(|w| w == [0x42; 16]));
    assert_eq!(drive.open(&sealed).unwrap(), record);
    // Two seals of one record differ (a fresh nonce each time).
    assert_ne!(drive.seal(&record).unwrap(), sealed);
}

#[test]
fn wrong_keys_and_damage_are_told_apart() {
    let drive = keyed([7; KEY_LEN], vec![ukad(b"label")]);
    let sealed = drive.seal(b"payload").unwrap();
    assert_eq!(
        keyed([8; KEY_LEN], vec![]).open(&sealed),
        Err(OpenError::WrongKey)
    );
    assert_eq!(
        Encryption::default().open(&sealed),
        Err(OpenError::WrongKey)
    );
    // Any flipped bit after the magic: the KADs and key check are authenticated too.
    for at in 4..sealed.len() {
        let mut bad = sealed.clone();
        bad[at] ^= 0x01;
        let result = drive.open(&bad);
        assert!(result.is_err(), "byte {at}");
    }
    let mut bad = sealed.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x80;
    assert_eq!(drive.open(&bad), Err(OpenError::Integrity));
    assert_eq!(drive.open(&sealed[..10]), Err(OpenError::Unsupported));
    assert_eq!(drive.open(b"RTE1"), Err(OpenError::Unsupported));
}

#[test]
fn the_key_check_does_not_give_the_key_away() {
    let key = [0x11; KEY_LEN];
    let check = key_check(&key);
    assert_ne!(&check[..], &key[..KEY_CHECK_LEN]);
    assert_ne!(check, key_check(&[0x12; KEY_LEN]));
}

#[test]
fn clearing_on_demount_keeps_the_instance_counter() {
    let mut drive = keyed([1; KEY_LEN], vec![]);
    drive.key_instance = 9;
    drive.medium_demounted();
    assert!(drive.encrypting(), "without CKOD the key stays");
    drive.clear_on_demount = true;
    drive.medium_demounted();
    assert!(!drive.encrypting());
    assert_eq!(drive.decryption_mode(), DecryptionMode::Disable);
    assert_eq!(drive.key_instance, 9);
}

proptest! {
    #[test]
    fn seal_then_open_gives_the_record_back(
        key in any::<[u8; KEY_LEN]>(),
        record in proptest::collection::vec(any::<u8>(), 1..5000),
        label in proptest::collection::vec(any::<u8>(), 0..=MAX_UKAD),
    ) {
        let kads = if label.is_empty() { vec![] } else { vec![ukad(&label)] };
        let drive = keyed(key, kads);
        let sealed = drive.seal(&record).unwrap();
        prop_assert!(sealed.len() <= record.len() + reel_media::MAX_SEALING_OVERHEAD as usize);
        prop_assert_eq!(drive.open(&sealed).unwrap(), record);
    }

    #[test]
    fn arbitrary_sealed_forms_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut bytes = bytes;
        if bytes.len() >= 5 && bytes[0] & 1 == 0 {
            // Often a plausible header, so the parser goes past the magic.
            bytes[..4].copy_from_slice(SEAL_MAGIC);
            bytes[4] = ALGORITHM_INDEX;
        }
        let _ = parse_sealed(&bytes);
        let _ = keyed([3; KEY_LEN], vec![]).open(&bytes);
    }

    #[test]
    fn arbitrary_set_data_encryption_pages_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut bytes = bytes;
        if bytes.len() >= 20 {
            // Often a well-formed header, so the parser reaches the key and the KADs.
            bytes[..2].copy_from_slice(&PAGE_SET_DATA_ENCRYPTION.to_be_bytes());
            let len = (bytes.len() - 4) as u16;
            bytes[2..4].copy_from_slice(&len.to_be_bytes());
        }
        let _ = SetDataEncryption::parse(&bytes);
    }
}
