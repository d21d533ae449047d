use device::{signature, Device, MemDevice};

#[test]
fn blank_device_has_no_signature() {
    let dev = MemDevice::new(1 << 20).unwrap();
    assert_eq!(signature::probe(&dev).unwrap(), None);
}

#[test]
fn ext4_superblock_magic_is_recognised() {
    let dev = MemDevice::new(1 << 20).unwrap();
    let mut sector = vec![0; 512];
    sector[1080 - 1024] = 0x53;
    sector[1081 - 1024] = 0xef;
    dev.write_at(&sector, 1024).unwrap();
    assert_eq!(signature::probe(&dev).unwrap(), Some("ext2/ext3/ext4 file system"));
}

#[test]
fn iolab_volume_magic_is_recognised() {
    let mut head = vec![0; 4096];
    head[..8].copy_from_slice(signature::IOLAB_VOLUME_MAGIC);
    assert_eq!(signature::identify(&head), Some("iolab volume"));
}

#[test]
fn device_smaller_than_the_probe_is_still_probed() {
    let dev = MemDevice::new(4096).unwrap();
    let mut head = vec![0; 4096];
    head[..4].copy_from_slice(b"XFSB");
    dev.write_at(&head, 0).unwrap();
    assert_eq!(signature::probe(&dev).unwrap(), Some("XFS file system"));
}
