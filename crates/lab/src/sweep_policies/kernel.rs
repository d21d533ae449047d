//! The kernel's file systems as columns of `iolab sweep policies`: each
//! run makes one (mkfs) on a loop device over the sweep's file (or on the
//! block device the sweep was given), mounts it, runs GNU tar (then,
//! mounted again with a cold cache, rm -rf), and unmounts, timed from the
//! mount to the end of the unmount, with the block device's own counters
//! (/sys/dev/block/MAJOR:MINOR/stat) for what it saw. And a directory a user
//! mounted (`--dir`), whose file system is reported as found.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Instant;

use anyhow::{bail, Context};

use super::gnu::{self, Work};
use super::programs::{find_program, run};
use super::watch;
use crate::UsageError;

/// A kernel file system and how it is made and mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFs {
    /// ext4 as made: a journal, metadata only (data=ordered).
    Ext4,
    /// ext4 journaling data too (data=journal).
    Ext4Journal,
    /// ext4 without a journal: the closest to FFS's async.
    Ext4NoJournal,
    /// ext4 mounted -o sync: every write synchronous, data included.
    Ext4Sync,
    Xfs,
    Btrfs,
}

pub const KERNEL_NAMES: &str = "ext4, ext4-journal, ext4-nojournal, ext4-sync, xfs, btrfs";

impl FromStr for KernelFs {
    type Err = String;

    fn from_str(s: &str) -> Result<KernelFs, String> {
        Ok(match s {
            "ext4" => KernelFs::Ext4,
            "ext4-journal" => KernelFs::Ext4Journal,
            "ext4-nojournal" => KernelFs::Ext4NoJournal,
            "ext4-sync" => KernelFs::Ext4Sync,
            "xfs" => KernelFs::Xfs,
            "btrfs" => KernelFs::Btrfs,
            other => {
                return Err(format!("--kernel: unknown file system '{other}'; choose from {KERNEL_NAMES}"))
            }
        })
    }
}

impl KernelFs {
    pub fn name(self) -> &'static str {
        match self {
            KernelFs::Ext4 => "ext4",
            KernelFs::Ext4Journal => "ext4-journal",
            KernelFs::Ext4NoJournal => "ext4-nojournal",
            KernelFs::Ext4Sync => "ext4-sync",
            KernelFs::Xfs => "xfs",
            KernelFs::Btrfs => "btrfs",
        }
    }

    /// The mkfs program and its arguments before the device.
    pub(crate) fn mkfs(self) -> (&'static str, &'static [&'static str]) {
        match self {
            KernelFs::Ext4 | KernelFs::Ext4Journal | KernelFs::Ext4Sync => ("mkfs.ext4", &["-q", "-F"]),
            KernelFs::Ext4NoJournal => ("mkfs.ext4", &["-q", "-F", "-O", "^has_journal"]),
            KernelFs::Xfs => ("mkfs.xfs", &["-q", "-f"]),
            KernelFs::Btrfs => ("mkfs.btrfs", &["-q", "-f"]),
        }
    }

    /// The type `mount -t` takes.
    pub(crate) fn fs_type(self) -> &'static str {
        match self {
            KernelFs::Xfs => "xfs",
            KernelFs::Btrfs => "btrfs",
            _ => "ext4",
        }
    }

    fn package(self) -> &'static str {
        match self {
            KernelFs::Xfs => "xfsprogs",
            KernelFs::Btrfs => "btrfs-progs",
            _ => "e2fsprogs",
        }
    }

    /// Mount options beyond the defaults.
    pub(crate) fn options(self) -> Option<&'static str> {
        match self {
            KernelFs::Ext4Journal => Some("data=journal"),
            KernelFs::Ext4Sync => Some("sync"),
            _ => None,
        }
    }

    /// How the column's file system was made and mounted, for the report.
    pub fn how(self, on: &str) -> String {
        let (program, args) = self.mkfs();
        let options = self.options().map_or("defaults".to_string(), |o| format!("-o {o}"));
        format!("{program} {} on {on}, mounted {options}; GNU tar and rm", args.join(" "))
    }
}

/// Everything the kernel columns need, checked before the sweep writes
/// anything: root (loop devices, mounts) and each program, named with the
/// package that has it.
pub fn check_tools(kernel: &[KernelFs], loop_device: bool) -> Result<(), UsageError> {
    if kernel.is_empty() {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(UsageError(
            "--kernel needs root: it makes file systems on loop devices and mounts them; run as root or drop --kernel"
                .into(),
        ));
    }
    let mut needed: Vec<(&str, &str)> = vec![("mount", "mount"), ("umount", "mount")];
    if loop_device {
        needed.push(("losetup", "mount"));
    }
    needed.extend(kernel.iter().map(|k| (k.mkfs().0, k.package())));
    for (program, package) in needed {
        if find_program(program).is_none() {
            return Err(UsageError(format!(
                "--kernel: {program} is not installed; install it (apt-get install {package}) or leave that file system out"
            )));
        }
    }
    Ok(())
}

/// A loop device over a file, detached when dropped.
pub(crate) struct LoopDevice {
    pub(crate) device: String,
}

impl LoopDevice {
    /// With direct I/O (no second page cache under the file system's), or
    /// buffered where the file's own file system cannot do direct I/O;
    /// says which.
    pub(crate) fn attach(file: &Path) -> anyhow::Result<(LoopDevice, bool)> {
        LoopDevice::attach_with(file, None)
    }

    /// [`LoopDevice::attach`] with logical sectors of `sector_bytes`
    /// (losetup's default, 512, when `None`).
    pub(crate) fn attach_with(file: &Path, sector_bytes: Option<u32>) -> anyhow::Result<(LoopDevice, bool)> {
        let file = file.to_str().context("a loop device's file has a name that is not UTF-8")?;
        let sector = sector_bytes.map(|n| n.to_string());
        for direct in [true, false] {
            let mut args = vec!["--find", "--show"];
            if let Some(sector) = &sector {
                args.extend(["--sector-size", sector]);
            }
            if direct {
                args.push("--direct-io=on");
            }
            args.push(file);
            let path = find_program("losetup").unwrap_or_else(|| PathBuf::from("losetup"));
            let out = Command::new(path).args(&args).output().context("cannot run losetup")?;
            let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !device.is_empty() {
                return Ok((LoopDevice { device }, direct));
            }
            if !direct {
                bail!("losetup {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
            }
        }
        unreachable!("the loop returns or fails on its buffered try")
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = run("losetup", &["-d", &self.device]);
    }
}

/// A mount, unmounted when dropped (if the run failed before it did).
pub(crate) struct Mounted<'a> {
    mountpoint: &'a Path,
    mounted: bool,
}

impl Mounted<'_> {
    /// The mount at `mountpoint`, made by the caller.
    pub(crate) fn new(mountpoint: &Path) -> Mounted<'_> {
        Mounted { mountpoint, mounted: true }
    }

    pub(crate) fn unmount(mut self) -> anyhow::Result<()> {
        self.mounted = false;
        run("umount", &[&self.mountpoint.display().to_string()])
    }
}

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        if self.mounted {
            let _ = run("umount", &["-l", &self.mountpoint.display().to_string()]);
        }
    }
}

/// A block device's counters: write requests, sectors written, flushes
/// (the kernel's /sys/dev/block/MAJOR:MINOR/stat, fields 5, 7 and 16).
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskStat {
    writes: u64,
    sectors: u64,
    flushes: u64,
}

impl DiskStat {
    /// The counters of the block device `major:minor`, if it has any.
    pub fn of_device(major: u32, minor: u32) -> Option<DiskStat> {
        let text = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
        DiskStat::parse(&text)
    }

    fn of_path(device: &str) -> Option<DiskStat> {
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata(device).ok()?.rdev();
        DiskStat::of_device(libc::major(rdev), libc::minor(rdev))
    }

    fn parse(text: &str) -> Option<DiskStat> {
        let f: Vec<u64> = text.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
        Some(DiskStat { writes: *f.get(4)?, sectors: *f.get(6)?, flushes: f.get(15).copied().unwrap_or(0) })
    }

    /// What happened between `self` and `after`, as a phase's counters.
    pub fn phase(self, after: DiskStat, seconds: f64) -> report::PhaseRun {
        report::PhaseRun {
            seconds,
            blocks_written: after.sectors.saturating_sub(self.sectors) * 512 / 4096,
            write_requests: after.writes.saturating_sub(self.writes),
            sync_writes: None,
            flushes: after.flushes.saturating_sub(self.flushes),
            log_bytes: None,
        }
    }
}

/// Where a kernel column's file systems are made.
pub enum Backing<'a> {
    /// The sweep's file, through a loop device.
    File(&'a Path),
    /// A block device the user named.
    Device(&'a str),
}

/// One run of a kernel column: a new file system, the tar phase, a cold
/// mount, the rm phase. Returns the two phases and how the device was
/// reached (for the column's description).
pub fn run_once(
    fs: KernelFs,
    backing: &Backing,
    mountpoint: &Path,
    work: &Work,
    phases: &watch::Run,
) -> anyhow::Result<(report::PhaseRun, report::PhaseRun, String)> {
    // A loop device per phase: detaching drops its cache, so the rm phase
    // starts cold.
    let attach = || -> anyhow::Result<(Option<LoopDevice>, String, String)> {
        Ok(match backing {
            Backing::File(file) => {
                let (device, direct) = LoopDevice::attach(file)?;
                let how = if direct { "a loop device (direct I/O)" } else { "a loop device (buffered)" };
                let path = device.device.clone();
                (Some(device), path, format!("{how} over the sweep's file"))
            }
            Backing::Device(path) => (None, path.to_string(), (*path).to_string()),
        })
    };
    let (device, path, on) = attach()?;
    let (program, args) = fs.mkfs();
    let mut mkfs_args: Vec<&str> = args.to_vec();
    mkfs_args.push(&path);
    run(program, &mkfs_args)?;
    let tar = timed_phase(fs, &path, mountpoint, |dir| gnu::extract_copies(work, dir, phases.phase("tar")))?;
    drop(device);
    let (device, path, _) = attach()?;
    let rm = timed_phase(fs, &path, mountpoint, |dir| gnu::remove_copies(work, dir, phases.phase("rm")))?;
    drop(device);
    Ok((tar, rm, on))
}

/// Mounts `device`, runs `phase` on the mount, unmounts, all on the clock.
fn timed_phase(
    fs: KernelFs,
    device: &str,
    mountpoint: &Path,
    phase: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<report::PhaseRun> {
    let before = DiskStat::of_path(device).unwrap_or_default();
    let start = Instant::now();
    let shown = mountpoint.display().to_string();
    let mut args = vec![device, shown.as_str()];
    if let Some(options) = fs.options() {
        args.extend(["-o", options]);
    }
    run("mount", &args)?;
    let mounted = Mounted::new(mountpoint);
    phase(mountpoint)?;
    mounted.unmount()?;
    let seconds = start.elapsed().as_secs_f64();
    let after = DiskStat::of_path(device).unwrap_or_default();
    Ok(before.phase(after, seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_parses_and_names_itself() {
        for name in KERNEL_NAMES.split(", ") {
            assert_eq!(name.parse::<KernelFs>().unwrap().name(), name);
        }
        assert!("ext3".parse::<KernelFs>().unwrap_err().contains("choose from"));
    }

    #[test]
    fn a_disk_stat_line_gives_writes_sectors_and_flushes() {
        let line = "  10 0 80 5   7 1 64 9   0 20 30   0 0 0 0   3 4\n";
        let stat = DiskStat::parse(line).unwrap();
        let run = DiskStat::default().phase(stat, 1.0);
        assert_eq!((run.write_requests, run.blocks_written, run.flushes), (7, 8, 3));
        assert_eq!(run.sync_writes, None);
    }
}
