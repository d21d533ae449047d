//! Crafted superblocks, each behind a right checksum (damage no checksum
//! catches): a field past its bound in both slots is refused by name, by
//! a mount and by fsck; in one slot, the other slot is used and the bad
//! one named; values at the end of their range are carried without an
//! overflow. Written against the calls the file system has always had, so
//! that each fails on the code before the bounds (a panic, an overflow,
//! an allocation of gigabytes, or a message that names no field).

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::fsck::{fsck, Repair};
use ffs::{Ffs, MountOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};

use crate::common::{fresh, mount};

/// A small file system, mounted and unmounted once: both slots valid.
fn image() -> Arc<dyn Device> {
    let dev = fresh(8 << 20);
    mount(&dev, Policy::Async).unmount().unwrap();
    dev
}

/// Sets the little-endian field of `value.len()` bytes at `at` of slot
/// `slot` and makes its checksum right again.
fn craft(dev: &Arc<dyn Device>, slot: u64, at: usize, value: &[u8]) {
    let mut block = vec![0u8; 4096];
    dev.read_at(&mut block, slot * 4096).unwrap();
    block[at..at + value.len()].copy_from_slice(value);
    codec::Frame::zeroed(12).seal(&[], &mut block[..512]);
    dev.write_at(&block, slot * 4096).unwrap();
}

fn craft_both(dev: &Arc<dyn Device>, at: usize, value: &[u8]) {
    craft(dev, 0, at, value);
    craft(dev, 1, at, value);
}

/// The slot a reader takes (the higher generation).
fn newest(dev: &Arc<dyn Device>) -> u64 {
    ffs::read_superblock(dev).unwrap().generation % 2
}

/// A mount and fsck of `dev` both refuse it, naming `field` and its byte
/// in slot 0.
fn refused_naming(dev: &Arc<dyn Device>, field: &str, at: usize) {
    let named = format!("byte {at} ({field})");
    let err = Ffs::mount(Arc::clone(dev), &MountOptions::default()).err().expect("the mount is refused");
    assert!(err.to_string().contains(&named), "{field}: {err}");
    assert!(err.to_string().contains("neither superblock slot"), "{err}");
    let err = fsck(dev, Repair::No).expect_err("fsck refuses it");
    assert!(err.to_string().contains(&named), "{field}: {err}");
}

#[test]
fn a_block_size_of_0_is_refused_by_name() {
    let dev = image();
    craft_both(&dev, 24, &0u32.to_le_bytes());
    refused_naming(&dev, "block_bytes", 24);
}

/// 2^32-1 groups would have the mount and fsck allocate 48 GiB of
/// counts, and the group starts run past the device.
#[test]
fn a_group_count_of_2_to_the_32_is_refused_by_name() {
    let dev = image();
    craft_both(&dev, 56, &u32::MAX.to_le_bytes());
    refused_naming(&dev, "groups", 56);
}

#[test]
fn a_log_region_past_the_device_end_is_refused_by_name() {
    // Past the device with the groups moved after it, and so long that
    // its end overflows.
    for log_blocks in [(8 << 20) / 4096 + 100, u64::MAX - 1] {
        let dev = image();
        craft_both(&dev, 48, &log_blocks.to_le_bytes());
        craft_both(&dev, 72, &log_blocks.wrapping_add(2).to_le_bytes());
        refused_naming(&dev, "log_blocks", 48);
    }
}

#[test]
fn an_inode_count_of_2_to_the_32_less_1_is_refused_by_name() {
    for (at, field) in [(88, "free_inodes"), (64, "inodes_per_group")] {
        let dev = image();
        let value: &[u8] =
            if at == 88 { &(u64::from(u32::MAX)).to_le_bytes() } else { &u32::MAX.to_le_bytes() };
        craft_both(&dev, at, value);
        refused_naming(&dev, field, at);
    }
}

#[test]
fn a_file_system_larger_than_its_device_is_refused_by_name() {
    let dev = image();
    craft_both(&dev, 32, &((8u64 << 20) / 4096 + 1).to_le_bytes());
    refused_naming(&dev, "blocks", 32);
}

/// The newest slot with a generation of 2^64-1: the older slot is used,
/// the damaged one named, and the mount writes the next generation
/// without an overflow.
#[test]
fn a_slot_with_a_generation_at_the_end_of_its_range_is_passed_over() {
    let dev = image();
    let slot = newest(&dev);
    let older = ffs::read_superblock(&dev).unwrap().generation - 1;
    craft(&dev, slot, 16, &(u64::MAX - 1 + slot).to_le_bytes());
    assert_eq!(ffs::read_superblock(&dev).unwrap().generation, older);
    let report = fsck(&dev, Repair::No).unwrap();
    let detail: Vec<&str> = report.findings.iter().map(|f| f.detail.as_str()).collect();
    assert!(detail.iter().any(|d| d.contains("(generation)") && d.contains("is used instead")), "{detail:?}");
    // The slot left is the mount's, which says not clean: only a forced
    // mount goes on (or fsck, which rewrites the slot passed over).
    let options = MountOptions { unclean: ffs::Unclean::Force, ..Default::default() };
    let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
    assert_eq!(fs.unclean().map(|u| u.mounted), Some(ffs::Mounted::Forced));
    fs.unmount().unwrap();
    assert_eq!(ffs::read_superblock(&dev).unwrap().generation, older + 2, "mounted and unmounted");
}

/// A slot passed over is a finding fsck -n leaves and fsck -p repairs by
/// writing the slot in use to it: both slots pass again.
#[test]
fn fsck_names_a_slot_passed_over_and_preen_rewrites_it() {
    let dev = image();
    let slot = newest(&dev);
    craft(&dev, slot, 24, &0u32.to_le_bytes());
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.damage_left(), "{:?}", report.findings);
    assert!(report.findings[0].detail.contains("(block_bytes)"), "{:?}", report.findings);
    let report = fsck(&dev, Repair::Preen).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    assert!(fsck(&dev, Repair::No).unwrap().clean(), "both slots pass");
}

/// A mount count at the end of its range stays there.
#[test]
fn a_mount_count_of_2_to_the_32_less_1_is_carried_without_an_overflow() {
    let dev = image();
    craft_both(&dev, 108, &u32::MAX.to_le_bytes());
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.superblock().mounts, u32::MAX);
    fs.unmount().unwrap();
}

/// A summary of no free blocks over groups that have some: the mount
/// takes the groups' counts, and an allocation does not take one from 0.
#[test]
fn a_summary_count_of_0_over_free_groups_does_not_underflow() {
    let dev = image();
    for at in [80, 88] {
        craft_both(&dev, at, &0u64.to_le_bytes());
    }
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &[1u8; 8192]).unwrap();
    fs.unmount().unwrap();
}
