use device::{Device, MemDevice};
use workloads::layout::lay_out;
use workloads::Pattern;

fn no_progress(_: u64, _: u64) {}

#[test]
fn layout_fills_every_hole_of_the_region() {
    let dev = MemDevice::new(8 << 20).unwrap();
    dev.write_at(&[9; 4096], 3 << 20).unwrap();
    let report = lay_out(&dev, 0..8 << 20, Pattern::Random, 1, true, &no_progress).unwrap();
    assert_eq!(report.unwritten_bytes, 7 << 20);
    assert_eq!(report.laid_out_bytes, 7 << 20);
    assert_eq!(dev.unwritten(0, 8 << 20).unwrap().unwrap(), vec![]);
}

#[test]
fn layout_keeps_what_was_written() {
    let dev = MemDevice::new(4 << 20).unwrap();
    dev.write_at(&[9; 1 << 20], 1 << 20).unwrap();
    lay_out(&dev, 0..4 << 20, Pattern::Random, 1, true, &no_progress).unwrap();
    let mut back = vec![0; 1 << 20];
    dev.read_at(&mut back, 1 << 20).unwrap();
    assert!(back.iter().all(|&b| b == 9));
}

#[test]
fn layout_writes_nothing_outside_the_region() {
    let dev = MemDevice::new(8 << 20).unwrap();
    lay_out(&dev, 2 << 20..4 << 20, Pattern::Random, 1, true, &no_progress).unwrap();
    assert_eq!(dev.unwritten(0, 8 << 20).unwrap().unwrap(), vec![0..2 << 20, 4 << 20..8 << 20]);
}

#[test]
fn a_layout_not_written_only_counts_the_holes() {
    let dev = MemDevice::new(4 << 20).unwrap();
    let report = lay_out(&dev, 0..4 << 20, Pattern::Random, 1, false, &no_progress).unwrap();
    assert!(report.known && report.reads_unwritten());
    assert_eq!((report.unwritten_bytes, report.laid_out_bytes), (4 << 20, 0));
    assert_eq!(dev.stats().snapshot().writes, 0);
}

#[test]
fn a_random_layout_leaves_no_two_blocks_alike() {
    let dev = MemDevice::new(2 << 20).unwrap();
    lay_out(&dev, 0..2 << 20, Pattern::Random, 1, true, &no_progress).unwrap();
    let image = dev.to_vec();
    let mut blocks: Vec<&[u8]> = image.chunks(4096).collect();
    blocks.sort();
    blocks.dedup();
    assert_eq!(blocks.len(), 512);
}
