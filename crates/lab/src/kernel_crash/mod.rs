//! `iolab crash --kernel FS`: the kernel's own file systems crashed from
//! user space, with no kernel module and no device-mapper.
//!
//! The file system is made with its own mkfs on an image file, which
//! becomes a recording device served as a one-file FUSE file system
//! ([`image`]); a loop device attached to that file carries every block
//! write and flush of the kernel file system mounted on it to the
//! recording, in the order they arrived. The fs-* stacks' mix of
//! operations runs in the mount through [`fsapi::HostFs`], the history's
//! length taken at each fsync. Then every crash state of the history (one
//! after each flush, and sampled ones between with dropped, reordered and
//! torn writes, as for iolab's own stacks) is written to an image file in
//! memory and checked as an administrator would after the crash
//! ([`check`]): mounted (the journal replayed), every file fsync'd before
//! the crash read back, unmounted, and the file system's own checker run
//! read-only; without a journal, its preen first.
//!
//! The limits (docs/crash.md, "The kernel's file systems"): the loop
//! driver advertises no FUA, so these are the states of a disk with a
//! write-back cache and no FUA; a write that arrives after the flush it
//! was issued before counts as covered by it.

mod check;
mod image;
mod record;
mod spec;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::Context;
use workloads::fscrash::FsCrashReport;

pub use self::spec::{default_size, KernelCrash, KEPT_IMAGES};
pub use crate::sweep_policies::kernel::{KernelFs, KERNEL_NAMES};
use crate::UsageError;

/// How the run went, besides what the states showed.
#[derive(Clone, Debug, Default)]
pub struct KernelRun {
    /// The loop device reached the FUSE file with direct I/O (else through
    /// the page cache, write-through).
    pub direct_io: bool,
    /// mkfs's command line.
    pub mkfs: String,
    pub mount_options: String,
    pub record_seconds: f64,
    pub check_seconds: f64,
}

/// Records the mix on `crash.fs` and checks every crash state, telling
/// `progress` the states checked and their number after each.
pub fn crash_kernel(
    crash: &KernelCrash,
    progress: &dyn Fn(u64, u64),
) -> anyhow::Result<(FsCrashReport, KernelRun)> {
    check_crash(crash)?;
    let dir = scratch_dir()?;
    let start = Instant::now();
    let recorded = record::record(crash, dir.path())?;
    let mut run = KernelRun {
        direct_io: recorded.direct_io,
        mkfs: recorded.mkfs.clone(),
        mount_options: crash.mount_options.clone().unwrap_or_else(|| "defaults".into()),
        record_seconds: start.elapsed().as_secs_f64(),
        ..KernelRun::default()
    };
    if crash.stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
        return Err(crate::Interrupted("interrupted after the recording; no state was checked".into()).into());
    }
    let start = Instant::now();
    let report = check::check_states(crash, recorded, dir.path(), progress)?;
    run.check_seconds = start.elapsed().as_secs_f64();
    Ok((report, run))
}

/// What the run refuses before it makes anything.
fn check_crash(crash: &KernelCrash) -> Result<(), UsageError> {
    crate::sweep_policies::kernel::check_tools(&[crash.fs], true)?;
    if !matches!(crash.sector_bytes, 512 | 4096) {
        return Err(UsageError(format!("--sector-size {}: give 512 or 4096", crash.sector_bytes)));
    }
    if crash.size_bytes % u64::from(crash.sector_bytes) != 0 {
        return Err(UsageError(format!(
            "--size {}: give a multiple of the sector ({} bytes), e.g. 64m",
            crash.size_bytes, crash.sector_bytes
        )));
    }
    if let Some(dir) = &crash.keep_images {
        if !dir.is_dir() {
            return Err(UsageError(format!(
                "--keep-images {}: not a directory; make it first (mkdir)",
                dir.display()
            )));
        }
    }
    if crash.operations == 0 || crash.fsync_every == 0 {
        return Err(UsageError("--transactions and --sync-every must be at least 1".into()));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(UsageError(
            "--kernel serves the image through FUSE, and this machine has no /dev/fuse (modprobe fuse)"
                .into(),
        ));
    }
    Ok(())
}

/// A directory for the images, the FUSE mount and the file system's
/// mount: in memory (/dev/shm) where there is one.
fn scratch_dir() -> anyhow::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let parent = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    tempfile::Builder::new()
        .prefix("iolab-kcrash.")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot make a scratch directory in {}", parent.display()))
}
