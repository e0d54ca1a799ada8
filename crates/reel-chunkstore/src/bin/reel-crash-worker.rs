//! Test helper for the chunk store's crash tests (`tests/crash.rs`, `tests/faults.rs`,
//! `tests/crash_s3.rs`); not a
//! user tool. It runs a random workload, deterministic by seed, against a store in a directory
//! (`<dir>/objects`: a `LocalBackend`; `<dir>/catalog`: the catalog) and journals what it knows
//! to be durable in `<dir>/journal`, so that a parent process can kill it at any moment and then
//! check the store against the journal.
//!
//! ```text
//! reel-crash-worker kill  <dir> <seed>               run until SIGKILLed (or 60 s pass)
//! reel-crash-worker power <dir> <seed> <crash-after>  CrashBackend armed with <crash-after>;
//!                                                     exit(0) without destructors at the first
//!                                                     failure (power loss of the back end plus
//!                                                     the death of the process)
//! ```
//!
//! The starting state of the streams is read from `<dir>/state` (written by the parent after it
//! verified the store; absent = empty streams). Journal lines, each written with one `write` and
//! then fsynced:
//! - `I <n> <state>`: intent — every stream has been flushed to `<state>` and sync `n` is about
//!   to be called (the store may be at `<state>` after a crash from here on);
//! - `D <n>`: sync `n` returned successfully (the store is at the state of intent `n`);
//! - `K <n>` / `k <n>`: a catalog compaction after sync `n` begins / ended (the state is that
//!   of sync `n` throughout: compaction moves pages, never rows);
//! - `C <why>` (power mode): the crash was hit and the process exits.
//!
//! This file is also compiled into the tests as a module (`#[path]`): they share the workload
//! model, the record generator and the journal format with it, and the kill tests find their
//! parent's side here (`Reaper`, `check_after_kill`).

#![allow(dead_code, clippy::should_implement_trait, clippy::needless_range_loop)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;

use reel_backend::{Backend, CrashBackend, LocalBackend};
use reel_chunkstore::{ChunkStore, StoreConfig, StoreError, Stream, StreamId};

/// The streams every workload writes.
pub const STREAM_IDS: [u64; 3] = [1, 2, 3];
/// The sidecar key holding a summary of the stream's records (committed atomically with them).
pub const SIDECAR_KEY: u64 = 7;

// ---------------------------------------------------------------------------------------------
// Deterministic randomness and record contents
// ---------------------------------------------------------------------------------------------

pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(splitmix(seed ^ 0x5EED))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A record: its content key and length. The content of `(key, len)` is the first `len` bytes
/// of an endless stream determined by `key`, so a prefix of a record is a record too (truncation
/// in the middle of a record stays describable) and equal `(key, len)` pairs are equal bytes
/// (dedup).
pub type Rec = (u64, u32);

/// Appends the content of record `(key, len)` to `out`. Keys divisible by 3 give compressible
/// bytes (zstd blobs), the others noise (raw blobs).
pub fn fill_into(key: u64, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.reserve(len + 8);
    let mut s = splitmix(key) | 1;
    let compressible = key.is_multiple_of(3);
    while out.len() - start < len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let word = if compressible {
            // Four symbols from a small alphabet per 8 bytes: about 2 bits of entropy per byte.
            let b = s.to_le_bytes();
            let mut w = [0u8; 8];
            for i in 0..8 {
                w[i] = b"  eeetaoinshrdlu\n"[(b[i / 2] >> ((i % 2) * 4)) as usize & 15];
            }
            w
        } else {
            s.to_le_bytes()
        };
        out.extend_from_slice(&word);
    }
    out.truncate(start + len);
}

pub fn fill(key: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::new();
    fill_into(key, len, &mut v);
    v
}

pub fn total_len(recs: &[Rec]) -> u64 {
    recs.iter().map(|r| u64::from(r.1)).sum()
}

/// The bytes `recs[..]` make, from byte `from` to byte `to` of the stream.
pub fn expected_range(recs: &[Rec], from: u64, to: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((to - from) as usize);
    let mut at = 0u64;
    let mut scratch = Vec::new();
    for &(key, len) in recs {
        let end = at + u64::from(len);
        if end > from && at < to {
            scratch.clear();
            let want_end = (to.min(end) - at) as usize;
            fill_into(key, want_end, &mut scratch);
            let skip = from.saturating_sub(at) as usize;
            out.extend_from_slice(&scratch[skip..]);
        }
        at = end;
        if at >= to {
            break;
        }
    }
    out
}

/// Records cut to `len` bytes (the last one possibly shortened).
pub fn cut(recs: &[Rec], len: u64) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut at = 0u64;
    for &(key, l) in recs {
        if at >= len {
            break;
        }
        let take = (len - at).min(u64::from(l));
        out.push((key, take as u32));
        at += take;
    }
    out
}

/// The sidecar value the workload keeps with a stream: record count, length, last key.
pub fn summary(recs: &[Rec]) -> Vec<u8> {
    format!(
        "{} {} {:x}",
        recs.len(),
        total_len(recs),
        recs.last().map_or(0, |r| r.0)
    )
    .into_bytes()
}

// ---------------------------------------------------------------------------------------------
// The model: what each stream holds
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub streams: BTreeMap<u64, Vec<Rec>>,
}

impl Model {
    pub fn empty() -> Model {
        Model {
            streams: STREAM_IDS.iter().map(|&s| (s, Vec::new())).collect(),
        }
    }

    pub fn recs(&self, id: u64) -> &[Rec] {
        self.streams.get(&id).map_or(&[], |v| v.as_slice())
    }

    pub fn len(&self, id: u64) -> u64 {
        total_len(self.recs(id))
    }

    /// `1=key.len,key.len;2=...;3=...` (hex).
    pub fn encode(&self) -> String {
        let mut s = String::new();
        for (i, (id, recs)) in self.streams.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            let _ = write!(s, "{id}=");
            for (j, (k, l)) in recs.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{k:x}.{l:x}");
            }
        }
        s
    }

    pub fn decode(s: &str) -> Option<Model> {
        let mut streams = BTreeMap::new();
        for part in s.split(';') {
            let (id, list) = part.split_once('=')?;
            let mut recs = Vec::new();
            if !list.is_empty() {
                for item in list.split(',') {
                    let (k, l) = item.split_once('.')?;
                    recs.push((
                        u64::from_str_radix(k, 16).ok()?,
                        u32::from_str_radix(l, 16).ok()?,
                    ));
                }
            }
            streams.insert(id.parse().ok()?, recs);
        }
        Some(Model { streams })
    }
}

/// What a journal says: the last state a sync completed for, and the state of an intent whose
/// sync may or may not have completed (the store must be at one of them).
#[derive(Debug)]
pub struct JournalView {
    pub done: Model,
    pub pending_intent: Option<Model>,
    pub syncs_done: u64,
    pub intents: u64,
    pub crashed: Option<String>,
    pub torn_lines: u64,
    /// Catalog compactions that ended, and whether one had begun and not ended (the kill).
    pub compactions: u64,
    pub in_compaction: bool,
}

/// Parses a journal written on top of `start`. Only complete (newline-terminated) lines count:
/// a torn last line is the write the kill interrupted, and its sync was never called.
pub fn read_journal(text: &str, start: &Model) -> Result<JournalView, String> {
    let mut view = JournalView {
        done: start.clone(),
        pending_intent: None,
        syncs_done: 0,
        intents: 0,
        crashed: None,
        torn_lines: 0,
        compactions: 0,
        in_compaction: false,
    };
    let mut intent: Option<(u64, Model)> = None;
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    if complete.len() != text.len() {
        view.torn_lines += 1;
    }
    for line in complete.lines() {
        let mut parts = line.splitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("I"), Some(n), Some(state)) => {
                let n: u64 = n.parse().map_err(|_| format!("bad intent line {line:?}"))?;
                let m = Model::decode(state).ok_or_else(|| format!("bad state in {line:?}"))?;
                intent = Some((n, m));
                view.intents += 1;
            }
            (Some("I"), Some(n), None) => {
                // An intent for an all-empty state has an empty third field.
                let n: u64 = n.parse().map_err(|_| format!("bad intent line {line:?}"))?;
                intent = Some((n, Model::decode("").unwrap_or_default()));
                view.intents += 1;
            }
            (Some("D"), Some(n), None) => {
                let n: u64 = n.parse().map_err(|_| format!("bad done line {line:?}"))?;
                match intent.take() {
                    Some((i, m)) if i == n => {
                        view.done = m;
                        view.syncs_done += 1;
                    }
                    other => {
                        return Err(format!(
                            "done {n} without its intent (had {:?})",
                            other.map(|o| o.0)
                        ));
                    }
                }
            }
            (Some("K"), Some(_), None) => view.in_compaction = true,
            (Some("k"), Some(_), None) => {
                view.in_compaction = false;
                view.compactions += 1;
            }
            (Some("C"), _, _) => view.crashed = Some(line.to_string()),
            _ => return Err(format!("unparsable journal line {line:?}")),
        }
    }
    view.pending_intent = intent.map(|(_, m)| m);
    Ok(view)
}

// ---------------------------------------------------------------------------------------------
// The workload driver
// ---------------------------------------------------------------------------------------------

/// Knobs of the random workload.
#[derive(Clone, Debug)]
pub struct Mix {
    /// Largest record; sizes are mostly 4 KiB..256 KiB, some tiny, some up to this.
    pub max_record: u32,
    /// A stream longer than this is truncated to a random earlier point.
    pub stream_cap: u64,
    /// Percent chance per step of a truncate, a read-back, an explicit flush.
    pub truncate_pct: u64,
    pub read_pct: u64,
    pub flush_pct: u64,
    /// A sync every 1..=`sync_every` appends.
    pub sync_every: u64,
    /// Percent of sync points that are a reclaim instead.
    pub reclaim_pct: u64,
    /// Percent of completed sync points followed by an operator's catalog compaction
    /// (`ChunkStore::compact_catalog_now`: any spare page, as `reel compact` and, above a
    /// fiftieth, a stopping server do).
    pub compact_pct: u64,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            max_record: 1 << 20,
            stream_cap: 4 << 20,
            truncate_pct: 3,
            read_pct: 4,
            flush_pct: 4,
            sync_every: 6,
            reclaim_pct: 5,
            compact_pct: 0,
        }
    }
}

/// What a step did, for the caller's journal.
#[derive(Debug)]
pub enum Step {
    Appended,
    Truncated,
    Read,
    Flushed,
    /// A sync point completed: the state is durable.
    Synced,
}

/// Callbacks around sync points (the journal).
pub trait SyncHooks {
    fn intent(&mut self, n: u64, state: &Model);
    fn done(&mut self, n: u64);
    /// A compaction of the catalog file after sync `n` begins / ended.
    fn compacting(&mut self, _n: u64) {}
    fn compacted(&mut self, _n: u64) {}
}

pub struct NoHooks;
impl SyncHooks for NoHooks {
    fn intent(&mut self, _: u64, _: &Model) {}
    fn done(&mut self, _: u64) {}
}

/// Runs the random workload on three streams of `store`, keeping a model of what each stream
/// holds (`cur`), what the catalog holds for it (`committed`: flushed) and what is durable
/// (`synced`). The model changes only when an operation succeeds; a failed step can be retried
/// by calling `step` again (a pending sync point is retried first).
pub struct Driver {
    pub store: ChunkStore,
    pub streams: Vec<(u64, Stream)>,
    pub rng: Rng,
    pub mix: Mix,
    pub cur: Model,
    pub committed: Model,
    pub synced: Model,
    key_seed: u64,
    key_counter: u64,
    until_sync: u64,
    /// A sync point whose intent was announced but which has not completed: (n, is_reclaim).
    pending_sync: Option<(u64, bool)>,
    pub syncs: u64,
    pub steps: u64,
    /// After a failed reclaim (which flushes streams part-way) the committed state of a stream
    /// is unknown until it is flushed again: the next sync flushes them all.
    flush_all_next: bool,
    /// Index of the stream whose `sync()` the pending sync point calls.
    via: usize,
}

impl Driver {
    /// Opens the three streams; `start` must be what the store holds (checked by length).
    pub fn new(
        store: ChunkStore,
        start: &Model,
        seed: u64,
        mix: Mix,
    ) -> Result<Driver, StoreError> {
        let mut streams = Vec::new();
        for &id in &STREAM_IDS {
            let s = store.open_stream(StreamId(id))?;
            assert_eq!(
                s.len(),
                start.len(id),
                "stream {id} does not hold the starting state"
            );
            streams.push((id, s));
        }
        let mut rng = Rng::new(seed);
        let until_sync = rng.range(1, mix.sync_every);
        Ok(Driver {
            store,
            streams,
            rng,
            mix,
            cur: start.clone(),
            committed: start.clone(),
            synced: start.clone(),
            key_seed: splitmix(seed.wrapping_mul(31).wrapping_add(7)),
            key_counter: 0,
            until_sync,
            pending_sync: None,
            syncs: 0,
            steps: 0,
            flush_all_next: false,
            via: 0,
        })
    }

    fn stream(&self, id: u64) -> &Stream {
        &self
            .streams
            .iter()
            .find(|(s, _)| *s == id)
            .expect("known stream")
            .1
    }

    fn record_len(&mut self) -> u32 {
        let max = u64::from(self.mix.max_record);
        let r = self.rng.below(100);
        let len = if r < 8 {
            self.rng.range(1, 4096)
        } else if r < 92 {
            // Log-uniform 4 KiB..256 KiB.
            let bits = 12 + self.rng.below(6);
            self.rng.range(1 << bits, 2 << bits)
        } else {
            self.rng.range(256 << 10, max.max(256 << 10))
        };
        len.min(max).max(1) as u32
    }

    fn next_record(&mut self, id: u64) -> Rec {
        let r = self.rng.below(100);
        if r < 10 {
            // One of a few popular records shared by every stream and every run (dedup).
            let p = 1 + self.rng.below(12);
            let len = (splitmix(p) % 200_000 + 1000).min(u64::from(self.mix.max_record)) as u32;
            return (p, len);
        }
        if r < 16 {
            // A record this stream already holds.
            let recs = self.cur.recs(id);
            if !recs.is_empty() {
                return recs[self.rng.below(recs.len() as u64) as usize];
            }
        }
        self.key_counter += 1;
        let key = splitmix(self.key_seed ^ self.key_counter) | (1 << 63);
        (key, self.record_len())
    }

    /// One random operation.
    pub fn step(&mut self, hooks: &mut dyn SyncHooks) -> Result<Step, StoreError> {
        if let Some((n, reclaim)) = self.pending_sync {
            return self.finish_sync(n, reclaim, hooks);
        }
        self.steps += 1;
        let id = STREAM_IDS[self.rng.below(STREAM_IDS.len() as u64) as usize];
        let len = self.cur.len(id);
        if len > self.mix.stream_cap || (len > 0 && self.rng.chance(self.mix.truncate_pct)) {
            let recs = self.cur.recs(id).to_vec();
            let to = if self.rng.chance(70) {
                // A record boundary (0 included).
                total_len(&recs[..self.rng.below(recs.len() as u64 + 1) as usize])
            } else {
                self.rng.below(len + 1)
            };
            let new = cut(&recs, to);
            let s = self.stream(id);
            s.set_sidecar(SIDECAR_KEY, Some(summary(&new)));
            if let Err(e) = s.truncate(to) {
                s.set_sidecar(SIDECAR_KEY, Some(summary(&recs)));
                return Err(e);
            }
            self.cur.streams.insert(id, new.clone());
            self.committed.streams.insert(id, new);
            return Ok(Step::Truncated);
        }
        if len > 0 && self.rng.chance(self.mix.read_pct) {
            let off = self.rng.below(len);
            let n = self.rng.range(1, (len - off).min(300_000));
            let mut buf = vec![0u8; n as usize];
            let r = self.stream(id).read_at(off, &mut buf);
            // read_at flushes the stream first; a back-end error comes from the read after it.
            if !matches!(r, Err(StoreError::Catalog(_) | StoreError::Stopped(_))) {
                self.committed
                    .streams
                    .insert(id, self.cur.recs(id).to_vec());
            }
            r?;
            let want = expected_range(self.cur.recs(id), off, off + n);
            assert!(
                buf == want,
                "stream {id}: read of {n} bytes at {off} returned wrong data"
            );
            return Ok(Step::Read);
        }
        if self.rng.chance(self.mix.flush_pct) {
            self.stream(id).flush()?;
            self.committed
                .streams
                .insert(id, self.cur.recs(id).to_vec());
            return Ok(Step::Flushed);
        }
        if self.until_sync == 0 {
            return self.begin_sync(hooks);
        }
        let rec = self.next_record(id);
        let data = fill(rec.0, rec.1 as usize);
        let s = self.stream(id);
        s.append_record(&data)?;
        let mut recs = self.cur.recs(id).to_vec();
        recs.push(rec);
        s.set_sidecar(SIDECAR_KEY, Some(summary(&recs)));
        self.cur.streams.insert(id, recs);
        self.until_sync -= 1;
        Ok(Step::Appended)
    }

    fn begin_sync(&mut self, hooks: &mut dyn SyncHooks) -> Result<Step, StoreError> {
        let reclaim = self.rng.chance(self.mix.reclaim_pct);
        if !reclaim {
            // Flush some streams (always the one whose sync() is called): the others keep their
            // appended-but-unflushed bytes out of this sync.
            let via = self.rng.below(STREAM_IDS.len() as u64) as usize;
            for (i, &id) in STREAM_IDS.iter().enumerate() {
                if i == via || self.flush_all_next || self.rng.chance(50) {
                    self.stream(id).flush()?;
                    self.committed
                        .streams
                        .insert(id, self.cur.recs(id).to_vec());
                }
            }
            self.flush_all_next = false;
            self.via = via;
        }
        self.syncs += 1;
        let n = self.syncs;
        // A reclaim flushes every open stream before its durable commit.
        let intent = if reclaim {
            self.cur.clone()
        } else {
            self.committed.clone()
        };
        hooks.intent(n, &intent);
        self.pending_sync = Some((n, reclaim));
        self.finish_sync(n, reclaim, hooks)
    }

    fn finish_sync(
        &mut self,
        n: u64,
        reclaim: bool,
        hooks: &mut dyn SyncHooks,
    ) -> Result<Step, StoreError> {
        if reclaim {
            if let Err(e) = self.store.reclaim(0.5, &mut |_, _| {}) {
                self.flush_all_next = true;
                return Err(e);
            }
            self.committed = self.cur.clone();
        } else {
            // Stream::sync = flush (a no-op here: it was just flushed) + store sync.
            let via = STREAM_IDS[self.via];
            self.stream(via).sync()?;
        }
        self.pending_sync = None;
        self.synced = self.committed.clone();
        self.until_sync = self.rng.range(1, self.mix.sync_every);
        hooks.done(n);
        if self.mix.compact_pct > 0 && self.rng.chance(self.mix.compact_pct) {
            hooks.compacting(n);
            // Compacted or not (too little spare): either way the state is sync n's.
            let _ = self.store.compact_catalog_now()?;
            hooks.compacted(n);
        }
        Ok(Step::Synced)
    }

    /// Whether a sync point has been announced but not completed.
    pub fn sync_pending(&self) -> bool {
        self.pending_sync.is_some()
    }
}

// ---------------------------------------------------------------------------------------------
// Checking a store against a model
// ---------------------------------------------------------------------------------------------

/// Compares every stream of `store` with `model`, byte for byte (and the sidecar). Returns a
/// description of the first difference.
pub fn compare(store: &ChunkStore, model: &Model) -> Result<(), String> {
    let lens: BTreeMap<u64, u64> = store
        .streams()
        .map_err(|e| format!("listing streams: {e}"))?
        .into_iter()
        .map(|(s, l)| (s.0, l))
        .collect();
    for &id in &STREAM_IDS {
        let want = model.len(id);
        let have = lens.get(&id).copied().unwrap_or(0);
        if have != want {
            return Err(format!("stream {id} is {have} bytes, expected {want}"));
        }
    }
    if let Some(extra) = lens.keys().find(|k| !STREAM_IDS.contains(k)) {
        return Err(format!("unexpected stream {extra}"));
    }
    for &id in &STREAM_IDS {
        let s = store
            .open_stream(StreamId(id))
            .map_err(|e| format!("opening stream {id}: {e}"))?;
        let recs = model.recs(id);
        let len = total_len(recs);
        let mut off = 0u64;
        let piece = 1u64 << 20;
        while off < len {
            let n = piece.min(len - off);
            let mut buf = vec![0u8; n as usize];
            s.read_at(off, &mut buf)
                .map_err(|e| format!("stream {id}: reading {n} at {off}: {e:?}"))?;
            let want = expected_range(recs, off, off + n);
            if buf != want {
                let at = buf.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                return Err(format!(
                    "stream {id}: wrong data at byte {}",
                    off + at as u64
                ));
            }
            off += n;
        }
        let side = s
            .sidecar(SIDECAR_KEY)
            .map_err(|e| format!("sidecar of {id}: {e}"))?;
        let ok = match &side {
            Some(v) => *v == summary(recs),
            None => recs.is_empty(),
        };
        if !ok {
            return Err(format!(
                "stream {id}: sidecar {:?} does not describe its {} records",
                side.map(|v| String::from_utf8_lossy(&v).into_owned()),
                recs.len()
            ));
        }
    }
    Ok(())
}

/// Checks a store reopened after a kill against the journal the killed process left: scrub must
/// be clean, and every stream must hold the last acknowledged state or, when the kill hit a
/// sync, the state of that sync (the same one for all streams: a sync is atomic across them).
/// Returns the state held, and whether it is the interrupted sync's (and differs from the last
/// acknowledged one).
pub fn check_after_kill(store: &ChunkStore, view: &JournalView) -> Result<(Model, bool), String> {
    let report = store
        .scrub(&mut |_, _| {})
        .map_err(|e| format!("scrub: {e}"))?;
    if !report.is_clean() {
        return Err(format!(
            "scrub after the kill is not clean: {} bad chunks, {} damaged ranges, {} index problems; first: {:?} / {:?} / {:?}",
            report.bad_chunks.len(),
            report.damage.len(),
            report.index_problems.len(),
            report.bad_chunks.first(),
            report.damage.first(),
            report.index_problems.first()
        ));
    }
    let mut candidates = vec![("last acknowledged sync", &view.done)];
    if let Some(p) = &view.pending_intent {
        candidates.push(("interrupted sync", p));
    }
    let mut errors = Vec::new();
    for (i, (what, m)) in candidates.iter().enumerate() {
        match compare(store, m) {
            Ok(()) => return Ok(((*m).clone(), i > 0 && *m != &view.done)),
            Err(e) => errors.push(format!("vs the {what}: {e}")),
        }
    }
    Err(format!(
        "the store holds no state the journal allows:\n  {}",
        errors.join("\n  ")
    ))
}

pub fn read_state(dir: &Path) -> Model {
    match std::fs::read_to_string(dir.join("state")) {
        Ok(s) => Model::decode(s.trim_end()).expect("state file parses"),
        Err(_) => Model::empty(),
    }
}

/// Replaces `<dir>/state` atomically.
pub fn write_state(dir: &Path, m: &Model) {
    let tmp = dir.join("state.tmp");
    std::fs::write(&tmp, m.encode() + "\n").expect("write state");
    std::fs::rename(&tmp, dir.join("state")).expect("rename state");
}

/// The journal: each line written with one `write` and (when `fsync`) fsynced before anything
/// else happens. Without fsync it survives the death of the process but not of the machine,
/// which is enough when the process only ever exits (power mode).
pub struct Journal {
    file: std::fs::File,
    fsync: bool,
}

impl Journal {
    pub fn open(dir: &Path, fsync: bool) -> Journal {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("journal"))
            .expect("open journal");
        Journal { file, fsync }
    }
    pub fn line(&mut self, s: &str) {
        let mut line = s.to_string();
        line.push('\n');
        self.file.write_all(line.as_bytes()).expect("journal write");
        if self.fsync {
            self.file.sync_data().expect("journal fsync");
        }
    }
}

impl SyncHooks for Journal {
    fn intent(&mut self, n: u64, state: &Model) {
        self.line(&format!("I {n} {}", state.encode()));
    }
    fn done(&mut self, n: u64) {
        self.line(&format!("D {n}"));
    }
    fn compacting(&mut self, n: u64) {
        self.line(&format!("K {n}"));
    }
    fn compacted(&mut self, n: u64) {
        self.line(&format!("k {n}"));
    }
}

// ---------------------------------------------------------------------------------------------
// The parent's side (tests/crash.rs, tests/crash_s3.rs)
// ---------------------------------------------------------------------------------------------

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A killable child process; killed if the test fails while it runs.
pub struct Reaper(pub Option<Child>);

impl Reaper {
    /// SIGKILLs the child; an error (with its stderr, from `stderr`) if it had already exited.
    pub fn kill(mut self, stderr: &Path) -> Result<(), String> {
        let mut child = self.0.take().expect("the child is not reaped yet");
        let _ = child.kill(); // SIGKILL
        let status = child.wait().map_err(|e| e.to_string())?;
        if status.signal() == Some(9) {
            return Ok(());
        }
        let err = std::fs::read_to_string(stderr).unwrap_or_default();
        Err(format!(
            "the child exited by itself ({status}) before the kill:\n{err}"
        ))
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Kill moments measured in the workers' progress rather than in wall time (`tests/crash.rs`,
/// `tests/crash_s3.rs`). On a loaded host (CI runs two test binaries at a time; a build beside
/// it took three quarters of the cores) a worker killed 5–300 ms after its start completed a
/// sixth of the syncs it completes on an idle one, and the work-done check failed although
/// every state check passed. The moments
/// are stretched while the workers complete fewer than 1.5 times the syncs per kill the check
/// asks for on average, or advance the store in fewer than 45 % of the kills (it asks for a
/// third), and eased back towards wall time above 3 times and 60 % (`tests/crash.rs` asks for
/// one sync per kill, which an idle host exceeds 3–6 times: unchanged there).
pub struct Pace {
    stretch: f64,
    pub max_stretch: f64,
    /// Syncs completed per kill and the share of kills after which the store had advanced,
    /// moving averages over about the last ten kills.
    syncs_per_kill: f64,
    advanced_share: f64,
    /// What the work-done check asks for per kill.
    wanted: f64,
}

impl Pace {
    pub fn new(wanted_syncs_per_kill: f64) -> Pace {
        Pace {
            stretch: 1.0,
            max_stretch: 1.0,
            syncs_per_kill: 2.0 * wanted_syncs_per_kill,
            advanced_share: 0.5,
            wanted: wanted_syncs_per_kill,
        }
    }

    pub fn stretched(&self, ms: u64) -> u64 {
        (ms as f64 * self.stretch) as u64
    }

    /// What the last kill's worker got done: syncs completed, and whether the store advanced.
    pub fn note(&mut self, syncs: u64, advanced: bool) {
        self.syncs_per_kill = 0.9 * self.syncs_per_kill + 0.1 * syncs as f64;
        self.advanced_share = 0.9 * self.advanced_share + if advanced { 0.1 } else { 0.0 };
        if self.syncs_per_kill < 1.5 * self.wanted || self.advanced_share < 0.45 {
            self.stretch = (self.stretch * 1.1).min(20.0);
        } else if self.syncs_per_kill > 3.0 * self.wanted && self.advanced_share > 0.6 {
            self.stretch = (self.stretch / 1.1).max(1.0);
        }
        self.max_stretch = self.max_stretch.max(self.stretch);
    }
}

/// A kill run means something only if the killed processes got work done: at least
/// `min_syncs` syncs completed, and the store advanced in a third of the `kills` or more.
pub fn assert_work_done(kills: u64, syncs: u64, min_syncs: u64, advanced: u64) {
    assert!(
        syncs >= min_syncs,
        "only {syncs} syncs completed in {kills} runs"
    );
    assert!(
        advanced * 3 >= kills,
        "the store advanced in only {advanced} of {kills} runs"
    );
}

/// Whether this run keeps the catalog journal (`REEL_CRASH_JOURNAL=1`, or `cache`: the
/// journal, with the objects behind a write-back cache as on object storage).
pub fn journal_on() -> bool {
    std::env::var("REEL_CRASH_JOURNAL").is_ok_and(|v| v == "1" || v == "cache")
}

/// Whether the objects go through a write-back cache (`REEL_CRASH_JOURNAL=cache`).
pub fn cached() -> bool {
    std::env::var("REEL_CRASH_JOURNAL").is_ok_and(|v| v == "cache")
}

/// The back end of a crash-test directory: `objects/`, or with [`cached`] a write-back cache
/// in `cache/` in front of `remote/` (the bucket's stand-in). Small capacity and few upload
/// threads, so kills land while writers wait for uploads.
pub fn backend_for(dir: &Path, cached: bool) -> Arc<dyn Backend> {
    if !cached {
        return Arc::new(LocalBackend::open(&dir.join("objects")).expect("open objects"));
    }
    let remote: Arc<dyn Backend> =
        Arc::new(LocalBackend::open(&dir.join("remote")).expect("open remote"));
    let config = reel_backend::CacheConfig {
        capacity_bytes: 8 << 20,
        upload_threads: 2,
        read_block_bytes: 256 << 10,
        ..reel_backend::CacheConfig::default()
    };
    Arc::new(
        reel_backend::WriteBackCache::open(&dir.join("cache"), remote, config).expect("open cache"),
    )
}

/// The store configuration a seed picks: small packs make background uploads happen mid-run.
pub fn config_for(seed: u64) -> StoreConfig {
    StoreConfig {
        pack_target: [256 << 10, 1 << 20, 32 << 20][(splitmix(seed) % 3) as usize],
        // Fixed for a whole run (a store must not switch its journal off and on again).
        journal: journal_on(),
        // Small pieces too, so kills land between the pieces of a group (`journal.rs`).
        journal_piece_bytes: [4 << 10, 64 << 10, 8 << 20][(splitmix(seed ^ 0x5eed) % 3) as usize],
        // Checkpoints never, every few journal objects, or after every one (`checkpoint.rs`).
        checkpoint_min_bytes: [u64::MAX, 1 << 20, 1][(splitmix(seed ^ 0xc4e) % 3) as usize],
        checkpoint_part_bytes: 64 << 10,
        // Index merges every few packs, now and then, or (the default) rarely at this size.
        index_merge_floor: [64, 1024, 64 << 10][(splitmix(seed ^ 0x3e6) % 3) as usize],
        ..StoreConfig::default()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: reel-crash-worker kill <dir> <seed> | power <dir> <seed> <crash-after>";
    let (Some(mode), Some(dir), Some(seed)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    let seed: u64 = seed.parse().expect("seed");
    let start = read_state(dir);
    let local = backend_for(dir, cached());
    let mut journal = Journal::open(dir, mode == "kill");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    match mode.as_str() {
        "kill" => {
            let store = ChunkStore::open(&dir.join("catalog"), local, config_for(seed))
                .expect("open store");
            let mix = Mix {
                compact_pct: env_u64("REEL_CRASH_COMPACT", 0),
                ..Mix::default()
            };
            let mut d = Driver::new(store, &start, seed, mix).expect("open streams");
            while std::time::Instant::now() < deadline {
                if let Err(e) = d.step(&mut journal) {
                    panic!("workload step failed on a healthy back end: {e:?}");
                }
            }
            eprintln!("not killed within 60 s");
            std::process::exit(3);
        }
        "power" => {
            let crash_after: u64 = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
            let crash = Arc::new(CrashBackend::new(local));
            let store = ChunkStore::open(&dir.join("catalog"), crash.clone(), config_for(seed))
                .expect("open store");
            let mix = Mix {
                max_record: 300 << 10,
                stream_cap: 2 << 20,
                sync_every: 4,
                ..Mix::default()
            };
            let mut d = Driver::new(store, &start, seed, mix).expect("open streams");
            crash.arm_crash_after(crash_after);
            for _ in 0..2000 {
                if let Err(e) = d.step(&mut journal) {
                    assert!(crash.crashed(), "failed before the crash: {e:?}");
                    journal.line(&format!("C {e}"));
                    // Die without running destructors: nothing more reaches the catalog file.
                    std::process::exit(0);
                }
            }
            journal.line("C none");
            std::process::exit(0);
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
