//! Recovery after a crash (or at any time): replay a validated run's
//! journal and check every block it says was written against the target.
//! Reads only. `iolab validate` is this plus printing; the crash tests call
//! it on crash images.

use device::{AlignedBuf, Device, DeviceError};
use serde::Serialize;
use validation::journal::{replay, JournalError, JournalHeader, JournalMode};
use validation::{check_block, BlockVerdict, Expect, FindingKind};

/// Bad blocks listed in a verdict; the counts go on.
pub const BAD_LISTED_MAX: usize = 50;

/// The journal is read in chunks of this size.
const READ_CHUNK_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("{device}: {source}")]
    Journal {
        device: String,
        #[source]
        source: JournalError,
    },
    #[error(
        "{target}: does not match the journal (region ends at {region_end}, sector {journal_sector} bytes; \
         the target has {target_bytes} bytes, sector {target_sector})"
    )]
    Mismatch { target: String, region_end: u64, journal_sector: u32, target_bytes: u64, target_sector: u32 },
}

/// Blocks by verdict, and what the journal said.
#[derive(Debug, Default, Serialize)]
pub struct Verdict {
    pub verified: u64,
    pub pending_old: u64,
    pub pending_new: u64,
    pub torn: u64,
    /// Torn blocks count as bad unless this is set.
    pub torn_ok: bool,
    pub lost: u64,
    pub misdirected: u64,
    pub corrupt: u64,
    pub zeros: u64,
    pub foreign: u64,
    /// The first bad blocks: (offset, what).
    pub bad: Vec<(u64, String)>,
    /// Records replayed.
    pub records: u64,
    /// Where the journal ended early, if it did.
    pub journal_torn_at: Option<u64>,
    /// The mode the journal was written in (async: not crash safe on the
    /// host, so its history may be short and its verdict unreliable).
    pub journal_mode: Option<JournalMode>,
    /// The target the journal was written for.
    pub journal_target: String,
    /// How many times the journal was compacted.
    pub journal_generation: u64,
}

impl Verdict {
    /// Bad blocks: every class but verified and pending, and torn unless
    /// accepted.
    pub fn errors(&self) -> u64 {
        self.torn * u64::from(!self.torn_ok)
            + self.lost
            + self.misdirected
            + self.corrupt
            + self.zeros
            + self.foreign
    }
}

/// Reads a whole journal device.
pub fn read_journal(journal: &dyn Device) -> Result<Vec<u8>, DeviceError> {
    let size = journal.size_bytes();
    let mut bytes = Vec::with_capacity(size as usize);
    let mut buf = AlignedBuf::zeroed(READ_CHUNK_BYTES, journal.buffer_align().max(4096));
    let mut at = 0;
    while at < size {
        let len = (size - at).min(READ_CHUNK_BYTES as u64) as usize;
        journal.read_at(&mut buf[..len], at)?;
        bytes.extend_from_slice(&buf[..len]);
        at += len as u64;
    }
    debug_assert_eq!(bytes.len() as u64, size);
    Ok(bytes)
}

/// Replays the journal on `journal` and checks `target` against it: every
/// block of a completed write must hold its key; a block of a write in
/// flight at the end of the journal may hold the old or the new contents
/// (or, with `torn_ok`, some sectors of each).
pub fn recover(target: &dyn Device, journal: &dyn Device, torn_ok: bool) -> Result<Verdict, RecoverError> {
    let bytes = read_journal(journal)?;
    let replayed = replay(&bytes)
        .map_err(|source| RecoverError::Journal { device: journal.name().to_string(), source })?;
    let h = &replayed.header;
    check_geometry(target, h)?;
    let mut expect: Vec<Option<Expect>> =
        replayed.keys.iter().map(|&k| (k != 0).then_some(Expect::Key(k))).collect();
    for p in &replayed.pending {
        for (block, old, new) in &p.blocks {
            expect[*block as usize] = Some(Expect::OldOrNew { old: *old, new: *new });
        }
    }
    let mut verdict = Verdict {
        torn_ok,
        records: replayed.records,
        journal_torn_at: replayed.torn_tail.map(|t| t.0),
        journal_mode: Some(h.mode),
        journal_target: h.target.clone(),
        journal_generation: h.generation,
        ..Verdict::default()
    };
    let mut buf = AlignedBuf::zeroed(h.key_block_bytes as usize, target.buffer_align().max(4096));
    for (block, e) in expect.iter().enumerate() {
        let Some(e) = e else { continue };
        let offset = h.region_start + block as u64 * h.key_block_bytes;
        target.read_at(&mut buf, offset)?;
        tally(&mut verdict, offset, check_block(&buf, h.sector_bytes as usize, offset, *e, h.run_id));
    }
    Ok(verdict)
}

fn check_geometry(target: &dyn Device, h: &JournalHeader) -> Result<(), RecoverError> {
    let region_end = h.region_start + h.blocks * h.key_block_bytes;
    if region_end > target.size_bytes() || target.sector_bytes() != h.sector_bytes {
        return Err(RecoverError::Mismatch {
            target: target.name().to_string(),
            region_end,
            journal_sector: h.sector_bytes,
            target_bytes: target.size_bytes(),
            target_sector: target.sector_bytes(),
        });
    }
    Ok(())
}

fn tally(v: &mut Verdict, offset: u64, verdict: BlockVerdict) {
    let what = match verdict {
        BlockVerdict::Ok => {
            v.verified += 1;
            return;
        }
        BlockVerdict::PendingOld => {
            v.pending_old += 1;
            return;
        }
        BlockVerdict::PendingNew => {
            v.pending_new += 1;
            return;
        }
        BlockVerdict::Torn { new_sectors, old_sectors } => {
            v.torn += 1;
            if v.torn_ok {
                return;
            }
            format!("torn: {new_sectors} sectors new, {old_sectors} old")
        }
        BlockVerdict::Bad { findings } => {
            let Some(first) = findings.first() else {
                // Unreachable: a block neither all old nor all new has a
                // sector that is neither; counted as corrupt all the same.
                v.corrupt += 1;
                return;
            };
            let counter = match first.kind {
                FindingKind::LostWrite { .. } => &mut v.lost,
                FindingKind::Misdirected { .. } => &mut v.misdirected,
                FindingKind::ForeignRun { .. } => &mut v.foreign,
                FindingKind::UnexpectedZeros => &mut v.zeros,
                FindingKind::Corrupt { .. } => &mut v.corrupt,
            };
            *counter += 1;
            format!("sector {}: {:?} ({} bad sectors)", first.address, first.kind, findings.len())
        }
    };
    if v.bad.len() < BAD_LISTED_MAX {
        v.bad.push((offset, what));
    }
}
