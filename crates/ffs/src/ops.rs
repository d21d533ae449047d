//! The file-system calls. Each takes the one lock over the mounted state
//! for its whole length (simple and obviously serial; a measurement will
//! say whether finer locks pay). Under the `sync` policy the writes that
//! keep an image repairable go out at once, in FFS's order: an inode
//! before the entry that names it, an entry removed before its inode and
//! blocks are freed, a rename's new entry before the old one goes (an
//! exchange's raised counts before its two entries), and an inode's
//! pointers cleared before its blocks are freed.
//! blocks are freed, a rename's new entry before the old one goes, and an
//! inode's pointers cleared before its blocks are freed (an extended
//! attribute block's order is in `xattr.rs`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, MutexGuard};

use fsapi::{
    check_name, Attr, DirEntry, Errno, Fallocate, FileSystem, FileType, Ino, Owner, RenameMode, Result,
    SetAttr, StatFs, Time, Whence, XattrFlags, XattrName,
};

use crate::commits::Commits;
use crate::core::{io_failed, Core};
use crate::format::*;
use crate::softdep::{FreedFrom, Gone, Move};
use crate::{Dev, FsError};

/// Links an inode may have.
const LINKS_MAX: u16 = 65_000;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    pub policy: Policy,
    /// Bytes of the buffer cache (default 64 MiB).
    pub cache_bytes: u64,
    /// Where the ages of dirty buffers and commits are read: the wall
    /// clock, or the virtual clock of the simulated disk beneath.
    pub clock: device::Clock,
    /// Under `log`: who writes the commits the syncer and full
    /// transactions make; under `softdep`, who issues the flushes of a
    /// checkpoint the cache makes when buffers held back fill it (see
    /// [`Commits`]).
    pub commits: Commits,
    /// What to do with an image that is not clean (refused by default
    /// unless it may hold leaks only).
    pub unclean: crate::Unclean,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions {
            policy: Policy::Async,
            cache_bytes: 64 << 20,
            clock: device::Clock::Wall,
            commits: Commits::Thread,
            unclean: crate::Unclean::Refuse,
        }
    }
}

/// A mounted file system.
pub struct Ffs {
    pub(crate) core: Mutex<Core>,
    /// What the cache writes to: the device, or under `log` the block log
    /// over it.
    pub(crate) dev: Dev,
    pub(crate) log: Option<std::sync::Arc<blocklog::LoggedDevice>>,
    /// The committer thread (`Commits::Thread`), joined at
    /// the unmount.
    pub(crate) committer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The superblock slot the mount passed over, said (`Ffs::passed_over`).
    pub(crate) passed_over: Option<String>,
    /// The image was not clean, and mounted all the same (`Ffs::unclean`).
    pub(crate) unclean: Option<crate::UncleanImage>,
}

fn now() -> (i64, u32) {
    let t = Time::now();
    (t.secs, t.nanos)
}

/// The kind of an inode's mode (the decoder let only known kinds through).
fn kind_of(mode: u16) -> FileType {
    match mode & S_IFMT {
        S_IFDIR => FileType::Dir,
        S_IFLNK => FileType::Symlink,
        S_IFIFO => FileType::Fifo,
        S_IFCHR => FileType::CharDevice,
        S_IFBLK => FileType::BlockDevice,
        S_IFSOCK => FileType::Socket,
        _ => FileType::File,
    }
}

/// The mode bits of a kind (docs/formats.md, "Inode": the kernel's).
fn mode_of(kind: FileType) -> u16 {
    match kind {
        FileType::File => S_IFREG,
        FileType::Dir => S_IFDIR,
        FileType::Symlink => S_IFLNK,
        FileType::Fifo => S_IFIFO,
        FileType::CharDevice => S_IFCHR,
        FileType::BlockDevice => S_IFBLK,
        FileType::Socket => S_IFSOCK,
    }
}

/// The entry type naming an inode of `mode`.
fn dt_of(mode: u16) -> u8 {
    dt_of_mode(mode).unwrap_or(DT_FILE)
}

/// The kind an entry's type byte names (fsck reports a byte that is not
/// the inode's kind; a listing trusts it, as readdir does everywhere).
fn kind_of_dt(dt: u8) -> FileType {
    match dt {
        DT_DIR => FileType::Dir,
        DT_SYMLINK => FileType::Symlink,
        DT_FIFO => FileType::Fifo,
        DT_CHAR => FileType::CharDevice,
        DT_BLOCK => FileType::BlockDevice,
        DT_SOCKET => FileType::Socket,
        _ => FileType::File,
    }
}

fn attr_of(ino: u32, i: &DiskInode) -> Attr {
    let t = |k: usize| Time { secs: i.times[k].0, nanos: i.times[k].1 };
    Attr {
        ino: u64::from(ino),
        kind: kind_of(i.mode),
        perm: i.mode & 0o7777,
        nlink: u32::from(i.nlink),
        uid: i.uid,
        gid: i.gid,
        size: i.size,
        blocks: i.blocks_512,
        rdev: if device_kind(i.mode) { i.rdev } else { 0 },
        atime: t(0),
        mtime: t(1),
        ctime: t(2),
    }
}

fn new_inode(kind: u16, owner: Owner) -> DiskInode {
    let t = now();
    DiskInode {
        mode: kind | (owner.perm & 0o7777),
        nlink: 1,
        uid: owner.uid,
        gid: owner.gid,
        times: [t, t, t, t],
        ..DiskInode::default()
    }
}

fn touch(inode: &mut DiskInode) {
    let t = now();
    inode.times[1] = t;
    inode.times[2] = t;
}

impl Ffs {
    /// The mounted state, for one call. Under `log`, a transaction grown
    /// near its limit is committed first, between calls, so no call's
    /// metadata is split across commits.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core> {
        // A call that panicked while it held the state may have left it
        // half-changed (soft updates' state taken out of the cache, a
        // block map half-written): the file system takes no more changes,
        // as after a failed write, and its unmount leaves it marked not
        // clean for fsck, rather than going on in a state nobody checked.
        let mut core = self.core.lock().unwrap_or_else(|poisoned| {
            let mut core = poisoned.into_inner();
            core.failed.get_or_insert_with(|| crate::Failure {
                cause: "a call panicked while it held the file system's state".into(),
                out_of_space: false,
            });
            core
        });
        if core.cache.delayed.any_written() && core.failed.is_none() {
            // Between calls: no call holds an inode apart from the table.
            let _ = core.settle_delayed();
        }
        if core.commit_due() {
            if let Err(e) = core.commit_behind() {
                io_failed(&mut core, e);
            }
        }
        // Under `softdep`, a checkpoint's flush done with, and the blocks
        // and inodes a flush released.
        if core.failed.is_none() {
            let polled = {
                let core = &mut *core;
                core.order.poll_behind(&mut core.cache)
            };
            if let Err(e) = polled {
                io_failed(&mut core, e);
            }
        }
        if core.order.released() {
            let _ = core.apply_released();
        }
        core
    }

    /// A new file system's root (inode 1) and lost+found (inode 2).
    pub(crate) fn make_root(&self) -> std::result::Result<(), FsError> {
        let mut core = self.lock();
        let errno = |e: Errno| FsError::Invalid(format!("cannot make the root directory: {e}"));
        for (ino, parent) in [(ROOT_INO, ROOT_INO), (LOST_FOUND_INO, ROOT_INO)] {
            core.claim_inode(ino, true).map_err(errno)?;
            let mut inode = new_inode(S_IFDIR, Owner::root(if ino == ROOT_INO { 0o755 } else { 0o700 }));
            inode.nlink = 2;
            // lost+found gets four blocks of room, as FFS's: fsck fills it
            // without allocating.
            let blocks = if ino == LOST_FOUND_INO { 4 } else { 1 };
            for n in 0..blocks {
                let hint = core.inode_group_data(ino);
                let block = core.alloc_block(hint).map_err(errno)?;
                if n == 0 {
                    core.dir_init(block, ino, parent).map_err(errno)?;
                } else {
                    core.dir_empty_block(block).map_err(errno)?;
                }
                inode.direct[n] = block;
            }
            inode.size = BLOCK_BYTES as u64 * blocks as u64;
            inode.blocks_512 = 8 * blocks as u64;
            core.put_inode(ino, &inode).map_err(errno)?;
        }
        let mut root = core.inode(ROOT_INO).map_err(errno)?;
        core.dir_add(ROOT_INO, &mut root, b"lost+found", LOST_FOUND_INO, DT_DIR).map_err(errno)?;
        root.nlink += 1;
        core.put_inode(ROOT_INO, &root).map_err(errno)?;
        Ok(())
    }

    /// Frees the inodes the orphan list holds: files unlinked while open
    /// when the file system last went down without an unmount.
    pub(crate) fn reclaim_orphans(&self) -> std::result::Result<usize, FsError> {
        let mut core = self.lock();
        let listed = core.listed_orphans();
        core.sb.orphans = 0;
        for &ino in &listed {
            let mut inode =
                core.inode(ino).map_err(|e| FsError::Invalid(format!("orphan inode {ino}: {e}")))?;
            inode.next_orphan = 0;
            free_inode(&mut core, ino, inode)
                .map_err(|e| FsError::Invalid(format!("orphan inode {ino}: {e}")))?;
        }
        Ok(listed.len())
    }

    /// Frees every inode unlinked while it was still referenced (an
    /// unmount drops every reference).
    pub(crate) fn release_orphans(&self) -> std::result::Result<(), FsError> {
        let mut core = self.lock();
        let held: Vec<u32> = core.refs.keys().copied().collect();
        core.refs.clear();
        for ino in held {
            if let Ok(inode) = core.inode(ino) {
                if inode.nlink == 0 {
                    free_inode(&mut core, ino, inode)
                        .map_err(|e| FsError::Invalid(format!("inode {ino}: {e}")))?;
                }
            }
        }
        Ok(())
    }
}

/// The directory inode `ino`, or ENOTDIR.
fn dir_inode(core: &mut Core, ino: u32) -> Result<DiskInode> {
    let inode = core.inode(ino)?;
    if inode.mode & S_IFMT != S_IFDIR {
        return Err(Errno::NOTDIR);
    }
    Ok(inode)
}

/// Counts one reference to `ino` for the caller.
fn hold(core: &mut Core, ino: u32) {
    core.refs.entry(ino).or_default().lookups += 1;
}

/// Frees inode `ino` and its blocks: pointers cleared on disk first (under
/// `sync`), then the maps. Its last link is gone and nothing holds it.
fn free_inode(core: &mut Core, ino: u32, mut inode: DiskInode) -> Result<()> {
    let dir = inode.mode & S_IFMT == S_IFDIR;
    if special_kind(inode.mode) {
        // A special file has no block: pointers it shows are damage (fsck's
        // `special_file_with_data`), and freeing them could free blocks a
        // file owns. Left alone they are leaks at worst.
        inode.direct = [0; DIRECT_POINTERS];
        (inode.single, inode.double, inode.size, inode.blocks_512) = (0, 0, 0, 0);
    }
    if core.sb.orphans != 0 {
        core.unlist_orphan(ino, inode.next_orphan)?;
    }
    // Under `log`, a removal too large for one transaction commits
    // between chunks (`shed_in_chunks`) with the entry already gone:
    // meanwhile the inode is on the orphan list, so that a crash between
    // leaves it for the next mount to free, as an open file's, never an
    // inode that nothing names.
    let listed = core.order.is_logged();
    if listed {
        inode.next_orphan = core.sb.orphans;
        core.sb.orphans = ino;
    }
    core.shed_in_chunks(ino, &mut inode, 0, FILE_BLOCKS_MAX)?;
    if listed {
        core.unlist_orphan(ino, inode.next_orphan)?;
        inode.next_orphan = 0;
    }
    let mut freed = core.truncate_blocks(&mut inode, 0)?;
    if inode.xattr != 0 {
        // Metadata, freed with the rest (among `pointers`, which are
        // looked up as metadata under `softdep`).
        freed.blocks.push(inode.xattr);
        freed.pointers.push(inode.xattr);
    }
    let block = core.clear_inode(ino)?;
    core.ordered(block)?;
    let from = if inode.mode & S_IFMT == S_IFREG {
        FreedFrom::File { pointers: freed.pointers }
    } else {
        FreedFrom::Other
    };
    core.free_removed(ino, dir, freed.blocks, from)?;
    core.drop_index(ino);
    core.refs.remove(&ino);
    Ok(())
}

/// Drops a link of `ino` (its entry already gone, written under `sync`);
/// frees it when that was the last and nothing holds it, else puts it on
/// the orphan list, which the next mount empties if a crash comes first.
fn unlinked(core: &mut Core, ino: u32, mut inode: DiskInode, links: u16) -> Result<()> {
    inode.nlink = inode.nlink.saturating_sub(links);
    inode.times[2] = now();
    if inode.nlink == 0 && !core.is_referenced(ino) {
        return free_inode(core, ino, inode);
    }
    if inode.nlink == 0 {
        inode.next_orphan = core.sb.orphans;
        core.sb.orphans = ino;
    }
    let block = core.put_inode(ino, &inode)?;
    core.ordered(block)
}

impl Core {
    /// Takes `ino` (whose next is `next`) off the orphan list, if it is on it.
    fn unlist_orphan(&mut self, ino: u32, next: u32) -> Result<()> {
        if self.sb.orphans == ino {
            self.sb.orphans = next;
            return Ok(());
        }
        let mut at = self.sb.orphans;
        for _ in 0..self.sb.total_inodes() {
            if at == 0 {
                break;
            }
            let mut inode = self.inode(at)?;
            if inode.next_orphan == ino {
                inode.next_orphan = next;
                self.put_inode(at, &inode)?;
                break;
            }
            at = inode.next_orphan;
        }
        Ok(())
    }

    /// The inodes on the orphan list, in order: each allocated with no
    /// link. A list that leads elsewhere (left stale by a crash under a
    /// policy that does not write it atomically) is cut there.
    pub fn listed_orphans(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = self.sb.orphans;
        while at != 0 && (out.len() as u64) < self.sb.total_inodes() && !out.contains(&at) {
            match self.valid_ino(u64::from(at)).and_then(|i| self.inode(i)) {
                Ok(inode) if inode.nlink == 0 => {
                    out.push(at);
                    at = inode.next_orphan;
                }
                _ => break,
            }
        }
        out
    }
}

/// Adds an entry to `parent` (whose inode is `dir`), ordered: the entry's
/// block, then the parent's inode when the directory grew.
fn add_entry(
    core: &mut Core,
    parent: u32,
    dir: &mut DiskInode,
    name: &[u8],
    ino: u32,
    dt: u8,
) -> Result<u64> {
    let size = dir.size;
    let block = core.dir_add(parent, dir, name, ino, dt)?;
    touch(dir);
    core.ordered(block)?;
    let dir_block = core.put_inode(parent, dir)?;
    if dir.size != size {
        core.ordered(dir_block)?;
    }
    Ok(block)
}

/// Lays out a new inode's first block: (core, block, inode number).
type FirstBlock = dyn Fn(&mut Core, u32, u32) -> Result<()>;

/// Makes a new inode named `name` in `parent`, as `create`, `mkdir` and
/// `symlink` do: `fill` lays out its first block if it has one.
fn make(
    core: &mut Core,
    parent: u32,
    name: &OsStr,
    mut inode: DiskInode,
    first_block: Option<&FirstBlock>,
) -> Result<Attr> {
    check_name(name)?;
    core.check_alive()?;
    let mut dir = dir_inode(core, parent)?;
    if core.dir_lookup(parent, &mut dir, name.as_bytes())?.is_some() {
        return Err(Errno::EXIST);
    }
    let is_dir = inode.mode & S_IFMT == S_IFDIR;
    if dir.mode & 0o2000 != 0 {
        // A set-group-ID directory gives its group (Owner::under).
        inode.gid = dir.gid;
        if is_dir {
            inode.mode |= 0o2000;
        }
    }
    if is_dir && dir.nlink >= LINKS_MAX {
        return Err(Errno::MLINK);
    }
    let ino = core.alloc_inode(parent, is_dir)?;
    if let Some(fill) = first_block {
        let hint = core.inode_group_data(ino);
        let block = match core.alloc_block(hint) {
            Ok(b) => b,
            Err(e) => {
                core.free_inode(ino, is_dir)?;
                return Err(e);
            }
        };
        fill(core, block, ino)?;
        core.ordered(u64::from(block))?;
        inode.direct[0] = block;
        inode.blocks_512 = 8;
    }
    let block = core.put_inode(ino, &inode)?;
    core.ordered(block)?;
    if is_dir {
        dir.nlink += 1;
        let block = core.put_inode(parent, &dir)?;
        core.ordered(block)?;
    }
    if let Err(e) = add_entry(core, parent, &mut dir, name.as_bytes(), ino, dt_of(inode.mode)) {
        // No room for the entry: nothing names the inode, give it back.
        let _ = free_inode(core, ino, inode);
        return Err(e);
    }
    hold(core, ino);
    Ok(attr_of(ino, &inode))
}

/// Whether directory `ancestor` is `dir` or above it (walking `..`).
fn is_ancestor(core: &mut Core, ancestor: u32, mut dir: u32) -> Result<bool> {
    for _ in 0..=core.sb.total_inodes() {
        if dir == ancestor {
            return Ok(true);
        }
        if dir == ROOT_INO {
            return Ok(false);
        }
        let mut inode = dir_inode(core, dir)?;
        dir = core.dir_lookup(dir, &mut inode, b"..")?.ok_or(Errno::IO)?.ino;
    }
    Err(Errno::IO)
}

impl FileSystem for Ffs {
    fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Attr> {
        check_name(name)?;
        let mut core = self.lock();
        let parent = core.valid_ino(parent)?;
        let mut dir = dir_inode(&mut core, parent)?;
        let found = core.dir_lookup(parent, &mut dir, name.as_bytes())?.ok_or(Errno::NOENT)?;
        let inode = core.inode(found.ino)?;
        hold(&mut core, found.ino);
        Ok(attr_of(found.ino, &inode))
    }

    fn forget(&self, ino: Ino, count: u64) {
        let mut core = self.lock();
        let Ok(ino) = core.valid_ino(ino) else { return };
        let Some(refs) = core.refs.get_mut(&ino) else { return };
        refs.lookups = refs.lookups.saturating_sub(count);
        if refs.lookups == 0 && refs.opens == 0 {
            core.refs.remove(&ino);
            if let Ok(inode) = core.inode(ino) {
                if inode.nlink == 0 {
                    let _ = free_inode(&mut core, ino, inode);
                }
            }
        }
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        Ok(attr_of(ino, &core.inode(ino)?))
    }

    fn setattr(&self, ino: Ino, changes: &SetAttr) -> Result<Attr> {
        let mut core = self.lock();
        core.check_alive()?;
        let ino = core.valid_ino(ino)?;
        let mut inode = core.inode(ino)?;
        if let Some(size) = changes.size {
            truncate(&mut core, ino, &mut inode, size)?;
        }
        inode.mode = changes.perm.map_or(inode.mode, |p| (inode.mode & S_IFMT) | (p & 0o7777));
        inode.uid = changes.uid.unwrap_or(inode.uid);
        inode.gid = changes.gid.unwrap_or(inode.gid);
        if let Some(t) = changes.atime {
            inode.times[0] = (t.secs, t.nanos);
        }
        if let Some(t) = changes.mtime {
            inode.times[1] = (t.secs, t.nanos);
        }
        inode.times[2] = now();
        core.put_inode(ino, &inode)?;
        Ok(attr_of(ino, &inode))
    }

    fn create(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        let mut core = self.lock();
        let parent = core.valid_ino(parent)?;
        make(&mut core, parent, name, new_inode(S_IFREG, owner), None)
    }

    fn mkdir(&self, parent: Ino, name: &OsStr, owner: Owner) -> Result<Attr> {
        let mut core = self.lock();
        let parent = core.valid_ino(parent)?;
        let mut inode = new_inode(S_IFDIR, owner);
        inode.nlink = 2;
        inode.size = BLOCK_BYTES as u64;
        let fill = move |core: &mut Core, block: u32, ino: u32| core.dir_init(block, ino, parent);
        make(&mut core, parent, name, inode, Some(&fill))
    }

    /// A special file is made as an empty file is (its inode, then the
    /// entry naming it, in every policy's order): no block, its kind in
    /// its mode, a device's number in `rdev`.
    fn mknod(&self, parent: Ino, name: &OsStr, kind: FileType, rdev: u32, owner: Owner) -> Result<Attr> {
        match kind {
            FileType::Dir => return Err(Errno::PERM),
            FileType::Symlink => return Err(Errno::INVAL),
            _ => {}
        }
        let mut inode = new_inode(mode_of(kind), owner);
        if kind.is_device() {
            inode.rdev = rdev;
        }
        let mut core = self.lock();
        let parent = core.valid_ino(parent)?;
        make(&mut core, parent, name, inode, None)
    }

    fn symlink(&self, parent: Ino, name: &OsStr, target: &OsStr, owner: Owner) -> Result<Attr> {
        let target = target.as_bytes().to_vec();
        if target.is_empty() || target.len() >= BLOCK_BYTES {
            return Err(if target.is_empty() { Errno::NOENT } else { Errno::NAMETOOLONG });
        }
        let mut core = self.lock();
        let parent = core.valid_ino(parent)?;
        let mut inode = new_inode(S_IFLNK, Owner { perm: 0o777, ..owner });
        inode.size = target.len() as u64;
        if target.len() <= INLINE_SYMLINK_BYTES {
            inode.inline_target = target;
            return make(&mut core, parent, name, inode, None);
        }
        let fill = move |core: &mut Core, block: u32, _: u32| {
            core.order.set_kind(u64::from(block), crate::softdep::Kind::Symlink);
            match core.cache.fresh(&mut core.order, u64::from(block)) {
                Ok(bytes) => {
                    bytes[..target.len()].copy_from_slice(&target);
                    Ok(())
                }
                Err(e) => Err(io_failed(core, e)),
            }
        };
        make(&mut core, parent, name, inode, Some(&fill))
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let mut guard = self.lock();
        let core = &mut *guard;
        let ino = core.valid_ino(ino)?;
        let inode = core.inode(ino)?;
        if inode.mode & S_IFMT != S_IFLNK {
            return Err(Errno::INVAL);
        }
        if inode.size as usize <= INLINE_SYMLINK_BYTES {
            return Ok(inode.inline_target);
        }
        if inode.direct[0] == 0 {
            return Err(Errno::IO); // a long target with no block: damaged
        }
        // Shorter than a block: a bound of the inode's decoder.
        match core.cache.read(&mut core.order, u64::from(inode.direct[0])) {
            Ok(bytes) => Ok(bytes[..inode.size as usize].to_vec()),
            Err(e) => Err(io_failed(core, e)),
        }
    }

    fn link(&self, ino: Ino, new_parent: Ino, new_name: &OsStr) -> Result<Attr> {
        check_name(new_name)?;
        let mut core = self.lock();
        core.check_alive()?;
        let (ino, new_parent) = (core.valid_ino(ino)?, core.valid_ino(new_parent)?);
        let mut inode = core.inode(ino)?;
        if inode.mode & S_IFMT == S_IFDIR {
            return Err(Errno::PERM);
        }
        if inode.nlink >= LINKS_MAX {
            return Err(Errno::MLINK);
        }
        let mut dir = dir_inode(&mut core, new_parent)?;
        if core.dir_lookup(new_parent, &mut dir, new_name.as_bytes())?.is_some() {
            return Err(Errno::EXIST);
        }
        inode.nlink += 1;
        inode.times[2] = now();
        let block = core.put_inode(ino, &inode)?;
        core.ordered(block)?;
        if let Err(e) =
            add_entry(&mut core, new_parent, &mut dir, new_name.as_bytes(), ino, dt_of(inode.mode))
        {
            inode.nlink -= 1;
            core.put_inode(ino, &inode)?;
            return Err(e);
        }
        hold(&mut core, ino);
        Ok(attr_of(ino, &inode))
    }

    fn unlink(&self, parent: Ino, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let mut core = self.lock();
        core.check_alive()?;
        let parent = core.valid_ino(parent)?;
        let mut dir = dir_inode(&mut core, parent)?;
        let found = core.dir_lookup(parent, &mut dir, name.as_bytes())?.ok_or(Errno::NOENT)?;
        let inode = core.inode(found.ino)?;
        if inode.mode & S_IFMT == S_IFDIR {
            return Err(Errno::ISDIR);
        }
        let block = core.dir_remove(parent, &mut dir, name.as_bytes(), found.offset)?;
        core.ordered(block)?;
        touch(&mut dir);
        core.put_inode(parent, &dir)?;
        unlinked(&mut core, found.ino, inode, 1)
    }

    fn rmdir(&self, parent: Ino, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let mut core = self.lock();
        core.check_alive()?;
        let parent = core.valid_ino(parent)?;
        let mut dir = dir_inode(&mut core, parent)?;
        let found = core.dir_lookup(parent, &mut dir, name.as_bytes())?.ok_or(Errno::NOENT)?;
        let mut victim = dir_inode(&mut core, found.ino)?;
        if !core.dir_is_empty(found.ino, &mut victim)? {
            return Err(Errno::NOTEMPTY);
        }
        let block = core.dir_remove(parent, &mut dir, name.as_bytes(), found.offset)?;
        core.ordered(block)?;
        // Under `softdep`, the parent's count drops on the disk once the
        // directory (whose `..` it counts) is unattached there: its entry
        // gone.
        let at = (found.offset % BLOCK_BYTES as u64) as usize;
        core.order.removed(parent, 1, Gone { block, at, names: found.ino });
        dir.nlink -= 1;
        touch(&mut dir);
        let block = core.put_inode(parent, &dir)?;
        core.ordered(block)?;
        core.drop_index(found.ino);
        unlinked(&mut core, found.ino, victim, 2)
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
        let mut core = self.lock();
        core.check_alive()?;
        let (parent, new_parent) = (core.valid_ino(parent)?, core.valid_ino(new_parent)?);
        let (name, new_name) = (name.as_bytes(), new_name.as_bytes());
        if core.order.is_logged() && mode == RenameMode::Replace {
            // A name that is not there, or not a directory, is the
            // rename's own error to give.
            if let Err(e) = core.write_back_replacing(parent, name, new_parent, new_name) {
                if core.failed.is_some() {
                    return Err(e);
                }
            }
        }
        match mode {
            RenameMode::Exchange => exchange(&mut core, parent, name, new_parent, new_name),
            _ => rename(&mut core, parent, name, new_parent, new_name, mode == RenameMode::NoReplace),
        }
    }

    fn open(&self, ino: Ino) -> Result<()> {
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        core.inode(ino)?;
        core.refs.entry(ino).or_default().opens += 1;
        Ok(())
    }

    fn release(&self, ino: Ino) {
        let mut core = self.lock();
        let Ok(ino) = core.valid_ino(ino) else { return };
        if let Some(refs) = core.refs.get_mut(&ino) {
            refs.opens = refs.opens.saturating_sub(1);
        }
        if !core.is_referenced(ino) {
            core.refs.remove(&ino);
            if let Ok(inode) = core.inode(ino) {
                if inode.nlink == 0 {
                    let _ = free_inode(&mut core, ino, inode);
                }
            }
        }
    }

    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut guard = self.lock();
        let core = &mut *guard;
        let ino = core.valid_ino(ino)?;
        let mut inode = core.inode(ino)?;
        file_only(&inode)?;
        let end = offset.saturating_add(buf.len() as u64).min(inode.size);
        let mut at = offset;
        while at < end {
            let (n, within) = (at / BLOCK_BYTES as u64, (at % BLOCK_BYTES as u64) as usize);
            let len = (BLOCK_BYTES - within).min((end - at) as usize);
            let out = &mut buf[(at - offset) as usize..(at - offset) as usize + len];
            match core.bmap(ino, &mut inode, n, false)? {
                None => out.fill(0),
                Some((block, _)) => match core.cache.read(&mut core.order, u64::from(block)) {
                    Ok(bytes) => out.copy_from_slice(&bytes[within..within + len]),
                    Err(e) => return Err(io_failed(core, e)),
                },
            }
            at += len as u64;
        }
        Ok(end.saturating_sub(offset) as usize)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        let mut core = self.lock();
        core.check_alive()?;
        let ino = core.valid_ino(ino)?;
        let mut inode = core.inode(ino)?;
        file_only(&inode)?;
        if data.is_empty() {
            return Ok(0);
        }
        fsapi::check_file_end(offset, data.len() as u64, FILE_BYTES_MAX)?;
        let mut fill = crate::range::Fill::data(data);
        let result = core.fill(ino, &mut inode, offset, data.len() as u64, &mut fill);
        let done = fill.done as usize;
        if done > 0 {
            inode.size = inode.size.max(offset + done as u64);
            touch(&mut inode);
        }
        core.put_inode(ino, &inode)?;
        match result {
            Err(e) if done == 0 => Err(e),
            _ => Ok(done),
        }
    }

    fn readdir(&self, ino: Ino, offset: u64, entry: &mut dyn FnMut(DirEntry) -> bool) -> Result<()> {
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        let mut dir = dir_inode(&mut core, ino)?;
        core.dir_walk(ino, &mut dir, offset, &mut |rec, at| {
            if rec.name == b"." || rec.name == b".." {
                return true;
            }
            let kind = kind_of_dt(rec.kind);
            entry(DirEntry { ino: u64::from(rec.ino), kind, name: rec.name.to_vec(), next: at + 1 })
        })
    }

    /// Under `sync` and `async`, the file's own dirty blocks and inode
    /// (`Core::sync_file`); under `softdep`, those and what soft updates'
    /// rules make them wait on, its new names among them
    /// (`Core::softdep_sync_file`). Under `log`, one commit: it is
    /// already jbd2's fsync (the ordered data, then the metadata).
    /// `data_only` (fdatasync) writes the inode all the same: telling a
    /// change of times alone from one of size or pointers would need a
    /// record of what changed, and the inode block is one write.
    fn fsync(&self, ino: Ino, _data_only: bool) -> Result<()> {
        self.fsync_file(ino)
    }

    fn statfs(&self) -> Result<StatFs> {
        let core = self.lock();
        let sb = &core.sb;
        Ok(StatFs {
            block_bytes: BLOCK_BYTES as u32,
            blocks: sb.blocks,
            blocks_free: sb.free_blocks,
            blocks_avail: sb.free_blocks,
            files: sb.total_inodes(),
            files_free: sb.free_inodes,
            name_bytes_max: fsapi::NAME_BYTES_MAX as u32,
        })
    }

    fn sync(&self) -> Result<()> {
        self.sync_all().map_err(|e| if e.is_out_of_space() { Errno::NOSPC } else { Errno::IO })
    }

    /// Every block the inode maps (docs/formats.md, "Inode").
    fn file_bytes_max(&self) -> u64 {
        FILE_BYTES_MAX
    }

    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        let mut core = self.lock();
        core.check_alive()?;
        let ino = core.valid_ino(ino)?;
        let mut inode = core.inode(ino)?;
        file_only(&inode)?;
        let end = fsapi::fallocate_end(offset, len)?;
        core.fallocate(ino, &mut inode, mode, offset, end)?;
        touch(&mut inode);
        core.put_inode(ino, &inode)?;
        Ok(())
    }

    fn lseek(&self, ino: Ino, offset: u64, whence: Whence) -> Result<u64> {
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        let inode = core.inode(ino)?;
        file_only(&inode)?;
        core.seek(&inode, offset, whence)
    }

    /// A read and a write a chunk at a time, each a call of its own (the
    /// lock let go between, and under `log` each write's transaction
    /// whole): the blocks are copied, never shared. A failure after some
    /// bytes went is the count of those, as a short write.
    fn copy_file_range(&self, from: Ino, offset_in: u64, to: Ino, offset_out: u64, len: u64) -> Result<u64> {
        const CHUNK_BYTES: u64 = 1 << 20;
        let count = fsapi::copy_len(&self.getattr(from)?, offset_in, &self.getattr(to)?, offset_out, len)?;
        let mut buf = vec![0u8; count.min(CHUNK_BYTES) as usize];
        let mut done = 0u64;
        while done < count {
            let want = (count - done).min(CHUNK_BYTES) as usize;
            let copied = self
                .read(from, offset_in + done, &mut buf[..want])
                .and_then(|n| self.write(to, offset_out + done, &buf[..n]).map(|w| (n, w)));
            match copied {
                Ok((n, written)) => {
                    done += written as u64;
                    if n == 0 || written < n {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    fn getxattr(&self, ino: Ino, name: &OsStr) -> Result<Vec<u8>> {
        let name = XattrName::parse(name.as_bytes())?;
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        let inode = core.inode(ino)?;
        crate::xattr::get(&mut core, ino, &inode, kind_of(inode.mode), &name)
    }

    fn setxattr(&self, ino: Ino, name: &OsStr, value: &[u8], flags: XattrFlags) -> Result<()> {
        let name = XattrName::parse(name.as_bytes())?;
        fsapi::xattr::check_value(value)?;
        let mut core = self.lock();
        core.check_alive()?;
        let ino = core.valid_ino(ino)?;
        let mut inode = core.inode(ino)?;
        let kind = kind_of(inode.mode);
        crate::xattr::set(&mut core, ino, &mut inode, kind, (name, value, flags))
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        let inode = core.inode(ino)?;
        Ok(fsapi::xattr::list_bytes(core.xattrs_of(ino, &inode)?.entries.keys()))
    }

    fn removexattr(&self, ino: Ino, name: &OsStr) -> Result<()> {
        let name = XattrName::parse(name.as_bytes())?;
        let mut core = self.lock();
        core.check_alive()?;
        let ino = core.valid_ino(ino)?;
        let mut inode = core.inode(ino)?;
        let kind = kind_of(inode.mode);
        crate::xattr::remove(&mut core, ino, &mut inode, kind, &name)
    }
}

/// A regular file's data calls refuse a directory (EISDIR), a symlink
/// and a FIFO, device or socket (EINVAL: the kernel moves their bytes,
/// and through FUSE never asks the file system for them).
fn file_only(inode: &DiskInode) -> Result<()> {
    match inode.mode & S_IFMT {
        S_IFREG => Ok(()),
        S_IFDIR => Err(Errno::ISDIR),
        _ => Err(Errno::INVAL),
    }
}

/// Sets a file's size: blocks past it freed (pointers cleared on disk
/// first under `sync`), the tail of the last block zeroed.
fn truncate(core: &mut Core, ino: u32, inode: &mut DiskInode, size: u64) -> Result<()> {
    file_only(inode)?;
    fsapi::check_file_end(size, 0, FILE_BYTES_MAX)?;
    if size < inode.size {
        let keep = size.div_ceil(BLOCK_BYTES as u64);
        core.shed_in_chunks(ino, inode, keep, FILE_BLOCKS_MAX)?;
        let within = (size % BLOCK_BYTES as u64) as usize;
        if within != 0 {
            if let Some((block, _)) = core.bmap(ino, inode, size / BLOCK_BYTES as u64, false)? {
                match core.cache.modify_data(&mut core.order, u64::from(block)) {
                    Ok(bytes) => bytes[within..].fill(0),
                    Err(e) => return Err(io_failed(core, e)),
                }
            }
        }
        inode.size = size;
        core.release_blocks(ino, inode, keep, FILE_BLOCKS_MAX)?;
    }
    inode.size = size;
    touch(inode);
    Ok(())
}

/// rename(2), in FFS's order so that a crash anywhere leaves only link
/// counts too high (which preen lowers): the source's count raised, the
/// new entry, the old entry removed, a moved directory's `..` pointed at
/// its new parent before the old parent's count drops, the source's
/// count lowered again.
///
/// Long on purpose: those steps are the crash-safety argument, and they
/// read in order in one function; each is a call already.
fn rename(
    core: &mut Core,
    parent: u32,
    name: &[u8],
    new_parent: u32,
    new_name: &[u8],
    no_replace: bool,
) -> Result<()> {
    let Some(plan) = plan_rename(core, parent, name, new_parent, new_name, no_replace)? else {
        return Ok(());
    };
    let Rename { src, dst, moving_dir } = plan;
    let across = moving_dir && parent != new_parent;
    let mut to_dir = dir_inode(core, new_parent)?;
    if across && dst.is_none() && to_dir.nlink >= LINKS_MAX {
        return Err(Errno::MLINK);
    }
    if across {
        core.mark_moving()?;
    }
    // 0. The source counts the entry it is about to gain.
    add_links(core, src.ino, 1)?;
    if across && dst.is_none() {
        to_dir.nlink += 1;
        let block = core.put_inode(new_parent, &to_dir)?;
        core.ordered(block)?;
    }
    // 1. The new entry.
    let mut replaced_at = None;
    let new_block = match &dst {
        Some(dst) => {
            let block = core.dir_retarget(new_parent, &mut to_dir, dst.offset, src.ino, src.kind)?;
            core.ordered(block)?;
            replaced_at = Some((block, (dst.offset % BLOCK_BYTES as u64) as usize));
            if let Some(index) = core.dir_index.get_mut(&new_parent) {
                index.insert(new_name.to_vec(), dst.offset);
            }
            block
        }
        None => add_entry(core, new_parent, &mut to_dir, new_name, src.ino, src.kind)?,
    };
    // 2. The old entry goes (re-read: the new entry may share its block).
    let mut from_dir = dir_inode(core, parent)?;
    let old_block = core.dir_remove(parent, &mut from_dir, name, src.offset)?;
    core.ordered(old_block)?;
    // 3. A moved directory's `..`, then the old parent's count.
    if across {
        let mut moved = core.inode(src.ino)?;
        let dotdot = core.dir_lookup(src.ino, &mut moved, b"..")?.ok_or(Errno::IO)?;
        let block = core.dir_retarget(src.ino, &mut moved, dotdot.offset, new_parent, DT_DIR)?;
        core.ordered(block)?;
        core.order.moved(Move {
            ino: src.ino,
            from: parent,
            to: new_parent,
            old: (old_block, in_block(src.offset)),
            new: new_block,
            dotdot: (block, in_block(dotdot.offset)),
        });
    }
    let mut from_dir = dir_inode(core, parent)?;
    touch(&mut from_dir);
    from_dir.nlink -= u16::from(across);
    let block = core.put_inode(parent, &from_dir)?;
    if across {
        core.ordered(block)?;
    }
    // 4. The source's count back; the inode that was replaced.
    add_links(core, src.ino, -1)?;
    match (dst, replaced_at) {
        (Some(dst), Some((block, at))) => {
            replaced(core, dst.ino, new_parent, parent == new_parent, Gone { block, at, names: dst.ino })
        }
        _ => Ok(()),
    }
}

/// The byte within its block of a directory offset.
fn in_block(offset: u64) -> usize {
    (offset % BLOCK_BYTES as u64) as usize
}

/// Raises (or lowers) inode `ino`'s link count by `by`, written at once
/// under `sync` when raised (a count too low is damage preen leaves).
fn add_links(core: &mut Core, ino: u32, by: i32) -> Result<()> {
    let mut inode = core.inode(ino)?;
    inode.nlink = (i32::from(inode.nlink) + by) as u16;
    inode.times[2] = now();
    let block = core.put_inode(ino, &inode)?;
    if by > 0 {
        core.ordered(block)?;
    }
    Ok(())
}

/// What a rename moves and what it replaces.
struct Rename {
    src: crate::dir::Found,
    dst: Option<crate::dir::Found>,
    moving_dir: bool,
}

/// What a rename reads first: the source's entry (ENOENT without one) and
/// the destination's, if there is one, with both directories' inodes.
struct Ends {
    from_dir: DiskInode,
    src: crate::dir::Found,
    to_dir: DiskInode,
    dst: Option<crate::dir::Found>,
}

fn ends(core: &mut Core, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> Result<Ends> {
    let mut from_dir = dir_inode(core, parent)?;
    let src = core.dir_lookup(parent, &mut from_dir, name)?.ok_or(Errno::NOENT)?;
    let mut to_dir = dir_inode(core, new_parent)?;
    let dst = core.dir_lookup(new_parent, &mut to_dir, new_name)?;
    Ok(Ends { from_dir, src, to_dir, dst })
}

/// Every check rename(2) makes (and with `no_replace` renameat2's
/// `RENAME_NOREPLACE`), in Linux's order, before anything is written; None
/// when there is nothing to do (a name onto itself).
fn plan_rename(
    core: &mut Core,
    parent: u32,
    name: &[u8],
    new_parent: u32,
    new_name: &[u8],
    no_replace: bool,
) -> Result<Option<Rename>> {
    let Ends { src, dst, .. } = ends(core, parent, name, new_parent, new_name)?;
    if no_replace && dst.is_some() {
        return Err(Errno::EXIST);
    }
    let moving_dir = core.inode(src.ino)?.mode & S_IFMT == S_IFDIR;
    if moving_dir && is_ancestor(core, src.ino, new_parent)? {
        return Err(Errno::INVAL);
    }
    if let Some(dst) = &dst {
        if dst.ino == src.ino {
            return Ok(None);
        }
        if dst.kind == DT_DIR && is_ancestor(core, dst.ino, parent)? {
            return Err(Errno::NOTEMPTY);
        }
        let mut old = core.inode(dst.ino)?;
        match (moving_dir, old.mode & S_IFMT == S_IFDIR) {
            (true, false) => return Err(Errno::NOTDIR),
            (false, true) => return Err(Errno::ISDIR),
            (true, true) if !core.dir_is_empty(dst.ino, &mut old)? => return Err(Errno::NOTEMPTY),
            _ => {}
        }
    }
    Ok(Some(Rename { src, dst, moving_dir }))
}

/// The inode a rename replaced loses its entry: a directory also its `..`
/// in the parent (unless a directory moved in from elsewhere took its
/// place there: `same_parent` false), which under `softdep` drops on the
/// disk once the entry, `gone`, no longer names it there.
fn replaced(core: &mut Core, ino: u32, parent: u32, same_parent: bool, gone: Gone) -> Result<()> {
    let old = core.inode(ino)?;
    if old.mode & S_IFMT != S_IFDIR {
        return unlinked(core, ino, old, 1);
    }
    let mut dir = dir_inode(core, parent)?;
    core.order.removed(parent, 1, gone);
    dir.nlink -= u16::from(same_parent);
    let block = core.put_inode(parent, &dir)?;
    core.ordered(block)?;
    core.drop_index(ino);
    unlinked(core, ino, old, 2)
}

/// Which entries an exchange swaps, and what they name.
struct Exchange {
    /// The entry in the first directory, and whether it names a directory.
    a: crate::dir::Found,
    a_dir: bool,
    /// The entry in the second.
    b: crate::dir::Found,
    b_dir: bool,
}

/// Every check renameat2's `RENAME_EXCHANGE` makes, in Linux's order,
/// before anything is written; None when both names are one inode.
fn plan_exchange(
    core: &mut Core,
    parent: u32,
    name: &[u8],
    new_parent: u32,
    new_name: &[u8],
) -> Result<Option<Exchange>> {
    let Ends { from_dir, src: a, to_dir, dst } = ends(core, parent, name, new_parent, new_name)?;
    let b = dst.ok_or(Errno::NOENT)?;
    let a_dir = core.inode(a.ino)?.mode & S_IFMT == S_IFDIR;
    let b_dir = core.inode(b.ino)?.mode & S_IFMT == S_IFDIR;
    if (a_dir && is_ancestor(core, a.ino, new_parent)?) || (b_dir && is_ancestor(core, b.ino, parent)?) {
        return Err(Errno::INVAL);
    }
    if a.ino == b.ino {
        return Ok(None);
    }
    // A parent that gains a directory (one moves in, none out) gains a link.
    let across = parent != new_parent;
    let full = |dir: &DiskInode| dir.nlink >= LINKS_MAX;
    if across && ((a_dir && !b_dir && full(&to_dir)) || (b_dir && !a_dir && full(&from_dir))) {
        return Err(Errno::MLINK);
    }
    Ok(Some(Exchange { a, a_dir, b, b_dir }))
}

/// renameat2's `RENAME_EXCHANGE`: entry `name` in `parent` and `new_name`
/// in `new_parent` swap the inodes they name, each entry left in its place,
/// in rename's order (every count raised before an entry that needs it,
/// lowered only after): both inodes' counts and a parent's that gains a
/// directory raised, the two entries rewritten, a moved directory's `..`
/// pointed at its new parent, then the parent that lost a directory and
/// the two inodes lowered again. Under `sync` each write is durable before
/// the next, and two entries in one directory block go in one write; in
/// two blocks, a crash between their writes leaves one inode named twice
/// and the other by neither (with its count raised: preen reconnects it
/// to lost+found), never an entry lost or a count too low.
fn exchange(core: &mut Core, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> Result<()> {
    let Some(Exchange { a, a_dir, b, b_dir }) = plan_exchange(core, parent, name, new_parent, new_name)?
    else {
        return Ok(());
    };
    let across = parent != new_parent;
    if across && (a_dir || b_dir) {
        core.mark_moving()?;
    }
    // The parents whose count a directory moving across changes.
    let (gains, loses) = match (across, a_dir, b_dir) {
        (true, true, false) => (Some(new_parent), Some(parent)),
        (true, false, true) => (Some(parent), Some(new_parent)),
        _ => (None, None),
    };
    // 0. Each inode counts the entry it is about to gain; so does a parent
    // for the `..` of a directory moving in.
    add_links(core, a.ino, 1)?;
    add_links(core, b.ino, 1)?;
    if let Some(gains) = gains {
        add_links(core, gains, 1)?;
    }
    // 1. The two entries, the destination's first, as rename's new entry.
    let mut to_dir = dir_inode(core, new_parent)?;
    let b_block = core.dir_retarget(new_parent, &mut to_dir, b.offset, a.ino, a.kind)?;
    let mut from_dir = dir_inode(core, parent)?;
    let a_block = core.dir_retarget(parent, &mut from_dir, a.offset, b.ino, b.kind)?;
    core.ordered(b_block)?;
    if a_block != b_block {
        core.ordered(a_block)?;
    }
    // 2. A moved directory's `..`, then the count of the parent it left.
    let moved_dirs = [(a.ino, a_dir, new_parent), (b.ino, b_dir, parent)];
    for (moved, _, to) in moved_dirs.into_iter().filter(|&(_, is_dir, _)| across && is_dir) {
        let mut dir = core.inode(moved)?;
        let dotdot = core.dir_lookup(moved, &mut dir, b"..")?.ok_or(Errno::IO)?;
        let block = core.dir_retarget(moved, &mut dir, dotdot.offset, to, DT_DIR)?;
        core.ordered(block)?;
        // Its old entry is the other's now, its new one the other's old.
        let (old, new) =
            if moved == a.ino { ((a_block, a.offset), b_block) } else { ((b_block, b.offset), a_block) };
        let from = if to == parent { new_parent } else { parent };
        core.order.moved(Move {
            ino: moved,
            from,
            to,
            old: (old.0, in_block(old.1)),
            new,
            dotdot: (block, in_block(dotdot.offset)),
        });
    }
    let parents: &[u32] = if across { &[parent, new_parent] } else { &[parent] };
    for &dir in parents {
        let mut inode = dir_inode(core, dir)?;
        touch(&mut inode);
        inode.nlink -= u16::from(loses == Some(dir));
        let block = core.put_inode(dir, &inode)?;
        if loses == Some(dir) {
            core.ordered(block)?;
        }
    }
    // 3. The inodes' counts back.
    add_links(core, a.ino, -1)?;
    add_links(core, b.ino, -1)
}
