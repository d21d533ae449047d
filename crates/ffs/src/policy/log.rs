//! The `log` policy's transactions: what the open one holds, when it
//! commits (a commit interval and a size, as jbd2's and WAPBL's), the
//! commit itself (in place, or sealed and handed to the committer
//! thread), and the blocks freed by transactions not yet durable, which
//! nothing takes again before they are. The log's records and replay
//! are in the `blocklog` crate and `wapbl.rs`.

use std::sync::Arc;

use blocklog::LoggedDevice;
use fsapi::Errno;

use crate::core::{io_failed, Core};
use crate::format::{DiskInode, BLOCK_BYTES, S_IFREG};

impl Core {
    /// Under `log`, gives up the file's blocks `first..end` from the end
    /// of what it holds there a chunk at a time (each chunk leaves a file
    /// with holes, a consistent state), committing between chunks when
    /// the transaction is full: freeing gigabytes touches more bitmaps
    /// and indirect blocks than one transaction holds. The caller frees
    /// the rest (`free_range` over the whole range, which also frees the
    /// indirect blocks the chunks emptied).
    pub fn shed_in_chunks(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        first: u64,
        end: u64,
    ) -> Result<(), Errno> {
        const CHUNK: u64 = 2048;
        if !self.order.is_logged() {
            return Ok(());
        }
        let mut end = end.min(self.allocated_end(inode)?);
        while end > first + CHUNK {
            end -= CHUNK;
            let freed = self.free_range(inode, end, end + CHUNK)?;
            self.put_inode(ino, inode)?;
            self.free_blocks_now(freed.blocks)?;
            if self.commit_due() {
                if let Err(e) = self.commit_behind() {
                    return Err(io_failed(self, e));
                }
            }
        }
        Ok(())
    }

    /// Under `log`: commits the metadata changed so far, with the group
    /// headers and the superblock, as one transaction, durable when this
    /// returns. File data stays dirty: a new block's pointer carries the
    /// unwritten mark until its data is written back (`delayed.rs`), and
    /// the commit's records wait behind a flush of the data written
    /// outside the log so far (the block log's ordered data).
    pub fn commit(&mut self) -> device::Result<()> {
        self.stage_group_headers()?;
        let (sb, slot) = self.next_superblock(1);
        self.cache.modify(&mut self.order, slot)?.copy_from_slice(&sb);
        self.cache.write_back_meta(&mut self.order)?;
        self.cache.flush(&mut self.order)?;
        self.log.freed.clear();
        self.log.last_commit = self.cache.now();
        Ok(())
    }

    /// Under `log`, a commit that need not be durable when it returns (the
    /// one a full transaction forces, the syncer's): the group headers,
    /// the superblock and the metadata into the transaction, sealed (the
    /// file data stays dirty, as [`Core::commit`]'s); the mount's
    /// committer thread then writes it to the log and flushes while the
    /// calls after it go on, into the next transaction, as a journal's
    /// commit thread lets them. One commit at most is in flight: a second
    /// waits for the first (an fsync waits for it with the lock let go:
    /// `Ffs::fsync_file`). Without a committer thread (or under another
    /// policy), [`Core::commit`].
    pub fn commit_behind(&mut self) -> device::Result<()> {
        let Some(dev) = self.log.dev.clone() else { return self.commit() };
        if dev.sealed_waiting() > 0 {
            dev.commit_sealed()?;
        }
        self.stage_group_headers()?;
        let (sb, slot) = self.next_superblock(1);
        self.cache.modify(&mut self.order, slot)?.copy_from_slice(&sb);
        self.cache.write_back_meta(&mut self.order)?;
        self.cache.meta_since_flush = 0;
        self.cache.stats.flushes += 1;
        self.log.last_commit = self.cache.now();
        let id = dev.seal()?;
        self.log.freed.sealed(id);
        let woken = self.log.committer.as_ref().is_some_and(|c| c.send(()).is_ok());
        if !woken && !self.log.deferred {
            dev.commit_sealed()?;
        }
        let durable = dev.durable_id();
        self.log.freed.durable(durable);
        Ok(())
    }

    /// Under `log`: clears the unwritten mark of every delayed block a
    /// write-back has written since (`delayed.rs`), in the open
    /// transaction, whose commit flushes that data before its header.
    /// Called between calls only (`Ffs::lock`, a sync, the syncer): a
    /// call in progress holds its inode apart from the table, and would
    /// put the mark back.
    pub fn settle_delayed(&mut self) -> Result<(), Errno> {
        while self.cache.delayed.any_written() {
            let mut written = self.cache.delayed.take_written();
            written.sort_unstable_by_key(|&(_, owner)| (owner.ino, owner.n));
            for group in written.chunk_by(|a, b| a.1.ino == b.1.ino) {
                let ino = group[0].1.ino;
                // Its blocks freed with it: nothing left to settle.
                let Ok(mut inode) = self.inode(ino) else { continue };
                let mut changed = false;
                for &(block, owner) in group {
                    changed |= self.clear_mark(&mut inode, owner.n, block)?;
                }
                if changed {
                    self.put_inode(ino, &inode)?;
                }
            }
        }
        Ok(())
    }

    /// Under `log`, a sync: every dirty file-data buffer written, their
    /// marks cleared, then one commit. Durable when this returns.
    pub fn sync_logged(&mut self) -> Result<(), Errno> {
        if let Err(e) = self.cache.write_back_data(&mut self.order) {
            return Err(io_failed(self, e));
        }
        self.settle_delayed()?;
        self.commit().map_err(|e| io_failed(self, e))
    }

    /// Under `log`, an fsync of `ino`'s first step: its own dirty blocks
    /// written (not another file's data) and their marks cleared, all in
    /// the open transaction. Returns the log and that transaction's
    /// number, for the caller to see committed ([`Ffs::fsync_file`]: with
    /// the lock let go, so fsyncs arriving together share a commit, as
    /// jbd2's). None: committed here (no log beneath).
    pub fn write_logged_file(&mut self, ino: u32) -> Result<Option<(Arc<LoggedDevice>, u64)>, Errno> {
        let inode = self.inode(ino)?;
        let mapped = self.mapped_blocks(&inode)?;
        if let Err(e) = self.cache.write_listed(&mut self.order, &mapped.contents) {
            return Err(io_failed(self, e));
        }
        self.settle_delayed()?;
        let Some(dev) = self.log.dev.clone() else {
            return self.commit().map(|()| None).map_err(|e| io_failed(self, e));
        };
        let open = dev.sealed_id() + 1;
        Ok(Some((dev, open)))
    }

    /// Under `log`, before a rename of `name` in `parent` over an
    /// existing regular file `new_name` in `new_parent`: the renamed
    /// file's data written back and its marks cleared, so that the commit
    /// that makes the rename durable holds its data too (ext4's
    /// `auto_da_alloc`: a file written and renamed over another without
    /// an fsync is found after a crash with its data, or the old file is,
    /// never zeros in its place). Called at the start of the call, with
    /// no inode held.
    pub fn write_back_replacing(
        &mut self,
        parent: u32,
        name: &[u8],
        new_parent: u32,
        new_name: &[u8],
    ) -> Result<(), Errno> {
        let regular = |core: &mut Core, dir: u32, name: &[u8]| -> Result<Option<DiskInode>, Errno> {
            let mut dir_inode = core.inode(dir)?;
            let Some(found) = core.dir_lookup(dir, &mut dir_inode, name)? else { return Ok(None) };
            let inode = core.inode(found.ino)?;
            Ok((inode.kind_bits() == S_IFREG).then_some(inode))
        };
        if regular(self, new_parent, new_name)?.is_none() {
            return Ok(());
        }
        let Some(source) = regular(self, parent, name)? else { return Ok(()) };
        let mapped = self.mapped_blocks(&source)?;
        if let Err(e) = self.cache.write_listed(&mut self.order, &mapped.contents) {
            return Err(io_failed(self, e));
        }
        self.settle_delayed()
    }

    /// Under `log`, whether the open transaction is full enough that the
    /// next operation should commit it first (so no operation's metadata
    /// is split by a commit the log forces).
    ///
    /// The dirty metadata is counted as whole blocks of data; near the
    /// limit it joins the transaction (as a commit would write it), whose
    /// log counts blocks that are all zero as no data, and the sum is
    /// taken again: a removal, which clears whole inode blocks, commits
    /// for what it logs, not for the blocks it touches.
    pub fn commit_due(&mut self) -> bool {
        if self.log.commit_blocks == 0 || self.failed.is_some() {
            return false;
        }
        if self.held_blocks() < self.log.commit_blocks {
            return false;
        }
        if self.cache.dirty_meta() == 0 || self.log.dev.is_none() {
            return true;
        }
        if let Err(e) = self.cache.write_back_meta(&mut self.order) {
            io_failed(self, e);
            return false;
        }
        // Within an eighth of the limit it commits now rather than hand
        // over a few blocks at every call until it is reached.
        let limit = self.log.commit_blocks;
        self.held_blocks() >= limit - limit / 8
    }

    /// What a commit now would hold, in blocks: the dirty metadata, the
    /// changed groups' headers and the superblock, each a whole block, and
    /// the transaction the cache already wrote into (as its log counts
    /// it).
    fn held_blocks(&self) -> usize {
        let joined = match &self.log.dev {
            Some(dev) => dev.open_bytes().div_ceil(BLOCK_BYTES as u64) as usize,
            None => self.cache.meta_since_flush,
        };
        self.cache.dirty_meta() + self.groups_dirty.len() + 1 + joined
    }
}
