//! The superblock (docs/formats.md, "Superblock"): its layout, the bounds
//! of every field, and the decoder that checks each field against its
//! bound before any arithmetic on it, in the order the table gives. A
//! damaged or crafted slot gives a [`FieldFault`] naming the device, the
//! slot, the byte and the field: never a panic, a hang, a giant
//! allocation or a geometry that reaches past the device.
//!
//! Which slot a reader takes, and what it says of the other, is in
//! `mount.rs` (`read_superblock_slots`).

use codec::{Frame, LeWriter};

use super::{
    Damage, Policy, BITS_PER_BLOCK, BLOCK_BYTES, INODES_PER_BLOCK, INODE_BYTES, LOST_FOUND_INO, ROOT_INO,
};
use crate::fault::{FieldFault, Fields, Place};

pub const SUPER_MAGIC: &[u8; 8] = b"IOLABFS1";
/// The structures the checksums cover: the first 512 bytes of a block.
pub const HEADER_BYTES: usize = 512;
/// The highest generation a slot may carry: a superblock write every
/// microsecond would take two thousand years to reach it, so a larger one
/// is damage, and the generations after it cannot overflow.
pub const GENERATION_MAX: u64 = 1 << 56;
/// The most blocks a file system has: block numbers are `u32`, and a
/// data pointer's top bit marks its block unwritten (version 3,
/// [`super::UNWRITTEN`]), so numbers stop below 2^31 (8 TiB).
pub const BLOCKS_MAX: u64 = 1 << 31;
/// The most inodes a file system has: inode numbers are `u32`, from 1.
pub const INODES_MAX: u64 = u32::MAX as u64;
/// Sector sizes a superblock may record: a power of two in this range (a
/// block holds whole sectors).
pub const SECTOR_BYTES_MIN: u32 = 512;
pub const SECTOR_BYTES_MAX: u32 = BLOCK_BYTES as u32;
/// Where the log region starts: right after the two superblock slots.
pub const LOG_START_BLOCK: u64 = 2;
/// Blocks of a group before its inode table: header and two bitmaps.
pub const GROUP_HEAD_BLOCKS: u32 = 3;
/// The superblock's checksum: at byte 12, over its 512 bytes with the
/// field zero.
const FRAME: Frame = Frame::zeroed(12);

// Byte offsets of the fields (docs/formats.md, "Superblock").
const VERSION_AT: usize = 8;
const GENERATION_AT: usize = 16;
const BLOCK_BYTES_AT: usize = 24;
const SECTOR_BYTES_AT: usize = 28;
const BLOCKS_AT: usize = 32;
const LOG_START_AT: usize = 40;
const LOG_BLOCKS_AT: usize = 48;
const GROUPS_AT: usize = 56;
const BLOCKS_PER_GROUP_AT: usize = 60;
const INODES_PER_GROUP_AT: usize = 64;
const INODE_BYTES_AT: usize = 68;
const FIRST_GROUP_AT: usize = 72;
const FREE_BLOCKS_AT: usize = 80;
const FREE_INODES_AT: usize = 88;
const DIRS_AT: usize = 96;
const POLICY_AT: usize = 104;
const CLEAN_AT: usize = 105;
/// Version 2: what a mount forced over damage left unrepaired (version 1:
/// reserved, zero).
const DAMAGE_AT: usize = 106;
const MOUNTS_AT: usize = 108;
const FS_ID_AT: usize = 112;
const CREATED_AT: usize = 120;
const MOUNTED_AT: usize = 128;
const ROOT_AT: usize = 136;
const LOST_FOUND_AT: usize = 140;
const ORPHANS_AT: usize = 144;
/// Reserved, zero: bytes 107 and 148..512 (and 106 in version 1).
const RESERVED: [(usize, usize); 2] = [(107, 1), (148, HEADER_BYTES - 148)];

/// The superblock (docs/formats.md, "Superblock").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// The format version it was read with (1 to 3), written back as it
    /// is; a mount raises it to [`super::VERSION`].
    pub version: u32,
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
    /// Unmounted after writing everything back (false while mounted).
    pub clean: bool,
    /// Damage a mount forced over an unclean image (or a check that could
    /// not repair everything) left for fsck, whatever `clean` says since:
    /// only a repairing fsck that leaves nothing clears it.
    pub damage: Damage,
    pub mounts: u32,
    pub fs_id: u64,
    pub created_ns: u64,
    pub mounted_ns: u64,
    /// The first inode of the orphan list (unlinked while open; 0: none).
    pub orphans: u32,
}

/// Where a superblock slot was read: what its bounds and faults need.
#[derive(Clone, Copy, Debug)]
pub struct SlotSource<'a> {
    /// The device's name, for faults.
    pub device: &'a str,
    /// The device's size: the file system fits in it.
    pub device_bytes: u64,
    /// 0 or 1: the slot's block, and the parity of its generation.
    pub slot: u8,
}

/// The checks of one slot, in the order the decoder makes them.
struct Slot<'a> {
    f: Fields<'a>,
    slot: u8,
}

impl Slot<'_> {
    /// The fields every version fixes, and the reserved bytes.
    fn fixed(&self) -> Result<(), FieldFault> {
        let fixed: [(usize, usize, &'static str, u64); 5] = [
            (BLOCK_BYTES_AT, 4, "block_bytes", BLOCK_BYTES as u64),
            (INODE_BYTES_AT, 4, "inode_bytes", INODE_BYTES as u64),
            (LOG_START_AT, 8, "log_start_block", LOG_START_BLOCK),
            (ROOT_AT, 4, "root_inode", u64::from(ROOT_INO)),
            (LOST_FOUND_AT, 4, "lost_found_inode", u64::from(LOST_FOUND_INO)),
        ];
        for (at, width, field, expected) in fixed {
            self.f.within(
                (at, width, field),
                |v| v == expected,
                || format!("every version has exactly {expected}"),
            )?;
        }
        for (at, len) in RESERVED {
            self.f.zero(at, len, "reserved")?;
        }
        Ok(())
    }

    /// The generation: at most [`GENERATION_MAX`], and in the slot its
    /// parity names (generation g is written to slot g mod 2).
    fn generation(&self) -> Result<u64, FieldFault> {
        let slot = u64::from(self.slot);
        self.f.within(
            (GENERATION_AT, 8, "generation"),
            |g| g <= GENERATION_MAX && g % 2 == slot,
            || format!("at most 2^56, and g mod 2 is the slot it lies in ({slot})"),
        )
    }

    /// The policy code, the clean flag and (version 2) the damage left.
    fn state(&self, version: u32) -> Result<(Policy, bool, Damage), FieldFault> {
        let code = self.f.within(
            (POLICY_AT, 1, "policy"),
            |c| c <= 3,
            || "0 async, 1 sync, 2 softdep or 3 log".into(),
        )?;
        let clean = self.f.within((CLEAN_AT, 1, "clean"), |c| c <= 1, || "0 or 1".into())?;
        let policy = Policy::from_code(code as u8).ok_or_else(|| {
            self.f.out_of_bounds(POLICY_AT, "policy", code, "0 async, 1 sync, 2 softdep or 3 log".into())
        })?;
        if version < 2 {
            // Reserved in version 1 and checked zero with the others.
            self.f.zero(DAMAGE_AT, 1, "reserved")?;
            return Ok((policy, clean == 1, Damage::None));
        }
        let bound = || "0 none, 1 leaks, 2 unknown".to_string();
        let code = self.f.within((DAMAGE_AT, 1, "damage"), |c| c <= 2, bound)?;
        let damage = Damage::from_code(code as u8)
            .ok_or_else(|| self.f.out_of_bounds(DAMAGE_AT, "damage", code, bound()))?;
        Ok((policy, clean == 1, damage))
    }
}

/// The geometry fields, checked against each other and the device.
struct Geometry {
    sector_bytes: u32,
    blocks: u64,
    log_blocks: u64,
    first_group_block: u64,
    groups: u32,
    blocks_per_group: u32,
    inodes_per_group: u32,
}

impl Slot<'_> {
    /// Sector size, size, log region and groups: each field's own bound,
    /// then its relations to the fields checked before it, so that every
    /// product and sum below stays far inside `u64`.
    fn geometry(&self, device_bytes: u64) -> Result<Geometry, FieldFault> {
        let sector_bytes = self.f.within(
            (SECTOR_BYTES_AT, 4, "sector_bytes"),
            |s| {
                s.is_power_of_two()
                    && (u64::from(SECTOR_BYTES_MIN)..=u64::from(SECTOR_BYTES_MAX)).contains(&s)
            },
            || format!("a power of two from {SECTOR_BYTES_MIN} to {SECTOR_BYTES_MAX}"),
        )? as u32;
        let device_blocks = device_bytes / BLOCK_BYTES as u64;
        let blocks = self.f.within(
            (BLOCKS_AT, 8, "blocks"),
            |b| b <= device_blocks && b <= BLOCKS_MAX,
            || {
                format!(
                    "at most the device's {device_blocks} blocks ({device_bytes} bytes; a device smaller than at \
                     mkfs was cut short) and 2^31 (block numbers are u32, their top bit the unwritten mark)"
                )
            },
        )?;
        let log_blocks = self.f.within(
            (LOG_BLOCKS_AT, 8, "log_blocks"),
            |l| l >= 1 && l < blocks.saturating_sub(LOG_START_BLOCK),
            || format!("at least 1, and the log region (from block 2) ends before block {blocks}, the file system's end"),
        )?;
        let first_group_block = LOG_START_BLOCK + log_blocks;
        self.f.within(
            (FIRST_GROUP_AT, 8, "first_group_block"),
            |f| f == first_group_block,
            || format!("exactly 2 + log_blocks = {first_group_block}: the groups start where the log region ends"),
        )?;
        let (blocks_per_group, inodes_per_group) = self.group_shape()?;
        let groups = self.groups(blocks, first_group_block, blocks_per_group, inodes_per_group)?;
        Ok(Geometry {
            sector_bytes,
            blocks,
            log_blocks,
            first_group_block,
            groups,
            blocks_per_group,
            inodes_per_group,
        })
    }

    /// Blocks and inodes per group: a group's bitmaps cover it, and its
    /// header, bitmaps and inode table leave room for data.
    fn group_shape(&self) -> Result<(u32, u32), FieldFault> {
        let per_block = u64::from(INODES_PER_BLOCK);
        let most = u64::from(BITS_PER_BLOCK);
        let blocks_per_group = self.f.within(
            (BLOCKS_PER_GROUP_AT, 4, "blocks_per_group"),
            |b| (1..=most).contains(&b),
            || format!("1 to {most} (one bitmap block)"),
        )?;
        let inodes_per_group = self.f.within(
            (INODES_PER_GROUP_AT, 4, "inodes_per_group"),
            |i| (per_block..=most).contains(&i) && i % per_block == 0,
            || format!("a multiple of {per_block} from {per_block} to {most} (one bitmap block)"),
        )?;
        let overhead = u64::from(GROUP_HEAD_BLOCKS) + inodes_per_group / per_block;
        if overhead >= blocks_per_group {
            let bound = format!(
                "its inode table of {} blocks, with the group's header and bitmaps, leaves no data block in a group \
                 of {blocks_per_group} blocks",
                inodes_per_group / per_block
            );
            return Err(self.f.out_of_bounds(
                INODES_PER_GROUP_AT,
                "inodes_per_group",
                inodes_per_group,
                bound,
            ));
        }
        Ok((blocks_per_group as u32, inodes_per_group as u32))
    }

    /// The group count: exactly the groups that cover the blocks after
    /// the log region, the last one holding its overhead and a data
    /// block, and no more inodes than `u32` numbers.
    fn groups(
        &self,
        blocks: u64,
        first: u64,
        per_group: u32,
        inodes_per_group: u32,
    ) -> Result<u32, FieldFault> {
        // Checked by the caller: first < blocks, 0 < per_group.
        let span = blocks - first;
        let expected = span.div_ceil(u64::from(per_group));
        let groups = self.f.within(
            (GROUPS_AT, 4, "groups"),
            |g| g == expected,
            || {
                format!(
                    "exactly {expected}: the {span} blocks after the log region in groups of {per_group}, the last \
                     one possibly shorter"
                )
            },
        )?;
        let overhead = u64::from(GROUP_HEAD_BLOCKS + inodes_per_group / INODES_PER_BLOCK);
        let last = span - (groups - 1) * u64::from(per_group);
        if last <= overhead {
            let bound = format!(
                "its last group would hold {last} blocks, no more than the {overhead} of its header, bitmaps and \
                 inode table"
            );
            return Err(self.f.out_of_bounds(BLOCKS_AT, "blocks", blocks, bound));
        }
        if groups * u64::from(inodes_per_group) > INODES_MAX {
            let bound = format!("{groups} groups of it make more than 2^32-1 inodes (inode numbers are u32)");
            return Err(self.f.out_of_bounds(
                INODES_PER_GROUP_AT,
                "inodes_per_group",
                u64::from(inodes_per_group),
                bound,
            ));
        }
        Ok(groups as u32)
    }

    /// The summary counts and the orphan list's head: none past what the
    /// geometry holds.
    fn counts(&self, g: &Geometry) -> Result<(u64, u64, u64, u32), FieldFault> {
        let overhead = u64::from(GROUP_HEAD_BLOCKS + g.inodes_per_group / INODES_PER_BLOCK);
        let data_blocks = g.blocks - g.first_group_block - u64::from(g.groups) * overhead;
        let inodes = u64::from(g.groups) * u64::from(g.inodes_per_group);
        let free_blocks = self.f.within(
            (FREE_BLOCKS_AT, 8, "free_blocks"),
            |f| f <= data_blocks,
            || format!("at most the {data_blocks} data blocks the groups hold"),
        )?;
        let free_inodes = self.f.within(
            (FREE_INODES_AT, 8, "free_inodes"),
            |f| f <= inodes,
            || format!("at most the {inodes} inodes the groups hold"),
        )?;
        let dirs = self.f.within(
            (DIRS_AT, 8, "dirs"),
            |d| d <= inodes,
            || format!("at most the {inodes} inodes the groups hold"),
        )?;
        let orphans = self.f.within(
            (ORPHANS_AT, 4, "orphans"),
            |o| o <= inodes,
            || format!("0 (none) or an inode number from 1 to {inodes}"),
        )?;
        Ok((free_blocks, free_inodes, dirs, orphans as u32))
    }
}

impl Superblock {
    /// The slot's bytes, in the superblock's `version` (mkfs and every
    /// mount set the version this iolab writes).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(self.version)
    }

    /// The slot's bytes in `version` (1 has no `damage`: reserved).
    fn encode_as(&self, version: u32) -> Vec<u8> {
        debug_assert!(version >= 2 || self.damage == Damage::None, "version 1 records no damage");
        let mut b = vec![0u8; HEADER_BYTES];
        LeWriter::new(&mut b)
            .put_bytes(0, SUPER_MAGIC)
            .put_u32(VERSION_AT, version)
            .put_u64(GENERATION_AT, self.generation)
            .put_u32(BLOCK_BYTES_AT, BLOCK_BYTES as u32)
            .put_u32(SECTOR_BYTES_AT, self.sector_bytes)
            .put_u64(BLOCKS_AT, self.blocks)
            .put_u64(LOG_START_AT, self.log_start_block)
            .put_u64(LOG_BLOCKS_AT, self.log_blocks)
            .put_u32(GROUPS_AT, self.groups)
            .put_u32(BLOCKS_PER_GROUP_AT, self.blocks_per_group)
            .put_u32(INODES_PER_GROUP_AT, self.inodes_per_group)
            .put_u32(INODE_BYTES_AT, INODE_BYTES as u32)
            .put_u64(FIRST_GROUP_AT, self.first_group_block)
            .put_u64(FREE_BLOCKS_AT, self.free_blocks)
            .put_u64(FREE_INODES_AT, self.free_inodes)
            .put_u64(DIRS_AT, self.dirs)
            .put_u8(POLICY_AT, self.policy.code())
            .put_u8(CLEAN_AT, u8::from(self.clean))
            .put_u8(DAMAGE_AT, self.damage.code())
            .put_u32(MOUNTS_AT, self.mounts)
            .put_u64(FS_ID_AT, self.fs_id)
            .put_u64(CREATED_AT, self.created_ns)
            .put_u64(MOUNTED_AT, self.mounted_ns)
            .put_u32(ROOT_AT, ROOT_INO)
            .put_u32(LOST_FOUND_AT, LOST_FOUND_INO)
            .put_u32(ORPHANS_AT, self.orphans);
        FRAME.seal(&[], &mut b);
        b
    }

    /// A slot read from `from` that passes every check of docs/formats.md
    /// ("Superblock"), in the table's order: magic, version, checksum; the
    /// fields every version fixes and the reserved bytes; generation; sector
    /// size, size (within the device), log region, groups; summary counts
    /// and orphan list; policy and clean flag. Every later field's bound
    /// relies only on fields checked before it.
    pub fn decode(bytes: &[u8], from: &SlotSource<'_>) -> Result<Superblock, FieldFault> {
        let base = u64::from(from.slot) * BLOCK_BYTES as u64;
        let place = Place::SuperblockSlot(from.slot);
        let s = Slot { f: Fields { bytes, device: from.device, place, base }, slot: from.slot };
        let version = s.f.whole(SUPER_MAGIC, super::VERSION_OLDEST..=super::VERSION, HEADER_BYTES)?;
        s.fixed()?;
        let generation = s.generation()?;
        let g = s.geometry(from.device_bytes)?;
        let (free_blocks, free_inodes, dirs, orphans) = s.counts(&g)?;
        let (policy, clean, damage) = s.state(version)?;
        let sb = Superblock {
            version,
            generation,
            sector_bytes: g.sector_bytes,
            blocks: g.blocks,
            log_start_block: LOG_START_BLOCK,
            log_blocks: g.log_blocks,
            groups: g.groups,
            blocks_per_group: g.blocks_per_group,
            inodes_per_group: g.inodes_per_group,
            first_group_block: g.first_group_block,
            free_blocks,
            free_inodes,
            dirs,
            policy,
            clean,
            damage,
            // Any value: a mount adds to it saturating.
            mounts: s.f.read(MOUNTS_AT, 4, "mounts")? as u32,
            fs_id: s.f.read(FS_ID_AT, 8, "fs_id")?,
            created_ns: s.f.read(CREATED_AT, 8, "created_ns")?,
            mounted_ns: s.f.read(MOUNTED_AT, 8, "mounted_ns")?,
            orphans,
        };
        debug_assert_eq!(
            sb.encode_as(version),
            bytes[..HEADER_BYTES],
            "every byte of a slot that decodes is read"
        );
        Ok(sb)
    }

    /// What the image may hold that a check must repair, once its log
    /// has been replayed (every mount and fsck replays it first): what a
    /// crash under its last mount's policy leaves when it was not
    /// unmounted, and what was recorded as left before.
    pub fn damage_possible(&self) -> Damage {
        let crash = if self.clean { Damage::None } else { Damage::of_crash_under(self.policy) };
        crash.max(self.damage)
    }

    /// Inode table blocks of a group.
    pub fn inode_table_blocks(&self) -> u32 {
        self.inodes_per_group / INODES_PER_BLOCK
    }

    /// Blocks at the start of every group that are never data.
    pub fn group_overhead_blocks(&self) -> u32 {
        GROUP_HEAD_BLOCKS + self.inode_table_blocks()
    }

    /// The first block of group `group` (below `groups`).
    pub fn group_start(&self, group: u32) -> u64 {
        self.first_group_block + u64::from(group) * u64::from(self.blocks_per_group)
    }

    /// The group block `block` lies in, if any (not the superblocks and
    /// log before the first group, nor past the end).
    pub fn group_of(&self, block: u64) -> Option<u32> {
        (self.first_group_block..self.blocks)
            .contains(&block)
            .then(|| ((block - self.first_group_block) / u64::from(self.blocks_per_group)) as u32)
    }

    /// Blocks in group `group` (the last one may be shorter).
    pub fn group_blocks(&self, group: u32) -> u32 {
        (self.blocks - self.group_start(group)).min(u64::from(self.blocks_per_group)) as u32
    }

    /// Whether `block` lies in some group's data area: where every block
    /// pointer must point.
    pub fn is_data(&self, block: u64) -> bool {
        if block < self.first_group_block || block >= self.blocks {
            return false;
        }
        let g = ((block - self.first_group_block) / u64::from(self.blocks_per_group)) as u32;
        block - self.group_start(g) >= u64::from(self.group_overhead_blocks())
    }

    /// Inodes in all: at most [`INODES_MAX`] (a bound of the decoder).
    pub fn total_inodes(&self) -> u64 {
        u64::from(self.groups) * u64::from(self.inodes_per_group)
    }

    /// The block holding inode `ino` (1 to `total_inodes`) and the byte
    /// where it starts.
    pub fn inode_place(&self, ino: u32) -> (u64, usize) {
        debug_assert!(ino >= 1 && u64::from(ino) <= self.total_inodes(), "inode {ino} out of range");
        let index = ino - 1;
        let (group, within) = (index / self.inodes_per_group, index % self.inodes_per_group);
        let block =
            self.group_start(group) + u64::from(GROUP_HEAD_BLOCKS) + u64::from(within / INODES_PER_BLOCK);
        (block, (within % INODES_PER_BLOCK) as usize * INODE_BYTES)
    }
}
