use device::{AlignedBuf, Device, DeviceError, FileDevice, FileOptions};

fn create(dir: &tempfile::TempDir, size: u64, direct: bool) -> FileDevice {
    let options = FileOptions { create_bytes: Some(size), direct, ..Default::default() };
    FileDevice::open(dir.path().join("target"), &options).unwrap()
}

#[test]
fn file_is_created_sparse_with_the_requested_size() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 64 << 20, false);
    assert_eq!(dev.size_bytes(), 64 << 20);
    let meta = std::fs::metadata(dir.path().join("target")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert!(meta.blocks() * 512 < 1 << 20, "a new target must be sparse");
}

#[test]
fn file_reads_back_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 1 << 20, false);
    dev.write_at(&[0xab; 4096], 8192).unwrap();
    dev.flush().unwrap();
    let mut back = vec![0; 4096];
    dev.read_at(&mut back, 8192).unwrap();
    assert_eq!(back, vec![0xab; 4096]);
}

#[test]
fn missing_file_without_a_size_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = FileDevice::open(dir.path().join("nope"), &FileOptions::default()).err().unwrap();
    assert!(err.to_string().contains("does not exist (give a size to create it)"), "{err}");
}

#[test]
fn existing_file_is_never_shrunk() {
    let dir = tempfile::tempdir().unwrap();
    drop(create(&dir, 2 << 20, false));
    let dev = create(&dir, 1 << 20, false);
    assert_eq!(dev.size_bytes(), 2 << 20);
}

#[test]
fn direct_io_with_misaligned_buffer_is_the_documented_error() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 1 << 20, true);
    let buf = AlignedBuf::zeroed(4096 + 1, 4096);
    let err = dev.write_at(&buf[1..], 0).unwrap_err();
    assert!(matches!(err, DeviceError::Misaligned { what: "buffer address", .. }), "{err}");
    assert_eq!(dev.stats().snapshot().writes, 0);
}

#[test]
fn direct_io_with_misaligned_offset_is_the_documented_error() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 1 << 20, true);
    let buf = AlignedBuf::zeroed(4096, 4096);
    let err = dev.write_at(&buf, 100).unwrap_err();
    assert!(matches!(err, DeviceError::Misaligned { what: "offset and length", .. }), "{err}");
}

#[test]
fn direct_io_with_aligned_buffer_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 1 << 20, true);
    let mut buf = AlignedBuf::zeroed(8192, 4096);
    buf.fill(0x5a);
    dev.write_at(&buf, 4096).unwrap();
    let mut back = AlignedBuf::zeroed(8192, 4096);
    dev.read_at(&mut back, 4096).unwrap();
    assert_eq!(&back[..], &buf[..]);
}

#[test]
fn file_exposes_its_descriptor_for_io_uring() {
    let dir = tempfile::tempdir().unwrap();
    assert!(create(&dir, 1 << 20, false).raw_fd().is_some());
}

#[test]
fn an_exclusive_lock_is_refused_while_another_open_holds_one() {
    use device::LockKind;
    let dir = tempfile::tempdir().unwrap();
    let first = create(&dir, 1 << 20, false);
    first.lock(LockKind::Exclusive).unwrap();
    let second = create(&dir, 1 << 20, false);
    let err = second.lock(LockKind::Exclusive).unwrap_err();
    assert!(matches!(&err, DeviceError::Locked { holder, .. } if holder.contains("this process")), "{err}");
}

#[test]
fn shared_locks_coexist_and_exclude_a_writer() {
    use device::LockKind;
    let dir = tempfile::tempdir().unwrap();
    let a = create(&dir, 1 << 20, false);
    let b = create(&dir, 1 << 20, false);
    a.lock(LockKind::Shared).unwrap();
    b.lock(LockKind::Shared).unwrap();
    let writer = create(&dir, 1 << 20, false);
    assert!(matches!(writer.lock(LockKind::Exclusive), Err(DeviceError::Locked { .. })));
}

#[test]
fn a_lock_is_released_when_its_device_is_dropped() {
    use device::LockKind;
    let dir = tempfile::tempdir().unwrap();
    let first = create(&dir, 1 << 20, false);
    first.lock(LockKind::Exclusive).unwrap();
    drop(first);
    create(&dir, 1 << 20, false).lock(LockKind::Exclusive).unwrap();
}

#[test]
fn holes_of_a_sparse_file_are_reported_around_written_data() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 4 << 20, false);
    dev.write_at(&[7; 1 << 20], 1 << 20).unwrap();
    dev.flush().unwrap();
    let holes = dev.unwritten(0, 4 << 20).unwrap().unwrap();
    assert_eq!(holes, vec![0..1 << 20, 2 << 20..4 << 20]);
}

#[test]
fn holes_are_clipped_to_the_range_asked() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 4 << 20, false);
    dev.write_at(&[7; 1 << 20], 1 << 20).unwrap();
    let holes = dev.unwritten(512 << 10, 3 << 20).unwrap().unwrap();
    assert_eq!(holes, vec![512 << 10..1 << 20, 2 << 20..3 << 20]);
}

#[test]
fn a_file_on_tmpfs_is_reported_as_memory() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("/dev/shm is a tmpfs on Linux");
    let dev = create(&dir, 1 << 20, false);
    let media = dev.media();
    assert_eq!(media.len(), 1);
    assert_eq!(media[0].filesystem.as_deref(), Some("tmpfs"));
    assert!(media[0].memory_backed);
}

#[test]
fn dropping_the_cache_leaves_none_of_the_file_cached() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 1 << 20, false);
    dev.write_at(&[7; 1 << 20], 0).unwrap();
    assert!(dev.media()[0].cached_bytes.unwrap() > 0, "a buffered write leaves pages cached");
    dev.drop_cache().unwrap();
    assert_eq!(dev.media()[0].cached_bytes, Some(0));
}

#[test]
fn a_sparse_file_holds_no_data_until_written_there() {
    let dir = tempfile::tempdir().unwrap();
    let dev = create(&dir, 4 << 20, false);
    dev.write_at(&[1; 4096], 1 << 20).unwrap();
    assert!(dev.holds_no_data(2 << 20, 1 << 20), "past the write");
    assert!(!dev.holds_no_data(0, 2 << 20), "a range around the write");
}

#[test]
fn a_discard_on_a_file_punches_a_hole_that_reads_as_zeros() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.img");
    let dev =
        FileDevice::open(&path, &FileOptions { create_bytes: Some(4 << 20), ..Default::default() }).unwrap();
    dev.write_at(&vec![9u8; 4 << 20], 0).unwrap();
    dev.flush().unwrap();
    let before = std::fs::metadata(&path).unwrap().blocks();
    dev.discard(1 << 20, 2 << 20).unwrap();
    let mut buf = vec![1u8; 4 << 20];
    dev.read_at(&mut buf, 0).unwrap();
    assert!(buf[1 << 20..3 << 20].iter().all(|&b| b == 0) && buf[..1 << 20].iter().all(|&b| b == 9));
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 4 << 20, "the size is kept");
    assert!(meta.blocks() < before, "the blocks were given back: {} of {before}", meta.blocks());
}
