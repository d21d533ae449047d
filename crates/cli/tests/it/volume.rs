//! `iolab volume` and volumes as `iolab run` targets, end to end on files.

use crate::cli::{iolab, stderr, stdout};

pub const RAID5: &str = "# the seed's RAID-5: four drives, 512k stripes
drive d1 device d1.img
drive d2 device d2.img
drive d3 device d3.img
drive d4 device d4.img
volume raid
  plex org raid5 512k
    sd length 0 drive d1
    sd length 0 drive d2
    sd length 0 drive d3
    sd length 0 drive d4
";

fn created(dir: &tempfile::TempDir) -> String {
    let conf = dir.path().join("r5.conf");
    std::fs::write(&conf, RAID5).unwrap();
    let conf = conf.to_str().unwrap().to_string();
    let out = iolab(&["volume", "create", &conf, "--drive-size", "8m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    conf
}

#[test]
fn create_then_list_shows_every_object_up() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let out = iolab(&["volume", "list", &conf]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for object in ["V raid", "P raid.p0", "S raid.p0.s3", "D d4"] {
        assert!(text.contains(object), "{object} missing from\n{text}");
    }
    assert!(!text.contains("down") && !text.contains("stale"), "{text}");
}

#[test]
fn volume_reassembles_from_its_drives_alone() {
    let dir = tempfile::tempdir().unwrap();
    created(&dir);
    let drives: Vec<String> = ["d3.img", "d1.img", "d4.img", "d2.img"]
        .iter()
        .map(|d| dir.path().join(d).to_str().unwrap().into())
        .collect();
    let mut args = vec!["volume", "printconfig"];
    args.extend(drives.iter().map(String::as_str));
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("org raid5 1024s"), "{}", stdout(&out));
}

#[test]
fn create_refuses_drives_of_an_existing_volume_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let out = iolab(&["volume", "create", &conf]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("holds data (iolab volume)"), "{}", stderr(&out));
    assert_eq!(iolab(&["volume", "create", &conf, "--force"]).status.code(), Some(0));
}

#[test]
fn create_without_drive_files_says_how_to_make_them() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("r5.conf");
    std::fs::write(&conf, RAID5).unwrap();
    let out = iolab(&["volume", "create", conf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("give --drive-size"), "{}", stderr(&out));
}

#[test]
fn bad_configuration_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.conf");
    std::fs::write(&conf, "drive d1 device d1.img\nvolume v\nplex org striped 1000\nsd length 1m drive d1\n")
        .unwrap();
    let out = iolab(&["volume", "create", conf.to_str().unwrap(), "--drive-size", "4m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 3"), "{}", stderr(&out));
}

#[test]
fn run_on_a_configuration_file_drives_the_volume_and_shows_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let out = iolab(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "4k", "--ios", "200", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("randwrite on raid"), "{text}");
    assert!(text.contains("raid.p0.s0"), "counters of the subdisks are shown:\n{text}");
}

#[test]
fn failed_drive_then_start_leaves_parity_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let write = iolab(&["run", "--target", &conf, "--rw", "write", "--bs", "1m", "-q"]);
    assert_eq!(write.status.code(), Some(0), "{}", stderr(&write));
    assert_eq!(iolab(&["volume", "setstate", "down", "d2", &conf]).status.code(), Some(0));
    let degraded = iolab(&["run", "--target", &conf, "--rw", "randwrite", "--ios", "300", "-q"]);
    assert_eq!(degraded.status.code(), Some(0), "{}", stderr(&degraded));
    let start = iolab(&["volume", "start", "d2", &conf]);
    assert_eq!(start.status.code(), Some(0), "{}", stderr(&start));
    let check = iolab(&["volume", "checkparity", "raid", &conf]);
    assert_eq!(check.status.code(), Some(0), "{}{}", stdout(&check), stderr(&check));
    assert!(stdout(&check).contains("0 with wrong parity"), "{}", stdout(&check));
}

#[test]
fn unknown_volume_name_in_a_target_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let target = format!("volume:nope:{conf}");
    let out = iolab(&["run", "--target", &target, "--ios", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no volume 'nope'"), "{}", stderr(&out));
}

#[test]
fn unknown_state_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let out = iolab(&["volume", "setstate", "broken", "d2", &conf]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("use up, down or stale"), "{}", stderr(&out));
}

#[test]
fn run_json_carries_the_volume_counters_of_the_job_alone() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let out = iolab(&[
        "run",
        "--target",
        &conf,
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--ios",
        "100",
        "--json",
        "-",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let volume = &doc["jobs"][0]["volume"];
    assert_eq!(volume["stats"]["writes"], 100);
    assert_eq!(volume["stats"]["reads"], 0, "the safety probe is not counted");
    let drive_reads: u64 =
        volume["drives"].as_array().unwrap().iter().map(|d| d["stats"]["reads"].as_u64().unwrap()).sum();
    assert_eq!(drive_reads, 200, "two drive reads per small RAID-5 write");
}

pub fn run_ok(args: &[&str]) -> std::process::Output {
    let out = iolab(args);
    assert_eq!(out.status.code(), Some(0), "{:?}: {}{}", args, stdout(&out), stderr(&out));
    out
}

fn random_writes(conf: &str, ios: &str) {
    run_ok(&["run", "--target", conf, "--rw", "randwrite", "--bs", "4k", "--ios", ios, "-q"]);
}

/// `volume list --json`: the reports with the accumulated counters.
fn listed(conf: &str) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_slice(&run_ok(&["volume", "list", "--json", conf]).stdout).unwrap();
    assert_eq!((&doc["schema"], &doc["version"]), (&"iolab-volume-list".into(), &1.into()));
    doc["volumes"].clone()
}

#[test]
fn counters_accumulate_over_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "100");
    random_writes(&conf, "50");
    assert_eq!(listed(&conf)[0]["stats"]["writes"], 150);
}

#[test]
fn list_s_shows_the_accumulated_counters_with_percentages() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    run_ok(&["run", "--target", &conf, "--rw", "randread", "--bs", "1m", "--ios", "40", "-q"]);
    let text = stdout(&run_ok(&["volume", "list", "-s", &conf]));
    let plex = text.lines().find(|l| l.trim_start().starts_with("raid.p0 ")).expect(&text);
    // Every 1 MiB read crosses at least one 512 KiB stripe-unit boundary.
    assert!(plex.contains(" 40 ") && plex.contains("(100.0%)"), "{plex}");
}

#[test]
fn resetstats_without_an_object_zeroes_every_counter() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "30");
    run_ok(&["volume", "resetstats", &conf]);
    let list = listed(&conf);
    assert_eq!(list[0]["stats"]["writes"], 0);
    assert_eq!(list[0]["drives"][0]["stats"]["writes"], 0);
}

#[test]
fn resetstats_of_a_plex_keeps_the_volume_counters() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "30");
    run_ok(&["volume", "resetstats", "raid.p0", &conf]);
    let list = listed(&conf);
    assert_eq!(
        (list[0]["stats"]["writes"].as_u64(), list[0]["plexes"][0]["counters"]["writes"].as_u64()),
        (Some(30), Some(0))
    );
}

#[test]
fn corrupted_statistics_record_is_reported_and_the_set_still_assembles() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "30");
    for drive in ["d1.img", "d2.img", "d3.img", "d4.img"] {
        let path = dir.path().join(drive);
        let mut image = std::fs::read(&path).unwrap();
        let stats_area = volume::STATS_AREA_BYTES_AT as usize;
        image[stats_area + 60] ^= 0x01;
        image[stats_area + volume::STATS_SLOT_BYTES as usize + 60] ^= 0x01;
        std::fs::write(&path, image).unwrap();
    }
    let out = run_ok(&["volume", "list", "--json", &conf]);
    assert!(stderr(&out).contains("checksum mismatch"), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["volumes"][0]["stats"]["writes"], 0);
}

/// A statistics record crafted behind a right checksum, its sequence at
/// the end of its range (in its slot's parity) on every drive: `volume
/// list` names the field and uses the other slot; a run counts on and
/// saves without an overflow.
#[test]
fn a_statistics_sequence_past_its_bound_is_named_and_the_other_slot_used() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "30");
    // Creation saved sequences 1 and 2, the run 3: slot 1 holds the newest.
    let slot = (volume::STATS_AREA_BYTES_AT + volume::STATS_SLOT_BYTES) as usize;
    for drive in ["d1.img", "d2.img", "d3.img", "d4.img"] {
        let path = dir.path().join(drive);
        let mut image = std::fs::read(&path).unwrap();
        let record = &mut image[slot..slot + volume::STATS_SLOT_BYTES as usize];
        let body = u32::from_le_bytes(record[40..44].try_into().unwrap()) as usize;
        record[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        codec::Frame::zeroed(12).seal(&[], &mut record[..48 + body]);
        std::fs::write(&path, image).unwrap();
    }
    let out = run_ok(&["volume", "list", "--json", &conf]);
    let named = format!("statistics slot 1, byte {} (sequence)", slot + 32);
    assert!(stderr(&out).contains(&named), "{}", stderr(&out));
    random_writes(&conf, "10");
    assert_eq!(
        listed(&conf)[0]["stats"]["writes"],
        10,
        "the record of sequence 2 (no writes) and this run's"
    );
}

#[test]
fn list_v_shows_subdisk_offsets_and_devices() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let text = stdout(&run_ok(&["volume", "list", "-v", &conf]));
    assert!(text.contains("Plex raid.p0 at offset 1048576 bytes"), "{text}");
    let d3 = dir.path().join("d3.img");
    let on_drive = format!("Drive d3 ({}) at offset 135168 bytes", d3.display());
    assert!(text.contains(&on_drive), "{on_drive} missing from\n{text}");
    assert!(text.contains("Organization: raid5 leftasymmetric\tStripe size: 524288 bytes"), "{text}");
}

/// The whole volume written under a validation journal.
pub fn written_with_journal(dir: &tempfile::TempDir, conf: &str) -> String {
    let journal = dir.path().join("j").to_str().unwrap().to_string();
    run_ok(&[
        "run",
        "--target",
        conf,
        "--rw",
        "write",
        "--bs",
        "64k",
        "--validate",
        "--journal",
        &journal,
        "-q",
    ]);
    journal
}

#[test]
fn raid5_with_a_drive_file_deleted_validates_every_block() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let journal = written_with_journal(&dir, &conf);
    std::fs::remove_file(dir.path().join("d2.img")).unwrap();
    let out = run_ok(&["validate", "--target", &conf, "--journal", &journal]);
    assert!(stderr(&out).contains("drive 'd2' is missing"), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("0 lost, 0 misdirected, 0 corrupt, 0 zeroed"), "{text}");
    assert!(!text.contains(" 0 verified"), "{text}");
}

#[test]
fn list_with_a_drive_file_deleted_shows_it_down() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    std::fs::remove_file(dir.path().join("d4.img")).unwrap();
    let out = run_ok(&["volume", "list", &conf]);
    let d4 = stdout(&out).lines().find(|l| l.starts_with("D d4")).map(str::to_string);
    assert!(d4.as_deref().is_some_and(|l| l.contains("down") && l.contains("missing")), "{d4:?}");
}

#[test]
fn raid5_with_two_drive_files_deleted_fails_reads_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "20");
    std::fs::remove_file(dir.path().join("d1.img")).unwrap();
    std::fs::remove_file(dir.path().join("d3.img")).unwrap();
    let out = iolab(&["run", "--target", &conf, "--rw", "randread", "--bs", "4k", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("plex 'raid.p0' is down"), "{err}");
    assert!(err.contains("no plex can serve it (raid.p0 down)"), "{err}");
}

#[test]
fn a_failed_run_still_records_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    std::fs::remove_file(dir.path().join("d1.img")).unwrap();
    std::fs::remove_file(dir.path().join("d3.img")).unwrap();
    let out = iolab(&["run", "--target", &conf, "--rw", "randread", "--bs", "4k", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(listed(&conf)[0]["stats"]["errors"].as_u64() > Some(0), "the failed read is counted");
}

#[test]
fn resetstats_r_of_a_plex_clears_its_subdisks() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    random_writes(&conf, "30");
    run_ok(&["volume", "resetstats", "-r", "raid.p0", &conf]);
    let subdisks = listed(&conf)[0]["plexes"][0]["subdisks"].as_array().unwrap().clone();
    assert!(subdisks.iter().all(|sd| sd["stats"]["writes"] == 0), "{subdisks:?}");
}

#[test]
fn resetstats_of_an_unknown_object_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let out = iolab(&["volume", "resetstats", "nosuch.p9", &conf]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nosuch.p9"), "{}", stderr(&out));
}

#[test]
fn drive_returning_after_degraded_writes_is_stale_until_started() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(&dir);
    let (d2, away) = (dir.path().join("d2.img"), dir.path().join("d2.away"));
    std::fs::rename(&d2, &away).unwrap();
    random_writes(&conf, "50");
    std::fs::rename(&away, &d2).unwrap();
    let list = listed(&conf);
    assert_eq!(list[0]["plexes"][0]["subdisks"][1]["state"], "Stale", "d2 missed the writes");
    run_ok(&["volume", "start", "d2", &conf]);
    let check = run_ok(&["volume", "checkparity", "raid", &conf]);
    assert!(stdout(&check).contains("0 with wrong parity"), "{}", stdout(&check));
}

const RAID5_LOGGED: &str = "drive d1 device d1.img
drive d2 device d2.img
drive d3 device d3.img
drive d4 device d4.img
drive j device j.img
volume raid
  plex org raid5 64k log j
    sd length 0 drive d1
    sd length 0 drive d2
    sd length 0 drive d3
    sd length 0 drive d4
";

fn created_logged(dir: &tempfile::TempDir) -> String {
    let conf = dir.path().join("r5.conf");
    std::fs::write(&conf, RAID5_LOGGED).unwrap();
    let conf = conf.to_str().unwrap().to_string();
    let out = iolab(&["volume", "create", &conf, "--drive-size", "8m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("through the stripe log on drive j"), "{}", stdout(&out));
    conf
}

#[test]
fn a_logged_raid5_run_ends_clean_with_nothing_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created_logged(&dir);
    run_ok(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "4k", "--ios", "300", "-q"]);
    let out = iolab(&["volume", "checkparity", "raid.p0", &conf]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("replayed"), "{}", stderr(&out));
    assert!(iolab(&["volume", "printconfig", &conf]).stdout.windows(5).any(|w| w == b"log j"));
}

#[test]
fn a_row_update_lost_in_place_is_replayed_from_the_stripe_log_at_assembly() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let conf = created_logged(&dir);
    let paths = ["d1", "d2", "d3", "d4", "j"].map(|d| dir.path().join(format!("{d}.img")));
    let devs: Vec<Arc<dyn device::Device>> = paths
        .iter()
        .map(|p| Arc::new(device::FileDevice::open(p, &device::FileOptions::default()).unwrap()) as _)
        .collect();
    let set = volume::assemble(&devs).unwrap();
    let vol = Arc::clone(&set.volumes[0]);
    let (_, jdev, _) = vol.raid5_log_drive().unwrap();
    let area = (jdev.size_bytes() - volume::DATA_START_BYTES) / 4096 * 4096;
    let log = Arc::new(device::Slice::new(jdev, volume::DATA_START_BYTES, area).unwrap());
    let wal = blocklog::StripeLog::open(log, vol.raid5_homes().unwrap()).unwrap();
    vol.set_write_ahead_log(Arc::new(wal)).unwrap();
    device::Device::write_at(vol.as_ref(), &[0x5a; 4096], 0).unwrap();
    drop((vol, set));
    // The crash: the data write never reached d1, parity did.
    devs[0].write_at(&[0; 4096], volume::DATA_START_BYTES).unwrap();
    let out = iolab(&["volume", "checkparity", "raid.p0", &conf]);
    assert!(stderr(&out).contains("replayed 1 row updates"), "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0), "parity after replay: {}", stdout(&out));
}
