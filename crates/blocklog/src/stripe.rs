//! The stripe log: the same log format on a device of its own, with
//! records naming one of several home devices. A RAID-5 volume logs each
//! row update (new data and new parity) here before writing it in place,
//! so a crash between the data and the parity writes is repaired by
//! replay instead of leaving a row whose parity lies (the write hole).
//!
//! Unlike the logged device, the caller writes the homes itself; it tells
//! the log when a ticket's in-place writes are done, and only records of
//! done transactions are freed, after a flush of every home. Concurrent
//! row updates share a commit (group commit), and a commit is one flush:
//! records and the next header together, as in the logged device.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use device::{Device, DeviceError, Result, WriteAheadLog};

use crate::core::{
    encode_commit_into, join, new_log_id, txn_bytes_bound, write_circular, write_new_log, write_slot,
    CommitPlace, SectorMap,
};
use crate::format::{Header, AREA_START, FLAG_SEPARATE, FLAG_STRIPE, MAX_HOMES, MIN_AREA_BYTES, SLOT_BYTES};
use crate::read;
use crate::replay::{self, Home, ReplayReport};
use crate::LogError;

/// The stripe log's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StripeLogStats {
    pub commits: u64,
    pub sectors_logged: u64,
    pub log_bytes_written: u64,
    pub checkpoints: u64,
    pub sectors_replayed: u64,
}

/// A committed transaction whose records are still needed, and how many
/// of the writers it carried have not yet written in place.
struct Live {
    commit: u64,
    start: u64,
    writers: usize,
}

/// A row update waiting for the next commit (group commit).
struct Request {
    id: u64,
    groups: BTreeMap<u32, SectorMap>,
}

struct State {
    live: VecDeque<Live>,
    queue: Vec<Request>,
    next_request: u64,
    /// Requests committed, with their commit number (the ticket).
    committed: BTreeMap<u64, u64>,
    /// A writer is committing the queue.
    leading: bool,
    poisoned: Option<device::PoisonCause>,
}

/// What the committer owns.
struct Committer {
    /// The last header written.
    header: Header,
    /// Where the next record goes; every record before it is durable.
    end: u64,
    commits: u64,
}

/// A write-ahead log for several home devices (see the module docs).
pub struct StripeLog {
    name: String,
    log: Arc<dyn Device>,
    homes: Vec<Arc<dyn Device>>,
    /// Homes out of service when the log was opened.
    down: Vec<bool>,
    sector_bytes: u32,
    max_txn_bytes: u64,
    committer: Mutex<Committer>,
    state: Mutex<State>,
    /// Signalled when a commit ends, a writer finishes, or the log is poisoned.
    changed: Condvar,
    commits: AtomicU64,
    sectors_logged: AtomicU64,
    log_bytes_written: AtomicU64,
    checkpoints: AtomicU64,
    replay: ReplayReport,
}

impl StripeLog {
    /// Writes a new, empty stripe log on `log` (all of it) for `homes`.
    pub fn format(log: Arc<dyn Device>, homes: Vec<Arc<dyn Device>>) -> Result<StripeLog, LogError> {
        StripeLog::format_degraded(log, homes, &[])
    }

    /// As [`StripeLog::format`], homes `down` (indexes) out of service.
    pub fn format_degraded(
        log: Arc<dyn Device>,
        homes: Vec<Arc<dyn Device>>,
        down: &[usize],
    ) -> Result<StripeLog, LogError> {
        let log_bytes = log.size_bytes() / 4096 * 4096;
        if log_bytes < AREA_START + MIN_AREA_BYTES {
            return Err(LogError::Layout {
                device: log.name().to_string(),
                problem: format!(
                    "a log of {log_bytes} bytes is too small; it needs {}",
                    AREA_START + MIN_AREA_BYTES
                ),
            });
        }
        if homes.is_empty() || homes.len() as u64 > MAX_HOMES {
            return Err(LogError::Layout {
                device: log.name().to_string(),
                problem: format!("a stripe log serves 1 to {MAX_HOMES} devices, not {}", homes.len()),
            });
        }
        let sector = homes.iter().map(|h| h.sector_bytes()).chain([log.sector_bytes()]).max().unwrap_or(512);
        let header = Header {
            sector_bytes: sector,
            flags: FLAG_SEPARATE | FLAG_STRIPE,
            generation: 0,
            log_id: new_log_id(),
            log_bytes,
            data_offset: 0,
            data_bytes: homes.len() as u64,
            tail: 0,
            head: 0,
            commits: 0,
            stop: None,
        };
        write_new_log(log.as_ref(), &header)?;
        let down = out_of_service(homes.len(), down);
        Ok(StripeLog::assemble(log, homes, down, header, ReplayReport::default()))
    }

    /// Opens a stripe log and replays every committed transaction into
    /// `homes` (given in the order they had when it was formatted). A log
    /// whose replay stops at damage, now or at an earlier open, is refused
    /// ([`LogError::Stopped`]) until it is repaired.
    pub fn open(log: Arc<dyn Device>, homes: Vec<Arc<dyn Device>>) -> Result<StripeLog, LogError> {
        StripeLog::open_degraded(log, homes, &[])
    }

    /// As [`StripeLog::open`], homes `down` (indexes) out of service:
    /// replay writes the others only, and counts what it left
    /// ([`ReplayReport::sectors_skipped`]).
    pub fn open_degraded(
        log: Arc<dyn Device>,
        homes: Vec<Arc<dyn Device>>,
        down: &[usize],
    ) -> Result<StripeLog, LogError> {
        let Some(header) = read::newest_header(log.as_ref())? else {
            return Err(LogError::NoLog { device: log.name().to_string() });
        };
        if header.flags & FLAG_STRIPE == 0 || header.data_bytes != homes.len() as u64 {
            return Err(LogError::Layout {
                device: log.name().to_string(),
                problem: format!(
                    "not a stripe log for {} devices (it is {})",
                    homes.len(),
                    if header.flags & FLAG_STRIPE == 0 {
                        "a device's block log".to_string()
                    } else {
                        format!("for {} devices", header.data_bytes)
                    }
                ),
            });
        }
        let down = out_of_service(homes.len(), down);
        let targets: Vec<Home<'_>> = homes
            .iter()
            .zip(&down)
            .map(|(h, &out)| Home { dev: h.as_ref(), offset: 0, bytes: h.size_bytes(), in_service: !out })
            .collect();
        let (header, report) = replay::recover(log.as_ref(), &targets, header)?;
        Ok(StripeLog::assemble(log, homes, down, header, report))
    }

    fn assemble(
        log: Arc<dyn Device>,
        homes: Vec<Arc<dyn Device>>,
        down: Vec<bool>,
        header: Header,
        replay: ReplayReport,
    ) -> StripeLog {
        StripeLog {
            name: format!("stripe log on {}", log.name()),
            sector_bytes: header.sector_bytes,
            max_txn_bytes: header.area_bytes() / 2,
            log,
            homes,
            down,
            committer: Mutex::new(Committer { header, end: header.head, commits: header.commits }),
            state: Mutex::new(State {
                live: VecDeque::new(),
                queue: Vec::new(),
                next_request: 1,
                committed: BTreeMap::new(),
                leading: false,
                poisoned: None,
            }),
            changed: Condvar::new(),
            commits: AtomicU64::new(0),
            sectors_logged: AtomicU64::new(0),
            log_bytes_written: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            replay,
        }
    }

    /// The newest valid header on `log`, if it holds a log.
    pub fn probe(log: &dyn Device) -> Result<Option<Header>, LogError> {
        read::newest_header(log)
    }

    pub fn replay_report(&self) -> &ReplayReport {
        &self.replay
    }

    pub fn header(&self) -> Header {
        self.lock_committer().header
    }

    pub fn stats(&self) -> StripeLogStats {
        StripeLogStats {
            commits: self.commits.load(Relaxed),
            sectors_logged: self.sectors_logged.load(Relaxed),
            log_bytes_written: self.log_bytes_written.load(Relaxed),
            checkpoints: self.checkpoints.load(Relaxed),
            sectors_replayed: self.replay.sectors_written_home,
        }
    }

    /// Groups `writes` by home device, checking each against its home.
    fn group(&self, writes: &[(u32, u64, &[u8])]) -> Result<(BTreeMap<u32, SectorMap>, u64)> {
        let sector = u64::from(self.sector_bytes);
        let mut groups: BTreeMap<u32, SectorMap> = BTreeMap::new();
        let mut sectors = 0;
        for &(device, offset, data) in writes {
            let Some(home) = self.homes.get(device as usize) else {
                return Err(DeviceError::Invalid(format!("{}: no home device {device}", self.name)));
            };
            let len = data.len() as u64;
            if offset % sector != 0 || len % sector != 0 || offset + len > home.size_bytes() {
                return Err(DeviceError::Invalid(format!(
                    "{}: {len} bytes at {offset} do not fit {} in whole {sector}-byte sectors",
                    self.name,
                    home.name()
                )));
            }
            let _ = join(groups.entry(device).or_default(), data, offset, self.sector_bytes);
            sectors += len / sector;
        }
        Ok((groups, sectors))
    }

    /// Queues the row update and returns once a commit holding it is
    /// durable: the first writer to find no commit running commits the
    /// whole queue in one (group commit), the others wait for it.
    fn commit(&self, writes: &[(u32, u64, &[u8])]) -> Result<u64> {
        let (groups, sectors) = self.group(writes)?;
        if txn_bytes_bound(sectors, 0, self.sector_bytes) > self.max_txn_bytes {
            return Err(DeviceError::Invalid(format!(
                "{}: a row update of {sectors} sectors does not fit in half the log; use a larger log",
                self.name
            )));
        }
        let mut state = self.lock_state();
        let id = state.next_request;
        state.next_request += 1;
        state.queue.push(Request { id, groups });
        loop {
            if let Some(commit) = state.committed.remove(&id) {
                return Ok(commit);
            }
            if let Some(cause) = &state.poisoned {
                let cause = cause.clone();
                return Err(DeviceError::Poisoned {
                    device: self.name.clone(),
                    op: device::Op::Write,
                    cause,
                });
            }
            if !state.leading {
                state.leading = true;
                let batch = std::mem::take(&mut state.queue);
                drop(state);
                let result = self.commit_batch(batch);
                state = self.lock_state();
                state.leading = false;
                if let Err(e) = result {
                    if state.poisoned.is_none() {
                        state.poisoned = Some(device::PoisonCause::from(&e));
                    }
                    self.changed.notify_all();
                    return Err(e);
                }
                self.changed.notify_all();
                continue;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Commits a batch of row updates as one transaction: records and the
    /// next header, then one flush (replay finds the commit past the
    /// header's head by its checksums).
    fn commit_batch(&self, batch: Vec<Request>) -> Result<()> {
        let mut merged: BTreeMap<u32, SectorMap> = BTreeMap::new();
        for request in &batch {
            for (device, map) in &request.groups {
                merged.entry(*device).or_default().extend(map.iter().map(|(s, e)| (*s, e.clone())));
            }
        }
        let sectors: u64 = merged.values().map(|m| m.len() as u64).sum();
        let mut c = self.lock_committer();
        let commit = c.commits + 1;
        let refs: Vec<(u32, &SectorMap)> = merged.iter().map(|(d, m)| (*d, m)).collect();
        let mut records = Vec::new();
        let place = CommitPlace {
            log_id: c.header.log_id,
            head: c.end,
            commit,
            area_bytes: c.header.area_bytes(),
            sector_bytes: self.sector_bytes,
        };
        encode_commit_into(&mut records, &place, &refs, &[]);
        let bytes = records.len() as u64;
        if bytes > c.header.area_bytes() {
            return Err(DeviceError::Invalid(format!(
                "{}: {bytes} bytes of row updates exceed the log",
                self.name
            )));
        }
        while c.end + bytes - c.header.tail > c.header.area_bytes() {
            self.free(&mut c, false)?;
        }
        let mut next = c.header;
        next.generation += 1;
        next.head = c.end;
        next.commits = c.commits;
        write_circular(self.log.as_ref(), &next, c.end, &records)?;
        write_slot(self.log.as_ref(), next.slot(), &next.encode())?;
        self.log.flush()?;
        {
            let mut state = self.lock_state();
            state.live.push_back(Live { commit, start: c.end, writers: batch.len() });
            state.committed.extend(batch.iter().map(|r| (r.id, commit)));
        }
        c.header = next;
        c.end += bytes;
        c.commits = commit;
        self.commits.fetch_add(1, Relaxed);
        self.sectors_logged.fetch_add(sectors, Relaxed);
        self.log_bytes_written.fetch_add(bytes + SLOT_BYTES, Relaxed);
        Ok(())
    }

    /// Frees the records of done transactions: waits until the oldest is
    /// done (or all are, when `all`), flushes every home, then writes a
    /// header whose tail has moved past them.
    fn free(&self, c: &mut Committer, all: bool) -> Result<()> {
        let new_tail = {
            let mut state = self.lock_state();
            loop {
                let pending = state.live.iter().find(|l| l.writers > 0).map(|l| l.start);
                match pending {
                    Some(start) if start > c.header.tail && !all => break start,
                    Some(_) => state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
                    None => break c.end,
                }
            }
        };
        if new_tail == c.header.tail {
            return Ok(());
        }
        for (home, &out) in self.homes.iter().zip(&self.down) {
            match home.flush() {
                // Out of service when opened: nothing on it is vouched for
                // (a missing drive's stand-in fails every flush).
                Err(_) if out => {}
                flushed => flushed?,
            }
        }
        let mut next = c.header;
        next.generation += 1;
        next.tail = new_tail;
        next.head = c.end;
        next.commits = c.commits;
        write_slot(self.log.as_ref(), next.slot(), &next.encode())?;
        self.log.flush()?;
        c.header = next;
        self.lock_state().live.retain(|l| l.start >= new_tail);
        self.checkpoints.fetch_add(1, Relaxed);
        self.log_bytes_written.fetch_add(SLOT_BYTES, Relaxed);
        Ok(())
    }

    fn poison_on_error<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            let mut state = self.lock_state();
            if state.poisoned.is_none()
                && !matches!(e, DeviceError::Poisoned { .. } | DeviceError::Invalid(_))
            {
                state.poisoned = Some(device::PoisonCause::from(e));
            }
        }
        result
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        // Every update of State is a single push, retain or assignment.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_committer(&self) -> MutexGuard<'_, Committer> {
        self.committer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One flag per home: out of service (an index in `down`, which names
/// homes that exist).
fn out_of_service(homes: usize, down: &[usize]) -> Vec<bool> {
    (0..homes).map(|i| down.contains(&i)).collect()
}

impl WriteAheadLog for StripeLog {
    fn log(&self, writes: &[(u32, u64, &[u8])]) -> Result<u64> {
        let result = self.commit(writes);
        self.poison_on_error(result)
    }

    fn checkpoint(&self) -> Result<()> {
        let mut c = self.lock_committer();
        let result = self.free(&mut c, true);
        self.poison_on_error(result)
    }

    fn written(&self, ticket: u64) {
        let mut state = self.lock_state();
        if let Some(live) = state.live.iter_mut().find(|l| l.commit == ticket) {
            live.writers = live.writers.saturating_sub(1);
        }
        drop(state);
        self.changed.notify_all();
    }
}
