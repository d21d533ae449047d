//! A worker thread's state, whatever the engine: its request stream, its
//! quotas and rate, its measurements, and the data its writes carry.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use device::{AlignedBuf, Device};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::progress::Progress;
use crate::gen::{IoKind, Request, RequestGen};
use crate::replay::IologWriter;
use crate::spec::{JobSpec, Pattern, Region};
use crate::stats::ThreadStats;
use crate::validate::Validator;
use crate::WorkloadError;

/// When a worker stops, shared by every worker of a job.
pub(crate) struct Limits {
    /// What "now" is: the wall clock, or the simulated disks' virtual
    /// time counted from `start` (its reading then being `virtual_start`).
    pub time: TimeSource,
    pub deadline: Option<Instant>,
    pub measure_start: Instant,
    pub stop: AtomicBool,
    /// The run's per-second latencies, which the threads fill.
    pub latency: std::sync::Arc<crate::stats::LatSeries>,
    /// The first failure to write an iolog (`--write-iolog`): the run
    /// stops and fails with it.
    pub iolog_error: std::sync::Mutex<Option<WorkloadError>>,
}

impl Limits {
    /// Keeps the first iolog failure and stops every worker.
    fn iolog_failed(&self, path: &std::path::Path, e: std::io::Error) {
        let mut slot = self.iolog_error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(WorkloadError::Iolog { path: path.display().to_string(), message: e.to_string() });
        self.stop.store(true, Relaxed);
    }
}

/// Where a job reads the time.
#[derive(Clone)]
pub(crate) enum TimeSource {
    Wall,
    /// Virtual time: instant `start` stands for the clock's `at`.
    Virtual {
        clock: std::sync::Arc<device::VirtualClock>,
        start: Instant,
        at: device::Nanos,
    },
}

impl TimeSource {
    pub fn now(&self) -> Instant {
        match self {
            TimeSource::Wall => Instant::now(),
            TimeSource::Virtual { clock, start, at } => {
                *start + Duration::from_nanos(clock.now().saturating_sub(*at))
            }
        }
    }

    /// Waits `wait`: sleeps, or waits for the virtual clock to pass it.
    pub fn sleep(&self, wait: Duration) -> Result<(), device::DeviceError> {
        match self {
            TimeSource::Wall => {
                std::thread::sleep(wait);
                Ok(())
            }
            TimeSource::Virtual { clock, .. } => clock.sleep_until(clock.now() + wait.as_nanos() as u64),
        }
    }

    /// Lets another thread run before trying again: a yield, or in virtual
    /// time a short sleep in the kernel (a thread spinning would keep the
    /// virtual clock from moving).
    pub fn pause(&self) {
        match self {
            TimeSource::Wall => std::thread::yield_now(),
            TimeSource::Virtual { .. } => std::thread::sleep(Duration::from_micros(10)),
        }
    }
}

/// Per-thread state every engine uses: the request stream, quotas, the
/// measurements and the live counters.
pub(crate) struct Worker<'a> {
    pub job: &'a JobSpec,
    pub validator: Option<&'a Validator>,
    pub device: &'a dyn Device,
    pub gen: RequestGen,
    pub ios_left: u64,
    pub bytes_left: u64,
    pub limits: &'a Limits,
    pub progress: &'a Progress,
    pub stats: ThreadStats,
    pub measuring: bool,
    /// This thread's index, and the writes it has made its own
    /// ([`Worker::scramble`]).
    thread: u32,
    scrambled: u64,
    /// Under `--dedupe-ratio`: the shared units copies are of, made at
    /// the first write.
    dedupe_units: Option<Vec<u8>>,
    /// Under `--dedupe-ratio`: the units this thread has written.
    dedupe_count: u64,
    pub writes_since_flush: u64,
    rate_interval: Option<Duration>,
    next_issue: Instant,
    /// A trace being replayed instead of `gen`'s requests.
    replay: Option<Replaying<'a>>,
    /// Where this thread's requests are written (`--write-iolog`).
    iolog: Option<OpenIolog<'a>>,
}

/// Where a replay is: the trace's next request, and when its clock started.
struct Replaying<'a> {
    ios: &'a [crate::replay::TracedIo],
    next: usize,
    start: Instant,
    speed: Option<f64>,
}

impl Replaying<'_> {
    /// When the next request is due, if the trace times it and the replay
    /// keeps its times.
    fn due(&self) -> Option<Instant> {
        let at = self.ios.get(self.next)?.at?;
        Some(self.start + at.div_f64(self.speed?))
    }
}

impl<'a> Worker<'a> {
    /// Worker `thread` of `job`'s threads: its share of the quotas, its
    /// own request stream, no validator yet.
    pub fn new(
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
        // Without any end condition a job moves the region's size once, as
        // fio; a replay ends with its trace.
        let no_limit =
            job.runtime.is_none() && job.ios.is_none() && job.io_bytes.is_none() && job.replay.is_none();
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
            stats: ThreadStats::new(limits.measure_start, std::sync::Arc::clone(&limits.latency)),
            measuring: false,
            thread,
            scrambled: 0,
            dedupe_units: None,
            dedupe_count: 0,
            writes_since_flush: 0,
            rate_interval,
            next_issue: limits.time.now(),
            replay: job.replay.as_ref().map(|r| Replaying {
                ios: &r.trace.ios,
                next: 0,
                start: limits.time.now(),
                speed: r.speed,
            }),
            iolog: job.write_iolog.as_deref().and_then(|path| {
                let path = crate::replay::thread_iolog_path(path, thread, job.threads);
                match IologWriter::create(&path, device.name(), limits.time.now()) {
                    Ok(writer) => Some(OpenIolog { path, writer: Some(writer), limits }),
                    Err(e) => {
                        limits.iolog_failed(&path, e);
                        None
                    }
                }
            }),
        }
    }

    /// Counts a flush just made, and writes it to the iolog.
    pub fn flushed(&mut self) {
        self.stats.flushes += 1;
        let now = self.now();
        if let Some(log) = &mut self.iolog {
            log.sync(now);
        }
    }

    /// Makes a write's data its own before it goes out, as fio's
    /// scramble_buffers does: a thread writes the same buffer over and
    /// over, which a deduplicating device would store once. The first 16
    /// bytes of every 512-byte sector (random data) or of every 4 KiB's
    /// random part (`compress:PCT`, whose zeros stay zeros) get the byte
    /// offset they land at and a count of this thread's writes, so no two
    /// sectors a run writes hold the same bytes. Zeros stay zeros.
    pub fn scramble(&mut self, buf: &mut [u8], req: &Request) {
        if let Some(dedupe) = self.job.dedupe {
            self.scrambled += 1;
            return self.scramble_deduped(buf, req, dedupe);
        }
        let (every, room) = match self.job.pattern {
            Pattern::Zeros | Pattern::Compressible { pct: 0 } => return,
            Pattern::Random => (512, 16),
            Pattern::Compressible { pct } => (4096, (4096 * usize::from(pct) / 100).min(16)),
        };
        self.scrambled += 1;
        let tag = (u64::from(self.thread) << 48) ^ self.scrambled;
        for (i, chunk) in buf.chunks_mut(every).enumerate() {
            let offset = req.offset + (i * every) as u64;
            let mut stamp = [0u8; 16];
            stamp[..8].copy_from_slice(&offset.to_le_bytes());
            stamp[8..].copy_from_slice(&tag.to_le_bytes());
            let n = room.min(chunk.len());
            chunk[..n].copy_from_slice(&stamp[..n]);
        }
    }

    /// [`Worker::scramble`] under `--dedupe-ratio`: of the units this
    /// thread writes, exactly one in `ratio` is its own (stamped as
    /// `scramble` stamps), the others each a copy of one of the job's
    /// shared units (the same in every thread), which by a hash of where
    /// it lands and this write's count.
    fn scramble_deduped(&mut self, buf: &mut [u8], req: &Request, dedupe: crate::Dedupe) {
        let tag = (u64::from(self.thread) << 48) ^ self.scrambled;
        let unit = dedupe.unit_bytes;
        let (every, room) = match self.job.pattern {
            Pattern::Compressible { pct } => (4096, (4096 * usize::from(pct) / 100).clamp(1, 16)),
            _ => (512, 16),
        };
        let shared = self.dedupe_units.get_or_insert_with(|| dedupe_units(self.job, unit));
        for (i, chunk) in buf.chunks_mut(unit).enumerate() {
            let offset = req.offset + (i * unit) as u64;
            // Of this thread's units, exactly one in `ratio` is its own:
            // the one where n / ratio passes a whole number.
            let n = self.dedupe_count as f64;
            self.dedupe_count += 1;
            if ((n + 1.0) / dedupe.ratio).floor() == (n / dedupe.ratio).floor() {
                let k = (mix(offset ^ tag.rotate_left(29) ^ self.job.seed) % crate::spec::DEDUPE_SETS as u64)
                    as usize;
                chunk.copy_from_slice(&shared[k * unit..k * unit + chunk.len()]);
                continue;
            }
            for (j, sector) in chunk.chunks_mut(every).enumerate() {
                let mut stamp = [0u8; 16];
                stamp[..8].copy_from_slice(&(offset + (j * every) as u64).to_le_bytes());
                stamp[8..].copy_from_slice(&tag.to_le_bytes());
                let n = room.min(sector.len());
                sector[..n].copy_from_slice(&stamp[..n]);
            }
        }
    }

    /// Whether the worker replays a trace.
    pub fn replaying(&self) -> bool {
        self.replay.is_some()
    }

    /// The job's time now (see [`TimeSource`]).
    pub fn now(&self) -> Instant {
        self.limits.time.now()
    }

    /// True when this worker must not issue another request.
    pub fn finished(&self, now: Instant) -> bool {
        self.ios_left == 0
            || self.bytes_left == 0
            || self.replay.as_ref().is_some_and(|r| r.next == r.ios.len())
            || self.limits.stop.load(Relaxed)
            || self.progress.stop_requested()
            || self.limits.deadline.is_some_and(|d| now >= d)
    }

    /// Counts a completion; `measured` requests (issued after the
    /// warm-up) go into the statistics.
    pub fn complete(&mut self, kind: IoKind, bytes: u64, latency: Duration, now: Instant, measured: bool) {
        self.progress.count(bytes);
        if measured {
            if !self.measuring {
                self.measuring = true;
                self.stats =
                    ThreadStats::new(self.limits.measure_start, std::sync::Arc::clone(&self.limits.latency));
            }
            self.stats.record(kind, bytes, latency, now);
        }
    }

    /// Takes the next request, and whether it is measured (issued after
    /// the warm-up, and then charged to the quotas); `None` when the worker
    /// is finished.
    pub fn next_request(&mut self, now: Instant) -> Option<(Request, bool)> {
        if self.finished(now) {
            return None;
        }
        let req = match &mut self.replay {
            Some(r) => {
                let io = r.ios[r.next];
                r.next += 1;
                Request {
                    kind: io.kind,
                    offset: self.gen.region_start() + io.offset,
                    len: io.len,
                    flush_after: io.flush_after,
                }
            }
            None => self.gen.next_request(),
        };
        if let Some(log) = &mut self.iolog {
            log.request(now, &req);
        }
        let measured = now >= self.limits.measure_start;
        if measured {
            self.ios_left = self.ios_left.saturating_sub(1);
            self.bytes_left = self.bytes_left.saturating_sub(req.len.min(self.bytes_left));
        }
        if let Some(interval) = self.rate_interval {
            // Lag of up to RATE_SLACK (or one interval, when longer) is
            // made up, as fio and Vdbench make theirs up (their rate is
            // the run's average): a sleep overshoots its few microseconds
            // by tens, so at tens of thousands a second a thread would
            // fall far short of its rate. A longer stall (a device's) is
            // not followed by a burst of more than a second's requests.
            let slack = interval.max(RATE_SLACK);
            self.next_issue = self.next_issue.max(now.checked_sub(slack).unwrap_or(now)) + interval;
        }
        Some((req, measured))
    }

    /// When rate-limited, how long to wait before the next request.
    pub fn rate_wait(&self, now: Instant) -> Option<Duration> {
        if let Some(r) = &self.replay {
            return r.due().filter(|due| *due > now).map(|due| due - now);
        }
        self.rate_interval?;
        (self.next_issue > now).then(|| self.next_issue - now)
    }

    /// Whether a flush is due after `req` completed: the trace's sync
    /// when replaying, else every --flush-every writes.
    pub fn flush_due(&mut self, req: Request) -> bool {
        if self.replay.is_some() {
            return req.flush_after;
        }
        if req.kind != IoKind::Write || self.job.flush_every == 0 {
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

/// A thread's iolog being written: a failure is kept in the job's
/// limits (stopping the run) and ends the log; dropping it writes the
/// last line and syncs the file.
struct OpenIolog<'a> {
    path: std::path::PathBuf,
    writer: Option<IologWriter>,
    limits: &'a Limits,
}

impl OpenIolog<'_> {
    fn done(&mut self, written: std::io::Result<()>) {
        if let Err(e) = written {
            self.limits.iolog_failed(&self.path, e);
            self.writer = None;
        }
    }

    fn request(&mut self, now: Instant, req: &Request) {
        if let Some(w) = &mut self.writer {
            let written = w.request(now, req.kind, req.offset, req.len);
            self.done(written);
        }
    }

    fn sync(&mut self, now: Instant) {
        if let Some(w) = &mut self.writer {
            let written = w.sync(now);
            self.done(written);
        }
    }
}

impl Drop for OpenIolog<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.writer.take() {
            if let Err(e) = w.finish(self.limits.time.now()) {
                self.limits.iolog_failed(&self.path, e);
            }
        }
    }
}

/// The lag behind its rate a rate-limited thread makes up at most.
const RATE_SLACK: Duration = Duration::from_secs(1);

/// The units a deduplicated job's copies are of: [`crate::spec::DEDUPE_SETS`]
/// units of its pattern, from its seed (so every thread has the same).
fn dedupe_units(job: &crate::JobSpec, unit: usize) -> Vec<u8> {
    let pattern = match job.pattern {
        Pattern::Zeros => Pattern::Random,
        other => other,
    };
    data_buffer(unit * crate::spec::DEDUPE_SETS, 1, pattern, job.seed ^ 0xd3d0_9e5e_75ab_1e55).to_vec()
}

/// A 64-bit mix (splitmix64's finaliser): where a unit lands, hashed.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
