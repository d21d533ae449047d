//! Checking an unmounted file system, as fsck_ffs does, in its five
//! passes: (1) inodes and the blocks they claim, (2) directory entries,
//! `.` and `..`, (3) connectivity, (4) link counts, (5) bitmaps and
//! summary counts. Every finding is in a named class; `-p` (preen)
//! repairs only the classes safe to repair unattended (what the `sync`
//! policy can leave), `-y` repairs everything, `-n` nothing.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use crate::cache::Cache;
use crate::core::{initialized_for, Core, GroupCounts};
use crate::format::*;
use crate::mount::replayed_or_log_damage;
use crate::policy::LogState;
use crate::{Dev, FsError, Policy};

mod pass1;
mod pass2;
mod pass3;
mod pass4;
mod pass5;

/// fsck's buffer cache: each metadata block is read about once (the
/// inode table in pass 1, the directories in pass 2, the maps in pass
/// 5), and what is read next is asked of the device ahead
/// ([`device::Device::will_need`]), so a cache larger than this buys no
/// reads and costs the memory (e2fsck checks 60,000 files in 15 MiB; at
/// 16 MiB, glibc's tree three times checked no faster).
const FSCK_CACHE_BYTES: u64 = 4 << 20;

/// What fsck may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// `-n`: report only.
    No,
    /// `-p`: the safe classes only.
    Preen,
    /// `-B` (FreeBSD's background fsck): the leaks only (`Class::is_leak`),
    /// all soft updates may leave after a crash; anything else is left
    /// for a full fsck.
    Leaks,
    /// `-y`: everything.
    Yes,
}

/// The kinds of damage fsck names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// An inode slot neither free nor a valid inode (torn or never written).
    GarbageInode,
    /// A block pointer outside the data area.
    BadBlockPointer,
    /// A block claimed by two inodes (or twice by one).
    BlockClaimedTwice,
    /// A directory block whose records do not tile it.
    BadDirectoryBlock,
    /// An entry naming a free or uninitialised inode.
    EntryNamingFreeInode,
    /// A directory whose `.` is wrong or missing, or whose `..` is
    /// missing or names no directory.
    BadDotDot,
    /// A directory whose `..` names another directory than the one that
    /// names it: what a crash inside a directory's rename leaves under
    /// `sync` (the new entry is written first). A repair points `..` at
    /// the directory that names it, as fsck_ffs does.
    DotDotMismatch,
    /// An allocated inode no entry names.
    UnattachedInode,
    /// More links recorded than entries name the inode.
    LinkCountTooHigh,
    /// Fewer links recorded than entries name the inode.
    LinkCountTooLow,
    /// A block some inode claims that the map says is free.
    BlockInUseButFree,
    /// A block the map says is in use that no inode claims.
    LeakedBlock,
    /// An allocated inode the map says is free.
    InodeInUseButFree,
    /// An inode number the map says is in use whose slot is free.
    LeakedInode,
    /// Free-block, free-inode or directory counts that are wrong.
    WrongSummaryCounts,
    /// An inode's count of allocated blocks that is wrong.
    WrongBlockCount,
    /// The root (inode 1) is not a directory.
    RootMissing,
    /// A superblock slot that fails its checks while the other passes:
    /// the other is used, and a repair writes it to this slot too.
    BadSuperblockSlot,
    /// A FIFO, device or socket whose inode has a size, 512-byte units or
    /// block pointers: it never has any. A repair clears them (the
    /// blocks it pointed at are not claimed for it: leaked, if no file
    /// holds them).
    SpecialFileWithData,
    /// An entry whose type byte is not the kind of the inode it names.
    WrongEntryType,
    /// An inode's extended attribute block that fails its checks (magic,
    /// version, checksum with the inode's number, a field past its bound:
    /// docs/formats.md, "Extended attributes"). A repair clears the
    /// pointer: the attributes are lost, the block is free again.
    BadXattrBlock,
    /// The file system's log cannot be replayed whole: a damaged commit
    /// stopped its replay (the commits before it are home, those from it
    /// on are lost), or neither header slot can be read though they are
    /// not blank. A repair drops what cannot be replayed (the log starts
    /// again past it, or its header slots are made blank); the rest of
    /// the check finds what the lost commits leave.
    DamagedLog,
    /// An entry naming a directory that another entry names already (a
    /// hard link to a directory, or a loop back to an ancestor), the root
    /// or the directory holding it: every directory is reached once from
    /// the root. A repair removes the entry, keeping the one its `..`
    /// names, else the one nearest the root; a loop cut off from the
    /// root is cut where it began and reconnected in lost+found. Preen
    /// repairs it: a crash inside a directory's rename leaves it under
    /// `sync` (the new entry is written before the old one goes), and
    /// fsck_ffs removes an extraneous hard link to a directory when
    /// preening too.
    DirectoryLinkedTwice,
    /// A symlink whose target cannot be read: a target too long for the
    /// inode with no block to hold it (its pointer lost or cut). A repair
    /// clears the inode, as e2fsck clears an invalid symlink; the entries
    /// naming it are then removed (`entry_naming_free_inode`).
    BadSymlink,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::GarbageInode => "garbage_inode",
            Class::BadBlockPointer => "bad_block_pointer",
            Class::BlockClaimedTwice => "block_claimed_twice",
            Class::BadDirectoryBlock => "bad_directory_block",
            Class::EntryNamingFreeInode => "entry_naming_free_inode",
            Class::BadDotDot => "bad_dot_dot",
            Class::DotDotMismatch => "dot_dot_mismatch",
            Class::UnattachedInode => "unattached_inode",
            Class::LinkCountTooHigh => "link_count_too_high",
            Class::LinkCountTooLow => "link_count_too_low",
            Class::BlockInUseButFree => "block_in_use_but_free",
            Class::LeakedBlock => "leaked_block",
            Class::InodeInUseButFree => "inode_in_use_but_free",
            Class::LeakedInode => "leaked_inode",
            Class::WrongSummaryCounts => "wrong_summary_counts",
            Class::WrongBlockCount => "wrong_block_count",
            Class::RootMissing => "root_missing",
            Class::BadSuperblockSlot => "bad_superblock_slot",
            Class::SpecialFileWithData => "special_file_with_data",
            Class::WrongEntryType => "wrong_entry_type",
            Class::BadXattrBlock => "bad_xattr_block",
            Class::DamagedLog => "damaged_log",
            Class::DirectoryLinkedTwice => "directory_linked_twice",
            Class::BadSymlink => "bad_symlink",
        }
    }

    /// Whether it is a leak: something marked in use that nothing uses, a
    /// count too high, or a summary off. The only damage soft updates
    /// leaves after a crash (a background fsck's work).
    pub fn is_leak(self) -> bool {
        matches!(
            self,
            Class::UnattachedInode
                | Class::LinkCountTooHigh
                | Class::LeakedBlock
                | Class::LeakedInode
                | Class::WrongSummaryCounts
                | Class::WrongBlockCount
        )
    }

    /// Whether preen (`-p`) repairs it: the damage a `sync` crash leaves.
    pub fn preen_safe(self) -> bool {
        matches!(
            self,
            Class::UnattachedInode
                | Class::LinkCountTooHigh
                | Class::BlockInUseButFree
                | Class::LeakedBlock
                | Class::InodeInUseButFree
                | Class::LeakedInode
                | Class::WrongSummaryCounts
                | Class::WrongBlockCount
                | Class::BadSuperblockSlot
                | Class::DotDotMismatch
                | Class::DirectoryLinkedTwice
        )
    }
}

/// One thing found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub class: Class,
    pub detail: String,
    /// Whether this run repaired it.
    pub repaired: bool,
}

/// The outcome of a check.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Commits of the file system's log replayed before the check.
    pub replayed_commits: u64,
    pub findings: Vec<Finding>,
    pub inodes_checked: u64,
    pub blocks_claimed: u64,
    pub directories: u64,
}

impl Report {
    /// Findings per class.
    pub fn counts(&self) -> BTreeMap<Class, usize> {
        let mut out = BTreeMap::new();
        for f in &self.findings {
            *out.entry(f.class).or_default() += 1;
        }
        out
    }

    pub fn clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Damage found and not repaired.
    pub fn damage_left(&self) -> bool {
        self.findings.iter().any(|f| !f.repaired)
    }
}

/// What an inode of `mode` is, for findings.
fn kind_name(mode: u16) -> &'static str {
    match mode & S_IFMT {
        S_IFREG => "file",
        S_IFDIR => "directory",
        S_IFLNK => "symlink",
        _ => special_name(mode),
    }
}

/// "1 block", "3 blocks".
fn report_blocks(n: usize) -> String {
    if n == 1 {
        "1 block".into()
    } else {
        format!("{n} blocks")
    }
}

/// What a special inode of `mode` is, for findings.
fn special_name(mode: u16) -> &'static str {
    match mode & S_IFMT {
        S_IFIFO => "FIFO",
        S_IFCHR => "character device",
        S_IFBLK => "block device",
        S_IFSOCK => "socket",
        _ => "inode of no known kind",
    }
}

/// Whether an entry's name is one no lookup takes: empty, or holding a
/// `/` or a NUL.
fn bad_name(name: &[u8]) -> bool {
    name.is_empty() || name.iter().any(|&b| b == b'/' || b == 0)
}

/// An inode pass 1 found allocated: what the passes after it ask of
/// every inode (16 bytes and a pointer), and a directory's whole inode,
/// through which pass 2 reads its blocks (as pass 1 left it: under `-n`,
/// its bad pointers cut in this copy only). A repair that needs another
/// kind's whole inode reads it again (`Checker::inode_now`).
struct Seen {
    mode: u16,
    nlink: u16,
    /// Entries naming it (pass 2), `..` of subdirectories included.
    names: u32,
    size: u64,
    dir: Option<Box<DiskInode>>,
}

impl Seen {
    fn new(inode: DiskInode) -> Seen {
        let (mode, nlink, size) = (inode.mode, inode.nlink, inode.size);
        let dir = (inode.kind_bits() == S_IFDIR).then(|| Box::new(inode));
        Seen { mode, nlink, names: 0, size, dir }
    }

    /// The inode changed (a repair): its names kept.
    fn set(&mut self, inode: DiskInode) {
        *self = Seen { names: self.names, ..Seen::new(inode) };
    }

    fn kind_bits(&self) -> u16 {
        self.mode & S_IFMT
    }

    fn is_dir(&self) -> bool {
        self.kind_bits() == S_IFDIR
    }
}

/// Block -> the inode claiming it, the block kept by its 32-bit number
/// (every block number the format holds fits: pointers are 32 bits), half
/// the memory of a 64-bit key for the check's largest map.
#[derive(Default)]
struct Claims(HashMap<u32, u32>);

impl Claims {
    fn key(block: &u64) -> u32 {
        debug_assert!(*block <= u64::from(u32::MAX), "a block number the format holds");
        *block as u32
    }

    fn get(&self, block: &u64) -> Option<&u32> {
        self.0.get(&Self::key(block))
    }

    fn contains_key(&self, block: &u64) -> bool {
        self.0.contains_key(&Self::key(block))
    }

    fn insert(&mut self, block: u64, owner: u32) -> Option<u32> {
        self.0.insert(Self::key(&block), owner)
    }

    fn remove(&mut self, block: &u64) -> Option<u32> {
        self.0.remove(&Self::key(block))
    }

    fn retain(&mut self, mut keep: impl FnMut(u64, &mut u32) -> bool) {
        self.0.retain(|&block, owner| keep(u64::from(block), owner));
    }

    /// Every claim, as (block, owner), in no order.
    fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.0.iter().map(|(&block, &owner)| (u64::from(block), owner))
    }
}

/// [`Checker::entry_types`]'s byte for an inode kept whose mode no entry
/// type names.
const ANY_TYPE: u8 = 0xff;

/// The type [`Checker::entry_types`] holds for inode `ino` (0: none kept).
fn type_of(types: &[u8], ino: u32) -> u8 {
    types.get(ino as usize).copied().unwrap_or(0)
}

/// Inode table blocks pass 1 read in one request: `blocks` from `first`.
struct TableChunk {
    first: u64,
    blocks: u64,
    bytes: device::AlignedBuf,
}

/// Table blocks read to a request in pass 1 (128 KiB; e2fsck reads 32 KiB).
const TABLE_CHUNK_BLOCKS: u64 = 32;

/// What pass 1 made of one pointer an inode holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pointer {
    /// The block is the inode's (an indirect one is walked).
    Claimed,
    /// Damaged, and its finding left for `-y`: kept as it is, not walked.
    Left,
    /// Damaged, and cut (or, under `-n`, reported as `-y` would cut it).
    Cut,
}

/// A directory entry pass 2 read.
struct Entry {
    dir: u32,
    /// Held in place when short, as most names are: a check holds one
    /// entry per name in the file system.
    name: smallvec::SmallVec<[u8; 16]>,
    ino: u32,
    /// Its type byte (docs/formats.md, "Directory").
    kind: u8,
    offset: u64,
}

struct Checker {
    core: Core,
    /// The device's name, for the faults of its structures.
    device: String,
    repair: Repair,
    report: Report,
    /// Every allocated inode pass 1 found (in no order: a pass that
    /// walks them in order sorts their numbers).
    inodes: HashMap<u32, Seen>,
    /// block -> the inode claiming it.
    claims: Claims,
    entries: Vec<Entry>,
    /// directory -> its parent by `..`.
    dotdot: HashMap<u32, u32>,
    /// Inodes on the orphan list: unlinked while open, freed by the next
    /// mount; named by nothing, and rightly so.
    orphans: HashSet<u32>,
    /// Blocks and inodes fsck itself took (lost+found made or grown):
    /// taken from what pass 1 found unclaimed and the maps mark free;
    /// pass 5 marks and counts them as the repair's own, not as damage.
    made_blocks: HashSet<u64>,
    made_inodes: HashSet<u32>,
    /// Unattached inodes pass 3 could not reconnect (no lost+found could
    /// be had): kept as they are, never cleared by pass 4's counts.
    left_unattached: HashSet<u32>,
    /// Data blocks claimed again under `-y`, with the inode that claimed
    /// each after its first owner: copied for it after pass 1.
    shared: Vec<(u64, u32)>,
    /// Groups whose header failed its checks: pass 1 reads their whole
    /// inode table, and their slots handed out become what it found.
    headless: Vec<bool>,
    /// For those groups: the slots pass 1 found anything in, to the end
    /// of its table block.
    reached: Vec<u32>,
}

impl Checker {
    /// A checker of the file system on `dev` whose superblock is `sb`,
    /// before any pass: a cache of its own, every group's count empty,
    /// each group's inode table read as far as its header says.
    fn new(dev: &Dev, sb: Superblock, repair: Repair, replayed_commits: u64) -> Checker {
        let groups = vec![GroupCounts::default(); sb.groups as usize];
        // How far pass 1 reads each group's inode table: as far as its
        // header says inodes were ever handed out, all of it when the header
        // cannot be read (e2fsck trusts `bg_itable_unused` the same way).
        let headers: Vec<Option<GroupHeader>> = (0..sb.groups)
            .map(|g| {
                let bytes = crate::mount::read_block(dev, sb.group_start(g)).ok()?;
                GroupHeader::decode(&bytes, g, &sb, dev.name()).ok()
            })
            .collect();
        let initialized = headers
            .iter()
            .map(|h| h.as_ref().map_or(sb.inodes_per_group, |h| h.inodes_initialized))
            .collect();
        let headless: Vec<bool> = headers.iter().map(Option::is_none).collect();
        let cache = Cache::new(Arc::clone(dev), FSCK_CACHE_BYTES, false, device::Clock::Wall);
        let core = Core::new(
            sb,
            (groups, initialized),
            cache,
            Policy::Async,
            LogState::new(0, std::time::Duration::ZERO),
        );
        Checker {
            core,
            device: dev.name().to_string(),
            repair,
            report: Report { replayed_commits, ..Report::default() },
            inodes: HashMap::default(),
            claims: Claims::default(),
            entries: Vec::new(),
            dotdot: HashMap::default(),
            orphans: HashSet::default(),
            made_blocks: HashSet::default(),
            made_inodes: HashSet::default(),
            left_unattached: HashSet::default(),
            shared: Vec::new(),
            reached: vec![0; headless.len()],
            headless,
        }
    }
}

/// Where a check is: pass `pass` of [`PASSES`] (`name`), `done` of
/// `total` steps of it (pass 1 steps by group, the others are one step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub pass: u8,
    pub name: &'static str,
    pub done: u64,
    pub total: u64,
}

/// The passes a check makes, in order.
pub const PASSES: [&str; 5] =
    ["inodes and blocks", "entries", "connectivity", "link counts", "maps and counts"];

/// Checks the file system on `dev` (not mounted) and repairs as `repair`
/// allows. Unrecoverable: no superblock slot that passes its checks
/// ([`FsError::Superblock`]; one that fails while the other passes is a
/// finding, `bad_superblock_slot`).
pub fn fsck(dev: &Dev, repair: Repair) -> Result<Report, FsError> {
    fsck_telling(dev, repair, &|_| {})
}

/// [`fsck`], telling `tell` each step as it begins.
pub fn fsck_telling(dev: &Dev, repair: Repair, tell: &dyn Fn(Step)) -> Result<Report, FsError> {
    // As fsck_ffs with WAPBL: what the log committed is replayed home
    // first (a check that only reads is given a scratch view to replay on).
    let (read, replayed) = replayed_or_log_damage(dev)?;
    let (replayed, log_damage) = match replayed {
        Ok(replayed) => (replayed, None),
        Err(damage) => (None, Some(damage)),
    };
    let replayed_commits = replayed.map_or(0, |r| r.commits);
    let mut c = Checker::new(dev, read.superblock.clone(), repair, replayed_commits);
    if let Some(detail) = read.passed_over_text() {
        if c.found(Class::BadSuperblockSlot, detail) {
            c.write_superblock_next()?;
        }
    }
    if let Some(damage) = log_damage {
        if c.found(Class::DamagedLog, damage.to_string()) {
            crate::wapbl::repair(dev, &c.core.sb, &damage)?;
        }
    }
    c.orphans = c.core.listed_orphans().into_iter().collect();
    let groups = u64::from(c.core.sb.groups);
    c.pass1_inodes(&|g| tell(Step { pass: 1, name: PASSES[0], done: g, total: groups }))?;
    c.copy_shared_blocks()?;
    if !c.roots_present()? {
        // Nothing else can be judged from a tree with no root: report it
        // as the damage it is (`-y` makes the root again).
        return Ok(c.report);
    }
    let begin = |pass: u8| tell(Step { pass, name: PASSES[usize::from(pass) - 1], done: 0, total: 1 });
    begin(2);
    c.pass2_entries()?;
    begin(3);
    c.pass3_connectivity()?;
    begin(4);
    c.pass4_link_counts()?;
    begin(5);
    c.pass5_maps()?;
    if repair != Repair::No && c.report.findings.iter().any(|f| f.repaired) {
        c.write_repairs()?;
    }
    if repair != Repair::No {
        c.mark_state()?;
    }
    Ok(c.report)
}

impl Checker {
    /// Records a finding; returns whether to repair it.
    fn found(&mut self, class: Class, detail: String) -> bool {
        let repaired = match self.repair {
            Repair::No => false,
            Repair::Preen => class.preen_safe(),
            Repair::Leaks => class.is_leak(),
            Repair::Yes => true,
        };
        self.report.findings.push(Finding { class, detail, repaired });
        repaired
    }

    /// Makes every repair durable.
    fn write_repairs(&mut self) -> Result<(), FsError> {
        self.core.cache.write_back(&mut self.core.order, true).map_err(FsError::Device)?;
        match &self.core.failed {
            Some(failure) => {
                Err(FsError::Invalid(format!("a repair could not be written: {}", failure.cause)))
            }
            None => Ok(()),
        }
    }

    /// After a repairing check, what the superblock says of the image
    /// (docs/fs.md, "An unclean image"): clean, with no damage recorded,
    /// when nothing is left (the repairs durable before it); else the
    /// damage left recorded, so that every mount refuses the image until
    /// `-y` (or `-p` for what `-B` leaves) repairs it.
    fn mark_state(&mut self) -> Result<(), FsError> {
        let left = self.report.findings.iter().filter(|f| !f.repaired).map(|f| f.class);
        let damage = left.fold(Damage::None, |d, class| {
            d.max(if class.is_leak() { Damage::Leaks } else { Damage::Unknown })
        });
        let sb = &self.core.sb;
        let clean = damage == Damage::None;
        if (sb.clean, sb.damage) == (clean, damage) || (!clean && sb.damage >= damage) {
            return Ok(());
        }
        let sb = &mut self.core.sb;
        if clean {
            sb.clean = true;
        }
        sb.damage = if clean { Damage::None } else { sb.damage.max(damage) };
        self.write_superblock_next()?;
        self.core.cache.flush(&mut self.core.order).map_err(FsError::Device)
    }

    /// Writes the superblock one generation on, to its next slot (the
    /// other one), at once: a slot passed over gets the one in use, and
    /// both pass again.
    fn write_superblock_next(&mut self) -> Result<(), FsError> {
        let sb = &mut self.core.sb;
        sb.generation += 1;
        let slot = sb.generation % 2;
        let bytes = sb.encode();
        self.core.cache.fresh(&mut self.core.order, slot)?[..bytes.len()].copy_from_slice(&bytes);
        self.core.cache.write_now(&mut self.core.order, slot)?;
        Ok(())
    }

    fn errno(e: fsapi::Errno) -> FsError {
        FsError::Invalid(format!("reading the file system: {e}"))
    }

    fn read(&mut self, block: u64) -> Result<Vec<u8>, FsError> {
        Ok(self.core.cache.read(&mut self.core.order, block)?.to_vec())
    }

    /// Blocks `first..first + blocks` will be read soon ([`device::Device::will_need`]).
    fn will_need(&self, first: u64, blocks: u64) {
        let block = BLOCK_BYTES as u64;
        self.core.cache.device().will_need(first * block, blocks * block);
    }

    /// The entry type byte (`DT_*`) of each inode pass 1 kept, by inode
    /// number (0: none kept; [`ANY_TYPE`] for a mode no type names): a
    /// dense copy, taken when a walk over every entry starts, of what it
    /// asks of each entry's inode (a map lookup per entry costs a cache
    /// miss each).
    fn entry_types(&self) -> Vec<u8> {
        let mut types = vec![0u8; self.core.sb.total_inodes() as usize + 1];
        for (&ino, seen) in &self.inodes {
            if let Some(t) = types.get_mut(ino as usize) {
                *t = dt_of_mode(seen.mode).unwrap_or(ANY_TYPE);
            }
        }
        types
    }

    /// Whether `block` lies in some group's data area.
    fn is_data(&self, block: u64) -> bool {
        self.core.sb.is_data(block)
    }

    /// Directory `dir`'s inode as pass 1 left it.
    fn dir_copy(&self, dir: u32) -> DiskInode {
        self.inodes.get(&dir).and_then(|s| s.dir.as_deref()).cloned().unwrap_or_default()
    }

    /// Inode `ino` as a repair finds it now: a directory's as pass 1 left
    /// it, another kind's read from the table (as repairs so far left it).
    fn inode_now(&mut self, ino: u32) -> Result<DiskInode, FsError> {
        match self.inodes.get(&ino).and_then(|s| s.dir.as_deref()) {
            Some(dir) => Ok(dir.clone()),
            None => self.core.inode(ino).map_err(Self::errno),
        }
    }
}
