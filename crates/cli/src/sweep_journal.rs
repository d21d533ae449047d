//! `iolab sweep journal`: the second seed's table. The flags are checked
//! and the target opened here; `lab::sweep_journal` runs the arms; the
//! tables, JSON and charts are written here.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use lab::stack::{self, Stack};
use lab::sweep_journal::{self, arm_job, parse_arms, Journals, Plan};
use workloads::spec::{parse_bytes, parse_duration};
use workloads::{BlockSizes, Engine, JobSpec, Rw};

use crate::UsageError;

#[derive(Debug, Args)]
pub struct JournalArgs {
    /// The target to write (a file or block device, or a simulated disk:
    /// sim:ssd[,...], with --journal-disk).
    #[arg(long, short = 't', value_name = "TARGET")]
    pub target: String,
    /// Where the journal arms keep their journals: a directory, on the
    /// disk whose cost is to be measured (each arm's journal is removed
    /// after its run).
    #[arg(long, value_name = "DIR", required_unless_present = "journal_disk")]
    pub journal_dir: Option<PathBuf>,
    /// With a simulated target: the simulated disk the journals go on (a
    /// new one for each run), e.g. sim:hdd,wce=off or
    /// sim:hdd,flush=ignore (docs/sim.md). Given again, a sweep for each,
    /// then the sweeps side by side (the second seed's two servers).
    #[arg(long, value_name = "SIM", conflicts_with = "journal_dir")]
    pub journal_disk: Vec<String>,
    /// On simulated disks: after each journal disk's arms, one more run of
    /// the sync arm on a new target and journal disk, whose power is cut
    /// TIME after its start; what the disks then held durably is checked
    /// against the journal (docs/sim.md).
    #[arg(long, value_name = "TIME")]
    pub power_cut: Option<String>,
    /// Bytes of the target to write (a missing file is created sparse with
    /// this size; default: the whole target, 1 GiB of a simulated one).
    #[arg(long)]
    pub size: Option<String>,
    /// The arms, in the order they run within a repeat (also: group-ring,
    /// group commits through the uring rings).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "off,validate,no-preread,sync,async,group,group-preread"
    )]
    pub arms: Vec<String>,
    /// Transfer size of the random writes.
    #[arg(long, default_value = "4k")]
    pub bs: String,
    /// Requests in flight: one uring thread at this depth, or this many
    /// sync-engine threads.
    #[arg(long, default_value_t = 32)]
    pub iodepth: u32,
    /// auto (uring where available), sync or uring; the same for every arm.
    #[arg(long, default_value = "auto")]
    pub engine: workloads::EngineChoice,
    /// Length of each run.
    #[arg(long, default_value = "5s")]
    pub runtime: String,
    /// Runs of each arm; the table shows medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// Use the page cache (default: O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// Write every run as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Overwrite a target that holds data.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: JournalArgs) -> anyhow::Result<ExitCode> {
    crate::check_destinations(args.json.as_deref(), args.plot.as_deref())?;
    if args.repeat == 0 {
        return Err(UsageError("--repeat: must be at least 1".into()).into());
    }
    let arms = parse_arms(&args.arms)?;
    let runtime = parse_duration("runtime", &args.runtime).map_err(UsageError::from)?;
    let bs = BlockSizes::parse(&args.bs).map_err(UsageError::from)?;
    let simulated = args.target.starts_with("sim:");
    let size = target_size(&args, simulated)?;
    let journals = journals(&args, simulated)?;
    let power_cut = power_cut(&args, simulated, runtime)?;
    let target = open_target(&args, size)?;
    let (engine, threads, iodepth) = engine(&args, simulated, target.device().raw_fd().is_some())?;
    if let [Journals::Dir(dir)] = journals.as_slice() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--journal-dir: cannot create {}", dir.display()))?;
    }
    // On simulated disks the clock whose hooks cut the power.
    let clock = if simulated { device::Clock::Virtual(lab::stack::sim_clock()) } else { device::Clock::Wall };
    let job = JobSpec {
        name: "sweep".into(),
        clock,
        rw: Rw::RandWrite,
        read_pct: Rw::RandWrite.default_read_pct(),
        bs,
        size_bytes: size,
        engine,
        threads,
        iodepth,
        runtime: Some(runtime),
        ..JobSpec::default()
    };
    job.check().map_err(UsageError::from)?;
    let sector = u64::from(target.device().sector_bytes());
    let region = job.region(target.device().size_bytes(), sector).map_err(UsageError::from)?;
    check_arms(&job, &arms, &journals)?;
    // The pre-read arms read before they write: never holes.
    lab::layout::lay_out_for_sweep(target.device().as_ref(), region.start..region.start + region.len)?;
    let plan = Plan {
        target: args.target.clone(),
        job,
        arms,
        journals,
        repeat: args.repeat,
        power_cut,
        bs: args.bs.clone(),
        engine,
        threads,
        iodepth,
        runtime,
        simulated,
    };
    let steps = crate::steps::Steps::new(plan.runs(), "sweep journal");
    let sweeps = sweep_journal::run(&plan, target.device(), &|done, label| steps.begin(done, label))?;
    drop(steps);
    print_sweeps(&args, &sweeps)?;
    target.close()?;
    Ok(ExitCode::SUCCESS)
}

/// `--size`, after `--target` is checked to be a file, a device or a
/// simulated disk (which is 1 GiB unless `--size` says).
fn target_size(args: &JournalArgs, simulated: bool) -> anyhow::Result<Option<u64>> {
    if args.target.contains(':') && !simulated {
        return Err(UsageError(format!(
            "--target: {} is not a file or device (or a simulated disk); the sweep measures a disk",
            args.target
        ))
        .into());
    }
    let size = args.size.as_deref().map(|s| parse_bytes("size", s)).transpose().map_err(UsageError::from)?;
    Ok(match (size, simulated) {
        (None, true) => Some(1 << 30),
        (size, _) => size,
    })
}

/// The target, opened (a missing file made sparse of `size`) and
/// checked writable.
fn open_target(args: &JournalArgs, size: Option<u64>) -> anyhow::Result<Stack> {
    let options = stack::OpenOptions::benchmark(!args.buffered, size);
    let target = Stack::open_or_simulate(&args.target, &options)?;
    stack::check_writable(&target, args.force)?;
    Ok(target)
}

/// Every arm's job passes the job's own checks before any runs
/// (group-ring on the sync engine, say).
fn check_arms(
    job: &JobSpec,
    arms: &[lab::sweep_journal::Arm],
    journals: &[Journals],
) -> Result<(), UsageError> {
    for (arm, journals) in arms.iter().flat_map(|a| journals.iter().map(move |j| (a, j))) {
        arm_job(job, arm, journals)?.check().map_err(|e| UsageError(format!("--arms: {}: {e}", arm.name)))?;
    }
    Ok(())
}

/// Where the arms keep their journals: the directory, or each simulated
/// journal disk (checked now, before anything runs).
fn journals(args: &JournalArgs, simulated: bool) -> anyhow::Result<Vec<Journals>> {
    Ok(match (&args.journal_dir, args.journal_disk.as_slice(), simulated) {
        (Some(dir), [], false) => vec![Journals::Dir(dir.clone())],
        (None, disks @ [_, ..], true) => {
            // Checked now, before anything runs.
            for disk in disks {
                lab::stack::open_sim_keeping(disk, "journal-disk")?;
            }
            disks.iter().map(|d| Journals::Disk(d.clone())).collect()
        }
        (_, _, true) => {
            return Err(UsageError(
                "--target sim:...: give --journal-disk sim:... (a journal in a directory would cost no modeled time)"
                    .into(),
            )
            .into())
        }
        (_, _, false) => {
            return Err(UsageError("--journal-disk: goes with a simulated target (--target sim:...)".into()).into())
        }
    })
}

/// With a simulated target: when the power cut comes, inside the run.
fn power_cut(
    args: &JournalArgs,
    simulated: bool,
    runtime: std::time::Duration,
) -> anyhow::Result<Option<std::time::Duration>> {
    Ok(match (&args.power_cut, simulated) {
        (None, _) => None,
        (Some(_), false) => {
            return Err(UsageError(
                "--power-cut: cuts the power of simulated disks (--target sim:... --journal-disk sim:...); a real \
                 disk's power is cut with iolab crash or by hand"
                    .into(),
            )
            .into())
        }
        (Some(text), true) => {
            let after = parse_duration("power-cut", text).map_err(UsageError::from)?;
            if after.is_zero() || after >= runtime {
                return Err(UsageError(format!(
                    "--power-cut {text}: falls outside the run; give a time after its start and before --runtime \
                     ({})",
                    args.runtime
                ))
                .into());
            }
            Some(after)
        }
    })
}

/// The engine every arm runs, as `iolab run` chooses it for an
/// unjournaled job, and its threads and depth. On simulated disks: the
/// engine in virtual time, its lanes the sync engine's threads (a
/// request at a time each).
fn engine(args: &JournalArgs, simulated: bool, raw_fd: bool) -> anyhow::Result<(Engine, u32, u32)> {
    let engine = match simulated {
        true if !matches!(args.engine, workloads::EngineChoice::Auto | workloads::EngineChoice::Virtual) => {
            return Err(UsageError(
                "--engine: on simulated disks every arm runs in the disks' virtual time, --iodepth threads of one \
                 request each; leave --engine out"
                    .into(),
            )
            .into())
        }
        true => Engine::Virtual,
        false => args.engine.resolve(raw_fd, false, false, args.iodepth),
    };
    let (threads, iodepth) = match (engine, simulated) {
        (Engine::Uring | Engine::Virtual, false) => (1, args.iodepth),
        (Engine::Sync, _) | (_, true) => (args.iodepth, 1),
    };
    Ok((engine, threads, iodepth))
}

/// The tables (unless the JSON goes to standard output), side by side
/// when there are several, and the JSON: one document, or an array of
/// them (a journal disk each).
fn print_sweeps(args: &JournalArgs, sweeps: &[report::JournalSweep]) -> anyhow::Result<()> {
    if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        let tables: Vec<String> = sweeps.iter().map(report::journal_sweep_table).collect();
        print!("{}", tables.join("\n"));
        if sweeps.len() > 1 {
            print!("\n{}", report::journal_sweeps_side_by_side(sweeps));
        }
    }
    let docs: Vec<String> = sweeps
        .iter()
        .map(|s| {
            report::json::SweepJournalDocument::new(env!("CARGO_PKG_VERSION"), lab::host::wire(), s).to_json()
        })
        .collect();
    if let Some(path) = &args.json {
        let text = match docs.as_slice() {
            [one] => one.clone(),
            many => format!("[\n{}\n]\n", many.iter().map(|d| d.trim_end()).collect::<Vec<_>>().join(",\n")),
        };
        crate::write_json(path, &text)?;
    }
    if let Some(dir) = &args.plot {
        for (i, doc) in docs.iter().enumerate() {
            // A directory each when several: their charts share names.
            let dir = if docs.len() > 1 { dir.join(format!("journal-disk-{}", i + 1)) } else { dir.clone() };
            crate::write_plots(&dir, doc)?;
        }
    }
    Ok(())
}
