//! [`simulate`]: a backup job written to one drive, record by record.

use std::time::Duration;

use crate::drive::PhysicalDrive;
use crate::spec::DriveSpec;

/// Where the data comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source {
    /// As fast as the drive takes it.
    Unlimited,
    /// A steady producer, bytes/s (a host, a disk, a network link), with `queue_depth` record
    /// buffers besides the one the drive is taking (so 1 = double buffering: the source
    /// produces the next record while the drive takes this one).
    Rate(f64),
    /// A fixed number of agent buffers, each refilled at `refill_rate` bytes/s once the drive
    /// has taken it; the writer takes whichever full buffer is ready first.
    Agents {
        /// Number of agents (buffers).
        count: u32,
        /// Bytes per agent buffer.
        buffer_bytes: u64,
        /// Refill rate of one agent, bytes/s.
        refill_rate: f64,
    },
}

/// How the data compresses: `compressible_share` of the records compress by `ratio`, the rest
/// not at all. `ratio` 0 ([`Compressibility::OFF`]) means the drive's compression is off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compressibility {
    /// 0..=1 of the data.
    pub compressible_share: f64,
    /// e.g. 2.0 for that share; the rest incompressible.
    pub ratio: f64,
}

impl Compressibility {
    /// Drive compression off.
    pub const OFF: Compressibility = Compressibility {
        compressible_share: 0.0,
        ratio: 0.0,
    };

    /// All data compresses by `ratio`.
    pub fn uniform(ratio: f64) -> Self {
        Compressibility {
            compressible_share: 1.0,
            ratio,
        }
    }

    /// Compression on, nothing compresses.
    pub const INCOMPRESSIBLE: Compressibility = Compressibility {
        compressible_share: 0.0,
        ratio: 1.0,
    };

    /// Whether the drive's compression is off.
    pub fn is_off(&self) -> bool {
        self.ratio <= 0.0
    }

    /// Whether record `i` (counting from 0) is a compressible one: spreads the compressible
    /// records evenly (Bresenham), so any stretch of the job has the job's share.
    pub fn record_compresses(&self, i: u64) -> bool {
        let share = self.compressible_share.clamp(0.0, 1.0);
        ((i + 1) as f64 * share).floor() > (i as f64 * share).floor()
    }

    /// Host bytes per native byte over the whole job, ignoring per-record overhead (what a
    /// raw-escape drive achieves).
    pub fn effective_ratio(&self) -> f64 {
        if self.is_off() {
            return 1.0;
        }
        let share = self.compressible_share.clamp(0.0, 1.0);
        let r = self.ratio.max(1.0);
        1.0 / (share / r + (1.0 - share))
    }
}

/// A write job.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The data source.
    pub source: Source,
    /// Host bytes per WRITE.
    pub record_size: u64,
    /// How the data compresses.
    pub compressibility: Compressibility,
    /// Host bytes between filemarks.
    pub filemark_every: Option<u64>,
    /// Filemarks with IMMED (no flush, no stop).
    pub immed: bool,
    /// Records the source may have ready ahead of the drive (Rate source), ≥ 1.
    pub queue_depth: u32,
    /// Host bytes in the job.
    pub total_bytes: u64,
}

/// What a job cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// From the first record until the last one is on tape (a final flush included).
    pub elapsed: Duration,
    /// Host bytes/s.
    pub throughput: f64,
    /// Time-weighted average of the chosen speed while streaming, native bytes/s.
    pub tape_speed: f64,
    /// All back-hitches.
    pub back_hitches: u64,
    /// Back-hitches caused by filemarks without IMMED and the final flush.
    pub sync_back_hitches: u64,
    /// Total time spent repositioning.
    pub repositioning: Duration,
    /// Native bytes written to tape.
    pub native_bytes: u64,
    /// Share of the cartridge's native capacity used (may exceed 1: the job needs more tapes).
    pub capacity_used: f64,
    /// True when the source kept the drive streaming: no back-hitches other than those the
    /// filemark policy (and the final flush) causes.
    pub streaming: bool,
}

/// Runs `workload` against a fresh drive of model `spec` (loaded, at BOT, at time 0).
pub fn simulate(spec: &'static DriveSpec, workload: &Workload) -> Report {
    let mut drive = PhysicalDrive::new(spec);
    if workload.compressibility.is_off() {
        drive.set_compression(false);
    }
    let record = workload.record_size.max(1);
    let total = workload.total_bytes;
    let qd = workload.queue_depth.max(1) as usize;
    let comp = workload.compressibility;
    let ratio = comp.ratio.max(1.0);

    // Completion times of the last `qd` records (Rate source back-pressure).
    let mut completions: std::collections::VecDeque<f64> = std::collections::VecDeque::new();
    let mut produced_at = 0.0f64; // Rate source: when the last record finished being produced
    let mut agents: Vec<f64> = Vec::new(); // Agents source: when each agent's buffer is full
    let mut agent_left: Vec<u64> = Vec::new(); // bytes left in the agent buffer being drained
    let mut current_agent: Option<usize> = None;
    if let Source::Agents {
        count,
        buffer_bytes,
        refill_rate,
    } = workload.source
    {
        let n = count.max(1) as usize;
        let fill = buffer_bytes.max(1) as f64 / refill_rate.max(1e-9);
        agents = vec![fill; n];
        agent_left = vec![0; n];
    }

    let mut now = Duration::ZERO;
    let mut written = 0u64;
    let mut since_mark = 0u64;
    let mut i = 0u64;
    while written < total {
        let len = record.min(total - written);
        let clen = if !comp.is_off() && comp.record_compresses(i) {
            ((len as f64 / ratio).ceil() as u64).max(1)
        } else {
            len
        };
        let ready = match workload.source {
            Source::Unlimited => 0.0,
            Source::Rate(rate) => {
                // Record i can be produced once a buffer is free: `qd` buffers besides the one
                // the drive is taking, so the one that frees is record i − qd − 1's.
                let slot_free = if completions.len() > qd {
                    completions[completions.len() - qd - 1]
                } else {
                    0.0
                };
                produced_at = produced_at.max(slot_free) + len as f64 / rate.max(1e-9);
                produced_at
            }
            Source::Agents { buffer_bytes, .. } => {
                let a = match current_agent {
                    Some(a) if agent_left[a] > 0 => a,
                    _ => {
                        // The agent whose buffer is full first (lowest index on a tie).
                        let mut best = 0;
                        for (k, &t) in agents.iter().enumerate() {
                            if t < agents[best] {
                                best = k;
                            }
                        }
                        agent_left[best] = buffer_bytes.max(1);
                        current_agent = Some(best);
                        best
                    }
                };
                let ready = agents[a];
                agent_left[a] = agent_left[a].saturating_sub(len);
                if agent_left[a] == 0 {
                    // Refill starts when this record is in the drive; patched below.
                    agents[a] = f64::NAN;
                }
                ready
            }
        };
        now = now.max(Duration::from_secs_f64(ready));
        let done = drive.write(now, len, clen);
        if let Source::Agents {
            buffer_bytes,
            refill_rate,
            ..
        } = workload.source
        {
            for t in &mut agents {
                if t.is_nan() {
                    *t = done.as_secs_f64() + buffer_bytes.max(1) as f64 / refill_rate.max(1e-9);
                }
            }
        }
        completions.push_back(done.as_secs_f64());
        if completions.len() > qd + 1 {
            completions.pop_front();
        }
        // The host issues the next command when a queue slot is free; with depth 1 that is
        // when this one completed.
        if qd == 1 || matches!(workload.source, Source::Agents { .. }) {
            now = done;
        }
        written += len;
        since_mark += len;
        i += 1;
        if let Some(every) = workload.filemark_every
            && every > 0
            && since_mark >= every
            && written < total
        {
            now = now.max(done);
            now = drive.write_filemarks(now, 1, workload.immed);
            since_mark = 0;
        }
    }
    let end = drive.flush(now);
    let stats = drive.stats(end);
    let (stream_time, streamed) = drive.streaming_totals(end);
    let elapsed = end;
    let secs = elapsed.as_secs_f64();
    let sync = drive.sync_back_hitches();
    Report {
        elapsed,
        throughput: if secs > 0.0 { total as f64 / secs } else { 0.0 },
        tape_speed: if stream_time.as_secs_f64() > 0.0 {
            streamed as f64 / stream_time.as_secs_f64()
        } else {
            0.0
        },
        back_hitches: stats.back_hitches,
        sync_back_hitches: sync,
        repositioning: stats.repositioning,
        native_bytes: stats.native_bytes_on_tape,
        capacity_used: stats.native_bytes_on_tape as f64 / spec.native_capacity as f64,
        streaming: stats.back_hitches == sync,
    }
}
