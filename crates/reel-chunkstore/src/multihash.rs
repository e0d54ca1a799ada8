//! BLAKE3 of many short inputs at once, each result equal to `blake3::hash` of that input.
//!
//! A 2 KiB chunk is two of BLAKE3's 1 KiB leaves: too few for the SIMD lanes (16 with AVX-512)
//! that `blake3::hash` fills only from one long input, so chunks hashed one by one run at a
//! fraction of BLAKE3's long-input speed. Here the chunks of a whole record share the lanes:
//! the full leaves with the same index (BLAKE3 spec §2.4: a leaf's counter is its index, so
//! leaves in one SIMD pass must share it) are compressed together, and so are the leading
//! 64-byte blocks of last leaves of the same length class; each last block is one compression.
//! The tree above the leaves (spec §2.1: the left subtree holds the largest power of two of
//! leaves that leaves at least one for the right) is merged with `blake3::hazmat`.
//!
//! It uses blake3's `platform` module, public but hidden from its docs ("for benchmarks"):
//! the blake3 version is pinned exactly in Cargo.toml for that reason, and the tests below
//! compare every length class against `blake3::hash`.

use blake3::IncrementCounter;
use blake3::hazmat::{ChainingValue, Mode, merge_subtrees_non_root, merge_subtrees_root};
use blake3::platform::Platform;

use crate::format::ChunkId;

/// BLAKE3's leaf ("chunk" in the spec, not ours) and block sizes.
const LEAF_LEN: usize = 1024;
const BLOCK_LEN: usize = 64;
/// The initial chaining value of the unkeyed hash (spec §2.2: SHA-256's IV).
const IV: [u32; 8] = [
    0x6A09_E667,
    0xBB67_AE85,
    0x3C6E_F372,
    0xA54F_F53A,
    0x510E_527F,
    0x9B05_688C,
    0x1F83_D9AB,
    0x5BE0_CD19,
];
/// Domain flags (spec §2.1, table 3).
const CHUNK_START: u8 = 1 << 0;
const CHUNK_END: u8 = 1 << 1;
const ROOT: u8 = 1 << 3;

/// The hash of every input, in order, into `out` (cleared first).
pub fn hash_all(inputs: &[&[u8]], out: &mut Vec<ChunkId>) {
    let platform = Platform::detect();
    out.clear();
    // Leaf chaining values of inputs with more than one leaf, input `i`'s from `first_cv[i]`.
    let mut first_cv = Vec::with_capacity(inputs.len());
    let mut total_cvs = 0;
    for input in inputs {
        first_cv.push(total_cvs);
        let leaves = leaf_count(input.len());
        if leaves > 1 {
            total_cvs += leaves;
        }
    }
    let mut cvs: Vec<ChainingValue> = vec![[0; 32]; total_cvs];
    let mut lanes_out = Vec::new();

    // Full leaves of multi-leaf inputs, one SIMD pass per leaf index.
    let max_leaves = inputs
        .iter()
        .map(|i| leaf_count(i.len()))
        .max()
        .unwrap_or(0);
    let mut batch: Vec<&[u8]> = Vec::with_capacity(inputs.len());
    let mut owners: Vec<usize> = Vec::with_capacity(inputs.len());
    for leaf in 0..max_leaves {
        batch.clear();
        owners.clear();
        for (i, input) in inputs.iter().enumerate() {
            let start = leaf * LEAF_LEN;
            if leaf_count(input.len()) > 1 && start + LEAF_LEN <= input.len() {
                // The rest of the input, not just the leaf: see `OVERREAD`.
                batch.push(&input[start..]);
                owners.push(first_cv[i] + leaf);
            }
        }
        if batch.is_empty() {
            continue;
        }
        compress_prefixes(
            &platform,
            LEAF_LEN / BLOCK_LEN,
            &batch,
            leaf as u64,
            CHUNK_END,
            &mut lanes_out,
        );
        for (k, &at) in owners.iter().enumerate() {
            cvs[at].copy_from_slice(&lanes_out[k * 32..k * 32 + 32]);
        }
    }

    // The last leaf of each input, unless it is full and not the root (done above): its
    // leading whole blocks in SIMD passes grouped by (block count, leaf index), then its last
    // block alone with CHUNK_END (and ROOT when it is the only leaf).
    let mut tails: Vec<Tail> = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let leaves = leaf_count(input.len());
        let leaf = leaves - 1;
        let bytes = input.len() - leaf * LEAF_LEN;
        if leaves > 1 && bytes == LEAF_LEN {
            continue;
        }
        let blocks = bytes.div_ceil(BLOCK_LEN).max(1);
        tails.push(Tail {
            input: i,
            leaf,
            lead_blocks: blocks - 1,
            cv: IV,
        });
    }
    tails.sort_unstable_by_key(|t| (t.lead_blocks, t.leaf));
    let mut start = 0;
    while start < tails.len() {
        let key = (tails[start].lead_blocks, tails[start].leaf);
        let end = start
            + tails[start..]
                .iter()
                .take_while(|t| (t.lead_blocks, t.leaf) == key)
                .count();
        let (lead_blocks, leaf) = key;
        if lead_blocks > 0 {
            batch.clear();
            batch.extend(
                tails[start..end]
                    .iter()
                    .map(|t| &inputs[t.input][leaf * LEAF_LEN..]),
            );
            compress_prefixes(
                &platform,
                lead_blocks,
                &batch,
                leaf as u64,
                0,
                &mut lanes_out,
            );
            for (k, t) in tails[start..end].iter_mut().enumerate() {
                t.cv = words(&lanes_out[k * 32..k * 32 + 32]);
            }
        }
        start = end;
    }
    // Each tail's last block: CHUNK_END, and ROOT when the leaf is the input's only one (its
    // chaining value is then the hash: spec §2.6, the first 32 output bytes).
    let mut roots: Vec<Option<ChunkId>> = vec![None; inputs.len()];
    for t in &mut tails {
        let input = inputs[t.input];
        let leaves = leaf_count(input.len());
        let from = t.leaf * LEAF_LEN + t.lead_blocks * BLOCK_LEN;
        let last = &input[from..];
        let mut block = [0u8; BLOCK_LEN];
        block[..last.len()].copy_from_slice(last);
        let mut flags = CHUNK_END;
        if t.lead_blocks == 0 {
            flags |= CHUNK_START;
        }
        if leaves == 1 {
            flags |= ROOT;
        }
        platform.compress_in_place(&mut t.cv, &block, last.len() as u8, t.leaf as u64, flags);
        let bytes = bytes_of(&t.cv);
        if leaves == 1 {
            roots[t.input] = Some(ChunkId(bytes));
        } else {
            cvs[first_cv[t.input] + t.leaf] = bytes;
        }
    }
    for (i, input) in inputs.iter().enumerate() {
        let leaves = leaf_count(input.len());
        let id = match roots[i] {
            Some(id) => id,
            None => {
                let tree = &cvs[first_cv[i]..first_cv[i] + leaves];
                let split = left_leaves(leaves);
                let left = subtree(&tree[..split]);
                let right = subtree(&tree[split..]);
                ChunkId(*merge_subtrees_root(&left, &right, Mode::Hash).as_bytes())
            }
        };
        out.push(id);
    }
}

/// The last leaf of an input still to be finished.
struct Tail {
    input: usize,
    leaf: usize,
    /// Whole blocks before its last block (0..=15).
    lead_blocks: usize,
    /// The chaining value after the lead blocks (IV before any).
    cv: [u32; 8],
}

/// BLAKE3 leaves in an input of `len` bytes (an empty input has one, empty).
fn leaf_count(len: usize) -> usize {
    len.div_ceil(LEAF_LEN).max(1)
}

/// Leaves in the left subtree of a tree over `leaves` (> 1) leaves: the largest power of two
/// that leaves at least one leaf on the right (spec §2.1).
fn left_leaves(leaves: usize) -> usize {
    debug_assert!(leaves > 1);
    1 << (usize::BITS - 1 - (leaves - 1).leading_zeros())
}

/// The chaining value of a non-root subtree over `cvs`.
fn subtree(cvs: &[ChainingValue]) -> ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    let split = left_leaves(cvs.len());
    merge_subtrees_non_root(&subtree(&cvs[..split]), &subtree(&cvs[split..]), Mode::Hash)
}

/// The chaining values after the first `blocks` blocks of each input (each at least that long)
/// as leaf number `leaf`, CHUNK_START on the first block and `flags_end` on the last, 32 bytes
/// per input into `out`. The block count is a const parameter of blake3's SIMD kernels.
fn compress_prefixes(
    platform: &Platform,
    blocks: usize,
    inputs: &[&[u8]],
    leaf: u64,
    flags_end: u8,
    out: &mut Vec<u8>,
) {
    out.clear();
    out.resize(inputs.len() * 32, 0);
    macro_rules! by_blocks {
        ($($n:literal)*) => {
            match blocks {
                $($n => lanes::<{ $n * BLOCK_LEN }>(platform, inputs, leaf, flags_end, out),)*
                _ => unreachable!("a leaf has 1 to 16 blocks, not {blocks}"),
            }
        };
    }
    by_blocks!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// blake3's SIMD kernels load some lanes in pieces wider than they use: the AVX-512 4-way pass
/// reads a block's last 16 bytes with a 64-byte load (`vmovups zmm, [ptr + end - 0x10]`), the
/// AVX2 passes with 32-byte loads; up to 48 bytes past the block. blake3 itself only passes
/// blocks inside larger buffers, but a chunk can end where its buffer's mapping ends, and the
/// read faulted (a hash thread's SIGSEGV in a 4-drive benchmark). So every input handed to the
/// kernels has at least this many readable bytes of its own after the hashed prefix; one that
/// does not is copied to a padded scratch buffer first.
const OVERREAD: usize = 64;

fn lanes<const N: usize>(
    platform: &Platform,
    inputs: &[&[u8]],
    leaf: u64,
    flags_end: u8,
    out: &mut [u8],
) {
    let padded = pad_short(inputs, N);
    let arrays: Vec<&[u8; N]> = padded
        .iter()
        .map(|input| {
            input[..N]
                .try_into()
                .expect("the caller passes inputs of at least N bytes")
        })
        .collect();
    platform.hash_many(
        &arrays,
        &IV,
        leaf,
        IncrementCounter::No,
        0,
        CHUNK_START,
        flags_end,
        out,
    );
}

/// `inputs` (each at least `n` bytes), where each one with fewer than `n + OVERREAD` bytes is
/// replaced by a copy of its first `n` bytes followed by `OVERREAD` zeros.
fn pad_short<'a>(inputs: &[&'a [u8]], n: usize) -> Vec<std::borrow::Cow<'a, [u8]>> {
    inputs
        .iter()
        .map(|&input| {
            if input.len() >= n + OVERREAD {
                std::borrow::Cow::Borrowed(input)
            } else {
                let mut copy = Vec::with_capacity(n + OVERREAD);
                copy.extend_from_slice(&input[..n]);
                copy.resize(n + OVERREAD, 0);
                std::borrow::Cow::Owned(copy)
            }
        })
        .collect()
}

fn words(bytes: &[u8]) -> [u32; 8] {
    let mut w = [0u32; 8];
    for (word, b) in w.iter_mut().zip(bytes.chunks_exact(4)) {
        *word = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    w
}

fn bytes_of(words: &[u32; 8]) -> [u8; 32] {
    let mut b = [0u8; 32];
    for (out, w) in b.chunks_exact_mut(4).zip(words) {
        out.copy_from_slice(&w.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pattern(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn check(inputs: &[&[u8]]) {
        let mut out = Vec::new();
        hash_all(inputs, &mut out);
        assert_eq!(out.len(), inputs.len());
        for (input, id) in inputs.iter().zip(&out) {
            assert_eq!(*id, ChunkId::of(input), "input of {} bytes", input.len());
        }
    }

    #[test]
    fn every_length_class_equals_blake3() {
        // Every boundary of blocks and leaves up to 4 leaves, then the tree shapes up to the
        // chunker's largest chunk and beyond.
        let data = pattern(70_100, 1);
        let mut lens: Vec<usize> = (0..=4 * LEAF_LEN + 65).collect();
        lens.extend([
            8191, 8192, 8193, 16_383, 16_384, 16_385, 31_744, 65_536, 69_999,
        ]);
        // All at once (shared passes, every class populated) and in small mixed batches.
        let all: Vec<&[u8]> = lens
            .iter()
            .enumerate()
            .map(|(k, &l)| &data[k % 97..][..l])
            .collect();
        check(&all);
        for group in all.chunks(7) {
            check(group);
        }
        check(&[]);
    }

    /// Bytes that end where an inaccessible page begins: reading one byte past them faults.
    struct Guarded {
        map: *mut libc::c_void,
        map_len: usize,
        len: usize,
    }

    impl Guarded {
        // Test-only: an anonymous mapping with a PROT_NONE page after the bytes, the situation
        // of a record buffer whose end is the end of its mapping.
        #[allow(unsafe_code)]
        fn new(data: &[u8]) -> Guarded {
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
            let pages = data.len().div_ceil(page) + 1;
            let map_len = pages * page;
            let map = unsafe {
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(map, libc::MAP_FAILED);
                let guard = map.cast::<u8>().add((pages - 1) * page);
                assert_eq!(libc::mprotect(guard.cast(), page, libc::PROT_NONE), 0);
                std::ptr::copy_nonoverlapping(data.as_ptr(), guard.sub(data.len()), data.len());
                map
            };
            Guarded {
                map,
                map_len,
                len: data.len(),
            }
        }

        #[allow(unsafe_code)]
        fn bytes(&self) -> &[u8] {
            let end = self.map_len - self.page();
            unsafe {
                std::slice::from_raw_parts(self.map.cast::<u8>().add(end - self.len), self.len)
            }
        }

        #[allow(unsafe_code)]
        fn page(&self) -> usize {
            usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
        }
    }

    impl Drop for Guarded {
        #[allow(unsafe_code)]
        fn drop(&mut self) {
            unsafe { libc::munmap(self.map, self.map_len) };
        }
    }

    /// blake3's AVX-512 and AVX2 kernels read past the end of a lane's block (a 64-byte load
    /// of which 16 bytes are used); an input at the end of its mapping must still hash, in
    /// every lane position and pass width.
    #[test]
    fn inputs_that_end_at_a_mapping_end_hash_without_reading_past_it() {
        let data = pattern(20_000, 3);
        for len in [
            16,
            48,
            64,
            100,
            128,
            1000,
            1024,
            1024 + 192,
            1024 + 197,
            2048,
            2900,
            4096,
        ] {
            let guarded = Guarded::new(&data[..len]);
            for lanes in 1..=20 {
                for position in [0, lanes / 2, lanes - 1] {
                    let mut inputs: Vec<&[u8]> = (0..lanes).map(|k| &data[k..k + len]).collect();
                    inputs[position] = guarded.bytes();
                    check(&inputs);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn a_batch_hashes_like_one_by_one(
            lens in prop::collection::vec(0usize..20_000, 0..40),
            seed in any::<u64>(),
        ) {
            let data = pattern(lens.iter().sum::<usize>() + 1, seed);
            let mut at = 0;
            let inputs: Vec<&[u8]> = lens.iter().map(|&l| { let s = &data[at..at + l]; at += l; s }).collect();
            let mut out = Vec::new();
            hash_all(&inputs, &mut out);
            for (input, id) in inputs.iter().zip(&out) {
                prop_assert_eq!(*id, ChunkId::of(input));
            }
        }
    }
}
