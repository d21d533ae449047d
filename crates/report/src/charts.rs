//! The charts each kind of result has, made from its JSON document (so
//! `--plot` during a run and `iolab report` on saved files draw the same):
//! a run's latency histogram and percentiles, IOPS, MiB/s and latency
//! over time, a repeated job's runs over one another; a sweep's
//! figure per arm, layout or column as bars.

use serde_json::Value;

use crate::plot::{bar_chart, histogram_chart, line_chart, percentile_chart, Buckets, Series};

/// One chart: a file stem for `--plot DIR`, a title, the SVG.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    pub name: String,
    pub title: String,
    pub svg: String,
}

pub(crate) fn f64_of(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A file stem from a name: letters, digits, `-` and `_` kept.
fn stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Every chart of `doc`, by its schema; an error names a schema without.
pub fn charts(doc: &Value) -> Result<Vec<Chart>, String> {
    match str_of(doc, "schema") {
        "iolab-run" => Ok(array(doc, "jobs").iter().flat_map(job_charts).collect()),
        "iolab-sweep-journal" => Ok(journal_charts(doc)),
        "iolab-sweep-stripes" => Ok(stripes_charts(doc)),
        "iolab-sweep-policies" => Ok(policies_charts(doc)),
        "iolab-bonnie" => Ok(bonnie_charts(doc)),
        "" => Err("not an iolab result document (no \"schema\")".into()),
        other => Err(format!("{other}: iolab draws no charts for this kind of document")),
    }
}

fn job_charts(job: &Value) -> Vec<Chart> {
    let runs = array(job, "runs");
    let name = str_of(job, "name");
    let mut out: Vec<Chart> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, run)| {
            let label = if runs.len() > 1 { format!("{name}-run{}", i + 1) } else { name.to_string() };
            run_charts(&label, run)
        })
        .collect();
    if runs.len() > 1 {
        out.insert(0, repeats_chart(name, runs));
    }
    out
}

/// The directions a run did requests in.
fn directions(run: &Value) -> Vec<&'static str> {
    ["read", "write", "trim"]
        .into_iter()
        .filter(|d| run.get(d).is_some_and(|o| f64_of(o, "ios") > 0.0))
        .collect()
}

/// `key` of direction `d` in each whole second of `run` (a partial last
/// second's rates rest on too little time to draw beside whole ones; the
/// JSON keeps it, marked).
fn over_time(run: &Value, key: &str, d: &str) -> Vec<(f64, f64)> {
    array(run, "per_second")
        .iter()
        .filter(|s| f64_of(&s[d], "ios") > 0.0 && s.get("partial").and_then(Value::as_bool) != Some(true))
        .map(|s| (f64_of(s, "start_s") + f64_of(s, "seconds"), f64_of(&s[d], key)))
        .collect()
}

/// Every run of a repeated job over one another: IOPS each second, a
/// colour per run, writes dashed.
pub(crate) fn repeats_chart(name: &str, runs: &[Value]) -> Chart {
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, run)| {
            directions(run).into_iter().map(move |d| Series {
                name: format!("run {} {d}", i + 1),
                points: over_time(run, "iops", d),
                dashed: d == "write",
                colour: Some(i),
            })
        })
        .collect();
    let title = format!("{name}: IOPS each second, every run");
    Chart {
        name: format!("{}-runs-iops", stem(name)),
        svg: line_chart(&title, "seconds", "IOPS", &series),
        title,
    }
}

/// A run's charts: its latency histogram and percentiles, IOPS, MiB/s
/// and p50 and p99 latency each second; directions without requests left
/// out.
pub(crate) fn run_charts(label: &str, run: &Value) -> Vec<Chart> {
    let dirs = directions(run);
    let sets: Vec<Buckets> = dirs
        .iter()
        .map(|d| Buckets {
            name: (*d).into(),
            buckets: array(&run[d]["latency"], "histogram")
                .iter()
                .map(|b| {
                    (
                        f64_of(b, "lo_us"),
                        f64_of(b, "hi_us"),
                        b.get("count").and_then(Value::as_u64).unwrap_or(0),
                    )
                })
                .collect(),
        })
        .collect();
    let each_second = |key: &str| -> Vec<Series> {
        dirs.iter()
            .map(|d| Series { name: (*d).into(), points: over_time(run, key, d), ..Series::default() })
            .collect()
    };
    // A colour per direction, p99 dashed beside its p50.
    let latency: Vec<Series> = dirs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            [("p50", "lat_p50_us", false), ("p99", "lat_p99_us", true)].map(|(p, key, dashed)| Series {
                name: format!("{d} {p}"),
                points: over_time(run, key, d),
                dashed,
                colour: Some(i),
            })
        })
        .collect();
    let chart = |suffix: &str, title: String, svg: String| Chart {
        name: format!("{}-{suffix}", stem(label)),
        title,
        svg,
    };
    let titled = |what: &str| format!("{label}: {what}");
    vec![
        chart("latency", titled("latency"), histogram_chart(&titled("latency"), &sets)),
        chart(
            "latency-cdf",
            titled("latency percentiles"),
            percentile_chart(&titled("latency percentiles"), &sets),
        ),
        chart(
            "iops",
            titled("IOPS each second"),
            line_chart(&titled("IOPS each second"), "seconds", "IOPS", &each_second("iops")),
        ),
        chart(
            "bandwidth",
            titled("MiB/s each second"),
            line_chart(&titled("MiB/s each second"), "seconds", "MiB/s", &each_second("mib_per_s")),
        ),
        chart(
            "latency-time",
            titled("latency each second (p50 solid, p99 dashed)"),
            line_chart(&titled("latency each second (p50 solid, p99 dashed)"), "seconds", "us", &latency),
        ),
    ]
}

fn journal_charts(doc: &Value) -> Vec<Chart> {
    let arms = array(doc, "arms");
    let categories: Vec<String> = arms.iter().map(|a| str_of(a, "arm").to_string()).collect();
    let points = arms.iter().enumerate().map(|(i, a)| (i as f64, f64_of(a, "median_iops"))).collect();
    let title = "validation's journal: write IOPS per arm (median)";
    vec![Chart {
        name: "sweep-journal".into(),
        title: title.into(),
        svg: bar_chart(
            title,
            "IOPS",
            &categories,
            &[Series { name: "IOPS".into(), points, ..Series::default() }],
        ),
    }]
}

fn stripes_charts(doc: &Value) -> Vec<Chart> {
    let rows = array(doc, "rows");
    let categories: Vec<String> = rows.iter().map(|r| str_of(r, "layout").to_string()).collect();
    let mut out = Vec::new();
    let bonnie: Vec<Series> = ["put_block", "get_block"]
        .into_iter()
        .map(|phase| Series {
            name: format!("{phase} (KiB/s)"),
            points: rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let run = array(r, "bonnie").first()?;
                    let p = array(run, "phases").iter().find(|p| str_of(p, "name") == phase)?;
                    Some((i as f64, f64_of(p, "rate")))
                })
                .collect(),
            ..Series::default()
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !bonnie.is_empty() {
        let title = "stripe sizes: bonnie's block rates";
        out.push(Chart {
            name: "sweep-stripes-bonnie".into(),
            title: title.into(),
            svg: bar_chart(title, "KiB/s", &categories, &bonnie),
        });
    }
    let fs: Vec<Series> = ["read", "write"]
        .into_iter()
        .map(|d| Series {
            name: format!("{d} IOPS"),
            points: rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| Some((i as f64, f64_of(&array(r, "fs").first()?[d], "iops"))))
                .collect(),
            ..Series::default()
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !fs.is_empty() {
        let title = "stripe sizes: the fs mix";
        out.push(Chart {
            name: "sweep-stripes-fs".into(),
            title: title.into(),
            svg: bar_chart(title, "IOPS", &categories, &fs),
        });
    }
    out
}

fn policies_charts(doc: &Value) -> Vec<Chart> {
    let columns = array(doc, "columns");
    let categories: Vec<String> = columns.iter().map(|c| str_of(c, "name").to_string()).collect();
    let series: Vec<Series> = ["tar", "rm"]
        .into_iter()
        .map(|phase| Series {
            name: format!("{phase} (median s)"),
            points: columns
                .iter()
                .enumerate()
                .map(|(i, c)| (i as f64, f64_of(&c[phase], "median_s")))
                .collect(),
            ..Series::default()
        })
        .collect();
    let title = "metadata policies: tar and rm (seconds, median)";
    vec![Chart {
        name: "sweep-policies".into(),
        title: title.into(),
        svg: bar_chart(title, "seconds", &categories, &series),
    }]
}

fn bonnie_charts(doc: &Value) -> Vec<Chart> {
    let Some(run) = array(doc, "runs").first() else { return Vec::new() };
    let phases: Vec<&Value> = array(run, "phases").iter().filter(|p| str_of(p, "name") != "seeks").collect();
    if phases.is_empty() {
        return Vec::new();
    }
    let categories: Vec<String> = phases.iter().map(|p| str_of(p, "name").to_string()).collect();
    let points = phases.iter().enumerate().map(|(i, p)| (i as f64, f64_of(p, "rate"))).collect();
    let title = "bonnie: the phases' rates";
    vec![Chart {
        name: "bonnie".into(),
        title: title.into(),
        svg: bar_chart(
            title,
            "KiB/s",
            &categories,
            &[Series { name: "KiB/s".into(), points, ..Series::default() }],
        ),
    }]
}
