//! The io_uring engine: one ring per worker thread, `iodepth` requests in
//! flight, buffers and the file registered with the kernel (falling back to
//! plain buffers when registration is refused, e.g. by RLIMIT_MEMLOCK).
//!
//! The ring submits to the device's descriptor (`Device::raw_fd`), around
//! the checked front, so it does the front's work itself and must never
//! skip it: every request passes `device::check_request` before it is
//! submitted and is counted in `Device::stats` when it completes.

use std::io;
use std::time::Instant;

use device::{check_request, AlignedBuf};

use super::ring::{check_result, new_ring, op_of, Ring, Slots};
use super::worker::{data_buffer, Worker};
use crate::error::WorkloadError;
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;

struct Slot {
    req: Request,
    issued: Instant,
    measured: bool,
}

/// One worker on io_uring: its ring kept full to the job's depth, each
/// completion timed and the slot refilled, flushes in order.
///
/// Long on purpose: the hot loop's state (the ring, the slots, the
/// buffers) stays in locals, where the compiler keeps it out of memory;
/// a call per step would pass it all each time.
pub(super) fn run(mut w: Worker<'_>) -> Result<ThreadStats, WorkloadError> {
    debug_assert!(w.validator.is_none(), "a validated job runs uring_validated");
    let device_name = w.device.name().to_string();
    let uring_err = |what: &'static str| {
        let device = device_name.clone();
        move |source: io::Error| WorkloadError::Uring { device, what, source }
    };
    // Invariant: run_job only starts this engine on devices with a descriptor.
    let fd = w.device.raw_fd().expect("uring engine on a device with a descriptor");
    let depth = w.job.iodepth as usize;
    let max = w.job.bs.max_bytes() as usize;
    let align = w.device.buffer_align().max(4096);
    let mut bufs: Vec<AlignedBuf> =
        (0..depth).map(|i| data_buffer(max, align, w.job.pattern, w.job.seed ^ i as u64)).collect();
    let entries = (depth as u32 + 1).next_power_of_two().max(8);
    let ring = new_ring(entries).map_err(uring_err("setup"))?;
    let mut ring = Ring::new(ring, fd);
    ring.register(&mut bufs);
    let mut slots: Slots<Slot> = Slots::new(depth);
    let mut queued = 0u32;
    loop {
        let mut now = Instant::now();
        while let Some(slot) = slots.next_free() {
            if w.rate_wait(now).is_some() {
                break;
            }
            let Some((req, measured)) = w.next_request(now) else { break };
            if req.kind == IoKind::Trim {
                // Through the device, waited for here: the ring has no
                // discard for block devices (fio's io_uring engine does
                // the same).
                let issued = Instant::now();
                w.device.discard(req.offset, req.len)?;
                let done = Instant::now();
                w.complete(req.kind, req.len, done - issued, done, measured);
                let due = u32::from(w.flush_due(req));
                flush_after(&mut ring, &mut slots, &mut w, &device_name, due)?;
                // The slot stays free: the next request is taken at the
                // time this one ended, so the deadline is seen.
                now = Instant::now();
                continue;
            }
            check_request(
                w.device,
                op_of(req.kind),
                bufs[slot].as_ptr() as usize,
                req.len as usize,
                req.offset,
            )?;
            if req.kind == IoKind::Write {
                w.scramble(&mut bufs[slot][..req.len as usize], &req);
            }
            let sqe = ring.entry(&mut bufs[slot], slot, req);
            // Invariant: the ring has more entries than the depth, so a
            // submission slot is always free here.
            // SAFETY: the buffer lives in `bufs` until its completion is reaped.
            unsafe { ring.ring.submission().push(&sqe).expect("submission queue has room") };
            slots.fill(slot, Slot { req, issued: Instant::now(), measured });
            queued += 1;
            // The last request of a refill goes with the wait below, in the
            // same system call: no later, and one call fewer (at depth 1,
            // half of them).
            if queued >= w.job.submit_batch && slots.free_count() > 0 {
                // Handing each request to the kernel as soon as it is ready
                // (batch 1, fio's default) keeps the device busiest: on a
                // virtio disk it gave 40% more 4 KiB random reads than one
                // submission per refill.
                ring.ring.submit().map_err(uring_err("submit"))?;
                queued = 0;
            }
        }
        if slots.in_flight() == 0 {
            // Nothing in flight: the job is done, or its rate held the
            // next request back (and may no longer: the wait can pass
            // between the two looks, which once ended the job early).
            let now = Instant::now();
            if w.finished(now) {
                break;
            }
            if let Some(wait) = w.rate_wait(now) {
                std::thread::sleep(wait);
            }
            continue;
        }
        ring.ring.submit_and_wait(1).map_err(uring_err("submit"))?;
        queued = 0;
        let due = reap(&mut ring, &mut slots, &mut w, &device_name)?;
        flush_after(&mut ring, &mut slots, &mut w, &device_name, due)?;
    }
    Ok(w.stats)
}

/// With `due` flushes due after completions: waits for the requests in
/// flight, then flushes; a replay once for each sync of its trace,
/// --flush-every once for the writes that completed together.
fn flush_after(
    ring: &mut Ring,
    slots: &mut Slots<Slot>,
    w: &mut Worker<'_>,
    device: &str,
    due: u32,
) -> Result<(), WorkloadError> {
    if due == 0 {
        return Ok(());
    }
    let drained = drain(ring, slots, w, device)?;
    let flushes = if w.replaying() { due + drained } else { 1 };
    for _ in 0..flushes {
        ring.flush(w.device)?;
        w.device.stats().record_flush();
        w.flushed();
    }
    Ok(())
}

/// Waits for every request in flight (before a flush); how many more
/// flushes their completions made due.
fn drain(
    ring: &mut Ring,
    slots: &mut Slots<Slot>,
    w: &mut Worker<'_>,
    device: &str,
) -> Result<u32, WorkloadError> {
    let mut due = 0;
    while slots.in_flight() > 0 {
        ring.ring.submit_and_wait(1).map_err(|source| WorkloadError::Uring {
            device: device.into(),
            what: "submit",
            source,
        })?;
        due += reap(ring, slots, w, device)?;
    }
    Ok(due)
}

/// Takes every completion off the ring, frees its slot and measures it.
/// Returns how many flushes are now due.
fn reap(
    ring: &mut Ring,
    slots: &mut Slots<Slot>,
    w: &mut Worker<'_>,
    device: &str,
) -> Result<u32, WorkloadError> {
    let mut flush_due = 0;
    let done = Instant::now();
    for cqe in ring.ring.completion() {
        let Slot { req, issued, measured } = slots.release(cqe.user_data() as usize);
        check_result(device, req, cqe.result())?;
        match req.kind {
            IoKind::Read => w.device.stats().record_reads(1, req.len),
            IoKind::Write => w.device.stats().record_writes(1, req.len),
            IoKind::Trim => {}
        }
        w.complete(req.kind, req.len, done - issued, done, measured);
        flush_due += u32::from(w.flush_due(req));
    }
    Ok(flush_due)
}
