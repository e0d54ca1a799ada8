//! Task Management Function Request and Response (RFC 7143 §11.5, §11.6).

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, opcode};

/// The Function field takes the low 7 bits of byte 1 (§11.5.1).
const FUNCTION_MASK: u8 = 0x7f;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskMgmtRequest {
    pub immediate: bool,
    pub function: u8,
    pub lun: [u8; 8],
    pub itt: u32,
    pub referenced_task_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub ref_cmd_sn: u32,
    pub exp_data_sn: u32,
}

impl Codec for TaskMgmtRequest {
    const OPCODE: u8 = opcode::TASK_MGMT_REQUEST;

    fn decode(bhs: &Bhs, _ahs: &[u8], _data: Bytes) -> Result<Self, ParseError> {
        let (cmd_sn, exp_stat_sn) = bhs.request_sns();
        Ok(TaskMgmtRequest {
            immediate: bhs.immediate(),
            function: bhs.flags() & FUNCTION_MASK,
            lun: bhs.lun(),
            itt: bhs.itt(),
            referenced_task_tag: bhs.u32(at::REFERENCED_TASK_TAG),
            cmd_sn,
            exp_stat_sn,
            ref_cmd_sn: bhs.u32(at::REF_CMD_SN),
            exp_data_sn: bhs.u32(at::EXP_DATA_SN),
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_immediate(self.immediate);
        bhs.set_flags(flag::FINAL | (self.function & FUNCTION_MASK));
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::REFERENCED_TASK_TAG, self.referenced_task_tag);
        bhs.set_request_sns(self.cmd_sn, self.exp_stat_sn);
        bhs.set_u32(at::REF_CMD_SN, self.ref_cmd_sn);
        bhs.set_u32(at::EXP_DATA_SN, self.exp_data_sn);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskMgmtResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl Codec for TaskMgmtResponse {
    const OPCODE: u8 = opcode::TASK_MGMT_RESPONSE;

    fn decode(bhs: &Bhs, _ahs: &[u8], _data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(TaskMgmtResponse {
            response: bhs.u8(at::RESPONSE),
            itt: bhs.itt(),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL);
        bhs.set_u8(at::RESPONSE, self.response);
        bhs.set_itt(self.itt);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
    }
}
