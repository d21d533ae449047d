//! The sync engine: each worker thread issues one positional call at a
//! time. Works on every device.

use std::time::Instant;

use device::AlignedBuf;

use super::{data_buffer, Worker, WorkloadError};
use crate::gen::{IoKind, Request};
use crate::stats::ThreadStats;
use crate::validate::{CheckedBy, Validator};

pub(super) fn run(mut w: Worker<'_>) -> Result<ThreadStats, WorkloadError> {
    let max = w.job.bs.max_bytes() as usize;
    let align = w.device.buffer_align().max(4096);
    let mut write_buf = data_buffer(max, align, w.job.pattern, w.job.seed);
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
        if let Some(v) = w.validator {
            let go_on = validated(&w, v, req, &mut read_buf, &mut write_buf);
            v.unlock(&req);
            if !go_on? {
                w.limits.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let done = Instant::now();
            w.complete(req.kind, req.len, done - now, done, measured);
            continue;
        }
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

/// One request under validation: take its key blocks, pre-read and check
/// before a write, stamp and write, re-read if asked; check every read.
/// Returns false once the error cap is reached. The caller unlocks.
fn validated(
    w: &Worker<'_>,
    v: &Validator,
    req: Request,
    read_buf: &mut AlignedBuf,
    write_buf: &mut AlignedBuf,
) -> Result<bool, WorkloadError> {
    while !v.try_lock(&req) {
        std::thread::yield_now();
    }
    let len = req.len as usize;
    let mut go_on = true;
    match req.kind {
        IoKind::Read => {
            w.device.read_at(&mut read_buf[..len], req.offset)?;
            go_on &= v.check(&req, &read_buf[..len], CheckedBy::Read);
        }
        IoKind::Write => {
            if v.spec().preread {
                w.device.read_at(&mut read_buf[..len], req.offset)?;
                go_on &= v.check(&req, &read_buf[..len], CheckedBy::Preread);
            }
            let (sequence, keys) = v.stamp(&req, &mut write_buf[..len]);
            v.journal_before(sequence, &req, &keys)?;
            w.device.write_at(&write_buf[..len], req.offset)?;
            v.written(&req, &keys);
            v.journal_after(sequence, &req)?;
            if v.spec().reread {
                w.device.read_at(&mut read_buf[..len], req.offset)?;
                go_on &= v.check(&req, &read_buf[..len], CheckedBy::Reread);
            }
        }
    }
    Ok(go_on)
}
