//! The engine in virtual time, for simulated disks (`device::VirtualDisk`):
//! every worker's `iodepth` requests are in the model at once, submitted
//! and completed at virtual instants, and all the workers run on the
//! calling thread as a discrete-event simulation. Nothing sleeps or reads a
//! clock: a job's runtime, warm-up, rate and every latency are virtual, so
//! the same job gives the same figures on any machine, byte for byte.
//!
//! Like the ring engines it submits around the checked front, so it does
//! the front's work itself: every request passes `device::check_request`
//! and is counted in `Device::stats` when it completes.

use std::time::{Duration, Instant};

use device::{check_request, AlignedBuf, Nanos, Op, VData, VirtualDisk};
use rustc_hash::FxHashMap;

use super::ring::op_of;
use super::worker::{data_buffer, Worker};
use crate::error::WorkloadError;
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;

/// What a request in the model is for.
#[derive(Clone, Copy)]
enum InFlight {
    Io { worker: usize, req: Request, issued: Nanos, measured: bool },
    Flush { worker: usize },
}

/// One worker's place in the simulation.
struct Lane<'a> {
    w: Worker<'a>,
    write_buf: AlignedBuf,
    in_flight: usize,
    /// A flush is due: no new requests until those in flight complete and
    /// the flush does.
    flushing: bool,
    flush_sent: bool,
    /// Rate-limited: the instant the next request may go.
    wake: Option<Nanos>,
    done: bool,
}

/// Runs every worker to its end on `disk`; their statistics and the
/// virtual time from the start to the last completion (after the end
/// flush, when the job has one). `epoch` is the real instant virtual time 0 stands for:
/// the workers' deadlines and warm-up are instants after it.
///
/// Long on purpose: the event loop (fill the lanes, advance the model to
/// the next event, complete, send the flushes due) keeps its state in
/// locals the steps share; the steps themselves are functions.
pub(super) fn run(
    workers: Vec<Worker<'_>>,
    disk: &dyn VirtualDisk,
    epoch: Instant,
    end_flush: bool,
) -> Result<(Vec<ThreadStats>, Nanos), WorkloadError> {
    // The disk may have run before (an earlier repeat, a layout): this run
    // starts at its time `t0`, which `epoch` stands for.
    let t0 = disk.now();
    let at = |t: Nanos| epoch + Duration::from_nanos(t - t0);
    let mut lanes: Vec<Lane<'_>> = workers
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            let max = w.job.bs.max_bytes() as usize;
            let align = w.device.buffer_align().max(4096);
            let write_buf = data_buffer(max, align, w.job.pattern, w.job.seed ^ i as u64);
            Lane { w, write_buf, in_flight: 0, flushing: false, flush_sent: false, wake: None, done: false }
        })
        .collect();
    let Some(first) = lanes.first() else { return Ok((Vec::new(), 0)) };
    let device = first.w.device;
    let depth = first.w.job.iodepth.max(1) as usize;
    let mut read_buf = AlignedBuf::zeroed(first.w.job.bs.max_bytes() as usize, 4096);
    let mut flight: FxHashMap<u64, InFlight> = FxHashMap::default();
    let mut now: Nanos = t0;
    let mut last: Nanos = t0;
    loop {
        for (i, lane) in lanes.iter_mut().enumerate() {
            fill(i, lane, disk, depth, now, at(now), &mut read_buf, &mut flight)?;
        }
        let wake = lanes.iter().filter_map(|l| l.wake).min();
        if flight.is_empty() && wake.is_none() {
            break;
        }
        let next = match (disk.next_event(), wake) {
            (Some(e), Some(w)) => e.min(w),
            (Some(e), None) => e,
            (None, Some(w)) => w,
            (None, None) => {
                return Err(device::DeviceError::Invalid(format!(
                    "{}: the disk model stopped with {} requests in flight",
                    disk.describe(),
                    flight.len()
                ))
                .into())
            }
        };
        now = now.max(next);
        for (id, done) in disk.advance(now) {
            // Invariant: every id the model completes was submitted here.
            let Some(what) = flight.remove(&id) else { continue };
            last = last.max(done);
            completed(&mut lanes, device, what, done, at(done));
        }
        for lane in lanes.iter_mut().filter(|l| l.wake.is_some_and(|w| w <= now)) {
            lane.wake = None;
        }
        for (i, lane) in lanes.iter_mut().enumerate() {
            if lane.flushing && !lane.flush_sent && lane.in_flight == 0 {
                check_request(device, Op::Flush, 0, 0, 0)?;
                let id = disk.submit(now, 0, VData::Flush)?;
                flight.insert(id, InFlight::Flush { worker: i });
                lane.flush_sent = true;
            }
        }
    }
    if end_flush {
        check_request(device, Op::Flush, 0, 0, 0)?;
        let id = disk.submit(now, 0, VData::Flush)?;
        last = last.max(run_until(disk, id, now)?);
        device.stats().record_flush();
    }
    Ok((lanes.into_iter().map(|l| l.w.stats).collect(), last - t0))
}

/// A request the model completed at virtual time `done` (the real
/// instant `done_at` stands for): counted on the device and its worker;
/// a flush the worker owes falls due.
fn completed(
    lanes: &mut [Lane<'_>],
    device: &dyn device::Device,
    what: InFlight,
    done: Nanos,
    done_at: Instant,
) {
    match what {
        InFlight::Io { worker, req, issued, measured } => {
            let lane = &mut lanes[worker];
            lane.in_flight -= 1;
            match req.kind {
                // JobSpec::check keeps trims from validated runs and simulated disks.
                IoKind::Read | IoKind::Trim => device.stats().record_reads(1, req.len),
                IoKind::Write => device.stats().record_writes(1, req.len),
            }
            lane.w.complete(req.kind, req.len, Duration::from_nanos(done - issued), done_at, measured);
            if lane.w.flush_due(req) {
                lane.flushing = true;
            }
        }
        InFlight::Flush { worker } => {
            let lane = &mut lanes[worker];
            device.stats().record_flush();
            lane.w.flushed();
            (lane.flushing, lane.flush_sent) = (false, false);
        }
    }
}

/// Submits a lane's requests at `now` until its depth is full, a flush is
/// due, its rate holds it back or it has no more.
#[allow(clippy::too_many_arguments)]
fn fill(
    i: usize,
    lane: &mut Lane<'_>,
    disk: &dyn VirtualDisk,
    depth: usize,
    now: Nanos,
    instant: Instant,
    read_buf: &mut AlignedBuf,
    flight: &mut FxHashMap<u64, InFlight>,
) -> Result<(), WorkloadError> {
    while !lane.done && !lane.flushing && lane.wake.is_none() && lane.in_flight < depth {
        if let Some(wait) = lane.w.rate_wait(instant) {
            if !lane.w.finished(instant) {
                lane.wake = Some(now + wait.as_nanos() as Nanos);
            } else {
                lane.done = true;
            }
            break;
        }
        let Some((req, measured)) = lane.w.next_request(instant) else {
            lane.done = true;
            break;
        };
        let len = req.len as usize;
        let buf = match req.kind {
            IoKind::Read | IoKind::Trim => read_buf.as_ptr(),
            IoKind::Write => lane.write_buf.as_ptr(),
        };
        check_request(lane.w.device, op_of(req.kind), buf as usize, len, req.offset)?;
        let data = match req.kind {
            IoKind::Read | IoKind::Trim => VData::Read(&mut read_buf[..len]),
            IoKind::Write => VData::Write(&lane.write_buf[..len]),
        };
        let id = disk.submit(now, req.offset, data)?;
        flight.insert(id, InFlight::Io { worker: i, req, issued: now, measured });
        lane.in_flight += 1;
    }
    Ok(())
}

/// Runs the model until request `id` completes; its completion instant.
pub(super) fn run_until(disk: &dyn VirtualDisk, id: u64, mut now: Nanos) -> Result<Nanos, WorkloadError> {
    loop {
        let Some(t) = disk.next_event() else {
            return Err(device::DeviceError::Invalid(format!(
                "{}: the disk model stopped before the end flush completed",
                disk.describe()
            ))
            .into());
        };
        now = now.max(t);
        if let Some((_, done)) = disk.advance(now).into_iter().find(|(i, _)| *i == id) {
            return Ok(done);
        }
    }
}
