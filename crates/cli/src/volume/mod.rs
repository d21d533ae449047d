//! `iolab volume ...`: Vinum-style volumes on files or block devices.
//! A volume set is named by its drives (any order), or by a configuration
//! file whose `drive` lines name them. A drive whose file is absent or
//! unreadable is left out with a warning and the set assembles without it
//! (the drive down); commands that do I/O record that on the other drives
//! first, and every command that used the volumes adds their counters to
//! the statistics record on the drives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use device::{Device, FileDevice, FileOptions};
use volume::{State, VolumeSet};

use crate::UsageError;

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Lay out the volumes of a Vinum configuration file on its drives and
    /// write the metadata (a header and two copies of the configuration) at
    /// the start of each drive.
    Create(CreateArgs),
    /// List volumes, plexes, subdisks and drives with their states
    /// (`-s`: Vinum's counters accumulated since creation or the last
    /// resetstats; `-v`: sizes, offsets and devices; `--json`: everything).
    List(ListArgs),
    /// Print the configuration stored on the drives, states included.
    Printconfig(SetArgs),
    /// Revive a stale or down subdisk, plex or drive: reconstruct or copy
    /// its data online, restartably, and mark it up.
    Start(ObjectArgs),
    /// Take a subdisk, plex or drive out of service (mark it down).
    Stop(ObjectArgs),
    /// Force an object's state (up, down or stale) without copying data,
    /// e.g. `setstate down d2` to simulate a failed drive.
    Setstate(SetstateArgs),
    /// Zero a plex and make RAID-5 parity consistent before use.
    Init(ObjectArgs),
    /// Check the parity of RAID-5 plexes; exit 1 if any row is wrong.
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
pub struct CreateArgs {
    /// The configuration file (Vinum syntax: drive/volume/plex/sd lines).
    pub config: PathBuf,
    /// Create missing drive files, sparse, of this size.
    #[arg(long, value_name = "SIZE")]
    pub drive_size: Option<String>,
    /// Overwrite drives that hold a file system, a partition table or
    /// another iolab volume.
    #[arg(long)]
    pub force: bool,
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
    pub state: String,
    /// A plex, subdisk or drive name.
    pub object: String,
    #[command(flatten)]
    pub set: SetArgs,
}

pub fn run(command: VolumeCommand) -> anyhow::Result<ExitCode> {
    match command {
        VolumeCommand::Create(args) => create(args),
        VolumeCommand::List(args) => {
            let set = assemble(&args.set.drives)?;
            let reports = set.accumulated_reports();
            if args.json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            } else if args.verbose {
                print!("{}", report::volume_list_verbose(&reports, args.stats));
            } else {
                print!("{}", report::volume_list(&reports, args.stats));
            }
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Printconfig(args) => {
            let text = assemble(&args.drives)?.config_text();
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Start(args) => {
            let set = assemble_for_io(&args.set.drives, false)?;
            set.revive(&args.object)?;
            set.save_stats()?;
            println!("{} is up", args.object);
            Ok(ExitCode::SUCCESS)
        }
        VolumeCommand::Stop(args) => set_state(&args.set.drives, &args.object, State::Down),
        VolumeCommand::Setstate(args) => {
            let state = match args.state.as_str() {
                "up" => State::Up,
                "down" => State::Down,
                "stale" => State::Stale,
                other => {
                    return Err(UsageError(format!(
                        "setstate: '{other}' is not a state; use up, down or stale"
                    ))
                    .into())
                }
            };
            set_state(&args.set.drives, &args.object, state)
        }
        VolumeCommand::Init(args) => {
            let set = assemble_for_io(&args.set.drives, false)?;
            set.init(&args.object, &mut |_, _| {})?;
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
    let set = assemble(drives)?;
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

fn check_parity(args: &ObjectArgs) -> anyhow::Result<ExitCode> {
    let set = assemble_for_io(&args.set.drives, false)?;
    let volume = holder(&set, &args.object)?;
    let mut bad = 0;
    let reports = volume.check_parity();
    set.save_stats()?;
    for r in reports? {
        println!("{}: {} rows checked, {} with wrong parity", r.plex, r.rows_checked, r.rows_mismatched);
        if !r.mismatched_rows.is_empty() {
            println!("  first wrong rows: {:?}", r.mismatched_rows);
        }
        bad += r.rows_mismatched;
    }
    Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
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

fn create(args: CreateArgs) -> anyhow::Result<ExitCode> {
    let config = read_config(&args.config)?;
    let create_bytes = args
        .drive_size
        .as_deref()
        .map(|s| workloads::spec::parse_bytes("drive-size", s))
        .transpose()
        .map_err(UsageError::from)?;
    let base = args.config.parent().unwrap_or(Path::new("."));
    let mut devices: HashMap<String, Arc<dyn Device>> = HashMap::new();
    for drive in &config.drives {
        let path = base.join(&drive.device);
        if !path.exists() && create_bytes.is_none() {
            return Err(UsageError(format!(
                "drive '{}': {} does not exist; create it or give --drive-size to make sparse files",
                drive.name,
                path.display()
            ))
            .into());
        }
        let existed = path.exists();
        let dev = FileDevice::open(&path, &FileOptions { create_bytes, ..Default::default() })
            .with_context(|| format!("drive '{}'", drive.name))?;
        if existed && !args.force {
            if let Some(what) = device::signature::probe(&dev)? {
                bail!(
                    "drive '{}': {} holds data ({what}); creating the volume would destroy it. \
                     Use another drive, or pass --force",
                    drive.name,
                    path.display()
                );
            }
        }
        devices.insert(drive.name.clone(), Arc::new(dev));
    }
    let set = volume::create(&config, &devices, &|_, _, _| true)?;
    attach_stripe_logs(&set, true)?;
    for v in &set.volumes {
        println!("created volume {} ({} bytes)", v.name(), v.size_bytes());
        if let Some((drive, _, _)) = v.raid5_log_drive() {
            println!("  its RAID-5 row updates go through the stripe log on drive {drive}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn read_config(path: &Path) -> anyhow::Result<volume::Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the configuration", path.display()))?;
    volume::parse(&text).map_err(|e| UsageError(format!("{}: {e}", path.display())).into())
}

/// Drive paths from the arguments: drives themselves, or configuration
/// files whose `drive` lines name them (relative to the file), with the
/// drive name when a configuration gives it. A path that does not exist
/// is taken as a drive (a missing one).
fn drive_paths(args: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, Option<String>)>> {
    let mut paths = Vec::new();
    for arg in args {
        let mut head = [0u8; 8];
        let is_drive = std::fs::File::open(arg)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .map(|_| &head == device::signature::IOLAB_VOLUME_MAGIC)
            .unwrap_or(false);
        if is_drive || !arg.exists() {
            paths.push((arg.clone(), None));
            continue;
        }
        let config = read_config(arg).with_context(|| {
            format!("{}: neither an iolab volume drive nor a configuration file", arg.display())
        })?;
        let base = arg.parent().unwrap_or(Path::new("."));
        paths.extend(config.drives.iter().map(|d| (base.join(&d.device), Some(d.name.clone()))));
    }
    Ok(paths)
}

/// Opens a drive and reads its metadata area, so an unreadable drive is
/// found (and left out) here rather than failing the assembly.
fn open_drive(path: &Path, direct: bool) -> anyhow::Result<Arc<dyn Device>> {
    let dev = FileDevice::open(path, &FileOptions { direct, ..Default::default() })?;
    let metadata_bytes = volume::DATA_START_BYTES as usize;
    if dev.size_bytes() < metadata_bytes as u64 {
        bail!("{}: {} bytes, too small to be a volume drive", path.display(), dev.size_bytes());
    }
    let mut head = device::AlignedBuf::zeroed(metadata_bytes, dev.buffer_align().max(4096));
    dev.read_at(&mut head, 0)?;
    Ok(Arc::new(dev))
}

/// Reassembles the set from its drives.
pub fn assemble(args: &[PathBuf]) -> anyhow::Result<VolumeSet> {
    assemble_with(args, false)
}

/// Reassembles the set, its drives opened with O_DIRECT when `direct`.
/// Drives that cannot be opened or read are left out with a warning; the
/// set assembles without them, and its warnings are printed.
pub fn assemble_with(args: &[PathBuf], direct: bool) -> anyhow::Result<VolumeSet> {
    let mut devices: Vec<Arc<dyn Device>> = Vec::new();
    for (path, name) in drive_paths(args)? {
        match open_drive(&path, direct) {
            Ok(dev) => devices.push(dev),
            Err(err) => {
                let drive = name.map(|n| format!("drive '{n}': ")).unwrap_or_default();
                let why = if path.exists() {
                    format!("{err}")
                } else {
                    format!("{} does not exist", path.display())
                };
                eprintln!("iolab: warning: {drive}{why}; assembling without it");
            }
        }
    }
    if devices.is_empty() {
        bail!("none of the drives given could be opened and read; nothing to assemble");
    }
    let set = volume::assemble(&devices)?;
    for warning in set.warnings() {
        eprintln!("iolab: warning: {warning}");
    }
    attach_stripe_logs(&set, false)?;
    Ok(set)
}

/// Opens the stripe log of every RAID-5 plex that names a log drive
/// (replaying what it holds into the drives) and sends the plex's row
/// updates through it. `fresh`: the set was just created, so whatever the
/// log area holds is from an earlier life and a new log is formatted.
fn attach_stripe_logs(set: &VolumeSet, fresh: bool) -> anyhow::Result<()> {
    for vol in &set.volumes {
        let Some((drive, dev, present)) = vol.raid5_log_drive() else { continue };
        if !present {
            eprintln!(
                "iolab: warning: volume {}: log drive {drive} is missing; RAID-5 writes go without the \
                 stripe log and a crash can leave rows whose parity lies (the write hole)",
                vol.name()
            );
            continue;
        }
        let area = dev.size_bytes().saturating_sub(volume::DATA_START_BYTES);
        let log: Arc<dyn Device> =
            Arc::new(device::Slice::new(dev, volume::DATA_START_BYTES, area / 4096 * 4096)?);
        let homes = vol.raid5_homes().context("a volume with a log drive has one RAID-5 plex")?;
        let existing = blocklog::StripeLog::probe(log.as_ref())?.is_some();
        let wal = if fresh || !existing {
            blocklog::StripeLog::format(log, homes)?
        } else {
            let wal = blocklog::StripeLog::open(log, homes)?;
            let replay = wal.replay_report();
            if replay.commits > 0 {
                eprintln!(
                    "iolab: volume {}: replayed {} row updates ({} sectors) from the stripe log on {drive}",
                    vol.name(),
                    replay.commits,
                    replay.sectors_written_home
                );
            }
            if let Some(stop) = &replay.stopped {
                eprintln!(
                    "iolab: warning: volume {}: stripe log replay stopped at LSN {}: {}; later row updates were not replayed, run `iolab volume checkparity`",
                    vol.name(),
                    stop.lsn,
                    stop.reason
                );
            }
            wal
        };
        vol.set_write_ahead_log(Arc::new(wal))?;
    }
    Ok(())
}

/// Reassembles the set for a command that does I/O: a missing drive is
/// first recorded down on the drives present, so that when it returns it
/// is known to have missed writes and is revived, never trusted.
pub fn assemble_for_io(args: &[PathBuf], direct: bool) -> anyhow::Result<VolumeSet> {
    let set = assemble_with(args, direct)?;
    if !set.missing_drives().is_empty() {
        set.save()?;
        eprintln!(
            "iolab: warning: recorded {} down on the drives present; when a drive returns, revive it with \
             `iolab volume start DRIVE ...`",
            set.missing_drives().join(", ")
        );
    }
    Ok(set)
}
