//! Removing a tree as `rm -rf` does: read a directory whole, unlink what
//! is not a directory (files, symlinks, FIFOs, devices, sockets), descend
//! into its directories, then remove it.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fsapi::{FileSystem, FileType, Ino};

use super::TreeError;

/// What a removal took away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Names of anything but a directory unlinked (files, symlinks,
    /// FIFOs, devices, sockets).
    pub unlinked: u64,
    pub dirs: u64,
}

/// Removes `name` in directory `parent` and everything under it; `shown`
/// is its path for messages.
pub fn remove_tree(
    fs: &dyn FileSystem,
    parent: Ino,
    name: &OsStr,
    shown: &str,
) -> Result<Removed, TreeError> {
    remove_tree_observed(fs, parent, name, shown, &mut || {})
}

/// As [`remove_tree`], calling `after_entry` after each entry removed.
/// The walk keeps its own stack of directories being emptied, one entry
/// list a level, so a tree of any depth is removed without recursion.
pub fn remove_tree_observed(
    fs: &dyn FileSystem,
    parent: Ino,
    name: &OsStr,
    shown: &str,
    after_entry: &mut dyn FnMut(),
) -> Result<Removed, TreeError> {
    let mut removed = Removed::default();
    let attr = fs.lookup(parent, name).map_err(|e| TreeError::call(shown, "lookup", e))?;
    if attr.kind != FileType::Dir {
        fs.forget(attr.ino, 1);
        fs.unlink(parent, name).map_err(|e| TreeError::call(shown, "unlink", e))?;
        removed.unlinked += 1;
        after_entry();
        return Ok(removed);
    }
    let mut stack = Vec::new();
    let top = Level::open(fs, parent, name.as_bytes().to_vec(), attr.ino, shown.to_string());
    let walked = top.and_then(|top| {
        stack.push(top);
        walk(fs, &mut stack, &mut removed, after_entry)
    });
    // A failure leaves directories open on the stack: give back their
    // references (the top one's too) before saying so.
    for level in stack.drain(..) {
        fs.forget(level.ino, 1);
    }
    walked.map(|()| removed)
}

/// A directory being emptied: where it is named, its entries as read, and
/// how far through them the walk is.
struct Level {
    parent: Ino,
    name: Vec<u8>,
    ino: Ino,
    path: String,
    entries: Vec<(Vec<u8>, FileType)>,
    next: usize,
}

impl Level {
    /// Reads directory `ino` whole (`rm -rf` does too, so removals do not
    /// disturb the listing); holds the lookup reference the caller took.
    fn open(
        fs: &dyn FileSystem,
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
        path: String,
    ) -> Result<Level, TreeError> {
        let mut entries = Vec::new();
        let listed = fs.readdir(ino, 0, &mut |e| {
            entries.push((e.name, e.kind));
            true
        });
        if let Err(e) = listed {
            fs.forget(ino, 1);
            return Err(TreeError::call(&path, "readdir", e));
        }
        Ok(Level { parent, name, ino, path, entries, next: 0 })
    }
}

/// Empties and removes the directories on `stack`, deepest first.
fn walk(
    fs: &dyn FileSystem,
    stack: &mut Vec<Level>,
    removed: &mut Removed,
    after_entry: &mut dyn FnMut(),
) -> Result<(), TreeError> {
    while let Some(level) = stack.last_mut() {
        let Some((name, kind)) = level.entries.get(level.next).cloned() else {
            // Empty now: remove it from its parent.
            let done = stack.pop().expect("the level just looked at");
            fs.forget(done.ino, 1);
            fs.rmdir(done.parent, OsStr::from_bytes(&done.name))
                .map_err(|e| TreeError::call(&done.path, "rmdir", e))?;
            removed.dirs += 1;
            after_entry();
            continue;
        };
        level.next += 1;
        let (dir, os_name) = (level.ino, OsStr::from_bytes(&name));
        // An entry's path is for messages: made for a directory, whose
        // entries name it, and for a file only when it fails.
        let path_of = |level: &Level| format!("{}/{}", level.path, String::from_utf8_lossy(&name));
        if kind != FileType::Dir {
            fs.unlink(dir, os_name).map_err(|e| TreeError::call(path_of(level), "unlink", e))?;
            removed.unlinked += 1;
            after_entry();
            continue;
        }
        let path = path_of(level);
        let attr = fs.lookup(dir, os_name).map_err(|e| TreeError::call(&path, "lookup", e))?;
        if attr.kind != FileType::Dir {
            // Replaced since the listing: removed as what it is now.
            fs.forget(attr.ino, 1);
            fs.unlink(dir, os_name).map_err(|e| TreeError::call(&path, "unlink", e))?;
            removed.unlinked += 1;
            after_entry();
            continue;
        }
        stack.push(Level::open(fs, dir, name, attr.ino, path)?);
    }
    Ok(())
}
