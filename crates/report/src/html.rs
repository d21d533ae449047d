//! `iolab report`: one self-contained HTML page (inline SVG and CSS,
//! nothing fetched from anywhere) from saved result documents: each run's
//! target and how it was measured, its parameters, every run's figures,
//! the spread over repeats, and its charts; each sweep's table and chart;
//! with several documents, a comparison of their runs first. Each
//! document's section opens with the machine and command behind it (its
//! `host` object), when the document has one.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::Value;

use crate::charts::{array, charts, f64_of, repeats_chart, run_charts, str_of, Chart};
use crate::json::Host;
use crate::plot::{bar_chart, escape, Series};
use crate::units;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f0f0f0}td.l,th.l{text-align:left}.warn{color:#a40}.note{color:#666;font-size:90%}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}h2{border-bottom:2px solid #ccc;margin-top:2em}\
table.run caption{text-align:left;font-weight:bold}";

/// A table: a header row, then rows; cells are text, escaped here; the
/// first column left-aligned.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    out.push_str("<table><tr>");
    for (i, h) in header.iter().enumerate() {
        let _ = write!(out, "<th{}>{}</th>", if i == 0 { " class=\"l\"" } else { "" }, escape(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            // Figures right, words left.
            let words = i == 0 || !cell.starts_with(|c: char| c.is_ascii_digit() || c == '-');
            let _ = write!(out, "<td{}>{}</td>", if words { " class=\"l\"" } else { "" }, escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
}

/// A chart, its title inside it (and for screen readers, its label).
fn figure(out: &mut String, chart: &Chart) {
    let _ = writeln!(out, "<figure aria-label=\"{}\">{}</figure>", escape(&chart.title), chart.svg);
}

fn num(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// The page for `docs` (each with the name of the file it came from);
/// `iolab_version` names the program that made it.
pub fn html_report(iolab_version: &str, docs: &[(String, Value)]) -> Result<String, String> {
    let mut body = String::new();
    let runs: Vec<(&str, &Value)> = docs
        .iter()
        .filter(|(_, d)| str_of(d, "schema") == "iolab-run")
        .flat_map(|(file, d)| array(d, "jobs").iter().map(move |j| (file.as_str(), j)))
        .collect();
    if runs.len() > 1 {
        comparison(&mut body, &runs);
    }
    for (file, doc) in docs {
        let schema = str_of(doc, "schema");
        let version = doc.get("version").and_then(Value::as_u64).unwrap_or(0);
        let _ = writeln!(
            body,
            "<section><h2>{} <span class=\"note\">({} version {version})</span></h2>",
            escape(file),
            escape(schema)
        );
        run_block(&mut body, doc);
        match schema {
            "iolab-run" => run_section(&mut body, doc),
            "iolab-sweep-journal" => journal_section(&mut body, doc),
            "iolab-sweep-stripes" => stripes_section(&mut body, doc),
            "iolab-sweep-policies" => policies_section(&mut body, doc),
            "iolab-bonnie" => bonnie_section(&mut body, doc),
            _ => {
                return Err(format!(
                    "{file}: {}",
                    charts(doc).err().unwrap_or_else(|| "not a document iolab reports".into())
                ))
            }
        }
        if schema != "iolab-run" {
            for chart in charts(doc)? {
                figure(&mut body, &chart);
            }
        }
        body.push_str("</section>\n");
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>iolab report</title><style>{STYLE}</style></head>\n\
         <body><h1>iolab report</h1><p class=\"note\">Made by iolab {} from {}. Every figure is as the \
         documents hold it; the page fetches nothing.</p>\n{body}</body></html>\n",
        escape(iolab_version),
        crate::counted(docs.len() as u64, "result file", "result files")
    ))
}

/// The document's `host` object as a small "Run" table: when it started,
/// the host, its kernel, CPU and memory, and the command line. Documents
/// written before `host` existed (or with a `host` this page cannot read)
/// get no table, and facts the writer could not read get no row: the page
/// shows only what the document holds.
fn run_block(out: &mut String, doc: &Value) {
    let Some(host) = doc.get("host").and_then(|h| Host::deserialize(h).ok()) else { return };
    let cpu = match (&host.cpu_model, host.cpus) {
        (Some(model), Some(n)) => Some(format!("{model} \u{d7} {n}")),
        (Some(model), None) => Some(model.clone()),
        (None, Some(n)) => Some(crate::counted(n, "CPU", "CPUs")),
        (None, None) => None,
    };
    let command = (!host.command_line.is_empty())
        .then(|| host.command_line.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" "));
    let rows: Vec<(&str, String)> = [
        ("started at", host.started_at),
        ("host", host.hostname),
        ("kernel", host.kernel),
        ("CPU", cpu),
        ("memory", host.memory_bytes.map(crate::units::human)),
        ("command line", command),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name, value?)))
    .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str("<table class=\"run\"><caption class=\"l\">Run</caption>");
    for (name, value) in rows {
        let _ = write!(out, "<tr><th class=\"l\">{name}</th><td class=\"l\">{}</td></tr>", escape(&value));
    }
    out.push_str("</table>\n");
}

/// An argument as a shell would need it to get it back: as it is when it
/// holds only characters no shell treats specially, single-quoted if not.
fn shell_word(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=,@%+".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// Each job of every run document side by side: its first run's figures,
/// IOPS and MiB/s (a 4 KiB job and a 1 MiB one compare by bytes, not
/// requests), "-" for a direction a job did not do.
fn comparison(out: &mut String, runs: &[(&str, &Value)]) {
    out.push_str("<section><h2>Side by side</h2>\n");
    let first = |job: &Value| array(job, "runs").first().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|(file, job)| {
            let run = first(job);
            let mut row = vec![format!("{file}: {}", str_of(job, "name"))];
            for d in ["read", "write"] {
                if f64_of(&run[d], "ios") > 0.0 {
                    row.push(units::iops(f64_of(&run[d], "iops")));
                    row.push(units::bandwidth_mib(f64_of(&run[d], "mib_per_s")));
                    row.push(units::latency_us(f64_of(&run[d]["latency"], "p99_us")));
                } else {
                    row.extend(["-", "-", "-"].map(String::from));
                }
            }
            row
        })
        .collect();
    let header = ["job", "read IOPS", "read MiB/s", "read p99", "write IOPS", "write MiB/s", "write p99"];
    table(out, &header, &rows);
    let categories: Vec<String> = rows.iter().map(|r| r[0].clone()).collect();
    for (key, what) in [("iops", "IOPS"), ("mib_per_s", "MiB/s")] {
        let series = ["read", "write"].map(|d| Series {
            name: format!("{d} {what}"),
            points: runs
                .iter()
                .enumerate()
                .map(|(i, (_, job))| (i as f64, f64_of(&first(job)[d], key)))
                .collect(),
            ..Series::default()
        });
        let title = format!("{what}, first run of each job");
        let svg = bar_chart(&title, what, &categories, &series);
        figure(out, &Chart { name: format!("compare-{key}"), title, svg });
    }
    out.push_str("</section>\n");
}

fn run_section(out: &mut String, doc: &Value) {
    for job in array(doc, "jobs") {
        let name = str_of(job, "name");
        let _ = writeln!(out, "<h3>job {}</h3>", escape(name));
        target_table(out, &job["target"]);
        let runs = array(job, "runs");
        if let Some(first) = runs.first() {
            parameters_table(out, first);
        }
        runs_table(out, runs);
        if let Some(summary) = job.get("summary").filter(|s| !s.is_null()) {
            summary_table(out, summary);
        }
        // A repeated job: its runs over one another, each run's own
        // charts folded away below.
        if runs.len() > 1 {
            figure(out, &repeats_chart(name, runs));
            out.push_str("<details><summary>each run's charts</summary>\n");
        }
        for (i, r) in runs.iter().enumerate() {
            let label = if runs.len() > 1 { format!("{name} run {}", i + 1) } else { name.to_string() };
            for chart in run_charts(&label, r) {
                figure(out, &chart);
            }
        }
        if runs.len() > 1 {
            out.push_str("</details>\n");
        }
    }
}

/// The job's target: its media, page cache and layout, and its warnings.
fn target_table(out: &mut String, target: &Value) {
    let mut lines = Vec::new();
    for m in array(target, "media") {
        let how =
            if m.get("direct").and_then(Value::as_bool).unwrap_or(false) { "O_DIRECT" } else { "buffered" };
        let fs = str_of(m, "filesystem");
        let on = if fs.is_empty() { String::new() } else { format!(" on {fs}") };
        let memory = if m.get("memory_backed").and_then(Value::as_bool).unwrap_or(false) {
            " (in memory)"
        } else {
            ""
        };
        lines.push(vec![str_of(m, "name").to_string(), format!("{} {how}{on}{memory}", str_of(m, "kind"))]);
    }
    lines.push(vec!["page cache".into(), str_of(target, "cache").to_string()]);
    let layout = &target["layout"];
    lines.push(vec![
        "layout".into(),
        format!(
            "{}: {} bytes laid out before the clock, {} left unwritten",
            str_of(layout, "policy"),
            f64_of(layout, "laid_out_bytes"),
            f64_of(layout, "unwritten_bytes")
        ),
    ]);
    table(out, &["target", str_of(target, "name")], &lines);
    for w in array(target, "warnings") {
        let _ = writeln!(out, "<p class=\"warn\">warning: {}</p>", escape(w.as_str().unwrap_or("")));
    }
}

/// The job's parameters, as its first run records them.
fn parameters_table(out: &mut String, first: &Value) {
    let p =
        |k: &str| first.get(k).map_or(String::new(), |v| v.as_str().map_or(v.to_string(), str::to_string));
    let params = vec![vec![
        p("engine"),
        p("threads"),
        p("iodepth"),
        p("rw"),
        p("read_pct"),
        p("bs"),
        p("region_offset_bytes"),
        p("region_bytes"),
        p("seed"),
        first.get("rate_iops").and_then(Value::as_u64).map_or("-".into(), |r| r.to_string()),
    ]];
    let heads = [
        "engine",
        "threads",
        "iodepth",
        "rw",
        "read %",
        "bs",
        "region offset",
        "region bytes",
        "seed",
        "held to IOPS",
    ];
    table(out, &heads, &params);
}

/// A row per run (a `*` on one whose reads may have met holes); trim
/// columns where a run discarded.
fn runs_table(out: &mut String, runs: &[Value]) {
    let trims = runs.iter().any(|r| f64_of(&r["trim"], "ios") > 0.0);
    let dirs: &[&str] = if trims { &["read", "write", "trim"] } else { &["read", "write"] };
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mark = if r.get("reads_from_unwritten").and_then(Value::as_bool).unwrap_or(false) {
                "*"
            } else {
                ""
            };
            let mut row = vec![format!("run {}{mark}", i + 1), num(f64_of(r, "elapsed_s"), 2)];
            for d in dirs {
                let l = &r[*d]["latency"];
                if f64_of(&r[*d], "ios") == 0.0 {
                    // No request in this direction: nothing to show.
                    row.extend(std::iter::repeat_n("-".to_string(), 6));
                    continue;
                }
                row.extend([
                    num(f64_of(&r[*d], "iops"), 1),
                    num(f64_of(&r[*d], "mib_per_s"), 2),
                    num(f64_of(l, "mean_us"), 1),
                    num(f64_of(l, "p50_us"), 1),
                    num(f64_of(l, "p99_us"), 1),
                    num(f64_of(l, "max_us"), 1),
                ]);
            }
            row.push(num(f64_of(&r["cpu"], "pct"), 1));
            row
        })
        .collect();
    let mut header = vec!["run".to_string(), "seconds".to_string()];
    for d in dirs {
        for what in ["IOPS", "MiB/s", "mean us", "p50 us", "p99 us", "max us"] {
            header.push(format!("{d} {what}"));
        }
    }
    header.push("CPU %".to_string());
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    table(out, &header, &rows);
    if runs.iter().any(|r| r.get("reads_from_unwritten").and_then(Value::as_bool).unwrap_or(false)) {
        out.push_str("<p class=\"warn\">* reads may have met never-written blocks (holes): their figures do not measure the medium</p>\n");
    }
}

/// Over the repeats: median (min-max) of each direction's figures.
fn summary_table(out: &mut String, summary: &Value) {
    // One run has no spread: its row above says it all.
    let runs = summary.get("runs").and_then(Value::as_u64).unwrap_or(0);
    if runs < 2 {
        return;
    }
    let spread = |v: &Value| {
        format!("{} ({}-{})", num(f64_of(v, "median"), 1), num(f64_of(v, "min"), 1), num(f64_of(v, "max"), 1))
    };
    let rows: Vec<Vec<String>> = ["read", "write"]
        .into_iter()
        .filter(|d| !summary[d].is_null())
        .map(|d| {
            vec![
                d.to_string(),
                spread(&summary[d]["iops"]),
                spread(&summary[d]["mib_per_s"]),
                spread(&summary[d]["lat_p99_us"]),
            ]
        })
        .collect();
    let _ = writeln!(out, "<p>Over {runs} runs: median (min-max)</p>");
    table(out, &["direction", "IOPS", "MiB/s", "p99 us"], &rows);
}

fn journal_section(out: &mut String, doc: &Value) {
    let _ = writeln!(
        out,
        "<p>{} on {}, {} threads x depth {}, {} s runs, engine {}</p>",
        escape(str_of(doc, "bs")),
        escape(str_of(doc, "target")),
        f64_of(doc, "threads"),
        f64_of(doc, "iodepth"),
        f64_of(doc, "runtime_s"),
        escape(str_of(doc, "engine"))
    );
    let rows: Vec<Vec<String>> = array(doc, "arms")
        .iter()
        .map(|a| {
            let runs: Vec<String> = array(a, "runs").iter().map(|r| units::iops(f64_of(r, "iops"))).collect();
            vec![
                str_of(a, "arm").to_string(),
                units::iops(f64_of(a, "median_iops")),
                num(f64_of(a, "median_vs_off"), 3),
                runs.join(" "),
            ]
        })
        .collect();
    table(out, &["arm", "median write IOPS", "x off", "each run"], &rows);
}

fn stripes_section(out: &mut String, doc: &Value) {
    let rows: Vec<Vec<String>> = array(doc, "rows")
        .iter()
        .map(|r| {
            let mut row = vec![str_of(r, "layout").to_string()];
            if let Some(b) = array(r, "bonnie").first() {
                row.extend(
                    array(b, "phases")
                        .iter()
                        .map(|p| format!("{} {}", str_of(p, "name"), num(f64_of(p, "rate"), 0))),
                );
            }
            if let Some(f) = array(r, "fs").first() {
                row.push(format!(
                    "read {} IOPS, write {} IOPS",
                    units::iops(f64_of(&f["read"], "iops")),
                    units::iops(f64_of(&f["write"], "iops"))
                ));
            }
            row
        })
        .collect();
    for row in &rows {
        let _ = writeln!(out, "<p><b>{}</b>: {}</p>", escape(&row[0]), escape(&row[1..].join(", ")));
    }
}

fn policies_section(out: &mut String, doc: &Value) {
    let _ = writeln!(
        out,
        "<p>{} copies of {} ({} entries), {} repeats (the columns in turn, each repeat starting one further along) on {}</p>",
        f64_of(doc, "copies"),
        escape(str_of(doc, "archive")),
        f64_of(doc, "entries"),
        f64_of(doc, "repeats"),
        escape(str_of(doc, "target"))
    );
    let phase = |c: &Value, p: &str| {
        let s = &c[p];
        let range = match s.get("vs_async_range").and_then(Value::as_array).map(|r| r.as_slice()) {
            Some([lo, hi]) if str_of(c, "name") != "async" && f64_of(doc, "repeats") > 1.0 => {
                format!(" ({:.2}-{:.2} a repeat)", lo.as_f64().unwrap_or(0.0), hi.as_f64().unwrap_or(0.0))
            }
            _ => String::new(),
        };
        let ratio =
            s.get("vs_async").and_then(Value::as_f64).map_or(String::new(), |r| format!(", x{r:.2}{range}"));
        format!(
            "{} ({}-{}){ratio}",
            num(f64_of(s, "median_s"), 2),
            num(f64_of(s, "min_s"), 2),
            num(f64_of(s, "max_s"), 2)
        )
    };
    let rows: Vec<Vec<String>> = array(doc, "columns")
        .iter()
        .map(|c| {
            vec![str_of(c, "name").to_string(), phase(c, "tar"), phase(c, "rm"), str_of(c, "how").to_string()]
        })
        .collect();
    table(out, &["column", "tar: s median (min-max)", "rm: s median (min-max)", "how it ran"], &rows);
}

fn bonnie_section(out: &mut String, doc: &Value) {
    let rows: Vec<Vec<String>> = array(doc, "runs")
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            array(r, "phases").iter().map(move |p| {
                let short = if p.get("too_short").and_then(Value::as_bool).unwrap_or(false) {
                    " (too short: +++)"
                } else {
                    ""
                };
                vec![
                    format!("run {}: {}", i + 1, str_of(p, "name")),
                    format!("{}{short}", num(f64_of(p, "rate"), 1)),
                    num(f64_of(p, "cpu_pct"), 1),
                ]
            })
        })
        .collect();
    table(out, &["phase", "rate (KiB/s; seeks/s)", "CPU %"], &rows);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_doc(iops: f64) -> Value {
        serde_json::json!({
            "schema": "iolab-run", "version": 3,
            "jobs": [{
                "name": "j<1>",
                "target": { "name": "t.img", "media": [{ "name": "t.img", "kind": "file", "direct": true,
                    "filesystem": "ext4", "memory_backed": false }], "cache": "direct",
                    "layout": { "policy": "auto", "laid_out_bytes": 0, "unwritten_bytes": 0 }, "warnings": [] },
                "runs": [{ "engine": "uring", "threads": 1, "elapsed_s": 2.0, "reads_from_unwritten": false,
                    "read": { "ios": 100, "iops": iops, "mib_per_s": 1.0,
                        "latency": { "p99_us": 9.5, "histogram": [{ "lo_us": 1.0, "hi_us": 1.06, "count": 100 }] } },
                    "write": { "ios": 0, "iops": 0.0, "latency": { "histogram": [] } },
                    "cpu": { "pct": 50.0 },
                    "per_second": [{ "start_s": 0, "seconds": 1.0, "partial": false,
                        "read": { "ios": 100, "iops": iops, "lat_p50_us": 1.0, "lat_p99_us": 9.5 }, "write": { "ios": 0 } }] }],
                "summary": null
            }]
        })
    }

    #[test]
    fn the_page_holds_every_runs_figures_and_fetches_nothing() {
        let page =
            html_report("0.1.0", &[("a.json".into(), run_doc(1234.5)), ("b.json".into(), run_doc(777.0))])
                .unwrap();
        for figure in ["1234.5", "777.0", "Side by side", "a.json: j&lt;1&gt;"] {
            assert!(page.contains(figure), "{figure} missing");
        }
        assert!(!page.contains("j<1>"), "names are escaped");
        for fetch in ["src=", "href=", "@import", "url("] {
            assert!(!page.contains(fetch), "the page fetches something: {fetch}");
        }
        assert_eq!(page.matches("<svg").count(), page.matches("</svg>").count());
    }

    /// The table of the page's "Side by side" section.
    fn comparison_table(page: &str) -> &str {
        let at = page.find("Side by side").unwrap();
        &page[at..at + page[at..].find("</table>").unwrap()]
    }

    #[test]
    fn a_direction_a_job_did_not_do_shows_nothing_beside_one_it_did() {
        let page =
            html_report("0.1.0", &[("a.json".into(), run_doc(1234.5)), ("b.json".into(), run_doc(7.0))])
                .unwrap();
        let compared = comparison_table(&page);
        assert!(compared.contains("read MiB/s") && compared.contains("write MiB/s"), "{compared}");
        assert!(!compared.contains("0ns") && !compared.contains(">0<"), "no write figures: {compared}");
        assert_eq!(compared.matches("<td>-</td>").count(), 6, "three write cells a job: {compared}");
    }

    #[test]
    fn trim_columns_show_only_where_a_run_discarded() {
        let plain = html_report("0.1.0", &[("a.json".into(), run_doc(10.0))]).unwrap();
        assert!(!plain.contains("trim IOPS"));
        let mut doc = run_doc(10.0);
        doc["jobs"][0]["runs"][0]["trim"] =
            serde_json::json!({ "ios": 64, "iops": 4321.0, "mib_per_s": 2.0, "latency": { "p99_us": 3.0 } });
        let page = html_report("0.1.0", &[("a.json".into(), doc)]).unwrap();
        assert!(page.contains("trim IOPS") && page.contains("4321.0"), "the trims are shown");
    }

    #[test]
    fn a_run_has_bandwidth_and_percentile_charts() {
        let page = html_report("0.1.0", &[("a.json".into(), run_doc(1234.5))]).unwrap();
        for title in ["j&lt;1&gt;: MiB/s each second", "j&lt;1&gt;: latency percentiles"] {
            assert!(page.contains(title), "{title} missing");
        }
    }

    #[test]
    fn a_repeated_job_gets_one_chart_of_every_run_and_its_runs_folded() {
        let mut doc = run_doc(100.0);
        let run = doc["jobs"][0]["runs"][0].clone();
        doc["jobs"][0]["runs"] = serde_json::json!([run.clone(), run.clone(), run]);
        let page = html_report("0.1.0", &[("a.json".into(), doc)]).unwrap();
        assert!(page.contains("IOPS each second, every run"));
        for run in 1..=3 {
            assert!(page.contains(&format!("run {run} read")), "run {run} missing from the overlay");
        }
        assert!(page.contains("<details><summary>each run's charts</summary>"));
    }

    #[test]
    fn a_document_of_another_kind_is_refused_by_its_schema() {
        let doc = serde_json::json!({ "schema": "iolab-crash", "version": 1 });
        let err = html_report("0.1.0", &[("c.json".into(), doc)]).unwrap_err();
        assert!(err.contains("c.json") && err.contains("iolab-crash"), "{err}");
    }
}
