//! The volume listings against golden files: a layout change shows up as
//! a diff here. Regenerate with `IOLAB_BLESS=1 cargo test -p report`
//! and review the diff.

use device::StatsSnapshot;
use volume::{ObjectReport, Org, PlexCountersSnapshot, PlexReport, State, SubdiskReport, VolumeReport};

fn subdisk(name: &str, drive: &str, plex_offset_bytes: u64, revived_bytes: u64) -> SubdiskReport {
    SubdiskReport {
        name: name.into(),
        drive: drive.into(),
        state: if revived_bytes > 0 { State::Stale } else { State::Up },
        drive_offset_bytes: 135_168,
        plex_offset_bytes,
        length_bytes: 1 << 20,
        revived_bytes,
        stats: StatsSnapshot {
            reads: 10,
            writes: 4,
            bytes_read: 40_960,
            bytes_written: 16_384,
            ..Default::default()
        },
    }
}

/// A concatenated volume of two subdisks, the second under revive.
fn report() -> VolumeReport {
    let drive = |name: &str| ObjectReport {
        name: name.into(),
        device: format!("/dev/{name}"),
        state: State::Up,
        missing: false,
        stats: StatsSnapshot::default(),
    };
    VolumeReport {
        name: "cat".into(),
        size_bytes: 2 << 20,
        stats: StatsSnapshot {
            reads: 20,
            writes: 8,
            bytes_read: 81_920,
            bytes_written: 32_768,
            ..Default::default()
        },
        recovered_reads: 1,
        plexes: vec![PlexReport {
            name: "cat.p0".into(),
            org: Org::Concat,
            state: State::Up,
            size_bytes: 2 << 20,
            revived_bytes: 0,
            counters: PlexCountersSnapshot { reads: 20, writes: 8, multiblock: 7, ..Default::default() },
            subdisks: vec![subdisk("cat.p0.s0", "a", 0, 0), subdisk("cat.p0.s1", "b", 1 << 20, 262_144)],
        }],
        drives: vec![drive("a"), drive("b")],
    }
}

fn check_golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden").join(name);
    if std::env::var_os("IOLAB_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(actual, expected, "{name} differs from the golden file");
}

#[test]
fn verbose_listing_matches_its_golden_file() {
    check_golden("list_v.txt", &report::volume_list_verbose(&[report()], false));
}

#[test]
fn counters_listing_matches_its_golden_file() {
    check_golden("list_s.txt", &report::volume_list(&[report()], true));
}

#[test]
fn verbose_listing_shows_the_revive_pointer_of_a_subdisk_under_revive() {
    let text = report::volume_list_verbose(&[report()], false);
    assert!(text.contains("Revive pointer:\t262144 bytes (256KiB) (25.0%)"), "{text}");
}

#[test]
fn raid5_plex_with_one_subdisk_out_is_listed_degraded() {
    let mut v = report();
    v.plexes[0].org = Org::Raid5 { stripe_bytes: 512 * 1024, layout: volume::ParityLayout::LeftAsymmetric };
    let text = report::volume_list(&[v], false);
    let plex = text.lines().find(|l| l.starts_with("P ")).unwrap();
    assert!(plex.contains(" degraded "), "{plex}");
}

#[test]
fn parity_check_names_each_plex_and_its_first_wrong_rows() {
    let report = |plex: &str, rows_mismatched, mismatched_rows| volume::ParityReport {
        plex: plex.into(),
        rows_checked: 64,
        rows_mismatched,
        mismatched_rows,
    };
    let text = report::parity_lines(&[report("r.p0", 0, Vec::new()), report("r.p1", 2, vec![3, 9])]);
    assert_eq!(
        text,
        "r.p0: 64 rows checked, 0 with wrong parity\n\
         r.p1: 64 rows checked, 2 with wrong parity\n  first wrong rows: [3, 9]\n"
    );
}
