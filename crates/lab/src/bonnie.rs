//! bonnie's six phases on a file, a device or a volume; on a directory,
//! as bonnie++ -d DIR runs them, the six phases on a test file in it and
//! then bonnie++'s file tests (`-n`) in a directory of their own there.

use std::path::Path;

use anyhow::Context;
use workloads::bonnie::{run_bonnie_telling, BonnieResult, BonnieSpec};
use workloads::tree::{run_file_tests, FileTestSpec};

use crate::stack::{self, Stack};
use crate::UsageError;

/// A bonnie run, every flag checked.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Bytes of the target used (on a directory: the test file's size;
    /// 0 runs the file tests alone); `None`: all of it.
    pub size: Option<u64>,
    /// The block phases' transfer size.
    pub chunk: u64,
    pub seeks: u64,
    pub seekers: u32,
    pub seed: u64,
    pub repeat: u32,
    pub buffered: bool,
    /// Write to a target that holds data.
    pub force: bool,
    /// On a directory: bonnie++'s file tests (`-n`), if any.
    pub files: Option<FileTestSpec>,
}

/// What a bonnie run tells the one following it.
pub trait Watch: Sync {
    /// Round `round` (from 0) of `rounds` begins.
    fn round(&self, round: u32, rounds: u32);
    /// Phase `k` of the six begins.
    fn phase(&self, k: usize);
    /// The phase under way is `done` of `total` steps through (chunks of
    /// the file, or seeks).
    fn advanced(&self, done: u64, total: u64);
    /// The round ended.
    fn round_done(&self);
}

/// `plan` on `target`: a directory as bonnie++ -d runs it, anything else
/// as a device; `--repeat` rounds.
pub fn run(plan: &Plan, target: &Path, watch: &dyn Watch) -> anyhow::Result<Vec<BonnieResult>> {
    if target.is_dir() {
        in_directory(plan, target, watch)
    } else {
        on_target(plan, target, false, watch)
    }
}

/// The six phases on `target` (a path, or anything Stack opens), run
/// `--repeat` times. `made` says the sweep created the file itself.
fn on_target(plan: &Plan, target: &Path, made: bool, watch: &dyn Watch) -> anyhow::Result<Vec<BonnieResult>> {
    let (size, chunk) = (plan.size, plan.chunk);
    let options = stack::OpenOptions::benchmark(!plan.buffered, size);
    let shown = target.to_str().context("the target's name is not UTF-8")?;
    let target = Stack::open(shown, &options)?;
    stack::check_writable(&target, plan.force || made)?;
    let dev = target.device().as_ref();
    let size_bytes = size.unwrap_or(dev.size_bytes() - dev.size_bytes() % chunk.max(1));
    let spec = BonnieSpec {
        size_bytes,
        chunk_bytes: chunk,
        seeks: plan.seeks,
        seekers: plan.seekers,
        seed: plan.seed,
    };
    spec.check(dev).map_err(UsageError::from)?;
    let cache = match (&target.origin.path, plan.buffered) {
        (None, _) => "in memory or a volume",
        (Some(_), false) => "O_DIRECT: the page cache is bypassed",
        (Some(_), true) => "buffered: figures include the page cache unless the size is well over RAM",
    };
    crate::say::info(format!("bonnie: {size_bytes} bytes of {} ({cache})", dev.name()));
    let mut results = Vec::with_capacity(plan.repeat as usize);
    for round in 0..plan.repeat {
        watch.round(round, plan.repeat);
        let tell = |k, done, total| {
            if done == 0 {
                watch.phase(k);
            }
            watch.advanced(done, total);
        };
        let result = run_bonnie_telling(dev, &spec, &tell);
        watch.round_done();
        results.push(result?);
    }
    target.close()?;
    Ok(results)
}

/// bonnie++ -d DIR: per repeat, the six phases on a test file of
/// `--size` in DIR (removed after), then the file tests in a directory of
/// their own there (emptied and removed by the tests' deletes).
fn in_directory(plan: &Plan, dir: &Path, watch: &dyn Watch) -> anyhow::Result<Vec<BonnieResult>> {
    let chunk = plan.chunk;
    let Some(size) = plan.size else {
        return Err(UsageError(format!(
            "{}: a directory needs --size, the test file's size (bonnie++ takes twice the memory so the page cache \
             cannot hold it; O_DIRECT here makes less enough), or --size 0 for the file tests alone",
            dir.display()
        ))
        .into());
    };
    let files = plan.files.as_ref();
    if size == 0 && files.is_none() {
        return Err(UsageError("--size 0 and -n 0: nothing to run".into()).into());
    }
    let (real, mount) = crate::mounts::mount_of(dir).map_err(UsageError)?;
    let scratch = real.join(format!("Bonnie.{}", std::process::id()));
    if let Some(f) = &files {
        crate::say::info(format!(
            "bonnie: file tests in {} on {}: {} files of {} to {} bytes{}",
            real.display(),
            mount.describe(),
            f.files,
            f.min_bytes,
            f.max_bytes,
            if f.dirs > 0 { format!(" in {} directories", f.dirs) } else { String::new() }
        ));
    }
    let mut results = Vec::with_capacity(plan.repeat as usize);
    for _ in 0..plan.repeat {
        let mut result = if size > 0 {
            let once = Plan { repeat: 1, size: Some(size), ..plan.clone() };
            let block = on_target(&once, &scratch, true, watch);
            let removed = std::fs::remove_file(&scratch)
                .with_context(|| format!("{}: cannot remove it", scratch.display()));
            let mut block = block?;
            removed?;
            block.remove(0)
        } else {
            BonnieResult {
                target: real.display().to_string(),
                spec: BonnieSpec {
                    size_bytes: 0,
                    chunk_bytes: chunk,
                    seeks: plan.seeks,
                    seekers: plan.seekers,
                    seed: plan.seed,
                },
                phases: Vec::new(),
                files: None,
            }
        };
        if let Some(spec) = files {
            std::fs::create_dir(&scratch)
                .with_context(|| format!("{}: cannot make it", scratch.display()))?;
            let tested = fsapi::HostFs::new(&scratch)
                .with_context(|| format!("{}: cannot open it", scratch.display()))
                .and_then(|fs| run_file_tests(&fs, fsapi::ROOT, spec).map_err(anyhow::Error::from));
            let removed = std::fs::remove_dir(&scratch)
                .with_context(|| format!("{}: cannot remove it", scratch.display()));
            result.files = Some(tested?);
            removed?;
        }
        result.target = real.display().to_string();
        results.push(result);
    }
    Ok(results)
}
