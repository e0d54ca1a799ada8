//! SCSI Command and SCSI Response (RFC 7143 §11.3, §11.4), with the Extended CDB and
//! Bidirectional Read Expected Data Transfer Length AHS (§11.2.2.3, §11.2.2.4).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::bhs::{Bhs, at, be32, bit, flag, pad4};
use super::{Codec, ParseError, opcode};

/// AHSType of an Extended CDB (§11.2.2.3).
const AHS_EXTENDED_CDB: u8 = 1;
/// AHSType of a Bidirectional Read Expected Data Transfer Length (§11.2.2.4).
const AHS_BIDI_READ_LENGTH: u8 = 2;
/// CDB bytes the BHS holds; the rest goes into an Extended CDB AHS (§11.3.5).
const BHS_CDB_LEN: usize = 16;

/// SCSI task attributes in the SCSI Command PDU (§11.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskAttr {
    Untagged,
    Simple,
    Ordered,
    HeadOfQueue,
    Aca,
}

impl TaskAttr {
    fn from_bits(bits: u8) -> Self {
        match bits & 0x07 {
            0 => TaskAttr::Untagged,
            2 => TaskAttr::Ordered,
            3 => TaskAttr::HeadOfQueue,
            4 => TaskAttr::Aca,
            // 1 and the reserved values 5..7 are treated as SIMPLE.
            _ => TaskAttr::Simple,
        }
    }
    fn bits(self) -> u8 {
        match self {
            TaskAttr::Untagged => 0,
            TaskAttr::Simple => 1,
            TaskAttr::Ordered => 2,
            TaskAttr::HeadOfQueue => 3,
            TaskAttr::Aca => 4,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScsiCommand {
    pub immediate: bool,
    pub final_: bool,
    pub read: bool,
    pub write: bool,
    pub attr: TaskAttr,
    pub lun: [u8; 8],
    pub itt: u32,
    pub expected_data_length: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    /// The CDB: the 16 bytes of the BHS followed by an Extended CDB AHS if present (§11.3.5, §11.2.2.3).
    pub cdb: Bytes,
    /// Expected bidirectional read data length AHS (§11.2.2.4), if present.
    pub bidi_read_length: Option<u32>,
    /// Immediate data (§11.3.4).
    pub data: Bytes,
}

impl Codec for ScsiCommand {
    const OPCODE: u8 = opcode::SCSI_COMMAND;

    fn decode(bhs: &Bhs, ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let mut cdb = BytesMut::from(&bhs.0[at::CDB..at::CDB + BHS_CDB_LEN]);
        let mut bidi_read_length = None;
        let mut ahs = ahs;
        // AHS: 2-byte length (of the specific field), 1-byte type, then the field (§11.2.2).
        while !ahs.is_empty() {
            if ahs.len() < 4 {
                return Err(ParseError::BadAhs);
            }
            // AHSLength counts the reserved byte and the type-specific field (§11.2.2.1).
            let len = u16::from_be_bytes([ahs[0], ahs[1]]) as usize;
            let kind = ahs[2];
            if len == 0 || ahs.len() < 3 + len {
                return Err(ParseError::BadAhs);
            }
            let field = &ahs[4..3 + len];
            match kind {
                AHS_EXTENDED_CDB => cdb.extend_from_slice(field),
                AHS_BIDI_READ_LENGTH => {
                    if field.len() != 4 {
                        return Err(ParseError::BadAhs);
                    }
                    bidi_read_length = Some(be32(field, 0));
                }
                _ => return Err(ParseError::BadAhs),
            }
            let consumed = (3 + len + pad4(3 + len)).min(ahs.len());
            ahs.advance(consumed);
        }
        let (cmd_sn, exp_stat_sn) = bhs.request_sns();
        Ok(ScsiCommand {
            immediate: bhs.immediate(),
            final_: bhs.flag(flag::FINAL),
            read: bhs.flag(flag::READ),
            write: bhs.flag(flag::WRITE),
            attr: TaskAttr::from_bits(bhs.flags()),
            lun: bhs.lun(),
            itt: bhs.itt(),
            expected_data_length: bhs.u32(at::EXPECTED_DATA_LENGTH),
            cmd_sn,
            exp_stat_sn,
            cdb: cdb.freeze(),
            bidi_read_length,
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, ahs: &mut BytesMut) {
        bhs.set_immediate(self.immediate);
        bhs.set_flags(
            bit(self.final_, flag::FINAL)
                | bit(self.read, flag::READ)
                | bit(self.write, flag::WRITE)
                | self.attr.bits(),
        );
        bhs.set_lun(&self.lun);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::EXPECTED_DATA_LENGTH, self.expected_data_length);
        bhs.set_request_sns(self.cmd_sn, self.exp_stat_sn);
        let head = self.cdb.len().min(BHS_CDB_LEN);
        bhs.set_bytes(at::CDB, &self.cdb[..head]);
        if self.cdb.len() > BHS_CDB_LEN {
            let extra = &self.cdb[BHS_CDB_LEN..];
            ahs.put_u16(extra.len() as u16 + 1);
            ahs.put_u8(AHS_EXTENDED_CDB);
            ahs.put_u8(0);
            ahs.extend_from_slice(extra);
            ahs.put_bytes(0, pad4(extra.len()));
        }
        if let Some(len) = self.bidi_read_length {
            ahs.put_u16(5);
            ahs.put_u8(AHS_BIDI_READ_LENGTH);
            ahs.put_u8(0);
            ahs.put_u32(len);
        }
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScsiResponse {
    pub bidi_overflow: bool,
    pub bidi_underflow: bool,
    pub overflow: bool,
    pub underflow: bool,
    pub response: u8,
    pub status: u8,
    pub itt: u32,
    pub snack_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_data_sn: u32,
    pub bidi_residual: u32,
    pub residual: u32,
    /// The data segment: SenseLength (2 bytes) + sense data, or empty (§11.4.7).
    pub data: Bytes,
}

impl Codec for ScsiResponse {
    const OPCODE: u8 = opcode::SCSI_RESPONSE;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(ScsiResponse {
            bidi_overflow: bhs.flag(flag::BIDI_OVERFLOW),
            bidi_underflow: bhs.flag(flag::BIDI_UNDERFLOW),
            overflow: bhs.flag(flag::OVERFLOW),
            underflow: bhs.flag(flag::UNDERFLOW),
            response: bhs.u8(at::RESPONSE),
            status: bhs.u8(at::STATUS),
            itt: bhs.itt(),
            snack_tag: bhs.u32(at::SNACK_TAG),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            exp_data_sn: bhs.u32(at::EXP_DATA_SN),
            bidi_residual: bhs.u32(at::BIDI_RESIDUAL),
            residual: bhs.u32(at::RESIDUAL),
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(
            flag::FINAL
                | bit(self.bidi_overflow, flag::BIDI_OVERFLOW)
                | bit(self.bidi_underflow, flag::BIDI_UNDERFLOW)
                | bit(self.overflow, flag::OVERFLOW)
                | bit(self.underflow, flag::UNDERFLOW),
        );
        bhs.set_u8(at::RESPONSE, self.response);
        bhs.set_u8(at::STATUS, self.status);
        bhs.set_itt(self.itt);
        bhs.set_u32(at::SNACK_TAG, self.snack_tag);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u32(at::EXP_DATA_SN, self.exp_data_sn);
        bhs.set_u32(at::BIDI_RESIDUAL, self.bidi_residual);
        bhs.set_u32(at::RESIDUAL, self.residual);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}
