//! The live monitor (rates once a second), the store's figures, iSCSI sessions and the
//! audit log's query.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DriveRate {
    pub library: String,
    pub index: u16,
    pub barcode: Option<String>,
    pub state: String,
    pub activity: String,
    pub read_bps: f64,
    pub write_bps: f64,
    pub read_iops: f64,
    pub write_iops: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InitiatorRate {
    pub initiator: String,
    pub target: Option<String>,
    pub read_bps: f64,
    pub write_bps: f64,
    pub commands_per_s: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    pub read_bps: f64,
    pub write_bps: f64,
}

/// The store's figures (`GET /api/v1/stats`). Two reductions, because the packs are not all a
/// store takes: "store" is logical bytes over pack bytes, "on disk" is logical bytes over
/// everything under the data directory (packs, catalog, audit log…), the figure `du -s DATA`
/// gives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoreView {
    /// Bytes the hosts wrote and the store keeps (all cartridges).
    pub logical_bytes: u64,
    /// Distinct chunk bytes before compression.
    pub unique_bytes: u64,
    /// Bytes of pack objects on the back end.
    pub stored_bytes: u64,
    /// Allocated bytes of everything under the data directory (as `du` counts them).
    pub on_disk_bytes: u64,
    /// Allocated bytes of the catalog (the data directory's `catalog/`), part of
    /// `on_disk_bytes`: what the dedup index and the record maps cost (servers before this
    /// field: 0).
    #[serde(default)]
    pub catalog_bytes: u64,
    pub chunks: u64,
    pub packs: u64,
    pub dedup_ratio: f64,
    pub compression_ratio: f64,
    /// logical_bytes / stored_bytes: the packs alone.
    pub reduction_ratio: f64,
    /// logical_bytes / on_disk_bytes: what the data directory really takes.
    pub reduction_ratio_on_disk: f64,
    /// File system of the data directory.
    pub disk_total: u64,
    pub disk_free: u64,
    /// The bucket and its upload queue, when the store is on object storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<BucketView>,
}

/// A store on object storage: where, how durable, and what is not in the bucket yet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BucketView {
    /// `s3://bucket/prefix at endpoint`.
    pub location: String,
    /// When a synchronising point is acknowledged: `local` (in the cache) or `bucket`.
    pub durability: String,
    /// Bytes accepted but not yet in the bucket, and the objects (puts and deletes) queued.
    pub pending_bytes: u64,
    pub pending_objects: u64,
    /// Age of the oldest queued object, seconds.
    pub oldest_pending_seconds: Option<f64>,
    pub uploaded_bytes: u64,
    pub uploaded_objects: u64,
    pub upload_retries: u64,
    /// Puts that waited for uploads because the cache was full.
    pub blocked_puts: u64,
    /// Recently read data kept in the cache, and the cache's size limit.
    pub cached_bytes: u64,
    pub cache_capacity: u64,
    /// Memory the cache holds: copies of packs waiting to upload and blocks just fetched
    /// (bounded by `[store.cache] upload_memory` and `read_memory`).
    #[serde(default)]
    pub memory_bytes: u64,
    /// Requests made to the bucket, and bytes each way.
    pub requests: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Why uploads stopped for good (another node wrote this store's journal), if they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Bytes not yet in the bucket per cartridge (only cartridges with some).
    pub by_cartridge: Vec<PendingCartridge>,
    /// The catalog in the bucket: the newest checkpoint's journal sequence (0: none) and
    /// size, and the journal objects after it (what a recovery replays on top of it).
    #[serde(default)]
    pub catalog_checkpoint_seq: u64,
    #[serde(default)]
    pub catalog_checkpoint_bytes: u64,
    #[serde(default)]
    pub catalog_journal_objects: u64,
    #[serde(default)]
    pub catalog_journal_bytes: u64,
}

/// One cartridge's data not yet in the bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PendingCartridge {
    pub barcode: String,
    pub pending_bytes: u64,
    pub oldest_pending_seconds: f64,
}

/// `GET /api/v1/monitor`, and each event of `/api/v1/monitor/stream`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MonitorSample {
    pub time: u64,
    /// CPU used by the reel process, percent of one core.
    pub cpu_percent: f64,
    pub drives: Vec<DriveRate>,
    pub initiators: Vec<InitiatorRate>,
    pub totals: Totals,
    /// Absent when the store's figures could not be read (`store_error` says why).
    pub store: Option<StoreView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
}

/// A logged-in iSCSI session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionView {
    pub initiator: String,
    pub target: Option<String>,
    /// Hex.
    pub isid: String,
    pub tsih: u16,
    pub peer: String,
}

/// `GET /api/v1/events?limit=&before=`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct EventsQuery {
    /// At most this many, newest first (default 100, at most 10000).
    pub limit: Option<usize>,
    /// Only events older than this sequence number: the next page starts before the last
    /// `seq` of the previous one.
    pub before: Option<u64>,
}
