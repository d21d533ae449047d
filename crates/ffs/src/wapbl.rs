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

/// Replays what the log region of `raw` holds committed, writing it home.
/// `None` when the region holds no log (a file system never mounted with
/// `log`). A replay that stops at damage (now, or at an earlier mount or
/// fsck) is an error until `iolab log repair` drops the commits from the
/// damage on; the image then needs fsck.
pub fn replay(raw: &Dev, sb: &Superblock) -> Result<Option<ReplayReport>, FsError> {
    let log = region(raw, sb)?;
    if LoggedDevice::probe(log.as_ref()).map_err(log_error)?.is_none() {
        return Ok(None);
    }
    let logged = LoggedDevice::open(Arc::clone(raw), Some(log), Mode::Log).map_err(log_error)?;
    Ok(Some(logged.replay_report().clone()))
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
