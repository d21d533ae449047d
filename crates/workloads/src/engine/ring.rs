//! What both io_uring engines (`uring.rs`, `uring_validated.rs`) share: a
//! ring owned by one worker thread with its buffers and file registered,
//! the table of its buffer slots, and the checking of a completion.

use std::io;
use std::os::fd::RawFd;

use device::{AlignedBuf, DeviceError, Op};
use io_uring::{opcode, squeue, types, IoUring};

use crate::error::WorkloadError;
use crate::gen::{IoKind, Request};

/// `user_data` of a flush; request slots use their index (and the
/// validated engine's ring commits the two tags below this one).
pub(super) const FLUSH_TAG: u64 = u64::MAX;

/// Whether this kernel lets us create an io_uring.
pub fn uring_available() -> bool {
    IoUring::new(2).is_ok()
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

/// The requests in the kernel (or about to go), by buffer slot, and the
/// free slots: slot `i` owns buffer `i`, so a buffer is reused only once
/// its slot's completion has been reaped.
pub(super) struct Slots<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Slots<T> {
    /// `depth` free slots, handed out from slot 0 up.
    pub(super) fn new(depth: usize) -> Slots<T> {
        Slots { slots: (0..depth).map(|_| None).collect(), free: (0..depth).rev().collect() }
    }

    /// Slots taken.
    pub(super) fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub(super) fn free_count(&self) -> usize {
        self.free.len()
    }

    /// The slot [`Slots::fill`] takes next, if one is free.
    pub(super) fn next_free(&self) -> Option<usize> {
        self.free.last().copied()
    }

    /// Takes `slot`, which must be [`Slots::next_free`], for `request`.
    pub(super) fn fill(&mut self, slot: usize, request: T) {
        debug_assert!(self.free.last() == Some(&slot) && self.slots[slot].is_none());
        self.free.pop();
        self.slots[slot] = Some(request);
    }

    /// The request on `slot`, which must be taken.
    pub(super) fn get(&self, slot: usize) -> &T {
        // Invariant: callers name a slot whose request they have not
        // released (a completion carries the index of a slot in flight).
        self.slots[slot].as_ref().expect("a request on an occupied slot")
    }

    /// Frees `slot`, which must be taken, and returns its request.
    pub(super) fn release(&mut self, slot: usize) -> T {
        // Invariant: every request completion carries the index of an
        // occupied slot (flushes and commits carry tags of their own).
        let request = self.slots[slot].take().expect("completion for an occupied slot");
        self.free.push(slot);
        request
    }

    /// Frees `slot` and returns its request, if it is taken (after a
    /// failure, when an invariant is no reason to stop giving back).
    pub(super) fn release_if_taken(&mut self, slot: usize) -> Option<T> {
        let request = self.slots[slot].take()?;
        self.free.push(slot);
        Some(request)
    }

    /// Frees every slot taken and returns their requests (after a failure,
    /// to give back what they hold).
    pub(super) fn release_all(&mut self) -> Vec<T> {
        (0..self.slots.len()).filter_map(|slot| self.release_if_taken(slot)).collect()
    }
}

/// A worker's ring, on the device's descriptor; `fixed` when its buffers
/// and the file are registered with the kernel.
pub(super) struct Ring {
    pub(super) ring: IoUring,
    pub(super) fixed: bool,
    pub(super) fd: RawFd,
}

impl Ring {
    pub(super) fn new(ring: IoUring, fd: RawFd) -> Ring {
        Ring { ring, fixed: false, fd }
    }

    /// Registers `bufs` and the file with the kernel; falls back to plain
    /// buffers when registration is refused (e.g. by RLIMIT_MEMLOCK).
    pub(super) fn register(&mut self, bufs: &mut [AlignedBuf]) {
        let iovecs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
            .collect();
        let submitter = self.ring.submitter();
        // SAFETY: the buffers outlive the ring's use of them: both live
        // until the engine's `run` returns, and the ring is dropped first.
        let buffers = unsafe { submitter.register_buffers(&iovecs) };
        self.fixed = buffers.is_ok() && submitter.register_files(&[self.fd]).is_ok();
        if !self.fixed && buffers.is_ok() {
            let _ = submitter.unregister_buffers();
        }
    }

    /// The submission of `req`, a read or a write, on `slot`'s buffer
    /// `buf`. (A trim does not go through the ring: the engine discards
    /// through the device, as fio's io_uring engine does.)
    pub(super) fn entry(&self, buf: &mut AlignedBuf, slot: usize, req: Request) -> squeue::Entry {
        debug_assert_ne!(req.kind, IoKind::Trim, "trims are not submitted to the ring");
        let ptr = buf.as_mut_ptr();
        let len = req.len as u32;
        let write = req.kind == IoKind::Write;
        let entry = match (write, self.fixed) {
            (false, true) => {
                opcode::ReadFixed::new(types::Fixed(0), ptr, len, slot as u16).offset(req.offset).build()
            }
            (true, true) => {
                opcode::WriteFixed::new(types::Fixed(0), ptr, len, slot as u16).offset(req.offset).build()
            }
            (false, false) => opcode::Read::new(types::Fd(self.fd), ptr, len).offset(req.offset).build(),
            (true, false) => opcode::Write::new(types::Fd(self.fd), ptr, len).offset(req.offset).build(),
        };
        entry.user_data(slot as u64)
    }

    /// An fdatasync of the device, tagged `tag`.
    pub(super) fn fdatasync(&self, tag: u64) -> squeue::Entry {
        let fsync = if self.fixed {
            opcode::Fsync::new(types::Fixed(0))
        } else {
            opcode::Fsync::new(types::Fd(self.fd))
        };
        fsync.flags(types::FsyncFlags::DATASYNC).build().user_data(tag)
    }

    /// fdatasync through the ring, with nothing else in flight. A failed
    /// one poisons `device`, as a failed flush through the front does.
    pub(super) fn flush(&mut self, device: &dyn device::Device) -> Result<(), WorkloadError> {
        let result = self.fdatasync_now(device.name());
        if let Err(e) = &result {
            device.poison(format!("an io_uring fdatasync failed: {e}"));
        }
        result
    }

    fn fdatasync_now(&mut self, device: &str) -> Result<(), WorkloadError> {
        let entry = self.fdatasync(FLUSH_TAG);
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

pub(super) fn op_of(kind: IoKind) -> Op {
    match kind {
        IoKind::Read => Op::Read,
        IoKind::Write => Op::Write,
        IoKind::Trim => Op::Trim,
    }
}

/// A completion's result for `req`: an error unless the whole request moved.
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
