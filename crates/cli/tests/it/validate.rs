//! `iolab run --validate --journal` then `iolab validate`: a clean target
//! passes; damage done between the two is found and named.

use crate::cli::{iolab, stderr, stdout};

/// A target fully written (one sequential pass of 4 KiB blocks) under a
/// journal, then rewritten at random so keys differ per block.
fn journaled(dir: &tempfile::TempDir, mode: &str) -> (String, String) {
    journaled_with(dir, &["--journal-mode", mode])
}

/// The same with `extra` flags.
fn journaled_with(dir: &tempfile::TempDir, extra: &[&str]) -> (String, String) {
    let target = dir.path().join("t.img").to_str().unwrap().to_string();
    let journal = dir.path().join("j").to_str().unwrap().to_string();
    let mut args = vec!["run", "--target", &target, "--size", "1m", "--rw", "write", "--bs", "4k"];
    args.extend(["--validate", "--journal", &journal, "-q"]);
    args.extend(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (target, journal)
}

/// `ios` 4 KiB random writes on a 1 MiB target under a journal in `dir`,
/// with `extra` flags; returns the target, the journal and the run's output.
pub fn journaled_randwrite(
    dir: &tempfile::TempDir,
    ios: &str,
    extra: &[&str],
) -> (String, String, std::process::Output) {
    let target = dir.path().join("t.img").to_str().unwrap().to_string();
    let journal = dir.path().join("j").to_str().unwrap().to_string();
    let mut args = vec!["run", "--target", &target, "--size", "1m", "--rw", "randwrite", "--bs", "4k"];
    args.extend(["--ios", ios, "--validate", "--journal", &journal, "-q"]);
    args.extend(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (target, journal, out)
}

/// A misdirected write, after the fact: block 1 now holds block 0's stamp.
fn copy_first_block_over_the_second(target: &str) {
    let mut image = std::fs::read(target).unwrap();
    let copy = image[0..4096].to_vec();
    image[4096..8192].copy_from_slice(&copy);
    std::fs::write(target, &image).unwrap();
}

fn validate(target: &str, journal: &str) -> std::process::Output {
    iolab(&["validate", "--target", target, "--journal", journal])
}

/// A run with `extra` flags validates clean, its 256 blocks verified.
fn assert_validates_clean(extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled_with(&dir, extra);
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{extra:?}: {}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("256 verified"), "{extra:?}: {}", stdout(&out));
}

#[test]
fn clean_target_validates_in_every_journal_mode() {
    for mode in ["group", "sync", "async"] {
        assert_validates_clean(&["--journal-mode", mode]);
    }
}

#[test]
fn a_target_of_duplicates_validates_clean_in_every_journal_mode() {
    for mode in ["group", "sync", "async"] {
        assert_validates_clean(&["--journal-mode", mode, "--dedupe-ratio", "2"]);
    }
}

#[test]
fn an_older_version_of_a_block_among_duplicates_is_reported_lost() {
    // Two passes at 4:1: every block ends at key 2. Put back what block 0
    // held at key 1, its own stamps or a shared unit's copy.
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled_with(&dir, &["--io-size", "2m", "--dedupe-ratio", "4"]);
    let journal_file = std::path::Path::new(&journal).join("iolab.journal");
    let header = validation::journal::replay(&std::fs::read(journal_file).unwrap()).unwrap().header;
    let duplicates = header.duplicates.expect("the journal records the ratio");
    let mut image = std::fs::read(&target).unwrap();
    match duplicates.set_of(0, 1, header.run_id) {
        Some(set) => validation::fill_duplicate(&mut image[..4096], 512, set, 1, header.run_id),
        None => validation::fill_block(&mut image[..4096], 512, 0, 1, 0, 0, header.run_id),
    }
    std::fs::write(&target, &image).unwrap();
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("1 lost"), "{}", stdout(&out));
}

#[test]
fn flipped_byte_after_the_run_is_reported_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    let mut image = std::fs::read(&target).unwrap();
    image[40_000] ^= 0x01;
    std::fs::write(&target, &image).unwrap();
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("1 corrupt"), "{}", stdout(&out));
}

#[test]
fn block_rolled_back_to_zeros_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    let mut image = std::fs::read(&target).unwrap();
    image[8192..12288].fill(0);
    std::fs::write(&target, &image).unwrap();
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("1 zeroed") && stdout(&out).contains("block at byte 8192"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn block_swapped_with_another_is_reported_misdirected() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    copy_first_block_over_the_second(&target);
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("1 misdirected"), "{}", stdout(&out));
}

#[test]
fn older_version_of_a_block_is_reported_lost() {
    // Two passes: every block ends at key 2. Put back what key 1 of block 0
    // looked like (same run id, same address): a lost write.
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img").to_str().unwrap().to_string();
    let journal = dir.path().join("j");
    let out = iolab(&[
        "run",
        "--target",
        &target,
        "--size",
        "1m",
        "--rw",
        "write",
        "--bs",
        "4k",
        "--io-size",
        "2m",
        "--validate",
        "--journal",
        journal.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let header =
        validation::journal::replay(&std::fs::read(journal.join("iolab.journal")).unwrap()).unwrap().header;
    let mut image = std::fs::read(&target).unwrap();
    validation::fill_block(&mut image[..4096], 512, 0, 1, 0, 0, header.run_id);
    std::fs::write(&target, &image).unwrap();
    let out = validate(&target, journal.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("1 lost"), "{}", stdout(&out));
}

/// A block of an earlier run put back where this run wrote: this run's
/// write is not there, the block is older than its durable record says.
#[test]
fn an_older_run_s_block_put_back_is_a_lost_write() {
    let dir = tempfile::tempdir().unwrap();
    let (target, _) = journaled(&dir, "group");
    let before = std::fs::read(&target).unwrap();
    let target2 = dir.path().join("t2.img");
    std::fs::write(&target2, &before).unwrap();
    let journal2 = dir.path().join("j2");
    let out = iolab(&[
        "run",
        "--target",
        target2.to_str().unwrap(),
        "--rw",
        "write",
        "--bs",
        "4k",
        "--validate",
        "--journal",
        journal2.to_str().unwrap(),
        "-q",
        "--force",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut image = std::fs::read(&target2).unwrap();
    image[0..4096].copy_from_slice(&before[0..4096]);
    std::fs::write(&target2, &image).unwrap();
    let out = validate(target2.to_str().unwrap(), journal2.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("1 lost") && text.contains("0 from another run"), "{text}");
    assert!(text.contains("lost write: an older run's block"), "{text}");
}

#[test]
fn an_existing_journal_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    let out = iolab(&["run", "--target", &target, "--validate", "--journal", &journal, "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(2), "a usage error, found before the run");
    assert!(stderr(&out).contains("holds a journal from an earlier run"), "{}", stderr(&out));
}

#[test]
fn journal_mode_without_journal_is_a_usage_error() {
    let out = iolab(&["run", "--target", "mem:1m", "--validate", "--journal-mode", "sync"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--journal-mode: only applies with --journal"), "{}", stderr(&out));
}

#[test]
fn a_long_run_compacts_its_journal_and_still_validates() {
    // 1 MiB target: 256 key blocks, 1 MiB of records per slot, about 18,000
    // writes' worth; 30,000 writes compact at least once.
    let dir = tempfile::tempdir().unwrap();
    let (target, journal, _) =
        journaled_randwrite(&dir, "30000", &["--no-preread", "--journal-mode", "async"]);
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("compactions"), "{}", stdout(&out));
}

/// Two compactions: the journal is back in its first slot, whose older
/// records lie past the new ones. A clean end there is no damaged record.
#[test]
fn a_clean_journal_compacted_into_a_reused_slot_reports_no_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal, _) =
        journaled_randwrite(&dir, "40000", &["--no-preread", "--journal-mode", "async"]);
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("after 2 compactions"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("damaged or truncated"), "{}", stdout(&out));
}

#[test]
fn an_async_journal_is_reported_as_not_crash_safe() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "async");
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("does not survive a host crash"), "{}", stdout(&out));
}

/// `kill -9` in the middle of a group-mode run (a process crash: the page
/// cache survives), then `iolab validate`: no error. The test waits, without
/// sleeping, until the journal holds records, so the kill lands mid-run.
#[test]
fn killed_run_validates_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img").to_str().unwrap().to_string();
    let journal = dir.path().join("j");
    run_and_kill(&target, &journal, &[]);
    let out = validate(&target, journal.to_str().unwrap());
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn a_killed_run_of_duplicates_validates_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img").to_str().unwrap().to_string();
    let journal = dir.path().join("j");
    run_and_kill(&target, &journal, &["--dedupe-ratio", "3"]);
    let out = validate(&target, journal.to_str().unwrap());
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

/// On a target another validated run wrote in full, the killed run's
/// writes that never went out (their `before` records durable) still hold
/// the earlier run's stamps: that is their old contents, not an error.
#[test]
fn killed_run_on_a_used_target_validates_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (target, _) = journaled(&dir, "group");
    let journal = dir.path().join("j2");
    run_and_kill(&target, &journal, &[]);
    let out = validate(&target, journal.to_str().unwrap());
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

/// Starts a journaled 4-thread random-write run on `target` with `extra`
/// flags and kills it (SIGKILL) once its journal holds 200 records.
fn run_and_kill(target: &str, journal: &std::path::Path, extra: &[&str]) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["run", "--target", target, "--size", "1m", "--rw", "randwrite", "--bs", "4k", "--force"])
        .args([
            "--runtime",
            "60",
            "--threads",
            "4",
            "--validate",
            "--journal",
            journal.to_str().unwrap(),
            "-q",
        ])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let file = journal.join("iolab.journal");
    let mut records = 0;
    for _ in 0..1_000_000 {
        let replayed = std::fs::read(&file).ok().and_then(|b| validation::journal::replay(&b).ok());
        records = replayed.map_or(0, |r| r.records);
        if records >= 200 || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(records >= 200, "the run wrote only {records} journal records before it was killed");
}

#[test]
fn journaled_uring_run_at_depth_validates_clean() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img").to_str().unwrap().to_string();
    let journal = dir.path().join("j").to_str().unwrap().to_string();
    let run = iolab(&[
        "run",
        "--target",
        &target,
        "--size",
        "1m",
        "--rw",
        "randrw",
        "--bs",
        "4k",
        "--ios",
        "3000",
        "--engine",
        "uring",
        "--iodepth",
        "32",
        "--validate",
        "--journal",
        &journal,
        "--journal-mode",
        "group",
        "-q",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(" verified"), "{}", stdout(&out));
}

/// A run whose key maps are mapped files, and the check after it, are
/// clean, and leave no scratch file in the key-map directory or the
/// journal directory (the default one of `iolab validate`).
#[test]
fn file_backed_key_maps_run_and_validate_clean_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let (target, journal) =
        journaled_with(&dir, &["--key-map", "file", "--key-map-dir", keys.to_str().unwrap()]);
    let journal = std::path::PathBuf::from(journal);
    let out = iolab(&[
        "validate",
        "--target",
        &target,
        "--journal",
        journal.to_str().unwrap(),
        "--key-map",
        "file",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("256 verified"), "{}", stdout(&out));
    assert_eq!(std::fs::read_dir(&keys).unwrap().count(), 0, "scratch files left in the key-map directory");
    let names: Vec<_> = std::fs::read_dir(&journal).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["iolab.journal"]);
}

#[test]
fn missing_key_map_directory_is_a_usage_error_naming_the_flag() {
    let out =
        iolab(&["run", "--target", "mem:1m", "--validate", "--ios", "10", "--key-map-dir", "/nonexistent/x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--key-map-dir: /nonexistent/x: cannot create") && err.contains("existing directory"),
        "{err}"
    );
}

#[test]
fn a_journaled_run_reports_its_journal_counters_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, out) = journaled_randwrite(&dir, "500", &["--json", "-"]);
    let text = stdout(&out);
    let doc: serde_json::Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    let j = &doc["jobs"][0]["runs"][0]["validation"]["journal"];
    // 500 before records, and an after record for each once the run ends.
    assert_eq!(j["records"], 1000, "{j}");
}

/// `--journal-commit ring` on the uring engine: the workers commit through
/// their own rings (the JSON counts those commits), and the target
/// validates clean.
#[test]
fn ring_commits_run_and_validate_clean() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--engine", "uring", "--iodepth", "16", "--journal-commit", "ring", "--json", "-"];
    let (target, journal, out) = journaled_randwrite(&dir, "3000", &extra);
    let text = stdout(&out);
    let doc: serde_json::Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    let j = &doc["jobs"][0]["runs"][0]["validation"]["journal"];
    assert!(j["ring_commits"].as_u64().unwrap() > 0, "{j}");
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn journal_commit_outside_group_mode_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j").to_str().unwrap().to_string();
    let args = ["run", "--target", "mem:1m", "--validate", "--journal", &journal, "--journal-mode", "sync"];
    let out = iolab(&[&args[..], &["--journal-commit", "ring"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--journal-commit: only applies with --journal DIR in group mode"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_directory_without_a_journal_is_a_usage_error_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (target, _journal) = journaled(&dir, "group");
    let out = validate(&target, dir.path().join("nothing").to_str().unwrap());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--journal") && stderr(&out).contains("holds no iolab.journal"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_emptied_journal_is_named_too_short() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    std::fs::write(std::path::Path::new(&journal).join("iolab.journal"), b"").unwrap();
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("too short to be a journal"), "{}", stderr(&out));
}

/// `iolab run` of 10 requests on a new 1 MiB file in `dir` with `flags`
/// (`{journal}` stands for the journal directory `dir/j`).
fn small_run(dir: &tempfile::TempDir, flags: &[&str]) -> (std::process::Output, std::path::PathBuf) {
    let target = dir.path().join("t.img");
    let journal = dir.path().join("j");
    let mut args = vec!["run", "--target", target.to_str().unwrap(), "--size", "1m", "--ios", "10", "-q"];
    args.extend(flags.iter().map(|&f| if f == "{journal}" { journal.to_str().unwrap() } else { f }));
    (iolab(&args), journal)
}

#[test]
fn journal_without_validate_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (out, journal) = small_run(&dir, &["--journal", "{journal}"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--journal: only applies with --validate"), "{}", stderr(&out));
    assert!(!journal.exists());
}

#[test]
fn ring_commits_on_the_sync_engine_are_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--validate", "--journal", "{journal}", "--journal-commit", "ring", "--engine", "sync"];
    let (out, journal) = small_run(&dir, &flags);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--journal-commit ring"), "{}", stderr(&out));
    assert!(!journal.exists());
}

#[test]
fn a_journal_path_that_is_a_file_is_named_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("j"), b"mine").unwrap();
    let (out, journal) = small_run(&dir, &["--validate", "--journal", "{journal}"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not a directory"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&journal).unwrap(), b"mine");
}

#[test]
fn a_run_on_a_4kn_file_validates_with_the_journal_s_sector_size() {
    assert_validates_clean(&["--sector-size", "4096"]);
}

#[test]
fn the_json_verdict_names_each_bad_block_and_its_first_bad_sector() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    copy_first_block_over_the_second(&target);
    let out = iolab(&["validate", "--target", &target, "--journal", &journal, "--json", "-"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&doc["schema"], &doc["version"], &doc["errors"], &doc["outcome"]),
        (&"iolab-validate".into(), &3.into(), &1.into(), &"bad".into())
    );
    let expected = serde_json::json!([{
        "offset": 4096,
        "class": "misdirected",
        "first": { "address": 4096, "kind": "misdirected", "found_address": 0 },
        "first_sector": 8,
        "bad_sectors": 8,
    }]);
    assert_eq!(doc["bad"], expected, "{doc}");
}

/// Where each record of the journal's first slot begins, and where the
/// last one ends (a journal that never compacted).
fn record_boundaries(journal: &[u8]) -> Vec<usize> {
    let header = validation::journal::read_header(&journal[..4096]).unwrap();
    assert_eq!(header.generation, 0, "the journal compacted");
    let mut at = validation::journal::start_bytes(header.blocks) as usize;
    let mut boundaries = vec![at];
    while journal[at..at + 4] == *b"JREC" {
        at += u32::from_le_bytes(journal[at + 4..at + 8].try_into().unwrap()) as usize;
        boundaries.push(at);
    }
    boundaries
}

/// Cuts the journal in `journal_dir` as a crash can leave it: zeros from
/// the end of record `records` on (plus `into` bytes of the next record),
/// as an async journal whose later records never reached the file.
fn cut_journal(journal_dir: &str, records: usize, into: usize) {
    let path = std::path::Path::new(journal_dir).join("iolab.journal");
    let mut bytes = std::fs::read(&path).unwrap();
    let boundaries = record_boundaries(&bytes);
    assert!(records < boundaries.len() - 1, "only {} records", boundaries.len() - 1);
    let from = boundaries[records] + into;
    let slot_end = validation::journal::slot_bytes(bytes.len() as u64) as usize;
    bytes[from..slot_end].fill(0);
    std::fs::write(&path, &bytes).unwrap();
}

/// 2000 random writes from 4 threads under an async journal: a journal
/// whose tail a crash can take, over blocks rewritten several times.
fn async_random_run(dir: &tempfile::TempDir) -> (String, String) {
    let (target, journal, _) =
        journaled_randwrite(dir, "2000", &["--threads", "4", "--journal-mode", "async", "--no-preread"]);
    (target, journal)
}

#[test]
fn a_journal_cut_at_a_record_boundary_reports_blocks_ahead_of_it_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = async_random_run(&dir);
    cut_journal(&journal, 2000, 0);
    let out = validate(&target, &journal);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{text}{}", stderr(&out));
    assert!(text.contains(" 0 lost,") && !text.contains(" 0 ahead of the journal"), "{text}");
    assert!(text.contains("verdict: the journal is incomplete:"), "{text}");
    assert!(!text.contains("damaged or truncated"), "{text}");
}

#[test]
fn a_journal_cut_mid_record_reports_blocks_ahead_of_it_and_its_damaged_end() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = async_random_run(&dir);
    cut_journal(&journal, 1500, 10);
    let out = validate(&target, &journal);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{text}{}", stderr(&out));
    assert!(text.contains(" 0 lost,") && !text.contains(" 0 ahead of the journal"), "{text}");
    assert!(text.contains("ends with a damaged or truncated record"), "{text}");
}

/// Two sequential passes (every block at key 2), the journal cut after the
/// first 300 writes: the blocks of the later writes are ahead of it. Block
/// 0 is put back as the first pass left it: older than the second pass's
/// durable record, still a lost write, and the exit status says loss.
#[test]
fn a_lost_write_among_blocks_ahead_of_a_cut_journal_is_still_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) =
        journaled_with(&dir, &["--io-size", "2m", "--journal-mode", "async", "--no-preread"]);
    cut_journal(&journal, 600, 0);
    let path = std::path::Path::new(&journal).join("iolab.journal");
    let header = validation::journal::replay(&std::fs::read(path).unwrap()).unwrap().header;
    let mut image = std::fs::read(&target).unwrap();
    validation::fill_block(&mut image[..4096], 512, 0, 1, 0, 0, header.run_id);
    std::fs::write(&target, &image).unwrap();
    let out = validate(&target, &journal);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains(" 1 lost,") && text.contains(" 212 ahead of the journal"), "{text}");
    assert!(text.contains("verdict: 1 bad blocks; also, the journal is incomplete"), "{text}");
}

#[test]
fn the_json_verdict_lists_blocks_ahead_of_a_cut_journal_apart_from_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = async_random_run(&dir);
    cut_journal(&journal, 2000, 0);
    let out = iolab(&["validate", "--target", &target, "--journal", &journal, "--json", "-"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&doc["errors"], &doc["outcome"], &doc["bad"]),
        (&0.into(), &"journal_incomplete".into(), &serde_json::json!([]))
    );
    let first = &doc["ahead_blocks"][0];
    assert_eq!((&first["class"], &first["first"]["kind"]), (&"ahead".into(), &"ahead".into()), "{doc}");
    assert!(doc["ahead"].as_u64().unwrap() >= doc["ahead_blocks"].as_array().unwrap().len() as u64);
}

/// Makes a file immutable (`chattr +i`) for as long as it lives, where the
/// file system and the privileges allow: then even root cannot open it
/// for writing.
struct Immutable(Option<std::path::PathBuf>);

impl Immutable {
    fn try_set(path: &std::path::Path) -> Immutable {
        let set = std::process::Command::new("chattr").arg("+i").arg(path).output();
        Immutable(set.is_ok_and(|o| o.status.success()).then(|| path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::process::Command::new("chattr").arg("-i").arg(path).output();
        }
    }
}

/// A target with permission bits 0444, immutable where `chattr` works (as
/// root, permission bits alone stop no write): validate opens it
/// read-only and checks it.
#[test]
fn a_target_that_may_not_be_written_validates() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).unwrap();
    let _immutable = Immutable::try_set(std::path::Path::new(&target));
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("256 verified"), "{}", stdout(&out));
}

/// Holds an exclusive lock on `path` (as a run writing it does) while the
/// returned device lives.
fn held_exclusively(path: &std::path::Path) -> device::FileDevice {
    let options = device::FileOptions { read_only: true, ..device::FileOptions::default() };
    let dev = device::FileDevice::open(path, &options).unwrap();
    dev.lock(device::LockKind::Exclusive).unwrap();
    dev
}

#[test]
fn validate_refuses_a_journal_a_run_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    let _run = held_exclusively(&std::path::Path::new(&journal).join("iolab.journal"));
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("iolab.journal") && stderr(&out).contains("in use by"), "{}", stderr(&out));
}

#[test]
fn validate_refuses_a_target_a_run_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal) = journaled(&dir, "group");
    let _run = held_exclusively(std::path::Path::new(&target));
    let out = validate(&target, &journal);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("t.img: in use by"), "{}", stderr(&out));
}

#[test]
fn reading_every_block_of_a_clean_target_finds_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal, _) = journaled_randwrite(&dir, "40", &[]);
    let sparse = validate(&target, &journal);
    let every = iolab(&["validate", "--target", &target, "--journal", &journal, "--every-block"]);
    assert_eq!(every.status.code(), Some(0), "{}{}", stdout(&every), stderr(&every));
    let blocks_line = |out: &std::process::Output| {
        stdout(out).lines().find(|l| l.starts_with("blocks:")).unwrap_or_default().to_string()
    };
    assert!(blocks_line(&sparse).contains("verified"), "{}", stdout(&sparse));
    assert_eq!(blocks_line(&every), blocks_line(&sparse));
}

/// One validated pass of 4 KiB writes over a new 1 MiB file, with `extra`.
fn write_pass(extra: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.img");
    let mut args = vec!["run", "--target", target.to_str().unwrap(), "--size", "1m", "--rw", "write"];
    args.extend(["--bs", "4k", "--validate"]);
    args.extend(extra);
    iolab(&args)
}

/// A validated run that only writes reads back what it wrote at its end
/// (the verify phase), and says how many blocks that was.
#[test]
fn a_validated_run_that_only_writes_is_checked_by_its_verify_phase() {
    let out = write_pass(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("256 checked (256 read back after the run), 0 bad"), "{}", stdout(&out));
}

/// Without the verify phase the same run checks nothing: a check that
/// checked nothing fails the run.
#[test]
fn a_validated_run_that_checks_nothing_fails() {
    let out = write_pass(&["--no-verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("checked no block"), "{}", stderr(&out));
}

/// fio's verify: a writer with do_verify=0 and a reader with verify after
/// it: what the writer wrote is read back and checked (it was once run and
/// reported "0 checked, 0 bad").
#[test]
fn a_fio_verify_job_after_its_writer_checks_what_the_writer_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.fio");
    let text = format!(
        "[global]\nfilename={}\nsize=1m\nbs=4k\n\n[writer]\nrw=write\nverify=crc32c\ndo_verify=0\n\n\
         [reader]\nstonewall\nrw=read\nverify=crc32c\n",
        dir.path().join("t.img").display()
    );
    std::fs::write(&file, text).unwrap();
    let out = iolab(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("256 checked (256 read back after the run), 0 bad"), "{}", stdout(&out));
}
