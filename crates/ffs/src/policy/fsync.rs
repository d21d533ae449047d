//! An fsync as each policy has it: under `sync` and `async`, what one
//! file needs written and flushed, not the whole cache (a sync's); under
//! `softdep`, that and what the rules make it wait on; under `log`, one
//! commit (jbd2's).

use std::sync::{Arc, MutexGuard};

use device::Device;
use fsapi::Errno;
use rustc_hash::FxHashSet as HashSet;

use crate::bmap::Mapped;
use crate::core::{io_failed, Core};
use crate::format::{DiskInode, INLINE_SYMLINK_BYTES, ROOT_INO, S_IFDIR, S_IFLNK};
use crate::policy::{CallerFlush, Ordering};
use crate::softdep::Blocks;
use crate::Ffs;

/// Under `softdep`, write-and-flush passes a file's fsync takes at most
/// before it writes the whole cache instead. Three suffice for a new
/// file (its maps and bitmaps, then its inode, then its name).
const PASSES_MAX: usize = 8;

/// A new name of a file (or of a directory on the way to it): the inode
/// named, its directory, and the directory block holding the entry.
type NewName = (u32, u32, u64);

/// What a softdep fsync of a file writes in each pass, and what it
/// checks on the disk after each flush.
pub struct SoftdepFsync {
    ino: u32,
    mapped: Mapped,
    names: Vec<NewName>,
    listed: Vec<u64>,
}

impl Core {
    /// Under `sync` and `async`, an fsync's write-back: the dirty blocks
    /// of file `ino` (its contents, then its indirect blocks), then the
    /// inode table block holding its inode, then one flush. A special
    /// file has no blocks: its inode alone.
    ///
    /// That is all `sync` needs for the file to be found whole after a
    /// crash: its name, its new indirect blocks' zeros and every ordering
    /// point went out at the call that made them. Under `async` the name
    /// of a file made since the last sync may still be unwritten (FFS
    /// `-o async` promises nothing after a crash). The bitmaps and
    /// summary counts stay behind, as a full sync's would be repaired by
    /// preen anyway. Writes them and counts the flush; returns the device
    /// to flush, which the caller does with the mount's lock let go (the
    /// writes are done: a flush issued by anyone after them covers them),
    /// so that the other calls go on meanwhile.
    pub fn write_file_for_fsync(&mut self, ino: u32) -> Result<Arc<dyn Device>, Errno> {
        debug_assert!(matches!(self.order, Ordering::Sync | Ordering::Async), "the others sync whole");
        let inode = self.inode(ino)?;
        let mapped = self.mapped_blocks(&inode)?;
        let (inode_block, _) = self.sb.inode_place(ino);
        for blocks in [&mapped.contents, &mapped.pointers, &vec![inode_block]] {
            if let Err(e) = self.cache.write_listed(&mut self.order, blocks) {
                return Err(io_failed(self, e));
            }
        }
        self.cache.stats.flushes += 1;
        Ok(Arc::clone(self.cache.device()))
    }

    /// Under `softdep`, an fsync: what the file's durability needs,
    /// written and flushed in passes until it is on the disk, as soft
    /// updates' rules let each write go (FreeBSD's `softdep_fsync` and
    /// `ffs_syncvnode`, by comparison of memory and the disk's copies
    /// rather than a walk of dependency records):
    ///
    /// - its contents and indirect blocks, and its inode as memory holds
    ///   it (no pointer rolled back: each block's bitmap and contents are
    ///   on the disk, rule 1), with its attribute block;
    /// - each of its names made since they were last on the disk, and,
    ///   up the tree, the names of new directories on the way (rule 3:
    ///   each waits for its inode, and a directory's for its parent's
    ///   count);
    /// - for a directory, the inodes its new entries name, so that every
    ///   entry goes;
    /// - the bitmaps of every group the blocks and inodes above lie in
    ///   (what rules 1 and 2 wait on; another group's are no business of
    ///   this file's), and the header of such a group whose count of
    ///   inode slots was raised.
    ///
    /// Every write goes as the rules allow (rolled back where they must),
    /// so nothing is ever written out of order; what a pass could not
    /// write complete goes in the next, after the flush its dependencies
    /// needed. Each pass's flush goes with the mount's lock let go
    /// ([`Ffs::flushed_through`]): the other calls go on meanwhile,
    /// another fsync waits for it and shares the next, and a sync that
    /// needs it done first flushes again itself. If the file
    /// is not on the disk after `PASSES_MAX` passes (a wait on a block
    /// outside these, such as a removal elsewhere), the whole cache is
    /// synced, as before: always right, only slower.
    pub fn softdep_fsync_plan(&mut self, ino: u32) -> Result<SoftdepFsync, Errno> {
        debug_assert!(self.order.holds_back());
        let inode = self.inode(ino)?;
        let mapped = self.mapped_blocks(&inode)?;
        let names = self.new_names(ino);
        let listed = self.fsync_listed(ino, &inode, &mapped, &names)?;
        Ok(SoftdepFsync { ino, mapped, names, listed })
    }

    /// A pass of a softdep fsync up to its flush: the listed blocks that
    /// are dirty written as the rules allow. Returns the seal that covers
    /// them, for [`Ffs::flushed_through`].
    pub fn softdep_fsync_write(&mut self, plan: &SoftdepFsync) -> Result<u64, Errno> {
        match self.cache.write_listed(&mut self.order, &plan.listed) {
            Ok(_) => Ok(self.order.next_seal()),
            Err(e) => Err(io_failed(self, e)),
        }
    }

    /// A caller's flush after seal `seal` returned (`flushed`): what
    /// waited on it run (unless a call did so already), the blocks it
    /// released cleared in the maps.
    fn caller_flushed(&mut self, seal: u64, flushed: device::Result<()>) -> Result<(), Errno> {
        if let Err(e) = flushed {
            return Err(io_failed(self, e));
        }
        self.check_alive()?;
        self.order.caller_flushed(&mut self.cache, seal);
        self.apply_released()
    }

    /// After a pass's flush: whether the file is on the disk now.
    pub fn softdep_fsync_done(&mut self, plan: &SoftdepFsync) -> Result<bool, Errno> {
        if !self.file_on_disk(plan.ino, &plan.mapped, &plan.names) {
            return Ok(false);
        }
        if let Some(sd) = self.order.softdep_mut() {
            sd.stats.file_fsyncs += 1;
        }
        self.lower_moving_mark()?;
        Ok(true)
    }

    /// A softdep fsync whose passes did not get the file on the disk: the
    /// whole cache synced.
    pub fn softdep_fsync_whole(&mut self) -> Result<(), Errno> {
        if let Some(sd) = self.order.softdep_mut() {
            sd.stats.whole_fsyncs += 1;
        }
        self.softdep_sync()
    }

    /// The names made for `ino` that the disk does not hold yet, and up
    /// the tree those of each new directory on the way.
    fn new_names(&mut self, ino: u32) -> Vec<NewName> {
        let Some(sd) = self.order.softdep() else { return Vec::new() };
        let blocks: &dyn Blocks = &self.cache;
        let mut out = Vec::new();
        let mut todo = vec![ino];
        let mut seen = HashSet::default();
        while let Some(child) = todo.pop() {
            if child == ROOT_INO || !seen.insert(child) {
                continue;
            }
            for &(dir, block) in sd.names_of(child) {
                if sd.block_names(blocks, block, child, false) && !sd.block_names(blocks, block, child, true)
                {
                    out.push((child, dir, block));
                    todo.push(dir);
                }
            }
        }
        out
    }

    /// The blocks a softdep fsync of `ino` writes (`softdep_sync_file`):
    /// those of them that are dirty go in each pass.
    fn fsync_listed(
        &mut self,
        ino: u32,
        inode: &DiskInode,
        mapped: &Mapped,
        names: &[NewName],
    ) -> Result<Vec<u64>, Errno> {
        let mut listed: Vec<u64> = mapped.contents.iter().chain(&mapped.pointers).copied().collect();
        listed.extend(self.inode_needs(ino, inode));
        for &(child, dir, block) in names {
            listed.push(block);
            let child_inode = self.inode(child)?;
            listed.extend(self.inode_needs(child, &child_inode));
            listed.push(self.sb.inode_place(dir).0);
        }
        if inode.kind_bits() == S_IFDIR {
            let mut named = Vec::new();
            if let Some(sd) = self.order.softdep() {
                for &block in mapped.contents.iter().filter(|&&b| self.cache.dirty(b)) {
                    named.extend(sd.entries_new(&self.cache, block));
                }
            }
            named.sort_unstable();
            named.dedup();
            for x in named {
                // A name removed since, or an inode freed: nothing to add.
                if let Ok(x_inode) = self.inode(x) {
                    listed.extend(self.inode_needs(x, &x_inode));
                }
            }
        }
        // The bitmaps of every group the blocks and inodes above lie in
        // (rules 1 and 2 wait on them; another group's are no business of
        // this file's), and a header a new inode waits for (its count of
        // slots raised).
        let mut groups: Vec<u32> = listed.iter().filter_map(|&b| self.sb.group_of(b)).collect();
        groups.sort_unstable();
        groups.dedup();
        let raised: Vec<u32> =
            self.order.softdep().map(|sd| sd.raised_groups().collect()).unwrap_or_default();
        for g in groups {
            let start = self.sb.group_start(g);
            listed.extend([start + 1, start + 2]);
            if raised.contains(&g) {
                listed.push(start);
            }
        }
        listed.sort_unstable();
        listed.dedup();
        Ok(listed)
    }

    /// What inode `ino` needs on the disk to go complete (rule 2): its
    /// inode table block, a directory's or long symbolic link's first
    /// block, its attribute block.
    fn inode_needs(&self, ino: u32, inode: &DiskInode) -> Vec<u64> {
        let mut needs = vec![self.sb.inode_place(ino).0];
        let long_link = inode.kind_bits() == S_IFLNK && inode.size as usize > INLINE_SYMLINK_BYTES;
        if (inode.kind_bits() == S_IFDIR || long_link) && inode.direct[0] != 0 {
            needs.push(u64::from(inode.direct[0]));
        }
        if inode.xattr != 0 {
            needs.push(u64::from(inode.xattr));
        }
        needs
    }

    /// Right after a flush: whether the disk holds file `ino` as memory
    /// does (its blocks written, its inode whole, its new names there).
    fn file_on_disk(&self, ino: u32, mapped: &Mapped, names: &[NewName]) -> bool {
        let Some(sd) = self.order.softdep() else { return true };
        let blocks: &dyn Blocks = &self.cache;
        mapped.contents.iter().chain(&mapped.pointers).all(|&b| !blocks.dirty(b))
            && sd.inode_on_disk(blocks, ino)
            && names.iter().all(|&(child, _, block)| sd.block_names(blocks, block, child, true))
    }
}

impl Ffs {
    /// Under `softdep`: returns once a flush issued after seal `need`
    /// returned and what waited on it ran, every flush with the mount's
    /// lock let go, so that the other calls go on meanwhile. One is in
    /// flight at most: a call whose writes it does not cover waits for it
    /// (without the lock, writing nothing), and the first to take the
    /// lock after it seals its own writes and those of every call that
    /// wrote meanwhile under the next, which the others wait for in turn
    /// (group commit, as jbd2's). Before, such a call flushed again with
    /// the lock held, every other call waiting behind it.
    fn flushed_through<'a>(
        &'a self,
        mut core: MutexGuard<'a, Core>,
        need: u64,
    ) -> Result<MutexGuard<'a, Core>, Errno> {
        loop {
            core.check_alive()?;
            match core.order.caller_flush(need) {
                CallerFlush::Done => return Ok(core),
                CallerFlush::InFlight(seal, told) => {
                    drop(core);
                    let ok = told.wait(seal);
                    core = self.lock();
                    if !ok {
                        // Its issuer marks the file system failed.
                        return Err(Errno::IO);
                    }
                    core.caller_flushed(seal, Ok(()))?;
                }
                CallerFlush::Behind => {
                    let c = &mut *core;
                    if let Err(e) = c.order.before_flush(&mut c.cache) {
                        return Err(io_failed(c, e));
                    }
                }
                CallerFlush::Needed => {
                    let c = &mut *core;
                    let (seal, told) = match c.order.seal_for_caller(&mut c.cache) {
                        Ok(sealed) => sealed,
                        Err(e) => return Err(io_failed(c, e)),
                    };
                    let dev = Arc::clone(c.cache.device());
                    drop(core);
                    let flushed = dev.flush();
                    if let Some(told) = told {
                        told.returned(seal, flushed.is_ok());
                    }
                    core = self.lock();
                    core.caller_flushed(seal, flushed)?;
                }
            }
        }
    }

    /// An fsync of `ino` as the policy has it (`FileSystem::fsync`).
    pub(crate) fn fsync_file(&self, ino: u64) -> fsapi::Result<()> {
        let mut core = self.lock();
        let ino = core.valid_ino(ino)?;
        match core.order {
            Ordering::Sync | Ordering::Async => {
                core.check_alive()?;
                let dev = core.write_file_for_fsync(ino)?;
                drop(core);
                let Err(e) = dev.flush() else { return Ok(()) };
                let mut core = self.lock();
                Err(io_failed(&mut core, e))
            }
            Ordering::Softdep(_) => {
                core.check_alive()?;
                let plan = core.softdep_fsync_plan(ino)?;
                for _ in 0..PASSES_MAX {
                    let need = core.softdep_fsync_write(&plan)?;
                    core = self.flushed_through(core, need)?;
                    if core.softdep_fsync_done(&plan)? {
                        return Ok(());
                    }
                }
                core.softdep_fsync_whole()
            }
            Ordering::Log => {
                core.check_alive()?;
                let Some((log, need)) = core.write_logged_file(ino)? else { return Ok(()) };
                // Group commit: while a commit is in flight the changes go
                // on gathering in the open transaction, and the first
                // fsync to find the log idle seals it for all of them.
                while log.durable_id() < need {
                    if log.sealed_id() < need && log.sealed_waiting() == 0 {
                        if let Err(e) = core.commit_behind() {
                            return Err(io_failed(&mut core, e));
                        }
                        if log.sealed_id() < need {
                            break; // nothing was left to seal
                        }
                    }
                    drop(core);
                    let committed = log.commit_sealed();
                    core = self.lock();
                    if let Err(e) = committed {
                        return Err(io_failed(&mut core, e));
                    }
                    core.check_alive()?;
                }
                Ok(())
            }
        }
    }
}
