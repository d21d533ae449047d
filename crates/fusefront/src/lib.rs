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

mod acl;
mod direct;
mod ring;
mod setid;
mod wire;
mod xattr;

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsapi::{Attr, FileSystem, FileType, Owner, SetAttr, Time};
use fuser::{
    Config, CopyFileRangeFlags, Errno as FuseErrno, FileAttr, FileHandle, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};

/// How long the kernel may keep names and attributes: only this process
/// changes the file system, so a second is safe and saves round trips.
const TTL: Duration = Duration::from_secs(1);

pub use direct::DirectIoReport;
pub use ring::RingReport;

/// A file system served to the kernel.
pub struct FuseFront {
    fs: Arc<dyn FileSystem>,
    writeback_cache: bool,
    /// Set when io_uring is wanted: INIT asks for it and tells the queues.
    ring: Option<Arc<ring::Start>>,
    counts: Arc<wire::OpCounts>,
    /// Which opens go around the page cache (direct.rs).
    direct: Arc<direct::Direct>,
    /// The mount has `default_permissions` (see [`config`]): INIT asks
    /// for POSIX ACLs, which the kernel then enforces.
    default_permissions: bool,
    /// What INIT agreed to.
    agreed: wire::Agreed,
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
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
        FileType::Socket => fuser::FileType::Socket,
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
        rdev: a.rdev,
        blksize: 4096,
        flags: 0,
    }
}

fn owner(req: &Request, mode: u32, umask: u32) -> Owner {
    Owner { perm: (mode & !umask & 0o7777) as u16, uid: req.uid(), gid: req.gid() }
}

impl FuseFront {
    pub fn new(fs: Arc<dyn FileSystem>, writeback_cache: bool) -> FuseFront {
        FuseFront {
            fs,
            writeback_cache,
            ring: None,
            counts: Arc::new(wire::OpCounts::new()),
            direct: Arc::new(direct::Direct::default()),
            default_permissions: false,
            agreed: wire::Agreed::default(),
        }
    }

    /// A new inode in `parent`, asked for with `mode`, as its directory's
    /// default ACL leaves it (`xattr::after_create`).
    fn inherit(&self, parent: INodeNo, made: Attr, mode: u32) -> fsapi::Result<Attr> {
        xattr::after_create(&*self.fs, self.agreed.acl, parent.0, made, mode)
    }

    fn xattr_reply(result: fsapi::Result<Vec<u8>>, size: u32, reply: ReplyXattr) {
        match result.and_then(|bytes| xattr::sized(bytes, size)) {
            Ok(xattr::Sized::Size(n)) => reply.size(n),
            Ok(xattr::Sized::Data(bytes)) => reply.data(&bytes),
            Err(e) => reply.error(errno(e)),
        }
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

/// Mount options iolab uses: named iolab in the mount table, no access
/// times, and the kernel checking permissions unless the server is root
/// serving only itself.
///
/// Without `allow_other` only the user who mounted can use the mount. For
/// root alone, `default_permissions` changes nothing: root passes every
/// check the kernel would make but execute permission, which the kernel
/// checks on files either way. What it costs is a GETATTR of a directory
/// before each path lookup through it after anything in it changed (every
/// file tar creates), since a change leaves the directory's attributes
/// stale. With `allow_other` every user may use the mount, and the
/// kernel's checks are the ones ext4 gets: mode bits on every lookup,
/// open and access, and `setattr_prepare`'s rules for chown, chmod and
/// utimensat (who may change what, set-group-ID cleared on a chmod by a
/// user outside the group); the VFS itself keeps sticky directories.
pub fn config(threads: usize, allow_other: bool) -> Config {
    let mut config = Config::default();
    config.mount_options =
        vec![MountOption::FSName("iolab".into()), MountOption::Subtype("iolab".into()), MountOption::NoAtime];
    if default_permissions(allow_other) {
        config.mount_options.push(MountOption::DefaultPermissions);
    }
    if allow_other {
        config.acl = fuser::SessionACL::All;
    }
    config.n_threads = Some(threads.max(1));
    config.clone_fd = threads > 1;
    config
}

/// Whether a mount has `default_permissions` (the kernel checks every
/// caller): with `allow_other`, or when the server is not root.
pub fn default_permissions(allow_other: bool) -> bool {
    // SAFETY: geteuid has no preconditions.
    allow_other || unsafe { libc::geteuid() } != 0
}

/// How the kernel's requests reach the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// io_uring where the kernel allows it (see [`uring_enabled`]), else
    /// /dev/fuse.
    Auto,
    /// Read from /dev/fuse by `threads` threads, wherever the scheduler
    /// puts them.
    Dev,
    /// FUSE over io_uring: a queue per CPU, each served by a thread on
    /// that CPU (Linux 6.14 and later).
    Uring,
}

/// How a mount is served.
#[derive(Clone, Copy, Debug)]
pub struct Serving {
    /// Threads reading the kernel's requests from /dev/fuse (over io_uring
    /// they serve only INIT, FORGET and INTERRUPT).
    pub threads: usize,
    /// Ask for the kernel's writeback cache (see the crate's notes).
    pub writeback_cache: bool,
    pub transport: Transport,
    /// Let every user use the mount (FUSE's `allow_other`), with the
    /// kernel checking permissions (see [`config`]).
    pub allow_other: bool,
    /// With the writeback cache, opens for writing go around it (direct
    /// I/O, so write(2) hears ENOSPC at the call) while the file system
    /// has less than this many bytes free; `None`: twice the dirty bytes
    /// the kernel lets the mount hold (direct.rs).
    pub direct_io_below_bytes: Option<u64>,
}

/// How a mount was served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// What the io_uring queues did; `None` when they were not used.
    pub ring: Option<RingReport>,
    /// Requests by operation (both transports), busiest first.
    pub requests: Vec<(&'static str, u64)>,
    /// The opens that went around the writeback cache; `None` without it.
    pub direct_io: Option<DirectIoReport>,
}

/// Whether this kernel lets a FUSE server take requests through io_uring
/// (the fuse module's `enable_uring` parameter, off by default).
pub fn uring_enabled() -> bool {
    ring::enabled()
}

/// What to tell a user who asked for io_uring on a kernel that has it off.
pub fn uring_disabled_help() -> String {
    format!(
        "FUSE over io_uring is off in this kernel (Linux 6.14 or later has it): as root, `echo Y > {}`, \
         or serve through /dev/fuse (--transport dev)",
        ring::ENABLE_PARAMETER
    )
}

/// How many io_uring queues (and threads) a mount over io_uring has: one
/// per possible CPU.
pub fn uring_queues() -> usize {
    ring::queue_count()
}

/// Serves `fs` at `mountpoint` until it is unmounted (`umount`,
/// `fusermount3 -u`, or [`unmount`] from another thread). The file system
/// itself is left as it is: the caller writes it back and closes it.
/// `mounted` is called once the kernel has the mount, before the first
/// request is served. Asking for [`Transport::Uring`] on a kernel without
/// it is an error before anything is mounted.
pub fn serve(
    fs: Arc<dyn FileSystem>,
    mountpoint: &Path,
    serving: Serving,
    mounted: impl FnOnce(),
) -> std::io::Result<Served> {
    let ring = match serving.transport {
        Transport::Dev => false,
        Transport::Auto => ring::enabled(),
        Transport::Uring if ring::enabled() => true,
        Transport::Uring => return Err(std::io::Error::other(uring_disabled_help())),
    };
    let start = ring.then(ring::Start::new);
    let mut front = FuseFront::new(Arc::clone(&fs), serving.writeback_cache);
    front.ring = start.clone();
    let (counts, direct) = (Arc::clone(&front.counts), Arc::clone(&front.direct));
    // Before the mount: once mounted, a path through it waits for the
    // server, which serves nothing until `run`.
    let canonical = mountpoint.canonicalize()?;
    front.default_permissions = default_permissions(serving.allow_other);
    let session = fuser::Session::new(front, mountpoint, &config(serving.threads, serving.allow_other))?;
    if serving.writeback_cache {
        direct.set_below(serving.direct_io_below_bytes.unwrap_or_else(|| direct::threshold_for(&canonical)));
    }
    let rings = match &start {
        Some(start) => Some(ring::Rings::spawn(
            fs,
            session.as_fd().try_clone_to_owned()?,
            Arc::clone(start),
            Arc::clone(&counts),
            Arc::clone(&direct),
        )?),
        None => None,
    };
    mounted();
    let result = session.run();
    if let Some(start) = &start {
        // A session that ended before INIT leaves no queue waiting.
        start.decide(false);
    }
    let ring = rings.map(ring::Rings::join);
    result?;
    let direct_io = serving.writeback_cache.then(|| direct.report());
    Ok(Served { ring, requests: counts.by_name(), direct_io })
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
        // The server clears set-ID bits itself (setid.rs), sparing a
        // GETATTR before every chown.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        // A direct-I/O open (direct.rs) may still be mapped shared, as any
        // other; a kernel without it (before 6.6) refuses such a mapping.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        // Each io_uring entry's payload buffer holds the largest write; the
        // same limit through /dev/fuse keeps both transports alike.
        let _ = config.set_max_write(ring::MAX_WRITE);
        // POSIX ACLs only where the kernel checks permissions: it then
        // enforces them and hands the server `system.posix_acl_*` to
        // store. The server applies the umask itself (it did already), so
        // that a new inode in a directory with a default ACL can ignore it
        // as Linux does.
        if self.default_permissions
            && config.add_capabilities(fuser::InitFlags::FUSE_POSIX_ACL).is_ok()
            && config.add_capabilities(fuser::InitFlags::FUSE_DONT_MASK).is_ok()
        {
            self.agreed.acl = true;
        }
        if let Some(start) = &self.ring {
            start.agree(self.agreed);
            // A kernel that does not offer it serves through /dev/fuse.
            start.decide(config.add_capabilities(fuser::InitFlags::FUSE_OVER_IO_URING).is_ok());
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.counts.add(wire::op::LOOKUP);
        match self.fs.lookup(parent.0, name) {
            Err(fsapi::Errno::NOENT) => self.entry(Ok(wire::NO_ENTRY), reply),
            found => self.entry(found, reply),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.counts.add(wire::op::FORGET);
        self.fs.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.counts.add(wire::op::GETATTR);
        match self.fs.getattr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
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
        self.counts.add(wire::op::SETATTR);
        let mut changes = SetAttr {
            perm: mode.map(|m| (m & 0o7777) as u16),
            uid,
            gid,
            size,
            atime: atime.map(time_of),
            mtime: mtime.map(time_of),
        };
        let changed = setid::on_setattr(
            &*self.fs,
            ino.0,
            &mut changes,
            Some(setid::Kill::ByRule { caller_uid: req.uid() }),
        )
        .and_then(|()| self.fs.setattr(ino.0, &changes))
        .and_then(|attr| xattr::after_setattr(&*self.fs, attr, changes.perm));
        match changed {
            Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.counts.add(wire::op::READLINK);
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
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.counts.add(wire::op::MKNOD);
        // The kernel sends only what mknod(2) makes (its own checks refuse
        // a directory, and a device without CAP_MKNOD); bits of no kind
        // are refused as mknod(2) refuses them.
        let Some(kind) = FileType::from_mode(mode) else {
            return reply.error(FuseErrno::EINVAL);
        };
        let made = self.fs.mknod(parent.0, name, kind, rdev, owner(req, mode, umask));
        self.entry(made.and_then(|a| self.inherit(parent, a, mode)), reply);
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        self.counts.add(wire::op::MKDIR);
        let made = self.fs.mkdir(parent.0, name, owner(req, mode, umask));
        self.entry(made.and_then(|a| self.inherit(parent, a, mode)), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.counts.add(wire::op::UNLINK);
        Self::empty(self.fs.unlink(parent.0, name), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.counts.add(wire::op::RMDIR);
        Self::empty(self.fs.rmdir(parent.0, name), reply);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        self.counts.add(wire::op::SYMLINK);
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
        self.counts.add(wire::op::RENAME);
        // RENAME_WHITEOUT (and any other bit) is EINVAL, as from a kernel
        // file system without whiteouts.
        let renamed = fsapi::RenameMode::from_flags(flags.bits())
            .and_then(|mode| self.fs.rename2(parent.0, name, newparent.0, newname, mode));
        Self::empty(renamed, reply);
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.counts.add(wire::op::LINK);
        self.entry(self.fs.link(ino.0, newparent.0, newname), reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.counts.add(wire::op::OPEN);
        match wire::open(&*self.fs, &self.direct, ino.0, flags.0) {
            Ok(bits) => reply.opened(FileHandle(0), FopenFlags::from_bits_retain(bits)),
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
        self.counts.add(wire::op::READ);
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
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.counts.add(wire::op::WRITE);
        let killed = if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
            setid::on_write(&*self.fs, ino.0)
        } else {
            Ok(())
        };
        match killed.and_then(|()| self.fs.write(ino.0, offset, data)) {
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
        self.counts.add(wire::op::FLUSH);
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
        self.counts.add(wire::op::RELEASE);
        self.fs.release(ino.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        self.counts.add(wire::op::FSYNC);
        Self::empty(self.fs.fsync(ino.0, datasync), reply);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        self.counts.add(wire::op::READDIR);
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

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.counts.add(wire::op::OPENDIR);
        // A directory needs no handle: ENOSYS tells the kernel to stop
        // sending OPENDIR and RELEASEDIR (two round trips per opendir(3)),
        // and its default without them is to keep each directory's
        // entries in its page cache (FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR),
        // dropped whenever it changes the directory itself or its mtime
        // moves. Every change on this mount comes through the kernel, so
        // the cache stays true and a second listing costs no READDIR.
        reply.error(FuseErrno::ENOSYS);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.counts.add(wire::op::RELEASEDIR);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        self.counts.add(wire::op::FSYNCDIR);
        Self::empty(self.fs.fsync(ino.0, datasync), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.counts.add(wire::op::STATFS);
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

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.counts.add(wire::op::FALLOCATE);
        Self::empty(wire::fallocate(&*self.fs, ino.0, offset, length, mode), reply);
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.counts.add(wire::op::LSEEK);
        // The file system's offsets are loff_t's: below i64::MAX.
        match wire::lseek(&*self.fs, ino.0, offset, whence) {
            Ok(at) => reply.offset(at as i64),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        self.counts.add(wire::op::COPY_FILE_RANGE);
        let from = (ino_in.0, offset_in);
        match wire::copy_file_range(&*self.fs, from, (ino_out.0, offset_out), len, flags.bits()) {
            Ok(n) => reply.written(n),
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
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.counts.add(wire::op::CREATE);
        let made = wire::Made { owner: owner(req, mode, umask), mode, acl: self.agreed.acl };
        match wire::create(&*self.fs, &self.direct, parent.0, name, made, flags) {
            Ok((attr, bits)) => reply.created(
                &TTL,
                &file_attr(&attr),
                Generation(0),
                FileHandle(0),
                FopenFlags::from_bits_retain(bits),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        self.counts.add(wire::op::SETXATTR);
        Self::empty(xattr::set(&*self.fs, ino.0, name, value, flags as u32), reply);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.counts.add(wire::op::GETXATTR);
        Self::xattr_reply(self.fs.getxattr(ino.0, name), size, reply);
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.counts.add(wire::op::LISTXATTR);
        let names = self.fs.listxattr(ino.0).map(|list| xattr::listed(list, req.uid()));
        Self::xattr_reply(names, size, reply);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.counts.add(wire::op::REMOVEXATTR);
        Self::empty(self.fs.removexattr(ino.0, name), reply);
    }
}
