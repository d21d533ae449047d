//! `iolab sweep policies --json`: schema `iolab-sweep-policies`, version 1.

use serde::Serialize;

use crate::policies::{median_min_max, Phase, PhaseRun, PoliciesSweep, PolicyRuns};

pub const SCHEMA: &str = "iolab-sweep-policies";
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize)]
pub struct SweepPoliciesDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    pub archive: String,
    pub entries: u64,
    pub data_bytes: u64,
    pub copies: u32,
    pub repeats: u32,
    pub target: String,
    pub policies: Vec<Policy>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Policy {
    pub policy: String,
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
    pub runs: Vec<Run>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub seconds: f64,
    pub blocks_written: u64,
    pub write_requests: u64,
    pub sync_writes: u64,
    pub flushes: u64,
    pub log_bytes: u64,
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

fn summary(s: &PoliciesSweep, p: &PolicyRuns, phase: Phase) -> PhaseSummary {
    let runs = p.phase(phase);
    let (median_s, min_s, max_s) = median_min_max(runs.iter().map(|r| r.seconds));
    PhaseSummary {
        median_s,
        min_s,
        max_s,
        vs_async: s.async_median(phase).filter(|b| *b > 0.0).map(|b| median_s / b),
        runs: runs.iter().map(Run::from).collect(),
    }
}

impl SweepPoliciesDocument {
    pub fn new(iolab_version: &str, s: &PoliciesSweep) -> SweepPoliciesDocument {
        SweepPoliciesDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            archive: s.archive.clone(),
            entries: s.entries,
            data_bytes: s.data_bytes,
            copies: s.copies,
            repeats: s.repeats,
            target: s.target.clone(),
            policies: s
                .policies
                .iter()
                .map(|p| Policy {
                    policy: p.policy.clone(),
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
