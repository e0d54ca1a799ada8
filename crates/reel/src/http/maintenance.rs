//! Maintenance jobs on the live store — verify (`verify.rs`) and reclaim (here) — started over
//! the API and run on the blocking pool, one at a time, each with a status the API and
//! `/metrics` read while it runs.
//!
//! One at a time: reclaim holds the store's ingest lock (writers and readers wait), and two
//! passes over every pack at once would only slow each other down.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use parking_lot::Mutex;
use reel_api::Role;
use reel_api::maintenance::{
    ArchiveStatus, JobProgress, ReclaimRequest, ReclaimStatus, VerifyStatus,
};

use super::AppState;
use super::auth::{Caller, now};
use super::error::{ApiError, ApiResult, ErrorBody};

/// The body of an action that takes none: read and dropped. A client may send an empty chunked
/// body (ureq does for a POST without one), and hyper closes the connection after answering a
/// request whose body it did not read, which the client's next request on it then meets.
pub struct IgnoredBody;

impl<S: Send + Sync> FromRequest<S> for IgnoredBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        Ok(IgnoredBody)
    }
}

/// A job's status: its progress and its own report fields.
pub trait JobStatus: Default + Send + 'static {
    fn progress(&mut self) -> &mut JobProgress;
}

impl JobStatus for ReclaimStatus {
    fn progress(&mut self) -> &mut JobProgress {
        &mut self.progress
    }
}

/// The maintenance jobs' statuses, and which one runs.
pub struct Jobs {
    running: Mutex<Option<&'static str>>,
    pub verify: Mutex<VerifyStatus>,
    pub reclaim: Mutex<ReclaimStatus>,
    /// The archive tier's archive and restore jobs (`archive.rs`).
    pub archive: Mutex<ArchiveStatus>,
}

impl Jobs {
    pub fn new() -> Jobs {
        Jobs {
            running: Mutex::new(None),
            verify: Mutex::new(VerifyStatus {
                progress: JobProgress::idle(),
                ..VerifyStatus::default()
            }),
            reclaim: Mutex::new(ReclaimStatus {
                progress: JobProgress::idle(),
                ..ReclaimStatus::default()
            }),
            archive: Mutex::new(ArchiveStatus {
                progress: JobProgress::idle(),
                ..ArchiveStatus::default()
            }),
        }
    }
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs::new()
    }
}

impl AppState {
    pub fn jobs(&self) -> &Jobs {
        &self.maintenance
    }
}

/// Frees the job slot when the job ends, however it ends (a panic marks it failed).
struct RunningJob<S: JobStatus> {
    state: Arc<AppState>,
    status: fn(&Jobs) -> &Mutex<S>,
}

impl<S: JobStatus> Drop for RunningJob<S> {
    fn drop(&mut self) {
        let jobs = self.state.jobs();
        {
            let mut s = (self.status)(jobs).lock();
            let p = s.progress();
            if p.state == "running" {
                p.state = "failed".into();
                p.error = Some("the job stopped unexpectedly".into());
            }
            p.finished.get_or_insert_with(now);
        }
        *jobs.running.lock() = None;
    }
}

/// Starts `work` as the maintenance job `name` on the blocking pool and returns its first
/// status; 409 while any maintenance job runs. `work` reports progress through
/// [`progress_of`] and writes its report and outcome state into the status (`done` when it
/// leaves the state alone); an error marks the job failed. Start and outcome go to the audit log.
pub fn start_job<S: JobStatus + Clone>(
    state: &Arc<AppState>,
    caller: &Caller,
    name: &'static str,
    status: fn(&Jobs) -> &Mutex<S>,
    first: S,
    work: impl FnOnce(&AppState, &Mutex<S>) -> Result<(), String> + Send + 'static,
) -> ApiResult<S> {
    let jobs = state.jobs();
    {
        let mut running = jobs.running.lock();
        if let Some(other) = *running {
            return Err(ApiError::conflict(format!(
                "a {other} is running; one maintenance job at a time"
            )));
        }
        *running = Some(name);
        let mut s = status(jobs).lock();
        *s = first;
        *s.progress() = JobProgress {
            state: "running".into(),
            started: Some(now()),
            ..JobProgress::default()
        };
    }
    state.auth.audit(&caller.username, name, "store", "started");
    let snapshot = status(jobs).lock().clone();
    let guard = RunningJob {
        state: state.clone(),
        status,
    };
    let caller = caller.clone();
    tokio::task::spawn_blocking(move || {
        let state = guard.state.clone();
        let slot = status(state.jobs());
        let result = work(&state, slot);
        let outcome = {
            let mut s = slot.lock();
            let p = s.progress();
            match result {
                Ok(()) if p.state == "running" => p.state = "done".into(),
                Ok(()) => {}
                Err(e) => {
                    p.state = "failed".into();
                    p.error = Some(e);
                }
            }
            p.finished = Some(now());
            match &p.error {
                Some(e) => format!("{}: {e}", p.state),
                None => p.state.clone(),
            }
        };
        drop(guard);
        // After the slot is free: the audit record waits for the store, which a job may hold.
        state.auth.audit(&caller.username, name, "store", &outcome);
    });
    Ok(snapshot)
}

/// A progress callback for the store's `scrub` and `reclaim` that updates `slot`.
pub fn progress_of<S: JobStatus>(slot: &Mutex<S>) -> impl FnMut(u64, u64) + '_ {
    move |done, total| {
        let mut s = slot.lock();
        let p = s.progress();
        p.packs_done = done;
        p.packs_total = total;
    }
}

/// Packs with less than half their bytes live are rewritten by default (as `reel reclaim`).
pub const DEFAULT_REWRITE_BELOW: f64 = 0.5;

#[utoipa::path(get, path = "/api/v1/reclaim", tag = "store",
    responses((status = 200, body = ReclaimStatus), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn reclaim_status(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<ReclaimStatus>> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.jobs().reclaim.lock().clone()))
}

#[utoipa::path(post, path = "/api/v1/reclaim", tag = "store", request_body(content = Option<ReclaimRequest>),
    responses((status = 202, body = ReclaimStatus), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn start_reclaim(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<ReclaimStatus>)> {
    caller.require(Role::Admin)?;
    // The body is optional: none (or whitespace) means the defaults.
    let request: ReclaimRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ReclaimRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body: {e}")))?
    };
    let rewrite_below = request.rewrite_below.unwrap_or(DEFAULT_REWRITE_BELOW);
    if !(0.0..=1.0).contains(&rewrite_below) {
        return Err(ApiError::bad_request("rewrite_below: 0 to 1"));
    }
    let first = ReclaimStatus {
        rewrite_below,
        ..ReclaimStatus::default()
    };
    let snapshot = start_job(
        &state,
        &caller,
        "reclaim",
        |jobs| &jobs.reclaim,
        first,
        move |s, slot| run_reclaim(s, slot, rewrite_below),
    )?;
    Ok((StatusCode::ACCEPTED, Json(snapshot)))
}

fn run_reclaim(
    state: &AppState,
    slot: &Mutex<ReclaimStatus>,
    rewrite_below: f64,
) -> Result<(), String> {
    let store = state.cartridges.store();
    let stored = || {
        store
            .stats()
            .map(|s| s.stored_bytes)
            .map_err(|e| e.to_string())
    };
    // Cartridges whose adopter released them leave first, so this reclaim frees their data.
    super::shared_vault::settle(state);
    let before = stored()?;
    slot.lock().stored_before = before;
    let report = store
        .reclaim(rewrite_below, &mut progress_of(slot))
        .map_err(|e| e.to_string())?;
    // Adopted data this reclaim let go of: tell its exporters.
    super::shared_vault::settle(state);
    let after = stored()?;
    let mut s = slot.lock();
    s.progress.packs_done = report.packs_examined;
    s.progress.packs_total = report.packs_examined;
    s.packs_deleted = report.packs_deleted;
    s.packs_rewritten = report.packs_rewritten;
    s.chunks_dropped = report.chunks_dropped;
    s.bytes_freed = report.bytes_freed;
    s.stored_after = after;
    Ok(())
}
