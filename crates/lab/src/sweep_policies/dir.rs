//! A directory on a file system the user mounted, as a column of `iolab
//! sweep policies` (`--dir DIR`): GNU tar and rm run in a new directory
//! under it (removed at the end), each phase ended by syncfs(2) on the
//! clock. Its file system cannot be made anew per run, nor unmounted: the
//! report says so, with the file system's type, source and options as
//! /proc/self/mountinfo gives them. Before each rm phase the kernel's
//! caches are dropped (root only; otherwise the column says its cache was
//! warm).

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use super::gnu::{self, Work};
use super::kernel::DiskStat;
use super::watch;
use crate::mounts::{mount_of, Mount};
use crate::UsageError;

/// The directory and the mount it is on.
pub struct UserDir {
    path: PathBuf,
    mount: Mount,
}

impl UserDir {
    /// Finds the mount `path` is on; a missing path or one that is not a
    /// directory is a usage error.
    pub fn find(path: &Path) -> Result<UserDir, UsageError> {
        let (real, mount) = mount_of(path)
            .map_err(|e| UsageError(format!("--dir {}: {e}; name a directory to work in", path.display())))?;
        if !real.is_dir() {
            return Err(UsageError(format!("--dir {}: not a directory", path.display())));
        }
        Ok(UserDir { path: real, mount })
    }

    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    pub fn how(&self, cold: bool) -> String {
        let cache = if cold {
            "caches dropped before each rm phase"
        } else {
            "caches NOT dropped (not root): the rm phase starts warm"
        };
        format!(
            "a directory on {}, made before the sweep and not remade per run; GNU tar and rm, each phase ended by \
             syncfs; the device's counters count whatever else wrote to it; {cache}",
            self.mount.describe()
        )
    }

    /// One run: a work directory, the tar phase, caches dropped, the rm
    /// phase, the work directory removed. Says whether the cache was
    /// dropped.
    pub fn run_once(
        &self,
        work: &Work,
        phases: &watch::Run,
    ) -> anyhow::Result<(report::PhaseRun, report::PhaseRun, bool)> {
        let base = self.path.join(format!("iolab-policies-{}", std::process::id()));
        std::fs::create_dir(&base).with_context(|| format!("{}: cannot make it", base.display()))?;
        let result = (|| {
            let tar = self.timed(&base, |dir| gnu::extract_copies(work, dir, phases.phase("tar")))?;
            let cold = drop_caches();
            let rm = self.timed(&base, |dir| gnu::remove_copies(work, dir, phases.phase("rm")))?;
            Ok((tar, rm, cold))
        })();
        let _ = std::fs::remove_dir_all(&base);
        result
    }

    fn timed(
        &self,
        base: &Path,
        phase: impl FnOnce(&Path) -> anyhow::Result<()>,
    ) -> anyhow::Result<report::PhaseRun> {
        let stat = || DiskStat::of_device(self.mount.device.0, self.mount.device.1).unwrap_or_default();
        let before = stat();
        let start = Instant::now();
        phase(base)?;
        syncfs(base)?;
        let seconds = start.elapsed().as_secs_f64();
        Ok(before.phase(stat(), seconds))
    }
}

fn syncfs(dir: &Path) -> anyhow::Result<()> {
    let handle = std::fs::File::open(dir).with_context(|| format!("{}: cannot open it", dir.display()))?;
    // SAFETY: syncfs on a descriptor this function owns.
    if unsafe { libc::syncfs(handle.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("{}: syncfs", dir.display()));
    }
    Ok(())
}

/// Writes dirty data back and drops the kernel's page, dentry and inode
/// caches, where this process may (root); says whether it did.
fn drop_caches() -> bool {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_a_usage_error() {
        let err = UserDir::find(Path::new("/nonexistent/iolab")).err().unwrap();
        assert!(err.0.contains("--dir /nonexistent/iolab"), "{}", err.0);
    }
}
