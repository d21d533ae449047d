//! The tree workloads' work on a mounted file system, for `iolab fs
//! untar`, `rm` and `tree`: where the copies go, which paths are removed,
//! and mdtest's top directory. The timing and the mount are
//! [`super::runner`]'s.

use std::ffi::OsStr;

use fsapi::{Errno, FileSystem, Ino, Owner};
use workloads::tree::{extract, remove_tree, run_mdtest, Extracted, MdtestPhase, MdtestSpec, Removed};

use crate::UsageError;

/// `copies` copies of the archive `tar` extracted under `into` (made with
/// its parents where missing): into `into` itself for one copy, into
/// `copy-1` ... `copy-N` under it for more.
pub fn extract_copies(fs: &dyn FileSystem, into: &str, copies: u32, tar: &[u8]) -> anyhow::Result<Extracted> {
    let top = make_dirs(fs, into)?;
    let result = (|| {
        let mut made = Extracted::default();
        for copy in 1..=copies {
            let dir = if copies == 1 {
                top
            } else {
                let name = format!("copy-{copy}");
                let d = fs
                    .mkdir(top, OsStr::new(&name), Owner::root(0o755))
                    .map_err(|e| anyhow::anyhow!("{into}/{name}: mkdir failed: {e}"))?;
                fs.forget(d.ino, 1);
                d.ino
            };
            add(&mut made, extract(fs, dir, tar)?);
        }
        Ok(made)
    })();
    fs.forget(top, 1);
    result
}

/// A path to remove with everything under it: as given, its parent and
/// its name.
#[derive(Clone, Debug)]
pub struct Removal {
    pub path: String,
    pub parent: String,
    pub name: String,
}

/// The paths `iolab fs rm` was given, split into parent and name; the
/// root is refused.
pub fn removals(paths: &[String]) -> Result<Vec<Removal>, UsageError> {
    paths
        .iter()
        .map(|path| {
            let trimmed = path.trim_matches('/');
            let (parent, name) =
                trimmed.rsplit_once('/').or(Some(("", trimmed))).filter(|(_, n)| !n.is_empty()).ok_or_else(
                    || UsageError(format!("{path}: the root cannot be removed; name what is under it")),
                )?;
            Ok(Removal { path: path.clone(), parent: parent.to_string(), name: name.to_string() })
        })
        .collect()
}

/// Every removal's tree removed, in order.
pub fn remove_all(fs: &dyn FileSystem, removals: &[Removal]) -> anyhow::Result<Removed> {
    let mut removed = Removed::default();
    for r in removals {
        let dir = fsapi::resolve(fs, &r.parent).map_err(|e| anyhow::anyhow!("{}: {e}", r.path))?;
        let one = remove_tree(fs, dir.ino, OsStr::new(&r.name), &r.path);
        fs.forget(dir.ino, 1);
        let one = one?;
        removed.unlinked += one.unlinked;
        removed.dirs += one.dirs;
    }
    Ok(removed)
}

/// mdtest's phases in a new `/mdtest` directory of an iolab file
/// system, removed at the end; `barrier` is called before the first phase
/// and between phases (MPI's ranks begin each together).
pub fn mdtest_in_image(
    fs: &dyn FileSystem,
    spec: &MdtestSpec,
    barrier: &mut dyn FnMut(),
) -> anyhow::Result<Vec<MdtestPhase>> {
    let name = OsStr::new("mdtest");
    let top = fs.mkdir(fsapi::ROOT, name, Owner::root(0o755)).map_err(|e| anyhow::anyhow!("/mdtest: {e}"))?;
    let worked = mdtest(fs, top.ino, spec, barrier);
    fs.forget(top.ino, 1);
    let removed = fs.rmdir(fsapi::ROOT, name).map_err(|e| anyhow::anyhow!("/mdtest: rmdir: {e}"));
    worked.and_then(|phases| removed.map(|()| phases))
}

/// mdtest's phases under `into`, with `barrier` before the first and
/// between phases.
pub fn mdtest(
    fs: &dyn FileSystem,
    into: Ino,
    spec: &MdtestSpec,
    barrier: &mut dyn FnMut(),
) -> anyhow::Result<Vec<MdtestPhase>> {
    barrier();
    Ok(run_mdtest(fs, into, spec, &mut |_| barrier())?)
}

/// The directory at `path`, made with its parents where missing; one
/// lookup reference held (none for the root).
fn make_dirs(fs: &dyn FileSystem, path: &str) -> anyhow::Result<Ino> {
    let mut dir = fsapi::ROOT;
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        let name = OsStr::new(part);
        let next = match fs.lookup(dir, name) {
            Err(Errno::NOENT) => fs.mkdir(dir, name, Owner::root(0o755)),
            found => found,
        }
        .map_err(|e| anyhow::anyhow!("--into {path}: {part}: {e}"))?;
        fs.forget(dir, 1);
        if next.kind != fsapi::FileType::Dir {
            fs.forget(next.ino, 1);
            return Err(UsageError(format!("--into {path}: {part} is not a directory")).into());
        }
        dir = next.ino;
    }
    Ok(dir)
}

fn add(total: &mut Extracted, one: Extracted) {
    total.entries += one.entries;
    total.files += one.files;
    total.dirs += one.dirs;
    total.symlinks += one.symlinks;
    total.hard_links += one.hard_links;
    total.specials += one.specials;
    total.data_bytes += one.data_bytes;
    total.skipped.extend(one.skipped);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_cannot_be_removed() {
        let err = removals(&["/".to_string()]).unwrap_err();
        assert!(err.0.contains("the root cannot be removed"), "{err}");
    }

    #[test]
    fn a_nested_path_splits_into_its_parent_and_name() {
        let r = removals(&["/a/b/c/".to_string()]).unwrap();
        assert_eq!((r[0].parent.as_str(), r[0].name.as_str()), ("a/b", "c"));
    }
}
