//! The block-log layer: planned before anything is written (an existing
//! log probed, a new one laid out on paper), then put on: replayed or
//! formatted. Commands and crash tests alike put logs on here.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use blocklog::{HomeWrites, LogError, LoggedDevice, Mode, Placement, ReplayStop};
use device::{Device, FileDevice, FileOptions, LockKind};

use super::base::{take_lock, Lock};
use super::{Layer, Origin, Stack};
use crate::UsageError;

/// How to put a stack behind the block log (`--log`).
pub struct LogOptions {
    pub mode: Mode,
    pub log_bytes: Option<u64>,
    pub log_device: Option<PathBuf>,
    pub home_writes: HomeWrites,
    pub direct: bool,
    pub force: bool,
    /// Refuse to format: the log must be there already (checking a target).
    pub must_exist: bool,
    /// A read-only command: a separate log device is opened read-only
    /// under a shared lock, behind a scratch view its replay writes to
    /// (the stack's top should be a scratch view too; see `Stack::scratch`).
    pub read_only: bool,
}

/// What putting a stack behind the block log will do, decided before
/// anything is written: the geometry of the logged device it makes.
pub struct LogPlan {
    log_dev: Option<Arc<dyn Device>>,
    action: LogAction,
    /// Size and sector of the logged device: what a job is checked on.
    pub data_bytes: u64,
    pub sector_bytes: u32,
    /// The target's own log is used again, at its start: its signature is
    /// that log's, and what the log protects starts at this byte.
    pub reused_inside: Option<u64>,
}

enum LogAction {
    /// Replay the log the target holds and use it.
    Open,
    /// Replay the old log (of another size), then format a new one.
    Replace(Placement),
    /// Format a new log.
    Format(Placement),
}

impl Stack {
    /// Checks everything `--log` needs and writes nothing: an existing log
    /// is probed (read), a new one planned; a target holding data is
    /// refused without `--force` before its log region is touched.
    pub fn plan_log(&self, options: &LogOptions) -> anyhow::Result<LogPlan> {
        let log_dev = open_log_device(options)?;
        let holder: Arc<dyn Device> = log_dev.clone().unwrap_or_else(|| Arc::clone(&self.device));
        let placement = || match &log_dev {
            Some(log) => Placement::Separate { log: Arc::clone(log) },
            None => Placement::Inside {
                log_bytes: options
                    .log_bytes
                    .unwrap_or_else(|| blocklog::default_log_bytes(self.device.size_bytes())),
            },
        };
        let new = match LoggedDevice::probe(holder.as_ref())? {
            Some(header) if options.log_bytes.is_some_and(|b| b / 4096 * 4096 != header.log_bytes) => {
                if !options.force {
                    return Err(UsageError(format!(
                        "{}: already holds a block log of {} bytes, not {}; drop --log-size to use it, \
                         or pass --force to replay it and format a new one",
                        holder.name(),
                        header.log_bytes,
                        options.log_bytes.unwrap_or(0)
                    ))
                    .into());
                }
                LogAction::Replace(placement())
            }
            Some(header) => return self.plan_reuse(header, log_dev, options),
            None if options.must_exist => {
                bail!(
                    "{}: holds no iolab block log to replay (was it made with --log or --block-log?)",
                    holder.name()
                );
            }
            None => {
                self.check_new_log(log_dev.as_ref(), options)?;
                LogAction::Format(placement())
            }
        };
        let (LogAction::Replace(placement) | LogAction::Format(placement)) = &new else {
            bail!("a log is opened, replaced or formatted");
        };
        let (header, _, _) = LoggedDevice::plan(&self.device, placement.clone())
            .map_err(|e| UsageError(format!("--log: {e}")))?;
        let (data_bytes, sector_bytes) = (header.data_bytes, header.sector_bytes);
        Ok(LogPlan { log_dev, action: new, data_bytes, sector_bytes, reused_inside: None })
    }

    /// The log `header` describes, used again as docs/log.md promises
    /// (replayed first), once it is known to fit this target and not to
    /// be marked stopped at damage; writes nothing.
    fn plan_reuse(
        &self,
        header: blocklog::Header,
        log_dev: Option<Arc<dyn Device>>,
        options: &LogOptions,
    ) -> anyhow::Result<LogPlan> {
        let log = log_dev.clone().unwrap_or_else(|| Arc::clone(&self.device));
        LoggedDevice::check(&header, self.device.as_ref(), log.as_ref(), log_dev.is_some())
            .map_err(|e| UsageError(format!("--log: {e}; it was made with another geometry")))?;
        if let Some(stop) = ReplayStop::from_header(&header) {
            return Err(self.refused(log.name(), &stop, options));
        }
        let reused_inside = log_dev.is_none().then_some(header.data_offset);
        let (data_bytes, sector_bytes) = (header.data_bytes, header.sector_bytes);
        Ok(LogPlan { log_dev, action: LogAction::Open, data_bytes, sector_bytes, reused_inside })
    }

    /// A new log: the target (and the log device) must hold nothing the
    /// user may not mean to lose, a log of the target's own included.
    fn check_new_log(&self, log_dev: Option<&Arc<dyn Device>>, options: &LogOptions) -> anyhow::Result<()> {
        let (Some(log), Some(path)) = (log_dev, &options.log_device) else {
            return super::check_writable(self, options.force);
        };
        if !options.force && LoggedDevice::probe(self.device.as_ref())?.is_some() {
            return Err(UsageError(format!(
                "{}: holds a block log at its start, made without --log-device; drop --log-device {} to use \
                 it, or pass --force to put a new log there and the whole target behind it",
                self.device.name(),
                path.display()
            ))
            .into());
        }
        super::check_writable(self, options.force)?;
        let origin = Origin { path: Some(path.clone()), ..Origin::default() };
        let log_stack = Stack { device: Arc::clone(log), origin, layers: Vec::new() };
        super::check_writable(&log_stack, options.force)
    }

    /// The refusal of a log whose replay stopped at damage, with the
    /// command that repairs it.
    fn refused(&self, log: &str, stop: &ReplayStop, options: &LogOptions) -> anyhow::Error {
        let target = self
            .origin
            .path
            .as_deref()
            .map_or_else(|| self.device.name().to_string(), |p| p.display().to_string());
        let device =
            options.log_device.as_ref().map_or(String::new(), |d| format!(" --log-device {}", d.display()));
        anyhow::anyhow!(
            "{log}: {stop}. The log refuses to serve until it is repaired: `iolab log repair --target \
             {target}{device}` drops those commits (the data keeps every commit before them); check the data \
             after it"
        )
    }

    /// Puts the stack behind the block log as `plan` decided: replays the
    /// log it holds, or formats a new one.
    pub fn push_log(mut self, plan: LogPlan, options: &LogOptions) -> anyhow::Result<Stack> {
        let data = Arc::clone(&self.device);
        let holder = plan.log_dev.as_ref().map_or_else(|| data.name().to_string(), |d| d.name().to_string());
        let format = |placement| {
            LoggedDevice::format(Arc::clone(&data), placement, options.mode)
                .map_err(|e| UsageError(format!("--log: {e}")))
        };
        let opened = |log| {
            LoggedDevice::open(Arc::clone(&data), log, options.mode).map_err(|e| match e {
                LogError::Stopped { device, stop } => self.refused(&device, &stop, options),
                other => other.into(),
            })
        };
        let logged = match plan.action {
            LogAction::Open => {
                let logged = opened(plan.log_dev)?;
                report_replay(&logged, &holder);
                logged
            }
            LogAction::Replace(placement) => {
                // Replay what the old log committed before its region is reused.
                let old = opened(plan.log_dev.clone())?;
                report_replay(&old, &holder);
                drop(old);
                format(placement)?
            }
            LogAction::Format(placement) => format(placement)?,
        };
        logged.set_home_writes(options.home_writes)?;
        let logged = Arc::new(logged);
        self.push(logged.clone(), Layer::Log(logged));
        Ok(self)
    }
}

fn open_log_device(options: &LogOptions) -> anyhow::Result<Option<Arc<dyn Device>>> {
    let Some(path) = &options.log_device else { return Ok(None) };
    let file_options =
        FileOptions { direct: options.direct, read_only: options.read_only, ..Default::default() };
    let dev = FileDevice::open(path, &file_options).map_err(|e| {
        UsageError(format!("--log-device: {e} (create it first, e.g. truncate -s 16m {})", path.display()))
    })?;
    if options.read_only {
        take_lock(&dev, Lock::Require(LockKind::Shared))?;
        return Ok(Some(Arc::new(device::Overlay::over(Arc::new(dev)))));
    }
    take_lock(&dev, Lock::Require(LockKind::Exclusive))?;
    Ok(Some(Arc::new(dev)))
}

/// A new log over devices a command made itself (the crash stacks): no
/// checks, nothing to protect.
pub fn log_over(
    data: Arc<dyn Device>,
    placement: Placement,
    mode: Mode,
    home: HomeWrites,
) -> Result<LoggedDevice, String> {
    let dev = LoggedDevice::format(data, placement, mode).map_err(|e| e.to_string())?;
    dev.set_home_writes(home).map_err(|e| e.to_string())?;
    Ok(dev)
}

/// The log a crash image holds, replayed; a replay that stopped at damage
/// is an error (its later commits are lost).
pub fn reopen_log_over(
    data: Arc<dyn Device>,
    log: Option<Arc<dyn Device>>,
    mode: Mode,
) -> Result<LoggedDevice, String> {
    LoggedDevice::open(data, log, mode).map_err(|e| match e {
        // Inside a crash harness, which made the log itself: what a user
        // would do to a target without one does not apply.
        blocklog::LogError::NoLog { device } => format!(
            "{device}: no iolab block log on this image: the log the harness formatted before the first \
             transaction did not survive the crash (a disk whose write cache ignores flushes can lose it)"
        ),
        e => e.to_string(),
    })
}

fn report_replay(logged: &LoggedDevice, holder: &str) {
    let replay = logged.replay_report();
    if replay.records > 0 {
        crate::say::info(format!(
            "replayed the block log of {holder}: {} commits, {} sectors written home",
            replay.commits, replay.sectors_written_home
        ));
    }
}
