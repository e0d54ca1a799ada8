//! Virtual cartridges persisted in reel's chunk store.
//!
//! [`ChunkPartition`] implements the tape model's [`reel_media::PartitionStore`] on a chunk-store
//! stream: record bytes go into the stream (each record ending on a chunk boundary where that
//! helps dedup), and the partition's *record map* — runs of equal-sized records and of
//! filemarks — lives in the stream's sidecar, so bytes and map always commit together.
//! [`Cartridges`] keeps each cartridge's identity and cartridge memory as a store record.
//! [`VirtualLibrary`] composes a changer, drives and slots over them (the SCSI devices a
//! target serves).

mod barcodes;
mod cartridges;
mod partition;
mod record_map;
mod vtl;

pub use barcodes::{BarcodeFilter, BarcodeRangeError};
pub use cartridges::{CartridgeError, Cartridges, stream_of};
pub use partition::ChunkPartition;
pub use vtl::{Bay, Drive, DriveStatus, LibraryError, LibrarySpec, VirtualLibrary};

/// Fuzz entry points: each must return without panicking on any input.
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes a record-map page; whatever decodes must re-encode to the same runs.
    pub fn decode_record_map_page(data: &[u8]) {
        let mut runs = Vec::new();
        if crate::record_map::decode_page(data, &mut runs).is_ok() {
            let mut again = Vec::new();
            crate::record_map::decode_page(&crate::record_map::encode_page(&runs), &mut again)
                .expect("a decoded page re-encodes");
            assert_eq!(again, runs);
        }
    }
}
