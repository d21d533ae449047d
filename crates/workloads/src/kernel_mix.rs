//! The fs-* stacks' mix on any file system (a kernel one through
//! [`fsapi::HostFs`]), with directory fsyncs among it: what `iolab crash
//! --kernel` runs and checks. Besides the durable files the mix rewrites
//! and fsyncs, every [`DIR_FSYNC_EVERY`] operations a new entry is made in
//! a directory of its own (`/keepdir`, which the mix never touches) and
//! that directory fsync'd: an entry whose directory's fsync returned
//! before the crash must be there after it.

use std::ffi::OsStr;

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
}

impl Fsynced {
    /// How many fsyncs the mix made (of files and of the directory).
    pub fn fsyncs(&self) -> u64 {
        self.files.iter().map(|d| d.versions.len() as u64).sum::<u64>() + self.entries.len() as u64
    }

    /// The first durable file or entry a crash after `after_events` of the
    /// history lost, on `fs` (the crash state mounted), said as a sentence.
    pub fn lost(&self, fs: &dyn FileSystem, after_events: usize) -> Option<String> {
        if let Some(lost) = durable_lost(fs, &self.files, after_events) {
            return Some(lost);
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
