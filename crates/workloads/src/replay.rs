//! fio's I/O logs (`write_iolog`, `read_iolog`), versions 2 and 3, read
//! for replay: the reads and writes in their order, each sync or datasync
//! as a flush after the request before it, and in version 3 each
//! request's time from the start of the traced run.
//!
//! The format (fio's HOWTO, "Trace file format"; `iolog.c`): a first line
//! `fio version 2 iolog` or `fio version 3 iolog`, then one action a line:
//! `FILE add|open|close` (file management) or `FILE ACTION OFFSET LENGTH`
//! with ACTION `read`, `write`, `sync`, `datasync`, `trim` or (version 2
//! only) `wait`, whose OFFSET is a pause in microseconds. Version 3 puts a
//! timestamp first on every line: microseconds since the traced run
//! began, as fio 3.33 writes them (`utime_since_now`) and replays them.

use std::time::Duration;

use crate::gen::IoKind;

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracedIo {
    /// When it was issued, from the start of the traced run (version 3,
    /// and version 2's `wait`s added up); `None` in a version 2 trace
    /// before any wait.
    pub at: Option<Duration>,
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
    /// The trace syncs after it (a `sync` or `datasync` line next).
    pub flush_after: bool,
}

/// A trace read for replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// 2 or 3.
    pub version: u8,
    pub ios: Vec<TracedIo>,
    /// The files the trace names, in the order it names them.
    pub files: Vec<String>,
    /// Syncs with no request before them to follow (at the start).
    pub leading_syncs: u64,
}

/// What a run replayed, for its report.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySummary {
    /// The trace's path as given.
    pub source: String,
    /// The iolog version, 2 or 3.
    pub version: u8,
    /// Reads and writes in the trace.
    pub requests: u64,
    /// Syncs in the trace that follow a request (each a flush).
    pub flushes: u64,
    /// The pace: the trace's times divided by this; `None`: as fast as the
    /// queue depth allows.
    pub speed: Option<f64>,
}

impl ReplaySummary {
    pub fn of(spec: &crate::spec::ReplaySpec) -> ReplaySummary {
        ReplaySummary {
            source: spec.source.clone(),
            version: spec.trace.version,
            requests: spec.trace.ios.len() as u64,
            flushes: spec.trace.flushes(),
            speed: spec.speed,
        }
    }
}

/// Why a trace cannot be replayed, naming the line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {what}")]
pub struct TraceError {
    pub line: usize,
    pub what: String,
}

impl Trace {
    /// Reads a trace's text.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let err = |line: usize, what: String| TraceError { line, what };
        let mut lines = text.lines().enumerate().map(|(n, l)| (n + 1, l.trim()));
        let version = match lines.next() {
            Some((_, "fio version 2 iolog")) => 2,
            Some((_, "fio version 3 iolog")) => 3,
            Some((n, first)) => {
                return Err(err(
                    n,
                    format!(
                        "'{first}' is not an iolog's first line (`fio version 2 iolog` or `fio version 3 iolog`; \
                         fio's version 1 logs and blktrace captures are not read)"
                    ),
                ))
            }
            None => return Err(err(1, "the trace is empty".into())),
        };
        let mut trace = Trace { version, ..Trace::default() };
        let mut waited = None::<Duration>;
        for (n, line) in lines.filter(|(_, l)| !l.is_empty()) {
            let mut fields: Vec<&str> = line.split_whitespace().collect();
            let mut at = waited;
            if version == 3 {
                let stamp = fields.remove(0);
                let us: u64 = stamp
                    .parse()
                    .map_err(|_| err(n, format!("'{stamp}' is not a timestamp in microseconds")))?;
                at = Some(Duration::from_micros(us));
            }
            let number = |field: &str, what: &str| {
                field.parse::<u64>().map_err(|_| err(n, format!("'{field}' is not {what}")))
            };
            match fields[..] {
                [file, "add" | "open" | "close"] => {
                    if !trace.files.iter().any(|f| f == file) {
                        trace.files.push(file.to_string());
                    }
                }
                [_, "wait", micros, ..] if version == 2 => {
                    let pause = Duration::from_micros(number(micros, "a pause in microseconds")?);
                    waited = Some(waited.unwrap_or_default() + pause);
                }
                [_, "sync" | "datasync", ..] => match trace.ios.last_mut() {
                    Some(last) => last.flush_after = true,
                    None => trace.leading_syncs += 1,
                },
                [_, "trim", ..] => {
                    return Err(err(
                        n,
                        "a trim: iolab does not trim yet; take the trim lines out to replay the rest".into(),
                    ))
                }
                [file, action @ ("read" | "write"), offset, len] => {
                    let len = number(len, "a length in bytes")?;
                    if len == 0 {
                        return Err(err(n, format!("a {action} of 0 bytes")));
                    }
                    if !trace.files.iter().any(|f| f == file) {
                        trace.files.push(file.to_string());
                    }
                    let kind = if action == "read" { IoKind::Read } else { IoKind::Write };
                    let offset = number(offset, "an offset in bytes")?;
                    offset
                        .checked_add(len)
                        .ok_or_else(|| err(n, format!("offset {offset} + {len} overflows")))?;
                    trace.ios.push(TracedIo { at, kind, offset, len, flush_after: false });
                }
                _ => return Err(err(n, format!("'{line}' is not an iolog version {version} line"))),
            }
        }
        if trace.ios.is_empty() {
            return Err(err(text.lines().count().max(1), "the trace has no read or write to replay".into()));
        }
        Ok(trace)
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

    /// How many flushes a replay issues: one after each request the
    /// trace syncs after.
    pub fn flushes(&self) -> u64 {
        self.ios.iter().filter(|io| io.flush_after).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V3: &str = "fio version 3 iolog\n20 /tmp/f add\n176 /tmp/f open\n180 /tmp/f read 61440 4096\n\
                      465 /tmp/f write 774144 8192\n480 /tmp/f sync 774144 0\n5203 /tmp/f read 0 512\n\
                      6000 /tmp/f close\n";

    #[test]
    fn a_version_3_trace_keeps_each_request_its_time_and_its_sync() {
        let t = Trace::parse(V3).unwrap();
        assert_eq!(t.version, 3);
        assert_eq!(t.files, ["/tmp/f"]);
        let got: Vec<_> = t
            .ios
            .iter()
            .map(|io| (io.at.unwrap().as_micros(), io.kind, io.offset, io.len, io.flush_after))
            .collect();
        assert_eq!(
            got,
            [
                (180, IoKind::Read, 61440, 4096, false),
                (465, IoKind::Write, 774144, 8192, true),
                (5203, IoKind::Read, 0, 512, false)
            ]
        );
    }

    #[test]
    fn the_trace_says_its_extent_alignment_and_mix() {
        let t = Trace::parse(V3).unwrap();
        assert_eq!(
            (t.extent(), t.largest(), t.alignment(), t.read_pct(), t.flushes()),
            (774144 + 8192, 8192, 512, 67, 1)
        );
    }

    #[test]
    fn a_version_2_trace_has_no_times_until_a_wait() {
        let text =
            "fio version 2 iolog\nf add\nf open\nf write 0 4096\nf wait 1500 0\nf read 4096 4096\nf close\n";
        let t = Trace::parse(text).unwrap();
        assert_eq!(t.ios[0].at, None);
        assert_eq!(t.ios[1].at, Some(Duration::from_micros(1500)));
    }

    #[test]
    fn a_first_line_that_is_not_an_iolog_header_is_refused() {
        let e = Trace::parse("0,4096,4096\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.what.contains("fio version 2 iolog"), "{e}");
    }

    #[test]
    fn a_trim_is_refused_naming_its_line() {
        let e = Trace::parse("fio version 2 iolog\nf write 0 4096\nf trim 0 4096\n").unwrap_err();
        assert_eq!(e.line, 3);
    }

    #[test]
    fn a_line_of_another_shape_is_refused_naming_its_line() {
        let e = Trace::parse("fio version 3 iolog\n10 f write 0\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = Trace::parse("fio version 3 iolog\nten f write 0 4096\n").unwrap_err();
        assert!(e.what.contains("timestamp"), "{e}");
    }

    #[test]
    fn a_trace_without_requests_is_refused() {
        assert!(Trace::parse("fio version 2 iolog\nf add\nf open\nf close\n").is_err());
    }
}
