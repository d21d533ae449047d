//! Mounting and unmounting: the superblock slots read and rewritten, the
//! groups' counts loaded, everything written back at the end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use device::AlignedBuf;

use crate::cache::Cache;
use crate::core::{Core, GroupCounts};
use crate::format::*;
use crate::mkfs::now_ns;
use crate::{Dev, Ffs, FsError, MountOptions};

/// Reads block `n` straight from the device.
fn read_block(dev: &Dev, n: u64) -> Result<AlignedBuf, FsError> {
    let mut buf = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(dev.buffer_align()));
    dev.read_at(&mut buf, n * BLOCK_BYTES as u64)?;
    Ok(buf)
}

/// The superblock: the valid slot with the higher generation. When
/// neither is valid, slot 0's reason.
pub fn read_superblock(dev: &Dev) -> Result<Superblock, FsError> {
    if dev.size_bytes() < 2 * BLOCK_BYTES as u64 {
        return Err(FsError::NotAFileSystem);
    }
    let first = Superblock::decode(&read_block(dev, 0)?);
    let second = Superblock::decode(&read_block(dev, 1)?);
    match (first, second) {
        (Ok(a), Ok(b)) => Ok(if b.generation > a.generation { b } else { a }),
        (Ok(a), Err(_)) => Ok(a),
        (Err(_), Ok(b)) => Ok(b),
        (Err(e), Err(_)) => Err(e),
    }
}

/// What an unmount left: the superblock on disk, and what the cache did
/// over the whole mount.
#[derive(Clone, Debug)]
pub struct Unmounted {
    pub superblock: Superblock,
    pub cache: crate::CacheStats,
}

impl Ffs {
    /// Mounts the file system on `dev`: marks it not clean (so a crash is
    /// known), records the policy, and serves it.
    pub fn mount(dev: Dev, options: &MountOptions) -> Result<Ffs, FsError> {
        let mut sb = read_superblock(&dev)?;
        if sb.blocks * BLOCK_BYTES as u64 > dev.size_bytes() {
            return Err(FsError::Damaged(format!(
                "it says it has {} blocks, the device holds {}",
                sb.blocks,
                dev.size_bytes() / BLOCK_BYTES as u64
            )));
        }
        let mut groups = Vec::with_capacity(sb.groups as usize);
        for g in 0..sb.groups {
            let h = GroupHeader::decode(&read_block(&dev, sb.group_start(g))?, g, sb.fs_id)?;
            groups.push(GroupCounts { free_blocks: h.free_blocks, free_inodes: h.free_inodes, dirs: h.dirs });
        }
        sb.clean = false;
        sb.mounts += 1;
        sb.mounted_ns = now_ns();
        sb.policy = options.policy;
        let cache = Cache::new(Arc::clone(&dev), options.cache_bytes);
        let core = Core {
            sb,
            groups,
            cache,
            policy: options.policy,
            refs: HashMap::new(),
            dir_index: HashMap::new(),
            failed: None,
        };
        let fs = Ffs { core: Mutex::new(core), dev };
        fs.write_superblock()?;
        Ok(fs)
    }

    /// Writes the superblock into its next slot and makes it durable.
    fn write_superblock(&self) -> Result<(), FsError> {
        let mut core = self.lock();
        core.sb.generation += 1;
        let slot = core.sb.generation % 2;
        let bytes = core.sb.encode();
        drop(core);
        let mut buf = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(self.dev.buffer_align()));
        buf[..bytes.len()].copy_from_slice(&bytes);
        self.dev.write_at(&buf, slot * BLOCK_BYTES as u64)?;
        self.dev.flush()?;
        Ok(())
    }

    /// Puts the groups' counts into their headers (delayed writes).
    fn stage_group_headers(&self) -> Result<(), FsError> {
        let mut core = self.lock();
        for g in 0..core.sb.groups {
            let counts = core.groups[g as usize];
            let header = GroupHeader {
                group: g,
                blocks: core.sb.group_blocks(g),
                free_blocks: counts.free_blocks,
                free_inodes: counts.free_inodes,
                dirs: counts.dirs,
                fs_id: core.sb.fs_id,
            };
            let start = core.sb.group_start(g);
            let block = core.cache.modify(start)?;
            block[..512].copy_from_slice(&header.encode());
        }
        Ok(())
    }

    /// Writes everything back, sorted, then the superblock: all of it
    /// durable when this returns (`sync`, and `fsync` for now).
    pub fn sync_all(&self) -> Result<(), FsError> {
        self.lock().check_alive().map_err(|_| self.failure())?;
        self.stage_group_headers()?;
        let written = self.lock().cache.write_back(true);
        if let Err(e) = written {
            self.lock().failed.get_or_insert_with(|| e.to_string());
            return Err(e.into());
        }
        self.write_superblock()
    }

    fn failure(&self) -> FsError {
        let cause = self.lock().failed.clone().unwrap_or_default();
        FsError::Invalid(format!(
            "an earlier write failed ({cause}); nothing more is written until it is mounted again"
        ))
    }

    /// The syncer's pass: writes buffers dirty for longer than `age`.
    pub fn write_back_older(&self, age: Duration) -> Result<usize, FsError> {
        let mut core = self.lock();
        core.check_alive().map_err(|_| FsError::Invalid("the file system failed".into()))?;
        Ok(core.cache.write_back_older(age)?)
    }

    /// Unmounts: frees inodes unlinked while they were open, writes
    /// everything back and marks the file system clean. Returns the
    /// superblock as left on disk and the cache's counters, the final
    /// write-back included.
    pub fn unmount(self) -> Result<Unmounted, FsError> {
        self.release_orphans()?;
        {
            let mut core = self.lock();
            core.check_alive().map_err(|_| {
                FsError::Invalid("an earlier write failed; the file system is not clean".into())
            })?;
            core.sb.clean = true;
        }
        self.sync_all()?;
        let core = self.lock();
        Ok(Unmounted { superblock: core.sb.clone(), cache: core.cache.stats })
    }

    /// The counters of the buffer cache.
    pub fn cache_stats(&self) -> crate::CacheStats {
        self.lock().cache.stats
    }

    /// The superblock as mounted (counts current).
    pub fn superblock(&self) -> Superblock {
        self.lock().sb.clone()
    }
}
