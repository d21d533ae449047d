//! The io_uring engine under validation: up to `iodepth` requests in
//! flight per thread, with the sync engine's guarantees. A request takes
//! its key blocks before it is issued and gives them back when it
//! completes, so requests on the same blocks never overlap; a write's old
//! contents are pre-read through the ring and checked. A write is then
//! given its sequence number and keys, and waits, with no buffer, until
//! its `before` record is durable (sync mode: each write its own commit;
//! group mode: one commit for all those ready) and a slot of the ring is
//! free; only then is its buffer stamped and sent. In group mode a worker
//! keeps more writes waiting than the ring holds: each queues its
//! `before` record as it is taken, and goes to the kernel when its commit
//! is durable, while the worker reaps and refills; the worker blocks on a
//! commit only with nothing in the kernel. Stamping at the last moment
//! keeps the buffers to the depth: a waiting room of stamped buffers (512
//! of them, 2 MiB at 4 KiB) cost a tenth of the IOPS here, in cache.
//!
//! A committer thread commits, kicked as writes are queued. With
//! `--journal-commit ring` and the journal in a file that takes O_DIRECT,
//! the worker runs the group commits itself, through its own ring instead:
//! whenever no commit is running and a `before` record waits, it takes the
//! batch and sends the journal write (O_DIRECT, O_DSYNC; after a linked
//! fdatasync of the target when the batch needs one) beside its data
//! requests; the records are durable when that write completes.
//!
//! As the plain ring engine, it submits around the device's checked front
//! and so checks (`device::check_request`) and counts every request itself.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use device::{check_request, AlignedBuf};
use io_uring::{opcode, squeue, types};

use super::ring::{check_result, new_ring, op_of, Ring, Slots, FLUSH_TAG};
use super::worker::Worker;
use crate::error::WorkloadError;
use crate::gen::{IoKind, Request};
use crate::journal::{JournalWriter, RingCommit};
use crate::stats::ThreadStats;
use crate::validate::{CheckedBy, Validator};

/// What a ring slot's request is doing.
enum Stage {
    /// A read; checked when it completes.
    Read,
    /// A write's pre-read.
    Preread,
    /// A write.
    Writing { sequence: u64, keys: Vec<u8> },
}

/// A request in the kernel, on its slot's buffer.
struct Slot {
    req: Request,
    measured: bool,
    /// When the request was taken (its latency starts there).
    at: Instant,
    stage: Stage,
}

/// A write given its keys, waiting for its `before` record to be durable
/// (group mode: queued already, with this sequence number and ticket;
/// else queued when it is sent) and for a free slot.
struct Waiting {
    req: Request,
    measured: bool,
    at: Instant,
    sequence: Option<u64>,
    keys: Vec<u8>,
    ticket: Option<u64>,
}

/// Per-thread state: the ring, a buffer per slot, the requests in the
/// kernel by slot, and the writes waiting.
struct Engine<'v> {
    v: &'v Validator,
    ring: Ring,
    bufs: Vec<AlignedBuf>,
    slots: Slots<Slot>,
    /// Writes waiting, in the order their records were queued, and how
    /// many may wait beyond one per free slot (group mode; none else).
    ready: VecDeque<Waiting>,
    waiting: usize,
    /// Requests in the kernel (at most the depth: one per slot).
    in_flight: usize,
    /// Slots stamped by `send_ready`, about to be sent (kept for its room).
    sending: Vec<(usize, Request)>,
    /// Group mode: `before` records are queued as writes are taken, and
    /// writes wait for their commit without blocking the worker.
    group: bool,
    /// The journal, when this worker commits it through its ring, and the
    /// commit in the ring.
    journal: Option<&'v JournalWriter>,
    commit: Option<InRing>,
    /// For the read-back of a write (`reread`).
    scratch: AlignedBuf,
    device_name: String,
    /// Flushes of the target due after the reaping: `--flush-every`'s
    /// (one covers them all), or a replay's (one for each sync traced).
    flush_due: u32,
}

/// A journal commit in the ring: its completions still to come (the
/// target flush and the write), and the first failure among them.
struct InRing {
    commit: RingCommit,
    pending: u32,
    failed: Option<(&'static str, io::Error)>,
}

/// `user_data` of a ring commit's target flush and journal write; request
/// slots use their index.
const COMMIT_FLUSH_TAG: u64 = FLUSH_TAG - 1;
const COMMIT_WRITE_TAG: u64 = FLUSH_TAG - 2;

/// Group mode: at most this many writes wait for a commit per worker
/// thread (a request and its keys each, no buffer).
const UNSENT_MAX: usize = 512;

pub(super) fn run(mut w: Worker<'_>, v: &Validator) -> Result<ThreadStats, WorkloadError> {
    let device_name = w.device.name().to_string();
    // Invariant: run_job only starts this engine on devices with a descriptor.
    let fd = w.device.raw_fd().expect("uring engine on a device with a descriptor");
    let depth = w.job.iodepth as usize;
    let max = w.job.bs.max_bytes() as usize;
    let group = v.group_journal().is_some();
    // Group mode: room for the writes waiting for a commit besides those
    // in the kernel (as many as the sync engine's lookahead per request in
    // flight, within a bound).
    let waiting = if group { (v.lookahead() * depth).min(UNSENT_MAX) } else { 0 };
    let align = w.device.buffer_align().max(4096);
    // Room for the depth, a ring commit's two requests, and one to spare.
    let entries = (depth as u32 + 3).next_power_of_two().max(8);
    let ring = new_ring(entries).map_err(|source| WorkloadError::Uring {
        device: device_name.clone(),
        what: "setup",
        source,
    })?;
    let mut e = Engine {
        v,
        ring: Ring::new(ring, fd),
        bufs: (0..depth).map(|_| AlignedBuf::zeroed(max, align)).collect(),
        slots: Slots::new(depth),
        ready: VecDeque::with_capacity(waiting + depth),
        waiting,
        in_flight: 0,
        sending: Vec::with_capacity(depth),
        group,
        journal: v.ring_journal(),
        commit: None,
        scratch: AlignedBuf::zeroed(max, align),
        device_name,
        flush_due: 0,
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
            self.start_commit()?;
            self.send_ready(w)?;
            let idle = self.in_flight == 0 && self.commit.is_none();
            if idle && !self.ready.is_empty() {
                // Nothing in the ring: wait for the oldest write's commit
                // (another worker's, or one made here and now).
                let first = self.ready[0].ticket;
                self.v.journal_wait(first)?;
                continue;
            }
            if idle {
                debug_assert_eq!(self.slots.in_flight(), 0);
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
            // The writes completed so far, made durable by the worker
            // itself, the others going on.
            let due = std::mem::take(&mut self.flush_due);
            let flushes = if w.replaying() { due } else { due.min(1) };
            for _ in 0..flushes {
                w.device.flush()?;
                w.flushed();
            }
        }
    }

    /// How many waiting writes could go to the kernel now (their commit
    /// durable), up to the free slots.
    fn sendable(&self) -> usize {
        let durable = self.ready.iter().take(self.slots.free_count());
        durable.take_while(|r| self.v.journal_durable(r.ticket)).count()
    }

    /// Whether this worker holds key blocks (a request in the kernel or
    /// waiting) or a journal commit in its ring: then it must not wait for
    /// another worker's blocks, since that worker may be waiting for it.
    fn holds_anything(&self) -> bool {
        self.in_flight > 0 || !self.ready.is_empty() || self.commit.is_some()
    }

    /// Takes requests while there is room: reads and pre-reads go to the
    /// kernel on a free slot, writes without a pre-read are given their
    /// keys and wait. Returns true when the worker has no more requests. A
    /// request that finds no room, or whose blocks are taken, waits in
    /// `blocked` while this worker holds anything another may wait for;
    /// holding nothing, the worker waits for the blocks (so two workers
    /// never wait on each other).
    fn fill(
        &mut self,
        w: &mut Worker<'_>,
        blocked: &mut Option<(Request, bool)>,
    ) -> Result<bool, WorkloadError> {
        let preread = self.v.spec().preread;
        loop {
            let write_room = self.ready.len() < self.slots.free_count() + self.waiting;
            if self.slots.free_count() == 0 && !write_room {
                return Ok(false);
            }
            let now = Instant::now();
            if blocked.is_none() && w.rate_wait(now).is_some() {
                return Ok(false);
            }
            let Some((req, measured)) = blocked.take().or_else(|| w.next_request(now)) else {
                return Ok(true);
            };
            let needs_kernel = req.kind == IoKind::Read || preread;
            // A read or pre-read leaves the waiting writes that could go
            // now their slots: they hold their blocks already.
            if (needs_kernel && self.slots.free_count() <= self.sendable()) || (!needs_kernel && !write_room)
            {
                *blocked = Some((req, measured));
                return Ok(false);
            }
            if !self.v.try_lock(&req) {
                if self.holds_anything() {
                    *blocked = Some((req, measured));
                    return Ok(false);
                }
                while !self.v.try_lock(&req) {
                    std::thread::yield_now();
                }
            }
            if needs_kernel {
                // Invariant: checked above that a slot is free.
                let slot = self.slots.next_free().expect("a free slot");
                let stage = if req.kind == IoKind::Read { Stage::Read } else { Stage::Preread };
                self.slots.fill(slot, Slot { req, measured, at: now, stage });
                let read = Request { kind: IoKind::Read, ..req };
                self.submit(w, slot, read)?;
            } else {
                self.queue_write(w, req, measured, now, true)?;
            }
        }
    }

    /// Gives a write (its blocks taken) its keys and lets it wait; in group
    /// mode also queues its `before` record (and kicks the committer
    /// thread, when there is one). Outside group mode, a write just `taken`
    /// (not one whose pre-read completed) is sent at once.
    fn queue_write(
        &mut self,
        w: &mut Worker<'_>,
        req: Request,
        measured: bool,
        at: Instant,
        taken: bool,
    ) -> Result<(), WorkloadError> {
        let keys = self.v.assign(&req);
        let (sequence, ticket) = if self.group {
            let queued = self.v.journal_queue_before(&req, &keys);
            let (sequence, ticket) = match queued {
                Ok(queued) => queued,
                Err(e) => {
                    self.v.unlock(&req);
                    return Err(e);
                }
            };
            if self.journal.is_none() {
                self.v.journal_kick(ticket);
            }
            (Some(sequence), ticket)
        } else {
            (None, None)
        };
        self.ready.push_back(Waiting { req, measured, at, sequence, keys, ticket });
        if taken && !self.group && self.v.lookahead() == 1 {
            // Sent at once, each with its own durable record under a sync
            // journal. Not when a pre-read completes: sending from among
            // the completions being reaped measured 0.70 of sending them
            // after.
            self.send_ready(w)?;
        }
        Ok(())
    }

    /// Sends the waiting writes. Outside group mode, their `before`
    /// records are queued together and waited for (each its own commit in
    /// sync mode, where one waits at a time), and every one has a free
    /// slot. In group mode, sends, in order, those whose commit is
    /// durable, while a slot is free, without waiting. Each is stamped on
    /// its slot's buffer as it goes.
    fn send_ready(&mut self, w: &mut Worker<'_>) -> Result<(), WorkloadError> {
        if self.ready.is_empty() {
            return Ok(());
        }
        if !self.group {
            let mut ticket = None;
            for r in self.ready.iter_mut().filter(|r| r.sequence.is_none()) {
                let (sequence, queued) = self.v.journal_queue_before(&r.req, &r.keys)?;
                r.sequence = Some(sequence);
                ticket = ticket.max(queued);
            }
            self.v.journal_wait(ticket)?;
            debug_assert!(self.ready.len() <= self.slots.free_count());
        }
        // All stamped first, then sent back to back: stamping between the
        // submissions gave the device time to drain, and each submission
        // then had to wake it (a costly exit on a virtual disk).
        let mut sending = std::mem::take(&mut self.sending);
        while let Some(first) = self.ready.front() {
            if self.slots.free_count() == 0 || !self.v.journal_durable(first.ticket) {
                break;
            }
            // Invariant: checked just above.
            let r = self.ready.pop_front().expect("a waiting write");
            let slot = self.slots.next_free().expect("a free slot");
            let len = r.req.len as usize;
            // Invariant: queued at once in group mode, above otherwise.
            let sequence = r.sequence.expect("a write's record is queued before it is sent");
            self.v.fill(&r.req, sequence, &r.keys, &mut self.bufs[slot][..len]);
            let stage = Stage::Writing { sequence, keys: r.keys };
            self.slots.fill(slot, Slot { req: r.req, measured: r.measured, at: r.at, stage });
            sending.push((slot, r.req));
        }
        let sent = sending.drain(..).try_for_each(|(slot, req)| self.submit(w, slot, req));
        self.sending = sending;
        sent
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

    /// Starts a journal commit through the ring when this worker commits
    /// the journal, none is running, and a `before` record waits.
    fn start_commit(&mut self) -> Result<(), WorkloadError> {
        let Some(journal) = self.journal else { return Ok(()) };
        if self.commit.is_some() {
            return Ok(());
        }
        let Some(commit) = journal.begin_ring_commit()? else { return Ok(()) };
        // Invariant: ring_journal() only gives a journal with a ring file.
        let fd = journal.ring_fd().expect("a ring journal has a ring file");
        let write = opcode::Write::new(types::Fd(fd), commit.buf.as_ptr(), commit.buf.len() as u32)
            .offset(commit.offset)
            .build()
            .user_data(COMMIT_WRITE_TAG);
        // Linked: the journal write waits for the flush, and fails
        // (cancelled) when it does.
        let flush =
            commit.flush_target.then(|| self.ring.fdatasync(COMMIT_FLUSH_TAG).flags(squeue::Flags::IO_LINK));
        let pending = 1 + u32::from(flush.is_some());
        // Invariant: the ring has entries for the depth and a commit's two
        // requests, and submissions are handed over at once.
        // SAFETY: the buffer lives in `self.commit` until the write's
        // completion is reaped; a flush references no buffer.
        unsafe {
            let mut sq = self.ring.ring.submission();
            if let Some(flush) = &flush {
                sq.push(flush).expect("submission queue has room");
            }
            sq.push(&write).expect("submission queue has room");
        }
        self.commit = Some(InRing { commit, pending, failed: None });
        if let Err(source) = self.ring.ring.submit() {
            // Nothing may be in the kernel: end the commit as failed (it
            // poisons the journal) rather than leave the others waiting.
            let commit = self.commit.take().expect("just set").commit;
            let copy = io::Error::new(source.kind(), source.to_string());
            journal.end_ring_commit(commit, Err(("cannot submit", copy)))?;
            return Err(self.uring_err("submit")(source));
        }
        Ok(())
    }

    /// One completion of the ring commit; the last one ends the commit.
    fn commit_done(&mut self, tag: u64, result: i32) -> Result<(), WorkloadError> {
        // Invariant: commit tags only come back while a commit is in the ring.
        let c = self.commit.as_mut().expect("a commit completion with a commit in the ring");
        c.pending -= 1;
        if c.failed.is_none() {
            if result < 0 {
                let what = if tag == COMMIT_FLUSH_TAG {
                    "cannot flush the target before a commit"
                } else {
                    "cannot write"
                };
                c.failed = Some((what, io::Error::from_raw_os_error(-result)));
            } else if tag == COMMIT_WRITE_TAG && result as usize != c.commit.buf.len() {
                let short = format!("short write: {result} of {} bytes", c.commit.buf.len());
                c.failed = Some(("cannot write", io::Error::new(io::ErrorKind::WriteZero, short)));
            }
        }
        if c.pending > 0 {
            return Ok(());
        }
        let c = self.commit.take().expect("checked above");
        // Invariant: a commit is only in the ring of a worker with a journal.
        let journal = self.journal.expect("a ring commit has a journal");
        journal.end_ring_commit(c.commit, c.failed.map_or(Ok(()), Err))?;
        Ok(())
    }

    /// Takes every completion off the ring and moves its request on.
    fn reap(&mut self, w: &mut Worker<'_>) -> Result<(), WorkloadError> {
        let done: Vec<(u64, i32)> =
            self.ring.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        let mut outcome = Ok(());
        for (tag, result) in done {
            let step = if tag == COMMIT_FLUSH_TAG || tag == COMMIT_WRITE_TAG {
                if tag == COMMIT_FLUSH_TAG && result < 0 {
                    // The target's fdatasync failed: what reached its disk
                    // is unknown, as after a failed flush through the front.
                    let cause = io::Error::from_raw_os_error(-result);
                    w.device.poison(format!("an io_uring fdatasync before a journal commit failed: {cause}"));
                }
                self.commit_done(tag, result)
            } else {
                self.in_flight -= 1;
                self.complete(w, tag as usize, result)
            };
            if outcome.is_ok() {
                outcome = step;
            }
        }
        outcome
    }

    /// One completion: a read is checked; a pre-read is checked and its
    /// write waits; a write is recorded and journaled. The slot is free
    /// again; a finished request gives back its blocks.
    fn complete(&mut self, w: &mut Worker<'_>, slot: usize, result: i32) -> Result<(), WorkloadError> {
        let s = self.slots.get(slot);
        let io = if matches!(s.stage, Stage::Writing { .. }) {
            s.req
        } else {
            Request { kind: IoKind::Read, ..s.req }
        };
        // A failed request keeps its slot: `abandon` gives its blocks back.
        check_result(&self.device_name, io, result)?;
        let s = self.slots.release(slot);
        let (req, len) = (s.req, s.req.len as usize);
        match io.kind {
            // JobSpec::check keeps trims from validated runs and simulated disks.
            IoKind::Read | IoKind::Trim => w.device.stats().record_reads(1, req.len),
            IoKind::Write => w.device.stats().record_writes(1, req.len),
        }
        let go_on = match s.stage {
            Stage::Read => self.v.check(&req, &self.bufs[slot][..len], CheckedBy::Read),
            Stage::Preread => {
                let go_on = self.v.check(&req, &self.bufs[slot][..len], CheckedBy::Preread);
                if !go_on {
                    w.limits.stop.store(true, Relaxed);
                }
                return self.queue_write(w, req, s.measured, s.at, false);
            }
            Stage::Writing { sequence, keys } => {
                self.v.written(&req, &keys);
                let journaled = self.v.journal_after(sequence, &req);
                match journaled.and_then(|()| self.reread(w, req)) {
                    Ok(go_on) => go_on,
                    Err(e) => {
                        self.v.unlock(&req);
                        return Err(e);
                    }
                }
            }
        };
        self.v.unlock(&req);
        if !go_on {
            w.limits.stop.store(true, Relaxed);
        }
        let now = Instant::now();
        w.complete(req.kind, req.len, now - s.at, now, s.measured);
        self.flush_due += u32::from(w.flush_due(req));
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
        while self.in_flight > 0 || self.commit.is_some() {
            if self.ring.ring.submit_and_wait(1).is_err() {
                break;
            }
            let done: Vec<(u64, i32)> =
                self.ring.ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (tag, result) in done {
                if tag == COMMIT_FLUSH_TAG || tag == COMMIT_WRITE_TAG {
                    // The commit ends as the ring says (durable, or the
                    // journal poisoned), so no other worker waits for it.
                    let _ = self.commit_done(tag, result);
                    continue;
                }
                self.in_flight -= 1;
                if let Some(s) = self.slots.release_if_taken(tag as usize) {
                    self.v.unlock(&s.req);
                }
            }
        }
        if let (Some(c), Some(journal)) = (self.commit.take(), self.journal) {
            // The ring broke with the commit in it: the kernel may still
            // read its buffer, so it is leaked rather than freed.
            let InRing { commit, .. } = c;
            let failed = io::Error::other("the ring failed with the commit in it");
            let _ = journal.end_ring_commit_leaking(commit, ("cannot wait for the commit", failed));
        }
        for r in self.ready.drain(..) {
            self.v.unlock(&r.req);
        }
        for s in self.slots.release_all() {
            self.v.unlock(&s.req);
        }
    }

    fn uring_err(&self, what: &'static str) -> impl FnOnce(io::Error) -> WorkloadError {
        let device = self.device_name.clone();
        move |source| WorkloadError::Uring { device, what, source }
    }
}
