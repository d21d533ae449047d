//! `iolab fs ...`: iolab's file system on a file, a device or a volume:
//! make it, mount it through FUSE (in the foreground, until unmounted),
//! check it, and look inside an unmounted image.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use device::{Device, LockKind};
use ffs::fsck::Repair;
use ffs::{Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::FileSystem;
use workloads::spec::parse_bytes;

use crate::stack::{self, Stack};
use crate::UsageError;

#[derive(Debug, Subcommand)]
pub enum FsCommand {
    /// Make a file system on TARGET (a file, made sparse with --size when
    /// missing; a block device; a volume). Refuses a target holding data
    /// without --force.
    Mkfs(MkfsArgs),
    /// Mount TARGET at MOUNTPOINT through FUSE and serve it in the
    /// foreground until it is unmounted (umount MOUNTPOINT, fusermount3 -u
    /// MOUNTPOINT, or Ctrl-C), then write everything back and mark it
    /// clean. sync(1) never reaches a FUSE file system: fsync and unmount
    /// make data durable.
    Mount(MountArgs),
    /// Check an unmounted file system (fsck_ffs's five passes): -n reports
    /// only (the default), -p repairs what is safe unattended, -y repairs
    /// everything. Exit status: 0 clean, 1 repaired, 4 damage left.
    Fsck(FsckArgs),
    /// List a directory of an unmounted file system.
    Ls(PathArgs),
    /// Show the attributes of a path in an unmounted file system.
    Stat(PathArgs),
    /// Print a file of an unmounted file system.
    Cat(PathArgs),
}

#[derive(Debug, Args)]
pub struct MkfsArgs {
    /// A file or block device path, or a volume (configuration file or volume:NAME:DRIVES).
    pub target: String,
    /// Size of a file to create.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Inodes in all (default: one per 16 KiB).
    #[arg(long, value_name = "N")]
    pub inodes: Option<u64>,
    /// Size of the log region every policy reserves (default: 1 MiB per
    /// GiB, 1 to 64 MiB, as WAPBL).
    #[arg(long, value_name = "SIZE")]
    pub log_size: Option<String>,
    /// Overwrite a target that holds a file system, a partition table or an iolab volume.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct MountArgs {
    pub target: String,
    pub mountpoint: PathBuf,
    /// The metadata policy: sync (ordered synchronous metadata writes, as
    /// FFS) or async (all delayed). softdep and log come with their issue.
    #[arg(long, value_name = "POLICY")]
    pub policy: Policy,
    /// Size of the buffer cache.
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    pub cache: String,
    /// Threads serving the kernel's requests.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub threads: usize,
    /// Open the target with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
}

#[derive(Debug, Args)]
pub struct FsckArgs {
    pub target: String,
    /// Report only (the default).
    #[arg(short = 'n', conflicts_with_all = ["preen", "yes"])]
    pub no: bool,
    /// Repair what is safe to repair unattended.
    #[arg(short = 'p', conflicts_with = "yes")]
    pub preen: bool,
    /// Repair everything.
    #[arg(short = 'y')]
    pub yes: bool,
    /// Print the report as JSON (schema iolab-fsck, version 1).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PathArgs {
    pub target: String,
    /// A path in the file system, from its root.
    #[arg(default_value = "/")]
    pub path: String,
}

pub fn run(command: FsCommand) -> anyhow::Result<ExitCode> {
    match command {
        FsCommand::Mkfs(args) => mkfs(args),
        FsCommand::Mount(args) => mount(args),
        FsCommand::Fsck(args) => fsck(args),
        FsCommand::Ls(args) => inspect(args, Look::Ls),
        FsCommand::Stat(args) => inspect(args, Look::Stat),
        FsCommand::Cat(args) => inspect(args, Look::Cat),
    }
}

fn open(target: &str, read_only: bool, create_bytes: Option<u64>, direct: bool) -> anyhow::Result<Stack> {
    let lock = if read_only { LockKind::Shared } else { LockKind::Exclusive };
    let options = stack::OpenOptions {
        direct,
        read_only,
        sector_bytes: None,
        create_bytes,
        lock: stack::Lock::Require(lock),
    };
    Stack::open(target, &options)
}

fn mkfs(args: MkfsArgs) -> anyhow::Result<ExitCode> {
    let bytes = |flag, v: &Option<String>| v.as_deref().map(|s| parse_bytes(flag, s)).transpose();
    let size = bytes("size", &args.size).map_err(UsageError::from)?;
    let log_bytes = bytes("log-size", &args.log_size).map_err(UsageError::from)?;
    let target = open(&args.target, false, size, false)?;
    let options = MkfsOptions { inodes: args.inodes, log_bytes };
    let device = Arc::clone(target.device());
    let checked = stack::check_writable(&target, args.force).and_then(|()| {
        ffs::geometry(device.size_bytes(), device.sector_bytes(), &options)
            .map_err(|e| UsageError(format!("{e}")).into())
    });
    if let Err(e) = checked {
        target.discard();
        return Err(e);
    }
    let sb = ffs::mkfs(&device, &options)?;
    println!(
        "made an iolab file system on {}: {} blocks of 4 KiB in {} groups, {} inodes, a {} KiB log region",
        device.name(),
        sb.blocks,
        sb.groups,
        sb.total_inodes(),
        sb.log_blocks * 4
    );
    drop(device);
    target.close()?;
    Ok(ExitCode::SUCCESS)
}

fn mount(args: MountArgs) -> anyhow::Result<ExitCode> {
    let cache_bytes = parse_bytes("cache", &args.cache).map_err(UsageError::from)?;
    if !args.mountpoint.is_dir() {
        return Err(UsageError(format!(
            "{}: no such directory to mount on; create it (mkdir -p {})",
            args.mountpoint.display(),
            args.mountpoint.display()
        ))
        .into());
    }
    let target = open(&args.target, false, None, args.direct)?;
    let options = MountOptions { policy: args.policy, cache_bytes };
    let fs = Arc::new(Ffs::mount(Arc::clone(target.device()), &options)?);
    let mounted = || {
        use std::io::Write;
        println!(
            "iolab: {} mounted at {} (policy {}, cache {}); unmount with `umount {}` or Ctrl-C",
            args.target,
            args.mountpoint.display(),
            args.policy.name(),
            args.cache,
            args.mountpoint.display()
        );
        // Scripts wait for this line: it must not sit in a pipe's buffer.
        let _ = std::io::stdout().flush();
    };
    let served = serve(&fs, &args.mountpoint, args.threads, mounted);
    let fs = Arc::try_unwrap(fs)
        .map_err(|_| anyhow::anyhow!("the file system is still in use after the session ended"))?;
    let stats = fs.cache_stats();
    let unmounted = fs.unmount().context("cannot write the file system back")?;
    target.close()?;
    served.with_context(|| format!("{}: the FUSE session failed", args.mountpoint.display()))?;
    println!(
        "iolab: unmounted; written back and clean ({} of {} blocks free; {} blocks written in {} requests, {} synchronous writes)",
        unmounted.free_blocks, unmounted.blocks, stats.blocks_written, stats.write_requests, stats.sync_writes
    );
    Ok(ExitCode::SUCCESS)
}

/// Serves `fs` at `mountpoint` until unmounted, with the syncer writing
/// buffers dirty for 30 s back, and Ctrl-C (or SIGTERM) unmounting.
fn serve(fs: &Arc<Ffs>, mountpoint: &Path, threads: usize, mounted: impl FnOnce()) -> std::io::Result<()> {
    const SYNCER_AGE: Duration = Duration::from_secs(30);
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))?;
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut ticks = 0u32;
            while !done.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_millis(100));
                if interrupted.swap(false, Ordering::Relaxed) {
                    if let Err(e) = fusefront::unmount(mountpoint) {
                        eprintln!("iolab: cannot unmount {}: {e}", mountpoint.display());
                    }
                }
                ticks += 1;
                if ticks % 10 == 0 {
                    if let Err(e) = fs.write_back_older(SYNCER_AGE) {
                        eprintln!("iolab: warning: the syncer's write-back failed: {e}");
                    }
                }
            }
        });
        let fs: Arc<dyn FileSystem> = Arc::clone(fs) as Arc<dyn FileSystem>;
        let result = fusefront::serve(fs, mountpoint, threads, mounted);
        done.store(true, Ordering::Relaxed);
        result
    })
}

fn fsck(args: FsckArgs) -> anyhow::Result<ExitCode> {
    let repair = if args.yes {
        Repair::Yes
    } else if args.preen {
        Repair::Preen
    } else {
        Repair::No
    };
    let target = open(&args.target, repair == Repair::No, None, false)?;
    let report = ffs::fsck::fsck(target.device(), repair)?;
    if args.json {
        println!(
            "{}",
            report::json::FsckDocument::new(env!("CARGO_PKG_VERSION"), &args.target, &report).to_json()
        );
    } else {
        print!("{}", report::fsck_text(&args.target, &report, repair == Repair::No));
    }
    target.close()?;
    Ok(ExitCode::from(report::FsckOutcome::of(&report).exit_status()))
}

#[derive(Clone, Copy)]
enum Look {
    Ls,
    Stat,
    Cat,
}

/// Looks inside an unmounted image without changing it: the file system is
/// mounted over a scratch view whose writes stay in memory.
fn inspect(args: PathArgs, look: Look) -> anyhow::Result<ExitCode> {
    let target = open(&args.target, true, None, false)?;
    let scratch: Arc<dyn Device> = Arc::new(device::Overlay::over(Arc::clone(target.device())));
    let fs = Ffs::mount(scratch, &MountOptions::default())?;
    let attr = fsapi::resolve(&fs, &args.path).map_err(|e| anyhow::anyhow!("{}: {e}", args.path))?;
    match look {
        Look::Stat => print!("{}", report::stat_text(&args.path, &attr)),
        Look::Cat => {
            use std::io::Write;
            let mut offset = 0u64;
            let mut buf = vec![0u8; 1 << 20];
            let mut out = std::io::stdout().lock();
            loop {
                let n =
                    fs.read(attr.ino, offset, &mut buf).map_err(|e| anyhow::anyhow!("{}: {e}", args.path))?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n])?;
                offset += n as u64;
            }
        }
        Look::Ls => {
            let mut entries = Vec::new();
            fs.readdir(attr.ino, 0, &mut |e| {
                entries.push(e);
                true
            })
            .map_err(|e| anyhow::anyhow!("{}: {e}", args.path))?;
            for e in entries {
                let child = fs.lookup(attr.ino, <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&e.name));
                let name = String::from_utf8_lossy(&e.name);
                match child {
                    Ok(c) => {
                        println!("{}", report::ls_line(&name, &c));
                        fs.forget(c.ino, 1);
                    }
                    Err(err) => println!("? {name}: {err}"),
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
