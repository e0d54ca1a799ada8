//! Small, fast, hand-written PRNG and hashing helpers.
//!
//! Everything the generator produces is derived from these, so their output
//! must never change: a change would silently alter every generated stream.

/// Domain tags keep the different derived streams independent.
pub(crate) const TAG_BLOCK: u64 = 0x626c_6f63_6b5f_7631; // "block_v1"
pub(crate) const TAG_INCOMPRESSIBLE: u64 = 0x696e_636f_6d70_7231; // "incompr1"
pub(crate) const TAG_PERM: u64 = 0x7065_726d_5f76_3131; // "perm_v11"
pub(crate) const TAG_INSERT: u64 = 0x696e_7365_7274_7631; // "insertv1"

/// SplitMix64 finaliser: a good 64-bit mixing function.
#[inline]
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hash two words into one (order sensitive).
#[inline]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    splitmix64(a ^ splitmix64(b).rotate_left(17))
}

/// wyrand: one 64x64->128 multiply per 8 output bytes.
#[derive(Clone, Debug)]
pub(crate) struct WyRand(u64);

impl WyRand {
    #[inline]
    pub(crate) fn new(seed: u64) -> Self {
        WyRand(seed)
    }

    #[inline(always)]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// Uniform value in `0..n` (Lemire's multiply-shift; the tiny bias is irrelevant here).
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Fill `out` with random bytes, 8 bytes per PRNG step.
    #[inline]
    pub(crate) fn fill_bytes(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rem = chunks.into_remainder();
        if !rem.is_empty() {
            let w = self.next_u64().to_le_bytes();
            rem.copy_from_slice(&w[..rem.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wyrand_is_stable_and_spread() {
        let mut a = WyRand::new(1);
        let mut b = WyRand::new(1);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
        let mut c = WyRand::new(7);
        for n in [1u64, 2, 3, 1000] {
            for _ in 0..100 {
                assert!(c.below(n) < n);
            }
        }
    }

    #[test]
    fn fill_bytes_handles_remainders() {
        for len in 0..20 {
            let mut v = vec![0u8; len];
            WyRand::new(3).fill_bytes(&mut v);
            let mut w = vec![0u8; 24];
            WyRand::new(3).fill_bytes(&mut w);
            // A fill is a prefix of a longer fill when the lengths share whole words.
            assert_eq!(&v[..len / 8 * 8], &w[..len / 8 * 8]);
        }
    }
}
