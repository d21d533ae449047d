//! Runs a job: spawns the worker threads, enforces the end conditions and
//! the warm-up, merges the measurements.

mod sync;
mod uring;
mod uring_validated;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use device::{AlignedBuf, Device, DeviceError, StatsSnapshot};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::gen::{IoKind, RequestGen};
use crate::spec::{Engine, JobSpec, Pattern, Region, SpecError};
use crate::stats::{self, cpu_times, CpuUsage, OpSummary, SecondSample, ThreadStats};

pub use uring::uring_available;

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("{device}: io_uring {what}: {source}")]
    Uring {
        device: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalWriteError),
    #[error(transparent)]
    KeyMap(#[from] validation::KeyMapError),
    #[error("a worker thread panicked: {0}")]
    Panic(String),
}

/// Live counters a caller may poll while a job runs.
#[derive(Default)]
pub struct Progress {
    ios: AtomicU64,
    bytes: AtomicU64,
    measuring: AtomicBool,
    stop: AtomicBool,
}

/// A reading of [`Progress`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ProgressSnapshot {
    pub ios: u64,
    pub bytes: u64,
    /// False during the warm-up.
    pub measuring: bool,
}

impl Progress {
    /// Asks the job's workers to stop after the requests they have in
    /// flight (on Ctrl-C, say); the job then returns what it measured.
    pub fn request_stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Whether a stop was requested.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Relaxed)
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            ios: self.ios.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            measuring: self.measuring.load(Relaxed),
        }
    }
}

/// The measured outcome of one run of a job.
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    pub name: String,
    pub target: String,
    pub engine: Engine,
    pub threads: u32,
    pub iodepth: u32,
    pub rw: crate::spec::Rw,
    pub read_pct: u8,
    pub bs: String,
    pub region_offset_bytes: u64,
    pub region_bytes: u64,
    pub seed: u64,
    /// Measured time: from the end of the warm-up to the last completion.
    pub elapsed_s: f64,
    pub read: OpSummary,
    pub write: OpSummary,
    pub flushes: u64,
    pub cpu: CpuUsage,
    /// Requests and bytes completed in each second of the measured phase.
    pub per_second: Vec<SecondSample>,
    /// The target's own counters over the whole run, warm-up included.
    pub device: StatsSnapshot,
    /// What validation saw, when the job validated.
    pub validation: Option<crate::validate::ValidationSummary>,
    /// Reads may have hit never-written blocks (holes left by `--layout
    /// never`): the read figures do not measure the medium. The engine
    /// cannot know; the caller that laid out (or not) sets it.
    pub reads_from_unwritten: bool,
}

/// When a worker stops, shared by every worker of a job.
pub(crate) struct Limits {
    pub deadline: Option<Instant>,
    pub measure_start: Instant,
    pub stop: AtomicBool,
}

/// Per-thread state every engine uses: the request stream, quotas, the
/// measurements and the live counters.
pub(crate) struct Worker<'a> {
    pub job: &'a JobSpec,
    pub validator: Option<&'a crate::validate::Validator>,
    pub device: &'a dyn Device,
    pub gen: RequestGen,
    pub ios_left: u64,
    pub bytes_left: u64,
    pub limits: &'a Limits,
    pub progress: &'a Progress,
    pub stats: ThreadStats,
    pub measuring: bool,
    pub writes_since_flush: u64,
    rate_interval: Option<Duration>,
    next_issue: Instant,
}

impl Worker<'_> {
    /// True when this worker must not issue another request.
    pub fn finished(&self, now: Instant) -> bool {
        self.ios_left == 0
            || self.bytes_left == 0
            || self.limits.stop.load(Relaxed)
            || self.progress.stop.load(Relaxed)
            || self.limits.deadline.is_some_and(|d| now >= d)
    }

    /// Counts a completion; `measured` requests (issued after the
    /// warm-up) go into the statistics.
    pub fn complete(&mut self, kind: IoKind, bytes: u64, latency: Duration, now: Instant, measured: bool) {
        self.progress.ios.fetch_add(1, Relaxed);
        self.progress.bytes.fetch_add(bytes, Relaxed);
        if measured {
            if !self.measuring {
                self.measuring = true;
                self.stats = ThreadStats::new(self.limits.measure_start);
            }
            self.stats.record(kind, bytes, latency, now);
        }
    }

    /// Takes the next request, and whether it is measured (issued after
    /// the warm-up, and then charged to the quotas); `None` when the worker
    /// is finished.
    pub fn next_request(&mut self, now: Instant) -> Option<(crate::gen::Request, bool)> {
        if self.finished(now) {
            return None;
        }
        let req = self.gen.next_request();
        let measured = now >= self.limits.measure_start;
        if measured {
            self.ios_left = self.ios_left.saturating_sub(1);
            self.bytes_left = self.bytes_left.saturating_sub(req.len.min(self.bytes_left));
        }
        if let Some(interval) = self.rate_interval {
            // At most one interval of lag is made up, so a stall is not
            // followed by a burst.
            self.next_issue = self.next_issue.max(now.checked_sub(interval).unwrap_or(now)) + interval;
        }
        Some((req, measured))
    }

    /// When rate-limited, how long to wait before the next request.
    pub fn rate_wait(&self, now: Instant) -> Option<Duration> {
        self.rate_interval?;
        (self.next_issue > now).then(|| self.next_issue - now)
    }

    /// Whether a flush is due after a write completed.
    pub fn flush_due(&mut self, kind: IoKind) -> bool {
        if kind != IoKind::Write || self.job.flush_every == 0 {
            return false;
        }
        self.writes_since_flush += 1;
        if self.writes_since_flush >= self.job.flush_every {
            self.writes_since_flush = 0;
            return true;
        }
        false
    }
}

/// Fills a buffer for writes according to the job's data pattern.
pub fn data_buffer(len: usize, align: usize, pattern: Pattern, seed: u64) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len, align);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    match pattern {
        Pattern::Zeros => {}
        Pattern::Random => rng.fill_bytes(&mut buf),
        Pattern::Compressible { pct } => {
            // In every 4 KiB, the first pct% is random and the rest zeros,
            // so a block compressor shrinks it to about pct%.
            for chunk in buf.chunks_mut(4096) {
                let random = chunk.len() * usize::from(pct) / 100;
                rng.fill_bytes(&mut chunk[..random]);
            }
        }
    }
    buf
}

/// Runs `job` on `device` and measures it. `progress` is updated as
/// requests complete.
pub fn run_job(
    job: &JobSpec,
    device: Arc<dyn Device>,
    progress: &Progress,
) -> Result<JobResult, WorkloadError> {
    let region = job.region(device.size_bytes(), u64::from(device.sector_bytes()))?;
    let validator = job
        .validate
        .clone()
        .map(|spec| crate::validate::Validator::new(job, spec, region, &device))
        .transpose()?;
    if job.engine == Engine::Uring && device.raw_fd().is_none() {
        return Err(SpecError {
            flag: "engine",
            message: format!(
                "uring needs a file or block device; {} is neither (use --engine sync)",
                device.name()
            ),
        }
        .into());
    }
    let before = device.stats().snapshot();
    let (user0, sys0) = cpu_times();
    let start = Instant::now();
    let measure_start = start + job.ramp;
    let limits = Limits {
        deadline: job.runtime.map(|r| measure_start + r),
        measure_start,
        stop: AtomicBool::new(false),
    };
    progress.measuring.store(job.ramp.is_zero(), Relaxed);
    let threads = job.threads;
    let outcomes: Vec<Result<ThreadStats, WorkloadError>> = std::thread::scope(|scope| {
        // A group-commit journal commits on its own thread when workers
        // kick it, so that no worker stalls for a commit it can see coming
        // (unless uring workers commit it through their rings).
        let journal = validator.as_ref().and_then(|v| v.committer_journal());
        let committer = journal.map(|j| scope.spawn(move || j.run_committer()));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mut worker = new_worker(job, device.as_ref(), region, t, &limits, progress);
                worker.validator = validator.as_ref();
                let limits = &limits;
                scope.spawn(move || {
                    let result = match job.engine {
                        Engine::Sync => sync::run(worker),
                        Engine::Uring => uring::run(worker),
                    };
                    if result.is_err() {
                        limits.stop.store(true, Relaxed);
                    }
                    result
                })
            })
            .collect();
        if !job.ramp.is_zero() {
            watch_ramp(&limits, progress, &handles);
        }
        let outcomes = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| Err(WorkloadError::Panic(panic_message(&p)))))
            .collect();
        if let (Some(j), Some(c)) = (journal, committer) {
            j.stop_committer();
            // A panic in the committer shows as a poisoned journal.
            let _ = c.join();
        }
        outcomes
    });
    let mut per_thread = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        per_thread.push(outcome?);
    }
    if job.end_flush {
        device.flush()?;
    }
    if let Some(v) = &validator {
        v.finish()?;
    }
    let end = Instant::now();
    let (user1, sys1) = cpu_times();
    let cpu = (user1 - user0, sys1 - sys0);
    let mut result = merge(job, device.as_ref(), region, per_thread, &limits, end, before, cpu, end - start);
    result.validation = validator.map(|v| v.summary());
    Ok(result)
}

fn new_worker<'a>(
    job: &'a JobSpec,
    device: &'a dyn Device,
    region: Region,
    thread: u32,
    limits: &'a Limits,
    progress: &'a Progress,
) -> Worker<'a> {
    let share = |total: u64| {
        total / u64::from(job.threads) + u64::from(u64::from(thread) < total % u64::from(job.threads))
    };
    // Without any end condition a job moves the region's size once, as fio.
    let no_limit = job.runtime.is_none() && job.ios.is_none() && job.io_bytes.is_none();
    let io_bytes = if no_limit { Some(region.len) } else { job.io_bytes };
    let rate_interval = (job.rate_iops > 0).then(|| {
        let per_thread = (job.rate_iops as f64 / f64::from(job.threads)).max(1e-3);
        Duration::from_secs_f64(1.0 / per_thread)
    });
    Worker {
        job,
        validator: None,
        device,
        gen: RequestGen::new(job, region, thread, job.threads),
        ios_left: job.ios.map_or(u64::MAX, share),
        bytes_left: io_bytes.map_or(u64::MAX, |b| share(b).max(1)),
        limits,
        progress,
        stats: ThreadStats::new(limits.measure_start),
        measuring: false,
        writes_since_flush: 0,
        rate_interval,
        next_issue: Instant::now(),
    }
}

/// Marks the end of the warm-up in the progress, for the display.
fn watch_ramp<T>(limits: &Limits, progress: &Progress, handles: &[std::thread::ScopedJoinHandle<'_, T>]) {
    while Instant::now() < limits.measure_start && !handles.iter().all(|h| h.is_finished()) {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    progress.measuring.store(true, Relaxed);
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[allow(clippy::too_many_arguments)]
fn merge(
    job: &JobSpec,
    device: &dyn Device,
    region: Region,
    per_thread: Vec<ThreadStats>,
    limits: &Limits,
    end: Instant,
    before: StatsSnapshot,
    (user, system): (Duration, Duration),
    wall: Duration,
) -> JobResult {
    let mut read_hist = stats::new_histogram();
    let mut write_hist = stats::new_histogram();
    let (mut read_ios, mut read_bytes, mut write_ios, mut write_bytes, mut flushes) = (0, 0, 0, 0, 0);
    let mut series: Vec<SecondSample> = Vec::new();
    for t in &per_thread {
        // Invariant: every histogram has the same bounds, so adding cannot fail.
        read_hist.add(&t.read.hist).expect("same histogram bounds");
        write_hist.add(&t.write.hist).expect("same histogram bounds");
        read_ios += t.read.ios;
        read_bytes += t.read.bytes;
        write_ios += t.write.ios;
        write_bytes += t.write.bytes;
        flushes += t.flushes;
        if series.len() < t.series.len() {
            series.resize(t.series.len(), SecondSample::default());
        }
        for (total, s) in series.iter_mut().zip(&t.series) {
            total.read_ios += s.read_ios;
            total.write_ios += s.write_ios;
            total.read_bytes += s.read_bytes;
            total.write_bytes += s.write_bytes;
        }
    }
    let elapsed = end.saturating_duration_since(limits.measure_start);
    let cpu_secs = (user + system).as_secs_f64();
    JobResult {
        name: job.name.clone(),
        target: device.name().to_string(),
        engine: job.engine,
        threads: job.threads,
        iodepth: job.iodepth,
        rw: job.rw,
        read_pct: job.read_pct,
        bs: job.bs.to_string(),
        region_offset_bytes: region.start,
        region_bytes: region.len,
        seed: job.seed,
        elapsed_s: elapsed.as_secs_f64(),
        read: stats::summarize(read_ios, read_bytes, &read_hist, elapsed),
        write: stats::summarize(write_ios, write_bytes, &write_hist, elapsed),
        flushes,
        cpu: CpuUsage {
            user_s: user.as_secs_f64(),
            system_s: system.as_secs_f64(),
            pct: 100.0 * cpu_secs / wall.as_secs_f64().max(1e-9),
        },
        per_second: series,
        device: device.stats().snapshot().since(&before),
        validation: None,
        reads_from_unwritten: false,
    }
}
