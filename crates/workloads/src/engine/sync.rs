//! The sync engine: each worker thread issues one positional call at a
//! time. Works on every device.

use std::collections::VecDeque;
use std::time::Instant;

use device::AlignedBuf;

use super::{data_buffer, Worker, WorkloadError};
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;
use crate::validate::{CheckedBy, Validator};

pub(super) fn run(mut w: Worker<'_>) -> Result<ThreadStats, WorkloadError> {
    if let Some(v) = w.validator {
        return run_validated(w, v);
    }
    let max = w.job.bs.max_bytes() as usize;
    let align = w.device.buffer_align().max(4096);
    let write_buf = data_buffer(max, align, w.job.pattern, w.job.seed);
    let mut read_buf = AlignedBuf::zeroed(max, align);
    loop {
        let now = Instant::now();
        if let Some(wait) = w.rate_wait(now) {
            if w.finished(now) {
                break;
            }
            std::thread::sleep(wait);
            continue;
        }
        let Some((req, measured)) = w.next_request(now) else { break };
        let len = req.len as usize;
        let start = Instant::now();
        match req.kind {
            IoKind::Read => w.device.read_at(&mut read_buf[..len], req.offset)?,
            IoKind::Write => w.device.write_at(&write_buf[..len], req.offset)?,
        }
        let done = Instant::now();
        w.complete(req.kind, req.len, done - start, done, measured);
        if w.flush_due(req.kind) {
            w.device.flush()?;
            w.stats.flushes += 1;
        }
    }
    Ok(w.stats)
}

/// A request a validating worker has prepared: its key blocks taken and,
/// for a write, its old contents checked, its buffer stamped and its
/// `before` record queued in the journal.
struct Prepared {
    req: Request,
    measured: bool,
    at: Instant,
    /// Writes: the stamped buffer, sequence, keys, journal ticket.
    write: Option<(AlignedBuf, u64, Vec<u8>, Option<u64>)>,
    go_on: bool,
}

/// Under validation: requests are prepared up to [`Validator::lookahead`]
/// ahead (with a group-commit journal, the commit of the next requests'
/// `before` records then overlaps this request's data write), then issued
/// in order. Requests touching the same key blocks never overlap: a
/// prepared request holds its blocks until it completes, and a worker
/// waits for a block only when it holds none.
fn run_validated(mut w: Worker<'_>, v: &Validator) -> Result<ThreadStats, WorkloadError> {
    let max = w.job.bs.max_bytes() as usize;
    let align = w.device.buffer_align().max(4096);
    let mut free: Vec<AlignedBuf> = (0..v.lookahead()).map(|_| AlignedBuf::zeroed(max, align)).collect();
    let mut read_buf = AlignedBuf::zeroed(max, align);
    let mut ready: VecDeque<Prepared> = VecDeque::new();
    let mut blocked: Option<(Request, bool)> = None;
    let mut last_done = Instant::now();
    let mut outcome = Ok(());
    // The request issued half the lookahead from now: its commit should
    // start now, on the committer thread, to be durable by then.
    let kick_at = v.lookahead() / 2;
    while outcome.is_ok() {
        while ready.len() < v.lookahead() {
            let now = Instant::now();
            if let (None, Some(wait)) = (&blocked, w.rate_wait(now)) {
                if !ready.is_empty() || w.finished(now) {
                    break;
                }
                std::thread::sleep(wait);
                continue;
            }
            let Some((req, measured)) = blocked.take().or_else(|| w.next_request(Instant::now())) else {
                break;
            };
            if !v.try_lock(&req) {
                if !ready.is_empty() {
                    blocked = Some((req, measured));
                    break;
                }
                while !v.try_lock(&req) {
                    std::thread::yield_now();
                }
            }
            match prepare(&w, v, req, measured, &mut free, &mut read_buf) {
                Ok(p) => ready.push_back(p),
                Err(e) => {
                    v.unlock(&req);
                    outcome = Err(e);
                    break;
                }
            }
        }
        let Some(p) = ready.pop_front() else { break };
        if let Some(Prepared { write: Some((_, _, _, ticket)), .. }) = ready.get(kick_at) {
            v.journal_kick(*ticket);
        }
        let start = p.at.max(last_done);
        let (req, measured) = (p.req, p.measured);
        let issued = issue(&w, v, p, &mut read_buf, &mut free);
        v.unlock(&req);
        match issued {
            Ok(true) => {}
            Ok(false) => w.limits.stop.store(true, std::sync::atomic::Ordering::Relaxed),
            Err(e) => outcome = Err(e),
        }
        last_done = Instant::now();
        w.complete(req.kind, req.len, last_done - start, last_done, measured);
    }
    // After an error: give back the blocks of what was prepared, unissued.
    for p in ready {
        v.unlock(&p.req);
    }
    outcome.map(|()| w.stats)
}

/// Prepares a request whose key blocks the caller took.
fn prepare(
    w: &Worker<'_>,
    v: &Validator,
    req: Request,
    measured: bool,
    free: &mut Vec<AlignedBuf>,
    read_buf: &mut AlignedBuf,
) -> Result<Prepared, WorkloadError> {
    let at = Instant::now();
    let len = req.len as usize;
    let mut go_on = true;
    let write = match req.kind {
        IoKind::Read => None,
        IoKind::Write => {
            if v.spec().preread {
                w.device.read_at(&mut read_buf[..len], req.offset)?;
                go_on &= v.check(&req, &read_buf[..len], CheckedBy::Preread);
            }
            // Invariant: one buffer per prepared request, at most lookahead.
            let mut buf = free.pop().expect("a free buffer per prepared request");
            let (sequence, keys) = v.stamp(&req, &mut buf[..len]);
            match v.journal_queue_before(sequence, &req, &keys) {
                Ok(ticket) => Some((buf, sequence, keys, ticket)),
                Err(e) => {
                    free.push(buf);
                    return Err(e);
                }
            }
        }
    };
    Ok(Prepared { req, measured, at, write, go_on })
}

/// Issues a prepared request: a read is checked; a write waits for its
/// `before` record to be durable, then goes out, then is recorded.
fn issue(
    w: &Worker<'_>,
    v: &Validator,
    p: Prepared,
    read_buf: &mut AlignedBuf,
    free: &mut Vec<AlignedBuf>,
) -> Result<bool, WorkloadError> {
    let (req, len) = (p.req, p.req.len as usize);
    let mut go_on = p.go_on;
    let Some((buf, sequence, keys, ticket)) = p.write else {
        w.device.read_at(&mut read_buf[..len], req.offset)?;
        return Ok(go_on & v.check(&req, &read_buf[..len], CheckedBy::Read));
    };
    let written = v.journal_wait(ticket).and_then(|()| Ok(w.device.write_at(&buf[..len], req.offset)?));
    free.push(buf);
    written?;
    v.written(&req, &keys);
    v.journal_after(sequence, &req)?;
    if v.spec().reread {
        w.device.read_at(&mut read_buf[..len], req.offset)?;
        go_on &= v.check(&req, &read_buf[..len], CheckedBy::Reread);
    }
    Ok(go_on)
}
