//! Running prepared jobs: the layout before the clock, the page cache
//! dropped before each run, the repeats (jobs in sequence or at once), a
//! live progress line, Ctrl-C, and the tables as runs end.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use workloads::{JobResult, JobSpec, Pattern, Progress};

use super::RunArgs;
use lab::job::Prepared;

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
pub fn all(
    jobs: &[Prepared],
    groups: &[std::ops::Range<usize>],
    args: &RunArgs,
    barrier: Option<&dyn Fn()>,
) -> anyhow::Result<Outcome> {
    let interrupted = catch_interrupts()?;
    let mut targets = Vec::with_capacity(jobs.len());
    for job in jobs {
        targets.push(lay_out(job, args.quiet).map_err(|e| abandon(jobs, e))?);
    }
    let mut runs: Vec<Vec<JobResult>> = jobs.iter().map(|_| Vec::new()).collect();
    let mut windows: Vec<Vec<(f64, f64)>> = jobs.iter().map(|_| Vec::new()).collect();
    for i in 0..args.repeat {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let (results, ends) =
            repeat(jobs, &targets, args, i, groups, &interrupted, barrier).map_err(|e| abandon(jobs, e))?;
        for ((w, result), end) in windows.iter_mut().zip(&results).zip(ends) {
            w.push(((end - result.elapsed_s).max(0.0), end));
        }
        for ((all, mut result), t) in runs.iter_mut().zip(results).zip(&targets) {
            result.reads_from_unwritten = t.reads_from_unwritten();
            if args.to_stdout() {
                print!("{}", report::run_table(&result));
                if let Some(v) = &result.validation {
                    print!("{}", report::validation_summary(v));
                }
            }
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
    if args.repeat > 1 && args.to_stdout() {
        for r in &reports {
            if let Some(summary) = &r.summary {
                print!("{}: {}", r.name, report::repeat_table(summary));
            }
        }
    }
    Ok(Outcome { reports, windows, interrupted: interrupted.load(Ordering::Relaxed) })
}

/// Run `index` of every job: group after group, the jobs of a group at
/// once (stopping between groups on Ctrl-C). The target lines head each
/// job's first run, named when it shares its group.
fn repeat(
    jobs: &[Prepared],
    targets: &[report::TargetReport],
    args: &RunArgs,
    index: u32,
    groups: &[std::ops::Range<usize>],
    interrupted: &AtomicBool,
    barrier: Option<&dyn Fn()>,
) -> anyhow::Result<(Vec<JobResult>, Vec<f64>)> {
    let mut results = Vec::with_capacity(jobs.len());
    let mut ends = Vec::with_capacity(jobs.len());
    for group in groups {
        if interrupted.load(Ordering::Relaxed) && !results.is_empty() {
            break;
        }
        let named = group.len() > 1;
        for (job, t) in jobs[group.clone()].iter().zip(&targets[group.clone()]) {
            start_cold(job)?;
            if index == 0 && args.to_stdout() {
                let lines = report::target_lines(t);
                if named {
                    print!("{}: {lines}", job.spec.name);
                } else {
                    print!("{lines}");
                }
            }
        }
        // Under MPI every rank starts the group together (IOR's barrier
        // before a phase) and waits for the others after it.
        if let Some(barrier) = barrier {
            barrier();
        }
        let start = Instant::now();
        let together = run_together(&jobs[group.clone()], args.quiet, index, args.repeat, interrupted)?;
        let end = start.elapsed().as_secs_f64();
        if let Some(barrier) = barrier {
            barrier();
        }
        ends.extend(together.iter().map(|_| end));
        results.extend(together);
    }
    Ok((results, ends))
}

/// The end of a run: each job's stack closed (log checkpointed, volume
/// recorded, temporary removed), then its log line and volume listing.
pub fn close(jobs: Vec<Prepared>, to_stdout: bool) -> anyhow::Result<()> {
    for job in jobs {
        let volume = job.stack.volume().map(|v| v.report());
        let closed = job.stack.close()?;
        if !to_stdout {
            continue;
        }
        if let Some((mode, counters)) = closed.log {
            print!("{}", report::log_line(&report::LogReport { mode, counters }));
        }
        if let Some(volume) = volume {
            print!("{}", report::volume_list(&[volume], true));
        }
    }
    Ok(())
}

/// A run failed: still record on each volume the state changes it caused
/// (a subdisk that failed) and the counters of the requests that did run,
/// then pass the failure on.
fn abandon(jobs: &[Prepared], err: anyhow::Error) -> anyhow::Error {
    for job in jobs {
        if let Err(also) = job.stack.record() {
            eprintln!("iolab: warning: could not record the volume's states and counters: {also:#}");
        }
    }
    err
}

/// Lays out a job's region (or only counts its holes) and builds what the
/// report says of the target. A progress bar on a terminal; the outcome is
/// in the target lines.
fn lay_out(job: &Prepared, quiet: bool) -> anyhow::Result<report::TargetReport> {
    let device = job.stack.device().as_ref();
    let range = job.region.start..job.region.start + job.region.len;
    let pattern = if job.layout.zeros { Pattern::Zeros } else { job.spec.pattern };
    let bar = (!quiet && job.layout.write && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "laying out {prefix} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} ETA {eta}",
        ) {
            bar.set_style(style);
        }
        bar.set_prefix(job.spec.name.clone());
        bar
    });
    let on_progress = |done: u64, total: u64| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let report =
        workloads::layout::lay_out(device, range, pattern, job.spec.seed, job.layout.write, &on_progress)
            .with_context(|| format!("{}: cannot lay out the job's region", device.name()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let layout = job.layout;
    let state =
        report::LayoutState { policy: layout.policy, wanted: layout.write, zeros: layout.zeros, report };
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

/// Runs `jobs` at the same time (one job: just that one), with a live
/// progress line on a terminal.
fn run_together(
    jobs: &[Prepared],
    quiet: bool,
    index: u32,
    repeats: u32,
    interrupted: &AtomicBool,
) -> anyhow::Result<Vec<JobResult>> {
    let progress: Vec<Progress> = jobs.iter().map(|_| Progress::default()).collect();
    let show = !quiet && std::io::stderr().is_terminal();
    let done = AtomicBool::new(false);
    let results = std::thread::scope(|scope| {
        let display =
            show.then(|| scope.spawn(|| show_progress(&jobs[0].spec, &progress, &done, index, repeats)));
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if interrupted.load(Ordering::Relaxed) {
                    progress.iter().for_each(Progress::request_stop);
                }
                std::thread::park_timeout(Duration::from_millis(50));
            }
        });
        let handles: Vec<_> = (jobs.iter().zip(&progress))
            .map(|(job, p)| {
                scope.spawn(move || workloads::run_job(&job.spec, Arc::clone(job.stack.device()), p))
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Relaxed);
        if let Some(handle) = display {
            let _ = handle.join();
        }
        results
    });
    let mut out = Vec::with_capacity(results.len());
    for result in results {
        let result = result.map_err(|_| anyhow::anyhow!("a job thread panicked"))?;
        out.push(result?);
    }
    Ok(out)
}

/// What a run's progress bar counts toward: its clock when it is timed
/// (runtime and ramp, in ms), else its requests or its bytes when it
/// stops after a count of them; None leaves a spinner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Toward {
    Millis(u64),
    Ios(u64),
    Bytes(u64),
}

fn toward(job: &JobSpec) -> Option<Toward> {
    match (job.runtime, job.ios, job.io_bytes) {
        (Some(r), ..) => Some(Toward::Millis((r + job.ramp).as_millis() as u64)),
        (None, Some(ios), _) => Some(Toward::Ios(ios)),
        (None, None, Some(bytes)) => Some(Toward::Bytes(bytes)),
        (None, None, None) => None,
    }
}

/// The time left, from the share done after `elapsed`: none before a
/// second has passed or anything is done (an estimate from nothing
/// would say 0 s).
fn eta(elapsed: Duration, done: u64, total: u64) -> Option<Duration> {
    if elapsed < Duration::from_secs(1) || done == 0 {
        return None;
    }
    let left = total.saturating_sub(done) as f64 / done as f64;
    Some(Duration::from_secs_f64(elapsed.as_secs_f64() * left))
}

fn eta_text(eta: Option<Duration>) -> String {
    match eta.map(|d| d.as_secs()) {
        None => "ETA -".into(),
        Some(s) if s >= 3600 => format!("ETA {}h{:02}m", s / 3600, s / 60 % 60),
        Some(s) if s >= 60 => format!("ETA {}m{:02}s", s / 60, s % 60),
        Some(s) => format!("ETA {s}s"),
    }
}

fn show_progress(job: &JobSpec, progress: &[Progress], done: &AtomicBool, index: u32, repeats: u32) {
    use indicatif::{ProgressBar, ProgressStyle};
    let total = toward(job);
    let bar = match total {
        Some(Toward::Millis(n) | Toward::Ios(n) | Toward::Bytes(n)) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    let style = if total.is_some() {
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:30} {percent:>3}% {msg}")
    } else {
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {spinner} {msg}")
    };
    if let Ok(style) = style {
        bar.set_style(style);
    }
    let prefix = if repeats > 1 { format!("run {}/{}", index + 1, repeats) } else { job.name.clone() };
    bar.set_prefix(prefix);
    let start = Instant::now();
    let snapshot = || {
        progress.iter().map(|p| p.snapshot()).fold(
            workloads::ProgressSnapshot { measuring: true, ..Default::default() },
            |a, s| workloads::ProgressSnapshot {
                ios: a.ios + s.ios,
                bytes: a.bytes + s.bytes,
                measuring: a.measuring && s.measuring,
            },
        )
    };
    let mut last = (start, snapshot());
    while !done.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(250));
        let now = Instant::now();
        let snap = snapshot();
        let position = match total {
            Some(Toward::Millis(n)) => Some(((now - start).as_millis() as u64, n)),
            Some(Toward::Ios(n)) => Some((snap.ios.min(n), n)),
            Some(Toward::Bytes(n)) => Some((snap.bytes.min(n), n)),
            None => None,
        };
        let secs = (now - last.0).as_secs_f64();
        if secs >= 0.5 {
            let iops = (snap.ios - last.1.ios) as f64 / secs;
            let bw = (snap.bytes - last.1.bytes) as f64 / secs;
            let phase = if snap.measuring { "" } else { " (warm-up)" };
            let left =
                position.map(|(at, n)| format!(" {}", eta_text(eta(now - start, at, n)))).unwrap_or_default();
            bar.set_message(format!(
                "{} IOPS {}{phase}{left}",
                report::units::iops(iops),
                report::units::bandwidth(bw)
            ));
            last = (now, snap);
        }
        match position {
            Some((at, _)) => bar.set_position(at),
            None => bar.tick(),
        }
    }
    bar.finish_and_clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_bound_by_a_count_of_requests_counts_toward_it() {
        let job = JobSpec { runtime: None, ios: Some(5000), ..JobSpec::default() };
        assert_eq!(toward(&job), Some(Toward::Ios(5000)));
    }

    #[test]
    fn a_timed_run_counts_toward_its_clock_even_with_a_count() {
        let job = JobSpec {
            runtime: Some(Duration::from_secs(2)),
            ramp: Duration::from_secs(1),
            ios: Some(5000),
            ..JobSpec::default()
        };
        assert_eq!(toward(&job), Some(Toward::Millis(3000)));
    }

    #[test]
    fn no_time_left_is_guessed_in_the_first_second() {
        assert_eq!(eta(Duration::from_millis(900), 500, 1000), None);
        assert_eq!(eta_text(None), "ETA -");
    }

    #[test]
    fn the_time_left_follows_the_share_done() {
        assert_eq!(eta(Duration::from_secs(10), 250, 1000), Some(Duration::from_secs(30)));
        assert_eq!(eta_text(Some(Duration::from_secs(30))), "ETA 30s");
        assert_eq!(eta_text(Some(Duration::from_secs(125))), "ETA 2m05s");
    }
}
