//! # reel-ssc — the SSC-4 tape drive personality
//!
//! [`TapeDrive`] is a [`reel_scsi::Personality`]: put it in a [`reel_scsi::ScsiDevice`] and
//! the SPC core answers the commands every device shares while the drive answers the
//! sequential-access ones (SSC-4) over the [`reel_media::Cartridge`] inserted in it. Drive
//! identities are exact LTO-5…LTO-9 INQUIRY strings of IBM, HPE and Quantum drives
//! ([`DriveModel`]), with the LTO rules of which generations each drive reads and writes.
//!
//! The code is split by concern: `drive.rs` (state, public API, the `Personality`
//! implementation and command routing), `io.rs` (data path and positioning), `format.rs`
//! (partitioning), `pages.rs` (mode and log pages), `attributes.rs` (cartridge memory),
//! `info.rs` (VPD, densities, diagnostics, supported opcodes) and `errors.rs` (the one place
//! where tape conditions become sense data). Commands the drive does not implement, with
//! what initiators get instead: `docs/design/ssc.md`.
//!
//! **Invariant:** no input panics; every CHECK CONDITION carries sense data that
//! [`reel_scsi::parse_sense`] reads (checked by the property tests and
//! [`fuzzing::fuzz_drive`]).

mod attributes;
mod drive;
mod encryption;
mod errors;
mod format;
mod info;
mod io;
mod model;
mod pages;
mod physical;

pub use drive::{
    Activity, DriveState, DriveStats, FIXED_TRANSFER_FACTOR, MAX_TRANSFER_LENGTH, PartitionFactory,
    Saver, TapeDrive,
};
pub use errors::{InsertError, RemoveError};
pub use model::{DriveModel, Family, FormFactor};

/// Entry points for fuzz targets.
#[doc(hidden)]
pub mod fuzzing {
    use std::sync::Arc;

    use reel_media::{Barcode, Cartridge, CartridgeInfo, MediaType, MemoryPartition, UnixTime};
    use reel_scsi::{
        Bytes, ItNexus, LogicalUnit, Request, ScsiDevice, Status, TaskAttribute, parse_sense,
    };

    use crate::{DriveModel, TapeDrive};

    /// Feeds arbitrary CDB sequences to an LTO-9 drive holding a small memory cartridge
    /// (1 MiB, two partitions possible). Each command is `selector, cdb length, data-out
    /// length, cdb, data-out`: selector bit 0 picks one of two nexuses, bit 1 asks for an
    /// insert/remove cycle first. Panics only if an invariant breaks: CHECK CONDITION always
    /// carries parseable sense, other statuses none.
    pub fn fuzz_drive(data: &[u8]) {
        let Some(model) = DriveModel::by_name("ibm-td9") else {
            return;
        };
        let drive: TapeDrive<MemoryPartition> = TapeDrive::new(model, "FUZZ000001")
            .with_partition_factory(Box::new(|_, _| Ok(MemoryPartition::new())));
        let device = Arc::new(ScsiDevice::new(drive));
        let nexuses = [
            ItNexus::new("iqn.fuzz-a,i,0x000000000001", 1),
            ItNexus::new("iqn.fuzz-b,i,0x000000000002", 1),
        ];
        let mut cartridge = Some(small_cartridge());
        let mut rest = data;
        while let [selector, cdb_len, out_len, tail @ ..] = rest {
            let nexus = &nexuses[usize::from(selector & 1)];
            if selector & 2 != 0 {
                device.with_context(nexus, |drive, ctx| match cartridge.take() {
                    Some(c) => {
                        if let Err((c, _)) = drive.insert(c, ctx) {
                            cartridge = Some(c);
                        }
                    }
                    None => cartridge = drive.remove(ctx).ok(),
                });
            }
            let cdb_len = usize::from(*cdb_len).min(tail.len());
            let (cdb, tail) = tail.split_at(cdb_len);
            let out_len = usize::from(*out_len).min(tail.len());
            let (data_out, tail) = tail.split_at(out_len);
            rest = tail;
            let response = device.execute(Request {
                nexus,
                cdb,
                data_out: Bytes::copy_from_slice(data_out),
                data_in_len: 1 << 16,
                attribute: TaskAttribute::Simple,
            });
            match response.status {
                Status::CheckCondition => {
                    let sense = response.sense.expect("CHECK CONDITION carries sense");
                    parse_sense(&sense).expect("sense parses");
                }
                _ => assert!(response.sense.is_none(), "sense only with CHECK CONDITION"),
            }
        }
    }

    fn small_cartridge() -> Cartridge<MemoryPartition> {
        let info = Barcode::new("FUZ001L9")
            .ok()
            .map(|b| CartridgeInfo::new(b, MediaType::Lto9, UnixTime(0)))
            .and_then(|i| i.with_capacity(1 << 20).ok());
        match info.and_then(|i| Cartridge::new(i, vec![MemoryPartition::new()]).ok()) {
            Some(c) => c,
            // The literal barcode, capacity and one store are valid by construction.
            None => unreachable!("a valid test cartridge"),
        }
    }
}
