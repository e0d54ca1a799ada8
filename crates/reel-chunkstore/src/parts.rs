//! Values kept in parts of at most [`PART`] bytes under `(key, part)` keys: the storage of a
//! pack's names (`pack_names.rs`) and of span bodies (`spans.rs`).
//!
//! Why parts: redb keeps a value in its leaf page, and a leaf bigger than a page takes a
//! power-of-two run of pages, so values of a few KiB to a MiB left up to half of their pages
//! empty. Parts of under 1 KiB fill 4 KiB leaves, and when keys only grow they are appended in
//! key order, so leaves stay full (`efficiency.md` §26). A value written below keys already in
//! the table (a pack indexed after a later one, a span body placed again) goes in through one
//! cursor gap, which redb fills with packed leaves instead of splitting a leaf per part
//! (`efficiency.md` §43).

use std::ops::Bound;

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
    let past_every_key = match table.last()? {
        Some((last, _)) => last.value().0 < key,
        None => true,
    };
    if past_every_key {
        return append(table, key, value);
    }
    check_length(value)?;
    if value.is_empty() {
        table.insert((key, 0), &[][..])?;
        return Ok(());
    }
    // Below keys already written: the parts fill the gap where `(key, 0)` belongs, in key
    // order, as one run that redb splices in as full leaves. Inserted one by one, each part
    // landing in a full leaf split it, and a value between two others left its pages a third
    // empty (`pack_names` with four drives writing, `efficiency.md` §43).
    let mut gap = table.lower_bound_mut(Bound::Included((key, 0)))?;
    for (n, part) in (0u32..).zip(value.chunks(PART)) {
        gap.insert_before((key, n), part)?;
    }
    gap.close()?;
    Ok(())
}

/// [`write`] for a `key` the caller knows is past every key in the table (a new sequence
/// number): plain inserts, since redb starts a new leaf when a key past every other finds the
/// last leaf full, so appended parts leave full leaves behind them. (A cursor's run would
/// balance its last two leaves: values of one part appended so left every leaf a third empty.)
pub fn append(
    table: &mut Table<'_, (u64, u32), &'static [u8]>,
    key: u64,
    value: &[u8],
) -> Result<()> {
    check_length(value)?;
    if value.is_empty() {
        table.insert((key, 0), &[][..])?;
    }
    for (n, part) in (0u32..).zip(value.chunks(PART)) {
        table.insert((key, n), part)?;
    }
    Ok(())
}

/// Part numbers are u32.
fn check_length(value: &[u8]) -> Result<()> {
    if u32::try_from(value.len().div_ceil(PART)).is_err() {
        return Err(StoreError::Invalid(format!(
            "a value of {} bytes is too long to store",
            value.len()
        )));
    }
    Ok(())
}

/// Drops every part under `key`.
pub fn delete(table: &mut Table<'_, (u64, u32), &'static [u8]>, key: u64) -> Result<()> {
    table.retain_in((key, 0)..=(key, u32::MAX), |_, _| false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::{Database, ReadableDatabase, ReadableTableMetadata, TableDefinition};

    use super::*;

    const TABLE: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("parts");

    /// Leaf pages of `TABLE` after writing 16 values of 200 parts each in `order`, one
    /// transaction per value as packs are indexed; every value is checked to read back whole.
    fn leaf_pages_after_writing(order: &[u64]) -> u64 {
        let (_dir, db) = scratch_db();
        let value = |key: u64| -> Vec<u8> {
            (0..200 * PART)
                .map(|i| (i as u64 * 31 + key) as u8)
                .collect()
        };
        for &key in order {
            let txn = db.begin_write().unwrap();
            write(&mut txn.open_table(TABLE).unwrap(), key, &value(key)).unwrap();
            txn.commit().unwrap();
        }
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(TABLE).unwrap();
        for &key in order {
            assert_eq!(read(&table, key).unwrap(), Some(value(key)), "value {key}");
        }
        table.stats().unwrap().leaf_pages()
    }

    /// A value written between two others fills its leaves as an appended one does: four
    /// 960-byte parts a 4 KiB leaf. Inserted part by part, each part landing in a full leaf
    /// split it, and packs indexed out of order left `pack_names` a third empty.
    #[test]
    fn values_written_out_of_key_order_fill_their_leaves() {
        let ascending: Vec<u64> = (0..16).collect();
        // Every value after the first lands between two written before it.
        let scattered: Vec<u64> = vec![0, 15, 8, 4, 12, 2, 6, 10, 14, 1, 3, 5, 7, 9, 11, 13];
        let full = 16 * 200 / 4;
        let appended = leaf_pages_after_writing(&ascending);
        let between = leaf_pages_after_writing(&scattered);
        assert!(
            appended <= full + 2,
            "appended: {appended} leaves for {full} full ones"
        );
        assert!(
            between <= full + 16,
            "written between others: {between} leaves for {full} full ones"
        );
    }

    /// An empty database in a directory that lives as long as it.
    fn scratch_db() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("db")).unwrap();
        (dir, db)
    }

    /// Values of one part each, appended (span bodies), fill their leaves too, whether the
    /// caller says it appends or `write` finds out.
    #[test]
    fn small_values_appended_fill_their_leaves() {
        for known in [false, true] {
            let (_dir, db) = scratch_db();
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(TABLE).unwrap();
                for key in 0..4000u64 {
                    let value = [key as u8; 900];
                    if known {
                        append(&mut t, key, &value).unwrap();
                    } else {
                        write(&mut t, key, &value).unwrap();
                    }
                }
                let leaves = t.stats().unwrap().leaf_pages();
                assert!(leaves <= 4000 / 4 + 2, "{leaves} leaves for 1000 full ones");
                assert_eq!(read(&t, 1234).unwrap(), Some(vec![1234u64 as u8; 900]));
            }
            txn.commit().unwrap();
        }
    }

    #[test]
    fn an_empty_value_is_one_empty_part() {
        let (_dir, db) = scratch_db();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(TABLE).unwrap();
            write(&mut t, 5, b"abc").unwrap();
            write(&mut t, 3, b"").unwrap();
            assert_eq!(read(&t, 3).unwrap(), Some(Vec::new()));
            assert_eq!(read(&t, 4).unwrap(), None);
            assert_eq!(read(&t, 5).unwrap(), Some(b"abc".to_vec()));
            delete(&mut t, 3).unwrap();
            assert_eq!(read(&t, 3).unwrap(), None);
            assert_eq!(t.len().unwrap(), 1);
        }
        txn.commit().unwrap();
    }
}
