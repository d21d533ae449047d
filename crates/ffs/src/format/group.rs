//! A group's header (docs/formats.md, "Group"): its layout and the
//! decoder that checks every field against the group the superblock
//! describes, so that no count a mount loads is past what the group holds.

use codec::{Frame, LeWriter};

use super::superblock::{Superblock, HEADER_BYTES};
use super::{BLOCK_BYTES, GROUP_VERSION, GROUP_VERSION_OLDEST, INODES_PER_BLOCK};
use crate::fault::{FieldFault, Fields, Place};

pub const GROUP_MAGIC: &[u8; 8] = b"IOLABGRP";

/// A group header (docs/formats.md, "Group").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupHeader {
    pub group: u32,
    pub blocks: u32,
    pub free_blocks: u32,
    pub free_inodes: u32,
    pub dirs: u32,
    pub fs_id: u64,
    /// Inode slots from the table's start that may have been handed out
    /// since mkfs, a whole number of table blocks: every slot past them
    /// is zero on the disk (mkfs wrote it so and no inode went there),
    /// so a check reads no table block past them. A writer raises it
    /// durably before an inode past it can reach the disk
    /// (`Core::initialize_through`); nothing lowers it but a check that
    /// read the whole table.
    pub inodes_initialized: u32,
}

impl GroupHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES];
        LeWriter::new(&mut b)
            .put_bytes(0, GROUP_MAGIC)
            .put_u32(8, GROUP_VERSION)
            .put_u32(16, self.group)
            .put_u32(20, self.blocks)
            .put_u32(24, self.free_blocks)
            .put_u32(28, self.free_inodes)
            .put_u32(32, self.dirs)
            .put_u64(36, self.fs_id)
            .put_u32(44, self.inodes_initialized);
        Frame::zeroed(12).seal(&[], &mut b);
        b
    }

    /// The header of group `group` of the file system `sb` describes,
    /// read from `device`, if it passes every check of docs/formats.md
    /// ("Group"): magic, version, checksum; its group number and file
    /// system id; its block count (the group's); its counts (none past
    /// what the group holds); the slots initialized (whole table blocks,
    /// at most the group's; version 1: all of them); the reserved bytes
    /// (zero).
    pub fn decode(b: &[u8], group: u32, sb: &Superblock, device: &str) -> Result<GroupHeader, FieldFault> {
        debug_assert!(group < sb.groups, "a group of the file system");
        let base = sb.group_start(group) * BLOCK_BYTES as u64;
        let f = Fields { bytes: b, device, place: Place::GroupHeader(group), base };
        let version = f.whole(GROUP_MAGIC, GROUP_VERSION_OLDEST..=GROUP_VERSION, HEADER_BYTES)?;
        let fs_id = sb.fs_id;
        f.within(
            (16, 4, "group"),
            |g| g == u64::from(group),
            || format!("exactly {group}, the group it heads"),
        )?;
        f.within(
            (36, 8, "fs_id"),
            |id| id == fs_id,
            || format!("the superblock's {fs_id:#018x}: a header of another file system is not this one's"),
        )?;
        let blocks = sb.group_blocks(group);
        f.within((20, 4, "blocks"), |b| b == u64::from(blocks), || format!("exactly {blocks}, the group's"))?;
        let data = u64::from(blocks - sb.group_overhead_blocks());
        let inodes = u64::from(sb.inodes_per_group);
        let h = GroupHeader {
            group,
            blocks,
            free_blocks: f.within(
                (24, 4, "free_blocks"),
                |n| n <= data,
                || format!("at most its {data} data blocks"),
            )? as u32,
            free_inodes: f.within(
                (28, 4, "free_inodes"),
                |n| n <= inodes,
                || format!("at most its {inodes} inodes"),
            )? as u32,
            dirs: f.within((32, 4, "dirs"), |n| n <= inodes, || format!("at most its {inodes} inodes"))?
                as u32,
            fs_id,
            inodes_initialized: if version == 1 {
                f.zero(44, 4, "reserved")?;
                sb.inodes_per_group
            } else {
                f.within(
                    (44, 4, "inodes_initialized"),
                    |n| n <= inodes && n % u64::from(INODES_PER_BLOCK) == 0,
                    || format!("a multiple of {INODES_PER_BLOCK} (a table block) up to its {inodes} inodes"),
                )? as u32
            },
        };
        f.zero(48, HEADER_BYTES - 48, "reserved")?;
        Ok(h)
    }
}
