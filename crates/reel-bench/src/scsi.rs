//! How the benchmarks report a SCSI command that did not end as expected: which drive, what
//! the command was for, the CDB, the status and the sense data described in words. The CDBs
//! and the parsers of the answers are `reel_scsi::initiator`'s.

use std::fmt;

use reel_scsi::initiator::describe::{command_name, describe_sense, status_name};
use reel_scsi::{Sense, parse_sense};

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

#[cfg(test)]
mod tests {
    use super::*;
    use reel_scsi::initiator::ssc::{Transfer, write6};
    use reel_scsi::{Asc, SenseFormat, SenseKey};

    #[test]
    fn failures_name_the_command_and_the_sense() {
        let failure = CommandFailure {
            target: "tgt drive 2".into(),
            lun: 3,
            context: "record 7 at byte 458752".into(),
            cdb: write6(Transfer::Variable(65536)).to_vec(),
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
}
