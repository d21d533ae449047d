//! The `softdep` policy: soft updates, after McKusick and Ganger. Every
//! metadata write is delayed, none is synchronous, and yet a crash leaves
//! only leaks (blocks and inodes marked in use that nothing names, link
//! counts too high, summary counts off). The rules:
//!
//! 1. A block pointer reaches the disk only after the block's bit in its
//!    bitmap and the block's own first contents have (a new block is
//!    *settled* once both writes were flushed).
//! 2. A new inode reaches the disk only after its bit in the inode bitmap
//!    has, and a new directory's (or long symlink's) inode only once its
//!    first block is settled.
//! 3. A directory entry reaches the disk only after its inode does, with a
//!    link count that covers this entry as well as every entry whose
//!    removal is not yet on the disk; an entry naming a directory, only
//!    after the count of the parent its `..` names, raised for that `..`,
//!    is on the disk too (FreeBSD's MKDIR_PARENT). A new directory's inode
//!    and first block may go before its parent's count: until its entry
//!    does, nothing reaches it (fsck finds it unattached, a leak), so
//!    each level of a new tree does not wait on the level above.
//! 4. A link count is lowered, and an inode freed, only after the
//!    directory blocks without its entries are on the disk; a removed
//!    directory's parent loses the link its `..` made once the entry
//!    naming the directory is off the disk (unattached there, its `..` is
//!    no link: fsck puts it in lost+found), not only once its inode is
//!    gone, so removing a tree does not take a pass per level.
//! 5. A freed block or inode is not reused (its bit stays set) until
//!    every pointer to it is cleared on the disk.
//!
//! As soft updates does, an update whose dependencies are not on the disk
//! yet is *rolled back in the copy being written*: a pointer to an
//! unsettled block is written as 0 (a hole), a new entry whose inode is
//! not ready as an empty record (or the entry it replaced), a new inode as
//! the free slot it was, a link count as the higher one. The buffer stays
//! dirty and goes out again, complete, once the dependency is on the disk;
//! so every buffer can always be written and no write waits.
//!
//! How the dependencies are known: the cache keeps, for each metadata
//! block that differs from the disk, the image the disk holds (the
//! *shadow*: taken when a clean block is first changed, and replaced by
//! what each write put there once a flush makes it durable). Each rule is
//! then a comparison between what memory holds and what the disk holds,
//! and the work that waited on a write (lowering a count, releasing a
//! freed block) runs after the flush that made the write durable.

use device::AlignedBuf;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;

mod held;
mod invariants;
mod names;
mod rules;
mod worklist;

use held::Held;
pub use held::Wait;
use smallvec::SmallVec;

use crate::format::{
    all_zero, block_of, known_kind, pointer_at, set_pointer, DirRecord, DiskInode, InodeSlot, RecordRef,
    Superblock, BLOCK_BYTES, DIRECT_POINTERS, DIR_CHUNK_BYTES, DT_DIR, INLINE_SYMLINK_BYTES,
    INODES_PER_BLOCK, INODE_BYTES, POINTERS_PER_BLOCK, S_IFDIR, S_IFLNK, UNWRITTEN,
};
use crate::pages::Pages;

/// What a metadata block that is not an inode block holds (inode blocks
/// are known by their place).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Indirect,
    /// A long symbolic link's target: written whole when made, never
    /// changed.
    Symlink,
    /// An inode's extended attributes: written whole to a new block at
    /// every change, never changed in place.
    Xattr,
}

/// Whose blocks are freed, which tells which of them may be metadata.
pub enum FreedFrom {
    /// A regular file's: its indirect blocks (`pointers`) and its data,
    /// which no map holds (`Softdep::data`).
    File { pointers: Vec<u32> },
    /// Any other's (a directory's blocks, a symbolic link's): each looked
    /// up.
    Other,
}

/// What a removed link waits for before its inode's count may drop on
/// the disk: the entry at byte `at` of directory block `block` no longer
/// names inode `names` there, or the block itself was freed and released
/// (its directory is gone from the disk). For an entry's own inode,
/// `names` is that inode; for the parent a removed directory's `..`
/// counted, the directory: once its entry is gone from the disk, it is
/// unattached there, and its `..` is no link (fsck puts it in lost+found).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone {
    pub block: u64,
    pub at: usize,
    pub names: u32,
}

struct Removal {
    ino: u32,
    weight: u32,
    gone: Gone,
}

/// What a metadata block's write may carry.
#[derive(Debug, PartialEq, Eq)]
pub enum Image {
    /// What memory holds.
    Memory,
    /// What the disk holds already (every change waits).
    Durable,
    /// A copy with some updates rolled back.
    Rolled(AlignedBuf),
}

/// Blocks as memory holds them, for the rules that look at other blocks
/// than the one being written.
pub trait Blocks {
    /// The bytes of `block` as memory holds them (read from the device
    /// when not cached); None when it cannot be read.
    fn memory(&self, block: u64) -> Option<Cow<'_, [u8]>>;
    /// The bytes of `block` if the cache holds it (no read).
    fn cached(&self, block: u64) -> Option<&[u8]>;
    fn dirty(&self, block: u64) -> bool;
}

/// Counters, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftdepStats {
    /// Metadata blocks written with an update rolled back.
    pub rollbacks: u64,
    /// Freed blocks and inodes released after their pointers were gone.
    pub released_blocks: u64,
    pub released_inodes: u64,
    /// fsyncs that wrote what their file needs alone (`Ffs::fsync_file`),
    /// and those that wrote the whole cache instead (its dependencies did
    /// not settle within the passes it takes).
    pub file_fsyncs: u64,
    pub whole_fsyncs: u64,
}

/// The soft-updates state of a mount.
pub struct Softdep {
    sb: Superblock,
    /// Events (allocations, frees, writes) in order.
    seq: u64,
    /// When a write of each bitmap block was last made durable (the rules
    /// ask of bitmaps only; other blocks are asked of while fresh, in
    /// `fresh_blocks`).
    last_durable: Ticks,
    /// What the disk holds, for metadata blocks that may differ from memory.
    durable: HashMap<u64, Shadow>,
    /// The writes since the last flush was issued.
    open: Epoch,
    /// The writes a flush in flight covers (`seal`): durable once it
    /// returns, while the writes after it wait for the next.
    sealed: Option<Epoch>,
    kinds: HashMap<u64, Kind>,
    /// Blocks allocated, not yet settled (file data among them: no set or
    /// map is touched per data block but these pages).
    fresh_blocks: Pages<FreshBlock>,
    /// Inodes allocated, not yet settled: when.
    fresh_inodes: Ticks,
    /// Groups whose header was raised to count more inode slots
    /// (`Core::initialize_through`) and not yet written durably since:
    /// the first slot the raise added, and when. A new inode in a slot
    /// past it waits for that header as for its bit.
    raised: HashMap<u32, (u32, u64)>,
    /// Removals waiting, by the block whose copy on the disk they watch.
    removals: HashMap<u64, Vec<Removal>>,
    removal_count: usize,
    /// Links removed in memory, not yet on the disk, by inode.
    pending: Pages<u32>,
    held: Held,
    /// Freed inodes held until their slot is free on the disk, by the
    /// block they are in.
    held_inodes: HashMap<u64, Vec<HeldInode>>,
    held_inode_count: usize,
    /// Released, for the file system to clear in its bitmaps (and, of
    /// `released_meta`, in its cache: file data left it when freed).
    pub released_blocks: Vec<u32>,
    pub released_meta: Vec<u32>,
    pub released_inodes: Vec<(u32, bool)>,
    pub stats: SoftdepStats,
    /// What the metadata writes since the last signature carried.
    written_digest: u64,
    /// Entries made in memory that may not be on the disk yet: inode ->
    /// (the directory, the block holding the entry). What a file's fsync
    /// makes durable besides the file (its new names, FreeBSD's
    /// `diradd`s); pruned once the blocks are on the disk as memory holds
    /// them (`prune_names`).
    names: HashMap<u32, SmallVec<[(u32, u64); 1]>>,
    /// `names` is pruned when it grows past this.
    names_mark: usize,
    /// Directories moved between directories, until the disk holds each
    /// move whole (`Core::mark_moving`).
    moves: Vec<Move>,
    /// Tests only: every metadata write goes as memory holds it, the
    /// rules skipped (the fault the write check must catch).
    #[cfg(test)]
    pub ignore_rules: bool,
}

/// A directory moved between directories: where its old entry was, the
/// block of its new one, and where its `..` is (block, byte).
#[derive(Clone, Copy, Debug)]
pub struct Move {
    pub ino: u32,
    /// The parents it left and joined.
    pub from: u32,
    pub to: u32,
    pub old: (u64, usize),
    pub new: u64,
    pub dotdot: (u64, usize),
}

/// Writes between two flushes: what the flush after them makes durable.
#[derive(Default)]
struct Epoch {
    /// Metadata blocks written.
    written: HashSet<u64>,
    /// What the last write of each put there: a copy when it is not what
    /// memory holds (or memory changed since), else its number in
    /// `as_memory`.
    inflight: HashMap<u64, AlignedBuf>,
    as_memory: HashSet<u64>,
    /// Bitmaps and fresh blocks written, with the event of each write.
    bitmaps: Vec<(u64, u64)>,
    fresh: Vec<(u64, u64)>,
}

impl Epoch {
    fn forget(&mut self, block: u64) {
        self.written.remove(&block);
        self.inflight.remove(&block);
        self.as_memory.remove(&block);
    }

    /// Memory is about to change `block`: a write of it that carried
    /// memory keeps a copy (`current`). Whether one did.
    fn keep_as_written(&mut self, block: u64, current: &[u8]) -> bool {
        let kept = self.as_memory.remove(&block);
        if kept {
            self.inflight.insert(block, block_copy(current));
        }
        kept
    }

    /// What the last write of `block` in this epoch carried: None when
    /// none did; Some(None) when it was memory, unchanged since.
    fn last_write(&self, block: u64) -> Option<Option<&[u8]>> {
        if self.as_memory.contains(&block) {
            return Some(None);
        }
        self.inflight.get(&block).map(|b| Some(&b[..]))
    }
}

/// An event's sequence number per block (0 is none).
type Ticks = Pages<u64>;

/// A block allocated and not yet settled (rule 1): when it was
/// allocated (or, unwritten, took its first write), when its contents
/// were last written, and when a write of them was last made durable
/// (sequence numbers; 0 is never).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct FreshBlock {
    allocated: u64,
    written: u64,
    durable: u64,
    /// When its bit was set in its group's block map, which must be
    /// durable after it: `allocated`, or for an unwritten block's first
    /// write the allocation's (0: durable already).
    mapped: u64,
    /// Pointed to marked unwritten: it reads as zeros whatever it holds,
    /// so no write of its contents is waited for.
    unwritten: bool,
}

/// The disk's image of a block: a copy, or zeros for a block newly
/// allocated (nothing on the disk names it; most are file data, which
/// needs no copy at all).
enum Shadow {
    Zeros,
    Bytes(AlignedBuf),
}

/// A copy of a block's bytes (a shadow, an image), in a page-aligned
/// buffer: those are kept for reuse when dropped (`AlignedBuf`), and a
/// tree's removal makes and drops tens of thousands.
pub fn block_copy(bytes: &[u8]) -> AlignedBuf {
    AlignedBuf::copy_of(bytes, BLOCK_BYTES)
}

static ZEROS: [u8; BLOCK_BYTES] = [0; BLOCK_BYTES];

/// `Softdep::names` is not pruned below this many inodes.
const NAMES_MARK_MIN: usize = 1024;

impl Shadow {
    fn bytes(&self) -> &[u8] {
        match self {
            Shadow::Zeros => &ZEROS,
            Shadow::Bytes(b) => b,
        }
    }
}

fn slot_is_free(bytes: &[u8]) -> bool {
    all_zero(bytes)
}

/// The link count of the inode in a slot of a block iolab wrote or holds,
/// if the slot holds one (`used`, without decoding the rest).
fn links(slot: &[u8]) -> Option<u32> {
    let mode = u16::from_le_bytes([slot[0], slot[1]]);
    known_kind(mode).then(|| u32::from(u16::from_le_bytes([slot[2], slot[3]])))
}

/// The inode in a slot of a block iolab wrote or holds (memory, or what
/// it wrote to the disk): its checksum is its own.
fn used(ino: u32, bytes: &[u8]) -> Option<DiskInode> {
    match DiskInode::decode_trusted(ino, bytes) {
        InodeSlot::Used(inode) => Some(inode),
        _ => None,
    }
}

/// The record that starts at byte `at` of directory block `block`, if one
/// does and it names an inode.
pub fn record_at(block: &[u8], at: usize) -> Option<RecordRef<'_>> {
    let mut walk = at - at % DIR_CHUNK_BYTES;
    while walk < at {
        walk += DirRecord::peek(block, walk)?.reclen as usize;
    }
    (walk == at).then(|| DirRecord::peek(block, at)).flatten().filter(|r| r.ino != 0)
}

/// The records of a directory block that name an inode, with where they
/// start, in order: each chunk walked until its end or a malformed
/// record (what [`record_at`] finds, in one pass).
fn records(block: &[u8]) -> Vec<(usize, RecordRef<'_>)> {
    let mut out = Vec::new();
    for chunk in (0..block.len()).step_by(DIR_CHUNK_BYTES) {
        let mut at = chunk;
        while at < chunk + DIR_CHUNK_BYTES {
            let Some(rec) = DirRecord::peek(block, at) else { break };
            if rec.ino != 0 {
                out.push((at, rec));
            }
            at += rec.reclen as usize;
        }
    }
    out
}

/// Inode block `memory` with the slots whose bits are set in `slots`
/// as `disk` holds them.
fn with_disk_slots(memory: &[u8], disk: &[u8], slots: u32) -> AlignedBuf {
    let mut bytes = block_copy(memory);
    for k in (0..INODES_PER_BLOCK as usize).filter(|k| slots & (1 << k) != 0) {
        let range = k * INODE_BYTES..(k + 1) * INODE_BYTES;
        bytes[range.clone()].copy_from_slice(&disk[range]);
    }
    bytes
}

/// The last inode block a rule looked at in memory, kept for the next
/// entry's (a directory block's entries name neighbouring inodes).
#[derive(Default)]
struct InodeBlockMemo<'a> {
    block: u64,
    bytes: Option<Cow<'a, [u8]>>,
}

/// A freed inode held back until its slot is free on the disk: whether it
/// was a directory, and, when it was removed, the blocks it held (`meta`
/// among them, as in a held group). Nothing on the disk points to those
/// once the slot is free (an indirect block among them is unreachable
/// then, and so is what it points to): they go with the inode, with no
/// group of their own to hold and look at (removing a tree frees a file
/// per inode, 211,000 for glibc ten times).
struct HeldInode {
    ino: u32,
    dir: bool,
    blocks: SmallVec<[u32; 4]>,
    meta: Vec<u32>,
}

/// The block whose copy on the disk `wait` reads.
fn wait_block(sb: &Superblock, wait: Wait) -> u64 {
    match wait {
        Wait::Inode(ino) => sb.inode_place(ino).0,
        Wait::Indirect(block) => block,
    }
}

impl Softdep {
    pub fn new(sb: Superblock) -> Softdep {
        Softdep {
            sb,
            seq: 0,
            last_durable: Ticks::default(),
            durable: HashMap::default(),
            open: Epoch::default(),
            sealed: None,
            kinds: HashMap::default(),
            fresh_blocks: Pages::default(),
            fresh_inodes: Ticks::default(),
            raised: HashMap::default(),
            removals: HashMap::default(),
            removal_count: 0,
            pending: Pages::default(),
            held: Held::default(),
            held_inodes: HashMap::default(),
            held_inode_count: 0,
            released_blocks: Vec::new(),
            released_meta: Vec::new(),
            released_inodes: Vec::new(),
            stats: SoftdepStats::default(),
            written_digest: 0,
            names: HashMap::default(),
            names_mark: NAMES_MARK_MIN,
            moves: Vec::new(),
            #[cfg(test)]
            ignore_rules: false,
        }
    }

    fn tick(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Metadata blocks whose disk image is kept apart from memory.
    pub fn shadows(&self) -> usize {
        self.durable.len()
    }

    /// Nothing waits: no removal, no freed block or inode held back.
    pub fn idle(&self) -> bool {
        self.removals.is_empty() && self.held.is_empty() && self.held_inode_count == 0
    }

    /// What is still waiting, to tell whether a write-back pass moved
    /// anything on.
    pub fn signature(&mut self) -> [u64; 6] {
        [
            self.removal_count as u64,
            self.held.len() as u64,
            self.held_inode_count as u64,
            self.fresh_blocks.len() as u64,
            self.fresh_inodes.len() as u64,
            std::mem::take(&mut self.written_digest),
        ]
    }

    /// A metadata block is about to change: `current` is what it holds
    /// now, which the disk holds too unless a shadow says otherwise.
    pub fn before_change(&mut self, block: u64, current: &[u8]) {
        let sealed = self.sealed.as_mut().is_some_and(|e| e.keep_as_written(block, current));
        if self.open.keep_as_written(block, current) || sealed {
            return;
        }
        if !self.durable.contains_key(&block) && !self.in_flight(block) {
            self.durable.insert(block, Shadow::Bytes(block_copy(current)));
        }
    }

    /// Whether a write of `block` not yet durable carried a copy other
    /// than what memory holds.
    fn in_flight(&self, block: u64) -> bool {
        self.open.inflight.contains_key(&block)
            || self.sealed.as_ref().is_some_and(|e| e.inflight.contains_key(&block))
    }

    /// A block newly allocated and zeroed: nothing on the disk names it,
    /// so the disk's copy counts as zeros.
    pub fn fresh(&mut self, block: u64) {
        if !self.in_flight(block) {
            self.durable.insert(block, Shadow::Zeros);
        }
    }

    /// `block` holds file data: no shadow.
    pub fn data(&mut self, block: u64) {
        self.durable.remove(&block);
        self.kinds.remove(&block);
    }

    pub fn set_kind(&mut self, block: u64, kind: Kind) {
        self.kinds.insert(block, kind);
    }

    pub fn allocated_block(&mut self, block: u32) {
        let at = self.tick();
        let fresh = FreshBlock { allocated: at, mapped: at, ..FreshBlock::default() };
        self.fresh_blocks.insert(u64::from(block), fresh);
    }

    /// `block`, just allocated, is pointed to marked unwritten: it settles
    /// once its bit is on the disk.
    pub fn allocated_unwritten(&mut self, block: u32) {
        if let Some(fresh) = self.fresh_blocks.get_mut(u64::from(block)) {
            fresh.unwritten = true;
        }
    }

    /// Unwritten `block` takes its first write: from now its pointer
    /// without the mark waits for those contents, as a new block's does
    /// (and for its bit, if that is not on the disk yet).
    pub fn converted(&mut self, block: u32) {
        let at = self.tick();
        let mapped = self.fresh_blocks.get(u64::from(block)).map_or(0, |f| f.mapped);
        let fresh = FreshBlock { allocated: at, mapped, ..FreshBlock::default() };
        self.fresh_blocks.insert(u64::from(block), fresh);
    }

    /// Group `g`'s header now counts inode slots from `from` on (it did
    /// not before): a new inode in one of them waits until a write of the
    /// header made after now is on the disk, as it waits for its bit
    /// (fsck reads no slot past what the header on the disk counts).
    pub fn raised_header(&mut self, g: u32, from: u32) {
        let at = self.tick();
        let raise = self.raised.entry(g).or_insert((from, at));
        *raise = (raise.0.min(from), at);
    }

    /// The groups whose header a new inode may be waiting on.
    pub fn raised_groups(&self) -> impl Iterator<Item = u32> + '_ {
        self.raised.keys().copied()
    }

    pub fn allocated_inode(&mut self, ino: u32) {
        let at = self.tick();
        self.fresh_inodes.insert(u64::from(ino), at);
    }

    /// Blocks freed in memory: their bits stay set until no copy in
    /// `waits` points to them on the disk. `drop`: each block but the
    /// directory blocks, whose buffers go; those are returned (the cache
    /// writes them once more, `Cache::retire`). `from` tells which blocks
    /// may be metadata: a file's data is in no map, and is not looked up.
    pub fn hold_blocks(
        &mut self,
        blocks: Vec<u32>,
        from: FreedFrom,
        waits: Vec<Wait>,
        drop: &mut dyn FnMut(u64),
    ) -> Vec<u64> {
        self.tick();
        let (blocks, meta, dirs) = self.sort_freed(blocks, from, drop);
        let sb = &self.sb;
        self.held.hold(blocks, meta, waits, |w| wait_block(sb, w));
        dirs
    }

    /// Inode `ino`, removed, and the blocks it held (as `hold_blocks`
    /// takes them): all held until its slot is free on the disk.
    pub fn hold_removed(
        &mut self,
        ino: u32,
        dir: bool,
        blocks: Vec<u32>,
        from: FreedFrom,
        drop: &mut dyn FnMut(u64),
    ) -> Vec<u64> {
        self.tick();
        let (blocks, meta, dirs) = self.sort_freed(blocks, from, drop);
        self.hold(HeldInode { ino, dir, blocks: held::kept_in_place(blocks), meta });
        dirs
    }

    /// Freed `blocks` sorted, no longer fresh, and sorted out: the metadata
    /// among them, and the directory blocks among those (returned, their
    /// buffers kept); every other block's buffer dropped.
    fn sort_freed(
        &mut self,
        mut blocks: Vec<u32>,
        from: FreedFrom,
        drop: &mut dyn FnMut(u64),
    ) -> (Vec<u32>, Vec<u32>, Vec<u64>) {
        blocks.sort_unstable();
        self.fresh_blocks.remove_sorted(blocks.iter().map(|&b| u64::from(b)));
        let pointers = match from {
            FreedFrom::File { mut pointers } => {
                pointers.sort_unstable();
                Some(pointers)
            }
            FreedFrom::Other => None,
        };
        // Only a block with a kind can be in a map here (file data is in
        // none, `data`): the rest are not looked at again at the release.
        let (mut meta, mut dirs) = (Vec::new(), Vec::new());
        for &b in &blocks {
            let block = u64::from(b);
            let kind = match &pointers {
                Some(p) if p.binary_search(&b).is_err() => {
                    debug_assert!(!self.kinds.contains_key(&block), "file data {b} has a kind");
                    None
                }
                _ => self.kinds.get(&block),
            };
            match kind {
                Some(Kind::Dir) => {
                    meta.push(b);
                    dirs.push(block);
                    continue;
                }
                Some(_) => meta.push(b),
                None => debug_assert!(self.knows_nothing_of(block), "block {b} freed unkinded"),
            }
            drop(block);
        }
        (blocks, meta, dirs)
    }

    /// Whether no map holds anything about `block` (as for file data).
    fn knows_nothing_of(&self, block: u64) -> bool {
        let in_epoch = |e: &Epoch| {
            e.written.contains(&block) || e.inflight.contains_key(&block) || e.as_memory.contains(&block)
        };
        !self.durable.contains_key(&block)
            && !in_epoch(&self.open)
            && !self.sealed.as_ref().is_some_and(in_epoch)
            && !self.removals.contains_key(&block)
            && !self.held.waited_on(block)
    }

    /// An inode freed in memory: its bit stays set until its slot is free
    /// on the disk.
    pub fn hold_inode(&mut self, ino: u32, dir: bool) {
        self.tick();
        self.hold(HeldInode { ino, dir, blocks: SmallVec::new(), meta: Vec::new() });
    }

    fn hold(&mut self, held: HeldInode) {
        self.fresh_inodes.remove(u64::from(held.ino));
        let block = self.sb.inode_place(held.ino).0;
        self.held_inodes.entry(block).or_default().push(held);
        self.held_inode_count += 1;
    }

    /// A link of `ino` removed in memory (`weight` of its count).
    pub fn removed(&mut self, ino: u32, weight: u32, gone: Gone) {
        self.tick();
        let pending = self.pending(ino);
        self.pending.insert(u64::from(ino), pending + weight);
        let removal = Removal { ino, weight, gone };
        self.removals.entry(removal.gone.block).or_default().push(removal);
        self.removal_count += 1;
    }

    fn pending(&self, ino: u32) -> u32 {
        self.pending.get(u64::from(ino)).unwrap_or(0)
    }

    fn durable_after(&self, block: u64, after: u64) -> bool {
        self.last_durable.get(block).is_some_and(|w| w > after)
    }

    fn block_bitmap(&self, block: u32) -> u64 {
        let g = (u64::from(block) - self.sb.first_group_block) / u64::from(self.sb.blocks_per_group);
        self.sb.group_start(g as u32) + 1
    }

    fn inode_bitmap(&self, ino: u32) -> u64 {
        self.sb.group_start((ino - 1) / self.sb.inodes_per_group) + 2
    }

    /// Whether new inode `ino`, allocated at `at`, may go to the disk as
    /// far as its group's maps go: its bit is on the disk (rule 2), and
    /// so is a header counting its slot.
    fn inode_maps_durable(&self, ino: u32, at: u64) -> bool {
        self.durable_after(self.inode_bitmap(ino), at) && self.header_counts(ino)
    }

    /// Whether the header on the disk counts inode `ino`'s slot.
    fn header_counts(&self, ino: u32) -> bool {
        let (g, slot) = ((ino - 1) / self.sb.inodes_per_group, (ino - 1) % self.sb.inodes_per_group);
        match self.raised.get(&g) {
            Some(&(from, at)) => slot < from || self.durable_after(self.sb.group_start(g), at),
            None => true,
        }
    }

    /// Rule 1: the block's bit and its contents are on the disk.
    /// Whether what pointer `p` names may be pointed to on the disk: its
    /// block settled (an unwritten one once its bit is there).
    fn settled(&self, p: u32) -> bool {
        let block = block_of(p);
        match self.fresh_blocks.get(u64::from(block)) {
            None => true,
            Some(fresh) => self.fresh_settled(block, &fresh),
        }
    }

    fn fresh_settled(&self, block: u32, fresh: &FreshBlock) -> bool {
        (fresh.unwritten || fresh.durable > fresh.allocated)
            && (fresh.mapped == 0 || self.durable_after(self.block_bitmap(block), fresh.mapped))
    }

    /// Where `block` is within its group (None outside the groups).
    fn within_group(&self, block: u64) -> Option<u64> {
        (self.sb.first_group_block..self.sb.blocks)
            .contains(&block)
            .then(|| (block - self.sb.first_group_block) % u64::from(self.sb.blocks_per_group))
    }

    /// A group's header or one of its bitmaps: what the rules ask to be
    /// durable after an event (`last_durable`).
    fn is_group_map(&self, block: u64) -> bool {
        matches!(self.within_group(block), Some(0..=2))
    }

    /// Whether `block` was allocated and its contents not written since:
    /// what points to it waits for a first write, rolled back or not.
    pub fn unwritten_since_allocated(&self, block: u64) -> bool {
        self.fresh_blocks.get(block).is_some_and(|f| !f.unwritten && f.written < f.allocated)
    }

    /// A fresh block's contents were written (event `at`).
    fn fresh_written(&mut self, block: u64, at: u64) {
        if let Some(fresh) = self.fresh_blocks.get_mut(block) {
            fresh.written = at;
            self.open.fresh.push((block, at));
        }
    }

    fn is_inode_block(&self, block: u64) -> bool {
        self.within_group(block)
            .is_some_and(|w| (3..3 + u64::from(self.sb.inode_table_blocks())).contains(&w))
    }

    fn first_ino(&self, block: u64) -> u32 {
        let g = ((block - self.sb.first_group_block) / u64::from(self.sb.blocks_per_group)) as u32;
        let within = (block - self.sb.group_start(g) - 3) as u32;
        g * self.sb.inodes_per_group + within * INODES_PER_BLOCK + 1
    }
}

#[cfg(test)]
mod tests;
