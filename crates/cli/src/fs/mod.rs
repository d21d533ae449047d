//! `iolab fs ...`: iolab's file system on a file, a device or a volume:
//! make it, mount it through FUSE (in the foreground, until unmounted),
//! check it, and look inside an unmounted image.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use ffs::fsck::Repair;
use ffs::{MkfsOptions, Policy};
use fsapi::FileSystem;
use workloads::spec::parse_bytes;

pub(crate) mod tree;

mod block_log;

pub use block_log::BlockLogArgs;
use lab::fs::make;

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
    /// Extract a tar archive (plain, gzip or xz) into the file system
    /// in-process, as GNU tar does, timed through the unmount.
    Untar(tree::UntarArgs),
    /// Remove paths and everything under them in-process, as rm -rf does,
    /// timed through the unmount.
    Rm(tree::RmArgs),
    /// mdtest's metadata phases (directories and files made, looked up,
    /// read and removed in every directory of a tree, then the tree
    /// removed), each with its rate and latency: on iolab's file system
    /// in-process, or in a directory of any mounted file system.
    Tree(tree::TreeArgs),
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
    /// Size of the log region every policy reserves (default: what mke2fs
    /// gives jbd2's journal on a device of the same size, 32 MiB on 1 GiB).
    #[arg(long, value_name = "SIZE")]
    pub log_size: Option<String>,
    /// Overwrite a target that holds a file system, a partition table or an iolab volume.
    #[arg(long)]
    pub force: bool,
    /// With --block-log: the size of the block log (default: 1 MiB per
    /// GiB of target, 1 to 64 MiB).
    #[arg(long, value_name = "SIZE", requires = "block_log")]
    pub block_log_size: Option<String>,
    #[command(flatten)]
    pub log: BlockLogArgs,
}

#[derive(Debug, Args)]
pub struct MountArgs {
    pub target: String,
    pub mountpoint: PathBuf,
    /// The metadata policy: sync (ordered synchronous metadata writes, as
    /// FFS), softdep (soft updates: delayed writes in a safe order, with
    /// rollbacks), log (metadata committed through the file system's log,
    /// as WAPBL) or async (all delayed).
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
    /// Send every write(2) to the file system as it is made, instead of
    /// letting the kernel gather writes in its page cache (the writeback
    /// cache) and send them at fsync, after its dirty expiry, or at
    /// unmount. Slower; sizes and times are then the file system's at once.
    #[arg(long)]
    pub no_writeback_cache: bool,
    /// Let every user use the mount, not only the one who mounted it
    /// (FUSE's allow_other; a user other than root needs
    /// `user_allow_other` in /etc/fuse.conf). The kernel then checks each
    /// caller's permissions as it does on ext4: mode bits, sticky
    /// directories, who may chown, chmod and set times.
    #[arg(long)]
    pub allow_other: bool,
    /// With the writeback cache, answer opens for writing with direct I/O
    /// (each write(2) a request, so a full file system's ENOSPC reaches the
    /// call) while the file system has less than SIZE free. Default: twice
    /// the dirty bytes the kernel lets the mount hold (its backing device's
    /// max_bytes under /sys/class/bdi).
    #[arg(long, value_name = "SIZE")]
    pub direct_io_below: Option<String>,
    /// How the kernel's requests reach the server: uring (FUSE over
    /// io_uring, Linux 6.14 and later with the fuse module's enable_uring
    /// on: a queue per CPU, each answered by a thread on that CPU, so a
    /// request never wakes another CPU), dev (threads reading /dev/fuse,
    /// wherever the scheduler puts them), or auto (uring where the kernel
    /// allows it).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,
    /// Mount an image that is not clean (a crash or kill left it
    /// unchecked) as it is, with a warning: it stays marked unclean until
    /// `iolab fs fsck -p` repairs it.
    #[arg(long)]
    pub force: bool,
    /// Run the /dev/fuse server on these CPUs only (e.g. 0 or 0-1,3), as
    /// taskset does. Where waking a thread on another CPU is dear (a
    /// virtual machine), serving on the CPU the program using the mount
    /// runs on saves most of each request's cost (what --transport uring
    /// does by itself, whatever CPU the program runs on).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    #[command(flatten)]
    pub log: BlockLogArgs,
}

/// `--transport`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    Auto,
    Dev,
    Uring,
}

#[derive(Debug, Args)]
pub struct FsckArgs {
    pub target: String,
    /// Report only (the default).
    #[arg(short = 'n', conflicts_with_all = ["preen", "yes", "background"])]
    pub no: bool,
    /// Repair the leaks only (blocks and inodes marked in use that nothing
    /// uses, link counts too high, unattached inodes, counts off): all
    /// that the softdep policy leaves after a crash (FreeBSD's fsck -B).
    /// Anything else is reported and left for fsck -y. On an unmounted
    /// image only: a mount holds the image's lock.
    #[arg(short = 'B', long, conflicts_with_all = ["preen", "yes"])]
    pub background: bool,
    /// Repair what is safe to repair unattended.
    #[arg(short = 'p', conflicts_with = "yes")]
    pub preen: bool,
    /// Repair everything.
    #[arg(short = 'y')]
    pub yes: bool,
    /// Print the report as JSON (schema iolab-fsck, version 1).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub log: BlockLogArgs,
}

#[derive(Debug, Args)]
pub struct PathArgs {
    pub target: String,
    /// A path in the file system, from its root.
    #[arg(default_value = "/")]
    pub path: String,
    #[command(flatten)]
    pub log: BlockLogArgs,
}

pub fn run(command: FsCommand, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    match command {
        FsCommand::Mkfs(args) => mkfs(args),
        FsCommand::Mount(args) => mount(args),
        FsCommand::Fsck(args) => fsck(args),
        FsCommand::Ls(args) => inspect(args, Look::Ls),
        FsCommand::Stat(args) => inspect(args, Look::Stat),
        FsCommand::Cat(args) => inspect(args, Look::Cat),
        FsCommand::Untar(args) => tree::untar(args, ranks),
        FsCommand::Rm(args) => tree::rm(args, ranks),
        FsCommand::Tree(args) => tree::mdtest(args, ranks),
    }
}

fn mkfs(args: MkfsArgs) -> anyhow::Result<ExitCode> {
    let bytes = |flag, v: &Option<String>| v.as_deref().map(|s| parse_bytes(flag, s)).transpose();
    let size = bytes("size", &args.size).map_err(UsageError::from)?;
    let log_bytes = bytes("log-size", &args.log_size).map_err(UsageError::from)?;
    let block_log_bytes = bytes("block-log-size", &args.block_log_size).map_err(UsageError::from)?;
    let options = MkfsOptions { inodes: args.inodes, log_bytes };
    let (target, sb) = make(&args.target, size, &options, args.force, block_log_bytes, &args.log.plan())?;
    let behind = match target.log() {
        Some(log) => {
            format!(" behind a block log (mode {}, {} KiB)", log.mode(), log.header().log_bytes / 1024)
        }
        None => String::new(),
    };
    println!(
        "made an iolab file system on {}{behind}: {} blocks of 4 KiB in {} groups, {} inodes, {} KiB reserved for the log policy",
        args.target,
        sb.blocks,
        sb.groups,
        sb.total_inodes(),
        sb.log_blocks * 4
    );
    target.close()?;
    Ok(ExitCode::SUCCESS)
}

fn mount(args: MountArgs) -> anyhow::Result<ExitCode> {
    let cache_bytes = parse_bytes("cache", &args.cache).map_err(UsageError::from)?;
    let direct_io_below_bytes = args
        .direct_io_below
        .as_deref()
        .map(|s| parse_bytes("direct-io-below", s))
        .transpose()
        .map_err(UsageError::from)?;
    if !args.mountpoint.is_dir() {
        return Err(UsageError(format!(
            "{}: no such directory to mount on; create it (mkdir -p {})",
            args.mountpoint.display(),
            args.mountpoint.display()
        ))
        .into());
    }
    let cpus = args.cpus.as_deref().map(lab::fs::cpus::parse_cpus).transpose().map_err(UsageError)?;
    let transport = transport(args.transport, cpus.is_some())?;
    let serving = fusefront::Serving {
        threads: args.threads,
        writeback_cache: !args.no_writeback_cache,
        transport,
        allow_other: args.allow_other,
        direct_io_below_bytes,
    };
    let mount = lab::fs::Mount {
        policy: args.policy,
        cache_bytes,
        direct: args.direct,
        force: args.force,
        log: args.log.plan(),
    };
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
    let (unmounted, served) =
        lab::fs::mount_and_serve(&args.target, &mount, &args.mountpoint, cpus.as_deref(), serving, mounted)?;
    println!("{}", report::unmounted_line(&args.target, &unmounted, &served));
    Ok(ExitCode::SUCCESS)
}

/// The transport a mount asked for: `auto` with `--cpus` is /dev/fuse
/// (the CPUs pin its threads); `uring` with `--cpus`, or on a kernel
/// without it, is refused before anything is opened.
fn transport(arg: TransportArg, cpus: bool) -> Result<fusefront::Transport, UsageError> {
    match (arg, cpus) {
        (TransportArg::Uring, true) => Err(UsageError(
            "--cpus pins the /dev/fuse server's threads; over io_uring each queue's thread runs on its own CPU \
             already: drop --cpus, or use --transport dev"
                .into(),
        )),
        (TransportArg::Uring, false) if !fusefront::uring_enabled() => {
            Err(UsageError(fusefront::uring_disabled_help()))
        }
        (TransportArg::Uring, false) => Ok(fusefront::Transport::Uring),
        (TransportArg::Auto, false) => Ok(fusefront::Transport::Auto),
        (TransportArg::Dev, _) | (TransportArg::Auto, true) => Ok(fusefront::Transport::Dev),
    }
}

/// `iolab fs fsck`: exit status 0 clean, 1 everything found repaired, 4
/// damage left, 8 fsck could not check, 2 a usage error (docs/fs.md).
fn fsck(args: FsckArgs) -> anyhow::Result<ExitCode> {
    match check(&args) {
        Err(e) if !crate::is_usage_error(&e) => {
            eprintln!("iolab: error: {}", crate::message(&e));
            Ok(ExitCode::from(crate::exit::FSCK_OPERATIONAL_ERROR))
        }
        done => done,
    }
}

fn check(args: &FsckArgs) -> anyhow::Result<ExitCode> {
    let repair = if args.yes {
        Repair::Yes
    } else if args.preen {
        Repair::Preen
    } else if args.background {
        Repair::Leaks
    } else {
        Repair::No
    };
    let bar = FsckBar::new();
    let report = lab::fs::fsck(&args.target, repair, &args.log.plan(), &|step| bar.tell(step))?;
    drop(bar);
    if args.json {
        println!(
            "{}",
            report::json::FsckDocument::new(
                env!("CARGO_PKG_VERSION"),
                lab::host::wire(),
                &args.target,
                &report
            )
            .to_json()
        );
    } else {
        print!("{}", report::fsck_text(&args.target, &report, repair == Repair::No));
    }
    Ok(ExitCode::from(crate::exit::fsck(report::FsckOutcome::of(&report))))
}

/// fsck's progress on a terminal: the pass under way and, in pass 1 (the
/// inode tables, the longest), the groups done with the time left;
/// nothing elsewhere.
struct FsckBar(Option<indicatif::ProgressBar>);

impl FsckBar {
    fn new() -> FsckBar {
        use std::io::IsTerminal;
        FsckBar(std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(1);
            bar.enable_steady_tick(std::time::Duration::from_millis(500));
            bar
        }))
    }

    fn tell(&self, step: ffs::fsck::Step) {
        let Some(bar) = &self.0 else { return };
        if step.done == 0 {
            // A bar and the time left where the pass has steps to count;
            // the time it has taken alone where it is one step.
            let template = match step.total {
                1 => "fsck {msg:32} [{elapsed_precise}]",
                _ => "fsck {msg:32} [{elapsed_precise}] {bar:25} {pos}/{len} ETA {eta}",
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.reset();
            bar.set_length(step.total);
            let passes = ffs::fsck::PASSES.len();
            bar.set_message(format!("pass {} of {passes}: {}", step.pass, step.name));
        }
        bar.set_position(step.done);
    }
}

impl Drop for FsckBar {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

#[derive(Clone, Copy)]
enum Look {
    Ls,
    Stat,
    Cat,
}

/// Looks inside an unmounted image without changing it: the file system is
/// mounted over the stack's scratch view, whose writes stay in memory.
fn inspect(args: PathArgs, look: Look) -> anyhow::Result<ExitCode> {
    let (_target, fs) = lab::fs::look_inside(&args.target, &args.log.plan())?;
    let attr = fsapi::resolve(&fs, &args.path).map_err(|e| anyhow::anyhow!("{}: {e}", args.path))?;
    match look {
        Look::Stat => print!("{}", report::stat_text(&args.path, &attr)),
        Look::Cat if attr.kind != fsapi::FileType::File => {
            let link = match attr.kind {
                fsapi::FileType::Symlink => {
                    Some(fs.readlink(attr.ino).map_err(|e| anyhow::anyhow!("{}: {e}", args.path))?)
                }
                _ => None,
            };
            let what = report::not_a_file(&attr, link.as_deref());
            return Err(UsageError(format!(
                "{}: {what}; cat prints files (ls and stat show the rest)",
                args.path
            ))
            .into());
        }
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
