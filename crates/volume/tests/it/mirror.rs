use std::sync::Arc;

use device::{Device, Fault, FaultyDevice};
use volume::{State, DATA_START_BYTES};

use crate::common::*;

const MIRROR: &str = "drive a device A\ndrive b device B\nvolume m\n\
                      plex org concat\nsd length 1m drive a\nplex org striped 64k\nsd length 512k drive b\nsd length 512k drive b\n";

#[test]
fn round_robin_alternates_plexes() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    let mut buf = vec![0; 4096];
    v.read_at(&mut buf, 0).unwrap();
    v.read_at(&mut buf, 0).unwrap();
    let plexes = v.report().plexes;
    assert_eq!((plexes[0].counters.reads, plexes[1].counters.reads), (1, 1));
}

#[test]
fn prefer_reads_the_named_plex() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(&MIRROR.replace("volume m", "volume m readpol prefer m.p1"), &drives);
    let mut buf = vec![0; 4096];
    v.read_at(&mut buf, 0).unwrap();
    v.read_at(&mut buf, 0).unwrap();
    let plexes = v.report().plexes;
    assert_eq!((plexes[0].counters.reads, plexes[1].counters.reads), (0, 2));
}

#[test]
fn writes_go_to_every_plex() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.write_at(&[6; 4096], 0).unwrap();
    let (mut on_a, mut on_b) = (vec![0; 4096], vec![0; 4096]);
    drives["a"].read_at(&mut on_a, DATA_START_BYTES).unwrap();
    drives["b"].read_at(&mut on_b, DATA_START_BYTES).unwrap();
    assert_eq!((on_a, on_b), (vec![6; 4096], vec![6; 4096]));
}

#[test]
fn failed_read_is_retried_on_other_plex() {
    let mems = mem_drives(&["a", "b"], 4 * MIB);
    let mut drives = mems.clone();
    let fault = Fault::Range { range: 0..4 * MIB, reads: true, writes: false };
    drives.insert("a".into(), Arc::new(FaultyDevice::new(Arc::clone(&mems["a"]), vec![fault])));
    let v = open(&MIRROR.replace("volume m", "volume m readpol prefer m.p0"), &drives);
    v.write_at(&pattern(4096, 8), 0).unwrap();
    let mut buf = vec![0; 4096];
    v.read_at(&mut buf, 0).unwrap();
    assert_eq!(buf, pattern(4096, 8));
    assert_eq!(v.report().recovered_reads, 1);
}

#[test]
fn drive_down_reads_from_other_plex() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.write_at(&pattern(8192, 1), 4096).unwrap();
    v.set_state("b", State::Down).unwrap();
    let mut buf = vec![0; 8192];
    for _ in 0..2 {
        v.read_at(&mut buf, 4096).unwrap();
        assert_eq!(buf, pattern(8192, 1));
    }
}

#[test]
fn plex_missing_a_write_never_serves_it() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.set_state("b", State::Down).unwrap();
    v.write_at(&[2; 4096], 0).unwrap();
    v.set_state("b", State::Up).unwrap();
    v.set_state("a", State::Down).unwrap();
    let mut buf = vec![0; 4096];
    assert!(v.read_at(&mut buf, 0).is_err(), "b's subdisks stay stale until revived");
}

#[test]
fn reads_skip_plex_with_drive_down_without_counting_recovery() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.set_state("a", State::Down).unwrap();
    let mut buf = vec![0; 4096];
    for _ in 0..4 {
        v.read_at(&mut buf, 0).unwrap();
    }
    let report = v.report();
    assert_eq!((report.recovered_reads, report.plexes[1].counters.reads), (0, 4));
}

#[test]
fn read_with_every_plex_unavailable_is_an_error() {
    let drives = mem_drives(&["a", "b"], 4 * MIB);
    let v = open(MIRROR, &drives);
    v.set_state("a", State::Down).unwrap();
    v.set_state("b", State::Down).unwrap();
    let mut buf = vec![0; 4096];
    assert!(v.read_at(&mut buf, 0).is_err());
}
