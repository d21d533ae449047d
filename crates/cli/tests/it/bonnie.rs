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
    assert_eq!(out.status.code(), Some(1));
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
        return;
    };
    let line = &csv_lines()[0];
    child.stdin.take().unwrap().write_all(format!("{line}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.lines().any(|l| l.starts_with("box ") && l.contains("8M::64:3")), "{text}");
}
