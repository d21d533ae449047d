//! Which configuration copy wins when the drives' copies disagree: the
//! layout most drives hold, the newest copy of it; a drive whose copy
//! describes another layout is reported and down until revived.

use std::collections::HashMap;
use std::sync::Arc;

use device::Device;
use volume::{assemble, config_slot_at, create, encode_config_copy, parse, Org, State, VolumeSet};

use crate::common::*;

type Drives = HashMap<String, Arc<dyn Device>>;

fn in_order(drives: &Drives) -> Vec<Arc<dyn Device>> {
    (0..drives.len()).map(|i| Arc::clone(&drives[&format!("d{i}")])).collect()
}

/// A RAID-5 of `count` drives with 8 KiB (16-sector) stripes, filled with
/// a pattern.
fn filled_raid5(count: usize) -> (Drives, VolumeSet, Vec<u8>) {
    let drives = drives_for(count, MIB);
    let set = create(&parse(&single_plex("raid5 8k", count, "0")).unwrap(), &drives, &fresh).unwrap();
    let v = set.volume("v").unwrap();
    let data = pattern(v.size_bytes() as usize, 9);
    v.write_at(&data, 0).unwrap();
    (drives, set, data)
}

/// Writes a checksum-valid copy of `text` as `generation` to `drive`.
fn put_copy(drive: &dyn Device, set_id: &[u8; 16], generation: u64, text: &str) {
    let copy = encode_config_copy(set_id, generation, text).unwrap();
    drive.write_at(&copy, config_slot_at((generation % 2) as u8)).unwrap();
}

fn stripe_bytes(set: &VolumeSet) -> Option<u64> {
    set.volume("v").unwrap().report().plexes[0].org.stripe_bytes()
}

#[test]
fn a_newer_copy_with_a_one_sector_stripe_on_one_drive_is_ignored_and_reported() {
    let (drives, set, data) = filled_raid5(4);
    let bogus = set.config_text().replace("raid5 16s", "raid5 1s");
    put_copy(drives["d2"].as_ref(), &set.set_id, set.generation() + 1, &bogus);
    drop(set);
    let again = assemble(&in_order(&drives)).unwrap();
    assert_eq!(stripe_bytes(&again), Some(8192), "the layout is the majority's");
    assert_eq!(again.volume("v").unwrap().state("d2"), Some(State::Down));
    let said = again.warnings().join("\n");
    assert!(said.contains("drive 'd2' is down: its configuration copy"), "{said}");
    assert!(said.contains("512-byte stripes where the others have") && said.contains("8192-byte"), "{said}");
    let v = again.volume("v").unwrap();
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 0).unwrap();
    assert!(back == data, "data read through the majority's layout differs");
}

#[test]
fn a_disagreeing_drive_revived_holds_the_majority_s_copies_again() {
    let (drives, set, data) = filled_raid5(4);
    let bogus = set.config_text().replace("raid5 16s", "raid5 1s");
    // Far ahead, in the slot of the set's current generation: one save
    // after the revive would leave it there, to outvote the set's copy on
    // this drive at the next assembly.
    put_copy(drives["d1"].as_ref(), &set.set_id, set.generation() + 1000, &bogus);
    drop(set);
    let again = assemble(&in_order(&drives)).unwrap();
    again.volume("v").unwrap().write_at(&pattern(8192, 4), 0).unwrap();
    again.revive("d1").unwrap();
    drop(again);
    let last = assemble(&in_order(&drives)).unwrap();
    assert!(last.warnings().is_empty(), "{:?}", last.warnings());
    let v = last.volume("v").unwrap();
    assert!(v.check_parity().unwrap().iter().all(|r| r.rows_mismatched == 0));
    let mut back = vec![0; 8192];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, pattern(8192, 4));
    let mut rest = vec![0; data.len() - 8192];
    v.read_at(&mut rest, 8192).unwrap();
    assert!(rest == data[8192..], "data past the write differs");
}

#[test]
fn a_save_torn_between_drives_moves_forward_to_its_newer_copy() {
    let (drives, set, _) = filled_raid5(4);
    // Generation g+1 (v.p0.s3 stale) reached d0 only before the crash.
    let newer = format!("{}state v.p0.s3 stale\n", set.config_text());
    put_copy(drives["d0"].as_ref(), &set.set_id, set.generation() + 1, &newer);
    let generation = set.generation() + 1;
    drop(set);
    let again = assemble(&in_order(&drives)).unwrap();
    assert_eq!(again.generation(), generation);
    assert_eq!(again.volume("v").unwrap().state("v.p0.s3"), Some(State::Stale));
    assert!(again.drives_down_at_assembly().is_empty());
}

#[test]
fn two_layouts_on_as_many_drives_at_one_generation_are_refused() {
    let (drives, set, _) = filled_raid5(4);
    let bogus = set.config_text().replace("raid5 16s", "raid5 8s");
    for d in ["d2", "d3"] {
        put_copy(drives[d].as_ref(), &set.set_id, set.generation() + 1, &bogus);
    }
    for d in ["d0", "d1"] {
        put_copy(drives[d].as_ref(), &set.set_id, set.generation() + 1, &set.config_text());
    }
    drop(set);
    let err = assemble(&in_order(&drives)).unwrap_err();
    assert!(err.to_string().contains("nothing decides between them"), "{err}");
}

#[test]
fn without_a_majority_the_newest_layout_wins_and_says_so() {
    let drives = mem_drives(&["a", "b"], MIB);
    let text = "drive a device a\ndrive b device b\nvolume m\nplex org striped 16s\nsd length 512s drive a\n\
                sd length 512s drive b\n";
    let set = create(&parse(text).unwrap(), &drives, &fresh).unwrap();
    let other = set.config_text().replace("striped 16s", "striped 32s");
    put_copy(drives["b"].as_ref(), &set.set_id, set.generation() + 1, &other);
    drop(set);
    let again = assemble(&[Arc::clone(&drives["a"]), Arc::clone(&drives["b"])]).unwrap();
    assert!(matches!(
        again.volume("m").unwrap().report().plexes[0].org,
        Org::Striped { stripe_bytes: 16384 }
    ));
    assert!(
        again.warnings().iter().any(|w| w.contains("no layout is held by a majority")),
        "{:?}",
        again.warnings()
    );
    assert_eq!(again.drives_down_at_assembly(), ["a".to_string()]);
}

#[test]
fn a_disagreeing_drive_set_up_gets_both_of_its_slots_rewritten() {
    let (drives, set, _) = filled_raid5(4);
    let bogus = set.config_text().replace("raid5 16s", "raid5 1s");
    // In the slot of the set's current generation: the one save `setstate
    // up` makes goes to the other slot, and would leave it to outvote the
    // set's copy on this drive at the next assembly.
    put_copy(drives["d3"].as_ref(), &set.set_id, set.generation() + 1000, &bogus);
    drop(set);
    let again = assemble(&in_order(&drives)).unwrap();
    again.set_state("d3", State::Up).unwrap();
    drop(again);
    let last = assemble(&in_order(&drives)).unwrap();
    assert!(last.warnings().is_empty(), "{:?}", last.warnings());
}
