//! FIFOs, devices and sockets: stored with their kind and device number,
//! named, linked, renamed and removed under every policy, holding no
//! block, surviving remounts and crashes as an empty file does; and the
//! format version that brought them (2), with version 1 still read.

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::format::{DirRecord, DiskInode, InodeSlot, Superblock, INODE_BYTES};
use ffs::fsck::{fsck, Repair};
use ffs::{FsError, Policy};
use fsapi::{makedev, Errno, FileSystem, FileType, Owner, SetAttr, ROOT};

use crate::common::{fresh, mount, stored};

const POLICIES: [Policy; 4] = [Policy::Sync, Policy::Softdep, Policy::Log, Policy::Async];
const SPECIAL: [FileType; 4] =
    [FileType::Fifo, FileType::CharDevice, FileType::BlockDevice, FileType::Socket];

fn name(kind: FileType) -> String {
    format!("{kind:?}").to_lowercase()
}

/// A device number per kind (kept by the devices only).
fn number(kind: FileType) -> u32 {
    match kind {
        FileType::CharDevice => makedev(1, 3),
        FileType::BlockDevice => makedev(259, 0x12345),
        _ => makedev(9, 9),
    }
}

fn kept(kind: FileType) -> u32 {
    if kind.is_device() {
        number(kind)
    } else {
        0
    }
}

/// The kinds `readdir` of `dir` gives, by name.
fn listed(fs: &dyn FileSystem, dir: u64) -> Vec<(String, FileType)> {
    let mut out = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        out.push((String::from_utf8(e.name).unwrap(), e.kind));
        true
    })
    .unwrap();
    out
}

fn makes_each_kind(fs: &ffs::Ffs) {
    for kind in SPECIAL {
        let made = fs.mknod(ROOT, OsStr::new(&name(kind)), kind, number(kind), Owner::root(0o640)).unwrap();
        assert_eq!(
            (made.kind, made.rdev, made.perm, made.size, made.blocks),
            (kind, kept(kind), 0o640, 0, 0)
        );
        fs.forget(made.ino, 1);
    }
}

#[test]
fn each_kind_is_made_stated_and_listed_and_survives_a_remount_under_every_policy() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        makes_each_kind(&fs);
        fs.unmount().unwrap();
        let report = fsck(&dev, Repair::No).unwrap();
        assert!(report.clean(), "{policy:?}: {:?}", report.findings);
        let fs = mount(&dev, policy);
        for kind in SPECIAL {
            let a = fs.lookup(ROOT, OsStr::new(&name(kind))).unwrap();
            assert_eq!(
                (a.kind, a.rdev, a.perm, a.nlink, a.size),
                (kind, kept(kind), 0o640, 1, 0),
                "{policy:?}"
            );
            fs.forget(a.ino, 1);
            assert!(
                listed(&fs, ROOT).contains(&(name(kind), kind)),
                "{policy:?}: {kind:?} listed with its kind"
            );
        }
        fs.unmount().unwrap();
    }
}

#[test]
fn a_special_file_takes_an_inode_and_no_block() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let before = fs.statfs().unwrap();
    makes_each_kind(&fs);
    let after = fs.statfs().unwrap();
    assert_eq!((before.blocks_free - after.blocks_free, before.files_free - after.files_free), (0, 4));
}

#[test]
fn reads_writes_and_truncation_of_a_special_file_are_refused() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    for kind in SPECIAL {
        let n = fs.mknod(ROOT, OsStr::new(&name(kind)), kind, number(kind), Owner::root(0o666)).unwrap();
        assert_eq!(fs.write(n.ino, 0, b"bytes"), Err(Errno::INVAL), "{kind:?}");
        assert_eq!(fs.read(n.ino, 0, &mut [0u8; 4]), Err(Errno::INVAL), "{kind:?}");
        let truncate = SetAttr { size: Some(10), ..SetAttr::default() };
        assert_eq!(fs.setattr(n.ino, &truncate), Err(Errno::INVAL), "{kind:?}");
        assert_eq!(fs.getattr(n.ino).unwrap().size, 0);
    }
}

#[test]
fn mknod_refuses_a_taken_name_a_directory_and_a_symlink() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    fs.mknod(ROOT, OsStr::new("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    assert_eq!(fs.mknod(ROOT, OsStr::new("p"), FileType::Socket, 0, Owner::root(0o644)), Err(Errno::EXIST));
    assert_eq!(fs.mknod(ROOT, OsStr::new("d"), FileType::Dir, 0, Owner::root(0o755)), Err(Errno::PERM));
    assert_eq!(fs.mknod(ROOT, OsStr::new("l"), FileType::Symlink, 0, Owner::root(0o777)), Err(Errno::INVAL));
    assert_eq!(fs.mknod(9999, OsStr::new("x"), FileType::Fifo, 0, Owner::root(0o644)), Err(Errno::STALE));
}

#[test]
fn each_kind_is_linked_renamed_and_removed_under_every_policy_and_fsck_is_clean_after() {
    for policy in POLICIES {
        let dev = fresh(16 << 20);
        let fs = mount(&dev, policy);
        let free = fs.statfs().unwrap();
        let d = fs.mkdir(ROOT, OsStr::new("d"), Owner::root(0o755)).unwrap();
        makes_each_kind(&fs);
        for kind in SPECIAL {
            let (old, new) = (name(kind), format!("{}-moved", name(kind)));
            let a = fs.lookup(ROOT, OsStr::new(&old)).unwrap();
            let linked = fs.link(a.ino, d.ino, OsStr::new(&old)).unwrap();
            assert_eq!((linked.kind, linked.nlink), (kind, 2), "{policy:?}");
            fs.rename(ROOT, OsStr::new(&old), d.ino, OsStr::new(&new)).unwrap();
            let moved = fs.lookup(d.ino, OsStr::new(&new)).unwrap();
            assert_eq!((moved.ino, moved.kind, moved.rdev), (a.ino, kind, kept(kind)), "{policy:?}");
            fs.forget(a.ino, 3);
        }
        fs.unmount().unwrap();
        let report = fsck(&dev, Repair::No).unwrap();
        assert!(report.clean(), "{policy:?} linked and moved: {:?}", report.findings);
        let fs = mount(&dev, policy);
        let d = fs.lookup(ROOT, OsStr::new("d")).unwrap();
        assert_eq!(listed(&fs, d.ino).len(), 8, "{policy:?}: a link and a moved name per kind");
        for kind in SPECIAL {
            fs.unlink(d.ino, OsStr::new(&name(kind))).unwrap();
            fs.unlink(d.ino, OsStr::new(&format!("{}-moved", name(kind)))).unwrap();
        }
        fs.forget(d.ino, 1);
        fs.rmdir(ROOT, OsStr::new("d")).unwrap();
        fs.unmount().unwrap();
        let report = fsck(&dev, Repair::No).unwrap();
        assert!(report.clean(), "{policy:?} removed: {:?}", report.findings);
        // Counted once the unmount is done (soft updates frees after flushes).
        let after = mount(&dev, policy).statfs().unwrap();
        assert_eq!((after.blocks_free, after.files_free), (free.blocks_free, free.files_free), "{policy:?}");
    }
}

#[test]
fn a_special_file_renamed_over_a_file_replaces_it_and_the_entry_says_its_kind() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, &[7u8; 9000]).unwrap();
    fs.forget(f.ino, 1);
    let s = fs.mknod(ROOT, OsStr::new("s"), FileType::Socket, 0, Owner::root(0o755)).unwrap();
    fs.rename(ROOT, OsStr::new("s"), ROOT, OsStr::new("f")).unwrap();
    assert!(listed(&fs, ROOT).contains(&("f".to_string(), FileType::Socket)));
    assert_eq!(fs.lookup(ROOT, OsStr::new("f")).unwrap().ino, s.ino);
    fs.unmount().unwrap();
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.clean(), "{:?}", report.findings);
}

/// Under `sync` mknod writes the inode, then the entry, each durable: a
/// crash as soon as it returns finds the node, and nothing to repair but
/// what preen does.
#[test]
fn under_sync_a_node_is_on_the_disk_when_mknod_returns() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    fs.mknod(ROOT, OsStr::new("c"), FileType::CharDevice, makedev(1, 3), Owner::root(0o600)).unwrap();
    drop(fs); // a crash: nothing written back, nothing unmounted
    let report = fsck(&dev, Repair::Preen).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    let fs = mount(&dev, Policy::Async);
    let c = fs.lookup(ROOT, OsStr::new("c")).unwrap();
    assert_eq!((c.kind, c.rdev), (FileType::CharDevice, makedev(1, 3)));
}

/// Under `softdep` the entry naming a new node waits for its inode, as a
/// file's does: written once, never flushed, the image has leaks only.
#[test]
fn under_softdep_a_nodes_entry_is_not_written_before_its_inode() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Softdep);
    fs.mknod(ROOT, OsStr::new("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    fs.write_back_older(std::time::Duration::ZERO).unwrap();
    drop(fs);
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.findings.iter().all(|f| f.class.is_leak()), "{:?}", report.findings);
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(ROOT, OsStr::new("p")).err(), Some(Errno::NOENT), "the entry went before its inode");
}

/// Under `log` a node is committed whole with its entry, or not at all.
#[test]
fn under_log_a_node_synced_is_replayed_and_one_not_committed_is_not_there() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    fs.mknod(ROOT, OsStr::new("b"), FileType::BlockDevice, makedev(8, 1), Owner::root(0o660)).unwrap();
    fs.sync().unwrap();
    fs.mknod(ROOT, OsStr::new("late"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    drop(fs);
    let report = fsck(&dev, Repair::No).unwrap();
    assert!(report.replayed_commits > 0 && report.clean(), "{report:?}");
    let fs = mount(&dev, Policy::Async);
    assert_eq!(fs.lookup(ROOT, OsStr::new("b")).unwrap().rdev, makedev(8, 1));
    assert_eq!(fs.lookup(ROOT, OsStr::new("late")).err(), Some(Errno::NOENT));
}

#[test]
fn a_node_is_stored_with_the_kernels_mode_bits_its_number_and_its_entry_type() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let mut made = Vec::new();
    for kind in SPECIAL {
        let a = fs.mknod(ROOT, OsStr::new(&name(kind)), kind, number(kind), Owner::root(0o640)).unwrap();
        made.push((kind, a.ino));
    }
    fs.unmount().unwrap();
    for (kind, ino) in &made {
        let inode = stored(&dev, *ino);
        assert_eq!(u32::from(inode.mode), kind.mode_bits() | 0o640, "{kind:?}");
        assert_eq!((inode.rdev, inode.holds_data()), (kept(*kind), false), "{kind:?}");
    }
    // The root's first block: each node's record carries ext2's type code.
    let root = stored(&dev, ROOT);
    let mut block = vec![0u8; 4096];
    dev.read_at(&mut block, u64::from(root.direct[0]) * 4096).unwrap();
    let mut types = Vec::new();
    let mut at = 0;
    while at < 4096 {
        let rec = DirRecord::read(&block, at).unwrap();
        if rec.ino != 0 {
            types.push((String::from_utf8(rec.name).unwrap(), rec.kind));
        }
        at += rec.reclen as usize;
    }
    for (n, code) in [("fifo", 5), ("chardevice", 3), ("blockdevice", 4), ("socket", 6)] {
        assert!(types.contains(&(n.to_string(), code)), "{n}: {types:?}");
    }
}

/// Writes `sb` (its version as given) to both slots, generations in turn.
fn write_both_slots(dev: &Arc<dyn Device>, sb: &Superblock) {
    for slot in 0..2u64 {
        let mut copy = sb.clone();
        copy.generation = sb.generation + (slot + sb.generation) % 2;
        let mut buf = vec![0u8; 4096];
        buf[..512].copy_from_slice(&copy.encode());
        dev.write_at(&buf, (copy.generation % 2) * 4096).unwrap();
    }
}

#[test]
fn a_version_1_image_is_read_and_its_first_mount_makes_it_the_newest() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let f = fs.create(ROOT, OsStr::new("old"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, b"version 1 data").unwrap();
    fs.unmount().unwrap();
    let mut sb = ffs::read_superblock(&dev).unwrap();
    assert_eq!(sb.version, ffs::format::VERSION, "mkfs makes the newest version");
    sb.version = 1;
    write_both_slots(&dev, &sb);
    assert_eq!(ffs::read_superblock(&dev).unwrap().version, 1);
    assert!(fsck(&dev, Repair::No).unwrap().clean(), "fsck reads version 1");
    let fs = mount(&dev, Policy::Log);
    let old = fs.lookup(ROOT, OsStr::new("old")).unwrap();
    let mut buf = [0u8; 14];
    fs.read(old.ino, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"version 1 data");
    fs.mknod(ROOT, OsStr::new("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
    assert_eq!(
        ffs::read_superblock(&dev).unwrap().version,
        ffs::format::VERSION,
        "what may hold a FIFO says the newest version"
    );
}

#[test]
fn a_version_past_3_is_refused_naming_the_versions_read() {
    let dev = fresh(16 << 20);
    let mut sb = ffs::read_superblock(&dev).unwrap();
    sb.version = 4;
    write_both_slots(&dev, &sb);
    let err = ffs::read_superblock(&dev).unwrap_err();
    assert!(matches!(err, FsError::Version { found: 4, oldest: 1, newest: 3 }), "{err}");
    assert!(err.to_string().contains("versions 1 to 3"), "{err}");
}

/// A character device's inode, byte for byte as docs/formats.md ("Inode")
/// gives it: the kernel's mode bits, no size and no pointer, the number
/// at byte 248, the checksum over the inode number and the 256 bytes.
#[test]
fn a_device_inode_is_byte_for_byte_the_documented_one() {
    let inode = DiskInode {
        mode: 0o020620,
        nlink: 1,
        uid: 5,
        gid: 6,
        generation: 9,
        rdev: makedev(1, 3),
        ..DiskInode::default()
    };
    let mut bytes = vec![0u8; INODE_BYTES];
    inode.encode(77, &mut bytes);
    let crc = crate::common::seeded_crc_hex(77, &bytes, 84);
    codec::golden::assert_layout(
        &bytes,
        &[
            (0, "9021"),
            (2, "0100"),
            (4, "05000000"),
            (8, "06000000"),
            (80, "09000000"),
            (84, &crc),
            (248, "03010000"),
        ],
    );
    assert_eq!(DiskInode::decode(77, &bytes), InodeSlot::Used(inode));
}
