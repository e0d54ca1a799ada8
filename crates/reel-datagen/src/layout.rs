//! Which unique block sits in which slot of the stream.

use crate::rng::{TAG_PERM, WyRand, mix};
use crate::{GenConfig, Order};

/// Maps stream slots (block-sized positions in the base stream) to unique block ids.
///
/// * [`Order::Scattered`]: the slots are grouped into windows of
///   `k * R` slots, where `k = max(1, window_blocks / R)`. Window `w` holds the
///   unique ids `w*k .. w*k + k`, each exactly `R` times, in a seeded
///   Fisher–Yates shuffle that is then repaired so that equal ids are not
///   adjacent wherever that is possible. Ids never repeat across windows.
/// * [`Order::InOrder`]: with `N` slots and `U = ceil(N / R)` unique blocks,
///   slot `s` holds id `s % U` — the unique sequence is emitted `R` times in the
///   same order, like repeated full backups (the last pass may be partial).
#[derive(Clone, Debug)]
pub struct SlotMap {
    seed: u64,
    slots: u64,
    kind: Kind,
    /// Cached permutation of one window: (window index, local ids).
    cache: Option<(u64, Vec<u64>)>,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    InOrder { unique: u64 },
    Scattered { k: u64, r: u64 },
}

impl SlotMap {
    /// Slot map for `cfg` (assumed valid).
    pub fn new(cfg: &GenConfig) -> Self {
        let bs = cfg.block_size.max(1) as u64;
        let slots = cfg.total_bytes.div_ceil(bs);
        let r = u64::from(cfg.redundancy.max(1));
        let kind = match cfg.order {
            Order::InOrder => Kind::InOrder {
                unique: slots.div_ceil(r).max(1),
            },
            Order::Scattered { window_blocks } => Kind::Scattered {
                k: (window_blocks as u64 / r).max(1),
                r,
            },
        };
        SlotMap {
            seed: cfg.seed,
            slots,
            kind,
            cache: None,
        }
    }

    /// Number of slots in the stream (the last one may be partial).
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// Slots per window (`k * R`) for scattered order; `None` for in-order.
    pub fn window_slots(&self) -> Option<u64> {
        match self.kind {
            Kind::Scattered { k, r } => Some(k * r),
            Kind::InOrder { .. } => None,
        }
    }

    /// Unique block id at `slot`.
    pub fn id(&mut self, slot: u64) -> u64 {
        match self.kind {
            Kind::InOrder { unique } => slot % unique,
            Kind::Scattered { k, r } => {
                let win = slot / (k * r);
                let local = (slot % (k * r)) as usize;
                win * k + self.window(win, k, r)[local]
            }
        }
    }

    fn window(&mut self, win: u64, k: u64, r: u64) -> &[u64] {
        if self.cache.as_ref().map(|c| c.0) != Some(win) {
            let mut v = self.cache.take().map(|c| c.1).unwrap_or_default();
            build_window(mix(self.seed ^ TAG_PERM, win), k, r, &mut v);
            self.cache = Some((win, v));
        }
        &self.cache.as_ref().expect("just filled").1
    }

    /// Distinct ids and unique bytes of the whole base stream of `total_bytes`
    /// bytes cut into `block_size` slots: `(unique_blocks, unique_bytes)`.
    pub(crate) fn unique_footprint(&mut self, block_size: u64, total_bytes: u64) -> (u64, u64) {
        let n = self.slots;
        if n == 0 {
            return (0, 0);
        }
        let tail = total_bytes - (n - 1) * block_size; // 1..=block_size
        let short = block_size - tail;
        match self.kind {
            Kind::InOrder { unique } => {
                let blocks = unique.min(n);
                // The cut block is only short-changed if this is its sole appearance.
                let lone = n - 1 < unique;
                (blocks, blocks * block_size - if lone { short } else { 0 })
            }
            Kind::Scattered { k, r } => {
                let e = k * r;
                let last_win = (n - 1) / e;
                let m = (n - last_win * e) as usize; // slots used in the last window, 1..=e
                let ids = self.window(last_win, k, r)[..m].to_vec();
                let mut seen = vec![false; k as usize];
                let mut distinct = 0u64;
                for &i in &ids[..m - 1] {
                    if !seen[i as usize] {
                        seen[i as usize] = true;
                        distinct += 1;
                    }
                }
                let last = ids[m - 1] as usize;
                let mut bytes = 0;
                if !seen[last] {
                    distinct += 1;
                    bytes = tail;
                }
                let blocks = last_win * k + distinct;
                (
                    blocks,
                    (blocks - u64::from(!seen[last])) * block_size + bytes,
                )
            }
        }
    }
}

/// Fill `v` with `0..k`, each `r` times, shuffled and de-clustered.
fn build_window(seed: u64, k: u64, r: u64, v: &mut Vec<u64>) {
    v.clear();
    v.extend((0..k).flat_map(|i| std::iter::repeat_n(i, r as usize)));
    let mut rng = WyRand::new(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    // Repair: whenever v[i] repeats v[i-1], swap in the next later value that differs.
    // Only positions >= i change, so earlier positions stay fixed.
    for i in 1..v.len() {
        if v[i] == v[i - 1] {
            match (i + 1..v.len()).find(|&j| v[j] != v[i - 1]) {
                Some(j) => v.swap(i, j),
                None => break, // the rest is all one id: adjacency is unavoidable
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(order: Order, r: u32, blocks: u64) -> GenConfig {
        GenConfig {
            block_size: 512,
            redundancy: r,
            order,
            total_bytes: blocks * 512,
            ..GenConfig::default()
        }
    }

    #[test]
    fn each_id_exactly_r_times_per_window_and_no_collisions() {
        for r in [1u32, 2, 3, 8, 16] {
            let c = cfg(Order::Scattered { window_blocks: 200 }, r, 10_000);
            let mut m = SlotMap::new(&c);
            let e = m.window_slots().unwrap();
            let k = (200 / u64::from(r)).max(1);
            assert_eq!(e, k * u64::from(r));
            let full_windows = m.slots() / e;
            for w in 0..full_windows {
                let mut counts = std::collections::HashMap::new();
                for s in w * e..(w + 1) * e {
                    *counts.entry(m.id(s)).or_insert(0u32) += 1;
                }
                assert_eq!(counts.len() as u64, k);
                for (id, n) in counts {
                    assert_eq!(n, r, "id {id} in window {w}");
                    assert!(
                        id >= w * k && id < (w + 1) * k,
                        "id {id} outside window {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn repeats_are_rarely_adjacent() {
        for (r, window) in [(2u32, 64usize), (8, 1024), (16, 4096), (8, 16)] {
            let c = cfg(
                Order::Scattered {
                    window_blocks: window,
                },
                r,
                50_000,
            );
            let mut m = SlotMap::new(&c);
            let ids: Vec<u64> = (0..m.slots()).map(|s| m.id(s)).collect();
            let adjacent = ids.windows(2).filter(|w| w[0] == w[1]).count();
            let rate = adjacent as f64 / ids.len() as f64;
            assert!(rate < 0.001, "r={r} window={window}: adjacency rate {rate}");
            // And the shuffle is real: repeats are spread over the window.
            let mut last = std::collections::HashMap::new();
            let (mut sum, mut cnt) = (0u64, 0u64);
            for (s, id) in ids.iter().enumerate() {
                if let Some(p) = last.insert(*id, s) {
                    sum += (s - p) as u64;
                    cnt += 1;
                }
            }
            // (With k ids per window, a uniform spread puts repeats ~k slots apart.)
            let k = (window as u64 / u64::from(r)).max(1);
            let mean_gap = sum as f64 / cnt.max(1) as f64;
            assert!(
                mean_gap >= k as f64 / 2.0,
                "r={r}: mean gap {mean_gap} for k={k}"
            );
        }
    }

    #[test]
    fn in_order_repeats_the_sequence() {
        let c = cfg(Order::InOrder, 4, 103);
        let mut m = SlotMap::new(&c);
        let u = 103u64.div_ceil(4);
        for s in 0..103 {
            assert_eq!(m.id(s), s % u);
        }
    }

    #[test]
    fn footprint_matches_brute_force() {
        for order in [Order::InOrder, Order::Scattered { window_blocks: 37 }] {
            for r in [1u32, 2, 5] {
                for total in [
                    1u64,
                    511,
                    512,
                    513,
                    512 * 36 + 7,
                    512 * 37,
                    512 * 100 + 1,
                    100_000,
                ] {
                    let c = GenConfig {
                        block_size: 512,
                        redundancy: r,
                        order,
                        total_bytes: total,
                        ..GenConfig::default()
                    };
                    let mut m = SlotMap::new(&c);
                    let mut best = std::collections::HashMap::new();
                    for s in 0..m.slots() {
                        let len = (total - s * 512).min(512);
                        let e = best.entry(m.id(s)).or_insert(0u64);
                        *e = (*e).max(len);
                    }
                    let want = (best.len() as u64, best.values().sum::<u64>());
                    assert_eq!(
                        m.unique_footprint(512, total),
                        want,
                        "{order:?} r={r} total={total}"
                    );
                }
            }
        }
    }
}
