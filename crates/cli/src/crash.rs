//! `iolab crash`: build a stack on recording devices, run transactions on
//! it, and check its promise on every crash state (the stacks are
//! `lab::crash`'s, the check `workloads::crash`'s and `workloads::fscrash`'s).

use std::path::PathBuf;
use std::process::ExitCode;

use blocklog::{HomeWrites, Mode};
use clap::{Args, ValueEnum};
use lab::crash::{crash_block, usage, BlockCrash, BlockStack};
use workloads::crash::{CrashReport, CrashSpec};
use workloads::spec::parse_bytes;

use crate::UsageError;

/// The stacks `iolab crash` can build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stack {
    /// A device behind the block log in log mode (transactions committed at each flush).
    Log,
    /// A device behind the block log kept on a second device (both crashed
    /// at the same instant).
    LogSeparate,
    /// The same device written in place, durable at each flush (no log).
    Async,
    /// The same device written in place, each write durable at once (no log).
    Sync,
    /// A RAID-5 volume of four drives (stripe 16k); after each crash every
    /// drive in turn is failed and the data read back through parity.
    Raid5,
    /// The same RAID-5 volume with a stripe log on a fifth device: each
    /// row's data and parity are logged before they are written in place.
    Raid5Log,
    /// iolab's file system under the `sync` policy: a seeded mix of file
    /// operations and fsyncs; after each crash `fsck -p` must repair
    /// everything and every fsync'd file must hold what was fsync'd.
    FsSync,
    /// iolab's file system under the `log` policy (WAPBL): after each
    /// crash the log's replay alone must leave nothing for fsck, every
    /// fsync'd file whole, and the tree one that a commit made.
    FsLog,
    /// The same under `softdep` (soft updates): after each crash fsck -n
    /// must find nothing but leaks, fsck -B (leaks only) must repair them,
    /// and every fsync'd file must hold what was fsync'd.
    FsSoftdep,
    /// The same under `async`: nothing is promised; the report shows the
    /// damage a crash leaves.
    FsAsync,
}

impl Stack {
    fn name(self) -> &'static str {
        match self {
            Stack::Log => "log",
            Stack::LogSeparate => "log-separate",
            Stack::Async => "async",
            Stack::Sync => "sync",
            Stack::Raid5 => "raid5",
            Stack::Raid5Log => "raid5-log",
            Stack::FsSync => "fs-sync",
            Stack::FsLog => "fs-log",
            Stack::FsSoftdep => "fs-softdep",
            Stack::FsAsync => "fs-async",
        }
    }

    fn is_raid5(self) -> bool {
        matches!(self, Stack::Raid5 | Stack::Raid5Log)
    }
}

#[derive(Debug, Args)]
pub struct CrashArgs {
    /// The stack to crash.
    #[arg(long, value_enum, default_value = "log")]
    pub stack: Stack,
    /// Bytes of the stack's data area the transactions write (default
    /// 1m; the file-system stacks: the device's size, default 8m).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Size of the block log (log stacks).
    #[arg(long, value_name = "SIZE", default_value = "512k")]
    pub log_size: String,
    /// Transactions to run.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub transactions: u64,
    /// Blocks per transaction: 1 to N, chosen at random (default 4; 1 on
    /// RAID-5 stacks, where a volume offers no multi-block atomicity and
    /// the promise checked is that of each single write).
    #[arg(long, value_name = "N")]
    pub max_blocks: Option<u32>,
    /// Block size (a metadata block).
    #[arg(long, value_name = "SIZE", default_value = "4k")]
    pub block_size: String,
    /// Log stacks: when committed blocks go home: checkpoint (default) or commit.
    #[arg(long, value_name = "WHEN", default_value = "checkpoint")]
    pub log_home: HomeWrites,
    /// Flush after every N transactions.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub sync_every: u64,
    /// Crash states sampled between flushes (with dropped, reordered and
    /// torn writes), besides one after every flush.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub states: u64,
    /// Seed of the transactions and of the sampled states.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Check only this state (as named in an earlier report; one past the
    /// last state these flags generate is a usage error).
    #[arg(long, value_name = "N")]
    pub state: Option<u64>,
    /// Write the report as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Block stacks: build the stack on simulated disks of this model
    /// (e.g. sim:hdd,flush=ignore; each raw device one, at least 1 MiB)
    /// and cut their power in the model after every transaction and every
    /// flush, instead of enumerating a recorded history's states: the
    /// disk's cache decides what survives (docs/sim.md).
    #[arg(long, value_name = "SIM")]
    pub disk: Option<String>,
    /// fs-* stacks: instead of the mix of operations, extract this tar
    /// archive (plain, gzip or xz; kept small: the tree is taken after
    /// every call) as GNU tar does, then sync.
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// fs-* stacks: threads running the workload at once on the one file
    /// system, as FUSE's workers call it (default 1). --transactions is
    /// the total, shared among them; each has durable files of its own
    /// and all work in the one tree (with --archive: each extracts into
    /// /wN of its own). The interleaving differs run to run: --state is
    /// refused, and under fs-log the tree is not checked against the
    /// commits (fsck and the fsync'd files are).
    #[arg(long, value_name = "N")]
    pub writers: Option<u32>,
    /// Crash a kernel file system instead: ext4, ext4-nojournal,
    /// ext4-journal, ext4-sync, xfs or btrfs, made by its own mkfs on an
    /// image of --size (default 32m; xfs 300m, btrfs 128m) that iolab
    /// serves through FUSE to a loop device, so that every write and flush
    /// the file system issues is recorded; the fs-* stacks' mix runs in
    /// it. Needs root, /dev/fuse, losetup and the file system's tools.
    #[arg(long, value_name = "FS")]
    pub kernel: Option<String>,
    /// --kernel: mount options beyond the file system's defaults (e.g.
    /// nobarrier), when recording and when checking.
    #[arg(long, value_name = "OPTIONS")]
    pub mount_options: Option<String>,
    /// --kernel: write the image of each state that breaks the promise
    /// (the first 10) into DIR as state-N.img, as the crash left it, for
    /// a person to inspect (the kernel's history differs from run to run,
    /// so --state cannot name a state again).
    #[arg(long, value_name = "DIR")]
    pub keep_images: Option<PathBuf>,
    /// --kernel: the disk's sector size, 512 or 4096: what a torn write
    /// tears at, and the loop device's logical sector (mkfs sizes its own
    /// by it).
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub sector_size: u32,
    /// --kernel: the recorder answers every fsync without flushing, which
    /// the check must catch: violations are expected (it proves the check).
    #[arg(long)]
    pub drop_flushes: bool,
}

pub fn run(args: CrashArgs) -> anyhow::Result<ExitCode> {
    crate::check_destinations(args.json.as_deref(), None)?;
    let fs = matches!(args.stack, Stack::FsSync | Stack::FsSoftdep | Stack::FsLog | Stack::FsAsync);
    if let Some(kernel) = &args.kernel {
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
            args.stack.name(),
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
            args.stack.name()
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
            args.stack.name()
        )));
    }
    if args.archive.is_some() {
        return Err(UsageError(
            "--archive: only the fs-sync, fs-softdep, fs-log and fs-async stacks extract archives".into(),
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
    let stack = match args.stack {
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
            args.stack.name(),
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
        stack: args.stack.name(),
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
    let device_bytes = parse_bytes("size", args.size.as_deref().unwrap_or("8m")).map_err(UsageError::from)?;
    let policy = match args.stack {
        Stack::FsSync => ffs::Policy::Sync,
        Stack::FsLog => ffs::Policy::Log,
        Stack::FsSoftdep => ffs::Policy::Softdep,
        _ => ffs::Policy::Async,
    };
    let spec = workloads::fscrash::FsCrashSpec {
        policy,
        promise: policy,
        operations: args.transactions,
        fsync_every: args.sync_every,
        sampled_states: args.states,
        seed: args.seed,
        only_state: args.state,
        device_bytes,
        cache_bytes: 256 << 10,
        writers: args.writers.unwrap_or(1),
        archive: match &args.archive {
            Some(path) => {
                let loaded = workloads::tree::load_archive(path).map_err(|e| UsageError(e.to_string()))?;
                Some(std::sync::Arc::new(loaded.tar))
            }
            None => None,
        },
    };
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
            args.stack.name(),
            args.size.as_deref().unwrap_or("8m"),
            args.states,
            args.seed,
            v.state
        )
    });
    let run = report::FsCrashRun {
        stack: args.stack.name(),
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
            &report::json::FsCrashDocument::new(lab::host::wire(), args.stack.name(), args.seed, &report)
                .to_json(),
        )?;
    }
    Ok(crate::exit::found(report.violations > 0))
}

fn max_blocks(args: &CrashArgs) -> u32 {
    args.max_blocks.unwrap_or(if args.stack.is_raid5() { 1 } else { 4 })
}

/// `iolab crash --kernel FS`: a kernel file system's promise.
fn run_kernel(args: &CrashArgs, kernel: &str) -> anyhow::Result<ExitCode> {
    let fs: lab::kernel_crash::KernelFs = kernel.parse().map_err(UsageError)?;
    let refused = [
        (args.disk.is_some(), "--disk"),
        (args.archive.is_some(), "--archive"),
        (args.writers.is_some(), "--writers"),
        (args.max_blocks.is_some(), "--max-blocks"),
        (args.state.is_some(), "--state (the kernel's history differs from run to run; keep the images of the states that break the promise with --keep-images DIR)"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        return Err(UsageError(format!(
            "{flag} does not apply to --kernel: the kernel's file system runs the fs-* stacks' mix by one writer"
        ))
        .into());
    }
    let size_bytes = match &args.size {
        Some(size) => parse_bytes("size", size).map_err(UsageError::from)?,
        None => lab::kernel_crash::default_size(fs),
    };
    let crash = lab::kernel_crash::KernelCrash {
        fs,
        size_bytes,
        mount_options: args.mount_options.clone(),
        operations: args.transactions,
        fsync_every: args.sync_every,
        sampled_states: args.states,
        seed: args.seed,
        sector_bytes: args.sector_size,
        keep_images: args.keep_images.clone(),
        drop_flushes: args.drop_flushes,
        stop: Some(crate::interrupt::catch(
            "interrupted: stopping before the next state, undoing its mounts and loop devices (interrupt again \
             to stop at once, leaving them: see `losetup -a` and /proc/mounts)",
            "interrupted again: stopping now; a loop device or mount under /dev/shm/iolab-kcrash.* may be left",
        )?),
    };
    let (report, kernel_run) = lab::kernel_crash::crash_kernel(&crash)?;
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
