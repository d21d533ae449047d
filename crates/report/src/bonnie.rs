//! bonnie's report: the table in bonnie 1.03's layout (the third seed's),
//! bonnie++'s file-test table below it where the file tests ran, and CSV
//! lines that bonnie++'s own tools read.

use std::fmt::Write as _;

use workloads::bonnie::{BonnieResult, PhaseResult};
use workloads::tree::FilePhase;

use crate::Spread;

const HEAD: &str = "              -------Sequential Output-------- ---Sequential Input-- --Random--
              -Per Char- --Block--- -Rewrite-- -Per Char- --Block--- --Seeks---
Machine    MB K/sec %CPU K/sec %CPU K/sec %CPU K/sec %CPU K/sec %CPU  /sec %CPU";

const FILES_HEAD: &str =
    "                       -------Sequential Create-------- ---------Random Create----------
                       -Create--- --Read---- -Delete--- -Create--- --Read---- -Delete---
Machine  files:max:min  /sec %CPU  /sec %CPU  /sec %CPU  /sec %CPU  /sec %CPU  /sec %CPU";

/// The column header, then one row per result; `extra` adds named columns
/// to the right of each row (the seed's Writes, Reads, Mblock, Mstripe).
/// Results with file tests get bonnie++'s file table below.
pub fn bonnie_table(rows: &[(String, &BonnieResult, Vec<u64>)], extra: &[&str]) -> String {
    let mut out = String::new();
    if rows.iter().any(|(_, r, _)| !r.phases.is_empty()) {
        out.push_str(HEAD);
        for name in extra {
            let _ = write!(out, " {name:>8}");
        }
        out.push('\n');
        for (name, r, values) in rows.iter().filter(|(_, r, _)| !r.phases.is_empty()) {
            let _ = write!(out, "{name:<8} {:>5}", r.spec.size_bytes >> 20);
            for p in &r.phases {
                out.push_str(&cell(p));
            }
            for v in values {
                let _ = write!(out, " {v:>8}");
            }
            out.push('\n');
        }
    }
    let with_files: Vec<_> = rows.iter().filter_map(|(name, r, _)| Some((name, r.files.as_ref()?))).collect();
    if !with_files.is_empty() {
        out.push_str(FILES_HEAD);
        out.push('\n');
        for (name, files) in with_files {
            let _ = write!(out, "{name:<8} {:>13}", files.spec.label());
            for p in &files.phases {
                out.push_str(&file_cell(p));
            }
            out.push('\n');
        }
    }
    out
}

fn file_cell(p: &FilePhase) -> String {
    if p.too_short {
        format!(" {:>5} {:>4}", "+++++", "+++")
    } else {
        format!(" {:>5.0} {:>4.0}", p.rate, p.cpu_pct)
    }
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
/// size, chunk, seeks, seekers, the six rates and %CPU, the file tests'
/// shape (files in units of 1024, largest, smallest, directories, chunk)
/// and six rates and %CPU, then the six block latencies and the six file
/// latencies. What did not run is left empty, as bonnie++ leaves it.
pub fn bonnie_csv(name: &str, r: &BonnieResult) -> String {
    let mut fields = vec![
        "1.98".to_string(),
        format!("iolab-{}", env!("CARGO_PKG_VERSION")),
        name.to_string(),
        "1".into(),
        r.spec.seed.to_string(),
    ];
    if r.phases.is_empty() {
        fields.extend(std::iter::repeat_n(String::new(), 16));
    } else {
        let chunk = if r.spec.chunk_bytes == 8192 { String::new() } else { r.spec.chunk_bytes.to_string() };
        fields.extend([
            size_text(r.spec.size_bytes),
            chunk,
            r.spec.seeks.to_string(),
            r.spec.seekers.to_string(),
        ]);
        fields.extend(r.phases.iter().flat_map(|p| <[String; 2]>::from(csv_cell(p))));
    }
    match &r.files {
        None => fields.extend(std::iter::repeat_n(String::new(), 17)),
        Some(files) => {
            let s = &files.spec;
            let nonzero = |v: u32| if v == 0 && s.max_bytes == 0 { String::new() } else { v.to_string() };
            let dirs = if s.dirs == 0 { String::new() } else { s.dirs.to_string() };
            fields.extend([
                (s.files / 1024).to_string(),
                nonzero(s.max_bytes),
                nonzero(s.min_bytes),
                dirs,
                String::new(),
            ]);
            fields.extend(files.phases.iter().flat_map(|p| <[String; 2]>::from(file_csv_cell(p))));
        }
    }
    let latency = |us: f64| format!("{us:.0}us");
    match r.phases.is_empty() {
        true => fields.extend(std::iter::repeat_n(String::new(), 6)),
        false => fields.extend(r.phases.iter().map(|p| latency(p.latency_max_us))),
    }
    match &r.files {
        None => fields.extend(std::iter::repeat_n(String::new(), 6)),
        Some(files) => fields.extend(files.phases.iter().map(|p| latency(p.latency_max_us))),
    }
    fields.join(",")
}

/// bonnie++ 1.03's CSV line: name, size in MB, the six rates and %CPU,
/// then the file tests' shape and their six rates and %CPU.
pub fn bonnie_csv_103(name: &str, r: &BonnieResult) -> String {
    let mut fields = vec![name.to_string()];
    if r.phases.is_empty() {
        fields.extend(std::iter::repeat_n(String::new(), 13));
    } else {
        fields.push((r.spec.size_bytes >> 20).to_string());
        fields.extend(r.phases.iter().flat_map(|p| <[String; 2]>::from(csv_cell(p))));
    }
    match &r.files {
        None => fields.extend(std::iter::repeat_n(String::new(), 13)),
        Some(files) => {
            fields.push(files.spec.label());
            fields.extend(files.phases.iter().flat_map(|p| <[String; 2]>::from(file_csv_cell(p))));
        }
    }
    fields.join(",")
}

fn file_csv_cell(p: &FilePhase) -> (String, String) {
    if p.too_short {
        ("+++++".into(), "+++".into())
    } else {
        (format!("{:.0}", p.rate), format!("{:.0}", p.cpu_pct))
    }
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
    if let Some(files) = &first.files {
        for (i, phase) in files.phases.iter().enumerate() {
            let of = |f: fn(&FilePhase) -> f64| -> Option<Spread> {
                Spread::of(
                    &runs
                        .iter()
                        .map(|r| r.files.as_ref().map_or(0.0, |t| f(&t.phases[i])))
                        .collect::<Vec<_>>(),
                )
            };
            let too_short = runs.iter().any(|r| r.files.as_ref().is_some_and(|t| t.phases[i].too_short));
            let (rate, cpu) = (of(|p| p.rate)?, of(|p| p.cpu_pct)?);
            for (k, (r, c)) in
                [(rate.min, cpu.min), (rate.median, cpu.median), (rate.max, cpu.max)].into_iter().enumerate()
            {
                if let Some(t) = out[k].files.as_mut() {
                    t.phases[i] = FilePhase { rate: r, cpu_pct: c, too_short, ..phase.clone() };
                }
            }
        }
    }
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
