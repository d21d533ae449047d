//! `iolab run`: build the jobs from flags and the job file, open their
//! targets, run them (in sequence or at once, with repeats), show progress,
//! print the tables and write the JSON.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use workloads::spec::{parse_bytes, parse_duration};
use workloads::{BlockSizes, Engine, JobResult, JobSpec, Pattern, Progress, Rw, Skew};

use crate::cli::RunArgs;
use crate::jobfile::{JobFields, JobFile};
use crate::target::{self, Target};
use crate::UsageError;

/// The default job's length, when iolab makes its own target.
const DEFAULT_RUNTIME: Duration = Duration::from_secs(10);
/// The default job's depth with the uring engine.
const DEFAULT_JOB_IODEPTH: u32 = 16;

/// A job ready to run: every parameter checked against its target, the
/// target open (and, with `--log`, its log replayed or formatted), what
/// the layout will do decided. Nothing else has been written.
struct Prepared {
    spec: JobSpec,
    target: Target,
    region: workloads::Region,
    layout: LayoutPlan,
    keep_cache: bool,
}

/// What the layout will do for a job.
#[derive(Clone, Copy, Debug)]
struct LayoutPlan {
    policy: report::LayoutPolicy,
    /// Fill the region's holes before the clock (else only count them).
    write: bool,
    /// Fill with zeros: the file existed, so its contents stay as they read.
    zeros: bool,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.repeat == 0 {
        return Err(UsageError("--repeat: must be at least 1".into()).into());
    }
    let (fields, concurrent) = match &args.jobfile {
        Some(path) => {
            let file = JobFile::load(path)?;
            let jobs = file.jobs.iter().map(|job| args.job.over(&job.over(&file.global))).collect();
            (jobs, file.concurrent)
        }
        None => (vec![args.job.clone()], false),
    };
    let default_job = args.jobfile.is_none() && args.job.target.is_none();
    let specs = (fields.iter().enumerate())
        .map(|(index, f)| job_from_fields(f, index, default_job))
        .collect::<Result<Vec<_>, _>>()?;
    if concurrent {
        check_validated_regions(&fields, &specs)?;
    }
    if let Some(path) = &args.json {
        check_output("json", path, true)?;
    }
    if let Some(path) = &args.error_log {
        check_output("error-log", path, false)?;
    }
    let create_bytes = create_sizes(&fields, &specs);
    let mut jobs: Vec<Prepared> = Vec::with_capacity(fields.len());
    for ((f, spec), create) in fields.iter().zip(specs).zip(create_bytes) {
        match prepare(f, spec, create, default_job, args.force) {
            Ok(job) => jobs.push(job),
            Err(e) => {
                // Newest first: a file two jobs share was made by the first.
                jobs.into_iter().rev().for_each(|job| target::discard(job.target));
                return Err(e);
            }
        }
    }
    let interrupted = catch_interrupts()?;
    let to_stdout = args.json.as_deref().is_none_or(|p| p.as_os_str() != "-");
    let mut targets = Vec::with_capacity(jobs.len());
    for job in &jobs {
        targets.push(lay_out(job, args.quiet).map_err(|e| abandon(&jobs, e))?);
    }
    let mut runs: Vec<Vec<JobResult>> = jobs.iter().map(|_| Vec::new()).collect();
    for i in 0..args.repeat {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let results = if concurrent {
            for (job, t) in jobs.iter().zip(&targets) {
                start_cold(job, i).map_err(|e| abandon(&jobs, e))?;
                if i == 0 && to_stdout {
                    print!("{}: {}", job.spec.name, report::target_lines(t));
                }
            }
            run_together(&jobs, args.quiet, i, args.repeat, &interrupted).map_err(|e| abandon(&jobs, e))?
        } else {
            let mut results = Vec::with_capacity(jobs.len());
            for (job, t) in jobs.iter().zip(&targets) {
                if interrupted.load(Ordering::Relaxed) && !results.is_empty() {
                    break;
                }
                start_cold(job, i).map_err(|e| abandon(&jobs, e))?;
                if i == 0 && to_stdout {
                    print!("{}", report::target_lines(t));
                }
                let one = std::slice::from_ref(job);
                let mut result = run_together(one, args.quiet, i, args.repeat, &interrupted)
                    .map_err(|e| abandon(&jobs, e))?;
                results.push(result.remove(0));
            }
            results
        };
        for ((all, mut result), t) in runs.iter_mut().zip(results).zip(&targets) {
            result.reads_from_unwritten = t.reads_from_unwritten();
            if to_stdout {
                print!("{}", report::run_table(&result));
                if let Some(v) = &result.validation {
                    print!("{}", report::validation_summary(v));
                }
            }
            all.push(result);
        }
    }
    let reports: Vec<report::JobReport> = jobs
        .iter()
        .zip(runs)
        .zip(targets)
        .map(|((job, runs), target)| report::JobReport {
            name: job.spec.name.clone(),
            target,
            summary: report::summarize(&runs),
            runs,
            volume: job.target.volumes.as_ref().map(|(_, v)| v.report()),
            log: job
                .target
                .log
                .as_ref()
                .map(|l| report::LogReport { mode: l.mode(), counters: l.log_stats() }),
        })
        .collect();
    if args.repeat > 1 && to_stdout {
        for r in &reports {
            if let Some(summary) = &r.summary {
                print!("{}: {}", r.name, report::repeat_table(summary));
            }
        }
    }
    let validation_errors: Vec<&workloads::ValidationError> = reports
        .iter()
        .flat_map(|r| &r.runs)
        .filter_map(|run| run.validation.as_ref())
        .flat_map(|v| &v.error_list)
        .collect();
    let bad_blocks: u64 = reports
        .iter()
        .flat_map(|r| &r.runs)
        .filter_map(|run| run.validation.as_ref())
        .map(|v| v.errors)
        .sum();
    if let Some(path) = &args.error_log {
        let text = serde_json::to_string_pretty(&validation_errors)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("{}: cannot write the error log", path.display()))?;
    }
    if let Some(path) = &args.json {
        crate::write_json(path, &report::RunDocument::new(env!("CARGO_PKG_VERSION"), reports).to_json())?;
    }
    for job in &jobs {
        if let Some(log) = &job.target.log {
            // A clean end, as an unmount: everything committed and home.
            log.checkpoint().with_context(|| {
                format!("{}: cannot checkpoint the block log", device::Device::name(log.as_ref()))
            })?;
            if to_stdout {
                let counters = log.log_stats();
                print!("{}", report::log_line(&report::LogReport { mode: log.mode(), counters }));
            }
        }
        if let Some((_, vol)) = &job.target.volumes {
            if to_stdout {
                print!("{}", report::volume_list(&[vol.report()], true));
            }
        }
        // Record any state change (a drive that failed during the run) and
        // add the job's counters to those on the drives.
        target::finish(&job.target)?;
    }
    for job in jobs {
        remove_temporary(job.target)?;
    }
    if interrupted.load(Ordering::Relaxed) {
        eprintln!("iolab: interrupted: the results above cover the time before the interrupt");
        return Ok(ExitCode::from(130));
    }
    if bad_blocks > 0 {
        eprintln!("iolab: validation found {bad_blocks} bad block(s)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Jobs run at the same time must not write where another validates: a
/// validated job's key map reports any write it did not make as damage
/// (another run's stamps, or data that is no stamp). Checked before any
/// target is opened or created; targets are compared by their canonical
/// paths (a file still to be created, by its directory's).
fn check_validated_regions(fields: &[JobFields], specs: &[JobSpec]) -> Result<(), UsageError> {
    let place = |f: &JobFields, spec: &JobSpec| {
        let path = target_identity(f.target.as_deref()?)?;
        let end = spec.size_bytes.map_or(u64::MAX, |len| spec.offset_bytes.saturating_add(len));
        Some((path, spec.offset_bytes, end))
    };
    let jobs: Vec<_> = fields.iter().zip(specs).map(|(f, spec)| (spec, place(f, spec))).collect();
    for (i, (a, a_place)) in jobs.iter().enumerate() {
        for (b, b_place) in &jobs[i + 1..] {
            let (checker, writer) = match (&a.validate, &b.validate) {
                (Some(_), _) if b.read_pct < 100 => (a, b),
                (_, Some(_)) if a.read_pct < 100 => (b, a),
                _ => continue,
            };
            let (Some((path, a_start, a_end)), Some((other, b_start, b_end))) = (a_place, b_place) else {
                continue;
            };
            if path == other && a_start < b_end && b_start < a_end {
                return Err(UsageError(format!(
                    "jobs '{}' and '{}' run at the same time on the same bytes of {}, and '{}' validates \
                     them: it would report '{}''s writes as damage; give the jobs disjoint regions \
                     (offset, size) or run them one after the other (concurrent = false)",
                    a.name,
                    b.name,
                    path.display(),
                    checker.name,
                    writer.name
                )));
            }
        }
    }
    Ok(())
}

/// The canonical path of a target (a file, a device or a volume
/// configuration), or of the file it would create; None for `mem:` and
/// `null:` targets, each its own.
fn target_identity(target: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(target);
    if let Ok(path) = std::fs::canonicalize(path) {
        return Some(path);
    }
    if target.contains(':') {
        return None;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    Some(std::fs::canonicalize(dir).ok()?.join(path.file_name()?))
}

/// A run failed: still record on each volume target the state changes it
/// caused (a subdisk that failed) and the counters of the requests that
/// did run, then pass the failure on.
fn abandon(jobs: &[Prepared], err: anyhow::Error) -> anyhow::Error {
    for job in jobs {
        if let Err(also) = target::finish(&job.target) {
            eprintln!("iolab: warning: could not record the volume's states and counters: {also:#}");
        }
    }
    err
}

/// The first Ctrl-C (or SIGTERM) stops the jobs cleanly, so results are
/// reported and temporary targets removed; a second one kills at once.
fn catch_interrupts() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_default(signal, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&flag)))
            .context("cannot install the interrupt handler")?;
    }
    Ok(flag)
}

/// The size a job's target file is created with when missing: the end of
/// the furthest region any job gives that file, so that the first job to
/// open it makes room for the others.
fn create_sizes(fields: &[JobFields], specs: &[JobSpec]) -> Vec<Option<u64>> {
    let ids: Vec<_> = fields.iter().map(|f| f.target.as_deref().and_then(target_identity)).collect();
    let end = |spec: &JobSpec| spec.size_bytes.map(|len| len.saturating_add(spec.offset_bytes));
    (ids.iter().zip(specs))
        .map(|(id, spec)| match id {
            Some(id) => (ids.iter().zip(specs))
                .filter(|(other, _)| other.as_ref() == Some(id))
                .filter_map(|(_, s)| end(s))
                .max(),
            None => end(spec),
        })
        .collect()
}

fn prepare(
    f: &JobFields,
    spec: JobSpec,
    create_bytes: Option<u64>,
    default_job: bool,
    force: bool,
) -> anyhow::Result<Prepared> {
    let mut log = log_options(f, force)?;
    if let (Some(l), Some(size), Some(path)) = (log.as_mut(), spec.size_bytes, f.target.as_deref()) {
        // A file created for a logged job gets room for the log as well.
        let new_file = !path.contains(':') && !std::path::Path::new(path).exists();
        if new_file && l.log_device.is_none() && l.log_bytes.is_none() {
            l.log_bytes = Some(blocklog::default_log_bytes(size + spec.offset_bytes));
        }
    }
    let policy = layout_policy(f.layout.as_deref())?;
    let keep_cache = f.keep_cache.unwrap_or(false);
    // A job that only reads opens its target read-only, so read-only files
    // and devices can be measured; the layout reopens it if it must write.
    let read_only = spec.read_pct == 100 && log.is_none();
    let name = spec.name.clone();
    let mut target = open_target(f, &name, create_bytes, default_job, log.as_ref(), read_only)?;
    let how = How { policy, force, default_job };
    let checked = check_job(f, spec, &mut target, log.as_ref(), how, || {
        open_target(f, &name, create_bytes, default_job, None, false)
    });
    let (spec, region, layout, plan) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            target::discard(target);
            return Err(e);
        }
    };
    if let (Some(plan), Some(options)) = (plan, &log) {
        target = target::add_log(target, plan, options)?;
    }
    if let Some((_, vol)) = &target.volumes {
        // The counters show the job's requests alone, not the safety probe.
        vol.reset_stats();
    }
    Ok(Prepared { spec, target, region, layout, keep_cache })
}

/// The run-wide choices a job is checked with.
#[derive(Clone, Copy)]
struct How {
    policy: report::LayoutPolicy,
    force: bool,
    default_job: bool,
}

/// Every check a job must pass before anything is written to its target:
/// the log it would run through (planned, not formatted), the engine, the
/// parameters against the geometry it will run on, the safety check of a
/// job that writes, and whether the layout may write. `reopen` opens the
/// target read-write when a read-only job's region needs laying out.
fn check_job(
    f: &JobFields,
    mut spec: JobSpec,
    target: &mut Target,
    log: Option<&target::LogOptions>,
    how: How,
    reopen: impl Fn() -> anyhow::Result<Target>,
) -> anyhow::Result<(JobSpec, workloads::Region, LayoutPlan, Option<target::LogPlan>)> {
    let How { policy, force, default_job } = how;
    let plan = log.map(|options| target::plan_log(target, options)).transpose()?;
    let (size, sector) = match &plan {
        Some(p) => (p.data_bytes, p.sector_bytes),
        None => (target.device.size_bytes(), target.device.sector_bytes()),
    };
    let sync_journal = spec
        .validate
        .as_ref()
        .and_then(|v| v.journal.as_ref())
        .is_some_and(|j| j.mode == workloads::journal::JournalMode::Sync);
    let raw_fd = plan.is_none() && target.device.raw_fd().is_some();
    spec.engine = resolve_engine(f.engine.as_deref(), raw_fd, sync_journal)?;
    if f.journal_commit.as_deref() == Some("ring") && spec.engine == Engine::Sync && f.engine.is_some() {
        return Err(UsageError(
            "--journal-commit ring: commits through the uring engine's rings; use --engine uring or auto"
                .into(),
        )
        .into());
    }
    if spec.engine == Engine::Uring && f.iodepth.is_none() && default_job {
        spec.iodepth = DEFAULT_JOB_IODEPTH;
    }
    if spec.engine == Engine::Uring && !raw_fd {
        return Err(UsageError(format!(
            "--engine uring: needs a file or block device; {} is neither (use --engine sync)",
            target.device.name()
        ))
        .into());
    }
    let region = spec.region(size, u64::from(sector)).map_err(UsageError::from)?;
    if let Some(workloads::journal::JournalPlace::Dir(dir)) =
        spec.validate.as_ref().and_then(|v| v.journal.as_ref()).map(|j| &j.place)
    {
        workloads::journal::check_dir(dir).map_err(|e| UsageError(format!("--journal: {e}")))?;
    }
    if spec.read_pct < 100 {
        target::check_writable(target, force)?;
    }
    let wanted = match policy {
        report::LayoutPolicy::Auto => spec.read_pct > 0,
        report::LayoutPolicy::Always => true,
        report::LayoutPolicy::Never => false,
    };
    let fresh = target.created || target.was_empty;
    let layout = LayoutPlan { policy, write: wanted, zeros: !fresh };
    if wanted && plan.is_none() {
        check_layout(&spec, target, &region, force, reopen)?;
    }
    Ok((spec, region, layout, plan))
}

/// A job about to lay out holes of a target it only reads: the target must
/// be writable (reopened so), and a file holding data is written only with
/// `--force`, though zeros into its holes leave its contents as they read.
fn check_layout(
    spec: &JobSpec,
    target: &mut Target,
    region: &workloads::Region,
    force: bool,
    reopen: impl Fn() -> anyhow::Result<Target>,
) -> anyhow::Result<()> {
    let end = region.start + region.len;
    let holes = target.device.unwritten(region.start, end)?.unwrap_or_default();
    let hole_bytes: u64 = holes.iter().map(|h| h.end - h.start).sum();
    // A job that writes passed the safety check already.
    if hole_bytes == 0 || spec.read_pct < 100 {
        return Ok(());
    }
    let name = target.device.name().to_string();
    let never = "or pass --layout never to read the holes as they are (read figures are then marked)";
    if !force && !target.created && !target.was_empty {
        if let Some(what) = device::signature::probe(target.device.as_ref())? {
            return Err(UsageError(format!(
                "{name}: holds data ({what}) and {hole_bytes} bytes of never-written holes in the region; laying \
                 them out writes zeros into them (the file reads the same after), unsafe while it is in use. \
                 Pass --force to lay them out, {never}"
            ))
            .into());
        }
    }
    if !target.read_only {
        return Ok(());
    }
    let writable = reopen().map_err(|e| {
        UsageError(format!(
            "{name}: {hole_bytes} bytes of the region were never written (holes) and reading them measures \
             nothing, but the file cannot be opened for writing to lay them out ({e:#}); make it writable, {never}"
        ))
    })?;
    *target = writable;
    Ok(())
}

fn layout_policy(text: Option<&str>) -> Result<report::LayoutPolicy, UsageError> {
    Ok(match text.unwrap_or("auto") {
        "auto" => report::LayoutPolicy::Auto,
        "always" => report::LayoutPolicy::Always,
        "never" => report::LayoutPolicy::Never,
        other => {
            return Err(UsageError(format!("--layout: '{other}' is not a choice; use auto, always or never")))
        }
    })
}

/// Checks before the run that a result file can be written: its directory
/// exists and it is not a directory itself. `-` is standard output.
fn check_output(flag: &str, path: &std::path::Path, stdout_ok: bool) -> Result<(), UsageError> {
    if stdout_ok && path.as_os_str() == "-" {
        return Ok(());
    }
    if path.is_dir() {
        return Err(UsageError(format!("--{flag}: {} is a directory; give a file name", path.display())));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "--{flag}: {}: the directory {} does not exist; create it or give another path",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// Lays out a job's region (or only counts its holes) and builds what the
/// report says of the target. A progress bar on a terminal; the outcome is
/// in the target lines.
fn lay_out(job: &Prepared, quiet: bool) -> anyhow::Result<report::TargetReport> {
    let device = job.target.device.as_ref();
    let range = job.region.start..job.region.start + job.region.len;
    let pattern = if job.layout.zeros { Pattern::Zeros } else { job.spec.pattern };
    let bar = (!quiet && job.layout.write && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "laying out {prefix} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} ETA {eta}",
        ) {
            bar.set_style(style);
        }
        bar.set_prefix(job.spec.name.clone());
        bar
    });
    let on_progress = |done: u64, total: u64| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let report =
        workloads::layout::lay_out(device, range, pattern, job.spec.seed, job.layout.write, &on_progress)
            .with_context(|| format!("{}: cannot lay out the job's region", device.name()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let state = report::LayoutState {
        policy: job.layout.policy,
        wanted: job.layout.write,
        zeros: job.layout.zeros,
        report,
    };
    // The media as the first run finds them: after the layout, cache dropped.
    start_cold(job, 0)?;
    Ok(report::TargetReport::new(device.name().to_string(), device.media(), job.keep_cache, state))
}

/// Lays out `range` of a device a sweep reads (and writes anyway) with
/// random data, so that its reads never measure holes; says so on stderr.
pub(crate) fn lay_out_for_sweep(
    device: &dyn device::Device,
    range: std::ops::Range<u64>,
) -> anyhow::Result<()> {
    let report = workloads::layout::lay_out(device, range, Pattern::Random, 1, true, &|_, _| {})
        .with_context(|| format!("{}: cannot lay out the region the sweep reads", device.name()))?;
    if report.laid_out_bytes > 0 {
        eprintln!(
            "iolab sweep: laid out {} MiB of holes in {} in {:.1} s, so that reads measure the disk",
            report.laid_out_bytes >> 20,
            device.name(),
            report.seconds
        );
    }
    Ok(())
}

/// Before each run: the target's pages out of the page cache, as fio's
/// invalidate=1, unless `--keep-cache`. (Run 0's drop follows the layout.)
fn start_cold(job: &Prepared, _run: u32) -> anyhow::Result<()> {
    if job.keep_cache {
        return Ok(());
    }
    job.target
        .device
        .drop_cache()
        .with_context(|| format!("{}: cannot drop its pages from the page cache", job.target.device.name()))
}

fn remove_temporary(target: Target) -> anyhow::Result<()> {
    if let Some(temp) = target.temp {
        let where_ = temp.path().display().to_string();
        drop(target.device);
        temp.close().with_context(|| format!("{where_}: cannot remove the temporary target"))?;
        eprintln!("the temporary target in {where_} has been removed");
    }
    Ok(())
}

fn job_from_fields(f: &JobFields, index: usize, default_job: bool) -> Result<JobSpec, UsageError> {
    let rw = match &f.rw {
        Some(rw) => Rw::parse(rw)?,
        None => Rw::RandRw,
    };
    let bs = match &f.bs {
        Some(bs) => BlockSizes::parse(bs)?,
        None if default_job => BlockSizes::parse("fs")?,
        None => BlockSizes::Fixed(4096),
    };
    let read_pct = match (f.rwmixread, rw.is_mixed()) {
        (Some(pct), true) => pct,
        (Some(_), false) => {
            return Err(UsageError(format!("--rwmixread: only applies to rw and randrw, not {rw}")));
        }
        (None, true) => 70,
        (None, false) => rw.default_read_pct(),
    };
    let bytes = |flag, v: &Option<String>| v.as_deref().map(|t| parse_bytes(flag, t)).transpose();
    let time = |flag, v: &Option<String>| v.as_deref().map(|t| parse_duration(flag, t)).transpose();
    let mut runtime = time("runtime", &f.runtime)?;
    if default_job && runtime.is_none() && f.ios.is_none() && f.io_size.is_none() {
        runtime = Some(DEFAULT_RUNTIME);
    }
    let name = match &f.name {
        Some(name) => name.clone(),
        None if default_job => "default".into(),
        None => format!("job{}", index + 1),
    };
    Ok(JobSpec {
        name,
        offset_bytes: bytes("offset", &f.offset)?.unwrap_or(0),
        size_bytes: bytes("size", &f.size)?,
        rw,
        read_pct,
        seek_pct: f.seekpct.unwrap_or(rw.default_seek_pct()),
        skew: Skew::parse(f.skew.as_deref().unwrap_or("uniform"))?,
        bs,
        align_bytes: bytes("bsalign", &f.bsalign)?,
        threads: f.threads.unwrap_or(1),
        iodepth: f.iodepth.unwrap_or(1),
        submit_batch: f.iodepth_batch.unwrap_or(1),
        engine: Engine::Sync,
        flush_every: f.flush_every.unwrap_or(0),
        end_flush: f.end_flush.unwrap_or(false),
        runtime,
        io_bytes: bytes("io-size", &f.io_size)?,
        ios: f.ios,
        ramp: time("ramp", &f.ramp)?.unwrap_or(Duration::ZERO),
        rate_iops: f.rate_iops.unwrap_or(0),
        pattern: Pattern::parse(f.pattern.as_deref().unwrap_or("random"))?,
        seed: f.seed.unwrap_or(1),
        validate: validate_spec(f)?,
    })
}

fn validate_spec(f: &JobFields) -> Result<Option<workloads::ValidateSpec>, UsageError> {
    let validate = f.validate.unwrap_or(false);
    let needs = [
        ("no-preread", f.no_preread.is_some()),
        ("reread", f.reread.is_some()),
        ("max-errors", f.max_errors.is_some()),
        ("key-map", f.key_map.is_some()),
        ("key-map-dir", f.key_map_dir.is_some()),
        ("journal", f.journal.is_some()),
    ];
    if let Some((flag, _)) = needs.iter().find(|(_, given)| *given && !validate) {
        return Err(UsageError(format!("--{flag}: only applies with --validate")));
    }
    if f.max_errors == Some(0) {
        return Err(UsageError("--max-errors: must be at least 1".into()));
    }
    use workloads::journal::JournalMode;
    let mode = match f.journal_mode.as_deref().unwrap_or("group") {
        "group" => JournalMode::Group,
        "sync" => JournalMode::Sync,
        "async" => JournalMode::Async,
        other => {
            return Err(UsageError(format!(
                "--journal-mode: '{other}' is not a mode; use group, sync or async"
            )))
        }
    };
    if f.journal_mode.is_some() && f.journal.is_none() {
        return Err(UsageError("--journal-mode: only applies with --journal DIR".into()));
    }
    let ring = match f.journal_commit.as_deref() {
        None | Some("thread") => false,
        Some("ring") => true,
        Some(other) => {
            return Err(UsageError(format!(
                "--journal-commit: '{other}' is not a way to commit; use thread or ring"
            )))
        }
    };
    if f.journal_commit.is_some() && (f.journal.is_none() || mode != JournalMode::Group) {
        return Err(UsageError("--journal-commit: only applies with --journal DIR in group mode".into()));
    }
    let key_map = key_map_spec(f.key_map.as_deref(), f.key_map_dir.as_deref())?;
    Ok(validate.then(|| workloads::ValidateSpec {
        preread: !f.no_preread.unwrap_or(false),
        reread: f.reread.unwrap_or(false),
        max_errors: f.max_errors.unwrap_or(50),
        run_id: run_id(),
        journal: f.journal.clone().map(|dir| workloads::journal::JournalSpec {
            mode,
            place: workloads::journal::JournalPlace::Dir(dir),
            ring,
        }),
        key_map,
    }))
}

/// Where key maps live, from `--key-map` and `--key-map-dir`. A directory
/// given is tried at once (a scratch file created, mapped and dropped), so
/// a bad one is a usage error before anything runs.
pub(crate) fn key_map_spec(
    choice: Option<&str>,
    dir: Option<&std::path::Path>,
) -> Result<workloads::KeyMapSpec, UsageError> {
    use validation::{KeyBytes, KeyMapChoice, KeyPlace};
    let choice = match choice.unwrap_or("auto") {
        "auto" => KeyMapChoice::Auto,
        "memory" => KeyMapChoice::Memory,
        "file" => KeyMapChoice::File,
        other => {
            return Err(UsageError(format!("--key-map: '{other}' is not a choice; use auto, memory or file")))
        }
    };
    if let Some(dir) = dir {
        if choice == KeyMapChoice::Memory {
            return Err(UsageError("--key-map-dir: only applies with --key-map auto or file".into()));
        }
        KeyBytes::zeroed(4096, &KeyPlace::File(dir.to_path_buf())).map_err(|e| {
            UsageError(format!(
                "--key-map-dir: {}: cannot {} a scratch file there ({}); give an existing directory \
                 you can write to, or use --key-map memory",
                dir.display(),
                e.what,
                e.source
            ))
        })?;
    }
    Ok(workloads::KeyMapSpec { choice, dir: dir.map(|d| d.to_path_buf()) })
}

/// A run identifier that differs between runs.
pub(crate) fn run_id() -> u64 {
    codec::fresh_id()
}

fn open_target(
    f: &JobFields,
    job_name: &str,
    create_bytes: Option<u64>,
    default_job: bool,
    log: Option<&target::LogOptions>,
    read_only: bool,
) -> anyhow::Result<Target> {
    if let Some(size) = f.sector_size {
        if size != 512 && size != 4096 {
            return Err(UsageError(format!("--sector-size: {size} is not supported; use 512 or 4096")).into());
        }
    }
    match &f.target {
        Some(spec) => {
            use device::LockKind::{Exclusive, Shared};
            let options = target::OpenOptions {
                direct: f.direct.unwrap_or(false),
                read_only,
                lock: match (log, read_only) {
                    (Some(_), _) => target::Lock::Require(Exclusive),
                    (None, true) => target::Lock::Warn(Shared),
                    (None, false) => target::Lock::Warn(Exclusive),
                },
                sector_bytes: f.sector_size,
                // A new file holds the regions of the jobs on it, and the
                // log before them.
                create_bytes: create_bytes.map(|region| match log {
                    Some(l) if l.log_device.is_none() => region + l.log_bytes.unwrap_or(0),
                    _ => region,
                }),
            };
            target::open(spec, &options)
        }
        None if !default_job => Err(UsageError(format!(
            "--target: job '{job_name}' has no target; set target in the job, in [global] or with --target"
        ))
        .into()),
        None => {
            let (t, direct) = target::temporary(target::DEFAULT_TARGET_BYTES)?;
            let path = t.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
            let how = if direct { "O_DIRECT" } else { "buffered: the file system refused O_DIRECT" };
            eprintln!("iolab: no --target given: using a temporary 1 GiB file {path} ({how})");
            Ok(t)
        }
    }
}

fn log_options(f: &JobFields, force: bool) -> Result<Option<target::LogOptions>, UsageError> {
    let Some(mode) = &f.log else {
        if f.log_size.is_some() || f.log_device.is_some() || f.log_home.is_some() {
            return Err(UsageError(
                "--log-size, --log-device and --log-home only apply with --log MODE".into(),
            ));
        }
        return Ok(None);
    };
    let mode = match mode.as_str() {
        "log" => blocklog::Mode::Log,
        "async" => blocklog::Mode::Async,
        "sync" => blocklog::Mode::Sync,
        other => return Err(UsageError(format!("--log: '{other}' is not a mode; use log, async or sync"))),
    };
    let log_bytes = f.log_size.as_deref().map(|s| parse_bytes("log-size", s)).transpose()?;
    let home_writes = match f.log_home.as_deref().unwrap_or("checkpoint") {
        "checkpoint" => blocklog::HomeWrites::AtCheckpoint,
        "commit" => blocklog::HomeWrites::AfterCommit,
        other => {
            return Err(UsageError(format!(
                "--log-home: '{other}' is not a choice; use checkpoint or commit"
            )))
        }
    };
    Ok(Some(target::LogOptions {
        mode,
        log_bytes,
        log_device: f.log_device.clone(),
        home_writes,
        direct: f.direct.unwrap_or(false),
        force,
        must_exist: false,
    }))
}

/// `auto`: io_uring on files and block devices, except under a `sync`
/// validation journal, where each write waits for two journal flushes and
/// the sync engine's threads wait in parallel (docs/PERFORMANCE.md).
pub(crate) fn resolve_engine(
    arg: Option<&str>,
    raw_fd: bool,
    sync_journal: bool,
) -> Result<Engine, UsageError> {
    Ok(match arg.unwrap_or("auto") {
        "sync" => Engine::Sync,
        "uring" => Engine::Uring,
        "auto" if sync_journal => Engine::Sync,
        "auto" if raw_fd && workloads::uring_available() => Engine::Uring,
        "auto" => Engine::Sync,
        other => {
            return Err(UsageError(format!("--engine: '{other}' is not an engine; use auto, sync or uring")))
        }
    })
}

/// Runs `jobs` at the same time (one job: just that one), with a live
/// progress line on a terminal.
fn run_together(
    jobs: &[Prepared],
    quiet: bool,
    index: u32,
    repeats: u32,
    interrupted: &AtomicBool,
) -> anyhow::Result<Vec<JobResult>> {
    let progress: Vec<Progress> = jobs.iter().map(|_| Progress::default()).collect();
    let show = !quiet && std::io::stderr().is_terminal();
    let done = AtomicBool::new(false);
    let results = std::thread::scope(|scope| {
        let display =
            show.then(|| scope.spawn(|| show_progress(&jobs[0].spec, &progress, &done, index, repeats)));
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if interrupted.load(Ordering::Relaxed) {
                    progress.iter().for_each(Progress::request_stop);
                }
                std::thread::park_timeout(Duration::from_millis(50));
            }
        });
        let handles: Vec<_> = jobs
            .iter()
            .zip(&progress)
            .map(|(job, p)| {
                scope.spawn(move || workloads::run_job(&job.spec, Arc::clone(&job.target.device), p))
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Relaxed);
        if let Some(handle) = display {
            let _ = handle.join();
        }
        results
    });
    let mut out = Vec::with_capacity(results.len());
    for result in results {
        let result = result.map_err(|_| anyhow::anyhow!("a job thread panicked"))?;
        out.push(result?);
    }
    Ok(out)
}

fn show_progress(job: &JobSpec, progress: &[Progress], done: &AtomicBool, index: u32, repeats: u32) {
    use indicatif::{ProgressBar, ProgressStyle};
    let total = job.runtime.map(|r| (r + job.ramp).as_millis() as u64);
    let bar = match total {
        Some(ms) => ProgressBar::new(ms),
        None => ProgressBar::new_spinner(),
    };
    let style = if total.is_some() {
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:30} ETA {eta} {msg}")
    } else {
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {spinner} {msg}")
    };
    if let Ok(style) = style {
        bar.set_style(style);
    }
    let prefix = if repeats > 1 { format!("run {}/{}", index + 1, repeats) } else { job.name.clone() };
    bar.set_prefix(prefix);
    let start = Instant::now();
    let snapshot = || {
        progress.iter().map(|p| p.snapshot()).fold(
            workloads::ProgressSnapshot { measuring: true, ..Default::default() },
            |a, s| workloads::ProgressSnapshot {
                ios: a.ios + s.ios,
                bytes: a.bytes + s.bytes,
                measuring: a.measuring && s.measuring,
            },
        )
    };
    let mut last = (start, snapshot());
    while !done.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(250));
        let now = Instant::now();
        let snap = snapshot();
        let secs = (now - last.0).as_secs_f64();
        if secs >= 0.5 {
            let iops = (snap.ios - last.1.ios) as f64 / secs;
            let mibs = (snap.bytes - last.1.bytes) as f64 / secs / 1048576.0;
            let phase = if snap.measuring { "" } else { " (warm-up)" };
            bar.set_message(format!("{iops:.0} IOPS {mibs:.1} MiB/s{phase}"));
            last = (now, snap);
        }
        if total.is_some() {
            bar.set_position((now - start).as_millis() as u64);
        } else {
            bar.tick();
        }
    }
    bar.finish_and_clear();
}
