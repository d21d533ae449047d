//! `iolab volume` and volumes as `iolab run` targets, end to end on files.

use crate::cli::{iolab, stderr, stdout};

const RAID5: &str = "# the seed's RAID-5: four drives, 512k stripes
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
    assert_eq!(out.status.code(), Some(1));
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
