//! Validation in virtual time: the sync engine's validated workers
//! (`sync.rs`) and their journal, run as a discrete-event simulation on
//! the calling thread, on a simulated target with the journal on a
//! simulated disk of its own. Each worker is a lane that does what a sync
//! worker thread does, one step at a time: it prepares requests up to the
//! validator's lookahead (key blocks taken, a write's old contents
//! pre-read and checked, its keys given and its `before` record queued),
//! then issues them in order, one at a time: a write waits until its
//! `before` record is durable, is stamped and written, and under a sync
//! journal waits again for its `after` record. Where the thread would
//! block (a disk request, a commit, a rate wait, a block another worker
//! holds), the lane waits for that event instead.
//!
//! The engine sends the journal's commits itself
//! ([`JournalWriter::drive_commits`]): whenever none is running and one is
//! due, a flush of the target when the batch needs it, the journal write,
//! then the journal's flush, each a request in its disk's model. Threads
//! racing for locks decide nothing here: at each instant the lanes act in
//! their order, so the same job gives the same figures, byte for byte.
//! Two things go through the devices' ordinary calls instead: a journal
//! compaction (rare: when a slot fills), which then holds every lane up
//! for the time it takes, and the journal's last commit after the run.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use device::{check_request, AlignedBuf, Device, Nanos, Op, VData, VirtualClock, VirtualDisk};
use rustc_hash::FxHashMap;

use super::ring::op_of;
use super::worker::Worker;
use crate::error::WorkloadError;
use crate::gen::{IoKind, Request};
use crate::journal::{JournalWriter, RingCommit};
use crate::stats::ThreadStats;
use crate::validate::{CheckedBy, Validator};

/// Requests a lane keeps aside while their key blocks are busy (as the
/// sync engine's `PARKED_MAX`).
const PARKED_MAX: usize = 8;

/// A request prepared: its key blocks taken; for a write, its keys,
/// sequence number and journal ticket.
struct Prepared {
    req: Request,
    measured: bool,
    /// When it was taken (virtual).
    at: Nanos,
    write: Option<(u64, Vec<u8>, Option<u64>)>,
    go_on: bool,
}

/// What a lane does when it next runs.
enum Step {
    /// Prepares up to the lookahead, then issues the oldest prepared.
    Fill,
    /// A write's pre-read completed: check it, queue the write's record.
    Preread { req: Request, measured: bool, at: Nanos },
    /// Issues a prepared request (a write: once its `before` is durable).
    Issue(Prepared),
    /// A data write completed.
    Written(Prepared),
    /// Reads the write back, when the job asks to, and finishes it.
    Reread(Prepared),
    /// A read (or the read-back of a write) completed: check it.
    Read(Prepared, CheckedBy),
    /// The flush `--flush-every` asked for after a write completed.
    Flushed,
}

/// What a lane waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Nothing: it runs at this instant.
    Run,
    /// A request of its own in a disk.
    Disk,
    /// A journal commit: until `ticket` is durable (since `since`).
    Ticket {
        ticket: u64,
        since: Nanos,
    },
    /// A rate wait, until this instant.
    Until(Nanos),
    /// A key block another lane holds: runs again when blocks are given
    /// back.
    Busy,
    Done,
}

struct Lane<'a> {
    w: Worker<'a>,
    step: Step,
    wait: Wait,
    ready: VecDeque<Prepared>,
    parked: VecDeque<(Request, bool)>,
    /// The end of the last request issued: a request's latency starts at
    /// the later of this and its taking, as the sync engine's does.
    last_done: Nanos,
    read_buf: AlignedBuf,
    write_buf: AlignedBuf,
}

/// What a request in a model is for.
#[derive(Clone, Copy)]
enum InFlight {
    Lane(usize),
    Commit,
}

/// Which disk: the target or the journal's.
const TARGET: u8 = 0;
const JOURNAL: u8 = 1;

/// The journal commit in the models, and its next request.
struct Commit {
    rc: RingCommit,
    stage: CommitStage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CommitStage {
    FlushTarget,
    Write,
    FlushJournal,
}

/// The simulation: the lanes, the disks, and what is in their models.
struct Sim<'a, 'v> {
    v: &'v Validator,
    lanes: Vec<Lane<'a>>,
    target: &'a dyn VirtualDisk,
    device: &'a dyn Device,
    /// The job's virtual clock, whose hooks (a power cut's) run when the
    /// simulation reaches their instant.
    clock: Option<&'a VirtualClock>,
    /// The journal's disk (as a device, for its checks and counters).
    journal: Option<(&'v JournalWriter, &'v dyn Device, &'v dyn VirtualDisk)>,
    commit: Option<Commit>,
    flight: FxHashMap<(u8, u64), InFlight>,
    now: Nanos,
    t0: Nanos,
    epoch: Instant,
    /// Key blocks were given back at this instant: busy lanes try again.
    unlocked: bool,
    /// The latest completion (the run's end).
    last: Nanos,
}

/// Runs every worker to its end on `disk` under validation by `v`; their
/// statistics and the virtual time from the start to the end (the last
/// completion, the end flush and the journal's final commit). `epoch`
/// is the real instant virtual time 0 of the run stands for.
pub(super) fn run<'a>(
    workers: Vec<Worker<'a>>,
    v: &Validator,
    disk: &'a dyn VirtualDisk,
    epoch: Instant,
    end_flush: bool,
) -> Result<(Vec<ThreadStats>, Nanos), WorkloadError> {
    let Some(first) = workers.first() else { return Ok((Vec::new(), 0)) };
    let device = first.device;
    let first_clock = &first.job.clock;
    let journal = match v.journal() {
        None => None,
        Some(j) => {
            let Some((dev, vdisk)) = journal_disk(v) else {
                return Err(device::DeviceError::Invalid(format!(
                    "{}: validation in virtual time needs its journal on a simulated disk (--journal sim:...)",
                    disk.describe()
                ))
                .into());
            };
            j.drive_commits();
            Some((j, dev, vdisk))
        }
    };
    let t0 = disk.now();
    let lanes = workers
        .into_iter()
        .map(|w| {
            let max = w.job.bs.max_bytes() as usize;
            let align = w.device.buffer_align().max(4096);
            Lane {
                w,
                step: Step::Fill,
                wait: Wait::Run,
                ready: VecDeque::new(),
                parked: VecDeque::new(),
                last_done: t0,
                read_buf: AlignedBuf::zeroed(max, align),
                write_buf: AlignedBuf::zeroed(max, align),
            }
        })
        .collect();
    let mut sim = Sim {
        v,
        lanes,
        target: disk,
        device,
        clock: match &first_clock {
            device::Clock::Virtual(clock) => Some(clock),
            device::Clock::Wall => None,
        },
        journal,
        commit: None,
        flight: FxHashMap::default(),
        now: t0,
        t0,
        epoch,
        unlocked: false,
        last: t0,
    };
    let outcome = sim.run();
    // After an error: every block still taken is given back.
    for lane in &mut sim.lanes {
        lane.ready.drain(..).for_each(|p| v.unlock(&p.req));
    }
    outcome?;
    sim.finish(end_flush)?;
    let last = sim.last;
    Ok((sim.lanes.into_iter().map(|l| l.w.stats).collect(), last - t0))
}

/// The journal's disk: the device its place names, when simulated.
fn journal_disk(v: &Validator) -> Option<(&dyn Device, &dyn VirtualDisk)> {
    match &v.spec().journal.as_ref()?.place {
        crate::journal::JournalPlace::Device(dev) => dev.virtual_disk().map(|d| (dev.as_ref(), d)),
        crate::journal::JournalPlace::Dir(_) => None,
    }
}

impl<'a> Sim<'a, '_> {
    /// The real instant virtual time `t` stands for.
    fn at(&self, t: Nanos) -> Instant {
        self.epoch + Duration::from_nanos(t - self.t0)
    }

    fn run(&mut self) -> Result<(), WorkloadError> {
        loop {
            self.settle()?;
            if self.flight.is_empty() && self.lanes.iter().all(|l| l.wait == Wait::Done) {
                return Ok(());
            }
            let wake = self.lanes.iter().filter_map(|l| match l.wait {
                Wait::Until(t) => Some(t),
                _ => None,
            });
            let journal_next = self.journal.and_then(|(_, _, d)| d.next_event());
            let hook = self.clock.and_then(|c| c.next_hook());
            let events = self.target.next_event().into_iter().chain(journal_next).chain(wake).chain(hook);
            let Some(next) = events.min() else {
                return Err(device::DeviceError::Invalid(format!(
                    "{}: the simulation stopped with {} request(s) in flight and {} worker(s) waiting",
                    self.target.describe(),
                    self.flight.len(),
                    self.lanes.iter().filter(|l| l.wait != Wait::Done).count()
                ))
                .into());
            };
            self.now = self.now.max(next);
            self.advance()?;
        }
    }

    /// Runs the models to `now`, then the clock's hooks due (a power
    /// cut's images), then hands out what completed.
    fn advance(&mut self) -> Result<(), WorkloadError> {
        let now = self.now;
        let mut done: Vec<(u8, u64, Nanos)> =
            self.target.advance(now).into_iter().map(|(id, t)| (TARGET, id, t)).collect();
        if let Some((_, _, d)) = self.journal {
            done.extend(d.advance(now).into_iter().map(|(id, t)| (JOURNAL, id, t)));
        }
        if let Some(clock) = self.clock {
            clock.run_hooks(now);
        }
        for (disk, id, t) in done {
            // Invariant: every id the models complete was submitted here.
            let Some(what) = self.flight.remove(&(disk, id)) else { continue };
            self.last = self.last.max(t);
            match what {
                InFlight::Lane(i) => self.lanes[i].wait = Wait::Run,
                InFlight::Commit => self.commit_step()?,
            }
        }
        for lane in &mut self.lanes {
            if matches!(lane.wait, Wait::Until(t) if t <= now) {
                lane.wait = Wait::Run;
            }
        }
        Ok(())
    }

    /// Lets every lane that can act at this instant act, in lane order,
    /// and starts the journal's commits, until nothing more can happen
    /// before time moves on.
    fn settle(&mut self) -> Result<(), WorkloadError> {
        loop {
            let mut moved = false;
            for i in 0..self.lanes.len() {
                if self.lanes[i].wait == Wait::Run {
                    self.step(i)?;
                    moved = true;
                }
            }
            if std::mem::take(&mut self.unlocked) {
                for lane in self.lanes.iter_mut().filter(|l| l.wait == Wait::Busy) {
                    lane.wait = Wait::Run;
                    moved = true;
                }
            }
            if self.commit.is_none() {
                moved |= self.start_commit()?;
            }
            moved |= self.wake_durable();
            if !moved {
                return Ok(());
            }
        }
    }

    /// Wakes the lanes whose commit is durable; whether any woke.
    fn wake_durable(&mut self) -> bool {
        let Some((journal, _, _)) = self.journal else { return false };
        let mut woke = false;
        for lane in &mut self.lanes {
            if let Wait::Ticket { ticket, since } = lane.wait {
                if journal.is_durable(ticket) {
                    journal.count_wait(Duration::from_nanos(self.now - since));
                    lane.wait = Wait::Run;
                    woke = true;
                }
            }
        }
        woke
    }

    /// Starts a journal commit if one is due; whether one started.
    fn start_commit(&mut self) -> Result<bool, WorkloadError> {
        let Some((journal, _, _)) = self.journal else { return Ok(false) };
        let before = self.target.now();
        let begun = journal.begin_driven_commit()?;
        // A compaction runs through the journal device's own calls: the
        // clock moved on, and every lane with it.
        let after = self.target.now();
        if after > before {
            self.now = self.now.max(after);
            self.advance()?;
        }
        let Some(rc) = begun else { return Ok(after > before) };
        let stage = if rc.flush_target { CommitStage::FlushTarget } else { CommitStage::Write };
        self.commit = Some(Commit { rc, stage });
        self.send_commit()?;
        Ok(true)
    }

    /// Sends the commit's current request.
    fn send_commit(&mut self) -> Result<(), WorkloadError> {
        // Invariant: called with a commit in the models, and a journal.
        let c = self.commit.as_ref().expect("a commit");
        let (_, jdev, jdisk) = self.journal.expect("a journal");
        let (disk, id) = match c.stage {
            CommitStage::FlushTarget => {
                check_request(self.device, Op::Flush, 0, 0, 0)?;
                (TARGET, self.target.submit(self.now, 0, VData::Flush)?)
            }
            CommitStage::Write => {
                let buf = &c.rc.buf[..];
                check_request(jdev, Op::Write, buf.as_ptr() as usize, buf.len(), c.rc.offset)?;
                (JOURNAL, jdisk.submit(self.now, c.rc.offset, VData::Write(buf))?)
            }
            CommitStage::FlushJournal => {
                check_request(jdev, Op::Flush, 0, 0, 0)?;
                (JOURNAL, jdisk.submit(self.now, 0, VData::Flush)?)
            }
        };
        self.flight.insert((disk, id), InFlight::Commit);
        Ok(())
    }

    /// The commit's request completed: counts it and sends the next, or
    /// ends the commit.
    fn commit_step(&mut self) -> Result<(), WorkloadError> {
        // Invariant: commit requests complete only while a commit runs.
        let c = self.commit.as_mut().expect("a commit in the models");
        let (journal, jdev, _) = self.journal.expect("a journal");
        let next = match c.stage {
            CommitStage::FlushTarget => {
                self.device.stats().record_flush();
                Some(CommitStage::Write)
            }
            CommitStage::Write => {
                jdev.stats().record_writes(1, c.rc.buf.len() as u64);
                c.rc.durable.then_some(CommitStage::FlushJournal)
            }
            CommitStage::FlushJournal => {
                jdev.stats().record_flush();
                None
            }
        };
        match next {
            Some(stage) => {
                c.stage = stage;
                self.send_commit()
            }
            None => {
                // Invariant: checked above.
                let c = self.commit.take().expect("a commit");
                journal.end_ring_commit(c.rc, Ok(()))?;
                Ok(())
            }
        }
    }

    /// Runs lane `i` from its step until it waits.
    ///
    /// Long on purpose: one match over the lane's steps (journal before,
    /// write, journal after, read and check), each a few lines, is the
    /// state machine in one place to read against the journal's order.
    fn step(&mut self, i: usize) -> Result<(), WorkloadError> {
        let now = self.now;
        let instant = self.at(now);
        loop {
            let lane = &mut self.lanes[i];
            match std::mem::replace(&mut lane.step, Step::Fill) {
                Step::Fill => {
                    if self.fill(i, instant)? {
                        return Ok(());
                    }
                    let lane = &mut self.lanes[i];
                    let Some(p) = lane.ready.pop_front() else {
                        lane.wait = Wait::Done;
                        return Ok(());
                    };
                    lane.step = Step::Issue(p);
                }
                Step::Preread { req, measured, at } => {
                    let len = req.len as usize;
                    let go_on = self.v.check(&req, &lane.read_buf[..len], CheckedBy::Preread);
                    let keys = self.v.assign(&req);
                    let (sequence, ticket) = match self.v.journal_queue_before(&req, &keys) {
                        Ok(queued) => queued,
                        Err(e) => {
                            self.v.unlock(&req);
                            return Err(e);
                        }
                    };
                    let write = Some((sequence, keys, ticket));
                    lane.ready.push_back(Prepared { req, measured, at, write, go_on });
                }
                Step::Issue(p) => {
                    let Some((sequence, keys, ticket)) = &p.write else {
                        lane.step = Step::Read(p, CheckedBy::Read);
                        return self.submit_read(i);
                    };
                    if !self.v.journal_durable(*ticket) {
                        // Invariant: a ticket comes from a journal.
                        lane.wait = Wait::Ticket { ticket: ticket.expect("a journal ticket"), since: now };
                        lane.step = Step::Issue(p);
                        return Ok(());
                    }
                    let len = p.req.len as usize;
                    self.v.fill(&p.req, *sequence, keys, &mut lane.write_buf[..len]);
                    let req = p.req;
                    lane.step = Step::Written(p);
                    return self.submit(i, req);
                }
                Step::Written(p) => {
                    // Invariant: only writes are written.
                    let (sequence, keys, _) = p.write.as_ref().expect("a write");
                    self.v.written(&p.req, keys);
                    let ticket = match self.v.journal_queue_after(*sequence, &p.req) {
                        Ok(ticket) => ticket,
                        Err(e) => {
                            self.v.unlock(&p.req);
                            return Err(e);
                        }
                    };
                    lane.step = Step::Reread(p);
                    if let Some(ticket) = ticket.filter(|t| !self.v.journal_durable(Some(*t))) {
                        lane.wait = Wait::Ticket { ticket, since: now };
                        return Ok(());
                    }
                }
                Step::Reread(p) => {
                    if self.v.spec().reread {
                        lane.step = Step::Read(p, CheckedBy::Reread);
                        return self.submit_read(i);
                    }
                    if self.done(i, p) {
                        return self.submit_flush(i);
                    }
                }
                Step::Read(mut p, by) => {
                    let len = p.req.len as usize;
                    p.go_on &= self.v.check(&p.req, &lane.read_buf[..len], by);
                    if self.done(i, p) {
                        return self.submit_flush(i);
                    }
                }
                Step::Flushed => {
                    self.device.stats().record_flush();
                    lane.w.flushed();
                }
            }
        }
    }

    /// Prepares requests on lane `i` up to the lookahead, as the sync
    /// engine's worker does; true when the lane must wait first (a
    /// pre-read in a disk, a rate wait, a busy block).
    fn fill(&mut self, i: usize, instant: Instant) -> Result<bool, WorkloadError> {
        let lookahead = self.v.lookahead();
        while self.lanes[i].ready.len() < lookahead {
            let lane = &mut self.lanes[i];
            let idle = lane.ready.is_empty();
            let (req, measured) = match next_lockable(lane, self.v, instant, idle) {
                Take::Got(taken) => taken,
                Take::Nothing => break,
                Take::Sleep(wait) => {
                    lane.wait = Wait::Until(self.now + wait.as_nanos() as Nanos);
                    return Ok(true);
                }
                Take::Busy => {
                    lane.wait = Wait::Busy;
                    return Ok(true);
                }
            };
            let at = self.now;
            if req.kind == IoKind::Write && self.v.spec().preread {
                lane.step = Step::Preread { req, measured, at };
                self.submit_read(i)?;
                return Ok(true);
            }
            let write = match req.kind {
                IoKind::Read | IoKind::Trim => None,
                IoKind::Write => {
                    let keys = self.v.assign(&req);
                    match self.v.journal_queue_before(&req, &keys) {
                        Ok((sequence, ticket)) => Some((sequence, keys, ticket)),
                        Err(e) => {
                            self.v.unlock(&req);
                            return Err(e);
                        }
                    }
                }
            };
            lane.ready.push_back(Prepared { req, measured, at, write, go_on: true });
        }
        Ok(false)
    }

    /// Reads lane `i`'s current request (its step names it) into the
    /// lane's read buffer.
    fn submit_read(&mut self, i: usize) -> Result<(), WorkloadError> {
        let req = match &self.lanes[i].step {
            Step::Preread { req, .. } => *req,
            Step::Read(p, _) => p.req,
            // Invariant: called only on a step that reads.
            _ => unreachable!("a read on a step that does not read"),
        };
        self.submit(i, Request { kind: IoKind::Read, ..req })
    }

    /// Hands `req` of lane `i` to the target's model.
    fn submit(&mut self, i: usize, req: Request) -> Result<(), WorkloadError> {
        let lane = &mut self.lanes[i];
        let len = req.len as usize;
        let data = match req.kind {
            IoKind::Read | IoKind::Trim => VData::Read(&mut lane.read_buf[..len]),
            IoKind::Write => VData::Write(&lane.write_buf[..len]),
        };
        let buf = match &data {
            VData::Read(b) => b.as_ptr(),
            VData::Write(b) => b.as_ptr(),
            VData::Flush => std::ptr::null(),
        };
        check_request(self.device, op_of(req.kind), buf as usize, len, req.offset)?;
        let id = self.target.submit(self.now, req.offset, data)?;
        match req.kind {
            // JobSpec::check keeps trims from validated runs and simulated disks.
            IoKind::Read | IoKind::Trim => self.device.stats().record_reads(1, req.len),
            IoKind::Write => self.device.stats().record_writes(1, req.len),
        }
        self.flight.insert((TARGET, id), InFlight::Lane(i));
        lane.wait = Wait::Disk;
        Ok(())
    }

    /// Flushes the target for lane `i` (`--flush-every`): a request in
    /// the target's model, which the lane waits for.
    fn submit_flush(&mut self, i: usize) -> Result<(), WorkloadError> {
        check_request(self.device, Op::Flush, 0, 0, 0)?;
        let id = self.target.submit(self.now, 0, VData::Flush)?;
        self.flight.insert((TARGET, id), InFlight::Lane(i));
        let lane = &mut self.lanes[i];
        lane.step = Step::Flushed;
        lane.wait = Wait::Disk;
        Ok(())
    }

    /// Ends a request of lane `i`: gives its blocks back and counts it;
    /// returns whether a flush is due after it (`--flush-every`).
    fn done(&mut self, i: usize, p: Prepared) -> bool {
        self.v.unlock(&p.req);
        self.unlocked = true;
        let now = self.now;
        let instant = self.at(now);
        let lane = &mut self.lanes[i];
        if !p.go_on {
            lane.w.limits.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let start = p.at.max(lane.last_done);
        lane.last_done = now;
        lane.w.complete(p.req.kind, p.req.len, Duration::from_nanos(now - start), instant, p.measured);
        lane.w.flush_due(p.req)
    }

    /// After the run: the end flush, when the job has one, then the
    /// journal's last commit (through the devices' ordinary calls, which
    /// move the clock on).
    fn finish(&mut self, end_flush: bool) -> Result<(), WorkloadError> {
        if end_flush {
            check_request(self.device, Op::Flush, 0, 0, 0)?;
            let id = self.target.submit(self.now, 0, VData::Flush)?;
            self.last = self.last.max(super::vtime::run_until(self.target, id, self.now)?);
            self.device.stats().record_flush();
        }
        self.v.finish()?;
        self.last = self.last.max(self.target.now());
        Ok(())
    }
}

/// What a lane got when it asked for a request to prepare.
enum Take {
    Got((Request, bool)),
    /// Nothing to take now: the lane issues what it prepared (or ends).
    Nothing,
    /// A rate wait first.
    Sleep(Duration),
    /// Nothing prepared and every request at hand busy.
    Busy,
}

/// The next request to prepare, its key blocks taken: a parked one whose
/// blocks are free, else a new one (parked when its blocks are busy and
/// there is room); as the sync engine's `next_lockable`.
fn next_lockable(lane: &mut Lane<'_>, v: &Validator, now: Instant, idle: bool) -> Take {
    loop {
        if let Some(i) = lane.parked.iter().position(|(req, _)| v.try_lock(req)) {
            // Invariant: the position was just found.
            return Take::Got(lane.parked.remove(i).expect("a parked request"));
        }
        let fresh = if lane.parked.len() < PARKED_MAX {
            if let Some(wait) = lane.w.rate_wait(now) {
                if !idle || lane.w.finished(now) {
                    return Take::Nothing;
                }
                return Take::Sleep(wait);
            }
            lane.w.next_request(now)
        } else {
            None
        };
        match fresh {
            Some(taken) if v.try_lock(&taken.0) => return Take::Got(taken),
            Some(busy) => lane.parked.push_back(busy),
            None if lane.parked.is_empty() || !idle => return Take::Nothing,
            None => return Take::Busy,
        }
    }
}
