//! An image a crash left (the mount dropped without an unmount, as a
//! `kill -9` leaves it) is refused by every mount that writes, naming
//! `iolab fs fsck -p`, unless its policy's promise covers it: `log`
//! (its replay is its check) mounts at once, `softdep` (leaks only)
//! mounts saying `fsck -B` should follow; a forced mount stays recorded
//! until a check repairs the image.

use std::ffi::OsStr;
use std::sync::Arc;

use device::Device;
use ffs::format::Damage;
use ffs::fsck::{fsck, Repair};
use ffs::{Ffs, FsError, MountOptions, Mounted, Policy, Unclean};
use fsapi::{FileSystem, Owner, ROOT};

use crate::common::{fresh, mount};

/// Files made under `policy`, some of them synced, then the mount dropped
/// without an unmount: what SIGKILL leaves.
fn crashed(policy: Policy) -> Arc<dyn Device> {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, policy);
    for k in 0..40 {
        let name = format!("f{k}");
        let f = fs.create(ROOT, OsStr::new(&name), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &vec![k as u8; 9000]).unwrap();
        fs.forget(f.ino, 1);
        if k == 20 {
            fs.sync().unwrap();
        }
    }
    drop(fs);
    dev
}

/// Every byte of `dev`.
fn bytes_of(dev: &Arc<dyn Device>) -> Vec<u8> {
    let mut bytes = vec![0u8; dev.size_bytes() as usize];
    dev.read_at(&mut bytes, 0).unwrap();
    bytes
}

fn mount_as(dev: &Arc<dyn Device>, policy: Policy, unclean: Unclean) -> Result<Ffs, FsError> {
    Ffs::mount(Arc::clone(dev), &MountOptions { policy, cache_bytes: 1 << 20, unclean, ..Default::default() })
}

#[test]
fn a_crashed_sync_image_is_refused_naming_fsck_p_and_nothing_is_written() {
    for (policy, again) in
        [(Policy::Sync, Policy::Sync), (Policy::Async, Policy::Log), (Policy::Sync, Policy::Softdep)]
    {
        let dev = crashed(policy);
        let before = bytes_of(&dev);
        let err = mount_as(&dev, again, Unclean::Refuse).err().expect("refused");
        let FsError::Unclean(image) = &err else { panic!("{policy:?}: {err}") };
        assert_eq!((image.policy, image.clean, image.damage), (policy, false, Damage::Unknown));
        assert_eq!(image.mounted, Mounted::Refused);
        let text = image.refusal("fs.img");
        assert!(text.contains("`iolab fs fsck -p fs.img`") && text.contains("not clean"), "{text}");
        assert!(text.contains(&format!("policy {}", policy.name())), "{text}");
        assert!(bytes_of(&dev) == before, "{policy:?}: the refused mount wrote");
    }
}

#[test]
fn a_forced_mount_warns_and_the_image_stays_refused_until_a_check_repairs_it() {
    let dev = crashed(Policy::Sync);
    let fs = mount_as(&dev, Policy::Sync, Unclean::Force).unwrap();
    let image = fs.unclean().expect("said").clone();
    assert_eq!(image.mounted, Mounted::Forced);
    assert!(image.warning("fs.img").contains("--force"), "{}", image.warning("fs.img"));
    let f = fs.create(ROOT, OsStr::new("after"), Owner::root(0o644)).unwrap();
    fs.forget(f.ino, 1);
    let sb = fs.unmount().unwrap().superblock;
    assert_eq!((sb.clean, sb.damage), (true, Damage::Unknown), "unmounted, the damage still recorded");
    let err = mount_as(&dev, Policy::Sync, Unclean::Refuse).err().expect("refused after the forced mount");
    assert!(err.to_string().contains("a mount was forced over damage"), "{err}");
    // What the forced mount wrote may be beyond preen (it allocated from
    // the crash's stale maps: here an inode named twice); whatever preen
    // leaves stays recorded, and `-y` repairs it.
    if fsck(&dev, Repair::Preen).unwrap().damage_left() {
        assert_eq!(ffs::read_superblock(&dev).unwrap().damage, Damage::Unknown);
        assert!(mount_as(&dev, Policy::Sync, Unclean::Refuse).is_err());
    }
    let report = fsck(&dev, Repair::Yes).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    let sb = ffs::read_superblock(&dev).unwrap();
    assert_eq!((sb.clean, sb.damage), (true, Damage::None), "the check marks it clean");
    let fs = mount_as(&dev, Policy::Sync, Unclean::Refuse).unwrap();
    assert!(fs.unclean().is_none());
    fs.unmount().unwrap();
}

#[test]
fn preen_marks_a_crashed_image_clean_and_it_mounts() {
    for policy in [Policy::Sync, Policy::Async] {
        let dev = crashed(policy);
        let report = fsck(&dev, Repair::Preen).unwrap();
        assert!(!report.damage_left(), "{policy:?}: {:?}", report.findings);
        assert!(ffs::read_superblock(&dev).unwrap().clean, "{policy:?}");
        mount_as(&dev, policy, Unclean::Refuse).unwrap().unmount().unwrap();
        assert!(fsck(&dev, Repair::No).unwrap().clean());
    }
}

#[test]
fn a_crashed_log_image_mounts_after_its_replay() {
    let dev = crashed(Policy::Log);
    let sb = ffs::read_superblock(&dev).unwrap();
    assert!(!sb.clean || sb.policy != Policy::Log, "the home superblock lags the log");
    for again in [Policy::Log, Policy::Sync] {
        let fs = mount_as(&dev, again, Unclean::Refuse).unwrap();
        assert!(fs.unclean().is_none(), "replayed: nothing to say");
        drop(fs); // crashed again, under `again`
        if again == Policy::Sync {
            assert!(mount_as(&dev, Policy::Log, Unclean::Refuse).is_err(), "a crash under sync is refused");
        }
    }
}

#[test]
fn a_crashed_softdep_image_mounts_over_its_leaks_saying_fsck_b() {
    let dev = crashed(Policy::Softdep);
    let fs = mount_as(&dev, Policy::Softdep, Unclean::Refuse).unwrap();
    let image = fs.unclean().expect("said").clone();
    assert_eq!((image.mounted, image.damage), (Mounted::OverLeaks, Damage::Leaks));
    let warning = image.warning("fs.img");
    assert!(warning.contains("`iolab fs fsck -B fs.img`") && warning.contains("leaks only"), "{warning}");
    let sb = fs.unmount().unwrap().superblock;
    assert_eq!(sb.damage, Damage::Leaks, "the leaks stay recorded until fsck -B");
    // Under another policy too: the leaks are what it may hold.
    let fs = mount_as(&dev, Policy::Sync, Unclean::Refuse).unwrap();
    assert_eq!(fs.unclean().map(|u| u.mounted), Some(Mounted::OverLeaks));
    fs.unmount().unwrap();
    let report = fsck(&dev, Repair::Leaks).unwrap();
    assert!(!report.damage_left(), "{:?}", report.findings);
    let fs = mount_as(&dev, Policy::Softdep, Unclean::Refuse).unwrap();
    assert!(fs.unclean().is_none(), "fsck -B marked it clean");
    fs.unmount().unwrap();
}

#[test]
fn a_read_only_view_mounts_an_unclean_image_and_says_so() {
    let dev = crashed(Policy::Sync);
    let copy = Arc::new(device::snapshot(dev.as_ref()).unwrap());
    let view: Arc<dyn Device> = Arc::new(device::Overlay::new(copy));
    let fs = mount_as(&view, Policy::Async, Unclean::ReadOnly).unwrap();
    assert_eq!(fs.unclean().map(|u| u.mounted), Some(Mounted::ReadOnly));
    let f = fs.lookup(ROOT, OsStr::new("f3")).unwrap();
    assert_eq!(f.size, 9000);
}

#[test]
fn a_check_that_leaves_damage_records_it_and_mounts_refuse() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Sync);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.unmount().unwrap();
    // The entry names a free slot: damage preen leaves (`-y` repairs it).
    let sb = ffs::read_superblock(&dev).unwrap();
    let (block, at) = sb.inode_place(f.ino as u32);
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, block * 4096).unwrap();
    buf[at..at + ffs::format::INODE_BYTES].fill(0);
    dev.write_at(&buf, block * 4096).unwrap();
    assert!(fsck(&dev, Repair::Preen).unwrap().damage_left());
    assert_eq!(ffs::read_superblock(&dev).unwrap().damage, Damage::Unknown);
    assert!(matches!(mount_as(&dev, Policy::Sync, Unclean::Refuse), Err(FsError::Unclean(_))));
    assert!(!fsck(&dev, Repair::Yes).unwrap().damage_left());
    mount_as(&dev, Policy::Sync, Unclean::Refuse).unwrap().unmount().unwrap();
}

/// A version 1 superblock (before `damage`) reads as recording none; its
/// byte 106 is reserved there, and a mount writes the newest version.
#[test]
fn a_version_1_superblock_is_read_and_rewritten_as_the_newest() {
    let dev = fresh(8 << 20);
    let version_1 = |dev: &Arc<dyn Device>, byte_106: u8| {
        for slot in 0..2u64 {
            let mut block = vec![0u8; 4096];
            dev.read_at(&mut block, slot * 4096).unwrap();
            if block[..8] != *b"IOLABFS1" {
                continue;
            }
            block[8..12].copy_from_slice(&1u32.to_le_bytes());
            block[106] = byte_106;
            codec::Frame::zeroed(12).seal(&[], &mut block[..512]);
            dev.write_at(&block, slot * 4096).unwrap();
        }
    };
    version_1(&dev, 0);
    assert_eq!(ffs::read_superblock(&dev).unwrap().damage, Damage::None);
    mount(&dev, Policy::Async).unmount().unwrap();
    let mut block = vec![0u8; 4096];
    let newest = ffs::read_superblock_slots(&dev).unwrap().slot;
    dev.read_at(&mut block, u64::from(newest) * 4096).unwrap();
    assert_eq!(block[8..12], ffs::format::VERSION.to_le_bytes(), "rewritten as the newest version");
    version_1(&dev, 1);
    let err = ffs::read_superblock(&dev).unwrap_err().to_string();
    assert!(err.contains("reserved"), "{err}");
}
