//! The drive's errors toward its owner ([`InsertError`], [`RemoveError`]) and the one place
//! where tape conditions become sense data (SSC-4 §4.2 and the sense tables of SPC-4 §4.5.6).

use reel_media::{MamError, MediaError, MediaType};
use reel_scsi::{Asc, Sense, SenseKey};

/// Why a cartridge was handed back by [`crate::TapeDrive::insert`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InsertError {
    /// A cartridge is already in the drive (the changer reports MEDIUM DESTINATION ELEMENT
    /// FULL).
    #[error("the drive already holds a cartridge")]
    Occupied,
    /// The drive cannot read this generation (LTO compatibility rules); a real drive rejects
    /// and ejects it (the changer reports INCOMPATIBLE MEDIUM INSTALLED).
    #[error("{media} cartridges cannot be read by this drive")]
    Incompatible { media: MediaType },
    /// The cartridge model refused to load.
    #[error("the cartridge failed to load: {0}")]
    Load(String),
}

/// Why [`crate::TapeDrive::remove`] kept the cartridge.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// No cartridge in the drive (MEDIUM SOURCE ELEMENT EMPTY).
    #[error("the drive is empty")]
    Empty,
    /// An initiator holds PREVENT MEDIUM REMOVAL (the changer reports MEDIUM REMOVAL
    /// PREVENTED, 53h/02h).
    #[error("medium removal is prevented")]
    Prevented,
    /// Synchronising the cartridge before unloading failed; it stays in the drive.
    #[error("the cartridge could not be synchronised: {0}")]
    Unload(String),
    /// The owner's saver failed; the cartridge stays in the drive (unthreaded).
    #[error("the cartridge state could not be saved: {0}")]
    Save(String),
}

/// WORM MEDIUM - OVERWRITE ATTEMPTED (SPC-4 ASC 30h/0Ch).
pub(crate) const WORM_OVERWRITE: Asc = Asc::new(0x30, 0x0C);
/// CANNOT WRITE MEDIUM - INCOMPATIBLE FORMAT (SPC-4 ASC 30h/05h).
pub(crate) const CANNOT_WRITE_INCOMPATIBLE: Asc = Asc::new(0x30, 0x05);
/// AUXILIARY MEMORY OUT OF SPACE (SPC-4 ASC 55h/06h).
pub(crate) const MAM_OUT_OF_SPACE: Asc = Asc::new(0x55, 0x06);

/// What a failing cartridge operation was doing: a store failure is reported as the
/// matching MEDIUM ERROR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Write,
    Position,
}

pub(crate) fn not_present() -> Sense {
    Sense::new(SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT)
}

/// NOT READY, INITIALIZING COMMAND REQUIRED: a cartridge is in the drive but not threaded
/// (after UNLOAD), a LOAD makes it ready.
pub(crate) fn not_threaded() -> Sense {
    Sense::new(
        SenseKey::NOT_READY,
        Asc::LOGICAL_UNIT_NOT_READY_INITIALIZING_COMMAND_REQUIRED,
    )
}

pub(crate) fn write_protected() -> Sense {
    Sense::new(SenseKey::DATA_PROTECT, Asc::WRITE_PROTECTED)
}

/// A cartridge of a generation the drive reads but does not write.
pub(crate) fn cannot_write_generation() -> Sense {
    Sense::new(SenseKey::DATA_PROTECT, CANNOT_WRITE_INCOMPATIBLE)
}

/// NO SENSE with FILEMARK, FILEMARK DETECTED and the residue (SSC-4 READ(6), SPACE(6)).
pub(crate) fn filemark(residue: i64) -> Sense {
    Sense::new(SenseKey::NO_SENSE, Asc::FILEMARK_DETECTED)
        .with_filemark()
        .with_residue(residue)
}

/// BLANK CHECK, END-OF-DATA DETECTED with the residue.
pub(crate) fn end_of_data(residue: i64) -> Sense {
    Sense::new(SenseKey::BLANK_CHECK, Asc::END_OF_DATA_DETECTED).with_residue(residue)
}

/// NO SENSE with EOM, BEGINNING-OF-PARTITION/MEDIUM DETECTED and the residue (spacing
/// backward into BOP).
pub(crate) fn beginning_of_partition(residue: i64) -> Sense {
    Sense::new(
        SenseKey::NO_SENSE,
        Asc::BEGINNING_OF_PARTITION_MEDIUM_DETECTED,
    )
    .with_eom()
    .with_residue(residue)
}

/// A write that completed beyond early warning (SSC-4 §4.2.5 early warning): NO SENSE, EOM,
/// END-OF-PARTITION/MEDIUM DETECTED, residue (0 when everything was written).
pub(crate) fn early_warning(residue: i64) -> Sense {
    Sense::new(SenseKey::NO_SENSE, Asc::END_OF_PARTITION_MEDIUM_DETECTED)
        .with_eom()
        .with_residue(residue)
}

/// A write that ended past the programmable early warning (SSC-4 §4.2.5, PEWS of mode page
/// 10h/01h): NO SENSE, PROGRAMMABLE EARLY WARNING DETECTED, the write done; reported once.
pub(crate) fn programmable_early_warning() -> Sense {
    Sense::new(SenseKey::NO_SENSE, Asc::PROGRAMMABLE_EARLY_WARNING_DETECTED)
}

/// A write that did not fit before the end of the partition: VOLUME OVERFLOW, EOM,
/// END-OF-PARTITION/MEDIUM DETECTED, residue = what was not written.
pub(crate) fn volume_overflow(residue: i64) -> Sense {
    Sense::new(
        SenseKey::VOLUME_OVERFLOW,
        Asc::END_OF_PARTITION_MEDIUM_DETECTED,
    )
    .with_eom()
    .with_residue(residue)
}

pub(crate) fn internal_failure() -> Sense {
    Sense::new(SenseKey::HARDWARE_ERROR, Asc::INTERNAL_TARGET_FAILURE)
}

/// The sense for a cartridge model error. Residue-carrying conditions (EOD, end of medium)
/// get their INFORMATION from the caller; invalid partitions point at `partition_byte` of
/// the CDB.
pub(crate) fn media<E>(error: &MediaError<E>, op: Op, partition_byte: u16) -> Sense {
    match error {
        MediaError::Store(_) => match op {
            Op::Read => Sense::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR),
            // A full or failing store: the write did not happen (documented in ssc.md).
            Op::Write => Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR),
            Op::Position => Sense::new(SenseKey::MEDIUM_ERROR, Asc::SEQUENTIAL_POSITIONING_ERROR),
        },
        MediaError::NotLoaded => not_threaded(),
        MediaError::WriteProtected => write_protected(),
        MediaError::WormOverwrite => Sense::new(SenseKey::DATA_PROTECT, WORM_OVERWRITE),
        MediaError::EndOfMedium { .. } => volume_overflow(0),
        MediaError::EndOfData => Sense::new(SenseKey::BLANK_CHECK, Asc::END_OF_DATA_DETECTED),
        MediaError::InvalidPartition { .. } => Sense::invalid_field_in_cdb(partition_byte, None),
        MediaError::RecordTooLarge { .. } | MediaError::TooManyFilemarks { .. } => {
            Sense::invalid_field_in_cdb(2, None)
        }
        MediaError::Layout(_) => Sense::illegal_request(Asc::INVALID_FIELD_IN_PARAMETER_LIST),
        MediaError::Mam(MamError::Full { .. }) => Sense::illegal_request(MAM_OUT_OF_SPACE),
        MediaError::Mam(_) => Sense::illegal_request(Asc::INVALID_FIELD_IN_PARAMETER_LIST),
        _ => internal_failure(),
    }
}
