//! The log's on-disk format (docs/formats.md, "Block log"): two commit
//! header slots, then a circular area of records addressed by log sequence
//! numbers (LSNs, byte positions that only grow). Every structure carries a
//! crc32c; records also carry the log's id and their own LSN, so a stale
//! record left by an earlier lap of the circle or an earlier log never
//! passes for a current one.

use codec::{Frame, LeReader, LeWriter, OutOfBounds};

use crate::LogError;

pub const HEADER_MAGIC: &[u8; 8] = device::signature::IOLAB_LOG_MAGIC;
pub const RECORD_MAGIC: &[u8; 8] = b"IOLBREC1";
/// Version 2 added zero records; version 1 logs (which hold none) are
/// read as they are.
pub const VERSION: u32 = 2;
/// Each header slot is this long; the circular area starts after both.
pub const SLOT_BYTES: u64 = 4096;
pub const AREA_START: u64 = 2 * SLOT_BYTES;
/// Bytes of a header that the checksum covers (the crc follows them).
const HEADER_FIELDS: usize = 88;
/// A header's checksum: of its fields, stored right after them.
const HEADER_FRAME: Frame = Frame::skipped(HEADER_FIELDS);
/// A record header's checksum: of its fixed part and entries, stored at
/// byte 60 and left out of what it covers.
const RECORD_FRAME: Frame = Frame::skipped(60);
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
        LeWriter::new(&mut block)
            .put_bytes(0, HEADER_MAGIC)
            .put_u32(8, VERSION)
            .put_u32(12, self.sector_bytes)
            .put_u64(16, self.generation)
            .put_u64(24, self.log_id)
            .put_u64(32, self.log_bytes)
            .put_u64(40, self.data_offset)
            .put_u64(48, self.data_bytes)
            .put_u64(56, self.tail)
            .put_u64(64, self.head)
            .put_u64(72, self.commits)
            .put_u32(80, self.flags);
        HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
        block
    }

    /// Decodes one slot; `None` when it holds no valid header (never
    /// written, torn, or another format).
    pub fn decode(block: &[u8]) -> Result<Option<Header>, LogError> {
        let Some(fields) = block.get(..HEADER_FIELDS + 4) else { return Ok(None) };
        if &fields[0..8] != HEADER_MAGIC || HEADER_FRAME.verify(&[], fields).is_err() {
            return Ok(None);
        }
        // Every field lies inside the bytes just taken: no read fails.
        let Ok((version, header)) = Header::fields(LeReader::new(fields)) else { return Ok(None) };
        if !(1..=VERSION).contains(&version) {
            return Err(LogError::Version { found: version, supported: VERSION });
        }
        let sane = header.log_bytes >= AREA_START + MIN_AREA_BYTES
            && header.tail <= header.head
            && header.head - header.tail <= header.area_bytes()
            && header.sector_bytes.is_power_of_two()
            && header.sector_bytes >= 512;
        Ok(sane.then_some(header))
    }

    /// The version and the fields of a header.
    fn fields(r: LeReader<'_>) -> Result<(u32, Header), OutOfBounds> {
        let header = Header {
            sector_bytes: r.u32(12)?,
            generation: r.u64(16)?,
            log_id: r.u64(24)?,
            log_bytes: r.u64(32)?,
            data_offset: r.u64(40)?,
            data_bytes: r.u64(48)?,
            tail: r.u64(56)?,
            head: r.u64(64)?,
            commits: r.u64(72)?,
            flags: r.u32(80)?,
        };
        Ok((r.u32(8)?, header))
    }
}

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// Extents followed by full copies of their data.
    Blocks = 1,
    /// Extents whose earlier logged copies must not be replayed.
    Revoke = 2,
    /// Extents whose sectors are all zero: no payload (version 2).
    Zeros = 3,
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
#[cfg(test)]
pub fn encode_record(
    kind: RecordKind,
    flags: u32,
    place: RecordPlace,
    extents: &[Extent],
    payload: &[u8],
    sector_bytes: u32,
) -> Vec<u8> {
    let mut record = Vec::new();
    append_record(&mut record, kind, flags, place, extents, &[payload], sector_bytes);
    record
}

/// Appends a whole record to `out` (`encode_record`), its payload the
/// pieces of `payload` one after another: no copy but the one into `out`.
pub fn append_record(
    out: &mut Vec<u8>,
    kind: RecordKind,
    flags: u32,
    place: RecordPlace,
    extents: &[Extent],
    payload: &[&[u8]],
    sector_bytes: u32,
) {
    assert!(extents.len() <= MAX_ENTRIES, "callers split records at MAX_ENTRIES");
    let payload_bytes: usize = payload.iter().map(|p| p.len()).sum();
    let header_bytes = record_header_bytes(extents.len(), sector_bytes);
    let total = header_bytes + (payload_bytes as u64).next_multiple_of(u64::from(sector_bytes));
    let start = out.len();
    out.resize(start + header_bytes as usize, 0);
    let crc = payload.iter().fold(0, |crc, piece| crc32c::crc32c_append(crc, piece));
    let record = &mut out[start..];
    let mut w = LeWriter::new(record);
    w.put_bytes(0, RECORD_MAGIC)
        .put_u32(8, kind as u32)
        .put_u32(12, flags)
        .put_u64(16, place.log_id)
        .put_u64(24, place.lsn)
        .put_u64(32, place.commit)
        .put_u32(40, extents.len() as u32)
        .put_u32(44, header_bytes as u32)
        .put_u64(48, total)
        .put_u32(56, crc);
    for (i, extent) in extents.iter().enumerate() {
        let at = RECORD_FIXED + i * ENTRY_BYTES;
        w.put_u64(at, extent.sector).put_u32(at + 8, extent.sectors).put_u32(at + 12, extent.device);
    }
    let entries_end = RECORD_FIXED + extents.len() * ENTRY_BYTES;
    RECORD_FRAME.seal(&[], &mut record[..entries_end]);
    for piece in payload {
        out.extend_from_slice(piece);
    }
    out.resize(start + total as usize, 0);
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

/// A field past the end of what was read: the record's length is wrong.
impl From<OutOfBounds> for RecordFault {
    fn from(_: OutOfBounds) -> RecordFault {
        RecordFault::BadLength
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
    let r = LeReader::new(buf);
    let count = r.u32(40)? as usize;
    if count > MAX_ENTRIES || RECORD_FIXED + count * ENTRY_BYTES > buf.len() {
        return Err(RecordFault::BadLength);
    }
    let entries_end = RECORD_FIXED + count * ENTRY_BYTES;
    if RECORD_FRAME.verify(&[], &buf[..entries_end]).is_err() {
        return Err(RecordFault::Checksum);
    }
    if r.u64(16)? != log_id {
        return Err(RecordFault::WrongLog);
    }
    let found = r.u64(24)?;
    if found != lsn {
        return Err(RecordFault::WrongLsn { found });
    }
    let kind = match r.u32(8)? {
        1 => RecordKind::Blocks,
        2 => RecordKind::Revoke,
        3 => RecordKind::Zeros,
        _ => return Err(RecordFault::BadLength),
    };
    let header_bytes = u64::from(r.u32(44)?);
    let total_bytes = r.u64(48)?;
    if header_bytes < entries_end as u64 || total_bytes < header_bytes || total_bytes > room {
        return Err(RecordFault::BadLength);
    }
    let extents = (0..count)
        .map(|i| {
            let at = RECORD_FIXED + i * ENTRY_BYTES;
            Ok(Extent { sector: r.u64(at)?, sectors: r.u32(at + 8)?, device: r.u32(at + 12)? })
        })
        .collect::<Result<_, OutOfBounds>>()?;
    Ok(RecordHeader {
        kind,
        flags: r.u32(12)?,
        lsn,
        commit: r.u64(32)?,
        header_bytes,
        total_bytes,
        payload_crc: r.u32(56)?,
        extents,
    })
}

#[cfg(test)]
mod tests {
    //! The bytes of the header and a record, field by field, as
    //! docs/formats.md ("Block log") gives them, taken from the encoders
    //! before their little-endian and checksum code moved to the codec
    //! crate.

    use super::*;
    use codec::golden::assert_layout;

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
                (8, "02000000"),          // version 2
                (12, "00020000"),         // sector_bytes
                (16, "0300000000000000"), // generation
                (24, "0907060504030201"), // log_id
                (32, "0000100000000000"), // log_bytes
                (48, "0000004000000000"), // data_bytes (data_offset 0 at 40)
                (56, "0020000000000000"), // tail
                (64, "0030000000000000"), // head
                (72, "0900000000000000"), // commits
                (80, "01000000"),         // flags: separate
                (88, "86cd85cf"),         // crc32c of bytes 0..88
            ],
        );
        assert_eq!(Header::decode(&block).unwrap(), Some(header()));
    }

    /// A record appended from its payload's pieces, after what a buffer
    /// already holds, is the record encoded from the payload whole.
    #[test]
    fn a_record_from_pieces_is_the_record_from_the_whole_payload() {
        let place = RecordPlace { log_id: LOG_ID, lsn: 0x3000, commit: 9 };
        let extents = [Extent { sector: 8, sectors: 3, device: 0 }];
        let payload: Vec<u8> = (0..1536u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = encode_record(RecordKind::Blocks, RECORD_LAST, place, &extents, &payload, 512);
        let mut out = vec![0x5au8; 100];
        let pieces = [&payload[..512], &payload[512..1024], &payload[1024..]];
        append_record(&mut out, RecordKind::Blocks, RECORD_LAST, place, &extents, &pieces, 512);
        assert_eq!(out[..100], [0x5au8; 100][..], "what the buffer held is kept");
        assert_eq!(out[100..], whole[..]);
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

    #[test]
    fn a_zeros_record_is_byte_for_byte_the_documented_one() {
        let place = RecordPlace { log_id: LOG_ID, lsn: 0x3000, commit: 9 };
        let extents = [Extent { sector: 8, sectors: 16, device: 0 }];
        let record = encode_record(RecordKind::Zeros, 0, place, &extents, &[], 512);
        assert_eq!(record.len(), 512, "a header and no payload");
        assert_layout(
            &record,
            &[
                (0, "494f4c4252454331"),  // magic "IOLBREC1"
                (8, "03000000"),          // kind: zeros
                (12, "00000000"),         // flags: not the last
                (16, "0907060504030201"), // log_id
                (24, "0030000000000000"), // lsn
                (32, "0900000000000000"), // commit
                (40, "01000000"),         // entries
                (44, "00020000"),         // header_bytes
                (48, "0002000000000000"), // total_bytes: the header alone
                (56, "00000000"),         // crc32c of an empty payload
                (60, "abb6b5f4"),         // crc32c of bytes 0..60, then the entries
                (64, "0800000000000000"), // entry: sector 8,
                (72, "1000000000000000"), //   16 sectors, device 0
            ],
        );
        let decoded = decode_record_header(&record, LOG_ID, 0x3000, 1 << 20).unwrap();
        assert_eq!(
            (decoded.kind, decoded.total_bytes, decoded.extents),
            (RecordKind::Zeros, 512, extents.to_vec())
        );
    }

    /// A log written before zero records (version 1) is read as it is.
    #[test]
    fn a_version_1_header_is_read() {
        let mut block = header().encode();
        block[8..12].copy_from_slice(&1u32.to_le_bytes());
        HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
        assert_eq!(Header::decode(&block).unwrap(), Some(header()));
        block[8..12].copy_from_slice(&3u32.to_le_bytes());
        HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
        assert!(matches!(Header::decode(&block), Err(LogError::Version { found: 3, supported: 2 })));
    }
}
