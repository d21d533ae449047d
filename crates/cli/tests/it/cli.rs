//! The command line's contract: help and version on stdout with exit 0,
//! usage errors on stderr with exit 2, runtime failures exit 1.

use std::process::{Command, Output};

pub fn iolab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iolab")).args(args).output().expect("run iolab")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_exits_zero_and_names_the_tool() {
    let out = iolab(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("Usage: iolab"), "{}", stdout(&out));
}

#[test]
fn version_names_the_crate_version_the_commit_and_the_features() {
    let out = iolab(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with(&format!("iolab {} (commit ", env!("CARGO_PKG_VERSION"))), "{text}");
    assert!(text.contains("; features: "), "{text}");
}

#[test]
fn completions_and_the_manual_are_generated_from_the_flags() {
    let out = iolab(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("--nrfiles"), "the run flags are completed");
    let out = iolab(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).starts_with(".ie") && stdout(&out).contains(".TH iolab 1"), "{}", stdout(&out));
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = iolab(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("'frobnicate'"), "{}", stderr(&out));
}

#[test]
fn unknown_flag_is_a_usage_error_naming_the_flag() {
    let out = iolab(&["--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--frobnicate"), "{}", stderr(&out));
}

/// fio's spellings of the options iolab shares are its flags' aliases:
/// a fio command line's options mean what they mean to fio.
/// A TOML job file of one reading job, for flags to apply to.
fn reading_job(dir: &std::path::Path) -> String {
    let job = dir.join("job.toml");
    std::fs::write(&job, "[[job]]\nrw = \"read\"\n").unwrap();
    job.to_str().unwrap().to_string()
}

#[test]
fn fio_spellings_of_shared_options_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&[
        "run",
        &reading_job(dir.path()),
        "--filename",
        "/tmp/iolab-fio-spelling.img",
        "--size",
        "1m",
        "--numjobs",
        "2",
        "--ioengine=io_uring",
        "--direct=1",
        "--ramp_time",
        "1",
        "--randseed",
        "7",
        "--print-job",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let job = stdout(&out);
    for line in
        ["target = \"/tmp/iolab-fio-spelling.img\"", "threads = 2", "engine = \"uring\"", "direct = true"]
    {
        assert!(job.contains(line), "{line} missing from:\n{job}");
    }
    assert!(!std::path::Path::new("/tmp/iolab-fio-spelling.img").exists(), "--print-job made the target");
}

#[test]
fn direct_0_in_fios_spelling_turns_o_direct_off() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&["run", &reading_job(dir.path()), "--target", "mem:1m", "--direct=0", "--print-job"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("direct = false"), "{}", stdout(&out));
}

#[test]
fn a_fio_option_iolab_does_without_says_what_to_do() {
    let out = iolab(&["run", "--time_based", "--runtime", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("fio's --time_based: iolab runs for all of --runtime already"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_mistyped_subcommand_gets_the_nearest_name() {
    let out = iolab(&["rn"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean 'run'?"), "{}", stderr(&out));
}
