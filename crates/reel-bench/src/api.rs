//! reel's own counters, read through its REST API (`/api/v1/stats`) and its Prometheus
//! `/metrics`, and the same ratios computed independently from the pack files on disk, so a
//! report can show both and whether they agree.

use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A logged-in API client for one reel server.
#[derive(Clone)]
pub struct ReelApi {
    url: String,
    token: String,
    agent: ureq::Agent,
}

/// `/api/v1/stats` (the store, all cartridges).
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

impl ReelApi {
    /// Logs in at `url` (e.g. `http://127.0.0.1:8080`) as `user`.
    pub fn login(url: &str, user: &str, password: &str) -> anyhow::Result<ReelApi> {
        let mut api = ReelApi::with_token(url, "")?;
        let answer = api
            .request(
                "POST",
                "/api/v1/login",
                Some(json!({"username": user, "password": password})),
            )
            .with_context(|| format!("logging in to reel's API at {url} as {user}"))?;
        api.token = answer["token"]
            .as_str()
            .context("the login answer has no token")?
            .to_string();
        Ok(api)
    }

    /// A client with an API token (`reel ctl` / console "Tokens").
    pub fn with_token(url: &str, token: &str) -> anyhow::Result<ReelApi> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("reel API URL {url:?} must start with http:// or https://");
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Ok(ReelApi {
            url: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            agent,
        })
    }

    fn request(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let text = self.raw(method, path, body)?;
        serde_json::from_str(&text).with_context(|| format!("{path}: not JSON"))
    }

    /// Any request: the HTTP status and the body as JSON (`null` when empty or not JSON);
    /// an error only when the server cannot be reached.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let (status, text) = self.send(method, path, body)?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// The body as text; an HTTP error status is an error with the server's message.
    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<String> {
        let (status, text) = self.send(method, path, body)?;
        if status >= 400 {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let message = v["error"]["message"].as_str().unwrap_or(&text);
            bail!("{method} {path}: HTTP {status}: {message}");
        }
        Ok(text)
    }

    /// One authenticated request: (status, body text).
    fn send(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<(u16, String)> {
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {}", self.token));
        let response = match body {
            Some(b) => self.agent.run(
                req.header("Content-Type", "application/json")
                    .body(b.to_string())?,
            ),
            None => self.agent.run(req.body(())?),
        }
        .with_context(|| format!("{method} {path}: reaching reel's API at {}", self.url))?;
        let status = response.status().as_u16();
        Ok((
            status,
            response.into_body().read_to_string().unwrap_or_default(),
        ))
    }

    pub fn store(&self) -> anyhow::Result<ApiStore> {
        let v = self.request("GET", "/api/v1/stats", None)?;
        serde_json::from_value(v).context("/api/v1/stats: unexpected shape")
    }

    /// The server process's CPU seconds so far (`reel_process_cpu_seconds_total`).
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let text = self.raw("GET", "/metrics", None)?;
        parse_metric(&text, "reel_process_cpu_seconds_total")
            .context("/metrics has no reel_process_cpu_seconds_total")
    }
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
        assert!(ReelApi::with_token("127.0.0.1:8080", "t").is_err());
        assert!(ReelApi::with_token("http://127.0.0.1:8080/", "t").is_ok());
    }
}
