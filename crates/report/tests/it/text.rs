//! The text reports moved out of the cli, against golden files: a layout
//! change shows up as a diff here. Regenerate with `IOLAB_BLESS=1 cargo
//! test -p report` and review the diff.

use workloads::crash::ViolationClass;
use workloads::journal::JournalMode;
use workloads::{Engine, Rw};

use crate::fixtures;

fn check_golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden/text").join(name);
    if std::env::var_os("IOLAB_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(actual == expected, "{name} differs from its golden file:\n{actual}");
}

fn stripes_rows() -> Vec<report::StripesRow> {
    let plex = fixtures::volume_report().plexes[1].counters;
    let row = |layout: &str, seeds: &[u64], plex| report::StripesRow {
        layout: layout.into(),
        bonnie: seeds.iter().map(|&s| fixtures::bonnie_result(s)).collect(),
        fs: Vec::new(),
        plex,
    };
    vec![row("ufs", &[1], None), row("s8k", &[2, 4, 3], Some(plex))]
}

#[test]
fn stripes_bonnie_table_matches_its_golden_file() {
    check_golden("stripes_bonnie.txt", &report::stripes_bonnie_table(&stripes_rows()));
}

#[test]
fn stripes_fs_table_matches_its_golden_file() {
    let plex = fixtures::volume_report().plexes[2].counters;
    let runs =
        |ios: &[u64]| ios.iter().map(|&n| fixtures::job_result(Rw::RandRw, Engine::Sync, n, None)).collect();
    let rows = vec![
        report::StripesRow { layout: "ufs".into(), bonnie: Vec::new(), fs: runs(&[70]), plex: None },
        report::StripesRow {
            layout: "r512k".into(),
            bonnie: Vec::new(),
            fs: runs(&[90, 30]),
            plex: Some(plex),
        },
    ];
    check_golden("stripes_fs.txt", &report::stripes_fs_table(&rows));
}

fn journal_sweep(engine: Engine, with_off: bool) -> report::JournalSweep {
    let mut measured = vec![(
        "group",
        vec![(600.0, Some(fixtures::journal_stats(30))), (500.0, Some(fixtures::journal_stats(20)))],
    )];
    if with_off {
        measured.insert(0, ("off", vec![(1000.0, None), (800.0, None)]));
    }
    report::JournalSweep {
        target: "/dev/sdz".into(),
        journal_dir: "/data/journals".into(),
        engine,
        threads: if engine == Engine::Uring { 1 } else { 32 },
        iodepth: if engine == Engine::Uring { 32 } else { 1 },
        bs: "4k".into(),
        runtime_s: 5.0,
        repeat: 2,
        arms: report::sweep_arms(measured),
        modeled: None,
        power_cut: None,
    }
}

/// A power cut's outcome: `ahead` blocks written after records lost.
fn power_cut(ahead: u64) -> report::SweepPowerCut {
    report::SweepPowerCut { at_s: 5.0, missed: false, records: 9600, as_journal: 4746, ahead, bad: 0 }
}

#[test]
fn journal_sweeps_side_by_side_with_their_power_cuts_match_their_golden_file() {
    let honest = report::JournalSweep {
        journal_dir: "sim:hdd,wce=off".into(),
        power_cut: Some(power_cut(0)),
        ..journal_sweep(Engine::Virtual, true)
    };
    let lying = report::JournalSweep {
        journal_dir: "sim:hdd,flush=ignore".into(),
        power_cut: Some(power_cut(57)),
        ..journal_sweep(Engine::Virtual, true)
    };
    let text = [report::journal_sweep_table(&lying), report::journal_sweeps_side_by_side(&[honest, lying])];
    check_golden("sweep_journal_servers.txt", &text.concat());
}

#[test]
fn a_power_cut_names_lost_records_damage_or_nothing() {
    let verdicts: Vec<&str> = [power_cut(0), power_cut(3), report::SweepPowerCut { bad: 1, ..power_cut(3) }]
        .iter()
        .map(|c| c.verdict())
        .collect();
    assert_eq!(verdicts, ["ok", "acknowledged records lost", "damaged"]);
}

#[test]
fn journal_sweep_tables_match_their_golden_file() {
    let tables = [
        report::journal_sweep_table(&journal_sweep(Engine::Uring, true)),
        report::journal_sweep_table(&journal_sweep(Engine::Sync, false)),
    ];
    check_golden("sweep_journal.txt", &tables.concat());
}

#[test]
fn each_run_is_compared_with_off_in_its_own_repeat() {
    let sweep = journal_sweep(Engine::Uring, true);
    let group = &sweep.arms[1];
    let ratios: Vec<Option<f64>> = group.runs.iter().map(|r| r.vs_off).collect();
    assert_eq!(ratios, [Some(0.6), Some(0.625)]);
    assert_eq!((group.median_iops, group.median_vs_off), (550.0, Some(0.6125)));
    let alone = journal_sweep(Engine::Uring, false);
    assert_eq!((alone.arms[0].median_vs_off, alone.arms[0].runs[0].vs_off), (None, None));
}

fn crash_run_on(disk: Option<&'static str>, recheck: Option<String>) -> report::CrashRun<'static> {
    report::CrashRun { disk, ..crash_run(recheck) }
}

fn crash_run(recheck: Option<String>) -> report::CrashRun<'static> {
    report::CrashRun {
        stack: "raid5-log",
        block_size: "4k",
        max_blocks: 1,
        sync_every: 4,
        seed: 7,
        recheck,
        disk: None,
    }
}

#[test]
fn crash_reports_match_their_golden_file() {
    let recheck = "iolab crash --stack raid5-log --seed 7 --state 17".to_string();
    let texts = [
        report::crash_text(&crash_run(Some(recheck)), &fixtures::crash_report(Some(ViolationClass::Lost))),
        report::crash_text(&crash_run(None), &fixtures::crash_report(None)),
        report::crash_text(
            &crash_run_on(
                Some("sim:hdd,flush=ignore"),
                Some("iolab crash --disk sim:hdd,flush=ignore --state 17".into()),
            ),
            &fixtures::crash_report(Some(ViolationClass::Lost)),
        ),
    ];
    check_golden("crash.txt", &texts.concat());
}

#[test]
fn verdicts_match_their_golden_file() {
    let mut many_ahead = fixtures::verdict(Some(JournalMode::Group), true, 14);
    many_ahead.journal_generation = 0;
    let verdicts = [
        fixtures::verdict(Some(JournalMode::Async), false, 2),
        fixtures::verdict(Some(JournalMode::Sync), true, 1),
        fixtures::verdict(None, true, 0),
        many_ahead,
        fixtures::damaged_verdict(),
    ];
    let exits = report::VerdictExits { journal_incomplete: 3, journal_damaged: 4 };
    let texts: Vec<String> = verdicts.iter().map(|v| report::verdict_text(v, exits)).collect();
    check_golden("verdicts.txt", &texts.join("--\n"));
}

#[test]
fn bad_blocks_outweigh_an_incomplete_journal() {
    let outcome = |torn_ok, ahead| {
        let mut v = fixtures::verdict(None, true, ahead);
        v.torn = 1;
        v.torn_ok = torn_ok;
        report::Outcome::of(&v)
    };
    assert_eq!(outcome(false, 3), report::Outcome::Bad);
    assert_eq!(outcome(true, 3), report::Outcome::JournalIncomplete);
    assert_eq!(outcome(true, 0), report::Outcome::Ok);
}

#[test]
fn a_damaged_journal_is_its_own_outcome_between_bad_blocks_and_an_incomplete_journal() {
    let mut v = fixtures::damaged_verdict();
    assert_eq!(report::Outcome::of(&v), report::Outcome::JournalDamaged);
    v.ahead = 2;
    assert_eq!(report::Outcome::of(&v), report::Outcome::JournalDamaged);
    v.lost = 1;
    assert_eq!(report::Outcome::of(&v), report::Outcome::Bad);
}

#[test]
fn a_verdict_that_checked_no_block_of_a_journal_with_records_is_no_pass() {
    let v = workloads::recover::Verdict { records: 10, ..workloads::recover::Verdict::default() };
    assert_eq!(report::Outcome::of(&v), report::Outcome::NothingChecked);
    let nothing_written = workloads::recover::Verdict::default();
    assert_eq!(report::Outcome::of(&nothing_written), report::Outcome::Ok);
}

#[test]
fn policies_table_matches_its_golden_file() {
    check_golden("sweep_policies.txt", &report::policies_table(&fixtures::policies_sweep()));
}

#[test]
fn bonnie_table_and_csv_with_file_tests_match_their_golden_file() {
    let both = workloads::bonnie::BonnieResult {
        files: Some(fixtures::file_tests(1)),
        ..fixtures::bonnie_result(1)
    };
    let files_only = workloads::bonnie::BonnieResult {
        phases: Vec::new(),
        files: Some(fixtures::file_tests(2)),
        ..both.clone()
    };
    let rows = vec![("both".to_string(), &both, Vec::new()), ("files".to_string(), &files_only, Vec::new())];
    let mut out = report::bonnie_table(&rows, &[]);
    for r in [&both, &files_only] {
        out.push_str(&report::bonnie_csv("iolab", r));
        out.push('\n');
        out.push_str(&report::bonnie_csv_103("iolab", r));
        out.push('\n');
    }
    check_golden("bonnie_files.txt", &out);
}

/// fio's interval logs read back as fio writes them: `msec, value, dir,
/// bs, offset`, a line per second and direction with requests.
#[test]
fn fio_logs_read_back_as_fio_writes_them() {
    let r = fixtures::job_result(workloads::Rw::RandRw, workloads::Engine::Uring, 1000, None);
    for (kind, text) in report::fio_logs(&r) {
        let lines: Vec<Vec<u64>> =
            text.lines().map(|l| l.split(", ").map(|f| f.parse().unwrap()).collect()).collect();
        assert_eq!(lines.len(), 2, "{kind}: reads and writes of the one second with requests:\n{text}");
        for fields in &lines {
            assert_eq!(fields.len(), 5, "{kind}");
            assert_eq!(fields[0], 1000, "{kind}: the end of the first second, in ms");
        }
        assert_eq!((lines[0][2], lines[1][2]), (0, 1), "{kind}: read, then write");
        if kind == "iops" {
            assert_eq!(lines[0][1] + lines[1][1], 1000, "every request in its second");
        }
    }
}

/// Discards are direction 2 in fio's logs, as fio writes them.
#[test]
fn fio_logs_give_discards_direction_2() {
    let mut r = fixtures::job_result(workloads::Rw::RandRw, workloads::Engine::Uring, 1000, None);
    r.trim.ios = 7;
    r.per_second[0].trim_ios = 7;
    r.per_second[0].trim_bytes = 7 << 16;
    let [_, (_, iops), _] = report::fio_logs(&r);
    let last = iops.lines().last().unwrap();
    assert_eq!(last, "1000, 7, 2, 0, 0", "{iops}");
}

#[test]
fn a_run_as_csv_has_the_headers_fields() {
    let r = fixtures::job_result(workloads::Rw::RandRw, workloads::Engine::Uring, 1000, None);
    let line = report::run_csv_line("a job", 1, &r);
    assert_eq!(line.split(',').count(), report::RUN_CSV_HEADER.split(',').count(), "{line}");
    assert!(
        line.starts_with("a job,1,target.img,uring,2,4,randrw,\"4k/10:64k/90\"")
            || line.starts_with("a job,1,target.img,uring,2,4,randrw,4k/10:64k/90"),
        "{line}"
    );
}

fn attr(kind: fsapi::FileType, rdev: u32) -> fsapi::Attr {
    let t = fsapi::Time { secs: 1, nanos: 0 };
    fsapi::Attr {
        ino: 12,
        kind,
        perm: 0o660,
        nlink: 1,
        uid: 0,
        gid: 6,
        size: 0,
        blocks: 0,
        rdev,
        atime: t,
        mtime: t,
        ctime: t,
    }
}

#[test]
fn ls_and_stat_show_a_device_nodes_number_and_each_special_kinds_letter() {
    let disk = attr(fsapi::FileType::BlockDevice, fsapi::makedev(8, 1));
    assert_eq!(report::ls_line("sda1", &disk), "b 0660   1     0     6         8, 1 sda1");
    assert!(report::stat_text("/sda1", &disk).contains("BlockDevice 8:1, mode 0660"));
    for (kind, letter) in
        [(fsapi::FileType::Fifo, 'p'), (fsapi::FileType::Socket, 's'), (fsapi::FileType::CharDevice, 'c')]
    {
        assert!(report::ls_line("x", &attr(kind, 0)).starts_with(letter), "{kind:?}");
    }
}

#[test]
fn a_count_takes_its_nouns_number() {
    assert_eq!(report::counted(1u32, "thread", "threads"), "1 thread");
    assert_eq!(report::counted(0u32, "run", "runs"), "0 runs");
    assert_eq!(report::counted(4u64, "bad block", "bad blocks"), "4 bad blocks");
}

/// The run table, the validation lines and the table of repeats of every
/// fixture job: the figures fio's way (`1.00k`, `717KiB/s`, `85.2us`).
#[test]
fn run_and_repeat_tables_match_their_golden_file() {
    let mut text = String::new();
    for job in fixtures::job_reports() {
        for run in &job.runs {
            text.push_str(&report::run_table(run));
            if let Some(v) = &run.validation {
                text.push_str(&report::validation_summary(v));
            }
        }
        if let Some(summary) = &job.summary {
            text.push_str(&report::repeat_table(summary));
        }
    }
    check_golden("run_tables.txt", &text);
}
