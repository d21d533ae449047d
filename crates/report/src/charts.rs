//! The charts each kind of result has, made from its JSON document (so
//! `--plot` during a run and `iolab report` on saved files draw the same):
//! a run's latency histogram, IOPS and latency over time; a sweep's
//! figure per arm, layout or column as bars.

use serde_json::Value;

use crate::plot::{bar_chart, histogram_chart, line_chart, Buckets, Series};

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
    runs.iter()
        .enumerate()
        .flat_map(|(i, run)| {
            let label = if runs.len() > 1 { format!("{name}-run{}", i + 1) } else { name.to_string() };
            run_charts(&label, run)
        })
        .collect()
}

/// A run's three charts: its latency histogram, IOPS over time, p50 and
/// p99 latency over time; directions without requests left out.
pub(crate) fn run_charts(label: &str, run: &Value) -> Vec<Chart> {
    let dirs: Vec<&str> = ["read", "write"]
        .into_iter()
        .filter(|d| run.get(d).is_some_and(|o| f64_of(o, "ios") > 0.0))
        .collect();
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
    let seconds = array(run, "per_second");
    let over_time = |key: &str, d: &str| -> Vec<(f64, f64)> {
        seconds
            .iter()
            // A partial last second's rates rest on too little time to
            // draw beside whole ones (the JSON keeps it, marked).
            .filter(|s| f64_of(&s[d], "ios") > 0.0 && s.get("partial").and_then(Value::as_bool) != Some(true))
            .map(|s| (f64_of(s, "start_s") + f64_of(s, "seconds"), f64_of(&s[d], key)))
            .collect()
    };
    let iops: Vec<Series> =
        dirs.iter().map(|d| Series { name: (*d).into(), points: over_time("iops", d) }).collect();
    let latency: Vec<Series> = dirs
        .iter()
        .flat_map(|d| {
            [("p50", "lat_p50_us"), ("p99", "lat_p99_us")]
                .map(|(p, key)| Series { name: format!("{d} {p}"), points: over_time(key, d) })
        })
        .collect();
    let chart = |suffix: &str, title: String, svg: String| Chart {
        name: format!("{}-{suffix}", stem(label)),
        title,
        svg,
    };
    vec![
        chart("latency", format!("{label}: latency"), histogram_chart(&format!("{label}: latency"), &sets)),
        chart(
            "iops",
            format!("{label}: IOPS each second"),
            line_chart(&format!("{label}: IOPS each second"), "seconds", "IOPS", &iops),
        ),
        chart(
            "latency-time",
            format!("{label}: latency each second"),
            line_chart(&format!("{label}: latency each second"), "seconds", "us", &latency),
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
        svg: bar_chart(title, "IOPS", &categories, &[Series { name: "IOPS".into(), points }]),
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
        svg: bar_chart(title, "KiB/s", &categories, &[Series { name: "KiB/s".into(), points }]),
    }]
}
