//! `iolab sweep policies`: the first seed's table in one command. Each
//! run makes a new file system, extracts the archive's copies into
//! separate directories in-process (as GNU tar does) and unmounts, then
//! mounts again with a cold cache, removes every copy (as `rm -rf` does)
//! and unmounts; each phase timed from the mount to the end of the
//! unmount. Policies alternate within each repeat.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use ffs::{MkfsOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};
use workloads::spec::parse_bytes;
use workloads::tree::{archive_size, extract, load_archive, remove_tree, source_archive};

use crate::fs::tree::{in_process, Done, InProcess};
use crate::fs::BlockLogArgs;
use crate::UsageError;

#[derive(Debug, Args)]
pub struct PoliciesArgs {
    /// A tar archive (plain, gzip or xz) to extract, e.g. glibc-source's
    /// /usr/src/glibc/glibc-*.tar.xz; default: a seeded source-like tree
    /// (docs/fs.md).
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Files in the generated tree (without --archive).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub files: u32,
    /// Copies extracted per run, each into its own directory (the seed: 10).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub copies: u32,
    /// Runs per policy (the seed: 4).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub repeat: u32,
    /// The metadata policies, in the table's order.
    #[arg(long, value_name = "LIST", default_value = "sync,softdep,log,async")]
    pub policies: String,
    /// The file or block device the file systems are made on, a new one
    /// per run (a target holding data needs --force); default: a
    /// temporary file, removed at the end.
    #[arg(long, value_name = "PATH")]
    pub target: Option<String>,
    /// Size of a file target to create (default: room for the copies
    /// twice over, at least 1 GiB).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// The buffer cache of each mount.
    #[arg(long, value_name = "SIZE", default_value = "64m")]
    pub cache: String,
    /// Make file systems on a target that holds data.
    #[arg(long)]
    pub force: bool,
    /// The generated tree's seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON (schema iolab-sweep-policies, version 1)
    /// to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: PoliciesArgs) -> anyhow::Result<ExitCode> {
    if args.copies == 0 || args.repeat == 0 {
        return Err(UsageError("--copies and --repeat: give at least 1".into()).into());
    }
    let policies: Vec<Policy> = args
        .policies
        .split(',')
        .map(|p| p.trim().parse::<Policy>())
        .collect::<Result<_, _>>()
        .map_err(UsageError)?;
    if policies.is_empty() {
        return Err(UsageError("--policies: name at least one of sync, softdep, log and async".into()).into());
    }
    parse_bytes("cache", &args.cache).map_err(UsageError::from)?;
    if let Some(path) = &args.json {
        crate::check_output("json", path, true)?;
    }
    let (name, tar) = match &args.archive {
        Some(path) => {
            (path.display().to_string(), load_archive(path).map_err(|e| UsageError(e.to_string()))?.tar)
        }
        None => (
            format!("a generated source-like tree (seed {}, {} files)", args.seed, args.files),
            source_archive(args.seed, args.files),
        ),
    };
    let (entries, data_bytes) = archive_size(&tar).map_err(|e| UsageError(e.to_string()))?;
    let size = match &args.size {
        Some(s) => parse_bytes("size", s).map_err(UsageError::from)?,
        None => (2 * u64::from(args.copies) * (data_bytes + 4096 * entries)).max(1 << 30),
    };
    let temp = match &args.target {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("iolab-policies-").tempdir()?),
    };
    let target = match (&args.target, &temp) {
        (Some(t), _) => t.clone(),
        (None, Some(dir)) => dir.path().join("fs.img").display().to_string(),
        (None, None) => unreachable!("a temporary directory is made when no target is named"),
    };
    let mut runs: Vec<report::PolicyRuns> = policies
        .iter()
        .map(|p| report::PolicyRuns { policy: p.name().into(), ..Default::default() })
        .collect();
    let mut medium = String::new();
    for repeat in 0..args.repeat {
        for (i, &policy) in policies.iter().enumerate() {
            // The first file system made needs --force if the target holds
            // data; the later ones replace the sweep's own.
            let force = args.force || repeat > 0 || i > 0;
            let (stack, _) =
                crate::fs::make(&target, Some(size), &MkfsOptions::default(), force, None, &no_log())?;
            stack.close()?;
            let mount = InProcess { policy, cache: args.cache.clone(), direct: false, log: no_log() };
            let tar_done = in_process(&target, &mount, |fs| extract_copies(fs, &tar, args.copies))?;
            let rm_done = in_process(&target, &mount, |fs| remove_copies(fs, args.copies))?;
            if medium.is_empty() {
                medium = tar_done.media.iter().map(report::medium_kind).collect::<Vec<_>>().join(", ");
            }
            eprintln!(
                "repeat {}/{} {:<5} tar {}  rm {}",
                repeat + 1,
                args.repeat,
                policy.name(),
                report::min_sec(tar_done.seconds),
                report::min_sec(rm_done.seconds)
            );
            runs[i].tar.push(phase_run(&tar_done));
            runs[i].rm.push(phase_run(&rm_done));
        }
    }
    let shown_target = if args.target.is_some() { target.clone() } else { "a temporary file".to_string() };
    let sweep = report::PoliciesSweep {
        archive: name,
        entries,
        data_bytes,
        copies: args.copies,
        repeats: args.repeat,
        target: format!(
            "{shown_target} ({medium}), a new file system of {} per run",
            report::human_bytes(size)
        ),
        policies: runs,
    };
    if args.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
        print!("{}", report::policies_table(&sweep));
    }
    if let Some(path) = &args.json {
        let doc = report::json::SweepPoliciesDocument::new(env!("CARGO_PKG_VERSION"), &sweep);
        crate::write_json(path, &doc.to_json())?;
    }
    if let Some(dir) = temp {
        dir.close()?;
    }
    Ok(ExitCode::SUCCESS)
}

fn no_log() -> BlockLogArgs {
    BlockLogArgs::default()
}

fn extract_copies(fs: &dyn FileSystem, tar: &[u8], copies: u32) -> anyhow::Result<()> {
    for copy in 1..=copies {
        let name = format!("copy-{copy}");
        let dir = fs
            .mkdir(ROOT, OsStr::new(&name), Owner::root(0o755))
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let extracted = extract(fs, dir.ino, tar);
        fs.forget(dir.ino, 1);
        extracted?;
    }
    Ok(())
}

fn remove_copies(fs: &dyn FileSystem, copies: u32) -> anyhow::Result<()> {
    for copy in 1..=copies {
        let name = format!("copy-{copy}");
        remove_tree(fs, ROOT, OsStr::new(&name), &name)?;
    }
    Ok(())
}

fn phase_run(done: &Done) -> report::PhaseRun {
    let c = &done.unmounted.cache;
    report::PhaseRun {
        seconds: done.seconds,
        blocks_written: c.blocks_written,
        write_requests: c.write_requests,
        sync_writes: c.sync_writes,
        flushes: c.flushes,
        log_bytes: done.unmounted.log.map_or(0, |l| l.log_bytes_written),
    }
}
