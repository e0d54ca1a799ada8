//! NOP-Out and NOP-In (RFC 7143 §11.18, §11.19): pings in either direction.

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, opcode};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NopOut {
    pub immediate: bool,
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub data: Bytes,
}

impl Codec for NopOut {
    const OPCODE: u8 = opcode::NOP_OUT;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (cmd_sn, exp_stat_sn) = bhs.request_sns();
        Ok(NopOut {
            immediate: bhs.immediate(),
            lun: bhs.lun(),
            itt: bhs.itt(),
            ttt: bhs.u32(at::TTT),
            cmd_sn,
            exp_stat_sn,
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_immediate(self.immediate);
        bhs.set_flags(flag::FINAL);
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::TTT, self.ttt);
        bhs.set_request_sns(self.cmd_sn, self.exp_stat_sn);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NopIn {
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data: Bytes,
}

impl Codec for NopIn {
    const OPCODE: u8 = opcode::NOP_IN;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(NopIn {
            lun: bhs.lun(),
            itt: bhs.itt(),
            ttt: bhs.u32(at::TTT),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL);
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::TTT, self.ttt);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}
