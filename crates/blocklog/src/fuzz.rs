//! The decoders under fuzzing: random bytes, bit flips, truncation, and
//! each field at and past its bounds (docs/formats.md, "Block log"). Each
//! must give a typed fault or a value within every bound; never a panic.
//! The bounds are restated here from the documentation, apart from the
//! decoder's own code, as the oracle.

use codec::{Frame, LeWriter};
use proptest::prelude::*;

use crate::format::{
    Header, HeaderFault, Stop, StopReason, AREA_START, FLAG_SEPARATE, FLAG_STOPPED, FLAG_STRIPE, MAX_COUNT,
    MIN_AREA_BYTES,
};
use crate::record::{
    append_record, decode_record_header, Bounds, Extent, RecordFault, RecordKind, RecordPlace, MAX_ENTRIES,
    MAX_RECORD_DATA, RECORD_LAST,
};

const LOG_ID: u64 = 0x0102_0304_0506_0709;
const LOG_BYTES: u64 = 1 << 20;
const AREA: u64 = LOG_BYTES - AREA_START;

fn base() -> Header {
    Header {
        sector_bytes: 512,
        flags: FLAG_SEPARATE,
        generation: 3,
        log_id: LOG_ID,
        log_bytes: LOG_BYTES,
        data_offset: 0,
        data_bytes: 1 << 30,
        tail: 0x2000,
        head: 0x3000,
        commits: 9,
        stop: None,
    }
}

fn stopped() -> Header {
    let stop = Stop { lsn: 0x2400, commit: 10, last_commit: 12, reason: StopReason::PayloadChecksum };
    Header { head: 0x2000, stop: Some(stop), ..base() }
}

/// Reseals both checksums of an encoded slot after a field was changed.
fn reseal(block: &mut [u8]) {
    Frame::skipped(88).seal(&[], &mut block[..92]);
    Frame::skipped(24).seal(&[], &mut block[96..124]);
}

/// Every bound a decoded header must hold, restated from the docs.
fn header_holds_its_bounds(h: &Header) -> bool {
    let sector = u64::from(h.sector_bytes);
    let area = h.log_bytes.saturating_sub(AREA_START);
    let geometry = (512..=4096).contains(&h.sector_bytes)
        && h.sector_bytes.is_power_of_two()
        && h.log_bytes % 4096 == 0
        && h.log_bytes >= AREA_START + MIN_AREA_BYTES
        && h.log_bytes < MAX_COUNT;
    let lsns = h.tail <= h.head
        && h.head - h.tail <= area
        && h.head < MAX_COUNT
        && h.tail % sector == 0
        && h.head % sector == 0;
    let stop = h.stop.is_none_or(|s| {
        h.tail == h.head && s.lsn >= h.tail && s.lsn - h.tail <= area && s.last_commit >= s.commit
    });
    geometry && lsns && stop && h.commits < MAX_COUNT && h.generation < MAX_COUNT && h.log_id != 0
}

/// What a field's value should give, by the documented bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Within its bound, and the others hold: the structure decodes.
    Reads,
    /// Within its own bound, but another field's bound depends on it: a
    /// fault may name that other field, never this one.
    Coupled,
    /// Past its bound: the fault names this field.
    Past,
}

use Expect::{Coupled, Past, Reads};

fn within(ok: bool) -> Expect {
    if ok {
        Reads
    } else {
        Past
    }
}

/// One header field: its name in faults, its byte and width, the header
/// it is set in, what a value should give, and values at and past its
/// bounds.
struct HeaderField {
    name: &'static str,
    at: usize,
    width: usize,
    base: fn() -> Header,
    expect: fn(u64) -> Expect,
    edges: &'static [u64],
}

const HEADER_FIELDS: &[HeaderField] = &[
    HeaderField {
        name: "sector_bytes",
        at: 12,
        width: 4,
        base,
        expect: |v| within([512, 1024, 2048, 4096].contains(&v)),
        edges: &[0, 256, 511, 512, 513, 768, 1024, 2048, 4096, 4097, 8192, u32::MAX as u64],
    },
    HeaderField {
        name: "generation",
        at: 16,
        width: 8,
        base,
        expect: |v| within(v < MAX_COUNT),
        edges: &[0, MAX_COUNT - 1, MAX_COUNT, u64::MAX],
    },
    HeaderField {
        name: "log_id",
        at: 24,
        width: 8,
        base,
        expect: |v| within(v != 0),
        edges: &[0, 1, u64::MAX],
    },
    HeaderField {
        name: "log_bytes",
        at: 32,
        width: 8,
        base,
        expect: |v| within(v % 4096 == 0 && (AREA_START + MIN_AREA_BYTES..MAX_COUNT).contains(&v)),
        edges: &[
            0,
            AREA_START + MIN_AREA_BYTES - 4096,
            AREA_START + MIN_AREA_BYTES,
            AREA_START + MIN_AREA_BYTES + 512,
            MAX_COUNT - 4096,
            MAX_COUNT,
            u64::MAX,
        ],
    },
    HeaderField {
        name: "flags",
        at: 80,
        width: 4,
        base,
        // 0 moves the data (data_offset), 3 makes a stripe log (data_bytes), 4 a stop (its fields).
        expect: |v| match v {
            1 => Reads,
            0 | 3 | 4 | 5 | 7 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x8000_0001],
    },
    HeaderField {
        name: "data_offset",
        at: 40,
        width: 8,
        base,
        expect: |v| within(v == 0),
        edges: &[0, 1, 4096, u64::MAX],
    },
    HeaderField {
        name: "data_bytes",
        at: 48,
        width: 8,
        base,
        expect: |v| within(v % 512 == 0 && (1..MAX_COUNT).contains(&v)),
        edges: &[0, 1, 511, 512, MAX_COUNT - 512, MAX_COUNT, u64::MAX],
    },
    HeaderField {
        name: "head",
        at: 64,
        width: 8,
        base,
        expect: |v| within(v % 512 == 0 && (0x2000..=0x2000 + AREA).contains(&v)),
        edges: &[0, 0x2000 - 512, 0x2000, 0x2001, 0x2000 + AREA, 0x2000 + AREA + 512, MAX_COUNT, u64::MAX],
    },
    HeaderField {
        name: "tail",
        at: 56,
        width: 8,
        base,
        // Its own bound; past the head the head's bound (tail to tail + area) fails.
        expect: |v| match (v % 512 == 0 && v < MAX_COUNT, v <= 0x3000) {
            (false, _) => Past,
            (true, true) => Reads,
            (true, false) => Coupled,
        },
        edges: &[0, 1, 0x3000, 0x3000 + 512, MAX_COUNT - 512, MAX_COUNT, u64::MAX],
    },
    HeaderField {
        name: "commits",
        at: 72,
        width: 8,
        base,
        expect: |v| within(v < MAX_COUNT),
        edges: &[0, MAX_COUNT - 1, MAX_COUNT, u64::MAX],
    },
    HeaderField {
        name: "stop_reason",
        at: 84,
        width: 4,
        base,
        expect: |v| within(v == 0),
        edges: &[0, 1, 7, u32::MAX as u64],
    },
    HeaderField {
        name: "stop_reason",
        at: 84,
        width: 4,
        base: stopped,
        expect: |v| within((1..=8).contains(&v)),
        edges: &[0, 1, 8, 9, u32::MAX as u64],
    },
    HeaderField {
        name: "stop_lsn",
        at: 96,
        width: 8,
        base: stopped,
        expect: |v| within(v % 512 == 0 && (0x2000..=0x2000 + AREA).contains(&v)),
        edges: &[0, 0x2000 - 512, 0x2000, 0x2001, 0x2000 + AREA, 0x2000 + AREA + 512, u64::MAX],
    },
    HeaderField {
        name: "stop_commit",
        at: 104,
        width: 8,
        base: stopped,
        expect: |v| within(v == 0 || v == 10),
        edges: &[0, 9, 10, 11, u64::MAX],
    },
    HeaderField {
        name: "stop_last_commit",
        at: 112,
        width: 8,
        base: stopped,
        expect: |v| within((10..MAX_COUNT).contains(&v)),
        edges: &[0, 9, 10, MAX_COUNT - 1, MAX_COUNT, u64::MAX],
    },
];

/// A header field set to `value` (its width's low bytes), resealed.
fn with_header_field(field: &HeaderField, value: u64) -> Vec<u8> {
    let mut block = (field.base)().encode();
    let bytes = value.to_le_bytes();
    LeWriter::new(&mut block).put_bytes(field.at, &bytes[..field.width]);
    reseal(&mut block);
    block
}

fn header_field_value() -> impl Strategy<Value = (usize, u64)> {
    (0..HEADER_FIELDS.len()).prop_flat_map(|i| {
        let edges = HEADER_FIELDS[i].edges.to_vec();
        let width = HEADER_FIELDS[i].width;
        let max = if width == 4 { u64::from(u32::MAX) } else { u64::MAX };
        let value = prop_oneof![prop::sample::select(edges), 0..=max];
        (Just(i), value)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_header_of_random_bytes_is_a_fault_or_within_bounds(
        mut block in prop::collection::vec(any::<u8>(), 0..4200),
        magic in any::<bool>(),
        sealed in any::<bool>(),
    ) {
        // Half of them pass the magic and the checksums, so the bounds are reached.
        if magic && block.len() >= 124 {
            block[..8].copy_from_slice(b"IOLABLOG");
            block[8..12].copy_from_slice(&3u32.to_le_bytes());
            if sealed {
                reseal(&mut block);
            }
        }
        if let Ok(Some(header)) = Header::decode(&block) {
            prop_assert!(header_holds_its_bounds(&header), "{header:?}");
        }
    }

    #[test]
    fn a_header_with_flipped_bits_is_a_fault_or_within_bounds(
        flips in prop::collection::vec((0..124usize, 0..8u8), 1..6),
        reseal_after in any::<bool>(),
        stop in any::<bool>(),
    ) {
        let mut block = if stop { stopped().encode() } else { base().encode() };
        for (at, bit) in flips {
            block[at] ^= 1 << bit;
        }
        if reseal_after {
            reseal(&mut block);
        }
        match Header::decode(&block) {
            Ok(Some(header)) => prop_assert!(header_holds_its_bounds(&header), "{header:?}"),
            Ok(None) => prop_assert!(!reseal_after || block[..8] != *b"IOLABLOG", "a sealed slot is read"),
            Err(_) => {}
        }
    }

    #[test]
    fn a_truncated_header_is_absent_or_whole(len in 0..4096usize, stop in any::<bool>()) {
        let block = if stop { stopped().encode() } else { base().encode() };
        let decoded = Header::decode(&block[..len]);
        let expect = if len >= 124 { Some(if stop { stopped() } else { base() }) } else { None };
        prop_assert_eq!(decoded, Ok(expect));
    }

    /// Each field at, inside and past its bounds: within them the header
    /// reads, past them the fault names the field and its byte.
    #[test]
    fn each_header_field_is_checked_against_its_bounds((i, value) in header_field_value()) {
        let field = &HEADER_FIELDS[i];
        let decoded = Header::decode(&with_header_field(field, value));
        match ((field.expect)(value), decoded) {
            (Reads | Coupled, Ok(Some(header))) => prop_assert!(header_holds_its_bounds(&header), "{header:?}"),
            (Coupled, Err(HeaderFault::Field { field: name, .. })) => prop_assert_ne!(name, field.name, "value {}", value),
            (Past, Err(HeaderFault::Field { field: name, .. })) => prop_assert_eq!(name, field.name, "value {}", value),
            (expect, other) => prop_assert!(false, "{}={value} ({expect:?}) gave {other:?}", field.name),
        }
    }
}

// ---- records ----

const SECTOR: u32 = 512;
const HOME_SECTORS: u64 = 1 << 21;
const ZERO_MAX: u64 = 1 << 15;

fn bounds() -> Bounds {
    Bounds {
        log_id: LOG_ID,
        sector_bytes: SECTOR,
        zero_sectors_max: ZERO_MAX,
        home_sectors: vec![HOME_SECTORS; 2],
    }
}

/// A valid record: `kind`, two entries, a payload for blocks; zeros
/// follow it to 4 KiB, as a reader's first read of a record holds.
fn record(kind: RecordKind) -> Vec<u8> {
    let place = RecordPlace { log_id: LOG_ID, lsn: 0x3000, commit: 9 };
    let extents = [Extent { sector: 8, sectors: 2, device: 0 }, Extent { sector: 40, sectors: 1, device: 1 }];
    let payload = vec![0x5au8; 3 * SECTOR as usize];
    let payload: &[&[u8]] = if kind == RecordKind::Blocks { &[&payload] } else { &[] };
    let mut out = Vec::new();
    append_record(&mut out, kind, RECORD_LAST, place, &extents, payload, SECTOR);
    out.resize(4096, 0);
    out
}

/// Reseals a record header of `entries` entries after a field changed.
fn reseal_record(record: &mut [u8], entries: usize) {
    let end = (64 + 16 * entries).min(record.len());
    if end >= 64 {
        Frame::skipped(60).seal(&[], &mut record[..end]);
    }
}

const ROOM: u64 = 1 << 20;

/// Every bound a decoded record header must hold, restated from the docs.
fn record_holds_its_bounds(r: &crate::record::RecordHeader) -> bool {
    let count = r.extents.len();
    let header = (64 + 16 * count as u64).next_multiple_of(u64::from(SECTOR));
    let sectors: u64 = r.extents.iter().map(|e| u64::from(e.sectors)).sum();
    let entries = r.extents.iter().all(|e| {
        e.device < 2
            && e.sectors > 0
            && e.sector < HOME_SECTORS
            && u64::from(e.sectors) <= HOME_SECTORS - e.sector
    });
    let total = match r.kind {
        RecordKind::Blocks => {
            sectors * u64::from(SECTOR) <= MAX_RECORD_DATA as u64
                && r.total_bytes == header + sectors * u64::from(SECTOR)
        }
        RecordKind::Zeros => sectors <= ZERO_MAX && r.total_bytes == header,
        RecordKind::Revoke => r.total_bytes == header,
    };
    (1..=MAX_ENTRIES).contains(&count)
        && r.header_bytes == header
        && r.total_bytes <= ROOM
        && entries
        && total
        && r.flags & !RECORD_LAST == 0
        && r.commit > 0
}

fn kind() -> impl Strategy<Value = RecordKind> {
    prop_oneof![Just(RecordKind::Blocks), Just(RecordKind::Revoke), Just(RecordKind::Zeros)]
}

/// One record field: its byte, width, what a value gives (with the
/// record's kind), and values at and past its bounds.
struct RecordField {
    name: &'static str,
    at: usize,
    width: usize,
    expect: fn(RecordKind, u64) -> Expect,
    edges: &'static [u64],
}

/// The record's entries name 2 sectors at 8 of home 0, then 1 at 40 of home 1.
const RECORD_FIELDS: &[RecordField] = &[
    RecordField {
        name: "kind",
        at: 8,
        width: 4,
        // Another kind wants another total.
        expect: |k, v| match v {
            1..=3 if v == k as u64 => Reads,
            1..=3 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 2, 3, 4, u32::MAX as u64],
    },
    RecordField {
        name: "flags",
        at: 12,
        width: 4,
        expect: |_, v| within(v <= 1),
        edges: &[0, 1, 2, 3, u32::MAX as u64],
    },
    RecordField {
        name: "entries",
        at: 40,
        width: 4,
        // Fewer or more entries than written: the checksum or the total fails.
        expect: |_, v| match v {
            2 => Reads,
            1..=252 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 2, 3, 252, 253, u32::MAX as u64],
    },
    RecordField {
        name: "commit",
        at: 32,
        width: 8,
        expect: |_, v| within((1..MAX_COUNT).contains(&v)),
        edges: &[0, 1, MAX_COUNT - 1, MAX_COUNT, u64::MAX],
    },
    RecordField {
        name: "header_bytes",
        at: 44,
        width: 4,
        expect: |_, v| within(v == 512),
        edges: &[0, 96, 511, 512, 513, 1024, u32::MAX as u64],
    },
    RecordField {
        name: "total_bytes",
        at: 48,
        width: 8,
        expect: |k, v| within(v == if k == RecordKind::Blocks { 512 + 3 * 512 } else { 512 }),
        edges: &[0, 511, 512, 2048, 2049, ROOM, ROOM + 512, u64::MAX],
    },
    RecordField {
        name: "entry.first_sector",
        at: 64,
        width: 8,
        // Past HOME - 2 the entry's 2 sectors run out of the home: their bound fails.
        expect: |_, v| match v {
            v if v <= HOME_SECTORS - 2 => Reads,
            v if v < HOME_SECTORS => Coupled,
            _ => Past,
        },
        edges: &[0, HOME_SECTORS - 2, HOME_SECTORS - 1, HOME_SECTORS, u64::MAX - 1, u64::MAX],
    },
    RecordField {
        name: "entry.sectors",
        at: 72,
        width: 4,
        expect: |k, v| match k {
            // The payload holds three sectors: another count wants another total.
            RecordKind::Blocks if v == 2 => Reads,
            RecordKind::Blocks if (1..=2047).contains(&v) => Coupled,
            RecordKind::Blocks => Past,
            RecordKind::Zeros => within((1..=ZERO_MAX - 1).contains(&v)),
            RecordKind::Revoke => within((1..=HOME_SECTORS - 8).contains(&v)),
        },
        edges: &[
            0,
            1,
            2,
            3,
            2047,
            2048,
            ZERO_MAX - 1,
            ZERO_MAX,
            HOME_SECTORS - 8,
            HOME_SECTORS - 7,
            u32::MAX as u64,
        ],
    },
    RecordField {
        name: "entry.device",
        at: 76,
        width: 4,
        expect: |_, v| within(v < 2),
        edges: &[0, 1, 2, u32::MAX as u64],
    },
];

fn record_field_value() -> impl Strategy<Value = (usize, u64)> {
    (0..RECORD_FIELDS.len()).prop_flat_map(|i| {
        let edges = RECORD_FIELDS[i].edges.to_vec();
        let max = if RECORD_FIELDS[i].width == 4 { u64::from(u32::MAX) } else { u64::MAX };
        (Just(i), prop_oneof![prop::sample::select(edges), 0..=max])
    })
}

fn decode(buf: &[u8]) -> Result<crate::record::RecordHeader, RecordFault> {
    decode_record_header(buf, &bounds(), 0x3000, ROOM)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_record_of_random_bytes_is_a_fault_or_within_bounds(
        mut buf in prop::collection::vec(any::<u8>(), 0..4200),
        entries in 0..300u32,
        magic in any::<bool>(),
    ) {
        // Most of them pass the magic and the checksum, so the bounds are reached.
        if magic && buf.len() >= 64 {
            buf[..8].copy_from_slice(b"IOLBREC1");
            buf[16..24].copy_from_slice(&LOG_ID.to_le_bytes());
            buf[24..32].copy_from_slice(&0x3000u64.to_le_bytes());
            buf[40..44].copy_from_slice(&entries.to_le_bytes());
            reseal_record(&mut buf, entries as usize);
        }
        if let Ok(r) = decode(&buf) {
            prop_assert!(record_holds_its_bounds(&r), "{r:?}");
        }
    }

    #[test]
    fn a_record_with_flipped_bits_is_a_fault_or_within_bounds(
        kind in kind(),
        flips in prop::collection::vec((0..96usize, 0..8u8), 1..6),
        reseal_after in any::<bool>(),
    ) {
        let mut buf = record(kind);
        for (at, bit) in flips {
            buf[at] ^= 1 << bit;
        }
        if reseal_after {
            reseal_record(&mut buf, 2);
        }
        if let Ok(r) = decode(&buf) {
            prop_assert!(record_holds_its_bounds(&r), "{r:?}");
        }
    }

    #[test]
    fn a_truncated_record_header_is_a_fault_or_whole(kind in kind(), len in 0..600usize) {
        let buf = record(kind);
        let decoded = decode(&buf[..len.min(buf.len())]);
        prop_assert_eq!(decoded.is_ok(), len >= 96, "{:?}", decoded);
    }

    /// Each field at, inside and past its bounds: within them the record
    /// decodes, past them the fault names the field.
    #[test]
    fn each_record_field_is_checked_against_its_bounds(kind in kind(), (i, value) in record_field_value()) {
        let field = &RECORD_FIELDS[i];
        let mut buf = record(kind);
        let bytes = value.to_le_bytes();
        LeWriter::new(&mut buf).put_bytes(field.at, &bytes[..field.width]);
        // The checksum covers the entries the header counts: those written.
        reseal_record(&mut buf, if field.name == "entries" { (value as usize).min(252) } else { 2 });
        match ((field.expect)(kind, value), decode(&buf)) {
            (Reads | Coupled, Ok(r)) => prop_assert!(record_holds_its_bounds(&r), "{r:?}"),
            (Coupled, Err(RecordFault::Field { field: name, .. })) => prop_assert_ne!(name, field.name, "value {}", value),
            (Coupled, Err(_)) => {}
            (Past, Err(RecordFault::Field { field: name, .. })) => prop_assert_eq!(name, field.name, "value {}", value),
            (expect, other) => prop_assert!(false, "{}={value} ({expect:?}) gave {other:?}", field.name),
        }
    }
}

/// The regression cases the issue names, one each: a huge total, entry
/// count or sector count is a fault naming the field, never an
/// allocation of what it claims.
#[test]
fn a_record_claiming_a_huge_total_entry_count_or_sector_count_is_a_fault() {
    for (at, width, value, name) in [
        (48usize, 8usize, u64::MAX, "total_bytes"),
        (40, 4, u64::from(u32::MAX), "entries"),
        (72, 4, u64::from(u32::MAX), "entry.sectors"),
    ] {
        let mut buf = record(RecordKind::Zeros);
        LeWriter::new(&mut buf).put_bytes(at, &value.to_le_bytes()[..width]);
        reseal_record(&mut buf, 2);
        match decode(&buf) {
            Err(RecordFault::Field { field, .. }) => assert_eq!(field, name),
            other => panic!("{name}={value} gave {other:?}"),
        }
    }
}

#[test]
fn a_stripe_flag_on_a_device_log_is_a_field_out_of_bounds() {
    let block = with_header_field(&HEADER_FIELDS[4], u64::from(FLAG_STRIPE));
    assert!(matches!(Header::decode(&block), Err(HeaderFault::Field { field: "flags", .. })));
    let stop_flag = with_header_field(&HEADER_FIELDS[4], u64::from(FLAG_SEPARATE | FLAG_STOPPED));
    assert!(Header::decode(&stop_flag).is_err(), "a stop flag needs its fields");
}
