//! The state of a mounted file system, behind the one lock `ops.rs` takes
//! for each call: the superblock, the groups' counts, the buffer cache,
//! and the inodes the kernel (or a workload) holds references to.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use device::AlignedBuf;
use fsapi::Errno;

use crate::cache::Cache;
use crate::format::{
    Damage, DiskInode, GroupHeader, InodeSlot, Policy, Superblock, BLOCK_BYTES, INODES_PER_BLOCK, INODE_BYTES,
};
use crate::policy::{LogState, Ordering};

/// A group's counts, kept in memory and written to its header with the
/// superblock's (summary counts are delayed under every policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub free_blocks: u32,
    pub free_inodes: u32,
    pub dirs: u32,
}

/// References to an inode: lookups counted for the caller, and opens.
#[derive(Clone, Copy, Debug, Default)]
pub struct Refs {
    pub lookups: u64,
    pub opens: u64,
}

pub struct Core {
    pub sb: Superblock,
    pub groups: Vec<GroupCounts>,
    /// Groups whose counts changed since their headers were last staged.
    pub groups_dirty: BTreeSet<u32>,
    /// Per group: the inode slots its header says may have been handed
    /// out (`GroupHeader::inodes_initialized`), raised durably before an
    /// inode past them is ([`Core::initialize_through`]).
    pub initialized: Vec<u32>,
    /// Per group: the first inode-table block (counted from the table's
    /// start) from which on no block has been touched by this mount, all
    /// past what the header said at the mount: every slot there is zero
    /// on the disk (the header's promise, docs/formats.md), so such a
    /// block is taken as zeros instead of read ([`Core::table_block`]).
    untouched_from: Vec<u32>,
    pub cache: Cache,
    /// The write-ordering policy and what it keeps, beside the cache
    /// (`policy/`).
    pub order: Ordering,
    pub refs: HashMap<u32, Refs>,
    /// Directory indexes (name -> byte offset of its record), for
    /// directories of more than a block, built on first use.
    pub dir_index: HashMap<u32, HashMap<Vec<u8>, u64>>,
    /// A write-back or synchronous write failed: what reached the disk is
    /// unknown, so the file system takes no more changes (EIO, or ENOSPC
    /// when the host had no room) until it is mounted again.
    pub failed: Option<Failure>,
    /// The `log` policy's transactions: blocks freed since the last commit
    /// (not handed out again before it, or a crash could leave committed
    /// metadata pointing at another file's data), when the last commit
    /// was, and how many metadata blocks a commit may hold before the
    /// next operation commits first (0: not `log`).
    pub log: LogState,
    /// Per bitmap block: a bit below which every bit is set (the
    /// allocator's rotor, as FFS's `cg_rotor`), so a search for a free
    /// bit does not walk the taken ones again at every allocation.
    pub rotors: Rotors,
    /// Under `softdep`: the superblock on the disk says a directory is
    /// moving between directories ([`Core::mark_moving`]), its damage
    /// raised to what only `fsck -p` may see.
    pub moving: bool,
}

/// Bitmap block -> its rotor ([`Core::rotors`]).
pub type Rotors = HashMap<u64, u32>;

/// Why a mounted file system stopped taking changes: its first failed
/// device request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The device error, as text (it names the device and the request).
    pub cause: String,
    /// The device's host ran out of room (a sparse image on a full file
    /// system: ENOSPC or EDQUOT), rather than failing.
    pub out_of_space: bool,
}

impl Failure {
    pub fn of(e: &device::DeviceError) -> Failure {
        Failure { cause: e.to_string(), out_of_space: e.is_out_of_space() }
    }

    /// What the calls that fail for it return. ENOSPC tells the caller the
    /// truth (nothing it asked for was made durable, for want of room)
    /// where EIO would point at the disk; it promises no more than EIO
    /// does, since every change after it still fails.
    pub fn errno(&self) -> Errno {
        if self.out_of_space {
            Errno::NOSPC
        } else {
            Errno::IO
        }
    }
}

/// What a group's `inodes_initialized` becomes when slot `slot` is
/// handed out past `now` of its `per_group` slots: at least twice as many
/// and at least 256 (so a group's header is written a few times over its
/// life, not once a block), in whole table blocks, at most all of them.
pub fn initialized_for(slot: u32, now: u32, per_group: u32) -> u32 {
    const FIRST: u32 = 256;
    let wanted = (slot + 1).max(now.saturating_mul(2)).max(FIRST);
    wanted.div_ceil(INODES_PER_BLOCK).saturating_mul(INODES_PER_BLOCK).min(per_group)
}

/// A device error as the errno a caller gets (EIO, or ENOSPC when the
/// host had no room), and the file system stops taking changes.
pub fn io_failed(core: &mut Core, e: device::DeviceError) -> Errno {
    let failure = Failure::of(&e);
    let errno = failure.errno();
    core.failed.get_or_insert(failure);
    errno
}

impl Core {
    /// A core over `cache` for the file system `sb` describes, with its
    /// groups' counts and initialized slots as their headers say: nothing
    /// dirty, referenced or failed yet.
    pub fn new(
        sb: Superblock,
        (groups, initialized): (Vec<GroupCounts>, Vec<u32>),
        cache: Cache,
        policy: Policy,
        log: LogState,
    ) -> Core {
        let order = Ordering::new(policy, &sb, cache.capacity_blocks());
        let untouched_from = initialized.iter().map(|&slots| slots.div_ceil(INODES_PER_BLOCK)).collect();
        Core {
            sb,
            groups,
            groups_dirty: BTreeSet::new(),
            initialized,
            untouched_from,
            order,
            cache,
            refs: HashMap::default(),
            dir_index: HashMap::default(),
            failed: None,
            log,
            rotors: Rotors::default(),
            moving: false,
        }
    }

    pub fn check_alive(&self) -> Result<(), Errno> {
        match &self.failed {
            Some(failure) => Err(failure.errno()),
            None => Ok(()),
        }
    }

    pub fn valid_ino(&self, ino: u64) -> Result<u32, Errno> {
        if ino == 0 || ino > self.sb.total_inodes() {
            return Err(Errno::STALE);
        }
        Ok(ino as u32)
    }

    /// Inode `ino` as stored; ESTALE when the slot is free, EIO when it is
    /// garbage.
    pub fn inode(&mut self, ino: u32) -> Result<DiskInode, Errno> {
        let (block, at) = self.table_block(ino)?;
        let bytes = match self.cache.read(&mut self.order, block) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        match DiskInode::decode(ino, &bytes[at..at + INODE_BYTES]) {
            InodeSlot::Used(inode) => Ok(inode),
            InodeSlot::Free => Err(Errno::STALE),
            InodeSlot::Garbage => Err(Errno::IO),
        }
    }

    /// Stores `inode` as inode `ino` (a delayed write); returns its block.
    pub fn put_inode(&mut self, ino: u32, inode: &DiskInode) -> Result<u64, Errno> {
        let (block, at) = self.table_block(ino)?;
        match self.cache.modify(&mut self.order, block) {
            Ok(bytes) => inode.encode(ino, &mut bytes[at..at + INODE_BYTES]),
            Err(e) => return Err(io_failed(self, e)),
        }
        Ok(block)
    }

    /// Zeroes inode slot `ino` (freed); returns its block.
    pub fn clear_inode(&mut self, ino: u32) -> Result<u64, Errno> {
        let (block, at) = self.table_block(ino)?;
        match self.cache.modify(&mut self.order, block) {
            Ok(bytes) => bytes[at..at + INODE_BYTES].fill(0),
            Err(e) => return Err(io_failed(self, e)),
        }
        Ok(block)
    }

    /// Where inode `ino` lies (its table block and the byte in it), the
    /// block given a buffer of zeros, not read, when no slot of it can
    /// have reached the disk since mkfs (past `untouched_from`): the
    /// first inodes of a new group cost no reads.
    fn table_block(&mut self, ino: u32) -> Result<(u64, usize), Errno> {
        let place = self.sb.inode_place(ino);
        let slot = (ino - 1) % self.sb.inodes_per_group;
        let g = ((ino - 1) / self.sb.inodes_per_group) as usize;
        let index = slot / INODES_PER_BLOCK;
        if index >= self.untouched_from[g] {
            // Every block before it is now counted as touched: reading
            // one later costs a read, never a wrong answer.
            self.untouched_from[g] = index + 1;
            if let Err(e) = self.cache.load_zeros(&mut self.order, place.0) {
                return Err(io_failed(self, e));
            }
            // Under `softdep`: what the disk holds is known (zeros), so the
            // first change keeps no copy of it.
            self.order.fresh(place.0);
        }
        Ok(place)
    }

    /// Writes `block` at once and durably, when the policy orders it.
    pub fn ordered(&mut self, block: u64) -> Result<(), Errno> {
        if self.order.writes_ordering_points() {
            if let Err(e) = self.cache.write_now(&mut self.order, block) {
                return Err(io_failed(self, e));
            }
        }
        Ok(())
    }

    /// Puts the changed groups' counts into their headers (delayed writes).
    pub fn stage_group_headers(&mut self) -> device::Result<()> {
        for g in std::mem::take(&mut self.groups_dirty) {
            let counts = self.groups[g as usize];
            let blocks = self.sb.group_blocks(g);
            // Counts past what the group holds (a header left behind its
            // bitmap by a crash, then frees) are written at their bound:
            // the reader refuses a header past it, and fsck recounts.
            let (data, inodes) = (blocks - self.sb.group_overhead_blocks(), self.sb.inodes_per_group);
            let header = GroupHeader {
                group: g,
                blocks,
                free_blocks: counts.free_blocks.min(data),
                free_inodes: counts.free_inodes.min(inodes),
                dirs: counts.dirs.min(inodes),
                fs_id: self.sb.fs_id,
                inodes_initialized: self.initialized[g as usize],
            };
            let start = self.sb.group_start(g);
            let block = self.cache.modify(&mut self.order, start)?;
            block[..512].copy_from_slice(&header.encode());
        }
        Ok(())
    }

    /// Slot `slot` of group `g` is being handed out: when it lies past
    /// the slots the group's header says were ever handed out, the header
    /// says more (`initialized_for`) before the inode can reach the disk,
    /// so a check that reads the table only that far never misses an
    /// inode. Under `log` the header goes in the same transaction as the
    /// inode or an earlier one (every commit stages the changed headers);
    /// under `softdep` the inode waits for the header on the disk as for
    /// its bit (`Softdep::raised_header`); under `sync` and `async` it is
    /// written and flushed now, whatever their order for the rest: a few
    /// writes a group, since each raise at least doubles the count.
    pub fn initialize_through(&mut self, g: u32, slot: u32) -> Result<(), Errno> {
        let now = self.initialized[g as usize];
        if slot < now {
            return Ok(());
        }
        self.initialized[g as usize] = initialized_for(slot, now, self.sb.inodes_per_group);
        self.groups_dirty.insert(g);
        if self.order.is_logged() {
            return Ok(());
        }
        if let Some(sd) = self.order.softdep_mut() {
            // Soft updates order it as a bit: the header, changed now in
            // memory, goes with the next write-back, and a new inode past
            // `now` waits for it on the disk (a flush here would wait for
            // the flush behind the calls, a checkpoint's whole).
            sd.raised_header(g, now);
            return self.stage_group_headers().map_err(|e| io_failed(self, e));
        }
        let start = self.sb.group_start(g);
        let staged = self.stage_group_headers().and_then(|()| self.cache.write_now(&mut self.order, start));
        staged.map_err(|e| io_failed(self, e))
    }

    /// The superblock, one generation on, in its next slot: the bytes
    /// and the block they go to.
    pub fn next_superblock(&mut self, align: usize) -> (AlignedBuf, u64) {
        self.sb.generation += 1;
        let mut buf = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(align));
        // The summary counts at their bounds at most, as the groups' are
        // (`stage_group_headers`): the reader refuses a slot past them.
        let sb = &self.sb;
        let data =
            sb.blocks - sb.first_group_block - u64::from(sb.groups) * u64::from(sb.group_overhead_blocks());
        let inodes = sb.total_inodes();
        let bounded = Superblock {
            damage: if self.moving { sb.damage.max(Damage::Unknown) } else { sb.damage },
            free_blocks: sb.free_blocks.min(data),
            free_inodes: sb.free_inodes.min(inodes),
            dirs: sb.dirs.min(inodes),
            ..sb.clone()
        };
        let bytes = bounded.encode();
        buf[..bytes.len()].copy_from_slice(&bytes);
        (buf, self.sb.generation % 2)
    }

    pub fn is_referenced(&self, ino: u32) -> bool {
        self.refs.get(&ino).is_some_and(|r| r.lookups > 0 || r.opens > 0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::initialized_for;

    proptest! {
        /// A raise covers the slot handed out, at least doubles what was
        /// counted (at least 256), stays in whole table blocks and never
        /// passes the group's slots.
        #[test]
        fn a_raise_covers_the_slot_doubles_and_stays_in_the_table(
            blocks in 1u32..2048,
            now_blocks in 0u32..2048,
            slot_seed in any::<u32>(),
        ) {
            let per_group = blocks * 16;
            let now = (now_blocks % (blocks + 1)) * 16;
            prop_assume!(now < per_group);
            let slot = now + slot_seed % (per_group - now);
            let raised = initialized_for(slot, now, per_group);
            prop_assert!(raised > slot);
            prop_assert!(raised <= per_group);
            prop_assert_eq!(raised % 16, 0);
            prop_assert!(raised >= (2 * now).max(256).min(per_group));
        }
    }
}
