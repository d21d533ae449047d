//! renameat2(2) through real mounts, both transports: RENAME_EXCHANGE
//! swaps two entries (a directory moving with its `..`), RENAME_NOREPLACE
//! refuses an existing name, RENAME_WHITEOUT is EINVAL. (GNU mv has
//! `--exchange` from coreutils 9.5 only, so the tests call renameat2.)

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::cli::{iolab, stderr};
use crate::fs::{fuse_uring_usable, fuse_usable, Mounted};

fn renameat2(from: &Path, to: &Path, flags: u32) -> std::io::Result<()> {
    let (from, to) = (CString::new(from.as_os_str().as_bytes())?, CString::new(to.as_os_str().as_bytes())?);
    // SAFETY: renameat2 with two NUL-terminated paths from the working directory.
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A mounted file system of 16 MiB served through `transport`, and `run`
/// on its mount point; fsck finds nothing after the unmount.
fn on_a_mount(transport: &str, run: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let (image, mnt) = (dir.path().join("fs.img"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "16m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mounted = Mounted::start(&image, &mnt, "softdep", &["--transport", transport]);
    run(&mnt);
    mounted.unmount();
    let out = iolab(&["fs", "fsck", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "fsck after the unmount: {}", stderr(&out));
}

/// /p/x (a directory holding a file) and /q/y (a file) exchanged: each
/// name now names the other, and the directory's `..` is q.
fn exchange_a_directory_and_a_file(mnt: &Path) {
    let (p, q) = (mnt.join("p"), mnt.join("q"));
    std::fs::create_dir_all(p.join("x")).unwrap();
    std::fs::create_dir(&q).unwrap();
    std::fs::write(p.join("x/inside"), b"in x").unwrap();
    std::fs::write(q.join("y"), b"in y").unwrap();
    renameat2(&p.join("x"), &q.join("y"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(std::fs::read(p.join("x")).unwrap(), b"in y");
    assert_eq!(std::fs::read(q.join("y/inside")).unwrap(), b"in x");
    let up = std::fs::metadata(q.join("y/..")).unwrap();
    assert_eq!(up.ino(), std::fs::metadata(&q).unwrap().ino(), "the moved directory's `..` is q");
    assert_eq!((std::fs::metadata(&p).unwrap().nlink(), std::fs::metadata(&q).unwrap().nlink()), (2, 3));
}

#[test]
fn fs_renameat2_exchanges_a_directory_and_a_file_through_a_mount() {
    if fuse_usable() {
        on_a_mount("dev", exchange_a_directory_and_a_file);
    }
}

#[test]
fn fs_renameat2_exchanges_a_directory_and_a_file_over_io_uring() {
    if fuse_uring_usable() {
        on_a_mount("uring", exchange_a_directory_and_a_file);
    }
}

#[test]
fn fs_renameat2_without_replacing_onto_an_existing_name_is_eexist_through_a_mount() {
    if !fuse_usable() {
        return;
    }
    on_a_mount("dev", |mnt| {
        std::fs::write(mnt.join("a"), b"a").unwrap();
        std::fs::write(mnt.join("b"), b"b").unwrap();
        let refused = renameat2(&mnt.join("a"), &mnt.join("b"), libc::RENAME_NOREPLACE);
        assert_eq!(refused.unwrap_err().raw_os_error(), Some(libc::EEXIST));
        assert_eq!(std::fs::read(mnt.join("b")).unwrap(), b"b");
    });
}

#[test]
fn fs_renameat2_with_whiteout_is_einval_through_a_mount() {
    if !fuse_usable() {
        return;
    }
    on_a_mount("dev", |mnt| {
        std::fs::write(mnt.join("a"), b"a").unwrap();
        let refused = renameat2(&mnt.join("a"), &mnt.join("b"), libc::RENAME_WHITEOUT);
        assert_eq!(refused.unwrap_err().raw_os_error(), Some(libc::EINVAL));
        assert!(mnt.join("a").exists());
    });
}
