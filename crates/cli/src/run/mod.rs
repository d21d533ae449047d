//! `iolab run`: build the jobs from flags and the job file (`jobs.rs`),
//! check each against its stack and open it (`prepare.rs`), lay out and
//! run them, in sequence or at once, with repeats and a progress line
//! (`execute.rs`), then print the tables and write the JSON.

mod execute;
mod jobs;
pub(crate) mod power_cut;
mod prepare;
mod ranks;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::jobfile::JobFields;
use crate::UsageError;

pub(crate) use jobs::key_map_spec;
pub(crate) use prepare::lay_out_for_sweep;

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
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Write the results as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every validation error found as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub error_log: Option<PathBuf>,
    /// Write to a target even though it holds a file system, a partition
    /// table or an iolab volume.
    #[arg(long)]
    pub force: bool,
    /// No progress display.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print the job file as iolab's TOML job file (a fio file translated,
    /// flags applied) and run nothing.
    #[arg(long, requires = "jobfile")]
    pub print_job: bool,
    /// Refuse a fio job file with any option iolab would ignore (instead
    /// of a note for each).
    #[arg(long)]
    pub strict: bool,
    /// The latency percentiles the JSON document gives for each direction
    /// (in percent, comma-separated).
    #[arg(long, value_name = "LIST", default_value = "1,10,50,90,99,99.9,99.99")]
    pub percentiles: String,
    /// Write fio's per-second interval logs into DIR (made if missing):
    /// JOB_bw.N.log, JOB_iops.N.log, JOB_lat.N.log for run N, as fio's
    /// write_bw_log, write_iops_log and write_lat_log with log_avg_msec=1000
    /// (fio2gnuplot and fio-plot read them).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// On a simulated target with its journal on a simulated disk: cut
    /// the power this long into the run (virtual time: 5s, 500ms), then
    /// check what the disks held durably against the journal, as iolab
    /// validate after a crash (docs/sim.md). Exit status 3 when the
    /// journal misses writes the target holds, 4 when it is damaged
    /// (records it had made durable lost), 1 when blocks are bad.
    #[arg(long, value_name = "TIME")]
    pub power_cut: Option<String>,
    /// What standard output carries: text (the tables) or csv (a header,
    /// then one line per job and run, for scripts).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Under mpirun: each rank on its own target (per-rank, the default:
    /// put {rank} or {host} in its path), or every rank on its own
    /// 1/N of one shared target's region (shared; needs --size).
    #[arg(long, value_enum, value_name = "LAYOUT")]
    pub mpi_layout: Option<MpiLayout>,
    /// Under mpirun: every rank stops this long into the measured phase,
    /// done or not (IOR's stonewall, -D), so that no straggler's tail
    /// stretches the aggregate's window.
    #[arg(long, value_name = "TIME")]
    pub stonewall: Option<String>,
    /// Under mpirun: `{rank}` and `{host}` name another rank's (IOR's -C):
    /// the rank as many further as there are ranks on this host, so that
    /// each reads what a rank on another host wrote, past its own cache.
    #[arg(long)]
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
fn percentiles(text: &str) -> Result<Vec<f64>, UsageError> {
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
    /// Whether tables go to standard output (not when it carries the JSON
    /// or CSV lines).
    fn to_stdout(&self) -> bool {
        !self.silent
            && self.json.as_deref().is_none_or(|p| p.as_os_str() != "-")
            && self.output_format == OutputFormat::Text
    }
}

pub fn run(args: RunArgs, ranks: Option<&crate::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    if let Some(ranks) = ranks {
        return ranks::run(args, ranks);
    }
    if args.mpi_layout.is_some() {
        return Err(UsageError(
            "--mpi-layout: applies under mpirun only (mpirun -np N iolab run ... --mpi-layout shared)".into(),
        )
        .into());
    }
    if args.mpi_reorder {
        return Err(UsageError("--mpi-reorder: applies under mpirun only".into()).into());
    }
    if args.stonewall.is_some() {
        return Err(UsageError(
            "--stonewall: applies under mpirun only; a run alone stops at --runtime".into(),
        )
        .into());
    }
    if let (true, Some(path)) = (args.print_job, &args.jobfile) {
        let file = jobs::load(&args, path)?;
        let merged = crate::jobfile::JobFile {
            concurrent: file.concurrent,
            global: Default::default(),
            jobs: file.jobs.iter().map(|job| args.job.over(&job.over(&file.global))).collect(),
        };
        print!("{}", merged.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let percentiles = percentiles(&args.percentiles)?;
    if let Some(dir) = &args.plot {
        crate::check_plot_dir(dir)?;
    }
    if args.log_dir.as_deref().is_some_and(|d| d.exists() && !d.is_dir()) {
        return Err(UsageError("--log-dir: names a file; give a directory (made if missing)".into()).into());
    }
    let mut plan = jobs::plan(&args)?;
    if args.power_cut.is_some() {
        // The cut's images are what is checked, as `iolab validate` would.
        for (_, spec) in &mut plan.jobs {
            spec.validate.iter_mut().for_each(|v| v.verify = false);
        }
    }
    let jobs = prepare::all(&plan, args.force)?;
    let cut = match args.power_cut.as_deref() {
        Some(text) => {
            let after = workloads::spec::parse_duration("power-cut", text).map_err(UsageError::from);
            match after.and_then(|after| power_cut::PowerCut::arm(&jobs, args.repeat, after)) {
                Ok(cut) => Some(cut),
                Err(e) => {
                    jobs.into_iter().rev().for_each(|job| job.stack.discard());
                    return Err(e.into());
                }
            }
        }
        None => None,
    };
    let outcome = execute::all(&jobs, &plan.groups, &args, None)?;
    let bad_blocks = outcome.bad_blocks();
    write_results(&args, &outcome, &percentiles)?;
    execute::close(jobs, args.to_stdout())?;
    if outcome.interrupted {
        eprintln!("iolab: interrupted: the results above cover the time before the interrupt");
        return Ok(ExitCode::from(130));
    }
    if bad_blocks > 0 {
        eprintln!("iolab: validation found {}", report::counted(bad_blocks, "bad block", "bad blocks"));
        return Ok(ExitCode::from(1));
    }
    let unchecked = outcome.unchecked_runs();
    if unchecked > 0 && cut.is_none() {
        eprintln!(
            "iolab: validation checked no block in {} that wrote data: nothing was verified \
             (drop --no-verify, or add reads)",
            report::counted(unchecked as u64, "run", "runs")
        );
        return Ok(ExitCode::from(1));
    }
    if let Some(cut) = cut {
        let (text, status) = cut.check()?;
        if args.to_stdout() {
            print!("{text}");
        } else {
            eprint!("{text}");
        }
        return Ok(ExitCode::from(status));
    }
    Ok(ExitCode::SUCCESS)
}

/// The error log, the JSON document, fio's logs and the CSV lines, where
/// asked for.
fn write_results(args: &RunArgs, outcome: &execute::Outcome, percentiles: &[f64]) -> anyhow::Result<()> {
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot make the log directory", dir.display()))?;
        for job in &outcome.reports {
            for (n, run) in (1..).zip(&job.runs) {
                for (kind, text) in report::fio_logs(run) {
                    let path = dir.join(format!("{}_{kind}.{n}.log", job.name));
                    std::fs::write(&path, text)
                        .with_context(|| format!("{}: cannot write it", path.display()))?;
                }
            }
        }
    }
    if args.output_format == OutputFormat::Csv {
        println!("{}", report::RUN_CSV_HEADER);
        for job in &outcome.reports {
            for run in &job.runs {
                println!("{}", report::run_csv_line(&job.name, run));
            }
        }
    }
    if let Some(path) = &args.error_log {
        let text = report::json::error_log(&outcome.reports);
        std::fs::write(path, text + "\n")
            .with_context(|| format!("{}: cannot write the error log", path.display()))?;
    }
    let doc = report::json::RunDocument::new(
        env!("CARGO_PKG_VERSION"),
        crate::host::wire(),
        &outcome.reports,
        percentiles,
    );
    if let Some(path) = &args.json {
        crate::write_json(path, &doc.to_json())?;
    }
    if let Some(dir) = &args.plot {
        crate::write_plots(dir, &doc.to_json())?;
    }
    Ok(())
}
