//! `iolab crash --kernel FS`: the kernel's own file systems recorded
//! through iolab's FUSE image and a loop device, each crash state mounted
//! and checked by the file system's own checker. Needs root, /dev/fuse,
//! losetup and the file system's tools; CI has them all and sets
//! IOLAB_REQUIRE_KERNEL_CRASH, which turns a skip into a failure.

use std::path::Path;

use crate::cli::{iolab, stderr, stdout};

/// Whether `fs` can be crashed here, or else a skip said on standard error.
fn usable(fs: &str) -> bool {
    let program = match fs {
        "xfs" => "mkfs.xfs",
        "btrfs" => "mkfs.btrfs",
        _ => "mkfs.ext4",
    };
    let found =
        |p: &str| ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].iter().any(|d| Path::new(d).join(p).is_file());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let usable = root && Path::new("/dev/fuse").exists() && found("losetup") && found(program);
    if !usable {
        let required = std::env::var_os("IOLAB_REQUIRE_KERNEL_CRASH").is_some();
        assert!(!required, "IOLAB_REQUIRE_KERNEL_CRASH is set but {fs} cannot be crashed here");
        eprintln!("skipped: crashing {fs} needs root, /dev/fuse, losetup and {program}");
    }
    usable
}

/// A small run on `fs` with `extra` flags: its exit status, text and JSON.
fn crash(fs: &str, extra: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("crash.json");
    let mut args = vec!["crash", "--kernel", fs, "--transactions", "40", "--states", "20"];
    args.extend(["--json", json.to_str().unwrap()]);
    args.extend(extra);
    let out = iolab(&args);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    (out.status.code(), stdout(&out), serde_json::from_str(&text).unwrap())
}

#[test]
fn ext4_keeps_every_fsync_in_every_crash_state() {
    if !usable("ext4") {
        return;
    }
    let (code, text, doc) = crash("ext4", &[]);
    let report = &doc;
    assert_eq!(report["violations"], 0, "{text}");
    assert!(report["states_checked"].as_u64().unwrap() >= 20, "{text}");
    assert!(report["flushes"].as_u64().unwrap() > 0, "the loop device's flushes reach the recording: {text}");
    assert_eq!(report["fsyncs"], 10 + 4, "10 of files, 4 of the directory: {text}");
    assert_eq!((&doc["schema"], &doc["file_system"]), (&"iolab-crash-kernel".into(), &"ext4".into()));
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_recorder_that_drops_every_flush_is_caught() {
    if !usable("ext4") {
        return;
    }
    let (code, text, doc) = crash("ext4", &["--drop-flushes"]);
    assert!(doc["fsync_lost"].as_u64().unwrap() > 0, "{text}");
    assert!(text.contains("DROPPED"), "{text}");
    assert_eq!(code, Some(1), "{text}");
}

#[test]
fn ext4_mounted_without_barriers_is_caught() {
    if !usable("ext4") {
        return;
    }
    let (code, text, doc) = crash("ext4", &["--mount-options", "nobarrier"]);
    assert!(doc["violations"].as_u64().unwrap() > 0, "{text}");
    assert_eq!(code, Some(1), "{text}");
}

#[test]
fn xfs_keeps_every_fsync_in_every_crash_state() {
    if !usable("xfs") {
        return;
    }
    let (code, text, doc) = crash("xfs", &[]);
    assert_eq!(doc["violations"], 0, "{text}");
    assert!(text.contains("xfs_repair -n"), "{text}");
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn btrfs_is_checked_by_its_own_checker() {
    if !usable("btrfs") {
        return;
    }
    let (_, text, doc) = crash("btrfs", &[]);
    assert!(doc["states_checked"].as_u64().unwrap() >= 20, "{text}");
    assert!(text.contains("btrfs check --readonly"), "{text}");
}

#[test]
fn the_images_of_the_states_that_break_the_promise_are_kept_and_no_others() {
    if !usable("ext4") {
        return;
    }
    let kept = tempfile::tempdir().unwrap();
    let dir = kept.path().to_str().unwrap();
    let (_, text, doc) = crash("ext4", &["--drop-flushes", "--keep-images", dir]);
    let images: Vec<_> = std::fs::read_dir(kept.path()).unwrap().map(|e| e.unwrap().path()).collect();
    let violations = doc["violations"].as_u64().unwrap();
    assert_eq!(images.len() as u64, violations.min(10), "{text}");
    let first = doc["first_violation"]["state"].as_u64().unwrap();
    let image = kept.path().join(format!("state-{first}.img"));
    assert!(text.contains(&image.display().to_string()), "{text}");
    // An ext4 superblock's magic, 0xEF53, at byte 1080.
    let bytes = std::fs::read(&image).unwrap();
    assert_eq!(&bytes[1080..1082], &[0x53, 0xef]);
}

#[test]
fn what_cannot_apply_to_a_kernel_file_system_is_refused() {
    if !usable("ext4") {
        return;
    }
    for (args, says) in [
        (&["--kernel", "ext3"][..], "choose from"),
        (&["--kernel", "ext4", "--state", "3"][..], "--keep-images"),
        (&["--kernel", "ext4", "--writers", "2"][..], "--writers"),
        (&["--kernel", "ext4", "--sector-size", "1000"][..], "512 or 4096"),
        (&["--kernel", "ext4", "--keep-images", "/nonexistent/dir"][..], "not a directory"),
        (&["--kernel", "ext4", "--drop-flushes", "--states", "0"][..], "no crash state was checked"),
    ] {
        let out = iolab(&[&["crash"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_table_puts_the_kernels_file_systems_beside_iolabs_stacks() {
    if !usable("ext4") {
        return;
    }
    let (code, text, doc) = crash("ext4", &["--stack", "fs-log,fs-sync"]);
    assert_eq!(doc["schema"], "iolab-crash-table", "{text}");
    let rows = doc["rows"].as_array().unwrap();
    let names: Vec<(&str, bool)> =
        rows.iter().map(|r| (r["stack"].as_str().unwrap(), r["kernel"].as_bool().unwrap())).collect();
    assert_eq!(names, [("ext4", true), ("fs-log", false), ("fs-sync", false)], "{text}");
    for r in rows {
        assert!(r["states_checked"].as_u64().unwrap() >= 20, "{r}");
        assert_eq!(r["violations"], 0, "{r}");
    }
    assert!(text.contains("ext4 (kernel)"), "{text}");
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_table_refuses_block_stacks_and_one_size_for_all() {
    for (args, says) in [
        (&["--stack", "log,fs-log"][..], "--stack log: a table compares file systems"),
        (&["--stack", "fs-log,fs-sync", "--size", "64m"][..], "each takes its own default"),
        (&["--stack", "fs-log,fs-sync", "--state", "1"][..], "--state does not apply"),
    ] {
        let out = iolab(&[&["crash"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// A small archive GNU tar made: a directory of a few files, a symlink.
fn small_archive(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (i, size) in [100usize, 5000, 70_000].iter().enumerate() {
        std::fs::write(src.join("sub").join(format!("f{i}")), vec![i as u8 + 1; *size]).unwrap();
    }
    std::os::unix::fs::symlink("sub/f1", src.join("link")).unwrap();
    let tar = dir.join("a.tar");
    let made = std::process::Command::new("tar").arg("-cf").arg(&tar).arg("-C").arg(&src).arg(".").status();
    assert!(made.unwrap().success());
    tar
}

#[test]
fn an_archive_synced_on_ext4_is_whole_in_every_state_after_the_sync() {
    if !usable("ext4") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tar = small_archive(dir.path());
    let (code, text, doc) = crash("ext4", &["--archive", tar.to_str().unwrap()]);
    assert_eq!(doc["violations"], 0, "{text}");
    assert_eq!(doc["fsyncs"], 1, "the one sync: {text}");
    assert!(text.contains("extracted as GNU tar does, then syncfs"), "{text}");
    assert_eq!(code, Some(0), "{text}");
    let (code, text, doc) = crash("ext4", &["--archive", tar.to_str().unwrap(), "--drop-flushes"]);
    assert!(doc["fsync_lost"].as_u64().unwrap() > 0, "the tree is lost without flushes: {text}");
    assert_eq!(code, Some(1), "{text}");
}
