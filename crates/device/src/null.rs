use crate::{check_request, Device, DeviceError, Op, Result, Stats};

/// A device that stores nothing: writes are discarded and reads leave the
/// caller's buffer as it was (like fio's null engine). Requests are still
/// checked and counted. Its only use is measuring the cost of the engine
/// above it; data read from it is meaningless.
pub struct NullDevice {
    name: String,
    size_bytes: u64,
    stats: Stats,
}

impl NullDevice {
    pub fn new(size_bytes: u64) -> Result<NullDevice> {
        if size_bytes == 0 || size_bytes % 512 != 0 {
            return Err(DeviceError::Invalid(format!(
                "null:{size_bytes}: size must be a non-zero multiple of 512 bytes"
            )));
        }
        Ok(NullDevice { name: format!("null:{size_bytes}"), size_bytes, stats: Stats::default() })
    }
}

impl Device for NullDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn sector_bytes(&self) -> u32 {
        512
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.stats.track(check_request(self, Op::Read, buf.as_ptr() as usize, buf.len(), offset))?;
        self.stats.record_reads(1, buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.stats.track(check_request(self, Op::Write, buf.as_ptr() as usize, buf.len(), offset))?;
        self.stats.record_writes(1, buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.stats.record_flush();
        Ok(())
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Nothing to lay out: a null device holds no data to read.
    fn unwritten(&self, _start: u64, _end: u64) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        Ok(Some(Vec::new()))
    }

    fn media(&self) -> Vec<crate::Medium> {
        vec![crate::Medium {
            name: self.name.clone(),
            kind: crate::MediumKind::Null,
            direct: false,
            filesystem: None,
            memory_backed: false,
            cached_bytes: None,
        }]
    }
}
