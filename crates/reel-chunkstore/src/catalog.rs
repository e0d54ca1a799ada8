//! The catalog: redb tables and their value encodings.

use redb::TableDefinition;

/// Format 4 and before: chunk id → encoded [`crate::format::ChunkLoc`], the chunk index.
/// Format 5 derives the index from the packs' names (`chunk_index.rs`); rows left here by an
/// older catalog or replayed from an older journal are converted on open.
pub const LEGACY_CHUNKS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("chunks");
/// Pack id → encoded [`PackRow`]. A pack object exists in the back end for every row; a pack
/// object without a row is an orphan from an interrupted commit and is deleted on open.
pub const PACKS: TableDefinition<u64, &[u8]> = TableDefinition::new("packs");
/// Format 5 and before: pack id → its chunks' names in pack order (format::encode_pack_ids),
/// whole. Format 6 keeps them in parts (`pack_names.rs`); rows here are moved on open.
pub const LEGACY_PACK_IDS: TableDefinition<u64, &[u8]> = TableDefinition::new("pack_ids");
/// Stream id → stream length in bytes.
pub const STREAMS: TableDefinition<u64, u64> = TableDefinition::new("streams");
/// (stream id, start offset) → encoded extent row (format::encode_extent_row).
pub const EXTENTS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("extents");
/// Format 6 and before: span id → reference list (format::encode_refs), one row each. Format 7
/// keeps spans in `spans.rs`'s tables; rows here are moved on open.
pub const LEGACY_SPANS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("spans");
/// (stream id, key) → caller bytes, committed with the stream.
pub const SIDECAR: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("sidecar");
/// Free-form caller records (e.g. cartridge identities), key → bytes.
pub const RECORDS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("records");
/// Local pack id → where another store keeps that pack (encoded [`ForeignPack`]): chunks of a
/// stream adopted from another store ([`crate::ChunkStore::import_stream`]) are read in place.
/// Such a pack has rows in PACKS and `pack_names` like our own, but no object under our `packs/`:
/// it is never rewritten or deleted here, only forgotten once nothing references it.
pub const FOREIGN_PACKS: TableDefinition<u64, &[u8]> = TableDefinition::new("foreign_packs");
/// Stream id → label: streams another store reads in place ([`crate::ChunkStore::export_stream`]).
/// Reclaim never moves a chunk such a stream references.
pub const PINS: TableDefinition<u64, &[u8]> = TableDefinition::new("pins");
/// Store-wide values: format version, counters.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

pub const META_FORMAT: &str = "format_version";
/// The catalog's format: 1 = the tables up to RECORDS; 2 adds FOREIGN_PACKS and PINS; 3 lets a
/// span's body hold pieces (`format.rs`), which a reel reading version 2 would take for a
/// damaged row; 4 lets a chunk location name a checked blob (`format::Codec::RawChecked`,
/// `ZstdChecked`), which a reel reading version 3 would take for damage. Older catalogs are
/// upgraded on open: the new tables start empty, and rows written before stay as they are (a
/// flat span is still a valid body, an unchecked blob is still read). 5 replaces the `chunks`
/// table (32-byte id → 33-byte location) with the derived chunk index (`chunk_index.rs`:
/// 8-byte id prefix → pack); an older catalog's rows are converted on open, and a reel
/// reading version 4 would find no chunk stored. 6 keeps a pack's names in parts of under 1 KiB
/// (`pack_names.rs`) instead of one value per pack; older rows are moved on open, and a reel
/// reading version 5 would find no pack named. 7 keeps span bodies in parts under growing
/// sequence numbers, found by id through a small index (`spans.rs`); older rows are moved on
/// open, and a reel reading version 6 would find no span stored. 8 may store a flat span body
/// *placed* (`format::PlacedRefs`: runs of positions in packs' names instead of 32-byte ids)
/// and keeps the names of dropped packs such bodies read (`pack_names::RETIRED_NAMES`); older
/// bodies are placed on open, and a reel reading version 7 would take a placed body for damage.
/// 9 writes extent rows and bodies of pieces *compact* (`format::CompactRow`: spans named by
/// their ids' first 8 bytes, the row checked by a hash); rows written before stay as they are,
/// and a reel reading version 8 would take a compact row for damage. 10 keys the chunk index
/// by the ids' first 6 bytes with 48-bit pack numbers (`chunk_index::INDEX`, 12 B a row
/// instead of 16); the older index is rebuilt from the names on open, and a reel reading
/// version 9 would find no chunk indexed. 11 indexes new chunks in a second table of the same
/// rows (`chunk_index::RECENT`), merged into the main one in runs; a format-10 catalog opens
/// with it empty, and a reel reading version 10 would miss every chunk it holds.
pub const CATALOG_VERSION: u64 = 11;
/// The last catalog journal object this catalog includes (0: none; see `journal.rs`).
pub const META_JOURNAL_SEQ: &str = "journal_seq";
/// Set while a checkpoint (`checkpoint.rs`) is restored into this catalog: the checkpoint's
/// sequence, and how many of its parts are applied. The tables were emptied when it was set;
/// until it is cleared the catalog is incomplete and the next open resumes the restore.
pub const META_RESTORING: &str = "checkpoint_restoring";
pub const META_RESTORED_PARTS: &str = "checkpoint_restored_parts";
/// Pack ids below this may have been given out by an earlier opening of the store: each open
/// starts at or above it and raises it by [`PACK_IDS_PER_OPEN`] before storing any pack, so a
/// pack key is never used twice, even when a killed process's upload lands after the next
/// process listed the back end (it then finds an orphan to delete, never its own key taken).
pub const META_PACK_ID_FLOOR: &str = "pack_id_floor";
/// The chunker parameters the store cuts with (`ChunkerParams`), recorded when the store is
/// created and kept for its life: chunks cut differently would not dedup against the stored
/// ones. A catalog without them was made before they were recorded, with
/// `ChunkerParams::LEGACY`.
pub const META_CHUNK_MIN: &str = "chunk_min";
pub const META_CHUNK_AVG: &str = "chunk_avg";
pub const META_CHUNK_MAX: &str = "chunk_max";
pub const META_CHUNK_BOUNDARY_MIN: &str = "chunk_boundary_min";
/// The pack ids one opening may give out (packs of at least a few KiB each: never exhausted).
pub const PACK_IDS_PER_OPEN: u64 = 1 << 32;

/// The chunker parameters recorded in the catalog's META table; `None` in a catalog made
/// before they were recorded.
pub fn get_chunker(
    meta: &impl redb::ReadableTable<&'static str, u64>,
) -> crate::Result<Option<crate::ChunkerParams>> {
    let mut values = [0u32; 4];
    for (key, value) in [
        META_CHUNK_MIN,
        META_CHUNK_AVG,
        META_CHUNK_MAX,
        META_CHUNK_BOUNDARY_MIN,
    ]
    .into_iter()
    .zip(&mut values)
    {
        let Some(v) = meta.get(key)? else {
            return Ok(None);
        };
        *value = u32::try_from(v.value()).map_err(|_| {
            crate::StoreError::Corrupt(format!(
                "catalog meta {key} = {} is not a chunk size",
                v.value()
            ))
        })?;
    }
    let [min, avg, max, boundary_min] = values;
    let params = crate::ChunkerParams {
        min,
        avg,
        max,
        boundary_min,
    };
    params.validate().map_err(|why| {
        crate::StoreError::Corrupt(format!("the catalog's chunker parameters: {why}"))
    })?;
    Ok(Some(params))
}

/// Records `params` in the catalog's META table.
pub fn put_chunker(
    meta: &mut redb::Table<'_, &'static str, u64>,
    params: crate::ChunkerParams,
) -> crate::Result<()> {
    meta.insert(META_CHUNK_MIN, u64::from(params.min))?;
    meta.insert(META_CHUNK_AVG, u64::from(params.avg))?;
    meta.insert(META_CHUNK_MAX, u64::from(params.max))?;
    meta.insert(META_CHUNK_BOUNDARY_MIN, u64::from(params.boundary_min))?;
    Ok(())
}

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

/// A pack another store holds: that store's name (opaque here: the caller's
/// [`crate::ForeignStores`] resolves it) and the pack's id there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ForeignPack {
    pub source: String,
    pub pack: u64,
}

impl ForeignPack {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 2 + self.source.len());
        out.extend_from_slice(&self.pack.to_le_bytes());
        out.extend_from_slice(&(self.source.len() as u16).to_le_bytes());
        out.extend_from_slice(self.source.as_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Result<ForeignPack, crate::FormatError> {
        let bad = |reason: &str| crate::FormatError {
            what: "foreign pack row",
            reason: reason.into(),
        };
        if b.len() < 10 {
            return Err(bad("too short"));
        }
        let pack = u64::from_le_bytes(b[..8].try_into().map_err(|_| bad("pack id"))?);
        let len = usize::from(u16::from_le_bytes([b[8], b[9]]));
        if b.len() != 10 + len {
            return Err(bad("source length"));
        }
        let source = std::str::from_utf8(&b[10..])
            .map_err(|_| bad("source is not UTF-8"))?
            .to_string();
        Ok(ForeignPack { source, pack })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn foreign_pack_rows_round_trip(source in "\\PC{0,200}", pack in any::<u64>()) {
            let row = ForeignPack { source, pack };
            prop_assert_eq!(ForeignPack::decode(&row.encode()).unwrap(), row);
        }

        #[test]
        fn foreign_pack_rows_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ForeignPack::decode(&bytes);
        }
    }
}
