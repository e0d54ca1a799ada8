//! # reel-testkit — what reel's tests need around a target (dev-dependency only)
//!
//! - [`serve`]: `reel serve` as a child process on a free loopback portal, ready once its
//!   banner is out, with its PID and its portal and console/API addresses; stopped by signal.
//! - [`initiator`]: reel's own initiator ([`reel_iscsi_net::Client`]) logged in with the test
//!   defaults ([`initiator::login_config`]), the power-on unit attentions cleared, commands
//!   that must answer GOOD.
//! - [`tape`]: a blocking session to one drive, for tests that are not async.
//! - [`volumes`]: a cartridge catalog on a fresh chunk store.
//!
//! CDBs come from [`reel_scsi::initiator`]; this crate adds no SCSI of its own.
//! Never a dependency of a shipped crate (`publish = false`).

pub mod initiator;
pub mod serve;
pub mod tape;
pub mod volumes;

pub use initiator::{check_condition, connect, good, login_config, ready};
pub use serve::{ANY_PORTAL, Server, free_portal};
pub use tape::Tape;
pub use volumes::memory_catalog;
