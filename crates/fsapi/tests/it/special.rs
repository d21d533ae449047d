//! FIFOs, device nodes and sockets: made by `mknod` with their kind and
//! device number, named, linked, renamed and removed as files are, and
//! never read or written through the file system (the kernel moves their
//! bytes). The model and a kernel file system agree on each.

use std::ffi::OsStr;

use fsapi::{major, makedev, minor, Errno, FileSystem, FileType, HostFs, ModelFs, Owner, SetAttr, ROOT};

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

const SPECIAL: [FileType; 4] =
    [FileType::Fifo, FileType::CharDevice, FileType::BlockDevice, FileType::Socket];

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_device_number_is_encoded_as_glibc_and_the_kernel_give_it() {
    for (ma, mi) in [(0, 0), (1, 3), (8, 16), (259, 0), (4095, 0xfffff), (7, 0x12345)] {
        let rdev = makedev(ma, mi);
        assert_eq!(u64::from(rdev), libc::makedev(ma, mi), "{ma}:{mi}");
        assert_eq!((major(rdev), minor(rdev)), (ma, mi));
    }
}

#[test]
fn every_kind_is_named_by_its_mode_bits() {
    for kind in FileType::ALL {
        assert_eq!(FileType::from_mode(kind.mode_bits() | 0o644), Some(kind));
    }
    assert_eq!(FileType::from_mode(0o644), None, "no kind bits");
}

/// Each special kind made in `fs`, as `stat` shows it: kind, number
/// (devices only), no size, one link.
fn made_with_kind_and_number(fs: &dyn FileSystem) {
    let rdev = makedev(1, 3);
    for kind in SPECIAL {
        let made = fs.mknod(ROOT, name(&format!("{kind:?}")), kind, rdev, Owner::root(0o640)).unwrap();
        let looked = fs.lookup(ROOT, name(&format!("{kind:?}"))).unwrap();
        let want = if kind.is_device() { rdev } else { 0 };
        assert_eq!((looked.kind, looked.rdev, looked.perm), (kind, want, 0o640), "{kind:?}");
        assert_eq!((looked.size, looked.nlink, looked.ino), (0, 1, made.ino), "{kind:?}");
        fs.forget(made.ino, 2);
    }
    let mut listed = Vec::new();
    fs.readdir(ROOT, 0, &mut |e| {
        listed.push((String::from_utf8(e.name).unwrap(), e.kind));
        true
    })
    .unwrap();
    for kind in SPECIAL {
        assert!(listed.contains(&(format!("{kind:?}"), kind)), "{kind:?} listed with its kind: {listed:?}");
    }
}

#[test]
fn the_model_makes_each_special_kind_with_its_number() {
    made_with_kind_and_number(&ModelFs::new());
}

#[test]
fn a_kernel_file_system_makes_each_special_kind_with_its_number() {
    if !is_root() {
        eprintln!("skipped: device nodes need root (CAP_MKNOD)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    made_with_kind_and_number(&HostFs::new(dir.path()).unwrap());
}

/// What mknod(2) refuses, in its order: the kind first, then the name.
fn refusals(fs: &dyn FileSystem) {
    fs.mknod(ROOT, name("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    assert_eq!(fs.mknod(ROOT, name("p"), FileType::Fifo, 0, Owner::root(0o644)).err(), Some(Errno::EXIST));
    assert_eq!(fs.mknod(ROOT, name("p"), FileType::Dir, 0, Owner::root(0o755)).err(), Some(Errno::PERM));
    assert_eq!(fs.mknod(ROOT, name("q"), FileType::Symlink, 0, Owner::root(0o777)).err(), Some(Errno::INVAL));
    let f = fs.lookup(ROOT, name("p")).unwrap();
    assert_eq!(fs.mknod(f.ino, name("x"), FileType::Fifo, 0, Owner::root(0o644)).err(), Some(Errno::NOTDIR));
    assert_eq!(
        fs.mknod(ROOT, name("no/such"), FileType::Fifo, 0, Owner::root(0o644)).err(),
        Some(Errno::INVAL)
    );
    fs.forget(f.ino, 1);
    // A regular file through mknod is an empty file.
    let r = fs.mknod(ROOT, name("r"), FileType::File, 0, Owner::root(0o600)).unwrap();
    assert_eq!((r.kind, r.size), (FileType::File, 0));
    fs.forget(r.ino, 1);
}

#[test]
fn the_model_refuses_what_mknod_refuses() {
    refusals(&ModelFs::new());
}

#[test]
fn a_kernel_file_system_refuses_what_the_model_refuses() {
    let dir = tempfile::tempdir().unwrap();
    refusals(&HostFs::new(dir.path()).unwrap());
}

/// Reads, writes and truncation of a FIFO, a device and a socket are
/// refused, never waited on (a FIFO opened to read waits for a writer).
fn no_data(fs: &dyn FileSystem) {
    for kind in SPECIAL.into_iter().filter(|k| is_root() || !k.is_device()) {
        let n = fs.mknod(ROOT, name(&format!("{kind:?}")), kind, makedev(1, 5), Owner::root(0o666)).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(fs.read(n.ino, 0, &mut buf), Err(Errno::INVAL), "{kind:?}");
        assert_eq!(fs.write(n.ino, 0, b"x"), Err(Errno::INVAL), "{kind:?}");
        let truncate = SetAttr { size: Some(0), ..SetAttr::default() };
        assert_eq!(fs.setattr(n.ino, &truncate).err(), Some(Errno::INVAL), "{kind:?}");
        let chmod = SetAttr { perm: Some(0o600), ..SetAttr::default() };
        assert_eq!(fs.setattr(n.ino, &chmod).unwrap().perm, 0o600, "{kind:?}");
        fs.forget(n.ino, 1);
    }
}

#[test]
fn the_model_keeps_no_data_for_special_files() {
    no_data(&ModelFs::new());
}

#[test]
fn a_kernel_file_systems_special_files_are_never_opened_for_data() {
    let dir = tempfile::tempdir().unwrap();
    no_data(&HostFs::new(dir.path()).unwrap());
}

/// Linked, renamed over a file, listed under the new name and removed.
fn names_as_files_have(fs: &dyn FileSystem) {
    let p = fs.mknod(ROOT, name("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    let linked = fs.link(p.ino, ROOT, name("q")).unwrap();
    assert_eq!((linked.kind, linked.nlink), (FileType::Fifo, 2));
    let f = fs.create(ROOT, name("f"), Owner::root(0o644)).unwrap();
    fs.rename(ROOT, name("q"), ROOT, name("f")).unwrap();
    let moved = fs.lookup(ROOT, name("f")).unwrap();
    assert_eq!((moved.kind, moved.ino, moved.nlink), (FileType::Fifo, p.ino, 2));
    fs.unlink(ROOT, name("p")).unwrap();
    fs.unlink(ROOT, name("f")).unwrap();
    assert_eq!(fs.lookup(ROOT, name("p")).err(), Some(Errno::NOENT));
    for ino in [p.ino, linked.ino, f.ino, moved.ino] {
        fs.forget(ino, 1);
    }
}

#[test]
fn the_model_links_renames_and_removes_a_fifo_as_a_file() {
    names_as_files_have(&ModelFs::new());
}

#[test]
fn a_kernel_file_system_links_renames_and_removes_a_fifo_as_the_model_does() {
    let dir = tempfile::tempdir().unwrap();
    names_as_files_have(&HostFs::new(dir.path()).unwrap());
}

#[test]
fn interruptible_makes_nodes_until_stopped() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (model, stop) = (ModelFs::new(), AtomicBool::new(false));
    let fs = fsapi::Interruptible::new(&model, &stop);
    let p = fs.mknod(ROOT, name("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap();
    fs.forget(p.ino, 1);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(fs.mknod(ROOT, name("q"), FileType::Fifo, 0, Owner::root(0o644)).err(), Some(Errno::INTR));
    assert_eq!(model.lookup(ROOT, name("q")).err(), Some(Errno::NOENT));
}
