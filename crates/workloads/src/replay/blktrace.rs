//! The kernel's block-layer trace records, read for replay: what
//! `blktrace -o -` writes, what `blkparse -d FILE` dumps, and what the
//! `blk` ftrace tracer gives with its `bin` option (and `nocontext-info`).
//!
//! Each record is a `struct blk_io_trace` (include/uapi/linux/blktrace_api.h),
//! 48 bytes in the tracing machine's byte order, then `pdu_len` bytes of
//! payload:
//!
//! | bytes | field | here |
//! |---|---|---|
//! | 0-3 | magic `0x654174` << 8, low byte the version (7) | checked, gives the byte order |
//! | 4-7 | sequence | unused |
//! | 8-15 | time, ns | the request's time from the first record's |
//! | 16-23 | sector (512 bytes) | offset |
//! | 24-27 | bytes | length |
//! | 28-31 | action: low 16 bits what happened, high 16 the categories | see below |
//! | 32-35 | pid; 36-39 device (major << 20 \| minor); 40-43 cpu | device names the "file" |
//! | 44-45 error; 46-47 pdu_len | payload skipped |
//!
//! A request is replayed as it was *queued* (action `__BLK_TA_QUEUE`, 1),
//! before the block layer split, merged or reordered it, as fio's blktrace
//! replay does; the other events (get request, plug, issue, complete, ...)
//! and notes (`BLK_TC_NOTIFY`) are skipped. A queued request with the
//! category `BLK_TC_FLUSH` (preflush) flushes before it (after the request
//! before it); one of no bytes is a flush alone; `BLK_TC_FUA` flushes after
//! it. A discard (`BLK_TC_DISCARD`, written with the write category) is
//! replayed as a discard.
//! Records are taken in time order (blktrace writes each CPU's buffer as
//! it fills, so a capture is not sorted).

use std::time::Duration;

use super::trace::{Format, Trace, TraceError, TracedIo};
use crate::kind::IoKind;

const MAGIC: u32 = 0x6561_7400;
const VERSION: u8 = 7;
const RECORD: usize = 48;

/// Categories (the action's high 16 bits).
const TC_READ: u32 = 1 << 0;
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
const TC_FUA: u32 = 1 << 15;
/// `__BLK_TA_QUEUE`: a request as it entered the block layer.
const TA_QUEUE: u32 = 1;

/// Whether `bytes` begin as a blktrace record does, in either byte order.
pub(super) fn is_blktrace(bytes: &[u8]) -> bool {
    order(bytes).is_some()
}

/// The record's byte order: `Some(true)` little-endian.
fn order(bytes: &[u8]) -> Option<bool> {
    let magic: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    let le = u32::from_le_bytes(magic);
    let be = u32::from_be_bytes(magic);
    if le & 0xffff_ff00 == MAGIC {
        Some(true)
    } else if be & 0xffff_ff00 == MAGIC {
        Some(false)
    } else {
        None
    }
}

/// One record's fields that replay uses.
struct Record {
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    device: u32,
}

/// Reads every record of a capture.
pub(super) fn parse(bytes: &[u8]) -> Result<Trace, TraceError> {
    let records = records(bytes)?;
    let start = records.iter().map(|(_, r)| r.time).min().unwrap_or(0);
    let mut trace = Trace { format: Format::Blktrace, version: VERSION, ..Trace::default() };
    for (place, r) in &records {
        take(&mut trace, r, start).map_err(|what| TraceError { place: place.clone(), what })?;
    }
    if trace.ios.is_empty() {
        return Err(TraceError {
            place: format!("all {} records", records.len()),
            what: "no read or write was queued in the capture (was the device idle, or only completions \
                   traced? trace every action, as blktrace does by default)"
                .into(),
        });
    }
    trace.lay_out_files()?;
    Ok(trace)
}

/// The records in time order, each with where it is in the capture.
fn records(bytes: &[u8]) -> Result<Vec<(String, Record)>, TraceError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let place = format!("record {} (byte {at})", out.len() + 1);
        let head = bytes.get(at..at + RECORD).ok_or_else(|| TraceError {
            place: place.clone(),
            what: format!("the capture ends {} bytes into a 48-byte record (cut short?)", bytes.len() - at),
        })?;
        let le = order(head).ok_or_else(|| TraceError {
            place: place.clone(),
            what: "no blk_io_trace magic: the capture is damaged or not one stream of records".into(),
        })?;
        let u32_at = |i: usize| {
            let b: [u8; 4] = head[i..i + 4].try_into().expect("4 bytes");
            if le {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            }
        };
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        let u64_at = |i: usize| if le { u64_at(i) } else { u64_at(i).rotate_left(32) };
        let version = (u32_at(0) & 0xff) as u8;
        if version != VERSION {
            return Err(TraceError {
                place,
                what: format!(
                    "blk_io_trace version {version}: iolab reads version {VERSION} (blktrace 1.x, the blk \
                     tracer)"
                ),
            });
        }
        let pdu: [u8; 2] = head[46..48].try_into().expect("2 bytes");
        let pdu_len = if le { u16::from_le_bytes(pdu) } else { u16::from_be_bytes(pdu) };
        let record = Record {
            time: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            action: u32_at(28),
            device: u32_at(36),
        };
        out.push((place, record));
        at += RECORD + pdu_len as usize;
    }
    out.sort_by_key(|(_, r)| r.time);
    Ok(out)
}

/// Takes one record: a queued read, write or flush; anything else skipped.
fn take(trace: &mut Trace, r: &Record, start: u64) -> Result<(), String> {
    let category = r.action >> 16;
    if r.action & 0xffff != TA_QUEUE || category & TC_NOTIFY != 0 {
        return Ok(());
    }
    let sector = r.sector;
    if category & TC_FLUSH != 0 {
        match trace.ios.last_mut() {
            Some(last) => last.flush_after = true,
            None => trace.leading_syncs += 1,
        }
    }
    if r.bytes == 0 || category & (TC_READ | TC_WRITE | TC_DISCARD) == 0 {
        return Ok(());
    }
    let offset = sector.checked_mul(512).ok_or_else(|| format!("sector {sector} is past any device"))?;
    let len = u64::from(r.bytes);
    offset.checked_add(len).ok_or_else(|| format!("sector {sector} + {len} bytes overflows"))?;
    let device = format!("{},{}", r.device >> 20, r.device & 0xf_ffff);
    let file = trace.name(&device);
    trace.ios.push(TracedIo {
        at: Some(Duration::from_nanos(r.time - start)),
        kind: if category & TC_DISCARD != 0 {
            IoKind::Trim
        } else if category & TC_WRITE != 0 {
            IoKind::Write
        } else {
            IoKind::Read
        },
        offset,
        len,
        flush_after: category & TC_FUA != 0,
        file,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the kernel writes it in `le` byte order.
    fn record(le: bool, time: u64, sector: u64, bytes: u32, action: u32, pdu: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let u32_ = |v: u32, out: &mut Vec<u8>| {
            out.extend_from_slice(&if le { v.to_le_bytes() } else { v.to_be_bytes() })
        };
        let u64_ = |v: u64, out: &mut Vec<u8>| {
            out.extend_from_slice(&if le { v.to_le_bytes() } else { v.to_be_bytes() })
        };
        u32_(MAGIC | 7, &mut out);
        u32_(0, &mut out);
        u64_(time, &mut out);
        u64_(sector, &mut out);
        u32_(bytes, &mut out);
        u32_(action, &mut out);
        u32_(1234, &mut out);
        u32_(7 << 20 | 3, &mut out);
        u32_(0, &mut out);
        let (error, pdu_len) = (0u16, pdu.len() as u16);
        out.extend_from_slice(&if le { error.to_le_bytes() } else { error.to_be_bytes() });
        out.extend_from_slice(&if le { pdu_len.to_le_bytes() } else { pdu_len.to_be_bytes() });
        out.extend_from_slice(pdu);
        out
    }

    const Q: u32 = TA_QUEUE;
    const ISSUE: u32 = 7;
    const COMPLETE: u32 = 8;

    fn capture(le: bool) -> Vec<u8> {
        let w = TC_WRITE << 16;
        let r = TC_READ << 16;
        [
            record(le, 1_000, 0, 4096, w | Q, &[]),
            record(le, 1_500, 0, 4096, w | ISSUE, &[]),
            record(le, 2_000, 0, 4096, w | COMPLETE, &[]),
            record(le, 3_000, 8, 8192, r | Q, &[]),
            // A note from the tracer: a process name as payload.
            record(le, 3_100, 0, 0, TC_NOTIFY << 16, b"dd\0\0\0\0\0\0"),
            record(le, 4_000, 0, 0, (TC_WRITE | TC_FLUSH) << 16 | Q, &[]),
            record(le, 5_000, 24, 512, (TC_WRITE | TC_FUA) << 16 | Q, &[]),
        ]
        .concat()
    }

    #[test]
    fn queued_requests_are_replayed_at_their_times_with_flushes_where_traced() {
        for le in [true, false] {
            let t = Trace::read(&capture(le)).unwrap();
            assert_eq!((t.format, t.version), (Format::Blktrace, 7));
            let got: Vec<_> = t
                .ios
                .iter()
                .map(|io| {
                    (io.at.unwrap().as_nanos(), io.kind == IoKind::Write, io.offset, io.len, io.flush_after)
                })
                .collect();
            assert_eq!(
                got,
                [(0, true, 0, 4096, false), (2000, false, 4096, 8192, true), (4000, true, 12288, 512, true)],
                "little-endian: {le}"
            );
            assert_eq!(t.files, ["7,3"]);
        }
    }

    #[test]
    fn records_out_of_time_order_are_sorted() {
        let w = TC_WRITE << 16 | Q;
        let bytes = [record(true, 9_000, 16, 4096, w, &[]), record(true, 2_000, 8, 4096, w, &[])].concat();
        let t = Trace::read(&bytes).unwrap();
        assert_eq!(t.ios.iter().map(|io| io.offset).collect::<Vec<_>>(), [4096, 8192]);
    }

    #[test]
    fn a_discard_is_replayed_as_a_trim() {
        let bytes = [
            record(true, 1, 0, 4096, TC_WRITE << 16 | Q, &[]),
            record(true, 2, 8, 4096, (TC_WRITE | TC_DISCARD) << 16 | Q, &[]),
        ]
        .concat();
        let t = Trace::read(&bytes).unwrap();
        assert_eq!(t.ios.iter().map(|io| io.kind).collect::<Vec<_>>(), [IoKind::Write, IoKind::Trim]);
    }

    #[test]
    fn a_capture_cut_inside_a_record_is_refused() {
        let mut bytes = capture(true);
        bytes.truncate(bytes.len() - 10);
        let e = Trace::read(&bytes).unwrap_err();
        assert!(e.what.contains("cut short"), "{e}");
    }

    #[test]
    fn another_record_version_is_refused() {
        let mut bytes = record(true, 1, 0, 4096, TC_WRITE << 16 | Q, &[]);
        bytes[0] = 8;
        let e = Trace::read(&bytes).unwrap_err();
        assert!(e.what.contains("version 8"), "{e}");
    }

    #[test]
    fn a_capture_of_completions_only_has_nothing_to_replay() {
        let bytes = record(true, 1, 0, 4096, TC_WRITE << 16 | COMPLETE, &[]);
        let e = Trace::read(&bytes).unwrap_err();
        assert!(e.what.contains("no read or write was queued"), "{e}");
    }
}
