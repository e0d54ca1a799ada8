//! LTO media types, their native characteristics, and cartridge barcodes.

use std::fmt;
use std::str::FromStr;

/// One mebibyte (2^20 bytes); the unit of the MAM capacity attributes (SPC-4 §7.4).
pub const MIB: u64 = 1024 * 1024;

/// An LTO cartridge type (data or WORM) of generations LTO-5 through LTO-9.
///
/// Native capacities are decimal bytes (uncompressed), as printed on the
/// cartridge. Density codes are those reported by REPORT DENSITY SUPPORT and
/// the MODE SENSE block descriptor (SSC-4 §8.3, Annex on density codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MediaType {
    /// LTO-5 data cartridge (L5).
    Lto5,
    /// LTO-5 WORM cartridge (LV).
    Lto5Worm,
    /// LTO-6 data cartridge (L6).
    Lto6,
    /// LTO-6 WORM cartridge (LW).
    Lto6Worm,
    /// LTO-7 data cartridge (L7).
    Lto7,
    /// LTO-7 WORM cartridge (LX).
    Lto7Worm,
    /// LTO-8 data cartridge (L8).
    Lto8,
    /// LTO-8 WORM cartridge (LY).
    Lto8Worm,
    /// LTO-9 data cartridge (L9).
    Lto9,
    /// LTO-9 WORM cartridge (LZ).
    Lto9Worm,
}

impl MediaType {
    /// Every media type, in generation order.
    pub const ALL: [MediaType; 10] = [
        MediaType::Lto5,
        MediaType::Lto5Worm,
        MediaType::Lto6,
        MediaType::Lto6Worm,
        MediaType::Lto7,
        MediaType::Lto7Worm,
        MediaType::Lto8,
        MediaType::Lto8Worm,
        MediaType::Lto9,
        MediaType::Lto9Worm,
    ];

    /// LTO generation number (5..=9).
    pub const fn generation(self) -> u8 {
        match self {
            MediaType::Lto5 | MediaType::Lto5Worm => 5,
            MediaType::Lto6 | MediaType::Lto6Worm => 6,
            MediaType::Lto7 | MediaType::Lto7Worm => 7,
            MediaType::Lto8 | MediaType::Lto8Worm => 8,
            MediaType::Lto9 | MediaType::Lto9Worm => 9,
        }
    }

    /// Whether this is a write-once (WORM) cartridge: append only.
    pub const fn is_worm(self) -> bool {
        matches!(
            self,
            MediaType::Lto5Worm
                | MediaType::Lto6Worm
                | MediaType::Lto7Worm
                | MediaType::Lto8Worm
                | MediaType::Lto9Worm
        )
    }

    /// Native (uncompressed) capacity in decimal bytes.
    pub const fn native_capacity(self) -> u64 {
        const TB: u64 = 1_000_000_000_000;
        match self.generation() {
            5 => 1_500_000_000_000,
            6 => 2_500_000_000_000,
            7 => 6 * TB,
            8 => 12 * TB,
            _ => 18 * TB,
        }
    }

    /// Primary density code (SSC-4 density codes for LTO).
    pub const fn density_code(self) -> u8 {
        match self.generation() {
            5 => 0x58,
            6 => 0x5A,
            7 => 0x5C,
            8 => 0x5E,
            _ => 0x60,
        }
    }

    /// Maximum number of partitions the format supports.
    ///
    /// LTO-5/6 support two partitions, LTO-7 and later four. WORM cartridges
    /// cannot be partitioned, so they report one.
    pub const fn max_partitions(self) -> u8 {
        if self.is_worm() {
            1
        } else if self.generation() <= 6 {
            2
        } else {
            4
        }
    }

    /// Capacity of the cartridge memory (MAM) in bytes.
    pub const fn mam_capacity(self) -> u64 {
        if self.generation() <= 5 {
            8 * 1024
        } else {
            16 * 1024
        }
    }

    /// Value of the MEDIUM TYPE attribute 0x0408 (SPC-4): 0x00 data, 0x80 WORM.
    pub const fn mam_medium_type(self) -> u8 {
        if self.is_worm() { 0x80 } else { 0x00 }
    }

    /// The two-character media identifier used as barcode suffix (e.g. `L9`, `LZ`).
    pub const fn barcode_suffix(self) -> &'static str {
        match self {
            MediaType::Lto5 => "L5",
            MediaType::Lto5Worm => "LV",
            MediaType::Lto6 => "L6",
            MediaType::Lto6Worm => "LW",
            MediaType::Lto7 => "L7",
            MediaType::Lto7Worm => "LX",
            MediaType::Lto8 => "L8",
            MediaType::Lto8Worm => "LY",
            MediaType::Lto9 => "L9",
            MediaType::Lto9Worm => "LZ",
        }
    }

    /// Stable one-byte code used by [`crate::CartridgeInfo`]'s binary encoding.
    pub const fn code(self) -> u8 {
        (self.generation() << 1) | self.is_worm() as u8
    }

    /// Inverse of [`MediaType::code`].
    pub fn from_code(code: u8) -> Option<Self> {
        MediaType::ALL.into_iter().find(|m| m.code() == code)
    }

    /// Guess the media type from a barcode's two-character suffix.
    pub fn from_barcode(barcode: &Barcode) -> Option<Self> {
        let s = barcode.as_str();
        let suffix = s.get(s.len().checked_sub(2)?..)?;
        MediaType::ALL
            .into_iter()
            .find(|m| m.barcode_suffix() == suffix)
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LTO-{}", self.generation())?;
        if self.is_worm() {
            f.write_str(" WORM")?;
        }
        Ok(())
    }
}

/// Maximum length of a [`Barcode`] (the width of MAM attribute 0x0806 BARCODE).
pub const MAX_BARCODE_LEN: usize = 32;

/// A cartridge barcode (volume serial): 1..=32 printable ASCII characters
/// without spaces, e.g. `REL001L9`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Barcode(String);

/// Why a string is not a valid [`Barcode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BarcodeError {
    /// Empty string.
    #[error("barcode is empty")]
    Empty,
    /// More than [`MAX_BARCODE_LEN`] bytes.
    #[error("barcode is {0} bytes long, at most {MAX_BARCODE_LEN} allowed")]
    TooLong(usize),
    /// A byte outside printable ASCII (0x21..=0x7E).
    #[error("barcode contains invalid byte {0:#04x} (printable ASCII without spaces required)")]
    InvalidByte(u8),
}

impl Barcode {
    /// Validate and wrap a barcode.
    pub fn new(s: &str) -> Result<Self, BarcodeError> {
        Self::validate(s.as_bytes())?;
        Ok(Barcode(s.to_owned()))
    }

    /// Validate raw bytes as a barcode.
    pub fn from_bytes(b: &[u8]) -> Result<Self, BarcodeError> {
        Self::validate(b)?;
        // Validated as ASCII, so this cannot fail; avoid unwrap anyway.
        Ok(Barcode(b.iter().map(|&c| c as char).collect()))
    }

    fn validate(b: &[u8]) -> Result<(), BarcodeError> {
        if b.is_empty() {
            return Err(BarcodeError::Empty);
        }
        if b.len() > MAX_BARCODE_LEN {
            return Err(BarcodeError::TooLong(b.len()));
        }
        if let Some(&c) = b.iter().find(|c| !(0x21..=0x7E).contains(*c)) {
            return Err(BarcodeError::InvalidByte(c));
        }
        Ok(())
    }

    /// The barcode text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Barcode {
    type Err = BarcodeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Barcode::new(s)
    }
}

impl fmt::Display for Barcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_and_density_codes() {
        assert_eq!(MediaType::Lto5.native_capacity(), 1_500_000_000_000);
        assert_eq!(MediaType::Lto6Worm.native_capacity(), 2_500_000_000_000);
        assert_eq!(MediaType::Lto7.native_capacity(), 6_000_000_000_000);
        assert_eq!(MediaType::Lto8.native_capacity(), 12_000_000_000_000);
        assert_eq!(MediaType::Lto9.native_capacity(), 18_000_000_000_000);
        let codes: Vec<u8> = [
            MediaType::Lto5,
            MediaType::Lto6,
            MediaType::Lto7,
            MediaType::Lto8,
            MediaType::Lto9,
        ]
        .iter()
        .map(|m| m.density_code())
        .collect();
        assert_eq!(codes, [0x58, 0x5A, 0x5C, 0x5E, 0x60]);
        assert_eq!(MediaType::Lto9Worm.density_code(), 0x60);
    }

    #[test]
    fn partitions_and_worm() {
        assert_eq!(MediaType::Lto5.max_partitions(), 2);
        assert_eq!(MediaType::Lto6.max_partitions(), 2);
        assert_eq!(MediaType::Lto7.max_partitions(), 4);
        assert_eq!(MediaType::Lto9.max_partitions(), 4);
        assert_eq!(MediaType::Lto9Worm.max_partitions(), 1);
        assert!(MediaType::Lto8Worm.is_worm());
        assert!(!MediaType::Lto8.is_worm());
        assert_eq!(MediaType::Lto8Worm.mam_medium_type(), 0x80);
    }

    #[test]
    fn codes_round_trip_and_are_unique() {
        for m in MediaType::ALL {
            assert_eq!(MediaType::from_code(m.code()), Some(m));
        }
        assert_eq!(MediaType::from_code(0), None);
        assert_eq!(MediaType::from_code(0xFF), None);
    }

    #[test]
    fn barcode_validation() {
        assert_eq!(Barcode::new("REL001L9").unwrap().as_str(), "REL001L9");
        assert_eq!(Barcode::new(""), Err(BarcodeError::Empty));
        assert_eq!(
            Barcode::new("REL 01L9"),
            Err(BarcodeError::InvalidByte(b' '))
        );
        assert_eq!(Barcode::new("RÉL"), Err(BarcodeError::InvalidByte(0xC3)));
        assert!(Barcode::new(&"A".repeat(32)).is_ok());
        assert_eq!(
            Barcode::new(&"A".repeat(33)),
            Err(BarcodeError::TooLong(33))
        );
        assert_eq!(
            Barcode::from_bytes(b"AB\x7f"),
            Err(BarcodeError::InvalidByte(0x7f))
        );
    }

    #[test]
    fn media_type_from_barcode_suffix() {
        let b = Barcode::new("REL001L9").unwrap();
        assert_eq!(MediaType::from_barcode(&b), Some(MediaType::Lto9));
        let b = Barcode::new("WRM001LX").unwrap();
        assert_eq!(MediaType::from_barcode(&b), Some(MediaType::Lto7Worm));
        let b = Barcode::new("X").unwrap();
        assert_eq!(MediaType::from_barcode(&b), None);
    }
}
