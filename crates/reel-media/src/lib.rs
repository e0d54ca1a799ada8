//! # reel-media — the pure tape cartridge model
//!
//! This crate models an LTO tape cartridge with SSC-4/SSC-5 sequential-access
//! semantics: partitions of records and filemarks, logical positions,
//! SPACE/LOCATE/READ/WRITE/ERASE/FORMAT behaviour, early warning and end of
//! medium, WORM and write protection, and the cartridge memory (MAM).
//!
//! It performs **no I/O**: no SCSI bytes, no async runtime, no network, no
//! clock (time is passed in). Data lives behind the [`PartitionStore`] trait;
//! [`MemoryPartition`] is the in-memory reference implementation, and the
//! chunk store provides a persistent one. Operations return typed outcomes
//! ([`WriteOutcome`], [`ReadOutcome`], [`SpaceOutcome`]) and typed errors
//! ([`MediaError`]) that the SCSI tape layer maps to sense data.
//!
//! The `reel-media-testing` crate offers a conformance test for
//! `PartitionStore` implementations and a reference-model test of the whole
//! cartridge that other crates can run against their own stores.

mod cartridge;
mod error;
mod info;
mod mam;
mod media_type;
mod position;
mod store;
mod time;

pub use cartridge::{Cartridge, MAX_FILEMARKS_PER_WRITE, MAX_RECORD_LEN, MAX_SEALING_OVERHEAD};
pub use error::{LayoutError, MediaError};
pub use info::{CartridgeInfo, Counters, DEFAULT_EARLY_WARNING_PERCENT, DecodeError};
pub use mam::{
    AttributeDef, AttributeFormat, AttributeLength, DeviceAttributeValues, HOST_VENDOR_SPECIFIC,
    MAX_VARIABLE_ATTRIBUTE_LEN, Mam, MamAttribute, MamError, STANDARD_ATTRIBUTES,
    attribute_definition,
};
pub use media_type::{Barcode, BarcodeError, MAX_BARCODE_LEN, MIB, MediaType};
pub use position::{Position, ReadOutcome, SpaceOutcome, WriteOutcome};
pub use store::{
    MemoryPartition, MemoryPartitionError, ObjectKind, PartitionStore, RecordBuf, Unsynced,
};
pub use time::{CivilDateTime, UnixTime};

/// Entry points for fuzz targets.
#[doc(hidden)]
pub mod fuzzing {
    use crate::CartridgeInfo;

    /// Decode arbitrary bytes as [`CartridgeInfo`]; whatever decodes must
    /// re-encode to the same bytes. Must never panic except on that
    /// round-trip invariant.
    pub fn fuzz_decode_cartridge_info(data: &[u8]) {
        if let Ok(info) = CartridgeInfo::from_bytes(data) {
            let again = info.to_bytes();
            assert_eq!(again, data, "accepted input must re-encode identically");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn valid_encoding() -> Vec<u8> {
        CartridgeInfo::new(
            Barcode::new("FUZ001L8").unwrap(),
            MediaType::Lto8,
            UnixTime(0),
        )
        .to_bytes()
    }

    #[test]
    fn fuzz_entry_accepts_valid_and_garbage() {
        fuzzing::fuzz_decode_cartridge_info(&valid_encoding());
        fuzzing::fuzz_decode_cartridge_info(&[]);
        fuzzing::fuzz_decode_cartridge_info(b"RLCI\x01");
    }

    proptest! {
        #[test]
        fn fuzz_entry_never_panics_on_mutations(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8), cut in any::<prop::sample::Index>()) {
            let mut b = valid_encoding();
            for (i, v) in edits {
                let i = i.index(b.len());
                b[i] = v;
            }
            let keep = cut.index(b.len() + 1);
            b.truncate(keep);
            fuzzing::fuzz_decode_cartridge_info(&b);
        }
    }
}
