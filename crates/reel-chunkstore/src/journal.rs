//! The catalog journal: every catalog change, as immutable objects in the back end.
//!
//! The local redb catalog is fast to query but lives on one disk. With the journal on
//! (`StoreConfig::journal`, the default for object storage), every change a catalog
//! transaction makes is also recorded as an [`Op`]; the ops gathered between two durable
//! commits form **one group** of journal objects `catalog/journal/<seq:016x>.jrnl`, each
//! written with a create-only put: *pieces* of about [`PIECE_BYTES`] while the ops
//! accumulate (so a synchronising point uploads only the last piece, not everything since
//! the previous one), and the group's last piece *before* the local commit that records its
//! `seq` in the catalog's `meta` table. A piece's flags say whether it opens a group and
//! whether more follow ([`Piece`]). So:
//!
//! - The bucket alone holds everything: replaying the complete groups among journals 1..=n
//!   into an empty catalog gives the catalog as of the durable commit that ended the last of
//!   them ([`crate::ChunkStore::open`] does this whenever the back end holds journals newer
//!   than the local catalog, which is recovery on a fresh directory and the catch-up after a
//!   crash between the journal put and the local commit).
//! - A group never ended (the node stopped between two synchronising points) is skipped
//!   whole: its pieces describe a state no synchronising point acknowledged, and may name
//!   chunks whose rows were never journaled. The next group starts with a piece flagged
//!   first, after the skipped sequence numbers (they stay taken).
//! - Sequence numbers are the fence between writers: two nodes that both saw journal n race
//!   for n + 1 and exactly one create-only put wins (back-end contract); the loser stops.
//! - Durable order: a journal names only packs stored before it was put (the store puts packs,
//!   then the journal; a write-back cache uploads a `catalog/` object only after everything
//!   queued before it), and packs are deleted only after the journal that dropped them.
//!
//! Object layout (all integers little-endian):
//!
//! ```text
//! journal = magic "REELJRNL" (8) | version u16 | flags u16 | seq u64 | op count u32
//!         | payload length u32 | payload (zstd of the ops) | BLAKE3 of everything before (32)
//! op      = table u8 | kind u8 (0 put, 1 delete, 2 delete range) | key | value (puts only)
//! key     = [u8; 32] (chunks, spans) | u64 (packs, pack_ids, streams; v2: foreign packs, pins)
//!         | none (v3: the pack-id floor, table 11, whose value is a bare u64;
//!           v5: the chunker parameters, table 12, whose value is four bare u32)
//!         | (u64, u64) (extents, sidecar) | len u32 + bytes (records)
//! flags   = 1 payload compressed | 2 more pieces of this group follow (v4)
//!         | 4 continues a group opened by an earlier piece (v4); 0 = a whole group in one
//! range   = u64 stream | u64 first | u64 last (inclusive; extents and sidecar only)
//! value   = len u32 + bytes (streams: the length as 8 bytes)
//! ```

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use reel_backend::Key;

use crate::Result;
use crate::catalog::{
    EXTENTS, FOREIGN_PACKS, LEGACY_CHUNKS, META, META_PACK_ID_FLOOR, PACKS, PINS, RECORDS, SIDECAR,
    STREAMS,
};
use crate::chunk_index;
use crate::chunker::ChunkerParams;
use crate::format::{self, FormatError};

const MAGIC: &[u8; 8] = b"REELJRNL";
/// 2 added the foreign-pack and pin tables, 3 the pack-id floor, 4 groups of pieces, 5 the
/// chunker parameters, 6 span bodies that hold pieces (catalog format 3: a reel that reads
/// version 5 would take them for damage, so it refuses the object instead), 7 chunk locations
/// that name checked blobs (catalog format 4, for the same reason), 8 no chunk rows: the chunk
/// index is derived from the packs' names (`chunk_index.rs`), so a pack-names op also indexes
/// its chunks, and a reel that reads version 7 would lose the index, 9 span bodies journaled
/// placed (runs of positions in packs' names, `efficiency.md` §37: a reel that reads version 8
/// may predate placed bodies, catalog format 8, and would take them for damage, so it refuses
/// the object instead), 10 compact extent rows and bodies of pieces (catalog format 9: spans
/// named by their ids' first 8 bytes; a reel that reads version 9 would take them for damage).
/// Every older object is read: its ops keep their meaning ([`Op::LegacyPutPackIds`]).
const VERSION: u16 = 10;
/// The first version whose pack-names ops index the pack's chunks.
const DERIVED_INDEX_VERSION: u16 = 8;
const F_COMPRESSED: u16 = 1;
const F_MORE_FOLLOW: u16 = 2;
const F_CONTINUES: u16 = 4;
/// The store writes a piece once its pending ops encode to about this many bytes.
pub const PIECE_BYTES: usize = 8 << 20;

/// Where a journal object sits in its group (the ops between two durable commits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Opens a group: any unended group before it was abandoned.
    pub first: bool,
    /// Ends the group: a durable commit.
    pub last: bool,
}

impl Piece {
    /// A group in one object (every object before version 4).
    pub const WHOLE: Piece = Piece {
        first: true,
        last: true,
    };
}
const HEADER_LEN: usize = 8 + 2 + 2 + 8 + 4 + 4;
const HASH_LEN: usize = 32;
/// Refuses absurd payloads before allocating for them.
const MAX_PAYLOAD: usize = 1 << 30;

/// Where journal objects live in the back end.
pub const JOURNAL_PREFIX: &str = "catalog/journal/";

pub fn journal_key(seq: u64) -> Key {
    // A fixed ASCII pattern is always a valid key.
    Key::new(format!("{JOURNAL_PREFIX}{seq:016x}.jrnl")).expect("valid journal key")
}

pub fn parse_journal_key(key: &str) -> Option<u64> {
    let hex = key.strip_prefix(JOURNAL_PREFIX)?.strip_suffix(".jrnl")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// One catalog change, exactly as a transaction made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Before version 8: a chunk's index row (id → encoded location). Replayed into the
    /// legacy table, converted to the derived index before anything else reads it
    /// (`chunk_index::convert_legacy`).
    PutChunk([u8; 32], Vec<u8>),
    DelChunk([u8; 32]),
    PutPack(u64, Vec<u8>),
    DelPack(u64),
    /// A pack's names; from version 8 also its chunks' index rows (`chunk_index::put_names`).
    PutPackIds(u64, Vec<u8>),
    DelPackIds(u64),
    /// A pack-names op of an object before version 8, which carried the index in chunk ops:
    /// only the names change. Encoded as the op it was read from.
    LegacyPutPackIds(u64, Vec<u8>),
    LegacyDelPackIds(u64),
    PutStream(u64, u64),
    DelStream(u64),
    PutExtent((u64, u64), Vec<u8>),
    /// Every extent row of `stream` starting in `first..=last`.
    DelExtents {
        stream: u64,
        first: u64,
        last: u64,
    },
    PutSpan([u8; 32], Vec<u8>),
    DelSpan([u8; 32]),
    PutSidecar((u64, u64), Vec<u8>),
    DelSidecar((u64, u64)),
    DelSidecars {
        stream: u64,
        first: u64,
        last: u64,
    },
    PutRecord(Vec<u8>, Vec<u8>),
    DelRecord(Vec<u8>),
    /// Version 2: a pack another store holds (`catalog::FOREIGN_PACKS`).
    PutForeignPack(u64, Vec<u8>),
    DelForeignPack(u64),
    /// Version 2: a stream another store reads in place (`catalog::PINS`).
    PutPin(u64, Vec<u8>),
    DelPin(u64),
    /// Version 3: `meta.pack_id_floor` rises to at least this (`catalog::META_PACK_ID_FLOOR`).
    RaisePackIdFloor(u64),
    /// Version 5: the chunker parameters the store cuts with (`catalog::META_CHUNK_AVG`).
    SetChunker(ChunkerParams),
    /// Version 9, in checkpoints (and a first journal object that holds a whole catalog): the
    /// names of a pack reclaim dropped, which placed span bodies still read
    /// (`pack_names::RETIRED_NAMES`).
    PutRetiredNames(u64, Vec<u8>),
}

// Table tags on the wire: fixed forever (a new table gets a new tag).
const T_CHUNKS: u8 = 1;
const T_PACKS: u8 = 2;
const T_PACK_IDS: u8 = 3;
const T_STREAMS: u8 = 4;
const T_EXTENTS: u8 = 5;
const T_SPANS: u8 = 6;
const T_SIDECAR: u8 = 7;
const T_RECORDS: u8 = 8;
const T_FOREIGN_PACKS: u8 = 9;
const T_PINS: u8 = 10;
const T_PACK_ID_FLOOR: u8 = 11;
const T_CHUNKER: u8 = 12;
const T_RETIRED_NAMES: u8 = 13;
const K_PUT: u8 = 0;
const K_DEL: u8 = 1;
const K_DEL_RANGE: u8 = 2;

impl Op {
    fn encode(&self, out: &mut Vec<u8>) {
        fn value(out: &mut Vec<u8>, v: &[u8]) {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        fn pair(out: &mut Vec<u8>, k: (u64, u64)) {
            out.extend_from_slice(&k.0.to_le_bytes());
            out.extend_from_slice(&k.1.to_le_bytes());
        }
        fn range(out: &mut Vec<u8>, stream: u64, first: u64, last: u64) {
            for n in [stream, first, last] {
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
        match self {
            Op::PutChunk(id, v) => {
                out.extend_from_slice(&[T_CHUNKS, K_PUT]);
                out.extend_from_slice(id);
                value(out, v);
            }
            Op::DelChunk(id) => {
                out.extend_from_slice(&[T_CHUNKS, K_DEL]);
                out.extend_from_slice(id);
            }
            Op::PutPack(id, v) => {
                out.extend_from_slice(&[T_PACKS, K_PUT]);
                out.extend_from_slice(&id.to_le_bytes());
                value(out, v);
            }
            Op::DelPack(id) => {
                out.extend_from_slice(&[T_PACKS, K_DEL]);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::PutPackIds(id, v) | Op::LegacyPutPackIds(id, v) => {
                out.extend_from_slice(&[T_PACK_IDS, K_PUT]);
                out.extend_from_slice(&id.to_le_bytes());
                value(out, v);
            }
            Op::DelPackIds(id) | Op::LegacyDelPackIds(id) => {
                out.extend_from_slice(&[T_PACK_IDS, K_DEL]);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::PutStream(id, len) => {
                out.extend_from_slice(&[T_STREAMS, K_PUT]);
                out.extend_from_slice(&id.to_le_bytes());
                value(out, &len.to_le_bytes());
            }
            Op::DelStream(id) => {
                out.extend_from_slice(&[T_STREAMS, K_DEL]);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::PutExtent(k, v) => {
                out.extend_from_slice(&[T_EXTENTS, K_PUT]);
                pair(out, *k);
                value(out, v);
            }
            Op::DelExtents {
                stream,
                first,
                last,
            } => {
                out.extend_from_slice(&[T_EXTENTS, K_DEL_RANGE]);
                range(out, *stream, *first, *last);
            }
            Op::PutSpan(id, v) => {
                out.extend_from_slice(&[T_SPANS, K_PUT]);
                out.extend_from_slice(id);
                value(out, v);
            }
            Op::DelSpan(id) => {
                out.extend_from_slice(&[T_SPANS, K_DEL]);
                out.extend_from_slice(id);
            }
            Op::PutSidecar(k, v) => {
                out.extend_from_slice(&[T_SIDECAR, K_PUT]);
                pair(out, *k);
                value(out, v);
            }
            Op::DelSidecar(k) => {
                out.extend_from_slice(&[T_SIDECAR, K_DEL]);
                pair(out, *k);
            }
            Op::DelSidecars {
                stream,
                first,
                last,
            } => {
                out.extend_from_slice(&[T_SIDECAR, K_DEL_RANGE]);
                range(out, *stream, *first, *last);
            }
            Op::PutRecord(k, v) => {
                out.extend_from_slice(&[T_RECORDS, K_PUT]);
                value(out, k);
                value(out, v);
            }
            Op::DelRecord(k) => {
                out.extend_from_slice(&[T_RECORDS, K_DEL]);
                value(out, k);
            }
            Op::PutForeignPack(id, v) => {
                out.extend_from_slice(&[T_FOREIGN_PACKS, K_PUT]);
                out.extend_from_slice(&id.to_le_bytes());
                value(out, v);
            }
            Op::DelForeignPack(id) => {
                out.extend_from_slice(&[T_FOREIGN_PACKS, K_DEL]);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::PutPin(id, v) => {
                out.extend_from_slice(&[T_PINS, K_PUT]);
                out.extend_from_slice(&id.to_le_bytes());
                value(out, v);
            }
            Op::DelPin(id) => {
                out.extend_from_slice(&[T_PINS, K_DEL]);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::PutRetiredNames(id, v) => {
                out.extend_from_slice(&[T_RETIRED_NAMES, K_PUT]);
                out.extend_from_slice(&id.to_le_bytes());
                value(out, v);
            }
            Op::RaisePackIdFloor(floor) => {
                out.extend_from_slice(&[T_PACK_ID_FLOOR, K_PUT]);
                out.extend_from_slice(&floor.to_le_bytes());
            }
            Op::SetChunker(p) => {
                out.extend_from_slice(&[T_CHUNKER, K_PUT]);
                for v in [p.min, p.avg, p.max, p.boundary_min] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Op, FormatError> {
        let table = r.u8()?;
        let kind = r.u8()?;
        let op = match (table, kind) {
            (T_CHUNKS, K_PUT) => Op::PutChunk(r.id()?, r.value()?),
            (T_CHUNKS, K_DEL) => Op::DelChunk(r.id()?),
            (T_PACKS, K_PUT) => Op::PutPack(r.u64()?, r.value()?),
            (T_PACKS, K_DEL) => Op::DelPack(r.u64()?),
            (T_PACK_IDS, K_PUT) => Op::PutPackIds(r.u64()?, r.value()?),
            (T_PACK_IDS, K_DEL) => Op::DelPackIds(r.u64()?),
            (T_STREAMS, K_PUT) => {
                let id = r.u64()?;
                let v = r.value()?;
                let len: [u8; 8] = v
                    .as_slice()
                    .try_into()
                    .map_err(|_| r.bad(format!("stream length of {} bytes", v.len())))?;
                Op::PutStream(id, u64::from_le_bytes(len))
            }
            (T_STREAMS, K_DEL) => Op::DelStream(r.u64()?),
            (T_EXTENTS, K_PUT) => Op::PutExtent((r.u64()?, r.u64()?), r.value()?),
            (T_EXTENTS, K_DEL_RANGE) => Op::DelExtents {
                stream: r.u64()?,
                first: r.u64()?,
                last: r.u64()?,
            },
            (T_SPANS, K_PUT) => Op::PutSpan(r.id()?, r.value()?),
            (T_SPANS, K_DEL) => Op::DelSpan(r.id()?),
            (T_SIDECAR, K_PUT) => Op::PutSidecar((r.u64()?, r.u64()?), r.value()?),
            (T_SIDECAR, K_DEL) => Op::DelSidecar((r.u64()?, r.u64()?)),
            (T_SIDECAR, K_DEL_RANGE) => Op::DelSidecars {
                stream: r.u64()?,
                first: r.u64()?,
                last: r.u64()?,
            },
            (T_RECORDS, K_PUT) => Op::PutRecord(r.value()?, r.value()?),
            (T_RECORDS, K_DEL) => Op::DelRecord(r.value()?),
            (T_FOREIGN_PACKS, K_PUT) => Op::PutForeignPack(r.u64()?, r.value()?),
            (T_FOREIGN_PACKS, K_DEL) => Op::DelForeignPack(r.u64()?),
            (T_PINS, K_PUT) => Op::PutPin(r.u64()?, r.value()?),
            (T_PINS, K_DEL) => Op::DelPin(r.u64()?),
            (T_PACK_ID_FLOOR, K_PUT) => Op::RaisePackIdFloor(r.u64()?),
            (T_RETIRED_NAMES, K_PUT) => Op::PutRetiredNames(r.u64()?, r.value()?),
            (T_CHUNKER, K_PUT) => {
                let p = ChunkerParams {
                    min: r.u32()?,
                    avg: r.u32()?,
                    max: r.u32()?,
                    boundary_min: r.u32()?,
                };
                p.validate()
                    .map_err(|why| r.bad(format!("chunker parameters: {why}")))?;
                Op::SetChunker(p)
            }
            _ => return Err(r.bad(format!("unknown op: table {table}, kind {kind}"))),
        };
        Ok(op)
    }
}

/// Applies `ops` in order to the catalog tables of `txn` (replay).
pub fn apply(txn: &WriteTransaction, ops: &[Op]) -> Result<()> {
    if ops
        .iter()
        .any(|op| matches!(op, Op::PutPackIds(..) | Op::DelPackIds(_)))
    {
        chunk_index::convert_legacy(txn)?;
    }
    let mut chunks = txn.open_table(LEGACY_CHUNKS)?;
    let mut packs = txn.open_table(PACKS)?;
    let mut index = chunk_index::Tables::open(txn)?;
    let mut streams = txn.open_table(STREAMS)?;
    let mut extents = txn.open_table(EXTENTS)?;
    let mut spans = crate::spans::write(txn)?;
    let mut sidecar = txn.open_table(SIDECAR)?;
    let mut records = txn.open_table(RECORDS)?;
    let mut foreign = txn.open_table(FOREIGN_PACKS)?;
    let mut pins = txn.open_table(PINS)?;
    for op in ops {
        match op {
            Op::PutChunk(id, v) => {
                chunks.insert(id, v.as_slice())?;
            }
            Op::DelChunk(id) => {
                chunks.remove(id)?;
            }
            Op::PutPack(id, v) => {
                packs.insert(*id, v.as_slice())?;
            }
            Op::DelPack(id) => {
                packs.remove(*id)?;
            }
            Op::PutPackIds(id, v) => {
                chunk_index::put_names(&mut index, *id, &format::decode_pack_ids(v)?)?;
            }
            Op::DelPackIds(id) => chunk_index::delete_names(&mut index, *id)?,
            Op::LegacyPutPackIds(id, v) => {
                crate::pack_names::put(&mut index.names_table, *id, v)?;
            }
            Op::LegacyDelPackIds(id) => {
                crate::pack_names::remove(&mut index.names_table, *id)?;
            }
            Op::PutRetiredNames(id, v) => crate::pack_names::put(&mut index.retired, *id, v)?,
            Op::PutStream(id, len) => {
                streams.insert(*id, *len)?;
            }
            Op::DelStream(id) => {
                streams.remove(*id)?;
            }
            Op::PutExtent(k, v) => {
                extents.insert(*k, v.as_slice())?;
            }
            Op::DelExtents {
                stream,
                first,
                last,
            } => {
                if first <= last {
                    extents.retain_in((*stream, *first)..=(*stream, *last), |_, _| false)?;
                }
            }
            Op::PutSpan(id, v) => {
                spans.insert(id, v.as_slice())?;
            }
            Op::DelSpan(id) => {
                spans.remove(id)?;
            }
            Op::PutSidecar(k, v) => {
                sidecar.insert(*k, v.as_slice())?;
            }
            Op::DelSidecar(k) => {
                sidecar.remove(*k)?;
            }
            Op::DelSidecars {
                stream,
                first,
                last,
            } => {
                if first <= last {
                    sidecar.retain_in((*stream, *first)..=(*stream, *last), |_, _| false)?;
                }
            }
            Op::PutRecord(k, v) => {
                records.insert(k.as_slice(), v.as_slice())?;
            }
            Op::DelRecord(k) => {
                records.remove(k.as_slice())?;
            }
            Op::PutForeignPack(id, v) => {
                foreign.insert(*id, v.as_slice())?;
            }
            Op::DelForeignPack(id) => {
                foreign.remove(*id)?;
            }
            Op::PutPin(id, v) => {
                pins.insert(*id, v.as_slice())?;
            }
            Op::DelPin(id) => {
                pins.remove(*id)?;
            }
            Op::RaisePackIdFloor(floor) => {
                let mut meta = txn.open_table(META)?;
                let now = meta.get(META_PACK_ID_FLOOR)?.map_or(0, |v| v.value());
                meta.insert(META_PACK_ID_FLOOR, now.max(*floor))?;
            }
            Op::SetChunker(p) => crate::catalog::put_chunker(&mut txn.open_table(META)?, *p)?,
        }
    }
    Ok(())
}

/// How [`dump_into`] hands over span bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Every body as written, and no retired names: the catalog's content, the same whatever
    /// a node placed (`ChunkStore::catalog_fingerprint`).
    AsWritten,
    /// Every body as stored (placed ones as runs of positions in packs' names) with the
    /// retired names they may read: what a checkpoint carries, a fifth of the bytes for the
    /// bodies (`efficiency.md` §38). The names come before the bodies that read them.
    AsStored,
}

/// Every row of every journaled table as put ops, in table then key order, in `form`:
/// [`Form::AsWritten`] is what a replay of the whole journal must reproduce (tests compare two
/// catalogs with it). The pack-id floor is left out: it is not content, and every opening
/// raises it.
pub fn dump(db: &redb::Database, form: Form) -> Result<Vec<Op>> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let mut out = Vec::new();
    dump_into(&txn, form, &mut |op| {
        out.push(op);
        Ok(())
    })?;
    Ok(out)
}

/// Hands every row of every journaled table of `txn` to `sink` as a put op, in table then key
/// order, one at a time (a checkpoint of a large catalog never holds it whole).
pub fn dump_into(
    txn: &redb::ReadTransaction,
    form: Form,
    sink: &mut dyn FnMut(Op) -> Result<()>,
) -> Result<()> {
    // The chunk index is not dumped: the pack-names ops rebuild it. A legacy row not yet
    // converted would be lost, so there must be none (the store converts them on open).
    if !txn.open_table(LEGACY_CHUNKS)?.is_empty()? {
        return Err(crate::StoreError::Corrupt(
            "the catalog holds format-4 chunk rows not yet converted".into(),
        ));
    }
    for row in txn.open_table(PACKS)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutPack(k.value(), v.value().to_vec()))?;
    }
    crate::pack_names::for_each(
        &txn.open_table(crate::pack_names::PACK_NAMES)?,
        |pack, names| sink(Op::PutPackIds(pack, names.to_vec())),
    )?;
    if form == Form::AsStored {
        crate::pack_names::for_each(
            &txn.open_table(crate::pack_names::RETIRED_NAMES)?,
            |pack, names| sink(Op::PutRetiredNames(pack, names.to_vec())),
        )?;
    }
    for row in txn.open_table(STREAMS)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutStream(k.value(), v.value()))?;
    }
    for row in txn.open_table(EXTENTS)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutExtent(k.value(), v.value().to_vec()))?;
    }
    let spans = crate::spans::read(txn)?;
    let put_span = &mut |id: &[u8; 32], body: &[u8]| sink(Op::PutSpan(*id, body.to_vec()));
    match form {
        Form::AsWritten => spans.for_each(put_span)?,
        Form::AsStored => spans.for_each_stored(put_span)?,
    }
    for row in txn.open_table(SIDECAR)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutSidecar(k.value(), v.value().to_vec()))?;
    }
    for row in txn.open_table(RECORDS)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutRecord(k.value().to_vec(), v.value().to_vec()))?;
    }
    for row in txn.open_table(FOREIGN_PACKS)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutForeignPack(k.value(), v.value().to_vec()))?;
    }
    for row in txn.open_table(PINS)?.iter()? {
        let (k, v) = row?;
        sink(Op::PutPin(k.value(), v.value().to_vec()))?;
    }
    Ok(())
}

/// Empties every journaled table of `txn` (a checkpoint is restored into an empty catalog, so
/// rows a stale local catalog holds and the checkpoint does not cannot survive it).
pub fn clear(txn: &WriteTransaction) -> Result<()> {
    txn.open_table(LEGACY_CHUNKS)?.retain(|_, _| false)?;
    txn.open_table(chunk_index::INDEX)?.retain(|_, _| false)?;
    txn.open_table(chunk_index::RECENT)?.retain(|_, _| false)?;
    txn.open_table(chunk_index::INDEX_FULL)?
        .retain(|_, _| false)?;
    txn.open_table(PACKS)?.retain(|_, _| false)?;
    txn.open_table(crate::pack_names::PACK_NAMES)?
        .retain(|_, _| false)?;
    txn.open_table(crate::pack_names::RETIRED_NAMES)?
        .retain(|_, _| false)?;
    txn.open_table(STREAMS)?.retain(|_, _| false)?;
    txn.open_table(EXTENTS)?.retain(|_, _| false)?;
    crate::spans::write(txn)?.clear()?;
    txn.open_table(SIDECAR)?.retain(|_, _| false)?;
    txn.open_table(RECORDS)?.retain(|_, _| false)?;
    txn.open_table(FOREIGN_PACKS)?.retain(|_, _| false)?;
    txn.open_table(PINS)?.retain(|_, _| false)?;
    Ok(())
}

/// Appends `op`'s encoding to `raw`, the payload [`encode_raw`] takes.
pub fn append_op(raw: &mut Vec<u8>, op: &Op) {
    op.encode(raw);
}

/// Encodes journal object `seq` holding `ops`, a whole group.
pub fn encode(seq: u64, ops: &[Op]) -> Vec<u8> {
    let mut raw = Vec::new();
    for op in ops {
        op.encode(&mut raw);
    }
    encode_raw(seq, &raw, ops.len() as u32, Piece::WHOLE)
}

/// The window of [`compress_ops`]: a whole checkpoint part ([`crate::checkpoint::PART_RAW_BYTES`]).
const COMPRESS_WINDOW_LOG: u32 = 25;

/// zstd level 1 with long-distance matching over a window the size of the largest object.
/// Chunk ids do not compress, but the references of a repeated stretch of a backup repeat
/// whole, megabytes apart: the default window of level 1 (512 KiB) misses them, long-distance
/// matching does not (a journal object of tapewrite data at 1 MiB records, R = 8: 15.0 MB at
/// level 1, 4.9 MB with it, at the same speed; docs/design/efficiency.md §16). The frames are
/// plain zstd, read as before: a window of 2^25 is within every decoder's default limit (2^27).
fn compress_ops(raw: &[u8]) -> std::io::Result<Vec<u8>> {
    use zstd::stream::raw::CParameter;
    let mut z = zstd::bulk::Compressor::new(1)?;
    z.set_parameter(CParameter::EnableLongDistanceMatching(true))?;
    z.set_parameter(CParameter::WindowLog(COMPRESS_WINDOW_LOG))?;
    z.compress(raw)
}

/// Encodes journal object `seq`: `count` ops already encoded into `raw` by [`append_op`].
pub fn encode_raw(seq: u64, raw: &[u8], count: u32, piece: Piece) -> Vec<u8> {
    let compressed_payload = compress_ops(raw).ok();
    let (payload, compressed) = match &compressed_payload {
        Some(c) if c.len() < raw.len() => (c.as_slice(), true),
        _ => (raw, false),
    };
    let mut flags = if compressed { F_COMPRESSED } else { 0 };
    if !piece.last {
        flags |= F_MORE_FOLLOW;
    }
    if !piece.first {
        flags |= F_CONTINUES;
    }
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + HASH_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    let hash = blake3::hash(&out);
    out.extend_from_slice(hash.as_bytes());
    out
}

/// Decodes a journal object that is a whole group (an exported stream's bundle, or a test);
/// `expected_seq` is the sequence its key names (an object stored under another number is
/// refused: it would replay out of order).
pub fn decode(bytes: &[u8], expected_seq: u64) -> Result<Vec<Op>, FormatError> {
    let (ops, piece) = decode_piece(bytes, expected_seq)?;
    if piece != Piece::WHOLE {
        return Err(FormatError {
            what: "catalog journal",
            reason: format!("a piece of a larger group ({piece:?}), not a whole one"),
        });
    }
    Ok(ops)
}

/// The header's fields: magic, version, flags and sequence checked.
fn read_header(r: &mut Reader<'_>, expected_seq: u64) -> Result<(u16, u16, Piece), FormatError> {
    let bad = |reason: String| FormatError {
        what: "catalog journal",
        reason,
    };
    if r.take(8)? != MAGIC {
        return Err(bad("bad magic".into()));
    }
    let version = r.u16()?;
    if version == 0 || version > VERSION {
        return Err(bad(format!(
            "version {version} (this reel reads versions 1 to {VERSION})"
        )));
    }
    let flags = r.u16()?;
    let known = if version >= 4 {
        F_COMPRESSED | F_MORE_FOLLOW | F_CONTINUES
    } else {
        F_COMPRESSED
    };
    if flags & !known != 0 {
        return Err(bad(format!("unknown flags {flags:#x}")));
    }
    let seq = r.u64()?;
    if seq != expected_seq {
        return Err(bad(format!(
            "holds sequence {seq} but is stored as {expected_seq}"
        )));
    }
    let piece = Piece {
        first: flags & F_CONTINUES == 0,
        last: flags & F_MORE_FOLLOW == 0,
    };
    Ok((version, flags, piece))
}

/// Where journal object `expected_seq` sits in its group, from its first [`PEEK_LEN`] bytes
/// (not checksummed here: [`decode_piece`] checks the whole object before its ops are used).
pub fn peek_piece(header: &[u8], expected_seq: u64) -> Result<Piece, FormatError> {
    let mut r = Reader {
        data: header,
        at: 0,
        what: "catalog journal header",
    };
    Ok(read_header(&mut r, expected_seq)?.2)
}

/// Bytes [`peek_piece`] reads.
pub const PEEK_LEN: usize = 8 + 2 + 2 + 8;

/// Decodes a journal object and where it sits in its group.
pub fn decode_piece(bytes: &[u8], expected_seq: u64) -> Result<(Vec<Op>, Piece), FormatError> {
    let bad = |reason: String| FormatError {
        what: "catalog journal",
        reason,
    };
    if bytes.len() < HEADER_LEN + HASH_LEN {
        return Err(bad(format!("{} bytes is too short", bytes.len())));
    }
    let (body, hash) = bytes.split_at(bytes.len() - HASH_LEN);
    if blake3::hash(body).as_bytes() != hash {
        return Err(bad("checksum mismatch".into()));
    }
    let mut r = Reader {
        data: body,
        at: 0,
        what: "catalog journal",
    };
    let (version, flags, piece) = read_header(&mut r, expected_seq)?;
    let count = r.u32()? as usize;
    let len = r.u32()? as usize;
    let payload = r.take(len)?;
    if r.at != body.len() {
        return Err(bad("bytes after the payload".into()));
    }
    let raw = if flags & F_COMPRESSED != 0 {
        zstd::bulk::decompress(payload, MAX_PAYLOAD).map_err(|e| bad(format!("payload: {e}")))?
    } else {
        payload.to_vec()
    };
    let mut r = Reader {
        data: &raw,
        at: 0,
        what: "catalog journal op",
    };
    // Every op is at least 10 bytes: the count cannot ask for more than that allows.
    let mut ops = Vec::with_capacity(count.min(raw.len() / 10 + 1));
    for _ in 0..count {
        let op = Op::decode(&mut r)?;
        ops.push(match op {
            Op::PutPackIds(id, v) if version < DERIVED_INDEX_VERSION => Op::LegacyPutPackIds(id, v),
            Op::DelPackIds(id) if version < DERIVED_INDEX_VERSION => Op::LegacyDelPackIds(id),
            op => op,
        });
    }
    if r.at != raw.len() {
        return Err(bad(format!("{} bytes after {count} ops", raw.len() - r.at)));
    }
    Ok((ops, piece))
}

/// Little-endian cursor over untrusted bytes.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn bad(&self, reason: String) -> FormatError {
        FormatError {
            what: self.what,
            reason,
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| self.bad(format!("truncated at byte {}", self.at)))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FormatError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn id(&mut self) -> Result<[u8; 32], FormatError> {
        let mut a = [0u8; 32];
        a.copy_from_slice(self.take(32)?);
        Ok(a)
    }
    fn value(&mut self) -> Result<Vec<u8>, FormatError> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }
}

/// Entry points for `fuzz/fuzz_targets/journal.rs` (not an API).
#[doc(hidden)]
pub mod fuzzing {
    use super::{HEADER_LEN, Op, decode, decode_piece, encode, encode_raw};

    /// `ops` as an object of the current version reads them back: re-encoding writes the
    /// current version, where a pack-names op also indexes (nothing but this check re-encodes
    /// ops it read).
    fn as_current(ops: &[Op]) -> Vec<Op> {
        ops.iter()
            .map(|op| match op {
                Op::LegacyPutPackIds(id, v) => Op::PutPackIds(*id, v.clone()),
                Op::LegacyDelPackIds(id) => Op::DelPackIds(*id),
                other => other.clone(),
            })
            .collect()
    }

    /// Decodes `data` as stored, then again with a valid checksum appended (random bytes almost
    /// never carry a right BLAKE3, which would keep the fuzzer out of the parser behind it).
    /// Whatever decodes must survive an encode/decode round trip unchanged (but for
    /// [`as_current`]).
    pub fn decode_anything(data: &[u8]) {
        // The sequence the header claims, so the "stored under another number" check passes.
        let seq = |b: &[u8]| {
            b.get(12..20)
                .map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
        };
        let _ = decode(data, seq(data));
        let mut sealed = data.to_vec();
        sealed.extend_from_slice(blake3::hash(data).as_bytes());
        if let Ok((ops, piece)) = decode_piece(&sealed, seq(&sealed)) {
            let mut raw = Vec::new();
            for op in &ops {
                super::append_op(&mut raw, op);
            }
            let again = decode_piece(
                &encode_raw(seq(&sealed), &raw, ops.len() as u32, piece),
                seq(&sealed),
            )
            .expect("a re-encoded piece decodes");
            assert_eq!(
                again,
                (as_current(&ops), piece),
                "round trip changed the piece"
            );
        }
        if let Ok(ops) = decode(&sealed, seq(&sealed)) {
            // A decodable header is at least HEADER_LEN bytes, so seq() read a real field.
            assert!(data.len() >= HEADER_LEN);
            let again = decode(&encode(seq(&sealed), &ops), seq(&sealed))
                .expect("a re-encoded journal decodes");
            assert_eq!(again, as_current(&ops), "round trip changed the ops");
            // The same ops as an exported stream's bundle: checked, never trusted.
            crate::foreign::check_bundle(&encode(0, &ops));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_op() -> impl Strategy<Value = Op> {
        let id = any::<[u8; 32]>();
        let bytes = proptest::collection::vec(any::<u8>(), 0..64);
        prop_oneof![
            (id, bytes.clone()).prop_map(|(i, v)| Op::PutChunk(i, v)),
            id.prop_map(Op::DelChunk),
            (any::<u64>(), bytes.clone()).prop_map(|(i, v)| Op::PutPack(i, v)),
            any::<u64>().prop_map(Op::DelPack),
            (any::<u64>(), bytes.clone()).prop_map(|(i, v)| Op::PutPackIds(i, v)),
            any::<u64>().prop_map(Op::DelPackIds),
            (any::<u64>(), any::<u64>()).prop_map(|(i, l)| Op::PutStream(i, l)),
            any::<u64>().prop_map(Op::DelStream),
            (any::<(u64, u64)>(), bytes.clone()).prop_map(|(k, v)| Op::PutExtent(k, v)),
            any::<(u64, u64, u64)>().prop_map(|(stream, first, last)| Op::DelExtents {
                stream,
                first,
                last
            }),
            (id, bytes.clone()).prop_map(|(i, v)| Op::PutSpan(i, v)),
            id.prop_map(Op::DelSpan),
            (any::<(u64, u64)>(), bytes.clone()).prop_map(|(k, v)| Op::PutSidecar(k, v)),
            any::<(u64, u64)>().prop_map(Op::DelSidecar),
            any::<(u64, u64, u64)>().prop_map(|(stream, first, last)| Op::DelSidecars {
                stream,
                first,
                last
            }),
            (bytes.clone(), bytes.clone()).prop_map(|(k, v)| Op::PutRecord(k, v)),
            bytes.clone().prop_map(Op::DelRecord),
            (any::<u64>(), bytes.clone()).prop_map(|(i, v)| Op::PutForeignPack(i, v)),
            any::<u64>().prop_map(Op::DelForeignPack),
            (any::<u64>(), bytes.clone()).prop_map(|(i, v)| Op::PutPin(i, v)),
            (any::<u64>(), bytes).prop_map(|(i, v)| Op::PutRetiredNames(i, v)),
            any::<u64>().prop_map(Op::DelPin),
            any::<u64>().prop_map(Op::RaisePackIdFloor),
            (8u32..=20).prop_map(|bits| Op::SetChunker(ChunkerParams::with_avg(1 << bits))),
        ]
    }

    proptest! {
        #[test]
        fn journal_roundtrips(seq in any::<u64>(), ops in proptest::collection::vec(arb_op(), 0..40)) {
            let bytes = encode(seq, &ops);
            prop_assert_eq!(decode(&bytes, seq).unwrap(), ops);
        }

        #[test]
        fn pieces_roundtrip_with_their_place_in_the_group(
            seq in any::<u64>(),
            ops in proptest::collection::vec(arb_op(), 0..20),
            first in any::<bool>(),
            last in any::<bool>(),
        ) {
            let mut raw = Vec::new();
            for op in &ops {
                append_op(&mut raw, op);
            }
            let piece = Piece { first, last };
            let bytes = encode_raw(seq, &raw, ops.len() as u32, piece);
            prop_assert_eq!(peek_piece(&bytes[..PEEK_LEN], seq).unwrap(), piece);
            prop_assert_eq!(decode_piece(&bytes, seq).unwrap(), (ops.clone(), piece));
            // Only a whole group passes where one object must stand alone (bundles).
            prop_assert_eq!(decode(&bytes, seq).is_ok(), piece == Piece::WHOLE);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), seq in 0u64..4) {
            let _ = decode(&bytes, seq);
        }

        #[test]
        fn any_flipped_bit_is_refused(ops in proptest::collection::vec(arb_op(), 1..10), at in any::<usize>(), bit in 0u8..8) {
            let mut bytes = encode(7, &ops);
            let i = at % bytes.len();
            bytes[i] ^= 1 << bit;
            prop_assert!(decode(&bytes, 7).is_err());
        }
    }

    #[test]
    fn a_replayed_pack_id_floor_only_rises() {
        use redb::ReadableDatabase;
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        for floor in [10u64 << 32, 3 << 32] {
            let txn = db.begin_write().unwrap();
            apply(&txn, &[Op::RaisePackIdFloor(floor)]).unwrap();
            txn.commit().unwrap();
        }
        let txn = db.begin_read().unwrap();
        let meta = txn.open_table(META).unwrap();
        let floor = meta.get(META_PACK_ID_FLOOR).unwrap().map(|v| v.value());
        assert_eq!(floor, Some(10 << 32));
    }

    /// An object of versions 1 to 3 (flags 0 or 1) is a whole group; flags a version does
    /// not define are refused.
    #[test]
    fn older_objects_are_whole_groups_and_unknown_flags_are_refused() {
        let mut bytes = encode(5, &[Op::DelPack(1)]);
        bytes[8..10].copy_from_slice(&3u16.to_le_bytes());
        let reseal = |b: &mut Vec<u8>| {
            let n = b.len() - HASH_LEN;
            let hash = blake3::hash(&b[..n]);
            b[n..].copy_from_slice(hash.as_bytes());
        };
        reseal(&mut bytes);
        assert_eq!(decode_piece(&bytes, 5).unwrap().1, Piece::WHOLE);
        bytes[10..12].copy_from_slice(&(F_COMPRESSED | F_MORE_FOLLOW).to_le_bytes());
        reseal(&mut bytes);
        let err = decode_piece(&bytes, 5).unwrap_err();
        assert!(err.reason.contains("unknown flags"), "{err}");
    }

    #[test]
    fn an_object_under_another_sequence_is_refused() {
        let bytes = encode(3, &[Op::DelPack(1)]);
        let err = decode(&bytes, 4).unwrap_err();
        assert!(err.reason.contains("sequence 3"), "{err}");
    }

    /// The references of a repeated stretch, repeated megabytes later in the same object, are
    /// stored about once: level 1's own window (512 KiB) would store them twice.
    #[test]
    fn references_repeated_megabytes_apart_compress() {
        // 4 MiB of spans of random 36-byte references, then the same spans again.
        let mut seed = 1u64;
        let mut random_id = || {
            let mut id = [0u8; 32];
            for b in &mut id {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *b = (seed >> 56) as u8;
            }
            id
        };
        let spans: Vec<Op> = (0..1024)
            .map(|_| {
                let refs: Vec<u8> = (0..113)
                    .flat_map(|_| [random_id().to_vec(), vec![0; 4]])
                    .flatten()
                    .collect();
                Op::PutSpan(random_id(), refs)
            })
            .collect();
        let raw_len = spans
            .iter()
            .map(|op| {
                let mut v = Vec::new();
                op.encode(&mut v);
                v.len()
            })
            .sum::<usize>();
        let twice: Vec<Op> = spans.iter().chain(&spans).cloned().collect();
        let object = encode(1, &twice);
        assert!(raw_len > 4 << 20);
        assert!(
            object.len() < raw_len + raw_len / 10,
            "{} bytes for twice {raw_len} bytes of references",
            object.len()
        );
        assert_eq!(decode(&object, 1).unwrap(), twice);
    }

    #[test]
    fn journal_keys_roundtrip_and_sort_by_sequence() {
        assert_eq!(parse_journal_key(journal_key(0x1f).as_str()), Some(0x1f));
        assert!(journal_key(9).as_str() < journal_key(10).as_str());
        assert_eq!(parse_journal_key("catalog/journal/12.jrnl"), None);
        assert_eq!(parse_journal_key("packs/0000000000000001.pack"), None);
    }
}
