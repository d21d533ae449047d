//! The file system's limits where programs see them, through real mounts:
//! the largest file (EFBIG at the call), a full file system (ENOSPC from
//! write(2) itself, with the kernel's writeback cache too), and what the
//! kernel does not carry to a FUSE server at all (FIEMAP).

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Command;

use crate::cli::{iolab, stderr};
use crate::fs::{fuse_uring_usable, fuse_usable, Mounted};

/// The largest file: (12 + 1024 + 1024²) blocks of 4 KiB.
const LIMIT: u64 = 4_299_210_752;

/// A new file system of `size` in a temporary directory, and a directory
/// to mount it on.
fn fresh(size: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (image, mnt) = (dir.path().join("fs.img"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", size]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (dir, image, mnt)
}

fn errno_of(result: std::io::Result<usize>) -> Option<i32> {
    result.err().and_then(|e| e.raw_os_error())
}

#[test]
fn fs_truncate_to_a_terabyte_through_a_mount_is_efbig_and_the_size_stays() {
    if !fuse_usable() {
        return;
    }
    let (_dir, image, mnt) = fresh("16m");
    let mounted = Mounted::start(&image, &mnt, "sync", &["--no-writeback-cache"]);
    let file = mnt.join("f");
    std::fs::write(&file, b"kept").unwrap();
    let out = Command::new("truncate").args(["-s", "1T"]).arg(&file).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("File too large"), "{out:?}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 4);
    mounted.unmount();
}

#[test]
fn fs_a_pwrite_past_the_largest_file_through_a_mount_is_efbig_at_the_call() {
    if !fuse_usable() {
        return;
    }
    let (_dir, image, mnt) = fresh("16m");
    let mounted = Mounted::start(&image, &mnt, "async", &["--no-writeback-cache"]);
    let file = std::fs::File::create(mnt.join("f")).unwrap();
    assert_eq!(file.write_at(b"last", LIMIT - 4).unwrap(), 4);
    assert_eq!(errno_of(file.write_at(b"past", LIMIT)), Some(libc::EFBIG));
    assert_eq!(file.metadata().unwrap().len(), LIMIT);
    drop(file);
    mounted.unmount();
}

/// With the writeback cache, an open of a file within the threshold of
/// its largest size goes direct, so the write past it fails at the call
/// rather than at write-back.
#[test]
fn fs_a_pwrite_past_the_largest_file_through_the_writeback_cache_is_efbig_at_the_call() {
    if !fuse_usable() {
        return;
    }
    let (_dir, image, mnt) = fresh("16m");
    let mounted = Mounted::start(&image, &mnt, "async", &["--direct-io-below", "1m"]);
    let path = mnt.join("f");
    std::fs::File::create(&path).unwrap().set_len(LIMIT - 4096).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    assert_eq!(errno_of(file.write_at(b"past", LIMIT - 2)), Some(libc::EFBIG));
    drop(file);
    assert!(mounted.unmount().contains(" 1 opens for writing went direct"));
}

/// A file system of 16 MiB served with the writeback cache and opens for
/// writing going direct below 8 MiB free: a first file of 8 MiB goes
/// through the cache, and a second one, opened with less than 8 MiB
/// left, hears ENOSPC from write(2) itself; everything write(2) took is
/// kept (its fsync succeeds).
fn full_file_system_refuses_write_itself(transport: &str) {
    let (_dir, image, mnt) = fresh("16m");
    let serving = ["--transport", transport, "--direct-io-below", "8m"];
    let mounted = Mounted::start(&image, &mnt, "async", &serving);
    std::fs::write(mnt.join("a"), vec![7u8; 8 << 20]).unwrap();
    let mut file = std::fs::File::create(mnt.join("b")).unwrap();
    let chunk = vec![9u8; 1 << 20];
    let mut written = 0usize;
    let refused = loop {
        match file.write(&chunk) {
            Ok(n) => written += n,
            Err(e) => break e.raw_os_error(),
        }
        assert!(written < 16 << 20, "a 16 MiB file system took {written} more bytes");
    };
    assert_eq!(refused, Some(libc::ENOSPC));
    file.sync_all().unwrap();
    assert_eq!(file.metadata().unwrap().len(), written as u64);
    drop(file);
    assert!(mounted.unmount().contains(" 1 opens for writing went direct"));
}

#[test]
fn fs_a_full_file_system_refuses_write_itself_through_the_writeback_cache() {
    if fuse_usable() {
        full_file_system_refuses_write_itself("dev");
    }
}

#[test]
fn fs_a_full_file_system_refuses_write_itself_over_io_uring() {
    if fuse_uring_usable() {
        full_file_system_refuses_write_itself("uring");
    }
}

/// FS_IOC_FIEMAP never reaches a FUSE server: the kernel answers it
/// EOPNOTSUPP itself (docs/fs.md, "FIEMAP: not through FUSE"). Should a
/// kernel carry it one day, this fails and the docs must change.
#[test]
fn fs_fiemap_through_a_mount_is_eopnotsupp_from_the_kernel() {
    use std::os::fd::AsRawFd;
    if !fuse_usable() {
        return;
    }
    let (_dir, image, mnt) = fresh("16m");
    let mounted = Mounted::start(&image, &mnt, "async", &[]);
    std::fs::write(mnt.join("f"), vec![1u8; 64 << 10]).unwrap();
    let file = std::fs::File::open(mnt.join("f")).unwrap();
    // struct fiemap: fm_start, fm_length, fm_flags and fm_mapped_extents,
    // fm_extent_count (0: count only) and fm_reserved.
    let mut fiemap = [0u64, u64::MAX, 0, 0];
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    // SAFETY: FS_IOC_FIEMAP with a struct fiemap asking for no extents.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, fiemap.as_mut_ptr()) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert_eq!((rc, errno), (-1, Some(libc::EOPNOTSUPP)));
    drop(file);
    mounted.unmount();
}
