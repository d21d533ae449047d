//! The state of a mounted file system, behind the one lock `ops.rs` takes
//! for each call: the superblock, the groups' counts, the buffer cache,
//! and the inodes the kernel (or a workload) holds references to.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{mpsc, Arc};

use blocklog::LoggedDevice;
use rustc_hash::FxHashMap as HashMap;
use std::time::Duration;

use device::AlignedBuf;
use fsapi::Errno;

use crate::cache::Cache;
use crate::format::{
    Damage, DiskInode, GroupHeader, InodeSlot, Policy, Superblock, BLOCK_BYTES, INODES_PER_BLOCK, INODE_BYTES,
};
use crate::pages::Pages;

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
    pub cache: Cache,
    pub policy: Policy,
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
        Core {
            sb,
            groups,
            groups_dirty: BTreeSet::new(),
            initialized,
            cache,
            policy,
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
        let (block, at) = self.sb.inode_place(ino);
        let bytes = match self.cache.read(block) {
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
        let (block, at) = self.sb.inode_place(ino);
        match self.cache.modify(block) {
            Ok(bytes) => inode.encode(ino, &mut bytes[at..at + INODE_BYTES]),
            Err(e) => return Err(io_failed(self, e)),
        }
        Ok(block)
    }

    /// Zeroes inode slot `ino` (freed); returns its block.
    pub fn clear_inode(&mut self, ino: u32) -> Result<u64, Errno> {
        let (block, at) = self.sb.inode_place(ino);
        match self.cache.modify(block) {
            Ok(bytes) => bytes[at..at + INODE_BYTES].fill(0),
            Err(e) => return Err(io_failed(self, e)),
        }
        Ok(block)
    }

    /// Writes `block` at once and durably, when the policy orders it.
    pub fn ordered(&mut self, block: u64) -> Result<(), Errno> {
        if self.policy == Policy::Sync {
            if let Err(e) = self.cache.write_now(block) {
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
            let block = self.cache.modify(start)?;
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
    /// under the other policies it is written and flushed now, whatever
    /// their order for the rest: a few writes a group, since each raise
    /// at least doubles the count.
    pub fn initialize_through(&mut self, g: u32, slot: u32) -> Result<(), Errno> {
        let now = self.initialized[g as usize];
        if slot < now {
            return Ok(());
        }
        self.initialized[g as usize] = initialized_for(slot, now, self.sb.inodes_per_group);
        self.groups_dirty.insert(g);
        if self.policy == Policy::Log {
            return Ok(());
        }
        let start = self.sb.group_start(g);
        let staged = self.stage_group_headers().and_then(|()| self.cache.write_now(start));
        staged.map_err(|e| io_failed(self, e))
    }

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
        if self.policy != Policy::Log {
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

    /// Under `softdep`: a link of `ino` removed in memory, whose count
    /// must not drop on the disk before `gone` holds. Recorded before the
    /// count drops in memory.
    pub fn removed(&mut self, ino: u32, weight: u32, gone: crate::softdep::Gone) {
        if let Some(sd) = &mut self.cache.sd {
            sd.removed(ino, weight, gone);
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
        if self.cache.sd.is_none() || self.moving {
            return Ok(());
        }
        self.moving = true;
        self.write_superblock_now()
    }

    /// Writes the superblock into its next slot past the cache, durably,
    /// with every write before it.
    fn write_superblock_now(&mut self) -> Result<(), Errno> {
        let (buf, slot) = self.next_superblock(self.cache.buffer_align());
        if let Err(e) = self.cache.write_superblock_now(&buf, slot * BLOCK_BYTES as u64) {
            return Err(io_failed(self, e));
        }
        Ok(())
    }

    /// Under `softdep`: a directory moved between directories; the mark
    /// stays up until the disk holds the move whole.
    pub fn moved(&mut self, m: crate::softdep::Move) {
        if let Some(sd) = &mut self.cache.sd {
            sd.moved(m);
        }
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
            let Some(listed) = self.cache.sd.as_ref().filter(|_| self.moving).map(|sd| sd.move_blocks())
            else {
                return Ok(());
            };
            if let Err(e) = self.cache.write_listed(&listed).and_then(|_| self.cache.flush()) {
                return Err(io_failed(self, e));
            }
            self.apply_released()?;
        }
        self.lower_moving_mark()
    }

    /// Whether the superblock's mark of a directory moving can come down:
    /// it is up and every move is on the disk. The caller writes the
    /// superblock then (with `moving` false).
    pub fn settle_moving(&mut self) -> bool {
        if !self.moving {
            return false;
        }
        let Some(mut sd) = self.cache.sd.take() else { return false };
        let settled = sd.moves_settled(&self.cache);
        self.cache.sd = Some(sd);
        if !settled {
            return false;
        }
        self.moving = false;
        true
    }

    /// Under `softdep`: write-back passes (each flushed, the released
    /// blocks and inodes cleared in the maps after it) until nothing is
    /// dirty and nothing waits, or a pass moves nothing on (an inode still
    /// open keeps what waits on it). Each pass lets the next layer of
    /// dependencies go out complete.
    pub fn softdep_sync(&mut self) -> Result<(), Errno> {
        const PASSES_MAX: usize = 256;
        let mut last = None;
        let mut rescanned = false;
        if let Err(e) = self.stage_group_headers().and_then(|()| self.cache.checkpoint()) {
            return Err(io_failed(self, e));
        }
        for _ in 0..PASSES_MAX {
            if let Err(e) = self.stage_group_headers().and_then(|()| self.cache.write_back(true)) {
                return Err(io_failed(self, e));
            }
            self.apply_released()?;
            let (dirty_meta, dirty_data) = (self.cache.dirty_meta(), self.cache.dirty_data());
            let Some(sd) = &mut self.cache.sd else { return Ok(()) };
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
                self.cache.softdep_rescan();
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
        match &self.cache.sd {
            Some(sd) if dirty_meta > 0 || dirty_data > 0 || !sd.idle() => Err(Errno::IO),
            _ => Ok(()),
        }
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

    /// Under `log`: commits everything changed so far as one transaction
    /// (the file data in place first, then the metadata with the group
    /// headers and the superblock through the log, then the commit).
    pub fn commit(&mut self) -> device::Result<()> {
        self.stage_group_headers()?;
        let (sb, slot) = self.next_superblock(1);
        self.cache.modify(slot)?.copy_from_slice(&sb);
        self.cache.write_back(true)?;
        self.log.freed.clear();
        self.log.last_commit = self.cache.now();
        Ok(())
    }

    /// Under `log`, a commit that need not be durable when it returns (the
    /// one a full transaction forces, the syncer's): the group headers,
    /// the superblock, the file data in place and the metadata into the
    /// transaction, sealed; the mount's committer thread then writes it to
    /// the log and flushes while the calls after it go on, into the next
    /// transaction, as a journal's commit thread lets them. One commit at
    /// most is in flight: a second waits for the first. Without a
    /// committer thread (or under another policy), [`Core::commit`].
    pub fn commit_behind(&mut self) -> device::Result<()> {
        let Some(dev) = self.log.dev.clone() else { return self.commit() };
        if dev.sealed_waiting() > 0 {
            dev.commit_sealed()?;
        }
        self.stage_group_headers()?;
        let (sb, slot) = self.next_superblock(1);
        self.cache.modify(slot)?.copy_from_slice(&sb);
        self.cache.write_back(false)?;
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
        if let Err(e) = self.cache.write_back_meta() {
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

    pub fn is_referenced(&self, ino: u32) -> bool {
        self.refs.get(&ino).is_some_and(|r| r.lookups > 0 || r.opens > 0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::{initialized_for, FreedBlocks, OPEN};

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
