//! Under `log`: a regular file's data blocks allocated since their data
//! was last written back. Each is pointed to marked unwritten (format 3's
//! mark, as fallocate's blocks are) while its data waits dirty in the
//! cache, so that no commit has to write it first: a commit writes
//! metadata only, and another file's fsync does not force this file's
//! data out (ext4's delayed allocation gets the same). Once a write-back
//! has written the data, the mark is cleared in the open transaction
//! (`Core::settle_delayed`), whose commit flushes the data before its
//! header. After a crash, a file's data that had not been written back
//! reads as zeros, never as what the block held before.
//!
//! Reads of a delayed block come from the cache (or, once written, the
//! disk): the mark says zeros only to a reader after a crash.

use rustc_hash::FxHashMap as HashMap;

/// Whose block it is: inode `ino`'s file block `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub ino: u32,
    pub n: u64,
}

#[derive(Default)]
pub struct DelayedBlocks {
    /// Each delayed block, its owner and whether a write-back wrote it.
    blocks: HashMap<u64, (Owner, bool)>,
    /// Blocks written since the last `take_written`, in write order.
    written: Vec<u64>,
}

impl DelayedBlocks {
    /// `block`, newly taken for `owner`, is pointed to marked unwritten.
    pub fn delay(&mut self, block: u64, owner: Owner) {
        self.blocks.insert(block, (owner, false));
    }

    pub fn contains(&self, block: u64) -> bool {
        self.blocks.contains_key(&block)
    }

    /// `block` is free again (or its buffer dropped as nobody's): no mark
    /// of it is cleared.
    pub fn forget(&mut self, block: u64) {
        if !self.blocks.is_empty() {
            self.blocks.remove(&block);
        }
    }

    /// A write-back wrote `block`.
    pub fn wrote(&mut self, block: u64) {
        if let Some((_, written)) = self.blocks.get_mut(&block) {
            if !*written {
                *written = true;
                self.written.push(block);
            }
        }
    }

    /// Whether blocks were written whose marks are still to clear.
    pub fn any_written(&self) -> bool {
        !self.written.is_empty()
    }

    /// The blocks written since the last call, each with its owner, no
    /// longer delayed (the caller clears their marks).
    pub fn take_written(&mut self) -> Vec<(u32, Owner)> {
        let written = std::mem::take(&mut self.written);
        let mut out = Vec::with_capacity(written.len());
        for block in written {
            // Freed since (and perhaps taken again, not yet written): not
            // this write's to settle.
            if let Some(&(owner, true)) = self.blocks.get(&block) {
                self.blocks.remove(&block);
                out.push((block as u32, owner));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{DelayedBlocks, Owner};

    const A: Owner = Owner { ino: 5, n: 0 };
    const B: Owner = Owner { ino: 6, n: 3 };

    #[test]
    fn a_written_block_is_settled_once() {
        let mut d = DelayedBlocks::default();
        d.delay(100, A);
        d.wrote(100);
        d.wrote(100);
        assert_eq!(d.take_written(), vec![(100, A)]);
        assert!(!d.contains(100) && d.take_written().is_empty());
    }

    #[test]
    fn a_write_of_a_block_freed_and_taken_again_settles_nothing() {
        let mut d = DelayedBlocks::default();
        d.delay(100, A);
        d.wrote(100);
        d.forget(100);
        d.delay(100, B);
        assert_eq!(d.take_written(), vec![], "B's data was never written");
        assert!(d.contains(100));
    }

    #[test]
    fn a_block_not_delayed_is_not_recorded() {
        let mut d = DelayedBlocks::default();
        d.wrote(7);
        assert!(!d.any_written());
    }
}
