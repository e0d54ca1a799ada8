//! Libraries, elements and drives: what they hold, and the operator's actions on them.
//!
//! Moves go through the changer as a SCSI MOVE MEDIUM from the API's own I_T nexus, so the
//! console obeys exactly the rules initiators do (PREVENT, full/empty elements, media
//! compatibility) and initiators see the same unit attentions.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use bytes::Bytes;
use reel_api::Role;
use reel_api::library::{
    ChangerView, DriveStatsView, DriveView, ElementView, ExceptionView, ExportRequest,
    ImportRequest, LibraryDetail, LibraryFacts, LibraryView, MagazinesView, MoveRequest,
};
use reel_library::VirtualLibrary;
use reel_scsi::{Asc, ItNexus, LogicalUnit, Request, SenseKey, Status, TaskAttribute, parse_sense};
use reel_smc::{ElementType, OperatorError};
use reel_ssc::{Activity, DriveState};

use super::auth::Caller;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::{AppState, blocking};

pub fn kind_name(kind: ElementType) -> &'static str {
    match kind {
        ElementType::Transport => "transport",
        ElementType::Storage => "slot",
        ElementType::ImportExport => "import_export",
        ElementType::DataTransfer => "drive",
    }
}

pub fn state_name(state: DriveState) -> (&'static str, &'static str) {
    match state {
        DriveState::Loaded { activity } => (
            "loaded",
            match activity {
                Activity::Idle => "idle",
                Activity::Reading => "reading",
                Activity::Writing => "writing",
                Activity::Positioning => "positioning",
                Activity::Rewinding => "rewinding",
                Activity::Erasing => "erasing",
                Activity::Formatting => "formatting",
                _ => "busy",
            },
        ),
        DriveState::Unloaded => ("unloaded", "idle"),
        _ => ("empty", "idle"),
    }
}

pub fn library_view(lib: &VirtualLibrary) -> LibraryView {
    LibraryView {
        library: library_facts(lib),
        drives: lib.spec().layout.drives,
    }
}

fn library_facts(lib: &VirtualLibrary) -> LibraryFacts {
    let spec = lib.spec();
    // Counted, not collected: 60,000 barcodes need not be copied to be counted.
    let cartridges = lib
        .changer()
        .with_personality(|c| c.inventory().iter().filter(|(_, c)| c.is_some()).count());
    LibraryFacts {
        physical: spec.physical.clone(),
        pool: spec.barcodes.describe(),
        name: spec.name.clone(),
        changer: ChangerView {
            model: spec.changer.name().to_string(),
            vendor: spec.changer.vendor.to_string(),
            product: spec.changer.product.to_string(),
        },
        drive_model: spec.drive.name().to_string(),
        slots: spec.layout.slots,
        import_export: spec.layout.import_export,
        magazines: spec
            .layout
            .magazines
            .map(|(count, slots_each)| MagazinesView { count, slots_each }),
        cartridges,
    }
}

/// The drives as of their last commands (published by each drive; no waiting for a drive
/// busy with a command).
pub fn drive_views(lib: &VirtualLibrary, addresses: &HashMap<u16, u16>) -> Vec<DriveView> {
    let model = lib.spec().drive;
    let matching = reel_drivemodel::lto(
        model.generation(),
        model.form_factor() == reel_ssc::FormFactor::FullHeight,
    )
    .map(|s| s.id.to_string());
    lib.drive_statuses()
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let (state, activity) = state_name(d.state);
            let stats = d.stats;
            DriveView {
                index: i as u16,
                address: addresses.get(&(i as u16)).copied().unwrap_or(0),
                lun: i as u16 + 1,
                serial: d.serial,
                vendor: model.vendor().to_string(),
                product: model.product().to_string(),
                state: state.to_string(),
                activity: activity.to_string(),
                barcode: d.barcode,
                removal_prevented: d.removal_prevented,
                stats: DriveStatsView {
                    bytes_read: stats.bytes_read,
                    bytes_written: stats.bytes_written,
                    read_commands: stats.read_commands,
                    write_commands: stats.write_commands,
                    filemarks_written: stats.filemarks_written,
                    loads: stats.loads,
                },
                physical_model: d
                    .physical
                    .as_ref()
                    .map(|(spec, _)| spec.id.to_string())
                    .or_else(|| matching.clone()),
                physical: d.physical.map(|(spec, p)| physical_view(spec, &p)),
            }
        })
        .collect()
}

fn physical_view(
    spec: &'static reel_drivemodel::DriveSpec,
    p: &reel_drivemodel::DriveStats,
) -> reel_api::library::PhysicalDriveView {
    use reel_drivemodel::Motion;
    let motion = match p.motion {
        Motion::Idle => "idle",
        Motion::Streaming => "streaming",
        Motion::Repositioning => "repositioning",
        Motion::WaitingForData => "waiting_for_data",
        Motion::Loading => "loading",
        Motion::Unloading => "unloading",
        Motion::Rewinding => "rewinding",
        Motion::Locating => "locating",
    };
    reel_api::library::PhysicalDriveView {
        model: spec.id.to_string(),
        model_name: spec.name.to_string(),
        motion: motion.to_string(),
        tape_speed: p.tape_speed,
        buffer_bytes: p.buffer_bytes,
        buffer_capacity: spec.buffer_bytes,
        back_hitches: p.back_hitches,
        repositioning_seconds: p.repositioning.as_secs_f64(),
        native_bytes_on_tape: p.native_bytes_on_tape,
    }
}

pub fn library_detail(lib: &VirtualLibrary) -> LibraryDetail {
    let statuses = lib.changer().with_personality(|c| c.elements());
    let mut drive_addresses = HashMap::new();
    let elements = statuses
        .into_iter()
        .map(|e| {
            if e.element.kind == ElementType::DataTransfer {
                drive_addresses.insert(e.element.index, e.address);
            }
            ElementView {
                address: e.address,
                kind: kind_name(e.element.kind).to_string(),
                index: e.element.index,
                barcode: e.barcode,
                source: e.source,
                operator_accessible: e.operator_accessible,
                exception: e.exception.map(|asc| ExceptionView {
                    asc: (asc.0 >> 8) as u8,
                    ascq: asc.0 as u8,
                    message: asc.name().unwrap_or("").to_string(),
                }),
            }
        })
        .collect();
    LibraryDetail {
        library: library_facts(lib),
        drives: drive_views(lib, &drive_addresses),
        elements,
    }
}

impl AppState {
    pub fn library(&self, name: &str) -> ApiResult<&Arc<VirtualLibrary>> {
        self.libraries
            .iter()
            .find(|l| l.spec().name == name)
            .ok_or_else(|| ApiError::not_found(format!("no library {name}")))
    }
}

/// The I_T nexus of actions taken through the API (its own unit attentions, never an
/// initiator's).
fn api_nexus() -> ItNexus {
    ItNexus::new("reel-api", 0)
}

/// Runs a changer command for the API; unit attentions addressed to the API's nexus are
/// consumed and the command retried.
fn run_changer(lib: &VirtualLibrary, cdb: &[u8]) -> ApiResult<()> {
    let nexus = api_nexus();
    for _ in 0..8 {
        let response = lib.changer().execute(Request {
            nexus: &nexus,
            cdb,
            data_out: Bytes::new(),
            data_in_len: 0,
            attribute: TaskAttribute::Simple,
        });
        match response.status {
            Status::Good => return Ok(()),
            Status::CheckCondition => {
                let sense = response
                    .sense
                    .as_deref()
                    .and_then(|s| parse_sense(s).ok())
                    .ok_or_else(|| ApiError::internal("the changer failed without sense data"))?;
                if sense.key == SenseKey::UNIT_ATTENTION {
                    continue;
                }
                return Err(sense_error(sense.key, sense.asc));
            }
            other => {
                return Err(ApiError::conflict(format!(
                    "the changer answered {other:?}"
                )));
            }
        }
    }
    Err(ApiError::internal(
        "the changer kept reporting unit attentions",
    ))
}

fn sense_error(key: SenseKey, asc: Asc) -> ApiError {
    let text = asc
        .name()
        .map(str::to_lowercase)
        .unwrap_or_else(|| format!("ASC/ASCQ {:04x}h", asc.0));
    match asc {
        Asc::INVALID_ELEMENT_ADDRESS => ApiError::not_found(text),
        _ if key == SenseKey::ILLEGAL_REQUEST || key == SenseKey::NOT_READY => {
            ApiError::conflict(text)
        }
        _ => ApiError::internal(text),
    }
}

fn operator_error(e: OperatorError) -> ApiError {
    match e {
        OperatorError::InvalidElement(_) => ApiError::not_found(e.to_string()),
        OperatorError::InvalidBarcode(_) => ApiError::bad_request(e.to_string()),
        OperatorError::Persist(_) => ApiError::internal(e.to_string()),
        _ => ApiError::conflict(e.to_string()),
    }
}

#[utoipa::path(get, path = "/api/v1/libraries", tag = "libraries",
    responses((status = 200, body = [LibraryView]), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_libraries(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<Vec<LibraryView>>> {
    caller.require(Role::Viewer)?;
    blocking(state, |s| {
        Ok(s.libraries.iter().map(|l| library_view(l)).collect())
    })
    .await
    .map(Json)
}

#[utoipa::path(get, path = "/api/v1/libraries/{name}", tag = "libraries",
    params(("name" = String, Path, description = "the library's iSCSI target name")),
    responses((status = 200, body = LibraryDetail), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_library(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<LibraryDetail>> {
    caller.require(Role::Viewer)?;
    let Path(name) = path?;
    blocking(state, move |s| Ok(library_detail(s.library(&name)?)))
        .await
        .map(Json)
}

#[utoipa::path(post, path = "/api/v1/libraries/{name}/move", tag = "libraries",
    params(("name" = String, Path)), request_body = MoveRequest,
    responses((status = 200, body = LibraryDetail), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn move_medium(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Result<Json<MoveRequest>, JsonRejection>,
) -> ApiResult<Json<LibraryDetail>> {
    caller.require(Role::Operator)?;
    let Path(name) = path?;
    let Json(req) = body?;
    let target = format!("{name} {} -> {}", req.from, req.to);
    blocking(state, move |s| {
        let lib = s.library(&name)?;
        let transport = lib.changer().with_personality(|c| {
            c.elements()
                .iter()
                .find(|e| e.element.kind == ElementType::Transport)
                .map(|e| e.address)
        });
        let transport = transport.ok_or_else(|| ApiError::internal("no transport element"))?;
        let cdb = reel_scsi::initiator::smc::move_medium(transport, req.from, req.to);
        let result = run_changer(lib, &cdb);
        s.audit(&caller, "move", &target, &result);
        result?;
        Ok(library_detail(lib))
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/api/v1/libraries/{name}/import", tag = "libraries",
    params(("name" = String, Path)), request_body = ImportRequest,
    responses((status = 200, body = LibraryDetail), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn import(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Result<Json<ImportRequest>, JsonRejection>,
) -> ApiResult<Json<LibraryDetail>> {
    caller.require(Role::Operator)?;
    let Path(name) = path?;
    let Json(req) = body?;
    blocking(state, move |s| {
        let target = format!("{} into {name}", req.barcode);
        let result = s.import(&name, &req.barcode, req.to);
        s.audit(&caller, "import", &target, &result);
        result?;
        Ok(library_detail(s.library(&name)?))
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/api/v1/libraries/{name}/export", tag = "libraries",
    params(("name" = String, Path)), request_body = ExportRequest,
    responses((status = 200, body = LibraryDetail), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn export(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Result<Json<ExportRequest>, JsonRejection>,
) -> ApiResult<Json<LibraryDetail>> {
    caller.require(Role::Operator)?;
    let Path(name) = path?;
    let Json(req) = body?;
    blocking(state, move |s| {
        let target = format!("{name} element {}", req.from);
        let result = s.export(&name, req.from).map(|_| ());
        s.audit(&caller, "export", &target, &result);
        result?;
        Ok(library_detail(s.library(&name)?))
    })
    .await
    .map(Json)
}

impl AppState {
    /// A vaulted cartridge into an operator-accessible element of library `name`.
    pub fn import(&self, name: &str, barcode: &str, to: Option<u16>) -> ApiResult<()> {
        let lib = self.library(name)?;
        // "In no library, then insert" as one step: two imports of one cartridge into two
        // libraries, or an import racing a delete, would otherwise both pass the check.
        let _catalog = self.cartridges.lock_catalog();
        self.cartridges
            .info(barcode)
            .map_err(|_| ApiError::not_found(format!("no cartridge {barcode}")))?;
        // Its data must be in the store: not archived, nor on its way to or from the archive.
        if let Some(state) = self
            .cartridges
            .archive_state(barcode)
            .map_err(|e| ApiError::internal(e.to_string()))?
        {
            return Err(super::archive::refuse_import(barcode, &state));
        }
        if let Some(place) = self.locations().get(barcode) {
            return Err(ApiError::conflict(format!(
                "{barcode} is already in library {} (element {})",
                place.library, place.address
            )));
        }
        let nexus = api_nexus();
        lib.changer().with_context(&nexus, |c, ctx| {
            let to = match to {
                Some(a) => a,
                None => c
                    .elements()
                    .iter()
                    .find(|e| e.operator_accessible && e.barcode.is_none())
                    .map(|e| e.address)
                    .ok_or_else(|| ApiError::conflict("no free import/export element"))?,
            };
            c.operator_insert(to, barcode, ctx).map_err(operator_error)
        })
    }

    /// The operator takes the cartridge out of element `from`; it goes to the vault.
    pub fn export(&self, name: &str, from: u16) -> ApiResult<String> {
        let lib = self.library(name)?;
        let _catalog = self.cartridges.lock_catalog();
        let nexus = api_nexus();
        lib.changer()
            .with_context(&nexus, |c, ctx| c.operator_remove(from, ctx))
            .map_err(operator_error)
    }

    /// Runs `act` with the cartridge's place held: under the catalog lock (no cartridge enters
    /// or leaves a library) and, when it is in a library, that library's changer lock (no move
    /// loads or unloads it meanwhile). `act` must not take a changer lock itself.
    pub fn holding_place<T>(
        &self,
        barcode: &str,
        act: impl FnOnce(Option<&Place>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let _catalog = self.cartridges.lock_catalog();
        let Some(place) = self.locations().remove(barcode) else {
            return act(None);
        };
        let lib = self.library(&place.library)?;
        lib.changer().with_personality(|c| {
            // Inside the changer's lock, where it is now (a move may have run since).
            let now = c
                .elements()
                .into_iter()
                .find(|e| e.barcode.as_deref() == Some(barcode))
                .map(|e| Place {
                    library: place.library.clone(),
                    kind: kind_name(e.element.kind),
                    address: e.address,
                });
            act(now.as_ref())
        })
    }

    /// Where every cartridge inside a library is.
    pub fn locations(&self) -> HashMap<String, Place> {
        let mut map = HashMap::new();
        for lib in &self.libraries {
            for e in lib.changer().with_personality(|c| c.elements()) {
                if let Some(b) = e.barcode {
                    map.insert(
                        b,
                        Place {
                            library: lib.spec().name.clone(),
                            kind: kind_name(e.element.kind),
                            address: e.address,
                        },
                    );
                }
            }
        }
        map
    }
}

/// Where a cartridge is inside a library.
#[derive(Clone, Debug)]
pub struct Place {
    pub library: String,
    pub kind: &'static str,
    pub address: u16,
}
