//! What a device reads and writes in the end, for reports: the files,
//! block devices or memory under it, how they are reached (through the
//! page cache or not) and the file system a file lives on. A figure
//! measured on a file on tmpfs measures memory, and one measured through
//! a warm page cache measures the cache: a report must say which.

use std::ops::Range;
use std::os::fd::RawFd;

/// What kind of thing holds the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediumKind {
    File,
    BlockDevice,
    /// An in-memory image (`mem:`).
    Memory,
    /// Nothing: writes discarded, reads untouched (`null:`).
    Null,
    /// A simulated disk (`sim:`): its times are modeled, in virtual time.
    Simulated,
}

/// One medium under a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Medium {
    /// The path, or `mem:1g`, `null:1g`.
    pub name: String,
    pub kind: MediumKind,
    /// Opened with O_DIRECT: requests bypass the page cache.
    pub direct: bool,
    /// The file system a file lives on (statfs type), e.g. "ext4"; None for
    /// block devices, memory and null.
    pub filesystem: Option<String>,
    /// The bytes live in memory (tmpfs, ramfs, `mem:`): figures measure
    /// memory, not a disk.
    pub memory_backed: bool,
    /// Bytes of the file in the page cache when this was read (buffered
    /// files and block devices only).
    pub cached_bytes: Option<u64>,
}

/// The name of a statfs `f_type` (linux/magic.h) and whether it keeps its
/// files in memory.
pub(crate) fn filesystem_name(f_type: i64) -> (String, bool) {
    let (name, memory) = match f_type as u32 {
        0xEF53 => ("ext4", false), // ext2, ext3 and ext4 share the magic
        0x5846_5342 => ("xfs", false),
        0x9123_683E => ("btrfs", false),
        0x0102_1994 => ("tmpfs", true),
        0x8584_58F6 => ("ramfs", true),
        0x794C_7630 => ("overlayfs", false),
        0x6969 => ("nfs", false),
        0x2FC1_2FC1 => ("zfs", false),
        0xF2F5_2010 => ("f2fs", false),
        0x6573_5546 => ("fuse", false),
        0x0102_1997 => ("9p", false),
        0x4D44 => ("vfat", false),
        0x5346_544E => ("ntfs", false),
        0x7366_746E => ("ntfs3", false),
        0x2011_BAB0 => ("exfat", false),
        0xFF53_4D42 => ("cifs", false),
        0x6462_6720 => ("debugfs", true),
        other => return (format!("unknown (statfs type {other:#x})"), false),
    };
    (name.to_string(), memory)
}

/// The file system `fd` lives on.
pub(crate) fn filesystem_of(fd: RawFd) -> Option<(String, bool)> {
    // SAFETY: fstatfs fills the zeroed struct for an open descriptor.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(fd, &mut st) } != 0 {
        return None;
    }
    Some(filesystem_name(st.f_type as i64))
}

/// The holes of a regular file within `start..end`, found with SEEK_DATA
/// and SEEK_HOLE, shrunk to whole `sector`s (a sector only partly a hole
/// holds data and is never reported). None when the file system cannot
/// tell (then everything is data).
pub(crate) fn file_holes(fd: RawFd, start: u64, end: u64, sector: u64) -> std::io::Result<Vec<Range<u64>>> {
    let seek = |from: u64, whence| -> std::io::Result<Option<u64>> {
        // SAFETY: lseek on an open descriptor; it only moves the offset,
        // which iolab never uses (all I/O is positional).
        let at = unsafe { libc::lseek(fd, from as libc::off_t, whence) };
        if at >= 0 {
            return Ok(Some(at as u64));
        }
        let err = std::io::Error::last_os_error();
        // ENXIO: no data (SEEK_DATA) past `from`.
        if err.raw_os_error() == Some(libc::ENXIO) {
            return Ok(None);
        }
        Err(err)
    };
    let mut holes = Vec::new();
    let mut pos = start;
    while pos < end {
        let hole = match seek(pos, libc::SEEK_HOLE)? {
            Some(h) => h,
            None => break,
        };
        if hole >= end {
            break;
        }
        let data = seek(hole, libc::SEEK_DATA)?.unwrap_or(end).min(end);
        let (from, to) = (hole.div_ceil(sector) * sector, data / sector * sector);
        if from < to {
            holes.push(from..to);
        }
        pos = data;
    }
    Ok(holes)
}

/// Bytes of `fd`'s first `len` bytes in the page cache (mincore over a
/// mapping, a window at a time). None where the file cannot be mapped.
pub(crate) fn cached_bytes(fd: RawFd, len: u64) -> Option<u64> {
    const WINDOW: u64 = 1 << 30;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let mut cached = 0;
    let mut at = 0;
    let mut vec = Vec::new();
    while at < len {
        let n = WINDOW.min(len - at);
        // SAFETY: a read-only shared mapping of an open descriptor at a
        // page-aligned offset; it is only passed to mincore and unmapped
        // before the next window, never read through.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                at as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        vec.resize(n.div_ceil(page) as usize, 0u8);
        // SAFETY: `vec` holds one byte per page of the mapping.
        let rc = unsafe { libc::mincore(map, n as usize, vec.as_mut_ptr()) };
        // SAFETY: unmaps exactly the mapping made above.
        unsafe { libc::munmap(map, n as usize) };
        if rc != 0 {
            return None;
        }
        cached += vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page;
        at += n;
    }
    Some(cached.min(len))
}
