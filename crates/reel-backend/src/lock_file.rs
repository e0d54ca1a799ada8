//! Exclusive locks on a directory's lock file (`flock`), as the write-back cache and the
//! benchmarks' work directories take them.

use std::fs::{File, TryLockError};
use std::io;
use std::time::{Duration, Instant};

/// How long [`lock_exclusive`] waits by default before it names the lock's holder another
/// process.
pub const LOCK_PATIENCE: Duration = Duration::from_secs(3);

/// Takes `file`'s exclusive lock, waiting up to `patience` for it; `Ok(false)` if it is still
/// held then.
///
/// Why wait at all: a lock this process released a moment ago can still look held. A process
/// another thread is starting holds a copy of every open descriptor until it execs (fork, and
/// posix_spawn's clone alike; `O_CLOEXEC` closes them only at exec), and the lock goes with
/// that copy. On a loaded host the window failed a test that reopens a locked directory while
/// other tests start processes. A holder that is really another process holds it far longer.
pub fn lock_exclusive(file: &File, patience: Duration) -> io::Result<bool> {
    let deadline = Instant::now() + patience;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_a_release_and_gives_up_on_a_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let holder = File::create(&path).unwrap();
        assert!(lock_exclusive(&holder, Duration::ZERO).unwrap());

        // Another open file description of the same file: refused while the holder keeps it.
        let second = File::create(&path).unwrap();
        let started = Instant::now();
        assert!(!lock_exclusive(&second, Duration::from_millis(200)).unwrap());
        assert!(started.elapsed() >= Duration::from_millis(200));

        // Released while the second waits: it gets the lock before its patience runs out.
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(holder);
        });
        assert!(lock_exclusive(&second, Duration::from_secs(10)).unwrap());
        release.join().unwrap();
    }
}
