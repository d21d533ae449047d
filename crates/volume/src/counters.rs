//! The statistics record (docs/formats.md, "Volume metadata"): Vinum's
//! counters of every object of a set, accumulated over the processes that
//! used it, kept in two checksummed slots of their own on every drive.
//!
//! This module only encodes and decodes, every field checked against its
//! bound before anything uses it (a damaged or crafted record gives a
//! [`MetadataFault`] naming the device, the slot, the byte and the field);
//! `metadata.rs` decides where the record goes, and assembly (`assemble.rs`)
//! passes over a record that fails, with a warning. The record is never written together with the
//! configuration, so a torn write of it can lose at most the latest
//! counters, never a configuration copy.

use std::collections::BTreeMap;

use codec::{Frame, LeWriter};
use device::StatsSnapshot;

use crate::error::{FaultKind, MetadataArea, MetadataFault};
use crate::object::{ObjectKind, PlexCountersSnapshot};
use crate::ondisk::{stats_slot_at, Fields, GENERATION_MAX, STATS_SLOT_BYTES};
use crate::volume::VolumeReport;

/// Magic of a statistics record.
pub const STATS_MAGIC: &[u8; 8] = b"IOLABSTS";
/// Version of the statistics record layout.
pub const STATS_VERSION: u32 = 1;
/// Bytes of the fixed part of a record before its entries.
pub const STATS_PREFIX_BYTES: usize = 48;
/// The most bytes of entries a record holds: the rest of its slot.
pub const STATS_BODY_BYTES_MAX: usize = STATS_SLOT_BYTES as usize - STATS_PREFIX_BYTES;
/// Counters per entry in version 1.
pub const COUNTERS_PER_ENTRY: usize = 11;
/// The shortest entry: kind, name length, a one-byte name, the counters.
pub const STATS_ENTRY_BYTES_MIN: usize = 3 + 8 * COUNTERS_PER_ENTRY;
/// The highest sequence a record may carry: as the configuration's
/// generations, far past any real count of saves, so the ones after it
/// cannot overflow.
pub const STATS_SEQUENCE_MAX: u64 = GENERATION_MAX;
/// A record's checksum: at byte 12, over the prefix and the entries with
/// the field zero.
const FRAME: Frame = Frame::zeroed(12);

/// Every counter any object has; an object leaves the ones it lacks at 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flushes: u64,
    pub errors: u64,
    pub multiblock: u64,
    pub multistripe: u64,
    pub recovered_reads: u64,
    pub degraded_writes: u64,
    pub parityless_writes: u64,
}

impl Counters {
    fn to_array(self) -> [u64; COUNTERS_PER_ENTRY] {
        [
            self.reads,
            self.writes,
            self.bytes_read,
            self.bytes_written,
            self.flushes,
            self.errors,
            self.multiblock,
            self.multistripe,
            self.recovered_reads,
            self.degraded_writes,
            self.parityless_writes,
        ]
    }

    fn from_array(a: [u64; COUNTERS_PER_ENTRY]) -> Counters {
        Counters {
            reads: a[0],
            writes: a[1],
            bytes_read: a[2],
            bytes_written: a[3],
            flushes: a[4],
            errors: a[5],
            multiblock: a[6],
            multistripe: a[7],
            recovered_reads: a[8],
            degraded_writes: a[9],
            parityless_writes: a[10],
        }
    }

    /// The sum, saturating (counters never wrap to small numbers).
    pub fn plus(self, other: Counters) -> Counters {
        let (a, b) = (self.to_array(), other.to_array());
        Counters::from_array(std::array::from_fn(|i| a[i].saturating_add(b[i])))
    }

    pub fn is_zero(&self) -> bool {
        self.to_array().iter().all(|&c| c == 0)
    }

    pub fn from_stats(s: &StatsSnapshot) -> Counters {
        Counters {
            reads: s.reads,
            writes: s.writes,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            flushes: s.flushes,
            errors: s.errors,
            ..Counters::default()
        }
    }

    pub fn from_plex(p: &PlexCountersSnapshot) -> Counters {
        Counters {
            reads: p.reads,
            writes: p.writes,
            bytes_read: p.bytes_read,
            bytes_written: p.bytes_written,
            multiblock: p.multiblock,
            multistripe: p.multistripe,
            recovered_reads: p.recovered_reads,
            degraded_writes: p.degraded_writes,
            parityless_writes: p.parityless_writes,
            ..Counters::default()
        }
    }

    fn add_to_stats(&self, s: &mut StatsSnapshot) {
        let sum = Counters::from_stats(s).plus(*self);
        *s = StatsSnapshot {
            reads: sum.reads,
            writes: sum.writes,
            bytes_read: sum.bytes_read,
            bytes_written: sum.bytes_written,
            flushes: sum.flushes,
            errors: sum.errors,
        };
    }

    fn add_to_plex(&self, p: &mut PlexCountersSnapshot) {
        let sum = Counters::from_plex(p).plus(*self);
        *p = PlexCountersSnapshot {
            reads: sum.reads,
            writes: sum.writes,
            bytes_read: sum.bytes_read,
            bytes_written: sum.bytes_written,
            multiblock: sum.multiblock,
            multistripe: sum.multistripe,
            recovered_reads: sum.recovered_reads,
            degraded_writes: sum.degraded_writes,
            parityless_writes: sum.parityless_writes,
        };
    }
}

/// The counters of a set's objects, keyed by kind and name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsRecord {
    pub objects: BTreeMap<(ObjectKind, String), Counters>,
}

impl StatsRecord {
    /// The counters of every object in `reports` (drives shared by several
    /// volumes are taken once).
    pub fn from_reports(reports: &[VolumeReport]) -> StatsRecord {
        let mut objects = BTreeMap::new();
        for v in reports {
            let mut volume = Counters::from_stats(&v.stats);
            volume.recovered_reads = v.recovered_reads;
            objects.insert((ObjectKind::Volume, v.name.clone()), volume);
            for p in &v.plexes {
                objects.insert((ObjectKind::Plex, p.name.clone()), Counters::from_plex(&p.counters));
                for sd in &p.subdisks {
                    objects.insert((ObjectKind::Subdisk, sd.name.clone()), Counters::from_stats(&sd.stats));
                }
            }
            for d in &v.drives {
                objects.insert((ObjectKind::Drive, d.name.clone()), Counters::from_stats(&d.stats));
            }
        }
        StatsRecord { objects }
    }

    /// Object by object sum of two records.
    pub fn plus(&self, other: &StatsRecord) -> StatsRecord {
        let mut objects = self.objects.clone();
        for (key, counters) in &other.objects {
            let entry = objects.entry(key.clone()).or_default();
            *entry = entry.plus(*counters);
        }
        StatsRecord { objects }
    }

    pub fn get(&self, kind: ObjectKind, name: &str) -> Counters {
        self.objects.get(&(kind, name.to_string())).copied().unwrap_or_default()
    }

    /// Adds this record's counters to the objects of `report`.
    pub fn add_to_report(&self, report: &mut VolumeReport) {
        let volume = self.get(ObjectKind::Volume, &report.name);
        volume.add_to_stats(&mut report.stats);
        report.recovered_reads = report.recovered_reads.saturating_add(volume.recovered_reads);
        for p in &mut report.plexes {
            self.get(ObjectKind::Plex, &p.name).add_to_plex(&mut p.counters);
            for sd in &mut p.subdisks {
                self.get(ObjectKind::Subdisk, &sd.name).add_to_stats(&mut sd.stats);
            }
        }
        for d in &mut report.drives {
            self.get(ObjectKind::Drive, &d.name).add_to_stats(&mut d.stats);
        }
    }
}

/// One slot's bytes: the record with its sequence number, or why it is
/// too big for a slot (the bound is [`STATS_SLOT_BYTES`]).
pub fn encode_stats(set_id: &[u8; 16], sequence: u64, record: &StatsRecord) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    for ((kind, name), counters) in &record.objects {
        let name_len = u8::try_from(name.len()).map_err(|_| format!("object name '{name}' is too long"))?;
        body.push(*kind as u8);
        body.push(name_len);
        body.extend_from_slice(name.as_bytes());
        let at = body.len();
        body.resize(at + 8 * COUNTERS_PER_ENTRY, 0);
        let mut w = LeWriter::new(&mut body[at..]);
        for (i, c) in counters.to_array().into_iter().enumerate() {
            w.put_u64(8 * i, c);
        }
    }
    let body_max = STATS_SLOT_BYTES as usize - STATS_PREFIX_BYTES;
    if body.len() > body_max {
        return Err(format!(
            "the counters of {} objects take {} bytes; a statistics slot holds at most {body_max}",
            record.objects.len(),
            body.len()
        ));
    }
    let mut slot = vec![0u8; STATS_SLOT_BYTES as usize];
    LeWriter::new(&mut slot)
        .put_bytes(0, STATS_MAGIC)
        .put_u32(8, STATS_VERSION)
        .put_bytes(16, set_id)
        .put_u64(32, sequence)
        .put_u32(40, body.len() as u32)
        .put_u32(44, record.objects.len() as u32)
        .put_bytes(STATS_PREFIX_BYTES, &body);
    FRAME.seal(&[], &mut slot[..STATS_PREFIX_BYTES + body.len()]);
    debug_assert_eq!(slot.len() as u64, STATS_SLOT_BYTES, "a record fills exactly one slot");
    debug_assert!(
        decode_stats("encoder", (sequence % 2) as u8, set_id, &slot)
            .is_ok_and(|(s, r)| s == sequence && r == *record),
        "round trip"
    );
    Ok(slot)
}

/// A record read from statistics slot `slot` of `device` that passes
/// every check of docs/formats.md ("Statistics record"), in this order:
/// magic, version, body length (at most the slot, checked before the
/// checksum that covers it), checksum, set id (`set_id`, the header's),
/// sequence (1 to [`STATS_SEQUENCE_MAX`], in the slot its parity names),
/// entry count (no more than the body holds), then each entry (a known
/// kind, a name of 1 to 255 bytes of UTF-8 inside the body, in the
/// encoder's order of kind then name, no object twice) and the body tiled
/// exactly. Returns (sequence, record).
pub fn decode_stats(
    device: &str,
    slot: u8,
    set_id: &[u8; 16],
    bytes: &[u8],
) -> Result<(u64, StatsRecord), MetadataFault> {
    let f = Fields { device, area: MetadataArea::StatsSlot(slot), base: stats_slot_at(slot), bytes };
    if bytes.len() < STATS_SLOT_BYTES as usize {
        return Err(f.cut(0, "record", STATS_SLOT_BYTES as usize));
    }
    f.magic(STATS_MAGIC, "IOLABSTS")?;
    f.version(STATS_VERSION)?;
    let body_bytes = f.u32(40, "body_bytes")? as usize;
    if body_bytes > STATS_BODY_BYTES_MAX {
        let bounds = format!("0 to {STATS_BODY_BYTES_MAX}, the rest of the slot");
        return Err(f.fault(40, "body_bytes", FaultKind::OutOfBounds { found: body_bytes as u64, bounds }));
    }
    f.checksum(STATS_PREFIX_BYTES + body_bytes)?;
    if f.bytes(16, 16, "set_id")? != set_id {
        return Err(f.fault(16, "set_id", FaultKind::OtherSet));
    }
    let sequence = f.u64(32, "sequence")?;
    if sequence == 0 || sequence > STATS_SEQUENCE_MAX || sequence % 2 != u64::from(slot) {
        let bounds = format!("1 to 2^56, and sequence s lives in slot s mod 2 (this is slot {slot})");
        return Err(f.fault(32, "sequence", FaultKind::OutOfBounds { found: sequence, bounds }));
    }
    let entries = f.u32(44, "entries")? as usize;
    if entries > body_bytes / STATS_ENTRY_BYTES_MIN {
        let bounds = format!(
            "at most {}: {body_bytes} bytes of entries of at least {STATS_ENTRY_BYTES_MIN} bytes",
            body_bytes / STATS_ENTRY_BYTES_MIN
        );
        return Err(f.fault(44, "entries", FaultKind::OutOfBounds { found: entries as u64, bounds }));
    }
    let record = decode_entries(&f, STATS_PREFIX_BYTES + body_bytes, entries)?;
    Ok((sequence, record))
}

/// `count` entries from byte 48 of the record to `end`, which they tile
/// exactly.
fn decode_entries(f: &Fields<'_>, end: usize, count: usize) -> Result<StatsRecord, MetadataFault> {
    let malformed =
        |at: usize, field: &'static str, why: String| f.fault(at, field, FaultKind::Malformed(why));
    let mut objects = BTreeMap::new();
    let mut at = STATS_PREFIX_BYTES;
    for i in 0..count {
        let code = f.u8(at, "entry_kind")?;
        let kind = ObjectKind::from_byte(code).ok_or_else(|| {
            let bounds = "1 drive, 2 subdisk, 3 plex or 4 volume".to_string();
            f.fault(at, "entry_kind", FaultKind::OutOfBounds { found: u64::from(code), bounds })
        })?;
        let name_len = usize::from(f.u8(at + 1, "entry_name_length")?);
        let entry_end = at + 2 + name_len + 8 * COUNTERS_PER_ENTRY;
        if name_len == 0 || entry_end > end {
            let bounds = format!(
                "1 to 255, and entry {i} ends within the {} bytes of entries",
                end - STATS_PREFIX_BYTES
            );
            let problem = FaultKind::OutOfBounds { found: name_len as u64, bounds };
            return Err(f.fault(at + 1, "entry_name_length", problem));
        }
        let name = f.bytes(at + 2, name_len, "entry_name")?;
        let name = std::str::from_utf8(name)
            .map_err(|e| malformed(at + 2 + e.valid_up_to(), "entry_name", "not UTF-8".into()))?;
        let counters_at = at + 2 + name_len;
        let mut values = [0; COUNTERS_PER_ENTRY];
        for (k, value) in values.iter_mut().enumerate() {
            // Any value: counters are summed saturating.
            *value = f.u64(counters_at + 8 * k, "entry_counters")?;
        }
        // The encoder writes entries in the order of their keys, each once:
        // a record in another order is not one it wrote.
        let key = (kind, name.to_string());
        if objects.last_key_value().is_some_and(|(last, _)| *last >= key) {
            let why = format!("entry {i} ({kind:?} '{name}') is out of order or repeats an object");
            return Err(malformed(at, "entry_name", why));
        }
        objects.insert(key, Counters::from_array(values));
        at = entry_end;
    }
    if at != end {
        let why = format!("{} bytes after the last of the {count} entries", end - at);
        return Err(malformed(at, "body_bytes", why));
    }
    Ok(StatsRecord { objects })
}

#[cfg(test)]
mod tests {
    use super::*;
    use codec::golden::hex;

    fn record() -> StatsRecord {
        let mut objects = BTreeMap::new();
        objects.insert(
            (ObjectKind::Plex, "v.p0".into()),
            Counters { reads: 3, multiblock: 2, ..Counters::default() },
        );
        objects.insert(
            (ObjectKind::Drive, "d0".into()),
            Counters { bytes_written: 1 << 40, ..Counters::default() },
        );
        StatsRecord { objects }
    }

    /// The bytes of a statistics slot, field by field, as docs/formats.md
    /// ("Volume metadata") gives them, taken from the encoder before its
    /// little-endian and checksum code moved to the codec crate.
    #[test]
    fn a_statistics_slot_is_byte_for_byte_the_documented_one() {
        let mut objects = BTreeMap::new();
        objects.insert(
            (ObjectKind::Plex, "v.p0".into()),
            Counters { reads: 3, multiblock: 2, ..Counters::default() },
        );
        let record = StatsRecord { objects };
        let slot = encode_stats(&[7; 16], 9, &record).unwrap();
        assert_eq!(slot.len() as u64, STATS_SLOT_BYTES);
        let counters = format!("03{}02{}", "0".repeat(6 * 16 - 2), "0".repeat(5 * 16 - 2));
        let fields = [
            "494f4c4142535453",                 // magic "IOLABSTS"
            "01000000",                         // version 1
            "cf014a26",                         // crc32c of the prefix and entries with this field zero
            "07070707070707070707070707070707", // set id
            "0900000000000000",                 // sequence
            "5e000000",                         // entry bytes
            "01000000",                         // entries
            "03",                               // entry: kind plex,
            "04",                               //   name length,
            "762e7030",                         //   name "v.p0",
            &counters,                          //   11 counters: reads 3, multiblock 2
        ];
        let golden = fields.concat();
        assert_eq!(hex(&slot[..golden.len() / 2]), golden);
        assert!(slot[golden.len() / 2..].iter().all(|&b| b == 0));
        assert_eq!(decode_stats("d0", 1, &[7; 16], &slot), Ok((9, record)));
    }

    #[test]
    fn record_round_trips() {
        let slot = encode_stats(&[7; 16], 9, &record()).unwrap();
        assert_eq!(decode_stats("d0", 1, &[7; 16], &slot).unwrap(), (9, record()));
    }

    #[test]
    fn flipped_counter_byte_fails_the_checksum() {
        let mut slot = encode_stats(&[7; 16], 9, &record()).unwrap();
        slot[STATS_PREFIX_BYTES + 10] ^= 1;
        let fault = decode_stats("d0", 1, &[7; 16], &slot).unwrap_err();
        assert!(matches!(fault.problem, FaultKind::Checksum { .. }), "{fault}");
    }

    #[test]
    fn record_of_another_set_refused() {
        let slot = encode_stats(&[7; 16], 9, &record()).unwrap();
        let fault = decode_stats("d0", 1, &[8; 16], &slot).unwrap_err();
        assert_eq!((fault.field, fault.problem), ("set_id", FaultKind::OtherSet));
    }

    #[test]
    fn too_many_objects_refused_not_truncated() {
        let mut big = StatsRecord::default();
        for i in 0..200 {
            big.objects.insert(
                (ObjectKind::Subdisk, format!("volume-with-a-long-name.p0.s{i}")),
                Counters::default(),
            );
        }
        assert!(encode_stats(&[7; 16], 1, &big).unwrap_err().contains("at most"));
    }
}
