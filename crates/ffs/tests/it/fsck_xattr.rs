//! fsck against damage injected into extended attribute blocks: each
//! problem is found by name, and `-y` clears the bad pointer (the
//! attributes are lost, the block is free again) so that the image
//! checks clean.

use std::ffi::OsStr;
use std::sync::Arc;

use codec::Frame;
use device::Device;
use ffs::format::{DiskInode, INODE_BYTES};
use ffs::fsck::{fsck, Class, Repair};
use ffs::Policy;
use fsapi::{Errno, FileSystem, Owner, XattrFlags, ROOT};

use crate::common::{assert_checks_clean, fresh, mount, stored};

/// An image with files `f` and `g` in the root, each with one attribute:
/// the image and the two inodes.
fn with_attributes() -> (Arc<dyn Device>, u64, u64) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let mut made = Vec::new();
    for file in ["f", "g"] {
        let ino = fs.create(ROOT, OsStr::new(file), Owner::root(0o644)).unwrap().ino;
        fs.setxattr(ino, OsStr::new("user.a"), file.as_bytes(), XattrFlags::ANY).unwrap();
        made.push(ino);
    }
    fs.unmount().unwrap();
    (dev, made[0], made[1])
}

/// Applies `edit` to inode `ino`, its checksum made right again.
fn edit_inode(dev: &Arc<dyn Device>, ino: u64, edit: impl FnOnce(&mut DiskInode)) {
    let (block, at) = ffs::read_superblock(dev).unwrap().inode_place(ino as u32);
    let mut inode = stored(dev, ino);
    edit(&mut inode);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    inode.encode(ino as u32, &mut buf[at..at + INODE_BYTES]);
    dev.write_at(&buf, block * 4096).unwrap();
}

/// Applies `edit` to inode `ino`'s attribute block, resealed for `ino`
/// when `reseal` (a field past its bound behind a right checksum).
fn edit_block(dev: &Arc<dyn Device>, ino: u64, reseal: bool, edit: impl FnOnce(&mut [u8])) {
    let at = u64::from(stored(dev, ino).xattr) * 4096;
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, at).unwrap();
    edit(&mut buf);
    if reseal {
        Frame::zeroed(12).seal(&(ino as u32).to_le_bytes(), &mut buf);
    }
    dev.write_at(&buf, at).unwrap();
}

fn classes(dev: &Arc<dyn Device>, repair: Repair) -> Vec<Class> {
    fsck(dev, repair).unwrap().findings.iter().map(|f| f.class).collect()
}

/// `-y` repairs everything it found, and a check after finds nothing.
fn yes_leaves_it_clean(dev: &Arc<dyn Device>) {
    let repaired = fsck(dev, Repair::Yes).unwrap();
    assert!(!repaired.damage_left(), "{:?}", repaired.findings);
    assert_checks_clean(dev, "after -y");
}

#[test]
fn attribute_blocks_check_clean() {
    let (dev, _, _) = with_attributes();
    assert_checks_clean(&dev, "as made");
}

#[test]
fn a_torn_attribute_block_is_found_left_by_preen_and_cleared_with_yes() {
    let (dev, f, _) = with_attributes();
    edit_block(&dev, f, false, |b| b[40] ^= 0xff);
    assert!(classes(&dev, Repair::No).contains(&Class::BadXattrBlock));
    assert!(fsck(&dev, Repair::Preen).unwrap().damage_left(), "preen leaves it to a person");
    yes_leaves_it_clean(&dev);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.getxattr(f, OsStr::new("user.a")), Err(Errno::NODATA), "cleared");
    assert_eq!(fs.getattr(f).unwrap().blocks, 0);
}

#[test]
fn a_field_past_its_bound_behind_a_right_checksum_is_found_by_name() {
    let (dev, f, _) = with_attributes();
    edit_block(&dev, f, true, |b| b[16..18].copy_from_slice(&0u16.to_le_bytes()));
    let report = fsck(&dev, Repair::No).unwrap();
    let found = report.findings.iter().find(|r| r.class == Class::BadXattrBlock).expect("found");
    assert!(found.detail.contains("(count)"), "{}", found.detail);
    yes_leaves_it_clean(&dev);
}

#[test]
fn a_block_written_for_another_inode_is_found() {
    let (dev, f, g) = with_attributes();
    // g's block, copied whole over f's: its checksum is seeded with g.
    let g_block = u64::from(stored(&dev, g).xattr) * 4096;
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, g_block).unwrap();
    edit_block(&dev, f, false, |b| b.copy_from_slice(&buf));
    assert!(classes(&dev, Repair::No).contains(&Class::BadXattrBlock));
    yes_leaves_it_clean(&dev);
}

#[test]
fn two_inodes_naming_one_attribute_block_is_a_block_claimed_twice() {
    let (dev, f, g) = with_attributes();
    let shared = stored(&dev, f).xattr;
    edit_inode(&dev, g, |i| i.xattr = shared);
    assert!(classes(&dev, Repair::No).contains(&Class::BlockClaimedTwice));
    yes_leaves_it_clean(&dev);
}

#[test]
fn an_attribute_pointer_outside_the_data_area_is_a_bad_block_pointer() {
    let (dev, f, _) = with_attributes();
    edit_inode(&dev, f, |i| i.xattr = 1);
    assert!(classes(&dev, Repair::No).contains(&Class::BadBlockPointer));
    assert_eq!(mount(&dev, Policy::Async).getxattr(f, OsStr::new("user.a")), Err(Errno::IO));
    yes_leaves_it_clean(&dev);
}

#[test]
fn an_attribute_block_not_counted_in_the_units_is_a_wrong_block_count_preened() {
    let (dev, f, _) = with_attributes();
    edit_inode(&dev, f, |i| i.blocks_512 = 0);
    assert_eq!(classes(&dev, Repair::No), vec![Class::WrongBlockCount]);
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

#[test]
fn an_attribute_block_free_in_the_map_is_found_and_preened() {
    let (dev, f, _) = with_attributes();
    let block = u64::from(stored(&dev, f).xattr);
    let sb = ffs::read_superblock(&dev).unwrap();
    let (map, bit) = (sb.group_start(0) + 1, block - sb.group_start(0));
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, map * 4096).unwrap();
    buf[(bit / 8) as usize] &= !(1 << (bit % 8));
    dev.write_at(&buf, map * 4096).unwrap();
    assert!(classes(&dev, Repair::No).contains(&Class::BlockInUseButFree));
    assert!(!fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert!(fsck(&dev, Repair::No).unwrap().clean());
}

/// A file with `user.` attributes whose mode damage made a FIFO (size
/// and pointers none, as an empty file has): a FIFO cannot hold them, so
/// `-y` drops them (the block cleared when nothing else is in it) and
/// keeps a `trusted.` one; listxattr then names no attribute getxattr
/// refuses.
#[test]
fn user_attributes_on_a_kind_that_cannot_hold_them_are_dropped_and_the_rest_kept() {
    let (dev, f, g) = with_attributes();
    let fs = mount(&dev, Policy::Async);
    fs.setxattr(g, OsStr::new("trusted.t"), b"kept", XattrFlags::ANY).unwrap();
    fs.unmount().unwrap();
    for ino in [f, g] {
        edit_inode(&dev, ino, |i| i.mode = ffs::format::S_IFIFO | 0o644);
    }
    user_attributes_are_dropped(&dev, f, g);
}

/// The same for every kind but a file or a directory: a symlink (its
/// target inline), a character or block device, a socket.
#[test]
fn user_attributes_on_a_symlink_a_device_or_a_socket_are_dropped_and_the_rest_kept() {
    use ffs::format::{S_IFBLK, S_IFCHR, S_IFLNK, S_IFSOCK};
    for kind in [S_IFLNK, S_IFCHR, S_IFBLK, S_IFSOCK] {
        let (dev, f, g) = with_attributes();
        let fs = mount(&dev, Policy::Async);
        fs.setxattr(g, OsStr::new("trusted.t"), b"kept", XattrFlags::ANY).unwrap();
        fs.unmount().unwrap();
        for ino in [f, g] {
            edit_inode(&dev, ino, |i| {
                i.mode = kind | 0o644;
                // A file's data is no special file's or inline target's.
                (i.size, i.blocks_512, i.direct, i.single, i.double) = (0, 8, [0; 12], 0, 0);
            });
        }
        user_attributes_are_dropped(&dev, f, g);
    }
}

/// `f` holds user. attributes only, `g` a trusted. one besides, and
/// neither's kind can hold user. ones: fsck names both, `-y` drops them.
fn user_attributes_are_dropped(dev: &Arc<dyn Device>, f: u64, g: u64) {
    let found = fsck(dev, Repair::No).unwrap();
    let about: Vec<&str> = found
        .findings
        .iter()
        .filter(|x| x.class == Class::BadXattrBlock)
        .map(|x| x.detail.as_str())
        .collect();
    assert_eq!(about.len(), 2, "{:?}", found.findings);
    assert!(about.iter().all(|d| d.contains("a user. attribute the kind cannot hold")), "{about:?}");
    assert!(!fsck(dev, Repair::Yes).unwrap().damage_left());
    assert_checks_clean(dev, "after -y");
    assert_eq!(stored(dev, f).xattr, 0, "nothing left in f's block: cleared");
    let fs = mount(dev, Policy::Async);
    assert_eq!(fs.listxattr(f).unwrap(), b"");
    assert_eq!(fs.listxattr(g).unwrap(), b"trusted.t\0");
    assert_eq!(fs.getxattr(g, OsStr::new("trusted.t")).unwrap(), b"kept");
    fs.unmount().unwrap();
}
