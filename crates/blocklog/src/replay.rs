//! Replay: walk the committed records from the tail, keep the latest copy
//! of each sector (revocations drop earlier copies), write them home,
//! flush, and leave a header for the next commit. Nothing is written
//! before the walk ends, so a replay interrupted by another crash is
//! simply run again.
//!
//! A record that fails before the head is damage; past the head it is the
//! torn end of the log, unless a valid record of a later commit follows
//! (no crash leaves one: a commit's records are written only once the
//! commit before is durable). At damage, the commits before it are
//! replayed, none from it on, and the header says so until a repair
//! (`repair.rs`): no later open replays a commit whose predecessor it did
//! not.

use std::collections::BTreeMap;

use device::{AlignedBuf, Device};

use crate::core::write_slot;
use crate::format::{Header, Stop, AREA_START};
use crate::read::{Reader, Record};
use crate::record::{RecordFault, RecordKind, MAX_RECORD_DATA, RECORD_LAST};
use crate::LogError;

/// Where replay stopped at damage: the record that failed, the commits
/// not replayed, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayStop {
    /// The LSN of the record that failed, and its byte offset on the log device.
    pub lsn: u64,
    pub offset: u64,
    /// The first commit not replayed (`None` when its number was unreadable).
    pub commit: Option<u64>,
    /// The highest commit number known to follow, itself not replayed.
    pub last_commit: u64,
    pub reason: String,
}

/// The stop a header remembers, in a report's terms.
pub(crate) fn stop_report(header: &Header, stop: &Stop) -> ReplayStop {
    ReplayStop::of(header, stop, stop.reason.to_string())
}

impl ReplayStop {
    /// The stop `header` remembers, if replay stopped at damage.
    pub fn from_header(header: &Header) -> Option<ReplayStop> {
        header.stop.as_ref().map(|stop| stop_report(header, stop))
    }

    fn of(header: &Header, stop: &Stop, reason: String) -> ReplayStop {
        ReplayStop {
            lsn: stop.lsn,
            offset: AREA_START + stop.lsn % header.area_bytes(),
            commit: (stop.commit > 0).then_some(stop.commit),
            last_commit: stop.last_commit,
            reason,
        }
    }

    /// The commits not replayed, in words.
    pub fn lost(&self) -> String {
        match self.commit {
            Some(c) if c == self.last_commit => format!("commit {c} was not replayed"),
            Some(c) => format!(
                "commits {c} to {} ({}) were not replayed",
                self.last_commit,
                self.last_commit - c + 1
            ),
            None => format!("the commits from there on (up to {}) were not replayed", self.last_commit),
        }
    }
}

impl std::fmt::Display for ReplayStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let commit =
            self.commit.map_or("a commit whose number is unreadable".to_string(), |c| format!("commit {c}"));
        write!(
            f,
            "the block log's replay stopped at damage in {commit}, LSN {} (byte {} of the log device): {}; {}",
            self.lsn,
            self.offset,
            self.reason,
            self.lost()
        )
    }
}

/// What a replay found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub records: u64,
    pub commits: u64,
    pub sectors_written_home: u64,
    pub revoked_sectors: u64,
    /// Sectors whose home is out of service (a RAID-5 drive missing or
    /// down), not written: its data is rebuilt from the others.
    pub sectors_skipped: u64,
}

/// Each sector's latest logged contents, by home device and sector;
/// `None` for a sector of zeros (a zeros record carries no bytes).
type SectorMap = BTreeMap<(u32, u64), Option<Vec<u8>>>;

/// Where replay writes the blocks of one home device: `bytes` bytes from
/// byte `offset` of `dev`. A home out of service is neither written nor
/// flushed.
pub struct Home<'a> {
    pub dev: &'a dyn Device,
    pub offset: u64,
    pub bytes: u64,
    pub in_service: bool,
}

/// Replays the log `header` describes into `homes` and writes the header
/// the next commit follows; returns it and what was replayed. A log whose
/// header says replay stopped at damage is refused; one whose replay stops
/// at damage now is marked so (the commits before the damage written home
/// first), then refused.
pub fn recover(
    log: &dyn Device,
    homes: &[Home<'_>],
    header: Header,
) -> Result<(Header, ReplayReport), LogError> {
    if let Some(stop) = ReplayStop::from_header(&header) {
        return Err(LogError::Stopped { device: log.name().to_string(), stop });
    }
    let sector = u64::from(header.sector_bytes);
    let reader = Reader::new(log, &header, homes.iter().map(|h| h.bytes / sector).collect());
    let mut latest = SectorMap::new();
    let mut report = ReplayReport::default();
    let walked = walk(&reader, &mut latest, &mut report)?;
    write_home(homes, &header, &latest, &mut report)?;
    for home in homes.iter().filter(|h| h.in_service) {
        home.dev.flush()?;
    }
    let next = walked.next_header(&header);
    if next != header {
        write_slot(log, next.slot(), &next.encode())?;
        log.flush()?;
    }
    match (&next.stop, walked.fault) {
        (Some(stop), fault) => {
            let reason = fault.map_or_else(|| stop.reason.to_string(), |f| f.to_string());
            Err(LogError::Stopped {
                device: log.name().to_string(),
                stop: ReplayStop::of(&next, stop, reason),
            })
        }
        (None, _) => Ok((next, report)),
    }
}

/// Where a walk ended.
struct Walked {
    /// The end of the last whole commit replayed.
    end: u64,
    /// The last commit replayed, if any.
    last_commit: Option<u64>,
    /// Commit numbers found past the end that no later commit may take:
    /// those of a commit a crash left in part.
    used: Option<u64>,
    stop: Option<Stop>,
    fault: Option<RecordFault>,
}

impl Walked {
    /// The header after this walk: tail and head at its end, the commits
    /// counted to the last one replayed (or past any number the end's
    /// leftovers carry), and the stop, if any.
    fn next_header(&self, header: &Header) -> Header {
        let mut next = *header;
        next.tail = self.end;
        next.head = self.end;
        next.commits = self.last_commit.unwrap_or(header.commits).max(self.used.unwrap_or(0));
        if let Some(stop) = self.stop {
            if stop.commit > 0 {
                next.commits = stop.commit - 1;
            }
            next.stop = Some(stop);
        }
        if next != *header {
            next.generation += 1;
        }
        next
    }
}

/// Walks from the tail: applies every whole commit into `latest` until
/// the log ends or damage stops it.
fn walk(reader: &Reader<'_>, latest: &mut SectorMap, report: &mut ReplayReport) -> Result<Walked, LogError> {
    let header = reader.header();
    let sector = u64::from(header.sector_bytes);
    let limit = reader.limit();
    let mut walked = Walked { end: header.tail, last_commit: None, used: None, stop: None, fault: None };
    let mut commit: Vec<Record> = Vec::new();
    // The number the next commit must carry, once known: from the head
    // on, the header's count says it.
    let mut expected: Option<u64> = None;
    let mut lsn = header.tail;
    loop {
        if lsn == header.head {
            let want = header.commits + 1;
            let fault = if !commit.is_empty() {
                Some("a commit runs on past")
            } else if expected.is_some_and(|e| e != want) {
                Some("the commits numbered before it do not end with the count of")
            } else {
                None
            };
            if let Some(what) = fault {
                return stop_at(reader, walked, lsn, expected, RecordFault::Head { head: lsn, what });
            }
            expected = Some(want);
        }
        if lsn >= limit {
            // A commit cut off by the limit is the torn end's leftover.
            walked.used = commit.first().map(|r| r.header.commit);
            return Ok(walked);
        }
        let current = commit.first().map(|r| r.header.commit).or(expected);
        let record = reader.record(lsn, limit)?.and_then(|r| in_order(r, current));
        let record = match record {
            Ok(record) if lsn < header.head && lsn + record.header.total_bytes > header.head => {
                let fault = RecordFault::Head { head: header.head, what: "a record runs on past" };
                return stop_at(reader, walked, lsn, current, fault);
            }
            Ok(record) => record,
            Err(fault) if lsn < header.head => return stop_at(reader, walked, lsn, current, fault),
            Err(fault) => return end_past_head(reader, walked, lsn, current, &commit, fault),
        };
        lsn += record.header.total_bytes;
        report.records += 1;
        let last = record.header.flags & RECORD_LAST != 0;
        let number = record.header.commit;
        commit.push(record);
        if last {
            apply_commit(latest, report, std::mem::take(&mut commit), sector as usize);
            walked.end = lsn;
            walked.last_commit = Some(number);
            expected = Some(number + 1);
        }
        debug_assert!(lsn % sector == 0 && lsn <= limit);
    }
}

/// A record whose place calls for commit `current` (the one in progress,
/// or the next) must belong to it; the first at the tail may be any.
fn in_order(record: Record, current: Option<u64>) -> Result<Record, RecordFault> {
    match current {
        Some(expected) if record.header.commit != expected => {
            Err(RecordFault::WrongCommit { found: record.header.commit, expected })
        }
        _ => Ok(record),
    }
}

/// Past the head a record failed: the log's torn end, unless a valid
/// record of a later commit than `current` follows, which only damage
/// leaves. Numbers the leftovers of the commit in progress carry are
/// recorded, so that no later commit takes them.
fn end_past_head(
    reader: &Reader<'_>,
    mut walked: Walked,
    lsn: u64,
    current: Option<u64>,
    commit: &[Record],
    fault: RecordFault,
) -> Result<Walked, LogError> {
    let sector = u64::from(reader.header().sector_bytes);
    let current = current.unwrap_or(reader.header().commits + 1);
    let found = reader.scan(lsn + sector, reader.limit(), current)?;
    let later_here = matches!(fault, RecordFault::WrongCommit { found, .. } if found > current);
    if later_here || found.last_commit.is_some_and(|c| c > current) {
        return stop_at(reader, walked, lsn, Some(current), fault);
    }
    let leftover = !commit.is_empty() || found.last_commit.is_some();
    walked.used = leftover.then_some(current);
    Ok(walked)
}

/// Replay stops at damage at `lsn`: the commits before it stand, and the
/// stop names the first not replayed and the last known to follow.
fn stop_at(
    reader: &Reader<'_>,
    mut walked: Walked,
    lsn: u64,
    current: Option<u64>,
    fault: RecordFault,
) -> Result<Walked, LogError> {
    let header = reader.header();
    let first = walked.last_commit.map(|c| c + 1).or(current).or(fault.commit()).unwrap_or(0);
    let found = reader.scan(lsn, reader.limit(), first)?;
    let committed = if lsn < header.head { header.commits } else { 0 };
    let last_commit = first.max(committed).max(found.last_commit.unwrap_or(0));
    let reason = fault.reason();
    walked.stop = Some(Stop { lsn, commit: first, last_commit, reason });
    walked.fault = Some(fault);
    debug_assert!(walked.end <= lsn && last_commit >= first);
    Ok(walked)
}

/// Applies one whole commit: its revocations first (they cancel copies of
/// earlier commits), then its blocks in order.
fn apply_commit(latest: &mut SectorMap, report: &mut ReplayReport, commit: Vec<Record>, sector: usize) {
    for record in commit.iter().filter(|r| r.header.kind == RecordKind::Revoke) {
        for extent in &record.header.extents {
            // Only the copies held are visited, however long the extent.
            let end = extent.sector + u64::from(extent.sectors);
            let held: Vec<(u32, u64)> =
                latest.range((extent.device, extent.sector)..(extent.device, end)).map(|(k, _)| *k).collect();
            for key in held {
                latest.remove(&key);
                report.revoked_sectors += 1;
            }
        }
    }
    // A commit names each sector once: its block and zero records apply
    // in any order.
    for record in commit.iter().filter(|r| r.header.kind != RecordKind::Revoke) {
        // The decoder sized a blocks record's payload to its entries.
        let mut data = record.payload.chunks_exact(sector);
        for extent in &record.header.extents {
            for s in extent.sector..extent.sector + u64::from(extent.sectors) {
                let bytes = match record.header.kind {
                    RecordKind::Zeros => None,
                    _ => data.next().map(<[u8]>::to_vec),
                };
                latest.insert((extent.device, s), bytes);
            }
        }
    }
    report.commits += 1;
}

fn write_home(
    homes: &[Home<'_>],
    header: &Header,
    latest: &SectorMap,
    report: &mut ReplayReport,
) -> Result<(), LogError> {
    let sector = u64::from(header.sector_bytes);
    let zeros = vec![0u8; sector as usize];
    let mut run: Vec<u8> = Vec::new();
    let mut run_start = (0u32, 0u64);
    let flush_run = |run: &mut Vec<u8>, (device, start): (u32, u64)| -> Result<(), LogError> {
        if !run.is_empty() {
            let home = &homes[device as usize];
            let mut buf = AlignedBuf::zeroed(run.len(), home.dev.buffer_align());
            buf.copy_from_slice(run);
            home.dev.write_at(&buf, home.offset + start * sector)?;
            run.clear();
        }
        Ok(())
    };
    // The decoder kept every entry inside its home: the device index and
    // the sectors are in bounds.
    for (&(device, s), bytes) in latest {
        if !homes[device as usize].in_service {
            report.sectors_skipped += 1;
            continue;
        }
        let contiguous =
            !run.is_empty() && run_start.0 == device && run_start.1 + run.len() as u64 / sector == s;
        if !contiguous || run.len() >= MAX_RECORD_DATA {
            flush_run(&mut run, run_start)?;
            run_start = (device, s);
        }
        run.extend_from_slice(bytes.as_deref().unwrap_or(&zeros));
        report.sectors_written_home += 1;
    }
    flush_run(&mut run, run_start)
}
