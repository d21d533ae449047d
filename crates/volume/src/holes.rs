//! Which blocks of a volume were never written: mapped from the holes of
//! the drives under its subdisks, so that a job reading a volume on
//! sparse drive files lays it out first instead of measuring holes.

use std::ops::Range;

use device::Result;

use crate::geometry::Org;
use crate::plex::Plex;
use crate::volume::Volume;

impl Volume {
    /// The holes of `start..end`: every byte a read could be served from a
    /// hole of some plex that is up (the union over the plexes). `None`
    /// when a drive under an up plex cannot tell its holes. `end` is inside
    /// the volume (the front cut it).
    pub(crate) fn holes(&self, start: u64, end: u64) -> Result<Option<Vec<Range<u64>>>> {
        let mut all: Vec<Range<u64>> = Vec::new();
        for plex in self.plexes.iter().filter(|p| p.state.get() == crate::State::Up) {
            match plex_holes(plex, start, end)? {
                Some(holes) => all.extend(holes),
                None => return Ok(None),
            }
        }
        all.sort_by_key(|r| r.start);
        Ok(Some(merge(all)))
    }
}

/// A subdisk's holes (subdisk offsets, sorted) and a cursor into them.
struct SdHoles {
    holes: Vec<Range<u64>>,
    next: usize,
}

/// The holes of a plex in `start..end`, walking the range a contiguous
/// piece (a stripe unit, or the rest of a concat subdisk) at a time; each
/// subdisk's holes are read once and walked with a cursor, since a
/// subdisk's offsets grow with the plex's.
fn plex_holes(plex: &Plex, start: u64, end: u64) -> Result<Option<Vec<Range<u64>>>> {
    let mut sds: Vec<Option<SdHoles>> = (0..plex.sds.len()).map(|_| None).collect();
    let mut out: Vec<Range<u64>> = Vec::new();
    let mut pos = start;
    while pos < end {
        let (disk, sd_offset, run) = piece(plex, pos, end - pos);
        debug_assert!(run > 0, "every plex byte maps to a subdisk");
        let sd = match &mut sds[disk] {
            Some(sd) => sd,
            slot @ None => {
                let Some(holes) = subdisk_holes(plex, disk)? else { return Ok(None) };
                slot.insert(SdHoles { holes, next: 0 })
            }
        };
        while sd.holes.get(sd.next).is_some_and(|h| h.end <= sd_offset) {
            sd.next += 1;
        }
        for h in sd.holes[sd.next..].iter().take_while(|h| h.start < sd_offset + run) {
            let (from, to) = (h.start.max(sd_offset), h.end.min(sd_offset + run));
            let range = pos + (from - sd_offset)..pos + (to - sd_offset);
            match out.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => out.push(range),
            }
        }
        pos += run;
    }
    Ok(Some(out))
}

/// The holes of subdisk `disk` in subdisk offsets. A subdisk out of
/// service has none: no read is served from it.
fn subdisk_holes(plex: &Plex, disk: usize) -> Result<Option<Vec<Range<u64>>>> {
    let sd = &plex.sds[disk];
    if !sd.up() {
        return Ok(Some(Vec::new()));
    }
    let from = sd.drive_offset_bytes;
    let holes = sd.drive.dev.unwritten(from, from + plex.sd_used_bytes(disk))?;
    Ok(holes.map(|holes| holes.into_iter().map(|h| h.start - from..h.end - from).collect()))
}

/// Where plex byte `pos` lives and how far it runs contiguously there (at
/// most `limit`): (subdisk, subdisk offset, bytes).
fn piece(plex: &Plex, pos: u64, limit: u64) -> (usize, u64, u64) {
    match plex.org {
        Org::Concat => {
            let mut sd_start = 0;
            for (disk, sd) in plex.sds.iter().enumerate() {
                if pos < sd_start + sd.length_bytes {
                    return (disk, pos - sd_start, (sd_start + sd.length_bytes - pos).min(limit));
                }
                sd_start += sd.length_bytes;
            }
            (0, 0, 0)
        }
        Org::Striped { stripe_bytes } => {
            let width = plex.sds.len() as u64;
            let (unit, within) = (pos / stripe_bytes, pos % stripe_bytes);
            let disk = (unit % width) as usize;
            (disk, (unit / width) * stripe_bytes + within, (stripe_bytes - within).min(limit))
        }
        Org::Raid5 { stripe_bytes, .. } => {
            let Some(geometry) = plex.raid5() else { return (0, 0, 0) };
            let (disk, sd_offset) = geometry.locate(pos);
            (disk, sd_offset, (stripe_bytes - pos % stripe_bytes).min(limit))
        }
    }
}

/// Sorted ranges with overlapping or touching ones joined.
fn merge(sorted: Vec<Range<u64>>) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}
