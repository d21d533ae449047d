//! The log's on-disk format (docs/formats.md, "Block log"): two commit
//! header slots, then a circular area of records addressed by log sequence
//! numbers (LSNs, byte positions that only grow). Every structure carries a
//! crc32c; records also carry the log's id and their own LSN, so a stale
//! record left by an earlier lap of the circle or an earlier log never
//! passes for a current one.

use crate::LogError;

pub const HEADER_MAGIC: &[u8; 8] = device::signature::IOLAB_LOG_MAGIC;
pub const RECORD_MAGIC: &[u8; 8] = b"IOLBREC1";
pub const VERSION: u32 = 1;
/// Each header slot is this long; the circular area starts after both.
pub const SLOT_BYTES: u64 = 4096;
pub const AREA_START: u64 = 2 * SLOT_BYTES;
/// Bytes of a header that the checksum covers (the crc follows them).
const HEADER_FIELDS: usize = 88;
/// The fixed part of a record header; entries follow it.
pub const RECORD_FIXED: usize = 64;
pub const ENTRY_BYTES: usize = 16;
/// Bound on the entries of one record, so a record header is at most 4 KiB.
pub const MAX_ENTRIES: usize = (4096 - RECORD_FIXED) / ENTRY_BYTES;
/// Bound on the payload of one block record; larger commits use several.
pub const MAX_RECORD_DATA: usize = 1 << 20;
/// The smallest circular area accepted: room for a few full records.
pub const MIN_AREA_BYTES: u64 = 256 * 1024;

/// Header flag: the log lives on a device of its own.
pub const FLAG_SEPARATE: u32 = 1;
/// Header flag: a stripe log, whose records name several home devices
/// (their count is in the data-bytes field).
pub const FLAG_STRIPE: u32 = 2;

/// The commit header: which part of the circle holds committed records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub sector_bytes: u32,
    pub flags: u32,
    /// Grows by one at every header write; the slot is `generation % 2`.
    pub generation: u64,
    /// Random id of this log, stamped into every record.
    pub log_id: u64,
    /// Bytes of the whole log region: both slots and the circular area.
    pub log_bytes: u64,
    /// Where the protected data starts on its device, and its size.
    pub data_offset: u64,
    pub data_bytes: u64,
    /// Records between `tail` and `head` (LSNs) are committed and may not
    /// be home yet; everything before `tail` is home and durable.
    pub tail: u64,
    pub head: u64,
    /// Commits ever made, for reports.
    pub commits: u64,
}

impl Header {
    pub fn area_bytes(&self) -> u64 {
        self.log_bytes - AREA_START
    }

    pub fn slot(&self) -> u64 {
        self.generation % 2
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut block = vec![0u8; SLOT_BYTES as usize];
        block[0..8].copy_from_slice(HEADER_MAGIC);
        put_u32(&mut block, 8, VERSION);
        put_u32(&mut block, 12, self.sector_bytes);
        put_u64(&mut block, 16, self.generation);
        put_u64(&mut block, 24, self.log_id);
        put_u64(&mut block, 32, self.log_bytes);
        put_u64(&mut block, 40, self.data_offset);
        put_u64(&mut block, 48, self.data_bytes);
        put_u64(&mut block, 56, self.tail);
        put_u64(&mut block, 64, self.head);
        put_u64(&mut block, 72, self.commits);
        put_u32(&mut block, 80, self.flags);
        let crc = crc32c::crc32c(&block[..HEADER_FIELDS]);
        put_u32(&mut block, HEADER_FIELDS, crc);
        block
    }

    /// Decodes one slot; `None` when it holds no valid header (never
    /// written, torn, or another format).
    pub fn decode(block: &[u8]) -> Result<Option<Header>, LogError> {
        if block.len() < HEADER_FIELDS + 4 || &block[0..8] != HEADER_MAGIC {
            return Ok(None);
        }
        if get_u32(block, HEADER_FIELDS) != crc32c::crc32c(&block[..HEADER_FIELDS]) {
            return Ok(None);
        }
        let version = get_u32(block, 8);
        if version != VERSION {
            return Err(LogError::Version { found: version, supported: VERSION });
        }
        let header = Header {
            sector_bytes: get_u32(block, 12),
            generation: get_u64(block, 16),
            log_id: get_u64(block, 24),
            log_bytes: get_u64(block, 32),
            data_offset: get_u64(block, 40),
            data_bytes: get_u64(block, 48),
            tail: get_u64(block, 56),
            head: get_u64(block, 64),
            commits: get_u64(block, 72),
            flags: get_u32(block, 80),
        };
        let sane = header.log_bytes >= AREA_START + MIN_AREA_BYTES
            && header.tail <= header.head
            && header.head - header.tail <= header.area_bytes()
            && header.sector_bytes.is_power_of_two()
            && header.sector_bytes >= 512;
        Ok(sane.then_some(header))
    }
}

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// Extents followed by full copies of their data.
    Blocks = 1,
    /// Extents whose earlier logged copies must not be replayed.
    Revoke = 2,
}

/// Record flag: the last record of a commit.
pub const RECORD_LAST: u32 = 1;

/// A run of `sectors` sectors starting at sector `sector` of home device
/// `device` (always 0 for a logged device; a stripe log has several).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub sector: u64,
    pub sectors: u32,
    pub device: u32,
}

/// A decoded record header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub kind: RecordKind,
    pub flags: u32,
    pub lsn: u64,
    pub commit: u64,
    /// Bytes of the header (fixed part and entries), padded to a sector.
    pub header_bytes: u64,
    /// Bytes of the whole record: header and payload, padded to a sector.
    pub total_bytes: u64,
    pub payload_crc: u32,
    pub extents: Vec<Extent>,
}

/// Header bytes of a record with `entries` entries, padded to a sector.
pub fn record_header_bytes(entries: usize, sector_bytes: u32) -> u64 {
    ((RECORD_FIXED + entries * ENTRY_BYTES) as u64).next_multiple_of(u64::from(sector_bytes))
}

/// Which log, position and commit a record belongs to.
#[derive(Clone, Copy, Debug)]
pub struct RecordPlace {
    pub log_id: u64,
    pub lsn: u64,
    pub commit: u64,
}

/// Encodes a whole record: header, entries and payload, padded to a sector.
pub fn encode_record(
    kind: RecordKind,
    flags: u32,
    place: RecordPlace,
    extents: &[Extent],
    payload: &[u8],
    sector_bytes: u32,
) -> Vec<u8> {
    assert!(extents.len() <= MAX_ENTRIES, "callers split records at MAX_ENTRIES");
    let header_bytes = record_header_bytes(extents.len(), sector_bytes);
    let total = header_bytes + (payload.len() as u64).next_multiple_of(u64::from(sector_bytes));
    let mut record = vec![0u8; total as usize];
    record[0..8].copy_from_slice(RECORD_MAGIC);
    put_u32(&mut record, 8, kind as u32);
    put_u32(&mut record, 12, flags);
    put_u64(&mut record, 16, place.log_id);
    put_u64(&mut record, 24, place.lsn);
    put_u64(&mut record, 32, place.commit);
    put_u32(&mut record, 40, extents.len() as u32);
    put_u32(&mut record, 44, header_bytes as u32);
    put_u64(&mut record, 48, total);
    put_u32(&mut record, 56, crc32c::crc32c(payload));
    for (i, extent) in extents.iter().enumerate() {
        let at = RECORD_FIXED + i * ENTRY_BYTES;
        put_u64(&mut record, at, extent.sector);
        put_u32(&mut record, at + 8, extent.sectors);
        put_u32(&mut record, at + 12, extent.device);
    }
    let entries_end = RECORD_FIXED + extents.len() * ENTRY_BYTES;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&record[..60]), &record[64..entries_end]);
    put_u32(&mut record, 60, crc);
    record[header_bytes as usize..header_bytes as usize + payload.len()].copy_from_slice(payload);
    record
}

/// Why a record failed to decode; replay stops there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordFault {
    Magic,
    Checksum,
    WrongLog,
    WrongLsn { found: u64 },
    BadLength,
    PayloadChecksum,
}

impl std::fmt::Display for RecordFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordFault::Magic => f.write_str("no record magic"),
            RecordFault::Checksum => f.write_str("record header checksum mismatch"),
            RecordFault::WrongLog => f.write_str("record of another log"),
            RecordFault::WrongLsn { found } => write!(f, "stale record (it says LSN {found})"),
            RecordFault::BadLength => f.write_str("record length out of bounds"),
            RecordFault::PayloadChecksum => f.write_str("record data checksum mismatch"),
        }
    }
}

/// Decodes a record header from `buf`, which holds at least the first
/// `record_header_bytes(MAX_ENTRIES)` bytes at `lsn` (or all up to the head).
pub fn decode_record_header(
    buf: &[u8],
    log_id: u64,
    lsn: u64,
    room: u64,
) -> Result<RecordHeader, RecordFault> {
    if buf.len() < RECORD_FIXED || &buf[0..8] != RECORD_MAGIC {
        return Err(RecordFault::Magic);
    }
    let count = get_u32(buf, 40) as usize;
    if count > MAX_ENTRIES || RECORD_FIXED + count * ENTRY_BYTES > buf.len() {
        return Err(RecordFault::BadLength);
    }
    let entries_end = RECORD_FIXED + count * ENTRY_BYTES;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[..60]), &buf[64..entries_end]);
    if crc != get_u32(buf, 60) {
        return Err(RecordFault::Checksum);
    }
    if get_u64(buf, 16) != log_id {
        return Err(RecordFault::WrongLog);
    }
    let found = get_u64(buf, 24);
    if found != lsn {
        return Err(RecordFault::WrongLsn { found });
    }
    let kind = match get_u32(buf, 8) {
        1 => RecordKind::Blocks,
        2 => RecordKind::Revoke,
        _ => return Err(RecordFault::BadLength),
    };
    let header_bytes = u64::from(get_u32(buf, 44));
    let total_bytes = get_u64(buf, 48);
    if header_bytes < entries_end as u64 || total_bytes < header_bytes || total_bytes > room {
        return Err(RecordFault::BadLength);
    }
    let extents = (0..count)
        .map(|i| {
            let at = RECORD_FIXED + i * ENTRY_BYTES;
            Extent { sector: get_u64(buf, at), sectors: get_u32(buf, at + 8), device: get_u32(buf, at + 12) }
        })
        .collect();
    Ok(RecordHeader {
        kind,
        flags: get_u32(buf, 12),
        lsn,
        commit: get_u64(buf, 32),
        header_bytes,
        total_bytes,
        payload_crc: get_u32(buf, 56),
        extents,
    })
}

pub fn put_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

pub fn put_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

pub fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4-byte slice"))
}

pub fn get_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8-byte slice"))
}

#[cfg(test)]
mod tests {
    //! The bytes of the header and a record, field by field, as
    //! docs/formats.md ("Block log") gives them, taken from the encoders
    //! before their little-endian and checksum code moved to the codec
    //! crate.

    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Asserts that `bytes` holds each field's bytes (offset, hex) and
    /// zeros everywhere else.
    fn assert_layout(bytes: &[u8], fields: &[(usize, &str)]) {
        let mut expected = vec![0u8; bytes.len()];
        for &(at, field) in fields {
            let field: Vec<u8> = (0..field.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&field[i..i + 2], 16).unwrap())
                .collect();
            expected[at..at + field.len()].copy_from_slice(&field);
        }
        assert_eq!(hex(bytes), hex(&expected));
    }

    const LOG_ID: u64 = 0x0102_0304_0506_0709;

    fn header() -> Header {
        Header {
            sector_bytes: 512,
            flags: FLAG_SEPARATE,
            generation: 3,
            log_id: LOG_ID,
            log_bytes: 1 << 20,
            data_offset: 0,
            data_bytes: 1 << 30,
            tail: 0x2000,
            head: 0x3000,
            commits: 9,
        }
    }

    #[test]
    fn a_commit_header_is_byte_for_byte_the_documented_one() {
        let block = header().encode();
        assert_layout(
            &block,
            &[
                (0, "494f4c41424c4f47"),  // magic "IOLABLOG"
                (8, "01000000"),          // version 1
                (12, "00020000"),         // sector_bytes
                (16, "0300000000000000"), // generation
                (24, "0907060504030201"), // log_id
                (32, "0000100000000000"), // log_bytes
                (48, "0000004000000000"), // data_bytes (data_offset 0 at 40)
                (56, "0020000000000000"), // tail
                (64, "0030000000000000"), // head
                (72, "0900000000000000"), // commits
                (80, "01000000"),         // flags: separate
                (88, "b27ecbd7"),         // crc32c of bytes 0..88
            ],
        );
        assert_eq!(Header::decode(&block).unwrap(), Some(header()));
    }

    #[test]
    fn a_record_is_byte_for_byte_the_documented_one() {
        let place = RecordPlace { log_id: LOG_ID, lsn: 0x3000, commit: 9 };
        let extents =
            [Extent { sector: 8, sectors: 1, device: 0 }, Extent { sector: 20, sectors: 1, device: 1 }];
        let payload = vec![0xabu8; 1024];
        let record = encode_record(RecordKind::Blocks, RECORD_LAST, place, &extents, &payload, 512);
        assert_eq!(record.len(), 1536);
        assert_layout(
            &record[..512],
            &[
                (0, "494f4c4252454331"),  // magic "IOLBREC1"
                (8, "01000000"),          // kind: blocks
                (12, "01000000"),         // flags: last of its commit
                (16, "0907060504030201"), // log_id
                (24, "0030000000000000"), // lsn
                (32, "0900000000000000"), // commit
                (40, "02000000"),         // entries
                (44, "00020000"),         // header_bytes
                (48, "0006000000000000"), // total_bytes
                (56, "93304ca4"),         // crc32c of the payload
                (60, "1661a340"),         // crc32c of bytes 0..60, then the entries
                (64, "0800000000000000"), // entry: sector 8,
                (72, "0100000000000000"), //   1 sector, device 0
                (80, "1400000000000000"), // entry: sector 20,
                (88, "0100000001000000"), //   1 sector, device 1
            ],
        );
        assert_eq!(record[512..], payload[..]);
        let decoded = decode_record_header(&record, LOG_ID, 0x3000, 1 << 20).unwrap();
        assert_eq!((decoded.kind, decoded.flags, decoded.commit), (RecordKind::Blocks, RECORD_LAST, 9));
        assert_eq!(
            (decoded.header_bytes, decoded.total_bytes, decoded.extents),
            (512, 1536, extents.to_vec())
        );
        assert_eq!(decoded.payload_crc, crc32c::crc32c(&payload));
    }
}
