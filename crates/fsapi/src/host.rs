//! A real directory of any kernel file system as a [`FileSystem`], the
//! way virtiofsd's passthrough does it: each inode iolab holds a reference
//! to is an `O_PATH` descriptor, found again by its (device, inode) pair,
//! and every call works relative to descriptors (`openat`, `unlinkat`,
//! `renameat`, ...), never by path, so renames elsewhere cannot misdirect
//! it. A workload written for `FileSystem` thus runs unchanged on ext4,
//! xfs, btrfs or tmpfs.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use crate::{
    check_name, regular_only, Attr, DirEntry, Errno, Fallocate, FileSystem, FileType, Ino, Owner, RenameMode,
    Result, SetAttr, StatFs, Time, Whence, XattrFlags, ROOT,
};

struct Node {
    fd: OwnedFd,
    key: (u64, u64),
    /// What it is (an inode's kind never changes): I/O refuses a FIFO, a
    /// device or a socket without a system call, and never opens one.
    kind: FileType,
    lookups: u64,
    opens: u64,
}

struct State {
    nodes: HashMap<Ino, Node>,
    by_key: HashMap<(u64, u64), Ino>,
    next_ino: Ino,
}

/// A kernel file system's directory served as a [`FileSystem`].
pub struct HostFs {
    state: Mutex<State>,
}

fn cstr(name: &OsStr) -> Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| Errno::INVAL)
}

fn last_errno() -> Errno {
    Errno::from_io(&std::io::Error::last_os_error())
}

/// `rc` as a result: -1 is the call's errno.
fn check(rc: libc::c_int) -> Result<libc::c_int> {
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(rc)
    }
}

fn open_at(dir: RawFd, name: &CString, flags: libc::c_int, mode: libc::mode_t) -> Result<OwnedFd> {
    // SAFETY: openat with a valid descriptor and a NUL-terminated name; the
    // descriptor returned is owned by the OwnedFd from here on.
    let fd =
        check(unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn stat_at(dir: RawFd, name: &CString, flags: libc::c_int) -> Result<libc::stat> {
    // SAFETY: fstatat fills the zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// The attributes of what `fd` (O_PATH) refers to.
fn stat_fd(fd: RawFd) -> Result<libc::stat> {
    stat_at(fd, &CString::default(), libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
}

/// `/proc/self/fd/N`: reopens an O_PATH descriptor for I/O.
fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).unwrap_or_default()
}

fn kind_of(mode: libc::mode_t) -> Result<FileType> {
    // Linux has no kind outside the seven: other bits are a broken reply.
    FileType::from_mode(mode).ok_or(Errno::IO)
}

fn attr_of(ino: Ino, st: &libc::stat) -> Result<Attr> {
    let time = |secs: i64, nanos: i64| Time { secs, nanos: nanos as u32 };
    let kind = kind_of(st.st_mode)?;
    // Linux's majors fit in 12 bits and minors in 20: makedev keeps them.
    let rdev =
        if kind.is_device() { crate::makedev(libc::major(st.st_rdev), libc::minor(st.st_rdev)) } else { 0 };
    Ok(Attr {
        ino,
        kind,
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        rdev,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
    })
}

impl HostFs {
    /// Serves the directory `root`.
    pub fn new(root: &Path) -> std::io::Result<HostFs> {
        let path = CString::new(root.as_os_str().as_bytes()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let fd = open_at(libc::AT_FDCWD, &path, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(io)?;
        let st = stat_fd(fd.as_raw_fd()).map_err(io)?;
        let key = (st.st_dev, st.st_ino);
        let mut state = State { nodes: HashMap::new(), by_key: HashMap::new(), next_ino: ROOT + 1 };
        state.nodes.insert(ROOT, Node { fd, key, kind: FileType::Dir, lookups: 0, opens: 0 });
        state.by_key.insert(key, ROOT);
        Ok(HostFs { state: Mutex::new(state) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the descriptor of `ino`, the lock released: a
    /// duplicate keeps it valid even if another thread forgets the inode.
    fn with_fd<T>(&self, ino: Ino, f: impl FnOnce(RawFd) -> Result<T>) -> Result<T> {
        let fd = {
            let state = self.lock();
            state.nodes.get(&ino).ok_or(Errno::STALE)?.fd.try_clone().map_err(|e| Errno::from_io(&e))?
        };
        f(fd.as_raw_fd())
    }

    /// The inode `name` in `parent` names, with one reference counted.
    fn enter(&self, parent: Ino, name: &OsStr) -> Result<Attr> {
        check_name(name)?;
        let name = cstr(name)?;
        self.with_fd(parent, |dir| {
            let st = stat_at(dir, &name, libc::AT_SYMLINK_NOFOLLOW)?;
            let kind = kind_of(st.st_mode)?;
            let key = (st.st_dev, st.st_ino);
            let mut state = self.lock();
            let ino = match state.by_key.get(&key) {
                Some(&ino) => ino,
                None => {
                    let fd = open_at(dir, &name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
                    let ino = state.next_ino;
                    state.next_ino += 1;
                    state.nodes.insert(ino, Node { fd, key, kind, lookups: 0, opens: 0 });
                    state.by_key.insert(key, ino);
                    ino
                }
            };
            if let Some(node) = state.nodes.get_mut(&ino).filter(|_| ino != ROOT) {
                node.lookups += 1;
            }
            attr_of(ino, &st)
        })
    }

    /// Opens `ino` for I/O (read-write, else read-only). A FIFO, device or
    /// socket is `EINVAL`, never opened: opening a FIFO waits for the other
    /// end, and a device's open may act on the device.
    fn file(&self, ino: Ino, write: bool) -> Result<File> {
        if self.lock().nodes.get(&ino).ok_or(Errno::STALE)?.kind.is_special() {
            return Err(Errno::INVAL);
        }
        self.with_fd(ino, |fd| {
            let flags = if write { libc::O_RDWR } else { libc::O_RDONLY };
            let file = open_at(libc::AT_FDCWD, &proc_path(fd), flags, 0)?;
            Ok(File::from(file))
        })
    }

    /// Regular file `ino` opened for I/O; what `read` refuses, refused
    /// without a system call.
    fn regular(&self, ino: Ino, write: bool) -> Result<File> {
        regular_only(self.getattr(ino)?.kind)?;
        self.file(ino, write)
    }

    /// Gives a new inode the owner asked for (the host made it ours).
    fn chown_at(dir: RawFd, name: &CString, owner: Owner) -> Result<()> {
        // SAFETY: fchownat on a valid directory descriptor and name.
        check(unsafe {
            libc::fchownat(dir, name.as_ptr(), owner.uid, owner.gid, libc::AT_SYMLINK_NOFOLLOW)
        })?;
        Ok(())
    }
}

/// A buffer for any value or name list the kernel returns (Linux's
/// `XATTR_SIZE_MAX` and `XATTR_LIST_MAX` are both 64 KiB).
const XATTR_BUFFER_BYTES: usize = 65536;

/// `rc` of a call that returns a length: -1 is the call's errno.
fn check_len(rc: libc::ssize_t) -> Result<usize> {
    if rc < 0 {
        Err(last_errno())
    } else {
        Ok(rc as usize)
    }
}

fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.0)
}

impl FileSystem for HostFs {
    fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Attr> {
        self.enter(parent, name)
    }

    fn forget(&self, ino: Ino, count: u64) {
        let mut state = self.lock();
        let Some(node) = state.nodes.get_mut(&ino).filter(|_| ino != ROOT) else { return };
        node.lookups = node.lookups.saturating_sub(count);
        if node.lookups == 0 && node.opens == 0 {
            if let Some(node) = state.nodes.remove(&ino) {
                state.by_key.remove(&node.key);
            }
        }
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.with_fd(ino, |fd| attr_of(ino, &stat_fd(fd)?))
    }

    fn setattr(&self, ino: Ino, changes: &SetAttr) -> Result<Attr> {
        let attr = self.getattr(ino)?;
        if let Some(size) = changes.size {
            match attr.kind {
                FileType::File => self.file(ino, true)?.set_len(size).map_err(Errno::from)?,
                FileType::Dir => return Err(Errno::ISDIR),
                // As truncate(2) of anything but a regular file.
                FileType::Symlink
                | FileType::Fifo
                | FileType::CharDevice
                | FileType::BlockDevice
                | FileType::Socket => return Err(Errno::INVAL),
            }
        }
        self.with_fd(ino, |fd| {
            let empty = CString::default();
            if changes.uid.is_some() || changes.gid.is_some() {
                let (uid, gid) = (changes.uid.unwrap_or(u32::MAX), changes.gid.unwrap_or(u32::MAX));
                // SAFETY: fchownat on an O_PATH descriptor with AT_EMPTY_PATH; -1 keeps an id.
                let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
                check(unsafe { libc::fchownat(fd, empty.as_ptr(), uid, gid, flags) })?;
            }
            if let (Some(perm), true) = (changes.perm, attr.kind != FileType::Symlink) {
                // SAFETY: chmod through /proc of an O_PATH descriptor (not a symlink).
                check(unsafe { libc::chmod(proc_path(fd).as_ptr(), libc::mode_t::from(perm & 0o7777)) })?;
            }
            if changes.atime.is_some() || changes.mtime.is_some() {
                let spec = |t: Option<Time>| match t {
                    Some(t) => libc::timespec { tv_sec: t.secs, tv_nsec: i64::from(t.nanos) },
                    None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
                };
                let times = [spec(changes.atime), spec(changes.mtime)];
                let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
                // SAFETY: utimensat on an O_PATH descriptor with AT_EMPTY_PATH and two timespecs.
                check(unsafe { libc::utimensat(fd, empty.as_ptr(), times.as_ptr(), flags) })?;
            }
            attr_of(ino, &stat_fd(fd)?)
        })
    }

    fn create(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        check_name(name)?;
        let c = cstr(name)?;
        self.with_fd(parent, |dir| {
            let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY;
            drop(open_at(dir, &c, flags, libc::mode_t::from(owner.perm & 0o7777))?);
            HostFs::chown_at(dir, &c, owner)
        })?;
        self.enter(parent, name)
    }

    fn mkdir(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        check_name(name)?;
        let c = cstr(name)?;
        self.with_fd(parent, |dir| {
            // SAFETY: mkdirat with a valid descriptor and name.
            check(unsafe { libc::mkdirat(dir, c.as_ptr(), libc::mode_t::from(owner.perm & 0o7777)) })?;
            HostFs::chown_at(dir, &c, owner)
        })?;
        self.enter(parent, name)
    }

    fn mknod(&self, parent: Ino, name: &OsStr, kind: FileType, rdev: u32, owner: Owner) -> Result<Attr> {
        // mknod(2) itself refuses a directory (EPERM) and a symlink (EINVAL).
        let mode = kind.mode_bits() | libc::mode_t::from(owner.perm & 0o7777);
        let dev = libc::makedev(crate::major(rdev), crate::minor(rdev));
        check_name(name)?;
        let c = cstr(name)?;
        self.with_fd(parent, |dir| {
            // SAFETY: mknodat with a valid descriptor and a NUL-terminated name.
            check(unsafe { libc::mknodat(dir, c.as_ptr(), mode, dev) })?;
            HostFs::chown_at(dir, &c, owner)
        })?;
        self.enter(parent, name)
    }

    fn symlink(&self, parent: Ino, name: &OsStr, target: &OsStr, owner: Owner) -> Result<Attr> {
        check_name(name)?;
        let (c, target) = (cstr(name)?, cstr(target)?);
        self.with_fd(parent, |dir| {
            // SAFETY: symlinkat with NUL-terminated target and name.
            check(unsafe { libc::symlinkat(target.as_ptr(), dir, c.as_ptr()) })?;
            HostFs::chown_at(dir, &c, owner)
        })?;
        self.enter(parent, name)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.with_fd(ino, |fd| {
            let mut buf = vec![0u8; libc::PATH_MAX as usize];
            let empty = CString::default();
            // SAFETY: readlinkat with AT_EMPTY_PATH semantics (empty name) into `buf`.
            let n = unsafe { libc::readlinkat(fd, empty.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                return Err(last_errno());
            }
            buf.truncate(n as usize);
            Ok(buf)
        })
    }

    fn link(&self, ino: Ino, new_parent: Ino, new_name: &OsStr) -> Result<Attr> {
        check_name(new_name)?;
        if self.getattr(ino)?.kind == FileType::Dir {
            return Err(Errno::PERM);
        }
        let c = cstr(new_name)?;
        self.with_fd(ino, |fd| {
            self.with_fd(new_parent, |dir| {
                // SAFETY: linkat of the O_PATH descriptor's file through /proc (following it).
                let rc = unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        proc_path(fd).as_ptr(),
                        dir,
                        c.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                };
                check(rc).map(|_| ())
            })
        })?;
        self.enter(new_parent, new_name)
    }

    fn unlink(&self, parent: Ino, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let c = cstr(name)?;
        // SAFETY: unlinkat with a valid descriptor and name.
        self.with_fd(parent, |dir| check(unsafe { libc::unlinkat(dir, c.as_ptr(), 0) }).map(|_| ()))
    }

    fn rmdir(&self, parent: Ino, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let c = cstr(name)?;
        // SAFETY: unlinkat with AT_REMOVEDIR on a valid descriptor and name.
        self.with_fd(parent, |dir| {
            check(unsafe { libc::unlinkat(dir, c.as_ptr(), libc::AT_REMOVEDIR) }).map(|_| ())
        })
    }

    fn rename2(
        &self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        mode: RenameMode,
    ) -> Result<()> {
        check_name(name)?;
        check_name(new_name)?;
        let (from, to) = (cstr(name)?, cstr(new_name)?);
        self.with_fd(parent, |a| {
            self.with_fd(new_parent, |b| {
                // SAFETY: renameat2 with valid descriptors, names and flags.
                let rc = unsafe { libc::renameat2(a, from.as_ptr(), b, to.as_ptr(), mode.flags()) };
                check(rc).map(|_| ())
            })
        })
    }

    fn open(&self, ino: Ino) -> Result<()> {
        let mut state = self.lock();
        state.nodes.get_mut(&ino).ok_or(Errno::STALE)?.opens += 1;
        Ok(())
    }

    fn release(&self, ino: Ino) {
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(&ino) {
            node.opens = node.opens.saturating_sub(1);
        }
    }

    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        use std::os::unix::fs::FileExt;
        let file = self.file(ino, false)?;
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Errno::from_io(&e)),
            }
        }
        Ok(done)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        use std::os::unix::fs::FileExt;
        self.file(ino, true)?.write_all_at(data, offset).map_err(Errno::from)?;
        Ok(data.len())
    }

    fn readdir(&self, ino: Ino, offset: u64, entry: &mut dyn FnMut(DirEntry) -> bool) -> Result<()> {
        let dir = self.with_fd(ino, |fd| {
            open_at(libc::AT_FDCWD, &proc_path(fd), libc::O_RDONLY | libc::O_DIRECTORY, 0)
        })?;
        let dir = dir.as_raw_fd();
        // SAFETY: lseek on a directory descriptor to a d_off cookie it gave.
        if offset != 0 && unsafe { libc::lseek(dir, offset as libc::off_t, libc::SEEK_SET) } < 0 {
            return Err(last_errno());
        }
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: getdents64 fills `buf` with linux_dirent64 records.
            let n = unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
            if n < 0 {
                return Err(last_errno());
            }
            if n == 0 {
                return Ok(());
            }
            let mut at = 0usize;
            while at < n as usize {
                // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name (NUL-terminated).
                let rec = &buf[at..];
                let d_ino = u64::from_ne_bytes(rec[0..8].try_into().unwrap_or_default());
                let d_off = i64::from_ne_bytes(rec[8..16].try_into().unwrap_or_default());
                let reclen = u16::from_ne_bytes(rec[16..18].try_into().unwrap_or_default()) as usize;
                let d_type = rec[18];
                let name = &rec[19..reclen];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                at += reclen.max(1);
                if name == b"." || name == b".." {
                    continue;
                }
                let kind = match d_type {
                    libc::DT_REG => FileType::File,
                    libc::DT_DIR => FileType::Dir,
                    libc::DT_LNK => FileType::Symlink,
                    libc::DT_FIFO => FileType::Fifo,
                    libc::DT_CHR => FileType::CharDevice,
                    libc::DT_BLK => FileType::BlockDevice,
                    libc::DT_SOCK => FileType::Socket,
                    // A file system that does not keep types in its entries
                    // (DT_UNKNOWN): asked of the inode; one removed since
                    // the listing is named a file, as before.
                    _ => CString::new(name)
                        .ok()
                        .and_then(|c| stat_at(dir, &c, libc::AT_SYMLINK_NOFOLLOW).ok())
                        .and_then(|st| FileType::from_mode(st.st_mode))
                        .unwrap_or(FileType::File),
                };
                if !entry(DirEntry { ino: d_ino, kind, name: name.to_vec(), next: d_off as u64 }) {
                    return Ok(());
                }
            }
        }
    }

    fn fsync(&self, ino: Ino, data_only: bool) -> Result<()> {
        let file = match self.getattr(ino)?.kind {
            // Nothing of its own to write but its inode, and it is never
            // opened (see `file`): the host file system synced whole.
            kind if kind.is_special() => return self.sync(),
            FileType::Dir => self.with_fd(ino, |fd| {
                open_at(libc::AT_FDCWD, &proc_path(fd), libc::O_RDONLY | libc::O_DIRECTORY, 0).map(File::from)
            })?,
            _ => self.file(ino, false)?,
        };
        let done = if data_only { file.sync_data() } else { file.sync_all() };
        done.map_err(Errno::from)
    }

    fn statfs(&self) -> Result<StatFs> {
        self.with_fd(ROOT, |fd| {
            // SAFETY: fstatvfs fills the zeroed struct for an open descriptor.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            check(unsafe { libc::fstatvfs(fd, &mut st) })?;
            Ok(StatFs {
                block_bytes: st.f_frsize as u32,
                blocks: st.f_blocks,
                blocks_free: st.f_bfree,
                blocks_avail: st.f_bavail,
                files: st.f_files,
                files_free: st.f_ffree,
                name_bytes_max: st.f_namemax as u32,
            })
        })
    }

    // The extended attribute calls go through the descriptor's
    // /proc/self/fd path, following it: the kernel's magic link lands on
    // the inode itself, a symlink included (an l*xattr call would act on
    // the /proc link instead). The kernel checks the name and the value.

    fn getxattr(&self, ino: Ino, name: &OsStr) -> Result<Vec<u8>> {
        let name = cstr(name)?;
        self.with_fd(ino, |fd| {
            let mut value = vec![0u8; XATTR_BUFFER_BYTES];
            // SAFETY: getxattr with NUL-terminated path and name into a
            // buffer of the length given.
            let n = check_len(unsafe {
                libc::getxattr(proc_path(fd).as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), value.len())
            })?;
            value.truncate(n);
            Ok(value)
        })
    }

    fn setxattr(&self, ino: Ino, name: &OsStr, value: &[u8], flags: XattrFlags) -> Result<()> {
        let name = cstr(name)?;
        self.with_fd(ino, |fd| {
            // SAFETY: setxattr with NUL-terminated path and name and a value
            // of the length given.
            check(unsafe {
                libc::setxattr(
                    proc_path(fd).as_ptr(),
                    name.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    flags.bits() as libc::c_int,
                )
            })
            .map(|_| ())
        })
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.with_fd(ino, |fd| {
            let mut names = vec![0u8; XATTR_BUFFER_BYTES];
            // SAFETY: listxattr with a NUL-terminated path into a buffer of
            // the length given.
            let n = check_len(unsafe {
                libc::listxattr(proc_path(fd).as_ptr(), names.as_mut_ptr().cast(), names.len())
            })?;
            names.truncate(n);
            Ok(names)
        })
    }

    fn removexattr(&self, ino: Ino, name: &OsStr) -> Result<()> {
        let name = cstr(name)?;
        self.with_fd(ino, |fd| {
            // SAFETY: removexattr with NUL-terminated path and name.
            check(unsafe { libc::removexattr(proc_path(fd).as_ptr(), name.as_ptr()) }).map(|_| ())
        })
    }

    fn sync(&self) -> Result<()> {
        let root = self.with_fd(ROOT, |fd| {
            open_at(libc::AT_FDCWD, &proc_path(fd), libc::O_RDONLY | libc::O_DIRECTORY, 0)
        })?;
        // SAFETY: syncfs on an open descriptor of the file system.
        check(unsafe { libc::syncfs(root.as_raw_fd()) }).map(|_| ())
    }

    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        let file = self.regular(ino, true)?;
        // Past i64::MAX they are negative to the kernel, which refuses them.
        let (offset, len) = (offset.min(i64::MAX as u64) as i64, len.min(i64::MAX as u64) as i64);
        // SAFETY: fallocate on an open descriptor; no memory is passed.
        check(unsafe { libc::fallocate(file.as_raw_fd(), mode.mode(), offset, len) }).map(|_| ())
    }

    fn lseek(&self, ino: Ino, offset: u64, whence: Whence) -> Result<u64> {
        let file = self.regular(ino, false)?;
        let offset = offset.min(i64::MAX as u64) as i64;
        // SAFETY: lseek on an open descriptor of our own.
        let at = unsafe { libc::lseek(file.as_raw_fd(), offset, whence.raw()) };
        if at < 0 {
            return Err(last_errno());
        }
        Ok(at as u64)
    }

    fn copy_file_range(&self, from: Ino, offset_in: u64, to: Ino, offset_out: u64, len: u64) -> Result<u64> {
        let (source, target) = (self.regular(from, false)?, self.regular(to, true)?);
        let (mut off_in, mut off_out) = (offset_in as libc::loff_t, offset_out as libc::loff_t);
        let len = len.min(isize::MAX as u64) as usize;
        // SAFETY: copy_file_range between two open descriptors, the offsets
        // ours to update; no buffer is passed.
        let n = unsafe {
            libc::copy_file_range(source.as_raw_fd(), &mut off_in, target.as_raw_fd(), &mut off_out, len, 0)
        };
        if n < 0 {
            return Err(last_errno());
        }
        Ok(n as u64)
    }
}
