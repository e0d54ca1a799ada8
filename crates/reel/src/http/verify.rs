//! Verify (scrub) of the live store as a maintenance job (`maintenance.rs`): re-read and
//! re-hash every pack, name damage by cartridge and record. Read-only, so initiators keep
//! writing while it runs.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use parking_lot::Mutex;
use reel_api::Role;
use reel_api::maintenance::{DamageView, JobProgress, VerifyStatus};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiResult, ErrorBody};
use super::maintenance::{IgnoredBody, JobStatus, Jobs, progress_of, start_job};

impl JobStatus for VerifyStatus {
    fn progress(&mut self) -> &mut JobProgress {
        &mut self.progress
    }
}

#[utoipa::path(get, path = "/api/v1/verify", tag = "store",
    responses((status = 200, body = VerifyStatus), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn status(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<VerifyStatus>> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.jobs().verify.lock().clone()))
}

#[utoipa::path(post, path = "/api/v1/verify", tag = "store",
    responses((status = 202, body = VerifyStatus), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn start(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    _body: IgnoredBody,
) -> ApiResult<(StatusCode, Json<VerifyStatus>)> {
    caller.require(Role::Operator)?;
    let snapshot = start_job(
        &state,
        &caller,
        "verify",
        |jobs| &jobs.verify,
        VerifyStatus::default(),
        run,
    )?;
    Ok((StatusCode::ACCEPTED, Json(snapshot)))
}

fn run(state: &AppState, slot: &Mutex<VerifyStatus>) -> Result<(), String> {
    let report = state
        .cartridges
        .store()
        .scrub(&mut progress_of(slot))
        .map_err(|e| e.to_string())?;
    // Naming damage reads the catalog: done before taking the status lock.
    let damage = state
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
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        // Catalog damage that names no cartridge: the chunk index disagrees with the packs.
        .chain(report.index_problems.iter().map(|p| DamageView {
            barcode: None,
            partition: 0,
            records: None,
            reason: format!("chunk index: {p}"),
        }))
        .collect();
    let mut j = slot.lock();
    j.bytes_checked = report.bytes_checked;
    j.chunks_checked = report.chunks_checked;
    j.bad_chunks = report.bad_chunks.len();
    j.progress.packs_done = report.packs_checked;
    j.damage = damage;
    j.progress.state = if report.is_clean() {
        "clean"
    } else {
        "damaged"
    }
    .into();
    Ok(())
}

/// Fraction done of the current or last verify (for /metrics).
pub fn progress(jobs: &Jobs) -> f64 {
    jobs.verify.lock().progress.ratio()
}
