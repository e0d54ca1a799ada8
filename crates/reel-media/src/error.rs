//! Typed errors of the cartridge model.

use crate::mam::MamError;

/// Invalid capacity/partition layout of a cartridge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// Capacity of zero bytes.
    #[error("capacity must be at least one byte")]
    ZeroCapacity,
    /// Early-warning percentage outside 1..=100.
    #[error("early warning at {0}% of capacity is invalid (1..=100)")]
    EarlyWarningPercent(u8),
    /// Partition count outside 1..=max for the media type.
    #[error("{count} partitions requested, 1..={max} supported")]
    PartitionCount {
        /// Requested count.
        count: usize,
        /// Maximum for the media type.
        max: u8,
    },
    /// A partition of size zero.
    #[error("partition {index} has size zero")]
    ZeroPartitionSize {
        /// Partition index.
        index: usize,
    },
    /// Partition sizes add up to more than the cartridge capacity.
    #[error("partitions total {total} bytes, capacity is {capacity}")]
    ExceedsCapacity {
        /// Sum of partition sizes.
        total: u128,
        /// Cartridge capacity.
        capacity: u64,
    },
    /// Number of partition stores does not match the layout.
    #[error("{got} partition stores given for {expected} partitions")]
    StoreCount {
        /// Partitions in the layout.
        expected: usize,
        /// Stores supplied.
        got: usize,
    },
}

/// An operation on a [`crate::Cartridge`] failed. Each variant names the tape
/// condition the SCSI layer turns into sense data; the position is unchanged
/// unless the variant says otherwise.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MediaError<E> {
    /// The partition store failed (MEDIUM ERROR / HARDWARE ERROR).
    #[error("partition store error: {0}")]
    Store(#[source] E),
    /// No cartridge loaded (NOT READY, MEDIUM NOT PRESENT / not loaded).
    #[error("cartridge is not loaded")]
    NotLoaded,
    /// Write-protect tab set (DATA PROTECT, WRITE PROTECTED).
    #[error("cartridge is write protected")]
    WriteProtected,
    /// WORM cartridge: only appending at end-of-data is allowed (DATA
    /// PROTECT, WORM MEDIUM - OVERWRITE ATTEMPTED).
    #[error("WORM cartridge: overwrite attempted")]
    WormOverwrite,
    /// The record does not fit before the end of the partition (VOLUME
    /// OVERFLOW, EOM). Nothing was written, but data after the position was
    /// already discarded as for any write.
    #[error("end of partition reached: {needed} bytes needed, {available} left")]
    EndOfMedium {
        /// Record length.
        needed: u64,
        /// Bytes left in the partition.
        available: u64,
    },
    /// LOCATE past end-of-data (BLANK CHECK, END-OF-DATA DETECTED); the
    /// position was left at EOD.
    #[error("end of data reached; positioned at end-of-data")]
    EndOfData,
    /// Partition number does not exist (ILLEGAL REQUEST).
    #[error("partition {partition} does not exist ({count} partitions)")]
    InvalidPartition {
        /// Requested partition.
        partition: u8,
        /// Number of partitions.
        count: usize,
    },
    /// Record longer than [`crate::MAX_RECORD_LEN`] (ILLEGAL REQUEST).
    #[error("record of {len} bytes exceeds the maximum of {max}")]
    RecordTooLarge {
        /// Record length.
        len: usize,
        /// Maximum.
        max: u32,
    },
    /// More filemarks than [`crate::MAX_FILEMARKS_PER_WRITE`] in one request.
    #[error("{count} filemarks requested, at most {max} per request")]
    TooManyFilemarks {
        /// Requested count.
        count: u32,
        /// Maximum.
        max: u32,
    },
    /// Invalid capacity or partition layout (ILLEGAL REQUEST).
    #[error("invalid layout: {0}")]
    Layout(#[from] LayoutError),
    /// WRITE ATTRIBUTE refused.
    #[error("MAM: {0}")]
    Mam(#[from] MamError),
    /// The partition store violated its contract (e.g. returned a record of
    /// the wrong length).
    #[error("partition store inconsistent: {0}")]
    Inconsistent(&'static str),
}

impl<E> MediaError<E> {
    /// Stable variant name, handy for comparing outcomes in tests and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            MediaError::Store(_) => "Store",
            MediaError::NotLoaded => "NotLoaded",
            MediaError::WriteProtected => "WriteProtected",
            MediaError::WormOverwrite => "WormOverwrite",
            MediaError::EndOfMedium { .. } => "EndOfMedium",
            MediaError::EndOfData => "EndOfData",
            MediaError::InvalidPartition { .. } => "InvalidPartition",
            MediaError::RecordTooLarge { .. } => "RecordTooLarge",
            MediaError::TooManyFilemarks { .. } => "TooManyFilemarks",
            MediaError::Layout(_) => "Layout",
            MediaError::Mam(_) => "Mam",
            MediaError::Inconsistent(_) => "Inconsistent",
        }
    }
}
