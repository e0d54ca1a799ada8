//! The SCSI the benchmark speaks: CDBs (SPC-4, SSC-4, SMC-3), the few answers it parses
//! (REPORT LUNS, INQUIRY, READ BLOCK LIMITS, MODE SENSE(6), READ ELEMENT STATUS) and how a
//! failed command is described (status, sense key, ASC/ASCQ, flags, the raw bytes).

use std::fmt;

use anyhow::bail;
use reel_scsi::{Sense, SenseKey, parse_sense};

pub const TEST_UNIT_READY: [u8; 6] = [0x00, 0, 0, 0, 0, 0];
pub const REWIND: [u8; 6] = [0x01, 0, 0, 0, 0, 0];
pub const READ_BLOCK_LIMITS: [u8; 6] = [0x05, 0, 0, 0, 0, 0];
/// LOAD UNLOAD with LOAD = 0, IMMED = 0: rewind and unload.
pub const UNLOAD: [u8; 6] = [0x1B, 0, 0, 0, 0, 0];

fn len24(len: u32) -> [u8; 3] {
    debug_assert!(len < 1 << 24);
    let b = len.to_be_bytes();
    [b[1], b[2], b[3]]
}

/// WRITE(6), variable-length (FIXED = 0): one record of `len` bytes.
pub fn write6(len: u32) -> [u8; 6] {
    let l = len24(len);
    [0x0A, 0, l[0], l[1], l[2], 0]
}

/// READ(6), variable-length, SILI = 0: one record of at most `len` bytes.
pub fn read6(len: u32) -> [u8; 6] {
    let l = len24(len);
    [0x08, 0, l[0], l[1], l[2], 0]
}

/// WRITE FILEMARKS(6): `count` filemarks; IMMED = 0 is a synchronising point.
pub fn write_filemarks(count: u32, immed: bool) -> [u8; 6] {
    let l = len24(count);
    [0x10, u8::from(immed), l[0], l[1], l[2], 0]
}

/// READ(10) of `bytes` at `lba` on a disk of `block`-byte blocks (SBC-3 §5.11).
pub fn read10(lba: u32, bytes: u32, block: u32) -> [u8; 10] {
    let blocks = u16::try_from(bytes / block).expect("sizes are validated to fit READ(10)");
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// WRITE(10) of `bytes` at `lba`, laid out as READ(10) (SBC-3 §5.32).
pub fn write10(lba: u32, bytes: u32, block: u32) -> [u8; 10] {
    let mut cdb = read10(lba, bytes, block);
    cdb[0] = 0x2A;
    cdb
}

/// INQUIRY, standard data.
pub fn inquiry(alloc: u16) -> [u8; 6] {
    let a = alloc.to_be_bytes();
    [0x12, 0, 0, a[0], a[1], 0]
}

/// REPORT LUNS, select report 0.
pub fn report_luns(alloc: u32) -> [u8; 12] {
    let a = alloc.to_be_bytes();
    [0xA0, 0, 0, 0, 0, 0, a[0], a[1], a[2], a[3], 0, 0]
}

/// MODE SENSE(6) of all pages (3Fh), block descriptors included.
pub fn mode_sense6(alloc: u8) -> [u8; 6] {
    [0x1A, 0, 0x3F, 0, alloc, 0]
}

/// MODE SELECT(6), PF = 1, with a parameter list of `len` bytes.
pub fn mode_select6(len: u8) -> [u8; 6] {
    [0x15, 0x10, 0, 0, len, 0]
}

/// READ ELEMENT STATUS with VOLTAG for every element of `element_type` (0 = all).
pub fn read_element_status(element_type: u8, alloc: u32) -> [u8; 12] {
    let a = alloc.to_be_bytes();
    [
        0xB8,
        0x10 | (element_type & 0x0F),
        0,
        0,
        0xFF,
        0xFF,
        0,
        a[1],
        a[2],
        a[3],
        0,
        0,
    ]
}

/// MOVE MEDIUM from `source` to `destination` with transport element `transport`.
pub fn move_medium(transport: u16, source: u16, destination: u16) -> [u8; 12] {
    let (t, s, d) = (
        transport.to_be_bytes(),
        source.to_be_bytes(),
        destination.to_be_bytes(),
    );
    [0xA5, 0, t[0], t[1], s[0], s[1], d[0], d[1], 0, 0, 0, 0]
}

/// The command's name for messages.
pub fn command_name(cdb: &[u8]) -> &'static str {
    match cdb.first() {
        Some(0x00) => "TEST UNIT READY",
        Some(0x01) => "REWIND",
        Some(0x03) => "REQUEST SENSE",
        Some(0x05) => "READ BLOCK LIMITS",
        Some(0x08) => "READ(6)",
        Some(0x0A) => "WRITE(6)",
        Some(0x10) => "WRITE FILEMARKS(6)",
        Some(0x12) => "INQUIRY",
        Some(0x15) => "MODE SELECT(6)",
        Some(0x1A) => "MODE SENSE(6)",
        Some(0x1B) => "LOAD UNLOAD",
        Some(0x2B) => "LOCATE(10)",
        Some(0x34) => "READ POSITION",
        Some(0xA0) => "REPORT LUNS",
        Some(0xA5) => "MOVE MEDIUM",
        Some(0xB8) => "READ ELEMENT STATUS",
        _ => "command",
    }
}

/// SAM-5 status names.
pub fn status_name(status: u8) -> String {
    let name = match status {
        0x00 => "GOOD",
        0x02 => "CHECK CONDITION",
        0x04 => "CONDITION MET",
        0x08 => "BUSY",
        0x18 => "RESERVATION CONFLICT",
        0x28 => "TASK SET FULL",
        0x30 => "ACA ACTIVE",
        0x40 => "TASK ABORTED",
        _ => return format!("status {status:#04x}"),
    };
    format!("{name} ({status:#04x})")
}

/// One line for sense data: key, ASC/ASCQ with its name, FILEMARK/EOM/ILI, INFORMATION, and
/// the raw bytes (so nothing is lost when the parser does not know a field).
pub fn describe_sense(bytes: &[u8]) -> String {
    let raw: Vec<String> = bytes.iter().take(32).map(|b| format!("{b:02x}")).collect();
    let raw = raw.join(" ");
    match parse_sense(bytes) {
        Ok(s) => {
            let key = s
                .key
                .name()
                .map_or_else(|| format!("sense key {:#x}", s.key.0), str::to_string);
            let mut text = format!("{key}, {:?}", s.asc);
            let flags: Vec<&str> = [(s.filemark, "FILEMARK"), (s.eom, "EOM"), (s.ili, "ILI")]
                .into_iter()
                .filter_map(|(set, name)| set.then_some(name))
                .collect();
            if !flags.is_empty() {
                text.push_str(&format!(" [{}]", flags.join(" ")));
            }
            if s.deferred {
                text.push_str(" (deferred error)");
            }
            if let Some(info) = s.information {
                text.push_str(&format!(", information {}", info as i64 as i32));
            }
            format!("{text} (sense bytes: {raw})")
        }
        Err(e) => format!("unparsable sense data ({e}): {raw}"),
    }
}

/// A command that did not end as expected: which drive, what, and what the target said.
#[derive(Debug, Clone)]
pub struct CommandFailure {
    pub target: String,
    pub lun: u64,
    /// What the command was for ("record 1234 at byte 323485696", "load").
    pub context: String,
    pub cdb: Vec<u8>,
    pub status: u8,
    pub sense: Option<Vec<u8>>,
}

impl CommandFailure {
    pub fn parsed_sense(&self) -> Option<Sense> {
        self.sense.as_deref().and_then(|s| parse_sense(s).ok())
    }
}

impl fmt::Display for CommandFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cdb: Vec<String> = self.cdb.iter().map(|b| format!("{b:02x}")).collect();
        write!(
            f,
            "{} LUN {}: {} ({}) failed with {}",
            self.target,
            self.lun,
            command_name(&self.cdb),
            self.context,
            status_name(self.status)
        )?;
        match &self.sense {
            Some(s) => write!(f, ": {}", describe_sense(s))?,
            None if self.status == 0x02 => write!(f, " (no sense data)")?,
            None => {}
        }
        write!(f, "; CDB {}", cdb.join(" "))
    }
}

impl std::error::Error for CommandFailure {}

/// Whether sense data says "unit attention" (to be cleared by retrying).
pub fn is_unit_attention(sense: Option<&[u8]>) -> bool {
    sense
        .and_then(|s| parse_sense(s).ok())
        .is_some_and(|s| s.key == SenseKey::UNIT_ATTENTION)
}

/// Whether sense data says "not ready" (becoming ready, or no medium yet).
pub fn is_not_ready(sense: Option<&[u8]>) -> bool {
    sense
        .and_then(|s| parse_sense(s).ok())
        .is_some_and(|s| s.key == SenseKey::NOT_READY)
}

/// The LUNs of a REPORT LUNS answer.
pub fn parse_report_luns(data: &[u8]) -> anyhow::Result<Vec<u64>> {
    if data.len() < 8 {
        bail!("REPORT LUNS answer is {} bytes", data.len());
    }
    let list = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let end = (8 + list).min(data.len());
    Ok(data[8..end]
        .chunks_exact(8)
        .map(|entry| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(entry);
            reel_scsi::decode_lun(raw)
        })
        .collect())
}

/// Standard INQUIRY data: peripheral device type, vendor, product, revision.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Inquiry {
    pub device_type: u8,
    pub vendor: String,
    pub product: String,
    pub revision: String,
}

pub fn parse_inquiry(data: &[u8]) -> anyhow::Result<Inquiry> {
    if data.len() < 36 {
        bail!("INQUIRY answer is {} bytes, fewer than 36", data.len());
    }
    let text = |r: std::ops::Range<usize>| String::from_utf8_lossy(&data[r]).trim().to_string();
    Ok(Inquiry {
        device_type: data[0] & 0x1F,
        vendor: text(8..16),
        product: text(16..32),
        revision: text(32..36),
    })
}

/// READ BLOCK LIMITS: (largest, smallest) record the drive accepts.
pub fn parse_block_limits(data: &[u8]) -> anyhow::Result<(u32, u32)> {
    if data.len() < 6 {
        bail!(
            "READ BLOCK LIMITS answer is {} bytes, fewer than 6",
            data.len()
        );
    }
    let max = u32::from_be_bytes([0, data[1], data[2], data[3]]);
    let min = u32::from(u16::from_be_bytes([data[4], data[5]]));
    Ok((max, min))
}

/// The MODE SELECT(6) parameter list that switches to variable-length records: the mode
/// parameter header (device-specific byte kept but for WP, which is not settable) and one
/// block descriptor with the current density code, zero blocks and block length 0.
pub fn variable_block_mode(mode_sense: &[u8]) -> anyhow::Result<[u8; 12]> {
    if mode_sense.len() < 4 {
        bail!("MODE SENSE(6) answer is {} bytes", mode_sense.len());
    }
    let device_specific = mode_sense[2] & 0x7F;
    let density = if mode_sense[3] >= 8 && mode_sense.len() >= 12 {
        mode_sense[4]
    } else {
        0
    };
    Ok([0, 0, device_specific, 8, density, 0, 0, 0, 0, 0, 0, 0])
}

/// The block length of the first block descriptor of a MODE SENSE(6) answer.
pub fn block_length(mode_sense: &[u8]) -> Option<u32> {
    (mode_sense.len() >= 12 && mode_sense[3] >= 8)
        .then(|| u32::from_be_bytes([0, mode_sense[9], mode_sense[10], mode_sense[11]]))
}

/// SMC element types.
pub const TRANSPORT: u8 = 1;
pub const STORAGE: u8 = 2;
pub const IMPORT_EXPORT: u8 = 3;
pub const DATA_TRANSFER: u8 = 4;

/// One element of a READ ELEMENT STATUS answer.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Element {
    pub element_type: u8,
    pub address: u16,
    pub full: bool,
    /// Primary volume tag (barcode), when reported.
    pub barcode: Option<String>,
    /// The storage element the medium came from, when valid.
    pub source: Option<u16>,
}

/// Parses READ ELEMENT STATUS data (SMC-3 §6.12): element status pages, each with a header
/// naming the type, the descriptor length and whether volume tags follow. Descriptors
/// truncated below 12 bytes are ignored.
pub fn parse_element_status(data: &[u8]) -> anyhow::Result<Vec<Element>> {
    if data.len() < 8 {
        bail!("READ ELEMENT STATUS answer is {} bytes", data.len());
    }
    let report = u32::from_be_bytes([0, data[5], data[6], data[7]]) as usize;
    let end = (8 + report).min(data.len());
    let mut out = Vec::new();
    let mut at = 8;
    while at + 8 <= end {
        let element_type = data[at];
        let pvoltag = data[at + 1] & 0x80 != 0;
        let descriptor_len = usize::from(u16::from_be_bytes([data[at + 2], data[at + 3]]));
        let page_bytes = u32::from_be_bytes([0, data[at + 5], data[at + 6], data[at + 7]]) as usize;
        let page_end = (at + 8 + page_bytes).min(end);
        if descriptor_len < 12 {
            bail!("element descriptors of {descriptor_len} bytes (at least 12 expected)");
        }
        let mut d = at + 8;
        // A last descriptor cut short is still read as far as it goes: tgt counts its 8-byte
        // page header in the report's byte count and so sends 8 bytes fewer than it means
        // (the volume tag still fits).
        while d + 12 <= page_end {
            let desc = &data[d..(d + descriptor_len).min(page_end)];
            let barcode = (pvoltag && desc.len() >= 12 + 32)
                .then(|| String::from_utf8_lossy(&desc[12..44]).trim().to_string())
                .filter(|b| !b.is_empty());
            out.push(Element {
                element_type,
                address: u16::from_be_bytes([desc[0], desc[1]]),
                full: desc[2] & 0x01 != 0,
                barcode,
                source: (desc[9] & 0x80 != 0).then(|| u16::from_be_bytes([desc[10], desc[11]])),
            });
            d += descriptor_len;
        }
        at = page_end.max(at + 8);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_scsi::{Asc, SenseFormat};

    #[test]
    fn cdbs() {
        assert_eq!(
            read10(0x01020304, 1 << 20, 512),
            [0x28, 0, 1, 2, 3, 4, 0, 0x08, 0, 0]
        );
        assert_eq!(write10(7, 65536, 512)[0], 0x2a);
        assert_eq!(&write10(7, 65536, 512)[7..9], &[0, 128]);
        assert_eq!(write6(256 << 10), [0x0A, 0, 0x04, 0, 0, 0]);
        assert_eq!(read6(0xFF_FFFF), [0x08, 0, 0xFF, 0xFF, 0xFF, 0]);
        assert_eq!(write_filemarks(1, false), [0x10, 0, 0, 0, 1, 0]);
        assert_eq!(write_filemarks(2, true), [0x10, 1, 0, 0, 2, 0]);
        assert_eq!(
            move_medium(0, 0x0401, 0x0101),
            [0xA5, 0, 0, 0, 4, 1, 1, 1, 0, 0, 0, 0]
        );
        assert_eq!(read_element_status(4, 0xFFFF)[1], 0x14);
        assert_eq!(command_name(&write6(1)), "WRITE(6)");
        assert_eq!(command_name(&[0xEE]), "command");
    }

    #[test]
    fn sense_is_described_with_key_code_flags_and_residue() {
        let mut sense = Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR);
        sense.eom = true;
        sense.information = Some(262_144);
        let bytes = sense.encode(SenseFormat::Fixed);
        let text = describe_sense(&bytes);
        assert!(
            text.starts_with("MEDIUM ERROR, 0Ch/00h WRITE ERROR [EOM], information 262144"),
            "{text}"
        );
        assert!(text.contains("sense bytes: f0 00 43"), "{text}");

        // A filemark on READ: NO SENSE, FILEMARK, the residue as INFORMATION.
        let mut fm = Sense::no_sense();
        fm.filemark = true;
        fm.ili = false;
        fm.asc = Asc::FILEMARK_DETECTED;
        fm.information = Some(65536);
        let text = describe_sense(&fm.encode(SenseFormat::Descriptor));
        assert!(
            text.starts_with("NO SENSE, 00h/01h FILEMARK DETECTED [FILEMARK], information 65536"),
            "{text}"
        );

        // Negative residues (overlength records) print as signed numbers.
        let mut ili = Sense::no_sense();
        ili.ili = true;
        ili.information = Some((-100i64) as u64);
        assert!(
            describe_sense(&ili.encode(SenseFormat::Fixed)).contains("[ILI], information -100")
        );

        assert!(describe_sense(&[0x70, 0]).starts_with("unparsable sense data"));
        assert!(describe_sense(&[0x12; 18]).contains("unparsable"));
    }

    #[test]
    fn failures_name_the_command_and_the_sense() {
        let failure = CommandFailure {
            target: "tgt drive 2".into(),
            lun: 3,
            context: "record 7 at byte 458752".into(),
            cdb: write6(65536).to_vec(),
            status: 2,
            sense: Some(
                Sense::new(
                    SenseKey::VOLUME_OVERFLOW,
                    Asc::END_OF_PARTITION_MEDIUM_DETECTED,
                )
                .encode(SenseFormat::Fixed),
            ),
        };
        let text = failure.to_string();
        assert!(text.starts_with("tgt drive 2 LUN 3: WRITE(6) (record 7 at byte 458752) failed with CHECK CONDITION (0x02): VOLUME OVERFLOW, 00h/02h END-OF-PARTITION/MEDIUM DETECTED"), "{text}");
        assert!(text.ends_with("CDB 0a 00 01 00 00 00"), "{text}");
        assert_eq!(
            failure.parsed_sense().unwrap().key,
            SenseKey::VOLUME_OVERFLOW
        );
        let busy = CommandFailure {
            status: 8,
            sense: None,
            ..failure
        };
        assert!(busy.to_string().contains("BUSY (0x08); CDB"));
        assert_eq!(status_name(0x99), "status 0x99");
    }

    #[test]
    fn unit_attention_and_not_ready() {
        let ua = Sense::unit_attention(Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED)
            .encode(SenseFormat::Fixed);
        assert!(is_unit_attention(Some(&ua)));
        assert!(!is_not_ready(Some(&ua)));
        let nr =
            Sense::new(SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT).encode(SenseFormat::Fixed);
        assert!(is_not_ready(Some(&nr)));
        assert!(!is_unit_attention(None));
    }

    #[test]
    fn report_luns_and_inquiry() {
        let mut data = vec![0, 0, 0, 24, 0, 0, 0, 0];
        data.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        data.extend_from_slice(&[0, 3, 0, 0, 0, 0, 0, 0]);
        data.extend_from_slice(&[0x41, 0x02, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_report_luns(&data).unwrap(), [0, 3, 0x102]);
        assert!(parse_report_luns(&[0; 4]).is_err());

        let mut inq = vec![0u8; 36];
        inq[0] = 0x01;
        inq[8..16].copy_from_slice(b"IBM     ");
        inq[16..32].copy_from_slice(b"ULT3580-TD9     ");
        inq[32..36].copy_from_slice(b"0001");
        let i = parse_inquiry(&inq).unwrap();
        assert_eq!(
            (i.device_type, i.vendor.as_str(), i.product.as_str()),
            (1, "IBM", "ULT3580-TD9")
        );
        assert!(parse_inquiry(&inq[..20]).is_err());
    }

    #[test]
    fn block_limits_and_mode_pages() {
        assert_eq!(
            parse_block_limits(&[0, 0x80, 0, 0, 0, 1]).unwrap(),
            (8 << 20, 1)
        );
        // Header: length, medium type, device-specific (WP + buffered mode 1), BD length 8;
        // then density 0x60 with block length 512.
        let sense = [
            19, 0, 0x90, 8, 0x60, 0, 0, 0, 0, 0, 2, 0, 0x10, 6, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(block_length(&sense), Some(512));
        assert_eq!(
            variable_block_mode(&sense).unwrap(),
            [0, 0, 0x10, 8, 0x60, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(block_length(&[3, 0, 0, 0]), None);
        assert!(variable_block_mode(&[1]).is_err());
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
        let (s1, s2) = (slot(0x0401, false), slot(0x0402, true));
        data.extend_from_slice(&[2, 0, 0, 12, 0, 0, 0, 24]);
        data.extend_from_slice(&s1);
        data.extend_from_slice(&s2);
        let report = (data.len() - 8) as u32;
        data[5..8].copy_from_slice(&report.to_be_bytes()[1..]);
        let elements = parse_element_status(&data).unwrap();
        assert_eq!(elements.len(), 3);
        assert_eq!(
            elements[0],
            Element {
                element_type: 4,
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
        assert_eq!(tgt.len(), 60);
        let e = parse_element_status(&tgt).unwrap();
        assert_eq!(
            (e.len(), e[0].address, e[0].full, e[0].barcode.as_deref()),
            (1, 3, true, Some("TB0001L9"))
        );
        let mut bad = data.clone();
        bad[10..12].copy_from_slice(&[0, 4]);
        assert!(parse_element_status(&bad).is_err());
    }
}
