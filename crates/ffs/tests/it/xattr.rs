//! Extended attributes on iolab's file system: all of an inode's in one
//! block of its own, counted in its units, written to a new block at
//! every change (the old one freed), freed with the inode, and ordered by
//! each policy so that a crash leaves what the policy promises.

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::format::{DiskInode, InodeSlot, XattrBlock, INODE_BYTES};
use ffs::fsck::{fsck, Repair};
use ffs::Policy;
use fsapi::xattr::ROOM_BYTES;
use fsapi::{Errno, FileSystem, FileType, Owner, XattrFlags, ROOT};

use crate::common::{assert_checks_clean, fresh, mount, stored};

const POLICIES: [Policy; 4] = [Policy::Sync, Policy::Softdep, Policy::Log, Policy::Async];

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// The attributes inode `ino`'s block holds on `dev`.
fn stored_xattrs(dev: &Arc<dyn Device>, ino: u64) -> XattrBlock {
    let block = stored(dev, ino).xattr;
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, u64::from(block) * 4096).unwrap();
    XattrBlock::decode(&buf, ino as u32, block, "dev").unwrap()
}

/// A file `f` in the root with `user.a` = `value`, under `policy`: the
/// mount and the file's inode.
fn with_attribute(dev: &Arc<dyn Device>, policy: Policy, value: &[u8]) -> (ffs::Ffs, u64) {
    let fs = mount(dev, policy);
    let f = fs.create(ROOT, name("f"), Owner::root(0o644)).unwrap().ino;
    fs.setxattr(f, name("user.a"), value, XattrFlags::ANY).unwrap();
    (fs, f)
}

#[test]
fn attributes_survive_a_remount_under_every_policy() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let (fs, f) = with_attribute(&dev, policy, b"hello");
        fs.setxattr(f, name("trusted.t"), b"root's", XattrFlags::ANY).unwrap();
        fs.unmount().unwrap();
        let fs = mount(&dev, policy);
        assert_eq!(fs.getxattr(f, name("user.a")).unwrap(), b"hello", "{policy:?}");
        assert_eq!(fs.listxattr(f).unwrap(), b"user.a\0trusted.t\0", "{policy:?}");
    }
}

#[test]
fn the_attribute_block_counts_in_the_inodes_units() {
    let dev = fresh(16 << 20);
    let (fs, f) = with_attribute(&dev, Policy::Async, b"v");
    assert_eq!(fs.getattr(f).unwrap().blocks, 8);
    fs.removexattr(f, name("user.a")).unwrap();
    assert_eq!(fs.getattr(f).unwrap().blocks, 0, "the last attribute removed frees the block");
    fs.unmount().unwrap();
    assert_eq!(stored(&dev, f).xattr, 0);
}

#[test]
fn every_change_writes_a_new_block_and_frees_the_old_one() {
    let dev = fresh(16 << 20);
    let (fs, f) = with_attribute(&dev, Policy::Async, b"one");
    let free_before = fs.statfs().unwrap().blocks_free;
    fs.unmount().unwrap();
    let first = stored(&dev, f).xattr;
    let fs = mount(&dev, Policy::Async);
    fs.setxattr(f, name("user.a"), b"two", XattrFlags::REPLACE).unwrap();
    assert_eq!(fs.statfs().unwrap().blocks_free, free_before, "one block taken, one given back");
    fs.unmount().unwrap();
    let second = stored(&dev, f).xattr;
    assert_ne!(first, second, "never rewritten in place");
    assert_eq!(stored_xattrs(&dev, f).entries.values().next().unwrap(), b"two");
    assert_checks_clean(&dev, "after the unmount");
}

#[test]
fn a_file_removed_gives_its_attribute_block_back_under_every_policy() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let free = fs.statfs().unwrap().blocks_free;
        let f = fs.create(ROOT, name("f"), Owner::root(0o644)).unwrap().ino;
        fs.setxattr(f, name("user.a"), b"v", XattrFlags::ANY).unwrap();
        fs.forget(f, 1);
        fs.unlink(ROOT, name("f")).unwrap();
        fs.sync().unwrap();
        assert_eq!(fs.statfs().unwrap().blocks_free, free, "{policy:?}");
        fs.unmount().unwrap();
        assert_checks_clean(&dev, &format!("{policy:?}"));
    }
}

#[test]
fn what_would_not_fit_one_block_is_enospc_and_past_64_kib_e2big() {
    let dev = fresh(16 << 20);
    let (fs, f) = with_attribute(&dev, Policy::Async, &vec![1; ROOM_BYTES / 2 - 5]);
    fs.setxattr(f, name("user.b"), &vec![2; ROOM_BYTES / 2 - 5], XattrFlags::ANY).unwrap();
    assert_eq!(fs.setxattr(f, name("user.c"), b"", XattrFlags::ANY), Err(Errno::NOSPC));
    assert_eq!(fs.setxattr(f, name("user.c"), &vec![0; 65537], XattrFlags::ANY), Err(Errno::TOOBIG));
    assert_eq!(fs.getxattr(f, name("user.b")).unwrap().len(), ROOM_BYTES / 2 - 5);
}

#[test]
fn a_special_file_keeps_an_attribute_block_and_checks_clean() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let p = fs.mknod(ROOT, name("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap().ino;
    fs.setxattr(p, name("security.label"), b"fifo_t", XattrFlags::ANY).unwrap();
    assert_eq!(fs.setxattr(p, name("user.a"), b"v", XattrFlags::ANY), Err(Errno::PERM));
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "after the unmount");
    assert_eq!(mount(&dev, Policy::Async).getxattr(p, name("security.label")).unwrap(), b"fifo_t");
}

/// Under `sync` the new block is durable before the inode, and the inode
/// before setxattr returns: a crash then finds the attribute, and nothing
/// preen would not repair.
#[test]
fn under_sync_an_attribute_is_on_the_disk_when_setxattr_returns() {
    let dev = fresh(16 << 20);
    let (fs, f) = with_attribute(&dev, Policy::Sync, b"one");
    fs.setxattr(f, name("user.a"), b"two", XattrFlags::ANY).unwrap();
    drop(fs); // a crash: nothing written back, nothing unmounted
    let report = fsck(&dev, Repair::Preen).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert_eq!(mount(&dev, Policy::Async).getxattr(f, name("user.a")).unwrap(), b"two");
}

/// Under `softdep` the inode's pointer to a new block waits for the block
/// to be settled: written back once, never flushed, the disk's inode still
/// names the old block, which still holds the old value.
#[test]
fn under_softdep_the_inode_keeps_its_old_block_until_the_new_one_is_settled() {
    let dev = fresh(16 << 20);
    let (fs, f) = with_attribute(&dev, Policy::Softdep, b"one");
    fs.sync().unwrap();
    fs.setxattr(f, name("user.a"), b"two", XattrFlags::ANY).unwrap();
    fs.write_back_older(std::time::Duration::ZERO).unwrap();
    drop(fs);
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.findings.iter().all(|r| r.class.is_leak()), "{:?}", report.findings);
    assert_eq!(stored_xattrs(&dev, f).entries.values().next().unwrap(), b"one");
}

/// Under `log` a change is committed whole or not at all.
#[test]
fn under_log_an_attribute_synced_is_replayed_and_one_not_committed_is_not_there() {
    let dev = fresh(16 << 20);
    let (fs, f) = with_attribute(&dev, Policy::Log, b"one");
    fs.sync().unwrap();
    fs.setxattr(f, name("user.late"), b"lost", XattrFlags::ANY).unwrap();
    drop(fs);
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.replayed_commits > 0 && report.clean(), "{report:?}");
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.getxattr(f, name("user.a")).unwrap(), b"one");
    assert_eq!(fs.getxattr(f, name("user.late")), Err(Errno::NODATA));
}

/// An attribute block, byte for byte as docs/formats.md ("Extended
/// attributes") gives it: magic, version, the checksum seeded with the
/// owner's number, the count and bytes used, then each entry's namespace,
/// name length, value length, name and value, sorted; zeros after.
#[test]
fn an_attribute_block_is_byte_for_byte_the_documented_one() {
    let mut block = XattrBlock::default();
    for (n, v) in [("user.ab", &b"xyz"[..]), ("system.posix_acl_access", &[2, 0, 0, 0])] {
        block.entries.insert(fsapi::XattrName::parse(n.as_bytes()).unwrap(), v.to_vec());
    }
    let mut bytes = vec![0u8; 4096];
    block.encode(77, &mut bytes);
    let crc = crate::common::seeded_crc_hex(77, &bytes, 12);
    codec::golden::assert_layout(
        &bytes,
        &[
            (0, "494f4c4142584154"),
            (8, "01000000"),
            (12, &crc),
            (16, "0200"),
            (18, "3100"),
            (32, "01020300616278797a"),
            (41, "04000400"),
            (45, "02000000"),
        ],
    );
}

/// The inode names its attribute block at byte 252 (zero in version 1).
#[test]
fn the_inode_names_its_attribute_block_in_its_last_four_bytes() {
    let inode = DiskInode { mode: 0o100644, nlink: 1, xattr: 0x01020304, ..DiskInode::default() };
    let mut bytes = vec![0u8; INODE_BYTES];
    inode.encode(5, &mut bytes);
    assert_eq!(bytes[252..256], [4, 3, 2, 1]);
    assert_eq!(DiskInode::decode(5, &bytes), InodeSlot::Used(inode));
}
