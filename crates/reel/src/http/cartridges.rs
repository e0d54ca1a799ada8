//! Cartridges: list, create in bulk, details (with their space in the store), write protection,
//! erase, delete, vault.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use reel_api::Role;
use reel_api::cartridges::{
    CartridgeDetail, CartridgeView, CountersView, CreateRequest, ListQuery, LocationView, MamView,
    ShowQuery, UpdateRequest, UsageView,
};
use reel_chunkstore::{Exclusive, StreamUsage};
use reel_media::CartridgeInfo;
use reel_scsi::ItNexus;
use reel_volume::{ArchiveState, CartridgeError};

use super::auth::Caller;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::library::Place;
use super::maintenance::IgnoredBody;
use super::{AppState, blocking};
use crate::admin::{barcodes, now as unix_now, parse_media};

/// The API's view of a cartridge's space in the store (`on_disk_bytes` is the caller's).
fn usage_view(u: StreamUsage) -> UsageView {
    UsageView {
        logical_bytes: u.logical_bytes,
        unique_bytes: u.unique_bytes,
        stored_bytes: u.stored_bytes,
        dedup_ratio: u.dedup_ratio(),
        compression_ratio: u.compression_ratio(),
        reduction_ratio: u.reduction_ratio(),
        on_disk_bytes: None,
        reduction_ratio_on_disk: None,
        exclusive_unique_bytes: u.exclusive.map(|e| e.unique_bytes),
        exclusive_stored_bytes: u.exclusive.map(|e| e.stored_bytes),
        exact: u.exact,
    }
}

/// `lto9`, `lto9-worm`: the names the create request takes.
fn media_name(media: reel_media::MediaType) -> String {
    media
        .to_string()
        .to_lowercase()
        .replace('-', "")
        .replace(' ', "-")
}

fn view(
    info: &CartridgeInfo,
    place: Option<&Place>,
    archived: Option<&ArchiveState>,
) -> CartridgeView {
    CartridgeView {
        archive_state: super::archive::state_name(archived),
        barcode: info.barcode().as_str().to_string(),
        media: media_name(info.media_type()),
        worm: info.is_worm(),
        write_protected: info.write_protected(),
        capacity: info.partition_capacities().iter().sum(),
        written: info.counters().bytes_written_total,
        last_written: info.last_written().map(|t| t.0),
        location: match place {
            Some(p) => LocationView {
                library: Some(p.library.clone()),
                kind: Some(p.kind.to_string()),
                address: Some(p.address),
                vault: false,
            },
            None => LocationView {
                library: None,
                kind: None,
                address: None,
                vault: true,
            },
        },
    }
}

fn detail(
    info: &CartridgeInfo,
    place: Option<&Place>,
    usage: Option<UsageView>,
    archived: Option<&ArchiveState>,
) -> CartridgeDetail {
    let c = info.counters();
    let mam = info.mam();
    CartridgeDetail {
        archive: super::archive::view(archived),
        cartridge: view(info, place, archived),
        load_count: info.load_count(),
        partitions: info.partition_capacities().to_vec(),
        early_warning_percent: info.early_warning_percent(),
        mam: MamView {
            manufacturer: mam.manufacturer().to_string(),
            serial: mam.serial().to_string(),
            manufactured: mam.manufacture_date().0,
            used_space: mam.used_space(),
            space_remaining: mam.space_remaining(),
        },
        counters: CountersView {
            bytes_written_total: c.bytes_written_total,
            bytes_read_total: c.bytes_read_total,
            records_written: c.records_written,
            records_read: c.records_read,
            filemarks_written: c.filemarks_written,
        },
        usage,
    }
}

impl AppState {
    pub(super) fn cartridge_info(&self, barcode: &str) -> ApiResult<CartridgeInfo> {
        self.cartridges
            .info(barcode)
            .map(|(_, info)| info)
            .map_err(|_| ApiError::not_found(format!("no cartridge {barcode}")))
    }

    /// The cartridge's space in the store, or `None` (logged) if the catalog cannot say.
    fn usage(&self, barcode: &str, exclusive: Exclusive) -> Option<UsageView> {
        match self.cartridges.usage(barcode, exclusive) {
            Ok(u) => {
                let mut view = usage_view(u);
                if let Ok(store) = self.monitor.store_view(false)
                    && store.stored_bytes > 0
                {
                    let share = (view.stored_bytes as u128 * store.on_disk_bytes as u128
                        / store.stored_bytes as u128) as u64;
                    view.on_disk_bytes = Some(share);
                    view.reduction_ratio_on_disk = Some(if share > 0 {
                        view.logical_bytes as f64 / share as f64
                    } else {
                        1.0
                    });
                }
                Some(view)
            }
            Err(e) => {
                tracing::warn!(barcode, error = %e, "cartridge usage");
                None
            }
        }
    }

    /// The cartridge's archive state (`None`: available).
    fn archived(&self, barcode: &str) -> ApiResult<Option<ArchiveState>> {
        self.cartridges
            .archive_state(barcode)
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// 409 unless the cartridge's data is in the store (not archived, archiving or restoring):
    /// an archived cartridge's identity must match its image until it is restored.
    fn require_available(&self, barcode: &str, what: &str) -> ApiResult<()> {
        match self.archived(barcode)? {
            None => Ok(()),
            Some(state) => Err(ApiError::conflict(format!(
                "{barcode} is {}: it cannot be {what} until it is {}",
                state.name(),
                match state {
                    ArchiveState::Sharing { .. } | ArchiveState::Shared { .. } => "unshared",
                    ArchiveState::Adopting { .. } => "adopted",
                    _ => "restored",
                }
            ))),
        }
    }

    /// The detail of a cartridge whose data is in the store (one a handler required available,
    /// or one in a library): it has no archive state to show.
    fn available_detail(
        &self,
        barcode: &str,
        info: &CartridgeInfo,
        place: Option<&Place>,
    ) -> CartridgeDetail {
        detail(info, place, self.usage(barcode, Exclusive::Skip), None)
    }

    /// The detail of a cartridge in the vault, with its archive or sharing state.
    pub(super) fn vault_detail(&self, barcode: &str) -> ApiResult<CartridgeDetail> {
        let info = self.cartridge_info(barcode)?;
        let state = self.archived(barcode)?;
        Ok(detail(
            &info,
            None,
            self.usage(barcode, Exclusive::Skip),
            state.as_ref(),
        ))
    }

    /// The freshest info: a loaded cartridge's drive holds a newer copy than the store.
    fn live_info(&self, barcode: &str, place: Option<&Place>) -> ApiResult<CartridgeInfo> {
        if let Some(p) = place.filter(|p| p.kind == "drive") {
            let lib = self.library(&p.library)?;
            for drive in lib.drives() {
                let info = drive.with_personality(|d| {
                    d.medium()
                        .filter(|c| c.barcode().as_str() == barcode)
                        .map(|c| c.info().clone())
                });
                if let Some(info) = info {
                    return Ok(info);
                }
            }
        }
        self.cartridge_info(barcode)
    }
}

#[utoipa::path(get, path = "/api/v1/cartridges", tag = "cartridges", params(ListQuery),
    responses((status = 200, body = [CartridgeView]), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Json<Vec<CartridgeView>>> {
    caller.require(Role::Viewer)?;
    let Query(q) = query?;
    let vault_only = match q.location.as_deref() {
        None => None,
        Some("vault") => Some(true),
        Some("library") => Some(false),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "location: {other:?} is not vault or library"
            )));
        }
    };
    blocking(state, move |s| {
        let places = s.locations();
        let needle = q.search.unwrap_or_default().to_uppercase();
        let list = s
            .cartridges
            .list()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let archived = s
            .cartridges
            .archive_states()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(list
            .iter()
            .filter(|(_, info)| info.barcode().as_str().to_uppercase().contains(&needle))
            .filter(|(_, info)| {
                let in_vault = !places.contains_key(info.barcode().as_str());
                vault_only.is_none_or(|v| v == in_vault)
            })
            .map(|(_, info)| {
                let b = info.barcode().as_str();
                view(info, places.get(b), archived.get(b))
            })
            .collect())
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/api/v1/cartridges", tag = "cartridges", request_body = CreateRequest,
    responses((status = 201, body = [CartridgeView]), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    body: Result<Json<CreateRequest>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<Vec<CartridgeView>>)> {
    caller.require(Role::Admin)?;
    let Json(req) = body?;
    if req.count == 0 || req.count > 10_000 {
        return Err(ApiError::bad_request("count: 1 to 10000"));
    }
    let media =
        parse_media(&req.media).map_err(|e| ApiError::bad_request(format!("media: {e}")))?;
    let labels = barcodes(&req.prefix, req.first, req.count, media)
        .map_err(|e| ApiError::bad_request(format!("{e}")))?;
    blocking(state, move |s| {
        let target = format!(
            "{} cartridges {}..{}",
            labels.len(),
            labels.first().map_or("", |b| b.as_str()),
            labels.last().map_or("", |b| b.as_str())
        );
        let result = s.create_cartridges(&req, labels, media);
        s.audit(&caller, "create cartridges", &target, &result);
        let infos = result?;
        let places = s.locations();
        Ok((
            StatusCode::CREATED,
            infos
                .iter()
                .map(|i| view(i, places.get(i.barcode().as_str()), None))
                .collect(),
        ))
    })
    .await
    .map(|(code, v)| (code, Json(v)))
}

impl AppState {
    fn create_cartridges(
        &self,
        req: &CreateRequest,
        labels: Vec<reel_media::Barcode>,
        media: reel_media::MediaType,
    ) -> ApiResult<Vec<CartridgeInfo>> {
        let library = req
            .library
            .as_deref()
            .map(|n| self.library(n))
            .transpose()?;
        // The existence check, the creation and the placement act as one (issue: two
        // concurrent creates once got the same cartridge number).
        let _catalog = self.cartridges.lock_catalog();
        for b in &labels {
            if self.cartridges.info(b.as_str()).is_ok() {
                return Err(ApiError::conflict(format!(
                    "cartridge {} exists",
                    b.as_str()
                )));
            }
        }
        if let Some(lib) = library {
            let free = lib.changer().with_personality(|c| {
                c.elements()
                    .iter()
                    .filter(|e| {
                        e.element.kind == reel_smc::ElementType::Storage && e.barcode.is_none()
                    })
                    .count()
            });
            if free < labels.len() {
                return Err(ApiError::conflict(format!(
                    "library {} has {free} free slots for {} cartridges",
                    lib.spec().name,
                    labels.len()
                )));
            }
        }
        let mut infos = Vec::new();
        for b in labels {
            let label = b.as_str().to_string();
            let mut info =
                CartridgeInfo::new(b, media, unix_now()).with_write_protected(req.write_protected);
            if let Some(bytes) = req.capacity {
                info = info
                    .with_capacity(bytes)
                    .map_err(|e| ApiError::bad_request(format!("capacity of {label}: {e}")))?;
            }
            self.cartridges
                .create(&info)
                .map_err(|e| ApiError::conflict(format!("creating {label}: {e}")))?;
            infos.push(info);
        }
        if let Some(lib) = library {
            let names: Vec<String> = infos
                .iter()
                .map(|i| i.barcode().as_str().to_string())
                .collect();
            let nexus = ItNexus::new("reel-api", 0);
            lib.changer()
                .with_context(&nexus, |c, ctx| c.insert_into_storage(&names, ctx))
                .map_err(|e| ApiError::conflict(e.to_string()))?;
        }
        Ok(infos)
    }
}

#[utoipa::path(get, path = "/api/v1/cartridges/{barcode}", tag = "cartridges",
    params(("barcode" = String, Path), ShowQuery),
    responses((status = 200, body = CartridgeDetail), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn show(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ShowQuery>, QueryRejection>,
) -> ApiResult<Json<CartridgeDetail>> {
    caller.require(Role::Viewer)?;
    let Path(barcode) = path?;
    let Query(q) = query?;
    let exclusive = if q.exclusive.unwrap_or(false) {
        Exclusive::Count
    } else {
        Exclusive::Skip
    };
    blocking(state, move |s| {
        let places = s.locations();
        let place = places.get(&barcode);
        let info = s.live_info(&barcode, place)?;
        let archived = s.archived(&barcode)?;
        Ok(detail(
            &info,
            place,
            s.usage(&barcode, exclusive),
            archived.as_ref(),
        ))
    })
    .await
    .map(Json)
}

#[utoipa::path(patch, path = "/api/v1/cartridges/{barcode}", tag = "cartridges",
    params(("barcode" = String, Path)), request_body = UpdateRequest,
    responses((status = 200, body = CartridgeDetail), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn update(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<UpdateRequest>, JsonRejection>,
) -> ApiResult<Json<CartridgeDetail>> {
    caller.require(Role::Admin)?;
    let Path(barcode) = path?;
    let Json(req) = body?;
    blocking(state, move |s| {
        let action = if req.write_protected {
            "write-protect"
        } else {
            "write-enable"
        };
        let result = (|| {
            let info = s.cartridge_info(&barcode)?;
            // A load between the check and the update would let the drive save its older copy
            // over this one: hold the cartridge's place while updating. Its availability is
            // checked under the same catalog lock, which an archive or a share also takes.
            s.holding_place(&barcode, |place| {
                s.require_available(&barcode, "changed")?;
                if place.is_some_and(|p| p.kind == "drive") {
                    return Err(ApiError::conflict(format!(
                        "{barcode} is loaded in a drive; move it to a slot first"
                    )));
                }
                let info = s.cartridge_info(&barcode).unwrap_or(info);
                let info = info.with_write_protected(req.write_protected);
                s.cartridges
                    .update(&info)
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                Ok((info, place.cloned()))
            })
        })()
        .map(|(info, place)| s.available_detail(&barcode, &info, place.as_ref()));
        s.audit(&caller, action, &barcode, &result);
        result
    })
    .await
    .map(Json)
}

#[utoipa::path(delete, path = "/api/v1/cartridges/{barcode}", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    caller.require(Role::Admin)?;
    let Path(barcode) = path?;
    blocking(state, move |s| {
        let result = (|| {
            // No import can put it into a library between the check and the deletion.
            let _catalog = s.cartridges.lock_catalog();
            let info = s.cartridge_info(&barcode)?;
            // Which archive states may be deleted is `Cartridges::delete`'s to say (Busy).
            if let Some(p) = s.locations().get(&barcode) {
                return Err(ApiError::conflict(if p.kind == "drive" {
                    format!("{barcode} is loaded in a drive of {}", p.library)
                } else {
                    format!(
                        "{barcode} is in library {} (element {}); export it to the vault first",
                        p.library, p.address
                    )
                }));
            }
            if info.is_worm() && info.counters().bytes_written_total > 0 {
                return Err(ApiError::conflict(format!(
                    "{barcode} is a WORM cartridge with data"
                )));
            }
            s.cartridges.delete(&barcode).map_err(|e| match e {
                CartridgeError::NotFound(_) => ApiError::not_found(e.to_string()),
                CartridgeError::Mounted(_)
                | CartridgeError::Worm(_)
                | CartridgeError::Busy { .. } => ApiError::conflict(e.to_string()),
                other => ApiError::internal(other.to_string()),
            })
        })();
        s.audit(&caller, "delete cartridge", &barcode, &result);
        if let Ok(Some(_)) = result {
            // Its image goes from the archive location in the background; until then (or the
            // next start, if that fails) `reel_archive_images_to_delete` counts it.
            s.purge_archive_images_soon();
        }
        result.map(|_| StatusCode::NO_CONTENT)
    })
    .await
}

#[utoipa::path(post, path = "/api/v1/cartridges/{barcode}/vault", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 200, body = CartridgeDetail), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn vault(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<Json<CartridgeDetail>> {
    caller.require(Role::Operator)?;
    let Path(barcode) = path?;
    blocking(state, move |s| {
        let result = (|| {
            let _catalog = s.cartridges.lock_catalog();
            let info = s.cartridge_info(&barcode)?;
            let places = s.locations();
            match places.get(&barcode) {
                None => Err(ApiError::conflict(format!(
                    "{barcode} is already in the vault"
                ))),
                Some(p) if p.kind == "import_export" || p.kind == "slot" => {
                    // Slots only when the operator can reach them (magazines).
                    s.export(&p.library, p.address)?;
                    Ok(s.available_detail(&barcode, &info, None))
                }
                Some(p) => Err(ApiError::conflict(format!(
                    "{barcode} is in a {} of {}; move it to an import/export element first",
                    p.kind, p.library
                ))),
            }
        })();
        s.audit(&caller, "vault", &barcode, &result);
        result
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/api/v1/cartridges/{barcode}/erase", tag = "cartridges",
    params(("barcode" = String, Path)),
    responses((status = 200, body = CartridgeDetail), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn erase(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    _body: IgnoredBody,
) -> ApiResult<Json<CartridgeDetail>> {
    caller.require(Role::Admin)?;
    let Path(barcode) = path?;
    blocking(state, move |s| {
        let result = (|| {
            s.cartridge_info(&barcode)?;
            s.holding_place(&barcode, |place| {
                // Under the catalog lock, which an archive or a share also takes to begin.
                s.require_available(&barcode, "erased")?;
                if let Some(p) = place.filter(|p| p.kind == "drive") {
                    return Err(ApiError::conflict(format!(
                        "{barcode} is loaded in a drive of {}; move it to a slot first",
                        p.library
                    )));
                }
                let info = s
                    .cartridges
                    .erase(&barcode, unix_now())
                    .map_err(|e| match e {
                        CartridgeError::NotFound(_) => ApiError::not_found(e.to_string()),
                        CartridgeError::Mounted(_)
                        | CartridgeError::WriteProtected(_)
                        | CartridgeError::Worm(_) => ApiError::conflict(e.to_string()),
                        other => ApiError::internal(other.to_string()),
                    })?;
                Ok((info, place.cloned()))
            })
        })()
        .map(|(info, place)| s.available_detail(&barcode, &info, place.as_ref()));
        s.audit(&caller, "erase cartridge", &barcode, &result);
        result
    })
    .await
    .map(Json)
}
