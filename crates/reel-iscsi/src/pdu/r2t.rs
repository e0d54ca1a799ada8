//! Ready To Transfer (RFC 7143 §11.8): the target asks for a range of Data-Out.

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, opcode};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct R2t {
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub r2t_sn: u32,
    pub buffer_offset: u32,
    pub desired_length: u32,
}

impl Codec for R2t {
    const OPCODE: u8 = opcode::R2T;

    fn decode(bhs: &Bhs, _ahs: &[u8], _data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(R2t {
            lun: bhs.lun(),
            itt: bhs.itt(),
            ttt: bhs.u32(at::TTT),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            r2t_sn: bhs.u32(at::R2T_SN),
            buffer_offset: bhs.u32(at::BUFFER_OFFSET),
            desired_length: bhs.u32(at::DESIRED_LENGTH),
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL);
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::TTT, self.ttt);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u32(at::R2T_SN, self.r2t_sn);
        bhs.set_u32(at::BUFFER_OFFSET, self.buffer_offset);
        bhs.set_u32(at::DESIRED_LENGTH, self.desired_length);
    }
}
