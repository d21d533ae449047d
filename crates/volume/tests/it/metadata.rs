use std::sync::Arc;

use device::Device;
use volume::{assemble, create, parse, State, CONFIG_COPY_BYTES, HEADER_BYTES};

use crate::common::*;

fn all(drives: &std::collections::HashMap<String, Arc<dyn Device>>, count: usize) -> Vec<Arc<dyn Device>> {
    (0..count).map(|i| Arc::clone(&drives[&format!("d{i}")])).collect()
}

fn raid5_set() -> (std::collections::HashMap<String, Arc<dyn Device>>, volume::VolumeSet) {
    let drives = drives_for(4, MIB);
    let set = create(&parse(&single_plex("raid5 7s", 4, "0")).unwrap(), &drives, &fresh).unwrap();
    (drives, set)
}

#[test]
fn header_starts_with_magic() {
    let (drives, _set) = raid5_set();
    let mut head = vec![0; 512];
    drives["d2"].read_at(&mut head, 0).unwrap();
    assert_eq!(&head[..8], device::signature::IOLAB_VOLUME_MAGIC);
}

#[test]
fn reassembled_volume_reads_data_written_before() {
    let (drives, set) = raid5_set();
    let data = pattern(20_000 / 512 * 512, 4);
    set.volume("v").unwrap().write_at(&data, 4096).unwrap();
    let again = assemble(&all(&drives, 4)).unwrap();
    let v = again.volume("v").unwrap();
    let mut back = vec![0; data.len()];
    v.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, data);
    assert_eq!(v.size_bytes(), set.volume("v").unwrap().size_bytes());
}

#[test]
fn reassembly_takes_drives_in_any_order() {
    let (drives, set) = raid5_set();
    let mut devs = all(&drives, 4);
    devs.reverse();
    assert_eq!(assemble(&devs).unwrap().config_text(), set.config_text());
}

#[test]
fn state_change_survives_reassembly() {
    let (drives, set) = raid5_set();
    set.set_state("d1", State::Down).unwrap();
    let again = assemble(&all(&drives, 4)).unwrap();
    assert_eq!(again.volume("v").unwrap().state("d1"), Some(State::Down));
}

#[test]
fn corrupted_newest_copy_falls_back_to_previous() {
    let (drives, set) = raid5_set();
    let before = set.generation();
    set.set_state("v.p0.s2", State::Stale).unwrap();
    let newest_slot = HEADER_BYTES + (set.generation() % 2) * CONFIG_COPY_BYTES;
    for dev in all(&drives, 4) {
        // Flip one byte of the configuration text: only the checksum can tell.
        let mut sector = vec![0; 512];
        dev.read_at(&mut sector, newest_slot).unwrap();
        sector[100] ^= 0x01;
        dev.write_at(&sector, newest_slot).unwrap();
    }
    let again = assemble(&all(&drives, 4)).unwrap();
    assert_eq!(again.generation(), before);
    assert_eq!(again.volume("v").unwrap().state("v.p0.s2"), Some(State::Up));
}

#[test]
fn drives_from_different_sets_refused() {
    let (first, _a) = raid5_set();
    let (second, _b) = raid5_set();
    let mut devs = all(&first, 3);
    devs.push(Arc::clone(&second["d3"]));
    let err = assemble(&devs).unwrap_err();
    assert!(err.to_string().contains("different volume set"), "{err}");
}

#[test]
fn version_1_header_refused_with_how_to_recreate() {
    let (drives, _set) = raid5_set();
    for drive in drives.values() {
        let mut header = vec![0; 4096];
        drive.read_at(&mut header, 0).unwrap();
        header[8..12].copy_from_slice(&1u32.to_le_bytes());
        drive.write_at(&header, 0).unwrap();
    }
    let err = assemble(&all(&drives, 4)).unwrap_err();
    assert!(err.to_string().contains("version 1 had no statistics area"), "{err}");
}

#[test]
fn blank_drive_refused() {
    let drives = drives_for(1, MIB);
    let err = assemble(&all(&drives, 1)).unwrap_err();
    assert!(err.to_string().contains("IOLABVOL"), "{err}");
}

#[test]
fn config_text_round_trips_through_parse() {
    let (_drives, set) = raid5_set();
    let text = set.config_text();
    let config = parse(&text).unwrap();
    assert_eq!(config.volumes[0].plexes[0].subdisks[0].drive_offset_bytes, Some(volume::DATA_START_BYTES));
}

#[test]
fn revive_through_set_is_recorded() {
    let (drives, set) = raid5_set();
    set.set_state("d1", State::Down).unwrap();
    set.revive("d1").unwrap();
    let again = assemble(&all(&drives, 4)).unwrap();
    assert_eq!(again.volume("v").unwrap().state("v.p0.s1"), Some(State::Up));
}

#[test]
fn aligned_only_drives_create_and_assemble() {
    let drives = aligned_drives(3, MIB);
    let set = create(&parse(&single_plex("raid5 8k", 3, "0")).unwrap(), &drives, &fresh).unwrap();
    let again = assemble(&all(&drives, 3)).unwrap();
    assert_eq!(again.config_text(), set.config_text());
}

#[test]
fn interrupted_revive_resumes_after_reassembly() {
    let drives = drives_for(3, MIB);
    let set = create(&parse(&single_plex("raid5 8k", 3, "0")).unwrap(), &drives, &fresh).unwrap();
    let v = set.volume("v").unwrap();
    let size = v.size_bytes() as usize;
    let mut model = pattern(size, 1);
    v.write_at(&model, 0).unwrap();
    set.set_state("d1", State::Down).unwrap();
    let write = |v: &volume::Volume, model: &mut Vec<u8>, offset: usize, seed: u64| {
        let data = pattern(8192, seed);
        v.write_at(&data, offset as u64).unwrap();
        model[offset..offset + 8192].copy_from_slice(&data);
    };
    write(&v, &mut model, 100 * 1024, 2);
    let mut steps = 0;
    let stop = v.revive_with("d1", &mut |_, _| {
        steps += 1;
        if steps == 40 {
            return Err(volume::VolumeError::Metadata("interrupted".into()));
        }
        Ok(())
    });
    assert!(stop.is_err());
    set.save().unwrap();
    drop(set);

    let again = assemble(&all(&drives, 3)).unwrap();
    let v = again.volume("v").unwrap();
    assert_eq!(v.revive_progress(), vec![("v.p0.s1".to_string(), 40 * 8192)]);
    write(&v, &mut model, 16 * 1024, 3); // below the revive pointer
    write(&v, &mut model, size - 16 * 1024, 4); // above it
    let mut resumed = 0u64;
    v.revive_with("d1", &mut |_, _| {
        resumed += 1;
        Ok(())
    })
    .unwrap();
    let rows = v.report().plexes[0].size_bytes / (2 * 8192);
    assert_eq!(resumed, rows - 40);
    v.set_state("d0", State::Down).unwrap();
    let mut back = vec![0; size];
    v.read_at(&mut back, 0).unwrap();
    assert_eq!(back, model);
}

#[test]
fn create_refuses_a_configuration_with_no_volume() {
    let drives = drives_for(2, MIB);
    let config = parse("# only a comment\n").unwrap();
    let err = create(&config, &drives, &fresh).unwrap_err();
    assert!(err.to_string().contains("nothing to create"), "{err}");
}

#[test]
fn a_create_that_fails_writing_leaves_every_drive_as_it_was() {
    let mems: Vec<Arc<device::MemDevice>> = (0..3)
        .map(|i| {
            Arc::new(device::MemDevice::from_bytes(format!("d{i}"), &pattern(MIB as usize, i), 512).unwrap())
        })
        .collect();
    let mut drives: std::collections::HashMap<String, Arc<dyn Device>> =
        mems.iter().enumerate().map(|(i, m)| (format!("d{i}"), Arc::clone(m) as Arc<dyn Device>)).collect();
    // d2's third write fails: its header and configuration generation 1 were written.
    let fault = device::Fault::Nth { op: device::Op::Write, n: 3 };
    drives.insert("d2".into(), Arc::new(device::FaultyDevice::new(Arc::clone(&mems[2]) as _, vec![fault])));
    assert!(create(&parse(&single_plex("raid5 8k", 3, "0")).unwrap(), &drives, &fresh).is_err());
    for (i, mem) in mems.iter().enumerate() {
        assert!(mem.to_vec() == pattern(MIB as usize, i as u64), "drive d{i} changed");
    }
}
