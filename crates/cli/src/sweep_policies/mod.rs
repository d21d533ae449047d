//! `iolab sweep policies`: the first seed's table in one command. Each
//! run makes a new file system, extracts the archive's copies into
//! separate directories and unmounts, then mounts again with a cold
//! cache, removes every copy and unmounts; each phase timed from the mount
//! to the end of the unmount. Columns alternate within each repeat (each
//! repeat starting one column further along): iolab's
//! file system under each policy (driven in-process by iolab's own tar and
//! rm, or through FUSE by GNU tar and rm), kernel file systems made on the
//! same file (`kernel.rs`), a directory the user mounted (`dir.rs`).

mod dir;
mod gnu;
mod kernel;
mod programs;
mod progress;
mod sim;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use ffs::{MkfsOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};
use workloads::spec::parse_bytes;
use workloads::tree::{archive_size, extract_observed, load_archive, remove_tree, tree_archive, TreeShape};

use self::dir::UserDir;
use self::gnu::Work;
use self::kernel::{Backing, KernelFs};
use self::progress::Progress;
use self::sim::SimDisk;
use crate::UsageError;
use lab::fs::runner::{in_process, Done, Mount};
use lab::fs::BlockLog;

/// How iolab's file system is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Driver {
    /// iolab's own tar and rm in-process, through fsapi: no kernel, no
    /// system calls; the file system's own cost.
    Direct,
    /// Mounted through FUSE; GNU tar and rm run through the mount, as a
    /// user's would.
    Fuse,
}

#[derive(Debug, Args)]
pub struct PoliciesArgs {
    /// A tar archive (plain, gzip or xz) to extract, e.g. glibc-source's
    /// /usr/src/glibc/glibc-*.tar.xz; default: a seeded source-like tree
    /// (docs/fs.md).
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Files in the generated tree (without --archive; default 2,000, or
    /// 8 for --shape large).
    #[arg(long, value_name = "N")]
    pub files: Option<u32>,
    /// The generated tree's shape (without --archive): random (glibc's,
    /// files in random directories), ordered (the same in directory
    /// order, as tar archives a tree), small (1 KiB files), large (1 to
    /// 64 MiB files), deep (chains of directories 64 deep), flat (one
    /// directory). docs/fs.md.
    #[arg(long, value_name = "SHAPE", default_value = "random", value_parser = ["random", "ordered", "small", "large", "deep", "flat"])]
    pub shape: String,
    /// Copies extracted per run, each into its own directory (the seed: 10).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub copies: u32,
    /// Runs per policy (the seed: 4).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub repeat: u32,
    /// iolab's metadata policies, in the table's order ("none" for none).
    #[arg(long, value_name = "LIST", default_value = "sync,softdep,log,async")]
    pub policies: String,
    /// How iolab's file system is driven: direct (iolab's own tar and rm
    /// in-process, the file system's cost alone) or fuse (mounted through
    /// FUSE, with GNU tar and rm).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Driver::Direct)]
    pub driver: Driver,
    /// Kernel file systems to compare, a column each (ext4, ext4-journal,
    /// ext4-nojournal, ext4-sync, xfs, btrfs): each run makes one on a
    /// loop device over the same file (or on --target when it is a block
    /// device), mounts it and runs GNU tar and rm. Needs root and the
    /// mkfs tools.
    #[arg(long, value_name = "LIST")]
    pub kernel: Option<String>,
    /// A directory on a file system already mounted, as one more column:
    /// GNU tar and rm in a new directory under it (removed at the end);
    /// its type and options are reported.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The file or block device the file systems are made on, a new one
    /// per run (a target holding data needs --force); default: a
    /// temporary file, made sparse again before each run (each finds it
    /// as the first did), removed at the end.
    #[arg(long, value_name = "PATH")]
    pub target: Option<String>,
    /// iolab's file system on a simulated disk instead (sim:hdd[,...] or
    /// sim:ssd[,...], docs/sim.md): a new disk per run, every time modeled
    /// disk time, the same on any machine. iolab's policies in-process
    /// only (no --kernel, --dir or --driver fuse).
    #[arg(long, value_name = "SIM")]
    pub disk: Option<String>,
    /// Size of a file target to create (default: room for the copies
    /// twice over, at least 1 GiB).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// The buffer cache of each mount.
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    pub cache: String,
    /// The log region each new file system gets (the `log` policy's
    /// journal; default: what mke2fs gives jbd2's journal on a device of
    /// the same size, 32 MiB on 1 GiB).
    #[arg(long, value_name = "SIZE")]
    pub log_size: Option<String>,
    /// Make file systems on a target that holds data.
    #[arg(long)]
    pub force: bool,
    /// The generated tree's seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON (schema iolab-sweep-policies, version 3)
    /// to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// One column of the table.
enum Column {
    Iolab(Policy),
    Kernel(KernelFs),
    Dir(UserDir),
}

impl Column {
    fn name(&self) -> String {
        match self {
            Column::Iolab(p) => p.name().to_string(),
            Column::Kernel(k) => k.name().to_string(),
            Column::Dir(d) => d.name(),
        }
    }
}

/// The columns asked for, checked before anything is written.
fn columns(args: &PoliciesArgs, block_device: bool) -> Result<Vec<Column>, UsageError> {
    let mut columns = Vec::new();
    if !matches!(args.policies.trim(), "" | "none") {
        for p in args.policies.split(',') {
            columns.push(Column::Iolab(p.trim().parse::<Policy>().map_err(UsageError)?));
        }
    }
    let mut kernel = Vec::new();
    for k in args.kernel.iter().flat_map(|list| list.split(',')).filter(|k| !k.trim().is_empty()) {
        kernel.push(k.trim().parse::<KernelFs>().map_err(UsageError)?);
    }
    kernel::check_tools(&kernel, !block_device)?;
    columns.extend(kernel.into_iter().map(Column::Kernel));
    if let Some(dir) = &args.dir {
        columns.push(Column::Dir(UserDir::find(dir)?));
    }
    if args.disk.is_some() {
        if columns.iter().any(|c| !matches!(c, Column::Iolab(_))) || args.driver == Driver::Fuse {
            return Err(UsageError(
                "--disk: a simulated disk runs iolab's policies in-process only; leave out --kernel, --dir and \
                 --driver fuse (they run on real disks, timed by the wall clock)"
                    .into(),
            ));
        }
        if args.target.is_some() {
            return Err(UsageError(
                "--disk and --target: give one; the file systems go on one or the other".into(),
            ));
        }
    }
    if columns.is_empty() {
        return Err(UsageError(
            "nothing to compare: name policies (--policies sync,softdep,log,async), --kernel file systems or a --dir"
                .into(),
        ));
    }
    let gnu = args.driver == Driver::Fuse || columns.iter().any(|c| !matches!(c, Column::Iolab(_)));
    for program in ["tar", "rm"] {
        if gnu && programs::find_program(program).is_none() {
            return Err(UsageError(format!(
                "GNU {program} is not installed; the kernel, --dir and fuse columns run it"
            )));
        }
    }
    if args.driver == Driver::Fuse && !Path::new("/dev/fuse").exists() {
        return Err(UsageError("--driver fuse: /dev/fuse is missing; use --driver direct".into()));
    }
    Ok(columns)
}

pub fn run(args: PoliciesArgs) -> anyhow::Result<ExitCode> {
    if args.copies == 0 || args.repeat == 0 {
        return Err(UsageError("--copies and --repeat: give at least 1".into()).into());
    }
    let block_device = args.target.as_deref().is_some_and(is_block_device);
    let columns = columns(&args, block_device)?;
    parse_bytes("cache", &args.cache).map_err(UsageError::from)?;
    crate::check_destinations(args.json.as_deref(), args.plot.as_deref())?;
    let (name, tar) = match &args.archive {
        Some(_) if args.files.is_some() || args.shape != "random" => {
            return Err(UsageError(
                "--files and --shape shape the generated tree, and --archive replaces it: give one or the other"
                    .into(),
            )
            .into());
        }
        Some(path) => {
            (path.display().to_string(), load_archive(path).map_err(|e| UsageError(e.to_string()))?.tar)
        }
        None => {
            let shape = TreeShape::parse(&args.shape).expect("clap took only the shapes' names");
            let files = args.files.unwrap_or(shape.default_files());
            let what = match shape {
                TreeShape::Random => "a generated source-like tree".to_string(),
                shape => format!("a generated tree of shape {}", shape.name()),
            };
            (format!("{what} (seed {}, {files} files)", args.seed), tree_archive(shape, args.seed, files))
        }
    };
    let (entries, data_bytes) = archive_size(&tar).map_err(|e| UsageError(e.to_string()))?;
    let size = match &args.size {
        Some(s) => parse_bytes("size", s).map_err(UsageError::from)?,
        None => (2 * u64::from(args.copies) * (data_bytes + 4096 * entries)).max(1 << 30),
    };
    let temp = tempfile::Builder::new().prefix("iolab-policies-").tempdir()?;
    let target = match &args.target {
        Some(t) => t.clone(),
        None => temp.path().join("fs.img").display().to_string(),
    };
    let mountpoint = temp.path().join("mnt");
    std::fs::create_dir(&mountpoint)?;
    // The first file system made checks the target (--force where it
    // holds data) and sizes a new file; every run after replaces the
    // sweep's own.
    let disk = args.disk.as_deref().map(SimDisk::parse).transpose()?;
    let medium = match &disk {
        Some(disk) => {
            disk.check_size(size)?;
            String::new()
        }
        None => {
            let (stack, _) = crate::fs::make(
                &target,
                Some(size),
                &mkfs_options(&args)?,
                args.force,
                None,
                &BlockLog::default(),
            )?;
            let medium =
                stack.device().media().iter().map(report::medium_kind).collect::<Vec<_>>().join(", ");
            stack.close()?;
            medium
        }
    };
    let gnu_needed = args.driver == Driver::Fuse || columns.iter().any(|c| !matches!(c, Column::Iolab(_)));
    let work = if gnu_needed { Some(Work::new(&tar, args.copies)?) } else { None };
    let backing = if block_device { Backing::Device(&target) } else { Backing::File(Path::new(&target)) };
    let mut runs: Vec<report::ColumnRuns> =
        columns.iter().map(|c| report::ColumnRuns { name: c.name(), ..Default::default() }).collect();
    let progress = Progress::new(entries, args.copies, u64::from(args.repeat) * columns.len() as u64)?;
    let ctx = RunContext {
        args: &args,
        target: &target,
        mountpoint: &mountpoint,
        tar: &tar,
        work: work.as_ref(),
        disk: disk.as_ref(),
    };
    // The sweep's own file is made sparse again before every run, so that
    // each run finds it as the first did (not with the blocks the last
    // one wrote already in place beneath).
    let own_file = args.target.is_none() && disk.is_none();
    for repeat in 1..=args.repeat {
        for i in run_order(columns.len(), repeat) {
            let (column, runs) = (&columns[i], &mut runs[i]);
            progress.go_on()?;
            if own_file {
                sparse_again(Path::new(&target), size)?;
            }
            let name = runs.name.clone();
            let phase = progress.run(repeat, args.repeat, &name);
            let (tar_run, rm_run, how) = match column {
                Column::Iolab(policy) => ctx.iolab(*policy, size, &phase)?,
                Column::Kernel(fs) => {
                    let work = ctx.work.expect("GNU tar's archive is written when a kernel column runs");
                    let (tar_run, rm_run, on) = kernel::run_once(*fs, &backing, &mountpoint, work, &phase)?;
                    (tar_run, rm_run, fs.how(&on))
                }
                Column::Dir(dir) => {
                    let work = ctx.work.expect("GNU tar's archive is written when a --dir column runs");
                    let (tar_run, rm_run, cold) = dir.run_once(work, &phase)?;
                    (tar_run, rm_run, dir.how(cold))
                }
            };
            progress.say(&format!(
                "repeat {}/{} {:<5} tar {}  rm {}",
                repeat,
                args.repeat,
                runs.name,
                report::min_sec(tar_run.seconds),
                report::min_sec(rm_run.seconds)
            ));
            runs.how = how;
            runs.tar.push(tar_run);
            runs.rm.push(rm_run);
        }
    }
    progress.finish();
    let shown_target = if args.target.is_some() {
        target.clone()
    } else {
        "a temporary file, sparse again before each run".to_string()
    };
    let sweep = report::PoliciesSweep {
        archive: name,
        entries,
        data_bytes,
        copies: args.copies,
        repeats: args.repeat,
        target: match &disk {
            Some(disk) => format!(
                "a simulated disk ({}), a new one per run, a file system of {} on its first bytes",
                disk.describe(),
                report::human_bytes(size)
            ),
            None => format!(
                "{shown_target} ({medium}), a new file system of {} per run",
                report::human_bytes(size)
            ),
        },
        modeled: disk.as_ref().map(SimDisk::describe),
        columns: runs,
    };
    if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        print!("{}", report::policies_table(&sweep));
    }
    let doc =
        report::json::SweepPoliciesDocument::new(env!("CARGO_PKG_VERSION"), crate::host::wire(), &sweep);
    if let Some(path) = &args.json {
        crate::write_json(path, &doc.to_json())?;
    }
    if let Some(dir) = &args.plot {
        crate::write_plots(dir, &doc.to_json())?;
    }
    drop(work);
    temp.close()?;
    Ok(ExitCode::SUCCESS)
}

/// The order the columns run in, in repeat `repeat` (from 1): in turn,
/// each repeat starting one further along, so that none always runs
/// first, or always after the same one (the disk's background work after
/// a run lands on the next).
fn run_order(columns: usize, repeat: u32) -> impl Iterator<Item = usize> {
    let first = (repeat as usize).saturating_sub(1);
    (0..columns).map(move |k| (k + first) % columns)
}

/// Gives back every block of the file at `path` and leaves it `size`
/// bytes long, sparse.
fn sparse_again(path: &Path, size: u64) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.set_len(0)?;
    file.set_len(size)
}

fn is_block_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// What every run of a sweep shares.
struct RunContext<'a> {
    args: &'a PoliciesArgs,
    target: &'a str,
    mountpoint: &'a Path,
    tar: &'a [u8],
    work: Option<&'a Work>,
    /// `--disk`: the simulated disk each run's file system is made on.
    disk: Option<&'a SimDisk>,
}

impl RunContext<'_> {
    /// One run of iolab's file system under `policy`: a new file system,
    /// the tar phase, the rm phase; and how it ran.
    fn iolab(
        &self,
        policy: Policy,
        size: u64,
        phases: &progress::Run,
    ) -> anyhow::Result<(report::PhaseRun, report::PhaseRun, String)> {
        let cache_bytes = parse_bytes("cache", &self.args.cache).map_err(UsageError::from)?;
        if let Some(disk) = self.disk {
            let mkfs = mkfs_options(self.args)?;
            let (tar_run, rm_run) =
                disk.run_once(policy, size, cache_bytes, &mkfs, self.tar, self.args.copies, phases)?;
            let how = format!(
                "iolab's file system, policy {}, cache {}, in-process on {}: modeled disk time",
                policy.name(),
                self.args.cache,
                disk.describe()
            );
            return Ok((tar_run, rm_run, how));
        }
        let (stack, _) = crate::fs::make(
            self.target,
            Some(size),
            &mkfs_options(self.args)?,
            true,
            None,
            &BlockLog::default(),
        )?;
        stack.close()?;
        // Each run's file system is new: never unclean, nothing to force.
        let mount = Mount { policy, cache_bytes, direct: false, force: false, log: BlockLog::default() };
        let made = format!("iolab's file system, policy {}, cache {}", policy.name(), self.args.cache);
        match (self.args.driver, self.work) {
            (Driver::Fuse, Some(work)) => {
                let (tar_done, served) = gnu::through_fuse(self.target, &mount, self.mountpoint, |dir| {
                    gnu::extract_copies(work, dir, phases.phase("tar"))
                })?;
                let (rm_done, _) = gnu::through_fuse(self.target, &mount, self.mountpoint, |dir| {
                    gnu::remove_copies(work, dir, phases.phase("rm"))
                })?;
                let transport = match &served.ring {
                    Some(ring) if ring.queues > 0 && ring.refused.is_none() => "over io_uring",
                    _ => "through /dev/fuse",
                };
                let how = format!("{made}, mounted through FUSE (served {transport}); GNU tar and rm");
                Ok((phase_run(&tar_done), phase_run(&rm_done), how))
            }
            _ => {
                let copies = self.args.copies;
                let tar_done = in_process(self.target, &mount, None, |fs| {
                    extract_copies(fs, self.tar, copies, phases.phase("tar"))
                })?;
                let rm_done = in_process(self.target, &mount, None, |fs| {
                    remove_copies(fs, copies, phases.phase("rm"))
                })?;
                let how = format!(
                    "{made}, in-process (iolab's tar and rm through fsapi: no kernel, no system calls)"
                );
                Ok((phase_run(&tar_done), phase_run(&rm_done), how))
            }
        }
    }
}

/// The new file systems' options: `--log-size`.
fn mkfs_options(args: &PoliciesArgs) -> Result<MkfsOptions, UsageError> {
    let log_bytes = args.log_size.as_deref().map(|s| parse_bytes("log-size", s)).transpose()?;
    Ok(MkfsOptions { log_bytes, ..MkfsOptions::default() })
}

fn extract_copies(fs: &dyn FileSystem, tar: &[u8], copies: u32, progress: &Progress) -> anyhow::Result<()> {
    for copy in 1..=copies {
        let name = format!("copy-{copy}");
        let dir = fs
            .mkdir(ROOT, OsStr::new(&name), Owner::root(0o755))
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let extracted = extract_observed(fs, dir.ino, tar, &mut || progress.entry());
        fs.forget(dir.ino, 1);
        extracted?;
        progress.copy_done(copy)?;
    }
    Ok(())
}

fn remove_copies(fs: &dyn FileSystem, copies: u32, progress: &Progress) -> anyhow::Result<()> {
    for copy in 1..=copies {
        let name = format!("copy-{copy}");
        remove_tree(fs, ROOT, OsStr::new(&name), &name)?;
        progress.copy_done(copy)?;
    }
    Ok(())
}

fn phase_run(done: &Done) -> report::PhaseRun {
    let c = &done.unmounted.cache;
    report::PhaseRun {
        seconds: done.seconds,
        blocks_written: c.blocks_written,
        write_requests: c.write_requests,
        sync_writes: Some(c.sync_writes),
        flushes: c.flushes,
        log_bytes: Some(done.unmounted.log.map_or(0, |l| l.log_bytes_written)),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    /// A file a run wrote all over holds no block once made sparse
    /// again, and keeps its size: the next run finds it as the first did.
    #[test]
    fn the_sweeps_file_holds_no_block_once_made_sparse_again() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&vec![7u8; 1 << 20]).unwrap();
        file.as_file().sync_all().unwrap();
        assert!(file.as_file().metadata().unwrap().blocks() > 0);
        super::sparse_again(file.path(), 4 << 20).unwrap();
        let meta = std::fs::metadata(file.path()).unwrap();
        assert_eq!((meta.len(), meta.blocks()), (4 << 20, 0));
    }

    /// Over as many repeats as columns, each column runs first once and
    /// every column runs once a repeat.
    #[test]
    fn each_column_runs_first_once_in_as_many_repeats() {
        let orders: Vec<Vec<usize>> = (1..=3).map(|r| super::run_order(3, r).collect()).collect();
        assert_eq!(orders, vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]);
        assert_eq!(super::run_order(3, 4).collect::<Vec<_>>(), vec![0, 1, 2], "round again");
    }
}
