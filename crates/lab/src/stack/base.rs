//! The base of a stack: a file or block device path, `mem:SIZE`,
//! `null:SIZE`, a volume of a Vinum set (`volume:NAME:DRIVES` or a
//! configuration file), or a temporary file when none is named.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use device::{Concat, Device, FileDevice, FileOptions, LockKind, MemDevice, NullDevice};
use workloads::spec::parse_bytes;

use super::{Layer, Origin, Stack};
use crate::UsageError;

/// Size of the temporary target made when no target is named.
pub const DEFAULT_TARGET_BYTES: u64 = 1 << 30;

pub struct OpenOptions {
    pub direct: bool,
    /// Open an existing file or device read-only (a job that only reads,
    /// a check); a file that must be created is opened read-write all the
    /// same.
    pub read_only: bool,
    pub sector_bytes: Option<u32>,
    /// Bytes needed if a file must be created (offset + region size).
    pub create_bytes: Option<u64>,
    /// The lock to take on a file or device opened.
    pub lock: Lock,
}

impl OpenOptions {
    /// A target a command writes as a benchmark does: read-write, a
    /// missing file made of `create_bytes`, another writer warned of.
    pub fn benchmark(direct: bool, create_bytes: Option<u64>) -> OpenOptions {
        OpenOptions {
            direct,
            read_only: false,
            sector_bytes: None,
            create_bytes,
            lock: Lock::Warn(device::LockKind::Exclusive),
        }
    }
}

/// How an open target is kept from other iolab processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Two runs on one plain file measure each other but damage nothing
    /// iolab promised (fio and Vdbench take no lock): a warning.
    Warn(LockKind),
    /// A target behind the block log, or one being checked: two processes
    /// would replay and commit one log at once, or check what is changing.
    /// An error naming the holder.
    Require(LockKind),
    /// Under `mpirun ... --mpi-layout shared`: the other holders are this
    /// run's other ranks, each on its own part of the target; no warning.
    Ranks(LockKind),
}

/// The virtual clock every simulated disk of this process shares, so the
/// disks of one stack see one time.
pub fn sim_clock() -> Arc<sim::VirtualClock> {
    static CLOCK: std::sync::OnceLock<Arc<sim::VirtualClock>> = std::sync::OnceLock::new();
    Arc::clone(CLOCK.get_or_init(sim::VirtualClock::new))
}

/// A simulated disk of its own for a layer that reads back what it
/// writes (a journal), on the process's one clock; `flag` names it in
/// errors.
pub fn open_sim_keeping(spec: &str, flag: &str) -> Result<Arc<dyn Device>, UsageError> {
    let model = spec.strip_prefix("sim:").unwrap_or(spec);
    let mut parsed = sim::SimSpec::parse(model).map_err(|e| UsageError(format!("--{flag} {spec}: {e}")))?;
    if parsed.data() == sim::Data::Discard {
        return Err(UsageError(format!(
            "--{flag} {spec}: it must keep what is written to it; leave data= out"
        )));
    }
    parsed.set_data(sim::Data::Keep);
    let dev = sim::SimDevice::new(spec, parsed, sim_clock())
        .map_err(|e| UsageError(format!("--{flag} {spec}: {e}")))?;
    Ok(dev)
}

impl Stack {
    /// Opens the base `spec` names (see the module's doc); a simulated disk
    /// is refused: only commands whose engine runs in virtual time take
    /// one (`Stack::open_or_simulate`).
    pub fn open(spec: &str, options: &OpenOptions) -> anyhow::Result<Stack> {
        if spec.starts_with("sim:") {
            return Err(UsageError(format!(
                "--target {spec}: simulated disks run under iolab run (and sweep stripes --workload fs, sweep \
                 policies --disk) for now, which keep their virtual time; this command would time them by the \
                 wall clock"
            ))
            .into());
        }
        Stack::open_or_simulate(spec, options)
    }

    /// As [`Stack::open`], and also `sim:MODEL[,PARAM=VALUE...]`: a
    /// simulated disk in memory whose requests take modeled time.
    pub fn open_or_simulate(spec: &str, options: &OpenOptions) -> anyhow::Result<Stack> {
        if let Some(model) = spec.strip_prefix("sim:") {
            let parsed =
                sim::SimSpec::parse(model).map_err(|e| UsageError(format!("--target {spec}: {e}")))?;
            let dev = sim::SimDevice::new(spec, parsed, sim_clock())
                .map_err(|e| UsageError(format!("--target {spec}: {e}")))?;
            let data_given = model.split(',').any(|p| p.starts_with("data="));
            let mut stack = Stack::over(Arc::clone(&dev) as Arc<dyn Device>);
            stack.origin.simulated = true;
            stack.origin.sim = Some(super::SimBase { disk: dev, data_given });
            return Ok(stack);
        }
        if let Some(size) = spec.strip_prefix("mem:") {
            let bytes = parse_bytes("target", size).map_err(UsageError::from)?;
            let sector = options.sector_bytes.unwrap_or(512);
            let dev = MemDevice::with_sector(format!("mem:{size}"), bytes, sector)
                .map_err(|e| UsageError(format!("--target: {e}")))?;
            return Ok(Stack::over(Arc::new(dev)));
        }
        if let Some(size) = spec.strip_prefix("null:") {
            let bytes = parse_bytes("target", size).map_err(UsageError::from)?;
            let dev = NullDevice::new(bytes).map_err(|e| UsageError(format!("--target: {e}")))?;
            return Ok(Stack::over(Arc::new(dev)));
        }
        if let Some(rest) = spec.strip_prefix("volume:") {
            let (name, drives) = rest.split_once(':').ok_or_else(|| {
                UsageError(format!(
                    "--target: '{spec}' needs volume:NAME:DRIVE[,DRIVE...] (drives or a configuration file)"
                ))
            })?;
            let paths: Vec<PathBuf> = drives.split(',').map(PathBuf::from).collect();
            return open_volume(crate::assemble::assemble_for_io(&paths, options.direct)?, Some(name), spec);
        }
        let path = Path::new(spec);
        if path.is_dir() {
            return Err(UsageError(format!(
                "--target: {spec} is a directory; iolab run spreads a job over files in one (--nrfiles N, fio's \
                 directory= and nrfiles=), iolab bonnie runs there as bonnie++ -d; this command needs a file or a \
                 device"
            ))
            .into());
        }
        if let Some(set) = volume_config(path, options.direct)? {
            return open_volume(set, None, spec);
        }
        open_file(path, options)
    }

    /// `files` files in directory `dir`, `PREFIX.0.0` ... (fio's names
    /// for job 0 of a job named PREFIX), one after another as one device (fio's
    /// `file_service_type=sequential`). Missing files are made sparse,
    /// `create_bytes` split evenly over them (in 4 KiB); existing ones are
    /// taken as they are, but must have that size when it is given.
    pub fn open_directory(
        dir: &Path,
        files: u32,
        prefix: &str,
        options: &OpenOptions,
    ) -> anyhow::Result<Stack> {
        if files == 0 {
            return Err(UsageError("--nrfiles: give at least 1".into()).into());
        }
        let per_file = options.create_bytes.map(|b| b / u64::from(files) / 4096 * 4096);
        let names: Vec<PathBuf> = (0..files).map(|n| dir.join(format!("{prefix}.0.{n}"))).collect();
        let mut members: Vec<Arc<dyn Device>> = Vec::with_capacity(names.len());
        let mut made = Vec::new();
        let opened = (|| -> anyhow::Result<()> {
            for name in &names {
                let exists = name.exists();
                check_member(dir, name, files, per_file)?;
                let file_options = FileOptions {
                    direct: options.direct,
                    dsync: false,
                    read_only: options.read_only && exists,
                    create_bytes: if exists { None } else { per_file },
                    sector_bytes: options.sector_bytes,
                };
                let dev = FileDevice::open(name, &file_options)?;
                if !exists {
                    made.push(name.clone());
                }
                take_lock(&dev, options.lock)?;
                members.push(Arc::new(dev));
            }
            Ok(())
        })();
        if let Err(e) = opened {
            drop(members);
            for file in &made {
                let _ = std::fs::remove_file(file);
            }
            return Err(e);
        }
        let set =
            Concat::new(format!("{} ({})", dir.display(), report::counted(files, "file", "files")), members)?;
        let origin = Origin {
            created: made.len() == names.len(),
            read_only: options.read_only && made.is_empty(),
            path: Some(dir.to_path_buf()),
            made_files: made,
            ..Origin::default()
        };
        Ok(Stack { device: Arc::new(set), origin, layers: Vec::new() })
    }

    /// A sparse temporary file in the system's temporary directory, opened
    /// with O_DIRECT where the file system allows it; removed on close.
    /// Returns whether O_DIRECT was taken.
    pub fn temporary(size_bytes: u64) -> anyhow::Result<(Stack, bool)> {
        let dir = tempfile::Builder::new()
            .prefix("iolab-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let path = dir.path().join("target");
        let mut options = FileOptions { direct: true, create_bytes: Some(size_bytes), ..Default::default() };
        let (dev, direct) = match FileDevice::open(&path, &options) {
            Ok(dev) => (dev, true),
            Err(_) => {
                options.direct = false;
                (FileDevice::open(&path, &options)?, false)
            }
        };
        let origin = Origin { temp: Some(dir), created: true, path: Some(path), ..Origin::default() };
        Ok((Stack { device: Arc::new(dev), origin, layers: Vec::new() }, direct))
    }
}

fn open_file(path: &Path, options: &OpenOptions) -> anyhow::Result<Stack> {
    let spec = path.display();
    let exists = path.exists();
    if !exists && path.starts_with("/dev") && !path.starts_with("/dev/shm") {
        // A name under /dev (but in /dev/shm, the tmpfs for files) is a
        // device's: --size would make a plain file there, which no device
        // is.
        return Err(UsageError(format!(
            "--target: {spec} does not exist: no such device (lsblk lists the block devices; a file target \
             belongs outside /dev)"
        ))
        .into());
    }
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
    let origin = Origin {
        temp: None,
        created: !exists,
        was_empty: exists && empty,
        read_only: file_options.read_only,
        path: Some(path.to_path_buf()),
        made_files: Vec::new(),
        simulated: false,
        sim: None,
    };
    Ok(Stack { device: Arc::new(dev), origin, layers: Vec::new() })
}

/// A file of a directory target as `open_directory` may take it: one
/// that exists has the size `--size` gives each file, a missing one is
/// made of that size (which must be at least 4 KiB).
fn check_member(dir: &Path, name: &Path, files: u32, per_file: Option<u64>) -> Result<(), UsageError> {
    let length = std::fs::metadata(name).map(|m| m.len()).ok();
    let the_files = match files {
        1 => "the file".to_string(),
        n => format!("the {n} files"),
    };
    match (name.exists(), per_file) {
        (false, None) => {
            // Files already there that are not iolab's are not taken for
            // its own (a directory target runs on files it names).
            let others = std::fs::read_dir(dir).map_or(0, |entries| {
                entries.flatten().filter(|e| !e.file_name().to_string_lossy().starts_with("iolab.")).count()
            });
            let held = match others {
                0 => String::new(),
                1 => " (the one file it holds is not one of iolab's, which are named iolab.T.N)".to_string(),
                n => format!(" (the {n} files it holds are not iolab's, which are named iolab.T.N)"),
            };
            Err(UsageError(format!(
                "--target {}: {} does not exist{held}; give --size to make {the_files} sparse (the size split \
                 over them), and --nrfiles for more than one",
                dir.display(),
                name.display()
            )))
        }
        (_, Some(0)) => Err(UsageError(format!(
            "--size: too small for {} of at least 4 KiB each",
            report::counted(files, "file", "files")
        ))),
        (true, Some(want)) if length != Some(want) => Err(UsageError(format!(
            "{}: holds {} bytes, not the {want} that --size gives each of {}; remove it or give the \
             size the files have",
            name.display(),
            length.unwrap_or(0),
            report::counted(files, "file", "files")
        ))),
        _ => Ok(()),
    }
}

/// Takes `lock` on `dev`. A lock held by another open in this process (two
/// jobs of one job file on one file) is not a conflict with another run.
pub(super) fn take_lock(dev: &FileDevice, lock: Lock) -> anyhow::Result<()> {
    let (kind, required) = match lock {
        Lock::Warn(kind) | Lock::Ranks(kind) => (kind, false),
        Lock::Require(kind) => (kind, true),
    };
    match dev.lock(kind) {
        Ok(()) => Ok(()),
        Err(device::DeviceError::Locked { pid: Some(pid), .. }) if pid == std::process::id() && !required => {
            Ok(())
        }
        Err(device::DeviceError::Locked { .. }) if matches!(lock, Lock::Ranks(_)) => Ok(()),
        Err(device::DeviceError::Locked { path, holder, .. }) if !required => {
            crate::say::warning(format!(
                "{} is in use by {holder}; the two runs will measure each other",
                path.display()
            ));
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A Vinum configuration file given as a target: its drives are assembled.
/// Anything else (a drive, a device, a data file) is not a configuration.
fn volume_config(path: &Path, direct: bool) -> anyhow::Result<Option<volume::VolumeSet>> {
    let small_file = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() < 1 << 20);
    let text = if small_file { std::fs::read_to_string(path).ok() } else { None };
    let Some(text) = text else { return Ok(None) };
    let is_config = match volume::parse(&text) {
        Ok(config) => !config.drives.is_empty(),
        // A configuration with a mistake is not a data file to overwrite.
        Err(e) if looks_like_config(&text) => {
            return Err(
                UsageError(format!("{}: reads as a volume configuration, but {e}", path.display())).into()
            )
        }
        Err(_) => false,
    };
    if !is_config {
        return Ok(None);
    }
    Ok(Some(crate::assemble::assemble_for_io(&[path.to_path_buf()], direct)?))
}

/// Text whose first word (past comments) is one of Vinum's: a
/// configuration, whether or not it parses.
fn looks_like_config(text: &str) -> bool {
    let first = text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).find(|l| !l.is_empty());
    first
        .and_then(|l| l.split_whitespace().next())
        .is_some_and(|w| matches!(w, "drive" | "volume" | "plex" | "sd"))
}

fn open_volume(set: volume::VolumeSet, name: Option<&str>, spec: &str) -> anyhow::Result<Stack> {
    let volume = match name {
        Some(name) => {
            set.volume(name).ok_or_else(|| UsageError(format!("--target: no volume '{name}' in {spec}")))?
        }
        None if set.volumes.len() == 1 => Arc::clone(&set.volumes[0]),
        // Assembly refuses a configuration without volumes; said plainly all the same.
        None if set.volumes.is_empty() => {
            return Err(UsageError(format!(
                "--target: {spec} holds no volume: its configuration defines none"
            ))
            .into())
        }
        None => {
            let names: Vec<&str> = set.volumes.iter().map(|v| v.name()).collect();
            return Err(UsageError(format!(
                "--target: {spec} holds several volumes ({}); name one: volume:NAME:{spec}",
                names.join(", ")
            ))
            .into());
        }
    };
    let device: Arc<dyn Device> = volume.clone();
    let mut stack = Stack { device: Arc::clone(&device), origin: Origin::default(), layers: Vec::new() };
    stack.push(device, Layer::Volume { set: Box::new(set), volume });
    Ok(stack)
}
