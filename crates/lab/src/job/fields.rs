//! Job parameters as the user gives them, from flags or from a TOML job
//! file, before they are checked: one struct serves both, so a flag and its
//! job-file key can never drift apart. Merging is field by field: a job
//! section over `[global]`, flags over both.

use std::path::Path;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use crate::UsageError;
use blocklog::{HomeWrites, Mode};
use validation::journal::JournalMode;
use validation::KeyMapChoice;
use workloads::layout::LayoutPolicy;
use workloads::{BlockSizes, Committer, EngineChoice, Pattern, Rw, Skew};

/// A job-file value parsed as its flag is: by the type's `FromStr`, so
/// a value means the same in a job file as on the command line.
fn parsed<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let text = String::deserialize(deserializer)?;
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

/// Every workload parameter, unset unless given.
#[derive(Clone, Debug, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JobFields {
    /// What to run on: a file or block device path, mem:SIZE (memory),
    /// null:SIZE (discards data; measures the engine alone), sim:hdd[,...]
    /// or sim:ssd[,...] (a simulated disk in modeled time: docs/sim.md), or
    /// a directory (files in it: --nrfiles). A missing file is created
    /// sparse with the region's size. Default: a temporary 1 GiB file.
    #[arg(help_heading = "Target", long, visible_alias = "filename", short = 't', value_name = "TARGET")]
    pub target: Option<String>,
    /// Name of the job in reports.
    #[arg(help_heading = "Target", long, value_name = "NAME")]
    pub name: Option<String>,
    /// Start of the region used, in bytes (suffixes k, m, g, t; s = sectors).
    #[arg(help_heading = "Target", long, value_name = "SIZE")]
    pub offset: Option<String>,
    /// Length of the region used; default: to the end of the target.
    #[arg(help_heading = "Target", long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Access pattern: read, write, randread, randwrite, rw, randrw (default randrw).
    #[arg(help_heading = "Workload", long, value_name = "PATTERN")]
    #[serde(default, deserialize_with = "parsed")]
    pub rw: Option<Rw>,
    /// Percentage of reads in a mixed pattern (default 70).
    #[arg(help_heading = "Workload", long, value_name = "PCT")]
    pub rwmixread: Option<u8>,
    /// Percentage of requests placed at random (Vdbench seekpct); the rest
    /// follow on from the previous request. Default: 0 for sequential
    /// patterns, 100 for random ones.
    #[arg(help_heading = "Workload", long, value_name = "PCT")]
    pub seekpct: Option<u8>,
    /// Sequential patterns: bytes skipped after each request (fio's
    /// rw=write:64k: a request, then a gap). Negative walks backwards, each
    /// request starting SIZE before the previous one ended (fio's
    /// rw=read:-8k with bs=4k reads each 4 KiB block from the end down):
    /// at least the largest transfer, and a multiple of the alignment.
    #[arg(help_heading = "Workload", long, value_name = "SIZE", allow_hyphen_values = true)]
    pub skip: Option<String>,
    /// Spread of random offsets: uniform (default), zipf:THETA,
    /// hot:IO%/REGION%, or zoned:IO/REGION:... (fio's zoned: consecutive
    /// zones from the region's start, each taking IO% of the requests).
    #[arg(help_heading = "Workload", long, value_name = "SKEW")]
    #[serde(default, deserialize_with = "parsed")]
    pub skew: Option<Skew>,
    /// Replay an I/O trace instead of generating requests: a fio iolog
    /// (version 2 or 3, as fio's write_iolog writes and read_iolog reads)
    /// or a blktrace capture (`blktrace -o -`, its requests as queued),
    /// every request at its offset from --offset's start of the target,
    /// in one thread at --iodepth, each sync of the trace a flush after
    /// the request before it. A missing target is made as large as the
    /// trace reaches. --replay-speed sets the pace.
    #[arg(help_heading = "Workload", long, visible_alias = "read_iolog", value_name = "FILE")]
    pub replay: Option<std::path::PathBuf>,
    /// With --replay: N, the trace's own times divided by N (default 1:
    /// as traced, as fio replays; 2: twice as fast), or max: each request
    /// as soon as the queue depth lets it go (fio's replay_no_stall). A
    /// version 2 trace is timed only by its wait lines.
    #[arg(help_heading = "Workload", long, value_name = "N|max")]
    pub replay_speed: Option<String>,
    /// Transfer sizes: 4k; a mix 4k/10:64k/50:32k/40 (the percentage of
    /// requests of each size, adding up to 100); a range 512-64k[/STEP];
    /// or fs, the file-system mix (1-120 sectors, ~8 KiB).
    /// Default: 4k, or fs for the default job.
    #[arg(help_heading = "Workload", long, value_name = "SIZES")]
    #[serde(default, deserialize_with = "parsed")]
    pub bs: Option<BlockSizes>,
    /// Offsets are multiples of this (default: the transfer size if fixed,
    /// else the sector size).
    #[arg(help_heading = "Workload", long, visible_alias = "blockalign", value_name = "SIZE")]
    pub bsalign: Option<String>,
    /// Worker threads (default 1).
    #[arg(help_heading = "Threads and engine", long, visible_alias = "numjobs", value_name = "N")]
    pub threads: Option<u32>,
    /// Requests in flight per thread, uring or virtual engine (default 1:
    /// one request at a time, as the default job runs).
    #[arg(help_heading = "Threads and engine", long, value_name = "N")]
    pub iodepth: Option<u32>,
    /// Requests queued before they are submitted together, uring engine
    /// (fio's iodepth_batch_submit; default 1: each as soon as it is ready).
    #[arg(
        help_heading = "Threads and engine",
        long,
        visible_alias = "iodepth_batch_submit",
        alias = "iodepth_batch",
        value_name = "N"
    )]
    pub iodepth_batch: Option<u32>,
    /// How requests are submitted: auto (default: virtual on a simulated
    /// disk; sync, pread/pwrite as fio's default engine, at --iodepth 1 or
    /// under a group or sync validation journal; else uring for files and
    /// block devices where the kernel allows it), sync, uring or virtual (a
    /// sim: target's modeled time, docs/sim.md).
    #[arg(help_heading = "Threads and engine", long, visible_alias = "ioengine", value_name = "ENGINE")]
    #[serde(default, deserialize_with = "parsed")]
    pub engine: Option<EngineChoice>,
    /// Bypass the page cache (O_DIRECT) on files and block devices.
    #[arg(help_heading = "Threads and engine", long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub direct: Option<bool>,
    /// Lay out unwritten parts of the region before the clock starts:
    /// auto (default: when the job reads, as fio lays out its files; holes
    /// read nothing from the medium), always (also before write-only jobs,
    /// to measure overwrites) or never (read figures are then marked when
    /// the region has holes). A new file is filled with the job's pattern,
    /// an existing file's holes with zeros (its contents stay as they were).
    #[arg(help_heading = "Target", long, value_name = "WHEN")]
    #[serde(default, deserialize_with = "parsed")]
    pub layout: Option<LayoutPolicy>,
    /// Buffered runs: keep the target's pages in the page cache between
    /// runs instead of dropping them before each (fio's invalidate=0);
    /// the report then says how much was cached at the start.
    #[arg(help_heading = "Target", long, num_args = 0, default_missing_value = "true")]
    pub keep_cache: Option<bool>,
    /// Sector size of a file target: 512 or 4096 (to act as a 4Kn disk).
    #[arg(help_heading = "Target", long, value_name = "BYTES")]
    pub sector_size: Option<u32>,
    /// With a directory target: the job's region spread over N files in it,
    /// iolab.0.0 ... (fio's directory= and nrfiles=), taken one after
    /// another as one address space (fio's file_service_type=sequential);
    /// missing files made sparse, --size split evenly over them.
    #[arg(help_heading = "Target", long, value_name = "N")]
    pub nrfiles: Option<u32>,
    /// A job-file key: with `concurrent = true`, this job waits for the
    /// jobs before it to end, and starts a new group with the jobs after
    /// it (fio's stonewall).
    #[arg(skip)]
    pub stonewall: Option<bool>,
    /// Flush (fdatasync) after every N writes in each thread.
    #[arg(help_heading = "Limits and flushes", long, visible_alias = "fsync", value_name = "N")]
    pub flush_every: Option<u64>,
    /// Flush once at the end, inside the measurement (fio's end_fsync).
    #[arg(help_heading = "Limits and flushes", long, visible_alias = "end_fsync", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub end_flush: Option<bool>,
    /// Stop after this long (10, 10s, 500ms, 2m).
    #[arg(help_heading = "Limits and flushes", long, value_name = "TIME")]
    pub runtime: Option<String>,
    /// Stop after this many bytes in all threads together.
    #[arg(
        help_heading = "Limits and flushes",
        long,
        visible_alias = "io_size",
        alias = "io_limit",
        value_name = "SIZE"
    )]
    pub io_size: Option<String>,
    /// Stop after exactly this many requests in all threads together.
    #[arg(help_heading = "Limits and flushes", long, visible_alias = "number_ios", value_name = "N")]
    pub ios: Option<u64>,
    /// Run this long before measuring (warm-up, excluded from results).
    #[arg(help_heading = "Limits and flushes", long, visible_alias = "ramp_time", value_name = "TIME")]
    pub ramp: Option<String>,
    /// Limit to this many requests per second in all threads together.
    #[arg(help_heading = "Limits and flushes", long, visible_alias = "rate_iops", value_name = "N")]
    pub rate_iops: Option<u64>,
    /// A job-file key, `"JOB:PCT%"`: limit this job to PCT% of the
    /// requests a second job JOB (an earlier group's) did in the same
    /// repeat (Vdbench's `iorate=curve`).
    #[arg(skip)]
    pub rate_of: Option<String>,
    /// Data written: random (default), zeros, or compress:PCT (compresses to PCT%).
    #[arg(help_heading = "Workload", long, value_name = "PATTERN")]
    #[serde(default, deserialize_with = "parsed")]
    pub pattern: Option<Pattern>,
    /// Data a deduplicating device stores R:1 (Vdbench's dedupratio): of
    /// the units written, one in R is its own, the rest copies of a few
    /// shared units (not with --validate).
    #[arg(help_heading = "Workload", long, visible_alias = "dedupratio", value_name = "R")]
    pub dedupe_ratio: Option<f64>,
    /// With --dedupe-ratio: the unit duplicates are whole in (default 4k;
    /// Vdbench's dedupunit); it must divide every transfer size.
    #[arg(help_heading = "Workload", long, visible_alias = "dedupunit", value_name = "SIZE")]
    pub dedupe_unit: Option<String>,
    /// Data zlib (level 6) compresses about R:1 (Vdbench's compratio): the
    /// compress:PCT pattern with PCT = 100/R.
    #[arg(help_heading = "Workload", long, visible_alias = "compratio", value_name = "R")]
    pub compress_ratio: Option<f64>,
    /// Stamp every written block and check every block read (Vdbench-style
    /// data validation; sync or uring engine).
    #[arg(help_heading = "Data validation", long, num_args = 0, default_missing_value = "true")]
    pub validate: Option<bool>,
    /// With --validate: do not check a block's old contents before rewriting it.
    #[arg(help_heading = "Data validation", long, num_args = 0, default_missing_value = "true")]
    pub no_preread: Option<bool>,
    /// With --validate: read every block back right after writing it.
    #[arg(help_heading = "Data validation", long, num_args = 0, default_missing_value = "true")]
    pub reread: Option<bool>,
    /// With --validate: skip the verify phase, which after the run reads
    /// back every block it wrote and checks it (fio's do_verify; outside
    /// the measured run). Without it, a run that only writes may check
    /// nothing, which fails it.
    #[arg(help_heading = "Data validation", long, num_args = 0, default_missing_value = "true")]
    pub no_verify: Option<bool>,
    /// With --validate: keep the key map in a crash-safe journal in DIR
    /// (check the target later with `iolab validate --journal DIR`), or on
    /// a simulated disk of its own (sim:hdd[,...]: with a simulated
    /// target, the journal's writes then take modeled time too).
    #[arg(help_heading = "Data validation", long, value_name = "DIR")]
    pub journal: Option<std::path::PathBuf>,
    /// Journal writes: group (durable before each data write, flushes
    /// shared; default), sync (two durable writes per data write, as
    /// Vdbench -j), async (buffered until the end, as Vdbench -jn).
    #[arg(help_heading = "Data validation", long, value_name = "MODE")]
    #[serde(default, deserialize_with = "parsed")]
    pub journal_mode: Option<JournalMode>,
    /// With --journal in group mode: who commits. thread (default): a
    /// committer thread beside the workers; ring: each uring worker, through
    /// its own ring (the journal opened with O_DIRECT and O_DSYNC; needs the
    /// uring engine and a file system that takes O_DIRECT, else the thread
    /// commits). The run's journal line counts the commits made in a ring.
    #[arg(help_heading = "Data validation", long, value_name = "WHO")]
    #[serde(default, deserialize_with = "parsed")]
    pub journal_commit: Option<Committer>,
    /// With --validate: where the key map (one byte per key block; a second
    /// copy with --journal) lives: auto (default: memory up to 256 MiB of
    /// keys, i.e. a 1 TiB region in 4 KiB key blocks, a file above), memory,
    /// or file (a sparse scratch file in --key-map-dir, mapped and unlinked
    /// at once: the kernel pages it in and out, so memory stays bounded,
    /// and nothing is left behind however the run ends).
    #[arg(help_heading = "Data validation", long, value_name = "WHERE")]
    #[serde(default, deserialize_with = "parsed")]
    pub key_map: Option<KeyMapChoice>,
    /// With --validate: the directory of the key map's scratch files
    /// (default: the --journal directory, else the system's temporary
    /// directory). It needs room for a byte per key block, twice with a
    /// journal.
    #[arg(help_heading = "Data validation", long, value_name = "DIR")]
    pub key_map_dir: Option<std::path::PathBuf>,
    /// With --validate: stop after this many bad blocks (default 50).
    #[arg(help_heading = "Data validation", long, value_name = "N")]
    pub max_errors: Option<u64>,
    /// Seed of the request sequence: the same seed gives the same requests (default 1).
    #[arg(help_heading = "Workload", long, visible_alias = "randseed", value_name = "N")]
    pub seed: Option<u64>,
    /// Run through iolab's write-ahead block log in this mode: log (writes
    /// join a transaction committed at each flush; a crash keeps every
    /// committed transaction whole), async (in place, durable at a flush)
    /// or sync (each write durable in place). The log sits at the start of
    /// the target (or on --log-device); it is formatted on first use and
    /// replayed whenever the target is opened again.
    #[arg(help_heading = "Block log", long, value_name = "MODE")]
    #[serde(default, deserialize_with = "parsed")]
    pub log: Option<Mode>,
    /// Size of a new log (default: 1 MiB per GiB of target, 1 to 64 MiB).
    #[arg(help_heading = "Block log", long, value_name = "SIZE")]
    pub log_size: Option<String>,
    /// Keep the log on this file or device instead of inside the target.
    #[arg(help_heading = "Block log", long, value_name = "PATH")]
    pub log_device: Option<std::path::PathBuf>,
    /// When committed blocks are written in place: checkpoint (default:
    /// kept in memory and written once at the next checkpoint, as WAPBL
    /// delays metadata writes) or commit (right after each commit).
    #[arg(help_heading = "Block log", long, value_name = "WHEN")]
    #[serde(default, deserialize_with = "parsed")]
    pub log_home: Option<HomeWrites>,
    /// Write every request the job issues, and every flush, to FILE as a
    /// fio iolog (version 3, times in microseconds; fio's write_iolog), to
    /// replay elsewhere with --replay or fio's read_iolog. With several
    /// threads, FILE.0, FILE.1, ... one per thread.
    #[arg(help_heading = "Output", long, visible_alias = "write_iolog", value_name = "FILE")]
    pub write_iolog: Option<std::path::PathBuf>,
}

/// Every field of [`JobFields`], named once for the macros that go over
/// them all (merging, printing as a job file).
macro_rules! each_field {
    ($then:ident!($($pre:expr),*)) => {
        $then!($($pre),*, target, name, offset, size, rw, rwmixread, seekpct, skip, skew, bs, bsalign, threads, iodepth, iodepth_batch, engine, direct, layout, keep_cache, sector_size, nrfiles, stonewall, flush_every, end_flush, runtime, io_size, ios, ramp, rate_iops, rate_of, pattern, dedupe_ratio, dedupe_unit, compress_ratio, validate, no_preread, reread, no_verify, journal, journal_mode, journal_commit, key_map, key_map_dir, max_errors, seed, log, log_size, log_device, log_home, replay, replay_speed, write_iolog)
    };
}

macro_rules! overlay {
    ($over:expr, $base:expr, $($field:ident),*) => {
        JobFields { $($field: $over.$field.clone().or_else(|| $base.$field.clone()),)* }
    };
}

impl JobFields {
    /// What a directory target's files are named after for this job, as
    /// fio names them (`JOBNAME.0.N`): its name, or `iolab` when it has
    /// none; a `/` in it becomes `_`.
    pub fn dir_file_prefix(&self) -> String {
        self.name.as_deref().unwrap_or("iolab").replace('/', "_")
    }

    /// `self` where set, else `base`.
    pub fn over(&self, base: &JobFields) -> JobFields {
        each_field!(overlay!(self, base))
    }
}

/// A parsed job file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    /// Run the jobs at the same time instead of one after the other.
    #[serde(default)]
    pub concurrent: bool,
    /// fio's interval logs of every job into this directory, as
    /// `--log-dir` (which overrides it); a fio file's `write_bw_log=` and
    /// kin set it.
    #[serde(default, rename = "log-dir")]
    pub log_dir: Option<std::path::PathBuf>,
    #[serde(default)]
    pub global: JobFields,
    #[serde(default, rename = "job")]
    pub jobs: Vec<JobFields>,
}

/// A value as a job file writes it.
trait TomlValue {
    fn toml(&self) -> String;
}

macro_rules! toml_as_is {
    ($($t:ty),*) => { $(impl TomlValue for $t { fn toml(&self) -> String { self.to_string() } })* };
}
macro_rules! toml_quoted {
    ($($t:ty),*) => { $(impl TomlValue for $t { fn toml(&self) -> String { format!("{:?}", self.to_string()) } })* };
}
toml_as_is!(u8, u32, u64, bool);
impl TomlValue for f64 {
    /// With its point (`2.0`), so that TOML reads it back as a float.
    fn toml(&self) -> String {
        format!("{self:?}")
    }
}
toml_quoted!(
    String,
    Rw,
    Skew,
    BlockSizes,
    EngineChoice,
    LayoutPolicy,
    Pattern,
    JournalMode,
    Committer,
    KeyMapChoice,
    Mode,
    HomeWrites
);

impl TomlValue for std::path::PathBuf {
    fn toml(&self) -> String {
        format!("{:?}", self.display().to_string())
    }
}

macro_rules! toml_lines {
    ($fields:expr, $($field:ident),*) => {{
        let mut lines = Vec::new();
        $(if let Some(v) = &$fields.$field {
            lines.push(format!("{} = {}", stringify!($field).replace('_', "-"), v.toml()));
        })*
        lines
    }};
}

impl JobFields {
    /// The keys set, as job-file lines (`rw = "randread"`).
    pub fn toml_lines(&self) -> Vec<String> {
        each_field!(toml_lines!(self))
    }
}

impl JobFile {
    /// The file as iolab's TOML job file reads.
    pub fn to_toml(&self) -> String {
        let mut out = format!("concurrent = {}\n", self.concurrent);
        if let Some(dir) = &self.log_dir {
            out += &format!("log-dir = {}\n", dir.display().to_string().toml());
        }
        let global = self.global.toml_lines();
        if !global.is_empty() {
            out += &format!("\n[global]\n{}\n", global.join("\n"));
        }
        for job in &self.jobs {
            out += &format!("\n[[job]]\n{}\n", job.toml_lines().join("\n"));
        }
        out
    }

    pub fn load(path: &Path) -> anyhow::Result<JobFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the job file", path.display()))?;
        let file: JobFile = toml::from_str(&text).map_err(|e| {
            UsageError(format!("{}: not a valid job file: {}", path.display(), e.to_string().trim_end()))
        })?;
        if file.jobs.is_empty() {
            return Err(UsageError(format!(
                "{}: holds no [[job]] section; add at least one (keys as the flags, e.g. rw = \"randread\")",
                path.display()
            ))
            .into());
        }
        Ok(file)
    }
}
