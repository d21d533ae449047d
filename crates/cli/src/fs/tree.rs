//! `iolab fs untar` and `iolab fs rm`: the tree workloads run in-process
//! on iolab's file system (no FUSE, no kernel), timed from the mount to
//! the end of the unmount, so the figure is the file system's own cost
//! under its policy.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use ffs::Policy;
use fsapi::FileSystem;
use workloads::spec::parse_bytes;
use workloads::tree::{load_archive, Extracted, MdtestPhase, MdtestSpec, Removed};

use lab::fs::runner::{in_directory, in_process, Done};
use lab::fs::tree;
use lab::fs::Mount;

use crate::UsageError;

/// How the file system is mounted in-process.
#[derive(Debug, Args)]
pub struct InProcess {
    /// The metadata policy: sync, softdep, log or async.
    #[arg(long, value_name = "POLICY")]
    pub policy: Policy,
    /// Size of the buffer cache.
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    pub cache: String,
    /// Open the target with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
    /// Mount an image that is not clean (a crash or kill left it
    /// unchecked) as it is, with a warning: it stays marked unclean until
    /// `iolab fs fsck -p` repairs it.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub log: super::block_log::BlockLogArgs,
}

impl InProcess {
    /// The mount these flags ask for.
    pub fn plan(&self) -> Result<Mount, UsageError> {
        Ok(Mount {
            policy: self.policy,
            cache_bytes: parse_bytes("cache", &self.cache)?,
            direct: self.direct,
            force: self.force,
            log: self.log.plan(),
        })
    }
}

#[derive(Debug, Args)]
pub struct UntarArgs {
    pub target: String,
    /// A tar archive, plain or compressed with gzip or xz; read whole into
    /// memory and decompressed before the clock starts.
    pub archive: PathBuf,
    /// The directory to extract into, made (with its parents) if missing.
    #[arg(long, value_name = "PATH", default_value = "/")]
    pub into: String,
    /// Extract this many copies, into copy-1 ... copy-N under --into (the
    /// first seed extracted ten).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub copies: u32,
    #[command(flatten)]
    pub mount: InProcess,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    pub target: String,
    /// Paths in the file system to remove with everything under them.
    #[arg(required = true)]
    pub paths: Vec<String>,
    #[command(flatten)]
    pub mount: InProcess,
}

pub fn untar(args: UntarArgs, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    if let Some(ranks) = ranks {
        image_per_rank(&args.target, ranks)?;
    }
    if args.copies == 0 {
        return Err(UsageError("--copies: give at least 1".into()).into());
    }
    let archive = load_archive(&args.archive).map_err(|e| UsageError(e.to_string()))?;
    if let Some(ranks) = ranks {
        // Every rank mounts and extracts at once.
        ranks.barrier();
    }
    let mut made = Extracted::default();
    let ran = in_process_interruptible(&args.target, &args.mount, |fs| {
        made = tree::extract_copies(fs, &args.into, args.copies, &archive.tar)?;
        Ok(())
    })?;
    let done = tree_run(&ran, &args.target, &args.mount);
    if let Some(ranks) = ranks {
        return each_rank(ranks, "tar (entries)", made.entries, done.seconds, &args.target);
    }
    let shown = args.archive.display().to_string();
    print!("{}", report::untar_text(&done, &shown, &archive, args.copies, &made));
    Ok(ExitCode::SUCCESS)
}

pub fn rm(args: RmArgs, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    if let Some(ranks) = ranks {
        image_per_rank(&args.target, ranks)?;
    }
    let removals = tree::removals(&args.paths)?;
    let mut removed = Removed::default();
    if let Some(ranks) = ranks {
        ranks.barrier();
    }
    let ran = in_process_interruptible(&args.target, &args.mount, |fs| {
        removed = tree::remove_all(fs, &removals)?;
        Ok(())
    })?;
    let done = tree_run(&ran, &args.target, &args.mount);
    if let Some(ranks) = ranks {
        return each_rank(ranks, "rm (entries)", removed.unlinked + removed.dirs, done.seconds, &args.target);
    }
    print!("{}", report::rm_text(&done, &args.paths, &removed));
    Ok(ExitCode::SUCCESS)
}

/// Under mpirun, an in-process tar, rm or tree: each rank on an image of
/// its own.
fn image_per_rank(target: &str, ranks: &lab::mpi::Ranks) -> anyhow::Result<()> {
    ranks.own_paths(&[("target", std::path::Path::new(target))])
}

/// Under mpirun: every rank's entries and time (from the mount to the end
/// of the unmount, begun together) to rank 0, which prints them.
fn each_rank(
    ranks: &lab::mpi::Ranks,
    phase: &str,
    entries: u64,
    seconds: f64,
    target: &str,
) -> anyhow::Result<ExitCode> {
    let on = format!(
        "each in-process on an image of its own (rank 0's: {target}), timed from the mount to the end of the unmount"
    );
    phases_to_rank_0(ranks, vec![(phase.to_string(), entries, seconds)], &on)
}

/// Under mpirun: this rank's phases (name, calls, seconds) to rank 0,
/// which prints every rank's (`on`: where each worked).
fn phases_to_rank_0(
    ranks: &lab::mpi::Ranks,
    phases: Vec<(String, u64, f64)>,
    on: &str,
) -> anyhow::Result<ExitCode> {
    let mine = report::RankPhases { rank: ranks.rank, host: ranks.host.clone(), phases };
    if let Some(all) = ranks.gather_values(&mine, "figures")? {
        print!("{}", report::mpi_phases_table(&all, on));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// An iolab file system (mounted in-process under --policy), or a
    /// directory of any mounted file system (the phases run in a new
    /// directory under it, removed at the end).
    pub target: String,
    /// Levels of the tree below its top directory (mdtest -z).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub depth: u32,
    /// Subdirectories of each directory of the tree (mdtest -b).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub fanout: u32,
    /// Directories and files made in each directory of the tree (mdtest -I).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub items: u32,
    /// Bytes written to each file as it is created (mdtest -w).
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub write: String,
    /// Bytes read from each file in the read phase (mdtest -e).
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub read: String,
    /// The metadata policy an iolab file system is mounted with.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<Policy>,
    /// Size of the buffer cache (iolab's file system).
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    pub cache: String,
    /// Open an iolab target with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
    /// Mount an iolab image that is not clean (a crash or kill left it
    /// unchecked) as it is, with a warning: it stays marked unclean until
    /// `iolab fs fsck -p` repairs it.
    #[arg(long)]
    pub force: bool,
}

pub fn mdtest(args: TreeArgs, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    let Some(ranks) = ranks else { return mdtest_alone(args, None) };
    // Under mpirun: each rank's tree in a directory of its own (on a
    // shared file system), or on an iolab image of its own; every phase
    // begun together.
    // A directory: each rank's tree in a directory of its own under it.
    let target = std::path::Path::new(&args.target);
    let image = (!target.is_dir()).then_some(("target", target));
    ranks.own_paths(&image.into_iter().collect::<Vec<_>>())?;
    let on = args.target.clone();
    let phases = std::cell::RefCell::new(Vec::new());
    mdtest_alone(args, Some((ranks, &phases)))?;
    phases_to_rank_0(ranks, phases.into_inner(), &format!("each in a directory of its own on {on}"))
}

/// Under MPI: the ranks, and where this rank's phases go (name, calls,
/// seconds) instead of the table.
type RankOut<'a> = Option<(&'a lab::mpi::Ranks, &'a std::cell::RefCell<Vec<(String, u64, f64)>>)>;

/// The tree and its files' sizes as the flags give them, checked.
fn mdtest_spec(args: &TreeArgs) -> Result<MdtestSpec, UsageError> {
    let bytes = |flag: &'static str, v: &str| -> Result<u32, UsageError> {
        let n = parse_bytes(flag, v).map_err(UsageError::from)?;
        u32::try_from(n).map_err(|_| UsageError(format!("--{flag}: {v} is more than 4 GiB a file")))
    };
    let spec = MdtestSpec {
        depth: args.depth,
        fanout: args.fanout,
        items: args.items,
        write_bytes: bytes("write", &args.write)?,
        read_bytes: bytes("read", &args.read)?,
    };
    spec.check().map_err(UsageError)?;
    Ok(spec)
}

/// A directory runs on the file system it is on: the flags for iolab's
/// file system are refused there.
fn refuse_image_flags(args: &TreeArgs) -> Result<(), UsageError> {
    if args.policy.is_some() || args.direct || args.force {
        return Err(UsageError(format!(
            "{}: a directory runs on the file system it is on; --policy, --direct and --force are for iolab's \
             file system",
            args.target
        )));
    }
    Ok(())
}

fn mdtest_alone(args: TreeArgs, ranks: RankOut<'_>) -> anyhow::Result<ExitCode> {
    let spec = mdtest_spec(&args)?;
    // Under MPI every phase begins together (mdtest's barriers).
    let mut barrier = || {
        if let Some((ranks, _)) = ranks {
            ranks.barrier();
        }
    };
    let mut phases = Vec::new();
    let keep = |ran: &[MdtestPhase]| {
        if let Some((_, out)) = ranks {
            *out.borrow_mut() = ran.iter().map(|p| (p.name.to_string(), p.items, p.seconds)).collect();
        }
    };
    if std::path::Path::new(&args.target).is_dir() {
        refuse_image_flags(&args)?;
        let tag = match ranks {
            Some((r, _)) => format!("iolab-tree-{}-rank{}", std::process::id(), r.rank),
            None => format!("iolab-tree-{}", std::process::id()),
        };
        let (real, mount) = in_directory(std::path::Path::new(&args.target), &tag, |fs| {
            phases = tree::mdtest(fs, fsapi::ROOT, &spec, &mut barrier)?;
            Ok(())
        })?;
        keep(&phases);
        if ranks.is_some() {
            return Ok(ExitCode::SUCCESS);
        }
        let shown = real.display().to_string();
        let on = report::TreeOn::Dir { path: &shown, mount: &mount.describe() };
        print!("{}", report::mdtest_text(&on, &spec, &phases));
        return Ok(ExitCode::SUCCESS);
    }
    let Some(policy) = args.policy else {
        return Err(UsageError(format!(
            "{}: name the metadata policy to mount it with (--policy sync, softdep, log or async), or give a \
             directory",
            args.target
        ))
        .into());
    };
    let mount = InProcess {
        policy,
        cache: args.cache.clone(),
        direct: args.direct,
        force: args.force,
        log: Default::default(),
    };
    let done = in_process_interruptible(&args.target, &mount, |fs| {
        phases = tree::mdtest_in_image(fs, &spec, &mut barrier)?;
        Ok(())
    })?;
    keep(&phases);
    if ranks.is_some() {
        return Ok(ExitCode::SUCCESS);
    }
    let run = tree_run(&done, &args.target, &mount);
    print!("{}", report::mdtest_text(&report::TreeOn::Iolab(&run), &spec, &phases));
    Ok(ExitCode::SUCCESS)
}

/// The figures' words: an in-process run of `mount` on `target`.
fn tree_run<'a>(done: &'a Done, target: &'a str, mount: &'a InProcess) -> report::TreeRun<'a> {
    report::TreeRun {
        target,
        media: &done.media,
        policy: mount.policy,
        cache: &mount.cache,
        seconds: done.seconds,
        unmounted: &done.unmounted,
    }
}

/// [`in_process`] that Ctrl-C (or SIGTERM) stops cleanly: the work's next
/// call fails with EINTR, the unmount writes everything back as at the
/// end, and the command ends with [`crate::Interrupted`] (exit 130); a
/// second interrupt during the unmount stops at once, saying the image is
/// left unclean.
fn in_process_interruptible(
    target: &str,
    mount: &InProcess,
    work: impl FnOnce(&dyn FileSystem) -> anyhow::Result<()>,
) -> anyhow::Result<Done> {
    let mount = mount.plan()?;
    let stop = crate::interrupt::catch(
        "interrupted: the work stops at its next call and the file system is unmounted cleanly (interrupt \
         again to stop at once, leaving the image unclean)",
        "interrupted again: stopping before the unmount ends; the image is left unclean: check it with iolab fs \
         fsck -p before using it",
    )?;
    in_process(target, &mount, Some(stop), work)
}
