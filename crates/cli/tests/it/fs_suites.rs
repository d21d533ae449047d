//! The suites file-system developers run, against an `iolab fs mount`:
//! pjdfstest (POSIX semantics; the Rust one, `cargo install pjdfstest`)
//! in full under every policy, stress-ng's file-system stressors and
//! dbench. A failure or a skip not listed with its reason in
//! docs/suite-exceptions.toml fails the test, and so does a listed one
//! that no longer happens. Where a suite is missing each test says it
//! skipped; CI installs them and sets IOLAB_REQUIRE_SUITES.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli::{iolab, stderr};
use crate::fs::{fuse_usable, Mounted};

const EXCEPTIONS: &str = include_str!("../../../../docs/suite-exceptions.toml");

/// What docs/suite-exceptions.toml allows of `suite`: (test, reason) by
/// outcome ("failed", "skipped", or "sometimes": may fail or pass).
fn allowed(suite: &str, outcome: &str) -> BTreeMap<String, String> {
    let all: toml::Table = EXCEPTIONS.parse().expect("docs/suite-exceptions.toml is TOML");
    let listed = all.get(suite).and_then(|s| s.get(outcome)).and_then(|o| o.as_table());
    let reasons = listed.map(|t| t.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())));
    let reasons: BTreeMap<String, String> = reasons.into_iter().flatten().collect();
    for (test, reason) in &reasons {
        assert!(reason.len() > 20, "{suite}.{outcome}.{test}: an exception needs its reason");
    }
    reasons
}

/// Fails unless what `suite` reported as `outcome` is exactly what the
/// exceptions allow.
fn as_listed(suite: &str, outcome: &str, found: &[String], context: &str) {
    let listed: Vec<String> = allowed(suite, outcome).into_keys().collect();
    let unlisted: Vec<&String> = found.iter().filter(|t| !listed.contains(t)).collect();
    let gone: Vec<&String> = listed.iter().filter(|t| !found.contains(t)).collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "{suite}: {outcome} but not in docs/suite-exceptions.toml: {unlisted:?}; listed there but no longer \
         {outcome}: {gone:?}\n{context}"
    );
}

/// `program` on PATH or in cargo's bin directory, or a skip (a failure
/// when CI set IOLAB_REQUIRE_SUITES).
fn suite(program: &str) -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .map(|c| c.join("bin"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).chain(cargo_bin).map(|d| d.join(program)).find(|p| p.is_file());
    if found.is_none() {
        let missing = format!("{program} is not installed");
        assert!(
            std::env::var_os("IOLAB_REQUIRE_SUITES").is_none(),
            "IOLAB_REQUIRE_SUITES is set but {missing}"
        );
        eprintln!("skipped: {missing}");
    }
    found
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var_os("IOLAB_REQUIRE_SUITES").is_none(),
            "IOLAB_REQUIRE_SUITES is set but not root"
        );
        eprintln!("skipped: pjdfstest switches users, which needs root");
    }
    root
}

/// A fresh image mounted at `dir`/mnt under `policy`, open to every user.
fn mount(dir: &Path, policy: &str, extra: &[&str]) -> (Mounted, PathBuf) {
    let (image, mnt) = (dir.join("fs.img"), dir.join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "512m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut args = vec!["--allow-other"];
    args.extend_from_slice(extra);
    (Mounted::start(&image, &mnt, policy, &args), mnt)
}

/// pjdfstest's configuration: the Linux features iolab has; users that
/// Debian has (its default list names a `tests` user no system has); a
/// nap long enough that a changed time shows at the file system's
/// nanosecond times; remounting read-only (its EROFS tests) only when
/// asked, since a test before them leaves a descriptor open for writing.
fn pjdfstest_config(dir: &Path, remount: bool) -> PathBuf {
    let path = dir.join("pjdfstest.toml");
    let text = format!(
        "[features]\nposix_fallocate = {{}}\nutime_now = {{}}\nutimensat = {{}}\nrename_ctime = {{}}\n\n\
         [settings]\nnaptime = 0.02\nallow_remount = {remount}\n\n\
         [dummy_auth]\nentries = [[\"nobody\", \"nogroup\"], [\"daemon\", \"daemon\"]]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// pjdfstest's verdict per test name ("ok", "FAILED", "skipped").
fn pjdfstest_outcomes(out: &Output) -> BTreeMap<String, String> {
    let text = String::from_utf8_lossy(&out.stdout);
    let verdicts = text.lines().filter_map(|line| {
        let mut words = line.split_whitespace();
        let (name, verdict) = (words.next()?, words.next()?);
        let is_verdict = matches!(verdict, "ok" | "FAILED" | "skipped") && words.next().is_none();
        (is_verdict && name.contains("::")).then(|| (name.to_string(), verdict.to_string()))
    });
    verdicts.collect()
}

/// Runs pjdfstest (tests named by `patterns`, all when empty) in a fresh
/// mount under `policy`, and returns its verdicts and output.
fn pjdfstest(
    policy: &str,
    transport: &str,
    remount: bool,
    patterns: &[&str],
) -> Option<(BTreeMap<String, String>, String)> {
    if !(fuse_usable() && root()) {
        return None;
    }
    let program = suite("pjdfstest")?;
    let dir = tempfile::tempdir().unwrap();
    // pjdfstest's other users must reach the mount point.
    crate::fs::run("chmod", &["0755", dir.path().to_str().unwrap()]);
    let config = pjdfstest_config(dir.path(), remount);
    // Another file system, for its EXDEV tests: the host's.
    let secondary = dir.path().join("secondary");
    std::fs::create_dir(&secondary).unwrap();
    let (mounted, mnt) = mount(dir.path(), policy, &["--transport", transport]);
    let out = Command::new(program)
        .arg("-c")
        .arg(&config)
        .arg("-p")
        .arg(&mnt)
        .arg("-s")
        .arg(&secondary)
        .args(patterns)
        .current_dir(&mnt)
        .output()
        .unwrap();
    mounted.unmount();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Some((pjdfstest_outcomes(&out), text))
}

fn with(outcomes: &BTreeMap<String, String>, verdict: &str) -> Vec<String> {
    outcomes.iter().filter(|(_, v)| *v == verdict).map(|(t, _)| t.clone()).collect()
}

/// The whole suite but its read-only remounts, under `policy`.
fn pjdfstest_passes(policy: &str, transport: &str) {
    let Some((outcomes, text)) = pjdfstest(policy, transport, false, &[]) else { return };
    let passed = with(&outcomes, "ok").len();
    assert!(passed > 300, "pjdfstest under {policy} passed only {passed} tests:\n{text}");
    as_listed("pjdfstest", "failed", &with(&outcomes, "FAILED"), &text);
    let skipped: Vec<String> =
        with(&outcomes, "skipped").into_iter().filter(|t| !t.contains("erofs")).collect();
    as_listed("pjdfstest", "skipped", &skipped, &text);
}

#[test]
fn pjdfstest_passes_under_sync() {
    pjdfstest_passes("sync", "dev");
}

#[test]
fn pjdfstest_passes_under_async() {
    pjdfstest_passes("async", "auto");
}

#[test]
fn pjdfstest_passes_under_softdep() {
    pjdfstest_passes("softdep", "dev");
}

#[test]
fn pjdfstest_passes_under_log() {
    pjdfstest_passes("log", "auto");
}

/// Its EROFS tests, which remount the mount read-only and back, run on
/// their own: a test of the full run leaves a descriptor open for writing
/// (`posix_fallocate::affected_only_create_flags` never closes what it
/// opens), and the kernel refuses a read-only remount while one is.
#[test]
fn pjdfstest_read_only_remounts_pass() {
    let Some((outcomes, text)) = pjdfstest("log", "auto", true, &["erofs"]) else { return };
    let passed = with(&outcomes, "ok").len();
    assert!(passed >= 10 && passed == outcomes.len(), "{passed} of {} passed:\n{text}", outcomes.len());
}

/// stress-ng's file-system stressors that need nothing but a directory,
/// one second each.
const STRESSORS: [&str; 36] = [
    "access",
    "chdir",
    "chmod",
    "chown",
    "copy-file",
    "dentry",
    "dir",
    "dirdeep",
    "dirmany",
    "dup",
    "fallocate",
    "fcntl",
    "fiemap",
    "file-ioctl",
    "filename",
    "flock",
    "fpunch",
    "fsize",
    "fstat",
    "getdent",
    "handle",
    "hdd",
    "io",
    "iomix",
    "lease",
    "link",
    "locka",
    "lockf",
    "lockofd",
    "mknod",
    "open",
    "rename",
    "symlink",
    "touch",
    "utime",
    "xattr",
];

/// Each stressor in a mount under `policy`: it must neither fail nor
/// skip (stress-ng skips what the file system says it does not support)
/// unless the exceptions list it.
fn stress_ng_passes(policy: &str) {
    if !fuse_usable() {
        return;
    }
    let Some(program) = suite("stress-ng") else { return };
    let (mut failed, mut skipped, mut said) = (Vec::new(), Vec::new(), String::new());
    for stressor in STRESSORS {
        // A mount of its own: what one stressor leaves (a write lost at
        // writeback, say) shows in its own verdict, not in the next's
        // syncfs.
        let dir = tempfile::tempdir().unwrap();
        let (mounted, mnt) = mount(dir.path(), policy, &[]);
        // iomix fallocates its file first, 1 GiB unless told: more than
        // the image holds (stress-ng counts ENOSPC as "out of resources").
        let sized: &[&str] = if stressor == "iomix" { &["--iomix-bytes", "64M"] } else { &[] };
        let out = Command::new(&program)
            .args([&format!("--{stressor}"), "1", "-t", "1"])
            .args(sized)
            .arg("--temp-path")
            .arg(&mnt)
            .output()
            .unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let skip = text.contains("skipping stressor")
            || text.contains("will be skipped")
            || out.status.code() == Some(3);
        // 0: passed; 7: passed with metrics it does not trust.
        let fail = !skip && (!matches!(out.status.code(), Some(0 | 7)) || text.contains("fail:"));
        if skip {
            skipped.push(stressor.to_string());
        }
        if fail {
            failed.push(stressor.to_string());
        }
        if skip || fail {
            said.push_str(&format!("== {stressor} ({:?})\n{text}", out.status.code()));
        }
        mounted.detach();
    }
    let sometimes = allowed("stress-ng", "sometimes");
    failed.retain(|s| !sometimes.contains_key(s));
    as_listed("stress-ng", "failed", &failed, &said);
    as_listed("stress-ng", "skipped", &skipped, &said);
}

#[test]
fn stress_ng_file_system_stressors_pass_under_sync() {
    stress_ng_passes("sync");
}

#[test]
fn stress_ng_file_system_stressors_pass_under_log() {
    stress_ng_passes("log");
}

/// dbench (a file server's mix of creates, writes, renames, locks and
/// deletes from its client.txt) for a few seconds with two clients.
fn dbench_runs(policy: &str) {
    if !fuse_usable() {
        return;
    }
    let Some(program) = suite("dbench") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mounted, mnt) = mount(dir.path(), policy, &[]);
    let out = Command::new(program).arg("-D").arg(&mnt).args(["-t", "3", "2"]).output().unwrap();
    mounted.detach();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("Throughput"), "dbench under {policy}: {out:?}");
}

#[test]
fn dbench_runs_under_softdep() {
    dbench_runs("softdep");
}

#[test]
fn dbench_runs_under_async() {
    dbench_runs("async");
}
