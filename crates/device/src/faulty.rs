use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{Device, DeviceError, Op, Result, Stats};

/// Where a [`FaultyDevice`] fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `n`th request of kind `op` (counting from 1) fails; the others
    /// pass.
    Nth { op: Op, n: u64 },
    /// Every read or write touching any byte of `range` fails.
    Range { range: Range<u64>, reads: bool, writes: bool },
}

/// Wraps a device and fails chosen requests with EIO, without passing them
/// to the inner device. Used to test every error path above the device.
pub struct FaultyDevice {
    name: String,
    inner: Arc<dyn Device>,
    faults: Vec<Fault>,
    reads: AtomicU64,
    writes: AtomicU64,
    flushes: AtomicU64,
    stats: Stats,
}

impl FaultyDevice {
    pub fn new(inner: Arc<dyn Device>, faults: Vec<Fault>) -> FaultyDevice {
        FaultyDevice {
            name: format!("faulty({})", inner.name()),
            inner,
            faults,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            stats: Stats::default(),
        }
    }

    fn should_fail(&self, op: Op, ordinal: u64, offset: u64, len: u64) -> bool {
        self.faults.iter().any(|fault| match fault {
            Fault::Nth { op: fop, n } => *fop == op && *n == ordinal,
            Fault::Range { range, reads, writes } => {
                let wanted = match op {
                    Op::Read => *reads,
                    Op::Write => *writes,
                    Op::Flush => false,
                };
                wanted && offset < range.end && range.start < offset + len
            }
        })
    }

    fn injected(&self, op: Op, ordinal: u64, offset: u64, len: u64) -> DeviceError {
        // A real EIO, so callers see what a failing disk would give them.
        let eio = io::Error::from_raw_os_error(libc::EIO);
        let source = io::Error::new(eio.kind(), format!("{eio} (injected on {op} #{ordinal})"));
        match op {
            Op::Flush => DeviceError::Flush { device: self.name.clone(), source },
            _ => DeviceError::Io { device: self.name.clone(), op, offset, len, source },
        }
    }
}

impl Device for FaultyDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn sector_bytes(&self) -> u32 {
        self.inner.sector_bytes()
    }

    fn buffer_align(&self) -> usize {
        self.inner.buffer_align()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let ordinal = self.reads.fetch_add(1, Ordering::Relaxed) + 1;
        let len = buf.len() as u64;
        if self.should_fail(Op::Read, ordinal, offset, len) {
            self.stats.record_error();
            return Err(self.injected(Op::Read, ordinal, offset, len));
        }
        self.stats.track(self.inner.read_at(buf, offset))?;
        self.stats.record_reads(1, len);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let ordinal = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        let len = buf.len() as u64;
        if self.should_fail(Op::Write, ordinal, offset, len) {
            self.stats.record_error();
            return Err(self.injected(Op::Write, ordinal, offset, len));
        }
        self.stats.track(self.inner.write_at(buf, offset))?;
        self.stats.record_writes(1, len);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let ordinal = self.flushes.fetch_add(1, Ordering::Relaxed) + 1;
        if self.should_fail(Op::Flush, ordinal, 0, 0) {
            self.stats.record_error();
            return Err(self.injected(Op::Flush, ordinal, 0, 0));
        }
        self.stats.track(self.inner.flush())?;
        self.stats.record_flush();
        Ok(())
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}
