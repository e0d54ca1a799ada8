//! Reject (RFC 7143 §11.17): the target refuses a PDU and quotes its header.

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, RESERVED_TAG, opcode};

/// Reject reasons (§11.17.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RejectReason {
    DataDigestError = 0x02,
    SnackReject = 0x03,
    ProtocolError = 0x04,
    CommandNotSupported = 0x05,
    ImmediateCommandReject = 0x06,
    TaskInProgress = 0x07,
    InvalidDataAck = 0x08,
    InvalidPduField = 0x09,
    LongOperationReject = 0x0a,
    DeprecatedNegotiationReset = 0x0b,
    WaitingForLogout = 0x0c,
}

impl RejectReason {
    pub fn from_u8(value: u8) -> Option<Self> {
        use RejectReason::*;
        Some(match value {
            0x02 => DataDigestError,
            0x03 => SnackReject,
            0x04 => ProtocolError,
            0x05 => CommandNotSupported,
            0x06 => ImmediateCommandReject,
            0x07 => TaskInProgress,
            0x08 => InvalidDataAck,
            0x09 => InvalidPduField,
            0x0a => LongOperationReject,
            0x0b => DeprecatedNegotiationReset,
            0x0c => WaitingForLogout,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reject {
    pub reason: u8,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    /// The complete header of the rejected PDU (§11.17.4).
    pub data: Bytes,
}

impl Codec for Reject {
    const OPCODE: u8 = opcode::REJECT;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(Reject {
            reason: bhs.u8(at::REASON),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            data_sn: bhs.u32(at::DATA_SN),
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL);
        bhs.set_u8(at::REASON, self.reason);
        // §11.17: the Initiator Task Tag of a Reject is 0xffffffff.
        bhs.set_itt(RESERVED_TAG);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u32(at::DATA_SN, self.data_sn);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}
