//! The fs-* stacks' mix on any file system (a kernel one through
//! [`fsapi::HostFs`]), with directory fsyncs among it: what `iolab crash
//! --kernel` runs and checks. Besides the durable files the mix rewrites
//! and fsyncs, every [`DIR_FSYNC_EVERY`] operations a new entry is made in
//! a directory of its own (`/keepdir`, which the mix never touches) and
//! that directory fsync'd: an entry whose directory's fsync returned
//! before the crash must be there after it. Or, instead of the mix, a tar
//! archive extracted and the file system synced (`syncfs`): once the sync
//! returned, every path the archive made must be there, of its kind, with
//! its bytes (a file's data, a symlink's target).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use device::Recording;
use fsapi::{FileSystem, Owner, ROOT};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::crash::CrashError;
use crate::fscrash::{durable_lost, durable_names, run_mix, Durable};

/// The directory whose entries are made durable by its fsync.
const SYNCED_DIR: &str = "keepdir";

/// Operations of the mix between two directory fsyncs.
pub const DIR_FSYNC_EVERY: u64 = 12;

/// What the fsyncs of a mix made durable: each durable file's versions,
/// with the history's length before each write began and after its fsync
/// returned, and each entry of [`SYNCED_DIR`] with the history's length
/// after its directory's fsync returned.
pub struct Fsynced {
    files: Vec<Durable>,
    entries: Vec<(String, usize)>,
    /// An extracted archive's tree, and the history's length once the
    /// sync after it returned.
    synced: Option<(Tree, usize)>,
}

/// A tree as the oracle keeps it: path -> kind and bytes (a file's data,
/// a symlink's target, nothing for the rest).
type Tree = std::collections::BTreeMap<String, (fsapi::FileType, Vec<u8>)>;

impl Fsynced {
    /// How many fsyncs the mix made (of files and of the directory).
    pub fn fsyncs(&self) -> u64 {
        let files = self.files.iter().map(|d| d.versions.len() as u64).sum::<u64>();
        files + self.entries.len() as u64 + u64::from(self.synced.is_some())
    }

    /// The first durable file or entry a crash after `after_events` of the
    /// history lost, on `fs` (the crash state mounted), said as a sentence.
    pub fn lost(&self, fs: &dyn FileSystem, after_events: usize) -> Option<String> {
        if let Some(lost) = durable_lost(fs, &self.files, after_events) {
            return Some(lost);
        }
        if let Some((tree, at)) = self.synced.as_ref().filter(|(_, at)| *at <= after_events) {
            let found = tree_of(fs);
            let differs = tree.iter().find(|(path, want)| found.get(*path) != Some(want));
            if let Some((path, (kind, bytes))) = differs {
                let now = match found.get(path) {
                    None => "is gone".to_string(),
                    Some((k, b)) => format!("is a {k:?} of {} bytes", b.len()),
                };
                return Some(format!(
                    "{path} (a {kind:?} of {} bytes when the sync after the extraction returned, at event {at}) {now}",
                    bytes.len()
                ));
            }
        }
        let kept: Vec<&str> =
            self.entries.iter().filter(|(_, at)| *at <= after_events).map(|(n, _)| n.as_str()).collect();
        let last = kept.last()?;
        let dir = match fs.lookup(ROOT, OsStr::new(SYNCED_DIR)) {
            Ok(dir) => dir,
            Err(e) => return Some(format!("/{SYNCED_DIR}, fsync'd with its entries, is gone: {e}")),
        };
        let missing = kept.iter().find(|name| fs.lookup(dir.ino, OsStr::new(name)).is_err());
        fs.forget(dir.ino, 1);
        missing.map(|name| {
            format!("/{SYNCED_DIR}/{name} is gone, although its directory's fsync returned (the last kept: {last})")
        })
    }
}

/// The fs-* stacks' mix (one writer, `operations` numbered from 0, a
/// durable file in the root rewritten and fsync'd every `fsync_every`)
/// on `fs`, whose device `recording` records, with an entry made in
/// [`SYNCED_DIR`] and the directory fsync'd every [`DIR_FSYNC_EVERY`]
/// operations. Errors of the mix's own calls are part of the mix; an
/// error rewriting a durable file or making the directory's entries ends
/// it.
pub fn run_mix_on(
    fs: &dyn FileSystem,
    recording: &Recording,
    operations: u64,
    fsync_every: u64,
    seed: u64,
) -> Result<Fsynced, CrashError> {
    if operations == 0 || fsync_every == 0 {
        return Err(CrashError::Spec("--transactions and --sync-every must be at least 1".into()));
    }
    let failed = |what: &str, e: fsapi::Errno| CrashError::Build(format!("{what}: {e}"));
    let dir = fs.mkdir(ROOT, OsStr::new(SYNCED_DIR), Owner::root(0o755)).map_err(|e| failed("mkdir", e))?;
    fs.fsync(ROOT, false).map_err(|e| failed("fsync of the root", e))?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Fsynced {
        files: durable_names(1, 0).into_iter().map(|name| Durable { name, versions: Vec::new() }).collect(),
        entries: Vec::new(),
        synced: None,
    };
    let mut start = 0;
    while start < operations {
        let end = (start + DIR_FSYNC_EVERY).min(operations);
        let names = durable_names(1, 0);
        let part =
            run_mix(fsync_every, fs, recording, names, start..end, &mut rng, &mut |_: &dyn FileSystem| {})?;
        for (file, more) in out.files.iter_mut().zip(part) {
            file.versions.extend(more.versions);
        }
        let name = format!("e{}", out.entries.len());
        let made =
            fs.create(dir.ino, OsStr::new(&name), Owner::root(0o644)).map_err(|e| failed("create", e))?;
        fs.forget(made.ino, 1);
        fs.fsync(dir.ino, false).map_err(|e| failed("fsync of the directory", e))?;
        out.entries.push((name, recording.len()));
        start = end;
    }
    fs.forget(dir.ino, 1);
    Ok(out)
}

/// `tar` (uncompressed, in memory) extracted into `fs`'s root as GNU tar
/// does, then the file system synced; the tree the archive made is kept
/// with the history's length once the sync returned.
pub fn run_archive_on(fs: &dyn FileSystem, recording: &Recording, tar: &[u8]) -> Result<Fsynced, CrashError> {
    let before = tree_of(fs);
    crate::tree::extract(fs, ROOT, tar)
        .map_err(|e| CrashError::Build(format!("extracting the archive: {e}")))?;
    fs.sync().map_err(|e| CrashError::Build(format!("sync after the extraction: {e}")))?;
    let at = recording.len();
    // What the archive made: what was there before (lost+found) is not
    // its to keep.
    let tree = tree_of(fs).into_iter().filter(|(path, _)| !before.contains_key(path)).collect();
    Ok(Fsynced { files: Vec::new(), entries: Vec::new(), synced: Some((tree, at)) })
}

/// Every path under the root of `fs`, with its kind and bytes.
fn tree_of(fs: &dyn FileSystem) -> Tree {
    let mut out = Tree::new();
    let mut dirs = vec![(ROOT, String::new(), false)];
    while let Some((dir, path, looked_up)) = dirs.pop() {
        let mut entries = Vec::new();
        let _ = fs.readdir(dir, 0, &mut |e| {
            entries.push(e.name);
            true
        });
        if looked_up {
            fs.forget(dir, 1);
        }
        for name in entries {
            let child = format!("{path}/{}", String::from_utf8_lossy(&name));
            let Ok(attr) = fs.lookup(dir, OsStr::from_bytes(&name)) else { continue };
            let bytes = match attr.kind {
                fsapi::FileType::File => {
                    let mut buf = vec![0u8; attr.size as usize];
                    fs.read(attr.ino, 0, &mut buf).map(|n| buf.truncate(n)).map_or(Vec::new(), |()| buf)
                }
                fsapi::FileType::Symlink => fs.readlink(attr.ino).unwrap_or_default(),
                _ => Vec::new(),
            };
            out.insert(child.clone(), (attr.kind, bytes));
            if attr.kind == fsapi::FileType::Dir {
                dirs.push((attr.ino, child, true));
            } else {
                fs.forget(attr.ino, 1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsapi::ModelFs;

    /// The mix on the reference model (nothing recorded: every fsync counts
    /// as returned before any crash).
    fn mixed() -> (ModelFs, Fsynced) {
        let fs = ModelFs::new();
        let fsynced = run_mix_on(&fs, &Recording::new(), 60, 4, 1).unwrap();
        (fs, fsynced)
    }

    #[test]
    fn every_twelve_operations_an_entry_is_made_and_its_directory_fsynced() {
        let (fs, fsynced) = mixed();
        assert_eq!(fsynced.entries.len(), 5);
        assert_eq!(fsynced.fsyncs(), 15 + 5);
        assert_eq!(fsynced.lost(&fs, 0), None, "the model keeps all");
    }

    #[test]
    fn an_entry_gone_after_its_directorys_fsync_is_caught() {
        let (fs, fsynced) = mixed();
        let dir = fs.lookup(ROOT, OsStr::new(SYNCED_DIR)).unwrap();
        fs.unlink(dir.ino, OsStr::new("e2")).unwrap();
        let lost = fsynced.lost(&fs, 0).unwrap();
        assert!(lost.contains("/keepdir/e2 is gone"), "{lost}");
    }

    /// A small archive: a directory, a file in it, a symlink to it.
    fn archive() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        h.set_mode(0o755);
        b.append_data(&mut h, "d/", std::io::empty()).unwrap();
        let data = vec![7u8; 5000];
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, "d/f", data.as_slice()).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "l", "d/f").unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn an_archive_synced_is_kept_whole_and_a_file_cut_short_is_caught() {
        let fs = ModelFs::new();
        let fsynced = run_archive_on(&fs, &Recording::new(), &archive()).unwrap();
        assert_eq!(fsynced.fsyncs(), 1);
        assert_eq!(fsynced.lost(&fs, 0), None);
        let d = fs.lookup(ROOT, OsStr::new("d")).unwrap();
        let f = fs.lookup(d.ino, OsStr::new("f")).unwrap();
        fs.setattr(f.ino, &fsapi::SetAttr { size: Some(100), ..Default::default() }).unwrap();
        let lost = fsynced.lost(&fs, 0).unwrap();
        assert!(lost.starts_with("/d/f (a File of 5000 bytes"), "{lost}");
    }

    #[test]
    fn the_mix_leaves_the_synced_directory_alone() {
        let (fs, _) = mixed();
        let dir = fs.lookup(ROOT, OsStr::new(SYNCED_DIR)).unwrap();
        let mut names = Vec::new();
        fs.readdir(dir.ino, 0, &mut |e| {
            names.push(String::from_utf8_lossy(&e.name).into_owned());
            true
        })
        .unwrap();
        assert_eq!(names, ["e0", "e1", "e2", "e3", "e4"]);
    }
}
