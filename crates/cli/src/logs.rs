//! `iolab log`: commands on a block log itself. `repair`
//! (`lab::log_repair`) drops the commits a replay could not replay
//! because it stopped at damage (docs/log.md, "Damage and repair").

use std::path::PathBuf;
use std::process::ExitCode;

use blocklog::Repaired;
use clap::{Args, Subcommand};
use lab::log_repair::{Found, Outcome};

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

fn repair(args: &RepairArgs) -> anyhow::Result<ExitCode> {
    match lab::log_repair::repair(&args.target, args.log_device.as_deref())? {
        Outcome::Whole => println!("the block log of {} is whole: nothing to repair", args.target),
        Outcome::Repaired { repaired, found } => print!("{}", repaired_text(&args.target, &repaired, &found)),
    }
    Ok(ExitCode::SUCCESS)
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
