//! Helpers shared by the crate's unit tests.

/// Pseudo-random bytes (incompressible, no dedup).
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

/// Stream `id`'s whole contents.
pub fn read_stream(store: &crate::ChunkStore, id: u64) -> Vec<u8> {
    let stream = store.open_stream(crate::StreamId(id)).unwrap();
    let mut out = vec![0; stream.len() as usize];
    stream.read_at(0, &mut out).unwrap();
    out
}
