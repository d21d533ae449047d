//! fallocate (allocation, zeroing, punched holes), SEEK_DATA and
//! SEEK_HOLE, and copy_file_range, under every policy: what they leave,
//! what the image keeps after a remount, and the order punched blocks go
//! free in.

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::fsck::{fsck, Repair};
use ffs::Policy;
use fsapi::{Errno, Fallocate, FileSystem, Owner, Whence, ROOT};

use crate::common::{fresh, mount};

const B: u64 = 4096;
const POLICIES: [Policy; 4] = [Policy::Async, Policy::Sync, Policy::Softdep, Policy::Log];
const KEEP: Fallocate = Fallocate::Allocate { keep_size: true };
const GROW: Fallocate = Fallocate::Allocate { keep_size: false };

fn file(fs: &dyn FileSystem, name: &str, bytes: &[u8]) -> u64 {
    let f = fs.create(ROOT, OsStr::new(name), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, bytes).unwrap();
    f.ino
}

fn read(fs: &dyn FileSystem, ino: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = fs.read(ino, offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Unmounts, checks the image clean and mounts it again.
fn remount(fs: ffs::Ffs, dev: &Arc<dyn Device>, policy: Policy) -> ffs::Ffs {
    fs.unmount().unwrap();
    let report = fsck(dev, Repair::No).unwrap();
    assert!(report.clean(), "{policy:?}: {:?}", report.findings);
    mount(dev, policy)
}

#[test]
fn blocks_allocated_over_a_removed_files_data_read_as_zeros_after_a_remount() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let old = file(&fs, "old", &vec![0xaa; 2 << 20]);
        fs.forget(old, 1);
        fs.unlink(ROOT, OsStr::new("old")).unwrap();
        fs.sync().unwrap();
        let f = file(&fs, "f", b"");
        fs.fallocate(f, GROW, 0, 3 << 20).unwrap();
        assert!(read(&fs, f, 0, 3 << 20).iter().all(|&b| b == 0), "{policy:?}");
        let fs = remount(fs, &dev, policy);
        let f = fs.lookup(ROOT, OsStr::new("f")).unwrap();
        assert_eq!((f.size, f.blocks >= (3 << 20) / 512), (3 << 20, true), "{policy:?}");
        assert!(read(&fs, f.ino, 0, 3 << 20).iter().all(|&b| b == 0), "{policy:?}");
    }
}

#[test]
fn blocks_kept_past_the_end_count_and_are_data_once_the_size_reaches_them() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let f = file(&fs, "f", b"abc");
    fs.fallocate(f, KEEP, 0, 4 * B).unwrap();
    let attr = fs.getattr(f).unwrap();
    assert_eq!((attr.size, attr.blocks), (3, 4 * B / 512));
    assert_eq!(fs.lseek(f, 0, Whence::Hole), Ok(3), "the end is the only hole");
    fs.setattr(f, &fsapi::SetAttr { size: Some(3 * B), ..Default::default() }).unwrap();
    assert_eq!(fs.lseek(f, 0, Whence::Hole), Ok(3 * B), "kept blocks are data within the size");
    let fs = remount(fs, &dev, Policy::Softdep);
    assert_eq!(fs.getattr(f).unwrap().blocks, 4 * B / 512);
}

#[test]
fn a_punch_frees_the_whole_blocks_inside_and_zeroes_its_edges_under_every_policy() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let f = file(&fs, "f", &vec![0xff; 10 * B as usize]);
        fs.sync().unwrap();
        let free = fs.statfs().unwrap().blocks_free;
        fs.fallocate(f, Fallocate::PunchHole, B + 100, 6 * B).unwrap();
        fs.sync().unwrap();
        let freed = fs.statfs().unwrap().blocks_free - free;
        assert_eq!(freed, 5, "{policy:?}: blocks 2 to 6 lie wholly inside");
        let fs = remount(fs, &dev, policy);
        let bytes = read(&fs, f, 0, 10 * B as usize);
        let punched = (B + 100) as usize..(7 * B + 100) as usize;
        assert!(bytes[punched.clone()].iter().all(|&b| b == 0), "{policy:?}");
        assert!(bytes[..punched.start].iter().chain(&bytes[punched.end..]).all(|&b| b == 0xff), "{policy:?}");
        assert_eq!(fs.getattr(f).unwrap().size, 10 * B, "{policy:?}: the size stays");
        assert_eq!(fs.lseek(f, 0, Whence::Hole), Ok(2 * B), "{policy:?}");
        assert_eq!(fs.lseek(f, 2 * B, Whence::Data), Ok(7 * B), "{policy:?}");
    }
}

#[test]
fn a_punch_over_the_indirect_blocks_frees_those_it_covers_whole() {
    for policy in POLICIES {
        let dev = fresh(64 << 20);
        let fs = mount(&dev, policy);
        let f = file(&fs, "f", b"head");
        // Blocks in the single indirect's span and in two singles of the double's.
        for at in [20 * B, (12 + 1024 + 5) * B, (12 + 2048 + 7) * B, (12 + 3072 + 1) * B] {
            fs.write(f, at, &[1u8; 3 * B as usize]).unwrap();
        }
        let before = fs.getattr(f).unwrap().blocks;
        // From inside the first single under the double to the file's end:
        // the second single is covered whole, the first only in part.
        fs.fallocate(f, Fallocate::PunchHole, (12 + 1024 + 6) * B, 3000 * B).unwrap();
        // Two data blocks of the first single, the second's three and its
        // indirect block, the third's three (the range ends inside its
        // span: it stays).
        assert_eq!(before - fs.getattr(f).unwrap().blocks, (2 + 4 + 3) * B / 512, "{policy:?}");
        let fs = remount(fs, &dev, policy);
        assert_eq!(read(&fs, f, (12 + 1024 + 5) * B, 4), vec![1u8; 4], "{policy:?}");
        assert_eq!(fs.lseek(f, (12 + 1024 + 6) * B, Whence::Data), Err(Errno::NXIO), "{policy:?}");
    }
}

#[test]
fn a_zeroed_range_reads_zeros_and_keeps_its_blocks() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    let f = file(&fs, "f", &vec![9; 3 * B as usize]);
    let blocks = fs.getattr(f).unwrap().blocks;
    fs.fallocate(f, Fallocate::ZeroRange { keep_size: true }, 10, 2 * B).unwrap();
    let bytes = read(&fs, f, 0, 3 * B as usize);
    assert!(bytes[10..(2 * B + 10) as usize].iter().all(|&b| b == 0));
    assert!(bytes[..10].iter().chain(&bytes[(2 * B + 10) as usize..]).all(|&b| b == 9));
    assert_eq!(fs.getattr(f).unwrap().blocks, blocks);
}

#[test]
fn seek_skips_the_holes_of_a_sparse_file_across_its_indirect_blocks() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let f = file(&fs, "f", b"");
    let far = (12 + 1024 + 3000) * B;
    fs.write(f, far + 5, b"x").unwrap();
    assert_eq!(fs.lseek(f, 0, Whence::Data), Ok(far));
    assert_eq!(fs.lseek(f, 0, Whence::Hole), Ok(0));
    assert_eq!(fs.lseek(f, far + 1, Whence::Hole), Ok(far + 6), "the end");
}

#[test]
fn past_the_largest_file_is_efbig_and_leaves_the_file_as_it_was() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let f = file(&fs, "f", b"abc");
    let got = fs.fallocate(f, GROW, 0, ffs::format::FILE_BYTES_MAX + 1);
    assert_eq!(got, Err(Errno::FBIG));
    let attr = fs.getattr(f).unwrap();
    assert_eq!((attr.size, attr.blocks), (3, 8));
}

#[test]
fn more_than_the_free_blocks_is_enospc_and_takes_nothing() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let f = file(&fs, "f", b"abc");
        let free = fs.statfs().unwrap().blocks_free;
        let got = fs.fallocate(f, GROW, 0, (free + 10) * B);
        assert_eq!(got, Err(Errno::NOSPC), "{policy:?}");
        let attr = fs.getattr(f).unwrap();
        assert_eq!((attr.size, attr.blocks, fs.statfs().unwrap().blocks_free), (3, 8, free), "{policy:?}");
    }
}

/// The free blocks are as many as the range's holes, but the range needs
/// an indirect block too: the maps run out at its last block, and the
/// blocks the call took are given back (the indirect block stays).
#[test]
fn enospc_at_the_last_block_gives_back_the_blocks_the_call_took() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let f = file(&fs, "f", b"abc");
        // Fewer free blocks than the single indirect block maps.
        let filler = file(&fs, "filler", b"");
        fs.fallocate(filler, GROW, 0, (fs.statfs().unwrap().blocks_free - 500) * B).unwrap();
        let free = fs.statfs().unwrap().blocks_free;
        let got = fs.fallocate(f, GROW, 12 * B, free * B);
        assert_eq!(got, Err(Errno::NOSPC), "{policy:?}");
        let attr = fs.getattr(f).unwrap();
        assert_eq!((attr.size, attr.blocks), (3, 8 + 8), "{policy:?}: the data block and the indirect one");
        fs.sync().unwrap();
        assert_eq!(fs.statfs().unwrap().blocks_free, free - 1, "{policy:?}");
        remount(fs, &dev, policy);
    }
}

#[test]
fn a_copy_larger_than_a_chunk_reads_back_after_a_remount() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    let data: Vec<u8> = (0..(3 << 20) + 77).map(|i: u32| (i % 251) as u8).collect();
    let from = file(&fs, "from", &data);
    let to = file(&fs, "to", b"");
    assert_eq!(fs.copy_file_range(from, 0, to, 10, 1 << 30), Ok(data.len() as u64));
    let fs = remount(fs, &dev, Policy::Log);
    let mut expected = vec![0u8; 10];
    expected.extend_from_slice(&data);
    assert_eq!(read(&fs, to, 0, expected.len() + 1), expected);
}

#[test]
fn under_sync_a_punched_hole_is_on_the_disk_when_fallocate_returns() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let f = file(&fs, "f", &vec![5; 8 * B as usize]);
    fs.sync().unwrap();
    fs.fallocate(f, Fallocate::PunchHole, 0, 8 * B).unwrap();
    drop(fs); // a crash: nothing written after the call
    let options = ffs::MountOptions { unclean: ffs::Unclean::Force, ..Default::default() };
    let fs = ffs::Ffs::mount(Arc::clone(&dev), &options).unwrap();
    assert_eq!(fs.getattr(f).unwrap().blocks, 0, "the inode without its pointers");
}

#[test]
fn under_softdep_blocks_a_punch_freed_stay_taken_until_the_disk_inode_lets_go() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    let f = file(&fs, "f", &vec![5; 10 * B as usize]);
    fs.sync().unwrap();
    let before = fs.statfs().unwrap().blocks_free;
    fs.fallocate(f, Fallocate::PunchHole, 0, 8 * B).unwrap();
    assert_eq!(fs.statfs().unwrap().blocks_free, before, "released while the disk inode points to them");
    fs.sync().unwrap();
    assert_eq!(fs.statfs().unwrap().blocks_free, before + 8, "the blocks never came back");
}
