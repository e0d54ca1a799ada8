//! The [`Backend`] contract as executable checks, for every implementation's tests:
//!
//! ```no_run
//! use reel_backend::{conformance, MemoryBackend};
//! // The closure must return a fresh, empty back end each time.
//! conformance::run_all(&|| Box::new(MemoryBackend::new()));
//! ```
//!
//! Each `check_*` takes an empty back end and panics with a message naming the back end and the
//! broken rule. Keys used are all under `conformance/`.

use std::sync::Barrier;

use crate::{Backend, BackendError, Key, PutMode};

/// Runs every check, each against a fresh back end from `make`.
pub fn run_all(make: &dyn Fn() -> Box<dyn Backend>) {
    let checks: [fn(&dyn Backend); 10] = [
        check_roundtrip,
        check_overwrite,
        check_create,
        check_concurrent_create,
        check_atomic_overwrite,
        check_get_range,
        check_list,
        check_delete,
        check_key_conflict,
        check_list_during_puts,
    ];
    for check in checks {
        let b = make();
        check(&*b);
    }
}

fn key(s: &str) -> Key {
    Key::new(format!("conformance/{s}")).expect("conformance keys are valid")
}

/// Deterministic, position-dependent bytes so misplaced ranges are caught.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(i as u32 >> 13) as u8 ^ seed)
        .collect()
}

fn must<T>(b: &dyn Backend, what: &str, r: crate::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("[{}] {what}: unexpected error: {e}", b.describe()))
}

fn keys_of(b: &dyn Backend, prefix: &str) -> Vec<String> {
    let listed = must(b, &format!("list {prefix:?}"), b.list(prefix));
    listed
        .into_iter()
        .map(|m| m.key.as_str().to_string())
        .collect()
}

/// Put then get returns the bytes: empty, small, and 20 MiB objects.
pub fn check_roundtrip(b: &dyn Backend) {
    for (name, len) in [("empty", 0), ("small", 1000), ("large", 20 << 20)] {
        let k = key(name);
        let data = pattern(len, 7);
        must(b, "put", b.put(&k, &data, PutMode::Create));
        let got = must(b, "get", b.get(&k));
        assert!(
            got == data,
            "[{}] get {k} returned {} bytes, not the {len} put",
            b.describe(),
            got.len()
        );
        let listed = must(b, "list", b.list(k.as_str()));
        assert_eq!(listed.len(), 1, "[{}] list of {k}", b.describe());
        assert_eq!(
            listed[0].size,
            len as u64,
            "[{}] listed size of {k}",
            b.describe()
        );
    }
    match b.get(&key("missing")) {
        Err(BackendError::NotFound(k)) => assert_eq!(k, key("missing")),
        other => panic!(
            "[{}] get missing: expected NotFound, got {other:?}",
            b.describe()
        ),
    }
}

/// Overwrite replaces existing content, and creates when absent.
pub fn check_overwrite(b: &dyn Backend) {
    let k = key("o");
    must(b, "put", b.put(&k, b"first", PutMode::Overwrite));
    must(b, "put", b.put(&k, b"second, longer", PutMode::Overwrite));
    must(b, "put", b.put(&k, b"3rd", PutMode::Overwrite));
    assert_eq!(
        must(b, "get", b.get(&k)),
        b"3rd",
        "[{}] overwrite did not replace",
        b.describe()
    );
}

/// Create over an existing object fails with AlreadyExists and keeps the first content.
pub fn check_create(b: &dyn Backend) {
    let k = key("c");
    must(b, "first create", b.put(&k, b"one", PutMode::Create));
    match b.put(&k, b"two", PutMode::Create) {
        Err(BackendError::AlreadyExists(e)) => assert_eq!(e, k),
        other => panic!(
            "[{}] second create: expected AlreadyExists, got {other:?}",
            b.describe()
        ),
    }
    assert_eq!(
        must(b, "get", b.get(&k)),
        b"one",
        "[{}] failed create changed data",
        b.describe()
    );
}

/// Concurrent creates of one key from 8 threads: exactly one wins, and its data is stored.
pub fn check_concurrent_create(b: &dyn Backend) {
    const THREADS: u8 = 8;
    for round in 0..4 {
        let k = key(&format!("race{round}"));
        let barrier = Barrier::new(THREADS as usize);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (k, barrier) = (&k, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        b.put(k, &pattern(4096, t), PutMode::Create)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("create thread panicked"))
                .collect()
        });
        let winners: Vec<u8> = (0..THREADS)
            .filter(|&t| results[t as usize].is_ok())
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "[{}] {k}: {} creates won: {results:?}",
            b.describe(),
            winners.len()
        );
        for r in &results {
            assert!(
                matches!(r, Ok(()) | Err(BackendError::AlreadyExists(_))),
                "[{}] losing create: expected AlreadyExists, got {r:?}",
                b.describe()
            );
        }
        let got = must(b, "get", b.get(&k));
        assert!(
            got == pattern(4096, winners[0]),
            "[{}] {k} does not hold the winner's data",
            b.describe()
        );
    }
}

/// Readers racing an overwriter see one whole version or the other, never a mix or a part.
pub fn check_atomic_overwrite(b: &dyn Backend) {
    let k = key("atomic");
    let versions = [vec![0xAA; 1 << 20], vec![0x55; (1 << 20) + 4096]];
    must(b, "put", b.put(&k, &versions[0], PutMode::Create));
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=20 {
                must(
                    b,
                    "overwrite",
                    b.put(&k, &versions[i % 2], PutMode::Overwrite),
                );
            }
        });
        for _ in 0..40 {
            let got = must(b, "get during overwrite", b.get(&k));
            assert!(
                versions.contains(&got),
                "[{}] read a torn object of {} bytes",
                b.describe(),
                got.len()
            );
        }
    });
}

/// get_range returns exactly the range; empty ranges work; ranges past the end are rejected.
pub fn check_get_range(b: &dyn Backend) {
    let k = key("r");
    let data = pattern(10_000, 3);
    must(b, "put", b.put(&k, &data, PutMode::Create));
    for (start, end) in [
        (0, 10_000),
        (0, 1),
        (1234, 5678),
        (9_999, 10_000),
        (500, 500),
        (10_000, 10_000),
    ] {
        let got = must(b, "get_range", b.get_range(&k, start..end));
        assert!(
            got == data[start as usize..end as usize],
            "[{}] get_range {start}..{end} wrong",
            b.describe()
        );
    }
    #[allow(clippy::reversed_empty_ranges)] // a reversed range is one of the invalid inputs
    let bad = [(0, 10_001), (9_000, 20_000), (10_001, 10_002), (20, 10)];
    for (start, end) in bad {
        match b.get_range(&k, start..end) {
            Err(BackendError::InvalidRange { size: 10_000, .. }) => {}
            other => panic!(
                "[{}] get_range {start}..{end}: expected InvalidRange, got {other:?}",
                b.describe()
            ),
        }
    }
    match b.get_range(&key("missing"), 0..0) {
        Err(BackendError::NotFound(_)) => {}
        other => panic!(
            "[{}] get_range of missing: expected NotFound, got {other:?}",
            b.describe()
        ),
    }
}

/// list filters by plain string prefix (not only at `/`) and sorts by key.
pub fn check_list(b: &dyn Backend) {
    let names = [
        "packs/0002.pack",
        "packs/0001.idx",
        "packsx",
        "packs-old/a",
        "idx/1",
        "packs/0001.pack",
        "packs/1/deep/x",
    ];
    for (i, n) in names.iter().enumerate() {
        must(b, "put", b.put(&key(n), &vec![1; i], PutMode::Create));
    }
    let expect = |prefix: &str, want: &[&str]| {
        let want: Vec<String> = want.iter().map(|n| format!("conformance/{n}")).collect();
        let got = keys_of(b, &format!("conformance/{prefix}"));
        assert_eq!(got, want, "[{}] list {prefix:?}", b.describe());
    };
    expect(
        "packs/",
        &[
            "packs/0001.idx",
            "packs/0001.pack",
            "packs/0002.pack",
            "packs/1/deep/x",
        ],
    );
    expect(
        "packs/0",
        &["packs/0001.idx", "packs/0001.pack", "packs/0002.pack"],
    );
    expect("packs/0001", &["packs/0001.idx", "packs/0001.pack"]);
    expect("packs/0001.pack", &["packs/0001.pack"]);
    expect("packs/1/de", &["packs/1/deep/x"]);
    expect(
        "packs",
        &[
            "packs-old/a",
            "packs/0001.idx",
            "packs/0001.pack",
            "packs/0002.pack",
            "packs/1/deep/x",
            "packsx",
        ],
    );
    expect("nothing", &[]);
    let all = must(b, "list", b.list(""));
    assert_eq!(all.len(), names.len(), "[{}] list \"\" count", b.describe());
    assert!(
        all.windows(2).all(|w| w[0].key < w[1].key),
        "[{}] list not sorted",
        b.describe()
    );
    for m in all {
        let i = names
            .iter()
            .position(|n| format!("conformance/{n}") == m.key.as_str());
        assert_eq!(
            Some(m.size as usize),
            i,
            "[{}] listed size of {}",
            b.describe(),
            m.key
        );
    }
}

/// Delete removes the object, and deleting a missing one is Ok.
pub fn check_delete(b: &dyn Backend) {
    let k = key("d/x");
    must(b, "delete missing", b.delete(&k));
    must(b, "put", b.put(&k, b"x", PutMode::Create));
    must(b, "delete", b.delete(&k));
    assert!(
        matches!(b.get(&k), Err(BackendError::NotFound(_))),
        "[{}] deleted object still readable",
        b.describe()
    );
    assert!(
        keys_of(b, "").is_empty(),
        "[{}] deleted object still listed",
        b.describe()
    );
    must(b, "delete again", b.delete(&k));
    must(b, "create after delete", b.put(&k, b"y", PutMode::Create));
    assert_eq!(must(b, "get", b.get(&k)), b"y");
}

/// `a` and `a/b` never coexist, whichever comes first; deleting frees the name.
pub fn check_key_conflict(b: &dyn Backend) {
    let conflict = |k: &Key, mode| match b.put(k, b"z", mode) {
        Err(BackendError::KeyConflict { .. }) => {}
        other => panic!(
            "[{}] put {k}: expected KeyConflict, got {other:?}",
            b.describe()
        ),
    };
    must(b, "put", b.put(&key("a"), b"a", PutMode::Create));
    conflict(&key("a/b"), PutMode::Create);
    conflict(&key("a/b/c"), PutMode::Overwrite);
    must(b, "put", b.put(&key("x/y/z"), b"z", PutMode::Create));
    conflict(&key("x"), PutMode::Overwrite);
    conflict(&key("x/y"), PutMode::Create);
    must(
        b,
        "put sibling",
        b.put(&key("x/y.z"), b"s", PutMode::Create),
    );
    must(b, "put sibling", b.put(&key("ab"), b"s", PutMode::Create));
    assert_eq!(
        keys_of(b, "conformance/"),
        [
            "conformance/a",
            "conformance/ab",
            "conformance/x/y.z",
            "conformance/x/y/z"
        ]
    );
    must(b, "delete", b.delete(&key("a")));
    must(
        b,
        "put after delete",
        b.put(&key("a/b"), b"b", PutMode::Create),
    );
    must(b, "delete", b.delete(&key("x/y/z")));
    must(
        b,
        "put after delete",
        b.put(&key("x/y"), b"y", PutMode::Create),
    );
    assert_eq!(
        keys_of(b, "conformance/"),
        [
            "conformance/a/b",
            "conformance/ab",
            "conformance/x/y",
            "conformance/x/y.z"
        ]
    );
}

/// Lists taken while puts are in flight show only whole, put objects (no temporary files).
pub fn check_list_during_puts(b: &dyn Backend) {
    let names: Vec<Key> = (0..64)
        .map(|i| key(&format!("l/{:02}/{i}", i % 4)))
        .collect();
    std::thread::scope(|s| {
        for chunk in names.chunks(16) {
            s.spawn(move || {
                for k in chunk {
                    must(b, "put", b.put(k, &[7; 3000], PutMode::Create));
                }
            });
        }
        for _ in 0..20 {
            for m in must(b, "list", b.list("")) {
                assert!(
                    names.contains(&m.key),
                    "[{}] list showed unexpected {}",
                    b.describe(),
                    m.key
                );
                assert_eq!(
                    m.size,
                    3000,
                    "[{}] list showed partial {}",
                    b.describe(),
                    m.key
                );
            }
        }
    });
    let mut want: Vec<String> = names.iter().map(ToString::to_string).collect();
    want.sort();
    assert_eq!(keys_of(b, ""), want, "[{}] final listing", b.describe());
}

/// The [`crate::VersionedObjects`] contract: create-only, compare-and-swap, versions that
/// change with every write, and exactly one winner among concurrent writers naming the same
/// version. Keys used are under `conformance/cas/`.
pub fn versioned(b: &dyn crate::VersionedObjects) {
    versioned_sequential(b);
    let wins = concurrent_swaps(b);
    assert_eq!(
        wins, 1,
        "{wins} of {CAS_WRITERS} compare-and-swap writers won"
    );
}

/// The contract one writer at a time sees. Every server reel supports must pass this; a server
/// that passes only this (its `If-Match` check and write are not one atomic step) can let two
/// nodes believe they took a lease for a moment, never two journals share a sequence number
/// (create-only puts fence those, [`check_concurrent_create`]).
pub fn versioned_sequential(b: &dyn crate::VersionedObjects) {
    let key = cas_key();
    assert!(
        b.read_versioned(&key).unwrap().is_none(),
        "absent object read as present"
    );
    let v1 = b.write_versioned(&key, b"one", None).expect("create");
    assert!(
        matches!(
            b.write_versioned(&key, b"again", None),
            Err(BackendError::AlreadyExists(_))
        ),
        "a second create succeeded"
    );
    let (data, seen) = b.read_versioned(&key).unwrap().expect("created object");
    assert_eq!((data.as_slice(), &seen), (&b"one"[..], &v1));
    let v2 = b
        .write_versioned(&key, b"two", Some(&v1))
        .expect("swap at the current version");
    assert_ne!(v1, v2, "a write kept the version");
    assert!(
        matches!(
            b.write_versioned(&key, b"stale", Some(&v1)),
            Err(BackendError::VersionMismatch(_))
        ),
        "a write at a stale version succeeded"
    );
    assert_eq!(b.read_versioned(&key).unwrap().unwrap().0, b"two");

    let listed = b.list_versioned("conformance/cas/").unwrap();
    assert_eq!(listed, vec![key]);
}

const CAS_WRITERS: usize = 6;

fn cas_key() -> Key {
    Key::new("conformance/cas/lease").unwrap()
}

/// Six writers swap `conformance/cas/lease` at the version it has now, at the same moment.
/// Checks that at least one won, that the object now holds one winner's body at the version that
/// winner was given, and that a writer at any other winner's version is refused. Returns how
/// many won.
pub fn concurrent_swaps(b: &dyn crate::VersionedObjects) -> usize {
    let key = cas_key();
    let (_, start) = b
        .read_versioned(&key)
        .unwrap()
        .expect("versioned_sequential left the object");
    let barrier = Barrier::new(CAS_WRITERS);
    let winners: Vec<(String, crate::Version)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CAS_WRITERS)
            .map(|i| {
                let (barrier, key, start) = (&barrier, &key, &start);
                s.spawn(move || {
                    barrier.wait();
                    let body = format!("w{i}");
                    match b.write_versioned(key, body.as_bytes(), Some(start)) {
                        Ok(v) => Some((body, v)),
                        Err(BackendError::VersionMismatch(_)) => None,
                        Err(e) => panic!("writer {i}: {e}"),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(!winners.is_empty(), "no compare-and-swap writer won");
    let (data, now) = b.read_versioned(&key).unwrap().expect("swapped object");
    let last = winners
        .iter()
        .find(|(body, _)| body.as_bytes() == data)
        .unwrap_or_else(|| {
            panic!(
                "the object holds {:?}, which no winner wrote",
                String::from_utf8_lossy(&data)
            )
        });
    assert_eq!(
        last.1, now,
        "the object is not at the version its writer was given"
    );
    for (body, version) in &winners {
        if *version != now {
            assert!(
                matches!(
                    b.write_versioned(&key, b"late", Some(version)),
                    Err(BackendError::VersionMismatch(_))
                ),
                "a write at overwritten winner {body}'s version succeeded"
            );
        }
    }
    winners.len()
}
