//! Repeated runs summarised: min, median and max of each figure.

use workloads::{JobResult, OpSummary};

/// min / median / max of one figure over repeated runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; the median of an even count is the mean of
    /// the two middle values. `None` for no values.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { min: v[0], median, max: v[n - 1] })
    }
}

/// The figures of one direction (read or write) over repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct OpSpread {
    pub iops: Spread,
    pub mib_per_s: Spread,
    pub lat_mean_us: Spread,
    pub lat_p50_us: Spread,
    pub lat_p99_us: Spread,
    pub lat_p999_us: Spread,
    pub lat_max_us: Spread,
}

/// Summary of a job's repeated runs.
#[derive(Clone, Debug, PartialEq)]
pub struct RepeatSummary {
    pub runs: usize,
    pub read: Option<OpSpread>,
    pub write: Option<OpSpread>,
    pub trim: Option<OpSpread>,
    pub cpu_pct: Spread,
}

fn op_spread(runs: &[JobResult], pick: impl Fn(&JobResult) -> &OpSummary) -> Option<OpSpread> {
    if runs.iter().all(|r| pick(r).ios == 0) {
        return None;
    }
    let spread = |f: &dyn Fn(&OpSummary) -> f64| {
        let values: Vec<f64> = runs.iter().map(|r| f(pick(r))).collect();
        // Invariant: runs is not empty (checked by the caller).
        Spread::of(&values).expect("at least one run")
    };
    Some(OpSpread {
        iops: spread(&|o| o.iops),
        mib_per_s: spread(&|o| o.mib_per_s),
        lat_mean_us: spread(&|o| o.latency.mean_us),
        lat_p50_us: spread(&|o| o.latency.p50_us),
        lat_p99_us: spread(&|o| o.latency.p99_us),
        lat_p999_us: spread(&|o| o.latency.p999_us),
        lat_max_us: spread(&|o| o.latency.max_us),
    })
}

/// Summarises repeated runs of one job; `None` for no runs.
pub fn summarize(runs: &[JobResult]) -> Option<RepeatSummary> {
    let cpu: Vec<f64> = runs.iter().map(|r| r.cpu.pct).collect();
    Some(RepeatSummary {
        runs: runs.len(),
        read: op_spread(runs, |r| &r.read),
        write: op_spread(runs, |r| &r.write),
        trim: op_spread(runs, |r| &r.trim),
        cpu_pct: Spread::of(&cpu)?,
    })
}
/// The median of `values`, 0 for none.
pub(crate) fn median_or_zero(values: &[f64]) -> f64 {
    Spread::of(values).map_or(0.0, |s| s.median)
}
