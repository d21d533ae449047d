//! A file system that stops taking new work once a flag is set: each call
//! that would start something (a lookup, a change, a read or write) fails
//! with `EINTR` from then on, while `forget`, `release`, `getattr`,
//! `statfs` and `sync` go through, so that a workload stopped by Ctrl-C
//! unwinds, gives back what it holds, and the file system can be
//! unmounted cleanly. The flag is the caller's (a signal handler's).

use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{
    Attr, DirEntry, Errno, Fallocate, FileSystem, FileType, Ino, Owner, RenameMode, Result, SetAttr, StatFs,
    Whence, XattrFlags,
};

/// `fs` until `stop` is set; `EINTR` for new work after.
pub struct Interruptible<'a> {
    fs: &'a dyn FileSystem,
    stop: &'a AtomicBool,
}

impl<'a> Interruptible<'a> {
    pub fn new(fs: &'a dyn FileSystem, stop: &'a AtomicBool) -> Interruptible<'a> {
        Interruptible { fs, stop }
    }

    /// `Ok` while the flag is clear.
    fn go_on(&self) -> Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            Err(Errno::INTR)
        } else {
            Ok(())
        }
    }
}

impl FileSystem for Interruptible<'_> {
    fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Attr> {
        self.go_on()?;
        self.fs.lookup(parent, name)
    }

    fn forget(&self, ino: Ino, count: u64) {
        self.fs.forget(ino, count)
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.fs.getattr(ino)
    }

    fn setattr(&self, ino: Ino, changes: &SetAttr) -> Result<Attr> {
        self.go_on()?;
        self.fs.setattr(ino, changes)
    }

    fn create(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        self.go_on()?;
        self.fs.create(parent, name, owner)
    }

    fn mkdir(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        self.go_on()?;
        self.fs.mkdir(parent, name, owner)
    }

    fn mknod(&self, parent: Ino, name: &OsStr, kind: FileType, rdev: u32, owner: Owner) -> Result<Attr> {
        self.go_on()?;
        self.fs.mknod(parent, name, kind, rdev, owner)
    }

    fn symlink(&self, parent: Ino, name: &OsStr, target: &OsStr, owner: Owner) -> Result<Attr> {
        self.go_on()?;
        self.fs.symlink(parent, name, target, owner)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.go_on()?;
        self.fs.readlink(ino)
    }

    fn link(&self, ino: Ino, new_parent: Ino, new_name: &OsStr) -> Result<Attr> {
        self.go_on()?;
        self.fs.link(ino, new_parent, new_name)
    }

    fn unlink(&self, parent: Ino, name: &OsStr) -> Result<()> {
        self.go_on()?;
        self.fs.unlink(parent, name)
    }

    fn rmdir(&self, parent: Ino, name: &OsStr) -> Result<()> {
        self.go_on()?;
        self.fs.rmdir(parent, name)
    }

    fn rename2(
        &self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        mode: RenameMode,
    ) -> Result<()> {
        self.go_on()?;
        self.fs.rename2(parent, name, new_parent, new_name, mode)
    }

    fn open(&self, ino: Ino) -> Result<()> {
        self.go_on()?;
        self.fs.open(ino)
    }

    fn release(&self, ino: Ino) {
        self.fs.release(ino)
    }

    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.go_on()?;
        self.fs.read(ino, offset, buf)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.go_on()?;
        self.fs.write(ino, offset, data)
    }

    fn readdir(&self, ino: Ino, offset: u64, entry: &mut dyn FnMut(DirEntry) -> bool) -> Result<()> {
        self.go_on()?;
        self.fs.readdir(ino, offset, entry)
    }

    fn fsync(&self, ino: Ino, data_only: bool) -> Result<()> {
        self.go_on()?;
        self.fs.fsync(ino, data_only)
    }

    fn statfs(&self) -> Result<StatFs> {
        self.fs.statfs()
    }

    fn sync(&self) -> Result<()> {
        self.fs.sync()
    }

    fn file_bytes_max(&self) -> u64 {
        self.fs.file_bytes_max()
    }

    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        self.go_on()?;
        self.fs.fallocate(ino, mode, offset, len)
    }

    fn lseek(&self, ino: Ino, offset: u64, whence: Whence) -> Result<u64> {
        self.go_on()?;
        self.fs.lseek(ino, offset, whence)
    }

    fn copy_file_range(&self, from: Ino, offset_in: u64, to: Ino, offset_out: u64, len: u64) -> Result<u64> {
        self.go_on()?;
        self.fs.copy_file_range(from, offset_in, to, offset_out, len)
    }

    fn getxattr(&self, ino: Ino, name: &OsStr) -> Result<Vec<u8>> {
        self.go_on()?;
        self.fs.getxattr(ino, name)
    }

    fn setxattr(&self, ino: Ino, name: &OsStr, value: &[u8], flags: XattrFlags) -> Result<()> {
        self.go_on()?;
        self.fs.setxattr(ino, name, value, flags)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.go_on()?;
        self.fs.listxattr(ino)
    }

    fn removexattr(&self, ino: Ino, name: &OsStr) -> Result<()> {
        self.go_on()?;
        self.fs.removexattr(ino, name)
    }
}
