//! The largest file: (12 + 1024 + 1024²) blocks of 4 KiB. A write or a
//! truncation whose end passes it is refused with EFBIG before anything
//! changes, so a program sees the limit at the call that meets it.

use std::ffi::OsStr;

use ffs::Policy;
use fsapi::{Errno, FileSystem, Owner, SetAttr, ROOT};

use crate::common::{fresh, mount};

/// The limit the format gives (docs/formats.md, "Inode").
const LIMIT: u64 = (12 + 1024 + 1024 * 1024) * 4096;

#[test]
fn the_file_system_says_its_largest_file_is_every_block_an_inode_maps() {
    let fs = mount(&fresh(16 << 20), Policy::Async);
    assert_eq!(fs.file_bytes_max(), LIMIT);
    assert_eq!(LIMIT, 4_299_210_752);
}

#[test]
fn a_write_may_end_at_the_limit_and_one_byte_past_it_is_efbig_and_changes_nothing() {
    let fs = mount(&fresh(16 << 20), Policy::Sync);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    assert_eq!(fs.write(f.ino, LIMIT - 3, b"end"), Ok(3));
    let blocks = fs.getattr(f.ino).unwrap().blocks;
    assert_eq!(fs.write(f.ino, LIMIT - 2, b"end"), Err(Errno::FBIG));
    let after = fs.getattr(f.ino).unwrap();
    assert_eq!((after.size, after.blocks), (LIMIT, blocks));
    let mut tail = [0u8; 3];
    assert_eq!(fs.read(f.ino, LIMIT - 3, &mut tail), Ok(3));
    assert_eq!(&tail, b"end");
}

#[test]
fn a_write_starting_past_the_limit_is_efbig_and_an_empty_one_there_is_not() {
    let fs = mount(&fresh(16 << 20), Policy::Async);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    assert_eq!(fs.write(f.ino, 1 << 40, b"x"), Err(Errno::FBIG));
    assert_eq!(fs.write(f.ino, u64::MAX, b"x"), Err(Errno::FBIG));
    assert_eq!(fs.write(f.ino, 1 << 40, b""), Ok(0));
    assert_eq!(fs.getattr(f.ino).unwrap().size, 0);
}

/// `truncate -s 1T`: refused whole, the mode asked for in the same call
/// included, and nothing of it is on the image after a remount.
#[test]
fn a_truncation_past_the_limit_is_efbig_and_persists_nothing() {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Log);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    fs.write(f.ino, 0, b"kept").unwrap();
    let changes = SetAttr { size: Some(1 << 40), perm: Some(0o600), ..SetAttr::default() };
    assert_eq!(fs.setattr(f.ino, &changes), Err(Errno::FBIG));
    assert_eq!(fs.setattr(f.ino, &SetAttr { size: Some(LIMIT + 1), ..SetAttr::default() }), Err(Errno::FBIG));
    fs.unmount().unwrap();
    let fs = mount(&dev, Policy::Log);
    let f = fs.lookup(ROOT, OsStr::new("f")).unwrap();
    assert_eq!((f.size, f.perm), (4, 0o644));
}

#[test]
fn a_truncation_to_the_limit_makes_a_hole_of_it() {
    let fs = mount(&fresh(16 << 20), Policy::Softdep);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
    let grown = fs.setattr(f.ino, &SetAttr { size: Some(LIMIT), ..SetAttr::default() }).unwrap();
    assert_eq!((grown.size, grown.blocks), (LIMIT, 0));
    let mut last = [1u8; 8];
    assert_eq!(fs.read(f.ino, LIMIT - 8, &mut last), Ok(8));
    assert_eq!(last, [0; 8]);
}
