use std::sync::Arc;

use device::{Device, MemDevice};
use ffs::format::{DiskInode, InodeSlot, INODE_BYTES};
use ffs::fsck::{fsck, Repair};
use ffs::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};

/// A new file system on a memory device of `bytes`.
pub fn fresh(bytes: u64) -> Arc<dyn Device> {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(bytes).unwrap());
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    dev
}

pub fn mount(dev: &Arc<dyn Device>, policy: Policy) -> Ffs {
    Ffs::mount(Arc::clone(dev), &MountOptions { policy, cache_bytes: 1 << 20, ..Default::default() }).unwrap()
}

/// The crc32c of `bytes` with the four bytes at `at` zero, seeded with
/// inode number `ino` (an inode's and an attribute block's checksum), as
/// golden tests give a field: lowercase hex of its little-endian bytes.
pub fn seeded_crc_hex(ino: u32, bytes: &[u8], at: usize) -> String {
    let mut zeroed = bytes.to_vec();
    zeroed[at..at + 4].fill(0);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&ino.to_le_bytes()), &zeroed);
    codec::golden::hex(&crc.to_le_bytes())
}

/// Asserts that fsck -n finds nothing on `dev` (`what` says which case).
pub fn assert_checks_clean(dev: &Arc<dyn Device>, what: &str) {
    let report = fsck(dev, Repair::No).unwrap();
    assert!(report.clean(), "{what}: {:?}", report.findings);
}

/// The inode of `ino` as stored on `dev` (unmounted, or as a crash left it).
pub fn stored(dev: &Arc<dyn Device>, ino: u64) -> DiskInode {
    let (block, at) = ffs::read_superblock(dev).unwrap().inode_place(ino as u32);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    let InodeSlot::Used(inode) = DiskInode::decode(ino as u32, &buf[at..at + INODE_BYTES]) else {
        panic!("inode {ino} in use")
    };
    inode
}
