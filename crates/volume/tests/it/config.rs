use std::collections::HashMap;

use volume::{parse, parse_size, resolve, ConfigError, Org, ParityLayout, ReadPolicySpec, DATA_START_BYTES};

const MIB: u64 = 1 << 20;

fn sizes(drives: &[(&str, u64)]) -> HashMap<String, u64> {
    drives.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

const SEED_RAID5: &str = "
# the seed's RAID-5
drive d1 device /dev/da1s1h
drive d2 device /dev/da2s1h
drive d3 device /dev/da3s1h   # third
drive d4 device /dev/da4s1h
volume raid readpol round
  plex org raid5 512k
    sd length 1m drive d1
    sd length 1m drive d2
    sd length 1m drive d3
    sd length 1m drive d4
";

#[test]
fn size_suffixes() {
    assert_eq!(parse_size("986s"), Some(986 * 512));
    assert_eq!(parse_size("279k"), Some(279 * 1024));
    assert_eq!(parse_size("4M"), Some(4 * MIB));
    assert_eq!(parse_size("2g"), Some(2 << 30));
    assert_eq!(parse_size("4096"), Some(4096));
    assert_eq!(parse_size("k"), None);
    assert_eq!(parse_size("1.5m"), None);
}

#[test]
fn seed_config_gets_default_names() {
    let config = parse(SEED_RAID5).unwrap();
    assert_eq!(config.drives.len(), 4);
    let plex = &config.volumes[0].plexes[0];
    assert_eq!(plex.name, "raid.p0");
    assert_eq!(plex.org, Org::Raid5 { stripe_bytes: 512 * 1024, layout: ParityLayout::LeftAsymmetric });
    let names: Vec<&str> = plex.subdisks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["raid.p0.s0", "raid.p0.s1", "raid.p0.s2", "raid.p0.s3"]);
}

#[test]
fn mirror_with_prefer_and_explicit_names() {
    let text = "drive a device A\ndrive b device B\nvolume m readpol prefer left\n\
                plex name left org concat\nsd name l0 length 1m drive a\n\
                plex name right org striped 279k\nsd length 0 drive a\nsd length 0 drive b\n";
    let config = parse(text).unwrap();
    let volume = &config.volumes[0];
    assert_eq!(volume.read_policy, ReadPolicySpec::Prefer("left".into()));
    assert_eq!(volume.plexes[1].subdisks[1].name, "right.s1");
}

#[test]
fn plex_attaches_to_named_volume() {
    let text = "drive a device A\nvolume v1\nvolume v2\nplex org concat volume v1\nsd length 1m drive a\n";
    let config = parse(text).unwrap();
    assert_eq!(config.volumes[0].plexes.len(), 1);
    assert!(config.volumes[1].plexes.is_empty());
}

#[test]
fn left_symmetric_layout_option() {
    let text = "drive a device A\nvolume v\nplex org raid5 64k layout ls\n\
                sd length 1m drive a\nsd length 1m drive a\nsd length 1m drive a\n";
    let org = parse(text).unwrap().volumes[0].plexes[0].org;
    assert_eq!(org, Org::Raid5 { stripe_bytes: 64 * 1024, layout: ParityLayout::LeftSymmetric });
}

#[test]
fn stripe_not_multiple_of_512_names_line() {
    let err = parse("drive a device A\nvolume v\nplex org striped 1000\n").unwrap_err();
    assert!(matches!(err, ConfigError::BadStripe { line: 3, stripe_bytes: 1000, .. }), "{err}");
}

#[test]
fn unknown_drive_names_line() {
    let err = parse("drive a device A\nvolume v\nplex org concat\nsd length 1m drive b\n").unwrap_err();
    assert!(matches!(err, ConfigError::UnknownDrive { line: 4, ref drive, .. } if drive == "b"), "{err}");
}

#[test]
fn striped_with_one_subdisk_refused() {
    let err = parse("drive a device A\nvolume v\nplex org striped 64k\nsd length 1m drive a\n").unwrap_err();
    assert!(matches!(err, ConfigError::TooFewSubdisks { line: 3, found: 1, needed: 2, .. }), "{err}");
}

#[test]
fn raid5_with_two_subdisks_refused() {
    let text = "drive a device A\nvolume v\nplex org raid5 64k\nsd length 1m drive a\nsd length 1m drive a\n";
    let err = parse(text).unwrap_err();
    assert!(matches!(err, ConfigError::TooFewSubdisks { line: 3, found: 2, needed: 3, .. }), "{err}");
}

#[test]
fn unknown_keyword_names_line() {
    let err = parse("drive a device A\n\nfrobnicate x\n").unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { line: 3, .. }), "{err}");
}

#[test]
fn duplicate_name_refused() {
    let err = parse("drive a device A\ndrive a device B\n").unwrap_err();
    assert!(matches!(err, ConfigError::Duplicate { line: 2, first_line: 1, .. }), "{err}");
}

#[test]
fn resolve_places_subdisks_after_metadata() {
    let layout = resolve(
        &parse(SEED_RAID5).unwrap(),
        &sizes(&[("d1", 2 * MIB), ("d2", 2 * MIB), ("d3", 2 * MIB), ("d4", 2 * MIB)]),
    )
    .unwrap();
    let sd = &layout.volumes[0].plexes[0].subdisks[2];
    assert_eq!((sd.drive, sd.drive_offset_bytes, sd.length_bytes), (2, DATA_START_BYTES, MIB));
}

#[test]
fn length_zero_takes_largest_free_area() {
    let text = "drive a device A\nvolume v\nplex org concat\nsd length 1m drive a\nsd length 0 drive a\n";
    let layout = resolve(&parse(text).unwrap(), &sizes(&[("a", 4 * MIB)])).unwrap();
    let sd = &layout.volumes[0].plexes[0].subdisks[1];
    assert_eq!(sd.drive_offset_bytes, DATA_START_BYTES + MIB);
    assert_eq!(sd.length_bytes, 3 * MIB - DATA_START_BYTES);
}

#[test]
fn overlapping_subdisks_name_both_lines() {
    let text = "drive a device A\nvolume v\nplex org concat\nsd length 1m drive a driveoffset 1m\n\
                sd length 1m drive a driveoffset 1536k\n";
    let err = resolve(&parse(text).unwrap(), &sizes(&[("a", 4 * MIB)])).unwrap_err();
    assert!(matches!(err, ConfigError::Overlap { line: 5, other_line: 4, .. }), "{err}");
}

#[test]
fn unequal_striped_subdisks_refused() {
    let text =
        "drive a device A\nvolume v\nplex org striped 64k\nsd length 1m drive a\nsd length 2m drive a\n";
    let err = resolve(&parse(text).unwrap(), &sizes(&[("a", 8 * MIB)])).unwrap_err();
    assert!(matches!(err, ConfigError::UnequalSubdisks { line: 5, first_line: 4, .. }), "{err}");
}

#[test]
fn drive_too_small_names_line_and_drive() {
    let text = "drive a device A\nvolume v\nplex org concat\nsd length 8m drive a\n";
    let err = resolve(&parse(text).unwrap(), &sizes(&[("a", 4 * MIB)])).unwrap_err();
    assert!(matches!(err, ConfigError::DriveTooSmall { line: 4, ref drive, .. } if drive == "a"), "{err}");
}

#[test]
fn concat_plexoffset_orders_subdisks() {
    let text = "drive a device A\nvolume v\nplex org concat\nsd name x length 1m drive a plexoffset 1m\n\
                sd name y length 1m drive a plexoffset 0\n";
    let layout = resolve(&parse(text).unwrap(), &sizes(&[("a", 4 * MIB)])).unwrap();
    let names: Vec<&str> = layout.volumes[0].plexes[0].subdisks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["y", "x"]);
}

#[test]
fn vinum_printconfig_style_parses() {
    let text = "drive d1 device /dev/da1s1h state up\ndrive d2 device /dev/da2s1h state crashed\n\
                volume s state up\nplex name s.p0 org striped 986s vol s state degraded\n\
                sd name s.p0.s0 drive d1 len 4000s driveoffset 265s state up plex s.p0 plexoffset 0s\n\
                sd name s.p0.s1 drive d2 len 4000s driveoffset 265s state stale plex s.p0 plexoffset 986s\n";
    let config = parse(text).unwrap();
    let plex = &config.volumes[0].plexes[0];
    assert_eq!(plex.org, Org::Striped { stripe_bytes: 986 * 512 });
    assert_eq!(plex.subdisks[1].drive_offset_bytes, Some(265 * 512));
    let down: Vec<(&str, volume::State)> = config
        .states
        .iter()
        .filter(|s| s.state != volume::State::Up)
        .map(|s| (s.name.as_str(), s.state))
        .collect();
    assert_eq!(down, [("d2", volume::State::Down), ("s.p0.s1", volume::State::Stale)]);
}

#[test]
fn unknown_state_word_names_line() {
    let err = parse("drive a device A state sleepy\n").unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { line: 1, .. }), "{err}");
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("drive".to_string()),
            Just("volume".to_string()),
            Just("plex".to_string()),
            Just("sd".to_string()),
            Just("org".to_string()),
            Just("raid5".to_string()),
            Just("striped".to_string()),
            Just("concat".to_string()),
            Just("length".to_string()),
            Just("driveoffset".to_string()),
            Just("plexoffset".to_string()),
            Just("device".to_string()),
            Just("name".to_string()),
            Just("state".to_string()),
            Just("0".to_string()),
            Just("\n".to_string()),
            "[a-c]{1,2}",
            "[0-9]{1,12}[skmg]?",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn parse_and_resolve_return_errors_not_panics(words in prop::collection::vec(word(), 0..40), size in 0u64..8 * MIB) {
            if let Ok(config) = parse(&words.join(" ")) {
                let sizes: HashMap<String, u64> = config.drives.iter().map(|d| (d.name.clone(), size)).collect();
                let _ = resolve(&config, &sizes);
            }
        }
    }
}

const LOGGED: &str = "drive a device a
drive b device b
drive c device c
drive j device j
volume v
plex org raid5 64k log j
sd length 1m drive a
sd length 1m drive b
sd length 1m drive c
";

fn four_drives() -> HashMap<String, u64> {
    sizes(&[("a", 8 * MIB), ("b", 8 * MIB), ("c", 8 * MIB), ("j", 8 * MIB)])
}

#[test]
fn a_raid5_log_drive_is_resolved_and_printed_back() {
    let layout = resolve(&parse(LOGGED).unwrap(), &four_drives()).unwrap();
    assert_eq!(layout.volumes[0].plexes[0].log_drive, Some(3));
    let text = layout.to_config_text(&[], &[]);
    assert!(text.contains("org raid5 128s layout la log j"), "{text}");
    assert_eq!(resolve(&parse(&text).unwrap(), &four_drives()).unwrap(), layout);
}

#[test]
fn only_a_raid5_plex_takes_a_log_drive() {
    let text = LOGGED.replace("org raid5 64k log j", "org striped 64k log j");
    let err = parse(&text).unwrap_err();
    assert!(err.to_string().contains("only a RAID-5 plex takes a log drive"), "{err}");
}

#[test]
fn a_log_drive_must_be_defined_and_hold_no_subdisk() {
    let unknown = LOGGED.replace("log j", "log k");
    let err = resolve(&parse(&unknown).unwrap(), &four_drives()).unwrap_err();
    assert!(err.to_string().contains("log drive 'k' is not defined"), "{err}");
    let shared = LOGGED.replace("sd length 1m drive c", "sd length 1m drive j");
    let err = resolve(&parse(&shared).unwrap(), &four_drives()).unwrap_err();
    assert!(err.to_string().contains("a log needs a drive of its own"), "{err}");
}
