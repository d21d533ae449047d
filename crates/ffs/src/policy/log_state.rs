//! The `log` policy's state between calls (`Core::log`): the block log
//! beneath, when the last commit was, how much a transaction holds, the
//! committer thread, and the blocks freed by transactions not yet
//! durable, which nothing takes again before they are.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use blocklog::LoggedDevice;

use crate::pages::Pages;

/// See [`Core::log`].
pub struct LogState {
    /// Blocks freed by a transaction not yet durable: none is taken
    /// again before it is.
    pub freed: FreedBlocks,
    /// On the mount's clock (`MountOptions::clock`).
    pub last_commit: Duration,
    pub commit_blocks: usize,
    /// The block log beneath (under `log`).
    pub dev: Option<Arc<LoggedDevice>>,
    /// Wakes the mount's committer thread, which commits sealed
    /// transactions with the lock let go; `None`: the caller commits
    /// them itself.
    pub committer: Option<mpsc::Sender<()>>,
    /// `Commits::Deferred`: without a committer thread, a sealed commit
    /// waits for the next seal or sync.
    pub deferred: bool,
}

/// In [`FreedBlocks`]: freed in the open transaction.
const OPEN: u64 = u64::MAX;

/// Under `log`, the blocks freed by transactions not yet durable (WAPBL's
/// deallocations), each tagged with the transaction that frees it
/// ([`OPEN`] while that is open, then the number it was sealed with).
/// Kept by page of neighbouring blocks and listed per transaction, so
/// that removing trees (hundreds of thousands of blocks) costs no hash per
/// block and no pass over them all per commit.
#[derive(Default)]
pub struct FreedBlocks {
    tags: Pages<u64>,
    open: Vec<u32>,
    /// Each sealed transaction's blocks, oldest first.
    sealed: VecDeque<(u64, Vec<u32>)>,
}

impl FreedBlocks {
    pub fn is_empty(&self) -> bool {
        self.tags.len() == 0
    }

    /// `block` freed in the open transaction.
    pub fn freed(&mut self, block: u32) {
        self.tags.insert(u64::from(block), OPEN);
        self.open.push(block);
    }

    /// Whether `block` was freed by a transaction later than `durable`.
    pub fn waits(&self, block: u32, durable: u64) -> bool {
        self.tags.get(u64::from(block)).is_some_and(|t| t > durable)
    }

    /// The open transaction was sealed as number `id` (0: nothing was
    /// left to seal, everything before is durable).
    pub fn sealed(&mut self, id: u64) {
        let blocks = std::mem::take(&mut self.open);
        for &block in &blocks {
            if id == 0 {
                self.tags.remove(u64::from(block));
            } else {
                self.tags.insert(u64::from(block), id);
            }
        }
        if id != 0 {
            self.sealed.push_back((id, blocks));
        }
    }

    /// Transactions up to `durable` are durable: their blocks are free
    /// for good.
    pub fn durable(&mut self, durable: u64) {
        while self.sealed.front().is_some_and(|(id, _)| *id <= durable) {
            let Some((id, blocks)) = self.sealed.pop_front() else { break };
            for block in blocks.into_iter().map(u64::from) {
                if self.tags.get(block) == Some(id) {
                    self.tags.remove(block);
                }
            }
        }
    }

    /// Everything committed is durable (a synchronous commit).
    pub fn clear(&mut self) {
        *self = FreedBlocks::default();
    }

    #[cfg(test)]
    pub fn blocks(&self) -> Vec<u32> {
        let sealed = self.sealed.iter().flat_map(|(_, blocks)| blocks);
        self.open.iter().chain(sealed).copied().filter(|&b| self.tags.get(u64::from(b)).is_some()).collect()
    }
}

impl LogState {
    pub fn new(commit_blocks: usize, now: Duration) -> LogState {
        LogState {
            freed: FreedBlocks::default(),
            last_commit: now,
            commit_blocks,
            dev: None,
            committer: None,
            deferred: false,
        }
    }

    /// The last transaction durable: blocks freed in it or before it are
    /// free for good.
    pub fn durable(&self) -> u64 {
        self.dev.as_ref().map_or(0, |d| d.durable_id())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::{FreedBlocks, OPEN};

    proptest! {
        /// The freed blocks answer as a map of block to transaction does
        /// (the log's bookkeeping before it was kept by page): freed in
        /// the open one, sealed with a number, durable up to a number.
        #[test]
        fn freed_blocks_wait_as_a_map_says(ops in prop::collection::vec((0u8..4, 0u32..3000), 1..200)) {
            let mut freed = FreedBlocks::default();
            let mut model: HashMap<u32, u64> = HashMap::new();
            let (mut next_id, mut durable) = (1u64, 0u64);
            for (op, block) in ops {
                match op {
                    0 | 1 => {
                        // Only a block not waiting can be freed (it was taken).
                        if model.get(&block).is_none_or(|t| *t <= durable) {
                            freed.freed(block);
                            model.insert(block, OPEN);
                        }
                    }
                    2 => {
                        freed.sealed(next_id);
                        model.values_mut().filter(|t| **t == OPEN).for_each(|t| *t = next_id);
                        next_id += 1;
                    }
                    _ => {
                        durable = (durable + u64::from(block % 3)).min(next_id - 1);
                        freed.durable(durable);
                        model.retain(|_, t| *t > durable);
                    }
                }
                for b in (block.saturating_sub(3))..block + 3 {
                    prop_assert_eq!(freed.waits(b, durable), model.get(&b).is_some_and(|t| *t > durable));
                }
                prop_assert_eq!(freed.is_empty(), model.is_empty());
            }
        }
    }
}
