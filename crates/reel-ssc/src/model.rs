//! Drive identities (INQUIRY strings of real LTO drives) and the LTO generation rules that
//! decide which cartridges a drive reads and writes.

use reel_media::MediaType;

/// The company whose drive is emulated. Windows and LTFS pick drivers and quirks by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    Hpe,
    Ibm,
    Quantum,
}

/// Physical size of the emulated drive (reported nowhere but in the product string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FormFactor {
    FullHeight,
    HalfHeight,
}

/// One emulated drive model: its INQUIRY identity and LTO generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DriveModel {
    name: &'static str,
    family: Family,
    form_factor: FormFactor,
    generation: u8,
    vendor: &'static str,
    product: &'static str,
    revision: &'static str,
}

const fn model(
    name: &'static str,
    family: Family,
    form_factor: FormFactor,
    generation: u8,
    vendor: &'static str,
    product: &'static str,
    revision: &'static str,
) -> DriveModel {
    DriveModel {
        name,
        family,
        form_factor,
        generation,
        vendor,
        product,
        revision,
    }
}

use Family::{Hpe, Ibm, Quantum};
use FormFactor::{FullHeight, HalfHeight};

/// Every model reel emulates. Product strings are the drives' own INQUIRY strings: IBM
/// "ULT3580-TDn" (full height) and "ULT3580-HHn" (half height); HP/HPE "Ultrium n-SCSI" (the
/// same string for both heights; vendor "HP" up to LTO-7 and "HPE" from LTO-8, which the
/// HPE Windows drivers match on); Quantum "ULTRIUM-HHn". Revisions are reel's own 4-character
/// levels, chosen above the minimum firmware levels LTFS checks for IBM drives (it compares
/// the four bytes as a big-endian number).
static MODELS: [DriveModel; 25] = [
    model("ibm-td5", Ibm, FullHeight, 5, "IBM", "ULT3580-TD5", "R5T1"),
    model(
        "ibm-td5-hh",
        Ibm,
        HalfHeight,
        5,
        "IBM",
        "ULT3580-HH5",
        "R5H1",
    ),
    model("ibm-td6", Ibm, FullHeight, 6, "IBM", "ULT3580-TD6", "R6T1"),
    model(
        "ibm-td6-hh",
        Ibm,
        HalfHeight,
        6,
        "IBM",
        "ULT3580-HH6",
        "R6H1",
    ),
    model("ibm-td7", Ibm, FullHeight, 7, "IBM", "ULT3580-TD7", "R7T1"),
    model(
        "ibm-td7-hh",
        Ibm,
        HalfHeight,
        7,
        "IBM",
        "ULT3580-HH7",
        "R7H1",
    ),
    model("ibm-td8", Ibm, FullHeight, 8, "IBM", "ULT3580-TD8", "R8T1"),
    model(
        "ibm-td8-hh",
        Ibm,
        HalfHeight,
        8,
        "IBM",
        "ULT3580-HH8",
        "R8H1",
    ),
    model("ibm-td9", Ibm, FullHeight, 9, "IBM", "ULT3580-TD9", "R9T1"),
    model(
        "ibm-td9-hh",
        Ibm,
        HalfHeight,
        9,
        "IBM",
        "ULT3580-HH9",
        "R9H1",
    ),
    model(
        "hpe-ultrium5",
        Hpe,
        FullHeight,
        5,
        "HP",
        "Ultrium 5-SCSI",
        "R5P1",
    ),
    model(
        "hpe-ultrium6",
        Hpe,
        FullHeight,
        6,
        "HP",
        "Ultrium 6-SCSI",
        "R6P1",
    ),
    model(
        "hpe-ultrium7",
        Hpe,
        FullHeight,
        7,
        "HP",
        "Ultrium 7-SCSI",
        "R7P1",
    ),
    model(
        "hpe-ultrium8",
        Hpe,
        FullHeight,
        8,
        "HPE",
        "Ultrium 8-SCSI",
        "R8P1",
    ),
    model(
        "hpe-ultrium9",
        Hpe,
        FullHeight,
        9,
        "HPE",
        "Ultrium 9-SCSI",
        "R9P1",
    ),
    model(
        "hpe-ultrium5-hh",
        Hpe,
        HalfHeight,
        5,
        "HP",
        "Ultrium 5-SCSI",
        "R5Q1",
    ),
    model(
        "hpe-ultrium6-hh",
        Hpe,
        HalfHeight,
        6,
        "HP",
        "Ultrium 6-SCSI",
        "R6Q1",
    ),
    model(
        "hpe-ultrium7-hh",
        Hpe,
        HalfHeight,
        7,
        "HP",
        "Ultrium 7-SCSI",
        "R7Q1",
    ),
    model(
        "hpe-ultrium8-hh",
        Hpe,
        HalfHeight,
        8,
        "HPE",
        "Ultrium 8-SCSI",
        "R8Q1",
    ),
    model(
        "hpe-ultrium9-hh",
        Hpe,
        HalfHeight,
        9,
        "HPE",
        "Ultrium 9-SCSI",
        "R9Q1",
    ),
    model(
        "quantum-lto5",
        Quantum,
        HalfHeight,
        5,
        "QUANTUM",
        "ULTRIUM-HH5",
        "R5U1",
    ),
    model(
        "quantum-lto6",
        Quantum,
        HalfHeight,
        6,
        "QUANTUM",
        "ULTRIUM-HH6",
        "R6U1",
    ),
    model(
        "quantum-lto7",
        Quantum,
        HalfHeight,
        7,
        "QUANTUM",
        "ULTRIUM-HH7",
        "R7U1",
    ),
    model(
        "quantum-lto8",
        Quantum,
        HalfHeight,
        8,
        "QUANTUM",
        "ULTRIUM-HH8",
        "R8U1",
    ),
    model(
        "quantum-lto9",
        Quantum,
        HalfHeight,
        9,
        "QUANTUM",
        "ULTRIUM-HH9",
        "R9U1",
    ),
];

impl DriveModel {
    /// Every emulated model.
    pub fn all() -> &'static [DriveModel] {
        &MODELS
    }

    /// The model named `name` (case-insensitive), e.g. "ibm-td9", "ibm-td9-hh",
    /// "hpe-ultrium9", "quantum-lto9".
    pub fn by_name(name: &str) -> Option<&'static DriveModel> {
        MODELS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
    }

    /// reel's name for the model (configuration key).
    pub fn name(&self) -> &str {
        self.name
    }

    /// T10 VENDOR IDENTIFICATION.
    pub fn vendor(&self) -> &str {
        self.vendor
    }

    /// PRODUCT IDENTIFICATION.
    pub fn product(&self) -> &str {
        self.product
    }

    /// PRODUCT REVISION LEVEL (firmware level).
    pub fn revision(&self) -> &str {
        self.revision
    }

    /// LTO generation, 5..=9.
    pub fn generation(&self) -> u8 {
        self.generation
    }

    /// Vendor family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Full or half height.
    pub fn form_factor(&self) -> FormFactor {
        self.form_factor
    }

    /// LTO compatibility rules for writing: an LTO-n drive writes generations n and n-1
    /// (LTO-8 writes LTO-7 and LTO-8, LTO-9 writes LTO-8 and LTO-9). WORM cartridges follow
    /// the same rules.
    pub fn can_write(&self, media: MediaType) -> bool {
        let (g, m) = (self.generation, media.generation());
        m == g || m + 1 == g
    }

    /// LTO compatibility rules for reading: up to LTO-7 a drive reads generations n, n-1 and
    /// n-2; LTO-8 reads only LTO-7 and LTO-8 and LTO-9 only LTO-8 and LTO-9 (the LTO-8 and
    /// LTO-9 formats dropped the second backward generation).
    pub fn can_read(&self, media: MediaType) -> bool {
        let (g, m) = (self.generation, media.generation());
        if g >= 8 {
            m == g || m + 1 == g
        } else {
            m <= g && m + 2 >= g
        }
    }

    /// The density codes (REPORT DENSITY SUPPORT, block descriptor) this drive can read,
    /// oldest first, with whether it can write them. LTO-8 also writes LTO-7 type M
    /// cartridges (M8, density 5Dh).
    pub(crate) fn densities(&self) -> Vec<(Density, bool)> {
        let mut out: Vec<(Density, bool)> = DENSITIES
            .iter()
            .filter(|d| {
                let media = d.media;
                media.is_some_and(|m| self.can_read(m))
                    || (d.code == DENSITY_M8 && self.generation == 8)
            })
            .map(|d| {
                let writable = match d.media {
                    Some(m) => self.can_write(m),
                    None => self.generation == 8,
                };
                (*d, writable)
            })
            .collect();
        out.sort_by_key(|(d, _)| d.code);
        out
    }

    /// Number of partitions this drive's format supports (LTO-5/6: 2, LTO-7 and later: 4).
    pub(crate) fn max_partitions(&self) -> u8 {
        if self.generation <= 6 { 2 } else { 4 }
    }
}

/// LTO-7 type M cartridge formatted by an LTO-8 drive (M8).
pub(crate) const DENSITY_M8: u8 = 0x5D;

/// One LTO density as REPORT DENSITY SUPPORT describes it (SSC-4, REPORT DENSITY SUPPORT;
/// the figures are the nominal ones of the LTO formats as drive vendors publish them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Density {
    pub code: u8,
    /// The data cartridge of this density (`None` for M8, which reel-media does not model).
    pub media: Option<MediaType>,
    pub bits_per_mm: u32,
    pub tracks: u16,
    /// Native capacity in megabytes (10^6 bytes).
    pub capacity_mb: u32,
    /// Medium length in metres.
    pub length_m: u16,
    pub name: &'static str,
    pub description: &'static str,
}

// One table row per call: named fields would make the table unreadable.
#[allow(clippy::too_many_arguments)]
const fn density(
    code: u8,
    media: Option<MediaType>,
    bits_per_mm: u32,
    tracks: u16,
    capacity_mb: u32,
    length_m: u16,
    name: &'static str,
    description: &'static str,
) -> Density {
    Density {
        code,
        media,
        bits_per_mm,
        tracks,
        capacity_mb,
        length_m,
        name,
        description,
    }
}

pub(crate) static DENSITIES: [Density; 6] = [
    density(
        0x58,
        Some(MediaType::Lto5),
        15142,
        1280,
        1_500_000,
        846,
        "U-516",
        "Ultrium 5/16T",
    ),
    density(
        0x5A,
        Some(MediaType::Lto6),
        15142,
        2176,
        2_500_000,
        846,
        "U-616",
        "Ultrium 6/16T",
    ),
    density(
        0x5C,
        Some(MediaType::Lto7),
        19107,
        3584,
        6_000_000,
        960,
        "U-732",
        "Ultrium 7/32T",
    ),
    density(
        DENSITY_M8,
        None,
        19107,
        5376,
        9_000_000,
        960,
        "U-732M",
        "Ultrium M8/32T",
    ),
    density(
        0x5E,
        Some(MediaType::Lto8),
        20669,
        6656,
        12_000_000,
        960,
        "U-832",
        "Ultrium 8/32T",
    ),
    density(
        0x60,
        Some(MediaType::Lto9),
        23165,
        8960,
        18_000_000,
        1035,
        "U-932",
        "Ultrium 9/32T",
    ),
];

/// The density entry of a media type.
pub(crate) fn density_of(media: MediaType) -> Option<&'static Density> {
    DENSITIES.iter().find(|d| d.code == media.density_code())
}

/// MEDIUM TYPE of the mode parameter header and REPORT DENSITY SUPPORT (MEDIUM TYPE = 1)
/// for an LTO cartridge, as IBM LTO drives report it: generation × 10h + 8 for data
/// cartridges, + 0Ch for WORM.
pub(crate) fn medium_type_code(media: MediaType) -> u8 {
    let base = media.generation() << 4;
    if media.is_worm() {
        base | 0x0C
    } else {
        base | 0x08
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for m in DriveModel::all() {
            assert_eq!(DriveModel::by_name(m.name()), Some(m));
            assert!(m.vendor().len() <= 8 && m.product().len() <= 16);
            assert_eq!(m.revision().len(), 4);
            assert!((5..=9).contains(&m.generation()));
        }
        assert_eq!(
            DriveModel::by_name("IBM-TD9").unwrap().product(),
            "ULT3580-TD9"
        );
        assert_eq!(
            DriveModel::by_name("ibm-td9-hh").unwrap().product(),
            "ULT3580-HH9"
        );
        assert_eq!(DriveModel::by_name("hpe-ultrium7").unwrap().vendor(), "HP");
        assert_eq!(DriveModel::by_name("hpe-ultrium8").unwrap().vendor(), "HPE");
        assert_eq!(
            DriveModel::by_name("quantum-lto8").unwrap().product(),
            "ULTRIUM-HH8"
        );
        assert!(DriveModel::by_name("ibm-td4").is_none());
    }

    #[test]
    fn lto_generation_rules() {
        use MediaType::*;
        let m = |g: u8| {
            DriveModel::all()
                .iter()
                .find(|m| m.generation() == g)
                .unwrap()
        };
        assert!(m(5).can_read(Lto5) && m(5).can_write(Lto5) && !m(5).can_read(Lto6));
        assert!(m(6).can_read(Lto5) && m(6).can_write(Lto5) && m(6).can_write(Lto6));
        assert!(m(7).can_read(Lto5) && !m(7).can_write(Lto5) && m(7).can_write(Lto6));
        assert!(!m(8).can_read(Lto6) && m(8).can_read(Lto7) && m(8).can_write(Lto7));
        assert!(!m(9).can_read(Lto7) && m(9).can_write(Lto8) && m(9).can_write(Lto9Worm));
        assert!(!m(8).can_read(Lto9));
        let codes: Vec<u8> = m(8).densities().iter().map(|(d, _)| d.code).collect();
        assert_eq!(codes, [0x5C, 0x5D, 0x5E]);
        let codes: Vec<(u8, bool)> = m(7).densities().iter().map(|(d, w)| (d.code, *w)).collect();
        assert_eq!(codes, [(0x58, false), (0x5A, true), (0x5C, true)]);
        assert_eq!(medium_type_code(Lto9), 0x98);
        assert_eq!(medium_type_code(Lto5Worm), 0x5C);
    }
}
