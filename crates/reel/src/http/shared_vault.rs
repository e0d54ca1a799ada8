//! The shared vault over the API (docs/design/object-storage.md, "Shared vault"): share a
//! vaulted cartridge for another store on the bucket, take it back, list the vault, adopt.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use reel_api::Role;
use reel_api::cartridges::{CartridgeDetail, SharedCartridge};
use reel_volume::{ShareError, SharedVault};

use super::auth::{Caller, now};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::maintenance::IgnoredBody;
use super::{AppState, blocking};

fn vault(state: &AppState) -> ApiResult<SharedVault> {
    state.shared_vault.clone().ok_or_else(|| {
        ApiError::conflict(
            "no shared vault: the store is not on a bucket ([store] backend = \"s3\")",
        )
    })
}

pub fn api_error(e: ShareError) -> ApiError {
    match e {
        ShareError::NotFound(_) | ShareError::NotShared(_) => ApiError::not_found(e.to_string()),
        ShareError::State { .. } | ShareError::Mounted(_) | ShareError::Exists(_) => {
            ApiError::conflict(e.to_string())
        }
        ShareError::BadBarcode(_) => ApiError::bad_request(e.to_string()),
        other => ApiError::internal(other.to_string()),
    }
}

/// Runs `act` on the blocking pool with the vault, audited as `action` on the cartridge, and
/// answers with the cartridge's detail afterwards.
async fn act(
    state: Arc<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    action: &'static str,
    act: impl FnOnce(&AppState, &SharedVault, &str) -> ApiResult<()> + Send + 'static,
) -> ApiResult<Json<CartridgeDetail>> {
    caller.require(Role::Operator)?;
    let Path(barcode) = path?;
    blocking(state, move |s| {
        let result = vault(&s)
            .and_then(|v| act(&s, &v, &barcode))
            .and_then(|()| s.vault_detail(&barcode));
        s.audit(&caller, action, &barcode, &result);
        result
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/api/v1/cartridges/{barcode}/share", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 200, body = CartridgeDetail), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn share(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<Json<CartridgeDetail>> {
    act(
        state,
        caller,
        path,
        "share cartridge",
        |s, vault, barcode| {
            // In the vault, then `sharing`, under one lock: no import can take it meanwhile.
            let generation = {
                let _catalog = s.cartridges.lock_catalog();
                s.cartridge_info(barcode)?;
                if let Some(p) = s.locations().get(barcode) {
                    return Err(ApiError::conflict(format!(
                        "{barcode} is in library {} ({} {}); only a cartridge in the vault can be \
                     shared: export it first",
                        p.library, p.kind, p.address
                    )));
                }
                vault.begin_share(barcode, now()).map_err(api_error)?
            };
            vault
                .run_share(barcode, generation, now())
                .map(|_| ())
                .map_err(api_error)
        },
    )
    .await
}

#[utoipa::path(post, path = "/api/v1/cartridges/{barcode}/unshare", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 200, body = CartridgeDetail), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn unshare(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<Json<CartridgeDetail>> {
    act(
        state,
        caller,
        path,
        "unshare cartridge",
        |s, vault, barcode| {
            s.cartridge_info(barcode)?;
            vault.unshare(barcode, now()).map_err(api_error)
        },
    )
    .await
}

#[utoipa::path(post, path = "/api/v1/shared-vault/{barcode}/adopt", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 200, body = CartridgeDetail), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn adopt(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<Json<CartridgeDetail>> {
    act(
        state,
        caller,
        path,
        "adopt cartridge",
        |_, vault, barcode| vault.adopt(barcode, now()).map(|_| ()).map_err(api_error),
    )
    .await
}

#[utoipa::path(get, path = "/api/v1/shared-vault", tag = "cartridges",
    responses((status = 200, body = Vec<SharedCartridge>), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<Vec<SharedCartridge>>> {
    caller.require(Role::Viewer)?;
    blocking(state, move |s| {
        let entries = vault(&s)?.list().map_err(api_error)?;
        Ok(entries
            .into_iter()
            .map(|e| SharedCartridge {
                barcode: e.header.barcode,
                generation: e.header.generation,
                from_store: e.header.from_store,
                from_node: e.header.from_node,
                shared_at: e.header.shared_at,
                data_bytes: e.header.data_bytes,
                state: match (&e.taken, &e.released) {
                    (_, Some(_)) => "released",
                    (Some(_), None) => "adopted",
                    (None, None) => "waiting",
                }
                .to_string(),
                adopted_by_store: e.taken.as_ref().map(|t| t.store.clone()),
                adopted_by_node: e.taken.map(|t| t.node),
            })
            .collect())
    })
    .await
    .map(Json)
}

/// After a reclaim: tell exporters what this store no longer reads, and let go of what
/// adopters released (their data goes at the next reclaim). Best effort: logged.
pub fn settle(state: &AppState) {
    let Some(vault) = &state.shared_vault else {
        return;
    };
    match vault.release(now()) {
        Ok(released) => {
            for b in released {
                tracing::info!(barcode = %b, "shared vault: released to its exporter");
            }
        }
        Err(e) => tracing::warn!("shared vault: releasing: {e}"),
    }
    match vault.collect() {
        Ok(gone) => {
            for b in gone {
                tracing::info!(barcode = %b, "shared vault: adopted elsewhere and released, deleted here");
            }
        }
        Err(e) => tracing::warn!("shared vault: collecting: {e}"),
    }
}

/// `/metrics` gauges of the shared vault.
pub fn metrics(state: &AppState) -> Vec<(&'static str, &'static str, f64)> {
    let Some(vault) = &state.shared_vault else {
        return Vec::new();
    };
    let shared = state
        .cartridges
        .archive_states()
        .unwrap_or_default()
        .values()
        .filter(|s| matches!(s, reel_volume::ArchiveState::Shared { .. }))
        .count();
    let adopted = vault.adopted().map(|a| a.len()).unwrap_or(0);
    let foreign = state
        .cartridges
        .store()
        .stats()
        .map(|s| s.foreign_bytes)
        .unwrap_or(0);
    vec![
        (
            "reel_shared_cartridges",
            "Cartridges of this store in the shared vault, kept here until their adopter releases them.",
            shared as f64,
        ),
        (
            "reel_adopted_cartridges",
            "Adopted cartridges whose data is still read from the store that shared them.",
            adopted as f64,
        ),
        (
            "reel_foreign_pack_bytes",
            "Bytes of other stores' packs that adopted cartridges read in place.",
            foreign as f64,
        ),
    ]
}
