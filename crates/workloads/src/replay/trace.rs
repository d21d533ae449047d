//! A trace as read for replay, whatever its format: its requests with
//! their kinds, offsets, sizes, times and syncs; and why one cannot be
//! read. The readers are `mod.rs` (fio's iologs) and `blktrace.rs`.

use std::time::Duration;

use crate::kind::IoKind;

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracedIo {
    /// When it was issued, from the start of the traced run (version 3,
    /// and version 2's `wait`s added up); `None` in a version 2 trace
    /// before any wait.
    pub at: Option<Duration>,
    /// A read, a write or a trim (a discard).
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
    /// The trace syncs after it (a `sync` or `datasync` line next).
    pub flush_after: bool,
}

/// A trace read for replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub format: Format,
    /// An iolog's version, 2 or 3; a blktrace record's, 7.
    pub version: u8,
    pub ios: Vec<TracedIo>,
    /// The files the trace names, in the order it names them.
    pub files: Vec<String>,
    /// Syncs with no request before them to follow (at the start).
    pub leading_syncs: u64,
}

/// Why a trace cannot be replayed, naming where in it: an iolog's line,
/// a blktrace capture's record.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{place}: {what}")]
pub struct TraceError {
    /// `line N` or `record N (byte B)`.
    pub place: String,
    pub what: String,
}

impl TraceError {
    pub(super) fn line(line: usize, what: String) -> TraceError {
        TraceError { place: format!("line {line}"), what }
    }
}

/// What a trace was read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// fio's I/O log (`write_iolog`), text.
    #[default]
    Iolog,
    /// The kernel's block-layer trace records (`blk_io_trace`), as
    /// `blktrace -o -`, `blkparse -d` or the `blk` tracer's binary output
    /// write them.
    Blktrace,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Iolog => "iolog",
            Format::Blktrace => "blktrace",
        }
    }
}

impl Trace {
    /// Notes a file the trace names.
    pub(super) fn name(&mut self, file: &str) {
        if !self.files.iter().any(|f| f == file) {
            self.files.push(file.to_string());
        }
    }

    /// The end of the furthest request: the size a target needs.
    pub fn extent(&self) -> u64 {
        self.ios.iter().map(|io| io.offset + io.len).max().unwrap_or(0)
    }

    /// The largest request, in bytes.
    pub fn largest(&self) -> u64 {
        self.ios.iter().map(|io| io.len).max().unwrap_or(0)
    }

    /// The largest power of two, at most 4096, that every offset and
    /// length is a multiple of: the alignment the trace keeps.
    pub fn alignment(&self) -> u64 {
        let all = self.ios.iter().fold(0u64, |acc, io| acc | io.offset | io.len);
        if all == 0 {
            4096
        } else {
            (1u64 << all.trailing_zeros()).min(4096)
        }
    }

    /// Reads among the requests, in percent (rounded).
    pub fn read_pct(&self) -> u8 {
        let reads = self.ios.iter().filter(|io| io.kind == IoKind::Read).count();
        ((reads * 100 + self.ios.len() / 2) / self.ios.len()) as u8
    }

    /// Whether the trace discards anything.
    pub fn trims(&self) -> bool {
        self.ios.iter().any(|io| io.kind == IoKind::Trim)
    }

    /// How many flushes a replay issues: one after each request the
    /// trace syncs after.
    pub fn flushes(&self) -> u64 {
        self.ios.iter().filter(|io| io.flush_after).count() as u64
    }
}
