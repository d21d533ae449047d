use crate::{Backend, Checked, DeviceError, Front, Geometry, Result};

/// A device that stores nothing: writes are discarded and reads leave the
/// caller's buffer as it was (like fio's null engine). Requests are still
/// checked and counted by the front. Its only use is measuring the cost of
/// the engine above it; data read from it is meaningless.
pub struct NullDevice {
    front: Front,
}

impl NullDevice {
    pub fn new(size_bytes: u64) -> Result<NullDevice> {
        if size_bytes == 0 || size_bytes % 512 != 0 {
            return Err(DeviceError::Invalid(format!(
                "null:{size_bytes}: size must be a non-zero multiple of 512 bytes"
            )));
        }
        Ok(NullDevice { front: Front::new(format!("null:{size_bytes}"), Geometry::new(size_bytes, 512)) })
    }
}

impl Backend for NullDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, _buf: &mut [u8], _offset: u64, _: Checked) -> Result<()> {
        Ok(())
    }

    fn write_raw(&self, _buf: &[u8], _offset: u64, _: Checked) -> Result<()> {
        Ok(())
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        Ok(())
    }

    fn discard_raw(&self, _offset: u64, _len: u64, _: Checked) -> Result<()> {
        Ok(())
    }

    fn discards_raw(&self) -> bool {
        true
    }

    /// Nothing to lay out: a null device holds no data to read.
    fn unwritten_raw(&self, _start: u64, _end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        Ok(Some(Vec::new()))
    }

    fn media_raw(&self) -> Vec<crate::Medium> {
        vec![crate::Medium {
            name: self.front.name().to_string(),
            kind: crate::MediumKind::Null,
            direct: false,
            filesystem: None,
            memory_backed: false,
            cached_bytes: None,
        }]
    }
}
