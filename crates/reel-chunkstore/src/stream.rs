//! Streams: append, record boundaries, flush, truncate, read.
//!
//! A stream's bytes are a sequence of chunk references kept in extent rows of at most
//! [`ROW_CHUNKS`] references, keyed by the stream offset where each row starts. Appended bytes
//! live in memory (the chunker's unfinished chunk, the unwritten rows) until [`Stream::flush`]
//! writes them to the catalog together with the sidecar changes, so the catalog always holds a
//! state of the stream its owner flushed, never a half-updated one.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use redb::{Durability, ReadableTable};

use crate::catalog::{EXTENTS, SIDECAR, STREAMS};
use crate::chunker::Chunker;
use crate::format::{ChunkId, ChunkRef, Entry, SpanId, encode_refs, encode_row, split_into_pieces};
use crate::hasher::RecordBytes;
use crate::journal::Op;
use crate::packer::PackBuilder;
use crate::spans::{Inserted, SPAN_INDEX};
use crate::store::{Blob, ChunkStore, Inner};
use crate::{Result, StoreError};

/// Entries per extent row: a chunk or a whole record each, 37 bytes encoded, so a row of 24
/// (893 bytes) shares a 4 KiB page with three others. Rows of 1024 (37 KiB) took a power-of-two
/// run of pages each and left 40 % of the table empty (`efficiency.md` §27); rows of any
/// length are read alike.
pub const ROW_CHUNKS: usize = 24;

/// Record bytes a stream may have queued for the hash threads before it waits.
const MAX_IN_FLIGHT: usize = 16 << 20;

/// Records shorter than this many pieces (~330 KiB at the default chunk size) stay flat. Each
/// piece costs a row (key and header) and an entry in the record's body, ~13 % more than a
/// flat list when nothing is shared, and short records tend to repeat whole, which a flat
/// span already stores once (measured in `docs/design/efficiency.md` §21: cutting every record
/// of two pieces or more made the spans of 64 KiB and 256 KiB records 13-14 % larger).
const PIECES_MIN: usize = 8;

/// Span bodies stored as written that later flushes try to place (`spans::place_pending`),
/// at most: a retry costs a few microseconds (estimated), so a flush spends about 0.1 s at most.
const UNPLACED_MAX: usize = 16 << 10;

/// A record is cut into pieces only if at least one in this many of its chunks was stored
/// before: a record of new chunks (unique data, or the first copy of blocks) has no piece to
/// share yet, and as a flat list costs ~9 % less catalog (§21).
const PIECES_SHARED_ONE_IN: usize = 8;

/// A record's span as it will be stored: its body, and the pieces (flat spans) the body names.
struct NewSpan {
    body: Vec<u8>,
    pieces: Vec<(SpanId, Vec<u8>)>,
}

impl NewSpan {
    /// A record's span: a flat reference list if it has fewer than [`PIECES_MIN`] pieces,
    /// holds few chunks stored before (`new_chunks` of its references were new), or repeats a
    /// record stored flat (`flat_is_known`, asked last: it costs a catalog lookup); otherwise
    /// its pieces (`format::split_into_pieces`), one-chunk pieces as chunk entries.
    fn of_record(
        refs: &[ChunkRef],
        new_chunks: usize,
        flat_is_known: impl FnOnce(SpanId) -> Result<bool>,
    ) -> Result<NewSpan> {
        let flat = NewSpan {
            body: encode_refs(refs),
            pieces: Vec::new(),
        };
        // Cheapest test first: most long records of new data stop here.
        let stored_before = refs.len().saturating_sub(new_chunks);
        if stored_before * PIECES_SHARED_ONE_IN < refs.len() {
            return Ok(flat);
        }
        let split = split_into_pieces(refs);
        if split.len() < PIECES_MIN || flat_is_known(SpanId::of(&flat.body))? {
            return Ok(flat);
        }
        let mut entries = Vec::with_capacity(split.len());
        let mut pieces = Vec::with_capacity(split.len());
        for piece in split {
            if let [one] = piece {
                entries.push(Entry::Chunk(*one));
                continue;
            }
            let body = encode_refs(piece);
            let id = SpanId::of(&body);
            let len = piece.iter().map(|r| r.len).sum();
            entries.push(Entry::Span { id, len });
            pieces.push((id, body));
        }
        Ok(NewSpan {
            body: encode_row(&entries),
            pieces,
        })
    }
}

/// Names a stream. Callers choose ids (e.g. cartridge number and partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

pub(crate) struct StreamState {
    id: StreamId,
    len: u64,
    chunker: Chunker,
    /// The unfinished chunk's bytes.
    buf: Vec<u8>,
    /// Full rows not yet written to the catalog.
    full_rows: Vec<(u64, Vec<Entry>)>,
    row_start: u64,
    tail: Vec<Entry>,
    /// Spans this stream referenced since its last flush, written with it unless present:
    /// each record's body with the pieces it holds (see [`NewSpan`]).
    new_spans: std::collections::HashMap<SpanId, NewSpan>,
    /// `new_spans`' ids in the order their records came: placing their bodies at the flush
    /// visits packs in the order they were written (`spans::Placer` holds a few at a time).
    new_span_order: Vec<SpanId>,
    tail_bytes: u64,
    /// About how much memory the rows and bodies waiting for the next flush take.
    unflushed_catalog_bytes: usize,
    dirty: bool,
    sidecar: BTreeMap<u64, Option<Vec<u8>>>,
    builder: Arc<Mutex<PackBuilder>>,
    /// The last row read: (start, references, end offset of each reference).
    read_row: Option<(u64, Vec<ChunkRef>, Vec<u64>)>,
    /// Bytes appended since the last record boundary.
    record_len: u64,
    /// Records out for chunking and hashing, oldest first; applied strictly in order.
    in_flight: VecDeque<crossbeam_channel::Receiver<crate::hasher::Hashed>>,
    in_flight_bytes: usize,
    /// Record buffers to reuse (fresh allocations cost page faults on every record).
    spare: Vec<Vec<u8>>,
}

/// An open stream. One handle per stream at a time; it may be moved between threads.
pub struct Stream {
    inner: Arc<Inner>,
    state: Arc<Mutex<StreamState>>,
}

impl ChunkStore {
    /// Opens a stream (an empty one if it never existed; it is created by its first flush).
    pub fn open_stream(&self, id: StreamId) -> Result<Stream> {
        let inner = self.inner.clone();
        let (len, row_start, tail) = load_tail(&inner, id)?;
        let state = Arc::new(Mutex::new(StreamState {
            id,
            len,
            chunker: Chunker::new(inner.config.chunker),
            buf: Vec::new(),
            full_rows: Vec::new(),
            row_start,
            tail_bytes: len - row_start,
            tail,
            unflushed_catalog_bytes: 0,
            dirty: false,
            sidecar: BTreeMap::new(),
            builder: inner.new_builder(id.0),
            read_row: None,
            record_len: 0,
            new_spans: std::collections::HashMap::new(),
            new_span_order: Vec::new(),
            in_flight: VecDeque::new(),
            in_flight_bytes: 0,
            spare: Vec::new(),
        }));
        inner.register_stream(id, &state)?;
        Ok(Stream { inner, state })
    }
}

/// Reads a stream's committed length and its last row.
fn load_tail(inner: &Inner, id: StreamId) -> Result<(u64, u64, Vec<Entry>)> {
    let txn = inner.db.begin_read()?;
    let len = txn
        .open_table(STREAMS)?
        .get(id.0)?
        .map(|v| v.value())
        .unwrap_or(0);
    let extents = txn.open_table(EXTENTS)?;
    let last = extents
        .range((id.0, 0)..=(id.0, u64::MAX))?
        .next_back()
        .transpose()?;
    let (row_start, tail) = match last {
        Some((k, v)) => (
            k.value().1,
            crate::spans::decode_row(&txn.open_table(SPAN_INDEX)?, v.value())?,
        ),
        None => (0, Vec::new()),
    };
    let tail_bytes: u64 = tail.iter().map(|e| u64::from(e.bytes())).sum();
    if row_start + tail_bytes != len {
        return Err(StoreError::Corrupt(format!(
            "stream {}: extents end at {} but the stream is {len} bytes long",
            id.0,
            row_start + tail_bytes
        )));
    }
    Ok((len, row_start, tail))
}

impl StreamState {
    fn emit(&mut self, inner: &Inner, data: &[u8]) -> Result<()> {
        self.emit_hashed(inner, ChunkId::of(data), data)
    }

    fn emit_hashed(&mut self, inner: &Inner, id: ChunkId, data: &[u8]) -> Result<()> {
        self.store_chunk(inner, id, data)?;
        self.push_entry(Entry::Chunk(ChunkRef {
            id,
            len: data.len() as u32,
        }));
        Ok(())
    }

    /// Makes sure chunk `id` is stored: a new one goes into this stream's open pack.
    /// Stores a chunk unless the store holds it; returns whether it was new.
    fn store_chunk(&mut self, inner: &Inner, id: ChunkId, data: &[u8]) -> Result<bool> {
        let new = inner.reserve(&id)?;
        if new {
            let sealed = self.builder.lock().add(|| inner.alloc_pack_id(), id, data);
            if let Some(pack) = sealed {
                inner.submit(pack);
            }
        }
        Ok(new)
    }

    fn push_entry(&mut self, entry: Entry) {
        self.tail_bytes += u64::from(entry.bytes());
        self.unflushed_catalog_bytes += size_of::<Entry>();
        self.tail.push(entry);
        if self
            .read_row
            .as_ref()
            .is_some_and(|r| r.0 == self.row_start)
        {
            self.read_row = None;
        }
        if self.tail.len() >= ROW_CHUNKS {
            let row = std::mem::take(&mut self.tail);
            self.full_rows.push((self.row_start, row));
            self.row_start += self.tail_bytes;
            self.tail_bytes = 0;
        }
        self.dirty = true;
    }

    fn emit_buf(&mut self, inner: &Inner) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.emit(inner, &buf);
        self.buf = buf;
        self.buf.clear();
        self.chunker.reset();
        r
    }

    /// Appends a whole record. A record that starts on a chunk boundary and is long enough to
    /// end on one goes to the hash threads; the rest is chunked here, in order, after them.
    ///
    /// `shared`, when given, holds the same bytes as `data`: a record the hash threads take is
    /// then passed on as it is instead of copied.
    fn append_record(
        &mut self,
        inner: &Inner,
        data: &[u8],
        shared: Option<&bytes::Bytes>,
    ) -> Result<()> {
        // Span lengths are u32; tape records are at most 8 MiB anyway.
        let whole =
            data.len() >= inner.config.chunker.avg as usize && u32::try_from(data.len()).is_ok();
        if whole && self.buf.is_empty() && self.chunker.pending() == 0 && self.record_len == 0 {
            while self.in_flight_bytes + data.len() > MAX_IN_FLIGHT && !self.in_flight.is_empty() {
                self.apply_next(inner, true)?;
            }
            let record = match shared {
                Some(bytes) => {
                    debug_assert_eq!(bytes.len(), data.len());
                    RecordBytes::Shared(bytes.clone())
                }
                None => {
                    let mut copy = self.spare.pop().unwrap_or_default();
                    copy.clear();
                    copy.extend_from_slice(data);
                    RecordBytes::Copied(copy)
                }
            };
            self.in_flight.push_back(inner.hash_pool.submit(record));
            self.in_flight_bytes += data.len();
            self.len += data.len() as u64;
            while self.apply_next(inner, false)? {}
            return Ok(());
        }
        self.append(inner, data)?;
        self.boundary(inner)
    }

    fn boundary(&mut self, inner: &Inner) -> Result<()> {
        self.drain(inner)?;
        let record_len = std::mem::take(&mut self.record_len);
        if self.chunker.boundary(record_len) {
            self.emit_buf(inner)?;
        }
        Ok(())
    }

    /// Applies the oldest hashed record if it is ready (or waits for it if `wait`); returns
    /// whether one was applied.
    fn apply_next(&mut self, inner: &Inner, wait: bool) -> Result<bool> {
        let Some(rx) = self.in_flight.front() else {
            return Ok(false);
        };
        let hashed = if wait {
            rx.recv().ok()
        } else {
            rx.try_recv().ok()
        };
        let Some(hashed) = hashed else {
            if wait {
                return Err(StoreError::Stopped("a hash thread stopped".into()));
            }
            return Ok(false);
        };
        self.in_flight.pop_front();
        self.in_flight_bytes -= hashed.data.len();
        let mut at = 0usize;
        let mut new_chunks = 0;
        for (id, len) in &hashed.chunks {
            let end = at + *len as usize;
            if self.store_chunk(inner, *id, &hashed.data[at..end])? {
                new_chunks += 1;
            }
            at = end;
        }
        let refs: Vec<ChunkRef> = hashed
            .chunks
            .iter()
            .map(|&(id, len)| ChunkRef { id, len })
            .collect();
        match refs.as_slice() {
            [single] => self.push_entry(Entry::Chunk(*single)),
            _ => {
                // A whole record: one span entry, whose body is stored once for every stream
                // and every repeat of the record, and whose pieces are shared with every other
                // record that holds the same runs of chunks.
                let span = NewSpan::of_record(&refs, new_chunks, |flat| {
                    if self.new_spans.contains_key(&flat) {
                        return Ok(true);
                    }
                    let txn = inner.db.begin_read()?;
                    crate::spans::read(&txn)?.contains(&flat.0)
                })?;
                let id = SpanId::of(&span.body);
                if let std::collections::hash_map::Entry::Vacant(e) = self.new_spans.entry(id) {
                    // The bodies, and what holding one costs beside its bytes (the map's entry,
                    // the id again in `new_span_order`): short records make many small spans.
                    self.unflushed_catalog_bytes += span.body.len()
                        + size_of::<(SpanId, NewSpan)>()
                        + size_of::<SpanId>()
                        + span
                            .pieces
                            .iter()
                            .map(|(_, b)| size_of::<(SpanId, Vec<u8>)>() + b.len())
                            .sum::<usize>();
                    e.insert(span);
                    self.new_span_order.push(id);
                }
                self.push_entry(Entry::Span {
                    id,
                    len: hashed.data.len() as u32,
                });
            }
        }
        if let RecordBytes::Copied(buffer) = hashed.data
            && self.spare.len() < 8
        {
            self.spare.push(buffer);
        }
        Ok(true)
    }

    /// Applies every record still out for hashing.
    fn drain(&mut self, inner: &Inner) -> Result<()> {
        while self.apply_next(inner, true)? {}
        Ok(())
    }

    fn append(&mut self, inner: &Inner, data: &[u8]) -> Result<()> {
        self.drain(inner)?;
        let mut rest = data;
        while !rest.is_empty() {
            match self.chunker.scan(rest) {
                Some(n) => {
                    if self.buf.is_empty() {
                        self.emit(inner, &rest[..n])?;
                    } else {
                        self.buf.extend_from_slice(&rest[..n]);
                        let buf = std::mem::take(&mut self.buf);
                        let r = self.emit(inner, &buf);
                        self.buf = buf;
                        self.buf.clear();
                        r?;
                    }
                    rest = &rest[n..];
                }
                None => {
                    self.buf.extend_from_slice(rest);
                    break;
                }
            }
        }
        self.len += data.len() as u64;
        self.record_len += data.len() as u64;
        Ok(())
    }

    /// Writes everything appended and the sidecar changes to the catalog in one transaction.
    /// The caller holds the commit lock shared.
    pub(crate) fn flush(&mut self, inner: &Inner) -> Result<()> {
        self.drain(inner)?;
        self.emit_buf(inner)?;
        if !self.dirty && self.sidecar.is_empty() {
            return Ok(());
        }
        // Packs stored so far are named first, so this flush places the bodies of records
        // whose chunks they hold (`Inner::index_queued`; a batch of packs is one transaction).
        inner.index_queued();
        let id = self.id.0;
        let mut txn = inner.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        let mut ops = Vec::new();
        {
            let mut extents = txn.open_table(EXTENTS)?;
            for (start, refs) in &self.full_rows {
                let row = encode_row(refs);
                extents.insert((id, *start), row.as_slice())?;
                ops.push(Op::PutExtent((id, *start), row));
            }
            if !self.tail.is_empty() {
                let row = encode_row(&self.tail);
                extents.insert((id, self.row_start), row.as_slice())?;
                ops.push(Op::PutExtent((id, self.row_start), row));
            }
            txn.open_table(STREAMS)?.insert(id, self.len)?;
            ops.push(Op::PutStream(id, self.len));
            apply_sidecar(&txn, id, &self.sidecar, &mut ops)?;
            let mut spans = crate::spans::write(&txn)?;
            let mut placer = crate::spans::Placer::open(&txn, &inner.placer_names)?;
            // Bodies earlier flushes stored as written whose packs are named by now, then
            // this flush's. A failed commit below loses the list's changes with the rows;
            // the durable commit places whatever is left either way.
            let mut unplaced = inner.unplaced_spans.lock();
            spans.place_pending(&mut placer, &mut unplaced)?;
            for span in &self.new_span_order {
                let new = &self.new_spans[span];
                // A stored span has its pieces stored (reclaim keeps a live span's pieces), so
                // a repeated record costs one lookup, not one per piece.
                if spans.contains(&span.0)? {
                    continue;
                }
                // The journal gets each body as stored: a placed one names positions in
                // packs' names that are journaled before it (named above, or by an earlier
                // commit), so a replay stores it as the same bytes (`efficiency.md` §37).
                let mut store = |id: &SpanId, body: &Vec<u8>, unless_stored: bool| -> Result<()> {
                    if unless_stored && spans.contains(&id.0)? {
                        return Ok(());
                    }
                    let journaled = match spans.insert_placing(&id.0, body, &mut placer)? {
                        Inserted::Placed(placed) => placed,
                        Inserted::AsWritten => body.clone(),
                        Inserted::Unplaced(seq) => {
                            unplaced.push(seq);
                            body.clone()
                        }
                    };
                    ops.push(Op::PutSpan(id.0, journaled));
                    Ok(())
                };
                for (piece, body) in &new.pieces {
                    store(piece, body, true)?;
                }
                store(span, &new.body, false)?;
            }
            // Bounded: each flush retries the list, and a pack can stay open for long (a slow
            // stream's); bodies beyond it wait for the durable commit's pass.
            unplaced.truncate(UNPLACED_MAX);
        }
        inner.journal(ops);
        txn.commit()?;
        self.new_spans.clear();
        self.new_span_order.clear();
        self.full_rows.clear();
        self.sidecar.clear();
        self.unflushed_catalog_bytes = 0;
        self.dirty = false;
        Ok(())
    }

    fn truncate(&mut self, inner: &Inner, new_len: u64) -> Result<()> {
        if new_len > self.len {
            return Err(StoreError::Invalid(format!(
                "cannot truncate stream {} of {} bytes to {new_len}",
                self.id.0, self.len
            )));
        }
        self.flush(inner)?;
        let id = self.id.0;
        let mut txn = inner.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        let mut ops = Vec::new();
        let (row_start, tail) = {
            let mut extents = txn.open_table(EXTENTS)?;
            let containing = if new_len == 0 {
                None
            } else {
                let row = extents
                    .range((id, 0)..(id, new_len))?
                    .next_back()
                    .transpose()?;
                let span_index = txn.open_table(SPAN_INDEX)?;
                row.map(|(k, v)| {
                    crate::spans::decode_row(&span_index, v.value())
                        .map(|entries| (k.value().1, entries))
                })
                .transpose()?
            };
            extents.retain_in((id, new_len)..=(id, u64::MAX), |_, _| false)?;
            ops.push(Op::DelExtents {
                stream: id,
                first: new_len,
                last: u64::MAX,
            });
            match containing {
                Some((start, entries)) => {
                    let mut kept = Vec::new();
                    let mut at = start;
                    for e in entries {
                        if at >= new_len {
                            break;
                        }
                        let end = at + u64::from(e.bytes());
                        if end <= new_len {
                            kept.push(e);
                            at = end;
                            continue;
                        }
                        // Cut inside this entry: keep a prefix of its chunks (a span is expanded),
                        // the chunk at the cut as a prefix reference.
                        for r in inner.expand(&[e])? {
                            if at >= new_len {
                                break;
                            }
                            let len = (new_len - at).min(u64::from(r.len)) as u32;
                            kept.push(Entry::Chunk(ChunkRef { id: r.id, len }));
                            at += u64::from(len);
                        }
                    }
                    let row = encode_row(&kept);
                    extents.insert((id, start), row.as_slice())?;
                    ops.push(Op::PutExtent((id, start), row));
                    (start, kept)
                }
                None => (0, Vec::new()),
            }
        };
        txn.open_table(STREAMS)?.insert(id, new_len)?;
        ops.push(Op::PutStream(id, new_len));
        apply_sidecar(&txn, id, &self.sidecar, &mut ops)?;
        inner.journal(ops);
        txn.commit()?;
        self.sidecar.clear();
        self.len = new_len;
        self.row_start = row_start;
        self.tail_bytes = new_len - row_start;
        self.tail = tail;
        self.chunker.reset();
        self.buf.clear();
        self.read_row = None;
        self.record_len = 0;
        Ok(())
    }

    fn read_at(&mut self, inner: &Inner, offset: u64, out: &mut [u8]) -> Result<()> {
        let mut rest = &mut *out;
        self.read_pieces(inner, offset, rest.len(), &mut |blob, range| {
            let piece = &blob.data[range];
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(piece.len());
            head.copy_from_slice(piece);
            rest = tail;
        })
    }

    /// Reads `len` bytes at `offset`, handing them to `sink` in order, one piece per chunk:
    /// the blob that holds it and where in the blob's data it lies.
    fn read_pieces(
        &mut self,
        inner: &Inner,
        mut offset: u64,
        len: usize,
        sink: &mut dyn FnMut(&Arc<Blob>, std::ops::Range<usize>),
    ) -> Result<()> {
        let mut left = len;
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > self.len) {
            return Err(StoreError::Invalid(format!(
                "read of {len} bytes at {offset} past the end of stream {} ({} bytes)",
                self.id.0, self.len
            )));
        }
        if self.dirty || !self.buf.is_empty() || !self.in_flight.is_empty() {
            self.flush(inner)?;
        }
        while left > 0 {
            let hit = self.read_row.as_ref().is_some_and(|(start, _, ends)| {
                *start <= offset && ends.last().is_some_and(|&e| offset < e)
            });
            if !hit {
                self.read_row = Some(self.load_row(inner, offset)?);
            }
            let Some((start, refs, ends)) = &self.read_row else {
                unreachable!("row just loaded")
            };
            // The row's chunks this read touches, fetched and checked together.
            let first = ends.partition_point(|&e| e <= offset);
            let read_end = offset + left as u64;
            let last = ends.partition_point(|&e| e < read_end).min(refs.len() - 1);
            let ids: Vec<ChunkId> = refs[first..=last].iter().map(|r| r.id).collect();
            let chunks = inner.read_chunks(&ids)?;
            for (i, (blob, loc)) in (first..=last).zip(chunks) {
                let chunk_start = if i == 0 { *start } else { ends[i - 1] };
                let within = (offset - chunk_start) as usize;
                let n = left.min(refs[i].len as usize - within);
                let from = loc.offset as usize + within;
                sink(&blob, from..from + n);
                left -= n;
                offset += n as u64;
            }
        }
        Ok(())
    }

    fn load_row(&self, inner: &Inner, offset: u64) -> Result<(u64, Vec<ChunkRef>, Vec<u64>)> {
        let id = self.id.0;
        let txn = inner.db.begin_read()?;
        let extents = txn.open_table(EXTENTS)?;
        let (start, refs) = match extents
            .range((id, 0)..=(id, offset))?
            .next_back()
            .transpose()?
        {
            Some((k, v)) => {
                let entries = crate::spans::decode_row(&txn.open_table(SPAN_INDEX)?, v.value())?;
                (k.value().1, inner.expand(&entries)?)
            }
            None => {
                return Err(StoreError::Corrupt(format!(
                    "stream {id}: no extent at {offset}"
                )));
            }
        };
        let mut ends = Vec::with_capacity(refs.len());
        let mut at = start;
        for r in &refs {
            at += u64::from(r.len);
            ends.push(at);
        }
        if at <= offset {
            return Err(StoreError::Corrupt(format!(
                "stream {id}: extents do not cover offset {offset}"
            )));
        }
        Ok((start, refs, ends))
    }

    pub(crate) fn reset_after_delete(&mut self) {
        self.new_spans.clear();
        self.new_span_order.clear();
        self.in_flight.clear();
        self.in_flight_bytes = 0;
        self.len = 0;
        self.buf.clear();
        self.full_rows.clear();
        self.row_start = 0;
        self.tail.clear();
        self.tail_bytes = 0;
        self.unflushed_catalog_bytes = 0;
        self.dirty = false;
        self.sidecar.clear();
        self.chunker.reset();
        self.read_row = None;
    }
}

fn apply_sidecar(
    txn: &redb::WriteTransaction,
    id: u64,
    changes: &BTreeMap<u64, Option<Vec<u8>>>,
    ops: &mut Vec<Op>,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let mut sidecar = txn.open_table(SIDECAR)?;
    for (key, value) in changes {
        match value {
            Some(v) => {
                sidecar.insert((id, *key), v.as_slice())?;
                ops.push(Op::PutSidecar((id, *key), v.clone()));
            }
            None => {
                sidecar.remove((id, *key))?;
                ops.push(Op::DelSidecar((id, *key)));
            }
        }
    }
    Ok(())
}

impl Stream {
    pub fn id(&self) -> StreamId {
        self.state.lock().id
    }

    /// Bytes in the stream, including appended bytes not yet flushed.
    pub fn len(&self) -> u64 {
        self.state.lock().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends bytes. Fails without appending anything if the store is out of space or stopped.
    /// A failure part-way (a catalog error) leaves the stream to be reopened.
    pub fn append(&self, data: &[u8]) -> Result<()> {
        self.admit(|st, inner| st.append(inner, data))
    }

    /// Runs a write that takes new data: refused up front (nothing appended) when the store is
    /// stopped or a pack is waiting for space; a catalog failure part-way stops the store.
    fn admit(&self, write: impl FnOnce(&mut StreamState, &Inner) -> Result<()>) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        self.inner.check_stopped()?;
        self.check_not_pinned()?;
        if let Some(e) = self.inner.upload_error() {
            return Err(e);
        }
        let r = write(&mut self.state.lock(), &self.inner);
        self.inner.stop_on_catalog_error(r)
    }

    /// A pinned stream's chunks are read in place by another store at the locations it was
    /// given (`foreign.rs`): what it references must not change until the pin is lifted.
    fn check_not_pinned(&self) -> Result<()> {
        let id = self.id();
        if self.inner.pinned.read().contains(&id.0) {
            return Err(StoreError::Invalid(format!(
                "stream {} is pinned: another store reads it in place, so it cannot change",
                id.0
            )));
        }
        Ok(())
    }

    /// Marks a record boundary: the current chunk ends here if it is long enough, so records
    /// that repeat elsewhere dedup whole.
    pub fn boundary(&self) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        let r = self.state.lock().boundary(&self.inner);
        self.inner.stop_on_catalog_error(r)
    }

    /// Appends one whole record: `append` then `boundary`, but large records are chunked and
    /// hashed on the store's hash threads while the caller goes on (results apply in order).
    pub fn append_record(&self, data: &[u8]) -> Result<()> {
        self.admit(|st, inner| st.append_record(inner, data, None))
    }

    /// [`Stream::append_record`] of bytes the caller shares (e.g. a SCSI Data-Out buffer): a
    /// record the hash threads take is not copied; they hold a reference until it is applied.
    pub fn append_record_shared(&self, data: bytes::Bytes) -> Result<()> {
        self.admit(|st, inner| st.append_record(inner, &data, Some(&data)))
    }

    /// About how many bytes of memory the catalog rows and span bodies waiting for the next
    /// flush take (reference rows and new bodies; records still being hashed not included).
    /// A caller that never synchronises bounds its memory by flushing when this grows.
    pub fn unflushed_catalog_bytes(&self) -> usize {
        self.state.lock().unflushed_catalog_bytes
    }

    /// Waits for every record still being hashed and applies it to the rows waiting for the
    /// next flush, writing nothing: [`Stream::unflushed_catalog_bytes`] then counts them all.
    pub fn finish_hashing(&self) -> Result<()> {
        self.admit(StreamState::drain)
    }

    /// Writes the appended bytes and sidecar changes to the catalog (not yet durably: call
    /// [`ChunkStore::sync`] for that).
    pub fn flush(&self) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        let _commit = self.inner.commit_lock.read();
        self.inner.check_stopped()?;
        let r = self.state.lock().flush(&self.inner);
        self.inner.stop_on_catalog_error(r)
    }

    /// `flush` then `sync`: a synchronising point for this stream.
    ///
    /// Done in the order that lets the flush place every span body: this stream's chunks go
    /// into its pack, every pack is sealed and named, then the rows and bodies are written and
    /// the catalog committed durably, all under the commit lock held exclusively. Flushing
    /// first stored the bodies whose chunks sat in the open pack as written, and the durable
    /// commit rewrote them placed, leaving their first pages as free space in the catalog file
    /// (`efficiency.md` §29).
    pub fn sync(&self) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        self.inner.check_stopped()?;
        let _commit = self.inner.commit_lock.write();
        let r = self.seal_flush_and_commit();
        self.inner.stop_on_catalog_error(r)
    }

    /// [`Stream::sync`]'s steps; the caller holds the commit lock exclusively.
    fn seal_flush_and_commit(&self) -> Result<()> {
        let mut state = self.state.lock();
        state.drain(&self.inner)?;
        state.emit_buf(&self.inner)?;
        let stored = self.inner.seal_and_store_all();
        // Flushed even when storing failed (a full disk): the rows are then in the catalog,
        // not durable, as a flush before a failed sync left them.
        state.flush(&self.inner)?;
        drop(state);
        stored?;
        self.inner.commit_durably()
    }

    /// Cuts the stream to `len` bytes, committing pending sidecar changes with it.
    pub fn truncate(&self, len: u64) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        let _commit = self.inner.commit_lock.read();
        self.inner.check_stopped()?;
        self.check_not_pinned()?;
        let r = self.state.lock().truncate(&self.inner, len);
        self.inner.stop_on_catalog_error(r)
    }

    /// Reads `out.len()` bytes at `offset`. Data that fails its hash check is never returned.
    pub fn read_at(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        let _commit = self.inner.commit_lock.read();
        let r = self.state.lock().read_at(&self.inner, offset, out);
        self.inner.stop_on_catalog_error(r)
    }

    /// Appends the `len` bytes at `offset` to `out` (as [`Stream::read_at`], without a
    /// zero-filled buffer to copy into first). On error `out` may hold part of them.
    pub fn read_at_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        let _ingest = self.inner.ingest_lock.read();
        let _commit = self.inner.commit_lock.read();
        out.reserve(len);
        let r = self
            .state
            .lock()
            .read_pieces(&self.inner, offset, len, &mut |blob, range| {
                out.extend_from_slice(&blob.data[range]);
            });
        self.inner.stop_on_catalog_error(r)
    }

    /// Appends the `len` bytes at `offset` to `out` as slices of the store's decoded blobs,
    /// without copying them: neighbouring chunks of one blob (a stream's new chunks were
    /// stored together) come out as one slice. For a caller that sends the bytes on as they
    /// are, such as a SCSI Data-In buffer. A slice keeps its whole blob in memory until dropped,
    /// so a slice under a quarter of its blob is copied instead: what a caller holds (Data-In
    /// queued for a client that reads slowly) is never more than four times its bytes. On
    /// error `out` may hold part of the bytes.
    pub fn read_shared(&self, offset: u64, len: usize, out: &mut Vec<bytes::Bytes>) -> Result<()> {
        fn hand_out(blob: &Blob, range: std::ops::Range<usize>) -> bytes::Bytes {
            if range.len() * 4 < blob.data.len() {
                bytes::Bytes::copy_from_slice(&blob.data[range])
            } else {
                blob.data.slice(range)
            }
        }
        let _ingest = self.inner.ingest_lock.read();
        let _commit = self.inner.commit_lock.read();
        let mut run: Option<(Arc<Blob>, std::ops::Range<usize>)> = None;
        let r = self
            .state
            .lock()
            .read_pieces(&self.inner, offset, len, &mut |blob, range| {
                if let Some((last, last_range)) = &mut run {
                    if Arc::ptr_eq(last, blob) && last_range.end == range.start {
                        last_range.end = range.end;
                        return;
                    }
                    out.push(hand_out(last, last_range.clone()));
                }
                run = Some((blob.clone(), range));
            });
        if let Some((last, last_range)) = run {
            out.push(hand_out(&last, last_range));
        }
        self.inner.stop_on_catalog_error(r)
    }

    /// Stages a sidecar change, committed by the next `flush` or `truncate`.
    pub fn set_sidecar(&self, key: u64, value: Option<Vec<u8>>) {
        self.state.lock().sidecar.insert(key, value);
    }

    /// A sidecar value, staged or committed.
    pub fn sidecar(&self, key: u64) -> Result<Option<Vec<u8>>> {
        let st = self.state.lock();
        if let Some(v) = st.sidecar.get(&key) {
            return Ok(v.clone());
        }
        let txn = self.inner.db.begin_read()?;
        let t = txn.open_table(SIDECAR)?;
        Ok(t.get((st.id.0, key))?.map(|v| v.value().to_vec()))
    }

    /// Committed sidecar entries with keys in `range`, merged with staged changes.
    pub fn sidecar_range(&self, range: std::ops::Range<u64>) -> Result<Vec<(u64, Vec<u8>)>> {
        let st = self.state.lock();
        let mut out = BTreeMap::new();
        let txn = self.inner.db.begin_read()?;
        let t = txn.open_table(SIDECAR)?;
        if range.start < range.end {
            for row in t.range((st.id.0, range.start)..(st.id.0, range.end))? {
                let (k, v) = row?;
                out.insert(k.value().1, v.value().to_vec());
            }
        }
        for (k, v) in st.sidecar.range(range) {
            match v {
                Some(v) => out.insert(*k, v.clone()),
                None => out.remove(k),
            };
        }
        Ok(out.into_iter().collect())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        // Records still out for hashing were accepted: apply them so they are not lost if
        // the caller flushed before dropping (and so their chunks reach the pack below).
        let _ = st.drain(&self.inner);
        self.inner.streams.lock().remove(&st.id);
        // Flushed rows (and other streams, by dedup) may name chunks in this stream's open
        // pack: it must reach the back end before the next durable commit.
        let sealed = st.builder.lock().seal();
        drop(st);
        if let Some(pack) = sealed {
            self.inner.submit(pack);
        }
    }
}
