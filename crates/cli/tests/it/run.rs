//! `iolab run` from the outside: exit codes, refusals, JSON.

use crate::cli::{iolab, stderr, stdout};

#[test]
fn run_on_memory_prints_the_table() {
    let out = iolab(&["run", "--target", "mem:16m", "--ios", "500", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("lat mean"), "{text}");
    // Bandwidth and latency carry their units, as fio prints them.
    assert!(text.contains("iB/s") && text.contains("s "), "{text}");
}

#[test]
fn percentage_over_100_is_a_usage_error_naming_the_flag() {
    let out = iolab(&["run", "--target", "mem:16m", "--rw", "randrw", "--rwmixread", "120"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--rwmixread: 120 is over 100"), "{}", stderr(&out));
}

#[test]
fn unknown_unit_is_a_usage_error_naming_the_flag() {
    let out = iolab(&["run", "--target", "mem:16m", "--bs", "4x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--bs: '4x' is not a size"), "{}", stderr(&out));
}

#[test]
fn zero_depth_is_a_usage_error() {
    let out = iolab(&["run", "--target", "mem:16m", "--iodepth", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--iodepth"), "{}", stderr(&out));
}

#[test]
fn region_past_the_end_is_a_usage_error() {
    let out = iolab(&["run", "--target", "mem:16m", "--offset", "8m", "--size", "16m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--size: offset 8388608 + size 16777216 runs past the end"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_file_without_size_says_how_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope");
    let out = iolab(&["run", "--target", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("does not exist; give --size"), "{}", stderr(&out));
    assert!(!path.exists(), "nothing is created without a size");
}

/// A missing name under /dev is a device that is not there: no file is
/// offered, with or without --size.
#[test]
fn a_missing_device_is_named_and_no_file_is_made_in_dev() {
    for extra in [&[][..], &["--size", "1m"][..]] {
        let mut args = vec!["run", "--target", "/dev/iolab-no-such-device", "--runtime", "1"];
        args.extend(extra);
        let out = iolab(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&out).contains("no such device"), "{}", stderr(&out));
        assert!(!std::path::Path::new("/dev/iolab-no-such-device").exists(), "{extra:?}");
    }
}

/// A directory of files iolab did not make says so, rather than asking
/// for a size as if it were empty.
#[test]
fn a_directory_of_other_files_says_they_are_not_iolabs() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        std::fs::write(dir.path().join(name), b"x").unwrap();
    }
    let out = iolab(&["run", "--target", dir.path().to_str().unwrap(), "--runtime", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("the 3 files it holds are not iolab's") && err.contains("--nrfiles"), "{err}");
}

#[test]
fn missing_file_with_size_is_created_sparse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new");
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--size", "4m", "--ios", "100", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 << 20);
}

fn file_with_ext4_magic(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("fs.img");
    let mut image = vec![0u8; 1 << 20];
    image[1080] = 0x53;
    image[1081] = 0xef;
    std::fs::write(&path, &image).unwrap();
    path
}

#[test]
fn writing_over_a_file_system_is_refused_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_ext4_magic(&dir);
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "randwrite", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(2), "a refusal is a usage error");
    assert!(stderr(&out).contains("holds data (ext2/ext3/ext4 file system)"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"));
    let image = std::fs::read(&path).unwrap();
    assert!(image[..1080].iter().all(|&b| b == 0), "nothing was written");
}

#[test]
fn reading_a_file_system_needs_no_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_ext4_magic(&dir);
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "randread", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn force_allows_writing_over_a_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_ext4_magic(&dir);
    let out = iolab(&["run", "--target", path.to_str().unwrap(), "--rw", "write", "--force", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn json_document_has_the_documented_shape() {
    let out = iolab(&["run", "--target", "mem:16m", "--ios", "300", "--repeat", "3", "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(doc["schema"], "iolab-run");
    assert_eq!(doc["version"], 3);
    let job = &doc["jobs"][0];
    assert_eq!(job["target"]["media"][0]["kind"], "memory");
    assert_eq!(job["target"]["cache"], "none");
    assert_eq!(job["target"]["layout"]["laid_out_bytes"], 16 << 20);
    assert_eq!(job["runs"][0]["reads_from_unwritten"], false);
    assert_eq!(job["runs"].as_array().unwrap().len(), 3);
    let run = &job["runs"][0];
    let ios = run["read"]["ios"].as_u64().unwrap() + run["write"]["ios"].as_u64().unwrap();
    assert_eq!(ios, 300);
    for key in ["iops", "mib_per_s"] {
        assert!(run["read"][key].is_number(), "{key}");
    }
    for key in ["min_us", "mean_us", "stddev_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"] {
        assert!(run["write"]["latency"][key].is_number(), "{key}");
    }
    assert!(job["summary"]["read"]["iops"]["median"].is_number());
    assert_eq!(job["summary"]["runs"], 3);
}

/// `--percentiles`, `--log-dir` and `--output-format csv` on one run: the
/// chosen percentiles in the document, fio's three logs written, and a
/// header and a line on standard output.
#[test]
fn the_distribution_goes_out_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (json, logs) = (dir.path().join("r.json"), dir.path().join("logs"));
    let out = iolab(&[
        "run",
        "--target",
        "mem:16m",
        "--ios",
        "2000",
        "--name",
        "j",
        "--percentiles",
        "50,99.5",
        "--json",
        json.to_str().unwrap(),
        "--log-dir",
        logs.to_str().unwrap(),
        "--output-format",
        "csv",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("job,run,target,") && lines[1].starts_with("j,1,mem:16m,"), "{lines:?}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pcts = &doc["jobs"][0]["runs"][0]["read"]["latency"]["percentiles"];
    assert_eq!((pcts[0]["pct"].as_f64(), pcts[1]["pct"].as_f64()), (Some(50.0), Some(99.5)), "{pcts}");
    for kind in ["bw", "iops", "lat"] {
        assert!(logs.join(format!("j_{kind}.1.log")).is_file(), "{kind}");
    }
    let out = iolab(&["run", "--target", "mem:16m", "--ios", "10", "--percentiles", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// With `--repeat 2`, the CSV has a line per run, numbered in its `run`
/// column.
#[test]
fn csv_numbers_each_repeat_of_a_job() {
    let out = iolab(&[
        "run",
        "--target",
        "mem:8m",
        "--ios",
        "200",
        "--name",
        "j",
        "--repeat",
        "2",
        "--output-format",
        "csv",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs: Vec<String> =
        stdout(&out).lines().skip(1).map(|l| l.split(',').take(2).collect::<Vec<_>>().join(",")).collect();
    assert_eq!(runs, ["j,1", "j,2"]);
}

#[test]
fn validated_run_checks_blocks_and_exits_zero_when_clean() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("errors.json");
    let out = iolab(&[
        "run",
        "--target",
        "mem:8m",
        "--validate",
        "--bs",
        "fs",
        "--ios",
        "3000",
        "-q",
        "--error-log",
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(" 0 bad"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(&log).unwrap().trim(), "[]");
}

#[test]
fn validation_options_without_validate_are_a_usage_error() {
    let out = iolab(&["run", "--target", "mem:8m", "--reread"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--reread: only applies with --validate"), "{}", stderr(&out));
}

/// A run on a directory: `args` after `run --target DIR`.
fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    iolab(&[&["run", "--target", dir.to_str().unwrap()][..], args].concat())
}

#[test]
fn a_directory_target_spreads_the_job_over_nrfiles_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["--nrfiles", "3", "--size", "3m", "--rw", "randrw", "--ios", "300"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("(3 files)"), "{}", stdout(&out));
    for n in 0..3 {
        let len = std::fs::metadata(dir.path().join(format!("iolab.0.{n}"))).unwrap().len();
        assert_eq!(len, 1 << 20, "iolab.0.{n} holds a third of the region");
    }
    let again = run_in(dir.path(), &["--nrfiles", "3", "--rw", "randread", "--ios", "100"]);
    assert_eq!(again.status.code(), Some(0), "the files are taken as they are: {}", stderr(&again));
}

#[test]
fn fio_jobs_sharing_a_directory_each_get_files_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("two.fio");
    let text = format!(
        "[global]\ndirectory={}\nrw=randrw\nbs=4k\nnumber_ios=50\n[a]\nsize=1m\n[b]\nsize=2m\n",
        dir.path().display()
    );
    std::fs::write(&job, text).unwrap();
    let out = iolab(&["run", job.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let len = |name: &str| std::fs::metadata(dir.path().join(name)).map(|m| m.len()).ok();
    assert_eq!((len("a.0.0"), len("b.0.0"), len("iolab.0.0")), (Some(1 << 20), Some(2 << 20), None));
}

#[test]
fn a_directory_target_names_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("iolab.0.0"), vec![1u8; 4096]).unwrap();
    let out = run_in(dir.path(), &["--nrfiles", "2", "--size", "2m", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("iolab.0.0: holds 4096 bytes"), "{}", stderr(&out));
    assert!(!dir.path().join("iolab.0.1").exists(), "nothing is made when a file does not fit");
    let file = dir.path().join("iolab.0.0");
    let out = iolab(&["run", "--target", file.to_str().unwrap(), "--nrfiles", "2", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("only applies to a directory"), "{}", stderr(&out));
}

#[test]
fn a_refused_run_on_a_directory_removes_the_files_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["--nrfiles", "2", "--size", "2m", "--engine", "uring", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--engine sync"), "a set of files has no one descriptor: {}", stderr(&out));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{}", stderr(&out));
}

#[test]
fn other_commands_on_a_directory_say_what_takes_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&["fs", "mkfs", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--nrfiles"), "{}", stderr(&out));
}

/// A run's charts (`--plot`) and its page (`iolab report`): SVG files for
/// the latency histogram and the two time series, and a page holding the
/// run's figures; a file that is not a result document is refused by name.
#[test]
fn plots_and_a_report_page_come_from_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let (json, plots, page) =
        (dir.path().join("r.json"), dir.path().join("plots"), dir.path().join("r.html"));
    let out = iolab(&[
        "run",
        "--target",
        "mem:16m",
        "--ios",
        "3000",
        "--name",
        "j",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for chart in ["j-latency.svg", "j-iops.svg", "j-latency-time.svg"] {
        let svg = std::fs::read_to_string(plots.join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{chart}");
    }
    let out = iolab(&["report", json.to_str().unwrap(), "-o", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let iops = doc["jobs"][0]["runs"][0]["read"]["iops"].as_f64().unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!("{iops:.1}")), "the page holds the run's read IOPS {iops:.1}");
    let out = iolab(&["report", page.to_str().unwrap(), "-o", dir.path().join("x.html").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a JSON document"), "{}", stderr(&out));
}

#[test]
fn a_backward_skip_is_said_in_the_heading_and_the_json_and_issued_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.iolog");
    let run = ["run", "--target", "mem:1m", "--rw", "read", "--bs", "4k", "--skip", "-8k", "--ios", "3"];
    let out = iolab(&[&run[..], &["--write-iolog", log.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("bs 4k, skip -8KiB (backwards)"), "{}", stdout(&out));
    let offsets: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains(" read "))
        .map(|l| l.split_whitespace().nth(3).unwrap().to_string())
        .collect();
    assert_eq!(offsets, ["1040384", "1036288", "1032192"]);
    let out = iolab(&[&run[..], &["--json", "-", "-q"]].concat());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["jobs"][0]["runs"][0]["skip_bytes"], -8192);
}

#[test]
fn a_skip_on_a_random_pattern_is_a_usage_error_naming_the_flag() {
    let out = iolab(&["run", "--target", "mem:1m", "--rw", "randread", "--skip", "8k"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--skip: applies to sequential requests"), "{}", stderr(&out));
}

#[test]
fn a_random_trim_punches_holes_in_a_file_and_is_reported_as_trims() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("t.img");
    let target = image.to_str().unwrap();
    let fill = iolab(&[
        "run", "--target", target, "--size", "16m", "--rw", "write", "--bs", "1m", "--ios", "16", "-q",
    ]);
    assert_eq!(fill.status.code(), Some(0), "{}", stderr(&fill));
    let before = std::fs::metadata(&image).unwrap().blocks();
    let out = iolab(&[
        "run", "--target", target, "--rw", "randtrim", "--bs", "64k", "--ios", "64", "--json", "-", "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &doc["jobs"][0]["runs"][0];
    assert_eq!((run["trim"]["ios"].as_u64(), run["write"]["ios"].as_u64()), (Some(64), Some(0)), "{run}");
    assert_eq!(run["rw"], "randtrim");
    assert!(std::fs::metadata(&image).unwrap().blocks() < before, "no hole was punched");
}

#[test]
fn trims_are_in_the_per_second_series_the_csv_and_the_repeat_spread() {
    let run =
        ["run", "--target", "mem:4m", "--rw", "randtrim", "--bs", "64k", "--ios", "50", "--repeat", "2"];
    let out = iolab(&[&run[..], &["--json", "-", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = &doc["jobs"][0];
    let per_second: u64 = job["runs"][0]["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["trim"]["ios"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 50, "{}", job["runs"][0]["per_second"]);
    assert!(job["summary"]["trim"]["iops"]["median"].as_f64().unwrap() > 0.0, "{}", job["summary"]);
    let csv = iolab(&[&run[..], &["--output-format", "csv", "-q"]].concat());
    let text = stdout(&csv);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let first: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == "trim_ios").expect("a trim_ios column");
    assert_eq!(first[at], "50", "{text}");
}

#[test]
fn a_run_without_trims_has_none_in_its_per_second_series() {
    let out = iolab(&["run", "--target", "mem:4m", "--rw", "randwrite", "--ios", "50", "--json", "-", "-q"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let second = &doc["jobs"][0]["runs"][0]["per_second"][0];
    assert!(second.get("trim").is_none(), "{second}");
}

#[test]
fn trimwrite_records_a_trim_then_a_write_of_each_block_in_its_iolog() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.iolog");
    let run = ["run", "--target", "mem:1m", "--rw", "trimwrite", "--bs", "4k", "--ios", "4"];
    let out = iolab(&[&run[..], &["--write-iolog", log.to_str().unwrap(), "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("trim "), "{}", stdout(&out));
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains(" trim ") || l.contains(" write "))
        .map(|l| l.split_whitespace().skip(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(lines, ["trim 0 4096", "write 0 4096", "trim 4096 4096", "write 4096 4096"]);
}

#[test]
fn a_trim_pattern_is_refused_with_validation_and_on_a_simulated_disk() {
    let out = iolab(&["run", "--target", "mem:1m", "--rw", "trim", "--validate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("discarded block's contents are the device's to choose"),
        "{}",
        stderr(&out)
    );
    let out = iolab(&["run", "--target", "sim:ssd", "--rw", "randtrim", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("simulated disks do not model"), "{}", stderr(&out));
}

#[test]
fn a_rate_limited_job_through_io_uring_runs_to_its_runtime() {
    // At a high rate the wait for the next request can pass between the
    // engine's two looks at it: the job once ended there, early.
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("t.img");
    let target = image.to_str().unwrap();
    let run = ["run", "--target", target, "--size", "8m", "--rw", "randread", "--engine", "uring"];
    let limit = ["--iodepth", "4", "--rate-iops", "200000", "--runtime", "1", "--json", "-", "-q"];
    let out = iolab(&[&run[..], &limit[..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &doc["jobs"][0]["runs"][0];
    assert!(run["elapsed_s"].as_f64().unwrap() >= 0.99, "ended early: {}", run["elapsed_s"]);
    assert_eq!(run["rate_iops"], 200000);
}

#[test]
fn a_timed_trim_job_through_io_uring_ends_at_its_runtime() {
    // Trims complete at once in the uring engine, leaving its slots free:
    // the job must still see its deadline (it once looped forever).
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("t.img");
    let target = image.to_str().unwrap();
    let run = ["run", "--target", target, "--size", "8m", "--rw", "randtrim", "--engine", "uring"];
    let out = iolab(&[&run[..], &["--iodepth", "4", "--runtime", "300ms", "--json", "-", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["jobs"][0]["runs"][0]["trim"]["ios"].as_u64().unwrap() > 0);
}
