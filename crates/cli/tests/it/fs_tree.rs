//! `iolab fs untar`, `iolab fs rm` and `iolab fs tree` (the tree workloads), and
//! the file system behind iolab's block log (`--block-log`), from the CLI.

use std::path::{Path, PathBuf};

use crate::cli::{iolab, stderr, stdout};
use crate::fs::{fuse_usable, run, source_tree, Mounted};

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A new image of `size` and a gzipped archive of a source-like tree.
fn image_and_archive(dir: &Path, size: &str, log: &[&str]) -> (std::path::PathBuf, std::path::PathBuf) {
    source_tree(&dir.join("src"));
    let archive = dir.join("src.tar.gz");
    run("tar", &["czf", path(&archive), "-C", path(dir), "src"]);
    let image = dir.join("fs.img");
    let mut args = vec!["fs", "mkfs", path(&image), "--size", size];
    args.extend_from_slice(log);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (image, archive)
}

#[test]
fn untar_extracts_what_tar_extracts_and_rm_removes_it_and_fsck_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "64m", &[]);
    let out = iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "sync", "--copies", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("extracted 2 copies in-process (policy sync"), "{}", stdout(&out));
    for copy in ["copy-1", "copy-2"] {
        let out = iolab(&["fs", "cat", path(&image), &format!("/{copy}/src/dir4/sub4/file1.c")]);
        assert_eq!(out.stdout, std::fs::read(dir.path().join("src/dir4/sub4/file1.c")).unwrap(), "{copy}");
    }
    let out = iolab(&["fs", "stat", path(&image), "/copy-2/src/hard-link.c"]);
    assert!(stdout(&out).contains("2 links"), "{}", stdout(&out));
    let out = iolab(&["fs", "rm", path(&image), "/copy-1", "copy-2", "--policy", "async"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = iolab(&["fs", "ls", path(&image), "/"]);
    assert_eq!(stdout(&out).lines().count(), 1, "only lost+found is left: {}", stdout(&out));
    let out = iolab(&["fs", "fsck", path(&image)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn untar_of_a_file_that_is_not_an_archive_is_a_usage_error_that_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = image_and_archive(dir.path(), "16m", &[]);
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not an archive\n".repeat(100)).unwrap();
    let before = std::fs::read(&image).unwrap();
    let out = iolab(&["fs", "untar", path(&image), path(&notes), "--policy", "async"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a tar archive"), "{}", stderr(&out));
    assert!(std::fs::read(&image).unwrap() == before, "the image was not touched");
}

#[test]
fn untar_onto_a_full_file_system_says_so_and_leaves_it_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "4m", &[]);
    let out = iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "async"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("the file system is full"), "{}", stderr(&out));
    let out = iolab(&["fs", "fsck", path(&image)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn rm_of_the_root_or_of_a_missing_path_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = image_and_archive(dir.path(), "16m", &[]);
    let out = iolab(&["fs", "rm", path(&image), "/", "--policy", "async"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("the root cannot be removed"), "{}", stderr(&out));
    let out = iolab(&["fs", "rm", path(&image), "/no/such", "--policy", "async"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("/no/such"), "{}", stderr(&out));
}

#[test]
fn a_file_system_behind_the_block_log_is_made_filled_and_checked_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = ["--block-log", "log"];
    let (image, archive) = image_and_archive(dir.path(), "64m", &log);
    let out =
        iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "async", "--block-log", "log"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = iolab(&["fs", "fsck", path(&image), "--block-log", "log"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = iolab(&["fs", "cat", path(&image), "/src/big.bin", "--block-log", "log"]);
    assert_eq!(out.stdout, vec![0x5a; 5 << 20]);
}

#[test]
fn a_target_holding_a_block_log_is_named_when_the_command_was_not_told() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "16m", &["--block-log", "log"]);
    for args in [vec!["fsck"], vec!["ls"], vec!["untar", path(&archive), "--policy", "async"]] {
        let mut full = vec!["fs", args[0], path(&image)];
        full.extend_from_slice(&args[1..]);
        let out = iolab(&full);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("pass --block-log"), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn commands_that_read_leave_a_logged_target_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "32m", &["--block-log", "log"]);
    let out = iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "sync", "--block-log", "log"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = std::fs::read(&image).unwrap();
    for look in
        [vec!["fsck", "-n"], vec!["ls", "/src"], vec!["stat", "/src"], vec!["cat", "/src/hard-link.c"]]
    {
        let mut full = vec!["fs", look[0], path(&image)];
        full.extend_from_slice(&look[1..]);
        full.extend_from_slice(&["--block-log", "log"]);
        let out = iolab(&full);
        assert!(out.status.success(), "{look:?}: {}", stderr(&out));
    }
    assert!(std::fs::read(&image).unwrap() == before, "looking changed nothing");
}

#[test]
fn gnu_tar_through_fuse_on_a_file_system_behind_the_block_log_on_one_cpu() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "64m", &["--block-log", "log"]);
    let (src, mnt) = (dir.path().join("src"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Mounted::start(&image, &mnt, "async", &["--block-log", "log", "--cpus", "0"]);
    run("tar", &["xzf", path(&archive), "-C", path(&mnt)]);
    run("diff", &["-r", "--no-dereference", path(&src), path(&mnt.join("src"))]);
    run("rm", &["-rf", path(&mnt.join("src/dir1"))]);
    mounted.unmount();
    let out = iolab(&["fs", "fsck", path(&image), "--block-log", "log"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = iolab(&["fs", "ls", path(&image), "/src", "--block-log", "log"]);
    assert!(!stdout(&out).contains("dir1\n") && stdout(&out).contains("dir2"), "{}", stdout(&out));
}

#[test]
fn cat_of_a_symlink_or_a_directory_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "32m", &[]);
    assert!(iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "async"]).status.success());
    let out = iolab(&["fs", "cat", path(&image), "/src/link-to-file"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a symlink to dir1/sub1/file0.c"), "{}", stderr(&out));
    let out = iolab(&["fs", "cat", path(&image), "/src"]);
    assert!(stderr(&out).contains("a directory"), "{}", stderr(&out));
}

#[test]
fn a_file_system_on_a_raid5_volume_is_filled_checked_and_its_parity_is_right() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("r5.conf");
    std::fs::write(&conf, crate::volume::RAID5).unwrap();
    let conf = path(&conf).to_string();
    let out = iolab(&["volume", "create", &conf, "--drive-size", "24m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    source_tree(&dir.path().join("src"));
    let archive = dir.path().join("src.tar");
    run("tar", &["cf", path(&archive), "-C", path(dir.path()), "src"]);
    for args in [
        vec!["fs", "mkfs", &conf],
        vec!["fs", "untar", &conf, path(&archive), "--policy", "sync"],
        vec!["fs", "fsck", &conf],
        vec!["fs", "rm", &conf, "/src/dir3", "--policy", "async"],
        vec!["fs", "fsck", &conf],
        vec!["volume", "checkparity", "raid", &conf],
    ] {
        let out = iolab(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}{}", stdout(&out), stderr(&out));
        if args[1] == "checkparity" {
            assert!(stdout(&out).contains(" 0 with wrong parity"), "{}", stdout(&out));
        }
    }
}

#[test]
fn mkfs_refuses_a_log_region_too_small_for_the_log_policy() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    let out = iolab(&["fs", "mkfs", path(&image), "--size", "16m", "--log-size", "64k"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("give at least 1024 KiB"), "{}", stderr(&out));
    assert!(!image.exists(), "a refused mkfs leaves no file behind");
}

/// `iolab fs tree` with a small tree (7 directories, 3 items each).
fn tree_run(target: &Path, extra: &[&str]) -> String {
    let mut args = vec!["fs", "tree", path(target), "--depth", "1", "--fanout", "6", "--items", "3"];
    args.extend_from_slice(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn tree_runs_mdtests_phases_on_an_image_and_leaves_it_clean_and_empty() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert!(iolab(&["fs", "mkfs", path(&image), "--size", "32m"]).status.success());
    let text = tree_run(&image, &["--policy", "softdep", "--write", "1k", "--read", "1k"]);
    for phase in ["Directory creation", "File read", "Tree removal"] {
        assert!(text.contains(phase), "{phase} missing from\n{text}");
    }
    assert!(text.contains("File creation                21"), "7 directories x 3 files:\n{text}");
    assert!(text.contains("Tree creation                 7"), "{text}");
    let out = iolab(&["fs", "fsck", path(&image)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let listed = stdout(&iolab(&["fs", "ls", path(&image), "/"]));
    assert_eq!(listed.lines().count(), 1, "only lost+found is left:\n{listed}");
}

#[test]
fn tree_in_a_directory_says_where_it_ran_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = tree_run(dir.path(), &[]);
    assert!(text.contains("system calls through fsapi's HostFs"), "{text}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn tree_names_what_is_wrong_with_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fs.img");
    assert!(iolab(&["fs", "mkfs", path(&image), "--size", "32m"]).status.success());
    for (args, says) in [
        (vec!["fs", "tree", path(&image)], "--policy"),
        (vec!["fs", "tree", path(dir.path()), "--policy", "sync"], "a directory runs on the file system"),
        (vec!["fs", "tree", path(dir.path()), "--items", "0"], "--items"),
    ] {
        let out = iolab(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// Bytes the file system holding `path` has given it.
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Ctrl-C in the middle of `iolab fs untar`: the work stops, the file
/// system is unmounted as at the end (a clean image), and the exit status
/// is 130. The test waits, without sleeping, until the extraction has
/// written to the image, so the interrupt lands mid-run.
#[test]
fn an_interrupted_untar_unmounts_cleanly_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = image_and_archive(dir.path(), "2g", &[]);
    let before = allocated(&image);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["fs", "untar", path(&image), path(&archive), "--policy", "sync", "--copies", "80"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while allocated(&image) < before + (1 << 20) {
        assert!(child.try_wait().unwrap().is_none(), "the extraction ended before it was interrupted");
        std::thread::yield_now();
    }
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("unmounted cleanly"), "{}", stderr(&out));
    let fsck = iolab(&["fs", "fsck", path(&image)]);
    assert_eq!(fsck.status.code(), Some(0), "{}", stdout(&fsck));
}

/// An image and its archive after `iolab fs untar --policy sync` was
/// killed with SIGKILL part way (a MiB in): nothing unmounted, so the
/// image is left not clean.
fn killed_untar(dir: &Path) -> (PathBuf, PathBuf) {
    let (image, archive) = image_and_archive(dir, "2g", &[]);
    let before = allocated(&image);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["fs", "untar", path(&image), path(&archive), "--policy", "sync", "--copies", "80"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while allocated(&image) < before + (1 << 20) {
        assert!(child.try_wait().unwrap().is_none(), "the extraction ended before it was killed");
        std::thread::yield_now();
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    (image, archive)
}

/// Issue 41's sequence: `untar` killed with SIGKILL part way (nothing
/// unmounts: the image is left not clean), then `untar --into /new` on
/// the same image without fsck is refused before it writes a byte,
/// naming `iolab fs fsck -p`; the read-only commands still work; preen
/// repairs it and marks it clean, and the second untar then runs.
#[test]
fn a_killed_untar_leaves_an_image_every_writing_command_refuses_until_fsck_p() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = killed_untar(dir.path());
    let killed = std::fs::read(&image).unwrap();
    let untar_again = ["fs", "untar", path(&image), path(&archive), "--policy", "sync", "--into", "/new"];
    let out = iolab(&untar_again);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let fix = format!("`iolab fs fsck -p {}`", path(&image));
    assert!(stderr(&out).contains("is not clean") && stderr(&out).contains(&fix), "{}", stderr(&out));
    assert!(std::fs::read(&image).unwrap() == killed, "the refused untar wrote to the image");
    for refused in [
        vec!["fs", "rm", path(&image), "/copy-1", "--policy", "log"],
        vec!["fs", "tree", path(&image), "--policy", "softdep", "--items", "2"],
    ] {
        let out = iolab(&refused);
        assert_eq!(out.status.code(), Some(2), "{refused:?}: {}", stderr(&out));
    }
    // Looking inside needs no check.
    let out = iolab(&["fs", "ls", path(&image), "/"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("copy-1") && stderr(&out).contains("not clean"), "{}", stderr(&out));
    let out = iolab(&["fs", "fsck", "-n", path(&image)]);
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", stderr(&out));
    assert!(std::fs::read(&image).unwrap() == killed, "the read-only commands wrote to the image");
    let out = iolab(&["fs", "fsck", "-p", path(&image)]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stdout(&out));
    let out = iolab(&untar_again);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = iolab(&["fs", "fsck", path(&image)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// `--force` mounts an unclean image with a warning, and the image stays
/// refused afterwards: the unmount does not mark the damage clean.
#[test]
fn a_forced_untar_warns_and_leaves_the_image_refused_until_fsck() {
    let dir = tempfile::tempdir().unwrap();
    let (image, archive) = killed_untar(dir.path());
    let out = iolab(&[
        "fs",
        "untar",
        path(&image),
        path(&archive),
        "--policy",
        "async",
        "--into",
        "/new",
        "--force",
    ]);
    assert!(stderr(&out).contains("mounted anyway (--force)"), "{}", stderr(&out));
    assert!(stdout(&out).contains("still marked unclean"), "{}", stdout(&out));
    let out = iolab(&["fs", "rm", path(&image), "/new", "--policy", "async"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a mount was forced over damage"), "{}", stderr(&out));
}

/// GNU tar's archive (its own format) of a tree holding a FIFO and, as
/// root, a character device: `iolab fs untar` makes both, as GNU tar
/// does as root, `ls` and `stat` show their kind and number, and the
/// image checks clean.
#[test]
fn untar_makes_the_fifos_and_devices_gnu_tar_archived() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("nodes");
    std::fs::create_dir(&tree).unwrap();
    run("mkfifo", &["-m", "0640", path(&tree.join("pipe"))]);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        run("mknod", &["-m", "0666", path(&tree.join("null")), "c", "1", "3"]);
    } else {
        eprintln!("not root: the archive holds no device node (mknod needs CAP_MKNOD)");
    }
    let archive = dir.path().join("nodes.tar");
    run("tar", &["--format=gnu", "-cf", path(&archive), "-C", path(dir.path()), "nodes"]);
    let image = dir.path().join("fs.img");
    assert_eq!(iolab(&["fs", "mkfs", path(&image), "--size", "16m"]).status.code(), Some(0));
    let out = iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "softdep"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let specials = if root { "2 FIFOs and devices" } else { "1 FIFOs and devices" };
    assert!(stdout(&out).contains(specials) && !stdout(&out).contains("skipped"), "{}", stdout(&out));
    let out = iolab(&["fs", "ls", path(&image), "/nodes"]);
    let listing = stdout(&out);
    assert!(listing.lines().any(|l| l.starts_with("p 0640") && l.ends_with(" pipe")), "{listing}");
    if root {
        assert!(listing.lines().any(|l| l.starts_with("c 0666") && l.ends_with("1, 3 null")), "{listing}");
        let out = iolab(&["fs", "stat", path(&image), "/nodes/null"]);
        assert!(stdout(&out).contains("CharDevice 1:3"), "{}", stdout(&out));
    }
    let out = iolab(&["fs", "fsck", path(&image)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}
