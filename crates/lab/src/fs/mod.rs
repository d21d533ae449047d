//! iolab's file system on a target: how an image is opened (with its
//! block log, if it has one) and refused, made, served through FUSE with
//! its syncer, and mounted in-process for a timed piece of work
//! ([`runner`]).

pub mod cpus;
pub mod runner;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use device::LockKind;
use ffs::{Ffs, MkfsOptions};
use fsapi::FileSystem;

use crate::stack::{self, Stack};
use crate::UsageError;

/// The file system behind iolab's block log, as `iolab run --log` puts a
/// target behind it (`--block-log`, `--block-log-device`).
#[derive(Clone, Debug, Default)]
pub struct BlockLog {
    /// The log's mode; `None`: no block log.
    pub mode: Option<blocklog::Mode>,
    /// The log is on this file or device, not inside the target.
    pub device: Option<PathBuf>,
}

/// How the file system is mounted (in-process, or served through FUSE).
#[derive(Clone, Debug)]
pub struct Mount {
    /// The metadata policy.
    pub policy: ffs::Policy,
    /// The buffer cache's size.
    pub cache_bytes: u64,
    /// Open the target with O_DIRECT.
    pub direct: bool,
    /// Mount an image that is not clean as it is, with a warning.
    pub force: bool,
    pub log: BlockLog,
}

/// How a command opens its target.
#[derive(Clone, Copy, Default)]
pub struct Access {
    /// The command only reads: the target is opened read-only under a
    /// shared lock, with a scratch view on top for the mount's and the
    /// log replay's writes.
    pub read_only: bool,
    pub direct: bool,
    /// mkfs: the size of a file to create.
    pub create_bytes: Option<u64>,
    /// mkfs: format a new block log (of this size, or the default) where
    /// the target holds none; `force` lets it replace one.
    pub format_log: Option<Option<u64>>,
    pub force: bool,
}

/// Opens `target` for a command, behind the block log where asked. A
/// target holding a block log that the command was not told of is named
/// (its file system sits behind the log's header) rather than misread.
pub fn open(target: &str, access: Access, log: &BlockLog) -> anyhow::Result<Stack> {
    // A file system is opened where it is: nothing is made for it here
    // (`fs mkfs` makes one), so the stack's advice to give a size is not.
    if access.create_bytes.is_none() && !target.contains(':') && !std::path::Path::new(target).exists() {
        return Err(UsageError(format!(
            "{target} does not exist: give the image or device holding the file system (`iolab fs mkfs \
             {target} --size SIZE` makes one)"
        ))
        .into());
    }
    let lock = if access.read_only { LockKind::Shared } else { LockKind::Exclusive };
    let options = stack::OpenOptions {
        direct: access.direct,
        read_only: access.read_only,
        sector_bytes: None,
        create_bytes: access.create_bytes,
        lock: stack::Lock::Require(lock),
    };
    let mut stack = Stack::open(target, &options)?;
    let Some(mode) = log.mode else {
        if access.format_log.is_none()
            && device::signature::probe(stack.device().as_ref())? == Some("iolab block log")
        {
            stack.discard();
            return Err(UsageError(format!(
                "{target}: holds an iolab block log; pass --block-log MODE (log, async or sync) to replay it and \
                 use the file system behind it"
            ))
            .into());
        }
        return Ok(if access.read_only { stack.scratch() } else { stack });
    };
    if access.read_only {
        stack = stack.scratch();
    }
    let options = stack::LogOptions {
        mode,
        log_bytes: access.format_log.flatten(),
        log_device: log.device.clone(),
        home_writes: blocklog::HomeWrites::AtCheckpoint,
        direct: access.direct,
        force: access.force,
        must_exist: access.format_log.is_none(),
        read_only: access.read_only,
    };
    match stack.plan_log(&options) {
        Ok(plan) => stack.push_log(plan, &options),
        Err(e) => {
            stack.discard();
            Err(e)
        }
    }
}

/// An image a command writes, for the advice when the host file system
/// holding it runs out of room.
#[derive(Clone, Copy)]
pub struct Image<'a> {
    pub target: &'a str,
    pub bytes: u64,
}

impl Image<'_> {
    /// What is full and what to do: iolab's file system is not full, the
    /// host's is, under a sparse image that takes room as it is written.
    fn host_full(&self) -> String {
        format!(
            "the host file system holding {} is full (ENOSPC), not iolab's file system in it: the image is a \
             sparse file that takes room as it is written, up to {}. Free space on that file system, or make the \
             image on one with room",
            self.target,
            report::human_bytes(self.bytes)
        )
    }

    /// `e`, which came down to the host having no room, with that said.
    pub fn full(&self, e: &anyhow::Error) -> anyhow::Error {
        anyhow::anyhow!("{}: {}", crate::message(e), self.host_full())
    }

    /// `e`, with [`Image::full`]'s words where it comes down to the host
    /// having no room.
    pub fn advise(&self, e: anyhow::Error) -> anyhow::Error {
        let host_out_of_space = e.chain().any(|cause| {
            cause.downcast_ref::<ffs::FsError>().is_some_and(ffs::FsError::is_out_of_space)
                || cause
                    .downcast_ref::<device::DeviceError>()
                    .is_some_and(device::DeviceError::is_out_of_space)
        });
        if host_out_of_space {
            self.full(&e)
        } else {
            e
        }
    }
}

/// What a mount that writes does with an image that is not clean:
/// refuses it (the default), or mounts it as it is with `--force`.
pub fn unclean(force: bool) -> ffs::Unclean {
    if force {
        ffs::Unclean::Force
    } else {
        ffs::Unclean::Refuse
    }
}

/// A mount's error, an unclean image's refusal told as the usage error it
/// is (exit status 2), with the fsck command for `target` as given.
pub fn refused(e: ffs::FsError, target: &str, log: &BlockLog) -> anyhow::Error {
    let ffs::FsError::Unclean(image) = e else { return e.into() };
    let mut text = image.refusal(target);
    if let Some(mode) = log.mode {
        // fsck reaches the file system behind the block log only when told.
        text.push_str(&format!(" (with --block-log {mode}, as here)"));
    }
    UsageError(text).into()
}

/// A mount's syncer, until `done` (`Ffs::syncer`); `every` runs ten
/// times a second. A failure is told once: the file system refuses every
/// change after it.
pub fn syncer(fs: &Ffs, image: Image<'_>, done: &AtomicBool, every: impl FnMut()) {
    fs.syncer(done, every, |e| {
        let e = image.advise(e.into());
        crate::say::warning(format!("the syncer's write-back failed: {}", crate::message(&e)));
    });
}

/// Makes a file system on `target` after every check (a target holding
/// data needs `force`); returns the open stack and the superblock made.
pub fn make(
    target: &str,
    create_bytes: Option<u64>,
    options: &MkfsOptions,
    force: bool,
    block_log_bytes: Option<u64>,
    log: &BlockLog,
) -> anyhow::Result<(Stack, ffs::format::Superblock)> {
    let access = Access { create_bytes, format_log: Some(block_log_bytes), force, ..Access::default() };
    let stack = open(target, access, log)?;
    let device = Arc::clone(stack.device());
    let checked = stack::check_writable(&stack, force).and_then(|()| {
        ffs::geometry(device.size_bytes(), device.sector_bytes(), options)
            .map_err(|e| UsageError(format!("{e}")).into())
    });
    if let Err(e) = checked {
        stack.discard();
        return Err(e);
    }
    let image = Image { target, bytes: device.size_bytes() };
    let sb = ffs::mkfs(&device, options).map_err(|e| image.advise(e.into()))?;
    Ok((stack, sb))
}

/// Serves `fs` at `mountpoint` until unmounted, with the syncer writing
/// buffers dirty for 30 s back (and under `log` committing every second),
/// and Ctrl-C (or SIGTERM) unmounting.
pub fn serve(
    fs: &Arc<Ffs>,
    image: Image<'_>,
    mountpoint: &Path,
    serving: fusefront::Serving,
    mounted: impl FnOnce(),
) -> std::io::Result<fusefront::Served> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))?;
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let syncer = scope.spawn(|| {
            syncer(fs, image, &done, || {
                if interrupted.swap(false, Ordering::Relaxed) {
                    if let Err(e) = fusefront::unmount(mountpoint) {
                        crate::say::warning(format!("cannot unmount {}: {e}", mountpoint.display()));
                    }
                }
            })
        });
        let fs: Arc<dyn FileSystem> = Arc::clone(fs) as Arc<dyn FileSystem>;
        let result = fusefront::serve(fs, mountpoint, serving, mounted);
        done.store(true, Ordering::Relaxed);
        // Not a tenth of a second more: the syncer ends now.
        syncer.thread().unpark();
        result
    })
}

/// Opens `target`, mounts it (on `cpus` when given) and serves it at
/// `mountpoint` until unmounted (`mounted` runs once it is); then writes
/// it back. Returns what the unmount and the FUSE session counted.
pub fn mount_and_serve(
    target: &str,
    mount: &Mount,
    mountpoint: &Path,
    cpus: Option<&[usize]>,
    serving: fusefront::Serving,
    mounted: impl FnOnce(),
) -> anyhow::Result<(ffs::Unmounted, fusefront::Served)> {
    use anyhow::Context;
    let stack = open(target, Access { direct: mount.direct, ..Access::default() }, &mount.log)?;
    if let Some(cpus) = cpus {
        cpus::pin_to(cpus)?;
    }
    let options = ffs::MountOptions {
        policy: mount.policy,
        cache_bytes: mount.cache_bytes,
        unclean: unclean(mount.force),
        ..Default::default()
    };
    let image = Image { target, bytes: stack.device().size_bytes() };
    let fs = Ffs::mount(Arc::clone(stack.device()), &options)
        .map_err(|e| image.advise(refused(e, target, &mount.log)))?;
    let fs = Arc::new(fs);
    if let Some(passed_over) = fs.passed_over() {
        crate::say::warning(format!(
            "{passed_over}; this mount writes its next superblock over that slot (run `iolab fs fsck -n` after \
             unmounting to check the rest)"
        ));
    }
    if let Some(unclean) = fs.unclean() {
        crate::say::warning(unclean.warning(target));
    }
    let served = serve(&fs, image, mountpoint, serving, mounted);
    let fs = Arc::try_unwrap(fs)
        .map_err(|_| anyhow::anyhow!("the file system is still in use after the session ended"))?;
    let unmounted = fs.unmount().context("cannot write the file system back").map_err(|e| image.advise(e))?;
    stack.close()?;
    let served = served.with_context(|| format!("{}: the FUSE session failed", mountpoint.display()))?;
    Ok((unmounted, served))
}

/// fsck of the file system on `target` (behind its block log as `log`
/// says), repairing as `repair` allows; a check that only reads changes
/// nothing (its log replay goes to a scratch view).
/// `tell` hears each step of the check as it begins.
pub fn fsck(
    target: &str,
    repair: ffs::fsck::Repair,
    log: &BlockLog,
    tell: &dyn Fn(ffs::fsck::Step),
) -> anyhow::Result<ffs::fsck::Report> {
    let read_only = repair == ffs::fsck::Repair::No;
    let stack = open(target, Access { read_only, ..Access::default() }, log)?;
    let report = ffs::fsck::fsck_telling(stack.device(), repair, tell);
    stack.close()?;
    Ok(report?)
}

/// The file system on `target` mounted over a scratch view, to look
/// inside without changing it (an unclean image is shown as it is); the
/// stack must outlive the mount.
pub fn look_inside(target: &str, log: &BlockLog) -> anyhow::Result<(Stack, Ffs)> {
    let stack = open(target, Access { read_only: true, ..Access::default() }, log)?;
    let options = ffs::MountOptions { unclean: ffs::Unclean::ReadOnly, ..Default::default() };
    let fs = Ffs::mount(Arc::clone(stack.device()), &options)?;
    if let Some(passed_over) = fs.passed_over() {
        crate::say::warning(passed_over.to_string());
    }
    if let Some(unclean) = fs.unclean() {
        crate::say::warning(unclean.warning(target));
    }
    Ok((stack, fs))
}
