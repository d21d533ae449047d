//! Measurements: per-thread latency histograms and counters, merged into a
//! job's result; a per-second series; CPU use as bonnie computes it.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

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
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SecondSample {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub trim_ios: u64,
    pub trim_bytes: u64,
}

/// A latency distribution in log-linear buckets, sixteen to each power of
/// two (each bucket within 1/16 of its lower bound), small enough to keep
/// one a direction for every second of a run: the per-second percentiles
/// and the exported histogram come from these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatBuckets {
    /// Counts by bucket index; as long as the highest bucket used.
    counts: Vec<u64>,
    sum_ns: u128,
    n: u64,
}

/// Sub-buckets to each power of two.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

impl LatBuckets {
    fn index(ns: u64) -> usize {
        if ns < SUB {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros();
        let sub = (ns >> (e - SUB_BITS)) & (SUB - 1);
        ((u64::from(e - SUB_BITS + 1)) * SUB + sub) as usize
    }

    /// The lowest and highest nanosecond values bucket `i` holds.
    pub fn bounds(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            return (i, i);
        }
        let e = (i / SUB) as u32 + SUB_BITS - 1;
        let width = 1u64 << (e - SUB_BITS);
        let low = (SUB + i % SUB) << (e - SUB_BITS);
        (low, low + width - 1)
    }

    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    fn record_n(&mut self, ns: u64, count: u64) {
        let i = Self::index(ns);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += count;
        self.sum_ns += u128::from(ns) * u128::from(count);
        self.n += count;
    }

    pub fn merge(&mut self, other: &LatBuckets) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum_ns += other.sum_ns;
        self.n += other.n;
    }

    /// Every value a full-precision histogram recorded, in these buckets.
    pub fn from_histogram(h: &Histogram<u64>) -> LatBuckets {
        let mut out = LatBuckets::default();
        for v in h.iter_recorded() {
            out.record_n(v.value_iterated_to(), v.count_at_value());
        }
        out
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean_ns(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.n as f64
        }
    }

    /// The upper bound of the bucket holding the value at quantile `q`
    /// (0 when empty).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::bounds(i).1;
            }
        }
        Self::bounds(self.counts.len().saturating_sub(1)).1
    }

    /// The buckets that hold values: (lowest ns, highest ns, count).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| {
            let (lo, hi) = Self::bounds(i);
            (lo, hi, c)
        })
    }
}

/// Each second's latencies of a run, reads then writes, the threads'
/// merged: a thread hands a second over when its completions move on to
/// the next, so what a run holds grows with its seconds, not its threads.
pub(crate) type LatSeries = std::sync::Mutex<Vec<[LatBuckets; 3]>>;

/// What one worker thread measured.
pub(crate) struct ThreadStats {
    pub read: OpStats,
    pub write: OpStats,
    /// Discards.
    pub trim: OpStats,
    pub flushes: u64,
    pub series: Vec<SecondSample>,
    /// The second the thread's completions are in, and its latencies.
    current: Option<(usize, [LatBuckets; 3])>,
    sink: std::sync::Arc<LatSeries>,
    pub measure_start: Instant,
}

impl ThreadStats {
    pub fn new(measure_start: Instant, sink: std::sync::Arc<LatSeries>) -> ThreadStats {
        ThreadStats {
            read: OpStats::new(),
            write: OpStats::new(),
            trim: OpStats::new(),
            flushes: 0,
            series: Vec::new(),
            current: None,
            sink,
            measure_start,
        }
    }

    /// Hands the second in progress over to the run's series.
    pub fn hand_over(&mut self) {
        if let Some((second, lat)) = self.current.take() {
            let mut series = self.sink.lock().unwrap_or_else(|e| e.into_inner());
            if series.len() <= second {
                series.resize(second + 1, Default::default());
            }
            for (into, from) in series[second].iter_mut().zip(&lat) {
                into.merge(from);
            }
        }
    }

    pub fn record(&mut self, kind: IoKind, bytes: u64, latency: Duration, done_at: Instant) {
        let ns = (latency.as_nanos() as u64).clamp(1, LATENCY_NS_MAX);
        let second = done_at.saturating_duration_since(self.measure_start).as_secs() as usize;
        if self.series.len() <= second {
            self.series.resize(second + 1, SecondSample::default());
        }
        if self.current.as_ref().is_none_or(|(s, _)| *s != second) {
            self.hand_over();
            self.current = Some((second, Default::default()));
        }
        let lat = &mut self.current.as_mut().expect("the current second was just set").1;
        let sample = &mut self.series[second];
        let op = match kind {
            IoKind::Read => {
                sample.read_ios += 1;
                sample.read_bytes += bytes;
                lat[0].record(ns);
                &mut self.read
            }
            IoKind::Write => {
                sample.write_ios += 1;
                sample.write_bytes += bytes;
                lat[1].record(ns);
                &mut self.write
            }
            IoKind::Trim => {
                sample.trim_ios += 1;
                sample.trim_bytes += bytes;
                lat[2].record(ns);
                &mut self.trim
            }
        };
        op.ios += 1;
        op.bytes += bytes;
        // Invariant: ns was clamped into the histogram's range.
        op.hist.record(ns).expect("latency within histogram bounds");
    }
}

/// Latency figures in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_values_without_gaps() {
        let mut next = 0;
        for i in 0..400 {
            let (lo, hi) = LatBuckets::bounds(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(hi >= lo);
            assert_eq!(LatBuckets::index(lo), i);
            assert_eq!(LatBuckets::index(hi), i);
            next = hi + 1;
        }
    }

    #[test]
    fn a_bucket_is_within_a_sixteenth_of_its_values() {
        for ns in [17u64, 1000, 123_456, 9_999_999_999] {
            let (lo, hi) = LatBuckets::bounds(LatBuckets::index(ns));
            assert!(lo <= ns && ns <= hi);
            assert!((hi - lo) as f64 <= lo as f64 / 16.0, "{ns}: {lo}..{hi}");
        }
    }

    #[test]
    fn quantiles_and_counts_follow_what_was_recorded() {
        let mut b = LatBuckets::default();
        for ns in 1..=100u64 {
            b.record(ns * 1000);
        }
        assert_eq!(b.count(), 100);
        let p50 = b.quantile_ns(0.5);
        assert!((50_000..=53_200).contains(&p50), "{p50}");
        assert_eq!(b.buckets().map(|(_, _, c)| c).sum::<u64>(), 100);
        assert!((b.mean_ns() - 50_500.0).abs() < 1.0);
    }
}
