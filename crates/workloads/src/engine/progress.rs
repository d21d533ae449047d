//! What a caller sees of a running job: live counters it may poll (for a
//! progress bar) and the stop it may ask for (on Ctrl-C).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Live counters a caller may poll while a job runs.
#[derive(Default)]
pub struct Progress {
    ios: AtomicU64,
    bytes: AtomicU64,
    measuring: AtomicBool,
    stop: AtomicBool,
}

/// A reading of [`Progress`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ProgressSnapshot {
    pub ios: u64,
    pub bytes: u64,
    /// False during the warm-up.
    pub measuring: bool,
}

impl Progress {
    /// Asks the job's workers to stop after the requests they have in
    /// flight (on Ctrl-C, say); the job then returns what it measured.
    pub fn request_stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Whether a stop was requested.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// The stop flag itself, for a phase that polls it.
    pub(crate) fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// Counts a completed request of `bytes` (a worker, as it completes).
    pub(crate) fn count(&self, bytes: u64) {
        self.ios.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    /// Says whether the measured phase has begun (the job, at the end of
    /// the warm-up).
    pub(crate) fn set_measuring(&self, measuring: bool) {
        self.measuring.store(measuring, Relaxed);
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            ios: self.ios.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            measuring: self.measuring.load(Relaxed),
        }
    }
}
