//! The encrypting back end over the two real S3 servers on loopback (versitygw and s3proxy,
//! started by `reel-s3test`; never a mock): the back-end contract holds through it, its ranged
//! reads map onto the server's, the server's files never hold the plaintext, and a wrong key
//! or a damaged object is an error, never data.

#![cfg(feature = "s3")]

mod common;

use std::sync::Arc;

use common::{Check, backend, fresh_prefix, key, pattern};
use reel_backend::crypt::{self, SEGMENT_SIZE};
use reel_backend::{
    Backend, BackendError, EncryptedBackend, PutMode, S3Backend, StoreKey, conformance,
};
use reel_s3test::{Kind, S3Server};

#[test]
fn versitygw() {
    run_all_checks(Kind::Versitygw);
}

/// On the second server, what depends on it: what its files hold, its ranged reads under the
/// encryption's segment mapping, and errors. The two conformance suites through encryption
/// run on versitygw only: the encryption is a layer over the `Backend` contract, which
/// `tests/s3.rs` checks on both servers, and s3proxy made them the CI's slowest test (125 s).
#[test]
fn s3proxy() {
    let checks: [(&str, Check); 3] = [
        ("no plaintext in the server's files", no_plaintext_stored),
        ("ranged reads of a large object", large_object_ranges),
        ("wrong key and damage", wrong_key_and_damage),
    ];
    common::run_checks(Kind::S3proxy, &checks);
}

fn run_all_checks(kind: Kind) {
    let checks: [(&str, Check); 5] = [
        ("conformance", conformance_suite),
        (
            "conformance of the write-back cache over encrypted S3",
            cached_conformance_suite,
        ),
        ("no plaintext in the server's files", no_plaintext_stored),
        ("ranged reads of a large object", large_object_ranges),
        ("wrong key and damage", wrong_key_and_damage),
    ];
    common::run_checks(kind, &checks);
}

fn s3(server: &S3Server, prefix: &str) -> Arc<S3Backend> {
    Arc::new(backend(server, prefix))
}

fn store_key(b: u8) -> StoreKey {
    StoreKey::from_bytes([b; 32])
}

/// Text that is easy to find in a file and compresses to nothing (so a leak would show).
fn marker_text(len: usize) -> Vec<u8> {
    b"REEL-PLAINTEXT-MARKER-0123456789/"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

fn conformance_suite(server: &S3Server) {
    conformance::run_all(&|| {
        Box::new(EncryptedBackend::new(
            s3(server, &fresh_prefix()),
            store_key(1),
        ))
    });
}

/// What `reel serve` runs: the write-back cache (plaintext, on the node) over the encrypting
/// back end over the bucket.
fn cached_conformance_suite(server: &S3Server) {
    common::cached_conformance(&|| {
        Arc::new(EncryptedBackend::new(
            s3(server, &fresh_prefix()),
            store_key(1),
        ))
    });
}

/// Every file under the server's data directory, read whole.
fn stored_files(server: &S3Server) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![server.data_dir()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    out
}

fn no_plaintext_stored(server: &S3Server) {
    let prefix = fresh_prefix();
    let b = EncryptedBackend::new(s3(server, &prefix), store_key(1));
    let text = marker_text(3 * SEGMENT_SIZE as usize + 1000);
    b.put(&key("packs/0001.pack"), &text, PutMode::Create)
        .unwrap();
    b.put(
        &key("catalog/journal/0001.jrnl"),
        &text[..500],
        PutMode::Create,
    )
    .unwrap();
    // The control: the same text stored without encryption is found, so the search works.
    let plain = s3(server, &fresh_prefix());
    plain
        .put(&key("control"), &text[..500], PutMode::Create)
        .unwrap();
    let needle = &text[..22];
    let mut ours = 0;
    let mut control_found = false;
    for (path, bytes) in stored_files(server) {
        let found = bytes.windows(needle.len()).any(|w| w == needle);
        if path.to_string_lossy().contains(&prefix) {
            ours += 1;
            assert!(!found, "{} holds plaintext", path.display());
            assert!(bytes.starts_with(b"reelSEAL"), "{}", path.display());
        } else if path.ends_with("control") {
            control_found = found;
        }
    }
    assert_eq!(ours, 2, "both objects are files under the prefix");
    assert!(
        control_found,
        "the unencrypted control object holds its text"
    );
    assert_eq!(b.get(&key("packs/0001.pack")).unwrap(), text);
}

fn large_object_ranges(server: &S3Server) {
    let b = EncryptedBackend::new(s3(server, &fresh_prefix()), store_key(1));
    let data = pattern(9 << 20, 3);
    let k = key("packs/big.pack");
    b.put(&k, &data, PutMode::Create).unwrap();
    let listed = b.list("packs/").unwrap();
    assert_eq!(listed[0].size, data.len() as u64);
    let seg = u64::from(SEGMENT_SIZE);
    for r in [
        0..1,
        seg - 1..seg + 1,
        5 * seg..5 * seg,
        3 * seg + 17..(7 << 20) + 5,
        data.len() as u64 - 1..data.len() as u64,
        0..data.len() as u64,
    ] {
        assert_eq!(
            b.get_range(&k, r.clone()).unwrap(),
            data[r.start as usize..r.end as usize],
            "{r:?}"
        );
    }
    assert!(matches!(
        b.get_range(&k, 0..data.len() as u64 + 1),
        Err(BackendError::InvalidRange { .. })
    ));
    // A fresh back end (no header cached) reads the same.
    let fresh = EncryptedBackend::new(b.inner().clone(), store_key(1));
    assert_eq!(
        fresh.get_range(&k, 4 * seg + 3..4 * seg + 10).unwrap(),
        data[4 * seg as usize + 3..4 * seg as usize + 10]
    );
}

fn wrong_key_and_damage(server: &S3Server) {
    let inner = s3(server, &fresh_prefix());
    let b = EncryptedBackend::new(inner.clone(), store_key(1));
    let k = key("catalog/journal/0000000000000001.jrnl");
    b.put(&k, &pattern(100_000, 9), PutMode::Create).unwrap();
    assert_eq!(
        crypt::sealed_key_id(&*inner, &k).unwrap(),
        Some(store_key(1).id())
    );
    let wrong = EncryptedBackend::new(inner.clone(), store_key(2));
    let err = wrong.get(&k).unwrap_err();
    assert!(matches!(err, BackendError::WrongKey { .. }), "{err}");
    assert!(
        err.to_string().contains(&store_key(1).id().to_string()),
        "{err}"
    );
    let err = wrong.get_range(&k, 10..20).unwrap_err();
    assert!(matches!(err, BackendError::WrongKey { .. }), "{err}");
    // One flipped byte in the middle of the stored object.
    let mut sealed = inner.get(&k).unwrap();
    let mid = sealed.len() / 2;
    sealed[mid] ^= 0x40;
    inner.put(&k, &sealed, PutMode::Overwrite).unwrap();
    let fresh = EncryptedBackend::new(inner.clone(), store_key(1));
    assert!(matches!(fresh.get(&k), Err(BackendError::Damaged { .. })));
    assert!(matches!(
        fresh.get_range(&k, 0..100_000),
        Err(BackendError::Damaged { .. })
    ));
    // Create semantics pass through unchanged.
    assert!(matches!(
        b.put(&k, b"other", PutMode::Create),
        Err(BackendError::AlreadyExists(_))
    ));
}
