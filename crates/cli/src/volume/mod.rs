//! `iolab volume ...`: Vinum-style volumes on files or block devices.
//! A volume set is named by its drives (any order), or by a configuration
//! file whose `drive` lines name them. A drive whose file is absent or
//! unreadable is left out with a warning and the set assembles without it
//! (the drive down); commands that write record that on the other drives
//! first, and every command that wrote adds the counters to the
//! statistics record on the drives. Commands that write lock every drive
//! for themselves; `list`, `printconfig` and `checkparity` open the drives
//! read-only under a shared lock (`assemble.rs`).

mod create;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use volume::{State, VolumeSet};

pub use create::CreateArgs;
use lab::assemble::{self, assemble_for_io, Access};

use crate::UsageError;

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Lay out the volumes of a Vinum configuration file on its drives and
    /// write the metadata (a header and two copies of the configuration) at
    /// the start of each drive. Everything is checked before anything is
    /// written: a failed create leaves every drive as it was. A RAID-5 plex
    /// on drives that held data is created `initializing` (its parity is
    /// not right) and takes no I/O until `iolab volume init`; on new drive
    /// files (sparse zeros) it starts up.
    Create(CreateArgs),
    /// List volumes, plexes, subdisks and drives with their states
    /// (`-s`: Vinum's counters accumulated since creation or the last
    /// resetstats; `-v`: sizes, offsets and devices; `--json`: everything).
    /// Opens the drives read-only under a shared lock: a list while another
    /// iolab process writes the set works, with a warning that the states
    /// shown may be changing.
    List(ListArgs),
    /// Print the configuration stored on the drives, states included
    /// (read-only, as list).
    Printconfig(SetArgs),
    /// Revive a stale or down subdisk, plex or drive: reconstruct or copy
    /// its data online, restartably, and mark it up. A subdisk of a
    /// mirrored concat or striped plex gets its own region copied from the
    /// other plex.
    Start(ObjectArgs),
    /// Take a subdisk, plex or drive out of service (mark it down).
    Stop(ObjectArgs),
    /// Force an object's state (up, down or stale) without copying data,
    /// e.g. `setstate down d2` to simulate a failed drive.
    Setstate(SetstateArgs),
    /// Make a plex, or every plex of a VOLUME, consistent and up: a RAID-5
    /// plex gets its parity built from its data (as md's initial resync:
    /// restartable, its data kept); a plex of a mirror is copied from the
    /// other plex; a concat or striped plex with no mirror is zeroed (as
    /// Vinum's init). Shows progress on a terminal.
    Init(ObjectArgs),
    /// Check the parity of RAID-5 plexes; exit 1 if any row is wrong. Opens
    /// the drives read-only under a shared lock, and refuses while another
    /// process writes the set (the parity would change under the check);
    /// a stripe log is replayed into memory only.
    Checkparity(ObjectArgs),
    /// Recompute the parity of a RAID-5 plex from its data.
    Rebuildparity(ObjectArgs),
    /// Zero the counters of OBJECT (`-r`: and of the plexes and subdisks
    /// below it), or of every object when no OBJECT is given:
    /// `resetstats [-r] [OBJECT] DRIVE...`. The first argument is taken as
    /// the object when it is not an existing file.
    Resetstats(ResetstatsArgs),
}

#[derive(Debug, Args)]
pub struct ResetstatsArgs {
    /// Also reset the objects below OBJECT.
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// An optional object name, then the drives of the set (or a
    /// configuration file naming them).
    #[arg(required = true, value_name = "[OBJECT] DRIVE")]
    pub args: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SetArgs {
    /// The drives of the set (or a configuration file naming them).
    #[arg(required = true, value_name = "DRIVE")]
    pub drives: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub set: SetArgs,
    /// Show the counters.
    #[arg(short = 's', long)]
    pub stats: bool,
    /// Verbose: sizes, organisation, subdisk offsets on the drive and in
    /// the plex, drive devices, revive progress.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ObjectArgs {
    /// A volume, plex, subdisk or drive name.
    pub object: String,
    #[command(flatten)]
    pub set: SetArgs,
}

#[derive(Debug, Args)]
pub struct SetstateArgs {
    /// up, down or stale.
    pub state: State,
    /// A plex, subdisk or drive name.
    pub object: String,
    #[command(flatten)]
    pub set: SetArgs,
}

pub fn run(command: VolumeCommand) -> anyhow::Result<ExitCode> {
    match command {
        VolumeCommand::Create(args) => create::create(args),
        VolumeCommand::List(args) => {
            let set = assemble::assemble_with(&args.set.drives, false, Access::Inspect)?;
            let reports = set.accumulated_reports();
            if args.json {
                let doc = report::json::VolumeListDocument::new(
                    env!("CARGO_PKG_VERSION"),
                    lab::host::wire(),
                    &reports,
                );
                println!("{}", doc.to_json());
            } else if args.verbose {
                print!("{}", report::volume_list_verbose(&reports, args.stats));
            } else {
                print!("{}", report::volume_list(&reports, args.stats));
            }
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Printconfig(args) => {
            let text = assemble::assemble_with(&args.drives, false, Access::Inspect)?.config_text();
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Start(args) => {
            let set = assemble_for_io(&args.set.drives, false)?;
            let bar = Progress::new(&format!("reviving {}", args.object));
            let revived = set.revive_with(&args.object, &mut |done, total| bar.show(done, total));
            bar.finish();
            revived?;
            set.save_stats()?;
            println!("{} is up", args.object);
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Stop(args) => set_state(&args.set.drives, &args.object, State::Down),
        VolumeCommand::Setstate(args) => set_state(&args.set.drives, &args.object, args.state),
        VolumeCommand::Init(args) => {
            let set = assemble_for_io(&args.set.drives, false)?;
            let bar = Progress::new(&format!("initialising {}", args.object));
            let done = set.init(&args.object, &mut |done, total| bar.show(done, total));
            bar.finish();
            done?;
            set.save_stats()?;
            println!("{} initialised", args.object);
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Checkparity(args) => check_parity(&args),
        VolumeCommand::Rebuildparity(args) => {
            let set = assemble_for_io(&args.set.drives, false)?;
            holder(&set, &args.object)?.rebuild_parity()?;
            set.save_stats()?;
            println!("parity of {} rebuilt", args.object);
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Resetstats(args) => reset_stats(&args),
    }
}

/// A progress bar on a terminal (nothing otherwise) for long commands:
/// the library reports bytes done and in all after every step.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(what: &str) -> Progress {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new(0);
        let template = "{msg} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} ETA {eta}";
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        Progress(Some(bar))
    }

    fn show(&self, done: u64, total: u64) {
        if let Some(bar) = &self.0 {
            bar.set_length(total);
            bar.set_position(done);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

fn reset_stats(args: &ResetstatsArgs) -> anyhow::Result<ExitCode> {
    let (object, drives) = match args.args.split_first() {
        Some((first, rest)) if !rest.is_empty() && !first.exists() => {
            let name = first
                .to_str()
                .ok_or_else(|| UsageError("resetstats: the object name is not valid UTF-8".into()))?;
            (Some(name), rest)
        }
        _ => (None, args.args.as_slice()),
    };
    let set = assemble::assemble_with(drives, false, Access::Write)?;
    set.reset_stats(object, args.recursive)?;
    match object {
        Some(name) if args.recursive => println!("counters of {name} and the objects below it reset"),
        Some(name) => println!("counters of {name} reset"),
        None => println!("counters of every object reset"),
    }
    Ok(ExitCode::SUCCESS)
}

fn set_state(drives: &[PathBuf], object: &str, state: State) -> anyhow::Result<ExitCode> {
    let set = assemble_for_io(drives, false)?;
    set.set_state(object, state)?;
    println!("{object} is {state}");
    Ok(ExitCode::SUCCESS)
}

/// Read-only: the counters of the check's reads are not added to the
/// statistics on the drives.
fn check_parity(args: &ObjectArgs) -> anyhow::Result<ExitCode> {
    let set = assemble::assemble_with(&args.set.drives, false, Access::Check)?;
    let volume = holder(&set, &args.object)?;
    let reports = volume.check_parity()?;
    print!("{}", report::parity_lines(&reports));
    let bad: u64 = reports.iter().map(|r| r.rows_mismatched).sum();
    Ok(crate::exit::found(bad > 0))
}

/// The volume holding `object` (a volume, plex, subdisk or drive name).
fn holder(set: &VolumeSet, object: &str) -> anyhow::Result<Arc<volume::Volume>> {
    if let Some(v) = set.volume(object) {
        return Ok(v);
    }
    set.volumes.iter().find(|v| v.state(object).is_some()).cloned().ok_or_else(|| {
        UsageError(format!("no volume, plex, subdisk or drive named '{object}' in this set")).into()
    })
}
