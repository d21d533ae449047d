//! The journal's bytes: its header, key-map snapshot and records, encoded
//! and decoded, every header field checked against its documented bounds
//! (docs/formats.md, "Validation journal") before any arithmetic on it.

use codec::{Frame, LeReader, LeWriter, OutOfBounds};

use crate::keys::KeyMap;

pub const JOURNAL_MAGIC: &[u8; 8] = b"IOLABJNL";
/// Version 6 adds the run's duplicate ratio (`--dedupe-ratio` under
/// validation), without which its duplicate units cannot be checked.
pub const JOURNAL_VERSION: u32 = 6;
/// Version 5 journals read as 6 without duplicates. Version 5 added mark
/// records (kind 3), which say how much of the slot's records were durable
/// when they were written, so that replay tells damage from a torn tail.
/// Versions 2 to 4 journals read the same, without mark records; before
/// version 4, without `write_ids_end` and `created_ns` (read as 0) and
/// without write ids in record order; in version 2, a `before` on a block
/// with a write in flight also proved that write complete, which version
/// 3 no longer promises (replay of either accepts the whole chain).
pub const JOURNAL_VERSION_MIN: u32 = 2;
/// The first version whose write ids follow the order of its records.
pub(super) const ORDERED_WRITE_IDS_VERSION: u32 = 4;
/// The first version with mark records.
pub(super) const MARKS_VERSION: u32 = 5;
/// The first version with the duplicate ratio.
const DUPLICATES_VERSION: u32 = 6;
const SECTOR_BYTES_AT: usize = 48;
const KEY_BLOCK_BYTES_AT: usize = 32;
const BLOCKS_AT: usize = 40;
const REGION_START_AT: usize = 24;
const NAME_LEN_AT: usize = 52;
const MODE_AT: usize = 54 + TARGET_NAME_BYTES_MAX;
const GENERATION_AT: usize = 312;
const CARRIED_AT: usize = 320;
const START_CRC_AT: usize = 324;
const WRITE_IDS_END_AT: usize = 328;
const CREATED_AT: usize = 336;
const DUPLICATES_AT: usize = 344;
pub const JOURNAL_HEADER_BYTES: usize = 4096;
pub(super) const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"JREC");
/// A header's checksum: at byte 12, over the header with the field zero.
const HEADER_FRAME: Frame = Frame::zeroed(12);
/// A record's checksum: at byte 8, over the generation (a u64, not stored
/// in the record) and then the record with the field zero.
const RECORD_FRAME: Frame = Frame::zeroed(8);
pub(super) const RECORD_HEADER_BYTES: usize = 24;
pub(super) const ENTRY_BYTES: usize = 9;
/// The most entries a `before` record holds: a write of at most 64 MiB
/// in key blocks of at least 512 bytes.
pub(super) const RECORD_ENTRIES_MAX: usize = 128 << 10;
/// Longest target name the header holds.
pub const TARGET_NAME_BYTES_MAX: usize = 256;
/// Sector sizes a header may name: a power of two in this range.
pub const SECTOR_BYTES_MIN: u32 = 512;
pub const SECTOR_BYTES_MAX: u32 = 64 << 10;
/// The largest key block (the smallest transfer of a validated run, which
/// is at most the engine's largest transfer).
pub const KEY_BLOCK_BYTES_MAX: u64 = 64 << 20;

/// Record kinds.
pub(super) const KIND_BEFORE: u8 = 1;
pub(super) const KIND_AFTER: u8 = 2;
pub(super) const KIND_MARK: u8 = 3;

/// How the journal's records were made durable, which says what a crash
/// can have cost it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// The run's duplicate units (`--dedupe-ratio`; its key block is the
    /// unit), without which they cannot be checked.
    pub duplicates: Option<crate::Duplicates>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JournalError {
    #[error("not an iolab validation journal (no IOLABJNL magic)")]
    NotAJournal,
    #[error("journal format version {0} is not supported (this iolab reads versions {JOURNAL_VERSION_MIN} to {JOURNAL_VERSION})")]
    Version(u32),
    #[error("the journal header at byte {0} is damaged (checksum mismatch)")]
    Header(u64),
    #[error("the journal is shorter than its header and key map snapshot ({0} bytes)")]
    Truncated(usize),
    #[error(
        "the journal header at byte {header_at} is damaged: {field} (byte {}) is {value}, {bound}",
        header_at + *offset as u64
    )]
    Field { header_at: u64, offset: usize, field: &'static str, value: u64, bound: &'static str },
    #[error(
        "the journal's key-map snapshot at byte {0} is damaged (checksum mismatch) and no record follows it \
         to show it was complete: nothing can be checked against it"
    )]
    Snapshot(u64),
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
        .put_u64(DUPLICATES_AT, header.duplicates.map_or(0, |d| d.ratio().to_bits()))
        .put_u32(CARRIED_AT, carried_bytes)
        .put_u32(START_CRC_AT, start_crc);
    HEADER_FRAME.seal(&[], &mut buf);
    buf
}

/// A `before` record of generation `generation`: write `write_id` will
/// give these blocks these keys.
pub fn encode_before(generation: u64, write_id: u64, entries: &[(u64, u8)]) -> Vec<u8> {
    let mut buf = Vec::new();
    append_record(&mut buf, generation, KIND_BEFORE, write_id, entries);
    buf
}

/// An `after` record of generation `generation`: write `write_id` completed.
pub fn encode_after(generation: u64, write_id: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    append_record(&mut buf, generation, KIND_AFTER, write_id, &[]);
    buf
}

/// Bytes of a record with `entries` entries (0 for an `after` record).
pub fn record_bytes(entries: usize) -> u64 {
    (RECORD_HEADER_BYTES + ENTRY_BYTES * entries) as u64
}

/// Appends a `before` record to `out`.
pub fn append_before(out: &mut Vec<u8>, generation: u64, write_id: u64, entries: &[(u64, u8)]) {
    append_record(out, generation, KIND_BEFORE, write_id, entries);
}

/// Appends an `after` record to `out`.
pub fn append_after(out: &mut Vec<u8>, generation: u64, write_id: u64) {
    append_record(out, generation, KIND_AFTER, write_id, &[]);
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

/// Appends a mark record: every byte of the slot's records before
/// `durable_end` (counted from the first record) was durable when it was
/// written.
pub fn append_mark(out: &mut Vec<u8>, generation: u64, durable_end: u64) {
    append_record(out, generation, KIND_MARK, durable_end, &[]);
}

/// The header at the start of a slot (its first [`JOURNAL_HEADER_BYTES`]),
/// checked alone: what the run was, without replaying it.
pub fn read_header(buf: &[u8]) -> Result<JournalHeader, JournalError> {
    decode_header(buf, 0).map(|(header, _)| header)
}

/// A header's version beside its fields.
pub(super) fn decode_header(buf: &[u8], at: u64) -> Result<(JournalHeader, u32), JournalError> {
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
        return Err(JournalError::Header(at));
    }
    let geometry = Geometry::read(&head, at)?;
    let name_len = head.u16(NAME_LEN_AT)?;
    if usize::from(name_len) > TARGET_NAME_BYTES_MAX {
        return Err(field(at, NAME_LEN_AT, "target_name_length", name_len.into(), "past its 256 bytes"));
    }
    let mode = head.u8(MODE_AT)?;
    let mode = JournalMode::from_code(mode)
        .ok_or_else(|| field(at, MODE_AT, "mode", mode.into(), "not 1 (sync), 2 (async) or 3 (group)"))?;
    // Reserved (zero) before version 4.
    let since_4 = |at| if version >= ORDERED_WRITE_IDS_VERSION { head.u64(at) } else { Ok(0) };
    let ratio = if version >= DUPLICATES_VERSION { head.u64(DUPLICATES_AT)? } else { 0 };
    let duplicates = match ratio {
        0 => None,
        bits => Some(crate::Duplicates::new(f64::from_bits(bits)).ok_or_else(|| {
            field(
                at,
                DUPLICATES_AT,
                "duplicate_ratio",
                bits,
                "not the bits of a ratio of 1 or more (or 0: none)",
            )
        })?),
    };
    let header = JournalHeader {
        run_id: head.u64(16)?,
        region_start: geometry.region_start,
        key_block_bytes: geometry.key_block_bytes,
        blocks: geometry.blocks,
        sector_bytes: geometry.sector_bytes,
        target: String::from_utf8_lossy(head.bytes(54, name_len.into())?).into_owned(),
        mode,
        generation: head.u64(GENERATION_AT)?,
        write_ids_end: since_4(WRITE_IDS_END_AT)?,
        created_ns: since_4(CREATED_AT)?,
        duplicates,
    };
    Ok((header, version))
}

/// The header's fields that size the target's region, each within its
/// bounds, and the region's end within a u64.
struct Geometry {
    sector_bytes: u32,
    key_block_bytes: u64,
    blocks: u64,
    region_start: u64,
}

impl Geometry {
    fn read(head: &LeReader<'_>, at: u64) -> Result<Geometry, JournalError> {
        let sector_bytes = head.u32(SECTOR_BYTES_AT)?;
        if !sector_bytes.is_power_of_two() || !(SECTOR_BYTES_MIN..=SECTOR_BYTES_MAX).contains(&sector_bytes) {
            let bound = "not a power of two from 512 to 65536";
            return Err(field(at, SECTOR_BYTES_AT, "sector_bytes", sector_bytes.into(), bound));
        }
        let key_block_bytes = head.u64(KEY_BLOCK_BYTES_AT)?;
        if key_block_bytes == 0
            || key_block_bytes % u64::from(sector_bytes) != 0
            || key_block_bytes > KEY_BLOCK_BYTES_MAX
        {
            let bound = "not a whole number of sectors up to 64 MiB";
            return Err(field(at, KEY_BLOCK_BYTES_AT, "key_block_bytes", key_block_bytes, bound));
        }
        let blocks = head.u64(BLOCKS_AT)?;
        if blocks == 0 {
            return Err(field(at, BLOCKS_AT, "blocks", 0, "a validated region holds at least one key block"));
        }
        let region_start = head.u64(REGION_START_AT)?;
        if region_start % u64::from(sector_bytes) != 0 {
            let bound = "not on a sector boundary";
            return Err(field(at, REGION_START_AT, "region_start", region_start, bound));
        }
        let bound = "the region it names ends past 2^64 bytes";
        let Some(len) = blocks.checked_mul(key_block_bytes) else {
            return Err(field(at, BLOCKS_AT, "blocks", blocks, bound));
        };
        if len.checked_add(region_start).is_none() {
            return Err(field(at, REGION_START_AT, "region_start", region_start, bound));
        }
        Ok(Geometry { sector_bytes, key_block_bytes, blocks, region_start })
    }
}

fn field(
    header_at: u64,
    offset: usize,
    field: &'static str,
    value: u64,
    bound: &'static str,
) -> JournalError {
    JournalError::Field { header_at, offset, field, value, bound }
}

/// The header's start fields: the bytes of records carried with the
/// start, and the checksum of the snapshot and those records.
pub(super) fn start_fields(buf: &[u8]) -> Result<(u64, u32), JournalError> {
    let r = LeReader::new(buf);
    Ok((u64::from(r.u32(CARRIED_AT)?), r.u32(START_CRC_AT)?))
}

/// A decoded record.
pub(super) struct Record {
    pub kind: u8,
    /// A `before` or `after` record's write id; a mark's durable end.
    pub write_id: u64,
    pub entries: Vec<(u64, u8)>,
    pub len: usize,
}

/// One record of the header's generation from the start of `buf`, if a
/// valid one is there: mark records only from version `marks` on.
pub(super) fn decode_record(buf: &[u8], header: &JournalHeader, marks: bool) -> Option<Record> {
    let r = LeReader::new(buf);
    if buf.len() < RECORD_HEADER_BYTES || r.u32(0).ok()? != RECORD_MAGIC {
        return None;
    }
    let len = r.u32(4).ok()? as usize;
    if len < RECORD_HEADER_BYTES
        || len > buf.len()
        || (len - RECORD_HEADER_BYTES) % ENTRY_BYTES != 0
        || (len - RECORD_HEADER_BYTES) / ENTRY_BYTES > RECORD_ENTRIES_MAX
    {
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
    let valid = match kind {
        KIND_BEFORE => !entries.is_empty(),
        KIND_AFTER => entries.is_empty(),
        KIND_MARK => marks && entries.is_empty(),
        _ => false,
    };
    let valid = valid && entries.iter().all(|(b, k)| *b < header.blocks && *k != 0);
    valid.then_some(Record { kind, write_id, entries, len })
}
