//! fsck against injected damage: each class is found, preen repairs the
//! safe ones only, `-y` everything, and a repaired image checks clean.

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::format::{Superblock, INODE_BYTES};
use ffs::fsck::{fsck, Class, Repair};
use ffs::Policy;
use fsapi::{FileSystem, Owner, ROOT};

use crate::common::{assert_checks_clean, fresh, mount};

/// A small populated image: /d/f (with data) and /g, unmounted.
fn populated() -> (Arc<dyn Device>, u64, u64) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
    let f = fs.create(d.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &[7u8; 10_000]).unwrap();
    fs.create(ROOT, OsStr::new("g"), Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
    (dev, d.ino, f.ino)
}

fn sb(dev: &Arc<dyn Device>) -> Superblock {
    ffs::read_superblock(dev).unwrap()
}

/// Applies `edit` to the 256 bytes of inode `ino`, fixing its checksum.
fn edit_inode(dev: &Arc<dyn Device>, ino: u32, edit: impl FnOnce(&mut ffs::format::DiskInode)) {
    let (block, at) = sb(dev).inode_place(ino);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    let ffs::format::InodeSlot::Used(mut inode) =
        ffs::format::DiskInode::decode(ino, &buf[at..at + INODE_BYTES])
    else {
        panic!("inode {ino} in use")
    };
    edit(&mut inode);
    inode.encode(ino, &mut buf[at..at + INODE_BYTES]);
    dev.write_at(&buf, block * 4096).unwrap();
}

fn classes(dev: &Arc<dyn Device>, repair: Repair) -> Vec<Class> {
    let mut c: Vec<Class> = fsck(dev, repair).unwrap().findings.iter().map(|f| f.class).collect();
    c.dedup();
    c
}

#[test]
fn a_fresh_file_system_checks_clean() {
    let dev = fresh(16 << 20);
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

#[test]
fn a_link_count_too_high_is_found_and_preened() {
    let (dev, _, f) = populated();
    edit_inode(&dev, f as u32, |i| i.nlink = 3);
    assert_eq!(classes(&dev, Repair::No), vec![Class::LinkCountTooHigh]);
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

/// Preen leaves a class for `-y` as it found it, even when it writes
/// other repairs: the damaged pointer stays on the disk, no count is
/// "repaired" around it, and the report says it is left.
#[test]
fn preen_leaves_a_bad_block_pointer_on_the_disk_while_it_writes_other_repairs() {
    let (dev, _, f) = populated();
    let g = {
        let fs = mount(&dev, Policy::Async);
        let g = fs.lookup(ROOT, OsStr::new("g")).unwrap().ino;
        fs.unmount().unwrap();
        g
    };
    let kept = crate::common::stored(&dev, f).direct[1];
    edit_inode(&dev, f as u32, |i| i.direct[0] = 1);
    edit_inode(&dev, g as u32, |i| i.nlink = 3);
    let preen = fsck(&dev, Repair::Preen).unwrap();
    let found: Vec<(Class, bool)> = preen.findings.iter().map(|f| (f.class, f.repaired)).collect();
    assert!(found.contains(&(Class::BadBlockPointer, false)), "{found:?}");
    assert!(found.contains(&(Class::LinkCountTooHigh, true)), "{found:?}");
    assert!(!found.iter().any(|&(c, _)| c == Class::WrongBlockCount), "{found:?}");
    assert!(preen.damage_left());
    let stored = crate::common::stored(&dev, f);
    assert_eq!((stored.direct[0], stored.direct[1]), (1, kept), "the pointer left as it was");
    assert_eq!(
        classes_of(&fsck(&dev, Repair::No).unwrap()),
        vec![Class::BadBlockPointer, Class::WrongBlockCount]
    );
    repairs_and_converges(&dev);
}

fn classes_of(report: &ffs::fsck::Report) -> Vec<Class> {
    report.findings.iter().map(|f| f.class).collect()
}

#[test]
fn a_leaked_block_is_found_and_preened() {
    let (dev, _, _) = populated();
    let s = sb(&dev);
    let map_block = s.group_start(0) + 1;
    let mut map = vec![0u8; 4096];
    dev.read_at(&mut map, map_block * 4096).unwrap();
    map[300] = 0xff; // blocks 2400-2407 of the group: past anything allocated
    dev.write_at(&map, map_block * 4096).unwrap();
    assert!(classes(&dev, Repair::No).contains(&Class::LeakedBlock));
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

#[test]
fn an_entry_naming_a_free_inode_needs_yes() {
    let (dev, _, f) = populated();
    let (block, at) = sb(&dev).inode_place(f as u32);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at..at + INODE_BYTES].fill(0);
    dev.write_at(&buf, block * 4096).unwrap();
    assert!(classes(&dev, Repair::No).contains(&Class::EntryNamingFreeInode));
    assert!(fsck(&dev, Repair::Preen).unwrap().damage_left(), "preen leaves it to a person");
    assert!(!fsck(&dev, Repair::Yes).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

#[test]
fn a_block_claimed_twice_is_found() {
    let (dev, d, f) = populated();
    let mut first = 0;
    edit_inode(&dev, f as u32, |i| first = i.direct[0]);
    edit_inode(&dev, d as u32, |i| {
        i.direct[1] = first;
        i.blocks_512 += 8;
    });
    assert!(classes(&dev, Repair::No).contains(&Class::BlockClaimedTwice));
}

#[test]
fn a_garbage_inode_is_found() {
    let (dev, _, f) = populated();
    let (block, at) = sb(&dev).inode_place(f as u32);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at + 20] ^= 0xff; // the checksum no longer matches
    dev.write_at(&buf, block * 4096).unwrap();
    assert!(classes(&dev, Repair::No).contains(&Class::GarbageInode));
}

/// Blanks the entry `name` of directory `dir` in place (its inode stays).
fn blank_entry(dev: &Arc<dyn Device>, dir: u64, name: &str) {
    let fs = mount(dev, Policy::Async);
    fs.getattr(dir).unwrap();
    fs.unmount().unwrap();
    edit_entry(dev, dir as u32, name, |rec| rec[..4].fill(0));
}

/// Applies `edit` to the bytes of directory `dir`'s entry `name` (in its
/// first block, from the record's start), written back as damage would.
fn edit_entry(dev: &Arc<dyn Device>, dir: u32, name: &str, edit: impl FnOnce(&mut [u8])) {
    let (block, at) = sb(dev).inode_place(dir);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    let ffs::format::InodeSlot::Used(inode) = ffs::format::DiskInode::decode(dir, &buf[at..at + INODE_BYTES])
    else {
        panic!("directory {dir}")
    };
    let data = u64::from(inode.direct[0]) * 4096;
    let mut bytes = vec![0u8; 4096];
    dev.read_at(&mut bytes, data).unwrap();
    let mut pos = 0;
    while pos < 4096 {
        let rec = ffs::format::DirRecord::read(&bytes, pos).unwrap();
        if rec.name == name.as_bytes() {
            edit(&mut bytes[pos..]);
            dev.write_at(&bytes, data).unwrap();
            return;
        }
        pos += rec.reclen as usize;
    }
    panic!("no entry {name}");
}

#[test]
fn an_unattached_empty_file_is_preened_away() {
    let (dev, _, _) = populated();
    blank_entry(&dev, ROOT, "g");
    assert!(classes(&dev, Repair::No).contains(&Class::UnattachedInode));
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

/// An empty file can hold blocks past its end (fallocate's keep-size):
/// cleared, it gives them back too, so the check after finds no leak.
#[test]
fn an_unattached_empty_file_holding_blocks_past_its_end_is_preened_away_with_them() {
    let (dev, _, _) = populated();
    let fs = mount(&dev, Policy::Async);
    let g = fs.lookup(ROOT, OsStr::new("g")).unwrap();
    fs.fallocate(g.ino, fsapi::Fallocate::Allocate { keep_size: true }, 0, 3 * 4096).unwrap();
    fs.unmount().unwrap();
    blank_entry(&dev, ROOT, "g");
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
}

#[test]
fn an_unattached_file_with_data_is_reconnected_to_lost_and_found() {
    let (dev, d, f) = populated();
    blank_entry(&dev, d, "f");
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
    let found = fs.lookup(lf.ino, OsStr::new(&format!("#{f}"))).unwrap();
    assert_eq!(found.size, 10_000);
}

/// An image without a root is damaged, not clean: `-n` and `-p` report
/// `root_missing` and stop there, leaving it (only `-y` makes it again).
#[test]
fn an_image_without_a_root_is_damaged_not_clean() {
    let dev = fresh(16 << 20);
    let (block, at) = sb(&dev).inode_place(1);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at..at + INODE_BYTES].fill(0);
    dev.write_at(&buf, block * 4096).unwrap();
    for repair in [Repair::No, Repair::Preen] {
        let report = fsck(&dev, repair).unwrap();
        assert!(report.damage_left(), "{repair:?}");
        assert_eq!(report.findings[0].class, Class::RootMissing);
    }
}

#[test]
fn a_file_system_whose_lost_and_found_was_removed_checks_clean() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    fs.rmdir(ROOT, OsStr::new("lost+found")).unwrap();
    fs.create(ROOT, OsStr::new("a"), Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

#[test]
fn a_directory_sector_of_garbage_loses_only_its_own_chunk() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
    for i in 0..60 {
        let f = fs.create(d.ino, OsStr::new(&format!("entry-{i:03}")), Owner::root(0o644)).unwrap();
        fs.forget(f.ino, 1);
    }
    fs.unmount().unwrap();
    // Sector 1 of the directory's first block becomes garbage, as a torn
    // write or a bad sector could leave it.
    let mut inode_block = vec![0u8; 4096];
    let (block, at) = sb(&dev).inode_place(d.ino as u32);
    dev.read_at(&mut inode_block, block * 4096).unwrap();
    let ffs::format::InodeSlot::Used(dir) =
        ffs::format::DiskInode::decode(d.ino as u32, &inode_block[at..at + INODE_BYTES])
    else {
        panic!("a directory")
    };
    dev.write_at(&[0xa7; 512], u64::from(dir.direct[0]) * 4096 + 512).unwrap();
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(report.findings.iter().any(|f| f.class == Class::BadDirectoryBlock));
    assert!(fsck(&dev, Repair::No).unwrap().clean(), "repaired whole");
    let fs = mount(&dev, Policy::Async);
    let mut left = 0;
    fs.readdir(d.ino, 0, &mut |_| {
        left += 1;
        true
    })
    .unwrap();
    assert!((20..50).contains(&left), "only the entries of one chunk are gone: {left} left");
}

#[test]
fn background_repairs_leaks() {
    let (dev, _, f) = populated();
    edit_inode(&dev, f as u32, |i| i.nlink = 3);
    assert!(!fsck(&dev, Repair::Leaks).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

#[test]
fn background_leaves_what_is_more_than_a_leak() {
    let (dev, _, f) = populated();
    edit_inode(&dev, f as u32, |i| i.nlink = 0);
    assert!(classes(&dev, Repair::No).contains(&Class::LinkCountTooLow));
    // A count too low is no leak: -B reports it and leaves it to -y.
    let report = fsck(&dev, Repair::Leaks).unwrap();
    assert!(report.damage_left(), "{:?}", report.findings);
    assert!(report.findings.iter().all(|x| x.repaired == x.class.is_leak()), "{:?}", report.findings);
}

#[test]
fn a_directory_removed_while_open_is_no_link_of_its_parent() {
    let dev = crate::common::fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
    fs.rmdir(ROOT, OsStr::new("d")).unwrap(); // still looked up: on the orphan list
    fs.sync().unwrap();
    drop(fs); // a crash with d removed and still open
    let report = fsck(&dev, Repair::Preen).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
    let fs = mount(&dev, Policy::Async);
    assert!(fs.getattr(d.ino).is_err(), "the next mount frees it");
}

/// Zeroes inode `ino`'s slot (its bit in the map stays set).
fn clear_slot(dev: &Arc<dyn Device>, ino: u32) {
    let (block, at) = sb(dev).inode_place(ino);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at..at + INODE_BYTES].fill(0);
    dev.write_at(&buf, block * 4096).unwrap();
}

#[test]
fn a_directory_whose_new_parent_never_reached_the_disk_is_a_leak_reconnected() {
    // What soft updates may leave: /p/d's inode and first block written,
    // /p's entry and inode not (d's `..` names a free slot).
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let p = fs.mkdir(ROOT, OsStr::new("p"), Owner::root(0o755)).unwrap();
    let d = fs.mkdir(p.ino, OsStr::new("d"), Owner::root(0o755)).unwrap();
    let f = fs.create(d.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &[5u8; 5000]).unwrap();
    fs.unmount().unwrap();
    blank_entry(&dev, ROOT, "p");
    clear_slot(&dev, p.ino as u32);

    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.findings.iter().all(|x| x.class.is_leak()), "{:?}", report.findings);
    assert!(!fsck(&dev, Repair::Leaks).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
    let found = fs.lookup(lf.ino, OsStr::new(&format!("#{}", d.ino))).unwrap();
    // Its `..` now names lost+found, which counts it (the check above
    // found nothing, and it holds `..` to a directory and counts).
    assert_eq!(fs.getattr(lf.ino).unwrap().nlink, 3);
    assert_eq!(fs.lookup(found.ino, OsStr::new("f")).unwrap().size, 5000);
}

/// A FIFO, a character device, a block device and a socket in the root
/// of the populated image (unmounted): their inode numbers.
fn with_special_files() -> (Arc<dyn Device>, u64, Vec<(fsapi::FileType, u64)>) {
    let (dev, _, f) = populated();
    let fs = mount(&dev, Policy::Async);
    let kinds = [
        fsapi::FileType::Fifo,
        fsapi::FileType::CharDevice,
        fsapi::FileType::BlockDevice,
        fsapi::FileType::Socket,
    ];
    let made = kinds
        .into_iter()
        .map(|k| {
            let name = format!("{k:?}");
            (k, fs.mknod(ROOT, OsStr::new(&name), k, fsapi::makedev(4, 64), Owner::root(0o600)).unwrap().ino)
        })
        .collect();
    fs.unmount().unwrap();
    (dev, f, made)
}

#[test]
fn special_files_check_clean() {
    let (dev, _, _) = with_special_files();
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
}

/// Each special kind given a size, units and a pointer to a block a file
/// holds: found (not a block claimed twice: its pointers are not
/// claims), left by preen, cleared by `-y`, and the file keeps its block.
#[test]
fn a_special_file_holding_a_block_and_a_size_is_found_and_cleared_with_yes() {
    let (dev, f, made) = with_special_files();
    let mut files_block = 0;
    edit_inode(&dev, f as u32, |i| files_block = i.direct[0]);
    for (kind, ino) in made {
        edit_inode(&dev, ino as u32, |i| {
            i.direct[0] = files_block;
            i.size = 4096;
            i.blocks_512 = 8;
        });
        assert_eq!(classes(&dev, Repair::No), vec![Class::SpecialFileWithData], "{kind:?}");
        assert!(fsck(&dev, Repair::Preen).unwrap().damage_left(), "{kind:?}: preen leaves it to a person");
        assert!(!fsck(&dev, Repair::Yes).unwrap().damage_left(), "{kind:?}");
        let report = fsck(&dev, Repair::No).unwrap();
        assert!(report.clean(), "{kind:?}: {:?}", report.findings);
        let fs = mount(&dev, Policy::Async);
        let a = fs.getattr(ino).unwrap();
        assert_eq!((a.kind, a.size, a.blocks), (kind, 0, 0));
        let mut data = vec![0u8; 10_000];
        fs.read(f, 0, &mut data).unwrap();
        assert!(data.iter().all(|&b| b == 7), "{kind:?}: the file kept its block");
        fs.unmount().unwrap();
    }
}

#[test]
fn a_special_file_with_only_a_size_is_found() {
    let (dev, _, made) = with_special_files();
    edit_inode(&dev, made[0].1 as u32, |i| i.size = 1);
    assert_eq!(classes(&dev, Repair::No), vec![Class::SpecialFileWithData]);
}

/// A special file counting units with neither a size nor a pointer (as
/// soft updates writes one whose new attribute block is not on the disk
/// yet) has a block count too high, a leak: found as such, repaired by
/// preen, and the file is whole after.
#[test]
fn a_special_file_counting_units_it_does_not_hold_has_a_wrong_block_count() {
    let (dev, _, made) = with_special_files();
    edit_inode(&dev, made[0].1 as u32, |i| i.blocks_512 = 8);
    assert_eq!(classes(&dev, Repair::No), vec![Class::WrongBlockCount]);
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
}

/// The type byte of the entry `name` in the root, set to `kind`.
fn set_entry_type(dev: &Arc<dyn Device>, name: &str, kind: u8) {
    edit_entry(dev, ROOT as u32, name, |rec| rec[7] = kind);
}

/// Every entry type but the right one, on an entry naming each kind:
/// found, left by preen, rewritten by `-y`, and listed right after.
#[test]
fn an_entry_type_that_is_not_its_inodes_kind_is_found_and_rewritten_with_yes() {
    let (dev, _, made) = with_special_files();
    let codes = [1u8, 2, 3, 4, 5, 6, 7];
    for (kind, ino) in made.iter().copied().chain([(fsapi::FileType::File, 0)]) {
        let name = if kind == fsapi::FileType::File { "g".to_string() } else { format!("{kind:?}") };
        for wrong in codes {
            set_entry_type(&dev, &name, wrong);
            let found = classes(&dev, Repair::No);
            let right = found.is_empty();
            if right {
                continue; // the byte that is the inode's kind
            }
            assert_eq!(found, vec![Class::WrongEntryType], "{kind:?} as type {wrong}");
            assert!(fsck(&dev, Repair::Preen).unwrap().damage_left(), "{kind:?} as {wrong}");
            assert!(!fsck(&dev, Repair::Yes).unwrap().damage_left(), "{kind:?} as {wrong}");
            assert!(fsck(&dev, Repair::No).unwrap().clean(), "{kind:?} as {wrong}");
        }
        let fs = mount(&dev, Policy::Async);
        let mut listed = None;
        fs.readdir(ROOT, 0, &mut |e| {
            if e.name == name.as_bytes() {
                listed = Some((e.kind, e.ino));
            }
            true
        })
        .unwrap();
        assert_eq!(listed.map(|l| l.0), Some(kind), "{name}");
        assert!(ino == 0 || listed.map(|l| l.1) == Some(ino));
        fs.unmount().unwrap();
    }
}

/// A special file no entry names is cleared by preen, as an empty file
/// is: it holds nothing to save.
#[test]
fn an_unattached_special_file_is_preened_away() {
    let (dev, _, made) = with_special_files();
    blank_entry(&dev, ROOT, "CharDevice");
    assert!(classes(&dev, Repair::No).contains(&Class::UnattachedInode));
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
    let fs = mount(&dev, Policy::Async);
    assert!(fs.getattr(made[1].1).is_err(), "cleared");
}

/// Sets the inode number of directory `dir`'s entry `name` (in its first
/// block) to `ino`, as damage would.
fn set_entry_ino(dev: &Arc<dyn Device>, dir: u32, name: &str, ino: u32) {
    edit_entry(dev, dir, name, |rec| rec[..4].copy_from_slice(&ino.to_le_bytes()));
}

/// /a/b, with b's `..` naming /c (a directory, but not the one that
/// names b, as a crash inside a rename of b leaves under `sync`): found,
/// and rewritten by preen to name /a, after which a check is clean and
/// the counts agree (issue 43: "[repaired]" once meant nothing changed,
/// and every later check found it again).
#[test]
fn a_dot_dot_naming_another_directory_is_pointed_at_the_parent_by_preen() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let a = fs.mkdir(ROOT, OsStr::new("a"), Owner::root(0o755)).unwrap();
    let b = fs.mkdir(a.ino, OsStr::new("b"), Owner::root(0o755)).unwrap();
    let c = fs.mkdir(ROOT, OsStr::new("c"), Owner::root(0o755)).unwrap();
    fs.unmount().unwrap();
    set_entry_ino(&dev, b.ino as u32, "..", c.ino as u32);
    assert!(classes(&dev, Repair::No).contains(&Class::DotDotMismatch));
    let preen = fsck(&dev, Repair::Preen).unwrap();
    assert!(!preen.damage_left(), "{:?}", preen.findings);
    assert!(fsck(&dev, Repair::No).unwrap().clean(), "{:?}", fsck(&dev, Repair::No).unwrap().findings);
    let fs = mount(&dev, Policy::Sync);
    let up = fs.lookup(b.ino, OsStr::new("..")).map(|p| p.ino);
    assert!(up == Ok(a.ino) || up.is_err(), "'..' of b names {up:?}");
    fs.unmount().unwrap();
}

#[test]
fn a_dot_naming_another_inode_is_rewritten_with_yes() {
    let (dev, d, f) = populated();
    set_entry_ino(&dev, d as u32, ".", f as u32);
    assert!(classes(&dev, Repair::No).contains(&Class::BadDotDot));
    assert!(fsck(&dev, Repair::Preen).unwrap().damage_left(), "preen leaves a bad '.'");
    assert!(!fsck(&dev, Repair::Yes).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean(), "{:?}", fsck(&dev, Repair::No).unwrap().findings);
}

/// lost+found removed (a user may rmdir it through a mount), then a file
/// holding data left unattached: preen makes lost+found again and keeps
/// the file there, bytes and all; the check after is clean.
#[test]
fn with_lost_and_found_removed_an_unattached_file_with_data_is_kept_in_a_new_one() {
    let (dev, d, f) = populated();
    let fs = mount(&dev, Policy::Async);
    fs.rmdir(ROOT, OsStr::new("lost+found")).unwrap();
    fs.unmount().unwrap();
    blank_entry(&dev, d, "f");
    let report = fsck(&dev, Repair::Preen).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert!(report.findings.iter().any(|x| x.detail.contains("no lost+found in the root: made")));
    assert_checks_clean(&dev, "after preen");
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
    let found = fs.lookup(lf.ino, OsStr::new(&format!("#{f}"))).unwrap();
    let mut data = vec![0u8; 10_000];
    assert_eq!(fs.read(found.ino, 0, &mut data).unwrap(), 10_000);
    assert!(data.iter().all(|&b| b == 7), "the file's bytes kept");
}

/// 1,500 files holding data left unattached at once (their directory's
/// inode lost) overflow lost+found's four blocks: it grows, through its
/// direct blocks, and every file is kept; the check after is clean.
#[test]
fn a_full_lost_and_found_grows_and_keeps_every_unattached_file() {
    let dev = fresh(32 << 20);
    let fs = mount(&dev, Policy::Async);
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
    for i in 0..1500 {
        let f = fs.create(d.ino, OsStr::new(&format!("file-{i:04}")), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &[i as u8 | 1; 100]).unwrap();
        fs.forget(f.ino, 1);
    }
    fs.unmount().unwrap();
    // The directory's inode slot zeroed: its files are named by nothing.
    let (block, at) = sb(&dev).inode_place(d.ino as u32);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at..at + INODE_BYTES].fill(0);
    dev.write_at(&buf, block * 4096).unwrap();
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(
        !report.damage_left(),
        "{:?}",
        report.findings.iter().filter(|f| !f.repaired).take(3).collect::<Vec<_>>()
    );
    assert_checks_clean(&dev, "after -y");
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
    let mut kept = 0;
    fs.readdir(lf.ino, 0, &mut |e| {
        kept += u32::from(e.name.first() == Some(&b'#'));
        true
    })
    .unwrap();
    assert_eq!(kept, 1500, "every unattached file kept");
    assert!(fs.getattr(lf.ino).unwrap().size > 4 * 4096, "lost+found grew past its four blocks");
}

/// lost+found's own entry lost (its inode whole, its `..` the root):
/// preen names it lost+found in the root again, rather than making a
/// new one and putting the old in it as `#2`.
#[test]
fn lost_and_found_cut_off_from_the_root_is_named_again() {
    let (dev, _, _) = populated();
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino;
    fs.unmount().unwrap();
    blank_entry(&dev, ROOT, "lost+found");
    assert!(classes(&dev, Repair::No).contains(&Class::UnattachedInode));
    let report = fsck(&dev, Repair::Preen).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert_checks_clean(&dev, "after preen");
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino, lf);
}

/// A regular file named lost+found in the root: checked clean while
/// nothing needs lost+found; once a file is cut off, `-y` gives the name
/// to a new lost+found directory (fsck_ffs's REALLOCATE) and reconnects
/// both files in it, the one named lost+found (with data) included. It
/// was once reported "not repaired" at every check.
#[test]
fn a_file_named_lost_and_found_gives_the_name_to_a_directory_when_one_is_needed() {
    let (dev, d, f) = populated();
    let fs = mount(&dev, Policy::Async);
    fs.rmdir(ROOT, OsStr::new("lost+found")).unwrap();
    let named = fs.create(ROOT, OsStr::new("lost+found"), Owner::root(0o644)).unwrap().ino;
    fs.write(named, 0, b"mine").unwrap();
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "nothing to reconnect");
    blank_entry(&dev, d, "f");
    let preen = fsck(&dev, Repair::Preen).unwrap();
    assert!(preen.damage_left(), "preen does not reallocate: {:?}", preen.findings);
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
    assert_eq!(lf.kind, fsapi::FileType::Dir);
    assert_eq!(fs.lookup(lf.ino, OsStr::new(&format!("#{f}"))).unwrap().size, 10_000);
    assert_eq!(fs.lookup(lf.ino, OsStr::new(&format!("#{named}"))).unwrap().size, 4);
}

// ---- what the image fuzzer found (tests/it/fsck_fuzz.rs, issue 43) ----

/// `fsck -y` leaves nothing, and a second `fsck -n` finds nothing: the
/// repair converged.
fn repairs_and_converges(dev: &Arc<dyn Device>) -> Vec<Class> {
    let yes = fsck(dev, Repair::Yes).unwrap();
    assert!(!yes.damage_left(), "{:?}", yes.findings);
    assert_checks_clean(dev, "after -y");
    yes.findings.iter().map(|f| f.class).collect()
}

/// The names directory `dir` lists, `.` and `..` aside.
fn listed(fs: &ffs::Ffs, dir: u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        out.push((String::from_utf8_lossy(&e.name).into_owned(), e.ino));
        true
    })
    .unwrap();
    out
}

/// /a/b and /c, unmounted: (a, b, c).
fn three_directories() -> (Arc<dyn Device>, u64, u64, u64) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let a = fs.mkdir(ROOT, OsStr::new("a"), Owner::root(0o755)).unwrap().ino;
    let b = fs.mkdir(a, OsStr::new("b"), Owner::root(0o755)).unwrap().ino;
    let c = fs.mkdir(ROOT, OsStr::new("c"), Owner::root(0o755)).unwrap().ino;
    fs.unmount().unwrap();
    (dev, a, b, c)
}

/// The root's entry `c` pointed at /a/b: a hard-linked directory. The
/// entry b's `..` names (in /a) is kept, the root's removed, and /c, cut
/// off, is reconnected in lost+found; b is reached once.
#[test]
fn a_hard_linked_directory_keeps_the_entry_its_dot_dot_names() {
    let (dev, a, b, c) = three_directories();
    set_entry_ino(&dev, ROOT as u32, "c", b as u32);
    assert!(classes(&dev, Repair::No).contains(&Class::DirectoryLinkedTwice));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(a, OsStr::new("b")).unwrap().ino, b);
    assert!(fs.lookup(ROOT, OsStr::new("c")).is_err(), "the second link is gone");
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino;
    assert_eq!(fs.lookup(lf, OsStr::new(&format!("#{c}"))).unwrap().ino, c);
}

/// /a/b's entry `x` pointed back at /a: a loop. The entry is removed, the
/// file it named reconnected, and a walk from the root ends.
#[test]
fn a_loop_back_to_an_ancestor_is_cut() {
    let (dev, a, b, _) = three_directories();
    let fs = mount(&dev, Policy::Async);
    let x = fs.create(b, OsStr::new("x"), Owner::root(0o644)).unwrap().ino;
    fs.write(x, 0, b"kept").unwrap();
    fs.unmount().unwrap();
    set_entry_ino(&dev, b as u32, "x", a as u32);
    assert!(classes(&dev, Repair::No).contains(&Class::DirectoryLinkedTwice));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert!(listed(&fs, b).is_empty(), "{:?}", listed(&fs, b));
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino;
    assert_eq!(fs.lookup(lf, OsStr::new(&format!("#{x}"))).unwrap().size, 4);
}

/// An entry naming the root (/d/f pointed at inode 1) is removed.
#[test]
fn an_entry_naming_the_root_is_removed() {
    let (dev, d, _) = populated();
    set_entry_ino(&dev, d as u32, "f", 1);
    assert!(classes(&dev, Repair::No).contains(&Class::DirectoryLinkedTwice));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert!(fs.lookup(d, OsStr::new("f")).is_err());
}

/// A directory whose `.` and `..` records were blanked gets both back
/// (once it said "not repaired" at every check); its files stay.
#[test]
fn a_directory_missing_dot_and_dot_dot_gets_them_back() {
    let (dev, d, f) = populated();
    edit_entry(&dev, d as u32, ".", |rec| rec[..4].fill(0));
    edit_entry(&dev, d as u32, "..", |rec| rec[..4].fill(0));
    assert!(classes(&dev, Repair::No).contains(&Class::BadDotDot));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(d, OsStr::new("f")).unwrap().ino, f);
    fs.rename(d, OsStr::new("f"), ROOT, OsStr::new("h")).unwrap();
    fs.rmdir(ROOT, OsStr::new("d")).unwrap();
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "after rmdir");
}

/// A directory whose length says a gigabyte while it maps one block is
/// cut to that block (its holes were once filled from the free blocks,
/// until there were none: ENOSPC).
#[test]
fn an_oversized_directory_is_cut_to_the_blocks_it_maps() {
    let (dev, d, f) = populated();
    edit_inode(&dev, d as u32, |i| i.size = 1 << 30);
    assert!(classes(&dev, Repair::No).contains(&Class::BadDirectoryBlock));
    repairs_and_converges(&dev);
    assert_eq!(crate::common::stored(&dev, d).size, 4096);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(d, OsStr::new("f")).unwrap().ino, f);
}

/// A directory of 2,000 names spread over several blocks, unmounted:
/// (image, directory, its names with their inodes).
fn a_big_directory() -> (Arc<dyn Device>, u64, Vec<(String, u64)>) {
    let dev = fresh(64 << 20);
    let fs = mount(&dev, Policy::Async);
    let d = fs.mkdir(ROOT, OsStr::new("big"), Owner::root(0o755)).unwrap().ino;
    // Not empty: fsck clears an unattached empty file, and keeps the rest.
    for i in 0..2000 {
        let f = fs.create(d, OsStr::new(&format!("entry-{i:04}")), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, b"x").unwrap();
    }
    let names = listed(&fs, d);
    fs.unmount().unwrap();
    (dev, d, names)
}

/// A directory whose length says one byte keeps all 2,000 of its names:
/// the length is set to the blocks it maps, not the blocks to the length.
#[test]
fn a_directory_whose_length_says_one_byte_keeps_every_name() {
    let (dev, d, names) = a_big_directory();
    let blocks = crate::common::stored(&dev, d).size / 4096;
    assert!(blocks > 2, "{blocks} blocks");
    edit_inode(&dev, d as u32, |i| i.size = 1);
    assert!(classes(&dev, Repair::No).contains(&Class::BadDirectoryBlock));
    repairs_and_converges(&dev);
    assert_eq!(crate::common::stored(&dev, d).size, blocks * 4096);
    assert_eq!(listed(&mount(&dev, Policy::Async), d), names);
}

/// A hole inside a directory (a block pointer lost) is filled with an
/// empty block: the names in the blocks around it stay where they were,
/// and the files the lost block named are reconnected to lost+found.
#[test]
fn a_hole_inside_a_directory_is_filled_and_every_file_kept() {
    let (dev, d, names) = a_big_directory();
    edit_inode(&dev, d as u32, |i| i.direct[1] = 0);
    let found = fsck(&dev, Repair::No).unwrap();
    assert!(
        found.findings.iter().any(|f| f.detail.contains("has a hole at block 1")),
        "{:?}",
        found.findings
    );
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    let kept = listed(&fs, d);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino;
    let reconnected = listed(&fs, lf);
    assert!(
        !kept.is_empty() && !reconnected.is_empty(),
        "{} kept, {} reconnected",
        kept.len(),
        reconnected.len()
    );
    let mut inodes: Vec<u64> = kept.iter().chain(&reconnected).map(|(_, ino)| *ino).collect();
    inodes.sort_unstable();
    let mut before: Vec<u64> = names.iter().map(|(_, ino)| *ino).collect();
    before.sort_unstable();
    assert_eq!(inodes, before, "every file named, in place or in lost+found");
}

/// A record whose length stops four bytes short of its chunk's end: the
/// tail joins the record before it (it was once made a record of its
/// own, whose header overwrote the next chunk's first record).
#[test]
fn a_record_short_of_its_chunks_end_is_mended_within_its_chunk() {
    let (dev, d, f) = populated();
    let mut reclen = 0;
    edit_entry(&dev, d as u32, "f", |rec| {
        reclen = u16::from_le_bytes([rec[4], rec[5]]);
        rec[4..6].copy_from_slice(&(reclen - 4).to_le_bytes());
    });
    assert!(reclen > 16, "f is the chunk's last record");
    let fs = mount(&dev, Policy::Async);
    for i in 0..40 {
        fs.create(d, OsStr::new(&format!("n{i:02}-a-longer-name")), Owner::root(0o644)).unwrap();
    }
    fs.unmount().unwrap();
    assert!(classes(&dev, Repair::No).contains(&Class::BadDirectoryBlock));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(d, OsStr::new("f")).unwrap().ino, f);
    assert_eq!(listed(&fs, d).len(), 41);
}

/// An entry whose name holds a `/` (no lookup takes it) is removed, and
/// the file it named reconnected in lost+found.
#[test]
fn an_entry_whose_name_no_lookup_takes_is_removed_and_its_file_kept() {
    let (dev, d, f) = populated();
    edit_entry(&dev, d as u32, "f", |rec| rec[8] = b'/');
    assert!(classes(&dev, Repair::No).contains(&Class::BadDirectoryBlock));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert!(listed(&fs, d).is_empty());
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino;
    assert_eq!(fs.lookup(lf, OsStr::new(&format!("#{f}"))).unwrap().size, 10_000);
}

/// Two entries of one name in a directory (the root's `g` renamed `d` by
/// damage): the second is removed, and a lookup and a listing agree.
#[test]
fn a_second_entry_of_one_name_is_removed() {
    let (dev, d, _) = populated();
    edit_entry(&dev, ROOT as u32, "g", |rec| rec[8] = b'd');
    assert!(classes(&dev, Repair::No).contains(&Class::BadDirectoryBlock));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    let ds: Vec<_> = listed(&fs, ROOT).into_iter().filter(|(n, _)| n == "d").collect();
    assert_eq!(ds, vec![("d".to_string(), d)]);
}

/// A directory named from its parent whose count says 0 links is no
/// directory removed while open: its count is set to its entry, `.` and
/// its subdirectories' `..` (it was once set to 1, and found again).
#[test]
fn a_named_directory_counting_no_links_is_counted_whole() {
    let (dev, d, _) = populated();
    edit_inode(&dev, d as u32, |i| i.nlink = 0);
    assert!(classes(&dev, Repair::No).contains(&Class::LinkCountTooLow));
    repairs_and_converges(&dev);
    assert_eq!(crate::common::stored(&dev, d).nlink, 2);
}

/// A symlink too long for its inode whose block pointer is lost cannot
/// be read (EIO): cleared, and its entry with it.
#[test]
fn a_long_symlink_without_its_block_is_cleared() {
    let (dev, _, _) = populated();
    let fs = mount(&dev, Policy::Async);
    let target = "t/".repeat(100);
    let s = fs.symlink(ROOT, OsStr::new("s"), OsStr::new(&target), Owner::root(0o777)).unwrap().ino;
    fs.unmount().unwrap();
    edit_inode(&dev, s as u32, |i| i.direct[0] = 0);
    assert!(classes(&dev, Repair::No).contains(&Class::BadSymlink));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert!(fs.lookup(ROOT, OsStr::new("s")).is_err());
}

/// /a's second pointer aimed at /c's block (a lower inode number than
/// c's): the block's own `.` names /c, so /c keeps it and what it holds,
/// and /a's pointer is cut (the block once went to the lower number, and
/// /c lost its entries).
#[test]
fn a_directory_block_claimed_twice_stays_with_the_directory_its_dot_names() {
    let (dev, a, b, c) = three_directories();
    let fs = mount(&dev, Policy::Async);
    let x = fs.create(c, OsStr::new("x"), Owner::root(0o644)).unwrap().ino;
    fs.unmount().unwrap();
    let theirs = crate::common::stored(&dev, c).direct[0];
    edit_inode(&dev, a as u32, |i| {
        i.direct[1] = theirs;
        i.size = 8192;
        i.blocks_512 += 8;
    });
    assert!(classes(&dev, Repair::No).contains(&Class::BlockClaimedTwice));
    repairs_and_converges(&dev);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(c, OsStr::new("x")).unwrap().ino, x);
    assert_eq!(listed(&fs, a), vec![("b".to_string(), b)]);
    assert_eq!(crate::common::stored(&dev, a).direct[1], 0);
}

/// A `log` image a crash left with three commits in its log, none home,
/// the first commit's data damaged: its replay stops there.
fn log_image_damaged_in_its_first_commit() -> Arc<dyn Device> {
    let dev = fresh(16 << 20);
    let options =
        ffs::MountOptions { policy: Policy::Log, commits: ffs::Commits::Caller, ..Default::default() };
    let fs = ffs::Ffs::mount(Arc::clone(&dev), &options).unwrap();
    for name in ["a", "b", "c"] {
        let f = fs.create(ROOT, OsStr::new(name), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &[1u8; 5000]).unwrap();
        fs.sync().unwrap();
    }
    drop(fs); // the crash: no unmount, no checkpoint
              // The log's unit is the block: the first commit's first record
              // header, then its first block of data.
    let region = ffs::log_region(&dev).unwrap();
    region.write_at(&[0xee; 4096], blocklog::AREA_START + 4096).unwrap();
    dev
}

/// A damaged commit in the file system's log: a mount refuses the image,
/// naming fsck; `fsck -n` reports `damaged_log` (not repaired) and checks
/// the rest; `-y` drops the commits from the damage on, and the image
/// then checks clean and mounts.
#[test]
fn a_damaged_commit_in_the_log_is_reported_and_dropped_with_yes() {
    let dev = log_image_damaged_in_its_first_commit();
    let refused = ffs::Ffs::mount(Arc::clone(&dev), &ffs::MountOptions::default()).err().unwrap();
    assert!(refused.to_string().contains("stopped at damage"), "{refused}");
    assert!(refused.to_string().contains("run `iolab fs fsck -y`"), "{refused}");
    let report = fsck(&dev, Repair::No).unwrap();
    let found = report.findings.iter().find(|f| f.class == Class::DamagedLog).expect("damaged_log");
    assert!(!found.repaired && found.detail.contains("commit 1"), "{found:?}");
    assert!(fsck(&dev, Repair::Preen).unwrap().damage_left(), "preen leaves lost commits to a person");
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert_checks_clean(&dev, "after -y");
    let fs = mount(&dev, Policy::Log);
    fs.create(ROOT, OsStr::new("after"), Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "after a log mount on the repaired log");
}

/// Both header slots of the log overwritten: not read as "no log" in
/// silence, but reported as `damaged_log`; `-y` blanks them, and the
/// image checks clean and mounts under `log` (a new log is made).
#[test]
fn log_header_slots_both_damaged_are_reported_not_ignored() {
    let dev = log_image_damaged_in_its_first_commit();
    let region = ffs::log_region(&dev).unwrap();
    region.write_at(&[0x5a; 2 * 4096], 0).unwrap();
    let report = fsck(&dev, Repair::No).unwrap();
    let found = report.findings.iter().find(|f| f.class == Class::DamagedLog).expect("damaged_log");
    assert!(found.detail.contains("header slots"), "{found:?}");
    assert!(!fsck(&dev, Repair::Yes).unwrap().damage_left());
    assert_checks_clean(&dev, "after -y");
    mount(&dev, Policy::Log).unmount().unwrap();
    assert_checks_clean(&dev, "after a log mount");
}

/// The root's mode damaged (a regular file now, its checksum right):
/// `-n` reports `root_missing` and stops; `-y` makes the root again over
/// its old blocks, so every entry is kept, and the check after is clean.
#[test]
fn a_root_whose_mode_is_damaged_is_made_again_with_its_entries() {
    let (dev, d, f) = populated();
    edit_inode(&dev, ROOT as u32, |i| i.mode = 0o100644);
    assert_eq!(classes(&dev, Repair::No), vec![Class::RootMissing]);
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert!(report.findings[0].detail.contains("entries kept"), "{:?}", report.findings[0]);
    assert_checks_clean(&dev, "after -y");
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(ROOT, OsStr::new("d")).unwrap().ino, d);
    assert_eq!(fs.lookup(d, OsStr::new("f")).unwrap().ino, f);
    fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
}

/// The root's inode and its first block both lost (zeroed): `-y` makes
/// an empty root, names lost+found in it again, and puts the directory
/// the root held in lost+found with its file; the check after is clean.
#[test]
fn a_root_lost_with_its_block_is_made_again_and_its_tree_reconnected() {
    let (dev, d, f) = populated();
    let root = crate::common::stored(&dev, ROOT);
    let (block, at) = sb(&dev).inode_place(ROOT as u32);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at..at + INODE_BYTES].fill(0);
    dev.write_at(&buf, block * 4096).unwrap();
    dev.write_at(&[0u8; 4096], u64::from(root.direct[0]) * 4096).unwrap();
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert_checks_clean(&dev, "after -y");
    let fs = mount(&dev, Policy::Async);
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap();
    let moved = fs.lookup(lf.ino, OsStr::new(&format!("#{d}"))).unwrap();
    assert_eq!(fs.lookup(moved.ino, OsStr::new("f")).unwrap().ino, f);
}

/// 100,000 bytes no two blocks of which are alike.
fn patterned() -> Vec<u8> {
    (0..100_000u32).map(|i| (i.wrapping_mul(7) % 251) as u8).collect()
}

/// A directory and a file of `patterned()` bytes, made in `order`
/// ("dir first" gives the directory the lower inode number), unmounted;
/// then the directory's second pointer aimed at the file's 21st block
/// (one its single indirect block maps). Returns (directory, file).
fn a_directory_pointing_into_a_file(dir_first: bool) -> (Arc<dyn Device>, u64, u64) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let make_dir = |fs: &ffs::Ffs| fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap().ino;
    let make_file = |fs: &ffs::Ffs| {
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &patterned()).unwrap();
        f.ino
    };
    let (d, f) = if dir_first {
        let d = make_dir(&fs);
        (d, make_file(&fs))
    } else {
        let f = make_file(&fs);
        (make_dir(&fs), f)
    };
    fs.unmount().unwrap();
    let single = crate::common::stored(&dev, f).single;
    let mut map = vec![0u8; 4096];
    dev.read_at(&mut map, u64::from(single) * 4096).unwrap();
    let target = u32::from_le_bytes(map[(20 - 12) * 4..(20 - 12) * 4 + 4].try_into().unwrap());
    edit_inode(&dev, d as u32, |i| {
        i.direct[1] = target;
        i.size = 8192;
        i.blocks_512 += 8;
    });
    (dev, d, f)
}

/// Whether file `f` reads back as `patterned()`.
fn reads_whole(dev: &Arc<dyn Device>, f: u64) -> bool {
    let fs = mount(dev, Policy::Async);
    let mut buf = vec![0u8; 100_000];
    let n = fs.read(f, 0, &mut buf).unwrap();
    fs.unmount().unwrap();
    n == 100_000 && buf == patterned()
}

/// A directory's pointer aimed at a block of an intact file: `-y` copies
/// the block for the inode that claimed it second, so each keeps the
/// bytes it had. The directory claims first here: the file's copy is
/// made through its single indirect block, and the directory's repair
/// of the block (not a directory block) leaves the file whole.
#[test]
fn a_block_a_directory_shares_with_a_file_is_copied_and_the_file_reads_back_whole() {
    let (dev, _, f) = a_directory_pointing_into_a_file(true);
    let yes = fsck(&dev, Repair::Yes).unwrap();
    let copied = yes.findings.iter().find(|x| x.class == Class::BlockClaimedTwice).unwrap();
    assert!(copied.detail.contains(&format!("inode {f} gets a copy")), "{copied:?}");
    assert!(!yes.damage_left(), "{:?}", yes.findings);
    assert_checks_clean(&dev, "after -y");
    assert!(reads_whole(&dev, f));
}

/// The same with the file claiming first: the directory gets the copy
/// (and its repair), the file keeps its block.
#[test]
fn a_block_a_file_shares_with_a_later_directory_stays_the_files_and_the_file_reads_back_whole() {
    let (dev, d, f) = a_directory_pointing_into_a_file(false);
    let yes = fsck(&dev, Repair::Yes).unwrap();
    let copied = yes.findings.iter().find(|x| x.class == Class::BlockClaimedTwice).unwrap();
    assert!(copied.detail.contains(&format!("inode {d} gets a copy")), "{copied:?}");
    assert_checks_clean(&dev, "after -y");
    assert!(reads_whole(&dev, f));
}

/// A check tells each pass as it begins, in order, and pass 1 each group
/// of the inode tables.
#[test]
fn a_check_tells_each_pass_and_each_group_of_pass_1() {
    let dev = fresh(300 << 20);
    let groups = u64::from(sb(&dev).groups);
    assert!(groups > 1, "several groups");
    let told = std::sync::Mutex::new(Vec::new());
    ffs::fsck::fsck_telling(&dev, Repair::No, &|step| told.lock().unwrap().push(step)).unwrap();
    let told = told.into_inner().unwrap();
    let first: Vec<u64> = told.iter().filter(|s| s.pass == 1).map(|s| s.done).collect();
    assert_eq!(first, (0..groups).collect::<Vec<_>>());
    assert!(told.iter().all(|s| s.pass != 1 || s.total == groups));
    let passes: Vec<u8> = told.iter().map(|s| s.pass).filter(|&p| p > 1).collect();
    assert_eq!(passes, [2, 3, 4, 5]);
}
