//! Fault-injecting wrappers for testing the store against a misbehaving medium: a byte quota
//! ([`QuotaBackend`]), random I/O errors ([`FlakyBackend`]) and power loss ([`CrashBackend`]).
//! Each wraps any `B: Backend` (including `Arc<dyn Backend>`) and is deterministic by seed.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{Backend, BackendError, Key, ObjectMeta, PutMode, Result, lock};

fn injected(what: impl std::fmt::Display, msg: &str) -> BackendError {
    BackendError::io(what, io::Error::other(msg.to_string()))
}

/// Fails puts with [`BackendError::NoSpace`] once stored bytes plus the new object would exceed
/// a quota. Sizes are tracked from the inner back end's listing at construction onwards, so all
/// writes must go through this wrapper.
pub struct QuotaBackend<B> {
    inner: B,
    quota: AtomicU64,
    /// Object sizes and their sum. Held across the inner put so accounting stays exact.
    state: Mutex<(HashMap<Key, u64>, u64)>,
}

impl<B: Backend> QuotaBackend<B> {
    pub fn new(inner: B, quota: u64) -> Result<Self> {
        let sizes: HashMap<Key, u64> = inner
            .list("")?
            .into_iter()
            .map(|m| (m.key, m.size))
            .collect();
        let used = sizes.values().sum();
        Ok(QuotaBackend {
            inner,
            quota: AtomicU64::new(quota),
            state: Mutex::new((sizes, used)),
        })
    }

    /// Changes the quota; lowering it below usage only blocks further growth.
    pub fn set_quota(&self, quota: u64) {
        self.quota.store(quota, Ordering::SeqCst);
    }

    pub fn quota(&self) -> u64 {
        self.quota.load(Ordering::SeqCst)
    }

    pub fn used_bytes(&self) -> u64 {
        lock(&self.state).1
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Backend> Backend for QuotaBackend<B> {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        let mut state = lock(&self.state);
        let (sizes, used) = &mut *state;
        let old = sizes.get(key).copied();
        // A Create over an existing key falls through so the inner back end reports it.
        let freed = if mode == PutMode::Overwrite {
            old.unwrap_or(0)
        } else {
            0
        };
        if (*used - freed).saturating_add(data.len() as u64) > self.quota() {
            return Err(BackendError::NoSpace(key.clone()));
        }
        self.inner.put(key, data, mode)?;
        *used = *used - old.unwrap_or(0) + data.len() as u64;
        sizes.insert(key.clone(), data.len() as u64);
        Ok(())
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        self.inner.get(key)
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        self.inner.get_range(key, range)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn delete(&self, key: &Key) -> Result<()> {
        let mut state = lock(&self.state);
        self.inner.delete(key)?;
        let (sizes, used) = &mut *state;
        if let Some(size) = sizes.remove(key) {
            *used -= size;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "quota({} bytes) over {}",
            self.quota(),
            self.inner.describe()
        )
    }

    fn is_local(&self, key: &Key, range: Range<u64>) -> bool {
        self.inner.is_local(key, range)
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

/// Per-operation probabilities (0.0..=1.0) of an injected failure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultRates {
    /// Put fails without storing anything.
    pub put: f64,
    /// Put stores the object, then reports failure: the ambiguous case a caller must survive.
    pub put_after: f64,
    /// `get` and `get_range` fail.
    pub get: f64,
    pub delete: f64,
    pub list: f64,
}

impl FaultRates {
    /// The same probability `p` for every kind of fault.
    pub fn uniform(p: f64) -> Self {
        FaultRates {
            put: p,
            put_after: p,
            get: p,
            delete: p,
            list: p,
        }
    }
}

/// Randomly fails operations with `Io` errors ("injected fault"), deterministically for a given
/// seed and sequence of operations. Failed operations are not performed, except for the
/// `put_after` case, where the put is applied and then reported as failed.
pub struct FlakyBackend<B> {
    inner: B,
    rates: FaultRates,
    rng: AtomicU64,
    enabled: AtomicBool,
    injected: AtomicU64,
}

impl<B: Backend> FlakyBackend<B> {
    pub fn new(inner: B, rates: FaultRates, seed: u64) -> Self {
        FlakyBackend {
            inner,
            rates,
            rng: AtomicU64::new(seed),
            enabled: AtomicBool::new(true),
            injected: AtomicU64::new(0),
        }
    }

    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::SeqCst);
    }

    /// How many faults have been injected so far.
    pub fn injected_faults(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Draws once and returns true with probability `p` (never when disabled). SplitMix64: the
    /// state advance is a single atomic add, so concurrent draws stay well-defined.
    fn roll(&self, p: f64) -> bool {
        if !self.enabled.load(Ordering::SeqCst) || p <= 0.0 {
            return false;
        }
        let mut z = self.rng.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::SeqCst);
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let hit = ((z >> 11) as f64 / (1u64 << 53) as f64) < p;
        if hit {
            self.injected.fetch_add(1, Ordering::SeqCst);
        }
        hit
    }

    fn fault(&self, p: f64, what: impl std::fmt::Display) -> Result<()> {
        if self.roll(p) {
            Err(injected(what, "injected fault"))
        } else {
            Ok(())
        }
    }
}

impl<B: Backend> Backend for FlakyBackend<B> {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        self.fault(self.rates.put, key)?;
        self.inner.put(key, data, mode)?;
        self.fault(self.rates.put_after, key)
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        self.fault(self.rates.get, key)?;
        self.inner.get(key)
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        self.fault(self.rates.get, key)?;
        self.inner.get_range(key, range)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        self.fault(self.rates.list, format!("list {prefix:?}"))?;
        self.inner.list(prefix)
    }

    fn delete(&self, key: &Key) -> Result<()> {
        self.fault(self.rates.delete, key)?;
        self.inner.delete(key)
    }

    fn describe(&self) -> String {
        format!("flaky over {}", self.inner.describe())
    }

    fn is_local(&self, key: &Key, range: Range<u64>) -> bool {
        self.inner.is_local(key, range)
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

/// Simulates power loss. Once armed, the n-th following mutating operation (put or delete) and
/// every operation after it, reads included, fail with "simulated power loss" and are not
/// applied. Because a put that returned `Ok` is durable by contract, power loss is exactly this:
/// completed operations persist, the in-flight one and everything later are lost. Inspect the
/// surviving state through [`CrashBackend::inner`] (or `reset` and carry on, as after a reboot).
pub struct CrashBackend<B> {
    inner: B,
    state: Mutex<CrashState>,
}

#[derive(Default)]
struct CrashState {
    /// Mutating operations left until the crash, counting the one that crashes.
    remaining: Option<u64>,
    crashed: bool,
}

impl<B: Backend> CrashBackend<B> {
    pub fn new(inner: B) -> Self {
        CrashBackend {
            inner,
            state: Mutex::new(CrashState::default()),
        }
    }

    /// Arms the crash: `n` = 1 fails the next put/delete, `n` = 3 lets two more complete.
    /// `n` = 0 crashes at once.
    pub fn arm_crash_after(&self, n: u64) {
        let mut s = lock(&self.state);
        s.remaining = Some(n);
        s.crashed = n == 0;
    }

    pub fn crashed(&self) -> bool {
        lock(&self.state).crashed
    }

    /// Disarms and "reboots": operations pass through again.
    pub fn reset(&self) {
        *lock(&self.state) = CrashState::default();
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn check(&self, mutating: bool, what: impl std::fmt::Display) -> Result<()> {
        let mut s = lock(&self.state);
        if !s.crashed
            && mutating
            && let Some(n) = s.remaining.as_mut()
        {
            *n = n.saturating_sub(1);
            s.crashed = *n == 0;
        }
        if s.crashed {
            Err(injected(what, "simulated power loss"))
        } else {
            Ok(())
        }
    }
}

impl<B: Backend> Backend for CrashBackend<B> {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        self.check(true, key)?;
        self.inner.put(key, data, mode)
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        self.check(false, key)?;
        self.inner.get(key)
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        self.check(false, key)?;
        self.inner.get_range(key, range)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        self.check(false, format!("list {prefix:?}"))?;
        self.inner.list(prefix)
    }

    fn delete(&self, key: &Key) -> Result<()> {
        self.check(true, key)?;
        self.inner.delete(key)
    }

    fn describe(&self) -> String {
        format!("crash over {}", self.inner.describe())
    }

    fn is_local(&self, key: &Key, range: Range<u64>) -> bool {
        self.inner.is_local(key, range)
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryBackend;
    use crate::conformance::run_all;
    use std::sync::Arc;

    fn key(s: &str) -> Key {
        Key::new(s).unwrap()
    }

    #[test]
    fn conformance_with_faults_disabled() {
        let mem = || Box::new(MemoryBackend::new()) as Box<dyn Backend>;
        run_all(&|| Box::new(QuotaBackend::new(mem(), u64::MAX).unwrap()));
        run_all(&|| Box::new(FlakyBackend::new(mem(), FaultRates::default(), 1)));
        run_all(&|| {
            let f = FlakyBackend::new(mem(), FaultRates::uniform(1.0), 1);
            f.set_enabled(false);
            Box::new(f)
        });
        run_all(&|| Box::new(CrashBackend::new(mem())));
    }

    #[test]
    fn quota_fills_up_then_frees() {
        let mem = Arc::new(MemoryBackend::new());
        let q = QuotaBackend::new(mem.clone(), 100).unwrap();
        q.put(&key("a"), &[0; 60], PutMode::Create).unwrap();
        assert!(matches!(
            q.put(&key("b"), &[0; 41], PutMode::Create),
            Err(BackendError::NoSpace(_))
        ));
        assert_eq!(mem.object_count(), 1, "nothing partial stored");
        q.put(&key("b"), &[0; 40], PutMode::Create).unwrap();
        assert_eq!(q.used_bytes(), 100);
        // Overwrite accounts the difference; a failed Create charges nothing.
        q.put(&key("a"), &[1; 50], PutMode::Overwrite).unwrap();
        assert!(matches!(
            q.put(&key("a"), &[1; 5], PutMode::Create),
            Err(BackendError::AlreadyExists(_))
        ));
        assert_eq!(q.used_bytes(), 90);
        assert!(matches!(
            q.put(&key("c"), &[0; 11], PutMode::Create),
            Err(BackendError::NoSpace(_))
        ));
        q.set_quota(200);
        q.put(&key("c"), &[0; 11], PutMode::Create).unwrap();
        q.delete(&key("a")).unwrap();
        q.delete(&key("a")).unwrap();
        assert_eq!((q.used_bytes(), mem.total_bytes()), (51, 51));
        // Existing contents are counted when wrapping.
        assert_eq!(QuotaBackend::new(mem, 0).unwrap().used_bytes(), 51);
    }

    /// Outcomes of a fixed workload: true where a fault was injected.
    fn flaky_run(seed: u64) -> (Vec<bool>, usize) {
        let mem = Arc::new(MemoryBackend::new());
        let f = FlakyBackend::new(mem.clone(), FaultRates::uniform(0.3), seed);
        let mut fails = Vec::new();
        let mut note = |r: Result<()>| {
            fails.push(matches!(r, Err(e) if e.to_string().contains("injected fault")));
        };
        for i in 0..200 {
            let k = key(&format!("k{}", i % 17));
            note(f.put(&k, &[i as u8], PutMode::Overwrite));
            note(f.get(&k).map(drop));
            note(f.list("k1").map(drop));
            if i % 5 == 0 {
                note(f.delete(&k));
            }
        }
        assert_eq!(
            f.injected_faults(),
            fails.iter().filter(|&&x| x).count() as u64
        );
        (fails, mem.object_count())
    }

    #[test]
    fn flaky_is_deterministic_by_seed() {
        let (a, count) = flaky_run(7);
        assert_eq!((a.clone(), count), flaky_run(7));
        assert_ne!(a, flaky_run(8).0);
        let rate = a.iter().filter(|&&x| x).count() as f64 / a.len() as f64;
        assert!((0.15..0.45).contains(&rate), "fault rate {rate}");
    }

    #[test]
    fn flaky_put_failures_before_and_after() {
        let mem = Arc::new(MemoryBackend::new());
        let before = FaultRates {
            put: 1.0,
            ..Default::default()
        };
        let f = FlakyBackend::new(mem.clone(), before, 0);
        let e = f.put(&key("a"), b"x", PutMode::Create).unwrap_err();
        assert!(e.to_string().contains("injected fault"), "{e}");
        assert_eq!(mem.object_count(), 0);
        let after = FaultRates {
            put_after: 1.0,
            ..Default::default()
        };
        let f = FlakyBackend::new(mem.clone(), after, 0);
        assert!(f.put(&key("a"), b"x", PutMode::Create).is_err());
        assert_eq!(
            mem.get(&key("a")).unwrap(),
            b"x",
            "stored despite the error"
        );
        f.set_enabled(false);
        f.put(&key("b"), b"y", PutMode::Create).unwrap();
    }

    #[test]
    fn crash_loses_in_flight_and_later_ops() {
        let mem = Arc::new(MemoryBackend::new());
        let c = CrashBackend::new(mem.clone());
        c.put(&key("a"), b"1", PutMode::Create).unwrap();
        c.arm_crash_after(3);
        c.put(&key("b"), b"2", PutMode::Create).unwrap();
        assert_eq!(c.get(&key("a")).unwrap(), b"1", "reads are not counted");
        c.delete(&key("a")).unwrap();
        assert!(!c.crashed());
        let e = c.put(&key("c"), b"3", PutMode::Create).unwrap_err();
        assert!(e.to_string().contains("simulated power loss"), "{e}");
        assert!(c.crashed());
        assert!(c.delete(&key("b")).is_err());
        assert!(c.get(&key("b")).is_err());
        let keys: Vec<_> = mem
            .list("")
            .unwrap()
            .into_iter()
            .map(|m| m.key.to_string())
            .collect();
        assert_eq!(keys, ["b"]);
        c.reset();
        assert_eq!(c.get(&key("b")).unwrap(), b"2");
        c.arm_crash_after(0);
        assert!(c.crashed() && c.put(&key("d"), b"", PutMode::Create).is_err());
        assert_eq!(mem.object_count(), 1);
    }
}
