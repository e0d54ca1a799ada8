//! Logical position and the typed outcomes of tape operations.

/// The logical position within the loaded cartridge (SSC-4 §4.2.6, as
/// reported by READ POSITION, SSC-4 §7.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// Current partition.
    pub partition: u8,
    /// Logical object identifier: records and filemarks before the position.
    pub object: u64,
    /// Logical file identifier: filemarks before the position.
    pub file: u64,
    /// Objects between the preceding filemark (or BOP) and the position.
    pub block_in_file: u64,
    /// Beginning of partition (BOP bit).
    pub at_bop: bool,
    /// At end-of-data.
    pub at_eod: bool,
    /// At EOD and the partition is filled past the early-warning threshold
    /// (the EOP bit of READ POSITION). Only EOD is ever reported as beyond
    /// early warning, because the model does not know the physical location
    /// of earlier objects.
    pub beyond_early_warning: bool,
}

/// Result of a successful write of a record or filemarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WriteOutcome {
    /// The position after the write is beyond early warning: the SCSI layer
    /// reports NO SENSE with EOM set and EARLY WARNING (SSC-4 §4.2.5).
    pub early_warning: bool,
    /// The operation was a pure synchronisation request (WRITE FILEMARKS
    /// with a count of 0, SSC-4 §7.11) and the partitions were synced.
    pub synced: bool,
}

/// Result of a READ (SSC-4 §6.4) in variable-block mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadOutcome {
    /// A record was read; the position moved past it.
    Record {
        /// Actual length of the record on tape. When it differs from the
        /// requested length the SCSI layer reports ILI with residue
        /// `requested - data_len`.
        data_len: u32,
        /// Bytes placed in the caller's buffer: `min(data_len, max_len)`.
        transferred: u32,
    },
    /// The next object is an encrypted record: its sealed form (all of it, whatever
    /// `max_len`) is in the caller's buffer and the position has **not** moved. The drive
    /// decrypts it and calls [`crate::Cartridge::finish_encrypted_read`], or fails the READ
    /// with the position still before the record (SSC-4 §4.2.27: the application then asks
    /// for the next block's encryption status, sets the key and reads it again).
    Encrypted {
        /// Length of the sealed form.
        sealed_len: u32,
    },
    /// A filemark was read; the position moved to its end-of-partition side
    /// (CHECK CONDITION, FILEMARK).
    Filemark,
    /// At end-of-data: nothing read, position unchanged (BLANK CHECK, EOD).
    EndOfData,
}

/// Result of a SPACE (SSC-4 §7.9).
///
/// Residues are `requested count - objects actually spaced`, with the sign
/// of the request (negative when spacing backwards); they are the INFORMATION
/// field value of the resulting sense data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpaceOutcome {
    /// All requested objects were spaced over.
    Completed,
    /// Spacing over records hit a filemark: forward, the position is just
    /// past it; backward, just before it (its beginning-of-partition side).
    Filemark {
        /// Unspaced count.
        residue: i64,
    },
    /// Spacing forward reached end-of-data; position is at EOD.
    EndOfData {
        /// Unspaced count.
        residue: i64,
    },
    /// Spacing backward reached beginning-of-partition; position is at BOP.
    BeginningOfPartition {
        /// Unspaced count (negative).
        residue: i64,
    },
}

impl SpaceOutcome {
    /// The residue, 0 when completed.
    pub fn residue(self) -> i64 {
        match self {
            SpaceOutcome::Completed => 0,
            SpaceOutcome::Filemark { residue }
            | SpaceOutcome::EndOfData { residue }
            | SpaceOutcome::BeginningOfPartition { residue } => residue,
        }
    }
}
