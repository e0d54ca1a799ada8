//! Logout Request and Logout Response (RFC 7143 §11.14, §11.15).

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, opcode};

/// The Reason Code takes the low 7 bits of byte 1 (§11.14.1).
const REASON_MASK: u8 = 0x7f;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason: u8,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl Codec for LogoutRequest {
    const OPCODE: u8 = opcode::LOGOUT_REQUEST;

    fn decode(bhs: &Bhs, _ahs: &[u8], _data: Bytes) -> Result<Self, ParseError> {
        let (cmd_sn, exp_stat_sn) = bhs.request_sns();
        Ok(LogoutRequest {
            immediate: bhs.immediate(),
            reason: bhs.flags() & REASON_MASK,
            itt: bhs.itt(),
            cid: bhs.u16(at::CID),
            cmd_sn,
            exp_stat_sn,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_immediate(self.immediate);
        bhs.set_flags(flag::FINAL | (self.reason & REASON_MASK));
        bhs.set_itt(self.itt);
        bhs.set_u16(at::CID, self.cid);
        bhs.set_request_sns(self.cmd_sn, self.exp_stat_sn);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogoutResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub time2wait: u16,
    pub time2retain: u16,
}

impl Codec for LogoutResponse {
    const OPCODE: u8 = opcode::LOGOUT_RESPONSE;

    fn decode(bhs: &Bhs, _ahs: &[u8], _data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(LogoutResponse {
            response: bhs.u8(at::RESPONSE),
            itt: bhs.itt(),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            time2wait: bhs.u16(at::TIME2WAIT),
            time2retain: bhs.u16(at::TIME2RETAIN),
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL);
        bhs.set_u8(at::RESPONSE, self.response);
        bhs.set_itt(self.itt);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u16(at::TIME2WAIT, self.time2wait);
        bhs.set_u16(at::TIME2RETAIN, self.time2retain);
    }
}
