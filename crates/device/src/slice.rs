//! A window of another device: `len` bytes from `offset`, addressed from 0.

use std::sync::Arc;

use crate::{check_request, Device, DeviceError, Op, Result, Stats};

/// Bytes `offset..offset+len` of `inner` as a device of its own (the data
/// area of a drive after its metadata, for example).
pub struct Slice {
    name: String,
    inner: Arc<dyn Device>,
    offset: u64,
    len: u64,
    stats: Stats,
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
        Ok(Slice {
            name: format!("{}[{offset}..]", inner.name()),
            inner,
            offset,
            len,
            stats: Stats::default(),
        })
    }
}

impl Device for Slice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.len
    }

    fn sector_bytes(&self) -> u32 {
        self.inner.sector_bytes()
    }

    fn buffer_align(&self) -> usize {
        self.inner.buffer_align()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.stats.track(check_request(self, Op::Read, buf.as_ptr() as usize, buf.len(), offset))?;
        self.stats.track(self.inner.read_at(buf, self.offset + offset))?;
        self.stats.record_reads(1, buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.stats.track(check_request(self, Op::Write, buf.as_ptr() as usize, buf.len(), offset))?;
        self.stats.track(self.inner.write_at(buf, self.offset + offset))?;
        self.stats.record_writes(1, buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.stats.track(self.inner.flush())?;
        self.stats.record_flush();
        Ok(())
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn unwritten(&self, start: u64, end: u64) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        let end = end.min(self.len);
        let inner = self.inner.unwritten(self.offset + start, self.offset + end)?;
        Ok(inner.map(|holes| holes.into_iter().map(|h| h.start - self.offset..h.end - self.offset).collect()))
    }

    fn media(&self) -> Vec<crate::Medium> {
        self.inner.media()
    }

    fn drop_cache(&self) -> Result<()> {
        self.inner.drop_cache()
    }
}
