//! Per-initiator, per-LUN I/O counters for the management surface (metrics, monitor).
//!
//! Counters are kept per (initiator name, target) and survive reconnects, so they only
//! grow (what Prometheus counters require). One connection task updates its session's
//! counters; readers take snapshots.
//!
//! Bounded: initiator names are the peer's choice, so the registry keeps at most
//! [`MAX_INITIATORS`] entries beyond those of live sessions, evicting the initiator idle the
//! longest (its series end, as after a restart); one initiator's counters track at most
//! [`MAX_LUNS_PER_INITIATOR`] LUNs (commands to further LUN numbers are not counted).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Most (initiator, target) entries kept once their sessions have ended.
pub const MAX_INITIATORS: usize = 1024;

/// Most LUNs counted for one initiator on one target.
pub const MAX_LUNS_PER_INITIATOR: usize = 1024;

/// Upper bounds (µs) of the command latency histogram buckets; a last bucket counts the rest.
pub const LATENCY_BUCKETS_US: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000, 10_000_000,
];

/// Counters of one LUN as used by one initiator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LunCounters {
    /// Bytes the initiator wrote (Data-Out).
    pub bytes_written: u64,
    /// Bytes the initiator read (Data-In).
    pub bytes_read: u64,
    pub commands: u64,
    /// Commands that ended in CHECK CONDITION, by sense key (0..=15).
    pub check_conditions: [u64; 16],
    /// Commands ended with another non-GOOD status (BUSY, RESERVATION CONFLICT, …).
    pub other_errors: u64,
    /// Cumulative histogram source: `latency_buckets[i]` counts commands that took at most
    /// `LATENCY_BUCKETS_US[i]` (and more than the previous bound); the last entry the rest.
    pub latency_buckets: [u64; LATENCY_BUCKETS_US.len() + 1],
    pub latency_sum_us: u64,
}

impl LunCounters {
    fn record(&mut self, written: u64, read: u64, status: u8, sense: &[u8], latency: Duration) {
        self.bytes_written += written;
        self.bytes_read += read;
        self.commands += 1;
        match status {
            0x00 => {}
            0x02 => self.check_conditions[usize::from(sense_key(sense))] += 1,
            _ => self.other_errors += 1,
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BUCKETS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(LATENCY_BUCKETS_US.len());
        self.latency_buckets[bucket] += 1;
        self.latency_sum_us = self.latency_sum_us.saturating_add(us);
    }
}

/// The sense key of fixed (70h/71h) or descriptor (72h/73h) sense data; 0 when unparseable.
fn sense_key(sense: &[u8]) -> u8 {
    match sense.first().map(|b| b & 0x7F) {
        Some(0x70 | 0x71) => sense.get(2).map_or(0, |b| b & 0x0F),
        Some(0x72 | 0x73) => sense.get(1).map_or(0, |b| b & 0x0F),
        _ => 0,
    }
}

/// The counters of one initiator on one target, by LUN.
#[derive(Debug, Default)]
pub struct InitiatorCounters {
    by_lun: Mutex<BTreeMap<u64, LunCounters>>,
}

impl InitiatorCounters {
    pub(crate) fn record(
        &self,
        lun: u64,
        written: u64,
        read: u64,
        status: u8,
        sense: &[u8],
        latency: Duration,
    ) {
        let mut by_lun = self.by_lun.lock();
        if by_lun.len() >= MAX_LUNS_PER_INITIATOR && !by_lun.contains_key(&lun) {
            return;
        }
        by_lun
            .entry(lun)
            .or_default()
            .record(written, read, status, sense, latency);
    }

    pub fn snapshot(&self) -> BTreeMap<u64, LunCounters> {
        self.by_lun.lock().clone()
    }
}

/// Counters of one initiator on one target, as returned by
/// [`crate::TargetServer::initiator_stats`].
#[derive(Clone, Debug)]
pub struct InitiatorStats {
    pub initiator: String,
    /// `None` for discovery sessions.
    pub target: Option<String>,
    pub by_lun: BTreeMap<u64, LunCounters>,
}

/// (initiator name, target name; `None` for discovery).
type InitiatorKey = (String, Option<String>);

/// All initiators' counters.
pub(crate) struct StatsRegistry {
    capacity: usize,
    inner: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    /// Counters and the logical time of the last session that asked for them.
    counters: HashMap<InitiatorKey, (Arc<InitiatorCounters>, u64)>,
    clock: u64,
}

impl Default for StatsRegistry {
    fn default() -> Self {
        Self::with_capacity(MAX_INITIATORS)
    }
}

impl StatsRegistry {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        StatsRegistry {
            capacity: capacity.max(1),
            inner: Mutex::new(Registry::default()),
        }
    }

    pub(crate) fn for_initiator(
        &self,
        initiator: &str,
        target: Option<&str>,
    ) -> Arc<InitiatorCounters> {
        let mut inner = self.inner.lock();
        inner.clock += 1;
        let now = inner.clock;
        let key = (initiator.to_string(), target.map(str::to_string));
        if let Some((counters, used)) = inner.counters.get_mut(&key) {
            *used = now;
            return counters.clone();
        }
        if inner.counters.len() >= self.capacity {
            // Evict the entry idle the longest among those no session holds (a session holds
            // a clone); with every entry live the map is bounded by the sessions instead.
            let idle = inner
                .counters
                .iter()
                .filter(|(_, (counters, _))| Arc::strong_count(counters) == 1)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(idle) = idle {
                inner.counters.remove(&idle);
            }
        }
        let counters = Arc::new(InitiatorCounters::default());
        inner.counters.insert(key, (counters.clone(), now));
        counters
    }

    pub(crate) fn snapshot(&self) -> Vec<InitiatorStats> {
        let mut all: Vec<InitiatorStats> = self
            .inner
            .lock()
            .counters
            .iter()
            .map(|((initiator, target), (c, _))| InitiatorStats {
                initiator: initiator.clone(),
                target: target.clone(),
                by_lun: c.snapshot(),
            })
            .collect();
        all.sort_by(|a, b| (&a.initiator, &a.target).cmp(&(&b.initiator, &b.target)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_bytes_statuses_and_latency_buckets() {
        let c = InitiatorCounters::default();
        c.record(1, 4096, 0, 0, &[], Duration::from_micros(40));
        c.record(1, 0, 512, 0, &[], Duration::from_micros(3_000));
        // Fixed sense, MEDIUM ERROR; descriptor sense, ILLEGAL REQUEST.
        c.record(1, 0, 0, 2, &[0x70, 0, 0x03, 0, 0, 0, 0, 10], Duration::ZERO);
        c.record(1, 0, 0, 2, &[0x72, 0x05, 0x24, 0], Duration::from_secs(20));
        c.record(1, 0, 0, 0x18, &[], Duration::ZERO);
        let snap = c.snapshot();
        let lun = &snap[&1];
        assert_eq!(lun.bytes_written, 4096);
        assert_eq!(lun.bytes_read, 512);
        assert_eq!(lun.commands, 5);
        assert_eq!(lun.check_conditions[3], 1);
        assert_eq!(lun.check_conditions[5], 1);
        assert_eq!(lun.other_errors, 1);
        assert_eq!(lun.latency_buckets[0], 3, "40 µs and two 0 µs commands");
        assert_eq!(lun.latency_buckets[6], 1, "3 ms is in the 2.5–5 ms bucket");
        assert_eq!(
            lun.latency_buckets[LATENCY_BUCKETS_US.len()],
            1,
            "20 s overflows"
        );
        assert_eq!(lun.latency_sum_us, 20_003_040);
    }

    #[test]
    fn registry_evicts_the_longest_idle_initiators_beyond_its_capacity() {
        let r = StatsRegistry::with_capacity(3);
        // A live session holds its counters; the others logged out long ago.
        let live = r.for_initiator("iqn.live", Some("t"));
        live.record(0, 1, 0, 0, &[], Duration::ZERO);
        for i in 0..100 {
            r.for_initiator(&format!("iqn.gone-{i}"), Some("t")).record(
                0,
                1,
                0,
                0,
                &[],
                Duration::ZERO,
            );
        }
        let snap = r.snapshot();
        assert_eq!(snap.len(), 3, "{snap:?}");
        let names: Vec<&str> = snap.iter().map(|s| s.initiator.as_str()).collect();
        assert_eq!(names, ["iqn.gone-98", "iqn.gone-99", "iqn.live"]);
        // The live session's counters survived and still count.
        live.record(0, 1, 0, 0, &[], Duration::ZERO);
        let snap = r.snapshot();
        assert_eq!(snap[2].by_lun[&0].bytes_written, 2);
    }

    #[test]
    fn counters_of_one_initiator_track_a_bounded_number_of_luns() {
        let c = InitiatorCounters::default();
        for lun in 0..(MAX_LUNS_PER_INITIATOR as u64 + 500) {
            c.record(lun, 1, 0, 0, &[], Duration::ZERO);
        }
        assert_eq!(c.snapshot().len(), MAX_LUNS_PER_INITIATOR);
        // LUNs already tracked keep counting.
        c.record(0, 1, 0, 0, &[], Duration::ZERO);
        assert_eq!(c.snapshot()[&0].commands, 2);
    }

    #[test]
    fn registry_keeps_counters_across_sessions_of_one_initiator() {
        let r = StatsRegistry::default();
        r.for_initiator("iqn.a", Some("t"))
            .record(0, 1, 0, 0, &[], Duration::ZERO);
        r.for_initiator("iqn.a", Some("t"))
            .record(0, 1, 0, 0, &[], Duration::ZERO);
        r.for_initiator("iqn.b", Some("t"))
            .record(0, 1, 0, 0, &[], Duration::ZERO);
        let snap = r.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(snap[0].initiator, "iqn.a");
        assert_eq!(snap[0].by_lun[&0].bytes_written, 2);
    }
}
