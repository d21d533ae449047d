//! Stacks: what a command runs on, built in one place. A stack is a base
//! (a file or block device, `mem:`, `null:`, a temporary file, a volume of
//! a Vinum set, or devices a command made itself) and layers above it
//! (the block log; the file system next), opened bottom-up; `close` and
//! `record` walk them top-down (checkpoint the log, record the volume's
//! states and counters, remove a temporary file), and `discard` undoes
//! what opening did when a command is refused before it ran.
//!
//! Every command that opens a stack (run, bonnie, validate, the sweeps,
//! crash) does it through here, so a layer is put on, replayed and closed
//! one way only.

pub(crate) mod base;
mod log;
mod safety;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use blocklog::LoggedDevice;
use device::Device;

pub use base::{open_sim_keeping, sim_clock, Lock, OpenOptions, DEFAULT_TARGET_BYTES};
pub use log::{log_over, reopen_log_over, LogOptions, LogPlan};
pub use safety::{check_writable, check_writable_behind};

/// A layer above the base, in the order it was put on.
pub enum Layer {
    /// The base is a volume of this set.
    Volume { set: Box<volume::VolumeSet>, volume: Arc<volume::Volume> },
    /// The block log (`--log`).
    Log(Arc<LoggedDevice>),
    /// A scratch view: writes above it stay in memory, so a read-only
    /// command can replay a log or mount a file system without changing
    /// the target.
    Scratch,
}

/// What opening the base did to the file system, for `discard` and the
/// safety checks.
#[derive(Default)]
pub struct Origin {
    /// The temporary directory iolab made for the base (removed on close).
    pub temp: Option<tempfile::TempDir>,
    /// The file did not exist before this command.
    pub created: bool,
    /// The file existed but was empty; this command sized it.
    pub was_empty: bool,
    /// Opened read-only (a job that only reads an existing file).
    pub read_only: bool,
    /// The path the user named, whose data would be overwritten.
    pub path: Option<PathBuf>,
    /// A directory target: the files this command created in it (removed
    /// if the command is refused; `created` says all of them were new).
    pub made_files: Vec<PathBuf>,
    /// The base is a simulated disk (`sim:`), in memory, in virtual time.
    pub simulated: bool,
    /// That disk, and whether its spec said what to do with data.
    pub sim: Option<SimBase>,
}

/// A stack's simulated base disk.
#[derive(Clone)]
pub struct SimBase {
    pub disk: Arc<sim::SimDevice>,
    pub data_given: bool,
}

impl std::fmt::Debug for SimBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimBase({})", self.disk.spec())
    }
}

/// What a closed stack leaves to report.
#[derive(Default)]
pub struct Closed {
    /// The block log's mode and counters after its closing checkpoint.
    pub log: Option<(blocklog::Mode, blocklog::LogStats)>,
}

/// An open stack: its top device, where its base came from, its layers.
pub struct Stack {
    device: Arc<dyn Device>,
    pub origin: Origin,
    layers: Vec<Layer>,
}

impl Stack {
    /// A stack of one device a command made itself (memory, devices a crash
    /// test records): nothing to protect, nothing to undo.
    pub fn over(device: Arc<dyn Device>) -> Stack {
        Stack { device, origin: Origin { created: true, ..Origin::default() }, layers: Vec::new() }
    }

    /// The top of the stack: what workloads read and write.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// The volume at the base, if the base is one.
    pub fn volume(&self) -> Option<&Arc<volume::Volume>> {
        self.layers.iter().find_map(|l| match l {
            Layer::Volume { volume, .. } => Some(volume),
            Layer::Log(_) | Layer::Scratch => None,
        })
    }

    /// The block log, if the stack has one.
    pub fn log(&self) -> Option<&Arc<LoggedDevice>> {
        self.layers.iter().find_map(|l| match l {
            Layer::Log(log) => Some(log),
            Layer::Volume { .. } | Layer::Scratch => None,
        })
    }

    /// Puts a scratch view on top: what is written above it stays in
    /// memory and is gone at close.
    pub fn scratch(mut self) -> Stack {
        let view: Arc<dyn Device> = Arc::new(device::Overlay::over(Arc::clone(&self.device)));
        self.push(view, Layer::Scratch);
        self
    }

    fn push(&mut self, device: Arc<dyn Device>, layer: Layer) {
        self.device = device;
        self.layers.push(layer);
    }

    /// After a command used the stack, whether it succeeded or not: says
    /// what a volume did on its own (a drive taken down after a failed
    /// flush), records its state changes and adds its counters to the
    /// statistics on the drives. The log is left as it is.
    pub fn record(&self) -> anyhow::Result<()> {
        for layer in self.layers.iter().rev() {
            if let Layer::Volume { set, volume } = layer {
                for event in volume.take_events() {
                    crate::say::warning(format!("volume {}: {event}", volume.name()));
                }
                volume.checkpoint_write_ahead_log()?;
                set.save()?;
                set.save_stats()?;
            }
        }
        Ok(())
    }

    /// A clean end, top-down: the log checkpointed (everything committed
    /// and home, as at an unmount), the volume recorded, a temporary base
    /// removed. Returns the log's counters after its checkpoint.
    pub fn close(self) -> anyhow::Result<Closed> {
        let mut closed = Closed::default();
        if let Some(log) = self.log() {
            log.checkpoint().with_context(|| format!("{}: cannot checkpoint the block log", log.name()))?;
            closed.log = Some((log.mode(), log.log_stats()));
        }
        self.record()?;
        let Stack { device, origin, layers } = self;
        drop(layers);
        drop(device);
        if let Some(temp) = origin.temp {
            let where_ = temp.path().display().to_string();
            temp.close().with_context(|| format!("{where_}: cannot remove the temporary target"))?;
            crate::say::info(format!("the temporary target in {where_} has been removed"));
        }
        Ok(closed)
    }

    /// A command was refused after the stack was opened: undoes what
    /// opening the base did, so a usage error leaves no file behind and
    /// every file as it was.
    pub fn discard(self) {
        let Stack { device, origin, layers } = self;
        drop(layers);
        drop(device);
        let Origin { temp, created, was_empty, path, made_files, .. } = origin;
        if temp.is_some() {
            return; // Dropping the directory removes the file in it.
        }
        if path.as_deref().is_some_and(Path::is_dir) {
            for file in made_files {
                if let Err(e) = std::fs::remove_file(&file) {
                    crate::say::warning(format!("{}: could not undo its creation: {e}", file.display()));
                }
            }
            return;
        }
        let Some(path) = path else { return };
        let undone = if created {
            std::fs::remove_file(&path)
        } else if was_empty {
            std::fs::OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(0))
        } else {
            Ok(())
        };
        if let Err(e) = undone {
            crate::say::warning(format!("{}: could not undo its creation: {e}", path.display()));
        }
    }
}
