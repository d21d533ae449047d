//! The runtime objects below a volume: drives and subdisks, their states
//! and counters, and the per-plex counters.
//!
//! A subdisk does I/O only through its drive's [`Device`] and only inside
//! its own extent; it never decides what to read or write.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

use device::{AlignedBuf, Backend, Checked, Device, Front, Geometry, Result, Stats, StatsSnapshot};

/// State of a drive, subdisk or plex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// In service.
    Up,
    /// Out of service: neither read nor written.
    Down,
    /// Holds out-of-date data: neither read nor written until revived.
    Stale,
    /// A RAID-5 plex whose parity has not been built since it was created
    /// on drives that held data: neither read nor written until `init`
    /// builds it (a later drive failure would rebuild garbage otherwise).
    Initializing,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Up => "up",
            State::Down => "down",
            State::Stale => "stale",
            State::Initializing => "initializing",
        })
    }
}

/// What kind of object an entry is about (names are unique per kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ObjectKind {
    Drive = 1,
    Subdisk = 2,
    Plex = 3,
    Volume = 4,
}

impl ObjectKind {
    /// The kind an entry's first byte names (docs/formats.md).
    pub(crate) fn from_byte(byte: u8) -> Option<ObjectKind> {
        match byte {
            1 => Some(ObjectKind::Drive),
            2 => Some(ObjectKind::Subdisk),
            3 => Some(ObjectKind::Plex),
            4 => Some(ObjectKind::Volume),
            _ => None,
        }
    }
}

/// A [`State`] that threads may read and change concurrently.
#[derive(Debug)]
pub(crate) struct StateCell(AtomicU8);

impl StateCell {
    pub(crate) fn new(state: State) -> StateCell {
        StateCell(AtomicU8::new(state as u8))
    }

    pub(crate) fn get(&self) -> State {
        match self.0.load(Relaxed) {
            0 => State::Up,
            1 => State::Down,
            2 => State::Stale,
            _ => State::Initializing,
        }
    }

    pub(crate) fn set(&self, state: State) {
        self.0.store(state as u8, Relaxed);
    }
}

/// A drive: an open device holding subdisks.
pub struct Drive {
    pub(crate) name: String,
    pub(crate) dev: Arc<dyn Device>,
    pub(crate) state: StateCell,
    pub(crate) stats: Stats,
    /// Bound to an [`AbsentDevice`]: its device was not there at assembly.
    pub(crate) missing: AtomicBool,
}

impl Drive {
    pub(crate) fn new(name: String, dev: Arc<dyn Device>) -> Drive {
        Drive {
            name,
            dev,
            state: StateCell::new(State::Up),
            stats: Stats::default(),
            missing: AtomicBool::new(false),
        }
    }
}

/// A contiguous region of a drive.
pub(crate) struct Subdisk {
    pub(crate) name: String,
    pub(crate) drive: Arc<Drive>,
    pub(crate) drive_offset_bytes: u64,
    pub(crate) length_bytes: u64,
    pub(crate) state: StateCell,
    pub(crate) stats: Stats,
    /// While a revive runs: bytes from the start already current, which
    /// are read and written although the subdisk is not yet up.
    pub(crate) revived_bytes: AtomicU64,
}

impl Subdisk {
    /// True when the drive is up and `offset..offset+len` of the subdisk
    /// holds current data (the subdisk is up, or revived that far).
    pub(crate) fn usable_at(&self, offset_bytes: u64, len_bytes: u64) -> bool {
        let current =
            self.state.get() == State::Up || offset_bytes + len_bytes <= self.revived_bytes.load(Relaxed);
        current && self.drive.state.get() == State::Up
    }

    /// True when the subdisk and its drive are up: every byte is current.
    pub(crate) fn up(&self) -> bool {
        self.state.get() == State::Up && self.drive.state.get() == State::Up
    }

    /// True when a write at `offset_bytes` must reach the subdisk: its drive
    /// is up and it is up, or a revive has already copied past that point
    /// (a write straddling the revive pointer goes in whole; the copy
    /// rewrites the part ahead of the pointer with the same data later).
    pub(crate) fn writable_at(&self, offset_bytes: u64) -> bool {
        let current = self.state.get() == State::Up || offset_bytes < self.revived_bytes.load(Relaxed);
        current && self.drive.state.get() == State::Up
    }

    /// Takes the subdisk out of service after a failed write.
    pub(crate) fn fail(&self) {
        self.state.set(State::Down);
        self.revived_bytes.store(0, Relaxed);
    }

    pub(crate) fn read(&self, buf: &mut [u8], sd_offset_bytes: u64) -> Result<()> {
        debug_assert!(sd_offset_bytes + buf.len() as u64 <= self.length_bytes, "read inside the subdisk");
        let result = read_aligned(self.drive.dev.as_ref(), buf, self.drive_offset_bytes + sd_offset_bytes);
        self.stats.track(self.drive.stats.track(result))?;
        self.stats.record_reads(1, buf.len() as u64);
        self.drive.stats.record_reads(1, buf.len() as u64);
        Ok(())
    }

    pub(crate) fn write(&self, buf: &[u8], sd_offset_bytes: u64) -> Result<()> {
        debug_assert!(sd_offset_bytes + buf.len() as u64 <= self.length_bytes, "write inside the subdisk");
        let result = write_aligned(self.drive.dev.as_ref(), buf, self.drive_offset_bytes + sd_offset_bytes);
        self.stats.track(self.drive.stats.track(result))?;
        self.stats.record_writes(1, buf.len() as u64);
        self.drive.stats.record_writes(1, buf.len() as u64);
        Ok(())
    }
}

/// Reads through an aligned bounce buffer when `buf` is not aligned as
/// the device requires (O_DIRECT drives; pieces of a request that start
/// inside it, and the volume's own scratch buffers, need not be).
pub(crate) fn read_aligned(dev: &dyn Device, buf: &mut [u8], offset: u64) -> Result<()> {
    let align = dev.buffer_align();
    if align <= 1 || (buf.as_ptr() as usize) % align == 0 {
        return dev.read_at(buf, offset);
    }
    let mut bounce = AlignedBuf::zeroed(buf.len(), align);
    dev.read_at(&mut bounce, offset)?;
    buf.copy_from_slice(&bounce);
    Ok(())
}

/// Writes through an aligned bounce buffer when needed (see
/// [`read_aligned`]).
pub(crate) fn write_aligned(dev: &dyn Device, buf: &[u8], offset: u64) -> Result<()> {
    let align = dev.buffer_align();
    if align <= 1 || (buf.as_ptr() as usize) % align == 0 {
        return dev.write_at(buf, offset);
    }
    let mut bounce = AlignedBuf::zeroed(buf.len(), align);
    bounce.copy_from_slice(buf);
    dev.write_at(&bounce, offset)
}

/// Vinum's per-plex counters, updated lock-free.
#[derive(Debug, Default)]
pub(crate) struct PlexCounters {
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) multiblock: AtomicU64,
    pub(crate) multistripe: AtomicU64,
    pub(crate) recovered_reads: AtomicU64,
    pub(crate) degraded_writes: AtomicU64,
    pub(crate) parityless_writes: AtomicU64,
}

/// A copy of a plex's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlexCountersSnapshot {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Stripe-unit (or subdisk) boundaries crossed by requests.
    pub multiblock: u64,
    /// Stripe-row boundaries crossed by requests.
    pub multistripe: u64,
    /// RAID-5 reads served by reconstruction from the other subdisks.
    pub recovered_reads: u64,
    /// RAID-5 stripe rows written while a data subdisk they touch was down.
    pub degraded_writes: u64,
    /// RAID-5 stripe rows written while their parity subdisk was down.
    pub parityless_writes: u64,
}

impl PlexCounters {
    fn all(&self) -> [&AtomicU64; 9] {
        [
            &self.reads,
            &self.writes,
            &self.bytes_read,
            &self.bytes_written,
            &self.multiblock,
            &self.multistripe,
            &self.recovered_reads,
            &self.degraded_writes,
            &self.parityless_writes,
        ]
    }

    pub(crate) fn snapshot(&self) -> PlexCountersSnapshot {
        let [reads, writes, bytes_read, bytes_written, multiblock, multistripe, recovered_reads, degraded_writes, parityless_writes] =
            self.all().map(|c| c.load(Relaxed));
        PlexCountersSnapshot {
            reads,
            writes,
            bytes_read,
            bytes_written,
            multiblock,
            multistripe,
            recovered_reads,
            degraded_writes,
            parityless_writes,
        }
    }

    pub(crate) fn reset(&self) {
        for counter in self.all() {
            counter.store(0, Relaxed);
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}

/// Counters of a subdisk or drive as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectReport {
    pub name: String,
    /// The device the drive is bound to (for a missing drive, the path
    /// its configuration names).
    pub device: String,
    pub state: State,
    /// The drive's device was not there at assembly (drives only).
    pub missing: bool,
    pub stats: StatsSnapshot,
}

/// Stands in for a drive whose device is missing: the drive is bound down
/// and every request fails with an error naming it, so nothing is ever
/// read from or written to a drive that is not there.
pub(crate) struct AbsentDevice {
    drive: String,
    /// Named by the path the configuration names.
    front: Front,
}

impl AbsentDevice {
    pub(crate) fn new(drive: &str, path: &str, size_bytes: u64, sector_bytes: u32) -> AbsentDevice {
        AbsentDevice {
            drive: drive.to_string(),
            front: Front::new(path, Geometry::new(size_bytes, sector_bytes)),
        }
    }

    fn missing(&self, op: device::Op, offset: u64, len: u64) -> device::DeviceError {
        device::DeviceError::Io {
            device: self.front.name().to_string(),
            op,
            offset,
            len,
            source: std::io::Error::other(format!(
                "drive '{}' is missing: its device was not given or could not be read",
                self.drive
            )),
        }
    }
}

impl Backend for AbsentDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        Err(self.missing(device::Op::Read, offset, buf.len() as u64))
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        Err(self.missing(device::Op::Write, offset, buf.len() as u64))
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        Err(self.missing(device::Op::Flush, 0, 0))
    }
}
