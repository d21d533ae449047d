//! Every JSON document, built from the fixtures, against its golden file
//! byte for byte: a change to a document shows up as a diff here.
//! Regenerate with `IOLAB_BLESS=1 cargo test -p report` and review it.
//!
//! Until the wire types came, iolab serialised its internal types; these
//! goldens were written from that serialisation, and the wire types
//! reproduce its bytes.

use std::path::Path;

use serde::Serialize;
use workloads::crash::ViolationClass;
use workloads::journal::JournalMode;
use workloads::recover::Verdict;
use workloads::{Engine, JobResult, Rw};

use crate::fixtures;

fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden/json").join(name);
    if std::env::var_os("IOLAB_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(actual == expected, "{name} differs from its golden file:\n{actual}");
}

fn pretty<T: Serialize>(doc: &T) -> String {
    serde_json::to_string_pretty(doc).unwrap()
}

#[test]
fn run_document_matches_its_golden_file() {
    let doc = report::json::RunDocument::new("0.1.0", &fixtures::job_reports());
    check_golden("run.json", &doc.to_json());
}

#[test]
fn error_log_matches_its_golden_file() {
    check_golden("error_log.json", &report::json::error_log(&fixtures::job_reports()));
}

fn validate_document(v: &Verdict) -> String {
    report::json::ValidateDocument::new("0.1.0", "/data/t.img", Path::new("/data/j"), v).to_json()
}

/// Bad (each class, torn, ahead, an async journal torn at its end), then
/// journal incomplete in sync mode, then ok with no mode known.
fn verdicts() -> [Verdict; 3] {
    [
        fixtures::verdict(Some(JournalMode::Async), false, 2),
        fixtures::verdict(Some(JournalMode::Sync), true, 1),
        fixtures::verdict(None, true, 0),
    ]
}

#[test]
fn validate_documents_match_their_golden_file() {
    let mut mode_group = fixtures::verdict(Some(JournalMode::Group), true, 0);
    mode_group.torn_ok = false;
    let docs: Vec<String> = verdicts().iter().chain([&mode_group]).map(validate_document).collect();
    check_golden("validate.json", &docs.join("\n"));
}

fn crash_document(stack: &str, report: &workloads::crash::CrashReport) -> String {
    report::json::CrashDocument::new(stack, 7, report).to_json()
}

#[test]
fn crash_documents_match_their_golden_file() {
    let classes = [
        ViolationClass::OpenFailed,
        ViolationClass::Corrupt,
        ViolationClass::Lost,
        ViolationClass::TornWrite,
        ViolationClass::TornTransaction,
    ];
    let mut docs: Vec<String> =
        classes.into_iter().map(|c| crash_document("raid5-log", &fixtures::crash_report(Some(c)))).collect();
    docs.push(crash_document("log", &fixtures::crash_report(None)));
    check_golden("crash.json", &docs.join("\n"));
}

fn sweep_journal_document(engine: Engine, arms: Vec<report::SweepArm>) -> String {
    let sweep = report::JournalSweep {
        target: "/dev/sdz".into(),
        journal_dir: "/data/journals".into(),
        engine,
        threads: 1,
        iodepth: 32,
        bs: "4k".into(),
        runtime_s: 5.0,
        repeat: 2,
        arms,
    };
    report::json::SweepJournalDocument::new("0.1.0", &sweep).to_json()
}

/// The arms `off` and `group` over two repeats; without `off`, `group`
/// alone (no ratios).
fn sweep_journal_runs(with_off: bool) -> Vec<(&'static str, report::ArmRuns)> {
    let group = (
        "group",
        vec![(600.0, Some(fixtures::journal_stats(30))), (500.0, Some(fixtures::journal_stats(20)))],
    );
    if with_off {
        vec![("off", vec![(1000.0, None), (800.0, None)]), group]
    } else {
        vec![group]
    }
}

#[test]
fn sweep_journal_documents_match_their_golden_file() {
    let docs = [
        sweep_journal_document(Engine::Uring, report::sweep_arms(sweep_journal_runs(true))),
        sweep_journal_document(Engine::Sync, report::sweep_arms(sweep_journal_runs(false))),
    ];
    check_golden("sweep_journal.json", &docs.join("\n"));
}

#[test]
fn volume_list_document_matches_its_golden_file() {
    check_golden("volume_list.json", &pretty(&vec![fixtures::volume_report()]));
}

#[test]
fn bonnie_documents_match_their_golden_file() {
    let runs = vec![fixtures::bonnie_result(1), fixtures::bonnie_result(3)];
    let spread = report::bonnie_spread(&runs);
    let one = vec![fixtures::bonnie_result(2)];
    let docs = [
        pretty(&serde_json::json!({ "runs": runs, "spread": spread })),
        pretty(&serde_json::json!({ "runs": one, "spread": None::<()> })),
    ];
    check_golden("bonnie.json", &docs.join("\n"));
}

#[derive(Serialize)]
struct Row {
    layout: String,
    bonnie: Vec<workloads::bonnie::BonnieResult>,
    fs: Vec<JobResult>,
    plex: Option<volume::PlexCountersSnapshot>,
}

#[test]
fn sweep_stripes_documents_match_their_golden_file() {
    let plex = fixtures::volume_report().plexes[1].counters;
    let bonnie = vec![
        Row { layout: "ufs".into(), bonnie: vec![fixtures::bonnie_result(1)], fs: Vec::new(), plex: None },
        Row {
            layout: "s8k".into(),
            bonnie: vec![fixtures::bonnie_result(2)],
            fs: Vec::new(),
            plex: Some(plex),
        },
    ];
    let fs = vec![Row {
        layout: "s8k".into(),
        bonnie: Vec::new(),
        fs: vec![fixtures::job_result(Rw::RandRw, Engine::Sync, 70, None)],
        plex: Some(plex),
    }];
    check_golden("sweep_stripes.json", &[pretty(&bonnie), pretty(&fs)].join("\n"));
}
