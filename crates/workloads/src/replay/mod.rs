//! Traces read for replay: fio's I/O logs here, the kernel's block-layer
//! traces in `blktrace.rs`.
//!
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

use std::sync::Arc;
use std::time::Duration;

use crate::kind::IoKind;

mod blktrace;
mod trace;

pub use trace::{Format, Trace, TraceError, TracedIo};

/// What a run replayed, for its report.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySummary {
    /// The trace's path as given.
    pub source: String,
    pub format: Format,
    /// The iolog version, 2 or 3; blktrace's record version, 7.
    pub version: u8,
    /// Reads and writes in the trace.
    pub requests: u64,
    /// Syncs in the trace that follow a request (each a flush).
    pub flushes: u64,
    /// The files (or a capture's devices) the trace names, each with the
    /// offset it was laid at on the target.
    pub files: Vec<(String, u64)>,
    /// The pace: the trace's times divided by this; `None`: as fast as the
    /// queue depth allows.
    pub speed: Option<f64>,
}

/// A trace to replay (`iolab run --replay FILE`): its requests at their
/// offsets from the region's start, in one thread.
#[derive(Clone, Debug)]
pub struct ReplaySpec {
    /// Where the trace came from, for reports.
    pub source: String,
    pub trace: Arc<Trace>,
    /// The trace's times divided by this (2: twice as fast); `None`: as
    /// fast as the requests complete, keeping only their order.
    pub speed: Option<f64>,
}

impl ReplaySummary {
    pub fn of(spec: &ReplaySpec) -> ReplaySummary {
        ReplaySummary {
            source: spec.source.clone(),
            format: spec.trace.format,
            version: spec.trace.version,
            requests: spec.trace.ios.len() as u64,
            flushes: spec.trace.flushes(),
            files: spec.trace.files.iter().cloned().zip(spec.trace.file_offsets.iter().copied()).collect(),
            speed: spec.speed,
        }
    }
}

impl Trace {
    /// Reads a trace of either format, told apart by its first bytes: a
    /// blktrace record's magic, or an iolog's header line.
    pub fn read(bytes: &[u8]) -> Result<Trace, TraceError> {
        if blktrace::is_blktrace(bytes) {
            return blktrace::parse(bytes);
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            TraceError::line(
                1,
                format!(
                    "neither an iolog (text: byte {} is not UTF-8) nor a blktrace capture (no blk_io_trace \
                     magic in the first record)",
                    e.valid_up_to()
                ),
            )
        })?;
        Trace::parse(text)
    }

    /// Reads an iolog's text.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut lines = text.lines().enumerate().map(|(n, l)| (n + 1, l.trim()));
        let version = match lines.next() {
            Some((_, "fio version 2 iolog")) => 2,
            Some((_, "fio version 3 iolog")) => 3,
            Some((line, first)) => {
                return Err(TraceError::line(
                    line,
                    format!(
                        "'{first}' is not an iolog's first line (`fio version 2 iolog` or `fio version 3 iolog`; \
                         fio's version 1 logs are not read) nor a blktrace capture's first record"
                    ),
                ))
            }
            None => return Err(TraceError::line(1, "the trace is empty".into())),
        };
        let mut trace = Trace { version, ..Trace::default() };
        let mut waited = None::<Duration>;
        for (n, line) in lines.filter(|(_, l)| !l.is_empty()) {
            trace.take(line, &mut waited).map_err(|what| TraceError::line(n, what))?;
        }
        if trace.ios.is_empty() {
            let line = text.lines().count().max(1);
            return Err(TraceError::line(line, "the trace has no read or write to replay".into()));
        }
        trace.lay_out_files()?;
        Ok(trace)
    }

    /// Takes one line after the first; `waited` is the time version 2's
    /// `wait` lines have added up to.
    fn take(&mut self, line: &str, waited: &mut Option<Duration>) -> Result<(), String> {
        let mut fields: Vec<&str> = line.split_whitespace().collect();
        let mut at = *waited;
        if self.version == 3 {
            let stamp = fields.remove(0);
            let us: u64 =
                stamp.parse().map_err(|_| format!("'{stamp}' is not a timestamp in microseconds"))?;
            at = Some(Duration::from_micros(us));
        }
        let number =
            |field: &str, what: &str| field.parse::<u64>().map_err(|_| format!("'{field}' is not {what}"));
        match fields[..] {
            [file, "add" | "open" | "close"] => {
                self.name(file);
            }
            [_, "wait", micros, ..] if self.version == 2 => {
                let pause = Duration::from_micros(number(micros, "a pause in microseconds")?);
                *waited = Some(waited.unwrap_or_default() + pause);
            }
            [_, "sync" | "datasync", ..] => match self.ios.last_mut() {
                Some(last) => last.flush_after = true,
                None => self.leading_syncs += 1,
            },
            [file, action @ ("read" | "write" | "trim"), offset, len] => {
                let (offset, len) =
                    (number(offset, "an offset in bytes")?, number(len, "a length in bytes")?);
                if len == 0 {
                    return Err(format!("a {action} of 0 bytes"));
                }
                offset.checked_add(len).ok_or_else(|| format!("offset {offset} + {len} overflows"))?;
                let file = self.name(file);
                let kind = match action {
                    "read" => IoKind::Read,
                    "write" => IoKind::Write,
                    _ => IoKind::Trim,
                };
                self.ios.push(TracedIo { at, kind, offset, len, flush_after: false, file });
            }
            _ => return Err(format!("'{line}' is not an iolog version {} line", self.version)),
        }
        Ok(())
    }
}

/// What one worker thread issued, written as a version 3 iolog as it
/// goes (`--write-iolog`): each request with its time from the thread's
/// start in microseconds, each flush as a `sync` line, the file named by
/// the target's name, so that `--replay` (or fio's `read_iolog`) issues
/// it again.
pub(crate) struct IologWriter {
    out: std::io::BufWriter<std::fs::File>,
    name: String,
    start: std::time::Instant,
    last_offset: u64,
}

impl IologWriter {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(
        path: &std::path::Path,
        name: &str,
        start: std::time::Instant,
    ) -> std::io::Result<IologWriter> {
        use std::io::Write;
        // A name with spaces would split the line: fio's reader takes the
        // first word.
        let name = name.replace(char::is_whitespace, "_");
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(out, "fio version 3 iolog\n0 {name} add\n0 {name} open")?;
        Ok(IologWriter { out, name, start, last_offset: 0 })
    }

    fn micros(&self, at: std::time::Instant) -> u128 {
        at.saturating_duration_since(self.start).as_micros()
    }

    /// A read or (`write`) a write of `len` bytes at `offset`.
    pub fn request(
        &mut self,
        at: std::time::Instant,
        kind: IoKind,
        offset: u64,
        len: u64,
    ) -> std::io::Result<()> {
        use std::io::Write;
        let action = match kind {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::Trim => "trim",
        };
        self.last_offset = offset;
        writeln!(self.out, "{} {} {action} {offset} {len}", self.micros(at), self.name)
    }

    pub fn sync(&mut self, at: std::time::Instant) -> std::io::Result<()> {
        use std::io::Write;
        writeln!(self.out, "{} {} sync {} 0", self.micros(at), self.name, self.last_offset)
    }

    /// The `close` line, and everything written out.
    pub fn finish(mut self, at: std::time::Instant) -> std::io::Result<()> {
        use std::io::Write;
        writeln!(self.out, "{} {} close", self.micros(at), self.name)?;
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }
}

/// The file thread `thread` of `threads` writes its iolog to: `path`
/// itself for one thread, `path.N` for each of several (as fio's
/// `write_iolog=name.$jobnum`), each a trace of its own to replay.
pub fn thread_iolog_path(path: &std::path::Path, thread: u32, threads: u32) -> std::path::PathBuf {
    if threads == 1 {
        return path.to_path_buf();
    }
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{thread}"));
    name.into()
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
            .map(|io| {
                (io.at.unwrap().as_micros(), io.kind == IoKind::Write, io.offset, io.len, io.flush_after)
            })
            .collect();
        assert_eq!(
            got,
            [(180, false, 61440, 4096, false), (465, true, 774144, 8192, true), (5203, false, 0, 512, false)]
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
        assert_eq!(e.place, "line 1");
        assert!(e.what.contains("fio version 2 iolog"), "{e}");
    }

    #[test]
    fn a_trim_is_read_as_a_discard() {
        let t = Trace::parse("fio version 2 iolog\nf write 0 4096\nf trim 0 4096\n").unwrap();
        assert_eq!(t.ios[1].kind, IoKind::Trim);
        assert!(t.trims());
    }

    #[test]
    fn a_line_of_another_shape_is_refused_naming_its_line() {
        let e = Trace::parse("fio version 3 iolog\n10 f write 0\n").unwrap_err();
        assert_eq!(e.place, "line 2");
        let e = Trace::parse("fio version 3 iolog\nten f write 0 4096\n").unwrap_err();
        assert!(e.what.contains("timestamp"), "{e}");
    }

    #[test]
    fn what_the_writer_writes_reads_back_as_the_same_requests() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let start = std::time::Instant::now();
        let mut w = IologWriter::create(&path, "my target", start).unwrap();
        w.request(start, IoKind::Write, 4096, 8192).unwrap();
        w.sync(start).unwrap();
        w.request(start + Duration::from_millis(3), IoKind::Read, 0, 512).unwrap();
        w.finish(start + Duration::from_millis(4)).unwrap();
        let t = Trace::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(t.files, ["my_target"]);
        let got: Vec<_> =
            t.ios.iter().map(|io| (io.kind == IoKind::Write, io.offset, io.len, io.flush_after)).collect();
        assert_eq!(got, [(true, 4096, 8192, true), (false, 0, 512, false)]);
        assert_eq!(t.ios[1].at, Some(Duration::from_millis(3)));
    }

    #[test]
    fn several_threads_each_write_a_file_of_their_own() {
        let p = std::path::Path::new("/x/t.log");
        assert_eq!(thread_iolog_path(p, 0, 1), p);
        assert_eq!(thread_iolog_path(p, 1, 3), std::path::Path::new("/x/t.log.1"));
    }

    #[test]
    fn a_trace_without_requests_is_refused() {
        assert!(Trace::parse("fio version 2 iolog\nf add\nf open\nf close\n").is_err());
    }

    #[test]
    fn files_laid_end_to_end_past_2_to_the_64_are_refused() {
        let text = "fio version 3 iolog\n1 a write 18446744073709543424 4096\n2 b write 0 4096\n";
        let err = Trace::parse(text).unwrap_err();
        assert_eq!(err.place, "the trace");
        assert!(err.what.contains("past 2^64"), "{err}");
    }

    #[test]
    fn one_file_keeps_its_offsets_and_begins_at_0() {
        let t = Trace::parse("fio version 3 iolog\n1 a write 8192 4096\n").unwrap();
        assert_eq!((t.ios[0].offset, &t.file_offsets[..]), (8192, &[0][..]));
    }
}
