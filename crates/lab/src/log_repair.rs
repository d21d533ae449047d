//! A block log's repair (`iolab log repair`): the commits a replay could
//! not replay because it stopped at damage are dropped; until then the
//! log refuses to serve, so that no later open replays a commit whose
//! predecessor was lost (docs/log.md, "Damage and repair").

use std::path::Path;
use std::sync::Arc;

use anyhow::bail;
use blocklog::{LogError, LoggedDevice, Mode, Repaired};
use device::{Device, FileDevice, FileOptions, LockKind};

use crate::stack::{self, Stack};

/// What came of a repair.
pub enum Outcome {
    /// The replay found no damage: nothing was changed.
    Whole,
    /// The damaged commits were dropped; `found` says which log it was.
    Repaired { repaired: Box<Repaired>, found: Found },
}

/// Repairs the block log of `target` (inside it, or on `log_device`):
/// the target opened for writing under an exclusive lock.
pub fn repair(target: &str, log_device: Option<&Path>) -> anyhow::Result<Outcome> {
    let options = stack::OpenOptions {
        direct: false,
        read_only: false,
        sector_bytes: None,
        create_bytes: None,
        lock: stack::Lock::Require(LockKind::Exclusive),
    };
    let target = Stack::open(target, &options)?;
    let found = find(&target, log_device)?;
    let log = match &found {
        Found::Device { data, log } => log.clone().unwrap_or_else(|| Arc::clone(data)),
        Found::FileSystem { region, .. } => Arc::clone(region),
        Found::Stripe { log } => Arc::clone(log),
    };
    if !replay_finds_damage(&found)? {
        return Ok(Outcome::Whole);
    }
    let Some(repaired) = blocklog::repair(log.as_ref())? else {
        bail!("{}: the block log's replay stopped, yet its header is not marked so", log.name());
    };
    Ok(Outcome::Repaired { repaired: Box::new(repaired), found })
}

/// Where a target's log is, and what it protects.
pub enum Found {
    /// A device's block log: at the start of `data`, or on `log`.
    Device { data: Arc<dyn Device>, log: Option<Arc<dyn Device>> },
    /// A file system's log, in its log region.
    FileSystem { raw: Arc<dyn Device>, region: Arc<dyn Device> },
    /// A RAID-5 volume's stripe log, on its log drive.
    Stripe { log: Arc<dyn Device> },
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
