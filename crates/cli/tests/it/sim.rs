//! Simulated disks from the command line: figures in virtual time, the
//! same on every run, marked as modeled; what cannot run on them refused.

use crate::cli::{iolab, stderr, stdout};

const JOB: &[&str] =
    &["run", "--target", "sim:hdd,wce=off", "--rw", "randrw", "--iodepth", "8", "--runtime", "5s"];

#[test]
fn the_same_command_prints_the_same_bytes() {
    let (a, b) = (iolab(JOB), iolab(JOB));
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(stdout(&a), stdout(&b));
}

#[test]
fn the_figures_are_marked_as_modeled() {
    let out = iolab(JOB);
    let text = stdout(&out);
    assert!(text.contains("virtual engine"), "{text}");
    assert!(text.contains("modeled, not measured"), "{text}");
}

#[test]
fn the_json_names_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut args = JOB.to_vec();
    args.extend(["-q", "--json", json.to_str().unwrap()]);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let run = &doc["jobs"][0]["runs"][0];
    assert_eq!(run["engine"], "virtual");
    assert!(run["modeled"].as_str().is_some_and(|m| m.starts_with("sim:hdd")), "{run}");
}

#[test]
fn another_engine_is_refused() {
    let out = iolab(&["run", "--target", "sim:ssd", "--engine", "sync", "--runtime", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("use --engine auto or virtual"), "{}", stderr(&out));
}

#[test]
fn a_bad_parameter_is_named() {
    let out = iolab(&["run", "--target", "sim:hdd,rpm=fast", "--runtime", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("rpm"), "{}", stderr(&out));
}

#[test]
fn commands_timed_by_the_wall_clock_refuse_a_simulated_disk() {
    let out = iolab(&["bonnie", "--target", "sim:hdd", "--size", "64m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("simulated disks run under iolab run"), "{}", stderr(&out));
}

#[test]
fn the_block_log_over_a_simulated_disk_runs_in_its_virtual_time() {
    let out = iolab(&[
        "run",
        "--target",
        "sim:hdd",
        "--log",
        "log",
        "--runtime",
        "2s",
        "--rw",
        "randwrite",
        "--threads",
        "4",
        "--flush-every",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("sync engine, 4 threads") && text.contains("modeled, not measured"), "{text}");
    assert!(text.contains("block log: mode log"), "{text}");
}

#[test]
fn a_validated_run_keeps_its_journal_on_a_simulated_disk_of_its_own() {
    let out = iolab(&[
        "run",
        "--target",
        "sim:ssd",
        "--size",
        "1g",
        "--validate",
        "--journal",
        "sim:hdd,wce=off",
        "--journal-mode",
        "sync",
        "--rw",
        "randrw",
        "--threads",
        "8",
        "--runtime",
        "2s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("0 bad") && text.contains("journal: "), "{text}");
    assert!(text.contains("modeled, not measured"), "{text}");
}

#[test]
fn a_journal_must_be_simulated_with_a_simulated_target_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let out = iolab(&[
        "run",
        "--target",
        "sim:ssd",
        "--validate",
        "--journal",
        journal.to_str().unwrap(),
        "--runtime",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("on a simulated disk of its own"), "{}", stderr(&out));
    let out = iolab(&["run", "--target", "mem:16m", "--validate", "--journal", "sim:hdd", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("goes with a simulated target"), "{}", stderr(&out));
}

#[test]
fn a_stripe_sweep_runs_on_simulated_drives() {
    let out = iolab(&[
        "sweep",
        "stripes",
        "--drives",
        "sim:hdd",
        "sim:hdd",
        "--workload",
        "fs",
        "--stripes",
        "64k",
        "--raid5",
        "none",
        "--size",
        "1g",
        "--runtime",
        "2s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("s64k") && text.contains("modeled, not measured"), "{text}");
}

#[test]
fn a_stripe_sweep_refuses_bonnie_and_mixed_drives_on_simulated_ones() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d1");
    for (args, says) in [
        (vec!["sim:hdd", "sim:hdd", "--raid5", "none"], "--workload fs"),
        (
            vec![
                "sim:hdd",
                file.to_str().unwrap(),
                "--workload",
                "fs",
                "--drive-size",
                "64m",
                "--raid5",
                "none",
            ],
            "all simulated",
        ),
    ] {
        let out = iolab(&[&["sweep", "stripes", "--drives"][..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn the_journal_sweep_runs_on_simulated_disks_and_a_sync_journal_on_a_disk_without_cache_costs() {
    let out = iolab(&[
        "sweep",
        "journal",
        "--target",
        "sim:ssd",
        "--journal-disk",
        "sim:hdd,wce=off",
        "--runtime",
        "1s",
        "--repeat",
        "1",
        "--arms",
        "off,sync",
        "--iodepth",
        "8",
        "--json",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["modeled"].as_str().is_some_and(|m| m.contains("sim:hdd,wce=off")), "{doc}");
    let sync = &doc["arms"][1];
    assert_eq!(sync["arm"], "sync");
    assert!(sync["median_vs_off"].as_f64().unwrap() < 0.3, "{sync}");
}

/// The journal sweep's `arms` (one run of 1 s each) on the second seed's
/// data device, a sweep for each of the journal `disks`, with `extra`
/// arguments.
fn seed_sweep(disks: &[&str], arms: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["sweep", "journal", "--target", "sim:ssd,channels=2,write_us=115,plp=on"];
    for disk in disks {
        args.extend(["--journal-disk", disk]);
    }
    args.extend(["--runtime", "1s", "--repeat", "1", "--arms", arms]);
    args.extend(extra);
    iolab(&args)
}

/// Off a terminal, each run of the sweep is a line as it begins, in
/// order, the power cut's last.
#[test]
fn the_journal_sweep_says_each_run_as_it_begins() {
    let out = seed_sweep(&["sim:hdd"], "off,sync", &["--power-cut", "500ms"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said: Vec<String> =
        stderr(&out).lines().filter(|l| l.starts_with("iolab: sweep: ")).map(String::from).collect();
    assert_eq!(said.len(), 3, "{said:?}");
    assert_eq!(said[..2], ["iolab: sweep: off (1/1)", "iolab: sweep: sync (1/1)"]);
    assert!(said[2].starts_with("iolab: sweep: power cut at 0.500 s"), "{said:?}");
}

#[test]
fn the_journal_sweep_on_simulated_disks_prints_the_same_bytes_every_run() {
    let sweep = || seed_sweep(&["sim:hdd,flush=ignore"], "validate,sync,group", &["--json", "-"]);
    let (a, b) = (sweep(), sweep());
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    // The same bytes but for when each run started (`host.started_at`):
    // a fact of the run, not of the modeled disks.
    let unstarted = |out: &std::process::Output| {
        let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let docs = match doc.as_array_mut() {
            Some(docs) => docs.iter_mut().collect::<Vec<_>>(),
            None => vec![&mut doc],
        };
        for d in docs {
            d["host"]["started_at"] = serde_json::Value::Null;
        }
        doc
    };
    assert_eq!(unstarted(&a), unstarted(&b));
}

/// The arms `off` and `sync` for the second seed's two servers, a journal
/// disk with its cache off and one whose cache lies.
fn two_servers(extra: &[&str]) -> std::process::Output {
    seed_sweep(&["sim:hdd,wce=off", "sim:hdd,flush=ignore"], "off,sync", extra)
}

#[test]
fn one_sweep_shows_both_servers_and_what_a_power_cut_leaves_on_each() {
    let out = two_servers(&["--power-cut", "500ms", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let docs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts: Vec<&str> = (0..2).map(|i| docs[i]["power_cut"]["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["ok", "acknowledged records lost"], "{docs}");
    assert_eq!(docs[1]["journal_dir"], "sim:hdd,flush=ignore");
}

#[test]
fn the_servers_are_printed_side_by_side() {
    let out = two_servers(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let side = text.split("# side by side").nth(1).unwrap_or_else(|| panic!("{text}"));
    let header = side.lines().nth(1).unwrap();
    assert!(header.contains("sim:hdd,wce=off") && header.contains("sim:hdd,flush=ignore"), "{side}");
}

#[test]
fn a_power_cut_outside_the_run_or_on_a_real_disk_is_refused() {
    let out = two_servers(&["--power-cut", "2s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("falls outside the run"), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let out = sweep_a_file(dir.path(), &["--journal-dir", journal.to_str().unwrap(), "--power-cut", "1s"]);
    assert!(stderr(&out).contains("cuts the power of simulated disks"), "{}", stderr(&out));
}

/// A journal sweep of a 16 MiB file in `dir` with `extra` arguments,
/// which must refuse it (exit status 2) without making the file.
fn sweep_a_file(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let file = dir.join("t.img");
    let mut args = vec!["sweep", "journal", "--target", file.to_str().unwrap(), "--size", "16m"];
    args.extend(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!file.exists(), "nothing made");
    out
}

#[test]
fn the_journal_sweep_pairs_a_simulated_target_with_a_simulated_journal_disk() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        iolab(&["sweep", "journal", "--target", "sim:ssd", "--journal-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--journal-disk"), "{}", stderr(&out));
    let out = sweep_a_file(dir.path(), &["--journal-disk", "sim:hdd"]);
    assert!(stderr(&out).contains("goes with a simulated target"), "{}", stderr(&out));
}

/// A validated run on a simulated target with a sync journal on `journal`,
/// its power cut 2 s in.
fn cut_power(journal: &str) -> std::process::Output {
    iolab(&[
        "run",
        "--target",
        "sim:ssd,plp=on",
        "--size",
        "256m",
        "--validate",
        "--journal",
        journal,
        "--journal-mode",
        "sync",
        "--no-preread",
        "--rw",
        "randwrite",
        "--threads",
        "8",
        "--runtime",
        "3s",
        "--power-cut",
        "2s",
    ])
}

#[test]
fn after_a_power_cut_an_honest_journal_disk_holds_every_acknowledged_record() {
    let out = cut_power("sim:hdd,wce=off");
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("verdict: ok"), "{}", stdout(&out));
}

/// The journal's marks say which of its records a flush made durable: the
/// records the lying cache lost among them are damage, not a short tail.
#[test]
fn after_a_power_cut_a_journal_disk_whose_cache_lies_has_lost_acknowledged_records() {
    let out = cut_power("sim:hdd,flush=ignore");
    assert_eq!(out.status.code(), Some(4), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("bytes of records it had made durable"), "{}", stdout(&out));
}

/// The number before `word` in the line of `text` that starts with
/// `prefix`.
fn count_before(text: &str, prefix: &str, word: &str) -> f64 {
    let line =
        text.lines().find(|l| l.starts_with(prefix) && l.contains(word)).unwrap_or_else(|| panic!("{text}"));
    let before = &line[..line.find(word).unwrap()];
    before.split_whitespace().last().unwrap().parse().unwrap()
}

#[test]
fn a_power_cut_falls_its_time_after_the_run_starts_not_after_the_journal_is_made() {
    let out = cut_power("sim:hdd,wce=off");
    let text = stdout(&out);
    // The journal is made (zero-filled on its disk) before the run; the
    // cut falls 2 s into the run's 3 s, with two thirds of its records.
    let written = count_before(&text, "journal: ", "records in");
    let replayed = count_before(&text, "journal: ", "records replayed");
    let share = replayed / written;
    assert!((0.6..0.73).contains(&share), "{replayed} of {written} records: {share:.2}\n{text}");
}

#[test]
fn a_power_cut_needs_a_simulated_journal() {
    let out = iolab(&["run", "--target", "sim:ssd", "--validate", "--runtime", "1s", "--power-cut", "500ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--journal sim:"), "{}", stderr(&out));
}

/// `iolab crash` of `stack` with power cuts on simulated disks `disk`,
/// `transactions` of them; its exit status and report.
fn crash_on(stack: &str, disk: &str, transactions: &str) -> (Option<i32>, String) {
    let out = iolab(&["crash", "--stack", stack, "--disk", disk, "--transactions", transactions]);
    (out.status.code(), format!("{}{}", stdout(&out), stderr(&out)))
}

#[test]
fn the_block_log_keeps_its_promise_at_every_power_cut_of_an_honest_disk_cache() {
    let (code, text) = crash_on("log", "sim:hdd", "40");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("power cuts in the model checked: 50 (10 after a flush, 40 after"), "{text}");
    assert!(text.contains("violations: 0"), "{text}");
}

#[test]
fn a_disk_cache_that_ignores_flushes_breaks_the_block_logs_promise() {
    let (code, text) = crash_on("log", "sim:hdd,flush=ignore", "40");
    assert_eq!(code, Some(1), "{text}");
    assert!(!text.contains("violations: 0"), "{text}");
}

/// A log lost with the power cut is the harness's own: the report says
/// it did not survive, not "format one first".
#[test]
fn a_log_the_power_cut_lost_is_named_as_the_harness_own() {
    let (_, text) = crash_on("log", "sim:hdd,flush=ignore", "40");
    assert!(!text.contains("format one first"), "{text}");
    assert!(text.contains("did not survive the crash"), "{text}");
}

#[test]
fn writes_in_place_on_a_cached_disk_tear_transactions_and_in_order_ones_do_not() {
    let (code, text) = crash_on("async", "sim:hdd", "200");
    assert_eq!(code, Some(1), "{text}");
    assert!(!text.contains("torn transactions 0"), "{text}");
    let (code, text) = crash_on("async", "sim:hdd,wce=off", "200");
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_power_cut_state_is_checked_again_alone_and_alike() {
    let (_, text) = crash_on("async", "sim:hdd", "200");
    let again = text
        .lines()
        .find_map(|l| l.strip_prefix("check it again: iolab "))
        .unwrap_or_else(|| panic!("{text}"));
    let args: Vec<&str> = again.split_whitespace().collect();
    let out = iolab(&args);
    let alone = stdout(&out);
    assert!(
        alone.contains("power cuts in the model checked: 1 ") && alone.contains("violations: 1 "),
        "{alone}"
    );
    let first = |t: &str| t.lines().find(|l| l.starts_with("first violation")).map(str::to_string);
    assert_eq!(first(&alone), first(&text));
}

#[test]
fn power_cuts_are_refused_for_file_system_stacks_and_real_disks() {
    let (code, text) = crash_on("fs-sync", "sim:hdd", "40");
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("recorded devices only"), "{text}");
    let (code, text) = crash_on("log", "/dev/sda", "40");
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("give a simulated disk"), "{text}");
}
