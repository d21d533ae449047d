use device::{Device, DeviceError, MemDevice, NullDevice};

#[test]
fn memory_device_reads_back_what_was_written() {
    let dev = MemDevice::new(4 << 20).unwrap();
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    // Straddles the 1 MiB chunk boundary.
    dev.write_at(&data, (1 << 20) - 4096).unwrap();
    let mut back = vec![0; 8192];
    dev.read_at(&mut back, (1 << 20) - 4096).unwrap();
    assert_eq!(back, data);
}

#[test]
fn memory_device_is_sparse_until_written() {
    let dev = MemDevice::new(1 << 30).unwrap();
    let mut buf = vec![0xff; 4096];
    dev.read_at(&mut buf, 512 << 20).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    dev.write_at(&[1; 512], 0).unwrap();
    assert_eq!(dev.allocated_bytes(), 1 << 20);
}

#[test]
fn misaligned_request_is_refused_and_counted() {
    let dev = MemDevice::new(1 << 20).unwrap();
    let err = dev.write_at(&[0; 100], 0).unwrap_err();
    assert!(matches!(err, DeviceError::Misaligned { align: 512, .. }), "{err}");
    assert_eq!(dev.stats().snapshot().errors, 1);
    assert_eq!(dev.stats().snapshot().writes, 0);
}

#[test]
fn request_past_the_end_is_refused() {
    let dev = MemDevice::new(1 << 20).unwrap();
    let mut buf = vec![0; 1024];
    let err = dev.read_at(&mut buf, (1 << 20) - 512).unwrap_err();
    assert!(matches!(err, DeviceError::OutOfRange { size, .. } if size == 1 << 20), "{err}");
}

#[test]
fn offset_overflow_is_out_of_range_not_a_panic() {
    let dev = MemDevice::new(1 << 20).unwrap();
    let err = dev.write_at(&[0; 512], u64::MAX - 511).unwrap_err();
    assert!(matches!(err, DeviceError::OutOfRange { .. }), "{err}");
}

#[test]
fn counters_count_requests_and_bytes() {
    let dev = MemDevice::new(1 << 20).unwrap();
    dev.write_at(&[1; 1024], 0).unwrap();
    dev.write_at(&[1; 512], 4096).unwrap();
    dev.read_at(&mut [0; 2048], 0).unwrap();
    dev.flush().unwrap();
    let s = dev.stats().snapshot();
    assert_eq!((s.writes, s.bytes_written, s.reads, s.bytes_read, s.flushes), (2, 1536, 1, 2048, 1));
}

#[test]
fn four_k_sector_device_refuses_512_byte_requests() {
    let dev = MemDevice::with_sector("mem4k", 1 << 20, 4096).unwrap();
    assert!(matches!(dev.write_at(&[0; 512], 0), Err(DeviceError::Misaligned { align: 4096, .. })));
}

#[test]
fn zero_sized_memory_device_is_invalid() {
    assert!(matches!(MemDevice::new(0), Err(DeviceError::Invalid(_))));
}

#[test]
fn null_device_counts_but_stores_nothing() {
    let dev = NullDevice::new(1 << 20).unwrap();
    dev.write_at(&[7; 512], 0).unwrap();
    let mut buf = vec![3; 512];
    dev.read_at(&mut buf, 0).unwrap();
    assert_eq!(buf, vec![3; 512]);
    assert_eq!(dev.stats().snapshot().writes, 1);
}

#[test]
fn a_slice_addresses_its_window_from_zero_and_stays_inside_it() {
    let inner = std::sync::Arc::new(MemDevice::new(8192).unwrap());
    let slice = device::Slice::new(inner.clone(), 4096, 2048).unwrap();
    slice.write_at(&[7u8; 512], 512).unwrap();
    let mut back = [0u8; 512];
    inner.read_at(&mut back, 4608).unwrap();
    assert_eq!(back, [7u8; 512]);
    assert!(slice.write_at(&[7u8; 512], 2048).is_err(), "past the window");
    assert!(device::Slice::new(inner, 4096, 8192).is_err(), "window past the device");
}

#[test]
fn chunks_never_written_are_unwritten() {
    let dev = device::MemDevice::new(4 << 20).unwrap();
    device::Device::write_at(&dev, &[1; 512], (2 << 20) + 512).unwrap();
    let holes = device::Device::unwritten(&dev, 0, 4 << 20).unwrap().unwrap();
    assert_eq!(holes, vec![0..2 << 20, 3 << 20..4 << 20]);
}

#[test]
fn a_discard_zeros_its_range_and_frees_whole_chunks() {
    let dev = MemDevice::new(4 << 20).unwrap();
    dev.write_at(&vec![7u8; 3 << 20], 0).unwrap();
    // Part of the first chunk, all of the second.
    dev.discard(512 << 10, (1 << 20) + (512 << 10)).unwrap();
    let mut buf = vec![0u8; 3 << 20];
    dev.read_at(&mut buf, 0).unwrap();
    assert!(buf[..512 << 10].iter().all(|&b| b == 7));
    assert!(buf[512 << 10..2 << 20].iter().all(|&b| b == 0));
    assert!(buf[2 << 20..].iter().all(|&b| b == 7));
    assert_eq!(dev.allocated_bytes(), 2 << 20, "the second chunk was given back");
}
