//! The sweeps' tables: `iolab sweep stripes` (the third seed's, bonnie or
//! the fs mix per layout with the plex counters that explain it) and
//! `iolab sweep journal` (the second seed's, each arm's IOPS and its
//! ratio to validation off in the same repeat).

use std::fmt::Write as _;
use std::path::PathBuf;

use workloads::bonnie::BonnieResult;
use workloads::journal::JournalStats;
use workloads::{Engine, JobResult};

use crate::spread::median_or_zero;
use crate::units;

/// One layout of the stripes sweep: what it measured.
#[derive(Clone, Debug)]
pub struct StripesRow {
    /// `ufs` (the plain drive), `s64k` (striped), `r512k` (RAID-5).
    pub layout: String,
    /// Every bonnie run of this layout.
    pub bonnie: Vec<BonnieResult>,
    /// Every fs-workload run of this layout.
    pub fs: Vec<JobResult>,
    /// The plex's counters over one run (the last; none for the plain drive).
    pub plex: Option<volume::PlexCountersSnapshot>,
}

const PLEX_COLUMNS: [&str; 4] = ["Writes", "Reads", "Mblock", "Mstripe"];

fn plex_values(row: &StripesRow) -> Vec<u64> {
    row.plex.map(|c| vec![c.writes, c.reads, c.multiblock, c.multistripe]).unwrap_or_default()
}

/// bonnie's table, a row per layout (with repeats: the median, then min
/// and max rows), the plex counters to the right.
pub fn stripes_bonnie_table(rows: &[StripesRow]) -> String {
    let spreads: Vec<Option<[BonnieResult; 3]>> =
        rows.iter().map(|r| crate::bonnie_spread(&r.bonnie)).collect();
    let mut lines: Vec<(String, &BonnieResult, Vec<u64>)> = Vec::new();
    for (r, spread) in rows.iter().zip(&spreads) {
        let Some([min, median, max]) = spread else { continue };
        if r.bonnie.len() == 1 {
            lines.push((r.layout.clone(), median, plex_values(r)));
        } else {
            lines.push((format!("{}:med", r.layout), median, plex_values(r)));
            lines.push((format!("{}:min", r.layout), min, Vec::new()));
            lines.push((format!("{}:max", r.layout), max, Vec::new()));
        }
    }
    crate::bonnie_table(&lines, &PLEX_COLUMNS)
}

/// The fs mix's table: medians over repeats of IOPS, MiB/s, mean latency
/// (weighted by requests) and the worse p99 of reads and writes.
pub fn stripes_fs_table(rows: &[StripesRow]) -> String {
    let mut out = format!(
        "{:<8} {:>10} {:>9} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9}\n",
        "layout", "IOPS", "BW", "lat mean", "p99", "Writes", "Reads", "Mblock", "Mstripe"
    );
    for r in rows {
        if r.fs.is_empty() {
            continue;
        }
        let median = |f: &dyn Fn(&JobResult) -> f64| median_or_zero(&r.fs.iter().map(f).collect::<Vec<_>>());
        let iops = median(&|j| j.read.iops + j.write.iops);
        let mibs = median(&|j| j.read.mib_per_s + j.write.mib_per_s);
        let mean = median(&|j| {
            let ios = (j.read.ios + j.write.ios).max(1) as f64;
            (j.read.latency.mean_us * j.read.ios as f64 + j.write.latency.mean_us * j.write.ios as f64) / ios
        });
        let p99 = median(&|j| j.read.latency.p99_us.max(j.write.latency.p99_us));
        let _ = write!(
            out,
            "{:<8} {:>10} {:>9} {:>12} {:>10}",
            r.layout,
            units::iops(iops),
            units::bandwidth_mib(mibs),
            units::latency_us(mean),
            units::latency_us(p99)
        );
        for v in plex_values(r) {
            let _ = write!(out, " {v:>9}");
        }
        out.push('\n');
    }
    let modeled: Vec<&str> = rows.iter().flat_map(|r| &r.fs).filter_map(|j| j.modeled.as_deref()).collect();
    if let Some(first) = modeled.first() {
        let _ = writeln!(
            out,
            "{} ({} of {} runs; the first: {first})",
            crate::run::MODELED_MARK.trim_end_matches(':'),
            modeled.len(),
            rows.iter().map(|r| r.fs.len()).sum::<usize>()
        );
    }
    out
}

/// What `iolab sweep journal` measured, and how.
#[derive(Clone, Debug)]
pub struct JournalSweep {
    /// As given on the command line.
    pub target: String,
    pub journal_dir: PathBuf,
    /// One engine for every arm; uring runs one thread at the depth, sync
    /// as many threads.
    pub engine: Engine,
    pub threads: u32,
    pub iodepth: u32,
    /// The transfer size as given.
    pub bs: String,
    pub runtime_s: f64,
    /// Runs of each arm.
    pub repeat: u32,
    /// In the order they ran within a repeat.
    pub arms: Vec<SweepArm>,
    /// The disk models, when the target and the journals were simulated:
    /// every figure is then modeled (virtual time), not measured.
    pub modeled: Option<String>,
    /// What a power cut in a run of the sync arm left, when one was asked
    /// for (simulated disks only).
    pub power_cut: Option<SweepPowerCut>,
}

/// What a power cut during a run of the sync journal arm left on the
/// simulated disks, checked against the journal's durable records.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SweepPowerCut {
    /// Seconds after the run's start.
    pub at_s: f64,
    /// The run ended before the cut: nothing was checked.
    pub missed: bool,
    /// Journal records durable at the cut.
    pub records: u64,
    /// Blocks as the journal says (verified or pending a write in flight).
    pub as_journal: u64,
    /// Blocks holding writes the journal has no durable record of: under
    /// a sync journal, writes whose acknowledged `before` record was lost.
    pub ahead: u64,
    /// Blocks holding what no write put there.
    pub bad: u64,
}

impl SweepPowerCut {
    /// The verdict in a few words.
    pub fn verdict(&self) -> &'static str {
        match (self.missed, self.bad > 0, self.ahead > 0) {
            (true, _, _) => "the run ended first",
            (false, true, _) => "damaged",
            (false, false, true) => "acknowledged records lost",
            (false, false, false) => "ok",
        }
    }

    fn line(&self) -> String {
        if self.missed {
            return format!("power cut at {:.3} s: the run ended before it; nothing checked", self.at_s);
        }
        format!(
            "power cut at {:.3} s into a run of the sync arm: {} journal records durable; {} blocks as the journal \
             says, {} ahead of it (written after records the journal acknowledged and lost), {} bad: {}",
            self.at_s,
            self.records,
            self.as_journal,
            self.ahead,
            self.bad,
            self.verdict()
        )
    }
}

/// One arm of the journal sweep over its repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepArm {
    pub arm: &'static str,
    pub median_iops: f64,
    /// The median of the runs' ratios; none when `off` did not run.
    pub median_vs_off: Option<f64>,
    pub runs: Vec<SweepArmRun>,
}

/// One run of an arm.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepArmRun {
    /// Write IOPS.
    pub iops: f64,
    /// Its IOPS over the `off` arm's in the same repeat (when `off` runs):
    /// a shared machine's drift between repeats cancels out of it.
    pub vs_off: Option<f64>,
    /// The journal's counters, for arms with a journal.
    pub journal: Option<JournalStats>,
}

/// What one arm measured: each run's write IOPS and journal counters, in
/// repeat order.
pub type ArmRuns = Vec<(f64, Option<JournalStats>)>;

/// The arms' medians and ratios to `off` from what each measured (by name).
pub fn sweep_arms(measured: Vec<(&'static str, ArmRuns)>) -> Vec<SweepArm> {
    let off = measured.iter().find(|(arm, _)| *arm == "off").map(|(_, runs)| {
        let iops: Vec<f64> = runs.iter().map(|r| r.0).collect();
        iops
    });
    measured
        .into_iter()
        .map(|(arm, runs)| {
            let runs: Vec<SweepArmRun> = runs
                .into_iter()
                .enumerate()
                .map(|(i, (iops, journal))| SweepArmRun {
                    iops,
                    vs_off: off.as_ref().map(|off| iops / off[i].max(f64::MIN_POSITIVE)),
                    journal,
                })
                .collect();
            let median_iops = median_or_zero(&runs.iter().map(|r| r.iops).collect::<Vec<_>>());
            let median_vs_off = off
                .as_ref()
                .map(|_| median_or_zero(&runs.iter().filter_map(|r| r.vs_off).collect::<Vec<_>>()));
            SweepArm { arm, median_iops, median_vs_off, runs }
        })
        .collect()
}

/// The journal sweep's table: each arm's median IOPS and ratio to `off`,
/// then every run.
pub fn journal_sweep_table(sweep: &JournalSweep) -> String {
    let modeled =
        sweep.modeled.as_ref().map_or(String::new(), |m| format!("# {} {m}\n", crate::run::MODELED_MARK));
    let shape = match sweep.engine {
        Engine::Uring => format!("uring engine, 1 thread x depth {}", sweep.iodepth),
        Engine::Sync => format!("sync engine, {} threads", sweep.threads),
        Engine::Virtual => {
            let threads = crate::counted(sweep.threads, "thread", "threads");
            format!("modeled in virtual time, {threads} x depth {}", sweep.iodepth)
        }
    };
    let mut out = format!(
        "# {} random writes on {}, {shape}, {} of {} s per arm, medians\n{modeled}\
         {:<14} {:>10} {:>7}   runs (IOPS / vs off in the same repeat)\n",
        sweep.bs,
        sweep.target,
        crate::counted(sweep.repeat, "run", "runs"),
        sweep.runtime_s,
        "arm",
        "IOPS",
        "vs off"
    );
    for row in &sweep.arms {
        let vs = row.median_vs_off.map_or("-".to_string(), |r| format!("{r:.2}"));
        let runs: Vec<String> = row
            .runs
            .iter()
            .map(|r| match r.vs_off {
                Some(v) => format!("{}/{v:.2}", units::iops(r.iops)),
                None => units::iops(r.iops),
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<14} {:>10} {vs:>7}   {}",
            row.arm,
            units::iops(row.median_iops),
            runs.join(" ")
        );
    }
    if let Some(cut) = &sweep.power_cut {
        let _ = writeln!(out, "{}", cut.line());
    }
    out
}

/// Several journal sweeps of one target side by side (the second seed's
/// servers, a journal disk each): each arm's median IOPS and ratio to
/// `off`, and the power cut's verdict, a column per journal.
pub fn journal_sweeps_side_by_side(sweeps: &[JournalSweep]) -> String {
    let mut rows: Vec<(&str, Vec<String>)> = Vec::new();
    rows.push(("arm", sweeps.iter().map(|s| s.journal_dir.display().to_string()).collect()));
    if let Some(first) = sweeps.first() {
        for (i, row) in first.arms.iter().enumerate() {
            let cells = sweeps.iter().map(|sweep| {
                sweep.arms.get(i).map_or("-".to_string(), |a| match a.median_vs_off {
                    Some(v) => format!("{} ({v:.2})", units::iops(a.median_iops)),
                    None => units::iops(a.median_iops),
                })
            });
            rows.push((row.arm, cells.collect()));
        }
    }
    if sweeps.iter().any(|s| s.power_cut.is_some()) {
        let cells = sweeps.iter().map(|s| s.power_cut.as_ref().map_or("-", |c| c.verdict()).to_string());
        rows.push(("power cut", cells.collect()));
    }
    let width = rows.iter().flat_map(|(_, cells)| cells.iter().map(|c| c.len())).max().unwrap_or(0);
    let mut out = String::from("# side by side: median IOPS (vs off), a column per journal\n");
    for (name, cells) in rows {
        let _ = write!(out, "{name:<14}");
        for cell in cells {
            let _ = write!(out, "  {cell:>width$}");
        }
        out.push('\n');
    }
    out
}
