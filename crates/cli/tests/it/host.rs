//! The `host` object every JSON document carries (docs/json.md): when the
//! command started, the machine, and iolab's command line as given.

use crate::cli::{iolab, stderr, stdout};

/// The arguments of a tiny run on memory that prints its document.
const RUN: [&str; 8] = ["run", "--target", "mem:4m", "--ios", "50", "--json", "-", "-q"];

/// Runs iolab with `args` and returns the document it printed.
fn document(args: &[&str]) -> serde_json::Value {
    let out = iolab(args);
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
}

/// RFC 3339 in UTC to the second, as "2026-11-27T16:20:05Z".
fn is_rfc3339_utc(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
    b.len() == 20
        && digits.iter().all(|&i| b[i].is_ascii_digit())
        && [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'Z')]
            .iter()
            .all(|&(i, c)| b[i] == c)
}

/// The argv iolab was given: its own path, then the arguments.
fn argv(args: &[&str]) -> serde_json::Value {
    let mut all = vec![env!("CARGO_BIN_EXE_iolab")];
    all.extend_from_slice(args);
    serde_json::json!(all)
}

#[test]
fn a_run_document_says_when_it_started_in_rfc3339() {
    let doc = document(&RUN);
    let at = doc["host"]["started_at"].as_str().unwrap_or_else(|| panic!("{doc}"));
    assert!(is_rfc3339_utc(at), "{at}");
}

#[test]
fn a_run_document_holds_the_command_line_as_given() {
    assert_eq!(document(&RUN)["host"]["command_line"], argv(&RUN));
}

#[test]
fn a_run_document_counts_at_least_one_cpu() {
    let doc = document(&RUN);
    assert!(doc["host"]["cpus"].as_u64().is_some_and(|n| n >= 1), "{doc}");
}

#[test]
fn a_crash_document_carries_the_same_host_facts() {
    let args = ["crash", "--stack", "log", "--transactions", "20", "--states", "50", "--json", "-"];
    let host = document(&args)["host"].clone();
    assert!(host["started_at"].as_str().is_some_and(is_rfc3339_utc), "{host}");
    assert_eq!(host["command_line"], argv(&args), "{host}");
    assert!(host["cpus"].as_u64().is_some_and(|n| n >= 1), "{host}");
}
