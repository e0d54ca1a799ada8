//! A pack's names (its chunks' ids in pack order, `format::encode_pack_ids`) stored in parts
//! (`parts.rs`) under `(pack, part)` keys (catalog format 6). Pack ids only grow, so parts are
//! appended in key order. Readers see whole names: [`get`] joins the parts.

use redb::{ReadableTable, Table, TableDefinition};

use crate::format::{self, ChunkId};
use crate::parts;
use crate::{Result, StoreError};

/// `(pack id, part number)` → part of the pack's encoded names.
pub const PACK_NAMES: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("pack_names");

/// `pack`'s encoded names, or `None` if it has none.
/// The names of packs that are gone (reclaim dropped them), kept while a placed span body
/// (`spans.rs`) reads ids from them. Not indexed: nothing is stored in such a pack any more.
pub const RETIRED_NAMES: TableDefinition<(u64, u32), &[u8]> =
    TableDefinition::new("retired_pack_names");

/// Appends ids `first..first + count` of `pack`'s names to `out`; `false` if the table holds
/// no names for `pack`. Names are 32-byte ids in parts of [`parts::PART`] bytes, which a whole
/// number of ids fill, so a position's part is found without reading the ones before it.
pub fn ids_at(
    table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    pack: u64,
    first: u32,
    count: u32,
    out: &mut Vec<ChunkId>,
) -> Result<bool> {
    const ID: usize = 32;
    const _: () = assert!(parts::PART.is_multiple_of(ID));
    let start = first as usize * ID;
    let end = (first as usize + count as usize) * ID;
    if count == 0 {
        return Ok(table.get((pack, 0))?.is_some());
    }
    let (first_part, last_part) = (
        (start / parts::PART) as u32,
        ((end - 1) / parts::PART) as u32,
    );
    let mut next = first_part;
    let mut at = start;
    for row in table.range((pack, first_part)..=(pack, last_part))? {
        let (key, bytes) = row?;
        let (part, bytes) = (key.value().1, bytes.value());
        let part_start = part as usize * parts::PART;
        if part != next || (part < last_part && bytes.len() != parts::PART) {
            break;
        }
        let to = end.min(part_start + bytes.len());
        if to <= at {
            break;
        }
        out.extend(format::decode_pack_ids(
            &bytes[at - part_start..to - part_start],
        )?);
        at = to;
        next += 1;
    }
    if at == end {
        return Ok(true);
    }
    if next == first_part && table.get((pack, 0))?.is_none() {
        return Ok(false);
    }
    Err(StoreError::Corrupt(format!(
        "the names of pack {pack} do not hold positions {first}..{}",
        first as u64 + count as u64
    )))
}

pub fn get(
    table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    pack: u64,
) -> Result<Option<Vec<u8>>> {
    parts::read(table, pack)
}

/// Writes `pack`'s encoded names, replacing any it had.
pub fn put(
    table: &mut Table<'_, (u64, u32), &'static [u8]>,
    pack: u64,
    encoded: &[u8],
) -> Result<()> {
    parts::delete(table, pack)?;
    parts::write(table, pack, encoded)
}

/// Drops `pack`'s names; returns them if it had any.
pub fn remove(
    table: &mut Table<'_, (u64, u32), &'static [u8]>,
    pack: u64,
) -> Result<Option<Vec<u8>>> {
    let old = get(table, pack)?;
    if old.is_some() {
        parts::delete(table, pack)?;
    }
    Ok(old)
}

/// Every pack's encoded names, in pack order.
pub fn for_each(
    table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    mut visit: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut current: Option<(u64, Vec<u8>)> = None;
    for row in table.iter()? {
        let (key, part) = row?;
        let (pack, _) = key.value();
        match &mut current {
            Some((p, bytes)) if *p == pack => bytes.extend_from_slice(part.value()),
            _ => {
                if let Some((p, bytes)) = current.take() {
                    visit(p, &bytes)?;
                }
                current = Some((pack, part.value().to_vec()));
            }
        }
    }
    if let Some((p, bytes)) = current {
        visit(p, &bytes)?;
    }
    Ok(())
}

/// Moves names a format-5 catalog kept whole per pack (`catalog::LEGACY_PACK_IDS`) into parts
/// and empties that table. Returns how many packs moved.
pub fn convert_legacy(txn: &redb::WriteTransaction) -> Result<u64> {
    let mut legacy = txn.open_table(crate::catalog::LEGACY_PACK_IDS)?;
    let mut names = txn.open_table(PACK_NAMES)?;
    let mut moved = 0u64;
    for row in legacy.iter()? {
        let (pack, encoded) = row?;
        put(&mut names, pack.value(), encoded.value())?;
        moved += 1;
    }
    legacy.retain(|_, _| false)?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use redb::{Database, ReadableDatabase};

    use super::*;

    proptest! {
        /// Against a map: puts, replacements and removes of names of any length read back whole,
        /// and `for_each` lists exactly the packs that have names, in order.
        #[test]
        fn parts_read_back_as_whole_names(
            ops in prop::collection::vec((0u64..6, prop::option::of(0usize..3000)), 1..40)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::create(dir.path().join("db")).unwrap();
            let mut model = std::collections::BTreeMap::new();
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(PACK_NAMES).unwrap();
                for (i, (pack, len)) in ops.iter().enumerate() {
                    match len {
                        Some(len) => {
                            let bytes: Vec<u8> = (0..*len).map(|b| (b * 7 + i) as u8).collect();
                            put(&mut t, *pack, &bytes).unwrap();
                            model.insert(*pack, bytes);
                        }
                        None => {
                            prop_assert_eq!(remove(&mut t, *pack).unwrap(), model.remove(pack));
                        }
                    }
                }
            }
            txn.commit().unwrap();
            let txn = db.begin_read().unwrap();
            let t = txn.open_table(PACK_NAMES).unwrap();
            for pack in 0u64..6 {
                prop_assert_eq!(get(&t, pack).unwrap(), model.get(&pack).cloned());
            }
            let mut seen = Vec::new();
            for_each(&t, |p, b| {
                seen.push((p, b.to_vec()));
                Ok(())
            })
            .unwrap();
            prop_assert_eq!(seen, model.into_iter().collect::<Vec<_>>());
        }
    }
}
