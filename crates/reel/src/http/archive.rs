//! The archive tier over the API (docs/design/archive.md): archive a vaulted cartridge into
//! the `[archive]` location and restore it, each as a maintenance job (one job at a time with
//! verify and reclaim), with its progress in `GET /api/v1/archive`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use parking_lot::Mutex;
use reel_api::Role;
use reel_api::cartridges::ArchiveView;
use reel_api::maintenance::{ArchiveStatus, JobProgress};
use reel_volume::archive::Progress;
use reel_volume::{Archive, ArchiveError, ArchiveState};

use super::auth::{Caller, now};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::maintenance::{IgnoredBody, JobStatus, start_job};
use super::{AppState, blocking};

impl JobStatus for ArchiveStatus {
    fn progress(&mut self) -> &mut JobProgress {
        &mut self.progress
    }
}

/// The name the API gives a cartridge's archive state.
pub fn state_name(state: Option<&ArchiveState>) -> String {
    state.map_or("available", |s| s.name()).to_string()
}

/// The image of an archived or restoring cartridge, for its detail.
pub fn view(state: Option<&ArchiveState>) -> Option<ArchiveView> {
    match *state? {
        ArchiveState::Archiving { .. } => None,
        ArchiveState::Archived {
            generation,
            data_bytes,
            image_bytes,
            archived_at,
        } => Some(ArchiveView {
            generation,
            data_bytes,
            image_bytes,
            archived_at: Some(archived_at),
        }),
        ArchiveState::Restoring {
            generation,
            data_bytes,
        } => Some(ArchiveView {
            generation,
            data_bytes,
            image_bytes: 0,
            archived_at: None,
        }),
        // The shared vault's states have no archive image.
        ArchiveState::Sharing { .. }
        | ArchiveState::Shared { .. }
        | ArchiveState::Adopting { .. } => None,
    }
}

/// 409 for a cartridge that may not enter a library because of its archive state.
pub fn refuse_import(barcode: &str, state: &ArchiveState) -> ApiError {
    ApiError::conflict(match state {
        ArchiveState::Archiving { .. } => {
            format!("{barcode} is being archived; it cannot be imported")
        }
        ArchiveState::Archived { .. } => format!(
            "{barcode} is archived: restore it first (POST /api/v1/cartridges/{barcode}/restore)"
        ),
        ArchiveState::Restoring { .. } => {
            format!("{barcode} is being restored; import it when its state is available")
        }
        ArchiveState::Sharing { .. } => format!("{barcode} is being shared; it cannot be imported"),
        ArchiveState::Shared { .. } => format!(
            "{barcode} is in the shared vault for another store to adopt: unshare it first \
             (POST /api/v1/cartridges/{barcode}/unshare)"
        ),
        ArchiveState::Adopting { .. } => {
            format!("{barcode} is being adopted; import it when its state is available")
        }
    })
}

impl AppState {
    /// Starts deleting the archive images no cartridge names any more
    /// (`Archive::purge_images`) on a thread of its own, when an archive location is
    /// configured: an image is one delete per object (thousands for a large cartridge), which
    /// is no work for the client's request to wait on. A failure is logged and the images stay
    /// noted for the next start.
    pub(super) fn purge_archive_images_soon(&self) {
        let Some(archive) = self.archive.clone() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("archive-purge".into())
            .spawn(move || match archive.purge_images() {
                Ok(done) => {
                    for (barcode, generation, objects) in done {
                        tracing::info!(barcode, generation, objects, "archive image deleted");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "deleting archive images no cartridge names"),
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "archive images stay noted for the next start");
        }
    }
}

/// `/metrics` gauges of the archive tier.
pub fn metrics(state: &AppState) -> Vec<(&'static str, &'static str, f64)> {
    let states = state.cartridges.archive_states().unwrap_or_default();
    let (mut count, mut data, mut image) = (0u64, 0u64, 0u64);
    for s in states.values() {
        if let ArchiveState::Archived {
            data_bytes,
            image_bytes,
            ..
        } = *s
        {
            count += 1;
            data += data_bytes;
            image += image_bytes;
        }
    }
    let job = state.jobs().archive.lock().progress.ratio();
    let to_purge = state
        .cartridges
        .images_to_purge()
        .map_or(0, |images| images.len());
    vec![
        (
            "reel_archived_cartridges",
            "Cartridges whose data is only in the archive location.",
            count as f64,
        ),
        (
            "reel_archived_bytes",
            "Host bytes of the archived cartridges' records.",
            data as f64,
        ),
        (
            "reel_archive_image_bytes",
            "Bytes of the archived cartridges' images in the archive location.",
            image as f64,
        ),
        (
            "reel_archive_images_to_delete",
            "Archive images no cartridge names any more (deleted or restored cartridges), not yet deleted from the archive location.",
            to_purge as f64,
        ),
        (
            "reel_archive_job_progress_ratio",
            "Share of the current (or last) archive or restore job's bytes done; 1 when done.",
            job,
        ),
    ]
}

fn location(state: &AppState) -> ApiResult<Archive> {
    state.archive.clone().ok_or_else(|| {
        ApiError::conflict(
            "no archive location is configured: add an [archive] section to reel.toml",
        )
    })
}

fn api_error(e: ArchiveError) -> ApiError {
    match e {
        ArchiveError::NotFound(_) => ApiError::not_found(e.to_string()),
        ArchiveError::State { .. } | ArchiveError::Mounted(_) => ApiError::conflict(e.to_string()),
        ArchiveError::BadBarcode(_) => ApiError::bad_request(e.to_string()),
        other => ApiError::internal(other.to_string()),
    }
}

/// Reports a job's progress into its status.
fn report(slot: &Mutex<ArchiveStatus>) -> impl FnMut(Progress) -> bool + '_ {
    move |p| {
        let mut s = slot.lock();
        s.step = p.step.name().to_string();
        s.bytes_done = p.bytes_done;
        s.bytes_total = p.bytes_total;
        s.progress.packs_done = p.bytes_done;
        s.progress.packs_total = p.bytes_total;
        true
    }
}

#[utoipa::path(get, path = "/api/v1/archive", tag = "cartridges",
    responses((status = 200, body = ArchiveStatus), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn status(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<ArchiveStatus>> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.jobs().archive.lock().clone()))
}

/// The common part of the archive and restore handlers: on the blocking pool, with the
/// archive location, `begin` checks the cartridge and starts the job (`first` is its initial
/// status); audited as "`action` cartridge"; 202 with the job's status.
async fn start(
    state: Arc<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    action: &'static str,
    step: &'static str,
    begin: impl FnOnce(
        &Arc<AppState>,
        &Caller,
        Archive,
        &str,
        ArchiveStatus,
    ) -> ApiResult<ArchiveStatus>
    + Send
    + 'static,
) -> ApiResult<(StatusCode, Json<ArchiveStatus>)> {
    caller.require(Role::Operator)?;
    let Path(barcode) = path?;
    blocking(state, move |s| {
        let result = location(&s).and_then(|archive| {
            let first = ArchiveStatus {
                action: action.into(),
                barcode: barcode.clone(),
                step: step.into(),
                ..ArchiveStatus::default()
            };
            begin(&s, &caller, archive, &barcode, first)
        });
        s.audit(&caller, &format!("{action} cartridge"), &barcode, &result);
        result
    })
    .await
    .map(|status| (StatusCode::ACCEPTED, Json(status)))
}

/// 404 unless the cartridge exists.
fn exists(s: &AppState, barcode: &str) -> ApiResult<()> {
    s.cartridges
        .info(barcode)
        .map(|_| ())
        .map_err(|_| ApiError::not_found(format!("no cartridge {barcode}")))
}

#[utoipa::path(post, path = "/api/v1/cartridges/{barcode}/archive", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 202, body = ArchiveStatus), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn archive(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<(StatusCode, Json<ArchiveStatus>)> {
    start(state, caller, path, "archive", "writing", |s, caller, archive, barcode, first| {
        // In the vault, then `archiving`, as one step: from here no import can take it.
        let generation = {
            let _catalog = s.cartridges.lock_catalog();
            exists(s, barcode)?;
            if let Some(p) = s.locations().get(barcode) {
                return Err(ApiError::conflict(format!(
                    "{barcode} is in library {} ({} {}); only a cartridge in the vault can be archived: export it first",
                    p.library, p.kind, p.address
                )));
            }
            // Unique per attempt (nanoseconds), so an interrupted attempt's objects never
            // collide with a new one's.
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64);
            archive.begin_archive(barcode, stamp).map_err(api_error)?
        };
        let job_barcode = barcode.to_string();
        let job_archive = archive.clone();
        let started = start_job(
            s,
            caller,
            "archive",
            |jobs| &jobs.archive,
            first,
            move |_, slot| {
                job_archive
                    .run_archive(&job_barcode, now(), &mut report(slot))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        );
        if started.is_err() {
            // Another job runs: back to available (nothing was written yet).
            let _ = archive.recover_one(barcode);
        }
        tracing::info!(barcode, generation, "archive started");
        started
    })
    .await
}

#[utoipa::path(post, path = "/api/v1/cartridges/{barcode}/restore", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 202, body = ArchiveStatus), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn restore(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<(StatusCode, Json<ArchiveStatus>)> {
    start(
        state,
        caller,
        path,
        "restore",
        "restoring",
        |s, caller, archive, barcode, first| {
            exists(s, barcode)?;
            match s.cartridges.archive_state(barcode).map_err(api_error)? {
                // `restoring`: an interrupted restore, run again.
                Some(ArchiveState::Archived { .. } | ArchiveState::Restoring { .. }) => {}
                other => {
                    return Err(ApiError::conflict(format!(
                        "{barcode} is {}: only an archived cartridge can be restored",
                        state_name(other.as_ref())
                    )));
                }
            }
            let job_barcode = barcode.to_string();
            // `restoring` is recorded by the job, once it holds the job slot; archived and
            // restoring both keep the cartridge out of libraries meanwhile.
            start_job(
                s,
                caller,
                "restore",
                |jobs| &jobs.archive,
                first,
                move |_, slot| {
                    archive
                        .begin_restore(&job_barcode)
                        .and_then(|_| archive.run_restore(&job_barcode, &mut report(slot)))
                        .map_err(|e| e.to_string())
                },
            )
        },
    )
    .await
}
