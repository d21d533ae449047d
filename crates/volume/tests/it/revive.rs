use device::Device;
use volume::State;

use crate::common::*;

const MIRROR: &str = "drive a device A\ndrive b device B\nvolume m\n\
                      plex org concat\nsd length 1m drive a\nplex org raid5 8k\nsd length 512k drive b\n\
                      sd length 512k drive b\nsd length 512k drive b\n";

fn read_all(v: &volume::Volume) -> Vec<u8> {
    let mut buf = vec![0; v.size_bytes() as usize];
    v.read_at(&mut buf, 0).unwrap();
    buf
}

#[test]
fn drive_down_takes_its_subdisks_stale() {
    let drives = drives_for(3, MIB);
    let v = open(&single_plex("raid5 8k", 3, "0"), &drives);
    v.set_state("d1", State::Down).unwrap();
    assert_eq!(v.state("v.p0.s1"), Some(State::Stale));
}

#[test]
fn revived_raid5_drive_holds_writes_it_missed() {
    let drives = drives_for(3, MIB);
    let v = open(&single_plex("raid5 8k", 3, "0"), &drives);
    v.write_at(&pattern(v.size_bytes() as usize, 1), 0).unwrap();
    v.set_state("d1", State::Down).unwrap();
    v.write_at(&pattern(64 * 1024, 2), 12 * 1024).unwrap();
    let expected = read_all(&v);
    v.revive("d1").unwrap();
    v.set_state("d0", State::Down).unwrap();
    assert_eq!(read_all(&v), expected);
}

#[test]
fn revived_raid5_subdisk_leaves_parity_consistent() {
    let drives = drives_for(3, MIB);
    let v = open(&single_plex("raid5 8k", 3, "0"), &drives);
    v.write_at(&pattern(v.size_bytes() as usize, 1), 0).unwrap();
    v.set_state("v.p0.s2", State::Stale).unwrap();
    v.write_at(&pattern(20 * 1024, 3), 4096).unwrap();
    v.revive("v.p0.s2").unwrap();
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
}

#[test]
fn revived_mirror_plex_serves_latest_data() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.write_at(&pattern(64 * 1024, 1), 0).unwrap();
    v.set_state("b", State::Down).unwrap();
    v.write_at(&pattern(64 * 1024, 2), 32 * 1024).unwrap();
    let expected = read_all(&v);
    v.revive("b").unwrap();
    assert_eq!(v.state("m.p1"), Some(State::Up));
    v.set_state("a", State::Down).unwrap();
    assert_eq!(read_all(&v), expected);
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
}

#[test]
fn revive_without_source_is_an_error() {
    let drives = drives_for(2, MIB);
    let v = open(&single_plex("striped 8k", 2, "0"), &drives);
    v.set_state("v.p0.s0", State::Stale).unwrap();
    assert!(matches!(v.revive("v.p0.s0"), Err(volume::VolumeError::Invalid { .. })));
}

#[test]
fn failed_revive_leaves_plex_up() {
    let drives = drives_for(2, MIB);
    let v = open(&single_plex("striped 8k", 2, "0"), &drives);
    v.set_state("v.p0.s0", State::Stale).unwrap();
    assert!(v.revive("v.p0.s0").is_err());
    assert_eq!(v.state("v.p0"), Some(State::Up));
}

#[test]
fn init_builds_raid5_parity_from_the_data_it_finds() {
    let drives = drives_for(3, MIB);
    for dev in drives.values() {
        dev.write_at(&pattern(MIB as usize, 5), 0).unwrap();
    }
    let v = open(&single_plex("raid5 8k", 3, "0"), &drives);
    let before = read_all(&v);
    v.init("v.p0").unwrap();
    assert_eq!(v.check_parity().unwrap()[0].rows_mismatched, 0);
    assert_eq!(read_all(&v), before, "md's resync keeps the data, only parity is written");
}

#[test]
fn init_of_a_striped_plex_with_no_mirror_zeroes_it() {
    let drives = drives_for(2, MIB);
    for dev in drives.values() {
        dev.write_at(&pattern(MIB as usize, 5), 0).unwrap();
    }
    let v = open(&single_plex("striped 8k", 2, "0"), &drives);
    v.init("v.p0").unwrap();
    assert!(read_all(&v).iter().all(|&b| b == 0));
}

#[test]
fn revive_while_writing_keeps_every_write() {
    let drives = drives_for(3, MIB);
    let v = open(&single_plex("raid5 8k", 3, "0"), &drives);
    v.set_state("d2", State::Down).unwrap();
    let writer = {
        let v = std::sync::Arc::clone(&v);
        std::thread::spawn(move || {
            for i in 0..200u64 {
                v.write_at(&pattern(4096, i), (i * 37 % 200) * 4096).unwrap();
            }
        })
    };
    v.revive("d2").unwrap();
    writer.join().unwrap();
    let mut model = vec![0u8; v.size_bytes() as usize];
    for i in 0..200u64 {
        model[((i * 37 % 200) * 4096) as usize..][..4096].copy_from_slice(&pattern(4096, i));
    }
    v.set_state("d0", State::Down).unwrap();
    assert_eq!(read_all(&v), model);
}

#[test]
fn mirror_revive_while_writing_keeps_every_write() {
    // 8 KiB writes at 4 KiB steps: some straddle the revive pointer.
    let write = |i: u64| ((i * 37 % 200) * 4096, pattern(8192, i));
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.set_state("b", State::Down).unwrap();
    let writer = {
        let v = std::sync::Arc::clone(&v);
        std::thread::spawn(move || {
            for i in 0..200u64 {
                let (offset, data) = write(i);
                v.write_at(&data, offset).unwrap();
            }
        })
    };
    v.revive("b").unwrap();
    writer.join().unwrap();
    let mut model = vec![0u8; v.size_bytes() as usize];
    for i in 0..200u64 {
        let (offset, data) = write(i);
        model[offset as usize..][..data.len()].copy_from_slice(&data);
    }
    v.set_state("a", State::Down).unwrap();
    assert_eq!(read_all(&v), model);
}
