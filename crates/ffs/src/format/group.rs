//! A group's header (docs/formats.md, "Group"): its layout and the
//! decoder that checks every field against the group the superblock
//! describes, so that no count a mount loads is past what the group holds.

use codec::{Frame, LeWriter};

use super::superblock::{Superblock, HEADER_BYTES};
use super::{BLOCK_BYTES, GROUP_VERSION};
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
            .put_u64(36, self.fs_id);
        Frame::zeroed(12).seal(&[], &mut b);
        b
    }

    /// The header of group `group` of the file system `sb` describes,
    /// read from `device`, if it passes every check of docs/formats.md
    /// ("Group"): magic, version, checksum; its group number and file
    /// system id; its block count (the group's); its counts (none past
    /// what the group holds); the reserved bytes (zero).
    pub fn decode(b: &[u8], group: u32, sb: &Superblock, device: &str) -> Result<GroupHeader, FieldFault> {
        debug_assert!(group < sb.groups, "a group of the file system");
        let base = sb.group_start(group) * BLOCK_BYTES as u64;
        let f = Fields { bytes: b, device, place: Place::GroupHeader(group), base };
        f.whole(GROUP_MAGIC, GROUP_VERSION..=GROUP_VERSION, HEADER_BYTES)?;
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
        };
        f.zero(44, HEADER_BYTES - 44, "reserved")?;
        Ok(h)
    }
}
