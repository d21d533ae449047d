//! `mpirun -np N iolab run ...`: every rank's run document and the times
//! its runs began and ended, gathered at rank 0, turned into one table (a
//! row per rank, then the aggregate) and one document (`iolab-mpi-run`).
//!
//! The aggregate is IOR's: the requests and bytes of every rank over the
//! time from the first rank's start to the last rank's end, each rank's
//! times read on its own clock from the barrier that started the run (so
//! the figure carries the barrier's skew between hosts, microseconds on
//! one host). Beside it elbencho's first-done and last-done: when the
//! first and the last rank finished, whose gap shows the stragglers.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::units;

/// One rank's part, as rank 0 receives it.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct RankRun {
    pub rank: usize,
    pub host: String,
    /// The rank's `iolab-run` document.
    pub document: Value,
    /// Per job, per run: when its measured phase began and when the run
    /// ended, in seconds from the barrier that started it.
    pub windows: Vec<Vec<(f64, f64)>>,
}

/// One run of one job over every rank.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Aggregate {
    pub job: String,
    pub run: usize,
    pub ranks: usize,
    pub read_ios: u64,
    pub write_ios: u64,
    pub bytes: u64,
    /// The first rank's start; the window runs from it to the last
    /// rank's end.
    pub start_s: f64,
    pub window_s: f64,
    pub iops: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub mib_per_s: f64,
    pub first_done_s: f64,
    pub last_done_s: f64,
    /// elbencho's first-done figures: every rank's requests and bytes from
    /// the first start until the first rank finished, over that time
    /// (each rank's per-second counts, the second it straddles pro rata).
    pub first_done_iops: f64,
    pub first_done_mib_per_s: f64,
}

fn run_of(doc: &Value, job: usize, run: usize) -> Option<&Value> {
    doc.get("jobs")?.get(job)?.get("runs")?.get(run)
}

fn count(run: &Value, dir: &str, what: &str) -> u64 {
    run.get(dir).and_then(|d| d.get(what)).and_then(Value::as_u64).unwrap_or(0)
}

/// The aggregate of every job's every run, in the order of rank 0's
/// document. A job or run a rank lacks (it stopped early) is left out of
/// that aggregate, which then says how many ranks it covers.
pub fn aggregate(ranks: &[RankRun]) -> Vec<Aggregate> {
    indexed(ranks).into_iter().map(|(_, agg)| agg).collect()
}

/// [`aggregate`], each with its job's index in the documents.
fn indexed(ranks: &[RankRun]) -> Vec<(usize, Aggregate)> {
    let Some(first) = ranks.first() else { return Vec::new() };
    let jobs = first.document.get("jobs").and_then(Value::as_array).map_or(0, Vec::len);
    let mut out = Vec::new();
    for j in 0..jobs {
        let runs = run_count(&first.document, j);
        let name = first.document["jobs"][j].get("name").and_then(Value::as_str).unwrap_or("").to_string();
        for r in 0..runs {
            let mut agg = Aggregate {
                job: name.clone(),
                run: r + 1,
                ranks: 0,
                read_ios: 0,
                write_ios: 0,
                bytes: 0,
                start_s: 0.0,
                window_s: 0.0,
                iops: 0.0,
                read_iops: 0.0,
                write_iops: 0.0,
                mib_per_s: 0.0,
                first_done_s: f64::INFINITY,
                last_done_s: 0.0,
                first_done_iops: 0.0,
                first_done_mib_per_s: 0.0,
            };
            let mut start = f64::INFINITY;
            for rank in ranks {
                let (Some(run), Some(&(from, to))) =
                    (run_of(&rank.document, j, r), rank.windows.get(j).and_then(|w| w.get(r)))
                else {
                    continue;
                };
                agg.ranks += 1;
                agg.read_ios += count(run, "read", "ios");
                agg.write_ios += count(run, "write", "ios");
                agg.bytes += count(run, "read", "bytes") + count(run, "write", "bytes");
                start = start.min(from);
                agg.first_done_s = agg.first_done_s.min(to);
                agg.last_done_s = agg.last_done_s.max(to);
            }
            if agg.ranks == 0 {
                continue;
            }
            agg.start_s = start;
            agg.window_s = (agg.last_done_s - start).max(0.0);
            let until = agg.first_done_s - start;
            if until > 0.0 {
                let (ios, bytes) = ranks
                    .iter()
                    .filter_map(|rank| {
                        let run = run_of(&rank.document, j, r)?;
                        let &(from, _) = rank.windows.get(j)?.get(r)?;
                        Some(done_by(run, agg.first_done_s - from))
                    })
                    .fold((0.0, 0.0), |(i, b), (ri, rb)| (i + ri, b + rb));
                agg.first_done_iops = ios / until;
                agg.first_done_mib_per_s = bytes / 1048576.0 / until;
            }
            if agg.window_s > 0.0 {
                agg.iops = (agg.read_ios + agg.write_ios) as f64 / agg.window_s;
                agg.read_iops = agg.read_ios as f64 / agg.window_s;
                agg.write_iops = agg.write_ios as f64 / agg.window_s;
                agg.mib_per_s = agg.bytes as f64 / 1048576.0 / agg.window_s;
            }
            out.push((j, agg));
        }
    }
    out
}

/// Requests and bytes a run had completed `t` seconds into its measured
/// phase, from its per-second counts (the second `t` falls in, pro rata).
fn done_by(run: &Value, t: f64) -> (f64, f64) {
    let seconds = run.get("per_second").and_then(Value::as_array).into_iter().flatten();
    let (mut ios, mut bytes) = (0.0, 0.0);
    for s in seconds {
        let from = s.get("start_s").and_then(Value::as_f64).unwrap_or(0.0);
        let len = s.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
        let share = ((t - from) / len).clamp(0.0, 1.0);
        for dir in ["read", "write"] {
            ios += count(s, dir, "ios") as f64 * share;
            bytes += count(s, dir, "bytes") as f64 * share;
        }
    }
    (ios, bytes)
}

fn run_count(doc: &Value, job: usize) -> usize {
    doc["jobs"][job].get("runs").and_then(Value::as_array).map_or(0, Vec::len)
}

/// The table rank 0 prints: for each job and run, a row per rank and
/// host, then the aggregate.
pub fn mpi_table(ranks: &[RankRun], layout: &str) -> String {
    let mut out = String::new();
    let hosts: std::collections::BTreeSet<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    let _ = writeln!(
        out,
        "MPI: {} on {} ({}), targets {layout}; each rank's times from the barrier that started the run",
        crate::counted(ranks.len() as u64, "rank", "ranks"),
        crate::counted(hosts.len() as u64, "host", "hosts"),
        hosts.iter().copied().collect::<Vec<_>>().join(", ")
    );
    for (j, agg) in indexed(ranks) {
        let r = agg.run - 1;
        let _ = writeln!(out, "{} run {}:", agg.job, agg.run);
        let _ = writeln!(
            out,
            "  {:>5}  {:<16} {:>12} {:>12} {:>10} {:>9} {:>9}",
            "rank", "host", "read IOPS", "write IOPS", "BW", "start s", "end s"
        );
        for rank in ranks {
            let (Some(run), Some(&(from, to))) =
                (run_of(&rank.document, j, r), rank.windows.get(j).and_then(|w| w.get(r)))
            else {
                continue;
            };
            let f = |dir: &str, what: &str| run.get(dir).and_then(|d| d.get(what)).and_then(Value::as_f64);
            let mib = f("read", "mib_per_s").unwrap_or(0.0) + f("write", "mib_per_s").unwrap_or(0.0);
            let _ = writeln!(
                out,
                "  {:>5}  {:<16} {:>12} {:>12} {:>10} {:>9.3} {:>9.3}",
                rank.rank,
                rank.host,
                units::iops(f("read", "iops").unwrap_or(0.0)),
                units::iops(f("write", "iops").unwrap_or(0.0)),
                units::bandwidth_mib(mib),
                from,
                to
            );
        }
        let _ = writeln!(
            out,
            "  {:>5}  {:<16} {:>12} {:>12} {:>10} {:>9.3} {:>9.3}",
            "all",
            crate::counted(agg.ranks as u64, "rank", "ranks"),
            units::iops(agg.read_iops),
            units::iops(agg.write_iops),
            units::bandwidth_mib(agg.mib_per_s),
            agg.start_s,
            agg.last_done_s
        );
        let _ = writeln!(
            out,
            "  all: {} requests ({} read, {} write) in {:.3} s from the first start to the last end; \
             first rank done at {:.3} s ({} IOPS, {} until then), last at {:.3} s",
            agg.read_ios + agg.write_ios,
            agg.read_ios,
            agg.write_ios,
            agg.window_s,
            agg.first_done_s,
            units::iops(agg.first_done_iops),
            units::bandwidth_mib(agg.first_done_mib_per_s),
            agg.last_done_s
        );
    }
    out
}

/// One rank's mdtest phases, as rank 0 receives them: each phase's name,
/// calls and seconds.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct RankPhases {
    pub rank: usize,
    pub host: String,
    pub phases: Vec<(String, u64, f64)>,
}

/// mdtest's summary over the ranks: per phase (each begun by every rank
/// together, after a barrier), every rank's calls over the slowest rank's
/// time (mdtest's rate), and the slowest and fastest rank's own rates.
/// `on` says where each rank worked.
pub fn mpi_phases_table(ranks: &[RankPhases], on: &str) -> String {
    let mut out = String::new();
    let hosts: std::collections::BTreeSet<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    let _ = writeln!(
        out,
        "MPI: {} on {}, {on}; every phase begun together (a barrier before it)",
        crate::counted(ranks.len() as u64, "rank", "ranks"),
        crate::counted(hosts.len() as u64, "host", "hosts")
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>10} {:>14} {:>14} {:>14}",
        "phase", "items", "slowest s", "rate (all)/s", "slowest rank/s", "fastest rank/s"
    );
    let Some(first) = ranks.first() else { return out };
    for (i, (name, _, _)) in first.phases.iter().enumerate() {
        let each: Vec<(u64, f64)> =
            ranks.iter().filter_map(|r| r.phases.get(i)).map(|p| (p.1, p.2)).collect();
        let items: u64 = each.iter().map(|e| e.0).sum();
        let slowest = each.iter().map(|e| e.1).fold(0.0, f64::max);
        let rates: Vec<f64> = each.iter().map(|&(n, s)| if s > 0.0 { n as f64 / s } else { 0.0 }).collect();
        let (lo, hi) = rates.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        let all = if slowest > 0.0 { items as f64 / slowest } else { 0.0 };
        let _ = writeln!(out, "{name:<20} {items:>10} {slowest:>10.3} {all:>14.1} {lo:>14.1} {hi:>14.1}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rank(rank: usize, host: &str, ios: u64, window: (f64, f64)) -> RankRun {
        let run = json!({"read": {"ios": 0, "bytes": 0}, "write": {"ios": ios, "bytes": ios * 4096}});
        RankRun {
            rank,
            host: host.into(),
            document: json!({"jobs": [{"name": "job1", "runs": [run]}]}),
            windows: vec![vec![window]],
        }
    }

    #[test]
    fn the_aggregate_is_every_ranks_requests_over_first_start_to_last_end() {
        let ranks = [rank(0, "a", 1000, (0.1, 1.1)), rank(1, "b", 3000, (0.2, 2.1))];
        let agg = &aggregate(&ranks)[0];
        assert_eq!((agg.ranks, agg.write_ios, agg.bytes), (2, 4000, 4000 * 4096));
        assert!((agg.window_s - 2.0).abs() < 1e-9, "{}", agg.window_s);
        assert!((agg.iops - 2000.0).abs() < 1e-6);
        assert_eq!((agg.first_done_s, agg.last_done_s), (1.1, 2.1));
    }

    #[test]
    fn mdtest_s_rate_is_every_ranks_items_over_the_slowest_ranks_time() {
        let phases = |s: f64| vec![("File creation".to_string(), 100, s)];
        let ranks = [
            RankPhases { rank: 0, host: "a".into(), phases: phases(1.0) },
            RankPhases { rank: 1, host: "a".into(), phases: phases(2.0) },
        ];
        let text = mpi_phases_table(&ranks, "/x");
        let row = text.lines().find(|l| l.starts_with("File creation")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[2..], ["200", "2.000", "100.0", "50.0", "100.0"], "{row}");
    }

    #[test]
    fn first_done_counts_every_ranks_seconds_until_the_first_rank_ended() {
        let second = |at: u64, ios: u64| json!({"start_s": at, "seconds": 1.0, "read": {"ios": 0, "bytes": 0}, "write": {"ios": ios, "bytes": ios * 4096}});
        let mut fast = rank(0, "a", 100, (0.0, 1.0));
        fast.document["jobs"][0]["runs"][0]["per_second"] = json!([second(0, 100)]);
        let mut slow = rank(1, "a", 100, (0.0, 2.0));
        slow.document["jobs"][0]["runs"][0]["per_second"] = json!([second(0, 30), second(1, 70)]);
        let agg = &aggregate(&[fast, slow])[0];
        assert!((agg.first_done_iops - 130.0).abs() < 1e-9, "{}", agg.first_done_iops);
        assert!((agg.iops - 100.0).abs() < 1e-9, "{}", agg.iops);
    }

    #[test]
    fn a_rank_without_the_run_is_left_out_and_counted() {
        let mut short = rank(1, "b", 3000, (0.2, 2.1));
        short.windows = vec![vec![]];
        let agg = &aggregate(&[rank(0, "a", 1000, (0.0, 1.0)), short])[0];
        assert_eq!((agg.ranks, agg.write_ios), (1, 1000));
    }
}
