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

use held::Held;
pub use held::Wait;
use smallvec::SmallVec;

use crate::format::{
    all_zero, known_kind, pointer_at, set_pointer, DirRecord, DiskInode, InodeSlot, RecordRef, Superblock,
    BLOCK_BYTES, DIRECT_POINTERS, DIR_CHUNK_BYTES, DT_DIR, INLINE_SYMLINK_BYTES, INODES_PER_BLOCK,
    INODE_BYTES, POINTERS_PER_BLOCK, S_IFDIR, S_IFLNK,
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
    /// fsyncs that wrote what their file needs alone (`Core::softdep_sync_file`),
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
/// allocated, when its contents were last written, and when a write of
/// them was last made durable (sequence numbers; 0 is never).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct FreshBlock {
    allocated: u64,
    written: u64,
    durable: u64,
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
        self.fresh_blocks.insert(u64::from(block), FreshBlock { allocated: at, written: 0, durable: 0 });
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

    /// Rule 1: the block's bit and its contents are on the disk.
    fn settled(&self, block: u32) -> bool {
        match self.fresh_blocks.get(u64::from(block)) {
            None => true,
            Some(fresh) => self.fresh_settled(block, &fresh),
        }
    }

    fn fresh_settled(&self, block: u32, fresh: &FreshBlock) -> bool {
        fresh.durable > fresh.allocated && self.durable_after(self.block_bitmap(block), fresh.allocated)
    }

    /// Where `block` is within its group (None outside the groups).
    fn within_group(&self, block: u64) -> Option<u64> {
        (self.sb.first_group_block..self.sb.blocks)
            .contains(&block)
            .then(|| (block - self.sb.first_group_block) % u64::from(self.sb.blocks_per_group))
    }

    fn is_bitmap(&self, block: u64) -> bool {
        matches!(self.within_group(block), Some(1 | 2))
    }

    /// Whether `block` was allocated and its contents not written since:
    /// what points to it waits for a first write, rolled back or not.
    pub fn unwritten_since_allocated(&self, block: u64) -> bool {
        self.fresh_blocks.get(block).is_some_and(|f| f.written < f.allocated)
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

    /// What the disk holds for `block`.
    fn on_disk<'a>(&'a self, blocks: &'a dyn Blocks, block: u64) -> Option<Cow<'a, [u8]>> {
        match self.durable.get(&block) {
            Some(shadow) => Some(Cow::Borrowed(shadow.bytes())),
            None => blocks.memory(block),
        }
    }

    /// Inode `ino` in memory and on the disk.
    fn inode_both(&self, blocks: &dyn Blocks, ino: u32) -> Option<(Option<DiskInode>, Option<DiskInode>)> {
        let (block, at) = self.sb.inode_place(ino);
        let memory = blocks.memory(block)?;
        let disk = self.on_disk(blocks, block)?;
        Some((used(ino, &memory[at..at + INODE_BYTES]), used(ino, &disk[at..at + INODE_BYTES])))
    }

    /// Rule 3: inode `ino` is on the disk with a count covering every
    /// entry memory gives it and every removal not yet on the disk.
    fn links_on_disk(&self, blocks: &dyn Blocks, ino: u32) -> bool {
        self.links_on_disk_memo(blocks, ino, &mut InodeBlockMemo::default())
    }

    /// [`Softdep::links_on_disk`], reading the inode's block from memory
    /// only when `memo` does not hold it already.
    fn links_on_disk_memo<'a>(
        &self,
        blocks: &'a dyn Blocks,
        ino: u32,
        memo: &mut InodeBlockMemo<'a>,
    ) -> bool {
        let (block, at) = self.sb.inode_place(ino);
        let slot = at..at + INODE_BYTES;
        let Some(disk) = self.durable.get(&block) else {
            // No shadow: the disk holds what memory does (a block not in
            // the cache is clean, and an entry memory holds names an inode
            // in use).
            return self.pending(ino) == 0 && blocks.cached(block).is_none_or(|m| links(&m[slot]).is_some());
        };
        if memo.bytes.is_none() || memo.block != block {
            *memo = InodeBlockMemo { block, bytes: blocks.memory(block) };
        }
        let Some(memory) = &memo.bytes else { return false };
        match (links(&memory[slot.clone()]), links(&disk.bytes()[slot])) {
            (Some(memory), Some(disk)) => disk >= memory + self.pending(ino),
            _ => false,
        }
    }

    /// The image to write for metadata block `block` whose memory copy is
    /// `memory`: None when memory can go as it is.
    pub fn image(&self, blocks: &dyn Blocks, block: u64, memory: &[u8]) -> Image {
        let Some(disk) = self.durable.get(&block).map(Shadow::bytes) else { return Image::Memory };
        let rolled = if self.is_inode_block(block) {
            return self.inode_image_or_probe::<false>(blocks, block, memory, disk);
        } else {
            match self.kinds.get(&block) {
                Some(Kind::Dir) => self.dir_image(blocks, memory, disk),
                Some(Kind::Indirect) => self.indirect_image(memory, disk),
                Some(Kind::Symlink | Kind::Xattr) | None => None,
            }
        };
        rolled.map_or(Image::Memory, Image::Rolled)
    }

    /// Whether metadata block `block`, whose memory copy is `memory`, can
    /// go as memory holds it (`image` would say `Image::Memory`). For an
    /// inode block, told without making the image: the look stops at the
    /// first slot that cannot go so (a write held back until it can needs
    /// no more, and the image is made again once it can; a removal holds
    /// back thousands of inode blocks, each a cold copy in memory and on
    /// the disk).
    pub fn goes_as_memory(&self, blocks: &dyn Blocks, block: u64, memory: &[u8]) -> bool {
        match self.durable.get(&block).map(Shadow::bytes) {
            None => true,
            Some(disk) if self.is_inode_block(block) => {
                self.inode_image_or_probe::<true>(blocks, block, memory, disk) == Image::Memory
            }
            Some(_) => self.image(blocks, block, memory) == Image::Memory,
        }
    }

    /// What the disk holds for metadata block `block`, when a shadow says
    /// it differs from memory.
    pub fn durable_bytes(&self, block: u64) -> Option<&[u8]> {
        self.durable.get(&block).map(Shadow::bytes)
    }

    /// An inode block's image. While every slot that may not go as memory
    /// holds it goes as the disk holds it, nothing is copied: a block whose
    /// every change waits (freed inodes whose entries are still on the
    /// disk, new ones whose bits are not) is the disk's own image.
    ///
    /// With `PROBE`, the first slot that cannot go as memory holds it ends
    /// the look, and what it returns means only "not `Image::Memory`"
    /// (`Softdep::goes_as_memory`).
    fn inode_image_or_probe<const PROBE: bool>(
        &self,
        blocks: &dyn Blocks,
        block: u64,
        memory: &[u8],
        disk: &[u8],
    ) -> Image {
        let first = self.first_ino(block);
        let mut out: Option<AlignedBuf> = None;
        let mut as_disk = 0u32;
        let mut as_memory = false;
        let mut slot = [0u8; INODE_BYTES];
        const _: () = assert!(INODES_PER_BLOCK <= u32::BITS);
        for k in 0..INODES_PER_BLOCK as usize {
            let ino = first + k as u32;
            let range = k * INODE_BYTES..(k + 1) * INODE_BYTES;
            let same = memory[range.clone()] == disk[range.clone()];
            let pending = self.pending(ino);
            if same && pending == 0 {
                continue;
            }
            let safe = self.inode_slot(
                blocks,
                ino,
                &memory[range.clone()],
                &disk[range.clone()],
                pending,
                &mut slot,
            );
            if *safe == memory[range.clone()] {
                as_memory |= !same;
                continue;
            }
            if PROBE {
                return Image::Durable;
            }
            if out.is_none() && *safe == disk[range.clone()] {
                as_disk |= 1 << k;
                continue;
            }
            let bytes = out.get_or_insert_with(|| with_disk_slots(memory, disk, as_disk));
            bytes[range].copy_from_slice(safe);
        }
        match out {
            Some(bytes) => Image::Rolled(bytes),
            None if as_disk == 0 => Image::Memory,
            // Every slot that differs goes as the disk holds it.
            None if !as_memory => Image::Durable,
            None => Image::Rolled(with_disk_slots(memory, disk, as_disk)),
        }
    }

    /// The copy of inode `ino` the disk may take now: `memory`, `disk`,
    /// or one made in `slot`.
    fn inode_slot<'a>(
        &self,
        blocks: &dyn Blocks,
        ino: u32,
        memory: &'a [u8],
        disk: &'a [u8],
        pending: u32,
        slot: &'a mut [u8; INODE_BYTES],
    ) -> &'a [u8] {
        // The commonest wait, told without decoding: a new inode whose
        // bitmap bit is not on the disk yet.
        if let Some(at) = self.fresh_inodes.get(u64::from(ino)) {
            if slot_is_free(disk) && !self.durable_after(self.inode_bitmap(ino), at) {
                return disk;
            }
        }
        let Some(m) = used(ino, memory) else {
            // Freed in memory: the disk keeps it whole while an entry
            // naming it may still be there (rule 4).
            return if pending > 0 && !slot_is_free(disk) { disk } else { memory };
        };
        let d = used(ino, disk);
        let new = d.is_none() || self.fresh_inodes.get(u64::from(ino)).is_some();
        if new && !self.ready(ino, &m) {
            return disk;
        }
        let mut w = m.clone();
        w.nlink = u16::try_from(u32::from(m.nlink) + pending).unwrap_or(u16::MAX);
        let was = |now: u32, then: Option<u32>| now != 0 && then != Some(now) && !self.settled(now);
        for k in 0..DIRECT_POINTERS {
            if was(m.direct[k], d.as_ref().map(|d| d.direct[k])) {
                w.direct[k] = 0;
            }
        }
        if was(m.single, d.as_ref().map(|d| d.single)) {
            w.single = 0;
        }
        if was(m.double, d.as_ref().map(|d| d.double)) {
            w.double = 0;
        }
        // A new attribute block replaces the one the disk points to (or
        // none): until it is settled, the disk keeps the old one, which
        // is held until no copy on the disk points to it (rule 5).
        if was(m.xattr, d.as_ref().map(|d| d.xattr)) {
            w.xattr = d.as_ref().map_or(0, |d| d.xattr);
        }
        if m.kind_bits() == S_IFDIR {
            w.size = w.size.min(self.mapped_prefix(blocks, &w));
        }
        if w == m {
            return memory;
        }
        w.encode(ino, slot);
        slot
    }

    /// Rule 2 for a new inode.
    fn ready(&self, ino: u32, m: &DiskInode) -> bool {
        if let Some(at) = self.fresh_inodes.get(u64::from(ino)) {
            if !self.durable_after(self.inode_bitmap(ino), at) {
                return false;
            }
        }
        let dir = m.kind_bits() == S_IFDIR;
        let long_link = m.kind_bits() == S_IFLNK && m.size as usize > INLINE_SYMLINK_BYTES;
        if (dir || long_link) && (m.direct[0] == 0 || !self.settled(m.direct[0])) {
            return false;
        }
        true
    }

    /// Rule 3 for an entry naming directory `ino`: its `..` names a parent
    /// whose count, raised for that `..`, is on the disk (or itself).
    /// `owner`: the directory holding the entry, when known, which is what
    /// its `..` names in memory (a directory has one entry, and a rename
    /// moves it and changes its `..` together): nothing is read for it.
    fn parent_counted(&self, blocks: &dyn Blocks, ino: u32, owner: Option<u32>) -> bool {
        if let Some(parent) = owner {
            return parent == ino || self.links_on_disk(blocks, parent);
        }
        let Some((Some(m), _)) = self.inode_both(blocks, ino) else { return false };
        if m.kind_bits() != S_IFDIR {
            return true;
        }
        let parent = blocks.memory(u64::from(m.direct[0])).and_then(|b| record_at(&b, 12).map(|r| r.ino));
        parent.is_some_and(|p| p == ino || self.links_on_disk(blocks, p))
    }

    /// The bytes of a directory the disk can map without a hole: the
    /// blocks from the first whose pointer is not written.
    fn mapped_prefix(&self, blocks: &dyn Blocks, w: &DiskInode) -> u64 {
        let count = w.size / BLOCK_BYTES as u64;
        let single = (w.single != 0).then(|| self.on_disk(blocks, u64::from(w.single))).flatten();
        let mut n = 0u64;
        while n < count {
            let p = if n < DIRECT_POINTERS as u64 {
                w.direct[n as usize]
            } else if n < DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK {
                single.as_ref().map_or(0, |s| pointer_at(s, (n - DIRECT_POINTERS as u64) as usize))
            } else {
                0
            };
            if p == 0 {
                break;
            }
            n += 1;
        }
        n * BLOCK_BYTES as u64
    }

    fn dir_image(&self, blocks: &dyn Blocks, memory: &[u8], disk: &[u8]) -> Option<AlignedBuf> {
        let mut out: Option<AlignedBuf> = None;
        let on_disk = records(disk);
        let mut next_on_disk = on_disk.iter().peekable();
        let mut memo = InodeBlockMemo::default();
        // The directory this block belongs to, named by its `.` (in its
        // first block): what every subdirectory named here has as `..`.
        let mut owner = None;
        for (here, rec) in records(memory) {
            if rec.name == b"." {
                owner = Some(rec.ino);
                continue;
            }
            // The disk's record at the same place, if it has one.
            while next_on_disk.next_if(|(at, _)| *at < here).is_some() {}
            let before = next_on_disk.peek().filter(|(at, _)| *at == here).map(|(_, r)| *r);
            if before.is_some_and(|b| b.ino == rec.ino && b.name == rec.name) {
                continue;
            }
            // A new directory's `..`: its entry in the parent waits for the
            // parent's count (rule 3); until then nothing reaches it.
            if rec.name == b".." && before.is_none() {
                continue;
            }
            let directory = rec.kind == DT_DIR && rec.name != b"..";
            if self.links_on_disk_memo(blocks, rec.ino, &mut memo)
                && (!directory || self.parent_counted(blocks, rec.ino, owner))
            {
                continue;
            }
            let bytes = out.get_or_insert_with(|| block_copy(memory));
            let (ino, kind) = match before.filter(|b| b.name == rec.name) {
                Some(b) => (b.ino, b.kind),
                None => (0, 0),
            };
            bytes[here..here + 4].copy_from_slice(&ino.to_le_bytes());
            bytes[here + 7] = kind;
        }
        out
    }

    fn indirect_image(&self, memory: &[u8], disk: &[u8]) -> Option<AlignedBuf> {
        let mut out: Option<AlignedBuf> = None;
        for k in 0..POINTERS_PER_BLOCK as usize {
            let p = pointer_at(memory, k);
            if p != 0 && p != pointer_at(disk, k) && !self.settled(p) {
                set_pointer(out.get_or_insert_with(|| block_copy(memory)), k, 0);
            }
        }
        out
    }

    /// Whether the last write of `block` carried the disk's image, made
    /// durable since (no write of it since the last flush).
    pub fn last_written_is_durable(&self, block: u64) -> bool {
        self.durable.contains_key(&block) && self.last_write(block).is_none()
    }

    /// What the last write of `block` not yet durable carried: None when
    /// none is; Some(None) when it was memory, unchanged since.
    fn last_write(&self, block: u64) -> Option<Option<&[u8]>> {
        self.open.last_write(block).or_else(|| self.sealed.as_ref()?.last_write(block))
    }

    /// Whether the last write of `block` (flushed or not) carried `image`.
    pub fn last_written_is(&self, block: u64, image: &[u8]) -> bool {
        let last = match self.last_write(block) {
            Some(None) => return false,
            Some(Some(last)) => Some(last),
            None => self.durable.get(&block).map(Shadow::bytes),
        };
        last == Some(image)
    }

    /// Metadata `block` was written: with `rolled_back`, a copy holding
    /// some update back; without, what memory holds.
    pub fn written(&mut self, block: u64, rolled_back: Option<AlignedBuf>) {
        let at = self.tick();
        if self.is_bitmap(block) {
            self.open.bitmaps.push((block, at));
        }
        self.fresh_written(block, at);
        self.open.written.insert(block);
        let digest = match rolled_back {
            Some(image) => {
                self.stats.rollbacks += 1;
                self.open.as_memory.remove(&block);
                let digest = u64::from(crc32c::crc32c(&image));
                self.open.inflight.insert(block, image);
                digest
            }
            None => {
                // What memory holds: copied only if memory changes before
                // the flush (`before_change`).
                self.open.inflight.remove(&block);
                self.open.as_memory.insert(block);
                1
            }
        };
        self.written_digest =
            self.written_digest.wrapping_mul(31).wrapping_add(digest ^ block.rotate_left(32));
    }

    /// File data `block` was written (its contents, for rule 1).
    pub fn written_data(&mut self, block: u64) {
        if self.fresh_blocks.get(block).is_some() {
            let at = self.tick();
            self.fresh_written(block, at);
        }
    }

    /// A flush made the writes before it durable: the shadows move on,
    /// and the work that waited on them runs.
    pub fn flushed(&mut self, blocks: &dyn Blocks) {
        self.seal();
        self.sealed_flushed(blocks);
    }

    /// A flush is issued: the writes so far are what it makes durable
    /// (`sealed_flushed` once it returns). One is in flight at most.
    pub fn seal(&mut self) {
        debug_assert!(self.sealed.is_none(), "one flush in flight at most");
        // Never so: the cache waits for one before it issues the next.
        // Were it so, the writes since stay open: they count as durable
        // only after a later seal's flush, never too early.
        if self.sealed.is_none() {
            self.sealed = Some(std::mem::take(&mut self.open));
        }
    }

    /// The flush issued at the last `seal` returned: what the writes
    /// before it put there is on the disk (not what the writes after it
    /// did), and the work that waited on them runs.
    pub fn sealed_flushed(&mut self, blocks: &dyn Blocks) {
        let Some(mut sealed) = self.sealed.take() else { return };
        for (block, at) in sealed.bitmaps.drain(..) {
            if self.last_durable.get(block).is_none_or(|d| d < at) {
                self.last_durable.insert(block, at);
            }
        }
        for &block in &sealed.written {
            match sealed.inflight.remove(&block) {
                // A copy: what the disk holds now, while memory differs or
                // a write since may not have reached it.
                Some(image) if blocks.dirty(block) || self.open.last_write(block).is_some() => {
                    self.durable.insert(block, Shadow::Bytes(image));
                }
                // Memory, unchanged since (a change would have kept a
                // copy; so the block is clean, and any write since carried
                // memory too), or a clean block not written since: the
                // disk holds what memory does.
                _ => {
                    self.durable.remove(&block);
                }
            }
        }
        for (block, at) in sealed.fresh.drain(..) {
            if let Some(fresh) = self.fresh_blocks.get_mut(block) {
                if fresh.allocated < at && fresh.durable < at {
                    fresh.durable = at;
                }
            }
        }
        let mut fresh_blocks = std::mem::take(&mut self.fresh_blocks);
        fresh_blocks.remove_where(|block, fresh| self.fresh_settled(block as u32, fresh));
        self.fresh_blocks = fresh_blocks;
        let mut fresh_inodes = std::mem::take(&mut self.fresh_inodes);
        fresh_inodes.remove_where(|ino, &at| self.durable_after(self.inode_bitmap(ino as u32), at));
        self.fresh_inodes = fresh_inodes;
        self.run_worklist(blocks, Some(&sealed.written));
        if self.names.len() > self.names_mark {
            self.prune_names();
        }
    }

    /// Looks at all the work that waits, not only at what waits on the
    /// blocks a flush made durable: what a write could not have changed
    /// (a wait on a block never written again, since the disk's copy was
    /// already right) is settled here. For a sync whose pass moved
    /// nothing on.
    pub fn rescan(&mut self, blocks: &dyn Blocks) {
        self.run_worklist(blocks, None);
    }

    fn gone(&self, removal: &Removal, released: &HashSet<u64>) -> bool {
        let Gone { block, at, names } = removal.gone;
        let Some(disk) = self.durable.get(&block) else {
            // No shadow: the disk holds what memory does, which no longer
            // names the inode there (naming it again would have cancelled
            // the removal, `added`).
            return true;
        };
        released.contains(&block) || record_at(disk.bytes(), at).is_none_or(|r| r.ino != names)
    }

    /// Removals on the disk lower the counts written from now on. Only
    /// those watching a block in `changed` are looked at (all of them
    /// when None): a copy on the disk changes only when a write of it is
    /// made durable, or when the block is released.
    fn settle_removals(&mut self, released: &HashSet<u64>, changed: Option<&HashSet<u64>>) {
        let watched: Vec<u64> = match changed {
            None => self.removals.keys().copied().collect(),
            Some(c) => {
                (c.iter().chain(released)).filter(|b| self.removals.contains_key(b)).copied().collect()
            }
        };
        for block in watched {
            let Some(removals) = self.removals.remove(&block) else { continue };
            let mut left = Vec::new();
            for removal in removals {
                if self.gone(&removal, released) {
                    self.unpend(&removal);
                    self.removal_count -= 1;
                } else {
                    left.push(removal);
                }
            }
            if !left.is_empty() {
                self.removals.insert(block, left);
            }
        }
    }

    /// The work that waited on the disk's copies of the blocks in
    /// `changed` (of every block, when None).
    fn run_worklist(&mut self, blocks: &dyn Blocks, changed: Option<&HashSet<u64>>) {
        self.settle_removals(&HashSet::default(), changed);
        // Directory blocks released (the removals watching them end) and
        // indirect blocks released that groups wait on (those waits end:
        // it is unreachable, and so is what it points to).
        let mut dirs_released: HashSet<u64> = HashSet::default();
        let mut released: HashSet<u64> = HashSet::default();
        // Freed inodes whose slots are free on the disk, with the blocks
        // they held.
        let inode_blocks: Vec<u64> = match changed {
            None => self.held_inodes.keys().copied().collect(),
            Some(c) => c.iter().filter(|b| self.held_inodes.contains_key(b)).copied().collect(),
        };
        for block in inode_blocks {
            let Some(held) = self.held_inodes.remove(&block) else { continue };
            // The disk's copy read once for the block's inodes.
            let (gone, left): (Vec<HeldInode>, Vec<HeldInode>) = match self.on_disk(blocks, block) {
                Some(disk) => held.into_iter().partition(|h| {
                    let at = self.sb.inode_place(h.ino).1;
                    slot_is_free(&disk[at..at + INODE_BYTES])
                }),
                None => (Vec::new(), held),
            };
            self.stats.released_inodes += gone.len() as u64;
            self.held_inode_count -= gone.len();
            for h in gone {
                self.released_inodes.push((h.ino, h.dir));
                self.release_blocks(&h.blocks, h.meta, &mut dirs_released, &mut released);
            }
            if !left.is_empty() {
                self.held_inodes.insert(block, left);
            }
        }
        // Freed blocks whose pointers are gone from the disk.
        let mut look = self.held.waiting_on(changed);
        look.extend(self.held.cut(&released));
        look.sort_unstable();
        look.dedup();
        while !look.is_empty() {
            let mut released: HashSet<u64> = HashSet::default();
            for slot in look {
                let Some(h) = self.held.get(slot) else { continue };
                if h.waits.iter().any(|w| self.points_into(blocks, *w, &h.blocks)) {
                    continue;
                }
                let Some(h) = self.held.release(slot) else { continue };
                self.release_blocks(&h.blocks, h.meta, &mut dirs_released, &mut released);
            }
            // A group whose waits were cut is looked at again whatever
            // was flushed.
            look = self.held.cut(&released);
        }
        // Entries in directory blocks just released are gone with them.
        if !dirs_released.is_empty() {
            self.settle_removals(&dirs_released, Some(&HashSet::default()));
        }
    }

    /// Freed `blocks` (`meta` among them) nothing on the disk points to:
    /// given back, and what they end noted (`Softdep::run_worklist`).
    fn release_blocks(
        &mut self,
        blocks: &[u32],
        meta: Vec<u32>,
        dirs_released: &mut HashSet<u64>,
        released: &mut HashSet<u64>,
    ) {
        self.stats.released_blocks += blocks.len() as u64;
        self.released_blocks.extend(blocks);
        self.released_meta.extend(&meta);
        // File data is in no map.
        for b in meta.into_iter().map(u64::from) {
            if self.removals.contains_key(&b) {
                dirs_released.insert(b);
            }
            if self.held.waited_on(b) {
                released.insert(b);
            }
            self.forget(b);
        }
    }

    /// An entry naming `ino` put at byte `at` of directory block `block`:
    /// the removals still waiting for that entry to go (its inode's, and
    /// for a directory its parent's) cancel (the disk's entry is right
    /// again).
    pub fn added(&mut self, block: u64, at: usize, ino: u32) {
        let Some(removals) = self.removals.remove(&block) else { return };
        let (cancelled, left): (Vec<Removal>, Vec<Removal>) =
            removals.into_iter().partition(|r| r.gone == Gone { block, at, names: ino });
        if !left.is_empty() {
            self.removals.insert(block, left);
        }
        for removal in cancelled {
            self.removal_count -= 1;
            self.unpend(&removal);
        }
    }

    /// An entry naming `ino` made in directory `dir`'s block `block` (a
    /// create, a link, a mkdir, a rename's new name): a file's fsync makes
    /// it durable too.
    pub fn named(&mut self, ino: u32, dir: u32, block: u64) {
        let names = self.names.entry(ino).or_default();
        if !names.contains(&(dir, block)) {
            names.push((dir, block));
        }
    }

    /// The entries made for `ino` that may not be on the disk yet, as
    /// (directory, block); some may no longer name it in memory.
    pub fn names_of(&self, ino: u32) -> &[(u32, u64)] {
        self.names.get(&ino).map_or(&[], |n| &n[..])
    }

    /// Drops the entries whose blocks the disk holds as memory does: on
    /// the disk if memory still names the inode there, gone from memory
    /// otherwise. (A block with no shadow and no write in flight is on
    /// the disk as memory holds it.)
    fn prune_names(&mut self) {
        let (durable, open, sealed) = (&self.durable, &self.open, &self.sealed);
        let unsettled = |b: &u64| {
            durable.contains_key(b)
                || open.inflight.contains_key(b)
                || sealed.as_ref().is_some_and(|e| e.inflight.contains_key(b))
        };
        self.names.retain(|_, names| {
            names.retain(|(_, b)| unsettled(b));
            !names.is_empty()
        });
        self.names_mark = (2 * self.names.len()).max(NAMES_MARK_MIN);
    }

    /// A directory moved between directories.
    pub fn moved(&mut self, m: Move) {
        self.moves.push(m);
    }

    /// The blocks that hold the moves waiting (their entries, their
    /// `..`, and the inodes those wait on: the directory's and both
    /// parents').
    pub fn move_blocks(&self) -> Vec<u64> {
        let inode_block = |ino: u32| self.sb.inode_place(ino).0;
        let each = self.moves.iter().flat_map(|m| {
            [m.old.0, m.new, m.dotdot.0, inode_block(m.ino), inode_block(m.from), inode_block(m.to)]
        });
        each.collect()
    }

    /// Whether every directory moved between directories is on the disk
    /// whole (the moves that are, forgotten). Asked right after a flush.
    pub fn moves_settled(&mut self, blocks: &dyn Blocks) -> bool {
        let moves = std::mem::take(&mut self.moves);
        self.moves = moves.into_iter().filter(|m| !self.move_on_disk(blocks, m)).collect();
        self.moves.is_empty()
    }

    /// Whether the disk holds move `m` whole: the old entry gone (or
    /// naming the directory again in memory too), the new one there (if
    /// memory still has it), and `..` as memory has it.
    fn move_on_disk(&self, blocks: &dyn Blocks, m: &Move) -> bool {
        let on_disk = |(block, at): (u64, usize)| {
            self.on_disk(blocks, block).and_then(|b| record_at(&b, at).map(|r| r.ino))
        };
        let in_memory =
            |(block, at): (u64, usize)| blocks.memory(block).and_then(|b| record_at(&b, at).map(|r| r.ino));
        let old_gone = on_disk(m.old) != Some(m.ino) || in_memory(m.old) == Some(m.ino);
        let new_there =
            !self.block_names(blocks, m.new, m.ino, false) || self.block_names(blocks, m.new, m.ino, true);
        old_gone && new_there && on_disk(m.dotdot) == in_memory(m.dotdot)
    }

    /// Whether directory block `block` names `ino`, in memory (`disk`
    /// false) or on the disk. Asked of the disk right after a flush, when
    /// no write is in flight.
    pub fn block_names(&self, blocks: &dyn Blocks, block: u64, ino: u32, disk: bool) -> bool {
        let bytes = if disk { self.on_disk(blocks, block) } else { blocks.memory(block) };
        bytes.is_some_and(|b| records(&b).iter().any(|(_, r)| r.ino == ino))
    }

    /// Whether the disk holds inode `ino` as memory does (or both hold
    /// none), a count higher by removals not yet on the disk allowed.
    /// Asked right after a flush, when no write is in flight.
    pub fn inode_on_disk(&self, blocks: &dyn Blocks, ino: u32) -> bool {
        match self.inode_both(blocks, ino) {
            Some((None, None)) => true,
            Some((Some(m), Some(d))) => d.nlink >= m.nlink && DiskInode { nlink: m.nlink, ..d } == m,
            _ => false,
        }
    }

    /// The inodes directory block `block` names in memory where the disk
    /// does not (new entries, rolled back or not yet written), `.` and
    /// `..` aside.
    pub fn entries_new(&self, blocks: &dyn Blocks, block: u64) -> Vec<u32> {
        let (Some(memory), Some(disk)) = (blocks.memory(block), self.on_disk(blocks, block)) else {
            return Vec::new();
        };
        let on_disk = records(&disk);
        let new = records(&memory).into_iter().filter(|(at, r)| {
            r.name != b"." && r.name != b".." && !on_disk.iter().any(|(a, d)| a == at && d.ino == r.ino)
        });
        new.map(|(_, r)| r.ino).collect()
    }

    /// A removal no longer waits: its inode's count may drop on the disk.
    fn unpend(&mut self, removal: &Removal) {
        let left = self.pending(removal.ino).saturating_sub(removal.weight);
        let ino = u64::from(removal.ino);
        if left == 0 {
            self.pending.remove(ino);
        } else {
            self.pending.insert(ino, left);
        }
    }

    /// Whether the disk's copy of `holder` still points into `set` (a copy
    /// that cannot be read counts as pointing).
    fn points_into(&self, blocks: &dyn Blocks, holder: Wait, sorted: &[u32]) -> bool {
        let contains = |p: &u32| *p != 0 && sorted.binary_search(p).is_ok();
        match holder {
            Wait::Inode(ino) => {
                let (block, at) = self.sb.inode_place(ino);
                let Some(disk) = self.on_disk(blocks, block) else { return true };
                let slot = &disk[at..at + INODE_BYTES];
                links(slot).is_some() && DiskInode::pointers_in(slot).any(|p| contains(&p))
            }
            Wait::Indirect(block) => match self.on_disk(blocks, block) {
                Some(disk) => (0..POINTERS_PER_BLOCK as usize).any(|k| contains(&pointer_at(&disk, k))),
                None => true,
            },
        }
    }

    /// A block given back: nothing about it is kept.
    fn forget(&mut self, block: u64) {
        self.durable.remove(&block);
        self.open.forget(block);
        if let Some(sealed) = &mut self.sealed {
            sealed.forget(block);
        }
        self.kinds.remove(&block);
    }
}

#[cfg(test)]
mod tests;
