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

use redb::{
    ReadOnlyTable, ReadTransaction, ReadableTable, Table, TableDefinition, WriteTransaction,
};

use crate::format::{self, ChunkRef, Entry, SpanId};
use crate::parts;
use crate::{Result, StoreError};

/// Span id → the sequence number of its body in [`SPAN_BODIES`].
pub const SPAN_INDEX: TableDefinition<&[u8; 32], u64> = TableDefinition::new("span_index");
/// `(sequence number, part)` → part of a span's body.
pub const SPAN_BODIES: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("span_bodies");

/// The span tables of one transaction.
pub struct SpanTables<I, B> {
    index: I,
    bodies: B,
}

pub type ReadSpans =
    SpanTables<ReadOnlyTable<&'static [u8; 32], u64>, ReadOnlyTable<(u64, u32), &'static [u8]>>;
pub type WriteSpans<'t> =
    SpanTables<Table<'t, &'static [u8; 32], u64>, Table<'t, (u64, u32), &'static [u8]>>;

pub fn read(txn: &ReadTransaction) -> Result<ReadSpans> {
    Ok(SpanTables {
        index: txn.open_table(SPAN_INDEX)?,
        bodies: txn.open_table(SPAN_BODIES)?,
    })
}

pub fn write(txn: &WriteTransaction) -> Result<WriteSpans<'_>> {
    Ok(SpanTables {
        index: txn.open_table(SPAN_INDEX)?,
        bodies: txn.open_table(SPAN_BODIES)?,
    })
}

/// Reading span bodies, whatever transaction the tables belong to.
pub trait SpanSource {
    /// Span `id`'s body, or `None` if it is not stored.
    fn body(&self, id: &[u8; 32]) -> Result<Option<Vec<u8>>>;
}

impl<I, B> SpanSource for SpanTables<I, B>
where
    I: ReadableTable<&'static [u8; 32], u64>,
    B: ReadableTable<(u64, u32), &'static [u8]>,
{
    fn body(&self, id: &[u8; 32]) -> Result<Option<Vec<u8>>> {
        let Some(seq) = self.index.get(id)?.map(|v| v.value()) else {
            return Ok(None);
        };
        body_at(&self.bodies, id, seq).map(Some)
    }
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

impl<I, B> SpanTables<I, B>
where
    I: ReadableTable<&'static [u8; 32], u64>,
    B: ReadableTable<(u64, u32), &'static [u8]>,
{
    pub fn contains(&self, id: &[u8; 32]) -> Result<bool> {
        Ok(self.index.get(id)?.is_some())
    }

    /// Every stored span as (id, body), in id order.
    pub fn for_each(&self, mut visit: impl FnMut(&[u8; 32], &[u8]) -> Result<()>) -> Result<()> {
        for row in self.index.iter()? {
            let (id, seq) = row?;
            let body = body_at(&self.bodies, id.value(), seq.value())?;
            visit(id.value(), &body)?;
        }
        Ok(())
    }
}

impl WriteSpans<'_> {
    /// Stores span `id`'s body, replacing the one it had.
    pub fn insert(&mut self, id: &[u8; 32], body: &[u8]) -> Result<()> {
        let seq = match self.bodies.last()? {
            Some((key, _)) => key.value().0 + 1,
            None => 0,
        };
        parts::write(&mut self.bodies, seq, body)?;
        // The index row's old value, if any, names the body this one replaces.
        let old = self.index.insert(id, seq)?.map(|v| v.value());
        if let Some(old) = old {
            parts::delete(&mut self.bodies, old)?;
        }
        Ok(())
    }

    /// Drops span `id`; returns its body if it was stored.
    pub fn remove(&mut self, id: &[u8; 32]) -> Result<Option<Vec<u8>>> {
        let Some(seq) = self.index.remove(id)?.map(|v| v.value()) else {
            return Ok(None);
        };
        let body = body_at(&self.bodies, id, seq)?;
        parts::delete(&mut self.bodies, seq)?;
        Ok(Some(body))
    }

    /// Empties both tables (a checkpoint restore starts from nothing).
    pub fn clear(&mut self) -> Result<()> {
        self.index.retain(|_, _| false)?;
        self.bodies.retain(|_, _| false)?;
        Ok(())
    }
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
pub(crate) fn decode_span(id: SpanId, body: &[u8], len: u32) -> Result<Vec<Entry>> {
    let entries = format::decode_extent_row(body)?;
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
    decode_span(id, &stored(spans, id)?, len)
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
    for entry in decode_span(id, &body, len)? {
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
                    let mut spans = write(&txn).unwrap();
                    for (i, (id, len)) in ops.iter().enumerate() {
                        let key = [*id; 32];
                        match len {
                            Some(len) => {
                                let body: Vec<u8> =
                                    (0..*len).map(|b| (b * 3 + i + 7 * t) as u8).collect();
                                spans.insert(&key, &body).unwrap();
                                model.insert(key, body);
                            }
                            None => {
                                prop_assert_eq!(spans.remove(&key).unwrap(), model.remove(&key));
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
}
