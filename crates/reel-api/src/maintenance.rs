//! The maintenance jobs on the live store, verify, reclaim and the archive tier's archive and
//! restore: their statuses and requests.

use serde::{Deserialize, Serialize};

/// What every job's status holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobProgress {
    /// `idle` (never ran since the server started), `running`, the job's outcome (verify:
    /// `clean` or `damaged`; reclaim: `done`), or `failed` (see `error`).
    pub state: String,
    pub started: Option<u64>,
    pub finished: Option<u64>,
    pub packs_done: u64,
    pub packs_total: u64,
    pub error: Option<String>,
}

impl JobProgress {
    /// A job that has not run since the server started.
    pub fn idle() -> JobProgress {
        JobProgress {
            state: "idle".into(),
            ..JobProgress::default()
        }
    }

    pub fn is_running(&self) -> bool {
        self.state == "running"
    }

    /// Share of the packs done: 0 before the first run, 1 once finished.
    pub fn ratio(&self) -> f64 {
        match self.state.as_str() {
            "running" if self.packs_total > 0 => self.packs_done as f64 / self.packs_total as f64,
            "running" | "idle" => 0.0,
            _ => 1.0,
        }
    }
}

/// Damage a verify found, named by cartridge and record where the catalog can say.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DamageView {
    pub barcode: Option<String>,
    pub partition: u8,
    /// First and last damaged record, when known.
    pub records: Option<(u64, u64)>,
    pub reason: String,
}

/// `GET`/`POST /api/v1/verify`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerifyStatus {
    /// `state` is idle, running, clean, damaged or failed.
    #[serde(flatten)]
    pub progress: JobProgress,
    pub bytes_checked: u64,
    pub chunks_checked: u64,
    pub bad_chunks: usize,
    pub damage: Vec<DamageView>,
}

/// `GET`/`POST /api/v1/reclaim`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReclaimStatus {
    #[serde(flatten)]
    pub progress: JobProgress,
    /// Packs with less than this share of their bytes live were rewritten.
    pub rewrite_below: f64,
    pub packs_deleted: u64,
    pub packs_rewritten: u64,
    pub chunks_dropped: u64,
    /// Pack bytes before minus after.
    pub bytes_freed: u64,
    /// Pack bytes on the back end before and after the run.
    pub stored_before: u64,
    pub stored_after: u64,
}

/// The body of `POST /api/v1/reclaim` (optional: none means the defaults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReclaimRequest {
    /// Rewrite packs whose live share of raw bytes is below this (0 to 1; default 0.5). 0 only
    /// deletes packs with nothing live; 1 rewrites every pack with anything dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_below: Option<f64>,
}

/// `GET /api/v1/archive`, and the answer of `POST /api/v1/cartridges/{barcode}/archive` and
/// `.../restore`: the last archive or restore job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArchiveStatus {
    /// `state` is idle, running, done or failed; here `packs_done`/`packs_total` are the bytes
    /// of the current step (as `bytes_done`/`bytes_total`), so the ratio reads the same.
    #[serde(flatten)]
    pub progress: JobProgress,
    /// `archive` or `restore` (empty while idle).
    pub action: String,
    pub barcode: String,
    /// archive: `writing`, `verifying`, `dropping`; restore: `restoring`, `cleaning`.
    pub step: String,
    /// Host bytes copied (or checked) so far, and in all.
    pub bytes_done: u64,
    pub bytes_total: u64,
}
