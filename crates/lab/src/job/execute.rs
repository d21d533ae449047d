//! Running prepared jobs: the layout before the clock, the page cache
//! dropped before each run, the repeats (jobs in sequence or at once),
//! Ctrl-C; a [`Watch`] hears each step (the binary's tables and progress
//! bars).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use workloads::{JobResult, JobSpec, Pattern, Progress};

use super::Prepared;

/// What a run of jobs tells the one following it.
pub trait Watch: Sync {
    /// The layout of job `job` has written `done` of `total` bytes.
    fn laying_out(&self, job: &str, done: u64, total: u64);
    /// The layout of job `job` ended.
    fn laid_out(&self, job: &str);
    /// Before the first run of a job: its target (`named`: it shares its
    /// group, so the lines name it).
    fn target(&self, job: &str, target: &report::TargetReport, named: bool);
    /// On a thread of its own while the jobs of a group run (run `index`
    /// of `repeats`; `first` the group's first job): follows `progress`
    /// until `done` is set.
    fn follow(&self, first: &JobSpec, progress: &[Progress], done: &AtomicBool, index: u32, repeats: u32);
    /// A run of a job ended.
    fn ran(&self, result: &JobResult);
    /// Every repeat ended: the jobs' reports.
    fn summarized(&self, reports: &[report::JobReport]);
}

/// How the jobs run.
pub struct Runs<'a> {
    /// The groups of jobs (`Plan::groups`).
    pub groups: &'a [Range<usize>],
    pub repeat: u32,
    /// Under MPI: called before and after each group, every rank together.
    pub barrier: Option<&'a dyn Fn()>,
    /// Per job: the rate it takes from an earlier job's (`Plan::rate_of`).
    pub rate_of: &'a [Option<super::plan::RateOf>],
}

/// What a run produced.
pub struct Outcome {
    pub reports: Vec<report::JobReport>,
    /// Per job, per run: when its measured phase began and when the run
    /// ended, in seconds from the start of its group's run (under MPI,
    /// from the barrier every rank left together).
    pub windows: Vec<Vec<(f64, f64)>>,
    /// Ctrl-C or SIGTERM stopped it: the results cover the time before.
    pub interrupted: bool,
}

impl Outcome {
    /// Bad blocks validation found over every run of every job.
    pub fn bad_blocks(&self) -> u64 {
        let runs = self.reports.iter().flat_map(|r| &r.runs);
        runs.filter_map(|run| run.validation.as_ref()).map(|v| v.errors).sum()
    }

    /// Runs that wrote data under validation and checked none of it.
    pub fn unchecked_runs(&self) -> usize {
        let runs = self.reports.iter().flat_map(|r| &r.runs);
        runs.filter_map(|run| run.validation.as_ref()).filter(|v| report::nothing_checked(v)).count()
    }
}

/// Lays every job out, then runs the repeats, printing each run's table
/// as it ends. A failure still records what the volumes went through.
pub fn all(jobs: &[Prepared], runs_of: &Runs<'_>, watch: &dyn Watch) -> anyhow::Result<Outcome> {
    let interrupted = catch_interrupts()?;
    let mut targets = Vec::with_capacity(jobs.len());
    for job in jobs {
        targets.push(lay_out(job, watch).map_err(|e| abandon(jobs, e))?);
    }
    let mut runs: Vec<Vec<JobResult>> = jobs.iter().map(|_| Vec::new()).collect();
    let mut windows: Vec<Vec<(f64, f64)>> = jobs.iter().map(|_| Vec::new()).collect();
    for i in 0..runs_of.repeat {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let (results, ends) =
            repeat(jobs, &targets, runs_of, i, &interrupted, watch).map_err(|e| abandon(jobs, e))?;
        for ((w, result), end) in windows.iter_mut().zip(&results).zip(ends) {
            w.push(((end - result.elapsed_s).max(0.0), end));
        }
        for ((all, mut result), t) in runs.iter_mut().zip(results).zip(&targets) {
            result.reads_from_unwritten = t.reads_from_unwritten();
            watch.ran(&result);
            all.push(result);
        }
    }
    let reports: Vec<report::JobReport> = (jobs.iter().zip(runs).zip(targets))
        .map(|((job, runs), target)| report::JobReport {
            name: job.spec.name.clone(),
            target,
            summary: report::summarize(&runs),
            runs,
            volume: job.stack.volume().map(|v| v.report()),
            log: job.stack.log().map(|l| report::LogReport { mode: l.mode(), counters: l.log_stats() }),
        })
        .collect();
    watch.summarized(&reports);
    Ok(Outcome { reports, windows, interrupted: interrupted.load(Ordering::Relaxed) })
}

/// Run `index` of every job: group after group, the jobs of a group at
/// once (stopping between groups on Ctrl-C). The target lines head each
/// job's first run, named when it shares its group.
fn repeat(
    jobs: &[Prepared],
    targets: &[report::TargetReport],
    runs_of: &Runs<'_>,
    index: u32,
    interrupted: &AtomicBool,
    watch: &dyn Watch,
) -> anyhow::Result<(Vec<JobResult>, Vec<f64>)> {
    let mut results = Vec::with_capacity(jobs.len());
    let mut ends = Vec::with_capacity(jobs.len());
    for group in runs_of.groups {
        if interrupted.load(Ordering::Relaxed) && !results.is_empty() {
            break;
        }
        let named = group.len() > 1;
        for (job, t) in jobs[group.clone()].iter().zip(&targets[group.clone()]) {
            start_cold(job)?;
            if index == 0 {
                watch.target(&job.spec.name, t, named);
            }
        }
        // Under MPI every rank starts the group together (IOR's barrier
        // before a phase) and waits for the others after it.
        if let Some(barrier) = runs_of.barrier {
            barrier();
        }
        // A job whose rate is a share of an earlier one's (Vdbench's
        // curve) takes it from what that one did in this repeat.
        let rates: Vec<Option<u64>> = group
            .clone()
            .map(|j| {
                let of = runs_of.rate_of.get(j).copied().flatten()?;
                let r = results.get(of.job).map(|r: &JobResult| r.read.iops + r.write.iops + r.trim.iops)?;
                Some(of.rate(r))
            })
            .collect();
        let start = Instant::now();
        let group_jobs = &jobs[group.clone()];
        let together = run_together(group_jobs, &rates, index, runs_of.repeat, interrupted, watch)?;
        let end = start.elapsed().as_secs_f64();
        if let Some(barrier) = runs_of.barrier {
            barrier();
        }
        ends.extend(together.iter().map(|_| end));
        results.extend(together);
    }
    Ok((results, ends))
}

/// The end of a run: each job's stack closed (log checkpointed, volume
/// recorded, temporary removed); per job, its log's counters after the
/// closing checkpoint and its volume's listing.
pub fn close(jobs: Vec<Prepared>) -> anyhow::Result<Vec<Closed>> {
    let mut all = Vec::with_capacity(jobs.len());
    for job in jobs {
        let volume = job.stack.volume().map(|v| v.report());
        let closed = job.stack.close()?;
        let log = closed.log.map(|(mode, counters)| report::LogReport { mode, counters });
        all.push(Closed { log, volume });
    }
    Ok(all)
}

/// What a job's closed stack leaves to report.
pub struct Closed {
    pub log: Option<report::LogReport>,
    pub volume: Option<volume::VolumeReport>,
}

/// A run failed: still record on each volume the state changes it caused
/// (a subdisk that failed) and the counters of the requests that did run,
/// then pass the failure on.
fn abandon(jobs: &[Prepared], err: anyhow::Error) -> anyhow::Error {
    for job in jobs {
        if let Err(also) = job.stack.record() {
            crate::say::warning(format!("could not record the volume's states and counters: {also:#}"));
        }
    }
    err
}

/// Lays out a job's region (or only counts its holes) and builds what the
/// report says of the target; `watch` follows a layout that writes.
fn lay_out(job: &Prepared, watch: &dyn Watch) -> anyhow::Result<report::TargetReport> {
    let device = job.stack.device().as_ref();
    let range = job.region.start..job.region.start + job.region.len;
    let pattern = if job.layout.zeros { Pattern::Zeros } else { job.spec.pattern };
    let name = &job.spec.name;
    let on_progress = |done: u64, total: u64| watch.laying_out(name, done, total);
    let report =
        workloads::layout::lay_out(device, range, pattern, job.spec.seed, job.layout.write, &on_progress)
            .with_context(|| format!("{}: cannot lay out the job's region", device.name()))?;
    if job.layout.write {
        watch.laid_out(name);
    }
    let layout = job.layout;
    let reads = job.spec.read_pct > 0;
    let state = report::LayoutState {
        policy: layout.policy,
        wanted: layout.write,
        zeros: layout.zeros,
        reads,
        report,
    };
    // The media as the first run finds them: after the layout, cache dropped.
    start_cold(job)?;
    Ok(report::TargetReport::new(device.name().to_string(), device.media(), job.keep_cache, state))
}

/// Before each run: the target's pages out of the page cache, as fio's
/// invalidate=1, unless `--keep-cache`.
fn start_cold(job: &Prepared) -> anyhow::Result<()> {
    if job.keep_cache {
        return Ok(());
    }
    let device = job.stack.device();
    device
        .drop_cache()
        .with_context(|| format!("{}: cannot drop its pages from the page cache", device.name()))
}

/// The first Ctrl-C (or SIGTERM) stops the jobs cleanly, so results are
/// reported and temporary targets removed; a second one kills at once.
fn catch_interrupts() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_default(signal, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&flag)))
            .context("cannot install the interrupt handler")?;
    }
    Ok(flag)
}

/// Runs `jobs` at the same time (one job: just that one), `watch`
/// following them on a thread of its own.
fn run_together(
    jobs: &[Prepared],
    rates: &[Option<u64>],
    index: u32,
    repeats: u32,
    interrupted: &AtomicBool,
    watch: &dyn Watch,
) -> anyhow::Result<Vec<JobResult>> {
    let progress: Vec<Progress> = jobs.iter().map(|_| Progress::default()).collect();
    let done = AtomicBool::new(false);
    let results = std::thread::scope(|scope| {
        let display = scope.spawn(|| watch.follow(&jobs[0].spec, &progress, &done, index, repeats));
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if interrupted.load(Ordering::Relaxed) {
                    progress.iter().for_each(Progress::request_stop);
                }
                std::thread::park_timeout(Duration::from_millis(50));
            }
        });
        let handles: Vec<_> = (jobs.iter().zip(&progress).zip(rates))
            .map(|((job, p), rate)| {
                scope.spawn(move || {
                    let rated = rate.map(|rate_iops| JobSpec { rate_iops, ..job.spec.clone() });
                    workloads::run_job(rated.as_ref().unwrap_or(&job.spec), Arc::clone(job.stack.device()), p)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Relaxed);
        display.thread().unpark();
        let _ = display.join();
        results
    });
    let mut out = Vec::with_capacity(results.len());
    for result in results {
        let result = result.map_err(|_| anyhow::anyhow!("a job thread panicked"))?;
        out.push(result?);
    }
    Ok(out)
}
