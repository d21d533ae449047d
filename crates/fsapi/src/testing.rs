//! Test support shared by every backend's tests: a small language of
//! operations over a tree of a few names, run on any [`FileSystem`], and
//! the tree a file system holds, walked into a map to compare. Property
//! tests run the same random operations on a backend and on
//! [`crate::ModelFs`] and compare results and trees.

use std::collections::BTreeMap;
use std::ffi::OsStr;

use crate::{
    makedev, resolve, Attr, Errno, Fallocate, FileSystem, FileType, Owner, RenameMode, SetAttr, Whence,
    XattrFlags, ROOT,
};

/// The names every operation picks from (few, so they collide).
pub const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// The kinds `Op::Mknod` makes.
pub const SPECIAL_KINDS: [FileType; 4] =
    [FileType::Fifo, FileType::CharDevice, FileType::BlockDevice, FileType::Socket];

/// The extended attribute names `Op::SetXattr` and `Op::RemoveXattr`
/// pick from (few, so they collide; `user.` ones refused on special
/// files).
pub const XATTR_NAMES: [&str; 4] = ["user.a", "user.b", "trusted.t", "user.c"];

/// The flags `Op::SetXattr` picks from.
pub const XATTR_FLAGS: [XattrFlags; 3] = [XattrFlags::ANY, XattrFlags::CREATE, XattrFlags::REPLACE];

/// One operation: indexes pick a directory or a file of the current
/// tree (modulo its length) and a name of [`NAMES`].
#[derive(Clone, Debug)]
pub enum Op {
    Create(usize, usize),
    /// In a directory, a name, a kind of [`SPECIAL_KINDS`] and a device
    /// number (kept by devices only).
    Mknod(usize, usize, usize, u32),
    Mkdir(usize, usize),
    Symlink(usize, usize),
    Link(usize, usize, usize),
    Unlink(usize, usize),
    Rmdir(usize, usize),
    Rename(usize, usize, usize, usize),
    /// A rename with renameat2(2)'s flags: `NoReplace` or `Exchange`.
    Rename2(usize, usize, usize, usize, RenameMode),
    Write(usize, u16, u16),
    Truncate(usize, u16),
    /// A file, a mode of [`Fallocate::ALL`], an offset and a length
    /// (reaching the single indirect block).
    Fallocate(usize, usize, u32, u32),
    /// copy_file_range: from a file at an offset to a file (the same one,
    /// at times) at an offset, a length.
    Copy(usize, u16, usize, u16, u16),
    /// On a file or directory (an index into the files, then the
    /// directories), a name of [`XATTR_NAMES`], a value's length and
    /// flags of [`XATTR_FLAGS`].
    SetXattr(usize, usize, u16, usize),
    /// On a file or directory, a name of [`XATTR_NAMES`].
    RemoveXattr(usize, usize),
}

impl Op {
    /// An operation from six random numbers (what a property test
    /// generates), so every backend's tests draw from one distribution.
    /// Half the creates are mknods, told by a number a create leaves
    /// unused, so the seeds saved before mknod decode as they did unless
    /// that number is odd. Likewise half the renames take renameat2's
    /// flags (a quarter exchange, a quarter refuse to replace), told by
    /// the number a rename leaves unused. And half the truncations are fallocates
    /// and a quarter of the writes copies, told by a number those leave
    /// unused (a seed saved before decodes as it did while it is even,
    /// or for a write 0 modulo 4: a shrunk seed's zeros).
    /// that number is odd. Extended attributes came the same way: half the
    /// rmdirs set one and a quarter of the unlinks remove one (no saved
    /// seed holds either: rmdirs mostly fail on this small tree, and the
    /// mix keeps most of its unlinks).
    pub fn decode(n: [u16; 6]) -> Op {
        let (d, m) = (n[1] as usize % 8, n[2] as usize % NAMES.len());
        let (e, k) = (n[3] as usize % 8, n[4] as usize % NAMES.len());
        match n[0] % 9 {
            0 if n[5] % 2 == 1 => {
                let rdev = makedev(u32::from(n[4] % 300), u32::from(n[3]) * 17);
                Op::Mknod(d, m, n[3] as usize % SPECIAL_KINDS.len(), rdev)
            }
            0 => Op::Create(d, m),
            1 => Op::Mkdir(d, m),
            2 => Op::Symlink(d, m),
            3 => Op::Link(d, e, k),
            4 if n[5] % 4 == 3 => Op::RemoveXattr(n[1] as usize % 16, m),
            4 => Op::Unlink(d, m),
            5 if n[5] % 2 == 1 => {
                // Mostly small values; one in four up to past a block.
                let len = if n[4] % 4 == 0 { n[4] % 4500 } else { n[4] % 300 };
                Op::SetXattr(n[1] as usize % 16, m, len, n[3] as usize % XATTR_FLAGS.len())
            }
            5 => Op::Rmdir(d, m),
            6 if n[5] % 4 == 1 => Op::Rename2(d, m, e, k, RenameMode::Exchange),
            6 if n[5] % 4 == 3 => Op::Rename2(d, m, e, k, RenameMode::NoReplace),
            6 => Op::Rename(d, m, e, k),
            7 if n[2] % 4 == 1 => Op::Copy(d, n[4] % 9000, e, n[5] % 9000, (n[2] / 4) % 6000),
            7 => Op::Write(d, n[4] % 9000, n[5] % 5000),
            _ if n[2] % 2 == 1 => {
                let (offset, len) = (u32::from(n[4] % 9000) * 8, u32::from(n[5] % 9000) * 2);
                Op::Fallocate(d, n[3] as usize % Fallocate::ALL.len(), offset, len)
            }
            _ => Op::Truncate(d, n[5] % 9000),
        }
    }
}

/// The tree under `dir`: path -> (kind, content, target or device
/// number, links).
pub fn walk(
    fs: &dyn FileSystem,
    dir: crate::Ino,
    path: &str,
    out: &mut BTreeMap<String, (FileType, Vec<u8>, u32)>,
) {
    let mut entries = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        entries.push(e);
        true
    })
    .unwrap();
    for e in entries {
        let name = String::from_utf8(e.name).unwrap();
        let child_path = format!("{path}/{name}");
        let attr = fs.lookup(dir, OsStr::new(&name)).unwrap();
        let content = match attr.kind {
            FileType::File => {
                let mut buf = vec![0u8; attr.size as usize];
                let n = fs.read(attr.ino, 0, &mut buf).unwrap();
                buf.truncate(n);
                buf
            }
            FileType::Symlink => fs.readlink(attr.ino).unwrap(),
            FileType::Dir => Vec::new(),
            FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket => {
                attr.rdev.to_le_bytes().to_vec()
            }
        };
        out.insert(child_path.clone(), (attr.kind, content, attr.nlink));
        if attr.kind == FileType::Dir {
            walk(fs, attr.ino, &child_path, out);
        }
        fs.forget(attr.ino, 1);
    }
}

/// The tree's directories, the root ("") first.
pub fn dirs(fs: &dyn FileSystem) -> Vec<String> {
    let mut tree = BTreeMap::new();
    walk(fs, ROOT, "", &mut tree);
    let mut dirs = vec![String::new()];
    dirs.extend(tree.into_iter().filter(|(_, (k, _, _))| *k == FileType::Dir).map(|(p, _)| p));
    dirs
}

/// The tree's files and special files: what `Link`, `Write` and
/// `Truncate` pick from (the last two refused for a special file).
pub fn files(fs: &dyn FileSystem) -> Vec<String> {
    let mut tree = BTreeMap::new();
    walk(fs, ROOT, "", &mut tree);
    let picked = |k: &FileType| *k == FileType::File || k.is_special();
    tree.into_iter().filter(|(_, (k, _, _))| picked(k)).map(|(p, _)| p).collect()
}

/// Runs `f` on the inode at `path`, its reference released after.
fn with<T>(fs: &dyn FileSystem, path: &str, f: impl FnOnce(&Attr) -> T) -> T {
    let attr = resolve(fs, path).unwrap();
    let out = f(&attr);
    fs.forget(attr.ino, 1);
    out
}

/// [`with`] for [`apply`]: a path gone since the tree was listed (another
/// thread's call removed or renamed it) fails with the lookup's errno, as
/// a call by path would, rather than panicking.
fn within<T>(fs: &dyn FileSystem, path: &str, f: impl FnOnce(&Attr) -> crate::Result<T>) -> crate::Result<T> {
    let attr = resolve(fs, path)?;
    let out = f(&attr);
    fs.forget(attr.ino, 1);
    out
}

/// Runs `op` on `fs`, whose tree lists `dirs` and `files` (the same on
/// both file systems, as the test checks): the errno or nothing. Where
/// several threads change the tree, a path listed may be gone: its
/// lookup's errno.
pub fn apply(fs: &dyn FileSystem, op: &Op, dirs: &[String], files: &[String]) -> Result<(), crate::Errno> {
    let pick = |list: &[String], i: usize| list.get(i % list.len().max(1)).cloned();
    let dir = |i: usize| pick(dirs, i).unwrap_or_default();
    let owner = Owner::root(0o644);
    let keep = |r: crate::Result<Attr>| r.map(|a| fs.forget(a.ino, 1));
    match *op {
        Op::Create(d, n) => within(fs, &dir(d), |p| keep(fs.create(p.ino, OsStr::new(NAMES[n]), owner))),
        Op::Mkdir(d, n) => within(fs, &dir(d), |p| keep(fs.mkdir(p.ino, OsStr::new(NAMES[n]), owner))),
        Op::Mknod(d, n, k, rdev) => within(fs, &dir(d), |p| {
            keep(fs.mknod(p.ino, OsStr::new(NAMES[n]), SPECIAL_KINDS[k % SPECIAL_KINDS.len()], rdev, owner))
        }),
        Op::Symlink(d, n) => {
            within(fs, &dir(d), |p| keep(fs.symlink(p.ino, OsStr::new(NAMES[n]), OsStr::new("../t"), owner)))
        }
        Op::Link(f, d, n) => match pick(files, f) {
            Some(file) => within(fs, &file, |a| {
                within(fs, &dir(d), |p| keep(fs.link(a.ino, p.ino, OsStr::new(NAMES[n]))))
            }),
            None => Ok(()),
        },
        Op::Unlink(d, n) => within(fs, &dir(d), |p| fs.unlink(p.ino, OsStr::new(NAMES[n]))),
        Op::Rmdir(d, n) => within(fs, &dir(d), |p| fs.rmdir(p.ino, OsStr::new(NAMES[n]))),
        Op::Rename(a, m, b, n) => within(fs, &dir(a), |pa| {
            within(fs, &dir(b), |pb| fs.rename(pa.ino, OsStr::new(NAMES[m]), pb.ino, OsStr::new(NAMES[n])))
        }),
        Op::Rename2(a, m, b, n, mode) => within(fs, &dir(a), |pa| {
            within(fs, &dir(b), |pb| {
                fs.rename2(pa.ino, OsStr::new(NAMES[m]), pb.ino, OsStr::new(NAMES[n]), mode)
            })
        }),
        Op::Write(..) | Op::Truncate(..) | Op::Fallocate(..) | Op::Copy(..) => apply_data(fs, op, files),
        Op::SetXattr(t, n, len, flags) => {
            let name = XATTR_NAMES[n % XATTR_NAMES.len()];
            let value: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ n as u8).collect();
            let flags = XATTR_FLAGS[flags % XATTR_FLAGS.len()];
            within(fs, &target(files, dirs, t), |a| fs.setxattr(a.ino, OsStr::new(name), &value, flags))
        }
        Op::RemoveXattr(t, n) => {
            let name = XATTR_NAMES[n % XATTR_NAMES.len()];
            within(fs, &target(files, dirs, t), |a| fs.removexattr(a.ino, OsStr::new(name)))
        }
    }
}

/// The operations on a file's data: write, truncate, fallocate, copy.
fn apply_data(fs: &dyn FileSystem, op: &Op, files: &[String]) -> Result<(), crate::Errno> {
    let pick = |i: usize| files.get(i % files.len().max(1)).cloned();
    match *op {
        Op::Write(f, offset, len) => match pick(f) {
            Some(file) => within(fs, &file, |a| {
                let data: Vec<u8> =
                    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(offset as u8)).collect();
                fs.write(a.ino, u64::from(offset), &data).map(|_| ())
            }),
            None => Ok(()),
        },
        Op::Truncate(f, size) => match pick(f) {
            Some(file) => within(fs, &file, |a| {
                fs.setattr(a.ino, &SetAttr { size: Some(u64::from(size)), ..SetAttr::default() }).map(|_| ())
            }),
            None => Ok(()),
        },
        Op::Fallocate(f, mode, offset, len) => match pick(f) {
            Some(file) => within(fs, &file, |a| {
                let mode = Fallocate::ALL[mode % Fallocate::ALL.len()];
                fs.fallocate(a.ino, mode, u64::from(offset), u64::from(len))
            }),
            None => Ok(()),
        },
        Op::Copy(f, offset_in, g, offset_out, len) => match (pick(f), pick(g)) {
            (Some(from), Some(to)) => within(fs, &from, |a| {
                within(fs, &to, |b| {
                    let (offset_in, offset_out) = (u64::from(offset_in), u64::from(offset_out));
                    fs.copy_file_range(a.ino, offset_in, b.ino, offset_out, u64::from(len)).map(|_| ())
                })
            }),
            // Only the data operations come here: `apply` sends them.
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Each regular file's data as SEEK_DATA and SEEK_HOLE find it: path ->
/// the (start, end) of each stretch of data, in order.
pub fn layout(fs: &dyn FileSystem) -> BTreeMap<String, Vec<(u64, u64)>> {
    let mut out = BTreeMap::new();
    for (path, (kind, _, _)) in tree(fs) {
        if kind != FileType::File {
            continue;
        }
        let stretches = with(fs, &path, |a| {
            let mut stretches = Vec::new();
            let mut at = 0;
            loop {
                match fs.lseek(a.ino, at, Whence::Data) {
                    Ok(start) => {
                        let end = fs.lseek(a.ino, start, Whence::Hole).unwrap();
                        stretches.push((start, end));
                        at = end;
                    }
                    Err(Errno::NXIO) => return stretches,
                    Err(e) => panic!("{path}: SEEK_DATA from {at}: {e}"),
                }
            }
        });
        out.insert(path, stretches);
    }
    out
}

/// The file (then directory) `i` picks, counting the files first.
fn target(files: &[String], dirs: &[String], i: usize) -> String {
    let all: Vec<&String> = files.iter().chain(dirs).collect();
    all.get(i % all.len().max(1)).map(|p| p.to_string()).unwrap_or_default()
}

/// The extended attributes of every inode of the tree that has some:
/// path ("" the root) -> name -> value.
pub fn xattrs(fs: &dyn FileSystem) -> BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let paths = std::iter::once(String::new()).chain(tree(fs).into_keys());
    for path in paths {
        let named = with(fs, &path, |a| {
            let list = fs.listxattr(a.ino).unwrap();
            let names = list.split(|&b| b == 0).filter(|n| !n.is_empty());
            let value = |n: &[u8]| fs.getxattr(a.ino, std::os::unix::ffi::OsStrExt::from_bytes(n)).unwrap();
            names.map(|n| (n.to_vec(), value(n))).collect::<BTreeMap<_, _>>()
        });
        if !named.is_empty() {
            out.insert(path, named);
        }
    }
    out
}

/// The whole tree of `fs`.
pub fn tree(fs: &dyn FileSystem) -> BTreeMap<String, (FileType, Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    walk(fs, ROOT, "", &mut out);
    out
}
