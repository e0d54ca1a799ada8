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
    /// The Initiator Task Tag of a BHS.
    pub fn header_itt(bhs: &[u8; BHS_LEN]) -> u32 {
        Bhs(*bhs).itt()
    }
    /// The Buffer Offset field of a Data-Out's (or Data-In's, R2T's) BHS (§11.7.4).
    pub fn header_buffer_offset(bhs: &[u8; BHS_LEN]) -> u32 {
        Bhs(*bhs).u32(super::bhs::at::BUFFER_OFFSET)
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

    /// How many bytes the header of the PDU that starts `buf` takes (BHS, AHS, header
    /// digest), once its BHS is complete.
    pub fn header_len(&self, buf: &[u8]) -> Option<usize> {
        let bhs = Bhs(buf.get(..BHS_LEN)?.try_into().ok()?);
        let header_digest = if self.limits.header_digest { 4 } else { 0 };
        Some(BHS_LEN + bhs.ahs_len() + header_digest)
    }

    /// The header of the PDU that starts `buf`, when it is complete and checked but the data
    /// segment is not all in `buf` yet: a reader may then read the segment elsewhere itself
    /// (after cutting `Header::len` bytes; the first bytes of the segment may already be in
    /// `buf`) and then skip the padding. `None` whenever [`Framer::decode`] has to judge the
    /// PDU instead: the header is incomplete or wrong (digest, length) or the whole PDU is
    /// here; and always with data digests, which only `decode` checks.
    pub fn peek_header(&self, buf: &[u8]) -> Option<Header> {
        if self.limits.data_digest {
            return None;
        }
        let (ahs_len, data_len, total) = self.needed(buf)?;
        let header_len = self.header_len(buf)?;
        if buf.len() < header_len
            || buf.len() >= total
            || data_len == 0
            || data_len as u32 > self.limits.max_data_segment
        {
            return None;
        }
        if self.limits.header_digest {
            let expected = crc32c(&buf[..BHS_LEN + ahs_len]);
            let got = u32::from_le_bytes(buf[BHS_LEN + ahs_len..header_len].try_into().ok()?);
            if expected != got {
                return None;
            }
        }
        let mut bhs = [0u8; BHS_LEN];
        bhs.copy_from_slice(&buf[..BHS_LEN]);
        Some(Header {
            bhs,
            ahs: Bytes::copy_from_slice(&buf[BHS_LEN..BHS_LEN + ahs_len]),
            len: header_len,
            data_len,
            padding: pad4(data_len),
        })
    }
}

/// The header of a PDU whose data segment the reader puts elsewhere itself (see
/// [`Framer::peek_header`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub bhs: [u8; BHS_LEN],
    pub ahs: Bytes,
    /// The header's own length in the stream (BHS, AHS, header digest).
    pub len: usize,
    /// The data segment's length (DataSegmentLength): the bytes that follow the header.
    pub data_len: usize,
    /// The padding after the data segment, to skip once it is read.
    pub padding: usize,
}

impl Header {
    pub fn opcode(&self) -> u8 {
        Bhs(self.bhs).opcode()
    }
}

/// The data digest covers the data and its padding (§11.1, §12.1).
pub(crate) fn data_digest(data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c(data), &[0u8; 3][..pad4(data.len())])
}
