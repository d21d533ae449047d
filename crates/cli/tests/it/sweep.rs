//! `iolab sweep stripes`: every row, and plex columns that are the volume
//! layer's own counters.

use crate::cli::{iolab, stderr, stdout};

/// The sweep's table and its rows as the JSON gives them.
fn sweep(dir: &tempfile::TempDir, extra: &[&str]) -> (String, serde_json::Value) {
    let drives: Vec<String> =
        (1..=4).map(|i| dir.path().join(format!("d{i}")).to_str().unwrap().to_string()).collect();
    let json = dir.path().join("sweep.json");
    let mut args = vec!["sweep", "stripes", "--drives"];
    args.extend(drives.iter().map(String::as_str));
    args.extend(["--drive-size", "8m", "--size", "1m", "--seeks", "64", "--json", json.to_str().unwrap()]);
    args.extend(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!((&doc["schema"], &doc["version"]), (&"iolab-sweep-stripes".into(), &2.into()));
    (stdout(&out), doc["rows"].clone())
}

#[test]
fn bonnie_sweep_prints_every_layout_of_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _) = sweep(&dir, &[]);
    for layout in ["ufs", "s1k", "s8k", "s64k", "s256k", "s512k", "s4m", "r512k"] {
        assert!(text.lines().any(|l| l.starts_with(layout)), "{layout} missing:\n{text}");
    }
    assert!(text.contains("Writes    Reads   Mblock  Mstripe"), "{text}");
}

#[test]
fn plex_columns_are_the_volume_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (_, rows) = sweep(&dir, &[]);
    for row in rows.as_array().unwrap().iter().skip(1) {
        let phases = row["bonnie"][0]["phases"].as_array().unwrap();
        let writes: u64 = phases.iter().map(|p| p["device_writes"].as_u64().unwrap()).sum();
        let reads: u64 = phases.iter().map(|p| p["device_reads"].as_u64().unwrap()).sum();
        assert_eq!(row["plex"]["writes"].as_u64(), Some(writes), "{}", row["layout"]);
        assert_eq!(row["plex"]["reads"].as_u64(), Some(reads), "{}", row["layout"]);
    }
}

#[test]
fn small_stripes_cross_more_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let (_, rows) = sweep(&dir, &[]);
    let mblock = |i: usize| rows[i]["plex"]["multiblock"].as_u64().unwrap();
    assert!(mblock(1) > mblock(2), "1k stripes cross more than 8k ones");
    assert_eq!(mblock(3), 0, "8 KiB transfers never cross 64k stripe boundaries");
}

#[test]
fn fs_workload_sweep_prints_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let (text, rows) = sweep(&dir, &["--workload", "fs", "--runtime", "100ms"]);
    assert_eq!(rows.as_array().unwrap().len(), 8);
    assert!(text.starts_with("layout"), "{text}");
}

#[test]
fn raid5_needs_three_drives() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (a, b) = (d("a"), d("b"));
    let out = iolab(&["sweep", "stripes", "--drives", &a, &b, "--drive-size", "4m", "--size", "1m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("RAID-5 needs at least 3 drives"), "{}", stderr(&out));
}

#[test]
fn repeated_sweep_keeps_every_run_and_shows_the_spread() {
    let dir = tempfile::tempdir().unwrap();
    let (text, rows) = sweep(&dir, &["--repeat", "2", "--stripes", "64k", "--raid5", "none"]);
    assert_eq!(rows[1]["bonnie"].as_array().unwrap().len(), 2);
    for label in ["s64k:med", "s64k:min", "s64k:max"] {
        assert!(text.lines().any(|l| l.starts_with(label)), "{label} missing:\n{text}");
    }
}

/// `iolab sweep journal` on a new 4 MiB file, short runs, with `extra`.
fn journal_sweep(dir: &tempfile::TempDir, extra: &[&str]) -> std::process::Output {
    let target = dir.path().join("t.img");
    let journals = dir.path().join("journals");
    let mut args = vec!["sweep", "journal", "--target", target.to_str().unwrap(), "--size", "4m"];
    args.extend(["--journal-dir", journals.to_str().unwrap(), "--runtime", "100ms"]);
    args.extend(extra);
    iolab(&args)
}

#[test]
fn journal_sweep_prints_every_arm_of_the_seed_and_leaves_no_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = journal_sweep(&dir, &["--repeat", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for arm in ["off", "validate", "no-preread", "sync", "async", "group", "group-preread"] {
        assert!(text.lines().any(|l| l.split_whitespace().next() == Some(arm)), "{arm} missing:\n{text}");
    }
    assert_eq!(std::fs::read_dir(dir.path().join("journals")).unwrap().count(), 0);
}

#[test]
fn journal_sweep_json_gives_each_run_its_ratio_to_off() {
    let dir = tempfile::tempdir().unwrap();
    let out = journal_sweep(&dir, &["--arms", "off,group", "--repeat", "2", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "iolab-sweep-journal");
    let arms = doc["arms"].as_array().unwrap();
    assert_eq!(arms.iter().map(|a| a["arm"].as_str().unwrap()).collect::<Vec<_>>(), ["off", "group"]);
    let off: Vec<f64> =
        arms[0]["runs"].as_array().unwrap().iter().map(|r| r["iops"].as_f64().unwrap()).collect();
    for (run, off) in arms[1]["runs"].as_array().unwrap().iter().zip(&off) {
        let ratio = run["iops"].as_f64().unwrap() / off;
        assert!((run["vs_off"].as_f64().unwrap() - ratio).abs() < 1e-9, "{run}");
        assert!(run["journal"]["commits"].as_u64().unwrap() > 0, "{run}");
    }
}

#[test]
fn journal_sweep_refuses_an_unknown_arm_naming_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = journal_sweep(&dir, &["--arms", "off,fast"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("'fast' is not an arm; use off, validate"), "{}", stderr(&out));
    assert!(!dir.path().join("t.img").exists());
}

#[test]
fn journal_sweep_ring_arm_commits_through_the_rings() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        journal_sweep(&dir, &["--arms", "group-ring", "--engine", "uring", "--repeat", "1", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &doc["arms"][0]["runs"][0];
    assert!(run["journal"]["ring_commits"].as_u64().unwrap() > 0, "{run}");
    assert_eq!(run["vs_off"], serde_json::Value::Null, "no off arm ran");
}

#[test]
fn journal_sweep_ring_arm_on_the_sync_engine_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = journal_sweep(&dir, &["--arms", "group-ring", "--engine", "sync"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--arms: group-ring: --journal-commit: the sync engine has no ring"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn policies_sweep_prints_the_seeds_table_and_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let out = iolab(&[
        "sweep",
        "policies",
        "--files",
        "60",
        "--copies",
        "2",
        "--repeat",
        "1",
        "--size",
        "64m",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for row in ["tar ", "rm ", "sync", "softdep", "log", "async", "x1.00"] {
        assert!(text.contains(row), "{row} missing from\n{text}");
    }
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "iolab-sweep-policies");
    assert_eq!(doc["columns"].as_array().unwrap().len(), 4);
    assert!(
        doc["columns"][0]["tar"]["runs"][0]["sync_writes"].as_u64().unwrap() > 0,
        "sync writes synchronously"
    );
}

/// A small sweep with `extra` arguments (one copy of a 40-file tree, one
/// repeat); its table, and its JSON document.
fn small_policies_sweep(extra: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let mut args =
        vec!["sweep", "policies", "--files", "40", "--copies", "1", "--repeat", "1", "--size", "64m"];
    args.extend(["--json", json.to_str().unwrap()]);
    args.extend(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (stdout(&out), doc)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: kernel file systems on loop devices need root");
    }
    root
}

#[test]
fn a_kernel_column_runs_gnu_tar_on_a_new_ext4_beside_the_policies() {
    if !is_root() {
        return;
    }
    let (text, doc) = small_policies_sweep(&["--policies", "async", "--kernel", "ext4-nojournal"]);
    assert!(text.contains("ext4-nojournal: mkfs.ext4 -q -F -O ^has_journal on a loop device"), "{text}");
    let column = &doc["columns"][1];
    assert_eq!(column["name"], "ext4-nojournal");
    let run = &column["tar"]["runs"][0];
    assert!(run["blocks_written"].as_u64().unwrap() > 0, "the loop device's counters: {run}");
    assert!(run["sync_writes"].is_null(), "a kernel file system's synchronous writes are not known: {run}");
    assert!(column["tar"]["vs_async"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_fuse_driver_runs_gnu_tar_through_a_mount_of_each_policy() {
    if !crate::fs::fuse_usable() {
        return;
    }
    let (text, doc) = small_policies_sweep(&["--policies", "softdep,async", "--driver", "fuse"]);
    assert!(text.contains("mounted through FUSE (served"), "{text}");
    let run = &doc["columns"][0]["tar"]["runs"][0];
    assert!(run["blocks_written"].as_u64().unwrap() > 0, "{run}");
}

#[test]
fn a_directory_column_works_in_a_directory_of_its_own_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (text, doc) = small_policies_sweep(&["--policies", "none", "--dir", dir.path().to_str().unwrap()]);
    assert!(text.contains("a directory on "), "{text}");
    assert!(doc["columns"][0]["rm"]["runs"][0]["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "its work directory is gone");
}

#[test]
fn policies_sweep_names_what_is_wrong_with_its_columns() {
    for (args, says) in [
        (&["--kernel", "ext3"][..], "choose from"),
        (&["--policies", "none"][..], "nothing to compare"),
        (&["--dir", "/nonexistent/iolab"][..], "--dir /nonexistent/iolab"),
        (&["--disk", "sim:hdd", "--kernel", "ext4"][..], "in-process only"),
        (&["--disk", "sim:hdd", "--driver", "fuse"][..], "in-process only"),
        (&["--disk", "sim:hdd,data=discard"][..], "reads back what it writes"),
        (&["--disk", "hdd"][..], "name a simulated disk"),
        (&["--log-size", "4k", "--files", "10", "--copies", "1", "--repeat", "1"][..], "too small"),
        (&["--archive", "/nonexistent/t.tar", "--shape", "deep"][..], "--archive replaces it"),
        (&["--archive", "/nonexistent/t.tar", "--files", "10"][..], "--archive replaces it"),
        (&["--shape", "bushy"][..], "possible values"),
        (&["--shape", "large", "--files", "2000"][..], "at most 64 files"),
    ] {
        let out = iolab(&[&["sweep", "policies"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn policies_sweep_refuses_an_unknown_policy_and_a_target_holding_data() {
    let out = iolab(&["sweep", "policies", "--policies", "wapbl,async"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("wapbl"), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.img");
    assert!(iolab(&["fs", "mkfs", data.to_str().unwrap(), "--size", "16m"]).status.success());
    let before = std::fs::read(&data).unwrap();
    let out =
        iolab(&["sweep", "policies", "--target", data.to_str().unwrap(), "--files", "10", "--repeat", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert!(std::fs::read(&data).unwrap() == before, "the file system is as it was");
}

#[test]
fn an_interrupted_policies_sweep_stops_and_removes_what_it_made() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["sweep", "policies", "--files", "40", "--copies", "1", "--repeat", "50", "--size", "64m"])
        .args(["--policies", "async", "--dir", dir.path().to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("repeat 1/50"), "{first}");
    // SAFETY: kill with a child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("interrupted")), "{rest:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "its work directory is gone");
}

#[test]
fn a_sweeps_chart_and_page_come_from_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let (plots, page) = (dir.path().join("plots"), dir.path().join("p.html"));
    let (_, doc) = small_policies_sweep(&["--policies", "log,async", "--plot", plots.to_str().unwrap()]);
    let svg = std::fs::read_to_string(plots.join("sweep-policies.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("async"), "{svg}");
    let json = dir.path().join("p.json");
    std::fs::write(&json, doc.to_string()).unwrap();
    let out = iolab(&["report", json.to_str().unwrap(), "-o", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("iolab-sweep-policies") && html.contains("<svg"),
        "the page has the sweep's table and chart"
    );
}

#[test]
fn a_policies_sweep_on_a_simulated_disk_prints_the_same_table_every_time() {
    let (a, _) = small_policies_sweep(&["--disk", "sim:hdd"]);
    let (b, _) = small_policies_sweep(&["--disk", "sim:hdd"]);
    assert_eq!(a, b);
    assert!(a.contains("MODELED disk time on sim:hdd"), "{a}");
}

#[test]
fn on_a_simulated_disk_sync_waits_for_the_disk_and_async_does_not() {
    let (_, doc) = small_policies_sweep(&["--disk", "sim:hdd,wce=off", "--policies", "sync,async"]);
    assert!(doc["modeled"].as_str().is_some_and(|m| m.starts_with("sim:hdd")), "{doc}");
    let tar = |c: usize| doc["columns"][c]["tar"]["median_s"].as_f64().unwrap();
    // Each of sync's ordered writes waits for the medium (milliseconds);
    // async's go out together at the unmount.
    assert!(tar(0) > 5.0 * tar(1), "sync {} s, async {} s", tar(0), tar(1));
}

/// A generated tree of another shape runs, and the table names it.
#[test]
fn policies_sweep_runs_a_flat_tree_and_names_its_shape() {
    let (table, doc) = small_policies_sweep(&["--shape", "flat", "--policies", "async"]);
    assert!(table.contains("a generated tree of shape flat (seed 1, 40 files)"), "{table}");
    assert_eq!(doc["entries"], 41, "40 files and their one directory");
}
