//! One device served as one file: the FUSE file system a loop device is
//! attached to, so that every block write and every flush of the kernel
//! file system above the loop device reaches a device of iolab's (a
//! recording one). The root holds `image` and nothing else; nothing can
//! be made, renamed or removed, and the file's size is the device's.
//!
//! What the kernel sends: the loop driver turns a flush into `vfs_fsync`
//! of its backing file (an FSYNC here: a flush of the device) and, with
//! no FUA advertised, a FUA write into a write and a flush; a discard into
//! `fallocate(PUNCH_HOLE)` (zeros written here, as the worst a device may
//! keep is the old data and zeros are what a read must find on a file).

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use fsapi::{
    Attr, DirEntry, Errno, Fallocate, FileSystem, FileType, Ino, Owner, Result, SetAttr, StatFs, Time,
};

/// The file's inode and name.
const IMAGE: Ino = 2;
pub const IMAGE_NAME: &str = "image";

/// The largest run of zeros written at once for a punched range.
const ZEROS_BYTES: usize = 1 << 20;

/// A device as the file `image` in an otherwise empty, fixed root.
pub struct ImageFs {
    dev: Arc<dyn Device>,
    /// Answers fsync without flushing the device: the recorder that drops
    /// flushes, which the checker must catch.
    drop_flushes: bool,
    made: Time,
}

impl ImageFs {
    pub fn new(dev: Arc<dyn Device>, drop_flushes: bool) -> ImageFs {
        ImageFs { dev, drop_flushes, made: Time::now() }
    }

    fn attr(&self, ino: Ino) -> Result<Attr> {
        let (kind, perm, nlink, size) = match ino {
            fsapi::ROOT => (FileType::Dir, 0o755, 2, 4096),
            IMAGE => (FileType::File, 0o600, 1, self.dev.size_bytes()),
            _ => return Err(Errno::NOENT),
        };
        let t = self.made;
        Ok(Attr {
            ino,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            size,
            blocks: size / 512,
            rdev: 0,
            atime: t,
            mtime: t,
            ctime: t,
        })
    }

    fn file(&self, ino: Ino) -> Result<()> {
        match ino {
            IMAGE => Ok(()),
            fsapi::ROOT => Err(Errno::ISDIR),
            _ => Err(Errno::NOENT),
        }
    }

    /// `offset..offset + len` clamped to the device.
    fn clamp(&self, offset: u64, len: usize) -> usize {
        self.dev.size_bytes().saturating_sub(offset).min(len as u64) as usize
    }

    /// Reads or writes whole sectors; a request not on sector edges is
    /// widened to them (read, changed, written back).
    fn sectors(&self, offset: u64, len: usize) -> (u64, usize) {
        let sector = u64::from(self.dev.sector_bytes());
        let start = offset / sector * sector;
        let end = (offset + len as u64).div_ceil(sector) * sector;
        (start, (end - start) as usize)
    }

    fn write_zeros(&self, offset: u64, len: u64) -> Result<()> {
        let end = (offset + len).min(self.dev.size_bytes());
        let mut at = offset;
        let zeros = vec![0u8; ZEROS_BYTES];
        while at < end {
            let n = ((end - at) as usize).min(ZEROS_BYTES);
            self.write(IMAGE, at, &zeros[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

/// A device's failure as the file's: EIO.
fn io(_: device::DeviceError) -> Errno {
    Errno::IO
}

impl FileSystem for ImageFs {
    fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Attr> {
        match (parent, name.to_str()) {
            (fsapi::ROOT, Some(IMAGE_NAME)) => self.attr(IMAGE),
            (fsapi::ROOT, _) => Err(Errno::NOENT),
            _ => Err(Errno::NOTDIR),
        }
    }
    fn forget(&self, _ino: Ino, _count: u64) {}
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.attr(ino)
    }
    fn setattr(&self, ino: Ino, changes: &SetAttr) -> Result<Attr> {
        let attr = self.attr(ino)?;
        if changes.size.is_some_and(|size| size != attr.size) {
            return Err(Errno::PERM);
        }
        Ok(attr)
    }
    fn create(&self, _: Ino, _: &OsStr, _: Owner) -> Result<Attr> {
        Err(Errno::PERM)
    }
    fn mkdir(&self, _: Ino, _: &OsStr, _: Owner) -> Result<Attr> {
        Err(Errno::PERM)
    }
    fn mknod(&self, _: Ino, _: &OsStr, _: FileType, _: u32, _: Owner) -> Result<Attr> {
        Err(Errno::PERM)
    }
    fn symlink(&self, _: Ino, _: &OsStr, _: &OsStr, _: Owner) -> Result<Attr> {
        Err(Errno::PERM)
    }
    fn readlink(&self, _: Ino) -> Result<Vec<u8>> {
        Err(Errno::INVAL)
    }
    fn link(&self, _: Ino, _: Ino, _: &OsStr) -> Result<Attr> {
        Err(Errno::PERM)
    }
    fn unlink(&self, _: Ino, _: &OsStr) -> Result<()> {
        Err(Errno::PERM)
    }
    fn rmdir(&self, _: Ino, _: &OsStr) -> Result<()> {
        Err(Errno::PERM)
    }
    fn rename2(&self, _: Ino, _: &OsStr, _: Ino, _: &OsStr, _: fsapi::RenameMode) -> Result<()> {
        Err(Errno::PERM)
    }
    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.file(ino)?;
        let n = self.clamp(offset, buf.len());
        if n == 0 {
            return Ok(0);
        }
        let (start, len) = self.sectors(offset, n);
        if (start, len) == (offset, n) {
            self.dev.read_at(&mut buf[..n], offset).map_err(io)?;
        } else {
            let mut whole = vec![0u8; len];
            self.dev.read_at(&mut whole, start).map_err(io)?;
            let skip = (offset - start) as usize;
            buf[..n].copy_from_slice(&whole[skip..skip + n]);
        }
        Ok(n)
    }
    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.file(ino)?;
        let n = self.clamp(offset, data.len());
        if n < data.len() {
            return Err(Errno::NOSPC);
        }
        let (start, len) = self.sectors(offset, n);
        if (start, len) == (offset, n) {
            self.dev.write_at(data, offset).map_err(io)?;
        } else {
            let mut whole = vec![0u8; len];
            self.dev.read_at(&mut whole, start).map_err(io)?;
            let skip = (offset - start) as usize;
            whole[skip..skip + n].copy_from_slice(data);
            self.dev.write_at(&whole, start).map_err(io)?;
        }
        Ok(n)
    }
    fn readdir(&self, ino: Ino, offset: u64, entry: &mut dyn FnMut(DirEntry) -> bool) -> Result<()> {
        if ino != fsapi::ROOT {
            return Err(Errno::NOTDIR);
        }
        if offset == 0 {
            entry(DirEntry { ino: IMAGE, kind: FileType::File, name: IMAGE_NAME.into(), next: 1 });
        }
        Ok(())
    }
    fn fsync(&self, ino: Ino, _data_only: bool) -> Result<()> {
        self.attr(ino)?;
        self.sync()
    }
    fn statfs(&self) -> Result<StatFs> {
        let blocks = self.dev.size_bytes() / 4096;
        Ok(StatFs {
            block_bytes: 4096,
            blocks,
            blocks_free: 0,
            blocks_avail: 0,
            files: 2,
            files_free: 0,
            name_bytes_max: 255,
        })
    }
    fn sync(&self) -> Result<()> {
        if self.drop_flushes {
            return Ok(());
        }
        self.dev.flush().map_err(io)
    }
    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        self.file(ino)?;
        match mode {
            // Every block of the file exists already.
            Fallocate::Allocate { .. } => Ok(()),
            Fallocate::PunchHole | Fallocate::ZeroRange { .. } => self.write_zeros(offset, len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use device::MemDevice;

    fn image() -> (ImageFs, Arc<dyn Device>) {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 10).unwrap());
        (ImageFs::new(Arc::clone(&dev), false), dev)
    }

    #[test]
    fn the_root_holds_the_image_only() {
        let (fs, dev) = image();
        let attr = fs.lookup(fsapi::ROOT, OsStr::new(IMAGE_NAME)).unwrap();
        assert_eq!((attr.kind, attr.size), (FileType::File, dev.size_bytes()));
        assert_eq!(fs.lookup(fsapi::ROOT, OsStr::new("other")), Err(Errno::NOENT));
        assert_eq!(fs.create(fsapi::ROOT, OsStr::new("x"), Owner::root(0o644)), Err(Errno::PERM));
    }

    #[test]
    fn a_write_off_sector_edges_changes_only_its_bytes() {
        let (fs, dev) = image();
        fs.write(IMAGE, 0, &[7u8; 1024]).unwrap();
        fs.write(IMAGE, 100, &[9u8; 10]).unwrap();
        let mut back = vec![0u8; 1024];
        dev.read_at(&mut back, 0).unwrap();
        assert!(back[..100].iter().all(|&b| b == 7));
        assert!(back[100..110].iter().all(|&b| b == 9));
        assert!(back[110..].iter().all(|&b| b == 7));
    }

    #[test]
    fn a_punched_range_reads_as_zeros() {
        let (fs, _) = image();
        fs.write(IMAGE, 0, &[7u8; 8192]).unwrap();
        fs.fallocate(IMAGE, Fallocate::PunchHole, 512, 4096).unwrap();
        let mut back = vec![1u8; 8192];
        assert_eq!(fs.read(IMAGE, 0, &mut back).unwrap(), 8192);
        assert!(back[512..4608].iter().all(|&b| b == 0));
        assert!(back[..512].iter().chain(&back[4608..]).all(|&b| b == 7));
    }

    #[test]
    fn the_size_cannot_change_and_reads_stop_at_the_end() {
        let (fs, dev) = image();
        let size = dev.size_bytes();
        let grow = SetAttr { size: Some(size + 4096), ..SetAttr::default() };
        assert_eq!(fs.setattr(IMAGE, &grow), Err(Errno::PERM));
        let mut buf = vec![0u8; 8192];
        assert_eq!(fs.read(IMAGE, size - 512, &mut buf).unwrap(), 512);
        assert_eq!(fs.write(IMAGE, size - 512, &buf), Err(Errno::NOSPC));
    }
}
