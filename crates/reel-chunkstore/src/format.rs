//! Byte layouts of everything the store persists (see `docs/design/chunk-store.md`).
//!
//! Every decoder here takes untrusted bytes and returns [`FormatError`] on anything malformed;
//! none may panic. Offsets are derived from field sizes, never typed by hand.

use std::fmt;

/// Pack format version, written into every pack header; a reader accepts every version up to
/// its own and refuses newer ones. 2: blobs may end with a checksum ([`Codec::is_checked`]).
pub const FORMAT_VERSION: u16 = 2;

/// BLAKE3 hash of a chunk's uncompressed bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId(pub [u8; 32]);

impl ChunkId {
    pub fn of(data: &[u8]) -> ChunkId {
        ChunkId(*blake3::hash(data).as_bytes())
    }

    /// Short hex form for messages.
    pub fn short(&self) -> String {
        self.0[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChunkId({})", self.short())
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed {what}: {reason}")]
pub struct FormatError {
    pub what: &'static str,
    pub reason: String,
}

fn malformed(what: &'static str, reason: impl Into<String>) -> FormatError {
    FormatError {
        what,
        reason: reason.into(),
    }
}

/// How a blob's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is: compression did not pay.
    Raw,
    Zstd,
    /// Pack format 2: as `Raw` / `Zstd`, followed by [`BLOB_CHECKSUM_LEN`] bytes of
    /// [`blob_checksum`]. A read checks the whole blob once instead of hashing every chunk in
    /// it; format-1 blobs (the two above) are still read, chunk by chunk.
    RawChecked,
    ZstdChecked,
}

impl Codec {
    fn to_byte(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
            Codec::RawChecked => 2,
            Codec::ZstdChecked => 3,
        }
    }
    fn from_byte(b: u8) -> Result<Codec, FormatError> {
        match b {
            0 => Ok(Codec::Raw),
            1 => Ok(Codec::Zstd),
            2 => Ok(Codec::RawChecked),
            3 => Ok(Codec::ZstdChecked),
            _ => Err(malformed("codec", format!("unknown codec {b:#04x}"))),
        }
    }

    /// Whether the stored bytes end with a blob checksum.
    pub fn is_checked(self) -> bool {
        matches!(self, Codec::RawChecked | Codec::ZstdChecked)
    }

    fn is_zstd(self) -> bool {
        matches!(self, Codec::Zstd | Codec::ZstdChecked)
    }

    /// The bytes the stored form adds beyond the (compressed or raw) data.
    pub fn overhead(self) -> usize {
        if self.is_checked() {
            BLOB_CHECKSUM_LEN
        } else {
            0
        }
    }
}

/// Bytes of a blob checksum.
pub const BLOB_CHECKSUM_LEN: usize = 16;

/// Where a blob was written: the id its pack's header carries and its offset in the pack.
/// A blob's checksum covers both, so a blob read from the wrong place (a misdirected write, a
/// pack object swapped for another) fails its check like damaged bytes do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobAt {
    pub pack: u64,
    pub offset: u64,
}

/// The checksum a format-2 blob ends with: XXH3-128 of its place and its decoded bytes.
///
/// Damage detection, not authentication: dedup and scrub still name and check every chunk by
/// BLAKE3, and an encrypted store authenticates every object with its AEAD (chunk-store.md,
/// "What the blob checksum is for"). XXH3 runs at memory speed; BLAKE3 of every chunk read
/// cost 0.7 CPU-s per GB on unique data (efficiency.md §23).
pub fn blob_checksum(at: BlobAt, raw: &[u8]) -> [u8; BLOB_CHECKSUM_LEN] {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&at.pack.to_le_bytes());
    h.update(&at.offset.to_le_bytes());
    h.update(raw);
    h.digest128().to_le_bytes()
}

/// A decoded blob.
#[derive(Debug)]
pub struct DecodedBlob {
    pub data: Vec<u8>,
    /// Whether the blob's checksum matched its bytes: `None` for a format-1 blob, which has
    /// none. When it is not `Some(true)` the reader must check each chunk by its BLAKE3, so a
    /// damaged blob still serves its undamaged chunks.
    pub checksum_ok: Option<bool>,
}

/// Little-endian cursor over untrusted bytes.
struct Reader<'a> {
    data: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], what: &'static str) -> Self {
        Reader { data, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        if self.data.len() < n {
            return Err(malformed(
                self.what,
                format!("truncated: need {n} more bytes"),
            ));
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn finish(&self) -> Result<(), FormatError> {
        if self.data.is_empty() {
            Ok(())
        } else {
            Err(malformed(
                self.what,
                format!("{} trailing bytes", self.data.len()),
            ))
        }
    }
}

/// Where a chunk lives: in blob `blob_offset..+blob_stored` of pack `pack`, which decodes to
/// `blob_raw` bytes, at `offset..offset+len` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkLoc {
    pub pack: u64,
    pub blob_offset: u64,
    pub blob_stored: u32,
    pub blob_raw: u32,
    pub codec: Codec,
    pub offset: u32,
    pub len: u32,
}

impl ChunkLoc {
    pub const ENCODED_LEN: usize = 8 + 8 + 4 + 4 + 1 + 4 + 4;

    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [0u8; Self::ENCODED_LEN];
        let mut w = &mut out[..];
        put(&mut w, &self.pack.to_le_bytes());
        put(&mut w, &self.blob_offset.to_le_bytes());
        put(&mut w, &self.blob_stored.to_le_bytes());
        put(&mut w, &self.blob_raw.to_le_bytes());
        put(&mut w, &[self.codec.to_byte()]);
        put(&mut w, &self.offset.to_le_bytes());
        put(&mut w, &self.len.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<ChunkLoc, FormatError> {
        let mut r = Reader::new(bytes, "chunk location");
        let loc = ChunkLoc {
            pack: r.u64()?,
            blob_offset: r.u64()?,
            blob_stored: r.u32()?,
            blob_raw: r.u32()?,
            codec: Codec::from_byte(r.u8()?)?,
            offset: r.u32()?,
            len: r.u32()?,
        };
        r.finish()?;
        if u64::from(loc.offset) + u64::from(loc.len) > u64::from(loc.blob_raw) {
            return Err(malformed("chunk location", "chunk extends past its blob"));
        }
        if (loc.blob_stored as usize) < loc.codec.overhead() {
            return Err(malformed(
                "chunk location",
                "blob shorter than its checksum",
            ));
        }
        Ok(loc)
    }
}

fn put(w: &mut &mut [u8], bytes: &[u8]) {
    let (head, rest) = std::mem::take(w).split_at_mut(bytes.len());
    head.copy_from_slice(bytes);
    *w = rest;
}

// ---------------------------------------------------------------------------------------------
// Pack objects
//
//   header  | blob 0 | blob 1 | ... | trailer | footer
//   header  = magic "REELPACK" | version u16 | reserved u16 | reserved u32 | pack id u64
//   trailer = blob count u32 | chunk count u32 | blob entries | chunk lengths (u32 each)
//   blob    = offset u64 | stored len u32 | raw len u32 | codec u8 | chunk count u32
//   footer  = trailer offset u64 | crc32 of trailer u32 | magic "RPND"
//
// A blob decodes to its chunks laid end to end, so each blob's chunk lengths sum to its raw
// length. Chunk names (hashes) are not in the pack: the catalog keeps them (`pack_ids`), which
// keeps per-chunk overhead in the back end at 4 bytes; a lost catalog is rebuilt by re-hashing.
// ---------------------------------------------------------------------------------------------

pub const PACK_MAGIC: [u8; 8] = *b"REELPACK";
pub const PACK_FOOTER_MAGIC: [u8; 4] = *b"RPND";
pub const PACK_HEADER_LEN: usize = PACK_MAGIC.len() + 2 + 2 + 4 + 8;
pub const PACK_FOOTER_LEN: usize = 8 + 4 + PACK_FOOTER_MAGIC.len();
const BLOB_ENTRY_LEN: usize = 8 + 4 + 4 + 1 + 4;
const CHUNK_ENTRY_LEN: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobEntry {
    pub offset: u64,
    pub stored: u32,
    pub raw: u32,
    pub codec: Codec,
    pub chunks: u32,
}

/// Where the i-th chunk of a pack sits: blob index, offset and length within the decoded blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSlot {
    pub blob: u32,
    pub offset: u32,
    pub len: u32,
}

/// The table of contents at the end of a pack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackTrailer {
    pub blobs: Vec<BlobEntry>,
    pub chunk_lens: Vec<u32>,
}

impl PackTrailer {
    /// Every chunk's slot, in pack order (the order of the catalog's names for the pack).
    pub fn slots(&self) -> Vec<ChunkSlot> {
        let mut out = Vec::with_capacity(self.chunk_lens.len());
        let mut lens = self.chunk_lens.iter();
        for (b, blob) in self.blobs.iter().enumerate() {
            let mut offset = 0u32;
            for len in lens.by_ref().take(blob.chunks as usize) {
                out.push(ChunkSlot {
                    blob: b as u32,
                    offset,
                    len: *len,
                });
                offset += len;
            }
        }
        out
    }

    pub fn loc(&self, pack: u64, slot: &ChunkSlot) -> ChunkLoc {
        let blob = self.blobs[slot.blob as usize];
        ChunkLoc {
            pack,
            blob_offset: blob.offset,
            blob_stored: blob.stored,
            blob_raw: blob.raw,
            codec: blob.codec,
            offset: slot.offset,
            len: slot.len,
        }
    }
}

pub fn encode_pack_header(pack_id: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(PACK_HEADER_LEN);
    out.extend_from_slice(&PACK_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0u8; 6]);
    out.extend_from_slice(&pack_id.to_le_bytes());
    debug_assert_eq!(out.len(), PACK_HEADER_LEN);
    out
}

/// Appends trailer and footer to a pack whose header and blobs are in `pack`.
pub fn finish_pack(pack: &mut Vec<u8>, trailer: &PackTrailer) {
    let trailer_offset = pack.len() as u64;
    pack.extend_from_slice(&(trailer.blobs.len() as u32).to_le_bytes());
    pack.extend_from_slice(&(trailer.chunk_lens.len() as u32).to_le_bytes());
    for b in &trailer.blobs {
        pack.extend_from_slice(&b.offset.to_le_bytes());
        pack.extend_from_slice(&b.stored.to_le_bytes());
        pack.extend_from_slice(&b.raw.to_le_bytes());
        pack.push(b.codec.to_byte());
        pack.extend_from_slice(&b.chunks.to_le_bytes());
    }
    for len in &trailer.chunk_lens {
        pack.extend_from_slice(&len.to_le_bytes());
    }
    let crc = crc32fast::hash(&pack[trailer_offset as usize..]);
    pack.extend_from_slice(&trailer_offset.to_le_bytes());
    pack.extend_from_slice(&crc.to_le_bytes());
    pack.extend_from_slice(&PACK_FOOTER_MAGIC);
}

/// Checks a pack header; returns the pack id it names.
pub fn decode_pack_header(bytes: &[u8]) -> Result<u64, FormatError> {
    let mut r = Reader::new(bytes, "pack header");
    if r.array::<8>()? != PACK_MAGIC {
        return Err(malformed("pack header", "bad magic"));
    }
    let version = r.u16()?;
    if version == 0 || version > FORMAT_VERSION {
        return Err(malformed(
            "pack header",
            format!("unsupported format version {version}"),
        ));
    }
    r.take(6)?;
    r.u64()
}

/// Reads the footer (last [`PACK_FOOTER_LEN`] bytes): returns (trailer offset, crc).
pub fn decode_pack_footer(bytes: &[u8]) -> Result<(u64, u32), FormatError> {
    let mut r = Reader::new(bytes, "pack footer");
    let offset = r.u64()?;
    let crc = r.u32()?;
    if r.array::<4>()? != PACK_FOOTER_MAGIC {
        return Err(malformed(
            "pack footer",
            "bad magic (pack truncated or not a pack)",
        ));
    }
    r.finish()?;
    Ok((offset, crc))
}

/// Decodes a trailer that starts at `trailer_offset` of its pack. Checks the CRC, that every
/// blob lies inside the pack's data area and that each blob's chunk lengths sum to its size.
pub fn decode_pack_trailer(
    bytes: &[u8],
    crc: u32,
    trailer_offset: u64,
) -> Result<PackTrailer, FormatError> {
    if crc32fast::hash(bytes) != crc {
        return Err(malformed("pack trailer", "checksum mismatch"));
    }
    let mut r = Reader::new(bytes, "pack trailer");
    let blob_count = r.u32()? as usize;
    let chunk_count = r.u32()? as usize;
    let need = blob_count.checked_mul(BLOB_ENTRY_LEN).and_then(|b| {
        chunk_count
            .checked_mul(CHUNK_ENTRY_LEN)
            .and_then(|c| b.checked_add(c))
    });
    if need != Some(r.data.len()) {
        return Err(malformed(
            "pack trailer",
            "entry counts do not match its length",
        ));
    }
    let mut trailer = PackTrailer {
        blobs: Vec::with_capacity(blob_count),
        chunk_lens: Vec::with_capacity(chunk_count),
    };
    let mut chunks_named = 0u64;
    for _ in 0..blob_count {
        let b = BlobEntry {
            offset: r.u64()?,
            stored: r.u32()?,
            raw: r.u32()?,
            codec: Codec::from_byte(r.u8()?)?,
            chunks: r.u32()?,
        };
        let end = b.offset.checked_add(u64::from(b.stored));
        if b.offset < PACK_HEADER_LEN as u64 || end.is_none_or(|e| e > trailer_offset) {
            return Err(malformed(
                "pack trailer",
                "blob outside the pack's data area",
            ));
        }
        let overhead = b.codec.overhead() as u64;
        if !b.codec.is_zstd() && u64::from(b.raw) + overhead != u64::from(b.stored) {
            return Err(malformed("pack trailer", "raw blob with differing lengths"));
        }
        if u64::from(b.stored) < overhead {
            return Err(malformed("pack trailer", "blob shorter than its checksum"));
        }
        chunks_named += u64::from(b.chunks);
        trailer.blobs.push(b);
    }
    if chunks_named != chunk_count as u64 {
        return Err(malformed(
            "pack trailer",
            "blobs do not account for every chunk",
        ));
    }
    for _ in 0..chunk_count {
        let len = r.u32()?;
        if len == 0 {
            return Err(malformed("pack trailer", "empty chunk"));
        }
        trailer.chunk_lens.push(len);
    }
    r.finish()?;
    let mut lens = trailer.chunk_lens.iter();
    for b in &trailer.blobs {
        let sum: u64 = lens
            .by_ref()
            .take(b.chunks as usize)
            .map(|&l| u64::from(l))
            .sum();
        if sum != u64::from(b.raw) {
            return Err(malformed(
                "pack trailer",
                "a blob's chunks do not add up to its size",
            ));
        }
    }
    Ok(trailer)
}

/// Decodes a whole pack object: header, footer and trailer.
pub fn decode_pack(bytes: &[u8]) -> Result<(u64, PackTrailer), FormatError> {
    if bytes.len() < PACK_HEADER_LEN + PACK_FOOTER_LEN {
        return Err(malformed("pack", "shorter than header and footer"));
    }
    let id = decode_pack_header(&bytes[..PACK_HEADER_LEN])?;
    let footer_at = bytes.len() - PACK_FOOTER_LEN;
    let (trailer_offset, crc) = decode_pack_footer(&bytes[footer_at..])?;
    if trailer_offset < PACK_HEADER_LEN as u64 || trailer_offset > footer_at as u64 {
        return Err(malformed("pack footer", "trailer offset out of range"));
    }
    let trailer = decode_pack_trailer(
        &bytes[trailer_offset as usize..footer_at],
        crc,
        trailer_offset,
    )?;
    Ok((id, trailer))
}

/// Names a chunk copy that is garbage: a duplicate of a chunk the index locates in another pack.
/// (The all-zero id is not a BLAKE3 output anyone will meet.) Tables of contents built from
/// `pack_ids` skip it, so dedup never trusts a copy the index does not point at: that copy
/// could outlive the chunk's index entry and be deleted by reclaim while still referenced.
pub const TOMBSTONE: ChunkId = ChunkId([0; 32]);

/// The catalog's names for a pack's chunks: 32-byte ids end to end, in pack order.
pub fn encode_pack_ids(ids: &[ChunkId]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.0).collect()
}

pub fn decode_pack_ids(bytes: &[u8]) -> Result<Vec<ChunkId>, FormatError> {
    if !bytes.len().is_multiple_of(32) {
        return Err(malformed(
            "pack id list",
            format!("{} bytes is not a multiple of 32", bytes.len()),
        ));
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|c| ChunkId(c.try_into().unwrap_or([0; 32])))
        .collect())
}

/// Decodes a blob's stored bytes into exactly `raw` bytes.
pub fn decode_blob(
    codec: Codec,
    stored: &[u8],
    raw: u32,
    at: BlobAt,
) -> Result<DecodedBlob, FormatError> {
    if codec.is_zstd() {
        let (data, checksum) = split_checksum(codec, stored)?;
        let data = decompress(data, raw)?;
        Ok(checked(data, checksum, at))
    } else {
        decode_blob_owned(codec, stored.to_vec(), raw, at)
    }
}

/// [`decode_blob`] of bytes the caller no longer needs: a raw blob is returned as it is, not
/// copied (the read path's fetched ranges).
pub fn decode_blob_owned(
    codec: Codec,
    mut stored: Vec<u8>,
    raw: u32,
    at: BlobAt,
) -> Result<DecodedBlob, FormatError> {
    if codec.is_zstd() {
        return decode_blob(codec, &stored, raw, at);
    }
    if stored.len() != raw as usize + codec.overhead() {
        return Err(malformed("blob", "raw blob length mismatch"));
    }
    let checksum = match codec.is_checked() {
        true => Some(stored.split_off(raw as usize)),
        false => None,
    };
    Ok(checked(stored, checksum.as_deref(), at))
}

/// A stored blob's data and, for a checked codec, its checksum.
fn split_checksum(codec: Codec, stored: &[u8]) -> Result<(&[u8], Option<&[u8]>), FormatError> {
    if !codec.is_checked() {
        return Ok((stored, None));
    }
    let data_len = stored
        .len()
        .checked_sub(BLOB_CHECKSUM_LEN)
        .ok_or_else(|| malformed("blob", "shorter than its checksum"))?;
    let (data, checksum) = stored.split_at(data_len);
    Ok((data, Some(checksum)))
}

fn checked(data: Vec<u8>, checksum: Option<&[u8]>, at: BlobAt) -> DecodedBlob {
    let checksum_ok = checksum.map(|c| c == blob_checksum(at, &data));
    DecodedBlob { data, checksum_ok }
}

fn decompress(stored: &[u8], raw: u32) -> Result<Vec<u8>, FormatError> {
    thread_local! {
        // One decompression context per thread, not one per blob (creating one costs more than
        // decoding a small blob).
        static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    let out = DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let d = match cell.as_mut() {
            Some(d) => d,
            None => cell.insert(zstd::bulk::Decompressor::new()?),
        };
        d.decompress(stored, raw as usize)
    });
    let out = out.map_err(|e| malformed("blob", format!("zstd: {e}")))?;
    if out.len() != raw as usize {
        return Err(malformed("blob", "decompressed length mismatch"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reference lists and extent rows.
//
// A reference list (the body of a span) = version u8 (1) | count u32 | count × (id [32] | len u32).
// An extent row (a stream's bytes from its key's start offset) is either a version-1 reference
// list (every entry a chunk; written by the first format) or
//   version u8 (2) | count u32 | count × (kind u8 | id [32] | len u32)
// where kind 0 is a chunk and kind 1 a span: a whole record's reference list, stored once in the
// catalog under the BLAKE3 of its encoding, so a record that repeats costs one entry, not one per
// chunk. A chunk reference's `len` may be shorter than its chunk (a stream truncated inside it).
//
// A span's body is a version-1 reference list or (catalog format 3) a version-2 row: the record
// split into *pieces* at content-defined points ([`split_into_pieces`]), each piece a span of
// its own (whose body must be a version-1 list: spans nest one level) or, when it is one chunk,
// a chunk entry. Known blocks in a new order then cost the record a few piece entries and the
// pieces around the seams, not a 36-byte reference for every chunk again.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    pub id: ChunkId,
    pub len: u32,
}

/// Names a span: the BLAKE3 of its encoded reference list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(pub [u8; 32]);

impl SpanId {
    pub fn of(encoded_refs: &[u8]) -> SpanId {
        SpanId(*blake3::hash(encoded_refs).as_bytes())
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0[..8].iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// One entry of an extent row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Chunk(ChunkRef),
    Span { id: SpanId, len: u32 },
}

impl Entry {
    /// Stream bytes the entry covers.
    pub fn bytes(&self) -> u32 {
        match self {
            Entry::Chunk(r) => r.len,
            Entry::Span { len, .. } => *len,
        }
    }
}

const REFS_VERSION: u8 = 1;
const ROW_VERSION: u8 = 2;
const REF_LEN: usize = 32 + 4;
const ENTRY_LEN: usize = 1 + 32 + 4;

pub fn encode_refs(refs: &[ChunkRef]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + refs.len() * REF_LEN);
    out.push(REFS_VERSION);
    out.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    for r in refs {
        out.extend_from_slice(&r.id.0);
        out.extend_from_slice(&r.len.to_le_bytes());
    }
    out
}

pub fn decode_refs(bytes: &[u8]) -> Result<Vec<ChunkRef>, FormatError> {
    let mut r = Reader::new(bytes, "reference list");
    let version = r.u8()?;
    if version != REFS_VERSION {
        return Err(malformed(
            "reference list",
            format!("unsupported version {version}"),
        ));
    }
    decode_ref_body(r)
}

fn decode_ref_body(mut r: Reader<'_>) -> Result<Vec<ChunkRef>, FormatError> {
    let count = r.u32()? as usize;
    if count.checked_mul(REF_LEN) != Some(r.data.len()) {
        return Err(malformed(r.what, "entry count does not match its length"));
    }
    let mut refs = Vec::with_capacity(count);
    for _ in 0..count {
        let id = ChunkId(r.array()?);
        let len = r.u32()?;
        if len == 0 {
            return Err(malformed(r.what, "empty chunk reference"));
        }
        refs.push(ChunkRef { id, len });
    }
    Ok(refs)
}

/// A piece ends after a chunk whose id byte 30 (a byte neither the hook filter nor the id
/// hasher uses) is a multiple of this, once it holds [`PIECE_MIN_REFS`]: ~16 chunks, ~40 KiB at
/// the default chunk size, so a 256 KiB block of a record holds several whole pieces.
pub const PIECE_ANCHOR_ONE_IN: u8 = 16;
pub const PIECE_MIN_REFS: usize = 4;
/// A piece without an anchor ends here (bounds a piece's row; the next anchor resynchronises).
pub const PIECE_MAX_REFS: usize = 64;

/// Splits a record's references into pieces whose ends depend only on the chunks themselves, so
/// the same run of chunks in another record (another order of blocks, another record size)
/// yields the same pieces once the first anchor inside it is passed.
pub fn split_into_pieces(refs: &[ChunkRef]) -> Vec<&[ChunkRef]> {
    let mut pieces = Vec::with_capacity(refs.len() / usize::from(PIECE_ANCHOR_ONE_IN) + 1);
    let mut start = 0;
    for (i, r) in refs.iter().enumerate() {
        let held = i + 1 - start;
        if held >= PIECE_MAX_REFS
            || (held >= PIECE_MIN_REFS && r.id.0[30].is_multiple_of(PIECE_ANCHOR_ONE_IN))
        {
            pieces.push(&refs[start..=i]);
            start = i + 1;
        }
    }
    if start < refs.len() {
        pieces.push(&refs[start..]);
    }
    pieces
}

/// A span's body is flat (a version-1 reference list) or holds pieces (a version-2 row).
pub fn span_is_flat(body: &[u8]) -> bool {
    body.first() == Some(&REFS_VERSION)
}

pub fn encode_extent_row(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + entries.len() * ENTRY_LEN);
    out.push(ROW_VERSION);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        let (kind, id) = match e {
            Entry::Chunk(r) => (0u8, &r.id.0),
            Entry::Span { id, .. } => (1u8, &id.0),
        };
        out.push(kind);
        out.extend_from_slice(id);
        out.extend_from_slice(&e.bytes().to_le_bytes());
    }
    out
}

pub fn decode_extent_row(bytes: &[u8]) -> Result<Vec<Entry>, FormatError> {
    let mut r = Reader::new(bytes, "extent row");
    match r.u8()? {
        REFS_VERSION => Ok(decode_ref_body(r)?.into_iter().map(Entry::Chunk).collect()),
        ROW_VERSION => {
            let count = r.u32()? as usize;
            if count.checked_mul(ENTRY_LEN) != Some(r.data.len()) {
                return Err(malformed(
                    "extent row",
                    "entry count does not match its length",
                ));
            }
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                let kind = r.u8()?;
                let id: [u8; 32] = r.array()?;
                let len = r.u32()?;
                if len == 0 {
                    return Err(malformed("extent row", "empty reference"));
                }
                entries.push(match kind {
                    0 => Entry::Chunk(ChunkRef {
                        id: ChunkId(id),
                        len,
                    }),
                    1 => Entry::Span {
                        id: SpanId(id),
                        len,
                    },
                    _ => {
                        return Err(malformed(
                            "extent row",
                            format!("unknown entry kind {kind}"),
                        ));
                    }
                });
            }
            Ok(entries)
        }
        v => Err(malformed("extent row", format!("unsupported version {v}"))),
    }
}

// A *compact* row (catalog format 9) is how reel writes extent rows and span bodies of pieces
// now. It names a span by the first 8 bytes of its id, not all 32, and carries the first 8
// bytes of the BLAKE3 of the same row in version 2 (the *full* row, every id whole):
//   version u8 (4) | count varint | check [8] | count × entry
// where an entry is `0 | chunk id [32] | len varint` or `1 | span id's first 8 bytes | len
// varint`. Reading it resolves each prefix among the stored spans (`spans::decode_row`) and
// compares the full row's hash with the check: a prefix two stored spans share (one pair in
// 2^64 / n²) is settled by the check, and a damaged prefix is never read as another span. A
// span's id is the hash of its body as stored, so a record in pieces is named by its compact
// body. 37 B per span entry become ~12 (`efficiency.md` §40).
// ---------------------------------------------------------------------------------------------

const COMPACT_ROW_VERSION: u8 = 4;
pub const SPAN_PREFIX_LEN: usize = 8;

/// An entry of a compact row: a span is named by its id's first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactEntry {
    Chunk(ChunkRef),
    Span {
        prefix: [u8; SPAN_PREFIX_LEN],
        len: u32,
    },
}

/// A compact row before its span prefixes are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactRow {
    pub check: [u8; 8],
    pub entries: Vec<CompactEntry>,
}

/// A stored row: entries with whole ids (versions 1 and 2), or compact (version 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredRow {
    Full(Vec<Entry>),
    Compact(CompactRow),
}

/// The check a compact row carries: the first 8 bytes of the BLAKE3 of the full row
/// ([`encode_extent_row`]), hashed as it would be encoded without building it.
pub fn row_check(entries: &[Entry]) -> [u8; 8] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&[ROW_VERSION]);
    hasher.update(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        let (kind, id) = match e {
            Entry::Chunk(r) => (0u8, &r.id.0),
            Entry::Span { id, .. } => (1u8, &id.0),
        };
        hasher.update(&[kind]);
        hasher.update(id);
        hasher.update(&e.bytes().to_le_bytes());
    }
    let mut check = [0u8; 8];
    check.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
    check
}

/// The compact form of a row: what reel stores for extent rows and bodies of pieces.
pub fn encode_row(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + entries.len() * 14);
    out.push(COMPACT_ROW_VERSION);
    put_varint(&mut out, entries.len() as u64);
    out.extend_from_slice(&row_check(entries));
    for e in entries {
        match e {
            Entry::Chunk(r) => {
                out.push(0);
                out.extend_from_slice(&r.id.0);
                put_varint(&mut out, u64::from(r.len));
            }
            Entry::Span { id, len } => {
                out.push(1);
                out.extend_from_slice(&id.0[..SPAN_PREFIX_LEN]);
                put_varint(&mut out, u64::from(*len));
            }
        }
    }
    out
}

/// Decodes a row of any version; a compact one still names its spans by prefix.
pub fn decode_row(bytes: &[u8]) -> Result<StoredRow, FormatError> {
    const WHAT: &str = "compact row";
    if bytes.first() != Some(&COMPACT_ROW_VERSION) {
        return decode_extent_row(bytes).map(StoredRow::Full);
    }
    let mut r = Reader::new(&bytes[1..], WHAT);
    let count = r.varint()?;
    // Every entry takes at least 10 bytes: bounds the allocation by the input.
    if count > r.data.len() as u64 / 10 {
        return Err(malformed(WHAT, "more entries than bytes"));
    }
    let check = r.array()?;
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let kind = r.u8()?;
        let entry = match kind {
            0 => {
                let id = ChunkId(r.array()?);
                CompactEntry::Chunk(ChunkRef {
                    id,
                    len: r.varint_u32()?,
                })
            }
            1 => CompactEntry::Span {
                prefix: r.array()?,
                len: r.varint_u32()?,
            },
            _ => return Err(malformed(WHAT, format!("unknown entry kind {kind}"))),
        };
        let len = match entry {
            CompactEntry::Chunk(c) => c.len,
            CompactEntry::Span { len, .. } => len,
        };
        if len == 0 {
            return Err(malformed(WHAT, "empty reference"));
        }
        entries.push(entry);
    }
    r.finish()?;
    Ok(StoredRow::Compact(CompactRow { check, entries }))
}

// A *placed* span body (catalog format 8) is a flat reference list stored by where its chunks'
// names are rather than by the names themselves:
//   version u8 (3) | count varint | count × len varint | runs until the end
// where a run is `n varint (≥ 1) | pack varint | first varint`: the `n` ids at positions
// `first..first + n` of that pack's names, or `0 varint | id [32]`: one id spelled out. It is
// only ever the catalog's local form of a version-1 list (journal ops, checkpoints and bundles
// carry the list itself), and `spans.rs` checks every expansion against the span's id.
// ---------------------------------------------------------------------------------------------

const PLACED_VERSION: u8 = 3;

/// Where a run of a placed body's ids is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefRun {
    /// `count` consecutive ids of `pack`'s names, from position `first`.
    Named { pack: u64, first: u32, count: u32 },
    /// One id, spelled out (its chunk's names could not be placed).
    Literal(ChunkId),
}

impl RefRun {
    pub fn ids(&self) -> u64 {
        match self {
            RefRun::Named { count, .. } => u64::from(*count),
            RefRun::Literal(_) => 1,
        }
    }
}

/// A flat reference list as the lengths of its references and the runs naming their chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedRefs {
    pub lens: Vec<u32>,
    pub runs: Vec<RefRun>,
}

pub fn span_is_placed(body: &[u8]) -> bool {
    body.first() == Some(&PLACED_VERSION)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, FormatError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    break;
                }
                return Ok(v);
            }
        }
        Err(malformed(self.what, "varint longer than 64 bits"))
    }

    fn varint_u32(&mut self) -> Result<u32, FormatError> {
        u32::try_from(self.varint()?).map_err(|_| malformed(self.what, "value over 32 bits"))
    }
}

pub fn encode_placed_refs(placed: &PlacedRefs) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + placed.lens.len() * 2 + placed.runs.len() * 8);
    out.push(PLACED_VERSION);
    put_varint(&mut out, placed.lens.len() as u64);
    for &len in &placed.lens {
        put_varint(&mut out, u64::from(len));
    }
    for run in &placed.runs {
        match run {
            RefRun::Named { pack, first, count } => {
                put_varint(&mut out, u64::from(*count));
                put_varint(&mut out, *pack);
                put_varint(&mut out, u64::from(*first));
            }
            RefRun::Literal(id) => {
                out.push(0);
                out.extend_from_slice(&id.0);
            }
        }
    }
    out
}

/// Decodes a placed body; its runs name exactly as many ids as it has lengths, none empty.
pub fn decode_placed_refs(bytes: &[u8]) -> Result<PlacedRefs, FormatError> {
    const WHAT: &str = "placed reference list";
    let mut r = Reader::new(bytes, WHAT);
    let version = r.u8()?;
    if version != PLACED_VERSION {
        return Err(malformed(WHAT, format!("unsupported version {version}")));
    }
    let count = r.varint()?;
    // Every length takes at least a byte: bounds the allocation by the input.
    if count > r.data.len() as u64 {
        return Err(malformed(WHAT, "more lengths than bytes"));
    }
    let mut lens = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = r.varint_u32()?;
        if len == 0 {
            return Err(malformed(WHAT, "empty chunk reference"));
        }
        lens.push(len);
    }
    let mut runs = Vec::new();
    let mut named = 0u64;
    while !r.data.is_empty() {
        let n = r.varint_u32()?;
        let run = if n == 0 {
            RefRun::Literal(ChunkId(r.array()?))
        } else {
            let pack = r.varint()?;
            let first = r.varint_u32()?;
            if first.checked_add(n).is_none() {
                return Err(malformed(WHAT, "run beyond 2^32 names"));
            }
            RefRun::Named {
                pack,
                first,
                count: n,
            }
        };
        named += run.ids();
        if named > count {
            return Err(malformed(WHAT, "runs name more ids than it has lengths"));
        }
        runs.push(run);
    }
    if named != count {
        return Err(malformed(
            WHAT,
            format!("runs name {named} ids for {count} lengths"),
        ));
    }
    Ok(PlacedRefs { lens, runs })
}

/// Fuzz entry points: each must return without panicking on any input.
#[doc(hidden)]
pub mod fuzzing {
    pub fn decode_anything(data: &[u8]) {
        let _ = super::decode_pack(data);
        let _ = super::decode_extent_row(data);
        let _ = super::decode_row(data);
        let _ = super::decode_refs(data);
        let _ = super::ChunkLoc::decode(data);
        let _ = super::decode_pack_ids(data);
        let _ = super::decode_placed_refs(data);
        if let Some((&codec, rest)) = data.split_first()
            && let Ok(codec) = super::Codec::from_byte(codec & 3)
        {
            let at = super::BlobAt {
                pack: 1,
                offset: 16,
            };
            let _ = super::decode_blob(codec, rest, (rest.len() as u32).saturating_mul(3), at);
            let _ = super::decode_blob_owned(codec, rest.to_vec(), rest.len() as u32, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_pack() -> (Vec<u8>, PackTrailer) {
        let mut pack = encode_pack_header(7);
        let data = b"hello world, hello world, hello world".to_vec();
        let stored = zstd::bulk::compress(&data, 1).unwrap();
        let blob = BlobEntry {
            offset: pack.len() as u64,
            stored: stored.len() as u32,
            raw: data.len() as u32,
            codec: Codec::Zstd,
            chunks: 2,
        };
        pack.extend_from_slice(&stored);
        let trailer = PackTrailer {
            blobs: vec![blob],
            chunk_lens: vec![5, data.len() as u32 - 5],
        };
        finish_pack(&mut pack, &trailer);
        (pack, trailer)
    }

    #[test]
    fn pack_round_trips() {
        let (pack, trailer) = sample_pack();
        let (id, decoded) = decode_pack(&pack).unwrap();
        assert_eq!(id, 7);
        assert_eq!(decoded, trailer);
        let loc = decoded.loc(7, &decoded.slots()[1]);
        let blob = &pack[loc.blob_offset as usize..][..loc.blob_stored as usize];
        let at = BlobAt {
            pack: 7,
            offset: loc.blob_offset,
        };
        let decoded = decode_blob(loc.codec, blob, loc.blob_raw, at).unwrap();
        assert_eq!(decoded.checksum_ok, None, "a format-1 blob has no checksum");
        let chunk = &decoded.data[loc.offset as usize..][..loc.len as usize];
        assert_eq!(chunk, &b"hello world, hello world, hello world"[5..]);
    }

    /// A checked blob as a writer stores it at `at`: the data (compressed or not), then the
    /// checksum of `raw` there.
    fn checked_blob(raw: &[u8], zstd: bool, at: BlobAt) -> (Codec, Vec<u8>) {
        let (codec, mut stored) = match zstd {
            true => (Codec::ZstdChecked, zstd::bulk::compress(raw, 1).unwrap()),
            false => (Codec::RawChecked, raw.to_vec()),
        };
        stored.extend_from_slice(&blob_checksum(at, raw));
        (codec, stored)
    }

    #[test]
    fn every_truncation_and_bit_flip_of_a_pack_is_rejected_or_harmless() {
        let (pack, trailer) = sample_pack();
        for len in 0..pack.len() {
            assert!(
                decode_pack(&pack[..len]).is_err(),
                "truncated to {len} accepted"
            );
        }
        for bit in 0..pack.len() * 8 {
            let mut bad = pack.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            // A flip inside blob data is caught later by the chunk hash; anywhere else the
            // decoder must refuse it or decode exactly the same table of contents.
            if let Ok((_, t)) = decode_pack(&bad) {
                assert_eq!(t, trailer, "bit {bit} changed the decoded trailer silently");
            }
        }
    }

    #[test]
    fn unknown_version_is_refused() {
        let (mut pack, _) = sample_pack();
        pack[8] = 99;
        let err = decode_pack(&pack).unwrap_err();
        assert!(err.reason.contains("version"), "{err}");
    }

    proptest! {
        #[test]
        fn checked_blobs_round_trip_and_any_flip_or_other_place_fails_the_check(
            raw in proptest::collection::vec(any::<u8>(), 1..2000),
            zstd: bool,
            pack: u64,
            offset: u64,
            flip in any::<proptest::sample::Index>(),
            elsewhere in 1u64..,
        ) {
            let at = BlobAt { pack, offset };
            let (codec, stored) = checked_blob(&raw, zstd, at);
            let len = raw.len() as u32;
            for decoded in [
                decode_blob(codec, &stored, len, at).unwrap(),
                decode_blob_owned(codec, stored.clone(), len, at).unwrap(),
            ] {
                prop_assert_eq!(&decoded.data, &raw);
                prop_assert_eq!(decoded.checksum_ok, Some(true));
            }
            // The same bytes read as if they were another pack's, or at another offset.
            for wrong in [BlobAt { pack: pack ^ elsewhere, offset }, BlobAt { pack, offset: offset ^ elsewhere }] {
                prop_assert_eq!(decode_blob(codec, &stored, len, wrong).unwrap().checksum_ok, Some(false));
            }
            // One flipped bit anywhere: refused by the decoder (zstd) or flagged, never passed
            // with other bytes. A zstd frame has bits its decoder ignores (the frame header's
            // unused bit, RFC 8878 §3.1.1.1.1.4): flipped, the blob decodes to the same bytes,
            // which then rightly pass. A raw blob has no such bit.
            let mut bad = stored.clone();
            let bit = flip.index(bad.len() * 8);
            bad[bit / 8] ^= 1 << (bit % 8);
            if let Ok(decoded) = decode_blob(codec, &bad, len, at)
                && decoded.checksum_ok == Some(true)
            {
                prop_assert!(zstd, "bit {} of a raw blob passed the check", bit);
                prop_assert_eq!(&decoded.data, &raw, "bit {} passed with other bytes", bit);
            }
            // Cut short: refused outright.
            prop_assert!(decode_blob_owned(codec, stored[..stored.len() - 1].to_vec(), len, at).is_err());
        }

        #[test]
        fn chunk_loc_round_trips(pack: u64, blob_offset: u64, blob_stored in 16u32.., raw in 1u32.., off: u32, codec in 0u8..4) {
            let offset = off % raw;
            let len = (raw - offset).min(1 << 20);
            let loc = ChunkLoc { pack, blob_offset, blob_stored, blob_raw: raw,
                codec: Codec::from_byte(codec).unwrap(), offset, len };
            prop_assert_eq!(ChunkLoc::decode(&loc.encode()).unwrap(), loc);
        }

        #[test]
        fn extent_rows_round_trip(entries in proptest::collection::vec((any::<bool>(), any::<[u8; 32]>(), 1u32..), 0..50)) {
            let entries: Vec<Entry> = entries.into_iter().map(|(span, id, len)| if span {
                Entry::Span { id: SpanId(id), len }
            } else {
                Entry::Chunk(ChunkRef { id: ChunkId(id), len })
            }).collect();
            prop_assert_eq!(decode_extent_row(&encode_extent_row(&entries)).unwrap(), entries);
        }

        #[test]
        fn reference_lists_round_trip_and_read_as_version_1_rows(entries in proptest::collection::vec((any::<[u8; 32]>(), 1u32..), 0..50)) {
            let refs: Vec<ChunkRef> = entries.into_iter().map(|(id, len)| ChunkRef { id: ChunkId(id), len }).collect();
            let encoded = encode_refs(&refs);
            prop_assert_eq!(&decode_refs(&encoded).unwrap(), &refs);
            let as_row: Vec<Entry> = refs.iter().copied().map(Entry::Chunk).collect();
            prop_assert_eq!(decode_extent_row(&encoded).unwrap(), as_row);
        }

        #[test]
        fn placed_lists_round_trip_and_any_cut_is_refused(
            runs in proptest::collection::vec(
                prop_oneof![
                    (any::<u64>(), 0u32..u32::MAX / 2, 1u32..40)
                        .prop_map(|(pack, first, count)| RefRun::Named { pack, first, count }),
                    any::<[u8; 32]>().prop_map(|id| RefRun::Literal(ChunkId(id))),
                ],
                0..20,
            ),
            len_seed in any::<u32>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let n: u64 = runs.iter().map(RefRun::ids).sum();
            let lens: Vec<u32> = (0..n)
                .map(|i| (len_seed.rotate_left(i as u32 % 32) % 3_000_000).max(1))
                .collect();
            let placed = PlacedRefs { lens, runs };
            let encoded = encode_placed_refs(&placed);
            prop_assert!(span_is_placed(&encoded));
            prop_assert!(!span_is_flat(&encoded));
            prop_assert_eq!(&decode_placed_refs(&encoded).unwrap(), &placed);
            // A body cut short never decodes as another one: the runs must name every length.
            let cut = cut.index(encoded.len());
            if let Ok(shorter) = decode_placed_refs(&encoded[..cut]) {
                let named: u64 = shorter.runs.iter().map(RefRun::ids).sum();
                prop_assert_eq!(named, shorter.lens.len() as u64);
            }
        }

        #[test]
        fn compact_rows_keep_chunk_ids_span_prefixes_lengths_and_the_full_rows_check(
            entries in proptest::collection::vec(
                (any::<bool>(), any::<[u8; 32]>(), 1u32..u32::MAX).prop_map(|(span, id, len)| {
                    if span {
                        Entry::Span { id: SpanId(id), len }
                    } else {
                        Entry::Chunk(ChunkRef { id: ChunkId(id), len })
                    }
                }),
                0..40,
            ),
            cut in any::<prop::sample::Index>(),
        ) {
            let encoded = encode_row(&entries);
            prop_assert!(!span_is_flat(&encoded) && !span_is_placed(&encoded));
            let StoredRow::Compact(row) = decode_row(&encoded).unwrap() else {
                panic!("not compact");
            };
            // The check is of the full row, which is never built to compute it.
            let full = blake3::hash(&encode_extent_row(&entries));
            prop_assert_eq!(&row.check[..], &full.as_bytes()[..8]);
            prop_assert_eq!(row.check, row_check(&entries));
            prop_assert_eq!(row.entries.len(), entries.len());
            for (stored, e) in row.entries.iter().zip(&entries) {
                match (stored, e) {
                    (CompactEntry::Chunk(a), Entry::Chunk(b)) => prop_assert_eq!(a, b),
                    (CompactEntry::Span { prefix, len }, Entry::Span { id, len: l }) => {
                        prop_assert_eq!(&prefix[..], &id.0[..SPAN_PREFIX_LEN]);
                        prop_assert_eq!(len, l);
                    }
                    _ => prop_assert!(false, "entry kind changed"),
                }
            }
            // 23 B smaller for each span named (37 B, at most 14 compact); a chunk entry costs a
            // byte more at most (a varint length), the header five.
            let spans = entries.iter().filter(|e| matches!(e, Entry::Span { .. })).count();
            let chunks = entries.len() - spans;
            prop_assert!(encoded.len() + 23 * spans <= encode_extent_row(&entries).len() + 5 + chunks);
            // A row cut short is refused, never read as a shorter one.
            let cut = cut.index(encoded.len());
            prop_assert!(decode_row(&encoded[..cut]).is_err());
            // The full versions still decode as they did.
            prop_assert_eq!(decode_row(&encode_extent_row(&entries)).unwrap(), StoredRow::Full(entries));
        }

        #[test]
        fn pieces_tile_the_record_and_resynchronise_after_an_anchor(
            ids in proptest::collection::vec(any::<[u8; 32]>(), 0..300),
            cut in 0usize..300,
        ) {
            let refs: Vec<ChunkRef> = ids.iter().map(|id| ChunkRef { id: ChunkId(*id), len: 1 }).collect();
            let pieces = split_into_pieces(&refs);
            prop_assert_eq!(pieces.concat(), refs.clone());
            prop_assert!(pieces.iter().all(|p| !p.is_empty() && p.len() <= PIECE_MAX_REFS));
            // The same chunks behind other leading chunks: once an anchor that ends a piece in
            // both is passed, the pieces after it are the same.
            let cut = cut.min(refs.len());
            let tail = &refs[cut..];
            let alone = split_into_pieces(tail);
            let ends = |ps: &[&[ChunkRef]], offset: usize| -> Vec<usize> {
                let mut at = offset;
                ps.iter().map(|p| { at += p.len(); at }).collect()
            };
            let whole_ends: std::collections::HashSet<usize> = ends(&pieces, 0).into_iter().collect();
            let alone_ends = ends(&alone, cut);
            if let Some(first_shared) = alone_ends.iter().position(|e| whole_ends.contains(e)) {
                let after: std::collections::HashSet<usize> = alone_ends[first_shared..].iter().copied().collect();
                let whole_after: std::collections::HashSet<usize> = ends(&pieces, 0)
                    .into_iter()
                    .filter(|e| *e >= alone_ends[first_shared])
                    .collect();
                prop_assert_eq!(after, whole_after);
            }
        }

        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzzing::decode_anything(&data);
        }
    }
}
