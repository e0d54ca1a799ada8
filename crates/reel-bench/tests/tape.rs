//! The benchmark end to end against a real `reel serve` (and tgt when it is installed), on a
//! tiny workload: every byte read back is verified by the benchmark itself, so a run that
//! returns is a run whose data came back intact; the tests check the counts and the report.
//! And bad arguments stop the run before anything is written.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use reel_bench::harness::procs::{self, ReelServe};
use reel_bench::tape::TapeArgs;
use serde_json::Value;

mod common;
use common::{reel, tgt_installed};

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: TapeArgs,
}

fn args(list: &[&str]) -> TapeArgs {
    let mut argv = vec!["reel-bench"];
    argv.extend_from_slice(list);
    Cli::try_parse_from(argv).unwrap().args
}

fn run_to_json(dir: &Path, extra: &[&str]) -> Value {
    let json = dir.join("out.json");
    let md = dir.join("out.md");
    let work = dir.join("work");
    let bin = reel();
    let mut list = vec![
        "--reel-bin",
        bin.to_str().unwrap(),
        "--work-dir",
        work.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ];
    list.extend_from_slice(extra);
    reel_bench::tape::run(args(&list)).expect("benchmark run");
    assert!(!work.exists(), "the work directory is removed afterwards");
    assert!(
        std::fs::read_to_string(&md)
            .unwrap()
            .contains("| drives | record |")
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn tiny_workload_on_reel_writes_and_verifies_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let charts = dir.path().join("charts");
    let report = run_to_json(
        dir.path(),
        &[
            "--targets",
            "reel",
            "--drives",
            "1,2",
            "--record-size",
            "64K",
            "--size",
            "8M",
            "--queue-depth",
            "4",
            "--filemark-every",
            "3M",
            "--block-size",
            "64K",
            "--window-blocks",
            "32",
            "--charts",
            charts.to_str().unwrap(),
        ],
    );
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for (cell, drives) in cells.iter().zip([1u64, 2]) {
        assert_eq!(u(&cell["drives"]), drives);
        let run = &cell["runs"][0];
        assert_eq!(run["target"], "reel");
        assert_eq!(run["media"], "changer");
        assert_eq!(run["drives"].as_array().unwrap().len() as u64, drives);
        for phase in ["write", "read"] {
            let p = &run[phase];
            assert_eq!(u(&p["bytes"]), drives * (8 << 20), "{phase}");
            assert_eq!(u(&p["records"]), drives * 128, "{phase}");
            assert!(p["mb_per_s"].as_f64().unwrap() > 0.0);
            assert!(p["server_cpu_s_per_gb"].as_f64().is_some());
        }
        // Filemarks after 3 MiB and 6 MiB of records, plus the final one on write; the two
        // intermediate ones are read back as filemarks.
        assert_eq!(u(&run["write"]["filemarks"]), drives * 3);
        assert_eq!(u(&run["read"]["filemarks"]), drives * 2);
        let storage = &run["storage"];
        assert!(storage["dedup"].as_f64().unwrap() > 1.0, "{storage}");
        assert!(u(&storage["disk_bytes"]) > 0);
        assert!(run["negotiated"]["immediate_data"].as_bool().unwrap());
        // reel's own counters (REST API) against its pack files read independently: the
        // logical side is what this run wrote, the rest is the packs' trailers.
        let (api, packs) = (&storage["api"], &storage["packs"]);
        assert_eq!(u(&api["logical_bytes"]), drives * (8 << 20), "{storage}");
        assert_eq!(u(&packs["logical_bytes"]), drives * (8 << 20));
        assert_eq!(
            u(&api["stored_bytes"]),
            u(&packs["pack_bytes"]),
            "{storage}"
        );
        assert_eq!(u(&api["unique_bytes"]), u(&packs["raw_bytes"]), "{storage}");
        assert!(u(&packs["pack_files"]) >= 1);
        for ratio in ["dedup_ratio", "compression_ratio", "reduction_ratio"] {
            let (a, d) = (api[ratio].as_f64().unwrap(), packs[ratio].as_f64().unwrap());
            assert!(
                (a / d - 1.0).abs() < 1e-6,
                "{ratio}: API {a}, pack files {d}"
            );
        }
        // Server CPU from reel's /metrics as well as from /proc.
        assert!(run["write"]["server_api_cpu_s_per_gb"].as_f64().unwrap() > 0.0);
    }
    let goal = report["goals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["goal"].as_str().unwrap().starts_with("reel's API ratios"))
        .unwrap();
    assert_eq!(goal["met"], true, "{goal}");
    // Only the drive count varies: one chart pair against it (and none against record size).
    assert!(charts.join("throughput-write-vs-drives.svg").is_file());
    assert!(charts.join("throughput-read-vs-drives.svg").is_file());
    assert!(!charts.join("throughput-write-vs-record-size.svg").exists());
}

#[test]
fn obltape_style_sweep_on_files_and_reel() {
    let dir = tempfile::tempdir().unwrap();
    let charts = dir.path().join("charts");
    let report = run_to_json(
        dir.path(),
        &[
            "--targets",
            "reel,file",
            "--drives",
            "1",
            "--record-size",
            "32K,100000",
            "--compressible-share",
            "0,1",
            "--redundancy",
            "1",
            "--size",
            "2M",
            "--block-size",
            "64K",
            "--window-blocks",
            "32",
            "--charts",
            charts.to_str().unwrap(),
        ],
    );
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for cell in cells {
        let w = &cell["workload"];
        let share = 1.0 - w["incompressible_share"].as_f64().unwrap();
        for run in cell["runs"].as_array().unwrap() {
            assert_eq!(u(&run["read"]["bytes"]), 2 << 20, "{run}");
            if run["target"] == "file" {
                assert_eq!(run["media"], "file");
                // The file holds exactly the records.
                assert!(u(&run["storage"]["disk_bytes"]) >= 2 << 20);
            } else {
                // All-random blocks do not compress; compressible ones do.
                let compression = run["storage"]["compression"].as_f64().unwrap();
                if share == 0.0 {
                    assert!(compression < 1.05, "{compression}");
                } else {
                    assert!(compression > 2.0, "{compression}");
                }
            }
        }
    }
    for chart in [
        "throughput-write-vs-compressible-share.svg",
        "throughput-read-vs-record-size.svg",
    ] {
        let svg = std::fs::read_to_string(charts.join(chart)).unwrap();
        assert!(
            svg.contains("file, record 32K") || svg.contains("file, compressible"),
            "{chart}"
        );
        assert!(svg.contains("reel, "), "{chart}");
    }
}

#[test]
fn tiny_workload_on_tgt_through_its_changer() {
    // A skipped comparison would pass silently: CI installs tgt (scripts/test-all.sh).
    assert!(
        tgt_installed(),
        "tgtd, tgtadm and tgtimg are needed (Debian package tgt; scripts/test-all.sh installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let report = run_to_json(
        dir.path(),
        &[
            "--targets",
            "tgt,reel",
            "--drives",
            "2",
            "--record-size",
            "100000",
            "--size",
            "4M",
            "--flat",
            "2M",
            "--flat-record-size",
            "256K",
        ],
    );
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "one matrix cell and the flat run");
    for run in cells[0]["runs"].as_array().unwrap() {
        assert_eq!(run["media"], "changer");
        // 4 MiB in 100000-byte records: 41 full ones and a short last one, per drive.
        assert_eq!(u(&run["read"]["bytes"]), 2 * (4 << 20));
        assert_eq!(u(&run["read"]["records"]), 2 * 42);
    }
    let tgt = cells[0]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"] == "tgt")
        .unwrap();
    // tgt keeps every byte (plus its block headers).
    assert!(u(&tgt["storage"]["disk_bytes"]) >= 2 * (4 << 20));
    assert!(cells[0]["write_ratio"].as_f64().is_some());
    assert_eq!(cells[1]["flat"], true);
    assert_eq!(u(&cells[1]["runs"][0]["write"]["bytes"]), 2 << 20);
}

#[test]
fn bad_arguments_stop_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    for (list, wanted) in [
        (vec!["--record-size", "0"], "at least 1 byte"),
        (vec!["--drives", "0"], "--drives 0"),
        (vec!["--size", "0"], "--size"),
        (vec!["--targets", "lio"], "unknown target"),
    ] {
        let mut list = list;
        list.extend(["--work-dir", work.to_str().unwrap()]);
        let e = format!("{:#}", reel_bench::tape::run(args(&list)).unwrap_err());
        assert!(e.contains(wanted), "{list:?}: {e}");
        assert!(!work.exists(), "{list:?} created the work directory");
    }
}

/// A `reel serve` started by the test (the benchmark then uses it with --reel-addr): one
/// library of `drives` drives and two cartridges TT0001L9, TT0002L9.
fn external_reel(
    dir: &Path,
    drives: u32,
    capacity: Option<&str>,
) -> (ReelServe, SocketAddr, PathBuf, PathBuf) {
    let bin = reel();
    let data = dir.join("data");
    let mut create = Command::new(&bin);
    create
        .args([
            "cartridges",
            "create",
            "--prefix",
            "TT",
            "--count",
            "2",
            "--data",
        ])
        .arg(&data);
    if let Some(c) = capacity {
        create.args(["--capacity", c]);
    }
    let out = create.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let addr = procs::free_loopback().unwrap();
    let config = dir.join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[iscsi]\nlisten = [\"{addr}\"]\n\n[http]\nenabled = false\n\n[[iscsi.target]]\nname = \"iqn.2026-11.org.reel.test:one-drive\"\nkind = \"library\"\ndrives = {drives}\nslots = 4\n"
        ),
    )
    .unwrap();
    let serve = ReelServe::start(&bin, &config, &data, &dir.join("reel.log"), addr, &[]).unwrap();
    (serve, addr, data, config)
}

#[test]
fn too_many_drives_or_an_unknown_iqn_fail_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let bin = reel();
    let (serve, addr, data, config) = external_reel(dir.path(), 1, None);
    let addr = addr.to_string();
    let work = dir.path().join("work");
    let common = [
        "--targets",
        "reel",
        "--reel-addr",
        addr.as_str(),
        "--size",
        "1M",
        "--work-dir",
        work.to_str().unwrap(),
    ];
    let mut list = common.to_vec();
    list.extend(["--drives", "2", "--record-size", "64K"]);
    let e = format!("{:#}", reel_bench::tape::run(args(&list)).unwrap_err());
    assert!(
        e.contains("has 1 tape drive(s)") && e.contains("--drives asks for 2"),
        "{e}"
    );

    let mut list = common.to_vec();
    list.extend([
        "--drives",
        "1",
        "--record-size",
        "64K",
        "--reel-iqn",
        "iqn.2026-11.org.reel.test:nonesuch",
    ]);
    let e = format!("{:#}", reel_bench::tape::run(args(&list)).unwrap_err());
    assert!(
        e.contains("nonesuch")
            && e.contains("the portal lists: iqn.2026-11.org.reel.test:one-drive"),
        "{e}"
    );

    // A record size the drive cannot take (LTO: at most 8 MiB) is refused after the load and
    // before the first WRITE.
    let mut list = common.to_vec();
    list.extend(["--drives", "1", "--record-size", "9M"]);
    let e = format!("{:#}", reel_bench::tape::run(args(&list)).unwrap_err());
    assert!(e.contains("outside the drive's block limits"), "{e}");

    serve.stop(Duration::from_secs(60)).unwrap();
    // Nothing was written to either cartridge.
    let list = Command::new(&bin)
        .args(["cartridges", "list", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("TT")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    for row in rows {
        let written = row.split_whitespace().nth(4).unwrap();
        assert_eq!(written, "0", "{row}");
    }

    // The failed run put the cartridge it had loaded back: a good run finds the drive empty.
    let serve = ReelServe::start(
        &bin,
        &config,
        &data,
        &dir.path().join("reel2.log"),
        addr.parse().unwrap(),
        &[],
    )
    .unwrap();
    let mut list = common.to_vec();
    list.extend(["--drives", "1", "--record-size", "64K"]);
    reel_bench::tape::run(args(&list)).expect("a run after the failures");
    serve.stop(Duration::from_secs(60)).unwrap();
}

#[test]
fn a_target_failing_mid_run_is_reported_with_its_sense_data() {
    // 2 MB cartridges, 6 MiB to write: the drive reports early warning / end of medium.
    let dir = tempfile::tempdir().unwrap();
    let (serve, addr, _, _) = external_reel(dir.path(), 1, Some("2M"));
    let addr = addr.to_string();
    let work = dir.path().join("work");
    let e = reel_bench::tape::run(args(&[
        "--targets",
        "reel",
        "--reel-addr",
        addr.as_str(),
        "--size",
        "6M",
        "--record-size",
        "256K",
        "--work-dir",
        work.to_str().unwrap(),
    ]))
    .unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("reel drive 1 LUN 1: WRITE(6) (record ")
            && text.contains("failed with CHECK CONDITION (0x02)")
            && text.contains("[EOM]")
            && text.contains("sense bytes: ")
            && text.contains("CDB 0a 00 04 00 00 00"),
        "{text}"
    );
    // The target is still up and the run cleaned up after itself.
    serve.stop(Duration::from_secs(60)).unwrap();
}
