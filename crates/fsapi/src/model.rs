//! A file system in memory, simple enough to be obviously right: the
//! reference model property tests compare every other backend against.
//! One lock over everything; no durability to speak of (`sync` and
//! `fsync` succeed at once). A file's blocks are kept as iolab's file
//! system allocates them, so that holes (SEEK_DATA, SEEK_HOLE) compare.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, MutexGuard};

use crate::xattr::{self, XattrFlags, XattrName};
use crate::{
    check_name, copy_len, fallocate_end, regular_only, seek, Attr, DirEntry, Errno, Fallocate, FileSystem,
    FileType, Ino, Owner, RenameMode, Result, SetAttr, StatFs, Time, Whence, ROOT,
};

/// Links a file may have (as ext4's 65,000).
const LINKS_MAX: u32 = 65_000;

/// The unit the model allocates a file's bytes in: iolab's file system's
/// block. A block is allocated by any write into it, by fallocate's
/// allocation and zeroing, and freed by a truncation below it or a
/// punch covering it whole; a file extended by truncation gains holes.
pub const MODEL_BLOCK_BYTES: u64 = 4096;

/// A file's bytes (up to its size) and which of its blocks are allocated
/// (some may lie past the size: fallocate's `keep_size`).
#[derive(Default)]
struct FileData {
    bytes: Vec<u8>,
    blocks: BTreeSet<u64>,
}

/// The blocks that hold any of the bytes `start..end`.
fn blocks_touched(start: u64, end: u64) -> std::ops::Range<u64> {
    start / MODEL_BLOCK_BYTES..end.div_ceil(MODEL_BLOCK_BYTES)
}

impl FileData {
    fn write(&mut self, offset: u64, bytes: &[u8]) {
        let end = offset as usize + bytes.len();
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[offset as usize..end].copy_from_slice(bytes);
        self.blocks.extend(blocks_touched(offset, end as u64));
    }

    /// A truncation: blocks past the new end freed when it shrinks.
    fn resize(&mut self, size: u64) {
        if size < self.bytes.len() as u64 {
            self.blocks.retain(|&b| b < size.div_ceil(MODEL_BLOCK_BYTES));
        }
        self.bytes.resize(size as usize, 0);
    }

    /// `mode` over `offset..end` (checked by the caller).
    fn fallocate(&mut self, mode: Fallocate, offset: u64, end: u64) {
        if !mode.keeps_size() && end > self.bytes.len() as u64 {
            self.bytes.resize(end as usize, 0);
        }
        let within = offset.min(self.bytes.len() as u64) as usize..end.min(self.bytes.len() as u64) as usize;
        match mode {
            Fallocate::Allocate { .. } => self.blocks.extend(blocks_touched(offset, end)),
            Fallocate::ZeroRange { .. } => {
                self.bytes[within].fill(0);
                self.blocks.extend(blocks_touched(offset, end));
            }
            Fallocate::PunchHole => {
                self.bytes[within].fill(0);
                let whole = offset.div_ceil(MODEL_BLOCK_BYTES)..end / MODEL_BLOCK_BYTES;
                self.blocks.retain(|b| !whole.contains(b));
            }
        }
    }

    /// The first block in `from..end` allocated (`data`) or a hole.
    fn next(&self, from: u64, end: u64, data: bool) -> Option<u64> {
        if data {
            self.blocks.range(from..end).next().copied()
        } else {
            (from..end).find(|b| !self.blocks.contains(b))
        }
    }

    /// 512-byte units allocated, as `st_blocks`.
    fn units(&self) -> u64 {
        self.blocks.len() as u64 * (MODEL_BLOCK_BYTES / 512)
    }
}

enum Body {
    File(FileData),
    Dir(Dir),
    Symlink(Vec<u8>),
    /// A FIFO, device or socket: a name and attributes, no data.
    Special,
}

#[derive(Default)]
struct Dir {
    /// Entries by cookie (the readdir offset), in creation order; a
    /// removed entry's cookie is never reused.
    by_cookie: BTreeMap<u64, (Vec<u8>, Ino)>,
    by_name: HashMap<Vec<u8>, u64>,
    next_cookie: u64,
    parent: Ino,
}

struct Node {
    attr: Attr,
    body: Body,
    lookups: u64,
    opens: u64,
    /// Extended attributes, in the order listings give them. Together they
    /// take at most [`xattr::ROOM_BYTES`], as iolab's file system keeps them.
    xattrs: BTreeMap<XattrName, Vec<u8>>,
}

struct State {
    nodes: HashMap<Ino, Node>,
    next_ino: Ino,
}

/// The reference model (see the module's doc).
pub struct ModelFs {
    state: Mutex<State>,
}

impl Default for ModelFs {
    fn default() -> ModelFs {
        ModelFs::new()
    }
}

impl ModelFs {
    /// An empty file system: the root, mode 0755, owned by root.
    pub fn new() -> ModelFs {
        let mut nodes = HashMap::new();
        let root = new_attr(ROOT, FileType::Dir, Owner::root(0o755));
        let dir = Dir { parent: ROOT, next_cookie: 1, ..Dir::default() };
        nodes.insert(
            ROOT,
            Node {
                attr: Attr { nlink: 2, ..root },
                body: Body::Dir(dir),
                lookups: 0,
                opens: 0,
                xattrs: BTreeMap::new(),
            },
        );
        ModelFs { state: Mutex::new(State { nodes, next_ino: ROOT + 1 }) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in another call cannot leave the state half-changed in a
        // way later calls trust: every call checks before it changes.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Inodes alive (linked, or unlinked but still referenced or open).
    pub fn inodes(&self) -> usize {
        self.lock().nodes.len()
    }
}

fn new_attr(ino: Ino, kind: FileType, owner: Owner) -> Attr {
    let now = Time::now();
    Attr {
        ino,
        kind,
        perm: owner.perm & 0o7777,
        nlink: 1,
        uid: owner.uid,
        gid: owner.gid,
        size: 0,
        blocks: 0,
        rdev: 0,
        atime: now,
        mtime: now,
        ctime: now,
    }
}

impl State {
    fn node(&self, ino: Ino) -> Result<&Node> {
        self.nodes.get(&ino).ok_or(Errno::STALE)
    }

    fn node_mut(&mut self, ino: Ino) -> Result<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(Errno::STALE)
    }

    fn dir(&self, ino: Ino) -> Result<&Dir> {
        match &self.node(ino)?.body {
            Body::Dir(dir) => Ok(dir),
            _ => Err(Errno::NOTDIR),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> Result<&mut Dir> {
        match &mut self.node_mut(ino)?.body {
            Body::Dir(dir) => Ok(dir),
            _ => Err(Errno::NOTDIR),
        }
    }

    fn entry(&self, parent: Ino, name: &OsStr) -> Result<Ino> {
        check_name(name)?;
        let dir = self.dir(parent)?;
        let cookie = dir.by_name.get(name.as_bytes()).ok_or(Errno::NOENT)?;
        Ok(dir.by_cookie[cookie].1)
    }

    fn touch(&mut self, ino: Ino) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            let now = Time::now();
            node.attr.mtime = now;
            node.attr.ctime = now;
        }
    }

    fn add_entry(&mut self, parent: Ino, name: &OsStr, ino: Ino) -> Result<()> {
        let dir = self.dir_mut(parent)?;
        let cookie = dir.next_cookie;
        dir.next_cookie += 1;
        dir.by_cookie.insert(cookie, (name.as_bytes().to_vec(), ino));
        dir.by_name.insert(name.as_bytes().to_vec(), cookie);
        self.touch(parent);
        Ok(())
    }

    fn remove_entry(&mut self, parent: Ino, name: &OsStr) -> Result<Ino> {
        let dir = self.dir_mut(parent)?;
        let cookie = dir.by_name.remove(name.as_bytes()).ok_or(Errno::NOENT)?;
        let (_, ino) = dir.by_cookie.remove(&cookie).ok_or(Errno::IO)?;
        self.touch(parent);
        Ok(ino)
    }

    /// A new inode linked as `name` in `parent`, one reference counted.
    fn make(&mut self, parent: Ino, name: &OsStr, kind: FileType, owner: Owner, body: Body) -> Result<Attr> {
        check_name(name)?;
        self.dir(parent)?;
        if self.entry(parent, name).is_ok() {
            return Err(Errno::EXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let dir = self.node(parent)?.attr;
        let mut attr = new_attr(ino, kind, owner.under(dir.perm, dir.gid, kind));
        if let Body::Symlink(target) = &body {
            attr.size = target.len() as u64;
        }
        if kind == FileType::Dir {
            attr.nlink = 2;
            self.node_mut(parent)?.attr.nlink += 1;
        }
        self.add_entry(parent, name, ino)?;
        self.nodes.insert(ino, Node { attr, body, lookups: 1, opens: 0, xattrs: BTreeMap::new() });
        Ok(attr)
    }

    /// Frees `ino` when nothing links, references or holds it open.
    fn reap(&mut self, ino: Ino) {
        let dead = self.nodes.get(&ino).is_some_and(|n| n.attr.nlink == 0 && n.lookups == 0 && n.opens == 0);
        if dead && ino != ROOT {
            self.nodes.remove(&ino);
        }
    }

    /// Drops one link of non-directory `ino`.
    fn drop_link(&mut self, ino: Ino) -> Result<()> {
        let node = self.node_mut(ino)?;
        node.attr.nlink -= 1;
        node.attr.ctime = Time::now();
        self.reap(ino);
        Ok(())
    }

    /// Whether `ancestor` is `ino` or one of the directories above it.
    fn is_ancestor(&self, ancestor: Ino, mut ino: Ino) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            match self.dir(ino) {
                Ok(dir) if dir.parent != ino => ino = dir.parent,
                _ => return false,
            }
        }
    }

    fn rename(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        mode: RenameMode,
    ) -> Result<()> {
        check_name(new_name)?;
        let ino = self.entry(parent, name)?;
        self.dir(new_parent)?;
        match (mode, self.entry(new_parent, new_name)) {
            (RenameMode::NoReplace, Ok(_)) => return Err(Errno::EXIST),
            (RenameMode::Exchange, other) => {
                return self.exchange(parent, name, new_parent, new_name, (ino, other?))
            }
            _ => {}
        }
        let moving_dir = self.node(ino)?.attr.kind == FileType::Dir;
        if moving_dir && self.is_ancestor(ino, new_parent) {
            return Err(Errno::INVAL);
        }
        if let Ok(old) = self.entry(new_parent, new_name) {
            if old == ino {
                return Ok(());
            }
            // As Linux: a target above the source's directory is refused
            // before the kinds are compared.
            if self.is_ancestor(old, parent) {
                return Err(Errno::NOTEMPTY);
            }
            let old_is_dir = self.node(old)?.attr.kind == FileType::Dir;
            match (moving_dir, old_is_dir) {
                (true, false) => return Err(Errno::NOTDIR),
                (false, true) => return Err(Errno::ISDIR),
                (true, true) if !self.dir(old)?.by_cookie.is_empty() => return Err(Errno::NOTEMPTY),
                _ => {}
            }
            self.remove_entry(new_parent, new_name)?;
            if old_is_dir {
                self.node_mut(new_parent)?.attr.nlink -= 1;
                self.node_mut(old)?.attr.nlink = 0;
                self.reap(old);
            } else {
                self.drop_link(old)?;
            }
        }
        self.remove_entry(parent, name)?;
        self.add_entry(new_parent, new_name, ino)?;
        if moving_dir && parent != new_parent {
            self.node_mut(parent)?.attr.nlink -= 1;
            self.node_mut(new_parent)?.attr.nlink += 1;
            self.dir_mut(ino)?.parent = new_parent;
        }
        self.node_mut(ino)?.attr.ctime = Time::now();
        Ok(())
    }

    /// `RENAME_EXCHANGE` of entry `name` in `parent` (naming `a`) and
    /// `new_name` in `new_parent` (naming `b`): each entry keeps its place
    /// and names the other's inode.
    fn exchange(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        (a, b): (Ino, Ino),
    ) -> Result<()> {
        let (a_dir, b_dir) =
            (self.node(a)?.attr.kind == FileType::Dir, self.node(b)?.attr.kind == FileType::Dir);
        // As Linux: neither may be its own destination's ancestor.
        if (a_dir && self.is_ancestor(a, new_parent)) || (b_dir && self.is_ancestor(b, parent)) {
            return Err(Errno::INVAL);
        }
        if a == b {
            return Ok(());
        }
        self.retarget(parent, name, b)?;
        self.retarget(new_parent, new_name, a)?;
        if parent != new_parent {
            for (moved, is_dir, from, to) in [(a, a_dir, parent, new_parent), (b, b_dir, new_parent, parent)]
            {
                if is_dir {
                    self.dir_mut(moved)?.parent = to;
                    self.node_mut(from)?.attr.nlink -= 1;
                    self.node_mut(to)?.attr.nlink += 1;
                }
            }
        }
        for ino in [a, b] {
            self.node_mut(ino)?.attr.ctime = Time::now();
        }
        Ok(())
    }

    /// Entry `name` of `parent` names `ino` from now on, in its place.
    fn retarget(&mut self, parent: Ino, name: &OsStr, ino: Ino) -> Result<()> {
        let dir = self.dir_mut(parent)?;
        let cookie = *dir.by_name.get(name.as_bytes()).ok_or(Errno::NOENT)?;
        dir.by_cookie.insert(cookie, (name.as_bytes().to_vec(), ino));
        self.touch(parent);
        Ok(())
    }
}

impl FileSystem for ModelFs {
    fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Attr> {
        let mut state = self.lock();
        let ino = state.entry(parent, name)?;
        let node = state.node_mut(ino)?;
        node.lookups += 1;
        Ok(node.attr)
    }

    fn forget(&self, ino: Ino, count: u64) {
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(&ino).filter(|_| ino != ROOT) {
            node.lookups = node.lookups.saturating_sub(count);
            state.reap(ino);
        }
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        Ok(self.lock().node(ino)?.attr)
    }

    fn setattr(&self, ino: Ino, changes: &SetAttr) -> Result<Attr> {
        let mut state = self.lock();
        let node = state.node_mut(ino)?;
        if let Some(size) = changes.size {
            if matches!(node.body, Body::File(_)) {
                crate::check_file_end(size, 0, crate::FILE_BYTES_MAX)?;
            }
            match &mut node.body {
                Body::File(data) => {
                    data.resize(size);
                    node.attr.blocks = data.units();
                }
                Body::Dir(_) => return Err(Errno::ISDIR),
                Body::Symlink(_) | Body::Special => return Err(Errno::INVAL),
            }
            node.attr.size = size;
            node.attr.mtime = Time::now();
        }
        let a = &mut node.attr;
        a.perm = changes.perm.map_or(a.perm, |p| p & 0o7777);
        a.uid = changes.uid.unwrap_or(a.uid);
        a.gid = changes.gid.unwrap_or(a.gid);
        a.atime = changes.atime.unwrap_or(a.atime);
        a.mtime = changes.mtime.unwrap_or(a.mtime);
        a.ctime = Time::now();
        Ok(*a)
    }

    fn create(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        self.lock().make(parent, name, FileType::File, owner, Body::File(FileData::default()))
    }

    fn mkdir(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        let dir = Dir { parent, next_cookie: 1, ..Dir::default() };
        self.lock().make(parent, name, FileType::Dir, owner, Body::Dir(dir))
    }

    fn mknod(&self, parent: Ino, name: &OsStr, kind: FileType, rdev: u32, owner: Owner) -> Result<Attr> {
        let body = match kind {
            FileType::File => Body::File(FileData::default()),
            FileType::Dir => return Err(Errno::PERM),
            FileType::Symlink => return Err(Errno::INVAL),
            FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket => Body::Special,
        };
        let mut state = self.lock();
        let made = state.make(parent, name, kind, owner, body)?;
        // Only a device keeps its number (as Linux's init_special_inode).
        let rdev = if kind.is_device() { rdev } else { 0 };
        let node = state.node_mut(made.ino)?;
        node.attr.rdev = rdev;
        Ok(node.attr)
    }

    fn symlink(&self, parent: Ino, name: &OsStr, target: &OsStr, owner: Owner) -> Result<Attr> {
        if target.is_empty() || target.len() > 4095 {
            return Err(if target.is_empty() { Errno::NOENT } else { Errno::NAMETOOLONG });
        }
        let body = Body::Symlink(target.as_bytes().to_vec());
        self.lock().make(parent, name, FileType::Symlink, Owner { perm: 0o777, ..owner }, body)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        match &self.lock().node(ino)?.body {
            Body::Symlink(target) => Ok(target.clone()),
            _ => Err(Errno::INVAL),
        }
    }

    fn link(&self, ino: Ino, new_parent: Ino, new_name: &OsStr) -> Result<Attr> {
        let mut state = self.lock();
        let attr = state.node(ino)?.attr;
        if attr.kind == FileType::Dir {
            return Err(Errno::PERM);
        }
        if attr.nlink >= LINKS_MAX {
            return Err(Errno::MLINK);
        }
        if state.entry(new_parent, new_name).is_ok() {
            return Err(Errno::EXIST);
        }
        state.add_entry(new_parent, new_name, ino)?;
        let node = state.node_mut(ino)?;
        node.attr.nlink += 1;
        node.attr.ctime = Time::now();
        node.lookups += 1;
        Ok(node.attr)
    }

    fn unlink(&self, parent: Ino, name: &OsStr) -> Result<()> {
        let mut state = self.lock();
        let ino = state.entry(parent, name)?;
        if state.node(ino)?.attr.kind == FileType::Dir {
            return Err(Errno::ISDIR);
        }
        state.remove_entry(parent, name)?;
        state.drop_link(ino)
    }

    fn rmdir(&self, parent: Ino, name: &OsStr) -> Result<()> {
        let mut state = self.lock();
        let ino = state.entry(parent, name)?;
        if !state.dir(ino)?.by_cookie.is_empty() {
            return Err(Errno::NOTEMPTY);
        }
        state.remove_entry(parent, name)?;
        state.node_mut(parent)?.attr.nlink -= 1;
        state.node_mut(ino)?.attr.nlink = 0;
        state.reap(ino);
        Ok(())
    }

    fn rename2(
        &self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        mode: RenameMode,
    ) -> Result<()> {
        self.lock().rename(parent, name, new_parent, new_name, mode)
    }

    fn open(&self, ino: Ino) -> Result<()> {
        self.lock().node_mut(ino)?.opens += 1;
        Ok(())
    }

    fn release(&self, ino: Ino) {
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(&ino) {
            node.opens = node.opens.saturating_sub(1);
            state.reap(ino);
        }
    }

    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match &self.lock().node(ino)?.body {
            Body::File(FileData { bytes: data, .. }) => {
                let start = (offset as usize).min(data.len());
                let n = buf.len().min(data.len() - start);
                buf[..n].copy_from_slice(&data[start..start + n]);
                Ok(n)
            }
            Body::Dir(_) => Err(Errno::ISDIR),
            Body::Symlink(_) | Body::Special => Err(Errno::INVAL),
        }
    }

    fn write(&self, ino: Ino, offset: u64, bytes: &[u8]) -> Result<usize> {
        let mut state = self.lock();
        let node = state.node_mut(ino)?;
        let Body::File(data) = &mut node.body else {
            return Err(if node.attr.kind == FileType::Dir { Errno::ISDIR } else { Errno::INVAL });
        };
        if bytes.is_empty() {
            // As pwrite(2): writing nothing extends nothing.
            return Ok(0);
        }
        crate::check_file_end(offset, bytes.len() as u64, crate::FILE_BYTES_MAX)?;
        data.write(offset, bytes);
        node.attr.size = data.bytes.len() as u64;
        node.attr.blocks = data.units();
        let now = Time::now();
        node.attr.mtime = now;
        node.attr.ctime = now;
        Ok(bytes.len())
    }

    fn readdir(&self, ino: Ino, offset: u64, entry: &mut dyn FnMut(DirEntry) -> bool) -> Result<()> {
        let state = self.lock();
        let dir = state.dir(ino)?;
        for (cookie, (name, child)) in dir.by_cookie.range(offset + 1..) {
            let kind = state.node(*child)?.attr.kind;
            if !entry(DirEntry { ino: *child, kind, name: name.clone(), next: *cookie }) {
                break;
            }
        }
        Ok(())
    }

    fn fsync(&self, ino: Ino, _data_only: bool) -> Result<()> {
        self.getattr(ino).map(|_| ())
    }

    fn statfs(&self) -> Result<StatFs> {
        let state = self.lock();
        let used: u64 = state.nodes.values().map(|n| n.attr.blocks).sum();
        Ok(StatFs {
            block_bytes: 512,
            blocks: u64::MAX / 1024,
            blocks_free: u64::MAX / 1024 - used,
            blocks_avail: u64::MAX / 1024 - used,
            files: u64::MAX / 1024,
            files_free: u64::MAX / 1024 - state.nodes.len() as u64,
            name_bytes_max: crate::NAME_BYTES_MAX as u32,
        })
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        let mut state = self.lock();
        let node = state.node_mut(ino)?;
        regular_only(node.attr.kind)?;
        let end = fallocate_end(offset, len)?;
        let Body::File(data) = &mut node.body else { return Err(Errno::IO) };
        data.fallocate(mode, offset, end);
        node.attr.size = data.bytes.len() as u64;
        node.attr.blocks = data.units();
        let now = Time::now();
        node.attr.mtime = now;
        node.attr.ctime = now;
        Ok(())
    }

    fn lseek(&self, ino: Ino, offset: u64, whence: Whence) -> Result<u64> {
        let state = self.lock();
        let node = state.node(ino)?;
        regular_only(node.attr.kind)?;
        let Body::File(data) = &node.body else { return Err(Errno::IO) };
        seek(node.attr.size, offset, whence, MODEL_BLOCK_BYTES, |from, end, want| {
            Ok(data.next(from, end, want))
        })
    }

    fn copy_file_range(&self, from: Ino, offset_in: u64, to: Ino, offset_out: u64, len: u64) -> Result<u64> {
        let (source, target) = (self.getattr(from)?, self.getattr(to)?);
        let count = copy_len(&source, offset_in, &target, offset_out, len)?;
        if count == 0 {
            return Ok(0);
        }
        let mut bytes = vec![0u8; count as usize];
        let n = self.read(from, offset_in, &mut bytes)?;
        self.write(to, offset_out, &bytes[..n])?;
        Ok(n as u64)
    }

    fn getxattr(&self, ino: Ino, name: &OsStr) -> Result<Vec<u8>> {
        let name = XattrName::parse(name.as_bytes())?;
        let state = self.lock();
        let node = state.node(ino)?;
        xattr::check_read(node.attr.kind, &name)?;
        node.xattrs.get(&name).cloned().ok_or(Errno::NODATA)
    }

    fn setxattr(&self, ino: Ino, name: &OsStr, value: &[u8], flags: XattrFlags) -> Result<()> {
        let name = XattrName::parse(name.as_bytes())?;
        xattr::check_value(value)?;
        let mut state = self.lock();
        let node = state.node_mut(ino)?;
        xattr::check_write(node.attr.kind, &name)?;
        flags.allow(node.xattrs.contains_key(&name))?;
        let others: usize =
            node.xattrs.iter().filter(|(n, _)| **n != name).map(|(n, v)| n.stored_bytes(v.len())).sum();
        if others + name.stored_bytes(value.len()) > xattr::ROOM_BYTES {
            return Err(Errno::NOSPC);
        }
        node.xattrs.insert(name, value.to_vec());
        node.attr.ctime = Time::now();
        Ok(())
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        Ok(xattr::list_bytes(self.lock().node(ino)?.xattrs.keys()))
    }

    fn removexattr(&self, ino: Ino, name: &OsStr) -> Result<()> {
        let name = XattrName::parse(name.as_bytes())?;
        let mut state = self.lock();
        let node = state.node_mut(ino)?;
        xattr::check_write(node.attr.kind, &name)?;
        node.xattrs.remove(&name).ok_or(Errno::NODATA)?;
        node.attr.ctime = Time::now();
        Ok(())
    }
}
