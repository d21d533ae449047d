//! Recovery after a crash (or at any time): replay a validated run's
//! journal and check every block it says was written against the target.
//! Reads only. `iolab validate` is this plus printing; the crash tests call
//! it on crash images.
//!
//! A block may be newer than the journal: written after its last durable
//! record (a journal cut short, or an async one caught by a crash). Such a
//! block is counted apart, `ahead`, and is no error: it says the journal
//! is incomplete, not that the target lost anything.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use device::{AlignedBuf, Device, DeviceError};
use validation::journal::{replay_from, JournalError, JournalHeader, JournalMode, JournalSource, Replay};
pub use validation::journal::{Damage, DamageKind};
use validation::{
    check_block_in, BlockVerdict, Expect, Finding, FindingKind, KeyBytes, KeyMapError, RunContext,
};

use crate::spec::KeyMapSpec;

/// Bad blocks listed in a verdict, and blocks ahead of the journal; the
/// counts go on.
pub const BAD_LISTED_MAX: usize = 50;

/// The journal is read in chunks of this size; the replayed keys are let go
/// of (when in a file) this many at a time as their blocks are checked.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// The target is read in runs of key blocks of up to this many bytes: from
/// the first block of a run that needs a check to the last, in one read,
/// unless blocks not to check lie between them over more than
/// [`CHECK_GAP_BYTES`] (reading through them would cost more than another
/// read).
const CHECK_RUN_BYTES: usize = 1 << 20;
const CHECK_GAP_BYTES: usize = 128 << 10;

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
    #[error(transparent)]
    KeyMap(#[from] KeyMapError),
    #[error(
        "{target}: does not match the journal (region ends at byte {region_end}, sectors of {journal_sector} \
         bytes; the target has {target_bytes} bytes, sectors of {target_sector})"
    )]
    Mismatch { target: String, region_end: u64, journal_sector: u32, target_bytes: u64, target_sector: u32 },
}

/// Blocks by verdict, and what the journal said.
#[derive(Debug, Default)]
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
    /// Blocks holding a write of this run newer than anything the journal
    /// recorded for them: written after its last durable record. Not
    /// errors: the journal is incomplete.
    pub ahead: u64,
    /// The first bad blocks (at most [`BAD_LISTED_MAX`]).
    pub bad: Vec<BadBlock>,
    /// The first blocks ahead of the journal (at most [`BAD_LISTED_MAX`]).
    pub ahead_blocks: Vec<BadBlock>,
    /// The target's sector size (bad sectors are numbered in it).
    pub sector_bytes: u32,
    /// Records replayed.
    pub records: u64,
    /// The byte of the journal device where it ends with a damaged or
    /// truncated record, if it does.
    pub journal_torn_at: Option<u64>,
    /// The mode the journal was written in (async: not crash safe on the
    /// host, so its history may be short and its verdict unreliable).
    pub journal_mode: Option<JournalMode>,
    /// The target the journal was written for.
    pub journal_target: String,
    /// How many times the journal was compacted.
    pub journal_generation: u64,
    /// Blocks whose expected contents depend on a damaged part of the
    /// journal and that hold a write it may have recorded there: neither
    /// right nor wrong as far as the journal can tell. Not errors, but
    /// no pass either: the verdict is `journal damaged`.
    pub unverifiable: u64,
    /// The first unverifiable blocks (at most [`BAD_LISTED_MAX`]).
    pub unverifiable_blocks: Vec<BadBlock>,
    /// The parts of the journal that were durable and no longer read
    /// (the first [`validation::journal::DAMAGE_LISTED_MAX`]), and how
    /// many there are; replay went on past each.
    pub journal_damage: Vec<Damage>,
    pub journal_damaged_ranges: u64,
    /// Write ids whose `before` records the damage may have taken (from,
    /// to; `to` is `u64::MAX` when no record follows the last damage).
    pub lost_write_ids: Option<(u64, u64)>,
    /// The key-map snapshot is damaged: what it says of a block no later
    /// record settles is suspect.
    pub journal_snapshot_damaged: bool,
    /// Every block of the region was read (`--every-block`, or a damaged
    /// journal that may have lost records of any block).
    pub every_block: bool,
}

/// A key block the verdict calls bad: torn (its in-flight write left some
/// sectors old, the others new), or holding sectors it should not, classed
/// by the first of them that is not ahead of the journal; or a block
/// ahead of the journal (all its odd sectors are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// Byte address of the key block on the target.
    pub offset: u64,
    /// `torn`, or the class sector's kind: `lost_write`, `misdirected`,
    /// `foreign_run`, `corrupt`, `unexpected_zeros`, or `ahead`.
    pub class: &'static str,
    /// Torn: the sectors holding the new write and the old contents.
    pub new_sectors: Option<u32>,
    pub old_sectors: Option<u32>,
    /// Otherwise: the sector that names the class, its number on the
    /// target (its byte address over the sector size), and how many
    /// sectors are bad.
    pub first: Option<Finding>,
    pub first_sector: Option<u64>,
    pub bad_sectors: Option<u32>,
}

impl std::fmt::Display for BadBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(first) = &self.first else {
            let (new, old) = (self.new_sectors.unwrap_or(0), self.old_sectors.unwrap_or(0));
            return write!(f, "torn: {new} sectors new, {old} old");
        };
        let what = match first.kind {
            FindingKind::LostWrite { expected_key, found_key, found_run_id: None } => {
                format!("lost write: key {found_key} where {expected_key} was written")
            }
            FindingKind::LostWrite { expected_key, found_run_id: Some(run), .. } => {
                format!(
                    "lost write: an older run's block (run id {run}) where key {expected_key} was written"
                )
            }
            FindingKind::Ahead { expected_key, found_key } => format!(
                "ahead of the journal: key {found_key} where its last durable record gives {expected_key} \
                 (written after that record)"
            ),
            FindingKind::Misdirected { found_address } => {
                format!("misdirected: holds the stamp of byte {found_address}")
            }
            FindingKind::ForeignRun { found_run_id } => format!("from another run (run id {found_run_id})"),
            FindingKind::Corrupt { reason } => format!("corrupt: {reason}"),
            FindingKind::UnexpectedZeros => "zeros where data was written".to_string(),
            FindingKind::Unverifiable { expected_key, found_key: 0 } => format!(
                "unverifiable: holds no stamp of this run where the damaged snapshot gives key {expected_key}"
            ),
            FindingKind::Unverifiable { expected_key, found_key } => format!(
                "unverifiable: key {found_key} where the journal gives {expected_key}, of a write it may not \
                 hold (in a damaged part of it; or, for a shared unit's copy, which carries no write id, \
                 after an async journal's last durable record)"
            ),
        };
        let sectors = self.bad_sectors.unwrap_or(1);
        let odd = if matches!(self.class, "ahead" | "unverifiable") { "" } else { " bad" };
        let sector = self.first_sector.map_or(String::new(), |s| format!("sector {s} "));
        write!(f, "{what}; {sectors}{odd} sectors, the first {sector}(byte {})", first.address)
    }
}

impl Verdict {
    /// Whether the journal is incomplete: blocks hold writes newer than
    /// anything it recorded.
    pub fn journal_incomplete(&self) -> bool {
        self.ahead > 0
    }

    /// Whether the journal is damaged: parts of it that were durable no
    /// longer read.
    pub fn journal_damaged(&self) -> bool {
        self.journal_damaged_ranges > 0
    }

    /// Blocks checked in all: every class that was read and judged.
    pub fn checked(&self) -> u64 {
        self.verified
            + self.pending_old
            + self.pending_new
            + self.torn
            + self.lost
            + self.misdirected
            + self.corrupt
            + self.zeros
            + self.foreign
            + self.ahead
            + self.unverifiable
    }

    /// Bad blocks: every class but verified, pending and ahead of the
    /// journal, and torn unless accepted.
    pub fn errors(&self) -> u64 {
        self.torn * u64::from(!self.torn_ok)
            + self.lost
            + self.misdirected
            + self.corrupt
            + self.zeros
            + self.foreign
    }
}

/// Reads a whole journal device (for tests and small journals: recovery
/// reads it in pieces).
pub fn read_journal(journal: &dyn Device) -> Result<Vec<u8>, DeviceError> {
    let size = journal.size_bytes();
    let mut bytes = vec![0; size as usize];
    DeviceSource::new(journal).read_at(&mut bytes, 0).map_err(|e| match e {
        ReplayFailure::Device(e) => e,
        _ => unreachable!("reading a device fails only with a device error"),
    })?;
    Ok(bytes)
}

/// Why replay stopped: a read, the journal's contents or the key store.
enum ReplayFailure {
    Device(DeviceError),
    Journal(JournalError),
    Keys(KeyMapError),
}

impl From<JournalError> for ReplayFailure {
    fn from(e: JournalError) -> ReplayFailure {
        ReplayFailure::Journal(e)
    }
}

/// Replay's reads of a journal device: any offset and length, through an
/// aligned buffer of whole sectors.
struct DeviceSource<'a> {
    device: &'a dyn Device,
    bounce: AlignedBuf,
}

impl<'a> DeviceSource<'a> {
    fn new(device: &'a dyn Device) -> DeviceSource<'a> {
        let bounce = AlignedBuf::zeroed(READ_CHUNK_BYTES, device.buffer_align().max(4096));
        DeviceSource { device, bounce }
    }
}

impl JournalSource for DeviceSource<'_> {
    type Error = ReplayFailure;

    fn bytes(&self) -> u64 {
        self.device.size_bytes()
    }

    fn read_at(&mut self, buf: &mut [u8], at: u64) -> Result<(), ReplayFailure> {
        let sector = u64::from(self.device.sector_bytes());
        debug_assert_eq!(READ_CHUNK_BYTES as u64 % sector, 0);
        let mut done = 0;
        while done < buf.len() {
            let pos = at + done as u64;
            let first = pos / sector * sector;
            let skip = (pos - first) as usize;
            let want = (buf.len() - done).min(READ_CHUNK_BYTES - skip);
            let len = (skip + want).next_multiple_of(sector as usize);
            self.device.read_at(&mut self.bounce[..len], first).map_err(ReplayFailure::Device)?;
            buf[done..done + want].copy_from_slice(&self.bounce[skip..skip + want]);
            done += want;
        }
        Ok(())
    }
}

/// Replays the journal on `journal` and checks `target` against it: every
/// block of a completed write must hold its key; a block of a write in
/// flight at the end of the journal may hold the old or the new contents
/// (or, with `torn_ok`, some sectors of each). The replayed keys live
/// where `key_map` says (an unset directory: the system's temporary one).
pub fn recover(
    target: &dyn Device,
    journal: &dyn Device,
    torn_ok: bool,
    key_map: &KeyMapSpec,
) -> Result<Verdict, RecoverError> {
    recover_watched(target, journal, torn_ok, key_map, &RecoverProgress::default())
}

/// How far a recovery is: the key blocks of the journal's region (0 while
/// the journal is replayed), and how many of them are checked through.
#[derive(Debug, Default)]
pub struct RecoverProgress {
    pub blocks: AtomicU64,
    pub checked: AtomicU64,
}

/// [`recover`], saying how far it is in `progress` (for a progress bar).
pub fn recover_watched(
    target: &dyn Device,
    journal: &dyn Device,
    torn_ok: bool,
    key_map: &KeyMapSpec,
    progress: &RecoverProgress,
) -> Result<Verdict, RecoverError> {
    recover_watched_with(target, journal, torn_ok, key_map, progress, false)
}

/// [`recover`], also reading every block the journal has no record of: a
/// block written by this run after the journal's last durable record,
/// where no earlier record of it reached the journal, is found there
/// (ahead of the journal) instead of passed over as never written. Reads
/// the whole region.
pub fn recover_every_block(
    target: &dyn Device,
    journal: &dyn Device,
    torn_ok: bool,
    key_map: &KeyMapSpec,
) -> Result<Verdict, RecoverError> {
    recover_watched_with(target, journal, torn_ok, key_map, &RecoverProgress::default(), true)
}

/// What a block the journal never recorded may hold: anything but a
/// stamp of this run.
const UNRECORDED: Expect = Expect::OldOrNew { old: 0, new: 0 };

/// The journal replayed from `journal`, its key map placed as `key_map`
/// says.
fn replay_journal(journal: &dyn Device, key_map: &KeyMapSpec) -> Result<Replay, RecoverError> {
    let zeroed = |blocks| KeyBytes::zeroed(blocks, &key_map.place(blocks, None)).map_err(ReplayFailure::Keys);
    replay_from(&mut DeviceSource::new(journal), zeroed).map_err(|e| match e {
        ReplayFailure::Device(e) => RecoverError::Device(e),
        ReplayFailure::Keys(e) => RecoverError::KeyMap(e),
        ReplayFailure::Journal(source) => {
            RecoverError::Journal { device: journal.name().to_string(), source }
        }
    })
}

/// A verdict before any block is read: what the journal's replay says.
fn verdict_of(replayed: &Replay, torn_ok: bool, every_block: bool) -> Verdict {
    Verdict {
        torn_ok,
        sector_bytes: replayed.header.sector_bytes,
        records: replayed.records,
        journal_torn_at: replayed.torn_tail.map(|t| t.0),
        journal_mode: Some(replayed.header.mode),
        journal_target: replayed.header.target.clone(),
        journal_generation: replayed.header.generation,
        journal_damage: replayed.damage.clone(),
        journal_damaged_ranges: replayed.damaged_ranges,
        lost_write_ids: replayed.lost_ids,
        journal_snapshot_damaged: replayed.snapshot_damaged,
        every_block,
        ..Verdict::default()
    }
}

/// [`recover_watched`] or [`recover_every_block`], as `every_block` says,
/// saying how far it is in `progress`.
pub fn recover_watched_with(
    target: &dyn Device,
    journal: &dyn Device,
    torn_ok: bool,
    key_map: &KeyMapSpec,
    progress: &RecoverProgress,
    every_block: bool,
) -> Result<Verdict, RecoverError> {
    let replayed = replay_journal(journal, key_map)?;
    let h = &replayed.header;
    check_geometry(target, h)?;
    let pending = pending_by_block(&replayed);
    // A damage that may have taken `before` records may have taken those
    // of any block: read them all to find the blocks such writes left.
    let every_block = every_block || replayed.lost_ids.is_some() || replayed.snapshot_damaged;
    let mut verdict = verdict_of(&replayed, torn_ok, every_block);
    // A reader thread reads each run of blocks while the run before is
    // checked here; two buffers go back and forth.
    let block_bytes = h.key_block_bytes as usize;
    let per_run = (CHECK_RUN_BYTES / block_bytes).max(1);
    let align = target.buffer_align().max(4096);
    let (keys, pending) = (&replayed.keys, &pending);
    let run = RunContext {
        run_id: h.run_id,
        ahead_from: replayed.ahead_from,
        started_ns: (h.created_ns != 0).then_some(h.created_ns),
        duplicates: h.duplicates,
        journal_behind: !h.mode.host_crash_safe(),
        ..RunContext::default()
    };
    // For a block whose expected contents a lost record may have changed.
    let unsettled =
        RunContext { lost_ids: replayed.lost_ids, snapshot_lost: replayed.snapshot_damaged, ..run };
    progress.blocks.store(keys.len() as u64, Ordering::Relaxed);
    std::thread::scope(|scope| {
        let (to_check, checks) = std::sync::mpsc::sync_channel(1);
        let (to_read, reads) = std::sync::mpsc::channel();
        scope.spawn(move || read_runs(target, h, keys, pending, per_run, every_block, reads, to_check));
        for _ in 0..2 {
            let buf = AlignedBuf::zeroed(per_run * block_bytes, align);
            let _ = to_read.send(ReadRun { first: 0, buf, wanted: Vec::with_capacity(per_run) });
        }
        // Ends when the reader is done (or failed: then with its error).
        for read in checks {
            let read: ReadRun = read?;
            for &(block, expect) in &read.wanted {
                let offset = h.region_start + (block * block_bytes) as u64;
                let bytes = &read.buf[(block - read.first) * block_bytes..][..block_bytes];
                let context = if replayed.unsettled(block as u64) { &unsettled } else { &run };
                let block_verdict = check_block_in(bytes, h.sector_bytes as usize, offset, expect, context);
                if expect == UNRECORDED && block_verdict == BlockVerdict::PendingOld {
                    // Never written by this run, as the journal says.
                    continue;
                }
                tally(&mut verdict, offset, block_verdict);
            }
            progress.checked.store((read.first + per_run).min(keys.len()) as u64, Ordering::Relaxed);
            let _ = to_read.send(read);
        }
        progress.checked.store(keys.len() as u64, Ordering::Relaxed);
        Ok(verdict)
    })
}

/// What each block with a write in flight at the end of the journal may
/// hold (its last completed key, or any key up to its newest write's), by
/// block, for the reader to walk beside the keys.
fn pending_by_block(replayed: &Replay) -> Vec<(usize, Expect)> {
    let pending: HashMap<u64, Expect> = replayed
        .pending
        .iter()
        .flat_map(|p| p.blocks.iter().map(|&(block, old, new)| (block, Expect::OldOrNew { old, new })))
        .collect();
    let mut pending: Vec<(usize, Expect)> = pending.into_iter().map(|(b, e)| (b as usize, e)).collect();
    pending.sort_unstable_by_key(|&(b, _)| b);
    pending
}

/// A run of key blocks read for checking: the blocks to check in it and
/// what each should hold, their bytes at their place from the run's first
/// block in `buf`.
struct ReadRun {
    first: usize,
    buf: AlignedBuf,
    wanted: Vec<(usize, Expect)>,
}

/// The reader thread of [`recover`]: for each run of `per_run` blocks with
/// blocks to check, reads them into a buffer from `reads` and hands it to
/// `to_check`; stops at the end, at a read error (handed on), or when the
/// checker is gone.
#[allow(clippy::too_many_arguments)]
fn read_runs(
    target: &dyn Device,
    h: &JournalHeader,
    keys: &KeyBytes,
    mut pending: &[(usize, Expect)],
    per_run: usize,
    every_block: bool,
    reads: std::sync::mpsc::Receiver<ReadRun>,
    to_check: std::sync::mpsc::SyncSender<Result<ReadRun, RecoverError>>,
) {
    let block_bytes = h.key_block_bytes as usize;
    let mut spare = None;
    let mut evicted = 0;
    for first in (0..keys.len()).step_by(per_run) {
        if first - evicted >= READ_CHUNK_BYTES {
            // The keys checked are not needed resident (when they are a file).
            keys.evict(evicted..first);
            evicted = first;
        }
        let end = (first + per_run).min(keys.len());
        let run = &keys[first..end];
        let in_run = pending.partition_point(|&(b, _)| b < end);
        let (run_pending, rest) = pending.split_at(in_run);
        pending = rest;
        // Most runs of a large, sparsely written target hold no key: an OR
        // over the run (no early exit, so it vectorises) says so at once.
        if !every_block && run_pending.is_empty() && run.iter().fold(0, |acc, &k| acc | k) == 0 {
            continue;
        }
        let Some(mut read) = spare.take().or_else(|| reads.recv().ok()) else { return };
        read.first = first;
        read.wanted.clear();
        let mut run_pending = run_pending.iter().peekable();
        for (i, &key) in run.iter().enumerate() {
            let block = first + i;
            match run_pending.next_if(|&&(b, _)| b == block) {
                Some(&(_, expect)) => read.wanted.push((block, expect)),
                None if key == 0 && every_block => read.wanted.push((block, UNRECORDED)),
                None if key == 0 => {}
                None => read.wanted.push((block, Expect::Key(key))),
            }
        }
        if read.wanted.is_empty() {
            spare = Some(read);
            continue;
        }
        // One read per span of blocks to check, a span ending at a gap
        // that costs more to read through than to skip.
        let result = read
            .wanted
            .chunk_by(|a, b| (b.0 - a.0 - 1) * block_bytes <= CHECK_GAP_BYTES)
            .try_for_each(|span| {
                let (from, to) = (span[0].0 - first, span[span.len() - 1].0 - first + 1);
                let offset = h.region_start + (span[0].0 * block_bytes) as u64;
                target.read_at(&mut read.buf[from * block_bytes..to * block_bytes], offset)
            });
        let failed = result.is_err();
        if to_check.send(result.map(|()| read).map_err(RecoverError::from)).is_err() || failed {
            return;
        }
    }
}

fn check_geometry(target: &dyn Device, h: &JournalHeader) -> Result<(), RecoverError> {
    // The header's bounds keep the region's end inside a u64; saturate
    // all the same, so a header that got past them is refused, not wrapped.
    let region_end = h.blocks.saturating_mul(h.key_block_bytes).saturating_add(h.region_start);
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
    let bad = match verdict {
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
            BadBlock {
                offset,
                class: "torn",
                new_sectors: Some(new_sectors),
                old_sectors: Some(old_sectors),
                first: None,
                first_sector: None,
                bad_sectors: None,
            }
        }
        BlockVerdict::Bad { ref findings } => {
            let Some(first) = verdict.class_finding() else {
                // Unreachable: a block neither all old nor all new has a
                // sector that is neither; counted as corrupt all the same.
                v.corrupt += 1;
                return;
            };
            let (counter, class) = match first.kind {
                FindingKind::LostWrite { .. } => (&mut v.lost, "lost_write"),
                FindingKind::Ahead { .. } => (&mut v.ahead, "ahead"),
                FindingKind::Misdirected { .. } => (&mut v.misdirected, "misdirected"),
                FindingKind::ForeignRun { .. } => (&mut v.foreign, "foreign_run"),
                FindingKind::UnexpectedZeros => (&mut v.zeros, "unexpected_zeros"),
                FindingKind::Corrupt { .. } => (&mut v.corrupt, "corrupt"),
                FindingKind::Unverifiable { .. } => (&mut v.unverifiable, "unverifiable"),
            };
            *counter += 1;
            BadBlock {
                offset,
                class,
                new_sectors: None,
                old_sectors: None,
                first: Some(*first),
                first_sector: Some(first.address / u64::from(v.sector_bytes.max(1))),
                bad_sectors: Some(findings.len() as u32),
            }
        }
    };
    let list = match bad.class {
        "ahead" => &mut v.ahead_blocks,
        "unverifiable" => &mut v.unverifiable_blocks,
        _ => &mut v.bad,
    };
    if list.len() < BAD_LISTED_MAX {
        list.push(bad);
    }
}
