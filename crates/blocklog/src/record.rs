//! Records of the circular area (docs/formats.md, "Block log"): their
//! encoding, and a decoder that checks every field against its bound
//! before computing anything from it. A record carries the log's id and
//! its own LSN, so a stale record left by an earlier lap of the circle or
//! an earlier log never passes for a current one.

use codec::{Frame, LeReader, LeWriter};

use crate::format::StopReason;

pub const RECORD_MAGIC: &[u8; 8] = b"IOLBREC1";
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
/// A record header with the most entries fits in this many bytes.
pub const MAX_RECORD_HEADER: usize = 4096;

/// The most sectors one zeros record names in a log of `area_bytes`: a
/// commit's records stay within half the area, a zeros entry counting as
/// a sixteenth of the 4 KiB header it lies in, so no commit of a logged
/// device names as many; a stripe log's writer splits its records to it.
/// It bounds what replay holds in memory for a record of no payload.
pub fn max_zero_sectors(area_bytes: u64) -> u64 {
    area_bytes / 32
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

impl RecordHeader {
    /// Bytes of payload the entries name (blocks records only).
    pub fn data_bytes(&self) -> u64 {
        self.total_bytes - self.header_bytes
    }

    /// Sectors the entries name, all kinds.
    pub fn sectors(&self) -> u64 {
        self.extents.iter().map(|e| u64::from(e.sectors)).sum()
    }
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

/// Why a record failed its checks; replay stops there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordFault {
    Magic,
    Checksum,
    WrongLog {
        found: u64,
    },
    WrongLsn {
        found: u64,
    },
    /// A record of another commit than the one its place calls for.
    WrongCommit {
        found: u64,
        expected: u64,
    },
    /// A field past its documented bound; `at` is its byte in the record.
    Field {
        field: &'static str,
        at: usize,
        value: u64,
        bound: String,
    },
    /// The data does not match its checksum; the header, which did, says
    /// the commit.
    PayloadChecksum {
        commit: u64,
    },
    /// The commits before the header's head do not end there: `what` says how.
    Head {
        head: u64,
        what: &'static str,
    },
}

impl RecordFault {
    /// The commit the failing record names, when its header could be trusted.
    pub fn commit(&self) -> Option<u64> {
        match self {
            RecordFault::PayloadChecksum { commit } => Some(*commit),
            _ => None,
        }
    }

    pub fn reason(&self) -> StopReason {
        match self {
            RecordFault::Magic => StopReason::Magic,
            RecordFault::Checksum => StopReason::Checksum,
            RecordFault::WrongLog { .. } => StopReason::WrongLog,
            RecordFault::WrongLsn { .. } => StopReason::WrongLsn,
            RecordFault::WrongCommit { .. } => StopReason::CommitOrder,
            RecordFault::Field { .. } => StopReason::Field,
            RecordFault::PayloadChecksum { .. } => StopReason::PayloadChecksum,
            RecordFault::Head { .. } => StopReason::HeadInsideCommit,
        }
    }
}

impl std::fmt::Display for RecordFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordFault::Magic | RecordFault::Checksum | RecordFault::PayloadChecksum { .. } => {
                write!(f, "{}", self.reason())
            }
            RecordFault::WrongLog { found } => write!(f, "record of another log (id {found:#x})"),
            RecordFault::WrongLsn { found } => write!(f, "stale record (it says LSN {found})"),
            RecordFault::WrongCommit { found, expected } => {
                write!(f, "record of commit {found} where commit {expected} belongs")
            }
            RecordFault::Field { field, at, value, bound } => {
                write!(
                    f,
                    "record field {field} (byte {at} of the record) is {value}, out of bounds ({bound})"
                )
            }
            RecordFault::Head { head, what } => write!(f, "{what} the head ({head})"),
        }
    }
}

/// What a record is checked against: its log, its sector, and the
/// sectors of each home device (the entries must lie inside one).
#[derive(Clone, Debug)]
pub struct Bounds {
    pub log_id: u64,
    pub sector_bytes: u32,
    pub zero_sectors_max: u64,
    pub home_sectors: Vec<u64>,
}

fn field(field: &'static str, at: usize, value: u64, bound: String) -> RecordFault {
    RecordFault::Field { field, at, value, bound }
}

/// Decodes a record header from `buf`, which holds the first bytes at
/// `lsn` (up to [`MAX_RECORD_HEADER`], or fewer when the area ends
/// sooner), where `room` bytes remain before the walk's limit. Every field
/// is checked before it is used: a record that passes names no more data
/// than [`MAX_RECORD_DATA`] and no sector outside its home.
pub fn decode_record_header(
    buf: &[u8],
    bounds: &Bounds,
    lsn: u64,
    room: u64,
) -> Result<RecordHeader, RecordFault> {
    if buf.len() < RECORD_FIXED || &buf[0..8] != RECORD_MAGIC {
        return Err(RecordFault::Magic);
    }
    // Every fixed field lies inside the bytes just checked.
    let r = LeReader::new(&buf[..RECORD_FIXED]);
    let u32_at = |at| r.u32(at).map_err(|_| RecordFault::Magic);
    let u64_at = |at| r.u64(at).map_err(|_| RecordFault::Magic);
    let count = u32_at(40)?;
    if count == 0 || count as usize > MAX_ENTRIES {
        return Err(field("entries", 40, u64::from(count), format!("1 to {MAX_ENTRIES}")));
    }
    let entries_end = RECORD_FIXED + count as usize * ENTRY_BYTES;
    let Some(header) = buf.get(..entries_end) else {
        let bound = format!("entries that end within the {} bytes before the log's end", buf.len());
        return Err(field("entries", 40, u64::from(count), bound));
    };
    if RECORD_FRAME.verify(&[], header).is_err() {
        return Err(RecordFault::Checksum);
    }
    let found = u64_at(16)?;
    if found != bounds.log_id {
        return Err(RecordFault::WrongLog { found });
    }
    let found = u64_at(24)?;
    if found != lsn {
        return Err(RecordFault::WrongLsn { found });
    }
    let kind = match u32_at(8)? {
        1 => RecordKind::Blocks,
        2 => RecordKind::Revoke,
        3 => RecordKind::Zeros,
        other => return Err(field("kind", 8, u64::from(other), "1, 2 or 3".into())),
    };
    let flags = u32_at(12)?;
    if flags & !RECORD_LAST != 0 {
        return Err(field("flags", 12, u64::from(flags), format!("{RECORD_LAST:#x} or 0")));
    }
    let extents = decode_entries(header, count as usize, bounds)?;
    let header_bytes = u64::from(u32_at(44)?);
    let expect = record_header_bytes(count as usize, bounds.sector_bytes);
    if header_bytes != expect {
        return Err(field("header_bytes", 44, header_bytes, format!("{expect} for {count} entries")));
    }
    let total_bytes = u64_at(48)?;
    let total = expected_total(kind, &extents, header_bytes, bounds)?;
    if total_bytes != total || total_bytes > room {
        let bound = format!("{total} for its entries, within the {room} bytes left in the area");
        return Err(field("total_bytes", 48, total_bytes, bound));
    }
    let commit = u64_at(32)?;
    if commit == 0 || commit >= crate::format::MAX_COUNT {
        return Err(field("commit", 32, commit, "1 to 2^62".into()));
    }
    Ok(RecordHeader {
        kind,
        flags,
        lsn,
        commit,
        header_bytes,
        total_bytes,
        payload_crc: u32_at(56)?,
        extents,
    })
}

/// The entries of a header whose checksum held: each names at least one
/// sector, all of them inside its home device.
fn decode_entries(header: &[u8], count: usize, bounds: &Bounds) -> Result<Vec<Extent>, RecordFault> {
    let r = LeReader::new(header);
    let mut extents = Vec::with_capacity(count);
    for i in 0..count {
        let at = RECORD_FIXED + i * ENTRY_BYTES;
        // The entries lie inside `header`, sized from `count`.
        let read = |v: Result<u64, codec::OutOfBounds>| v.map_err(|_| RecordFault::Magic);
        let sector = read(r.u64(at))?;
        let sectors = read(r.u32(at + 8).map(u64::from))?;
        let device = read(r.u32(at + 12).map(u64::from))?;
        let Some(&home) = bounds.home_sectors.get(device as usize) else {
            let bound = format!("below the {} home devices", bounds.home_sectors.len());
            return Err(field("entry.device", at + 12, device, bound));
        };
        if sector >= home {
            return Err(field("entry.first_sector", at, sector, format!("below the home's {home} sectors")));
        }
        if sectors == 0 || sectors > home - sector {
            let bound = format!("1 to the {} sectors left in the home", home - sector);
            return Err(field("entry.sectors", at + 8, sectors, bound));
        }
        extents.push(Extent { sector, sectors: sectors as u32, device: device as u32 });
    }
    Ok(extents)
}

/// The total bytes a record of `kind` with `extents` must say it has: the
/// header, and for blocks the data of every sector named, which is at most
/// [`MAX_RECORD_DATA`]; a zeros record names at most the sectors of
/// [`max_zero_sectors`].
fn expected_total(
    kind: RecordKind,
    extents: &[Extent],
    header_bytes: u64,
    bounds: &Bounds,
) -> Result<u64, RecordFault> {
    // At most MAX_ENTRIES counts of u32: no overflow.
    let sectors: u64 = extents.iter().map(|e| u64::from(e.sectors)).sum();
    let at = RECORD_FIXED + 8;
    match kind {
        RecordKind::Revoke => Ok(header_bytes),
        RecordKind::Zeros if sectors > bounds.zero_sectors_max => {
            let bound = format!("a zeros record names at most {} sectors in all", bounds.zero_sectors_max);
            Err(field("entry.sectors", at, sectors, bound))
        }
        RecordKind::Zeros => Ok(header_bytes),
        RecordKind::Blocks => {
            let most = MAX_RECORD_DATA as u64 / u64::from(bounds.sector_bytes);
            if sectors > most {
                let bound = format!("a blocks record carries at most {most} sectors in all");
                return Err(field("entry.sectors", at, sectors, bound));
            }
            Ok(header_bytes + sectors * u64::from(bounds.sector_bytes))
        }
    }
}

#[cfg(test)]
mod tests {
    //! The bytes of a record, field by field, as docs/formats.md ("Block
    //! log") gives them.

    use super::*;
    use codec::golden::assert_layout;

    const LOG_ID: u64 = 0x0102_0304_0506_0709;

    fn bounds() -> Bounds {
        Bounds {
            log_id: LOG_ID,
            sector_bytes: 512,
            zero_sectors_max: 1 << 15,
            home_sectors: vec![1 << 21; 2],
        }
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
        let decoded = decode_record_header(&record, &bounds(), 0x3000, 1 << 20).unwrap();
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
        let decoded = decode_record_header(&record, &bounds(), 0x3000, 1 << 20).unwrap();
        assert_eq!(
            (decoded.kind, decoded.total_bytes, decoded.extents),
            (RecordKind::Zeros, 512, extents.to_vec())
        );
    }
}
