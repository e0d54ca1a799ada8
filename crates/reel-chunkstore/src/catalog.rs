//! The catalog: redb tables and their value encodings.

use redb::TableDefinition;

/// Chunk id → encoded [`crate::format::ChunkLoc`].
pub const CHUNKS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("chunks");
/// Pack id → encoded [`PackRow`]. A pack object exists in the back end for every row; a pack
/// object without a row is an orphan from an interrupted commit and is deleted on open.
pub const PACKS: TableDefinition<u64, &[u8]> = TableDefinition::new("packs");
/// Pack id → its chunks' names in pack order (format::encode_pack_ids).
pub const PACK_IDS: TableDefinition<u64, &[u8]> = TableDefinition::new("pack_ids");
/// Stream id → stream length in bytes.
pub const STREAMS: TableDefinition<u64, u64> = TableDefinition::new("streams");
/// (stream id, start offset) → encoded extent row (format::encode_extent_row).
pub const EXTENTS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("extents");
/// Span id → reference list (format::encode_refs): a whole record's chunks, stored once.
pub const SPANS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("spans");
/// (stream id, key) → caller bytes, committed with the stream.
pub const SIDECAR: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("sidecar");
/// Free-form caller records (e.g. cartridge identities), key → bytes.
pub const RECORDS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("records");
/// Store-wide values: format version, counters.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

pub const META_FORMAT: &str = "format_version";
/// The last catalog journal object this catalog includes (0: none; see `journal.rs`).
pub const META_JOURNAL_SEQ: &str = "journal_seq";

/// What the catalog knows of a pack: its size, and the raw bytes its chunks hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackRow {
    pub size: u64,
    pub chunks: u32,
    pub raw_bytes: u64,
}

impl PackRow {
    pub fn encode(&self) -> [u8; 20] {
        let mut out = [0u8; 20];
        out[..8].copy_from_slice(&self.size.to_le_bytes());
        out[8..12].copy_from_slice(&self.chunks.to_le_bytes());
        out[12..].copy_from_slice(&self.raw_bytes.to_le_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Result<PackRow, crate::FormatError> {
        if b.len() != 20 {
            return Err(crate::FormatError {
                what: "pack row",
                reason: format!("{} bytes", b.len()),
            });
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Ok(PackRow {
            size: u64_at(0),
            chunks: u32::from_le_bytes(b[8..12].try_into().unwrap_or([0; 4])),
            raw_bytes: u64_at(12),
        })
    }
}

/// The back-end key of pack `id`. Fixed-width hex keeps listing order equal to id order, and the
/// `.pack` suffix keeps keys from ever being a directory prefix of one another.
pub fn pack_key(id: u64) -> reel_backend::Key {
    // A fixed ASCII pattern is always a valid key.
    reel_backend::Key::new(format!("packs/{id:016x}.pack")).expect("valid pack key")
}

pub fn parse_pack_key(key: &str) -> Option<u64> {
    let hex = key.strip_prefix("packs/")?.strip_suffix(".pack")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}
