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
