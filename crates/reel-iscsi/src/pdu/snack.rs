//! SNACK Request (RFC 7143 §11.16): the initiator asks for PDUs again. Parsed so the target can
//! answer it (reel runs at ErrorRecoveryLevel 0, where SNACK is rejected).

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, flag};
use super::{Codec, ParseError, opcode};

/// The SNACK Type takes the low 4 bits of byte 1 (§11.16.1).
const KIND_MASK: u8 = 0x0f;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnackRequest {
    pub kind: u8,
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub beg_run: u32,
    pub run_length: u32,
}

impl Codec for SnackRequest {
    const OPCODE: u8 = opcode::SNACK_REQUEST;

    fn decode(bhs: &Bhs, _ahs: &[u8], _data: Bytes) -> Result<Self, ParseError> {
        Ok(SnackRequest {
            kind: bhs.flags() & KIND_MASK,
            lun: bhs.lun(),
            itt: bhs.itt(),
            ttt: bhs.u32(at::TTT),
            exp_stat_sn: bhs.u32(at::EXP_STAT_SN),
            beg_run: bhs.u32(at::BEG_RUN),
            run_length: bhs.u32(at::RUN_LENGTH),
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(flag::FINAL | (self.kind & KIND_MASK));
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::TTT, self.ttt);
        bhs.set_u32(at::EXP_STAT_SN, self.exp_stat_sn);
        bhs.set_u32(at::BEG_RUN, self.beg_run);
        bhs.set_u32(at::RUN_LENGTH, self.run_length);
    }
}
