//! Checking what a block holds against what the key map says it should,
//! and naming what went wrong.

use serde::Serialize;

use crate::stamp::{read_stamp, StampError};

/// What a key block should hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The write of this key completed.
    Key(u8),
    /// Writes up to the one of `new` were in flight (at a crash): the block
    /// may hold the old contents (`old`; 0 = not written by this run: zeros,
    /// another run's stamps or data that is no stamp) or any key after
    /// `old` up to `new` (one, when a single write was in flight).
    OldOrNew { old: u8, new: u8 },
}

/// What one sector holds that it should not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FindingKind {
    /// A valid stamp of this address with another key: a write was lost.
    LostWrite { expected_key: u8, found_key: u8 },
    /// A valid stamp of another address: a write went to the wrong place.
    Misdirected { found_address: u64 },
    /// A valid stamp from another validation run.
    ForeignRun { found_run_id: u64 },
    /// Checksum mismatch, unknown version, or data that is not a stamp.
    Corrupt { reason: &'static str },
    /// All zeros where data was written.
    UnexpectedZeros,
}

/// One sector's problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Byte address of the sector.
    pub address: u64,
    #[serde(flatten)]
    pub kind: FindingKind,
}

/// The verdict on one key block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum BlockVerdict {
    /// Holds the expected key everywhere.
    Ok,
    /// A pending write: every sector still old.
    PendingOld,
    /// A pending write: every sector new.
    PendingNew,
    /// Some sectors hold the new write and others the old contents.
    Torn { new_sectors: u32, old_sectors: u32 },
    /// Sectors hold what they should not; the first finding names the
    /// block's class.
    Bad { findings: Vec<Finding> },
}

enum SectorState {
    Key(u8),
    Zeros,
    Wrong(FindingKind),
}

fn sector_state(sector: &[u8], address: u64, run_id: u64) -> SectorState {
    match read_stamp(sector) {
        Err(StampError::Zeros) => SectorState::Zeros,
        Err(StampError::NoMagic) => SectorState::Wrong(FindingKind::Corrupt { reason: "no stamp" }),
        Err(StampError::Version(_)) => {
            SectorState::Wrong(FindingKind::Corrupt { reason: "unknown stamp version" })
        }
        Err(StampError::Checksum { .. }) => {
            SectorState::Wrong(FindingKind::Corrupt { reason: "checksum mismatch" })
        }
        Ok(stamp) if stamp.address != address => {
            SectorState::Wrong(FindingKind::Misdirected { found_address: stamp.address })
        }
        Ok(stamp) if stamp.run_id != run_id => {
            SectorState::Wrong(FindingKind::ForeignRun { found_run_id: stamp.run_id })
        }
        Ok(stamp) => SectorState::Key(stamp.key),
    }
}

/// Checks a key block read from byte `offset` against `expect`.
pub fn check_block(
    buf: &[u8],
    sector_bytes: usize,
    offset: u64,
    expect: Expect,
    run_id: u64,
) -> BlockVerdict {
    debug_assert!(buf.len() % sector_bytes == 0 && !buf.is_empty());
    let states: Vec<(u64, SectorState)> = buf
        .chunks_exact(sector_bytes)
        .enumerate()
        .map(|(i, s)| {
            let address = offset + (i * sector_bytes) as u64;
            (address, sector_state(s, address, run_id))
        })
        .collect();
    let (old, new) = match expect {
        Expect::Key(k) => (None, k),
        Expect::OldOrNew { old, new } => (Some(old), new),
    };
    let is_new = |s: &SectorState| match (s, old) {
        (SectorState::Key(k), Some(o)) => key_in_chain(*k, o, new),
        (SectorState::Key(k), None) => *k == new,
        _ => false,
    };
    // A block this run never wrote (old key 0) holds what the target held
    // before the run: zeros, another run's stamps, or data that is no
    // stamp at all; only this run's stamps (and damaged ones) say more.
    let is_old = |s: &SectorState| match (s, old) {
        (SectorState::Key(k), Some(o)) => *k == o && o != 0,
        (SectorState::Zeros, Some(0)) => true,
        (SectorState::Wrong(kind), Some(0)) => matches!(
            kind,
            FindingKind::ForeignRun { .. }
                | FindingKind::Corrupt { reason: "no stamp" | "unknown stamp version" }
        ),
        _ => false,
    };
    let new_count = states.iter().filter(|(_, s)| is_new(s)).count() as u32;
    let old_count = states.iter().filter(|(_, s)| is_old(s)).count() as u32;
    let total = states.len() as u32;
    let one_key = states
        .windows(2)
        .all(|w| matches!(w, [(_, SectorState::Key(a)), (_, SectorState::Key(b))] if a == b));
    if new_count == total && one_key {
        return if old.is_some() { BlockVerdict::PendingNew } else { BlockVerdict::Ok };
    }
    if old.is_some() && old_count == total {
        return BlockVerdict::PendingOld;
    }
    if new_count + old_count == total {
        return BlockVerdict::Torn { new_sectors: new_count, old_sectors: old_count };
    }
    let findings = states
        .into_iter()
        .filter(|(_, s)| !is_new(s) && !is_old(s))
        .map(|(address, s)| Finding {
            address,
            kind: match s {
                SectorState::Key(found) => FindingKind::LostWrite { expected_key: new, found_key: found },
                SectorState::Zeros => FindingKind::UnexpectedZeros,
                SectorState::Wrong(kind) => kind,
            },
        })
        .collect();
    BlockVerdict::Bad { findings }
}

/// Whether `key` is one of the keys after `old` up to `new`, in the order
/// rewrites give them (`next_key`, wrapping past 255 to 1).
fn key_in_chain(key: u8, old: u8, new: u8) -> bool {
    let mut k = old;
    while k != new {
        k = crate::keys::next_key(k);
        if k == key {
            return true;
        }
    }
    false
}
