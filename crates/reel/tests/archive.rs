//! The archive tier end to end (docs/design/archive.md): records written through iSCSI, the
//! cartridge exported to the vault, archived (its data leaves the store), import refused,
//! restored, imported and read back byte for byte; on a directory and on a real S3 server
//! (versitygw) as the archive location; and a server killed while archiving.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::api::admin;
use common::keys::{generate_key, reel, succeeded};
use common::tape::Tape;
use reel_api::Client;
use reel_api::maintenance::ArchiveStatus;
use reel_backend::{Backend, S3Backend, S3Config, S3Credentials};
use reel_s3test::{Kind, S3Server};
use reel_scsi::initiator::smc::move_medium;
use reel_scsi::initiator::ssc::{REWIND, Transfer, UNLOAD, read6, write_filemarks, write6};
use reel_testkit::serve::ServeCommand;

const LIB: &str = "iqn.2026-11.org.reel:library";
const RECORD: usize = 64 << 10;
const DRIVE: u16 = 0x0101;
const BARCODE: &str = "REL001L9";

/// Record `r`: every third one repeats (dedup inside the cartridge), the rest differ.
fn record(r: u64) -> Vec<u8> {
    let key = if r.is_multiple_of(3) { 7 } else { r };
    let mut x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..RECORD)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u8
        })
        .collect()
}

/// Files on the tape: `records` records, a filemark, three more records, a filemark.
fn layout(records: u64) -> Vec<Option<u64>> {
    let mut out: Vec<Option<u64>> = (0..records).map(Some).collect();
    out.push(None);
    out.extend((records..records + 3).map(Some));
    out.push(None);
    out
}

fn serve(data: &Path, config: &Path, s3: Option<&S3Server>) -> common::Server {
    let mut command =
        ServeCommand::new(data).args(&[std::ffi::OsStr::new("--config"), config.as_os_str()]);
    if let Some(s3) = s3 {
        command = command
            .env("AWS_ACCESS_KEY_ID", s3.access_key())
            .env("AWS_SECRET_ACCESS_KEY", s3.secret_key());
    }
    command.start()
}

fn sessions(server: &common::Server) -> (Tape, Tape) {
    let changer = Tape::connect(server.portal(), LIB, 0, 1);
    changer.ready();
    let drive = Tape::connect(server.portal(), LIB, 1, 2);
    (changer, drive)
}

fn write_tape(server: &common::Server, slot: u16, records: u64) {
    let (changer, drive) = sessions(server);
    changer.good(&move_medium(0, slot, DRIVE), Vec::new());
    drive.ready();
    for o in layout(records) {
        match o {
            Some(r) => drive.good(&write6(Transfer::Variable(RECORD as u32)), record(r)),
            None => drive.good(&write_filemarks(1, false), Vec::new()),
        }
    }
    drive.good(&UNLOAD, Vec::new());
    changer.good(&move_medium(0, DRIVE, slot), Vec::new());
}

fn read_tape(server: &common::Server, slot: u16, records: u64) {
    let (changer, drive) = sessions(server);
    changer.good(&move_medium(0, slot, DRIVE), Vec::new());
    drive.ready();
    drive.good(&REWIND, Vec::new());
    for (i, o) in layout(records).into_iter().enumerate() {
        let (status, data, sense) = drive.run(
            &read6(Transfer::Variable(RECORD as u32), false),
            Vec::new(),
            RECORD as u32,
        );
        match o {
            Some(r) => {
                assert_eq!(status, 0, "object {i}: sense {sense:02x?}");
                assert!(data == record(r), "record {r} reads back wrong");
            }
            None => assert_eq!(status, 2, "object {i}: a filemark"),
        }
    }
    // End of data.
    let (status, _, _) = drive.run(
        &read6(Transfer::Variable(RECORD as u32), false),
        Vec::new(),
        RECORD as u32,
    );
    assert_eq!(status, 2, "end of data after the last filemark");
    drive.good(&UNLOAD, Vec::new());
    changer.good(&move_medium(0, DRIVE, slot), Vec::new());
}

fn wait_job(api: &Client) -> ArchiveStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = api.archive_status().unwrap();
        if !s.progress.is_running() {
            return s;
        }
        assert!(Instant::now() < deadline, "the job takes too long: {s:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn code(r: Result<impl std::fmt::Debug, reel_api::Error>) -> (u16, String) {
    let e = r.unwrap_err();
    (e.status().unwrap_or(0), e.to_string())
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// The data and archive directories and the configuration file of a server archiving into a
/// directory under `dir`, with `more` in its `[archive]` section.
fn on_a_directory(dir: &Path, more: &str) -> (PathBuf, PathBuf, PathBuf) {
    let (data, cold) = (dir.join("data"), dir.join("cold"));
    let config = dir.join("reel.toml");
    std::fs::write(
        &config,
        format!("[archive]\ndirectory = \"{}\"\n{more}", cold.display()),
    )
    .unwrap();
    (data, cold, config)
}

fn slot0(api: &Client) -> u16 {
    api.library(LIB)
        .unwrap()
        .element("slot", 0)
        .unwrap()
        .address
}

/// Slot 0 → mail slot → vault.
fn to_vault(api: &Client) -> (u16, u16) {
    let detail = api.library(LIB).unwrap();
    let slot0 = detail.element("slot", 0).unwrap().address;
    let mail0 = detail.element("import_export", 0).unwrap().address;
    api.move_medium(LIB, slot0, mail0).unwrap();
    api.export(LIB, mail0).unwrap();
    (slot0, mail0)
}

/// Exported, archived, refused, restored, imported and read back.
fn round_trip(server: &common::Server, api: &Client, archive_files: impl Fn() -> usize) {
    let records = 24;
    let slot0 = slot0(api);
    write_tape(server, slot0, records);
    let bytes = (records + 3) * RECORD as u64;

    // Only a vaulted cartridge.
    let (status, message) = code(api.archive(BARCODE));
    assert_eq!(status, 409, "{message}");
    assert!(message.contains("vault"), "{message}");
    let (slot0, mail0) = to_vault(api);
    assert_eq!(
        api.cartridge(BARCODE, &Default::default())
            .unwrap()
            .cartridge
            .archive_state,
        "available"
    );

    let started = api.archive(BARCODE).unwrap();
    assert_eq!(
        (started.action.as_str(), started.barcode.as_str()),
        ("archive", BARCODE)
    );
    let done = wait_job(api);
    assert_eq!(done.progress.state, "done", "{done:?}");
    assert_eq!(done.bytes_total, bytes);

    let detail = api.cartridge(BARCODE, &Default::default()).unwrap();
    assert_eq!(detail.cartridge.archive_state, "archived");
    let image = detail.archive.expect("the image is described");
    assert_eq!(image.data_bytes, bytes);
    assert!(image.image_bytes > bytes);
    // The store no longer holds it; the identity and counters stay.
    assert_eq!(detail.usage.map(|u| u.logical_bytes), Some(0));
    assert_eq!(detail.cartridge.written, bytes);
    assert!(
        archive_files() > 10,
        "pieces of 64K in the archive location"
    );
    let listed = api.cartridges(&Default::default()).unwrap();
    let row = listed.iter().find(|c| c.barcode == BARCODE).unwrap();
    assert_eq!(row.archive_state, "archived");
    let metrics = api.metrics().unwrap();
    assert_eq!(metric(&metrics, "reel_archived_cartridges"), 1.0);
    assert_eq!(metric(&metrics, "reel_archived_bytes"), bytes as f64);

    // Not importable, erasable or archivable again until restored.
    let (status, message) = code(api.import(LIB, BARCODE, Some(mail0)));
    assert_eq!(status, 409);
    assert!(message.contains("restore it first"), "{message}");
    assert_eq!(code(api.archive(BARCODE)).0, 409);
    assert_eq!(code(api.erase(BARCODE)).0, 409);
    // Another cartridge is not archived: nothing to restore.
    assert_eq!(code(api.restore("REL002L9")).0, 409);

    let started = api.restore(BARCODE).unwrap();
    assert_eq!(started.action, "restore");
    let done = wait_job(api);
    assert_eq!(done.progress.state, "done", "{done:?}");
    let detail = api.cartridge(BARCODE, &Default::default()).unwrap();
    assert_eq!(detail.cartridge.archive_state, "available");
    assert!(detail.archive.is_none());
    assert_eq!(detail.usage.map(|u| u.logical_bytes), Some(bytes));
    assert_eq!(archive_files(), 0, "the image is deleted once restored");
    assert_eq!(
        metric(&api.metrics().unwrap(), "reel_archived_cartridges"),
        0.0
    );

    api.import(LIB, BARCODE, Some(mail0)).unwrap();
    api.move_medium(LIB, mail0, slot0).unwrap();
    read_tape(server, slot0, records);

    // Archived again, then deleted for good: the cartridge and its image both go.
    to_vault(api);
    api.archive(BARCODE).unwrap();
    assert_eq!(wait_job(api).progress.state, "done");
    assert!(archive_files() > 10);
    api.delete_cartridge(BARCODE).unwrap();
    assert_eq!(code(api.cartridge(BARCODE, &Default::default())).0, 404);
    // The image goes in the background, right after the answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&api.metrics().unwrap(), "reel_archive_images_to_delete") != 0.0 {
        assert!(Instant::now() < deadline, "the image was not deleted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        archive_files(),
        0,
        "the image is deleted with its cartridge"
    );
    assert_eq!(
        metric(&api.metrics().unwrap(), "reel_archived_cartridges"),
        0.0
    );
}

fn files_under(dir: &Path) -> usize {
    walk(dir)
}

fn walk(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                0
            } else if e.path().is_dir() {
                walk(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn archive_refuse_import_restore_and_read_back_on_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (data, cold, config) = on_a_directory(dir.path(), "piece_size = \"64K\"\n");
    let server = serve(&data, &config, None);
    let api = admin(&server, &data);
    round_trip(&server, &api, || files_under(&cold));
}

#[test]
fn archive_and_restore_through_a_real_s3_server() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[archive]\npiece_size = \"64K\"\nstorage_class = \"STANDARD_IA\"\n[archive.s3]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"cold\"\nregion = \"{}\"\n",
            s3.endpoint(),
            s3.bucket(),
            s3.region()
        ),
    )
    .unwrap();
    let server = serve(&data, &config, Some(&s3));
    let api = admin(&server, &data);
    // The image's objects, as the S3 API lists them.
    let mut bucket = S3Config::new(s3.bucket(), "cold");
    bucket.endpoint = Some(s3.endpoint());
    bucket.region = s3.region().to_string();
    bucket.allow_http = true;
    bucket.credentials = S3Credentials::Static {
        access_key_id: s3.access_key().to_string(),
        secret_access_key: s3.secret_key().to_string(),
        session_token: None,
    };
    let bucket = S3Backend::open(&bucket).unwrap();
    round_trip(&server, &api, || bucket.list("").unwrap().len());
}

/// SIGKILL while the archive job runs: after a restart the cartridge is available with its
/// data or archived with a restorable image, never half of each; either way it reads back.
#[test]
fn a_server_killed_while_archiving_leaves_the_old_or_the_new_state() {
    // In the middle of the job, then once it is done (the archived cartridge must then stay
    // archived and in the vault across the restart).
    for finished in [false, true] {
        killed_while_archiving(finished);
    }
}

fn killed_while_archiving(finished: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (data, cold, config) = on_a_directory(dir.path(), "piece_size = \"64K\"\n");
    let records = 200;
    let server = serve(&data, &config, None);
    let api = admin(&server, &data);
    let slot0 = slot0(&api);
    write_tape(&server, slot0, records);
    let (slot0, mail0) = to_vault(&api);
    api.archive(BARCODE).unwrap();
    let progressed = if finished {
        wait_job(&api)
    } else {
        // Somewhere in the job (or just after it).
        std::thread::sleep(Duration::from_millis(150));
        api.archive_status().unwrap()
    };
    server.kill();

    let server = serve(&data, &config, None);
    let api = admin(&server, &data);
    let state = api
        .cartridge(BARCODE, &Default::default())
        .unwrap()
        .cartridge
        .archive_state;
    eprintln!(
        "killed at {} {}: {state}",
        progressed.step, progressed.bytes_done
    );
    if finished {
        assert_eq!(state, "archived");
    }
    match state.as_str() {
        "available" => {}
        "archived" => {
            api.restore(BARCODE).unwrap();
            assert_eq!(wait_job(&api).progress.state, "done");
        }
        other => panic!("after a restart the cartridge is {other}"),
    }
    // Available either way, and no image outlives that: an undone archive's partial image
    // went at the start, a restored one with its restore.
    assert_eq!(files_under(&cold), 0, "an image outlived the archive state");
    // reel places vaulted cartridges of a library's pool in its free slots at start-up; an
    // archived one never (it was archived above, so it was vaulted then).
    let location = api
        .cartridge(BARCODE, &Default::default())
        .unwrap()
        .cartridge
        .location;
    let slot = if location.vault {
        api.import(LIB, BARCODE, Some(mail0)).unwrap();
        api.move_medium(LIB, mail0, slot0).unwrap();
        slot0
    } else {
        assert_eq!(
            state, "available",
            "an archived cartridge stays in the vault"
        );
        location.address.unwrap()
    };
    read_tape(&server, slot, records);
}

/// `reel ctl archive|restore` follow their jobs; `show` and `cartridges` print the state.
#[test]
fn ctl_archives_restores_and_shows_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let (data, cold, config) = on_a_directory(dir.path(), "");
    let server = serve(&data, &config, None);
    let api = admin(&server, &data);
    to_vault(&api);
    let ctl = |args: &[&str]| common::api::ctl(&server, &data, args);
    let (ok, out, err) = ctl(&["archive", BARCODE]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("archive of REL001L9 done"), "{out}");
    let (ok, out, _) = ctl(&["show", BARCODE]);
    assert!(ok && out.contains("archive state    archived"), "{out}");
    let (ok, out, _) = ctl(&["cartridges", "REL001"]);
    assert!(
        ok && out.contains("STATE") && out.contains("archived"),
        "{out}"
    );
    // Refusals come back with a failing exit status and the API's message.
    let (ok, _, err) = ctl(&["import", LIB, BARCODE]);
    assert!(!ok && err.contains("restore it first"), "{err}");
    let (ok, out, err) = ctl(&["restore", BARCODE]);
    assert!(ok, "{out}{err}");
    let (ok, out, _) = ctl(&["show", BARCODE]);
    assert!(ok && out.contains("archive state    available"), "{out}");
    let (ok, _, err) = ctl(&["restore", BARCODE]);
    assert!(!ok && err.contains("available"), "{err}");

    // Archived again, then deleted offline (no server): the offline tools know the state,
    // and the image goes at the next start.
    let (ok, out, err) = ctl(&["archive", BARCODE]);
    assert!(ok, "{out}{err}");
    assert!(files_under(&cold) > 0);
    server.kill();
    let offline = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(args)
            .args(["--data", data.to_str().unwrap()])
            .output()
            .unwrap();
        succeeded(&out, &args.join(" "))
    };
    let listed = offline(&["cartridges", "list"]);
    let row = listed.lines().find(|l| l.starts_with(BARCODE)).unwrap();
    assert!(row.ends_with("archived"), "{listed}");
    let said = offline(&["cartridges", "delete", BARCODE]);
    assert!(said.contains("archive location"), "{said}");
    assert!(files_under(&cold) > 0, "kept until the server starts");
    let server = serve(&data, &config, None);
    let api = admin(&server, &data);
    assert_eq!(code(api.cartridge(BARCODE, &Default::default())).0, 404);
    assert_eq!(files_under(&cold), 0, "deleted at start");
}

/// A store on the S3 server, encrypted with `key_file` (and `previous`), archiving to the
/// prefix `cold` of the same bucket.
fn encrypted_config(path: &Path, s3: &S3Server, key_file: &Path, previous: Option<&Path>) {
    let previous = previous
        .map(|p| format!("previous_key_files = [\"{}\"]\n", p.display()))
        .unwrap_or_default();
    let section = |name: &str, prefix: &str| {
        format!(
            "[{name}]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"{prefix}\"\nregion = \"{}\"\n",
            s3.endpoint(),
            s3.bucket(),
            s3.region()
        )
    };
    let text = format!(
        "[store]\nbackend = \"s3\"\ndurability = \"bucket\"\n{}[store.encryption]\nkey_file = \"{}\"\n{previous}[archive]\npiece_size = \"64K\"\n{}",
        section("store.s3", "node-a"),
        key_file.display(),
        section("archive.s3", "cold"),
    );
    std::fs::write(path, text).unwrap();
}

/// The key ids in the headers of the image objects (files of the S3 server under `cold/`),
/// after checking that none holds a piece of a record in the clear.
fn archive_key_ids(s3: &S3Server, records: u64) -> Vec<String> {
    let root = s3.data_dir().join(s3.bucket()).join("cold");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            if entry.path().is_dir() {
                dirs.push(entry.path());
            } else {
                files.push(std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let needles: Vec<Vec<u8>> = (0..records + 3)
        .map(|r| record(r)[1000..1032].to_vec())
        .collect();
    files
        .iter()
        .map(|f| {
            assert!(f.starts_with(b"reelSEAL"), "an image object is not sealed");
            assert!(
                !needles
                    .iter()
                    .any(|n| f.windows(n.len()).any(|w| w == &n[..])),
                "an image object holds a record in the clear"
            );
            // The header: magic 8, version, cipher, reserved 2, segment 4, length 8, key id 8.
            f[24..32].iter().map(|b| format!("{b:02x}")).collect()
        })
        .collect()
}

/// With `[store.encryption]`, the archive image leaves the node sealed with the store key;
/// after a key rotation `reel key reseal --config` reseals it with the new key, and the new
/// key alone restores it and reads it back.
#[test]
fn an_encrypted_stores_archive_is_sealed_and_resealed_with_a_new_key() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let (old_key, new_key) = (dir.path().join("old.key"), dir.path().join("new.key"));
    let old_id = generate_key(&old_key, &s3);
    let new_id = generate_key(&new_key, &s3);
    let (data, config) = (dir.path().join("data"), dir.path().join("reel.toml"));
    encrypted_config(&config, &s3, &old_key, None);
    let records = 24;

    let server = serve(&data, &config, Some(&s3));
    let api = admin(&server, &data);
    let slot0 = slot0(&api);
    write_tape(&server, slot0, records);
    let (slot0, mail0) = to_vault(&api);
    api.archive(BARCODE).unwrap();
    assert_eq!(wait_job(&api).progress.state, "done");
    let ids = archive_key_ids(&s3, records);
    assert!(ids.len() > 10, "pieces of 64K: {}", ids.len());
    assert!(ids.iter().all(|id| *id == old_id), "{ids:?} vs {old_id}");
    server.stop();

    // Rotation: the new key current, the old one previous; the node serves while resealing.
    encrypted_config(&config, &s3, &new_key, Some(&old_key));
    let server = serve(&data, &config, Some(&s3));
    let out = reel(
        &[
            "key".as_ref(),
            "reseal".as_ref(),
            "--data".as_ref(),
            data.as_os_str(),
            "--config".as_ref(),
            config.as_os_str(),
        ],
        &s3,
    );
    let stdout = succeeded(&out, "reel key reseal");
    assert!(stdout.contains("archive s3://"), "{stdout}");
    let ids = archive_key_ids(&s3, records);
    assert!(ids.iter().all(|id| *id == new_id), "{ids:?} vs {new_id}");
    server.stop();

    // The new key alone: restored, imported and read back.
    encrypted_config(&config, &s3, &new_key, None);
    let server = serve(&data, &config, Some(&s3));
    let api = admin(&server, &data);
    api.restore(BARCODE).unwrap();
    assert_eq!(wait_job(&api).progress.state, "done");
    api.import(LIB, BARCODE, Some(mail0)).unwrap();
    api.move_medium(LIB, mail0, slot0).unwrap();
    read_tape(&server, slot0, records);
}
