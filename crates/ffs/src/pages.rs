//! A value per block in pages of neighbours (soft updates' bookkeeping,
//! the log's freed blocks): what a run of allocations, frees or one
//! write-back touches is looked up in few places.

use rustc_hash::FxHashMap as HashMap;

/// Blocks per page of [`Pages`].
const PAGE_BLOCKS: u64 = 1024;

/// A value per block (the default is none), kept in pages of neighbours:
/// the blocks a run of allocations or one write-back touches are looked
/// up in few places, where a map of millions of blocks would miss the
/// processor's cache at every one.
pub(crate) struct Pages<T> {
    pages: HashMap<u64, Page<T>>,
    len: usize,
}

struct Page<T> {
    slots: Box<[T]>,
    used: usize,
}

impl<T> Default for Pages<T> {
    fn default() -> Self {
        Pages { pages: HashMap::default(), len: 0 }
    }
}

impl<T: Copy + Default + PartialEq> Pages<T> {
    pub(crate) fn get(&self, block: u64) -> Option<T> {
        let page = self.pages.get(&(block / PAGE_BLOCKS))?;
        Some(page.slots[(block % PAGE_BLOCKS) as usize]).filter(|t| *t != T::default())
    }

    /// The value of `block`, to change (to another value than none: use
    /// `remove` for that); None when it has none.
    pub(crate) fn get_mut(&mut self, block: u64) -> Option<&mut T> {
        let page = self.pages.get_mut(&(block / PAGE_BLOCKS))?;
        Some(&mut page.slots[(block % PAGE_BLOCKS) as usize]).filter(|t| **t != T::default())
    }

    pub(crate) fn insert(&mut self, block: u64, value: T) {
        debug_assert!(value != T::default(), "the default value is none");
        let page = self.pages.entry(block / PAGE_BLOCKS).or_insert_with(|| Page {
            slots: vec![T::default(); PAGE_BLOCKS as usize].into_boxed_slice(),
            used: 0,
        });
        let slot = &mut page.slots[(block % PAGE_BLOCKS) as usize];
        if *slot == T::default() {
            page.used += 1;
            self.len += 1;
        }
        *slot = value;
    }

    pub(crate) fn remove(&mut self, block: u64) {
        let key = block / PAGE_BLOCKS;
        let Some(page) = self.pages.get_mut(&key) else { return };
        let slot = &mut page.slots[(block % PAGE_BLOCKS) as usize];
        if *slot != T::default() {
            *slot = T::default();
            page.used -= 1;
            self.len -= 1;
            if page.used == 0 {
                self.pages.remove(&key);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Removes `blocks` (ascending): one page looked up per run of them.
    pub(crate) fn remove_sorted(&mut self, blocks: impl Iterator<Item = u64>) {
        let mut blocks = blocks.peekable();
        while let Some(first) = blocks.next() {
            let key = first / PAGE_BLOCKS;
            let page = self.pages.get_mut(&key);
            let mut removed = 0;
            let mut clear = |page: &mut Option<&mut Page<T>>, block: u64| {
                let Some(page) = page else { return };
                let slot = &mut page.slots[(block % PAGE_BLOCKS) as usize];
                if *slot != T::default() {
                    *slot = T::default();
                    page.used -= 1;
                    removed += 1;
                }
            };
            let mut page = page;
            clear(&mut page, first);
            while let Some(block) = blocks.next_if(|b| b / PAGE_BLOCKS == key) {
                clear(&mut page, block);
            }
            let empty = page.is_some_and(|p| p.used == 0);
            self.len -= removed;
            if empty {
                self.pages.remove(&key);
            }
        }
    }

    /// Removes every block of `range` whose value `done` says is done
    /// with: only the pages the range covers are looked at.
    pub(crate) fn remove_where_in(
        &mut self,
        range: std::ops::Range<u64>,
        mut done: impl FnMut(u64, &T) -> bool,
    ) {
        if range.is_empty() {
            return;
        }
        for key in range.start / PAGE_BLOCKS..=(range.end - 1) / PAGE_BLOCKS {
            let Some(page) = self.pages.get_mut(&key) else { continue };
            let first = key * PAGE_BLOCKS;
            let from = range.start.max(first) - first;
            let to = range.end.min(first + PAGE_BLOCKS) - first;
            for i in from..to {
                let slot = &mut page.slots[i as usize];
                if *slot != T::default() && done(first + i, slot) {
                    *slot = T::default();
                    page.used -= 1;
                    self.len -= 1;
                }
            }
            if page.used == 0 {
                self.pages.remove(&key);
            }
        }
    }

    /// The first block (in no order) whose value `test` holds for: for
    /// the debug build's checks of what a targeted sweep left.
    #[cfg(debug_assertions)]
    pub(crate) fn find(&self, mut test: impl FnMut(u64, &T) -> bool) -> Option<u64> {
        self.pages.iter().find_map(|(&key, page)| {
            (page.slots.iter().enumerate())
                .find(|(i, slot)| **slot != T::default() && test(key * PAGE_BLOCKS + *i as u64, slot))
                .map(|(i, _)| key * PAGE_BLOCKS + i as u64)
        })
    }

    /// Removes every block whose value `done` says is done with (the
    /// tests' sweep of the whole map).
    #[cfg(test)]
    pub(crate) fn remove_where(&mut self, mut done: impl FnMut(u64, &T) -> bool) {
        let mut removed = 0;
        self.pages.retain(|&key, page| {
            for (i, slot) in page.slots.iter_mut().enumerate() {
                if *slot != T::default() && done(key * PAGE_BLOCKS + i as u64, slot) {
                    *slot = T::default();
                    page.used -= 1;
                    removed += 1;
                }
            }
            page.used > 0
        });
        self.len -= removed;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::Pages;

    type Ticks = Pages<u64>;

    proptest! {
        /// Pages answer as a map of block to number does, whatever the
        /// inserts, removals and sweeps (blocks near one another and far
        /// apart).
        #[test]
        fn pages_agree_with_a_map(ops in prop::collection::vec((0u8..6, 0u64..5000, 1u64..100), 1..300)) {
            let mut ticks = Ticks::default();
            let mut model = BTreeMap::new();
            for (op, block, tick) in ops {
                let block = if block % 7 == 0 { block << 20 } else { block };
                match op {
                    0 | 1 => {
                        ticks.insert(block, tick);
                        model.insert(block, tick);
                    }
                    2 | 3 => {
                        ticks.remove(block);
                        model.remove(&block);
                    }
                    4 => {
                        ticks.remove_where(|_, &t| t < tick);
                        model.retain(|_, t| *t >= tick);
                    }
                    _ => {
                        // A range of a few pages, from a block anywhere.
                        let range = block..block + tick * 37;
                        ticks.remove_where_in(range.clone(), |_, &t| t % 2 == 0);
                        model.retain(|b, t| !range.contains(b) || *t % 2 != 0);
                    }
                }
                prop_assert_eq!(ticks.get(block), model.get(&block).copied());
                prop_assert_eq!(ticks.len(), model.len());
            }
            let mut blocks: Vec<u64> = Vec::new();
            ticks.remove_where(|b, _| {
                blocks.push(b);
                false
            });
            blocks.sort_unstable();
            prop_assert_eq!(blocks, model.keys().copied().collect::<Vec<u64>>());
            prop_assert_eq!(ticks.pages.values().map(|p| p.used).sum::<usize>(), model.len());
        }
    }
}
