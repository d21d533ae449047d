//! `iolab run` as one of MPI's ranks (`mpirun -np N iolab run ...`): each
//! rank prepares and lays out its own jobs, every run starts after a
//! barrier and ends with one (IOR's phases), and rank 0 gathers every
//! rank's document and the times its runs began and ended, prints one
//! table (a row per rank, then the aggregate) and writes one JSON
//! document (`iolab-mpi-run`).

use std::process::ExitCode;

use anyhow::Context;
use lab::job::execute::Runs;

use super::{execute, percentiles, MpiLayout, OutputFormat, RunArgs};
use crate::UsageError;
use lab::mpi::Ranks;

pub fn run(mut args: RunArgs, ranks: &Ranks) -> anyhow::Result<ExitCode> {
    let layout = args.mpi_layout.unwrap_or(MpiLayout::PerRank);
    let json = args.json.take();
    // Live output from N ranks on one terminal would be noise: rank 0
    // prints the gathered tables at the end.
    args.quiet = true;
    args.silent = true;
    let (plan, percentiles) = plan(&args, json.as_deref(), ranks, layout)?;
    if layout == MpiLayout::PerRank {
        let paths = lab::job::ranks::private_paths(&plan);
        ranks.own_paths(&paths.iter().map(|(f, p)| (*f, p.as_path())).collect::<Vec<_>>())?;
    }
    let jobs = lab::job::ranks::prepare(&plan, ranks, args.force)?;
    let barrier = || ranks.barrier();
    let shown = execute::Shown::new(false, true, args.repeat);
    let runs =
        Runs { groups: &plan.groups, repeat: args.repeat, barrier: Some(&barrier), rate_of: &plan.rate_of };
    let outcome = lab::job::execute::all(&jobs, &runs, &shown)?;
    let doc = report::json::RunDocument::new(
        env!("CARGO_PKG_VERSION"),
        lab::host::wire(),
        &outcome.reports,
        &percentiles,
    );
    let mine = report::RankRun {
        rank: ranks.rank,
        host: ranks.host.clone(),
        document: serde_json::from_str(&doc.to_json()).context("the run document is not JSON")?,
        windows: outcome.windows.clone(),
    };
    lab::job::execute::close(jobs)?;
    let own_bad = outcome.bad_blocks();
    let Some(all) = ranks.gather_values(&mine, "results")? else {
        return Ok(crate::exit::found(own_bad > 0));
    };
    rank_0(&args, json.as_deref(), layout, &all, outcome.interrupted)
}

/// The run's plan, checked on every rank (a rank that refuses it ends
/// them all): the stonewall applied, a shared target split.
fn plan(
    args: &RunArgs,
    json: Option<&std::path::Path>,
    ranks: &Ranks,
    layout: MpiLayout,
) -> anyhow::Result<(lab::job::Plan, Vec<f64>)> {
    let checked = refused(args, json).and_then(|()| {
        let mut plan = args.plan()?;
        if plan.log_dir.is_some() {
            return Err(UsageError(
                "the job file asks for fio's interval logs (write_bw_log, log-dir), which a run under mpirun \
                 does not write yet; take them out"
                    .into(),
            )
            .into());
        }
        if plan.jobs.iter().any(|(_, spec)| spec.trims()) {
            return Err(UsageError(
                "discards (--rw trim, randtrim, trimwrite, or a trace's) under mpirun: the ranks' aggregate \
                 counts reads and writes only; run discards without mpirun"
                    .into(),
            )
            .into());
        }
        let percentiles = percentiles(&args.percentiles)?;
        if let Some(text) = &args.stonewall {
            let wall = workloads::spec::parse_duration("stonewall", text).map_err(UsageError::from)?;
            lab::job::ranks::stonewall(&mut plan, wall);
        }
        if layout == MpiLayout::Shared {
            lab::job::ranks::share(&mut plan, ranks)?;
        }
        Ok((plan, percentiles))
    });
    ranks.agreed(checked)
}

/// On rank 0: every rank's results (`all`) in one table and document,
/// and the run's exit status.
fn rank_0(
    args: &RunArgs,
    json: Option<&std::path::Path>,
    layout: MpiLayout,
    all: &[report::RankRun],
    interrupted: bool,
) -> anyhow::Result<ExitCode> {
    let to_stdout = json.is_none_or(|p| p.as_os_str() != "-");
    if to_stdout {
        print!("{}", report::mpi_table(all, &how(layout, args.stonewall.as_deref(), args.mpi_reorder)));
    }
    if let Some(path) = json {
        let stonewall = args.stonewall.as_deref();
        let doc = report::json::MpiRunDocument::new(
            env!("CARGO_PKG_VERSION"),
            lab::host::wire(),
            all,
            layout.name(),
            stonewall,
            args.mpi_reorder,
        );
        crate::write_json(path, &doc.to_json())?;
    }
    let bad: u64 = all.iter().map(|r| bad_blocks(&r.document)).sum();
    if interrupted {
        eprintln!("iolab: interrupted: the results above cover the time before the interrupt");
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    }
    if bad > 0 {
        eprintln!(
            "iolab: validation found {bad} bad block(s) over all ranks (each rank's in the JSON document)"
        );
        return Ok(ExitCode::from(crate::exit::FAILURE));
    }
    Ok(ExitCode::SUCCESS)
}

/// How the ranks ran, for the table's heading.
fn how(layout: MpiLayout, stonewall: Option<&str>, reordered: bool) -> String {
    let mut how = layout.name().to_string();
    if reordered {
        how += ", each rank on another's (reordered, IOR's -C)";
    }
    if let Some(wall) = stonewall {
        how += &format!(", every rank stopped {wall} into its run (stonewall)");
    }
    how
}

/// What a rank's run cannot do yet.
fn refused(args: &RunArgs, json: Option<&std::path::Path>) -> anyhow::Result<()> {
    let flag = if args.print_job {
        Some("--print-job")
    } else if args.power_cut.is_some() {
        Some("--power-cut")
    } else if args.log_dir.is_some() {
        Some("--log-dir")
    } else if args.plot.is_some() {
        Some("--plot")
    } else if args.output_format == OutputFormat::Csv {
        Some("--output-format csv")
    } else if args.error_log.is_some() {
        Some("--error-log")
    } else {
        None
    };
    if let Some(flag) = flag {
        return Err(UsageError(format!(
            "{flag}: not under mpirun yet; run without it (rank 0's --json document holds every rank's results and errors)"
        ))
        .into());
    }
    if let Some(path) = json {
        crate::check_output("json", path, true)?;
    }
    Ok(())
}

fn bad_blocks(doc: &serde_json::Value) -> u64 {
    let jobs = doc.get("jobs").and_then(|j| j.as_array()).into_iter().flatten();
    let runs = jobs.filter_map(|j| j.get("runs").and_then(|r| r.as_array())).flatten();
    runs.filter_map(|r| r.get("validation")?.get("errors")?.as_u64()).sum()
}
