//! Medium auxiliary memory (MAM) attributes — the cartridge memory chip.
//!
//! Attribute identifiers, formats and lengths follow SPC-4 §7.4 (READ
//! ATTRIBUTE / WRITE ATTRIBUTE attribute tables): device type attributes
//! 0x0000..=0x03FF and medium type attributes 0x0400..=0x07FF are read-only
//! and computed from the cartridge model; host type attributes
//! 0x0800..=0x0BFF and host vendor-specific attributes 0x1400..=0x17FF are
//! written by applications and stored. This module models values only; it
//! does not produce the SCSI parameter-data byte format.

use std::collections::BTreeMap;

use crate::media_type::MIB;
use crate::time::UnixTime;

/// Attribute value format (SPC-4 FORMAT field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeFormat {
    /// Binary (big-endian numbers / opaque bytes), code 00b.
    Binary,
    /// Left-aligned printable ASCII padded with spaces, code 01b.
    Ascii,
    /// Text in the character set named by 0x0805, code 10b.
    Text,
}

impl AttributeFormat {
    /// SPC-4 FORMAT field value.
    pub const fn code(self) -> u8 {
        match self {
            Binary => 0,
            Ascii => 1,
            Text => 2,
        }
    }
    /// Inverse of [`AttributeFormat::code`].
    pub const fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(Binary),
            1 => Some(Ascii),
            2 => Some(Text),
            _ => None,
        }
    }
}

/// Length rule of an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttributeLength {
    /// Exactly this many bytes.
    Fixed(u16),
    /// 1..=max bytes.
    Variable {
        /// Maximum length.
        max: u16,
    },
}

/// Static description of a standard attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttributeDef {
    /// Attribute identifier.
    pub id: u16,
    /// Standard name.
    pub name: &'static str,
    /// Value format.
    pub format: AttributeFormat,
    /// Length rule.
    pub length: AttributeLength,
    /// Whether the host may not write it.
    pub read_only: bool,
}

const fn def(
    id: u16,
    name: &'static str,
    format: AttributeFormat,
    len: u16,
    ro: bool,
) -> AttributeDef {
    AttributeDef {
        id,
        name,
        format,
        length: AttributeLength::Fixed(len),
        read_only: ro,
    }
}

use AttributeFormat::{Ascii, Binary, Text};

/// Maximum length accepted for host vendor-specific attributes (0x1400..=0x17FF)
/// and the variable-length VOLUME COHERENCY INFORMATION.
pub const MAX_VARIABLE_ATTRIBUTE_LEN: u16 = 1024;

/// Standard attributes this model supports (SPC-4 tables of device, medium and
/// host type attributes).
pub const STANDARD_ATTRIBUTES: &[AttributeDef] = &[
    def(0x0000, "REMAINING CAPACITY IN PARTITION", Binary, 8, true),
    def(0x0001, "MAXIMUM CAPACITY IN PARTITION", Binary, 8, true),
    def(0x0003, "LOAD COUNT", Binary, 8, true),
    def(0x0004, "MAM SPACE REMAINING", Binary, 8, true),
    def(0x0006, "FORMATTED DENSITY CODE", Binary, 1, true),
    def(0x0009, "VOLUME CHANGE REFERENCE", Binary, 4, true),
    def(
        0x0220,
        "TOTAL MBYTES WRITTEN IN MEDIUM LIFE",
        Binary,
        8,
        true,
    ),
    def(0x0221, "TOTAL MBYTES READ IN MEDIUM LIFE", Binary, 8, true),
    def(
        0x0222,
        "TOTAL MBYTES WRITTEN IN CURRENT/LAST LOAD",
        Binary,
        8,
        true,
    ),
    def(
        0x0223,
        "TOTAL MBYTES READ IN CURRENT/LAST LOAD",
        Binary,
        8,
        true,
    ),
    def(0x0400, "MEDIUM MANUFACTURER", Ascii, 8, true),
    def(0x0401, "MEDIUM SERIAL NUMBER", Ascii, 32, true),
    def(0x0405, "MEDIUM DENSITY CODE", Binary, 1, true),
    def(0x0406, "MEDIUM MANUFACTURE DATE", Ascii, 8, true),
    def(0x0407, "MAM CAPACITY", Binary, 8, true),
    def(0x0408, "MEDIUM TYPE", Binary, 1, true),
    def(0x0409, "MEDIUM TYPE INFORMATION", Binary, 2, true),
    def(0x0800, "APPLICATION VENDOR", Ascii, 8, false),
    def(0x0801, "APPLICATION NAME", Ascii, 32, false),
    def(0x0802, "APPLICATION VERSION", Ascii, 8, false),
    def(0x0803, "USER MEDIUM TEXT LABEL", Text, 160, false),
    def(0x0804, "DATE AND TIME LAST WRITTEN", Ascii, 12, false),
    def(0x0805, "TEXT LOCALIZATION IDENTIFIER", Binary, 1, false),
    def(0x0806, "BARCODE", Ascii, 32, false),
    def(0x0807, "OWNING HOST TEXTUAL NAME", Text, 80, false),
    def(0x0808, "MEDIA POOL", Text, 160, false),
    def(0x0809, "PARTITION USER TEXT LABEL", Ascii, 16, false),
    def(0x080A, "LOAD/UNLOAD AT PARTITION", Binary, 1, false),
    def(0x080B, "APPLICATION FORMAT VERSION", Ascii, 16, false),
    AttributeDef {
        id: 0x080C,
        name: "VOLUME COHERENCY INFORMATION",
        format: Binary,
        length: AttributeLength::Variable {
            max: MAX_VARIABLE_ATTRIBUTE_LEN,
        },
        read_only: false,
    },
    def(
        0x0820,
        "MEDIUM GLOBALLY UNIQUE IDENTIFIER",
        Binary,
        36,
        false,
    ),
    def(
        0x0821,
        "MEDIA POOL GLOBALLY UNIQUE IDENTIFIER",
        Binary,
        36,
        false,
    ),
];

/// Host vendor-specific attribute range (SPC-4).
pub const HOST_VENDOR_SPECIFIC: std::ops::RangeInclusive<u16> = 0x1400..=0x17FF;

/// Bytes of MAM space one stored attribute costs: value plus the 5-byte
/// attribute header (identifier, format, length).
const ATTRIBUTE_HEADER_LEN: u64 = 5;

/// Look up the definition of a standard attribute.
pub fn attribute_definition(id: u16) -> Option<&'static AttributeDef> {
    STANDARD_ATTRIBUTES.iter().find(|d| d.id == id)
}

/// One attribute value as READ ATTRIBUTE would report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MamAttribute {
    /// Attribute identifier.
    pub id: u16,
    /// Value format.
    pub format: AttributeFormat,
    /// READ ONLY bit.
    pub read_only: bool,
    /// Value bytes (binary numbers big-endian, ASCII space padded).
    pub value: Vec<u8>,
}

/// Why a WRITE ATTRIBUTE is refused (SPC-4: ILLEGAL REQUEST, INVALID FIELD IN
/// PARAMETER LIST / WRITE PROTECTED attribute).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MamError {
    /// Device or medium attribute: read only.
    #[error("MAM attribute {id:#06x} is read only")]
    ReadOnly {
        /// Attribute identifier.
        id: u16,
    },
    /// Identifier not supported for writing (reserved or unknown standard id).
    #[error("MAM attribute {id:#06x} is not supported")]
    Unsupported {
        /// Attribute identifier.
        id: u16,
    },
    /// Value length violates the attribute's length rule.
    #[error("MAM attribute {id:#06x}: length {len} invalid ({rule:?})")]
    WrongLength {
        /// Attribute identifier.
        id: u16,
        /// Supplied length.
        len: usize,
        /// The rule it violates.
        rule: AttributeLength,
    },
    /// FORMAT differs from the standard one.
    #[error("MAM attribute {id:#06x}: format {got:?} but {expected:?} required")]
    WrongFormat {
        /// Attribute identifier.
        id: u16,
        /// Required format.
        expected: AttributeFormat,
        /// Supplied format.
        got: AttributeFormat,
    },
    /// ASCII attribute containing bytes outside 0x20..=0x7E.
    #[error("MAM attribute {id:#06x}: value is not printable ASCII")]
    InvalidAscii {
        /// Attribute identifier.
        id: u16,
    },
    /// Not enough MAM space left.
    #[error("MAM is full: {needed} bytes needed, {available} available")]
    Full {
        /// Bytes the write needs.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
}

/// Values of the computed (device/medium) attributes, supplied by the
/// cartridge model for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceAttributeValues {
    /// Bytes still writable in the partition.
    pub remaining_capacity: u64,
    /// Capacity of the partition in bytes.
    pub max_capacity: u64,
    /// Times the cartridge was loaded.
    pub load_count: u64,
    /// Host bytes written in the medium's life.
    pub bytes_written_total: u64,
    /// Host bytes read in the medium's life.
    pub bytes_read_total: u64,
    /// Host bytes written in the current/last load.
    pub bytes_written_load: u64,
    /// Host bytes read in the current/last load.
    pub bytes_read_load: u64,
    /// Density code.
    pub density_code: u8,
    /// 0x00 data, 0x80 WORM.
    pub medium_type: u8,
    /// Changes whenever the volume's contents do, and only then (SPC-4 attribute 0009h;
    /// LTFS skips its consistency check when it matches the value its index recorded).
    /// Never `u32::MAX`, which means "unusable".
    pub volume_change_reference: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostValue {
    pub(crate) format: AttributeFormat,
    pub(crate) value: Vec<u8>,
}

/// The cartridge memory: medium identity and stored host attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mam {
    pub(crate) manufacturer: String,
    pub(crate) serial: String,
    pub(crate) manufacture_date: UnixTime,
    pub(crate) capacity: u64,
    pub(crate) host: BTreeMap<u16, HostValue>,
}

/// Default MEDIUM MANUFACTURER value.
pub const DEFAULT_MANUFACTURER: &str = "REEL";

fn pad_ascii(s: &str, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = s
        .bytes()
        .map(|b| if (0x20..=0x7E).contains(&b) { b } else { b'?' })
        .take(len)
        .collect();
    v.resize(len, b' ');
    v
}

impl Mam {
    /// A MAM with no host attributes. `manufacturer` (≤ 8 chars) and `serial`
    /// (≤ 32 chars) are truncated to their attribute widths; `capacity` is the
    /// MAM size in bytes (see [`crate::MediaType::mam_capacity`]).
    pub fn new(
        manufacturer: &str,
        serial: &str,
        manufacture_date: UnixTime,
        capacity: u64,
    ) -> Self {
        let clip = |s: &str, n: usize| -> String {
            String::from_utf8_lossy(&pad_ascii(s, n))
                .trim_end()
                .to_owned()
        };
        Mam {
            manufacturer: clip(manufacturer, 8),
            serial: clip(serial, 32),
            manufacture_date,
            capacity,
            host: BTreeMap::new(),
        }
    }

    /// MEDIUM MANUFACTURER text (unpadded).
    pub fn manufacturer(&self) -> &str {
        &self.manufacturer
    }

    /// MEDIUM SERIAL NUMBER text (unpadded).
    pub fn serial(&self) -> &str {
        &self.serial
    }

    /// Manufacture date.
    pub fn manufacture_date(&self) -> UnixTime {
        self.manufacture_date
    }

    /// Bytes of MAM space used by stored host attributes.
    pub fn used_space(&self) -> u64 {
        self.host
            .values()
            .map(|v| ATTRIBUTE_HEADER_LEN + v.value.len() as u64)
            .sum()
    }

    /// MAM SPACE REMAINING (attribute 0x0004).
    pub fn space_remaining(&self) -> u64 {
        self.capacity.saturating_sub(self.used_space())
    }

    /// Stored value of a host attribute.
    pub fn host_attribute(&self, id: u16) -> Option<&[u8]> {
        self.host.get(&id).map(|v| v.value.as_slice())
    }

    /// Validate a host attribute write without performing it.
    pub fn validate_write(id: u16, format: AttributeFormat, value: &[u8]) -> Result<(), MamError> {
        let def = attribute_definition(id);
        match (def, id) {
            (Some(d), _) if d.read_only => return Err(MamError::ReadOnly { id }),
            (None, 0x0000..=0x07FF) | (None, 0x0C00..=0x13FF) => {
                return Err(MamError::ReadOnly { id });
            }
            (None, _) if !HOST_VENDOR_SPECIFIC.contains(&id) => {
                return Err(MamError::Unsupported { id });
            }
            _ => {}
        }
        let (expected_format, rule) = match def {
            Some(d) => (Some(d.format), d.length),
            None => (
                None,
                AttributeLength::Variable {
                    max: MAX_VARIABLE_ATTRIBUTE_LEN,
                },
            ),
        };
        if let Some(expected) = expected_format
            && expected != format
        {
            return Err(MamError::WrongFormat {
                id,
                expected,
                got: format,
            });
        }
        // Length 0 deletes the attribute (SPC-4 WRITE ATTRIBUTE).
        if !value.is_empty() {
            let ok = match rule {
                AttributeLength::Fixed(n) => value.len() == usize::from(n),
                AttributeLength::Variable { max } => value.len() <= usize::from(max),
            };
            if !ok {
                return Err(MamError::WrongLength {
                    id,
                    len: value.len(),
                    rule,
                });
            }
        }
        if format == Ascii && value.iter().any(|b| !(0x20..=0x7E).contains(b)) {
            return Err(MamError::InvalidAscii { id });
        }
        Ok(())
    }

    /// WRITE ATTRIBUTE of one host attribute. An empty value deletes it.
    pub fn write(
        &mut self,
        id: u16,
        format: AttributeFormat,
        value: &[u8],
    ) -> Result<(), MamError> {
        Self::validate_write(id, format, value)?;
        if value.is_empty() {
            self.host.remove(&id);
            return Ok(());
        }
        let old = self
            .host
            .get(&id)
            .map_or(0, |v| ATTRIBUTE_HEADER_LEN + v.value.len() as u64);
        let needed = ATTRIBUTE_HEADER_LEN + value.len() as u64;
        let available = self.space_remaining() + old;
        if needed > available {
            return Err(MamError::Full { needed, available });
        }
        self.host.insert(
            id,
            HostValue {
                format,
                value: value.to_vec(),
            },
        );
        Ok(())
    }

    /// Convenience: write an ASCII attribute, padding `text` with spaces to
    /// the attribute's fixed width.
    pub fn write_ascii(&mut self, id: u16, text: &str) -> Result<(), MamError> {
        let value = match attribute_definition(id).map(|d| d.length) {
            Some(AttributeLength::Fixed(n)) if text.len() <= usize::from(n) => {
                let mut v = text.as_bytes().to_vec();
                v.resize(usize::from(n), b' ');
                v
            }
            _ => text.as_bytes().to_vec(),
        };
        self.write(id, Ascii, &value)
    }

    /// READ ATTRIBUTE of one attribute, computed ones taken from `dev`.
    pub fn read(&self, id: u16, dev: &DeviceAttributeValues) -> Option<MamAttribute> {
        let ro = |format, value: Vec<u8>| {
            Some(MamAttribute {
                id,
                format,
                read_only: true,
                value,
            })
        };
        let num = |v: u64| ro(Binary, v.to_be_bytes().to_vec());
        match id {
            0x0000 => num(dev.remaining_capacity / MIB),
            0x0001 => num(dev.max_capacity / MIB),
            0x0003 => num(dev.load_count),
            0x0004 => num(self.space_remaining()),
            0x0006 | 0x0405 => ro(Binary, vec![dev.density_code]),
            0x0009 => ro(Binary, dev.volume_change_reference.to_be_bytes().to_vec()),
            0x0220 => num(dev.bytes_written_total / MIB),
            0x0221 => num(dev.bytes_read_total / MIB),
            0x0222 => num(dev.bytes_written_load / MIB),
            0x0223 => num(dev.bytes_read_load / MIB),
            0x0400 => ro(Ascii, pad_ascii(&self.manufacturer, 8)),
            0x0401 => ro(Ascii, pad_ascii(&self.serial, 32)),
            0x0406 => ro(Ascii, self.manufacture_date.to_yyyymmdd().to_vec()),
            0x0407 => num(self.capacity),
            0x0408 => ro(Binary, vec![dev.medium_type]),
            0x0409 => ro(Binary, vec![0, 0]),
            _ => self.host.get(&id).map(|v| MamAttribute {
                id,
                format: v.format,
                read_only: false,
                value: v.value.clone(),
            }),
        }
    }

    /// All present attributes in ascending identifier order.
    pub fn list(&self, dev: &DeviceAttributeValues) -> Vec<MamAttribute> {
        let mut out = STANDARD_ATTRIBUTES
            .iter()
            .filter(|d| d.read_only)
            .map(|d| d.id)
            .chain(self.host.keys().copied())
            .filter_map(|id| self.read(id, dev))
            .collect::<Vec<_>>();
        out.sort_by_key(|a| a.id);
        out.dedup_by_key(|a| a.id);
        out
    }

    /// Stored host attributes (identifier, format, value) in ascending order.
    pub fn host_attributes(&self) -> impl Iterator<Item = (u16, AttributeFormat, &[u8])> {
        self.host
            .iter()
            .map(|(&id, v)| (id, v.format, v.value.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mam() -> Mam {
        Mam::new("REEL", "SER123", UnixTime(0), 16 * 1024)
    }

    #[test]
    fn every_writable_standard_attribute_accepts_its_exact_length() {
        let mut m = mam();
        for d in STANDARD_ATTRIBUTES.iter().filter(|d| !d.read_only) {
            let len = match d.length {
                AttributeLength::Fixed(n) => usize::from(n),
                AttributeLength::Variable { max } => usize::from(max),
            };
            m.write(d.id, d.format, &vec![b'A'; len])
                .unwrap_or_else(|e| panic!("{}: {e}", d.name));
            assert_eq!(m.host_attribute(d.id).map(<[u8]>::len), Some(len));
            if let AttributeLength::Fixed(n) = d.length {
                let e = m.write(d.id, d.format, &vec![b'A'; usize::from(n) + 1]);
                assert!(matches!(e, Err(MamError::WrongLength { .. })), "{}", d.name);
            }
        }
    }

    #[test]
    fn every_read_only_attribute_is_refused_and_readable() {
        let mut m = mam();
        let dev = DeviceAttributeValues::default();
        for d in STANDARD_ATTRIBUTES.iter().filter(|d| d.read_only) {
            assert_eq!(
                m.write(d.id, d.format, &[0]),
                Err(MamError::ReadOnly { id: d.id })
            );
            let a = m.read(d.id, &dev).expect("computed attribute present");
            assert!(a.read_only);
            assert_eq!(a.format, d.format, "{}", d.name);
            assert_eq!(
                AttributeLength::Fixed(a.value.len() as u16),
                d.length,
                "{}",
                d.name
            );
        }
    }

    #[test]
    fn standard_lengths_match_spc4() {
        let len = |id| attribute_definition(id).unwrap().length;
        assert_eq!(len(0x0800), AttributeLength::Fixed(8));
        assert_eq!(len(0x0801), AttributeLength::Fixed(32));
        assert_eq!(len(0x0803), AttributeLength::Fixed(160));
        assert_eq!(len(0x0804), AttributeLength::Fixed(12));
        assert_eq!(len(0x0806), AttributeLength::Fixed(32));
        assert_eq!(len(0x0820), AttributeLength::Fixed(36));
        assert_eq!(attribute_definition(0x0803).unwrap().format, Text);
    }

    #[test]
    fn computed_values_are_big_endian_mib() {
        let m = mam();
        let dev = DeviceAttributeValues {
            remaining_capacity: 5 * MIB + 1,
            max_capacity: 18_000_000_000_000,
            ..Default::default()
        };
        assert_eq!(m.read(0x0000, &dev).unwrap().value, 5u64.to_be_bytes());
        assert_eq!(
            m.read(0x0001, &dev).unwrap().value,
            (18_000_000_000_000 / MIB).to_be_bytes()
        );
        assert_eq!(m.read(0x0400, &dev).unwrap().value, b"REEL    ");
        assert_eq!(m.read(0x0004, &dev).unwrap().value, 16384u64.to_be_bytes());
        assert!(m.read(0x0800, &dev).is_none());
    }

    #[test]
    fn identity_is_clipped_to_attribute_width() {
        let m = Mam::new("VERYLONGNAME", &"S".repeat(40), UnixTime(0), 1024);
        assert_eq!(m.manufacturer(), "VERYLONG");
        assert_eq!(m.serial().len(), 32);
    }
}
