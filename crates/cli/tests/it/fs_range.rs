//! fallocate(1), SEEK_DATA and SEEK_HOLE, and cp through a mount of
//! iolab's file system, over /dev/fuse and (where the kernel has it on)
//! over io_uring: both transports answer FALLOCATE, LSEEK and
//! COPY_FILE_RANGE, and the image checks clean after.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::cli::{iolab, stderr, stdout};
use crate::fs::{run, transports, Mounted};

/// A new image in `dir` mounted at `dir/mnt` under softdep through
/// `transport`.
fn mount(dir: &Path, transport: &str) -> (Mounted, PathBuf, PathBuf) {
    let (image, mnt) = (dir.join("fs.img"), dir.join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "32m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mounted = Mounted::start(&image, &mnt, "softdep", &["--transport", transport]);
    (mounted, image, mnt)
}

/// Unmounts and checks the image clean; what the unmount said.
fn unmount_clean(mounted: Mounted, image: &Path) -> String {
    let said = mounted.unmount();
    let out = iolab(&["fs", "fsck", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    said
}

/// A file of 16 KiB of 0x5a with 8 KiB punched from 4 KiB in, by
/// util-linux fallocate; its 512-byte units before the punch.
fn punched(mnt: &Path) -> (PathBuf, u64) {
    let f = mnt.join("f");
    std::fs::write(&f, vec![0x5a; 16384]).unwrap();
    let before = std::fs::metadata(&f).unwrap().blocks();
    run("fallocate", &["-p", "-o", "4096", "-l", "8192", f.to_str().unwrap()]);
    (f, before)
}

#[test]
fn fs_fallocate_of_a_megabyte_makes_the_size_and_the_blocks() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let (mounted, image, mnt) = mount(dir.path(), transport);
        run("fallocate", &["-l", "1M", mnt.join("f").to_str().unwrap()]);
        let meta = std::fs::metadata(mnt.join("f")).unwrap();
        assert_eq!(meta.len(), 1 << 20, "{transport}");
        assert!(meta.blocks() >= 2048, "{transport}: {} units", meta.blocks());
        let said = unmount_clean(mounted, &image);
        assert!(said.contains("fallocate 1"), "{transport}: {said}");
    }
}

#[test]
fn fs_a_punched_hole_gives_its_blocks_back_and_reads_as_zeros() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let (mounted, image, mnt) = mount(dir.path(), transport);
        let (f, before) = punched(&mnt);
        assert_eq!(std::fs::metadata(&f).unwrap().blocks(), before - 16, "{transport}: two blocks freed");
        let bytes = std::fs::read(&f).unwrap();
        assert_eq!(bytes.len(), 16384, "{transport}: the size stays");
        assert!(bytes[4096..12288].iter().all(|&b| b == 0), "{transport}");
        assert!(bytes[..4096].iter().chain(&bytes[12288..]).all(|&b| b == 0x5a), "{transport}");
        unmount_clean(mounted, &image);
    }
}

#[test]
fn fs_seek_hole_and_seek_data_find_a_punched_hole() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let (mounted, image, mnt) = mount(dir.path(), transport);
        let (f, _) = punched(&mnt);
        let file = std::fs::File::open(&f).unwrap();
        // SAFETY: lseek on a descriptor this test holds open.
        let seek = |offset: i64, whence: i32| unsafe { libc::lseek(file.as_raw_fd(), offset, whence) };
        assert_eq!((seek(0, libc::SEEK_HOLE), seek(4096, libc::SEEK_DATA)), (4096, 12288), "{transport}");
        assert_eq!(seek(12288, libc::SEEK_HOLE), 16384, "{transport}: the end is a hole");
        drop(file);
        let said = unmount_clean(mounted, &image);
        assert!(said.contains("lseek "), "{transport}: the server answered: {said}");
    }
}

#[test]
fn fs_cp_copies_a_file_whole_through_copy_file_range() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let (mounted, image, mnt) = mount(dir.path(), transport);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        std::fs::write(mnt.join("a"), &data).unwrap();
        run("cp", &[mnt.join("a").to_str().unwrap(), mnt.join("b").to_str().unwrap()]);
        assert!(std::fs::read(mnt.join("b")).unwrap() == data, "{transport}: the copy differs");
        let said = unmount_clean(mounted, &image);
        assert!(said.contains("copy_file_range "), "{transport}: cp copied otherwise: {said}");
    }
}
