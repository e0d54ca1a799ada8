//! Encryption at rest end to end, against a real S3 server (versitygw) on loopback: cartridges
//! written through iSCSI with `[store.encryption]` leave no plaintext in the server's files,
//! `reel recover` with the right key reads them back byte for byte, and a wrong key or no key
//! is refused with a clear message before anything is changed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::cartridges::{Workload, noise, sessions};
use common::keys::{generate_key, reel, succeeded};
use reel_s3test::{Kind, S3Server};
use reel_testkit::serve::ServeCommand;

const LIB: &str = "iqn.2026-11.org.reel:library";
const RECORD: usize = 128 << 10;
const RECORDS: u64 = 6;
const CARTRIDGES: u64 = 3;
const WORKLOAD: Workload = Workload {
    record_len: RECORD,
    records: RECORDS,
    record,
};

/// Record `r` of cartridge `c`: pseudo-random bytes, which compression stores verbatim, so
/// without encryption they would be found as they are in the pack objects.
fn record(c: u64, r: u64) -> Vec<u8> {
    noise(c * 100 + r + 1, RECORD)
}

/// 32-byte pieces of what was written, to look for in stored files.
fn needles() -> Vec<Vec<u8>> {
    (0..CARTRIDGES)
        .flat_map(|c| (0..RECORDS).map(move |r| record(c, r)[1000..1032].to_vec()))
        .collect()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// How many of `needles` occur in the files under `dir`.
fn needles_found(dir: &Path, needles: &[Vec<u8>]) -> usize {
    let files: Vec<Vec<u8>> = files_under(dir)
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    needles
        .iter()
        .filter(|n| {
            files
                .iter()
                .any(|f| f.windows(n.len()).any(|w| w == &n[..]))
        })
        .count()
}

/// Every file under `dir` with its BLAKE3 hash: a snapshot to prove nothing changed.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    files_under(dir)
        .into_iter()
        .map(|p| {
            let hash = blake3::hash(&std::fs::read(&p).unwrap())
                .to_hex()
                .to_string();
            (p, hash)
        })
        .collect()
}

fn write_config(path: &Path, s3: &S3Server, key_file: &Path) {
    let text = format!(
        "[store]\nbackend = \"s3\"\ndurability = \"bucket\"\n\n[store.s3]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"node-a\"\nregion = \"{}\"\n\n[store.cache]\nsize = \"512M\"\n\n[store.encryption]\nkey_file = \"{}\"\n",
        s3.endpoint(),
        s3.bucket(),
        s3.region(),
        key_file.display()
    );
    std::fs::write(path, text).unwrap();
}

fn serve(data: &Path, config: Option<&Path>, s3: &S3Server) -> common::Server {
    let mut command = ServeCommand::new(data)
        .args(&["--cartridges", "10"])
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key());
    if let Some(config) = config {
        command = command.args(&[std::ffi::OsStr::new("--config"), config.as_os_str()]);
    }
    command.start()
}

fn recover(s3: &S3Server, into: &Path, key_file: Option<&Path>) -> Output {
    let endpoint = s3.endpoint();
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "recover".as_ref(),
        "--from".as_ref(),
        "s3://reel-test/node-a".as_ref(),
        "--endpoint".as_ref(),
        endpoint.as_ref(),
        "--data".as_ref(),
        into.as_os_str(),
    ];
    if let Some(key_file) = key_file {
        args.extend(["--key-file".as_ref(), key_file.as_os_str()]);
    }
    reel(&args, s3)
}

#[test]
fn an_encrypted_bucket_holds_no_plaintext_and_recovers_only_with_its_key() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("store.key");
    let key_id = generate_key(&key_file, &s3);
    assert_eq!(key_id.len(), 16, "{key_id}");
    // Never overwritten.
    let again = reel(
        &["key".as_ref(), "generate".as_ref(), key_file.as_os_str()],
        &s3,
    );
    assert!(!again.status.success());
    let wrong_key_file = dir.path().join("wrong.key");
    let wrong_id = generate_key(&wrong_key_file, &s3);

    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, &key_file);
    let data = dir.path().join("node");
    let server = serve(&data, Some(&config), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..CARTRIDGES {
            WORKLOAD.write(&changer, &drive, c);
        }
    }
    server.stop();
    let bound = std::fs::read_to_string(data.join("bucket.toml")).unwrap();
    assert!(bound.contains(&key_id), "{bound}");
    let key_hex = std::fs::read_to_string(&key_file).unwrap();
    assert!(
        !bound.contains(key_hex.trim()),
        "the key is never in the data directory"
    );

    // The bucket holds sealed objects only; the node's own cache holds the plaintext, which
    // shows the search finds it where it is.
    let needles = needles();
    let bucket_dir = s3.data_dir().join(s3.bucket()).join("node-a");
    let stored = files_under(&bucket_dir);
    assert!(
        stored.iter().any(|p| p.to_string_lossy().contains("packs"))
            && stored
                .iter()
                .any(|p| p.to_string_lossy().contains("journal")),
        "{stored:?}"
    );
    for path in &stored {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            bytes.starts_with(b"reelSEAL"),
            "{} is not sealed",
            path.display()
        );
    }
    assert_eq!(needles_found(&s3.data_dir(), &needles), 0);
    assert!(needles_found(&data.join("cache"), &needles) > 0);

    // The node is lost. Recovering without the key, or with another, is refused, and neither
    // attempt changes the bucket or binds the new directory.
    std::fs::remove_dir_all(&data).unwrap();
    let before = snapshot(&s3.data_dir());
    let recovered = dir.path().join("recovered");
    let out = recover(&s3, &recovered, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("is encrypted (key {key_id})"))
            && stderr.contains("no store key is configured"),
        "{stderr}"
    );
    assert!(!recovered.join("bucket.toml").exists());
    let out = recover(&s3, &recovered, Some(&wrong_key_file));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "was encrypted with key {key_id}, this node has key {wrong_id}"
        )),
        "{stderr}"
    );
    assert!(!recovered.join("bucket.toml").exists());
    assert_eq!(
        snapshot(&s3.data_dir()),
        before,
        "a refused recovery changed the bucket"
    );

    // With the key: every cartridge back, byte for byte, on a node with no configuration file
    // (the directory remembers its bucket and its key file).
    let stdout = succeeded(&recover(&s3, &recovered, Some(&key_file)), "reel recover");
    // The ten blank cartridges a new node gets, three of them written.
    assert!(stdout.contains("recovered 10 cartridges"), "{stdout}");
    let server = serve(&recovered, None, &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..CARTRIDGES {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();

    // A restart with another key is refused at open: the directory knows its key id.
    let wrong_config = dir.path().join("wrong.toml");
    write_config(&wrong_config, &s3, &wrong_key_file);
    let out = serve_once(&recovered, &wrong_config, &s3);
    assert!(
        out.contains(&format!(
            "encrypted with key {key_id}; the configured key is {wrong_id}"
        )),
        "{out}"
    );

    // A node with a key on a bucket prefix written without encryption is refused too.
    let plain_config = dir.path().join("plain.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("node-a", "node-b");
    let plain_text = text.split("[store.encryption]").next().unwrap().to_string();
    std::fs::write(&plain_config, &plain_text).unwrap();
    serve(&dir.path().join("plain"), Some(&plain_config), &s3).stop();
    let keyed_b = dir.path().join("keyed-b.toml");
    std::fs::write(&keyed_b, &text).unwrap();
    let out = serve_once(&dir.path().join("keyed-b"), &keyed_b, &s3);
    assert!(
        out.contains("holds a store that is not encrypted, but a store key"),
        "{out}"
    );
}

/// `reel serve` expected to refuse to start: its stderr.
fn serve_once(data: &Path, config: &Path, s3: &S3Server) -> String {
    let portal = common::free_portal().to_string();
    let out = reel(
        &[
            "serve".as_ref(),
            "--listen".as_ref(),
            portal.as_ref(),
            "--http".as_ref(),
            "off".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
            "--data".as_ref(),
            data.as_os_str(),
        ],
        s3,
    );
    assert!(!out.status.success(), "reel serve started");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// The key id in the header of every object under `dir` (versitygw's files of a prefix).
fn sealing_keys(dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut ids = std::collections::BTreeMap::new();
    for path in files_under(dir) {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            bytes.starts_with(b"reelSEAL"),
            "{} is not sealed",
            path.display()
        );
        let id: String = bytes[24..32].iter().map(|b| format!("{b:02x}")).collect();
        *ids.entry(id).or_insert(0) += 1;
    }
    ids
}

#[test]
fn a_key_rotation_reseals_the_bucket_and_then_retires_the_old_key() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let old_key = dir.path().join("old.key");
    let old_id = generate_key(&old_key, &s3);
    let new_key = dir.path().join("new.key");
    let new_id = generate_key(&new_key, &s3);
    let data = dir.path().join("node");
    let bucket_dir = s3.data_dir().join(s3.bucket()).join("node-a");

    let old_config = dir.path().join("old.toml");
    write_config(&old_config, &s3, &old_key);
    let server = serve(&data, Some(&old_config), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..CARTRIDGES {
            WORKLOAD.write(&changer, &drive, c);
        }
    }
    server.stop();
    assert_eq!(
        sealing_keys(&bucket_dir).keys().collect::<Vec<_>>(),
        [&old_id]
    );

    // Rotation: the new key seals what is written from now on, the old one still opens the
    // rest, and the data directory records both.
    let rotating = dir.path().join("rotating.toml");
    write_config(&rotating, &s3, &new_key);
    let mut text = std::fs::read_to_string(&rotating).unwrap();
    text.push_str(&format!(
        "previous_key_files = [\"{}\"]\n",
        old_key.display()
    ));
    std::fs::write(&rotating, text).unwrap();
    let server = serve(&data, Some(&rotating), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        WORKLOAD.write(&changer, &drive, CARTRIDGES);
        for c in 0..=CARTRIDGES {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();
    let mixed = sealing_keys(&bucket_dir);
    assert!(
        mixed.contains_key(&old_id) && mixed.contains_key(&new_id),
        "{mixed:?}"
    );
    let bound = std::fs::read_to_string(data.join("bucket.toml")).unwrap();
    assert!(
        bound.contains(&new_id) && bound.contains("previous_key_files"),
        "{bound}"
    );

    let out = reel(
        &[
            "key".as_ref(),
            "reseal".as_ref(),
            "--data".as_ref(),
            data.as_os_str(),
        ],
        &s3,
    );
    let stdout = succeeded(&out, "reel key reseal");
    let resealed: u64 = stdout
        .split("resealed ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(resealed as usize, mixed[&old_id], "{stdout}");
    assert_eq!(
        sealing_keys(&bucket_dir).keys().collect::<Vec<_>>(),
        [&new_id],
        "every object is sealed with the new key"
    );

    // The old key retired: the new one alone serves every cartridge; the old one alone is
    // refused, naming both.
    let new_config = dir.path().join("new.toml");
    write_config(&new_config, &s3, &new_key);
    let server = serve(&data, Some(&new_config), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..=CARTRIDGES {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();
    let out = serve_once(&data, &old_config, &s3);
    assert!(
        out.contains(&format!(
            "encrypted with key {new_id}; the configured key is {old_id}"
        )),
        "{out}"
    );
    // And a node recovered from the bucket with the new key alone reads it all.
    let recovered = dir.path().join("recovered");
    succeeded(&recover(&s3, &recovered, Some(&new_key)), "reel recover");
    let server = serve(&recovered, None, &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..=CARTRIDGES {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();
}
