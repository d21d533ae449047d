use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// iolab: build storage stacks, drive workloads through them, validate
/// every byte, crash them on purpose, and report honestly.
#[derive(Debug, Parser)]
#[command(name = "iolab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a block workload (fio/Vdbench kind) on a file, a block device or
    /// memory. With no target: a ~10 s random mixed run on a temporary 1 GiB file.
    Run(RunArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// uring for files and block devices where the kernel allows it, else sync.
    Auto,
    Sync,
    Uring,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What to run on: a file or block device path, mem:SIZE (memory) or
    /// null:SIZE (discards data; measures the engine alone). A missing file
    /// is created sparse with the region's size. Default: a temporary 1 GiB file.
    #[arg(long, short = 't', value_name = "TARGET")]
    pub target: Option<String>,
    /// Name of the job in reports.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Start of the region used, in bytes (suffixes k, m, g, t; s = sectors).
    #[arg(long, value_name = "SIZE")]
    pub offset: Option<String>,
    /// Length of the region used; default: to the end of the target.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Access pattern: read, write, randread, randwrite, rw, randrw.
    #[arg(long, value_name = "PATTERN")]
    pub rw: Option<String>,
    /// Percentage of reads in a mixed pattern (default 50; 70 in the default job).
    #[arg(long, value_name = "PCT")]
    pub rwmixread: Option<u8>,
    /// Percentage of requests placed at random (Vdbench seekpct); the rest
    /// follow on from the previous request. Default: 0 for sequential
    /// patterns, 100 for random ones.
    #[arg(long, value_name = "PCT")]
    pub seekpct: Option<u8>,
    /// Spread of random offsets: uniform, zipf:THETA, or hot:IO%/REGION%.
    #[arg(long, value_name = "SKEW", default_value = "uniform")]
    pub skew: String,
    /// Transfer sizes: 4k; a weighted mix 4k/10:64k/50:32k/40; a range
    /// 512-64k[/STEP]; or fs, the file-system mix (1-120 sectors, ~8 KiB).
    #[arg(long, value_name = "SIZES")]
    pub bs: Option<String>,
    /// Offsets are multiples of this (default: the transfer size if fixed,
    /// else the sector size).
    #[arg(long, value_name = "SIZE")]
    pub bsalign: Option<String>,
    /// Worker threads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: u32,
    /// Requests in flight per thread (uring engine).
    #[arg(long, value_name = "N")]
    pub iodepth: Option<u32>,
    /// How requests are submitted.
    #[arg(long, value_enum, default_value_t = EngineArg::Auto)]
    pub engine: EngineArg,
    /// Bypass the page cache (O_DIRECT) on files and block devices.
    #[arg(long)]
    pub direct: bool,
    /// Sector size of a file target: 512 or 4096 (to act as a 4Kn disk).
    #[arg(long, value_name = "BYTES")]
    pub sector_size: Option<u32>,
    /// Flush (fdatasync) after every N writes in each thread.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub flush_every: u64,
    /// Flush once at the end, inside the measurement (fio's end_fsync).
    #[arg(long)]
    pub end_flush: bool,
    /// Stop after this long (10, 10s, 500ms, 2m).
    #[arg(long, value_name = "TIME")]
    pub runtime: Option<String>,
    /// Stop after this many bytes in all threads together.
    #[arg(long, value_name = "SIZE")]
    pub io_size: Option<String>,
    /// Stop after exactly this many requests in all threads together.
    #[arg(long, value_name = "N")]
    pub ios: Option<u64>,
    /// Run this long before measuring (warm-up, excluded from results).
    #[arg(long, value_name = "TIME")]
    pub ramp: Option<String>,
    /// Limit to this many requests per second in all threads together.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub rate_iops: u64,
    /// Data written: random, zeros, or compress:PCT (compresses to PCT%).
    #[arg(long, value_name = "PATTERN", default_value = "random")]
    pub pattern: String,
    /// Seed of the request sequence: the same seed gives the same requests.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Run the job N times and report min / median / max.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Write the results as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write to a target even though it holds a file system, a partition
    /// table or an iolab volume.
    #[arg(long)]
    pub force: bool,
    /// No progress display.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => crate::run::run(args),
    }
}
