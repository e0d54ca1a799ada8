//! The link between a data transfer element and its tape drive. The changer never sees the
//! drive's type: the library composition implements [`DriveBay`] around a reel-ssc drive.

use reel_scsi::{Asc, ItNexus, Sense, SenseKey};
use thiserror::Error;

/// What identifies a drive (DVCID, SMC-3 §6.10.4): its INQUIRY strings and VPD 80h serial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriveIdentification {
    pub vendor: String,
    pub product: String,
    pub serial: String,
}

/// Why a drive refused a load or an unload.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BayError {
    /// The drive's host prevents medium removal (PREVENT ALLOW MEDIUM REMOVAL on the drive).
    #[error("medium removal prevented by the drive")]
    RemovalPrevented,
    /// The drive cannot use this cartridge (e.g. an LTO-5 cartridge in an LTO-9 drive).
    #[error("incompatible medium")]
    IncompatibleMedium,
    /// The drive is busy (e.g. still unloading) and cannot take the request now.
    #[error("drive not ready")]
    NotReady,
    /// Anything else: the cartridge could not be stored or opened, the drive failed.
    #[error("drive failure: {0}")]
    DriveFailure(String),
}

impl BayError {
    /// The sense data a MOVE MEDIUM or EXCHANGE MEDIUM that hit this error returns.
    pub fn sense(&self) -> Sense {
        match self {
            // SMC-3 §6.x MOVE MEDIUM: the drive is locked by its own PREVENT.
            Self::RemovalPrevented => Sense::illegal_request(Asc::MEDIUM_REMOVAL_PREVENTED),
            Self::IncompatibleMedium => Sense::illegal_request(Asc::INCOMPATIBLE_MEDIUM_INSTALLED),
            Self::NotReady => Sense::new(
                SenseKey::NOT_READY,
                Asc::LOGICAL_UNIT_IS_IN_PROCESS_OF_BECOMING_READY,
            ),
            Self::DriveFailure(_) => {
                Sense::new(SenseKey::HARDWARE_ERROR, Asc::INTERNAL_TARGET_FAILURE)
            }
        }
    }
}

/// One data transfer element's tape drive.
///
/// `load` and `unload` are called while the changer executes a command, with the changer's
/// personality lock held: an implementation may lock its drive, but must never call back into
/// the changer (lock order: changer, then drive). A drive that is loaded raises its own unit
/// attention (28h/00h) to its nexuses.
pub trait DriveBay: Send + Sync {
    /// The drive's INQUIRY vendor and product and its VPD 80h serial number (DVCID).
    fn identification(&self) -> DriveIdentification;

    /// Puts the cartridge `barcode` into the drive; on success it is loaded (or loading) and
    /// the drive raises its own unit attention.
    fn load(&self, barcode: &str, nexus: &ItNexus) -> Result<(), BayError>;

    /// Takes the cartridge out of the drive (unloading it first if needed) and returns its
    /// barcode.
    fn unload(&self, nexus: &ItNexus) -> Result<String, BayError>;

    /// An abnormal state to report in the element descriptor (EXCEPT = 1 with this ASC/ASCQ),
    /// e.g. a failed drive. Default: none.
    fn exception(&self) -> Option<Asc> {
        None
    }
}
