//! `iolab sweep stripes`: the third seed's comparison. The same drives as
//! a plain target (`ufs`), as striped volumes of several stripe sizes and
//! as RAID-5, each measured with bonnie (or the `fs` transfer mix), in one
//! table with the plex counters that explain it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use device::Device;
use lab::sweep_stripes::{Plan, Workload};
use workloads::spec::{human_bytes, parse_bytes, parse_duration};

use crate::UsageError;
use lab::stack::{self, Stack};

#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Plain drive, striped volumes over stripe sizes, and RAID-5.
    Stripes(StripesArgs),
    /// Validation off, on, and with its journal in each mode (the second
    /// seed's table).
    Journal(crate::sweep_journal::JournalArgs),
    /// iolab's file system under each metadata policy: copies of a source
    /// tree extracted, then removed (the first seed's table).
    Policies(crate::sweep_policies::PoliciesArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SweepWorkload {
    /// bonnie's six phases (8 KiB transfers), as in the seed.
    Bonnie,
    /// Random 70/30 reads and writes with the `fs` transfer mix.
    Fs,
}

#[derive(Debug, Args)]
pub struct StripesArgs {
    /// The drives (files or block devices), at least 3 for RAID-5.
    #[arg(long, num_args = 2.., required = true, value_name = "DRIVE")]
    pub drives: Vec<PathBuf>,
    /// Stripe sizes of the striped volumes.
    #[arg(long, value_delimiter = ',', default_value = "1k,8k,64k,256k,512k,4m")]
    pub stripes: Vec<String>,
    /// Stripe size of the RAID-5 row ("none" to skip it).
    #[arg(long, default_value = "512k")]
    pub raid5: String,
    /// Bytes each layout is measured on (bonnie's file size, or the region
    /// of the fs workload).
    #[arg(long, default_value = "100m")]
    pub size: String,
    /// Create missing drive files, sparse, of this size.
    #[arg(long, value_name = "SIZE")]
    pub drive_size: Option<String>,
    #[arg(long, value_enum, default_value_t = SweepWorkload::Bonnie)]
    pub workload: SweepWorkload,
    /// Random seeks of each bonnie run.
    #[arg(long, default_value_t = 8192)]
    pub seeks: u64,
    /// Length of each fs-workload run.
    #[arg(long, default_value = "5s")]
    pub runtime: String,
    /// Use the page cache (default: O_DIRECT on the drives).
    #[arg(long)]
    pub buffered: bool,
    /// Measure each layout N times; the table shows medians (min and max
    /// of bonnie's figures as extra rows), the JSON every run.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Write every row as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Overwrite drives that hold data.
    #[arg(long)]
    pub force: bool,
}

pub fn run(command: SweepCommand) -> anyhow::Result<ExitCode> {
    let args = match command {
        SweepCommand::Stripes(args) => args,
        SweepCommand::Journal(args) => return crate::sweep_journal::run(args),
        SweepCommand::Policies(args) => return crate::sweep_policies::run(args),
    };
    crate::check_destinations(args.json.as_deref(), args.plot.as_deref())?;
    if args.repeat == 0 {
        return Err(UsageError("--repeat: must be at least 1".into()).into());
    }
    let size = parse_bytes("size", &args.size).map_err(UsageError::from)?;
    let runtime = parse_duration("runtime", &args.runtime).map_err(UsageError::from)?;
    let mut layouts: Vec<(String, Option<String>)> = vec![("ufs".into(), None)];
    for s in &args.stripes {
        let bytes = parse_bytes("stripes", s).map_err(UsageError::from)?;
        layouts.push((format!("s{}", human_bytes(bytes)), Some(format!("striped {bytes}"))));
    }
    if args.raid5 != "none" {
        if args.drives.len() < 3 {
            return Err(UsageError("--raid5: RAID-5 needs at least 3 drives (or --raid5 none)".into()).into());
        }
        let bytes = parse_bytes("raid5", &args.raid5).map_err(UsageError::from)?;
        layouts.push((format!("r{}", human_bytes(bytes)), Some(format!("raid5 {bytes}"))));
    }
    let stacks = open_drives(&args)?;
    let simulated = stacks.iter().any(|s| s.origin.simulated);
    if simulated && !stacks.iter().all(|s| s.origin.simulated) {
        stacks.into_iter().for_each(Stack::discard);
        return Err(UsageError(
            "--drives: all simulated (sim:...) or none; one time cannot hold both".into(),
        )
        .into());
    }
    let drives: Vec<Arc<dyn Device>> = stacks.iter().map(|s| Arc::clone(s.device())).collect();
    if args.workload == SweepWorkload::Fs {
        // The fs mix reads 70%: of the disks, never of holes.
        for drive in &drives {
            lab::layout::lay_out_for_sweep(drive.as_ref(), 0..drive.size_bytes())?;
        }
    }
    let workload = match args.workload {
        SweepWorkload::Bonnie => Workload::Bonnie { seeks: args.seeks },
        SweepWorkload::Fs => Workload::Fs { runtime },
    };
    let plan = Plan { workload, size, repeat: args.repeat, simulated };
    let steps = crate::steps::Steps::new(layouts.len() as u64 * u64::from(args.repeat), "sweep stripes");
    let rows = lab::sweep_stripes::run(&plan, &drives, &layouts, &|done, label| steps.begin(done, label))?;
    drop(steps);
    drop(drives);
    for stack in stacks {
        stack.close()?;
    }
    match args.workload {
        SweepWorkload::Bonnie => print!("{}", report::stripes_bonnie_table(&rows)),
        SweepWorkload::Fs => print!("{}", report::stripes_fs_table(&rows)),
    }
    let doc = report::json::SweepStripesDocument::new(env!("CARGO_PKG_VERSION"), lab::host::wire(), &rows);
    if let Some(path) = &args.json {
        std::fs::write(path, doc.to_json() + "\n")
            .with_context(|| format!("{}: cannot write the JSON", path.display()))?;
    }
    if let Some(dir) = &args.plot {
        crate::write_plots(dir, &doc.to_json())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The drives, each opened as a stack's base: made sparse when missing
/// (`--drive-size`), locked, refused when it holds data unless `--force`.
fn open_drives(args: &StripesArgs) -> anyhow::Result<Vec<Stack>> {
    let create_bytes = args
        .drive_size
        .as_deref()
        .map(|s| parse_bytes("drive-size", s))
        .transpose()
        .map_err(UsageError::from)?;
    let mut drives: Vec<Stack> = Vec::new();
    for path in &args.drives {
        let shown = path.display().to_string();
        if shown.starts_with("sim:") {
            if args.workload != SweepWorkload::Fs {
                drives.into_iter().for_each(Stack::discard);
                return Err(UsageError(
                    "--drives sim:...: simulated drives run with --workload fs (bonnie times its phases by the \
                     wall clock)"
                        .into(),
                )
                .into());
            }
            drives.push(Stack::open_or_simulate(&shown, &stack::OpenOptions::benchmark(true, None))?);
            continue;
        }
        if !path.exists() && create_bytes.is_none() {
            return Err(UsageError(format!(
                "--drives: {} does not exist; give --drive-size to create it",
                path.display()
            ))
            .into());
        }
        let options = stack::OpenOptions {
            direct: !args.buffered,
            read_only: false,
            sector_bytes: None,
            create_bytes,
            lock: stack::Lock::Require(device::LockKind::Exclusive),
        };
        let drive = Stack::open(&path.display().to_string(), &options)?;
        if let Err(e) = stack::check_writable(&drive, args.force) {
            drives.into_iter().chain([drive]).for_each(Stack::discard);
            return Err(e.context("the sweep overwrites its drives; pass --force to allow it"));
        }
        drives.push(drive);
    }
    Ok(drives)
}
