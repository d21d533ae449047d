//! Making a file system: the superblock in both slots, each group's
//! header, bitmaps and zeroed inode table, the root directory and
//! lost+found.

use device::{AlignedBuf, Device};

use crate::format::*;
use crate::{Dev, FsError};

/// Choices for a new file system.
#[derive(Clone, Debug, Default)]
pub struct MkfsOptions {
    /// Inodes in all (rounded up to whole inode-table blocks per group);
    /// default: one per 16 KiB.
    pub inodes: Option<u64>,
    /// Bytes of the log region; default: WAPBL's 1 MiB per GiB, 1 to 64 MiB.
    pub log_bytes: Option<u64>,
}

/// The geometry `mkfs` lays out on `device_bytes`.
pub fn geometry(device_bytes: u64, sector_bytes: u32, options: &MkfsOptions) -> Result<Superblock, FsError> {
    let sb = layout(device_bytes, sector_bytes, options)?;
    // mkfs never writes a superblock its reader would refuse.
    let from = SlotSource { device: "mkfs", device_bytes, slot: 0 };
    Superblock::decode(&sb.encode(), &from).map_err(|fault| {
        FsError::Invalid(format!("this geometry breaks a bound of the superblock: {fault}"))
    })?;
    Ok(sb)
}

fn layout(device_bytes: u64, sector_bytes: u32, options: &MkfsOptions) -> Result<Superblock, FsError> {
    let blocks = device_bytes / BLOCK_BYTES as u64;
    if blocks > BLOCKS_MAX {
        return Err(FsError::Invalid(format!(
            "{device_bytes} bytes is more than a file system with 31-bit block numbers holds: give --size at most \
             {} bytes (8 TiB)",
            BLOCKS_MAX * BLOCK_BYTES as u64
        )));
    }
    let log_bytes = options.log_bytes.unwrap_or_else(|| default_log_bytes(device_bytes));
    // WAPBL's least, and room for a transaction of a few calls.
    let least: u64 = 1 << 20;
    if log_bytes < least {
        return Err(FsError::Invalid(format!(
            "--log-size: a log region of {log_bytes} bytes is too small for the log policy's log; give at least {} KiB",
            least / 1024
        )));
    }
    let log_blocks = log_bytes.div_ceil(BLOCK_BYTES as u64);
    let first_group_block = 2 + log_blocks;
    if blocks < first_group_block + 64 {
        return Err(FsError::Invalid(format!(
            "{device_bytes} bytes is too small for a file system with a {log_bytes}-byte log; give at least {} bytes",
            (first_group_block + 64) * BLOCK_BYTES as u64
        )));
    }
    let data_blocks = blocks - first_group_block;
    let blocks_per_group = u64::from(BITS_PER_BLOCK).min(data_blocks) as u32;
    let groups = data_blocks.div_ceil(u64::from(blocks_per_group)) as u32;
    let inodes = options.inodes.unwrap_or(device_bytes / 16384).max(16);
    let per_group = inodes.div_ceil(u64::from(groups)).next_multiple_of(u64::from(INODES_PER_BLOCK));
    if per_group > u64::from(BITS_PER_BLOCK)
        || per_group / u64::from(INODES_PER_BLOCK) + 3 + 8 > u64::from(blocks_per_group)
    {
        return Err(FsError::Invalid(format!(
            "--inodes: {inodes} inodes do not fit {device_bytes} bytes; give fewer"
        )));
    }
    let sb = Superblock {
        version: crate::format::VERSION,
        generation: 0,
        sector_bytes,
        blocks,
        log_start_block: 2,
        log_blocks,
        groups,
        blocks_per_group,
        inodes_per_group: per_group as u32,
        first_group_block,
        free_blocks: 0,
        free_inodes: 0,
        dirs: 0,
        policy: Policy::Async,
        clean: true,
        damage: Damage::None,
        mounts: 0,
        fs_id: new_fs_id(),
        created_ns: now_ns(),
        mounted_ns: 0,
        orphans: 0,
    };
    // A last group too short for its own overhead and a few data blocks
    // is left out: the file system ends before it.
    let last = sb.group_blocks(groups - 1);
    if groups > 1 && last < sb.group_overhead_blocks() + 8 {
        let blocks = sb.group_start(groups - 1);
        return Ok(Superblock { groups: groups - 1, blocks, ..sb });
    }
    Ok(sb)
}

/// The log region's size when `--log-size` is not given: what mke2fs
/// gives jbd2's journal on a device of `device_bytes` (e2fsprogs 1.47,
/// measured: 4 MiB at 64 MiB, 32 MiB at 1 GiB, 64 MiB at 4 GiB, 1 GiB
/// from 128 GiB), at least 1 MiB. A transaction holds up to half of it
/// (`blocklog`), so the log commits as often as jbd2 does, not at every
/// few hundred changed blocks: 1 MiB per GiB (WAPBL's rule, before)
/// committed a generated tree's untar 272 times in 1.6 s.
pub fn default_log_bytes(device_bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let steps = [
        (32 * MIB, MIB),
        (256 * MIB, 4 * MIB),
        (512 * MIB, 8 * MIB),
        (GIB, 16 * MIB),
        (2 * GIB, 32 * MIB),
        (16 * GIB, 64 * MIB),
        (32 * GIB, 128 * MIB),
        (64 * GIB, 256 * MIB),
        (128 * GIB, 512 * MIB),
    ];
    steps.iter().find(|&&(below, _)| device_bytes < below).map_or(GIB, |&(_, log)| log)
}

/// A random file-system id (hashed time and process id, as run ids are).
fn new_fs_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now_ns());
    h.write_u32(std::process::id());
    h.finish()
}

pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn write_block(dev: &dyn Device, block: u64, bytes: &[u8]) -> Result<(), FsError> {
    let mut buf = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(dev.buffer_align()));
    buf[..bytes.len()].copy_from_slice(bytes);
    dev.write_at(&buf, block * BLOCK_BYTES as u64)?;
    Ok(())
}

/// Makes a file system on `dev`, over whatever it held, and returns its
/// superblock. The caller refuses a device holding data without
/// `--force`.
pub fn mkfs(dev: &Dev, options: &MkfsOptions) -> Result<Superblock, FsError> {
    let mut sb = geometry(dev.size_bytes(), dev.sector_bytes(), options)?;
    let table = sb.inode_table_blocks();
    let zeros = AlignedBuf::zeroed(BLOCK_BYTES * 64, BLOCK_BYTES.max(dev.buffer_align()));
    // The log region's two header slots: a log an earlier file system
    // left there must never be replayed onto this one.
    dev.write_at(&zeros[..2 * BLOCK_BYTES], sb.log_start_block * BLOCK_BYTES as u64)?;
    for g in 0..sb.groups {
        let start = sb.group_start(g);
        let blocks = sb.group_blocks(g);
        let overhead = sb.group_overhead_blocks();
        let mut map = vec![0u8; BLOCK_BYTES];
        for i in 0..overhead {
            map[(i / 8) as usize] |= 1 << (i % 8);
        }
        write_block(dev.as_ref(), start + 1, &map)?;
        write_block(dev.as_ref(), start + 2, &[0u8; BLOCK_BYTES])?;
        let mut at = 0;
        while at < table {
            let n = (table - at).min(64);
            dev.write_at(
                &zeros[..n as usize * BLOCK_BYTES],
                (start + 3 + u64::from(at)) * BLOCK_BYTES as u64,
            )?;
            at += n;
        }
        sb.free_blocks += u64::from(blocks - overhead);
        sb.free_inodes += u64::from(sb.inodes_per_group);
        let header = GroupHeader {
            group: g,
            blocks,
            free_blocks: blocks - overhead,
            free_inodes: sb.inodes_per_group,
            dirs: 0,
            fs_id: sb.fs_id,
            // The root and lost+found, taken by the mount below, raise it.
            inodes_initialized: 0,
        };
        write_block(dev.as_ref(), start, &header.encode())?;
    }
    write_block(dev.as_ref(), 0, &sb.encode())?;
    write_block(dev.as_ref(), 1, &[0u8; BLOCK_BYTES])?;
    dev.flush()?;
    // The root and lost+found, made by a mount like any directory.
    let fs = crate::Ffs::mount(std::sync::Arc::clone(dev), &crate::MountOptions::default())?;
    fs.make_root()?;
    let sb = fs.unmount()?.superblock;
    Ok(sb)
}

#[cfg(test)]
mod tests {
    use super::default_log_bytes;

    /// The default log is the journal mke2fs 1.47 makes for a device of
    /// the same size (`mkfs.ext4` on sparse files of each size, its
    /// "Creating journal (N blocks)" times its block size).
    #[test]
    fn the_default_log_is_the_journal_mke2fs_makes() {
        const MIB: u64 = 1 << 20;
        const GIB: u64 = 1 << 30;
        let mke2fs = [
            (16 * MIB, MIB),
            (64 * MIB, 4 * MIB),
            (128 * MIB, 4 * MIB),
            (256 * MIB, 8 * MIB),
            (512 * MIB, 16 * MIB),
            (1023 * MIB, 16 * MIB),
            (GIB, 32 * MIB),
            (2 * GIB, 64 * MIB),
            (4 * GIB, 64 * MIB),
            (16 * GIB, 128 * MIB),
            (32 * GIB, 256 * MIB),
            (128 * GIB, GIB),
        ];
        for (device, journal) in mke2fs {
            assert_eq!(default_log_bytes(device), journal, "a device of {} MiB", device / MIB);
        }
    }
}
