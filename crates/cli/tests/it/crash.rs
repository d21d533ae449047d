//! `iolab crash` from the outside.

use crate::cli::{iolab, stderr, stdout};

fn crash(stack: &str) -> (Option<i32>, serde_json::Value) {
    let out = iolab(&["crash", "--stack", stack, "--transactions", "80", "--states", "300", "--json", "-"]);
    let doc = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    (out.status.code(), doc)
}

#[test]
fn the_log_stack_keeps_its_promise_in_every_state() {
    let (code, doc) = crash("log");
    assert_eq!(doc["report"]["violations"], 0, "{doc}");
    assert!(doc["report"]["states_checked"].as_u64().unwrap() > 300, "{doc}");
    assert_eq!(code, Some(0));
}

#[test]
fn the_async_stack_is_caught_breaking_it_and_exits_1() {
    let (code, doc) = crash("async");
    assert!(doc["report"]["violations"].as_u64().unwrap() > 0, "{doc}");
    assert!(doc["report"]["first_violation"]["state"].is_u64(), "{doc}");
    assert_eq!(code, Some(1));
}

#[test]
fn the_report_names_the_command_that_rechecks_the_first_violation() {
    let out = iolab(&["crash", "--stack", "sync", "--transactions", "40", "--states", "100"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let line = text.lines().find(|l| l.starts_with("check it again: ")).unwrap_or_else(|| panic!("{text}"));
    let args: Vec<&str> = line["check it again: iolab ".len()..].split_whitespace().collect();
    let again = iolab(&args);
    assert!(stdout(&again).contains("states checked: 1 "), "{}", stdout(&again));
}

#[test]
fn a_region_too_small_for_a_transaction_is_a_usage_error() {
    let out = iolab(&["crash", "--size", "8k", "--block-size", "4k", "--max-blocks", "4"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("fewer than a transaction's 4"), "{}", stderr(&out));
}

fn crash_small(stack: &str) -> (Option<i32>, serde_json::Value) {
    let out = iolab(&["crash", "--stack", stack, "--transactions", "60", "--states", "150", "--json", "-"]);
    let doc = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    (out.status.code(), doc)
}

#[test]
fn raid5_without_a_log_loses_data_to_the_write_hole_when_a_drive_fails() {
    let (code, doc) = crash_small("raid5");
    let r = &doc["report"];
    let hole = r["corrupt"].as_u64().unwrap() + r["lost"].as_u64().unwrap();
    assert!(hole > 0, "{doc}");
    assert_eq!(code, Some(1));
}

#[test]
fn raid5_with_a_stripe_log_loses_nothing_in_any_state_or_drive_failure() {
    let (code, doc) = crash_small("raid5-log");
    assert_eq!(doc["report"]["violations"], 0, "{doc}");
    assert_eq!(code, Some(0));
}

#[test]
fn a_log_on_its_own_device_keeps_the_promise_with_either_home_write_policy() {
    for home in ["checkpoint", "commit"] {
        let out = iolab(&[
            "crash",
            "--stack",
            "log-separate",
            "--log-home",
            home,
            "--transactions",
            "80",
            "--states",
            "200",
            "--json",
            "-",
        ]);
        let doc: serde_json::Value =
            serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        assert_eq!(doc["report"]["violations"], 0, "{home}: {doc}");
        assert_eq!(out.status.code(), Some(0));
    }
}

#[test]
fn a_state_past_the_last_one_is_a_usage_error() {
    let out =
        iolab(&["crash", "--stack", "sync", "--transactions", "8", "--states", "10", "--state", "1000"]);
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("--state 1000: this run has states 0 to"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("violations"), "{}", stdout(&out));
}

#[test]
fn the_file_system_under_sync_survives_every_crash_state() {
    let out = iolab(&[
        "crash",
        "--stack",
        "fs-sync",
        "--transactions",
        "60",
        "--sync-every",
        "6",
        "--states",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("violations: 0"), "{}", stdout(&out));
}

#[test]
fn the_file_system_under_async_is_caught_damaged() {
    let args = [
        "crash",
        "--stack",
        "fs-async",
        "--transactions",
        "200",
        "--sync-every",
        "10",
        "--states",
        "400",
        "--json",
        "-",
    ];
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "iolab-crash-fs");
    assert!(doc["damage_left"].as_u64().unwrap() > 0, "{doc}");
}

#[test]
fn four_writers_at_once_under_sync_leave_no_violation() {
    let args = [
        "crash",
        "--stack",
        "fs-sync",
        "--writers",
        "4",
        "--transactions",
        "80",
        "--sync-every",
        "8",
        "--states",
        "60",
        "--json",
        "-",
    ];
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["writers"], 4, "{doc}");
    assert_eq!(doc["violations"], 0, "{doc}");
}

#[test]
fn a_state_with_several_writers_is_a_usage_error() {
    let out = iolab(&["crash", "--stack", "fs-sync", "--writers", "4", "--state", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--state with --writers 4"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--writers 1"), "{}", stderr(&out));
}

#[test]
fn writers_on_a_block_stack_are_a_usage_error() {
    let out = iolab(&["crash", "--stack", "log", "--writers", "4"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--writers 4: only the fs-sync"), "{}", stderr(&out));
}

#[test]
fn no_writer_at_all_is_a_usage_error() {
    let out = iolab(&["crash", "--stack", "fs-sync", "--writers", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--writers 0"), "{}", stderr(&out));
}

/// Several writers' violations name no state to check again: the report
/// says to run the same flags again instead.
#[test]
fn a_violation_with_several_writers_names_no_state_to_recheck() {
    let args = ["crash", "--stack", "fs-async", "--writers", "4", "--transactions", "160", "--states", "100"];
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("4 writers at once"), "{text}");
    assert!(!text.contains("--state "), "{text}");
    assert!(text.contains("check it again: not state by state"), "{text}");
}
