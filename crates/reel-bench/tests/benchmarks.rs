//! `reel bench iscsi|store|library` end to end on tiny workloads, parsed as the `reel` binary
//! parses them: each run writes its JSON, Markdown and charts, and `--from-json` of that JSON
//! writes the same Markdown again (the committed results stay reproducible from their JSON).
//! The iSCSI and library runs start a real `reel serve`.

use std::fs;
use std::path::Path;

use clap::Parser;
use reel_bench::BenchCommand;
use serde_json::Value;

mod common;
use common::reel;

#[derive(clap::Parser)]
struct Cli {
    #[command(subcommand)]
    command: BenchCommand,
}

fn run(args: &[&str]) {
    let mut argv = vec!["reel-bench"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"));
    reel_bench::run(cli.command).unwrap_or_else(|e| panic!("{args:?}: {e:#}"));
}

/// Runs `benchmark` with `args` writing into `dir`, then again from its JSON; returns the
/// JSON after checking that both Markdown files are the same and that `charts` were drawn, with
/// data points, the same both times.
fn run_and_replay(dir: &Path, benchmark: &str, args: &[&str], charts: &[&str]) -> Value {
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (json, md, again) = (path("out.json"), path("out.md"), path("again.md"));
    let chart_dir = path("charts");
    let mut list = vec![benchmark];
    list.extend_from_slice(args);
    list.extend_from_slice(&["--json", &json, "--markdown", &md, "--charts", &chart_dir]);
    run(&list);
    let svg = |chart: &str| fs::read_to_string(dir.join("charts").join(chart)).unwrap();
    let drawn: Vec<String> = charts.iter().map(|c| svg(c)).collect();
    for (chart, svg) in charts.iter().zip(&drawn) {
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{chart}");
        // A chart with axes but no data has no points (line charts) and no bars (bar charts).
        assert!(
            svg.contains("<circle") || svg.contains("<rect x="),
            "{chart} shows no data"
        );
    }
    run(&[
        benchmark,
        "--from-json",
        &json,
        "--markdown",
        &again,
        "--charts",
        &chart_dir,
    ]);
    let (first, second) = (
        fs::read_to_string(&md).unwrap(),
        fs::read_to_string(&again).unwrap(),
    );
    assert_eq!(first, second, "--from-json writes the same report");
    for (chart, svg_before) in charts.iter().zip(&drawn) {
        assert_eq!(
            &svg(chart),
            svg_before,
            "--from-json draws the same {chart}"
        );
    }
    for chart in charts {
        assert!(first.contains(&format!("(charts/{chart})")), "{first}");
    }
    serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap()
}

#[test]
fn iscsi_on_reel() {
    let dir = tempfile::tempdir().unwrap();
    let bin = reel();
    let report = run_and_replay(
        dir.path(),
        "iscsi",
        &[
            "--targets",
            "reel",
            "--reel-bin",
            bin.to_str().unwrap(),
            "--sizes",
            "64K",
            "--qd",
            "2",
            "--sessions",
            "1",
            "--seconds",
            "0.3",
            "--warmup",
            "0",
        ],
        &["throughput-write.svg", "throughput-read.svg"],
    );
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "a write and a read cell");
    for c in cells {
        let mb = c["results"][0]["median"]["mb_per_s"].as_f64().unwrap();
        assert!(mb > 0.0, "{c}");
    }
}

#[test]
fn store_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let stores = dir.path().join("stores");
    fs::create_dir(&stores).unwrap();
    let report = run_and_replay(
        dir.path(),
        "store",
        &[
            "--total",
            "8M",
            "--record-size",
            "64K,256K",
            "--streams",
            "1",
            "--stage-size",
            "1M",
            "--window-blocks",
            "16",
            "--dir",
            stores.to_str().unwrap(),
        ],
        &["throughput-dedup.svg"],
    );
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["bytes"] == 8 << 20));
    assert_eq!(fs::read_dir(&stores).unwrap().count(), 0, "stores removed");
}

#[test]
fn library_without_streaming() {
    let dir = tempfile::tempdir().unwrap();
    let bin = reel();
    let report = run_and_replay(
        dir.path(),
        "library",
        &[
            "--slots",
            "40",
            "--no-stream",
            "--reel-bin",
            bin.to_str().unwrap(),
        ],
        &["latency.svg"],
    );
    let requests = report["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 4);
    // READ ELEMENT STATUS of 40 full slots with volume tags: header, page header, 40 x 48.
    assert_eq!(requests[0]["count"], 8 + 8 + 40 * 48);
    assert!(report["streaming"].is_null());
}
