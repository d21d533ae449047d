//! The on-disk structures, byte for byte as docs/formats.md ("File
//! system") gives them: the superblock, group headers, inodes and
//! directory records, with their checksums.

use crate::FsError;

pub const BLOCK_BYTES: usize = 4096;
pub const SUPER_MAGIC: &[u8; 8] = b"IOLABFS1";
pub const GROUP_MAGIC: &[u8; 8] = b"IOLABGRP";
pub const VERSION: u32 = 1;
pub const INODE_BYTES: usize = 256;
pub const INODES_PER_BLOCK: u32 = (BLOCK_BYTES / INODE_BYTES) as u32;
/// Bits in a bitmap block: the most blocks (and inodes) a group holds.
pub const BITS_PER_BLOCK: u32 = (BLOCK_BYTES * 8) as u32;
pub const DIRECT_POINTERS: usize = 12;
pub const POINTERS_PER_BLOCK: u64 = (BLOCK_BYTES / 4) as u64;
/// A symlink target up to this long lives in the inode.
pub const INLINE_SYMLINK_BYTES: usize = 100;
pub const ROOT_INO: u32 = 1;
pub const LOST_FOUND_INO: u32 = 2;
/// The structures the checksums cover: the first 512 bytes of a block.
const HEADER_BYTES: usize = 512;

pub const S_IFMT: u16 = 0o170000;
pub const S_IFREG: u16 = 0o100000;
pub const S_IFDIR: u16 = 0o040000;
pub const S_IFLNK: u16 = 0o120000;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// crc32c of `bytes` with the four bytes at `at` taken as zero.
fn checksum(seed: &[u8], bytes: &[u8], at: usize) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(seed), &bytes[..at]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &bytes[at + 4..])
}

/// The metadata policy a mount ran with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Every metadata write delayed (FFS `-o async`).
    Async,
    /// The ordering-critical metadata written synchronously (FFS's default).
    Sync,
    /// Soft updates: every metadata write delayed, in an order (with
    /// updates rolled back in the copy written) that leaves only leaks
    /// after a crash (`softdep.rs`).
    Softdep,
    /// Metadata committed through the log region in transactions (WAPBL):
    /// after a crash, mounting replays the log and nothing needs repair.
    Log,
}

impl Policy {
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

/// The superblock (docs/formats.md, "Superblock").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub generation: u64,
    pub sector_bytes: u32,
    pub blocks: u64,
    pub log_start_block: u64,
    pub log_blocks: u64,
    pub groups: u32,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
    pub first_group_block: u64,
    pub free_blocks: u64,
    pub free_inodes: u64,
    pub dirs: u64,
    pub policy: Policy,
    pub clean: bool,
    pub mounts: u32,
    pub fs_id: u64,
    pub created_ns: u64,
    pub mounted_ns: u64,
    /// The first inode of the orphan list (unlinked while open; 0: none).
    pub orphans: u32,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(SUPER_MAGIC);
        put32(&mut b, 8, VERSION);
        put64(&mut b, 16, self.generation);
        put32(&mut b, 24, BLOCK_BYTES as u32);
        put32(&mut b, 28, self.sector_bytes);
        put64(&mut b, 32, self.blocks);
        put64(&mut b, 40, self.log_start_block);
        put64(&mut b, 48, self.log_blocks);
        put32(&mut b, 56, self.groups);
        put32(&mut b, 60, self.blocks_per_group);
        put32(&mut b, 64, self.inodes_per_group);
        put32(&mut b, 68, INODE_BYTES as u32);
        put64(&mut b, 72, self.first_group_block);
        put64(&mut b, 80, self.free_blocks);
        put64(&mut b, 88, self.free_inodes);
        put64(&mut b, 96, self.dirs);
        b[104] = self.policy.code();
        b[105] = u8::from(self.clean);
        put32(&mut b, 108, self.mounts);
        put64(&mut b, 112, self.fs_id);
        put64(&mut b, 120, self.created_ns);
        put64(&mut b, 128, self.mounted_ns);
        put32(&mut b, 136, ROOT_INO);
        put32(&mut b, 140, LOST_FOUND_INO);
        put32(&mut b, 144, self.orphans);
        let crc = checksum(&[], &b, 12);
        put32(&mut b, 12, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Superblock, FsError> {
        if &b[0..8] != SUPER_MAGIC {
            return Err(FsError::NotAFileSystem);
        }
        if u32_at(b, 8) != VERSION {
            return Err(FsError::Version { found: u32_at(b, 8), supported: VERSION });
        }
        if checksum(&[], &b[..HEADER_BYTES], 12) != u32_at(b, 12) {
            return Err(FsError::Damaged("the superblock's checksum does not match".into()));
        }
        let sb = Superblock {
            generation: u64_at(b, 16),
            sector_bytes: u32_at(b, 28),
            blocks: u64_at(b, 32),
            log_start_block: u64_at(b, 40),
            log_blocks: u64_at(b, 48),
            groups: u32_at(b, 56),
            blocks_per_group: u32_at(b, 60),
            inodes_per_group: u32_at(b, 64),
            first_group_block: u64_at(b, 72),
            free_blocks: u64_at(b, 80),
            free_inodes: u64_at(b, 88),
            dirs: u64_at(b, 96),
            policy: Policy::from_code(b[104])
                .ok_or_else(|| FsError::Damaged("unknown policy code".into()))?,
            clean: b[105] == 1,
            mounts: u32_at(b, 108),
            fs_id: u64_at(b, 112),
            created_ns: u64_at(b, 120),
            mounted_ns: u64_at(b, 128),
            orphans: u32_at(b, 144),
        };
        sb.check()?;
        Ok(sb)
    }

    /// The geometry must hold together before anything is read by it.
    fn check(&self) -> Result<(), FsError> {
        let bad = |what: &str| Err(FsError::Damaged(format!("the superblock's {what} is impossible")));
        if u32_at(&self.encode(), 24) != BLOCK_BYTES as u32 {
            return bad("block size");
        }
        if self.blocks_per_group == 0 || self.blocks_per_group > BITS_PER_BLOCK {
            return bad("blocks per group");
        }
        if self.inodes_per_group == 0
            || self.inodes_per_group > BITS_PER_BLOCK
            || self.inodes_per_group % INODES_PER_BLOCK != 0
        {
            return bad("inodes per group");
        }
        let span = u64::from(self.groups) * u64::from(self.blocks_per_group);
        if self.groups == 0
            || self.first_group_block + span < self.blocks
            || self.first_group_block >= self.blocks
        {
            return bad("group count");
        }
        if self.log_start_block + self.log_blocks > self.first_group_block {
            return bad("log region");
        }
        Ok(())
    }

    /// Inode table blocks of a group.
    pub fn inode_table_blocks(&self) -> u32 {
        self.inodes_per_group / INODES_PER_BLOCK
    }

    /// Blocks at the start of every group that are never data.
    pub fn group_overhead_blocks(&self) -> u32 {
        3 + self.inode_table_blocks()
    }

    pub fn group_start(&self, group: u32) -> u64 {
        self.first_group_block + u64::from(group) * u64::from(self.blocks_per_group)
    }

    /// Blocks in group `group` (the last one may be shorter).
    pub fn group_blocks(&self, group: u32) -> u32 {
        (self.blocks - self.group_start(group)).min(u64::from(self.blocks_per_group)) as u32
    }

    pub fn total_inodes(&self) -> u64 {
        u64::from(self.groups) * u64::from(self.inodes_per_group)
    }

    /// The block holding inode `ino` and the byte where it starts.
    pub fn inode_place(&self, ino: u32) -> (u64, usize) {
        let index = ino - 1;
        let (group, within) = (index / self.inodes_per_group, index % self.inodes_per_group);
        let block = self.group_start(group) + 3 + u64::from(within / INODES_PER_BLOCK);
        (block, (within % INODES_PER_BLOCK) as usize * INODE_BYTES)
    }
}

/// A group header (docs/formats.md, "Group").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupHeader {
    pub group: u32,
    pub blocks: u32,
    pub free_blocks: u32,
    pub free_inodes: u32,
    pub dirs: u32,
    pub fs_id: u64,
}

impl GroupHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(GROUP_MAGIC);
        put32(&mut b, 8, VERSION);
        put32(&mut b, 16, self.group);
        put32(&mut b, 20, self.blocks);
        put32(&mut b, 24, self.free_blocks);
        put32(&mut b, 28, self.free_inodes);
        put32(&mut b, 32, self.dirs);
        put64(&mut b, 36, self.fs_id);
        let crc = checksum(&[], &b, 12);
        put32(&mut b, 12, crc);
        b
    }

    pub fn decode(b: &[u8], group: u32, fs_id: u64) -> Result<GroupHeader, FsError> {
        let damaged = |what: &str| Err(FsError::Damaged(format!("group {group}'s header {what}")));
        if &b[0..8] != GROUP_MAGIC || u32_at(b, 8) != VERSION {
            return damaged("is missing");
        }
        if checksum(&[], &b[..HEADER_BYTES], 12) != u32_at(b, 12) {
            return damaged("has a checksum that does not match");
        }
        let h = GroupHeader {
            group: u32_at(b, 16),
            blocks: u32_at(b, 20),
            free_blocks: u32_at(b, 24),
            free_inodes: u32_at(b, 28),
            dirs: u32_at(b, 32),
            fs_id: u64_at(b, 36),
        };
        if h.group != group || h.fs_id != fs_id {
            return damaged("belongs elsewhere");
        }
        Ok(h)
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
        put16(out, 0, self.mode);
        put16(out, 2, self.nlink);
        put32(out, 4, self.uid);
        put32(out, 8, self.gid);
        put64(out, 16, self.size);
        put64(out, 24, self.blocks_512);
        for (i, (secs, nanos)) in self.times.iter().enumerate() {
            put64(out, 32 + 8 * i, *secs as u64);
            put32(out, 64 + 4 * i, *nanos);
        }
        put32(out, 80, self.generation);
        for (i, p) in self.direct.iter().enumerate() {
            put32(out, 88 + 4 * i, *p);
        }
        put32(out, 136, self.single);
        put32(out, 140, self.double);
        let n = self.inline_target.len().min(INLINE_SYMLINK_BYTES);
        out[144..144 + n].copy_from_slice(&self.inline_target[..n]);
        put32(out, 244, self.next_orphan);
        let crc = checksum(&ino.to_le_bytes(), out, 84);
        put32(out, 84, crc);
    }

    /// The block pointers (direct, single, double) of an encoded inode,
    /// read in place.
    pub fn pointers_in(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
        (0..DIRECT_POINTERS).map(move |i| u32_at(b, 88 + 4 * i)).chain([u32_at(b, 136), u32_at(b, 140)])
    }

    pub fn decode(ino: u32, b: &[u8]) -> InodeSlot {
        DiskInode::decode_as(ino, b, true)
    }

    /// As `decode`, trusting the checksum: for copies iolab made itself
    /// (the soft-updates state compares them many times over).
    pub fn decode_trusted(ino: u32, b: &[u8]) -> InodeSlot {
        DiskInode::decode_as(ino, b, false)
    }

    fn decode_as(ino: u32, b: &[u8], verify: bool) -> InodeSlot {
        if all_zero(b) {
            return InodeSlot::Free;
        }
        if verify && checksum(&ino.to_le_bytes(), b, 84) != u32_at(b, 84) {
            return InodeSlot::Garbage;
        }
        let mut inode = DiskInode {
            mode: u16_at(b, 0),
            nlink: u16_at(b, 2),
            uid: u32_at(b, 4),
            gid: u32_at(b, 8),
            size: u64_at(b, 16),
            blocks_512: u64_at(b, 24),
            generation: u32_at(b, 80),
            single: u32_at(b, 136),
            double: u32_at(b, 140),
            next_orphan: u32_at(b, 244),
            ..DiskInode::default()
        };
        for i in 0..4 {
            inode.times[i] = (u64_at(b, 32 + 8 * i) as i64, u32_at(b, 64 + 4 * i));
        }
        for i in 0..DIRECT_POINTERS {
            inode.direct[i] = u32_at(b, 88 + 4 * i);
        }
        if inode.kind_bits() == S_IFLNK && inode.size as usize <= INLINE_SYMLINK_BYTES {
            inode.inline_target = b[144..144 + inode.size as usize].to_vec();
        }
        if !matches!(inode.kind_bits(), S_IFREG | S_IFDIR | S_IFLNK) {
            return InodeSlot::Garbage;
        }
        InodeSlot::Used(inode)
    }
}

/// A directory record never crosses a chunk of this many bytes (FFS's
/// DIRBLKSIZ): a torn 4 KiB write leaves each 512-byte sector's records
/// whole.
pub const DIR_CHUNK_BYTES: usize = 512;

/// Directory record types (docs/formats.md, "Directory").
pub const DT_FILE: u8 = 1;
pub const DT_DIR: u8 = 2;
pub const DT_SYMLINK: u8 = 7;

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
        if at + 8 > block.len() {
            return None;
        }
        let reclen = u16_at(block, at + 4);
        let name_len = block[at + 6] as usize;
        let ino = u32_at(block, at);
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
        put32(block, at, self.ino);
        put16(block, at + 4, self.reclen);
        block[at + 6] = self.name.len() as u8;
        block[at + 7] = self.kind;
        block[at + 8..at + 8 + self.name.len()].copy_from_slice(&self.name);
    }
}

/// Block numbers in an indirect block.
pub fn pointer_at(block: &[u8], index: usize) -> u32 {
    u32_at(block, index * 4)
}

pub fn set_pointer(block: &mut [u8], index: usize, value: u32) {
    put32(block, index * 4, value);
}
