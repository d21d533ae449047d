//! A file's fsync under `sync` and `async`: what it writes, and what a
//! crash just after it leaves.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{CrashPoint, CrashPolicy, Device, MemDevice, Recording, RecordingDevice, Replayer};
use ffs::fsck::{fsck, Repair};
use ffs::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};

/// Blocks the other file leaves dirty: far more than the fsync'd file's.
const OTHER_BLOCKS: usize = 512;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A mount whose cache holds the other file's dirty blocks without
/// evicting any.
fn mount_roomy(dev: Arc<dyn Device>, policy: Policy) -> Ffs {
    Ffs::mount(dev, &MountOptions { policy, cache_bytes: 16 << 20, ..Default::default() }).unwrap()
}

/// A small file and a large one written, neither synced; the small one's
/// inode number.
fn small_beside_large(fs: &Ffs, small: &[u8]) -> u64 {
    let big = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
    fs.write(big.ino, 0, &pattern(OTHER_BLOCKS * 4096, 1)).unwrap();
    let f = fs.create(ROOT, OsStr::new("small"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, small).unwrap();
    f.ino
}

/// Under `sync` and `async`, an fsync of a one-block file while another
/// file has 512 dirty blocks writes the small file's block and its inode
/// table block (a handful), not the other file's, and flushes once.
#[test]
fn under_sync_and_async_an_fsync_writes_the_files_own_blocks_not_anothers() {
    for policy in [Policy::Sync, Policy::Async] {
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
        mkfs(&mem, &MkfsOptions::default()).unwrap();
        let fs = mount_roomy(Arc::clone(&mem), policy);
        let ino = small_beside_large(&fs, &pattern(4096, 2));
        let before = fs.cache_stats();
        fs.fsync(ino, false).unwrap();
        let after = fs.cache_stats();
        let written = after.blocks_written - before.blocks_written;
        assert!((2..=4).contains(&written), "{policy:?}: {written} blocks written, its data and inode");
        assert_eq!(after.flushes - before.flushes, 1, "{policy:?}: one flush");
        fs.sync().unwrap();
        let rest = fs.cache_stats().blocks_written - after.blocks_written;
        assert!(
            rest >= OTHER_BLOCKS as u64,
            "{policy:?}: the other file was left dirty ({rest} written by sync)"
        );
    }
}

/// Under `sync` and `async`, a crash just after an fsync (every write
/// not flushed lost: the other file's blocks) leaves the fsync'd file
/// with its size and data, and preen repairs the rest. Under `async` the
/// name was made durable by a sync first: the file's fsync does not
/// write its directory.
#[test]
fn under_sync_and_async_a_crash_after_an_fsync_leaves_the_files_data_and_size() {
    for policy in [Policy::Sync, Policy::Async] {
        let mem = Arc::new(MemDevice::new(64 << 20).unwrap());
        let dev: Arc<dyn Device> = mem.clone();
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
        let recording = Recording::new();
        let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
        let fs = mount_roomy(recorded, policy);
        let data = pattern(10_000, 3);
        let ino = fs.create(ROOT, OsStr::new("small"), Owner::root(0o644)).unwrap().ino;
        if policy == Policy::Async {
            fs.sync().unwrap();
        }
        let big = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
        fs.write(big.ino, 0, &pattern(OTHER_BLOCKS * 4096, 1)).unwrap();
        fs.write(ino, 0, &data).unwrap();
        fs.fsync(ino, false).unwrap();

        let events = recording.events();
        let point = CrashPoint { after_events: events.len(), policy: CrashPolicy::DropUnflushed, seed: 0 };
        let image: Arc<dyn Device> =
            Arc::new(Replayer::new(events, vec![initial]).images_at(point).unwrap().remove(0));
        let report = fsck(&image, Repair::Preen).unwrap();
        assert!(!report.damage_left(), "{policy:?}: {:?}", report.findings);
        let after = Ffs::mount(image, &MountOptions::default()).unwrap();
        let f = after.lookup(ROOT, OsStr::new("small")).unwrap();
        assert_eq!(f.size, data.len() as u64, "{policy:?}: the size fsync'd");
        let mut read = vec![0u8; data.len()];
        assert_eq!(after.read(f.ino, 0, &mut read).unwrap(), data.len());
        assert!(read == data, "{policy:?}: the bytes fsync'd");
    }
}
