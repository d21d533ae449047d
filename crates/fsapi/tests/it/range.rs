//! fallocate, SEEK_DATA and SEEK_HOLE, and copy_file_range in the model,
//! and through the host backend where a kernel file system's answer does
//! not depend on its layout.

use std::ffi::OsStr;

use fsapi::{Errno, Fallocate, FileSystem, HostFs, ModelFs, Owner, Whence, MODEL_BLOCK_BYTES, ROOT};

const B: u64 = MODEL_BLOCK_BYTES;

/// A file `name` in the root of `fs` holding `bytes`.
fn file_with(fs: &dyn FileSystem, name: &str, bytes: &[u8]) -> u64 {
    let made = fs.create(ROOT, OsStr::new(name), Owner::root(0o644)).unwrap();
    fs.write(made.ino, 0, bytes).unwrap();
    made.ino
}

fn read_all(fs: &dyn FileSystem, ino: u64) -> Vec<u8> {
    let mut buf = vec![0u8; fs.getattr(ino).unwrap().size as usize];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn allocation_extends_the_size_with_zeros_unless_told_to_keep_it() {
    let fs = ModelFs::new();
    let f = file_with(&fs, "f", b"abc");
    fs.fallocate(f, Fallocate::Allocate { keep_size: true }, 0, 3 * B).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 3);
    fs.fallocate(f, Fallocate::Allocate { keep_size: false }, 0, 2 * B).unwrap();
    let mut expected = b"abc".to_vec();
    expected.resize(2 * B as usize, 0);
    assert_eq!(read_all(&fs, f), expected);
}

#[test]
fn blocks_allocated_past_the_end_count_in_st_blocks() {
    let fs = ModelFs::new();
    let f = file_with(&fs, "f", b"abc");
    fs.fallocate(f, Fallocate::Allocate { keep_size: true }, 0, 3 * B).unwrap();
    assert_eq!(fs.getattr(f).unwrap().blocks, 3 * B / 512);
}

#[test]
fn a_punch_frees_the_blocks_inside_and_zeroes_the_edges() {
    let fs = ModelFs::new();
    let f = file_with(&fs, "f", &vec![0xff; 3 * B as usize]);
    fs.fallocate(f, Fallocate::PunchHole, 100, 2 * B).unwrap();
    let bytes = read_all(&fs, f);
    assert_eq!(bytes.len() as u64, 3 * B, "the size stays");
    assert!(bytes[100..(2 * B + 100) as usize].iter().all(|&b| b == 0));
    assert!(bytes[..100].iter().chain(&bytes[(2 * B + 100) as usize..]).all(|&b| b == 0xff));
    assert_eq!(fs.lseek(f, 0, Whence::Hole), Ok(B), "only the middle block was wholly inside");
    assert_eq!(fs.getattr(f).unwrap().blocks, 2 * B / 512);
}

#[test]
fn a_zeroed_range_reads_zeros_and_stays_allocated() {
    let fs = ModelFs::new();
    let f = file_with(&fs, "f", &vec![7; 2 * B as usize]);
    fs.fallocate(f, Fallocate::ZeroRange { keep_size: false }, 10, 3 * B).unwrap();
    let bytes = read_all(&fs, f);
    assert_eq!((bytes.len() as u64, &bytes[..10]), (3 * B + 10, &[7u8; 10][..]));
    assert!(bytes[10..].iter().all(|&b| b == 0));
    assert_eq!(fs.lseek(f, 0, Whence::Hole), Ok(3 * B + 10), "no hole but the end");
}

#[test]
fn seek_finds_data_after_a_hole_and_the_hole_a_truncation_left() {
    let fs = ModelFs::new();
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.write(f, 2 * B + 5, b"x").unwrap();
    fs.setattr(f, &fsapi::SetAttr { size: Some(5 * B), ..Default::default() }).unwrap();
    assert_eq!(fs.lseek(f, 0, Whence::Data), Ok(2 * B));
    assert_eq!(fs.lseek(f, 2 * B + 9, Whence::Hole), Ok(3 * B));
    assert_eq!(fs.lseek(f, 3 * B, Whence::Data), Err(Errno::NXIO));
    assert_eq!(fs.lseek(f, 5 * B, Whence::Hole), Err(Errno::NXIO));
}

#[test]
fn a_copy_lands_at_its_offset_and_extends_the_target() {
    let fs = ModelFs::new();
    let from = file_with(&fs, "from", b"0123456789");
    let to = file_with(&fs, "to", b"ab");
    assert_eq!(fs.copy_file_range(from, 2, to, 4, 100), Ok(8));
    assert_eq!(read_all(&fs, to), b"ab\0\x0023456789");
}

#[test]
fn a_copy_within_a_file_that_overlaps_is_einval() {
    let fs = ModelFs::new();
    let f = file_with(&fs, "f", b"0123456789");
    assert_eq!(fs.copy_file_range(f, 0, f, 5, 6), Err(Errno::INVAL));
    assert_eq!(fs.copy_file_range(f, 0, f, 5, 5), Ok(5));
    assert_eq!(read_all(&fs, f), b"0123401234");
}

#[test]
fn an_empty_range_is_einval_and_a_directory_eisdir() {
    let fs = ModelFs::new();
    let f = file_with(&fs, "f", b"x");
    assert_eq!(fs.fallocate(f, Fallocate::Allocate { keep_size: false }, 0, 0), Err(Errno::INVAL));
    assert_eq!(fs.fallocate(ROOT, Fallocate::PunchHole, 0, 1), Err(Errno::ISDIR));
    assert_eq!(fs.lseek(ROOT, 0, Whence::Data), Err(Errno::ISDIR));
}

#[test]
fn the_host_punches_and_copies_as_the_model_does() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostFs::new(dir.path()).unwrap();
    let model = ModelFs::new();
    for fs in [&host as &dyn FileSystem, &model] {
        let f = file_with(fs, "f", &vec![0xff; 3 * B as usize]);
        fs.fallocate(f, Fallocate::PunchHole, 100, 2 * B).unwrap();
        let g = file_with(fs, "g", b"");
        assert_eq!(fs.copy_file_range(f, 50, g, 1, 100), Ok(100));
        fs.forget(f, 1);
        fs.forget(g, 1);
    }
    assert_eq!(fsapi::testing::tree(&host), fsapi::testing::tree(&model));
}
