//! Checking what a block holds against what the key map says it should,
//! and naming what went wrong.
//!
//! After a crash the key map comes from the journal, which may know less
//! than the target holds: a stamp of the run newer than anything the
//! journal recorded is no lost write but a write the journal never
//! durably recorded ([`FindingKind::Ahead`]); "lost" is kept for a block
//! older than what a durable record promises, this run's older key or an
//! older run's block.

use crate::stamp::{read_stamp, Duplicates, Stamp, StampError};

/// What a block's stamps are judged against besides the key it should
/// hold: the run, and (after a crash) what its journal knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunContext {
    pub run_id: u64,
    /// The first write id (a stamp's sequence number) the journal never
    /// recorded: a stamp of the run from there on was written after the
    /// journal's last durable record. None: every write is known (during
    /// a run), or the journal cannot tell.
    pub ahead_from: Option<u64>,
    /// When the run began (ns since the Unix epoch): another run's stamp
    /// written before is an older run's block, where this run's write
    /// was lost. None: unknown, such a stamp is just from another run.
    pub started_ns: Option<u64>,
    /// After damage to the journal: write ids whose `before` records the
    /// damage may have taken (from, to), for a block no later record
    /// settles. A stamp of such a write is unverifiable, not lost.
    pub lost_ids: Option<(u64, u64)>,
    /// The journal's key-map snapshot is damaged and no later record
    /// settles the block: whatever this run may have left in it is
    /// unverifiable.
    pub snapshot_lost: bool,
    /// The run wrote duplicate units (`--dedupe-ratio`; key block = unit).
    pub duplicates: Option<Duplicates>,
    /// The journal may lack writes that reached the target (its records
    /// were not durable before their writes went out: async mode). A
    /// duplicate unit carries no write id to tell such a write by, so a
    /// duplicate this run wrote that is neither the old nor the new
    /// contents is unverifiable rather than lost.
    pub journal_behind: bool,
}

impl RunContext {
    /// Whether a stamp of this run with this sequence number may be of a
    /// write whose record the journal lost.
    fn lost(&self, sequence: u64) -> bool {
        self.snapshot_lost || self.lost_ids.is_some_and(|(from, to)| (from..to).contains(&sequence))
    }
}

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// A valid stamp of this address older than the write the key map
    /// promises: a write was lost. `found_run_id` is set when the stamp is
    /// an older run's (the block holds what it held before this run wrote
    /// it); `found_key` is then that run's key.
    LostWrite { expected_key: u8, found_key: u8, found_run_id: Option<u64> },
    /// A valid stamp of this run newer than anything the journal recorded
    /// for the block (`expected_key`): written after the journal's last
    /// durable record. The journal is incomplete; nothing was lost.
    Ahead { expected_key: u8, found_key: u8 },
    /// A valid stamp of this run (or, when the snapshot is lost, zeros
    /// or another run's) where what the block should hold depends on a
    /// part of the journal that is damaged: neither right nor wrong as
    /// far as the journal can tell. `found_key` is 0 for no stamp.
    Unverifiable { expected_key: u8, found_key: u8 },
    /// A valid stamp of another address: a write went to the wrong place.
    Misdirected { found_address: u64 },
    /// A valid stamp from another validation run, not known to be older
    /// than this one.
    ForeignRun { found_run_id: u64 },
    /// Checksum mismatch, unknown version, or data that is not a stamp.
    Corrupt { reason: &'static str },
    /// All zeros where data was written.
    UnexpectedZeros,
}

/// One sector's problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Byte address of the sector.
    pub address: u64,
    pub kind: FindingKind,
}

/// The verdict on one key block.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// block's class ([`BlockVerdict::class_finding`] after a crash).
    Bad { findings: Vec<Finding> },
}

impl BlockVerdict {
    /// The finding that names a bad block's class: the first that is
    /// neither [`FindingKind::Ahead`] nor [`FindingKind::Unverifiable`],
    /// else the first unverifiable one, else the first (a block whose
    /// only findings are ahead of the journal is ahead: nothing in it is
    /// damaged).
    pub fn class_finding(&self) -> Option<&Finding> {
        let BlockVerdict::Bad { findings } = self else { return None };
        let odd =
            |f: &&Finding| matches!(f.kind, FindingKind::Ahead { .. } | FindingKind::Unverifiable { .. });
        let unverifiable = |f: &&Finding| matches!(f.kind, FindingKind::Unverifiable { .. });
        findings.iter().find(|f| !odd(f)).or_else(|| findings.iter().find(unverifiable)).or(findings.first())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SectorState {
    /// A stamp of this run: its key and write sequence number.
    Key(u8, u64),
    /// A sector of a duplicate unit of this run, in its place in the
    /// unit: the shared unit's set and version.
    Duplicate {
        set: u8,
        version: u8,
    },
    Zeros,
    /// A stamp of this address from another run.
    OtherRun(Stamp),
    Wrong(FindingKind),
}

/// What one sector at `address`, in the key block at `block`, holds.
fn sector_state(sector: &[u8], address: u64, block: u64, run_id: u64) -> SectorState {
    match read_stamp(sector) {
        Err(StampError::Zeros) => SectorState::Zeros,
        Err(StampError::NoMagic) => SectorState::Wrong(FindingKind::Corrupt { reason: "no stamp" }),
        Err(StampError::Version(_)) => {
            SectorState::Wrong(FindingKind::Corrupt { reason: "unknown stamp version" })
        }
        Err(StampError::Field { .. }) => {
            SectorState::Wrong(FindingKind::Corrupt { reason: "stamp field out of bounds" })
        }
        Err(StampError::Checksum { .. }) => {
            SectorState::Wrong(FindingKind::Corrupt { reason: "checksum mismatch" })
        }
        Ok(stamp) if stamp.set != 0 && stamp.run_id != run_id => SectorState::OtherRun(stamp),
        Ok(stamp) if stamp.set != 0 && stamp.address != address - block => {
            SectorState::Wrong(FindingKind::Corrupt { reason: "duplicate unit's sector out of place" })
        }
        Ok(stamp) if stamp.set != 0 => SectorState::Duplicate { set: stamp.set, version: stamp.key },
        Ok(stamp) if stamp.address != address => {
            SectorState::Wrong(FindingKind::Misdirected { found_address: stamp.address })
        }
        Ok(stamp) if stamp.run_id != run_id => SectorState::OtherRun(stamp),
        Ok(stamp) => SectorState::Key(stamp.key, stamp.sequence),
    }
}

/// Whether a sector's state is what the key block at `block` holds at
/// `key`: that key's own stamp, or, where the run's duplicates make the
/// block a copy at that key, the shared unit's sector at its version.
fn holds(state: &SectorState, key: u8, block: u64, run: &RunContext) -> bool {
    let set = run.duplicates.and_then(|d| d.set_of(block, key, run.run_id));
    match (*state, set) {
        (SectorState::Key(k, _), None) => k == key,
        (SectorState::Duplicate { set: s, version }, Some(set)) => {
            s == set && version == Duplicates::version(key)
        }
        _ => false,
    }
}

/// For a duplicate's sector that is not what the block should hold: the
/// nearest key before `expected` at which the block held it (0: none).
fn older_key_holding(state: &SectorState, expected: u8, block: u64, run: &RunContext) -> u8 {
    let mut key = expected;
    for _ in 1..255 {
        key = crate::keys::previous_key(key);
        if holds(state, key, block, run) {
            return key;
        }
    }
    0
}

/// What a sector that is neither the old nor the new contents is.
fn finding(state: SectorState, expected_key: u8, block: u64, run: &RunContext) -> FindingKind {
    match state {
        SectorState::Duplicate { .. } => {
            let found_key = older_key_holding(&state, expected_key, block, run);
            if run.snapshot_lost || run.lost_ids.is_some() || run.journal_behind {
                FindingKind::Unverifiable { expected_key, found_key }
            } else if found_key == 0 {
                // A copy no write of this block made: one sent astray.
                FindingKind::Corrupt { reason: "a duplicate unit no write of this block made" }
            } else {
                FindingKind::LostWrite { expected_key, found_key, found_run_id: None }
            }
        }
        SectorState::Key(found_key, sequence) if run.lost(sequence) => {
            FindingKind::Unverifiable { expected_key, found_key }
        }
        SectorState::Zeros | SectorState::OtherRun(_) if run.snapshot_lost => {
            FindingKind::Unverifiable { expected_key, found_key: 0 }
        }
        SectorState::Key(found_key, sequence) if run.ahead_from.is_some_and(|from| sequence >= from) => {
            FindingKind::Ahead { expected_key, found_key }
        }
        SectorState::Key(found_key, _) => {
            FindingKind::LostWrite { expected_key, found_key, found_run_id: None }
        }
        SectorState::OtherRun(stamp)
            if stamp.set == 0 && run.started_ns.is_some_and(|started| stamp.time_ns < started) =>
        {
            FindingKind::LostWrite { expected_key, found_key: stamp.key, found_run_id: Some(stamp.run_id) }
        }
        SectorState::OtherRun(stamp) => FindingKind::ForeignRun { found_run_id: stamp.run_id },
        SectorState::Zeros => FindingKind::UnexpectedZeros,
        SectorState::Wrong(kind) => kind,
    }
}

/// Checks a key block read from byte `offset` against `expect`, during a
/// run (its key map knows every write): [`check_block_in`] with nothing
/// known but the run id.
pub fn check_block(
    buf: &[u8],
    sector_bytes: usize,
    offset: u64,
    expect: Expect,
    run_id: u64,
) -> BlockVerdict {
    check_block_in(buf, sector_bytes, offset, expect, &RunContext { run_id, ..RunContext::default() })
}

/// Checks a key block read from byte `offset` against `expect`, in the
/// context of `run` (after a crash: what the journal knows).
pub fn check_block_in(
    buf: &[u8],
    sector_bytes: usize,
    offset: u64,
    expect: Expect,
    run: &RunContext,
) -> BlockVerdict {
    debug_assert!(buf.len() % sector_bytes == 0 && !buf.is_empty());
    let states: Vec<(u64, SectorState)> = buf
        .chunks_exact(sector_bytes)
        .enumerate()
        .map(|(i, s)| {
            let address = offset + (i * sector_bytes) as u64;
            (address, sector_state(s, address, offset, run.run_id))
        })
        .collect();
    let (old, new) = match expect {
        Expect::Key(k) => (None, k),
        Expect::OldOrNew { old, new } => (Some(old), new),
    };
    let is_new = |s: &SectorState| match old {
        Some(o) => keys_in_chain(o, new).any(|k| holds(s, k, offset, run)),
        None => holds(s, new, offset, run),
    };
    // A block this run never wrote (old key 0) holds what the target held
    // before the run: zeros, another run's stamps, or data that is no
    // stamp at all; only this run's stamps (and damaged ones) say more.
    let is_old = |s: &SectorState| match (s, old) {
        (SectorState::Key(..) | SectorState::Duplicate { .. }, Some(o)) => o != 0 && holds(s, o, offset, run),
        (SectorState::Zeros | SectorState::OtherRun(_), Some(0)) => true,
        (SectorState::Wrong(kind), Some(0)) => {
            matches!(kind, FindingKind::Corrupt { reason: "no stamp" | "unknown stamp version" })
        }
        _ => false,
    };
    // Each sector counted once: a copy can be the same bytes at the old
    // key and at a newer one (one shared unit at one version, three keys
    // apart), and then it counts as new.
    let new_count = states.iter().filter(|(_, s)| is_new(s)).count() as u32;
    let old_count = states.iter().filter(|(_, s)| !is_new(s) && is_old(s)).count() as u32;
    let total = states.len() as u32;
    // Every sector from one write: one key, or one shared unit's version.
    let one_key = states.windows(2).all(|w| match (&w[0].1, &w[1].1) {
        (SectorState::Key(a, _), SectorState::Key(b, _)) => a == b,
        (a @ SectorState::Duplicate { .. }, b) => a == b,
        _ => false,
    });
    if new_count == total && one_key {
        return if old.is_some() { BlockVerdict::PendingNew } else { BlockVerdict::Ok };
    }
    if old.is_some() && states.iter().all(|(_, s)| is_old(s)) {
        return BlockVerdict::PendingOld;
    }
    if new_count + old_count == total {
        return BlockVerdict::Torn { new_sectors: new_count, old_sectors: old_count };
    }
    let findings = states
        .into_iter()
        .filter(|(_, s)| !is_new(s) && !is_old(s))
        .map(|(address, s)| Finding { address, kind: finding(s, new, offset, run) })
        .collect();
    BlockVerdict::Bad { findings }
}

/// The keys after `old` up to `new`, in the order rewrites give them
/// (`next_key`, wrapping past 255 to 1).
fn keys_in_chain(old: u8, new: u8) -> impl Iterator<Item = u8> {
    let mut k = old;
    std::iter::from_fn(move || {
        (k != new).then(|| {
            k = crate::keys::next_key(k);
            k
        })
    })
}
