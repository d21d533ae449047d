//! A window of another device: `len` bytes from `offset`, addressed from 0.

use std::sync::Arc;

use crate::{Backend, Checked, Device, DeviceError, Front, Geometry, Result};

/// Bytes `offset..offset+len` of `inner` as a device of its own (the data
/// area of a drive after its metadata, for example). Transparent: atomic
/// and unlogged writes stay atomic and unlogged on `inner`.
pub struct Slice {
    front: Front,
    inner: Arc<dyn Device>,
    offset: u64,
}

impl Slice {
    /// Fails unless the window lies inside `inner` on whole sectors.
    pub fn new(inner: Arc<dyn Device>, offset: u64, len: u64) -> Result<Slice> {
        let sector = u64::from(inner.sector_bytes());
        let inside = offset.checked_add(len).is_some_and(|end| end <= inner.size_bytes());
        if !inside || offset % sector != 0 || len % sector != 0 || len == 0 {
            return Err(DeviceError::Invalid(format!(
                "{}: bytes {offset}..+{len} are not a whole-sector window inside its {} bytes",
                inner.name(),
                inner.size_bytes()
            )));
        }
        let geometry = Geometry { size_bytes: len, ..Geometry::of(inner.as_ref()) };
        let front = Front::new(format!("{}[{offset}..]", inner.name()), geometry);
        Ok(Slice { front, inner, offset })
    }
}

impl Backend for Slice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        self.inner.read_at(buf, self.offset + offset)
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        self.inner.write_at(buf, self.offset + offset)
    }

    fn write_atomic_raw(&self, writes: &[(u64, &[u8])], _: Checked) -> Result<()> {
        let shifted: Vec<(u64, &[u8])> = writes.iter().map(|(at, buf)| (self.offset + at, *buf)).collect();
        self.inner.write_atomic(&shifted)
    }

    fn write_unlogged_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        self.inner.write_unlogged(buf, self.offset + offset)
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        self.inner.flush()
    }

    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        let inner = self.inner.unwritten(self.offset + start, self.offset + end)?;
        Ok(inner.map(|holes| holes.into_iter().map(|h| h.start - self.offset..h.end - self.offset).collect()))
    }

    fn media_raw(&self) -> Vec<crate::Medium> {
        self.inner.media()
    }

    fn drop_cache_raw(&self) -> Result<()> {
        self.inner.drop_cache()
    }

    fn will_need_raw(&self, offset: u64, len: u64) {
        self.inner.will_need(self.offset + offset, len);
    }
}
