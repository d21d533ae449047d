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
    /// Which of the trace's files (an index into [`Trace::files`]).
    pub file: u32,
}

/// A trace read for replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub format: Format,
    /// An iolog's version, 2 or 3; a blktrace record's, 7.
    pub version: u8,
    pub ios: Vec<TracedIo>,
    /// The files the trace names, in the order it names them (a
    /// capture's devices, as `major,minor`).
    pub files: Vec<String>,
    /// Where each of [`Trace::files`] begins on the one target the trace
    /// is replayed on: one file at 0; several laid end to end, each at the
    /// first MiB past the furthest byte the one before reaches
    /// ([`Trace::lay_out_files`]). Requests' offsets include it.
    pub file_offsets: Vec<u64>,
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

/// Files of a trace laid end to end start on a boundary of this.
const FILE_ALIGN: u64 = 1 << 20;

impl Trace {
    /// Notes a file the trace names; returns its index in
    /// [`Trace::files`].
    pub(super) fn name(&mut self, file: &str) -> u32 {
        match self.files.iter().position(|f| f == file) {
            Some(i) => i as u32,
            None => {
                self.files.push(file.to_string());
                (self.files.len() - 1) as u32
            }
        }
    }

    /// Gives each file the trace names its own part of the one target:
    /// laid end to end in the order the trace names them, each from the
    /// first MiB boundary past the reach of the one before, so that the
    /// requests of two files never land on each other (fio replays each
    /// file on its own; its `replay_redirect` would put them all at
    /// their own offsets on one device, on top of each other).
    pub(super) fn lay_out_files(&mut self) -> Result<(), TraceError> {
        let mut reach = vec![0u64; self.files.len()];
        for io in &self.ios {
            let r = &mut reach[io.file as usize];
            *r = (*r).max(io.offset + io.len);
        }
        let mut at = 0u64;
        let mut offsets = Vec::with_capacity(reach.len());
        for r in reach {
            offsets.push(at);
            at = at.checked_add(r).and_then(|end| end.checked_next_multiple_of(FILE_ALIGN)).ok_or_else(
                || TraceError {
                    place: "the trace".into(),
                    what: "its files laid end to end reach past 2^64 bytes".into(),
                },
            )?;
        }
        for io in &mut self.ios {
            io.offset += offsets[io.file as usize];
        }
        self.file_offsets = offsets;
        Ok(())
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
