//! Deciding quickly whether a chunk is already stored, within a small RAM budget.
//!
//! The full chunk index lives on disk (the catalog's `chunks` table). In front of it:
//! - the set of chunks written but not yet in the catalog (`pending`);
//! - a locality cache of whole packs' tables of contents: every pack just written, and every
//!   pack in which a duplicate was found on disk, because a repeated stretch of a backup repeats
//!   the chunks that were written next to each other the first time;
//! - a Bloom filter over the *hooks* only: one chunk id in [`HOOK_ONE_IN`], chosen by its bits.
//!   Only a hook that misses the cache is looked up on disk; finding it loads its pack into the
//!   cache, and the rest of the repeated stretch then dedups from memory. A chunk that is not a
//!   hook and not cached is taken as new: at worst a few chunks at the start of a stretch whose
//!   pack is no longer cached are stored twice. This keeps RAM at about 1.6 bits per chunk
//!   (at most 3.2 bits, under 200 MB per TB of unique data at the default chunk size) instead of a full index.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::{ChunkId, ChunkLoc};

/// One chunk in this many is a hook (kept in the filter).
pub const HOOK_ONE_IN: u8 = 5;

/// Whether a chunk is a hook: decided by a byte of its id the filter's probes do not use.
pub fn is_hook(id: &ChunkId) -> bool {
    id.0[31].is_multiple_of(HOOK_ONE_IN)
}

/// A Bloom filter whose probes come straight from the (already uniform) chunk hash.
pub struct Bloom {
    bits: Vec<AtomicU64>,
    nbits: u64,
    inserted: AtomicU64,
    capacity: u64,
}

const BLOOM_PROBES: usize = 5;
/// About 2 % false positives at capacity.
const BLOOM_BITS_PER_KEY: u64 = 8;

/// Filter RAM per stored chunk at scale, in bits: 8 bits per hook, one hook per
/// [`HOOK_ONE_IN`] chunks, and up to twice that right after the filter doubles (it is sized at
/// twice its keys on open and when it fills). The filter's floor of 64 Ki keys dominates small
/// stores.
pub const FILTER_BITS_PER_CHUNK_MAX: f64 = 2.0 * BLOOM_BITS_PER_KEY as f64 / HOOK_ONE_IN as f64;

impl Bloom {
    /// A filter for `keys` keys (at least 64 Ki).
    pub fn with_capacity(keys: u64) -> Bloom {
        let capacity = keys.max(1 << 16);
        let nbits = (capacity * BLOOM_BITS_PER_KEY).div_ceil(64) * 64;
        Bloom {
            bits: (0..nbits / 64).map(|_| AtomicU64::new(0)).collect(),
            nbits,
            inserted: AtomicU64::new(0),
            capacity,
        }
    }

    fn probes(&self, id: &ChunkId) -> [u64; BLOOM_PROBES] {
        let mut out = [0u64; BLOOM_PROBES];
        for (i, p) in out.iter_mut().enumerate() {
            let word: [u8; 6] = id.0[i * 6..i * 6 + 6].try_into().unwrap_or_default();
            let mut w = [0u8; 8];
            w[..6].copy_from_slice(&word);
            // Multiply-shift maps a uniform 48-bit value onto 0..nbits without a power of two.
            *p = ((u128::from(u64::from_le_bytes(w)) * u128::from(self.nbits)) >> 48) as u64;
        }
        out
    }

    pub fn may_contain(&self, id: &ChunkId) -> bool {
        self.probes(id)
            .iter()
            .all(|&b| self.bits[(b / 64) as usize].load(Ordering::Relaxed) & (1 << (b % 64)) != 0)
    }

    pub fn insert(&self, id: &ChunkId) {
        for b in self.probes(id) {
            self.bits[(b / 64) as usize].fetch_or(1 << (b % 64), Ordering::Relaxed);
        }
        self.inserted.fetch_add(1, Ordering::Relaxed);
    }

    /// True when more chunks went in than the filter was sized for.
    pub fn is_overfull(&self) -> bool {
        self.inserted.load(Ordering::Relaxed) > self.capacity
    }

    pub fn memory_bytes(&self) -> u64 {
        self.bits.len() as u64 * 8
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

/// Hashes for maps keyed by chunk id. The id is already a uniform hash (BLAKE3), so SipHash
/// over its 32 bytes (and their length) only costs time on the hot paths (every chunk written
/// is looked up and reserved, every chunk read is looked up): this takes its first 8 bytes
/// through a folded multiply by a per-map random key and a finaliser with full avalanche.
/// Keyed, so data crafted to give ids with equal low bits does not pile into one bucket.
#[derive(Clone, Copy, Debug)]
pub struct IdHashBuilder {
    key: u64,
}

impl IdHashBuilder {
    pub fn new() -> IdHashBuilder {
        // std's per-process random keys, through SipHash: an odd 64-bit multiplier.
        let key = std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64) | 1;
        IdHashBuilder { key }
    }
}

impl Default for IdHashBuilder {
    fn default() -> Self {
        IdHashBuilder::new()
    }
}

impl BuildHasher for IdHashBuilder {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher {
            key: self.key,
            state: 0,
        }
    }
}

/// See [`IdHashBuilder`]. Correct (if not fast) for any key type: every write is mixed in.
pub struct IdHasher {
    key: u64,
    state: u64,
}

impl IdHasher {
    fn mix(&mut self, word: u64) {
        let product = u128::from(self.state ^ word) * u128::from(self.key);
        self.state = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // A chunk id arrives as one 32-byte write: its first 8 bytes are enough. Other
        // writes are mixed in whole, 8 bytes at a time.
        if bytes.len() == 32 {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[..8]);
            self.mix(u64::from_le_bytes(word));
            return;
        }
        for piece in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..piece.len()].copy_from_slice(piece);
            self.mix(u64::from_le_bytes(word) ^ ((piece.len() as u64) << 59));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        // A folded multiply leaves the low bits of its result weakly tied to input bits that
        // only reach the high half (ids equal in their low bits would share a few buckets):
        // a finaliser with full avalanche (MurmurHash3's fmix64, a bijection) spreads them.
        let mut h = self.state;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A set of chunk ids hashed with [`IdHashBuilder`].
pub type IdSet = HashSet<ChunkId, IdHashBuilder>;

/// Tables of contents of recently written or recently hit packs, evicted a pack at a time.
pub struct LocalityCache {
    map: HashMap<ChunkId, ChunkLoc, IdHashBuilder>,
    packs: VecDeque<(u64, Vec<ChunkId>)>,
    capacity_chunks: usize,
}

impl LocalityCache {
    pub fn new(capacity_chunks: usize) -> LocalityCache {
        LocalityCache {
            map: HashMap::with_hasher(IdHashBuilder::new()),
            packs: VecDeque::new(),
            capacity_chunks,
        }
    }

    pub fn get(&self, id: &ChunkId) -> Option<ChunkLoc> {
        self.map.get(id).copied()
    }

    pub fn contains_pack(&self, pack: u64) -> bool {
        self.packs.iter().any(|(p, _)| *p == pack)
    }

    pub fn insert_pack(
        &mut self,
        pack: u64,
        entries: impl IntoIterator<Item = (ChunkId, ChunkLoc)>,
    ) {
        if self.contains_pack(pack) {
            return;
        }
        let mut ids = Vec::new();
        for (id, loc) in entries {
            self.map.insert(id, loc);
            ids.push(id);
        }
        self.packs.push_back((pack, ids));
        while self.map.len() > self.capacity_chunks && self.packs.len() > 1 {
            if let Some((old, ids)) = self.packs.pop_front() {
                for id in ids {
                    if self.map.get(&id).is_some_and(|l| l.pack == old) {
                        self.map.remove(&id);
                    }
                }
            }
        }
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.packs.clear();
    }

    /// Approximate bytes held (entries plus hash-map overhead).
    pub fn memory_bytes(&self) -> u64 {
        (self.map.capacity() * (32 + ChunkLoc::ENCODED_LEN + 16)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> ChunkId {
        ChunkId::of(&n.to_le_bytes())
    }

    #[test]
    fn bloom_has_no_false_negatives_and_few_false_positives() {
        let bloom = Bloom::with_capacity(100_000);
        for n in 0..100_000 {
            bloom.insert(&id(n));
        }
        assert!((0..100_000).all(|n| bloom.may_contain(&id(n))));
        let fp = (100_000..200_000)
            .filter(|&n| bloom.may_contain(&id(n)))
            .count();
        assert!(fp < 3_500, "{fp} false positives in 100000");
        assert!(!bloom.is_overfull());
        assert_eq!(bloom.memory_bytes(), 100_000, "8 bits per key");
    }

    #[test]
    fn about_one_chunk_in_five_is_a_hook() {
        let hooks = (0..50_000).filter(|&n| is_hook(&id(n))).count();
        assert!((9_000..11_000).contains(&hooks), "{hooks} hooks in 50000");
    }

    /// Ids that agree in their low 20 bits (as crafted data could make them) still spread
    /// over the buckets of a map: the key reaches every output bit.
    #[test]
    fn ids_with_equal_low_bits_get_spread_hashes() {
        let build = IdHashBuilder::new();
        let mut buckets = HashSet::new();
        for n in 0u64..4096 {
            let mut id = [0u8; 32];
            id[..8].copy_from_slice(&((n << 20) | 0xabcde).to_le_bytes());
            buckets.insert(build.hash_one(ChunkId(id)) & 0xfff);
        }
        assert!(
            buckets.len() > 2400,
            "{} of 4096 buckets used",
            buckets.len()
        );
    }

    #[test]
    fn id_hashes_differ_per_map_and_agree_within_one() {
        let (a, b) = (IdHashBuilder::new(), IdHashBuilder::new());
        let ids: Vec<ChunkId> = (0..64).map(id).collect();
        assert!(ids.iter().all(|i| a.hash_one(i) == a.hash_one(i)));
        assert!(ids.iter().any(|i| a.hash_one(i) != b.hash_one(i)));
        let set: IdSet = ids.iter().copied().collect();
        assert!(ids.iter().all(|i| set.contains(i)));
        assert!(!set.contains(&id(64)));
    }

    #[test]
    fn locality_cache_evicts_whole_packs() {
        let loc = |pack| ChunkLoc {
            pack,
            blob_offset: 0,
            blob_stored: 1,
            blob_raw: 1,
            codec: crate::format::Codec::Raw,
            offset: 0,
            len: 1,
        };
        let mut cache = LocalityCache::new(10);
        cache.insert_pack(1, (0..8).map(|n| (id(n), loc(1))));
        cache.insert_pack(2, (8..16).map(|n| (id(n), loc(2))));
        assert!(cache.get(&id(0)).is_none(), "pack 1 should be evicted");
        assert_eq!(cache.get(&id(9)).map(|l| l.pack), Some(2));
    }
}
