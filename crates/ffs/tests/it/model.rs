//! The file system against the reference model: random operations on both
//! give the same results, and the tree, its extended attributes and each
//! file's holes (the model allocates as iolab's file system does) survive
//! unmounting and mounting again, under each policy.

use ffs::Policy;
use fsapi::testing::{apply, dirs, files, layout, tree, xattrs, Op};
use fsapi::{FileSystem, ModelFs};
use proptest::prelude::*;

use crate::common::{fresh, mount};

fn check(numbers: Vec<[u16; 6]>, policy: Policy) -> Result<(), TestCaseError> {
    let dev = fresh(16 << 20);
    let model = ModelFs::new();
    // A new file system holds lost+found, as fsck wants it.
    let lf = model.mkdir(fsapi::ROOT, std::ffi::OsStr::new("lost+found"), fsapi::Owner::root(0o700)).unwrap();
    model.forget(lf.ino, 1);
    let mut fs = mount(&dev, policy);
    for (i, n) in numbers.into_iter().enumerate() {
        let op = Op::decode(n);
        let (d, f) = (dirs(&model), files(&model));
        prop_assert_eq!(apply(&model, &op, &d, &f), apply(&fs, &op, &d, &f), "{:?}", op);
        if i % 17 == 16 {
            fs.unmount().unwrap();
            fs = mount(&dev, policy);
        }
    }
    agrees_across_a_remount(&model, fs, &dev, policy)
}

/// The tree, its holes and its attributes agree with the model's, then
/// again after an unmount that fsck finds clean and a mount.
fn agrees_across_a_remount(
    model: &ModelFs,
    fs: ffs::Ffs,
    dev: &std::sync::Arc<dyn device::Device>,
    policy: Policy,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(tree(model), tree(&fs));
    prop_assert_eq!(layout(model), layout(&fs));
    prop_assert_eq!(xattrs(model), xattrs(&fs));
    fs.unmount().unwrap();
    let report = ffs::fsck::fsck(dev, ffs::fsck::Repair::No).unwrap();
    prop_assert!(report.clean(), "{:?}", report.findings);
    let fs = mount(dev, policy);
    prop_assert_eq!(tree(model), tree(&fs));
    prop_assert_eq!(layout(model), layout(&fs));
    prop_assert_eq!(xattrs(model), xattrs(&fs));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn async_agrees_with_the_model_across_remounts(numbers in prop::collection::vec(any::<[u16; 6]>(), 1..80)) {
        check(numbers, Policy::Async)?;
    }

    #[test]
    fn softdep_agrees_with_the_model_across_remounts(numbers in prop::collection::vec(any::<[u16; 6]>(), 1..80)) {
        check(numbers, Policy::Softdep)?;
    }

    #[test]
    fn log_agrees_with_the_model_across_remounts(numbers in prop::collection::vec(any::<[u16; 6]>(), 1..80)) {
        check(numbers, Policy::Log)?;
    }

    #[test]
    fn sync_agrees_with_the_model_across_remounts(numbers in prop::collection::vec(any::<[u16; 6]>(), 1..80)) {
        check(numbers, Policy::Sync)?;
    }
}

/// Threads at once, as FUSE's workers call: each thread runs its own
/// operations on a subtree of its own (`/t0`, `/t1`, ...), so that each
/// call's result is the model's whatever the interleaving; the mount has
/// its production threads (the log's committer, soft updates' flusher),
/// and a syncer beside them writes back everything dirty as often as it
/// can (the production syncer's tick with no age to wait for, so its
/// write-back meets the workers' calls). Every call agrees with the
/// model, no tick fails; the whole tree, its holes and its attributes
/// agree after the threads end and after a remount, and fsck finds
/// nothing.
fn check_threads(streams: Vec<Vec<[u16; 6]>>, policy: Policy) -> Result<(), TestCaseError> {
    let dev = fresh(32 << 20);
    let model = ModelFs::new();
    let lf = model.mkdir(fsapi::ROOT, std::ffi::OsStr::new("lost+found"), fsapi::Owner::root(0o700)).unwrap();
    model.forget(lf.ino, 1);
    let fs = mount(&dev, policy);
    for t in 0..streams.len() {
        let name = format!("t{t}");
        for side in [&model as &dyn FileSystem, &fs] {
            let made =
                side.mkdir(fsapi::ROOT, std::ffi::OsStr::new(&name), fsapi::Owner::root(0o755)).unwrap();
            side.forget(made.ino, 1);
        }
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let (disagreed, syncer): (Vec<String>, Result<(), ffs::FsError>) = std::thread::scope(|s| {
        let syncer = s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                fs.tick(std::time::Duration::ZERO)?;
                std::thread::yield_now();
            }
            Ok(())
        });
        let workers: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(t, stream)| {
                let (model, fs) = (&model, &fs);
                s.spawn(move || {
                    let top = format!("/t{t}");
                    let top_ino = model.lookup(fsapi::ROOT, std::ffi::OsStr::new(&top[1..])).unwrap().ino;
                    for n in stream {
                        let op = Op::decode(n);
                        // The thread's own subtree, walked in the model
                        // (a walk of the whole tree would race the others).
                        let mut mine = std::collections::BTreeMap::new();
                        fsapi::testing::walk(model, top_ino, &top, &mut mine);
                        let d: Vec<String> = std::iter::once(top.clone())
                            .chain(
                                mine.iter()
                                    .filter(|(_, (k, ..))| *k == fsapi::FileType::Dir)
                                    .map(|(p, _)| p.clone()),
                            )
                            .collect();
                        let picked = |k: &fsapi::FileType| *k == fsapi::FileType::File || k.is_special();
                        let f: Vec<String> =
                            mine.iter().filter(|(_, (k, ..))| picked(k)).map(|(p, _)| p.clone()).collect();
                        let (want, got) = (apply(model, &op, &d, &f), apply(fs, &op, &d, &f));
                        if want != got {
                            return Some(format!(
                                "thread {t}: {op:?}: the model {want:?}, the file system {got:?}"
                            ));
                        }
                    }
                    None
                })
            })
            .collect();
        let disagreed = workers.into_iter().filter_map(|w| w.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (disagreed, syncer.join().unwrap())
    });
    prop_assert!(disagreed.is_empty(), "{:?}", disagreed);
    prop_assert!(syncer.is_ok(), "the syncer's tick failed: {:?}", syncer);
    agrees_across_a_remount(&model, fs, &dev, policy)
}

fn streams() -> impl Strategy<Value = Vec<Vec<[u16; 6]>>> {
    prop::collection::vec(prop::collection::vec(any::<[u16; 6]>(), 1..60), 4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn four_threads_agree_with_the_model_under_softdep(s in streams()) {
        check_threads(s, Policy::Softdep)?;
    }

    #[test]
    fn four_threads_agree_with_the_model_under_log(s in streams()) {
        check_threads(s, Policy::Log)?;
    }

    #[test]
    fn four_threads_agree_with_the_model_under_sync(s in streams()) {
        check_threads(s, Policy::Sync)?;
    }

    #[test]
    fn four_threads_agree_with_the_model_under_async(s in streams()) {
        check_threads(s, Policy::Async)?;
    }
}
