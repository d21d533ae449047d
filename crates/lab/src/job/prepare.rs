//! Each job checked whole against the stack it will run on before anything
//! is written to it, then its stack opened: the base read-only for a job
//! that only reads, locked as it needs, a log planned before it is
//! formatted, what the layout will do decided. A job refused here leaves
//! its target as it was (`Stack::discard`).

use std::path::Path;

use device::LockKind::{Exclusive, Shared};
use workloads::layout::LayoutPolicy;
use workloads::{Engine, JobSpec};

use super::{JobFields, Plan};
use crate::stack::{self, LogOptions, LogPlan, Stack};
use crate::UsageError;

/// The default job's depth with the uring engine.
const DEFAULT_JOB_IODEPTH: u32 = 16;

/// A job on a simulated disk that names no end condition runs this long,
/// in modeled time (docs/sim.md).
const SIM_DEFAULT_RUNTIME: std::time::Duration = std::time::Duration::from_secs(60);

/// A job ready to run: every parameter checked against its stack, the
/// stack open (and, with `--log`, its log replayed or formatted), what the
/// layout will do decided. Nothing else has been written.
pub struct Prepared {
    pub spec: JobSpec,
    pub stack: Stack,
    pub region: workloads::Region,
    pub layout: LayoutPlan,
    pub keep_cache: bool,
}

/// What the layout will do for a job.
#[derive(Clone, Copy, Debug)]
pub struct LayoutPlan {
    pub policy: LayoutPolicy,
    /// Fill the region's holes before the clock (else only count them).
    pub write: bool,
    /// Fill with zeros: the target existed, so it reads the same after.
    pub zeros: bool,
}

/// Prepares every job of `plan`; if one is refused, the stacks of those
/// prepared before it are discarded too (newest first: a file two jobs
/// share was made by the first).
pub fn all(plan: &Plan, force: bool) -> anyhow::Result<Vec<Prepared>> {
    let mut jobs: Vec<Prepared> = Vec::with_capacity(plan.jobs.len());
    for ((f, spec), create) in plan.jobs.iter().zip(&plan.create_bytes) {
        match prepare(f, spec.clone(), *create, plan.default_job, force, plan.shared_with_ranks) {
            Ok(job) => jobs.push(job),
            Err(e) => {
                jobs.into_iter().rev().for_each(|job| job.stack.discard());
                return Err(e);
            }
        }
    }
    Ok(jobs)
}

fn prepare(
    f: &JobFields,
    spec: JobSpec,
    create_bytes: Option<u64>,
    default_job: bool,
    force: bool,
    ranks: bool,
) -> anyhow::Result<Prepared> {
    let log = log_options(f, &spec, force)?;
    // A job that only reads opens its target read-only, so read-only files
    // and devices can be measured; the layout reopens it if it must write.
    let read_only = spec.read_pct == 100 && log.is_none();
    let name = spec.name.clone();
    let open = |read_only| open_stack(f, &name, create_bytes, default_job, log.as_ref(), read_only, ranks);
    let mut stack = open(read_only)?;
    let how = How { policy: f.layout.unwrap_or_default(), force, default_job };
    let (spec, region, layout, plan) = match check_job(f, spec, &mut stack, log.as_ref(), how, || open(false))
    {
        Ok(checked) => checked,
        Err(e) => {
            stack.discard();
            return Err(e);
        }
    };
    if let (Some(plan), Some(options)) = (plan, &log) {
        stack = stack.push_log(plan, options)?;
    }
    if let Some(vol) = stack.volume() {
        // The counters show the job's requests alone, not the safety probe.
        vol.reset_stats();
    }
    Ok(Prepared { spec, stack, region, layout, keep_cache: f.keep_cache.unwrap_or(false) })
}

/// The run-wide choices a job is checked with.
#[derive(Clone, Copy)]
struct How {
    policy: LayoutPolicy,
    force: bool,
    default_job: bool,
}

/// Every check a job must pass before anything is written to its stack:
/// the log it would run through (planned, not formatted), the engine, the
/// parameters against the geometry it will run on, the journal's place,
/// the safety check of a job that writes, and whether the layout may
/// write. `reopen` opens the stack read-write when a read-only job's
/// region needs laying out.
fn check_job(
    f: &JobFields,
    mut spec: JobSpec,
    stack: &mut Stack,
    log: Option<&LogOptions>,
    how: How,
    reopen: impl Fn() -> anyhow::Result<Stack>,
) -> anyhow::Result<(JobSpec, workloads::Region, LayoutPlan, Option<LogPlan>)> {
    let plan = log.map(|options| stack.plan_log(options)).transpose()?;
    let (size, sector) = match &plan {
        Some(p) => (p.data_bytes, p.sector_bytes),
        None => (stack.device().size_bytes(), stack.device().sector_bytes()),
    };
    let sync_journal = spec
        .validate
        .as_ref()
        .and_then(|v| v.journal.as_ref())
        .is_some_and(|j| j.mode == workloads::journal::JournalMode::Sync);
    let raw_fd = plan.is_none() && stack.device().raw_fd().is_some();
    // A simulated disk alone runs on the engine in virtual time (validated
    // too, its journal on a simulated disk of its own); under the block
    // log, the sync engine's threads run in the disk's virtual time.
    let virtual_disk = plan.is_none() && stack.device().virtual_disk().is_some();
    if stack.origin.simulated {
        // The layers' ages and the engines' time (or, on the engine in
        // virtual time, the hooks it runs: a power cut's) are the disks'.
        spec.clock = device::Clock::Virtual(crate::stack::sim_clock());
    }
    if let Some(base) =
        stack.origin.sim.as_ref().filter(|b| virtual_disk && !b.data_given && spec.validate.is_none())
    {
        // Alone under a job that does not validate, nothing reads the
        // data back: keeping it would only cost memory (a layer above
        // keeps it: it reads what it wrote).
        base.disk.discard_data();
    }
    choose_engine(f, &mut spec, stack, Seen { raw_fd, virtual_disk, sync_journal }, how.default_job)?;
    if stack.origin.simulated && spec.runtime.is_none() && spec.ios.is_none() && spec.io_bytes.is_none() {
        // One pass over a simulated 500 GB disk is weeks of modeled time
        // and minutes of CPU: a job that names no end runs a modeled minute.
        spec.runtime = Some(SIM_DEFAULT_RUNTIME);
    }
    journal_fits(&spec, stack)?;
    let region = spec.region(size, u64::from(sector)).map_err(UsageError::from)?;
    if let Some(workloads::journal::JournalPlace::Dir(dir)) =
        spec.validate.as_ref().and_then(|v| v.journal.as_ref()).map(|j| &j.place)
    {
        workloads::journal::check_dir(dir).map_err(|e| UsageError(format!("--journal: {e}")))?;
    }
    if spec.read_pct < 100 {
        stack::check_writable_behind(stack, plan.as_ref().and_then(|p| p.reused_inside), how.force)?;
    }
    let write = how.policy.lays_out(spec.read_pct);
    let fresh = stack.origin.created || stack.origin.was_empty;
    let layout = LayoutPlan { policy: how.policy, write, zeros: !fresh };
    if write && plan.is_none() {
        check_layout(&spec, stack, &region, how.force, reopen)?;
    }
    Ok((spec, region, layout, plan))
}

/// What a job's stack offers its engine.
#[derive(Clone, Copy)]
struct Seen {
    /// A descriptor io_uring can use (a file or block device, no log above).
    raw_fd: bool,
    /// A simulated disk alone.
    virtual_disk: bool,
    /// The job journals synchronously.
    sync_journal: bool,
}

/// The job's engine, resolved from `--engine` for what its stack offers
/// and checked against it; the default job's depth on the engines that
/// keep requests in flight.
fn choose_engine(
    f: &JobFields,
    spec: &mut JobSpec,
    stack: &Stack,
    Seen { raw_fd, virtual_disk, sync_journal }: Seen,
    default_job: bool,
) -> Result<(), UsageError> {
    spec.engine = f.engine.unwrap_or_default().resolve(raw_fd, virtual_disk, sync_journal, spec.iodepth);
    if virtual_disk && spec.engine != Engine::Virtual {
        return Err(UsageError(format!(
            "--engine {}: {} is a simulated disk, whose requests take modeled time that only the virtual \
             engine measures; use --engine auto or virtual (--threads and --iodepth set what is in flight)",
            spec.engine,
            stack.device().name()
        )));
    }
    if spec.engine == Engine::Virtual && !virtual_disk {
        let why = if stack.origin.simulated {
            "the virtual engine drives a simulated disk alone; through the block log, the sync engine's threads \
             run in the disk's virtual time (use --engine auto)"
        } else {
            "needs a simulated disk (--target sim:hdd or sim:ssd)"
        };
        return Err(UsageError(format!("--engine virtual on {}: {why}", stack.device().name())));
    }
    if stack.origin.simulated && spec.engine == Engine::Uring {
        return Err(UsageError(format!(
            "--engine uring on {}: a simulated disk has no descriptor; use --engine auto",
            stack.device().name()
        )));
    }
    // Validation in virtual time runs each thread one request at a time.
    let one_at_a_time = spec.engine == Engine::Virtual && spec.validate.is_some();
    if matches!(spec.engine, Engine::Uring | Engine::Virtual)
        && f.iodepth.is_none()
        && default_job
        && !one_at_a_time
    {
        spec.iodepth = DEFAULT_JOB_IODEPTH;
    }
    if spec.engine == Engine::Uring && !raw_fd {
        return Err(UsageError(format!(
            "--engine uring: needs a file or block device; {} is neither (use --engine sync)",
            stack.device().name()
        )));
    }
    Ok(())
}

/// A validated job's journal goes with its target: on a simulated disk
/// of its own beside a simulated target, in a directory otherwise.
fn journal_fits(spec: &JobSpec, stack: &Stack) -> Result<(), UsageError> {
    let journal_place = spec.validate.as_ref().and_then(|v| v.journal.as_ref()).map(|j| &j.place);
    if stack.origin.simulated && matches!(journal_place, Some(workloads::journal::JournalPlace::Dir(_))) {
        return Err(UsageError(format!(
            "--journal on {}: a journal in a directory would cost no modeled time beside a simulated target; put \
             it on a simulated disk of its own (--journal sim:hdd[,...])",
            stack.device().name()
        ))
        );
    }
    if !stack.origin.simulated && matches!(journal_place, Some(workloads::journal::JournalPlace::Device(_))) {
        return Err(UsageError(format!(
            "--journal sim:...: a simulated journal disk goes with a simulated target; {} is not one",
            stack.device().name()
        )));
    }
    Ok(())
}

/// A job about to lay out holes of a target it only reads: a target
/// holding data is written only with `--force`, though zeros into its
/// holes leave it reading the same; one opened read-only is reopened
/// writable, or the job is refused with the way on.
fn check_layout(
    spec: &JobSpec,
    stack: &mut Stack,
    region: &workloads::Region,
    force: bool,
    reopen: impl Fn() -> anyhow::Result<Stack>,
) -> anyhow::Result<()> {
    let end = region.start + region.len;
    let holes = stack.device().unwritten(region.start, end)?.unwrap_or_default();
    let hole_bytes: u64 = holes.iter().map(|h| h.end - h.start).sum();
    // A job that writes passed the safety check already.
    if hole_bytes == 0 || spec.read_pct < 100 {
        return Ok(());
    }
    let name = stack.device().name().to_string();
    let never = "or pass --layout never to read the holes as they are (read figures are then marked)";
    if !force && !stack.origin.created && !stack.origin.was_empty {
        if let Some(what) = device::signature::probe(stack.device().as_ref())? {
            return Err(UsageError(format!(
                "{name}: holds data ({what}) and {hole_bytes} bytes of never-written holes in the region; laying \
                 them out writes zeros into them (the file reads the same after), unsafe while it is in use. \
                 Pass --force to lay them out, {never}"
            ))
            .into());
        }
    }
    if !stack.origin.read_only {
        return Ok(());
    }
    let writable = reopen().map_err(|e| {
        UsageError(format!(
            "{name}: {hole_bytes} bytes of the region were never written (holes) and reading them measures \
             nothing, but the file cannot be opened for writing to lay them out ({e:#}); make it writable, {never}"
        ))
    })?;
    *stack = writable;
    Ok(())
}

fn open_stack(
    f: &JobFields,
    job_name: &str,
    create_bytes: Option<u64>,
    default_job: bool,
    log: Option<&LogOptions>,
    read_only: bool,
    ranks: bool,
) -> anyhow::Result<Stack> {
    let Some(spec) = &f.target else {
        if !default_job {
            return Err(UsageError(format!(
                "--target: job '{job_name}' has no target; set target in the job, in [global] or with --target"
            ))
            .into());
        }
        let (stack, direct) = Stack::temporary(stack::DEFAULT_TARGET_BYTES)?;
        let path = stack.origin.path.as_deref().map(Path::display).map(|p| p.to_string()).unwrap_or_default();
        let how = if direct { "O_DIRECT" } else { "buffered: the file system refused O_DIRECT" };
        crate::say::info(format!("no --target given: using a temporary 1 GiB file {path} ({how})"));
        return Ok(stack);
    };
    let options = stack::OpenOptions {
        direct: f.direct.unwrap_or(false),
        read_only,
        lock: match (log, read_only) {
            (Some(_), _) => stack::Lock::Require(Exclusive),
            (None, read_only) if ranks => stack::Lock::Ranks(if read_only { Shared } else { Exclusive }),
            (None, true) => stack::Lock::Warn(Shared),
            (None, false) => stack::Lock::Warn(Exclusive),
        },
        sector_bytes: f.sector_size,
        // A new file holds the regions of the jobs on it, and the log
        // before them.
        create_bytes: create_bytes.map(|region| match log {
            Some(l) if l.log_device.is_none() => region + l.log_bytes.unwrap_or(0),
            _ => region,
        }),
    };
    let path = Path::new(spec);
    match f.nrfiles {
        _ if path.is_dir() => {
            Stack::open_directory(path, f.nrfiles.unwrap_or(1), &f.dir_file_prefix(), &options)
        }
        Some(_) => Err(UsageError(format!(
            "--nrfiles: only applies to a directory target (fio's directory=); {spec} is not a directory"
        ))
        .into()),
        None => Stack::open_or_simulate(spec, &options),
    }
}

/// `--log` and its companions; a file created for a logged job gets room
/// for the log as well.
fn log_options(f: &JobFields, spec: &JobSpec, force: bool) -> Result<Option<LogOptions>, UsageError> {
    let Some(mode) = f.log else { return Ok(None) };
    let mut log_bytes =
        f.log_size.as_deref().map(|s| workloads::spec::parse_bytes("log-size", s)).transpose()?;
    let new_file = f.target.as_deref().is_some_and(|t| !t.contains(':') && !Path::new(t).exists());
    if let (Some(size), true, None, None) = (spec.size_bytes, new_file, &f.log_device, log_bytes) {
        log_bytes = Some(blocklog::default_log_bytes(size + spec.offset_bytes));
    }
    Ok(Some(LogOptions {
        mode,
        log_bytes,
        log_device: f.log_device.clone(),
        home_writes: f.log_home.unwrap_or(blocklog::HomeWrites::AtCheckpoint),
        direct: f.direct.unwrap_or(false),
        force,
        must_exist: false,
        read_only: false,
    }))
}
