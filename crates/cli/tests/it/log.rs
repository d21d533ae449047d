//! `iolab run --log MODE`: jobs through the block log, from the outside.

use std::sync::Arc;

use blocklog::{LoggedDevice, Mode, Placement};
use device::{Device, FileDevice, FileOptions};

use crate::cli::{iolab, stderr, stdout};

#[test]
fn a_logged_run_reports_its_commits() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let args =
        ["run", "--target", img.to_str().unwrap(), "--size", "8m", "--log", "log", "--rw", "randwrite"];
    let out = iolab(&[&args[..], &["--flush-every", "10", "--ios", "200", "--json", "-", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let log = &doc["jobs"][0]["log"];
    assert_eq!(log["mode"], "log");
    assert_eq!(log["counters"]["commits"], 20, "{log}");
}

#[test]
fn a_file_made_for_a_logged_job_has_room_for_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let out = iolab(&[
        "run",
        "--target",
        img.to_str().unwrap(),
        "--size",
        "8m",
        "--log",
        "async",
        "--ios",
        "10",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 9 << 20);
}

#[test]
fn committed_records_left_in_the_log_are_replayed_at_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let options = FileOptions { create_bytes: Some(9 << 20), ..Default::default() };
    let file: Arc<dyn Device> = Arc::new(FileDevice::open(&img, &options).unwrap());
    let logged =
        LoggedDevice::format(file.clone(), Placement::Inside { log_bytes: 1 << 20 }, Mode::Log).unwrap();
    logged.write_at(&[0x5a; 4096], 8192).unwrap();
    logged.flush().unwrap();
    // Undo the home write, as a crash before it reached the disk would.
    file.write_at(&[0; 4096], (1 << 20) + 8192).unwrap();
    drop(logged);
    let out = iolab(&[
        "run",
        "--target",
        img.to_str().unwrap(),
        "--log",
        "log",
        "--rw",
        "read",
        "--ios",
        "1",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("replayed the block log"), "{}", stderr(&out));
    let mut back = [0u8; 4096];
    file.read_at(&mut back, (1 << 20) + 8192).unwrap();
    assert_eq!(back, [0x5a; 4096]);
}

#[test]
fn a_target_holding_a_log_is_not_written_without_the_log_or_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let target = img.to_str().unwrap();
    let out = iolab(&["run", "--target", target, "--size", "8m", "--log", "log", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = iolab(&["run", "--target", target, "--rw", "randwrite", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(2), "a refusal is a usage error");
    assert!(stderr(&out).contains("holds data (iolab block log)"), "{}", stderr(&out));
}

#[test]
fn another_log_size_on_an_existing_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let target = img.to_str().unwrap();
    let out = iolab(&["run", "--target", target, "--size", "8m", "--log", "log", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = iolab(&["run", "--target", target, "--log", "log", "--log-size", "2m", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("already holds a block log of 1048576 bytes"), "{}", stderr(&out));
}

#[test]
fn an_unknown_log_mode_is_a_usage_error() {
    let out = iolab(&["run", "--target", "mem:16m", "--log", "journal"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--log: 'journal' is not a mode"), "{}", stderr(&out));
}

#[test]
fn a_transaction_larger_than_half_the_log_fails_with_advice() {
    let out = iolab(&[
        "run",
        "--target",
        "mem:16m",
        "--log",
        "log",
        "--log-size",
        "520k",
        "--bs",
        "256k",
        "--ios",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--log-size"), "{}", stderr(&out));
}

#[test]
fn an_unknown_home_write_policy_is_a_usage_error() {
    let out = iolab(&["run", "--target", "mem:16m", "--log", "log", "--log-home", "never", "--ios", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--log-home: 'never' is not a choice"), "{}", stderr(&out));
}

#[test]
fn a_validated_run_through_the_log_is_checked_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let journal = dir.path().join("j");
    let (target, j) = (img.to_str().unwrap(), journal.to_str().unwrap());
    let run = [
        "run",
        "--target",
        target,
        "--size",
        "8m",
        "--log",
        "log",
        "--rw",
        "randwrite",
        "--flush-every",
        "8",
    ];
    let out = iolab(&[&run[..], &["--ios", "300", "--validate", "--journal", j, "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plain = iolab(&["validate", "--target", target, "--journal", j]);
    assert_eq!(plain.status.code(), Some(2));
    assert!(stderr(&plain).contains("pass --log"), "{}", stderr(&plain));
    let through = iolab(&["validate", "--target", target, "--journal", j, "--log"]);
    assert_eq!(through.status.code(), Some(0), "{}{}", stdout(&through), stderr(&through));
    assert!(stdout(&through).contains(" 0 lost"), "{}", stdout(&through));
}

#[test]
fn validating_through_a_log_that_is_not_there_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let journal = dir.path().join("j");
    let (target, j) = (img.to_str().unwrap(), journal.to_str().unwrap());
    let out =
        iolab(&["run", "--target", target, "--size", "4m", "--rw", "randwrite", "--ios", "50", "--validate"]);
    let out2 =
        iolab(&["run", "--target", target, "--rw", "randwrite", "--ios", "50", "--validate", "--journal", j]);
    assert_eq!((out.status.code(), out2.status.code()), (Some(0), Some(0)), "{}", stderr(&out2));
    let out = iolab(&["validate", "--target", target, "--journal", j, "--log"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("holds no iolab block log"), "{}", stderr(&out));
}

/// The case: a second `--log` run on a target an earlier one made
/// a log on is iolab's own log on iolab's own target: it is used again
/// (replayed first), as docs/log.md promises, without --force.
#[test]
fn a_second_logged_run_uses_the_log_an_earlier_one_made_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let target = img.to_str().unwrap();
    let run = ["run", "--target", target, "--log", "log", "--rw", "randwrite", "--ios", "50", "-q"];
    let first = iolab(&[&run[..], &["--size", "8m"]].concat());
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let second = iolab(&run);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
}

/// A log made inside the target is not replaced by one on a device of its
/// own by a run that names one: the refusal names the difference and the fix.
#[test]
fn a_log_device_for_a_target_with_a_log_inside_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let (img, logdev) = (dir.path().join("img"), dir.path().join("logdev"));
    let target = img.to_str().unwrap();
    let run = ["run", "--target", target, "--log", "log", "--rw", "randwrite", "--ios", "10", "-q"];
    let first = iolab(&[&run[..], &["--size", "8m"]].concat());
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    std::fs::File::create(&logdev).unwrap().set_len(2 << 20).unwrap();
    let out = iolab(&[&run[..], &["--log-device", logdev.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("made without --log-device; drop --log-device"), "{}", stderr(&out));
}

/// What the log protects is still checked: an iolab file system behind a
/// block log is not overwritten by a run through that log without --force.
#[test]
fn a_logged_run_over_a_file_system_behind_the_log_is_refused_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let target = img.to_str().unwrap();
    let mkfs = iolab(&["fs", "mkfs", target, "--size", "32m", "--block-log", "log"]);
    assert_eq!(mkfs.status.code(), Some(0), "{}", stderr(&mkfs));
    let out = iolab(&["run", "--target", target, "--log", "log", "--rw", "randwrite", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("protects data that holds iolab file system"), "{}", stderr(&out));
}

/// A log of three commits of one sector each (bytes 1, 2, 3 at sectors 0,
/// 1, 2 of the data), none home, the second's data damaged.
fn log_damaged_in_its_second_commit(img: &std::path::Path) -> Arc<dyn Device> {
    let options = FileOptions { create_bytes: Some(9 << 20), ..Default::default() };
    let file: Arc<dyn Device> = Arc::new(FileDevice::open(img, &options).unwrap());
    let logged =
        LoggedDevice::format(file.clone(), Placement::Inside { log_bytes: 1 << 20 }, Mode::Log).unwrap();
    let mut starts = Vec::new();
    for i in 0..3u8 {
        logged.write_at(&[i + 1; 512], u64::from(i) * 512).unwrap();
        logged.flush().unwrap();
        starts.push(logged.header().head);
    }
    drop(logged);
    // A byte of the second commit's data, after its 512-byte record header.
    let at = blocklog::AREA_START + starts[1] + 512;
    file.write_at(&[0xee; 512], at).unwrap();
    file
}

#[test]
fn a_damaged_log_refuses_every_run_until_repaired_and_then_serves() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let target = img.to_str().unwrap();
    let file = log_damaged_in_its_second_commit(&img);
    let run = ["run", "--target", target, "--log", "log", "--rw", "read", "--ios", "1", "-q"];
    for _ in 0..2 {
        let out = iolab(&run);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("stopped at damage in commit 2"), "{}", stderr(&out));
        assert!(stderr(&out).contains(&format!("iolab log repair --target {target}")), "{}", stderr(&out));
    }
    let mut home = [0u8; 1536];
    file.read_at(&mut home, 1 << 20).unwrap();
    assert_eq!((home[0], home[512], home[1024]), (1, 0, 0), "commit 3 is not replayed without commit 2");
    let repair = iolab(&["log", "repair", "--target", target]);
    assert_eq!(repair.status.code(), Some(0), "{}", stderr(&repair));
    assert!(stdout(&repair).contains("dropped commits 2 to 3 (2)"), "{}", stdout(&repair));
    let out = iolab(&run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = iolab(&["log", "repair", "--target", target]);
    assert!(stdout(&again).contains("is whole: nothing to repair"), "{}", stdout(&again));
}

#[test]
fn repairing_a_target_without_a_log_says_so() {
    let out = iolab(&["log", "repair", "--target", "mem:16m"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("holds no iolab block log"), "{}", stderr(&out));
}
