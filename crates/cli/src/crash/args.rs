//! `iolab crash`'s flags, and the runs they ask for.

use std::path::PathBuf;

use blocklog::HomeWrites;
use clap::{Args, ValueEnum};
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
    /// fsync'd file whole, no file showing its blocks' old data, and the
    /// tree one that a commit made.
    FsLog,
    /// The same under `softdep` (soft updates): after each crash fsck -n
    /// must find nothing but leaks, fsck -B (leaks only) must repair them,
    /// every fsync'd file must hold what was fsync'd, and no file show its
    /// blocks' old data.
    FsSoftdep,
    /// The same under `async`: nothing is promised; the report shows the
    /// damage a crash leaves.
    FsAsync,
}

impl Stack {
    pub(crate) fn name(self) -> &'static str {
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

    /// One of iolab's file system's stacks (fs-*).
    pub(crate) fn is_fs(self) -> bool {
        matches!(self, Stack::FsSync | Stack::FsSoftdep | Stack::FsLog | Stack::FsAsync)
    }

    pub(super) fn is_raid5(self) -> bool {
        matches!(self, Stack::Raid5 | Stack::Raid5Log)
    }
}

#[derive(Debug, Args)]
pub struct CrashArgs {
    /// The stack to crash (default log). Several fs-* stacks, comma-separated
    /// (or beside --kernel), print one table: the same mix under each.
    #[arg(long = "stack", value_enum, value_delimiter = ',', value_name = "STACK")]
    pub stacks: Vec<Stack>,
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
    /// fs-* stacks and --kernel: instead of the mix of operations,
    /// extract this tar archive (plain, gzip or xz; kept small: the tree
    /// is taken after every call) as GNU tar does, then sync; under
    /// --kernel, once the sync returned every path it made must be whole.
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
    /// Several, comma-separated, or beside --stack fs-..., print one table.
    #[arg(long = "kernel", value_delimiter = ',', value_name = "FS")]
    pub kernels: Vec<String>,
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

impl CrashArgs {
    /// The one stack asked for (the default: log).
    pub(crate) fn stack(&self) -> Stack {
        self.stacks.first().copied().unwrap_or(Stack::Log)
    }
}

/// The fs-* stack `stack`'s crash run as the flags ask for it.
pub(super) fn fs_spec(args: &CrashArgs, stack: Stack) -> anyhow::Result<workloads::fscrash::FsCrashSpec> {
    let device_bytes = parse_bytes("size", args.size.as_deref().unwrap_or("8m")).map_err(UsageError::from)?;
    let policy = match stack {
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
    Ok(spec)
}

/// The kernel file system `kernel`'s crash run as the flags ask for it.
pub(super) fn kernel_crash(args: &CrashArgs, kernel: &str) -> anyhow::Result<lab::kernel_crash::KernelCrash> {
    let fs: lab::kernel_crash::KernelFs = kernel.parse().map_err(UsageError)?;
    let refused = [
        (args.disk.is_some(), "--disk"),
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
        archive: match &args.archive {
            Some(path) => {
                let loaded = workloads::tree::load_archive(path).map_err(|e| UsageError(e.to_string()))?;
                Some(std::sync::Arc::new(loaded.tar))
            }
            None => None,
        },
        stop: Some(crate::interrupt::catch(
            "interrupted: stopping before the next state, undoing its mounts and loop devices (interrupt again \
             to stop at once, leaving them: see `losetup -a` and /proc/mounts)",
            "interrupted again: stopping now; a loop device or mount under /dev/shm/iolab-kcrash.* may be left",
        )?),
    };
    Ok(crash)
}
