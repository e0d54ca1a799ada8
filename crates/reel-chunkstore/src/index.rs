//! Deciding quickly whether a chunk is already stored, within a small RAM budget.
//!
//! The full chunk index lives on disk (the catalog's `chunks` table). In front of it:
//! - a Bloom filter over every stored chunk id (about 7 bits per chunk), which answers "new"
//!   for almost every new chunk without touching the disk;
//! - the set of chunks written but not yet in the catalog (`pending`);
//! - a locality cache of whole packs' tables of contents: when a duplicate is found on disk, the
//!   rest of the pack it lives in is loaded, because a repeated stretch of a backup repeats the
//!   chunks that were written next to each other the first time.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::{ChunkId, ChunkLoc};

/// A Bloom filter whose probes come straight from the (already uniform) chunk hash.
pub struct Bloom {
    bits: Vec<AtomicU64>,
    mask: u64,
    inserted: AtomicU64,
    capacity: u64,
}

const BLOOM_PROBES: usize = 4;
const BLOOM_BITS_PER_CHUNK: u64 = 7;

impl Bloom {
    pub fn with_capacity(chunks: u64) -> Bloom {
        let bits = (chunks.max(1 << 16) * BLOOM_BITS_PER_CHUNK).next_power_of_two();
        Bloom {
            bits: (0..bits / 64).map(|_| AtomicU64::new(0)).collect(),
            mask: bits - 1,
            inserted: AtomicU64::new(0),
            capacity: bits / BLOOM_BITS_PER_CHUNK,
        }
    }

    fn probes(&self, id: &ChunkId) -> [u64; BLOOM_PROBES] {
        let mut out = [0u64; BLOOM_PROBES];
        for (i, p) in out.iter_mut().enumerate() {
            let word: [u8; 8] = id.0[i * 8..i * 8 + 8].try_into().unwrap_or_default();
            *p = u64::from_le_bytes(word) & self.mask;
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
        assert!(fp < 6_000, "{fp} false positives in 100000");
        assert!(!bloom.is_overfull());
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
