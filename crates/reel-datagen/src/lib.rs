//! Deterministic, tapewrite-style data generator for reel's dedup tests,
//! benchmarks and peer comparisons.
//!
//! # Data model
//!
//! The generator produces a **base stream** of exactly
//! [`GenConfig::total_bytes`] bytes, made of *slots* of
//! [`GenConfig::block_size`] bytes (the last slot is cut short when the total
//! ends mid-block). Each slot holds a copy of one **unique block**, identified
//! by a `u64` id:
//!
//! * **Content.** Unique block `id` is a pure function of
//!   `(seed, id, block_size, randomness)` — see [`unique_block`]. A fraction
//!   [`GenConfig::incompressible_share`] of the ids (chosen by hashing
//!   `(seed, id)`) are 100 % random. The others are *compressible*: interleaved
//!   random runs of 32–96 bytes and compressible runs (one byte, or a 2/4/8-byte
//!   pattern, repeated; varying per run) sized so that a fraction
//!   [`GenConfig::randomness`] of the bytes is random. With the default 0.25 a
//!   block compresses about 3.6:1 with zstd level 1.
//! * **Redundancy.** Each unique id appears [`GenConfig::redundancy`] (`R`)
//!   times on average. Where the copies go is set by [`Order`]:
//!   [`Order::Scattered`] shuffles `R` copies of each of
//!   `window_blocks / R` ids within each window so repeats are not adjacent;
//!   [`Order::InOrder`] emits the whole unique sequence `R` times like repeated
//!   full backups. See [`SlotMap`] for the exact rules.
//! * **Shift.** With a [`ShiftConfig`], a few random bytes are inserted into
//!   the base stream every `insert_every` base bytes. This models a file early
//!   in a tar stream growing: everything after an insert moves, so block
//!   aligned dedup fails while content-defined chunking still finds the
//!   repeats. Inserted bytes come *on top of* `total_bytes`.
//!
//! The output is a byte stream, not a sequence of blocks: [`Generator::fill`]
//! and [`Generator::next_record`] cut it into pieces of any size, so a stream
//! made of 256 KiB blocks can be written as 64 KiB or 1 MiB tape records.
//! [`Generator::expected`] gives the ideal dedup ratio of the configured stream.
//!
//! ```
//! use reel_datagen::{GenConfig, Generator, Order};
//! let cfg = GenConfig {
//!     seed: 1,
//!     block_size: 64 * 1024,
//!     redundancy: 4,
//!     order: Order::Scattered { window_blocks: 64 },
//!     total_bytes: 4 << 20,
//!     ..GenConfig::default()
//! };
//! let mut g = Generator::new(cfg).unwrap();
//! let mut rec = Vec::new();
//! let mut n = 0;
//! while g.next_record(&mut rec, 100_000) > 0 {
//!     n += rec.len();
//! }
//! assert_eq!(n, 4 << 20);
//! assert_eq!(g.expected().dedup_ratio, 4.0);
//! ```

mod block;
mod layout;
mod rng;

use std::fmt;
use std::ops::RangeInclusive;

use block::BlockParams;
pub use layout::SlotMap;
use rng::{TAG_INSERT, WyRand, mix};

/// Smallest supported block size.
pub const MIN_BLOCK_SIZE: usize = 512;
/// Largest supported block size.
pub const MAX_BLOCK_SIZE: usize = 8 << 20;

/// Where the repeats of a unique block go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Window by window: each window of `window_blocks` slots (rounded down to
    /// a multiple of `R`, at least `R`) holds `window_blocks / R` fresh ids,
    /// each exactly `R` times, shuffled so that repeats are not adjacent.
    Scattered {
        /// Slots per window.
        window_blocks: usize,
    },
    /// The unique sequence is emitted `R` times in the same order.
    InOrder,
}

/// Workload description. All fields are public; start from [`GenConfig::default`].
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Seed for everything.
    pub seed: u64,
    /// Unique block size, `MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE`.
    pub block_size: usize,
    /// Fraction of each compressible block's bytes that are random, `0.0..=1.0`.
    pub randomness: f64,
    /// Average number of appearances of each unique block (`R`, ≥ 1; 1 = all unique).
    pub redundancy: u32,
    /// Placement of repeats.
    pub order: Order,
    /// Fraction of unique blocks that are entirely random, `0.0..=1.0`.
    pub incompressible_share: f64,
    /// Exact length of the base stream in bytes.
    pub total_bytes: u64,
}

impl Default for GenConfig {
    /// 1 GiB of 256 KiB blocks, randomness 0.25, all unique, scattered with 1024-slot windows.
    fn default() -> Self {
        GenConfig {
            seed: 0,
            block_size: 256 * 1024,
            randomness: 0.25,
            redundancy: 1,
            order: Order::Scattered {
                window_blocks: 1024,
            },
            incompressible_share: 0.0,
            total_bytes: 1 << 30,
        }
    }
}

impl GenConfig {
    /// Check every field's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&self.block_size) {
            return Err(ConfigError(format!(
                "block_size {} outside {MIN_BLOCK_SIZE}..={MAX_BLOCK_SIZE}",
                self.block_size
            )));
        }
        if !(0.0..=1.0).contains(&self.randomness) {
            return Err(ConfigError(format!(
                "randomness {} outside 0..=1",
                self.randomness
            )));
        }
        if !(0.0..=1.0).contains(&self.incompressible_share) {
            return Err(ConfigError(format!(
                "incompressible_share {} outside 0..=1",
                self.incompressible_share
            )));
        }
        if self.redundancy == 0 {
            return Err(ConfigError("redundancy must be at least 1".into()));
        }
        if let Order::Scattered { window_blocks } = self.order {
            if window_blocks == 0 {
                return Err(ConfigError("window_blocks must be at least 1".into()));
            }
            let slots = (window_blocks / self.redundancy as usize).max(1) as u64
                * u64::from(self.redundancy);
            if slots > 1 << 26 {
                return Err(ConfigError(format!(
                    "window of {slots} slots is too large (max 2^26)"
                )));
            }
        }
        Ok(())
    }

    fn params(&self) -> BlockParams {
        BlockParams::new(
            self.seed,
            self.block_size,
            self.randomness,
            self.incompressible_share,
        )
    }
}

/// Byte insertions on top of the base stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShiftConfig {
    /// Insert after every this many base-stream bytes (≥ 1). Inserts go at base
    /// offsets `k * insert_every` for `k = 1, 2, …` strictly inside the stream
    /// (never at its end), so there are `(total_bytes - 1) / insert_every` of them.
    pub insert_every: u64,
    /// Length of each insert, drawn uniformly and deterministically per insert.
    pub insert_len: RangeInclusive<usize>,
}

/// An invalid [`GenConfig`] or [`ShiftConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid datagen config: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Ideal figures for a configured stream, from [`Generator::expected`].
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    /// Bytes the generator emits: `base_bytes + inserted_bytes`.
    pub output_bytes: u64,
    /// Length of the base stream (`total_bytes`).
    pub base_bytes: u64,
    /// Slots in the base stream (the last may be partial).
    pub slots: u64,
    /// Distinct unique blocks that appear.
    pub unique_blocks: u64,
    /// Bytes an ideal dedup must keep of the base stream (a block seen only
    /// cut short at the end counts for its emitted length).
    pub unique_bytes: u64,
    /// Number of shift inserts.
    pub inserts: u64,
    /// Total bytes inserted by the shift.
    pub inserted_bytes: u64,
    /// `output_bytes / (unique_bytes + inserted_bytes)` — the best reduction a
    /// dedup can reach before compression (1.0 for an empty stream).
    pub dedup_ratio: f64,
}

/// Write (a prefix of) unique block `id` of `cfg` into `out`. Pass a buffer of
/// `cfg.block_size` bytes for the whole block; a shorter one gets its prefix.
pub fn unique_block(cfg: &GenConfig, id: u64, out: &mut [u8]) {
    cfg.params().write(id, out);
}

/// Whether unique block `id` of `cfg` is one of the entirely random ones.
pub fn is_incompressible(cfg: &GenConfig, id: u64) -> bool {
    cfg.params().is_incompressible(id)
}

/// The base stream: slots of unique blocks, cut at `total_bytes`.
#[derive(Debug)]
struct BaseStream {
    params: BlockParams,
    block_size: u64,
    total: u64,
    map: SlotMap,
    pos: u64,
    block: Vec<u8>,
    /// Id whose full content is in `block`.
    block_id: Option<u64>,
}

impl BaseStream {
    fn fill(&mut self, buf: &mut [u8]) -> usize {
        let mut w = 0;
        while w < buf.len() && self.pos < self.total {
            let slot = self.pos / self.block_size;
            let off = self.pos % self.block_size;
            let slot_len = (self.total - slot * self.block_size).min(self.block_size);
            let id = self.map.id(slot);
            let n = ((slot_len - off) as usize).min(buf.len() - w);
            if off == 0 && n == slot_len as usize && self.block_id != Some(id) {
                // Whole slot fits: generate in place, skipping the copy.
                self.params.write(id, &mut buf[w..w + n]);
            } else {
                if self.block_id != Some(id) {
                    self.block.resize(self.block_size as usize, 0);
                    self.params.write(id, &mut self.block);
                    self.block_id = Some(id);
                }
                buf[w..w + n].copy_from_slice(&self.block[off as usize..off as usize + n]);
            }
            w += n;
            self.pos += n as u64;
        }
        w
    }
}

#[derive(Debug)]
struct Shift {
    seed: u64,
    every: u64,
    lo: usize,
    span: u64,
    /// Index (1-based) of the next insert.
    next: u64,
    pending: Vec<u8>,
    pending_off: usize,
}

impl Shift {
    /// Base offset where insert `k` goes (saturating).
    fn offset(&self, k: u64) -> u64 {
        k.saturating_mul(self.every)
    }

    /// Fill `out` with insert `k` (resized to its length).
    fn insert(&self, k: u64, out: &mut Vec<u8>) {
        let mut rng = WyRand::new(mix(self.seed ^ TAG_INSERT, k));
        let len = self.lo + rng.below(self.span) as usize;
        out.resize(len, 0);
        rng.fill_bytes(out);
    }

    fn len_of(&self, k: u64) -> u64 {
        let mut rng = WyRand::new(mix(self.seed ^ TAG_INSERT, k));
        self.lo as u64 + rng.below(self.span)
    }
}

/// Streaming generator. Also implements [`std::io::Read`].
#[derive(Debug)]
pub struct Generator {
    cfg: GenConfig,
    base: BaseStream,
    shift: Option<Shift>,
    emitted: u64,
}

impl Generator {
    /// Generator for the base stream of `cfg`.
    pub fn new(cfg: GenConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let base = BaseStream {
            params: cfg.params(),
            block_size: cfg.block_size as u64,
            total: cfg.total_bytes,
            map: SlotMap::new(&cfg),
            pos: 0,
            block: Vec::new(),
            block_id: None,
        };
        Ok(Generator {
            cfg,
            base,
            shift: None,
            emitted: 0,
        })
    }

    /// Generator for the base stream of `cfg` with shift inserts.
    pub fn with_shift(cfg: GenConfig, shift: ShiftConfig) -> Result<Self, ConfigError> {
        if shift.insert_every == 0 {
            return Err(ConfigError("insert_every must be at least 1".into()));
        }
        let (lo, hi) = (*shift.insert_len.start(), *shift.insert_len.end());
        if lo > hi || hi > 1 << 20 {
            return Err(ConfigError(format!(
                "insert_len {lo}..={hi} must be a non-empty range of at most 1 MiB"
            )));
        }
        let mut g = Generator::new(cfg)?;
        g.shift = Some(Shift {
            seed: g.cfg.seed,
            every: shift.insert_every,
            lo,
            span: (hi - lo) as u64 + 1,
            next: 1,
            pending: Vec::new(),
            pending_off: 0,
        });
        Ok(g)
    }

    /// The configuration.
    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    /// Bytes emitted so far.
    pub fn position(&self) -> u64 {
        self.emitted
    }

    /// A fresh slot map of this stream (slot → unique id), for verification.
    pub fn slot_map(&self) -> SlotMap {
        SlotMap::new(&self.cfg)
    }

    /// Fill `buf` with the next bytes of the stream. Returns the number of bytes
    /// written: `buf.len()` except at the end of the stream, 0 once it is over.
    pub fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = match &mut self.shift {
            None => self.base.fill(buf),
            Some(sh) => fill_shifted(&mut self.base, sh, buf),
        };
        self.emitted += n as u64;
        n
    }

    /// Replace `buf`'s contents with the next record of up to `record_size`
    /// bytes (only the last record is short). Returns its length, 0 at the end.
    pub fn next_record(&mut self, buf: &mut Vec<u8>, record_size: usize) -> usize {
        buf.resize(record_size, 0);
        let mut w = 0;
        while w < record_size {
            let n = self.fill(&mut buf[w..]);
            if n == 0 {
                break;
            }
            w += n;
        }
        buf.truncate(w);
        w
    }

    /// Ideal figures for the whole configured stream (independent of how much
    /// has been read). Cost: one window permutation, plus one hash per insert.
    pub fn expected(&self) -> Expected {
        let bs = self.cfg.block_size as u64;
        let total = self.cfg.total_bytes;
        let mut map = SlotMap::new(&self.cfg);
        let (unique_blocks, unique_bytes) = map.unique_footprint(bs, total);
        let (inserts, inserted_bytes) = match &self.shift {
            Some(sh) if total > 0 => {
                let k = (total - 1) / sh.every;
                (k, (1..=k).map(|i| sh.len_of(i)).sum())
            }
            _ => (0, 0),
        };
        let output_bytes = total + inserted_bytes;
        let kept = unique_bytes + inserted_bytes;
        Expected {
            output_bytes,
            base_bytes: total,
            slots: map.slots(),
            unique_blocks,
            unique_bytes,
            inserts,
            inserted_bytes,
            dedup_ratio: if kept == 0 {
                1.0
            } else {
                output_bytes as f64 / kept as f64
            },
        }
    }
}

fn fill_shifted(base: &mut BaseStream, sh: &mut Shift, buf: &mut [u8]) -> usize {
    let mut w = 0;
    while w < buf.len() {
        if sh.pending_off < sh.pending.len() {
            let n = (sh.pending.len() - sh.pending_off).min(buf.len() - w);
            buf[w..w + n].copy_from_slice(&sh.pending[sh.pending_off..sh.pending_off + n]);
            sh.pending_off += n;
            w += n;
            continue;
        }
        let at = sh.offset(sh.next);
        if at < base.total && base.pos == at {
            let mut p = std::mem::take(&mut sh.pending);
            sh.insert(sh.next, &mut p);
            sh.pending = p;
            sh.pending_off = 0;
            sh.next += 1;
            continue;
        }
        let limit = if at < base.total {
            (at - base.pos).min((buf.len() - w) as u64) as usize
        } else {
            buf.len() - w
        };
        let n = base.fill(&mut buf[w..w + limit]);
        if n == 0 {
            break;
        }
        w += n;
    }
    w
}

impl std::io::Read for Generator {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(self.fill(buf))
    }
}

/// Parses a byte count for command lines: a number with an optional binary suffix B, K, M, G
/// or T (KiB, MiB, …; case-insensitive), e.g. `256K`, `2G`. Zero is refused.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'B' => 1u64,
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix in {s:?} (use K, M, G or T)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 256K, 2G)"))?;
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))?;
    if v == 0 {
        return Err("size must not be zero".into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests;
