//! `iolab sweep policies`: the first seed's table. Rows tar and rm, a
//! column per metadata policy of iolab's file system (and per kernel file
//! system or directory compared with them), minutes:seconds (median of
//! the repeats, min-max), each column's ratio to `async`, the device
//! counters that explain it, and how each column ran.

use std::fmt::Write as _;

/// One timed phase of one run and what the device saw (4 KiB blocks
/// written, write requests, flushes; a kernel file system's from its
/// block device's statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseRun {
    pub seconds: f64,
    pub blocks_written: u64,
    pub write_requests: u64,
    /// Writes made synchronous by the policy; `None` where not known (a
    /// kernel file system).
    pub sync_writes: Option<u64>,
    pub flushes: u64,
    /// Bytes written to the `log` policy's log; `None` where there is no
    /// iolab log (a kernel file system).
    pub log_bytes: Option<u64>,
}

/// Every repeat of one column: a policy of iolab's file system, a kernel
/// file system, or a directory.
#[derive(Clone, Debug, Default)]
pub struct ColumnRuns {
    /// The column's heading ("async", "ext4-nojournal", ...).
    pub name: String,
    /// How it ran: the file system, how it was made and mounted, and what
    /// drove the work.
    pub how: String,
    pub tar: Vec<PhaseRun>,
    pub rm: Vec<PhaseRun>,
}

/// A whole sweep.
#[derive(Clone, Debug)]
pub struct PoliciesSweep {
    pub archive: String,
    pub entries: u64,
    pub data_bytes: u64,
    pub copies: u32,
    pub repeats: u32,
    /// The target's line: where the file systems were made and how.
    pub target: String,
    /// The disk model, when the file systems were on a simulated disk:
    /// every time is then modeled disk time (virtual), not measured.
    pub modeled: Option<String>,
    pub columns: Vec<ColumnRuns>,
}

/// Median, min and max of one phase's figure over the repeats.
pub fn median_min_max(values: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (median, v[0], v[n - 1])
}

impl ColumnRuns {
    pub fn phase(&self, phase: Phase) -> &[PhaseRun] {
        match phase {
            Phase::Tar => &self.tar,
            Phase::Rm => &self.rm,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Tar,
    Rm,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Tar => "tar",
            Phase::Rm => "rm",
        }
    }
}

impl PoliciesSweep {
    /// A phase's median seconds under `async`, when it ran.
    pub fn async_median(&self, phase: Phase) -> Option<f64> {
        let runs = self.columns.iter().find(|p| p.name == "async")?;
        Some(median_min_max(runs.phase(phase).iter().map(|r| r.seconds)).0)
    }

    /// The lowest and highest ratio of `column`'s run to async's run of the
    /// same repeat, in a phase (a column's runs and async's are listed
    /// repeat by repeat): the ratio's spread, which the ratio of the
    /// medians hides. `None` when async did not run.
    pub fn ratio_range(&self, column: &ColumnRuns, phase: Phase) -> Option<(f64, f64)> {
        let base = self.columns.iter().find(|p| p.name == "async")?.phase(phase);
        let ratios = (column.phase(phase).iter().zip(base))
            .filter(|(_, b)| b.seconds > 0.0)
            .map(|(r, b)| r.seconds / b.seconds);
        ratios.fold(None, |range, r| match range {
            None => Some((r, r)),
            Some((lo, hi)) => Some((f64::min(lo, r), f64::max(hi, r))),
        })
    }
}

/// Why a cell's figure is not to be trusted plainly (marked in the table
/// and listed in the JSON): a measured median under a second, where the
/// machine's noise is a large share, or repeats more than 10% apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doubt {
    UnderASecond,
    SpreadOver10Percent,
}

impl Doubt {
    /// The table's mark after the cell.
    pub fn mark(self) -> &'static str {
        match self {
            Doubt::UnderASecond => "*",
            Doubt::SpreadOver10Percent => "~",
        }
    }

    /// The JSON's name.
    pub fn name(self) -> &'static str {
        match self {
            Doubt::UnderASecond => "under_a_second",
            Doubt::SpreadOver10Percent => "spread_over_10_percent",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            Doubt::UnderASecond => {
                "* the median is under a second: the machine's noise is a large share of it (give more \
                 --copies or --files)"
            }
            Doubt::SpreadOver10Percent => {
                "~ the repeats are more than 10% of the median apart: compare ratios, not times (give more \
                 --repeat)"
            }
        }
    }
}

/// What is doubtful about a phase's runs: under a second (measured time
/// only: modeled time has no noise), or a spread (max - min) over 10% of
/// the median.
pub fn doubts(runs: &[PhaseRun], modeled: bool) -> Vec<Doubt> {
    let (median, min, max) = median_min_max(runs.iter().map(|r| r.seconds));
    let mut out = Vec::new();
    if !modeled && median < 1.0 {
        out.push(Doubt::UnderASecond);
    }
    if runs.len() > 1 && max - min > 0.1 * median {
        out.push(Doubt::SpreadOver10Percent);
    }
    out
}

/// Seconds as the seed wrote them, minutes:seconds, to the hundredth.
pub fn min_sec(seconds: f64) -> String {
    let hundredths = (seconds.max(0.0) * 100.0).round() as u64;
    format!("{}:{:02}.{:02}", hundredths / 6000, hundredths / 100 % 60, hundredths % 100)
}

/// The table, in the seed's layout.
pub fn policies_table(s: &PoliciesSweep) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} copies of {}: {} entries, {}; {} repeats (the columns in turn, each repeat starting one further along) on {}",
        s.copies,
        s.archive,
        s.entries,
        crate::units::human(s.data_bytes),
        s.repeats,
        s.target
    );
    let what = match &s.modeled {
        Some(model) => format!(
            "minutes:seconds of MODELED disk time on {model} (virtual: the disk's requests one after another, the \
             CPU's time not counted; the same on any machine),"
        ),
        None => "minutes:seconds".to_string(),
    };
    let _ = writeln!(
        out,
        "{what} from the mount to the end of the unmount (write-back and flush inside): median (min-max), x async \
         (the medians' ratio; in brackets the lowest and highest of one repeat's run to async's)"
    );
    // Every cell first, then the columns as wide as their widest cell.
    let mut rows: Vec<Vec<String>> =
        vec![std::iter::once(String::new()).chain(s.columns.iter().map(|p| p.name.clone())).collect()];
    let mut used = time_rows(s, &mut rows);
    device_rows(s, &mut rows);
    aligned(&mut out, rows);
    used.sort_by_key(|d| d.mark());
    for doubt in used {
        let _ = writeln!(out, "{}", doubt.meaning());
    }
    let _ = writeln!(out, "how each column ran:");
    for c in &s.columns {
        let _ = writeln!(out, "  {}: {}", c.name, c.how);
    }
    out
}

/// Each phase's times (median (min-max), with their doubts' marks) and
/// ratios to async, a row each; returns the doubts marked.
fn time_rows(s: &PoliciesSweep, rows: &mut Vec<Vec<String>>) -> Vec<Doubt> {
    let mut used: Vec<Doubt> = Vec::new();
    for phase in [Phase::Tar, Phase::Rm] {
        let base = s.async_median(phase);
        let mut times = vec![phase.name().to_string()];
        let mut ratios = vec![String::new()];
        for p in &s.columns {
            let (median, min, max) = median_min_max(p.phase(phase).iter().map(|r| r.seconds));
            let doubts = doubts(p.phase(phase), s.modeled.is_some());
            let marks: String = doubts.iter().map(|d| d.mark()).collect();
            for d in &doubts {
                if !used.contains(d) {
                    used.push(*d);
                }
            }
            times.push(format!("{} ({}-{}){marks}", min_sec(median), min_sec(min), min_sec(max)));
            let range = match s.ratio_range(p, phase) {
                Some((lo, hi)) if p.name != "async" && s.repeats > 1 => format!(" ({lo:.2}-{hi:.2})"),
                _ => String::new(),
            };
            ratios.push(
                base.filter(|b| *b > 0.0).map_or(String::new(), |b| format!("x{:.2}{range}", median / b)),
            );
        }
        rows.push(times);
        rows.push(ratios);
    }
    used
}

/// What the device saw in each phase (medians), a row each.
fn device_rows(s: &PoliciesSweep, rows: &mut Vec<Vec<String>>) {
    rows.push(vec![
        "what the device saw (medians): blocks written / requests / synchronous writes / flushes / log"
            .into(),
    ]);
    for phase in [Phase::Tar, Phase::Rm] {
        let mut cells = vec![phase.name().to_string()];
        for p in &s.columns {
            let runs = p.phase(phase);
            let med = |f: fn(&PhaseRun) -> u64| median_min_max(runs.iter().map(|r| f(r) as f64)).0 as u64;
            let known = |f: fn(&PhaseRun) -> Option<u64>| runs.iter().all(|r| f(r).is_some());
            let sync_writes = if known(|r| r.sync_writes) {
                med(|r| r.sync_writes.unwrap_or(0)).to_string()
            } else {
                "-".into()
            };
            let log = med(|r| r.log_bytes.unwrap_or(0));
            cells.push(format!(
                "{}/{}/{sync_writes}/{}/{}",
                med(|r| r.blocks_written),
                med(|r| r.write_requests),
                med(|r| r.flushes),
                if log == 0 { "-".to_string() } else { crate::units::human(log) }
            ));
        }
        rows.push(cells);
    }
}

/// `rows` with their columns as wide as their widest cell; a row of one
/// cell is a line of its own.
fn aligned(out: &mut String, rows: Vec<Vec<String>>) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter().filter(|r| r.len() > 1).filter_map(|r| r.get(c)).map(String::len).max().unwrap_or(0)
        })
        .collect();
    for row in rows {
        if row.len() == 1 {
            let _ = writeln!(out, "{}", row[0]);
            continue;
        }
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_read_as_minutes_and_seconds() {
        assert_eq!(min_sec(0.0), "0:00.00");
        assert_eq!(min_sec(2156.04), "35:56.04");
        assert_eq!(min_sec(59.999), "1:00.00");
    }

    /// The spread of the ratio pairs each run with async's run of the same
    /// repeat, not the fastest with the fastest.
    #[test]
    fn a_ratios_range_pairs_the_runs_of_one_repeat() {
        let runs = |name: &str, rm: &[f64]| ColumnRuns {
            name: name.into(),
            rm: rm.iter().map(|&seconds| PhaseRun { seconds, ..Default::default() }).collect(),
            ..Default::default()
        };
        let sweep = sweep_of(3, vec![runs("log", &[1.1, 2.4, 3.3]), runs("async", &[1.0, 2.0, 3.0])]);
        let (lo, hi) = sweep.ratio_range(&sweep.columns[0], Phase::Rm).unwrap();
        assert!((lo - 1.1).abs() < 1e-9 && (hi - 1.2).abs() < 1e-9, "{lo} {hi}");
        let alone = PoliciesSweep { columns: vec![runs("log", &[1.0])], ..sweep };
        assert_eq!(alone.ratio_range(&alone.columns[0], Phase::Rm), None, "no async, no ratio");
    }

    /// A measured sweep of `repeats` over `columns`, nothing else said.
    fn sweep_of(repeats: u32, columns: Vec<ColumnRuns>) -> PoliciesSweep {
        let (archive, target, modeled) = (String::new(), String::new(), None);
        PoliciesSweep { archive, entries: 0, data_bytes: 0, copies: 1, repeats, target, modeled, columns }
    }

    fn runs(seconds: &[f64]) -> Vec<PhaseRun> {
        seconds.iter().map(|&seconds| PhaseRun { seconds, ..Default::default() }).collect()
    }

    /// A measured median under a second is doubtful; a modeled one is not
    /// (modeled time has no noise).
    #[test]
    fn a_measured_cell_under_a_second_is_marked() {
        assert_eq!(doubts(&runs(&[0.98, 0.99, 1.0]), false), vec![Doubt::UnderASecond]);
        assert_eq!(doubts(&runs(&[0.98, 0.99, 1.0]), true), vec![]);
        assert_eq!(doubts(&runs(&[1.0, 1.01, 1.02]), false), vec![]);
    }

    /// Repeats more than 10% of the median apart are marked; one run has
    /// no spread to judge.
    #[test]
    fn a_cell_whose_repeats_spread_over_10_percent_is_marked() {
        assert_eq!(doubts(&runs(&[2.0, 2.1, 2.25]), false), vec![Doubt::SpreadOver10Percent]);
        assert_eq!(doubts(&runs(&[2.0, 2.1, 2.19]), false), vec![]);
        assert_eq!(doubts(&runs(&[2.0]), false), vec![]);
    }

    /// The table marks a doubtful cell and says once what the mark means.
    #[test]
    fn the_table_marks_a_doubtful_cell_and_explains_the_mark() {
        let column = |name: &str, tar: &[f64]| ColumnRuns {
            name: name.into(),
            tar: runs(tar),
            rm: runs(&[2.0, 2.0]),
            ..Default::default()
        };
        let sweep = sweep_of(2, vec![column("log", &[0.5, 0.52]), column("async", &[2.0, 2.0])]);
        let table = policies_table(&sweep);
        assert!(table.contains("0:00.51 (0:00.50-0:00.52)*"), "{table}");
        assert_eq!(table.matches("* the median is under a second").count(), 1, "{table}");
        assert!(!table.contains("~ the repeats"), "no cell spreads: {table}");
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median_min_max([4.0, 1.0, 3.0, 2.0].into_iter()), (2.5, 1.0, 4.0));
        assert_eq!(median_min_max([5.0, 1.0, 3.0].into_iter()), (3.0, 1.0, 5.0));
    }
}
