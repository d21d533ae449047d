//! Assembly with drives missing: degraded RAID-5 and mirrors keep
//! working, two lost RAID-5 subdisks take the plex down.

use std::collections::HashMap;
use std::sync::Arc;

use device::Device;
use volume::{assemble, create, parse, State};

use crate::common::*;

type Drives = HashMap<String, Arc<dyn Device>>;

fn except(drives: &Drives, missing: &[&str]) -> Vec<Arc<dyn Device>> {
    let mut names: Vec<&String> = drives.keys().filter(|n| !missing.contains(&n.as_str())).collect();
    names.sort();
    names.into_iter().map(|n| Arc::clone(&drives[n])).collect()
}

/// A 4-drive RAID-5 filled with a pattern; returns the drives and the data.
fn filled_raid5() -> (Drives, Vec<u8>) {
    let drives = drives_for(4, MIB);
    let set = create(&parse(&single_plex("raid5 8k", 4, "0")).unwrap(), &drives, &fresh).unwrap();
    let v = set.volume("v").unwrap();
    let data = pattern(v.size_bytes() as usize, 9);
    v.write_at(&data, 0).unwrap();
    (drives, data)
}

#[test]
fn raid5_with_a_drive_missing_reads_every_block() {
    let (drives, data) = filled_raid5();
    let set = assemble(&except(&drives, &["d2"])).unwrap();
    let v = set.volume("v").unwrap();
    let mut back = vec![0; data.len()];
    for (i, block) in back.chunks_mut(4096).enumerate() {
        v.read_at(block, i as u64 * 4096).unwrap();
    }
    assert!(back == data, "a block read back differs");
}

#[test]
fn missing_drive_is_named_and_down() {
    let (drives, _) = filled_raid5();
    let set = assemble(&except(&drives, &["d2"])).unwrap();
    assert_eq!(set.missing_drives(), ["d2".to_string()]);
    assert_eq!(set.volume("v").unwrap().state("d2"), Some(State::Down));
    assert!(set.warnings().iter().any(|w| w.contains("drive 'd2' is missing")), "{:?}", set.warnings());
}

#[test]
fn report_marks_only_the_missing_drive_missing() {
    let (drives, _) = filled_raid5();
    let set = assemble(&except(&drives, &["d2"])).unwrap();
    let missing: Vec<String> =
        set.volume("v").unwrap().report().drives.into_iter().filter(|d| d.missing).map(|d| d.name).collect();
    assert_eq!(missing, ["d2"]);
}

#[test]
fn degraded_writes_read_back_after_the_drive_returns_stale() {
    let (drives, mut data) = filled_raid5();
    let set = assemble(&except(&drives, &["d1"])).unwrap();
    set.save().unwrap();
    let new = pattern(64 * 1024, 3);
    set.volume("v").unwrap().write_at(&new, 8192).unwrap();
    data[8192..8192 + new.len()].copy_from_slice(&new);
    drop(set);
    // d1 is back but missed the writes: the remaining drives outvote it.
    let again = assemble(&except(&drives, &[])).unwrap();
    let v = again.volume("v").unwrap();
    assert_eq!(v.state("v.p0.s1"), Some(State::Stale));
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 0).unwrap();
    assert!(back == data, "degraded data differs");
}

#[test]
fn configuration_changes_skip_the_missing_drive() {
    let (drives, _) = filled_raid5();
    let mut before = vec![0; volume::DATA_START_BYTES as usize];
    drives["d3"].read_at(&mut before, 0).unwrap();
    let set = assemble(&except(&drives, &["d3"])).unwrap();
    set.save().unwrap();
    set.save_stats().unwrap();
    let mut after = vec![0; before.len()];
    drives["d3"].read_at(&mut after, 0).unwrap();
    assert!(before == after, "the missing drive's metadata changed");
}

#[test]
fn missing_drive_cannot_be_set_up() {
    let (drives, _) = filled_raid5();
    let set = assemble(&except(&drives, &["d3"])).unwrap();
    let err = set.set_state("d3", State::Up).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn two_missing_drives_take_the_raid5_plex_down() {
    let (drives, _) = filled_raid5();
    let set = assemble(&except(&drives, &["d1", "d3"])).unwrap();
    let v = set.volume("v").unwrap();
    assert_eq!(v.state("v.p0"), Some(State::Down));
    let err = v.read_at(&mut [0; 4096], 0).unwrap_err();
    assert!(err.to_string().contains("v.p0 down"), "{err}");
}

#[test]
fn two_missing_drives_refuse_writes() {
    let (drives, _) = filled_raid5();
    let set = assemble(&except(&drives, &["d0", "d2"])).unwrap();
    assert!(set.volume("v").unwrap().write_at(&[1; 4096], 0).is_err());
}

#[test]
fn mirror_with_a_drive_missing_reads_from_the_other_plex() {
    let drives = mem_drives(&["a", "b"], MIB);
    let text = "drive a device a\ndrive b device b\nvolume m\nplex org concat\nsd length 0 drive a\n\
                plex org concat\nsd length 0 drive b\n";
    let set = create(&parse(text).unwrap(), &drives, &fresh).unwrap();
    let data = pattern(64 * 1024, 5);
    set.volume("m").unwrap().write_at(&data, 4096).unwrap();
    let again = assemble(&[Arc::clone(&drives["b"])]).unwrap();
    let mut back = vec![0; data.len()];
    again.volume("m").unwrap().read_at(&mut back, 4096).unwrap();
    assert_eq!(back, data);
}
