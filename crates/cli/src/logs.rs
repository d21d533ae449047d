//! `iolab log`: commands on a block log itself. `repair` drops the
//! commits a replay could not replay because it stopped at damage: until
//! then the log refuses to serve, so that no later open replays a commit
//! whose predecessor was lost (docs/log.md, "Damage and repair").

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use blocklog::{LogError, LoggedDevice, Mode, Repaired};
use clap::{Args, Subcommand};
use device::{Device, FileDevice, FileOptions, LockKind};

use lab::stack::{self, Stack};

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Repair a block log whose replay stopped at damage: drop the commits
    /// from the damaged one on (every commit before it is home), so that
    /// the log serves again. A log that is whole is replayed and left as
    /// it is.
    #[command(after_help = "The target is opened for writing under an exclusive lock. After a repair, \
        check what the log protects: `iolab validate --log`, `iolab fs fsck`, `iolab volume checkparity`.")]
    Repair(RepairArgs),
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// What holds the log: a target a `--log` run (or `iolab fs mkfs
    /// --block-log`) made a log at the start of, an iolab file system
    /// (its `log` policy's region), or a RAID-5 volume's log drive.
    #[arg(long)]
    pub target: String,
    /// The log's own file or device, when it was made with --log-device
    /// (--block-log-device).
    #[arg(long, value_name = "PATH")]
    pub log_device: Option<PathBuf>,
}

pub fn run(command: LogCommand) -> anyhow::Result<ExitCode> {
    match command {
        LogCommand::Repair(args) => repair(&args),
    }
}

/// Where a target's log is, and what it protects.
enum Found {
    /// A device's block log: at the start of `data`, or on `log`.
    Device { data: Arc<dyn Device>, log: Option<Arc<dyn Device>> },
    /// A file system's log, in its log region.
    FileSystem { raw: Arc<dyn Device>, region: Arc<dyn Device> },
    /// A RAID-5 volume's stripe log, on its log drive.
    Stripe { log: Arc<dyn Device> },
}

fn repair(args: &RepairArgs) -> anyhow::Result<ExitCode> {
    let options = stack::OpenOptions {
        direct: false,
        read_only: false,
        sector_bytes: None,
        create_bytes: None,
        lock: stack::Lock::Require(LockKind::Exclusive),
    };
    let target = Stack::open(&args.target, &options)?;
    let found = find(&target, args.log_device.as_deref())?;
    let log = match &found {
        Found::Device { data, log } => log.clone().unwrap_or_else(|| Arc::clone(data)),
        Found::FileSystem { region, .. } => Arc::clone(region),
        Found::Stripe { log } => Arc::clone(log),
    };
    if !replay_finds_damage(&found)? {
        println!("the block log of {} is whole: nothing to repair", args.target);
        return Ok(ExitCode::SUCCESS);
    }
    let Some(repaired) = blocklog::repair(log.as_ref())? else {
        bail!("{}: the block log's replay stopped, yet its header is not marked so", log.name());
    };
    print!("{}", repaired_text(&args.target, &repaired, &found));
    Ok(ExitCode::SUCCESS)
}

/// Finds the log `target` holds (or `log_device`, for the target's data).
fn find(target: &Stack, log_device: Option<&Path>) -> anyhow::Result<Found> {
    let data = Arc::clone(target.device());
    if let Some(path) = log_device {
        let dev = FileDevice::open(path, &FileOptions::default())
            .map_err(|e| anyhow::anyhow!("--log-device {}: {e}", path.display()))?;
        dev.lock(LockKind::Exclusive)?;
        return Ok(Found::Device { data, log: Some(Arc::new(dev)) });
    }
    match device::signature::probe(data.as_ref())? {
        Some("iolab block log") => Ok(Found::Device { data, log: None }),
        Some("iolab file system") => {
            let region = ffs::log_region(&data)?;
            Ok(Found::FileSystem { raw: data, region })
        }
        Some("iolab volume") => {
            let area = data.size_bytes().saturating_sub(volume::DATA_START_BYTES) / 4096 * 4096;
            let log: Arc<dyn Device> = Arc::new(device::Slice::new(data, volume::DATA_START_BYTES, area)?);
            Ok(Found::Stripe { log })
        }
        other => bail!(
            "{}: holds no iolab block log ({}); give the target a `--log` run used, an iolab file system, a \
             RAID-5 volume's log drive, or --log-device for a log of its own",
            target.device().name(),
            other.unwrap_or("no known signature")
        ),
    }
}

/// Opens the log as every command does (replaying it) and tells whether
/// replay stopped at damage, now or before. A stripe log's drives are not
/// known here: its header alone says.
fn replay_finds_damage(found: &Found) -> anyhow::Result<bool> {
    let opened = match found {
        Found::Device { data, log } => {
            LoggedDevice::open(Arc::clone(data), log.clone(), Mode::Async).map(drop)
        }
        Found::FileSystem { raw, region } => {
            LoggedDevice::open(Arc::clone(raw), Some(Arc::clone(region)), Mode::Async).map(drop)
        }
        Found::Stripe { log } => {
            let Some(header) = LoggedDevice::probe(log.as_ref())? else {
                bail!("{}: the log drive holds no stripe log", log.name());
            };
            return Ok(header.stop.is_some());
        }
    };
    match opened {
        Ok(()) => Ok(false),
        Err(LogError::Stopped { .. }) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// What a repair did, in words, and what to check after it.
fn repaired_text(target: &str, repaired: &Repaired, found: &Found) -> String {
    let stop = &repaired.stop;
    let commit =
        stop.commit.map_or("a commit whose number was unreadable".to_string(), |c| format!("commit {c}"));
    let dropped = match stop.commit {
        Some(c) if c == stop.last_commit => format!("commit {c}"),
        Some(c) => format!("commits {c} to {} ({})", stop.last_commit, stop.last_commit - c + 1),
        None => format!("the commits from there on, up to {}", stop.last_commit),
    };
    let check = match found {
        Found::Device { .. } => "check the data (`iolab validate --log` with the run's journal)",
        Found::FileSystem { .. } => "check the file system (`iolab fs fsck`)",
        Found::Stripe { .. } => "check the volume's parity (`iolab volume checkparity`)",
    };
    format!(
        "repaired the block log of {target}: replay had stopped at damage in {commit}, LSN {} (byte {} of the \
         log device): {}\n\
         dropped {dropped}; records of them still readable: {}, naming {} sectors\n\
         the log opens again, empty; what it protects holds every commit before the damage: {check}\n",
        stop.lsn, stop.offset, stop.reason, repaired.found.records, repaired.found.sectors
    )
}
