//! # reel-library — the virtual tape library: a changer and its drives over the volumes
//!
//! [`VirtualLibrary`] composes an SMC changer (reel-smc), SSC tape drives (reel-ssc) and
//! slots over the cartridges of the volume layer (reel-volume's [`reel_volume::Cartridges`]):
//! the SCSI devices one target serves: the library specification ([`LibrarySpec`]), the drive
//! bays that mount and save cartridges ([`Bay`]), the persisted inventory and the restart rules.
//!
//! **Architecture invariant:** composition only. How cartridges are stored is reel-volume's
//! business, what the devices answer reel-ssc's and reel-smc's.

mod vtl;

pub use vtl::{Bay, Drive, DriveStatus, Emulation, LibraryError, LibrarySpec, VirtualLibrary};
