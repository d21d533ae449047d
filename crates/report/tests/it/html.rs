//! The report page's "Run" block: the `host` object of each document, and
//! nothing for documents written before it existed.

use crate::fixtures;

/// A run document built from the fixtures, as a saved file would read.
fn run_document() -> serde_json::Value {
    let doc = report::json::RunDocument::new("0.1.0", fixtures::host(), &fixtures::job_reports(), &[50.0]);
    serde_json::from_str(&doc.to_json()).unwrap()
}

fn page(doc: serde_json::Value) -> String {
    report::html_report("0.1.0", &[("r.json".to_string(), doc)]).unwrap()
}

#[test]
fn a_document_with_host_shows_its_run_block() {
    let html = page(run_document());
    let block = ["<caption class=\"l\">Run</caption>", "2026-11-27T16:20:05Z", "lab1", "6.8.0-49-generic"];
    for text in block {
        assert!(html.contains(text), "the page lacks {text:?}");
    }
    assert!(html.contains("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz \u{d7} 8"), "CPU model times count");
    assert!(html.contains("15.6 GiB"), "memory in GiB");
    assert!(html.contains("iolab run --target mem:16m --json r.json"), "the command line");
}

#[test]
fn a_document_without_host_shows_no_run_block() {
    let mut doc = run_document();
    doc.as_object_mut().unwrap().remove("host");
    assert!(!page(doc).contains(">Run</caption>"));
}

/// A run that discarded draws its discards each second beside the
/// other directions.
#[test]
fn a_run_that_discarded_charts_its_discards() {
    let mut doc = run_document();
    let run = &mut doc["jobs"][0]["runs"][0];
    run["trim"]["ios"] = 9.into();
    for second in run["per_second"].as_array_mut().unwrap() {
        second["trim"] = serde_json::json!({ "ios": 9, "bytes": 9 << 16, "iops": 9.0, "mib_per_s": 0.6,
            "lat_mean_us": 3.0, "lat_p50_us": 3.0, "lat_p99_us": 4.0 });
        second["partial"] = false.into();
    }
    let charts = report::charts(&doc).unwrap();
    let names: Vec<&str> = charts.iter().map(|c| c.name.as_str()).collect();
    let iops = charts.iter().find(|c| c.name.ends_with("-iops") && !c.name.contains("-runs-")).expect("IOPS");
    let legend = |d: &str| iops.svg.contains(&format!(">\n{d}\n<"));
    assert!(legend("read") && legend("trim"), "no trim series in {} (of {names:?})", iops.name);
}

#[test]
fn a_run_held_to_a_rate_shows_it_among_its_parameters() {
    let mut doc = run_document();
    doc["jobs"][0]["runs"][0]["rate_iops"] = 4321.into();
    let html = page(doc);
    assert!(html.contains(">held to IOPS<") && html.contains(">4321<"), "no rate in the parameters");
}
