//! Freed blocks soft updates holds back (rule 5), in groups, indexed by
//! the blocks whose copies on the disk they wait on: a flush looks only
//! at the groups waiting on what it made durable, not at every group.
//! A removed file's blocks are not here: they wait with its inode
//! (`HeldInode`); a group is what a truncation freed.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;

/// Where a freed block may still be pointed to from, on the disk: it is
/// handed out again only once no such copy points to it (rule 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Inode `ino` as the disk holds it (its direct and indirect slots).
    Inode(u32),
    /// Indirect block `block` as the disk holds it.
    Indirect(u64),
}

/// Freed blocks waiting for the disk's copies in `waits` to stop
/// pointing to them; `blocks` sorted (a file's few blocks: searched, not
/// hashed, which costs a set's allocation per freed file). `meta`: those
/// of them soft updates keeps anything about (directory, indirect and
/// symbolic-link blocks), to forget at the release; the rest are file
/// data, of which it keeps nothing. A small file's group is held in
/// place: per-file allocations, freed long after, scatter the heap.
pub struct Group {
    pub blocks: SmallVec<[u32; 4]>,
    pub meta: Vec<u32>,
    pub waits: SmallVec<[Wait; 1]>,
}

/// A freed file's few blocks kept in place (its allocation dropped now, not
/// long after with the others' scattered), more than four on the heap.
pub fn kept_in_place(blocks: Vec<u32>) -> SmallVec<[u32; 4]> {
    match blocks.len() {
        0..=4 => SmallVec::from_slice(&blocks),
        _ => SmallVec::from_vec(blocks),
    }
}

/// The groups held, by slot; a slot is reused once its group is
/// released.
#[derive(Default)]
pub struct Held {
    groups: Vec<Option<Group>>,
    free: Vec<usize>,
    /// The slots of the groups waiting on each block (the block an
    /// inode is in, or an indirect block). A slot released or reused
    /// may stay listed: looking at a group once too often only costs the
    /// look.
    by_block: HashMap<u64, Vec<usize>>,
    /// Groups waiting on nothing: released at the next look.
    unwaited: Vec<usize>,
    len: usize,
}

impl Held {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Holds `blocks` (sorted; `meta` among them) until the disk's copies
    /// in `waits` stop pointing to them; `at[k]` is the block `waits[k]`
    /// is read from.
    pub fn hold(&mut self, blocks: Vec<u32>, meta: Vec<u32>, waits: Vec<Wait>, at: impl Fn(Wait) -> u64) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.groups.push(None);
                self.groups.len() - 1
            }
        };
        if waits.is_empty() {
            self.unwaited.push(slot);
        }
        for block in waits.iter().map(|w| at(*w)) {
            let slots = self.by_block.entry(block).or_default();
            if slots.last() != Some(&slot) {
                slots.push(slot);
            }
        }
        let blocks = kept_in_place(blocks);
        let waits = match waits.len() {
            0..=1 => SmallVec::from_slice(&waits),
            _ => SmallVec::from_vec(waits),
        };
        self.groups[slot] = Some(Group { blocks, meta, waits });
        self.len += 1;
    }

    /// The slots of the groups waiting on a block in `changed` (every
    /// group, when None), and of those waiting on nothing; each once.
    pub fn waiting_on(&mut self, changed: Option<&HashSet<u64>>) -> Vec<usize> {
        let mut slots = std::mem::take(&mut self.unwaited);
        match changed {
            None => slots.extend((0..self.groups.len()).filter(|&s| self.groups[s].is_some())),
            Some(changed) => {
                for block in changed {
                    let Some(listed) = self.by_block.get_mut(block) else { continue };
                    // Pruned of the released slots as it is read.
                    listed.retain(|&s| self.groups[s].is_some());
                    slots.extend_from_slice(listed);
                    if listed.is_empty() {
                        self.by_block.remove(block);
                    }
                }
            }
        }
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    pub fn get(&self, slot: usize) -> Option<&Group> {
        self.groups.get(slot)?.as_ref()
    }

    /// Releases the group in `slot`: its blocks are free to hand out.
    pub fn release(&mut self, slot: usize) -> Option<Group> {
        let group = self.groups.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.len -= 1;
        Some(group)
    }

    /// Whether some group may wait on indirect block `block`.
    pub fn waited_on(&self, block: u64) -> bool {
        self.by_block.contains_key(&block)
    }

    /// Indirect blocks `released` are no longer waited on (unreachable,
    /// as is what they point to): the slots of the groups whose waits
    /// this cut.
    pub fn cut(&mut self, released: &HashSet<u64>) -> Vec<usize> {
        let mut cut = Vec::new();
        for &block in released {
            let Some(slots) = self.by_block.remove(&block) else { continue };
            for slot in slots {
                if let Some(group) = self.groups[slot].as_mut() {
                    group.waits.retain(|w| *w != Wait::Indirect(block));
                    cut.push(slot);
                }
            }
        }
        cut.sort_unstable();
        cut.dedup();
        cut
    }
}

#[cfg(test)]
mod tests {
    use rustc_hash::FxHashSet as HashSet;

    use super::{Held, Wait};

    /// The block each wait in these tests reads.
    fn place(wait: Wait) -> u64 {
        match wait {
            Wait::Inode(40) => 101,
            Wait::Inode(_) => 100,
            Wait::Indirect(block) => block,
        }
    }

    /// A flush looks at the groups waiting on what it made durable only;
    /// a group waiting on nothing is looked at once.
    #[test]
    fn the_groups_waiting_on_a_block_are_found_by_it() {
        let mut held = Held::default();
        held.hold(vec![10, 11], vec![], vec![Wait::Inode(3)], place);
        held.hold(vec![20], vec![], vec![Wait::Inode(40), Wait::Indirect(7)], place);
        held.hold(vec![30], vec![], vec![], place);
        let changed: HashSet<u64> = [101].into_iter().collect();
        assert_eq!(held.waiting_on(Some(&changed)), vec![1, 2]);
        assert_eq!(held.waiting_on(Some(&changed)), vec![1], "the unwaited group is looked at once");
        assert_eq!(held.waiting_on(None), vec![0, 1, 2]);
    }

    /// A released slot is reused, and the lists naming it are pruned
    /// when looked at; a cut wait leaves the group's others.
    #[test]
    fn released_slots_are_reused_and_cut_waits_go() {
        let mut held = Held::default();
        held.hold(vec![10], vec![10], vec![Wait::Indirect(7)], place);
        held.hold(vec![20], vec![], vec![Wait::Inode(2), Wait::Indirect(8)], place);
        assert_eq!(held.release(0).map(|g| g.blocks.to_vec()), Some(vec![10]));
        assert_eq!(held.len(), 1);
        let changed: HashSet<u64> = [7].into_iter().collect();
        assert!(held.waiting_on(Some(&changed)).is_empty(), "a released group is not looked at");
        held.hold(vec![30], vec![], vec![Wait::Inode(5)], place);
        let released: HashSet<u64> = [8].into_iter().collect();
        assert_eq!(held.cut(&released), vec![1]);
        assert_eq!(held.get(1).map(|g| g.waits.to_vec()), Some(vec![Wait::Inode(2)]));
        let changed: HashSet<u64> = [100].into_iter().collect();
        assert_eq!(held.waiting_on(Some(&changed)), vec![0, 1], "the reused slot is found by its own wait");
    }
}
