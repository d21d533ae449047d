//! The run table (fio's layout), the validation and block log lines, the
//! table of repeats, and what a job's report holds.

use std::fmt::Write as _;

use workloads::JobResult;

use crate::spread::{RepeatSummary, Spread};
use crate::target::TargetReport;
use crate::units;

/// One job of a run: what it ran on, its runs and their summary.
#[derive(Clone, Debug)]
pub struct JobReport {
    pub name: String,
    /// What the job ran on and how: media, cache, layout.
    pub target: TargetReport,
    pub runs: Vec<JobResult>,
    pub summary: Option<RepeatSummary>,
    /// When the target is a volume: its objects, states and counters after
    /// all runs of the job.
    pub volume: Option<volume::VolumeReport>,
    /// When the job ran through the block log: its counters.
    pub log: Option<LogReport>,
}

/// The block log a job ran through: its mode and counters.
#[derive(Clone, Debug)]
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

/// The heading line of a job: what ran where.
pub fn job_heading(r: &JobResult) -> String {
    if let Some(t) = &r.replay {
        let pace = match t.speed {
            Some(1.0) => "at the traced times".to_string(),
            Some(s) => format!("at {s}x the traced pace"),
            None => "as fast as the queue depth allows".to_string(),
        };
        let format = match t.format {
            workloads::replay::Format::Iolog => format!("fio iolog v{}", t.version),
            workloads::replay::Format::Blktrace => "blktrace".to_string(),
        };
        let files = match t.files.len() {
            0 | 1 => String::new(),
            n => format!(", {n} files laid end to end"),
        };
        return format!(
            "{}: replay of {} ({format}: {}, {}{files}) {pace}, on {} ({} at offset {}), {} engine, {} x depth {}",
            r.name,
            t.source,
            crate::counted(t.requests, "request", "requests"),
            crate::counted(t.flushes, "sync", "syncs"),
            r.target,
            units::size(r.region_bytes),
            units::size(r.region_offset_bytes),
            r.engine,
            crate::counted(r.threads, "thread", "threads"),
            r.iodepth
        );
    }
    let mix =
        if r.read.ios > 0 && r.write.ios > 0 || matches!(r.rw, workloads::Rw::Rw | workloads::Rw::RandRw) {
            format!("{} {}% read", r.rw, r.read_pct)
        } else {
            r.rw.to_string()
        };
    let skip = match r.skip_bytes {
        0 => String::new(),
        s if s < 0 => format!(", skip -{} (backwards)", units::size(s.unsigned_abs())),
        s => format!(", skip {}", units::size(s.unsigned_abs())),
    };
    let rate = match r.rate_iops {
        0 => String::new(),
        n => format!(", held to {n} IOPS"),
    };
    format!(
        "{}: {} on {} ({} at offset {}), bs {}{skip}{rate}, {} engine, {} x depth {}",
        r.name,
        mix,
        r.target,
        units::size(r.region_bytes),
        units::size(r.region_offset_bytes),
        r.bs,
        r.engine,
        crate::counted(r.threads, "thread", "threads"),
        r.iodepth
    )
}

/// The run table's columns: label, then ios, IOPS, bandwidth and the
/// latencies. IOPS, bandwidth and latencies print as fio prints them
/// ([`crate::units`]), each figure with its unit, so the header names
/// none; `ios` stays an exact count. The header is built from the same
/// widths as the rows, so they line up.
macro_rules! run_row {
    ($out:expr, $($cell:expr),+ $(,)?) => {
        writeln!($out, "{:<5} {:>9} {:>8} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}", $($cell),+)
    };
}

/// fio-like table of one run.
pub fn run_table(r: &JobResult) -> String {
    let mut out = String::new();
    out.push_str(&job_heading(r));
    out.push('\n');
    let _ = run_row!(out, "", "ios", "IOPS", "BW", "lat mean", "p50", "p90", "p99", "p99.9", "max");
    let read_label = if r.reads_from_unwritten { "read*" } else { "read" };
    for (label, op) in [(read_label, &r.read), ("write", &r.write), ("trim", &r.trim)] {
        if op.ios == 0 {
            continue;
        }
        let l = &op.latency;
        let _ = run_row!(
            out,
            label,
            op.ios,
            units::iops(op.iops),
            units::bandwidth_mib(op.mib_per_s),
            units::latency_us(l.mean_us),
            units::latency_us(l.p50_us),
            units::latency_us(l.p90_us),
            units::latency_us(l.p99_us),
            units::latency_us(l.p999_us),
            units::latency_us(l.max_us)
        );
    }
    match &r.modeled {
        Some(model) => {
            let _ = writeln!(out, "elapsed {:.2} s modeled, flushes {}", r.elapsed_s, r.flushes);
            let _ = writeln!(out, "{MODELED_MARK} {model}");
        }
        None => {
            let _ = writeln!(
                out,
                "elapsed {:.2} s, cpu {:.1}% (user {:.2} s, sys {:.2} s), flushes {}",
                r.elapsed_s, r.cpu.pct, r.cpu.user_s, r.cpu.system_s, r.flushes
            );
        }
    }
    if r.reads_from_unwritten && r.read.ios > 0 {
        out.push_str(UNWRITTEN_MARK);
    }
    if let Some(line) = rate_short(r) {
        out.push_str(&line);
    }
    out
}

/// A line under a run held to a rate it fell more than a tenth short of:
/// what it did against what was asked.
fn rate_short(r: &JobResult) -> Option<String> {
    let done = r.read.iops + r.write.iops + r.trim.iops;
    let asked = r.rate_iops as f64;
    (r.rate_iops > 0 && done < 0.9 * asked).then(|| {
        format!(
            "rate: {} of the {} asked ({:.0}%): the target, or iolab's pacing of {} at such a rate, \
             could not keep up\n",
            units::iops(done),
            units::iops(asked),
            100.0 * done / asked,
            crate::counted(u64::from(r.threads), "thread", "threads")
        )
    })
}

/// The line under a run on a simulated disk, before the model.
pub const MODELED_MARK: &str = "modeled, not measured: every time above is virtual, the disk models':";

/// The footnote of a read row measured (at least partly) on holes.
pub const UNWRITTEN_MARK: &str =
    "* reads of never-written blocks (holes, --layout never): the file system answered them without the medium\n";

/// The validation line of a run, and its first errors.
/// Whether a run wrote data under validation and checked none of it.
pub fn nothing_checked(v: &workloads::ValidationSummary) -> bool {
    v.blocks_written > 0 && v.blocks_checked == 0
}

pub fn validation_summary(v: &workloads::ValidationSummary) -> String {
    let verified = match v.blocks_verified {
        Some(n) => format!(" ({n} read back after the run)"),
        None => String::new(),
    };
    let mut out = format!(
        "validation: {} key blocks of {} bytes written, {} checked{verified}, {} bad\n",
        v.blocks_written, v.key_block_bytes, v.blocks_checked, v.errors
    );
    if nothing_checked(v) {
        out.push_str(
            "validation: FAILED: data was written and no block was checked (a check that checked nothing is no \
             pass; drop --no-verify, or add reads)\n",
        );
    }
    if let Some(j) = &v.journal {
        let _ = writeln!(
            out,
            "journal: {} in {} ({}, {} through a worker's ring), {}, {}; {} for a commit, {} mean",
            crate::counted(j.records, "record", "records"),
            crate::counted(j.commits, "commit", "commits"),
            crate::counted(j.writes, "write", "writes"),
            j.ring_commits,
            crate::counted(j.target_flushes, "target flush", "target flushes"),
            crate::counted(j.compactions, "compaction", "compactions"),
            crate::counted(j.waits, "wait", "waits"),
            units::latency_us(j.wait_us as f64 / j.waits.max(1) as f64)
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
            findings_text(&e.findings)
        );
    }
    out
}

/// Validation errors printed in the table; the error log holds them all.
pub const VALIDATION_ERRORS_SHOWN: usize = 10;

/// Table of min / median / max over repeated runs.
pub fn repeat_table(s: &RepeatSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "over {}:                  min     median        max",
        crate::counted(s.runs as u64, "run", "runs")
    );
    let row = |out: &mut String, label: &str, sp: &Spread, f: &dyn Fn(f64) -> String| {
        let _ = writeln!(out, "  {label:<22} {:>10} {:>10} {:>10}", f(sp.min), f(sp.median), f(sp.max));
    };
    for (dir, op) in [("read", &s.read), ("write", &s.write), ("trim", &s.trim)] {
        let Some(op) = op else { continue };
        row(&mut out, &format!("{dir} IOPS"), &op.iops, &units::iops);
        row(&mut out, &format!("{dir} BW"), &op.mib_per_s, &units::bandwidth_mib);
        row(&mut out, &format!("{dir} lat mean"), &op.lat_mean_us, &units::latency_us);
        row(&mut out, &format!("{dir} lat p99"), &op.lat_p99_us, &units::latency_us);
    }
    row(&mut out, "cpu %", &s.cpu_pct, &|v| format!("{v:.1}"));
    out
}

/// A block's findings as in the JSON documents: one object per sector.
fn findings_text(findings: &[validation::Finding]) -> String {
    let wire: Vec<crate::json::validation::Finding> =
        findings.iter().map(crate::json::validation::Finding::from).collect();
    serde_json::to_string(&wire).unwrap_or_default()
}
