//! Cartridges: the list, the detail with their space in the store, and the requests that
//! create and change them.

use serde::{Deserialize, Serialize};

/// Where a cartridge is: an element of a library, or the vault.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocationView {
    /// The library's name, absent in the vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// slot, drive or import_export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<u16>,
    /// True when the cartridge is in no library.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vault: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CartridgeView {
    pub barcode: String,
    pub media: String,
    pub worm: bool,
    pub write_protected: bool,
    /// Bytes, all partitions.
    pub capacity: u64,
    /// Host bytes written over the cartridge's life (as of its last synchronising point).
    pub written: u64,
    pub last_written: Option<u64>,
    pub location: LocationView,
    /// `available` (its data in the store; importable from the vault), `archiving`,
    /// `archived` (its data only in the archive location) or `restoring`
    /// (docs/design/archive.md). Only an available cartridge can be imported.
    #[serde(default = "available")]
    pub archive_state: String,
}

fn available() -> String {
    "available".into()
}

/// The archive image of an archived (or restoring) cartridge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArchiveView {
    /// Which image (hex in its object names).
    pub generation: u64,
    /// Host bytes of its records.
    pub data_bytes: u64,
    /// Bytes of the image's objects in the archive location (0 while restoring).
    pub image_bytes: u64,
    /// Unix seconds (absent while restoring).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CountersView {
    pub bytes_written_total: u64,
    pub bytes_read_total: u64,
    pub records_written: u64,
    pub records_read: u64,
    pub filemarks_written: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MamView {
    pub manufacturer: String,
    pub serial: String,
    pub manufactured: u64,
    pub used_space: u64,
    pub space_remaining: u64,
}

/// What a cartridge takes in the store (docs/design/api.md defines each number). Counts the
/// data as of each partition's last flush: a drive flushes at every synchronising point, and
/// in between once the rows it holds reach 64 MiB (about 10 GiB of tapewrite data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageView {
    /// Host bytes the cartridge holds now, all partitions (overwritten data is gone).
    pub logical_bytes: u64,
    /// Raw bytes of the distinct chunks those bytes are made of.
    pub unique_bytes: u64,
    /// Estimated bytes on disk: each chunk's share of its compressed blob.
    pub stored_bytes: u64,
    /// Referenced bytes (each chunk reference counted, = logical_bytes) / unique_bytes.
    pub dedup_ratio: f64,
    /// unique_bytes / stored_bytes.
    pub compression_ratio: f64,
    /// logical_bytes / stored_bytes (the packs alone).
    pub reduction_ratio: f64,
    /// Its share of everything under the data directory (stored_bytes scaled by the store's
    /// on-disk bytes per pack byte), estimated; absent when the store's figures are unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_disk_bytes: Option<u64>,
    /// logical_bytes / on_disk_bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduction_ratio_on_disk: Option<f64>,
    /// Of unique_bytes, what no other cartridge references (only with `?exclusive=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_unique_bytes: Option<u64>,
    /// Of stored_bytes, what no other cartridge references: about what erasing or deleting it
    /// and then reclaiming frees (only with `?exclusive=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_stored_bytes: Option<u64>,
    /// False when the chunk sums are estimated from a sample (more than about 2 GiB unique).
    pub exact: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CartridgeDetail {
    #[serde(flatten)]
    pub cartridge: CartridgeView,
    pub load_count: u64,
    /// Partition sizes in bytes.
    pub partitions: Vec<u64>,
    pub early_warning_percent: u8,
    pub mam: MamView,
    pub counters: CountersView,
    /// Space in the store; absent if it could not be read.
    pub usage: Option<UsageView>,
    /// The archive image, when the cartridge is archived or restoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveView>,
}

/// `GET /api/v1/cartridges/{barcode}?exclusive=`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ShowQuery {
    /// Also count what no other cartridge references (reads the whole catalog).
    pub exclusive: Option<bool>,
}

/// `GET /api/v1/cartridges?search=&location=`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ListQuery {
    /// Substring of the barcode, case-insensitive.
    pub search: Option<String>,
    /// `vault` or `library`.
    pub location: Option<String>,
}

/// `POST /api/v1/cartridges`: cartridges in bulk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateRequest {
    /// 1 to 3 characters A-Z 0-9.
    pub prefix: String,
    pub first: u32,
    pub count: u32,
    /// lto5..lto9 or lto5-worm..lto9-worm.
    pub media: String,
    /// Bytes (smaller than native, for tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
    #[serde(default)]
    pub write_protected: bool,
    /// Put them into this library's free storage slots instead of the vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
}

impl CreateRequest {
    /// `count` cartridges of `media` numbered from `first`, into the vault.
    pub fn new(prefix: &str, first: u32, count: u32, media: &str) -> CreateRequest {
        CreateRequest {
            prefix: prefix.to_string(),
            first,
            count,
            media: media.to_string(),
            capacity: None,
            write_protected: false,
            library: None,
        }
    }
}

/// `PATCH /api/v1/cartridges/{barcode}`: the write-protect switch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateRequest {
    pub write_protected: bool,
}

/// `GET /api/v1/shared-vault`: a cartridge one store shared for another store on the same
/// bucket to adopt without copying its data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedCartridge {
    pub barcode: String,
    /// Which share of it (hex in its object names).
    pub generation: u64,
    /// The store that shared it (its bucket prefix) and the node that did.
    pub from_store: String,
    pub from_node: String,
    /// Unix seconds.
    pub shared_at: u64,
    /// Host bytes of its records.
    pub data_bytes: u64,
    /// `waiting` (for an adopter), `adopted`, or `released` (the adopter no longer reads the
    /// sharing store's data; that store deletes its copy at its next reclaim).
    pub state: String,
    /// The store and node that adopted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_by_store: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_by_node: Option<String>,
}
