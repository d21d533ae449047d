//! Soft updates' rules on a mounted file system, with its internals at hand.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{Device, MemDevice};
use fsapi::{FileSystem, Owner, ROOT};

use super::{record_at, Blocks, FreedFrom, Image, Shadow, Softdep, Wait};
use crate::cache::Cache;
use crate::core::Core;
use crate::format::{BLOCK_BYTES, INODES_PER_BLOCK, INODE_BYTES};
use crate::policy::Ordering;
use crate::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};

/// A new file system on a memory device, mounted under `softdep`.
fn fresh_softdep() -> Ffs {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let options = MountOptions { policy: Policy::Softdep, ..Default::default() };
    Ffs::mount(dev, &options).unwrap()
}

/// `p` made and synced, then `d` in it and synced; with the copies the
/// tests make the disk hold instead: `p`'s inode block with `p`'s count
/// before `d`'s `..` raised it, and `p`'s first block before it named `d`.
struct NewDir {
    fs: Ffs,
    p: u32,
    d: u32,
    p_block: u64,
    p_disk: Vec<u8>,
    p_dir: u64,
    dir_before: Vec<u8>,
}

fn new_dir_in_a_synced_parent() -> NewDir {
    let fs = fresh_softdep();
    let p = fs.mkdir(ROOT, OsStr::new("p"), Owner::root(0o755)).unwrap().ino as u32;
    fs.sync().unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let (p_block, p_at) = core.sb.inode_place(p);
    let p_before = core.cache.read(&mut core.order, p_block).unwrap()[p_at..p_at + INODE_BYTES].to_vec();
    let p_dir = u64::from(core.inode(p).unwrap().direct[0]);
    let dir_before = core.cache.read(&mut core.order, p_dir).unwrap().to_vec();
    drop(guard);
    let d = fs.mkdir(p.into(), OsStr::new("d"), Owner::root(0o755)).unwrap().ino as u32;
    fs.sync().unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let mut p_disk = core.cache.read(&mut core.order, p_block).unwrap().to_vec();
    p_disk[p_at..p_at + INODE_BYTES].copy_from_slice(&p_before);
    drop(guard);
    NewDir { fs, p, d, p_block, p_disk, p_dir, dir_before }
}

/// A new directory `d` in `p`, everything on the disk but `p`'s count
/// raised for `d`'s `..` (and `p`'s entry naming `d`): the entry may
/// not be written, though `d`'s own inode is there (MKDIR_PARENT).
#[test]
fn an_entry_naming_a_directory_is_held_until_its_parents_count_is_on_the_disk() {
    let NewDir { fs, d, p_block, p_disk, p_dir, dir_before, .. } = new_dir_in_a_synced_parent();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let memory = core.cache.read(&mut core.order, p_dir).unwrap().to_vec();
    let at = (0..memory.len()).step_by(4).find(|&at| record_at(&memory, at).is_some_and(|r| r.ino == d));
    let at = at.expect("p's block names d");
    let (sd, cache) = parts(core);
    sd.durable.insert(p_block, Shadow::Bytes(super::block_copy(&p_disk)));
    sd.durable.insert(p_dir, Shadow::Bytes(super::block_copy(&dir_before)));
    let image = sd.image(&*cache, p_dir, &memory);
    let Image::Rolled(image) = image else { panic!("the entry is rolled back") };
    assert!(record_at(&image, at).is_none(), "p's entry naming d written before p's count");
}

/// A flush looks only at what waits on the blocks it made durable; a
/// wait no write will change (on a copy already right, never written
/// again) is settled by the sync, once its passes stop moving.
#[test]
fn a_wait_no_flush_looks_at_is_settled_by_the_sync() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let block = core.alloc_block(0).unwrap();
    // Held on inode 40, free on the disk: nothing points to it there.
    core.order.softdep_mut().unwrap().hold_blocks(
        vec![block],
        FreedFrom::Other,
        vec![Wait::Inode(40)],
        &mut |_| {},
    );
    core.cache.flush(&mut core.order).unwrap();
    assert_eq!(core.order.softdep().unwrap().stats.released_blocks, 0, "the flush made nothing durable");
    core.softdep_sync().unwrap();
    assert_eq!(core.order.softdep().unwrap().stats.released_blocks, 1, "the sync released it");
    assert!(core.order.softdep().unwrap().idle());
}

/// A flush in flight covers the writes before its seal only: a bitmap
/// written after the seal is not on the disk when that flush returns,
/// and the inode it allocated is still held back until the next.
#[test]
fn a_write_after_the_seal_is_not_durable_when_the_sealed_flush_returns() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let a = fs.create(ROOT, OsStr::new("a"), Owner::root(0o644)).unwrap().ino as u32;
    let mut guard = fs.lock();
    let core = &mut *guard;
    let (block, _) = core.sb.inode_place(a);
    let bitmap = core.sb.group_start((a - 1) / core.sb.inodes_per_group) + 2;
    let memory = core.cache.read(&mut core.order, block).unwrap().to_vec();
    let (sd, cache) = parts(core);
    sd.seal();
    sd.written(bitmap, None);
    sd.sealed_flushed(&*cache);
    let held = sd.image(&*cache, block, &memory);
    sd.seal();
    sd.sealed_flushed(&*cache);
    let ready = sd.image(&*cache, block, &memory);
    assert_ne!(held, Image::Memory, "the new inode written before its bit is on the disk");
    assert_eq!(ready, Image::Memory, "the inode waits once its bit is flushed");
}

/// Changing many inodes, as a removal does, changes more metadata blocks
/// than the cache holds while nothing is held back: the cache
/// checkpoints once the disk's images it keeps apart pass half of it, so
/// they stay bounded (not one per block changed since the last sync).
#[test]
fn changing_many_inodes_checkpoints_before_the_shadows_outgrow_the_cache() {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(128 << 20).unwrap());
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    // Deferred: the flush issued at once, done with by the call that
    // needs it; the same from run to run, as a flusher thread is not.
    let options = MountOptions {
        policy: Policy::Softdep,
        cache_bytes: 256 << 10,
        commits: crate::Commits::Deferred,
        ..Default::default()
    };
    let fs = Ffs::mount(dev, &options).unwrap();
    let mut files = Vec::new();
    for d in 0..80 {
        let dir = fs.mkdir(ROOT, OsStr::new(&format!("d{d}")), Owner::root(0o755)).unwrap().ino;
        for f in 0..100 {
            files.push(fs.create(dir, OsStr::new(&format!("f{f}")), Owner::root(0o644)).unwrap().ino);
        }
    }
    fs.sync().unwrap();
    let mut most = 0;
    for &file in &files {
        fs.setattr(file, &fsapi::SetAttr { perm: Some(0o600), ..Default::default() }).unwrap();
        most = most.max(fs.lock().order.softdep().unwrap().shadows());
    }
    // 64 buffers: a checkpoint at 32 shadows, its flush waited for past
    // 64; shadows of buffers dirty since (a cache's worth at most) and of
    // writes not yet flushed stay. Without these checkpoints, over 500.
    assert!(most <= 2 * 64, "{most} shadows");
    fs.sync().unwrap();
}

/// A freed directory block written once more by a thread of its own
/// (beside a flusher thread): a failed write there reaches the calls
/// after it (at the latest the sync, whose flush waits for that thread),
/// and the file system takes no more changes.
#[test]
fn a_failed_write_of_a_freed_directory_block_behind_the_calls_stops_the_file_system() {
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
    mkfs(&mem, &MkfsOptions::default()).unwrap();
    let fs = Ffs::mount(Arc::clone(&mem), &MountOptions::default()).unwrap();
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap().ino;
    fs.create(d, OsStr::new("f"), Owner::root(0o644)).unwrap();
    let block = u64::from(fs.lock().inode(d as u32).unwrap().direct[0]);
    fs.unmount().unwrap();

    // Only that block's writes fail: the one write it gets below is the
    // last, after its directory is removed.
    let bytes = block * BLOCK_BYTES as u64..(block + 1) * BLOCK_BYTES as u64;
    let fault = device::Fault::Range { range: bytes, reads: false, writes: true };
    let dev: Arc<dyn Device> = Arc::new(device::FaultyDevice::new(mem, vec![fault]));
    // The default: flushes on a flusher thread.
    let options = MountOptions { policy: Policy::Softdep, ..Default::default() };
    let fs = Ffs::mount(dev, &options).unwrap();
    let d = fs.lookup(ROOT, OsStr::new("d")).unwrap().ino;
    fs.unlink(d, OsStr::new("f")).unwrap();
    fs.forget(d, 1);
    fs.rmdir(ROOT, OsStr::new("d")).unwrap();
    assert!(fs.sync().is_err(), "the failed write is reported");
    let err = fs.create(ROOT, OsStr::new("late"), Owner::root(0o644)).unwrap_err();
    assert_eq!(err, fsapi::Errno::IO);
}

mod records {
    use proptest::prelude::*;

    use super::super::{record_at, records};
    use crate::format::{DirRecord, BLOCK_BYTES, DIR_CHUNK_BYTES};

    /// A directory block of chunks filled with records of random names,
    /// some freed (inode 0), then a few bytes near the chunks' first
    /// records overwritten with garbage (`(chunk, offset, byte)`).
    fn block(names: &[(u32, u8)], garbage: &[(usize, usize, u8)]) -> Vec<u8> {
        let mut bytes = vec![0u8; BLOCK_BYTES];
        let mut names = names.iter();
        for chunk in (0..BLOCK_BYTES).step_by(DIR_CHUNK_BYTES) {
            let mut at = chunk;
            let end = chunk + DIR_CHUNK_BYTES;
            for &(ino, len) in names.by_ref() {
                let reclen = crate::format::record_bytes(len as usize);
                if at + reclen + 12 > end {
                    break;
                }
                let name = vec![b'a' + len % 26; len as usize];
                DirRecord { ino, reclen: reclen as u16, kind: 1, name }.write(&mut bytes, at);
                at += reclen;
            }
            DirRecord { ino: 0, reclen: (end - at) as u16, kind: 0, name: Vec::new() }.write(&mut bytes, at);
        }
        for &(chunk, offset, b) in garbage {
            bytes[chunk * DIR_CHUNK_BYTES + offset] = b;
        }
        bytes
    }

    proptest! {
        /// One walk finds the records `record_at` finds, place by place,
        /// whatever garbage breaks some chunks.
        #[test]
        fn records_are_what_record_at_finds(
            names in prop::collection::vec((0u32..50, 1u8..40), 0..200),
            garbage in prop::collection::vec((0usize..BLOCK_BYTES / DIR_CHUNK_BYTES, 0usize..64, any::<u8>()), 0..4),
        ) {
            let bytes = block(&names, &garbage);
            let walked: Vec<(usize, u32)> = records(&bytes).into_iter().map(|(at, r)| (at, r.ino)).collect();
            let found: Vec<(usize, u32)> =
                (0..BLOCK_BYTES).step_by(4).filter_map(|at| record_at(&bytes, at).map(|r| (at, r.ino))).collect();
            prop_assert_eq!(walked, found);
        }
    }
}

/// `count` empty files `f0`, `f1`, ... in the root, forgotten and synced.
fn synced_files(fs: &Ffs, count: u32) -> Vec<u32> {
    let files = (0..count)
        .map(|i| {
            let f = fs.create(ROOT, OsStr::new(&format!("f{i}")), Owner::root(0o644)).unwrap().ino;
            fs.forget(f, 1);
            f as u32
        })
        .collect();
    fs.sync().unwrap();
    files
}

/// A file removed while its entry is still on the disk: its inode block's
/// every change waits (the parent's inode, which changes too, is in
/// another block), so the block's image is the disk's own (nothing
/// copied, nothing to write); once the entry's removal is on the disk,
/// the block goes as memory holds it.
#[test]
fn an_inode_block_whose_every_change_waits_is_the_disks_image() {
    let fs = fresh_softdep();
    let files = synced_files(&fs, 2 * INODES_PER_BLOCK);
    let (i, f) = files.iter().enumerate().rev().find(|(_, &f)| f / INODES_PER_BLOCK > 1).unwrap();
    fs.unlink(ROOT, OsStr::new(&format!("f{i}"))).unwrap();
    let image = |fs: &Ffs| {
        let mut guard = fs.lock();
        let core = &mut *guard;
        let block = core.sb.inode_place(*f).0;
        let memory = core.cache.read(&mut core.order, block).unwrap().to_vec();
        let (sd, cache) = parts(core);
        sd.image(&*cache, block, &memory)
    };
    assert!(matches!(image(&fs), Image::Durable), "the freed inode stays whole on the disk");
    fs.sync().unwrap();
    assert!(matches!(image(&fs), Image::Memory), "nothing waits after the sync");
}

/// A freed directory block with removals in it is written once more (so
/// that the counts of the inodes it named may drop after one flush), then
/// its buffer goes: it does not crowd the live ones out of the cache.
#[test]
fn a_freed_directory_block_is_written_once_then_dropped() {
    let fs = fresh_softdep();
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap().ino;
    let f = fs.create(d, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.forget(f, 1);
    fs.forget(d, 1);
    fs.sync().unwrap();
    let block = u64::from(fs.lock().inode(d as u32).unwrap().direct[0]);
    fs.unlink(d, OsStr::new("f")).unwrap();
    fs.rmdir(ROOT, OsStr::new("d")).unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    assert!(core.cache.cached(block).is_some(), "kept until written");
    core.cache.write_back(&mut core.order, false).unwrap();
    assert!(core.cache.cached(block).is_none(), "dropped once written");
    // Not cached: read from the device.
    let disk = core.cache.memory(block).unwrap();
    let named = (0..disk.len()).step_by(4).any(|at| record_at(&disk, at).is_some_and(|r| r.ino == f as u32));
    assert!(!named, "the block went out without f's entry");
}

/// A metadata block evicted after its write and before the flush that
/// makes that write durable (its shadow still there) is the next thing
/// the rules look at: kept, it is looked at without a read.
#[test]
fn a_block_evicted_before_its_write_is_flushed_is_looked_at_without_a_read() {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let cache_bytes = 64 * BLOCK_BYTES as u64;
    let options = MountOptions { policy: Policy::Softdep, cache_bytes, ..Default::default() };
    let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
    fs.sync().unwrap();
    let changes = fsapi::SetAttr { perm: Some(0o700), ..Default::default() };
    fs.setattr(ROOT, &changes).unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    // The root's inode block (its mode changed, nothing waiting) is
    // written as memory holds it; its shadow stays until a flush.
    let block = core.sb.inode_place(ROOT as u32).0;
    core.cache.write_back(&mut core.order, false).unwrap();
    assert!(core.order.softdep().unwrap().durable_bytes(block).is_some(), "written, not flushed");
    let memory = core.cache.read(&mut core.order, block).unwrap().to_vec();
    let data_start = core.inode_group_data(ROOT as u32);
    for b in data_start..data_start + 128 {
        core.cache.read(&mut core.order, b).unwrap();
    }
    assert!(core.cache.cached(block).is_none(), "evicted");
    let reads = dev.stats().snapshot().reads;
    assert_eq!(core.cache.memory(block).as_deref(), Some(&memory[..]));
    assert_eq!(dev.stats().snapshot().reads, reads, "looked at without a read");
}

/// Rule 3 without the block's `.` to name the owner (a later block of a
/// directory) finds the parent through the subdirectory's `..`, and
/// holds the entry exactly as with it: until the parent's count on the
/// disk counts that `..`.
#[test]
fn a_parent_found_through_the_dot_dot_is_held_as_the_owner_is() {
    let NewDir { fs, p, d, p_block, p_disk, .. } = new_dir_in_a_synced_parent();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let (sd, cache) = parts(core);
    sd.durable.insert(p_block, Shadow::Bytes(super::block_copy(&p_disk)));
    let held = [sd.parent_counted(&*cache, d, None), sd.parent_counted(&*cache, d, Some(p))];
    sd.durable.remove(&p_block);
    let counted = [sd.parent_counted(&*cache, d, None), sd.parent_counted(&*cache, d, Some(p))];
    assert_eq!(held, [false, false], "p's count on the disk does not count d's `..`");
    assert_eq!(counted, [true, true], "p's count on the disk counts it");
}

/// `f` in the root with `blocks` blocks of data, synced.
fn synced_file(fs: &Ffs, blocks: usize) -> u32 {
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino as u32;
    fs.write(f.into(), 0, &vec![0x5a; blocks * BLOCK_BYTES]).unwrap();
    fs.sync().unwrap();
    f
}

/// Free blocks and free inodes, as statfs tells them.
fn free_counts(fs: &Ffs) -> (u64, u64) {
    let st = fs.statfs().unwrap();
    (st.blocks_free, st.files_free)
}

/// `f` removed and forgotten (its inode freed in memory).
fn remove(fs: &Ffs, f: u32) {
    fs.unlink(ROOT, OsStr::new("f")).unwrap();
    fs.forget(f.into(), 1);
}

/// A removed file's blocks wait with its inode, in no group of their own,
/// and are given back with it once its slot is free on the disk.
#[test]
fn a_removed_files_blocks_go_back_with_its_inode() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let before = free_counts(&fs);
    let f = synced_file(&fs, 3);
    remove(&fs, f);
    {
        let core = fs.lock();
        let sd = core.order.softdep().unwrap();
        assert!(sd.held.is_empty(), "no group held for the removed file's blocks");
        assert_eq!(sd.held_inode_count, 1, "its inode held, its slot still in use on the disk");
        assert_eq!(sd.stats.released_blocks, 0, "nothing given back before the slot is free on the disk");
    }
    fs.sync().unwrap();
    let core = fs.lock();
    let sd = core.order.softdep().unwrap();
    assert_eq!((sd.stats.released_blocks, sd.stats.released_inodes), (3, 1), "its 3 blocks went with it");
    assert!(sd.idle());
    drop(core);
    assert_eq!(free_counts(&fs), before, "every block and inode free again");
}

/// A file cut short, then removed before the cut was written: the blocks
/// the cut freed wait on its indirect block, which the removal holds with
/// the inode; once the slot is free on the disk the indirect block goes
/// and so does the wait on it.
#[test]
fn blocks_waiting_on_a_removed_files_indirect_block_go_back_with_it() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let before = free_counts(&fs);
    let f = synced_file(&fs, crate::format::DIRECT_POINTERS + 6);
    let cut = fsapi::SetAttr {
        size: Some((crate::format::DIRECT_POINTERS + 2) as u64 * BLOCK_BYTES as u64),
        ..Default::default()
    };
    fs.setattr(f.into(), &cut).unwrap();
    remove(&fs, f);
    {
        let core = fs.lock();
        let sd = core.order.softdep().unwrap();
        assert_eq!(sd.held.len(), 1, "the cut's blocks held in a group");
        assert_eq!(sd.held_inode_count, 1);
    }
    fs.sync().unwrap();
    let core = fs.lock();
    assert!(core.order.softdep().unwrap().idle(), "the cut's group went with the indirect block");
    drop(core);
    assert_eq!(free_counts(&fs), before, "every block and inode free again");
}

/// Whether an inode block goes as memory holds it, told without making
/// its image, is what the image says: a change with nothing to wait for
/// goes; a freed inode whose entry is still on the disk holds it back;
/// after a sync it goes again.
#[test]
fn the_probe_of_an_inode_block_agrees_with_its_image() {
    let fs = fresh_softdep();
    let files = synced_files(&fs, 3);
    let look = |fs: &Ffs| {
        let mut guard = fs.lock();
        let core = &mut *guard;
        let block = core.sb.inode_place(files[0]).0;
        assert_eq!(block, core.sb.inode_place(files[1]).0, "the files share an inode block");
        let memory = core.cache.read(&mut core.order, block).unwrap().to_vec();
        let (sd, cache) = parts(core);
        (sd.goes_as_memory(&*cache, block, &memory), sd.image(&*cache, block, &memory))
    };
    fs.setattr(files[0].into(), &fsapi::SetAttr { perm: Some(0o600), ..Default::default() }).unwrap();
    assert_eq!(look(&fs), (true, Image::Memory), "a new mode waits for nothing");
    fs.unlink(ROOT, OsStr::new("f1")).unwrap();
    let (goes, image) = look(&fs);
    assert!(!goes, "the freed inode stays whole while its entry is on the disk");
    assert_ne!(image, Image::Memory);
    fs.sync().unwrap();
    assert_eq!(look(&fs), (true, Image::Memory), "nothing waits after the sync");
}

/// The mount's dependencies and its cache, side by side.
fn parts(core: &mut Core) -> (&mut Softdep, &mut Cache) {
    let Ordering::Softdep(s) = &mut core.order else { panic!("mounted under softdep") };
    let sd = &mut s.deps;
    (sd, &mut core.cache)
}

/// What the write check (`invariants.rs`) says of memory's copy of
/// `block`: what a write that skipped the rules would carry.
fn check_memory(fs: &Ffs, block: u64) -> Result<(), super::invariants::Broken> {
    let mut guard = fs.lock();
    let core = &mut *guard;
    let memory = core.cache.read(&mut core.order, block).unwrap().to_vec();
    let (sd, cache) = parts(core);
    sd.rules_hold(&*cache, block, &memory)
}

/// A new inode written as memory holds it, before its bit in the inode
/// bitmap is on the disk, is caught as breaking rule 2; once a sync put
/// the bit there, the same bytes pass.
#[test]
fn the_write_check_catches_a_new_inode_before_its_bit() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let a = fs.create(ROOT, OsStr::new("a"), Owner::root(0o644)).unwrap().ino as u32;
    let block = fs.lock().sb.inode_place(a).0;
    let broken = check_memory(&fs, block).expect_err("the inode's bit is not on the disk");
    assert_eq!(broken.rule, 2, "{broken}");
    fs.sync().unwrap();
    assert_eq!(check_memory(&fs, block), Ok(()), "the bit is on the disk now");
}

/// A pointer to a newly allocated block written before the block's bit
/// is on the disk is caught as breaking rule 1.
#[test]
fn the_write_check_catches_a_pointer_before_its_blocks_bit() {
    let fs = fresh_softdep();
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.sync().unwrap();
    fs.write(f, 0, &[7u8; 100]).unwrap();
    let block = fs.lock().sb.inode_place(f as u32).0;
    let broken = check_memory(&fs, block).expect_err("the data block's bit is not on the disk");
    assert_eq!(broken.rule, 1, "{broken}");
}

/// An entry naming an inode the disk does not hold yet is caught as
/// breaking rule 3.
#[test]
fn the_write_check_catches_an_entry_before_its_inode() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    fs.create(ROOT, OsStr::new("b"), Owner::root(0o644)).unwrap();
    let root_dir = u64::from(fs.lock().inode(ROOT as u32).unwrap().direct[0]);
    let broken = check_memory(&fs, root_dir).expect_err("the entry's inode is not on the disk");
    assert_eq!(broken.rule, 3, "{broken}");
}

/// The cache asks the write check of every metadata write: with the
/// rules skipped (every block written as memory holds it), the sync of a
/// new file stops at the first write that breaks one.
#[test]
#[should_panic(expected = "soft updates: writing block")]
fn a_write_that_skips_the_rules_is_stopped_by_the_check() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    fs.create(ROOT, OsStr::new("c"), Owner::root(0o644)).unwrap();
    fs.lock().order.softdep_mut().unwrap().ignore_rules = true;
    let _ = fs.sync();
}

/// Rule 1 settles a new block once both its contents and its group's
/// block map are on the disk, in either order, and the flush that
/// settles it forgets it: one that makes only the map durable, after the
/// contents went earlier, looks at the blocks of the maps it made
/// durable, not only at the blocks it wrote.
#[test]
fn a_new_block_settles_when_its_map_reaches_the_disk_after_its_contents() {
    let fs = fresh_softdep();
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.write(f, 0, &[7u8; BLOCK_BYTES]).unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let block = core.inode(f as u32).unwrap().direct[0];
    let g = (u64::from(block) - core.sb.first_group_block) / u64::from(core.sb.blocks_per_group);
    let map = core.sb.group_start(g as u32) + 1;
    assert!(core.cache.is_dirty_meta(map), "the map is not written yet");
    core.cache.write_listed(&mut core.order, &[u64::from(block)]).unwrap();
    core.cache.flush(&mut core.order).unwrap();
    assert!(!core.order.softdep().unwrap().settled(block), "the contents alone settle nothing");
    core.cache.write_listed(&mut core.order, &[map]).unwrap();
    core.cache.flush(&mut core.order).unwrap();
    let sd = core.order.softdep().unwrap();
    assert!(sd.settled(block), "the map after the contents settles it");
    assert!(sd.fresh_blocks.get(u64::from(block)).is_none(), "and the block is no longer fresh");
}

/// Files made in the root until one takes a slot past the ones its
/// group's header counted (the count raised for it): that inode, its
/// group, and the first slot the raise added. No flush is in flight
/// after (one behind the calls waited for), so a test's own seal covers
/// what it says was written.
fn past_the_counted_slots(fs: &Ffs) -> (u32, u32, u32) {
    for i in 0..4096 {
        let before = fs.lock().initialized.clone();
        let ino = fs.create(ROOT, OsStr::new(&format!("f{i}")), Owner::root(0o644)).unwrap().ino as u32;
        let mut guard = fs.lock();
        let core = &mut *guard;
        let (g, slot) = ((ino - 1) / core.sb.inodes_per_group, (ino - 1) % core.sb.inodes_per_group);
        if core.initialized[g as usize] != before[g as usize] {
            assert!(slot >= before[g as usize], "the raise is for this slot");
            core.order.before_flush(&mut core.cache).unwrap();
            return (ino, g, before[g as usize]);
        }
    }
    panic!("4,096 files and no slot past the counted ones");
}

/// `block` written as memory holds it and flushed (no flush in flight).
fn written_and_flushed(sd: &mut Softdep, cache: &Cache, block: u64) {
    sd.written(block, None);
    sd.seal();
    sd.sealed_flushed(cache);
}

/// A new inode in a slot its group's header on the disk does not count
/// waits for the raised header as it waits for its bit: with the bitmap
/// flushed alone it is still rolled back (fsck would not read its slot),
/// and once the header is flushed too it goes as memory holds it. No
/// synchronous write was made for the raise.
#[test]
fn a_new_inode_past_the_slots_its_header_counts_waits_for_the_header() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let sync_writes = fs.lock().cache.stats.sync_writes;
    let (a, g, _) = past_the_counted_slots(&fs);
    let mut guard = fs.lock();
    let core = &mut *guard;
    assert_eq!(core.cache.stats.sync_writes, sync_writes, "the raise wrote nothing at once");
    let (block, _) = core.sb.inode_place(a);
    let start = core.sb.group_start(g);
    let memory = core.cache.read(&mut core.order, block).unwrap().to_vec();
    let (sd, cache) = parts(core);
    written_and_flushed(sd, cache, start + 2);
    let held = sd.image(&*cache, block, &memory);
    written_and_flushed(sd, cache, start);
    let ready = sd.image(&*cache, block, &memory);
    assert_ne!(held, Image::Memory, "the inode written before its group's header counts its slot");
    assert_eq!(ready, Image::Memory, "the inode waits once the raised header is flushed");
}

/// The write check catches a new inode written past the slots its
/// group's header on the disk counts, its bit there or not.
#[test]
fn the_write_check_catches_a_new_inode_past_the_slots_its_header_counts() {
    let fs = fresh_softdep();
    fs.sync().unwrap();
    let (a, g, _) = past_the_counted_slots(&fs);
    let block = {
        let mut guard = fs.lock();
        let core = &mut *guard;
        let start = core.sb.group_start(g);
        let (sd, cache) = parts(core);
        written_and_flushed(sd, cache, start + 2);
        core.sb.inode_place(a).0
    };
    let broken = check_memory(&fs, block).expect_err("the header on the disk does not count the slot");
    assert!(broken.to_string().contains("header"), "{broken}");
    fs.sync().unwrap();
    assert_eq!(check_memory(&fs, block), Ok(()), "the raised header is on the disk now");
}

/// An fsync writes the bitmaps of the groups its file's blocks and inode
/// lie in, not another group's, which the other writers of a busy mount
/// keep dirty: a file in a directory of another group, written and not
/// synced, keeps its group's bitmaps dirty through the first's fsync.
#[test]
fn an_fsync_leaves_the_bitmaps_of_a_group_its_file_is_not_in() {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(400 << 20).unwrap());
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let fs = Ffs::mount(dev, &MountOptions { policy: Policy::Softdep, ..Default::default() }).unwrap();
    let dir = |name: &str| fs.mkdir(ROOT, OsStr::new(name), Owner::root(0o755)).unwrap().ino;
    let (a, b) = (dir("a"), dir("b"));
    fs.sync().unwrap();
    let file = |parent, byte| {
        let f = fs.create(parent, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
        fs.write(f, 0, &[byte; 8192]).unwrap();
        f
    };
    let (fa, fb) = (file(a, 1), file(b, 2));
    let sb = fs.lock().sb.clone();
    let group = |ino: u64| (ino as u32 - 1) / sb.inodes_per_group;
    assert_ne!(group(fa), group(fb), "the two directories' files lie in two groups");
    let (a_start, b_start) = (sb.group_start(group(fa)), sb.group_start(group(fb)));
    assert!(fs.lock().cache.is_dirty(b_start + 2), "b's file made its group's inode bitmap dirty");
    fs.fsync(fa, false).unwrap();
    let core = fs.lock();
    let dirty = |start: u64| [start + 1, start + 2].map(|b| core.cache.is_dirty(b));
    assert_eq!(dirty(b_start), [true, true], "b's group's bitmaps left for later");
    assert_eq!(dirty(a_start), [false, false], "a's group's bitmaps written");
}

/// A caller's flush returning late, after its writes were made durable
/// by a flush another call issued and a newer caller's flush is in
/// flight, changes nothing: the newer flush's writes still wait for it
/// (the first fsync to take the lock after a flush runs what waited on
/// it, and the flush's own issuer comes after).
#[test]
fn a_callers_flush_returning_late_leaves_the_newer_one_in_flight() {
    use crate::policy::CallerFlush;
    let fs = fresh_softdep();
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.sync().unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let (first, _) = core.order.seal_for_caller(&mut core.cache).unwrap();
    core.order.caller_flushed(&mut core.cache, first);
    drop(guard);
    fs.write(f, 0, &[7; 4096]).unwrap();
    let mut guard = fs.lock();
    let core = &mut *guard;
    let inode_block = core.sb.inode_place(f as u32).0;
    core.cache.write_listed(&mut core.order, &[inode_block]).unwrap();
    let need = core.order.next_seal();
    let (newer, _) = core.order.seal_for_caller(&mut core.cache).unwrap();
    assert_eq!(newer, need, "the newer seal covers the writes");
    core.order.caller_flushed(&mut core.cache, first);
    assert!(
        matches!(core.order.caller_flush(need), CallerFlush::InFlight(s, _) if s == newer),
        "the late return of the first flush ran what waits on the newer one"
    );
    core.order.caller_flushed(&mut core.cache, newer);
    assert!(matches!(core.order.caller_flush(need), CallerFlush::Done));
}
