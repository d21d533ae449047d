//! bonnie's report: the table in bonnie 1.03's layout (the third seed's),
//! and CSV lines that bonnie++'s own tools read.

use std::fmt::Write as _;

use workloads::bonnie::{BonnieResult, PhaseResult};

use crate::Spread;

const HEAD: &str = "              -------Sequential Output-------- ---Sequential Input-- --Random--
              -Per Char- --Block--- -Rewrite-- -Per Char- --Block--- --Seeks---
Machine    MB K/sec %CPU K/sec %CPU K/sec %CPU K/sec %CPU K/sec %CPU  /sec %CPU";

/// The column header, then one row per result; `extra` adds named columns
/// to the right of each row (the seed's Writes, Reads, Mblock, Mstripe).
pub fn bonnie_table(rows: &[(String, &BonnieResult, Vec<u64>)], extra: &[&str]) -> String {
    let mut out = String::from(HEAD);
    for name in extra {
        let _ = write!(out, " {name:>8}");
    }
    out.push('\n');
    for (name, r, values) in rows {
        let _ = write!(out, "{name:<8} {:>5}", r.spec.size_bytes >> 20);
        for p in &r.phases {
            out.push_str(&cell(p));
        }
        for v in values {
            let _ = write!(out, " {v:>8}");
        }
        out.push('\n');
    }
    out
}

fn cell(p: &PhaseResult) -> String {
    match (p.too_short, p.name) {
        (true, _) => format!(" {:>5} {:>4}", "+++", "+++"),
        (false, "seeks") => format!(" {:>5.1} {:>4.1}", p.rate, p.cpu_pct),
        (false, _) => format!(" {:>5.0} {:>4.1}", p.rate, p.cpu_pct),
    }
}

fn size_text(bytes: u64) -> String {
    if bytes % (1 << 30) == 0 {
        format!("{}G", bytes >> 30)
    } else {
        format!("{}M", bytes >> 20)
    }
}

/// bonnie++ 2.00's CSV line (format 1.98), which `bon_csv2txt` and
/// `bon_csv2html` of bonnie++ 2.00 read: version, name, concurrency, seed,
/// size, chunk, seeks, seekers, the six rates and %CPU, no file tests, the
/// six latencies.
pub fn bonnie_csv(name: &str, r: &BonnieResult) -> String {
    let chunk = if r.spec.chunk_bytes == 8192 { String::new() } else { r.spec.chunk_bytes.to_string() };
    let mut fields = vec![
        "1.98".to_string(),
        format!("iolab-{}", env!("CARGO_PKG_VERSION")),
        name.to_string(),
        "1".into(),
        r.spec.seed.to_string(),
        size_text(r.spec.size_bytes),
        chunk,
        r.spec.seeks.to_string(),
        r.spec.seekers.to_string(),
    ];
    for p in &r.phases {
        let (rate, cpu) = csv_cell(p);
        fields.push(rate);
        fields.push(cpu);
    }
    fields.extend(std::iter::repeat_n(String::new(), 17));
    fields.extend(r.phases.iter().map(|p| format!("{:.0}us", p.latency_max_us)));
    fields.extend(std::iter::repeat_n(String::new(), 6));
    fields.join(",")
}

/// bonnie++ 1.03's CSV line: name, size in MB, the six rates and %CPU,
/// then the (absent) file tests.
pub fn bonnie_csv_103(name: &str, r: &BonnieResult) -> String {
    let mut fields = vec![name.to_string(), (r.spec.size_bytes >> 20).to_string()];
    for p in &r.phases {
        let (rate, cpu) = csv_cell(p);
        fields.push(rate);
        fields.push(cpu);
    }
    fields.extend(std::iter::repeat_n(String::new(), 13));
    fields.join(",")
}

fn csv_cell(p: &PhaseResult) -> (String, String) {
    match (p.too_short, p.name) {
        (true, _) => ("+++++".into(), "+++".into()),
        (false, "seeks") => (format!("{:.1}", p.rate), format!("{:.0}", p.cpu_pct)),
        (false, _) => (format!("{:.0}", p.rate), format!("{:.0}", p.cpu_pct)),
    }
}

/// Min, median and max over repeated runs, as three results (in that
/// order) whose phases hold the spread of each figure. A phase too short
/// to measure in any run stays too short.
pub fn bonnie_spread(runs: &[BonnieResult]) -> Option<[BonnieResult; 3]> {
    let first = runs.first()?;
    let mut out = [first.clone(), first.clone(), first.clone()];
    for (i, phase) in first.phases.iter().enumerate() {
        let too_short = runs.iter().any(|r| r.phases[i].too_short);
        let rate = Spread::of(&runs.iter().map(|r| r.phases[i].rate).collect::<Vec<_>>())?;
        let cpu = Spread::of(&runs.iter().map(|r| r.phases[i].cpu_pct).collect::<Vec<_>>())?;
        for (k, (r, c)) in
            [(rate.min, cpu.min), (rate.median, cpu.median), (rate.max, cpu.max)].into_iter().enumerate()
        {
            out[k].phases[i] = PhaseResult { rate: r, cpu_pct: c, too_short, ..phase.clone() };
        }
    }
    Some(out)
}
