//! A volume's flush reaches every drive even after one fails; a failed
//! drive goes down, and the volume is poisoned when no other plex holds
//! its data.

use std::sync::Arc;

use device::{Device, DeviceError, Fault, FaultyDevice, Op};
use volume::State;

use crate::common::*;

const MIRROR: &str = "drive a device A\ndrive b device B\nvolume m\n\
                      plex org concat\nsd length 1m drive a\nplex org striped 64k\nsd length 512k drive b\n\
                      sd length 512k drive b\n";

/// `names` as memory drives, `failing` wrapped to fail its first flush.
fn drives_failing_flush(names: &[&str], failing: &str) -> std::collections::HashMap<String, Arc<dyn Device>> {
    let mut drives = mem_drives(names, 4 * MIB);
    let fault = Fault::Nth { op: Op::Flush, n: 1 };
    let faulty: Arc<dyn Device> = Arc::new(FaultyDevice::new(Arc::clone(&drives[failing]), vec![fault]));
    drives.insert(failing.to_string(), faulty);
    drives
}

#[test]
fn a_mirror_flush_failure_takes_the_drive_down_and_succeeds() {
    let drives = drives_failing_flush(&["a", "b"], "b");
    let v = open(MIRROR, &drives);
    v.write_at(&pattern(8192, 1), 0).unwrap();
    v.flush().unwrap();
    assert_eq!(v.state("b"), Some(State::Down));
    assert!(v.take_events().iter().any(|e| e.contains("drive 'b' is down")));
}

#[test]
fn a_mirror_keeps_working_after_a_flush_failure() {
    let drives = drives_failing_flush(&["a", "b"], "b");
    let v = open(MIRROR, &drives);
    v.flush().unwrap();
    v.write_at(&pattern(8192, 2), 4096).unwrap();
    v.flush().unwrap();
    let mut back = vec![0; 8192];
    v.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, pattern(8192, 2));
}

#[test]
fn every_drive_is_flushed_even_after_one_fails() {
    let drives = drives_failing_flush(&["a", "b"], "a");
    let v = open(MIRROR, &drives);
    let before = drives["b"].stats().snapshot().flushes;
    v.flush().unwrap();
    assert_eq!(drives["b"].stats().snapshot().flushes, before + 1);
}

#[test]
fn a_flush_failure_with_no_redundancy_fails_and_poisons() {
    let drives = drives_failing_flush(&["d0", "d1"], "d1");
    let v = open(&single_plex("striped 8k", 2, "0"), &drives);
    v.write_at(&pattern(8192, 3), 0).unwrap();
    assert!(matches!(v.flush(), Err(DeviceError::Flush { .. })));
    assert!(matches!(v.write_at(&[0; 4096], 0), Err(DeviceError::Poisoned { .. })));
    assert!(matches!(v.flush(), Err(DeviceError::Poisoned { .. })), "a flush error never disappears");
}

#[test]
fn a_poisoned_volume_says_no_other_plex_holds_the_data() {
    let drives = drives_failing_flush(&["d0", "d1"], "d1");
    let v = open(&single_plex("striped 8k", 2, "0"), &drives);
    v.flush().unwrap_err();
    let err = v.write_at(&[0; 4096], 0).unwrap_err();
    assert!(err.to_string().contains("no other plex holds all the data"), "{err}");
}

#[test]
fn a_raid5_flush_failure_degrades_the_plex_and_succeeds() {
    let drives = drives_failing_flush(&["d0", "d1", "d2"], "d1");
    let v = open(&single_plex("raid5 8k", 3, "0"), &drives);
    let data = pattern(64 * 1024, 4);
    v.write_at(&data, 0).unwrap();
    v.flush().unwrap();
    assert_eq!(v.state("v.p0.s1"), Some(State::Stale));
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
}
