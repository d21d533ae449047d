//! iolab's file system mounted in-process (no FUSE, no kernel) for a
//! piece of work timed from the mount to the end of the unmount, so the
//! figure is the file system's own cost under its policy: what `iolab fs
//! untar`, `fs rm`, `fs tree` and the policy sweep run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use ffs::{Ffs, MountOptions};
use fsapi::{Errno, FileSystem};

use super::{open, refused, syncer, unclean, Access, Image, Mount};

/// What an in-process run leaves to report.
pub struct Done {
    pub unmounted: ffs::Unmounted,
    pub seconds: f64,
    pub media: Vec<device::Medium>,
}

/// Opens the target, drops its page cache, then mounts, runs `work` (with
/// the mount's syncer beside it) and unmounts on the clock. The unmount
/// writes everything back whether the work succeeded or not, so a failed
/// run leaves a clean image. With `stop` (set by an interrupt) the work's
/// next call fails with EINTR once it is set, the unmount writes
/// everything back as at the end, and the result is
/// [`crate::Interrupted`].
pub fn in_process(
    target: &str,
    mount: &Mount,
    stop: Option<&AtomicBool>,
    work: impl FnOnce(&dyn FileSystem) -> anyhow::Result<()>,
) -> anyhow::Result<Done> {
    mounted(target, mount, stop, |fs, image| {
        // The syncer runs beside the work, as under a mount.
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let syncer = scope.spawn(|| syncer(fs, image, &done, || {}));
            let worked = match stop {
                Some(stop) => work(&fsapi::Interruptible::new(&**fs, stop)),
                None => work(&**fs),
            };
            done.store(true, Ordering::Relaxed);
            syncer.thread().unpark();
            worked
        })
    })
}

/// Opens the target, drops its page cache, then mounts, runs `work` with
/// the mounted file system, and unmounts, all on the clock (the unmount
/// runs whether the work succeeded or not). `work` must leave no other
/// holder of the file system behind. When `stop` was set (an interrupt)
/// and the unmount succeeded, the result is [`crate::Interrupted`].
pub fn mounted(
    target: &str,
    mount: &Mount,
    stop: Option<&AtomicBool>,
    work: impl FnOnce(&Arc<Ffs>, Image<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<Done> {
    let stack = open(target, Access { direct: mount.direct, ..Access::default() }, &mount.log)?;
    let device = Arc::clone(stack.device());
    device.drop_cache().with_context(|| format!("{target}: cannot drop its page cache"))?;
    let media = device.media();
    let host = Image { target, bytes: device.size_bytes() };
    let start = Instant::now();
    let options = MountOptions {
        policy: mount.policy,
        cache_bytes: mount.cache_bytes,
        unclean: unclean(mount.force),
        ..Default::default()
    };
    let fs = Arc::new(Ffs::mount(device, &options).map_err(|e| refused(e, target, &mount.log))?);
    if let Some(passed_over) = fs.passed_over() {
        crate::say::warning(format!("{passed_over}; the mount writes its next superblock over that slot"));
    }
    if let Some(unclean) = fs.unclean() {
        crate::say::warning(unclean.warning(target));
    }
    let worked = work(&fs, host);
    // Asked before the unmount: a call that failed with ENOSPC failed for
    // want of room in iolab's file system, or on the host under its image.
    let failure = fs.failure();
    let fs =
        Arc::try_unwrap(fs).map_err(|_| anyhow::anyhow!("the file system is still in use after the work"))?;
    let unmounted = fs.unmount().context("cannot write the file system back");
    let seconds = start.elapsed().as_secs_f64();
    stack.close()?;
    if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        unmounted.map_err(|e| host.advise(e))?;
        return Err(crate::Interrupted(format!(
            "interrupted: the work stopped part way; {target} was unmounted cleanly, with what was done until then"
        ))
        .into());
    }
    worked.map_err(|e| match failure {
        Some(f) if f.out_of_space => host.full(&e),
        _ => explain(e),
    })?;
    Ok(Done { unmounted: unmounted.map_err(|e| host.advise(e))?, seconds, media })
}

/// Runs `work` in a new directory `tag` under `dir` (a directory of any
/// mounted file system, reached through system calls), removed after;
/// returns where `dir` really is and the mount it is on. A usage error
/// when `dir` is on no mount iolab can name.
pub fn in_directory(
    dir: &std::path::Path,
    tag: &str,
    work: impl FnOnce(&dyn FileSystem) -> anyhow::Result<()>,
) -> anyhow::Result<(std::path::PathBuf, crate::mounts::Mount)> {
    let (real, mount) = crate::mounts::mount_of(dir).map_err(crate::UsageError)?;
    let base = real.join(tag);
    std::fs::create_dir(&base).with_context(|| format!("{}: cannot make it", base.display()))?;
    let worked = fsapi::HostFs::new(&base)
        .with_context(|| format!("{}: cannot open it", base.display()))
        .and_then(|fs| work(&fs));
    let removed = std::fs::remove_dir(&base).with_context(|| format!("{}: cannot remove it", base.display()));
    let worked = worked.map_err(|e| {
        if !out_of_room(&e) {
            return e;
        }
        anyhow::anyhow!(
            "{}: the file system holding {} is full; free space there or give a directory on another",
            crate::message(&e),
            real.display()
        )
    });
    worked.and(removed)?;
    Ok((real, mount))
}

/// A call that failed with ENOSPC in iolab's file system (its host had
/// room: [`mounted`] tells): the fix.
fn explain(e: anyhow::Error) -> anyhow::Error {
    if out_of_room(&e) {
        return anyhow::anyhow!(
            "{}: the file system is full; make it larger (iolab fs mkfs --size) or extract less",
            crate::message(&e)
        );
    }
    e
}

/// Whether a tree workload's call failed with ENOSPC.
fn out_of_room(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<workloads::tree::TreeError>(),
            Some(workloads::tree::TreeError::Call { errno, .. }) if *errno == Errno::NOSPC
        )
    })
}
