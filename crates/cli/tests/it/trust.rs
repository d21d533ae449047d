//! The trust guarantees of `iolab run`: reads never measure holes without
//! saying so, a run says how it was measured, a usage error writes
//! nothing, reading needs no write access, and two runs do not share a
//! logged target.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::cli::{iolab, stderr, stdout};

fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn random_file(dir: &tempfile::TempDir, name: &str, bytes: usize) -> PathBuf {
    let path = dir.path().join(name);
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ bytes as u64;
    let data: Vec<u8> = (0..bytes)
        .map(|_| {
            // xorshift64: data no file-system signature matches.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, &data).unwrap();
    path
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

#[test]
fn a_read_job_on_a_new_sparse_file_lays_it_out_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--size",
        "8m",
        "--rw",
        "randread",
        "--ios",
        "100",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(allocated_bytes(&path) >= 8 << 20, "every block of the region is allocated");
    assert!(stdout(&out).contains("layout: laid out 8.0 MiB of holes"), "{}", stdout(&out));
}

#[test]
fn layout_never_marks_reads_of_holes_in_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    let args =
        ["run", "--target", path.to_str().unwrap(), "--size", "8m", "--rw", "randread", "--ios", "100"];
    let out = iolab(&[&args[..], &["--layout", "never", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("read*"), "{}", stdout(&out));
    assert!(stdout(&out).contains("reads of never-written blocks"), "{}", stdout(&out));
    assert_eq!(allocated_bytes(&path), 0, "nothing laid out");
}

#[test]
fn layout_never_marks_reads_of_holes_in_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    let args =
        ["run", "--target", path.to_str().unwrap(), "--size", "8m", "--rw", "randread", "--ios", "100"];
    let out = iolab(&[&args[..], &["--layout", "never", "--json", "-", "-q"]].concat());
    let doc = json(&out);
    assert_eq!(doc["jobs"][0]["runs"][0]["reads_from_unwritten"], true);
    assert_eq!(doc["jobs"][0]["target"]["layout"]["unwritten_bytes"], 8 << 20);
}

/// A job that only writes reads no hole: no warning of holes read, no
/// mark in the JSON (with --layout never or the default alike).
#[test]
fn a_write_only_job_is_not_warned_of_holes_it_never_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    for layout in ["auto", "never"] {
        let args =
            ["run", "--target", path.to_str().unwrap(), "--size", "8m", "--rw", "randwrite", "--ios", "10"];
        let out = iolab(&[&args[..], &["--layout", layout, "--json", "-"]].concat());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(!stderr(&out).contains("was never written"), "{layout}: {}", stderr(&out));
        assert_eq!(json(&out)["jobs"][0]["runs"][0]["reads_from_unwritten"], false, "{layout}");
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn a_write_only_job_leaves_holes_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--size",
        "8m",
        "--rw",
        "write",
        "--ios",
        "1",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(allocated_bytes(&path) < 1 << 20, "a write job does not lay out by default");
}

#[test]
fn layout_fills_an_existing_files_holes_with_zeros_keeping_its_contents() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.img");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xa5; 4096], 1 << 20).unwrap();
    let before = std::fs::read(&path).unwrap();
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "randread", "--ios", "100", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(allocated_bytes(&path) >= 8 << 20);
    assert!(std::fs::read(&path).unwrap() == before, "the file reads as it did");
}

#[test]
fn a_target_on_tmpfs_is_said_to_measure_memory() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("/dev/shm is a tmpfs on Linux");
    let path = dir.path().join("t.img");
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--size", "4m", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("lives on tmpfs: this measures memory"), "{}", stdout(&out));
}

#[test]
fn a_buffered_run_says_it_drops_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_file(&dir, "data.img", 1 << 20);
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--rw",
        "randread",
        "--ios",
        "10",
        "--json",
        "-",
        "-q",
    ]);
    let doc = json(&out);
    assert_eq!(doc["jobs"][0]["target"]["cache"], "dropped");
    assert!(doc["jobs"][0]["target"]["media"][0]["filesystem"].as_str().is_some());
}

#[test]
fn keep_cache_is_reported_as_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_file(&dir, "data.img", 1 << 20);
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--rw",
        "randread",
        "--ios",
        "10",
        "--keep-cache",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("page cache kept between runs (--keep-cache)"), "{}", stdout(&out));
}

#[test]
fn a_direct_run_says_it_bypasses_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_file(&dir, "data.img", 1 << 20);
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--rw",
        "randread",
        "--ios",
        "10",
        "--direct",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("O_DIRECT (page cache bypassed)"), "{}", stdout(&out));
}

#[test]
fn a_log_over_a_too_small_file_leaves_it_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_file(&dir, "x.img", 4 << 20);
    let before = std::fs::read(&path).unwrap();
    let args =
        ["run", "--target", path.to_str().unwrap(), "--size", "64m", "--log", "log", "--force", "--ios", "1"];
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(std::fs::read(&path).unwrap() == before, "not a byte written");
}

#[test]
fn a_usage_error_after_a_new_file_was_made_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    let args =
        ["run", "--target", path.to_str().unwrap(), "--size", "4m", "--sector-size", "4096", "--bs", "3k"];
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!path.exists(), "the file made for the run is gone");
}

#[test]
fn a_json_path_in_a_missing_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.img");
    let json = dir.path().join("no/such/dir/out.json");
    let out =
        iolab(&["run", "--target", path.to_str().unwrap(), "--size", "4m", "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json"), "{}", stderr(&out));
    assert!(!path.exists(), "no target made for a run that cannot report");
}

#[test]
fn an_error_log_that_is_a_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        iolab(&["run", "--target", "mem:4m", "--validate", "--error-log", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--error-log"), "{}", stderr(&out));
}

#[test]
fn an_empty_file_with_a_size_is_sized_without_asking_for_a_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.img");
    std::fs::write(&path, b"").unwrap();
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--size",
        "4m",
        "--rw",
        "write",
        "--ios",
        "10",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("give a size"), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 << 20);
}

#[test]
fn an_empty_file_sized_for_a_refused_run_is_emptied_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.img");
    std::fs::write(&path, b"").unwrap();
    let out = iolab(&[
        "run",
        "--target",
        path.to_str().unwrap(),
        "--size",
        "4m",
        "--sector-size",
        "4096",
        "--bs",
        "3k",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

/// Makes a file immutable (even root cannot open it for writing) until
/// dropped.
struct Immutable(PathBuf);

impl Immutable {
    fn new(path: &Path) -> Immutable {
        let status = std::process::Command::new("chattr").arg("+i").arg(path).status().expect("chattr runs");
        assert!(
            status.success(),
            "chattr +i {}: the test needs ext4 or xfs under the temporary directory",
            path.display()
        );
        Immutable(path.to_path_buf())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

#[test]
fn a_read_job_on_a_file_nobody_may_write_runs() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = random_file(&dir, "ro.img", 1 << 20);
    let _guard = Immutable::new(&path);
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "randread", "--ios", "100", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_read_job_that_must_lay_out_a_file_nobody_may_write_says_how_to_go_on() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("sparse.img");
    std::fs::File::create(&path).unwrap().set_len(1 << 20).unwrap();
    let _guard = Immutable::new(&path);
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "randread", "--ios", "100", "-q"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--layout never"), "{}", stderr(&out));
}

#[test]
fn a_logged_target_another_process_holds_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_file(&dir, "x.img", 8 << 20);
    let held = device::FileDevice::open(&path, &device::FileOptions::default()).unwrap();
    held.lock(device::LockKind::Exclusive).unwrap();
    let out =
        iolab(&["run", "--target", path.to_str().unwrap(), "--log", "log", "--force", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("in use by process {}", std::process::id())), "{}", stderr(&out));
}

#[test]
fn a_plain_file_another_process_holds_runs_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_file(&dir, "x.img", 1 << 20);
    let held = device::FileDevice::open(&path, &device::FileOptions::default()).unwrap();
    held.lock(device::LockKind::Exclusive).unwrap();
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "randread", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning:") && stderr(&out).contains("in use by"), "{}", stderr(&out));
}

#[test]
fn a_journal_left_by_an_earlier_run_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    std::fs::create_dir(&journal).unwrap();
    std::fs::write(journal.join("iolab.journal"), b"an earlier run's").unwrap();
    let path = dir.path().join("new.img");
    let args = ["run", "--target", path.to_str().unwrap(), "--size", "4m", "--validate", "--journal"];
    let out = iolab(&[&args[..], &[journal.to_str().unwrap(), "--ios", "10"]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds a journal from an earlier run"), "{}", stderr(&out));
    assert!(!path.exists(), "no target made, nothing laid out");
}

#[test]
fn a_read_job_on_a_volume_of_sparse_drives_lays_the_drives_out() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("s.conf");
    let mut text = String::new();
    for i in 0..3 {
        text += &format!("drive d{i} device d{i}.img\n");
    }
    text += "volume s\nplex org striped 64k\n";
    for i in 0..3 {
        text += &format!("sd length 0 drive d{i}\n");
    }
    std::fs::write(&conf, text).unwrap();
    let out = iolab(&["volume", "create", conf.to_str().unwrap(), "--drive-size", "8m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = iolab(&["run", "--target", conf.to_str().unwrap(), "--rw", "randread", "--ios", "100", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in 0..3 {
        let drive = dir.path().join(format!("d{i}.img"));
        assert!(allocated_bytes(&drive) >= 6 << 20, "drive {i}'s data area is allocated");
    }
}
