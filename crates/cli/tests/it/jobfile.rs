//! Job files: [global] and [[job]] sections, keys as the flags; flags
//! override the file.

use crate::cli::{iolab, stderr, stdout};

fn write_jobfile(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("jobs.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn run_json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--json", "-", "-q"]);
    let out = iolab(&all);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ios(run: &serde_json::Value) -> u64 {
    run["read"]["ios"].as_u64().unwrap() + run["write"]["ios"].as_u64().unwrap()
}

const TWO_JOBS: &str = r#"
[global]
target = "mem:16m"
ios = 200

[[job]]
name = "reads"
rw = "randread"

[[job]]
name = "writes"
rw = "write"
bs = "64k"
"#;

#[test]
fn every_job_of_the_file_runs_with_the_global_settings() {
    let dir = tempfile::tempdir().unwrap();
    let doc = run_json(&["run", &write_jobfile(&dir, TWO_JOBS)]);
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0]["name"], "reads");
    assert_eq!(jobs[0]["runs"][0]["write"]["ios"], 0);
    assert_eq!(jobs[1]["runs"][0]["bs"], "64k");
    assert!(jobs.iter().all(|j| ios(&j["runs"][0]) == 200));
}

#[test]
fn flags_override_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let doc = run_json(&["run", &write_jobfile(&dir, TWO_JOBS), "--ios", "50"]);
    assert!(doc["jobs"].as_array().unwrap().iter().all(|j| ios(&j["runs"][0]) == 50));
}

#[test]
fn concurrent_jobs_all_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("concurrent = true\n{TWO_JOBS}");
    let doc = run_json(&["run", &write_jobfile(&dir, &text)]);
    assert!(doc["jobs"].as_array().unwrap().iter().all(|j| ios(&j["runs"][0]) == 200));
}

#[test]
fn unknown_key_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_jobfile(&dir, "[[job]]\ntarget = \"mem:1m\"\nblocksize = \"4k\"\n");
    let out = iolab(&["run", &path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown field `blocksize`"), "{}", stderr(&out));
}

#[test]
fn file_without_jobs_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&["run", &write_jobfile(&dir, "[global]\nrw = \"read\"\n")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("holds no [[job]] section"), "{}", stderr(&out));
}

#[test]
fn job_without_a_target_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&["run", &write_jobfile(&dir, "[[job]]\nrw = \"read\"\n")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("job 'job1' has no target"), "{}", stderr(&out));
}

#[test]
fn bad_value_in_the_file_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&["run", &write_jobfile(&dir, "[[job]]\ntarget = \"mem:1m\"\nbs = \"4q\"\n")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--bs: '4q' is not a size"), "{}", stderr(&out));
}

/// Two concurrent validated jobs of random writes on one file, in the
/// regions `a` and `b` give (TOML lines).
fn validated_pair(dir: &tempfile::TempDir, a: &str, b: &str) -> (String, std::path::PathBuf) {
    let target = dir.path().join("t.img");
    let text = format!(
        "concurrent = true\n[global]\ntarget = {:?}\nrw = \"randwrite\"\nios = 500\nvalidate = true\n\
         size = \"1m\"\n[[job]]\nname = \"a\"\n{a}\n[[job]]\nname = \"b\"\n{b}\n",
        target.to_str().unwrap()
    );
    (write_jobfile(dir, &text), target)
}

#[test]
fn concurrent_jobs_writing_where_one_validates_are_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, target) = validated_pair(&dir, "", "offset = \"512k\"");
    let out = iolab(&["run", &path, "-q"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("jobs 'a' and 'b' run at the same time on the same bytes"),
        "{}",
        stderr(&out)
    );
    assert!(!target.exists(), "the target was created before the check");
}

#[test]
fn concurrent_validated_jobs_on_disjoint_regions_of_a_new_file_run_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (path, target) = validated_pair(&dir, "", "offset = \"1m\"");
    let doc = run_json(&["run", &path]);
    let jobs = doc["jobs"].as_array().unwrap();
    assert!(jobs.iter().all(|j| j["runs"][0]["validation"]["errors"] == 0), "{doc}");
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 2 << 20, "created for both regions");
}

/// The files ending in `.ext` under golden/DIR, sorted, and that
/// directory.
fn golden_cases(dir: &str, ext: &str) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden").join(dir);
    let mut cases: Vec<_> = std::fs::read_dir(&golden)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    cases.sort();
    (golden, cases)
}

/// What `out` printed (with `paths` replaced by their names) against
/// `case`'s `.expected`; IOLAB_BLESS rewrites it.
fn check_golden(case: &std::path::Path, out: &std::process::Output, paths: &[(&std::path::Path, &str)]) {
    let mut text = format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        stdout(out),
        stderr(out)
    );
    for (path, name) in paths {
        text = text.replace(path.to_str().unwrap(), name);
    }
    let expected = case.with_extension("expected");
    if std::env::var_os("IOLAB_BLESS").is_some() {
        std::fs::write(&expected, &text).unwrap();
    }
    let want = std::fs::read_to_string(&expected).unwrap_or_else(|e| panic!("{}: {e}", expected.display()));
    assert!(text == want, "{} differs from {}:\n{text}", case.display(), expected.display());
}

/// Each fio job file under golden/fio, translated by `iolab run FILE
/// --print-job`, against its `.expected` (exit status, the TOML, the notes).
/// IOLAB_BLESS rewrites the expectations.
#[test]
fn fio_job_files_translate_as_their_golden_files_say() {
    let (golden, cases) = golden_cases("fio", "fio");
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("t.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    assert!(cases.len() >= 10, "{cases:?}");
    for case in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
            .args(["run", case.to_str().unwrap(), "--print-job"])
            .env("IOLAB_FIO_TARGET", &target)
            .env("IOLAB_FIO_SIZE", "8m")
            .output()
            .unwrap();
        check_golden(&case, &out, &[(&golden, "GOLDEN"), (&target, "TARGET")]);
    }
}

/// Each Vdbench parameter file under golden/vdbench, translated by `iolab
/// run FILE --print-job`, against its `.expected`. IOLAB_BLESS rewrites
/// the expectations.
#[test]
fn vdbench_parameter_files_translate_as_their_golden_files_say() {
    let (golden, cases) = golden_cases("vdbench", "vdb");
    assert!(cases.len() >= 5, "{cases:?}");
    for case in cases {
        let out = iolab(&["run", case.to_str().unwrap(), "--print-job"]);
        check_golden(&case, &out, &[(&golden, "GOLDEN")]);
    }
}

#[test]
fn a_vdbench_parameter_file_runs_its_runs_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let (lun, json) = (dir.path().join("lun.img"), dir.path().join("r.json"));
    let params = dir.path().join("params.vdb");
    std::fs::write(
        &params,
        format!(
            "sd=sd1,lun={},size=4m,threads=2\nwd=wd1,sd=sd1,xfersize=4k,rdpct=50\n\
             rd=rd1,wd=wd1,iorate=200,elapsed=1,forxfersize=(4k,8k)\n",
            lun.display()
        ),
    )
    .unwrap();
    let out = iolab(&["run", params.to_str().unwrap(), "--json", json.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let names: Vec<&str> =
        doc["jobs"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["rd1.xfersize=4k.wd1.sd1", "rd1.xfersize=8k.wd1.sd1"]);
    for job in doc["jobs"].as_array().unwrap() {
        let run = &job["runs"][0];
        assert_eq!(run["threads"], 2, "{run}");
        // iorate=200 for a second caps the run (a slow machine does fewer).
        let ios = run["read"]["ios"].as_u64().unwrap() + run["write"]["ios"].as_u64().unwrap();
        assert!((1..=260).contains(&ios), "{ios} requests: {run}");
    }
}

#[test]
fn a_vdbench_curve_holds_each_point_to_its_share_of_the_max_run() {
    let dir = tempfile::tempdir().unwrap();
    let (lun, json) = (dir.path().join("lun.img"), dir.path().join("r.json"));
    let params = dir.path().join("curve.vdb");
    let text = format!(
        "sd=sd1,lun={},size=4m,threads=1\nwd=wd1,sd=sd1,xfersize=4k\n\
         rd=rd1,wd=wd1,iorate=curve,curve=(10,50),elapsed=1\n",
        lun.display()
    );
    std::fs::write(&params, text).unwrap();
    let out = iolab(&["run", params.to_str().unwrap(), "--json", json.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let jobs = doc["jobs"].as_array().unwrap();
    let names: Vec<&str> = jobs.iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["rd1.iorate=max.wd1.sd1", "rd1.iorate=10%.wd1.sd1", "rd1.iorate=50%.wd1.sd1"]);
    let run = |i: usize| &jobs[i]["runs"][0];
    assert!(run(0)["rate_iops"].is_null(), "the max run is held to nothing");
    let max = run(0)["read"]["iops"].as_f64().unwrap();
    for (i, share) in [(1, 0.1), (2, 0.5)] {
        let held = run(i)["rate_iops"].as_f64().unwrap();
        assert!((held - (max * share).round()).abs() <= 1.0, "{share}: held to {held} of {max}");
    }
}

#[test]
fn a_rate_of_naming_no_earlier_job_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.toml");
    let jobs = "[[job]]\nname = \"a\"\ntarget = \"mem:1m\"\nios = 10\nrate-of = \"b:50%\"\n\n\
                [[job]]\nname = \"b\"\ntarget = \"mem:1m\"\nios = 10\n";
    std::fs::write(&file, jobs).unwrap();
    let out = iolab(&["run", file.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("names no job that runs before this one"), "{}", stderr(&out));
}

#[test]
fn strict_refuses_a_fio_file_with_options_iolab_would_ignore() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden/fio/unknown.fio");
    let out = iolab(&["run", golden.to_str().unwrap(), "--print-job", "--strict"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cpus_allowed=0") && stderr(&out).contains("lat_percentiles=1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_fio_job_file_runs_its_jobs_with_a_note_per_ignored_option() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.fio");
    let target = dir.path().join("t.img");
    let text = format!(
        "[global]\nfilename={}\nsize=4m\nnumber_ios=200\ncpus_allowed=0\n\n[reads]\nrw=randread\n\n[writes]\nrw=randwrite\nbs=8k\n",
        target.display()
    );
    std::fs::write(&file, text).unwrap();
    let out = iolab(&["run", file.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("cpus_allowed=0: ignored"), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("reads:") && table.contains("writes:"),
        "the two jobs ran at once, each named:\n{table}"
    );
}

#[test]
fn a_fio_file_asking_for_interval_logs_gets_every_jobs_logs_in_the_prefixs_directory() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let text = format!(
        "[global]\nfilename={}\nsize=8m\nruntime=1\ntime_based\nwrite_bw_log={}/app\n[reader]\nrw=randread\n",
        dir.path().join("t.img").display(),
        logs.display()
    );
    let job = write_jobfile(&dir, &text);
    let out = iolab(&["run", &job, "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for kind in ["bw", "iops", "lat"] {
        let log = std::fs::read_to_string(logs.join(format!("reader_{kind}.1.log"))).unwrap();
        // fio's format: time (ms), value, direction (0 read), bs, offset.
        assert!(log.lines().next().is_some_and(|l| l.ends_with(", 0, 0, 0")), "{kind}: {log}");
    }
    // The same file as iolab's TOML keeps the directory.
    let out = iolab(&["run", &job, "--print-job"]);
    assert!(stdout(&out).contains(&format!("log-dir = \"{}\"", logs.display())), "{}", stdout(&out));
}
