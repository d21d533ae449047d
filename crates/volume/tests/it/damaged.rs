//! Drives whose header cannot be used: down as a missing drive is, the
//! set degraded where its organisation allows, named in a warning, and
//! left as they are until revived (which rewrites their metadata).

use std::collections::HashMap;
use std::sync::Arc;

use device::{Device, MemDevice};
use volume::{assemble, assemble_given, create, parse, GivenDrive, State, DATA_START_BYTES};

use crate::common::*;

type Drives = HashMap<String, Arc<dyn Device>>;

fn in_order(drives: &Drives) -> Vec<Arc<dyn Device>> {
    (0..drives.len()).map(|i| Arc::clone(&drives[&format!("d{i}")])).collect()
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

fn metadata_area(dev: &dyn Device) -> Vec<u8> {
    let mut area = vec![0; DATA_START_BYTES as usize];
    dev.read_at(&mut area, 0).unwrap();
    area
}

/// Flips one bit of byte `at` of a drive.
fn flip_byte(dev: &dyn Device, at: u64) {
    let mut sector = vec![0; 512];
    let start = at / 512 * 512;
    dev.read_at(&mut sector, start).unwrap();
    sector[(at - start) as usize] ^= 0x01;
    dev.write_at(&sector, start).unwrap();
}

fn read_all(set: &volume::VolumeSet) -> Vec<u8> {
    let v = set.volume("v").unwrap();
    let mut back = vec![0; v.size_bytes() as usize];
    v.read_at(&mut back, 0).unwrap();
    back
}

#[test]
fn one_damaged_byte_in_a_raid5_drive_header_runs_degraded_and_names_the_drive() {
    let (drives, data) = filled_raid5();
    flip_byte(drives["d2"].as_ref(), 200);
    let set = assemble(&in_order(&drives)).unwrap();
    assert_eq!(set.volume("v").unwrap().state("d2"), Some(State::Down));
    assert_eq!(set.drives_down_at_assembly(), ["d2".to_string()]);
    let said = set.warnings().join("\n");
    assert!(said.contains("drive 'd2' is down") && said.contains("byte 12 (crc32c)"), "{said}");
    assert!(read_all(&set) == data, "degraded reads differ");
}

#[test]
fn writes_on_a_drive_with_a_damaged_header_go_degraded_and_leave_it_as_it_was() {
    let (drives, _) = filled_raid5();
    flip_byte(drives["d1"].as_ref(), 200);
    let before = metadata_area(drives["d1"].as_ref());
    let set = assemble(&in_order(&drives)).unwrap();
    set.save().unwrap();
    set.volume("v").unwrap().write_at(&pattern(64 * 1024, 3), 8192).unwrap();
    set.save().unwrap();
    set.save_stats().unwrap();
    assert!(metadata_area(drives["d1"].as_ref()) == before, "the damaged drive's metadata was rewritten");
}

#[test]
fn reviving_a_drive_with_a_damaged_header_rewrites_it_and_restores_redundancy() {
    let (drives, mut data) = filled_raid5();
    flip_byte(drives["d3"].as_ref(), 200);
    let set = assemble(&in_order(&drives)).unwrap();
    let new = pattern(64 * 1024, 5);
    set.volume("v").unwrap().write_at(&new, 4096).unwrap();
    data[4096..4096 + new.len()].copy_from_slice(&new);
    set.revive("d3").unwrap();
    drop(set);
    let again = assemble(&in_order(&drives)).unwrap();
    assert!(again.warnings().is_empty(), "{:?}", again.warnings());
    let v = again.volume("v").unwrap();
    assert!(v.states_not_up().is_empty(), "{:?}", v.states_not_up());
    assert!(v.check_parity().unwrap().iter().all(|r| r.rows_mismatched == 0));
    assert!(read_all(&again) == data);
}

#[test]
fn a_zeroed_magic_with_configuration_copies_behind_it_is_a_damaged_drive() {
    let (drives, data) = filled_raid5();
    drives["d0"].write_at(&[0; 512], 0).unwrap();
    let set = assemble(&in_order(&drives)).unwrap();
    assert_eq!(set.volume("v").unwrap().state("d0"), Some(State::Down));
    assert!(set.warnings().join("\n").contains("(magic): reads zeros"), "{:?}", set.warnings());
    assert!(read_all(&set) == data);
}

#[test]
fn a_blank_replacement_named_by_the_caller_is_down_and_revived() {
    let (mut drives, data) = filled_raid5();
    let blank: Arc<dyn Device> = Arc::new(MemDevice::with_sector("new-d1", MIB, 512).unwrap());
    drives.insert("d1".into(), Arc::clone(&blank));
    let given: Vec<GivenDrive> = (0..4)
        .map(|i| GivenDrive {
            device: Arc::clone(&drives[&format!("d{i}")]),
            expected: Some(format!("d{i}")),
        })
        .collect();
    let set = assemble_given(&given).unwrap();
    assert_eq!(set.volume("v").unwrap().state("d1"), Some(State::Down));
    set.revive("d1").unwrap();
    drop(set);
    let again = assemble(&in_order(&drives)).unwrap();
    assert!(again.warnings().is_empty(), "{:?}", again.warnings());
    assert!(read_all(&again) == data);
}

#[test]
fn a_device_holding_no_volume_metadata_is_refused() {
    let (mut drives, _) = filled_raid5();
    let stranger = MemDevice::with_sector("stranger", MIB, 512).unwrap();
    stranger.write_at(&pattern(DATA_START_BYTES as usize, 1), 0).unwrap();
    drives.insert("d2".into(), Arc::new(stranger));
    let err = assemble(&in_order(&drives)).unwrap_err();
    assert!(err.to_string().contains("stranger: holds no iolab volume metadata"), "{err}");
}

#[test]
fn two_damaged_headers_take_the_raid5_plex_down() {
    let (drives, _) = filled_raid5();
    flip_byte(drives["d0"].as_ref(), 300);
    flip_byte(drives["d2"].as_ref(), 300);
    let set = assemble(&in_order(&drives)).unwrap();
    let v = set.volume("v").unwrap();
    assert_eq!(v.state("v.p0"), Some(State::Down));
    let err = v.read_at(&mut [0; 4096], 0).unwrap_err();
    assert!(err.to_string().contains("v.p0 down"), "{err}");
}

#[test]
fn a_mirror_with_a_damaged_header_serves_from_the_other_plex() {
    let drives = mem_drives(&["a", "b"], MIB);
    let text = "drive a device a\ndrive b device b\nvolume m\nplex org concat\nsd length 0 drive a\n\
                plex org concat\nsd length 0 drive b\n";
    let set = create(&parse(text).unwrap(), &drives, &fresh).unwrap();
    let data = pattern(64 * 1024, 5);
    set.volume("m").unwrap().write_at(&data, 4096).unwrap();
    flip_byte(drives["a"].as_ref(), 40);
    let again = assemble(&[Arc::clone(&drives["a"]), Arc::clone(&drives["b"])]).unwrap();
    let m = again.volume("m").unwrap();
    assert_eq!(m.state("a"), Some(State::Down));
    let mut back = vec![0; data.len()];
    m.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, data);
}
