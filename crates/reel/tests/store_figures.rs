//! The store's figures as reel reports them: the reduction both ways ("store": logical bytes
//! over pack bytes; "on disk": over everything under the data directory, as `du` counts it) in
//! the API, `/metrics` and `reel stats`, and an error, never zeros, when they cannot be read.

mod common;

use common::tape::Tape;
use common::{Server, free_portal};
use reel_api::cartridges::ShowQuery;
use reel_scsi::initiator::ssc::{Transfer, write_filemarks, write6};

const LIB: &str = "iqn.2026-11.org.reel:library";

fn du(dir: &std::path::Path) -> u64 {
    let out = std::process::Command::new("du")
        .args(["--block-size=1", "-s"])
        .arg(dir)
        .output()
        .expect("coreutils du");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn reduction_is_reported_for_the_packs_and_for_the_whole_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let portal = free_portal();
    let server = Server::start(&data, portal, &[]);
    let api = common::api::admin(&server, &data);

    // 8 MiB of one repeated 64 KiB record on REL001L9, then a synchronising filemark.
    let detail = api.library(LIB).unwrap();
    let address = |kind: &str| detail.element(kind, 0).unwrap().address;
    api.move_medium(LIB, address("slot"), address("drive"))
        .unwrap();
    let tape = Tape::connect(portal, LIB, 1, 1);
    tape.ready();
    let record: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 253) as u8).collect();
    for _ in 0..128 {
        tape.good(&write6(Transfer::Variable(65536)), record.clone());
    }
    tape.good(&write_filemarks(1, false), Vec::new());

    let st = api.stats().unwrap();
    let (logical, stored, on_disk) = (st.logical_bytes, st.stored_bytes, st.on_disk_bytes);
    assert_eq!(logical, 128 * 65536, "{st:?}");
    assert!(on_disk > stored, "the catalog takes room too: {st:?}");
    let catalog = du(&data.join("catalog"));
    assert!(st.catalog_bytes > 0 && st.catalog_bytes < on_disk, "{st:?}");
    assert!(
        st.catalog_bytes.abs_diff(catalog) * 10 < catalog,
        "catalog_bytes {} vs du {catalog}",
        st.catalog_bytes
    );
    // The same figure as du, give or take what the server wrote in between.
    let by_du = du(&data);
    assert!(
        on_disk.abs_diff(by_du) * 10 < by_du,
        "on_disk_bytes {on_disk} vs du {by_du}"
    );
    let (store_ratio, disk_ratio) = (st.reduction_ratio, st.reduction_ratio_on_disk);
    assert!(
        (store_ratio - logical as f64 / stored as f64).abs() < 1e-9,
        "{st:?}"
    );
    assert!(
        (disk_ratio - logical as f64 / on_disk as f64).abs() < 1e-9,
        "{st:?}"
    );
    assert!(disk_ratio < store_ratio, "{st:?}");

    let metrics = api.metrics().unwrap();
    for family in [
        "reel_store_reduction_ratio ",
        "reel_store_reduction_on_disk_ratio ",
        "reel_store_on_disk_bytes ",
        "reel_store_catalog_bytes ",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(family)),
            "{family} in /metrics"
        );
    }
    let cartridge = api.cartridge("REL001L9", &ShowQuery::default()).unwrap();
    let usage = cartridge.usage.unwrap();
    assert!(
        usage.reduction_ratio_on_disk.unwrap() < usage.reduction_ratio,
        "{usage:?}"
    );

    // When the data directory cannot be read, the figures are an error, not zeros.
    let moved = dir.path().join("moved");
    std::fs::rename(&data, &moved).unwrap();
    match api.stats() {
        Err(reel_api::Error::Api {
            status, message, ..
        }) => {
            assert_eq!(status, 500, "{message}");
            assert!(message.contains("could not be read"), "{message}");
        }
        other => panic!("stats of an unreadable directory: {other:?}"),
    }
    assert_eq!(api.metrics().unwrap_err().status(), Some(500));
    std::fs::rename(&moved, &data).unwrap();
    api.stats().unwrap();
    drop(tape);
    server.stop();

    // `reel stats` on the stopped server's directory: both lines.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["stats", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("(store: packs only)"), "{text}");
    assert!(text.contains("(on disk: the data directory"), "{text}");
    // And the catalog's share of it, table by table (the chunk index holds a row per chunk).
    let catalog = text
        .lines()
        .find(|l| l.starts_with("catalog "))
        .unwrap_or_else(|| panic!("no catalog line: {text}"));
    assert!(
        catalog.contains("on disk") && catalog.contains("in tables"),
        "{text}"
    );
    assert!(text.contains("smaller tables"), "{text}");
}
