//! Assembling a volume set from drive paths: which files are drives,
//! opening and locking each, the stripe logs of RAID-5 plexes.
//!
//! Commands that write take an exclusive lock on every drive; a drive
//! another process holds is an error naming the holder, never "assemble
//! without it" (that would record it down while its holder writes it).
//! Commands that only read open the drives read-only under a shared lock.
//! A drive whose file is absent or cannot be opened is left out with a
//! warning and the set assembles without it; one whose header is damaged
//! is given to the volume crate with the name its configuration file's
//! `drive` line gives it, and assembled down.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use device::{Device, DeviceError, FileDevice, FileOptions, LockKind};
use volume::{State, VolumeSet};

use crate::UsageError;

/// How a command uses the drives of a set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads metadata only (list, printconfig): read-only, shared lock; a
    /// drive another process writes is read anyway, with a warning that
    /// the states shown may be changing.
    Inspect,
    /// Reads data (checkparity): read-only, shared lock; a drive another
    /// process writes is an error, since what is read would be changing
    /// under the check. A stripe log is replayed into memory only.
    Check,
    /// Writes (run, start, stop, setstate, init, rebuildparity,
    /// resetstats): read-write, exclusive lock.
    Write,
}

/// True when the file starts as a volume drive does: the header's magic,
/// or a configuration copy's behind a damaged header.
fn looks_like_drive(path: &Path) -> bool {
    let magic_at = |offset: u64, magic: &[u8; 8]| {
        let mut head = [0u8; 8];
        std::fs::File::open(path)
            .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut head, offset))
            .is_ok_and(|()| &head == magic)
    };
    magic_at(0, device::signature::IOLAB_VOLUME_MAGIC)
        || (0..2).any(|slot| magic_at(volume::config_slot_at(slot), volume::CONFIG_MAGIC))
}

/// Drive paths from the arguments: drives themselves, or configuration
/// files whose `drive` lines name them (relative to the file), with the
/// drive name when a configuration gives it. A path that does not exist
/// is taken as a drive (a missing one).
fn drive_paths(args: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, Option<String>)>> {
    let mut paths = Vec::new();
    for arg in args {
        if looks_like_drive(arg) || !arg.exists() {
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

fn is_locked(err: &anyhow::Error) -> bool {
    matches!(err.downcast_ref::<DeviceError>(), Some(DeviceError::Locked { .. }))
}

/// Opens a drive as `access` says, locks it, and reads its metadata area,
/// so an unreadable drive is found (and left out) here rather than failing
/// the assembly. With [`Access::Inspect`], a drive locked by a writer is
/// opened unlocked with a warning.
fn open_drive(path: &Path, direct: bool, access: Access) -> anyhow::Result<Arc<dyn Device>> {
    let read_only = access != Access::Write;
    let dev = FileDevice::open(path, &FileOptions { direct, read_only, ..Default::default() })?;
    let kind = if read_only { LockKind::Shared } else { LockKind::Exclusive };
    match dev.lock(kind) {
        Err(DeviceError::Locked { path, holder, .. }) if access == Access::Inspect => {
            crate::say::warning(format!(
                "{}: in use by {holder}; listed anyway, but the states shown may be changing",
                path.display()
            ))
        }
        locked => locked?,
    }
    let metadata_bytes = volume::DATA_START_BYTES as usize;
    if dev.size_bytes() < metadata_bytes as u64 {
        bail!("{}: {} bytes, too small to be a volume drive", path.display(), dev.size_bytes());
    }
    let mut head = device::AlignedBuf::zeroed(metadata_bytes, dev.buffer_align().max(4096));
    dev.read_at(&mut head, 0)?;
    if access == Access::Check {
        // Nothing this command runs (a stripe log replay) reaches the file.
        return Ok(Arc::new(device::Overlay::over(Arc::new(dev))));
    }
    Ok(Arc::new(dev))
}

/// Reassembles the set, its drives opened with O_DIRECT when `direct`
/// and as `access` says, and (unless only inspecting) opens its stripe
/// logs. Drives that cannot be opened or read are left out with a warning;
/// the set assembles without them, and its warnings are printed. A drive
/// another process holds is an error.
pub fn assemble_with(args: &[PathBuf], direct: bool, access: Access) -> anyhow::Result<VolumeSet> {
    let set = assemble_drives(args, direct, access)?;
    if access != Access::Inspect {
        attach_stripe_logs(&set, false, access)?;
    }
    Ok(set)
}

/// As [`assemble_with`], without opening the stripe logs.
fn assemble_drives(args: &[PathBuf], direct: bool, access: Access) -> anyhow::Result<VolumeSet> {
    let mut devices: Vec<volume::GivenDrive> = Vec::new();
    for (path, name) in drive_paths(args)? {
        let drive = name.as_ref().map(|n| format!("drive '{n}': ")).unwrap_or_default();
        match open_drive(&path, direct, access) {
            Ok(device) => devices.push(volume::GivenDrive { device, expected: name }),
            Err(err) if is_locked(&err) => return Err(err.context(format!("{drive}cannot assemble the set"))),
            Err(err) => {
                let why = if path.exists() {
                    format!("{err}")
                } else {
                    format!("{} does not exist", path.display())
                };
                crate::say::warning(format!("{drive}{why}; assembling without it"));
            }
        }
    }
    if devices.is_empty() {
        bail!("none of the drives given could be opened and read; nothing to assemble");
    }
    let set = volume::assemble_given(&devices)?;
    for warning in set.warnings() {
        crate::say::warning(warning.to_string());
    }
    Ok(set)
}

/// Reassembles the set for a command that writes: exclusive locks, and a
/// drive missing or taken down at assembly (its header damaged) is first
/// recorded down on the other drives, so that when it returns it is known
/// to have missed writes and is revived, never trusted; then the stripe
/// logs are opened, replaying what they hold into the drives up.
pub fn assemble_for_io(args: &[PathBuf], direct: bool) -> anyhow::Result<VolumeSet> {
    let set = assemble_drives(args, direct, Access::Write)?;
    let down: Vec<&str> =
        set.missing_drives().iter().chain(set.drives_down_at_assembly()).map(String::as_str).collect();
    if !down.is_empty() {
        set.save()?;
        crate::say::warning(format!(
            "recorded {} down on the other drives; when a drive is back (or replaced), revive \
             it with `iolab volume start DRIVE ...`",
            down.join(", ")
        ));
    }
    attach_stripe_logs(&set, false, Access::Write)?;
    Ok(set)
}

/// Opens the stripe log of every RAID-5 plex that names a log drive
/// (replaying what it holds into the drives that are up; those down are
/// rebuilt from the others when revived) and sends the plex's row updates
/// through it. `fresh`: the set was just created, so whatever the log area
/// holds is from an earlier life and a new log is formatted. A log drive
/// missing or down leaves the plex without writes (as md with its journal
/// missing), said here. With [`Access::Check`] the drives are overlays:
/// the replay stays in memory.
pub fn attach_stripe_logs(set: &VolumeSet, fresh: bool, access: Access) -> anyhow::Result<()> {
    for vol in &set.volumes {
        let Some((drive, dev, in_service)) = vol.raid5_log_drive() else { continue };
        if !in_service {
            let missing = set.missing_drives().contains(&drive);
            let state =
                if missing { "missing".into() } else { vol.state(&drive).unwrap_or(State::Down).to_string() };
            crate::say::warning(format!(
                "volume {}: log drive {drive} is {state}: its stripe log cannot be replayed or \
                 written, so the volume takes reads only (as md with its journal missing); give the drive back \
                 and revive it with `iolab volume start {drive} ...`",
                vol.name()
            ));
            continue;
        }
        let area = dev.size_bytes().saturating_sub(volume::DATA_START_BYTES);
        let log: Arc<dyn Device> =
            Arc::new(device::Slice::new(dev, volume::DATA_START_BYTES, area / 4096 * 4096)?);
        let homes = vol.raid5_homes().context("a volume with a log drive has one RAID-5 plex")?;
        let down = vol.raid5_homes_down();
        let existing = blocklog::StripeLog::probe(log.as_ref())?.is_some();
        let wal = if fresh || !existing {
            blocklog::StripeLog::format_degraded(log, homes, &down)?
        } else {
            let wal = blocklog::StripeLog::open_degraded(log, homes, &down)
                .map_err(|e| stopped_advice(e, vol.name(), &drive))?;
            report_replay(vol.name(), &drive, wal.replay_report(), access);
            wal
        };
        vol.set_write_ahead_log(Arc::new(wal))?;
    }
    Ok(())
}

fn report_replay(volume: &str, drive: &str, replay: &blocklog::ReplayReport, access: Access) {
    if replay.commits > 0 {
        let where_to = if access == Access::Check {
            ", in memory only: this command opens the drives read-only, and the next that writes replays \
             them onto the drives"
        } else {
            ""
        };
        let skipped = match replay.sectors_skipped {
            0 => String::new(),
            n => format!("; {n} sectors of drives that are down were left, to be rebuilt from parity"),
        };
        crate::say::info(format!(
            "volume {volume}: replayed {} row updates ({} sectors{skipped}) from the stripe log on \
             {drive}{where_to}",
            replay.commits, replay.sectors_written_home
        ));
    }
}

/// A stripe log whose replay stopped at damage: the command that repairs
/// it, and what to check after.
fn stopped_advice(e: blocklog::LogError, volume: &str, drive: &str) -> anyhow::Error {
    match e {
        blocklog::LogError::Stopped { stop, .. } => anyhow::anyhow!(
            "volume {volume}: the stripe log on drive {drive}: {stop}. The volume cannot be assembled until \
             `iolab log repair --target DRIVE` (the log drive's file or device) drops them; then run \
             `iolab volume checkparity`, since their rows' parity may lie"
        ),
        other => other.into(),
    }
}

pub fn read_config(path: &Path) -> anyhow::Result<volume::Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the configuration", path.display()))?;
    volume::parse(&text).map_err(|e| UsageError(format!("{}: {e}", path.display())).into())
}
