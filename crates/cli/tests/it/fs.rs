//! iolab's file system end to end: made and checked from the CLI, and
//! mounted through FUSE for GNU tar, diff and rm (where /dev/fuse is
//! missing the FUSE test says why it skipped; CI requires it).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::cli::{iolab, stderr, stdout};

/// A seeded tree shaped like a small source tree: nested directories,
/// files of many sizes (one past the indirect blocks), symlinks, a hard
/// link, a 255-byte name and a deep path.
pub(crate) fn source_tree(root: &Path) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for d in 0..24 {
        let dir = root.join(format!("dir{d}")).join(format!("sub{}", d % 5));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..(8 + next(20)) {
            let len = match next(10) {
                0 => 0,
                1..=6 => next(8000) as usize,
                _ => next(150_000) as usize,
            };
            let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ d ^ f) as u8).collect();
            std::fs::write(dir.join(format!("file{f}.c")), data).unwrap();
        }
    }
    std::fs::write(root.join("big.bin"), vec![0x5a; 5 << 20]).unwrap();
    std::os::unix::fs::symlink("dir1/sub1/file0.c", root.join("link-to-file")).unwrap();
    std::os::unix::fs::symlink("../../dir2", root.join("dir3/sub3/up")).unwrap();
    std::os::unix::fs::symlink("x".repeat(200), root.join("long-target")).unwrap();
    std::fs::hard_link(root.join("dir4/sub4/file1.c"), root.join("hard-link.c")).unwrap();
    std::fs::write(root.join("n".repeat(255)), b"a name of 255 bytes").unwrap();
    let deep: PathBuf = (0..14).map(|i| format!("d{i}")).collect();
    std::fs::create_dir_all(root.join(&deep)).unwrap();
    std::fs::write(root.join(&deep).join("leaf"), b"deep").unwrap();
}

/// A running `iolab fs mount`, unmounted and reaped however the test ends.
pub(crate) struct Mounted {
    child: Option<Child>,
    mountpoint: PathBuf,
}

impl Mounted {
    pub(crate) fn start(image: &Path, mountpoint: &Path, policy: &str, extra: &[&str]) -> Mounted {
        let mut child = Command::new(env!("CARGO_BIN_EXE_iolab"))
            .args(["fs", "mount", image.to_str().unwrap(), mountpoint.to_str().unwrap(), "--policy", policy])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert!(line.contains("mounted at"), "iolab fs mount said: {line}");
        Mounted { child: Some(child), mountpoint: mountpoint.to_path_buf() }
    }

    /// Unmounts as a user does; the server writes back and exits 0.
    pub(crate) fn unmount(self) -> String {
        self.unmount_with(&[])
    }

    /// Unmounts lazily (`umount -l`): the mount leaves the tree at once,
    /// and the server writes back and exits 0 once the last process that
    /// had a file open there has closed it (a suite's straggling child).
    pub(crate) fn detach(self) -> String {
        self.unmount_with(&["-l"])
    }

    fn unmount_with(mut self, options: &[&str]) -> String {
        let status = Command::new("umount").args(options).arg(&self.mountpoint).status().unwrap();
        assert!(status.success(), "umount");
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        assert!(out.status.success(), "iolab fs mount exited {:?}", out.status);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("umount").arg("-l").arg(&self.mountpoint).status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `available`, or else a skip said on standard error (a failure when CI
/// set `required_by`, which says the machine must have it).
fn usable_or_skip(available: bool, required_by: &str, missing: &str) -> bool {
    if !available {
        assert!(std::env::var_os(required_by).is_none(), "{required_by} is set but {missing}");
        eprintln!("skipped: {missing}");
    }
    available
}

pub(crate) fn fuse_usable() -> bool {
    usable_or_skip(
        Path::new("/dev/fuse").exists(),
        "IOLAB_REQUIRE_FUSE",
        "/dev/fuse is missing, so nothing can be mounted through FUSE here",
    )
}

/// The transports this machine can mount through (none without FUSE).
pub(crate) fn transports() -> Vec<&'static str> {
    let mut out = Vec::new();
    if fuse_usable() {
        out.push("dev");
        if fuse_uring_usable() {
            out.push("uring");
        }
    }
    out
}

/// Whether FUSE over io_uring can be used here (the fuse module's
/// `enable_uring`); CI turns it on and sets IOLAB_REQUIRE_FUSE_URING.
pub(crate) fn fuse_uring_usable() -> bool {
    let parameter = "/sys/module/fuse/parameters/enable_uring";
    fuse_usable()
        && usable_or_skip(
            std::fs::read_to_string(parameter).is_ok_and(|v| v.trim() == "Y"),
            "IOLAB_REQUIRE_FUSE_URING",
            &format!("FUSE over io_uring is off here ({parameter})"),
        )
}

pub(crate) fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}");
}

/// GNU tar extracts a tree into a mount under `first`, diff finds it
/// whole, and after an unmount fsck is clean; then under `second` it is
/// still whole, rm -rf empties it, and fsck is clean again. Both mounts
/// are served through `transport`; the unmount lines say what served them.
fn tar_then_rm_through_mounts(first: &str, second: &str, transport: &str) -> [String; 2] {
    let dir = tempfile::tempdir().unwrap();
    let (src, image, mnt) = (dir.path().join("src"), dir.path().join("fs.img"), dir.path().join("mnt"));
    source_tree(&src);
    std::fs::create_dir(&mnt).unwrap();
    let archive = dir.path().join("src.tar");
    run("tar", &["cf", archive.to_str().unwrap(), "-C", dir.path().to_str().unwrap(), "src"]);
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "128m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let serving = ["--transport", transport];
    let mounted = Mounted::start(&image, &mnt, first, &serving);
    run("tar", &["xf", archive.to_str().unwrap(), "-C", mnt.to_str().unwrap()]);
    run("diff", &["-r", "--no-dereference", src.to_str().unwrap(), mnt.join("src").to_str().unwrap()]);
    let extracted = mounted.unmount();
    assert!(extracted.contains("clean"));
    let out = iolab(&["fs", "fsck", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let mounted = Mounted::start(&image, &mnt, second, &serving);
    run("diff", &["-r", "--no-dereference", src.to_str().unwrap(), mnt.join("src").to_str().unwrap()]);
    run("rm", &["-rf", mnt.join("src").to_str().unwrap()]);
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 1, "only lost+found is left");
    let removed = mounted.unmount();
    let out = iolab(&["fs", "fsck", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    [extracted, removed]
}

#[test]
fn gnu_tar_extracts_into_the_mount_and_rm_empties_it_and_fsck_is_clean() {
    if fuse_usable() {
        tar_then_rm_through_mounts("sync", "log", "dev");
    }
}

#[test]
fn gnu_tar_and_rm_work_through_a_softdep_mount_and_fsck_is_clean() {
    if fuse_usable() {
        tar_then_rm_through_mounts("softdep", "softdep", "dev");
    }
}

#[test]
fn gnu_tar_and_rm_work_through_a_mount_over_io_uring() {
    if !fuse_uring_usable() {
        return;
    }
    for said in tar_then_rm_through_mounts("async", "log", "uring") {
        let ring = said.split("served over io_uring (").nth(1).unwrap_or_else(|| panic!("{said}"));
        let through_ring: u64 =
            ring.split(", ").nth(1).and_then(|n| n.split(' ').next()?.parse().ok()).unwrap();
        assert!(through_ring > 100, "the requests came through the rings: {said}");
    }
}

/// A chown of a set-ID file through the mount clears its set-ID bits, as
/// on any Linux file system (the server does it: it asks the kernel for
/// FUSE_HANDLE_KILLPRIV_V2).
fn chown_clears_set_id_bits(transport: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (image, mnt) = (dir.path().join("fs.img"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "32m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mounted = Mounted::start(&image, &mnt, "async", &["--transport", transport]);
    let (file, group_free) = (mnt.join("tool"), mnt.join("locked"));
    std::fs::write(&file, b"x").unwrap();
    std::fs::write(&group_free, b"x").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o6755)).unwrap();
    std::fs::set_permissions(&group_free, std::fs::Permissions::from_mode(0o6744)).unwrap();
    std::os::unix::fs::chown(&file, Some(1), Some(1)).unwrap();
    std::os::unix::fs::chown(&group_free, Some(1), Some(1)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode(&file), mode(&group_free)), (0o755, 0o2744), "set-group-ID without group execute stays");
    mounted.unmount();
}

#[test]
fn a_chown_through_the_mount_clears_set_id_bits() {
    if fuse_usable() {
        chown_clears_set_id_bits("dev");
    }
}

#[test]
fn a_chown_through_a_mount_over_io_uring_clears_set_id_bits() {
    if fuse_uring_usable() {
        chown_clears_set_id_bits("uring");
    }
}

#[test]
fn io_uring_with_pinned_cpus_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&[
        "fs",
        "mount",
        dir.path().join("fs.img").to_str().unwrap(),
        dir.path().to_str().unwrap(),
        "--policy",
        "async",
        "--transport",
        "uring",
        "--cpus",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--transport dev"), "{}", stderr(&out));
}

#[test]
fn mkfs_refuses_a_target_holding_data_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert_eq!(iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "16m"]).status.code(), Some(0));
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(iolab(&["fs", "mkfs", image.to_str().unwrap(), "--force"]).status.code(), Some(0));
}

#[test]
fn mounting_on_a_missing_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert_eq!(iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "16m"]).status.code(), Some(0));
    let out = iolab(&[
        "fs",
        "mount",
        image.to_str().unwrap(),
        dir.path().join("nowhere").to_str().unwrap(),
        "--policy",
        "sync",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("mkdir -p"), "{}", stderr(&out));
}

#[test]
fn a_file_that_is_not_a_file_system_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("plain.img");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let out = iolab(&["fs", "ls", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not an iolab file system"), "{}", stderr(&out));
}

#[test]
fn fsck_json_reports_the_classes_found() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert_eq!(iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "16m"]).status.code(), Some(0));
    let out = iolab(&["fs", "fsck", image.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "iolab-fsck");
    assert_eq!(doc["clean"], true);
}

#[test]
fn ls_stat_and_cat_look_inside_an_image_without_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert_eq!(iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "16m"]).status.code(), Some(0));
    let before = std::fs::read(&image).unwrap();
    let out = iolab(&["fs", "ls", image.to_str().unwrap(), "/"]);
    assert!(stdout(&out).contains("lost+found"), "{}", stdout(&out));
    let out = iolab(&["fs", "stat", image.to_str().unwrap(), "/lost+found"]);
    assert!(stdout(&out).contains("inode 2"), "{}", stdout(&out));
    assert!(std::fs::read(&image).unwrap() == before, "looking changed nothing");
}

#[test]
fn fsck_background_on_a_clean_image_finds_nothing_and_refuses_with_preen() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert_eq!(iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "16m"]).status.code(), Some(0));
    let out = iolab(&["fs", "fsck", "-B", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = iolab(&["fs", "fsck", "-B", "-p", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
