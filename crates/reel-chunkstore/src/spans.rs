//! Reading spans: a record's reference list, stored once, whose body may hold pieces (spans of
//! their own, one level deep; see `format.rs`). Every reader of the SPANS table decodes them
//! here, so the nesting rule and the length checks live in one place.

use redb::{AccessGuard, ReadableTable};

use crate::format::{self, ChunkRef, Entry, SpanId};
use crate::{Result, StoreError};

/// The stored body of span `id`; a span that is referenced must be stored.
pub(crate) fn stored(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
) -> Result<AccessGuard<'_, &'static [u8]>> {
    spans
        .get(&id.0)?
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
pub(crate) fn span_entries(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
    len: u32,
) -> Result<Vec<Entry>> {
    decode_span(id, stored(spans, id)?.value(), len)
}

/// The chunk references of piece `id`, checked to be flat and cover `len` bytes.
pub(crate) fn piece_refs(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
    len: u32,
) -> Result<Vec<ChunkRef>> {
    decode_flat(id, stored(spans, id)?.value(), len)
}

/// The chunk references of span `id`, pieces expanded (the span and each piece checked to
/// cover their lengths, so the whole covers `len`). Used on every read of a record.
pub(crate) fn span_refs(
    spans: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    id: SpanId,
    len: u32,
) -> Result<Vec<ChunkRef>> {
    let body = stored(spans, id)?;
    if format::span_is_flat(body.value()) {
        // Most spans (every record that was not cut into pieces): straight to references, on
        // the read path without a list of entries in between.
        return decode_flat(id, body.value(), len);
    }
    let mut out = Vec::new();
    for entry in decode_span(id, body.value(), len)? {
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
