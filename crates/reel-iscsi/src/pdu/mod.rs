//! iSCSI PDU codec (RFC 7143 §11).
//!
//! A PDU on the wire is a 48-byte Basic Header Segment (BHS), optional
//! Additional Header Segments (AHS), an optional header digest, a data
//! segment padded to 4 bytes and an optional data digest (§11.1).
//!
//! - `framer`: cutting PDUs out of the byte stream ([`Framer`], digests, segment limit).
//! - `bhs`: the Basic Header Segment's named field offsets and accessors (§11.2).
//! - one module per PDU family, each with its decode and encode side by side: `nop`, `scsi`
//!   (command and response), `task_mgmt`, `login`, `text`, `data` (Data-Out, Data-In), `logout`,
//!   `snack`, `r2t`, `async_message`, `reject`.
//!
//! Reserved fields are ignored on receipt and written as zero (§11.2.1:
//! "reserved fields ... MUST be set to zero ... and ignored on receipt" —
//! tolerating them is what interoperating targets do).

mod async_message;
mod bhs;
mod data;
mod framer;
mod login;
mod logout;
mod nop;
mod r2t;
mod reject;
mod scsi;
mod snack;
mod task_mgmt;
mod text;

use bytes::{Bytes, BytesMut};

pub use async_message::AsyncMessage;
pub use bhs::BHS_LEN;
use bhs::{Bhs, pad4};
pub use data::{DataIn, DataOut};
pub use framer::{Frame, FrameError, FrameLimits, Framer, Header};
pub use login::{LoginRequest, LoginResponse, Stage};
pub use logout::{LogoutRequest, LogoutResponse};
pub use nop::{NopIn, NopOut};
pub use r2t::R2t;
pub use reject::{Reject, RejectReason};
pub use scsi::{ScsiCommand, ScsiResponse, TaskAttr};
pub use snack::SnackRequest;
pub use task_mgmt::{TaskMgmtRequest, TaskMgmtResponse};
pub use text::{TextRequest, TextResponse};

use crate::digest::crc32c;

/// Initiator Task Tag value reserved for "no task" (§11.18, §11.19).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// Target Transfer Tags of one connection: counting up from 1, never the reserved 0xffffffff
/// (§11.7.4: that value means "no TTT").
#[derive(Clone, Debug)]
pub(crate) struct TransferTags {
    next: u32,
}

impl Default for TransferTags {
    fn default() -> Self {
        TransferTags { next: 1 }
    }
}

impl TransferTags {
    /// The tag [`Self::allocate`] returns next.
    pub fn peek(&self) -> u32 {
        self.next
    }

    pub fn allocate(&mut self) -> u32 {
        let ttt = self.next;
        self.next = self.next.wrapping_add(1);
        if self.next == RESERVED_TAG {
            self.next = 1;
        }
        ttt
    }
}

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

/// One PDU family's codec: its opcode and its opcode-specific header fields, read and written
/// side by side. The opcode byte, the lengths and the digests are [`Pdu`]'s and the framer's.
trait Codec: Sized {
    const OPCODE: u8;
    fn decode(bhs: &Bhs, ahs: &[u8], data: Bytes) -> Result<Self, ParseError>;
    /// Writes the fields into `bhs` (which holds the opcode, every other byte zero) and any AHS.
    fn encode(&self, bhs: &mut Bhs, ahs: &mut BytesMut);
    /// The data segment, for the families that carry one.
    fn data(&self) -> Option<&Bytes> {
        None
    }
}

/// The PDU enum and its dispatch to the family codecs, from one list of families.
macro_rules! pdus {
    ($($family:ident),* $(,)?) => {
        /// A parsed PDU.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Pdu {
            $($family($family),)*
        }

        impl Pdu {
            /// Parses a framed PDU (§11).
            pub fn parse(frame: Frame) -> Result<Pdu, ParseError> {
                let bhs = Bhs(frame.bhs);
                match bhs.opcode() {
                    $(<$family as Codec>::OPCODE => {
                        $family::decode(&bhs, &frame.ahs, frame.data).map(Pdu::$family)
                    })*
                    other => Err(ParseError::UnknownOpcode(other)),
                }
            }

            pub fn opcode(&self) -> u8 {
                match self {
                    $(Pdu::$family(_) => <$family as Codec>::OPCODE,)*
                }
            }

            /// The data segment carried by this PDU (empty for PDUs that carry none).
            pub fn data(&self) -> &Bytes {
                static EMPTY: Bytes = Bytes::new();
                let data = match self {
                    $(Pdu::$family(p) => p.data(),)*
                };
                data.unwrap_or(&EMPTY)
            }

            fn encode_fields(&self, bhs: &mut Bhs, ahs: &mut BytesMut) {
                match self {
                    $(Pdu::$family(p) => p.encode(bhs, ahs),)*
                }
            }
        }
    };
}

pdus!(
    NopOut,
    ScsiCommand,
    TaskMgmtRequest,
    LoginRequest,
    TextRequest,
    DataOut,
    LogoutRequest,
    SnackRequest,
    NopIn,
    ScsiResponse,
    TaskMgmtResponse,
    LoginResponse,
    TextResponse,
    DataIn,
    LogoutResponse,
    R2t,
    AsyncMessage,
    Reject,
);

impl Pdu {
    /// The header (BHS + AHS) as it goes on the wire, without digest.
    pub fn header(&self) -> BytesMut {
        let mut bhs = Bhs::new(self.opcode());
        let mut ahs = BytesMut::new();
        self.encode_fields(&mut bhs, &mut ahs);
        bhs.set_lengths(ahs.len(), self.data().len());
        let mut out = BytesMut::with_capacity(BHS_LEN + ahs.len() + 4);
        out.extend_from_slice(&bhs.0);
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
            let digest = framer::data_digest(&data);
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
