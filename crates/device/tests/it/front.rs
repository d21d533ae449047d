//! The checked front does its work once for every backend: a backend that
//! would accept anything never sees a bad request, a failed flush poisons
//! whatever backend it came from, and every backend's requests are counted.

use std::io;
use std::sync::{Arc, Mutex};

use device::{
    Backend, CrashDevice, Device, DeviceError, Fault, FaultyDevice, Front, Geometry, MemDevice, NullDevice,
    Op, Overlay, Recording, RecordingDevice, Slice,
};

const SIZE_BYTES: u64 = 64 * 1024;

/// A backend that accepts every request it is given and notes it: what
/// the front lets through is exactly what it records.
struct Spy {
    front: Front,
    calls: Mutex<Vec<String>>,
    /// The `n`th flush (from 1) fails.
    failing_flush: Option<u64>,
    flushes: Mutex<u64>,
}

impl Spy {
    fn new(geometry: Geometry, failing_flush: Option<u64>) -> Spy {
        Spy {
            front: Front::new("spy", geometry),
            calls: Mutex::new(Vec::new()),
            failing_flush,
            flushes: Mutex::new(0),
        }
    }

    fn plain() -> Spy {
        Spy::new(Geometry::new(SIZE_BYTES, 512), None)
    }

    fn note(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Backend for Spy {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.note(format!("read {offset}+{}", buf.len()));
        Ok(())
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.note(format!("write {offset}+{}", buf.len()));
        Ok(())
    }

    fn write_unlogged_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.note(format!("unlogged {offset}+{}", buf.len()));
        Ok(())
    }

    fn flush_raw(&self, _: device::Checked) -> device::Result<()> {
        let mut flushes = self.flushes.lock().unwrap();
        *flushes += 1;
        self.note("flush".into());
        if self.failing_flush == Some(*flushes) {
            let source = io::Error::from_raw_os_error(libc::EIO);
            return Err(DeviceError::Flush { device: "spy".into(), source });
        }
        Ok(())
    }

    fn unwritten_raw(
        &self,
        start: u64,
        end: u64,
        _: device::Checked,
    ) -> device::Result<Option<Vec<std::ops::Range<u64>>>> {
        self.note(format!("unwritten {start}..{end}"));
        Ok(None)
    }

    fn will_need_raw(&self, offset: u64, len: u64) {
        self.note(format!("will_need {offset}+{len}"));
    }

    fn discard_raw(&self, offset: u64, len: u64, _: device::Checked) -> device::Result<()> {
        self.note(format!("discard {offset}+{len}"));
        Ok(())
    }

    fn discards_raw(&self) -> bool {
        true
    }
}

fn is_refusal(err: &DeviceError) -> bool {
    matches!(err, DeviceError::Misaligned { .. } | DeviceError::OutOfRange { .. })
}

/// Requests no device may accept: (buffer length, offset), with 512-byte
/// sectors on `SIZE_BYTES`.
const BAD: [(usize, u64); 5] = [
    (512, 100),               // offset inside a sector
    (100, 0),                 // length not whole sectors
    (1024, SIZE_BYTES - 512), // runs past the end
    (512, SIZE_BYTES),        // starts at the end
    (512, u64::MAX - 511),    // offset + length overflows
];

#[test]
fn a_backend_never_sees_a_misaligned_or_out_of_range_request() {
    let spy = Spy::plain();
    for (len, offset) in BAD {
        let mut buf = vec![0u8; len];
        assert!(is_refusal(&spy.read_at(&mut buf, offset).unwrap_err()), "read {len} at {offset}");
        assert!(is_refusal(&spy.write_at(&buf, offset).unwrap_err()), "write {len} at {offset}");
        assert!(is_refusal(&spy.write_unlogged(&buf, offset).unwrap_err()), "unlogged {len} at {offset}");
        let good = [0u8; 512];
        let atomic = spy.write_atomic(&[(0, &good), (offset, &buf)]).unwrap_err();
        assert!(is_refusal(&atomic), "atomic with {len} at {offset}");
    }
    assert_eq!(spy.calls(), Vec::<String>::new(), "no bad request, nor any part of one, reached the backend");
    assert_eq!(spy.stats().snapshot().errors, 4 * BAD.len() as u64);
}

#[test]
fn a_backend_needing_aligned_buffers_never_sees_an_unaligned_one() {
    let spy = Spy::new(Geometry { buffer_align: 4096, ..Geometry::new(SIZE_BYTES, 512) }, None);
    let mut buf = device::AlignedBuf::zeroed(8192, 4096);
    let err = spy.read_at(&mut buf[512..1024], 0).unwrap_err();
    assert!(matches!(err, DeviceError::Misaligned { what: "buffer address", .. }), "{err}");
    assert!(spy.write_at(&buf[512..1024], 0).is_err());
    spy.write_at(&buf[..512], 0).unwrap();
    assert_eq!(spy.calls(), ["write 0+512"]);
}

#[test]
fn good_requests_pass_unchanged() {
    let spy = Spy::plain();
    let mut buf = [0u8; 1024];
    spy.read_at(&mut buf, 512).unwrap();
    spy.write_at(&buf, SIZE_BYTES - 1024).unwrap();
    spy.write_unlogged(&buf[..512], 0).unwrap();
    spy.write_atomic(&[(0, &buf[..512]), (4096, &buf)]).unwrap();
    spy.flush().unwrap();
    let expect =
        ["read 512+1024", "write 64512+1024", "unlogged 0+512", "write 0+512", "write 4096+1024", "flush"];
    assert_eq!(spy.calls(), expect);
}

#[test]
fn the_front_cuts_an_unwritten_query_to_the_device() {
    let spy = Spy::plain();
    spy.unwritten(4096, u64::MAX).unwrap();
    spy.unwritten(SIZE_BYTES + 512, SIZE_BYTES * 2).unwrap();
    let expect = [format!("unwritten 4096..{SIZE_BYTES}"), format!("unwritten {SIZE_BYTES}..{SIZE_BYTES}")];
    assert_eq!(spy.calls(), expect);
}

#[test]
fn a_failed_flush_poisons_a_backend_that_knows_nothing_of_poisoning() {
    let spy = Spy::new(Geometry::new(SIZE_BYTES, 512), Some(1));
    let buf = [7u8; 512];
    spy.write_at(&buf, 0).unwrap();
    assert!(matches!(spy.flush().unwrap_err(), DeviceError::Flush { .. }));
    let refused = [
        spy.write_at(&buf, 0).unwrap_err(),
        spy.write_unlogged(&buf, 0).unwrap_err(),
        spy.write_atomic(&[(0, &buf)]).unwrap_err(),
        spy.flush().unwrap_err(),
    ];
    for err in &refused {
        assert!(matches!(err, DeviceError::Poisoned { .. }), "{err}");
        assert!(err.to_string().contains("flush failed"), "the cause is named: {err}");
    }
    let mut back = [0u8; 512];
    spy.read_at(&mut back, 0).unwrap();
    assert_eq!(
        spy.calls(),
        ["write 0+512", "flush", "read 0+512"],
        "nothing but reads after the failed flush"
    );
    assert_eq!(spy.stats().snapshot().errors, 5);
}

#[test]
fn a_backend_may_poison_its_device_and_its_cause_stays() {
    let spy = Spy::new(Geometry::new(SIZE_BYTES, 512), Some(1));
    spy.front().poison("the commit write failed");
    let err = spy.write_at(&[0; 512], 0).unwrap_err();
    assert!(
        matches!(&err, DeviceError::Poisoned { op: Op::Write, cause, .. } if cause.text == "the commit write failed")
    );
    let err = spy.flush().unwrap_err();
    assert!(
        matches!(&err, DeviceError::Poisoned { cause, .. } if cause.text == "the commit write failed"),
        "{err}"
    );
    assert!(spy.calls().is_empty());
}

#[test]
fn a_later_flush_failure_does_not_replace_the_first_cause() {
    let spy = Spy::new(Geometry::new(SIZE_BYTES, 512), Some(1));
    spy.flush().unwrap_err();
    spy.front().poison("something later");
    let err = spy.write_at(&[0; 512], 0).unwrap_err();
    assert!(!err.to_string().contains("something later"), "{err}");
}

#[test]
fn every_request_is_counted_for_any_backend() {
    let spy = Spy::plain();
    let mut buf = [0u8; 4096];
    spy.read_at(&mut buf, 0).unwrap();
    spy.read_at(&mut buf[..512], 8192).unwrap();
    spy.write_at(&buf, 0).unwrap();
    spy.write_atomic(&[(0, &buf[..1024]), (8192, &buf[..512])]).unwrap();
    spy.write_unlogged(&buf[..512], 0).unwrap();
    spy.flush().unwrap();
    let _ = spy.read_at(&mut buf[..100], 0);
    let s = spy.stats().snapshot();
    assert_eq!((s.reads, s.bytes_read), (2, 4096 + 512));
    assert_eq!((s.writes, s.bytes_written), (4, 4096 + 1024 + 512 + 512));
    assert_eq!((s.flushes, s.errors), (1, 1));
}

/// Every backend of this crate, each over a fresh memory device of
/// `SIZE_BYTES` (returned too, to watch what reaches it).
fn every_backend() -> Vec<(Arc<dyn Device>, Arc<MemDevice>)> {
    let mem = || Arc::new(MemDevice::new(SIZE_BYTES).unwrap());
    let mut all: Vec<(Arc<dyn Device>, Arc<MemDevice>)> = Vec::new();
    let m = mem();
    all.push((m.clone(), m));
    let m = mem();
    all.push((Arc::new(CrashDevice::new(m.clone()).unwrap()), m));
    let m = mem();
    all.push((Arc::new(FaultyDevice::new(m.clone(), Vec::new())), m));
    let m = mem();
    all.push((Arc::new(RecordingDevice::new(m.clone(), 0, Recording::new())), m));
    let m = mem();
    all.push((Arc::new(Overlay::new(m.clone())), m));
    let big = Arc::new(MemDevice::new(2 * SIZE_BYTES).unwrap());
    all.push((Arc::new(Slice::new(big.clone(), SIZE_BYTES, SIZE_BYTES).unwrap()), big));
    all.push((Arc::new(NullDevice::new(SIZE_BYTES).unwrap()), mem()));
    all
}

#[test]
fn every_backend_refuses_bad_requests_before_they_reach_below() {
    for (dev, below) in every_backend() {
        for (len, offset) in BAD {
            let buf = vec![1u8; len];
            assert!(
                is_refusal(&dev.write_at(&buf, offset).unwrap_err()),
                "{}: {len} at {offset}",
                dev.name()
            );
        }
        assert_eq!(below.stats().snapshot().writes, 0, "{}: a bad request reached below", dev.name());
        assert_eq!(dev.stats().snapshot().errors, BAD.len() as u64, "{}", dev.name());
    }
}

#[test]
fn every_backend_counts_its_requests() {
    for (dev, _) in every_backend() {
        let mut buf = [3u8; 1024];
        dev.write_at(&buf, 512).unwrap();
        dev.read_at(&mut buf, 512).unwrap();
        dev.flush().unwrap();
        let s = dev.stats().snapshot();
        let counted = (s.reads, s.bytes_read, s.writes, s.bytes_written, s.flushes, s.errors);
        assert_eq!(counted, (1, 1024, 1, 1024, 1, 0), "{}", dev.name());
    }
}

#[test]
fn every_wrapper_is_poisoned_by_a_failed_flush_below_it() {
    type Wrap = fn(Arc<dyn Device>) -> Arc<dyn Device>;
    let wrappers: Vec<(&str, Wrap)> = vec![
        ("crash", |d| Arc::new(CrashDevice::new(d).unwrap())),
        ("recorded", |d| Arc::new(RecordingDevice::new(d, 0, Recording::new()))),
        ("slice", |d| Arc::new(Slice::new(d, 512, SIZE_BYTES - 512).unwrap())),
        ("faulty", |d| Arc::new(FaultyDevice::new(d, Vec::new()))),
    ];
    for (what, wrap) in wrappers {
        let failing = Arc::new(FaultyDevice::new(
            Arc::new(MemDevice::new(SIZE_BYTES).unwrap()),
            vec![Fault::Nth { op: Op::Flush, n: 1 }],
        ));
        let dev = wrap(failing);
        assert!(dev.flush().is_err(), "{what}");
        let err = dev.write_at(&[0; 512], 0).unwrap_err();
        assert!(
            matches!(&err, DeviceError::Poisoned { device, .. } if device == dev.name()),
            "{what}: {err}"
        );
    }
}

#[test]
fn a_direct_submitter_s_check_refuses_writes_on_a_poisoned_device() {
    let dir = tempfile::tempdir().unwrap();
    let options = device::FileOptions { create_bytes: Some(1 << 20), ..Default::default() };
    let dev = device::FileDevice::open(dir.path().join("t"), &options).unwrap();
    dev.poison("an io_uring fdatasync failed".into());
    let err = device::check_request(&dev, device::Op::Write, 0, 4096, 0).unwrap_err();
    assert!(matches!(err, device::DeviceError::Poisoned { .. }), "{err}");
    device::check_request(&dev, device::Op::Read, 0, 4096, 0).unwrap();
    assert!(matches!(dev.flush(), Err(device::DeviceError::Poisoned { .. })), "the front refuses too");
}

#[test]
fn a_read_ahead_hint_reaches_the_backend_cut_to_the_device_through_a_slice_and_a_view() {
    let spy = Arc::new(Spy::plain());
    spy.will_need(SIZE_BYTES - 512, 4096);
    spy.will_need(SIZE_BYTES, 512);
    let slice = Slice::new(spy.clone(), 1024, 2048).unwrap();
    slice.will_need(512, 512);
    Overlay::over(spy.clone()).will_need(0, 512);
    let expected = [
        format!("will_need {}+512", SIZE_BYTES - 512),
        "will_need 1536+512".into(),
        "will_need 0+512".into(),
    ];
    assert_eq!(spy.calls(), expected);
}

#[test]
fn a_discard_reaches_the_backend_only_when_it_is_whole_sectors_inside_and_unpoisoned() {
    let spy = Spy::new(Geometry::new(SIZE_BYTES, 512), Some(1));
    for (len, offset) in BAD {
        assert!(is_refusal(&spy.discard(offset, len as u64).unwrap_err()), "discard {len} at {offset}");
    }
    spy.discard(1024, 2048).unwrap();
    assert!(spy.flush().is_err());
    assert!(matches!(spy.discard(0, 512).unwrap_err(), DeviceError::Poisoned { op: Op::Trim, .. }));
    assert_eq!(spy.calls(), ["discard 1024+2048", "flush"]);
}

#[test]
fn a_device_that_does_not_take_discards_refuses_them_saying_so() {
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(SIZE_BYTES).unwrap());
    let faulty = FaultyDevice::new(Arc::clone(&mem), Vec::new());
    assert!(mem.discards() && !faulty.discards());
    let err = faulty.discard(0, 512).unwrap_err();
    assert!(err.to_string().contains("does not take trims"), "{err}");
}
