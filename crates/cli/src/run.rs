//! `iolab run`: build the job from flags, open the target, run it (with
//! repeats), show progress, print the table and write the JSON.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use workloads::spec::{parse_bytes, parse_duration};
use workloads::{BlockSizes, Engine, JobResult, JobSpec, Pattern, Progress, Rw, Skew};

use crate::cli::{EngineArg, RunArgs};
use crate::target::{self, Target};
use crate::UsageError;

/// The default job's length, when iolab makes its own target.
const DEFAULT_RUNTIME: Duration = Duration::from_secs(10);
/// The default job's depth with the uring engine.
const DEFAULT_JOB_IODEPTH: u32 = 16;

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.repeat == 0 {
        return Err(UsageError("--repeat: must be at least 1".into()).into());
    }
    let default_job = args.target.is_none();
    let mut job = job_from_args(&args, default_job)?;
    let (target, note) = open_target(&args, &job)?;
    job.engine = resolve_engine(args.engine, target.device.as_ref());
    if job.engine == Engine::Uring && args.iodepth.is_none() && default_job {
        job.iodepth = DEFAULT_JOB_IODEPTH;
    }
    job.check().map_err(UsageError::from)?;
    if job.read_pct < 100 {
        target::check_writable(&target, args.force)?;
    }
    if let Some(note) = note {
        eprintln!("{note}");
    }
    let mut runs = Vec::with_capacity(args.repeat as usize);
    for i in 0..args.repeat {
        let result = run_once(&job, &target, args.quiet, i, args.repeat)?;
        if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
            print!("{}", report::run_table(&result));
        }
        runs.push(result);
    }
    let summary = report::summarize(&runs);
    if args.repeat > 1 && args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        if let Some(summary) = &summary {
            print!("{}", report::repeat_table(summary));
        }
    }
    if let Some(path) = &args.json {
        let jobs = vec![report::JobReport { name: job.name.clone(), runs, summary }];
        let doc = report::RunDocument::new(env!("CARGO_PKG_VERSION"), jobs).to_json();
        if path.as_os_str() == "-" {
            println!("{doc}");
        } else {
            std::fs::write(path, doc + "\n")
                .with_context(|| format!("{}: cannot write the JSON results", path.display()))?;
        }
    }
    if let Some(temp) = target.temp {
        let where_ = temp.path().display().to_string();
        drop(target.device);
        temp.close().with_context(|| format!("{where_}: cannot remove the temporary target"))?;
        eprintln!("the temporary target in {where_} has been removed");
    }
    Ok(ExitCode::SUCCESS)
}

fn job_from_args(args: &RunArgs, default_job: bool) -> Result<JobSpec, UsageError> {
    let rw = match &args.rw {
        Some(rw) => Rw::parse(rw)?,
        None => Rw::RandRw,
    };
    let bs = match &args.bs {
        Some(bs) => BlockSizes::parse(bs)?,
        None if default_job => BlockSizes::parse("fs")?,
        None => BlockSizes::Fixed(4096),
    };
    let read_pct = match (args.rwmixread, rw.is_mixed()) {
        (Some(pct), true) => pct,
        (Some(_), false) => {
            return Err(UsageError(format!("--rwmixread: only applies to rw and randrw, not {rw}")));
        }
        (None, true) if default_job || args.rw.is_none() => 70,
        (None, _) => rw.default_read_pct(),
    };
    let opt_bytes = |flag, v: &Option<String>| v.as_deref().map(|t| parse_bytes(flag, t)).transpose();
    let opt_time = |flag, v: &Option<String>| v.as_deref().map(|t| parse_duration(flag, t)).transpose();
    let mut runtime = opt_time("runtime", &args.runtime)?;
    if default_job && runtime.is_none() && args.ios.is_none() && args.io_size.is_none() {
        runtime = Some(DEFAULT_RUNTIME);
    }
    Ok(JobSpec {
        name: args.name.clone().unwrap_or_else(|| if default_job { "default".into() } else { "job".into() }),
        offset_bytes: opt_bytes("offset", &args.offset)?.unwrap_or(0),
        size_bytes: opt_bytes("size", &args.size)?,
        rw,
        read_pct,
        seek_pct: args.seekpct.unwrap_or(rw.default_seek_pct()),
        skew: Skew::parse(&args.skew)?,
        bs,
        align_bytes: opt_bytes("bsalign", &args.bsalign)?,
        threads: args.threads,
        iodepth: args.iodepth.unwrap_or(1),
        engine: Engine::Sync,
        flush_every: args.flush_every,
        end_flush: args.end_flush,
        runtime,
        io_bytes: opt_bytes("io-size", &args.io_size)?,
        ios: args.ios,
        ramp: opt_time("ramp", &args.ramp)?.unwrap_or(Duration::ZERO),
        rate_iops: args.rate_iops,
        pattern: Pattern::parse(&args.pattern)?,
        seed: args.seed,
    })
}

fn open_target(args: &RunArgs, job: &JobSpec) -> anyhow::Result<(Target, Option<String>)> {
    if let Some(size) = args.sector_size {
        if size != 512 && size != 4096 {
            return Err(UsageError(format!("--sector-size: {size} is not supported; use 512 or 4096")).into());
        }
    }
    match &args.target {
        Some(spec) => {
            let options = target::OpenOptions {
                direct: args.direct,
                sector_bytes: args.sector_size,
                create_bytes: job.size_bytes.map(|s| s + job.offset_bytes),
            };
            Ok((target::open(spec, &options)?, None))
        }
        None => {
            let (t, direct) = target::temporary(target::DEFAULT_TARGET_BYTES)?;
            let path = t.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
            let how = if direct { "O_DIRECT" } else { "buffered: the file system refused O_DIRECT" };
            Ok((
                t,
                Some(format!("iolab: no --target given: using a temporary sparse 1 GiB file {path} ({how})")),
            ))
        }
    }
}

fn resolve_engine(arg: EngineArg, device: &dyn device::Device) -> Engine {
    match arg {
        EngineArg::Sync => Engine::Sync,
        EngineArg::Uring => Engine::Uring,
        EngineArg::Auto if device.raw_fd().is_some() && workloads::uring_available() => Engine::Uring,
        EngineArg::Auto => Engine::Sync,
    }
}

/// One run with a live progress line on a terminal.
fn run_once(
    job: &JobSpec,
    target: &Target,
    quiet: bool,
    index: u32,
    repeats: u32,
) -> anyhow::Result<JobResult> {
    let progress = Progress::default();
    let show = !quiet && std::io::stderr().is_terminal();
    let device = Arc::clone(&target.device);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let display = show.then(|| scope.spawn(|| show_progress(job, &progress, &done, index, repeats)));
        let result = workloads::run_job(job, device, &progress);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(handle) = display {
            let _ = handle.join();
        }
        Ok(result?)
    })
}

fn show_progress(
    job: &JobSpec,
    progress: &Progress,
    done: &std::sync::atomic::AtomicBool,
    index: u32,
    repeats: u32,
) {
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
    let mut last = (start, progress.snapshot());
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(250));
        let now = Instant::now();
        let snap = progress.snapshot();
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
