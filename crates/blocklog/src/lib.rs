//! A write-ahead physical block log in the manner of NetBSD's WAPBL: any
//! [`device::Device`] gains atomic multi-block transactions with group
//! commit.
//!
//! A [`LoggedDevice`] is itself a device (a [`device::Backend`] behind the
//! checked front, which checks, counts and poisons after a failed flush;
//! the log adds a failed commit or checkpoint as a cause) over the data
//! area of another device, in one of three [`Mode`]s so that the costs compare on equal
//! terms: `sync` (each write durable in place before it returns), `async`
//! (in place, durable at the next flush) and `log`. In `log` mode writes
//! join the open transaction in memory; `flush` commits everything joined
//! so far in one go (block records with full copies, revocations, then a
//! commit header in one of two slots, each step made durable before the
//! next), then writes the blocks home. A checkpoint (flush home, advance
//! the tail) frees log space. Opening a device whose log holds committed
//! records replays them first, so a crash at any instant leaves every
//! committed transaction wholly present and no uncommitted one partly.
//! `Device::write_unlogged` writes in place outside the log (file data
//! under a metadata-only log, a layout's fill); its sectors' older logged
//! copies are revoked in the next commit.
//!
//! The log lives at the start of the protected device (the data follows
//! it) or on a device of its own. Its format is in docs/formats.md, "Block
//! log"; every header and record carries a crc32c and every field is
//! checked against its bounds before use. Replay stops at a committed
//! record that fails (damage, told from a torn tail) and says where; the
//! header then remembers it, and the log refuses to open until [`repair`]
//! drops the commits from the damage on.
//!
//! A [`StripeLog`] uses the same format on a device of its own for writes
//! that must land together on several devices: a RAID-5 volume logs each
//! row's new data and parity there before writing them in place (through
//! `device::WriteAheadLog`), which closes the RAID-5 write hole.
//!
//! This crate never prints, never panics on caller input, and never writes
//! outside the log region and the data area it was given.

#![forbid(unsafe_code)]

mod choice;
mod core;
mod format;
#[cfg(test)]
mod fuzz;
mod logged;
mod read;
mod record;
mod repair;
mod replay;
mod stripe;

pub use format::{Header, HeaderFault, Stop, StopReason, AREA_START, MIN_AREA_BYTES, SLOT_BYTES, VERSION};
pub use logged::{HomeWrites, LogStats, LoggedDevice, Mode, Placement};
pub use read::Found;
pub use repair::{repair, Repaired};
pub use replay::{ReplayReport, ReplayStop};
pub use stripe::{StripeLog, StripeLogStats};

use device::DeviceError;

/// The log size WAPBL would choose for a device: 1 MiB per GiB, at least
/// 1 MiB and at most 64 MiB.
pub fn default_log_bytes(device_bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    (device_bytes / 1024).clamp(MIB, 64 * MIB) / 4096 * 4096
}

/// Everything opening, formatting or replaying a log can fail with.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(
        "{device}: no iolab block log found (format one first, e.g. `iolab run --log log` on a new target)"
    )]
    NoLog { device: String },
    #[error(
        "block log format version {found} is not supported (this iolab reads versions 1 to {supported})"
    )]
    Version { found: u32, supported: u32 },
    #[error("{device}: {problem}")]
    Layout { device: String, problem: String },
    /// A header whose checksum holds with a field past its bound: no
    /// writer of this format made it.
    #[error(
        "{device}: the block log header's field {field} (byte {offset}) is {value}, out of bounds ({bound}); \
         the log is damaged: format it anew (--force)"
    )]
    Field { device: String, offset: u64, field: &'static str, value: u64, bound: String },
    /// Replay stopped at damage, now or at an earlier open: the log
    /// serves nothing until `iolab log repair` drops the commits lost.
    #[error(
        "{device}: {stop}. The log refuses to open until it is repaired (`iolab log repair`), which drops \
         them; every commit before is home"
    )]
    Stopped { device: String, stop: ReplayStop },
}
