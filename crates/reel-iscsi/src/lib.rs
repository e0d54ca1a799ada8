//! Sans-I/O iSCSI protocol core (RFC 7143).
//!
//! No sockets, no clock, no SCSI meaning: callers feed received bytes and
//! timer ticks in and get PDUs to send and SCSI work to do out.

pub mod chap;
pub mod digest;
pub mod fuzzing;
pub mod initiator;
pub mod initiator_login;
pub mod login;
pub mod params;
pub mod pdu;
pub mod session;
pub mod text;
