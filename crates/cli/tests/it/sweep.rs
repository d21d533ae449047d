//! `iolab sweep stripes`: every row, and plex columns that are the volume
//! layer's own counters.

use crate::cli::{iolab, stderr, stdout};

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
    (stdout(&out), serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap())
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
