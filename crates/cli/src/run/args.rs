//! `iolab run`'s flags, as clap reads them, and what they say before any
//! plan is made of them.

use std::path::PathBuf;

use clap::Args;

use crate::UsageError;
use lab::job::JobFields;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A job file: iolab's TOML ([global] settings and [[job]] sections,
    /// keys named as the flags; docs/workloads.md) or fio's, recognised by
    /// its content. Flags given here override it.
    #[arg(value_name = "JOBFILE")]
    pub jobfile: Option<PathBuf>,
    #[command(flatten)]
    pub job: JobFields,
    /// Run each job N times and report min / median / max.
    #[arg(help_heading = "Output", long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Write the results as JSON to FILE ("-" for standard output).
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every validation error found as JSON to FILE.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub error_log: Option<PathBuf>,
    /// Write to a target even though it holds a file system, a partition
    /// table or an iolab volume.
    #[arg(help_heading = "Target", long)]
    pub force: bool,
    /// No progress display.
    #[arg(help_heading = "Output", long, short = 'q')]
    pub quiet: bool,
    /// Print the job file as iolab's TOML job file (a fio file translated,
    /// flags applied) and run nothing.
    #[arg(help_heading = "Output", long, requires = "jobfile")]
    pub print_job: bool,
    /// Refuse a fio job file with any option iolab would ignore (instead
    /// of a note for each).
    #[arg(help_heading = "Output", long)]
    pub strict: bool,
    /// The latency percentiles the JSON document gives for each direction
    /// (in percent, comma-separated).
    #[arg(help_heading = "Output", long, value_name = "LIST", default_value = "1,10,50,90,99,99.9,99.99")]
    pub percentiles: String,
    /// Write fio's per-second interval logs into DIR (made if missing):
    /// JOB_bw.N.log, JOB_iops.N.log, JOB_lat.N.log for run N, as fio's
    /// write_bw_log, write_iops_log and write_lat_log with log_avg_msec=1000
    /// (fio2gnuplot and fio-plot read them).
    #[arg(help_heading = "Output", long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(help_heading = "Output", long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// On a simulated target with its journal on a simulated disk: cut
    /// the power this long into the run (virtual time: 5s, 500ms), then
    /// check what the disks held durably against the journal, as iolab
    /// validate after a crash (docs/sim.md). Exit status 3 when the
    /// journal misses writes the target holds, 4 when it is damaged
    /// (records it had made durable lost), 1 when blocks are bad.
    #[arg(help_heading = "Data validation", long, value_name = "TIME")]
    pub power_cut: Option<String>,
    /// What standard output carries: text (the tables) or csv (a header,
    /// then one line per job and run, for scripts).
    #[arg(help_heading = "Output", long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Under mpirun: each rank on its own target (per-rank, the default:
    /// put {rank} or {host} in its path), or every rank on its own
    /// 1/N of one shared target's region (shared; needs --size).
    #[arg(help_heading = "Under mpirun", long, value_enum, value_name = "LAYOUT")]
    #[cfg_attr(not(feature = "mpi"), arg(hide = true))]
    pub mpi_layout: Option<MpiLayout>,
    /// Under mpirun: every rank stops this long into the measured phase,
    /// done or not (IOR's stonewall, -D), so that no straggler's tail
    /// stretches the aggregate's window.
    #[arg(help_heading = "Under mpirun", long, value_name = "TIME")]
    #[cfg_attr(not(feature = "mpi"), arg(hide = true))]
    pub stonewall: Option<String>,
    /// Under mpirun: `{rank}` and `{host}` name another rank's (IOR's -C):
    /// the rank as many further as there are ranks on this host, so that
    /// each reads what a rank on another host wrote, past its own cache.
    #[arg(help_heading = "Under mpirun", long)]
    #[cfg_attr(not(feature = "mpi"), arg(hide = true))]
    pub mpi_reorder: bool,
    /// A rank other than 0 under MPI: nothing on standard output.
    #[arg(skip)]
    pub silent: bool,
}

/// `--mpi-layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MpiLayout {
    PerRank,
    Shared,
}

impl MpiLayout {
    pub fn name(self) -> &'static str {
        match self {
            MpiLayout::PerRank => "per-rank",
            MpiLayout::Shared => "shared",
        }
    }
}

/// `--output-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Csv,
}

/// `--percentiles` as numbers, each in (0, 100].
pub(crate) fn percentiles(text: &str) -> Result<Vec<f64>, UsageError> {
    text.split(',')
        .map(|p| {
            p.trim().parse::<f64>().ok().filter(|v| *v > 0.0 && *v <= 100.0).ok_or_else(|| {
                UsageError(format!(
                    "--percentiles: '{p}' is not a percentile in (0, 100]; give e.g. 50,99,99.9"
                ))
            })
        })
        .collect()
}

impl RunArgs {
    /// The run's jobs, checked (`lab::job::plan`), and its output files.
    pub(super) fn plan(&self) -> anyhow::Result<lab::job::Plan> {
        if self.repeat == 0 {
            return Err(UsageError("--repeat: must be at least 1".into()).into());
        }
        let plan = lab::job::plan(self.jobfile.as_deref(), &self.job, self.strict)?;
        if let Some(path) = &self.json {
            crate::check_output("json", path, true)?;
        }
        if let Some(path) = &self.error_log {
            crate::check_output("error-log", path, false)?;
        }
        Ok(plan)
    }

    /// Whether tables go to standard output (not when it carries the JSON
    /// or CSV lines).
    pub(super) fn to_stdout(&self) -> bool {
        !self.silent
            && self.json.as_deref().is_none_or(|p| p.as_os_str() != "-")
            && self.output_format == OutputFormat::Text
    }
}
