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

use std::collections::{HashMap, VecDeque};
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

/// Tables of contents of recently written or recently hit packs, evicted a pack at a time.
pub struct LocalityCache {
    map: HashMap<ChunkId, ChunkLoc>,
    packs: VecDeque<(u64, Vec<ChunkId>)>,
    capacity_chunks: usize,
}

impl LocalityCache {
    pub fn new(capacity_chunks: usize) -> LocalityCache {
        LocalityCache {
            map: HashMap::new(),
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
