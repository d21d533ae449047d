//! Blocks fallocate allocates are marked unwritten in their pointers
//! (`format::UNWRITTEN`): nothing is written to them, they read as zeros
//! whatever the device holds there, and a write's first touch makes them
//! ordinary blocks, whose contents each policy orders as a new block's.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{CrashPoint, CrashPolicy, Device, Event, MemDevice, Recording, RecordingDevice, Replayer};
use ffs::format::{BLOCK_BYTES, UNWRITTEN};
use ffs::fsck::{fsck, Class, Repair};
use ffs::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::{Fallocate, FileSystem, Owner, ROOT};

use crate::common::{assert_checks_clean, mount, stored};

const B: u64 = BLOCK_BYTES as u64;
const POLICIES: [Policy; 4] = [Policy::Async, Policy::Sync, Policy::Softdep, Policy::Log];
const GROW: Fallocate = Fallocate::Allocate { keep_size: false };
/// What every free block of [`garbage_filled`]'s device holds.
const GARBAGE: u8 = 0xee;

/// A file system on `bytes` whose every free block holds [`GARBAGE`] (a
/// removed file's data), as a used disk's do.
fn garbage_filled(bytes: u64) -> (Arc<MemDevice>, Arc<dyn Device>) {
    let mem = Arc::new(MemDevice::new(bytes).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(ROOT, OsStr::new("filler"), Owner::root(0o644)).unwrap().ino;
    let free = fs.statfs().unwrap().blocks_free;
    // Less than every free block: the filler's indirect blocks take some.
    fs.write(f, 0, &vec![GARBAGE; ((free - free / 512 - 8) * B) as usize]).unwrap();
    fs.forget(f, 1);
    fs.unlink(ROOT, OsStr::new("filler")).unwrap();
    fs.unmount().unwrap();
    (mem, dev)
}

fn read(fs: &dyn FileSystem, ino: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = fs.read(ino, offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn bytes_written(events: &[Event]) -> u64 {
    events.iter().map(|e| if let Event::Write { data, .. } = e { data.len() as u64 } else { 0 }).sum()
}

#[test]
fn fallocate_writes_none_of_the_blocks_it_allocates() {
    for policy in POLICIES {
        let mem = Arc::new(MemDevice::new(64 << 20).unwrap());
        let dev: Arc<dyn Device> = mem;
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let recording = Recording::new();
        let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
        let fs = Ffs::mount(recorded, &MountOptions { policy, cache_bytes: 1 << 20, ..Default::default() })
            .unwrap();
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
        fs.fallocate(f, GROW, 0, 32 << 20).unwrap();
        assert_eq!(fs.getattr(f).unwrap().blocks, (32 << 20) / 512 + 9 * 8, "{policy:?}");
        fs.fsync(f, false).unwrap();
        fs.unmount().unwrap();
        let written = bytes_written(&recording.events());
        // The maps, the indirect blocks (9 of them), the inode, the
        // superblock and the log: far from the 32 MiB allocated.
        assert!(written < 2 << 20, "{policy:?}: {written} bytes written for 32 MiB allocated");
    }
}

#[test]
fn unwritten_blocks_read_as_zeros_over_old_data_and_a_write_keeps_zeros_around_it() {
    for policy in POLICIES {
        let (_, dev) = garbage_filled(16 << 20);
        let fs = mount(&dev, policy);
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
        fs.fallocate(f, GROW, 0, 2 << 20).unwrap();
        assert!(read(&fs, f, 0, 2 << 20).iter().all(|&b| b == 0), "{policy:?}: zeros before a write");
        // Into a direct block and one under the single indirect block,
        // neither on a block's edge.
        fs.write(f, 100, b"first").unwrap();
        fs.write(f, 40 * B + 4000, b"across an edge").unwrap();
        fs.forget(f, 1);
        fs.unmount().unwrap();
        assert_checks_clean(&dev, &format!("{policy:?}"));
        let fs = mount(&dev, policy);
        let f = fs.lookup(ROOT, OsStr::new("f")).unwrap().ino;
        let all = read(&fs, f, 0, 2 << 20);
        assert_eq!(all.len(), 2 << 20, "{policy:?}");
        assert_eq!(&all[100..105], b"first", "{policy:?}");
        assert_eq!(&all[(40 * B + 4000) as usize..][..14], b"across an edge", "{policy:?}");
        let zeros = all.iter().filter(|&&b| b == 0).count();
        assert_eq!(zeros, (2 << 20) - 5 - 14, "{policy:?}: zeros everywhere else");
        fs.unmount().unwrap();
    }
}

#[test]
fn zeroing_a_range_of_unwritten_blocks_writes_none_of_them() {
    let (_, dev) = garbage_filled(16 << 20);
    let recording = Recording::new();
    let fs = mount(&dev, Policy::Softdep);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.fallocate(f, GROW, 0, 4 << 20).unwrap();
    fs.unmount().unwrap();
    let recorded: Arc<dyn Device> =
        Arc::new(RecordingDevice::new(Arc::clone(&dev), 0, Arc::clone(&recording)));
    let fs = Ffs::mount(recorded, &MountOptions { policy: Policy::Softdep, ..Default::default() }).unwrap();
    fs.fallocate(f, Fallocate::ZeroRange { keep_size: true }, 0, 4 << 20).unwrap();
    assert!(read(&fs, f, 0, 4 << 20).iter().all(|&b| b == 0));
    fs.unmount().unwrap();
    let written = bytes_written(&recording.events());
    assert!(written < 1 << 20, "{written} bytes written to zero 4 MiB of unwritten blocks");
}

/// A file system on a device of old data ([`garbage_filled`]) mounted
/// under `policy` over a recording device, with the initial image the
/// recording replays onto.
fn recorded_on_garbage(policy: Policy, cache_bytes: u64) -> (Ffs, Arc<Recording>, MemDevice) {
    let (mem, dev) = garbage_filled(8 << 20);
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let fs = Ffs::mount(recorded, &MountOptions { policy, cache_bytes, ..Default::default() }).unwrap();
    (fs, recording, initial)
}

/// Every crash state of `recording` (after each event: every write since
/// the last flush kept, none, and `subsets` random subsets), checked
/// with `fsck -y` (which also replays the log) and mounted under
/// `policy` for `check`, with the event it came after, whether that is
/// past the mark 1 and a name for assertions.
fn each_crash_state(
    recording: &Recording,
    initial: MemDevice,
    policy: Policy,
    subsets: usize,
    mut check: impl FnMut(&Ffs, bool, &str),
) {
    let events = recording.events();
    let synced = events.iter().position(|e| matches!(e, Event::Mark(1))).unwrap();
    let mut replayer = Replayer::new(events.clone(), vec![initial]);
    for at in 0..=events.len() {
        let some = (0..subsets).map(|k| (CrashPolicy::KeepSubset, (at * subsets + k) as u64));
        for (crash, seed) in
            [(CrashPolicy::KeepAll, 0), (CrashPolicy::DropUnflushed, 0)].into_iter().chain(some)
        {
            let point = CrashPoint { after_events: at, policy: crash, seed };
            let image: Arc<dyn Device> = Arc::new(replayer.images_at(point).unwrap().remove(0));
            fsck(&image, Repair::Yes).unwrap();
            let fs = mount(&image, policy);
            check(&fs, at >= synced, &format!("{policy:?}, {crash:?} after event {at}"));
            fs.unmount().unwrap();
        }
    }
}

/// A file of 40 blocks is allocated and fsync'd, then written in part and
/// fsync'd, then written more without one while another file's fsync
/// writes the inode block they share. Every state a crash leaves
/// (each write since the last flush kept or not) reads, once checked
/// (`-y`, which also replays the log), as zeros or the bytes written,
/// never what the blocks held before (`GARBAGE`), with what the second
/// fsync covered in place. Returns how many states held the file.
fn no_crash_shows_old_data_through_an_unwritten_block(policy: Policy) -> usize {
    let (fs, recording, initial) = recorded_on_garbage(policy, 1 << 20);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.fallocate(f, GROW, 0, 40 * B).unwrap();
    fs.fsync(f, false).unwrap();
    fs.fsync(ROOT, false).unwrap();
    fs.write(f, 3 * B + 10, &[0x11; 100]).unwrap();
    fs.write(f, 20 * B, &[0x22; 2 * B as usize]).unwrap();
    fs.fsync(f, false).unwrap();
    recording.mark(1);
    fs.write(f, 5 * B, &[0x33; 600]).unwrap();
    fs.write(f, 30 * B + 4090, &[0x44; 20]).unwrap();
    // Another file's fsync writes the inode block both inodes are in,
    // while the first file's new data is still only in memory.
    let g = fs.create(ROOT, OsStr::new("g"), Owner::root(0o644)).unwrap().ino;
    fs.write(g, 0, b"g").unwrap();
    fs.fsync(g, false).unwrap();
    fs.forget(f, 1);
    fs.forget(g, 1);
    fs.unmount().unwrap();
    let mut held = 0;
    each_crash_state(&recording, initial, policy, 1, |fs, synced, what| {
        let Ok(attr) = fs.lookup(ROOT, OsStr::new("f")) else {
            assert!(!synced, "{what}: the file is fsync'd");
            return;
        };
        held += 1;
        let all = read(fs, attr.ino, 0, 40 * B as usize);
        assert!(!all.contains(&GARBAGE), "{what}: old data shows through");
        if synced {
            assert_eq!(all.len(), 40 * B as usize, "{what}");
            assert_eq!(&all[(3 * B + 10) as usize..][..100], &[0x11; 100], "{what}");
            assert_eq!(&all[(20 * B) as usize..][..2 * B as usize], &[0x22; 2 * B as usize], "{what}");
        }
    });
    held
}

#[test]
fn under_softdep_no_crash_shows_old_data_through_an_unwritten_block() {
    assert!(no_crash_shows_old_data_through_an_unwritten_block(Policy::Softdep) > 0);
}

#[test]
fn under_log_no_crash_shows_old_data_through_an_unwritten_block() {
    assert!(no_crash_shows_old_data_through_an_unwritten_block(Policy::Log) > 0);
}

/// A directory's pointer carrying the unwritten mark names no block: fsck
/// finds a bad block pointer (a file's is its own block, clean).
#[test]
fn fsck_finds_an_unwritten_mark_on_a_directory_pointer() {
    let dev = crate::common::fresh(8 << 20);
    let fs = mount(&dev, Policy::Sync);
    let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap().ino;
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.fallocate(f, GROW, 0, 8 * B).unwrap();
    fs.forget(d, 1);
    fs.forget(f, 1);
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "a file's unwritten blocks");
    let file = stored(&dev, f);
    assert!(file.direct[..8].iter().all(|&p| p & UNWRITTEN != 0), "fallocate's pointers carry the mark");
    let mut dir = stored(&dev, d);
    dir.direct[0] |= UNWRITTEN;
    let (block, at) = ffs::read_superblock(&dev).unwrap().inode_place(d as u32);
    let mut buf = vec![0u8; BLOCK_BYTES];
    dev.read_at(&mut buf, block * B).unwrap();
    dir.encode(d as u32, &mut buf[at..at + 256]);
    dev.write_at(&buf, block * B).unwrap();
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.findings.iter().any(|x| x.class == Class::BadBlockPointer), "{:?}", report.findings);
}

/// Under `log` a regular file's new blocks are pointed to marked
/// unwritten until their data is written back (`delayed.rs`): another
/// file's fsync commits the first file's pointers without writing its
/// data, and an eviction's write-back clears the marks of what it wrote.
/// Every state a crash leaves (each write since the last flush kept or
/// not, torn never: the log's records are checksummed, data is not)
/// reads, once checked, as zeros or the bytes written, never what the
/// blocks held before, and the fsync'd file whole. Returns how many
/// states held the first file with some of its data.
fn no_crash_shows_old_data_through_a_new_block(policy: Policy) -> usize {
    // A cache of 64 blocks: the 90 blocks written below evict some.
    let (fs, recording, initial) = recorded_on_garbage(policy, 0);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.write(f, 0, &[0x11; 3 * B as usize]).unwrap();
    let g = fs.create(ROOT, OsStr::new("g"), Owner::root(0o644)).unwrap().ino;
    fs.write(g, 0, &[0x22; 2 * B as usize]).unwrap();
    fs.fsync(g, false).unwrap();
    recording.mark(1);
    fs.write(f, 10 * B + 7, &[0x33; 90 * B as usize]).unwrap();
    fs.write(g, 2 * B, &[0x44; 100]).unwrap();
    fs.fsync(g, false).unwrap();
    fs.forget(f, 1);
    fs.forget(g, 1);
    fs.unmount().unwrap();
    let mut held = 0;
    each_crash_state(&recording, initial, policy, 4, |fs, synced, what| {
        if let Ok(attr) = fs.lookup(ROOT, OsStr::new("f")) {
            let all = read(fs, attr.ino, 0, attr.size as usize);
            assert!(!all.contains(&GARBAGE), "{what}: old data shows through f");
            held += usize::from(all.iter().any(|&b| b != 0));
        }
        let Ok(attr) = fs.lookup(ROOT, OsStr::new("g")) else {
            assert!(!synced, "{what}: g is fsync'd");
            return;
        };
        let all = read(fs, attr.ino, 0, attr.size as usize);
        assert!(!all.contains(&GARBAGE), "{what}: old data shows through g");
        if synced {
            assert_eq!(all[..2 * B as usize], [0x22; 2 * B as usize], "{what}");
        }
    });
    held
}

#[test]
fn under_log_no_crash_shows_old_data_through_a_new_block() {
    assert!(no_crash_shows_old_data_through_a_new_block(Policy::Log) > 0);
}

#[test]
fn under_softdep_no_crash_shows_old_data_through_a_new_block() {
    assert!(no_crash_shows_old_data_through_a_new_block(Policy::Softdep) > 0);
}

/// Under `log` an fsync writes the file's own data, not another's: the
/// other file's new blocks stay dirty, pointed to marked unwritten.
#[test]
fn under_log_an_fsync_writes_the_files_own_data_not_anothers() {
    let dev = crate::common::fresh(64 << 20);
    let fs = Ffs::mount(
        Arc::clone(&dev),
        &MountOptions { policy: Policy::Log, cache_bytes: 16 << 20, ..Default::default() },
    )
    .unwrap();
    let big = fs.create(ROOT, OsStr::new("big"), Owner::root(0o644)).unwrap().ino;
    fs.write(big, 0, &vec![7u8; 512 * B as usize]).unwrap();
    let small = fs.create(ROOT, OsStr::new("small"), Owner::root(0o644)).unwrap().ino;
    fs.write(small, 0, &[9u8; 100]).unwrap();
    let before = fs.cache_stats();
    fs.fsync(small, false).unwrap();
    let after = fs.cache_stats();
    assert_eq!(after.data_blocks_written - before.data_blocks_written, 1, "the small file's one block");
    fs.sync().unwrap();
    assert!(
        fs.cache_stats().data_blocks_written - after.data_blocks_written >= 512,
        "the sync wrote the rest"
    );
    fs.forget(big, 1);
    fs.forget(small, 1);
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "after the sync");
    let stored = stored(&dev, big);
    assert!(stored.direct.iter().all(|&p| p != 0 && p & UNWRITTEN == 0), "written back: the marks cleared");
}

/// Under `log`, a file written and renamed over another without an fsync
/// (an editor's save) reaches the disk with its data in the commit that
/// makes the rename durable (ext4's `auto_da_alloc`): a crash after that
/// commit finds the new contents under the name, not zeros.
#[test]
fn under_log_a_file_renamed_over_another_is_committed_with_its_data() {
    let mem = Arc::new(MemDevice::new(16 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let fs = Ffs::mount(recorded, &MountOptions { policy: Policy::Log, ..Default::default() }).unwrap();
    let old = fs.create(ROOT, OsStr::new("doc"), Owner::root(0o644)).unwrap().ino;
    // The old contents, durable.
    fs.write(old, 0, &[0x0a; 5000]).unwrap();
    fs.fsync(old, false).unwrap();
    let new = fs.create(ROOT, OsStr::new("doc.tmp"), Owner::root(0o644)).unwrap().ino;
    fs.write(new, 0, &[0x0b; 9000]).unwrap();
    fs.rename2(ROOT, OsStr::new("doc.tmp"), ROOT, OsStr::new("doc"), fsapi::RenameMode::Replace).unwrap();
    // Another file's fsync commits the rename.
    let other = fs.create(ROOT, OsStr::new("other"), Owner::root(0o644)).unwrap().ino;
    fs.fsync(other, false).unwrap();
    let events = recording.events();
    let point = CrashPoint { after_events: events.len(), policy: CrashPolicy::DropUnflushed, seed: 0 };
    let image: Arc<dyn Device> =
        Arc::new(Replayer::new(events, vec![initial]).images_at(point).unwrap().remove(0));
    assert_checks_clean(&image, "the log replayed");
    let fs = mount(&image, Policy::Log);
    let doc = fs.lookup(ROOT, OsStr::new("doc")).unwrap();
    assert_eq!(read(&fs, doc.ino, 0, 9000), vec![0x0b; 9000], "the renamed file's data, not zeros");
}

/// Under `log` the syncer writes file data once it has been dirty for its
/// age (30 s), clears the marks, and commits them a second after the last
/// commit: a crash after that finds the data of a file nobody fsync'd;
/// a crash before the age finds zeros in its place (never old data).
#[test]
fn under_log_the_syncer_writes_data_past_its_age_and_commits_its_pointers() {
    let clock = device::VirtualClock::new();
    let (mem, dev) = garbage_filled(8 << 20);
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let options = MountOptions {
        policy: Policy::Log,
        clock: device::Clock::Virtual(Arc::clone(&clock)),
        commits: ffs::Commits::Caller,
        ..Default::default()
    };
    let fs = Ffs::mount(recorded, &options).unwrap();
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.write(f, 0, &[0x5a; 3 * B as usize]).unwrap();
    clock.advance_to(2_000_000_000);
    fs.tick(ffs::SYNCER_AGE).unwrap();
    assert_eq!(fs.cache_stats().data_blocks_written, 0, "younger than the syncer's age");
    let young = recording.len();
    clock.advance_to(40_000_000_000);
    fs.tick(ffs::SYNCER_AGE).unwrap();
    assert_eq!(fs.cache_stats().data_blocks_written, 3, "past the syncer's age");
    let old = recording.len();
    fs.forget(f, 1);
    let events = recording.events();
    let mut replayer = Replayer::new(events, vec![initial]);
    for (at, want) in [(young, 0u8), (old, 0x5a)] {
        let point = CrashPoint { after_events: at, policy: CrashPolicy::DropUnflushed, seed: 0 };
        let image: Arc<dyn Device> = Arc::new(replayer.images_at(point).unwrap().remove(0));
        assert_checks_clean(&image, "the log replayed");
        let fs = mount(&image, Policy::Log);
        let attr = fs.lookup(ROOT, OsStr::new("f")).unwrap();
        assert_eq!(read(&fs, attr.ino, 0, 3 * B as usize), vec![want; 3 * B as usize], "after event {at}");
        fs.unmount().unwrap();
    }
}
