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
//!
//! Here: the public types and the calls workers make. `file.rs` creates a
//! journal, `commit.rs` commits (and runs group commit's committer
//! thread), `ring.rs` commits through a worker's io_uring, `compact.rs`
//! compacts into the other slot.

mod commit;
mod compact;
mod file;
mod ring;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use device::{Device, DeviceError, FileDevice};
pub use validation::journal::JournalMode;
use validation::journal::{record_bytes, JournalHeader, KeyState};

pub(crate) use file::create_dir;
pub use file::{check_dir, create_file};
pub use ring::RingCommit;

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

/// Where a validated run keeps its journal, and how it writes it.
#[derive(Clone)]
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

impl State {
    /// A new journal's writer state: nothing queued, `room` bytes for
    /// records in its slot.
    fn new(room: u64) -> State {
        State {
            next_write_id: 0,
            queued: Vec::new(),
            queued_bytes: 0,
            afters: Vec::new(),
            dirty: HashMap::new(),
            room,
            target_flush_due: false,
            open_commit: 0,
            durable_commit: 0,
            committing: false,
            wanted_end: 0,
            stopping: false,
            poisoned: false,
            stats: JournalStats::default(),
        }
    }
}

/// What a journal writer did in a run: how many commits its records
/// took, and how often and how long writers waited for one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
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
    /// Stream bytes known durable (a flush completed after they were
    /// written), and the most a mark record has said so: the next batch
    /// starts with a mark when the first passed the second, so that
    /// replay tells damage to durable records from a torn tail.
    durable_end: u64,
    marked: u64,
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
    /// The caller sends every commit ([`JournalWriter::drive_commits`]).
    driven: AtomicBool,
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

impl JournalWriter {
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
        match self.queue_after(write_id, blocks)? {
            Some(ticket) => self.durable(ticket, false),
            None => Ok(()),
        }
    }

    /// Queues the `after` record of write `write_id`, on these key blocks,
    /// without waiting: in sync mode, returns the ticket that says when it
    /// is durable (the write completes then); `None` in the other modes.
    pub fn queue_after(
        &self,
        write_id: u64,
        blocks: impl IntoIterator<Item = u64>,
    ) -> Result<Option<u64>, JournalWriteError> {
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
                Ok(None)
            }
            JournalMode::Async => {
                state.queued.push(Rec::After(write_id));
                state.queued_bytes += record_bytes(0);
                self.maybe_write_async(state).map(|()| None)
            }
            JournalMode::Sync => {
                state.queued.push(Rec::After(write_id));
                state.queued_bytes += record_bytes(0);
                state.target_flush_due = true;
                Ok(Some(state.open_commit))
            }
        }
    }

    /// Counts a writer's wait for a record to become durable, when the
    /// caller waited itself (the engine in virtual time: `waited` is
    /// modeled time).
    pub fn count_wait(&self, waited: std::time::Duration) {
        let mut state = self.lock();
        state.stats.waits += 1;
        state.stats.wait_us += waited.as_micros() as u64;
    }

    /// Makes everything queued durable, the target first (at the end of a
    /// run).
    /// Then, when records were written since the last mark, a closing
    /// mark says they all are durable (so replay calls damage to any of
    /// them damage, not a torn tail), made durable too.
    pub fn finish(&self) -> Result<(), JournalWriteError> {
        let ticket = self.lock().open_commit;
        self.durable(ticket, true)?;
        let unmarked = {
            let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
            tail.durable_end > tail.marked
        };
        if !unmarked {
            return Ok(());
        }
        let ticket = self.lock().open_commit;
        self.durable(ticket, false)
    }
}
