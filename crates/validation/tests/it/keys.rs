//! The key stores: a map in a mapped file behaves as one in memory.

use proptest::prelude::*;
use validation::{KeyBytes, KeyMap, KeyMapChoice, KeyPlace, KEY_MAP_MEMORY_BYTES_MAX};

const BLOCKS: u64 = 10_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same sequence of sets and gets gives the same answers from a
    /// file-backed map and an in-memory one.
    #[test]
    fn file_backed_map_matches_memory(ops in prop::collection::vec((0..BLOCKS, any::<Option<u8>>()), 1..400)) {
        let dir = tempfile::tempdir().unwrap();
        let file = KeyBytes::zeroed(BLOCKS, &KeyPlace::File(dir.path().into())).unwrap();
        prop_assert!(file.is_file());
        let file = KeyMap::with_bytes(file, 4096);
        let memory = KeyMap::new(BLOCKS, 4096);
        for (block, set) in ops {
            match set {
                Some(key) => {
                    file.set(block, key);
                    memory.set(block, key);
                }
                None => prop_assert_eq!(file.get(block), memory.get(block)),
            }
        }
        for block in 0..BLOCKS {
            prop_assert_eq!(file.get(block), memory.get(block));
        }
    }
}

#[test]
fn scratch_file_leaves_nothing_in_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = KeyBytes::zeroed(1 << 20, &KeyPlace::File(dir.path().into())).unwrap();
    keys[12345] = 7;
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(keys[12345], 7);
}

#[test]
fn missing_directory_is_an_error_naming_it() {
    let err = KeyBytes::zeroed(4096, &KeyPlace::File("/nonexistent/x".into())).unwrap_err();
    assert!(err.to_string().starts_with("/nonexistent/x: cannot create"), "{err}");
}

#[test]
fn auto_goes_to_a_file_only_above_the_memory_bound() {
    let dir = std::path::Path::new("/d");
    assert_eq!(KeyMapChoice::Auto.place(KEY_MAP_MEMORY_BYTES_MAX, dir), KeyPlace::Memory);
    assert_eq!(KeyMapChoice::Auto.place(KEY_MAP_MEMORY_BYTES_MAX + 1, dir), KeyPlace::File(dir.into()));
    assert_eq!(KeyMapChoice::Memory.place(u64::MAX, dir), KeyPlace::Memory);
}

/// Evicting a mapped range from memory keeps what it holds.
#[test]
fn evicted_keys_come_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = KeyBytes::zeroed(3 << 20, &KeyPlace::File(dir.path().into())).unwrap();
    for (i, k) in keys.iter_mut().enumerate() {
        *k = (i % 253) as u8;
    }
    keys.evict(5..(2 << 20) + 7);
    assert!(keys.iter().enumerate().all(|(i, &k)| k == (i % 253) as u8));
}
