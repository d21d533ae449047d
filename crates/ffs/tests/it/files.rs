//! Files past the direct blocks, large directories, full file systems and
//! images that are not what they should be.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{Device, MemDevice};
use ffs::{mkfs, Ffs, FsError, MkfsOptions, MountOptions, Policy};
use fsapi::{Errno, FileSystem, Owner, SetAttr, ROOT};

use crate::common::{fresh, mount};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

fn read_all(fs: &dyn FileSystem, ino: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn a_file_through_its_single_and_double_indirect_blocks_reads_back_after_a_remount() {
    let dev = fresh(64 << 20);
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
    // Direct, single indirect (from 48 KiB) and double indirect (from 4.05 MiB).
    let places = [(0u64, 5000usize), (60 << 10, 9000), (5 << 20, 20_000), (20 << 20, 4096)];
    for (i, (at, len)) in places.iter().enumerate() {
        fs.write(f.ino, *at, &pattern(*len, i as u8)).unwrap();
    }
    fs.unmount().unwrap();
    let fs = mount(&dev, Policy::Async);
    let f = fs.lookup(ROOT, OsStr::new("big")).unwrap();
    assert_eq!(f.size, (20 << 20) + 4096);
    for (i, (at, len)) in places.iter().enumerate() {
        let mut buf = vec![0u8; *len];
        fs.read(f.ino, *at, &mut buf).unwrap();
        assert_eq!(buf, pattern(*len, i as u8), "piece {i}");
    }
    let mut hole = vec![1u8; 4096];
    fs.read(f.ino, 10 << 20, &mut hole).unwrap();
    assert!(hole.iter().all(|&b| b == 0), "a hole reads as zeros");
}

#[test]
fn truncating_a_large_file_gives_its_blocks_back() {
    let dev = fresh(64 << 20);
    let fs = mount(&dev, Policy::Sync);
    let free = fs.statfs().unwrap().blocks_free;
    let f = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &pattern(6 << 20, 1)).unwrap();
    assert!(fs.statfs().unwrap().blocks_free < free - 1536);
    fs.setattr(f.ino, &SetAttr { size: Some(1000), ..SetAttr::default() }).unwrap();
    assert_eq!(fs.statfs().unwrap().blocks_free, free - 1);
    assert_eq!(read_all(&fs, f.ino, 5000), pattern(1000, 1));
}

/// Indirect blocks freed whole keep their pointers (only a block kept in
/// part is cleared): under every policy, a file cut into its double
/// indirect range, then below it, then removed, leaves the rest whole, a
/// new file reusing the blocks reads back, and fsck finds nothing.
#[test]
fn indirect_blocks_freed_whole_are_reused_cleanly_under_every_policy() {
    for policy in [Policy::Sync, Policy::Softdep, Policy::Log, Policy::Async] {
        let dev = fresh(64 << 20);
        let fs = mount(&dev, policy);
        let free = fs.statfs().unwrap().blocks_free;
        let f = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &pattern(6 << 20, 1)).unwrap();
        for size in [(4 << 20) + (600 << 10), 100 << 10] {
            fs.setattr(f.ino, &SetAttr { size: Some(size), ..SetAttr::default() }).unwrap();
            assert_eq!(read_all(&fs, f.ino, 7 << 20), pattern(size as usize, 1), "{policy:?}");
        }
        fs.sync().unwrap();
        let g = fs.create(ROOT, OsStr::new("new"), Owner::root(0o644)).unwrap();
        fs.write(g.ino, 0, &pattern(6 << 20, 2)).unwrap();
        fs.unlink(ROOT, OsStr::new("big")).unwrap();
        fs.forget(f.ino, 1);
        fs.sync().unwrap();
        assert_eq!(read_all(&fs, g.ino, 7 << 20), pattern(6 << 20, 2), "{policy:?}");
        fs.unlink(ROOT, OsStr::new("new")).unwrap();
        fs.forget(g.ino, 1);
        fs.unmount().unwrap();
        assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().clean(), "{policy:?}");
        let fs = mount(&dev, policy);
        assert_eq!(fs.statfs().unwrap().blocks_free, free, "{policy:?}: every block given back");
        fs.unmount().unwrap();
    }
}

#[test]
fn a_directory_of_thousands_of_entries_is_listed_once_while_emptied() {
    let dev = fresh(64 << 20);
    let fs = mount(&dev, Policy::Async);
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
    for i in 0..3000 {
        let f = fs
            .create(d.ino, OsStr::new(&format!("file-with-a-longish-name-{i}")), Owner::root(0o644))
            .unwrap();
        fs.forget(f.ino, 1);
    }
    assert_eq!(
        fs.lookup(d.ino, OsStr::new("file-with-a-longish-name-2999")).unwrap().kind,
        fsapi::FileType::File
    );
    // rm -rf: read a batch, unlink it, continue from the cookie.
    let (mut offset, mut removed) = (0, 0);
    loop {
        let mut batch = Vec::new();
        fs.readdir(d.ino, offset, &mut |e| {
            batch.push(e);
            batch.len() < 100
        })
        .unwrap();
        let Some(last) = batch.last() else { break };
        offset = last.next;
        for e in &batch {
            fs.unlink(d.ino, OsStr::new(std::str::from_utf8(&e.name).unwrap())).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 3000);
    fs.rmdir(ROOT, OsStr::new("d")).unwrap();
}

#[test]
fn a_full_file_system_says_enospc_and_stays_usable() {
    let dev = fresh(8 << 20);
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(ROOT, OsStr::new("fill"), Owner::root(0o644)).unwrap();
    let chunk = pattern(1 << 20, 3);
    let mut at = 0u64;
    let err = loop {
        match fs.write(f.ino, at, &chunk) {
            Ok(n) if n == chunk.len() => at += n as u64,
            Ok(n) => at += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(err, Errno::NOSPC);
    assert_eq!(fs.statfs().unwrap().blocks_free, 0);
    fs.unlink(ROOT, OsStr::new("fill")).unwrap();
    fs.forget(f.ino, 1);
    fs.create(ROOT, OsStr::new("after"), Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
}

#[test]
fn a_device_without_a_file_system_is_named_as_such() {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(8 << 20).unwrap());
    let err = Ffs::mount(dev, &MountOptions::default()).err().unwrap();
    assert!(matches!(err, FsError::NotAFileSystem), "{err}");
}

#[test]
fn a_damaged_superblock_falls_back_to_the_other_slot() {
    let dev = fresh(8 << 20);
    mount(&dev, Policy::Async).unmount().unwrap();
    let newest = ffs::read_superblock_slots(&dev).unwrap();
    assert_eq!(newest.passed_over, None, "both slots pass after an unmount");
    // Damage the newest slot: the older one is taken, and the damage named.
    dev.write_at(&[0xee; 512], u64::from(newest.slot) * 4096).unwrap();
    let older = ffs::read_superblock_slots(&dev).unwrap();
    assert_eq!(older.superblock.generation, newest.superblock.generation - 1);
    let fault = older.passed_over.as_ref().unwrap();
    assert_eq!((fault.place, fault.field), (ffs::Place::SuperblockSlot(newest.slot), "magic"), "{fault}");
    assert!(older.passed_over_text().unwrap().contains("is used instead"));
}

#[test]
fn a_damaged_group_header_is_refused_at_mount() {
    let dev = fresh(8 << 20);
    let sb = ffs::read_superblock(&dev).unwrap();
    dev.write_at(&[0x55; 512], sb.group_start(0) * 4096).unwrap();
    let err = Ffs::mount(dev, &MountOptions::default()).err().unwrap();
    assert!(err.to_string().contains("group 0"), "{err}");
}

#[test]
fn names_over_255_bytes_are_refused() {
    let dev = fresh(8 << 20);
    let fs = mount(&dev, Policy::Async);
    let long = "n".repeat(256);
    assert_eq!(fs.create(ROOT, OsStr::new(&long), Owner::root(0o644)).err(), Some(Errno::NAMETOOLONG));
    let max = "n".repeat(255);
    fs.create(ROOT, OsStr::new(&max), Owner::root(0o644)).unwrap();
}

/// Files and directories spread over several groups, removed: under
/// every policy their inodes and blocks are free again and counted once
/// (soft updates frees a flush's worth together, each group's maps
/// changed once), and fsck finds nothing.
#[test]
fn removing_a_tree_over_several_groups_frees_everything_it_held() {
    for policy in [Policy::Async, Policy::Softdep, Policy::Log, Policy::Sync] {
        let dev = fresh(320 << 20);
        let fs = mount(&dev, policy);
        let before = fs.statfs().unwrap();
        for i in 0..12 {
            let d = fs.mkdir(ROOT, OsStr::new(&format!("d{i}")), Owner::root(0o755)).unwrap();
            for j in 0..5 {
                let f = fs.create(d.ino, OsStr::new(&format!("f{j}")), Owner::root(0o644)).unwrap();
                fs.write(f.ino, 0, &vec![7u8; 9000 * (j + 1)]).unwrap();
                fs.forget(f.ino, 1);
            }
            fs.forget(d.ino, 1);
        }
        fs.sync().unwrap();
        for i in 0..12 {
            let d = fs.lookup(ROOT, OsStr::new(&format!("d{i}"))).unwrap();
            for j in 0..5 {
                fs.unlink(d.ino, OsStr::new(&format!("f{j}"))).unwrap();
            }
            fs.forget(d.ino, 1);
            fs.rmdir(ROOT, OsStr::new(&format!("d{i}"))).unwrap();
        }
        fs.sync().unwrap();
        let after = fs.statfs().unwrap();
        assert_eq!(
            (after.blocks_free, after.files_free),
            (before.blocks_free, before.files_free),
            "{policy:?}"
        );
        fs.unmount().unwrap();
        assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().clean(), "{policy:?}");
    }
}

#[test]
fn a_file_system_of_several_groups_is_made_and_checks_clean() {
    let dev = fresh(320 << 20);
    let sb = ffs::read_superblock(&dev).unwrap();
    assert!(sb.groups > 1, "{} groups", sb.groups);
    assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().clean());
    let fs = mount(&dev, Policy::Async);
    for i in 0..20 {
        let d = fs.mkdir(ROOT, OsStr::new(&format!("d{i}")), Owner::root(0o755)).unwrap();
        fs.create(d.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
    }
    fs.unmount().unwrap();
    assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().clean());
}

#[test]
fn the_syncer_writes_back_what_is_older_than_its_age_and_nothing_younger() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(fsapi::ROOT, std::ffi::OsStr::new("f"), fsapi::Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &pattern(40_000, 3)).unwrap();
    let before = dev.stats().snapshot().writes;
    // Nothing has been dirty for an hour: the pass writes nothing.
    assert_eq!(fs.write_back_older(std::time::Duration::from_secs(3600)).unwrap(), 0);
    assert_eq!(dev.stats().snapshot().writes, before);
    // Everything dirty is older than zero: the pass writes it all, once.
    let written = fs.write_back_older(std::time::Duration::ZERO).unwrap();
    assert!(written >= 10, "the file's ten blocks and its metadata: {written}");
    assert!(dev.stats().snapshot().writes > before);
    assert_eq!(fs.write_back_older(std::time::Duration::ZERO).unwrap(), 0, "clean now");
}

/// `a` written and synced, removed; `b` made and written in its place;
/// everything written back, nothing flushed or committed; then a crash.
fn a_removed_then_b_written(policy: Policy) -> Arc<dyn Device> {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, policy);
    let a = fs.create(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o644)).unwrap();
    fs.write(a.ino, 0, &pattern(40_000, 1)).unwrap();
    fs.forget(a.ino, 1);
    fs.sync().unwrap();
    fs.unlink(fsapi::ROOT, OsStr::new("a")).unwrap();
    let b = fs.create(fsapi::ROOT, OsStr::new("b"), fsapi::Owner::root(0o644)).unwrap();
    fs.write(b.ino, 0, &pattern(40_000, 2)).unwrap();
    fs.write_back_older(std::time::Duration::ZERO).unwrap();
    drop(fs);
    dev
}

#[test]
fn under_log_blocks_freed_since_the_last_commit_are_not_reused_before_it() {
    use std::ffi::OsStr;
    // Removed, not committed: a crash now must still find a whole. b's
    // data went in place (outside the log); its metadata joined the open
    // transaction, which the crash never commits.
    let dev = a_removed_then_b_written(Policy::Log);
    let fs = mount(&dev, Policy::Async);
    let a = fs.lookup(fsapi::ROOT, OsStr::new("a")).expect("the removal was never committed");
    assert!(
        read_all(&fs, a.ino, 40_000) == pattern(40_000, 1),
        "a's blocks were given to b before the commit"
    );
}

#[test]
fn under_log_a_crash_after_a_commit_leaves_nothing_for_fsck() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    for i in 0..50 {
        let f = fs.create(fsapi::ROOT, OsStr::new(&format!("f{i}")), fsapi::Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &pattern(9_000, i as u8)).unwrap();
        fs.forget(f.ino, 1);
    }
    fs.sync().unwrap();
    fs.mkdir(fsapi::ROOT, OsStr::new("uncommitted"), fsapi::Owner::root(0o755)).unwrap();
    drop(fs); // a crash: the superblock says mounted, the metadata is in the log
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    assert!(report.replayed_commits > 0 && report.findings.is_empty(), "{report:?}");
    let fs = mount(&dev, Policy::Async);
    assert!(fs.lookup(fsapi::ROOT, OsStr::new("f49")).is_ok());
    assert!(fs.lookup(fsapi::ROOT, OsStr::new("uncommitted")).is_err());
}

#[test]
fn mkfs_over_a_file_system_whose_log_holds_commits_replays_none_of_them() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    for i in 0..20 {
        fs.mkdir(fsapi::ROOT, OsStr::new(&format!("old{i}")), fsapi::Owner::root(0o755)).unwrap();
    }
    fs.sync().unwrap();
    drop(fs); // a crash: the log holds commits not yet home
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    assert_eq!((report.replayed_commits, report.findings.len()), (0, 0), "{report:?}");
    let fs = mount(&dev, Policy::Log);
    assert!(fs.lookup(fsapi::ROOT, OsStr::new("old0")).is_err(), "the old file system's log was replayed");
}

/// A file unlinked while open, then a crash: the orphan list carries it.
fn crash_with_an_open_unlinked_file(policy: Policy) -> (Arc<dyn Device>, u64) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, policy);
    let free_before = fs.statfs().unwrap().files_free;
    let f = fs.create(ROOT, OsStr::new("open"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &pattern(50_000, 9)).unwrap();
    fs.unlink(ROOT, OsStr::new("open")).unwrap(); // still held: an orphan
    fs.sync().unwrap();
    drop(fs); // the crash, with the file still open
    (dev, free_before)
}

#[test]
fn an_open_unlinked_file_left_by_a_crash_is_no_finding_and_the_next_mount_frees_it() {
    for policy in [Policy::Log, Policy::Sync, Policy::Async] {
        let (dev, free_before) = crash_with_an_open_unlinked_file(policy);
        // As an administrator after a crash: preen (which finds nothing
        // and marks the image clean), then mount.
        let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::Preen).unwrap();
        assert!(report.findings.is_empty(), "{policy:?}: {:?}", report.findings);
        let fs = mount(&dev, Policy::Async);
        assert_eq!(
            fs.statfs().unwrap().files_free,
            free_before,
            "{policy:?}: the orphan's inode is free again"
        );
        fs.unmount().unwrap();
        let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
        assert!(report.findings.is_empty(), "{policy:?} after the mount: {:?}", report.findings);
    }
}

#[test]
fn an_orphan_closed_before_the_unmount_leaves_the_list_empty() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    let held: Vec<_> = (0..3)
        .map(|i| {
            let name = format!("o{i}");
            let f = fs.create(ROOT, OsStr::new(&name), Owner::root(0o644)).unwrap();
            fs.unlink(ROOT, OsStr::new(&name)).unwrap();
            f.ino
        })
        .collect();
    fs.forget(held[1], 1); // the middle of the list goes first
    fs.forget(held[0], 1);
    fs.forget(held[2], 1);
    let sb = fs.unmount().unwrap().superblock;
    assert_eq!(sb.orphans, 0);
    assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().findings.is_empty());
}

/// fsck -n's findings on `dev`, every one a leak (what soft updates may
/// leave after a crash).
pub(crate) fn only_leaks(dev: &std::sync::Arc<dyn device::Device>) -> Vec<&'static str> {
    let report = ffs::fsck::fsck(dev, ffs::fsck::Repair::No).unwrap();
    let beyond: Vec<_> = report.findings.iter().filter(|f| !f.class.is_leak()).collect();
    assert!(beyond.is_empty(), "{beyond:?}");
    report.findings.iter().map(|f| f.class.name()).collect()
}

#[test]
fn under_softdep_an_entry_is_not_written_before_its_inode() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let a = fs.create(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o644)).unwrap();
    fs.forget(a.ino, 1);
    // Everything written once, nothing flushed: the inode's bitmap is not
    // on the disk, so neither the inode nor the entry naming it may be.
    fs.write_back_older(std::time::Duration::ZERO).unwrap();
    drop(fs);
    assert!(only_leaks(&dev).contains(&"leaked_inode"));
    let fs = mount(&dev, Policy::Async);
    assert!(fs.lookup(fsapi::ROOT, OsStr::new("a")).is_err(), "the entry went before its inode");
}

/// `op` under `softdep` on `dev` (unmounted), then one write-back and no
/// flush: whatever part of it a power cut keeps (64 subsets), fsck finds
/// nothing but leaks.
pub(crate) fn leaks_only_whatever_a_crash_keeps(
    dev: &std::sync::Arc<dyn device::Device>,
    op: &dyn Fn(&ffs::Ffs),
) {
    use std::sync::Arc;
    let crash = Arc::new(device::CrashDevice::new(Arc::clone(dev)).unwrap());
    let fs = mount(&(crash.clone() as Arc<dyn device::Device>), Policy::Softdep);
    op(&fs);
    fs.write_back_older(std::time::Duration::ZERO).unwrap();
    for seed in 0..64 {
        let image = crash.crash(device::CrashPolicy::KeepSubset, seed).unwrap().image;
        only_leaks(&(Arc::new(image) as Arc<dyn device::Device>));
    }
}

#[test]
fn under_softdep_a_directory_moved_leaves_only_leaks_whatever_part_of_a_write_back_a_crash_keeps() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let a = fs.mkdir(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o755)).unwrap();
    let b = fs.mkdir(fsapi::ROOT, OsStr::new("b"), fsapi::Owner::root(0o755)).unwrap();
    fs.mkdir(a.ino, OsStr::new("x"), fsapi::Owner::root(0o755)).unwrap();
    fs.unmount().unwrap();
    // x moves under b: b's count rises for x's `..`, a's drops, x's
    // entry goes from a to b. One write-back, no flush, and a power cut
    // keeping any part of it.
    leaks_only_whatever_a_crash_keeps(&dev, &|fs| {
        fs.rename(a.ino, OsStr::new("x"), b.ino, OsStr::new("x")).unwrap();
    });
}

#[test]
fn under_softdep_a_parent_keeps_its_count_until_the_removed_directorys_entry_is_off_the_disk() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let p = fs.mkdir(fsapi::ROOT, OsStr::new("p"), fsapi::Owner::root(0o755)).unwrap();
    fs.mkdir(p.ino, OsStr::new("d"), fsapi::Owner::root(0o755)).unwrap();
    fs.unmount().unwrap();
    // rmdir p/d; one write-back, no flush, and a power cut keeping any
    // part of it: p's lowered count may not be there while d's entry is.
    leaks_only_whatever_a_crash_keeps(&dev, &|fs| {
        fs.rmdir(p.ino, OsStr::new("d")).unwrap();
    });
}

#[test]
fn under_softdep_a_parent_keeps_its_count_until_a_directory_a_rename_replaced_is_off_the_disk() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let p = fs.mkdir(fsapi::ROOT, OsStr::new("p"), fsapi::Owner::root(0o755)).unwrap();
    fs.mkdir(p.ino, OsStr::new("x"), fsapi::Owner::root(0o755)).unwrap();
    fs.mkdir(p.ino, OsStr::new("y"), fsapi::Owner::root(0o755)).unwrap();
    fs.unmount().unwrap();
    // p/x over p/y: p loses y's `..`, but not on the disk while y's entry
    // is there, whatever part of the write-back a power cut keeps.
    leaks_only_whatever_a_crash_keeps(&dev, &|fs| {
        fs.rename(p.ino, OsStr::new("x"), p.ino, OsStr::new("y")).unwrap();
    });
}

#[test]
fn under_softdep_a_removed_file_keeps_its_blocks_until_the_removal_is_on_the_disk() {
    use std::ffi::OsStr;
    // A crash before any flush: a's inode may still be on the disk.
    let dev = a_removed_then_b_written(Policy::Softdep);
    only_leaks(&dev);
    let fs = mount(&dev, Policy::Async);
    if let Ok(a) = fs.lookup(fsapi::ROOT, OsStr::new("a")) {
        assert!(read_all(&fs, a.ino, 40_000) == pattern(40_000, 1), "a's blocks were given to b");
    }
}

#[test]
fn under_softdep_sync_leaves_a_clean_image_behind_a_deep_tree() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let mut parent = fsapi::ROOT;
    for depth in 0..12 {
        let d = fs.mkdir(parent, OsStr::new(&format!("d{depth}")), fsapi::Owner::root(0o755)).unwrap();
        let f = fs.create(d.ino, OsStr::new("f"), fsapi::Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &pattern(5_000, depth as u8)).unwrap();
        parent = d.ino;
    }
    fs.sync().unwrap();
    drop(fs); // a crash right after sync returned: nothing may be missing
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
}

#[test]
fn under_softdep_blocks_a_truncation_freed_stay_taken_while_the_disk_inode_points_to_them() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let a = fs.create(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o644)).unwrap();
    fs.write(a.ino, 0, &pattern(40_000, 1)).unwrap();
    fs.sync().unwrap();
    let before = fs.statfs().unwrap().blocks_free;
    fs.setattr(a.ino, &SetAttr { size: Some(0), ..SetAttr::default() }).unwrap();
    fs.unlink(fsapi::ROOT, OsStr::new("a")).unwrap();
    fs.forget(a.ino, 1);
    // One syncer pass: the removal reaches the disk, and the freed inode
    // is written as the disk had it (its entry was still there), pointers
    // and all: its old blocks are not free yet.
    fs.tick(std::time::Duration::ZERO).unwrap();
    assert_eq!(
        fs.statfs().unwrap().blocks_free,
        before,
        "blocks released while the disk inode points to them"
    );
    fs.sync().unwrap();
    assert!(fs.statfs().unwrap().blocks_free >= before + 10, "the blocks never came back");
    drop(fs);
    assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().clean());
}

#[test]
fn under_softdep_directories_removed_while_held_are_gone_after_unmount() {
    use std::ffi::OsStr;
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let src = fs.mkdir(fsapi::ROOT, OsStr::new("src"), fsapi::Owner::root(0o755)).unwrap();
    for i in 0..25 {
        let d = fs.mkdir(src.ino, OsStr::new(&format!("d{i}")), fsapi::Owner::root(0o755)).unwrap();
        let f = fs.create(d.ino, OsStr::new("f"), fsapi::Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &pattern(3_000, i as u8)).unwrap();
    }
    fs.unmount().unwrap();
    // As rm -rf through the kernel: every inode still looked up while
    // its entry goes.
    let fs = mount(&dev, Policy::Softdep);
    let src = fs.lookup(fsapi::ROOT, OsStr::new("src")).unwrap();
    for i in 0..25 {
        let d = fs.lookup(src.ino, OsStr::new(&format!("d{i}"))).unwrap();
        fs.lookup(d.ino, OsStr::new("f")).unwrap();
        fs.unlink(d.ino, OsStr::new("f")).unwrap();
        fs.rmdir(src.ino, OsStr::new(&format!("d{i}"))).unwrap();
    }
    fs.rmdir(fsapi::ROOT, OsStr::new("src")).unwrap();
    fs.unmount().unwrap();
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
}

/// Twenty-four directories of twenty-four small files under `softdep`
/// with a cache of 64 blocks: more new inodes and directory blocks than
/// half of it holds, so that the cache checkpoints while the calls go on.
/// Stops at the first call that fails.
fn many_small_files(fs: &Ffs) -> Result<(), Errno> {
    for d in 0..24 {
        let dir = fs.mkdir(ROOT, OsStr::new(&format!("d{d}")), Owner::root(0o755))?;
        for f in 0..24 {
            let file = fs.create(dir.ino, OsStr::new(&format!("f{f}")), Owner::root(0o644))?;
            fs.write(file.ino, 0, &small_file(d, f))?;
            fs.forget(file.ino, 1);
        }
        fs.forget(dir.ino, 1);
    }
    Ok(())
}

fn small_file(d: usize, f: usize) -> Vec<u8> {
    vec![(d * 24 + f) as u8; (d * 37 + f * 101) % 1_500 + 1]
}

fn small_cache_softdep(dev: &Arc<dyn Device>) -> Ffs {
    let options = MountOptions { policy: Policy::Softdep, cache_bytes: 256 << 10, ..Default::default() };
    Ffs::mount(Arc::clone(dev), &options).unwrap()
}

/// Checkpoints flushed on the flusher thread while the calls went on,
/// before any sync; after the unmount every file is whole and fsck finds
/// nothing.
#[test]
fn softdep_checkpoints_behind_the_calls_keep_every_file() {
    let dev = fresh(32 << 20);
    let fs = small_cache_softdep(&dev);
    many_small_files(&fs).unwrap();
    assert!(fs.cache_stats().flushes > 0, "the cache checkpointed before any sync");
    fs.unmount().unwrap();
    assert!(ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap().clean());
    let fs = small_cache_softdep(&dev);
    for d in 0..24 {
        let dir = fs.lookup(ROOT, OsStr::new(&format!("d{d}"))).unwrap();
        for f in 0..24 {
            let file = fs.lookup(dir.ino, OsStr::new(&format!("f{f}"))).unwrap();
            let want = small_file(d, f);
            let mut got = vec![0u8; 2 * want.len()];
            let n = fs.read(file.ino, 0, &mut got).unwrap();
            assert_eq!(&got[..n], &want[..], "d{d}/f{f}");
        }
    }
}

/// A checkpoint's flush fails on the flusher thread: the failure reaches
/// the calls after it (at the latest the sync, which waits for it), and
/// the file system takes no more changes rather than retrying it.
#[test]
fn a_failed_flush_behind_the_calls_stops_the_file_system() {
    let mem = fresh(32 << 20);
    // The mount's superblock is flushed first; the first checkpoint's is
    // next (the test above shows this workload checkpoints before any
    // sync).
    let fault = device::Fault::Nth { op: device::Op::Flush, n: 2 };
    let dev: Arc<dyn Device> = Arc::new(device::FaultyDevice::new(mem, vec![fault]));
    let fs = small_cache_softdep(&dev);
    let _ = many_small_files(&fs);
    assert!(fs.sync().is_err(), "the failed flush is reported");
    let err = fs.create(ROOT, OsStr::new("late"), Owner::root(0o644)).unwrap_err();
    assert_eq!(err, Errno::IO);
}

/// Under `softdep` beside a flusher thread (the default), the freed
/// blocks of removed directories go out on a thread of their own while
/// the removal goes on. Each must be on the device before the flush its
/// removals wait for: recorded, the removal of a tree through a small
/// cache leaves only leaks after a crash at any flush, whatever part of
/// the later writes the crash keeps.
#[test]
fn under_softdep_a_tree_removed_beside_a_flusher_thread_leaves_only_leaks_at_every_flush() {
    use device::{CrashPoint, CrashPolicy, Event, Recording, RecordingDevice, Replayer};
    let (tops, subs) = (8, 30);
    let mem = Arc::new(MemDevice::new(32 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let fs = mount(&dev, Policy::Async);
    for i in 0..tops {
        let d = fs.mkdir(ROOT, OsStr::new(&format!("d{i}")), Owner::root(0o755)).unwrap();
        for j in 0..subs {
            let e = fs.mkdir(d.ino, OsStr::new(&format!("e{j}")), Owner::root(0o755)).unwrap();
            let f = fs.create(e.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
            fs.write(f.ino, 0, &pattern(3_000, j as u8)).unwrap();
        }
    }
    fs.unmount().unwrap();
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();

    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let options = MountOptions { policy: Policy::Softdep, cache_bytes: 256 << 10, ..Default::default() };
    let fs = Ffs::mount(recorded, &options).unwrap();
    for i in 0..tops {
        let d = fs.lookup(ROOT, OsStr::new(&format!("d{i}"))).unwrap();
        for j in 0..subs {
            let e = fs.lookup(d.ino, OsStr::new(&format!("e{j}"))).unwrap();
            fs.unlink(e.ino, OsStr::new("f")).unwrap();
            fs.forget(e.ino, 1);
            fs.rmdir(d.ino, OsStr::new(&format!("e{j}"))).unwrap();
        }
        fs.forget(d.ino, 1);
        fs.rmdir(ROOT, OsStr::new(&format!("d{i}"))).unwrap();
    }
    fs.unmount().unwrap();

    let events = recording.events();
    let flushes: Vec<usize> = (events.iter().enumerate())
        .filter(|(_, e)| matches!(e, Event::Flush { .. }))
        .map(|(i, _)| i)
        .collect();
    assert!(flushes.len() >= 4, "{} flushes: the cache never checkpointed", flushes.len());
    let mut replayer = Replayer::new(events, vec![initial]);
    // Just before each flush: any part of the writes since the last.
    for (k, &at) in flushes.iter().enumerate() {
        for seed in 0..4 {
            let point =
                CrashPoint { after_events: at, policy: CrashPolicy::KeepSubset, seed: 4 * k as u64 + seed };
            let image = replayer.images_at(point).unwrap().remove(0);
            only_leaks(&(Arc::new(image) as Arc<dyn Device>));
        }
    }
}

/// A sparse image whose host file system fills up: the write-back that
/// finds no room fails the call with ENOSPC, not EIO, under every policy;
/// the file system still stops taking changes (what reached the image is
/// unknown), every later change, sync and the unmount fail, and each says
/// the host was out of space.
#[test]
fn a_host_out_of_room_fails_the_calls_with_enospc_and_still_stops_the_file_system() {
    for policy in [Policy::Sync, Policy::Softdep, Policy::Log, Policy::Async] {
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(32 << 20).unwrap());
        mkfs(&mem, &MkfsOptions::default()).unwrap();
        let full = Arc::new(device::FaultyDevice::new(mem, vec![device::Fault::NoSpace { after: 40 }]));
        let fs = mount(&(full as Arc<dyn Device>), policy);
        let data = pattern(256 << 10, 3);
        let failed = (0..64).find_map(|i| {
            let made = fs.create(ROOT, OsStr::new(&format!("f{i}")), Owner::root(0o644));
            made.and_then(|f| fs.write(f.ino, 0, &data)).err()
        });
        assert_eq!(failed, Some(Errno::NOSPC), "{policy:?}: the call that found the host full");
        let failure = fs.failure().expect("the file system stopped");
        assert!(failure.out_of_space, "{policy:?}: {}", failure.cause);
        let late = fs.create(ROOT, OsStr::new("late"), Owner::root(0o644)).unwrap_err();
        assert_eq!(late, Errno::NOSPC, "{policy:?}: no change after the failure");
        assert_eq!(fs.sync().unwrap_err(), Errno::NOSPC, "{policy:?}");
        let err = fs.unmount().unwrap_err();
        assert!(err.is_out_of_space(), "{policy:?}: {err}");
    }
}

/// In a set-group-ID directory what is made takes the directory's group,
/// and a new directory the bit too, as the model does (`Owner::under`),
/// and both stay so across a remount.
#[test]
fn a_setgid_directory_gives_its_group_and_its_bit_as_the_model_does() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let model = fsapi::ModelFs::new();
    let creator = Owner { perm: 0o644, uid: 5, gid: 5 };
    let mut made = Vec::new();
    for fs in [&fs as &dyn FileSystem, &model] {
        let shared = fs.mkdir(ROOT, OsStr::new("shared"), Owner { perm: 0o2775, uid: 0, gid: 42 }).unwrap();
        let file = fs.create(shared.ino, OsStr::new("f"), creator).unwrap();
        let dir = fs.mkdir(shared.ino, OsStr::new("d"), Owner { perm: 0o755, ..creator }).unwrap();
        let node = fs.mknod(shared.ino, OsStr::new("p"), fsapi::FileType::Fifo, 0, creator).unwrap();
        made.push([(file.gid, file.perm), (dir.gid, dir.perm), (node.gid, node.perm)]);
    }
    assert_eq!(made[0], [(42, 0o644), (42, 0o2755), (42, 0o644)]);
    assert_eq!(made[0], made[1], "ffs and the model agree");
    fs.unmount().unwrap();
    let fs = mount(&dev, Policy::Softdep);
    let shared = fs.lookup(ROOT, OsStr::new("shared")).unwrap();
    let dir = fs.lookup(shared.ino, OsStr::new("d")).unwrap();
    assert_eq!((dir.gid, dir.perm), (42, 0o2755));
}
