//! reel's deduplicating, compressing chunk store.
//!
//! Callers write **streams**: append-only byte sequences with record boundaries, which can be
//! truncated and read at any offset. The store cuts each stream into content-defined chunks
//! ([`chunker`]), names each by its BLAKE3 hash, keeps one copy of each chunk across all streams,
//! compresses consecutive new chunks together in blobs (raw when compression does not pay) and
//! appends the blobs to large pack objects written sequentially, one open pack per stream so a
//! stream's chunks stay together. It knows nothing of tape: records, filemarks and cartridges
//! belong to the caller, which can keep small per-stream metadata in a stream's *sidecar* that
//! commits atomically with the stream's bytes.
//!
//! Storage: pack objects go through [`reel_backend::Backend`]; the catalog (chunk index, the
//! chunk references of every stream, sidecars) is a local redb database. See
//! `docs/design/chunk-store.md` for the format and the durability contract.
//!
//! # Concurrency
//! | operation          | may run with                                   | because |
//! |--------------------|------------------------------------------------|---------|
//! | `Stream::append`   | other streams' appends, reads, `sync`          | per-stream state; shared index is locked briefly |
//! | `Stream::flush`    | anything but `sync`'s critical section         | `sync` holds the commit lock so nothing new is referenced while packs are made durable |
//! | `ChunkStore::reclaim` | nothing: appends, flushes and reads wait  | it holds the ingest lock exclusively: no chunk is referenced (or moved under a reader) while it decides what is dead |
//! | `ChunkStore::scrub`   | everything                                  | read-only, after briefly holding the commit lock to store open packs |
//! | `ChunkStore::usage`   | everything                                  | read-only, one catalog snapshot |

mod catalog;
mod catalog_file;
mod checkpoint;
mod chunk_index;
pub mod chunker;
mod foreign;
pub mod format;
mod hasher;
mod index;
mod journal;
pub mod multihash;
mod pack_names;
mod packer;
mod parts;
mod reclaim;
mod scrub;
mod space;
mod spans;
mod store;
mod stream;
#[cfg(test)]
mod test_support;
mod usage;
mod workers;

pub use catalog_file::Compacted as CatalogCompaction;
pub use catalog_file::NotCompacted as CatalogNotCompacted;
pub use catalog_file::STOP_COMPACT_MAX_FILE_BYTES as CATALOG_STOP_COMPACT_MAX_BYTES;
pub use checkpoint::fuzz_manifest as checkpoint_fuzzing;
pub use chunker::ChunkerParams;
pub use foreign::{ForeignStores, ImportReport};
pub use format::{ChunkId, FormatError};
pub use index::FILTER_BITS_PER_CHUNK_MAX;
#[doc(hidden)]
pub use journal::fuzzing as journal_fuzzing;
pub use reclaim::ReclaimReport;
pub use scrub::{Damage, ScrubReport};
pub use space::{CatalogSpace, TableSpace};
pub use store::{
    CheckpointReport, ChunkStore, CompactionOutcome, DurableAt, JournalStatus,
    READ_CACHE_STREAMS_MAX, RecoveryProgress, StoreConfig, StoreStats,
};
pub use stream::{Stream, StreamId};
pub use usage::{EXACT_CHUNKS, Exclusive, ExclusiveUsage, StreamUsage};

use reel_backend::BackendError;

/// Errors from the chunk store, by meaning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The back end is full. Data accepted before the error is kept in memory and retried by
    /// the next `sync`; nothing already stored is affected.
    #[error("storage full: {0}")]
    NoSpace(String),
    /// A back-end operation failed; the operation can be retried.
    #[error("storage I/O error: {0}")]
    Backend(#[source] BackendError),
    /// The catalog database failed. The store refuses further work until reopened.
    #[error("catalog error: {0}")]
    Catalog(String),
    /// Stored data does not match its hash or cannot be decoded: it is never returned.
    #[error("damaged data: {0}")]
    Corrupt(String),
    /// The caller asked for something impossible (offset past the end, a bad config).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The stream is open through another handle (one handle per stream at a time).
    #[error("stream {0} is in use")]
    InUse(u64),
    /// An earlier fatal error stopped the store; reopen it.
    #[error("store stopped after an earlier error: {0}")]
    Stopped(String),
}

impl StoreError {
    pub(crate) fn from_backend(e: BackendError) -> StoreError {
        match e {
            BackendError::NoSpace(key) => StoreError::NoSpace(format!("while storing {key}")),
            other => StoreError::Backend(other),
        }
    }
    /// Whether retrying later may succeed (full disk, back-end I/O).
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::NoSpace(_) | StoreError::Backend(_))
    }
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Catalog(e.to_string())
            }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError,
    redb::CursorError
);

impl From<FormatError> for StoreError {
    fn from(e: FormatError) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
