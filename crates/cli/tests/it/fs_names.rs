//! What the kernel keeps of names and listings through a mount of iolab's
//! file system: the server answers OPENDIR with ENOSYS (the kernel then
//! keeps listings in its page cache) and a missing name as a negative
//! entry. These check that every change made through the mount shows at
//! once, over /dev/fuse and (where the kernel has it on) over io_uring.

use std::collections::BTreeSet;
use std::path::Path;

use crate::cli::{iolab, stderr};
use crate::fs::{transports, Mounted};

/// A new image in `dir` mounted at `dir/mnt` under `log` through
/// `transport`.
fn mount(dir: &Path, transport: &str) -> Mounted {
    let (image, mnt) = (dir.join("fs.img"), dir.join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "32m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    Mounted::start(&image, &mnt, "log", &["--transport", transport])
}

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// How many requests of `op` the unmount line counts ("readdir 12, ...").
fn requests(said: &str, op: &str) -> u64 {
    let counts = said.rsplit_once("requests: ").map_or("", |(_, c)| c);
    counts
        .split(", ")
        .find_map(|c| c.trim().strip_prefix(op).and_then(|n| n.trim().parse().ok()))
        .unwrap_or(0)
}

#[test]
fn a_directory_listed_again_after_each_change_shows_the_change() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let mounted = mount(dir.path(), transport);
        let d = dir.path().join("mnt/d");
        std::fs::create_dir(&d).unwrap();
        assert_eq!(listing(&d), names(&[]));
        std::fs::write(d.join("a"), b"1").unwrap();
        assert_eq!(listing(&d), names(&["a"]), "{transport}: after a create");
        std::fs::rename(d.join("a"), d.join("b")).unwrap();
        assert_eq!(listing(&d), names(&["b"]), "{transport}: after a rename");
        std::fs::hard_link(d.join("b"), d.join("c")).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        assert_eq!(listing(&d), names(&["b", "c", "sub"]), "{transport}: after a link and a mkdir");
        std::fs::rename(d.join("c"), dir.path().join("mnt/moved")).unwrap();
        std::fs::remove_file(d.join("b")).unwrap();
        std::fs::remove_dir(d.join("sub")).unwrap();
        assert_eq!(listing(&d), names(&[]), "{transport}: after a move out, an unlink and an rmdir");
        assert_eq!(listing(&dir.path().join("mnt")), names(&["d", "lost+found", "moved"]));
        mounted.unmount();
    }
}

#[test]
fn a_directory_listed_many_times_unchanged_is_read_from_the_server_once() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let mounted = mount(dir.path(), transport);
        let d = dir.path().join("mnt/d");
        std::fs::create_dir(&d).unwrap();
        for n in 0..50 {
            std::fs::write(d.join(format!("f{n}")), b"").unwrap();
        }
        for _ in 0..20 {
            assert_eq!(listing(&d).len(), 50);
        }
        let said = mounted.unmount();
        assert!(requests(&said, "opendir") <= 1, "{transport}: {said}");
        assert!(requests(&said, "readdir") <= 4, "{transport}: 20 listings read again: {said}");
    }
}

#[test]
fn a_name_found_missing_is_there_once_made_through_the_mount() {
    for transport in transports() {
        let dir = tempfile::tempdir().unwrap();
        let mounted = mount(dir.path(), transport);
        let mnt = dir.path().join("mnt");
        for name in ["file", "dir", "link", "renamed"] {
            assert!(std::fs::symlink_metadata(mnt.join(name)).is_err(), "{transport}: {name} before");
        }
        std::fs::write(mnt.join("file"), b"x").unwrap();
        std::fs::create_dir(mnt.join("dir")).unwrap();
        std::os::unix::fs::symlink("file", mnt.join("link")).unwrap();
        std::fs::write(mnt.join("other"), b"y").unwrap();
        std::fs::rename(mnt.join("other"), mnt.join("renamed")).unwrap();
        assert!(std::fs::metadata(mnt.join("file")).unwrap().is_file(), "{transport}");
        assert!(std::fs::metadata(mnt.join("dir")).unwrap().is_dir(), "{transport}");
        assert_eq!(std::fs::read_link(mnt.join("link")).unwrap(), Path::new("file"), "{transport}");
        assert_eq!(std::fs::read(mnt.join("renamed")).unwrap(), b"y", "{transport}");
        mounted.unmount();
    }
}
