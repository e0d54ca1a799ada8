//! Content-defined chunking that also respects record boundaries.
//!
//! The cut-point test is FastCDC's (Xia et al., USENIX ATC 2016): a gear rolling hash, no cut
//! before `min`, a harder mask below `avg` and an easier one above it ("normalized chunking"), a
//! forced cut at `max`. Because the gear hash only remembers the last 64 bytes, cut points are a
//! function of local content, so data shifted by inserted bytes re-synchronises within a chunk or
//! two, and the same bytes written with another record size chunk the same way away from record
//! edges.
//!
//! What is ours: the end of every record of at least `avg` bytes is also a cut point, and so is
//! the end of a run of smaller records once the chunk reaches `boundary_min`. A record repeated later in the stream (the same file in the next full
//! backup) then starts and ends on chunk boundaries and dedups completely, whatever its neighbours
//! are; plain CDC would lose the chunks that straddle each record edge.

/// Chunk size parameters. All sizes in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkerParams {
    pub min: u32,
    /// Average; must be a power of two.
    pub avg: u32,
    pub max: u32,
    /// The end of a record shorter than `avg` cuts the current chunk only if the chunk is at
    /// least this long, so streams of tiny records do not make tiny chunks.
    pub boundary_min: u32,
}

impl ChunkerParams {
    /// What a new store cuts with: 2 KiB on average. Larger chunks would mean fewer catalog
    /// rows and less CPU, but re-blocked and shifted copies lose about a chunk per moved
    /// record edge: at 4 KiB they fall below 90 % of ideal dedup (`tests/dedup.rs`; measured
    /// in `docs/design/efficiency.md` §5).
    pub const DEFAULT: ChunkerParams = ChunkerParams::with_avg(2048);

    /// What every store created before the parameters were recorded in its catalog was cut
    /// with: such a store keeps them, whatever the default becomes.
    pub const LEGACY: ChunkerParams = ChunkerParams::with_avg(2048);

    /// The parameters for an average of `avg` bytes in reel's fixed ratios: no cut before a
    /// quarter of it, a forced cut at eight times it, record ends cut from half of it.
    pub const fn with_avg(avg: u32) -> ChunkerParams {
        ChunkerParams {
            min: avg / 4,
            avg,
            max: avg * 8,
            boundary_min: avg / 2,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.avg.is_power_of_two() || self.avg < 256 {
            return Err(format!(
                "average chunk size {} must be a power of two ≥ 256",
                self.avg
            ));
        }
        if !(64 <= self.min && self.min < self.avg && self.avg < self.max) {
            return Err(format!(
                "chunk sizes must satisfy 64 ≤ min < avg < max (got {}/{}/{})",
                self.min, self.avg, self.max
            ));
        }
        if self.max > 1 << 24 {
            return Err(format!("maximum chunk size {} exceeds 16 MiB", self.max));
        }
        Ok(())
    }
}

/// Gear table: 256 pseudo-random words from splitmix64 with a fixed seed. Changing it changes
/// where chunks are cut, which loses dedup against existing stores (never correctness).
const GEAR: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut state: u64 = 0x7265_656c_2d63_6463; // "reel-cdc"
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
};

/// Streaming chunker state for one stream. Feed bytes with [`Chunker::scan`]; it reports where
/// the current chunk ends. The caller owns the bytes.
#[derive(Clone, Debug)]
pub struct Chunker {
    params: ChunkerParams,
    mask_small: u64,
    mask_large: u64,
    hash: u64,
    /// Bytes of the current (unfinished) chunk already scanned.
    len: u32,
}

impl Chunker {
    pub fn new(params: ChunkerParams) -> Chunker {
        let bits = params.avg.trailing_zeros();
        // Normalization level 2: two more bits below avg, two fewer above (FastCDC §3.4).
        // Masks use the hash's top bits, which depend on the most recent 64 bytes.
        let top = |n: u32| !0u64 << (64 - n);
        Chunker {
            params,
            mask_small: top(bits + 2),
            mask_large: top(bits.saturating_sub(2).max(1)),
            hash: 0,
            len: 0,
        }
    }

    pub fn params(&self) -> ChunkerParams {
        self.params
    }

    /// Bytes of the current chunk scanned so far.
    pub fn pending(&self) -> u32 {
        self.len
    }

    /// Scans `data`, which continues the current chunk. Returns `Some(n)` if the current chunk
    /// ends after `data[..n]` (the state is then reset for the next chunk), or `None` if all of
    /// `data` belongs to the current chunk.
    pub fn scan(&mut self, data: &[u8]) -> Option<usize> {
        let ChunkerParams { min, avg, max, .. } = self.params;
        let (min, avg, max) = (min as usize, avg as usize, max as usize);
        let start = self.len as usize;
        let end_total = start + data.len();
        // No cut before `min`, and the gear hash only remembers 64 bytes, so rolling can start
        // 64 bytes before `min` (from a zero hash); bytes fed earlier are skipped unhashed.
        let warm = min.saturating_sub(64);
        let mut from = start;
        if from < warm {
            from = warm;
            self.hash = 0;
        }
        if end_total <= from {
            self.len = end_total as u32;
            return None;
        }
        let mut hash = self.hash;
        // Phase 1: below `avg`, the harder mask; phase 2: up to `max`, the easier one. Each
        // loop walks a plain slice so the compiler drops bounds checks (GEAR has 256 entries).
        let small = &data[from - start..avg.min(end_total).max(from) - start];
        if let Some(i) = roll(&mut hash, small, self.mask_small, min.saturating_sub(from)) {
            return self.cut(from - start + i + 1);
        }
        let pos = from + small.len();
        let large = &data[pos - start..max.min(end_total).max(pos) - start];
        if let Some(i) = roll(&mut hash, large, self.mask_large, 0) {
            return self.cut(pos - start + i + 1);
        }
        if pos + large.len() == max {
            return self.cut(max - start);
        }
        self.hash = hash;
        self.len = end_total as u32;
        None
    }

    /// The end of a record of `record_len` bytes: returns true if the current chunk should end
    /// here (it is then reset). Ending every large record on a cut point costs a short chunk at
    /// its tail but lets the record dedup whole wherever it repeats.
    pub fn boundary(&mut self, record_len: u64) -> bool {
        let whole_record = record_len >= u64::from(self.params.avg);
        if self.len > 0 && (whole_record || self.len >= self.params.boundary_min) {
            self.reset();
            true
        } else {
            false
        }
    }

    /// Forgets the current chunk (the caller ended it).
    pub fn reset(&mut self) {
        self.len = 0;
        self.hash = 0;
    }

    fn cut(&mut self, n: usize) -> Option<usize> {
        self.reset();
        Some(n)
    }
}

/// Rolls the gear hash over `bytes`; returns the index of the first byte after which the hash
/// matches `mask`, ignoring the first `skip` bytes (still rolled: they are the hash's history).
#[inline(always)]
fn roll(hash: &mut u64, bytes: &[u8], mask: u64, skip: usize) -> Option<usize> {
    let skip = skip.min(bytes.len());
    let mut h = *hash;
    for &b in &bytes[..skip] {
        h = (h << 1).wrapping_add(GEAR[b as usize]);
    }
    // Two bytes per step (FastCDC 2020, "rolling two bytes"): the hash after the second byte is
    // (h << 2) + (g0 << 1) + g1, so the dependent chain is one shift and one add per two bytes;
    // the hash after the first byte is computed beside it for its own test.
    let tested = &bytes[skip..];
    let mut pairs = tested.chunks_exact(2);
    for (j, pair) in pairs.by_ref().enumerate() {
        let g0 = GEAR[pair[0] as usize];
        let g1 = GEAR[pair[1] as usize];
        let h1 = (h << 1).wrapping_add(g0);
        let h2 = (h << 2).wrapping_add((g0 << 1).wrapping_add(g1));
        if h1 & mask == 0 {
            *hash = h1;
            return Some(skip + 2 * j);
        }
        if h2 & mask == 0 {
            *hash = h2;
            return Some(skip + 2 * j + 1);
        }
        h = h2;
    }
    if let [b] = pairs.remainder() {
        h = (h << 1).wrapping_add(GEAR[*b as usize]);
        if h & mask == 0 {
            *hash = h;
            return Some(tested.len() - 1 + skip);
        }
    }
    *hash = h;
    None
}

/// Splits a whole buffer into chunk lengths (no record boundaries): a convenience for tests and
/// the benchmark's raw chunking speed.
pub fn chunk_lengths(params: ChunkerParams, data: &[u8]) -> Vec<usize> {
    let mut chunker = Chunker::new(params);
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(n) = chunker.scan(rest) {
        out.push(n);
        rest = &rest[n..];
    }
    if !rest.is_empty() {
        out.push(rest.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 32) as u8
            })
            .collect()
    }

    #[test]
    fn sizes_stay_within_bounds_and_average_is_near_target() {
        for p in [ChunkerParams::LEGACY, ChunkerParams::DEFAULT] {
            let data = noise(16 << 20, 1);
            let lens = chunk_lengths(p, &data);
            assert_eq!(lens.iter().sum::<usize>(), data.len());
            for &l in &lens[..lens.len() - 1] {
                assert!(
                    l >= p.min as usize && l <= p.max as usize,
                    "chunk of {l} bytes"
                );
            }
            // Normalized chunking lands a little above the target (the min skips a quarter).
            let avg = data.len() / lens.len();
            let target = p.avg as usize;
            assert!(
                (target * 7 / 8..target * 7 / 4).contains(&avg),
                "average chunk {avg} far from the {target}-byte target"
            );
        }
    }

    #[test]
    fn feeding_in_pieces_cuts_where_one_buffer_does() {
        let p = ChunkerParams::DEFAULT;
        let data = noise(1 << 20, 2);
        let whole = chunk_lengths(p, &data);
        let mut chunker = Chunker::new(p);
        let mut lens = Vec::new();
        let mut cur = 0usize;
        let mut sizes = [777usize, 1, 450, 63, 2048, 5, 17000].iter().cycle();
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let n = (*sizes.next().unwrap()).min(data.len() - at);
            pieces.push(&data[at..at + n]);
            at += n;
        }
        for piece in pieces {
            let mut rest = piece;
            while let Some(n) = chunker.scan(rest) {
                lens.push(cur + n);
                cur = 0;
                rest = &rest[n..];
            }
            cur += rest.len();
        }
        if cur > 0 {
            lens.push(cur);
        }
        assert_eq!(lens, whole);
    }

    #[test]
    fn shifted_data_resynchronises() {
        let p = ChunkerParams::DEFAULT;
        let data = noise(2 << 20, 3);
        let mut shifted = noise(13, 4);
        shifted.extend_from_slice(&data);
        let ends = |lens: Vec<usize>, skip: usize| -> std::collections::HashSet<usize> {
            let mut at = 0;
            lens.into_iter()
                .map(|l| {
                    at += l;
                    at - skip.min(at)
                })
                .collect()
        };
        let a = ends(chunk_lengths(p, &data), 0);
        let b = ends(chunk_lengths(p, &shifted), 13);
        let common = a.intersection(&b).count();
        assert!(
            common * 100 >= a.len() * 95,
            "only {common} of {} cut points survive",
            a.len()
        );
    }

    #[test]
    fn boundary_cuts_only_long_enough_chunks() {
        let p = ChunkerParams::DEFAULT;
        let mut c = Chunker::new(p);
        assert_eq!(c.scan(&noise(100, 5)), None);
        assert!(
            !c.boundary(100),
            "100-byte chunk must continue across a small record's end"
        );
        assert!(c.boundary(1 << 20), "a large record's end always cuts");
        assert_eq!(c.pending(), 0);
        assert!(!c.boundary(1 << 20), "nothing to cut");
        // A run of equal bytes never matches the masks, so the chunk grows without a cut; once
        // it reaches `boundary_min`, even a small record's end cuts it.
        let run = vec![0u8; p.boundary_min as usize + 100];
        assert_eq!(c.scan(&run), None);
        assert_eq!(c.pending() as usize, run.len());
        assert!(
            c.boundary(10),
            "a chunk of boundary_min bytes ends at any record end"
        );
        assert_eq!(c.pending(), 0);
    }

    proptest! {
        #[test]
        fn any_input_chunks_into_its_own_length(data in proptest::collection::vec(any::<u8>(), 0..70000),
                                                avg_bits in 8u32..14) {
            let avg = 1 << avg_bits;
            let p = ChunkerParams { min: avg / 4, avg, max: avg * 8, boundary_min: avg / 2 };
            let lens = chunk_lengths(p, &data);
            prop_assert_eq!(lens.iter().sum::<usize>(), data.len());
            prop_assert!(lens.iter().all(|&l| l <= p.max as usize && l > 0));
        }
    }
}
