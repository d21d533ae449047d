use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{Backend, Checked, Device, DeviceError, Front, Geometry, Op, Result};

/// Where a [`FaultyDevice`] fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `n`th request of kind `op` (counting from 1) fails; the others
    /// pass, except that a failed flush poisons the device, as any
    /// device's: later writes and flushes are refused.
    Nth { op: Op, n: u64 },
    /// Every read or write touching any byte of `range` fails.
    Range { range: Range<u64>, reads: bool, writes: bool },
    /// The `n`th write reports success but never reaches the medium.
    LoseWrite { n: u64 },
    /// The `n`th write lands at `to_offset` instead of where it was aimed.
    MisdirectWrite { n: u64, to_offset: u64 },
    /// The `n`th write reaches the medium with one bit flipped at `byte`
    /// (an index into the written buffer, taken modulo its length).
    FlipBit { n: u64, byte: usize },
    /// Only the first `keep_bytes` of the `n`th write reach the medium
    /// (a torn write); it still reports success.
    TearWrite { n: u64, keep_bytes: usize },
    /// Power is cut after the first `after` writes and flushes (counted
    /// together): every later write and flush fails and reaches nothing.
    /// Wrapped around a `CrashDevice`, this stops a stack at any instant.
    PowerCut { after: u64 },
    /// The host file system holding the device fills up after the first
    /// `after` writes: every later write and flush fails with ENOSPC and
    /// reaches nothing, as on a sparse image whose host ran out of room
    /// (ext4 refuses the write, NFS or a delayed allocation the flush).
    NoSpace { after: u64 },
}

/// Wraps a device and fails chosen requests with EIO (or, past a full
/// host's budget, ENOSPC), without passing them to the inner device, or
/// silently mishandles chosen writes (lost, misdirected, a bit flipped)
/// so that checkers can be shown to catch them.
/// Faults are injected below the front: only requests it accepted are
/// counted as the `n`th, and a failed flush poisons the device as a real
/// one's would.
pub struct FaultyDevice {
    front: Front,
    inner: Arc<dyn Device>,
    faults: Vec<Fault>,
    reads: AtomicU64,
    writes: AtomicU64,
    flushes: AtomicU64,
    changes: AtomicU64,
}

impl FaultyDevice {
    pub fn new(inner: Arc<dyn Device>, faults: Vec<Fault>) -> FaultyDevice {
        FaultyDevice {
            front: Front::new(format!("faulty({})", inner.name()), Geometry::of(inner.as_ref())),
            inner,
            faults,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            changes: AtomicU64::new(0),
        }
    }

    fn should_fail(&self, op: Op, ordinal: u64, offset: u64, len: u64) -> bool {
        self.faults.iter().any(|fault| match fault {
            Fault::Nth { op: fop, n } => *fop == op && *n == ordinal,
            Fault::LoseWrite { .. }
            | Fault::MisdirectWrite { .. }
            | Fault::FlipBit { .. }
            | Fault::TearWrite { .. }
            | Fault::PowerCut { .. }
            | Fault::NoSpace { .. } => false,
            Fault::Range { range, reads, writes } => {
                let wanted = match op {
                    Op::Read => *reads,
                    Op::Write | Op::Trim => *writes,
                    Op::Flush => false,
                };
                wanted && offset < range.end && range.start < offset + len
            }
        })
    }

    /// Counts a write or flush and says which errno it fails with, if
    /// any: EIO once the power is cut, ENOSPC once the host is full.
    fn change_fails(&self) -> Option<i32> {
        let change = self.changes.fetch_add(1, Ordering::Relaxed) + 1;
        let writes = self.writes.load(Ordering::Relaxed);
        self.faults.iter().find_map(|fault| match *fault {
            Fault::PowerCut { after } if change > after => Some(libc::EIO),
            Fault::NoSpace { after } if writes > after => Some(libc::ENOSPC),
            _ => None,
        })
    }

    fn injected(&self, op: Op, ordinal: u64, offset: u64, len: u64) -> DeviceError {
        self.injected_errno(libc::EIO, op, ordinal, offset, len)
    }

    fn injected_errno(&self, errno: i32, op: Op, ordinal: u64, offset: u64, len: u64) -> DeviceError {
        // A real errno, so callers see what a failing disk (or a full
        // host) would give them.
        let real = io::Error::from_raw_os_error(errno);
        let source = io::Error::new(real.kind(), format!("{real} (injected on {op} #{ordinal})"));
        match op {
            Op::Flush => DeviceError::Flush { device: self.name().to_string(), source },
            _ => DeviceError::Io { device: self.name().to_string(), op, offset, len, source },
        }
    }
}

impl FaultyDevice {
    /// Carries out a write, or what a silent fault makes of it.
    fn silent_fault(&self, buf: &[u8], offset: u64, ordinal: u64) -> Result<()> {
        for fault in &self.faults {
            match *fault {
                Fault::LoseWrite { n } if n == ordinal => return Ok(()),
                Fault::MisdirectWrite { n, to_offset } if n == ordinal => {
                    return self.inner.write_at(buf, to_offset);
                }
                Fault::FlipBit { n, byte } if n == ordinal && !buf.is_empty() => {
                    let mut copy = buf.to_vec();
                    copy[byte % buf.len()] ^= 0x01;
                    return self.inner.write_at(&copy, offset);
                }
                Fault::TearWrite { n, keep_bytes } if n == ordinal => {
                    let keep = keep_bytes.min(buf.len());
                    return if keep == 0 { Ok(()) } else { self.inner.write_at(&buf[..keep], offset) };
                }
                _ => {}
            }
        }
        self.inner.write_at(buf, offset)
    }
}

impl Backend for FaultyDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        let ordinal = self.reads.fetch_add(1, Ordering::Relaxed) + 1;
        let len = buf.len() as u64;
        if self.should_fail(Op::Read, ordinal, offset, len) {
            return Err(self.injected(Op::Read, ordinal, offset, len));
        }
        self.inner.read_at(buf, offset)
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        let ordinal = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        let len = buf.len() as u64;
        if let Some(errno) = self.change_fails() {
            return Err(self.injected_errno(errno, Op::Write, ordinal, offset, len));
        }
        if self.should_fail(Op::Write, ordinal, offset, len) {
            return Err(self.injected(Op::Write, ordinal, offset, len));
        }
        self.silent_fault(buf, offset, ordinal)
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        let ordinal = self.flushes.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(errno) = self.change_fails() {
            return Err(self.injected_errno(errno, Op::Flush, ordinal, 0, 0));
        }
        if self.should_fail(Op::Flush, ordinal, 0, 0) {
            return Err(self.injected(Op::Flush, ordinal, 0, 0));
        }
        self.inner.flush()
    }

    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        self.inner.unwritten(start, end)
    }

    fn media_raw(&self) -> Vec<crate::Medium> {
        self.inner.media()
    }

    fn drop_cache_raw(&self) -> Result<()> {
        self.inner.drop_cache()
    }
}
