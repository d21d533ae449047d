//! Every JSON document, built from the fixtures, against its golden file
//! byte for byte: a change to a document shows up as a diff here.
//! Regenerate with `IOLAB_BLESS=1 cargo test -p report` and review it.
//!
//! Until the wire types came, iolab serialised its internal types; these
//! goldens were written from that serialisation, and the wire types
//! reproduce its bytes.

use std::path::Path;

use workloads::crash::ViolationClass;
use workloads::journal::JournalMode;
use workloads::recover::Verdict;
use workloads::{Engine, Rw};

use crate::fixtures;
use workloads::bonnie::BonnieResult;

fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden/json").join(name);
    if std::env::var_os("IOLAB_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(actual == expected, "{name} differs from its golden file:\n{actual}");
}

#[test]
fn run_document_matches_its_golden_file() {
    let doc =
        report::json::RunDocument::new("0.1.0", fixtures::host(), &fixtures::job_reports(), &[50.0, 99.9]);
    check_golden("run.json", &doc.to_json());
}

#[test]
fn error_log_matches_its_golden_file() {
    check_golden("error_log.json", &report::json::error_log(&fixtures::job_reports()));
}

fn validate_document(v: &Verdict) -> String {
    report::json::ValidateDocument::new("0.1.0", fixtures::host(), "/data/t.img", Path::new("/data/j"), v)
        .to_json()
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
    let damaged = fixtures::damaged_verdict();
    let docs: Vec<String> = verdicts().iter().chain([&mode_group, &damaged]).map(validate_document).collect();
    check_golden("validate.json", &docs.join("\n"));
}

fn crash_document(stack: &str, report: &workloads::crash::CrashReport) -> String {
    report::json::CrashDocument::new(fixtures::host(), stack, 7, None, report).to_json()
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

fn sweep_journal_document(
    engine: Engine,
    arms: Vec<report::SweepArm>,
    power_cut: Option<report::SweepPowerCut>,
) -> String {
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
        modeled: None,
        power_cut,
    };
    report::json::SweepJournalDocument::new("0.1.0", fixtures::host(), &sweep).to_json()
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
        sweep_journal_document(Engine::Uring, report::sweep_arms(sweep_journal_runs(true)), None),
        sweep_journal_document(
            Engine::Sync,
            report::sweep_arms(sweep_journal_runs(false)),
            Some(report::SweepPowerCut {
                at_s: 5.0,
                missed: false,
                records: 108_504,
                as_journal: 49_014,
                ahead: 57,
                bad: 0,
            }),
        ),
    ];
    check_golden("sweep_journal.json", &docs.join("\n"));
}

#[test]
fn volume_list_document_matches_its_golden_file() {
    let doc = report::json::VolumeListDocument::new("0.1.0", fixtures::host(), &[fixtures::volume_report()]);
    check_golden("volume_list.json", &doc.to_json());
}

#[test]
fn bonnie_documents_match_their_golden_file() {
    let runs = vec![fixtures::bonnie_result(1), fixtures::bonnie_result(3)];
    let spread = report::bonnie_spread(&runs);
    let docs = [
        report::json::BonnieDocument::new("0.1.0", fixtures::host(), &runs, spread.as_ref()).to_json(),
        report::json::BonnieDocument::new(
            "0.1.0",
            report::json::Host::default(),
            &[fixtures::bonnie_result(2)],
            None,
        )
        .to_json(),
        report::json::BonnieDocument::new(
            "0.1.0",
            fixtures::host(),
            &[BonnieResult { files: Some(fixtures::file_tests(2)), ..fixtures::bonnie_result(2) }],
            None,
        )
        .to_json(),
    ];
    check_golden("bonnie.json", &docs.join("\n"));
}

#[test]
fn sweep_stripes_documents_match_their_golden_file() {
    let plex = fixtures::volume_report().plexes[1].counters;
    let row = |layout: &str, bonnie, fs, plex| report::StripesRow { layout: layout.into(), bonnie, fs, plex };
    let bonnie = [
        row("ufs", vec![fixtures::bonnie_result(1)], Vec::new(), None),
        row("s8k", vec![fixtures::bonnie_result(2)], Vec::new(), Some(plex)),
    ];
    let fs =
        [row("s8k", Vec::new(), vec![fixtures::job_result(Rw::RandRw, Engine::Sync, 70, None)], Some(plex))];
    let docs = [
        report::json::SweepStripesDocument::new("0.1.0", fixtures::host(), &bonnie).to_json(),
        report::json::SweepStripesDocument::new("0.1.0", fixtures::host(), &fs).to_json(),
    ];
    check_golden("sweep_stripes.json", &docs.join("\n"));
}

#[test]
fn sweep_policies_document_matches_its_golden_file() {
    let sweep = fixtures::policies_sweep();
    let doc = report::json::SweepPoliciesDocument::new("0.1.0", fixtures::host(), &sweep);
    check_golden("sweep_policies.json", &doc.to_json());
}

/// The run document's distribution adds up: each direction's histogram
/// holds every request, and the seconds hold every request between them.
#[test]
fn histograms_and_seconds_sum_to_the_request_counts() {
    let doc = report::json::RunDocument::new("0.1.0", fixtures::host(), &fixtures::job_reports(), &[50.0]);
    let value: serde_json::Value = serde_json::from_str(&doc.to_json()).unwrap();
    let mut checked = 0;
    for job in value["jobs"].as_array().unwrap() {
        for run in job["runs"].as_array().unwrap() {
            for dir in ["read", "write"] {
                let ios = run[dir]["ios"].as_u64().unwrap();
                let in_buckets: u64 = run[dir]["latency"]["histogram"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["count"].as_u64().unwrap())
                    .sum();
                assert_eq!(in_buckets, ios, "{dir}");
                let in_seconds: u64 = run["per_second"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s[dir]["ios"].as_u64().unwrap())
                    .sum();
                assert_eq!(in_seconds, ios, "{dir}");
                checked += 1;
            }
            let last = run["per_second"].as_array().unwrap().last().unwrap().clone();
            assert_eq!(last["partial"], true, "elapsed 1.25 s ends a quarter into its second second");
            assert!((last["seconds"].as_f64().unwrap() - 0.25).abs() < 1e-9);
        }
    }
    assert!(checked > 0);
}

#[test]
fn mpi_run_document_matches_its_golden_file() {
    let run = report::json::RunDocument::new("0.1.0", fixtures::host(), &fixtures::job_reports(), &[50.0]);
    let document: serde_json::Value = serde_json::from_str(&run.to_json()).unwrap();
    let ranks: Vec<report::RankRun> = (0..2)
        .map(|r| report::RankRun {
            rank: r,
            host: format!("node{r}"),
            document: document.clone(),
            windows: vec![vec![(0.25, 10.5)]; document["jobs"].as_array().unwrap().len()],
        })
        .collect();
    let doc =
        report::json::MpiRunDocument::new("0.1.0", fixtures::host(), &ranks, "per-rank", Some("10s"), true);
    check_golden("mpi_run.json", &doc.to_json());
}

#[test]
fn the_mpi_document_names_every_host_once() {
    let rank = |r: usize| report::RankRun {
        rank: r,
        host: "a".into(),
        document: serde_json::json!({"jobs": []}),
        windows: vec![],
    };
    let ranks = [rank(0), rank(1)];
    let doc = report::json::MpiRunDocument::new("0", fixtures::host(), &ranks, "per-rank", None, false);
    assert_eq!((doc.hosts.clone(), doc.size), (vec!["a"], 2));
}
