//! examples/ works as its files say: each volume configuration makes a
//! volume a job runs on, each job file runs (shortened by flags), in a
//! copy of the directory so nothing is left in the checkout.

use std::path::Path;

use crate::cli::stderr;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// `iolab ARGS` run in `dir`.
fn iolab_in(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_iolab")).args(args).current_dir(dir).output().unwrap()
}

fn copy_examples(to: &Path) {
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
}

#[test]
fn every_volume_configuration_makes_a_volume_a_job_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    for conf in ["raid5.conf", "raid5-log.conf", "mirror.conf", "raid10.conf"] {
        let out = iolab_in(dir.path(), &["volume", "create", conf, "--drive-size", "3g"]);
        assert_eq!(out.status.code(), Some(0), "{conf}: {}", stderr(&out));
        let job = ["run", "--target", conf, "--rw", "randrw", "--size", "64m", "--ios", "200", "-q"];
        let out = iolab_in(dir.path(), &job);
        assert_eq!(out.status.code(), Some(0), "{conf}: {}", stderr(&out));
    }
}

#[test]
fn every_job_file_runs() {
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    for (file, extra) in [
        ("oltp.toml", &["--runtime", "1", "--size", "16m"][..]),
        ("validated.toml", &["--runtime", "1", "--size", "16m"][..]),
        ("job.fio", &["--runtime", "1", "--size", "16m"][..]),
        ("params.vdb", &["--runtime", "1", "--size", "16m"][..]),
        ("--replay=app.iolog", &["--target", "app.img"][..]),
    ] {
        let out = iolab_in(dir.path(), &[&["run", file, "-q"][..], extra].concat());
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
    }
    let out =
        iolab_in(dir.path(), &["validate", "--target", "validated.img", "--journal", "validated.journal"]);
    assert_eq!(out.status.code(), Some(0), "validated.toml's journal checks its target: {}", stderr(&out));
}
