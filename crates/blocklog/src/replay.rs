//! Replay: read the newer commit header, walk the committed records from
//! tail to head, keep the latest copy of each sector (revocations drop
//! earlier copies), write them home, flush, and reset the log. Nothing is
//! written before the walk ends, so a replay interrupted by another crash
//! is simply run again.

use std::collections::BTreeMap;

use device::{AlignedBuf, Device};
use serde::Serialize;

use crate::format::{self, Header, RecordFault, RecordKind, RECORD_LAST, SLOT_BYTES};
use crate::LogError;

/// Where replay stopped early, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReplayStop {
    /// The LSN of the record that failed, and its byte offset on the log device.
    pub lsn: u64,
    pub offset: u64,
    pub reason: String,
}

/// What a replay found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    pub records: u64,
    pub commits: u64,
    pub sectors_written_home: u64,
    pub revoked_sectors: u64,
    /// Sectors whose home is out of service (a RAID-5 drive missing or
    /// down), not written: its data is rebuilt from the others.
    pub sectors_skipped: u64,
    /// Set when a committed record failed its checks: commits from there
    /// on were not replayed.
    pub stopped: Option<ReplayStop>,
}

/// Reads both header slots and returns the valid one with the higher
/// generation, or `None` when neither is valid.
pub fn newest_header(log: &dyn Device) -> Result<Option<Header>, LogError> {
    if log.size_bytes() < 2 * SLOT_BYTES {
        return Ok(None);
    }
    let mut buf = AlignedBuf::zeroed(2 * SLOT_BYTES as usize, log.buffer_align().max(4096));
    log.read_at(&mut buf, 0)?;
    let first = Header::decode(&buf[..SLOT_BYTES as usize])?;
    let second = Header::decode(&buf[SLOT_BYTES as usize..])?;
    Ok(match (first, second) {
        (Some(a), Some(b)) => Some(if a.generation >= b.generation { a } else { b }),
        (Some(a), None) | (None, Some(a)) => Some(a),
        (None, None) => None,
    })
}

/// Reads `buf.len()` bytes of the circular area starting at `lsn`.
pub fn read_circular(log: &dyn Device, header: &Header, lsn: u64, buf: &mut [u8]) -> Result<(), LogError> {
    let area = header.area_bytes();
    let start = lsn % area;
    let first = (buf.len() as u64).min(area - start) as usize;
    log.read_at(&mut buf[..first], format::AREA_START + start)?;
    if first < buf.len() {
        log.read_at(&mut buf[first..], format::AREA_START)?;
    }
    Ok(())
}

/// Each sector's latest logged contents, by home device and sector.
type SectorMap = BTreeMap<(u32, u64), Vec<u8>>;

/// Where replay writes the blocks of one home device: `bytes` bytes from
/// byte `offset` of `dev`. A home out of service is neither written nor
/// flushed.
pub struct Home<'a> {
    pub dev: &'a dyn Device,
    pub offset: u64,
    pub bytes: u64,
    pub in_service: bool,
}

/// Walks the committed records and writes the latest copy of every
/// sector home; returns the header to write next (tail = head).
pub fn replay(log: &dyn Device, homes: &[Home<'_>], header: &Header) -> Result<Replayed, LogError> {
    let sector = u64::from(header.sector_bytes);
    let mut report = ReplayReport::default();
    let mut latest = SectorMap::new();
    let mut commit: Vec<(format::RecordHeader, Vec<u8>)> = Vec::new();
    let limit = header.tail + header.area_bytes();
    let mut lsn = header.tail;
    let mut end = header.tail;
    while lsn < limit {
        match read_record(log, header, lsn, limit, homes.len()) {
            Ok((record, payload)) => {
                lsn += record.total_bytes;
                report.records += 1;
                let last = record.flags & RECORD_LAST != 0;
                commit.push((record, payload));
                if last {
                    apply_commit(&mut latest, &mut report, std::mem::take(&mut commit), sector);
                    end = lsn;
                }
            }
            // Before the head every record is committed: a failure there
            // is damage, reported. After it, the first record that fails
            // is simply where the log ends.
            Err(fault) if lsn < header.head => {
                let offset = format::AREA_START + lsn % header.area_bytes();
                report.stopped = Some(ReplayStop { lsn, offset, reason: fault.to_string() });
                break;
            }
            Err(_) => break,
        }
    }
    if report.stopped.is_none() && end < header.head {
        let offset = format::AREA_START + end % header.area_bytes();
        let reason = "the head was reached inside a commit".to_string();
        report.stopped = Some(ReplayStop { lsn: end, offset, reason });
    }
    write_home(homes, header, &latest, &mut report)?;
    for home in homes.iter().filter(|h| h.in_service) {
        home.dev.flush()?;
    }
    Ok(Replayed { report, end: end.max(header.head) })
}

/// What replay did, and where the log's valid records end.
pub struct Replayed {
    pub report: ReplayReport,
    pub end: u64,
}

fn read_record(
    log: &dyn Device,
    header: &Header,
    lsn: u64,
    limit: u64,
    homes: usize,
) -> Result<(format::RecordHeader, Vec<u8>), RecordFault> {
    let room = limit - lsn;
    let first_len = room.min(4096) as usize;
    let align = log.buffer_align().max(512);
    let mut first = AlignedBuf::zeroed(first_len, align);
    read_circular(log, header, lsn, &mut first).map_err(|_| RecordFault::BadLength)?;
    let record = format::decode_record_header(&first, header.log_id, lsn, room)?;
    if record.extents.iter().any(|e| e.device as usize >= homes) {
        return Err(RecordFault::BadLength);
    }
    let sector = u64::from(header.sector_bytes);
    let data_bytes: u64 = match record.kind {
        RecordKind::Blocks => record.extents.iter().map(|e| u64::from(e.sectors) * sector).sum(),
        RecordKind::Revoke | RecordKind::Zeros => 0,
    };
    if record.header_bytes + data_bytes > record.total_bytes {
        return Err(RecordFault::BadLength);
    }
    let mut payload = AlignedBuf::zeroed((record.total_bytes - record.header_bytes) as usize, align);
    if !payload.is_empty() {
        read_circular(log, header, lsn + record.header_bytes, &mut payload)
            .map_err(|_| RecordFault::BadLength)?;
    }
    let payload = payload[..data_bytes as usize].to_vec();
    if crc32c::crc32c(&payload) != record.payload_crc {
        return Err(RecordFault::PayloadChecksum);
    }
    Ok((record, payload))
}

/// Applies one whole commit: its revocations first (they cancel copies of
/// earlier commits), then its blocks in order.
fn apply_commit(
    latest: &mut SectorMap,
    report: &mut ReplayReport,
    commit: Vec<(format::RecordHeader, Vec<u8>)>,
    sector: u64,
) {
    for (record, _) in commit.iter().filter(|(r, _)| r.kind == RecordKind::Revoke) {
        for extent in &record.extents {
            for s in extent.sector..extent.sector + u64::from(extent.sectors) {
                if latest.remove(&(extent.device, s)).is_some() {
                    report.revoked_sectors += 1;
                }
            }
        }
    }
    // A commit names each sector once: its block and zero records apply
    // in any order.
    for (record, payload) in commit.iter().filter(|(r, _)| r.kind != RecordKind::Revoke) {
        let mut at = 0usize;
        for extent in &record.extents {
            for s in extent.sector..extent.sector + u64::from(extent.sectors) {
                let bytes = match record.kind {
                    RecordKind::Zeros => vec![0; sector as usize],
                    _ => payload[at..at + sector as usize].to_vec(),
                };
                latest.insert((extent.device, s), bytes);
                at += sector as usize;
            }
        }
    }
    report.commits += 1;
}

fn write_home(
    homes: &[Home<'_>],
    header: &Header,
    latest: &SectorMap,
    report: &mut ReplayReport,
) -> Result<(), LogError> {
    let sector = u64::from(header.sector_bytes);
    let mut run: Vec<u8> = Vec::new();
    let mut run_start = (0u32, 0u64);
    let flush_run = |run: &mut Vec<u8>, (device, start): (u32, u64)| -> Result<(), LogError> {
        if !run.is_empty() {
            let home = &homes[device as usize];
            let mut buf = AlignedBuf::zeroed(run.len(), home.dev.buffer_align());
            buf.copy_from_slice(run);
            home.dev.write_at(&buf, home.offset + start * sector)?;
            run.clear();
        }
        Ok(())
    };
    for (&(device, s), bytes) in latest {
        let home = &homes[device as usize];
        if !home.in_service {
            report.sectors_skipped += 1;
            continue;
        }
        if (s + 1) * sector > home.bytes {
            return Err(LogError::Layout {
                device: home.dev.name().to_string(),
                problem: format!("the log holds sector {s}, past the {} bytes it protects", home.bytes),
            });
        }
        let contiguous =
            !run.is_empty() && run_start.0 == device && run_start.1 + run.len() as u64 / sector == s;
        if !contiguous || run.len() >= format::MAX_RECORD_DATA {
            flush_run(&mut run, run_start)?;
            run_start = (device, s);
        }
        run.extend_from_slice(bytes);
        report.sectors_written_home += 1;
    }
    flush_run(&mut run, run_start)
}
