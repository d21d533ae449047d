//! What the logged device and the stripe log share: the in-memory form of
//! logged sectors, encoding a commit into records, and writing records and
//! header slots.

use std::collections::BTreeMap;
use std::sync::Arc;

use device::{AlignedBuf, Device, Result};

use crate::format::{Header, AREA_START, SLOT_BYTES};
use crate::record::{
    append_record, max_zero_sectors, record_header_bytes, Extent, RecordKind, RecordPlace, MAX_ENTRIES,
    MAX_RECORD_DATA, RECORD_LAST,
};

/// One logged sector: a shared copy of the write it came from, its index,
/// and whether it is all zero (a zeros record then names it, no data).
#[derive(Clone)]
pub(crate) struct Sector {
    pub(crate) data: Arc<[u8]>,
    pub(crate) index: u32,
    pub(crate) zero: bool,
}

impl Sector {
    pub(crate) fn bytes(&self, sector_bytes: usize) -> &[u8] {
        let at = self.index as usize * sector_bytes;
        &self.data[at..at + sector_bytes]
    }
}

/// Logged sectors of one home device, by sector number.
pub(crate) type SectorMap = BTreeMap<u64, Sector>;

/// Adds `buf`, written at byte `offset`, to `map` sector by sector;
/// returns by how much that changed the number of sectors in `map` that
/// are not all zero.
///
/// A write that is all zero keeps no copy of its own: its sectors share
/// one buffer of zeros, so a transaction of cleared blocks costs memory
/// for its entries only.
pub(crate) fn join(map: &mut SectorMap, buf: &[u8], offset: u64, sector_bytes: u32) -> i64 {
    let sector = sector_bytes as usize;
    let zeros = shared_zeros();
    let shared = sector <= zeros.len() && all_zero(buf);
    let copy: Arc<[u8]> = if shared { zeros } else { Arc::from(buf) };
    let first = offset / u64::from(sector_bytes);
    let mut change = 0i64;
    for (index, bytes) in buf.chunks_exact(sector).enumerate() {
        let zero = shared || all_zero(bytes);
        let at = if shared { 0 } else { index as u32 };
        let new = Sector { data: Arc::clone(&copy), index: at, zero };
        let old = map.insert(first + index as u64, new);
        change += i64::from(!zero) - old.map_or(0, |o| i64::from(!o.zero));
    }
    change
}

/// One buffer of zeros every zero sector of every log shares.
fn shared_zeros() -> Arc<[u8]> {
    static ZEROS: std::sync::OnceLock<Arc<[u8]>> = std::sync::OnceLock::new();
    Arc::clone(ZEROS.get_or_init(|| Arc::from(vec![0u8; 64 << 10])))
}

/// An upper bound on the log bytes of a commit of `sectors` logged sectors
/// and `revokes` revocations, headers included.
pub(crate) fn txn_bytes_bound(sectors: u64, revokes: u64, sector_bytes: u32) -> u64 {
    txn_bytes_bound_of(sectors, sectors, revokes, sector_bytes)
}

/// [`txn_bytes_bound`] when only `nonzero` of the sectors carry data (the
/// others go in zeros records): each record's entries name at least one
/// sector, so the entries of every kind together need no more headers
/// than the sectors would.
pub(crate) fn txn_bytes_bound_of(sectors: u64, nonzero: u64, revokes: u64, sector_bytes: u32) -> u64 {
    let data = nonzero.min(sectors) * u64::from(sector_bytes);
    let records =
        3 + sectors / MAX_ENTRIES as u64 + data / MAX_RECORD_DATA as u64 + revokes / MAX_ENTRIES as u64;
    data + records * 4096 + SLOT_BYTES
}

/// Whether `bytes` are all zero.
fn all_zero(bytes: &[u8]) -> bool {
    const ZEROS: [u8; 4096] = [0; 4096];
    bytes.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()])
}

/// The sectors of `map` as runs of contiguous sectors of home `device`,
/// each either all zero (`true`: a zero record names it, with no data) or
/// not, in order.
fn runs_of(device: u32, map: &SectorMap, sector_bytes: usize) -> Vec<(Extent, bool)> {
    let mut runs: Vec<(Extent, bool)> = Vec::new();
    for (&s, copy) in map {
        let zero = copy.zero;
        debug_assert_eq!(zero, all_zero(copy.bytes(sector_bytes)));
        match runs.last_mut() {
            Some((e, z)) if *z == zero && e.sector + u64::from(e.sectors) == s && e.sectors < u32::MAX => {
                e.sectors += 1
            }
            _ => runs.push((Extent { sector: s, sectors: 1, device }, zero)),
        }
    }
    runs
}

/// Coalesces sorted sector numbers of home `device` into extents.
pub(crate) fn extents_of(device: u32, sectors: impl Iterator<Item = u64>) -> Vec<Extent> {
    let mut extents: Vec<Extent> = Vec::new();
    for s in sectors {
        match extents.last_mut() {
            Some(e) if e.sector + u64::from(e.sectors) == s && e.sectors < u32::MAX => e.sectors += 1,
            _ => extents.push(Extent { sector: s, sectors: 1, device }),
        }
    }
    extents
}

/// One record of a commit: its kind, extents and payload's pieces.
type Piece<'a> = (RecordKind, Vec<Extent>, Vec<&'a [u8]>);

/// Where one commit goes: the log, its first LSN and number, the area's
/// size (it bounds a zeros record) and the sector.
pub(crate) struct CommitPlace {
    pub(crate) log_id: u64,
    pub(crate) head: u64,
    pub(crate) commit: u64,
    pub(crate) area_bytes: u64,
    pub(crate) sector_bytes: u32,
}

/// Encodes one commit into `out` (emptied first, its room kept: a
/// committer reuses one buffer for every commit): revocation records
/// first, then block records for every home device's sectors, then zero
/// records naming the sectors that are all zero (no copy of their bytes,
/// at most `max_zero_sectors` of them a record); the last record is
/// flagged. Each sector's bytes are copied once, from the logged copy
/// into `out`.
pub(crate) fn encode_commit_into(
    out: &mut Vec<u8>,
    place: &CommitPlace,
    groups: &[(u32, &SectorMap)],
    revokes: &[Extent],
) {
    let (log_id, head, commit, sector_bytes) = (place.log_id, place.head, place.commit, place.sector_bytes);
    let sector = sector_bytes as usize;
    let mut pieces: Vec<Piece<'_>> = Vec::new();
    for chunk in revokes.chunks(MAX_ENTRIES) {
        pieces.push((RecordKind::Revoke, chunk.to_vec(), Vec::new()));
    }
    let mut extents: Vec<Extent> = Vec::new();
    let mut payload: Vec<&[u8]> = Vec::new();
    let mut zeros: Vec<Extent> = Vec::new();
    for (device, sectors) in groups {
        for (extent, zero) in runs_of(*device, sectors, sector) {
            if zero {
                zeros.push(extent);
                continue;
            }
            let mut left = extent;
            while left.sectors > 0 {
                let room = (MAX_RECORD_DATA / sector).saturating_sub(payload.len());
                if extents.len() == MAX_ENTRIES || room == 0 {
                    let full =
                        (RecordKind::Blocks, std::mem::take(&mut extents), std::mem::take(&mut payload));
                    pieces.push(full);
                    continue;
                }
                let take = (left.sectors as usize).min(room) as u32;
                for s in left.sector..left.sector + u64::from(take) {
                    payload.push(sectors[&s].bytes(sector));
                }
                extents.push(Extent { sector: left.sector, sectors: take, device: *device });
                left = Extent {
                    sector: left.sector + u64::from(take),
                    sectors: left.sectors - take,
                    device: *device,
                };
            }
        }
    }
    if !extents.is_empty() {
        pieces.push((RecordKind::Blocks, extents, payload));
    }
    for chunk in zero_records(&zeros, max_zero_sectors(place.area_bytes)) {
        pieces.push((RecordKind::Zeros, chunk, Vec::new()));
    }
    out.clear();
    let bytes: u64 = pieces
        .iter()
        .map(|(_, extents, payload)| {
            record_header_bytes(extents.len(), sector_bytes)
                + ((payload.len() * sector) as u64).next_multiple_of(u64::from(sector_bytes))
        })
        .sum();
    out.reserve(bytes as usize);
    let count = pieces.len();
    for (i, (kind, extents, payload)) in pieces.into_iter().enumerate() {
        let flags = if i + 1 == count { RECORD_LAST } else { 0 };
        let place = RecordPlace { log_id, lsn: head + out.len() as u64, commit };
        append_record(out, kind, flags, place, &extents, &payload, sector_bytes);
    }
}

/// The zero extents as records of at most `MAX_ENTRIES` entries naming at
/// most `most` sectors together, an extent split where it must be.
fn zero_records(zeros: &[Extent], most: u64) -> Vec<Vec<Extent>> {
    let most = most.clamp(1, u64::from(u32::MAX)) as u32;
    let mut records: Vec<Vec<Extent>> = vec![Vec::new()];
    let mut room = most;
    for extent in zeros {
        let mut left = *extent;
        while left.sectors > 0 {
            let full = records.last().is_some_and(|r| r.len() == MAX_ENTRIES);
            if room == 0 || full {
                records.push(Vec::new());
                room = most;
            }
            let take = left.sectors.min(room);
            if let Some(record) = records.last_mut() {
                record.push(Extent { sectors: take, ..left });
            }
            room -= take;
            left = Extent { sector: left.sector + u64::from(take), sectors: left.sectors - take, ..left };
        }
    }
    records.retain(|r| !r.is_empty());
    records
}

/// Writes `bytes` into the circular area at `lsn`, wrapping at its end.
pub(crate) fn write_circular(log: &dyn Device, header: &Header, lsn: u64, bytes: &[u8]) -> Result<()> {
    let area = header.area_bytes();
    let start = lsn % area;
    let first = (bytes.len() as u64).min(area - start) as usize;
    write_aligned(log, &bytes[..first], AREA_START + start)?;
    if first < bytes.len() {
        write_aligned(log, &bytes[first..], AREA_START)?;
    }
    Ok(())
}

/// Writes one header slot.
pub(crate) fn write_slot(log: &dyn Device, slot: u64, block: &[u8]) -> Result<()> {
    write_aligned(log, block, slot * SLOT_BYTES)
}

/// Writes `buf`, through an aligned copy only when the device needs one
/// (O_DIRECT) and `buf` is not aligned already.
pub(crate) fn write_aligned(dev: &dyn Device, buf: &[u8], offset: u64) -> Result<()> {
    let align = dev.buffer_align();
    if align <= 1 || (buf.as_ptr() as usize) % align == 0 {
        return dev.write_at(buf, offset);
    }
    let mut copy = AlignedBuf::zeroed(buf.len(), align);
    copy.copy_from_slice(buf);
    dev.write_at(&copy, offset)
}

/// A new log id, never 0.
pub(crate) fn new_log_id() -> u64 {
    codec::fresh_id() | 1
}

/// Starts a log: slot 1 cleared (so a header of an earlier log cannot win),
/// `header` (generation 0) in slot 0, flushed.
pub(crate) fn write_new_log(log: &dyn Device, header: &Header) -> Result<()> {
    debug_assert_eq!(header.generation, 0);
    write_slot(log, 1, &vec![0u8; SLOT_BYTES as usize])?;
    write_slot(log, 0, &header.encode())?;
    log.flush()
}
