//! A volume's never-written blocks, mapped from its drives' holes, against
//! a model: the complement of what was written through the volume.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use device::{Device, FileDevice, FileOptions};
use proptest::prelude::*;

use crate::common::*;

const BLOCK: u64 = 4096;
const DRIVE_BYTES: u64 = 3 * MIB;

/// Sparse files as drives d0..: 4 KiB holes, as a file system keeps them.
fn file_drives(dir: &tempfile::TempDir, count: usize) -> HashMap<String, Arc<dyn Device>> {
    (0..count)
        .map(|i| {
            let options = FileOptions { create_bytes: Some(DRIVE_BYTES), ..Default::default() };
            let dev: Arc<dyn Device> =
                Arc::new(FileDevice::open(dir.path().join(format!("d{i}")), &options).unwrap());
            (format!("d{i}"), dev)
        })
        .collect()
}

/// The ranges of `0..size` no block of `written` covers.
fn complement(size: u64, written: &[bool]) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for (i, _) in written.iter().enumerate().filter(|(_, w)| !**w) {
        let r = i as u64 * BLOCK..((i as u64 + 1) * BLOCK).min(size);
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

fn check(org: &str, drives: usize, blocks: &[u64]) {
    let dir = tempfile::tempdir().unwrap();
    let vol = open(&single_plex(org, drives, "0"), &file_drives(&dir, drives));
    let size = vol.size_bytes();
    let mut written = vec![false; size.div_ceil(BLOCK) as usize];
    for &b in blocks {
        let i = b % written.len() as u64;
        vol.write_at(&pattern(BLOCK as usize, i), i * BLOCK).unwrap();
        written[i as usize] = true;
    }
    assert_eq!(vol.unwritten(0, size).unwrap().unwrap(), complement(size, &written));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_striped_volume_s_holes_are_what_was_never_written(blocks in prop::collection::vec(any::<u64>(), 0..40)) {
        check("striped 64k", 3, &blocks);
    }

    #[test]
    fn a_concat_volume_s_holes_are_what_was_never_written(blocks in prop::collection::vec(any::<u64>(), 0..40)) {
        check("concat", 3, &blocks);
    }

    #[test]
    fn a_raid5_volume_s_holes_are_what_was_never_written(blocks in prop::collection::vec(any::<u64>(), 0..40)) {
        check("raid5 64k", 3, &blocks);
    }
}

#[test]
fn holes_asked_for_part_of_a_volume_are_clipped_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let vol = open(&single_plex("striped 64k", 2, "0"), &file_drives(&dir, 2));
    assert_eq!(vol.unwritten(100 * KIB, 300 * KIB).unwrap().unwrap(), vec![100 * KIB..300 * KIB]);
}

#[test]
fn a_volume_reports_each_drive_as_its_media() {
    let dir = tempfile::tempdir().unwrap();
    let vol = open(&single_plex("striped 64k", 3, "0"), &file_drives(&dir, 3));
    assert_eq!(vol.media().len(), 3);
}
