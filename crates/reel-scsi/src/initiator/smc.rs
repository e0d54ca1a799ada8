//! Medium changer commands (SMC-3) and the element status an initiator reads: MOVE MEDIUM,
//! EXCHANGE MEDIUM, READ ELEMENT STATUS and its element descriptors.

use std::fmt;

use super::{ResponseError, be, need};

/// An element type code (SMC-3 §6.10, ELEMENT TYPE CODE): a newtype over the wire value, so
/// an unknown type read from a target survives.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElementType(pub u8);

impl ElementType {
    /// In READ ELEMENT STATUS: every type.
    pub const ALL: Self = Self(0);
    /// Medium transport element (the robot).
    pub const TRANSPORT: Self = Self(1);
    /// Storage element (a slot).
    pub const STORAGE: Self = Self(2);
    /// Import/export element (the mail slot).
    pub const IMPORT_EXPORT: Self = Self(3);
    /// Data transfer element (a drive).
    pub const DATA_TRANSFER: Self = Self(4);
}

impl fmt::Debug for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            Self::ALL => "ALL",
            Self::TRANSPORT => "TRANSPORT",
            Self::STORAGE => "STORAGE",
            Self::IMPORT_EXPORT => "IMPORT_EXPORT",
            Self::DATA_TRANSFER => "DATA_TRANSFER",
            Self(other) => return write!(f, "ElementType({other:#x})"),
        };
        f.write_str(name)
    }
}

/// MOVE MEDIUM (SMC-3 §6.5) from `source` to `destination` with transport element
/// `transport` (0: the changer's default transport).
pub fn move_medium(transport: u16, source: u16, destination: u16) -> [u8; 12] {
    let (t, s, d) = (
        transport.to_be_bytes(),
        source.to_be_bytes(),
        destination.to_be_bytes(),
    );
    [0xA5, 0, t[0], t[1], s[0], s[1], d[0], d[1], 0, 0, 0, 0]
}

/// EXCHANGE MEDIUM (SMC-3): `source` → `first` destination, and what was there → `second`.
pub fn exchange_medium(transport: u16, source: u16, first: u16, second: u16) -> [u8; 12] {
    let mut cdb = [0u8; 12];
    cdb[0] = 0xA6;
    for (i, v) in [transport, source, first, second].into_iter().enumerate() {
        cdb[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_be_bytes());
    }
    cdb
}

/// READ ELEMENT STATUS (SMC-3 §6.10) of every element of `element_type` with volume tags
/// (VOLTAG = 1), starting at address 0, at most `allocation_length` (24 bits) bytes.
pub fn read_element_status(element_type: ElementType, allocation_length: u32) -> [u8; 12] {
    read_element_status_range(element_type, true, 0, 0xFFFF, false, allocation_length)
}

/// READ ELEMENT STATUS (SMC-3 §6.10): up to `count` elements of `element_type` from address
/// `start`; `voltag` asks for the volume tags, `dvcid` for each data transfer element's
/// device identifier (byte 6 bit 0, SMC-3 §6.10.4).
pub fn read_element_status_range(
    element_type: ElementType,
    voltag: bool,
    start: u16,
    count: u16,
    dvcid: bool,
    allocation_length: u32,
) -> [u8; 12] {
    let (s, n) = (start.to_be_bytes(), count.to_be_bytes());
    let [a, b, c] = super::be24(allocation_length);
    [
        0xB8,
        u8::from(voltag) << 4 | (element_type.0 & 0x0F),
        s[0],
        s[1],
        n[0],
        n[1],
        u8::from(dvcid),
        a,
        b,
        c,
        0,
        0,
    ]
}

/// One element of a READ ELEMENT STATUS answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementStatus {
    pub element_type: ElementType,
    pub address: u16,
    /// FULL: the element holds a cartridge.
    pub full: bool,
    /// The primary volume tag (barcode), when reported and neither blank nor zeros.
    pub barcode: Option<String>,
    /// SOURCE STORAGE ELEMENT ADDRESS, when SVALID says it is valid.
    pub source: Option<u16>,
}

/// The fixed part of an element descriptor (SMC-3 §6.10.x, bytes 0–11).
const DESCRIPTOR_FIXED: usize = 12;

/// Parses READ ELEMENT STATUS data (SMC-3 §6.10): a header, then element status pages, each
/// naming the element type, the descriptor length and whether volume tags follow. Answers
/// cut short by the allocation length yield the descriptors that arrived; a last descriptor
/// cut short is still read as far as it goes (tgt counts its 8-byte page header in the
/// report's byte count and so sends 8 bytes fewer than it means; the volume tag still fits).
pub fn parse_element_status(data: &[u8]) -> Result<Vec<ElementStatus>, ResponseError> {
    need("READ ELEMENT STATUS", data, 8)?;
    let report = be(data, 5, 3) as usize;
    let end = (8 + report).min(data.len());
    let mut out = Vec::new();
    let mut at = 8;
    while at + 8 <= end {
        let element_type = ElementType(data[at] & 0x0F);
        let pvoltag = data[at + 1] & 0x80 != 0;
        let descriptor_len = be(data, at + 2, 2) as usize;
        let page_bytes = be(data, at + 5, 3) as usize;
        let page_end = (at + 8 + page_bytes).min(end);
        if descriptor_len < DESCRIPTOR_FIXED {
            return Err(ResponseError::ElementDescriptorLength(descriptor_len));
        }
        let mut d = at + 8;
        while d + DESCRIPTOR_FIXED <= page_end {
            let desc = &data[d..(d + descriptor_len).min(page_end)];
            let barcode = (pvoltag && desc.len() >= DESCRIPTOR_FIXED + 32)
                .then(|| {
                    // An element without a tag reports blanks or zeros (reel: zeros).
                    String::from_utf8_lossy(&desc[DESCRIPTOR_FIXED..DESCRIPTOR_FIXED + 32])
                        .trim_matches(|c: char| c == '\0' || c.is_whitespace())
                        .to_string()
                })
                .filter(|b| !b.is_empty());
            out.push(ElementStatus {
                element_type,
                address: be(desc, 0, 2) as u16,
                full: desc[2] & 0x01 != 0,
                barcode,
                source: (desc[9] & 0x80 != 0).then(|| be(desc, 10, 2) as u16),
            });
            d += descriptor_len;
        }
        at = page_end.max(at + 8);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::cdb::{Cdb, Opcode};

    proptest! {
        /// The fields as reel-smc's decoder reads them (commands.rs: MOVE MEDIUM, READ
        /// ELEMENT STATUS).
        #[test]
        fn builders_carry_their_fields(t: u16, s: u16, d: u16, e: u16, kind in 0u8..16, voltag: bool, count: u16, dvcid: bool, alloc in 0u32..1 << 24) {
            let c = move_medium(t, s, d);
            let cdb = Cdb::parse(&c).unwrap();
            prop_assert_eq!((cdb.opcode(), cdb.be16(2), cdb.be16(4), cdb.be16(6), cdb.len()), (Opcode::MOVE_MEDIUM, t, s, d, 12));
            let c = exchange_medium(t, s, d, e);
            let cdb = Cdb::parse(&c).unwrap();
            prop_assert_eq!((cdb.opcode(), cdb.be16(2), cdb.be16(4), cdb.be16(6), cdb.be16(8)), (Opcode::EXCHANGE_MEDIUM, t, s, d, e));
            let c = read_element_status_range(ElementType(kind), voltag, s, count, dvcid, alloc);
            let cdb = Cdb::parse(&c).unwrap();
            prop_assert_eq!(
                (cdb.opcode(), cdb.bit(1, 4), cdb.byte(1) & 0x0F, cdb.be16(2), cdb.be16(4), cdb.bit(6, 0), cdb.be(7, 3)),
                (Opcode::READ_ELEMENT_STATUS, voltag, kind, s, count, dvcid, u64::from(alloc))
            );
        }

        #[test]
        fn parser_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_element_status(&data);
        }
    }

    #[test]
    fn element_status_pages() {
        // Two pages: one drive (full, from slot 0x0401, barcode) and two slots without tags.
        let mut drive = vec![0u8; 52];
        drive[0..2].copy_from_slice(&0x0101u16.to_be_bytes());
        drive[2] = 0x01;
        drive[9] = 0x80;
        drive[10..12].copy_from_slice(&0x0401u16.to_be_bytes());
        drive[12..20].copy_from_slice(b"REL001L9");
        drive[20..44].fill(b' ');
        let mut data = vec![0u8; 8];
        data.extend_from_slice(&[4, 0x80, 0, 52, 0, 0, 0, 52]);
        data.extend_from_slice(&drive);
        let slot = |address: u16, full: bool| {
            let mut d = vec![0u8; 12];
            d[0..2].copy_from_slice(&address.to_be_bytes());
            d[2] = u8::from(full);
            d
        };
        data.extend_from_slice(&[2, 0, 0, 12, 0, 0, 0, 24]);
        data.extend_from_slice(&slot(0x0401, false));
        data.extend_from_slice(&slot(0x0402, true));
        let report = (data.len() - 8) as u32;
        data[5..8].copy_from_slice(&report.to_be_bytes()[1..]);
        let elements = parse_element_status(&data).unwrap();
        assert_eq!(elements.len(), 3);
        assert_eq!(
            elements[0],
            ElementStatus {
                element_type: ElementType::DATA_TRANSFER,
                address: 0x0101,
                full: true,
                barcode: Some("REL001L9".into()),
                source: Some(0x0401),
            }
        );
        assert_eq!(
            (
                elements[2].address,
                elements[2].full,
                elements[2].barcode.clone()
            ),
            (0x0402, true, None)
        );
        // Truncated answers stop at what is there; nonsense descriptor lengths are errors.
        assert_eq!(parse_element_status(&data[..8 + 8 + 52]).unwrap().len(), 1);
        // tgt: one page whose byte counts include the 8-byte page header, data cut to match.
        let mut tgt = vec![0, 3, 0, 1, 0, 0, 0, 0x3c, 2, 0x80, 0, 0x34, 0, 0, 0, 0x34];
        let mut desc = vec![0u8; 44];
        desc[1] = 3;
        desc[2] = 1;
        desc[12..20].copy_from_slice(b"TB0001L9");
        desc[20..44].fill(b' ');
        tgt.extend_from_slice(&desc);
        let e = parse_element_status(&tgt).unwrap();
        assert_eq!(
            (e.len(), e[0].address, e[0].full, e[0].barcode.as_deref()),
            (1, 3, true, Some("TB0001L9"))
        );
        let mut bad = data.clone();
        bad[10..12].copy_from_slice(&[0, 4]);
        assert_eq!(
            parse_element_status(&bad),
            Err(ResponseError::ElementDescriptorLength(4))
        );
        assert_eq!(format!("{:?}", ElementType(9)), "ElementType(0x9)");
    }
}
