//! Reports: turns measured results into text a person reads (tables in
//! fio's and the seeds' layouts) and the versioned JSON document programs
//! read (schema in docs/json.md). Pure formatting: never measures, never
//! prints; the cli crate writes what this returns.

mod bonnie;
mod target;
mod volumes;

use std::fmt::Write as _;

pub use bonnie::{bonnie_csv, bonnie_csv_103, bonnie_spread, bonnie_table};
pub use target::{target_lines, CacheState, LayoutPolicy, LayoutState, TargetReport};
pub use volumes::{volume_list, volume_list_verbose};

use serde::Serialize;
use workloads::{JobResult, OpSummary};

/// Version of the JSON document written by `iolab run --json`.
pub const RUN_SCHEMA_VERSION: u32 = 2;

/// min / median / max of one figure over repeated runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RepeatSummary {
    pub runs: usize,
    pub read: Option<OpSpread>,
    pub write: Option<OpSpread>,
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
        cpu_pct: Spread::of(&cpu)?,
    })
}

/// One job in the JSON document: its runs and their summary.
#[derive(Clone, Debug, Serialize)]
pub struct JobReport {
    pub name: String,
    /// What the job ran on and how: media, cache, layout.
    pub target: TargetReport,
    pub runs: Vec<JobResult>,
    pub summary: Option<RepeatSummary>,
    /// When the target is a volume: its objects, states and counters after
    /// all runs of the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<volume::VolumeReport>,
    /// When the job ran through the block log: its counters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogReport>,
}

/// The block log a job ran through: its mode and counters.
#[derive(Clone, Debug, Serialize)]
pub struct LogReport {
    pub mode: blocklog::Mode,
    pub counters: blocklog::LogStats,
}

/// One line of the block log's counters after a job.
pub fn log_line(log: &LogReport) -> String {
    let c = &log.counters;
    if log.mode != blocklog::Mode::Log {
        return format!("block log: mode {} (writes in place, nothing logged)\n", log.mode);
    }
    format!(
        "block log: mode log, {} transactions, {} commits ({} forced), {} sectors logged, {:.1} MiB to the log, {} checkpoints{}\n",
        c.transactions,
        c.commits,
        c.forced_commits,
        c.sectors_logged,
        c.log_bytes_written as f64 / 1048576.0,
        c.checkpoints,
        if c.replays > 0 { format!(", replayed {} sectors at open", c.sectors_replayed) } else { String::new() }
    )
}

/// The whole JSON document of `iolab run --json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    pub jobs: Vec<JobReport>,
}

impl RunDocument {
    pub fn new(iolab_version: &str, jobs: Vec<JobReport>) -> RunDocument {
        RunDocument {
            schema: "iolab-run",
            version: RUN_SCHEMA_VERSION,
            iolab_version: iolab_version.into(),
            jobs,
        }
    }

    pub fn to_json(&self) -> String {
        // Invariant: the document holds only numbers, strings and arrays,
        // which serde_json always serialises (non-finite floats become null).
        serde_json::to_string_pretty(self).expect("serialisable document")
    }
}

/// The heading line of a job: what ran where.
pub fn job_heading(r: &JobResult) -> String {
    let mix =
        if r.read.ios > 0 && r.write.ios > 0 || matches!(r.rw, workloads::Rw::Rw | workloads::Rw::RandRw) {
            format!("{} {}% read", r.rw, r.read_pct)
        } else {
            r.rw.to_string()
        };
    format!(
        "{}: {} on {} ({} bytes at offset {}), bs {}, {} engine, {} thread(s) x depth {}",
        r.name, mix, r.target, r.region_bytes, r.region_offset_bytes, r.bs, r.engine, r.threads, r.iodepth
    )
}

const HEADER: &str =
    "          ios       IOPS     MiB/s  lat(us) mean      p50      p90      p99    p99.9      max\n";

/// fio-like table of one run.
pub fn run_table(r: &JobResult) -> String {
    let mut out = String::new();
    out.push_str(&job_heading(r));
    out.push('\n');
    out.push_str(HEADER);
    let read_label = if r.reads_from_unwritten { "read*" } else { "read" };
    for (label, op) in [(read_label, &r.read), ("write", &r.write)] {
        if op.ios == 0 {
            continue;
        }
        let l = &op.latency;
        let _ = writeln!(
            out,
            "{label:<5} {:>9} {:>10.1} {:>9.2} {:>12.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            op.ios, op.iops, op.mib_per_s, l.mean_us, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
        );
    }
    let _ = writeln!(
        out,
        "elapsed {:.2} s, cpu {:.1}% (user {:.2} s, sys {:.2} s), flushes {}",
        r.elapsed_s, r.cpu.pct, r.cpu.user_s, r.cpu.system_s, r.flushes
    );
    if r.reads_from_unwritten && r.read.ios > 0 {
        out.push_str(UNWRITTEN_MARK);
    }
    out
}

/// The footnote of a read row measured (at least partly) on holes.
pub const UNWRITTEN_MARK: &str =
    "* reads of never-written blocks (holes, --layout never): the file system answered them without the medium\n";

/// The validation line of a run, and its first errors.
pub fn validation_summary(v: &workloads::ValidationSummary) -> String {
    let mut out = format!(
        "validation: {} key blocks of {} bytes written, {} checked, {} bad\n",
        v.blocks_written, v.key_block_bytes, v.blocks_checked, v.errors
    );
    if let Some(j) = &v.journal {
        let _ = writeln!(
            out,
            "journal: {} records in {} commits ({} writes, {} through a worker's ring), {} target flushes, \
             {} compactions; {} waits for a commit, {:.1} us mean",
            j.records,
            j.commits,
            j.writes,
            j.ring_commits,
            j.target_flushes,
            j.compactions,
            j.waits,
            j.wait_us as f64 / j.waits.max(1) as f64
        );
    }
    for e in v.error_list.iter().take(VALIDATION_ERRORS_SHOWN) {
        let _ = writeln!(
            out,
            "  {} at offset {} ({} bytes, found by {:?}, expected key {}): {}",
            e.class,
            e.block_offset,
            e.block_bytes,
            e.checked_by,
            e.expected_key,
            serde_json::to_string(&e.findings).unwrap_or_default()
        );
    }
    out
}

/// Validation errors printed in the table; the error log holds them all.
pub const VALIDATION_ERRORS_SHOWN: usize = 10;

/// Table of min / median / max over repeated runs.
pub fn repeat_table(s: &RepeatSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "over {} runs:                  min     median        max", s.runs);
    let row = |out: &mut String, label: &str, sp: &Spread| {
        let _ = writeln!(out, "  {label:<22} {:>10.1} {:>10.1} {:>10.1}", sp.min, sp.median, sp.max);
    };
    for (dir, op) in [("read", &s.read), ("write", &s.write)] {
        let Some(op) = op else { continue };
        row(&mut out, &format!("{dir} IOPS"), &op.iops);
        row(&mut out, &format!("{dir} MiB/s"), &op.mib_per_s);
        row(&mut out, &format!("{dir} lat mean (us)"), &op.lat_mean_us);
        row(&mut out, &format!("{dir} lat p99 (us)"), &op.lat_p99_us);
    }
    row(&mut out, "cpu %", &s.cpu_pct);
    out
}
