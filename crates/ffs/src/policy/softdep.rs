//! What the `softdep` policy does with whole calls: write-back passes
//! until nothing waits (a sync), releasing in the maps the blocks and
//! inodes the dependencies let go, and the superblock's mark of a
//! directory moving between directories. The dependencies themselves,
//! and the rules that decide what each write carries, are in `softdep/`.

use fsapi::Errno;

use crate::core::{io_failed, Core};
use crate::format::BLOCK_BYTES;

impl Core {
    /// Under `softdep`: write-back passes (each flushed, the released
    /// blocks and inodes cleared in the maps after it) until nothing is
    /// dirty and nothing waits, or a pass moves nothing on (an inode still
    /// open keeps what waits on it). Each pass lets the next layer of
    /// dependencies go out complete.
    pub fn softdep_sync(&mut self) -> Result<(), Errno> {
        const PASSES_MAX: usize = 256;
        let mut last = None;
        let mut rescanned = false;
        if let Err(e) = self.stage_group_headers().and_then(|()| self.order.checkpoint(&mut self.cache)) {
            return Err(io_failed(self, e));
        }
        for _ in 0..PASSES_MAX {
            if let Err(e) =
                self.stage_group_headers().and_then(|()| self.cache.write_back(&mut self.order, true))
            {
                return Err(io_failed(self, e));
            }
            self.apply_released()?;
            let (dirty_meta, dirty_data) = (self.cache.dirty_meta(), self.cache.dirty_data());
            let Some(sd) = self.order.softdep_mut() else { return Ok(()) };
            let now = (dirty_meta, dirty_data, sd.signature());
            if now.0 == 0 && now.1 == 0 && sd.idle() {
                break;
            }
            if last == Some(now) && self.groups_dirty.is_empty() {
                // Stuck: once, everything that waits is looked at again
                // (a flush looks only at what waits on what it made
                // durable).
                if rescanned {
                    break;
                }
                rescanned = true;
                self.order.rescan(&self.cache);
                self.apply_released()?;
                continue;
            }
            rescanned = false;
            last = Some(now);
        }
        // A sync promises everything durable: passes that end (stuck, or
        // all spent) with dependencies still waiting are an I/O error to
        // the caller, never a success (soft updates always finishes; this
        // is the guard for when it does not).
        let (dirty_meta, dirty_data) = (self.cache.dirty_meta(), self.cache.dirty_data());
        match dirty_meta > 0 || dirty_data > 0 || self.order.waiting() {
            true => Err(Errno::IO),
            false => Ok(()),
        }
    }

    /// Under `softdep`, before a directory moves between directories:
    /// soft updates keep a name for it on the disk at every moment, so a
    /// crash inside the move may leave it named from both parents, or
    /// with `..` still naming the old one (as FreeBSD's), which is more
    /// than leaks: the superblock on the disk says so first (its damage
    /// raised, durably), and every mount refuses the image after such a
    /// crash until `fsck -p` has seen it. Lowered once every move is on
    /// the disk ([`Core::settle_moving`]).
    pub fn mark_moving(&mut self) -> Result<(), Errno> {
        if !self.order.holds_back() || self.moving {
            return Ok(());
        }
        self.moving = true;
        self.write_superblock_now()
    }

    /// Writes the superblock into its next slot past the cache, durably,
    /// with every write before it.
    fn write_superblock_now(&mut self) -> Result<(), Errno> {
        let (buf, slot) = self.next_superblock(self.cache.buffer_align());
        if let Err(e) = self.cache.write_superblock_now(&mut self.order, &buf, slot * BLOCK_BYTES as u64) {
            return Err(io_failed(self, e));
        }
        Ok(())
    }

    /// Under `softdep`, after a flush: takes the superblock's mark of a
    /// directory moving down, durably, once every move is on the disk.
    pub fn lower_moving_mark(&mut self) -> Result<(), Errno> {
        if !self.settle_moving() {
            return Ok(());
        }
        self.write_superblock_now()
    }

    /// Under `softdep`, at the syncer's pass: writes what the directories
    /// moving between directories changed and what that waits on,
    /// whatever its age, a few write-and-flush passes, and takes the mark
    /// down once the moves are on the disk: the window in which a crash
    /// needs `fsck -p` lasts a pass or two, not the syncer's age.
    pub fn write_moves(&mut self) -> Result<(), Errno> {
        const PASSES: usize = 3;
        for _ in 0..PASSES {
            self.lower_moving_mark()?;
            let Some(listed) = self.order.softdep().filter(|_| self.moving).map(|sd| sd.move_blocks()) else {
                return Ok(());
            };
            self.listed_pass(&listed)?;
        }
        self.lower_moving_mark()
    }

    /// One pass over `listed`: those dirty written as the rules allow,
    /// a flush, and what the flush released cleared in the maps.
    pub(crate) fn listed_pass(&mut self, listed: &[u64]) -> Result<(), Errno> {
        let written = self.cache.write_listed(&mut self.order, listed);
        if let Err(e) = written.and_then(|_| self.cache.flush(&mut self.order)) {
            return Err(io_failed(self, e));
        }
        self.apply_released()
    }

    /// Whether the superblock's mark of a directory moving can come down:
    /// it is up and every move is on the disk. The caller writes the
    /// superblock then (with `moving` false).
    pub fn settle_moving(&mut self) -> bool {
        if !self.moving {
            return false;
        }
        let Some(sd) = self.order.softdep_mut() else { return false };
        if !sd.moves_settled(&self.cache) {
            return false;
        }
        self.moving = false;
        true
    }

    /// Under `softdep`: clears in the maps the blocks and inodes the
    /// dependencies released (their pointers are gone from the disk).
    pub fn apply_released(&mut self) -> Result<(), Errno> {
        let Some(sd) = self.order.softdep_mut() else { return Ok(()) };
        let mut blocks = std::mem::take(&mut sd.released_blocks);
        let meta = std::mem::take(&mut sd.released_meta);
        let inodes = std::mem::take(&mut sd.released_inodes);
        // File data left the cache when it was freed, and nothing loads a
        // held block; a directory block retired may linger.
        for block in meta {
            self.cache.discard(&mut self.order, u64::from(block));
        }
        self.clear_block_bits(&blocks)?;
        // The list's room kept for the next release (hundreds of
        // thousands of blocks when trees are removed).
        blocks.clear();
        if let Some(sd) = self.order.softdep_mut().filter(|sd| sd.released_blocks.is_empty()) {
            sd.released_blocks = blocks;
        }
        self.clear_inode_bits(&inodes)
    }

    /// Directory blocks freed under `softdep`, written once more before
    /// their buffers go.
    pub(crate) fn retire_all(&mut self, dirs: Vec<u64>) -> Result<(), Errno> {
        for b in dirs {
            if let Err(e) = self.order.retire(&mut self.cache, b) {
                return Err(io_failed(self, e));
            }
        }
        Ok(())
    }
}
