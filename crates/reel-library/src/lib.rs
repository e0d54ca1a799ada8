//! Virtual cartridges persisted in reel's chunk store.
//!
//! [`ChunkPartition`] implements the tape model's [`reel_media::PartitionStore`] on a chunk-store
//! stream: record bytes go into the stream (each record ending on a chunk boundary where that
//! helps dedup), and the partition's *record map* — runs of equal-sized records and of
//! filemarks — lives in the stream's sidecar, so bytes and map always commit together.
//! [`Cartridges`] keeps each cartridge's identity and cartridge memory as a store record.

mod cartridges;
mod partition;
mod record_map;

pub use cartridges::{CartridgeError, Cartridges, stream_of};
pub use partition::ChunkPartition;
