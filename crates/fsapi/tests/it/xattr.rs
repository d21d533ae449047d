//! Extended attributes: set, got, listed and removed as Linux's calls do,
//! with the kernel's errnos for a name or value it refuses. The model and
//! a kernel file system (the host's, through `HostFs`) agree on each; the
//! model's room is iolab's file system's (one block).

use std::ffi::OsStr;

use fsapi::xattr::{ROOM_BYTES, VALUE_BYTES_MAX};
use fsapi::{Errno, FileSystem, FileType, HostFs, ModelFs, Owner, XattrFlags, ROOT};

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// `check` on the model and on a kernel file system in a new directory.
fn on_both(check: impl Fn(&dyn FileSystem)) {
    check(&ModelFs::new());
    let dir = tempfile::tempdir().unwrap();
    check(&HostFs::new(dir.path()).unwrap());
}

/// A new empty file `f` in the root: its inode.
fn file(fs: &dyn FileSystem) -> u64 {
    fs.create(ROOT, name("f"), Owner::root(0o644)).unwrap().ino
}

#[test]
fn a_value_set_is_got_back_and_its_name_listed() {
    on_both(|fs| {
        let f = file(fs);
        fs.setxattr(f, name("user.mime"), b"text/plain", XattrFlags::ANY).unwrap();
        assert_eq!(fs.getxattr(f, name("user.mime")).unwrap(), b"text/plain");
        assert_eq!(fs.listxattr(f).unwrap(), b"user.mime\0");
    });
}

#[test]
fn a_value_set_again_replaces_the_old_one() {
    on_both(|fs| {
        let f = file(fs);
        fs.setxattr(f, name("user.a"), b"first, longer", XattrFlags::ANY).unwrap();
        fs.setxattr(f, name("user.a"), b"second", XattrFlags::REPLACE).unwrap();
        assert_eq!(fs.getxattr(f, name("user.a")).unwrap(), b"second");
    });
}

#[test]
fn a_name_removed_is_gone() {
    on_both(|fs| {
        let f = file(fs);
        fs.setxattr(f, name("user.a"), b"v", XattrFlags::ANY).unwrap();
        fs.removexattr(f, name("user.a")).unwrap();
        assert_eq!(fs.getxattr(f, name("user.a")), Err(Errno::NODATA));
        assert_eq!(fs.removexattr(f, name("user.a")), Err(Errno::NODATA));
        assert_eq!(fs.listxattr(f).unwrap(), b"");
    });
}

#[test]
fn create_refuses_a_name_there_and_replace_one_missing() {
    on_both(|fs| {
        let f = file(fs);
        assert_eq!(fs.setxattr(f, name("user.a"), b"v", XattrFlags::REPLACE), Err(Errno::NODATA));
        fs.setxattr(f, name("user.a"), b"v", XattrFlags::CREATE).unwrap();
        assert_eq!(fs.setxattr(f, name("user.a"), b"w", XattrFlags::CREATE), Err(Errno::EXIST));
        assert_eq!(fs.getxattr(f, name("user.a")).unwrap(), b"v");
    });
}

#[test]
fn names_the_kernel_refuses_get_its_errnos() {
    on_both(|fs| {
        let f = file(fs);
        let long = format!("user.{}", "n".repeat(251));
        for (n, errno) in [
            ("os2.x", Errno::NOTSUP),
            ("system.nothing", Errno::NOTSUP),
            ("user.", Errno::INVAL),
            (&long, Errno::RANGE),
        ] {
            assert_eq!(fs.setxattr(f, name(n), b"v", XattrFlags::ANY), Err(errno), "{n}");
        }
    });
}

#[test]
fn a_value_past_64_kib_is_e2big() {
    on_both(|fs| {
        let f = file(fs);
        let value = vec![1u8; VALUE_BYTES_MAX + 1];
        assert_eq!(fs.setxattr(f, name("user.a"), &value, XattrFlags::ANY), Err(Errno::TOOBIG));
    });
}

#[test]
fn user_attributes_are_refused_on_a_fifo() {
    on_both(|fs| {
        let p = fs.mknod(ROOT, name("p"), FileType::Fifo, 0, Owner::root(0o644)).unwrap().ino;
        assert_eq!(fs.setxattr(p, name("user.a"), b"v", XattrFlags::ANY), Err(Errno::PERM));
        assert_eq!(fs.getxattr(p, name("user.a")), Err(Errno::NODATA));
        assert_eq!(fs.removexattr(p, name("user.a")), Err(Errno::PERM));
    });
}

#[test]
fn a_directory_and_a_symlink_keep_attributes_of_their_own() {
    on_both(|fs| {
        let d = fs.mkdir(ROOT, name("d"), Owner::root(0o755)).unwrap().ino;
        fs.setxattr(d, name("user.dir"), b"1", XattrFlags::ANY).unwrap();
        let l = fs.symlink(ROOT, name("l"), name("d"), Owner::root(0o777)).unwrap().ino;
        fs.setxattr(l, name("trusted.link"), b"2", XattrFlags::ANY).unwrap();
        assert_eq!(fs.listxattr(d).unwrap(), b"user.dir\0");
        assert_eq!(fs.listxattr(l).unwrap(), b"trusted.link\0");
    });
}

#[test]
fn the_model_refuses_what_would_not_fit_one_block() {
    let fs = ModelFs::new();
    let f = file(&fs);
    // 4 bytes of overhead and the name after `user.` (one byte) each.
    let half = ROOM_BYTES / 2 - 5;
    fs.setxattr(f, name("user.a"), &vec![1; half], XattrFlags::ANY).unwrap();
    fs.setxattr(f, name("user.b"), &vec![2; half], XattrFlags::ANY).unwrap();
    assert_eq!(fs.setxattr(f, name("user.c"), b"", XattrFlags::ANY), Err(Errno::NOSPC));
    assert_eq!(fs.setxattr(f, name("user.a"), &vec![1; half + 1], XattrFlags::ANY), Err(Errno::NOSPC));
    assert_eq!(fs.getxattr(f, name("user.a")).unwrap().len(), half, "a refused value leaves the old one");
}
