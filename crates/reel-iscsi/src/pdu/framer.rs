//! Cutting PDUs out of a byte stream (RFC 7143 §11.1): lengths, digests and the
//! MaxRecvDataSegmentLength limit, without parsing the header's meaning.
//!
//! Framing is separate from parsing ([`super::Pdu::parse`]) so a bad PDU whose header framed
//! correctly can still be answered with a Reject that quotes its header (§11.17).

use bytes::{Buf, Bytes, BytesMut};

use super::bhs::{BHS_LEN, Bhs, pad4};
use crate::digest::crc32c;

/// A PDU cut from the byte stream, digests checked, not yet parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub bhs: [u8; BHS_LEN],
    pub ahs: Bytes,
    pub data: Bytes,
}

impl Frame {
    pub fn opcode(&self) -> u8 {
        Bhs(self.bhs).opcode()
    }
    pub fn itt(&self) -> u32 {
        Bhs(self.bhs).itt()
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
        let bhs = Bhs(buf.get(..BHS_LEN)?.try_into().ok()?);
        let ahs_len = bhs.ahs_len();
        let data_len = bhs.data_len();
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
            let got = u32::from_le_bytes(pdu[..4].try_into().unwrap());
            if data_digest(&data) != got {
                return Err(FrameError::DataDigest { bhs: Box::new(bhs) });
            }
        }
        Ok(Some(Frame { bhs, ahs, data }))
    }
}

/// The data digest covers the data and its padding (§11.1, §12.1).
pub(crate) fn data_digest(data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c(data), &[0u8; 3][..pad4(data.len())])
}
