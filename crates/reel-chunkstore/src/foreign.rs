//! Streams read in place by another store: one store *exports* a stream (its rows and where
//! each of its chunks is), another *imports* it as a stream of its own whose chunks stay in the
//! first store's packs. Nothing is copied; both stores are on one back end reachable by both
//! (two prefixes of one bucket).
//!
//! The exporting store pins the stream: reclaim never rewrites a pack holding one of its chunks,
//! so the locations handed out stay true until the pin is lifted. The importing store records
//! each pack it reads in place as a *foreign pack* (`catalog::FOREIGN_PACKS`): a local pack id
//! whose object is `packs/<id there>` in the other store, named by an opaque source string that
//! the caller's [`ForeignStores`] turns into a back end. It never writes or deletes such an
//! object; reclaim forgets a foreign pack once no stream references its chunks, and
//! [`ChunkStore::foreign_sources`] then stops naming its source: the signal that the exporter
//! may lift its pin.
//!
//! Which source a foreign pack belongs to is the caller's choice; reel uses one source per
//! export (not per exporting store), so "no pack of this source is left" means exactly "this
//! export is no longer needed": every chunk row an import adds points into its own source's
//! packs, and its chunks are the pinned stream's.
//!
//! The bundle an export hands out comes in parts; part `n` is a catalog journal object
//! (`journal.rs`) with sequence `n` of put ops: the stream's id and length, (part 0) its sidecar
//! rows, then extent rows with the spans they use, the chunk rows of every chunk they reference,
//! and the pack and pack-name rows of the packs holding them (names of other chunks replaced by
//! tombstones, so the importer's locality cache never offers a chunk the bundle did not index).
//! Every part is self-contained, so memory holds one part at a time on either side.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use redb::{Durability, ReadableTable};
use reel_backend::Backend;

use crate::catalog::{EXTENTS, FOREIGN_PACKS, ForeignPack, PACKS, PINS, PackRow, SIDECAR, STREAMS};
use crate::chunk_index;
use crate::format::{self, ChunkId, ChunkLoc, Entry, SpanId, TOMBSTONE};
use crate::journal::{self, Op};
use crate::{ChunkStore, Result, StoreError, StreamId};

/// One part of a bundle being built: its ops, the chunks it holds (by pack) and the spans.
struct Part {
    ops: Vec<Op>,
    bytes: usize,
    by_pack: HashMap<u64, HashSet<ChunkId>>,
    chunks: HashSet<ChunkId>,
    spans: HashSet<SpanId>,
}

impl Part {
    fn new(stream: u64, len: u64) -> Part {
        Part {
            ops: vec![Op::PutStream(stream, len)],
            bytes: 0,
            by_pack: HashMap::new(),
            chunks: HashSet::new(),
            spans: HashSet::new(),
        }
    }

    fn push(&mut self, op: Op) {
        // The op's value plus at most 46 bytes of tags, keys and lengths.
        self.bytes += 46
            + match &op {
                Op::PutExtent(_, v)
                | Op::PutSidecar(_, v)
                | Op::PutSpan(_, v)
                | Op::PutChunk(_, v) => v.len(),
                _ => 0,
            };
        self.ops.push(op);
    }

    /// Adds span `id` with its pieces and every chunk they name. Each row is read once and
    /// carried as stored.
    fn span(
        &mut self,
        id: SpanId,
        len: u32,
        spans: &impl crate::spans::SpanSource,
        locate: &dyn Fn(&ChunkId) -> Result<Option<ChunkLoc>>,
        foreign: &HashSet<u64>,
        stream: StreamId,
    ) -> Result<()> {
        let body = crate::spans::stored(spans, id)?;
        for e in crate::spans::decode_span(spans, id, &body, len)? {
            match e {
                Entry::Chunk(r) => self.chunk(r.id, locate, foreign, stream)?,
                Entry::Span { id: piece, len } => {
                    if self.spans.insert(piece) {
                        let piece_body = crate::spans::stored(spans, piece)?;
                        for r in crate::spans::decode_flat(piece, &piece_body, len)? {
                            self.chunk(r.id, locate, foreign, stream)?;
                        }
                        self.push(Op::PutSpan(piece.0, piece_body));
                    }
                }
            }
        }
        self.push(Op::PutSpan(id.0, body));
        Ok(())
    }

    /// Adds chunk `id`'s row unless this part has it.
    fn chunk(
        &mut self,
        id: ChunkId,
        locate: &dyn Fn(&ChunkId) -> Result<Option<ChunkLoc>>,
        foreign: &HashSet<u64>,
        stream: StreamId,
    ) -> Result<()> {
        if !self.chunks.insert(id) {
            return Ok(());
        }
        let loc = locate(&id)?.ok_or_else(|| {
            StoreError::Corrupt(format!("chunk {id} is referenced but not stored"))
        })?;
        if foreign.contains(&loc.pack) {
            return Err(StoreError::Invalid(format!(
                "stream {} holds data this store itself reads from another store; it cannot \
                 be exported again",
                stream.0
            )));
        }
        self.by_pack.entry(loc.pack).or_default().insert(id);
        // The bundle keeps a chunk's place (journal objects stopped carrying it in version
        // 8): the importer checks each chunk against the pack it names.
        self.push(Op::PutChunk(id.0, loc.encode().to_vec()));
        Ok(())
    }

    /// Adds the rows of the packs this part's chunks are in (names of other chunks tombstoned)
    /// and encodes it as journal object `n`.
    fn finish(
        mut self,
        n: u64,
        packs: &impl ReadableTable<u64, &'static [u8]>,
        names: &impl ReadableTable<(u64, u32), &'static [u8]>,
    ) -> Result<Vec<u8>> {
        let mut list: Vec<_> = std::mem::take(&mut self.by_pack).into_iter().collect();
        list.sort_unstable_by_key(|p| p.0);
        for (pack, used) in list {
            let row = packs
                .get(pack)?
                .ok_or_else(|| StoreError::Corrupt(format!("pack {pack} not in catalog")))?;
            self.ops.push(Op::PutPack(pack, row.value().to_vec()));
            let ids = crate::pack_names::get(names, pack)?
                .ok_or_else(|| StoreError::Corrupt(format!("pack {pack} has no chunk names")))?;
            let ids: Vec<ChunkId> = format::decode_pack_ids(&ids)?
                .into_iter()
                .map(|id| if used.contains(&id) { id } else { TOMBSTONE })
                .collect();
            self.ops
                .push(Op::PutPackIds(pack, format::encode_pack_ids(&ids)));
        }
        Ok(journal::encode(n, &self.ops))
    }
}

/// Opens the back end of another store, by the source name an import was given.
pub trait ForeignStores: Send + Sync + 'static {
    fn open(&self, source: &str) -> std::result::Result<Arc<dyn Backend>, String>;
}

/// What an import added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Stream bytes now readable here.
    pub stream_bytes: u64,
    /// Chunk rows added (chunks this store did not already hold).
    pub chunks_added: u64,
    /// Other-store packs now read in place.
    pub foreign_packs: u64,
}

/// A bundle, decoded and checked for consistency before anything is written.
struct Bundle {
    stream: u64,
    len: u64,
    extents: Vec<(u64, Vec<u8>)>,
    sidecars: Vec<(u64, Vec<u8>)>,
    spans: Vec<([u8; 32], Vec<u8>)>,
    chunks: Vec<(ChunkId, ChunkLoc)>,
    packs: Vec<(u64, PackRow, Vec<ChunkId>)>,
}

fn invalid(why: impl std::fmt::Display) -> StoreError {
    StoreError::Invalid(format!("exported stream bundle: {why}"))
}

impl Bundle {
    /// Part `part` of a bundle: self-contained (everything its rows reference is in it).
    fn decode(bytes: &[u8], part: u64) -> Result<Bundle> {
        let ops = journal::decode(bytes, part).map_err(invalid)?;
        let mut stream = None;
        let (mut extents, mut sidecars, mut spans, mut chunks) = (vec![], vec![], vec![], vec![]);
        let mut pack_rows: HashMap<u64, PackRow> = HashMap::new();
        let mut pack_names: HashMap<u64, Vec<ChunkId>> = HashMap::new();
        let mut extent_keys = Vec::new();
        for op in ops {
            match op {
                Op::PutStream(id, len) => {
                    if stream.replace((id, len)).is_some() {
                        return Err(invalid("two streams"));
                    }
                }
                Op::PutExtent((s, at), v) => {
                    extent_keys.push(s);
                    extents.push((at, v));
                }
                Op::PutSidecar((s, k), v) => {
                    extent_keys.push(s);
                    sidecars.push((k, v));
                }
                Op::PutSpan(id, v) => spans.push((id, v)),
                Op::PutChunk(id, v) => chunks.push((ChunkId(id), ChunkLoc::decode(&v)?)),
                Op::PutPack(id, v) => {
                    pack_rows.insert(id, PackRow::decode(&v)?);
                }
                Op::PutPackIds(id, v) | Op::LegacyPutPackIds(id, v) => {
                    pack_names.insert(id, format::decode_pack_ids(&v)?);
                }
                other => return Err(invalid(format!("unexpected op {other:?}"))),
            }
        }
        let (stream, len) = stream.ok_or_else(|| invalid("no stream"))?;
        if extent_keys.iter().any(|s| *s != stream) {
            return Err(invalid("rows of another stream"));
        }
        let mut packs = Vec::new();
        for (id, row) in pack_rows {
            let names = pack_names
                .remove(&id)
                .ok_or_else(|| invalid(format!("pack {id} without chunk names")))?;
            packs.push((id, row, names));
        }
        if !pack_names.is_empty() {
            return Err(invalid("chunk names of a pack without a row"));
        }
        // Everything the rows reference is in the bundle, where it says.
        let pack_ids: HashSet<u64> = packs.iter().map(|p| p.0).collect();
        if let Some((id, loc)) = chunks.iter().find(|(_, l)| !pack_ids.contains(&l.pack)) {
            return Err(invalid(format!(
                "chunk {id} in pack {} it does not describe",
                loc.pack
            )));
        }
        // An imported chunk is indexed by its pack's names (`chunk_index.rs`): each must be
        // named there.
        let named: HashSet<(u64, ChunkId)> = packs
            .iter()
            .flat_map(|(p, _, names)| names.iter().map(move |n| (*p, *n)))
            .collect();
        if let Some((id, loc)) = chunks
            .iter()
            .find(|(id, l)| !named.contains(&(l.pack, *id)))
        {
            return Err(invalid(format!(
                "chunk {id} in pack {} that does not name it",
                loc.pack
            )));
        }
        let chunk_ids: HashSet<ChunkId> = chunks.iter().map(|c| c.0).collect();
        // Ordered: compact rows name spans by their ids' first bytes (`spans::decode_row`).
        let span_ids: BTreeSet<[u8; 32]> = spans.iter().map(|s| s.0).collect();
        let flat_span_ids: HashSet<[u8; 32]> = spans
            .iter()
            .filter(|s| format::span_is_flat(&s.1))
            .map(|s| s.0)
            .collect();
        for (_, body) in &spans {
            for e in crate::spans::decode_row(&span_ids, body)? {
                match e {
                    Entry::Chunk(r) if !chunk_ids.contains(&r.id) => {
                        return Err(invalid(format!(
                            "a span references chunk {} it lacks",
                            r.id
                        )));
                    }
                    // Spans nest one level: a piece is a flat span of the bundle.
                    Entry::Span { id, .. } if !flat_span_ids.contains(&id.0) => {
                        return Err(invalid(format!("a span references piece {id} it lacks")));
                    }
                    _ => {}
                }
            }
        }
        for (_, row) in &extents {
            for e in crate::spans::decode_row(&span_ids, row)? {
                let known = match e {
                    Entry::Chunk(r) => chunk_ids.contains(&r.id),
                    Entry::Span { id, .. } => span_ids.contains(&id.0),
                };
                if !known {
                    return Err(invalid("an extent references something it lacks"));
                }
            }
        }
        Ok(Bundle {
            stream,
            len,
            extents,
            sidecars,
            spans,
            chunks,
            packs,
        })
    }
}

/// Writes an imported pack's names, which index exactly the chunks it names: each was checked
/// to be indexed nowhere yet, and is named in one pack of the bundle.
fn put_import_names(
    index: &mut chunk_index::Tables<'_>,
    pack: u64,
    names: &[ChunkId],
) -> Result<()> {
    let elsewhere = chunk_index::put_names(index, pack, names)?;
    if !elsewhere.is_empty() {
        return Err(invalid(format!(
            "pack {pack} names {} chunks another pack of it names",
            elsewhere.len()
        )));
    }
    Ok(())
}

/// Decodes and checks a bundle, for the journal fuzz target: errors are fine, panics are bugs.
pub(crate) fn check_bundle(bytes: &[u8]) {
    let _ = Bundle::decode(bytes, 0);
}

impl ChunkStore {
    /// How this store opens other stores' back ends for the packs of imported streams. Until
    /// it is set, reading an imported stream fails with `StoreError::Invalid`.
    pub fn set_foreign_stores(&self, stores: Arc<dyn ForeignStores>) {
        *self.inner.foreign_stores.write() = Some(stores);
    }

    /// Pins `stream` (with `label`, e.g. who reads it) and hands `sink` what another store needs
    /// to read it in place ([`ChunkStore::import_stream`]): the bundle, in parts of about
    /// `part_bytes` (each self-contained; part `n` is journal object `n`). Returns the number of
    /// parts, once every pack they name and the pin are durable in the back end's final home
    /// (before the first part is handed out). The stream must not be open and should not change
    /// while pinned: appends, truncation and [`ChunkStore::delete_stream`] are refused. A
    /// refused export (`Invalid`) lifts its pin; after any other error the pin stays, and the
    /// caller lifts it ([`ChunkStore::unpin_stream`]) or retries.
    pub fn export_stream(
        &self,
        stream: StreamId,
        label: &[u8],
        part_bytes: usize,
        sink: &mut dyn FnMut(Vec<u8>) -> Result<()>,
    ) -> Result<u64> {
        let result = self.export_pinned(stream, label, part_bytes.max(1), sink);
        if let Err(StoreError::Invalid(_)) = &result {
            // Refused (data adopted from elsewhere): nobody will read it in place.
            let _ = self.unpin_stream(stream);
        }
        result
    }

    fn export_pinned(
        &self,
        stream: StreamId,
        label: &[u8],
        part_bytes: usize,
        sink: &mut dyn FnMut(Vec<u8>) -> Result<()>,
    ) -> Result<u64> {
        let inner = &self.inner;
        inner.check_stopped()?;
        if inner
            .streams
            .lock()
            .get(&stream)
            .is_some_and(|w| w.strong_count() > 0)
        {
            return Err(StoreError::InUse(stream.0));
        }
        {
            // Under the ingest lock: no reclaim moves a chunk of the stream before the pin.
            let _ingest = inner.ingest_lock.read();
            let _commit = inner.commit_lock.read();
            let mut txn = inner.db.begin_write()?;
            txn.set_durability(Durability::None)?;
            {
                if txn.open_table(STREAMS)?.get(stream.0)?.is_none() {
                    return Err(StoreError::Invalid(format!("no stream {}", stream.0)));
                }
                txn.open_table(PINS)?.insert(stream.0, label)?;
            }
            inner.journal([Op::PutPin(stream.0, label.to_vec())]);
            txn.commit()?;
            inner.pinned.write().insert(stream.0);
        }
        inner.sync()?;
        inner.backend.flush().map_err(StoreError::from_backend)?;

        let txn = inner.db.begin_read()?;
        let len = txn
            .open_table(STREAMS)?
            .get(stream.0)?
            .map(|v| v.value())
            .ok_or_else(|| StoreError::Invalid(format!("no stream {}", stream.0)))?;
        let spans = crate::spans::read(&txn)?;
        // The pin keeps reclaim from moving the stream's chunks: the index's answer now is
        // the snapshot's.
        let locate = |id: &ChunkId| inner.lookup_catalog(id);
        let packs = txn.open_table(PACKS)?;
        let names = txn.open_table(crate::pack_names::PACK_NAMES)?;
        // A copy: the lock is not held while the sink uploads (reads and imports take it).
        let foreign: HashSet<u64> = inner.foreign.read().keys().copied().collect();
        let mut part = Part::new(stream.0, len);
        for row in txn
            .open_table(SIDECAR)?
            .range((stream.0, 0)..=(stream.0, u64::MAX))?
        {
            let (k, v) = row?;
            part.push(Op::PutSidecar(k.value(), v.value().to_vec()));
        }
        let mut parts = 0u64;
        for row in txn
            .open_table(EXTENTS)?
            .range((stream.0, 0)..=(stream.0, u64::MAX))?
        {
            let (k, v) = row?;
            for e in crate::spans::decode_row(&spans, v.value())? {
                match e {
                    Entry::Chunk(r) => part.chunk(r.id, &locate, &foreign, stream)?,
                    Entry::Span { id, len } => {
                        if part.spans.insert(id) {
                            part.span(id, len, &spans, &locate, &foreign, stream)?;
                        }
                    }
                }
            }
            part.push(Op::PutExtent(k.value(), v.value().to_vec()));
            if part.bytes >= part_bytes {
                let full = std::mem::replace(&mut part, Part::new(stream.0, len));
                sink(full.finish(parts, &packs, &names)?)?;
                parts += 1;
            }
        }
        if parts == 0 || part.ops.len() > 1 {
            sink(part.finish(parts, &packs, &names)?)?;
            parts += 1;
        }
        Ok(parts)
    }

    /// Lifts the pin of `stream` (a no-op if it has none); durable with the next sync.
    pub fn unpin_stream(&self, stream: StreamId) -> Result<()> {
        let inner = &self.inner;
        inner.check_stopped()?;
        let _commit = inner.commit_lock.read();
        let mut txn = inner.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        let had = txn.open_table(PINS)?.remove(stream.0)?.is_some();
        if had {
            inner.journal([Op::DelPin(stream.0)]);
        }
        txn.commit()?;
        inner.pinned.write().remove(&stream.0);
        Ok(())
    }

    /// Pinned streams and their labels.
    pub fn pinned_streams(&self) -> Result<Vec<(StreamId, Vec<u8>)>> {
        let txn = self.inner.db.begin_read()?;
        let mut out = Vec::new();
        for row in txn.open_table(PINS)?.iter()? {
            let (k, v) = row?;
            out.push((StreamId(k.value()), v.value().to_vec()));
        }
        Ok(out)
    }

    /// Adopts a stream another store exported as stream `as_stream` of this one, its chunks
    /// read in place from the packs of `source` (resolved by [`ForeignStores`]). Chunks this
    /// store already holds are read from here. `parts` yields the export's parts in order; each
    /// is checked whole before it is applied, in a transaction of its own, so an error leaves
    /// the parts before it applied: the caller deletes the stream (its foreign packs are then
    /// forgotten by the next reclaim). Durable when this returns.
    pub fn import_stream(
        &self,
        source: &str,
        parts: &mut dyn Iterator<Item = Result<Vec<u8>>>,
        as_stream: StreamId,
    ) -> Result<ImportReport> {
        self.inner.check_stopped()?;
        if source.is_empty() || source.len() > usize::from(u16::MAX) {
            return Err(StoreError::Invalid(format!("bad source name {source:?}")));
        }
        let mut report = ImportReport::default();
        let mut first: Option<(u64, u64)> = None;
        for (n, part) in parts.enumerate() {
            let bundle = Bundle::decode(&part?, n as u64)?;
            match first {
                None => first = Some((bundle.stream, bundle.len)),
                Some(f) if f != (bundle.stream, bundle.len) => {
                    return Err(invalid(format!("part {n} is of another stream")));
                }
                Some(_) => {}
            }
            self.import_part(source, &bundle, as_stream, n == 0, &mut report)?;
        }
        if first.is_none() {
            return Err(invalid("no parts"));
        }
        self.inner.sync()?;
        Ok(report)
    }

    fn import_part(
        &self,
        source: &str,
        bundle: &Bundle,
        as_stream: StreamId,
        first: bool,
        report: &mut ImportReport,
    ) -> Result<()> {
        let inner = &self.inner;
        report.stream_bytes = bundle.len;
        let mut added_foreign: Vec<(u64, ForeignPack)> = Vec::new();
        let mut added_chunks: Vec<ChunkId> = Vec::new();
        {
            let _ingest = inner.ingest_lock.read();
            let _commit = inner.commit_lock.read();
            let mut txn = inner.db.begin_write()?;
            txn.set_durability(Durability::None)?;
            let mut ops = Vec::new();
            {
                let mut streams = txn.open_table(STREAMS)?;
                let exists = streams.get(as_stream.0)?.is_some();
                if first && exists {
                    return Err(StoreError::Invalid(format!(
                        "stream {} already exists here",
                        as_stream.0
                    )));
                }
                if !first && !exists {
                    return Err(invalid("a later part before the first"));
                }
                // A pack already read in place from this source (another partition of the same
                // export) keeps its local id.
                let mut local: HashMap<u64, u64> = inner
                    .foreign
                    .read()
                    .iter()
                    .filter(|(_, f)| f.source == source)
                    .map(|(l, f)| (f.pack, *l))
                    .collect();
                let mut new_packs = HashSet::new();
                for (pack, _, _) in &bundle.packs {
                    local.entry(*pack).or_insert_with(|| {
                        let id = inner.alloc_pack_id();
                        new_packs.insert(id);
                        id
                    });
                }
                let mut index = chunk_index::Tables::open(&txn)?;
                let mut indexed_here: HashSet<ChunkId> = HashSet::new();
                for (id, _) in &bundle.chunks {
                    if index.lookup(id)?.is_some() {
                        continue;
                    }
                    indexed_here.insert(*id);
                    added_chunks.push(*id);
                }
                // Naming a chunk in a pack's names indexes it there (`chunk_index.rs`).
                let mut packs = txn.open_table(PACKS)?;
                let mut foreign = txn.open_table(FOREIGN_PACKS)?;
                for (pack, row, ids) in &bundle.packs {
                    let id = local[pack];
                    if !new_packs.contains(&id) {
                        // Read in place already (an earlier part): name the chunks indexed now.
                        let known = match crate::pack_names::get(&index.names_table, id)? {
                            Some(v) => format::decode_pack_ids(&v)?,
                            None => continue,
                        };
                        if known.len() != ids.len() {
                            return Err(invalid(format!("pack {pack} changed its chunk count")));
                        }
                        let merged: Vec<ChunkId> = known
                            .iter()
                            .zip(ids)
                            .map(|(k, c)| if indexed_here.contains(c) { *c } else { *k })
                            .collect();
                        if merged != known {
                            put_import_names(&mut index, id, &merged)?;
                            ops.push(Op::PutPackIds(id, format::encode_pack_ids(&merged)));
                        }
                        continue;
                    }
                    let row = row.encode();
                    packs.insert(id, row.as_slice())?;
                    let ids: Vec<ChunkId> = ids
                        .iter()
                        .map(|c| {
                            if indexed_here.contains(c) {
                                *c
                            } else {
                                TOMBSTONE
                            }
                        })
                        .collect();
                    put_import_names(&mut index, id, &ids)?;
                    let where_ = ForeignPack {
                        source: source.to_string(),
                        pack: *pack,
                    };
                    let encoded = where_.encode();
                    foreign.insert(id, encoded.as_slice())?;
                    ops.push(Op::PutPack(id, row.to_vec()));
                    ops.push(Op::PutPackIds(id, format::encode_pack_ids(&ids)));
                    ops.push(Op::PutForeignPack(id, encoded));
                    added_foreign.push((id, where_));
                }
                let mut spans = crate::spans::write(&txn)?;
                for (id, refs) in &bundle.spans {
                    if !spans.contains(id)? {
                        spans.insert(id, refs.as_slice())?;
                        ops.push(Op::PutSpan(*id, refs.clone()));
                    }
                }
                if first {
                    streams.insert(as_stream.0, bundle.len)?;
                    ops.push(Op::PutStream(as_stream.0, bundle.len));
                }
                let mut extents = txn.open_table(EXTENTS)?;
                for (at, row) in &bundle.extents {
                    extents.insert((as_stream.0, *at), row.as_slice())?;
                    ops.push(Op::PutExtent((as_stream.0, *at), row.clone()));
                }
                let mut sidecar = txn.open_table(SIDECAR)?;
                for (k, v) in &bundle.sidecars {
                    sidecar.insert((as_stream.0, *k), v.as_slice())?;
                    ops.push(Op::PutSidecar((as_stream.0, *k), v.clone()));
                }
            }
            inner.journal(ops);
            let committed = txn.commit().map_err(StoreError::from);
            inner.stop_on_catalog_error(committed)?;
            inner.foreign.write().extend(added_foreign.iter().cloned());
            for id in &added_chunks {
                inner.note_indexed(id)?;
            }
        }
        report.chunks_added += added_chunks.len() as u64;
        report.foreign_packs += added_foreign.len() as u64;
        Ok(())
    }

    /// The sources some chunk of this store is still read from: an import whose source is not
    /// here any more (after its streams were deleted or rewritten, and a reclaim) needs nothing
    /// from its exporter.
    pub fn foreign_sources(&self) -> BTreeSet<String> {
        self.inner
            .foreign
            .read()
            .values()
            .map(|f| f.source.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests;
