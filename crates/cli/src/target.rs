//! Opening what a command runs on: a file or block device path,
//! `mem:SIZE`, `null:SIZE`, or a temporary file when none is named; and
//! refusing to write over data the user may not mean to lose.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use blocklog::{LoggedDevice, Mode, Placement};
use device::{Device, FileDevice, FileOptions, LockKind, MemDevice, NullDevice};
use workloads::spec::parse_bytes;

use crate::UsageError;

/// An open target, and the temporary directory holding it if iolab made it.
pub struct Target {
    pub device: Arc<dyn Device>,
    pub temp: Option<tempfile::TempDir>,
    /// The file did not exist before this run.
    pub created: bool,
    /// The file existed but was empty; this run sized it.
    pub was_empty: bool,
    /// Opened read-only (a job that only reads an existing file).
    pub read_only: bool,
    /// A path whose data would be overwritten, for the safety check.
    pub path: Option<PathBuf>,
    /// The volume set, when the target is one of its volumes.
    pub volumes: Option<(volume::VolumeSet, Arc<volume::Volume>)>,
    /// The block log the target runs through, if `--log` was given.
    pub log: Option<Arc<LoggedDevice>>,
}

impl Target {
    /// A device the user named at `path` (for the safety check).
    fn at(device: Arc<dyn Device>, path: PathBuf) -> Target {
        Target {
            device,
            temp: None,
            created: false,
            was_empty: false,
            read_only: false,
            path: Some(path),
            volumes: None,
            log: None,
        }
    }

    /// A target iolab made itself in memory (nothing to protect).
    fn in_memory(device: Arc<dyn Device>) -> Target {
        Target {
            device,
            temp: None,
            created: true,
            was_empty: false,
            read_only: false,
            path: None,
            volumes: None,
            log: None,
        }
    }
}

/// How to put a target behind the block log (`--log`).
pub struct LogOptions {
    pub mode: Mode,
    pub log_bytes: Option<u64>,
    pub log_device: Option<PathBuf>,
    pub home_writes: blocklog::HomeWrites,
    pub direct: bool,
    pub force: bool,
    /// Refuse to format: the log must be there already (checking a target).
    pub must_exist: bool,
}

/// What putting a target behind the block log will do, decided before
/// anything is written: the geometry of the logged device it makes.
pub struct LogPlan {
    log_dev: Option<Arc<dyn Device>>,
    action: LogAction,
    /// Size and sector of the logged device: what the job is checked on.
    pub data_bytes: u64,
    pub sector_bytes: u32,
}

enum LogAction {
    /// Replay the log the target holds and use it.
    Open,
    /// Replay the old log (of another size), then format a new one.
    Replace(Placement),
    /// Format a new log.
    Format(Placement),
}

/// Checks everything `--log` needs and writes nothing: an existing log is
/// probed (read), a new one planned; a target holding data is refused
/// without `--force` before its log region is touched.
pub fn plan_log(target: &Target, options: &LogOptions) -> anyhow::Result<LogPlan> {
    let log_dev: Option<Arc<dyn Device>> = match &options.log_device {
        Some(path) => {
            let file_options = FileOptions { direct: options.direct, ..Default::default() };
            let dev = FileDevice::open(path, &file_options).map_err(|e| {
                UsageError(format!(
                    "--log-device: {e} (create it first, e.g. truncate -s 16m {})",
                    path.display()
                ))
            })?;
            take_lock(&dev, Lock::Require(LockKind::Exclusive))?;
            Some(Arc::new(dev))
        }
        None => None,
    };
    let holder: Arc<dyn Device> = log_dev.clone().unwrap_or_else(|| Arc::clone(&target.device));
    let existing = LoggedDevice::probe(holder.as_ref())?;
    let placement = || match &log_dev {
        Some(log) => Placement::Separate { log: Arc::clone(log) },
        None => Placement::Inside {
            log_bytes: options
                .log_bytes
                .unwrap_or_else(|| blocklog::default_log_bytes(target.device.size_bytes())),
        },
    };
    let action = match existing {
        Some(header) if options.log_bytes.is_some_and(|b| b / 4096 * 4096 != header.log_bytes) => {
            if !options.force {
                bail!(
                    "{}: already holds a block log of {} bytes, not {}; drop --log-size to use it, \
                     or pass --force to replay it and format a new one",
                    holder.name(),
                    header.log_bytes,
                    options.log_bytes.unwrap_or(0)
                );
            }
            LogAction::Replace(placement())
        }
        Some(header) => {
            return Ok(LogPlan {
                log_dev,
                action: LogAction::Open,
                data_bytes: header.data_bytes,
                sector_bytes: header.sector_bytes,
            })
        }
        None if options.must_exist => {
            bail!("{}: holds no iolab block log to replay (was the run made with --log?)", holder.name());
        }
        None => {
            check_writable(target, options.force)?;
            if let (Some(log), Some(path)) = (&log_dev, &options.log_device) {
                check_writable(&Target::at(Arc::clone(log), path.clone()), options.force)?;
            }
            LogAction::Format(placement())
        }
    };
    let (LogAction::Replace(new) | LogAction::Format(new)) = &action else {
        return Err(anyhow::anyhow!("a log is opened, replaced or formatted"));
    };
    let (header, _, _) =
        LoggedDevice::plan(&target.device, new.clone()).map_err(|e| UsageError(format!("--log: {e}")))?;
    Ok(LogPlan { log_dev, action, data_bytes: header.data_bytes, sector_bytes: header.sector_bytes })
}

/// Puts `target` behind the block log as `plan` decided: replays the log
/// the target holds, or formats a new one.
pub fn add_log(mut target: Target, plan: LogPlan, options: &LogOptions) -> anyhow::Result<Target> {
    let holder =
        plan.log_dev.as_ref().map_or_else(|| target.device.name().to_string(), |d| d.name().to_string());
    let logged = match plan.action {
        LogAction::Open => {
            let logged = LoggedDevice::open(Arc::clone(&target.device), plan.log_dev, options.mode)?;
            report_replay(&logged, &holder);
            logged
        }
        LogAction::Replace(placement) => {
            // Replay what the old log committed before its region is reused.
            let old = LoggedDevice::open(Arc::clone(&target.device), plan.log_dev.clone(), options.mode)?;
            report_replay(&old, &holder);
            drop(old);
            LoggedDevice::format(Arc::clone(&target.device), placement, options.mode)
                .map_err(|e| UsageError(format!("--log: {e}")))?
        }
        LogAction::Format(placement) => {
            LoggedDevice::format(Arc::clone(&target.device), placement, options.mode)
                .map_err(|e| UsageError(format!("--log: {e}")))?
        }
    };
    logged.set_home_writes(options.home_writes)?;
    let logged = Arc::new(logged);
    target.device = logged.clone();
    target.log = Some(logged);
    Ok(target)
}

fn report_replay(logged: &LoggedDevice, holder: &str) {
    let replay = logged.replay_report();
    if replay.records > 0 {
        eprintln!(
            "iolab: replayed the block log of {holder}: {} commits, {} sectors written home",
            replay.commits, replay.sectors_written_home
        );
    }
    if let Some(stop) = &replay.stopped {
        eprintln!(
            "iolab: warning: log replay stopped at LSN {} (byte {} of the log): {}; later commits are lost",
            stop.lsn, stop.offset, stop.reason
        );
    }
}

pub struct OpenOptions {
    pub direct: bool,
    /// Open an existing file or device read-only (a job that only reads);
    /// a file that must be created is opened read-write all the same.
    pub read_only: bool,
    pub sector_bytes: Option<u32>,
    /// Bytes needed if a file must be created (offset + region size).
    pub create_bytes: Option<u64>,
    /// The lock to take on a file or device opened.
    pub lock: Lock,
}

/// How an open target is kept from other iolab processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Two runs on one plain file measure each other but damage nothing
    /// iolab promised (fio and Vdbench take no lock): a warning.
    Warn(LockKind),
    /// A target behind the block log: two processes would replay and
    /// commit one log at once. An error naming the holder.
    Require(LockKind),
}

/// Takes `lock` on `dev`. A lock held by another open in this process (two
/// jobs of one job file on one file) is not a conflict with another run.
fn take_lock(dev: &FileDevice, lock: Lock) -> anyhow::Result<()> {
    let (kind, required) = match lock {
        Lock::Warn(kind) => (kind, false),
        Lock::Require(kind) => (kind, true),
    };
    match dev.lock(kind) {
        Ok(()) => Ok(()),
        Err(device::DeviceError::Locked { pid: Some(pid), .. }) if pid == std::process::id() && !required => {
            Ok(())
        }
        Err(e @ device::DeviceError::Locked { .. }) if !required => {
            eprintln!("iolab: warning: {}; the two runs will measure each other", locked_text(&e));
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A lock conflict as a warning's clause: who holds the target.
fn locked_text(e: &device::DeviceError) -> String {
    match e {
        device::DeviceError::Locked { path, holder, .. } => {
            format!("{} is in use by {holder}", path.display())
        }
        other => other.to_string(),
    }
}

/// Size of the temporary target made when no target is named.
pub const DEFAULT_TARGET_BYTES: u64 = 1 << 30;

pub fn open(spec: &str, options: &OpenOptions) -> anyhow::Result<Target> {
    if let Some(size) = spec.strip_prefix("mem:") {
        let bytes = parse_bytes("target", size).map_err(UsageError::from)?;
        let sector = options.sector_bytes.unwrap_or(512);
        let dev = MemDevice::with_sector(format!("mem:{size}"), bytes, sector)
            .map_err(|e| UsageError(format!("--target: {e}")))?;
        return Ok(Target::in_memory(Arc::new(dev)));
    }
    if let Some(size) = spec.strip_prefix("null:") {
        let bytes = parse_bytes("target", size).map_err(UsageError::from)?;
        let dev = NullDevice::new(bytes).map_err(|e| UsageError(format!("--target: {e}")))?;
        return Ok(Target::in_memory(Arc::new(dev)));
    }
    if let Some(rest) = spec.strip_prefix("volume:") {
        let (name, drives) = rest.split_once(':').ok_or_else(|| {
            UsageError(format!(
                "--target: '{spec}' needs volume:NAME:DRIVE[,DRIVE...] (drives or a configuration file)"
            ))
        })?;
        let paths: Vec<PathBuf> = drives.split(',').map(PathBuf::from).collect();
        return open_volume(crate::volume::assemble_for_io(&paths, options.direct)?, Some(name), spec);
    }
    let path = Path::new(spec);
    if let Some(set) = volume_config(path, options.direct)? {
        return open_volume(set, None, spec);
    }
    let exists = path.exists();
    if !exists && options.create_bytes.is_none() {
        return Err(UsageError(format!(
            "--target: {spec} does not exist; give --size to create it as a sparse file of that size"
        ))
        .into());
    }
    // An empty file (made by touch, say) holds nothing: it is sized as a
    // new one would be. A file holding data is never extended.
    let empty = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0);
    if empty && options.create_bytes.is_none() {
        return Err(UsageError(format!(
            "--target: {spec} is empty; give --size to make it a sparse file of that size"
        ))
        .into());
    }
    let fresh = !exists || empty;
    let file_options = FileOptions {
        direct: options.direct,
        dsync: false,
        read_only: options.read_only && !fresh,
        create_bytes: if fresh { options.create_bytes } else { None },
        sector_bytes: options.sector_bytes,
    };
    let dev = FileDevice::open(path, &file_options)?;
    take_lock(&dev, options.lock)?;
    Ok(Target {
        device: Arc::new(dev),
        temp: None,
        created: !exists,
        was_empty: exists && empty,
        read_only: file_options.read_only,
        path: Some(path.to_path_buf()),
        volumes: None,
        log: None,
    })
}

/// A sparse temporary file in the system's temporary directory, opened
/// with O_DIRECT where the file system allows it. Removed when dropped.
pub fn temporary(size_bytes: u64) -> anyhow::Result<(Target, bool)> {
    let dir =
        tempfile::Builder::new().prefix("iolab-").tempdir().context("cannot create a temporary directory")?;
    let path = dir.path().join("target");
    let mut options = FileOptions { direct: true, create_bytes: Some(size_bytes), ..Default::default() };
    let (dev, direct) = match FileDevice::open(&path, &options) {
        Ok(dev) => (dev, true),
        Err(_) => {
            options.direct = false;
            (FileDevice::open(&path, &options)?, false)
        }
    };
    Ok((
        Target {
            device: Arc::new(dev),
            temp: Some(dir),
            created: true,
            was_empty: false,
            read_only: false,
            path: Some(path),
            volumes: None,
            log: None,
        },
        direct,
    ))
}

/// A Vinum configuration file given as a target: its drives are assembled.
/// Anything else (a drive, a device, a data file) is not a configuration.
fn volume_config(path: &Path, direct: bool) -> anyhow::Result<Option<volume::VolumeSet>> {
    let small_file = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() < 1 << 20);
    let text = if small_file { std::fs::read_to_string(path).ok() } else { None };
    let is_config = text.and_then(|t| volume::parse(&t).ok()).is_some_and(|c| !c.drives.is_empty());
    if !is_config {
        return Ok(None);
    }
    Ok(Some(crate::volume::assemble_for_io(&[path.to_path_buf()], direct)?))
}

fn open_volume(set: volume::VolumeSet, name: Option<&str>, spec: &str) -> anyhow::Result<Target> {
    let vol = match name {
        Some(name) => {
            set.volume(name).ok_or_else(|| UsageError(format!("--target: no volume '{name}' in {spec}")))?
        }
        None if set.volumes.len() == 1 => Arc::clone(&set.volumes[0]),
        None => {
            let names: Vec<&str> = set.volumes.iter().map(|v| v.name()).collect();
            return Err(UsageError(format!(
                "--target: {spec} holds several volumes ({}); name one: volume:NAME:{spec}",
                names.join(", ")
            ))
            .into());
        }
    };
    let device: Arc<dyn Device> = vol.clone();
    Ok(Target {
        device,
        temp: None,
        created: false,
        was_empty: false,
        read_only: false,
        path: None,
        volumes: Some((set, vol)),
        log: None,
    })
}

/// A job was refused after its target was opened: undoes what opening
/// did, so a usage error leaves no file behind and every file as it was.
pub fn discard(target: Target) {
    let Target { device, temp, created, was_empty, path, .. } = target;
    drop(device);
    drop(temp);
    let Some(path) = path else { return };
    let undone = if created {
        std::fs::remove_file(&path)
    } else if was_empty {
        std::fs::OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(0))
    } else {
        Ok(())
    };
    if let Err(e) = undone {
        eprintln!("iolab: warning: {}: could not undo its creation: {e}", path.display());
    }
}

/// After a command used a volume target: says what the volume did on its
/// own (a drive taken down after a failed flush), records state changes
/// and adds the counters to the statistics on the drives.
pub fn finish(target: &Target) -> anyhow::Result<()> {
    if let Some((set, vol)) = &target.volumes {
        for event in vol.take_events() {
            eprintln!("iolab: warning: volume {}: {event}", vol.name());
        }
        vol.checkpoint_write_ahead_log()?;
        set.save()?;
        set.save_stats()?;
    }
    Ok(())
}

/// Refuses to write to a target that holds a known signature or is a
/// mounted block device, unless forced.
pub fn check_writable(target: &Target, force: bool) -> anyhow::Result<()> {
    if force || target.created {
        return Ok(());
    }
    if let Some(path) = &target.path {
        if let Some(mount) = mounted_at(path) {
            bail!(
                "{}: is mounted at {mount}; writing to it would corrupt that file system. \
                 Unmount it, or pass --force if you really mean it",
                path.display()
            );
        }
    }
    if let Some(what) = device::signature::probe(target.device.as_ref())? {
        bail!(
            "{}: holds data ({what}); this workload writes and would destroy it. \
             Use another target, or pass --force to overwrite it",
            target.device.name()
        );
    }
    Ok(())
}

/// Where a block device is mounted, from /proc/self/mounts.
fn mounted_at(path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let source = fields.next()?;
        let point = fields.next()?;
        (source.starts_with('/') && std::fs::canonicalize(source).ok()? == real).then(|| point.to_string())
    })
}
