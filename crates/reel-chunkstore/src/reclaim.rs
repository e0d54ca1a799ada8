//! Space reclamation: mark every chunk a stream references, then drop packs that hold nothing
//! live and rewrite packs that are mostly dead.
//!
//! Safety argument: reclaim holds the ingest lock exclusively, so no stream appends, flushes,
//! truncates or dedups against an old chunk while it runs; every open stream is flushed first, so
//! the catalog's extents name every referenced chunk. The catalog commit that stops naming a pack
//! is durable before the pack object is deleted, so a crash leaves at worst an orphan pack, which
//! the next open deletes.
//!
//! Two kinds of pack are never rewritten: packs holding a chunk a pinned stream references
//! (another store reads them in place, at the locations it was given), and foreign packs
//! (another store's objects). A foreign pack nothing references any more is forgotten: its
//! rows go, its object stays for its owner.

use std::collections::{HashMap, HashSet};

use redb::ReadableTable;
use reel_backend::PutMode;

use crate::catalog::{EXTENTS, FOREIGN_PACKS, PACKS, PINS, PackRow, pack_key};
use crate::chunk_index::{self, INDEX_FULL};
use crate::format::{ChunkId, ChunkLoc, Entry};
use crate::journal::Op;
use crate::pack_names::PACK_NAMES;
use crate::packer::PackBuilder;
use crate::spans::row_marks;
use crate::store::ChunkStore;
use crate::{Result, StoreError};

/// What a reclaim run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    pub packs_examined: u64,
    pub packs_deleted: u64,
    pub packs_rewritten: u64,
    pub chunks_dropped: u64,
    /// Back-end bytes before minus after.
    pub bytes_freed: u64,
    /// Other stores' packs no adopted stream references any more (their objects are theirs).
    pub foreign_packs_forgotten: u64,
}

impl ChunkStore {
    /// Reclaims space. Packs with less than `rewrite_below` of their raw bytes live are
    /// rewritten (0.5 is a good default). `progress(done, total)` is called per pack.
    pub fn reclaim(
        &self,
        rewrite_below: f64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ReclaimReport> {
        let inner = &self.inner;
        let _ingest = inner.ingest_lock.write();
        let _commit = inner.commit_lock.write();
        inner.check_stopped()?;
        let open: Vec<_> = inner
            .streams
            .lock()
            .values()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for s in open {
            s.lock().flush(inner)?;
        }
        // Reclaim ends with a durable commit, which would make durable every flushed reference,
        // so everything referenced must be stored first. With a full disk that is impossible:
        // space must be freed outside reel (or the quota raised) before reclaim can run.
        inner.seal_and_store_all().map_err(|e| match e {
            StoreError::NoSpace(why) => StoreError::NoSpace(format!(
                "{why}; reclaim needs the data accepted so far stored first: free space outside reel or raise the quota"
            )),
            other => other,
        })?;

        let mut live: HashSet<ChunkId> = HashSet::new();
        let mut dead_spans = Vec::new();
        let mut packs: Vec<(u64, PackRow)> = Vec::new();
        // Packs that must stay where they are: they hold chunks of pinned streams.
        let mut pinned_packs: HashSet<u64> = HashSet::new();
        let foreign: HashSet<u64> = inner.foreign.read().keys().copied().collect();
        {
            let txn = inner.db.begin_read()?;
            let pinned: HashSet<u64> = txn
                .open_table(PINS)?
                .iter()?
                .map(|row| row.map(|(k, _)| k.value()))
                .collect::<std::result::Result<_, _>>()?;
            let mut live_spans = HashSet::new();
            let mut pinned_chunks: HashSet<ChunkId> = HashSet::new();
            let mut pinned_spans = HashSet::new();
            let spans = crate::spans::read(&txn)?;
            for row in txn.open_table(EXTENTS)?.iter()? {
                let (k, v) = row?;
                let is_pinned = pinned.contains(&k.value().0);
                for e in row_marks(&spans, v.value())? {
                    match e {
                        Entry::Chunk(r) => {
                            live.insert(r.id);
                            if is_pinned {
                                pinned_chunks.insert(r.id);
                            }
                        }
                        Entry::Span { id, .. } => {
                            live_spans.insert(id);
                            if is_pinned {
                                pinned_spans.insert(id);
                            }
                        }
                    }
                }
            }
            // The pieces of live spans are live (and pinned with them): found before the scan
            // below, which meets pieces and the spans holding them in key order.
            let mut pieces = Vec::new();
            for &id in &live_spans {
                // A span referenced but missing is the reader's error to report, not reclaim's.
                let Some(body) = crate::spans::SpanSource::body(&spans, &id.0)? else {
                    continue;
                };
                if !crate::format::span_is_flat(&body) {
                    for e in row_marks(&spans, &body)? {
                        if let Entry::Span { id: piece, .. } = e {
                            pieces.push((piece, pinned_spans.contains(&id)));
                        }
                    }
                }
            }
            for (piece, pinned) in pieces {
                live_spans.insert(piece);
                if pinned {
                    pinned_spans.insert(piece);
                }
            }
            spans.for_each(|k, body| {
                let id = crate::format::SpanId(*k);
                if live_spans.contains(&id) {
                    // A span's chunk entries; its pieces were counted live above and add
                    // their own chunks when the scan reaches them.
                    for e in row_marks(&spans, body)? {
                        if let Entry::Chunk(r) = e {
                            if pinned_spans.contains(&id) {
                                pinned_chunks.insert(r.id);
                            }
                            live.insert(r.id);
                        }
                    }
                } else {
                    dead_spans.push(id);
                }
                Ok(())
            })?;
            let index = chunk_index::KeyRows::read(&txn)?;
            let full = txn.open_table(INDEX_FULL)?;
            let names_table = txn.open_table(PACK_NAMES)?;
            let mut names = chunk_index::Names::new();
            for id in &pinned_chunks {
                if let Some(pack) =
                    chunk_index::lookup(&index, &full, &names_table, &mut names, id)?
                {
                    pinned_packs.insert(pack);
                }
            }
            for row in txn.open_table(PACKS)?.iter()? {
                let (k, v) = row?;
                packs.push((k.value(), PackRow::decode(v.value())?));
            }
        }

        let mut report = ReclaimReport {
            packs_examined: packs.len() as u64,
            ..Default::default()
        };
        let total = packs.len() as u64;
        let mut doomed: Vec<u64> = Vec::new();
        let mut moved: HashMap<ChunkId, ChunkLoc> = HashMap::new();
        let mut dropped: Vec<(ChunkId, u64)> = Vec::new();
        let mut new_rows: Vec<(u64, PackRow, Vec<ChunkId>)> = Vec::new();
        let mut builder = PackBuilder::new(
            inner.config.blob_target,
            inner.config.pack_target,
            inner.config.zstd_level,
        );
        let store_sealed = |sealed: crate::packer::SealedPack,
                            moved: &mut HashMap<ChunkId, ChunkLoc>,
                            new_rows: &mut Vec<(u64, PackRow, Vec<ChunkId>)>|
         -> Result<()> {
            inner
                .backend
                .put(&pack_key(sealed.id), &sealed.bytes, PutMode::Create)
                .map_err(StoreError::from_backend)?;
            for (id, loc) in sealed.entries() {
                moved.insert(id, loc);
            }
            new_rows.push((
                sealed.id,
                PackRow {
                    size: sealed.bytes.len() as u64,
                    chunks: sealed.ids.len() as u32,
                    raw_bytes: sealed.raw_bytes,
                },
                sealed.ids.clone(),
            ));
            Ok(())
        };

        for (n, (pack, row)) in packs.iter().enumerate() {
            progress(n as u64, total);
            // Only the copy the index points at counts; another copy here is garbage. A
            // foreign pack is judged from the catalog alone (its store may be unreachable:
            // forgetting it must not need it).
            let owned: Vec<(ChunkId, Option<ChunkLoc>, bool)> = {
                let toc: Vec<(ChunkId, Option<ChunkLoc>)> = if foreign.contains(pack) {
                    inner
                        .pack_ids(*pack)?
                        .into_iter()
                        .map(|id| (id, None))
                        .collect()
                } else {
                    inner
                        .read_pack_toc(*pack)?
                        .into_iter()
                        .map(|(id, loc)| (id, Some(loc)))
                        .collect()
                };
                let txn = inner.db.begin_read()?;
                let index = chunk_index::KeyRows::read(&txn)?;
                let full = txn.open_table(INDEX_FULL)?;
                let mut out = Vec::new();
                for (id, loc) in &toc {
                    if *id == crate::format::TOMBSTONE {
                        continue;
                    }
                    if chunk_index::indexed_at(&index, &full, id, *pack)? {
                        // A foreign pack's chunks have no place here (never moved: not needed).
                        out.push((*id, *loc, live.contains(id)));
                    }
                }
                out
            };
            let any_live = owned.iter().any(|o| o.2);
            let live_raw: u64 = owned
                .iter()
                .filter(|o| o.2)
                .filter_map(|o| o.1.map(|loc| u64::from(loc.len)))
                .sum();
            if any_live
                && ((live_raw as f64) >= rewrite_below * row.raw_bytes as f64
                    || pinned_packs.contains(pack)
                    || foreign.contains(pack))
            {
                continue;
            }
            if any_live {
                let bytes = inner
                    .backend
                    .get(&pack_key(*pack))
                    .map_err(StoreError::from_backend)?;
                for (id, loc, _) in owned.iter().filter(|o| o.2) {
                    if moved.contains_key(id) {
                        continue;
                    }
                    // Own packs only (foreign ones are kept above): every chunk has its place.
                    let Some(loc) = loc else {
                        return Err(StoreError::Corrupt(format!(
                            "pack {pack}: chunk {id} has no place in its table of contents"
                        )));
                    };
                    let stored = bytes
                        .get(
                            loc.blob_offset as usize
                                ..(loc.blob_offset + u64::from(loc.blob_stored)) as usize,
                        )
                        .ok_or_else(|| {
                            StoreError::Corrupt(format!("pack {pack}: blob out of range"))
                        })?;
                    // Own packs only (foreign ones are skipped above): the header's id is ours.
                    let at = crate::format::BlobAt {
                        pack: *pack,
                        offset: loc.blob_offset,
                    };
                    let raw = crate::format::decode_blob(loc.codec, stored, loc.blob_raw, at)?;
                    // Checked by hash whatever the blob's checksum says: a moved chunk is
                    // written under its name again, so it must be exactly that chunk.
                    let data = &raw.data[loc.offset as usize..(loc.offset + loc.len) as usize];
                    if ChunkId::of(data) != *id {
                        return Err(StoreError::Corrupt(format!(
                            "chunk {id} in pack {pack} does not match its hash; run scrub"
                        )));
                    }
                    if let Some(sealed) = builder.add(|| inner.alloc_pack_id(), *id, data) {
                        store_sealed(sealed, &mut moved, &mut new_rows)?;
                    }
                }
                report.packs_rewritten += 1;
            } else if foreign.contains(pack) {
                report.foreign_packs_forgotten += 1;
            } else {
                report.packs_deleted += 1;
            }
            for (id, _, is_live) in owned {
                if !is_live {
                    dropped.push((id, *pack));
                }
            }
            doomed.push(*pack);
        }
        if let Some(sealed) = builder.seal() {
            store_sealed(sealed, &mut moved, &mut new_rows)?;
        }
        progress(total, total);

        let before: u64 = packs
            .iter()
            .filter(|(id, _)| !foreign.contains(id))
            .map(|(_, r)| r.size)
            .sum();
        let result = (|| -> Result<()> {
            let txn = inner.db.begin_write()?;
            let mut ops = Vec::new();
            {
                let mut spans = crate::spans::write(&txn)?;
                for id in &dead_spans {
                    spans.remove(&id.0)?;
                    ops.push(Op::DelSpan(id.0));
                }
                // Dropped chunks are all in doomed packs: dropping a pack's names drops their
                // index rows; the moved chunks are indexed again by their new packs' names
                // (written after, as the journal's ops are replayed: `chunk_index.rs`).
                let mut index = chunk_index::Tables::open(&txn)?;
                let mut pack_table = txn.open_table(PACKS)?;
                let mut foreign_table = txn.open_table(FOREIGN_PACKS)?;
                for p in &doomed {
                    pack_table.remove(*p)?;
                    chunk_index::delete_names(&mut index, *p)?;
                    ops.push(Op::DelPack(*p));
                    ops.push(Op::DelPackIds(*p));
                    if foreign.contains(p) {
                        foreign_table.remove(*p)?;
                        ops.push(Op::DelForeignPack(*p));
                    }
                }
                for (id, row, names) in &new_rows {
                    let row = row.encode();
                    pack_table.insert(*id, row.as_slice())?;
                    let elsewhere = chunk_index::put_names(&mut index, *id, names)?;
                    if !elsewhere.is_empty() {
                        return Err(StoreError::Corrupt(format!(
                            "reclaim moved {} chunks another pack still holds",
                            elsewhere.len()
                        )));
                    }
                    ops.push(Op::PutPack(*id, row.to_vec()));
                    ops.push(Op::PutPackIds(*id, crate::format::encode_pack_ids(names)));
                }
                // The doomed packs' names were retired above; keep those placed bodies read.
                crate::spans::drop_unread_retired_names(&spans, &mut index.retired)?;
            }
            inner.journal(ops);
            // The journal object that drops the doomed packs is written (and for durability
            // `bucket`, flushed) before they are deleted below.
            inner.commit_txn_durably(txn)?;
            Ok(())
        })();
        inner.stop_on_catalog_error(result)?;
        inner.drop_caches();
        {
            let mut map = inner.foreign.write();
            for p in &doomed {
                map.remove(p);
            }
        }
        for p in doomed.iter().filter(|p| !foreign.contains(p)) {
            // The catalog no longer names it; if this fails the next open removes the orphan.
            let _ = inner.backend.delete(&pack_key(*p));
        }
        report.chunks_dropped = dropped.len() as u64;
        let after = before
            - packs
                .iter()
                .filter(|(id, _)| doomed.contains(id) && !foreign.contains(id))
                .map(|(_, r)| r.size)
                .sum::<u64>()
            + new_rows.iter().map(|(_, r, _)| r.size).sum::<u64>();
        report.bytes_freed = before.saturating_sub(after);
        Ok(report)
    }
}
