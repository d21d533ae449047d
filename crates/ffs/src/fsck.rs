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
use crate::core::{Core, GroupCounts, LogState};
use crate::format::*;
use crate::mount::replayed_or_log_damage;
use crate::{Dev, FsError, Policy};

/// fsck's buffer cache: each metadata block is read about once (the
/// inode table in pass 1, the directories in pass 2, the maps in pass
/// 5), so a cache larger than this buys no reads and costs the memory
/// (e2fsck checks 60,000 files in 15 MiB).
const FSCK_CACHE_BYTES: u64 = 16 << 20;

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

/// An inode pass 1 found allocated.
struct Seen {
    inode: DiskInode,
    /// Entries naming it (pass 2), `..` of subdirectories included.
    names: u32,
}

/// A directory entry pass 2 read.
struct Entry {
    dir: u32,
    name: Vec<u8>,
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
    claims: HashMap<u64, u32>,
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
}

/// Checks the file system on `dev` (not mounted) and repairs as `repair`
/// allows. Unrecoverable: no superblock slot that passes its checks
/// ([`FsError::Superblock`]; one that fails while the other passes is a
/// finding, `bad_superblock_slot`).
pub fn fsck(dev: &Dev, repair: Repair) -> Result<Report, FsError> {
    // As fsck_ffs with WAPBL: what the log committed is replayed home
    // first (a check that only reads is given a scratch view to replay on).
    let (read, replayed) = replayed_or_log_damage(dev)?;
    let (replayed, log_damage) = match replayed {
        Ok(replayed) => (replayed, None),
        Err(damage) => (None, Some(damage)),
    };
    let sb = read.superblock.clone();
    let groups = vec![GroupCounts::default(); sb.groups as usize];
    let core = Core {
        sb,
        groups_dirty: Default::default(),
        rotors: Default::default(),
        moving: false,
        groups,
        cache: Cache::new(Arc::clone(dev), FSCK_CACHE_BYTES, false, device::Clock::Wall),
        policy: Policy::Async,
        refs: Default::default(),
        dir_index: Default::default(),
        failed: None,
        log: LogState::new(0, std::time::Duration::ZERO),
    };
    let mut c = Checker {
        core,
        device: dev.name().to_string(),
        repair,
        report: Report { replayed_commits: replayed.map_or(0, |r| r.commits), ..Report::default() },
        inodes: HashMap::default(),
        claims: HashMap::default(),
        entries: Vec::new(),
        dotdot: HashMap::default(),
        orphans: HashSet::default(),
        made_blocks: HashSet::default(),
        made_inodes: HashSet::default(),
        left_unattached: HashSet::default(),
        shared: Vec::new(),
    };
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
    c.pass1_inodes()?;
    c.copy_shared_blocks()?;
    if !c.roots_present()? {
        // Nothing else can be judged from a tree with no root: report it
        // as the damage it is (`-y` makes the root again).
        return Ok(c.report);
    }
    c.pass2_entries()?;
    c.pass3_connectivity()?;
    c.pass4_link_counts()?;
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
        self.core.cache.write_back(true).map_err(FsError::Device)?;
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
        self.core.cache.flush().map_err(FsError::Device)
    }

    /// Writes the superblock one generation on, to its next slot (the
    /// other one), at once: a slot passed over gets the one in use, and
    /// both pass again.
    fn write_superblock_next(&mut self) -> Result<(), FsError> {
        let sb = &mut self.core.sb;
        sb.generation += 1;
        let slot = sb.generation % 2;
        let bytes = sb.encode();
        self.core.cache.fresh(slot)?[..bytes.len()].copy_from_slice(&bytes);
        self.core.cache.write_now(slot)?;
        Ok(())
    }

    fn errno(e: fsapi::Errno) -> FsError {
        FsError::Invalid(format!("reading the file system: {e}"))
    }

    fn read(&mut self, block: u64) -> Result<Vec<u8>, FsError> {
        Ok(self.core.cache.read(block)?.to_vec())
    }

    /// Whether `block` lies in some group's data area.
    fn is_data(&self, block: u64) -> bool {
        self.core.sb.is_data(block)
    }

    // Pass 1: every inode slot; the blocks allocated inodes claim.
    fn pass1_inodes(&mut self) -> Result<(), FsError> {
        // At most u32::MAX: a bound the superblock's decoder checked.
        let total = u32::try_from(self.core.sb.total_inodes()).unwrap_or(u32::MAX);
        // Each inode table block read once for its inodes (a repair
        // writes through the cache, slot by slot, so the copy stays good
        // for the slots after).
        let mut table: (u64, Vec<u8>) = (u64::MAX, Vec::new());
        for ino in 1..=total {
            let (block, at) = self.core.sb.inode_place(ino);
            if table.0 != block {
                table = (block, self.read(block)?);
            }
            match DiskInode::decode(ino, &table.1[at..at + INODE_BYTES]) {
                InodeSlot::Free => {}
                InodeSlot::Garbage => {
                    if self.found(Class::GarbageInode, format!("inode {ino} is neither free nor valid")) {
                        self.core.clear_inode(ino).map_err(Self::errno)?;
                    }
                }
                InodeSlot::Used(inode) if special_kind(inode.mode) => {
                    self.report.inodes_checked += 1;
                    let inode = self.check_special(ino, inode)?;
                    let inode = self.claim_special_xattr(ino, inode)?;
                    self.inodes.insert(ino, Seen { inode, names: 0 });
                }
                InodeSlot::Used(inode) => {
                    self.report.inodes_checked += 1;
                    let inode = self.claim_blocks(ino, inode)?;
                    let long = inode.size as usize > INLINE_SYMLINK_BYTES;
                    if inode.kind_bits() == S_IFLNK && long && inode.direct[0] == 0 {
                        let detail = format!(
                            "inode {ino}, a symlink of {} bytes, has no block to hold its target",
                            inode.size
                        );
                        if self.found(Class::BadSymlink, detail) {
                            self.core.clear_inode(ino).map_err(Self::errno)?;
                            self.claims.retain(|_, owner| *owner != ino);
                            continue;
                        }
                    }
                    self.inodes.insert(ino, Seen { inode, names: 0 });
                }
            }
        }
        Ok(())
    }

    /// A FIFO, device or socket holds nothing but its inode (any device
    /// number): a size, units or pointers are cleared, its pointers never
    /// claimed (a block a file holds stays the file's). Units counted with
    /// neither a size nor a pointer are a count too high, no more: what
    /// soft updates writes while a new attribute block is not on the disk
    /// yet (the pointer rolled back, the count kept, as for a file's).
    fn check_special(&mut self, ino: u32, mut inode: DiskInode) -> Result<DiskInode, FsError> {
        if !inode.holds_data() {
            return Ok(inode);
        }
        let pointers = inode.direct.iter().chain([&inode.single, &inode.double]).filter(|&&p| p != 0).count();
        if inode.size == 0 && pointers == 0 {
            let detail = format!(
                "inode {ino}, a {}, counts {} units allocated and holds {} (its attribute block's)",
                special_name(inode.mode),
                inode.blocks_512,
                inode.xattr_units()
            );
            if self.found(Class::WrongBlockCount, detail) {
                inode.blocks_512 = inode.xattr_units();
                self.core.put_inode(ino, &inode).map_err(Self::errno)?;
            }
            return Ok(inode);
        }
        let detail = format!(
            "inode {ino}, a {}, has {} bytes, {} units allocated and {pointers} block pointers: it holds none",
            special_name(inode.mode),
            inode.size,
            inode.blocks_512
        );
        if self.found(Class::SpecialFileWithData, detail) {
            inode.direct = [0; DIRECT_POINTERS];
            (inode.single, inode.double, inode.size) = (0, 0, 0);
            inode.blocks_512 = inode.xattr_units();
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        }
        Ok(inode)
    }

    /// A special file's extended attribute block, its one block: a bad
    /// one cleared (its units with it).
    fn claim_special_xattr(&mut self, ino: u32, mut inode: DiskInode) -> Result<DiskInode, FsError> {
        let mut claimed = 0;
        if self.claim_xattr(ino, &mut inode, &mut claimed)? && self.repair != Repair::No {
            inode.blocks_512 = inode.xattr_units();
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        }
        self.report.blocks_claimed += claimed;
        Ok(inode)
    }

    /// Claims inode `ino`'s extended attribute block, if it has one, and
    /// checks it; a pointer outside the data area, to a block claimed
    /// already, or to a block that fails its checks is cut (when
    /// repaired). Returns whether it was cut.
    fn claim_xattr(&mut self, ino: u32, inode: &mut DiskInode, claimed: &mut u64) -> Result<bool, FsError> {
        let block = inode.xattr;
        if block == 0 {
            return Ok(false);
        }
        if !self.claim(ino, u64::from(block), claimed, false) {
            inode.xattr = 0;
            return Ok(true);
        }
        let bytes = self.read(u64::from(block))?;
        let fault = match XattrBlock::decode(&bytes, ino, block, &self.device) {
            Ok(attrs) => return self.drop_user_attrs(ino, inode, attrs, claimed),
            Err(fault) => fault,
        };
        let detail = format!("{fault}: its attributes are lost when it is cleared");
        if !self.found(Class::BadXattrBlock, detail) {
            return Ok(false);
        }
        // No longer this inode's: free in the map (pass 5), and the
        // inode's units recounted without it.
        self.claims.remove(&u64::from(block));
        *claimed -= 1;
        inode.xattr = 0;
        Ok(true)
    }

    /// `user.` attributes on an inode whose kind cannot hold them (a
    /// symlink, FIFO, device or socket: the kernel lets only files and
    /// directories have them, and getxattr of one answers ENODATA though
    /// listxattr names it), as damage to a mode leaves them: dropped, the
    /// block rewritten without them, or cleared when nothing is left.
    /// Returns whether the pointer was cut.
    fn drop_user_attrs(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        mut attrs: XattrBlock,
        claimed: &mut u64,
    ) -> Result<bool, FsError> {
        if matches!(inode.kind_bits(), S_IFREG | S_IFDIR) {
            return Ok(false);
        }
        let user = |n: &fsapi::XattrName| n.namespace == fsapi::xattr::Namespace::User;
        let count = attrs.entries.keys().filter(|n| user(n)).count();
        if count == 0 {
            return Ok(false);
        }
        let detail = format!(
            "inode {ino}, a {}, holds {} the kind cannot hold: {}",
            kind_name(inode.mode),
            if count == 1 { "a user. attribute".to_string() } else { format!("{count} user. attributes") },
            if count == attrs.entries.len() { "its attribute block is cleared" } else { "they are dropped" }
        );
        if !self.found(Class::BadXattrBlock, detail) {
            return Ok(false);
        }
        attrs.entries.retain(|n, _| !user(n));
        let block = inode.xattr;
        if attrs.entries.is_empty() {
            self.claims.remove(&u64::from(block));
            *claimed -= 1;
            inode.xattr = 0;
            return Ok(true);
        }
        attrs.encode(ino, self.core.cache.modify(u64::from(block))?);
        Ok(false)
    }

    /// Walks an inode's pointers, claiming each block; a pointer outside
    /// the data area or to a block already claimed is cut (when repaired).
    fn claim_blocks(&mut self, ino: u32, mut inode: DiskInode) -> Result<DiskInode, FsError> {
        let mut claimed = 0u64;
        let mut changed = false;
        if inode.kind_bits() == S_IFDIR && self.repair != Repair::No {
            for i in 0..DIRECT_POINTERS {
                self.reclaim_dir_block(ino, u64::from(inode.direct[i]))?;
            }
        }
        for i in 0..DIRECT_POINTERS {
            if inode.direct[i] != 0 && !self.claim(ino, u64::from(inode.direct[i]), &mut claimed, true) {
                inode.direct[i] = 0;
                changed = true;
            }
        }
        for (level, slot) in [(1u32, inode.single), (2, inode.double)] {
            if slot == 0 {
                continue;
            }
            let keep = self.claim(ino, u64::from(slot), &mut claimed, false)
                && self.claim_indirect(ino, slot, level, &mut claimed)?;
            if !keep {
                changed = true;
                if level == 1 {
                    inode.single = 0;
                } else {
                    inode.double = 0;
                }
            }
        }
        changed |= self.claim_xattr(ino, &mut inode, &mut claimed)?;
        let units = claimed * BLOCK_UNITS;
        if inode.blocks_512 != units {
            let detail = format!("inode {ino} says {} units allocated, holds {units}", inode.blocks_512);
            if self.found(Class::WrongBlockCount, detail) {
                inode.blocks_512 = units;
                changed = true;
            }
        }
        if changed && self.repair != Repair::No {
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        }
        self.report.blocks_claimed += claimed;
        Ok(inode)
    }

    /// A block directory `ino` points at that a lower-numbered inode
    /// claimed first, while the block's own `.` names `ino`: it is this
    /// directory's, and the other's pointer is the damaged one. The other
    /// inode's pointer is cut (its count with it) and the block is left
    /// for `ino` to claim: the intact owner keeps its data, not the lower
    /// inode number.
    fn reclaim_dir_block(&mut self, ino: u32, block: u64) -> Result<(), FsError> {
        let Some(&other) = self.claims.get(&block) else { return Ok(()) };
        if other == ino || !self.is_data(block) {
            return Ok(());
        }
        let bytes = self.read(block)?;
        let names_it = DirRecord::read(&bytes, 0).is_some_and(|r| r.name == b"." && r.ino == ino);
        let Some(mut loser) = self.inodes.get(&other).map(|s| s.inode.clone()) else { return Ok(()) };
        if !names_it || !self.cut_data_pointer(&mut loser, block)? {
            return Ok(());
        }
        let detail = format!(
            "block {block} is claimed by inode {other} and by inode {ino}, whose directory block it is \
             (its '.' names it): kept for inode {ino}"
        );
        self.found(Class::BlockClaimedTwice, detail);
        loser.blocks_512 = loser.blocks_512.saturating_sub(BLOCK_UNITS);
        self.core.put_inode(other, &loser).map_err(Self::errno)?;
        if let Some(seen) = self.inodes.get_mut(&other) {
            seen.inode = loser;
        }
        self.claims.remove(&block);
        self.report.blocks_claimed -= 1;
        Ok(())
    }

    /// Pass 1B, as e2fsck's 1B to 1D: each data block an inode claimed
    /// after another (in inode order) is copied to a block no inode
    /// claims, and that inode's pointer moved to the copy, so both keep
    /// the bytes they had, whichever of them is damaged; before pass 2,
    /// so that a repair of one's directory block leaves the other's copy
    /// alone. With no free block left, its pointer is cut.
    fn copy_shared_blocks(&mut self) -> Result<(), FsError> {
        for (block, ino) in std::mem::take(&mut self.shared) {
            let (Some(&owner), Some(seen)) = (self.claims.get(&block), self.inodes.get(&ino)) else {
                continue;
            };
            let mut inode = seen.inode.clone();
            let copy = self.take_block(ino)?;
            let detail = match copy {
                Some(copy) => format!(
                    "block {block} is claimed by inode {owner} and by inode {ino}: inode {ino} gets a copy \
                     of it, block {copy}"
                ),
                None => format!(
                    "block {block} is claimed by inode {owner} and by inode {ino}: no block is free for a \
                     copy, so inode {ino}'s pointer is cut"
                ),
            };
            self.found(Class::BlockClaimedTwice, detail);
            match copy {
                Some(copy) => {
                    let bytes = self.read(block)?;
                    self.core.cache.modify(copy)?.copy_from_slice(&bytes);
                    self.move_data_pointer(&mut inode, block, copy as u32)?;
                }
                None => {
                    self.move_data_pointer(&mut inode, block, 0)?;
                    inode.blocks_512 = inode.blocks_512.saturating_sub(BLOCK_UNITS);
                    self.report.blocks_claimed -= 1;
                }
            }
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
            if let Some(seen) = self.inodes.get_mut(&ino) {
                seen.inode = inode;
            }
        }
        Ok(())
    }

    /// Cuts `inode`'s data pointer to `block` (a direct one, or one in its
    /// single indirect block or its double's singles). Whether it had one.
    fn cut_data_pointer(&mut self, inode: &mut DiskInode, block: u64) -> Result<bool, FsError> {
        self.move_data_pointer(inode, block, 0)
    }

    /// Points `inode`'s first data pointer to `block` at `to` instead (0
    /// cuts it). Whether it had one.
    fn move_data_pointer(&mut self, inode: &mut DiskInode, block: u64, to: u32) -> Result<bool, FsError> {
        if let Some(p) = inode.direct.iter_mut().find(|p| u64::from(**p) == block) {
            *p = to;
            return Ok(true);
        }
        let mut holders = Vec::new();
        if inode.single != 0 && self.is_data(u64::from(inode.single)) {
            holders.push(u64::from(inode.single));
        }
        if inode.double != 0 && self.is_data(u64::from(inode.double)) {
            let bytes = self.read(u64::from(inode.double))?;
            let singles = (0..POINTERS_PER_BLOCK as usize).map(|i| u64::from(pointer_at(&bytes, i)));
            holders.extend(singles.filter(|&b| b != 0 && self.is_data(b)));
        }
        for holder in holders {
            let bytes = self.read(holder)?;
            if let Some(i) =
                (0..POINTERS_PER_BLOCK as usize).find(|&i| u64::from(pointer_at(&bytes, i)) == block)
            {
                set_pointer(self.core.cache.modify(holder)?, i, to);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Claims `block` for `ino`; false when the pointer is bad (and was
    /// reported). A file's or directory's data block (`data`) another
    /// inode claimed first is kept under `-y`, to be copied for `ino`
    /// once pass 1 is done (`copy_shared_blocks`).
    fn claim(&mut self, ino: u32, block: u64, claimed: &mut u64, data: bool) -> bool {
        if !self.is_data(block) {
            self.found(
                Class::BadBlockPointer,
                format!("inode {ino} points at block {block}, outside the data area"),
            );
            return false;
        }
        if let Some(&other) = self.claims.get(&block) {
            if data && other != ino && self.repair == Repair::Yes {
                self.shared.push((block, ino));
                *claimed += 1;
                return true;
            }
            let detail = format!("block {block} is claimed by inode {other} and by inode {ino}");
            self.found(Class::BlockClaimedTwice, detail);
            return false;
        }
        self.claims.insert(block, ino);
        *claimed += 1;
        true
    }

    fn claim_indirect(
        &mut self,
        ino: u32,
        block: u32,
        level: u32,
        claimed: &mut u64,
    ) -> Result<bool, FsError> {
        let bytes = self.read(u64::from(block))?;
        let mut out = bytes.clone();
        let mut changed = false;
        for i in 0..POINTERS_PER_BLOCK as usize {
            let p = pointer_at(&bytes, i);
            if p == 0 {
                continue;
            }
            let ok = self.claim(ino, u64::from(p), claimed, level == 1)
                && (level == 1 || self.claim_indirect(ino, p, 1, claimed)?);
            if !ok {
                set_pointer(&mut out, i, 0);
                changed = true;
            }
        }
        if changed && self.repair != Repair::No {
            self.core.cache.modify(u64::from(block))?.copy_from_slice(&out);
        }
        Ok(true)
    }

    /// The root must be a directory. With `-y` a root that is not (its
    /// inode cleared as garbage, or its mode damaged) is made again
    /// (`recreate_root`); else nothing more can be judged, and the check
    /// stops there. (lost+found may be removed: fsck makes it again when
    /// it needs it.)
    fn roots_present(&mut self) -> Result<bool, FsError> {
        if self.inodes.get(&ROOT_INO).is_some_and(|s| s.inode.kind_bits() == S_IFDIR) {
            return Ok(true);
        }
        let detail = format!("the root directory (inode {ROOT_INO}) is not a directory");
        if !self.found(Class::RootMissing, detail) {
            return Ok(false);
        }
        let made = self.recreate_root()?;
        let Some(last) = self.report.findings.last_mut() else { return Ok(false) };
        match made {
            Some(how) => {
                last.detail.push_str(&format!(": made again, {how}"));
                Ok(true)
            }
            None => {
                last.detail.push_str(": no block to make it again with");
                last.repaired = false;
                Ok(false)
            }
        }
    }

    /// Makes the root directory again (fsck_ffs's "ROOT INODE
    /// UNALLOCATED. ALLOCATE?"): inode 1 a directory whose first block is
    /// the old root's when one is found (a block no other inode claims
    /// whose first records are `.` and `..` naming inode 1: its entries
    /// are kept), else a new empty one. What the old root's other blocks
    /// named comes back through lost+found (pass 3). Says how, or None
    /// when no block can be had.
    fn recreate_root(&mut self) -> Result<Option<String>, FsError> {
        // The damaged inode's blocks are no longer a file's: its direct
        // blocks from the first, if that is the old root's, are the new
        // root's (a mode damaged alone loses no entry).
        let damaged = self.inodes.remove(&ROOT_INO).map(|s| s.inode);
        let mut old: Vec<u64> =
            self.claims.iter().filter(|(_, &owner)| owner == ROOT_INO).map(|(&b, _)| b).collect();
        old.sort_unstable();
        self.claims.retain(|_, owner| *owner != ROOT_INO);
        let mut direct = [0u32; DIRECT_POINTERS];
        let how = match self.old_root_block(&old)? {
            Some(first) => {
                let pointers = damaged.filter(|d| u64::from(d.direct[0]) == first).map(|d| d.direct);
                let kept =
                    pointers.into_iter().flatten().take_while(|&p| old.binary_search(&u64::from(p)).is_ok());
                for (n, p) in std::iter::once(first as u32).chain(kept.skip(1)).enumerate() {
                    direct[n] = p;
                    self.claims.insert(u64::from(p), ROOT_INO);
                }
                let n = direct.iter().filter(|&&p| p != 0).count();
                format!("its {} found from block {first}, their entries kept", report_blocks(n))
            }
            None => {
                let Some(block) = self.take_block(ROOT_INO)? else { return Ok(None) };
                direct[0] = u32::try_from(block).map_err(|_| FsError::Invalid(format!("block {block}")))?;
                self.core.dir_init(direct[0], ROOT_INO, ROOT_INO).map_err(Self::errno)?;
                "empty: the old root's first block was not found".to_string()
            }
        };
        let blocks = direct.iter().filter(|&&p| p != 0).count() as u64;
        let t = fsapi::Time::now();
        let inode = DiskInode {
            mode: S_IFDIR | 0o755,
            nlink: 2,
            size: blocks * BLOCK_BYTES as u64,
            blocks_512: blocks * 8,
            times: [(t.secs, t.nanos); 4],
            direct,
            ..DiskInode::default()
        };
        self.core.put_inode(ROOT_INO, &inode).map_err(Self::errno)?;
        self.inodes.insert(ROOT_INO, Seen { inode, names: 0 });
        Ok(Some(how))
    }

    /// The old root's first block: among `old` (what the damaged inode 1
    /// pointed at), then among the blocks the maps mark in use that no
    /// inode claims (where an inode cleared as garbage left it), the
    /// first whose records begin with `.` and `..` naming the root.
    fn old_root_block(&mut self, old: &[u64]) -> Result<Option<u64>, FsError> {
        let is_root_block = |bytes: &[u8]| {
            let Some(dot) = DirRecord::read(bytes, 0) else { return false };
            let Some(dotdot) = DirRecord::read(bytes, dot.reclen as usize) else { return false };
            (dot.name.as_slice(), dot.ino, dotdot.name.as_slice(), dotdot.ino)
                == (b".", ROOT_INO, b"..", ROOT_INO)
        };
        for &block in old {
            if self.is_data(block) && is_root_block(&self.read(block)?) {
                return Ok(Some(block));
            }
        }
        self.first_unclaimed(true, |c, block| Ok(is_root_block(&c.read(block)?)))
    }

    /// The first data block, in block order, that no inode claims (nor
    /// fsck took), whose group's map marks it in use (`marked`) or free,
    /// and for which `wanted` holds.
    fn first_unclaimed(
        &mut self,
        marked: bool,
        mut wanted: impl FnMut(&mut Self, u64) -> Result<bool, FsError>,
    ) -> Result<Option<u64>, FsError> {
        let sb = self.core.sb.clone();
        for g in 0..sb.groups {
            let start = sb.group_start(g);
            let map = self.read(start + 1)?;
            for i in sb.group_overhead_blocks()..sb.group_blocks(g) {
                let block = start + u64::from(i);
                let is_marked = map[(i / 8) as usize] & (1 << (i % 8)) != 0;
                if is_marked != marked
                    || self.claims.contains_key(&block)
                    || self.made_blocks.contains(&block)
                {
                    continue;
                }
                if wanted(self, block)? {
                    return Ok(Some(block));
                }
            }
        }
        Ok(None)
    }

    // Pass 2: every directory's records; `.` and `..`.
    fn pass2_entries(&mut self) -> Result<(), FsError> {
        let mut dirs: Vec<u32> =
            self.inodes.iter().filter(|(_, s)| s.inode.kind_bits() == S_IFDIR).map(|(i, _)| *i).collect();
        dirs.sort_unstable();
        for dir in dirs {
            self.report.directories += 1;
            self.read_directory(dir)?;
        }
        self.check_duplicate_names()?;
        let entries = std::mem::take(&mut self.entries);
        let mut kept = Vec::with_capacity(entries.len());
        for e in entries {
            if e.name == b"." || e.name == b".." {
                kept.push(e);
                continue;
            }
            if self.inodes.contains_key(&e.ino) {
                kept.push(e);
                continue;
            }
            let name = String::from_utf8_lossy(&e.name).into_owned();
            let detail = format!(
                "entry '{name}' in directory {} names inode {}, which is free or uninitialised",
                e.dir, e.ino
            );
            if self.found(Class::EntryNamingFreeInode, detail) {
                let mut inode = self.inodes[&e.dir].inode.clone();
                self.core.dir_remove(e.dir, &mut inode, &e.name, e.offset).map_err(Self::errno)?;
            }
        }
        self.entries = kept;
        self.check_entry_types()?;
        self.check_directory_links()?;
        for e in &self.entries {
            if e.name == b"." {
                continue;
            }
            if e.name == b".." {
                self.dotdot.insert(e.dir, e.ino);
            }
        }
        for e in &self.entries {
            if e.name != b"." && e.name != b".." {
                if let Some(seen) = self.inodes.get_mut(&e.ino) {
                    seen.names += 1;
                }
            }
        }
        self.check_dots()?;
        Ok(())
    }

    /// One entry of each name in a directory, as e2fsck's "duplicate
    /// entry" holds it: a lookup finds one of them, a listing both, and a
    /// second `..` is the one a lookup takes in a large directory. Each
    /// later one is removed (what it named may then be unattached, and
    /// pass 3 reconnects it).
    fn check_duplicate_names(&mut self) -> Result<(), FsError> {
        let mut seen: HashSet<(u32, &[u8])> = HashSet::default();
        let mut duplicates = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if !seen.insert((e.dir, e.name.as_slice())) {
                duplicates.push(i);
            }
        }
        let mut removed = HashSet::default();
        for i in duplicates {
            let e = &self.entries[i];
            let detail = format!(
                "directory {} has a second entry '{}' (inode {})",
                e.dir,
                String::from_utf8_lossy(&e.name),
                e.ino
            );
            let (dir, name, offset) = (e.dir, e.name.clone(), e.offset);
            if self.found(Class::BadDirectoryBlock, detail) {
                let mut inode = self.inodes[&dir].inode.clone();
                self.core.dir_remove(dir, &mut inode, &name, offset).map_err(Self::errno)?;
                self.core.drop_index(dir);
                removed.insert(i);
            }
        }
        let entries = std::mem::take(&mut self.entries);
        self.entries =
            entries.into_iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, e)| e).collect();
        Ok(())
    }

    /// Every directory named by one entry, as fsck_ffs and e2fsck hold
    /// it: an entry naming the root or its own directory is removed, of
    /// several naming one directory the one its `..` names is kept, and
    /// then a walk from the root (and from each directory it does not
    /// reach: those no entry names first, then loops, cut where the
    /// lowest-numbered directory is) keeps the first entry that reaches
    /// each directory and removes the rest.
    fn check_directory_links(&mut self) -> Result<(), FsError> {
        let is_dir = |c: &Self, i: u32| c.inodes.get(&i).is_some_and(|s| s.inode.kind_bits() == S_IFDIR);
        let mut dotdot: HashMap<u32, u32> = HashMap::default();
        for e in self.entries.iter().filter(|e| e.name == b"..") {
            dotdot.entry(e.dir).or_insert(e.ino);
        }
        let mut drop: BTreeMap<usize, &'static str> = BTreeMap::new();
        let mut namers: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.name == b"." || e.name == b".." || !is_dir(self, e.ino) {
                continue;
            }
            if e.ino == ROOT_INO {
                drop.insert(i, "the root");
            } else if e.ino == e.dir {
                drop.insert(i, "the directory holding it");
            } else {
                namers.entry(e.ino).or_default().push(i);
            }
        }
        for (d, list) in &namers {
            let parent = dotdot.get(d);
            if let Some(&keep) = list.iter().find(|&&i| Some(&self.entries[i].dir) == parent) {
                for &i in list.iter().filter(|&&i| i != keep) {
                    drop.insert(i, "a directory another entry names");
                }
            }
        }
        let mut children: HashMap<u32, Vec<usize>> = HashMap::default();
        for list in namers.values() {
            for &i in list.iter().filter(|i| !drop.contains_key(i)) {
                children.entry(self.entries[i].dir).or_default().push(i);
            }
        }
        for list in children.values_mut() {
            list.sort_unstable();
        }
        let named: HashSet<u32> =
            namers.iter().filter(|(_, l)| l.iter().any(|i| !drop.contains_key(i))).map(|(d, _)| *d).collect();
        let mut dirs: Vec<u32> = self.inodes.keys().copied().filter(|&i| is_dir(self, i)).collect();
        dirs.sort_unstable();
        let starts = std::iter::once(ROOT_INO)
            .chain(dirs.iter().copied().filter(|d| !named.contains(d)))
            .chain(dirs.iter().copied().filter(|d| named.contains(d)));
        let mut reached: HashSet<u32> = HashSet::default();
        for start in starts.collect::<Vec<_>>() {
            if !reached.insert(start) {
                continue;
            }
            let mut queue = std::collections::VecDeque::from([start]);
            while let Some(d) = queue.pop_front() {
                for &i in children.get(&d).into_iter().flatten() {
                    let t = self.entries[i].ino;
                    if reached.insert(t) {
                        queue.push_back(t);
                    } else {
                        drop.insert(i, "a directory another entry names");
                    }
                }
            }
        }
        if drop.is_empty() {
            return Ok(());
        }
        let mut removed = HashSet::default();
        for (&i, why) in &drop {
            let e = &self.entries[i];
            let detail = format!(
                "entry '{}' in directory {} names directory {}, {why}",
                String::from_utf8_lossy(&e.name),
                e.dir,
                e.ino
            );
            let (dir, name, offset) = (e.dir, e.name.clone(), e.offset);
            if self.found(Class::DirectoryLinkedTwice, detail) {
                let mut inode = self.inodes[&dir].inode.clone();
                self.core.dir_remove(dir, &mut inode, &name, offset).map_err(Self::errno)?;
                removed.insert(i);
            }
        }
        let entries = std::mem::take(&mut self.entries);
        self.entries =
            entries.into_iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, e)| e).collect();
        Ok(())
    }

    /// Adds the entry `name -> target` to directory `dir` (grown first
    /// when it has no room), recorded in `entries`. Whether it could.
    fn add_entry(&mut self, dir: u32, name: &[u8], target: u32, dt: u8) -> Result<bool, FsError> {
        if !self.room_in(dir, name.len())? {
            return Ok(false);
        }
        let mut inode = self.core.inode(dir).map_err(Self::errno)?;
        self.core.dir_add(dir, &mut inode, name, target, dt).map_err(Self::errno)?;
        self.core.put_inode(dir, &inode).map_err(Self::errno)?;
        let found = self.core.dir_lookup(dir, &mut inode, name).map_err(Self::errno)?;
        let offset = found.map(|f| f.offset).ok_or_else(|| Self::errno(fsapi::Errno::IO))?;
        if let Some(seen) = self.inodes.get_mut(&dir) {
            seen.inode = inode;
        }
        self.entries.push(Entry { dir, name: name.to_vec(), ino: target, kind: dt, offset });
        Ok(true)
    }

    /// Each entry's type byte against the kind of the inode it names (a
    /// listing trusts the byte, as readdir does everywhere); a repair
    /// rewrites the byte.
    fn check_entry_types(&mut self) -> Result<(), FsError> {
        let mut wrong = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let Some(seen) = self.inodes.get(&e.ino) else { continue };
            let Some(dt) = dt_of_mode(seen.inode.mode).filter(|&dt| dt != e.kind) else { continue };
            wrong.push((i, dt));
        }
        for (i, dt) in wrong {
            let e = &self.entries[i];
            let (dir, offset, ino) = (e.dir, e.offset, e.ino);
            let detail = format!(
                "entry '{}' in directory {} says type {}, but inode {} is a {} (type {dt})",
                String::from_utf8_lossy(&e.name),
                e.dir,
                e.kind,
                e.ino,
                kind_name(self.inodes[&e.ino].inode.mode)
            );
            if self.found(Class::WrongEntryType, detail) {
                let mut inode = self.inodes[&dir].inode.clone();
                self.core.dir_retarget(dir, &mut inode, offset, ino, dt).map_err(Self::errno)?;
                self.entries[i].kind = dt;
            }
        }
        Ok(())
    }

    /// Reads directory `dir`'s records into `entries`; a block whose
    /// records do not tile it is reported (and, repaired, its bad chunks
    /// emptied). A size that is not the blocks the directory maps (past
    /// its last block, short of it, or not a whole block) is set to them,
    /// as fsck_ffs adjusts a directory's length: a hole inside is filled
    /// with an empty directory block, never grown into a size that maps
    /// nothing. An entry whose name no lookup can take (empty, `/` or NUL
    /// in it) is removed: what it named is then unattached, and pass 3
    /// reconnects it.
    fn read_directory(&mut self, dir: u32) -> Result<(), FsError> {
        let mut inode = self.inodes[&dir].inode.clone();
        let mapped = self.mapped_blocks(&inode)?;
        if inode.size != mapped * BLOCK_BYTES as u64 {
            let detail = format!(
                "directory {dir} is {} bytes long and maps {mapped} blocks: its length is set to them",
                inode.size
            );
            if self.found(Class::BadDirectoryBlock, detail) {
                inode.size = mapped * BLOCK_BYTES as u64;
                self.core.put_inode(dir, &inode).map_err(Self::errno)?;
                self.core.drop_index(dir);
                if let Some(seen) = self.inodes.get_mut(&dir) {
                    seen.inode = inode.clone();
                }
            }
        }
        for n in 0..mapped {
            let Some((block, _)) = self.core.bmap(dir, &mut inode, n, false).map_err(Self::errno)? else {
                let detail = format!("directory {dir} has a hole at block {n}");
                if self.found(Class::BadDirectoryBlock, detail) && !self.fill_dir_block(dir, &mut inode, n)? {
                    if let Some(last) = self.report.findings.last_mut() {
                        last.repaired = false;
                    }
                }
                continue;
            };
            let bytes = self.read(u64::from(block))?;
            let mut at = 0usize;
            // The last good record of the chunk `at` is in.
            let mut previous: Option<usize> = None;
            while at < BLOCK_BYTES {
                if at % DIR_CHUNK_BYTES == 0 {
                    previous = None;
                }
                let Some(rec) = DirRecord::read(&bytes, at) else {
                    let detail = format!("directory {dir}, block {n}: a malformed record at byte {at}");
                    let chunk_end = (at / DIR_CHUNK_BYTES + 1) * DIR_CHUNK_BYTES;
                    if self.found(Class::BadDirectoryBlock, detail) {
                        // The rest of the chunk joins the record before it
                        // (as fsck_ffs's dircheck mends), or, first in its
                        // chunk, becomes one empty record: never a record
                        // too short for its own header.
                        let out = self.core.cache.modify(u64::from(block))?;
                        match previous {
                            Some(p) => {
                                out[p + 4..p + 6].copy_from_slice(&((chunk_end - p) as u16).to_le_bytes())
                            }
                            None => {
                                let reclen = (chunk_end - at) as u16;
                                DirRecord { ino: 0, reclen, kind: 0, name: Vec::new() }.write(out, at)
                            }
                        }
                    }
                    at = chunk_end;
                    continue;
                };
                let offset = n * BLOCK_BYTES as u64 + at as u64;
                if rec.ino == 0 || at % DIR_CHUNK_BYTES == 0 || !bad_name(&rec.name) {
                    // A removed entry joins the record before it.
                    previous = Some(at);
                }
                at += rec.reclen as usize;
                if rec.ino == 0 {
                    continue;
                }
                if bad_name(&rec.name) {
                    let detail = format!(
                        "directory {dir}, block {n}: the entry '{}' (inode {}) has a name no lookup takes",
                        String::from_utf8_lossy(&rec.name),
                        rec.ino
                    );
                    if self.found(Class::BadDirectoryBlock, detail) {
                        self.core.dir_remove(dir, &mut inode, &rec.name, offset).map_err(Self::errno)?;
                        continue;
                    }
                }
                let (name, ino, kind) = (rec.name, rec.ino, rec.kind);
                self.entries.push(Entry { dir, name, ino, kind, offset });
            }
        }
        Ok(())
    }

    /// The blocks directory `inode` maps: up to its last pointer (its
    /// pointers as pass 1 left them).
    fn mapped_blocks(&mut self, inode: &DiskInode) -> Result<u64, FsError> {
        let mut end = 0u64;
        for (i, &p) in inode.direct.iter().enumerate() {
            if p != 0 {
                end = i as u64 + 1;
            }
        }
        let last_in =
            |bytes: &[u8]| (0..POINTERS_PER_BLOCK as usize).rev().find(|&i| pointer_at(bytes, i) != 0);
        if inode.single != 0 && self.is_data(u64::from(inode.single)) {
            let bytes = self.read(u64::from(inode.single))?;
            if let Some(i) = last_in(&bytes) {
                end = DIRECT_POINTERS as u64 + i as u64 + 1;
            }
        }
        if inode.double != 0 && self.is_data(u64::from(inode.double)) {
            let bytes = self.read(u64::from(inode.double))?;
            let mut last = None;
            for i in (0..POINTERS_PER_BLOCK as usize).rev() {
                let p = pointer_at(&bytes, i);
                if p == 0 || !self.is_data(u64::from(p)) {
                    continue;
                }
                let single = self.read(u64::from(p))?;
                if let Some(j) = last_in(&single) {
                    last = Some(i as u64 * POINTERS_PER_BLOCK + j as u64);
                    break;
                }
            }
            if let Some(k) = last {
                end = DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK + k + 1;
            }
        }
        Ok(end)
    }

    /// `.` must name the directory, and `..` the directory that names it
    /// (the root's, itself); a repair rewrites the entry, so a second
    /// check finds nothing. A directory no entry names is not held to its
    /// `..`: pass 3 puts it in lost+found and points its `..` there, as
    /// fsck_ffs's linkup does (soft updates writes a new directory before
    /// its parent's count, even before a new parent itself: until its
    /// entry is on the disk, its `..` is not a link). A directory named
    /// from more than one directory may name any of them.
    fn check_dots(&mut self) -> Result<(), FsError> {
        let mut dirs: Vec<u32> =
            self.inodes.iter().filter(|(_, s)| s.inode.kind_bits() == S_IFDIR).map(|(i, _)| *i).collect();
        dirs.sort_unstable();
        // One pass over the entries: who names each directory, and where
        // each directory's `.` and `..` are.
        let mut namers: HashMap<u32, Vec<u32>> = HashMap::default();
        let mut dots: HashMap<u32, (Option<usize>, Option<usize>)> = HashMap::default();
        for (i, e) in self.entries.iter().enumerate() {
            match e.name.as_slice() {
                b"." => dots.entry(e.dir).or_default().0.get_or_insert(i),
                b".." => dots.entry(e.dir).or_default().1.get_or_insert(i),
                _ if e.dir != e.ino => {
                    namers.entry(e.ino).or_default().push(e.dir);
                    continue;
                }
                _ => continue,
            };
        }
        for dir in dirs {
            let (dot, dotdot) = dots.get(&dir).copied().unwrap_or_default();
            let named = dir == ROOT_INO || self.inodes[&dir].names > 0;
            let expected =
                if dir == ROOT_INO { vec![ROOT_INO] } else { namers.get(&dir).cloned().unwrap_or_default() };
            let dot_ok = dot.is_some_and(|i| self.entries[i].ino == dir);
            let parent = dotdot.map(|i| self.entries[i].ino);
            let parent_ok = !named || parent.is_some_and(|p| expected.contains(&p));
            if dot_ok && parent_ok {
                continue;
            }
            let detail = format!(
                "directory {dir}: '.' names {:?}, '..' names {parent:?} (named from {expected:?})",
                dot.map(|i| self.entries[i].ino)
            );
            // Only `..` naming a directory, another than its namer's:
            // a crash inside a rename, which preen mends.
            let is_dir = |p: u32| self.inodes.get(&p).is_some_and(|s| s.inode.kind_bits() == S_IFDIR);
            let class =
                if dot_ok && parent.is_some_and(is_dir) { Class::DotDotMismatch } else { Class::BadDotDot };
            if !self.found(class, detail) {
                continue;
            }
            // Each wrong entry is rewritten where it is; one that is not
            // there at all cannot be, here.
            let mut inode = self.inodes[&dir].inode.clone();
            let mut fixes = Vec::new();
            if !dot_ok {
                fixes.push((dot, dir, &b"."[..]));
            }
            if !parent_ok {
                fixes.push((dotdot, expected[0], &b".."[..]));
            }
            let mut whole = true;
            for (at, target, name) in fixes {
                let Some(i) = at else {
                    // Missing: added (with room made for it).
                    whole &= self.add_entry(dir, name, target, DT_DIR)?;
                    if name == b".." {
                        self.dotdot.insert(dir, target);
                    }
                    continue;
                };
                let offset = self.entries[i].offset;
                self.core.dir_retarget(dir, &mut inode, offset, target, DT_DIR).map_err(Self::errno)?;
                self.entries[i].ino = target;
                if self.entries[i].name == b".." {
                    self.dotdot.insert(dir, target);
                }
            }
            if !whole {
                if let Some(last) = self.report.findings.last_mut() {
                    last.repaired = false;
                }
            }
        }
        Ok(())
    }

    // Pass 3: directories reachable from the root; inodes nothing names.
    // A directory cut off with what it holds is reconnected at the top of
    // the cut-off tree only (as fsck_ffs walks up to it): what it names
    // comes back with it.
    fn pass3_connectivity(&mut self) -> Result<(), FsError> {
        self.reallocate_lost_found()?;
        let mut reachable: HashSet<u32> = HashSet::default();
        let children: HashMap<u32, Vec<u32>> = self
            .entries
            .iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .fold(HashMap::default(), |mut m, e| {
                m.entry(e.dir).or_default().push(e.ino);
                m
            });
        let reach = |from: u32, reachable: &mut HashSet<u32>| {
            let mut stack = vec![from];
            while let Some(d) = stack.pop() {
                if reachable.insert(d) {
                    stack.extend(children.get(&d).into_iter().flatten().copied());
                }
            }
        };
        reach(ROOT_INO, &mut reachable);
        if self.rename_lost_found(&reachable)? {
            reach(LOST_FOUND_INO, &mut reachable);
        }
        let named_by: HashMap<u32, u32> = (self.entries.iter())
            .filter(|e| e.name != b"." && e.name != b".." && e.dir != e.ino)
            .map(|e| (e.ino, e.dir))
            .collect();
        let mut unattached: Vec<u32> = (self.inodes.keys().copied())
            .filter(|i| !reachable.contains(i) && !self.orphans.contains(i))
            .collect();
        unattached.sort_unstable();
        for ino in unattached {
            if reachable.contains(&ino) {
                continue; // came back with the directory above it
            }
            let seen = &self.inodes[&ino];
            if seen.names > 0 && seen.inode.kind_bits() != S_IFDIR {
                continue; // named from a directory that is itself unattached
            }
            // The top of the cut-off tree this directory is in: up through
            // the directories that name it.
            let mut top = ino;
            for _ in 0..self.inodes.len() {
                let Some(&parent) = named_by.get(&top) else { break };
                if parent == top || reachable.contains(&parent) {
                    break;
                }
                top = parent;
                if top == ino {
                    break; // a loop of directories: reconnect where it began
                }
            }
            let seen = &self.inodes[&top];
            let (size, links) = (seen.inode.size, seen.inode.nlink);
            let detail = format!("inode {top} ({size} bytes, {links} links) is named by no reachable entry");
            if self.found(Class::UnattachedInode, detail) {
                self.reattach(top)?;
            }
            reach(top, &mut reachable);
        }
        Ok(())
    }

    /// lost+found (inode 2, its `..` the root) cut off from the root, its
    /// entry lost while no other lost+found is named: named lost+found in
    /// the root again, rather than put in a new lost+found as `#2`.
    /// Whether it was.
    fn rename_lost_found(&mut self, reachable: &HashSet<u32>) -> Result<bool, FsError> {
        let named = self.entries.iter().any(|e| e.dir == ROOT_INO && e.name == b"lost+found");
        let cut_off = self.inodes.get(&LOST_FOUND_INO).is_some_and(|s| s.inode.kind_bits() == S_IFDIR)
            && !reachable.contains(&LOST_FOUND_INO)
            && self.dotdot.get(&LOST_FOUND_INO) == Some(&ROOT_INO);
        if named || !cut_off {
            return Ok(false);
        }
        let detail = format!("lost+found (inode {LOST_FOUND_INO}) is named by no entry in the root");
        if !self.found(Class::UnattachedInode, detail) {
            return Ok(false);
        }
        if !self.room_in(ROOT_INO, b"lost+found".len())? {
            if let Some(last) = self.report.findings.last_mut() {
                last.repaired = false;
            }
            return Ok(false);
        }
        let mut root = self.core.inode(ROOT_INO).map_err(Self::errno)?;
        self.core.dir_add(ROOT_INO, &mut root, b"lost+found", LOST_FOUND_INO, DT_DIR).map_err(Self::errno)?;
        self.core.put_inode(ROOT_INO, &root).map_err(Self::errno)?;
        let found = self.core.dir_lookup(ROOT_INO, &mut root, b"lost+found").map_err(Self::errno)?;
        let offset = found.map(|f| f.offset).ok_or_else(|| Self::errno(fsapi::Errno::IO))?;
        if let Some(seen) = self.inodes.get_mut(&ROOT_INO) {
            seen.inode = root;
        }
        if let Some(seen) = self.inodes.get_mut(&LOST_FOUND_INO) {
            seen.names += 1;
        }
        let name = b"lost+found".to_vec();
        self.entries.push(Entry { dir: ROOT_INO, name, ino: LOST_FOUND_INO, kind: DT_DIR, offset });
        Ok(true)
    }

    /// Puts an unattached inode in lost+found as `#INO`, or frees it when
    /// it holds nothing (an empty file without extended attributes, as
    /// fsck_ffs clears), with any blocks it kept past its end (fallocate's
    /// keep-size), which pass 5 then finds free. lost+found is made when
    /// missing and grown when full (fsck_ffs's "NO lost+found DIRECTORY.
    /// CREATE?" and expanddir): what holds data is never dropped for want
    /// of room while the file system has a free inode and blocks.
    fn reattach(&mut self, ino: u32) -> Result<(), FsError> {
        let inode = self.inodes[&ino].inode.clone();
        let dir = inode.kind_bits() == S_IFDIR;
        if !dir && inode.size == 0 && inode.xattr == 0 {
            self.core.clear_inode(ino).map_err(Self::errno)?;
            self.inodes.remove(&ino);
            let points = inode.direct.iter().any(|&p| p != 0) || inode.single != 0 || inode.double != 0;
            if points {
                self.claims.retain(|_, owner| *owner != ino);
            }
            return Ok(());
        }
        let lf_ino = match self.lost_found()? {
            Ok(lf_ino) => lf_ino,
            Err(why) => {
                self.stays_unattached(ino, &why);
                return Ok(());
            }
        };
        let name = format!("#{ino}");
        // Pass 1 let only the kinds iolab stores through.
        let dt = dt_of_mode(inode.mode).unwrap_or(DT_FILE);
        if !self.room_in(lf_ino, name.len())? {
            let why = "lost+found is full and cannot grow (no free block, or at its largest)";
            self.stays_unattached(ino, why);
            return Ok(());
        }
        let mut lf = self.core.inode(lf_ino).map_err(Self::errno)?;
        self.core.dir_add(lf_ino, &mut lf, name.as_bytes(), ino, dt).map_err(Self::errno)?;
        if dir {
            lf.nlink += 1;
            let mut moved = inode.clone();
            if let Ok(Some(dotdot)) = self.core.dir_lookup(ino, &mut moved, b"..") {
                self.core
                    .dir_retarget(ino, &mut moved, dotdot.offset, lf_ino, DT_DIR)
                    .map_err(Self::errno)?;
            } else if !self.add_entry(ino, b"..", lf_ino, DT_DIR)? {
                let why = "its '..' is missing and it has no room for one";
                self.found(Class::BadDotDot, format!("directory {ino}: {why}"));
                if let Some(last) = self.report.findings.last_mut() {
                    last.repaired = false;
                }
            }
            self.dotdot.insert(ino, lf_ino);
        }
        self.core.put_inode(lf_ino, &lf).map_err(Self::errno)?;
        if inode.nlink == 0 {
            // A file a crash left unlinked but still allocated (open when
            // it went down, its orphan list not on disk): linked again, it
            // counts its new name, as fsck_ffs's linkup does.
            let mut linked = inode.clone();
            linked.nlink = if dir { 2 } else { 1 };
            self.core.put_inode(ino, &linked).map_err(Self::errno)?;
            if let Some(seen) = self.inodes.get_mut(&ino) {
                seen.inode = linked;
            }
        }
        if let Some(seen) = self.inodes.get_mut(&ino) {
            seen.names += 1;
        }
        if let Some(seen) = self.inodes.get_mut(&lf_ino) {
            seen.inode = lf;
        }
        Ok(())
    }

    /// Reports that unattached inode `ino` could not be reconnected (not
    /// repaired), and keeps it from pass 4's clearing.
    fn stays_unattached(&mut self, ino: u32, why: &str) {
        self.found(Class::UnattachedInode, format!("{why}: inode {ino} stays unattached"));
        if let Some(last) = self.report.findings.last_mut() {
            last.repaired = false;
        }
        self.left_unattached.insert(ino);
    }

    /// The lost+found directory in the root, made if there is none:
    /// Ok(inode), or Err(why) when it is not there and cannot be made.
    fn lost_found(&mut self) -> Result<Result<u32, String>, FsError> {
        let entry = self.entries.iter().find(|e| e.dir == ROOT_INO && e.name == b"lost+found").map(|e| e.ino);
        match entry {
            Some(i) if self.inodes.get(&i).is_some_and(|s| s.inode.kind_bits() == S_IFDIR) => {
                return Ok(Ok(i))
            }
            Some(i) => {
                return Ok(Err(format!(
                    "lost+found in the root is inode {i}, not a directory (rename it, and fsck makes one)"
                )))
            }
            None => {}
        }
        match self.make_lost_found()? {
            Some(lf_ino) => {
                self.report.findings.push(Finding {
                    class: Class::UnattachedInode,
                    detail: format!("no lost+found in the root: made (inode {lf_ino})"),
                    repaired: true,
                });
                Ok(Ok(lf_ino))
            }
            None => Ok(Err("no lost+found, and no free inode or block to make one".into())),
        }
    }

    /// Makes lost+found in the root: inode 2 if it is free (else the
    /// first free one), one empty block. None when there is no free inode
    /// or block for it, or no room in the root.
    fn make_lost_found(&mut self) -> Result<Option<u32>, FsError> {
        let Some(ino) = self.take_inode()? else { return Ok(None) };
        if !self.room_in(ROOT_INO, b"lost+found".len())? {
            self.made_inodes.remove(&ino);
            return Ok(None);
        }
        if !self.new_lost_found_dir(ino)? {
            return Ok(None);
        }
        let mut root = self.core.inode(ROOT_INO).map_err(Self::errno)?;
        self.core.dir_add(ROOT_INO, &mut root, b"lost+found", ino, DT_DIR).map_err(Self::errno)?;
        root.nlink += 1;
        self.core.put_inode(ROOT_INO, &root).map_err(Self::errno)?;
        let found = self.core.dir_lookup(ROOT_INO, &mut root, b"lost+found").map_err(Self::errno)?;
        let offset = found.map(|f| f.offset).ok_or_else(|| Self::errno(fsapi::Errno::IO))?;
        if let Some(seen) = self.inodes.get_mut(&ROOT_INO) {
            seen.inode = root;
        }
        if let Some(seen) = self.inodes.get_mut(&ino) {
            seen.names = 1;
        }
        let name = b"lost+found".to_vec();
        self.entries.push(Entry { dir: ROOT_INO, name, ino, kind: DT_DIR, offset });
        Ok(Some(ino))
    }

    /// Makes inode `ino` (taken by `take_inode`) an empty lost+found
    /// directory whose `..` is the root, with one block taken as
    /// `take_block` takes them; no entry names it yet. Whether it could
    /// (with no free block, the inode is given back).
    fn new_lost_found_dir(&mut self, ino: u32) -> Result<bool, FsError> {
        let Some(block) = self.take_block(ino)? else {
            self.made_inodes.remove(&ino);
            return Ok(false);
        };
        let t = fsapi::Time::now();
        let block32 = u32::try_from(block).map_err(|_| FsError::Invalid(format!("block {block}")))?;
        let mut direct = [0u32; DIRECT_POINTERS];
        direct[0] = block32;
        let inode = DiskInode {
            mode: S_IFDIR | 0o700,
            nlink: 2,
            size: BLOCK_BYTES as u64,
            blocks_512: 8,
            times: [(t.secs, t.nanos); 4],
            direct,
            ..DiskInode::default()
        };
        self.core.dir_init(block32, ino, ROOT_INO).map_err(Self::errno)?;
        self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        self.inodes.insert(ino, Seen { inode, names: 0 });
        self.dotdot.insert(ino, ROOT_INO);
        Ok(true)
    }

    /// fsck_ffs's "lost+found IS NOT A DIRECTORY. REALLOCATE" (with `-y`
    /// only, as fsck_ffs will not preen it): when something is cut off
    /// from the root and the root's lost+found names a file (or another
    /// kind), the name is given to a directory, the old lost+found
    /// directory if it is cut off with its `..` at the root, else a new
    /// one; the file it named, named no more, is then reconnected in it
    /// as `#INO` (or cleared, when empty). A file named lost+found with
    /// nothing to reconnect stays as it is.
    fn reallocate_lost_found(&mut self) -> Result<(), FsError> {
        let Some(at) = self.entries.iter().position(|e| e.dir == ROOT_INO && e.name == b"lost+found") else {
            return Ok(());
        };
        let file = self.entries[at].ino;
        let kind = match self.inodes.get(&file) {
            Some(s) if s.inode.kind_bits() != S_IFDIR => kind_name(s.inode.mode),
            _ => return Ok(()),
        };
        if self.repair != Repair::Yes || !self.anything_unattached() {
            return Ok(());
        }
        let old =
            self.inodes.get(&LOST_FOUND_INO).is_some_and(|s| s.inode.kind_bits() == S_IFDIR && s.names == 0)
                && self.dotdot.get(&LOST_FOUND_INO) == Some(&ROOT_INO);
        let lf = if old {
            LOST_FOUND_INO
        } else {
            let Some(ino) = self.take_inode()? else { return Ok(()) };
            if !self.new_lost_found_dir(ino)? {
                return Ok(());
            }
            ino
        };
        let mut root = self.core.inode(ROOT_INO).map_err(Self::errno)?;
        let offset = self.entries[at].offset;
        self.core.dir_retarget(ROOT_INO, &mut root, offset, lf, DT_DIR).map_err(Self::errno)?;
        if !old {
            root.nlink += 1;
            self.core.put_inode(ROOT_INO, &root).map_err(Self::errno)?;
        }
        if let Some(seen) = self.inodes.get_mut(&ROOT_INO) {
            seen.inode = root;
        }
        (self.entries[at].ino, self.entries[at].kind) = (lf, DT_DIR);
        if let Some(seen) = self.inodes.get_mut(&lf) {
            seen.names += 1;
        }
        if let Some(seen) = self.inodes.get_mut(&file) {
            seen.names = seen.names.saturating_sub(1);
        }
        self.report.findings.push(Finding {
            class: Class::UnattachedInode,
            detail: format!(
                "lost+found in the root is inode {file}, a {kind}: the name is given to a directory \
                 (inode {lf}), and inode {file} is reconnected in it"
            ),
            repaired: true,
        });
        Ok(())
    }

    /// Whether some inode is cut off from the root (and not on the orphan
    /// list): what lost+found is needed for.
    fn anything_unattached(&self) -> bool {
        let mut children: HashMap<u32, Vec<u32>> = HashMap::default();
        for e in self.entries.iter().filter(|e| e.name != b"." && e.name != b"..") {
            children.entry(e.dir).or_default().push(e.ino);
        }
        let mut reachable = HashSet::default();
        let mut stack = vec![ROOT_INO];
        while let Some(d) = stack.pop() {
            if reachable.insert(d) {
                stack.extend(children.get(&d).into_iter().flatten().copied());
            }
        }
        self.inodes.keys().any(|i| !reachable.contains(i) && !self.orphans.contains(i))
    }

    /// Whether directory `dir` has room for an entry of `name_len` bytes,
    /// grown by an empty block first if it has none.
    fn room_in(&mut self, dir: u32, name_len: usize) -> Result<bool, FsError> {
        let mut inode = self.core.inode(dir).map_err(Self::errno)?;
        if self.core.dir_has_room(dir, &mut inode, name_len).map_err(Self::errno)? {
            return Ok(true);
        }
        self.grow_dir(dir, inode)
    }

    /// Grows directory `dir` by an empty block (fsck_ffs's expanddir),
    /// taken as `take_block` takes them (with the indirect blocks it
    /// needs). Whether it grew.
    fn grow_dir(&mut self, dir: u32, mut inode: DiskInode) -> Result<bool, FsError> {
        let n = inode.size / BLOCK_BYTES as u64;
        if !self.fill_dir_block(dir, &mut inode, n)? {
            return Ok(false);
        }
        inode.size += BLOCK_BYTES as u64;
        self.core.put_inode(dir, &inode).map_err(Self::errno)?;
        self.core.drop_index(dir);
        if let Some(seen) = self.inodes.get_mut(&dir) {
            seen.inode = inode;
        }
        Ok(true)
    }

    /// Maps block `n` of directory `dir` (a hole, or its end) to a new
    /// empty directory block, with the single and double indirect blocks
    /// that must hold its pointer, each taken as `take_block` takes them;
    /// the inode is written (its size left as it is). Whether it could.
    fn fill_dir_block(&mut self, dir: u32, inode: &mut DiskInode, n: u64) -> Result<bool, FsError> {
        if n >= FILE_BLOCKS_MAX {
            return Ok(false);
        }
        let as32 = |b: u64| u32::try_from(b).map_err(|_| FsError::Invalid(format!("block {b}")));
        let take = |c: &mut Self, inode: &mut DiskInode| -> Result<Option<u32>, FsError> {
            let Some(b) = c.take_block(dir)? else { return Ok(None) };
            inode.blocks_512 += BLOCK_UNITS;
            Ok(Some(as32(b)?))
        };
        let done = 'map: {
            let Some(block) = take(self, inode)? else { break 'map false };
            self.core.dir_empty_block(block).map_err(Self::errno)?;
            if n < DIRECT_POINTERS as u64 {
                inode.direct[n as usize] = block;
                break 'map true;
            }
            let (holder, index) = if n < DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK {
                if inode.single == 0 {
                    let Some(single) = take(self, inode)? else { break 'map false };
                    inode.single = single;
                }
                (inode.single, n - DIRECT_POINTERS as u64)
            } else {
                let k = n - DIRECT_POINTERS as u64 - POINTERS_PER_BLOCK;
                if inode.double == 0 {
                    let Some(double) = take(self, inode)? else { break 'map false };
                    inode.double = double;
                }
                let outer = (k / POINTERS_PER_BLOCK) as usize;
                let mut single = pointer_at(self.core.cache.read(u64::from(inode.double))?, outer);
                if single == 0 {
                    let Some(s) = take(self, inode)? else { break 'map false };
                    set_pointer(self.core.cache.modify(u64::from(inode.double))?, outer, s);
                    single = s;
                }
                (single, k % POINTERS_PER_BLOCK)
            };
            set_pointer(self.core.cache.modify(u64::from(holder))?, index as usize, block);
            true
        };
        self.core.put_inode(dir, inode).map_err(Self::errno)?;
        if let Some(seen) = self.inodes.get_mut(&dir) {
            seen.inode = inode.clone();
        }
        Ok(done)
    }

    /// A block no inode claims and its group's map marks free, claimed for
    /// `owner` and zeroed in the cache: fsck allocates from what pass 1
    /// found, not from the maps alone, which pass 5 has yet to check.
    fn take_block(&mut self, owner: u32) -> Result<Option<u64>, FsError> {
        let Some(block) = self.first_unclaimed(false, |_, _| Ok(true))? else { return Ok(None) };
        self.claims.insert(block, owner);
        self.made_blocks.insert(block);
        self.core.cache.fresh(block)?;
        Ok(Some(block))
    }

    /// An inode number for lost+found: 2, where mkfs puts it, if it is
    /// free; else the first one that no inode holds, its map marks free
    /// and its slot is free.
    fn take_inode(&mut self) -> Result<Option<u32>, FsError> {
        let sb = self.core.sb.clone();
        let first = std::iter::once((0, LOST_FOUND_INO - 1..LOST_FOUND_INO));
        let every = (0..sb.groups).map(|g| (g, 0..sb.inodes_per_group));
        for (g, within) in first.chain(every) {
            let map = self.read(sb.group_start(g) + 2)?;
            for i in within {
                let ino = g * sb.inodes_per_group + i + 1;
                let taken = self.inodes.contains_key(&ino)
                    || self.orphans.contains(&ino)
                    || self.made_inodes.contains(&ino)
                    || ino == ROOT_INO;
                if taken || map[(i / 8) as usize] & (1 << (i % 8)) != 0 {
                    continue;
                }
                let (block, at) = sb.inode_place(ino);
                let slot = &self.core.cache.read(block)?[at..at + INODE_BYTES];
                if DiskInode::decode(ino, slot) != InodeSlot::Free {
                    continue;
                }
                self.made_inodes.insert(ino);
                return Ok(Some(ino));
            }
        }
        Ok(None)
    }

    // Pass 4: each inode's link count against the entries naming it.
    //
    // A directory whose count is 0 was removed while still open (its
    // orphan-list entry may not have reached the disk): its `.` and `..`
    // are no longer links, as the kernel counts them.
    //
    // A directory no entry names (one pass 3 did not reconnect) is not
    // counted by the parent its `..` names: reconnected, it would not be.
    fn pass4_link_counts(&mut self) -> Result<(), FsError> {
        // Removed while open: no count and no entry naming it (a named
        // directory whose count is 0 is a count gone wrong, not removed).
        let removed_dirs: HashSet<u32> = (self.inodes.iter())
            .filter(|(&d, s)| d != ROOT_INO && s.inode.nlink == 0 && s.names == 0)
            .map(|(&d, _)| d)
            .collect();
        let removed = |d: &u32| removed_dirs.contains(d);
        let unnamed = |d: &u32| self.inodes.get(d).is_none_or(|s| s.names == 0);
        let counted = |(d, p): &(&u32, &u32)| d != p && !removed(d) && !unnamed(d);
        let subdirs: HashMap<u32, u32> =
            (self.dotdot.iter()).filter(counted).fold(HashMap::default(), |mut m, (_, p)| {
                *m.entry(*p).or_default() += 1;
                m
            });
        let mut inos: Vec<u32> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let seen = &self.inodes[&ino];
            let (mut inode, seen_names) = (seen.inode.clone(), seen.names);
            let dir = inode.kind_bits() == S_IFDIR;
            // A directory: its entry, its `.`, and each subdirectory's `..`.
            let names = if dir && !removed(&ino) {
                seen_names + 1 + subdirs.get(&ino).copied().unwrap_or(0)
            } else {
                seen_names
            };
            let names = if ino == ROOT_INO { names + 1 } else { names };
            let links = u32::from(inode.nlink);
            // One left unattached keeps its count: zero would clear it.
            if links == names || (names == 0 && self.left_unattached.contains(&ino)) {
                continue;
            }
            let class = if links > names { Class::LinkCountTooHigh } else { Class::LinkCountTooLow };
            if self.found(class, format!("inode {ino} has {links} links, {names} entries name it")) {
                inode.nlink = names as u16;
                if names == 0 {
                    self.core.clear_inode(ino).map_err(Self::errno)?;
                    self.inodes.remove(&ino);
                } else {
                    self.core.put_inode(ino, &inode).map_err(Self::errno)?;
                }
            }
        }
        Ok(())
    }

    // Pass 5: bitmaps and counts against what the inodes claim.
    fn pass5_maps(&mut self) -> Result<(), FsError> {
        let sb = self.core.sb.clone();
        let mut totals = GroupCounts::default();
        let mut headers = Vec::new();
        // What pass 1 found, as bits: a lookup per block and per inode
        // in a map would cost more than the check itself.
        let claimed = self.claimed_bits();
        let inodes = self.inode_kinds();
        for g in 0..sb.groups {
            let counts = self.check_group_maps(g, &claimed, &inodes)?;
            totals.free_blocks += counts.free_blocks;
            totals.free_inodes += counts.free_inodes;
            totals.dirs += counts.dirs;
            headers.push(counts);
        }
        // What fsck took itself (lost+found) is counted in the true
        // counts; a header right before it took them is no damage, and
        // is rewritten all the same.
        let made = self.made_counts();
        let before = |c: &GroupCounts, m: &GroupCounts| GroupCounts {
            free_blocks: c.free_blocks + m.free_blocks,
            free_inodes: c.free_inodes + m.free_inodes,
            dirs: c.dirs.saturating_sub(m.dirs),
        };
        let (mut wrong, mut stale) = (Vec::new(), Vec::new());
        let mut made_total = GroupCounts::default();
        for (g, counts) in headers.iter().enumerate() {
            let start = sb.group_start(g as u32);
            let bytes = self.read(start)?;
            let stored = GroupHeader::decode(&bytes, g as u32, &sb, &self.device).ok();
            let m = made.get(&(g as u32)).copied().unwrap_or_default();
            made_total.free_blocks += m.free_blocks;
            made_total.free_inodes += m.free_inodes;
            made_total.dirs += m.dirs;
            let expected = before(counts, &m);
            let same = stored.as_ref().is_some_and(|h| {
                (h.free_blocks, h.free_inodes, h.dirs)
                    == (expected.free_blocks, expected.free_inodes, expected.dirs)
            });
            if !same {
                wrong.push((g as u32, *counts));
            } else if m != GroupCounts::default() {
                stale.push((g as u32, *counts));
            }
        }
        let expected = before(&totals, &made_total);
        let sb_same = (sb.free_blocks, sb.free_inodes, sb.dirs)
            == (u64::from(expected.free_blocks), u64::from(expected.free_inodes), u64::from(expected.dirs));
        if wrong.is_empty() && sb_same && stale.is_empty() {
            return Ok(());
        }
        if !wrong.is_empty() || !sb_same {
            let detail = format!(
                "{} group headers and {} superblock counts are wrong",
                wrong.len(),
                if sb_same { "no" } else { "the" }
            );
            if !self.found(Class::WrongSummaryCounts, detail) {
                wrong.clear();
                if stale.is_empty() {
                    return Ok(());
                }
            }
        }
        for (g, counts) in wrong.into_iter().chain(stale) {
            let header = GroupHeader {
                group: g,
                blocks: sb.group_blocks(g),
                free_blocks: counts.free_blocks,
                free_inodes: counts.free_inodes,
                dirs: counts.dirs,
                fs_id: sb.fs_id,
            };
            self.core.cache.modify(sb.group_start(g))?[..512].copy_from_slice(&header.encode());
        }
        self.core.sb.free_blocks = u64::from(totals.free_blocks);
        self.core.sb.free_inodes = u64::from(totals.free_inodes);
        self.core.sb.dirs = u64::from(totals.dirs);
        self.core.sb.generation += 1;
        let slot = self.core.sb.generation % 2;
        let bytes = self.core.sb.encode();
        self.core.cache.fresh(slot)?[..bytes.len()].copy_from_slice(&bytes);
        Ok(())
    }

    /// What fsck took itself, by group: blocks and inodes (as counts of
    /// free ones lost), and directories made.
    fn made_counts(&self) -> HashMap<u32, GroupCounts> {
        let sb = &self.core.sb;
        let mut made: HashMap<u32, GroupCounts> = HashMap::default();
        for &block in &self.made_blocks {
            let g = ((block - sb.first_group_block) / u64::from(sb.blocks_per_group)) as u32;
            made.entry(g).or_default().free_blocks += 1;
        }
        for &ino in &self.made_inodes {
            let m = made.entry((ino - 1) / sb.inodes_per_group).or_default();
            m.free_inodes += 1;
            m.dirs += u32::from(self.inodes.get(&ino).is_some_and(|s| s.inode.kind_bits() == S_IFDIR));
        }
        made
    }

    /// Group `g`'s maps against the claims; returns its true counts.
    fn check_group_maps(&mut self, g: u32, claimed: &[u64], inodes: &[u8]) -> Result<GroupCounts, FsError> {
        let free_blocks = self.check_block_map(g, claimed)?;
        let (free_inodes, dirs) = self.check_inode_map(g, inodes)?;
        Ok(GroupCounts { free_blocks, free_inodes, dirs })
    }

    /// The blocks claimed, a bit each, by block number.
    fn claimed_bits(&self) -> Vec<u64> {
        let mut bits = vec![0u64; self.core.sb.blocks.div_ceil(64) as usize];
        for &block in self.claims.keys() {
            if let Some(word) = bits.get_mut((block / 64) as usize) {
                *word |= 1 << (block % 64);
            }
        }
        bits
    }

    /// Each inode number's state after pass 4, a byte each (index 0
    /// unused): 0 free, 1 in use, 2 a directory.
    fn inode_kinds(&self) -> Vec<u8> {
        let mut kinds = vec![0u8; self.core.sb.total_inodes() as usize + 1];
        for (&ino, seen) in &self.inodes {
            if let Some(kind) = kinds.get_mut(ino as usize) {
                *kind = if seen.inode.kind_bits() == S_IFDIR { 2 } else { 1 };
            }
        }
        kinds
    }

    /// Group `g`'s block bitmap against the claims; returns its free blocks.
    fn check_block_map(&mut self, g: u32, claimed: &[u64]) -> Result<u32, FsError> {
        let sb = self.core.sb.clone();
        let start = sb.group_start(g);
        let overhead = sb.group_overhead_blocks();
        let mut map = self.read(start + 1)?;
        let (mut in_use_free, mut leaked, mut free) = (0u32, 0u32, 0u32);
        // A block fsck took is marked with no finding.
        let mut made = false;
        let mut named = Vec::new();
        for i in 0..sb.group_blocks(g) {
            let block = start + u64::from(i);
            let used = i < overhead || claimed[(block / 64) as usize] & (1 << (block % 64)) != 0;
            let (byte, mask) = ((i / 8) as usize, 1u8 << (i % 8));
            match (used, map[byte] & mask != 0) {
                (true, false) if self.made_blocks.contains(&(start + u64::from(i))) => made = true,
                (true, false) => {
                    in_use_free += 1;
                    if named.len() < 4 {
                        let owner = self.claims.get(&(start + u64::from(i))).copied().unwrap_or(0);
                        named.push(format!("{} of inode {owner}", start + u64::from(i)));
                    }
                }
                (false, true) => leaked += 1,
                _ => {}
            }
            if used {
                map[byte] |= mask;
            } else {
                map[byte] &= !mask;
                free += 1;
            }
        }
        let mut fix = false;
        if in_use_free > 0 {
            fix |= self.found(
                Class::BlockInUseButFree,
                format!(
                    "group {g}: {in_use_free} blocks in use are free in the map ({}...)",
                    named.join(", ")
                ),
            );
        }
        if leaked > 0 {
            fix |= self.found(
                Class::LeakedBlock,
                format!("group {g}: {leaked} blocks marked in use belong to nothing"),
            );
        }
        if fix || made {
            self.core.cache.modify(start + 1)?.copy_from_slice(&map);
        }
        Ok(free)
    }

    /// Group `g`'s inode bitmap against the inodes found; returns its free
    /// inodes and directories.
    fn check_inode_map(&mut self, g: u32, inodes: &[u8]) -> Result<(u32, u32), FsError> {
        let sb = self.core.sb.clone();
        let start = sb.group_start(g);
        let mut map = self.read(start + 2)?;
        let (mut in_use_free, mut leaked, mut free, mut dirs) = (0u32, 0u32, 0u32, 0u32);
        // An inode fsck took (lost+found) is marked with no finding.
        let mut made = false;
        let mut named = Vec::new();
        for i in 0..sb.inodes_per_group {
            let kind = inodes[(g * sb.inodes_per_group + i + 1) as usize];
            let (byte, mask) = ((i / 8) as usize, 1u8 << (i % 8));
            match (kind != 0, map[byte] & mask != 0) {
                (true, false) if self.made_inodes.contains(&(g * sb.inodes_per_group + i + 1)) => made = true,
                (true, false) => {
                    in_use_free += 1;
                    if named.len() < 4 {
                        named.push((g * sb.inodes_per_group + i + 1).to_string());
                    }
                }
                (false, true) => leaked += 1,
                _ => {}
            }
            if kind != 0 {
                map[byte] |= mask;
                dirs += u32::from(kind == 2);
            } else {
                map[byte] &= !mask;
                free += 1;
            }
        }
        let mut fix = false;
        if in_use_free > 0 {
            fix |= self.found(
                Class::InodeInUseButFree,
                format!(
                    "group {g}: {in_use_free} inodes in use are free in the map ({}...)",
                    named.join(", ")
                ),
            );
        }
        if leaked > 0 {
            fix |=
                self.found(Class::LeakedInode, format!("group {g}: {leaked} inodes marked in use are free"));
        }
        if fix || made {
            self.core.cache.modify(start + 2)?.copy_from_slice(&map);
        }
        Ok((free, dirs))
    }
}
