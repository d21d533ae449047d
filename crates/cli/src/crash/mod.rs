//! `iolab crash`: build a stack on recording devices, run transactions on
//! it, and check its promise on every crash state (the stacks are
//! `lab::crash`'s, the check `workloads::crash`'s and `workloads::fscrash`'s).

use std::process::ExitCode;

use blocklog::Mode;
use lab::crash::{crash_block, usage, BlockCrash, BlockStack};
use workloads::crash::{CrashReport, CrashSpec};
use workloads::spec::parse_bytes;

use crate::UsageError;

mod args;
mod bar;
mod table;

use self::args::{fs_spec, kernel_crash};
pub use self::args::{CrashArgs, Stack};

pub fn run(args: CrashArgs) -> anyhow::Result<ExitCode> {
    crate::check_destinations(args.json.as_deref(), None)?;
    if args.kernels.len() + args.stacks.len() > 1 {
        return table::run(&args);
    }
    let fs = args.stack().is_fs();
    if let Some(kernel) = args.kernels.first() {
        return run_kernel(&args, kernel);
    }
    check_disk(&args, fs)?;
    if fs {
        return run_fs(&args);
    }
    let crash = block_crash(&args)?;
    let report = crash_block(&BlockCrash { disk: args.disk.as_deref(), ..crash })?;
    let to_stdout = args.json.as_deref().is_none_or(|p| p.as_os_str() != "-");
    if to_stdout {
        print!("{}", report::crash_text(&crash_run(&args, &report), &report));
    }
    if let Some(path) = &args.json {
        let doc = report::json::CrashDocument::new(
            lab::host::wire(),
            args.stack().name(),
            args.seed,
            args.disk.as_deref(),
            &report,
        );
        crate::write_json(path, &doc.to_json())?;
    }
    Ok(crate::exit::found(report.violations > 0))
}

/// `--disk` names a simulated disk, and goes with a block stack.
fn check_disk(args: &CrashArgs, fs: bool) -> Result<(), UsageError> {
    match &args.disk {
        Some(_) if fs => Err(UsageError(format!(
            "--disk: the {} stack is crashed over recorded devices only; power cuts on simulated disks are for \
             the block stacks (log, log-separate, async, sync, raid5, raid5-log)",
            args.stack().name()
        ))),
        Some(disk) if !disk.starts_with("sim:") => {
            Err(UsageError(format!("--disk {disk}: give a simulated disk, sim:hdd[,...] or sim:ssd[,...]")))
        }
        _ => Ok(()),
    }
}

/// A block stack's crash run as the flags ask for it (its `--disk` set by
/// the caller).
fn block_crash(args: &CrashArgs) -> Result<BlockCrash<'static>, UsageError> {
    if let Some(n) = args.writers {
        return Err(UsageError(format!(
            "--writers {n}: only the fs-sync, fs-softdep, fs-log and fs-async stacks run several writers; \
             the {} stack's transactions run one after another",
            args.stack().name()
        )));
    }
    if args.archive.is_some() {
        return Err(UsageError(
            "--archive: only the fs-sync, fs-softdep, fs-log and fs-async stacks and --kernel extract archives".into(),
        ));
    }
    let data_bytes = parse_bytes("size", args.size.as_deref().unwrap_or("1m")).map_err(UsageError::from)?;
    let log_bytes = parse_bytes("log-size", &args.log_size).map_err(UsageError::from)?;
    let block_bytes = parse_bytes("block-size", &args.block_size).map_err(UsageError::from)?;
    if block_bytes == 0 || block_bytes % 512 != 0 || block_bytes > data_bytes {
        return Err(UsageError(format!(
            "--block-size: {block_bytes} must be a multiple of 512 and at most --size"
        )));
    }
    let max_blocks = max_blocks(args);
    let spec = CrashSpec {
        transactions: args.transactions,
        max_blocks,
        block_bytes,
        region_blocks: data_bytes / block_bytes,
        sync_every: args.sync_every,
        sampled_states: args.states,
        seed: args.seed,
        only_state: args.state,
    };
    let logged = |mode, separate| BlockStack::Logged { mode, separate, home: args.log_home };
    let stack = match args.stack() {
        Stack::Log => logged(Mode::Log, false),
        Stack::LogSeparate => logged(Mode::Log, true),
        Stack::Async => logged(Mode::Async, false),
        Stack::Sync => logged(Mode::Sync, false),
        Stack::Raid5 => BlockStack::Raid5 { logged: false },
        Stack::Raid5Log => BlockStack::Raid5 { logged: true },
        Stack::FsSync | Stack::FsSoftdep | Stack::FsLog | Stack::FsAsync => {
            unreachable!("file-system stacks return above")
        }
    };
    Ok(BlockCrash { stack, spec, data_bytes, log_bytes, disk: None })
}

/// What the report's heading says of the run, and the command that
/// checks its first violation again: the same flags, `--state` added.
fn crash_run<'a>(args: &'a CrashArgs, r: &CrashReport) -> report::CrashRun<'a> {
    let max_blocks = max_blocks(args);
    let recheck = r.first_violation.as_ref().map(|v| {
        format!(
            "iolab crash --stack {} --size {} --log-size {} --log-home {} --transactions {} \
             --max-blocks {} --block-size {} --sync-every {} --states {} --seed {}{} --state {}",
            args.stack().name(),
            args.size.as_deref().unwrap_or("1m"),
            args.log_size,
            args.log_home,
            args.transactions,
            max_blocks,
            args.block_size,
            args.sync_every,
            args.states,
            args.seed,
            args.disk.as_deref().map_or(String::new(), |d| format!(" --disk {d}")),
            v.state
        )
    });
    report::CrashRun {
        stack: args.stack().name(),
        block_size: &args.block_size,
        max_blocks,
        sync_every: args.sync_every,
        seed: args.seed,
        recheck,
        disk: args.disk.as_deref(),
    }
}

/// `iolab crash --stack fs-sync|fs-softdep|fs-log|fs-async`: the file system's promise.
fn run_fs(args: &CrashArgs) -> anyhow::Result<ExitCode> {
    let spec = fs_spec(args, args.stack())?;
    let report = workloads::fscrash::enumerate(&spec).map_err(usage)?;
    let archive = args.archive.as_ref().map(|p| p.display().to_string());
    // With several writers a state's number names no fixed state: the
    // report says so instead of a command.
    let recheck = report.first_violation.as_ref().filter(|_| spec.writers == 1).map(|v| {
        let workload = match &archive {
            Some(path) => format!("--archive {path}"),
            None => format!("--transactions {} --sync-every {}", args.transactions, args.sync_every),
        };
        format!(
            "iolab crash --stack {} --size {} {workload} --states {} --seed {} --state {}",
            args.stack().name(),
            args.size.as_deref().unwrap_or("8m"),
            args.states,
            args.seed,
            v.state
        )
    });
    let run = report::FsCrashRun {
        stack: args.stack().name(),
        sync_every: args.sync_every,
        seed: args.seed,
        archive: archive.as_deref(),
        writers: spec.writers,
        recheck,
    };
    if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        print!("{}", report::fs_crash_text(&run, &report));
    }
    if let Some(path) = &args.json {
        crate::write_json(
            path,
            &report::json::FsCrashDocument::new(lab::host::wire(), args.stack().name(), args.seed, &report)
                .to_json(),
        )?;
    }
    Ok(crate::exit::found(report.violations > 0))
}

fn max_blocks(args: &CrashArgs) -> u32 {
    args.max_blocks.unwrap_or(if args.stack().is_raid5() { 1 } else { 4 })
}

/// `iolab crash --kernel FS`: a kernel file system's promise.
fn run_kernel(args: &CrashArgs, kernel: &str) -> anyhow::Result<ExitCode> {
    let crash = kernel_crash(args, kernel)?;
    let fs = crash.fs;
    let bar = bar::StatesBar::new(fs.name());
    let (report, kernel_run) = lab::kernel_crash::crash_kernel(&crash, &|done, total| bar.show(done, total))?;
    bar.done();
    let archive = args.archive.as_ref().map(|p| p.display().to_string());
    let recheck = report.first_violation.as_ref().map(|v| match &args.keep_images {
        Some(dir) => format!("its image: {}", dir.join(format!("state-{}.img", v.state)).display()),
        None => "run again with --keep-images DIR to keep the images of the states that break the promise \
                 (the kernel's history differs from run to run)"
            .to_string(),
    });
    let run = report::KernelCrashRun {
        fs: fs.name(),
        mkfs: &kernel_run.mkfs,
        mount_options: &kernel_run.mount_options,
        direct_io: kernel_run.direct_io,
        sector_bytes: args.sector_size,
        drop_flushes: args.drop_flushes,
        sync_every: args.sync_every,
        seed: args.seed,
        archive: archive.as_deref(),
        record_seconds: kernel_run.record_seconds,
        check_seconds: kernel_run.check_seconds,
        recheck,
    };
    if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        print!("{}", report::kernel_crash_text(&run, &report));
    }
    if let Some(path) = &args.json {
        crate::write_json(
            path,
            &report::json::KernelCrashDocument::new(lab::host::wire(), &run, &report).to_json(),
        )?;
    }
    Ok(crate::exit::found(report.violations > 0))
}
