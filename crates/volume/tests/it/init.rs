//! A RAID-5 plex created on drives that held data starts initializing: it
//! refuses I/O until init builds its parity, after which no acknowledged
//! write is lost to a drive failure.

use std::collections::HashMap;
use std::sync::Arc;

use device::Device;
use volume::{assemble, create, parse, State, VolumeSet};

use crate::common::*;

type Drives = HashMap<String, Arc<dyn Device>>;

/// Drives whose every byte is a pattern, as a reused disk's would be.
fn used_drives(count: usize) -> Drives {
    used_drives_of(count, MIB)
}

fn used_drives_of(count: usize, size_bytes: u64) -> Drives {
    let drives = drives_for(count, size_bytes);
    for (i, dev) in drives.values().enumerate() {
        dev.write_at(&pattern(size_bytes as usize, 11 + i as u64), 0).unwrap();
    }
    drives
}

fn held_data(_drive: &str, _offset: u64, _len: u64) -> bool {
    false
}

fn created_on_used_drives(drives: &Drives) -> VolumeSet {
    create(&parse(&single_plex("raid5 8k", 4, "0")).unwrap(), drives, &held_data).unwrap()
}

fn all(drives: &Drives) -> Vec<Arc<dyn Device>> {
    let mut names: Vec<&String> = drives.keys().collect();
    names.sort();
    names.into_iter().map(|n| Arc::clone(&drives[n])).collect()
}

#[test]
fn raid5_on_drives_that_held_data_starts_initializing() {
    let set = created_on_used_drives(&used_drives(4));
    assert_eq!(set.volume("v").unwrap().state("v.p0"), Some(State::Initializing));
}

#[test]
fn raid5_on_zeroed_drives_starts_up() {
    let set = create(&parse(&single_plex("raid5 8k", 4, "0")).unwrap(), &drives_for(4, MIB), &fresh).unwrap();
    assert_eq!(set.volume("v").unwrap().state("v.p0"), Some(State::Up));
}

#[test]
fn initializing_survives_reassembly() {
    let drives = used_drives(4);
    drop(created_on_used_drives(&drives));
    let again = assemble(&all(&drives)).unwrap();
    assert_eq!(again.volume("v").unwrap().state("v.p0"), Some(State::Initializing));
}

#[test]
fn a_write_to_an_initializing_plex_is_refused_naming_init() {
    let set = created_on_used_drives(&used_drives(4));
    let err = set.volume("v").unwrap().write_at(&[1; 4096], 0).unwrap_err();
    assert!(err.to_string().contains("iolab volume init v.p0"), "{err}");
}

#[test]
fn after_init_no_acknowledged_write_is_lost_to_a_drive_failure() {
    let drives = used_drives(4);
    let set = created_on_used_drives(&drives);
    set.init("v", &mut |_, _| {}).unwrap();
    let v = set.volume("v").unwrap();
    let mut model = vec![0; v.size_bytes() as usize];
    v.read_at(&mut model, 0).unwrap();
    for i in 0..64u64 {
        let (offset, data) = ((i * 37 % 300) * 4096, pattern(4096, i));
        v.write_at(&data, offset).unwrap();
        model[offset as usize..][..4096].copy_from_slice(&data);
    }
    v.set_state("d1", State::Down).unwrap();
    let mut back = vec![0; model.len()];
    v.read_at(&mut back, 0).unwrap();
    assert!(back == model, "every acknowledged byte reads back, rebuilt from parity where on d1");
}

#[test]
fn init_reports_progress_to_the_end() {
    let set = created_on_used_drives(&used_drives(4));
    let mut last = (0, 1);
    set.init("v.p0", &mut |done, total| last = (done, total)).unwrap();
    assert_eq!(last.0, last.1);
    assert_eq!(last.1, set.volume("v").unwrap().size_bytes());
}

#[test]
fn interrupted_init_resumes_where_it_stopped() {
    let drives = used_drives(4);
    let set = created_on_used_drives(&drives);
    let v = set.volume("v").unwrap();
    let mut steps = 0;
    let stop = v.init_with("v.p0", &mut |_, _| {
        steps += 1;
        if steps == 3 {
            return Err(volume::VolumeError::Metadata("interrupted".into()));
        }
        Ok(())
    });
    assert!(stop.is_err());
    set.save().unwrap();
    drop((v, set));
    let again = assemble(&all(&drives)).unwrap();
    let v = again.volume("v").unwrap();
    let progress = v.revive_progress();
    assert!(progress.len() == 1 && progress[0].1 > 0, "{progress:?}");
    let mut resumed_from = None;
    v.init_with("v.p0", &mut |done, _| {
        resumed_from.get_or_insert(done);
        Ok(())
    })
    .unwrap();
    assert!(resumed_from > Some(progress[0].1), "the parity build skipped rows already built");
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
}

#[test]
fn init_of_a_subdisk_is_refused() {
    let set = created_on_used_drives(&used_drives(4));
    let err = set.init("v.p0.s1", &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("init takes a plex or a volume"), "{err}");
}

#[test]
fn revive_of_an_initializing_plex_names_init() {
    let set = created_on_used_drives(&used_drives(4));
    let err = set.revive("v.p0").unwrap_err();
    assert!(err.to_string().contains("iolab volume init v.p0"), "{err}");
}

#[test]
fn init_of_a_plex_in_a_mirror_copies_the_other_plex() {
    let drives = used_drives(4);
    let text = "drive d0 device a\ndrive d1 device b\ndrive d2 device c\ndrive d3 device d\nvolume v\n\
                plex org concat\nsd length 300k drive d0\n\
                plex org raid5 8k\nsd length 150k drive d1\nsd length 150k drive d2\nsd length 150k drive d3\n";
    let set = create(&parse(text).unwrap(), &drives, &held_data).unwrap();
    let v = set.volume("v").unwrap();
    let data = pattern(v.size_bytes() as usize, 21);
    v.write_at(&data, 0).unwrap();
    set.init("v.p1", &mut |_, _| {}).unwrap();
    v.set_state("d0", State::Down).unwrap();
    v.set_state("d2", State::Down).unwrap();
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 0).unwrap();
    assert!(back == data, "the RAID-5 plex holds what the concat plex took, and its parity is right");
}

#[test]
fn init_progress_is_saved_only_after_the_parity_below_it_is_flushed() {
    let recording = device::Recording::new();
    // 8 MiB of plex: more steps than a save's interval.
    let drives: Drives = used_drives_of(4, 3 * MIB)
        .into_iter()
        .enumerate()
        .map(|(i, (name, dev))| {
            let recorded: Arc<dyn Device> = Arc::new(device::RecordingDevice::new(dev, i, recording.clone()));
            (name, recorded)
        })
        .collect();
    let set = created_on_used_drives(&drives);
    recording.mark(1);
    set.init("v.p0", &mut |_, _| {}).unwrap();
    let events = recording.events();
    let start = events.iter().position(|e| matches!(e, device::Event::Mark(1))).unwrap();
    let mut unflushed = [false; 4];
    let mut saves = 0;
    for event in &events[start..] {
        match event {
            device::Event::Write { device, offset, .. } if *offset >= volume::DATA_START_BYTES => {
                unflushed[*device] = true
            }
            device::Event::Write { offset, .. } if *offset < volume::STATS_AREA_BYTES_AT => {
                assert_eq!(unflushed, [false; 4], "a configuration vouching for parity not yet durable");
                saves += 1;
            }
            device::Event::Flush { device } => unflushed[*device] = false,
            _ => {}
        }
    }
    assert!(saves > 2 * 4, "progress was saved during the init, not only at its end");
}
