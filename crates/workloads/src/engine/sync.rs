//! The sync engine: each worker thread issues one positional call at a
//! time. Works on every device.

use std::time::Instant;

use device::AlignedBuf;

use super::{data_buffer, Worker, WorkloadError};
use crate::gen::IoKind;
use crate::stats::ThreadStats;

pub(super) fn run(mut w: Worker<'_>) -> Result<ThreadStats, WorkloadError> {
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
