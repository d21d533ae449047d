//! Removing a tree as `rm -rf` does: read a directory whole, unlink its
//! files and symlinks, descend into its directories, then remove it.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fsapi::{FileSystem, FileType, Ino};

use super::TreeError;

/// What a removal took away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Files and symlinks unlinked.
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
pub fn remove_tree_observed(
    fs: &dyn FileSystem,
    parent: Ino,
    name: &OsStr,
    shown: &str,
    after_entry: &mut dyn FnMut(),
) -> Result<Removed, TreeError> {
    let mut removed = Removed::default();
    let attr = fs.lookup(parent, name).map_err(|e| TreeError::call(shown, "lookup", e))?;
    let emptied = match attr.kind {
        FileType::Dir => empty_dir(fs, attr.ino, shown, &mut removed, after_entry),
        FileType::File | FileType::Symlink => Ok(()),
    };
    fs.forget(attr.ino, 1);
    emptied?;
    if attr.kind == FileType::Dir {
        fs.rmdir(parent, name).map_err(|e| TreeError::call(shown, "rmdir", e))?;
        removed.dirs += 1;
    } else {
        fs.unlink(parent, name).map_err(|e| TreeError::call(shown, "unlink", e))?;
        removed.unlinked += 1;
    }
    after_entry();
    Ok(removed)
}

fn empty_dir(
    fs: &dyn FileSystem,
    dir: Ino,
    shown: &str,
    removed: &mut Removed,
    after_entry: &mut dyn FnMut(),
) -> Result<(), TreeError> {
    let mut entries = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        entries.push((e.name, e.kind));
        true
    })
    .map_err(|e| TreeError::call(shown, "readdir", e))?;
    // An entry's path is for messages: made for a directory, whose
    // entries name it, and for a file only when it fails.
    let path_of = |name: &[u8]| format!("{shown}/{}", String::from_utf8_lossy(name));
    for (name, kind) in entries {
        if kind == FileType::Dir {
            let path = path_of(&name);
            let inner = remove_tree_observed(fs, dir, OsStr::from_bytes(&name), &path, after_entry)?;
            removed.unlinked += inner.unlinked;
            removed.dirs += inner.dirs;
        } else {
            fs.unlink(dir, OsStr::from_bytes(&name))
                .map_err(|e| TreeError::call(path_of(&name), "unlink", e))?;
            removed.unlinked += 1;
            after_entry();
        }
    }
    Ok(())
}
