//! A mirror of striped plexes (Vinum's RAID-10 example): with a drive down
//! each plex is degraded for the regions on it only, reads are served (split
//! at subdisk boundaries where no one plex holds the whole request), and a
//! revive copies the missing regions back from the other plex.

use std::collections::HashMap;
use std::sync::Arc;

use device::Device;
use volume::State;

use crate::common::*;
use crate::props::RAID10;

/// 7-sector stripes on five 100 KiB subdisks per plex.
const STRIPE_BYTES: u64 = 7 * 512;
const WIDTH: u64 = 5;

/// The image of striped plex `plex` (0 or 1) read straight from the drives:
/// plex 1's subdisk k lies on drive (k + 2) mod 5.
fn plex_image(drives: &HashMap<String, Arc<dyn Device>>, v: &volume::Volume, plex: usize) -> Vec<u8> {
    let report = &v.report().plexes[plex];
    let mut image = vec![0; v.size_bytes() as usize];
    for (unit, chunk) in image.chunks_mut(STRIPE_BYTES as usize).enumerate() {
        let sd = &report.subdisks[unit % WIDTH as usize];
        let offset = sd.drive_offset_bytes + (unit as u64 / WIDTH) * STRIPE_BYTES;
        drives[&sd.drive].read_at(chunk, offset).unwrap();
    }
    image
}

fn read_all(v: &volume::Volume) -> Vec<u8> {
    let mut buf = vec![0; v.size_bytes() as usize];
    v.read_at(&mut buf, 0).unwrap();
    buf
}

#[test]
fn a_drive_down_leaves_every_byte_readable_in_one_request() {
    let drives = drives_for(5, MIB);
    let v = open(RAID10, &drives);
    let data = pattern(v.size_bytes() as usize, 3);
    v.write_at(&data, 0).unwrap();
    v.set_state("d2", State::Down).unwrap();
    assert!(read_all(&v) == data, "a read crossing every subdisk is split between the plexes");
}

#[test]
fn writes_with_a_drive_down_are_acknowledged_and_read_back() {
    let drives = drives_for(5, MIB);
    let v = open(RAID10, &drives);
    v.set_state("d0", State::Down).unwrap();
    let data = pattern(v.size_bytes() as usize, 4);
    for (i, block) in data.chunks(8192).enumerate() {
        v.write_at(block, i as u64 * 8192).unwrap();
    }
    assert!(read_all(&v) == data);
    assert_eq!(v.state("v.p0"), Some(State::Up), "a plex is degraded for one subdisk's regions, not stale");
}

#[test]
fn revived_drive_leaves_both_plexes_equal() {
    let drives = drives_for(5, MIB);
    let v = open(RAID10, &drives);
    v.write_at(&pattern(v.size_bytes() as usize, 5), 0).unwrap();
    v.set_state("d3", State::Down).unwrap();
    let data = pattern(v.size_bytes() as usize, 6);
    v.write_at(&data, 0).unwrap();
    v.revive("d3").unwrap();
    assert_eq!(v.states_not_up(), Vec::new());
    assert!(plex_image(&drives, &v, 0) == data, "plex 0 holds the writes its subdisk missed");
    assert!(plex_image(&drives, &v, 1) == data, "plex 1 holds the writes its subdisk missed");
}

#[test]
fn a_subdisk_revive_copies_only_its_own_region() {
    let drives = drives_for(5, MIB);
    let v = open(RAID10, &drives);
    v.set_state("v.p0.s1", State::Stale).unwrap();
    let before = drive_totals(&v);
    v.revive("v.p0.s1").unwrap();
    let after = drive_totals(&v);
    let sd_bytes = v.size_bytes() / WIDTH;
    assert_eq!(after.bytes_written - before.bytes_written, sd_bytes);
}

#[test]
fn a_region_on_both_plexes_down_fails_rather_than_guess() {
    let drives = drives_for(5, MIB);
    let v = open(RAID10, &drives);
    // Plex 0 unit 0 is on d0; plex 1 unit 0 on d2.
    v.set_state("d0", State::Down).unwrap();
    v.set_state("d2", State::Down).unwrap();
    let mut buf = vec![0; 4096];
    assert!(v.read_at(&mut buf, 0).is_err());
    assert!(v.write_at(&buf, 0).is_err(), "a write no plex can hold is not acknowledged");
}

#[test]
fn a_subdisk_that_missed_a_write_is_not_read_after_its_drive_returns() {
    let drives = drives_for(5, MIB);
    let v = open(RAID10, &drives);
    v.set_state("d0", State::Down).unwrap();
    v.write_at(&[7; 4096], 0).unwrap();
    v.set_state("d0", State::Up).unwrap();
    v.set_state("d2", State::Down).unwrap();
    let mut buf = vec![0; 4096];
    assert!(v.read_at(&mut buf, 0).is_err(), "d0's subdisk is stale: it must not serve the old bytes");
}
