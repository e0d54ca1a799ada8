//! Verify (scrub) of the live store as a background job: re-read and re-hash every pack,
//! name damage by cartridge and record. Read-only, so it runs while initiators write.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use parking_lot::Mutex;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Caller, Role, now};
use super::error::{ApiError, ApiResult, ErrorBody};

#[derive(Clone, Debug, Default, Serialize, ToSchema)]
pub struct DamageView {
    pub barcode: Option<String>,
    pub partition: u8,
    /// First and last damaged record, when known.
    pub records: Option<(u64, u64)>,
    pub reason: String,
}

#[derive(Clone, Debug, Default, Serialize, ToSchema)]
pub struct VerifyStatus {
    /// idle, running, clean, damaged or failed.
    pub state: String,
    pub started: Option<u64>,
    pub finished: Option<u64>,
    pub packs_done: u64,
    pub packs_total: u64,
    pub bytes_checked: u64,
    pub chunks_checked: u64,
    pub bad_chunks: usize,
    pub damage: Vec<DamageView>,
    pub error: Option<String>,
}

pub type VerifyJob = Arc<Mutex<VerifyStatus>>;

pub fn new_job() -> VerifyJob {
    Arc::new(Mutex::new(VerifyStatus {
        state: "idle".into(),
        ..VerifyStatus::default()
    }))
}

#[utoipa::path(get, path = "/api/v1/verify", tag = "store",
    responses((status = 200, body = VerifyStatus), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn status(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<VerifyStatus>> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.verify.lock().clone()))
}

#[utoipa::path(post, path = "/api/v1/verify", tag = "store",
    responses((status = 202, body = VerifyStatus), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn start(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<(StatusCode, Json<VerifyStatus>)> {
    caller.require(Role::Operator)?;
    {
        let mut job = state.verify.lock();
        if job.state == "running" {
            return Err(ApiError::conflict("a verify is already running"));
        }
        *job = VerifyStatus {
            state: "running".into(),
            started: Some(now()),
            ..VerifyStatus::default()
        };
    }
    state
        .auth
        .audit(&caller.username, "verify", "store", "started");
    let s = state.clone();
    tokio::task::spawn_blocking(move || run(&s, &caller));
    let snapshot = state.verify.lock().clone();
    Ok((StatusCode::ACCEPTED, Json(snapshot)))
}

fn run(state: &AppState, caller: &Caller) {
    let job = state.verify.clone();
    let result = state.cartridges.store().scrub(&mut |done, total| {
        let mut j = job.lock();
        j.packs_done = done;
        j.packs_total = total;
    });
    let mut j = job.lock();
    j.finished = Some(now());
    match result {
        Ok(report) => {
            j.bytes_checked = report.bytes_checked;
            j.chunks_checked = report.chunks_checked;
            j.bad_chunks = report.bad_chunks.len();
            j.packs_done = report.packs_checked;
            j.damage = state
                .cartridges
                .locate_damage(&report.damage)
                .map(|list| {
                    list.into_iter()
                        .map(|d| DamageView {
                            barcode: d.barcode,
                            partition: d.partition,
                            records: d.records,
                            reason: d.reason,
                        })
                        .collect()
                })
                .unwrap_or_default();
            j.state = if report.is_clean() {
                "clean"
            } else {
                "damaged"
            }
            .into();
        }
        Err(e) => {
            j.state = "failed".into();
            j.error = Some(e.to_string());
        }
    }
    let outcome = j.state.clone();
    drop(j);
    state
        .auth
        .audit(&caller.username, "verify", "store", &outcome);
}

/// Fraction done of the current or last verify (for /metrics).
pub fn progress(job: &VerifyJob) -> f64 {
    let j = job.lock();
    match j.state.as_str() {
        "running" if j.packs_total > 0 => j.packs_done as f64 / j.packs_total as f64,
        "running" | "idle" => 0.0,
        _ => 1.0,
    }
}
