//! Spans: a record's reference list, stored once, whose body may hold pieces (spans of their
//! own, one level deep; see `format.rs`). This module is the only home of the span tables:
//! every reader decodes bodies here, so the nesting rule and the length checks live in one place.
//!
//! Storage (catalog format 7): [`SPAN_INDEX`] maps a span id to a sequence number, and
//! [`SPAN_BODIES`] holds the body in parts (`parts.rs`) under `(seq, part)` keys.
//! Why not one row per span keyed by its id: ids are random, and redb leaves filled in random
//! key order stay about 40 % empty, while a body over a page takes a power-of-two run of pages
//! (a 256 KiB record's body of ~4 KiB: half empty). Sequence numbers only grow, so bodies are
//! appended in key order into full leaves; the index rows are 40 bytes (`efficiency.md` §26).
//!
//! Catalog format 8 stores a flat body *placed* (`format::PlacedRefs`): runs of positions in
//! packs' names instead of 32-byte ids. Readers get the body as written ([`SpanSource`]),
//! rebuilt and checked against the span's id; bundles and the fingerprint carry it so too. A
//! journal op carries the body as its flush stored it, placed or not, and a checkpoint every
//! body as stored with the retired names (`efficiency.md` §27, §37, §38).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use redb::{
    ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata, Table, TableDefinition,
    WriteTransaction,
};

use crate::chunk_index;
use crate::format::{
    self, ChunkId, ChunkRef, Entry, PlacedRefs, RefRun, SPAN_PREFIX_LEN, SpanId, TOMBSTONE,
};
use crate::pack_names::{self, PACK_NAMES, RETIRED_NAMES};
use crate::parts;
use crate::{Result, StoreError};

/// Span id → the sequence number of its body in [`SPAN_BODIES`].
pub const SPAN_INDEX: TableDefinition<&[u8; 32], u64> = TableDefinition::new("span_index");
/// `(sequence number, part)` → part of a span's body.
pub const SPAN_BODIES: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("span_bodies");
/// One row (key 0): bodies below this sequence number were offered to [`place_new_bodies`].
pub const SPANS_PLACED_BELOW: TableDefinition<u8, u64> = TableDefinition::new("spans_placed_below");

type Names = ReadOnlyTable<(u64, u32), &'static [u8]>;

/// The span tables of a read transaction, with the pack names placed bodies read ids from.
pub struct ReadSpans {
    index: ReadOnlyTable<&'static [u8; 32], u64>,
    bodies: ReadOnlyTable<(u64, u32), &'static [u8]>,
    names: Names,
    retired: Names,
}

/// The span tables of a write transaction. They store bodies and never expand placed ones, so
/// they leave the names tables to the chunk index's writers in the same transaction.
pub struct WriteSpans<'t> {
    index: Table<'t, &'static [u8; 32], u64>,
    bodies: Table<'t, (u64, u32), &'static [u8]>,
    placed_below: Table<'t, u8, u64>,
}

pub fn read(txn: &ReadTransaction) -> Result<ReadSpans> {
    Ok(ReadSpans {
        index: txn.open_table(SPAN_INDEX)?,
        bodies: txn.open_table(SPAN_BODIES)?,
        names: txn.open_table(PACK_NAMES)?,
        retired: txn.open_table(RETIRED_NAMES)?,
    })
}

pub fn write(txn: &WriteTransaction) -> Result<WriteSpans<'_>> {
    Ok(WriteSpans {
        index: txn.open_table(SPAN_INDEX)?,
        bodies: txn.open_table(SPAN_BODIES)?,
        placed_below: txn.open_table(SPANS_PLACED_BELOW)?,
    })
}

/// Where compact rows' span prefixes are resolved: the stored spans' ids.
pub trait SpanIds {
    /// The ids of stored spans that start with `prefix` (almost always one).
    fn ids_with_prefix(&self, prefix: &[u8; SPAN_PREFIX_LEN]) -> Result<Vec<[u8; 32]>>;
}

/// Reading span bodies as they were written (placed ones expanded), whatever transaction.
pub trait SpanSource: SpanIds {
    /// Span `id`'s body, or `None` if it is not stored.
    fn body(&self, id: &[u8; 32]) -> Result<Option<Vec<u8>>>;
}

impl SpanSource for ReadSpans {
    fn body(&self, id: &[u8; 32]) -> Result<Option<Vec<u8>>> {
        let Some(seq) = self.index.get(id)?.map(|v| v.value()) else {
            return Ok(None);
        };
        let stored = body_at(&self.bodies, id, seq)?;
        self.as_written(id, stored).map(Some)
    }
}

/// The smallest and largest ids that start with `prefix`.
fn prefix_range(prefix: &[u8; SPAN_PREFIX_LEN]) -> ([u8; 32], [u8; 32]) {
    let mut low = [0u8; 32];
    low[..SPAN_PREFIX_LEN].copy_from_slice(prefix);
    let mut high = [0xffu8; 32];
    high[..SPAN_PREFIX_LEN].copy_from_slice(prefix);
    (low, high)
}

/// The ids in a span index that start with `prefix`.
fn index_ids_with_prefix(
    index: &impl ReadableTable<&'static [u8; 32], u64>,
    prefix: &[u8; SPAN_PREFIX_LEN],
) -> Result<Vec<[u8; 32]>> {
    let (low, high) = prefix_range(prefix);
    let mut ids = Vec::with_capacity(1);
    for row in index.range::<&[u8; 32]>(&low..=&high)? {
        ids.push(*row?.0.value());
    }
    Ok(ids)
}

impl SpanIds for ReadSpans {
    fn ids_with_prefix(&self, prefix: &[u8; SPAN_PREFIX_LEN]) -> Result<Vec<[u8; 32]>> {
        index_ids_with_prefix(&self.index, prefix)
    }
}

impl SpanIds for ReadOnlyTable<&'static [u8; 32], u64> {
    fn ids_with_prefix(&self, prefix: &[u8; SPAN_PREFIX_LEN]) -> Result<Vec<[u8; 32]>> {
        index_ids_with_prefix(self, prefix)
    }
}

impl SpanIds for Table<'_, &'static [u8; 32], u64> {
    fn ids_with_prefix(&self, prefix: &[u8; SPAN_PREFIX_LEN]) -> Result<Vec<[u8; 32]>> {
        index_ids_with_prefix(self, prefix)
    }
}

/// The spans of an export bundle, before they are stored anywhere.
impl SpanIds for std::collections::BTreeSet<[u8; 32]> {
    fn ids_with_prefix(&self, prefix: &[u8; SPAN_PREFIX_LEN]) -> Result<Vec<[u8; 32]>> {
        let (low, high) = prefix_range(prefix);
        Ok(self.range(low..=high).copied().collect())
    }
}

/// What a row may name, for marking what is live: a compact row's every span with a prefix it
/// names (all of them when two share one; none when none is stored, which is the reader's
/// error to report), so a mark never misses a span the row means. Nothing is checked.
pub fn row_marks(spans: &impl SpanIds, bytes: &[u8]) -> Result<Vec<Entry>> {
    let row = match format::decode_row(bytes)? {
        format::StoredRow::Full(entries) => return Ok(entries),
        format::StoredRow::Compact(row) => row,
    };
    let mut entries = Vec::with_capacity(row.entries.len());
    for e in row.entries {
        match e {
            format::CompactEntry::Chunk(r) => entries.push(Entry::Chunk(r)),
            format::CompactEntry::Span { prefix, len } => {
                for id in spans.ids_with_prefix(&prefix)? {
                    entries.push(Entry::Span {
                        id: SpanId(id),
                        len,
                    });
                }
            }
        }
    }
    Ok(entries)
}

/// Ambiguous prefixes settled by trying their spans against a row's check, at most this many
/// combinations (two stored spans share a prefix once in 2^64 / n² pairs; more is damage).
const PREFIX_COMBINATIONS_MAX: usize = 64;

/// A row (an extent row or a body of pieces) of any version as entries with whole ids. A
/// compact row's span prefixes are resolved among `spans`, and the full row it stands for must
/// hash to its check, so a prefix two spans share is settled and a damaged one is caught.
pub fn decode_row(spans: &impl SpanIds, bytes: &[u8]) -> Result<Vec<Entry>> {
    let row = match format::decode_row(bytes)? {
        format::StoredRow::Full(entries) => return Ok(entries),
        format::StoredRow::Compact(row) => row,
    };
    // Entries whose prefix more than one stored span has, with those spans.
    let mut shared: Vec<(usize, Vec<[u8; 32]>)> = Vec::new();
    let mut entries = Vec::with_capacity(row.entries.len());
    for e in &row.entries {
        entries.push(match *e {
            format::CompactEntry::Chunk(r) => Entry::Chunk(r),
            format::CompactEntry::Span { prefix, len } => {
                let ids = spans.ids_with_prefix(&prefix)?;
                let Some(&first) = ids.first() else {
                    return Err(StoreError::Corrupt(format!(
                        "a row names span {} (by its first 8 bytes), which is not stored",
                        SpanId(prefix_range(&prefix).0)
                    )));
                };
                if ids.len() > 1 {
                    shared.push((entries.len(), ids));
                }
                Entry::Span {
                    id: SpanId(first),
                    len,
                }
            }
        });
    }
    if format::row_check(&entries) == row.check {
        return Ok(entries);
    }
    // A shared prefix (or damage): try every combination of the shared prefixes' spans.
    let combinations = shared
        .iter()
        .try_fold(1usize, |n, (_, ids)| n.checked_mul(ids.len()))
        .filter(|&n| n <= PREFIX_COMBINATIONS_MAX)
        .ok_or_else(|| {
            StoreError::Corrupt("a row's span prefixes match too many stored spans".into())
        })?;
    for combination in 1..combinations {
        let mut n = combination;
        for (slot, ids) in &shared {
            if let Entry::Span { id, .. } = &mut entries[*slot] {
                *id = SpanId(ids[n % ids.len()]);
            }
            n /= ids.len();
        }
        if format::row_check(&entries) == row.check {
            return Ok(entries);
        }
    }
    Err(StoreError::Corrupt(
        "a row's entries do not hash to its check (damaged, or a span it names is gone)".into(),
    ))
}

/// The body stored under `seq` for span `id`; the index names only bodies that are stored.
fn body_at(
    bodies: &impl ReadableTable<(u64, u32), &'static [u8]>,
    id: &[u8; 32],
    seq: u64,
) -> Result<Vec<u8>> {
    parts::read(bodies, seq)?.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "span {} is indexed at body {seq}, which is not stored",
            SpanId(*id)
        ))
    })
}

impl ReadSpans {
    pub fn contains(&self, id: &[u8; 32]) -> Result<bool> {
        Ok(self.index.get(id)?.is_some())
    }

    /// Every stored span as (id, body as written), in id order.
    pub fn for_each(&self, mut visit: impl FnMut(&[u8; 32], &[u8]) -> Result<()>) -> Result<()> {
        for row in self.index.iter()? {
            let (id, seq) = row?;
            let stored = body_at(&self.bodies, id.value(), seq.value())?;
            visit(id.value(), &self.as_written(id.value(), stored)?)?;
        }
        Ok(())
    }

    /// Every stored span as (id, body as stored: placed or as written), in id order.
    pub fn for_each_stored(
        &self,
        mut visit: impl FnMut(&[u8; 32], &[u8]) -> Result<()>,
    ) -> Result<()> {
        for row in self.index.iter()? {
            let (id, seq) = row?;
            visit(id.value(), &body_at(&self.bodies, id.value(), seq.value())?)?;
        }
        Ok(())
    }

    /// The body span `id` was written with: a placed body's ids are read from the names it
    /// points at (a live pack's, else a retired one's). The span's id is the hash of that
    /// body, so the expansion is checked against it: names that changed under a placed body
    /// are reported as damage, never read as other chunks.
    fn as_written(&self, id: &[u8; 32], stored: Vec<u8>) -> Result<Vec<u8>> {
        if !format::span_is_placed(&stored) {
            return Ok(stored);
        }
        let placed = format::decode_placed_refs(&stored)?;
        let mut ids = Vec::with_capacity(placed.lens.len());
        for run in &placed.runs {
            match *run {
                RefRun::Literal(chunk) => ids.push(chunk),
                RefRun::Named { pack, first, count } => {
                    if !pack_names::ids_at(&self.names, pack, first, count, &mut ids)?
                        && !pack_names::ids_at(&self.retired, pack, first, count, &mut ids)?
                    {
                        return Err(StoreError::Corrupt(format!(
                            "span {} reads the names of pack {pack}, which the catalog does \
                             not hold",
                            SpanId(*id)
                        )));
                    }
                }
            }
        }
        let refs: Vec<ChunkRef> = ids
            .into_iter()
            .zip(placed.lens)
            .map(|(id, len)| ChunkRef { id, len })
            .collect();
        let body = format::encode_refs(&refs);
        if SpanId::of(&body).0 != *id {
            return Err(StoreError::Corrupt(format!(
                "span {}: the names its placed body reads are not the chunks it was written with",
                SpanId(*id)
            )));
        }
        Ok(body)
    }
}

impl WriteSpans<'_> {
    pub fn contains(&self, id: &[u8; 32]) -> Result<bool> {
        Ok(self.index.get(id)?.is_some())
    }

    fn placed_below(&self) -> Result<u64> {
        Ok(self.placed_below.get(0)?.map_or(0, |v| v.value()))
    }

    /// Stores span `id`'s body, replacing the one it had; returns the body's sequence number.
    pub fn insert(&mut self, id: &[u8; 32], body: &[u8]) -> Result<u64> {
        // Never below the placing pass's mark, which would skip it.
        let seq = match self.bodies.last()? {
            Some((key, _)) => key.value().0 + 1,
            None => 0,
        }
        .max(self.placed_below()?);
        parts::append(&mut self.bodies, seq, body)?;
        // The index row's old value, if any, names the body this one replaces.
        let old = self.index.insert(id, seq)?.map(|v| v.value());
        if let Some(old) = old {
            parts::delete(&mut self.bodies, old)?;
        }
        Ok(seq)
    }

    /// [`WriteSpans::insert`], storing a flat body placed when `placer` finds every chunk's
    /// names and that is smaller; otherwise as given. Says which: the journal carries the body
    /// as stored (`efficiency.md` §37).
    pub fn insert_placing(
        &mut self,
        id: &[u8; 32],
        body: &[u8],
        placer: &mut Placer<'_, '_>,
    ) -> Result<Inserted> {
        Ok(match placer.placing(body, false)? {
            Placing::Placed(placed) => {
                self.insert(id, &placed)?;
                Inserted::Placed(placed)
            }
            Placing::Kept => {
                self.insert(id, body)?;
                Inserted::AsWritten
            }
            Placing::Unfound => Inserted::Unplaced(self.insert(id, body)?),
        })
    }

    /// Places the bodies under `pending` (sequence numbers from [`Self::insert_placing`])
    /// whose chunks' packs are named by now, and keeps the others in `pending`. Placing them
    /// at a flush rewrites bodies an earlier flush of the same durable interval wrote, whose
    /// pages redb reuses at once; left to the durable commit, their pages stay in the file
    /// until a later one (`efficiency.md` §27: a 2 GiB tape write's catalog 12.2 → 8.8 MB).
    pub fn place_pending(
        &mut self,
        placer: &mut Placer<'_, '_>,
        pending: &mut Vec<u64>,
    ) -> Result<()> {
        let mut still = Vec::new();
        for &seq in pending.iter() {
            // Gone (reclaimed, replaced): nothing to do.
            let Some(body) = parts::read(&self.bodies, seq)? else {
                continue;
            };
            if let Placing::Unfound = self.place_stored(seq, &body, placer, false)? {
                still.push(seq);
            }
        }
        *pending = still;
        Ok(())
    }

    /// Stores `body`, the body under `seq`, placed if [`Placer::placing`] places it. Only a
    /// flat body indexed under its own hash is offered: a read checks an expansion against
    /// the span's id, the hash of its body (every body the store writes is so indexed).
    fn place_stored(
        &mut self,
        seq: u64,
        body: &[u8],
        placer: &mut Placer<'_, '_>,
        spell_unfound: bool,
    ) -> Result<Placing> {
        if !format::span_is_flat(body)
            || self.index.get(&SpanId::of(body).0)?.map(|v| v.value()) != Some(seq)
        {
            return Ok(Placing::Kept);
        }
        let placing = placer.placing(body, spell_unfound)?;
        if let Placing::Placed(placed) = &placing {
            parts::delete(&mut self.bodies, seq)?;
            parts::write(&mut self.bodies, seq, placed)?;
        }
        Ok(placing)
    }

    /// Drops span `id`; whether it was stored.
    pub fn remove(&mut self, id: &[u8; 32]) -> Result<bool> {
        let Some(seq) = self.index.remove(id)?.map(|v| v.value()) else {
            return Ok(false);
        };
        parts::delete(&mut self.bodies, seq)?;
        Ok(true)
    }

    /// Empties the span tables (a checkpoint restore starts from nothing).
    pub fn clear(&mut self) -> Result<()> {
        self.index.retain(|_, _| false)?;
        self.bodies.retain(|_, _| false)?;
        self.placed_below.retain(|_, _| false)?;
        Ok(())
    }

    /// Each stored body in sequence order from `from`, whole, in batches (a first pass over
    /// an upgraded catalog meets every span).
    fn bodies_from(&self, from: u64, batch_bytes: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        for row in self.bodies.range((from, 0)..)? {
            let (key, part) = row?;
            let seq = key.value().0;
            if batch.last().map(|(s, _)| *s) != Some(seq) {
                if bytes >= batch_bytes {
                    break;
                }
                batch.push((seq, Vec::new()));
            }
            let part = part.value();
            bytes += part.len();
            if let Some((_, body)) = batch.last_mut() {
                body.extend_from_slice(part);
            }
        }
        Ok(batch)
    }
}

/// Finds where chunks' names are, to store flat bodies placed (catalog format 8): a run of
/// references to chunks named one after the other in one pack costs a few bytes, where the
/// written body spells every 32-byte id (`efficiency.md` §27).
pub struct Placer<'t, 'c> {
    index: chunk_index::KeyRows<Table<'t, chunk_index::Key, chunk_index::PackRef>>,
    full: Table<'t, &'static [u8; 32], u64>,
    names: Table<'t, (u64, u32), &'static [u8]>,
    packs: &'c NameCache,
}

/// Packs' names as [`Placer`]s search them, kept between transactions (a stream's flush
/// places a few records' bodies, mostly in the packs the last one used). A pack's names
/// never change while it is named; an entry for a pack since dropped is never consulted,
/// since a search starts where the index points.
#[derive(Default)]
pub struct NameCache {
    packs: parking_lot::Mutex<HashMap<u64, Arc<NameList>>>,
}

/// A pack's names, and their positions by id prefix (sorted, for a binary search).
pub struct NameList {
    ids: Vec<ChunkId>,
    by_prefix: Vec<(u64, u32)>,
}

impl NameList {
    fn position(&self, id: &ChunkId) -> Option<u32> {
        let key = chunk_index::prefix(id);
        let from = self.by_prefix.partition_point(|(p, _)| *p < key);
        self.by_prefix[from..]
            .iter()
            .take_while(|(p, _)| *p == key)
            .map(|(_, at)| *at)
            .find(|&at| self.ids[at as usize] == *id)
    }
}

impl<'t, 'c> Placer<'t, 'c> {
    /// Packs whose names are held at once (each up to ~1 MB with its prefixes).
    const PACKS_HELD: usize = 32;

    /// Opens the index and the names in `txn`, which must not have them open elsewhere.
    pub fn open(txn: &'t WriteTransaction, packs: &'c NameCache) -> Result<Placer<'t, 'c>> {
        Ok(Placer {
            index: chunk_index::KeyRows::write(txn)?,
            full: txn.open_table(chunk_index::INDEX_FULL)?,
            names: txn.open_table(PACK_NAMES)?,
            packs,
        })
    }

    fn names_of(&mut self, pack: u64) -> Result<Option<Arc<NameList>>> {
        if let Some(list) = self.packs.packs.lock().get(&pack) {
            return Ok(Some(list.clone()));
        }
        let Some(encoded) = pack_names::get(&self.names, pack)? else {
            return Ok(None);
        };
        let ids = format::decode_pack_ids(&encoded)?;
        let mut by_prefix: Vec<(u64, u32)> = ids
            .iter()
            .enumerate()
            .filter(|(_, id)| **id != TOMBSTONE)
            .map(|(at, id)| (chunk_index::prefix(id), at as u32))
            .collect();
        by_prefix.sort_unstable();
        let list = Arc::new(NameList { ids, by_prefix });
        let mut packs = self.packs.packs.lock();
        if packs.len() >= Self::PACKS_HELD {
            packs.clear();
        }
        packs.insert(pack, list.clone());
        Ok(Some(list))
    }

    /// Where `id` is named: a pack the index gives for it whose names hold it.
    fn find(&mut self, id: &ChunkId) -> Result<Option<(u64, Arc<NameList>, u32)>> {
        for pack in chunk_index::candidates(&self.index, &self.full, id)?
            .into_iter()
            .flatten()
        {
            if let Some(list) = self.names_of(pack)?
                && let Some(at) = list.position(id)
            {
                return Ok(Some((pack, list, at)));
            }
        }
        Ok(None)
    }

    /// The placed form of a flat body, if it is smaller. A chunk whose names are not found
    /// leaves it as written, or with `spell_unfound` becomes a literal id in the runs.
    fn placing(&mut self, body: &[u8], spell_unfound: bool) -> Result<Placing> {
        if !format::span_is_flat(body) {
            return Ok(Placing::Kept);
        }
        let refs = format::decode_refs(body)?;
        let mut runs = Vec::new();
        let mut open: Option<(u64, Arc<NameList>, u32, u32)> = None;
        for r in &refs {
            if let Some((_, list, first, count)) = &mut open
                && list.ids.get((*first + *count) as usize) == Some(&r.id)
            {
                *count += 1;
                continue;
            }
            if let Some((pack, _, first, count)) = open.take() {
                runs.push(RefRun::Named { pack, first, count });
            }
            match self.find(&r.id)? {
                Some((pack, list, at)) => open = Some((pack, list, at, 1)),
                None if spell_unfound => runs.push(RefRun::Literal(r.id)),
                None => return Ok(Placing::Unfound),
            }
        }
        if let Some((pack, _, first, count)) = open {
            runs.push(RefRun::Named { pack, first, count });
        }
        let placed = format::encode_placed_refs(&PlacedRefs {
            lens: refs.iter().map(|r| r.len).collect(),
            runs,
        });
        Ok(if placed.len() < body.len() {
            Placing::Placed(placed)
        } else {
            Placing::Kept
        })
    }
}

/// What became of a flat body offered for placing.
enum Placing {
    Placed(Vec<u8>),
    /// Stays as it is: not a flat body, or its placed form would not be smaller (a body of
    /// a few spelled-out ids).
    Kept,
    /// A chunk's names were not found (its pack is not named yet).
    Unfound,
}

/// How [`WriteSpans::insert_placing`] stored a body.
#[derive(Debug, PartialEq, Eq)]
pub enum Inserted {
    /// Placed: these bytes, which name positions in packs' names that are in the catalog.
    Placed(Vec<u8>),
    /// As written, and it stays so (not a flat body, or placing it saves nothing).
    AsWritten,
    /// As written under this sequence number because a chunk's pack is not named yet, for
    /// [`WriteSpans::place_pending`] to take up at a later flush (and `place_new_bodies` at the
    /// durable commit).
    Unplaced(u64),
}

/// What [`place_new_bodies`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlacingReport {
    /// Bodies looked at (every one written since the last pass).
    pub offered: u64,
    /// Bodies stored placed by this pass.
    pub placed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Stores placed every flat body written since the last pass that was not (its chunks'
/// packs were not named yet when it was written, or it came from a replay or an import).
/// Called where every pack is stored and named (a synchronising point, and on open), so each
/// chunk is found; one that is not is spelled out. Only the catalog's local form changes:
/// the journal keeps such a body as it was written (a replay places it here again).
pub fn place_new_bodies(txn: &WriteTransaction, names: &NameCache) -> Result<PlacingReport> {
    const BATCH_BYTES: usize = 8 << 20;
    let mut spans = write(txn)?;
    let mut placer = Placer::open(txn, names)?;
    let mut report = PlacingReport::default();
    let mut next = spans.placed_below()?;
    loop {
        let batch = spans.bodies_from(next, BATCH_BYTES)?;
        let Some((last, _)) = batch.last() else {
            break;
        };
        next = last + 1;
        for (seq, body) in batch {
            report.offered += 1;
            if let Placing::Placed(placed) = spans.place_stored(seq, &body, &mut placer, true)? {
                report.placed += 1;
                report.bytes_before += body.len() as u64;
                report.bytes_after += placed.len() as u64;
            }
        }
    }
    spans.placed_below.insert(0, next)?;
    Ok(report)
}

/// Drops the retired names no placed body reads any more (reclaim retires a dropped pack's
/// names; spans that read them may be dropped later). Returns how many packs' names went.
pub fn drop_unread_retired_names(
    spans: &WriteSpans<'_>,
    retired: &mut Table<'_, (u64, u32), &'static [u8]>,
) -> Result<u64> {
    if retired.is_empty()? {
        return Ok(0);
    }
    let mut read: HashSet<u64> = HashSet::new();
    let mut from = 0;
    loop {
        let batch = spans.bodies_from(from, 8 << 20)?;
        let Some((last, _)) = batch.last() else {
            break;
        };
        from = last + 1;
        for (_, body) in batch {
            if format::span_is_placed(&body) {
                for run in format::decode_placed_refs(&body)?.runs {
                    if let RefRun::Named { pack, .. } = run {
                        read.insert(pack);
                    }
                }
            }
        }
    }
    let mut dropped = HashSet::new();
    retired.retain(|(pack, _), _| {
        let keep = read.contains(&pack);
        if !keep {
            dropped.insert(pack);
        }
        keep
    })?;
    Ok(dropped.len() as u64)
}

/// Moves spans a catalog before format 7 kept one row each (`catalog::LEGACY_SPANS`) into the
/// span tables and empties that table. Returns how many moved.
pub fn convert_legacy(txn: &WriteTransaction) -> Result<u64> {
    let mut legacy = txn.open_table(crate::catalog::LEGACY_SPANS)?;
    let mut spans = write(txn)?;
    let mut moved = 0u64;
    for row in legacy.iter()? {
        let (id, body) = row?;
        spans.insert(id.value(), body.value())?;
        moved += 1;
    }
    legacy.retain(|_, _| false)?;
    Ok(moved)
}

/// The stored body of span `id`; a span that is referenced must be stored.
pub(crate) fn stored(spans: &impl SpanSource, id: SpanId) -> Result<Vec<u8>> {
    spans
        .body(&id.0)?
        .ok_or_else(|| StoreError::Corrupt(format!("span {id} is referenced but not stored")))
}

/// A span's body as entries (chunk references, and pieces when the record was stored in
/// pieces), checked to cover the `len` bytes its referrer promised.
pub(crate) fn decode_span(
    spans: &impl SpanIds,
    id: SpanId,
    body: &[u8],
    len: u32,
) -> Result<Vec<Entry>> {
    let entries = decode_row(spans, body)?;
    check_len(id, entries.iter().map(|e| u64::from(e.bytes())), len)?;
    Ok(entries)
}

/// A flat body (every piece, and a record not cut into pieces) as chunk references: it must be
/// flat (a piece that held pieces would nest spans two levels) and cover `len`.
pub(crate) fn decode_flat(id: SpanId, body: &[u8], len: u32) -> Result<Vec<ChunkRef>> {
    if !format::span_is_flat(body) {
        return Err(StoreError::Corrupt(format!(
            "piece {id} holds pieces (spans nest one level)"
        )));
    }
    let refs = format::decode_refs(body)?;
    check_len(id, refs.iter().map(|r| u64::from(r.len)), len)?;
    Ok(refs)
}

/// The entries of span `id`, checked to cover `len` bytes.
pub(crate) fn span_entries(spans: &impl SpanSource, id: SpanId, len: u32) -> Result<Vec<Entry>> {
    decode_span(spans, id, &stored(spans, id)?, len)
}

/// The chunk references of piece `id`, checked to be flat and cover `len` bytes.
pub(crate) fn piece_refs(spans: &impl SpanSource, id: SpanId, len: u32) -> Result<Vec<ChunkRef>> {
    decode_flat(id, &stored(spans, id)?, len)
}

/// The chunk references of span `id`, pieces expanded (the span and each piece checked to
/// cover their lengths, so the whole covers `len`). Used on every read of a record.
pub(crate) fn span_refs(spans: &impl SpanSource, id: SpanId, len: u32) -> Result<Vec<ChunkRef>> {
    let body = stored(spans, id)?;
    if format::span_is_flat(&body) {
        // Most spans (every record that was not cut into pieces): straight to references, on
        // the read path without a list of entries in between.
        return decode_flat(id, &body, len);
    }
    let mut out = Vec::new();
    for entry in decode_span(spans, id, &body, len)? {
        match entry {
            Entry::Chunk(r) => out.push(r),
            Entry::Span { id: piece, len } => out.extend(piece_refs(spans, piece, len)?),
        }
    }
    Ok(out)
}

fn check_len(id: SpanId, lens: impl Iterator<Item = u64>, len: u32) -> Result<()> {
    let total: u64 = lens.sum();
    if total != u64::from(len) {
        return Err(StoreError::Corrupt(format!(
            "span {id} holds {total} bytes, not {len}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod table_tests {
    use proptest::prelude::*;
    use redb::{Database, ReadableDatabase};

    use super::*;

    proptest! {
        /// Against a map: inserts, replacements and removes of bodies of any length read back
        /// whole, in any order of operations across transactions, and `for_each` lists exactly
        /// the stored spans in id order.
        #[test]
        fn bodies_read_back_whole(
            txns in prop::collection::vec(
                prop::collection::vec((0u8..8, prop::option::of(0usize..5000)), 1..12),
                1..5,
            )
        ) {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::create(dir.path().join("db")).unwrap();
            let mut model = std::collections::BTreeMap::new();
            for (t, ops) in txns.iter().enumerate() {
                let txn = db.begin_write().unwrap();
                {
                    txn.open_table(PACK_NAMES).unwrap();
                    txn.open_table(RETIRED_NAMES).unwrap();
                    let mut spans = write(&txn).unwrap();
                    for (i, (id, len)) in ops.iter().enumerate() {
                        let key = [*id; 32];
                        match len {
                            Some(len) => {
                                // Bodies as written start with version 1 or 2 (3 is placed).
                                let body: Vec<u8> = (0..*len)
                                    .map(|b| match b {
                                        0 => 1 + (i % 2) as u8,
                                        _ => (b * 3 + i + 7 * t) as u8,
                                    })
                                    .collect();
                                spans.insert(&key, &body).unwrap();
                                model.insert(key, body);
                            }
                            None => {
                                prop_assert_eq!(spans.remove(&key).unwrap(), model.remove(&key).is_some());
                            }
                        }
                    }
                }
                txn.commit().unwrap();
            }
            let txn = db.begin_read().unwrap();
            let spans = read(&txn).unwrap();
            for id in 0u8..8 {
                prop_assert_eq!(spans.body(&[id; 32]).unwrap(), model.get(&[id; 32]).cloned());
                prop_assert_eq!(spans.contains(&[id; 32]).unwrap(), model.contains_key(&[id; 32]));
            }
            let mut seen = Vec::new();
            spans.for_each(|id, body| {
                seen.push((*id, body.to_vec()));
                Ok(())
            }).unwrap();
            prop_assert_eq!(seen, model.into_iter().collect::<Vec<_>>());
        }
    }

    fn span(id: [u8; 32], len: u32) -> Entry {
        Entry::Span {
            id: SpanId(id),
            len,
        }
    }

    /// Compact rows name spans by 8-byte prefixes: resolved among the stored spans, settled
    /// by the row's check when two share a prefix, and refused (never read as another span)
    /// when a prefix is damaged or names nothing stored.
    #[test]
    fn compact_rows_resolve_shared_prefixes_by_their_check_and_refuse_damage() {
        let mut a = [7u8; 32];
        let mut b = [7u8; 32];
        a[31] = 1;
        b[31] = 2; // a and b share their first 8 bytes
        let c = [9u8; 32];
        let chunk = Entry::Chunk(ChunkRef {
            id: ChunkId([3; 32]),
            len: 100,
        });
        let stored: std::collections::BTreeSet<[u8; 32]> = [a, b, c].into_iter().collect();
        for entries in [
            vec![span(a, 10), chunk, span(c, 30)],
            vec![span(b, 10), chunk, span(c, 30)],
            vec![span(b, 10), span(a, 20), span(b, 5), span(c, 1)],
        ] {
            let row = format::encode_row(&entries);
            assert_eq!(decode_row(&stored, &row).unwrap(), entries);
            // Marking takes every span a prefix may mean: a and b both.
            let marked: Vec<[u8; 32]> = row_marks(&stored, &row)
                .unwrap()
                .into_iter()
                .filter_map(|e| match e {
                    Entry::Span { id, .. } => Some(id.0),
                    Entry::Chunk(_) => None,
                })
                .collect();
            assert!(marked.contains(&a) && marked.contains(&b), "{marked:?}");
        }
        // Without b stored, a row naming b finds only a by its prefix, whose row fails the check.
        let without_b: std::collections::BTreeSet<[u8; 32]> = [a, c].into_iter().collect();
        let row = format::encode_row(&[span(b, 10), span(c, 30)]);
        let err = decode_row(&without_b, &row).unwrap_err().to_string();
        assert!(err.contains("do not hash to its check"), "{err}");
        // A prefix nothing stored has.
        let row = format::encode_row(&[span([1; 32], 10)]);
        let err = decode_row(&stored, &row).unwrap_err().to_string();
        assert!(err.contains("not stored"), "{err}");
        // Any flipped bit of a row is refused or caught by its check.
        let entries = vec![span(a, 10), chunk, span(c, 30)];
        let row = format::encode_row(&entries);
        for at in 0..row.len() {
            for bit in 0..8 {
                let mut damaged = row.clone();
                damaged[at] ^= 1 << bit;
                assert!(
                    decode_row(&stored, &damaged).is_err(),
                    "byte {at} bit {bit} flipped was read as a row"
                );
            }
        }
    }

    /// Span `id`'s body as stored (placed or as written).
    fn stored_body(db: &Database, id: &SpanId) -> Vec<u8> {
        let txn = db.begin_read().unwrap();
        let seq = txn
            .open_table(SPAN_INDEX)
            .unwrap()
            .get(&id.0)
            .unwrap()
            .unwrap()
            .value();
        parts::read(&txn.open_table(SPAN_BODIES).unwrap(), seq)
            .unwrap()
            .unwrap()
    }

    /// A flat body is stored as runs of positions in packs' names (and an id no pack names,
    /// spelled out), reads back as written, still does once its pack's names are retired,
    /// and is reported as damage, never read as other chunks, when the names it reads change.
    #[test]
    fn placed_bodies_read_as_written_and_changed_names_are_damage() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("db")).unwrap();
        let ids: Vec<ChunkId> = (0..100u8).map(|i| ChunkId::of(&[i])).collect();
        let stranger = ChunkId::of(b"named by no pack");
        let mut refs: Vec<ChunkRef> = ids[10..70]
            .iter()
            .enumerate()
            .map(|(i, id)| ChunkRef {
                id: *id,
                len: 1000 + i as u32,
            })
            .collect();
        refs.push(ChunkRef {
            id: stranger,
            len: 7,
        });
        let body = format::encode_refs(&refs);
        let id = SpanId::of(&body);
        let names = NameCache::default();
        let place = |put_names: bool| {
            let txn = db.begin_write().unwrap();
            if put_names {
                let mut t = chunk_index::Tables::open(&txn).unwrap();
                chunk_index::put_names(&mut t, 5, &ids[..50]).unwrap();
                chunk_index::put_names(&mut t, 6, &ids[50..]).unwrap();
            }
            write(&txn).unwrap().insert(&id.0, &body).unwrap();
            let report = place_new_bodies(&txn, &names).unwrap();
            txn.commit().unwrap();
            report
        };
        let read_back = || read(&db.begin_read().unwrap()).unwrap().body(&id.0);

        let report = place(true);
        assert_eq!((report.offered, report.placed), (1, 1));
        assert!(report.bytes_after * 5 < report.bytes_before, "{report:?}");
        assert_eq!(read_back().unwrap(), Some(body.clone()));
        let stored = stored_body(&db, &id);
        assert_eq!(
            format::decode_placed_refs(&stored).unwrap().runs,
            [
                RefRun::Named {
                    pack: 5,
                    first: 10,
                    count: 40
                },
                RefRun::Named {
                    pack: 6,
                    first: 0,
                    count: 20
                },
                RefRun::Literal(stranger),
            ]
        );

        // Pack 5 dropped (reclaim): its names are retired, and kept while the body reads them.
        let retire_and_tidy = |remove_span: bool| {
            let txn = db.begin_write().unwrap();
            let dropped = {
                let mut spans = write(&txn).unwrap();
                if remove_span {
                    assert!(spans.remove(&id.0).unwrap());
                }
                let mut t = chunk_index::Tables::open(&txn).unwrap();
                chunk_index::delete_names(&mut t, 5).unwrap();
                drop_unread_retired_names(&spans, &mut t.retired).unwrap()
            };
            txn.commit().unwrap();
            dropped
        };
        assert_eq!(retire_and_tidy(false), 0);
        assert_eq!(read_back().unwrap(), Some(body.clone()));
        // With the span gone, nothing reads them.
        assert_eq!(retire_and_tidy(true), 1);
        assert_eq!(read_back().unwrap(), None);

        // Stored again (placed in pack 6 and by spelling the rest out), then pack 6's names
        // change under it: damage.
        let report = place(false);
        assert_eq!(report.placed, 1);
        assert_eq!(read_back().unwrap(), Some(body.clone()));
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(PACK_NAMES).unwrap();
            let mut other = ids[50..].to_vec();
            other.swap(3, 4);
            pack_names::put(&mut t, 6, &format::encode_pack_ids(&other)).unwrap();
        }
        txn.commit().unwrap();
        match read_back() {
            Err(StoreError::Corrupt(why)) => assert!(why.contains("not the chunks"), "{why}"),
            other => panic!("a changed name read as {other:?}"),
        }
    }

    /// A body whose chunks' pack is not named when it is written is stored as written and
    /// listed; once the pack is named, a later flush's `place_pending` places it.
    #[test]
    fn bodies_written_before_their_pack_is_named_are_placed_later() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("db")).unwrap();
        let ids: Vec<ChunkId> = (0..40u8).map(|i| ChunkId::of(&[i, 1])).collect();
        let refs: Vec<ChunkRef> = ids
            .iter()
            .map(|id| ChunkRef { id: *id, len: 2048 })
            .collect();
        let body = format::encode_refs(&refs);
        let id = SpanId::of(&body);
        let names = NameCache::default();
        let stored = |db: &Database| stored_body(db, &id);

        let mut pending = Vec::new();
        let txn = db.begin_write().unwrap();
        {
            chunk_index::Tables::open(&txn).unwrap();
            let mut spans = write(&txn).unwrap();
            let mut placer = Placer::open(&txn, &names).unwrap();
            match spans.insert_placing(&id.0, &body, &mut placer).unwrap() {
                Inserted::Unplaced(seq) => pending.push(seq),
                other => panic!("stored {other:?}, though no pack is named yet"),
            }
        }
        txn.commit().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(
            stored(&db),
            body,
            "stored as written while no pack names its chunks"
        );

        let txn = db.begin_write().unwrap();
        {
            let mut t = chunk_index::Tables::open(&txn).unwrap();
            chunk_index::put_names(&mut t, 9, &ids).unwrap();
        }
        {
            let mut spans = write(&txn).unwrap();
            let mut placer = Placer::open(&txn, &names).unwrap();
            spans.place_pending(&mut placer, &mut pending).unwrap();
        }
        txn.commit().unwrap();
        assert!(pending.is_empty());
        assert_eq!(
            format::decode_placed_refs(&stored(&db)).unwrap().runs,
            [RefRun::Named {
                pack: 9,
                first: 0,
                count: 40
            }]
        );
        assert_eq!(
            read(&db.begin_read().unwrap())
                .unwrap()
                .body(&id.0)
                .unwrap(),
            Some(body)
        );
    }
}
