//! The archive image of one cartridge: a format of our own, versioned, in pieces of bounded
//! size, each with its own BLAKE3, tied together by a manifest written last
//! (docs/design/archive.md has the byte layouts).
//!
//! Objects of generation `g` of cartridge `B` (keys in the archive location):
//!
//! ```text
//! B/<g:016x>.p<partition>.<index:08x>.piece   records and filemarks, in tape order
//! B/<g:016x>.manifest                        the cartridge info (with MAM) and every piece's digest
//! ```
//!
//! An image is complete exactly when its manifest exists and every piece it names reads back
//! with the digest it names. Decoders check the checksum first and never panic.

use reel_media::{CartridgeInfo, DecodeError, MAX_RECORD_LEN};

const PIECE_MAGIC: &[u8; 8] = b"reelARCP";
const MANIFEST_MAGIC: &[u8; 8] = b"reelARCM";
/// The only version written; decoders refuse any other.
pub const IMAGE_VERSION: u16 = 1;
const DIGEST: usize = 32;
const TAG_RECORD: u8 = 1;
const TAG_FILEMARKS: u8 = 2;
/// A record the drive encrypted, kept in its sealed form (added after version 1 images were
/// first written: an older reel refuses such a piece by its tag, never misreads it).
const TAG_ENCRYPTED_RECORD: u8 = 3;
/// Partitions a cartridge can have (SSC-5).
const MAX_PARTITIONS: usize = 4;
/// The largest piece size a writer may be given.
pub const MAX_PIECE_SIZE: usize = 256 << 20;
/// The largest piece object: a piece is cut once it reaches the piece size, so it holds at most
/// one record (tag, length, bytes) beyond it, its header and its digest. A manifest naming a
/// larger piece is refused, so no image object makes a reader allocate more.
pub const MAX_PIECE_BYTES: u64 =
    (MAX_PIECE_SIZE + 5 + MAX_RECORD_LEN as usize + PIECE_HEADER_MAX + DIGEST) as u64;
/// Magic, version, partition, barcode (length and up to 255 bytes), generation, index, first
/// object, then objects, entries and body length.
const PIECE_HEADER_MAX: usize = 8 + 2 + 1 + 1 + 255 + 8 + 4 + 8 + 20;

/// Why an image object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error("{what}: {len} bytes is too short")]
    TooShort { what: &'static str, len: usize },
    #[error("{what}: not an archive image object (bad magic)")]
    BadMagic { what: &'static str },
    #[error("{what}: image version {version} is not supported (this reel reads {IMAGE_VERSION})")]
    Version { what: &'static str, version: u16 },
    #[error("{what}: checksum mismatch (the object is damaged)")]
    Checksum { what: &'static str },
    #[error("{what}: malformed: {why}")]
    Malformed { what: &'static str, why: String },
    #[error("manifest: cartridge info: {0}")]
    Info(DecodeError),
}

fn malformed(what: &'static str, why: impl Into<String>) -> ImageError {
    ImageError::Malformed {
        what,
        why: why.into(),
    }
}

/// BLAKE3 of a whole object, as the manifest names pieces.
pub fn digest(object: &[u8]) -> [u8; DIGEST] {
    *blake3::hash(object).as_bytes()
}

/// Which piece this is: written into the piece and checked when it is read back, so a piece
/// of another cartridge, generation or position is refused rather than restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceHeader {
    pub barcode: String,
    pub generation: u64,
    pub partition: u8,
    pub index: u32,
    /// Logical object number of the piece's first record or filemark in its partition.
    pub first_object: u64,
}

/// One entry of a piece: a record, or a run of filemarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    Record(&'a [u8]),
    /// An encrypted record's sealed form.
    EncryptedRecord(&'a [u8]),
    Filemarks(u32),
}

/// A piece being filled: the header is reserved up front and completed by [`finish`], so the
/// body is never copied.
///
/// [`finish`]: PieceBuilder::finish
pub struct PieceBuilder {
    buf: Vec<u8>,
    counts_at: usize,
    objects: u64,
    entries: u32,
    data_bytes: u64,
}

impl PieceBuilder {
    /// Barcodes are at most 255 bytes (they are 6 to 8 characters in practice).
    pub fn new(header: &PieceHeader) -> PieceBuilder {
        let barcode = header.barcode.as_bytes();
        let barcode = &barcode[..barcode.len().min(255)];
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(PIECE_MAGIC);
        buf.extend_from_slice(&IMAGE_VERSION.to_le_bytes());
        buf.push(header.partition);
        buf.push(barcode.len() as u8);
        buf.extend_from_slice(barcode);
        buf.extend_from_slice(&header.generation.to_le_bytes());
        buf.extend_from_slice(&header.index.to_le_bytes());
        buf.extend_from_slice(&header.first_object.to_le_bytes());
        let counts_at = buf.len();
        // objects u64, entries u32, body length u64: filled in by `finish`.
        buf.extend_from_slice(&[0; 20]);
        PieceBuilder {
            buf,
            counts_at,
            objects: 0,
            entries: 0,
            data_bytes: 0,
        }
    }

    /// Appends a record (non-empty, at most `u32::MAX` bytes: a tape record always is).
    pub fn push_record(&mut self, data: &[u8]) {
        self.push(TAG_RECORD, data);
    }

    /// Appends an encrypted record's sealed form.
    pub fn push_encrypted_record(&mut self, sealed: &[u8]) {
        self.push(TAG_ENCRYPTED_RECORD, sealed);
    }

    fn push(&mut self, tag: u8, data: &[u8]) {
        debug_assert!(!data.is_empty() && u32::try_from(data.len()).is_ok());
        self.buf.push(tag);
        self.buf
            .extend_from_slice(&(data.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(data);
        self.objects += 1;
        self.entries += 1;
        self.data_bytes += data.len() as u64;
    }

    /// Appends `count` filemarks (0 is nothing).
    pub fn push_filemarks(&mut self, count: u32) {
        if count == 0 {
            return;
        }
        self.buf.push(TAG_FILEMARKS);
        self.buf.extend_from_slice(&count.to_le_bytes());
        self.objects += u64::from(count);
        self.entries += 1;
    }

    /// Encoded size so far.
    pub fn len(&self) -> usize {
        self.buf.len() + DIGEST
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Logical objects (records and filemarks) so far.
    pub fn objects(&self) -> u64 {
        self.objects
    }

    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// The object's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let body_len = (self.buf.len() - self.counts_at - 20) as u64;
        let at = self.counts_at;
        self.buf[at..at + 8].copy_from_slice(&self.objects.to_le_bytes());
        self.buf[at + 8..at + 12].copy_from_slice(&self.entries.to_le_bytes());
        self.buf[at + 12..at + 20].copy_from_slice(&body_len.to_le_bytes());
        let sum = digest(&self.buf);
        self.buf.extend_from_slice(&sum);
        self.buf
    }
}

/// A bounds-checked reader over a checksummed object.
struct Reader<'a> {
    what: &'static str,
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], ImageError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| malformed(self.what, "truncated"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, ImageError> {
        Ok(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ImageError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ImageError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ImageError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ImageError> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    fn barcode(&mut self) -> Result<String, ImageError> {
        let len = self.u8()? as usize;
        let bytes = self.bytes(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed(self.what, "barcode is not UTF-8"))
    }
}

/// Checks magic, checksum and version; returns a reader positioned after the version, over the
/// object without its digest.
fn open<'a>(
    what: &'static str,
    magic: &[u8; 8],
    object: &'a [u8],
) -> Result<Reader<'a>, ImageError> {
    if object.len() < magic.len() + 2 + DIGEST {
        return Err(ImageError::TooShort {
            what,
            len: object.len(),
        });
    }
    if &object[..8] != magic {
        return Err(ImageError::BadMagic { what });
    }
    let (content, sum) = object.split_at(object.len() - DIGEST);
    // The checksum first: a damaged object is reported as damaged, whatever else it breaks.
    if digest(content) != sum {
        return Err(ImageError::Checksum { what });
    }
    let mut r = Reader {
        what,
        data: content,
        at: 8,
    };
    let version = r.u16()?;
    if version != IMAGE_VERSION {
        return Err(ImageError::Version { what, version });
    }
    Ok(r)
}

/// A decoded piece: its header and entries borrowed from the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<'a> {
    pub header: PieceHeader,
    pub entries: Vec<Entry<'a>>,
    /// Logical objects in the piece.
    pub objects: u64,
}

pub fn decode_piece(object: &[u8]) -> Result<Piece<'_>, ImageError> {
    const WHAT: &str = "piece";
    let mut r = open(WHAT, PIECE_MAGIC, object)?;
    let partition = r.u8()?;
    let barcode = r.barcode()?;
    let header = PieceHeader {
        barcode,
        partition,
        generation: r.u64()?,
        index: r.u32()?,
        first_object: r.u64()?,
    };
    if usize::from(partition) >= MAX_PARTITIONS {
        return Err(malformed(WHAT, format!("partition {partition}")));
    }
    let objects = r.u64()?;
    let entry_count = r.u32()?;
    let body_len = r.u64()?;
    if body_len != r.remaining() as u64 {
        return Err(malformed(
            WHAT,
            format!("body of {body_len} bytes, {} present", r.remaining()),
        ));
    }
    // Each entry takes at least 5 bytes: a count beyond that is a lie, not an allocation.
    if u64::from(entry_count) * 5 > body_len {
        return Err(malformed(WHAT, format!("{entry_count} entries")));
    }
    let mut entries = Vec::with_capacity(entry_count as usize);
    let mut counted = 0u64;
    for _ in 0..entry_count {
        match r.u8()? {
            tag @ (TAG_RECORD | TAG_ENCRYPTED_RECORD) => {
                let len = r.u32()?;
                if len == 0 {
                    return Err(malformed(WHAT, "empty record"));
                }
                let data = r.bytes(len as usize)?;
                entries.push(if tag == TAG_RECORD {
                    Entry::Record(data)
                } else {
                    Entry::EncryptedRecord(data)
                });
                counted += 1;
            }
            TAG_FILEMARKS => {
                let n = r.u32()?;
                if n == 0 {
                    return Err(malformed(WHAT, "run of 0 filemarks"));
                }
                entries.push(Entry::Filemarks(n));
                counted += u64::from(n);
            }
            tag => return Err(malformed(WHAT, format!("entry tag {tag}"))),
        }
    }
    if r.remaining() != 0 {
        return Err(malformed(WHAT, "bytes after the last entry"));
    }
    if counted != objects {
        return Err(malformed(
            WHAT,
            format!("{counted} objects, header says {objects}"),
        ));
    }
    Ok(Piece {
        header,
        entries,
        objects,
    })
}

/// A piece as the manifest names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PieceRef {
    pub objects: u64,
    pub size: u64,
    pub digest: [u8; DIGEST],
}

/// One partition of the image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionImage {
    /// Logical objects (records and filemarks): the end of data.
    pub objects: u64,
    pub filemarks: u64,
    /// Host bytes of its records.
    pub data_bytes: u64,
    pub pieces: Vec<PieceRef>,
}

/// The image's table of contents, written last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub barcode: String,
    pub generation: u64,
    /// Unix seconds when the image was written.
    pub created: u64,
    /// The cartridge's identity, counters and cartridge memory (MAM) when it was archived.
    pub info: CartridgeInfo,
    pub partitions: Vec<PartitionImage>,
}

impl Manifest {
    /// Host bytes of every partition's records.
    pub fn data_bytes(&self) -> u64 {
        self.partitions.iter().map(|p| p.data_bytes).sum()
    }

    /// Bytes of every object of the image (pieces and this manifest).
    pub fn image_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .flat_map(|p| &p.pieces)
            .map(|p| p.size)
            .sum::<u64>()
            + self.encode().len() as u64
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        buf.extend_from_slice(MANIFEST_MAGIC);
        buf.extend_from_slice(&IMAGE_VERSION.to_le_bytes());
        let barcode = self.barcode.as_bytes();
        let barcode = &barcode[..barcode.len().min(255)];
        buf.push(barcode.len() as u8);
        buf.extend_from_slice(barcode);
        buf.extend_from_slice(&self.generation.to_le_bytes());
        buf.extend_from_slice(&self.created.to_le_bytes());
        let info = self.info.to_bytes();
        buf.extend_from_slice(&(info.len() as u32).to_le_bytes());
        buf.extend_from_slice(&info);
        buf.push(self.partitions.len() as u8);
        for p in &self.partitions {
            buf.extend_from_slice(&p.objects.to_le_bytes());
            buf.extend_from_slice(&p.filemarks.to_le_bytes());
            buf.extend_from_slice(&p.data_bytes.to_le_bytes());
            buf.extend_from_slice(&(p.pieces.len() as u32).to_le_bytes());
            for piece in &p.pieces {
                buf.extend_from_slice(&piece.objects.to_le_bytes());
                buf.extend_from_slice(&piece.size.to_le_bytes());
                buf.extend_from_slice(&piece.digest);
            }
        }
        let sum = digest(&buf);
        buf.extend_from_slice(&sum);
        buf
    }

    pub fn decode(object: &[u8]) -> Result<Manifest, ImageError> {
        const WHAT: &str = "manifest";
        const PIECE_REF: usize = 8 + 8 + DIGEST;
        let mut r = open(WHAT, MANIFEST_MAGIC, object)?;
        let barcode = r.barcode()?;
        let generation = r.u64()?;
        let created = r.u64()?;
        let info_len = r.u32()? as usize;
        let info = CartridgeInfo::from_bytes(r.bytes(info_len)?).map_err(ImageError::Info)?;
        if info.barcode().as_str() != barcode {
            return Err(malformed(
                WHAT,
                format!(
                    "names {barcode} but holds the info of {}",
                    info.barcode().as_str()
                ),
            ));
        }
        let count = r.u8()? as usize;
        if count == 0 || count > MAX_PARTITIONS || count != info.partition_capacities().len() {
            return Err(malformed(
                WHAT,
                format!(
                    "{count} partitions for a cartridge of {}",
                    info.partition_capacities().len()
                ),
            ));
        }
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            let objects = r.u64()?;
            let filemarks = r.u64()?;
            let data_bytes = r.u64()?;
            let n = r.u32()? as usize;
            if n.saturating_mul(PIECE_REF) > r.remaining() {
                return Err(malformed(WHAT, format!("{n} pieces")));
            }
            let mut pieces = Vec::with_capacity(n);
            for _ in 0..n {
                let piece = PieceRef {
                    objects: r.u64()?,
                    size: r.u64()?,
                    digest: r.array()?,
                };
                if piece.size > MAX_PIECE_BYTES {
                    return Err(malformed(WHAT, format!("a piece of {} bytes", piece.size)));
                }
                pieces.push(piece);
            }
            let sum = pieces
                .iter()
                .try_fold(0u64, |acc, p| acc.checked_add(p.objects));
            if sum != Some(objects) || filemarks > objects {
                return Err(malformed(
                    WHAT,
                    format!("pieces hold {sum:?} objects, the partition {objects}"),
                ));
            }
            partitions.push(PartitionImage {
                objects,
                filemarks,
                data_bytes,
                pieces,
            });
        }
        if r.remaining() != 0 {
            return Err(malformed(WHAT, "bytes after the last partition"));
        }
        Ok(Manifest {
            barcode,
            generation,
            created,
            info,
            partitions,
        })
    }
}

/// Key of the manifest of generation `generation` of `barcode`.
pub fn manifest_key(barcode: &str, generation: u64) -> String {
    format!("{barcode}/{generation:016x}.manifest")
}

/// Key of piece `index` of partition `partition`.
pub fn piece_key(barcode: &str, generation: u64, partition: u8, index: u32) -> String {
    format!("{barcode}/{generation:016x}.p{partition}.{index:08x}.piece")
}

/// The prefix under which every object of every generation of `barcode` lives.
pub fn cartridge_prefix(barcode: &str) -> String {
    format!("{barcode}/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use reel_media::{Barcode, MediaType, UnixTime};

    #[derive(Debug, Clone)]
    enum Owned {
        Record(Vec<u8>),
        EncryptedRecord(Vec<u8>),
        Filemarks(u32),
    }

    fn entries() -> impl Strategy<Value = Vec<Owned>> {
        prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..300).prop_map(Owned::Record),
                prop::collection::vec(any::<u8>(), 1..300).prop_map(Owned::EncryptedRecord),
                (1u32..5).prop_map(Owned::Filemarks),
            ],
            0..20,
        )
    }

    fn header(partition: u8, generation: u64, index: u32, first_object: u64) -> PieceHeader {
        PieceHeader {
            barcode: "ARC001L9".into(),
            generation,
            partition,
            index,
            first_object,
        }
    }

    fn build(h: &PieceHeader, es: &[Owned]) -> Vec<u8> {
        let mut b = PieceBuilder::new(h);
        for e in es {
            match e {
                Owned::Record(d) => b.push_record(d),
                Owned::EncryptedRecord(d) => b.push_encrypted_record(d),
                Owned::Filemarks(n) => b.push_filemarks(*n),
            }
        }
        let predicted = b.len();
        let out = b.finish();
        assert_eq!(predicted, out.len());
        out
    }

    fn manifest(pieces: Vec<Vec<(u64, u64)>>, generation: u64) -> Manifest {
        let info = CartridgeInfo::new(
            Barcode::new("ARC001L9").unwrap(),
            MediaType::Lto9,
            UnixTime(1_700_000_000),
        );
        let partitions = pieces
            .into_iter()
            .take(1)
            .map(|ps| PartitionImage {
                objects: ps.iter().map(|p| p.0).sum(),
                filemarks: 0,
                data_bytes: ps.iter().map(|p| p.1).sum(),
                pieces: ps
                    .iter()
                    .map(|&(objects, size)| PieceRef {
                        objects,
                        size,
                        digest: digest(&size.to_le_bytes()),
                    })
                    .collect(),
            })
            .collect();
        Manifest {
            barcode: "ARC001L9".into(),
            generation,
            created: 1_700_000_100,
            info,
            partitions,
        }
    }

    proptest! {
        #[test]
        fn pieces_round_trip(es in entries(), p in 0u8..4, g: u64, i: u32, f: u64) {
            let h = header(p, g, i, f);
            let bytes = build(&h, &es);
            let piece = decode_piece(&bytes).unwrap();
            prop_assert_eq!(&piece.header, &h);
            prop_assert_eq!(piece.entries.len(), es.len());
            for (got, want) in piece.entries.iter().zip(&es) {
                match (got, want) {
                    (Entry::Record(a), Owned::Record(b)) => prop_assert_eq!(*a, b.as_slice()),
                    (Entry::EncryptedRecord(a), Owned::EncryptedRecord(b)) => prop_assert_eq!(*a, b.as_slice()),
                    (Entry::Filemarks(a), Owned::Filemarks(b)) => prop_assert_eq!(a, b),
                    _ => prop_assert!(false, "entry kinds differ"),
                }
            }
        }

        #[test]
        fn any_damage_to_a_piece_is_detected(es in entries(), at: prop::sample::Index, bit in 0u8..8) {
            let bytes = build(&header(0, 7, 0, 0), &es);
            let mut bad = bytes.clone();
            let i = at.index(bad.len());
            bad[i] ^= 1 << bit;
            prop_assert!(decode_piece(&bad).is_err());
            // Truncated anywhere: refused too.
            prop_assert!(decode_piece(&bytes[..i]).is_err());
        }

        #[test]
        fn manifests_round_trip_and_damage_is_detected(
            pieces in prop::collection::vec(prop::collection::vec((0u64..1000, 0..=MAX_PIECE_BYTES), 0..10), 1..2),
            g: u64,
            at: prop::sample::Index,
        ) {
            let m = manifest(pieces, g);
            let bytes = m.encode();
            let decoded = Manifest::decode(&bytes).unwrap();
            prop_assert_eq!(decoded.encode(), bytes.clone());
            prop_assert_eq!(decoded, m);
            let mut bad = bytes.clone();
            let i = at.index(bad.len());
            bad[i] = bad[i].wrapping_add(1);
            prop_assert!(Manifest::decode(&bad).is_err());
            prop_assert!(Manifest::decode(&bytes[..i]).is_err());
        }

        #[test]
        fn decoders_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
            crate::fuzzing::decode_archive_image(&data);
        }

        /// Garbage behind a valid magic and checksum reaches the field checks.
        #[test]
        fn checksummed_garbage_is_refused_without_panicking(body in prop::collection::vec(any::<u8>(), 0..200)) {
            for magic in [PIECE_MAGIC, MANIFEST_MAGIC] {
                let mut obj = magic.to_vec();
                obj.extend_from_slice(&IMAGE_VERSION.to_le_bytes());
                obj.extend_from_slice(&body);
                let sum = digest(&obj);
                obj.extend_from_slice(&sum);
                crate::fuzzing::decode_archive_image(&obj);
            }
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let bytes = build(&header(0, 1, 0, 0), &[Owned::Record(vec![1, 2, 3])]);
        let mut bad = bytes.clone();
        bad[30] ^= 0xFF;
        assert_eq!(
            decode_piece(&bad).unwrap_err(),
            ImageError::Checksum { what: "piece" }
        );
        assert_eq!(
            Manifest::decode(&bytes).unwrap_err(),
            ImageError::BadMagic { what: "manifest" }
        );
        // A future version, correctly checksummed, is refused by version.
        let mut future = bytes[..bytes.len() - DIGEST].to_vec();
        future[8] = 2;
        let sum = digest(&future);
        future.extend_from_slice(&sum);
        assert_eq!(
            decode_piece(&future).unwrap_err(),
            ImageError::Version {
                what: "piece",
                version: 2
            }
        );
        assert!(
            decode_piece(&bytes[..10])
                .unwrap_err()
                .to_string()
                .contains("too short")
        );
    }

    #[test]
    fn a_manifest_naming_a_piece_larger_than_any_writer_makes_is_refused() {
        let bytes = manifest(vec![vec![(1, MAX_PIECE_BYTES + 1)]], 1).encode();
        assert!(
            Manifest::decode(&bytes)
                .unwrap_err()
                .to_string()
                .contains("a piece of")
        );
    }

    #[test]
    fn keys_are_valid_backend_keys_and_never_nest() {
        let m = manifest_key("ARC001L9", 0xabc);
        let p = piece_key("ARC001L9", 0xabc, 3, 17);
        assert_eq!(m, "ARC001L9/0000000000000abc.manifest");
        assert_eq!(p, "ARC001L9/0000000000000abc.p3.00000011.piece");
        assert!(!p.starts_with(&format!("{m}/")) && !m.starts_with(&format!("{p}/")));
    }
}
