//! The committed Grafana dashboard and Prometheus alerting rules (`packaging/monitoring/`) ask
//! only for metrics that reel exports: checked against the `/metrics` exposition of a real
//! `reel serve` on an S3 bucket (versitygw), so the bucket families are there too. The rules'
//! syntax and behaviour are checked by Prometheus's own `promtool` in `scripts/test-all.sh`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use reel_s3test::{Kind, S3Server};
use reel_testkit::serve::ServeCommand;

fn monitoring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/monitoring")
}

/// Every `reel_…` name in a query.
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find("reel_") {
        let preceded_by_word = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !preceded_by_word {
            names.push(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// The queries of every panel (`targets[].expr`), with the panel's title.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push((
                panel["title"].as_str().unwrap_or("").to_string(),
                target["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    queries
}

/// The `expr:` of every rule.
fn rule_queries(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .map(|e| e.trim().to_string())
        .collect()
}

#[test]
fn metric_names_finds_whole_names_only() {
    assert_eq!(
        metric_names("sum(rate(reel_a_total{x=\"y\"}[1m])) / reel_b + my_reel_c"),
        ["reel_a_total", "reel_b"]
    );
}

#[test]
fn the_dashboard_and_the_alerts_name_only_metrics_reel_exports() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\nbackend = \"s3\"\n\n[store.s3]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"monitoring\"\nregion = \"{}\"\n",
            s3.endpoint(),
            s3.bucket(),
            s3.region()
        ),
    )
    .unwrap();
    let server = ServeCommand::new(&dir.path().join("data"))
        .args(&[std::ffi::OsStr::new("--config"), config.as_os_str()])
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .start();
    let exposition = ureq::get(&format!(
        "{}/metrics",
        server.http.as_deref().expect("the console runs")
    ))
    .call()
    .unwrap()
    .body_mut()
    .read_to_string()
    .unwrap();
    // Families (a histogram's series add _bucket, _sum and _count).
    let mut exported = BTreeSet::new();
    for line in exposition.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            exported.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    exported.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    assert!(exported.len() > 30, "families: {exported:?}");

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(monitoring_dir().join("reel-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    // Every reel metric a query names, each checked against the exposition.
    let names_in = |query: &str, whose: &str| -> Vec<String> {
        let names = metric_names(query);
        for name in &names {
            assert!(
                exported.contains(name),
                "{whose} asks for {name}, which reel does not export"
            );
        }
        names
    };
    let mut used = BTreeSet::new();
    for (title, query) in dashboard_queries(&dashboard) {
        let names = names_in(&query, &format!("panel {title:?}"));
        assert!(
            !names.is_empty(),
            "panel {title:?} queries no reel metric: {query}"
        );
        used.extend(names);
    }
    // What the issue asks the dashboard to show.
    for needed in [
        "reel_drive_bytes_total",
        "reel_initiator_bytes_total",
        "reel_store_dedup_ratio",
        "reel_store_compression_ratio",
        "reel_store_reduction_on_disk_ratio",
        "reel_disk_free_bytes",
        "reel_verify_progress_ratio",
        "reel_verify_damaged_chunks",
        "reel_reclaim_progress_ratio",
        "reel_scsi_errors_total",
        "reel_bucket_pending_bytes",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not show {needed}"
        );
    }

    let rules = std::fs::read_to_string(monitoring_dir().join("reel-alerts.yml")).unwrap();
    let mut alerted = BTreeSet::new();
    for query in rule_queries(&rules) {
        alerted.extend(names_in(&query, &format!("alert rule {query:?}")));
    }
    for needed in [
        "reel_disk_free_bytes",
        "reel_verify_damaged_chunks",
        "reel_drive_command_seconds",
        "reel_bucket_oldest_pending_seconds",
        "reel_bucket_catalog_journal_objects",
    ] {
        assert!(alerted.contains(needed), "no alert watches {needed}");
    }
}
