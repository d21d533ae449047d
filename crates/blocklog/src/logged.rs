//! The logged device: three modes behind the `Device` interface, and in
//! `log` mode the open transaction, group commit and checkpoints.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use device::{Backend, Checked, Device, DeviceError, Front, Geometry, Op, Result};

use crate::core::{
    encode_commit_into, extents_of, join, new_log_id, txn_bytes_bound, txn_bytes_bound_of, write_aligned,
    write_circular, write_new_log, write_slot, CommitPlace, Sector, SectorMap,
};
use crate::format::{Header, AREA_START, FLAG_SEPARATE, MAX_SECTOR_BYTES, MIN_AREA_BYTES, SLOT_BYTES};
use crate::read;
use crate::record::Extent;
use crate::replay::{self, ReplayReport};
use crate::LogError;

/// How writes reach stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each write is made durable in place before it returns.
    Sync,
    /// Writes go in place; a flush makes them durable. No atomicity.
    Async,
    /// Writes join a transaction committed through the log at a flush.
    Log,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Sync => "sync",
            Mode::Async => "async",
            Mode::Log => "log",
        })
    }
}

/// When a commit's blocks are written in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HomeWrites {
    /// Kept in memory and written home at the next checkpoint, when the log
    /// fills or the device is closed (WAPBL's delayed metadata writes):
    /// blocks rewritten between checkpoints go home once.
    AtCheckpoint,
    /// Written home right after each commit; with the log inside the data
    /// device the next commit's flush makes them durable, so the tail
    /// follows two commits behind and checkpoints are never needed.
    AfterCommit,
}

/// Where a new log goes.
#[derive(Clone)]
pub enum Placement {
    /// The first `log_bytes` of the data device; the data follows.
    Inside { log_bytes: u64 },
    /// A device of its own (all of it); the data device is all data.
    Separate { log: Arc<dyn Device> },
}

/// The log's counters.
#[derive(Debug, Default)]
struct Counters {
    transactions: AtomicU64,
    commits: AtomicU64,
    forced_commits: AtomicU64,
    sectors_logged: AtomicU64,
    log_bytes_written: AtomicU64,
    checkpoints: AtomicU64,
    revocations: AtomicU64,
}

/// A copy of the log's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Operations that joined a transaction (each write or atomic group).
    pub transactions: u64,
    pub commits: u64,
    /// Commits forced because the open transaction reached half the log.
    pub forced_commits: u64,
    pub sectors_logged: u64,
    /// Bytes written to the log: records and commit headers.
    pub log_bytes_written: u64,
    pub checkpoints: u64,
    pub revocations: u64,
    /// 1 when opening replayed committed records.
    pub replays: u64,
    pub sectors_replayed: u64,
}

#[derive(Default)]
struct Txn {
    sectors: SectorMap,
    /// Sectors of `sectors` that are not all zero: only they carry data
    /// into the log, so they, not all the sectors, bound its size.
    nonzero: u64,
    revokes: Vec<Extent>,
}

impl Txn {
    fn join(&mut self, buf: &[u8], offset: u64, sector_bytes: u32) {
        let change = join(&mut self.sectors, buf, offset, sector_bytes);
        self.nonzero = self.nonzero.saturating_add_signed(change);
    }

    /// Drops the sectors of `range`; whether there were any.
    fn remove_range(&mut self, range: std::ops::Range<u64>) -> bool {
        let keys: Vec<(u64, bool)> = self.sectors.range(range).map(|(s, e)| (*s, e.zero)).collect();
        for (s, zero) in &keys {
            self.sectors.remove(s);
            self.nonzero -= u64::from(!zero);
        }
        !keys.is_empty()
    }
}

/// A transaction closed to new writes and waiting for its commit
/// ([`LoggedDevice::seal`]); reads see it until it is pending home.
struct Sealed {
    id: u64,
    sectors: Arc<SectorMap>,
    revokes: Vec<Extent>,
    /// Unlogged writes came before it: the data needs a flush first.
    unlogged: bool,
}

struct State {
    open: Txn,
    /// Transactions sealed and not yet committed, oldest first.
    sealed: std::collections::VecDeque<Sealed>,
    /// Committed sectors not yet written home (home writes at checkpoints):
    /// the latest committed copy of each. Each has a live record, but a
    /// zeros record names many sectors in a few bytes, so a checkpoint also
    /// comes when these pass `LoggedDevice::pending_max_sectors`.
    pending_home: SectorMap,
    /// The pending sectors a checkpoint is writing home.
    checkpointing: Option<Arc<SectorMap>>,
    /// The open transaction's number; `durable` is the last one committed.
    open_id: u64,
    durable_id: u64,
    /// Unlogged writes since the last commit (they need a data flush).
    unlogged_dirty: bool,
    /// The pieces of `TOUCHED_BYTES` of the data device a logged write
    /// covered since the device was opened: only those can have a copy in
    /// the maps above, so a read or an unlogged write of any other looks
    /// into none of them (a file system reads thousands of blocks it never
    /// logs, and writes its file data unlogged). Never pruned: at most a
    /// number per metadata block written.
    touched: FxHashSet<u64>,
}

/// The least memory committed sectors may hold while they wait for a
/// checkpoint (a log larger than this holds up to its own size).
pub const PENDING_HOME_BYTES: u64 = 128 << 20;

/// The unit `State::touched` counts in: a file system block.
const TOUCHED_BYTES: u64 = 4096;

/// The pieces of `TOUCHED_BYTES` that bytes `offset..offset + len` lie in.
fn pieces(offset: u64, len: usize) -> std::ops::RangeInclusive<u64> {
    offset / TOUCHED_BYTES..=(offset + (len.max(1) as u64) - 1) / TOUCHED_BYTES
}

/// What the committer owns: the current header.
struct Committer {
    /// The last header written (and flushed).
    header: Header,
    /// Where the next record goes: every record before it is durable.
    end: u64,
    /// Commits durable so far.
    commits: u64,
    /// The end of the last commit whose blocks were all written home (not
    /// necessarily durable yet).
    home_head: u64,
    /// The end of the commits whose home writes a completed flush of the
    /// data device covers: their records may be freed.
    home_durable: u64,
    /// The records of the last commit: one buffer for every commit, its
    /// pages kept (a commit of a removal's metadata is megabytes).
    records: Vec<u8>,
}

/// A device whose writes are sync, async or logged (see the crate docs).
pub struct LoggedDevice {
    /// Name, geometry, counters and the poison latch. Beyond the front's
    /// rule (a failed flush), the log poisons it when a commit or a
    /// checkpoint fails wherever it runs: a forced commit inside a write, a
    /// checkpoint, a change of home-write policy.
    front: Front,
    mode: Mode,
    data: Arc<dyn Device>,
    log: Arc<dyn Device>,
    separate: bool,
    data_offset: u64,
    sector_bytes: u32,
    /// A transaction is committed before its records would pass this.
    max_txn_bytes: u64,
    /// A commit that leaves more sectors than this pending home is
    /// followed by a checkpoint: the memory they hold is bounded by
    /// [`PENDING_HOME_BYTES`] or the log's size, the larger.
    pending_max_sectors: u64,
    state: Mutex<State>,
    committer: Mutex<Committer>,
    counters: Counters,
    replay: ReplayReport,
    /// Free records as soon as a flush made their blocks durable at home
    /// (default); when false, only a checkpoint frees them, as in WAPBL.
    home_writes: Mutex<HomeWrites>,
}

impl LoggedDevice {
    /// Writes a new, empty log and opens the device on it. Whatever the
    /// log region held is lost; the data area is left as it is.
    pub fn format(data: Arc<dyn Device>, placement: Placement, mode: Mode) -> Result<LoggedDevice, LogError> {
        LoggedDevice::format_in_units(data, placement, mode, 0)
    }

    /// [`LoggedDevice::format`] with the log's sector (the unit it maps,
    /// logs and checks for zeros) at least `unit` bytes, a power of two:
    /// a file system that writes whole blocks keeps one entry per block
    /// rather than one per device sector. Its writes must then be whole
    /// units.
    pub fn format_in_units(
        data: Arc<dyn Device>,
        placement: Placement,
        mode: Mode,
        unit: u32,
    ) -> Result<LoggedDevice, LogError> {
        let (mut header, log, separate) = LoggedDevice::plan(&data, placement)?;
        if unit > header.sector_bytes {
            if !unit.is_power_of_two() || unit > MAX_SECTOR_BYTES || header.data_offset % u64::from(unit) != 0
            {
                return Err(LogError::Layout {
                    device: data.name().to_string(),
                    problem: format!(
                        "a log in units of {unit} bytes needs a power of two of at most {MAX_SECTOR_BYTES} \
                         that aligns its data"
                    ),
                });
            }
            header.sector_bytes = unit;
            header.data_bytes = header.data_bytes / u64::from(unit) * u64::from(unit);
        }
        write_new_log(log.as_ref(), &header)?;
        Ok(LoggedDevice::assemble(data, log, separate, header, mode, ReplayReport::default()))
    }

    /// The header [`LoggedDevice::format`] would write, checked, and the
    /// device the log would live on; writes nothing. A caller checks a job
    /// against `header.data_bytes` before anything is formatted.
    pub fn plan(
        data: &Arc<dyn Device>,
        placement: Placement,
    ) -> Result<(Header, Arc<dyn Device>, bool), LogError> {
        let (log, separate, log_bytes) = match placement {
            Placement::Inside { log_bytes } => (Arc::clone(data), false, log_bytes),
            Placement::Separate { log } => {
                let bytes = log.size_bytes();
                (log, true, bytes)
            }
        };
        let sector = data.sector_bytes().max(log.sector_bytes());
        let log_bytes = log_bytes / 4096 * 4096;
        if log_bytes < AREA_START + MIN_AREA_BYTES {
            return Err(LogError::Layout {
                device: log.name().to_string(),
                problem: format!(
                    "a log of {log_bytes} bytes is too small; it needs at least {} bytes",
                    AREA_START + MIN_AREA_BYTES
                ),
            });
        }
        let data_offset = if separate { 0 } else { log_bytes };
        let data_bytes =
            data.size_bytes().saturating_sub(data_offset) / u64::from(sector) * u64::from(sector);
        if data_bytes == 0 || log_bytes > log.size_bytes() {
            return Err(LogError::Layout {
                device: data.name().to_string(),
                problem: format!(
                    "{} bytes cannot hold a log of {log_bytes} bytes and data; give a larger target or a smaller --log-size",
                    data.size_bytes()
                ),
            });
        }
        let header = Header {
            sector_bytes: sector,
            flags: if separate { FLAG_SEPARATE } else { 0 },
            generation: 0,
            log_id: new_log_id(),
            log_bytes,
            data_offset,
            data_bytes,
            tail: 0,
            head: 0,
            commits: 0,
            stop: None,
        };
        Ok((header, log, separate))
    }

    /// Opens a device whose log was formatted earlier, replaying every
    /// committed record first. `log` is the separate log device, if any.
    /// A log whose replay stops at damage, now or at an earlier open, is
    /// refused ([`LogError::Stopped`]) until it is repaired.
    pub fn open(
        data: Arc<dyn Device>,
        log: Option<Arc<dyn Device>>,
        mode: Mode,
    ) -> Result<LoggedDevice, LogError> {
        let separate = log.is_some();
        let log = log.unwrap_or_else(|| Arc::clone(&data));
        let Some(header) = read::newest_header(log.as_ref())? else {
            return Err(LogError::NoLog { device: log.name().to_string() });
        };
        LoggedDevice::check(&header, data.as_ref(), log.as_ref(), separate)?;
        let (header, report) = replay::recover(log.as_ref(), &[home(data.as_ref(), &header)], header)?;
        Ok(LoggedDevice::assemble(data, log, separate, header, mode, report))
    }

    /// The newest valid log header on `log`, if it holds one.
    pub fn probe(log: &dyn Device) -> Result<Option<Header>, LogError> {
        read::newest_header(log)
    }

    /// Whether the log `header` describes fits `data` (and `log`, on a
    /// separate device, when `separate`): its placement, its sizes and its
    /// sector. Reads and writes nothing; [`LoggedDevice::open`] checks it
    /// first, and a caller can before anything else is written.
    pub fn check(
        header: &Header,
        data: &dyn Device,
        log: &dyn Device,
        separate: bool,
    ) -> Result<(), LogError> {
        check_layout(header, data, log, separate)
    }

    fn assemble(
        data: Arc<dyn Device>,
        log: Arc<dyn Device>,
        separate: bool,
        header: Header,
        mode: Mode,
        replay: ReplayReport,
    ) -> LoggedDevice {
        let state = State {
            open: Txn::default(),
            sealed: Default::default(),
            pending_home: SectorMap::new(),
            checkpointing: None,
            open_id: 1,
            durable_id: 0,
            unlogged_dirty: false,
            touched: FxHashSet::default(),
        };
        let geometry = Geometry {
            size_bytes: header.data_bytes,
            sector_bytes: header.sector_bytes,
            buffer_align: data.buffer_align(),
        };
        LoggedDevice {
            front: Front::new(format!("{mode}-logged({})", data.name()), geometry),
            mode,
            separate,
            data_offset: header.data_offset,
            sector_bytes: header.sector_bytes,
            max_txn_bytes: header.area_bytes() / 2,
            pending_max_sectors: header.log_bytes.max(PENDING_HOME_BYTES) / u64::from(header.sector_bytes),
            data,
            log,
            state: Mutex::new(state),
            committer: Mutex::new(Committer {
                header,
                end: header.head,
                commits: header.commits,
                home_head: header.head,
                home_durable: header.tail,
                records: Vec::new(),
            }),
            counters: Counters::default(),
            replay,
            home_writes: Mutex::new(HomeWrites::AtCheckpoint),
        }
    }

    /// When committed blocks are written home (see [`HomeWrites`]). Blocks
    /// still waiting for a checkpoint are written home first, so that no
    /// header frees their records early under the new policy.
    pub fn set_home_writes(&self, policy: HomeWrites) -> Result<()> {
        let mut committer = self.lock_committer();
        // Leaves the log empty (a no-op when it is): under `AtCheckpoint`
        // every live record's sectors are then pending home, which is what
        // lets an unlogged write skip revoking what no record holds.
        let result = self.checkpoint_locked(&mut committer);
        self.stats().track(self.poison_on_error(result))?;
        *self.home_writes.lock().unwrap_or_else(|e| e.into_inner()) = policy;
        Ok(())
    }

    fn home_writes(&self) -> HomeWrites {
        *self.home_writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What opening replayed.
    pub fn replay_report(&self) -> &ReplayReport {
        &self.replay
    }

    /// The current commit header (for reports).
    pub fn header(&self) -> Header {
        self.lock_committer().header
    }

    pub fn log_stats(&self) -> LogStats {
        let c = &self.counters;
        LogStats {
            transactions: c.transactions.load(Relaxed),
            commits: c.commits.load(Relaxed),
            forced_commits: c.forced_commits.load(Relaxed),
            sectors_logged: c.sectors_logged.load(Relaxed),
            log_bytes_written: c.log_bytes_written.load(Relaxed),
            checkpoints: c.checkpoints.load(Relaxed),
            revocations: c.revocations.load(Relaxed),
            replays: u64::from(self.replay.commits > 0 || self.replay.records > 0),
            sectors_replayed: self.replay.sectors_written_home,
        }
    }

    /// Writes in place without logging ([`Device::write_unlogged`]: file
    /// data in a file system whose log holds metadata only, a layout's
    /// fill). Earlier logged copies of these sectors are revoked in the
    /// next commit so replay cannot bring them back.
    fn write_unlogged_logged(&self, buf: &[u8], offset: u64) -> Result<()> {
        let sector = u64::from(self.sector_bytes);
        let range = offset / sector..(offset + buf.len() as u64) / sector;
        let mut state = self.lock_state();
        self.front.check_poison(Op::Write)?;
        // A commit or a checkpoint in progress could write an older logged
        // copy of these sectors home over this write, and a sealed
        // transaction would make one pending home: such a write waits for
        // them, commits what is sealed, and goes on holding the committer.
        // Any other goes on while a commit is being written.
        let touched = pieces(offset, buf.len()).any(|p| state.touched.contains(&p));
        let _committer = if touched && self.held_elsewhere(&state, range.clone()) {
            drop(state);
            let mut committer = self.lock_committer();
            let result = self.commit_sealed_locked(&mut committer);
            self.poison_on_error(result)?;
            state = self.lock_state();
            self.front.check_poison(Op::Write)?;
            Some(committer)
        } else {
            None
        };
        {
            let state = &mut *state;
            // A checkpoint must not write an older logged copy over it either.
            let removed = touched
                && (state.open.remove_range(range.clone())
                    | remove_range(&mut state.pending_home, range.clone()));
            // Between checkpoints, every sector a live record holds is open or
            // pending home (`set_home_writes` keeps it so): a range that is
            // neither has nothing in the log to revoke. File data, which is
            // never logged, then adds nothing to the commit.
            if removed || self.home_writes() == HomeWrites::AfterCommit {
                let extent =
                    Extent { sector: range.start, sectors: (range.end - range.start) as u32, device: 0 };
                state.open.revokes.push(extent);
                self.counters.revocations.fetch_add(1, Relaxed);
            }
            state.unlogged_dirty = true;
        }
        drop(state);
        self.data.write_at(buf, self.data_offset + offset)
    }

    /// Whether a sealed transaction or a checkpoint in progress holds a
    /// sector of `range`.
    fn held_elsewhere(&self, state: &State, range: std::ops::Range<u64>) -> bool {
        let hit = |map: &SectorMap| map.range(range.clone()).next().is_some();
        state.sealed.iter().any(|t| hit(&t.sectors)) || state.checkpointing.as_deref().is_some_and(hit)
    }

    /// Writes every committed block home, flushes, and empties the log.
    pub fn checkpoint(&self) -> Result<()> {
        if self.mode != Mode::Log {
            return self.flush();
        }
        self.flush()?;
        let mut committer = self.lock_committer();
        let result = self.checkpoint_locked(&mut committer);
        self.stats().track(self.poison_on_error(result))
    }

    fn write_in_place(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.data.write_at(buf, self.data_offset + offset)?;
        if self.mode == Mode::Sync {
            self.data.flush()?;
        }
        self.counters.transactions.fetch_add(1, Relaxed);
        Ok(())
    }

    /// An upper bound on the log bytes a transaction of `sectors` logged
    /// sectors and `revokes` revocations takes (headers included).
    fn txn_bytes_bound(&self, sectors: u64, revokes: u64) -> u64 {
        txn_bytes_bound(sectors, revokes, self.sector_bytes)
    }

    fn too_large(&self, sectors: u64) -> DeviceError {
        DeviceError::Invalid(format!(
            "{}: a transaction of {} bytes does not fit in half the log ({} bytes); use a larger log (--log-size)",
            self.name(),
            sectors * u64::from(self.sector_bytes),
            self.max_txn_bytes
        ))
    }

    /// Commits the open transaction now (the group-commit leader's work).
    fn commit(&self) -> Result<()> {
        let mut committer = self.lock_committer();
        let result = self.commit_locked(&mut committer);
        self.poison_on_error(result)
    }

    /// Seals the open transaction and commits every sealed one.
    fn commit_locked(&self, committer: &mut Committer) -> Result<()> {
        self.seal_locked(&mut self.lock_state())?;
        self.commit_sealed_locked(committer)
    }

    /// Closes the open transaction to new writes, which go to the next
    /// one from now on, without writing anything: a file system seals
    /// under its own lock, at a point where no operation is half done, and
    /// commits ([`LoggedDevice::commit_sealed`]) after releasing it, so
    /// its callers go on while the log is written and flushed (as a
    /// journal's commit thread lets them).
    ///
    /// Returns the sealed transaction's number, which
    /// [`LoggedDevice::durable_id`] reaches once it is committed (the last
    /// number sealed when there was nothing to seal).
    pub fn seal(&self) -> Result<u64> {
        if self.mode != Mode::Log {
            return Ok(0);
        }
        self.seal_locked(&mut self.lock_state())
    }

    fn seal_locked(&self, state: &mut State) -> Result<u64> {
        self.front.check_poison(Op::Flush)?;
        let txn = std::mem::take(&mut state.open);
        let unlogged = std::mem::take(&mut state.unlogged_dirty);
        if txn.sectors.is_empty() && txn.revokes.is_empty() && !unlogged {
            return Ok(state.open_id - 1);
        }
        let id = state.open_id;
        state.open_id += 1;
        state.sealed.push_back(Sealed { id, sectors: Arc::new(txn.sectors), revokes: txn.revokes, unlogged });
        Ok(id)
    }

    /// The number of the last transaction durable (see
    /// [`LoggedDevice::seal`]).
    pub fn durable_id(&self) -> u64 {
        self.lock_state().durable_id
    }

    /// A bound on the log bytes the open transaction would take if it
    /// were committed now: sectors that are all zero count as no data. A
    /// write joins it without a forced commit while this, with the write,
    /// stays within [`LoggedDevice::max_txn_bytes`].
    pub fn open_bytes(&self) -> u64 {
        let state = self.lock_state();
        let open = &state.open;
        txn_bytes_bound_of(
            open.sectors.len() as u64,
            open.nonzero,
            open.revokes.len() as u64,
            self.sector_bytes,
        )
    }

    /// What one transaction's records may take: half the log's area.
    pub fn max_txn_bytes(&self) -> u64 {
        self.max_txn_bytes
    }

    /// The number of the last transaction sealed (see
    /// [`LoggedDevice::seal`]).
    pub fn sealed_id(&self) -> u64 {
        self.lock_state().open_id - 1
    }

    /// Transactions sealed and not yet committed.
    pub fn sealed_waiting(&self) -> usize {
        self.lock_state().sealed.len()
    }

    /// Commits every sealed transaction, oldest first: durable when this
    /// returns. A failure poisons the device.
    pub fn commit_sealed(&self) -> Result<()> {
        if self.mode != Mode::Log {
            return self.flush();
        }
        let mut committer = self.lock_committer();
        let result = self.commit_sealed_locked(&mut committer);
        self.stats().track(self.poison_on_error(result))
    }

    fn commit_sealed_locked(&self, committer: &mut Committer) -> Result<()> {
        loop {
            let next = {
                let state = self.lock_state();
                state.sealed.front().map(|t| (t.id, Arc::clone(&t.sectors), t.revokes.clone(), t.unlogged))
            };
            let Some((id, sectors, revokes, unlogged)) = next else { return Ok(()) };
            if !sectors.is_empty() || !revokes.is_empty() {
                self.write_commit(committer, &sectors, &revokes, unlogged)?;
                if self.home_writes() == HomeWrites::AfterCommit {
                    self.write_home(&sectors)?;
                    committer.home_head = committer.end;
                }
            } else if unlogged {
                self.data.flush()?;
            }
            // Reads find the blocks pending home the moment they leave the
            // sealed queue: both under one lock.
            let mut state = self.lock_state();
            if self.home_writes() == HomeWrites::AtCheckpoint {
                state.pending_home.extend(sectors.iter().map(|(s, e)| (*s, e.clone())));
            }
            state.sealed.pop_front();
            state.durable_id = state.durable_id.max(id);
            let over = state.pending_home.len() as u64 > self.pending_max_sectors;
            drop(state);
            if over {
                self.checkpoint_locked(committer)?;
            }
        }
    }

    /// Records and the next header, then one flush: the commit is durable
    /// when this returns. The header names the commits durable before this
    /// one; this commit's own records are found by replay past the head
    /// (their checksums, log id and LSNs say they are whole and current).
    fn write_commit(
        &self,
        committer: &mut Committer,
        sectors: &SectorMap,
        revokes: &[Extent],
        unlogged: bool,
    ) -> Result<()> {
        let commit = committer.commits + 1;
        let area = committer.header.area_bytes();
        let mut records = std::mem::take(&mut committer.records);
        let place = CommitPlace {
            log_id: committer.header.log_id,
            head: committer.end,
            commit,
            area_bytes: area,
            sector_bytes: self.sector_bytes,
        };
        encode_commit_into(&mut records, &place, &[(0, sectors)], revokes);
        let bytes = records.len() as u64;
        if bytes > area {
            return Err(self.too_large(sectors.len() as u64));
        }
        // A crash may leave the last header written as the newest: its tail
        // bounds what these records may overwrite.
        if committer.end + bytes - committer.header.tail > area {
            self.checkpoint_locked(committer)?;
        }
        if unlogged {
            // Unlogged writes (file data the commit's metadata may name,
            // writes it revokes) must be durable before it: ordered data.
            // With the log inside the data device one flush after the
            // header would cover both, and a crash could keep the header
            // without the data. The flush makes the home writes done so
            // far durable too.
            let done = committer.home_head;
            self.data.flush()?;
            committer.home_durable = done;
        }
        let mut next = committer.header;
        next.generation += 1;
        next.head = committer.end;
        next.commits = committer.commits;
        if self.home_writes() == HomeWrites::AfterCommit {
            // Records whose blocks are durable at home are free: with the
            // log inside the data device the previous commit's flush made
            // the commit before it durable at home, so the tail follows
            // two commits behind and no checkpoint is needed.
            next.tail = next.tail.max(committer.home_durable);
        }
        debug_assert!(next.tail <= next.head && next.head <= committer.end);
        write_circular(self.log.as_ref(), &next, committer.end, &records)?;
        committer.records = records;
        write_slot(self.log.as_ref(), next.slot(), &next.encode())?;
        let done = committer.home_head;
        self.log.flush()?;
        committer.header = next;
        committer.end += bytes;
        committer.commits = commit;
        if !self.separate {
            committer.home_durable = done;
        }
        self.counters.commits.fetch_add(1, Relaxed);
        self.counters.sectors_logged.fetch_add(sectors.len() as u64, Relaxed);
        self.counters.log_bytes_written.fetch_add(bytes + SLOT_BYTES, Relaxed);
        Ok(())
    }

    /// Writes a committed transaction's sectors in place (not flushed: the
    /// next checkpoint flushes them before the tail passes their records).
    fn write_home(&self, sectors: &SectorMap) -> Result<()> {
        let sector = self.sector_bytes as usize;
        for extent in extents_of(0, sectors.keys().copied()) {
            let mut buf = Vec::with_capacity(extent.sectors as usize * sector);
            for s in extent.sector..extent.sector + u64::from(extent.sectors) {
                buf.extend_from_slice(sectors[&s].bytes(sector));
            }
            write_aligned(self.data.as_ref(), &buf, self.data_offset + extent.sector * sector as u64)?;
        }
        Ok(())
    }

    /// Flushes home writes, then writes a header freeing every record.
    fn checkpoint_locked(&self, committer: &mut Committer) -> Result<()> {
        if committer.header.tail == committer.end {
            return Ok(());
        }
        // The blocks must be durable at home before a header frees their
        // records: two flushes, never one.
        let pending = {
            let mut state = self.lock_state();
            let pending = Arc::new(std::mem::take(&mut state.pending_home));
            state.checkpointing = Some(Arc::clone(&pending));
            pending
        };
        self.write_home(&pending)?;
        self.data.flush()?;
        let mut next = committer.header;
        next.generation += 1;
        next.tail = committer.end;
        next.head = committer.end;
        next.commits = committer.commits;
        write_slot(self.log.as_ref(), next.slot(), &next.encode())?;
        self.log.flush()?;
        committer.header = next;
        committer.home_head = committer.end;
        committer.home_durable = committer.end;
        self.lock_state().checkpointing = None;
        self.counters.checkpoints.fetch_add(1, Relaxed);
        self.counters.log_bytes_written.fetch_add(SLOT_BYTES, Relaxed);
        Ok(())
    }

    /// A failed commit or checkpoint poisons the device: the log's state
    /// on disk is unknown. The front counts the error where the failure is
    /// a request's; other callers count it themselves.
    fn poison_on_error(&self, result: Result<()>) -> Result<()> {
        if let Err(e) = &result {
            // A refusal is no new cause: the front's own names the first
            // one, and a poisoned device below refuses every retry anyway.
            if !matches!(e, DeviceError::Poisoned { .. }) {
                self.front.poison(e);
            }
            self.lock_state().sealed.clear();
        }
        result
    }

    /// Reads in log mode: home contents overlaid with the committed
    /// sectors not yet home, then those of the transaction being
    /// committed, then those of the open one.
    fn read_logged(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let sector = u64::from(self.sector_bytes);
        let first = offset / sector;
        let last = first + buf.len() as u64 / sector;
        let overlay: Vec<(u64, Sector)> = {
            let state = self.lock_state();
            if !pieces(offset, buf.len()).any(|p| state.touched.contains(&p)) {
                drop(state);
                return self.data.read_at(buf, self.data_offset + offset);
            }
            let mut found: BTreeMap<u64, Sector> = BTreeMap::new();
            if let Some(checkpointing) = &state.checkpointing {
                found.extend(checkpointing.range(first..last).map(|(s, e)| (*s, e.clone())));
            }
            found.extend(state.pending_home.range(first..last).map(|(s, e)| (*s, e.clone())));
            for sealed in &state.sealed {
                found.extend(sealed.sectors.range(first..last).map(|(s, e)| (*s, e.clone())));
            }
            found.extend(state.open.sectors.range(first..last).map(|(s, e)| (*s, e.clone())));
            found.into_iter().collect()
        };
        if overlay.len() as u64 != last - first {
            self.data.read_at(buf, self.data_offset + offset)?;
        }
        let sector = sector as usize;
        for (s, entry) in overlay {
            let to = (s - first) as usize * sector;
            let at = entry.index as usize * sector;
            buf[to..to + sector].copy_from_slice(&entry.data[at..at + sector]);
        }
        Ok(())
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave State half-updated: every update
        // is a single assignment or a take.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_committer(&self) -> MutexGuard<'_, Committer> {
        self.committer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Backend for LoggedDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        match self.mode {
            Mode::Log => self.read_logged(buf, offset),
            Mode::Sync | Mode::Async => self.data.read_at(buf, self.data_offset + offset),
        }
    }

    fn write_raw(&self, buf: &[u8], offset: u64, checked: Checked) -> Result<()> {
        self.write_atomic_raw(&[(offset, buf)], checked)
    }

    /// In `log` mode, the largest write that fits a transaction (half the
    /// log, headers included); no limit in the other modes.
    fn max_request_bytes_raw(&self) -> u64 {
        if self.mode != Mode::Log {
            return u64::MAX;
        }
        let (mut lo, mut hi) = (0u64, self.max_txn_bytes / u64::from(self.sector_bytes));
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.txn_bytes_bound(mid, 0) <= self.max_txn_bytes {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo * u64::from(self.sector_bytes)
    }

    /// Writes every `(offset, data)` pair as one transaction: after a crash
    /// either all of them are present or none (in `log` mode; the other
    /// modes write them one by one, which is what they are compared for).
    fn write_atomic_raw(&self, writes: &[(u64, &[u8])], _: Checked) -> Result<()> {
        if self.mode != Mode::Log {
            for (offset, buf) in writes {
                self.write_in_place(buf, *offset)?;
            }
            return Ok(());
        }
        let sectors: u64 = writes.iter().map(|(_, b)| b.len() as u64 / u64::from(self.sector_bytes)).sum();
        if self.txn_bytes_bound(sectors, 0) > self.max_txn_bytes {
            return Err(self.too_large(sectors));
        }
        // Poisoning is checked again under the state lock: a commit that
        // failed after the front let this write in must keep it out of the
        // open transaction.
        let mut state = self.lock_state();
        self.front.check_poison(Op::Write)?;
        // The write's own sectors are counted as data, whatever they hold.
        let open = &state.open;
        let bound = txn_bytes_bound_of(
            open.sectors.len() as u64 + sectors,
            open.nonzero + sectors,
            open.revokes.len() as u64,
            self.sector_bytes,
        );
        if bound > self.max_txn_bytes {
            drop(state);
            self.counters.forced_commits.fetch_add(1, Relaxed);
            self.commit()?;
            state = self.lock_state();
            self.front.check_poison(Op::Write)?;
        }
        for (offset, buf) in writes {
            state.open.join(buf, *offset, self.sector_bytes);
            state.touched.extend(pieces(*offset, buf.len()));
        }
        drop(state);
        self.counters.transactions.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Layout data and file data go in place, outside the log: a layout
    /// of gigabytes through transactions of half the log would write it
    /// all twice, and no record covers a block never written.
    fn write_unlogged_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        match self.mode {
            Mode::Log => self.write_unlogged_logged(buf, offset),
            Mode::Sync | Mode::Async => self.write_in_place(buf, offset),
        }
    }

    /// Sync and async: the data device's flush. Log: commits the open
    /// transaction, unless another caller's commit already covered every
    /// write that completed before this call (group commit).
    fn flush_raw(&self, _: Checked) -> Result<()> {
        if self.mode != Mode::Log {
            return self.data.flush();
        }
        let target = self.lock_state().open_id;
        let mut committer = self.lock_committer();
        if self.lock_state().durable_id < target {
            let result = self.commit_locked(&mut committer);
            self.poison_on_error(result)?;
        }
        Ok(())
    }

    /// The data area's holes, less every sector the log holds a newer copy
    /// of (written, though not yet home).
    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        let Some(holes) = self.data.unwritten(self.data_offset + start, self.data_offset + end)? else {
            return Ok(None);
        };
        let sector = u64::from(self.sector_bytes);
        let logged: std::collections::BTreeSet<u64> = {
            let state = self.lock_state();
            let (first, last) = (start / sector, end.div_ceil(sector));
            let maps = [state.checkpointing.as_deref(), Some(&state.pending_home)];
            maps.into_iter()
                .flatten()
                .chain(state.sealed.iter().map(|t| t.sectors.as_ref()))
                .chain([&state.open.sectors])
                .flat_map(|m| m.range(first..last).map(|(s, _)| *s))
                .collect()
        };
        let mut out = Vec::with_capacity(holes.len());
        for hole in holes {
            let (mut from, to) = (hole.start - self.data_offset, hole.end - self.data_offset);
            for s in logged.range(from / sector..to.div_ceil(sector)) {
                if s * sector > from {
                    out.push(from..s * sector);
                }
                from = (s + 1) * sector;
            }
            if from < to {
                out.push(from..to);
            }
        }
        Ok(Some(out))
    }

    fn media_raw(&self) -> Vec<device::Medium> {
        let mut media = self.data.media();
        if self.separate {
            media.extend(self.log.media());
        }
        media
    }

    fn drop_cache_raw(&self) -> Result<()> {
        self.data.drop_cache()?;
        if self.separate {
            self.log.drop_cache()?;
        }
        Ok(())
    }
}

/// Removes the entries of `map` in `range`; whether there were any.
fn remove_range(map: &mut SectorMap, range: std::ops::Range<u64>) -> bool {
    let keys: Vec<u64> = map.range(range).map(|(s, _)| *s).collect();
    for s in &keys {
        map.remove(s);
    }
    !keys.is_empty()
}

fn home<'a>(data: &'a dyn Device, header: &Header) -> replay::Home<'a> {
    replay::Home { dev: data, offset: header.data_offset, bytes: header.data_bytes, in_service: true }
}

fn check_layout(
    header: &Header,
    data: &dyn Device,
    log: &dyn Device,
    separate: bool,
) -> Result<(), LogError> {
    let bad = |problem: String| Err(LogError::Layout { device: data.name().to_string(), problem });
    if header.flags & crate::format::FLAG_STRIPE != 0 {
        return bad("this is a RAID-5 stripe log, not a device's block log".to_string());
    }
    if (header.flags & FLAG_SEPARATE != 0) != separate {
        return bad(if separate {
            "this log was made inside its data device, not on a separate one".to_string()
        } else {
            "this log lives on a separate device; name it (--log-device)".to_string()
        });
    }
    if header.log_bytes > log.size_bytes() {
        return bad(format!(
            "the log says it is {} bytes but its device has {}",
            header.log_bytes,
            log.size_bytes()
        ));
    }
    // Both below 2^62 (the header's bounds): the sum does not overflow.
    if header.data_offset + header.data_bytes > data.size_bytes() {
        return bad(format!(
            "the log protects {} bytes at offset {} but the device has {}",
            header.data_bytes,
            header.data_offset,
            data.size_bytes()
        ));
    }
    if header.sector_bytes < data.sector_bytes() || header.sector_bytes % data.sector_bytes() != 0 {
        return bad(format!(
            "the log's {} B sectors do not suit the device's {} B",
            header.sector_bytes,
            data.sector_bytes()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use device::MemDevice;

    /// Zeros records name many sectors in a few bytes of log: the sectors
    /// waiting to go home are bounded by a checkpoint, not by the log.
    #[test]
    fn a_commit_leaving_too_many_sectors_pending_home_checkpoints() {
        let data: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
        let log: Arc<dyn Device> = Arc::new(MemDevice::new(AREA_START + MIN_AREA_BYTES).unwrap());
        let mut dev = LoggedDevice::format(data, Placement::Separate { log }, Mode::Log).unwrap();
        dev.pending_max_sectors = 16;
        dev.write_at(&[0u8; 4096], 0).unwrap();
        dev.flush().unwrap();
        assert_eq!((dev.log_stats().checkpoints, dev.lock_state().pending_home.len()), (0, 8));
        dev.write_at(&[0u8; 8192], 4096).unwrap();
        dev.flush().unwrap();
        assert_eq!((dev.log_stats().checkpoints, dev.lock_state().pending_home.len()), (1, 0));
    }

    /// A write that straddles two pieces touches both; one within a piece
    /// touches it alone.
    #[test]
    fn a_write_touches_every_piece_it_lies_in() {
        assert_eq!(pieces(4096 - 512, 1024), 0..=1);
        assert_eq!(pieces(4096, 4096), 1..=1);
        assert_eq!(pieces(8192 + 512, 512), 2..=2);
        assert_eq!(pieces(0, 0), 0..=0, "an empty write names its own piece, not one before it");
    }
}
