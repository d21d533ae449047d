//! Validation inside a running job: stamps every written key block with
//! its next key, checks every read (and, before a rewrite, the old
//! contents) against the key map, and records what it finds.
//!
//! Requests touching the same key blocks never overlap: a worker takes the
//! blocks of its request before issuing it (all or nothing, so no
//! deadlock; `busy.rs`) and gives them back when it completes.
//!
//! The key map, and the journal writer's copy of it, live in memory or in
//! mapped scratch files ([`KeyMapSpec`](crate::KeyMapSpec)), so memory stays bounded on very
//! large targets.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use validation::{
    check_block_in, fill_block, fill_duplicate, next_key, BlockVerdict, Duplicates, Expect, Finding,
    KeyBytes, KeyMap, KeyPlace, RunContext, KEY_NEVER_WRITTEN,
};

use crate::busy::BusyTable;
use crate::gen::Request;
use crate::journal::{JournalMode, JournalPlace};
use crate::spec::{spec_error, Engine, JobSpec, Region, ValidateSpec};

/// With a group-commit journal, how many requests a worker prepares ahead
/// at most, and the bytes they may cover (larger transfers get fewer, at
/// least two). Prepared writes hold their key blocks, not buffers: they
/// are stamped when they go out.
pub const JOURNAL_LOOKAHEAD: usize = 64;
pub const JOURNAL_LOOKAHEAD_BYTES: u64 = 4 << 20;

/// The verify phase reads runs of written blocks of up to this many bytes.
const VERIFY_RUN_BYTES: u64 = 1 << 20;

/// Errors kept in memory for the report; the count goes on past it.
pub const ERRORS_KEPT_MAX: usize = 1000;

/// Which read found an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckedBy {
    Read,
    Preread,
    Reread,
    /// The verify phase after the run.
    Verify,
}

/// One block that did not hold what it should.
#[derive(Clone, Debug)]
pub struct ValidationError {
    /// Byte offset of the key block on the target.
    pub block_offset: u64,
    pub block_bytes: u64,
    pub expected_key: u8,
    pub checked_by: CheckedBy,
    /// The block's class: lost_write, misdirected, foreign_run, corrupt,
    /// unexpected_zeros, or torn.
    pub class: &'static str,
    /// Sector by sector, what was found.
    pub findings: Vec<Finding>,
}

/// What validation saw in a run.
#[derive(Clone, Debug, Default)]
pub struct ValidationSummary {
    pub key_block_bytes: u64,
    pub blocks_written: u64,
    pub blocks_checked: u64,
    /// Of those, the blocks the verify phase read back after the run
    /// (None: no verify phase ran).
    pub blocks_verified: Option<u64>,
    pub errors: u64,
    /// The first errors (at most [`ERRORS_KEPT_MAX`]).
    pub error_list: Vec<ValidationError>,
    /// What the journal did, when there was one.
    pub journal: Option<crate::journal::JournalStats>,
}

pub(crate) struct Validator {
    spec: ValidateSpec,
    region: Region,
    key_bytes: u64,
    sector_bytes: usize,
    keys: KeyMap,
    /// Under `--dedupe-ratio`: which key blocks (units) are copies.
    duplicates: Option<Duplicates>,
    busy: BusyTable,
    sequence: AtomicU64,
    written: AtomicU64,
    checked: AtomicU64,
    error_count: AtomicU64,
    errors: Mutex<Vec<ValidationError>>,
    journal: Option<crate::journal::JournalWriter>,
    lookahead: usize,
    /// Blocks the verify phase checked, once it ran.
    verified: Mutex<Option<u64>>,
}

impl Validator {
    pub fn new(
        job: &JobSpec,
        spec: ValidateSpec,
        region: Region,
        target: &std::sync::Arc<dyn device::Device>,
    ) -> Result<Validator, crate::WorkloadError> {
        let sector_bytes = target.sector_bytes();
        // The key block: the smallest transfer, or less where the region
        // starts or --bsalign steps between its multiples (fio's verify
        // takes any aligned offset): every request is then whole key
        // blocks. A default alignment finer than the smallest transfer
        // (the sector, for mixed sizes) is refused below rather than
        // shrinking the key block to a sector unasked. Under duplicates a
        // key block is a unit, a copy or its own as a whole.
        let min = job.bs.min_bytes();
        let key_bytes = match job.dedupe {
            Some(dedupe) => dedupe.unit_bytes as u64,
            None => gcd(gcd(min, region.start), job.align_bytes.unwrap_or(min)),
        };
        check_key_block(job, region, key_bytes)?;
        if key_bytes % u64::from(sector_bytes) != 0 {
            return Err(crate::WorkloadError::Spec(spec_error(
                "dedupe-unit",
                format!(
                    "{key_bytes} bytes: under --validate a unit is stamped sector by sector, and the target's \
                     sectors are {sector_bytes} bytes; give a multiple of {sector_bytes}"
                ),
            )));
        }
        let duplicates = job.dedupe.and_then(|d| Duplicates::new(d.ratio));
        let blocks = region.len / key_bytes;
        let place = key_place(&spec, blocks)?;
        let keys = KeyMap::with_bytes(KeyBytes::zeroed(blocks, &place)?, key_bytes);
        let journal = match &spec.journal {
            None => None,
            Some(journal) => {
                let layout = KeyLayout { region, key_bytes, duplicates };
                Some(open_journal(job, &spec, journal, layout, target, &place)?)
            }
        };
        Ok(Validator {
            spec,
            region,
            key_bytes,
            sector_bytes: sector_bytes as usize,
            keys,
            duplicates,
            busy: BusyTable::new(blocks),
            sequence: AtomicU64::new(0),
            written: AtomicU64::new(0),
            checked: AtomicU64::new(0),
            error_count: AtomicU64::new(0),
            errors: Mutex::new(Vec::new()),
            lookahead: lookahead(job, journal.as_ref()),
            journal,
            verified: Mutex::new(None),
        })
    }

    pub fn spec(&self) -> &ValidateSpec {
        &self.spec
    }

    fn blocks(&self, req: &Request) -> std::ops::Range<u64> {
        let first = (req.offset - self.region.start) / self.key_bytes;
        first..first + req.len / self.key_bytes
    }

    /// Takes every key block of `req`, or none (returns false).
    pub fn try_lock(&self, req: &Request) -> bool {
        self.busy.try_lock(self.blocks(req))
    }

    pub fn unlock(&self, req: &Request) {
        self.busy.unlock(self.blocks(req))
    }

    /// Checks `buf`, read from `req`'s blocks, against the key map. Returns
    /// false once the error cap is reached.
    pub fn check(&self, req: &Request, buf: &[u8], by: CheckedBy) -> bool {
        for (i, b) in self.blocks(req).enumerate() {
            let key = self.keys.get(b);
            if key == KEY_NEVER_WRITTEN {
                continue;
            }
            self.checked.fetch_add(1, Ordering::Relaxed);
            let at = i * self.key_bytes as usize;
            let block = &buf[at..at + self.key_bytes as usize];
            let offset = self.region.start + b * self.key_bytes;
            let run =
                RunContext { run_id: self.spec.run_id, duplicates: self.duplicates, ..RunContext::default() };
            let verdict = check_block_in(block, self.sector_bytes, offset, Expect::Key(key), &run);
            if verdict != BlockVerdict::Ok {
                self.record(offset, key, by, verdict);
            }
        }
        self.error_count.load(Ordering::Relaxed) < self.spec.max_errors
    }

    fn record(&self, offset: u64, key: u8, by: CheckedBy, verdict: BlockVerdict) {
        let sectors = (self.key_bytes as usize / self.sector_bytes) as u32;
        let (class, findings) = classify(verdict, sectors);
        self.error_count.fetch_add(1, Ordering::Relaxed);
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if errors.len() < ERRORS_KEPT_MAX {
            errors.push(ValidationError {
                block_offset: offset,
                block_bytes: self.key_bytes,
                expected_key: key,
                checked_by: by,
                class,
                findings,
            });
        }
    }

    /// Gives a write (whose blocks the caller holds) its blocks' next
    /// keys, without filling a buffer yet: its `before` record needs only
    /// these ([`Validator::journal_queue_before`] then gives its sequence
    /// number).
    pub fn assign(&self, req: &Request) -> Vec<u8> {
        self.blocks(req).map(|b| next_key(self.keys.get(b))).collect()
    }

    /// Fills `buf` with the stamps of a write [`Validator::assign`] gave
    /// `sequence` and `keys`.
    pub fn fill(&self, req: &Request, sequence: u64, keys: &[u8], buf: &mut [u8]) {
        let time_ns = now_ns();
        for ((i, b), &key) in self.blocks(req).enumerate().zip(keys) {
            let at = i * self.key_bytes as usize;
            let offset = self.region.start + b * self.key_bytes;
            let block = &mut buf[at..at + self.key_bytes as usize];
            match self.duplicates.and_then(|d| d.set_of(offset, key, self.spec.run_id)) {
                Some(set) => fill_duplicate(block, self.sector_bytes, set, key, self.spec.run_id),
                None => {
                    fill_block(block, self.sector_bytes, offset, key, sequence, time_ns, self.spec.run_id)
                }
            }
        }
    }

    /// How many requests a worker prepares ahead (see [`lookahead`]).
    pub fn lookahead(&self) -> usize {
        self.lookahead
    }

    /// Gives a write about to be issued its sequence number and queues
    /// its `before` record; returns the sequence number and the ticket
    /// [`Validator::journal_wait`] takes. Under a journal, the journal
    /// gives the number as it queues the record, so that numbers follow
    /// the records' order (what tells a write the journal never recorded
    /// from a lost one after a crash).
    pub fn journal_queue_before(
        &self,
        req: &Request,
        keys: &[u8],
    ) -> Result<(u64, Option<u64>), crate::WorkloadError> {
        let Some(journal) = &self.journal else {
            return Ok((self.sequence.fetch_add(1, Ordering::Relaxed), None));
        };
        let entries: Vec<(u64, u8)> = self.blocks(req).zip(keys.iter().copied()).collect();
        let queued = journal.queue_before(&entries)?;
        Ok((queued.write_id, Some(queued.ticket)))
    }

    /// Whether the `before` record behind `ticket` is durable (always, with
    /// no ticket), without waiting.
    pub fn journal_durable(&self, ticket: Option<u64>) -> bool {
        match (&self.journal, ticket) {
            (Some(journal), Some(ticket)) => journal.is_durable(ticket),
            _ => true,
        }
    }

    /// Returns once the `before` record behind `ticket` is durable (sync
    /// and group mode).
    pub fn journal_wait(&self, ticket: Option<u64>) -> Result<(), crate::WorkloadError> {
        if let (Some(journal), Some(ticket)) = (&self.journal, ticket) {
            journal.wait(ticket)?;
        }
        Ok(())
    }

    /// Asks for the `before` record behind `ticket` to become durable soon
    /// (group mode; see [`crate::journal::JournalWriter::kick`]).
    pub fn journal_kick(&self, ticket: Option<u64>) {
        if let (Some(journal), Some(ticket)) = (&self.journal, ticket) {
            journal.kick(ticket);
        }
    }

    /// The journal, in group mode.
    pub fn group_journal(&self) -> Option<&crate::journal::JournalWriter> {
        self.journal.as_ref().filter(|j| j.mode() == JournalMode::Group)
    }

    /// The journal, when uring workers commit it through their own rings.
    pub fn ring_journal(&self) -> Option<&crate::journal::JournalWriter> {
        self.group_journal().filter(|j| j.ring_fd().is_some())
    }

    /// The journal, when a committer thread should run beside the workers
    /// (group mode, unless the workers commit through their rings).
    pub fn committer_journal(&self) -> Option<&crate::journal::JournalWriter> {
        self.group_journal().filter(|j| j.ring_fd().is_none())
    }

    /// Journals a completed write.
    pub fn journal_after(&self, sequence: u64, req: &Request) -> Result<(), crate::WorkloadError> {
        if let Some(journal) = &self.journal {
            journal.after(sequence, self.blocks(req))?;
        }
        Ok(())
    }

    /// Journals a completed write without waiting: the ticket its `after`
    /// record waits for under a sync journal (the write completes when it
    /// is durable), `None` otherwise.
    pub fn journal_queue_after(
        &self,
        sequence: u64,
        req: &Request,
    ) -> Result<Option<u64>, crate::WorkloadError> {
        match &self.journal {
            Some(journal) => Ok(journal.queue_after(sequence, self.blocks(req))?),
            None => Ok(None),
        }
    }

    /// The journal writer, when the run has one.
    pub fn journal(&self) -> Option<&crate::journal::JournalWriter> {
        self.journal.as_ref()
    }

    /// Makes the journal durable at the end of the run.
    pub fn finish(&self) -> Result<(), crate::WorkloadError> {
        if let Some(journal) = &self.journal {
            journal.finish()?;
        }
        Ok(())
    }

    /// The verify phase (fio's `do_verify`): reads back every key block
    /// the run wrote, in runs of up to [`VERIFY_RUN_BYTES`], and checks
    /// each against its key; stops early at the error cap or when `stop`
    /// is set. Called after the workers, when nothing else holds a block.
    pub fn verify_written(
        &self,
        device: &dyn device::Device,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<(), crate::WorkloadError> {
        let checked_before = self.checked.load(Ordering::Relaxed);
        let per_run = (VERIFY_RUN_BYTES / self.key_bytes).max(1);
        let mut buf =
            device::AlignedBuf::zeroed((per_run * self.key_bytes) as usize, device.buffer_align().max(4096));
        let blocks = self.keys.blocks();
        let mut b = 0;
        while b < blocks && !stop.load(Ordering::Relaxed) {
            if self.keys.get(b) == KEY_NEVER_WRITTEN {
                b += 1;
                continue;
            }
            // A run of written blocks, read at once.
            let end = (b..blocks.min(b + per_run))
                .find(|&e| self.keys.get(e) == KEY_NEVER_WRITTEN)
                .unwrap_or(blocks.min(b + per_run));
            let len = (end - b) * self.key_bytes;
            let req = Request {
                kind: crate::gen::IoKind::Read,
                offset: self.region.start + b * self.key_bytes,
                len,
                flush_after: false,
            };
            device.read_at(&mut buf[..len as usize], req.offset)?;
            if !self.check(&req, &buf[..len as usize], CheckedBy::Verify) {
                break;
            }
            b = end;
        }
        let verified = self.checked.load(Ordering::Relaxed) - checked_before;
        *self.verified.lock().unwrap_or_else(|e| e.into_inner()) = Some(verified);
        Ok(())
    }

    /// Records the keys of a completed write.
    pub fn written(&self, req: &Request, keys: &[u8]) {
        for (b, key) in self.blocks(req).zip(keys) {
            self.keys.set(b, *key);
        }
        self.written.fetch_add(keys.len() as u64, Ordering::Relaxed);
    }

    pub fn summary(&self) -> ValidationSummary {
        ValidationSummary {
            key_block_bytes: self.key_bytes,
            blocks_written: self.written.load(Ordering::Relaxed),
            blocks_checked: self.checked.load(Ordering::Relaxed),
            blocks_verified: *self.verified.lock().unwrap_or_else(|e| e.into_inner()),
            errors: self.error_count.load(Ordering::Relaxed),
            error_list: self.errors.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            journal: self.journal.as_ref().map(|j| j.stats()),
        }
    }
}

/// How many requests a worker prepares ahead: with a group-commit journal,
/// up to [`JOURNAL_LOOKAHEAD`] within [`JOURNAL_LOOKAHEAD_BYTES`], so that
/// the commit of later requests' `before` records overlaps the data writes
/// before them; one otherwise (sync mode keeps one durable record per
/// write; without a durable journal there is nothing to overlap).
fn lookahead(job: &JobSpec, journal: Option<&crate::journal::JournalWriter>) -> usize {
    match journal.map(|j| j.mode()) {
        Some(crate::journal::JournalMode::Group) => {
            let fit = (JOURNAL_LOOKAHEAD_BYTES / job.bs.max_bytes().max(1)) as usize;
            fit.clamp(2, JOURNAL_LOOKAHEAD)
        }
        _ => 1,
    }
}

/// Where a run's key blocks lie and what they hold, as its journal's
/// header records them.
struct KeyLayout {
    region: Region,
    key_bytes: u64,
    duplicates: Option<Duplicates>,
}

/// The key block chosen for `job` (see [`Validator::new`]) refused unless
/// every request is whole key blocks.
fn check_key_block(job: &JobSpec, region: Region, key_bytes: u64) -> Result<(), crate::WorkloadError> {
    let sizes_ok = match &job.bs {
        crate::BlockSizes::Fixed(size) => size % key_bytes == 0,
        crate::BlockSizes::Split { sizes, .. } => sizes.iter().all(|(s, _)| s % key_bytes == 0),
        crate::BlockSizes::Range { step, .. } => step % key_bytes == 0,
    };
    if sizes_ok && region.align % key_bytes == 0 && region.start % key_bytes == 0 {
        return Ok(());
    }
    let why = match job.dedupe {
        Some(_) => format!(
            "under --dedupe-ratio a key block is a dedupe unit ({key_bytes} bytes), copied or its own as a \
             whole: every transfer size and offset must be a multiple of it; use --bsalign {key_bytes} (and an \
             --offset that is a multiple of it) or a smaller --dedupe-unit"
        ),
        None => format!(
            "every transfer size and offset must be a multiple of the key block ({key_bytes} bytes: the \
             smallest transfer, or what it has in common with --offset and --bsalign); use sizes that are \
             multiples of it and --bsalign {key_bytes}"
        ),
    };
    Err(crate::WorkloadError::Spec(spec_error("validate", why)))
}

/// The journal of a validated run, created where `journal` says, its
/// header naming the run; under a group journal on the uring engine its
/// file is opened a second time for commits through the workers' rings.
fn open_journal(
    job: &JobSpec,
    spec: &ValidateSpec,
    journal: &crate::journal::JournalSpec,
    layout: KeyLayout,
    target: &std::sync::Arc<dyn device::Device>,
    place: &KeyPlace,
) -> Result<crate::journal::JournalWriter, crate::WorkloadError> {
    use crate::journal::{create_file, journal_record_bytes, JournalWriter};
    let KeyLayout { region, key_bytes, duplicates } = layout;
    let blocks = region.len / key_bytes;
    let header = validation::journal::JournalHeader {
        run_id: spec.run_id,
        region_start: region.start,
        key_block_bytes: key_bytes,
        blocks,
        sector_bytes: target.sector_bytes(),
        target: target.name().to_string(),
        mode: journal.mode,
        generation: 0,
        write_ids_end: 0,
        created_ns: now_ns(),
        duplicates,
    };
    // The writer's copy of the map, from which it writes compacted starts.
    let mirror = KeyBytes::zeroed(blocks, place)?;
    let device: std::sync::Arc<dyn device::Device> = match &journal.place {
        // A simulated disk is hundreds of gigabytes, sparse: the journal
        // takes the bytes a journal file would have, at its start (it is
        // zero-filled once it is made).
        JournalPlace::Device(dev) if dev.virtual_disk().is_some() => {
            let bytes = 2 * (validation::journal::start_bytes(blocks) + journal_record_bytes(blocks));
            let bytes = bytes.div_ceil(4096) * 4096;
            if bytes < dev.size_bytes() {
                std::sync::Arc::new(device::Slice::new(dev.clone(), 0, bytes)?)
            } else {
                dev.clone()
            }
        }
        JournalPlace::Device(dev) => dev.clone(),
        JournalPlace::Dir(dir) => {
            std::sync::Arc::new(create_file(dir, blocks, journal_record_bytes(blocks))?)
        }
    };
    let mut writer = JournalWriter::create(device, target.clone(), &header, mirror)?;
    if let (JournalPlace::Dir(dir), JournalMode::Group, Engine::Uring, true) =
        (&journal.place, journal.mode, job.engine, journal.ring)
    {
        // uring workers commit through their own rings when the file takes
        // O_DIRECT; else a committer thread does.
        writer.open_ring_file(&dir.join(crate::journal::JOURNAL_FILE));
    }
    Ok(writer)
}

/// Where the key maps of a run over `blocks` key blocks go. Their default
/// directory is the journal's, created here if need be, before the journal
/// file: a failure then leaves no journal behind to block the next run.
fn key_place(spec: &ValidateSpec, blocks: u64) -> Result<KeyPlace, crate::WorkloadError> {
    let journal_dir = match spec.journal.as_ref().map(|j| &j.place) {
        Some(JournalPlace::Dir(dir)) => Some(dir.as_path()),
        _ => None,
    };
    let place = spec.key_map.place(blocks, journal_dir);
    if let (KeyPlace::File(dir), Some(journal_dir)) = (&place, journal_dir) {
        if dir == journal_dir {
            crate::journal::create_dir(dir)?;
        }
    }
    Ok(place)
}

/// The time now, ns since the Unix epoch (0 if the clock is before it).
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Names a bad block's class. A block where some sectors hold the expected
/// key and the others an older one lost part of a write: torn.
fn classify(verdict: BlockVerdict, sectors: u32) -> (&'static str, Vec<Finding>) {
    use validation::FindingKind as K;
    match verdict {
        BlockVerdict::Torn { .. } => ("torn", Vec::new()),
        BlockVerdict::Bad { findings } => {
            let all_lost = findings.iter().all(|f| matches!(f.kind, K::LostWrite { .. }));
            let class = if all_lost && (findings.len() as u32) < sectors {
                "torn"
            } else {
                match findings.first().map(|f| f.kind) {
                    Some(K::LostWrite { .. }) => "lost_write",
                    Some(K::Misdirected { .. }) => "misdirected",
                    Some(K::ForeignRun { .. }) => "foreign_run",
                    Some(K::UnexpectedZeros) => "unexpected_zeros",
                    _ => "corrupt",
                }
            };
            (class, findings)
        }
        _ => ("corrupt", Vec::new()),
    }
}

/// The greatest common divisor; `gcd(n, 0)` is `n`.
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
