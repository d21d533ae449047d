//! The first seed's table in one call (`iolab sweep policies`). Each
//! run makes a new file system, extracts the archive's copies into
//! separate directories and unmounts, then mounts again with a cold
//! cache, removes every copy and unmounts; each phase timed from the mount
//! to the end of the unmount. Columns alternate within each repeat (each
//! repeat starting one column further along): iolab's file system under
//! each policy (driven in-process by iolab's own tar and rm, or through
//! FUSE by GNU tar and rm; on a simulated disk in modeled time, `sim.rs`),
//! kernel file systems made on the same file (`kernel.rs`), a directory
//! the user mounted (`dir.rs`). GNU tar and rm are `gnu.rs`, the programs
//! found and run `programs.rs`; the caller follows through `watch.rs`.

mod dir;
mod gnu;
pub(crate) mod kernel;
pub(crate) mod programs;
mod sim;
mod watch;

use std::ffi::OsStr;
use std::path::Path;

use ffs::{MkfsOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};
use workloads::tree::{archive_size, extract_observed, remove_tree};

pub use self::dir::UserDir;
use self::gnu::Work;
use self::kernel::Backing;
pub use self::kernel::{check_tools, KernelFs, KERNEL_NAMES};
pub use self::programs::find_program;
pub use self::sim::SimDisk;
pub use self::watch::{Run, Watch};
use crate::fs::runner::{in_process, Done};
use crate::fs::BlockLog;
use crate::fs::Mount;
use crate::UsageError;

/// How iolab's file system is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// iolab's own tar and rm in-process, through fsapi: no kernel, no
    /// system calls; the file system's own cost.
    Direct,
    /// Mounted through FUSE; GNU tar and rm run through the mount, as a
    /// user's would.
    Fuse,
}

/// One column of the table.
pub enum Column {
    Iolab(Policy),
    Kernel(KernelFs),
    Dir(UserDir),
}

impl Column {
    pub fn name(&self) -> String {
        match self {
            Column::Iolab(p) => p.name().to_string(),
            Column::Kernel(k) => k.name().to_string(),
            Column::Dir(d) => d.name(),
        }
    }

    /// Whether the column runs GNU tar and rm.
    fn runs_gnu(&self, driver: Driver) -> bool {
        driver == Driver::Fuse || !matches!(self, Column::Iolab(_))
    }
}

/// A sweep, every flag checked.
pub struct Plan {
    /// What the tree is, for the report.
    pub tree_name: String,
    /// The tree as an uncompressed tar archive.
    pub tar: Vec<u8>,
    /// Copies extracted per run, each into its own directory.
    pub copies: u32,
    /// Runs per column.
    pub repeat: u32,
    pub columns: Vec<Column>,
    pub driver: Driver,
    /// The file or block device the file systems are made on; `None`: a
    /// temporary file, made sparse again before each run.
    pub target: Option<String>,
    /// iolab's file system on a simulated disk instead.
    pub disk: Option<SimDisk>,
    /// Size of a file target to create; `None`: [`default_size`].
    pub size: Option<u64>,
    /// The buffer cache of each mount, and as the user gave it.
    pub cache_bytes: u64,
    pub cache: String,
    /// The new file systems' options.
    pub mkfs: MkfsOptions,
    /// Make file systems on a target that holds data.
    pub force: bool,
}

/// Bytes a sweep's file system gets unless told: room for the copies'
/// data and a block per entry twice over, and inodes for every entry
/// with a quarter to spare (iolab's mkfs and mke2fs both give an inode
/// per 16 KiB), at least 1 GiB. A tree of small files runs out of
/// inodes long before it runs out of blocks.
pub fn default_size(copies: u32, entries: u64, data_bytes: u64) -> u64 {
    const BYTES_PER_INODE: u64 = 16 << 10;
    let copies = u64::from(copies);
    let blocks = 2 * copies * (data_bytes + 4096 * entries);
    let inodes = (copies * entries * 5 / 4) * BYTES_PER_INODE;
    blocks.max(inodes).max(1 << 30)
}

/// Whether `path` is a block device.
pub fn is_block_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// Runs the sweep `plan` describes, `watch` following.
pub fn run(plan: &Plan, watch: &dyn Watch) -> anyhow::Result<report::PoliciesSweep> {
    let (entries, data_bytes) = archive_size(&plan.tar).map_err(|e| UsageError(e.to_string()))?;
    let size = plan.size.unwrap_or_else(|| default_size(plan.copies, entries, data_bytes));
    let temp = tempfile::Builder::new().prefix("iolab-policies-").tempdir()?;
    let target = match &plan.target {
        Some(t) => t.clone(),
        None => temp.path().join("fs.img").display().to_string(),
    };
    let mountpoint = temp.path().join("mnt");
    std::fs::create_dir(&mountpoint)?;
    let medium = first_make(plan, &target, size)?;
    let gnu_needed = plan.columns.iter().any(|c| c.runs_gnu(plan.driver));
    let work = if gnu_needed { Some(Work::new(&plan.tar, plan.copies)?) } else { None };
    let block_device = plan.target.as_deref().is_some_and(is_block_device);
    let backing = if block_device { Backing::Device(&target) } else { Backing::File(Path::new(&target)) };
    let mut runs: Vec<report::ColumnRuns> =
        plan.columns.iter().map(|c| report::ColumnRuns { name: c.name(), ..Default::default() }).collect();
    let ctx = RunContext { plan, target: &target, mountpoint: &mountpoint, work: work.as_ref(), backing };
    // The sweep's own file is made sparse again before every run, so that
    // each run finds it as the first did (not with the blocks the last
    // one wrote already in place beneath).
    let own_file = plan.target.is_none() && plan.disk.is_none();
    for repeat in 1..=plan.repeat {
        for i in run_order(plan.columns.len(), repeat) {
            let (column, runs) = (&plan.columns[i], &mut runs[i]);
            watch.go_on()?;
            if own_file {
                sparse_again(Path::new(&target), size)?;
            }
            let name = runs.name.clone();
            let phase = Run { watch, repeat, repeats: plan.repeat, column: &name };
            let (tar_run, rm_run, how) = ctx.column(column, size, &phase)?;
            watch.ran(repeat, plan.repeat, &runs.name, &tar_run, &rm_run);
            runs.how = how;
            runs.tar.push(tar_run);
            runs.rm.push(rm_run);
        }
    }
    let sweep = report::PoliciesSweep {
        archive: plan.tree_name.clone(),
        entries,
        data_bytes,
        copies: plan.copies,
        repeats: plan.repeat,
        target: described_target(plan, &target, &medium, size),
        modeled: plan.disk.as_ref().map(SimDisk::describe),
        columns: runs,
    };
    drop(work);
    temp.close()?;
    Ok(sweep)
}

/// The sweep's first file system, made on its target: that checks the
/// target (`force` where it holds data) and sizes a new file; every run
/// after replaces the sweep's own. Returns the target's media, for the
/// report (none for a simulated disk, whose size is checked instead).
fn first_make(plan: &Plan, target: &str, size: u64) -> anyhow::Result<String> {
    Ok(match &plan.disk {
        Some(disk) => {
            disk.check_size(size)?;
            String::new()
        }
        None => {
            let (stack, _) =
                crate::fs::make(target, Some(size), &plan.mkfs, plan.force, None, &BlockLog::default())?;
            let medium =
                stack.device().media().iter().map(report::medium_kind).collect::<Vec<_>>().join(", ");
            stack.close()?;
            medium
        }
    })
}

/// Where the file systems were made, for the report.
fn described_target(plan: &Plan, target: &str, medium: &str, size: u64) -> String {
    let shown_target = if plan.target.is_some() {
        target.to_string()
    } else {
        "a temporary file, sparse again before each run".to_string()
    };
    match &plan.disk {
        Some(disk) => format!(
            "a simulated disk ({}), a new one per run, a file system of {} on its first bytes",
            disk.describe(),
            report::human_bytes(size)
        ),
        None => {
            format!("{shown_target} ({medium}), a new file system of {} per run", report::human_bytes(size))
        }
    }
}

/// The order the columns run in, in repeat `repeat` (from 1): a
/// Williams design, so that each column runs first once in every `n`
/// repeats and, over `n` repeats (`2n` for an odd number of columns),
/// runs right after each other column as often: the host's background
/// work after a run (its write-back, the page cache a kernel column's
/// direct I/O emptied) lands on every column alike. (Each repeat starting
/// one column further along kept the same neighbours: with five columns,
/// `softdep` ran after `ext4-nojournal` in four repeats of five.)
fn run_order(columns: usize, repeat: u32) -> impl Iterator<Item = usize> {
    let n = columns.max(1);
    let period = if n % 2 == 0 { n } else { 2 * n };
    let row = (repeat as usize).saturating_sub(1) % period;
    // 0, 1, n-1, 2, n-2, ...: the differences of neighbours all differ.
    let base = move |k: usize| if k % 2 == 1 { k.div_ceil(2) } else { (n - k / 2) % n };
    let at = move |k: usize| (base(k) + row) % n;
    (0..columns).map(move |k| if row < n { at(k) } else { at(columns - 1 - k) })
}

/// Gives back every block of the file at `path` and leaves it `size`
/// bytes long, sparse.
fn sparse_again(path: &Path, size: u64) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.set_len(0)?;
    file.set_len(size)
}

/// What every run of a sweep shares.
struct RunContext<'a> {
    plan: &'a Plan,
    target: &'a str,
    mountpoint: &'a Path,
    work: Option<&'a Work>,
    backing: Backing<'a>,
}

impl RunContext<'_> {
    /// One run of `column`: its two phases and how it ran.
    fn column(
        &self,
        column: &Column,
        size: u64,
        phase: &Run,
    ) -> anyhow::Result<(report::PhaseRun, report::PhaseRun, String)> {
        Ok(match column {
            Column::Iolab(policy) => self.iolab(*policy, size, phase)?,
            Column::Kernel(fs) => {
                let work = self.work.expect("GNU tar's archive is written when a kernel column runs");
                let (tar_run, rm_run, on) =
                    kernel::run_once(*fs, &self.backing, self.mountpoint, work, phase)?;
                (tar_run, rm_run, fs.how(&on))
            }
            Column::Dir(dir) => {
                let work = self.work.expect("GNU tar's archive is written when a --dir column runs");
                let (tar_run, rm_run, cold) = dir.run_once(work, phase)?;
                (tar_run, rm_run, dir.how(cold))
            }
        })
    }

    /// One run of iolab's file system under `policy`: a new file system,
    /// the tar phase, the rm phase; and how it ran.
    fn iolab(
        &self,
        policy: Policy,
        size: u64,
        phases: &Run,
    ) -> anyhow::Result<(report::PhaseRun, report::PhaseRun, String)> {
        let plan = self.plan;
        let cache_bytes = plan.cache_bytes;
        if let Some(disk) = &plan.disk {
            let (tar_run, rm_run) =
                disk.run_once(policy, size, cache_bytes, &plan.mkfs, &plan.tar, plan.copies, phases)?;
            let how = format!(
                "iolab's file system, policy {}, cache {}, in-process on {}: modeled disk time",
                policy.name(),
                plan.cache,
                disk.describe()
            );
            return Ok((tar_run, rm_run, how));
        }
        let (stack, _) =
            crate::fs::make(self.target, Some(size), &plan.mkfs, true, None, &BlockLog::default())?;
        stack.close()?;
        // Each run's file system is new: never unclean, nothing to force.
        let mount = Mount { policy, cache_bytes, direct: false, force: false, log: BlockLog::default() };
        let made = format!("iolab's file system, policy {}, cache {}", policy.name(), plan.cache);
        match (plan.driver, self.work) {
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
                let copies = plan.copies;
                let tar_done = in_process(self.target, &mount, None, |fs| {
                    extract_copies(fs, &plan.tar, copies, phases.phase("tar"))
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

fn extract_copies(fs: &dyn FileSystem, tar: &[u8], copies: u32, progress: &dyn Watch) -> anyhow::Result<()> {
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

fn remove_copies(fs: &dyn FileSystem, copies: u32, progress: &dyn Watch) -> anyhow::Result<()> {
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

    /// Every column runs once a repeat, and over as many repeats as
    /// columns each runs first once.
    #[test]
    fn each_column_runs_once_a_repeat_and_first_once_in_as_many_repeats() {
        for n in 1..=7 {
            let mut firsts = vec![0; n];
            for r in 1..=n as u32 {
                let mut order: Vec<usize> = super::run_order(n, r).collect();
                firsts[order[0]] += 1;
                order.sort_unstable();
                assert_eq!(order, (0..n).collect::<Vec<_>>(), "{n} columns, repeat {r}");
            }
            assert_eq!(firsts, vec![1; n], "{n} columns");
        }
    }

    /// Over a whole period (as many repeats as columns, twice that for
    /// an odd number), each column runs right after each other one as
    /// often; five columns, the rotation's way, ran one after the same
    /// one in every repeat it did not open.
    #[test]
    fn each_column_follows_each_other_as_often_over_a_period() {
        for n in 2..=7 {
            let period = if n % 2 == 0 { n } else { 2 * n };
            let mut after = vec![vec![0; n]; n];
            for r in 1..=period as u32 {
                let order: Vec<usize> = super::run_order(n, r).collect();
                for pair in order.windows(2) {
                    after[pair[1]][pair[0]] += 1;
                }
            }
            for (b, row) in after.iter().enumerate() {
                for (a, &count) in row.iter().enumerate() {
                    let want = if a == b { 0 } else { period / n };
                    assert_eq!(count, want, "{n} columns: {b} after {a}");
                }
            }
        }
    }

    /// 40 copies of a tree of 2,084 small files: the file system made on
    /// the default size has an inode for every entry (1 GiB had 65,536
    /// for 83,360 and the sweep ran out of them).
    #[test]
    fn the_default_size_holds_an_inode_for_every_entry() {
        let (copies, entries, data) = (40, 2084, 1_990_000);
        let size = super::default_size(copies, entries, data);
        let sb = ffs::geometry(size, 512, &ffs::MkfsOptions::default()).unwrap();
        assert!(sb.total_inodes() >= u64::from(copies) * entries, "{} inodes", sb.total_inodes());
    }

    /// A tree of large files is sized by its data.
    #[test]
    fn the_default_size_holds_the_data_twice_over() {
        assert!(super::default_size(3, 9, 125 << 20) >= 2 * 3 * (125 << 20));
    }
}
