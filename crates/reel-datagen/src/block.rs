//! Content of one unique block.
//!
//! A compressible block is a sequence of *periods*; each period is a random
//! run (32..=96 bytes of PRNG output) followed by a compressible run (a single
//! byte, or a 2-, 4- or 8-byte pattern, repeated). The compressible run's length
//! is the random run's length scaled by `(1 - randomness) / randomness` with a
//! ±25 % jitter, so on average a fraction `randomness` of the bytes is random.
//! Runs are whole 8-byte words, which keeps synthesis at a few GB/s.
//! An incompressible block is PRNG output from start to end.
//!
//! Every byte is a pure function of `(seed, id, block_size, randomness)` (and
//! the incompressible flag, itself a pure function of `(seed, id, share)`).
//! Generating a shorter buffer yields a prefix of the longer one.

use crate::rng::{TAG_BLOCK, TAG_INCOMPRESSIBLE, WyRand, mix};

/// Runs are whole 8-byte words (the block is a sequence of little-endian
/// `u64`s; a buffer whose length is not a multiple of 8 gets the prefix of the
/// last word). Shortest random run, in words (32 bytes).
const RANDOM_RUN_MIN: u64 = 4;
/// Longest random run, in words (96 bytes).
const RANDOM_RUN_MAX: u64 = 12;
/// Compressible run length bounds, in words, used when `randomness == 0`.
const PLAIN_RUN_MIN: u64 = 16;
const PLAIN_RUN_MAX: u64 = 48;

/// Per-configuration constants for block synthesis.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockParams {
    seed: u64,
    block_size: usize,
    randomness_bits: u64,
    /// `(1 - r) / r` in 16.16 fixed point; `None` when every byte is random (r >= 1);
    /// `Some(u128::MAX)` marks r <= 0 (no random runs at all).
    scale_q16: Option<u128>,
    incompressible_share: f64,
}

impl BlockParams {
    pub(crate) fn new(
        seed: u64,
        block_size: usize,
        randomness: f64,
        incompressible_share: f64,
    ) -> Self {
        let scale_q16 = if randomness >= 1.0 {
            None
        } else if randomness <= 0.0 {
            Some(u128::MAX)
        } else {
            // Clamp so absurdly small fractions cannot overflow; runs are cut at the block end anyway.
            let s = ((1.0 - randomness) / randomness * 65536.0).min(1e30);
            Some(s as u128)
        };
        BlockParams {
            seed,
            block_size,
            randomness_bits: randomness.to_bits(),
            scale_q16,
            incompressible_share,
        }
    }

    /// Whether unique block `id` is entirely random.
    pub(crate) fn is_incompressible(&self, id: u64) -> bool {
        let share = self.incompressible_share;
        if share <= 0.0 {
            return false;
        }
        if share >= 1.0 {
            return true;
        }
        let h = mix(self.seed ^ TAG_INCOMPRESSIBLE, id);
        ((h >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < share
    }

    fn block_seed(&self, id: u64) -> u64 {
        let h = mix(self.seed ^ TAG_BLOCK, id);
        let h = mix(h, self.block_size as u64);
        mix(h, self.randomness_bits)
    }

    /// Write (a prefix of) unique block `id` into `out`.
    pub(crate) fn write(&self, id: u64, out: &mut [u8]) {
        let mut rng = WyRand::new(self.block_seed(id));
        let scale = match self.scale_q16 {
            Some(s) if !self.is_incompressible(id) => s,
            _ => {
                rng.fill_bytes(out);
                return;
            }
        };
        let mut words = out.chunks_exact_mut(8);
        // Each period: a random run, then a compressible run; `Run::next` says which.
        let mut run = Runs {
            rng,
            scale,
            pending_pattern: None,
        };
        loop {
            let (pattern, len) = run.next();
            let mut wrote = 0u64;
            match pattern {
                None => {
                    for c in words.by_ref().take(len as usize) {
                        c.copy_from_slice(&run.rng.next_u64().to_le_bytes());
                        wrote += 1;
                    }
                }
                Some(w) => {
                    let b = w.to_le_bytes();
                    for c in words.by_ref().take(len as usize) {
                        c.copy_from_slice(&b);
                        wrote += 1;
                    }
                }
            }
            if wrote < len {
                // Out of whole words: the tail gets the prefix of the next word.
                let rem = words.into_remainder();
                if !rem.is_empty() {
                    let w = pattern.unwrap_or_else(|| run.rng.next_u64()).to_le_bytes();
                    let k = rem.len();
                    rem.copy_from_slice(&w[..k]);
                }
                return;
            }
        }
    }
}

/// The run sequence of one compressible block.
struct Runs {
    rng: WyRand,
    scale: u128,
    /// Compressible run (word, length) that follows the random run just handed out.
    pending_pattern: Option<(u64, u64)>,
}

impl Runs {
    /// Next run: `(None, words)` for random, `(Some(word), words)` for a repeated word.
    #[inline]
    fn next(&mut self) -> (Option<u64>, u64) {
        if let Some((w, len)) = self.pending_pattern.take() {
            return (Some(w), len);
        }
        let x = self.rng.next_u64();
        let pat = self.rng.next_u64();
        let word = match (x >> 40) & 3 {
            0 => (pat & 0xff).wrapping_mul(0x0101_0101_0101_0101),
            1 => (pat & 0xffff).wrapping_mul(0x0001_0001_0001_0001),
            2 => (pat & 0xffff_ffff).wrapping_mul(0x0000_0001_0000_0001),
            _ => pat,
        };
        if self.scale == u128::MAX {
            let len = PLAIN_RUN_MIN + (x & 0xffff) % (PLAIN_RUN_MAX - PLAIN_RUN_MIN + 1);
            return (Some(word), len);
        }
        let run_r = RANDOM_RUN_MIN + (x & 0xffff) % (RANDOM_RUN_MAX - RANDOM_RUN_MIN + 1);
        // jitter factor in [0.75, 1.25) as 768..1280 / 1024; rounded to whole words
        let jitter = 768 + ((x >> 16) & 511) as u128;
        let len = ((u128::from(run_r) * self.scale * jitter + (1 << 25)) >> 26).min(1 << 40) as u64;
        if len > 0 {
            self.pending_pattern = Some((word, len));
        }
        (None, run_r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_property() {
        let p = BlockParams::new(9, 4096, 0.25, 0.0);
        let mut full = vec![0u8; 4096];
        p.write(5, &mut full);
        for len in [0, 1, 7, 8, 33, 1000, 4095] {
            let mut part = vec![0u8; len];
            p.write(5, &mut part);
            assert_eq!(part[..], full[..len]);
        }
    }

    #[test]
    fn extremes_do_not_panic() {
        for r in [0.0, 1e-12, 0.001, 0.5, 0.999, 1.0] {
            let p = BlockParams::new(1, 8192, r, 0.0);
            let mut b = vec![0u8; 8192];
            p.write(0, &mut b);
        }
    }

    #[test]
    fn random_fraction_tracks_randomness() {
        for r in [0.1, 0.25, 0.5, 0.9] {
            let p = BlockParams::new(3, 1 << 20, r, 0.0);
            let mut runs = Runs {
                rng: WyRand::new(1),
                scale: p.scale_q16.unwrap(),
                pending_pattern: None,
            };
            let (mut random, mut total) = (0u64, 0u64);
            for _ in 0..100_000 {
                let (pat, len) = runs.next();
                random += if pat.is_none() { len } else { 0 };
                total += len;
            }
            let frac = random as f64 / total as f64;
            assert!((frac - r).abs() < 0.005, "r={r} measured {frac}");
        }
    }
}
