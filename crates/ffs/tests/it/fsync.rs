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

/// A new file system on a recording device: the device, the image
/// before any event, and the recording.
fn recorded_new() -> (Arc<dyn Device>, MemDevice, Arc<Recording>) {
    let mem = Arc::new(MemDevice::new(64 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    (recorded, initial, recording)
}

/// Runs `work` on a new file system under `policy` over a recording
/// device, then crashes just after it (every write not flushed lost),
/// preens the image (asserting that preen leaves nothing) and mounts it.
fn crash_after(policy: Policy, work: impl FnOnce(&Ffs)) -> Ffs {
    let (recorded, initial, recording) = recorded_new();
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

/// A device whose first flush once armed says so and then waits to be
/// let through (a flush a test can hold in flight); while it is held,
/// each write says so too. It counts the flushes, and notes any issued
/// while another is in flight.
struct HeldFlush {
    front: device::Front,
    inner: Arc<dyn Device>,
    armed: std::sync::atomic::AtomicBool,
    holding: std::sync::atomic::AtomicBool,
    entered: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    wrote: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    /// Set if the held flush was never let through: the guard that keeps
    /// a lock held across the flush a failure instead of a hang.
    gave_up: std::sync::atomic::AtomicBool,
    flushes: std::sync::atomic::AtomicUsize,
    in_flight: std::sync::atomic::AtomicUsize,
    overlapped: std::sync::atomic::AtomicBool,
    /// The held flush fails once let through.
    fail_held: std::sync::atomic::AtomicBool,
}

/// The channels a test holds a flush with: entered (the flush is held),
/// a write while it is, and the release.
struct Gate {
    entered: std::sync::mpsc::Receiver<()>,
    wrote: std::sync::mpsc::Receiver<()>,
    release: std::sync::mpsc::Sender<()>,
}

fn held_flush(inner: Arc<dyn Device>) -> (Arc<HeldFlush>, Gate) {
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (wrote_tx, wrote) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let dev = HeldFlush {
        front: device::Front::new(inner.name(), device::Geometry::of(inner.as_ref())),
        inner,
        armed: false.into(),
        holding: false.into(),
        entered: entered_tx.into(),
        wrote: wrote_tx.into(),
        release: release_rx.into(),
        gave_up: false.into(),
        flushes: 0.into(),
        in_flight: 0.into(),
        overlapped: false.into(),
        fail_held: false.into(),
    };
    (Arc::new(dev), Gate { entered, wrote, release })
}

impl device::Backend for HeldFlush {
    fn front(&self) -> &device::Front {
        &self.front
    }
    fn read_raw(&self, buf: &mut [u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
        if self.holding.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = self.wrote.lock().unwrap().send(());
        }
        self.inner.write_at(buf, offset)
    }
    fn flush_raw(&self, _: device::Checked) -> device::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        self.flushes.fetch_add(1, SeqCst);
        if self.in_flight.fetch_add(1, SeqCst) > 0 {
            self.overlapped.store(true, SeqCst);
        }
        if self.armed.swap(false, SeqCst) {
            self.holding.store(true, SeqCst);
            self.entered.lock().unwrap().send(()).unwrap();
            let guard = std::time::Duration::from_secs(120);
            if self.release.lock().unwrap().recv_timeout(guard).is_err() {
                self.gave_up.store(true, SeqCst);
            }
            self.holding.store(false, SeqCst);
            if self.fail_held.load(SeqCst) {
                self.in_flight.fetch_sub(1, SeqCst);
                let source = std::io::Error::other("the held flush fails");
                return Err(device::DeviceError::Flush { device: "held".into(), source });
            }
        }
        let flushed = self.inner.flush();
        self.in_flight.fetch_sub(1, SeqCst);
        flushed
    }
}

/// Under `softdep`, an fsync's flush goes with the mount's lock let go:
/// while it is held in flight a sync goes on, and flushes again for the
/// writes sealed before it (so that the file's inode does not go pointing
/// to new blocks whose contents and bits may not be on the disk yet). A
/// crash at any flush, keeping any part of the writes since the last,
/// leaves only leaks; one at the end keeps the file with its bytes.
#[test]
fn under_softdep_an_fsync_flushes_with_the_lock_let_go_and_a_call_meanwhile_finishes_its_seal() {
    use std::sync::atomic::Ordering::SeqCst;
    let (recorded, initial, recording) = recorded_new();
    let (gate, Gate { entered, release, .. }) = held_flush(recorded);
    let fs = mount_roomy(Arc::clone(&gate) as Arc<dyn Device>, Policy::Softdep);
    let data = pattern(9_000, 4);
    let a = fs.create(ROOT, OsStr::new("a"), Owner::root(0o644)).unwrap().ino;
    fs.sync().unwrap();
    fs.write(a, 0, &data).unwrap();
    gate.armed.store(true, SeqCst);
    std::thread::scope(|s| {
        let first = s.spawn(|| fs.fsync(a, false));
        entered.recv().unwrap();
        fs.sync().unwrap();
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
    });
    assert!(!gate.gave_up.load(SeqCst), "the lock was held across the flush");
    let stats = fs.softdep_stats().unwrap();
    assert_eq!((stats.file_fsyncs, stats.whole_fsyncs), (1, 0), "the file alone, no fallback");

    let after = only_leaks_at_each_flush_then_mounted(&recording, initial, 32);
    let f = after.lookup(ROOT, OsStr::new("a")).unwrap();
    assert!(read_at(&after, f.ino, 0, data.len()) == data, "the bytes fsync'd");
}

/// A new file system under `softdep` on a device whose flush a test can
/// hold (`HeldFlush`).
fn softdep_behind_a_held_flush() -> (Ffs, Arc<HeldFlush>, Gate) {
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
    mkfs(&mem, &MkfsOptions::default()).unwrap();
    softdep_on_a_held_flush(mem)
}

fn softdep_on_a_held_flush(made: Arc<dyn Device>) -> (Ffs, Arc<HeldFlush>, Gate) {
    let (dev, gate) = held_flush(made);
    (mount_roomy(Arc::clone(&dev) as Arc<dyn Device>, Policy::Softdep), dev, gate)
}

/// The crash states of `recording` (from `initial`) at each flush, each
/// keeping `kept` different subsets of the writes since the last, checked
/// to hold only leaks; then the image after every flush, mounted.
fn only_leaks_at_each_flush_then_mounted(recording: &Recording, initial: MemDevice, kept: u64) -> Ffs {
    use device::Event;
    let events = recording.events();
    let mut replayer = Replayer::new(events.clone(), vec![initial]);
    let flushes = events.iter().enumerate().filter(|(_, e)| matches!(e, Event::Flush { .. }));
    for (k, (at, _)) in flushes.enumerate() {
        for seed in 0..kept {
            let point = CrashPoint {
                after_events: at,
                policy: CrashPolicy::KeepSubset,
                seed: kept * k as u64 + seed,
            };
            let image: Arc<dyn Device> = Arc::new(replayer.images_at(point).unwrap().remove(0));
            crate::files::only_leaks(&image);
        }
    }
    let point = CrashPoint { after_events: events.len(), policy: CrashPolicy::DropUnflushed, seed: 0 };
    let image: Arc<dyn Device> = Arc::new(replayer.images_at(point).unwrap().remove(0));
    Ffs::mount(image, &MountOptions::default()).unwrap()
}

/// An fsync of each of `files`, the first one's flush held in flight
/// while each of the others writes and a call that needs the mount's
/// lock goes on; then let through. Each fsync returns without error.
fn fsyncs_behind_a_held_flush(fs: &Ffs, gate: &HeldFlush, channels: Gate, files: &[u64]) {
    use std::sync::atomic::Ordering::SeqCst;
    let Gate { entered, wrote, release } = channels;
    gate.armed.store(true, SeqCst);
    std::thread::scope(|s| {
        let first = s.spawn(|| fs.fsync(files[0], false));
        entered.recv().unwrap();
        let mut others = Vec::new();
        for &f in &files[1..] {
            others.push(s.spawn(move || fs.fsync(f, false)));
            // Its writes are on the device; a call that needs the lock
            // gets it (it waits with the lock let go).
            wrote.recv().unwrap();
            fs.getattr(ROOT).unwrap();
        }
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
        for other in others {
            other.join().unwrap().unwrap();
        }
    });
    assert!(!gate.gave_up.load(SeqCst), "the held flush was never let through");
}

/// Under `softdep`, fsyncs that write while another's flush is in
/// flight wait for it with the mount's lock let go (a call meanwhile goes
/// on), issue no flush beside it, and then share one: the first to take
/// the lock seals the writes of both.
#[test]
fn under_softdep_fsyncs_during_anothers_flush_wait_without_the_lock_and_share_the_next() {
    use std::sync::atomic::Ordering::SeqCst;
    let (fs, gate, channels) = softdep_behind_a_held_flush();
    let files: Vec<u64> = ["a", "b", "c"]
        .iter()
        .map(|name| fs.create(ROOT, OsStr::new(name), Owner::root(0o644)).unwrap().ino)
        .collect();
    for (k, &f) in files.iter().enumerate() {
        fs.write(f, 0, &pattern(4096, k as u8)).unwrap();
    }
    fs.sync().unwrap();
    // Each rewritten in place: one pass of the file's own blocks.
    for (k, &f) in files.iter().enumerate() {
        fs.write(f, 0, &pattern(4096, 10 + k as u8)).unwrap();
    }
    let before = gate.flushes.load(SeqCst);
    fsyncs_behind_a_held_flush(&fs, &gate, channels, &files);
    assert!(!gate.overlapped.load(SeqCst), "a flush was issued beside the one in flight");
    let flushes = gate.flushes.load(SeqCst) - before;
    assert_eq!(flushes, 2, "the held flush, and one for the two fsyncs that waited for it");
    let stats = fs.softdep_stats().unwrap();
    assert_eq!((stats.file_fsyncs, stats.whole_fsyncs), (3, 0), "each file alone, no fallback");
}

/// Under `softdep`, new files fsync'd at once, the first one's flush
/// held while the others write (so that they share flushes): a crash at
/// any flush, keeping any part of the writes since the last, leaves only
/// leaks, and one at the end keeps every file with its bytes.
#[test]
fn under_softdep_fsyncs_sharing_flushes_leave_only_leaks_and_each_file_whole() {
    let (recorded, initial, recording) = recorded_new();
    let (fs, gate, channels) = softdep_on_a_held_flush(recorded);
    let names = ["a", "b", "c"];
    let data: Vec<Vec<u8>> = (0..names.len()).map(|k| pattern(9_000, 20 + k as u8)).collect();
    let mut files = Vec::new();
    for (name, bytes) in names.iter().zip(&data) {
        let f = fs.create(ROOT, OsStr::new(name), Owner::root(0o644)).unwrap().ino;
        fs.write(f, 0, bytes).unwrap();
        files.push(f);
    }
    fsyncs_behind_a_held_flush(&fs, &gate, channels, &files);

    let after = only_leaks_at_each_flush_then_mounted(&recording, initial, 16);
    for (name, bytes) in names.iter().zip(&data) {
        let f = after.lookup(ROOT, OsStr::new(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(read_at(&after, f.ino, 0, bytes.len()) == *bytes, "{name}: the bytes fsync'd");
    }
}

/// Under `softdep`, an fsync waiting for another's flush in flight
/// (with the lock let go) that then fails reports the failure too, rather
/// than flushing again as if it had not happened, and the file system
/// takes no more changes.
#[test]
fn under_softdep_an_fsync_waiting_for_anothers_failed_flush_fails() {
    use std::sync::atomic::Ordering::SeqCst;
    let (fs, gate, Gate { entered, wrote, release }) = softdep_behind_a_held_flush();
    let a = fs.create(ROOT, OsStr::new("a"), Owner::root(0o644)).unwrap().ino;
    let b = fs.create(ROOT, OsStr::new("b"), Owner::root(0o644)).unwrap().ino;
    fs.sync().unwrap();
    fs.write(a, 0, &pattern(4096, 1)).unwrap();
    fs.write(b, 0, &pattern(4096, 2)).unwrap();
    gate.fail_held.store(true, SeqCst);
    gate.armed.store(true, SeqCst);
    let before = gate.flushes.load(SeqCst);
    let fs = &fs;
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| fs.fsync(a, false));
        entered.recv().unwrap();
        let second = s.spawn(|| fs.fsync(b, false));
        wrote.recv().unwrap();
        fs.getattr(ROOT).unwrap();
        release.send(()).unwrap();
        (first.join().unwrap(), second.join().unwrap())
    });
    assert!(!gate.gave_up.load(SeqCst), "the held flush was never let through");
    assert_eq!(first.unwrap_err(), fsapi::Errno::IO, "the fsync whose flush failed");
    assert_eq!(second.unwrap_err(), fsapi::Errno::IO, "the fsync that waited for it");
    assert_eq!(gate.flushes.load(SeqCst) - before, 1, "no flush after the failed one");
    let err = fs.create(ROOT, OsStr::new("late"), Owner::root(0o644)).unwrap_err();
    assert_eq!(err, fsapi::Errno::IO);
}

/// Under `softdep`, an fsync whose flush (issued with the lock let go)
/// fails reports it, though one pass would have done (a block rewritten
/// in place), and the file system takes no more changes rather than
/// retrying it.
#[test]
fn under_softdep_a_failed_fsync_flush_stops_the_file_system() {
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
    mkfs(&mem, &MkfsOptions::default()).unwrap();
    let fs = mount_roomy(Arc::clone(&mem), Policy::Softdep);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.write(f, 0, &pattern(4096, 6)).unwrap();
    fs.unmount().unwrap();
    // The mount's superblock is flushed first; the fsync's pass next.
    let fault = device::Fault::Nth { op: device::Op::Flush, n: 2 };
    let dev: Arc<dyn Device> = Arc::new(device::FaultyDevice::new(mem, vec![fault]));
    let fs = mount_roomy(dev, Policy::Softdep);
    fs.write(f, 0, &pattern(4096, 7)).unwrap();
    assert_eq!(fs.fsync(f, false).unwrap_err(), fsapi::Errno::IO);
    let err = fs.create(ROOT, OsStr::new("late"), Owner::root(0o644)).unwrap_err();
    assert_eq!(err, fsapi::Errno::IO);
}
