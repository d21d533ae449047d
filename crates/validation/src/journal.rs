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

use codec::{Frame, LeReader, LeWriter, OutOfBounds};
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
/// A header's checksum: at byte 12, over the header with the field zero.
const HEADER_FRAME: Frame = Frame::zeroed(12);
/// A record's checksum: at byte 8, over the generation (a u64, not stored
/// in the record) and then the record with the field zero.
const RECORD_FRAME: Frame = Frame::zeroed(8);
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

/// A field past the end of what was read: the journal is cut short.
impl From<OutOfBounds> for JournalError {
    fn from(e: OutOfBounds) -> JournalError {
        JournalError::Truncated(e.size)
    }
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
    let name = &header.target.as_bytes()[..header.target.len().min(TARGET_NAME_BYTES_MAX)];
    LeWriter::new(&mut buf)
        .put_bytes(0, JOURNAL_MAGIC)
        .put_u32(8, JOURNAL_VERSION)
        .put_u64(16, header.run_id)
        .put_u64(24, header.region_start)
        .put_u64(32, header.key_block_bytes)
        .put_u64(40, header.blocks)
        .put_u32(48, header.sector_bytes)
        .put_u16(52, name.len() as u16)
        .put_bytes(54, name)
        .put_u8(MODE_AT, header.mode.code())
        .put_u64(GENERATION_AT, header.generation)
        .put_u64(WRITE_IDS_END_AT, header.write_ids_end)
        .put_u64(CREATED_AT, header.created_ns)
        .put_u32(CARRIED_AT, carried_bytes)
        .put_u32(START_CRC_AT, start_crc);
    HEADER_FRAME.seal(&[], &mut buf);
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

fn append_record(out: &mut Vec<u8>, generation: u64, kind: u8, write_id: u64, entries: &[(u64, u8)]) {
    let at0 = out.len();
    let len = RECORD_HEADER_BYTES + entries.len() * ENTRY_BYTES;
    out.resize(at0 + len, 0);
    let buf = &mut out[at0..];
    let mut w = LeWriter::new(buf);
    w.put_u32(0, RECORD_MAGIC).put_u32(4, len as u32).put_u8(12, kind).put_u64(16, write_id);
    for (i, (block, key)) in entries.iter().enumerate() {
        let at = RECORD_HEADER_BYTES + i * ENTRY_BYTES;
        w.put_u64(at, *block).put_u8(at + 8, *key);
    }
    RECORD_FRAME.seal(&generation.to_le_bytes(), buf);
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
    let head = LeReader::new(&buf[..JOURNAL_HEADER_BYTES]);
    let version = head.u32(8)?;
    if !(JOURNAL_VERSION_MIN..=JOURNAL_VERSION).contains(&version) {
        return Err(JournalError::Version(version));
    }
    if HEADER_FRAME.verify(&[], &buf[..JOURNAL_HEADER_BYTES]).is_err() {
        return Err(JournalError::Header);
    }
    let name_len = (head.u16(52)? as usize).min(TARGET_NAME_BYTES_MAX);
    let mode = head.u8(MODE_AT)?;
    let mode = JournalMode::from_code(mode).ok_or(JournalError::Mode(mode))?;
    // Reserved (zero) before version 4.
    let since_4 = |at| if version >= ORDERED_WRITE_IDS_VERSION { head.u64(at) } else { Ok(0) };
    Ok(JournalHeader {
        run_id: head.u64(16)?,
        region_start: head.u64(24)?,
        key_block_bytes: head.u64(32)?,
        blocks: head.u64(40)?,
        sector_bytes: head.u32(48)?,
        target: String::from_utf8_lossy(head.bytes(54, name_len)?).into_owned(),
        mode,
        generation: head.u64(GENERATION_AT)?,
        write_ids_end: since_4(WRITE_IDS_END_AT)?,
        created_ns: since_4(CREATED_AT)?,
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
    Ok(check_start(&buf, at, len))
}

/// The header `buf` of the slot at `at`, `len` bytes long, checked.
fn check_start(buf: &[u8], at: u64, len: u64) -> Result<Start, JournalError> {
    let header = decode_header(buf)?;
    if header.blocks > len {
        return Err(JournalError::Truncated(len as usize));
    }
    let records_at = start_bytes(header.blocks);
    let r = LeReader::new(buf);
    let carried = u64::from(r.u32(CARRIED_AT)?);
    if len < records_at.saturating_add(carried) {
        return Err(JournalError::Truncated(len as usize));
    }
    let ordered_ids = r.u32(8)? >= ORDERED_WRITE_IDS_VERSION;
    let start_crc = r.u32(START_CRC_AT)?;
    Ok(Start { header, at, len, records_at, carried, start_crc, ordered_ids })
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
        let head = LeReader::new(&self.bytes[offset..]);
        if let (Ok(RECORD_MAGIC), Ok(len)) = (head.u32(0), head.u32(4)) {
            // A record longer than what the window holds past `at` (no
            // valid one lists more entries than there are blocks).
            let longest = RECORD_HEADER_BYTES as u64 + ENTRY_BYTES as u64 * header.blocks;
            self.cover(source, at, u64::from(len).min(longest))?;
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
        if LeReader::new(&self.bytes[offset..]).u32(0) != Ok(RECORD_MAGIC) {
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
    let r = LeReader::new(buf);
    if buf.len() < RECORD_HEADER_BYTES || r.u32(0).ok()? != RECORD_MAGIC {
        return None;
    }
    let len = r.u32(4).ok()? as usize;
    if len < RECORD_HEADER_BYTES || len > buf.len() || (len - RECORD_HEADER_BYTES) % ENTRY_BYTES != 0 {
        return None;
    }
    let record = &buf[..len];
    RECORD_FRAME.verify(&header.generation.to_le_bytes(), record).ok()?;
    let (kind, write_id) = (r.u8(12).ok()?, r.u64(16).ok()?);
    let entries = record[RECORD_HEADER_BYTES..].chunks_exact(ENTRY_BYTES).map(|e| {
        let e = LeReader::new(e);
        Some((e.u64(0).ok()?, e.u8(8).ok()?))
    });
    let entries: Vec<(u64, u8)> = entries.collect::<Option<_>>()?;
    let valid = matches!((kind, entries.is_empty()), (1, false) | (2, true))
        && entries.iter().all(|(b, k)| *b < header.blocks && *k != 0);
    valid.then_some(Record { kind, write_id, entries, len })
}
