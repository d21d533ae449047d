//! The model against a real kernel file system: the same random sequence
//! of operations on `ModelFs` and on `HostFs` over a temporary directory
//! must give the same results (the same errno where they fail) and leave
//! the same tree. It checks the model against Linux's own semantics, and
//! the host backend against the model.

use std::collections::BTreeMap;
use std::ffi::OsStr;

use fsapi::{resolve, Attr, FileSystem, FileType, HostFs, ModelFs, Owner, SetAttr, ROOT};
use proptest::prelude::*;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Clone, Debug)]
enum Op {
    Create(usize, usize),
    Mkdir(usize, usize),
    Symlink(usize, usize),
    Link(usize, usize, usize),
    Unlink(usize, usize),
    Rmdir(usize, usize),
    Rename(usize, usize, usize, usize),
    Write(usize, u16, u16),
    Truncate(usize, u16),
}

fn op() -> impl Strategy<Value = Op> {
    let n = 0..NAMES.len();
    let d = 0..8usize;
    prop_oneof![
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Create(d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Mkdir(d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Symlink(d, n)),
        (d.clone(), d.clone(), n.clone()).prop_map(|(f, d, n)| Op::Link(f, d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Unlink(d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Rmdir(d, n)),
        (d.clone(), n.clone(), d.clone(), n.clone()).prop_map(|(a, m, b, n)| Op::Rename(a, m, b, n)),
        (d.clone(), any::<u16>(), any::<u16>()).prop_map(|(f, o, l)| Op::Write(f, o % 9000, l % 5000)),
        (d, any::<u16>()).prop_map(|(f, s)| Op::Truncate(f, s % 9000)),
    ]
}

/// The paths of the tree's directories and files, from a walk of `fs`.
fn walk(
    fs: &dyn FileSystem,
    dir: fsapi::Ino,
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
        };
        out.insert(child_path.clone(), (attr.kind, content, attr.nlink));
        if attr.kind == FileType::Dir {
            walk(fs, attr.ino, &child_path, out);
        }
        fs.forget(attr.ino, 1);
    }
}

fn dirs(fs: &dyn FileSystem) -> Vec<String> {
    let mut tree = BTreeMap::new();
    walk(fs, ROOT, "", &mut tree);
    let mut dirs = vec![String::new()];
    dirs.extend(tree.into_iter().filter(|(_, (k, _, _))| *k == FileType::Dir).map(|(p, _)| p));
    dirs
}

fn files(fs: &dyn FileSystem) -> Vec<String> {
    let mut tree = BTreeMap::new();
    walk(fs, ROOT, "", &mut tree);
    tree.into_iter().filter(|(_, (k, _, _))| *k == FileType::File).map(|(p, _)| p).collect()
}

fn with<T>(fs: &dyn FileSystem, path: &str, f: impl FnOnce(&Attr) -> T) -> T {
    let attr = resolve(fs, path).unwrap();
    let out = f(&attr);
    fs.forget(attr.ino, 1);
    out
}

/// Runs `op` on `fs`, whose tree lists `dirs` and `files` (the same on
/// both file systems, as the test checks): the errno or nothing.
fn apply(fs: &dyn FileSystem, op: &Op, dirs: &[String], files: &[String]) -> Result<(), fsapi::Errno> {
    let pick = |list: &[String], i: usize| list.get(i % list.len().max(1)).cloned();
    let dir = |i: usize| pick(dirs, i).unwrap_or_default();
    let owner = Owner::root(0o644);
    let keep = |r: fsapi::Result<Attr>| r.map(|a| fs.forget(a.ino, 1));
    match *op {
        Op::Create(d, n) => with(fs, &dir(d), |p| keep(fs.create(p.ino, OsStr::new(NAMES[n]), owner))),
        Op::Mkdir(d, n) => with(fs, &dir(d), |p| keep(fs.mkdir(p.ino, OsStr::new(NAMES[n]), owner))),
        Op::Symlink(d, n) => {
            with(fs, &dir(d), |p| keep(fs.symlink(p.ino, OsStr::new(NAMES[n]), OsStr::new("../t"), owner)))
        }
        Op::Link(f, d, n) => match pick(files, f) {
            Some(file) => {
                with(fs, &file, |a| with(fs, &dir(d), |p| keep(fs.link(a.ino, p.ino, OsStr::new(NAMES[n])))))
            }
            None => Ok(()),
        },
        Op::Unlink(d, n) => with(fs, &dir(d), |p| fs.unlink(p.ino, OsStr::new(NAMES[n]))),
        Op::Rmdir(d, n) => with(fs, &dir(d), |p| fs.rmdir(p.ino, OsStr::new(NAMES[n]))),
        Op::Rename(a, m, b, n) => with(fs, &dir(a), |pa| {
            with(fs, &dir(b), |pb| fs.rename(pa.ino, OsStr::new(NAMES[m]), pb.ino, OsStr::new(NAMES[n])))
        }),
        Op::Write(f, offset, len) => match pick(files, f) {
            Some(file) => with(fs, &file, |a| {
                let data: Vec<u8> =
                    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(offset as u8)).collect();
                fs.write(a.ino, u64::from(offset), &data).map(|_| ())
            }),
            None => Ok(()),
        },
        Op::Truncate(f, size) => match pick(files, f) {
            Some(file) => with(fs, &file, |a| {
                fs.setattr(a.ino, &SetAttr { size: Some(u64::from(size)), ..SetAttr::default() }).map(|_| ())
            }),
            None => Ok(()),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_model_and_a_kernel_file_system_agree(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let host = HostFs::new(dir.path()).unwrap();
        let model = ModelFs::new();
        for op in &ops {
            let (d, f) = (dirs(&model), files(&model));
            let on_model = apply(&model, op, &d, &f);
            let on_host = apply(&host, op, &d, &f);
            prop_assert_eq!(on_model, on_host, "{:?}", op);
        }
        let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
        walk(&model, ROOT, "", &mut a);
        walk(&host, ROOT, "", &mut b);
        prop_assert_eq!(a, b);
    }
}
