//! Login Request and Login Response (RFC 7143 §11.12, §11.13).
//!
//! The CSG and NSG fields stay raw 2-bit codes here: the wire can carry the reserved value 2,
//! and a Login Request that does must be answered with a Login Response of status "initiator
//! error" (§11.12.3, §11.13.5), not a Reject, so the login state machines judge them with
//! [`Stage::from_code`].

use bytes::{Bytes, BytesMut};

use super::bhs::{Bhs, at, bit, flag};
use super::{Codec, ParseError, opcode};

/// Login stages (§11.12.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Security = 0,
    Operational = 1,
    FullFeature = 3,
}

impl Stage {
    /// The stage a CSG or NSG field holds; `None` for the reserved code 2 and for values that
    /// do not fit the 2-bit field.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Stage::Security),
            1 => Some(Stage::Operational),
            3 => Some(Stage::FullFeature),
            _ => None,
        }
    }

    /// The 2-bit code of the stage in CSG and NSG.
    pub fn bits(self) -> u8 {
        self as u8
    }
}

/// The stage fields of byte 1: CSG in bits 2–3, NSG in bits 0–1 (§11.12.3).
fn stages(flags: u8) -> (u8, u8) {
    ((flags >> 2) & 3, flags & 3)
}

fn login_flags(transit: bool, continue_: bool, csg: u8, nsg: u8) -> u8 {
    bit(transit, flag::TRANSIT) | bit(continue_, flag::CONTINUE) | ((csg & 3) << 2) | (nsg & 3)
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

impl Codec for LoginRequest {
    const OPCODE: u8 = opcode::LOGIN_REQUEST;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (csg, nsg) = stages(bhs.flags());
        let (cmd_sn, exp_stat_sn) = bhs.request_sns();
        Ok(LoginRequest {
            transit: bhs.flag(flag::TRANSIT),
            continue_: bhs.flag(flag::CONTINUE),
            csg,
            nsg,
            version_max: bhs.u8(at::VERSION_MAX),
            version_min: bhs.u8(at::VERSION_MIN),
            isid: bhs.bytes(at::ISID),
            tsih: bhs.u16(at::TSIH),
            itt: bhs.itt(),
            cid: bhs.u16(at::CID),
            cmd_sn,
            exp_stat_sn,
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        // A Login Request is always immediate (§11.12).
        bhs.set_immediate(true);
        bhs.set_flags(login_flags(
            self.transit,
            self.continue_,
            self.csg,
            self.nsg,
        ));
        bhs.set_u8(at::VERSION_MAX, self.version_max);
        bhs.set_u8(at::VERSION_MIN, self.version_min);
        bhs.set_bytes(at::ISID, &self.isid);
        bhs.set_u16(at::TSIH, self.tsih);
        bhs.set_itt(self.itt);
        bhs.set_u16(at::CID, self.cid);
        bhs.set_request_sns(self.cmd_sn, self.exp_stat_sn);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
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

impl Codec for LoginResponse {
    const OPCODE: u8 = opcode::LOGIN_RESPONSE;

    fn decode(bhs: &Bhs, _ahs: &[u8], data: Bytes) -> Result<Self, ParseError> {
        let (csg, nsg) = stages(bhs.flags());
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = bhs.response_sns();
        Ok(LoginResponse {
            transit: bhs.flag(flag::TRANSIT),
            continue_: bhs.flag(flag::CONTINUE),
            csg,
            nsg,
            version_max: bhs.u8(at::VERSION_MAX),
            version_active: bhs.u8(at::VERSION_MIN),
            isid: bhs.bytes(at::ISID),
            tsih: bhs.u16(at::TSIH),
            itt: bhs.itt(),
            stat_sn,
            exp_cmd_sn,
            max_cmd_sn,
            status_class: bhs.u8(at::STATUS_CLASS),
            status_detail: bhs.u8(at::STATUS_DETAIL),
            data,
        })
    }

    fn encode(&self, bhs: &mut Bhs, _ahs: &mut BytesMut) {
        bhs.set_flags(login_flags(
            self.transit,
            self.continue_,
            self.csg,
            self.nsg,
        ));
        bhs.set_u8(at::VERSION_MAX, self.version_max);
        bhs.set_u8(at::VERSION_MIN, self.version_active);
        bhs.set_bytes(at::ISID, &self.isid);
        bhs.set_u16(at::TSIH, self.tsih);
        bhs.set_itt(self.itt);
        bhs.set_response_sns(self.stat_sn, self.exp_cmd_sn, self.max_cmd_sn);
        bhs.set_u8(at::STATUS_CLASS, self.status_class);
        bhs.set_u8(at::STATUS_DETAIL, self.status_detail);
    }

    fn data(&self) -> Option<&Bytes> {
        Some(&self.data)
    }
}
