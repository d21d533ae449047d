//! Measurements: per-thread latency histograms and counters, merged into a
//! job's result; a per-second series; CPU use as bonnie computes it.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::gen::IoKind;

/// Highest latency the histograms track (1 hour); longer ones saturate.
const LATENCY_NS_MAX: u64 = 3_600_000_000_000;

pub(crate) fn new_histogram() -> Histogram<u64> {
    // Invariant: the bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid histogram bounds")
}

pub(crate) struct OpStats {
    pub ios: u64,
    pub bytes: u64,
    pub hist: Histogram<u64>,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats { ios: 0, bytes: 0, hist: new_histogram() }
    }
}

/// Requests and bytes in one second of the measured phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SecondSample {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// What one worker thread measured.
pub(crate) struct ThreadStats {
    pub read: OpStats,
    pub write: OpStats,
    pub flushes: u64,
    pub series: Vec<SecondSample>,
    pub measure_start: Instant,
}

impl ThreadStats {
    pub fn new(measure_start: Instant) -> ThreadStats {
        ThreadStats {
            read: OpStats::new(),
            write: OpStats::new(),
            flushes: 0,
            series: Vec::new(),
            measure_start,
        }
    }

    pub fn record(&mut self, kind: IoKind, bytes: u64, latency: Duration, done_at: Instant) {
        let ns = (latency.as_nanos() as u64).clamp(1, LATENCY_NS_MAX);
        let second = done_at.saturating_duration_since(self.measure_start).as_secs() as usize;
        if self.series.len() <= second {
            self.series.resize(second + 1, SecondSample::default());
        }
        let sample = &mut self.series[second];
        let op = match kind {
            IoKind::Read => {
                sample.read_ios += 1;
                sample.read_bytes += bytes;
                &mut self.read
            }
            IoKind::Write => {
                sample.write_ios += 1;
                sample.write_bytes += bytes;
                &mut self.write
            }
        };
        op.ios += 1;
        op.bytes += bytes;
        // Invariant: ns was clamped into the histogram's range.
        op.hist.record(ns).expect("latency within histogram bounds");
    }
}

/// Latency figures in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// One direction's results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct OpSummary {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub latency: Latency,
}

/// CPU time of the whole iolab process over the job, and its share of the
/// elapsed time: (user + system) / elapsed, as bonnie reports it. Can
/// exceed 100 with several threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuUsage {
    pub user_s: f64,
    pub system_s: f64,
    pub pct: f64,
}

pub(crate) fn summarize(ios: u64, bytes: u64, hist: &Histogram<u64>, elapsed: Duration) -> OpSummary {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let us = |ns: u64| ns as f64 / 1000.0;
    let latency = if ios == 0 {
        Latency::default()
    } else {
        Latency {
            min_us: us(hist.min()),
            mean_us: hist.mean() / 1000.0,
            p50_us: us(hist.value_at_quantile(0.50)),
            p90_us: us(hist.value_at_quantile(0.90)),
            p99_us: us(hist.value_at_quantile(0.99)),
            p999_us: us(hist.value_at_quantile(0.999)),
            max_us: us(hist.max()),
        }
    };
    OpSummary {
        ios,
        bytes,
        iops: ios as f64 / secs,
        mib_per_s: bytes as f64 / secs / (1u64 << 20) as f64,
        latency,
    }
}

/// A phase as bonnie measures it: wall time, the process's CPU time, and
/// the longest single call.
pub(crate) struct PhaseMeter {
    start: Instant,
    cpu: Duration,
    latency_max: Duration,
}

/// What a [`PhaseMeter`] measured.
pub(crate) struct PhaseTimes {
    /// Wall seconds (at least a nanosecond, so rates stay finite).
    pub elapsed_s: f64,
    pub cpu_s: f64,
    pub latency_max_us: f64,
}

impl PhaseMeter {
    pub fn start() -> PhaseMeter {
        let (u, s) = cpu_times();
        PhaseMeter { start: Instant::now(), cpu: u + s, latency_max: Duration::ZERO }
    }

    /// Runs one call on the clock.
    pub fn timed<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.latency_max = self.latency_max.max(t.elapsed());
        out
    }

    pub fn finish(self) -> PhaseTimes {
        let (u, s) = cpu_times();
        PhaseTimes {
            elapsed_s: self.start.elapsed().as_secs_f64().max(1e-9),
            cpu_s: (u + s).saturating_sub(self.cpu).as_secs_f64(),
            latency_max_us: self.latency_max.as_secs_f64() * 1e6,
        }
    }
}

/// Process CPU time so far (user, system).
pub(crate) fn cpu_times() -> (Duration, Duration) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    (tv(usage.ru_utime), tv(usage.ru_stime))
}
