//! The write-ordering policy's home: which metadata writes go out at
//! once, in what order, and what a write may carry. One value,
//! [`Ordering`], is owned by the mount's `Core` beside the buffer cache
//! (never inside it), as FreeBSD reaches soft updates from its buffer
//! cache through `bioops` and NetBSD reaches WAPBL through `wapbl_ops`.
//! Two families of hooks, each a no-op for the policies it does not
//! concern:
//!
//! - file-system events, called by the operations (`alloc.rs`, `dir.rs`,
//!   `ops.rs`): a block or inode allocated, blocks or an inode freed, an
//!   entry added or removed, a directory moved;
//! - buffer I/O, called by the cache (`cache.rs`): a block about to
//!   change, the image a write of it carries, a write done, a flush done.
//!
//! What each policy does with whole calls lives beside: `softdep.rs`
//! (write-back passes, the moving mark, releasing what waited), `log.rs`
//! (transactions and their commits; `log_state.rs` what they keep
//! between calls and the blocks they free), `fsync.rs` (an fsync's share
//! under each), `syncer.rs` (the periodic pass and a full sync) and
//! `writeback.rs` with `checkpoint.rs` (soft updates' schedule over the
//! cache: buffers held back, checkpoints behind a flush, retired
//! directory blocks). The dependencies themselves are in `softdep/`, the
//! log's replay in `wapbl.rs`.

mod checkpoint;
mod fsync;
mod log;
mod log_state;
mod softdep;
mod syncer;
mod writeback;

use device::AlignedBuf;

use crate::format::{Policy, Superblock};
use crate::softdep::{block_copy, Blocks, FreedFrom, Gone, Image, Kind, Move, Softdep, SoftdepStats, Wait};

pub use checkpoint::CallerFlush;
use checkpoint::Checkpoints;
pub use log_state::LogState;
pub use syncer::SYNCER_AGE;

/// A mount's policy, with what it keeps between calls.
pub enum Ordering {
    /// Metadata written back whenever; nothing promised after a crash.
    Async,
    /// Each ordering point written at once (`Core::ordered`).
    Sync,
    /// Soft updates: the dependencies that decide what each metadata
    /// write may carry, and hold freed blocks and inodes until nothing on
    /// the disk points to them, with its schedule over the cache's
    /// write-back. Boxed: large, and moved with the core.
    Softdep(Box<SoftdepState>),
    /// Metadata through the file system's own block log, a transaction a
    /// commit (the transactions' state is `Core::log`).
    Log,
}

/// What `softdep` keeps: the dependencies and the write-back schedule.
pub struct SoftdepState {
    pub deps: Softdep,
    pub io: Checkpoints,
}

/// Under `softdep`, what a write-back does with a metadata block whose
/// dependencies are not all on the disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Waiting {
    /// Writes it with those updates rolled back (it stays dirty, to go
    /// again complete): every buffer can go, so a sync always ends.
    RollBack,
    /// Keeps it dirty, unwritten, until a checkpoint's flush lets it go
    /// complete (an eviction's: a copy rolled back would only be written
    /// again).
    HoldBack,
}

/// What a write-back does with one dirty metadata block ([`Ordering::plan`]).
pub enum Plan {
    /// Writes memory's copy.
    AsMemory,
    /// Writes nothing now: held back, or its safe copy is what its last
    /// write carried already.
    Hold,
    /// Writes this copy (an update rolled back, or the disk's own bytes):
    /// the block stays dirty, to go again complete.
    Image(AlignedBuf),
}

impl Ordering {
    /// The state a mount of `sb` under `policy`, over a cache of
    /// `capacity_blocks` buffers, starts with.
    pub fn new(policy: Policy, sb: &Superblock, capacity_blocks: usize) -> Ordering {
        match policy {
            Policy::Async => Ordering::Async,
            Policy::Sync => Ordering::Sync,
            Policy::Softdep => Ordering::Softdep(Box::new(SoftdepState {
                deps: Softdep::new(sb.clone()),
                io: Checkpoints::new(capacity_blocks),
            })),
            Policy::Log => Ordering::Log,
        }
    }

    /// Under `softdep`, the dependencies.
    pub fn softdep(&self) -> Option<&Softdep> {
        match self {
            Ordering::Softdep(s) => Some(&s.deps),
            _ => None,
        }
    }

    /// Under `softdep`, the dependencies, to change.
    pub fn softdep_mut(&mut self) -> Option<&mut Softdep> {
        match self {
            Ordering::Softdep(s) => Some(&mut s.deps),
            _ => None,
        }
    }

    /// Whether each ordering point is written at once (`sync`).
    pub fn writes_ordering_points(&self) -> bool {
        matches!(self, Ordering::Sync)
    }

    /// Whether metadata goes through the file system's log (`log`):
    /// whatever changes together goes in one transaction.
    pub fn is_logged(&self) -> bool {
        matches!(self, Ordering::Log)
    }

    /// Whether writes are held back or rolled back until what they
    /// depend on is on the disk (`softdep`).
    pub fn holds_back(&self) -> bool {
        matches!(self, Ordering::Softdep(_))
    }

    /// Under `softdep`: freed blocks or inodes wait to be released, or a
    /// removal waits to reach the disk (a full write-back moves them on).
    pub fn waiting(&self) -> bool {
        self.softdep().is_some_and(|sd| !sd.idle())
    }

    /// Under `softdep`: blocks or inodes released since they were last
    /// cleared in the maps (`Core::apply_released`).
    pub fn released(&self) -> bool {
        self.softdep().is_some_and(|sd| !sd.released_blocks.is_empty() || !sd.released_inodes.is_empty())
    }

    /// Under `softdep`, its counters.
    pub fn stats(&self) -> Option<SoftdepStats> {
        self.softdep().map(|sd| sd.stats)
    }

    // File-system events.

    pub fn allocated_block(&mut self, block: u32) {
        if let Some(sd) = self.softdep_mut() {
            sd.allocated_block(block);
        }
    }

    /// `block`, allocated (`allocated_block` was called), is pointed to
    /// marked unwritten: no contents of its own need reach the disk first.
    pub fn allocated_unwritten(&mut self, block: u32) {
        if let Some(sd) = self.softdep_mut() {
            sd.allocated_unwritten(block);
        }
    }

    /// Unwritten `block` takes its first write: its pointer loses the
    /// mark once its contents are on the disk.
    pub fn converted(&mut self, block: u32) {
        if let Some(sd) = self.softdep_mut() {
            sd.converted(block);
        }
    }

    pub fn allocated_inode(&mut self, ino: u32) {
        if let Some(sd) = self.softdep_mut() {
            sd.allocated_inode(ino);
        }
    }

    /// Blocks no longer pointed to in memory: under `softdep`, held until
    /// `waits` hold, their buffers dropped through `discard`, and the
    /// directory blocks among them returned, to be written once more
    /// before they go. `Err`: the blocks, given back, for the caller to
    /// free now (every other policy orders its own writes).
    pub fn hold_blocks(
        &mut self,
        blocks: Vec<u32>,
        from: FreedFrom,
        waits: Vec<Wait>,
        discard: &mut dyn FnMut(u64),
    ) -> Result<Vec<u64>, Vec<u32>> {
        match self {
            Ordering::Softdep(s) => {
                let (deps, io) = (&mut s.deps, &mut s.io);
                Ok(deps.hold_blocks(blocks, from, waits, &mut |b| {
                    io.forget(b);
                    discard(b)
                }))
            }
            _ => Err(blocks),
        }
    }

    /// A removed inode's blocks and slot, all held until the slot is free
    /// on the disk, as [`Ordering::hold_blocks`].
    pub fn hold_removed(
        &mut self,
        ino: u32,
        dir: bool,
        blocks: Vec<u32>,
        from: FreedFrom,
        discard: &mut dyn FnMut(u64),
    ) -> Result<Vec<u64>, Vec<u32>> {
        match self {
            Ordering::Softdep(s) => {
                let (deps, io) = (&mut s.deps, &mut s.io);
                Ok(deps.hold_removed(ino, dir, blocks, from, &mut |b| {
                    io.forget(b);
                    discard(b)
                }))
            }
            _ => Err(blocks),
        }
    }

    /// A freed inode slot: under `softdep`, held until it is free on the
    /// disk (true); otherwise the caller frees it now (false).
    pub fn hold_inode(&mut self, ino: u32, dir: bool) -> bool {
        match self.softdep_mut() {
            Some(sd) => {
                sd.hold_inode(ino, dir);
                true
            }
            None => false,
        }
    }

    /// An entry naming `ino` is at byte `at` of directory block `block`.
    pub fn added(&mut self, block: u64, at: usize, ino: u32) {
        if let Some(sd) = self.softdep_mut() {
            sd.added(block, at, ino);
        }
    }

    /// A new name of `ino` is in `dir`'s `block` (what a per-file fsync
    /// makes durable with the file).
    pub fn named(&mut self, ino: u32, dir: u32, block: u64) {
        if let Some(sd) = self.softdep_mut() {
            sd.named(ino, dir, block);
        }
    }

    /// A link of `ino` removed in memory, whose count must not drop on
    /// the disk before `gone` holds. Recorded before the count drops in
    /// memory.
    pub fn removed(&mut self, ino: u32, weight: u32, gone: Gone) {
        if let Some(sd) = self.softdep_mut() {
            sd.removed(ino, weight, gone);
        }
    }

    /// A directory moved between directories.
    pub fn moved(&mut self, m: Move) {
        if let Some(sd) = self.softdep_mut() {
            sd.moved(m);
        }
    }

    // Buffer I/O.

    /// Metadata block `block`, holding `current`, is about to change.
    pub fn before_change(&mut self, block: u64, current: &[u8]) {
        if let Some(sd) = self.softdep_mut() {
            sd.before_change(block, current);
        }
    }

    /// `block` was newly allocated and is zeroed in memory.
    pub fn fresh(&mut self, block: u64) {
        if let Some(sd) = self.softdep_mut() {
            sd.fresh(block);
        }
    }

    /// `block` holds file data.
    pub fn data(&mut self, block: u64) {
        if let Some(sd) = self.softdep_mut() {
            sd.data(block);
        }
    }

    /// What metadata block `block` holds.
    pub fn set_kind(&mut self, block: u64, kind: Kind) {
        if let Some(sd) = self.softdep_mut() {
            sd.set_kind(block, kind);
        }
    }

    /// What a write-back of dirty metadata block `block`, which memory
    /// holds as `memory`, writes (`waiting`: whether a block that cannot
    /// go complete is rolled back or held back).
    pub fn plan(&self, blocks: &dyn Blocks, block: u64, memory: &[u8], waiting: Waiting) -> Plan {
        let Some(sd) = self.softdep() else { return Plan::AsMemory };
        #[cfg(test)]
        if sd.ignore_rules {
            return Plan::AsMemory;
        }
        if waiting == Waiting::HoldBack && !sd.unwritten_since_allocated(block) {
            // Held back unless it goes complete: whether it does is all
            // that is needed.
            return match sd.goes_as_memory(blocks, block, memory) {
                true => Plan::AsMemory,
                false => Plan::Hold,
            };
        }
        let image = match sd.image(blocks, block, memory) {
            Image::Memory => return Plan::AsMemory,
            Image::Durable if sd.last_written_is_durable(block) => return Plan::Hold,
            Image::Durable => block_copy(sd.durable_bytes(block).expect("a durable image has a shadow")),
            Image::Rolled(image) => image,
        };
        match sd.last_written_is(block, &image) {
            true => Plan::Hold,
            false => Plan::Image(image),
        }
    }

    /// In debug builds and tests: panics if writing `image` as metadata
    /// block `block` would break a rule of soft updates as
    /// `softdep/invariants.rs` reads them again from the bytes (a write
    /// the rules let through wrongly).
    pub fn assert_rules(&self, blocks: &dyn Blocks, block: u64, image: &[u8]) {
        if !cfg!(debug_assertions) {
            return;
        }
        if let Some(Err(broken)) = self.softdep().map(|sd| sd.rules_hold(blocks, block, image)) {
            panic!("soft updates: writing block {block} would break {broken}");
        }
    }

    /// Whether `block` can be written as memory holds it.
    pub fn goes_as_memory(&self, blocks: &dyn Blocks, block: u64, memory: &[u8]) -> bool {
        self.softdep().is_none_or(|sd| sd.goes_as_memory(blocks, block, memory))
    }

    /// `block` was written: file data (`data`), or metadata carrying
    /// `image` (None: as memory held it). One written with an update
    /// rolled back stays dirty, held until a flush.
    pub fn written(&mut self, block: u64, data: bool, image: Option<AlignedBuf>) {
        let Ordering::Softdep(s) = self else { return };
        match image.is_some() {
            true => s.io.rolled.insert(block),
            false => s.io.rolled.remove(&block),
        };
        match data {
            true => s.deps.written_data(block),
            false => s.deps.written(block, image),
        }
    }

    /// A flush is issued behind the calls: the writes before it are
    /// sealed apart from those after.
    pub fn seal(&mut self) {
        if let Ordering::Softdep(s) = self {
            if s.deps.seal() {
                s.io.seals += 1;
            }
        }
    }

    /// The flush issued at the last seal returned.
    pub fn sealed_flushed(&mut self, blocks: &dyn Blocks) {
        if let Ordering::Softdep(s) = self {
            s.deps.sealed_flushed(blocks);
            s.io.seals_flushed = s.io.seals;
        }
    }

    /// Everything that waits looked at again (`Softdep::rescan`).
    pub fn rescan(&mut self, blocks: &dyn Blocks) {
        if let Some(sd) = self.softdep_mut() {
            sd.rescan(blocks);
        }
    }

    /// Metadata blocks whose disk image is kept apart from memory.
    pub fn shadows(&self) -> usize {
        self.softdep().map_or(0, Softdep::shadows)
    }

    /// Whether the disk's copy of `block` is kept apart from memory's.
    pub fn shadowed(&self, block: u64) -> bool {
        self.softdep().is_some_and(|sd| sd.durable_bytes(block).is_some())
    }
}
