//! Extracting a tar archive onto a [`FileSystem`] as GNU tar does as root:
//! parents made as needed, each file created with the archive's owner and
//! mode and its data written a record at a time, symlinks and hard links,
//! FIFOs and device nodes made with their numbers, a name already taken
//! replaced, and the directories' times set last (after their contents,
//! which would change them).
//!
//! Where an in-process caller differs from tar through the kernel: one
//! `setattr` sets a file's times where tar makes up to three calls
//! (fchown, fchmod, utimensat), because the owner and mode go with the
//! create; paths are resolved from a cache of the directories made, as
//! the kernel's dentry cache would.

use rustc_hash::FxHashMap as HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fsapi::{Errno, FileSystem, FileType, Ino, Owner, SetAttr, Time};
use tar::EntryType;

use super::TreeError;

/// GNU tar's record (20 blocks of 512 bytes): the most it writes at once.
pub const RECORD_BYTES: usize = 10240;

/// What an extraction made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// Archive members applied or skipped (not counting pax global headers).
    pub entries: u64,
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub hard_links: u64,
    /// FIFOs and device nodes made (GNU tar archives no socket).
    pub specials: u64,
    /// File data written, bytes.
    pub data_bytes: u64,
    /// Members not extracted, with why (names with `..`, which tar
    /// refuses too; member types tar would not extract either).
    pub skipped: Vec<(String, &'static str)>,
}

/// Extracts `tar` (an uncompressed archive in memory) into directory
/// `into`. Stops at the first call that fails, naming the member.
pub fn extract(fs: &dyn FileSystem, into: Ino, tar: &[u8]) -> Result<Extracted, TreeError> {
    extract_observed(fs, into, tar, &mut || {})
}

/// [`extract`], calling `after_member` after each member is extracted
/// (a crash check takes the tree there).
pub fn extract_observed(
    fs: &dyn FileSystem,
    into: Ino,
    tar: &[u8],
    after_member: &mut dyn FnMut(),
) -> Result<Extracted, TreeError> {
    let mut out = Extracted::default();
    let mut dirs = DirCache::new(into);
    let result = extract_into(fs, &mut dirs, tar, &mut out, after_member);
    // Directory times last, deepest first, whether or not all went well.
    let timed = dirs.set_times(fs);
    dirs.release(fs);
    result.and(timed).map(|()| out)
}

fn extract_into(
    fs: &dyn FileSystem,
    dirs: &mut DirCache,
    tar: &[u8],
    out: &mut Extracted,
    after_member: &mut dyn FnMut(),
) -> Result<(), TreeError> {
    let bad = |reason: String| TreeError::Archive { path: "the archive".into(), reason };
    let mut archive = tar::Archive::new(std::io::Cursor::new(tar));
    for entry in archive.entries().map_err(|e| bad(format!("cannot read its entries: {e}")))? {
        let entry = entry.map_err(|e| bad(format!("damaged entry after member {}: {e}", out.entries)))?;
        let header = entry.header();
        let kind = header.entry_type();
        if matches!(kind, EntryType::XGlobalHeader) {
            continue;
        }
        out.entries += 1;
        let raw_path = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw_path).into_owned();
        let Some(parts) = components(&raw_path) else {
            out.skipped.push((shown, "member name contains '..'"));
            continue;
        };
        let Some((name, parent_parts)) = parts.split_last() else { continue }; // "./" itself
        let owner = Owner {
            perm: (header.mode().unwrap_or(0o644) & 0o7777) as u16,
            uid: header.uid().unwrap_or(0) as u32,
            gid: header.gid().unwrap_or(0) as u32,
        };
        let mtime = Time { secs: header.mtime().unwrap_or(0) as i64, nanos: 0 };
        let name = OsStr::from_bytes(name);
        let parent = dirs.parent(fs, parent_parts, &shown)?;
        match kind {
            EntryType::Regular | EntryType::Continuous => {
                let start = entry.raw_file_position() as usize;
                let data = tar.get(start..start + entry.size() as usize).ok_or_else(|| {
                    bad(format!("{shown}: its data runs past the end of the archive (truncated?)"))
                })?;
                write_file(fs, parent, name, owner, mtime, data, &shown)?;
                out.files += 1;
                out.data_bytes += data.len() as u64;
            }
            EntryType::Directory => {
                dirs.make(fs, parent, &parts, owner, mtime, &shown)?;
                out.dirs += 1;
            }
            EntryType::Symlink => {
                let target = entry.link_name_bytes().map(|t| t.into_owned()).unwrap_or_default();
                make_symlink(fs, (parent, name), &target, owner, mtime, &shown)?;
                out.symlinks += 1;
            }
            EntryType::Link => {
                let target = entry.link_name_bytes().map(|t| t.into_owned()).unwrap_or_default();
                make_hard_link(fs, dirs, (parent, name), &target, &shown)?;
                out.hard_links += 1;
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                make_special(fs, parent, name, &entry, owner, mtime, &shown)?;
                out.specials += 1;
            }
            EntryType::GNUSparse => {
                return Err(bad(format!("{shown}: a GNU sparse member, which iolab does not extract")));
            }
            _ => out.skipped.push((shown, "a member type tar would not extract either")),
        }
        after_member();
    }
    Ok(())
}

/// A symlink member made (replacing what is there, as GNU tar does),
/// with the member's times.
fn make_symlink(
    fs: &dyn FileSystem,
    (parent, name): (Ino, &OsStr),
    target: &[u8],
    owner: Owner,
    mtime: Time,
    shown: &str,
) -> Result<(), TreeError> {
    let made = replacing(fs, parent, name, shown, "symlink", || {
        fs.symlink(parent, name, OsStr::from_bytes(target), owner)
    })?;
    let times = SetAttr { atime: Some(mtime), mtime: Some(mtime), ..SetAttr::default() };
    let set = fs.setattr(made.ino, &times);
    fs.forget(made.ino, 1);
    set.map(|_| ()).map_err(|e| TreeError::call(shown, "setattr", e))
}

/// A hard-link member: a new name for the file an earlier member made.
fn make_hard_link(
    fs: &dyn FileSystem,
    dirs: &mut DirCache,
    (parent, name): (Ino, &OsStr),
    target: &[u8],
    shown: &str,
) -> Result<(), TreeError> {
    let existing = dirs.find(fs, target).map_err(|e| {
        TreeError::call(format!("{shown} (a hard link to {})", String::from_utf8_lossy(target)), "lookup", e)
    })?;
    let made = replacing(fs, parent, name, shown, "link", || fs.link(existing.ino, parent, name));
    fs.forget(existing.ino, 1);
    fs.forget(made?.ino, 1);
    Ok(())
}

/// A FIFO or device member made as GNU tar does as root (mknod with the
/// member's mode, owner and device number, then its times).
fn make_special(
    fs: &dyn FileSystem,
    parent: Ino,
    name: &OsStr,
    entry: &tar::Entry<'_, std::io::Cursor<&[u8]>>,
    owner: Owner,
    mtime: Time,
    shown: &str,
) -> Result<(), TreeError> {
    let header = entry.header();
    let bad = |what: &str, e: std::io::Error| TreeError::Archive {
        path: shown.to_string(),
        reason: format!("its device {what} number cannot be read: {e}"),
    };
    let (kind, rdev) = match header.entry_type() {
        EntryType::Char | EntryType::Block => {
            let major = header.device_major().map_err(|e| bad("major", e))?.unwrap_or(0);
            let minor = header.device_minor().map_err(|e| bad("minor", e))?.unwrap_or(0);
            let kind = if header.entry_type() == EntryType::Char {
                FileType::CharDevice
            } else {
                FileType::BlockDevice
            };
            (kind, fsapi::makedev(major, minor))
        }
        _ => (FileType::Fifo, 0),
    };
    let made = replacing(fs, parent, name, shown, "mknod", || fs.mknod(parent, name, kind, rdev, owner))?;
    let times = SetAttr { atime: Some(mtime), mtime: Some(mtime), ..SetAttr::default() };
    let set = fs.setattr(made.ino, &times);
    fs.forget(made.ino, 1);
    set.map_err(|e| TreeError::call(shown, "setattr", e))?;
    Ok(())
}

/// A member's path as components: a leading `/` and `.` parts dropped, as
/// GNU tar does; `None` if a part is `..`.
fn components(path: &[u8]) -> Option<Vec<&[u8]>> {
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').filter(|p| !p.is_empty() && *p != b".").collect();
    (!parts.iter().any(|p| *p == b"..")).then_some(parts)
}

fn write_file(
    fs: &dyn FileSystem,
    parent: Ino,
    name: &OsStr,
    owner: Owner,
    mtime: Time,
    data: &[u8],
    shown: &str,
) -> Result<(), TreeError> {
    let file = replacing(fs, parent, name, shown, "create", || fs.create(parent, name, owner))?;
    let written = (|| {
        let mut offset = 0;
        for record in data.chunks(RECORD_BYTES) {
            let mut rest = record;
            while !rest.is_empty() {
                // A short write is followed by the error that cut it short.
                let n = fs.write(file.ino, offset, rest).map_err(|e| TreeError::call(shown, "write", e))?;
                if n == 0 {
                    return Err(TreeError::call(shown, "write", Errno::IO));
                }
                rest = &rest[n..];
                offset += n as u64;
            }
        }
        let times = SetAttr { atime: Some(mtime), mtime: Some(mtime), ..SetAttr::default() };
        fs.setattr(file.ino, &times).map_err(|e| TreeError::call(shown, "setattr", e))?;
        Ok(())
    })();
    fs.forget(file.ino, 1);
    written
}

/// Makes an entry with `make` (the call `call`); where the name is taken
/// by anything but a directory, removes that and makes it again (tar's
/// default, replacing what an earlier member or extraction left).
fn replacing(
    fs: &dyn FileSystem,
    parent: Ino,
    name: &OsStr,
    shown: &str,
    call: &'static str,
    make: impl Fn() -> fsapi::Result<fsapi::Attr>,
) -> Result<fsapi::Attr, TreeError> {
    match make() {
        Err(Errno::EXIST) => {
            fs.unlink(parent, name).map_err(|e| TreeError::call(shown, "unlink (to replace it)", e))?;
            make().map_err(|e| TreeError::call(shown, call, e))
        }
        other => other.map_err(|e| TreeError::call(shown, call, e)),
    }
}

/// The directories extraction made or went through, by path under the
/// extraction's root, each holding one lookup reference until released;
/// and the times to set on the ones the archive named.
struct DirCache {
    root: Ino,
    by_path: HashMap<Vec<u8>, Ino>,
    times: Vec<(Ino, Time, String)>,
}

impl DirCache {
    fn new(root: Ino) -> DirCache {
        DirCache { root, by_path: HashMap::default(), times: Vec::new() }
    }

    /// The directory holding a member, made (mode 0755, as tar does for
    /// parents missing from the archive) where missing.
    fn parent(&mut self, fs: &dyn FileSystem, parts: &[&[u8]], shown: &str) -> Result<Ino, TreeError> {
        let mut dir = self.root;
        for depth in 0..parts.len() {
            let key = parts[..=depth].join(&b'/');
            if let Some(&ino) = self.by_path.get(&key) {
                dir = ino;
                continue;
            }
            let name = OsStr::from_bytes(parts[depth]);
            let attr = match fs.lookup(dir, name) {
                Err(Errno::NOENT) => fs.mkdir(dir, name, Owner::root(0o755)),
                found => found,
            }
            .map_err(|e| TreeError::call(shown, "mkdir (a parent)", e))?;
            if attr.kind != FileType::Dir {
                fs.forget(attr.ino, 1);
                return Err(TreeError::call(shown, "mkdir (a parent)", Errno::NOTDIR));
            }
            self.by_path.insert(key, attr.ino);
            dir = attr.ino;
        }
        Ok(dir)
    }

    /// A directory member: made, or an existing directory given the
    /// member's owner and mode; its times are set at the end.
    fn make(
        &mut self,
        fs: &dyn FileSystem,
        parent: Ino,
        parts: &[&[u8]],
        owner: Owner,
        mtime: Time,
        shown: &str,
    ) -> Result<(), TreeError> {
        let name = OsStr::from_bytes(parts[parts.len() - 1]);
        let key = parts.join(&b'/');
        let ino = match self.by_path.get(&key) {
            Some(&ino) => ino,
            None => {
                let attr = match fs.mkdir(parent, name, owner) {
                    Err(Errno::EXIST) => fs.lookup(parent, name),
                    made => made,
                }
                .map_err(|e| TreeError::call(shown, "mkdir", e))?;
                self.by_path.insert(key, attr.ino);
                if attr.kind != FileType::Dir {
                    return Err(TreeError::call(shown, "mkdir", Errno::EXIST));
                }
                attr.ino
            }
        };
        let set = SetAttr {
            perm: Some(owner.perm),
            uid: Some(owner.uid),
            gid: Some(owner.gid),
            ..SetAttr::default()
        };
        fs.setattr(ino, &set).map_err(|e| TreeError::call(shown, "setattr", e))?;
        self.times.push((ino, mtime, shown.to_string()));
        Ok(())
    }

    /// The entry a hard link names, with a lookup reference.
    fn find(&mut self, fs: &dyn FileSystem, path: &[u8]) -> fsapi::Result<fsapi::Attr> {
        let parts = components(path).ok_or(Errno::INVAL)?;
        let (name, parents) = parts.split_last().ok_or(Errno::INVAL)?;
        let mut dir = self.root;
        for depth in 0..parents.len() {
            dir = match self.by_path.get(&parents[..=depth].join(&b'/')) {
                Some(&ino) => ino,
                None => return resolve_uncached(fs, self.root, &parts),
            };
        }
        fs.lookup(dir, OsStr::from_bytes(name))
    }

    fn set_times(&self, fs: &dyn FileSystem) -> Result<(), TreeError> {
        for (ino, mtime, shown) in self.times.iter().rev() {
            let times = SetAttr { atime: Some(*mtime), mtime: Some(*mtime), ..SetAttr::default() };
            fs.setattr(*ino, &times).map_err(|e| TreeError::call(shown, "setattr (times)", e))?;
        }
        Ok(())
    }

    fn release(self, fs: &dyn FileSystem) {
        for ino in self.by_path.into_values() {
            fs.forget(ino, 1);
        }
    }
}

/// Looks a path up component by component, keeping one reference to
/// the last.
fn resolve_uncached(fs: &dyn FileSystem, root: Ino, parts: &[&[u8]]) -> fsapi::Result<fsapi::Attr> {
    let mut attr = fs.getattr(root)?;
    let mut counted = false;
    for part in parts {
        let next = fs.lookup(attr.ino, OsStr::from_bytes(part));
        if counted {
            fs.forget(attr.ino, 1);
        }
        attr = next?;
        counted = true;
    }
    Ok(attr)
}
