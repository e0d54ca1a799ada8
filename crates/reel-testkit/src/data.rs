//! Test data.

/// `n` pseudo-random bytes from `seed` (xorshift64): incompressible, and no two seeds share a
/// chunk, so nothing dedups unless a test repeats a seed.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
