use crate::{Backend, Checked, Device, DeviceError, Front, Geometry, Op, Result};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How to open a file or block device.
#[derive(Clone, Debug, Default)]
pub struct FileOptions {
    /// Open with O_DIRECT: bypass the page cache. Buffers, offsets and
    /// lengths must then be aligned (see [`Device::buffer_align`]).
    pub direct: bool,
    /// Open with O_DSYNC: a write is durable when it completes (with
    /// `direct`, a journal can commit through an io_uring this way).
    pub dsync: bool,
    /// Open read-only; writes fail with EBADF.
    pub read_only: bool,
    /// For a regular file: create it (sparse) if missing and extend it to
    /// this size if shorter. Never shrinks a file. Ignored for devices.
    pub create_bytes: Option<u64>,
    /// Sector size for a regular file (512 by default; 4096 to emulate a 4Kn
    /// disk). A block device always uses its own logical sector size.
    pub sector_bytes: Option<u32>,
}

/// An advisory lock on a file or block device (`flock`), held by the open
/// file until the device is dropped. Readers share; a writer excludes
/// every other holder. Processes that take no lock (fio, dd) are not
/// stopped: the lock only keeps two iolab processes apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Shared,
    Exclusive,
}

/// A regular file or a block device, read and written with positional
/// system calls (pread/pwrite), flushed with fdatasync. Its descriptor is
/// offered to direct submitters ([`Device::raw_fd`]).
pub struct FileDevice {
    front: Front,
    path: PathBuf,
    file: File,
    is_block_device: bool,
    direct: bool,
    read_only: bool,
}

// ioctl request numbers from <linux/fs.h>.
const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKDISCARD: libc::c_ulong = 0x1277;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

impl FileDevice {
    pub fn open(path: impl AsRef<Path>, options: &FileOptions) -> Result<FileDevice> {
        let path = path.as_ref();
        let file = open_file(path, options)?;
        let meta = file.metadata().map_err(|e| open_error(path, "cannot stat", e))?;
        let is_block_device = meta.file_type().is_block_device();
        if !is_block_device && !meta.is_file() {
            return Err(DeviceError::Invalid(format!(
                "{}: not a regular file or a block device",
                path.display()
            )));
        }
        let (size_bytes, sector_bytes, buffer_align) = if is_block_device {
            block_device_geometry(path, &file, options)?
        } else {
            file_geometry(path, &file, meta.len(), options)?
        };
        let size_bytes = size_bytes - size_bytes % u64::from(sector_bytes);
        if size_bytes == 0 {
            let hint =
                if options.create_bytes.is_none() { "; give a size to create or extend it" } else { "" };
            return Err(DeviceError::Invalid(format!(
                "{}: holds less than one sector ({sector_bytes} bytes){hint}",
                path.display()
            )));
        }
        let geometry = Geometry { size_bytes, sector_bytes, buffer_align };
        Ok(FileDevice {
            front: Front::new(path.display().to_string(), geometry).with_fd(file.as_raw_fd()),
            path: path.to_path_buf(),
            file,
            is_block_device,
            direct: options.direct,
            read_only: options.read_only,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes an advisory lock on the open file without waiting. When
    /// another open file (in this process or another) holds a conflicting
    /// one, fails with [`DeviceError::Locked`], naming the holder where
    /// /proc/locks tells it.
    pub fn lock(&self, kind: LockKind) -> Result<()> {
        // A process that exited a moment ago may still hold its locks: the
        // kernel drops the files an io_uring held after the process is
        // gone. Such a holder is waited for, briefly; a live one never.
        const DEPARTED_WAITS: u32 = 200;
        let op = match kind {
            LockKind::Shared => libc::LOCK_SH,
            LockKind::Exclusive => libc::LOCK_EX,
        } | libc::LOCK_NB;
        for _ in 0..DEPARTED_WAITS {
            // SAFETY: flock takes a descriptor this device owns and plain flags.
            if unsafe { libc::flock(self.file.as_raw_fd(), op) } == 0 {
                return Ok(());
            }
            let source = io::Error::last_os_error();
            if source.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(DeviceError::Open {
                    path: self.path.clone(),
                    what: "cannot lock".into(),
                    source,
                });
            }
            let holder = self.file.metadata().ok().and_then(|m| lock_holder(&m));
            if let Some((holder, pid)) = holder {
                if std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(DeviceError::Locked { path: self.path.clone(), holder, pid: Some(pid) });
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err(DeviceError::Locked {
            path: self.path.clone(),
            holder: "a process that has exited (its locks were still not released after 2 s)".into(),
            pid: None,
        })
    }

    pub fn is_block_device(&self) -> bool {
        self.is_block_device
    }

    /// True when `offset..offset+len` of a regular file holds no data
    /// extent (a hole throughout), so it reads as zeros: a sparse file
    /// never written there. False for block devices, and where the file
    /// system cannot tell (it then reports the whole file as data).
    pub fn holds_no_data(&self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len);
        let whole = offset..end.min(self.size_bytes());
        matches!(self.unwritten(offset, end), Ok(Some(holes)) if holes.len() == 1 && holes[0] == whole)
    }

    fn io_error(&self, op: Op, offset: u64, len: usize, source: io::Error) -> DeviceError {
        DeviceError::Io { device: self.name().to_string(), op, offset, len: len as u64, source }
    }
}

impl Backend for FileDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        let len = buf.len();
        self.file.read_exact_at(buf, offset).map_err(|e| self.io_error(Op::Read, offset, len, e))
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        self.file.write_all_at(buf, offset).map_err(|e| self.io_error(Op::Write, offset, buf.len(), e))
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        self.file.sync_data().map_err(|source| DeviceError::Flush { device: self.name().to_string(), source })
    }

    /// A block device: BLKDISCARD. A file: a hole punched, its size kept.
    fn discard_raw(&self, offset: u64, len: u64, _: Checked) -> Result<()> {
        let fd = self.file.as_raw_fd();
        let done = if self.is_block_device {
            let range = [offset, len];
            // SAFETY: BLKDISCARD reads two u64s (start, length) from the
            // pointer, which points at `range` for the call's duration.
            unsafe { libc::ioctl(fd, BLKDISCARD, range.as_ptr()) }
        } else {
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            // SAFETY: fallocate only takes integers; `fd` is open for
            // writing as long as `self` is.
            unsafe { libc::fallocate(fd, mode, offset as libc::off_t, len as libc::off_t) }
        };
        match done {
            0 => Ok(()),
            _ => Err(self.io_error(Op::Trim, offset, len as usize, io::Error::last_os_error())),
        }
    }

    fn discards_raw(&self) -> bool {
        true
    }

    /// A block device has no holes: every sector reads from the medium.
    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        if self.is_block_device {
            return Ok(Some(Vec::new()));
        }
        crate::medium::file_holes(self.file.as_raw_fd(), start, end, u64::from(self.sector_bytes()))
            .map(Some)
            .map_err(|source| self.io_error(Op::Read, start, (end - start) as usize, source))
    }

    fn media_raw(&self) -> Vec<crate::Medium> {
        let fd = self.file.as_raw_fd();
        let (filesystem, memory_backed) = match self.is_block_device {
            true => (None, false),
            false => crate::medium::filesystem_of(fd).map_or((None, false), |(n, m)| (Some(n), m)),
        };
        let cached_bytes =
            if self.direct { None } else { crate::medium::cached_bytes(fd, self.size_bytes()) };
        vec![crate::Medium {
            name: self.name().to_string(),
            kind: if self.is_block_device { crate::MediumKind::BlockDevice } else { crate::MediumKind::File },
            direct: self.direct,
            filesystem,
            memory_backed,
            cached_bytes,
        }]
    }

    /// Writes back dirty pages (DONTNEED leaves them) and drops every page
    /// of the file. A read-only or O_DIRECT open has none of its own to
    /// write; other openers' pages are dropped all the same. The write-back
    /// is a flush through the front: refused on a poisoned device, and
    /// poisoning it when it fails.
    /// Through the page cache only: under O_DIRECT nothing is kept.
    fn will_need_raw(&self, offset: u64, len: u64) {
        if self.direct {
            return;
        }
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return;
        };
        // SAFETY: posix_fadvise on an open descriptor; advice only, and
        // its failure changes nothing but the speed of later reads.
        unsafe { libc::posix_fadvise(self.file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED) };
    }

    fn drop_cache_raw(&self) -> Result<()> {
        let fd = self.file.as_raw_fd();
        if !self.read_only {
            self.flush()?;
        }
        // SAFETY: posix_fadvise on an open descriptor; advice only.
        let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            let source = io::Error::from_raw_os_error(rc);
            return Err(DeviceError::Open {
                path: self.path.clone(),
                what: "cannot drop its cached pages".into(),
                source,
            });
        }
        Ok(())
    }
}

/// Who holds a `flock` on the file `meta` describes: "process PID (COMMAND)",
/// from /proc/locks, whose device field is MAJOR:MINOR:INODE (hex major and
/// minor). None when the holder cannot be told (another namespace).
fn lock_holder(meta: &std::fs::Metadata) -> Option<(String, u32)> {
    use std::os::unix::fs::MetadataExt;
    let dev = meta.dev();
    let id = format!("{:02x}:{:02x}:{}", libc::major(dev), libc::minor(dev), meta.ino());
    let me = std::process::id().to_string();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" ("->" marks waiters).
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&id.as_str()))
            .then(|| fields[4].to_string())
    })?;
    let pid_number: u32 = pid.parse().ok()?;
    if pid == me {
        return Some((
            format!("this process (pid {pid}), through another open of the same file"),
            pid_number,
        ));
    }
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok().map(|raw| {
        raw.split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    });
    let holder = match command {
        Some(c) if !c.is_empty() => format!("process {pid} ({c})"),
        _ => format!("process {pid}"),
    };
    Some((holder, pid_number))
}

fn open_error(path: &Path, what: &str, source: io::Error) -> DeviceError {
    DeviceError::Open { path: path.to_path_buf(), what: what.to_string(), source }
}

/// Opens `path` as `options` ask, naming what failed and the way on.
fn open_file(path: &Path, options: &FileOptions) -> Result<File> {
    let exists = path.exists();
    let mut open = OpenOptions::new();
    open.read(true).write(!options.read_only);
    if options.create_bytes.is_some() && !options.read_only {
        open.create(true);
    }
    let flags =
        if options.direct { libc::O_DIRECT } else { 0 } | if options.dsync { libc::O_DSYNC } else { 0 };
    open.custom_flags(flags);
    open.open(path).map_err(|e| {
        let what = if options.direct && e.raw_os_error() == Some(libc::EINVAL) {
            "cannot open with O_DIRECT (the file system does not support it; drop --direct)"
        } else if !exists && options.create_bytes.is_none() {
            "does not exist (give a size to create it)"
        } else {
            "cannot open"
        };
        open_error(path, what, e)
    })
}

/// A block device's (size, sector, buffer alignment), from the kernel.
fn block_device_geometry(path: &Path, file: &File, options: &FileOptions) -> Result<(u64, u32, usize)> {
    let sector = block_device_sector(file).map_err(|e| open_error(path, "cannot read the sector size", e))?;
    let size = block_device_size(file).map_err(|e| open_error(path, "cannot read the device size", e))?;
    Ok((size, sector, if options.direct { sector as usize } else { 1 }))
}

/// A regular file's (size, sector, buffer alignment): extended to
/// `create_bytes` when shorter, the sector as asked (512 or 4096) and, with
/// O_DIRECT, at least what the file system requires (statx).
fn file_geometry(path: &Path, file: &File, len: u64, options: &FileOptions) -> Result<(u64, u32, usize)> {
    let sector = options.sector_bytes.unwrap_or(512);
    if !(sector == 512 || sector == 4096) {
        return Err(DeviceError::Invalid(format!(
            "{}: sector size {sector} is not supported; use 512 or 4096",
            path.display()
        )));
    }
    let mut size = len;
    if let Some(want) = options.create_bytes.filter(|&want| size < want && !options.read_only) {
        file.set_len(want).map_err(|e| open_error(path, "cannot extend the file", e))?;
        size = want;
    }
    if !options.direct {
        return Ok((size, sector, 1));
    }
    let (mem_align, offset_align) = dio_alignment(file).unwrap_or((512, 512));
    Ok((size, sector.max(offset_align), mem_align.max(1) as usize))
}

fn block_device_sector(file: &File) -> io::Result<u32> {
    let mut sector: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKSSZGET as _, &mut sector) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(sector).map_err(|_| io::Error::other("negative sector size"))
}

fn block_device_size(file: &File) -> io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64 as _, &mut size) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size)
}

/// The O_DIRECT alignment the kernel reports for a file (statx
/// STATX_DIOALIGN, Linux 6.1+): (memory alignment, offset alignment).
fn dio_alignment(file: &File) -> Option<(u32, u32)> {
    // SAFETY: statx fills the zeroed struct; the empty path with
    // AT_EMPTY_PATH refers to the descriptor itself.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(file.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut stx)
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((stx.stx_dio_mem_align, stx.stx_dio_offset_align))
}
