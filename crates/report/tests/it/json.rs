//! Every JSON document, built from the fixtures, against its golden file
//! byte for byte: a change to a document shows up as a diff here.
//! Regenerate with `IOLAB_BLESS=1 cargo test -p report` and review it.
//!
//! These builders serialize the internal types the way the cli does at
//! this commit; they pin the bytes the wire types must reproduce.

use std::path::Path;

use serde::Serialize;
use workloads::crash::ViolationClass;
use workloads::journal::{JournalMode, JournalStats};
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
    let doc = report::RunDocument::new("0.1.0", fixtures::job_reports());
    check_golden("run.json", &doc.to_json());
}

#[test]
fn error_log_matches_its_golden_file() {
    let reports = fixtures::job_reports();
    let errors: Vec<&workloads::ValidationError> = reports
        .iter()
        .flat_map(|r| &r.runs)
        .filter_map(|run| run.validation.as_ref())
        .flat_map(|v| &v.error_list)
        .collect();
    check_golden("error_log.json", &pretty(&errors));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Ok,
    JournalIncomplete,
    Bad,
}

#[derive(Serialize)]
struct ValidateDocument<'a> {
    schema: &'static str,
    version: u32,
    iolab_version: &'static str,
    target: &'a str,
    journal: &'a Path,
    errors: u64,
    outcome: Outcome,
    #[serde(flatten)]
    verdict: &'a Verdict,
}

fn validate_document(v: &Verdict) -> String {
    let outcome = if v.errors() > 0 {
        Outcome::Bad
    } else if v.journal_incomplete() {
        Outcome::JournalIncomplete
    } else {
        Outcome::Ok
    };
    pretty(&ValidateDocument {
        schema: "iolab-validate",
        version: 2,
        iolab_version: "0.1.0",
        target: "/data/t.img",
        journal: Path::new("/data/j"),
        errors: v.errors(),
        outcome,
        verdict: v,
    })
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
    let doc = serde_json::json!({
        "schema": "iolab-crash",
        "version": 1,
        "stack": stack,
        "seed": 7,
        "report": report,
    });
    pretty(&doc)
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

#[derive(Serialize)]
struct ArmRun {
    iops: f64,
    vs_off: Option<f64>,
    journal: Option<JournalStats>,
}

#[derive(Serialize)]
struct ArmRow {
    arm: &'static str,
    median_iops: f64,
    median_vs_off: Option<f64>,
    runs: Vec<ArmRun>,
}

#[derive(Serialize)]
struct SweepDocument<'a> {
    schema: &'static str,
    version: u32,
    iolab_version: &'static str,
    target: &'a str,
    journal_dir: &'a Path,
    engine: &'static str,
    threads: u32,
    iodepth: u32,
    bs: &'a str,
    runtime_s: f64,
    arms: Vec<ArmRow>,
}

fn sweep_journal_document(engine: &'static str, arms: Vec<ArmRow>) -> String {
    pretty(&SweepDocument {
        schema: "iolab-sweep-journal",
        version: 1,
        iolab_version: "0.1.0",
        target: "/dev/sdz",
        journal_dir: Path::new("/data/journals"),
        engine,
        threads: 1,
        iodepth: 32,
        bs: "4k",
        runtime_s: 5.0,
        arms,
    })
}

/// An arm's name and its runs: write IOPS and journal counters.
type ArmRuns = (&'static str, Vec<(f64, Option<JournalStats>)>);

/// The arms `off` and `group` over two repeats; without `off`, `group`
/// alone (no ratios).
fn sweep_journal_runs(with_off: bool) -> Vec<ArmRuns> {
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

fn sweep_journal_rows(arms: Vec<ArmRuns>) -> Vec<ArmRow> {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    };
    let off = arms.iter().find(|a| a.0 == "off").map(|a| a.1.iter().map(|r| r.0).collect::<Vec<_>>());
    arms.into_iter()
        .map(|(arm, runs)| {
            let runs: Vec<ArmRun> = runs
                .into_iter()
                .enumerate()
                .map(|(i, (iops, journal))| ArmRun {
                    iops,
                    vs_off: off.as_ref().map(|off| iops / off[i].max(f64::MIN_POSITIVE)),
                    journal,
                })
                .collect();
            let median_iops = median(runs.iter().map(|r| r.iops).collect());
            let median_vs_off = off.as_ref().map(|_| median(runs.iter().filter_map(|r| r.vs_off).collect()));
            ArmRow { arm, median_iops, median_vs_off, runs }
        })
        .collect()
}

#[test]
fn sweep_journal_documents_match_their_golden_file() {
    let docs = [
        sweep_journal_document("uring", sweep_journal_rows(sweep_journal_runs(true))),
        sweep_journal_document("sync", sweep_journal_rows(sweep_journal_runs(false))),
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
