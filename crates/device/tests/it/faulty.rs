use std::sync::Arc;

use device::{Device, DeviceError, Fault, FaultyDevice, MemDevice, Op};

fn faulty(faults: Vec<Fault>) -> FaultyDevice {
    FaultyDevice::new(Arc::new(MemDevice::new(1 << 20).unwrap()), faults)
}

#[test]
fn nth_write_fails_and_no_other() {
    let dev = faulty(vec![Fault::Nth { op: Op::Write, n: 3 }]);
    let results: Vec<bool> = (0..6).map(|i| dev.write_at(&[1; 512], i * 512).is_ok()).collect();
    assert_eq!(results, [true, true, false, true, true, true]);
}

#[test]
fn failed_write_does_not_reach_the_inner_device() {
    let inner = Arc::new(MemDevice::new(1 << 20).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::Nth { op: Op::Write, n: 1 }]);
    assert!(dev.write_at(&[9; 512], 0).is_err());
    assert_eq!(inner.stats().snapshot().writes, 0);
}

#[test]
fn nth_read_fails_with_an_io_error() {
    let dev = faulty(vec![Fault::Nth { op: Op::Read, n: 2 }]);
    let mut buf = [0; 512];
    dev.read_at(&mut buf, 0).unwrap();
    let err = dev.read_at(&mut buf, 0).unwrap_err();
    assert!(matches!(err, DeviceError::Io { op: Op::Read, .. }), "{err}");
    dev.read_at(&mut buf, 0).unwrap();
}

#[test]
fn nth_flush_fails_and_poisons_the_device_as_a_real_one() {
    let dev = faulty(vec![Fault::Nth { op: Op::Flush, n: 2 }]);
    dev.flush().unwrap();
    assert!(matches!(dev.flush(), Err(DeviceError::Flush { .. })));
    assert!(matches!(dev.flush(), Err(DeviceError::Poisoned { .. })), "a flush is never retried");
}

#[test]
fn range_fault_fails_only_overlapping_requests() {
    let dev = faulty(vec![Fault::Range { range: 4096..8192, reads: true, writes: false }]);
    let mut buf = [0; 512];
    let outcomes: Vec<bool> =
        [3584u64, 4096, 7680, 8192].iter().map(|&off| dev.read_at(&mut buf, off).is_ok()).collect();
    assert_eq!(outcomes, [true, false, false, true]);
    dev.write_at(&[1; 512], 4096).unwrap();
}

#[test]
fn range_fault_catches_a_request_that_straddles_it() {
    let dev = faulty(vec![Fault::Range { range: 4096..4097, reads: false, writes: true }]);
    assert!(dev.write_at(&[1; 8192], 0).is_err());
}

#[test]
fn errors_are_counted() {
    let dev = faulty(vec![Fault::Nth { op: Op::Write, n: 1 }]);
    let _ = dev.write_at(&[1; 512], 0);
    assert_eq!(dev.stats().snapshot().errors, 1);
}

#[test]
fn lost_write_is_acknowledged_but_not_stored() {
    let inner = Arc::new(MemDevice::new(1 << 20).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::LoseWrite { n: 2 }]);
    dev.write_at(&[1; 512], 0).unwrap();
    dev.write_at(&[2; 512], 0).unwrap();
    assert_eq!(&inner.to_vec()[..512], &[1; 512]);
}

#[test]
fn misdirected_write_lands_elsewhere() {
    let inner = Arc::new(MemDevice::new(1 << 20).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::MisdirectWrite { n: 1, to_offset: 4096 }]);
    dev.write_at(&[3; 512], 0).unwrap();
    let image = inner.to_vec();
    assert_eq!((&image[..512], &image[4096..4608]), (&[0; 512][..], &[3; 512][..]));
}

#[test]
fn flipped_bit_changes_exactly_one_bit() {
    let inner = Arc::new(MemDevice::new(1 << 20).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::FlipBit { n: 1, byte: 10 }]);
    dev.write_at(&[0; 512], 0).unwrap();
    let image = inner.to_vec();
    assert_eq!(image[10], 1);
    assert_eq!(image.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
}

#[test]
fn torn_write_keeps_only_its_first_bytes() {
    let inner = Arc::new(MemDevice::new(1 << 20).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::TearWrite { n: 1, keep_bytes: 1024 }]);
    dev.write_at(&[5; 4096], 0).unwrap();
    let image = inner.to_vec();
    assert_eq!((&image[..1024], &image[1024..4096]), (&[5; 1024][..], &[0; 3072][..]));
}

#[test]
fn power_cut_stops_every_write_and_flush_after_the_budget() {
    let inner = Arc::new(MemDevice::new(4096).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::PowerCut { after: 2 }]);
    dev.write_at(&[1u8; 512], 0).unwrap();
    dev.flush().unwrap();
    assert!(dev.write_at(&[2u8; 512], 512).is_err());
    assert!(dev.flush().is_err());
    let mut back = [9u8; 512];
    inner.read_at(&mut back, 512).unwrap();
    assert_eq!(back, [0u8; 512], "a write after the cut reached the medium");
}

#[test]
fn a_full_host_fails_later_writes_with_enospc_and_says_it_is_out_of_space() {
    let inner = Arc::new(MemDevice::new(4096).unwrap());
    let dev = FaultyDevice::new(inner.clone(), vec![Fault::NoSpace { after: 1 }]);
    dev.write_at(&[1u8; 512], 0).unwrap();
    let err = dev.write_at(&[2u8; 512], 512).unwrap_err();
    assert!(err.is_out_of_space(), "{err}");
    assert!(err.to_string().contains("No space left on device"), "{err}");
    let mut back = [9u8; 512];
    inner.read_at(&mut back, 512).unwrap();
    assert_eq!(back, [0u8; 512], "a write the host had no room for reached the medium");
    assert!(!faulty(vec![Fault::Nth { op: Op::Write, n: 1 }])
        .write_at(&[1; 512], 0)
        .unwrap_err()
        .is_out_of_space());
}

#[test]
fn a_flush_the_host_had_no_room_for_poisons_the_device_and_the_poison_says_out_of_space() {
    let dev = faulty(vec![Fault::NoSpace { after: 0 }]);
    assert!(dev.write_at(&[1u8; 512], 0).is_err());
    let err = dev.flush().unwrap_err();
    assert!(matches!(err, DeviceError::Flush { .. }) && err.is_out_of_space(), "{err}");
    let err = dev.write_at(&[1u8; 512], 0).unwrap_err();
    assert!(matches!(err, DeviceError::Poisoned { .. }), "a flush is never retried: {err}");
    assert!(err.is_out_of_space(), "the poison keeps why: {err}");
}
