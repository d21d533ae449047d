//! The tree workloads: an archive extracted onto iolab's file system and
//! onto the reference model gives the tree the archive holds; `rm -rf`
//! leaves nothing; bad archives and members are refused or skipped by name.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::Arc;

use device::{Device, MemDevice};
use ffs::{Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::testing::walk;
use fsapi::{FileSystem, FileType, ModelFs, Owner, ROOT};
use workloads::tree::{extract, remove_tree, TreeError};

type Tree = BTreeMap<String, (FileType, Vec<u8>, u32)>;

fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_uid(1000);
    h.set_gid(100);
    h.set_mtime(1_500_000_000);
    h
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

/// An archive shaped like a source tree, with the tree it holds.
fn archive() -> (Vec<u8>, Tree) {
    let mut b = tar::Builder::new(Vec::new());
    let mut tree = Tree::new();
    let dir = |b: &mut tar::Builder<Vec<u8>>, tree: &mut Tree, path: &str| {
        b.append_data(&mut header(tar::EntryType::Directory, 0, 0o755), path, &[][..]).unwrap();
        tree.insert(format!("/{path}"), (FileType::Dir, Vec::new(), 2));
    };
    dir(&mut b, &mut tree, "src");
    dir(&mut b, &mut tree, "src/lib");
    let sizes = [0usize, 1, 10240, 10241, 4096 * 12 + 1, 300_000];
    for (i, len) in sizes.iter().enumerate() {
        let path = format!("src/lib/f{i}.c");
        b.append_data(
            &mut header(tar::EntryType::Regular, *len as u64, 0o644),
            &path,
            &data(*len, i as u8)[..],
        )
        .unwrap();
        tree.insert(format!("/{path}"), (FileType::File, data(*len, i as u8), 1));
    }
    // A parent the archive never names, made on the way.
    b.append_data(&mut header(tar::EntryType::Regular, 3, 0o600), "implicit/deep/x.h", &b"abc"[..]).unwrap();
    tree.insert("/implicit".into(), (FileType::Dir, Vec::new(), 3));
    tree.insert("/implicit/deep".into(), (FileType::Dir, Vec::new(), 2));
    tree.insert("/implicit/deep/x.h".into(), (FileType::File, b"abc".to_vec(), 1));
    // A 255-byte name (a GNU long-name member) and a symlink.
    let long = format!("src/{}", "n".repeat(255));
    b.append_data(&mut header(tar::EntryType::Regular, 2, 0o644), &long, &b"hi"[..]).unwrap();
    tree.insert(format!("/{long}"), (FileType::File, b"hi".to_vec(), 1));
    let mut h = header(tar::EntryType::Symlink, 0, 0o777);
    b.append_link(&mut h, "src/link", "lib/f1.c").unwrap();
    tree.insert("/src/link".into(), (FileType::Symlink, b"lib/f1.c".to_vec(), 1));
    // A hard link to an earlier file: both names count two links.
    let mut h = header(tar::EntryType::Link, 0, 0o644);
    b.append_link(&mut h, "src/hard.c", "src/lib/f2.c").unwrap();
    let f2 = data(10240, 2);
    tree.insert("/src/hard.c".into(), (FileType::File, f2.clone(), 2));
    tree.insert("/src/lib/f2.c".into(), (FileType::File, f2, 2));
    tree.insert("/src".into(), (FileType::Dir, Vec::new(), 3));
    (b.into_inner().unwrap(), tree)
}

fn ffs_on_mem() -> Ffs {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
    ffs::mkfs(&dev, &MkfsOptions::default()).unwrap();
    Ffs::mount(dev, &MountOptions { policy: Policy::Async, cache_bytes: 4 << 20, ..Default::default() })
        .unwrap()
}

/// Extracts into a new directory `x` and returns what is under it.
fn extract_and_walk(fs: &dyn FileSystem, tar: &[u8]) -> Tree {
    let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
    extract(fs, x.ino, tar).unwrap();
    let mut tree = Tree::new();
    walk(fs, x.ino, "", &mut tree);
    fs.forget(x.ino, 1);
    tree
}

#[test]
fn an_archive_extracts_to_the_tree_it_holds_on_iolab_fs_and_on_the_model() {
    let (tar, expected) = archive();
    let fs = ffs_on_mem();
    assert_eq!(extract_and_walk(&fs, &tar), expected);
    assert_eq!(extract_and_walk(&ModelFs::new(), &tar), expected);
}

#[test]
fn owners_modes_and_times_come_from_the_archive() {
    let (tar, _) = archive();
    let fs = ffs_on_mem();
    extract_and_walk(&fs, &tar);
    for path in ["x/src/lib/f3.c", "x/src/lib", "x/implicit/deep/x.h"] {
        let a = fsapi::resolve(&fs, path).unwrap();
        let perm = if path.ends_with("x.h") {
            0o600
        } else if a.kind == FileType::Dir {
            0o755
        } else {
            0o644
        };
        assert_eq!((a.perm, a.uid, a.gid, a.mtime.secs), (perm, 1000, 100, 1_500_000_000), "{path}");
        fs.forget(a.ino, 1);
    }
}

#[test]
fn extracting_twice_replaces_what_the_first_left() {
    let (tar, expected) = archive();
    let fs = ModelFs::new();
    let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
    extract(&fs, x.ino, &tar).unwrap();
    let again = extract(&fs, x.ino, &tar).unwrap();
    let mut tree = Tree::new();
    walk(&fs, x.ino, "", &mut tree);
    assert_eq!((tree, again.files, again.hard_links), (expected, 8, 1));
}

#[test]
fn rm_removes_the_whole_tree() {
    let (tar, _) = archive();
    let fs = ffs_on_mem();
    let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
    let made = extract(&fs, x.ino, &tar).unwrap();
    fs.forget(x.ino, 1);
    let removed = remove_tree(&fs, ROOT, OsStr::new("x"), "x").unwrap();
    // Every file, symlink and link name unlinked; x, src, lib, implicit, deep.
    assert_eq!((removed.unlinked, removed.dirs), (made.files + made.symlinks + made.hard_links, 5));
    let mut tree = Tree::new();
    walk(&fs, ROOT, "", &mut tree);
    assert_eq!(tree.keys().collect::<Vec<_>>(), ["/lost+found"]);
}

/// A chain of `depth` directories `d/d/d/...` under the root.
fn chain(fs: &dyn FileSystem, depth: usize) {
    let mut dir = ROOT;
    for _ in 0..depth {
        let next = fs.mkdir(dir, OsStr::new("d"), Owner::root(0o755)).unwrap();
        fs.forget(dir, 1);
        dir = next.ino;
    }
    fs.forget(dir, 1);
}

/// `rm -rf` of a chain 10,000 directories deep, on the test thread's
/// ordinary stack: the walk keeps its own stack, it does not recurse.
#[test]
fn rm_removes_a_chain_ten_thousand_directories_deep() {
    let fs = ModelFs::new();
    chain(&fs, 10_000);
    let removed = remove_tree(&fs, ROOT, OsStr::new("d"), "d").unwrap();
    assert_eq!((removed.dirs, removed.unlinked), (10_000, 0));
    assert_eq!(fs.lookup(ROOT, OsStr::new("d")).unwrap_err(), fsapi::Errno::NOENT);
}

/// Stopped half way by its flag (Ctrl-C), a removal gives back every
/// reference it took, and the image it leaves unmounts and checks clean.
#[test]
fn an_interrupted_rm_leaves_a_clean_image() {
    let (tar, _) = archive();
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
    ffs::mkfs(&dev, &MkfsOptions::default()).unwrap();
    let options = MountOptions { policy: Policy::Sync, cache_bytes: 1 << 20, ..Default::default() };
    let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
    extract(&fs, ROOT, &tar).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let stoppable = fsapi::Interruptible::new(&fs, &stop);
    let mut seen = 0;
    let mut stop_after_three = || {
        seen += 1;
        if seen == 3 {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    };
    let stopped = workloads::tree::remove_tree_observed(
        &stoppable,
        ROOT,
        OsStr::new("src"),
        "src",
        &mut stop_after_three,
    );
    assert!(matches!(stopped, Err(TreeError::Call { errno: fsapi::Errno::INTR, .. })), "{stopped:?}");
    fs.unmount().unwrap();
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn after_extraction_and_rm_the_image_checks_clean() {
    let (tar, _) = archive();
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
    ffs::mkfs(&dev, &MkfsOptions::default()).unwrap();
    for step in 0..2 {
        let fs = Ffs::mount(
            Arc::clone(&dev),
            &MountOptions { policy: Policy::Sync, cache_bytes: 1 << 20, ..Default::default() },
        )
        .unwrap();
        if step == 0 {
            extract(&fs, ROOT, &tar).unwrap();
        } else {
            for top in ["src", "implicit"] {
                remove_tree(&fs, ROOT, OsStr::new(top), top).unwrap();
            }
        }
        fs.unmount().unwrap();
        let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
        assert!(report.findings.is_empty(), "after step {step}: {:?}", report.findings);
    }
}

#[test]
fn a_member_with_dot_dot_is_skipped_not_extracted_above_the_root() {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = header(tar::EntryType::Regular, 1, 0o644);
    // append_data refuses "..": write the name into the header directly.
    h.as_old_mut().name[..9].copy_from_slice(b"../evil.c");
    h.set_cksum();
    b.append(&h, &b"x"[..]).unwrap();
    let fs = ModelFs::new();
    let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
    let out = extract(&fs, x.ino, &b.into_inner().unwrap()).unwrap();
    assert_eq!(out.skipped.len(), 1);
    assert!(fs.lookup(ROOT, OsStr::new("evil.c")).is_err(), "nothing written above the extraction's root");
}

#[test]
fn a_truncated_archive_is_an_error_naming_the_member() {
    let (tar, _) = archive();
    let cut = &tar[..tar.len() / 2];
    let fs = ModelFs::new();
    let err = extract(&fs, ROOT, cut).unwrap_err();
    assert!(matches!(err, TreeError::Archive { .. }), "{err}");
}

#[test]
fn a_full_file_system_is_enospc_by_name() {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(2 << 20).unwrap());
    ffs::mkfs(&dev, &MkfsOptions::default()).unwrap();
    let fs = Ffs::mount(dev, &MountOptions::default()).unwrap();
    let mut b = tar::Builder::new(Vec::new());
    let big = vec![7u8; 4 << 20];
    b.append_data(&mut header(tar::EntryType::Regular, big.len() as u64, 0o644), "big", &big[..]).unwrap();
    let err = extract(&fs, ROOT, &b.into_inner().unwrap()).unwrap_err();
    assert!(matches!(err, TreeError::Call { errno: fsapi::Errno::NOSPC, .. }), "{err}");
    assert!(err.to_string().starts_with("big: write"), "{err}");
}

/// The model, whose unlink of one name fails.
struct FailingUnlink {
    inner: ModelFs,
    name: &'static str,
}

impl FileSystem for FailingUnlink {
    fn lookup(&self, parent: fsapi::Ino, name: &OsStr) -> fsapi::Result<fsapi::Attr> {
        self.inner.lookup(parent, name)
    }
    fn forget(&self, ino: fsapi::Ino, count: u64) {
        self.inner.forget(ino, count)
    }
    fn getattr(&self, ino: fsapi::Ino) -> fsapi::Result<fsapi::Attr> {
        self.inner.getattr(ino)
    }
    fn setattr(&self, ino: fsapi::Ino, changes: &fsapi::SetAttr) -> fsapi::Result<fsapi::Attr> {
        self.inner.setattr(ino, changes)
    }
    fn create(&self, parent: fsapi::Ino, name: &OsStr, owner: Owner) -> fsapi::Result<fsapi::Attr> {
        self.inner.create(parent, name, owner)
    }
    fn mkdir(&self, parent: fsapi::Ino, name: &OsStr, owner: Owner) -> fsapi::Result<fsapi::Attr> {
        self.inner.mkdir(parent, name, owner)
    }
    fn mknod(
        &self,
        parent: fsapi::Ino,
        name: &OsStr,
        kind: FileType,
        rdev: u32,
        owner: Owner,
    ) -> fsapi::Result<fsapi::Attr> {
        self.inner.mknod(parent, name, kind, rdev, owner)
    }
    fn symlink(
        &self,
        parent: fsapi::Ino,
        name: &OsStr,
        target: &OsStr,
        owner: Owner,
    ) -> fsapi::Result<fsapi::Attr> {
        self.inner.symlink(parent, name, target, owner)
    }
    fn readlink(&self, ino: fsapi::Ino) -> fsapi::Result<Vec<u8>> {
        self.inner.readlink(ino)
    }
    fn link(&self, ino: fsapi::Ino, new_parent: fsapi::Ino, new_name: &OsStr) -> fsapi::Result<fsapi::Attr> {
        self.inner.link(ino, new_parent, new_name)
    }
    fn unlink(&self, parent: fsapi::Ino, name: &OsStr) -> fsapi::Result<()> {
        if name == self.name {
            return Err(fsapi::Errno::IO);
        }
        self.inner.unlink(parent, name)
    }
    fn rmdir(&self, parent: fsapi::Ino, name: &OsStr) -> fsapi::Result<()> {
        self.inner.rmdir(parent, name)
    }
    fn rename2(
        &self,
        parent: fsapi::Ino,
        name: &OsStr,
        new_parent: fsapi::Ino,
        new_name: &OsStr,
        mode: fsapi::RenameMode,
    ) -> fsapi::Result<()> {
        self.inner.rename2(parent, name, new_parent, new_name, mode)
    }
    fn read(&self, ino: fsapi::Ino, offset: u64, buf: &mut [u8]) -> fsapi::Result<usize> {
        self.inner.read(ino, offset, buf)
    }
    fn write(&self, ino: fsapi::Ino, offset: u64, data: &[u8]) -> fsapi::Result<usize> {
        self.inner.write(ino, offset, data)
    }
    fn readdir(
        &self,
        ino: fsapi::Ino,
        offset: u64,
        entry: &mut dyn FnMut(fsapi::DirEntry) -> bool,
    ) -> fsapi::Result<()> {
        self.inner.readdir(ino, offset, entry)
    }
    fn fsync(&self, ino: fsapi::Ino, data_only: bool) -> fsapi::Result<()> {
        self.inner.fsync(ino, data_only)
    }
    fn statfs(&self) -> fsapi::Result<fsapi::StatFs> {
        self.inner.statfs()
    }
    fn sync(&self) -> fsapi::Result<()> {
        self.inner.sync()
    }
}

/// A file that cannot be unlinked stops the removal with its path.
#[test]
fn an_unlink_that_fails_names_the_files_path() {
    let fs = FailingUnlink { inner: ModelFs::new(), name: "f" };
    let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
    let d = fs.mkdir(x.ino, OsStr::new("d"), Owner::root(0o755)).unwrap();
    fs.create(d.ino, OsStr::new("f"), Owner::root(0o644)).unwrap();
    let err = remove_tree(&fs, ROOT, OsStr::new("x"), "x").unwrap_err();
    assert!(matches!(&err, TreeError::Call { path, call: "unlink", .. } if path == "x/d/f"), "{err}");
}

/// An archive holding a FIFO, a character device and a block device (as
/// GNU tar writes them: no data, the numbers in the header), and the
/// tree it holds.
fn archive_with_nodes() -> (Vec<u8>, Tree) {
    let mut b = tar::Builder::new(Vec::new());
    let mut tree = Tree::new();
    b.append_data(&mut header(tar::EntryType::Directory, 0, 0o755), "dev", &[][..]).unwrap();
    tree.insert("/dev".into(), (FileType::Dir, Vec::new(), 2));
    for (path, kind, entry, (major, minor), mode) in [
        ("dev/fifo", FileType::Fifo, tar::EntryType::Fifo, (0, 0), 0o644),
        ("dev/null", FileType::CharDevice, tar::EntryType::Char, (1, 3), 0o666),
        ("dev/sda1", FileType::BlockDevice, tar::EntryType::Block, (8, 1), 0o660),
    ] {
        let mut h = header(entry, 0, mode);
        h.set_device_major(major).unwrap();
        h.set_device_minor(minor).unwrap();
        b.append_data(&mut h, path, &[][..]).unwrap();
        let rdev = if kind.is_device() { fsapi::makedev(major, minor) } else { 0 };
        tree.insert(format!("/{path}"), (kind, rdev.to_le_bytes().to_vec(), 1));
    }
    (b.into_inner().unwrap(), tree)
}

#[test]
fn fifos_and_device_nodes_are_made_with_their_numbers_owners_and_times() {
    let (tar, expected) = archive_with_nodes();
    for fs in [&ffs_on_mem() as &dyn FileSystem, &ModelFs::new()] {
        let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
        let made = extract(fs, x.ino, &tar).unwrap();
        assert_eq!((made.specials, made.skipped.len()), (3, 0));
        let mut tree = Tree::new();
        walk(fs, x.ino, "", &mut tree);
        assert_eq!(tree, expected);
        let null = fsapi::resolve(fs, "x/dev/null").unwrap();
        assert_eq!((null.perm, null.uid, null.gid, null.mtime.secs), (0o666, 1000, 100, 1_500_000_000));
        fs.forget(null.ino, 1);
        fs.forget(x.ino, 1);
    }
}

#[test]
fn extracting_nodes_again_replaces_them_and_rm_removes_them() {
    let (tar, expected) = archive_with_nodes();
    let fs = ffs_on_mem();
    let x = fs.mkdir(ROOT, OsStr::new("x"), Owner::root(0o755)).unwrap();
    extract(&fs, x.ino, &tar).unwrap();
    let again = extract(&fs, x.ino, &tar).unwrap();
    let mut tree = Tree::new();
    walk(&fs, x.ino, "", &mut tree);
    assert_eq!((tree, again.specials), (expected, 3));
    fs.forget(x.ino, 1);
    let removed = remove_tree(&fs, ROOT, OsStr::new("x"), "x").unwrap();
    assert_eq!((removed.unlinked, removed.dirs), (3, 2));
    assert!(fs.lookup(ROOT, OsStr::new("x")).is_err());
}
