//! # reel-volume — tape volumes persisted in reel's chunk store
//!
//! The floor between the tape model (reel-media) and the chunk store (reel-chunkstore):
//!
//! - [`ChunkPartition`] implements the tape model's [`reel_media::PartitionStore`] on a
//!   chunk-store stream: record bytes go into the stream (each record ending on a chunk
//!   boundary where that helps dedup), and the partition's *record map* — runs of equal-sized
//!   records and of filemarks — lives in the stream's sidecar, so bytes and map always commit
//!   together.
//! - [`Cartridges`] is the cartridge catalog: each cartridge's identity and cartridge memory
//!   as a store record; create, list, mount, save and delete by barcode.
//! - [`BarcodeFilter`] names a pool of cartridges by barcode prefixes and ranges.
//!
//! **Architecture invariant:** knows volumes, not devices: no SCSI, no drives or changers.
//! The library composition (reel-library) mounts these volumes in drives.

pub mod archive;
mod barcodes;
mod cartridges;
mod partition;
mod record_map;
pub mod shared_vault;

pub use archive::{Archive, ArchiveError, ArchiveState};
pub use barcodes::{BarcodeFilter, BarcodeRangeError};
pub use cartridges::{CartridgeError, Cartridges, cartridge_of, stream_of};
pub use partition::ChunkPartition;
pub use shared_vault::{ShareError, SharedVault};

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

    /// Decodes an archive image object as a piece and as a manifest; a decoded manifest must
    /// re-encode to the same bytes.
    pub fn decode_archive_image(data: &[u8]) {
        let _ = crate::archive::image::decode_piece(data);
        if let Ok(m) = crate::archive::image::Manifest::decode(data) {
            assert_eq!(
                m.encode(),
                data,
                "a decoded manifest re-encodes to its bytes"
            );
        }
    }
}
