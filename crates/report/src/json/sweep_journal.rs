//! `iolab sweep journal --json`: schema `iolab-sweep-journal`, version 1.

use serde::Serialize;

use super::run::Engine;
use super::validation::Journal;
use crate::{JournalSweep, SweepArm, SweepArmRun, SweepPowerCut};

pub const SCHEMA: &str = "iolab-sweep-journal";
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize)]
pub struct SweepJournalDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub target: String,
    pub journal_dir: String,
    pub engine: Engine,
    pub threads: u32,
    pub iodepth: u32,
    pub bs: String,
    pub runtime_s: f64,
    pub arms: Vec<Arm>,
    /// The disk models when the sweep ran on simulated disks (every
    /// figure then modeled); `null` when measured.
    pub modeled: Option<String>,
    /// What a power cut in a run of the sync arm left (`--power-cut`);
    /// `null` without one.
    pub power_cut: Option<PowerCut>,
}

/// A power cut's outcome (`at_s`, `missed`, `records`, `as_journal`,
/// `ahead`, `bad`) and its verdict in words.
#[derive(Clone, Debug, Serialize)]
pub struct PowerCut {
    #[serde(flatten)]
    pub cut: SweepPowerCut,
    /// ok, acknowledged records lost, damaged, or the run ended first.
    pub verdict: &'static str,
}

impl From<&SweepPowerCut> for PowerCut {
    fn from(c: &SweepPowerCut) -> PowerCut {
        PowerCut { cut: c.clone(), verdict: c.verdict() }
    }
}

impl SweepJournalDocument {
    pub fn new(iolab_version: &str, host: super::Host, s: &JournalSweep) -> SweepJournalDocument {
        SweepJournalDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            target: s.target.clone(),
            journal_dir: s.journal_dir.display().to_string(),
            engine: s.engine.into(),
            threads: s.threads,
            iodepth: s.iodepth,
            bs: s.bs.clone(),
            runtime_s: s.runtime_s,
            arms: s.arms.iter().map(Arm::from).collect(),
            modeled: s.modeled.clone(),
            power_cut: s.power_cut.as_ref().map(PowerCut::from),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Arm {
    pub arm: String,
    pub median_iops: f64,
    /// `null` when the off arm did not run.
    pub median_vs_off: Option<f64>,
    pub runs: Vec<ArmRun>,
}

impl From<&SweepArm> for Arm {
    fn from(a: &SweepArm) -> Arm {
        Arm {
            arm: a.arm.to_string(),
            median_iops: a.median_iops,
            median_vs_off: a.median_vs_off,
            runs: a.runs.iter().map(ArmRun::from).collect(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ArmRun {
    pub iops: f64,
    pub vs_off: Option<f64>,
    pub journal: Option<Journal>,
}

impl From<&SweepArmRun> for ArmRun {
    fn from(r: &SweepArmRun) -> ArmRun {
        ArmRun { iops: r.iops, vs_off: r.vs_off, journal: r.journal.as_ref().map(Journal::from) }
    }
}
