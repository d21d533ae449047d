//! Laying out a target before a job reads it, as fio lays out its files:
//! a read of a hole (a sparse file's, or a memory image's never-written
//! chunk) is answered without touching any medium, so a read figure over
//! holes measures nothing. Holes are found with [`Device::unwritten`] and
//! written with the job's data pattern through [`Device::write_unlogged`]:
//! in place, outside any log (a layout of gigabytes through a block log's
//! transactions of half the log would write it all twice, and no record
//! need cover a block never written). What was laid out is flushed, so the
//! measured phase never pays for the layout's write-back.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use device::{Device, DeviceError};

use crate::spec::Pattern;

/// Bytes written by one layout request.
const PIECE_BYTES: u64 = 1 << 20;
/// Threads writing the layout (requests in flight).
const LAYOUT_THREADS: usize = 4;

/// `--layout`: when a job lays out its region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutPolicy {
    /// When the job reads (as fio lays out files it reads).
    #[default]
    Auto,
    /// Before write-only jobs too (to measure overwrites).
    Always,
    /// Never: reads of holes are then marked.
    Never,
}

impl LayoutPolicy {
    /// Whether a job reading `read_pct` percent fills its holes.
    pub fn lays_out(self, read_pct: u8) -> bool {
        match self {
            LayoutPolicy::Auto => read_pct > 0,
            LayoutPolicy::Always => true,
            LayoutPolicy::Never => false,
        }
    }
}

/// What a job's region held before it ran, and what was laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LayoutReport {
    /// The device could tell its holes; when false nothing was laid out and
    /// nothing is known about unwritten blocks.
    pub known: bool,
    /// Bytes of the region never written before the job (holes).
    pub unwritten_bytes: u64,
    /// Bytes written to fill them.
    pub laid_out_bytes: u64,
    /// Time the layout took, flush included.
    pub seconds: f64,
}

impl LayoutReport {
    /// Reads of the job may hit never-written blocks: the region had holes
    /// and they were not laid out.
    pub fn reads_unwritten(&self) -> bool {
        self.unwritten_bytes > self.laid_out_bytes
    }
}

/// The holes of `region` (none known: `None`).
pub fn holes(device: &dyn Device, region: Range<u64>) -> Result<Option<Vec<Range<u64>>>, DeviceError> {
    device.unwritten(region.start, region.end)
}

/// Finds the holes of `region` and, when `write` is set, fills them with
/// `pattern` and flushes. `on_progress(done, total)` is called as pieces
/// complete (total: the bytes to lay out).
pub fn lay_out(
    device: &dyn Device,
    region: Range<u64>,
    pattern: Pattern,
    seed: u64,
    write: bool,
    on_progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<LayoutReport, DeviceError> {
    let start = Instant::now();
    let Some(holes) = holes(device, region.clone())? else {
        return Ok(LayoutReport::default());
    };
    let unwritten_bytes: u64 = holes.iter().map(|h| h.end - h.start).sum();
    let mut report = LayoutReport { known: true, unwritten_bytes, ..Default::default() };
    if !write || unwritten_bytes == 0 {
        return Ok(report);
    }
    let pieces = split(&holes, PIECE_BYTES);
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let align = device.buffer_align().max(4096);
    let results: Vec<Result<(), DeviceError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..LAYOUT_THREADS.min(pieces.len()))
            .map(|t| {
                let (pieces, next, done) = (&pieces, &next, &done);
                scope.spawn(move || -> Result<(), DeviceError> {
                    let mut buf =
                        crate::data_buffer(PIECE_BYTES as usize, align, pattern, seed ^ (t as u64) << 32);
                    loop {
                        let i = next.fetch_add(1, Relaxed);
                        let Some(piece) = pieces.get(i) else { return Ok(()) };
                        let len = (piece.end - piece.start) as usize;
                        mark(&mut buf[..len], piece.start, pattern);
                        device.write_unlogged(&buf[..len], piece.start)?;
                        let so_far = done.fetch_add(len as u64, Relaxed) + len as u64;
                        on_progress(so_far, unwritten_bytes);
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(panicked()))).collect()
    });
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    device.flush()?;
    report.laid_out_bytes = done.load(Relaxed);
    report.seconds = start.elapsed().as_secs_f64();
    debug_assert_eq!(report.laid_out_bytes, unwritten_bytes);
    Ok(report)
}

/// Cuts `ranges` into pieces of at most `max` bytes.
fn split(ranges: &[Range<u64>], max: u64) -> Vec<Range<u64>> {
    let mut pieces = Vec::new();
    for r in ranges {
        let mut at = r.start;
        while at < r.end {
            let end = (at + max).min(r.end);
            pieces.push(at..end);
            at = end;
        }
    }
    pieces
}

/// Makes each 4 KiB of a piece differ from every other (its offset in its
/// first eight bytes), so a deduplicating file system stores what a real
/// data set would. Zeros stay zeros.
fn mark(buf: &mut [u8], offset: u64, pattern: Pattern) {
    if pattern == Pattern::Zeros {
        return;
    }
    for (i, block) in buf.chunks_mut(4096).enumerate() {
        let at = offset + i as u64 * 4096;
        let n = block.len().min(8);
        block[..n].copy_from_slice(&at.to_le_bytes()[..n]);
    }
}

fn panicked() -> DeviceError {
    DeviceError::Invalid("a layout thread panicked".into())
}
