//! Which key blocks requests in flight hold, so that requests touching the
//! same blocks never overlap. A fixed table of lock flags, one per slot:
//! a block maps to a slot (itself when the region has at most
//! [`BUSY_SLOTS_MAX`] blocks, else a hash of it), and a request takes each
//! distinct slot of its blocks once, all or nothing. Two requests sharing a
//! block share its slot, so they cannot both hold it; two blocks of one
//! request sharing a slot take it once, so a request never waits on itself.
//! Memory is bounded by the table, whatever the target's size; the price
//! of hashing is that unrelated blocks sharing a slot wait for each other.

use std::sync::atomic::{AtomicBool, Ordering};

/// Slots of the largest table: 1 MiB of flags. With 4 KiB key blocks,
/// regions up to 4 GiB map each block to its own slot.
pub const BUSY_SLOTS_MAX: u64 = 1 << 20;

pub(crate) struct BusyTable {
    flags: Vec<AtomicBool>,
    /// Hashing: a block's slot is the top `bits` of its Fibonacci hash.
    /// Not hashing: a block is its own slot.
    hashed: bool,
    bits: u32,
}

impl BusyTable {
    /// A table for a region of `blocks` key blocks.
    pub fn new(blocks: u64) -> BusyTable {
        BusyTable::with_slots(blocks, BUSY_SLOTS_MAX)
    }

    /// A table of at most `slots_max` slots (a power of two).
    fn with_slots(blocks: u64, slots_max: u64) -> BusyTable {
        assert!(slots_max.is_power_of_two());
        let hashed = blocks > slots_max;
        let slots = if hashed { slots_max } else { blocks };
        BusyTable {
            flags: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            hashed,
            bits: slots_max.trailing_zeros(),
        }
    }

    fn slot(&self, block: u64) -> usize {
        if !self.hashed {
            return block as usize;
        }
        // Fibonacci hashing: neighbouring blocks land far apart, so a
        // request's blocks rarely share a slot and regular strides (threads
        // walking the region at fixed distances) do not keep colliding.
        (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    /// The distinct slots of `blocks`, in order.
    fn slots(&self, blocks: std::ops::Range<u64>) -> Vec<usize> {
        let mut slots: Vec<usize> = blocks.map(|b| self.slot(b)).collect();
        if self.hashed {
            slots.sort_unstable();
            slots.dedup();
        }
        debug_assert!(slots.windows(2).all(|w| w[0] < w[1]));
        slots
    }

    /// Takes the slots of every block of `blocks`, or none (returns false).
    pub fn try_lock(&self, blocks: std::ops::Range<u64>) -> bool {
        let slots = self.slots(blocks);
        for (i, &slot) in slots.iter().enumerate() {
            if self.flags[slot].swap(true, Ordering::Acquire) {
                for &taken in &slots[..i] {
                    self.flags[taken].store(false, Ordering::Release);
                }
                return false;
            }
        }
        true
    }

    /// Gives back what [`BusyTable::try_lock`] took for `blocks`.
    pub fn unlock(&self, blocks: std::ops::Range<u64>) {
        for slot in self.slots(blocks) {
            debug_assert!(self.flags[slot].load(Ordering::Relaxed), "unlocking a slot not held");
            self.flags[slot].store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BusyTable;

    /// A table of 8 slots over 1000 blocks, and two blocks sharing a slot.
    fn small() -> (BusyTable, u64, u64) {
        let table = BusyTable::with_slots(1000, 8);
        let a = 10;
        let b = (a + 1..1000).find(|&b| table.slot(b) == table.slot(a)).expect("8 slots: a collision");
        (table, a, b)
    }

    #[test]
    fn overlapping_requests_never_both_hold_their_blocks() {
        for table in [BusyTable::new(1000), BusyTable::with_slots(1000, 8)] {
            assert!(table.try_lock(100..108));
            for other in [100..101, 107..120, 90..101, 0..1000] {
                assert!(!table.try_lock(other.clone()), "{other:?} overlaps 100..108");
            }
            table.unlock(100..108);
            assert!(table.try_lock(90..101));
        }
    }

    #[test]
    fn failed_try_lock_takes_nothing() {
        let table = BusyTable::new(1000);
        assert!(table.try_lock(5..6));
        assert!(!table.try_lock(0..10));
        assert!(table.try_lock(0..5) && table.try_lock(6..10));
    }

    #[test]
    fn request_whose_blocks_share_a_slot_locks_and_unlocks() {
        let (table, a, b) = small();
        assert!(table.try_lock(a..b + 1), "blocks {a} and {b} share a slot");
        table.unlock(a..b + 1);
        assert!(table.flags.iter().all(|f| !f.load(std::sync::atomic::Ordering::Relaxed)));
    }

    #[test]
    fn every_request_locks_on_an_idle_table() {
        let (table, _, _) = small();
        for start in 0..990 {
            assert!(table.try_lock(start..start + 10), "{start}");
            table.unlock(start..start + 10);
        }
    }

    #[test]
    fn small_regions_map_each_block_to_its_own_slot() {
        let table = BusyTable::new(1000);
        assert!((0..1000).all(|b| table.slot(b) == b as usize));
    }
}
