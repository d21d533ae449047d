//! A file's fsync under `sync`, `async` and `softdep`: what it writes, and what a
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

/// Runs `work` on a new file system under `policy` over a recording
/// device, then crashes just after it (every write not flushed lost),
/// preens the image (asserting that preen leaves nothing) and mounts it.
fn crash_after(policy: Policy, work: impl FnOnce(&Ffs)) -> Ffs {
    let mem = Arc::new(MemDevice::new(64 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    work(&mount_roomy(recorded, policy));
    let events = recording.events();
    let point = CrashPoint { after_events: events.len(), policy: CrashPolicy::DropUnflushed, seed: 0 };
    let image: Arc<dyn Device> =
        Arc::new(Replayer::new(events, vec![initial]).images_at(point).unwrap().remove(0));
    let report = fsck(&image, Repair::Preen).unwrap();
    assert!(!report.damage_left(), "{policy:?}: {:?}", report.findings);
    Ffs::mount(image, &MountOptions::default()).unwrap()
}

fn read_at(fs: &Ffs, ino: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut read = vec![0u8; len];
    let n = fs.read(ino, offset, &mut read).unwrap();
    read.truncate(n);
    read
}

/// Under `sync` and `async`, a crash just after an fsync (every write
/// not flushed lost: the other file's blocks) leaves the fsync'd file
/// with its size and data, and preen repairs the rest. Under `async` the
/// name was made durable by a sync first: the file's fsync does not
/// write its directory.
#[test]
fn under_sync_and_async_a_crash_after_an_fsync_leaves_the_files_data_and_size() {
    let data = pattern(10_000, 3);
    for policy in [Policy::Sync, Policy::Async] {
        let after = crash_after(policy, |fs| {
            let ino = fs.create(ROOT, OsStr::new("small"), Owner::root(0o644)).unwrap().ino;
            if policy == Policy::Async {
                fs.sync().unwrap();
            }
            let big = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
            fs.write(big.ino, 0, &pattern(OTHER_BLOCKS * 4096, 1)).unwrap();
            fs.write(ino, 0, &data).unwrap();
            fs.fsync(ino, false).unwrap();
        });
        let f = after.lookup(ROOT, OsStr::new("small")).unwrap();
        assert_eq!(f.size, data.len() as u64, "{policy:?}: the size fsync'd");
        assert!(read_at(&after, f.ino, 0, data.len()) == data, "{policy:?}: the bytes fsync'd");
    }
}

/// Under `sync`, `async` and `softdep`, a file written through its
/// single and double indirect blocks and fsync'd is whole after a crash:
/// the fsync wrote the pointers in its indirect blocks, not only its data
/// (under `softdep`, once the blocks they point to were on the disk).
#[test]
fn an_fsync_writes_the_pointers_of_a_files_indirect_blocks() {
    // In the single indirect's range (from 48 KiB) and the double's
    // (from about 4 MiB).
    let pieces = [(100u64 << 10, pattern(8192, 4)), (5 << 20, pattern(12_000, 5))];
    for policy in [Policy::Sync, Policy::Async, Policy::Softdep] {
        let after = crash_after(policy, |fs| {
            let ino = fs.create(ROOT, OsStr::new("sparse"), Owner::root(0o644)).unwrap().ino;
            fs.sync().unwrap();
            for (offset, data) in &pieces {
                fs.write(ino, *offset, data).unwrap();
            }
            fs.fsync(ino, false).unwrap();
        });
        let f = after.lookup(ROOT, OsStr::new("sparse")).unwrap();
        for (offset, data) in &pieces {
            assert!(read_at(&after, f.ino, *offset, data.len()) == *data, "{policy:?}: at {offset}");
        }
    }
}

/// Under `async`, a new file fsync'd, then its directory fsync'd, is
/// found by its name after a crash: the directory's fsync wrote its
/// entries.
#[test]
fn under_async_an_fsync_of_the_directory_makes_a_new_name_in_it_durable() {
    let data = pattern(5000, 6);
    let after = crash_after(Policy::Async, |fs| {
        let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
        fs.sync().unwrap();
        let f = fs.create(d.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &data).unwrap();
        fs.fsync(f.ino, false).unwrap();
        fs.fsync(d.ino, false).unwrap();
    });
    let d = after.lookup(ROOT, OsStr::new("d")).unwrap();
    let f = after.lookup(d.ino, OsStr::new("f")).unwrap();
    assert!(read_at(&after, f.ino, 0, data.len()) == data);
}

/// Under `softdep`, an fsync of a one-block file while another file has
/// 512 dirty blocks writes what the small file needs (its data, its
/// inode, its name and the bitmaps they wait on: a few blocks over a
/// few passes), not the other file's, and never falls back to writing
/// the whole cache.
#[test]
fn under_softdep_an_fsync_writes_the_files_own_blocks_not_anothers() {
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
    mkfs(&mem, &MkfsOptions::default()).unwrap();
    let fs = mount_roomy(Arc::clone(&mem), Policy::Softdep);
    let ino = small_beside_large(&fs, &pattern(4096, 2));
    let before = fs.cache_stats();
    fs.fsync(ino, false).unwrap();
    let after = fs.cache_stats();
    let written = after.blocks_written - before.blocks_written;
    assert!((2..=16).contains(&written), "{written} blocks written: its own and what they wait on");
    let stats = fs.softdep_stats().unwrap();
    assert_eq!((stats.file_fsyncs, stats.whole_fsyncs), (1, 0), "the file alone, no fallback");
}

/// Under `softdep`, a new file in new directories two levels down,
/// fsync'd while another file's blocks are dirty, is found by its path
/// with its bytes after a crash just after the fsync (every write not
/// flushed lost): the fsync wrote its new names and those of the
/// directories on the way, in the rules' order, and fsck finds leaks at
/// most.
#[test]
fn under_softdep_an_fsync_makes_a_new_file_and_its_new_directories_durable() {
    let data = pattern(70_000, 7);
    let after = crash_after(Policy::Softdep, |fs| {
        let a = fs.mkdir(ROOT, OsStr::new("a"), Owner::root(0o755)).unwrap();
        let b = fs.mkdir(a.ino, OsStr::new("b"), Owner::root(0o755)).unwrap();
        let big = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap();
        fs.write(big.ino, 0, &pattern(OTHER_BLOCKS * 4096, 1)).unwrap();
        let f = fs.create(b.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &data).unwrap();
        fs.fsync(f.ino, false).unwrap();
        assert_eq!(fs.softdep_stats().unwrap().whole_fsyncs, 0, "no fallback to the whole cache");
    });
    let a = after.lookup(ROOT, OsStr::new("a")).unwrap();
    let b = after.lookup(a.ino, OsStr::new("b")).unwrap();
    let f = after.lookup(b.ino, OsStr::new("f")).unwrap();
    assert_eq!(f.size, data.len() as u64, "the size fsync'd");
    assert!(read_at(&after, f.ino, 0, data.len()) == data, "the bytes fsync'd");
}

/// Under `softdep`, an fsync of a directory alone makes the new names in
/// it durable: after a crash the files made in it are there.
#[test]
fn under_softdep_an_fsync_of_a_directory_makes_its_new_entries_durable() {
    let after = crash_after(Policy::Softdep, |fs| {
        let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
        fs.sync().unwrap();
        for name in ["x", "y", "z"] {
            let f = fs.create(d.ino, OsStr::new(name), Owner::root(0o644)).unwrap();
            fs.write(f.ino, 0, &pattern(3000, 8)).unwrap();
        }
        let sub = fs.mkdir(d.ino, OsStr::new("sub"), Owner::root(0o755)).unwrap();
        fs.create(sub.ino, OsStr::new("deeper"), Owner::root(0o644)).unwrap();
        fs.fsync(d.ino, false).unwrap();
        assert_eq!(fs.softdep_stats().unwrap().whole_fsyncs, 0, "no fallback to the whole cache");
    });
    let d = after.lookup(ROOT, OsStr::new("d")).unwrap();
    for name in ["x", "y", "z", "sub"] {
        after.lookup(d.ino, OsStr::new(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
