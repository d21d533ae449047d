//! The io_uring engine under validation: up to `iodepth` requests in
//! flight per thread, with the sync engine's guarantees. A request takes
//! its key blocks before it is issued and gives them back when it
//! completes, so requests on the same blocks never overlap; a write's old
//! contents are pre-read through the ring, then its buffer is stamped; the
//! stamped writes ready at one moment queue their `before` records
//! together, wait for one durable commit (sync mode: one per write) and
//! only then go to the kernel. In group mode a worker keeps more requests
//! than the ring holds: a stamped write queues its `before` record and
//! kicks the committer thread at once, and goes to the kernel when the
//! commit is durable and the ring has room, while the worker reaps and
//! refills; it blocks on a commit only with nothing in the kernel.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use device::{check_request, AlignedBuf};

use super::uring::{check_result, new_ring, op_of, Ring};
use super::{Worker, WorkloadError};
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;
use crate::validate::{CheckedBy, Validator};

/// What a slot's request is doing.
enum Stage {
    /// A read, in flight; checked when it completes.
    Read,
    /// A write's pre-read, in flight.
    Preread,
    /// A stamped write waiting for its `before` record (group mode: queued
    /// already, with this ticket).
    Ready { sequence: u64, keys: Vec<u8>, ticket: Option<u64> },
    /// A write in flight.
    Writing { sequence: u64, keys: Vec<u8> },
}

struct Slot {
    req: Request,
    measured: bool,
    /// When the request was taken (its latency starts there).
    at: Instant,
    stage: Stage,
}

/// Per-thread state: the ring, a buffer per slot, the requests by slot.
struct Engine<'v> {
    v: &'v Validator,
    ring: Ring,
    bufs: Vec<AlignedBuf>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    /// Slots in stage `Ready`, in the order they were stamped.
    ready: Vec<usize>,
    /// Requests in the kernel, and at most how many (the job's depth;
    /// group mode keeps more slots than that).
    in_flight: usize,
    depth: usize,
    /// Group mode: `before` records are queued as writes are stamped, and
    /// writes wait for their commit without blocking the worker.
    group: bool,
    /// For the read-back of a write (`reread`).
    scratch: AlignedBuf,
    device_name: String,
}

/// Group mode: at most this many stamped writes wait for a commit per
/// worker thread, in at most this many bytes of buffers (but always as
/// many as the depth).
const UNSENT_MAX: usize = 512;
const UNSENT_BYTES: usize = 16 << 20;

pub(super) fn run(mut w: Worker<'_>, v: &Validator) -> Result<ThreadStats, WorkloadError> {
    let device_name = w.device.name().to_string();
    // Invariant: run_job only starts this engine on devices with a descriptor.
    let fd = w.device.raw_fd().expect("uring engine on a device with a descriptor");
    let depth = w.job.iodepth as usize;
    let max = w.job.bs.max_bytes() as usize;
    let group = v.group_journal().is_some();
    // Group mode: room for the writes waiting for a commit besides those
    // in the kernel (as many as the sync engine's lookahead per request in
    // flight, within a budget of slots and of buffer bytes).
    let budget = (UNSENT_BYTES / max.max(1)).max(depth);
    let waiting = if group { (v.lookahead() * depth).min(UNSENT_MAX).min(budget) } else { 0 };
    let slots = depth + waiting;
    let align = w.device.buffer_align().max(4096);
    let entries = (depth as u32 + 1).next_power_of_two().max(8);
    let ring = new_ring(entries).map_err(|source| WorkloadError::Uring {
        device: device_name.clone(),
        what: "setup",
        source,
    })?;
    let mut e = Engine {
        v,
        ring: Ring { ring, fixed: false, fd },
        bufs: (0..slots).map(|_| AlignedBuf::zeroed(max, align)).collect(),
        slots: (0..slots).map(|_| None).collect(),
        free: (0..slots).rev().collect(),
        ready: Vec::with_capacity(slots),
        in_flight: 0,
        depth,
        group,
        scratch: AlignedBuf::zeroed(max, align),
        device_name,
    };
    e.ring.register(&mut e.bufs);
    let outcome = e.run(&mut w);
    // After an error: wait for what the kernel still holds (its buffers
    // are ours), then give back every block still taken.
    e.abandon();
    outcome.map(|()| w.stats)
}

impl Engine<'_> {
    fn run(&mut self, w: &mut Worker<'_>) -> Result<(), WorkloadError> {
        let mut blocked: Option<(Request, bool)> = None;
        loop {
            let drained = self.fill(w, &mut blocked)?;
            self.send_ready(w)?;
            if self.in_flight == 0 && !self.ready.is_empty() {
                // Nothing in the kernel: wait for the oldest write's commit.
                let first = self.ticket_of(self.ready[0]);
                self.v.journal_wait(first)?;
                continue;
            }
            if self.in_flight == 0 {
                debug_assert!(self.free.len() == self.slots.len());
                let now = Instant::now();
                if blocked.is_none() && (drained || w.finished(now)) {
                    return Ok(());
                }
                if let (None, Some(wait)) = (&blocked, w.rate_wait(now)) {
                    std::thread::sleep(wait);
                }
                continue;
            }
            self.ring.ring.submit_and_wait(1).map_err(self.uring_err("submit"))?;
            self.reap(w)?;
        }
    }

    /// Takes requests into free slots: reads and pre-reads go to the
    /// kernel, writes without a pre-read are stamped. Returns true when the
    /// worker has no more requests. A request whose blocks are taken waits
    /// in `blocked` while this worker holds any; holding none, the worker
    /// waits for them (so two workers never wait on each other).
    fn fill(
        &mut self,
        w: &mut Worker<'_>,
        blocked: &mut Option<(Request, bool)>,
    ) -> Result<bool, WorkloadError> {
        while let Some(&slot) = self.free.last() {
            let now = Instant::now();
            if blocked.is_none() && w.rate_wait(now).is_some() {
                return Ok(false);
            }
            let Some((req, measured)) = blocked.take().or_else(|| w.next_request(now)) else {
                return Ok(true);
            };
            if !self.v.try_lock(&req) {
                if self.free.len() < self.slots.len() {
                    *blocked = Some((req, measured));
                    return Ok(false);
                }
                while !self.v.try_lock(&req) {
                    std::thread::yield_now();
                }
            }
            let needs_kernel = req.kind == IoKind::Read || self.v.spec().preread;
            if needs_kernel && self.in_flight >= self.depth {
                self.v.unlock(&req);
                *blocked = Some((req, measured));
                return Ok(false);
            }
            self.free.pop();
            let stage = match req.kind {
                IoKind::Read => Stage::Read,
                IoKind::Write if self.v.spec().preread => Stage::Preread,
                IoKind::Write => match self.stamp(slot, req) {
                    Ok(stage) => stage,
                    Err(e) => {
                        self.free.push(slot);
                        self.v.unlock(&req);
                        return Err(e);
                    }
                },
            };
            let stamped = matches!(stage, Stage::Ready { .. });
            self.slots[slot] = Some(Slot { req, measured, at: now, stage });
            if stamped {
                self.ready.push(slot);
                if self.v.lookahead() == 1 {
                    // Sync journal mode: one durable record per write.
                    self.send_ready(w)?;
                }
            } else {
                let read = Request { kind: IoKind::Read, ..req };
                self.submit(w, slot, read)?;
            }
        }
        Ok(false)
    }

    /// Stamps a write's buffer; in group mode also queues its `before`
    /// record and kicks the committer.
    fn stamp(&mut self, slot: usize, req: Request) -> Result<Stage, WorkloadError> {
        let len = req.len as usize;
        let (sequence, keys) = self.v.stamp(&req, &mut self.bufs[slot][..len]);
        let ticket = if self.group {
            let ticket = self.v.journal_queue_before(sequence, &req, &keys)?;
            self.v.journal_kick(ticket);
            ticket
        } else {
            None
        };
        Ok(Stage::Ready { sequence, keys, ticket })
    }

    /// The journal ticket of a ready write (group mode).
    fn ticket_of(&self, slot: usize) -> Option<u64> {
        match self.slots[slot].as_ref().map(|s| &s.stage) {
            Some(Stage::Ready { ticket, .. }) => *ticket,
            _ => None,
        }
    }

    /// Sends the stamped writes: their `before` records queued together,
    /// one wait for a durable commit (each its own in sync mode, where
    /// `ready` holds one), then all of them to the kernel. In group mode,
    /// sends, in order, those whose commit is durable, while the ring has
    /// room, without waiting.
    fn send_ready(&mut self, w: &mut Worker<'_>) -> Result<(), WorkloadError> {
        if self.ready.is_empty() {
            return Ok(());
        }
        let sendable = if self.group {
            let durable = self.ready.iter().take_while(|&&slot| self.v.journal_durable(self.ticket_of(slot)));
            durable.count().min(self.depth - self.in_flight)
        } else {
            let mut ticket = None;
            for &slot in &self.ready {
                // Invariant: `ready` lists occupied slots in stage Ready.
                let s = self.slots[slot].as_ref().expect("a ready slot is occupied");
                let Stage::Ready { sequence, keys, .. } = &s.stage else {
                    unreachable!("ready slot not in stage Ready")
                };
                ticket = ticket.max(self.v.journal_queue_before(*sequence, &s.req, keys)?);
            }
            self.v.journal_wait(ticket)?;
            self.ready.len()
        };
        for slot in self.ready.drain(..sendable).collect::<Vec<_>>() {
            // Invariant as above.
            let s = self.slots[slot].as_mut().expect("a ready slot is occupied");
            let Stage::Ready { sequence, keys, .. } = std::mem::replace(&mut s.stage, Stage::Read) else {
                unreachable!("ready slot not in stage Ready")
            };
            s.stage = Stage::Writing { sequence, keys };
            let req = s.req;
            self.submit(w, slot, req)?;
        }
        Ok(())
    }

    /// Hands one request on `slot`'s buffer to the kernel.
    fn submit(&mut self, w: &Worker<'_>, slot: usize, req: Request) -> Result<(), WorkloadError> {
        let buf = &mut self.bufs[slot];
        check_request(w.device, op_of(req.kind), buf.as_ptr() as usize, req.len as usize, req.offset)?;
        let sqe = self.ring.entry(buf, slot, req);
        // Invariant: the ring has more entries than slots, and each slot
        // has at most one request in the kernel.
        // SAFETY: the buffer lives in `bufs` until its completion is reaped.
        unsafe { self.ring.ring.submission().push(&sqe).expect("submission queue has room") };
        self.in_flight += 1;
        self.ring.ring.submit().map_err(self.uring_err("submit"))?;
        Ok(())
    }

    /// Takes every completion off the ring and moves its request on.
    fn reap(&mut self, w: &mut Worker<'_>) -> Result<(), WorkloadError> {
        let done: Vec<(usize, i32)> =
            self.ring.ring.completion().map(|c| (c.user_data() as usize, c.result())).collect();
        let mut outcome = Ok(());
        for (slot, result) in done {
            self.in_flight -= 1;
            let step = self.complete(w, slot, result);
            if outcome.is_ok() {
                outcome = step;
            }
        }
        outcome
    }

    /// One completion: a read is checked, a pre-read checked and its
    /// buffer stamped, a write recorded and journaled; a finished request
    /// gives back its blocks and its slot.
    fn complete(&mut self, w: &mut Worker<'_>, slot: usize, result: i32) -> Result<(), WorkloadError> {
        // Invariant: every completion carries the index of a slot in flight.
        let s = self.slots[slot].take().expect("completion for an occupied slot");
        let (req, len) = (s.req, s.req.len as usize);
        let io = if matches!(s.stage, Stage::Writing { .. }) {
            req
        } else {
            Request { kind: IoKind::Read, ..req }
        };
        if let Err(e) = check_result(&self.device_name, io, result) {
            self.slots[slot] = Some(s);
            return Err(e);
        }
        match io.kind {
            IoKind::Read => w.device.stats().record_reads(1, req.len),
            IoKind::Write => w.device.stats().record_writes(1, req.len),
        }
        let go_on = match s.stage {
            Stage::Read => self.v.check(&req, &self.bufs[slot][..len], CheckedBy::Read),
            Stage::Preread => {
                let go_on = self.v.check(&req, &self.bufs[slot][..len], CheckedBy::Preread);
                let stage = match self.stamp(slot, req) {
                    Ok(stage) => stage,
                    Err(e) => {
                        self.v.unlock(&req);
                        self.free.push(slot);
                        return Err(e);
                    }
                };
                self.slots[slot] = Some(Slot { stage, ..s });
                self.ready.push(slot);
                if !go_on {
                    w.limits.stop.store(true, Relaxed);
                }
                return Ok(());
            }
            Stage::Writing { sequence, keys } => {
                self.v.written(&req, &keys);
                let journaled = self.v.journal_after(sequence, &req);
                match journaled.and_then(|()| self.reread(w, req)) {
                    Ok(go_on) => go_on,
                    Err(e) => {
                        self.v.unlock(&req);
                        self.free.push(slot);
                        return Err(e);
                    }
                }
            }
            // Invariant: a Ready write is never in the kernel.
            Stage::Ready { .. } => unreachable!("completion for a write not yet sent"),
        };
        self.v.unlock(&req);
        self.free.push(slot);
        if !go_on {
            w.limits.stop.store(true, Relaxed);
        }
        let now = Instant::now();
        w.complete(req.kind, req.len, now - s.at, now, s.measured);
        Ok(())
    }

    /// Reads a write back and checks it, when the job asks to.
    fn reread(&mut self, w: &Worker<'_>, req: Request) -> Result<bool, WorkloadError> {
        if !self.v.spec().reread {
            return Ok(true);
        }
        let len = req.len as usize;
        w.device.read_at(&mut self.scratch[..len], req.offset)?;
        Ok(self.v.check(&req, &self.scratch[..len], CheckedBy::Reread))
    }

    /// Waits for every request still in the kernel (errors ignored: the
    /// run already failed or finished), then gives back every block taken.
    fn abandon(&mut self) {
        while self.in_flight > 0 {
            if self.ring.ring.submit_and_wait(1).is_err() {
                break;
            }
            let done: Vec<usize> = self.ring.ring.completion().map(|c| c.user_data() as usize).collect();
            for slot in done {
                self.in_flight -= 1;
                if let Some(s) = self.slots[slot].take() {
                    self.v.unlock(&s.req);
                    self.free.push(slot);
                }
            }
        }
        self.ready.clear();
        for slot in 0..self.slots.len() {
            if let Some(s) = self.slots[slot].take() {
                self.v.unlock(&s.req);
                self.free.push(slot);
            }
        }
    }

    fn uring_err(&self, what: &'static str) -> impl FnOnce(io::Error) -> WorkloadError {
        let device = self.device_name.clone();
        move |source| WorkloadError::Uring { device, what, source }
    }
}
