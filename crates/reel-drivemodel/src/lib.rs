//! A pure, deterministic model of physical tape drives: what a real LTO (or DLT, SDLT, DDS)
//! drive would do with a given stream of records, so reel can tell an operator whether the
//! physical tapes behind a virtual library would stream, how long a job takes and how many
//! cartridges it needs.
//!
//! - [`spec`]: the catalog ([`drives`], [`drive`], [`lto`], [`robots`], [`robot`]), every
//!   number sourced in `docs/design/drive-model.md`;
//! - [`drive`]: [`PhysicalDrive`], one drive's state machine (buffer, speed matching,
//!   back-hitches, filemarks, compression, load/unload/rewind/locate);
//! - [`workload`]: [`simulate`], a job of records against one drive;
//! - [`plan`]: [`plan()`], record size and filemark policy for a job on M drives;
//! - [`validation`]: the model's predictions next to published measurements.
//!
//! Time is an input: no clocks, threads or I/O. The same inputs give the same outputs.

pub mod drive;
pub mod plan;
pub mod spec;
pub mod validation;
pub mod workload;

pub use drive::{DriveStats, Motion, PhysicalDrive};
pub use plan::{Candidate, DEFAULT_RECORD_SIZES, Plan, PlanRequest, plan};
pub use spec::{
    CompressionBehaviour, DriveSpec, Format, RobotSpec, drive, drives, lto, robot, robots,
};
pub use workload::{Compressibility, Report, Source, Workload, simulate};

#[cfg(test)]
mod tests;
