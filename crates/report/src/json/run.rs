//! `iolab run --json`: schema `iolab-run`, version 2.

use serde::Serialize;

use super::validation::Validation;
use super::volume::{DeviceCounters, Volume};
use crate::{CacheState, JobReport, LayoutState, LogReport, OpSpread, RepeatSummary, TargetReport};

pub const SCHEMA: &str = "iolab-run";
/// 2 added `target` to each job and `reads_from_unwritten` to each run; 3
/// the distribution (each direction's standard deviation, chosen
/// percentiles and histogram) and per-second rates and latencies (and,
/// within 3, `replay` in each run).
pub const VERSION: u32 = 3;

/// The percentiles a document gives when none are chosen.
pub const DEFAULT_PERCENTILES: [f64; 7] = [1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99];

/// The whole document: every job of the invocation.
#[derive(Clone, Debug, Serialize)]
pub struct RunDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub jobs: Vec<Job>,
}

impl RunDocument {
    /// Every job, each direction with `percentiles` (in percent).
    pub fn new(
        iolab_version: &str,
        host: super::Host,
        jobs: &[JobReport],
        percentiles: &[f64],
    ) -> RunDocument {
        RunDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            jobs: jobs.iter().map(|j| Job::new(j, percentiles)).collect(),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Job {
    pub name: String,
    pub target: Target,
    pub runs: Vec<Run>,
    pub summary: Option<Summary>,
    /// Only when the target is a volume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<Volume>,
    /// Only when the job ran through the block log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<Log>,
}

impl Job {
    fn new(j: &JobReport, percentiles: &[f64]) -> Job {
        Job {
            name: j.name.clone(),
            target: Target::from(&j.target),
            runs: j.runs.iter().map(|r| Run::new(r, percentiles)).collect(),
            summary: j.summary.as_ref().map(Summary::from),
            volume: j.volume.as_ref().map(Volume::from),
            log: j.log.as_ref().map(Log::from),
        }
    }
}

/// What a job ran on and how it was measured.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub name: String,
    pub media: Vec<Medium>,
    pub cache: Cache,
    pub layout: Layout,
    pub warnings: Vec<String>,
}

impl From<&TargetReport> for Target {
    fn from(t: &TargetReport) -> Target {
        Target {
            name: t.name.clone(),
            media: t.media.iter().map(Medium::from).collect(),
            cache: t.cache.into(),
            layout: Layout::from(&t.layout),
            warnings: t.warnings.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Medium {
    pub name: String,
    pub kind: MediumKind,
    pub direct: bool,
    pub filesystem: Option<String>,
    pub memory_backed: bool,
    pub cached_bytes: Option<u64>,
}

impl From<&device::Medium> for Medium {
    fn from(m: &device::Medium) -> Medium {
        Medium {
            name: m.name.clone(),
            kind: m.kind.into(),
            direct: m.direct,
            filesystem: m.filesystem.clone(),
            memory_backed: m.memory_backed,
            cached_bytes: m.cached_bytes,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MediumKind {
    File,
    BlockDevice,
    Memory,
    Null,
    Simulated,
}

impl From<device::MediumKind> for MediumKind {
    fn from(k: device::MediumKind) -> MediumKind {
        match k {
            device::MediumKind::File => MediumKind::File,
            device::MediumKind::BlockDevice => MediumKind::BlockDevice,
            device::MediumKind::Memory => MediumKind::Memory,
            device::MediumKind::Null => MediumKind::Null,
            device::MediumKind::Simulated => MediumKind::Simulated,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cache {
    Direct,
    Dropped,
    Kept,
    None,
}

impl From<CacheState> for Cache {
    fn from(c: CacheState) -> Cache {
        match c {
            CacheState::Direct => Cache::Direct,
            CacheState::Dropped => Cache::Dropped,
            CacheState::Kept => Cache::Kept,
            CacheState::None => Cache::None,
        }
    }
}

/// The layout's policy and outcome, in one object.
#[derive(Clone, Debug, Serialize)]
pub struct Layout {
    pub policy: LayoutPolicy,
    pub wanted: bool,
    pub zeros: bool,
    pub known: bool,
    pub unwritten_bytes: u64,
    pub laid_out_bytes: u64,
    pub seconds: f64,
}

impl From<&LayoutState> for Layout {
    fn from(l: &LayoutState) -> Layout {
        Layout {
            policy: l.policy.into(),
            wanted: l.wanted,
            zeros: l.zeros,
            known: l.report.known,
            unwritten_bytes: l.report.unwritten_bytes,
            laid_out_bytes: l.report.laid_out_bytes,
            seconds: l.report.seconds,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutPolicy {
    Auto,
    Always,
    Never,
}

impl From<crate::LayoutPolicy> for LayoutPolicy {
    fn from(p: crate::LayoutPolicy) -> LayoutPolicy {
        match p {
            crate::LayoutPolicy::Auto => LayoutPolicy::Auto,
            crate::LayoutPolicy::Always => LayoutPolicy::Always,
            crate::LayoutPolicy::Never => LayoutPolicy::Never,
        }
    }
}

/// One run of a job (one per `--repeat`).
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub name: String,
    pub target: String,
    pub engine: Engine,
    pub threads: u32,
    pub iodepth: u32,
    pub rw: Rw,
    pub read_pct: u8,
    /// As given: "4k", "fs", "4k/10:64k/90".
    pub bs: String,
    /// Bytes skipped after each sequential request; negative: backwards.
    pub skip_bytes: i64,
    /// The requests a second the job was held to; `null`: as many as it
    /// could (`--rate-iops`, a rate-of share).
    pub rate_iops: Option<u64>,
    pub region_offset_bytes: u64,
    pub region_bytes: u64,
    pub seed: u64,
    /// The data written: `random`, `zeros` or `compress:PCT`.
    pub pattern: String,
    /// Duplicate units among the writes; `null`: every sector its own.
    pub dedupe: Option<Dedupe>,
    pub elapsed_s: f64,
    pub read: Op,
    pub write: Op,
    /// Discards (`--rw trim`, `randtrim`, `trimwrite`).
    pub trim: Op,
    pub flushes: u64,
    pub cpu: Cpu,
    pub per_second: Vec<Second>,
    /// The target's counters over the run, warm-up included.
    pub device: DeviceCounters,
    /// `null` without `--validate`.
    pub validation: Option<Validation>,
    pub reads_from_unwritten: bool,
    /// The disk model when the target is simulated: every time in the run
    /// is then modeled, virtual; `null` when measured.
    pub modeled: Option<String>,
    /// The trace replayed (`--replay`); `null` for generated requests.
    pub replay: Option<Replay>,
}

/// `--dedupe-ratio` and `--dedupe-unit`: units written for each distinct
/// one, and the unit.
#[derive(Clone, Debug, Serialize)]
pub struct Dedupe {
    pub ratio: f64,
    pub unit_bytes: usize,
}

/// A replayed trace: its path, its format and version, its reads and writes,
/// its syncs (each a flush), and the pace (`null`: as fast as the queue
/// depth allows; else the trace's times divided by it).
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    pub source: String,
    /// `iolog` or `blktrace`.
    pub format: &'static str,
    pub version: u8,
    pub requests: u64,
    pub flushes: u64,
    pub speed: Option<f64>,
    /// The files (a capture's devices) the trace names, each where it was
    /// laid on the target.
    pub files: Vec<ReplayFile>,
}

/// A file a trace names and the offset its requests were moved to.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayFile {
    pub name: String,
    pub offset_bytes: u64,
}

impl Run {
    pub(crate) fn new(r: &workloads::JobResult, percentiles: &[f64]) -> Run {
        Run {
            name: r.name.clone(),
            target: r.target.clone(),
            engine: r.engine.into(),
            threads: r.threads,
            iodepth: r.iodepth,
            rw: r.rw.into(),
            read_pct: r.read_pct,
            bs: r.bs.clone(),
            skip_bytes: r.skip_bytes,
            rate_iops: (r.rate_iops > 0).then_some(r.rate_iops),
            region_offset_bytes: r.region_offset_bytes,
            region_bytes: r.region_bytes,
            seed: r.seed,
            pattern: r.pattern.clone(),
            dedupe: r.dedupe.map(|d| Dedupe { ratio: d.ratio, unit_bytes: d.unit_bytes }),
            elapsed_s: r.elapsed_s,
            read: Op::new(&r.read, &r.latency[0], percentiles),
            write: Op::new(&r.write, &r.latency[1], percentiles),
            trim: Op::new(&r.trim, &r.trim_latency, percentiles),
            flushes: r.flushes,
            cpu: Cpu::from(&r.cpu),
            per_second: crate::seconds(r).iter().map(Second::from).collect(),
            device: DeviceCounters::from(&r.device),
            validation: r.validation.as_ref().map(Validation::from),
            reads_from_unwritten: r.reads_from_unwritten,
            modeled: r.modeled.clone(),
            replay: r.replay.as_ref().map(|t| Replay {
                source: t.source.clone(),
                format: t.format.name(),
                version: t.version,
                requests: t.requests,
                flushes: t.flushes,
                speed: t.speed,
                files: t
                    .files
                    .iter()
                    .map(|(name, offset)| ReplayFile { name: name.clone(), offset_bytes: *offset })
                    .collect(),
            }),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Sync,
    Uring,
    Virtual,
}

impl From<workloads::Engine> for Engine {
    fn from(e: workloads::Engine) -> Engine {
        match e {
            workloads::Engine::Sync => Engine::Sync,
            workloads::Engine::Uring => Engine::Uring,
            workloads::Engine::Virtual => Engine::Virtual,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    Rw,
    RandRw,
    Trim,
    RandTrim,
    TrimWrite,
}

impl From<workloads::Rw> for Rw {
    fn from(rw: workloads::Rw) -> Rw {
        match rw {
            workloads::Rw::Read => Rw::Read,
            workloads::Rw::Write => Rw::Write,
            workloads::Rw::RandRead => Rw::RandRead,
            workloads::Rw::RandWrite => Rw::RandWrite,
            workloads::Rw::Rw => Rw::Rw,
            workloads::Rw::RandRw => Rw::RandRw,
            workloads::Rw::Trim => Rw::Trim,
            workloads::Rw::RandTrim => Rw::RandTrim,
            workloads::Rw::TrimWrite => Rw::TrimWrite,
        }
    }
}

/// One direction's results; latencies all 0 when `ios` is.
#[derive(Clone, Debug, Serialize)]
pub struct Op {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub latency: Latency,
}

impl Op {
    fn new(o: &workloads::OpSummary, hist: &hdrhistogram::Histogram<u64>, percentiles: &[f64]) -> Op {
        let l = &o.latency;
        let us = |ns: u64| ns as f64 / 1000.0;
        let recorded = !hist.is_empty();
        Op {
            ios: o.ios,
            bytes: o.bytes,
            iops: o.iops,
            mib_per_s: o.mib_per_s,
            latency: Latency {
                min_us: l.min_us,
                mean_us: l.mean_us,
                stddev_us: if recorded { hist.stdev() / 1000.0 } else { 0.0 },
                p50_us: l.p50_us,
                p90_us: l.p90_us,
                p99_us: l.p99_us,
                p999_us: l.p999_us,
                max_us: l.max_us,
                percentiles: percentiles
                    .iter()
                    .map(|&pct| Percentile {
                        pct,
                        us: if recorded { us(hist.value_at_quantile(pct / 100.0)) } else { 0.0 },
                    })
                    .collect(),
                histogram: workloads::LatBuckets::from_histogram(hist)
                    .buckets()
                    .map(|(lo, hi, count)| Bucket { lo_us: us(lo), hi_us: us(hi), count })
                    .collect(),
            },
        }
    }
}

/// A chosen percentile's latency.
#[derive(Clone, Debug, Serialize)]
pub struct Percentile {
    /// In percent (99.9).
    pub pct: f64,
    pub us: f64,
}

/// One bucket of the latency histogram: sixteen to each power of two,
/// only those that hold requests.
#[derive(Clone, Debug, Serialize)]
pub struct Bucket {
    pub lo_us: f64,
    pub hi_us: f64,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    pub min_us: f64,
    pub mean_us: f64,
    pub stddev_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub percentiles: Vec<Percentile>,
    pub histogram: Vec<Bucket>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Cpu {
    pub user_s: f64,
    pub system_s: f64,
    pub pct: f64,
}

impl From<&workloads::CpuUsage> for Cpu {
    fn from(c: &workloads::CpuUsage) -> Cpu {
        Cpu { user_s: c.user_s, system_s: c.system_s, pct: c.pct }
    }
}

/// One second of the measured phase (the last one partial).
#[derive(Clone, Debug, Serialize)]
pub struct Second {
    /// Seconds from the start of the measured phase.
    pub start_s: u64,
    /// How much of the second the phase covered: 1, less for the last.
    pub seconds: f64,
    pub partial: bool,
    pub read: SecondOp,
    pub write: SecondOp,
    /// Discards, only in a run that made any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim: Option<SecondOp>,
}

/// One direction in one second; rates over the part of it measured.
#[derive(Clone, Debug, Serialize)]
pub struct SecondOp {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub lat_mean_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
}

impl From<&crate::SecondFigures> for Second {
    fn from(s: &crate::SecondFigures) -> Second {
        let op = |o: &crate::SecondOpFigures| SecondOp {
            ios: o.ios,
            bytes: o.bytes,
            iops: o.iops,
            mib_per_s: o.mib_per_s,
            lat_mean_us: o.lat_mean_us,
            lat_p50_us: o.lat_p50_us,
            lat_p99_us: o.lat_p99_us,
        };
        Second {
            start_s: s.start_s,
            seconds: s.seconds,
            partial: s.partial,
            read: op(&s.read),
            write: op(&s.write),
            trim: s.trim.as_ref().map(op),
        }
    }
}

/// min / median / max over a job's runs.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub runs: u64,
    /// `null` when no run did that direction.
    pub read: Option<Spreads>,
    pub write: Option<Spreads>,
    pub trim: Option<Spreads>,
    pub cpu_pct: Spread,
}

impl From<&RepeatSummary> for Summary {
    fn from(s: &RepeatSummary) -> Summary {
        Summary {
            runs: s.runs as u64,
            read: s.read.as_ref().map(Spreads::from),
            write: s.write.as_ref().map(Spreads::from),
            trim: s.trim.as_ref().map(Spreads::from),
            cpu_pct: s.cpu_pct.into(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Spreads {
    pub iops: Spread,
    pub mib_per_s: Spread,
    pub lat_mean_us: Spread,
    pub lat_p50_us: Spread,
    pub lat_p99_us: Spread,
    pub lat_p999_us: Spread,
    pub lat_max_us: Spread,
}

impl From<&OpSpread> for Spreads {
    fn from(o: &OpSpread) -> Spreads {
        Spreads {
            iops: o.iops.into(),
            mib_per_s: o.mib_per_s.into(),
            lat_mean_us: o.lat_mean_us.into(),
            lat_p50_us: o.lat_p50_us.into(),
            lat_p99_us: o.lat_p99_us.into(),
            lat_p999_us: o.lat_p999_us.into(),
            lat_max_us: o.lat_max_us.into(),
        }
    }
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl From<crate::Spread> for Spread {
    fn from(s: crate::Spread) -> Spread {
        Spread { min: s.min, median: s.median, max: s.max }
    }
}

/// The block log a job ran through, after all its runs.
#[derive(Clone, Debug, Serialize)]
pub struct Log {
    pub mode: LogMode,
    pub counters: LogCounters,
}

impl From<&LogReport> for Log {
    fn from(l: &LogReport) -> Log {
        let c = &l.counters;
        Log {
            mode: l.mode.into(),
            counters: LogCounters {
                transactions: c.transactions,
                commits: c.commits,
                forced_commits: c.forced_commits,
                sectors_logged: c.sectors_logged,
                log_bytes_written: c.log_bytes_written,
                checkpoints: c.checkpoints,
                revocations: c.revocations,
                replays: c.replays,
                sectors_replayed: c.sectors_replayed,
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogMode {
    Log,
    Async,
    Sync,
}

impl From<blocklog::Mode> for LogMode {
    fn from(m: blocklog::Mode) -> LogMode {
        match m {
            blocklog::Mode::Log => LogMode::Log,
            blocklog::Mode::Async => LogMode::Async,
            blocklog::Mode::Sync => LogMode::Sync,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct LogCounters {
    pub transactions: u64,
    pub commits: u64,
    pub forced_commits: u64,
    pub sectors_logged: u64,
    pub log_bytes_written: u64,
    pub checkpoints: u64,
    pub revocations: u64,
    pub replays: u64,
    pub sectors_replayed: u64,
}

/// `iolab run --error-log FILE`: every validation error of every run of
/// every job, in order, as a list of the run document's error records.
pub fn error_log(jobs: &[JobReport]) -> String {
    let errors: Vec<super::validation::ValidationError> = jobs
        .iter()
        .flat_map(|j| &j.runs)
        .filter_map(|run| run.validation.as_ref())
        .flat_map(|v| &v.error_list)
        .map(super::validation::ValidationError::from)
        .collect();
    super::pretty(&errors)
}
