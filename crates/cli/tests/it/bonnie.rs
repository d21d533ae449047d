//! `iolab bonnie`: bonnie's table and CSV lines that bonnie++'s tools read.

use crate::cli::{iolab, stderr, stdout};

fn csv_lines() -> Vec<String> {
    let out =
        iolab(&["bonnie", "--target", "mem:8m", "--seeks", "64", "--csv", "--csv-103", "--name", "box"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out).lines().filter(|l| l.contains(',')).map(String::from).collect()
}

#[test]
fn table_has_bonnies_header_and_a_row() {
    let out = iolab(&["bonnie", "--target", "mem:8m", "--seeks", "64"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Machine    MB K/sec %CPU K/sec %CPU"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("iolab        8")), "{text}");
}

#[test]
fn with_csv_standard_output_is_the_csv_alone_and_the_table_goes_to_standard_error() {
    let out = iolab(&["bonnie", "--target", "mem:8m", "--seeks", "64", "--csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    assert!(stderr(&out).contains("Machine    MB K/sec"), "{}", stderr(&out));
}

#[test]
fn csv_200_line_has_bonnie_pp_200_fields() {
    let line = &csv_lines()[0];
    let fields: Vec<&str> = line.split(',').collect();
    assert_eq!(fields.len(), 50, "{line}");
    assert_eq!((fields[0], fields[2], fields[5], fields[7], fields[8]), ("1.98", "box", "8M", "64", "3"));
    assert!(fields[38].ends_with("us"), "{line}");
}

#[test]
fn csv_103_line_has_bonnie_pp_103_fields() {
    let line = &csv_lines()[1];
    let fields: Vec<&str> = line.split(',').collect();
    assert_eq!(fields.len(), 27, "{line}");
    assert_eq!((fields[0], fields[1]), ("box", "8"));
}

#[test]
fn bonnie_refuses_to_overwrite_a_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.img");
    let mut image = vec![0u8; 4 << 20];
    image[1080] = 0x53;
    image[1081] = 0xef;
    std::fs::write(&path, &image).unwrap();
    let out = iolab(&["bonnie", "--target", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
}

#[test]
fn repeat_adds_min_median_max_rows() {
    let out = iolab(&["bonnie", "--target", "mem:8m", "--seeks", "64", "--repeat", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().filter(|l| l.starts_with("iolab ")).count(), 3, "{text}");
    for label in ["min ", "median ", "max "] {
        assert!(text.lines().any(|l| l.starts_with(label)), "{label} missing:\n{text}");
    }
}

/// bonnie++'s own reader accepts the CSV line. The tool comes from
/// Debian's bonnie++ package; CI installs it and sets
/// IOLAB_REQUIRE_BONNIE_TOOLS so the check cannot be skipped there.
#[test]
fn bon_csv2txt_reads_the_csv_line() {
    if let Some(text) = bon_csv2txt(&csv_lines()[0]) {
        assert!(text.lines().any(|l| l.starts_with("box ") && l.contains("8M::64:3")), "{text}");
    }
}

/// What bonnie++'s `bon_csv2txt` makes of `line`; `None` where the tool
/// is missing (not allowed in CI).
fn bon_csv2txt(line: &str) -> Option<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let spawned = Command::new("bon_csv2txt")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = spawned else {
        assert!(
            std::env::var_os("IOLAB_REQUIRE_BONNIE_TOOLS").is_none(),
            "bon_csv2txt is required but missing"
        );
        return None;
    };
    child.stdin.take().unwrap().write_all(format!("{line}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// On a directory, as bonnie++ -d: the block phases on a test file, then
/// the file tests, whose CSV columns bon_csv2txt shows; nothing is left.
#[test]
fn on_a_directory_the_file_tests_run_and_fill_their_csv_columns() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&[
        "bonnie",
        "--target",
        dir.path().to_str().unwrap(),
        "--size",
        "1m",
        "-n",
        "1:512:0:3",
        "--seeks",
        "64",
        "--name",
        "box",
        "--csv",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stderr(&out);
    assert!(table.contains("Sequential Create") && table.contains("1:512:0/3"), "{table}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the test file and directory are gone");
    let text = stdout(&out);
    let line = text.lines().last().unwrap();
    assert_eq!(line.split(',').nth(21), Some("1"), "{line}");
    if let Some(table) = bon_csv2txt(line) {
        assert!(table.contains("Sequential Create") && table.contains("1:512:0/3"), "{table}");
    }
}

#[test]
fn file_tests_need_a_directory_and_a_directory_needs_a_size() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolab(&["bonnie", "--target", "mem:8m", "-n", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("give --target a directory"), "{}", stderr(&out));
    let out = iolab(&["bonnie", "--target", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--size"), "{}", stderr(&out));
}
