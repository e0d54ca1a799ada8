//! Asynchronous Message (RFC 7143 §11.9): events the target reports unasked.

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, RESERVED_TAG, opcode};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsyncMessage {
    pub lun: [u8; 8],
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub event: u8,
    pub vcode: u8,
    pub parameters: [u16; 3],
    pub data: Bytes,
}

impl Codec for AsyncMessage {
    const OPCODE: u8 = opcode::ASYNC_MESSAGE;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        let parameter = |i: usize| bhs.u16(at::ASYNC_PARAMETERS + 2 * i);
        Ok(AsyncMessage {
            lun: bhs.lun(),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            event: bhs.u8(at::ASYNC_EVENT),
            vcode: bhs.u8(at::ASYNC_VCODE),
            parameters: [parameter(0), parameter(1), parameter(2)],
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL);
        bhs.set_lun(&self.lun);
        // §11.9: the Initiator Task Tag of an Asynchronous Message is 0xffffffff.
        bhs.set_itt(RESERVED_TAG);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u8(at::ASYNC_EVENT, self.event);
        bhs.set_u8(at::ASYNC_VCODE, self.vcode);
        for (i, parameter) in self.parameters.iter().enumerate() {
            bhs.set_u16(at::ASYNC_PARAMETERS + 2 * i, *parameter);
        }
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}
