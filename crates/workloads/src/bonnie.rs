//! The bonnie phases on a device: sequential output per character (one
//! byte at a time into a user-space buffer, as stdio's putc does), per
//! block, rewrite; sequential input per character and per block; random
//! seeks (concurrent seekers, each reading a chunk, 10% of them dirtied and
//! written back). Phase logic only: the caller prints.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use device::{AlignedBuf, Device};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::spec::{spec_error, SpecError};
use crate::stats::PhaseMeter;
use crate::WorkloadError;

/// A phase shorter than this is reported as `+++` (too short to measure).
pub const PHASE_SECONDS_MIN: f64 = 0.5;

/// The six phases, in bonnie's order.
pub const PHASES: [&str; 6] = ["putc", "put_block", "rewrite", "getc", "get_block", "seeks"];

#[derive(Clone, Copy, Debug)]
pub struct BonnieSpec {
    /// Bytes of the target used (bonnie's file size).
    pub size_bytes: u64,
    /// Transfer size of the block phases and of a seek (bonnie: 8 KiB).
    pub chunk_bytes: u64,
    /// Seeks in all (bonnie: 8192).
    pub seeks: u64,
    /// Concurrent seekers (bonnie 1.03: 3).
    pub seekers: u32,
    pub seed: u64,
}

impl Default for BonnieSpec {
    fn default() -> BonnieSpec {
        BonnieSpec { size_bytes: 0, chunk_bytes: 8192, seeks: 8192, seekers: 3, seed: 1 }
    }
}

/// One phase's measurement.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    pub name: &'static str,
    /// Bytes moved (for seeks: seeks done).
    pub amount: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    /// KiB/s, or seeks/s for the seek phase.
    pub rate: f64,
    pub cpu_pct: f64,
    /// Shorter than [`PHASE_SECONDS_MIN`]: bonnie prints `+++`.
    pub too_short: bool,
    /// Longest single request of the phase, in microseconds.
    pub latency_max_us: f64,
    /// Requests the phase sent to the device.
    pub device_reads: u64,
    pub device_writes: u64,
}

#[derive(Clone, Debug)]
pub struct BonnieResult {
    pub target: String,
    pub spec: BonnieSpec,
    /// The six block phases; none when only the file tests ran (bonnie++
    /// `-s 0`).
    pub phases: Vec<PhaseResult>,
    /// bonnie++'s file tests (`-n`), where they ran (on a directory).
    pub files: Option<crate::tree::FileTests>,
}

impl BonnieSpec {
    pub fn check(&self, dev: &dyn Device) -> Result<(), SpecError> {
        let sector = u64::from(dev.sector_bytes());
        if self.chunk_bytes == 0 || self.chunk_bytes % sector != 0 {
            return Err(spec_error(
                "chunk",
                format!("{} is not a positive multiple of the {sector}-byte sector", self.chunk_bytes),
            ));
        }
        if self.size_bytes < self.chunk_bytes * 2 || self.size_bytes % self.chunk_bytes != 0 {
            return Err(spec_error(
                "size",
                format!(
                    "{} must be a multiple of the chunk ({}) and hold at least two",
                    self.size_bytes, self.chunk_bytes
                ),
            ));
        }
        if self.size_bytes > dev.size_bytes() {
            return Err(spec_error(
                "size",
                format!("{} is larger than the target ({} bytes)", self.size_bytes, dev.size_bytes()),
            ));
        }
        if self.seekers == 0 || self.seeks == 0 {
            return Err(spec_error("seekers", "seekers and seeks must be at least 1"));
        }
        Ok(())
    }
}

/// A phase's times and the requests it sent to the device.
struct Meter {
    times: PhaseMeter,
    reads: u64,
    writes: u64,
}

impl Meter {
    fn start(dev: &dyn Device) -> Meter {
        let stats = dev.stats().snapshot();
        Meter { times: PhaseMeter::start(), reads: stats.reads, writes: stats.writes }
    }

    fn timed<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.times.timed(f)
    }

    fn finish(self, dev: &dyn Device, name: &'static str, amount: u64, per_kib: bool) -> PhaseResult {
        let t = self.times.finish();
        let stats = dev.stats().snapshot();
        let rate = if per_kib { amount as f64 / 1024.0 / t.elapsed_s } else { amount as f64 / t.elapsed_s };
        PhaseResult {
            name,
            amount,
            elapsed_s: t.elapsed_s,
            cpu_s: t.cpu_s,
            rate,
            cpu_pct: 100.0 * t.cpu_s / t.elapsed_s,
            too_short: t.elapsed_s < PHASE_SECONDS_MIN,
            latency_max_us: t.latency_max_us,
            device_reads: stats.reads - self.reads,
            device_writes: stats.writes - self.writes,
        }
    }
}

/// stdio's putc: one byte into the buffer, a write when it is full. Not
/// inlined, so the per-character cost is a call per byte, as in C.
#[inline(never)]
fn put_char(buf: &mut [u8], pos: &mut usize, byte: u8) -> bool {
    buf[*pos] = byte;
    *pos += 1;
    *pos == buf.len()
}

#[inline(never)]
fn get_char(buf: &[u8], pos: &mut usize) -> u8 {
    let b = buf[*pos];
    *pos += 1;
    b
}

/// Runs the six phases on the first `spec.size_bytes` of `dev`.
pub fn run_bonnie(dev: &dyn Device, spec: &BonnieSpec) -> Result<BonnieResult, WorkloadError> {
    run_bonnie_telling(dev, spec, &|_, _, _| {})
}

/// How often a phase tells how far it got: every this many chunks.
const TELL_EVERY: u64 = 256;

/// [`run_bonnie`], telling `tell(k, done, total)` where it is: phase `k`
/// of [`PHASES`] as it begins (`done` 0), then every [`TELL_EVERY`] chunks
/// of the five phases that go through the file (`done` of `total`
/// chunks; the seeks are told only as they begin), for a caller's
/// progress line.
pub fn run_bonnie_telling(
    dev: &dyn Device,
    spec: &BonnieSpec,
    tell: &dyn Fn(usize, u64, u64),
) -> Result<BonnieResult, WorkloadError> {
    spec.check(dev)?;
    let chunk = spec.chunk_bytes as usize;
    let chunks = spec.size_bytes / spec.chunk_bytes;
    let align = dev.buffer_align().max(4096);
    let mut buf = AlignedBuf::zeroed(chunk, align);
    let mut phases = Vec::with_capacity(6);

    let through = |k: usize, c: u64| (c % TELL_EVERY == 0).then(|| tell(k, c, chunks));
    let mut m = Meter::start(dev);
    let (mut pos, mut offset) = (0usize, 0u64);
    through(0, 0);
    for i in 0..spec.size_bytes {
        if put_char(&mut buf, &mut pos, black_box((i & 0x7f) as u8)) {
            m.timed(|| dev.write_at(&buf, offset))?;
            offset += spec.chunk_bytes;
            pos = 0;
            through(0, offset / spec.chunk_bytes);
        }
    }
    phases.push(m.finish(dev, "putc", spec.size_bytes, true));

    let mut m = Meter::start(dev);
    for c in 0..chunks {
        through(1, c);
        buf[0] = c as u8;
        m.timed(|| dev.write_at(&buf, c * spec.chunk_bytes))?;
    }
    phases.push(m.finish(dev, "put_block", spec.size_bytes, true));

    let mut m = Meter::start(dev);
    for c in 0..chunks {
        through(2, c);
        let at = c * spec.chunk_bytes;
        m.timed(|| dev.read_at(&mut buf, at))?;
        buf[0] = buf[0].wrapping_add(1);
        m.timed(|| dev.write_at(&buf, at))?;
    }
    phases.push(m.finish(dev, "rewrite", spec.size_bytes, true));

    let mut m = Meter::start(dev);
    let mut sum = 0u64;
    for c in 0..chunks {
        through(3, c);
        m.timed(|| dev.read_at(&mut buf, c * spec.chunk_bytes))?;
        let mut pos = 0;
        while pos < chunk {
            sum = sum.wrapping_add(u64::from(get_char(&buf, &mut pos)));
        }
    }
    black_box(sum);
    phases.push(m.finish(dev, "getc", spec.size_bytes, true));

    let mut m = Meter::start(dev);
    for c in 0..chunks {
        through(4, c);
        m.timed(|| dev.read_at(&mut buf, c * spec.chunk_bytes))?;
    }
    phases.push(m.finish(dev, "get_block", spec.size_bytes, true));

    tell(5, 0, spec.seeks);
    phases.push(seeks(dev, spec, chunks, align)?);
    Ok(BonnieResult { target: dev.name().to_string(), spec: *spec, phases, files: None })
}

/// `spec.seekers` threads share `spec.seeks` random chunk reads; one in ten
/// is dirtied and written back.
fn seeks(
    dev: &dyn Device,
    spec: &BonnieSpec,
    chunks: u64,
    align: usize,
) -> Result<PhaseResult, WorkloadError> {
    let m = Meter::start(dev);
    let latency_max_ns = AtomicU64::new(0);
    let results: Vec<Result<(), WorkloadError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..spec.seekers)
            .map(|t| {
                let share = spec.seeks / u64::from(spec.seekers)
                    + u64::from(u64::from(t) < spec.seeks % u64::from(spec.seekers));
                let latency_max_ns = &latency_max_ns;
                scope.spawn(move || -> Result<(), WorkloadError> {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                        spec.seed ^ u64::from(t).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    );
                    let mut buf = AlignedBuf::zeroed(spec.chunk_bytes as usize, align);
                    for _ in 0..share {
                        let at = rng.random_range(0..chunks) * spec.chunk_bytes;
                        let t0 = Instant::now();
                        dev.read_at(&mut buf, at)?;
                        if rng.random_range(0..10) == 0 {
                            buf[0] = buf[0].wrapping_add(1);
                            dev.write_at(&buf, at)?;
                        }
                        latency_max_ns.fetch_max(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(WorkloadError::Panic("seeker".into()))))
            .collect()
    });
    for r in results {
        r?;
    }
    let mut phase = m.finish(dev, "seeks", spec.seeks, false);
    phase.latency_max_us = latency_max_ns.load(Ordering::Relaxed) as f64 / 1000.0;
    Ok(phase)
}
