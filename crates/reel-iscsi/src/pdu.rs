//! iSCSI PDU codec (RFC 7143 §11).
//!
//! A PDU on the wire is a 48-byte Basic Header Segment (BHS), optional
//! Additional Header Segments (AHS), an optional header digest, a data
//! segment padded to 4 bytes and an optional data digest (§11.1). Framing
//! ([`Framer`]) is separate from parsing ([`Pdu::parse`]) so a bad PDU whose
//! header framed correctly can still be answered with a Reject that quotes
//! its header (§11.17).
//!
//! Reserved fields are ignored on receipt and written as zero (§11.2.1:
//! "reserved fields ... MUST be set to zero ... and ignored on receipt" —
//! tolerating them is what interoperating targets do).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::digest::crc32c;

/// Size of the Basic Header Segment (§11.2).
pub const BHS_LEN: usize = 48;
/// Initiator Task Tag value reserved for "no task" (§11.18, §11.19).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// Opcodes (§11.2.1.2).
pub mod opcode {
    pub const NOP_OUT: u8 = 0x00;
    pub const SCSI_COMMAND: u8 = 0x01;
    pub const TASK_MGMT_REQUEST: u8 = 0x02;
    pub const LOGIN_REQUEST: u8 = 0x03;
    pub const TEXT_REQUEST: u8 = 0x04;
    pub const DATA_OUT: u8 = 0x05;
    pub const LOGOUT_REQUEST: u8 = 0x06;
    pub const SNACK_REQUEST: u8 = 0x10;
    pub const NOP_IN: u8 = 0x20;
    pub const SCSI_RESPONSE: u8 = 0x21;
    pub const TASK_MGMT_RESPONSE: u8 = 0x22;
    pub const LOGIN_RESPONSE: u8 = 0x23;
    pub const TEXT_RESPONSE: u8 = 0x24;
    pub const DATA_IN: u8 = 0x25;
    pub const LOGOUT_RESPONSE: u8 = 0x26;
    pub const R2T: u8 = 0x31;
    pub const ASYNC_MESSAGE: u8 = 0x32;
    pub const REJECT: u8 = 0x3f;
}

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

/// Login stages (§11.12.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Security = 0,
    Operational = 1,
    FullFeature = 3,
}

impl Stage {
    pub fn from_bits(bits: u8) -> Option<Self> {
        match bits & 3 {
            0 => Some(Stage::Security),
            1 => Some(Stage::Operational),
            3 => Some(Stage::FullFeature),
            _ => None,
        }
    }
}

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskMgmtResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextRequest {
    pub immediate: bool,
    pub final_: bool,
    pub continue_: bool,
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub data: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextResponse {
    pub final_: bool,
    pub continue_: bool,
    pub lun: [u8; 8],
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginRequest {
    pub transit: bool,
    pub continue_: bool,
    /// Current and next stage as raw 2-bit codes (2 is reserved and must be refused by the login logic).
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_min: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub data: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginResponse {
    pub transit: bool,
    pub continue_: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_active: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub status_class: u8,
    pub status_detail: u8,
    pub data: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason: u8,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
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

/// A parsed PDU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pdu {
    NopOut(NopOut),
    ScsiCommand(ScsiCommand),
    TaskMgmtRequest(TaskMgmtRequest),
    LoginRequest(LoginRequest),
    TextRequest(TextRequest),
    DataOut(DataOut),
    LogoutRequest(LogoutRequest),
    SnackRequest(SnackRequest),
    NopIn(NopIn),
    ScsiResponse(ScsiResponse),
    TaskMgmtResponse(TaskMgmtResponse),
    LoginResponse(LoginResponse),
    TextResponse(TextResponse),
    DataIn(DataIn),
    LogoutResponse(LogoutResponse),
    R2t(R2t),
    AsyncMessage(AsyncMessage),
    Reject(Reject),
}

/// Why a framed PDU could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("unknown or unsupported opcode {0:#04x}")]
    UnknownOpcode(u8),
    #[error("malformed additional header segment")]
    BadAhs,
    #[error("{0}")]
    Invalid(&'static str),
}

/// A PDU cut from the byte stream, digests checked, not yet parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub bhs: [u8; BHS_LEN],
    pub ahs: Bytes,
    pub data: Bytes,
}

impl Frame {
    pub fn opcode(&self) -> u8 {
        self.bhs[0] & 0x3f
    }
    pub fn itt(&self) -> u32 {
        be32(&self.bhs, 16)
    }
}

/// Why the byte stream could not be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The header is not trustworthy: the connection must be dropped (§7.8: a header digest error at ERL 0).
    #[error("header digest mismatch")]
    HeaderDigest,
    /// The header framed and is trustworthy but the data segment's digest is wrong: the PDU is
    /// discarded and answered with Reject reason "data digest error" (§7.8, §11.17.1).
    #[error("data digest mismatch")]
    DataDigest { bhs: Box<[u8; BHS_LEN]> },
    /// The data segment is longer than we declared we can receive (MaxRecvDataSegmentLength, §13.12).
    /// The length field cannot be trusted either, so the connection must be dropped after a Reject.
    #[error("data segment of {length} bytes exceeds the negotiated maximum of {max}")]
    DataSegmentTooLong {
        bhs: Box<[u8; BHS_LEN]>,
        length: u32,
        max: u32,
    },
}

/// Digest and size settings for one direction of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    pub header_digest: bool,
    pub data_digest: bool,
    /// The most data-segment bytes one PDU may carry.
    pub max_data_segment: u32,
}

impl Default for FrameLimits {
    /// Values in force during login (§13.12: MaxRecvDataSegmentLength defaults to 8192; no digests
    /// until negotiated). Login PDUs carry at most 8192 bytes of data.
    fn default() -> Self {
        FrameLimits {
            header_digest: false,
            data_digest: false,
            max_data_segment: 8192,
        }
    }
}

/// Cuts PDUs out of a receive buffer. Sans-I/O: feed bytes in, get frames out.
#[derive(Clone, Debug, Default)]
pub struct Framer {
    pub limits: FrameLimits,
}

fn pad4(len: usize) -> usize {
    (4 - len % 4) % 4
}

impl Framer {
    pub fn new(limits: FrameLimits) -> Self {
        Framer { limits }
    }

    /// How many bytes the PDU that starts `buf` takes in all (header, AHS, digests, padded
    /// data), once its BHS is complete: what a reader needs room for.
    pub fn frame_len(&self, buf: &[u8]) -> Option<usize> {
        self.needed(buf).map(|(_, _, total)| total)
    }

    /// AHS length, data length and total length of the PDU that starts `buf`.
    fn needed(&self, buf: &[u8]) -> Option<(usize, usize, usize)> {
        if buf.len() < BHS_LEN {
            return None;
        }
        let ahs_len = buf[4] as usize * 4;
        let data_len = (be32(buf, 4) & 0x00ff_ffff) as usize;
        let header_digest = if self.limits.header_digest { 4 } else { 0 };
        let data_digest = if self.limits.data_digest && data_len > 0 {
            4
        } else {
            0
        };
        let total = BHS_LEN + ahs_len + header_digest + data_len + pad4(data_len) + data_digest;
        Some((ahs_len, data_len, total))
    }

    /// Cuts one PDU from the front of `buf`, or returns `Ok(None)` when more bytes are needed.
    /// On error the offending bytes are consumed when their length was trustworthy.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some((ahs_len, data_len, total)) = self.needed(buf) else {
            return Ok(None);
        };
        let mut bhs = [0u8; BHS_LEN];
        bhs.copy_from_slice(&buf[..BHS_LEN]);
        // Checked before waiting for the data so a hostile length cannot make us buffer 16 MiB.
        if self.limits.header_digest {
            let header_end = BHS_LEN + ahs_len;
            if buf.len() < header_end + 4 {
                return Ok(None);
            }
            let expected = crc32c(&buf[..header_end]);
            let got = u32::from_le_bytes(buf[header_end..header_end + 4].try_into().unwrap());
            if expected != got {
                return Err(FrameError::HeaderDigest);
            }
        }
        if data_len as u32 > self.limits.max_data_segment {
            return Err(FrameError::DataSegmentTooLong {
                bhs: Box::new(bhs),
                length: data_len as u32,
                max: self.limits.max_data_segment,
            });
        }
        if buf.len() < total {
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        let mut pdu = buf.split_to(total);
        pdu.advance(BHS_LEN);
        let ahs = pdu.split_to(ahs_len).freeze();
        if self.limits.header_digest {
            pdu.advance(4);
        }
        let data = pdu.split_to(data_len).freeze();
        pdu.advance(pad4(data_len));
        if self.limits.data_digest && data_len > 0 {
            // The digest covers the data and its padding (§11.1 / §12.1).
            let mut hasher = crc32c(&data);
            let pad = [0u8; 3];
            hasher = crc32c::crc32c_append(hasher, &pad[..pad4(data_len)]);
            let got = u32::from_le_bytes(pdu[..4].try_into().unwrap());
            if hasher != got {
                return Err(FrameError::DataDigest { bhs: Box::new(bhs) });
            }
        }
        Ok(Some(Frame { bhs, ahs, data }))
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn lun_at(b: &[u8]) -> [u8; 8] {
    b[8..16].try_into().unwrap()
}

impl Pdu {
    /// Parses a framed PDU (§11).
    pub fn parse(frame: Frame) -> Result<Pdu, ParseError> {
        let b = &frame.bhs;
        let immediate = b[0] & 0x40 != 0;
        let f = b[1] & 0x80 != 0;
        let lun = lun_at(b);
        let itt = be32(b, 16);
        let data = frame.data;
        let pdu = match frame.bhs[0] & 0x3f {
            opcode::NOP_OUT => Pdu::NopOut(NopOut {
                immediate,
                lun,
                itt,
                ttt: be32(b, 20),
                cmd_sn: be32(b, 24),
                exp_stat_sn: be32(b, 28),
                data,
            }),
            opcode::SCSI_COMMAND => {
                let mut cdb = BytesMut::from(&b[32..48]);
                let mut bidi_read_length = None;
                let mut ahs = frame.ahs.clone();
                // AHS: 2-byte length (of the specific field), 1-byte type, then the field (§11.2.2).
                while !ahs.is_empty() {
                    if ahs.len() < 4 {
                        return Err(ParseError::BadAhs);
                    }
                    // AHSLength counts the reserved byte and the type-specific field (§11.2.2.1).
                    let len = be16(&ahs, 0) as usize;
                    let kind = ahs[2];
                    if len == 0 || ahs.len() < 3 + len {
                        return Err(ParseError::BadAhs);
                    }
                    let field = &ahs[4..3 + len];
                    match kind {
                        1 => cdb.extend_from_slice(field),
                        2 => {
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
                Pdu::ScsiCommand(ScsiCommand {
                    immediate,
                    final_: f,
                    read: b[1] & 0x40 != 0,
                    write: b[1] & 0x20 != 0,
                    attr: TaskAttr::from_bits(b[1]),
                    lun,
                    itt,
                    expected_data_length: be32(b, 20),
                    cmd_sn: be32(b, 24),
                    exp_stat_sn: be32(b, 28),
                    cdb: cdb.freeze(),
                    bidi_read_length,
                    data,
                })
            }
            opcode::TASK_MGMT_REQUEST => Pdu::TaskMgmtRequest(TaskMgmtRequest {
                immediate,
                function: b[1] & 0x7f,
                lun,
                itt,
                referenced_task_tag: be32(b, 20),
                cmd_sn: be32(b, 24),
                exp_stat_sn: be32(b, 28),
                ref_cmd_sn: be32(b, 32),
                exp_data_sn: be32(b, 36),
            }),
            opcode::LOGIN_REQUEST => Pdu::LoginRequest(LoginRequest {
                transit: f,
                continue_: b[1] & 0x40 != 0,
                csg: (b[1] >> 2) & 3,
                nsg: b[1] & 3,
                version_max: b[2],
                version_min: b[3],
                isid: b[8..14].try_into().unwrap(),
                tsih: be16(b, 14),
                itt,
                cid: be16(b, 20),
                cmd_sn: be32(b, 24),
                exp_stat_sn: be32(b, 28),
                data,
            }),
            opcode::TEXT_REQUEST => Pdu::TextRequest(TextRequest {
                immediate,
                final_: f,
                continue_: b[1] & 0x40 != 0,
                lun,
                itt,
                ttt: be32(b, 20),
                cmd_sn: be32(b, 24),
                exp_stat_sn: be32(b, 28),
                data,
            }),
            opcode::DATA_OUT => Pdu::DataOut(DataOut {
                final_: f,
                lun,
                itt,
                ttt: be32(b, 20),
                exp_stat_sn: be32(b, 28),
                data_sn: be32(b, 36),
                buffer_offset: be32(b, 40),
                data,
            }),
            opcode::LOGOUT_REQUEST => Pdu::LogoutRequest(LogoutRequest {
                immediate,
                reason: b[1] & 0x7f,
                itt,
                cid: be16(b, 20),
                cmd_sn: be32(b, 24),
                exp_stat_sn: be32(b, 28),
            }),
            opcode::SNACK_REQUEST => Pdu::SnackRequest(SnackRequest {
                kind: b[1] & 0x0f,
                lun,
                itt,
                ttt: be32(b, 20),
                exp_stat_sn: be32(b, 28),
                beg_run: be32(b, 40),
                run_length: be32(b, 44),
            }),
            opcode::NOP_IN => Pdu::NopIn(NopIn {
                lun,
                itt,
                ttt: be32(b, 20),
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                data,
            }),
            opcode::SCSI_RESPONSE => Pdu::ScsiResponse(ScsiResponse {
                bidi_overflow: b[1] & 0x10 != 0,
                bidi_underflow: b[1] & 0x08 != 0,
                overflow: b[1] & 0x04 != 0,
                underflow: b[1] & 0x02 != 0,
                response: b[2],
                status: b[3],
                itt,
                snack_tag: be32(b, 20),
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                exp_data_sn: be32(b, 36),
                bidi_residual: be32(b, 40),
                residual: be32(b, 44),
                data,
            }),
            opcode::TASK_MGMT_RESPONSE => Pdu::TaskMgmtResponse(TaskMgmtResponse {
                response: b[2],
                itt,
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
            }),
            opcode::LOGIN_RESPONSE => Pdu::LoginResponse(LoginResponse {
                transit: f,
                continue_: b[1] & 0x40 != 0,
                csg: (b[1] >> 2) & 3,
                nsg: b[1] & 3,
                version_max: b[2],
                version_active: b[3],
                isid: b[8..14].try_into().unwrap(),
                tsih: be16(b, 14),
                itt,
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                status_class: b[36],
                status_detail: b[37],
                data,
            }),
            opcode::TEXT_RESPONSE => Pdu::TextResponse(TextResponse {
                final_: f,
                continue_: b[1] & 0x40 != 0,
                lun,
                itt,
                ttt: be32(b, 20),
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                data,
            }),
            opcode::DATA_IN => Pdu::DataIn(DataIn {
                final_: f,
                acknowledge: b[1] & 0x40 != 0,
                overflow: b[1] & 0x04 != 0,
                underflow: b[1] & 0x02 != 0,
                has_status: b[1] & 0x01 != 0,
                status: b[3],
                lun,
                itt,
                ttt: be32(b, 20),
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                data_sn: be32(b, 36),
                buffer_offset: be32(b, 40),
                residual: be32(b, 44),
                data,
            }),
            opcode::LOGOUT_RESPONSE => Pdu::LogoutResponse(LogoutResponse {
                response: b[2],
                itt,
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                time2wait: be16(b, 40),
                time2retain: be16(b, 42),
            }),
            opcode::R2T => Pdu::R2t(R2t {
                lun,
                itt,
                ttt: be32(b, 20),
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                r2t_sn: be32(b, 36),
                buffer_offset: be32(b, 40),
                desired_length: be32(b, 44),
            }),
            opcode::ASYNC_MESSAGE => Pdu::AsyncMessage(AsyncMessage {
                lun,
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                event: b[36],
                vcode: b[37],
                parameters: [be16(b, 38), be16(b, 40), be16(b, 42)],
                data,
            }),
            opcode::REJECT => Pdu::Reject(Reject {
                reason: b[2],
                stat_sn: be32(b, 24),
                exp_cmd_sn: be32(b, 28),
                max_cmd_sn: be32(b, 32),
                data_sn: be32(b, 36),
                data,
            }),
            other => return Err(ParseError::UnknownOpcode(other)),
        };
        Ok(pdu)
    }

    pub fn opcode(&self) -> u8 {
        match self {
            Pdu::NopOut(_) => opcode::NOP_OUT,
            Pdu::ScsiCommand(_) => opcode::SCSI_COMMAND,
            Pdu::TaskMgmtRequest(_) => opcode::TASK_MGMT_REQUEST,
            Pdu::LoginRequest(_) => opcode::LOGIN_REQUEST,
            Pdu::TextRequest(_) => opcode::TEXT_REQUEST,
            Pdu::DataOut(_) => opcode::DATA_OUT,
            Pdu::LogoutRequest(_) => opcode::LOGOUT_REQUEST,
            Pdu::SnackRequest(_) => opcode::SNACK_REQUEST,
            Pdu::NopIn(_) => opcode::NOP_IN,
            Pdu::ScsiResponse(_) => opcode::SCSI_RESPONSE,
            Pdu::TaskMgmtResponse(_) => opcode::TASK_MGMT_RESPONSE,
            Pdu::LoginResponse(_) => opcode::LOGIN_RESPONSE,
            Pdu::TextResponse(_) => opcode::TEXT_RESPONSE,
            Pdu::DataIn(_) => opcode::DATA_IN,
            Pdu::LogoutResponse(_) => opcode::LOGOUT_RESPONSE,
            Pdu::R2t(_) => opcode::R2T,
            Pdu::AsyncMessage(_) => opcode::ASYNC_MESSAGE,
            Pdu::Reject(_) => opcode::REJECT,
        }
    }

    /// The data segment carried by this PDU (empty for PDUs that carry none).
    pub fn data(&self) -> &Bytes {
        static EMPTY: Bytes = Bytes::new();
        match self {
            Pdu::NopOut(p) => &p.data,
            Pdu::ScsiCommand(p) => &p.data,
            Pdu::LoginRequest(p) => &p.data,
            Pdu::TextRequest(p) => &p.data,
            Pdu::DataOut(p) => &p.data,
            Pdu::NopIn(p) => &p.data,
            Pdu::ScsiResponse(p) => &p.data,
            Pdu::LoginResponse(p) => &p.data,
            Pdu::TextResponse(p) => &p.data,
            Pdu::DataIn(p) => &p.data,
            Pdu::AsyncMessage(p) => &p.data,
            Pdu::Reject(p) => &p.data,
            _ => &EMPTY,
        }
    }

    /// The header (BHS + AHS) as it goes on the wire, without digest.
    pub fn header(&self) -> BytesMut {
        let mut h = [0u8; BHS_LEN];
        let mut ahs = BytesMut::new();
        let put32 = |h: &mut [u8; BHS_LEN], at: usize, v: u32| {
            h[at..at + 4].copy_from_slice(&v.to_be_bytes())
        };
        let put16 = |h: &mut [u8; BHS_LEN], at: usize, v: u16| {
            h[at..at + 2].copy_from_slice(&v.to_be_bytes())
        };
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        h[0] = self.opcode();
        match self {
            Pdu::NopOut(p) => {
                h[0] |= flag(p.immediate, 0x40);
                h[1] = 0x80;
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 24, p.cmd_sn);
                put32(&mut h, 28, p.exp_stat_sn);
            }
            Pdu::ScsiCommand(p) => {
                h[0] |= flag(p.immediate, 0x40);
                h[1] =
                    flag(p.final_, 0x80) | flag(p.read, 0x40) | flag(p.write, 0x20) | p.attr.bits();
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.expected_data_length);
                put32(&mut h, 24, p.cmd_sn);
                put32(&mut h, 28, p.exp_stat_sn);
                let head = p.cdb.len().min(16);
                h[32..32 + head].copy_from_slice(&p.cdb[..head]);
                if p.cdb.len() > 16 {
                    let extra = &p.cdb[16..];
                    ahs.put_u16(extra.len() as u16 + 1);
                    ahs.put_u8(1);
                    ahs.put_u8(0);
                    ahs.extend_from_slice(extra);
                    ahs.put_bytes(0, pad4(extra.len()));
                }
                if let Some(len) = p.bidi_read_length {
                    ahs.put_u16(5);
                    ahs.put_u8(2);
                    ahs.put_u8(0);
                    ahs.put_u32(len);
                }
            }
            Pdu::TaskMgmtRequest(p) => {
                h[0] |= flag(p.immediate, 0x40);
                h[1] = 0x80 | (p.function & 0x7f);
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.referenced_task_tag);
                put32(&mut h, 24, p.cmd_sn);
                put32(&mut h, 28, p.exp_stat_sn);
                put32(&mut h, 32, p.ref_cmd_sn);
                put32(&mut h, 36, p.exp_data_sn);
            }
            Pdu::LoginRequest(p) => {
                h[0] |= 0x40; // a Login Request is always immediate (§11.12).
                h[1] = flag(p.transit, 0x80)
                    | flag(p.continue_, 0x40)
                    | ((p.csg & 3) << 2)
                    | (p.nsg & 3);
                h[2] = p.version_max;
                h[3] = p.version_min;
                h[8..14].copy_from_slice(&p.isid);
                put16(&mut h, 14, p.tsih);
                put32(&mut h, 16, p.itt);
                put16(&mut h, 20, p.cid);
                put32(&mut h, 24, p.cmd_sn);
                put32(&mut h, 28, p.exp_stat_sn);
            }
            Pdu::TextRequest(p) => {
                h[0] |= flag(p.immediate, 0x40);
                h[1] = flag(p.final_, 0x80) | flag(p.continue_, 0x40);
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 24, p.cmd_sn);
                put32(&mut h, 28, p.exp_stat_sn);
            }
            Pdu::DataOut(p) => {
                h[1] = flag(p.final_, 0x80);
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 28, p.exp_stat_sn);
                put32(&mut h, 36, p.data_sn);
                put32(&mut h, 40, p.buffer_offset);
            }
            Pdu::LogoutRequest(p) => {
                h[0] |= flag(p.immediate, 0x40);
                h[1] = 0x80 | (p.reason & 0x7f);
                put32(&mut h, 16, p.itt);
                put16(&mut h, 20, p.cid);
                put32(&mut h, 24, p.cmd_sn);
                put32(&mut h, 28, p.exp_stat_sn);
            }
            Pdu::SnackRequest(p) => {
                h[1] = 0x80 | (p.kind & 0x0f);
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 28, p.exp_stat_sn);
                put32(&mut h, 40, p.beg_run);
                put32(&mut h, 44, p.run_length);
            }
            Pdu::NopIn(p) => {
                h[1] = 0x80;
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
            }
            Pdu::ScsiResponse(p) => {
                h[1] = 0x80
                    | flag(p.bidi_overflow, 0x10)
                    | flag(p.bidi_underflow, 0x08)
                    | flag(p.overflow, 0x04)
                    | flag(p.underflow, 0x02);
                h[2] = p.response;
                h[3] = p.status;
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.snack_tag);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                put32(&mut h, 36, p.exp_data_sn);
                put32(&mut h, 40, p.bidi_residual);
                put32(&mut h, 44, p.residual);
            }
            Pdu::TaskMgmtResponse(p) => {
                h[1] = 0x80;
                h[2] = p.response;
                put32(&mut h, 16, p.itt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
            }
            Pdu::LoginResponse(p) => {
                h[1] = flag(p.transit, 0x80)
                    | flag(p.continue_, 0x40)
                    | ((p.csg & 3) << 2)
                    | (p.nsg & 3);
                h[2] = p.version_max;
                h[3] = p.version_active;
                h[8..14].copy_from_slice(&p.isid);
                put16(&mut h, 14, p.tsih);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                h[36] = p.status_class;
                h[37] = p.status_detail;
            }
            Pdu::TextResponse(p) => {
                h[1] = flag(p.final_, 0x80) | flag(p.continue_, 0x40);
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
            }
            Pdu::DataIn(p) => {
                h[1] = flag(p.final_, 0x80)
                    | flag(p.acknowledge, 0x40)
                    | flag(p.overflow, 0x04)
                    | flag(p.underflow, 0x02)
                    | flag(p.has_status, 0x01);
                if p.has_status {
                    h[3] = p.status;
                }
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                put32(&mut h, 36, p.data_sn);
                put32(&mut h, 40, p.buffer_offset);
                put32(&mut h, 44, p.residual);
            }
            Pdu::LogoutResponse(p) => {
                h[1] = 0x80;
                h[2] = p.response;
                put32(&mut h, 16, p.itt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                put16(&mut h, 40, p.time2wait);
                put16(&mut h, 42, p.time2retain);
            }
            Pdu::R2t(p) => {
                h[1] = 0x80;
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, p.itt);
                put32(&mut h, 20, p.ttt);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                put32(&mut h, 36, p.r2t_sn);
                put32(&mut h, 40, p.buffer_offset);
                put32(&mut h, 44, p.desired_length);
            }
            Pdu::AsyncMessage(p) => {
                h[1] = 0x80;
                h[8..16].copy_from_slice(&p.lun);
                put32(&mut h, 16, RESERVED_TAG);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                h[36] = p.event;
                h[37] = p.vcode;
                put16(&mut h, 38, p.parameters[0]);
                put16(&mut h, 40, p.parameters[1]);
                put16(&mut h, 42, p.parameters[2]);
            }
            Pdu::Reject(p) => {
                h[1] = 0x80;
                h[2] = p.reason;
                put32(&mut h, 16, RESERVED_TAG);
                put32(&mut h, 24, p.stat_sn);
                put32(&mut h, 28, p.exp_cmd_sn);
                put32(&mut h, 32, p.max_cmd_sn);
                put32(&mut h, 36, p.data_sn);
            }
        }
        let data_len = self.data().len() as u32;
        h[4] = (ahs.len() / 4) as u8;
        h[5..8].copy_from_slice(&data_len.to_be_bytes()[1..]);
        let mut out = BytesMut::with_capacity(BHS_LEN + ahs.len() + 4);
        out.extend_from_slice(&h);
        out.extend_from_slice(&ahs);
        out
    }

    /// Encodes the PDU for the wire in pieces, so a large data segment is written without copying:
    /// `head` (header + header digest), `data`, `tail` (padding + data digest).
    pub fn encode(&self, limits: &FrameLimits) -> Encoded {
        let mut head = self.header();
        if limits.header_digest {
            let digest = crc32c(&head);
            head.extend_from_slice(&digest.to_le_bytes());
        }
        let data = self.data().clone();
        let mut tail = [0u8; 7];
        let pad = pad4(data.len());
        let mut tail_len = pad;
        if limits.data_digest && !data.is_empty() {
            let digest = crc32c::crc32c_append(crc32c(&data), &[0u8; 3][..pad]);
            tail[pad..pad + 4].copy_from_slice(&digest.to_le_bytes());
            tail_len += 4;
        }
        Encoded {
            head: head.freeze(),
            data,
            tail,
            tail_len: tail_len as u8,
        }
    }

    /// Encodes the PDU into one contiguous buffer (login, tests, small PDUs).
    pub fn to_bytes(&self, limits: &FrameLimits) -> BytesMut {
        let e = self.encode(limits);
        let mut out = BytesMut::with_capacity(e.len());
        e.write_to(&mut out);
        out
    }
}

/// A PDU ready for the wire, in three pieces (see [`Pdu::encode`]).
#[derive(Clone, Debug)]
pub struct Encoded {
    pub head: Bytes,
    pub data: Bytes,
    tail: [u8; 7],
    tail_len: u8,
}

impl Encoded {
    pub fn tail(&self) -> &[u8] {
        &self.tail[..self.tail_len as usize]
    }
    pub fn len(&self) -> usize {
        self.head.len() + self.data.len() + self.tail_len as usize
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn write_to(&self, out: &mut BytesMut) {
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.data);
        out.extend_from_slice(self.tail());
    }
}
