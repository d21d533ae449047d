//! The io_uring engine: one ring per worker thread, `iodepth` requests in
//! flight, buffers and the file registered with the kernel (falling back to
//! plain buffers when registration is refused, e.g. by RLIMIT_MEMLOCK).
//!
//! The ring submits to the device's descriptor (`Device::raw_fd`), around
//! the checked front, so it does the front's work itself and must never
//! skip it: every request passes `device::check_request` before it is
//! submitted and is counted in `Device::stats` when it completes.

use std::io;
use std::os::fd::RawFd;
use std::time::Instant;

use device::{check_request, AlignedBuf, DeviceError, Op};
use io_uring::{opcode, squeue, types, IoUring};

use super::{data_buffer, Worker, WorkloadError};
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;

/// `user_data` of a flush; request slots use their index.
const FLUSH_TAG: u64 = u64::MAX;

/// Whether this kernel lets us create an io_uring.
pub fn uring_available() -> bool {
    IoUring::new(2).is_ok()
}

struct Slot {
    req: Request,
    issued: Instant,
    measured: bool,
}

/// The requests in flight, by buffer slot, and the free slots.
struct Slots {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
}

impl Slots {
    fn new(depth: usize) -> Slots {
        Slots { slots: (0..depth).map(|_| None).collect(), free: (0..depth).rev().collect() }
    }

    fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn fill(&mut self, slot: usize, request: Slot) {
        debug_assert!(self.free.last() == Some(&slot) && self.slots[slot].is_none());
        self.free.pop();
        self.slots[slot] = Some(request);
    }

    fn release(&mut self, slot: usize) -> Slot {
        // Invariant: every request completion carries the index of an
        // occupied slot (flushes are reaped by Ring::flush).
        let request = self.slots[slot].take().expect("completion for an occupied slot");
        self.free.push(slot);
        request
    }
}

pub(super) struct Ring {
    pub(super) ring: IoUring,
    pub(super) fixed: bool,
    pub(super) fd: RawFd,
}

pub(super) fn run(mut w: Worker<'_>) -> Result<ThreadStats, WorkloadError> {
    if let Some(v) = w.validator {
        return super::uring_validated::run(w, v);
    }
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
    let mut ring = Ring { ring, fixed: false, fd };
    ring.register(&mut bufs);
    let mut slots = Slots::new(depth);
    let mut queued = 0u32;
    loop {
        let now = Instant::now();
        while let Some(&slot) = slots.free.last() {
            if w.rate_wait(now).is_some() {
                break;
            }
            let Some((req, measured)) = w.next_request(now) else { break };
            check_request(
                w.device,
                op_of(req.kind),
                bufs[slot].as_ptr() as usize,
                req.len as usize,
                req.offset,
            )?;
            let sqe = ring.entry(&mut bufs[slot], slot, req);
            // Invariant: the ring has more entries than the depth, so a
            // submission slot is always free here.
            // SAFETY: the buffer lives in `bufs` until its completion is reaped.
            unsafe { ring.ring.submission().push(&sqe).expect("submission queue has room") };
            slots.fill(slot, Slot { req, issued: Instant::now(), measured });
            queued += 1;
            if queued >= w.job.submit_batch {
                // Handing each request to the kernel as soon as it is ready
                // (batch 1, fio's default) keeps the device busiest: on a
                // virtio disk it gave 40% more 4 KiB random reads than one
                // submission per refill.
                ring.ring.submit().map_err(uring_err("submit"))?;
                queued = 0;
            }
        }
        if slots.in_flight() == 0 {
            match w.rate_wait(Instant::now()) {
                Some(wait) if !w.finished(now) => {
                    std::thread::sleep(wait);
                    continue;
                }
                _ => break,
            }
        }
        ring.ring.submit_and_wait(1).map_err(uring_err("submit"))?;
        queued = 0;
        let flush_now = reap(&mut ring, &mut slots, &mut w, &device_name)?;
        if flush_now {
            drain(&mut ring, &mut slots, &mut w, &device_name)?;
            ring.flush(&device_name)?;
            w.device.stats().record_flush();
            w.stats.flushes += 1;
        }
    }
    Ok(w.stats)
}

/// A ring owned by this thread alone: completions are processed only when
/// the thread asks for them (single issuer, deferred task work), which
/// saves an interruption per completion. Older kernels get a plain ring.
pub(super) fn new_ring(entries: u32) -> io::Result<IoUring> {
    IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
}

impl Ring {
    pub(super) fn register(&mut self, bufs: &mut [AlignedBuf]) {
        let iovecs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
            .collect();
        let submitter = self.ring.submitter();
        // SAFETY: the buffers outlive the ring's use of them: both live
        // until `run` returns, and the ring is dropped first.
        let buffers = unsafe { submitter.register_buffers(&iovecs) };
        self.fixed = buffers.is_ok() && submitter.register_files(&[self.fd]).is_ok();
        if !self.fixed && buffers.is_ok() {
            let _ = submitter.unregister_buffers();
        }
    }

    pub(super) fn entry(&self, buf: &mut AlignedBuf, slot: usize, req: Request) -> squeue::Entry {
        let ptr = buf.as_mut_ptr();
        let len = req.len as u32;
        let entry = match (req.kind, self.fixed) {
            (IoKind::Read, true) => {
                opcode::ReadFixed::new(types::Fixed(0), ptr, len, slot as u16).offset(req.offset).build()
            }
            (IoKind::Write, true) => {
                opcode::WriteFixed::new(types::Fixed(0), ptr, len, slot as u16).offset(req.offset).build()
            }
            (IoKind::Read, false) => {
                opcode::Read::new(types::Fd(self.fd), ptr, len).offset(req.offset).build()
            }
            (IoKind::Write, false) => {
                opcode::Write::new(types::Fd(self.fd), ptr, len).offset(req.offset).build()
            }
        };
        entry.user_data(slot as u64)
    }

    /// fdatasync through the ring, with nothing else in flight.
    fn flush(&mut self, device: &str) -> Result<(), WorkloadError> {
        let entry = if self.fixed {
            opcode::Fsync::new(types::Fixed(0))
        } else {
            opcode::Fsync::new(types::Fd(self.fd))
        }
        .flags(types::FsyncFlags::DATASYNC)
        .build()
        .user_data(FLUSH_TAG);
        // SAFETY: a flush references no buffer.
        unsafe { self.ring.submission().push(&entry).expect("submission queue has room") };
        self.ring.submit_and_wait(1).map_err(|source| WorkloadError::Uring {
            device: device.into(),
            what: "flush",
            source,
        })?;
        let result = self.ring.completion().next().map(|c| c.result()).unwrap_or(0);
        if result < 0 {
            return Err(DeviceError::Flush {
                device: device.into(),
                source: io::Error::from_raw_os_error(-result),
            }
            .into());
        }
        Ok(())
    }
}

/// Waits for every request in flight (before a flush).
fn drain(ring: &mut Ring, slots: &mut Slots, w: &mut Worker<'_>, device: &str) -> Result<(), WorkloadError> {
    while slots.in_flight() > 0 {
        ring.ring.submit_and_wait(1).map_err(|source| WorkloadError::Uring {
            device: device.into(),
            what: "submit",
            source,
        })?;
        reap(ring, slots, w, device)?;
    }
    Ok(())
}

/// Takes every completion off the ring, frees its slot and measures it.
/// Returns whether a flush is now due.
fn reap(ring: &mut Ring, slots: &mut Slots, w: &mut Worker<'_>, device: &str) -> Result<bool, WorkloadError> {
    let mut flush_due = false;
    let done = Instant::now();
    for cqe in ring.ring.completion() {
        let Slot { req, issued, measured } = slots.release(cqe.user_data() as usize);
        check_result(device, req, cqe.result())?;
        match req.kind {
            IoKind::Read => w.device.stats().record_reads(1, req.len),
            IoKind::Write => w.device.stats().record_writes(1, req.len),
        }
        w.complete(req.kind, req.len, done - issued, done, measured);
        flush_due |= w.flush_due(req.kind);
    }
    Ok(flush_due)
}

pub(super) fn op_of(kind: IoKind) -> Op {
    match kind {
        IoKind::Read => Op::Read,
        IoKind::Write => Op::Write,
    }
}

pub(super) fn check_result(device: &str, req: Request, result: i32) -> Result<(), WorkloadError> {
    if result == req.len as i32 {
        return Ok(());
    }
    let source = if result < 0 {
        io::Error::from_raw_os_error(-result)
    } else {
        io::Error::new(io::ErrorKind::UnexpectedEof, format!("short transfer: {result} of {} bytes", req.len))
    };
    Err(DeviceError::Io {
        device: device.into(),
        op: op_of(req.kind),
        offset: req.offset,
        len: req.len,
        source,
    }
    .into())
}
