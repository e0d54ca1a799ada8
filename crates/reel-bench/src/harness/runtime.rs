//! The initiator's async runtime and Ctrl-C: SIGINT / SIGTERM set [`INTERRUPTED`], which the
//! drives and load generators poll, so a run stops issuing commands and stops its targets
//! (their guards' `Drop`) instead of leaving them running.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

/// Set by Ctrl-C / SIGTERM: drives stop issuing commands and the targets are stopped.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether Ctrl-C / SIGTERM has come.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Makes Ctrl-C / SIGTERM set [`INTERRUPTED`] (once per process; a second call, as in tests
/// running several benchmarks, keeps the first handler, which does the same).
pub fn on_interrupt() {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
}

/// A multi-threaded tokio runtime of `threads` workers named `name`.
pub fn runtime(name: &str, threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .context("starting the async runtime")
}
