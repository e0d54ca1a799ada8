//! Libraries, their elements and drives, and the operator's actions on them.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChangerView {
    pub model: String,
    pub vendor: String,
    pub product: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MagazinesView {
    pub count: u16,
    pub slots_each: u16,
}

/// What the summary and the detail of a library both say. (Its own type because the two
/// differ in `drives`: a count in the summary, the list in the detail.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LibraryFacts {
    /// The library's iSCSI target name.
    pub name: String,
    pub changer: ChangerView,
    pub drive_model: String,
    pub slots: u16,
    pub import_export: u16,
    pub magazines: Option<MagazinesView>,
    /// Cartridges inside the library (slots, drives, import/export).
    pub cartridges: usize,
    /// The physical library this one is a logical partition of, if it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<String>,
    /// The cartridges it takes into free slots when it opens: "any", or its pool's barcode
    /// prefixes (`ABC*`) and ranges (`ABC000L9-ABC099L9`).
    pub pool: String,
}

/// `GET /api/v1/libraries`: one library.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LibraryView {
    #[serde(flatten)]
    pub library: LibraryFacts,
    /// How many drives.
    pub drives: u16,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExceptionView {
    pub asc: u8,
    pub ascq: u8,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ElementView {
    pub address: u16,
    /// transport, slot, import_export or drive.
    pub kind: String,
    pub index: u16,
    pub barcode: Option<String>,
    /// Address the cartridge was last moved from.
    pub source: Option<u16>,
    pub operator_accessible: bool,
    pub exception: Option<ExceptionView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DriveStatsView {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_commands: u64,
    pub write_commands: u64,
    pub filemarks_written: u64,
    pub loads: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DriveView {
    pub index: u16,
    pub address: u16,
    pub lun: u16,
    pub serial: String,
    pub vendor: String,
    pub product: String,
    /// empty, loaded or unloaded.
    pub state: String,
    /// idle, reading, writing, positioning, rewinding, erasing or formatting.
    pub activity: String,
    pub barcode: Option<String>,
    pub removal_prevented: bool,
    pub stats: DriveStatsView,
    /// The physical drive model's state when the library emulates physical timing (issue 17;
    /// absent when emulation is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<PhysicalDriveView>,
    /// The physical drive model that matches this drive (the emulated one, or else the LTO
    /// generation and form factor of its identity): its curves are at
    /// `/model/{id}/record-size.svg` and `/model/{id}/compressible.svg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_model: Option<String>,
}

/// What the physical model of an emulated drive is doing (docs/design/drive-model.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PhysicalDriveView {
    /// The modelled drive's catalog id and name (`reel model drives`).
    pub model: String,
    pub model_name: String,
    /// idle, streaming, repositioning, waiting_for_data, loading, unloading, rewinding or
    /// locating.
    pub motion: String,
    /// Tape speed now, native bytes per second (0 when stopped).
    pub tape_speed: f64,
    /// Native bytes in the drive's buffer.
    pub buffer_bytes: u64,
    pub buffer_capacity: u64,
    /// Stops that had to reposition (back-hitches, shoe-shining), of every cause.
    pub back_hitches: u64,
    /// Time spent repositioning, seconds.
    pub repositioning_seconds: f64,
    /// Native bytes written to tape (after the drive's compression).
    pub native_bytes_on_tape: u64,
}

/// `GET /api/v1/libraries/{name}`, and the answer of every action on a library.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LibraryDetail {
    #[serde(flatten)]
    pub library: LibraryFacts,
    pub elements: Vec<ElementView>,
    pub drives: Vec<DriveView>,
}

impl LibraryDetail {
    /// The element of `kind` (transport, slot, import_export, drive) with index `index`.
    pub fn element(&self, kind: &str, index: u16) -> Option<&ElementView> {
        self.elements
            .iter()
            .find(|e| e.kind == kind && e.index == index)
    }
}

/// `POST /api/v1/libraries/{name}/move`: MOVE MEDIUM through the changer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MoveRequest {
    /// Source element address.
    pub from: u16,
    /// Destination element address.
    pub to: u16,
}

/// `POST /api/v1/libraries/{name}/import`: a vaulted cartridge into a mail slot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportRequest {
    pub barcode: String,
    /// An import/export element (or magazine slot); the first free one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u16>,
}

/// `POST /api/v1/libraries/{name}/export`: the operator empties a mail slot into the vault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExportRequest {
    /// The import/export element (or magazine slot) the operator empties.
    pub from: u16,
}
