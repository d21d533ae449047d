use device::Device;
use volume::DATA_START_BYTES;

use crate::common::*;

#[test]
fn concat_size_is_sum_of_subdisks() {
    let drives = drives_for(2, 2 * MIB);
    let v = open("drive d0 device a\ndrive d1 device b\nvolume v\nplex org concat\nsd length 1m drive d0\nsd length 512k drive d1\n", &drives);
    assert_eq!(v.size_bytes(), MIB + 512 * KIB);
}

#[test]
fn concat_write_across_subdisks_reads_back_and_lands_on_both_drives() {
    let drives = drives_for(2, 2 * MIB);
    let v = open("drive d0 device a\ndrive d1 device b\nvolume v\nplex org concat\nsd length 1m drive d0\nsd length 1m drive d1\n", &drives);
    let data = pattern(8192, 3);
    v.write_at(&data, MIB - 4096).unwrap();
    let mut back = vec![0; 8192];
    v.read_at(&mut back, MIB - 4096).unwrap();
    assert_eq!(back, data);
    let mut head = vec![0; 4096];
    drives["d1"].read_at(&mut head, DATA_START_BYTES).unwrap();
    assert_eq!(head, data[4096..]);
}

#[test]
fn concat_crossing_counts_one_multiblock() {
    let drives = drives_for(2, 2 * MIB);
    let v = open("drive d0 device a\ndrive d1 device b\nvolume v\nplex org concat\nsd length 1m drive d0\nsd length 1m drive d1\n", &drives);
    v.write_at(&[1; 8192], MIB - 4096).unwrap();
    let c = v.report().plexes[0].counters;
    assert_eq!((c.writes, c.multiblock, c.multistripe), (1, 1, 0));
}

#[test]
fn striped_size_uses_whole_stripes() {
    let drives = drives_for(3, 2 * MIB);
    // 1m / 279k = 3 whole stripes per subdisk.
    let v = open(&single_plex("striped 279k", 3, "1m"), &drives);
    assert_eq!(v.size_bytes(), 3 * 3 * 279 * KIB);
}

#[test]
fn striped_counts_boundaries_crossed() {
    let drives = drives_for(2, 2 * MIB);
    let v = open(&single_plex("striped 4k", 2, "1m"), &drives);
    // 2k..18k touches units 0..=4: 4 unit boundaries, rows 0..=2: 2 row boundaries.
    let mut buf = vec![0; 16 * 1024];
    v.read_at(&mut buf, 2048).unwrap();
    let c = v.report().plexes[0].counters;
    assert_eq!((c.reads, c.bytes_read, c.multiblock, c.multistripe), (1, 16384, 4, 2));
}

#[test]
fn striped_request_inside_one_unit_counts_nothing() {
    let drives = drives_for(2, 2 * MIB);
    let v = open(&single_plex("striped 4k", 2, "1m"), &drives);
    v.write_at(&[7; 4096], 4096).unwrap();
    let c = v.report().plexes[0].counters;
    assert_eq!((c.multiblock, c.multistripe), (0, 0));
    assert_eq!(drive_totals(&v).writes, 1);
}

#[test]
fn striped_unit_lands_on_hand_computed_drive_offset() {
    let drives = drives_for(3, 2 * MIB);
    let v = open(&single_plex("striped 279k", 3, "1m"), &drives);
    // Volume offset 1000k: unit 3 -> d0, row 1, 163k into the unit.
    v.write_at(&pattern(4096, 9), 1000 * KIB).unwrap();
    let mut got = vec![0; 4096];
    drives["d0"].read_at(&mut got, DATA_START_BYTES + 279 * KIB + 163 * KIB).unwrap();
    assert_eq!(got, pattern(4096, 9));
}

#[test]
fn striped_with_drive_down_fails_read() {
    let drives = drives_for(2, 2 * MIB);
    let v = open(&single_plex("striped 4k", 2, "1m"), &drives);
    v.set_state("d1", volume::State::Down).unwrap();
    let mut buf = vec![0; 8192];
    assert!(v.read_at(&mut buf, 0).is_err());
}

#[test]
fn set_state_of_unknown_object_is_an_error() {
    let drives = drives_for(2, 2 * MIB);
    let v = open(&single_plex("striped 4k", 2, "1m"), &drives);
    assert!(matches!(
        v.set_state("nope", volume::State::Down),
        Err(volume::VolumeError::UnknownObject { .. })
    ));
}

#[test]
fn missing_drive_refused_by_build() {
    let drives = drives_for(1, 2 * MIB);
    let err =
        volume::build(&volume::parse(&single_plex("striped 4k", 2, "1m")).unwrap(), &drives).unwrap_err();
    assert!(matches!(err, volume::VolumeError::MissingDrive { ref drive } if drive == "d1"), "{err}");
}

#[test]
fn deserialized_layout_with_zero_stripe_is_refused() {
    let drives = drives_for(2, 2 * MIB);
    let config = volume::parse(&single_plex("striped 4k", 2, "1m")).unwrap();
    let sizes = drives.iter().map(|(n, d)| (n.clone(), d.size_bytes())).collect();
    let mut layout = volume::resolve(&config, &sizes).unwrap();
    layout.volumes[0].plexes[0].org = volume::Org::Striped { stripe_bytes: 0 };
    assert!(matches!(volume::bind(&layout, &drives), Err(volume::VolumeError::Invalid { .. })));
}

#[test]
fn huge_driveoffset_is_an_error_not_a_panic() {
    let text =
        "drive d0 device a\nvolume v\nplex org concat\nsd length 1m drive d0 driveoffset 17179869183g\n";
    let err = volume::resolve(&volume::parse(text).unwrap(), &[("d0".to_string(), MIB)].into()).unwrap_err();
    assert!(matches!(err, volume::ConfigError::DriveTooSmall { line: 4, .. }), "{err}");
}

#[test]
fn report_gives_plex_offsets_of_concat_subdisks_end_to_end() {
    let drives = mem_drives(&["a", "b"], MIB);
    let v = open("drive a device a\ndrive b device b\nvolume v\nplex org concat\nsd length 300k drive a\nsd length 200k drive b\n", &drives);
    let offsets: Vec<u64> = v.report().plexes[0].subdisks.iter().map(|sd| sd.plex_offset_bytes).collect();
    assert_eq!(offsets, [0, 300 * KIB]);
}

#[test]
fn report_gives_plex_offsets_of_striped_subdisks_one_stripe_apart() {
    let drives = drives_for(3, MIB);
    let v = open(&single_plex("striped 279k", 3, "500k"), &drives);
    let offsets: Vec<u64> = v.report().plexes[0].subdisks.iter().map(|sd| sd.plex_offset_bytes).collect();
    assert_eq!(offsets, [0, 279 * KIB, 558 * KIB]);
}

#[test]
fn report_names_each_drive_device() {
    let drives = drives_for(3, MIB);
    let v = open(&single_plex("striped 279k", 3, "500k"), &drives);
    let devices: Vec<String> = v.report().drives.into_iter().map(|d| d.device).collect();
    assert_eq!(devices, ["d0", "d1", "d2"]);
}
