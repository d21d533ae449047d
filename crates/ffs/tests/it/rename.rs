//! renameat2's modes: `RENAME_NOREPLACE` and `RENAME_EXCHANGE` under every
//! policy, across remounts, and after a crash at any point of an exchange.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{CrashPoint, CrashPolicy, Device, MemDevice, Recording, RecordingDevice, Replayer};
use ffs::fsck::{fsck, Repair};
use ffs::{Ffs, MountOptions, Policy};
use fsapi::{Attr, Errno, FileSystem, FileType, Owner, RenameMode, ROOT};

use crate::common::{fresh, mount};
use crate::files::leaks_only_whatever_a_crash_keeps;

const POLICIES: [Policy; 4] = [Policy::Sync, Policy::Softdep, Policy::Log, Policy::Async];

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn file(fs: &dyn FileSystem, dir: u64, called: &str, data: &[u8]) -> Attr {
    let f = fs.create(dir, name(called), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, data).unwrap();
    fs.getattr(f.ino).unwrap()
}

fn dir(fs: &dyn FileSystem, parent: u64, called: &str) -> Attr {
    fs.mkdir(parent, name(called), Owner::root(0o755)).unwrap()
}

fn contents(fs: &dyn FileSystem, parent: u64, called: &str) -> Vec<u8> {
    let f = fs.lookup(parent, name(called)).unwrap();
    let mut buf = vec![0u8; f.size as usize];
    fs.read(f.ino, 0, &mut buf).unwrap();
    buf
}

/// /p/x a directory holding a file, /q/y a file of four bytes.
fn directory_and_file(fs: &dyn FileSystem) -> (u64, u64) {
    let (p, q) = (dir(fs, ROOT, "p").ino, dir(fs, ROOT, "q").ino);
    let x = dir(fs, p, "x");
    file(fs, x.ino, "inside", b"in x");
    file(fs, q, "y", b"in y");
    (p, q)
}

/// Unmounts `fs` and checks the image: fsck finds nothing.
fn unmount_clean(fs: Ffs, dev: &Arc<dyn Device>, policy: Policy) {
    fs.unmount().unwrap();
    let report = fsck(dev, Repair::No).unwrap();
    assert!(report.clean(), "{policy:?}: {:?}", report.findings);
}

#[test]
fn an_exchange_of_two_files_in_one_directory_swaps_them_under_every_policy() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        file(&fs, ROOT, "a", b"first");
        file(&fs, ROOT, "b", b"second file");
        fs.rename2(ROOT, name("a"), ROOT, name("b"), RenameMode::Exchange).unwrap();
        unmount_clean(fs, &dev, policy);
        let fs = mount(&dev, policy);
        assert_eq!(contents(&fs, ROOT, "a"), b"second file", "{policy:?}");
        assert_eq!(contents(&fs, ROOT, "b"), b"first", "{policy:?}");
    }
}

/// /p/x (a directory) and /q/y (a file) swap: the directory moves under q
/// with its `..` (fsck checks every count against the `..` entries), p
/// loses a link and q gains one.
#[test]
fn an_exchange_of_a_directory_and_a_file_across_parents_moves_the_directory_under_every_policy() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let (p, q) = directory_and_file(&fs);
        fs.rename2(p, name("x"), q, name("y"), RenameMode::Exchange).unwrap();
        assert_eq!((fs.getattr(p).unwrap().nlink, fs.getattr(q).unwrap().nlink), (2, 3), "{policy:?}");
        unmount_clean(fs, &dev, policy);
        let fs = mount(&dev, policy);
        assert_eq!(contents(&fs, p, "x"), b"in y", "{policy:?}");
        let moved = fs.lookup(q, name("y")).unwrap();
        assert_eq!(moved.kind, FileType::Dir, "{policy:?}");
        assert_eq!(contents(&fs, moved.ino, "inside"), b"in x", "{policy:?}");
    }
}

#[test]
fn an_exchange_of_two_directories_across_parents_keeps_both_parents_counts() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let (p, q) = (dir(&fs, ROOT, "p").ino, dir(&fs, ROOT, "q").ino);
        let x = dir(&fs, p, "x").ino;
        dir(&fs, x, "under-x");
        dir(&fs, q, "y");
        fs.rename2(p, name("x"), q, name("y"), RenameMode::Exchange).unwrap();
        assert_eq!((fs.getattr(p).unwrap().nlink, fs.getattr(q).unwrap().nlink), (3, 3), "{policy:?}");
        assert_eq!(fs.lookup(q, name("y")).unwrap().ino, x, "{policy:?}");
        unmount_clean(fs, &dev, policy);
    }
}

#[test]
fn an_exchange_with_a_missing_name_is_enoent_and_changes_nothing() {
    let fs = mount(&fresh(16 << 20), Policy::Sync);
    file(&fs, ROOT, "a", b"a");
    assert_eq!(fs.rename2(ROOT, name("a"), ROOT, name("none"), RenameMode::Exchange), Err(Errno::NOENT));
    assert_eq!(fs.rename2(ROOT, name("none"), ROOT, name("a"), RenameMode::Exchange), Err(Errno::NOENT));
    assert_eq!(contents(&fs, ROOT, "a"), b"a");
}

#[test]
fn an_exchange_of_a_directory_with_a_name_inside_it_is_einval() {
    let fs = mount(&fresh(16 << 20), Policy::Sync);
    let d = dir(&fs, ROOT, "d");
    file(&fs, d.ino, "f", b"f");
    let refused = fs.rename2(ROOT, name("d"), d.ino, name("f"), RenameMode::Exchange);
    assert_eq!(refused, Err(Errno::INVAL));
    assert_eq!(fs.rename2(d.ino, name("f"), ROOT, name("d"), RenameMode::Exchange), Err(Errno::INVAL));
}

#[test]
fn an_exchange_of_two_names_of_one_file_changes_nothing() {
    let fs = mount(&fresh(16 << 20), Policy::Sync);
    let f = file(&fs, ROOT, "a", b"a");
    fs.link(f.ino, ROOT, name("b")).unwrap();
    fs.rename2(ROOT, name("a"), ROOT, name("b"), RenameMode::Exchange).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 2);
}

#[test]
fn a_rename_that_may_not_replace_is_eexist_onto_a_name_and_moves_onto_a_free_one() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        file(&fs, ROOT, "a", b"a");
        file(&fs, ROOT, "b", b"b");
        let refused = fs.rename2(ROOT, name("a"), ROOT, name("b"), RenameMode::NoReplace);
        assert_eq!(refused, Err(Errno::EXIST), "{policy:?}");
        assert_eq!(contents(&fs, ROOT, "b"), b"b", "{policy:?}");
        fs.rename2(ROOT, name("a"), ROOT, name("c"), RenameMode::NoReplace).unwrap();
        assert_eq!(contents(&fs, ROOT, "c"), b"a", "{policy:?}");
        unmount_clean(fs, &dev, policy);
    }
}

/// Calls `check` with every state a power cut could leave while
/// `policy` exchanges /p/x (a directory) and /q/y (a file) and unmounts:
/// after each event, the writes not yet flushed kept whole or in part.
/// Each image is checked before the next is built (they share the
/// replayer's durable image).
fn each_crash_state_of_an_exchange(policy: Policy, mut check: impl FnMut(Arc<dyn Device>)) {
    let mem = Arc::new(MemDevice::new(16 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    ffs::mkfs(&dev, &ffs::MkfsOptions::default()).unwrap();
    let fs = mount(&dev, Policy::Async);
    let (p, q) = directory_and_file(&fs);
    fs.unmount().unwrap();
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let options = MountOptions { policy, cache_bytes: 1 << 20, ..Default::default() };
    let fs = Ffs::mount(recorded, &options).unwrap();
    fs.rename2(p, name("x"), q, name("y"), RenameMode::Exchange).unwrap();
    fs.unmount().unwrap();
    let events = recording.events();
    let mut replayer = Replayer::new(events.clone(), vec![initial]);
    for at in 0..=events.len() {
        for (policy, seed) in [(CrashPolicy::KeepAll, 0), (CrashPolicy::KeepSubset, at as u64)] {
            let image = replayer.images_at(CrashPoint { after_events: at, policy, seed }).unwrap().remove(0);
            check(Arc::new(image));
        }
    }
}

/// Whether nothing the exchange moved is lost in `image` (repaired as
/// needed): the directory (with its file) named once, at /p/x or /q/y,
/// and the file of four bytes at /p/x, /q/y or in lost+found. A crash
/// that left the directory named by both entries (the new one written
/// first) loses one of the two names: a directory has one name, and fsck
/// removes the extra link, as fsck_ffs does even when preening
/// ("EXTRANEOUS HARD LINK TO DIRECTORY ... REMOVED").
fn nothing_lost(image: &Arc<dyn Device>) -> bool {
    let fs = Ffs::mount(Arc::clone(image), &MountOptions::default()).unwrap();
    let at = |dir: &str, called: &str| {
        let parent = fs.lookup(ROOT, name(dir)).unwrap();
        fs.lookup(parent.ino, name(called)).ok()
    };
    let named: Vec<Attr> = [at("p", "x"), at("q", "y")].into_iter().flatten().collect();
    let dirs: Vec<&Attr> = named.iter().filter(|a| a.kind == FileType::Dir).collect();
    let dir_kept = dirs.len() == 1 && contents(&fs, dirs[0].ino, "inside") == b"in x";
    let lf = fs.lookup(ROOT, name("lost+found")).unwrap().ino;
    let mut found = Vec::new();
    fs.readdir(lf, 0, &mut |e| {
        found.push(e.name);
        true
    })
    .unwrap();
    let in_lf = found.iter().any(|n| contents(&fs, lf, &String::from_utf8_lossy(n)) == b"in y");
    let file_named = named.iter().any(|a| {
        a.kind == FileType::File && {
            let mut buf = vec![0u8; a.size as usize];
            fs.read(a.ino, 0, &mut buf).unwrap();
            buf == b"in y"
        }
    });
    dir_kept && (file_named || in_lf)
}

/// Under `sync`, wherever a crash comes, preen repairs the image (a count
/// too high, a directory named by both entries, or the inode whose entry
/// was rewritten first named by neither entry, put in lost+found), and
/// nothing is lost.
#[test]
fn under_sync_a_crash_anywhere_in_an_exchange_loses_nothing_and_preen_repairs_it() {
    each_crash_state_of_an_exchange(Policy::Sync, |image| {
        let report = fsck(&image, Repair::Preen).unwrap();
        assert!(!report.damage_left(), "{:?}", report.findings);
        assert!(fsck(&image, Repair::No).unwrap().clean(), "preen converged");
        assert!(nothing_lost(&image));
    });
}

/// Under `async`, which promises nothing of a crash, whatever state one
/// leaves `-y` repairs in one pass: a second `-y` finds nothing, and the
/// repaired image mounts and walks (an `async` crash image once needed
/// three passes, each repairing the same `..` entries again).
#[test]
fn under_async_whatever_a_crash_leaves_yes_repairs_in_one_pass() {
    each_crash_state_of_an_exchange(Policy::Async, |image| {
        let first = fsck(&image, Repair::Yes).unwrap();
        assert!(!first.damage_left(), "{:?}", first.findings);
        let second = fsck(&image, Repair::Yes).unwrap();
        assert!(second.clean(), "a second -y after {:?} found {:?}", first.findings, second.findings);
        let fs = Ffs::mount(Arc::clone(&image), &MountOptions::default()).unwrap();
        for dir in ["p", "q"] {
            fs.lookup(ROOT, name(dir)).unwrap();
        }
    });
}

/// Under `log` the exchange is one transaction: the replay leaves nothing
/// for fsck, and the two names name what they did before it or after.
#[test]
fn under_log_a_crash_anywhere_in_an_exchange_leaves_it_whole_or_undone() {
    each_crash_state_of_an_exchange(Policy::Log, |image| {
        // fsck replays the log first, into memory, as a mount does.
        let report = fsck(&image, Repair::No).unwrap();
        assert!(report.clean(), "{:?}", report.findings);
        let options = MountOptions { policy: Policy::Log, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&image), &options).unwrap();
        let p = fs.lookup(ROOT, name("p")).unwrap();
        let q = fs.lookup(ROOT, name("q")).unwrap();
        let kinds = (fs.lookup(p.ino, name("x")).unwrap().kind, fs.lookup(q.ino, name("y")).unwrap().kind);
        assert!(kinds == (FileType::Dir, FileType::File) || kinds == (FileType::File, FileType::Dir));
    });
}

/// Under `softdep`, whatever part of a write-back a power cut keeps, fsck
/// finds nothing but leaks, and neither name is lost.
#[test]
fn under_softdep_an_exchange_leaves_only_leaks_whatever_part_of_a_write_back_a_crash_keeps() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let (p, q) = directory_and_file(&fs);
    fs.unmount().unwrap();
    leaks_only_whatever_a_crash_keeps(&dev, &|fs| {
        fs.rename2(p, name("x"), q, name("y"), RenameMode::Exchange).unwrap();
    });
}

/// /a/x (a directory holding a file) and /b, written under `async` and
/// unmounted; returns (a, b). A file between b's block and x's keeps
/// them apart on the disk (neighbours go in one write, which a crash
/// keeps whole or not at all).
fn a_directory_to_move(dev: &Arc<dyn Device>) -> (u64, u64) {
    let fs = mount(dev, Policy::Async);
    let b = dir(&fs, ROOT, "b").ino;
    file(&fs, ROOT, "between", &[7u8; 64 << 10]);
    let a = dir(&fs, ROOT, "a").ino;
    let x = dir(&fs, a, "x");
    file(&fs, x.ino, "inside", b"in x");
    fs.unmount().unwrap();
    (a, b)
}

/// What the superblock on the disk says an image may hold.
fn damage_on_disk(dev: &Arc<dyn Device>) -> ffs::format::Damage {
    ffs::read_superblock(dev).unwrap().damage_possible()
}

/// Under `softdep`, a directory moving between directories marks the
/// superblock on the disk (every mount refuses a crash image then, naming
/// `fsck -p`), and the mark comes down once the move is on the disk.
#[test]
fn under_softdep_a_directory_moving_between_directories_marks_the_superblock_until_it_is_on_the_disk() {
    let dev = fresh(16 << 20);
    let (a, b) = a_directory_to_move(&dev);
    let fs = mount(&dev, Policy::Softdep);
    assert_eq!(damage_on_disk(&dev), ffs::format::Damage::Leaks, "a softdep mount's crash leaves leaks");
    fs.rename(a, name("x"), b, name("x")).unwrap();
    assert_eq!(damage_on_disk(&dev), ffs::format::Damage::Unknown, "marked before anything is written");
    let crashed: Arc<dyn Device> = Arc::new(MemDevice::from_bytes("crashed", &bytes_of(&dev), 512).unwrap());
    let refused = Ffs::mount(crashed, &MountOptions { policy: Policy::Softdep, ..Default::default() });
    let Err(ffs::FsError::Unclean(image)) = refused else { panic!("a marked image is refused") };
    let text = image.refusal("fs.img");
    assert!(text.contains("iolab fs fsck -p fs.img") && text.contains("a directory was moving"), "{text}");
    fs.sync().unwrap();
    assert_eq!(
        damage_on_disk(&dev),
        ffs::format::Damage::Leaks,
        "the mark is down once the move is on the disk"
    );
    fs.unmount().unwrap();
    assert_eq!(damage_on_disk(&dev), ffs::format::Damage::None);
}

/// One pass of the syncer writes what a move changed whatever its age
/// (here nothing is old enough for the usual write-back) and takes the
/// mark down: no whole sync needed, and the window lasts one pass.
#[test]
fn under_softdep_one_syncer_pass_writes_a_move_and_takes_the_mark_down() {
    let dev = fresh(16 << 20);
    let (a, b) = a_directory_to_move(&dev);
    let fs = mount(&dev, Policy::Softdep);
    fs.rename(a, name("x"), b, name("x")).unwrap();
    fs.tick(std::time::Duration::from_secs(3600)).unwrap();
    assert_eq!(damage_on_disk(&dev), ffs::format::Damage::Leaks);
    fs.unmount().unwrap();
}

/// A file moving between directories, or a directory renamed within its
/// own, leaves leaks only: nothing is marked.
#[test]
fn under_softdep_other_renames_do_not_mark_the_superblock() {
    let dev = fresh(16 << 20);
    let (a, b) = a_directory_to_move(&dev);
    let fs = mount(&dev, Policy::Softdep);
    fs.rename(a, name("x"), a, name("y")).unwrap();
    let y = fs.lookup(a, name("y")).unwrap();
    fs.rename(y.ino, name("inside"), b, name("moved")).unwrap();
    assert_eq!(damage_on_disk(&dev), ffs::format::Damage::Leaks);
    fs.unmount().unwrap();
}

/// Every byte of `dev`.
fn bytes_of(dev: &Arc<dyn Device>) -> Vec<u8> {
    let mut bytes = vec![0u8; dev.size_bytes() as usize];
    dev.read_at(&mut bytes, 0).unwrap();
    bytes
}

/// Wherever a crash comes in a directory's move under `softdep`, and
/// whatever part of the writes in flight it keeps: fsck finds leaks only,
/// or the superblock is marked and preen repairs the image; the directory
/// and its file are kept at one of the two names. Some state needs the
/// mark (the directory named from both parents, or `..` naming the old
/// one), or the mark would not be proven needed.
#[test]
fn under_softdep_a_crash_anywhere_in_a_directory_move_leaves_leaks_or_a_marked_image_preen_repairs() {
    let mem = Arc::new(MemDevice::new(16 << 20).unwrap());
    let dev: Arc<dyn Device> = mem.clone();
    ffs::mkfs(&dev, &ffs::MkfsOptions::default()).unwrap();
    let (a, b) = a_directory_to_move(&dev);
    let initial = MemDevice::from_bytes("initial", &mem.to_vec(), dev.sector_bytes()).unwrap();
    let recording = Recording::new();
    let recorded: Arc<dyn Device> = Arc::new(RecordingDevice::new(dev, 0, Arc::clone(&recording)));
    let options = MountOptions { policy: Policy::Softdep, cache_bytes: 1 << 20, ..Default::default() };
    let fs = Ffs::mount(recorded, &options).unwrap();
    fs.rename(a, name("x"), b, name("x")).unwrap();
    for _ in 0..4 {
        fs.tick(std::time::Duration::ZERO).unwrap();
    }
    fs.unmount().unwrap();
    let events = recording.events();
    let mut replayer = Replayer::new(events.clone(), vec![initial]);
    let (mut marked, mut beyond_leaks) = (0, 0);
    for at in 0..=events.len() {
        for (policy, seed) in [(CrashPolicy::KeepAll, 0), (CrashPolicy::KeepSubset, at as u64)] {
            let image: Arc<dyn Device> = Arc::new(
                replayer.images_at(CrashPoint { after_events: at, policy, seed }).unwrap().remove(0),
            );
            let found = fsck(&image, Repair::No).unwrap();
            let leaks_only = found.findings.iter().all(|f| f.class.is_leak());
            if damage_on_disk(&image) == ffs::format::Damage::Unknown {
                marked += 1;
                beyond_leaks += u32::from(!leaks_only);
                let report = fsck(&image, Repair::Preen).unwrap();
                assert!(!report.damage_left(), "after event {at}: {:?}", report.findings);
                assert!(fsck(&image, Repair::No).unwrap().clean(), "preen converged after event {at}");
            } else {
                assert!(leaks_only, "unmarked, after event {at}: {:?}", found.findings);
                fsck(&image, Repair::Leaks).unwrap();
            }
            let fs = Ffs::mount(Arc::clone(&image), &MountOptions::default()).unwrap();
            let kept: Vec<u64> = ["a", "b"]
                .iter()
                .filter_map(|p| fs.lookup(fs.lookup(ROOT, name(p)).unwrap().ino, name("x")).ok())
                .map(|x| x.ino)
                .collect();
            let in_lost_found = fs.lookup(ROOT, name("lost+found")).unwrap();
            let mut reconnected = Vec::new();
            fs.readdir(in_lost_found.ino, 0, &mut |e| {
                reconnected.push(e.ino);
                true
            })
            .unwrap();
            let x = kept.first().copied().or_else(|| reconnected.iter().copied().find(|&i| i > 2));
            assert!(kept.len() <= 1, "after event {at}: one name at most once repaired");
            let x = x.unwrap_or_else(|| panic!("after event {at}: the directory is lost"));
            assert_eq!(contents(&fs, x, "inside"), b"in x", "after event {at}");
        }
    }
    assert!(marked > 0 && beyond_leaks > 0, "marked {marked}, beyond leaks {beyond_leaks}");
}
