use std::sync::RwLock;

use crate::{Backend, Checked, Device, DeviceError, Front, Geometry, Result};

/// Chunk granularity of the sparse memory image.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// A sparse in-memory device: 1 MiB chunks allocated on first write, read
/// as zeros until then, each behind its own lock so threads working on
/// different chunks do not contend.
pub struct MemDevice {
    front: Front,
    chunks: Vec<RwLock<Option<Box<[u8]>>>>,
}

impl MemDevice {
    /// A zero-filled device of `size_bytes` with 512-byte sectors.
    pub fn new(size_bytes: u64) -> Result<MemDevice> {
        MemDevice::with_sector(format!("mem:{size_bytes}"), size_bytes, 512)
    }

    /// A zero-filled device with a chosen name and sector size.
    pub fn with_sector(name: impl Into<String>, size_bytes: u64, sector_bytes: u32) -> Result<MemDevice> {
        let name = name.into();
        if !(sector_bytes == 512 || sector_bytes == 4096) {
            return Err(DeviceError::Invalid(format!(
                "{name}: sector size {sector_bytes} is not supported; use 512 or 4096"
            )));
        }
        if size_bytes == 0 || size_bytes % u64::from(sector_bytes) != 0 {
            return Err(DeviceError::Invalid(format!(
                "{name}: size {size_bytes} must be a non-zero multiple of the sector size {sector_bytes}"
            )));
        }
        let chunk_count = size_bytes.div_ceil(CHUNK_BYTES as u64) as usize;
        let chunks = (0..chunk_count).map(|_| RwLock::new(None)).collect();
        Ok(MemDevice { front: Front::new(name, Geometry::new(size_bytes, sector_bytes)), chunks })
    }

    /// A device holding `pages` ((offset, bytes), whole sectors) and zeros
    /// elsewhere: a power cut's image of a simulated disk, say.
    pub fn with_pages(
        name: impl Into<String>,
        size_bytes: u64,
        sector_bytes: u32,
        pages: &[(u64, Vec<u8>)],
    ) -> Result<MemDevice> {
        let dev = MemDevice::with_sector(name, size_bytes, sector_bytes)?;
        for (offset, bytes) in pages {
            crate::Device::write_at(&dev, bytes, *offset)?;
        }
        Ok(dev)
    }

    /// Builds a device holding exactly `bytes`.
    pub fn from_bytes(name: impl Into<String>, bytes: &[u8], sector_bytes: u32) -> Result<MemDevice> {
        let dev = MemDevice::with_sector(name, bytes.len() as u64, sector_bytes)?;
        dev.write_at(bytes, 0)?;
        dev.stats().reset();
        Ok(dev)
    }

    /// The whole image as one vector (for tests on small devices).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.size_bytes() as usize];
        self.copy_out(&mut out, 0);
        out
    }

    /// Bytes of memory actually allocated for the image.
    pub fn allocated_bytes(&self) -> u64 {
        let allocated = self.chunks.iter().filter(|c| read_lock(c).is_some()).count();
        (allocated * CHUNK_BYTES) as u64
    }

    fn chunk_len(&self, index: usize) -> usize {
        let start = (index * CHUNK_BYTES) as u64;
        (self.size_bytes() - start).min(CHUNK_BYTES as u64) as usize
    }

    fn copy_out(&self, buf: &mut [u8], offset: u64) {
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            let index = (pos / CHUNK_BYTES as u64) as usize;
            let within = (pos % CHUNK_BYTES as u64) as usize;
            let n = (CHUNK_BYTES - within).min(buf.len() - done);
            match read_lock(&self.chunks[index]).as_deref() {
                Some(chunk) => buf[done..done + n].copy_from_slice(&chunk[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    fn copy_in(&self, buf: &[u8], offset: u64) {
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            let index = (pos / CHUNK_BYTES as u64) as usize;
            let within = (pos % CHUNK_BYTES as u64) as usize;
            let n = (CHUNK_BYTES - within).min(buf.len() - done);
            let mut guard = self.chunks[index].write().unwrap_or_else(|e| e.into_inner());
            let chunk = guard.get_or_insert_with(|| vec![0; self.chunk_len(index)].into_boxed_slice());
            chunk[within..within + n].copy_from_slice(&buf[done..done + n]);
            done += n;
        }
    }
}

impl std::fmt::Debug for MemDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemDevice({}, {} bytes, {}-byte sectors)",
            self.name(),
            self.size_bytes(),
            self.sector_bytes()
        )
    }
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // A poisoned chunk lock only means a panic elsewhere; the bytes are intact.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

impl Backend for MemDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        self.copy_out(buf, offset);
        Ok(())
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        self.copy_in(buf, offset);
        Ok(())
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        Ok(())
    }

    /// The range reads as zeros after, as a punched hole.
    fn discard_raw(&self, offset: u64, len: u64, _: Checked) -> Result<()> {
        let mut done = 0u64;
        while done < len {
            let pos = offset + done;
            let index = (pos / CHUNK_BYTES as u64) as usize;
            let within = (pos % CHUNK_BYTES as u64) as usize;
            let n = ((CHUNK_BYTES - within) as u64).min(len - done) as usize;
            let mut guard = self.chunks[index].write().unwrap_or_else(|e| e.into_inner());
            if within == 0 && n == self.chunk_len(index) {
                *guard = None;
            } else if let Some(chunk) = guard.as_deref_mut() {
                chunk[within..within + n].fill(0);
            }
            done += n as u64;
        }
        Ok(())
    }

    fn discards_raw(&self) -> bool {
        true
    }

    /// Chunks never written are unallocated and read as zeros.
    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        let chunk = CHUNK_BYTES as u64;
        let mut holes: Vec<std::ops::Range<u64>> = Vec::new();
        let mut at = start;
        while at < end {
            let index = (at / chunk) as usize;
            let next = ((index as u64 + 1) * chunk).min(end);
            if read_lock(&self.chunks[index]).is_none() {
                match holes.last_mut() {
                    Some(last) if last.end == at => last.end = next,
                    _ => holes.push(at..next),
                }
            }
            at = next;
        }
        Ok(Some(holes))
    }

    fn media_raw(&self) -> Vec<crate::Medium> {
        vec![crate::Medium {
            name: self.name().to_string(),
            kind: crate::MediumKind::Memory,
            direct: false,
            filesystem: None,
            memory_backed: true,
            cached_bytes: None,
        }]
    }
}
