//! reel's own counters, read through its REST API (`/api/v1/stats`) and its Prometheus
//! `/metrics`, and the same ratios computed independently from the pack files on disk, so a
//! report can show both and whether they agree.

use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// reel's REST API: the one client of `reel-api`.
pub type ReelApi = reel_api::Client;

/// The store's figures a report keeps from `/api/v1/stats` (a part of
/// [`reel_api::monitor::StoreView`]: the report's format stays as it was).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ApiStore {
    pub logical_bytes: u64,
    pub unique_bytes: u64,
    pub stored_bytes: u64,
    pub chunks: u64,
    pub packs: u64,
    pub dedup_ratio: f64,
    pub compression_ratio: f64,
    pub reduction_ratio: f64,
}

impl From<reel_api::monitor::StoreView> for ApiStore {
    fn from(v: reel_api::monitor::StoreView) -> Self {
        ApiStore {
            logical_bytes: v.logical_bytes,
            unique_bytes: v.unique_bytes,
            stored_bytes: v.stored_bytes,
            chunks: v.chunks,
            packs: v.packs,
            dedup_ratio: v.dedup_ratio,
            compression_ratio: v.compression_ratio,
            reduction_ratio: v.reduction_ratio,
        }
    }
}

fn options() -> reel_api::ClientOptions {
    reel_api::ClientOptions {
        timeout: Some(Duration::from_secs(30)),
        ..reel_api::ClientOptions::default()
    }
}

/// Logs in at `url` (e.g. `http://127.0.0.1:8080`) as `user`.
pub fn login(url: &str, user: &str, password: &str) -> anyhow::Result<ReelApi> {
    ReelApi::log_in(url, options(), user, password)
        .with_context(|| format!("logging in to reel's API at {url} as {user}"))
}

/// A client with an API token (`reel ctl` / console "Tokens").
pub fn with_token(url: &str, token: &str) -> anyhow::Result<ReelApi> {
    Ok(ReelApi::new(url, options())?.with_token(token))
}

/// What the benchmark reads of reel through its API.
pub trait ReelFigures {
    /// The store's figures now (`/api/v1/stats`).
    fn store(&self) -> anyhow::Result<ApiStore>;
    /// The server process's CPU seconds so far (`reel_process_cpu_seconds_total`).
    fn cpu_seconds(&self) -> anyhow::Result<f64>;
}

impl ReelFigures for ReelApi {
    fn store(&self) -> anyhow::Result<ApiStore> {
        Ok(self.stats()?.into())
    }

    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let text = self.metrics()?;
        parse_metric(&text, "reel_process_cpu_seconds_total")
            .context("/metrics has no reel_process_cpu_seconds_total")
    }
}

/// Ratios computed from the pack objects alone (their trailers list every blob's raw and
/// stored length), without the catalog that `/api/v1/stats` reads.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DiskStore {
    pub pack_files: u64,
    /// Sum of the pack files' lengths.
    pub pack_bytes: u64,
    /// Sum of the raw lengths of every blob in them (distinct chunk bytes before compression).
    pub raw_bytes: u64,
    /// Bytes the benchmark wrote (the logical side, known without asking reel).
    pub logical_bytes: u64,
    pub dedup_ratio: f64,
    pub compression_ratio: f64,
    pub reduction_ratio: f64,
}

/// Largest relative difference between the API's and the pack files' ratios.
pub fn disagreement(api: &ApiStore, disk: &DiskStore) -> f64 {
    [
        (api.dedup_ratio, disk.dedup_ratio),
        (api.compression_ratio, disk.compression_ratio),
        (api.reduction_ratio, disk.reduction_ratio),
    ]
    .iter()
    .map(|(a, d)| {
        if *d > 0.0 {
            (a / d - 1.0).abs()
        } else {
            f64::INFINITY
        }
    })
    .fold(0.0, f64::max)
}

/// Sum of a metric's samples (all label sets) in Prometheus text format.
pub fn parse_metric(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        // The name must end here: a space or a label set follows.
        let value = match rest.chars().next() {
            Some(' ') => rest.trim(),
            Some('{') => rest.rsplit_once('}').map(|(_, v)| v.trim())?,
            _ => continue,
        };
        let v: f64 = value.split_whitespace().next()?.parse().ok()?;
        *found.get_or_insert(0.0) += v;
    }
    found
}

/// Reads every pack object under `data` (the local back end keeps them as files named
/// `packs/<id>.pack`), decodes its trailer, and derives the ratios with `logical_bytes` as the
/// logical side.
pub fn scan_packs(data: &Path, logical_bytes: u64) -> anyhow::Result<DiskStore> {
    let mut out = DiskStore {
        logical_bytes,
        ..DiskStore::default()
    };
    let mut stack = vec![data.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
                continue;
            }
            // Pack objects only (`packs/<id>.pack`), not the back end's temporary files.
            let in_packs = path
                .parent()
                .and_then(|p| p.file_name())
                .is_some_and(|n| n == "packs");
            if !in_packs || path.extension().is_none_or(|e| e != "pack") {
                continue;
            }
            let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let (_, trailer) = reel_chunkstore::format::decode_pack(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: not a pack: {e}", path.display()))?;
            out.pack_files += 1;
            out.pack_bytes += bytes.len() as u64;
            out.raw_bytes += trailer.blobs.iter().map(|b| u64::from(b.raw)).sum::<u64>();
        }
    }
    let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    out.dedup_ratio = ratio(out.logical_bytes, out.raw_bytes);
    out.compression_ratio = ratio(out.raw_bytes, out.pack_bytes);
    out.reduction_ratio = ratio(out.logical_bytes, out.pack_bytes);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_summed_over_label_sets() {
        let text = "# HELP x y\n# TYPE reel_process_cpu_seconds_total counter\n\
                    reel_process_cpu_seconds_total 12.5\n\
                    reel_process_cpu_seconds_total_extra 99\n\
                    reel_drive_bytes_total{drive=\"0\",direction=\"write\"} 100\n\
                    reel_drive_bytes_total{drive=\"1\",direction=\"write\"} 23\n";
        assert_eq!(
            parse_metric(text, "reel_process_cpu_seconds_total"),
            Some(12.5)
        );
        assert_eq!(parse_metric(text, "reel_drive_bytes_total"), Some(123.0));
        assert_eq!(parse_metric(text, "reel_missing"), None);
    }

    #[test]
    fn disagreement_is_the_largest_relative_difference() {
        let api = ApiStore {
            dedup_ratio: 8.0,
            compression_ratio: 3.0,
            reduction_ratio: 24.0,
            ..ApiStore::default()
        };
        let disk = DiskStore {
            dedup_ratio: 8.0,
            compression_ratio: 3.3,
            reduction_ratio: 24.0,
            ..DiskStore::default()
        };
        assert!((disagreement(&api, &disk) - (1.0 - 3.0 / 3.3)).abs() < 1e-9);
    }

    #[test]
    fn api_urls_need_a_scheme() {
        assert!(with_token("127.0.0.1:8080", "t").is_err());
        assert!(with_token("http://127.0.0.1:8080/", "t").is_ok());
    }
}
