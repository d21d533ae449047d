//! The log's on-disk format (docs/formats.md, "Block log"): two commit
//! header slots, then a circular area of records (`record.rs`) addressed
//! by log sequence numbers (LSNs, byte positions that only grow). Every
//! structure carries a crc32c, and every field is checked against the
//! bounds docs/formats.md gives before anything is computed from it.

use codec::{Frame, LeReader, LeWriter, OutOfBounds};

pub const HEADER_MAGIC: &[u8; 8] = device::signature::IOLAB_LOG_MAGIC;
/// Version 2 added zero records; version 3 the mark of a replay that
/// stopped at damage. Versions 1 and 2 are read as they are.
pub const VERSION: u32 = 3;
/// Each header slot is this long; the circular area starts after both.
pub const SLOT_BYTES: u64 = 4096;
pub const AREA_START: u64 = 2 * SLOT_BYTES;
/// The smallest circular area accepted: room for a few full records.
pub const MIN_AREA_BYTES: u64 = 256 * 1024;
/// Bound on LSNs, counters and sizes: far past any real log, and low
/// enough that adding an area, a record or one to them cannot overflow.
pub const MAX_COUNT: u64 = 1 << 62;
/// The largest sector a log is made in: a header slot must be whole
/// sectors.
pub const MAX_SECTOR_BYTES: u32 = SLOT_BYTES as u32;
/// Bound on a stripe log's home devices (a RAID-5 plex's subdisks).
pub const MAX_HOMES: u64 = 1024;

/// Bytes of a header the first checksum covers (it follows them): the
/// whole header before version 3, which keeps it where it was so that an
/// older reader still finds the version and refuses it by name.
const HEADER_FIELDS: usize = 88;
const HEADER_FRAME: Frame = Frame::skipped(HEADER_FIELDS);
/// Version 3's stop fields (bytes 96..120) and their own checksum at 120.
const STOP_AT: usize = 96;
const STOP_FRAME: Frame = Frame::skipped(24);
const STOP_END: usize = STOP_AT + 28;

/// Header flag: the log lives on a device of its own.
pub const FLAG_SEPARATE: u32 = 1;
/// Header flag: a stripe log, whose records name several home devices
/// (their count is in the data-bytes field).
pub const FLAG_STRIPE: u32 = 2;
/// Header flag (version 3): replay stopped at damage; the log refuses to
/// serve until it is repaired.
pub const FLAG_STOPPED: u32 = 4;

/// Why replay stopped at a record, as a header keeps it (byte 84).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Magic = 1,
    Checksum = 2,
    WrongLog = 3,
    WrongLsn = 4,
    CommitOrder = 5,
    Field = 6,
    PayloadChecksum = 7,
    HeadInsideCommit = 8,
}

impl StopReason {
    const ALL: [StopReason; 8] = [
        StopReason::Magic,
        StopReason::Checksum,
        StopReason::WrongLog,
        StopReason::WrongLsn,
        StopReason::CommitOrder,
        StopReason::Field,
        StopReason::PayloadChecksum,
        StopReason::HeadInsideCommit,
    ];

    fn from_code(code: u32) -> Option<StopReason> {
        StopReason::ALL.into_iter().find(|r| *r as u32 == code)
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Magic => "no record magic",
            StopReason::Checksum => "record header checksum mismatch",
            StopReason::WrongLog => "record of another log",
            StopReason::WrongLsn => "stale record (another LSN)",
            StopReason::CommitOrder => "record of a commit out of order",
            StopReason::Field => "record field out of bounds",
            StopReason::PayloadChecksum => "record data checksum mismatch",
            StopReason::HeadInsideCommit => "the commits before the head do not end at it",
        })
    }
}

/// Where replay stopped at damage, as the header remembers it until the
/// log is repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop {
    /// The LSN of the record that failed.
    pub lsn: u64,
    /// The first commit not replayed; 0 when its number could not be read.
    pub commit: u64,
    /// The highest commit number known to follow (at least `commit`).
    pub last_commit: u64,
    pub reason: StopReason,
}

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
    /// Commits durable before `head`: the commit starting there is number
    /// `commits + 1`.
    pub commits: u64,
    /// Set when replay stopped at damage (flag `FLAG_STOPPED`).
    pub stop: Option<Stop>,
}

/// Why a header slot whose checksum holds cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderFault {
    Version {
        found: u32,
    },
    /// A field past its documented bound: `at` is its byte in the slot.
    Field {
        field: &'static str,
        at: usize,
        value: u64,
        bound: String,
    },
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
        let stopped = if self.stop.is_some() { FLAG_STOPPED } else { 0 };
        let stop = self.stop.unwrap_or(Stop { lsn: 0, commit: 0, last_commit: 0, reason: StopReason::Magic });
        let reason = self.stop.map_or(0, |s| s.reason as u32);
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
            .put_u32(80, (self.flags & !FLAG_STOPPED) | stopped)
            .put_u32(84, reason)
            .put_u64(STOP_AT, stop.lsn)
            .put_u64(STOP_AT + 8, stop.commit)
            .put_u64(STOP_AT + 16, stop.last_commit);
        HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
        STOP_FRAME.seal(&[], &mut block[STOP_AT..STOP_END]);
        block
    }

    /// Decodes one slot: `None` when it holds no header (never written,
    /// torn, another format), a fault when its checksums hold but a field
    /// does not (a version this reader does not know, a field past its
    /// bound: no writer of this format made it).
    pub fn decode(block: &[u8]) -> Result<Option<Header>, HeaderFault> {
        let Some(fields) = block.get(..HEADER_FIELDS + 4) else { return Ok(None) };
        if &fields[0..8] != HEADER_MAGIC || HEADER_FRAME.verify(&[], fields).is_err() {
            return Ok(None);
        }
        let r = LeReader::new(block);
        // Every field of the first frame lies inside the bytes just taken.
        let Ok(version) = r.u32(8) else { return Ok(None) };
        if !(1..=VERSION).contains(&version) {
            return Err(HeaderFault::Version { found: version });
        }
        if version >= 3 && block.get(STOP_AT..STOP_END).is_none_or(|s| STOP_FRAME.verify(&[], s).is_err()) {
            return Ok(None);
        }
        let Ok(raw) = RawHeader::read(&r, version) else { return Ok(None) };
        raw.check().map(Some)
    }
}

/// A header's fields as read, before any is trusted.
struct RawHeader {
    version: u32,
    header: Header,
    reason: u32,
    stop: [u64; 3],
}

impl RawHeader {
    fn read(r: &LeReader<'_>, version: u32) -> Result<RawHeader, OutOfBounds> {
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
            stop: None,
        };
        let stop =
            if version >= 3 { [r.u64(STOP_AT)?, r.u64(STOP_AT + 8)?, r.u64(STOP_AT + 16)?] } else { [0; 3] };
        Ok(RawHeader { version, header, reason: r.u32(84)?, stop })
    }

    /// Every field against its bound, in the order docs/formats.md lists
    /// them; a field is used in a bound only once its own is checked.
    fn check(self) -> Result<Header, HeaderFault> {
        let h = &self.header;
        let sector = h.sector_bytes;
        bound(
            sector.is_power_of_two() && (512..=MAX_SECTOR_BYTES).contains(&sector),
            ("sector_bytes", 12, u64::from(sector)),
            || "a power of two from 512 to 4096".into(),
        )?;
        let sector = u64::from(sector);
        bound(h.generation < MAX_COUNT, ("generation", 16, h.generation), || "below 2^62".into())?;
        bound(h.log_id != 0, ("log_id", 24, h.log_id), || "not zero".into())?;
        bound(
            h.log_bytes % SLOT_BYTES == 0 && (AREA_START + MIN_AREA_BYTES..MAX_COUNT).contains(&h.log_bytes),
            ("log_bytes", 32, h.log_bytes),
            || format!("a multiple of 4096 from {} to 2^62", AREA_START + MIN_AREA_BYTES),
        )?;
        self.check_flags()?;
        let separate = h.flags & FLAG_SEPARATE != 0;
        let offset = if separate { 0 } else { h.log_bytes };
        bound(h.data_offset == offset, ("data_offset", 40, h.data_offset), || {
            format!("{offset}: 0 on a separate log, else the log's size")
        })?;
        if h.flags & FLAG_STRIPE != 0 {
            bound((1..=MAX_HOMES).contains(&h.data_bytes), ("data_bytes", 48, h.data_bytes), || {
                format!("a stripe log's home count, 1 to {MAX_HOMES}")
            })?;
        } else {
            bound(
                h.data_bytes % sector == 0 && (1..MAX_COUNT).contains(&h.data_bytes),
                ("data_bytes", 48, h.data_bytes),
                || format!("a multiple of the {sector}-byte sector from {sector} to 2^62"),
            )?;
        }
        bound(h.tail % sector == 0 && h.tail < MAX_COUNT, ("tail", 56, h.tail), || {
            format!("a multiple of the {sector}-byte sector below 2^62")
        })?;
        let area = h.area_bytes();
        bound(
            h.head % sector == 0 && h.head >= h.tail && h.head - h.tail <= area,
            ("head", 64, h.head),
            || format!("a multiple of the sector from the tail ({}) to {area} past it", h.tail),
        )?;
        bound(h.commits < MAX_COUNT, ("commits", 72, h.commits), || "below 2^62".into())?;
        let stop = self.check_stop()?;
        // The stop flag lives on as `stop`.
        Ok(Header { stop, flags: h.flags & !FLAG_STOPPED, ..self.header })
    }

    fn check_flags(&self) -> Result<(), HeaderFault> {
        let flags = self.header.flags;
        let known = if self.version >= 3 {
            FLAG_SEPARATE | FLAG_STRIPE | FLAG_STOPPED
        } else {
            FLAG_SEPARATE | FLAG_STRIPE
        };
        let stripe_alone = flags & FLAG_STRIPE != 0 && flags & FLAG_SEPARATE == 0;
        bound(flags & !known == 0 && !stripe_alone, ("flags", 80, u64::from(flags)), || {
            format!("bits of {known:#x} only, a stripe log on a separate device")
        })
    }

    /// The stop fields (version 3): all zero unless `FLAG_STOPPED`; then a
    /// known reason, the damage within the area after the tail, and a head
    /// at the tail (nothing after the damage is committed any more).
    fn check_stop(&self) -> Result<Option<Stop>, HeaderFault> {
        let h = &self.header;
        let [lsn, commit, last_commit] = self.stop;
        if h.flags & FLAG_STOPPED == 0 {
            bound(self.reason == 0, ("stop_reason", 84, u64::from(self.reason)), || {
                "0 unless stopped".into()
            })?;
            bound(self.stop == [0; 3], ("stop_lsn", STOP_AT, lsn), || "0 unless stopped".into())?;
            return Ok(None);
        }
        let Some(reason) = StopReason::from_code(self.reason) else {
            return Err(fault(("stop_reason", 84, u64::from(self.reason)), "1 to 8".into()));
        };
        bound(h.tail == h.head, ("head", 64, h.head), || format!("the tail ({}) once stopped", h.tail))?;
        let sector = u64::from(h.sector_bytes);
        bound(
            lsn % sector == 0 && lsn >= h.tail && lsn - h.tail <= h.area_bytes(),
            ("stop_lsn", STOP_AT, lsn),
            || format!("a multiple of the sector within the area from the tail ({})", h.tail),
        )?;
        bound(commit == 0 || commit == h.commits + 1, ("stop_commit", STOP_AT + 8, commit), || {
            format!("0 (unknown) or one past the commits replayed ({})", h.commits + 1)
        })?;
        bound(
            last_commit >= commit && last_commit < MAX_COUNT,
            ("stop_last_commit", STOP_AT + 16, last_commit),
            || format!("from the stop commit ({commit}) to 2^62"),
        )?;
        Ok(Some(Stop { lsn, commit, last_commit, reason }))
    }
}

/// A field, its byte in the slot and its value.
type Field = (&'static str, usize, u64);

fn fault((field, at, value): Field, bound: String) -> HeaderFault {
    HeaderFault::Field { field, at, value, bound }
}

fn bound(ok: bool, field: Field, bound: impl FnOnce() -> String) -> Result<(), HeaderFault> {
    if ok {
        Ok(())
    } else {
        Err(fault(field, bound()))
    }
}

#[cfg(test)]
mod tests {
    //! The bytes of the header, field by field, as docs/formats.md
    //! ("Block log") gives them.

    use super::*;
    use codec::golden::assert_layout;

    pub(crate) const LOG_ID: u64 = 0x0102_0304_0506_0709;

    pub(crate) fn header() -> Header {
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
            stop: None,
        }
    }

    #[test]
    fn a_commit_header_is_byte_for_byte_the_documented_one() {
        let block = header().encode();
        assert_layout(
            &block,
            &[
                (0, "494f4c41424c4f47"),  // magic "IOLABLOG"
                (8, "03000000"),          // version 3
                (12, "00020000"),         // sector_bytes
                (16, "0300000000000000"), // generation
                (24, "0907060504030201"), // log_id
                (32, "0000100000000000"), // log_bytes
                (48, "0000004000000000"), // data_bytes (data_offset 0 at 40)
                (56, "0020000000000000"), // tail
                (64, "0030000000000000"), // head
                (72, "0900000000000000"), // commits
                (80, "01000000"),         // flags: separate (stop reason 0 at 84)
                (88, "6aa3bfc7"),         // crc32c of bytes 0..88
                (120, "eeecfb84"),        // crc32c of bytes 96..120 (all zero: no stop)
            ],
        );
        assert_eq!(Header::decode(&block).unwrap(), Some(header()));
    }

    #[test]
    fn a_stopped_header_is_byte_for_byte_the_documented_one() {
        let stop = Stop { lsn: 0x3200, commit: 10, last_commit: 12, reason: StopReason::PayloadChecksum };
        let stopped = Header { head: 0x2000, stop: Some(stop), ..header() };
        let block = stopped.encode();
        assert_layout(
            &block,
            &[
                (0, "494f4c41424c4f47"),   // magic "IOLABLOG"
                (8, "03000000"),           // version 3
                (12, "00020000"),          // sector_bytes
                (16, "0300000000000000"),  // generation
                (24, "0907060504030201"),  // log_id
                (32, "0000100000000000"),  // log_bytes
                (48, "0000004000000000"),  // data_bytes (data_offset 0 at 40)
                (56, "0020000000000000"),  // tail
                (64, "0020000000000000"),  // head: the tail, once stopped
                (72, "0900000000000000"),  // commits replayed
                (80, "05000000"),          // flags: separate, stopped
                (84, "07000000"),          // stop reason: data checksum
                (88, "9ada18bb"),          // crc32c of bytes 0..88
                (96, "0032000000000000"),  // stop LSN
                (104, "0a00000000000000"), // stop commit
                (112, "0c00000000000000"), // last commit lost
                (120, "fa0da5a9"),         // crc32c of bytes 96..120
            ],
        );
        assert_eq!(Header::decode(&block).unwrap(), Some(stopped));
    }

    /// Logs written before version 3 (1: no zero records, 2) are read as
    /// they are: their checksum covers bytes 0..88 alone.
    #[test]
    fn version_1_and_2_headers_are_read() {
        for version in [1u32, 2] {
            let mut block = header().encode();
            block[8..12].copy_from_slice(&version.to_le_bytes());
            block[STOP_AT..STOP_END].fill(0);
            HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
            assert_eq!(Header::decode(&block).unwrap(), Some(header()), "version {version}");
        }
    }

    #[test]
    fn a_version_past_3_is_refused_by_name() {
        let mut block = header().encode();
        block[8..12].copy_from_slice(&4u32.to_le_bytes());
        HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
        assert_eq!(Header::decode(&block), Err(HeaderFault::Version { found: 4 }));
    }

    #[test]
    fn a_stop_flag_before_version_3_is_a_field_out_of_bounds() {
        let mut block = header().encode();
        block[8..12].copy_from_slice(&2u32.to_le_bytes());
        block[80..84].copy_from_slice(&(FLAG_SEPARATE | FLAG_STOPPED).to_le_bytes());
        HEADER_FRAME.seal(&[], &mut block[..HEADER_FIELDS + 4]);
        assert!(matches!(Header::decode(&block), Err(HeaderFault::Field { field: "flags", at: 80, .. })));
    }
}
