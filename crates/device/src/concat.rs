//! Devices one after another as one: the files of a directory target
//! (fio's `directory=` with `nrfiles=`), taken in turn as fio's
//! `file_service_type=sequential` takes them. A request that spans two
//! members is split at the boundary.

use std::ops::Range;
use std::sync::Arc;

use crate::{Backend, Checked, Device, DeviceError, Front, Geometry, Medium, Result};

/// Members addressed one after another from 0.
pub struct Concat {
    front: Front,
    members: Vec<Arc<dyn Device>>,
    /// Where each member starts, and (last) where the last ends.
    starts: Vec<u64>,
}

impl Concat {
    /// Fails unless there is a member, all members have one sector size
    /// and none is empty.
    pub fn new(name: impl Into<String>, members: Vec<Arc<dyn Device>>) -> Result<Concat> {
        let name = name.into();
        let Some(first) = members.first() else {
            return Err(DeviceError::Invalid(format!("{name}: no members to put one after another")));
        };
        let sector = first.sector_bytes();
        let mut starts = vec![0u64];
        for m in &members {
            if m.sector_bytes() != sector || m.size_bytes() == 0 {
                return Err(DeviceError::Invalid(format!(
                    "{name}: {} has {} bytes in {}-byte sectors; every member needs {sector}-byte sectors and some",
                    m.name(),
                    m.size_bytes(),
                    m.sector_bytes()
                )));
            }
            starts.push(starts[starts.len() - 1] + m.size_bytes());
        }
        let geometry = Geometry {
            size_bytes: starts[starts.len() - 1],
            sector_bytes: sector,
            buffer_align: members.iter().map(|m| m.buffer_align()).max().unwrap_or(1),
        };
        let mut front = Front::new(name, geometry);
        // One member is the whole device at the same offsets: a direct
        // submitter (io_uring) may use its descriptor, as on the member
        // itself (a directory target of one file).
        if let ([only], Some(fd)) = (&members[..], first.raw_fd()) {
            debug_assert_eq!(only.size_bytes(), geometry.size_bytes);
            front = front.with_fd(fd);
        }
        Ok(Concat { front, members, starts })
    }

    /// The members.
    pub fn members(&self) -> &[Arc<dyn Device>] {
        &self.members
    }

    /// `(member, its offset, the range of the request)` for each piece of
    /// a request of `len` bytes at `offset`.
    fn pieces(&self, offset: u64, len: usize) -> Vec<(usize, u64, Range<usize>)> {
        let mut out = Vec::new();
        let mut done = 0usize;
        // The member holding `offset`: the last start at or before it.
        let mut i = self.starts.partition_point(|&s| s <= offset) - 1;
        while done < len {
            let at = offset + done as u64;
            let room = (self.starts[i + 1] - at) as usize;
            let take = room.min(len - done);
            out.push((i, at - self.starts[i], done..done + take));
            done += take;
            i += 1;
        }
        out
    }
}

impl Backend for Concat {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        for (i, at, range) in self.pieces(offset, buf.len()) {
            self.members[i].read_at(&mut buf[range], at)?;
        }
        Ok(())
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        for (i, at, range) in self.pieces(offset, buf.len()) {
            self.members[i].write_at(&buf[range], at)?;
        }
        Ok(())
    }

    /// Every member is flushed even after one fails; the first failure is
    /// the answer (and poisons this device at the front).
    fn flush_raw(&self, _: Checked) -> Result<()> {
        let mut first = Ok(());
        for m in &self.members {
            let flushed = m.flush();
            if first.is_ok() {
                first = flushed;
            }
        }
        first
    }

    fn discard_raw(&self, offset: u64, len: u64, _: Checked) -> Result<()> {
        // Invariant: the front checked the range against this device, whose
        // size is the members' together, and a usize holds it.
        for (i, at, range) in self.pieces(offset, len as usize) {
            self.members[i].discard(at, range.len() as u64)?;
        }
        Ok(())
    }

    fn discards_raw(&self) -> bool {
        self.members.iter().all(|m| m.discards())
    }

    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<Range<u64>>>> {
        let mut holes = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            let (lo, hi) = (self.starts[i].max(start), self.starts[i + 1].min(end));
            if lo >= hi {
                continue;
            }
            let base = self.starts[i];
            match m.unwritten(lo - base, hi - base)? {
                Some(found) => holes.extend(found.into_iter().map(|h| h.start + base..h.end + base)),
                // A member that cannot tell: all of its part may be unwritten.
                None => return Ok(None),
            }
        }
        Ok(Some(holes))
    }

    /// One line for members alike (files of one file system, opened alike),
    /// named as this device; each member's otherwise.
    fn media_raw(&self) -> Vec<Medium> {
        let all: Vec<Medium> = self.members.iter().flat_map(|m| m.media()).collect();
        let alike = |a: &Medium, b: &Medium| {
            (a.kind, a.direct, &a.filesystem, a.memory_backed)
                == (b.kind, b.direct, &b.filesystem, b.memory_backed)
        };
        match all.first() {
            Some(first) if all.iter().all(|m| alike(m, first)) => {
                let cached = all.iter().map(|m| m.cached_bytes).try_fold(0u64, |sum, c| c.map(|c| sum + c));
                vec![Medium { name: self.name().to_string(), cached_bytes: cached, ..first.clone() }]
            }
            _ => all,
        }
    }

    fn drop_cache_raw(&self) -> Result<()> {
        for m in &self.members {
            m.drop_cache()?;
        }
        Ok(())
    }

    fn max_request_bytes_raw(&self) -> u64 {
        self.members.iter().map(|m| m.max_request_bytes()).min().unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDevice;

    fn concat(sizes: &[u64]) -> Concat {
        let members: Vec<Arc<dyn Device>> =
            sizes.iter().map(|&s| Arc::new(MemDevice::new(s).unwrap()) as Arc<dyn Device>).collect();
        Concat::new("set", members).unwrap()
    }

    #[test]
    fn a_request_across_a_boundary_lands_on_both_members() {
        let set = concat(&[1024, 2048]);
        assert_eq!(set.size_bytes(), 3072);
        set.write_at(&[7u8; 1024], 512).unwrap();
        let mut first = [0u8; 512];
        set.members()[0].read_at(&mut first, 512).unwrap();
        let mut second = [0u8; 512];
        set.members()[1].read_at(&mut second, 0).unwrap();
        assert_eq!((first, second), ([7u8; 512], [7u8; 512]));
        let mut back = [0u8; 1024];
        set.read_at(&mut back, 512).unwrap();
        assert_eq!(back, [7u8; 1024]);
    }

    #[test]
    fn members_of_other_sector_sizes_are_refused() {
        let a: Arc<dyn Device> = Arc::new(MemDevice::new(4096).unwrap());
        let b: Arc<dyn Device> = Arc::new(MemDevice::with_sector("b", 4096, 4096).unwrap());
        assert!(Concat::new("set", vec![a, b]).is_err());
        assert!(Concat::new("set", Vec::new()).is_err());
    }

    #[test]
    fn pieces_follow_the_members_in_turn() {
        let set = concat(&[512, 512, 1024]);
        let pieces: Vec<(usize, u64)> = set.pieces(0, 2048).into_iter().map(|(i, at, _)| (i, at)).collect();
        assert_eq!(pieces, [(0, 0), (1, 0), (2, 0)]);
        assert_eq!(set.pieces(1536, 512)[0].0, 2);
    }
}
