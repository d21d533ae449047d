//! Runs a job: spawns the worker threads, enforces the end conditions and
//! the warm-up, merges the measurements.

mod progress;
mod ring;
mod sync;
mod uring;
mod uring_validated;
mod vtime;
mod vtime_validated;
mod worker;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use device::{Device, StatsSnapshot};

use crate::error::WorkloadError;
use crate::spec::{Engine, JobSpec, Region, SpecError};
use hdrhistogram::Histogram;

use crate::stats::{self, cpu_times, CpuUsage, LatBuckets, OpSummary, SecondSample, ThreadStats};
use crate::validate::{ValidationSummary, Validator};
use worker::{Limits, TimeSource, Worker};

pub use progress::{Progress, ProgressSnapshot};
pub use ring::uring_available;
pub use worker::data_buffer;

/// The measured outcome of one run of a job.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub name: String,
    pub target: String,
    pub engine: Engine,
    pub threads: u32,
    pub iodepth: u32,
    pub rw: crate::spec::Rw,
    pub read_pct: u8,
    pub bs: String,
    /// Bytes skipped after each sequential request (`JobSpec::skip_bytes`).
    pub skip_bytes: i64,
    /// The requests a second the job was held to (`JobSpec::rate_iops`;
    /// 0: as many as it could).
    pub rate_iops: u64,
    pub region_offset_bytes: u64,
    pub region_bytes: u64,
    pub seed: u64,
    /// The data written: its pattern (`random`, `zeros`, `compress:PCT`)
    /// and its duplicates, if any.
    pub pattern: String,
    pub dedupe: Option<crate::Dedupe>,
    /// Measured time: from the end of the warm-up to the last completion.
    pub elapsed_s: f64,
    pub read: OpSummary,
    pub write: OpSummary,
    /// Discards (`--rw trim`, `randtrim`, `trimwrite`).
    pub trim: OpSummary,
    pub flushes: u64,
    pub cpu: CpuUsage,
    /// Requests and bytes completed in each second of the measured phase
    /// (the last second partial: see `elapsed_s`).
    pub per_second: Vec<SecondSample>,
    /// Each second's latencies: reads, writes, discards (log-linear
    /// buckets).
    pub per_second_latency: Vec<[LatBuckets; 3]>,
    /// Every request's latency, reads and writes (nanoseconds, full
    /// precision).
    pub latency: [Histogram<u64>; 2],
    /// Every discard's latency (nanoseconds).
    pub trim_latency: Histogram<u64>,
    /// The target's own counters over the whole run, warm-up included.
    pub device: StatsSnapshot,
    /// What validation saw, when the job validated.
    pub validation: Option<ValidationSummary>,
    /// Reads may have hit never-written blocks (holes left by `--layout
    /// never`): the read figures do not measure the medium. The engine
    /// cannot know; the caller that laid out (or not) sets it.
    pub reads_from_unwritten: bool,
    /// The disk model, when the target is a simulated disk: every time
    /// (elapsed, latencies, the seconds) is then virtual, modeled.
    pub modeled: Option<String>,
    /// The trace the job replayed, if it did.
    pub replay: Option<crate::replay::ReplaySummary>,
}

/// Runs `job` on `device` and measures it. `progress` is updated as
/// requests complete.
pub fn run_job(
    job: &JobSpec,
    device: Arc<dyn Device>,
    progress: &Progress,
) -> Result<JobResult, WorkloadError> {
    let region = job.region(device.size_bytes(), u64::from(device.sector_bytes()))?;
    if job.trims() && !device.discards() {
        return Err(WorkloadError::Spec(crate::spec::spec_error(
            "rw",
            format!(
                "the job discards (trims), and {} does not take discards; files, block devices, mem: and \
                 null: targets do (iolab's volumes and block log do not yet)",
                device.name()
            ),
        )));
    }
    let validator =
        job.validate.clone().map(|spec| Validator::new(job, spec, region, &device)).transpose()?;
    check_engine(job, device.as_ref(), validator.is_some())?;
    if let device::Clock::Virtual(clock) = &job.clock {
        // The set-up (the journal's creation on its simulated disk) took
        // its modeled time: the run starts now.
        clock.start_run();
    }
    let began = Began::now(device.as_ref());
    let start = began.start;
    let measure_start = start + job.ramp;
    let time = match &job.clock {
        device::Clock::Virtual(clock) if job.engine != Engine::Virtual => {
            TimeSource::Virtual { clock: Arc::clone(clock), start, at: clock.now() }
        }
        _ => TimeSource::Wall,
    };
    let limits = Limits {
        time,
        deadline: job.runtime.map(|r| measure_start + r),
        measure_start,
        stop: AtomicBool::new(false),
        latency: Default::default(),
        iolog_error: Default::default(),
    };
    progress.set_measuring(job.ramp.is_zero());
    let run = Run { job, device: device.as_ref(), region, limits: &limits, progress, began };
    let result = match device.virtual_disk().filter(|_| job.engine == Engine::Virtual) {
        Some(disk) => run.in_virtual_time(validator, disk),
        None => run.threads(validator),
    };
    // The workers are gone, their iologs closed: a failure to write one
    // fails the run (the trace would be short).
    match limits.iolog_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => result,
    }
}

/// Where a run's measurement began: the clock, the device's counters
/// and the process's CPU times.
struct Began {
    start: Instant,
    before: StatsSnapshot,
    cpu: (Duration, Duration),
}

impl Began {
    fn now(device: &dyn Device) -> Began {
        let before = device.stats().snapshot();
        let cpu = cpu_times();
        Began { start: Instant::now(), before, cpu }
    }
}

/// A job's run under way: what its engines share.
struct Run<'a> {
    job: &'a JobSpec,
    device: &'a dyn Device,
    region: Region,
    limits: &'a Limits,
    progress: &'a Progress,
    began: Began,
}

impl Run<'_> {
    /// The engine in a simulated disk's virtual time. Virtual time 0
    /// stands for the start: the warm-up and the deadline are instants
    /// after it, which the engine compares virtual instants with; the end
    /// is the last virtual completion.
    fn in_virtual_time(
        self,
        validator: Option<Validator>,
        disk: &dyn device::VirtualDisk,
    ) -> Result<JobResult, WorkloadError> {
        let (job, start) = (self.job, self.began.start);
        let workers = (0..job.threads)
            .map(|t| Worker::new(job, self.device, self.region, t, self.limits, self.progress))
            .collect();
        let (per_thread, last) = match &validator {
            Some(v) => vtime_validated::run(workers, v, disk, start, job.end_flush)?,
            None => vtime::run(workers, disk, start, job.end_flush)?,
        };
        self.progress.set_measuring(true);
        let end = start + Duration::from_nanos(last).max(job.ramp);
        let modeled =
            format!("{} (the engine in its virtual time: the same on any machine)", disk.describe());
        self.finish(per_thread, end, validator, Some(modeled))
    }

    /// The engine's threads (sync or io_uring), on the wall clock or in
    /// the virtual time of the simulated disks under the layers.
    fn threads(self, validator: Option<Validator>) -> Result<JobResult, WorkloadError> {
        let world = match &self.limits.time {
            TimeSource::Virtual { clock, .. } => Some(clock.start_world()),
            TimeSource::Wall => None,
        };
        let outcomes =
            run_workers(self.job, self.device, self.region, validator.as_ref(), self.limits, self.progress);
        let mut per_thread = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            per_thread.push(outcome?);
        }
        if self.job.end_flush {
            self.device.flush()?;
        }
        if let Some(v) = &validator {
            v.finish()?;
        }
        drop(world);
        let end = self.limits.time.now();
        let modeled = matches!(self.limits.time, TimeSource::Virtual { .. }).then(|| {
            format!(
                "the simulated disks under {}, {} thread(s) through its layers in one virtual time (interleaved \
                 as this machine ran them: runs may differ slightly)",
                self.device.name(),
                self.job.threads
            )
        });
        self.finish(per_thread, end, validator, modeled)
    }

    /// The run's figures once its workers ended at `end`, then the verify
    /// phase.
    fn finish(
        self,
        per_thread: Vec<ThreadStats>,
        end: Instant,
        validator: Option<Validator>,
        modeled: Option<String>,
    ) -> Result<JobResult, WorkloadError> {
        let mut result = self.merge(per_thread, end);
        result.validation =
            validator.map(|v| verify_phase(self.job, v, self.device, self.progress)).transpose()?;
        result.modeled = modeled;
        Ok(result)
    }
}

/// After the measured run: the verify phase, when the job asks for it
/// and was not stopped (Ctrl-C, or the error cap), then what validation
/// saw.
fn verify_phase(
    job: &JobSpec,
    v: Validator,
    device: &dyn Device,
    progress: &Progress,
) -> Result<crate::validate::ValidationSummary, WorkloadError> {
    let capped = v.summary().errors >= v.spec().max_errors;
    if v.spec().verify && !progress.stop_requested() && !capped {
        v.verify_written(device, progress.stop_flag())?;
    }
    debug_assert!(job.validate.is_some());
    Ok(v.summary())
}

/// Refuses an engine the target cannot run: io_uring needs a descriptor;
/// a simulated disk runs in virtual time only, and its engine only there.
fn check_engine(job: &JobSpec, device: &dyn Device, validating: bool) -> Result<(), WorkloadError> {
    let refuse = |message: String| Err(SpecError { flag: "engine", message }.into());
    let name = device.name();
    match (job.engine, device.virtual_disk().is_some()) {
        (Engine::Uring, false) if device.raw_fd().is_none() => {
            refuse(format!("uring needs a file or block device; {name} is neither (use --engine sync)"))
        }
        (Engine::Virtual, false) => {
            refuse(format!("virtual time needs a simulated disk (sim:hdd, sim:ssd); {name} is not one (use --engine auto)"))
        }
        (Engine::Sync, true) if matches!(job.clock, device::Clock::Virtual(_)) => Ok(()),
        (Engine::Sync | Engine::Uring, true) => refuse(format!(
            "{name} is a simulated disk: its requests take modeled time, which only the virtual engine measures (use --engine auto or virtual)"
        )),
        (Engine::Virtual, true) if validating && job.iodepth > 1 => refuse(format!(
            "validation in virtual time on {name} runs each thread one request at a time, as the sync engine \
             does: give --iodepth 1 and as many --threads as requests in flight"
        )),
        _ => Ok(()),
    }
}

/// Runs `job`'s worker threads on the engine it names (and, under a
/// group-commit journal, its committer thread) to their end.
fn run_workers(
    job: &JobSpec,
    device: &dyn Device,
    region: Region,
    validator: Option<&Validator>,
    limits: &Limits,
    progress: &Progress,
) -> Vec<Result<ThreadStats, WorkloadError>> {
    std::thread::scope(|scope| {
        // A group-commit journal commits on its own thread when workers
        // kick it, so that no worker stalls for a commit it can see coming
        // (unless uring workers commit it through their rings).
        let journal = validator.and_then(|v| v.committer_journal());
        // In virtual time every thread of the job takes part in the world,
        // so that the clock waits for it.
        let participate = || match &limits.time {
            TimeSource::Virtual { clock, .. } => Some(clock.participate()),
            TimeSource::Wall => None,
        };
        if let TimeSource::Virtual { clock, .. } = &limits.time {
            clock.expect_participants(job.threads as usize + usize::from(journal.is_some()));
        }
        let committer = journal.map(|j| {
            scope.spawn(move || {
                let _in_world = participate();
                j.run_committer()
            })
        });
        let handles: Vec<_> = (0..job.threads)
            .map(|t| {
                let mut worker = Worker::new(job, device, region, t, limits, progress);
                worker.validator = validator;
                scope.spawn(move || {
                    let _in_world = participate();
                    let result = match (job.engine, worker.validator) {
                        (Engine::Sync, _) => sync::run(worker),
                        (Engine::Uring, None) => uring::run(worker),
                        (Engine::Uring, Some(v)) => uring_validated::run(worker, v),
                        // Invariant: run_job runs virtual jobs on vtime.
                        (Engine::Virtual, _) => unreachable!("a virtual job on a worker thread"),
                    };
                    if result.is_err() {
                        limits.stop.store(true, Relaxed);
                    }
                    result
                })
            })
            .collect();
        if !job.ramp.is_zero() && matches!(limits.time, TimeSource::Wall) {
            watch_ramp(limits, progress, &handles);
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
    })
}

/// Marks the end of the warm-up in the progress, for the display.
fn watch_ramp<T>(limits: &Limits, progress: &Progress, handles: &[std::thread::ScopedJoinHandle<'_, T>]) {
    while Instant::now() < limits.measure_start && !handles.iter().all(|h| h.is_finished()) {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    progress.set_measuring(true);
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Every thread's counts added up: requests, bytes, latencies and the
/// per-second series.
struct Totals {
    read_hist: Histogram<u64>,
    write_hist: Histogram<u64>,
    trim_hist: Histogram<u64>,
    read: (u64, u64),
    write: (u64, u64),
    trim: (u64, u64),
    flushes: u64,
    series: Vec<SecondSample>,
}

impl Totals {
    fn of(per_thread: &mut [ThreadStats]) -> Totals {
        let mut t = Totals {
            read_hist: stats::new_histogram(),
            write_hist: stats::new_histogram(),
            trim_hist: stats::new_histogram(),
            read: (0, 0),
            write: (0, 0),
            trim: (0, 0),
            flushes: 0,
            series: Vec::new(),
        };
        for thread in per_thread.iter_mut() {
            thread.hand_over();
        }
        for thread in per_thread.iter() {
            // Invariant: every histogram has the same bounds, so adding cannot fail.
            t.read_hist.add(&thread.read.hist).expect("same histogram bounds");
            t.write_hist.add(&thread.write.hist).expect("same histogram bounds");
            t.trim_hist.add(&thread.trim.hist).expect("same histogram bounds");
            t.trim = (t.trim.0 + thread.trim.ios, t.trim.1 + thread.trim.bytes);
            t.read = (t.read.0 + thread.read.ios, t.read.1 + thread.read.bytes);
            t.write = (t.write.0 + thread.write.ios, t.write.1 + thread.write.bytes);
            t.flushes += thread.flushes;
            if t.series.len() < thread.series.len() {
                t.series.resize(thread.series.len(), SecondSample::default());
            }
            for (total, s) in t.series.iter_mut().zip(&thread.series) {
                total.read_ios += s.read_ios;
                total.write_ios += s.write_ios;
                total.read_bytes += s.read_bytes;
                total.write_bytes += s.write_bytes;
                total.trim_ios += s.trim_ios;
                total.trim_bytes += s.trim_bytes;
            }
        }
        t
    }
}

impl Run<'_> {
    /// The run's figures from its threads' counts, the run having ended
    /// (its last completion) at `end`.
    fn merge(&self, mut per_thread: Vec<ThreadStats>, end: Instant) -> JobResult {
        let (job, device, region) = (self.job, self.device, self.region);
        let (user, system) = cpu_times();
        let (user, system) = (user - self.began.cpu.0, system - self.began.cpu.1);
        let wall = Instant::now() - self.began.start;
        let t = Totals::of(&mut per_thread);
        let lat_series: Vec<[LatBuckets; 3]> =
            std::mem::take(&mut *self.limits.latency.lock().unwrap_or_else(|e| e.into_inner()));
        let elapsed = end.saturating_duration_since(self.limits.measure_start);
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
            skip_bytes: job.skip_bytes,
            rate_iops: job.rate_iops,
            region_offset_bytes: region.start,
            region_bytes: region.len,
            seed: job.seed,
            pattern: job.pattern.to_string(),
            dedupe: job.dedupe,
            elapsed_s: elapsed.as_secs_f64(),
            read: stats::summarize(t.read.0, t.read.1, &t.read_hist, elapsed),
            write: stats::summarize(t.write.0, t.write.1, &t.write_hist, elapsed),
            trim: stats::summarize(t.trim.0, t.trim.1, &t.trim_hist, elapsed),
            flushes: t.flushes,
            cpu: CpuUsage {
                user_s: user.as_secs_f64(),
                system_s: system.as_secs_f64(),
                pct: 100.0 * cpu_secs / wall.as_secs_f64().max(1e-9),
            },
            per_second: t.series,
            per_second_latency: lat_series,
            latency: [t.read_hist, t.write_hist],
            trim_latency: t.trim_hist,
            device: device.stats().snapshot().since(&self.began.before),
            validation: None,
            reads_from_unwritten: false,
            modeled: None,
            replay: job.replay.as_ref().map(crate::replay::ReplaySummary::of),
        }
    }
}
