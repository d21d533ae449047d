//! A plex: maps its address space onto its subdisks and does the I/O for
//! concatenated and striped organisations (RAID-5 is in `raid5.rs`).
//!
//! A plex never touches a subdisk that is not up, and marks a subdisk down
//! when a write to it fails, so later reads never return what it missed.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use device::{DeviceError, Op, Result};

use crate::geometry::{map_concat, map_striped, Extent, Org, Raid5};
use crate::lock::RangeLock;
use crate::object::{PlexCounters, State, StateCell, Subdisk};

pub(crate) struct Plex {
    pub(crate) name: String,
    pub(crate) org: Org,
    pub(crate) sds: Vec<Subdisk>,
    pub(crate) size_bytes: u64,
    pub(crate) state: StateCell,
    pub(crate) counters: PlexCounters,
    /// RAID-5 stripe rows under update.
    pub(crate) rows: RangeLock,
    /// While a revive runs: plex bytes from the start already copied.
    pub(crate) revived_bytes: AtomicU64,
    /// RAID-5: the log each row update goes through before it is written
    /// in place (home device i = the drive of subdisk i).
    pub(crate) wal: std::sync::OnceLock<std::sync::Arc<dyn device::WriteAheadLog>>,
    /// RAID-5: the drive the configuration names for that log.
    pub(crate) log_drive: Option<std::sync::Arc<crate::object::Drive>>,
}

/// An I/O error raised by the volume layer itself (no usable copy, two
/// failures in one stripe row), shaped like a device's I/O error.
pub(crate) fn io_error(object: &str, op: Op, offset: u64, len: u64, why: String) -> DeviceError {
    DeviceError::Io { device: object.to_string(), op, offset, len, source: io::Error::other(why) }
}

impl Plex {
    pub(crate) fn raid5(&self) -> Option<Raid5> {
        match self.org {
            Org::Raid5 { stripe_bytes, layout } => {
                Some(Raid5 { stripe_bytes, disks: self.sds.len(), layout })
            }
            _ => None,
        }
    }

    fn extents(&self, offset: u64, len: u64) -> Vec<Extent> {
        match self.org {
            Org::Concat => {
                let lengths: Vec<u64> = self.sds.iter().map(|sd| sd.length_bytes).collect();
                map_concat(&lengths, offset, len)
            }
            Org::Striped { stripe_bytes } => map_striped(stripe_bytes, self.sds.len(), offset, len),
            Org::Raid5 { .. } => Vec::new(),
        }
    }

    /// Adds the boundaries a request crosses to multiblock and multistripe.
    fn count_boundaries(&self, offset: u64, len: u64) {
        let (unit_bytes, width) = match self.org {
            Org::Concat => {
                let crossed = self.extents(offset, len).len().saturating_sub(1) as u64;
                PlexCounters::add(&self.counters.multiblock, crossed);
                return;
            }
            Org::Striped { stripe_bytes } => (stripe_bytes, self.sds.len() as u64),
            Org::Raid5 { stripe_bytes, .. } => (stripe_bytes, self.sds.len() as u64 - 1),
        };
        let first_unit = offset / unit_bytes;
        let last_unit = (offset + len - 1) / unit_bytes;
        PlexCounters::add(&self.counters.multiblock, last_unit - first_unit);
        PlexCounters::add(&self.counters.multistripe, last_unit / width - first_unit / width);
    }

    /// Reads `buf.len()` bytes at plex offset `offset` (non-empty, inside
    /// the plex).
    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        debug_assert!(
            !buf.is_empty() && offset + buf.len() as u64 <= self.size_bytes,
            "request inside the plex"
        );
        let len = buf.len() as u64;
        if self.state.get() != State::Up {
            return Err(io_error(&self.name, Op::Read, offset, len, format!("plex is {}", self.state.get())));
        }
        PlexCounters::add(&self.counters.reads, 1);
        PlexCounters::add(&self.counters.bytes_read, len);
        self.count_boundaries(offset, len);
        if let Some(geometry) = self.raid5() {
            return self.raid5_read(&geometry, buf, offset);
        }
        for extent in self.extents(offset, len) {
            let sd = &self.sds[extent.sd];
            let piece = &mut buf[extent.buf_offset_bytes as usize..][..extent.len_bytes as usize];
            if !sd.usable_at(extent.sd_offset_bytes, extent.len_bytes) {
                let why = format!("subdisk {} is not up, and this plex has no redundancy", sd.name);
                return Err(io_error(&self.name, Op::Read, offset, len, why));
            }
            sd.read(piece, extent.sd_offset_bytes)?;
        }
        Ok(())
    }

    /// Writes `buf` at plex offset `offset`. Pieces on subdisks that are not
    /// up are skipped and make the write fail; a failed piece marks its
    /// subdisk down.
    pub(crate) fn write(&self, buf: &[u8], offset: u64) -> Result<()> {
        debug_assert!(
            !buf.is_empty() && offset + buf.len() as u64 <= self.size_bytes,
            "request inside the plex"
        );
        let len = buf.len() as u64;
        if !self.writable(offset) {
            return Err(io_error(
                &self.name,
                Op::Write,
                offset,
                len,
                format!("plex is {}", self.state.get()),
            ));
        }
        PlexCounters::add(&self.counters.writes, 1);
        PlexCounters::add(&self.counters.bytes_written, len);
        self.count_boundaries(offset, len);
        if let Some(geometry) = self.raid5() {
            return self.raid5_write(&geometry, buf, offset);
        }
        let mut failure = None;
        for extent in self.extents(offset, len) {
            let sd = &self.sds[extent.sd];
            let piece = &buf[extent.buf_offset_bytes as usize..][..extent.len_bytes as usize];
            if !sd.writable_at(extent.sd_offset_bytes) {
                let why = format!("subdisk {} is not up, and this plex has no redundancy", sd.name);
                failure = Some(io_error(&self.name, Op::Write, offset, len, why));
            } else if let Err(err) = sd.write(piece, extent.sd_offset_bytes) {
                sd.fail();
                failure = Some(err);
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// How many bytes from `offset` (at most `limit`, which stays inside
    /// the plex) the plex can serve: 0 when it is not up; for RAID-5, all
    /// or nothing (it rebuilds one subdisk out of service, not two); for
    /// concat and striped plexes, up to the first byte on a subdisk that is
    /// not up. A subdisk under revive counts as not up: the other plexes
    /// serve its region until the revive ends. O(subdisks), no I/O, so a
    /// mirror can ask it for every request.
    pub(crate) fn readable_run(&self, offset: u64, limit: u64) -> u64 {
        debug_assert!(offset + limit <= self.size_bytes, "the run asked for lies inside the plex");
        if self.state.get() != State::Up {
            return 0;
        }
        match self.org {
            Org::Raid5 { .. } => {
                let out = self.sds.iter().filter(|sd| !sd.up()).count();
                if out <= 1 {
                    limit
                } else {
                    0
                }
            }
            Org::Concat => {
                let (end, mut sd_start, mut run) = (offset + limit, 0, 0);
                for sd in &self.sds {
                    let sd_end = sd_start + sd.length_bytes;
                    if sd_end > offset {
                        if !sd.up() {
                            break;
                        }
                        run = sd_end.min(end) - offset;
                        if sd_end >= end {
                            break;
                        }
                    }
                    sd_start = sd_end;
                }
                run
            }
            Org::Striped { stripe_bytes } => {
                let width = self.sds.len() as u64;
                let unit = offset / stripe_bytes;
                // The first stripe unit at or after `unit` on a subdisk that is not up.
                match (0..width).find(|k| !self.sds[((unit + k) % width) as usize].up()) {
                    Some(k) => ((unit + k) * stripe_bytes).saturating_sub(offset).min(limit),
                    None => limit,
                }
            }
        }
    }

    /// True when the plex can serve a read of `offset..offset+len` whole,
    /// so a mirror does not send it reads it must fail.
    pub(crate) fn readable(&self, offset: u64, len: u64) -> bool {
        self.readable_run(offset, len) == len
    }

    /// True when a write at `offset` must reach the plex: it is up, or a
    /// revive has already copied past `offset` (a write straddling the
    /// revive pointer goes in whole; the copy rewrites the part ahead of
    /// the pointer with the same data later). An initializing plex takes no
    /// writes: its parity is not built, so a write acknowledged on it could
    /// be rebuilt wrong after a drive failure.
    pub(crate) fn writable(&self, offset: u64) -> bool {
        match self.state.get() {
            State::Up => true,
            State::Initializing => false,
            State::Down | State::Stale => offset < self.revived_bytes.load(Relaxed),
        }
    }

    /// Bytes of subdisk `disk` that hold plex data: a striped or RAID-5
    /// plex uses whole stripe rows only.
    pub(crate) fn sd_used_bytes(&self, disk: usize) -> u64 {
        match self.org {
            Org::Concat => self.sds[disk].length_bytes,
            Org::Striped { .. } => self.size_bytes / self.sds.len() as u64,
            Org::Raid5 { .. } => self.size_bytes / (self.sds.len() as u64 - 1),
        }
    }

    /// Where byte `sd_offset` of concat or striped subdisk `disk` lies in
    /// the plex, and how many bytes from there (at most `max_len`) stay
    /// contiguous on both: (plex offset, length).
    pub(crate) fn sd_to_plex(&self, disk: usize, sd_offset: u64, max_len: u64) -> (u64, u64) {
        debug_assert!(sd_offset < self.sd_used_bytes(disk), "the byte holds plex data");
        debug_assert!(self.raid5().is_none(), "a RAID-5 subdisk is rebuilt row by row, never mapped");
        match self.org {
            Org::Striped { stripe_bytes } => {
                let width = self.sds.len() as u64;
                let (row, within) = (sd_offset / stripe_bytes, sd_offset % stripe_bytes);
                ((row * width + disk as u64) * stripe_bytes + within, max_len.min(stripe_bytes - within))
            }
            Org::Concat | Org::Raid5 { .. } => {
                let before: u64 = self.sds[..disk].iter().map(|sd| sd.length_bytes).sum();
                (before + sd_offset, max_len)
            }
        }
    }
}
