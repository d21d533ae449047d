//! `iolab run`: build the jobs from flags and the job file (`lab::job`),
//! check each against its stack and open it (`prepare.rs`), lay out and
//! run them, in sequence or at once, with repeats and a progress line
//! (`execute.rs`), then print the tables and write the JSON.

mod args;
mod execute;
pub(crate) mod power_cut;
mod ranks;

use std::process::ExitCode;

use anyhow::Context;
use lab::job::execute::{Outcome, Runs};

use crate::UsageError;

pub(crate) use args::percentiles;
pub use args::{MpiLayout, OutputFormat, RunArgs};

pub fn run(args: RunArgs, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    if let Some(ranks) = ranks {
        return ranks::run(args, ranks);
    }
    refuse_mpi_flags(&args)?;
    if let (true, Some(path)) = (args.print_job, &args.jobfile) {
        return print_job(&args, path);
    }
    let percentiles = percentiles(&args.percentiles)?;
    if let Some(dir) = &args.plot {
        crate::check_plot_dir(dir)?;
    }
    let mut plan = args.plan()?;
    let log_dir = args.log_dir.clone().or(plan.log_dir.take());
    if log_dir.as_deref().is_some_and(|d| d.exists() && !d.is_dir()) {
        return Err(UsageError("--log-dir: names a file; give a directory (made if missing)".into()).into());
    }
    if args.power_cut.is_some() {
        // The cut's images are what is checked, as `iolab validate` would.
        for (_, spec) in &mut plan.jobs {
            spec.validate.iter_mut().for_each(|v| v.verify = false);
        }
    }
    let jobs = lab::job::prepare::all(&plan, args.force)?;
    let cut = match arm_power_cut(&args, &jobs) {
        Ok(cut) => cut,
        Err(e) => {
            jobs.into_iter().rev().for_each(|job| job.stack.discard());
            return Err(e);
        }
    };
    let shown = execute::Shown::new(args.to_stdout(), args.quiet, args.repeat);
    let runs = Runs { groups: &plan.groups, repeat: args.repeat, barrier: None, rate_of: &plan.rate_of };
    let outcome = lab::job::execute::all(&jobs, &runs, &shown)?;
    write_results(&args, log_dir.as_deref(), &outcome, &percentiles)?;
    let closed = lab::job::execute::close(jobs)?;
    if args.to_stdout() {
        execute::show_closed(closed);
    }
    verdict(&args, &outcome, cut)
}

/// The flags that apply under mpirun only, refused in a run alone.
fn refuse_mpi_flags(args: &RunArgs) -> Result<(), UsageError> {
    if args.mpi_layout.is_some() {
        return Err(UsageError(
            "--mpi-layout: applies under mpirun only (mpirun -np N iolab run ... --mpi-layout shared)".into(),
        ));
    }
    if args.mpi_reorder {
        return Err(UsageError("--mpi-reorder: applies under mpirun only".into()));
    }
    if args.stonewall.is_some() {
        return Err(UsageError(
            "--stonewall: applies under mpirun only; a run alone stops at --runtime".into(),
        ));
    }
    Ok(())
}

/// `--print-job`: the job file as iolab's TOML (a fio file translated,
/// flags applied); nothing runs.
fn print_job(args: &RunArgs, path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let file = lab::job::load(path, args.strict)?;
    let merged = lab::job::JobFile {
        concurrent: file.concurrent,
        log_dir: args.log_dir.clone().or(file.log_dir),
        global: Default::default(),
        jobs: file.jobs.iter().map(|job| args.job.over(&job.over(&file.global))).collect(),
    };
    print!("{}", merged.to_toml());
    Ok(ExitCode::SUCCESS)
}

/// `--power-cut TIME`: the cut set on the run's simulated disks.
fn arm_power_cut(
    args: &RunArgs,
    jobs: &[lab::job::Prepared],
) -> anyhow::Result<Option<lab::power_cut::PowerCut>> {
    let Some(text) = args.power_cut.as_deref() else { return Ok(None) };
    let after = workloads::spec::parse_duration("power-cut", text).map_err(UsageError::from)?;
    Ok(Some(power_cut::arm(jobs, args.repeat, after)?))
}

/// What the run comes to once its tables are out: interrupted, bad
/// blocks, validation that checked nothing, or the power cut's verdict.
fn verdict(
    args: &RunArgs,
    outcome: &Outcome,
    cut: Option<lab::power_cut::PowerCut>,
) -> anyhow::Result<ExitCode> {
    if outcome.interrupted {
        eprintln!("iolab: interrupted: the results above cover the time before the interrupt");
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    }
    let bad_blocks = outcome.bad_blocks();
    if bad_blocks > 0 {
        eprintln!("iolab: validation found {}", report::counted(bad_blocks, "bad block", "bad blocks"));
        return Ok(ExitCode::from(crate::exit::FAILURE));
    }
    let unchecked = outcome.unchecked_runs();
    if unchecked > 0 && cut.is_none() {
        eprintln!(
            "iolab: validation checked no block in {} that wrote data: nothing was verified \
             (drop --no-verify, or add reads)",
            report::counted(unchecked as u64, "run", "runs")
        );
        return Ok(ExitCode::from(crate::exit::FAILURE));
    }
    if let Some(cut) = cut {
        let (text, status) = power_cut::check(cut)?;
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
fn write_results(
    args: &RunArgs,
    log_dir: Option<&std::path::Path>,
    outcome: &Outcome,
    percentiles: &[f64],
) -> anyhow::Result<()> {
    if let Some(dir) = log_dir {
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
            for (n, run) in (1..).zip(&job.runs) {
                println!("{}", report::run_csv_line(&job.name, n, run));
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
        lab::host::wire(),
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
