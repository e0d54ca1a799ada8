//! Verification: re-read every pack, re-hash every chunk, and say exactly which stream bytes
//! are affected by anything damaged or missing.

use std::collections::{HashMap, HashSet};

use redb::ReadableTable;

use crate::Result;
use crate::catalog::{EXTENTS, PACKS, PackRow};
use crate::chunk_index::{self, INDEX_FULL};
use crate::format::{ChunkId, decode_blob, decode_pack, decode_pack_ids};
use crate::store::ChunkStore;
use crate::stream::StreamId;

/// A damaged stretch of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub stream: StreamId,
    pub offset: u64,
    pub len: u64,
    pub chunk: ChunkId,
    pub reason: String,
}

#[derive(Clone, Debug, Default)]
pub struct ScrubReport {
    pub packs_checked: u64,
    pub chunks_checked: u64,
    pub bytes_checked: u64,
    /// Chunks that are unreadable or fail their hash, with the reason.
    pub bad_chunks: Vec<(ChunkId, String)>,
    /// Every stream range that references a bad or missing chunk.
    pub damage: Vec<Damage>,
    /// Index rows that no pack's names account for (`chunk_index.rs`: the index holds exactly
    /// every named chunk → its pack). No stream data is lost by them, but the catalog is
    /// damaged: such a row can send a lookup to a pack that does not hold the chunk.
    pub index_problems: Vec<String>,
}

impl ScrubReport {
    pub fn is_clean(&self) -> bool {
        self.bad_chunks.is_empty() && self.damage.is_empty() && self.index_problems.is_empty()
    }
}

impl ChunkStore {
    /// Verifies everything committed. `progress(done, total)` is called per pack.
    pub fn scrub(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<ScrubReport> {
        let inner = &self.inner;
        // Store what is waiting in open packs, so flushed data is checked, not misreported.
        // Chunks that still cannot be stored (a full disk) are in memory, not damaged.
        {
            let _commit = inner.commit_lock.write();
            let _ = inner.seal_and_store_all();
        }
        let mut report = ScrubReport::default();
        let packs: Vec<(u64, PackRow)> = {
            let txn = inner.db.begin_read()?;
            let t = txn.open_table(PACKS)?;
            let mut v = Vec::new();
            for row in t.iter()? {
                let (k, val) = row?;
                v.push((k.value(), PackRow::decode(val.value())?));
            }
            v
        };
        let total = packs.len() as u64;
        // Per pack: None = whole pack unusable (with reason); Some(good chunk ids).
        let mut bad_packs: HashMap<u64, String> = HashMap::new();
        let mut good: HashSet<(ChunkId, u64)> = HashSet::new();
        let mut bad: HashMap<ChunkId, String> = HashMap::new();
        for (n, (pack, row)) in packs.iter().enumerate() {
            progress(n as u64, total);
            report.packs_checked += 1;
            // A foreign pack (adopted data, read in place) is checked where it is.
            let (backend, object, id_inside) = match inner.pack_object(*pack) {
                Ok(o) => o,
                Err(e) => {
                    bad_packs.insert(*pack, format!("pack {pack} unreadable: {e}"));
                    continue;
                }
            };
            let bytes = match backend.get(&object) {
                Ok(b) => b,
                Err(e) => {
                    bad_packs.insert(*pack, format!("pack {pack} unreadable: {e}"));
                    continue;
                }
            };
            report.bytes_checked += bytes.len() as u64;
            if bytes.len() as u64 != row.size {
                bad_packs.insert(
                    *pack,
                    format!(
                        "pack {pack} is {} bytes, catalog says {}",
                        bytes.len(),
                        row.size
                    ),
                );
                continue;
            }
            let (id, trailer) = match decode_pack(&bytes) {
                Ok(t) => t,
                Err(e) => {
                    bad_packs.insert(*pack, format!("pack {pack}: {e}"));
                    continue;
                }
            };
            if id != id_inside {
                bad_packs.insert(*pack, format!("pack {pack} claims to be pack {id}"));
                continue;
            }
            let ids = match inner.pack_ids(*pack) {
                Ok(ids) if ids.len() == trailer.chunk_lens.len() => ids,
                Ok(ids) => {
                    bad_packs.insert(
                        *pack,
                        format!(
                            "pack {pack} holds {} chunks, catalog names {}",
                            trailer.chunk_lens.len(),
                            ids.len()
                        ),
                    );
                    continue;
                }
                Err(e) => {
                    bad_packs.insert(*pack, format!("pack {pack}: {e}"));
                    continue;
                }
            };
            let slots = trailer.slots();
            for (b, blob) in trailer.blobs.iter().enumerate() {
                let stored =
                    &bytes[blob.offset as usize..(blob.offset + u64::from(blob.stored)) as usize];
                // Scrub checks every chunk by its BLAKE3, whatever the blob's checksum says: it
                // is the full check that reads (which trust a matching checksum) stand in for.
                let at = crate::format::BlobAt {
                    pack: id_inside,
                    offset: blob.offset,
                };
                let raw = decode_blob(blob.codec, stored, blob.raw, at).map(|d| d.data);
                let named = ids
                    .iter()
                    .zip(&slots)
                    .filter(|(id, _)| **id != crate::format::TOMBSTONE);
                for (id, slot) in named.filter(|(_, s)| s.blob as usize == b) {
                    report.chunks_checked += 1;
                    match &raw {
                        Ok(raw)
                            if ChunkId::of(
                                &raw[slot.offset as usize..(slot.offset + slot.len) as usize],
                            ) == *id =>
                        {
                            good.insert((*id, *pack));
                        }
                        Ok(_) => {
                            bad.insert(*id, format!("chunk {id} in pack {pack} fails its hash"));
                        }
                        Err(e) => {
                            bad.insert(*id, format!("chunk {id} in pack {pack}: {e}"));
                        }
                    }
                }
            }
        }
        progress(total, total);

        // The index entry of each chunk must point at a verified copy.
        let txn = inner.db.begin_read()?;
        let mut indexed: HashSet<ChunkId> = HashSet::new();
        // The index is derived from the packs' names (`chunk_index.rs`): a named chunk the
        // index points at this pack is indexed; its copy there must be a verified one.
        let index = chunk_index::KeyRows::read(&txn)?;
        let full = txn.open_table(INDEX_FULL)?;
        let mut named: Vec<(u64, Vec<u8>)> = Vec::new();
        crate::pack_names::for_each(&txn.open_table(crate::pack_names::PACK_NAMES)?, |p, n| {
            named.push((p, n.to_vec()));
            Ok(())
        })?;
        for (pack, encoded) in named {
            let ids = match decode_pack_ids(&encoded) {
                Ok(ids) => ids,
                Err(e) => {
                    bad_packs.insert(pack, format!("names of pack {pack}: {e}"));
                    continue;
                }
            };
            for id in ids.into_iter().filter(|i| *i != crate::format::TOMBSTONE) {
                if !chunk_index::indexed_at(&index, &full, &id, pack)? {
                    continue;
                }
                indexed.insert(id);
                if let Some(why) = bad_packs.get(&pack) {
                    bad.insert(id, why.clone());
                } else if !good.contains(&(id, pack)) && !bad.contains_key(&id) {
                    bad.insert(
                        id,
                        format!("chunk {id} is indexed in pack {pack} but not there"),
                    );
                }
            }
        }
        report.index_problems = index_problems(&index, &full, &packs, indexed.len())?;
        let span_index = txn.open_table(crate::spans::SPAN_INDEX)?;
        for row in txn.open_table(EXTENTS)?.iter()? {
            let (k, v) = row?;
            let (stream, mut offset) = k.value();
            let entries = match crate::spans::decode_row(&span_index, v.value()) {
                Ok(r) => r,
                Err(e) => {
                    report.damage.push(Damage {
                        stream: StreamId(stream),
                        offset,
                        len: 0,
                        chunk: ChunkId([0; 32]),
                        reason: format!("extent row unreadable: {e}"),
                    });
                    continue;
                }
            };
            for e in entries {
                let at = offset;
                offset += u64::from(e.bytes());
                // A span expands to its chunks; an unreadable span damages its whole range.
                let refs = match inner.expand(&[e]) {
                    Ok(refs) => refs,
                    Err(err) => {
                        report.damage.push(Damage {
                            stream: StreamId(stream),
                            offset: at,
                            len: u64::from(e.bytes()),
                            chunk: ChunkId([0; 32]),
                            reason: format!("span unreadable: {err}"),
                        });
                        continue;
                    }
                };
                let mut chunk_at = at;
                for r in refs {
                    let reason = match bad.get(&r.id) {
                        Some(why) => Some(why.clone()),
                        None if !indexed.contains(&r.id) && !inner.is_pending(&r.id) => {
                            Some(format!("chunk {} is not stored", r.id))
                        }
                        None => None,
                    };
                    if let Some(reason) = reason {
                        report.damage.push(Damage {
                            stream: StreamId(stream),
                            offset: chunk_at,
                            len: u64::from(r.len),
                            chunk: r.id,
                            reason,
                        });
                    }
                    chunk_at += u64::from(r.len);
                }
            }
        }
        report.bad_chunks = bad.into_iter().collect();
        report.bad_chunks.sort_by_key(|(id, _)| *id);
        Ok(report)
    }
}

/// Index rows that point at packs the catalog does not have, and rows beyond the `explained`
/// ones the packs' names account for (each indexed named chunk has exactly one row).
fn index_problems(
    index: &chunk_index::KeyRows<impl ReadableTable<chunk_index::Key, chunk_index::PackRef>>,
    full: &impl ReadableTable<&'static [u8; 32], u64>,
    packs: &[(u64, PackRow)],
    explained: usize,
) -> Result<Vec<String>> {
    let known: HashSet<u64> = packs.iter().map(|(p, _)| *p).collect();
    let mut problems = Vec::new();
    let mut rows = 0usize;
    // Each row of either table: counted, and named (only then) if its pack is unknown.
    let mut check = |pack: u64, key: &dyn Fn() -> String| {
        rows += 1;
        if !known.contains(&pack) {
            problems.push(format!(
                "index row {} points at pack {pack}, which the catalog does not have",
                key()
            ));
        }
    };
    let hex =
        |key: &chunk_index::Key| -> String { key.iter().map(|b| format!("{b:02x}")).collect() };
    for row in index.main.iter()? {
        let (key, pack) = row?;
        let key = key.value();
        check(chunk_index::pack_of(pack.value()), &|| hex(&key));
    }
    let mut in_both = Vec::new();
    for row in index.recent.iter()? {
        let (key, pack) = row?;
        let key = key.value();
        check(chunk_index::pack_of(pack.value()), &|| hex(&key));
        if index.main.get(key)?.is_some() {
            in_both.push(key);
        }
    }
    for row in full.iter()? {
        let (id, pack) = row?;
        check(pack.value(), &|| ChunkId(*id.value()).to_string());
    }
    // A key is in one of the two tables (`chunk_index::RECENT`): one in both is a row too many.
    for key in in_both {
        problems.push(format!(
            "index key {} is in both the main and the recent table",
            hex(&key)
        ));
    }
    if rows > explained && problems.len() < rows - explained {
        problems.push(format!(
            "index rows that no pack's names account for: {}",
            rows - explained - problems.len()
        ));
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use reel_backend::{Backend, LocalBackend};

    use crate::chunk_index::{INDEX, INDEX_FULL};
    use crate::test_support::noise;
    use crate::{ChunkStore, StoreConfig, StreamId};

    fn open(dir: &std::path::Path) -> ChunkStore {
        let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&dir.join("objects")).unwrap());
        ChunkStore::open(&dir.join("catalog"), backend, StoreConfig::default()).unwrap()
    }

    #[test]
    fn index_rows_no_pack_accounts_for_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let stream = store.open_stream(StreamId(1)).unwrap();
        stream.append(&noise(1 << 20, 9)).unwrap();
        stream.sync().unwrap();
        drop(stream);
        let clean = store.scrub(&mut |_, _| {}).unwrap();
        assert!(clean.is_clean(), "{:?}", clean.index_problems);
        let chunks = clean.chunks_checked;
        assert!(chunks > 0);

        // A prefix row and a whole-id row pointing at a pack the catalog never had, and a
        // prefix row pointing at a real pack that does not name it.
        let real_pack = {
            let txn = store.inner.db.begin_read().unwrap();
            let (_, pack) = crate::chunk_index::rows(&txn).unwrap()[0].clone();
            crate::chunk_index::pack_ref(pack).unwrap()
        };
        // Keys no real id has here (ids are BLAKE3 outputs; these are two fixed patterns).
        {
            let txn = store.inner.db.begin_write().unwrap();
            {
                let mut index = txn.open_table(INDEX).unwrap();
                index
                    .insert(
                        [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc],
                        crate::chunk_index::pack_ref(999_999).unwrap(),
                    )
                    .unwrap();
                index
                    .insert([0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65], real_pack)
                    .unwrap();
                let mut full = txn.open_table(INDEX_FULL).unwrap();
                full.insert(&[7u8; 32], 888_888u64).unwrap();
            }
            txn.commit().unwrap();
        }
        let report = store.scrub(&mut |_, _| {}).unwrap();
        assert!(!report.is_clean());
        // Stream data is not touched: every chunk still verifies and no range is damaged.
        assert!(report.bad_chunks.is_empty() && report.damage.is_empty());
        assert_eq!(report.chunks_checked, chunks);
        let problems = report.index_problems.join("\n");
        assert!(
            problems.contains("123456789abc points at pack 999999"),
            "{problems}"
        );
        assert!(problems.contains("points at pack 888888"), "{problems}");
        assert!(
            problems.contains("no pack's names account for: 1"),
            "{problems}"
        );
        assert_eq!(report.index_problems.len(), 3, "{problems}");
    }
}
