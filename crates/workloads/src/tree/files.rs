//! bonnie++'s file tests (`-n`) over a [`FileSystem`]: files created,
//! read back and deleted, first in name order ("sequential": names that
//! begin with the file's number), then with names that begin with random
//! characters ("random": created in number order, so the directory sees
//! random names, then read and deleted in a random order). Each file holds
//! between the smallest and the largest size, zeros; `dirs` directories
//! share the files (none: all in one). As bonnie++ 2.00 does: a file's
//! name is its number in ten hexadecimal digits and up to twelve random
//! letters and digits, a directory's its number in five decimal digits;
//! the read of the sequential pass lists each directory and looks every
//! entry up in the order listed (reading the data of files that have
//! some); the deletes of that pass list and delete in that order too.
//! Each phase's rate is files a second, its %CPU the process's user and
//! system time over the phase's, its latency the longest single file's.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use fsapi::{Errno, FileSystem, Ino, Owner};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::TreeError;
use crate::stats::PhaseMeter;

/// What `-n NUM[:MAX[:MIN[:DIRS]]]` asks for (NUM in units of 1024 files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileTestSpec {
    /// Files in each pass (bonnie++'s NUM times 1024).
    pub files: u64,
    pub max_bytes: u32,
    pub min_bytes: u32,
    /// Directories the files are spread over (0: all in one).
    pub dirs: u32,
    pub seed: u64,
}

/// The six phases, in bonnie++'s order.
pub const FILE_PHASES: [&str; 6] = ["seq_create", "seq_stat", "seq_del", "ran_create", "ran_stat", "ran_del"];

/// A phase shorter than this is reported as `+++`, as bonnie++ does.
const PHASE_SECONDS_MIN: f64 = 0.5;

impl FileTestSpec {
    /// `-n`'s argument: NUM[:MAX[:MIN[:DIRS]]], NUM in units of 1024.
    pub fn parse(text: &str, seed: u64) -> Result<FileTestSpec, String> {
        let bad = |why: &str| {
            format!("-n {text}: {why}; give NUM[:MAX[:MIN[:DIRS]]] with NUM in units of 1024 files")
        };
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() > 4 {
            return Err(bad("too many fields"));
        }
        let number = |i: usize, what: &str| -> Result<u64, String> {
            parts.get(i).filter(|p| !p.is_empty()).map_or(Ok(0), |p| p.parse().map_err(|_| bad(what)))
        };
        let units = number(0, "the number of files is not a number")?;
        let max = number(1, "the largest size is not a number of bytes")?;
        let min = number(2, "the smallest size is not a number of bytes")?;
        let dirs = number(3, "the number of directories is not a number")?;
        if units == 0 {
            return Err(bad("at least 1 (1024 files) is needed"));
        }
        if units > 100_000 || max > u64::from(u32::MAX) || dirs > 100_000 {
            return Err(bad("too large"));
        }
        if min > max {
            return Err(bad("the smallest size is larger than the largest"));
        }
        Ok(FileTestSpec {
            files: units * 1024,
            max_bytes: max as u32,
            min_bytes: min as u32,
            dirs: dirs as u32,
            seed,
        })
    }

    /// bonnie++'s CSV and table form: NUM[:MAX[:MIN]][/DIRS].
    pub fn label(&self) -> String {
        let mut s = (self.files / 1024).to_string();
        if self.max_bytes > 0 || self.min_bytes > 0 {
            s += &format!(":{}:{}", self.max_bytes, self.min_bytes);
        }
        if self.dirs > 0 {
            s += &format!("/{}", self.dirs);
        }
        s
    }
}

/// One phase's measurement.
#[derive(Clone, Debug)]
pub struct FilePhase {
    pub name: &'static str,
    pub files: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    /// Files a second.
    pub rate: f64,
    pub cpu_pct: f64,
    /// Shorter than bonnie++ can measure: `+++`.
    pub too_short: bool,
    /// The longest single file's call(s), microseconds.
    pub latency_max_us: f64,
}

/// Every file test of a run.
#[derive(Clone, Debug)]
pub struct FileTests {
    pub spec: FileTestSpec,
    pub phases: Vec<FilePhase>,
}

/// A phase's times, as a file phase.
struct Meter(PhaseMeter);

impl Meter {
    fn start() -> Meter {
        Meter(PhaseMeter::start())
    }

    fn timed<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.0.timed(f)
    }

    fn finish(self, name: &'static str, files: u64) -> FilePhase {
        let t = self.0.finish();
        FilePhase {
            name,
            files,
            elapsed_s: t.elapsed_s,
            cpu_s: t.cpu_s,
            rate: files as f64 / t.elapsed_s,
            cpu_pct: 100.0 * t.cpu_s / t.elapsed_s,
            too_short: t.elapsed_s < PHASE_SECONDS_MIN,
            latency_max_us: t.latency_max_us,
        }
    }
}

/// One file of a pass: its directory (an index into the pass's
/// directories), name and size.
struct Planned {
    dir: usize,
    name: String,
    bytes: u32,
}

/// Up to twelve random letters and digits.
fn random_tail(rng: &mut Xoshiro256PlusPlus) -> String {
    const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let n = rng.random_range(0..=12);
    (0..n).map(|_| ALNUM[rng.random_range(0..ALNUM.len())] as char).collect()
}

fn plan(spec: &FileTestSpec, random_names: bool, rng: &mut Xoshiro256PlusPlus) -> Vec<Planned> {
    let dirs = u64::from(spec.dirs.max(1));
    (0..spec.files)
        .map(|i| {
            let tail = random_tail(rng);
            let name = if random_names { format!("{tail}{i:010x}") } else { format!("{i:010x}{tail}") };
            let bytes = rng.random_range(spec.min_bytes..=spec.max_bytes);
            Planned { dir: (i * dirs / spec.files) as usize, name, bytes }
        })
        .collect()
}

/// Runs the six phases in `into` (an empty directory the caller made);
/// everything made is removed by the delete phases.
pub fn run_file_tests(fs: &dyn FileSystem, into: Ino, spec: &FileTestSpec) -> Result<FileTests, TreeError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut phases = Vec::with_capacity(6);
    let data = vec![0u8; spec.max_bytes as usize];
    let mut buf = vec![0u8; spec.max_bytes as usize];
    for random in [false, true] {
        let prefix = if random { "ran" } else { "seq" };
        let files = plan(spec, random, &mut rng);
        let dirs = make_dirs(fs, into, spec.dirs)?;
        let pass = (|| {
            let mut m = Meter::start();
            for f in &files {
                let dir = dirs[f.dir].0;
                m.timed(|| create(fs, dir, &f.name, &data[..f.bytes as usize]))?;
            }
            phases.push(m.finish(if random { "ran_create" } else { "seq_create" }, spec.files));
            let mut m = Meter::start();
            if random {
                let mut order: Vec<&Planned> = files.iter().collect();
                order.shuffle(&mut rng);
                for f in order {
                    m.timed(|| read_back(fs, dirs[f.dir].0, OsStr::new(&f.name), &mut buf))?;
                }
            } else {
                for &(dir, _) in &dirs {
                    for name in list(fs, dir)? {
                        m.timed(|| read_back(fs, dir, &name, &mut buf))?;
                    }
                }
            }
            phases.push(m.finish(if random { "ran_stat" } else { "seq_stat" }, spec.files));
            let mut m = Meter::start();
            if random {
                let mut order: Vec<&Planned> = files.iter().collect();
                order.shuffle(&mut rng);
                for f in order {
                    let dir = dirs[f.dir].0;
                    m.timed(|| fs.unlink(dir, OsStr::new(&f.name)))
                        .map_err(|e| TreeError::call(&f.name, "unlink", e))?;
                }
            } else {
                for &(dir, _) in &dirs {
                    for name in list(fs, dir)? {
                        m.timed(|| fs.unlink(dir, &name))
                            .map_err(|e| TreeError::call(name.to_string_lossy(), "unlink", e))?;
                    }
                }
            }
            remove_dirs(fs, into, &dirs)?;
            phases.push(m.finish(if random { "ran_del" } else { "seq_del" }, spec.files));
            Ok::<(), TreeError>(())
        })();
        release_dirs(fs, &dirs);
        pass.map_err(|e| match e {
            TreeError::Call { path, call, errno } => {
                TreeError::Call { path: format!("{prefix} pass: {path}"), call, errno }
            }
            other => other,
        })?;
    }
    Ok(FileTests { spec: *spec, phases })
}

/// The pass's directories (`into` itself when there are none), each with
/// a lookup reference (none for `into`) and its name.
fn make_dirs(fs: &dyn FileSystem, into: Ino, dirs: u32) -> Result<Vec<(Ino, Option<String>)>, TreeError> {
    if dirs == 0 {
        return Ok(vec![(into, None)]);
    }
    let mut made = Vec::with_capacity(dirs as usize);
    for d in 0..dirs {
        let name = format!("{d:05}");
        match fs.mkdir(into, OsStr::new(&name), Owner::root(0o700)) {
            Ok(attr) => made.push((attr.ino, Some(name))),
            Err(e) => {
                release_dirs(fs, &made);
                return Err(TreeError::call(&name, "mkdir", e));
            }
        }
    }
    Ok(made)
}

fn remove_dirs(fs: &dyn FileSystem, into: Ino, dirs: &[(Ino, Option<String>)]) -> Result<(), TreeError> {
    for (_, name) in dirs {
        if let Some(name) = name {
            fs.rmdir(into, OsStr::new(name)).map_err(|e| TreeError::call(name, "rmdir", e))?;
        }
    }
    Ok(())
}

fn release_dirs(fs: &dyn FileSystem, dirs: &[(Ino, Option<String>)]) {
    for (ino, name) in dirs {
        if name.is_some() {
            fs.forget(*ino, 1);
        }
    }
}

fn create(fs: &dyn FileSystem, dir: Ino, name: &str, data: &[u8]) -> Result<(), TreeError> {
    let attr = fs
        .create(dir, OsStr::new(name), Owner::root(0o600))
        .map_err(|e| TreeError::call(name, "create", e))?;
    let written = if data.is_empty() { Ok(0) } else { fs.write(attr.ino, 0, data) };
    fs.forget(attr.ino, 1);
    written.map(|_| ()).map_err(|e| TreeError::call(name, "write", e))
}

/// stat(2), and the file's data read when it has some.
fn read_back(fs: &dyn FileSystem, dir: Ino, name: &OsStr, buf: &mut [u8]) -> Result<(), TreeError> {
    let shown = || name.to_string_lossy().into_owned();
    let attr = fs.lookup(dir, name).map_err(|e| TreeError::call(shown(), "lookup", e))?;
    let read = if attr.size == 0 {
        Ok(())
    } else {
        let n = (attr.size as usize).min(buf.len());
        fs.open(attr.ino)
            .and_then(|()| {
                let read = fs.read(attr.ino, 0, &mut buf[..n]);
                fs.release(attr.ino);
                read
            })
            .map(|_| ())
            .map_err(|e| TreeError::call(shown(), "read", e))
    };
    fs.forget(attr.ino, 1);
    read
}

/// A directory's names in the order it lists them.
fn list(fs: &dyn FileSystem, dir: Ino) -> Result<Vec<OsString>, TreeError> {
    let mut names = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        names.push(OsStr::from_bytes(&e.name).to_os_string());
        true
    })
    .map_err(|e: Errno| TreeError::call("a test directory", "readdir", e))?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsapi::{ModelFs, ROOT};

    #[test]
    fn n_parses_as_bonnie_reads_it() {
        let s = FileTestSpec::parse("2:4096:1024:3", 7).unwrap();
        assert_eq!((s.files, s.max_bytes, s.min_bytes, s.dirs, s.seed), (2048, 4096, 1024, 3, 7));
        assert_eq!(s.label(), "2:4096:1024/3");
        assert_eq!(FileTestSpec::parse("16", 1).unwrap().label(), "16");
        for bad in ["0", "x", "1:10:20", "1:2:3:4:5"] {
            assert!(FileTestSpec::parse(bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_six_phases_each_count_every_file_and_leave_nothing() {
        let fs = ModelFs::new();
        let spec = FileTestSpec { files: 300, max_bytes: 64, min_bytes: 0, dirs: 3, seed: 1 };
        let tests = run_file_tests(&fs, ROOT, &spec).unwrap();
        let names: Vec<&str> = tests.phases.iter().map(|p| p.name).collect();
        assert_eq!(names, FILE_PHASES);
        assert!(tests.phases.iter().all(|p| p.files == 300));
        let mut left = 0;
        fs.readdir(ROOT, 0, &mut |_| {
            left += 1;
            true
        })
        .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn sequential_names_begin_with_the_number_and_random_ones_end_with_it() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let spec = FileTestSpec { files: 4, max_bytes: 0, min_bytes: 0, dirs: 2, seed: 1 };
        let seq = plan(&spec, false, &mut rng);
        let ran = plan(&spec, true, &mut rng);
        assert!(seq[3].name.starts_with("0000000003"), "{}", seq[3].name);
        assert!(ran[3].name.ends_with("0000000003"), "{}", ran[3].name);
        assert_eq!(seq.iter().map(|f| f.dir).collect::<Vec<_>>(), [0, 0, 1, 1]);
        assert!(OsStr::new(&seq[0].name).as_bytes().len() <= 22);
    }
}
