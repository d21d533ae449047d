//! The model against a real kernel file system: the same random sequence
//! of operations on `ModelFs` and on `HostFs` over a temporary directory
//! must give the same results (the same errno where they fail) and leave
//! the same tree. It checks the model against Linux's own semantics, and
//! the host backend against the model.

use fsapi::testing::{apply, dirs, files, tree, Op};
use fsapi::{HostFs, ModelFs};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_model_and_a_kernel_file_system_agree(numbers in prop::collection::vec(any::<[u16; 6]>(), 1..60)) {
        let ops: Vec<Op> = numbers.into_iter().map(Op::decode).collect();
        let dir = tempfile::tempdir().unwrap();
        let host = HostFs::new(dir.path()).unwrap();
        let model = ModelFs::new();
        for op in &ops {
            let (d, f) = (dirs(&model), files(&model));
            let on_model = apply(&model, op, &d, &f);
            let on_host = apply(&host, op, &d, &f);
            prop_assert_eq!(on_model, on_host, "{:?}", op);
        }
        prop_assert_eq!(tree(&model), tree(&host));
    }
}
