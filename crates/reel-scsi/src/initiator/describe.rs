//! Words for messages: a command's name from its CDB, a status's name, and one line for sense
//! data that keeps the raw bytes (so nothing is lost when the parser does not know a field).

use crate::sense::{SenseKey, parse_sense};

/// The command's name for messages ("WRITE(6)", "MOVE MEDIUM"), "command" if unknown.
pub fn command_name(cdb: &[u8]) -> &'static str {
    match cdb.first() {
        Some(0x00) => "TEST UNIT READY",
        Some(0x01) => "REWIND",
        Some(0x03) => "REQUEST SENSE",
        Some(0x05) => "READ BLOCK LIMITS",
        Some(0x08) => "READ(6)",
        Some(0x0A) => "WRITE(6)",
        Some(0x10) => "WRITE FILEMARKS(6)",
        Some(0x11) => "SPACE(6)",
        Some(0x12) => "INQUIRY",
        Some(0x15) => "MODE SELECT(6)",
        Some(0x1A) => "MODE SENSE(6)",
        Some(0x1B) => "LOAD UNLOAD",
        Some(0x28) => "READ(10)",
        Some(0x2A) => "WRITE(10)",
        Some(0x2B) => "LOCATE(10)",
        Some(0x34) => "READ POSITION",
        Some(0x4D) => "LOG SENSE",
        Some(0x55) => "MODE SELECT(10)",
        Some(0x5A) => "MODE SENSE(10)",
        Some(0x8A) => "WRITE(16)",
        Some(0x91) => "SPACE(16)",
        Some(0x92) => "LOCATE(16)",
        Some(0xA0) => "REPORT LUNS",
        Some(0xA5) => "MOVE MEDIUM",
        Some(0xA6) => "EXCHANGE MEDIUM",
        Some(0xAA) => "WRITE(12)",
        Some(0xB8) => "READ ELEMENT STATUS",
        _ => "command",
    }
}

/// A SAM-5 status with its code: "CHECK CONDITION (0x02)", "status 0x99" if unknown.
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

/// One line for sense data: key, ASC/ASCQ with its name, FILEMARK/EOM/ILI, INFORMATION as a
/// signed residue, and the first 32 raw bytes.
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
                // READ and SPACE residues are 32-bit two's complement (SSC-4).
                text.push_str(&format!(", information {}", info as i64 as i32));
            }
            format!("{text} (sense bytes: {raw})")
        }
        Err(e) => format!("unparsable sense data ({e}): {raw}"),
    }
}

/// The sense key of sense data, if it parses.
pub fn sense_key(sense: Option<&[u8]>) -> Option<SenseKey> {
    sense.and_then(|s| parse_sense(s).ok()).map(|s| s.key)
}

/// Whether sense data says UNIT ATTENTION (cleared by retrying the command).
pub fn is_unit_attention(sense: Option<&[u8]>) -> bool {
    sense_key(sense) == Some(SenseKey::UNIT_ATTENTION)
}

/// Whether sense data says NOT READY (becoming ready, or no medium yet).
pub fn is_not_ready(sense: Option<&[u8]>) -> bool {
    sense_key(sense) == Some(SenseKey::NOT_READY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initiator::ssc::{Transfer, write6};
    use crate::sense::{Asc, Sense, SenseFormat};

    #[test]
    fn names() {
        assert_eq!(command_name(&write6(Transfer::Variable(1))), "WRITE(6)");
        assert_eq!(command_name(&[0xEE]), "command");
        assert_eq!(command_name(&[]), "command");
        assert_eq!(status_name(0x02), "CHECK CONDITION (0x02)");
        assert_eq!(status_name(0x99), "status 0x99");
    }

    #[test]
    fn sense_is_described_with_key_code_flags_and_residue() {
        let mut sense = Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR);
        sense.eom = true;
        sense.information = Some(262_144);
        let text = describe_sense(&sense.encode(SenseFormat::Fixed));
        assert!(
            text.starts_with("MEDIUM ERROR, 0Ch/00h WRITE ERROR [EOM], information 262144"),
            "{text}"
        );
        assert!(text.contains("sense bytes: f0 00 43"), "{text}");

        // A filemark on READ: NO SENSE, FILEMARK, the residue as INFORMATION.
        let mut fm = Sense::no_sense();
        fm.filemark = true;
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
    fn unit_attention_and_not_ready() {
        let ua = Sense::unit_attention(Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED)
            .encode(SenseFormat::Fixed);
        assert!(is_unit_attention(Some(&ua)));
        assert!(!is_not_ready(Some(&ua)));
        let nr =
            Sense::new(SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT).encode(SenseFormat::Fixed);
        assert!(is_not_ready(Some(&nr)));
        assert!(!is_unit_attention(None));
        assert_eq!(sense_key(Some(&nr)), Some(SenseKey::NOT_READY));
    }
}
