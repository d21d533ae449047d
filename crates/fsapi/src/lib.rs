//! The file-system interface every iolab file-system workload runs on: a
//! [`FileSystem`] addressed by inode number, with positional calls on
//! `&self` (any number of threads may call at once), errno-style errors,
//! and FUSE's lookup-count lifetime (every call that returns an entry
//! counts one reference to its inode until [`FileSystem::forget`]).
//!
//! Backends: iolab's own file system (the `ffs` crate), [`ModelFs`] (a
//! reference model in memory, for property tests), and [`HostFs`] (a real
//! directory of any kernel file system), so one workload runs unchanged
//! on each. The FUSE front serves any of them to the kernel.
//!
//! This crate never prints and knows nothing of devices or workloads.

mod errno;
mod host;
mod interrupt;
mod model;
mod range;
pub mod testing;
pub mod xattr;

use std::ffi::OsStr;

pub use errno::Errno;
pub use host::HostFs;
pub use interrupt::Interruptible;
pub use model::{ModelFs, MODEL_BLOCK_BYTES};
pub use range::{copy_len, fallocate_end, regular_only, seek, Fallocate, Whence};
pub use xattr::{XattrFlags, XattrName};

/// An inode number.
pub type Ino = u64;

/// The root directory's inode number (as in FUSE).
pub const ROOT: Ino = 1;

/// The longest name a directory entry holds, in bytes.
pub const NAME_BYTES_MAX: usize = 255;

/// The largest file a backend allows unless it says less
/// ([`FileSystem::file_bytes_max`]): Linux's own bound on a file offset
/// (`MAX_LFS_FILESIZE` on 64-bit machines), which the kernel checks
/// before any file system sees a write.
pub const FILE_BYTES_MAX: u64 = i64::MAX as u64;

pub type Result<T, E = Errno> = std::result::Result<T, E>;

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    File,
    Dir,
    Symlink,
    /// A named pipe (`mkfifo`): the kernel moves its bytes, the file
    /// system only names it.
    Fifo,
    /// A character device node: its number ([`Attr::rdev`]) says which.
    CharDevice,
    /// A block device node: its number ([`Attr::rdev`]) says which.
    BlockDevice,
    /// A Unix domain socket's name (made by `bind`).
    Socket,
}

impl FileType {
    /// Every kind, for tests and tables that go through them all.
    pub const ALL: [FileType; 7] = [
        FileType::File,
        FileType::Dir,
        FileType::Symlink,
        FileType::Fifo,
        FileType::CharDevice,
        FileType::BlockDevice,
        FileType::Socket,
    ];

    /// The kind's `S_IFMT` bits, as `st_mode` and FUSE's `mode` carry them.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::File => libc::S_IFREG,
            FileType::Dir => libc::S_IFDIR,
            FileType::Symlink => libc::S_IFLNK,
            FileType::Fifo => libc::S_IFIFO,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::BlockDevice => libc::S_IFBLK,
            FileType::Socket => libc::S_IFSOCK,
        }
    }

    /// The kind whose `S_IFMT` bits `mode` holds; None for bits no kind has.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        FileType::ALL.into_iter().find(|k| k.mode_bits() == mode & libc::S_IFMT)
    }

    /// A FIFO, a device node or a socket: what only `mknod` makes. It has
    /// no data of its own (the kernel serves its I/O), so a file system's
    /// `read`, `write` and truncation refuse it.
    pub fn is_special(self) -> bool {
        matches!(self, FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket)
    }

    /// A device node, whose inode keeps a device number.
    pub fn is_device(self) -> bool {
        matches!(self, FileType::CharDevice | FileType::BlockDevice)
    }
}

/// A device number as Linux gives it to user space for majors below 4096
/// (the kernel's limit: 12 bits of major, 20 of minor), in 32 bits: the
/// minor's low byte in bits 0-7, the major in bits 8-19, the rest of the
/// minor in bits 20-31. It is `st_rdev` (glibc's `makedev`, whose upper
/// 32 bits are then zero) and FUSE's `rdev`, so it passes through
/// unchanged. Bits past those limits are dropped.
pub fn makedev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & 0xfff00) << 12)
}

/// The major number of a device number ([`makedev`]'s encoding).
pub fn major(rdev: u32) -> u32 {
    (rdev >> 8) & 0xfff
}

/// The minor number of a device number ([`makedev`]'s encoding).
pub fn minor(rdev: u32) -> u32 {
    (rdev & 0xff) | ((rdev >> 12) & 0xfff00)
}

/// A time as seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    pub secs: i64,
    pub nanos: u32,
}

impl Time {
    /// Now, by the system clock.
    pub fn now() -> Time {
        let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Time { secs: d.as_secs() as i64, nanos: d.subsec_nanos() }
    }
}

/// An inode's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: FileType,
    /// Permission bits (and set-id and sticky bits): `mode & 0o7777`.
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Bytes: a file's length, a symlink's target length, a directory's
    /// size as the backend keeps it.
    pub size: u64,
    /// 512-byte units allocated (as `st_blocks`).
    pub blocks: u64,
    /// A device node's number ([`makedev`]); 0 for every other kind.
    pub rdev: u32,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
}

/// Changes to an inode's attributes; `None` leaves one as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u16>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Truncate or extend (files only: `EISDIR` for a directory, `EINVAL`
    /// for any other kind, as truncate(2)).
    pub size: Option<u64>,
    pub atime: Option<Time>,
    pub mtime: Option<Time>,
}

/// How a rename treats its destination: renameat2(2)'s flags, each a mode
/// of its own (Linux refuses two at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RenameMode {
    /// rename(2): a destination of the same kind is replaced.
    Replace,
    /// `RENAME_NOREPLACE`: `EEXIST` when the destination exists.
    NoReplace,
    /// `RENAME_EXCHANGE`: the two entries swap what they name, at once;
    /// both must exist, and may be of any kinds.
    Exchange,
}

impl RenameMode {
    /// The mode renameat2(2)'s `flags` ask for (as FUSE's RENAME2 carries
    /// them). `EINVAL` for anything else: `RENAME_WHITEOUT` (overlayfs's
    /// whiteouts, which no backend makes), unknown bits, or two modes.
    pub fn from_flags(flags: u32) -> Result<RenameMode> {
        match flags {
            0 => Ok(RenameMode::Replace),
            libc::RENAME_NOREPLACE => Ok(RenameMode::NoReplace),
            libc::RENAME_EXCHANGE => Ok(RenameMode::Exchange),
            _ => Err(Errno::INVAL),
        }
    }

    /// renameat2(2)'s flags for the mode.
    pub fn flags(self) -> u32 {
        match self {
            RenameMode::Replace => 0,
            RenameMode::NoReplace => libc::RENAME_NOREPLACE,
            RenameMode::Exchange => libc::RENAME_EXCHANGE,
        }
    }
}

/// Who creates an inode, and with what permission bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    /// Root's, with `perm`.
    pub fn root(perm: u16) -> Owner {
        Owner { perm, uid: 0, gid: 0 }
    }

    /// Who a new inode of `kind` belongs to in a directory whose mode bits
    /// are `parent_perm` and group `parent_gid`, as Linux's
    /// `inode_init_owner` and BSD decide: in a set-group-ID directory it
    /// takes the directory's group, and a new directory there is
    /// set-group-ID too. (Linux's VFS has already cleared a new file's
    /// set-group-ID bit for a creator outside the group, `mode_strip_sgid`,
    /// before the request reaches a FUSE server.)
    pub fn under(self, parent_perm: u16, parent_gid: u32, kind: FileType) -> Owner {
        if parent_perm & 0o2000 == 0 {
            return self;
        }
        let perm = if kind == FileType::Dir { self.perm | 0o2000 } else { self.perm };
        Owner { perm, gid: parent_gid, ..self }
    }
}

/// One directory entry from [`FileSystem::readdir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: Ino,
    pub kind: FileType,
    pub name: Vec<u8>,
    /// The offset to pass to `readdir` to continue after this entry. It
    /// stays valid while other entries are removed (so `rm -rf` can read
    /// a directory and unlink as it goes).
    pub next: u64,
}

/// Sizes and counts, as `statvfs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub block_bytes: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_avail: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_bytes_max: u32,
}

/// A file system, addressed by inode number.
///
/// Contract every backend keeps:
/// - `lookup`, `create`, `mkdir`, `mknod`, `symlink` and `link` each count one
///   reference to the inode they return, released by `forget`; an inode
///   whose last link is gone lives on while referenced or open, as an
///   open file on a kernel file system does. The root is never counted:
///   `forget(ROOT, _)` does nothing;
/// - names are single path components: non-empty, no `/`, not `.` or
///   `..`, at most [`NAME_BYTES_MAX`] bytes (else `EINVAL` or
///   `ENAMETOOLONG`);
/// - `readdir` offsets survive removals of other entries;
/// - nothing is durable until `fsync` (that file) or `sync` (everything)
///   returns.
pub trait FileSystem: Send + Sync {
    /// The entry `name` in directory `parent`.
    fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Attr>;

    /// Drops `count` references `lookup` and friends counted.
    fn forget(&self, ino: Ino, count: u64);

    fn getattr(&self, ino: Ino) -> Result<Attr>;

    fn setattr(&self, ino: Ino, changes: &SetAttr) -> Result<Attr>;

    /// A new empty file `name` in `parent` (`EEXIST` if the name is taken).
    fn create(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr>;

    fn mkdir(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr>;

    /// A new inode of `kind` named `name` in `parent`, as mknod(2): a
    /// FIFO, a device node (numbered `rdev`, kept for devices only), a
    /// socket, or an empty file. `EEXIST` if the name is taken; for a
    /// directory `EPERM` and for a symlink `EINVAL` before anything else,
    /// as mknod(2) (mkdir and symlink make those).
    fn mknod(&self, parent: Ino, name: &OsStr, kind: FileType, rdev: u32, owner: Owner) -> Result<Attr>;

    fn symlink(&self, parent: Ino, name: &OsStr, target: &OsStr, owner: Owner) -> Result<Attr>;

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;

    /// A new name for `ino`, anything but a directory (`EPERM`).
    fn link(&self, ino: Ino, new_parent: Ino, new_name: &OsStr) -> Result<Attr>;

    /// Removes the entry of anything but a directory.
    fn unlink(&self, parent: Ino, name: &OsStr) -> Result<()>;

    /// Removes an empty directory.
    fn rmdir(&self, parent: Ino, name: &OsStr) -> Result<()>;

    /// Moves an entry, replacing a file or an empty directory of the same
    /// kind at the destination (as rename(2)).
    fn rename(&self, parent: Ino, name: &OsStr, new_parent: Ino, new_name: &OsStr) -> Result<()> {
        self.rename2(parent, name, new_parent, new_name, RenameMode::Replace)
    }

    /// renameat2(2): a rename in `mode`, checked in Linux's order (the
    /// source missing `ENOENT`; under `NoReplace` a destination `EEXIST`,
    /// under `Exchange` a missing one `ENOENT`; a directory moved under
    /// itself `EINVAL`; a destination above the source's directory
    /// `ENOTEMPTY`, or `EINVAL` for an exchange; two names of one inode
    /// nothing to do). An exchange moves directories between parents with
    /// their `..`, and the parents' link counts follow.
    fn rename2(
        &self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        mode: RenameMode,
    ) -> Result<()>;

    /// Marks a file open; an unlinked file is kept until released.
    fn open(&self, ino: Ino) -> Result<()> {
        self.getattr(ino).map(|_| ())
    }

    fn release(&self, ino: Ino) {
        let _ = ino;
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer at the end of the
    /// file. A directory is `EISDIR`; a symlink and a FIFO, device or
    /// socket `EINVAL` (the kernel moves their bytes, never the file
    /// system: through FUSE it never asks).
    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// Writes `data` at `offset`, extending the file as needed; refuses
    /// what `read` refuses, likewise.
    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize>;

    /// Calls `entry` for the entries of directory `ino` from `offset` (0:
    /// the first; `.` and `..` are not listed), in a stable order, until it
    /// returns false or the directory ends.
    fn readdir(&self, ino: Ino, offset: u64, entry: &mut dyn FnMut(DirEntry) -> bool) -> Result<()>;

    /// Makes file `ino` durable: its data and (unless `data_only`) its
    /// metadata, and the entries that name it on the way from the root.
    fn fsync(&self, ino: Ino, data_only: bool) -> Result<()>;

    fn statfs(&self) -> Result<StatFs>;

    /// Makes everything durable.
    fn sync(&self) -> Result<()>;

    /// The largest size a file may have, in bytes. A `write` or a
    /// `setattr` size whose end passes it fails with `EFBIG` before
    /// anything changes ([`check_file_end`]).
    fn file_bytes_max(&self) -> u64 {
        FILE_BYTES_MAX
    }

    /// fallocate(2) of `len` bytes at `offset` of file `ino` in `mode`
    /// ([`Fallocate`]). An empty range or an offset past the largest is
    /// `EINVAL`, an end past it `EFBIG` ([`fallocate_end`]); refuses what
    /// `read` refuses, likewise. `EOPNOTSUPP` where the backend offers no
    /// fallocate (the default).
    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        let _ = (ino, mode, offset, len);
        Err(Errno::OPNOTSUPP)
    }

    /// lseek(2)'s SEEK_DATA or SEEK_HOLE in file `ino` from `offset`
    /// ([`Whence`]); `ENXIO` at or past its end. The default, for a
    /// backend that keeps no holes, is what Linux answers for such a file
    /// system: the whole file is data, its end the only hole.
    fn lseek(&self, ino: Ino, offset: u64, whence: Whence) -> Result<u64> {
        let attr = self.getattr(ino)?;
        regular_only(attr.kind)?;
        seek(attr.size, offset, whence, attr.size.max(1), |from, end, data| {
            Ok(if data { Some(from) } else { None }.filter(|&b| b < end))
        })
    }

    /// copy_file_range(2): up to `len` bytes of file `from` at
    /// `offset_in` copied to file `to` at `offset_out`, with the kernel's
    /// rules ([`copy_len`]); the bytes copied, 0 at or past the source's
    /// end. `EOPNOTSUPP` where the backend offers none (the default):
    /// the kernel then copies through read and write itself.
    fn copy_file_range(&self, from: Ino, offset_in: u64, to: Ino, offset_out: u64, len: u64) -> Result<u64> {
        let _ = (from, offset_in, to, offset_out, len);
        Err(Errno::OPNOTSUPP)
    }

    /// The value of extended attribute `name` of `ino`, as getxattr(2):
    /// `ENODATA` when it has none by that name; a name the kernel would
    /// refuse is refused as [`XattrName::parse`] and [`xattr::check_read`]
    /// say. A backend that keeps none answers `EOPNOTSUPP`. (A caller's
    /// buffer too small, `ERANGE`, is the FUSE front's to say.)
    fn getxattr(&self, ino: Ino, name: &OsStr) -> Result<Vec<u8>> {
        let _ = (ino, name);
        Err(Errno::NOTSUP)
    }

    /// Sets extended attribute `name` of `ino` to `value`, as setxattr(2):
    /// `flags` may ask that it be new (`EEXIST`) or there already
    /// (`ENODATA`); a value past [`xattr::VALUE_BYTES_MAX`] is `E2BIG`,
    /// one the backend has no room for `ENOSPC`.
    fn setxattr(&self, ino: Ino, name: &OsStr, value: &[u8], flags: XattrFlags) -> Result<()> {
        let _ = (ino, name, value, flags);
        Err(Errno::NOTSUP)
    }

    /// The names of `ino`'s extended attributes, as listxattr(2) returns
    /// them: each whole and NUL-terminated ([`xattr::list_bytes`]).
    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        let _ = ino;
        Err(Errno::NOTSUP)
    }

    /// Removes extended attribute `name` of `ino` (`ENODATA` when it has
    /// none by that name), as removexattr(2).
    fn removexattr(&self, ino: Ino, name: &OsStr) -> Result<()> {
        let _ = (ino, name);
        Err(Errno::NOTSUP)
    }
}

/// `EFBIG` when `len` bytes at `offset` would end past `max` bytes (a
/// write, or a truncation to `offset` with `len` 0). An empty write
/// extends nothing and is not asked (pwrite(2) of nothing succeeds
/// wherever it is).
pub fn check_file_end(offset: u64, len: u64, max: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= max => Ok(()),
        _ => Err(Errno::FBIG),
    }
}

/// Checks a name given to a call: one path component of at most
/// [`NAME_BYTES_MAX`] bytes.
pub fn check_name(name: &OsStr) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') || bytes.contains(&0) {
        return Err(Errno::INVAL);
    }
    if bytes.len() > NAME_BYTES_MAX {
        return Err(Errno::NAMETOOLONG);
    }
    Ok(())
}

/// Resolves a slash-separated path from the root without following
/// symlinks. The inode it returns carries one reference (release it with
/// `forget`) unless it is the root, which is never counted.
pub fn resolve(fs: &dyn FileSystem, path: &str) -> Result<Attr> {
    let mut attr = fs.getattr(ROOT)?;
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        let next = fs.lookup(attr.ino, OsStr::new(part));
        fs.forget(attr.ino, 1);
        attr = next?;
    }
    Ok(attr)
}
