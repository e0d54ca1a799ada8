//! Journal compaction: a checkpoint of the whole catalog in the back end, so that recovery
//! reads one snapshot and the journal objects after it instead of every journal object since
//! the store began, and the journal objects it covers can be deleted.
//!
//! A checkpoint of journal sequence `seq` is the catalog exactly as replaying the complete
//! groups among journals `1..=seq` builds it (taken from a read snapshot opened at the durable
//! commit that ended group `seq`, while no other catalog change could be made):
//!
//! - **parts** `catalog/checkpoint/<seq:016x>-<part:08x>.part`: the catalog's rows as put ops,
//!   in table then key order, cut into objects of about [`PART_RAW_BYTES`] of encoded ops, each
//!   in the journal object format (`journal.rs`) with the part number as its sequence;
//! - then the **manifest** `catalog/checkpoint/<seq:016x>.ckpt`, the commit point: the parts'
//!   sizes and BLAKE3 hashes. Without it the parts are debris of an interrupted checkpoint.
//!
//! Both are created with create-only puts. Only once the manifest is stored are the journal
//! objects `..=seq` and older checkpoints deleted (the write-back cache uploads `catalog/` keys
//! and deletes in the order they were queued, so the deletes reach the bucket after the
//! manifest). A stale writer cannot harm a checkpoint: the catalog at a given sequence is the
//! same whoever writes it, and a create-only put never replaces an object.
//!
//! ```text
//! manifest = magic "REELCKPT" (8) | version u16 | seq u64 | ops u64 | parts u32
//!          | parts × (bytes u64 | BLAKE3 of the part object (32)) | BLAKE3 of everything before (32)
//! ```

use reel_backend::Key;

use crate::format::FormatError;

const MAGIC: &[u8; 8] = b"REELCKPT";
/// 2: span bodies may hold pieces (catalog format 3); 3: chunk locations may name checked blobs
/// (catalog format 4); 4: no chunk rows, the pack names rebuild the index (catalog format 5,
/// journal version 8); 5: span bodies as stored, placed ones with the retired names they read
/// (journal version 9, `efficiency.md` §38); 6: compact extent rows and bodies of pieces
/// (catalog format 9, journal version 10). Older checkpoints are read as well.
const VERSION: u16 = 6;
const HASH_LEN: usize = 32;
const PART_LEN: usize = 8 + HASH_LEN;
/// A checkpoint is cut into parts once their encoded ops reach about this many bytes.
pub const PART_RAW_BYTES: usize = 32 << 20;
/// What one journal object costs a recovery beyond its bytes (a GET and a durable catalog
/// commit: 2.2-2.5 ms against versitygw on loopback, tens of ms against a remote bucket), in
/// bytes of replay: the store checkpoints once the journal since the last checkpoint weighs as
/// much as the checkpoint (`StoreConfig::checkpoint_min_bytes`), so checkpoints upload at most
/// about what they save a recovery from reading.
pub const JOURNAL_OBJECT_WEIGHT: u64 = 256 << 10;
/// Refuses manifests naming absurd numbers of parts before allocating for them.
const MAX_PARTS: u32 = 1 << 20;

/// Where checkpoints live in the back end.
pub const CHECKPOINT_PREFIX: &str = "catalog/checkpoint/";

/// The manifest of the checkpoint of journal `seq`.
pub fn manifest_key(seq: u64) -> Key {
    // A fixed ASCII pattern is always a valid key.
    Key::new(format!("{CHECKPOINT_PREFIX}{seq:016x}.ckpt")).expect("valid checkpoint key")
}

/// Part `part` of the checkpoint of journal `seq`.
pub fn part_key(seq: u64, part: u32) -> Key {
    Key::new(format!("{CHECKPOINT_PREFIX}{seq:016x}-{part:08x}.part")).expect("valid part key")
}

/// What a key under [`CHECKPOINT_PREFIX`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointKey {
    Manifest { seq: u64 },
    Part { seq: u64, part: u32 },
}

impl CheckpointKey {
    pub fn seq(self) -> u64 {
        match self {
            CheckpointKey::Manifest { seq } | CheckpointKey::Part { seq, .. } => seq,
        }
    }
}

pub fn parse_key(key: &str) -> Option<CheckpointKey> {
    let name = key.strip_prefix(CHECKPOINT_PREFIX)?;
    let hex_u64 = |h: &str| (h.len() == 16).then(|| u64::from_str_radix(h, 16).ok())?;
    if let Some(seq) = name.strip_suffix(".ckpt") {
        return Some(CheckpointKey::Manifest { seq: hex_u64(seq)? });
    }
    let (seq, part) = name.strip_suffix(".part")?.split_once('-')?;
    if part.len() != 8 {
        return None;
    }
    Some(CheckpointKey::Part {
        seq: hex_u64(seq)?,
        part: u32::from_str_radix(part, 16).ok()?,
    })
}

/// One part as the manifest names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartInfo {
    /// The part object's length in bytes.
    pub bytes: u64,
    pub hash: [u8; 32],
}

impl PartInfo {
    pub fn of(object: &[u8]) -> PartInfo {
        PartInfo {
            bytes: object.len() as u64,
            hash: *blake3::hash(object).as_bytes(),
        }
    }
}

/// The commit point of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The journal sequence the checkpoint stands for: replay continues at `seq + 1`.
    pub seq: u64,
    /// Ops in all parts.
    pub ops: u64,
    pub parts: Vec<PartInfo>,
}

impl Manifest {
    /// Bytes of all parts.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(30 + self.parts.len() * PART_LEN + HASH_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.ops.to_le_bytes());
        out.extend_from_slice(&(self.parts.len() as u32).to_le_bytes());
        for p in &self.parts {
            out.extend_from_slice(&p.bytes.to_le_bytes());
            out.extend_from_slice(&p.hash);
        }
        let hash = blake3::hash(&out);
        out.extend_from_slice(hash.as_bytes());
        out
    }

    /// Decodes the manifest stored under [`manifest_key`]`(expected_seq)`.
    pub fn decode(bytes: &[u8], expected_seq: u64) -> Result<Manifest, FormatError> {
        let bad = |reason: String| FormatError {
            what: "catalog checkpoint manifest",
            reason,
        };
        const FIXED: usize = 8 + 2 + 8 + 8 + 4;
        if bytes.len() < FIXED + HASH_LEN {
            return Err(bad(format!("{} bytes is too short", bytes.len())));
        }
        let (body, hash) = bytes.split_at(bytes.len() - HASH_LEN);
        if blake3::hash(body).as_bytes() != hash {
            return Err(bad("checksum mismatch".into()));
        }
        if &body[..8] != MAGIC {
            return Err(bad("bad magic".into()));
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&body[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let version = u16::from_le_bytes([body[8], body[9]]);
        if version == 0 || version > VERSION {
            return Err(bad(format!(
                "version {version} (this reel reads versions 1 to {VERSION})"
            )));
        }
        let seq = u64_at(10);
        if seq != expected_seq {
            return Err(bad(format!(
                "holds sequence {seq} but is stored as {expected_seq}"
            )));
        }
        let ops = u64_at(18);
        let count = u32::from_le_bytes([body[26], body[27], body[28], body[29]]);
        if count > MAX_PARTS || body.len() != FIXED + count as usize * PART_LEN {
            return Err(bad(format!(
                "{count} parts in {} bytes",
                body.len() - FIXED
            )));
        }
        let parts = body[FIXED..]
            .chunks_exact(PART_LEN)
            .map(|p| {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&p[..8]);
                let mut hash = [0u8; 32];
                hash.copy_from_slice(&p[8..]);
                PartInfo {
                    bytes: u64::from_le_bytes(bytes),
                    hash,
                }
            })
            .collect();
        Ok(Manifest { seq, ops, parts })
    }
}

/// Entry point for `fuzz/fuzz_targets/journal.rs` (not an API).
#[doc(hidden)]
pub fn fuzz_manifest(data: &[u8]) {
    let seq = |b: &[u8]| {
        b.get(10..18)
            .map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
    };
    let _ = Manifest::decode(data, seq(data));
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(blake3::hash(data).as_bytes());
    if let Ok(m) = Manifest::decode(&sealed, seq(&sealed)) {
        let again = Manifest::decode(&m.encode(), m.seq).expect("a re-encoded manifest decodes");
        assert_eq!(again, m, "round trip changed the manifest");
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = parse_key(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_manifest() -> impl Strategy<Value = Manifest> {
        (
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec((any::<u64>(), any::<[u8; 32]>()), 0..20),
        )
            .prop_map(|(seq, ops, parts)| Manifest {
                seq,
                ops,
                parts: parts
                    .into_iter()
                    .map(|(bytes, hash)| PartInfo { bytes, hash })
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn manifests_round_trip(m in arb_manifest()) {
            prop_assert_eq!(Manifest::decode(&m.encode(), m.seq).unwrap(), m);
        }

        #[test]
        fn any_flipped_bit_is_refused(m in arb_manifest(), at in any::<usize>(), bit in 0u8..8) {
            let mut bytes = m.encode();
            let i = at % bytes.len();
            bytes[i] ^= 1 << bit;
            prop_assert!(Manifest::decode(&bytes, m.seq).is_err());
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), seq in 0u64..3) {
            let _ = Manifest::decode(&bytes, seq);
        }

        #[test]
        fn keys_round_trip(seq in any::<u64>(), part in any::<u32>()) {
            prop_assert_eq!(parse_key(manifest_key(seq).as_str()), Some(CheckpointKey::Manifest { seq }));
            prop_assert_eq!(parse_key(part_key(seq, part).as_str()), Some(CheckpointKey::Part { seq, part }));
        }
    }

    #[test]
    fn a_manifest_under_another_sequence_is_refused() {
        let m = Manifest {
            seq: 9,
            ops: 1,
            parts: vec![],
        };
        let err = Manifest::decode(&m.encode(), 10).unwrap_err();
        assert!(err.reason.contains("sequence 9"), "{err}");
    }

    #[test]
    fn keys_sort_by_sequence_and_foreign_names_are_not_checkpoints() {
        assert!(manifest_key(9).as_str() < manifest_key(10).as_str());
        assert!(part_key(9, 1).as_str() < part_key(9, 2).as_str());
        assert_eq!(parse_key("catalog/checkpoint/12.ckpt"), None);
        assert_eq!(parse_key("catalog/journal/0000000000000001.jrnl"), None);
        assert_eq!(
            parse_key("catalog/checkpoint/0000000000000001-1.part"),
            None
        );
    }
}
