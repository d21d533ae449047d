//! A mount used by more than one user: `iolab fs mount --allow-other`
//! lets every user in and the kernel checks each one's permissions as it
//! does on ext4; without it only the user who mounted gets in. The tests
//! run commands as `nobody` (uid and gid 65534), so they need root; run
//! otherwise they say why they skipped.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::cli::{iolab, stderr};
use crate::fs::{fuse_usable, run, Mounted};

const NOBODY: u32 = 65534;

fn root_and_fuse() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root, so no command can be run as another user");
        return false;
    }
    fuse_usable()
}

/// `program args` run as `nobody` (std drops root's supplementary
/// groups when it changes the user).
fn as_nobody(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).uid(NOBODY).gid(NOBODY).output().unwrap()
}

fn mounted(dir: &Path, extra: &[&str]) -> Mounted {
    let (image, mnt) = (dir.join("fs.img"), dir.join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    // The mount point's parent must be open to nobody too.
    run("chmod", &["0755", dir.to_str().unwrap()]);
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "64m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    Mounted::start(&image, &mnt, "log", extra)
}

fn failed_with(out: &Output, message: &str) -> bool {
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(message)
}

#[test]
fn without_allow_other_another_user_cannot_even_look() {
    if !root_and_fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = mounted(dir.path(), &[]);
    let out = as_nobody("ls", &[dir.path().join("mnt").to_str().unwrap()]);
    assert!(failed_with(&out, "Permission denied"), "{out:?}");
    mounted.unmount();
}

#[test]
fn with_allow_other_the_mode_bits_decide_who_may_write() {
    if !root_and_fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = mounted(dir.path(), &["--allow-other"]);
    let mnt = dir.path().join("mnt");
    let (closed, open) = (mnt.join("closed"), mnt.join("open"));
    std::fs::create_dir(&closed).unwrap();
    std::fs::create_dir(&open).unwrap();
    run("chmod", &["0755", closed.to_str().unwrap()]);
    run("chmod", &["0777", open.to_str().unwrap()]);
    let out = as_nobody("touch", &[closed.join("f").to_str().unwrap()]);
    assert!(failed_with(&out, "Permission denied"), "{out:?}");
    let out = as_nobody("touch", &[open.join("f").to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let made = std::fs::metadata(open.join("f")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&made), NOBODY, "the file is nobody's");
    mounted.unmount();
}

#[test]
fn a_sticky_directory_keeps_another_users_file_from_removal() {
    if !root_and_fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = mounted(dir.path(), &["--allow-other"]);
    let tmp = dir.path().join("mnt/tmp");
    std::fs::create_dir(&tmp).unwrap();
    run("chmod", &["1777", tmp.to_str().unwrap()]);
    std::fs::write(tmp.join("roots"), b"root's").unwrap();
    let out = as_nobody("rm", &["-f", tmp.join("roots").to_str().unwrap()]);
    assert!(failed_with(&out, "Operation not permitted"), "{out:?}");
    assert!(tmp.join("roots").exists());
    mounted.unmount();
}

#[test]
fn only_root_may_give_a_file_away() {
    if !root_and_fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = mounted(dir.path(), &["--allow-other"]);
    let open = dir.path().join("mnt/open");
    std::fs::create_dir(&open).unwrap();
    run("chmod", &["0777", open.to_str().unwrap()]);
    let file = open.join("mine");
    assert!(as_nobody("touch", &[file.to_str().unwrap()]).status.success());
    let out = as_nobody("chown", &["0", file.to_str().unwrap()]);
    assert!(failed_with(&out, "Operation not permitted"), "{out:?}");
    mounted.unmount();
}

/// A write by a user who is not root clears the set-user-ID bit, as on
/// ext4 (the kernel marks the write; the server clears the bit).
#[test]
fn a_write_by_another_user_clears_setuid() {
    if !root_and_fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = mounted(dir.path(), &["--allow-other"]);
    let file = dir.path().join("mnt/setuid");
    std::fs::write(&file, b"#!/bin/sh\n").unwrap();
    run("chmod", &["4777", file.to_str().unwrap()]);
    let out = as_nobody("sh", &["-c", &format!("echo more >> {}", file.display())]);
    assert!(out.status.success(), "{out:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o7777, 0o0777, "mode {mode:o}");
    mounted.unmount();
}

/// In a set-group-ID directory a new file takes the directory's group and
/// a new directory the bit as well, as BSD and Linux file systems do.
#[test]
fn a_setgid_directory_gives_its_group_to_what_is_made_in_it() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = mounted(dir.path(), &[]);
    let shared = dir.path().join("mnt/shared");
    std::fs::create_dir(&shared).unwrap();
    run("chown", &[":4242", shared.to_str().unwrap()]);
    run("chmod", &["2775", shared.to_str().unwrap()]);
    std::fs::write(shared.join("f"), b"x").unwrap();
    std::fs::create_dir(shared.join("sub")).unwrap();
    use std::os::unix::fs::MetadataExt;
    let (f, sub) =
        (std::fs::metadata(shared.join("f")).unwrap(), std::fs::metadata(shared.join("sub")).unwrap());
    assert_eq!((f.gid(), sub.gid()), (4242, 4242));
    assert_eq!(sub.mode() & 0o2000, 0o2000, "the new directory is set-group-ID");
    mounted.unmount();
}
