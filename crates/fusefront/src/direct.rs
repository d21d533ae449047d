//! When an open for writing goes around the kernel's page cache
//! (`FOPEN_DIRECT_IO`), so that its write(2) calls reach the file system
//! and hear ENOSPC or EFBIG at the call (docs/fs.md, "Limits where
//! programs see them").
//!
//! With the writeback cache a write(2) ends in the kernel's page cache
//! without a request (fs/fuse/file.c, `fuse_cache_write_iter`: once the
//! attributes are fresh, `generic_file_write_iter`); the server hears of
//! it at write-back, where a refusal can only be recorded for a later
//! fsync or close. Nothing in INIT changes that for a mount (nor tells the
//! kernel a largest file: fs/fuse/inode.c, `fuse_sb_defaults` sets
//! `s_maxbytes` to `MAX_LFS_FILESIZE`), but an open's reply may ask for
//! direct I/O, and then each write(2) of that open is a request.
//!
//! An open for writing goes direct when the file system's free space is
//! below a threshold (by default twice the dirty bytes the kernel lets the
//! mount hold: fs/fuse/inode.c, `fuse_bdi_init`, gives a FUSE mount's
//! backing device 1 % of the dirty limit, strictly kept, which
//! `/sys/class/bdi/MAJ:MIN/max_bytes` says in bytes), or when the file is
//! within that much of its largest size. Above the threshold, what the
//! page cache holds for the mount fits in the free space, so opens keep
//! the cache and its speed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use fsapi::{Attr, FileSystem, FileType};

/// `FOPEN_DIRECT_IO` in an open's reply (include/uapi/linux/fuse.h).
pub(crate) const FOPEN_DIRECT_IO: u32 = 1 << 0;

/// The threshold over what the kernel may hold dirty for the mount: the
/// kernel keeps a backing device to its share by throttling writers after
/// they dirtied pages (balance_dirty_pages, every few pages a task), so
/// the dirty bytes may pass it a little; twice is the margin chosen, and
/// covers the indirect blocks the data needs as well (one per 1,024
/// blocks).
const THRESHOLD_PER_DIRTY_BYTE: u64 = 2;

/// What the kernel may hold dirty for a mount when it does not say (no
/// sysfs, or a mount missing from /proc/self/mountinfo).
const DIRTY_BYTES_UNKNOWN: u64 = 64 << 20;

/// The decision's state, shared by both transports.
#[derive(Debug, Default)]
pub(crate) struct Direct {
    /// Opens for writing go direct below this many free bytes; 0: never
    /// (no writeback cache: every write is a request already).
    below_bytes: AtomicU64,
    /// Opens answered with direct I/O.
    opens: AtomicU64,
}

/// What the direct-I/O opens of a mount were, for its report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectIoReport {
    /// Opens for writing went direct below this many free bytes.
    pub below_bytes: u64,
    /// Opens answered with direct I/O.
    pub opens: u64,
}

impl Direct {
    pub fn set_below(&self, bytes: u64) {
        self.below_bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn report(&self) -> DirectIoReport {
        DirectIoReport {
            below_bytes: self.below_bytes.load(Ordering::Relaxed),
            opens: self.opens.load(Ordering::Relaxed),
        }
    }

    /// Whether an open with the open(2) `flags` may go direct: one for
    /// writing, on a mount with the writeback cache.
    pub fn may_go_direct(&self, flags: i32) -> bool {
        flags & libc::O_ACCMODE != libc::O_RDONLY && self.below_bytes.load(Ordering::Relaxed) != 0
    }

    /// The `FOPEN_*` bits for an open of the inode `attr` names with the
    /// open(2) `flags` it was asked with.
    pub fn open_flags(&self, fs: &dyn FileSystem, attr: &Attr, flags: i32) -> u32 {
        if !self.may_go_direct(flags) || attr.kind != FileType::File {
            return 0;
        }
        let below = self.below_bytes.load(Ordering::Relaxed);
        // A file system that cannot say its free space keeps the cache.
        let Ok(space) = fs.statfs() else { return 0 };
        let free_bytes = space.blocks_avail.saturating_mul(u64::from(space.block_bytes));
        if !goes_direct(free_bytes, attr.size, fs.file_bytes_max(), below) {
            return 0;
        }
        self.opens.fetch_add(1, Ordering::Relaxed);
        FOPEN_DIRECT_IO
    }
}

/// Whether an open for writing of a file of `size` bytes goes direct:
/// less than `below` bytes free, or less than that much short of the
/// largest file.
pub(crate) fn goes_direct(free_bytes: u64, size: u64, file_bytes_max: u64, below: u64) -> bool {
    free_bytes < below || size.saturating_add(below) > file_bytes_max
}

/// The threshold for the FUSE mount at `mountpoint` (its canonical path):
/// twice the dirty bytes the kernel lets it hold.
pub(crate) fn threshold_for(mountpoint: &Path) -> u64 {
    THRESHOLD_PER_DIRTY_BYTE * kernel_dirty_bytes_max(mountpoint).unwrap_or(DIRTY_BYTES_UNKNOWN)
}

/// The dirty bytes the kernel lets the mount at `mountpoint` hold: its
/// backing device's `max_bytes` (Linux 6.2 and later), else its
/// `max_ratio` of the system's dirty threshold.
fn kernel_dirty_bytes_max(mountpoint: &Path) -> Option<u64> {
    let mountinfo = std::fs::read("/proc/self/mountinfo").ok()?;
    let bdi = Path::new("/sys/class/bdi").join(device_of(&mountinfo, mountpoint)?);
    let read = |name: &str| std::fs::read_to_string(bdi.join(name)).ok()?.trim().parse::<u64>().ok();
    if let Some(bytes) = read("max_bytes") {
        return Some(bytes);
    }
    let vmstat = std::fs::read_to_string("/proc/vmstat").ok()?;
    let pages =
        vmstat.lines().find_map(|l| l.strip_prefix("nr_dirty_threshold "))?.trim().parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page_bytes = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    Some(pages * page_bytes * read("max_ratio")? / 100)
}

/// The `MAJ:MIN` of the mount at `mountpoint` in a mountinfo table (the
/// name its backing device has under /sys/class/bdi); the last mount
/// there wins, as the kernel's path lookup does.
fn device_of(mountinfo: &[u8], mountpoint: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let wanted = escaped(mountpoint.as_os_str().as_bytes());
    // id, parent id, MAJ:MIN, root, mount point, ...
    mountinfo.split(|&b| b == b'\n').rev().find_map(|line| {
        let mut fields = line.split(|&b| b == b' ');
        let device = fields.nth(2)?;
        (fields.nth(1)? == wanted.as_slice()).then(|| String::from_utf8_lossy(device).into_owned())
    })
}

/// A path as mountinfo writes it: space, tab, newline and backslash as
/// octal escapes.
fn escaped(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &b in path {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 4_299_210_752;

    #[test]
    fn an_open_goes_direct_only_below_the_free_space_threshold() {
        assert!(!goes_direct(100 << 20, 0, MAX, 92 << 20));
        assert!(goes_direct(91 << 20, 0, MAX, 92 << 20));
    }

    #[test]
    fn a_file_near_its_largest_size_goes_direct_whatever_the_free_space() {
        assert!(goes_direct(1 << 40, MAX - (1 << 20), MAX, 92 << 20));
        assert!(!goes_direct(1 << 40, MAX - (92 << 20), MAX, 92 << 20));
    }

    #[test]
    fn the_mount_is_found_by_its_escaped_path_and_the_last_one_wins() {
        let table = b"36 25 0:31 / /mnt/a\\040b rw - fuse iolab rw\n\
                     40 36 0:52 / /mnt/x rw,nosuid - fuse iolab rw\n\
                     41 36 0:53 / /mnt/x rw,nosuid - fuse iolab rw\n";
        assert_eq!(device_of(table, Path::new("/mnt/a b")).as_deref(), Some("0:31"));
        assert_eq!(device_of(table, Path::new("/mnt/x")).as_deref(), Some("0:53"));
        assert_eq!(device_of(table, Path::new("/mnt/y")), None);
    }

    #[test]
    fn an_open_for_reading_or_a_directory_never_goes_direct() {
        let fs = fsapi::ModelFs::new();
        let direct = Direct::default();
        direct.set_below(u64::MAX);
        let file = fs.create(fsapi::ROOT, std::ffi::OsStr::new("f"), fsapi::Owner::root(0o644)).unwrap();
        let root = fs.getattr(fsapi::ROOT).unwrap();
        assert_eq!(direct.open_flags(&fs, &file, libc::O_RDONLY), 0);
        assert_eq!(direct.open_flags(&fs, &root, libc::O_RDWR), 0);
        assert_eq!(direct.open_flags(&fs, &file, libc::O_WRONLY), FOPEN_DIRECT_IO);
        assert_eq!(direct.report().opens, 1);
    }
}
