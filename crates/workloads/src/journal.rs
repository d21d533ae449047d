//! Writing the validation journal (format and replay: `validation::journal`)
//! through a [`Device`] beside a validated run, in one of three modes:
//!
//! - `sync`: every record is written and made durable before the run goes
//!   on (Vdbench's `-j`: two durable journal writes per data write);
//! - `async`: records are written in batches without flushes and made
//!   durable at the end (Vdbench's `-jn`): fast, but a host crash loses the
//!   map's recent history;
//! - `group`: a writer waits until its `before` record is durable, but the
//!   flush is shared: whoever finds no commit running writes and flushes
//!   every record queued so far, the others wait for it (group commit).
//!   `after` records are lazy: they ride along with a commit that flushes
//!   the target, at most every [`AFTERS_PER_TARGET_FLUSH`] records.
//!
//! A durable `after` record means that its data write is durable on the
//! target too, so a volatile write cache on the target cannot make replay
//! wrong: a commit that carries `after` records flushes the *target*
//! first, then writes and flushes the journal. Other commits flush the
//! journal only. A `before` record on a block whose earlier writes have no
//! durable `after` yet proves nothing about them: replay then expects any
//! key of that chain (the block's volatile cache may have kept any of
//! them). So that a chain never wraps the 255 keys, a block rewritten
//! [`CHAIN_MAX`] times since the last target flush began makes the next
//! commit flush the target.
//!
//! Records form one byte stream after the start (header and key-map
//! snapshot). The device is written in whole units (its sector, or the
//! ring file's O_DIRECT alignment when larger): each commit rewrites the
//! partial unit at the end of the stream, kept in memory, with the same
//! prefix plus the new records, so a sector holds either its old or its
//! new contents, and both contain every record made durable before.
//!
//! A journal in a file can also commit through a worker's own io_uring
//! ([`JournalWriter::begin_ring_commit`], `--journal-commit ring`): the
//! records go to the file opened with O_DIRECT and O_DSYNC, after a
//! linked fdatasync of the target when the batch needs one, and are
//! durable when the ring says the write completed. The commit then costs
//! the worker one more request in its ring instead of a committer thread
//! (docs/PERFORMANCE.md: no better on the machine measured).
//!
//! The writer gives each write its id (the sequence number its stamps
//! carry) as it queues the write's `before` record, under the same lock,
//! so ids follow the order of the records: replay can then tell a block
//! written after the journal's last durable record from one that lost a
//! write (`validation::journal`, `Replay::ahead_from`).
//!
//! A failed write or flush poisons the journal: every later call fails.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use device::{AlignedBuf, Device, DeviceError, FileDevice, FileOptions};
pub use validation::journal::JournalMode;
use validation::journal::{
    append_after, append_before, record_bytes, slot_bytes, start_bytes, JournalHeader, KeyState, StartStream,
    JOURNAL_HEADER_BYTES,
};
use validation::KeyBytes;

/// The journal's file name inside the journal directory.
pub const JOURNAL_FILE: &str = "iolab.journal";

/// Room for records in a journal file the cli creates (after the start):
/// [`JOURNAL_RECORD_BYTES_PER_BLOCK`] per key block, within these bounds
/// (64 MiB is about 1.1 million writes of one key block).
pub const JOURNAL_RECORD_BYTES_MIN: u64 = 1 << 20;
pub const JOURNAL_RECORD_BYTES_MAX: u64 = 64 << 20;
pub const JOURNAL_RECORD_BYTES_PER_BLOCK: u64 = 256;

/// The room for records a journal file over `blocks` key blocks gets.
pub fn journal_record_bytes(blocks: u64) -> u64 {
    blocks
        .saturating_mul(JOURNAL_RECORD_BYTES_PER_BLOCK)
        .clamp(JOURNAL_RECORD_BYTES_MIN, JOURNAL_RECORD_BYTES_MAX)
}

/// In async mode, queued records are written (not flushed) once there are
/// this many.
pub const ASYNC_BATCH_RECORDS: usize = 2048;

/// Group mode: at most this many `after` records wait for a commit that
/// flushes the target.
pub const AFTERS_PER_TARGET_FLUSH: usize = 1024;

/// Group mode: a `before` on a block written this many times since the last
/// target flush began makes the commit flush the target (and write the
/// `after` records), so replay's chain of possible keys stays short.
pub const CHAIN_MAX: u32 = 16;

/// Zeros are written in chunks of this size when a journal is created.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

/// A start (the key-map snapshot) is written in chunks of this size, so
/// that no copy of the whole map is ever made.
const START_CHUNK_BYTES: usize = 1 << 20;

/// Where a validated run keeps its journal, and how it writes it.
#[derive(Clone, serde::Serialize)]
pub struct JournalSpec {
    pub mode: JournalMode,
    pub place: JournalPlace,
    /// Group mode, journal in a directory, uring engine: each worker
    /// commits through its own ring ([`JournalWriter::begin_ring_commit`])
    /// instead of a committer thread (`--journal-commit ring`). Elsewhere,
    /// or when the file system refuses O_DIRECT, the thread commits.
    pub ring: bool,
}

/// A journal directory (the cli's `--journal DIR`: a new file is created
/// in it) or a device the caller opened (tests put it on a crash device).
#[derive(Clone)]
pub enum JournalPlace {
    Dir(PathBuf),
    Device(Arc<dyn Device>),
}

impl JournalPlace {
    fn describe(&self) -> String {
        match self {
            JournalPlace::Dir(dir) => dir.display().to_string(),
            JournalPlace::Device(dev) => dev.name().to_string(),
        }
    }
}

impl std::fmt::Debug for JournalSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mode, place, ring) = (self.mode, self.place.describe(), self.ring);
        write!(f, "JournalSpec {{ mode: {mode:?}, place: {place}, ring: {ring} }}")
    }
}

impl serde::Serialize for JournalPlace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.describe())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalWriteError {
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("journal: {what}: {source}")]
    Device {
        what: &'static str,
        #[source]
        source: DeviceError,
    },
    #[error("{}: holds a journal from an earlier run; check the target with `iolab validate`, then remove it", path.display())]
    Exists { path: PathBuf },
    #[error("{device}: the journal has no room ({slot_bytes}-byte slots): {why}")]
    Full { device: String, slot_bytes: u64, why: &'static str },
    #[error("{device}: an earlier journal write or flush failed; the journal is no longer trustworthy")]
    Poisoned { device: String },
    #[error("{device}: {what} (through the ring): {source}")]
    Ring {
        device: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Creates `dir/iolab.journal` (never overwriting one) with two slots, each
/// with room for the start of a journal over `blocks` key blocks and
/// `record_bytes` of records, and opens it as a device. Its contents are written by
/// [`JournalWriter::create`], which zero-fills it.
pub fn create_file(dir: &Path, blocks: u64, record_bytes: u64) -> Result<FileDevice, JournalWriteError> {
    let path = dir.join(JOURNAL_FILE);
    let io = |what| {
        let path = path.clone();
        move |source| JournalWriteError::Io { path, what, source }
    };
    create_dir(dir)?;
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(file) => {
            // Two slots, each a start and room for records (compaction
            // switches between them).
            file.set_len(2 * (start_bytes(blocks) + record_bytes)).map_err(io("cannot size"))?;
            file.sync_all().map_err(io("cannot flush"))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(existing(path)),
        Err(e) => return Err(io("cannot create")(e)),
    }
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io("cannot flush the directory"))?;
    let journal = FileDevice::open(&path, &FileOptions::default())
        .map_err(|source| JournalWriteError::Device { what: "cannot open", source })?;
    // Held while the run lasts: `iolab validate` takes a shared lock and so
    // never checks a target against a journal still being written.
    journal
        .lock(device::LockKind::Exclusive)
        .map_err(|source| JournalWriteError::Device { what: "cannot lock", source })?;
    Ok(journal)
}

/// Checks, writing nothing, that a journal can be started in `dir`: it is
/// a directory or can be made one, and holds no journal. Callers check
/// before they write anything else; [`create_file`] checks again.
pub fn check_dir(dir: &Path) -> Result<(), JournalWriteError> {
    if dir.exists() && !dir.is_dir() {
        let source = std::io::Error::from(std::io::ErrorKind::NotADirectory);
        let what = "is not a directory: a journal goes in a directory (--journal DIR)";
        return Err(JournalWriteError::Io { path: dir.to_path_buf(), what, source });
    }
    let path = dir.join(JOURNAL_FILE);
    if path.exists() {
        return Err(existing(path));
    }
    Ok(())
}

/// The error for a journal file already at `path`: in use by a running
/// process (not "from an earlier run"), or left by an earlier run.
fn existing(path: PathBuf) -> JournalWriteError {
    let options = FileOptions { read_only: true, ..FileOptions::default() };
    if let Ok(journal) = FileDevice::open(&path, &options) {
        if let Err(source) = journal.lock(device::LockKind::Shared) {
            return JournalWriteError::Device { what: "cannot start a journal", source };
        }
    }
    JournalWriteError::Exists { path }
}

/// Creates the journal directory `dir` if it does not exist.
pub(crate) fn create_dir(dir: &Path) -> Result<(), JournalWriteError> {
    let what = if dir.exists() && !dir.is_dir() {
        "is not a directory: a journal goes in a directory (--journal DIR)"
    } else {
        "cannot create the journal directory"
    };
    std::fs::create_dir_all(dir).map_err(|source| JournalWriteError::Io {
        path: dir.to_path_buf(),
        what,
        source,
    })
}

/// Writes a start at `at`, the first byte of a slot, a chunk at a time:
/// the body (snapshot and carried records, zero-padded to whole sectors)
/// first, then the header that holds its checksum. Not durable until the
/// caller flushes; until then a torn start fails its checksums.
fn write_start(
    device: &dyn Device,
    at: u64,
    header: &JournalHeader,
    keys: &KeyBytes,
    carried: &[u8],
) -> Result<(), JournalWriteError> {
    let sector = device.sector_bytes() as usize;
    let align = device.buffer_align().max(4096);
    debug_assert_eq!(START_CHUNK_BYTES % sector, 0);
    let mut stream = StartStream::new(header, keys, carried);
    let mut buf = AlignedBuf::zeroed(START_CHUNK_BYTES, align);
    let mut offset = at + JOURNAL_HEADER_BYTES as u64;
    loop {
        let filled = stream.fill(&mut buf);
        if filled == 0 {
            break;
        }
        // Only the last chunk is short: padded, it ends the start.
        let len = filled.next_multiple_of(sector);
        buf[filled..len].fill(0);
        device.write_at(&buf[..len], offset).map_err(device_error("cannot write a start"))?;
        // The keys written are not needed resident (when they are a file).
        let body_done = (offset - at) as usize - JOURNAL_HEADER_BYTES;
        keys.evict(body_done.min(keys.len())..(body_done + filled).min(keys.len()));
        offset += len as u64;
    }
    let mut head = AlignedBuf::zeroed(JOURNAL_HEADER_BYTES, align);
    head.copy_from_slice(&stream.header());
    device.write_at(&head, at).map_err(device_error("cannot write a start's header"))
}

/// A record waiting for a commit (encoded by the leader, who knows the
/// generation).
enum Rec {
    Before(u64, Vec<(u64, u8)>),
    After(u64),
}

struct State {
    /// The id the next `before` record gives its write.
    next_write_id: u64,
    /// Records for the next commit (in group mode, `before` records only),
    /// and their encoded bytes.
    queued: Vec<Rec>,
    queued_bytes: u64,
    /// Group mode: `after` records waiting for a commit that flushes the
    /// target, and how often each key block was written since the last
    /// target flush began (a `before` on one written [`CHAIN_MAX`] times
    /// needs a target flush).
    afters: Vec<Rec>,
    dirty: HashMap<u64, u32>,
    /// Bytes left for records in the live slot after the last commit: a
    /// commit whose records would not fit compacts, and takes the `after`
    /// records with it (flushing the target) so that the new start
    /// carries only the writes really in flight.
    room: u64,
    /// The next durable commit must flush the target first.
    target_flush_due: bool,
    /// Records queued now belong to commit `open_commit`; every commit
    /// below `durable_commit` is durable.
    open_commit: u64,
    durable_commit: u64,
    /// A commit is running (only its leader touches the device).
    committing: bool,
    /// Group mode: every commit below this one is wanted durable soon
    /// ([`JournalWriter::kick`]); the committer thread makes it so.
    wanted_end: u64,
    /// The committer thread is asked to return.
    stopping: bool,
    poisoned: bool,
    stats: JournalStats,
}

/// What a journal writer did in a run: how many commits its records
/// took, and how often and how long writers waited for one.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct JournalStats {
    /// Records written (`before` and `after`).
    pub records: u64,
    /// Batches written, and of those, the ones made durable with a flush of
    /// the journal device.
    pub writes: u64,
    pub commits: u64,
    /// Of the commits, those made through a worker's io_uring.
    pub ring_commits: u64,
    /// Commits that flushed the target first.
    pub target_flushes: u64,
    /// New snapshots written into the other slot.
    pub compactions: u64,
    /// Times a writer found its `before` record not yet durable and
    /// waited, and the total time it waited (microseconds).
    pub waits: u64,
    pub wait_us: u64,
}

/// Where the records end, and what they say: touched by the commit
/// leader only.
struct Tail {
    /// The slot (0 or 1) and generation of the live journal.
    slot: u64,
    generation: u64,
    /// Stream bytes written in the slot after its snapshot.
    written_end: u64,
    /// Replay's state after every record written: what a compacted start
    /// holds.
    mirror: KeyState,
    /// 1 + the highest write id of a `before` record written: what a
    /// compacted start's header says.
    write_ids_end: u64,
    /// The stream's bytes since the last whole unit: the next write starts
    /// with them.
    partial: Vec<u8>,
}

pub struct JournalWriter {
    device: Arc<dyn Device>,
    /// The validated target, flushed before a durable commit that carries
    /// `after` records or proves an earlier write complete.
    target: Arc<dyn Device>,
    header: JournalHeader,
    /// Bytes of a slot, and the offset of the records in one.
    slot_bytes: u64,
    records_at: u64,
    /// Records are written in whole units of this many bytes.
    unit: u64,
    /// The journal file opened with O_DIRECT and O_DSYNC, for commits
    /// through a worker's ring.
    ring_file: Option<FileDevice>,
    state: Mutex<State>,
    committed: Condvar,
    /// Wakes the committer thread: a kick, the end of a commit, or a stop.
    kicked: Condvar,
    /// Copies of `State::durable_commit` and `State::wanted_end`, so that a
    /// writer whose record is durable, or already kicked, takes no lock.
    durable_end: AtomicU64,
    wanted_end: AtomicU64,
    tail: Mutex<Tail>,
}

fn device_error(what: &'static str) -> impl FnOnce(DeviceError) -> JournalWriteError {
    move |source| JournalWriteError::Device { what, source }
}

/// A queued `before` record: the id it gave its write, and the ticket
/// that says when it is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    pub write_id: u64,
    pub ticket: u64,
}

/// What one commit writes.
struct Batch {
    records: Vec<Rec>,
    commit: u64,
    flush_target: bool,
    durable: bool,
}

impl Batch {
    /// What the commit adds to the stats once it is done.
    fn counted(&self) -> JournalStats {
        JournalStats {
            records: self.records.len() as u64,
            writes: 1,
            commits: u64::from(self.durable),
            target_flushes: u64::from(self.flush_target),
            ..JournalStats::default()
        }
    }
}

/// A commit through a worker's ring ([`JournalWriter::begin_ring_commit`]):
/// write `buf` at `offset` of the ring file, after an fdatasync of the
/// target when `flush_target`, linked so that the write waits for it.
pub struct RingCommit {
    pub flush_target: bool,
    pub offset: u64,
    pub buf: AlignedBuf,
    commit: u64,
    counted: JournalStats,
    room: u64,
}

impl JournalWriter {
    /// Writes the header and the key map (one key per block) at the start
    /// of `device`'s first slot, zeros over the rest (so the first bytes
    /// past the last record are zeros, and later flushes change no file
    /// metadata), and makes it durable. The writer keeps `keys` as its
    /// copy of the map, from which it writes compacted starts.
    pub fn create(
        device: Arc<dyn Device>,
        target: Arc<dyn Device>,
        header: &JournalHeader,
        keys: KeyBytes,
    ) -> Result<JournalWriter, JournalWriteError> {
        let header = JournalHeader { generation: 0, write_ids_end: 0, ..header.clone() };
        assert_eq!(keys.len() as u64, header.blocks, "one key per block");
        let records_at = start_bytes(header.blocks);
        let sector = u64::from(device.sector_bytes());
        let slot_bytes = slot_bytes(device.size_bytes());
        if slot_bytes < records_at + sector || records_at % sector != 0 {
            return Err(JournalWriteError::Full {
                device: device.name().to_string(),
                slot_bytes,
                why: "a slot must hold the header, the key map and a sector of records",
            });
        }
        write_start(device.as_ref(), 0, &header, &keys, &[])?;
        let align = device.buffer_align().max(4096);
        let zeros = AlignedBuf::zeroed(ZERO_CHUNK_BYTES, align);
        let mut at = records_at;
        while at < device.size_bytes() {
            let len = (device.size_bytes() - at).min(ZERO_CHUNK_BYTES as u64) as usize;
            device.write_at(&zeros[..len], at).map_err(device_error("cannot zero-fill"))?;
            at += len as u64;
        }
        device.flush().map_err(device_error("cannot flush"))?;
        let state = State {
            next_write_id: 0,
            queued: Vec::new(),
            queued_bytes: 0,
            afters: Vec::new(),
            dirty: HashMap::new(),
            room: slot_bytes - records_at,
            target_flush_due: false,
            open_commit: 0,
            durable_commit: 0,
            committing: false,
            wanted_end: 0,
            stopping: false,
            poisoned: false,
            stats: JournalStats::default(),
        };
        let mirror = KeyState::new(keys);
        let tail =
            Tail { slot: 0, generation: 0, written_end: 0, mirror, write_ids_end: 0, partial: Vec::new() };
        Ok(JournalWriter {
            device,
            target,
            header,
            slot_bytes,
            records_at,
            unit: sector,
            ring_file: None,
            state: Mutex::new(state),
            committed: Condvar::new(),
            kicked: Condvar::new(),
            durable_end: AtomicU64::new(0),
            wanted_end: AtomicU64::new(0),
            tail: Mutex::new(tail),
        })
    }

    pub fn mode(&self) -> JournalMode {
        self.header.mode
    }

    /// What the journal did so far.
    pub fn stats(&self) -> JournalStats {
        self.lock().stats
    }

    /// How many times the journal was compacted.
    pub fn generation(&self) -> u64 {
        self.tail.lock().unwrap_or_else(|e| e.into_inner()).generation
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic elsewhere; the state is only ever
        // changed by whole assignments, so it stays consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn poisoned(&self) -> JournalWriteError {
        JournalWriteError::Poisoned { device: self.device.name().to_string() }
    }

    /// Queues a `before` record: a write is about to give these blocks
    /// these keys. Returns the write's id (its stamps' sequence number),
    /// given here so that ids follow the records' order, and the ticket
    /// [`JournalWriter::wait`] takes to learn that the record is durable.
    /// Queuing early, and waiting only right before the data write, lets
    /// the commit overlap other work.
    pub fn queue_before(&self, entries: &[(u64, u8)]) -> Result<Queued, JournalWriteError> {
        let mut state = self.lock();
        if state.poisoned {
            return Err(self.poisoned());
        }
        let write_id = state.next_write_id;
        state.next_write_id += 1;
        if !state.dirty.is_empty() && entries.iter().any(|(b, _)| state.dirty.get(b) >= Some(&CHAIN_MAX)) {
            // The block's chain of possible keys is long: end it by making
            // its writes' `after` records durable.
            state.target_flush_due = true;
        }
        state.queued.push(Rec::Before(write_id, entries.to_vec()));
        state.queued_bytes += record_bytes(entries.len());
        let ticket = state.open_commit;
        self.maybe_write_async(state)?;
        Ok(Queued { write_id, ticket })
    }

    /// Returns once the record behind `ticket` is durable (sync and group
    /// modes; at once in async mode).
    pub fn wait(&self, ticket: u64) -> Result<(), JournalWriteError> {
        match self.header.mode {
            JournalMode::Async => Ok(()),
            JournalMode::Sync | JournalMode::Group => self.durable(ticket, false),
        }
    }

    /// Whether the record behind `ticket` is durable (always in async
    /// mode), without waiting or locking.
    pub fn is_durable(&self, ticket: u64) -> bool {
        self.header.mode == JournalMode::Async || self.durable_end.load(Ordering::Acquire) > ticket
    }

    /// Asks for the record behind `ticket` to be made durable soon, without
    /// waiting: a worker kicks the ticket of a request it will issue a few
    /// requests from now, so that the commit runs on the committer thread
    /// ([`JournalWriter::run_committer`]) while the worker goes on, and is
    /// done by the time the worker waits. Nothing happens without a
    /// committer thread (group mode only).
    pub fn kick(&self, ticket: u64) {
        if self.wanted_end.load(Ordering::Relaxed) > ticket {
            return;
        }
        let mut state = self.lock();
        if state.durable_commit > ticket || state.wanted_end > ticket {
            return;
        }
        state.wanted_end = ticket + 1;
        self.wanted_end.store(ticket + 1, Ordering::Relaxed);
        if !state.committing {
            self.kicked.notify_one();
        }
    }

    /// The committer thread's body (group mode): commits whenever a kicked
    /// ticket is not yet durable and no commit is running, until
    /// [`JournalWriter::stop_committer`] (after committing what was kicked)
    /// or an error (which poisons the journal, so the workers see it).
    pub fn run_committer(&self) {
        let mut state = self.lock();
        loop {
            if state.poisoned {
                return;
            }
            let wanted = state.wanted_end > state.durable_commit && !state.queued.is_empty();
            if state.stopping && !wanted {
                return;
            }
            if !state.committing && wanted {
                if self.commit(state, true, false).is_err() {
                    return;
                }
                state = self.lock();
                continue;
            }
            state = self.kicked.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Makes [`JournalWriter::run_committer`] return.
    pub fn stop_committer(&self) {
        self.lock().stopping = true;
        self.kicked.notify_all();
    }

    /// Records that a write is about to give these blocks these keys;
    /// returns its id once that is durable (sync and group modes).
    pub fn before(&self, entries: &[(u64, u8)]) -> Result<u64, JournalWriteError> {
        let queued = self.queue_before(entries)?;
        self.wait(queued.ticket)?;
        Ok(queued.write_id)
    }

    /// Records that write `write_id`, on these key blocks, completed:
    /// durable at once in sync mode; in group mode with the next commit
    /// that flushes the target (every [`AFTERS_PER_TARGET_FLUSH`] records
    /// at the latest); in async mode, at the end.
    pub fn after(
        &self,
        write_id: u64,
        blocks: impl IntoIterator<Item = u64>,
    ) -> Result<(), JournalWriteError> {
        let mut state = self.lock();
        if state.poisoned {
            return Err(self.poisoned());
        }
        match self.header.mode {
            JournalMode::Group => {
                state.afters.push(Rec::After(write_id));
                for b in blocks {
                    *state.dirty.entry(b).or_default() += 1;
                }
                Ok(())
            }
            JournalMode::Async => {
                state.queued.push(Rec::After(write_id));
                state.queued_bytes += record_bytes(0);
                self.maybe_write_async(state)
            }
            JournalMode::Sync => {
                state.queued.push(Rec::After(write_id));
                state.queued_bytes += record_bytes(0);
                state.target_flush_due = true;
                let ticket = state.open_commit;
                drop(state);
                self.durable(ticket, false)
            }
        }
    }

    /// Makes everything queued durable, the target first (at the end of a
    /// run).
    pub fn finish(&self) -> Result<(), JournalWriteError> {
        let ticket = self.lock().open_commit;
        self.durable(ticket, true)
    }

    /// Async mode: the thread that fills a batch writes it, unless a
    /// write is already running (the next filler will).
    fn maybe_write_async(&self, state: MutexGuard<'_, State>) -> Result<(), JournalWriteError> {
        if self.header.mode == JournalMode::Async
            && state.queued.len() >= ASYNC_BATCH_RECORDS
            && !state.committing
        {
            self.commit(state, false, false)?;
        }
        Ok(())
    }

    /// Returns once commit `ticket` is durable, committing as the leader
    /// when no commit is running.
    fn durable(&self, ticket: u64, flush_target: bool) -> Result<(), JournalWriteError> {
        if !flush_target && self.durable_end.load(Ordering::Acquire) > ticket {
            return Ok(());
        }
        let mut state = self.lock();
        if state.durable_commit > ticket && !state.poisoned {
            return Ok(());
        }
        let began = Instant::now();
        let result = loop {
            if state.poisoned {
                break Err(self.poisoned());
            }
            if state.durable_commit > ticket {
                break Ok(());
            }
            if !state.committing {
                // The commit takes every record queued so far, this one too.
                let result = self.commit(state, true, flush_target);
                state = self.lock();
                break result;
            }
            state = self.committed.wait(state).unwrap_or_else(|e| e.into_inner());
        };
        state.stats.waits += 1;
        state.stats.wait_us += began.elapsed().as_micros() as u64;
        result
    }

    /// Takes what the next commit writes.
    fn take_batch(&self, state: &mut State, durable: bool, flush_target: bool) -> Batch {
        let afters_bytes = record_bytes(0) * state.afters.len() as u64;
        let compacting = state.queued_bytes + afters_bytes > state.room;
        let flush_target = durable
            && (flush_target
                || state.target_flush_due
                || compacting
                || state.afters.len() >= AFTERS_PER_TARGET_FLUSH);
        let mut records = Vec::new();
        if flush_target {
            // Every after record and dirty block taken here belongs to a
            // write that completed before the target flush is issued.
            records = std::mem::take(&mut state.afters);
            state.dirty.clear();
            state.target_flush_due = false;
        }
        records.append(&mut state.queued);
        state.queued_bytes = 0;
        let batch = Batch { records, commit: state.open_commit, flush_target, durable };
        state.open_commit += 1;
        batch
    }

    /// As the leader: writes the batch and, when `durable`, flushes (the
    /// target first when the batch needs it, then the journal). Releases
    /// the lock for the I/O; other threads queue meanwhile.
    fn commit(
        &self,
        mut state: MutexGuard<'_, State>,
        durable: bool,
        flush_target: bool,
    ) -> Result<(), JournalWriteError> {
        debug_assert!(!state.committing && !state.poisoned);
        state.committing = true;
        let batch = self.take_batch(&mut state, durable, flush_target);
        drop(state);
        let commit = batch.commit;
        let counted = batch.counted();
        let result = self.write_batch(batch);
        self.end_commit(commit, durable, counted, result)
    }

    /// Ends the running commit: counts it and, when it made its records
    /// durable, says so to the waiters; a failure poisons the journal.
    fn end_commit(
        &self,
        commit: u64,
        durable: bool,
        counted: JournalStats,
        result: Result<(bool, u64), JournalWriteError>,
    ) -> Result<(), JournalWriteError> {
        let mut state = self.lock();
        state.committing = false;
        match result {
            Ok((compacted, room)) => {
                state.room = room;
                let s = &mut state.stats;
                s.records += counted.records;
                s.writes += counted.writes;
                s.commits += counted.commits;
                s.ring_commits += counted.ring_commits;
                s.target_flushes += counted.target_flushes;
                s.compactions += u64::from(compacted);
                if durable {
                    state.durable_commit = commit + 1;
                    self.durable_end.store(commit + 1, Ordering::Release);
                }
            }
            Err(_) => state.poisoned = true,
        }
        self.committed.notify_all();
        self.kicked.notify_all();
        result.map(|_| ())
    }

    /// The descriptor of the journal file opened for commits through a
    /// worker's ring ([`JournalWriter::open_ring_file`]), if it is.
    pub fn ring_fd(&self) -> Option<RawFd> {
        self.ring_file.as_ref().and_then(|f| f.raw_fd())
    }

    /// Opens the journal file at `path` a second time, with O_DIRECT and
    /// O_DSYNC, so that workers can commit through their rings. Returns
    /// whether they can: not when the file system refuses O_DIRECT, or
    /// needs an alignment (over 4 KiB) the journal's layout does not keep.
    /// Called before any record is written.
    pub fn open_ring_file(&mut self, path: &Path) -> bool {
        let tail = self.tail.get_mut().unwrap_or_else(|e| e.into_inner());
        assert!(tail.written_end == 0 && tail.generation == 0, "the ring file is opened before any record");
        let options = FileOptions { direct: true, dsync: true, ..FileOptions::default() };
        let Ok(file) = FileDevice::open(path, &options) else { return false };
        let unit = u64::from(file.sector_bytes()).max(self.unit);
        if unit > 4096
            || self.records_at % unit != 0
            || self.slot_bytes % unit != 0
            || file.buffer_align() > 4096
        {
            return false;
        }
        self.unit = unit;
        self.ring_file = Some(file);
        true
    }

    /// Starts a commit through the caller's ring, when no commit is
    /// running and a `before` record waits: takes the batch, and returns
    /// the write to make (after a linked fdatasync of the target when
    /// [`RingCommit::flush_target`]). The records are durable once it
    /// completes; the caller must then hand the outcome to
    /// [`JournalWriter::end_ring_commit`] (no other commit starts until it
    /// does). A batch that does not fit in the slot is compacted here, at
    /// once, and `None` returned: its records are durable already.
    pub fn begin_ring_commit(&self) -> Result<Option<RingCommit>, JournalWriteError> {
        debug_assert!(self.ring_file.is_some(), "ring commits need the ring file");
        let mut state = self.lock();
        if state.poisoned {
            return Err(self.poisoned());
        }
        if state.committing || state.queued.is_empty() {
            return Ok(None);
        }
        state.committing = true;
        let batch = self.take_batch(&mut state, true, false);
        drop(state);
        let (commit, flush_target) = (batch.commit, batch.flush_target);
        let mut counted = batch.counted();
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = self.apply(&mut tail, batch.records);
        if !self.fits(&tail, bytes.len()) {
            let result = self.compact_now(&mut tail, flush_target);
            drop(tail);
            self.end_commit(commit, true, counted, result)?;
            return Ok(None);
        }
        let (offset, buf) = self.stage(&mut tail, &bytes);
        counted.ring_commits = 1;
        let room = self.room(&tail);
        Ok(Some(RingCommit { commit, flush_target, offset, buf, counted, room }))
    }

    /// Ends a commit begun by [`JournalWriter::begin_ring_commit`] with
    /// what the ring said: the target flush's and the write's outcome
    /// (`what` failed and why). A failure poisons the journal.
    pub fn end_ring_commit(
        &self,
        commit: RingCommit,
        outcome: Result<(), (&'static str, std::io::Error)>,
    ) -> Result<(), JournalWriteError> {
        let result = outcome.map(|()| (false, commit.room)).map_err(|(what, source)| {
            JournalWriteError::Ring { device: self.device.name().to_string(), what, source }
        });
        self.end_commit(commit.commit, true, commit.counted, result)
    }

    /// Ends a ring commit as failed without freeing its buffer, which the
    /// kernel may still read (the ring broke with the write in it).
    pub fn end_ring_commit_leaking(
        &self,
        commit: RingCommit,
        (what, source): (&'static str, std::io::Error),
    ) -> Result<(), JournalWriteError> {
        let RingCommit { commit, counted, buf, .. } = commit;
        std::mem::forget(buf);
        let device = self.device.name().to_string();
        self.end_commit(commit, true, counted, Err(JournalWriteError::Ring { device, what, source }))
    }

    /// Writes a batch after the records in the live slot; when it does not
    /// fit, compacts instead. Says whether it compacted, and the room left.
    fn write_batch(&self, batch: Batch) -> Result<(bool, u64), JournalWriteError> {
        if batch.flush_target {
            // The target first: what the records about to become durable
            // say completed must be durable before they are.
            self.target.flush().map_err(device_error("cannot flush the target before a commit"))?;
        }
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = self.apply(&mut tail, batch.records);
        if !self.fits(&tail, bytes.len()) {
            // The target was flushed above when the batch needs it.
            return self.compact_now(&mut tail, false);
        }
        if !bytes.is_empty() {
            let (at, buf) = self.stage(&mut tail, &bytes);
            self.device.write_at(&buf, at).map_err(device_error("cannot write"))?;
        }
        if batch.durable {
            self.device.flush().map_err(device_error("cannot flush"))?;
        }
        Ok((false, self.room(&tail)))
    }

    /// Encodes records after the stream, and applies them to the mirror.
    fn apply(&self, tail: &mut Tail, records: Vec<Rec>) -> Vec<u8> {
        let mut bytes = Vec::new();
        for rec in &records {
            match rec {
                Rec::Before(id, entries) => append_before(&mut bytes, tail.generation, *id, entries),
                Rec::After(id) => append_after(&mut bytes, tail.generation, *id),
            }
        }
        for rec in records {
            match rec {
                Rec::Before(id, entries) => {
                    // Ids are given as records are queued, and batches
                    // taken in queue order.
                    debug_assert!(id >= tail.write_ids_end, "write ids in record order");
                    tail.write_ids_end = id + 1;
                    tail.mirror.before(id, entries)
                }
                Rec::After(id) => tail.mirror.after(id),
            }
        }
        bytes
    }

    /// Whether `len` more stream bytes fit in the live slot.
    fn fits(&self, tail: &Tail, len: usize) -> bool {
        len as u64 <= self.room(tail)
    }

    /// Bytes left for records in the live slot.
    fn room(&self, tail: &Tail) -> u64 {
        self.slot_bytes - self.records_at - tail.written_end
    }

    /// A commit's compaction, the target flushed first when the batch
    /// needs it (as [`JournalWriter::write_batch`] does).
    fn compact_now(&self, tail: &mut Tail, flush_target: bool) -> Result<(bool, u64), JournalWriteError> {
        if flush_target {
            self.target.flush().map_err(device_error("cannot flush the target before a commit"))?;
        }
        self.compact(tail)?;
        Ok((true, self.room(tail)))
    }

    /// Writes a new start, of the next generation, in the other slot: the
    /// key map and the `before` records of the writes still in flight,
    /// equivalent to the live slot plus the batch just applied to the
    /// mirror. The live slot stays whole until the flush makes the new one
    /// durable, so at every instant one of them is complete.
    fn compact(&self, tail: &mut Tail) -> Result<(), JournalWriteError> {
        let generation = tail.generation + 1;
        let mut carried = Vec::new();
        for (id, entries) in tail.mirror.inflight() {
            append_before(&mut carried, generation, id, entries);
        }
        let header = JournalHeader { generation, write_ids_end: tail.write_ids_end, ..self.header.clone() };
        let sector = u64::from(self.device.sector_bytes());
        let len = (self.records_at + carried.len() as u64).next_multiple_of(sector);
        if len > self.slot_bytes {
            return Err(JournalWriteError::Full {
                device: self.device.name().to_string(),
                slot_bytes: self.slot_bytes,
                why: "the key map and the writes in flight do not fit in a slot (use fewer threads or \
                      smaller transfers)",
            });
        }
        let slot = 1 - tail.slot;
        write_start(self.device.as_ref(), slot * self.slot_bytes, &header, tail.mirror.keys(), &carried)?;
        self.device.flush().map_err(device_error("cannot flush"))?;
        let whole = carried.len() - carried.len() % self.unit as usize;
        *tail = Tail {
            slot,
            generation,
            written_end: carried.len() as u64,
            mirror: std::mem::take(&mut tail.mirror),
            write_ids_end: tail.write_ids_end,
            partial: carried[whole..].to_vec(),
        };
        Ok(())
    }

    /// Appends `bytes` to the stream: returns where to write and what, in
    /// whole units from the last unit boundary (the partial unit's bytes
    /// first, zeros after the new ones).
    fn stage(&self, tail: &mut Tail, bytes: &[u8]) -> (u64, AlignedBuf) {
        let unit = self.unit as usize;
        let kept = tail.partial.len();
        let end = kept + bytes.len();
        let mut buf = AlignedBuf::zeroed(end.next_multiple_of(unit), self.device.buffer_align().max(4096));
        buf[..kept].copy_from_slice(&tail.partial);
        buf[kept..end].copy_from_slice(bytes);
        let at = tail.slot * self.slot_bytes + self.records_at + tail.written_end - kept as u64;
        debug_assert_eq!(at % self.unit, 0);
        tail.written_end += bytes.len() as u64;
        tail.partial = buf[end - end % unit..end].to_vec();
        (at, buf)
    }
}
