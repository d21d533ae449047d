//! The on-disk structures, byte for byte as docs/formats.md ("File
//! system") gives them: the superblock, group headers, inodes and
//! directory records, with their checksums.

mod group;
mod superblock;
mod xattr;

use codec::{Frame, LeReader, LeWriter, OutOfBounds};

pub use group::{GroupHeader, GROUP_MAGIC};
pub use superblock::{
    SlotSource, Superblock, BLOCKS_MAX, GENERATION_MAX, GROUP_HEAD_BLOCKS, HEADER_BYTES, INODES_MAX,
    LOG_START_BLOCK, SECTOR_BYTES_MAX, SECTOR_BYTES_MIN, SUPER_MAGIC,
};
pub use xattr::{XattrBlock, XATTR_ENTRIES_MAX, XATTR_HEADER_BYTES, XATTR_MAGIC, XATTR_VERSION};

pub const BLOCK_BYTES: usize = 4096;
/// The superblock's format version this iolab writes: 2 adds `damage`
/// (docs/formats.md, "Superblock"), special files (FIFOs, devices,
/// sockets) with their device numbers, which a reader of version 1 would
/// take for garbage inodes, and extended attribute blocks (an inode's
/// last four bytes), which it would count as no inode's. Version 1, whose byte 106 is reserved
/// and zero (no damage recorded), is read as well, and a mount or a
/// repairing fsck rewrites it as version 3. Version 3 adds the unwritten
/// mark ([`UNWRITTEN`]) on a regular file's data pointers, which a reader
/// of version 2 would take for pointers outside the device; a version 2
/// image holds none, and is read as it is.
pub const VERSION: u32 = 3;
/// The oldest superblock version this iolab reads.
pub const VERSION_OLDEST: u32 = 1;
/// The group header's format version: 2 records how many of the group's
/// inode slots were ever handed out (`GroupHeader::inodes_initialized`),
/// so a check reads no table block past them. Version 1 (those bytes
/// reserved and zero) is read as well, every slot counted as handed out,
/// and is rewritten as version 2 by the next write of its header.
pub const GROUP_VERSION: u32 = 2;
/// The oldest group header version this iolab reads.
pub const GROUP_VERSION_OLDEST: u32 = 1;
pub const INODE_BYTES: usize = 256;
/// Where an inode holds its single and double indirect pointers.
pub const INODE_SINGLE_AT: usize = 136;
pub const INODE_DOUBLE_AT: usize = 140;
pub const INODES_PER_BLOCK: u32 = (BLOCK_BYTES / INODE_BYTES) as u32;
/// Bits in a bitmap block: the most blocks (and inodes) a group holds.
pub const BITS_PER_BLOCK: u32 = (BLOCK_BYTES * 8) as u32;
pub const DIRECT_POINTERS: usize = 12;
pub const POINTERS_PER_BLOCK: u64 = (BLOCK_BYTES / 4) as u64;
/// File blocks an inode maps: twelve direct, a single and a double
/// indirect block.
pub const FILE_BLOCKS_MAX: u64 =
    DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK + POINTERS_PER_BLOCK * POINTERS_PER_BLOCK;
/// The largest file: every block it maps.
pub const FILE_BYTES_MAX: u64 = FILE_BLOCKS_MAX * BLOCK_BYTES as u64;
/// 512-byte units in a block (an inode's `blocks_512` counts these).
pub const BLOCK_UNITS: u64 = BLOCK_BYTES as u64 / 512;
/// The most 512-byte units an inode holds: every block it maps, its
/// single and double indirect blocks and the double's singles, and its
/// extended attribute block.
pub const FILE_UNITS_MAX: u64 = (FILE_BLOCKS_MAX + 2 + POINTERS_PER_BLOCK + 1) * BLOCK_UNITS;
/// A symlink target up to this long lives in the inode.
pub const INLINE_SYMLINK_BYTES: usize = 100;
pub const ROOT_INO: u32 = 1;
pub const LOST_FOUND_INO: u32 = 2;

pub const S_IFMT: u16 = 0o170000;
pub const S_IFREG: u16 = 0o100000;
pub const S_IFDIR: u16 = 0o040000;
pub const S_IFLNK: u16 = 0o120000;
pub const S_IFIFO: u16 = 0o010000;
pub const S_IFCHR: u16 = 0o020000;
pub const S_IFBLK: u16 = 0o060000;
pub const S_IFSOCK: u16 = 0o140000;

/// Whether `mode`'s kind is one iolab stores (every other is garbage).
pub fn known_kind(mode: u16) -> bool {
    matches!(mode & S_IFMT, S_IFREG | S_IFDIR | S_IFLNK | S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK)
}

/// Whether `mode`'s kind is a FIFO, a device or a socket: an inode with no
/// data and no block (its device number, if any, in `rdev`).
pub fn special_kind(mode: u16) -> bool {
    matches!(mode & S_IFMT, S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK)
}

/// Whether `mode`'s kind is a device node, whose inode keeps a number.
pub fn device_kind(mode: u16) -> bool {
    matches!(mode & S_IFMT, S_IFCHR | S_IFBLK)
}

/// An inode's checksum: crc32c of its inode number, then its 256 bytes
/// with the checksum field (at byte 84) zero.
const INODE_FRAME: Frame = Frame::zeroed(84);

/// The metadata policy a mount ran with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Every metadata write delayed (FFS `-o async`).
    Async,
    /// The ordering-critical metadata written synchronously (FFS's default).
    Sync,
    /// Soft updates: every metadata write delayed, in an order (with
    /// updates rolled back in the copy written) that leaves only leaks
    /// after a crash (`softdep/`).
    Softdep,
    /// Metadata committed through the log region in transactions (WAPBL):
    /// after a crash, mounting replays the log and nothing needs repair.
    Log,
}

impl Policy {
    /// Whether a mount under this policy raises the superblock's damage
    /// past what its crash leaves while a directory moves between
    /// directories (`softdep`: `Core::mark_moving`), so that a recorded
    /// `Damage::Unknown` may mean a move rather than forced damage.
    pub fn marks_moves(self) -> bool {
        matches!(self, Policy::Softdep)
    }

    fn code(self) -> u8 {
        match self {
            Policy::Async => 0,
            Policy::Sync => 1,
            Policy::Softdep => 2,
            Policy::Log => 3,
        }
    }

    fn from_code(code: u8) -> Option<Policy> {
        match code {
            0 => Some(Policy::Async),
            1 => Some(Policy::Sync),
            2 => Some(Policy::Softdep),
            3 => Some(Policy::Log),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Async => "async",
            Policy::Sync => "sync",
            Policy::Softdep => "softdep",
            Policy::Log => "log",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(text: &str) -> Result<Policy, String> {
        match text {
            "async" => Ok(Policy::Async),
            "sync" => Ok(Policy::Sync),
            "log" => Ok(Policy::Log),
            "softdep" => Ok(Policy::Softdep),
            other => Err(format!("--policy: '{other}' is not a policy; use sync, softdep, log or async")),
        }
    }
}

/// What an image may hold that a check must repair, as far as its
/// superblock tells (docs/formats.md, "Superblock": `damage`). Ordered:
/// a larger value covers a smaller one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Damage {
    /// Nothing: unmounted cleanly, or replayed by its log.
    #[default]
    None,
    /// Leaks only (blocks and inodes marked in use that nothing uses, link
    /// counts too high, counts off): what soft updates leave after a
    /// crash. Safe to mount over; `iolab fs fsck -B` reclaims them.
    Leaks,
    /// Anything a crash of its policy, or a mount forced over such an
    /// image, can leave: `iolab fs fsck -p` (or `-y`) must see it first.
    Unknown,
}

impl Damage {
    pub(crate) fn code(self) -> u8 {
        match self {
            Damage::None => 0,
            Damage::Leaks => 1,
            Damage::Unknown => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Damage> {
        match code {
            0 => Some(Damage::None),
            1 => Some(Damage::Leaks),
            2 => Some(Damage::Unknown),
            _ => None,
        }
    }

    /// What a crash under `policy` (the image's last mount not unmounted)
    /// can leave, once the log has been replayed: the policies' crash
    /// promises (docs/fs.md, "Policies").
    pub fn of_crash_under(policy: Policy) -> Damage {
        match policy {
            // The replay every mount and fsck make first is its check.
            Policy::Log => Damage::None,
            Policy::Softdep => Damage::Leaks,
            Policy::Sync | Policy::Async => Damage::Unknown,
        }
    }
}

/// Whether every byte is zero, eight at a time (a byte at a time does not
/// vectorise, for the early exit).
pub fn all_zero(bytes: &[u8]) -> bool {
    let words = bytes.chunks_exact(8);
    let rest = words.remainder();
    words.into_iter().all(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")) == 0)
        && rest.iter().all(|&b| b == 0)
}

/// An inode as stored (docs/formats.md, "Inode").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskInode {
    pub mode: u16,
    pub nlink: u16,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub blocks_512: u64,
    /// (seconds, nanoseconds): atime, mtime, ctime, creation.
    pub times: [(i64, u32); 4],
    pub generation: u32,
    pub direct: [u32; DIRECT_POINTERS],
    pub single: u32,
    pub double: u32,
    pub inline_target: Vec<u8>,
    /// The next inode of the orphan list (0: the last, or not on it).
    pub next_orphan: u32,
    /// A device node's number, as Linux gives it to user space
    /// (`fsapi::makedev`); 0 for every other kind (and in version 1,
    /// whose bytes here were zero).
    pub rdev: u32,
    /// The block holding its extended attributes (0: none; version 2,
    /// zero in version 1).
    pub xattr: u32,
}

/// What an inode slot holds.
#[derive(Debug, PartialEq, Eq)]
pub enum InodeSlot {
    Free,
    Used(DiskInode),
    /// Neither zero nor a valid inode: torn, or never initialised.
    Garbage,
}

impl DiskInode {
    pub fn kind_bits(&self) -> u16 {
        self.mode & S_IFMT
    }

    pub fn encode(&self, ino: u32, out: &mut [u8]) {
        debug_assert_eq!(out.len(), INODE_BYTES);
        out.fill(0);
        let mut w = LeWriter::new(out);
        w.put_u16(0, self.mode).put_u16(2, self.nlink).put_u32(4, self.uid).put_u32(8, self.gid);
        w.put_u64(16, self.size).put_u64(24, self.blocks_512);
        for (i, (secs, nanos)) in self.times.iter().enumerate() {
            w.put_u64(32 + 8 * i, *secs as u64).put_u32(64 + 4 * i, *nanos);
        }
        w.put_u32(80, self.generation);
        for (i, p) in self.direct.iter().enumerate() {
            w.put_u32(88 + 4 * i, *p);
        }
        w.put_u32(INODE_SINGLE_AT, self.single).put_u32(INODE_DOUBLE_AT, self.double);
        let n = self.inline_target.len().min(INLINE_SYMLINK_BYTES);
        w.put_bytes(144, &self.inline_target[..n]);
        w.put_u32(244, self.next_orphan).put_u32(248, self.rdev).put_u32(252, self.xattr);
        INODE_FRAME.seal(&ino.to_le_bytes(), out);
    }

    /// The blocks the pointers (direct, single, double, then the extended
    /// attribute block) of an encoded inode name, read in place (an
    /// unwritten mark aside).
    pub fn pointers_in(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
        let r = LeReader::new(b);
        let at = move |at: usize| block_of(r.u32(at).unwrap_or(0));
        (0..DIRECT_POINTERS).map(move |i| at(88 + 4 * i)).chain([at(136), at(140), at(252)])
    }

    pub fn decode(ino: u32, b: &[u8]) -> InodeSlot {
        DiskInode::decode_as(ino, b, true)
    }

    /// As `decode`, for a check: a directory whose length is not whole
    /// blocks (its checksum good) is a directory still, whose length fsck
    /// sets to the blocks it maps (pass 2), not garbage to be cleared with
    /// every name it holds. Everything else is held to `decode`'s bounds.
    pub fn decode_for_check(ino: u32, b: &[u8]) -> InodeSlot {
        match DiskInode::decode(ino, b) {
            InodeSlot::Garbage => {}
            slot => return slot,
        }
        if INODE_FRAME.verify(&ino.to_le_bytes(), b).is_err() {
            return InodeSlot::Garbage;
        }
        match DiskInode::fields(b) {
            Ok(inode)
                if inode.kind_bits() == S_IFDIR
                    && inode.size <= FILE_BYTES_MAX
                    && DiskInode { size: 0, ..inode.clone() }.within_bounds() =>
            {
                InodeSlot::Used(inode)
            }
            _ => InodeSlot::Garbage,
        }
    }

    /// As `decode`, trusting the checksum: for copies iolab made itself
    /// (the soft-updates state compares them many times over).
    pub fn decode_trusted(ino: u32, b: &[u8]) -> InodeSlot {
        DiskInode::decode_as(ino, b, false)
    }

    fn decode_as(ino: u32, b: &[u8], verify: bool) -> InodeSlot {
        if b.len() != INODE_BYTES {
            return InodeSlot::Garbage;
        }
        if all_zero(b) {
            return InodeSlot::Free;
        }
        if verify && INODE_FRAME.verify(&ino.to_le_bytes(), b).is_err() {
            return InodeSlot::Garbage;
        }
        let Ok(mut inode) = DiskInode::fields(b) else { return InodeSlot::Garbage };
        if !inode.within_bounds() {
            return InodeSlot::Garbage;
        }
        if inode.kind_bits() == S_IFLNK && inode.size as usize <= INLINE_SYMLINK_BYTES {
            inode.inline_target = b[144..144 + inode.size as usize].to_vec();
        }
        InodeSlot::Used(inode)
    }

    /// The fields of an encoded inode (its symlink target aside).
    fn fields(b: &[u8]) -> Result<DiskInode, OutOfBounds> {
        let r = LeReader::new(b);
        let mut inode = DiskInode {
            mode: r.u16(0)?,
            nlink: r.u16(2)?,
            uid: r.u32(4)?,
            gid: r.u32(8)?,
            size: r.u64(16)?,
            blocks_512: r.u64(24)?,
            generation: r.u32(80)?,
            single: r.u32(INODE_SINGLE_AT)?,
            double: r.u32(INODE_DOUBLE_AT)?,
            next_orphan: r.u32(244)?,
            rdev: r.u32(248)?,
            xattr: r.u32(252)?,
            ..DiskInode::default()
        };
        for i in 0..4 {
            inode.times[i] = (r.u64(32 + 8 * i)? as i64, r.u32(64 + 4 * i)?);
        }
        for i in 0..DIRECT_POINTERS {
            inode.direct[i] = r.u32(88 + 4 * i)?;
        }
        Ok(inode)
    }

    /// The bounds an inode's fields keep (docs/formats.md, "Inode"), so
    /// that nothing walks, indexes or adds by a value no inode can have:
    /// a kind iolab makes; a size a file reaches ([`FILE_BYTES_MAX`]), a
    /// directory's whole blocks, a symlink's target shorter than a block;
    /// no more 512-byte units than its blocks and indirect blocks. A
    /// special file (no data, no block) is held to a file's bounds here:
    /// a size or pointers it should not have are fsck's
    /// `special_file_with_data`, cleared by a repair, never garbage.
    fn within_bounds(&self) -> bool {
        let size = match self.kind_bits() {
            S_IFREG | S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK => self.size <= FILE_BYTES_MAX,
            S_IFDIR => self.size <= FILE_BYTES_MAX && self.size % BLOCK_BYTES as u64 == 0,
            S_IFLNK => self.size < BLOCK_BYTES as u64,
            _ => false,
        };
        size && self.blocks_512 <= FILE_UNITS_MAX
    }

    /// The 512-byte units of its extended attribute block (0 without one).
    pub fn xattr_units(&self) -> u64 {
        if self.xattr == 0 {
            0
        } else {
            BLOCK_UNITS
        }
    }

    /// Whether it holds a block pointer or claims a block or a byte (its
    /// extended attribute block aside): what a special file never does.
    pub fn holds_data(&self) -> bool {
        self.size != 0
            || self.blocks_512 != self.xattr_units()
            || self.single != 0
            || self.double != 0
            || self.direct.iter().any(|&p| p != 0)
    }
}

/// A directory record never crosses a chunk of this many bytes (FFS's
/// DIRBLKSIZ): a torn 4 KiB write leaves each 512-byte sector's records
/// whole.
pub const DIR_CHUNK_BYTES: usize = 512;

/// Directory record types (docs/formats.md, "Directory"; ext2's codes).
pub const DT_FILE: u8 = 1;
pub const DT_DIR: u8 = 2;
pub const DT_CHAR: u8 = 3;
pub const DT_BLOCK: u8 = 4;
pub const DT_FIFO: u8 = 5;
pub const DT_SOCKET: u8 = 6;
pub const DT_SYMLINK: u8 = 7;

/// The record type that names an inode of `mode`'s kind; None for a kind
/// iolab does not store.
pub fn dt_of_mode(mode: u16) -> Option<u8> {
    Some(match mode & S_IFMT {
        S_IFREG => DT_FILE,
        S_IFDIR => DT_DIR,
        S_IFLNK => DT_SYMLINK,
        S_IFIFO => DT_FIFO,
        S_IFCHR => DT_CHAR,
        S_IFBLK => DT_BLOCK,
        S_IFSOCK => DT_SOCKET,
        _ => return None,
    })
}

/// One record of a directory block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirRecord {
    pub ino: u32,
    pub reclen: u16,
    pub kind: u8,
    pub name: Vec<u8>,
}

/// The least record length that holds a name of `len` bytes.
pub fn record_bytes(name_len: usize) -> usize {
    (8 + name_len).div_ceil(4) * 4
}

/// A record of a directory block, borrowed from the block (no copy of
/// its name): for walks that look at many records and keep few.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub ino: u32,
    pub reclen: u16,
    pub kind: u8,
    pub name: &'a [u8],
}

impl RecordRef<'_> {
    pub fn to_owned(self) -> DirRecord {
        DirRecord { ino: self.ino, reclen: self.reclen, kind: self.kind, name: self.name.to_vec() }
    }
}

impl DirRecord {
    /// Reads the record at `at` of a directory block; None when the
    /// record is malformed (runs past the block, a length too short for
    /// its name, not a multiple of 4).
    pub fn read(block: &[u8], at: usize) -> Option<DirRecord> {
        DirRecord::peek(block, at).map(RecordRef::to_owned)
    }

    /// [`DirRecord::read`], borrowing the name.
    pub fn peek(block: &[u8], at: usize) -> Option<RecordRef<'_>> {
        let r = LeReader::new(block);
        let (ino, reclen) = (r.u32(at).ok()?, r.u16(at + 4).ok()?);
        let name_len = r.u8(at + 6).ok()? as usize;
        let fits = reclen as usize % 4 == 0
            && reclen >= 8
            && at + reclen as usize <= block.len()
            && at % DIR_CHUNK_BYTES + reclen as usize <= DIR_CHUNK_BYTES;
        if !fits || (ino != 0 && (name_len == 0 || record_bytes(name_len) > reclen as usize)) {
            return None;
        }
        let name = if ino == 0 { &[][..] } else { &block[at + 8..at + 8 + name_len] };
        Some(RecordRef { ino, reclen, kind: block[at + 7], name })
    }

    /// Writes the record at `at` (zero padding to its length).
    pub fn write(&self, block: &mut [u8], at: usize) {
        let end = at + self.reclen as usize;
        block[at..end].fill(0);
        let mut w = LeWriter::new(block);
        w.put_u32(at, self.ino).put_u16(at + 4, self.reclen);
        w.put_u8(at + 6, self.name.len() as u8).put_u8(at + 7, self.kind).put_bytes(at + 8, &self.name);
    }
}

/// The top bit of a regular file's data pointer (a direct one, or one in
/// a single indirect block): the block is allocated and reads as zeros,
/// whatever it holds, until a write clears the mark (fallocate's blocks;
/// ext4's unwritten extents). Never on an indirect block's own pointer,
/// nor in a directory, a symlink or an attribute block's.
pub const UNWRITTEN: u32 = 1 << 31;

/// The block a pointer names, its unwritten mark aside.
pub fn block_of(pointer: u32) -> u32 {
    pointer & !UNWRITTEN
}

/// Whether a (nonzero) pointer carries the unwritten mark.
pub fn is_unwritten(pointer: u32) -> bool {
    pointer & UNWRITTEN != 0
}

/// Block numbers in an indirect block.
pub fn pointer_at(block: &[u8], index: usize) -> u32 {
    debug_assert!(index < POINTERS_PER_BLOCK as usize, "pointer {index} of an indirect block");
    LeReader::new(block).u32(index * 4).unwrap_or(0)
}

pub fn set_pointer(block: &mut [u8], index: usize, value: u32) {
    LeWriter::new(block).put_u32(index * 4, value);
}
