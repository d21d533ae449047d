//! What `iolab run` shows while `lab::job::execute` runs its jobs: the
//! layout's bar, the target lines, a live progress line on a terminal
//! (its ETA from the share done), and each run's table as it ends.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use lab::job::execute::Watch;
use workloads::{JobResult, JobSpec, Progress};

/// The run's display: to standard output unless it carries the JSON or
/// CSV lines; progress bars on a terminal unless `--quiet`.
pub struct Shown {
    pub to_stdout: bool,
    pub quiet: bool,
    pub repeat: u32,
    /// The layout's bar, while a layout writes.
    pub layout: std::sync::Mutex<Option<ProgressBar>>,
}

impl Shown {
    pub fn new(to_stdout: bool, quiet: bool, repeat: u32) -> Shown {
        Shown { to_stdout, quiet, repeat, layout: std::sync::Mutex::new(None) }
    }

    fn bars(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }
}

impl Watch for Shown {
    fn laying_out(&self, job: &str, done: u64, total: u64) {
        if !self.bars() {
            return;
        }
        let mut bar = self.layout.lock().unwrap_or_else(|e| e.into_inner());
        let bar = bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(0);
            if let Ok(style) = ProgressStyle::with_template(
                "laying out {prefix} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} ETA {eta}",
            ) {
                bar.set_style(style);
            }
            bar.set_prefix(job.to_string());
            bar
        });
        bar.set_length(total);
        bar.set_position(done);
    }

    fn laid_out(&self, _job: &str) {
        if let Some(bar) = self.layout.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }

    fn target(&self, job: &str, target: &report::TargetReport, named: bool) {
        if !self.to_stdout {
            return;
        }
        let lines = report::target_lines(target);
        if named {
            print!("{job}: {lines}");
        } else {
            print!("{lines}");
        }
    }

    fn follow(&self, first: &JobSpec, progress: &[Progress], done: &AtomicBool, index: u32, repeats: u32) {
        if self.bars() {
            show_progress(first, progress, done, index, repeats);
        }
    }

    fn ran(&self, result: &JobResult) {
        if self.to_stdout {
            print!("{}", report::run_table(result));
            if let Some(v) = &result.validation {
                print!("{}", report::validation_summary(v));
            }
        }
    }

    fn summarized(&self, reports: &[report::JobReport]) {
        if self.repeat > 1 && self.to_stdout {
            for r in reports {
                if let Some(summary) = &r.summary {
                    print!("{}: {}", r.name, report::repeat_table(summary));
                }
            }
        }
    }
}

/// Each closed job's log line and volume listing.
pub fn show_closed(closed: Vec<lab::job::execute::Closed>) {
    for job in closed {
        if let Some(log) = &job.log {
            print!("{}", report::log_line(log));
        }
        if let Some(volume) = job.volume {
            print!("{}", report::volume_list(&[volume], true));
        }
    }
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
