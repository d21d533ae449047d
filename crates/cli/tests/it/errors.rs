//! Errors that name the problem and the fix, with the documented exit
//! codes (issue 36, "unclear errors"): each test here failed on the code
//! before it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli::{iolab, stderr};

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A tmpfs of a few MiB, mounted for one test: a host file system that
/// fills up under a sparse image. Unmounted when dropped.
struct SmallHost {
    dir: tempfile::TempDir,
}

impl SmallHost {
    /// None, with the reason on standard error, where this is not root or
    /// the kernel will not mount a tmpfs here (CI runs as root).
    fn mount(bytes: u64) -> Option<SmallHost> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: a small tmpfs to fill needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let size = format!("size={bytes}");
        let mounted =
            Command::new("mount").args(["-t", "tmpfs", "-o", &size, "tmpfs", path(dir.path())]).status();
        if !mounted.is_ok_and(|s| s.success()) {
            eprintln!("skipped: cannot mount a tmpfs here");
            return None;
        }
        Some(SmallHost { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallHost {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// An image of 64 MiB made on a host of 4 MiB, and an archive of 8 MiB
/// of data elsewhere: it fits the image, not the host.
fn image_on_a_small_host(host: &SmallHost, scratch: &Path) -> (PathBuf, PathBuf) {
    let image = host.path().join("fs.img");
    let out = iolab(&["fs", "mkfs", path(&image), "--size", "64m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let src = scratch.join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..4u8 {
        let data: Vec<u8> =
            (0..2u32 << 20).map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8 ^ i).collect();
        std::fs::write(src.join(format!("f{i}")), data).unwrap();
    }
    let archive = scratch.join("src.tar");
    crate::fs::run("tar", &["cf", path(&archive), "-C", path(scratch), "src"]);
    (image, archive)
}

#[test]
fn untar_onto_an_image_whose_host_is_full_says_enospc_of_the_host_and_the_fix() {
    let Some(host) = SmallHost::mount(4 << 20) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let (image, archive) = image_on_a_small_host(&host, scratch.path());
    // A small cache: the write-back that finds the host full happens
    // inside the extraction's calls.
    let out = iolab(&["fs", "untar", path(&image), path(&archive), "--policy", "sync", "--cache", "1m"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("write failed: No space left on device (ENOSPC)"), "{err}");
    assert!(
        err.contains(&format!("the host file system holding {} is full (ENOSPC)", path(&image))),
        "{err}"
    );
    assert!(err.contains("Free space on that file system"), "{err}");
    assert!(!err.contains("EIO") && !err.contains("the file system is full; make it larger"), "{err}");
}

#[test]
fn gnu_tar_through_a_mount_whose_host_is_full_gets_enospc_and_the_mount_says_why() {
    if !crate::fs::fuse_usable() {
        return;
    }
    let Some(host) = SmallHost::mount(4 << 20) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let (image, archive) = image_on_a_small_host(&host, scratch.path());
    let mnt = scratch.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["fs", "mount", path(&image), path(&mnt), "--policy", "sync", "--cache", "1m"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("mounted at"), "iolab fs mount said: {line}");
    let tar = Command::new("tar").args(["xf", path(&archive), "-C", path(&mnt)]).output().unwrap();
    let umounted = Command::new("umount").arg(&mnt).status().unwrap();
    let out = server.wait_with_output().unwrap();
    assert!(umounted.success());
    let tar_err = String::from_utf8_lossy(&tar.stderr);
    assert!(!tar.status.success() && tar_err.contains("No space left on device"), "{tar_err}");
    assert!(!tar_err.contains("Input/output error"), "{tar_err}");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("the host file system holding {} is full (ENOSPC)", path(&image))),
        "{err}"
    );
}

/// A fio job file of one job `[j]` with `lines`, in `dir`.
fn fio_job(dir: &Path, lines: &str) -> PathBuf {
    let job = dir.join("job.fio");
    std::fs::write(&job, format!("[j]\n{lines}\nrw=randread\nnumber_ios=10\n")).unwrap();
    job
}

#[test]
fn fio_size_0_is_a_usage_error_naming_it_and_the_fix_and_makes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img");
    let job = fio_job(dir.path(), &format!("filename={}\nsize=0", path(&target)));
    let out = iolab(&["run", path(&job)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("[j] size=0: an empty region"), "{err}");
    assert!(err.contains("leave size= out to run on the whole file or device"), "{err}");
    assert!(!target.exists(), "a refused run makes no file");
    let job = fio_job(dir.path(), &format!("filename={}\nsize=", path(&target)));
    let out = iolab(&["run", path(&job)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("[j] size=: no value (fio refuses it too)"), "{}", stderr(&out));
}

#[test]
fn size_0_on_the_command_line_is_refused_before_a_file_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img");
    let out = iolab(&["run", "--target", path(&target), "--size", "0", "--ios", "10"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--size: 0 is an empty region"), "{err}");
    assert!(!target.exists(), "a refused run makes no file");
}

#[test]
fn fio_empty_filename_is_a_usage_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let job = fio_job(dir.path(), "filename=\nsize=1m");
    let out = iolab(&["run", path(&job)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("[j] filename=: no file named"), "{err}");
    assert!(err.contains("name the file or device to run on"), "{err}");
    assert!(!err.contains(": cannot open"), "{err}");
}

#[test]
fn fio_percentage_random_runs_as_seekpct() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img");
    let job = dir.path().join("job.fio");
    let text =
        format!("[j]\nfilename={}\nsize=1m\nrw=randrw\npercentage_random=30\nnumber_ios=10\n", path(&target));
    std::fs::write(&job, text).unwrap();
    let out = iolab(&["run", path(&job), "--print-job"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(crate::cli::stdout(&out).contains("seekpct = 30"), "{}", crate::cli::stdout(&out));
    assert!(!stderr(&out).contains("no equivalent"), "{}", stderr(&out));
}

#[test]
fn a_bs_or_bsalign_that_does_not_fit_names_that_flag_not_size() {
    let cases = [
        (
            vec!["--bs", "128k"],
            "--bs: the largest transfer (131072 bytes) is larger than the target, 65536 bytes",
        ),
        (vec!["--bs", "4k-128k"], "--bs: the largest transfer (131072 bytes) is larger than the target"),
        (vec!["--size", "32k", "--bs", "64k"], "use a smaller --bs, or a larger --size"),
        (
            vec!["--bs", "4k", "--bsalign", "128k"],
            "--bsalign: 131072 bytes leaves 0 bytes of the 65536-byte region",
        ),
    ];
    for (flags, said) in cases {
        let mut args = vec!["run", "--target", "mem:64k", "--rw", "randread", "--ios", "10"];
        args.extend(&flags);
        let out = iolab(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(said), "{flags:?}: {err}");
        assert!(!err.contains("error: --size"), "{flags:?}: {err}");
    }
}

#[test]
fn transfer_size_weights_must_add_up_to_100() {
    let out = iolab(&["run", "--target", "mem:1m", "--bs", "4k/150:8k/20", "--ios", "10"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--bs: the weights in '4k/150:8k/20' add up to 170"), "{err}");
    assert!(err.contains("must add up to 100, as in 4k/88:8k/12"), "{err}");
}

/// A file of 4 MiB holding an ext4 superblock's magic number.
fn file_holding_ext4(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join(name);
    let mut image = vec![0u8; 4 << 20];
    image[1080..1082].copy_from_slice(&[0x53, 0xef]);
    std::fs::write(&file, &image).unwrap();
    file
}

/// Every command that would write over a target holding data refuses it
/// as a usage error (exit 2), as README says of a refused run, and
/// leaves it as it was.
#[test]
fn every_refusal_of_a_target_holding_data_exits_2_and_leaves_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let data = file_holding_ext4(dir.path(), "data.img");
    let target = path(&data);
    let conf = dir.path().join("v.conf");
    std::fs::write(
        &conf,
        format!("drive d1 device {target}\nvolume v\n  plex org concat\n    sd length 0 drive d1\n"),
    )
    .unwrap();
    let before = std::fs::read(&data).unwrap();
    let commands: [Vec<&str>; 6] = [
        vec!["run", "--target", target, "--rw", "randwrite", "--ios", "10"],
        vec!["run", "--target", target, "--log", "log", "--ios", "10"],
        vec!["bonnie", "--target", target],
        vec!["fs", "mkfs", target],
        vec!["volume", "create", path(&conf)],
        vec![
            "sweep",
            "journal",
            "--target",
            target,
            "--journal-dir",
            path(dir.path()),
            "--runtime",
            "1",
            "--repeat",
            "1",
        ],
    ];
    for args in commands {
        let out = iolab(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("holds data (ext2/ext3/ext4 file system)") && err.contains("--force"),
            "{args:?}: {err}"
        );
        assert!(std::fs::read(&data).unwrap() == before, "{args:?} wrote the target");
    }
}

#[test]
fn the_exit_codes_are_listed_once_in_the_top_level_help() {
    let out = iolab(&["--help"]);
    // Words, not lines: help is wrapped to the terminal.
    let text = crate::cli::stdout(&out).split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(text.matches("Exit status:").count(), 1, "{text}");
    for code in
        ["0 success", "1 a failure", "2 a usage error", "a target refused because it holds data", "130"]
    {
        assert!(text.contains(code), "{code}: {text}");
    }
}

/// A `--json` file whose directory is missing is refused before any work
/// (a nine-minute bonnie must not end unable to write its results), and
/// nothing is made.
#[test]
fn a_json_destination_that_cannot_be_written_is_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("bonnie-target");
    let journal = dir.path().join("journal");
    let json = dir.path().join("missing/out.json");
    let (target, journal, json) =
        (target.to_str().unwrap(), journal.to_str().unwrap(), json.to_str().unwrap());
    for args in [
        vec!["bonnie", "--target", target, "--json", json],
        vec!["crash", "--stack", "fs-log", "--json", json],
        vec!["validate", "--target", target, "--journal", journal, "--json", json],
    ] {
        let out = iolab(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--json") && stderr(&out).contains("does not exist"),
            "{}",
            stderr(&out)
        );
        assert!(!std::path::Path::new(target).exists(), "{args:?} made its target");
    }
}
