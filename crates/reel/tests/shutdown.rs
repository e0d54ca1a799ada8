//! How `reel serve` stops: a drive whose buffered data cannot be made durable on shutdown makes
//! it say so and exit non-zero, and the store opens again afterwards at its last durable state.
//! And how it fails to start: the test kit shows what the server said.

mod common;

use std::process::Stdio;

use common::tape::Tape;
use common::{ANY_PORTAL, Server, free_portal};
use reel_scsi::initiator::smc::move_medium;
use reel_scsi::initiator::ssc::{Transfer, write6};
use reel_testkit::serve::ServeCommand;

const LIB: &str = "iqn.2026-11.org.reel:library";

#[test]
fn a_failed_flush_on_shutdown_is_reported_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let portal = free_portal();
    let stderr_path = dir.path().join("stderr");
    let stderr = std::fs::File::create(&stderr_path).unwrap();
    let server = Server::start_with_stderr(&data, portal, &[], Stdio::from(stderr));

    // MOVE MEDIUM (SMC-3 §6.5) through the changer at LUN 0: the first slot's cartridge into
    // the first drive (IBM 3584 addresses: transport 0, drives from 0101h, slots from 0401h).
    let changer = Tape::connect(portal, LIB, 0, 1);
    changer.ready();
    changer.good(&move_medium(0, 0x0401, 0x0101), Vec::new());
    let drive = Tape::connect(portal, LIB, 1, 2);
    drive.ready();
    // Records without a synchronising point: accepted into the drive's buffer.
    let record = vec![0x5a_u8; 64 * 1024];
    for _ in 0..16 {
        drive.good(&write6(Transfer::Variable(64 * 1024)), record.clone());
    }
    drop(drive);
    drop(changer);

    // The object store cannot take the buffered data any more.
    std::fs::rename(data.join("objects/.tmp"), dir.path().join("gone")).unwrap();
    let status = server.stop_status();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        !status.success(),
        "reel serve exited with {status:?} after failing to flush; stderr: {stderr}"
    );
    assert!(
        stderr.contains("could not synchronise"),
        "stderr names the failure: {stderr}"
    );
    assert!(!stderr.contains("everything is synced"), "{stderr}");

    // The store is consistent: reel starts again on it and stops cleanly.
    let stderr = std::fs::File::create(dir.path().join("stderr2")).unwrap();
    let server = Server::start_with_stderr(&data, ANY_PORTAL, &[], Stdio::from(stderr));
    server.stop();
}

/// `reel serve` on the data directory `dir/data`, configured by `text` (written to
/// `dir/reel.toml`): each call rewrites the file and starts the server again.
fn serve_with_config(dir: &std::path::Path, text: &str) -> Server {
    let config = dir.join("reel.toml");
    std::fs::write(&config, text).unwrap();
    ServeCommand::new(&dir.join("data"))
        .args(&[std::ffi::OsStr::new("--config"), config.as_os_str()])
        .start()
}

/// A server that cannot start: the test kit's panic quotes the server's own error (a start-up
/// failure with nothing to go on is what CI once reported). One that starts: a portal left to
/// reel is the one its banner names, and the banner says the configured catalog cache and
/// when the catalog file is compacted.
#[test]
fn a_server_that_cannot_start_says_why_and_the_banner_names_its_portal_and_catalog_cache() {
    let dir = tempfile::tempdir().unwrap();
    let start = |text: &str| serve_with_config(dir.path(), text);
    let failed = std::panic::catch_unwind(|| start("[store]\nno_such_setting = 1\n"))
        .map(|_| ())
        .expect_err("reel serve refuses an unknown setting");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("exited before serving") && message.contains("no_such_setting"),
        "{message}"
    );

    let server = start("[store]\ncatalog_cache = \"64M\"\n");
    assert_ne!(server.portal().port(), 0);
    for line in [
        format!("iSCSI portal: {}", server.portal()),
        "catalog cache: up to 64 MiB".to_string(),
        "catalog compaction: after 30 s without a write".to_string(),
    ] {
        assert!(server.banner.contains(&line), "{line}: {}", server.banner);
    }
    Tape::connect(server.portal(), LIB, 0, 1).ready();
    server.stop();
    for (setting, line) in [
        ("5", "catalog compaction: after 5 s without a write"),
        ("0", "catalog compaction: at a clean stop only"),
    ] {
        let server = start(&format!("[store]\ncatalog_compact_idle_secs = {setting}\n"));
        assert!(server.banner.contains(line), "{line}: {}", server.banner);
        server.stop();
    }
}

/// `[store] chunk_size` chooses a new store's chunk size; the store keeps it for its life, and
/// reel says so at start when a later configuration asks for another.
#[test]
fn a_new_store_takes_the_chunk_size_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let start = |text: &str| serve_with_config(dir.path(), text);
    let warning = "warning: [store] chunk_size";
    let server = start("[store]\nchunk_size = \"8K\"\n");
    assert!(
        server.banner.contains("chunks: 8 KiB on average") && !server.banner.contains(warning),
        "{}",
        server.banner
    );
    server.stop();
    let server = start("[store]\nchunk_size = \"4K\"\n");
    assert!(
        server.banner.contains("chunks: 8 KiB on average")
            && server.banner.contains(
                "warning: [store] chunk_size = 4 KiB applies to new stores only; this one keeps 8 KiB"
            ),
        "{}",
        server.banner
    );
    server.stop();
    let server = start("");
    assert!(
        server.banner.contains("chunks: 8 KiB on average") && !server.banner.contains(warning),
        "{}",
        server.banner
    );
    Tape::connect(server.portal(), LIB, 0, 1).ready();
}
