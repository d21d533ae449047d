//! RAID-5 I/O of a plex: reads (direct, or reconstructed by XOR when a
//! subdisk is down or fails), writes by read-modify-write or
//! reconstruct-write (whichever needs fewer reads; a full-row write needs
//! none), degraded and parityless writes, parity check and rebuild.
//!
//! Every request holds the stripe rows it touches, so concurrent writes
//! and reconstructions never see a half-updated row. With two subdisks of
//! a row unusable, a request that needs them fails: never wrong data.

use std::ops::Range;

use device::{Op, Result};

use crate::geometry::{Raid5, RowSpan};
use crate::object::PlexCounters;
use crate::plex::{io_error, Plex};

/// At most this many mismatching rows are listed by a parity check (all
/// are counted).
pub const PARITY_MISMATCHES_LISTED_MAX: usize = 64;

/// Result of checking the parity of one RAID-5 plex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParityReport {
    pub plex: String,
    pub rows_checked: u64,
    pub rows_mismatched: u64,
    /// The first [`PARITY_MISMATCHES_LISTED_MAX`] mismatching rows.
    pub mismatched_rows: Vec<u64>,
}

/// One touched data column of a row: column index, byte range inside its
/// chunk, and the new data for that range (for writes).
struct Piece<'a> {
    column: usize,
    range: Range<u64>,
    data: &'a [u8],
}

fn pieces<'a>(span: &RowSpan, buf: &'a [u8]) -> Vec<Piece<'a>> {
    let mut at = span.buf_offset_bytes as usize;
    let mut out = Vec::new();
    for (column, range) in span.columns.iter().enumerate() {
        if let Some(range) = range {
            let len = (range.end - range.start) as usize;
            out.push(Piece { column, range: range.clone(), data: &buf[at..at + len] });
            at += len;
        }
    }
    out
}

fn xor_into(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len(), "xor of equal lengths");
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

/// `outer` minus `inner`: up to two ranges.
fn subtract(outer: &Range<u64>, inner: &Range<u64>) -> Vec<Range<u64>> {
    [outer.start..inner.start.min(outer.end), inner.end.max(outer.start)..outer.end]
        .into_iter()
        .filter(|r| r.start < r.end)
        .collect()
}

impl Plex {
    /// True when subdisk `disk` holds current data for stripe row `row`.
    pub(crate) fn row_usable(&self, geometry: &Raid5, disk: usize, row: u64) -> bool {
        self.sds[disk].usable_at(row * geometry.stripe_bytes, geometry.stripe_bytes)
    }

    fn unusable_in_row(&self, geometry: &Raid5, row: u64) -> Vec<usize> {
        (0..self.sds.len()).filter(|&d| !self.row_usable(geometry, d, row)).collect()
    }

    fn row_offset(geometry: &Raid5, row: u64, range: &Range<u64>) -> u64 {
        row * geometry.stripe_bytes + range.start
    }

    fn read_chunk(&self, geometry: &Raid5, disk: usize, row: u64, range: &Range<u64>) -> Result<Vec<u8>> {
        let mut buf = vec![0; (range.end - range.start) as usize];
        self.sds[disk].read(&mut buf, Self::row_offset(geometry, row, range))?;
        Ok(buf)
    }

    fn lock_rows(&self, geometry: &Raid5, offset: u64, len: u64) -> crate::lock::RangeGuard<'_> {
        let row_bytes = geometry.row_data_bytes();
        self.rows.lock(offset / row_bytes, (offset + len - 1) / row_bytes + 1)
    }

    pub(crate) fn raid5_read(&self, geometry: &Raid5, buf: &mut [u8], offset: u64) -> Result<()> {
        // Reads of a healthy plex take no lock: a direct read races a write
        // as on any device. Reconstruction must not see a half-updated row,
        // so a degraded plex holds its rows, and a read that fails locks
        // its row before reconstructing.
        let healthy = self.sds.iter().all(|sd| sd.usable_at(0, sd.length_bytes));
        let _rows = (!healthy).then(|| self.lock_rows(geometry, offset, buf.len() as u64));
        for span in geometry.rows(offset, buf.len() as u64) {
            let mut at = span.buf_offset_bytes as usize;
            for (column, range) in span.columns.iter().enumerate() {
                let Some(range) = range else { continue };
                let len = (range.end - range.start) as usize;
                let out = &mut buf[at..at + len];
                self.read_column(geometry, span.row, column, range, out, healthy)?;
                at += len;
            }
        }
        Ok(())
    }

    fn read_column(
        &self,
        geometry: &Raid5,
        row: u64,
        column: usize,
        range: &Range<u64>,
        out: &mut [u8],
        lock_to_reconstruct: bool,
    ) -> Result<()> {
        let disk = geometry.data_disk(row, column);
        let sd = &self.sds[disk];
        if self.row_usable(geometry, disk, row)
            && sd.read(out, Self::row_offset(geometry, row, range)).is_ok()
        {
            return Ok(());
        }
        let _row = lock_to_reconstruct.then(|| self.rows.lock(row, row + 1));
        self.reconstruct(geometry, row, disk, range, out)?;
        PlexCounters::add(&self.counters.recovered_reads, 1);
        Ok(())
    }

    /// Rebuilds `range` of `missing`'s chunk in `row` from all the others.
    fn reconstruct(
        &self,
        geometry: &Raid5,
        row: u64,
        missing: usize,
        range: &Range<u64>,
        out: &mut [u8],
    ) -> Result<()> {
        out.fill(0);
        for disk in (0..self.sds.len()).filter(|&d| d != missing) {
            let sd = &self.sds[disk];
            let offset = Self::row_offset(geometry, row, range);
            let fail = |why: String| io_error(&self.name, Op::Read, offset, out_len(range), why);
            if !self.row_usable(geometry, disk, row) {
                return Err(fail(format!(
                    "stripe row {row}: subdisks {} and {} are both unavailable; the data cannot be rebuilt",
                    self.sds[missing].name, sd.name
                )));
            }
            let chunk = self.read_chunk(geometry, disk, row, range).map_err(|err| {
                fail(format!(
                    "stripe row {row}: {} is unavailable and reading {} failed: {err}",
                    self.sds[missing].name, sd.name
                ))
            })?;
            xor_into(out, &chunk);
        }
        Ok(())
    }

    pub(crate) fn raid5_write(&self, geometry: &Raid5, buf: &[u8], offset: u64) -> Result<()> {
        let _rows = self.lock_rows(geometry, offset, buf.len() as u64);
        for span in geometry.rows(offset, buf.len() as u64) {
            self.write_row(geometry, span.row, &pieces(&span, buf))?;
        }
        Ok(())
    }

    fn write_row(&self, geometry: &Raid5, row: u64, pieces: &[Piece]) -> Result<()> {
        let down = self.unusable_in_row(geometry, row);
        let parity = geometry.parity_disk(row);
        let touched_disk = |disk: usize| pieces.iter().any(|p| geometry.data_disk(row, p.column) == disk);
        let span = pieces.iter().map(|p| p.range.start).min().unwrap_or(0)
            ..pieces.iter().map(|p| p.range.end).max().unwrap_or(0);
        match down.as_slice() {
            [] => self.write_healthy(geometry, row, pieces, &span, None),
            [d] if *d == parity => {
                PlexCounters::add(&self.counters.parityless_writes, 1);
                self.store(geometry, row, pieces, None)
            }
            [d] if touched_disk(*d) => {
                PlexCounters::add(&self.counters.degraded_writes, 1);
                self.write_degraded(geometry, row, pieces, &span, *d)
            }
            [d] => self.write_healthy(geometry, row, pieces, &span, Some(*d)),
            _ => {
                let names: Vec<&str> = down.iter().map(|&d| self.sds[d].name.as_str()).collect();
                let why = format!(
                    "stripe row {row}: subdisks {} are unavailable; RAID-5 survives one",
                    names.join(", ")
                );
                Err(io_error(
                    &self.name,
                    Op::Write,
                    row * geometry.row_data_bytes(),
                    geometry.row_data_bytes(),
                    why,
                ))
            }
        }
    }

    /// All touched subdisks and parity up; `down` is an untouched data
    /// subdisk that is down, which rules out reconstruct-write.
    fn write_healthy(
        &self,
        geometry: &Raid5,
        row: u64,
        pieces: &[Piece],
        span: &Range<u64>,
        down: Option<usize>,
    ) -> Result<()> {
        let rmw_reads = pieces.len() + 1;
        let rcw_reads: usize = (0..geometry.disks - 1)
            .map(|c| match pieces.iter().find(|p| p.column == c) {
                Some(p) => subtract(span, &p.range).len(),
                None => 1,
            })
            .sum();
        let parity = if down.is_none() && rcw_reads < rmw_reads {
            self.parity_by_reconstruct(geometry, row, pieces, span)?
        } else {
            self.parity_by_read_modify(geometry, row, pieces, span)?
        };
        self.store(geometry, row, pieces, Some((span, &parity)))
    }

    fn parity_by_read_modify(
        &self,
        geometry: &Raid5,
        row: u64,
        pieces: &[Piece],
        span: &Range<u64>,
    ) -> Result<Vec<u8>> {
        let mut parity = self.read_chunk(geometry, geometry.parity_disk(row), row, span)?;
        for piece in pieces {
            let old = self.read_chunk(geometry, geometry.data_disk(row, piece.column), row, &piece.range)?;
            let at = (piece.range.start - span.start) as usize;
            let target = &mut parity[at..at + old.len()];
            xor_into(target, &old);
            xor_into(target, piece.data);
        }
        Ok(parity)
    }

    fn parity_by_reconstruct(
        &self,
        geometry: &Raid5,
        row: u64,
        pieces: &[Piece],
        span: &Range<u64>,
    ) -> Result<Vec<u8>> {
        let mut parity = vec![0; out_len(span) as usize];
        for column in 0..geometry.disks - 1 {
            let disk = geometry.data_disk(row, column);
            let piece = pieces.iter().find(|p| p.column == column);
            let mut image = vec![0; parity.len()];
            let missing = match piece {
                Some(p) => {
                    image[(p.range.start - span.start) as usize..][..p.data.len()].copy_from_slice(p.data);
                    subtract(span, &p.range)
                }
                None => vec![span.clone()],
            };
            for range in missing {
                let old = self.read_chunk(geometry, disk, row, &range)?;
                image[(range.start - span.start) as usize..][..old.len()].copy_from_slice(&old);
            }
            xor_into(&mut parity, &image);
        }
        Ok(parity)
    }

    /// A touched data subdisk `missing` is down: its old contents come from
    /// parity and the others, the new parity covers its new data.
    fn write_degraded(
        &self,
        geometry: &Raid5,
        row: u64,
        pieces: &[Piece],
        span: &Range<u64>,
        missing: usize,
    ) -> Result<()> {
        let mut images = Vec::with_capacity(geometry.disks - 1);
        for column in 0..geometry.disks - 1 {
            let disk = geometry.data_disk(row, column);
            let mut image = vec![0; out_len(span) as usize];
            if disk == missing {
                self.reconstruct(geometry, row, missing, span, &mut image)?;
            } else {
                image = self.read_chunk(geometry, disk, row, span)?;
            }
            if let Some(p) = pieces.iter().find(|p| p.column == column) {
                image[(p.range.start - span.start) as usize..][..p.data.len()].copy_from_slice(p.data);
            }
            images.push(image);
        }
        let mut parity = vec![0; out_len(span) as usize];
        for image in &images {
            xor_into(&mut parity, image);
        }
        self.store(geometry, row, pieces, Some((span, &parity)))
    }

    /// Writes the new data (to subdisks that are up) and then the parity.
    /// A failed write marks its subdisk down; the row stays readable, and
    /// the write succeeds, as long as at most one subdisk is unusable.
    fn store(
        &self,
        geometry: &Raid5,
        row: u64,
        pieces: &[Piece],
        parity: Option<(&Range<u64>, &[u8])>,
    ) -> Result<()> {
        let ticket = self.log_row(geometry, row, pieces, parity)?;
        let mut failure = None;
        let mut put = |disk: usize, range: &Range<u64>, data: &[u8]| {
            let sd = &self.sds[disk];
            if !self.row_usable(geometry, disk, row) {
                return;
            }
            if let Err(err) = sd.write(data, Self::row_offset(geometry, row, range)) {
                sd.fail();
                failure = Some(err);
            }
        };
        for piece in pieces {
            put(geometry.data_disk(row, piece.column), &piece.range, piece.data);
        }
        if let Some((span, parity)) = parity {
            put(geometry.parity_disk(row), span, parity);
        }
        if let (Some(wal), Some(ticket)) = (self.wal.get(), ticket) {
            wal.written(ticket);
        }
        match failure {
            Some(err) if self.unusable_in_row(geometry, row).len() > 1 => Err(err),
            _ => Ok(()),
        }
    }

    /// With a write-ahead log: makes the row's new data and parity durable
    /// there before any of it is written in place. Writes to subdisks that
    /// cannot take them are left out, as `store` leaves them out.
    fn log_row(
        &self,
        geometry: &Raid5,
        row: u64,
        pieces: &[Piece],
        parity: Option<(&Range<u64>, &[u8])>,
    ) -> Result<Option<u64>> {
        let Some(wal) = self.wal.get() else { return self.refuse_without_log(geometry, row) };
        let data = pieces.iter().map(|p| (geometry.data_disk(row, p.column), &p.range, p.data));
        let parity = parity.map(|(span, bytes)| (geometry.parity_disk(row), span, bytes));
        let writes: Vec<(u32, u64, &[u8])> = data
            .chain(parity)
            .filter(|(disk, _, _)| self.row_usable(geometry, *disk, row))
            .map(|(disk, range, bytes)| {
                let offset = self.sds[disk].drive_offset_bytes + Self::row_offset(geometry, row, range);
                (disk as u32, offset, bytes)
            })
            .collect();
        wal.log(&writes).map(Some)
    }

    /// A plex whose configuration names a log drive writes only through
    /// its stripe log: without it (the drive missing or down), as md with
    /// its journal missing, it takes no writes, since one could leave a row
    /// whose parity lies and the log may hold row updates not replayed.
    fn refuse_without_log(&self, geometry: &Raid5, row: u64) -> Result<Option<u64>> {
        let Some(drive) = &self.log_drive else { return Ok(None) };
        let why = if drive.missing.load(std::sync::atomic::Ordering::Relaxed) {
            "missing".to_string()
        } else if drive.state.get() != crate::object::State::Up {
            drive.state.get().to_string()
        } else {
            "not open (no write-ahead log was given to the volume)".to_string()
        };
        let problem = format!(
            "its row updates go through the stripe log on drive '{0}', which is {why}: the plex takes no \
             writes without it (as md with its journal missing: reads work); give the log drive back and, \
             if it was recorded down, revive it with `iolab volume start {0} ...`",
            drive.name
        );
        let row_bytes = geometry.row_data_bytes();
        Err(io_error(&self.name, Op::Write, row * row_bytes, row_bytes, problem))
    }

    /// Rebuilds `range` of subdisk `disk`'s chunk in `row` from the others
    /// (for revives; the caller holds the row).
    pub(crate) fn rebuild_chunk(
        &self,
        geometry: &Raid5,
        row: u64,
        disk: usize,
        range: &Range<u64>,
        out: &mut [u8],
    ) -> Result<()> {
        self.reconstruct(geometry, row, disk, range, out)
    }

    /// Checks that every stripe row XORs to zero.
    pub(crate) fn check_parity(&self, geometry: &Raid5) -> Result<ParityReport> {
        let rows = self.size_bytes / geometry.row_data_bytes();
        let mut report = ParityReport {
            plex: self.name.clone(),
            rows_checked: rows,
            rows_mismatched: 0,
            mismatched_rows: Vec::new(),
        };
        let chunk = 0..geometry.stripe_bytes;
        for row in 0..rows {
            let _row = self.rows.lock(row, row + 1);
            let mut sum = vec![0; geometry.stripe_bytes as usize];
            for disk in 0..geometry.disks {
                xor_into(&mut sum, &self.read_usable(geometry, disk, row, &chunk)?);
            }
            if sum.iter().any(|&b| b != 0) {
                report.rows_mismatched += 1;
                if report.mismatched_rows.len() < PARITY_MISMATCHES_LISTED_MAX {
                    report.mismatched_rows.push(row);
                }
            }
        }
        Ok(report)
    }

    /// Recomputes and writes the parity of every stripe row.
    pub(crate) fn rebuild_parity(&self, geometry: &Raid5) -> Result<()> {
        let rows = self.size_bytes / geometry.row_data_bytes();
        (0..rows).try_for_each(|row| self.rebuild_parity_row(geometry, row))
    }

    /// Recomputes and writes the parity of stripe row `row` from its data,
    /// holding the row.
    pub(crate) fn rebuild_parity_row(&self, geometry: &Raid5, row: u64) -> Result<()> {
        let chunk = 0..geometry.stripe_bytes;
        let _row = self.rows.lock(row, row + 1);
        let mut parity = vec![0; geometry.stripe_bytes as usize];
        for column in 0..geometry.disks - 1 {
            xor_into(&mut parity, &self.read_usable(geometry, geometry.data_disk(row, column), row, &chunk)?);
        }
        let disk = geometry.parity_disk(row);
        self.require_usable(geometry, disk, row)?;
        self.sds[disk].write(&parity, row * geometry.stripe_bytes)
    }

    fn require_usable(&self, geometry: &Raid5, disk: usize, row: u64) -> Result<()> {
        if self.row_usable(geometry, disk, row) {
            return Ok(());
        }
        let sd = &self.sds[disk];
        let why = format!(
            "subdisk {} is {}; parity can only be checked or rebuilt with every subdisk up",
            sd.name,
            sd.state.get()
        );
        Err(io_error(&self.name, Op::Read, row * geometry.row_data_bytes(), 0, why))
    }

    fn read_usable(&self, geometry: &Raid5, disk: usize, row: u64, range: &Range<u64>) -> Result<Vec<u8>> {
        self.require_usable(geometry, disk, row)?;
        self.read_chunk(geometry, disk, row, range)
    }
}

fn out_len(range: &Range<u64>) -> u64 {
    range.end - range.start
}
