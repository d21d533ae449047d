//! Extended attributes and POSIX ACLs through an `iolab fs mount`, as
//! programs use them: setfattr and getfattr (package `attr`), setfacl and
//! getfacl (package `acl`), `cp -a` and `tar --xattrs`, over both
//! transports. The ACL tests run commands as `nobody` through a mount
//! with `--allow-other` (the kernel then enforces ACLs), so they need
//! root; without the programs or root a test says why it skipped.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli::{iolab, stderr, stdout};
use crate::fs::{fuse_uring_usable, fuse_usable, run, Mounted};

const NOBODY: u32 = 65534;

/// Whether `program` runs here (else a skip is said).
fn have(program: &str, package: &str) -> bool {
    let found = Command::new(program).arg("--version").output().is_ok();
    if !found {
        eprintln!("skipped: {program} is missing (apt-get install {package})");
    }
    found
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: not root, so no command can be run as another user");
    }
    root
}

/// A new image under `dir` mounted at `dir/mnt` under `policy` with
/// `extra`: the mount and the mount point.
fn mount(dir: &Path, policy: &str, extra: &[&str]) -> (Mounted, PathBuf) {
    let (image, mnt) = (dir.join("fs.img"), dir.join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    run("chmod", &["0755", dir.to_str().unwrap()]);
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "64m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (Mounted::start(&image, &mnt, policy, extra), mnt)
}

fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap()
}

fn said(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

fn as_nobody(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).uid(NOBODY).gid(NOBODY).output().unwrap()
}

/// `setfattr -n user.a -v hello f`, then `getfattr -d f`, through a mount
/// served by `transport`; the attribute is there after a remount too,
/// and fsck finds the image clean.
fn setfattr_then_getfattr(transport: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "softdep", &["--transport", transport]);
    let f = mnt.join("f");
    std::fs::write(&f, b"data").unwrap();
    run("setfattr", &["-n", "user.a", "-v", "hello", f.to_str().unwrap()]);
    let out = output("getfattr", &["-d", f.to_str().unwrap()]);
    assert!(stdout(&out).contains("user.a=\"hello\""), "{}", said(&out));
    mounted.unmount();
    let image = dir.path().join("fs.img");
    let out = iolab(&["fs", "fsck", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let mounted = Mounted::start(&image, &mnt, "log", &["--transport", transport]);
    let out = output("getfattr", &["-n", "user.a", "--only-values", f.to_str().unwrap()]);
    assert_eq!(stdout(&out), "hello", "{}", said(&out));
    mounted.unmount();
}

#[test]
fn setfattr_and_getfattr_round_trip_through_a_mount() {
    if fuse_usable() && have("setfattr", "attr") {
        setfattr_then_getfattr("dev");
    }
}

#[test]
fn setfattr_and_getfattr_round_trip_through_a_mount_over_io_uring() {
    if fuse_uring_usable() && have("setfattr", "attr") {
        setfattr_then_getfattr("uring");
    }
}

/// What the calls refuse reaches the program as its errno: a name not
/// there, a namespace iolab does not keep, a value past one block.
#[test]
fn refusals_reach_the_program_with_their_errno() {
    if !fuse_usable() || !have("setfattr", "attr") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "async", &[]);
    let f = mnt.join("f");
    std::fs::write(&f, b"").unwrap();
    let f = f.to_str().unwrap();
    let out = output("getfattr", &["-n", "user.missing", f]);
    assert!(said(&out).contains("No such attribute"), "{}", said(&out));
    let big = format!("0x{}", "61".repeat(5000));
    let out = output("setfattr", &["-n", "user.big", "-v", &big, f]);
    assert!(said(&out).contains("No space left on device"), "{}", said(&out));
    let out = output("setfattr", &["-n", "os2.x", "-v", "1", f]);
    assert!(said(&out).contains("Operation not supported"), "{}", said(&out));
    mounted.unmount();
}

/// `cp -a` from the host's file system and `tar --xattrs` within the
/// mount keep user attributes.
#[test]
fn cp_a_and_tar_xattrs_keep_user_attributes() {
    if !fuse_usable() || !have("setfattr", "attr") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "sync", &[]);
    let src = dir.path().join("src");
    std::fs::write(&src, b"body").unwrap();
    run("setfattr", &["-n", "user.origin", "-v", "host", src.to_str().unwrap()]);
    let copied = mnt.join("copied");
    run("cp", &["-a", src.to_str().unwrap(), copied.to_str().unwrap()]);
    let value = |path: &Path| {
        stdout(&output("getfattr", &["-n", "user.origin", "--only-values", path.to_str().unwrap()]))
    };
    assert_eq!(value(&copied), "host", "cp -a");
    let archive = dir.path().join("a.tar");
    let m = mnt.to_str().unwrap();
    run("tar", &["--xattrs", "-cf", archive.to_str().unwrap(), "-C", m, "copied"]);
    std::fs::create_dir(mnt.join("x")).unwrap();
    run(
        "tar",
        &[
            "--xattrs",
            "--xattrs-include=user.*",
            "-xf",
            archive.to_str().unwrap(),
            "-C",
            mnt.join("x").to_str().unwrap(),
        ],
    );
    assert_eq!(value(&mnt.join("x").join("copied")), "host", "tar --xattrs");
    mounted.unmount();
}

/// `setfacl -m u:nobody:rw f` then `getfacl f`: the ACL comes back, and
/// the group bits show its mask, as on ext4.
fn setfacl_then_getfacl(transport: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "log", &["--allow-other", "--transport", transport]);
    let f = mnt.join("f");
    std::fs::write(&f, b"").unwrap();
    run("chmod", &["0644", f.to_str().unwrap()]);
    run("setfacl", &["-m", "u:nobody:rw", f.to_str().unwrap()]);
    let out = output("getfacl", &["-c", f.to_str().unwrap()]);
    let acl = stdout(&out);
    for line in ["user::rw-", "user:nobody:rw-", "group::r--", "mask::rw-", "other::r--"] {
        assert!(acl.lines().any(|l| l == line), "{line} in {acl}");
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&f).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o664, "the group bits are the mask");
    mounted.unmount();
}

#[test]
fn setfacl_and_getfacl_round_trip_through_a_mount() {
    if fuse_usable() && have("setfacl", "acl") && root() {
        setfacl_then_getfacl("dev");
    }
}

#[test]
fn setfacl_and_getfacl_round_trip_through_a_mount_over_io_uring() {
    if fuse_uring_usable() && have("setfacl", "acl") && root() {
        setfacl_then_getfacl("uring");
    }
}

/// The kernel enforces what an ACL says: a file only its owner may read
/// is read by `nobody` once an entry grants it, and a file every user may
/// read is not once an entry denies `nobody`.
#[test]
fn an_acl_grants_and_denies_a_user_as_it_says() {
    if !fuse_usable() || !have("setfacl", "acl") || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "sync", &["--allow-other"]);
    let (secret, open) = (mnt.join("secret"), mnt.join("open"));
    for (file, mode) in [(&secret, "0600"), (&open, "0644")] {
        std::fs::write(file, b"text").unwrap();
        run("chmod", &[mode, file.to_str().unwrap()]);
    }
    assert!(!as_nobody("cat", &[secret.to_str().unwrap()]).status.success(), "0600: not nobody's");
    run("setfacl", &["-m", "u:nobody:r", secret.to_str().unwrap()]);
    let out = as_nobody("cat", &[secret.to_str().unwrap()]);
    assert_eq!(stdout(&out), "text", "granted: {}", said(&out));
    assert!(as_nobody("cat", &[open.to_str().unwrap()]).status.success(), "0644: everyone's");
    run("setfacl", &["-m", "u:nobody:---", open.to_str().unwrap()]);
    let out = as_nobody("cat", &[open.to_str().unwrap()]);
    assert!(said(&out).contains("Permission denied"), "denied: {}", said(&out));
    mounted.unmount();
}

/// A directory's default ACL is given to what is made in it, as ext4
/// gives it: the new file's ACL carries the named entry.
#[test]
fn a_new_file_takes_its_directorys_default_acl() {
    if !fuse_usable() || !have("setfacl", "acl") || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "async", &["--allow-other"]);
    let shared = mnt.join("shared");
    std::fs::create_dir(&shared).unwrap();
    run("setfacl", &["-d", "-m", "u:nobody:rwx", shared.to_str().unwrap()]);
    let f = shared.join("f");
    std::fs::write(&f, b"").unwrap();
    let acl = stdout(&output("getfacl", &["-c", f.to_str().unwrap()]));
    assert!(acl.lines().any(|l| l.starts_with("user:nobody:rw")), "{acl}");
    let sub = shared.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let acl = stdout(&output("getfacl", &["-c", sub.to_str().unwrap()]));
    assert!(acl.lines().any(|l| l == "default:user:nobody:rwx"), "a directory keeps the default: {acl}");
    mounted.unmount();
}

/// `trusted.` attributes are root's: another user listing a file's
/// attributes sees its `user.` ones only.
#[test]
fn another_user_is_not_shown_trusted_attributes() {
    if !fuse_usable() || !have("setfattr", "attr") || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), "log", &["--allow-other"]);
    let f = mnt.join("f");
    std::fs::write(&f, b"").unwrap();
    run("chmod", &["0644", f.to_str().unwrap()]);
    run("setfattr", &["-n", "trusted.root", "-v", "1", f.to_str().unwrap()]);
    run("setfattr", &["-n", "user.all", "-v", "2", f.to_str().unwrap()]);
    let out = as_nobody("getfattr", &["-d", "-m", "-", f.to_str().unwrap()]);
    assert!(stdout(&out).contains("user.all") && !stdout(&out).contains("trusted"), "{}", said(&out));
    let out = output("getfattr", &["-d", "-m", "-", f.to_str().unwrap()]);
    assert!(stdout(&out).contains("trusted.root"), "root sees it: {}", said(&out));
    mounted.unmount();
}
