//! `iolab run`: build the jobs from flags and the job file (`jobs.rs`),
//! check each against its stack and open it (`prepare.rs`), lay out and
//! run them, in sequence or at once, with repeats and a progress line
//! (`execute.rs`), then print the tables and write the JSON.

mod execute;
mod jobs;
mod prepare;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::jobfile::JobFields;

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
}

impl RunArgs {
    /// Whether tables go to standard output (not when it carries the JSON).
    fn to_stdout(&self) -> bool {
        self.json.as_deref().is_none_or(|p| p.as_os_str() != "-")
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
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
    let plan = jobs::plan(&args)?;
    let jobs = prepare::all(&plan, args.force)?;
    let outcome = execute::all(&jobs, &plan.groups, &args)?;
    let bad_blocks = outcome.bad_blocks();
    write_results(&args, &outcome)?;
    execute::close(jobs, args.to_stdout())?;
    if outcome.interrupted {
        eprintln!("iolab: interrupted: the results above cover the time before the interrupt");
        return Ok(ExitCode::from(130));
    }
    if bad_blocks > 0 {
        eprintln!("iolab: validation found {bad_blocks} bad block(s)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The error log and the JSON document, where asked for.
fn write_results(args: &RunArgs, outcome: &execute::Outcome) -> anyhow::Result<()> {
    if let Some(path) = &args.error_log {
        let text = report::json::error_log(&outcome.reports);
        std::fs::write(path, text + "\n")
            .with_context(|| format!("{}: cannot write the error log", path.display()))?;
    }
    if let Some(path) = &args.json {
        let doc = report::json::RunDocument::new(env!("CARGO_PKG_VERSION"), &outcome.reports);
        crate::write_json(path, &doc.to_json())?;
    }
    Ok(())
}
