//! tokio transport for reel's sans-I/O iSCSI core ([`reel_iscsi`]).
//!
//! - [`target`]: the target server — portals, logins, session registry and
//!   reinstatement, NOP pings, and the bridge to SCSI logical units
//!   ([`reel_scsi::LunTable`]).
//! - [`client`]: an initiator client for tests and the benchmark.
//!
//! This is the only layer that owns sockets; the protocol decisions are in
//! `reel-iscsi`, the SCSI meaning in `reel-scsi`.

pub mod client;
mod executor;
pub mod stats;
pub mod target;
mod wire;

pub use client::{Client, ClientError, ClientOptions};
pub use stats::{InitiatorStats, LATENCY_BUCKETS_US, LunCounters};
pub use target::{
    DATA_IN_BUDGET, DEFAULT_MAX_SESSIONS, SessionInfo, TargetServer, TargetServerConfig,
};
