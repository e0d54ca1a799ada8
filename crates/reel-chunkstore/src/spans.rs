//! Reading spans: a record's reference list, stored once, whose body may hold pieces (spans of
//! their own, one level deep; see `format.rs`). Every reader of the SPANS table expands them
//! here, so the nesting rule and the length checks live in one place.

use redb::ReadableTable;

use crate::format::{self, ChunkRef, Entry, SpanId};
use crate::{Result, StoreError};

/// The entries of span `id`'s body: chunk references, and pieces (flat spans) when the record
/// was stored in pieces.
pub(crate) fn span_entries(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
) -> Result<Vec<Entry>> {
    let row = spans
        .get(&id.0)?
        .ok_or_else(|| StoreError::Corrupt(format!("span {id} is referenced but not stored")))?;
    Ok(format::decode_extent_row(row.value())?)
}

/// The chunk references of piece `id`, which must be flat and cover `len` bytes.
pub(crate) fn piece_refs(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
    len: u32,
) -> Result<Vec<ChunkRef>> {
    let row = spans
        .get(&id.0)?
        .ok_or_else(|| StoreError::Corrupt(format!("piece {id} is referenced but not stored")))?;
    if !format::span_is_flat(row.value()) {
        return Err(StoreError::Corrupt(format!(
            "piece {id} holds pieces (spans nest one level)"
        )));
    }
    let refs = format::decode_refs(row.value())?;
    check_len(id, &refs, len)?;
    Ok(refs)
}

/// The chunk references of span `id`, pieces expanded, checked to cover `len` bytes.
pub(crate) fn span_refs(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
    len: u32,
) -> Result<Vec<ChunkRef>> {
    let mut out = Vec::new();
    for entry in span_entries(spans, id)? {
        match entry {
            Entry::Chunk(r) => out.push(r),
            Entry::Span { id: piece, len } => out.extend(piece_refs(spans, piece, len)?),
        }
    }
    check_len(id, &out, len)?;
    Ok(out)
}

fn check_len(id: SpanId, refs: &[ChunkRef], len: u32) -> Result<()> {
    let total: u64 = refs.iter().map(|r| u64::from(r.len)).sum();
    if total != u64::from(len) {
        return Err(StoreError::Corrupt(format!(
            "span {id} holds {total} bytes, not {len}"
        )));
    }
    Ok(())
}
