//! The block-device layer: one abstraction every iolab layer reads and
//! writes through, and the backends that implement it.
//!
//! A [`Device`] is a fixed-size array of sectors addressed by byte offset.
//! Requests are positional and take `&self`, so any number of threads may
//! keep requests in flight on one device at once; a flush is a durability
//! barrier for every write that completed before it was issued.
//!
//! Backends: [`FileDevice`] (regular files and block devices, optionally
//! O_DIRECT), [`MemDevice`] (sparse, in memory), [`NullDevice`] (discards
//! everything; for engine-overhead measurements), [`CrashDevice`] (records
//! unflushed writes and produces the images a power cut could leave) and
//! [`FaultyDevice`] (fails chosen requests with an I/O error).
//!
//! This crate never prints, never panics on caller input, and knows nothing
//! about the layers above it (volumes, logs, validation, workloads).

mod align;
mod crash;
mod error;
mod faulty;
mod file;
mod medium;
mod mem;
mod null;
mod recording;
pub mod signature;
mod slice;
mod stats;

pub use align::AlignedBuf;
pub use crash::{CrashDevice, CrashOutcome, CrashPolicy};
pub use error::{DeviceError, Op, Result};
pub use faulty::{Fault, FaultyDevice};
pub use file::{FileDevice, FileOptions, LockKind};
pub use medium::{Medium, MediumKind};
pub use mem::MemDevice;
pub use null::NullDevice;
pub use recording::{CrashPoint, Event, Overlay, Recording, RecordingDevice, Replayer};
pub use slice::Slice;
pub use stats::{Stats, StatsSnapshot};

use std::ops::Range;
use std::os::fd::RawFd;

/// A block device: a fixed number of bytes, read and written in whole
/// sectors at byte offsets.
///
/// Contract every implementation keeps:
/// - `offset` and `buf.len()` are multiples of [`Device::sector_bytes`] and
///   the request lies inside `0..size_bytes()`; otherwise the request fails
///   with [`DeviceError::Misaligned`] or [`DeviceError::OutOfRange`] and
///   nothing is transferred;
/// - a write that returned `Ok` before `flush` was called is durable once
///   that `flush` returns `Ok`; nothing is promised about a write that was
///   still in flight when the flush was issued;
/// - after a failed flush the device is poisoned: every later write and
///   flush fails with [`DeviceError::Poisoned`] (a failed flush cannot be
///   retried safely, the kernel may already have dropped the dirty data).
pub trait Device: Send + Sync {
    /// A short name for messages: the path, `mem:64M`, a volume name.
    fn name(&self) -> &str;

    /// Usable size in bytes; always a multiple of [`Device::sector_bytes`].
    fn size_bytes(&self) -> u64;

    /// The logical sector size: the unit of addressing and of atomicity.
    fn sector_bytes(&self) -> u32;

    /// Required alignment of buffer addresses (1 unless the device uses
    /// O_DIRECT).
    fn buffer_align(&self) -> usize {
        1
    }

    /// Reads `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// Writes `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Makes every write that completed before this call durable.
    fn flush(&self) -> Result<()>;

    /// Writes several `(offset, data)` ranges as one transaction where the
    /// device can make that atomic (a block log in `log` mode: after a
    /// crash all of them are present or none); elsewhere they are written
    /// one after another, which is exactly what a crash test should see.
    fn write_atomic(&self, writes: &[(u64, &[u8])]) -> Result<()> {
        for (offset, buf) in writes {
            self.write_at(buf, *offset)?;
        }
        Ok(())
    }

    /// The device's own counters.
    fn stats(&self) -> &Stats;

    /// The file descriptor behind the device, when requests may be submitted
    /// to it directly (io_uring). Such a submitter must check requests with
    /// [`check_request`] and record them in [`Device::stats`] itself.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }

    /// The parts of `start..end` never written (holes of a sparse file,
    /// chunks a memory image never allocated), sorted, whole sectors.
    /// Reading them measures nothing real, so reads are laid out first.
    /// `None` when the device cannot tell.
    fn unwritten(&self, start: u64, end: u64) -> Result<Option<Vec<Range<u64>>>> {
        let _ = (start, end);
        Ok(None)
    }

    /// Writes `buf` over blocks [`Device::unwritten`] reported, to lay a
    /// region out before a job. By default an ordinary write; a layer with
    /// a cheaper way to put never-written blocks in place (the block log:
    /// in place, outside its transactions) takes it.
    fn fill_unwritten(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_at(buf, offset)
    }

    /// What the device's bytes live on, for reports (empty when unknown).
    fn media(&self) -> Vec<Medium> {
        Vec::new()
    }

    /// Drops the device's pages from the page cache (after writing back
    /// dirty ones), so a buffered run starts cold, as fio's `invalidate=1`.
    /// A no-op where nothing is cached.
    fn drop_cache(&self) -> Result<()> {
        Ok(())
    }
}

/// A write-ahead log for writes that must land together on several
/// devices (a RAID-5 row's data and parity): they are made durable in the
/// log first, then written in place by the caller; after a crash the log's
/// owner replays them. This is how a volume closes the RAID-5 write hole
/// without knowing how the log works.
pub trait WriteAheadLog: Send + Sync {
    /// Makes `writes` — (home device index, byte offset, data) — durable
    /// as one transaction. Returns a ticket to hand to [`Self::written`]
    /// once the caller has written them in place.
    fn log(&self, writes: &[(u32, u64, &[u8])]) -> Result<u64>;

    /// The in-place writes of `ticket` are done (successfully or not): the
    /// log may free its records after the next flush of the homes.
    fn written(&self, ticket: u64);

    /// Flushes the homes and frees every record whose writes are done (a
    /// clean stop: nothing is left to replay).
    fn checkpoint(&self) -> Result<()>;
}

/// Checks a request against a device's geometry: sector-aligned offset and
/// length, buffer address aligned to [`Device::buffer_align`], inside the
/// device. Every backend calls this before transferring anything.
pub fn check_request(dev: &dyn Device, op: Op, addr: usize, len: usize, offset: u64) -> Result<()> {
    let sector = u64::from(dev.sector_bytes());
    let len64 = len as u64;
    if offset % sector != 0 || len64 % sector != 0 {
        return Err(DeviceError::Misaligned {
            device: dev.name().to_string(),
            op,
            offset,
            len: len64,
            what: "offset and length",
            align: sector,
        });
    }
    let mem_align = dev.buffer_align();
    if mem_align > 1 && addr % mem_align != 0 {
        return Err(DeviceError::Misaligned {
            device: dev.name().to_string(),
            op,
            offset,
            len: len64,
            what: "buffer address",
            align: mem_align as u64,
        });
    }
    let end = offset.checked_add(len64);
    if end.is_none_or(|end| end > dev.size_bytes()) {
        return Err(DeviceError::OutOfRange {
            device: dev.name().to_string(),
            op,
            offset,
            len: len64,
            size: dev.size_bytes(),
        });
    }
    Ok(())
}

/// Copies the whole of `dev` into a new sparse [`MemDevice`] (all-zero
/// chunks stay unallocated). For tests and crash images of small devices.
pub fn snapshot(dev: &dyn Device) -> Result<MemDevice> {
    let image =
        MemDevice::with_sector(format!("snapshot of {}", dev.name()), dev.size_bytes(), dev.sector_bytes())?;
    let chunk = mem::CHUNK_BYTES as u64;
    let mut buf = AlignedBuf::zeroed(mem::CHUNK_BYTES, 4096);
    let mut offset = 0;
    while offset < dev.size_bytes() {
        let len = chunk.min(dev.size_bytes() - offset) as usize;
        dev.read_at(&mut buf[..len], offset)?;
        if buf[..len].iter().any(|&b| b != 0) {
            image.write_at(&buf[..len], offset)?;
        }
        offset += len as u64;
    }
    image.stats().reset();
    Ok(image)
}
