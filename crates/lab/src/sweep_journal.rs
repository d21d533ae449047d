//! The second seed's table (`iolab sweep journal`): the same random
//! writes on one target with validation off, on (with and without the
//! pre-read), and with the validation journal in each mode, the arms
//! alternating within each repeat so that a shared machine's drift cancels
//! out of the ratios to `off`; on simulated disks, a sweep per journal
//! disk, each with its power cut.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use workloads::journal::{JournalMode, JournalPlace, JournalSpec, JournalStats};
use workloads::{Engine, JobSpec, KeyMapSpec, Progress, ValidateSpec};

use crate::UsageError;

/// An arm of the table: validation, pre-read and journal mode.
#[derive(Clone, Copy, Debug)]
pub struct Arm {
    pub name: &'static str,
    validate: bool,
    preread: bool,
    journal: Option<JournalMode>,
    /// Group commits through the uring workers' rings (`--journal-commit ring`).
    ring: bool,
}

const fn arm(name: &'static str, validate: bool, preread: bool, journal: Option<JournalMode>) -> Arm {
    Arm { name, validate, preread, journal, ring: false }
}

const ARMS: [Arm; 8] = [
    arm("off", false, false, None),
    arm("validate", true, true, None),
    arm("no-preread", true, false, None),
    arm("sync", true, false, Some(JournalMode::Sync)),
    arm("async", true, false, Some(JournalMode::Async)),
    arm("group", true, false, Some(JournalMode::Group)),
    arm("group-preread", true, true, Some(JournalMode::Group)),
    // Not in the default list: group, committed through the rings.
    Arm { ring: true, ..arm("group-ring", true, false, Some(JournalMode::Group)) },
];

/// A journal sweep, every flag checked and every arm's job with it.
pub struct Plan {
    /// The target as the user named it (a simulated one is opened anew
    /// for the power cut's run).
    pub target: String,
    /// The sweep's job, before an arm adds its validation and journal.
    pub job: JobSpec,
    pub arms: Vec<Arm>,
    /// A sweep for each: the journal directory, or each journal disk.
    pub journals: Vec<Journals>,
    pub repeat: u32,
    /// On simulated disks: one more run of the sync arm per sweep, its
    /// power cut this long after its start.
    pub power_cut: Option<Duration>,
    /// The transfer size as given, for the report.
    pub bs: String,
    pub engine: Engine,
    pub threads: u32,
    pub iodepth: u32,
    pub runtime: Duration,
    pub simulated: bool,
}

/// Runs the sweeps `plan` describes on `device` (laid out where the
/// pre-read arms read); one table's figures per journal place.
impl Plan {
    /// Runs at one journal place: each arm's repeats, and the power cut's.
    pub fn runs_per_place(&self) -> u64 {
        self.arms.len() as u64 * u64::from(self.repeat) + u64::from(self.power_cut.is_some())
    }

    /// Runs in all.
    pub fn runs(&self) -> u64 {
        self.journals.len() as u64 * self.runs_per_place()
    }
}

/// `step(done, label)` is called as each run begins (`done` of
/// [`Plan::runs`] over).
pub fn run(
    plan: &Plan,
    device: &Arc<dyn device::Device>,
    step: &dyn Fn(u64, &str),
) -> anyhow::Result<Vec<report::JournalSweep>> {
    let mut sweeps = Vec::new();
    for (k, journals) in plan.journals.iter().enumerate() {
        let before = k as u64 * plan.runs_per_place();
        let measured = run_arms(plan, device, journals, &|done, label| step(before + done, label))?;
        let cut = |after: Duration| {
            let label =
                format!("sweep: power cut at {:.3} s into a run of the sync arm", after.as_secs_f64());
            step(before + plan.runs_per_place() - 1, &label);
            cut_power(plan, journals, after)
        };
        let power_cut = plan.power_cut.map(cut).transpose()?;
        let modeled = plan.simulated.then(|| {
            format!(
                "{} and journals on {} (a new one each run); the engine in their virtual time, a request at a time \
                 per thread: the same on any machine",
                device.name(),
                journals.shown().display()
            )
        });
        sweeps.push(report::JournalSweep {
            modeled,
            target: plan.target.clone(),
            journal_dir: journals.shown(),
            engine: plan.engine,
            threads: plan.threads,
            iodepth: plan.iodepth,
            bs: plan.bs.clone(),
            runtime_s: plan.runtime.as_secs_f64(),
            repeat: plan.repeat,
            arms: report::sweep_arms(measured),
            power_cut,
        });
    }
    Ok(sweeps)
}

/// One more run of the sync arm, on a new simulated target and journal
/// disk (so that nothing an earlier arm wrote is in the images), its power
/// cut `after` its start; what the cut left.
fn cut_power(
    plan: &Plan,
    journals: &Journals,
    after: std::time::Duration,
) -> anyhow::Result<report::SweepPowerCut> {
    let job = &plan.job;
    // Invariant: ARMS has a sync arm.
    let sync = ARMS.iter().find(|a| a.name == "sync").expect("the sync arm");
    let job = arm_job(job, sync, journals)?;
    // Invariant: the sync arm journals, on a simulated disk here.
    let journal = match job.validate.as_ref().and_then(|v| v.journal.as_ref()).map(|j| &j.place) {
        Some(JournalPlace::Device(dev)) => Arc::clone(dev),
        _ => unreachable!("a power cut's run journals on a simulated disk"),
    };
    let target = crate::stack::open_sim_keeping(&plan.target, "target")?;
    let cut = crate::power_cut::PowerCut::set(Arc::clone(&target), journal, after);
    workloads::run_job(&job, target, &Progress::default())?;
    let at_s = after.as_secs_f64();
    Ok(match cut.verdict()? {
        None => report::SweepPowerCut { at_s, missed: true, records: 0, as_journal: 0, ahead: 0, bad: 0 },
        Some(v) => report::SweepPowerCut {
            at_s,
            missed: false,
            records: v.records,
            as_journal: v.verified + v.pending_old + v.pending_new,
            ahead: v.ahead,
            bad: v.errors(),
        },
    })
}

/// The arms named by `--arms`, in that order.
pub fn parse_arms(names: &[String]) -> Result<Vec<Arm>, UsageError> {
    names
        .iter()
        .map(|name| {
            ARMS.iter().find(|a| a.name == name).copied().ok_or_else(|| {
                let known: Vec<_> = ARMS.iter().map(|a| a.name).collect();
                UsageError(format!("--arms: '{name}' is not an arm; use {}", known.join(", ")))
            })
        })
        .collect()
}

/// Every arm once per repeat, in the order given, so that a drift of the
/// machine touches every arm alike; each arm's runs in repeat order.
fn run_arms(
    plan: &Plan,
    device: &Arc<dyn device::Device>,
    journals: &Journals,
    step: &dyn Fn(u64, &str),
) -> anyhow::Result<Vec<(&'static str, report::ArmRuns)>> {
    let mut runs: Vec<report::ArmRuns> = plan.arms.iter().map(|_| Vec::new()).collect();
    let mut done = 0;
    for r in 0..plan.repeat {
        for (arm, runs) in plan.arms.iter().zip(&mut runs) {
            step(done, &format!("sweep: {} ({}/{})", arm.name, r + 1, plan.repeat));
            done += 1;
            runs.push(run_arm(&plan.job, arm, device, journals)?);
        }
    }
    Ok(plan.arms.iter().map(|a| a.name).zip(runs).collect())
}

/// Where the arms keep their journals.
pub enum Journals {
    /// A directory each, under this one.
    Dir(PathBuf),
    /// A new simulated disk of this spec each run.
    Disk(String),
}

impl Journals {
    pub fn shown(&self) -> PathBuf {
        match self {
            Journals::Dir(dir) => dir.clone(),
            Journals::Disk(spec) => PathBuf::from(spec),
        }
    }

    /// Where `arm` keeps its journal: its directory, or a new disk.
    fn place(&self, arm: &Arm) -> Result<JournalPlace, UsageError> {
        Ok(match self {
            Journals::Dir(dir) => JournalPlace::Dir(arm_journal_dir(dir, arm)),
            Journals::Disk(spec) => {
                JournalPlace::Device(crate::stack::open_sim_keeping(spec, "journal-disk")?)
            }
        })
    }
}

/// Where `arm` keeps its journal.
fn arm_journal_dir(journal_dir: &Path, arm: &Arm) -> PathBuf {
    journal_dir.join(format!("iolab-sweep-{}", arm.name))
}

/// The sweep's job as `arm` runs it: its validation and journal.
pub fn arm_job(job: &JobSpec, arm: &Arm, journals: &Journals) -> Result<JobSpec, UsageError> {
    let place = match arm.journal {
        Some(_) => Some(journals.place(arm)?),
        None => None,
    };
    let journal = arm.journal.zip(place).map(|(mode, place)| JournalSpec { mode, place, ring: arm.ring });
    let validate = arm.validate.then(|| ValidateSpec {
        preread: arm.preread,
        reread: false,
        // The sweep measures what validation costs the run; its check is
        // the power cut's, when it has one.
        verify: false,
        max_errors: 50,
        run_id: codec::fresh_id(),
        journal,
        key_map: KeyMapSpec::AUTO,
    });
    Ok(JobSpec { validate, ..job.clone() })
}

/// One run of `arm`: its write IOPS and its journal's counters. A journal
/// arm writes into a new directory under `journal_dir`, removed after.
fn run_arm(
    job: &JobSpec,
    arm: &Arm,
    device: &Arc<dyn device::Device>,
    journals: &Journals,
) -> anyhow::Result<(f64, Option<JournalStats>)> {
    let job = arm_job(job, arm, journals)?;
    let result = workloads::run_job(&job, Arc::clone(device), &Progress::default());
    if let (Some(_), Journals::Dir(journal_dir)) = (arm.journal, journals) {
        let dir = arm_journal_dir(journal_dir, arm);
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("{}: cannot remove the journal", dir.display()))?;
    }
    let result = result?;
    if let Some(v) = &result.validation {
        if v.errors > 0 {
            anyhow::bail!(
                "arm {}: validation found {} bad block(s) on {}; the target does not keep what is written to it",
                arm.name,
                v.errors,
                device.name()
            );
        }
    }
    Ok((result.write.iops, result.validation.and_then(|v| v.journal)))
}
