//! The inode slots a group's header says were handed out
//! (`GroupHeader::inodes_initialized`): every policy raises the count
//! before an inode past it can reach the disk, whatever a crash keeps, and
//! fsck reads no inode table block past it, unless the header is damaged.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{
    CrashPoint, CrashPolicy, Device, Fault, FaultyDevice, MemDevice, Recording, RecordingDevice, Replayer,
};
use ffs::format::{DiskInode, GroupHeader, InodeSlot, Superblock, BLOCK_BYTES, INODE_BYTES};
use ffs::fsck::{fsck, Class, Repair};
use ffs::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};

use crate::common::assert_checks_clean;

const POLICIES: [Policy; 4] = [Policy::Sync, Policy::Softdep, Policy::Log, Policy::Async];
/// More than the first raise covers (256 slots), fewer than the group's.
const FILES: usize = 300;
const INODES: u64 = 1024;

/// A file system of one group of 1,024 inodes on 4 MiB.
fn small() -> (Arc<MemDevice>, Arc<dyn Device>) {
    let mem = Arc::new(MemDevice::new(4 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    mkfs(&dev, &MkfsOptions { inodes: Some(INODES), ..Default::default() }).unwrap();
    (mem, dev)
}

/// Empty files: no data block to take, so nothing but the inodes goes
/// far into the group.
fn make_files(fs: &Ffs, count: usize) {
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap().ino;
    for i in 0..count {
        fs.create(d, OsStr::new(&format!("f{i}")), Owner::root(0o644)).unwrap();
    }
}

fn header(dev: &Arc<dyn Device>, sb: &Superblock, g: u32) -> Result<GroupHeader, ffs::FieldFault> {
    let mut b = vec![0u8; BLOCK_BYTES];
    dev.read_at(&mut b, sb.group_start(g) * BLOCK_BYTES as u64).unwrap();
    GroupHeader::decode(&b, g, sb, "test")
}

/// The highest slot (plus one) of group `g` holding anything but a free
/// inode, as the disk has it.
fn slots_in_use(dev: &Arc<dyn Device>, sb: &Superblock, g: u32) -> u32 {
    let mut top = 0;
    let mut b = vec![0u8; BLOCK_BYTES];
    for i in 0..sb.inodes_per_group {
        let ino = g * sb.inodes_per_group + i + 1;
        let (block, at) = sb.inode_place(ino);
        if at == 0 {
            dev.read_at(&mut b, block * BLOCK_BYTES as u64).unwrap();
        }
        if DiskInode::decode(ino, &b[at..at + INODE_BYTES]) != InodeSlot::Free {
            top = i + 1;
        }
    }
    top
}

/// A fresh file system's first group header, changed by `change` and
/// sealed again (its checksum made to fit), with the superblock.
fn header_changed(change: impl FnOnce(&mut [u8])) -> (Superblock, Vec<u8>) {
    let (_, dev) = small();
    let sb = ffs::read_superblock(&dev).unwrap();
    let mut b = vec![0u8; BLOCK_BYTES];
    dev.read_at(&mut b, sb.group_start(0) * BLOCK_BYTES as u64).unwrap();
    change(&mut b);
    b[12..16].fill(0);
    let crc = crc32c::crc32c(&b[..512]);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    (sb, b)
}

#[test]
fn under_every_policy_each_inode_made_lies_within_the_slots_its_header_counts() {
    for policy in POLICIES {
        let (_, dev) = small();
        let fs = Ffs::mount(Arc::clone(&dev), &MountOptions { policy, ..Default::default() }).unwrap();
        make_files(&fs, FILES);
        fs.unmount().unwrap();
        let sb = ffs::read_superblock(&dev).unwrap();
        let h = header(&dev, &sb, 0).unwrap();
        let used = slots_in_use(&dev, &sb, 0);
        assert!(used > 256, "{policy:?}: the files went past the first raise ({used})");
        assert!(used <= h.inodes_initialized, "{policy:?}: slot {used} past {}", h.inodes_initialized);
        assert!(
            h.inodes_initialized < sb.inodes_per_group,
            "{policy:?}: {} of the table",
            h.inodes_initialized
        );
    }
}

/// Every image a crash could leave while `policy` hands out 300 inodes
/// (each write kept or not since the last flush, one of them torn: the
/// header and the table are one request when the cache writes them
/// together) holds no inode past the slots its header counts.
fn no_crash_leaves_an_inode_past_its_header(policy: Policy) {
    let (mem, dev) = small();
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let options = MountOptions { policy, cache_bytes: 1 << 20, ..Default::default() };
    let fs = Ffs::mount(recorded, &options).unwrap();
    make_files(&fs, FILES);
    fs.unmount().unwrap();
    let events = recording.events();
    let mut replayer = Replayer::new(events.clone(), vec![initial]);
    let mut past_first_raise = 0;
    for at in 0..=events.len() {
        let seed = at as u64;
        let torn = (0..16).map(|k| (CrashPolicy::TornWrite, seed * 16 + k));
        for (crash, seed) in
            [(CrashPolicy::KeepAll, 0), (CrashPolicy::KeepSubset, seed)].into_iter().chain(torn)
        {
            let image: Arc<dyn Device> = Arc::new(
                replayer.images_at(CrashPoint { after_events: at, policy: crash, seed }).unwrap().remove(0),
            );
            // Under `log`, what the log committed is home after a replay.
            if policy == Policy::Log {
                fsck(&image, Repair::Yes).unwrap();
            }
            let sb = ffs::read_superblock(&image).unwrap();
            let initialized = header(&image, &sb, 0).unwrap().inodes_initialized;
            let used = slots_in_use(&image, &sb, 0);
            assert!(used <= initialized, "{policy:?}, after event {at}: slot {used} past {initialized}");
            past_first_raise += u32::from(used > 256);
        }
    }
    assert!(past_first_raise > 0, "{policy:?}: some state holds an inode past the first raise");
}

#[test]
fn under_sync_no_crash_leaves_an_inode_past_the_slots_its_header_counts() {
    no_crash_leaves_an_inode_past_its_header(Policy::Sync);
}

#[test]
fn under_async_no_crash_leaves_an_inode_past_the_slots_its_header_counts() {
    no_crash_leaves_an_inode_past_its_header(Policy::Async);
}

#[test]
fn under_softdep_no_crash_leaves_an_inode_past_the_slots_its_header_counts() {
    no_crash_leaves_an_inode_past_its_header(Policy::Softdep);
}

#[test]
fn fsck_reads_no_inode_table_block_past_the_slots_handed_out() {
    let (_, dev) = small();
    let fs = Ffs::mount(Arc::clone(&dev), &MountOptions::default()).unwrap();
    make_files(&fs, 10);
    fs.unmount().unwrap();
    let sb = ffs::read_superblock(&dev).unwrap();
    let initialized = header(&dev, &sb, 0).unwrap().inodes_initialized;
    let (first, _) = sb.inode_place(initialized + 1);
    let (last, _) = sb.inode_place(sb.inodes_per_group);
    let range = first * BLOCK_BYTES as u64..(last + 1) * BLOCK_BYTES as u64;
    let faulty: Arc<dyn Device> = Arc::new(FaultyDevice::new(
        Arc::clone(&dev),
        vec![Fault::Range { range, reads: true, writes: false }],
    ));
    let report = fsck(&faulty, Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
    assert_eq!(report.inodes_checked, 13, "the root, lost+found, d and its 10 files");
}

#[test]
fn a_damaged_group_header_is_rewritten_counting_the_slots_its_table_holds() {
    let (_, dev) = small();
    let fs = Ffs::mount(Arc::clone(&dev), &MountOptions::default()).unwrap();
    make_files(&fs, FILES);
    fs.unmount().unwrap();
    let sb = ffs::read_superblock(&dev).unwrap();
    let at = sb.group_start(0) * BLOCK_BYTES as u64;
    let mut b = vec![0u8; 512];
    dev.read_at(&mut b, at).unwrap();
    b[44..48].fill(0xff);
    dev.write_at(&b, at).unwrap();
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(report.findings.iter().any(|f| f.class == Class::WrongSummaryCounts), "{:?}", report.findings);
    assert_eq!(report.inodes_checked as usize, FILES + 3, "every slot read");
    let h = header(&dev, &sb, 0).unwrap();
    assert_eq!(h.inodes_initialized, slots_in_use(&dev, &sb, 0).next_multiple_of(16));
    assert_checks_clean(&dev, "after the header was rewritten");
}

#[test]
fn a_version_1_group_header_reads_as_every_slot_handed_out() {
    let (sb, b) = header_changed(|b| {
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[44..48].fill(0);
    });
    let h = GroupHeader::decode(&b, 0, &sb, "test").unwrap();
    assert_eq!(h.inodes_initialized, sb.inodes_per_group);
}

#[test]
fn a_group_header_counting_slots_past_its_table_is_refused_naming_the_field() {
    let (sb, b) = header_changed(|b| b[44..48].copy_from_slice(&(INODES as u32 + 16).to_le_bytes()));
    let fault = GroupHeader::decode(&b, 0, &sb, "test").unwrap_err();
    assert!(fault.to_string().contains("inodes_initialized"), "{fault}");
}

#[test]
fn under_log_no_crash_leaves_an_inode_past_the_slots_its_header_counts() {
    no_crash_leaves_an_inode_past_its_header(Policy::Log);
}

/// Reads the device took while `work` ran.
fn reads_during(dev: &Arc<dyn Device>, work: impl FnOnce()) -> u64 {
    let before = dev.stats().snapshot().reads;
    work();
    dev.stats().snapshot().reads - before
}

/// A table block past the slots the header counted at the mount holds
/// zeros on the disk (the header's promise), so the inodes made there
/// cost no reads: past the 256 slots the mount found counted (16 table
/// blocks, read as they are used), 600 files read what 300 do.
#[test]
fn inodes_made_past_the_counted_slots_read_no_table_block() {
    let reads_for = |files: usize| {
        let (_mem, dev) = small();
        let fs = Ffs::mount(Arc::clone(&dev), &MountOptions { policy: Policy::Async, ..Default::default() })
            .unwrap();
        let reads = reads_during(&dev, || make_files(&fs, files));
        fs.unmount().unwrap();
        reads
    };
    assert_eq!(reads_for(600), reads_for(300));
}

/// A table block made as zeros, written and evicted is read when it is
/// used again, never taken as zeros a second time: with a cache of 64
/// blocks, every one of 2,000 files made (125 table blocks) is found
/// again, whole, in the same mount and after a remount.
#[test]
fn a_table_block_evicted_after_its_first_use_is_read_again() {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
    mkfs(&dev, &MkfsOptions { inodes: Some(4096), ..Default::default() }).unwrap();
    let options =
        MountOptions { policy: Policy::Async, cache_bytes: 64 * BLOCK_BYTES as u64, ..Default::default() };
    let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
    make_files(&fs, 2000);
    assert!(fs.cache_stats().evictions > 0, "the table does not fit in the cache");
    let d = fs.lookup(ROOT, OsStr::new("d")).unwrap().ino;
    for i in 0..2000 {
        let a = fs.lookup(d, OsStr::new(&format!("f{i}"))).unwrap_or_else(|e| panic!("f{i}: {e}"));
        assert_eq!((a.kind, a.perm, a.nlink), (fsapi::FileType::File, 0o644, 1), "f{i}");
    }
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "2,000 files through a 64-block cache");
    let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
    let d = fs.lookup(ROOT, OsStr::new("d")).unwrap().ino;
    for i in [0, 1000, 1999] {
        fs.lookup(d, OsStr::new(&format!("f{i}"))).unwrap_or_else(|e| panic!("f{i} after a remount: {e}"));
    }
    fs.unmount().unwrap();
}
