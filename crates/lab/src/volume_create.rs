//! A volume set created (`iolab volume create`): checks the whole configuration against its
//! drives before writing anything, then makes the drive files it must,
//! writes the metadata and formats stripe logs. A create that fails
//! leaves every drive as it was: nothing is written before every check
//! passed, the volume crate puts the metadata areas back if a write fails,
//! and drive files this create made are removed again.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use device::{Device, FileDevice, FileOptions, LockKind};

use crate::assemble::{attach_stripe_logs, read_config, Access};
use crate::UsageError;

/// A drive of the configuration and the file it names.
struct Planned {
    name: String,
    path: PathBuf,
    exists: bool,
}

/// What makes two paths one drive: the device for block devices, the
/// file system and inode for files, the resolved path for files yet to
/// be made.
#[derive(PartialEq, Eq)]
enum Identity {
    Device(u64),
    Inode(u64, u64),
    Path(PathBuf),
}

fn identity(path: &Path) -> Identity {
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_block_device() => Identity::Device(meta.rdev()),
        Ok(meta) => Identity::Inode(meta.dev(), meta.ino()),
        Err(_) => {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let dir = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
            Identity::Path(dir.join(path.file_name().unwrap_or_default()))
        }
    }
}

/// The drives' files, each checked to exist (or to be made with
/// `--drive-size`) and to be no other drive's.
fn plan(config: &volume::Config, base: &Path, create_bytes: Option<u64>) -> anyhow::Result<Vec<Planned>> {
    let mut planned: Vec<(Planned, Identity)> = Vec::new();
    for drive in &config.drives {
        let path = base.join(&drive.device);
        let exists = path.exists();
        if !exists && create_bytes.is_none() {
            return Err(UsageError(format!(
                "drive '{}': {} does not exist; create it or give --drive-size to make sparse files",
                drive.name,
                path.display()
            ))
            .into());
        }
        let id = identity(&path);
        if let Some((other, _)) = planned.iter().find(|(_, other)| *other == id) {
            return Err(UsageError(format!(
                "drives '{}' and '{}' are one file or device ({} and {}); give each drive its own",
                other.name,
                drive.name,
                other.path.display(),
                path.display()
            ))
            .into());
        }
        planned.push((Planned { name: drive.name.clone(), path, exists }, id));
    }
    Ok(planned.into_iter().map(|(p, _)| p).collect())
}

/// Opens a drive for create and takes it for this process alone.
fn open_locked(drive: &Planned, create_bytes: Option<u64>) -> anyhow::Result<Arc<FileDevice>> {
    let create_bytes = if drive.exists { None } else { create_bytes };
    let dev = FileDevice::open(&drive.path, &FileOptions { create_bytes, ..Default::default() })
        .with_context(|| format!("drive '{}'", drive.name))?;
    dev.lock(LockKind::Exclusive).with_context(|| format!("drive '{}'", drive.name))?;
    Ok(Arc::new(dev))
}

/// The stripe log of a RAID-5 plex takes its log drive after the
/// metadata: refuse a drive too small before anything is written.
fn check_log_drives(config: &volume::Config, sizes: &HashMap<String, u64>) -> anyhow::Result<()> {
    let needed = blocklog::AREA_START + blocklog::MIN_AREA_BYTES;
    for plex in config.volumes.iter().flat_map(|v| &v.plexes) {
        let Some(drive) = &plex.log_drive else { continue };
        let area =
            sizes.get(drive).copied().unwrap_or(0).saturating_sub(volume::DATA_START_BYTES) / 4096 * 4096;
        if area < needed {
            return Err(UsageError(format!(
                "plex {}: log drive '{drive}' leaves {area} bytes after the volume metadata; a stripe log \
                 needs {needed}: give a larger drive",
                plex.name
            ))
            .into());
        }
    }
    Ok(())
}

/// Creates the set `config_path` describes (its drive paths relative to
/// the file's directory): every check first, then the drive files made
/// (sparse, of `create_bytes`, where missing), the metadata written and
/// the stripe logs formatted. A drive holding data is refused unless
/// `force`. Returns the set made.
pub fn create(
    config_path: &Path,
    create_bytes: Option<u64>,
    force: bool,
) -> anyhow::Result<volume::VolumeSet> {
    let config = read_config(config_path)?;
    if config.drives.is_empty() || config.volumes.is_empty() {
        return Err(UsageError(format!(
            "{}: defines no drive or no volume (is it empty, or only comments?): nothing to create; it \
             needs drive, volume, plex and sd lines (see `iolab volume create --help`)",
            config_path.display()
        ))
        .into());
    }
    let base = config_path.parent().unwrap_or(Path::new("."));
    let planned = plan(&config, base, create_bytes)?;
    let mut opened: HashMap<String, Arc<FileDevice>> = HashMap::new();
    let mut sizes: HashMap<String, u64> = HashMap::new();
    for drive in &planned {
        if !drive.exists {
            sizes.insert(drive.name.clone(), create_bytes.unwrap_or(0) / 512 * 512);
            continue;
        }
        let dev = open_locked(drive, None)?;
        if !force {
            if let Some(what) = device::signature::probe(dev.as_ref())? {
                return Err(UsageError(format!(
                    "drive '{}': {} holds data ({what}); creating the volume would destroy it. \
                     Use another drive, or pass --force",
                    drive.name,
                    drive.path.display()
                ))
                .into());
            }
        }
        sizes.insert(drive.name.clone(), dev.size_bytes());
        opened.insert(drive.name.clone(), dev);
    }
    volume::check_create(&config, &sizes)
        .map_err(|e| UsageError(format!("{}: {e}", config_path.display())))?;
    check_log_drives(&config, &sizes)?;
    let mut made = Vec::new();
    let created = write_set(&config, &planned, create_bytes, opened, &mut made);
    if created.is_err() {
        for path in &made {
            // Best effort: the create's own error is the one to report.
            let _ = std::fs::remove_file(path);
        }
    }
    created
}

/// Makes the missing drive files (recorded in `made`), writes the set and
/// formats its stripe logs. The caller removes `made` if this fails.
fn write_set(
    config: &volume::Config,
    planned: &[Planned],
    create_bytes: Option<u64>,
    mut opened: HashMap<String, Arc<FileDevice>>,
    made: &mut Vec<PathBuf>,
) -> anyhow::Result<volume::VolumeSet> {
    for drive in planned.iter().filter(|d| !d.exists) {
        let dev = open_locked(drive, create_bytes);
        if drive.path.exists() {
            made.push(drive.path.clone());
        }
        opened.insert(drive.name.clone(), dev?);
    }
    let new: Vec<&str> = planned.iter().filter(|d| !d.exists).map(|d| d.name.as_str()).collect();
    let zeroed = |drive: &str, offset: u64, len: u64| {
        new.contains(&drive) || opened.get(drive).is_some_and(|dev| dev.holds_no_data(offset, len))
    };
    let devices: HashMap<String, Arc<dyn Device>> =
        opened.iter().map(|(name, dev)| (name.clone(), Arc::clone(dev) as Arc<dyn Device>)).collect();
    let set = volume::create(config, &devices, &zeroed)?;
    attach_stripe_logs(&set, true, Access::Write)?;
    Ok(set)
}
