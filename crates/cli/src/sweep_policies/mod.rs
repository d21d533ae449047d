//! `iolab sweep policies`: the first seed's table in one command. The
//! flags become a [`lab::sweep_policies::Plan`] (every usage error made
//! here, before anything is written); the lab runs it, the bar in
//! `progress.rs` follows it, and the table, JSON and charts are written
//! from what it returns.

mod progress;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use ffs::{MkfsOptions, Policy};
use lab::sweep_policies::{self as sweep, check_tools, find_program, Column, KernelFs, Plan, UserDir};
use workloads::spec::parse_bytes;
use workloads::tree::{archive_size, load_archive, tree_archive, TreeShape, LARGE_FILES_MAX};

use self::progress::Progress;
use crate::UsageError;

/// How iolab's file system is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Driver {
    /// iolab's own tar and rm in-process, through fsapi: no kernel, no
    /// system calls; the file system's own cost.
    Direct,
    /// Mounted through FUSE; GNU tar and rm run through the mount, as a
    /// user's would.
    Fuse,
}

impl Driver {
    fn plan(self) -> sweep::Driver {
        match self {
            Driver::Direct => sweep::Driver::Direct,
            Driver::Fuse => sweep::Driver::Fuse,
        }
    }
}

#[derive(Debug, Args)]
pub struct PoliciesArgs {
    /// A tar archive (plain, gzip or xz) to extract, e.g. glibc-source's
    /// /usr/src/glibc/glibc-*.tar.xz; default: a seeded source-like tree
    /// (docs/fs.md).
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Files in the generated tree (without --archive; default 10,000, or
    /// 8 for --shape large).
    #[arg(long, value_name = "N")]
    pub files: Option<u32>,
    /// The generated tree's shape (without --archive): random (glibc's,
    /// files in random directories), ordered (the same in directory
    /// order, as tar archives a tree), small (1 KiB files), large (1 to
    /// 64 MiB files), deep (chains of directories 64 deep), flat (one
    /// directory). docs/fs.md.
    #[arg(long, value_name = "SHAPE", default_value = "random", value_parser = ["random", "ordered", "small", "large", "deep", "flat"])]
    pub shape: String,
    /// Copies extracted per run, each into its own directory (the seed: 10).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub copies: u32,
    /// Runs per policy (the seed: 4; 3 by default, so that the default
    /// sweep with its sync column ends in about five minutes).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// iolab's metadata policies, in the table's order ("none" for none).
    #[arg(long, value_name = "LIST", default_value = "sync,softdep,log,async")]
    pub policies: String,
    /// How iolab's file system is driven: direct (iolab's own tar and rm
    /// in-process, the file system's cost alone) or fuse (mounted through
    /// FUSE, with GNU tar and rm).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Driver::Direct)]
    pub driver: Driver,
    /// Kernel file systems to compare, a column each (ext4, ext4-journal,
    /// ext4-nojournal, ext4-sync, xfs, btrfs): each run makes one on a
    /// loop device over the same file (or on --target when it is a block
    /// device), mounts it and runs GNU tar and rm. Needs root and the
    /// mkfs tools.
    #[arg(long, value_name = "LIST")]
    pub kernel: Option<String>,
    /// A directory on a file system already mounted, as one more column:
    /// GNU tar and rm in a new directory under it (removed at the end);
    /// its type and options are reported.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The file or block device the file systems are made on, a new one
    /// per run (a target holding data needs --force); default: a
    /// temporary file, made sparse again before each run (each finds it
    /// as the first did), removed at the end.
    #[arg(long, value_name = "PATH")]
    pub target: Option<String>,
    /// iolab's file system on a simulated disk instead (sim:hdd[,...] or
    /// sim:ssd[,...], docs/sim.md): a new disk per run, every time modeled
    /// disk time, the same on any machine. iolab's policies in-process
    /// only (no --kernel, --dir or --driver fuse).
    #[arg(long, value_name = "SIM")]
    pub disk: Option<String>,
    /// Size of a file target to create (default: room for the copies
    /// twice over, and inodes for their entries, at least 1 GiB).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// The buffer cache of each mount.
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    pub cache: String,
    /// The log region each new file system gets (the `log` policy's
    /// journal; default: what mke2fs gives jbd2's journal on a device of
    /// the same size, 32 MiB on 1 GiB).
    #[arg(long, value_name = "SIZE")]
    pub log_size: Option<String>,
    /// Make file systems on a target that holds data.
    #[arg(long)]
    pub force: bool,
    /// The generated tree's seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON (schema iolab-sweep-policies, version 3)
    /// to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// The columns asked for, checked before anything is written.
fn columns(args: &PoliciesArgs, block_device: bool) -> Result<Vec<Column>, UsageError> {
    let mut columns = Vec::new();
    if !matches!(args.policies.trim(), "" | "none") {
        for p in args.policies.split(',') {
            columns.push(Column::Iolab(p.trim().parse::<Policy>().map_err(UsageError)?));
        }
    }
    let mut kernel = Vec::new();
    for k in args.kernel.iter().flat_map(|list| list.split(',')).filter(|k| !k.trim().is_empty()) {
        kernel.push(k.trim().parse::<KernelFs>().map_err(UsageError)?);
    }
    check_tools(&kernel, !block_device)?;
    columns.extend(kernel.into_iter().map(Column::Kernel));
    if let Some(dir) = &args.dir {
        columns.push(Column::Dir(UserDir::find(dir)?));
    }
    if args.disk.is_some() {
        if columns.iter().any(|c| !matches!(c, Column::Iolab(_))) || args.driver == Driver::Fuse {
            return Err(UsageError(
                "--disk: a simulated disk runs iolab's policies in-process only; leave out --kernel, --dir and \
                 --driver fuse (they run on real disks, timed by the wall clock)"
                    .into(),
            ));
        }
        if args.target.is_some() {
            return Err(UsageError(
                "--disk and --target: give one; the file systems go on one or the other".into(),
            ));
        }
    }
    if columns.is_empty() {
        return Err(UsageError(
            "nothing to compare: name policies (--policies sync,softdep,log,async), --kernel file systems or a --dir"
                .into(),
        ));
    }
    let gnu = args.driver == Driver::Fuse || columns.iter().any(|c| !matches!(c, Column::Iolab(_)));
    for program in ["tar", "rm"] {
        if gnu && find_program(program).is_none() {
            return Err(UsageError(format!(
                "GNU {program} is not installed; the kernel, --dir and fuse columns run it"
            )));
        }
    }
    if args.driver == Driver::Fuse && !Path::new("/dev/fuse").exists() {
        return Err(UsageError("--driver fuse: /dev/fuse is missing; use --driver direct".into()));
    }
    Ok(columns)
}

pub fn run(args: PoliciesArgs) -> anyhow::Result<ExitCode> {
    let plan = plan(&args)?;
    crate::check_destinations(args.json.as_deref(), args.plot.as_deref())?;
    let (entries, _) = archive_size(&plan.tar).map_err(|e| UsageError(e.to_string()))?;
    let progress = Progress::new(entries, plan.copies, u64::from(plan.repeat) * plan.columns.len() as u64)?;
    let swept = sweep::run(&plan, &progress);
    progress.finish();
    let sweep = swept?;
    if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        print!("{}", report::policies_table(&sweep));
    }
    let doc = report::json::SweepPoliciesDocument::new(env!("CARGO_PKG_VERSION"), lab::host::wire(), &sweep);
    if let Some(path) = &args.json {
        crate::write_json(path, &doc.to_json())?;
    }
    if let Some(dir) = &args.plot {
        crate::write_plots(dir, &doc.to_json())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The sweep the flags ask for, every flag checked.
fn plan(args: &PoliciesArgs) -> anyhow::Result<Plan> {
    if args.copies == 0 || args.repeat == 0 {
        return Err(UsageError("--copies and --repeat: give at least 1".into()).into());
    }
    let block_device = args.target.as_deref().is_some_and(sweep::is_block_device);
    let columns = columns(args, block_device)?;
    let cache_bytes = parse_bytes("cache", &args.cache).map_err(UsageError::from)?;
    let (tree_name, tar) = match &args.archive {
        Some(_) if args.files.is_some() || args.shape != "random" => {
            return Err(UsageError(
                "--files and --shape shape the generated tree, and --archive replaces it: give one or the other"
                    .into(),
            )
            .into());
        }
        Some(path) => {
            (path.display().to_string(), load_archive(path).map_err(|e| UsageError(e.to_string()))?.tar)
        }
        None => {
            let shape = TreeShape::parse(&args.shape).expect("clap took only the shapes' names");
            let files = args.files.unwrap_or(shape.default_files());
            if shape == TreeShape::Large && files > LARGE_FILES_MAX {
                return Err(UsageError(format!(
                    "--files {files} with --shape large: its files are 1 to 64 MiB (15 MiB on average) and the \
                     tree is made in memory, so at most {LARGE_FILES_MAX} files (about 1 GiB); give more \
                     --copies for a larger working set"
                ))
                .into());
            }
            let what = match shape {
                TreeShape::Random => "a generated source-like tree".to_string(),
                shape => format!("a generated tree of shape {}", shape.name()),
            };
            (format!("{what} (seed {}, {files} files)", args.seed), tree_archive(shape, args.seed, files))
        }
    };
    let size = args.size.as_deref().map(|s| parse_bytes("size", s)).transpose().map_err(UsageError::from)?;
    let log_bytes = args.log_size.as_deref().map(|s| parse_bytes("log-size", s)).transpose()?;
    Ok(Plan {
        tree_name,
        tar,
        copies: args.copies,
        repeat: args.repeat,
        columns,
        driver: args.driver.plan(),
        target: args.target.clone(),
        disk: args.disk.as_deref().map(sweep::SimDisk::parse).transpose()?,
        size,
        cache_bytes,
        cache: args.cache.clone(),
        mkfs: MkfsOptions { log_bytes, ..MkfsOptions::default() },
        force: args.force,
    })
}
