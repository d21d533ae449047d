//! The `log` policy's device: iolab's block log (the `blocklog` crate) on
//! the file system's own log region, WAPBL's design. The file system
//! reaches it through the device interface only: metadata blocks are
//! ordinary writes, which join the open transaction; file data goes in
//! place with `write_unlogged`; a flush commits (the data first, then the
//! records and the header that commits them).
//!
//! Every mount and every fsck replays what the region holds committed
//! before reading anything else, whatever the policy, so an image left by
//! a crash under `log` is whole before it is looked at.

use std::sync::Arc;

use blocklog::{LoggedDevice, Mode, Placement, ReplayReport};
use device::Slice;

use crate::format::{Superblock, BLOCK_BYTES};
use crate::{Dev, FsError};

/// The log region of `raw` as a device of its own.
pub(crate) fn region(raw: &Dev, sb: &Superblock) -> Result<Dev, FsError> {
    let start = sb.log_start_block * BLOCK_BYTES as u64;
    let bytes = sb.log_blocks * BLOCK_BYTES as u64;
    Ok(Arc::new(Slice::new(Arc::clone(raw), start, bytes)?))
}

/// Damage in the log region that keeps its commits from being replayed
/// whole (fsck's `damaged_log`).
#[derive(Clone, Debug)]
pub enum LogDamage {
    /// Replay stopped at a damaged commit: the commits before it are
    /// home, those from it on are lost.
    Stopped(blocklog::ReplayStop),
    /// Neither header slot can be read, yet they are not blank: where
    /// the log's records begin is lost, and whatever it held committed.
    Headers(String),
}

impl std::fmt::Display for LogDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogDamage::Stopped(stop) => write!(f, "{stop}"),
            LogDamage::Headers(why) => write!(
                f,
                "neither of the log's header slots can be read ({why}), and they are not blank: what the log \
                 held committed is lost"
            ),
        }
    }
}

/// Replays what the log region of `raw` holds committed, writing it home.
/// `None` when the region holds no log (a file system never mounted with
/// `log`). Damage that stops the replay (a damaged commit, now or at an
/// earlier mount; both header slots unreadable) is an error naming fsck,
/// which reports it and repairs it with `-y` (`replay_or_damage`).
pub fn replay(raw: &Dev, sb: &Superblock) -> Result<Option<ReplayReport>, FsError> {
    match replay_or_damage(raw, sb)? {
        Ok(replayed) => Ok(replayed),
        Err(damage) => Err(FsError::DamagedLog(damage.to_string())),
    }
}

/// As [`replay`], but damage in the log is returned for fsck to report
/// (the commits before a damaged one are home all the same) rather than
/// made an error.
pub(crate) fn replay_or_damage(
    raw: &Dev,
    sb: &Superblock,
) -> Result<Result<Option<ReplayReport>, LogDamage>, FsError> {
    let log = region(raw, sb)?;
    let header = match LoggedDevice::probe(log.as_ref()) {
        Ok(header) => header,
        Err(e @ (blocklog::LogError::Field { .. } | blocklog::LogError::Version { .. })) => {
            return Ok(Err(LogDamage::Headers(e.to_string())))
        }
        Err(e) => return Err(log_error(e)),
    };
    if header.is_none() {
        let mut slots = vec![0u8; 2 * blocklog::SLOT_BYTES as usize];
        log.read_at(&mut slots, 0)?;
        if slots.iter().all(|&b| b == 0) {
            return Ok(Ok(None));
        }
        return Ok(Err(LogDamage::Headers("a wrong magic or checksum in both".into())));
    }
    match LoggedDevice::open(Arc::clone(raw), Some(log), Mode::Log) {
        Ok(logged) => Ok(Ok(Some(logged.replay_report().clone()))),
        Err(blocklog::LogError::Stopped { stop, .. }) => Ok(Err(LogDamage::Stopped(stop))),
        Err(e) => Err(log_error(e)),
    }
}

/// fsck's repair of damage in the log (`-y`): a stopped log drops the
/// commits from the damage on and starts again past them
/// (`blocklog::repair`); unreadable header slots are made blank, a
/// region with no log (the next `log` mount formats one).
pub(crate) fn repair(raw: &Dev, sb: &Superblock, damage: &LogDamage) -> Result<(), FsError> {
    let log = region(raw, sb)?;
    match damage {
        LogDamage::Stopped(_) => {
            blocklog::repair(log.as_ref()).map_err(log_error)?;
        }
        LogDamage::Headers(_) => {
            let zeros =
                device::AlignedBuf::zeroed(2 * blocklog::SLOT_BYTES as usize, log.buffer_align().max(4096));
            log.write_at(&zeros, 0)?;
            log.flush()?;
        }
    }
    Ok(())
}

/// The device a `log` mount writes through: the region's log, replayed,
/// or a new one. Committed blocks stay in memory (reads see them) until a
/// checkpoint writes them home, as WAPBL delays metadata writes.
pub(crate) fn open(raw: &Dev, sb: &Superblock) -> Result<(Arc<LoggedDevice>, ReplayReport), FsError> {
    let log = region(raw, sb)?;
    let logged = if LoggedDevice::probe(log.as_ref()).map_err(log_error)?.is_some() {
        LoggedDevice::open(Arc::clone(raw), Some(log), Mode::Log).map_err(log_error)?
    } else {
        // In blocks: the file system writes nothing smaller, and its maps
        // and records then hold an entry per block, not per 512 B.
        LoggedDevice::format_in_units(
            Arc::clone(raw),
            Placement::Separate { log },
            Mode::Log,
            BLOCK_BYTES as u32,
        )
        .map_err(log_error)?
    };
    let report = logged.replay_report().clone();
    Ok((Arc::new(logged), report))
}

fn log_error(e: blocklog::LogError) -> FsError {
    FsError::Invalid(format!("the file system's log: {e}"))
}
