//! The store's figures as reel reports them: the reduction both ways ("store": logical bytes
//! over pack bytes; "on disk": over everything under the data directory, as `du` counts it) in
//! the API, `/metrics` and `reel stats`, and an error, never zeros, when they cannot be read.

mod common;

use common::api::Api;
use common::tape::Tape;
use common::{Server, free_portal};
use reel_scsi::initiator::ssc::{Transfer, write_filemarks, write6};
use serde_json::json;

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
    let api = Api::admin(&server, &data);

    // 8 MiB of one repeated 64 KiB record on REL001L9, then a synchronising filemark.
    let detail = api.ok("GET", &format!("/api/v1/libraries/{LIB}"), None);
    let address = |kind: &str| {
        detail["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == kind && e["index"] == 0)
            .unwrap()["address"]
            .as_u64()
            .unwrap()
    };
    api.ok(
        "POST",
        &format!("/api/v1/libraries/{LIB}/move"),
        Some(json!({"from": address("slot"), "to": address("drive")})),
    );
    let tape = Tape::connect(portal, LIB, 1, 1);
    tape.ready();
    let record: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 253) as u8).collect();
    for _ in 0..128 {
        tape.good(&write6(Transfer::Variable(65536)), record.clone());
    }
    tape.good(&write_filemarks(1, false), Vec::new());

    let st = api.ok("GET", "/api/v1/stats", None);
    let logical = st["logical_bytes"].as_u64().unwrap();
    let stored = st["stored_bytes"].as_u64().unwrap();
    let on_disk = st["on_disk_bytes"].as_u64().unwrap();
    assert_eq!(logical, 128 * 65536, "{st}");
    assert!(on_disk > stored, "the catalog takes room too: {st}");
    // The same figure as du, give or take what the server wrote in between.
    let by_du = du(&data);
    assert!(
        on_disk.abs_diff(by_du) * 10 < by_du,
        "on_disk_bytes {on_disk} vs du {by_du}"
    );
    let store_ratio = st["reduction_ratio"].as_f64().unwrap();
    let disk_ratio = st["reduction_ratio_on_disk"].as_f64().unwrap();
    assert!(
        (store_ratio - logical as f64 / stored as f64).abs() < 1e-9,
        "{st}"
    );
    assert!(
        (disk_ratio - logical as f64 / on_disk as f64).abs() < 1e-9,
        "{st}"
    );
    assert!(disk_ratio < store_ratio, "{st}");

    let (status, metrics) = api.text("/metrics");
    assert_eq!(status, 200);
    for family in [
        "reel_store_reduction_ratio ",
        "reel_store_reduction_on_disk_ratio ",
        "reel_store_on_disk_bytes ",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(family)),
            "{family} in /metrics"
        );
    }
    let cartridge = api.ok("GET", "/api/v1/cartridges/REL001L9", None);
    let usage = &cartridge["usage"];
    assert!(
        usage["reduction_ratio_on_disk"].as_f64().unwrap()
            < usage["reduction_ratio"].as_f64().unwrap(),
        "{usage}"
    );

    // When the data directory cannot be read, the figures are an error, not zeros.
    let moved = dir.path().join("moved");
    std::fs::rename(&data, &moved).unwrap();
    let (status, v) = api.call("GET", "/api/v1/stats", None);
    assert_eq!(status, 500, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be read"),
        "{v}"
    );
    let (status, _) = api.text("/metrics");
    assert_eq!(status, 500);
    std::fs::rename(&moved, &data).unwrap();
    assert_eq!(api.call("GET", "/api/v1/stats", None).0, 200);
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
}
