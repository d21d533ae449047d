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
fn run_help_puts_each_flag_under_its_heading() {
    let out = iolab(&["run", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("no {needle} in:\n{text}"));
    let headings = [
        "Target:",
        "Workload:",
        "Threads and engine:",
        "Limits and flushes:",
        "Data validation:",
        "Block log:",
        "Output:",
    ];
    let places: Vec<usize> = headings.iter().map(|h| at(&format!("\n{h}\n"))).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "headings out of order: {places:?}");
    for (flag, under) in [
        ("--target", 0),
        ("--bs <", 1),
        ("--iodepth <", 2),
        ("--runtime <", 3),
        ("--journal <", 4),
        ("--log <", 5),
        ("--json <", 6),
    ] {
        let place = at(flag);
        assert!(
            place > places[under] && places.get(under + 1).is_none_or(|next| place < *next),
            "{flag} is not under {}",
            headings[under]
        );
    }
}

#[test]
fn run_help_shows_the_mpi_flags_only_in_a_build_with_mpi() {
    let text = stdout(&iolab(&["run", "--help"]));
    assert_eq!(text.contains("Under mpirun:"), cfg!(feature = "mpi"), "{text}");
    assert_eq!(text.contains("--mpi-layout"), cfg!(feature = "mpi"), "{text}");
}

#[test]
fn man_dir_writes_a_page_for_every_command_each_page_names() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man/man1");
    let out = iolab(&["man", "--dir", man1.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = std::fs::read_to_string(man1.join("iolab-run.1")).unwrap();
    assert!(run.contains(".TH iolab-run 1") && run.contains("\\-\\-journal"), "{run}");
    let mut named = 0;
    for page in std::fs::read_dir(&man1).unwrap() {
        let text = std::fs::read_to_string(page.unwrap().path()).unwrap();
        for (at, _) in text.match_indices("(1)") {
            let start = text[..at].rfind(|c: char| c.is_whitespace()).map_or(0, |s| s + 1);
            let name = text[start..at].replace("\\-", "-");
            if name.starts_with("iolab") {
                assert!(man1.join(format!("{name}.1")).exists(), "{name}(1) is named but not written");
                named += 1;
            }
        }
    }
    assert!(named >= 30, "only {named} pages named");
}

#[test]
fn man_dir_that_cannot_be_made_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"").unwrap();
    let out = iolab(&["man", "--dir", file.join("man1").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--dir"), "{}", stderr(&out));
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
