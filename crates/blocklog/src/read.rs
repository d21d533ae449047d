//! Reading a log without writing it: the newer header slot, one record
//! whole and checked, and a scan of the area for the records still valid
//! after a point (what tells damage from a torn tail, and what a repair
//! drops).

use device::{AlignedBuf, Device};

use crate::format::{Header, HeaderFault, AREA_START, SLOT_BYTES};
use crate::record::{self, max_zero_sectors, Bounds, RecordFault, RecordHeader, RecordKind, RECORD_MAGIC};
use crate::LogError;

/// Reads both header slots and returns the valid one with the higher
/// generation, or `None` when neither is valid.
pub fn newest_header(log: &dyn Device) -> Result<Option<Header>, LogError> {
    if log.size_bytes() < 2 * SLOT_BYTES {
        return Ok(None);
    }
    let mut buf = AlignedBuf::zeroed(2 * SLOT_BYTES as usize, log.buffer_align().max(4096));
    log.read_at(&mut buf, 0)?;
    let slot = |n: u64| {
        let at = n * SLOT_BYTES;
        Header::decode(&buf[at as usize..(at + SLOT_BYTES) as usize]).map_err(|e| slot_error(log, at, e))
    };
    Ok(match (slot(0)?, slot(1)?) {
        (Some(a), Some(b)) => Some(if a.generation >= b.generation { a } else { b }),
        (Some(a), None) | (None, Some(a)) => Some(a),
        (None, None) => None,
    })
}

fn slot_error(log: &dyn Device, slot_at: u64, fault: HeaderFault) -> LogError {
    match fault {
        HeaderFault::Version { found } => LogError::Version { found, supported: crate::format::VERSION },
        HeaderFault::Field { field, at, value, bound } => LogError::Field {
            device: log.name().to_string(),
            offset: slot_at + at as u64,
            field,
            value,
            bound,
        },
    }
}

/// Reads `buf.len()` bytes of the circular area starting at `lsn`.
pub fn read_circular(log: &dyn Device, header: &Header, lsn: u64, buf: &mut [u8]) -> Result<(), LogError> {
    let area = header.area_bytes();
    let start = lsn % area;
    let first = (buf.len() as u64).min(area - start) as usize;
    log.read_at(&mut buf[..first], AREA_START + start)?;
    if first < buf.len() {
        log.read_at(&mut buf[first..], AREA_START)?;
    }
    Ok(())
}

/// One record read whole: its header and its payload (blocks only).
pub struct Record {
    pub header: RecordHeader,
    pub payload: Vec<u8>,
}

/// A record that passed every check, or why it did not.
pub type Checked = Result<Record, RecordFault>;

/// What a scan found: the valid records of the commits it looked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Found {
    pub records: u64,
    /// Commits with at least one valid record (each counted once).
    pub commits: u64,
    pub last_commit: Option<u64>,
    /// Sectors the records name (blocks and zeros; revocations name none).
    pub sectors: u64,
}

/// Reads the records of one log, checking each against its bounds.
pub struct Reader<'a> {
    log: &'a dyn Device,
    header: &'a Header,
    bounds: Bounds,
}

impl<'a> Reader<'a> {
    /// A reader of the log `header` describes, whose records name sectors
    /// of homes of `home_sectors` sectors each.
    pub fn new(log: &'a dyn Device, header: &'a Header, home_sectors: Vec<u64>) -> Reader<'a> {
        let bounds = Bounds {
            log_id: header.log_id,
            sector_bytes: header.sector_bytes,
            zero_sectors_max: max_zero_sectors(header.area_bytes()),
            home_sectors,
        };
        Reader { log, header, bounds }
    }

    pub fn header(&self) -> &Header {
        self.header
    }

    /// The walk's limit: no record of this log lies a whole area past the
    /// tail.
    pub fn limit(&self) -> u64 {
        self.header.tail + self.header.area_bytes()
    }

    /// The record at `lsn`, checked, ending by `limit`. A read that fails
    /// is an error (nothing is known of the record), not a fault.
    pub fn record(&self, lsn: u64, limit: u64) -> Result<Checked, LogError> {
        let room = limit - lsn;
        let align = self.log.buffer_align().max(512);
        let mut first = AlignedBuf::zeroed(room.min(record::MAX_RECORD_HEADER as u64) as usize, align);
        read_circular(self.log, self.header, lsn, &mut first)?;
        let header = match record::decode_record_header(&first, &self.bounds, lsn, room) {
            Ok(header) => header,
            Err(fault) => return Ok(Err(fault)),
        };
        if header.kind != RecordKind::Blocks {
            let crc_ok = header.payload_crc == crc32c::crc32c(&[]);
            let fault = RecordFault::PayloadChecksum { commit: header.commit };
            return Ok(if crc_ok { Ok(Record { header, payload: Vec::new() }) } else { Err(fault) });
        }
        // Bounded by the decoder: at most MAX_RECORD_DATA bytes.
        let mut payload = AlignedBuf::zeroed(header.data_bytes() as usize, align);
        read_circular(self.log, self.header, lsn + header.header_bytes, &mut payload)?;
        if crc32c::crc32c(&payload) != header.payload_crc {
            return Ok(Err(RecordFault::PayloadChecksum { commit: header.commit }));
        }
        Ok(Ok(Record { header, payload: payload.to_vec() }))
    }

    /// The valid records of commits numbered `min` or more that start in
    /// `from..limit`: a record counts only at its own LSN (magic, log id,
    /// LSN and both checksums right), so stale records of earlier laps
    /// never do. Reads the range once, in windows, and each record found.
    pub fn scan(&self, from: u64, limit: u64, min: u64) -> Result<Found, LogError> {
        let sector = u64::from(self.header.sector_bytes);
        let mut window = Window { start: from, bytes: Vec::new() };
        let mut found = Found::default();
        let mut lsn = from;
        while lsn < limit {
            if !window.has_magic(self, lsn, limit)? {
                lsn += sector;
                continue;
            }
            match self.record(lsn, limit)? {
                Ok(record) => {
                    if record.header.commit >= min {
                        found.add(&record.header);
                    }
                    lsn += record.header.total_bytes;
                }
                Err(_) => lsn += sector,
            }
        }
        Ok(found)
    }
}

impl Found {
    fn add(&mut self, header: &RecordHeader) {
        if self.last_commit != Some(header.commit) {
            self.commits += 1;
        }
        self.records += 1;
        self.last_commit = Some(self.last_commit.map_or(header.commit, |c| c.max(header.commit)));
        if header.kind != RecordKind::Revoke {
            self.sectors += header.sectors();
        }
    }
}

/// The bytes of the area a scan is in, read a window at a time.
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

/// How much of the area a scan reads at once.
const WINDOW_BYTES: u64 = 1 << 20;

impl Window {
    /// Whether the sector at `lsn` starts with a record's magic.
    fn has_magic(&mut self, reader: &Reader<'_>, lsn: u64, limit: u64) -> Result<bool, LogError> {
        let end = self.start + self.bytes.len() as u64;
        if lsn < self.start || lsn + 8 > end {
            let len = (limit - lsn).min(WINDOW_BYTES) as usize;
            let mut buf = AlignedBuf::zeroed(len, reader.log.buffer_align().max(512));
            read_circular(reader.log, reader.header, lsn, &mut buf)?;
            *self = Window { start: lsn, bytes: buf.to_vec() };
        }
        let at = (lsn - self.start) as usize;
        Ok(self.bytes.get(at..at + 8).is_some_and(|m| m == RECORD_MAGIC))
    }
}
