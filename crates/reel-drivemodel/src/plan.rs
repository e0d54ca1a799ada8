//! [`plan`]: "N TB from this source on M drives of this model: how long, how many cartridges,
//! which record size and filemark policy, does the source keep the drives streaming?"

use std::time::Duration;

use crate::spec::{DriveSpec, RobotSpec};
use crate::workload::{Compressibility, Report, Source, Workload, simulate};

/// Record sizes the planner tries when the request names none.
pub const DEFAULT_RECORD_SIZES: [u64; 6] =
    [64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20];

/// The planner simulates at most this many host bytes per candidate and scales the result.
const SAMPLE_BYTES: u64 = 16 << 30;

/// A planning question.
#[derive(Clone, Debug)]
pub struct PlanRequest {
    /// Host bytes to write in all.
    pub data_bytes: u64,
    /// Drives writing in parallel (the data is split evenly).
    pub drives: u32,
    /// The drive model.
    pub drive: &'static DriveSpec,
    /// Aggregate source rate over all drives, bytes/s; None = unlimited.
    pub source_rate: Option<f64>,
    /// How the data compresses.
    pub compressibility: Compressibility,
    /// Host bytes between filemarks (the backup application's file/object boundaries).
    pub filemark_every: Option<u64>,
    /// Candidate record sizes; empty = [`DEFAULT_RECORD_SIZES`].
    pub record_sizes: Vec<u64>,
    /// The library robot changing cartridges; None = cartridge changes are not counted.
    pub robot: Option<&'static RobotSpec>,
}

/// One simulated candidate.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Host bytes per WRITE.
    pub record_size: u64,
    /// Filemarks with IMMED.
    pub immed: bool,
    /// The simulation of the sample on one drive.
    pub report: Report,
}

/// The planner's answer.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The recommended record size.
    pub record_size: u64,
    /// The recommended filemark policy.
    pub immed: bool,
    /// Whole job, wall clock: writing plus cartridge changes.
    pub elapsed: Duration,
    /// Aggregate host bytes/s over all drives while writing.
    pub throughput: f64,
    /// Cartridges needed (all drives).
    pub cartridges: u64,
    /// Time spent changing cartridges, per drive.
    pub change_time: Duration,
    /// Whether the source keeps each drive streaming (with the recommended settings).
    pub streaming: bool,
    /// Per-drive host rate below which the drive must back-hitch: its slowest step × the
    /// data's compression ratio.
    pub min_streaming_rate: f64,
    /// Per-drive host rate above which more source speed buys nothing: top step × ratio,
    /// capped by the host interface.
    pub max_useful_rate: f64,
    /// Every candidate simulated.
    pub candidates: Vec<Candidate>,
    /// Why, in sentences.
    pub reasons: Vec<String>,
}

fn mbs(rate: f64) -> String {
    format!("{:.0} MB/s", rate / 1e6)
}

/// Plans a job; see [`PlanRequest`].
pub fn plan(request: &PlanRequest) -> Plan {
    let spec = request.drive;
    let drives = request.drives.max(1);
    let per_drive = request.data_bytes.div_ceil(u64::from(drives)).max(1);
    let sample =
        per_drive.min(SAMPLE_BYTES.max(request.filemark_every.unwrap_or(0).saturating_mul(4)));
    let source = match request.source_rate {
        Some(r) => Source::Rate(r / f64::from(drives)),
        None => Source::Unlimited,
    };
    let sizes = if request.record_sizes.is_empty() {
        DEFAULT_RECORD_SIZES.to_vec()
    } else {
        request.record_sizes.clone()
    };
    let policies: &[bool] = if request.filemark_every.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    let mut candidates = Vec::new();
    for &record_size in &sizes {
        for &immed in policies {
            let workload = Workload {
                source,
                record_size,
                compressibility: request.compressibility,
                filemark_every: request.filemark_every,
                immed,
                queue_depth: 2,
                total_bytes: sample,
            };
            candidates.push(Candidate {
                record_size,
                immed,
                report: simulate(spec, &workload),
            });
        }
    }
    // The best throughput; within 1 % of it prefer no IMMED (data is on tape at each
    // filemark), then the smaller record (more software can read it back).
    let best_rate = candidates
        .iter()
        .map(|c| c.report.throughput)
        .fold(0.0, f64::max);
    let chosen = candidates
        .iter()
        .filter(|c| c.report.throughput >= 0.99 * best_rate)
        .min_by(|a, b| {
            a.immed
                .cmp(&b.immed)
                .then(a.record_size.cmp(&b.record_size))
        })
        .expect("at least one candidate")
        .clone();

    let r = &chosen.report;
    let ratio = if r.native_bytes > 0 {
        sample as f64 / r.native_bytes as f64
    } else {
        1.0
    };
    let write_s = per_drive as f64 / r.throughput.max(1e-9);
    let native_per_drive = per_drive as f64 / ratio;
    let tapes_per_drive = (native_per_drive / spec.native_capacity as f64)
        .ceil()
        .max(1.0) as u64;
    let change_s = match request.robot {
        // Every cartridge: a move in, load, and at the end unload (rewind from the end of
        // tape) and a move out.
        Some(robot) => {
            tapes_per_drive as f64
                * (2.0 * robot.move_time.as_secs_f64()
                    + spec.load_s
                    + spec.unload_s
                    + spec.rewind_full_s())
        }
        None => 0.0,
    };
    let elapsed = Duration::from_secs_f64(write_s + change_s);
    let min_streaming_rate = spec.lowest_speed() * ratio;
    let max_useful_rate = (spec.top_speed() * ratio).min(spec.max_host_rate);

    let mut reasons = Vec::new();
    reasons.push(format!(
        "{} × {}: the data compresses {:.2}:1 on tape, so each drive streams between {} (slowest step) and {} (top step, host cap) of host data",
        drives,
        spec.name,
        ratio,
        mbs(min_streaming_rate),
        mbs(max_useful_rate)
    ));
    match request.source_rate {
        Some(total) => {
            let each = total / f64::from(drives);
            if each < min_streaming_rate {
                reasons.push(format!(
                    "the source gives each drive {}, below its slowest step: it will back-hitch ({} per sampled {} GiB); use fewer drives (at most {}) or stage the data on disk first",
                    mbs(each),
                    r.back_hitches - r.sync_back_hitches,
                    sample >> 30,
                    ((total / min_streaming_rate).floor() as u64).max(1)
                ));
            } else if each > max_useful_rate {
                reasons.push(format!(
                    "the source gives each drive {}, more than it can take ({}); more drives would help",
                    mbs(each),
                    mbs(max_useful_rate)
                ));
            } else {
                reasons.push(format!(
                    "the source gives each drive {}, inside its speed-matching range: the drive matches it without stopping",
                    mbs(each)
                ));
            }
        }
        None => reasons.push("unlimited source: each drive runs at its top step".to_string()),
    }
    let same_size: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.immed == chosen.immed)
        .collect();
    if let (Some(small), Some(large)) = (same_size.first(), same_size.last())
        && small.record_size != large.record_size
    {
        reasons.push(format!(
            "record size {} KiB: {} at {} KiB vs {} at {} KiB",
            chosen.record_size >> 10,
            mbs(small.report.throughput),
            small.record_size >> 10,
            mbs(large.report.throughput),
            large.record_size >> 10
        ));
    }
    if request.filemark_every.is_some() {
        let other = candidates
            .iter()
            .find(|c| c.record_size == chosen.record_size && c.immed != chosen.immed);
        if let Some(o) = other {
            let (with, without) = if chosen.immed {
                (&chosen, o)
            } else {
                (o, &chosen)
            };
            reasons.push(format!(
                "filemarks: without IMMED every filemark flushes and back-hitches ({} in the sample, {}); with IMMED {}{}",
                without.report.sync_back_hitches.saturating_sub(1),
                mbs(without.report.throughput),
                mbs(with.report.throughput),
                if chosen.immed {
                    " — IMMED chosen: the last data before a filemark is not yet on tape when it returns, so the application must sync at the end"
                } else {
                    " — no IMMED: the gain is under 1 %, and each filemark then guarantees the data is on tape"
                }
            ));
        }
    }
    reasons.push(format!(
        "{} cartridge(s) per drive, {} in all ({:.0} % of one cartridge per drive per {} GiB sampled)",
        tapes_per_drive,
        tapes_per_drive * u64::from(drives),
        r.capacity_used * 100.0,
        sample >> 30
    ));
    Plan {
        record_size: chosen.record_size,
        immed: chosen.immed,
        elapsed,
        throughput: r.throughput * f64::from(drives),
        cartridges: tapes_per_drive * u64::from(drives),
        change_time: Duration::from_secs_f64(change_s),
        streaming: r.streaming,
        min_streaming_rate,
        max_useful_rate,
        candidates,
        reasons,
    }
}
