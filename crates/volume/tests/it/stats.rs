//! The statistics record: counters accumulated across assemblies, reset,
//! and damage that is detected and survived.

use std::collections::HashMap;
use std::sync::Arc;

use device::Device;
use volume::{assemble, create, parse, VolumeSet, STATS_AREA_BYTES_AT, STATS_SLOT_BYTES};

use crate::common::*;

type Drives = HashMap<String, Arc<dyn Device>>;

fn all(drives: &Drives) -> Vec<Arc<dyn Device>> {
    let mut names: Vec<&String> = drives.keys().collect();
    names.sort();
    names.into_iter().map(|n| Arc::clone(&drives[n])).collect()
}

fn raid5_drives() -> Drives {
    let drives = drives_for(4, MIB);
    create(&parse(&single_plex("raid5 8k", 4, "0")).unwrap(), &drives, &fresh).unwrap();
    drives
}

/// One "process": assemble, write `writes` blocks of 4 KiB, save counters.
fn session(drives: &Drives, writes: u64) -> VolumeSet {
    let set = assemble(&all(drives)).unwrap();
    let v = set.volume("v").unwrap();
    for i in 0..writes {
        v.write_at(&pattern(4096, i), i * 4096).unwrap();
    }
    set.save_stats().unwrap();
    set
}

fn volume_writes(set: &VolumeSet) -> u64 {
    set.accumulated_reports()[0].stats.writes
}

/// Writes `byte` over both statistics slots of every drive.
fn smash_stats(drives: &Drives, slots: &[u64]) {
    for dev in drives.values() {
        for slot in slots {
            let at = STATS_AREA_BYTES_AT + slot * STATS_SLOT_BYTES + 512;
            let mut sector = vec![0; 512];
            dev.read_at(&mut sector, at).unwrap();
            sector[7] ^= 0x40;
            dev.write_at(&sector, at).unwrap();
        }
    }
}

#[test]
fn counters_accumulate_over_two_assemblies() {
    let drives = raid5_drives();
    session(&drives, 3);
    session(&drives, 5);
    assert_eq!(volume_writes(&assemble(&all(&drives)).unwrap()), 8);
}

#[test]
fn plex_counters_survive_reassembly() {
    let drives = raid5_drives();
    let first = session(&drives, 4);
    let counted = first.volume("v").unwrap().report().plexes[0].counters;
    let again = assemble(&all(&drives)).unwrap();
    assert_eq!(again.accumulated_reports()[0].plexes[0].counters, counted);
}

#[test]
fn saving_twice_in_one_process_does_not_count_twice() {
    let drives = raid5_drives();
    let set = session(&drives, 2);
    set.save_stats().unwrap();
    assert_eq!(volume_writes(&assemble(&all(&drives)).unwrap()), 2);
}

#[test]
fn saving_counters_leaves_the_configuration_generation() {
    let drives = raid5_drives();
    let before = assemble(&all(&drives)).unwrap().generation();
    session(&drives, 2);
    assert_eq!(assemble(&all(&drives)).unwrap().generation(), before);
}

#[test]
fn reset_of_everything_is_persisted() {
    let drives = raid5_drives();
    session(&drives, 3);
    let set = assemble(&all(&drives)).unwrap();
    set.reset_stats(None, false).unwrap();
    let again = assemble(&all(&drives)).unwrap();
    let report = &again.accumulated_reports()[0];
    assert_eq!((report.stats.writes, report.plexes[0].counters.writes), (0, 0));
    assert!(report.drives.iter().all(|d| d.stats.writes == 0), "{report:?}");
}

#[test]
fn reset_of_one_plex_keeps_the_volume_counters() {
    let drives = raid5_drives();
    session(&drives, 3);
    assemble(&all(&drives)).unwrap().reset_stats(Some("v.p0"), false).unwrap();
    let report = &assemble(&all(&drives)).unwrap().accumulated_reports()[0];
    assert_eq!((report.stats.writes, report.plexes[0].counters.writes), (3, 0));
    assert!(report.plexes[0].subdisks[0].stats.writes > 0, "without -r the subdisks keep theirs");
}

#[test]
fn recursive_reset_of_a_plex_clears_its_subdisks() {
    let drives = raid5_drives();
    session(&drives, 3);
    assemble(&all(&drives)).unwrap().reset_stats(Some("v.p0"), true).unwrap();
    let report = &assemble(&all(&drives)).unwrap().accumulated_reports()[0];
    assert!(report.plexes[0].subdisks.iter().all(|sd| sd.stats.writes == 0), "{report:?}");
}

#[test]
fn reset_of_an_unknown_object_is_an_error() {
    let drives = raid5_drives();
    let err = assemble(&all(&drives)).unwrap().reset_stats(Some("nope"), false).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn damaged_newest_record_falls_back_to_the_previous_one() {
    let drives = raid5_drives();
    session(&drives, 3);
    let set = session(&drives, 5);
    drop(set);
    // Sequence numbers: creation wrote 1 and 2, the sessions 3 and 4.
    smash_stats(&drives, &[0]);
    let again = assemble(&all(&drives)).unwrap();
    assert_eq!(volume_writes(&again), 3);
    assert!(again.warnings().iter().any(|w| w.contains("checksum mismatch")), "{:?}", again.warnings());
}

#[test]
fn both_records_damaged_still_assembles_with_zero_counters() {
    let drives = raid5_drives();
    session(&drives, 3);
    smash_stats(&drives, &[0, 1]);
    let again = assemble(&all(&drives)).unwrap();
    assert_eq!(volume_writes(&again), 0);
    assert!(
        again.warnings().iter().any(|w| w.contains("counters start from zero")),
        "{:?}",
        again.warnings()
    );
}

#[test]
fn garbage_over_the_whole_statistics_area_leaves_the_configuration() {
    let drives = raid5_drives();
    let text = assemble(&all(&drives)).unwrap().config_text();
    for dev in drives.values() {
        dev.write_at(&vec![0xa5; 2 * STATS_SLOT_BYTES as usize], STATS_AREA_BYTES_AT).unwrap();
    }
    assert_eq!(assemble(&all(&drives)).unwrap().config_text(), text);
}

#[test]
fn torn_statistics_write_keeps_configuration_and_previous_counters() {
    let drives = raid5_drives();
    session(&drives, 3);
    let before = session(&drives, 5);
    let (text, generation) = (before.config_text(), before.generation());
    drop(before);
    // The next write to each drive (the statistics slot) lands only its first sector.
    let tearing: Vec<Arc<dyn Device>> = all(&drives)
        .into_iter()
        .map(|d| {
            let fault = device::Fault::TearWrite { n: 1, keep_bytes: 512 };
            Arc::new(device::FaultyDevice::new(d, vec![fault])) as Arc<dyn Device>
        })
        .collect();
    // Zeroed counters: the new record differs from the last past its first sector.
    assemble(&tearing).unwrap().reset_stats(None, false).unwrap();
    let again = assemble(&all(&drives)).unwrap();
    assert_eq!((again.config_text(), again.generation()), (text, generation));
    assert_eq!(volume_writes(&again), 8, "the previous record is used");
    assert!(again.warnings().iter().any(|w| w.contains("checksum mismatch")), "{:?}", again.warnings());
}

fn slot_at(slot: u8) -> u64 {
    STATS_AREA_BYTES_AT + u64::from(slot) * STATS_SLOT_BYTES
}

/// Sets `value` (little-endian, its length) at `at` of statistics slot
/// `slot` of every drive and makes the checksum over the record's written
/// body right again: damage no checksum catches.
fn craft_stats(drives: &Drives, slot: u8, at: usize, value: &[u8]) {
    for dev in drives.values() {
        let mut record = vec![0u8; STATS_SLOT_BYTES as usize];
        dev.read_at(&mut record, slot_at(slot)).unwrap();
        let body = u32::from_le_bytes(record[40..44].try_into().unwrap()) as usize;
        record[at..at + value.len()].copy_from_slice(value);
        // The prefix before the entries is 48 bytes.
        codec::Frame::zeroed(12).seal(&[], &mut record[..48 + body]);
        dev.write_at(&record, slot_at(slot)).unwrap();
    }
}

/// A record on every drive with a sequence of 2^64-1 (in its slot's
/// parity): passed over by name, the other slot used, and the next save
/// counts on from it without an overflow.
#[test]
fn a_sequence_at_the_end_of_its_range_is_passed_over_by_name() {
    let drives = raid5_drives();
    session(&drives, 3);
    session(&drives, 5);
    // Creation saved sequences 1 and 2, the sessions 3 and 4: slot 1 holds 3.
    craft_stats(&drives, 1, 32, &u64::MAX.to_le_bytes());
    let set = assemble(&all(&drives)).unwrap();
    let named = format!("statistics slot 1, byte {} (sequence)", slot_at(1) + 32);
    assert!(set.warnings().iter().any(|w| w.contains(&named)), "{:?}", set.warnings());
    assert_eq!(volume_writes(&set), 8, "the record of sequence 4 is used");
    set.save_stats().unwrap();
    assert_eq!(volume_writes(&assemble(&all(&drives)).unwrap()), 8);
}

/// Both records crafted past their bounds on every drive: the set still
/// assembles, its counters from zero, with a warning naming each slot.
#[test]
fn both_records_out_of_bounds_start_the_counters_from_zero() {
    let drives = raid5_drives();
    session(&drives, 3);
    craft_stats(&drives, 1, 32, &u64::MAX.to_le_bytes());
    craft_stats(&drives, 0, 40, &u32::MAX.to_le_bytes());
    let set = assemble(&all(&drives)).unwrap();
    assert_eq!(volume_writes(&set), 0);
    let warnings = set.warnings().join("\n");
    assert!(warnings.contains("(sequence)") && warnings.contains("(body_bytes)"), "{warnings}");
    assert!(warnings.contains("counters start from zero"), "{warnings}");
    set.save_stats().unwrap();
}
