//! The validation journal: the key map survives a crash of the host or the
//! process. A file starts with a header and a snapshot of the key map;
//! records follow. Before a data write, a `before` record names the key
//! blocks and their new keys; after it, an `after` record marks it done.
//! Replay rebuilds the map and lists the writes that were in flight, whose
//! blocks may hold the old or the new contents.
//!
//! Layout (little-endian; docs/formats.md "Validation journal"): the
//! device is cut into two slots of half its size (rounded down to 4096);
//! the slot with the newer valid start holds the journal. Each slot:
//! ```text
//! header, 4096 bytes:
//!   0 magic "IOLABJNL"   8 version u32 = 4   12 crc32c u32 (of the header with this field 0)
//!  16 run_id u64        24 region_start u64  32 key_block_bytes u64
//!  40 blocks u64        48 sector_bytes u32  52 target name length u16
//!  54 target name (up to 256 bytes)          310 mode u8 (1 sync, 2 async, 3 group)
//! 312 generation u64   320 carried_bytes u32  324 start_crc u32 (snapshot and carried records)
//! 328 write_ids_end u64 (1 + the highest write id of a `before` record written before this start)
//! 336 created_ns u64 (when the run's journal was created, ns since the Unix epoch; 0 unknown)
//! snapshot: `blocks` bytes of keys, padded with zeros to a multiple of 4096
//! records (the first `carried_bytes` of them written with the start), each:
//!   0 magic "JREC" (u32 0x4345524a)  4 length u32 (whole record)
//!   8 crc32c u32 (of the generation, u64, then the record with this field 0)
//!  12 kind u8 (1 before, 2 after)  13 reserved [u8; 3]  16 write_id u64
//!  24 entries: (block u64, key u8) × n, 9 bytes each (before records only)
//! ```
//! A record that is truncated or fails its checksum ends the journal: it
//! and everything after it were not durable. The journal lives on a
//! preallocated, zero-filled device, so zeros after the last record are
//! its clean end; so are the bytes an older generation left in a slot a
//! compaction reused (`RecordWindow::clean_end`).
//!
//! Write ids are given in the order `before` records are written (version
//! 4), so the records replayed, and `write_ids_end` for what a compaction
//! folded into the snapshot, say which writes the journal knows of: a
//! stamp of the run whose write id (its sequence number) is at or past
//! [`Replay::ahead_from`] was written after the journal's last durable
//! record, and a stamp of an earlier id that is not what replay expects is
//! older than what a durable record promises.
//!
//! A start is produced ([`StartStream`]) and read back ([`replay_from`])
//! piece by piece, its checksum computed as the pieces go, and replay's
//! keys go into a [`KeyBytes`] store the caller chooses: a key map of a
//! very large target is never copied whole into one buffer.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::keys::{KeyBytes, KeyMap};

pub const JOURNAL_MAGIC: &[u8; 8] = b"IOLABJNL";
pub const JOURNAL_VERSION: u32 = 4;
/// Versions 2 and 3 journals read the same, without `write_ids_end` and
/// `created_ns` (read as 0) and without write ids in record order; in
/// version 2, a `before` on a block with a write in flight also proved
/// that write complete, which version 3 no longer promises (replay of
/// either accepts the whole chain).
pub const JOURNAL_VERSION_MIN: u32 = 2;
/// The first version whose write ids follow the order of its records.
const ORDERED_WRITE_IDS_VERSION: u32 = 4;
const MODE_AT: usize = 54 + TARGET_NAME_BYTES_MAX;
const GENERATION_AT: usize = 312;
const CARRIED_AT: usize = 320;
const START_CRC_AT: usize = 324;
const WRITE_IDS_END_AT: usize = 328;
const CREATED_AT: usize = 336;
pub const JOURNAL_HEADER_BYTES: usize = 4096;
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"JREC");
const RECORD_HEADER_BYTES: usize = 24;
const ENTRY_BYTES: usize = 9;
/// Longest target name the header holds.
pub const TARGET_NAME_BYTES_MAX: usize = 256;

/// How the journal's records were made durable, which says what a crash
/// can have cost it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    /// Every record durable before the run goes on (Vdbench's `-j`).
    Sync,
    /// Records written without flushes until the end (Vdbench's `-jn`):
    /// a host crash loses the journal's recent history.
    Async,
    /// `before` records durable before their data write, flushes shared.
    Group,
}

impl JournalMode {
    fn code(self) -> u8 {
        match self {
            JournalMode::Sync => 1,
            JournalMode::Async => 2,
            JournalMode::Group => 3,
        }
    }

    fn from_code(code: u8) -> Option<JournalMode> {
        [JournalMode::Sync, JournalMode::Async, JournalMode::Group].into_iter().find(|m| m.code() == code)
    }

    /// Whether the journal survives a crash of the host (power cut).
    pub fn host_crash_safe(self) -> bool {
        self != JournalMode::Async
    }
}

/// What a journal describes: the run and the region it validates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalHeader {
    pub run_id: u64,
    pub region_start: u64,
    pub key_block_bytes: u64,
    pub blocks: u64,
    pub sector_bytes: u32,
    pub target: String,
    pub mode: JournalMode,
    /// Bumped by every compaction; a record's checksum covers it, so
    /// records of an older generation never pass for current ones.
    pub generation: u64,
    /// 1 + the highest write id of a `before` record written before this
    /// start (0: none): the writes a compaction folded into the snapshot
    /// or carried. Writes with this id or later are in the records, or
    /// unknown to the journal.
    pub write_ids_end: u64,
    /// When the journal was created (ns since the Unix epoch; 0: unknown):
    /// a stamp of another run written before it is an older run's.
    pub created_ns: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JournalError {
    #[error("not an iolab validation journal (no IOLABJNL magic)")]
    NotAJournal,
    #[error("journal format version {0} is not supported (this iolab reads versions {JOURNAL_VERSION_MIN} to {JOURNAL_VERSION})")]
    Version(u32),
    #[error("the journal header is damaged (checksum mismatch)")]
    Header,
    #[error("the journal is shorter than its header and key map snapshot ({0} bytes)")]
    Truncated(usize),
    #[error("the journal header names an unknown journal mode {0}")]
    Mode(u8),
    #[error("the journal's key-map snapshot is damaged (checksum mismatch)")]
    Snapshot,
}

/// A write that was in flight when the journal ends: its blocks may hold
/// the old key or the new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingWrite {
    pub write_id: u64,
    /// (block, old key, new key)
    pub blocks: Vec<(u64, u8, u8)>,
}

/// The outcome of replaying a journal.
#[derive(Debug)]
pub struct Replay {
    pub header: JournalHeader,
    /// Keys of completed writes (pending writes keep their old keys here).
    pub keys: KeyBytes,
    pub pending: Vec<PendingWrite>,
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
    /// when the journal ends with a damaged or truncated record instead
    /// of cleanly (zeros, or what an older generation left in the slot).
    pub torn_tail: Option<(u64, &'static str)>,
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    // Invariant: callers check the length before reading.
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn checksum(buf: &[u8], crc_at: usize) -> u32 {
    let head = crc32c::crc32c(&buf[..crc_at]);
    let zeroed = crc32c::crc32c_append(head, &[0; 4]);
    crc32c::crc32c_append(zeroed, &buf[crc_at + 4..])
}

/// Bytes of the header and key-map snapshot of a journal over `blocks` key
/// blocks: where its records begin (a multiple of 4096).
pub fn start_bytes(blocks: u64) -> u64 {
    JOURNAL_HEADER_BYTES as u64 + blocks.next_multiple_of(JOURNAL_HEADER_BYTES as u64)
}

/// Bytes of each of the two slots of a journal device of `device_bytes`.
pub fn slot_bytes(device_bytes: u64) -> u64 {
    device_bytes / 2 / JOURNAL_HEADER_BYTES as u64 * JOURNAL_HEADER_BYTES as u64
}

/// The start of a journal (header and key-map snapshot) from a key map.
pub fn encode_start(header: &JournalHeader, keys: &KeyMap) -> Vec<u8> {
    debug_assert_eq!(keys.blocks(), header.blocks);
    let keys: Vec<u8> = (0..header.blocks).map(|b| keys.get(b)).collect();
    encode_start_carrying(header, &keys, &[])
}

/// The start of a journal slot: header, snapshot of `keys` (one byte per
/// block), then `carried` records (the `before` records of writes still in
/// flight at a compaction), all covered by the header's start checksum.
/// In one buffer: for small journals and tests; writers stream a start
/// with [`StartStream`].
pub fn encode_start_carrying(header: &JournalHeader, keys: &[u8], carried: &[u8]) -> Vec<u8> {
    let mut stream = StartStream::new(header, keys, carried);
    let mut buf = vec![0u8; JOURNAL_HEADER_BYTES + stream.body_bytes() as usize];
    let filled = stream.fill(&mut buf[JOURNAL_HEADER_BYTES..]);
    debug_assert_eq!(filled as u64, stream.body_bytes());
    buf[..JOURNAL_HEADER_BYTES].copy_from_slice(&stream.header());
    buf
}

/// A start produced piece by piece, so that a large key map is never
/// copied whole: first its body (the snapshot, zero-padded to a multiple
/// of 4096, then the carried records) in pieces of any size, its checksum
/// computed as they go; then the header, which holds that checksum.
pub struct StartStream<'a> {
    header: JournalHeader,
    keys: &'a [u8],
    carried: &'a [u8],
    /// Body bytes produced so far, and their crc32c.
    at: u64,
    crc: u32,
}

impl<'a> StartStream<'a> {
    pub fn new(header: &JournalHeader, keys: &'a [u8], carried: &'a [u8]) -> StartStream<'a> {
        debug_assert_eq!(keys.len() as u64, header.blocks);
        StartStream { header: header.clone(), keys, carried, at: 0, crc: 0 }
    }

    /// Bytes of the body: the padded snapshot and the carried records.
    pub fn body_bytes(&self) -> u64 {
        self.snapshot_bytes() + self.carried.len() as u64
    }

    fn snapshot_bytes(&self) -> u64 {
        start_bytes(self.header.blocks) - JOURNAL_HEADER_BYTES as u64
    }

    /// Fills the front of `buf` with the next bytes of the body; returns
    /// how many (0 once the body is complete).
    pub fn fill(&mut self, buf: &mut [u8]) -> usize {
        let (keys, snapshot) = (self.keys.len() as u64, self.snapshot_bytes());
        let mut filled = 0;
        while filled < buf.len() && self.at < self.body_bytes() {
            let room = (buf.len() - filled) as u64;
            let out = &mut buf[filled..];
            let len = if self.at < keys {
                let len = room.min(keys - self.at) as usize;
                out[..len].copy_from_slice(&self.keys[self.at as usize..][..len]);
                len
            } else if self.at < snapshot {
                let len = room.min(snapshot - self.at) as usize;
                out[..len].fill(0);
                len
            } else {
                let from = &self.carried[(self.at - snapshot) as usize..];
                let len = from.len().min(room as usize);
                out[..len].copy_from_slice(&from[..len]);
                len
            };
            self.crc = crc32c::crc32c_append(self.crc, &out[..len]);
            filled += len;
            self.at += len as u64;
        }
        filled
    }

    /// The header (4096 bytes). Call once [`StartStream::fill`] has
    /// produced the whole body: the header's start checksum covers it.
    pub fn header(&self) -> Vec<u8> {
        assert_eq!(self.at, self.body_bytes(), "the header follows the whole body");
        encode_header(&self.header, self.carried.len() as u32, self.crc)
    }
}

/// A header whose start is followed by `carried_bytes` of records and
/// whose body has crc32c `start_crc`.
fn encode_header(header: &JournalHeader, carried_bytes: u32, start_crc: u32) -> Vec<u8> {
    let mut buf = vec![0u8; JOURNAL_HEADER_BYTES];
    buf[..8].copy_from_slice(JOURNAL_MAGIC);
    buf[8..12].copy_from_slice(&JOURNAL_VERSION.to_le_bytes());
    put_u64(&mut buf, 16, header.run_id);
    put_u64(&mut buf, 24, header.region_start);
    put_u64(&mut buf, 32, header.key_block_bytes);
    put_u64(&mut buf, 40, header.blocks);
    buf[48..52].copy_from_slice(&header.sector_bytes.to_le_bytes());
    let name = &header.target.as_bytes()[..header.target.len().min(TARGET_NAME_BYTES_MAX)];
    buf[52..54].copy_from_slice(&(name.len() as u16).to_le_bytes());
    buf[54..54 + name.len()].copy_from_slice(name);
    buf[MODE_AT] = header.mode.code();
    put_u64(&mut buf, GENERATION_AT, header.generation);
    put_u64(&mut buf, WRITE_IDS_END_AT, header.write_ids_end);
    put_u64(&mut buf, CREATED_AT, header.created_ns);
    buf[CARRIED_AT..CARRIED_AT + 4].copy_from_slice(&carried_bytes.to_le_bytes());
    buf[START_CRC_AT..START_CRC_AT + 4].copy_from_slice(&start_crc.to_le_bytes());
    let crc = checksum(&buf, 12);
    buf[12..16].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// A `before` record of generation `generation`: write `write_id` will
/// give these blocks these keys.
pub fn encode_before(generation: u64, write_id: u64, entries: &[(u64, u8)]) -> Vec<u8> {
    let mut buf = Vec::new();
    append_record(&mut buf, generation, 1, write_id, entries);
    buf
}

/// An `after` record of generation `generation`: write `write_id` completed.
pub fn encode_after(generation: u64, write_id: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    append_record(&mut buf, generation, 2, write_id, &[]);
    buf
}

/// Bytes of a record with `entries` entries (0 for an `after` record).
pub fn record_bytes(entries: usize) -> u64 {
    (RECORD_HEADER_BYTES + ENTRY_BYTES * entries) as u64
}

/// Appends a `before` record to `out`.
pub fn append_before(out: &mut Vec<u8>, generation: u64, write_id: u64, entries: &[(u64, u8)]) {
    append_record(out, generation, 1, write_id, entries);
}

/// Appends an `after` record to `out`.
pub fn append_after(out: &mut Vec<u8>, generation: u64, write_id: u64) {
    append_record(out, generation, 2, write_id, &[]);
}

fn record_checksum(generation: u64, record: &[u8]) -> u32 {
    let seed = crc32c::crc32c(&generation.to_le_bytes());
    let head = crc32c::crc32c_append(seed, &record[..8]);
    let zeroed = crc32c::crc32c_append(head, &[0; 4]);
    crc32c::crc32c_append(zeroed, &record[12..])
}

fn append_record(out: &mut Vec<u8>, generation: u64, kind: u8, write_id: u64, entries: &[(u64, u8)]) {
    let at0 = out.len();
    let len = RECORD_HEADER_BYTES + entries.len() * ENTRY_BYTES;
    out.resize(at0 + len, 0);
    let buf = &mut out[at0..];
    buf[..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
    buf[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    buf[12] = kind;
    put_u64(buf, 16, write_id);
    for (i, (block, key)) in entries.iter().enumerate() {
        let at = RECORD_HEADER_BYTES + i * ENTRY_BYTES;
        put_u64(buf, at, *block);
        buf[at + 8] = *key;
    }
    let crc = record_checksum(generation, buf);
    buf[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// The header at the start of a slot (its first [`JOURNAL_HEADER_BYTES`]),
/// checked alone: what the run was, without replaying it.
pub fn read_header(buf: &[u8]) -> Result<JournalHeader, JournalError> {
    decode_header(buf)
}

fn decode_header(buf: &[u8]) -> Result<JournalHeader, JournalError> {
    if buf.len() < JOURNAL_HEADER_BYTES {
        return Err(if buf.starts_with(JOURNAL_MAGIC) {
            JournalError::Truncated(buf.len())
        } else {
            JournalError::NotAJournal
        });
    }
    if &buf[..8] != JOURNAL_MAGIC {
        return Err(JournalError::NotAJournal);
    }
    let version = u32_at(buf, 8);
    if !(JOURNAL_VERSION_MIN..=JOURNAL_VERSION).contains(&version) {
        return Err(JournalError::Version(version));
    }
    let head = &buf[..JOURNAL_HEADER_BYTES];
    if u32_at(head, 12) != checksum(head, 12) {
        return Err(JournalError::Header);
    }
    let name_len = (u16::from_le_bytes([head[52], head[53]]) as usize).min(TARGET_NAME_BYTES_MAX);
    let mode = JournalMode::from_code(head[MODE_AT]).ok_or(JournalError::Mode(head[MODE_AT]))?;
    Ok(JournalHeader {
        run_id: u64_at(head, 16),
        region_start: u64_at(head, 24),
        key_block_bytes: u64_at(head, 32),
        blocks: u64_at(head, 40),
        sector_bytes: u32_at(head, 48),
        target: String::from_utf8_lossy(&head[54..54 + name_len]).into_owned(),
        mode,
        generation: u64_at(head, GENERATION_AT),
        // Reserved (zero) before version 4.
        write_ids_end: if version >= ORDERED_WRITE_IDS_VERSION { u64_at(head, WRITE_IDS_END_AT) } else { 0 },
        created_ns: if version >= ORDERED_WRITE_IDS_VERSION { u64_at(head, CREATED_AT) } else { 0 },
    })
}

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

/// Replays a whole journal device held in memory: the slot with the newest
/// valid start, its keys in memory.
pub fn replay(buf: &[u8]) -> Result<Replay, JournalError> {
    replay_from(&mut SliceSource(buf), |blocks| Ok(KeyBytes::from(vec![0; blocks as usize])))
}

/// Replays the journal `source` reads: the slot whose header and start
/// checksums hold with the higher generation. `zeroed_keys(blocks)` makes
/// the store the keys are read into (memory or a mapped file), once the
/// header has shown the slot holds that many.
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
    let mut first_error = None;
    for (at, len) in slots {
        match read_start(source, at, len)? {
            Ok(start) => starts.push(start),
            Err(e) => _ = first_error.get_or_insert(e),
        }
    }
    // Newest first; on a tie, the first slot (a stable sort).
    starts.sort_by_key(|s| std::cmp::Reverse(s.header.generation));
    let mut keys: Option<KeyBytes> = None;
    for start in starts {
        let mut store = match keys.take() {
            Some(k) if k.len() as u64 == start.header.blocks => k,
            _ => zeroed_keys(start.header.blocks)?,
        };
        if read_snapshot(source, &start, &mut store)? {
            return replay_records(source, start, store);
        }
        first_error.get_or_insert(JournalError::Snapshot);
        keys = Some(store);
    }
    Err(first_error.unwrap_or(JournalError::NotAJournal).into())
}

/// A slot's header, checked against the slot's size.
struct Start {
    header: JournalHeader,
    /// The slot's place on the device.
    at: u64,
    len: u64,
    records_at: u64,
    carried: u64,
    start_crc: u32,
    /// Whether write ids follow the order of the records (version 4 on).
    ordered_ids: bool,
}

/// Reads and checks the header of the slot at `at`.
fn read_start<S: JournalSource>(
    source: &mut S,
    at: u64,
    len: u64,
) -> Result<Result<Start, JournalError>, S::Error> {
    let mut buf = vec![0u8; (len as usize).min(JOURNAL_HEADER_BYTES)];
    source.read_at(&mut buf, at)?;
    let header = match decode_header(&buf) {
        Ok(h) => h,
        Err(e) => return Ok(Err(e)),
    };
    if header.blocks > len {
        return Ok(Err(JournalError::Truncated(len as usize)));
    }
    let records_at = start_bytes(header.blocks);
    let carried = u64::from(u32_at(&buf, CARRIED_AT));
    if len < records_at.saturating_add(carried) {
        return Ok(Err(JournalError::Truncated(len as usize)));
    }
    let ordered_ids = u32_at(&buf, 8) >= ORDERED_WRITE_IDS_VERSION;
    let start_crc = u32_at(&buf, START_CRC_AT);
    Ok(Ok(Start { header, at, len, records_at, carried, start_crc, ordered_ids }))
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
/// the snapshot in `keys`.
fn replay_records<S: JournalSource>(
    source: &mut S,
    start: Start,
    keys: KeyBytes,
) -> Result<Replay, S::Error> {
    let region = start.len - start.records_at;
    let mut window = RecordWindow { base: start.at + start.records_at, region, from: 0, bytes: Vec::new() };
    let header = start.header;
    let mut state = KeyState::new(keys);
    let mut at = 0;
    let mut records = 0;
    let mut torn_tail = None;
    let mut write_ids_end = header.write_ids_end;
    while at < region {
        let Some(Record { kind, write_id, entries, len }) = window.record_at(source, at, &header)? else {
            if !window.clean_end(source, at, &header)? {
                torn_tail = Some((start.at + start.records_at + at, "damaged or truncated record"));
            }
            break;
        };
        records += 1;
        at += len as u64;
        match kind {
            1 => {
                write_ids_end = write_ids_end.max(write_id.saturating_add(1));
                state.before(write_id, entries)
            }
            _ => state.after(write_id),
        }
    }
    // Without ordered ids (before version 4), only a journal never
    // compacted lists every write it knows of in its records.
    let ahead_from = (start.ordered_ids || header.generation == 0).then_some(write_ids_end);
    let pending = state.pending();
    Ok(Replay { header, keys: state.keys, pending, records, ahead_from, torn_tail })
}

/// The records region of a slot, read [`RECORDS_WINDOW_BYTES`] at a time
/// (more when one record is longer), so replay's memory does not grow
/// with the slot.
struct RecordWindow {
    /// Where the region starts on the device, and its length.
    base: u64,
    region: u64,
    /// The region offset of `bytes[0]`.
    from: u64,
    bytes: Vec<u8>,
}

/// Bytes of the records region replay reads at once.
pub const RECORDS_WINDOW_BYTES: usize = 1 << 20;

/// The smallest unit a journal is written in (a sector): a writer pads
/// every write with zeros to a whole number of them.
const UNIT_BYTES_MIN: u64 = 512;

/// How many older generations a record after a clean end is tried
/// against before it is called damaged.
const OLDER_GENERATIONS_CHECKED: u64 = 8;

impl RecordWindow {
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

    /// The record at region offset `at`, if a valid one is there.
    fn record_at<S: JournalSource>(
        &mut self,
        source: &mut S,
        at: u64,
        header: &JournalHeader,
    ) -> Result<Option<Record>, S::Error> {
        self.cover(source, at, RECORD_HEADER_BYTES as u64)?;
        let offset = (at - self.from) as usize;
        let head = &self.bytes[offset..];
        if head.len() >= 8 && u32_at(head, 0) == RECORD_MAGIC {
            // A record longer than what the window holds past `at` (no
            // valid one lists more entries than there are blocks).
            let longest = RECORD_HEADER_BYTES as u64 + ENTRY_BYTES as u64 * header.blocks;
            self.cover(source, at, u64::from(u32_at(head, 4)).min(longest))?;
        }
        let offset = (at - self.from) as usize;
        Ok(decode_record(&self.bytes[offset..], header))
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
        let head = &self.bytes[offset..];
        if head.len() < 4 || u32_at(head, 0) != RECORD_MAGIC {
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

/// Replay's state: the keys of completed writes and the writes in flight,
/// advanced record by record. The journal writer keeps one too, from which
/// it writes a compacted start.
#[derive(Debug, Default)]
pub struct KeyState {
    keys: KeyBytes,
    /// In flight: write id -> its entries.
    inflight: BTreeMap<u64, Vec<(u64, u8)>>,
}

impl KeyState {
    /// Starts from a snapshot: one key per block.
    pub fn new(keys: KeyBytes) -> KeyState {
        KeyState { keys, inflight: BTreeMap::new() }
    }

    /// The keys of completed writes (pending writes keep their old keys).
    pub fn keys(&self) -> &KeyBytes {
        &self.keys
    }

    /// Applies a `before` record. An earlier write still in flight on one
    /// of its blocks stays in flight: without its `after` record nothing
    /// says it reached stable storage, so the block may hold any key of
    /// the chain (see [`KeyState::pending`]).
    pub fn before(&mut self, write_id: u64, entries: Vec<(u64, u8)>) {
        self.inflight.insert(write_id, entries);
    }

    /// Applies an `after` record. Writes to one block complete in order, so
    /// the block's key becomes this write's.
    pub fn after(&mut self, write_id: u64) {
        if let Some(entries) = self.inflight.remove(&write_id) {
            for (block, key) in entries {
                self.keys[block as usize] = key;
            }
        }
    }

    /// The writes in flight, by write id, with their entries.
    pub fn inflight(&self) -> impl Iterator<Item = (u64, &[(u64, u8)])> {
        self.inflight.iter().map(|(id, e)| (*id, e.as_slice()))
    }

    /// The writes in flight, by write id, each block with its old key (of
    /// its last completed write) and new key. A block several writes in
    /// flight name forms a chain: it may hold the old key or any key up
    /// to the newest write's (`Expect::OldOrNew` of the last one).
    pub fn pending(&self) -> Vec<PendingWrite> {
        self.inflight
            .iter()
            .map(|(write_id, entries)| PendingWrite {
                write_id: *write_id,
                blocks: entries.iter().map(|(b, new)| (*b, self.keys[*b as usize], *new)).collect(),
            })
            .collect()
    }
}

/// A decoded record.
struct Record {
    kind: u8,
    write_id: u64,
    entries: Vec<(u64, u8)>,
    len: usize,
}

/// One record of the header's generation from the start of `buf`, if a
/// valid one is there.
fn decode_record(buf: &[u8], header: &JournalHeader) -> Option<Record> {
    let blocks = header.blocks;
    if buf.len() < RECORD_HEADER_BYTES || u32_at(buf, 0) != RECORD_MAGIC {
        return None;
    }
    let len = u32_at(buf, 4) as usize;
    if len < RECORD_HEADER_BYTES || len > buf.len() || (len - RECORD_HEADER_BYTES) % ENTRY_BYTES != 0 {
        return None;
    }
    let record = &buf[..len];
    if u32_at(record, 8) != record_checksum(header.generation, record) {
        return None;
    }
    let kind = record[12];
    let entries: Vec<(u64, u8)> =
        record[RECORD_HEADER_BYTES..].chunks_exact(ENTRY_BYTES).map(|e| (u64_at(e, 0), e[8])).collect();
    let valid = matches!((kind, entries.is_empty()), (1, false) | (2, true))
        && entries.iter().all(|(b, k)| *b < blocks && *k != 0);
    valid.then(|| Record { kind, write_id: u64_at(record, 16), entries, len })
}
