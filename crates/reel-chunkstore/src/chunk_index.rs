//! The chunk index: which pack holds each stored chunk (catalog format 5).
//!
//! A pack's names (`pack_names::PACK_NAMES`) list its chunks in pack order, with a tombstone where
//! the copy is not the one the index points at. The index is *derived* from them: it holds
//! exactly "every named chunk → its pack", and changes only through [`put_names`] and
//! [`delete_names`], which write the names and the index in one transaction. The write path,
//! reclaim, imports and the journal's replay all go through them in the order their journal
//! ops are written, so a replay reproduces the index without the journal carrying it (a
//! journal before version 8 did, as `PutChunk`/`DelChunk` ops: [`set`] and [`remove`] replay
//! those).
//!
//! A row is 12 bytes: the id's first 6 bytes → the pack in 48 bits (format 10; formats 5 to 9
//! keyed 8 bytes to 64 bits, 16 B a row, `efficiency.md` §42; format 4 kept the whole id and a
//! 33-byte location, §25). The location is in the pack's trailer (the locality cache loads a
//! pack's names and trailer together). Dedup stays exact: a key hit counts only when the
//! pack's names hold the whole id. An id whose key another indexed id holds (at n chunks, one
//! new chunk in 2^48 / n: about one in 600,000 at 1 TB of 2 KiB chunks), or whose pack is
//! numbered past 2^48 (see [`PackRef`]), is kept whole in [`INDEX_FULL`].
//!
//! The key rows live in two tables (format 11): once the main one ([`INDEX`]) is large
//! ([`recent_from`]), a new chunk's row goes to the small [`RECENT`] table, and [`merge_step`]
//! moves recent rows into the main one in key order, a run at a time. Inserting into a table
//! of tens of millions of rows at random rebuilds one 4 KiB leaf per new row (a batch adds
//! ~1.2 rows to each leaf it touches); a merge adds ~20 to each (`efficiency.md` §49). A key is in at most one of the two tables:
//! an insert reads the other table before it writes one, and only merges move rows.

use std::collections::HashMap;

use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata, Table, TableDefinition};

use crate::Result;
use crate::catalog::LEGACY_CHUNKS;
use crate::format::{self, ChunkId, ChunkLoc, TOMBSTONE};
use crate::index::IdSet;
use crate::pack_names::{self, PACK_NAMES};

/// A chunk id's first [`KEY_BYTES`] bytes: its key in [`INDEX`].
pub type Key = [u8; KEY_BYTES];
/// Bytes of an id that key the index. BLAKE3 output is uniform, so 6 of its bytes spread as
/// well as 32; with 4, at 1 TB of 2 KiB chunks one new chunk in nine would meet a stored
/// chunk's key and go to [`INDEX_FULL`] (40 B a row), with 6 one in 600,000.
pub const KEY_BYTES: usize = 6;

/// A pack id in 48 bits, little-endian: an opening of the store gives out ids from a new
/// multiple of 2^32 (`catalog::PACK_IDS_PER_OPEN`), so ids need more than 32 bits after the
/// first restart; 48 last 65,536 openings, and a pack past them is indexed by whole ids.
pub type PackRef = [u8; PACK_REF_BYTES];
pub const PACK_REF_BYTES: usize = 6;

/// `pack` as an index value, if it fits.
pub fn pack_ref(pack: u64) -> Option<PackRef> {
    let bytes = pack.to_le_bytes();
    if bytes[PACK_REF_BYTES..].iter().any(|b| *b != 0) {
        return None;
    }
    let mut out = [0u8; PACK_REF_BYTES];
    out.copy_from_slice(&bytes[..PACK_REF_BYTES]);
    Some(out)
}

/// The pack an index value names.
pub fn pack_of(value: PackRef) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..PACK_REF_BYTES].copy_from_slice(&value);
    u64::from_le_bytes(bytes)
}

/// A chunk id's first 6 bytes → the pack holding that chunk, in 48 bits (format 10): the main
/// table, written by new chunks' inserts while it is small ([`recent_from`]), by merges
/// ([`merge_step`]), upgrades and rebuilds.
pub const INDEX: TableDefinition<Key, PackRef> = TableDefinition::new("chunk_index");
/// Rows of the same shape not merged into [`INDEX`] yet (format 11): where new chunks are
/// indexed once the main table is large. Never holds a key [`INDEX`] holds.
pub const RECENT: TableDefinition<Key, PackRef> = TableDefinition::new("chunk_index_recent");
/// Whole chunk id → pack, for an id whose key another indexed id holds in [`INDEX`], or whose
/// pack's number does not fit 48 bits.
pub const INDEX_FULL: TableDefinition<&[u8; 32], u64> = TableDefinition::new("chunk_index_full");
/// Formats 5 to 9's table of the same name: the id's first 8 bytes → the pack. Deleted on open
/// and rebuilt as [`INDEX`] from the names ([`rebuild_from_names`]); only ever opened to delete.
pub const LEGACY_INDEX: TableDefinition<u64, u64> = TableDefinition::new("chunk_index");

/// The key of `id` in [`INDEX`].
pub fn key(id: &ChunkId) -> Key {
    let mut key = [0u8; KEY_BYTES];
    key.copy_from_slice(&id.0[..KEY_BYTES]);
    key
}

/// An id's first 8 bytes as a number (formats 5 to 9's index key; sorting a pack's names).
pub fn prefix(id: &ChunkId) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&id.0[..8]);
    u64::from_le_bytes(word)
}

/// The key rows of both tables, [`INDEX`] and [`RECENT`], read as one.
pub struct KeyRows<T> {
    pub main: T,
    pub recent: T,
}

impl KeyRows<ReadOnlyTable<Key, PackRef>> {
    pub fn read(txn: &redb::ReadTransaction) -> Result<Self> {
        Ok(KeyRows {
            main: txn.open_table(INDEX)?,
            recent: txn.open_table(RECENT)?,
        })
    }
}

impl<'t> KeyRows<Table<'t, Key, PackRef>> {
    pub fn write(txn: &'t redb::WriteTransaction) -> Result<Self> {
        Ok(KeyRows {
            main: txn.open_table(INDEX)?,
            recent: txn.open_table(RECENT)?,
        })
    }
}

impl<T: ReadableTable<Key, PackRef>> KeyRows<T> {
    /// The pack the key row of `key` names, in whichever table holds it.
    pub fn get(&self, key: Key) -> Result<Option<u64>> {
        if let Some(v) = self.recent.get(key)? {
            return Ok(Some(pack_of(v.value())));
        }
        Ok(self.main.get(key)?.map(|v| pack_of(v.value())))
    }

    pub fn len(&self) -> Result<u64> {
        Ok(self.main.len()? + self.recent.len()?)
    }
}

/// Packs' names as sets, read once per pack from a names table: confirms prefix hits.
pub struct Names {
    sets: HashMap<u64, IdSet>,
    /// Packs whose names [`put_names`] is writing: their sets are what it indexed so far,
    /// never evicted (the table's row is not theirs yet).
    writing: Option<u64>,
}

impl Names {
    /// Packs whose names are held at once (each a set of up to ~16 k ids).
    const PACKS_HELD: usize = 32;

    pub fn new() -> Names {
        Names {
            sets: HashMap::new(),
            writing: None,
        }
    }

    /// Whether `pack`'s names hold `id` (not as a tombstone).
    pub fn holds(
        &mut self,
        table: &impl ReadableTable<(u64, u32), &'static [u8]>,
        pack: u64,
        id: &ChunkId,
    ) -> Result<bool> {
        if let Some(set) = self.sets.get(&pack) {
            return Ok(set.contains(id));
        }
        let set: IdSet = match pack_names::get(table, pack)? {
            Some(names) => format::decode_pack_ids(&names)?
                .into_iter()
                .filter(|n| *n != TOMBSTONE)
                .collect(),
            None => IdSet::default(),
        };
        let held = set.contains(id);
        if self.sets.len() >= Self::PACKS_HELD {
            // Bounded: a scan over every pack holds a few at a time.
            let writing = self.writing;
            self.sets.retain(|p, _| Some(*p) == writing);
        }
        self.sets.insert(pack, set);
        Ok(held)
    }

    /// Records that `pack` now names `id` (a pack whose names are being written).
    fn note(&mut self, pack: u64, id: ChunkId) {
        self.sets.entry(pack).or_default().insert(id);
    }

    fn forget(&mut self, pack: u64) {
        self.sets.remove(&pack);
    }
}

impl Default for Names {
    fn default() -> Self {
        Names::new()
    }
}

/// The packs the index may hold `id` in, in the order to try them: the one its prefix row
/// names (if that pack's names hold `id`, it is there), then the one its whole-id row names.
/// Callers that confirm by a pack's table of contents (the store's lookups) start here.
pub fn candidates(
    index: &KeyRows<impl ReadableTable<Key, PackRef>>,
    full: &impl ReadableTable<&'static [u8; 32], u64>,
    id: &ChunkId,
) -> Result<[Option<u64>; 2]> {
    Ok([index.get(key(id))?, full.get(&id.0)?.map(|v| v.value())])
}

/// Whether `id`, one of `pack`'s names (not a tombstone), is indexed at `pack`. Needs no names:
/// an id with a whole-id row is indexed there; otherwise it is indexed where its prefix row
/// points if that pack names it, which `pack` does.
pub fn indexed_at(
    index: &KeyRows<impl ReadableTable<Key, PackRef>>,
    full: &impl ReadableTable<&'static [u8; 32], u64>,
    id: &ChunkId,
    pack: u64,
) -> Result<bool> {
    Ok(match full.get(&id.0)? {
        Some(at) => at.value() == pack,
        None => index.get(key(id))? == Some(pack),
    })
}

/// The pack the index names for `id`, if any.
pub fn lookup(
    index: &KeyRows<impl ReadableTable<Key, PackRef>>,
    full: &impl ReadableTable<&'static [u8; 32], u64>,
    names_table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    names: &mut Names,
    id: &ChunkId,
) -> Result<Option<u64>> {
    if let Some(pack) = index.get(key(id))?
        && names.holds(names_table, pack, id)?
    {
        return Ok(Some(pack));
    }
    Ok(full.get(&id.0)?.map(|v| v.value()))
}

/// The index's tables and the names they derive from, open in one write transaction.
pub struct Tables<'t> {
    pub index: KeyRows<Table<'t, Key, PackRef>>,
    pub full: Table<'t, &'static [u8; 32], u64>,
    pub names_table: Table<'t, (u64, u32), &'static [u8]>,
    /// Names of dropped packs, which placed span bodies may still read (`spans.rs`).
    pub retired: Table<'t, (u64, u32), &'static [u8]>,
    pub names: Names,
    /// New keys go to the recent table: the main one held [`recent_from`] rows at the open.
    into_recent: bool,
}

impl<'t> Tables<'t> {
    pub fn open(txn: &'t redb::WriteTransaction) -> Result<Tables<'t>> {
        let mut tables = Tables {
            index: KeyRows::write(txn)?,
            full: txn.open_table(INDEX_FULL)?,
            names_table: txn.open_table(PACK_NAMES)?,
            retired: txn.open_table(pack_names::RETIRED_NAMES)?,
            names: Names::new(),
            into_recent: false,
        };
        tables.index_into_recent_from(recent_from(MERGE_FLOOR))?;
        Ok(tables)
    }

    /// New keys go to the recent table if the main one holds at least `rows` rows.
    pub fn index_into_recent_from(&mut self, rows: u64) -> Result<()> {
        self.into_recent = self.index.main.len()? >= rows;
        Ok(())
    }

    pub fn lookup(&mut self, id: &ChunkId) -> Result<Option<u64>> {
        lookup(
            &self.index,
            &self.full,
            &self.names_table,
            &mut self.names,
            id,
        )
    }

    /// Indexes `id` at `pack` unless it is indexed already; returns the pack that holds it
    /// after the call. `pack` must name `id` (its names are written by the caller).
    ///
    /// A read of one table and one walk of the other in the usual case (a new id, its prefix
    /// free): of the main table and into the recent one once the main one is large, of the
    /// (then small or empty) recent one and into the main one before. The row is inserted
    /// first and put back in the rare case the prefix was taken (`efficiency.md` §28, §49).
    fn insert(&mut self, id: &ChunkId, pack: u64) -> Result<u64> {
        // An id whose prefix holder was unindexed stays in `full`: checked first (the table
        // is empty or tiny, so this costs little).
        if let Some(at) = self.full.get(&id.0)?.map(|v| v.value()) {
            return Ok(at);
        }
        let key = key(id);
        let KeyRows { main, recent } = &mut self.index;
        let (other, target) = if self.into_recent {
            (main, recent)
        } else {
            (recent, main)
        };
        let elsewhere = other.get(key)?.map(|v| pack_of(v.value()));
        let holder = match (elsewhere, pack_ref(pack)) {
            (Some(holder), _) => Some(holder),
            (None, Some(small)) => {
                let taken = target.insert(key, small)?.map(|v| v.value());
                if let Some(holder) = taken {
                    target.insert(key, holder)?;
                }
                taken.map(pack_of)
            }
            (None, None) => target.get(key)?.map(|v| pack_of(v.value())),
        };
        match holder {
            Some(holder) if self.names.holds(&self.names_table, holder, id)? => {
                return Ok(holder);
            }
            // The key is another id's, or the pack does not fit a key row.
            Some(_) => {
                self.full.insert(&id.0, pack)?;
            }
            None if pack_ref(pack).is_none() => {
                self.full.insert(&id.0, pack)?;
            }
            None => {}
        }
        self.names.note(pack, *id);
        Ok(pack)
    }

    /// Removes every index row that points at `pack` for one of `names`.
    fn unindex(&mut self, pack: u64, names: &[ChunkId]) -> Result<()> {
        for id in names.iter().filter(|n| **n != TOMBSTONE) {
            if self.full.get(&id.0)?.is_some_and(|v| v.value() == pack) {
                self.full.remove(&id.0)?;
            }
            let key = key(id);
            for table in [&mut self.index.recent, &mut self.index.main] {
                if table.get(key)?.is_some_and(|v| pack_of(v.value()) == pack) {
                    table.remove(key)?;
                }
            }
        }
        self.names.forget(pack);
        Ok(())
    }
}

/// Writes `pack`'s names and indexes each named chunk there, unless another pack's copy is
/// indexed already. Returns the positions of such chunks: the write path stores them as
/// tombstones (`dedup_tombstones`), a replay finds none (the names it replays hold them so).
/// Names the pack had before are replaced (their rows dropped first).
pub fn put_names(tables: &mut Tables<'_>, pack: u64, names: &[ChunkId]) -> Result<Vec<usize>> {
    let old = pack_names::get(&tables.names_table, pack)?;
    if let Some(old) = old {
        let old = format::decode_pack_ids(&old)?;
        tables.unindex(pack, &old)?;
    }
    // The pack's set starts empty and grows as chunks are indexed at it: until its row is
    // written, "pack names id" means "id was indexed at pack by this call".
    tables.names.sets.insert(pack, IdSet::default());
    tables.names.writing = Some(pack);
    let mut elsewhere = Vec::new();
    // In the names' order: inserting in key order was no cheaper and left the index's leaves
    // emptier (catalog 10.7 → 11.2 % of the bytes written on unique data, `efficiency.md` §28).
    for (i, id) in names.iter().enumerate() {
        if *id == TOMBSTONE {
            continue;
        }
        if tables.insert(id, pack)? != pack {
            elsewhere.push(i);
        }
    }
    let mut stored = names.to_vec();
    for &i in &elsewhere {
        stored[i] = TOMBSTONE;
    }
    pack_names::put(
        &mut tables.names_table,
        pack,
        format::encode_pack_ids(&stored).as_slice(),
    )?;
    tables.names.writing = None;
    Ok(elsewhere)
}

/// Drops `pack`'s names and every index row pointing at it. The names move to the retired
/// ones: a placed span body may still read ids from them (`spans::drop_unread_retired_names`
/// drops them once none does).
pub fn delete_names(tables: &mut Tables<'_>, pack: u64) -> Result<()> {
    let old = pack_names::remove(&mut tables.names_table, pack)?;
    if let Some(old) = old {
        pack_names::put(&mut tables.retired, pack, &old)?;
        let old = format::decode_pack_ids(&old)?;
        tables.unindex(pack, &old)?;
    }
    Ok(())
}

/// Moves format-4 chunk rows (whole id → location) into the index and empties their table:
/// the upgrade of a format-4 catalog, and of rows replayed from journal objects before
/// version 8. Such rows precede every derived one, so the index must be empty. Returns how
/// many rows moved.
pub fn convert_legacy(txn: &redb::WriteTransaction) -> Result<u64> {
    let mut legacy = txn.open_table(LEGACY_CHUNKS)?;
    if legacy.is_empty()? {
        return Ok(0);
    }
    let mut index = txn.open_table(INDEX)?;
    let mut full = txn.open_table(INDEX_FULL)?;
    if !index.is_empty()? || !full.is_empty()? || !txn.open_table(RECENT)?.is_empty()? {
        return Err(crate::StoreError::Corrupt(
            "the catalog holds format-4 chunk rows beside format-5 index rows".into(),
        ));
    }
    let mut moved = 0u64;
    for row in legacy.iter()? {
        let (k, v) = row?;
        let id = ChunkId(*k.value());
        let pack = ChunkLoc::decode(v.value())?.pack;
        // Legacy ids are unique: a taken key is another id's.
        let key = key(&id);
        match pack_ref(pack) {
            Some(small) if index.get(key)?.is_none() => {
                index.insert(key, small)?;
            }
            _ => {
                full.insert(&id.0, pack)?;
            }
        }
        moved += 1;
    }
    legacy.retain(|_, _| false)?;
    Ok(moved)
}

/// Replaces formats 5 to 9's index with format 10's, rebuilt from the packs' names: for a
/// catalog of one of those versions, before anything reads the index. The names hold each
/// indexed chunk exactly once (a copy indexed elsewhere is a tombstone), so the order packs
/// are visited in changes nothing. Returns the chunks indexed.
pub fn rebuild_from_names(txn: &redb::WriteTransaction) -> Result<u64> {
    txn.delete_table(LEGACY_INDEX)?;
    let mut tables = Tables::open(txn)?;
    tables.index.main.retain(|_, _| false)?;
    tables.index.recent.retain(|_, _| false)?;
    tables.full.retain(|_, _| false)?;
    let mut packs = Vec::new();
    for row in tables.names_table.iter()? {
        let (pack, part) = row?.0.value();
        if part == 0 {
            packs.push(pack);
        }
    }
    let mut indexed = 0u64;
    for pack in packs {
        let Some(names) = pack_names::get(&tables.names_table, pack)? else {
            continue;
        };
        for id in format::decode_pack_ids(&names)? {
            if id == TOMBSTONE {
                continue;
            }
            if tables.insert(&id, pack)? != pack {
                return Err(crate::StoreError::Corrupt(format!(
                    "chunk {id} is named by two packs' names, neither as a tombstone"
                )));
            }
            indexed += 1;
        }
    }
    // Into an empty main table, a merge is an append in key order.
    while merge_step(&mut tables.index, &mut [0; KEY_BYTES], u64::MAX)? > 0 {}
    Ok(indexed)
}

/// The recent table's size, against the main one's, from which [`merge_step`] moves rows:
/// a sixteenth, so that a merge adds ~20 rows to each main leaf it rebuilds (12-byte rows,
/// ~340 to a leaf), and at least `floor` rows ([`MERGE_FLOOR`] by default), so that a small
/// index is not merged per batch.
pub fn merge_due(index: &KeyRows<impl ReadableTable<Key, PackRef>>, floor: u64) -> Result<bool> {
    let recent = index.recent.len()?;
    Ok(recent >= floor.max(1) && recent.saturating_mul(16) >= index.main.len()?)
}

/// The main table's rows from which new keys go to the recent table, for a merge floor: 64
/// floors (4 Mi rows, ~11 GiB of unique data, by default). Below, the main table is small
/// enough that inserting into it costs less than a recent row and its merge (§49).
pub fn recent_from(merge_floor: u64) -> u64 {
    merge_floor.saturating_mul(64)
}

/// The fewest recent rows a merge waits for by default: 64 Ki (768 KiB of rows, in the
/// catalog cache); 16 in this crate's unit tests, so that a store test of a few MB merges.
pub const MERGE_FLOOR: u64 = if cfg!(test) { 16 } else { 64 << 10 };

/// Moves up to `most` recent rows into the main table, in key order from `cursor` (wrapping
/// past the last key), and leaves `cursor` after the last moved. Returns how many moved. The
/// caller runs it in the transaction that indexed a batch: a crash loses nothing (the rows
/// move in one transaction), and a run of keys from one place rebuilds each main leaf in it
/// once (`efficiency.md` §49).
pub fn merge_step(
    index: &mut KeyRows<Table<'_, Key, PackRef>>,
    cursor: &mut Key,
    most: u64,
) -> Result<u64> {
    let mut run: Vec<(Key, PackRef)> = Vec::new();
    for row in index.recent.range(*cursor..)? {
        if run.len() as u64 >= most {
            break;
        }
        let (k, v) = row?;
        run.push((k.value(), v.value()));
    }
    if (run.len() as u64) < most {
        // Wrapped: the run goes on from the first key, up to where it began.
        for row in index.recent.range(..*cursor)? {
            if run.len() as u64 >= most {
                break;
            }
            let (k, v) = row?;
            run.push((k.value(), v.value()));
        }
    }
    for (k, v) in &run {
        if index.main.insert(*k, *v)?.is_some() {
            return Err(crate::StoreError::Corrupt(format!(
                "chunk index key {} is in both the main and the recent table",
                hex_key(k)
            )));
        }
        index.recent.remove(*k)?;
    }
    if let Some((last, _)) = run.last() {
        *cursor = next_key(last);
    }
    Ok(run.len() as u64)
}

/// Merges recent rows into the main one while [`merge_due`] says so, a run of
/// 1 Mi rows per durable transaction: after a replay or a restore, which index into it.
pub fn merge_while_due(db: &redb::Database, floor: u64) -> Result<()> {
    let mut cursor = [0; KEY_BYTES];
    loop {
        let mut txn = db.begin_write()?;
        txn.set_durability(redb::Durability::Immediate)?;
        let moved = {
            let mut index = KeyRows::write(&txn)?;
            if !merge_due(&index, floor)? {
                0
            } else {
                merge_step(&mut index, &mut cursor, 1 << 20)?
            }
        };
        if moved == 0 {
            txn.abort()?;
            return Ok(());
        }
        txn.commit()?;
    }
}

/// The key after `key`, wrapping to the first after the last.
fn next_key(key: &Key) -> Key {
    let mut word = [0u8; 8];
    word[8 - KEY_BYTES..].copy_from_slice(key);
    let next = (u64::from_be_bytes(word) + 1) & ((1u64 << (8 * KEY_BYTES)) - 1);
    let mut out = [0u8; KEY_BYTES];
    out.copy_from_slice(&next.to_be_bytes()[8 - KEY_BYTES..]);
    out
}

fn hex_key(key: &Key) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every index row, as (id key or whole id, pack), in key order: compared across catalogs.
pub fn rows(txn: &redb::ReadTransaction) -> Result<Vec<(Vec<u8>, u64)>> {
    let mut out = Vec::new();
    for table in [INDEX, RECENT] {
        for row in txn.open_table(table)?.iter()? {
            let (k, v) = row?;
            out.push((k.value().to_vec(), pack_of(v.value())));
        }
    }
    // Where a row is (main or recent) depends on when merges ran, not on what is indexed.
    out.sort_unstable();
    for row in txn.open_table(INDEX_FULL)?.iter()? {
        let (k, v) = row?;
        out.push((k.value().to_vec(), v.value()));
    }
    Ok(out)
}

/// How many chunks the index names.
pub fn len(txn: &redb::ReadTransaction) -> Result<u64> {
    Ok(KeyRows::read(txn)?.len()? + txn.open_table(INDEX_FULL)?.len()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redb::ReadableDatabase;
    use std::collections::BTreeMap;

    fn db() -> (tempfile::TempDir, redb::Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("c.redb")).unwrap();
        (dir, db)
    }

    /// An id from a small alphabet of prefixes, so collisions of the 6-byte key are common.
    fn id_strategy() -> impl Strategy<Value = ChunkId> {
        (0u8..4, 1u8..=255).prop_map(|(p, tail)| {
            let mut id = [0u8; 32];
            id[0] = p + 1;
            id[31] = tail;
            ChunkId(id)
        })
    }

    /// Small pack numbers, one of a later opening (past 32 bits), and two past 48 bits
    /// (indexed by whole ids).
    fn pack_strategy() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => 0u64..6,
            1 => Just((3u64 << 32) + 1),
            1 => Just(1u64 << 48),
            1 => Just((1u64 << 48) + 7)
        ]
    }

    #[derive(Clone, Debug)]
    enum Step {
        /// Names for a pack, indexed into the recent table if the flag is set.
        Put(u64, Vec<ChunkId>, bool),
        Delete(u64),
        /// A merge of up to this many recent rows, from a cursor at this first key byte.
        Merge(u8, u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (
                pack_strategy(),
                proptest::collection::vec(id_strategy(), 0..8),
                any::<bool>()
            )
                .prop_map(|(p, ids, recent)| Step::Put(p, ids, recent)),
            pack_strategy().prop_map(Step::Delete),
            (0u8..6, 0u64..4).prop_map(|(at, most)| Step::Merge(at, most)),
        ]
    }

    fn key_of(n: u64) -> Key {
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(&n.to_be_bytes()[8 - KEY_BYTES..]);
        key
    }

    /// A merge moves a run of recent rows in key order from the cursor, wraps past the last
    /// key, leaves the cursor after the run, and refuses a key both tables hold.
    #[test]
    fn merges_move_runs_of_recent_rows_in_key_order_and_wrap() {
        let (_dir, db) = db();
        let txn = db.begin_write().unwrap();
        {
            let mut index = KeyRows::write(&txn).unwrap();
            for n in [1u64, 5, 9, 13, (1 << 48) - 1] {
                index
                    .recent
                    .insert(key_of(n), pack_ref((n & 0xffff) + 100).unwrap())
                    .unwrap();
            }
            index.main.insert(key_of(7), pack_ref(3).unwrap()).unwrap();
            let mut cursor = key_of(6);
            assert_eq!(merge_step(&mut index, &mut cursor, 2).unwrap(), 2);
            assert_eq!(cursor, key_of(14));
            let main: Vec<u64> = index
                .main
                .iter()
                .unwrap()
                .map(|r| {
                    u64::from_be_bytes({
                        let mut w = [0u8; 8];
                        w[2..].copy_from_slice(&r.unwrap().0.value());
                        w
                    })
                })
                .collect();
            assert_eq!(main, vec![7, 9, 13]);
            // From 14: the last key, then around to 1 and 5; the cursor wraps past the end.
            assert_eq!(merge_step(&mut index, &mut cursor, 10).unwrap(), 3);
            assert_eq!(cursor, key_of(6));
            assert!(index.recent.is_empty().unwrap());
            assert_eq!(index.main.len().unwrap(), 6);
            assert_eq!(index.get(key_of(5)).unwrap(), Some(105));
            assert_eq!(merge_step(&mut index, &mut cursor, 10).unwrap(), 0);
            // After the last possible key the cursor wraps to the first.
            index.main.remove(key_of((1 << 48) - 1)).unwrap();
            index
                .recent
                .insert(key_of((1 << 48) - 1), pack_ref(1).unwrap())
                .unwrap();
            let mut at_end = key_of((1 << 48) - 2);
            assert_eq!(merge_step(&mut index, &mut at_end, 1).unwrap(), 1);
            assert_eq!(at_end, key_of(0));
            // A key in both tables is damage, not a row to overwrite.
            index
                .recent
                .insert(key_of(9), pack_ref(4).unwrap())
                .unwrap();
            assert!(matches!(
                merge_step(&mut index, &mut key_of(0), 10),
                Err(crate::StoreError::Corrupt(_))
            ));
        }
        txn.abort().unwrap();
    }

    /// Merges start when the recent table holds [`MERGE_FLOOR`] rows and a sixteenth of the
    /// main one's.
    #[test]
    fn a_merge_is_due_from_a_sixteenth_of_the_main_table_and_a_floor() {
        let (_dir, db) = db();
        let txn = db.begin_write().unwrap();
        {
            let mut index = KeyRows::write(&txn).unwrap();
            let value = pack_ref(1).unwrap();
            for n in 0..MERGE_FLOOR - 1 {
                index.recent.insert(key_of(2 * n), value).unwrap();
            }
            assert!(!merge_due(&index, MERGE_FLOOR).unwrap());
            index.recent.insert(key_of(1), value).unwrap();
            assert!(merge_due(&index, MERGE_FLOOR).unwrap());
            // A main table of more than 16 times the recent rows: not due.
            for n in 0..=16 * MERGE_FLOOR {
                index.main.insert(key_of((1 << 40) + n), value).unwrap();
            }
            assert!(!merge_due(&index, MERGE_FLOOR).unwrap());
            index.main.remove(key_of(1 << 40)).unwrap();
            assert!(merge_due(&index, MERGE_FLOOR).unwrap());
        }
        txn.abort().unwrap();
    }

    proptest! {
        /// Reference model: the index is "each named chunk → the first pack that named it
        /// and still does", and a chunk named again elsewhere comes back tombstoned.
        #[test]
        fn index_matches_the_names(steps in proptest::collection::vec(step(), 1..40)) {
            let (_dir, db) = db();
            // model: pack → names as stored; chunk → pack
            let mut packs: BTreeMap<u64, Vec<ChunkId>> = BTreeMap::new();
            let mut model: BTreeMap<ChunkId, u64> = BTreeMap::new();
            for s in steps {
                let txn = db.begin_write().unwrap();
                {
                    let mut t = Tables::open(&txn).unwrap();
                    match s {
                        Step::Put(p, ids, into_recent) => {
                            t.index_into_recent_from(if into_recent { 0 } else { u64::MAX })
                                .unwrap();
                            if let Some(old) = packs.remove(&p) {
                                model.retain(|_, at| *at != p);
                                drop(old);
                            }
                            let mut dedup = Vec::new();
                            for id in &ids {
                                // A pack never holds one chunk twice (the write path's pending set).
                                if !dedup.contains(id) { dedup.push(*id); }
                            }
                            let elsewhere = put_names(&mut t, p, &dedup).unwrap();
                            let mut stored = dedup.clone();
                            let mut expect_elsewhere = Vec::new();
                            for (i, id) in dedup.iter().enumerate() {
                                if model.contains_key(id) {
                                    expect_elsewhere.push(i);
                                    stored[i] = TOMBSTONE;
                                } else {
                                    model.insert(*id, p);
                                }
                            }
                            prop_assert_eq!(elsewhere, expect_elsewhere);
                            packs.insert(p, stored);
                        }
                        Step::Delete(p) => {
                            delete_names(&mut t, p).unwrap();
                            packs.remove(&p);
                            model.retain(|_, at| *at != p);
                        }
                        Step::Merge(at, most) => {
                            let recent = t.index.recent.len().unwrap();
                            let mut cursor = [at, 0, 0, 0, 0, 0];
                            let moved = merge_step(&mut t.index, &mut cursor, most).unwrap();
                            prop_assert_eq!(moved, most.min(recent));
                            prop_assert_eq!(t.index.recent.len().unwrap(), recent - moved);
                        }
                    }
                }
                txn.commit().unwrap();
                let txn = db.begin_read().unwrap();
                let index = KeyRows::read(&txn).unwrap();
                // Invariant of the two tables: a key is in one of them.
                for row in index.recent.iter().unwrap() {
                    prop_assert!(index.main.get(row.unwrap().0.value()).unwrap().is_none());
                }
                let full = txn.open_table(INDEX_FULL).unwrap();
                let names_table = txn.open_table(PACK_NAMES).unwrap();
                let mut names = Names::new();
                prop_assert_eq!(len(&txn).unwrap(), model.len() as u64);
                for (id, at) in &model {
                    prop_assert_eq!(
                        lookup(&index, &full, &names_table, &mut names, id).unwrap(),
                        Some(*at)
                    );
                }
                for (p, ids) in &packs {
                    for id in ids.iter().filter(|i| **i != TOMBSTONE) {
                        prop_assert_eq!(
                            indexed_at(&index, &full, id, *p).unwrap(),
                            model.get(id) == Some(p)
                        );
                    }
                }
                for ids in packs.values() {
                    for id in ids.iter().filter(|i| !model.contains_key(i) && **i != TOMBSTONE) {
                        prop_assert_eq!(
                            lookup(&index, &full, &names_table, &mut names, id).unwrap(),
                            None
                        );
                    }
                }
                let mut absent = [9u8; 32];
                absent[0] = 1;
                prop_assert_eq!(
                    lookup(&index, &full, &names_table, &mut names, &ChunkId(absent)).unwrap(),
                    None
                );
            }
        }
    }
}
