//! mdtest's metadata phases over a [`FileSystem`]: a tree of directories
//! (`depth` levels below its top, `fanout` subdirectories each), then in
//! every directory of the tree `items` directories made, looked up and
//! removed, and `items` files created (with `write_bytes` written), looked
//! up, read (`read_bytes`) and removed; the tree removed last. Each phase
//! is timed whole (its rate) and call by call (its latency histogram, in
//! nanoseconds), as mdtest reports them (one process: rank 0's names).

use std::ffi::OsStr;
use std::time::Instant;

use fsapi::{FileSystem, Ino, Owner};
use hdrhistogram::Histogram;

use super::TreeError;
use crate::stats::new_histogram;

/// The shape of an mdtest run (mdtest's `-z`, `-b`, `-I`, `-w`, `-e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MdtestSpec {
    /// Levels of the tree below its top directory.
    pub depth: u32,
    /// Subdirectories of each directory of the tree above the last level.
    pub fanout: u32,
    /// Directories and files made in each directory of the tree.
    pub items: u32,
    /// Bytes written to each file when it is created.
    pub write_bytes: u32,
    /// Bytes read from each file in the read phase.
    pub read_bytes: u32,
}

/// More items than this in one run is refused (memory for the names is
/// small, but the run would take hours).
const ITEMS_MAX: u64 = 100_000_000;

impl MdtestSpec {
    /// Directories in the tree: 1 + fanout + ... + fanout^depth.
    pub fn tree_dirs(&self) -> u64 {
        let mut level = 1u64;
        let mut total = 1u64;
        for _ in 0..self.depth {
            level = level.saturating_mul(u64::from(self.fanout));
            total = total.saturating_add(level);
        }
        total
    }

    /// Directories and files made in all (each kind).
    pub fn items_total(&self) -> u64 {
        self.tree_dirs().saturating_mul(u64::from(self.items))
    }

    /// Why the shape cannot run, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.items == 0 {
            return Err("--items: give at least 1 item per directory".into());
        }
        if self.depth > 0 && self.fanout == 0 {
            return Err(
                "--fanout: a tree deeper than its top needs at least 1 subdirectory per directory".into()
            );
        }
        if self.items_total() > ITEMS_MAX {
            return Err(format!(
                "{} directories x {} items is {} items of each kind, more than {ITEMS_MAX}; make the tree or --items smaller",
                self.tree_dirs(),
                self.items,
                self.items_total()
            ));
        }
        Ok(())
    }
}

/// The phases, in the order mdtest's summary lists them.
pub const MDTEST_PHASES: [&str; 9] = [
    "Directory creation",
    "Directory stat",
    "Directory removal",
    "File creation",
    "File stat",
    "File read",
    "File removal",
    "Tree creation",
    "Tree removal",
];

/// One phase's measurement.
#[derive(Clone, Debug)]
pub struct MdtestPhase {
    pub name: &'static str,
    /// Calls made (directories, files).
    pub items: u64,
    pub seconds: f64,
    /// Each call's latency, nanoseconds.
    pub latency_ns: Histogram<u64>,
}

impl MdtestPhase {
    /// Calls a second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.items as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Times the calls of one phase.
struct Timer {
    phase: MdtestPhase,
    start: Instant,
}

impl Timer {
    fn new(name: &'static str) -> Timer {
        Timer {
            phase: MdtestPhase { name, items: 0, seconds: 0.0, latency_ns: new_histogram() },
            start: Instant::now(),
        }
    }

    fn call<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let at = Instant::now();
        let out = f();
        let ns = at.elapsed().as_nanos().clamp(1, u128::from(u64::MAX)) as u64;
        self.phase.latency_ns.saturating_record(ns);
        self.phase.items += 1;
        out
    }

    fn done(mut self) -> MdtestPhase {
        self.phase.seconds = self.start.elapsed().as_secs_f64();
        self.phase
    }
}

/// A directory of the tree: its inode (one lookup reference held), its
/// parent's and its name there, and its path for messages.
struct TreeDir {
    ino: Ino,
    parent: Ino,
    name: String,
    path: String,
}

/// Runs every phase in `into` (a directory the caller made and empties:
/// the tree is removed at the end); `after` sees each phase as it ends.
/// Phases come back in [`MDTEST_PHASES`]' order.
pub fn run_mdtest(
    fs: &dyn FileSystem,
    into: Ino,
    spec: &MdtestSpec,
    after: &mut dyn FnMut(&MdtestPhase),
) -> Result<Vec<MdtestPhase>, TreeError> {
    let mut done: Vec<MdtestPhase> = Vec::new();
    let mut finish = |timer: Timer, done: &mut Vec<MdtestPhase>| {
        let phase = timer.done();
        after(&phase);
        done.push(phase);
    };
    let mut tree = Vec::new();
    let made = make_tree(fs, into, spec, &mut tree);
    finish(made.0, &mut done);
    let result = made.1.and_then(|()| {
        let items: Vec<String> = (0..spec.items).map(|i| format!("dir.mdtest.0.{i}")).collect();
        let files: Vec<String> = (0..spec.items).map(|i| format!("file.mdtest.0.{i}")).collect();
        let mut timer = Timer::new("Directory creation");
        for_each_item(&tree, &items, |dir, name, path| {
            let attr = timer.call(|| fs.mkdir(dir, name, Owner::root(0o755)));
            fs.forget(attr.map_err(|e| TreeError::call(path, "mkdir", e))?.ino, 1);
            Ok(())
        })?;
        finish(timer, &mut done);
        stat_phase(fs, &tree, &items, "Directory stat", &mut finish, &mut done)?;
        let mut timer = Timer::new("Directory removal");
        for_each_item(&tree, &items, |dir, name, path| {
            timer.call(|| fs.rmdir(dir, name)).map_err(|e| TreeError::call(path, "rmdir", e))
        })?;
        finish(timer, &mut done);
        let data = vec![0x5au8; spec.write_bytes as usize];
        let mut timer = Timer::new("File creation");
        for_each_item(&tree, &files, |dir, name, path| {
            timer
                .call(|| create_file(fs, dir, name, &data))
                .map_err(|(call, e)| TreeError::call(path, call, e))
        })?;
        finish(timer, &mut done);
        stat_phase(fs, &tree, &files, "File stat", &mut finish, &mut done)?;
        let mut buf = vec![0u8; spec.read_bytes as usize];
        let mut timer = Timer::new("File read");
        for_each_item(&tree, &files, |dir, name, path| {
            timer
                .call(|| read_file(fs, dir, name, &mut buf))
                .map_err(|(call, e)| TreeError::call(path, call, e))
        })?;
        finish(timer, &mut done);
        let mut timer = Timer::new("File removal");
        for_each_item(&tree, &files, |dir, name, path| {
            timer.call(|| fs.unlink(dir, name)).map_err(|e| TreeError::call(path, "unlink", e))
        })?;
        finish(timer, &mut done);
        Ok(())
    });
    // The tree goes whatever happened above (a failed run leaves what it
    // could not remove, named in the error).
    let removed = remove_tree(fs, &tree);
    finish(removed.0, &mut done);
    result.and(removed.1)?;
    done.sort_by_key(|p| MDTEST_PHASES.iter().position(|&n| n == p.name));
    Ok(done)
}

/// Makes the tree top-down, breadth first; `tree` gets every directory
/// made, each with a reference, even when a later one fails.
fn make_tree(
    fs: &dyn FileSystem,
    into: Ino,
    spec: &MdtestSpec,
    tree: &mut Vec<TreeDir>,
) -> (Timer, Result<(), TreeError>) {
    let mut timer = Timer::new("Tree creation");
    let mut level = vec![(into, "mdtest_tree.0".to_string(), "mdtest_tree.0".to_string())];
    let mut next_number = 1u64;
    for depth in 0..=spec.depth {
        let mut below = Vec::new();
        for (parent, name, path) in level {
            let made = timer.call(|| fs.mkdir(parent, OsStr::new(&name), Owner::root(0o755)));
            let attr = match made {
                Ok(attr) => attr,
                Err(e) => return (timer, Err(TreeError::call(&path, "mkdir", e))),
            };
            if depth < spec.depth {
                for _ in 0..spec.fanout {
                    let child = format!("mdtest_tree.{next_number}");
                    below.push((attr.ino, child.clone(), format!("{path}/{child}")));
                    next_number += 1;
                }
            }
            tree.push(TreeDir { ino: attr.ino, parent, name, path });
        }
        level = below;
    }
    (timer, Ok(()))
}

/// Removes the tree bottom-up and drops its references.
fn remove_tree(fs: &dyn FileSystem, tree: &[TreeDir]) -> (Timer, Result<(), TreeError>) {
    let mut timer = Timer::new("Tree removal");
    let mut first_error = Ok(());
    for dir in tree.iter().rev() {
        let removed = timer.call(|| fs.rmdir(dir.parent, OsStr::new(&dir.name)));
        fs.forget(dir.ino, 1);
        if let (Err(e), Ok(())) = (removed, &first_error) {
            first_error = Err(TreeError::call(&dir.path, "rmdir", e));
        }
    }
    (timer, first_error)
}

/// Calls `f` for each item name in each directory of the tree.
fn for_each_item(
    tree: &[TreeDir],
    names: &[String],
    mut f: impl FnMut(Ino, &OsStr, &str) -> Result<(), TreeError>,
) -> Result<(), TreeError> {
    for dir in tree {
        for name in names {
            f(dir.ino, OsStr::new(name), &format!("{}/{name}", dir.path))?;
        }
    }
    Ok(())
}

/// A stat phase: each item looked up (what stat(2) asks of a file
/// system once the path's directories are known).
fn stat_phase(
    fs: &dyn FileSystem,
    tree: &[TreeDir],
    names: &[String],
    phase: &'static str,
    finish: &mut impl FnMut(Timer, &mut Vec<MdtestPhase>),
    done: &mut Vec<MdtestPhase>,
) -> Result<(), TreeError> {
    let mut timer = Timer::new(phase);
    for_each_item(tree, names, |dir, name, path| {
        let attr = timer.call(|| fs.lookup(dir, name)).map_err(|e| TreeError::call(path, "lookup", e))?;
        fs.forget(attr.ino, 1);
        Ok(())
    })?;
    finish(timer, done);
    Ok(())
}

fn create_file(
    fs: &dyn FileSystem,
    dir: Ino,
    name: &OsStr,
    data: &[u8],
) -> Result<(), (&'static str, fsapi::Errno)> {
    let attr = fs.create(dir, name, Owner::root(0o644)).map_err(|e| ("create", e))?;
    let written = if data.is_empty() { Ok(0) } else { fs.write(attr.ino, 0, data) };
    fs.forget(attr.ino, 1);
    written.map(|_| ()).map_err(|e| ("write", e))
}

fn read_file(
    fs: &dyn FileSystem,
    dir: Ino,
    name: &OsStr,
    buf: &mut [u8],
) -> Result<(), (&'static str, fsapi::Errno)> {
    let attr = fs.lookup(dir, name).map_err(|e| ("lookup", e))?;
    let read = fs.open(attr.ino).map_err(|e| ("open", e)).and_then(|()| {
        let read = if buf.is_empty() { Ok(0) } else { fs.read(attr.ino, 0, buf).map_err(|e| ("read", e)) };
        fs.release(attr.ino);
        read
    });
    fs.forget(attr.ino, 1);
    read.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsapi::{ModelFs, ROOT};

    fn spec() -> MdtestSpec {
        MdtestSpec { depth: 2, fanout: 3, items: 4, write_bytes: 100, read_bytes: 100 }
    }

    #[test]
    fn a_tree_of_depth_two_and_fanout_three_has_thirteen_directories() {
        assert_eq!(spec().tree_dirs(), 13);
        assert_eq!(spec().items_total(), 52);
        assert_eq!(MdtestSpec { depth: 0, ..spec() }.tree_dirs(), 1);
    }

    #[test]
    fn every_phase_counts_its_calls_and_the_tree_is_gone_after() {
        let fs = ModelFs::new();
        let mut seen = 0;
        let phases = run_mdtest(&fs, ROOT, &spec(), &mut |_| seen += 1).unwrap();
        assert_eq!(seen, MDTEST_PHASES.len());
        let names: Vec<&str> = phases.iter().map(|p| p.name).collect();
        assert_eq!(names, MDTEST_PHASES);
        for p in &phases {
            let expected = if p.name.starts_with("Tree") { 13 } else { 52 };
            assert_eq!(p.items, expected, "{}", p.name);
            assert_eq!(p.latency_ns.len(), expected, "{}", p.name);
        }
        let mut left = 0;
        fs.readdir(ROOT, 0, &mut |_| {
            left += 1;
            true
        })
        .unwrap();
        assert_eq!(left, 0, "nothing is left in the directory it ran in");
    }

    #[test]
    fn an_impossible_shape_is_refused_with_its_reason() {
        assert!(MdtestSpec { items: 0, ..spec() }.check().unwrap_err().contains("--items"));
        assert!(MdtestSpec { fanout: 0, ..spec() }.check().unwrap_err().contains("--fanout"));
        assert!(MdtestSpec { depth: 30, fanout: 10, ..spec() }.check().unwrap_err().contains("smaller"));
    }
}
