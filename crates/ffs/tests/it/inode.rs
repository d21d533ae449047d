//! Crafted inodes behind a right checksum: values no inode can have are
//! garbage (EIO to a caller, `garbage_inode` to fsck), never an index
//! past a block, an overflow or a walk of 2^64 bytes.

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::format::{DiskInode, InodeSlot, INODE_BYTES};
use ffs::Policy;
use fsapi::{Errno, FileSystem, Owner, ROOT};

use crate::common::{fresh, mount};

/// Applies `edit` to inode `ino` of the unmounted `dev`, its checksum
/// made right.
fn craft(dev: &Arc<dyn Device>, ino: u32, edit: impl FnOnce(&mut DiskInode)) {
    let (block, at) = ffs::read_superblock(dev).unwrap().inode_place(ino);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    let InodeSlot::Used(mut inode) = DiskInode::decode(ino, &buf[at..at + INODE_BYTES]) else {
        panic!("inode {ino} in use")
    };
    edit(&mut inode);
    inode.encode(ino, &mut buf[at..at + INODE_BYTES]);
    dev.write_at(&buf, block * 4096).unwrap();
}

/// A symlink whose size says its target runs past its one block.
#[test]
fn a_symlink_longer_than_a_block_reads_as_an_error() {
    let dev = fresh(8 << 20);
    let fs = mount(&dev, Policy::Async);
    let target = "t".repeat(300);
    let link = fs.symlink(ROOT, OsStr::new("l"), OsStr::new(&target), Owner::root(0o777)).unwrap();
    fs.unmount().unwrap();
    craft(&dev, link.ino as u32, |i| i.size = 5000);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.readlink(link.ino), Err(Errno::IO));
}

/// A file whose count of 512-byte units is at the end of its range: a
/// write that allocates would add to it.
#[test]
fn a_file_with_a_block_count_at_the_end_of_its_range_is_refused_not_overflowed() {
    let dev = fresh(8 << 20);
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
    craft(&dev, f.ino as u32, |i| i.blocks_512 = u64::MAX - 3);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.write(f.ino, 0, &[1u8; 4096]), Err(Errno::IO));
    fs.unmount().unwrap();
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    assert!(report.findings.iter().any(|f| f.class.name() == "garbage_inode"), "{:?}", report.findings);
}
