//! A run second by second: each second's requests, bytes, rates and
//! latencies per direction, the last second marked partial (its rates over
//! the part the run covered). The JSON's `per_second`, fio's interval logs
//! and the time-series charts are all made from this.

use workloads::{JobResult, LatBuckets};

/// One direction in one second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SecondOpFigures {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub lat_mean_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
}

/// One second of a run's measured phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SecondFigures {
    pub start_s: u64,
    /// The part of the second the run covered (1 but for the last).
    pub seconds: f64,
    pub partial: bool,
    pub read: SecondOpFigures,
    pub write: SecondOpFigures,
    /// Discards, in a run that made any (`None` otherwise).
    pub trim: Option<SecondOpFigures>,
}

/// Every second of `r`.
pub fn seconds(r: &JobResult) -> Vec<SecondFigures> {
    let n = r.per_second.len();
    let empty = LatBuckets::default();
    (0..n)
        .map(|i| {
            let s = &r.per_second[i];
            let covered = if i + 1 == n { (r.elapsed_s - i as f64).clamp(1e-6, 1.0) } else { 1.0 };
            let lat = r.per_second_latency.get(i);
            let op = |ios: u64, bytes: u64, l: &LatBuckets| SecondOpFigures {
                ios,
                bytes,
                iops: ios as f64 / covered,
                mib_per_s: bytes as f64 / covered / f64::from(1u32 << 20),
                lat_mean_us: l.mean_ns() / 1000.0,
                lat_p50_us: l.quantile_ns(0.50) as f64 / 1000.0,
                lat_p99_us: l.quantile_ns(0.99) as f64 / 1000.0,
            };
            SecondFigures {
                start_s: i as u64,
                seconds: covered,
                partial: covered < 0.999,
                read: op(s.read_ios, s.read_bytes, lat.map_or(&empty, |l| &l[0])),
                write: op(s.write_ios, s.write_bytes, lat.map_or(&empty, |l| &l[1])),
                trim: (r.trim.ios > 0).then(|| op(s.trim_ios, s.trim_bytes, lat.map_or(&empty, |l| &l[2]))),
            }
        })
        .collect()
}

/// fio's interval logs of a run, as `write_bw_log`, `write_iops_log` and
/// `write_lat_log` write them with `log_avg_msec=1000`: (the log's kind,
/// its text). A line per second and direction with requests: the time at
/// the end of the interval (ms), the value (bandwidth in KiB/s, IOPS, mean
/// latency in ns), the direction (0 read, 1 write), block size and offset
/// (0: averaged); discards are direction 2, as fio logs them.
/// fio2gnuplot and fio-plot read them.
pub fn fio_logs(r: &JobResult) -> [(&'static str, String); 3] {
    let mut bw = String::new();
    let mut iops = String::new();
    let mut lat = String::new();
    for s in seconds(r) {
        let ms = ((s.start_s as f64 + s.seconds) * 1000.0).round() as u64;
        for (dir, o) in [(0, Some(&s.read)), (1, Some(&s.write)), (2, s.trim.as_ref())] {
            let Some(o) = o.filter(|o| o.ios > 0) else { continue };
            let kib_s = (o.bytes as f64 / 1024.0 / s.seconds).round() as u64;
            bw.push_str(&format!("{ms}, {kib_s}, {dir}, 0, 0\n"));
            iops.push_str(&format!("{ms}, {}, {dir}, 0, 0\n", o.iops.round() as u64));
            lat.push_str(&format!("{ms}, {}, {dir}, 0, 0\n", (o.lat_mean_us * 1000.0).round() as u64));
        }
    }
    [("bw", bw), ("iops", iops), ("lat", lat)]
}

/// The header of `--output-format csv`: `run` numbers a job's repeats
/// from 1.
pub const RUN_CSV_HEADER: &str = "job,run,target,engine,threads,iodepth,rw,bs,elapsed_s,\
read_ios,read_iops,read_mib_s,read_lat_mean_us,read_lat_p50_us,read_lat_p99_us,read_lat_max_us,\
write_ios,write_iops,write_mib_s,write_lat_mean_us,write_lat_p50_us,write_lat_p99_us,write_lat_max_us,\
flushes,cpu_pct,\
trim_ios,trim_iops,trim_mib_s,trim_lat_mean_us,trim_lat_p50_us,trim_lat_p99_us,trim_lat_max_us";

/// Run `run` (from 1) of a job as a line of `--output-format csv` (fields
/// as the header; a field holding a comma is quoted).
pub fn run_csv_line(job: &str, run: usize, r: &JobResult) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let op = |o: &workloads::OpSummary| {
        let l = &o.latency;
        format!(
            "{},{:.1},{:.2},{:.1},{:.1},{:.1},{:.1}",
            o.ios, o.iops, o.mib_per_s, l.mean_us, l.p50_us, l.p99_us, l.max_us
        )
    };
    format!(
        "{},{},{},{},{},{},{},{},{:.3},{},{},{},{:.1},{}",
        quote(job),
        run,
        quote(&r.target),
        r.engine,
        r.threads,
        r.iodepth,
        r.rw,
        quote(&r.bs),
        r.elapsed_s,
        op(&r.read),
        op(&r.write),
        r.flushes,
        r.cpu.pct,
        op(&r.trim)
    )
}
