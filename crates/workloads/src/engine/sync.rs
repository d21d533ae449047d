//! The sync engine: each worker thread issues one positional call at a
//! time. Works on every device.

use std::collections::VecDeque;
use std::time::Instant;

use device::AlignedBuf;

use super::worker::{data_buffer, Worker};
use crate::error::WorkloadError;
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;
use crate::validate::{CheckedBy, Validator};

pub(super) fn run(mut w: Worker<'_>) -> Result<ThreadStats, WorkloadError> {
    if let Some(v) = w.validator {
        return run_validated(w, v);
    }
    let max = w.job.bs.max_bytes() as usize;
    let align = w.device.buffer_align().max(4096);
    let mut write_buf = data_buffer(max, align, w.job.pattern, w.job.seed);
    let mut read_buf = AlignedBuf::zeroed(max, align);
    loop {
        let now = w.now();
        if let Some(wait) = w.rate_wait(now) {
            if w.finished(now) {
                break;
            }
            w.limits.time.sleep(wait)?;
            continue;
        }
        let Some((req, measured)) = w.next_request(now) else { break };
        let len = req.len as usize;
        let start = w.now();
        match req.kind {
            IoKind::Read => w.device.read_at(&mut read_buf[..len], req.offset)?,
            IoKind::Write => {
                w.scramble(&mut write_buf[..len], &req);
                w.device.write_at(&write_buf[..len], req.offset)?
            }
            IoKind::Trim => w.device.discard(req.offset, req.len)?,
        }
        let done = w.now();
        w.complete(req.kind, req.len, done - start, done, measured);
        if w.flush_due(req) {
            w.device.flush()?;
            w.flushed();
        }
    }
    Ok(w.stats)
}

/// A request a validating worker has prepared: its key blocks taken and,
/// for a write, its old contents checked, its sequence and keys assigned
/// and its `before` record queued in the journal. The write is stamped
/// only when it goes out, on the worker's one write buffer: prepared
/// writes hold no buffer, so the lookahead costs no cache.
struct Prepared {
    req: Request,
    measured: bool,
    at: Instant,
    /// Writes: sequence, keys, journal ticket.
    write: Option<(u64, Vec<u8>, Option<u64>)>,
    go_on: bool,
}

/// Under validation: requests are prepared up to [`Validator::lookahead`]
/// ahead (with a group-commit journal, the commit of the next requests'
/// `before` records then overlaps this request's data write), then issued
/// in order. Requests touching the same key blocks never overlap: a
/// prepared request holds its blocks until it completes; a request whose
/// blocks are busy is parked (up to [`PARKED_MAX`]) while later ones are
/// prepared, and a worker waits for a block only when it holds none.
fn run_validated(mut w: Worker<'_>, v: &Validator) -> Result<ThreadStats, WorkloadError> {
    let max = w.job.bs.max_bytes() as usize;
    let align = w.device.buffer_align().max(4096);
    let mut write_buf = AlignedBuf::zeroed(max, align);
    let mut read_buf = AlignedBuf::zeroed(max, align);
    let mut ready: VecDeque<Prepared> = VecDeque::new();
    let mut parked: VecDeque<(Request, bool)> = VecDeque::new();
    let mut last_done = w.now();
    let mut outcome = Ok(());
    // The request issued half the lookahead from now: its commit should
    // start now, on the committer thread, to be durable by then.
    let kick_at = v.lookahead() / 2;
    while outcome.is_ok() {
        while ready.len() < v.lookahead() {
            let Some((req, measured)) = next_lockable(&mut w, v, &mut parked, ready.is_empty()) else {
                break;
            };
            match prepare(&w, v, req, measured, &mut read_buf) {
                Ok(p) => ready.push_back(p),
                Err(e) => {
                    v.unlock(&req);
                    outcome = Err(e);
                    break;
                }
            }
        }
        let Some(p) = ready.pop_front() else { break };
        // (Or the last prepared, when fewer are.)
        let kicked = ready.get(kick_at.min(ready.len().saturating_sub(1)));
        if let Some(Prepared { write: Some((_, _, ticket)), .. }) = kicked {
            v.journal_kick(*ticket);
        }
        let start = p.at.max(last_done);
        let (req, measured) = (p.req, p.measured);
        let issued = issue(&w, v, p, &mut read_buf, &mut write_buf);
        v.unlock(&req);
        match issued {
            Ok(true) => {}
            Ok(false) => w.limits.stop.store(true, std::sync::atomic::Ordering::Relaxed),
            Err(e) => outcome = Err(e),
        }
        last_done = w.now();
        w.complete(req.kind, req.len, last_done - start, last_done, measured);
        if outcome.is_ok() && w.flush_due(req) {
            match w.device.flush() {
                Ok(()) => w.flushed(),
                Err(e) => outcome = Err(e.into()),
            }
        }
    }
    // After an error: give back the blocks of what was prepared, unissued.
    for p in ready {
        v.unlock(&p.req);
    }
    outcome.map(|()| w.stats)
}

/// Parked requests a worker keeps at most: requests whose key blocks
/// another request holds wait aside while later ones are prepared, so one
/// busy block does not empty the worker's lookahead (and make it wait for
/// a commit it could have seen coming).
const PARKED_MAX: usize = 8;

/// The next request to prepare, its key blocks taken: a parked one whose
/// blocks are free, else a new one (parked when its blocks are busy and
/// there is room). Returns None when nothing can be taken now (the worker
/// issues what it has prepared) or the job has no more requests; with
/// nothing prepared (`idle`), waits for a busy block instead.
fn next_lockable(
    w: &mut Worker<'_>,
    v: &Validator,
    parked: &mut VecDeque<(Request, bool)>,
    idle: bool,
) -> Option<(Request, bool)> {
    loop {
        if let Some(i) = parked.iter().position(|(req, _)| v.try_lock(req)) {
            return parked.remove(i);
        }
        let now = w.now();
        let fresh = if parked.len() < PARKED_MAX {
            if let Some(wait) = w.rate_wait(now) {
                if !idle || w.finished(now) {
                    return None;
                }
                if w.limits.time.sleep(wait).is_err() {
                    return None;
                }
                continue;
            }
            w.next_request(now)
        } else {
            None
        };
        match fresh {
            Some((req, measured)) if v.try_lock(&req) => return Some((req, measured)),
            Some(busy) => parked.push_back(busy),
            None if parked.is_empty() || !idle => return None,
            // Nothing prepared and every request at hand busy: another
            // worker holds the blocks and will give them back.
            None => w.limits.time.pause(),
        }
    }
}

/// Prepares a request whose key blocks the caller took.
fn prepare(
    w: &Worker<'_>,
    v: &Validator,
    req: Request,
    measured: bool,
    read_buf: &mut AlignedBuf,
) -> Result<Prepared, WorkloadError> {
    let at = w.now();
    let len = req.len as usize;
    let mut go_on = true;
    let write = match req.kind {
        // JobSpec::check refuses trims with validation.
        IoKind::Read | IoKind::Trim => None,
        IoKind::Write => {
            if v.spec().preread {
                w.device.read_at(&mut read_buf[..len], req.offset)?;
                go_on &= v.check(&req, &read_buf[..len], CheckedBy::Preread);
            }
            let keys = v.assign(&req);
            let (sequence, ticket) = v.journal_queue_before(&req, &keys)?;
            Some((sequence, keys, ticket))
        }
    };
    Ok(Prepared { req, measured, at, write, go_on })
}

/// Issues a prepared request: a read is checked; a write waits for its
/// `before` record to be durable, is stamped, goes out, and is recorded.
fn issue(
    w: &Worker<'_>,
    v: &Validator,
    p: Prepared,
    read_buf: &mut AlignedBuf,
    write_buf: &mut AlignedBuf,
) -> Result<bool, WorkloadError> {
    let (req, len) = (p.req, p.req.len as usize);
    let mut go_on = p.go_on;
    let Some((sequence, keys, ticket)) = p.write else {
        w.device.read_at(&mut read_buf[..len], req.offset)?;
        return Ok(go_on & v.check(&req, &read_buf[..len], CheckedBy::Read));
    };
    v.journal_wait(ticket)?;
    v.fill(&req, sequence, &keys, &mut write_buf[..len]);
    w.device.write_at(&write_buf[..len], req.offset)?;
    v.written(&req, &keys);
    v.journal_after(sequence, &req)?;
    if v.spec().reread {
        w.device.read_at(&mut read_buf[..len], req.offset)?;
        go_on &= v.check(&req, &read_buf[..len], CheckedBy::Reread);
    }
    Ok(go_on)
}
