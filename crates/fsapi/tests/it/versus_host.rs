//! The model against a real kernel file system: the same random sequence
//! of operations on `ModelFs` and on `HostFs` over a temporary directory
//! must give the same results (the same errno where they fail) and leave
//! the same tree. It checks the model against Linux's own semantics, and
//! the host backend against the model.

use std::ffi::OsStr;

use fsapi::testing::{apply, dirs, files, tree, xattrs, Op, SPECIAL_KINDS};
use fsapi::{Errno, Fallocate, FileSystem, HostFs, ModelFs, Owner, ROOT};
use proptest::prelude::*;

/// Whether the host file system under `dir` zeroes ranges (tmpfs does
/// not: `EOPNOTSUPP`).
fn host_zeroes_ranges(dir: &std::path::Path) -> bool {
    let host = HostFs::new(dir).unwrap();
    let f = host.create(ROOT, OsStr::new("probe"), Owner::root(0o644)).unwrap();
    let zeroes =
        host.fallocate(f.ino, Fallocate::ZeroRange { keep_size: true }, 0, 4096) != Err(Errno::OPNOTSUPP);
    host.forget(f.ino, 1);
    host.unlink(ROOT, OsStr::new("probe")).unwrap();
    zeroes
}

/// `op`, with a device node made a FIFO where the host would refuse it
/// (making one needs CAP_MKNOD; CI runs as root and makes them), a
/// zeroing made an allocation where the host has none, and a `trusted.`
/// attribute a `user.` one. Values are kept small enough that every
/// attribute the mix sets fits the host's room as well as iolab's (ext4
/// counts its own overheads: the rooms differ at their edge).
fn as_the_host_allows(op: Op, zeroes: bool) -> Op {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let zeroing = |m: usize| matches!(Fallocate::ALL[m % Fallocate::ALL.len()], Fallocate::ZeroRange { .. });
    let trusted = |n: usize| fsapi::testing::XATTR_NAMES[n % 4].starts_with("trusted.");
    match op {
        Op::Mknod(d, m, k, rdev) if !root && SPECIAL_KINDS[k % SPECIAL_KINDS.len()].is_device() => {
            Op::Mknod(d, m, 0, rdev)
        }
        Op::Fallocate(f, m, offset, len) if !zeroes && zeroing(m) => Op::Fallocate(f, 0, offset, len),
        Op::SetXattr(t, n, len, flags) => {
            Op::SetXattr(t, if !root && trusted(n) { 0 } else { n }, len % 700, flags)
        }
        Op::RemoveXattr(t, n) if !root && trusted(n) => Op::RemoveXattr(t, 0),
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_model_and_a_kernel_file_system_agree(numbers in prop::collection::vec(any::<[u16; 6]>(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let zeroes = host_zeroes_ranges(dir.path());
        let ops: Vec<Op> = numbers.into_iter().map(|n| as_the_host_allows(Op::decode(n), zeroes)).collect();
        let host = HostFs::new(dir.path()).unwrap();
        let model = ModelFs::new();
        for op in &ops {
            let (d, f) = (dirs(&model), files(&model));
            let on_model = apply(&model, op, &d, &f);
            let on_host = apply(&host, op, &d, &f);
            prop_assert_eq!(on_model, on_host, "{:?}", op);
        }
        prop_assert_eq!(tree(&model), tree(&host));
        prop_assert_eq!(xattrs(&model), xattrs(&host));
    }
}
