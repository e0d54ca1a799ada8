//! Values kept in parts of at most [`PART`] bytes under `(key, part)` keys: the storage of a
//! pack's names (`pack_names.rs`) and of span bodies (`spans.rs`).
//!
//! Why parts: redb keeps a value in its leaf page, and a leaf bigger than a page takes a
//! power-of-two run of pages, so values of a few KiB to a MiB left up to half of their pages
//! empty. Parts of under 1 KiB fill 4 KiB leaves, and when keys only grow they are appended in
//! key order, so leaves stay full (`efficiency.md` §26).

use redb::{ReadableTable, Table};

use crate::{Result, StoreError};

/// Bytes per part: four parts and their keys fit one 4 KiB leaf.
pub const PART: usize = 960;

/// The value under `key`, its parts joined, or `None` if it has no parts.
pub fn read(
    table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    key: u64,
) -> Result<Option<Vec<u8>>> {
    let mut out: Option<Vec<u8>> = None;
    for row in table.range((key, 0)..=(key, u32::MAX))? {
        out.get_or_insert_with(Vec::new)
            .extend_from_slice(row?.1.value());
    }
    Ok(out)
}

/// Writes `value` under `key`, which must have no parts yet. An empty value is one empty
/// part, so it reads back as present.
pub fn write(
    table: &mut Table<'_, (u64, u32), &'static [u8]>,
    key: u64,
    value: &[u8],
) -> Result<()> {
    if value.is_empty() {
        table.insert((key, 0), &[][..])?;
    }
    for (n, part) in value.chunks(PART).enumerate() {
        let n = u32::try_from(n).map_err(|_| {
            StoreError::Invalid(format!(
                "a value of {} bytes is too long to store",
                value.len()
            ))
        })?;
        table.insert((key, n), part)?;
    }
    Ok(())
}

/// Drops every part under `key`.
pub fn delete(table: &mut Table<'_, (u64, u32), &'static [u8]>, key: u64) -> Result<()> {
    table.retain_in((key, 0)..=(key, u32::MAX), |_, _| false)?;
    Ok(())
}
