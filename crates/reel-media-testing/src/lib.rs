//! Reusable tests for `reel_media`'s [`PartitionStore`] implementations, for test code only
//! (a crate of its own, not a feature of `reel-media`: a feature turned on by tests would be
//! turned on in the test build's `reel` binary too, and `cargo build -p reel` after
//! `cargo test` would rebuild every crate above `reel-media`).
//!
//! * [`check_partition_store`] + [`partition_ops`]: conformance of a store
//!   against a plain `Vec` model, byte-exact.
//! * [`run_reference_model`] + [`reference_cases`]: drives a whole
//!   [`Cartridge`] over the store and compares it after every step with a
//!   deliberately simple, independent tape model (linear scans over a
//!   `Vec<Vec<Obj>>`, no filemark index).
//!
//! Both panic with a descriptive message on the first mismatch, so they work
//! inside `proptest!` (which shrinks the failing op sequence).
//!
//! ```
//! use proptest::prelude::*;
//! use reel_media::MemoryPartition;
//! use reel_media_testing::{check_partition_store, partition_ops, reference_cases, run_reference_model};
//!
//! // In a test crate, replace MemoryPartition with the store under test.
//! proptest!(ProptestConfig::with_cases(8), |(ops in partition_ops(32))| {
//!     check_partition_store(MemoryPartition::new, &ops);
//! });
//! proptest!(ProptestConfig::with_cases(8), |(case in reference_cases(32))| {
//!     run_reference_model(MemoryPartition::new, &case);
//! });
//! ```

use proptest::prelude::*;

use reel_media::{
    Barcode, Cartridge, CartridgeInfo, MAX_FILEMARKS_PER_WRITE, MAX_RECORD_LEN, MediaError,
    MediaType, ObjectKind, PartitionStore, Position, ReadOutcome, SpaceOutcome, UnixTime,
    WriteOutcome,
};

/// Deterministic record contents for `(seed, len)` (SplitMix64 stream), so a
/// record can be regenerated for byte-exact verification.
pub fn record_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed ^ (len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------------------
// PartitionStore conformance
// ---------------------------------------------------------------------------

/// A uniformly chosen position within a range whose size is only known when
/// the op runs: `Pick(x).of(size)` is `x / 2^64 * size`, in `0..size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick(pub u64);

impl Pick {
    /// Scale into `0..size` (0 when `size` is 0).
    pub fn of(self, size: usize) -> usize {
        ((u128::from(self.0) * size as u128) >> 64) as usize
    }
}

/// One step of the [`check_partition_store`] conformance test. Object
/// numbers are chosen with [`Pick`] relative to the current object count.
#[derive(Debug, Clone)]
pub enum PartitionOp {
    /// Append a record of `len` bytes of [`record_bytes`]`(seed, len)`.
    AppendRecord {
        /// Length (≥ 1).
        len: u32,
        /// Content seed.
        seed: u64,
        /// Appended with `append_encrypted_record`.
        encrypted: bool,
    },
    /// Append filemarks (0 included).
    AppendFilemarks(u32),
    /// Truncate to `n` in `0..=object_count`.
    Truncate(Pick),
    /// Read object `n` in `0..object_count` (error expected on a filemark).
    Read(Pick),
    /// Query `object(n)` for `n` in `0..object_count`.
    Object(Pick),
    /// Query `filemarks_before(n)` for `n` in `0..=object_count + 1`.
    FilemarksBefore(Pick),
    /// Query `filemark_position(k)` for `k` in `0..=filemarks + 1`.
    FilemarkPosition(Pick),
    /// Access `object`/`read_record` at `object_count + d`: must be an error.
    OutOfRange(u8),
    /// `sync()`.
    Sync,
}

/// Record lengths: mostly ≤ 64 KiB, rarely up to 8 MiB.
pub fn record_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        60 => 1u32..=512,
        30 => 513u32..=64 * 1024,
        1 => 64 * 1024u32 + 1..=MAX_RECORD_LEN,
    ]
}

/// Random op sequences of up to `max_ops` steps for [`check_partition_store`].
pub fn partition_ops(max_ops: usize) -> impl Strategy<Value = Vec<PartitionOp>> {
    let op = prop_oneof![
        8 => (record_len(), any::<u64>(), prop::bool::weighted(0.2))
            .prop_map(|(len, seed, encrypted)| PartitionOp::AppendRecord { len, seed, encrypted }),
        4 => (0u32..=3).prop_map(PartitionOp::AppendFilemarks),
        1 => any::<u64>().prop_map(Pick).prop_map(PartitionOp::Truncate),
        3 => any::<u64>().prop_map(Pick).prop_map(PartitionOp::Read),
        2 => any::<u64>().prop_map(Pick).prop_map(PartitionOp::Object),
        2 => any::<u64>().prop_map(Pick).prop_map(PartitionOp::FilemarksBefore),
        2 => any::<u64>().prop_map(Pick).prop_map(PartitionOp::FilemarkPosition),
        1 => any::<u8>().prop_map(PartitionOp::OutOfRange),
        1 => Just(PartitionOp::Sync),
    ];
    prop::collection::vec(op, 0..=max_ops)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelObj {
    Record {
        len: u32,
        seed: u64,
        encrypted: bool,
    },
    Filemark,
}

fn model_kind(o: ModelObj) -> ObjectKind {
    match o {
        ModelObj::Record {
            len,
            encrypted: false,
            ..
        } => ObjectKind::Record { len },
        ModelObj::Record {
            len,
            encrypted: true,
            ..
        } => ObjectKind::EncryptedRecord { len },
        ModelObj::Filemark => ObjectKind::Filemark,
    }
}

fn model_filemarks_before(m: &[ModelObj], n: u64) -> u64 {
    m.iter()
        .take(usize::try_from(n).unwrap_or(usize::MAX))
        .filter(|o| **o == ModelObj::Filemark)
        .count() as u64
}

fn model_filemark_position(m: &[ModelObj], k: u64) -> Option<u64> {
    m.iter()
        .enumerate()
        .filter(|(_, o)| **o == ModelObj::Filemark)
        .nth(usize::try_from(k).ok()?)
        .map(|(i, _)| i as u64)
}

fn model_data_bytes(m: &[ModelObj]) -> u64 {
    m.iter()
        .map(|o| match o {
            ModelObj::Record { len, .. } => u64::from(*len),
            ModelObj::Filemark => 0,
        })
        .sum()
}

fn check_record<S: PartitionStore>(s: &mut S, n: u64, len: u32, seed: u64, step: usize) {
    let mut buf = vec![0xAA; 3];
    s.read_record(n, &mut buf)
        .unwrap_or_else(|e| panic!("step {step}: read_record({n}) failed: {e}"));
    assert_eq!(buf.len(), len as usize, "step {step}: record {n} length");
    assert!(
        buf == record_bytes(seed, len as usize),
        "step {step}: record {n} contents differ"
    );
}

fn check_store_state<S: PartitionStore>(s: &S, m: &[ModelObj], step: usize) {
    let count = m.len() as u64;
    assert_eq!(s.object_count(), count, "step {step}: object_count");
    assert_eq!(
        s.data_bytes(),
        model_data_bytes(m),
        "step {step}: data_bytes"
    );
    let fms = model_filemarks_before(m, count);
    assert_eq!(
        s.filemarks_before(count).ok(),
        Some(fms),
        "step {step}: filemarks_before(object_count)"
    );
    assert_eq!(
        s.filemark_position(fms).ok(),
        Some(None),
        "step {step}: filemark_position past the last filemark"
    );
}

/// Run `ops` against a fresh store from `make` and a `Vec` model, checking
/// every query result, the counts after every step, and finally every
/// object, record (byte-exact) and filemark query. Panics on mismatch.
pub fn check_partition_store<S: PartitionStore>(make: impl Fn() -> S, ops: &[PartitionOp]) {
    let mut s = make();
    let mut m: Vec<ModelObj> = Vec::new();
    // Objects before the last sync (durable); a truncate can only shorten it.
    let mut synced = 0usize;
    check_store_state(&s, &m, 0);
    for (step, op) in ops.iter().enumerate() {
        let count = m.len() as u64;
        match op {
            PartitionOp::AppendRecord {
                len,
                seed,
                encrypted,
            } => {
                let len = (*len).max(1);
                let data = record_bytes(*seed, len as usize);
                if *encrypted {
                    s.append_encrypted_record(&data)
                } else if seed % 2 == 0 {
                    // Half the records as shared bytes, the way the drive hands on Data-Out.
                    s.append_record_shared(bytes::Bytes::from(data))
                } else {
                    s.append_record(&data)
                }
                .unwrap_or_else(|e| panic!("step {step}: append_record: {e}"));
                m.push(ModelObj::Record {
                    len,
                    seed: *seed,
                    encrypted: *encrypted,
                });
            }
            PartitionOp::AppendFilemarks(c) => {
                s.append_filemarks(*c)
                    .unwrap_or_else(|e| panic!("step {step}: append_filemarks: {e}"));
                m.extend(std::iter::repeat_n(ModelObj::Filemark, *c as usize));
            }
            PartitionOp::Truncate(i) => {
                let n = i.of(m.len() + 1);
                s.truncate(n as u64)
                    .unwrap_or_else(|e| panic!("step {step}: truncate({n}): {e}"));
                m.truncate(n);
                synced = synced.min(n);
            }
            PartitionOp::Read(i) if !m.is_empty() => {
                let n = i.of(m.len());
                match m[n] {
                    ModelObj::Record { len, seed, .. } => {
                        check_record(&mut s, n as u64, len, seed, step);
                    }
                    ModelObj::Filemark => {
                        let mut buf = Vec::new();
                        assert!(
                            s.read_record(n as u64, &mut buf).is_err(),
                            "step {step}: read_record on filemark {n} must fail"
                        );
                    }
                }
            }
            PartitionOp::Object(i) if !m.is_empty() => {
                let n = i.of(m.len());
                assert_eq!(
                    s.object(n as u64).ok(),
                    Some(model_kind(m[n])),
                    "step {step}: object({n})"
                );
            }
            PartitionOp::Read(_) | PartitionOp::Object(_) => {}
            PartitionOp::FilemarksBefore(i) => {
                let n = i.of(m.len() + 2) as u64;
                assert_eq!(
                    s.filemarks_before(n).ok(),
                    Some(model_filemarks_before(&m, n)),
                    "step {step}: filemarks_before({n})"
                );
            }
            PartitionOp::FilemarkPosition(i) => {
                let total = model_filemarks_before(&m, count) as usize;
                let k = i.of(total + 2) as u64;
                assert_eq!(
                    s.filemark_position(k).ok(),
                    Some(model_filemark_position(&m, k)),
                    "step {step}: filemark_position({k})"
                );
            }
            PartitionOp::OutOfRange(d) => {
                let n = count.saturating_add(u64::from(*d));
                assert!(
                    s.object(n).is_err(),
                    "step {step}: object({n}) beyond EOD must fail"
                );
                let mut buf = Vec::new();
                assert!(
                    s.read_record(n, &mut buf).is_err(),
                    "step {step}: read_record({n}) beyond EOD must fail"
                );
                assert!(
                    s.object(u64::MAX).is_err(),
                    "step {step}: object(u64::MAX) must fail"
                );
            }
            PartitionOp::Sync => {
                s.sync()
                    .unwrap_or_else(|e| panic!("step {step}: sync: {e}"));
                synced = m.len();
            }
        }
        check_store_state(&s, &m, step + 1);
        let unsynced = reel_media::Unsynced {
            objects: (m.len() - synced) as u64,
            bytes: model_data_bytes(&m[synced..]),
        };
        assert_eq!(s.unsynced(), unsynced, "step {}: unsynced", step + 1);
    }
    // Full final comparison.
    let end = ops.len() + 1;
    for (n, o) in m.iter().enumerate() {
        let n64 = n as u64;
        assert_eq!(
            s.object(n64).ok(),
            Some(model_kind(*o)),
            "final: object({n})"
        );
        if let ModelObj::Record { len, seed, .. } = *o {
            check_record(&mut s, n64, len, seed, end);
        }
    }
    let mut before = 0;
    for n in 0..=m.len() {
        assert_eq!(
            s.filemarks_before(n as u64).ok(),
            Some(before),
            "final: filemarks_before({n})"
        );
        if m.get(n) == Some(&ModelObj::Filemark) {
            assert_eq!(
                s.filemark_position(before).ok(),
                Some(Some(n as u64)),
                "final: filemark_position({before})"
            );
            before += 1;
        }
    }
}

// ---------------------------------------------------------------------------
// Cartridge reference model
// ---------------------------------------------------------------------------

/// One step of the cartridge reference-model test.
#[derive(Debug, Clone)]
pub enum CartridgeOp {
    /// `write_record` of [`record_bytes`]`(seed, len)` (len 0 allowed).
    Write {
        /// Length.
        len: u32,
        /// Content seed.
        seed: u64,
    },
    /// A write sized relative to the current partition's fill level, to hit
    /// the early-warning and end-of-partition boundaries exactly: the
    /// length is `target - bytes before the position + delta`, clamped to
    /// `0..=MAX_RECORD_LEN`, resolved with the reference model's state.
    WriteFill {
        /// Boundary aimed at.
        target: FillTarget,
        /// Offset from the exact boundary.
        delta: i8,
        /// Content seed.
        seed: u64,
    },
    /// `write_filemarks(count)`.
    WriteFilemarks(u32),
    /// `read(max_len)`.
    Read {
        /// Maximum transfer.
        max_len: u32,
    },
    /// `space_records(count)`.
    SpaceRecords(i64),
    /// `space_filemarks(count)`.
    SpaceFilemarks(i64),
    /// `space_to_eod()`.
    SpaceToEod,
    /// `locate(partition, object)`.
    Locate {
        /// Partition (may be invalid).
        partition: u8,
        /// Object (may be beyond EOD).
        object: u64,
    },
    /// `locate_file(file)`.
    LocateFile(u64),
    /// `rewind()`.
    Rewind,
    /// `erase(long)`.
    Erase {
        /// Long erase.
        long: bool,
    },
    /// `format` with partition sizes given in percent of the capacity
    /// (0 and sums over 100 included to exercise layout errors).
    Format {
        /// Percent of capacity per partition.
        percents: Vec<u8>,
    },
    /// `set_partition(p)`.
    SetPartition(u8),
    /// Move the write-protect tab.
    SetWriteProtected(bool),
    /// `sync()`.
    Sync,
    /// `unload()`.
    Unload,
    /// `load(now)`.
    Load,
}

/// Boundary targeted by [`CartridgeOp::WriteFill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillTarget {
    /// The early-warning threshold.
    EarlyWarning,
    /// The partition capacity.
    EndOfPartition,
}

/// A reference-model scenario: cartridge parameters and the op sequence.
#[derive(Debug, Clone)]
pub struct ReferenceCase {
    /// Use LTO-9 WORM instead of LTO-9 data.
    pub worm: bool,
    /// Cartridge capacity in bytes.
    pub capacity: u64,
    /// Early-warning threshold in percent (1..=100).
    pub early_warning_percent: u8,
    /// The steps.
    pub ops: Vec<CartridgeOp>,
}

fn write_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => Just(0u32),
        60 => 1u32..=4096,
        25 => 4097u32..=128 * 1024,
        6 => 128 * 1024 + 1..=1024 * 1024u32,
    ]
}

fn space_count() -> impl Strategy<Value = i64> {
    prop_oneof![
        20 => -6i64..=6,
        2 => -100i64..=100,
        1 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(i64::MIN + 1)],
    ]
}

/// Random cartridge op sequences of up to `max_ops` steps.
pub fn cartridge_ops(max_ops: usize) -> impl Strategy<Value = Vec<CartridgeOp>> {
    let op = prop_oneof![
        30 => (write_len(), any::<u64>()).prop_map(|(len, seed)| CartridgeOp::Write { len, seed }),
        4 => (prop_oneof![Just(FillTarget::EarlyWarning), Just(FillTarget::EndOfPartition)], -2i8..=2, any::<u64>())
            .prop_map(|(target, delta, seed)| CartridgeOp::WriteFill { target, delta, seed }),
        8 => (0u32..=3).prop_map(CartridgeOp::WriteFilemarks),
        14 => prop_oneof![0u32..=4096, 0u32..=2 * 1024 * 1024].prop_map(|max_len| CartridgeOp::Read { max_len }),
        8 => space_count().prop_map(CartridgeOp::SpaceRecords),
        6 => space_count().prop_map(CartridgeOp::SpaceFilemarks),
        2 => Just(CartridgeOp::SpaceToEod),
        8 => (prop_oneof![8 => 0u8..=1, 1 => 0u8..=5], prop_oneof![0u64..=40, Just(u64::MAX)])
            .prop_map(|(partition, object)| CartridgeOp::Locate { partition, object }),
        2 => prop_oneof![0u64..=6, Just(u64::MAX)].prop_map(CartridgeOp::LocateFile),
        3 => Just(CartridgeOp::Rewind),
        2 => any::<bool>().prop_map(|long| CartridgeOp::Erase { long }),
        2 => prop::collection::vec(prop_oneof![6 => 5u8..=60, 1 => 0u8..=100], 1..=5)
            .prop_map(|percents| CartridgeOp::Format { percents }),
        2 => (0u8..=4).prop_map(CartridgeOp::SetPartition),
        1 => any::<bool>().prop_map(CartridgeOp::SetWriteProtected),
        1 => Just(CartridgeOp::Sync),
        1 => Just(CartridgeOp::Unload),
        1 => Just(CartridgeOp::Load),
    ];
    prop::collection::vec(op, 0..=max_ops)
}

/// Reference cases: 1 in 5 WORM, capacity 256 KiB..=4 MiB (so early warning
/// and end of medium are reached), early warning at 50..=100 %.
pub fn reference_cases(max_ops: usize) -> impl Strategy<Value = ReferenceCase> {
    (
        prop::bool::weighted(0.2),
        256 * 1024u64..=4 * 1024 * 1024,
        prop_oneof![Just(98u8), 50u8..=100],
        cartridge_ops(max_ops),
    )
        .prop_map(
            |(worm, capacity, early_warning_percent, ops)| ReferenceCase {
                worm,
                capacity,
                early_warning_percent,
                ops,
            },
        )
}

/// Expected/observed result of one step, in a store-independent shape.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Obs {
    Unit,
    Write(WriteOutcome),
    Read(ReadOutcome, Vec<u8>),
    Space(SpaceOutcome),
    Err(&'static str),
    Formatted,
    Position(Position),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Obj {
    Rec { len: u32, seed: u64 },
    Fm,
}

/// The independent reference: plain vectors and a position integer.
struct RefTape {
    parts: Vec<Vec<Obj>>,
    caps: Vec<u64>,
    capacity: u64,
    ew_percent: u8,
    worm: bool,
    wp: bool,
    loaded: bool,
    part: usize,
    pos: usize,
    load_count: u64,
    // bytes written total/load, read total/load, records w/r, filemarks w/r
    written: (u64, u64),
    read: (u64, u64),
    records: (u64, u64),
    filemarks: (u64, u64),
}

impl RefTape {
    fn objs(&self) -> &Vec<Obj> {
        &self.parts[self.part]
    }
    fn eod(&self) -> usize {
        self.objs().len()
    }
    fn used(&self, p: usize) -> u64 {
        self.parts[p]
            .iter()
            .map(|o| match o {
                Obj::Rec { len, .. } => u64::from(*len),
                Obj::Fm => 0,
            })
            .sum()
    }
    fn threshold(&self, p: usize) -> u64 {
        (u128::from(self.caps[p]) * u128::from(self.ew_percent) / 100) as u64
    }
    fn beyond_ew(&self) -> bool {
        self.pos == self.eod() && self.used(self.part) >= self.threshold(self.part)
    }
    fn position(&self) -> Position {
        let objs = self.objs();
        let mut file = 0;
        let mut block = 0;
        for o in &objs[..self.pos] {
            if *o == Obj::Fm {
                file += 1;
                block = 0;
            } else {
                block += 1;
            }
        }
        Position {
            partition: self.part as u8,
            object: self.pos as u64,
            file,
            block_in_file: block,
            at_bop: self.pos == 0,
            at_eod: self.pos == objs.len(),
            beyond_early_warning: self.beyond_ew(),
        }
    }
    /// Turn a [`CartridgeOp::WriteFill`] into a concrete write.
    fn resolve(&self, op: &CartridgeOp) -> CartridgeOp {
        match *op {
            CartridgeOp::WriteFill {
                target,
                delta,
                seed,
            } => {
                let p = self.part;
                let before: u64 = self.parts[p][..self.pos.min(self.parts[p].len())]
                    .iter()
                    .map(|o| match o {
                        Obj::Rec { len, .. } => u64::from(*len),
                        Obj::Fm => 0,
                    })
                    .sum();
                let goal = match target {
                    FillTarget::EarlyWarning => self.threshold(p),
                    FillTarget::EndOfPartition => self.caps[p],
                };
                let len = (i128::from(goal) - i128::from(before) + i128::from(delta))
                    .clamp(0, i128::from(MAX_RECORD_LEN)) as u32;
                CartridgeOp::Write { len, seed }
            }
            ref other => other.clone(),
        }
    }

    fn writable(&self) -> Result<(), &'static str> {
        if !self.loaded {
            Err("NotLoaded")
        } else if self.wp {
            Err("WriteProtected")
        } else if self.worm && self.pos != self.eod() {
            Err("WormOverwrite")
        } else {
            Ok(())
        }
    }
    fn residue(forward: bool, n: u128, done: u128) -> i64 {
        let r = (n - done) as i128;
        i64::try_from(if forward { r } else { -r }).expect("residue in range")
    }

    fn apply(&mut self, op: &CartridgeOp) -> Obs {
        use CartridgeOp as Op;
        if !self.loaded && !matches!(op, Op::SetWriteProtected(_) | Op::Unload | Op::Load) {
            return Obs::Err("NotLoaded");
        }
        match op {
            Op::Write { len, seed } => {
                if *len == 0 {
                    return Obs::Write(WriteOutcome {
                        early_warning: self.beyond_ew(),
                        synced: false,
                    });
                }
                if let Err(e) = self.writable() {
                    return Obs::Err(e);
                }
                if *len > MAX_RECORD_LEN {
                    return Obs::Err("RecordTooLarge");
                }
                let (p, pos) = (self.part, self.pos);
                self.parts[p].truncate(pos);
                if self.used(p) + u64::from(*len) > self.caps[p] {
                    return Obs::Err("EndOfMedium");
                }
                self.parts[p].push(Obj::Rec {
                    len: *len,
                    seed: *seed,
                });
                self.pos += 1;
                self.written.0 += u64::from(*len);
                self.written.1 += u64::from(*len);
                self.records.0 += 1;
                Obs::Write(WriteOutcome {
                    early_warning: self.beyond_ew(),
                    synced: false,
                })
            }
            Op::WriteFill { .. } => {
                let concrete = self.resolve(op);
                self.apply(&concrete)
            }
            Op::WriteFilemarks(count) => {
                if *count == 0 {
                    return Obs::Write(WriteOutcome {
                        early_warning: self.beyond_ew(),
                        synced: true,
                    });
                }
                if let Err(e) = self.writable() {
                    return Obs::Err(e);
                }
                if *count > MAX_FILEMARKS_PER_WRITE {
                    return Obs::Err("TooManyFilemarks");
                }
                let (p, pos) = (self.part, self.pos);
                self.parts[p].truncate(pos);
                for _ in 0..*count {
                    self.parts[p].push(Obj::Fm);
                }
                self.pos += *count as usize;
                self.filemarks.0 += u64::from(*count);
                Obs::Write(WriteOutcome {
                    early_warning: self.beyond_ew(),
                    synced: false,
                })
            }
            Op::Read { max_len } => {
                if self.pos == self.eod() {
                    return Obs::Read(ReadOutcome::EndOfData, Vec::new());
                }
                let o = self.objs()[self.pos];
                self.pos += 1;
                match o {
                    Obj::Fm => {
                        self.filemarks.1 += 1;
                        Obs::Read(ReadOutcome::Filemark, Vec::new())
                    }
                    Obj::Rec { len, seed } => {
                        let transferred = len.min(*max_len);
                        self.read.0 += u64::from(transferred);
                        self.read.1 += u64::from(transferred);
                        self.records.1 += 1;
                        let mut data = record_bytes(seed, len as usize);
                        data.truncate(transferred as usize);
                        Obs::Read(
                            ReadOutcome::Record {
                                data_len: len,
                                transferred,
                            },
                            data,
                        )
                    }
                }
            }
            Op::SpaceRecords(count) => {
                let n = u128::from(count.unsigned_abs());
                let mut done = 0u128;
                if *count >= 0 {
                    while done < n {
                        if self.pos == self.eod() {
                            return Obs::Space(SpaceOutcome::EndOfData {
                                residue: Self::residue(true, n, done),
                            });
                        }
                        let o = self.objs()[self.pos];
                        self.pos += 1;
                        if o == Obj::Fm {
                            return Obs::Space(SpaceOutcome::Filemark {
                                residue: Self::residue(true, n, done),
                            });
                        }
                        done += 1;
                    }
                } else {
                    while done < n {
                        if self.pos == 0 {
                            return Obs::Space(SpaceOutcome::BeginningOfPartition {
                                residue: Self::residue(false, n, done),
                            });
                        }
                        self.pos -= 1;
                        if self.objs()[self.pos] == Obj::Fm {
                            return Obs::Space(SpaceOutcome::Filemark {
                                residue: Self::residue(false, n, done),
                            });
                        }
                        done += 1;
                    }
                }
                Obs::Space(SpaceOutcome::Completed)
            }
            Op::SpaceFilemarks(count) => {
                let n = u128::from(count.unsigned_abs());
                let mut crossed = 0u128;
                if *count >= 0 {
                    while crossed < n {
                        if self.pos == self.eod() {
                            return Obs::Space(SpaceOutcome::EndOfData {
                                residue: Self::residue(true, n, crossed),
                            });
                        }
                        if self.objs()[self.pos] == Obj::Fm {
                            crossed += 1;
                        }
                        self.pos += 1;
                    }
                } else {
                    while crossed < n {
                        if self.pos == 0 {
                            return Obs::Space(SpaceOutcome::BeginningOfPartition {
                                residue: Self::residue(false, n, crossed),
                            });
                        }
                        self.pos -= 1;
                        if self.objs()[self.pos] == Obj::Fm {
                            crossed += 1;
                        }
                    }
                }
                Obs::Space(SpaceOutcome::Completed)
            }
            Op::SpaceToEod => {
                self.pos = self.eod();
                Obs::Unit
            }
            Op::Locate { partition, object } => self.locate(*partition, *object),
            Op::SetPartition(p) => self.locate(*p, 0),
            Op::LocateFile(file) => {
                if *file == 0 {
                    self.pos = 0;
                    return Obs::Unit;
                }
                let mut seen = 0u64;
                for (i, o) in self.objs().iter().enumerate() {
                    if *o == Obj::Fm {
                        seen += 1;
                        if seen == *file {
                            self.pos = i + 1;
                            return Obs::Unit;
                        }
                    }
                }
                self.pos = self.eod();
                Obs::Err("EndOfData")
            }
            Op::Rewind => {
                self.part = 0;
                self.pos = 0;
                Obs::Unit
            }
            Op::Erase { .. } => {
                if let Err(e) = self.writable() {
                    return Obs::Err(e);
                }
                let (p, pos) = (self.part, self.pos);
                self.parts[p].truncate(pos);
                Obs::Unit
            }
            Op::Format { percents } => {
                if self.wp {
                    return Obs::Err("WriteProtected");
                }
                if self.worm {
                    return Obs::Err("WormOverwrite");
                }
                let sizes: Vec<u64> = percents
                    .iter()
                    .map(|&p| (u128::from(self.capacity) * u128::from(p) / 100) as u64)
                    .collect();
                if sizes.is_empty()
                    || sizes.len() > 4
                    || sizes.contains(&0)
                    || sizes.iter().map(|&s| u128::from(s)).sum::<u128>()
                        > u128::from(self.capacity)
                {
                    return Obs::Err("Layout");
                }
                self.parts = vec![Vec::new(); sizes.len()];
                self.caps = sizes;
                self.part = 0;
                self.pos = 0;
                Obs::Formatted
            }
            Op::SetWriteProtected(wp) => {
                self.wp = *wp;
                Obs::Unit
            }
            Op::Sync => Obs::Unit,
            Op::Unload => {
                self.loaded = false;
                self.part = 0;
                self.pos = 0;
                Obs::Unit
            }
            Op::Load => {
                if !self.loaded {
                    self.loaded = true;
                    self.load_count += 1;
                    self.written.1 = 0;
                    self.read.1 = 0;
                }
                self.part = 0;
                self.pos = 0;
                Obs::Unit
            }
        }
    }

    fn locate(&mut self, partition: u8, object: u64) -> Obs {
        if usize::from(partition) >= self.parts.len() {
            return Obs::Err("InvalidPartition");
        }
        self.part = usize::from(partition);
        if object > self.eod() as u64 {
            self.pos = self.eod();
            return Obs::Err("EndOfData");
        }
        self.pos = object as usize;
        Obs::Unit
    }
}

fn observe<T, E>(r: Result<T, MediaError<E>>, f: impl FnOnce(T) -> Obs) -> Obs
where
    E: std::fmt::Debug,
{
    match r {
        Ok(v) => f(v),
        Err(MediaError::Store(e)) => panic!("store error: {e:?}"),
        Err(MediaError::Inconsistent(w)) => panic!("store inconsistent: {w}"),
        Err(e) => Obs::Err(e.kind()),
    }
}

/// Drive a [`Cartridge`] built on stores from `make_partition` through
/// `case.ops` and compare it with the reference tape after every step:
/// outcome (variants, residues, early warning, error kinds), data read,
/// full position, per-partition usage, counters and load count. At the end
/// every partition's content is compared byte-exact through the stores.
/// Panics on the first mismatch; returns what the run exercised, so callers
/// can check that their strategies reach the interesting conditions.
pub fn run_reference_model<S: PartitionStore>(
    mut make_partition: impl FnMut() -> S,
    case: &ReferenceCase,
) -> ReferenceStats {
    let mut stats = ReferenceStats::default();
    let media = if case.worm {
        MediaType::Lto9Worm
    } else {
        MediaType::Lto9
    };
    let barcode = Barcode::new("REF001L9").expect("valid barcode");
    let info = CartridgeInfo::new(barcode, media, UnixTime(1_700_000_000))
        .with_capacity(case.capacity)
        .and_then(|i| i.with_early_warning_percent(case.early_warning_percent))
        .expect("valid reference case parameters");
    let mut cart = match Cartridge::new(info, vec![make_partition()]) {
        Ok(c) => c,
        Err(e) => panic!("Cartridge::new failed: {e:?}"),
    };
    let mut model = RefTape {
        parts: vec![Vec::new()],
        caps: vec![case.capacity],
        capacity: case.capacity,
        ew_percent: case.early_warning_percent,
        worm: case.worm,
        wp: false,
        loaded: false,
        part: 0,
        pos: 0,
        load_count: 0,
        written: (0, 0),
        read: (0, 0),
        records: (0, 0),
        filemarks: (0, 0),
    };
    let mut buf = Vec::new();
    let load = [CartridgeOp::Load];
    for (step, op) in load.iter().chain(&case.ops).enumerate() {
        let resolved = model.resolve(op);
        let op = &resolved;
        let expected = model.apply(op);
        let got = match op {
            CartridgeOp::Write { len, seed } => {
                let data = record_bytes(*seed, *len as usize);
                // Half the records as shared bytes, the way the drive hands on Data-Out.
                let written = if seed % 2 == 0 {
                    cart.write_record_shared(bytes::Bytes::from(data))
                } else {
                    cart.write_record(&data)
                };
                observe(written, Obs::Write)
            }
            CartridgeOp::WriteFill { .. } => unreachable!("resolved before use"),
            CartridgeOp::WriteFilemarks(c) => observe(cart.write_filemarks(*c), Obs::Write),
            CartridgeOp::Read { max_len } => {
                buf.clear();
                observe(cart.read(*max_len, &mut buf), |r| {
                    let data = if matches!(r, ReadOutcome::Record { .. }) {
                        buf.clone()
                    } else {
                        Vec::new()
                    };
                    Obs::Read(r, data)
                })
            }
            CartridgeOp::SpaceRecords(c) => observe(cart.space_records(*c), Obs::Space),
            CartridgeOp::SpaceFilemarks(c) => observe(cart.space_filemarks(*c), Obs::Space),
            CartridgeOp::SpaceToEod => observe(cart.space_to_eod(), |_| Obs::Unit),
            CartridgeOp::Locate { partition, object } => {
                observe(cart.locate(*partition, *object), |_| Obs::Unit)
            }
            CartridgeOp::LocateFile(f) => observe(cart.locate_file(*f), |_| Obs::Unit),
            CartridgeOp::Rewind => observe(cart.rewind(), |_| Obs::Unit),
            CartridgeOp::Erase { long } => observe(cart.erase(*long), |_| Obs::Unit),
            CartridgeOp::Format { percents } => {
                let sizes: Vec<u64> = percents
                    .iter()
                    .map(|&p| (u128::from(case.capacity) * u128::from(p) / 100) as u64)
                    .collect();
                observe(cart.format(&sizes, |_| Ok(make_partition())), |_| {
                    Obs::Formatted
                })
            }
            CartridgeOp::SetPartition(p) => observe(cart.set_partition(*p), |_| Obs::Unit),
            CartridgeOp::SetWriteProtected(wp) => {
                cart.set_write_protected(*wp);
                Obs::Unit
            }
            CartridgeOp::Sync => observe(cart.sync(), |_| Obs::Unit),
            CartridgeOp::Unload => observe(cart.unload(), |_| Obs::Unit),
            CartridgeOp::Load => observe(cart.load(UnixTime(1_700_000_000 + step as u64)), |_| {
                Obs::Unit
            }),
        };
        assert_eq!(got, expected, "step {step}: outcome of {op:?}");
        stats.record(&got);
        // State after the step.
        assert_eq!(
            cart.is_loaded(),
            model.loaded,
            "step {step}: loaded after {op:?}"
        );
        if model.loaded {
            let pos = observe(cart.position(), Obs::Position);
            assert_eq!(
                pos,
                Obs::Position(model.position()),
                "step {step}: position after {op:?}"
            );
        }
        assert_eq!(
            cart.partition_count(),
            model.parts.len(),
            "step {step}: partition count"
        );
        for p in 0..model.parts.len() {
            assert_eq!(
                cart.used_bytes(p as u8).ok(),
                Some(model.used(p)),
                "step {step}: used bytes p{p}"
            );
            assert_eq!(
                cart.partition_capacity(p as u8).ok(),
                Some(model.caps[p]),
                "step {step}: capacity p{p}"
            );
        }
        let c = cart.counters();
        assert_eq!(
            (
                cart.load_count(),
                (c.bytes_written_total, c.bytes_written_load),
                (c.bytes_read_total, c.bytes_read_load),
                (c.records_written, c.records_read),
                (c.filemarks_written, c.filemarks_read)
            ),
            (
                model.load_count,
                model.written,
                model.read,
                model.records,
                model.filemarks
            ),
            "step {step}: counters after {op:?}"
        );
    }
    // Byte-exact content check through the stores.
    let (_, mut stores) = cart.into_parts();
    for (p, (store, objs)) in stores.iter_mut().zip(&model.parts).enumerate() {
        assert_eq!(
            store.object_count(),
            objs.len() as u64,
            "final: object count p{p}"
        );
        for (n, o) in objs.iter().enumerate() {
            let n = n as u64;
            match *o {
                Obj::Fm => assert_eq!(
                    store.object(n).ok(),
                    Some(ObjectKind::Filemark),
                    "final: p{p} object {n}"
                ),
                Obj::Rec { len, seed } => {
                    assert_eq!(
                        store.object(n).ok(),
                        Some(ObjectKind::Record { len }),
                        "final: p{p} object {n}"
                    );
                    store
                        .read_record(n, &mut buf)
                        .unwrap_or_else(|e| panic!("final: p{p} read {n}: {e}"));
                    assert!(
                        buf == record_bytes(seed, len as usize),
                        "final: p{p} record {n} contents differ"
                    );
                }
            }
        }
    }
    stats
}

/// What a [`run_reference_model`] run exercised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReferenceStats {
    /// Steps executed.
    pub steps: u64,
    /// Successful writes reporting early warning.
    pub early_warnings: u64,
    /// Writes refused with end of medium.
    pub end_of_medium: u64,
    /// Records read with a length different from the request (ILI).
    pub ili_reads: u64,
    /// Spaces that stopped early (filemark, EOD or BOP).
    pub space_stops: u64,
    /// Successful formats.
    pub formats: u64,
    /// Refused WORM overwrites.
    pub worm_refusals: u64,
    /// Steps that failed with any error.
    pub errors: u64,
}

impl ReferenceStats {
    fn record(&mut self, o: &Obs) {
        self.steps += 1;
        match o {
            Obs::Write(w) if w.early_warning => self.early_warnings += 1,
            Obs::Read(
                ReadOutcome::Record {
                    data_len,
                    transferred,
                },
                _,
            ) if data_len != transferred => self.ili_reads += 1,
            Obs::Space(s) if *s != SpaceOutcome::Completed => self.space_stops += 1,
            Obs::Formatted => self.formats += 1,
            Obs::Err(e) => {
                self.errors += 1;
                match *e {
                    "EndOfMedium" => self.end_of_medium += 1,
                    "WormOverwrite" => self.worm_refusals += 1,
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Sum of two runs' statistics.
    pub fn merge(self, o: Self) -> Self {
        ReferenceStats {
            steps: self.steps + o.steps,
            early_warnings: self.early_warnings + o.early_warnings,
            end_of_medium: self.end_of_medium + o.end_of_medium,
            ili_reads: self.ili_reads + o.ili_reads,
            space_stops: self.space_stops + o.space_stops,
            formats: self.formats + o.formats,
            worm_refusals: self.worm_refusals + o.worm_refusals,
            errors: self.errors + o.errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_media::{MemoryPartition, MemoryPartitionError};

    proptest! {
        #[test]
        fn memory_partition_conforms(ops in partition_ops(64)) {
            check_partition_store(MemoryPartition::new, &ops);
        }
    }

    #[test]
    fn record_bytes_is_deterministic_and_seed_sensitive() {
        assert_eq!(record_bytes(1, 1000), record_bytes(1, 1000));
        assert_ne!(record_bytes(1, 1000), record_bytes(2, 1000));
        assert_eq!(record_bytes(1, 13).len(), 13);
        assert!(record_bytes(5, 0).is_empty());
    }

    /// Wraps a MemoryPartition and injects one bug.
    struct Buggy {
        inner: MemoryPartition,
        bug: Bug,
    }

    #[derive(Clone, Copy)]
    enum Bug {
        FilemarkPositionOffByOne,
        TruncateKeepsOneMore,
        CorruptsLastByte,
    }

    impl PartitionStore for Buggy {
        type Error = MemoryPartitionError;
        fn object_count(&self) -> u64 {
            self.inner.object_count()
        }
        fn object(&self, n: u64) -> Result<ObjectKind, Self::Error> {
            self.inner.object(n)
        }
        fn read_record(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), Self::Error> {
            self.inner.read_record(n, buf)?;
            if let (Bug::CorruptsLastByte, Some(b)) = (self.bug, buf.last_mut()) {
                *b ^= 1;
            }
            Ok(())
        }
        fn append_record(&mut self, data: &[u8]) -> Result<(), Self::Error> {
            self.inner.append_record(data)
        }
        fn append_encrypted_record(&mut self, data: &[u8]) -> Result<(), Self::Error> {
            self.inner.append_encrypted_record(data)
        }
        fn append_filemarks(&mut self, count: u32) -> Result<(), Self::Error> {
            self.inner.append_filemarks(count)
        }
        fn truncate(&mut self, n: u64) -> Result<(), Self::Error> {
            match self.bug {
                Bug::TruncateKeepsOneMore => self.inner.truncate(n + 1),
                _ => self.inner.truncate(n),
            }
        }
        fn filemarks_before(&self, n: u64) -> Result<u64, Self::Error> {
            self.inner.filemarks_before(n)
        }
        fn filemark_position(&self, k: u64) -> Result<Option<u64>, Self::Error> {
            let p = self.inner.filemark_position(k)?;
            Ok(match self.bug {
                Bug::FilemarkPositionOffByOne => p.map(|p| p + 1),
                _ => p,
            })
        }
        fn data_bytes(&self) -> u64 {
            self.inner.data_bytes()
        }
        fn sync(&mut self) -> Result<(), Self::Error> {
            self.inner.sync()
        }
        fn unsynced(&self) -> reel_media::Unsynced {
            self.inner.unsynced()
        }
    }

    fn buggy(bug: Bug) -> impl Fn() -> Buggy {
        move || Buggy {
            inner: MemoryPartition::new(),
            bug,
        }
    }

    fn conformance_ops() -> Vec<PartitionOp> {
        vec![
            PartitionOp::AppendRecord {
                len: 10,
                seed: 1,
                encrypted: false,
            },
            PartitionOp::AppendFilemarks(1),
            PartitionOp::AppendRecord {
                len: 20,
                seed: 2,
                encrypted: false,
            },
            PartitionOp::Truncate(Pick(0)),
        ]
    }

    #[test]
    fn conformance_passes_for_the_reference_store() {
        check_partition_store(MemoryPartition::new, &conformance_ops());
    }

    #[test]
    #[should_panic(expected = "filemark_position")]
    fn conformance_detects_wrong_filemark_positions() {
        let ops = &conformance_ops()[..3];
        check_partition_store(buggy(Bug::FilemarkPositionOffByOne), ops);
    }

    #[test]
    #[should_panic(expected = "object_count")]
    fn conformance_detects_wrong_truncate() {
        let mut ops = conformance_ops();
        ops[3] = PartitionOp::Truncate(Pick(u64::MAX / 2));
        check_partition_store(buggy(Bug::TruncateKeepsOneMore), &ops);
    }

    #[test]
    #[should_panic(expected = "contents differ")]
    fn conformance_detects_corrupt_data() {
        check_partition_store(buggy(Bug::CorruptsLastByte), &conformance_ops()[..1]);
    }

    fn small_case(ops: Vec<CartridgeOp>) -> ReferenceCase {
        ReferenceCase {
            worm: false,
            capacity: 1 << 20,
            early_warning_percent: 98,
            ops,
        }
    }

    fn overwrite_case() -> ReferenceCase {
        use CartridgeOp::*;
        small_case(vec![
            Write { len: 100, seed: 1 },
            WriteFilemarks(1),
            Write { len: 100, seed: 2 },
            Locate {
                partition: 0,
                object: 1,
            },
            Write { len: 50, seed: 3 },
            Rewind,
            Read { max_len: 10 },
            SpaceFilemarks(1),
        ])
    }

    #[test]
    fn reference_model_passes_for_memory_partition() {
        let stats = run_reference_model(MemoryPartition::new, &overwrite_case());
        assert_eq!(stats.steps, 9);
        assert_eq!(stats.ili_reads, 1);
        assert_eq!(stats.space_stops, 1, "no filemark left after the overwrite");
    }

    #[test]
    // The object after the truncation point survives: the next write lands one object late.
    #[should_panic(expected = "step 5: position after Write")]
    fn reference_model_detects_wrong_truncate() {
        run_reference_model(buggy(Bug::TruncateKeepsOneMore), &overwrite_case());
    }

    #[test]
    #[should_panic(expected = "p0 record 0 contents differ")]
    fn reference_model_detects_corrupt_data() {
        run_reference_model(buggy(Bug::CorruptsLastByte), &overwrite_case());
    }
}
