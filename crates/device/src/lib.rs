//! The block-device layer: one abstraction every iolab layer reads and
//! writes through, and the backends that implement it.
//!
//! A [`Device`] is a fixed-size array of sectors addressed by byte offset.
//! Requests are positional and take `&self`, so any number of threads may
//! keep requests in flight on one device at once; a flush is a durability
//! barrier for every write that completed before it was issued.
//!
//! Every device is a [`Backend`] (raw I/O only) behind the one checked
//! front in `front.rs`, which implements [`Device`] for all of them:
//! requests are checked, counted and refused after a failed flush there
//! and nowhere else. Backends here: [`FileDevice`] (regular files and
//! block devices, optionally O_DIRECT), [`MemDevice`] (sparse, in memory),
//! [`NullDevice`] (discards everything; for engine-overhead measurements),
//! [`Slice`] (a window of a device), [`CrashDevice`] (records unflushed
//! writes and produces the images a power cut could leave),
//! [`FaultyDevice`] (fails chosen requests with an I/O error, or with
//! ENOSPC as a full host would),
//! [`RecordingDevice`] and [`Overlay`] (histories and crash images of
//! several devices).
//!
//! This crate never prints, never panics on caller input, and knows nothing
//! about the layers above it (volumes, logs, validation, workloads). No
//! backend checks, counts or poisons on its own: that is the front's.

mod align;
mod concat;
mod crash;
mod error;
mod faulty;
mod file;
mod front;
mod medium;
mod mem;
mod null;
mod recording;
pub mod signature;
mod slice;
mod stats;
mod vtime;
mod world;

pub use align::AlignedBuf;
pub use concat::Concat;
pub use crash::{CrashDevice, CrashOutcome, CrashPolicy};
pub use error::{DeviceError, Op, PoisonCause, Result};
pub use faulty::{Fault, FaultyDevice};
pub use file::{FileDevice, FileOptions, LockKind};
pub use front::{check_request, Backend, Checked, Device, Front, Geometry};
pub use medium::{Medium, MediumKind};
pub use mem::MemDevice;
pub use null::NullDevice;
pub use recording::{CrashPoint, Event, Overlay, Recording, RecordingDevice, Replayer};
pub use slice::Slice;
pub use stats::{Stats, StatsSnapshot};
pub use vtime::{Nanos, VData, VOp, VirtualDisk};
pub use world::{Clock, Participant, VirtualClock, WorldRun};

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
