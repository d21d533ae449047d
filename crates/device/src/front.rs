//! The one checked front every device is reached through, and the raw
//! [`Backend`] interface below it (redb's model: one checked backend over
//! simple raw ones).
//!
//! A backend implements raw I/O only, and is called only with requests
//! already checked. [`Device`] is implemented here, once, for every
//! backend: request checks, counting in [`Stats`] and poisoning after a
//! failed flush are written in this file and nowhere else. `Device` is
//! sealed, so no crate can implement it around the front; the tidy test in
//! `crates/cli/tests/it/tidy.rs` also fails on any `impl Device for`
//! outside this file.

use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::OnceLock;

use crate::{DeviceError, Medium, Op, PoisonCause, Result, Stats};

mod sealed {
    /// Implemented for every [`super::Backend`] and nothing else, so
    /// [`super::Device`] has no implementation but the front's.
    pub trait Sealed {}
}

impl<B: Backend> sealed::Sealed for B {}

/// A block device: a fixed number of bytes, read and written in whole
/// sectors at byte offsets. Everything above the device crate uses this
/// interface (`Arc<dyn Device>`); it is implemented only by the front,
/// for every [`Backend`], and keeps this contract for all of them:
/// - `offset` and `buf.len()` are multiples of [`Device::sector_bytes`],
///   the buffer's address a multiple of [`Device::buffer_align`], and the
///   request lies inside `0..size_bytes()`; otherwise the request fails
///   with [`DeviceError::Misaligned`] or [`DeviceError::OutOfRange`] and
///   the backend never sees it, so nothing is transferred;
/// - a write that returned `Ok` before `flush` was called is durable once
///   that `flush` returns `Ok`; nothing is promised about a write that was
///   still in flight when the flush was issued;
/// - after a failed flush the device is poisoned: every later write and
///   flush fails with [`DeviceError::Poisoned`] (a failed flush cannot be
///   retried safely, the kernel may already have dropped the dirty data).
///   A backend may poison its device for other reasons too (a block log
///   whose commit failed), never less;
/// - every request is counted in [`Device::stats`]: a read or write that
///   succeeded by its bytes, one that failed (refused or not) as an error.
///
/// No crate can implement `Device` around the front, even with every
/// method written out (the error is the seal's bound, E0277: with the
/// seal gone this compiles, and with a method missing it fails with
/// another code, so the test fails either way):
///
/// ```compile_fail,E0277
/// use device::{Device, Medium, Result, Stats};
/// struct Unchecked(Stats);
/// impl Device for Unchecked {
///     fn name(&self) -> &str { "unchecked" }
///     fn size_bytes(&self) -> u64 { 512 }
///     fn sector_bytes(&self) -> u32 { 512 }
///     fn buffer_align(&self) -> usize { 1 }
///     fn read_at(&self, _: &mut [u8], _: u64) -> Result<()> { Ok(()) }
///     fn write_at(&self, _: &[u8], _: u64) -> Result<()> { Ok(()) }
///     fn write_atomic(&self, _: &[(u64, &[u8])]) -> Result<()> { Ok(()) }
///     fn write_unlogged(&self, _: &[u8], _: u64) -> Result<()> { Ok(()) }
///     fn flush(&self) -> Result<()> { Ok(()) }
///     fn stats(&self) -> &Stats { &self.0 }
///     fn raw_fd(&self) -> Option<std::os::fd::RawFd> { None }
///     fn poison(&self, _: String) {}
///     fn check_poison(&self, _: device::Op) -> Result<()> { Ok(()) }
///     fn unwritten(&self, _: u64, _: u64) -> Result<Option<Vec<std::ops::Range<u64>>>> { Ok(None) }
///     fn media(&self) -> Vec<Medium> { Vec::new() }
///     fn drop_cache(&self) -> Result<()> { Ok(()) }
///     fn will_need(&self, _: u64, _: u64) {}
///     fn max_request_bytes(&self) -> u64 { u64::MAX }
///     fn virtual_disk(&self) -> Option<&dyn device::VirtualDisk> { None }
///     fn discard(&self, _: u64, _: u64) -> Result<()> { Ok(()) }
///     fn discards(&self) -> bool { false }
/// }
/// ```
pub trait Device: sealed::Sealed + Send + Sync {
    /// A short name for messages: the path, `mem:64M`, a volume name.
    fn name(&self) -> &str;

    /// Usable size in bytes; always a multiple of [`Device::sector_bytes`].
    fn size_bytes(&self) -> u64;

    /// The logical sector size: the unit of addressing and of atomicity.
    fn sector_bytes(&self) -> u32;

    /// Required alignment of buffer addresses (1 unless the device uses
    /// O_DIRECT).
    fn buffer_align(&self) -> usize;

    /// Reads `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// Writes `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Writes several `(offset, data)` ranges as one transaction where the
    /// device can make that atomic (a block log in `log` mode: after a
    /// crash all of them are present or none); elsewhere they are written
    /// one after another, which is exactly what a crash test should see.
    /// Every range is checked before any is written.
    fn write_atomic(&self, writes: &[(u64, &[u8])]) -> Result<()>;

    /// Writes `buf` in place, outside any transaction: a file system whose
    /// log holds metadata only writes file data this way, and a layout
    /// fills never-written blocks this way. On a device without a log, an
    /// ordinary write. A block log in `log` mode revokes its earlier logged
    /// copies of these sectors in the next commit, so replay cannot bring
    /// them back over this write.
    fn write_unlogged(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Makes every write that completed before this call durable.
    fn flush(&self) -> Result<()>;

    /// The device's own counters.
    fn stats(&self) -> &Stats;

    /// The file descriptor behind the device, when requests may be
    /// submitted to it directly (io_uring). Such a submitter bypasses the
    /// front, so it takes over the front's work: it checks every request
    /// with [`check_request`] before submitting it and records it in
    /// [`Device::stats`] when it completes.
    fn raw_fd(&self) -> Option<RawFd>;

    /// Poisons the device from outside the front: a direct submitter
    /// ([`Device::raw_fd`]) whose flush (or a write) failed reports it
    /// here, so every later write and flush is refused, through the front
    /// and by [`check_request`] alike. The first cause is kept.
    fn poison(&self, cause: String);

    /// `Err(Poisoned)` once the device is poisoned.
    fn check_poison(&self, op: Op) -> Result<()>;

    /// The parts of `start..end` (cut to the device) never written (holes
    /// of a sparse file, chunks a memory image never allocated), sorted,
    /// whole sectors. Reading them measures nothing real, so reads are laid
    /// out first. `None` when the device cannot tell.
    fn unwritten(&self, start: u64, end: u64) -> Result<Option<Vec<Range<u64>>>>;

    /// What the device's bytes live on, for reports (empty when unknown).
    fn media(&self) -> Vec<Medium>;

    /// Drops the device's pages from the page cache (after writing back
    /// dirty ones), so a buffered run starts cold, as fio's `invalidate=1`.
    /// A no-op where nothing is cached.
    fn drop_cache(&self) -> Result<()>;

    /// A hint that `offset..offset + len` (cut to the device) will be
    /// read soon: a buffered file asks the kernel to read it in behind
    /// the caller (`posix_fadvise(WILLNEED)`, as e2fsck's readahead), so
    /// a reader walking scattered blocks one at a time finds them in
    /// memory. Elsewhere nothing; it never fails and reads nothing itself.
    fn will_need(&self, offset: u64, len: u64);

    /// The most bytes one write may carry (a block log's transaction
    /// limit; the kernel's `max_sectors_kb`); a larger write is refused.
    /// Writers that gather requests (a file system's write-back) keep
    /// under it. `u64::MAX` where there is no limit.
    fn max_request_bytes(&self) -> u64;

    /// The device as a simulated disk in virtual time, when it is one. An
    /// engine that submits to it bypasses the front as a direct submitter
    /// does (see [`Device::raw_fd`]): it checks each request with
    /// [`check_request`] and records it in [`Device::stats`] itself.
    fn virtual_disk(&self) -> Option<&dyn crate::VirtualDisk>;

    /// Discards `len` bytes at `offset` (a trim, fio's `rw=trim`): the
    /// device may forget them. A file punches a hole (the range then reads
    /// as zeros), a block device is sent BLKDISCARD (what it then reads is
    /// the device's choice), memory zeros the range. Whole sectors inside
    /// the device; refused on a poisoned device, as a write is, and on a
    /// device that does not take discards ([`Device::discards`]).
    fn discard(&self, offset: u64, len: u64) -> Result<()>;

    /// Whether [`Device::discard`] is taken: files, block devices, memory
    /// and `null:`; not iolab's volumes, block logs or simulated disks.
    fn discards(&self) -> bool;
}

/// Raw I/O under the front. A backend keeps a [`Front`] (its name,
/// geometry, counters and poison latch) and moves bytes; it never checks,
/// counts or refuses a request itself: [`Device`], implemented for every
/// backend, does that before calling it.
///
/// A raw request method is called only with a request the front checked
/// (the [`Checked`] it takes, which only the front can make, is the
/// proof): whole sectors, an aligned buffer, inside the device, and
/// (writes and flushes) on a device that is not poisoned. An error it
/// returns goes to the caller unchanged and is counted; an error from
/// [`Backend::flush_raw`] also poisons the device. To poison it for any
/// other failure (a commit write), a backend calls [`Front::poison`].
pub trait Backend: Send + Sync {
    /// The front's state, which the backend holds.
    fn front(&self) -> &Front;

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()>;

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()>;

    /// Makes every write that completed before the call durable. A failure
    /// poisons the device.
    fn flush_raw(&self, _: Checked) -> Result<()>;

    /// The ranges as one transaction where the backend can (see
    /// [`Device::write_atomic`]); by default one write after another.
    fn write_atomic_raw(&self, writes: &[(u64, &[u8])], checked: Checked) -> Result<()> {
        for (offset, buf) in writes {
            self.write_raw(buf, *offset, checked)?;
        }
        Ok(())
    }

    /// A write in place outside any transaction (see
    /// [`Device::write_unlogged`]); by default an ordinary write.
    fn write_unlogged_raw(&self, buf: &[u8], offset: u64, checked: Checked) -> Result<()> {
        self.write_raw(buf, offset, checked)
    }

    /// See [`Device::unwritten`]; called with `start <= end <= size_bytes`.
    fn unwritten_raw(&self, start: u64, end: u64, checked: Checked) -> Result<Option<Vec<Range<u64>>>> {
        let _ = (start, end, checked);
        Ok(None)
    }

    /// See [`Device::media`].
    fn media_raw(&self) -> Vec<Medium> {
        Vec::new()
    }

    /// See [`Device::drop_cache`].
    fn drop_cache_raw(&self) -> Result<()> {
        Ok(())
    }

    /// See [`Device::will_need`]; called with a range inside the device.
    fn will_need_raw(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// See [`Device::max_request_bytes`].
    fn max_request_bytes_raw(&self) -> u64 {
        u64::MAX
    }

    /// See [`Device::virtual_disk`].
    fn virtual_disk_raw(&self) -> Option<&dyn crate::VirtualDisk> {
        None
    }

    /// See [`Device::discard`]; called only where [`Backend::discards_raw`]
    /// is true.
    fn discard_raw(&self, offset: u64, len: u64, _: Checked) -> Result<()> {
        let _ = (offset, len);
        Err(DeviceError::Invalid(format!("{}: does not take trims", self.front().name())))
    }

    /// See [`Device::discards`].
    fn discards_raw(&self) -> bool {
        false
    }
}

/// Proof that the front checked the request a raw method is given. Only
/// the front makes one, so nothing but the front can call a backend's raw
/// request methods, even holding the backend's own type; a backend may
/// hand its proof on to another of its raw methods for the same request
/// (a write as a one-range transaction).
///
/// ```compile_fail
/// use device::{Backend, Checked, MemDevice};
/// let mem = MemDevice::new(4096).unwrap();
/// // Three bytes at offset 3 would pass nothing but this line's compiler.
/// mem.write_raw(&[0; 3], 3, Checked(())).unwrap();
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Checked(());

/// A device's size, sector and buffer alignment: what a request is checked
/// against. Fixed for the device's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub size_bytes: u64,
    pub sector_bytes: u32,
    /// 1 unless buffers must be aligned (O_DIRECT).
    pub buffer_align: usize,
}

impl Geometry {
    /// `size_bytes` in `sector_bytes` sectors, any buffer address.
    pub fn new(size_bytes: u64, sector_bytes: u32) -> Geometry {
        Geometry { size_bytes, sector_bytes, buffer_align: 1 }
    }

    /// The geometry of `dev` (a wrapper presents its inner device's).
    pub fn of(dev: &dyn Device) -> Geometry {
        Geometry {
            size_bytes: dev.size_bytes(),
            sector_bytes: dev.sector_bytes(),
            buffer_align: dev.buffer_align(),
        }
    }
}

/// What the front keeps for one device: its name and geometry, its
/// counters, the descriptor direct submitters may use, and the poison
/// latch. Held by the backend, changed only by the front, except that a
/// backend may poison it: a latch only ever makes a device refuse more.
#[derive(Debug)]
pub struct Front {
    name: String,
    geometry: Geometry,
    fd: Option<RawFd>,
    stats: Stats,
    /// Why writes and flushes are refused; set once, never cleared (the
    /// first cause is the one that matters).
    poison: OnceLock<PoisonCause>,
}

impl Front {
    pub fn new(name: impl Into<String>, geometry: Geometry) -> Front {
        // Every backend derives these from a device it opened or checked
        // (a zero sector would make every request check divide by zero).
        assert!(geometry.sector_bytes > 0 && geometry.buffer_align.is_power_of_two(), "{geometry:?}");
        Front { name: name.into(), geometry, fd: None, stats: Stats::default(), poison: OnceLock::new() }
    }

    /// Offers `fd` to direct submitters ([`Device::raw_fd`]).
    pub fn with_fd(self, fd: RawFd) -> Front {
        Front { fd: Some(fd), ..self }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Poisons the device: every later write and flush is refused with
    /// [`DeviceError::Poisoned`] naming `cause`, until it is reopened. A
    /// device already poisoned keeps its first cause.
    pub fn poison(&self, cause: impl Into<PoisonCause>) {
        let _ = self.poison.set(cause.into());
    }

    /// Fails with [`DeviceError::Poisoned`] once the device is poisoned. A
    /// backend may call it again under its own lock, where a poisoning by
    /// another thread must be seen (the block log joining a transaction).
    pub fn check_poison(&self, op: Op) -> Result<()> {
        match self.poison.get() {
            Some(cause) => Err(DeviceError::Poisoned { device: self.name.clone(), op, cause: cause.clone() }),
            None => Ok(()),
        }
    }

    fn check(&self, op: Op, addr: usize, len: usize, offset: u64) -> Result<()> {
        check_geometry(&self.name, self.geometry, op, addr, len, offset)
    }

    /// Refuses a write of `writes` on a poisoned device or where any range
    /// is not whole sectors inside it; nothing is written then.
    fn check_writes(&self, writes: &[(u64, &[u8])]) -> Result<()> {
        self.check_poison(Op::Write)?;
        for (offset, buf) in writes {
            self.check(Op::Write, buf.as_ptr() as usize, buf.len(), *offset)?;
        }
        Ok(())
    }
}

/// The front: checks, counting and poisoning, once for every backend.
impl<B: Backend> Device for B {
    fn name(&self) -> &str {
        &self.front().name
    }

    fn size_bytes(&self) -> u64 {
        self.front().geometry.size_bytes
    }

    fn sector_bytes(&self) -> u32 {
        self.front().geometry.sector_bytes
    }

    fn buffer_align(&self) -> usize {
        self.front().geometry.buffer_align
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let front = self.front();
        let len = buf.len();
        let result = front.check(Op::Read, buf.as_ptr() as usize, len, offset);
        front.stats.track(result.and_then(|()| self.read_raw(buf, offset, Checked(()))))?;
        front.stats.record_reads(1, len as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let front = self.front();
        let result = front.check_writes(&[(offset, buf)]);
        front.stats.track(result.and_then(|()| self.write_raw(buf, offset, Checked(()))))?;
        front.stats.record_writes(1, buf.len() as u64);
        Ok(())
    }

    fn write_atomic(&self, writes: &[(u64, &[u8])]) -> Result<()> {
        let front = self.front();
        let result = front.check_writes(writes);
        front.stats.track(result.and_then(|()| self.write_atomic_raw(writes, Checked(()))))?;
        let bytes: usize = writes.iter().map(|(_, buf)| buf.len()).sum();
        front.stats.record_writes(writes.len() as u64, bytes as u64);
        Ok(())
    }

    fn write_unlogged(&self, buf: &[u8], offset: u64) -> Result<()> {
        let front = self.front();
        let result = front.check_writes(&[(offset, buf)]);
        front.stats.track(result.and_then(|()| self.write_unlogged_raw(buf, offset, Checked(()))))?;
        front.stats.record_writes(1, buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let front = self.front();
        front.stats.track(front.check_poison(Op::Flush))?;
        if let Err(err) = self.flush_raw(Checked(())) {
            // Never retried: what reached stable storage is unknown.
            front.poison(&err);
            front.stats.record_error();
            return Err(err);
        }
        front.stats.record_flush();
        Ok(())
    }

    fn stats(&self) -> &Stats {
        &self.front().stats
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let front = self.front();
        let checked = front.check_poison(Op::Trim).and_then(|()| {
            let len = usize::try_from(len).map_err(|_| DeviceError::OutOfRange {
                device: front.name.clone(),
                op: Op::Trim,
                offset,
                len,
                size: front.geometry.size_bytes,
            })?;
            // No buffer: only the range is checked.
            front.check(Op::Trim, 0, len, offset)
        });
        let checked = checked.and_then(|()| match self.discards_raw() {
            true => Ok(()),
            false => Err(DeviceError::Invalid(format!(
                "{}: does not take trims (files, block devices, mem: and null: targets do)",
                front.name
            ))),
        });
        front.stats.track(checked.and_then(|()| self.discard_raw(offset, len, Checked(()))))
    }

    fn discards(&self) -> bool {
        self.discards_raw()
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.front().fd
    }

    fn unwritten(&self, start: u64, end: u64) -> Result<Option<Vec<Range<u64>>>> {
        let end = end.min(self.front().geometry.size_bytes);
        self.unwritten_raw(start.min(end), end, Checked(()))
    }

    fn media(&self) -> Vec<Medium> {
        self.media_raw()
    }

    fn drop_cache(&self) -> Result<()> {
        self.drop_cache_raw()
    }

    fn will_need(&self, offset: u64, len: u64) {
        let size = self.front().geometry.size_bytes;
        let end = offset.saturating_add(len).min(size);
        if offset < end {
            self.will_need_raw(offset, end - offset);
        }
    }

    fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes_raw()
    }

    fn virtual_disk(&self) -> Option<&dyn crate::VirtualDisk> {
        self.virtual_disk_raw()
    }

    fn poison(&self, cause: String) {
        self.front().poison(cause);
    }

    fn check_poison(&self, op: Op) -> Result<()> {
        self.front().check_poison(op)
    }
}

/// Checks a request against a device's geometry: sector-aligned offset and
/// length, buffer address aligned to [`Device::buffer_align`], inside the
/// device; a write on a poisoned device is refused. The front calls it before every request; a direct submitter
/// ([`Device::raw_fd`]) calls it before submitting one.
pub fn check_request(dev: &dyn Device, op: Op, addr: usize, len: usize, offset: u64) -> Result<()> {
    if op != Op::Read {
        dev.check_poison(op)?;
    }
    check_geometry(dev.name(), Geometry::of(dev), op, addr, len, offset)
}

fn check_geometry(
    name: &str,
    geometry: Geometry,
    op: Op,
    addr: usize,
    len: usize,
    offset: u64,
) -> Result<()> {
    let sector = u64::from(geometry.sector_bytes);
    let len64 = len as u64;
    if offset % sector != 0 || len64 % sector != 0 {
        return Err(DeviceError::Misaligned {
            device: name.to_string(),
            op,
            offset,
            len: len64,
            what: "offset and length",
            align: sector,
        });
    }
    let mem_align = geometry.buffer_align;
    if mem_align > 1 && addr % mem_align != 0 {
        return Err(DeviceError::Misaligned {
            device: name.to_string(),
            op,
            offset,
            len: len64,
            what: "buffer address",
            align: mem_align as u64,
        });
    }
    let end = offset.checked_add(len64);
    if end.is_none_or(|end| end > geometry.size_bytes) {
        return Err(DeviceError::OutOfRange {
            device: name.to_string(),
            op,
            offset,
            len: len64,
            size: geometry.size_bytes,
        });
    }
    Ok(())
}
