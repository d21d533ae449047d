//! What every `fs` command shares: how an image is opened (with its block
//! log, if it has one) and refused, what a mount may go on over, and the
//! syncer a mounted image runs.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;
use device::LockKind;
use ffs::Ffs;

use lab::stack::{self, Stack};
use crate::UsageError;
/// The file system behind iolab's block log, as `iolab run --log` puts a
/// target behind it.
#[derive(Debug, Default, Args)]
pub struct BlockLogArgs {
    /// Put the file system behind iolab's block log in this mode (log:
    /// writes committed through the log at each flush; async; sync). mkfs
    /// formats the log; every other command replays it first (a command
    /// that only reads replays it into memory, leaving the target as it is).
    #[arg(long, value_name = "MODE")]
    pub block_log: Option<blocklog::Mode>,
    /// With --block-log: the log is on this file or device, not inside the target.
    #[arg(long, value_name = "PATH", requires = "block_log")]
    pub block_log_device: Option<PathBuf>,
}

/// How a command opens its target.
#[derive(Clone, Copy, Default)]
pub(crate) struct Access {
    /// The command only reads: the target is opened read-only under a
    /// shared lock, with a scratch view on top for the mount's and the
    /// log replay's writes.
    pub(crate) read_only: bool,
    pub(crate) direct: bool,
    /// mkfs: the size of a file to create.
    pub(crate) create_bytes: Option<u64>,
    /// mkfs: format a new block log (of this size, or the default) where
    /// the target holds none; `force` lets it replace one.
    pub(crate) format_log: Option<Option<u64>>,
    pub(crate) force: bool,
}

/// Opens `target` for a command, behind the block log where asked. A
/// target holding a block log that the command was not told of is named
/// (its file system sits behind the log's header) rather than misread.
pub(crate) fn open(target: &str, access: Access, log: &BlockLogArgs) -> anyhow::Result<Stack> {
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
    let Some(mode) = log.block_log else {
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
        log_device: log.block_log_device.clone(),
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
pub(crate) struct Image<'a> {
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
    pub(crate) fn full(&self, e: &anyhow::Error) -> anyhow::Error {
        anyhow::anyhow!("{}: {}", crate::message(e), self.host_full())
    }

    /// `e`, with [`Image::full`]'s words where it comes down to the host
    /// having no room.
    pub(crate) fn advise(&self, e: anyhow::Error) -> anyhow::Error {
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
pub(crate) fn unclean(force: bool) -> ffs::Unclean {
    if force {
        ffs::Unclean::Force
    } else {
        ffs::Unclean::Refuse
    }
}

/// A mount's error, an unclean image's refusal told as the usage error it
/// is (exit status 2), with the fsck command for `target` as given.
pub(crate) fn refused(e: ffs::FsError, target: &str, log: &BlockLogArgs) -> anyhow::Error {
    let ffs::FsError::Unclean(image) = e else { return e.into() };
    let mut text = image.refusal(target);
    if let Some(mode) = log.block_log {
        // fsck reaches the file system behind the block log only when told.
        text.push_str(&format!(" (with --block-log {mode}, as here)"));
    }
    UsageError(text).into()
}

/// A mount's syncer, until `done` (`Ffs::syncer`); `every` runs ten
/// times a second. A failure is told once: the file system refuses every
/// change after it.
pub(crate) fn syncer(fs: &Ffs, image: Image<'_>, done: &AtomicBool, every: impl FnMut()) {
    fs.syncer(done, every, |e| {
        let e = image.advise(e.into());
        eprintln!("iolab: warning: the syncer's write-back failed: {}", crate::message(&e));
    });
}
