//! SCSI Data-Out and Data-In (RFC 7143 §11.7).

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, bit, flag};
use super::{Codec, ParseError, opcode};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataOut {
    pub final_: bool,
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
    pub data: Bytes,
}

impl Codec for DataOut {
    const OPCODE: u8 = opcode::DATA_OUT;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        Ok(DataOut {
            final_: bhs.flag(flag::FINAL),
            lun: bhs.lun(),
            itt: bhs.itt(),
            ttt: bhs.u32(at::TTT),
            exp_stat_sn: bhs.u32(at::EXP_STAT_SN),
            data_sn: bhs.u32(at::DATA_SN),
            buffer_offset: bhs.u32(at::BUFFER_OFFSET),
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        // Data-Out carries no CmdSN (§11.7): it is not a command.
        bhs.set_flags(bit(self.final_, flag::FINAL));
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::TTT, self.ttt);
        bhs.set_u32(at::EXP_STAT_SN, self.exp_stat_sn);
        bhs.set_u32(at::DATA_SN, self.data_sn);
        bhs.set_u32(at::BUFFER_OFFSET, self.buffer_offset);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataIn {
    pub final_: bool,
    pub acknowledge: bool,
    pub overflow: bool,
    pub underflow: bool,
    /// Status present: when set, `status`, `stat_sn` and the residual are valid (phase collapse, §11.7.4).
    pub has_status: bool,
    pub status: u8,
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
    pub residual: u32,
    pub data: Bytes,
}

impl Codec for DataIn {
    const OPCODE: u8 = opcode::DATA_IN;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(DataIn {
            final_: bhs.flag(flag::FINAL),
            acknowledge: bhs.flag(flag::ACKNOWLEDGE),
            overflow: bhs.flag(flag::OVERFLOW),
            underflow: bhs.flag(flag::UNDERFLOW),
            has_status: bhs.flag(flag::STATUS),
            status: bhs.u8(at::STATUS),
            lun: bhs.lun(),
            itt: bhs.itt(),
            ttt: bhs.u32(at::TTT),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            data_sn: bhs.u32(at::DATA_SN),
            buffer_offset: bhs.u32(at::BUFFER_OFFSET),
            residual: bhs.u32(at::RESIDUAL),
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(
            bit(self.final_, flag::FINAL)
                | bit(self.acknowledge, flag::ACKNOWLEDGE)
                | bit(self.overflow, flag::OVERFLOW)
                | bit(self.underflow, flag::UNDERFLOW)
                | bit(self.has_status, flag::STATUS),
        );
        // The status byte is reserved unless the S bit is set (§11.7.4).
        if self.has_status {
            bhs.set_u8(at::STATUS, self.status);
        }
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::TTT, self.ttt);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u32(at::DATA_SN, self.data_sn);
        bhs.set_u32(at::BUFFER_OFFSET, self.buffer_offset);
        bhs.set_u32(at::RESIDUAL, self.residual);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}
