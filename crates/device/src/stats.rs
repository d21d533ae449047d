use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Per-device counters, updated lock-free by every request.
#[derive(Debug, Default)]
pub struct Stats {
    reads: AtomicU64,
    writes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    flushes: AtomicU64,
    errors: AtomicU64,
}

/// A copy of a device's counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flushes: u64,
    pub errors: u64,
}

impl Stats {
    pub fn record_reads(&self, count: u64, bytes: u64) {
        self.reads.fetch_add(count, Relaxed);
        self.bytes_read.fetch_add(bytes, Relaxed);
    }

    pub fn record_writes(&self, count: u64, bytes: u64) {
        self.writes.fetch_add(count, Relaxed);
        self.bytes_written.fetch_add(bytes, Relaxed);
    }

    pub fn record_flush(&self) {
        self.flushes.fetch_add(1, Relaxed);
    }

    pub fn record_error(&self) {
        self.errors.fetch_add(1, Relaxed);
    }

    /// Counts `result` as an error when it is one, and passes it on.
    pub fn track<T, E>(&self, result: Result<T, E>) -> Result<T, E> {
        if result.is_err() {
            self.record_error();
        }
        result
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            reads: self.reads.load(Relaxed),
            writes: self.writes.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }

    pub fn reset(&self) {
        for counter in
            [&self.reads, &self.writes, &self.bytes_read, &self.bytes_written, &self.flushes, &self.errors]
        {
            counter.store(0, Relaxed);
        }
    }
}

impl StatsSnapshot {
    /// Counter growth from `earlier` to `self`.
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            flushes: self.flushes.saturating_sub(earlier.flushes),
            errors: self.errors.saturating_sub(earlier.errors),
        }
    }
}
