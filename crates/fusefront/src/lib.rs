//! The FUSE front: serves any [`fsapi::FileSystem`] to the kernel with the
//! `fuser` crate's pure-Rust mount (no libfuse), so GNU tar, rm and every
//! other program can use iolab's file system (or a host directory through
//! `HostFs`). Depends on `fsapi` only: file-system code and its crash
//! tests never touch /dev/fuse.
//!
//! What the kernel promises here (measured, see ../shared's reference):
//! `sync(1)` never reaches a FUSE server, so durability comes from
//! `fsync` and from unmounting. With the kernel's writeback cache (on
//! unless the caller turns it off) the kernel gathers writes in its page
//! cache and sends them in large requests, at fsync, under memory pressure
//! or after its dirty expiry, and at unmount, and keeps files' modification
//! times itself, sending them with the data; without it every `write(2)`
//! is a request and sizes and times are the file system's at once.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsapi::{Attr, FileSystem, FileType, Owner, SetAttr, Time};
use fuser::{
    Config, Errno as FuseErrno, FileAttr, FileHandle, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

/// How long the kernel may keep names and attributes: only this process
/// changes the file system, so a second is safe and saves round trips.
const TTL: Duration = Duration::from_secs(1);

/// A file system served to the kernel.
pub struct FuseFront {
    fs: Arc<dyn FileSystem>,
    writeback_cache: bool,
}

fn errno(e: fsapi::Errno) -> FuseErrno {
    FuseErrno::from_i32(e.0)
}

fn system_time(t: Time) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nanos)
    } else {
        UNIX_EPOCH - Duration::new(t.secs.unsigned_abs(), 0) + Duration::from_nanos(u64::from(t.nanos))
    }
}

fn time_of(t: TimeOrNow) -> Time {
    let at = match t {
        TimeOrNow::SpecificTime(at) => at,
        TimeOrNow::Now => SystemTime::now(),
    };
    match at.duration_since(UNIX_EPOCH) {
        Ok(d) => Time { secs: d.as_secs() as i64, nanos: d.subsec_nanos() },
        Err(e) => {
            let d = e.duration();
            let (secs, nanos) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nanos == 0 {
                Time { secs, nanos: 0 }
            } else {
                Time { secs: secs - 1, nanos: 1_000_000_000 - nanos }
            }
        }
    }
}

fn kind(k: FileType) -> fuser::FileType {
    match k {
        FileType::File => fuser::FileType::RegularFile,
        FileType::Dir => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.ctime),
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn owner(req: &Request, mode: u32, umask: u32) -> Owner {
    Owner { perm: (mode & !umask & 0o7777) as u16, uid: req.uid(), gid: req.gid() }
}

impl FuseFront {
    pub fn new(fs: Arc<dyn FileSystem>, writeback_cache: bool) -> FuseFront {
        FuseFront { fs, writeback_cache }
    }

    fn entry(&self, result: fsapi::Result<Attr>, reply: ReplyEntry) {
        match result {
            Ok(attr) => reply.entry(&TTL, &file_attr(&attr), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn empty(result: fsapi::Result<()>, reply: ReplyEmpty) {
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }
}

/// Mount options iolab uses: named iolab in the mount table, the kernel
/// checking permissions, no access times.
pub fn config(threads: usize) -> Config {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("iolab".into()),
        MountOption::Subtype("iolab".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    config.n_threads = Some(threads.max(1));
    config.clone_fd = threads > 1;
    config
}

/// How a mount is served.
#[derive(Clone, Copy, Debug)]
pub struct Serving {
    /// Threads reading the kernel's requests.
    pub threads: usize,
    /// Ask for the kernel's writeback cache (see the crate's notes).
    pub writeback_cache: bool,
}

/// Serves `fs` at `mountpoint` until it is unmounted (`umount`,
/// `fusermount3 -u`, or [`unmount`] from another thread). The file system
/// itself is left as it is: the caller writes it back and closes it.
/// `mounted` is called once the kernel has the mount, before the first
/// request is served.
pub fn serve(
    fs: Arc<dyn FileSystem>,
    mountpoint: &Path,
    serving: Serving,
    mounted: impl FnOnce(),
) -> std::io::Result<()> {
    let front = FuseFront::new(fs, serving.writeback_cache);
    let session = fuser::Session::new(front, mountpoint, &config(serving.threads))?;
    mounted();
    session.run()
}

/// Unmounts `mountpoint` (what `umount` does): a busy mount is detached
/// lazily, ending its session when the last open file closes.
pub fn unmount(mountpoint: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: umount2 with a NUL-terminated path.
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    // SAFETY: as above, lazily.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    Err(std::io::Error::last_os_error())
}

impl fuser::Filesystem for FuseFront {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        if self.writeback_cache {
            // A kernel without it serves as before: every write a request.
            let _ = config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE);
        }
        // Lookups and readdirs in one directory may come at once; the file
        // system orders them itself.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_PARALLEL_DIROPS);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(self.fs.lookup(parent.0, name), reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let changes = SetAttr {
            perm: mode.map(|m| (m & 0o7777) as u16),
            uid,
            gid,
            size,
            atime: atime.map(time_of),
            mtime: mtime.map(time_of),
        };
        match self.fs.setattr(ino.0, &changes) {
            Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only: devices, FIFOs and sockets are not part of
        // the file system.
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(FuseErrno::EPERM);
        }
        self.entry(self.fs.create(parent.0, name, owner(req, mode, umask)), reply);
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        self.entry(self.fs.mkdir(parent.0, name, owner(req, mode, umask)), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::empty(self.fs.unlink(parent.0, name), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::empty(self.fs.rmdir(parent.0, name), reply);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let owner = Owner { perm: 0o777, uid: req.uid(), gid: req.gid() };
        self.entry(self.fs.symlink(parent.0, link_name, target.as_os_str(), owner), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // RENAME_NOREPLACE and RENAME_EXCHANGE are not offered; callers
        // (mv) fall back to a plain rename.
        if !flags.is_empty() {
            return reply.error(FuseErrno::EINVAL);
        }
        Self::empty(self.fs.rename(parent.0, name, newparent.0, newname), reply);
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.entry(self.fs.link(ino.0, newparent.0, newname), reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut buf = vec![0u8; size as usize];
        match self.fs.read(ino.0, offset, &mut buf) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.fs.write(ino.0, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Nothing to do at close (no locks, nothing buffered per handle):
        // ENOSYS tells the kernel to stop sending FLUSH, saving a round
        // trip at every close.
        reply.error(FuseErrno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.fs.release(ino.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        Self::empty(self.fs.fsync(ino.0, datasync), reply);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let result = self.fs.readdir(ino.0, offset, &mut |e| {
            let name = <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&e.name);
            // `add` says true when the reply buffer is full.
            !reply.add(INodeNo(e.ino), e.next, kind(e.kind), name)
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        Self::empty(self.fs.fsync(ino.0, datasync), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.fs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_avail,
                s.files,
                s.files_free,
                s.block_bytes,
                s.name_bytes_max,
                s.block_bytes,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let created = self.fs.create(parent.0, name, owner(req, mode, umask));
        match created.and_then(|attr| self.fs.open(attr.ino).map(|()| attr)) {
            Ok(attr) => {
                reply.created(&TTL, &file_attr(&attr), Generation(0), FileHandle(0), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(e)),
        }
    }
}
