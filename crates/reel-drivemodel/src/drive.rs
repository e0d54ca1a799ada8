//! [`PhysicalDrive`]: one drive's state machine, advanced lazily to each call's `now`.
//!
//! The buffer is one number, `pending`: when writing, the native bytes waiting for the tape;
//! when reading, the free space the tape may read ahead into. Either way the moving tape
//! lowers `pending` at the chosen speed, the host raises it by each record's native length,
//! a host call must wait until `pending ≤ buffer − record`, the tape stops (a back-hitch) when
//! `pending` reaches zero, and a stopped drive starts again once `pending` reaches the restart
//! threshold. Writing and reading are the same machine seen from the two ends of the buffer.

use std::collections::VecDeque;
use std::time::Duration;

use crate::spec::DriveSpec;

/// What the tape is doing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Motion {
    /// Stopped, positioned, nothing buffered.
    Idle,
    /// Moving at the chosen speed-matching step.
    Streaming,
    /// Stopped after a back-hitch or a sync: reversing and repositioning.
    Repositioning,
    /// Stopped and positioned, waiting for the buffer to reach the restart threshold.
    WaitingForData,
    /// Loading a cartridge.
    Loading,
    /// Unloading a cartridge.
    Unloading,
    /// Rewinding.
    Rewinding,
    /// Locating or spacing.
    Locating,
}

/// A snapshot of a drive.
#[derive(Clone, Copy, Debug)]
pub struct DriveStats {
    /// What the tape is doing now.
    pub motion: Motion,
    /// Native bytes/s now; 0 when stopped.
    pub tape_speed: f64,
    /// Native bytes in the buffer (waiting to be written, or read ahead).
    pub buffer_bytes: u64,
    /// Tape stops that had to reposition, of every cause.
    pub back_hitches: u64,
    /// Total time spent repositioning.
    pub repositioning: Duration,
    /// Native bytes written to tape so far (data, record overhead and filemarks).
    pub native_bytes_on_tape: u64,
    /// Host bytes written and read so far.
    pub host_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dir {
    Neutral,
    Write,
    Read,
}

/// Below this share of the buffer a streaming drive shifts to a slower step when one is
/// slower than the host (so the buffer refills instead of running dry).
const LOW_WATERMARK: f64 = 0.25;
/// Above this share the drive shifts up to the step the host's rate asks for.
const HIGH_WATERMARK: f64 = 0.75;
/// The incoming-rate estimate looks at the last quarter buffer of native bytes.
const WINDOW_SHARE: f64 = 0.25;
const WINDOW_MAX_ENTRIES: usize = 4096;
const EPS: f64 = 1e-6;

/// One physical drive's state machine. `now` is time since any fixed epoch and never decreases
/// between calls. A new drive has a cartridge loaded and stands at BOT; the model does not
/// check that a cartridge is present (that is the SSC layer's job).
#[derive(Clone, Debug)]
pub struct PhysicalDrive {
    spec: &'static DriveSpec,
    /// Model time (s) the state below describes.
    t: f64,
    motion: Motion,
    /// End of a timed motion (repositioning, load, unload, rewind, locate).
    until: f64,
    dir: Dir,
    pending: f64,
    speed: f64,
    flushing: bool,
    compression: bool,
    position: f64,
    arrivals: VecDeque<(f64, f64)>,
    arrivals_sum: f64,
    back_hitches: u64,
    sync_hitches: u64,
    repositioning_s: f64,
    streaming_s: f64,
    streamed: f64,
    native_written: f64,
    host_bytes: u64,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl PhysicalDrive {
    /// A drive of this model with a cartridge loaded at BOT, compression on.
    pub fn new(spec: &'static DriveSpec) -> Self {
        PhysicalDrive {
            spec,
            t: 0.0,
            motion: Motion::Idle,
            until: 0.0,
            dir: Dir::Neutral,
            pending: 0.0,
            speed: 0.0,
            flushing: false,
            compression: true,
            position: 0.0,
            arrivals: VecDeque::new(),
            arrivals_sum: 0.0,
            back_hitches: 0,
            sync_hitches: 0,
            repositioning_s: 0.0,
            streaming_s: 0.0,
            streamed: 0.0,
            native_written: 0.0,
            host_bytes: 0,
        }
    }

    /// The drive's model.
    pub fn spec(&self) -> &'static DriveSpec {
        self.spec
    }

    /// Turns the drive's compression on or off (on by default). Off: records go to tape as
    /// they are, whatever `compressed_len` says.
    pub fn set_compression(&mut self, on: bool) {
        self.compression = on;
    }

    /// Back-hitches caused by synchronising points (filemarks without IMMED, flushes), as
    /// opposed to a host that did not keep up.
    pub fn sync_back_hitches(&self) -> u64 {
        self.sync_hitches
    }

    /// Current tape position in native bytes from BOT (at the model's own time).
    pub fn position(&self) -> u64 {
        self.position as u64
    }

    /// Total time spent streaming and native bytes moved while streaming.
    pub fn streaming_totals(&self, now: Duration) -> (Duration, u64) {
        let mut d = self.clone();
        d.run(secs(now).max(d.t), None);
        (Duration::from_secs_f64(d.streaming_s), d.streamed as u64)
    }

    fn cap(&self) -> f64 {
        self.spec.buffer_bytes as f64
    }

    fn done(&self, now: Duration) -> Duration {
        Duration::from_secs_f64(self.t).max(now)
    }

    /// The host hands a record of `len` bytes that compress to `compressed_len` (pass `len`
    /// when compression is off). Returns when the drive returns status (buffered mode: when
    /// the record is in the buffer).
    pub fn write(&mut self, now: Duration, len: u64, compressed_len: u64) -> Duration {
        let start = secs(now).max(self.t);
        self.run(start, None);
        self.enter(Dir::Write);
        let xfer_end = start + self.spec.record_overhead_s + len as f64 / self.spec.max_host_rate;
        self.run(xfer_end, None);
        let n = self.spec.native_len(len, compressed_len, self.compression) as f64;
        self.admit(n);
        self.host_bytes += len;
        self.done(now)
    }

    /// WRITE FILEMARKS: `count` filemarks; without `immed` the buffer is flushed to tape (status
    /// when it is there) and the tape stops and repositions; with `immed` neither.
    pub fn write_filemarks(&mut self, now: Duration, count: u32, immed: bool) -> Duration {
        let start = secs(now).max(self.t);
        self.run(start, None);
        if count == 0 && immed {
            return self.done(now);
        }
        self.enter(Dir::Write);
        self.run(start + self.spec.record_overhead_s, None);
        if count > 0 {
            self.admit(f64::from(count) * self.spec.filemark_bytes as f64);
        }
        if !immed {
            self.sync();
        }
        self.done(now)
    }

    /// The host reads a record of `len` bytes stored compressed as `compressed_len`. Returns
    /// when the data has been transferred.
    pub fn read(&mut self, now: Duration, len: u64, compressed_len: u64) -> Duration {
        let start = secs(now).max(self.t);
        self.run(start, None);
        self.enter(Dir::Read);
        let n = self.spec.native_len(len, compressed_len, self.compression) as f64;
        self.admit(n);
        let xfer_end = self.t + self.spec.record_overhead_s + len as f64 / self.spec.max_host_rate;
        self.run(xfer_end, None);
        self.host_bytes += len;
        self.done(now)
    }

    /// Loads a cartridge (load to ready); the drive stands at BOT afterwards.
    pub fn load(&mut self, now: Duration) -> Duration {
        self.settle(secs(now));
        self.timed(Motion::Loading, self.spec.load_s);
        self.position = 0.0;
        self.done(now)
    }

    /// Flushes, rewinds and unloads.
    pub fn unload(&mut self, now: Duration) -> Duration {
        self.settle(secs(now));
        let rewind = self.rewind_time();
        self.timed(Motion::Rewinding, rewind);
        self.position = 0.0;
        self.timed(Motion::Unloading, self.spec.unload_s);
        self.done(now)
    }

    /// Flushes and rewinds to BOT.
    pub fn rewind(&mut self, now: Duration) -> Duration {
        self.settle(secs(now));
        let rewind = self.rewind_time();
        self.timed(Motion::Rewinding, rewind);
        self.position = 0.0;
        self.done(now)
    }

    /// Locate/space to a tape position given in native bytes from beginning of partition (the
    /// model keeps its own current position in native bytes).
    pub fn locate(&mut self, now: Duration, native_position: u64) -> Duration {
        self.settle(secs(now));
        let target = native_position as f64;
        let distance = (target - self.position).abs();
        let s = self.spec;
        let time = s.locate_base_s()
            + (distance / s.native_capacity as f64).min(1.0)
                * (s.locate_full_s() - s.locate_base_s());
        self.timed(Motion::Locating, time);
        self.position = target;
        self.done(now)
    }

    /// A synchronising point other than a filemark (e.g. WRITE FILEMARKS 0, SYNCHRONIZE):
    /// flush, then stop like a filemark without IMMED.
    pub fn flush(&mut self, now: Duration) -> Duration {
        let start = secs(now).max(self.t);
        self.run(start, None);
        self.sync();
        self.done(now)
    }

    /// A snapshot at `now` (the state is advanced on a copy; `self` does not change).
    pub fn stats(&self, now: Duration) -> DriveStats {
        let mut d = self.clone();
        d.run(secs(now).max(d.t), None);
        let buffer = match d.dir {
            Dir::Write => d.pending,
            Dir::Read => (d.cap() - d.pending).max(0.0),
            Dir::Neutral => 0.0,
        };
        DriveStats {
            motion: d.motion,
            tape_speed: if d.motion == Motion::Streaming {
                d.speed
            } else {
                0.0
            },
            buffer_bytes: buffer.round() as u64,
            back_hitches: d.back_hitches,
            repositioning: Duration::from_secs_f64(d.repositioning_s),
            native_bytes_on_tape: d.native_written.round() as u64,
            host_bytes: d.host_bytes,
        }
    }

    // ---- internals ----

    /// Waits until the host may put `n` more pending bytes in, then puts them in.
    fn admit(&mut self, n: f64) {
        let target = (self.cap() - n).max(0.0);
        let blocked = self.pending > target + EPS;
        if blocked {
            self.run(f64::INFINITY, Some(target));
        }
        self.pending += n;
        self.note_arrival(n, blocked);
    }

    /// Flushes buffered write data to tape; the tape then stops and repositions.
    fn sync(&mut self) {
        if self.dir != Dir::Write || self.pending <= EPS {
            return;
        }
        self.flushing = true;
        self.run(f64::INFINITY, Some(0.0));
        self.flushing = false;
    }

    /// Brings the drive to `now` and to rest before a positioning command: flushes write data,
    /// waits out a repositioning, drops read-ahead.
    fn settle(&mut self, now: f64) {
        let start = now.max(self.t);
        self.run(start, None);
        self.sync();
        if self.motion == Motion::Repositioning {
            let until = self.until;
            self.run(until, None);
        }
        if self.motion == Motion::Streaming {
            // Reading ahead: the tape stops where it is (no back-hitch charged: the positioning
            // command moves the tape anyway).
            self.motion = Motion::Idle;
        }
        self.dir = Dir::Neutral;
        self.pending = 0.0;
        self.arrivals.clear();
        self.arrivals_sum = 0.0;
    }

    fn timed(&mut self, motion: Motion, duration: f64) {
        self.motion = motion;
        self.until = self.t + duration.max(0.0);
        let until = self.until;
        self.run(until, None);
    }

    fn rewind_time(&self) -> f64 {
        (self.position / self.spec.native_capacity as f64).min(1.0) * self.spec.rewind_full_s()
    }

    fn enter(&mut self, dir: Dir) {
        if self.dir == dir {
            return;
        }
        if self.dir == Dir::Write {
            self.sync();
        }
        if self.motion == Motion::Streaming {
            self.motion = Motion::Idle;
        }
        self.arrivals.clear();
        self.arrivals_sum = 0.0;
        self.dir = dir;
        self.pending = if dir == Dir::Read { self.cap() } else { 0.0 };
    }

    fn note_arrival(&mut self, n: f64, blocked: bool) {
        self.arrivals.push_back((self.t, n));
        self.arrivals_sum += n;
        let window = self.cap() * WINDOW_SHARE;
        while self.arrivals.len() > 2
            && (self.arrivals_sum - self.arrivals[0].1 >= window
                || self.arrivals.len() > WINDOW_MAX_ENTRIES)
        {
            let (_, b) = self.arrivals.pop_front().expect("non-empty");
            self.arrivals_sum -= b;
        }
        if self.motion == Motion::Streaming && self.pending >= HIGH_WATERMARK * self.cap() {
            let steps = self.spec.speed_steps;
            let wanted = match self.rate_estimate() {
                Some(r) => self.spec.step_for(r),
                None => self.spec.top_speed(),
            };
            let next_up = steps.iter().copied().find(|&s| s > self.speed);
            let mut speed = self.speed.max(wanted);
            if blocked && let Some(up) = next_up {
                speed = speed.max(up);
            }
            self.speed = speed;
        }
    }

    /// Native bytes/s the host has been delivering (writing) or taking (reading) lately.
    fn rate_estimate(&self) -> Option<f64> {
        if self.arrivals.len() < 2 {
            return None;
        }
        let first = self.arrivals[0].0;
        let last = self.arrivals[self.arrivals.len() - 1].0;
        let span = last - first;
        if span <= 0.0 {
            return None;
        }
        Some((self.arrivals_sum - self.arrivals[0].1) / span)
    }

    /// The step a drive picks when it starts streaming.
    fn start_speed(&self) -> f64 {
        match self.rate_estimate() {
            Some(r) => self.spec.step_for(r),
            None => self.spec.top_speed(),
        }
    }

    /// The step below the current one to fall back to when the buffer runs low: the fastest
    /// step slower than the host, else the slowest step.
    fn downshift_target(&self) -> Option<f64> {
        if self.flushing {
            return None;
        }
        let r = self.rate_estimate()?;
        let target = self
            .spec
            .speed_steps
            .iter()
            .copied()
            .rev()
            .find(|&s| s < r)
            .unwrap_or_else(|| self.spec.lowest_speed());
        (target < self.speed).then_some(target)
    }

    fn drain(&mut self, dt: f64) {
        let moved = self.speed * dt;
        self.pending = (self.pending - moved).max(0.0);
        self.streamed += moved;
        self.streaming_s += dt;
        self.position += moved;
        if self.dir == Dir::Write {
            self.native_written += moved;
        }
        self.t += dt;
    }

    /// Advances the model until time `to`, or (with `target`) until `pending ≤ target`,
    /// whichever comes first. Returns whether the target was reached.
    fn run(&mut self, to: f64, target: Option<f64>) -> bool {
        loop {
            if let Some(g) = target
                && self.pending <= g + EPS
            {
                return true;
            }
            match self.motion {
                Motion::Repositioning
                | Motion::Loading
                | Motion::Unloading
                | Motion::Rewinding
                | Motion::Locating => {
                    let end = self.until.min(to);
                    if self.motion == Motion::Repositioning {
                        self.repositioning_s += (end - self.t).max(0.0);
                    }
                    self.t = self.t.max(end);
                    if self.until > to {
                        return false;
                    }
                    self.motion = if self.pending > EPS || self.dir == Dir::Read {
                        Motion::WaitingForData
                    } else {
                        Motion::Idle
                    };
                }
                Motion::Idle | Motion::WaitingForData => {
                    let threshold = self.spec.restart_fraction * self.cap();
                    let blocked = target.is_some_and(|g| self.pending > g + EPS);
                    let has_work = self.dir != Dir::Neutral && self.pending > EPS;
                    if has_work && (self.pending >= threshold - EPS || self.flushing || blocked) {
                        self.speed = self.start_speed();
                        self.motion = Motion::Streaming;
                        continue;
                    }
                    if self.dir == Dir::Write && self.pending > EPS {
                        self.motion = Motion::WaitingForData;
                    }
                    if to.is_finite() {
                        self.t = self.t.max(to);
                    }
                    return false;
                }
                Motion::Streaming => {
                    if self.t >= to {
                        return false;
                    }
                    let s = self.speed;
                    let level = self.pending;
                    #[derive(PartialEq)]
                    enum Event {
                        Empty,
                        Target,
                        Low(f64),
                    }
                    let mut dt = level / s;
                    let mut event = Event::Empty;
                    if let Some(g) = target {
                        let d = (level - g) / s;
                        if d < dt {
                            dt = d;
                            event = Event::Target;
                        }
                    }
                    let low = LOW_WATERMARK * self.cap();
                    if level > low + EPS
                        && let Some(lower) = self.downshift_target()
                    {
                        let d = (level - low) / s;
                        if d < dt {
                            dt = d;
                            event = Event::Low(lower);
                        }
                    }
                    if self.t + dt > to {
                        let step = to - self.t;
                        self.drain(step);
                        return false;
                    }
                    self.drain(dt);
                    match event {
                        Event::Target => {
                            if let Some(g) = target {
                                self.pending = g;
                            }
                        }
                        Event::Low(lower) => self.speed = lower,
                        Event::Empty => {
                            self.pending = 0.0;
                            self.back_hitches += 1;
                            if self.flushing {
                                self.sync_hitches += 1;
                                self.flushing = false;
                            }
                            self.motion = Motion::Repositioning;
                            self.until = self.t + self.spec.reposition_s;
                        }
                    }
                }
            }
        }
    }
}
