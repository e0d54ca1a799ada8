//! The initiator side of the SCSI this crate serves: CDB builders and parsers of the answers,
//! for everything that drives a reel (or any other) target from the outside — the benchmarks,
//! the integration tests, the HTTP API's robot moves.
//!
//! The target side decodes CDBs where it executes them ([`crate::cdb`], the personalities);
//! this module is its mirror, one builder per command and one parser per answer, so no caller
//! types CDB bytes by hand. Builders return the CDB as a fixed-size array (its length is
//! implied by the operation code's group, SPC-4 §4.2.5.1); parsers never panic on short or
//! odd answers and say what was wrong in a [`ResponseError`].
//!
//! - [`spc`]: commands every device type has (SPC-4), their answers, and the MODE SELECT
//!   parameter lists a tape initiator sends.
//! - [`sbc`]: READ and WRITE(10/12/16) of a block device (SBC-3), for the null disk.
//! - [`ssc`]: tape (SSC-4): READ/WRITE(6), filemarks, SPACE, LOCATE, READ POSITION, LOAD UNLOAD.
//! - [`smc`]: medium changer (SMC-3): MOVE/EXCHANGE MEDIUM, READ ELEMENT STATUS.
//! - [`describe`]: names of commands and statuses, and one line for sense data, for messages.

pub mod describe;
pub mod sbc;
pub mod smc;
pub mod spc;
pub mod ssc;

use thiserror::Error;

/// Why an answer (Data-In) could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ResponseError {
    /// Shorter than the fixed part of the answer.
    #[error("{what} answer is {got} bytes, fewer than {needed}")]
    TooShort {
        what: &'static str,
        needed: usize,
        got: usize,
    },
    /// An element status page announces descriptors too short to hold the fixed part.
    #[error("element descriptors of {0} bytes (at least 12 expected)")]
    ElementDescriptorLength(usize),
    /// A READ POSITION answer in a form other than the one asked for.
    #[error("READ POSITION answer of {got} bytes does not match the {form:?} form")]
    PositionForm { form: ssc::PositionForm, got: usize },
}

/// Checks that `data` holds at least `needed` bytes of the answer to `what`.
fn need(what: &'static str, data: &[u8], needed: usize) -> Result<(), ResponseError> {
    if data.len() < needed {
        return Err(ResponseError::TooShort {
            what,
            needed,
            got: data.len(),
        });
    }
    Ok(())
}

/// The low 24 bits of `value`, big-endian (TRANSFER LENGTH and COUNT fields of 6-byte CDBs).
/// Longer values are an initiator bug; debug builds stop on them.
fn be24(value: u32) -> [u8; 3] {
    debug_assert!(value < 1 << 24, "{value} does not fit 24 bits");
    let [_, a, b, c] = value.to_be_bytes();
    [a, b, c]
}

/// Big-endian 16-, 24-, 32- or 64-bit field of `data` at `at` (the caller checked the length).
fn be(data: &[u8], at: usize, n: usize) -> u64 {
    data[at..at + n]
        .iter()
        .fold(0, |acc, &b| (acc << 8) | u64::from(b))
}
