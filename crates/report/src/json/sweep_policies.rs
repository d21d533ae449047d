//! `iolab sweep policies --json`: schema `iolab-sweep-policies`, version 3
//! (version 2 had no `doubts`; version 1 had only iolab's policies, under
//! `policies`).

use serde::Serialize;

use crate::policies::{doubts, median_min_max, ColumnRuns, Doubt, Phase, PhaseRun, PoliciesSweep};

pub const SCHEMA: &str = "iolab-sweep-policies";
pub const VERSION: u32 = 3;

#[derive(Clone, Debug, Serialize)]
pub struct SweepPoliciesDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub archive: String,
    pub entries: u64,
    pub data_bytes: u64,
    pub copies: u32,
    pub repeats: u32,
    pub target: String,
    /// The disk model when the file systems ran on a simulated disk (every
    /// time then modeled disk time); `null` when measured.
    pub modeled: Option<String>,
    pub columns: Vec<Column>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Column {
    pub name: String,
    pub how: String,
    pub tar: PhaseSummary,
    pub rm: PhaseSummary,
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseSummary {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// The median over async's median; `null` when async did not run.
    pub vs_async: Option<f64>,
    /// The lowest and highest ratio of a run to async's run of the same
    /// repeat; `null` when async did not run.
    pub vs_async_range: Option<[f64; 2]>,
    /// Why the figure is not to be trusted plainly: `under_a_second` (a
    /// measured median), `spread_over_10_percent` (the repeats' max - min
    /// over the median); empty when neither.
    pub doubts: Vec<&'static str>,
    pub runs: Vec<Run>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub seconds: f64,
    pub blocks_written: u64,
    pub write_requests: u64,
    pub sync_writes: Option<u64>,
    pub flushes: u64,
    pub log_bytes: Option<u64>,
}

impl From<&PhaseRun> for Run {
    fn from(r: &PhaseRun) -> Run {
        Run {
            seconds: r.seconds,
            blocks_written: r.blocks_written,
            write_requests: r.write_requests,
            sync_writes: r.sync_writes,
            flushes: r.flushes,
            log_bytes: r.log_bytes,
        }
    }
}

fn summary(s: &PoliciesSweep, p: &ColumnRuns, phase: Phase) -> PhaseSummary {
    let runs = p.phase(phase);
    let (median_s, min_s, max_s) = median_min_max(runs.iter().map(|r| r.seconds));
    PhaseSummary {
        median_s,
        min_s,
        max_s,
        vs_async: s.async_median(phase).filter(|b| *b > 0.0).map(|b| median_s / b),
        vs_async_range: s.ratio_range(p, phase).map(|(lo, hi)| [lo, hi]),
        doubts: doubts(runs, s.modeled.is_some()).into_iter().map(Doubt::name).collect(),
        runs: runs.iter().map(Run::from).collect(),
    }
}

impl SweepPoliciesDocument {
    pub fn new(iolab_version: &str, host: super::Host, s: &PoliciesSweep) -> SweepPoliciesDocument {
        SweepPoliciesDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            archive: s.archive.clone(),
            entries: s.entries,
            data_bytes: s.data_bytes,
            copies: s.copies,
            repeats: s.repeats,
            target: s.target.clone(),
            modeled: s.modeled.clone(),
            columns: s
                .columns
                .iter()
                .map(|p| Column {
                    name: p.name.clone(),
                    how: p.how.clone(),
                    tar: summary(s, p, Phase::Tar),
                    rm: summary(s, p, Phase::Rm),
                })
                .collect(),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}
