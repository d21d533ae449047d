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
    prop_assert_eq!(tree(&model), tree(&fs));
    prop_assert_eq!(layout(&model), layout(&fs));
    prop_assert_eq!(xattrs(&model), xattrs(&fs));
    fs.unmount().unwrap();
    let report = ffs::fsck::fsck(&dev, ffs::fsck::Repair::No).unwrap();
    prop_assert!(report.clean(), "{:?}", report.findings);
    let fs = mount(&dev, policy);
    prop_assert_eq!(tree(&model), tree(&fs));
    prop_assert_eq!(layout(&model), layout(&fs));
    prop_assert_eq!(xattrs(&model), xattrs(&fs));
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
