//! Replay: the slot with the newest valid start, its key-map snapshot,
//! then its records in order, read piece by piece from a
//! [`JournalSource`] so that a large key map is never read whole.
//!
//! Damage is not a tail. Where the records stop decoding, replay looks
//! at what follows: a mark record further on (version 5) that says the
//! bytes at the stop were durable when it was written proves those bytes
//! were once whole, so they are damage. Replay notes the damaged range,
//! goes on at the next valid record, and says which write ids the damage
//! may have taken and which blocks no lost record can have changed (those
//! a `before` record names after it). Without such a mark, the stop is
//! the journal's end: a clean one (zeros, or what an older generation
//! left in the slot) or a torn tail (not durable; ignored).

use std::collections::HashMap;

use super::format::{
    decode_header, decode_record, slot_bytes, start_bytes, start_fields, JournalError, JournalHeader, Record,
    ENTRY_BYTES, JOURNAL_HEADER_BYTES, KIND_AFTER, KIND_BEFORE, KIND_MARK, MARKS_VERSION,
    ORDERED_WRITE_IDS_VERSION, RECORD_ENTRIES_MAX, RECORD_HEADER_BYTES, RECORD_MAGIC,
};
use super::state::{KeyState, PendingWrite};
use crate::keys::KeyBytes;

/// Where replay reads a journal: positional reads of a journal device's
/// bytes. Replay reads a slot's header, then its snapshot a chunk at a
/// time, then its records, so a large key map is never read whole into
/// one buffer. `Error` carries both read failures and [`JournalError`]s.
pub trait JournalSource {
    type Error: From<JournalError>;
    /// Bytes of the journal device.
    fn bytes(&self) -> u64;
    fn read_at(&mut self, buf: &mut [u8], at: u64) -> Result<(), Self::Error>;
}

struct SliceSource<'a>(&'a [u8]);

impl JournalSource for SliceSource<'_> {
    type Error = JournalError;
    fn bytes(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&mut self, buf: &mut [u8], at: u64) -> Result<(), JournalError> {
        buf.copy_from_slice(&self.0[at as usize..at as usize + buf.len()]);
        Ok(())
    }
}

/// The snapshot is read in chunks of this size.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;

/// Bytes of the records region replay reads at once.
pub const RECORDS_WINDOW_BYTES: usize = 1 << 20;

/// Damaged ranges a replay lists (it counts them all).
pub const DAMAGE_LISTED_MAX: usize = 16;

/// The smallest unit a journal is written in (a sector): a writer pads
/// every write with zeros to a whole number of them.
const UNIT_BYTES_MIN: u64 = 512;

/// How many older generations a record after a clean end is tried
/// against before it is called damaged.
const OLDER_GENERATIONS_CHECKED: u64 = 8;

/// What part of the journal a damage hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// Records the journal had made durable (a mark further on says so).
    Records,
    /// The key-map snapshot or the records carried with it (the start's
    /// checksum fails, yet records of its generation follow it).
    Snapshot,
    /// The header of a newer start in the other slot (records of its
    /// generation follow it): replay had to take the older one.
    NewerStart,
}

/// A part of the journal that was durable and no longer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte of the journal device where it starts, and its length.
    pub at: u64,
    pub bytes: u64,
    pub kind: DamageKind,
}

/// The outcome of replaying a journal.
#[derive(Debug)]
pub struct Replay {
    pub header: JournalHeader,
    /// Keys of completed writes (pending writes keep their old keys).
    pub keys: KeyBytes,
    pub pending: Vec<PendingWrite>,
    /// `before` and `after` records replayed.
    pub records: u64,
    /// The first write id the journal does not know of: a stamp of this
    /// run with this sequence number or a later one was written after the
    /// journal's last durable record (the journal is incomplete: cut short,
    /// or async and caught by a crash); a stamp with an earlier one that is
    /// not what replay expects is older than a durable record promises.
    /// None when the journal cannot tell (a version 2 or 3 journal after a
    /// compaction: its snapshot does not say which writes it holds).
    pub ahead_from: Option<u64>,
    /// Byte of the journal device where the valid records end, and why,
    /// when the journal ends with a damaged or truncated record that was
    /// never durable, instead of cleanly (zeros, or what an older
    /// generation left in the slot).
    pub torn_tail: Option<(u64, &'static str)>,
    /// The first [`DAMAGE_LISTED_MAX`] parts of the journal that were
    /// durable and no longer read, in order; replay went on past each.
    pub damage: Vec<Damage>,
    /// How many there are.
    pub damaged_ranges: u64,
    /// Write ids whose `before` records a damage may have taken (from,
    /// to: `to` is `u64::MAX` when no `before` record follows the last
    /// damage). A block such a write named may hold its stamp, and the
    /// journal cannot say what it should hold.
    pub lost_ids: Option<(u64, u64)>,
    /// The snapshot's keys are suspect (its checksum fails).
    pub snapshot_damaged: bool,
    /// Blocks a `before` record names after the last damage, sorted: no
    /// lost record can change what they should hold. Empty without damage.
    pub settled: Vec<u64>,
}

impl Replay {
    /// Whether replay met damage (and went on past it).
    pub fn damaged(&self) -> bool {
        self.damaged_ranges > 0
    }

    /// Whether block `block`'s expected contents may depend on a record
    /// the damage took.
    pub fn unsettled(&self, block: u64) -> bool {
        self.damaged() && self.settled.binary_search(&block).is_err()
    }
}

/// Replays a whole journal device held in memory: the slot with the newest
/// valid start, its keys in memory.
pub fn replay(buf: &[u8]) -> Result<Replay, JournalError> {
    replay_from(&mut SliceSource(buf), |blocks| Ok(KeyBytes::from(vec![0; blocks as usize])))
}

/// Replays the journal `source` reads: the slot whose header and start
/// checksums hold with the higher generation (or whose start checksum
/// fails but whose records show the start was once whole: a damaged
/// snapshot). `zeroed_keys(blocks)` makes the store the keys are read
/// into (memory or a mapped file), once the header has shown the slot
/// holds that many.
pub fn replay_from<S: JournalSource>(
    source: &mut S,
    mut zeroed_keys: impl FnMut(u64) -> Result<KeyBytes, S::Error>,
) -> Result<Replay, S::Error> {
    let device_bytes = source.bytes();
    let half = slot_bytes(device_bytes);
    let slots = if half < JOURNAL_HEADER_BYTES as u64 {
        vec![(0, device_bytes)]
    } else {
        vec![(0, half), (half, half)]
    };
    let mut starts = Vec::with_capacity(slots.len());
    let mut errors = Vec::new();
    for &(at, len) in &slots {
        match read_start(source, at, len)? {
            Ok(start) => starts.push(start),
            Err(e) => errors.push(e),
        }
    }
    // Newest first; on a tie, the first slot (a stable sort).
    starts.sort_by_key(|s| std::cmp::Reverse(s.header.generation));
    let mut keys: Option<KeyBytes> = None;
    for start in &starts {
        let mut store = match keys.take() {
            Some(k) if k.len() as u64 == start.header.blocks => k,
            _ => zeroed_keys(start.header.blocks)?,
        };
        let intact = read_snapshot(source, start, &mut store)?;
        // A start is flushed before any record of its generation is
        // written after those it carries: such records prove a failing
        // start was whole once. A start with none may be a compaction a
        // crash cut short.
        let mut window = RecordWindow::of(start);
        if intact || window.next_record_from(source, start.carried, &start.header)?.is_some() {
            let newer = newer_start_damaged(source, &slots, start)?;
            return replay_records(source, start, store, !intact, newer);
        }
        errors.push(JournalError::Snapshot(start.at + JOURNAL_HEADER_BYTES as u64));
        keys = Some(store);
    }
    Err(most_telling(errors).into())
}

/// Of the slots' errors, the one that says most: a slot holding a journal
/// (damaged) says more than one holding none.
fn most_telling(errors: Vec<JournalError>) -> JournalError {
    let mut errors = errors;
    errors.sort_by_key(|e| matches!(e, JournalError::NotAJournal));
    errors.into_iter().next().unwrap_or(JournalError::NotAJournal)
}

/// The other slot's header, when it fails its checks although records of
/// the generation after `start`'s follow it: a newer start, damaged.
fn newer_start_damaged<S: JournalSource>(
    source: &mut S,
    slots: &[(u64, u64)],
    start: &Start,
) -> Result<Option<u64>, S::Error> {
    for &(at, len) in slots.iter().filter(|(at, _)| *at != start.at) {
        let head = read_start(source, at, len)?;
        let damaged = matches!(head, Err(JournalError::Header(_) | JournalError::Field { .. }));
        if !damaged || len < start.records_at {
            continue;
        }
        let header = JournalHeader { generation: start.header.generation + 1, ..start.header.clone() };
        let mut window = RecordWindow {
            base: at + start.records_at,
            region: len - start.records_at,
            ..RecordWindow::of(start)
        };
        if window.next_record_from(source, 0, &header)?.is_some() {
            return Ok(Some(at));
        }
    }
    Ok(None)
}

/// A slot's header, checked against the slot's size.
struct Start {
    header: JournalHeader,
    version: u32,
    /// The slot's place on the device.
    at: u64,
    len: u64,
    records_at: u64,
    carried: u64,
    start_crc: u32,
}

/// Reads and checks the header of the slot at `at`.
fn read_start<S: JournalSource>(
    source: &mut S,
    at: u64,
    len: u64,
) -> Result<Result<Start, JournalError>, S::Error> {
    let mut buf = vec![0u8; (len as usize).min(JOURNAL_HEADER_BYTES)];
    source.read_at(&mut buf, at)?;
    Ok(check_start(&buf, at, len))
}

/// The header `buf` of the slot at `at`, `len` bytes long, checked.
fn check_start(buf: &[u8], at: u64, len: u64) -> Result<Start, JournalError> {
    let (header, version) = decode_header(buf, at)?;
    // Bounded before start_bytes rounds it up.
    if header.blocks > len {
        return Err(JournalError::Truncated(len as usize));
    }
    let records_at = start_bytes(header.blocks);
    let (carried, start_crc) = start_fields(buf)?;
    if len < records_at.saturating_add(carried) {
        return Err(JournalError::Truncated(len as usize));
    }
    Ok(Start { header, version, at, len, records_at, carried, start_crc })
}

/// Reads the snapshot into `keys` a chunk at a time; returns whether the
/// start checksum (snapshot and carried records) holds.
fn read_snapshot<S: JournalSource>(
    source: &mut S,
    start: &Start,
    keys: &mut KeyBytes,
) -> Result<bool, S::Error> {
    debug_assert_eq!(keys.len() as u64, start.header.blocks);
    let body_end = start.records_at + start.carried;
    let mut buf = vec![0u8; SNAPSHOT_CHUNK_BYTES];
    let (mut at, mut crc) = (JOURNAL_HEADER_BYTES as u64, 0);
    while at < body_end {
        let chunk = &mut buf[..(body_end - at).min(SNAPSHOT_CHUNK_BYTES as u64) as usize];
        source.read_at(chunk, start.at + at)?;
        crc = crc32c::crc32c_append(crc, chunk);
        let key = at - JOURNAL_HEADER_BYTES as u64;
        if key < keys.len() as u64 {
            let len = chunk.len().min(keys.len() - key as usize);
            keys[key as usize..][..len].copy_from_slice(&chunk[..len]);
            keys.evict(key as usize..key as usize + len);
        }
        at += chunk.len() as u64;
    }
    Ok(crc == start.start_crc)
}

/// Reads the slot's records (carried ones included) and applies them to
/// the snapshot in `keys`, going on past damage.
fn replay_records<S: JournalSource>(
    source: &mut S,
    start: &Start,
    keys: KeyBytes,
    snapshot_damaged: bool,
    newer_damaged: Option<u64>,
) -> Result<Replay, S::Error> {
    let header = &start.header;
    let mut window = RecordWindow::of(start);
    let region = window.region;
    let mut walk = Walk::new(keys, header.write_ids_end);
    if snapshot_damaged {
        let (at, bytes) =
            (start.at + JOURNAL_HEADER_BYTES as u64, start.records_at - JOURNAL_HEADER_BYTES as u64);
        walk.damaged(Damage { at, bytes, kind: DamageKind::Snapshot });
    }
    let mut at = 0;
    let mut torn_tail = None;
    // The furthest durable end a mark past the first stop claims.
    let mut claimed: Option<u64> = None;
    loop {
        while at < region {
            let Some(record) = window.record_at(source, at, header)? else { break };
            at += record.len as u64;
            walk.apply(record);
        }
        if at >= region || window.zeros_from(source, at)? {
            break;
        }
        let claim = match claimed {
            Some(claim) => claim,
            None => *claimed.insert(window.max_mark_from(source, at, header)?),
        };
        if claim > at {
            // Durable once: damage. Go on at the next valid record (the
            // mark that claimed this is one, so there is a next).
            let Some((next, _)) = window.next_record_from(source, at + 1, header)? else { break };
            let kind = DamageKind::Records;
            walk.damaged(Damage { at: window.base + at, bytes: next - at, kind });
            at = next;
            continue;
        }
        if !window.clean_end(source, at, header)? {
            torn_tail = Some((window.base + at, "damaged or truncated record"));
        }
        break;
    }
    if let Some(at) = newer_damaged {
        walk.damaged(Damage { at, bytes: JOURNAL_HEADER_BYTES as u64, kind: DamageKind::NewerStart });
    }
    Ok(walk.finish(header, start.version, snapshot_damaged, torn_tail))
}

/// Replay's walk through the records: the key state, and what damage on
/// the way cost.
struct Walk {
    state: KeyState,
    records: u64,
    /// 1 + the highest write id of a `before` record so far.
    write_ids_end: u64,
    damage: Vec<Damage>,
    damaged_ranges: u64,
    lost_ids: Option<(u64, u64)>,
    /// Since the last damage, no `before` record yet: writes from this id
    /// on may have lost theirs.
    lost_from: Option<u64>,
    settled: Vec<u64>,
    /// Blocks of the writes in flight at a damage, by block: their
    /// `after` records may be lost, and a later write's completion on the
    /// block shows they completed.
    stale: HashMap<u64, Vec<u64>>,
}

impl Walk {
    fn new(keys: KeyBytes, write_ids_end: u64) -> Walk {
        Walk {
            state: KeyState::new(keys),
            records: 0,
            write_ids_end,
            damage: Vec::new(),
            damaged_ranges: 0,
            lost_ids: None,
            lost_from: None,
            settled: Vec::new(),
            stale: HashMap::new(),
        }
    }

    fn apply(&mut self, record: Record) {
        let Record { kind, write_id, entries, .. } = record;
        match kind {
            KIND_BEFORE => {
                if let Some(from) = self.lost_from.take() {
                    self.lose(from, write_id);
                }
                self.write_ids_end = self.write_ids_end.max(write_id.saturating_add(1));
                if self.damaged_ranges > 0 {
                    self.settled.extend(entries.iter().map(|&(b, _)| b));
                }
                self.state.before(write_id, entries);
                self.records += 1;
            }
            KIND_AFTER => {
                let done = self.state.after(write_id);
                if !self.stale.is_empty() {
                    self.forget_stale(write_id, &done);
                }
                self.records += 1;
            }
            _ => debug_assert_eq!(kind, KIND_MARK),
        }
    }

    /// Write `write_id` completed on these blocks: earlier writes in
    /// flight on them at a damage completed before it.
    fn forget_stale(&mut self, write_id: u64, done: &[(u64, u8)]) {
        for (block, _) in done {
            let Some(ids) = self.stale.get_mut(block) else { continue };
            for &id in ids.iter().filter(|&&id| id < write_id) {
                self.state.forget(id, *block);
            }
            ids.retain(|&id| id > write_id);
        }
    }

    /// Ids `from..to` may name writes whose `before` records are lost.
    fn lose(&mut self, from: u64, to: u64) {
        if from < to {
            self.lost_ids = Some(match self.lost_ids {
                Some((a, b)) => (a.min(from), b.max(to)),
                None => (from, to),
            });
        }
    }

    fn damaged(&mut self, damage: Damage) {
        self.damaged_ranges += 1;
        if self.damage.len() < DAMAGE_LISTED_MAX {
            self.damage.push(damage);
        }
        self.lost_from.get_or_insert(self.write_ids_end);
        self.settled.clear();
        for (id, entries) in self.state.inflight() {
            for &(block, _) in entries {
                self.stale.entry(block).or_default().push(id);
            }
        }
    }

    fn finish(
        mut self,
        header: &JournalHeader,
        version: u32,
        snapshot_damaged: bool,
        torn_tail: Option<(u64, &'static str)>,
    ) -> Replay {
        if let Some(from) = self.lost_from.take() {
            self.lose(from, u64::MAX);
        }
        self.settled.sort_unstable();
        self.settled.dedup();
        // Without ordered ids (before version 4), only a journal never
        // compacted lists every write it knows of in its records.
        let ordered = version >= ORDERED_WRITE_IDS_VERSION || header.generation == 0;
        Replay {
            header: header.clone(),
            pending: self.state.pending(),
            keys: self.state.keys,
            records: self.records,
            ahead_from: ordered.then_some(self.write_ids_end),
            torn_tail,
            damage: self.damage,
            damaged_ranges: self.damaged_ranges,
            lost_ids: self.lost_ids,
            snapshot_damaged,
            settled: self.settled,
        }
    }
}

/// The records region of a slot, read [`RECORDS_WINDOW_BYTES`] at a time
/// (more when one record is longer), so replay's memory does not grow
/// with the slot.
struct RecordWindow {
    /// Where the region starts on the device, and its length.
    base: u64,
    region: u64,
    /// Whether the slot's version has mark records.
    marks: bool,
    /// The region offset of `bytes[0]`.
    from: u64,
    bytes: Vec<u8>,
}

impl RecordWindow {
    fn of(start: &Start) -> RecordWindow {
        RecordWindow {
            base: start.at + start.records_at,
            region: start.len - start.records_at,
            marks: start.version >= MARKS_VERSION,
            from: 0,
            bytes: Vec::new(),
        }
    }

    /// Makes the window hold region bytes `at..at + want` (or up to the
    /// region's end).
    fn cover<S: JournalSource>(&mut self, source: &mut S, at: u64, want: u64) -> Result<(), S::Error> {
        let end = at.saturating_add(want).min(self.region);
        if at >= self.from && end <= self.from + self.bytes.len() as u64 {
            return Ok(());
        }
        let len = (self.region - at).min((RECORDS_WINDOW_BYTES as u64).max(end - at));
        self.bytes.resize(len as usize, 0);
        source.read_at(&mut self.bytes, self.base + at)?;
        self.from = at;
        Ok(())
    }

    /// The record at region offset `at`, if a valid one is there (a mark
    /// is valid only if it claims no byte past itself).
    fn record_at<S: JournalSource>(
        &mut self,
        source: &mut S,
        at: u64,
        header: &JournalHeader,
    ) -> Result<Option<Record>, S::Error> {
        self.cover(source, at, RECORD_HEADER_BYTES as u64)?;
        let offset = (at - self.from) as usize;
        let head = &self.bytes[offset..];
        if head.len() >= 8 && head[..4] == RECORD_MAGIC.to_le_bytes() {
            let len = u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]));
            // A record longer than what the window holds past `at` (no
            // valid one lists more entries than there are blocks, or than
            // a write holds).
            let entries = header.blocks.min(RECORD_ENTRIES_MAX as u64);
            let longest = RECORD_HEADER_BYTES as u64 + ENTRY_BYTES as u64 * entries;
            self.cover(source, at, len.min(longest))?;
        }
        let offset = (at - self.from) as usize;
        let record = decode_record(&self.bytes[offset..], header, self.marks);
        Ok(record.filter(|r| r.kind != KIND_MARK || r.write_id <= at))
    }

    /// The next valid record of the header's generation at region offset
    /// `at` or after, and where it is.
    fn next_record_from<S: JournalSource>(
        &mut self,
        source: &mut S,
        mut at: u64,
        header: &JournalHeader,
    ) -> Result<Option<(u64, Record)>, S::Error> {
        let magic = RECORD_MAGIC.to_le_bytes();
        let finder = memchr::memmem::Finder::new(&magic);
        while at.saturating_add(RECORD_HEADER_BYTES as u64) <= self.region {
            self.cover(source, at, RECORDS_WINDOW_BYTES as u64)?;
            let hay = &self.bytes[(at - self.from) as usize..];
            let Some(i) = finder.find(hay) else {
                // A magic across the window's end is found from the next.
                at += (hay.len() as u64).saturating_sub(3).max(1);
                continue;
            };
            let found = at + i as u64;
            if let Some(record) = self.record_at(source, found, header)? {
                return Ok(Some((found, record)));
            }
            at = found + 1;
        }
        Ok(None)
    }

    /// The furthest durable end any valid mark at region offset `at` or
    /// after claims (0: none).
    fn max_mark_from<S: JournalSource>(
        &mut self,
        source: &mut S,
        mut at: u64,
        header: &JournalHeader,
    ) -> Result<u64, S::Error> {
        let mut claim = 0;
        if !self.marks {
            return Ok(claim);
        }
        while let Some((found, record)) = self.next_record_from(source, at, header)? {
            if record.kind == KIND_MARK {
                claim = claim.max(record.write_id);
            }
            at = found + record.len as u64;
        }
        Ok(claim)
    }

    /// Whether the records end cleanly at `at`, where no valid record of
    /// this generation starts: what follows is zeros, or bytes an older
    /// generation left in this slot (a slot is reused by every second
    /// compaction and never zeroed again). The writer writes whole units
    /// (sectors, 512 bytes or a multiple) padded with zeros, so a stream
    /// that ends inside a sector leaves zeros to the sector's end; one that
    /// ends on a sector boundary is followed by what the slot held before:
    /// no record magic (the middle of an older record), or a whole record
    /// of an older generation. Anything else is a record of this
    /// generation that is damaged or was cut short.
    fn clean_end<S: JournalSource>(
        &mut self,
        source: &mut S,
        at: u64,
        header: &JournalHeader,
    ) -> Result<bool, S::Error> {
        if self.zeros_from(source, at)? {
            return Ok(true);
        }
        let sector_end = at.next_multiple_of(UNIT_BYTES_MIN).min(self.region);
        if at % UNIT_BYTES_MIN != 0 {
            self.cover(source, at, sector_end - at)?;
            let offset = (at - self.from) as usize;
            return Ok(self.bytes[offset..][..(sector_end - at) as usize].iter().all(|&b| b == 0));
        }
        self.cover(source, at, RECORD_HEADER_BYTES as u64)?;
        let offset = (at - self.from) as usize;
        if !self.bytes[offset..].starts_with(&RECORD_MAGIC.to_le_bytes()) {
            return Ok(true);
        }
        // The slot's generations alternate with the other slot's: older
        // records here are of this generation minus 2, 4, ...
        let older = (1..=OLDER_GENERATIONS_CHECKED)
            .map_while(|i| header.generation.checked_sub(2 * i))
            .collect::<Vec<u64>>();
        for generation in older {
            let older_header = JournalHeader { generation, ..header.clone() };
            if self.record_at(source, at, &older_header)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether every byte of the region from `at` on is zero.
    fn zeros_from<S: JournalSource>(&mut self, source: &mut S, mut at: u64) -> Result<bool, S::Error> {
        while at < self.region {
            self.cover(source, at, RECORDS_WINDOW_BYTES as u64)?;
            let offset = (at - self.from) as usize;
            if self.bytes[offset..].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            at = self.from + self.bytes.len() as u64;
        }
        Ok(true)
    }
}
