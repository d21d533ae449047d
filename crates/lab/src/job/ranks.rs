//! A run's plan under MPI's ranks (`mpirun -np N iolab run ...`): each
//! rank on targets of its own, or every rank on its own part of one
//! shared target (IOR's file per process and shared file), prepared so
//! that a shared target is made once.

use std::path::PathBuf;
use std::time::Duration;

use super::{Plan, Prepared};
use crate::mpi::Ranks;
use crate::UsageError;

/// Every job stopped `wall` into its run at the latest (IOR's
/// stonewall): the ranks end together.
pub fn stonewall(plan: &mut Plan, wall: Duration) {
    for (_, spec) in &mut plan.jobs {
        spec.runtime = Some(spec.runtime.map_or(wall, |r| r.min(wall)));
    }
}

/// Each rank on its own part of every job's target: the jobs' regions
/// split, and the targets' locks shared with the other ranks.
pub fn share(plan: &mut Plan, ranks: &Ranks) -> Result<(), UsageError> {
    split_regions(plan, ranks)?;
    plan.shared_with_ranks = true;
    Ok(())
}

/// What each rank writes when it runs on targets of its own, for
/// [`Ranks::own_paths`]. Memory and simulated targets live in each
/// rank's process.
pub fn private_paths(plan: &Plan) -> Vec<(&'static str, PathBuf)> {
    let mut paths = Vec::new();
    for (f, _) in &plan.jobs {
        let target = f.target.clone().filter(|t| !t.starts_with("mem:") && !t.starts_with("sim:"));
        paths.extend(target.map(|t| ("target", t.into())));
        paths.extend(f.journal.clone().map(|p| ("journal", p)));
        paths.extend(f.key_map_dir.clone().map(|p| ("key-map-dir", p)));
        paths.extend(f.log_device.clone().map(|p| ("log-device", p)));
    }
    paths
}

/// Every rank's jobs prepared, or every rank's error; on a shared target
/// rank 0 makes it first and the others then open it.
pub fn prepare(plan: &Plan, ranks: &Ranks, force: bool) -> anyhow::Result<Vec<Prepared>> {
    let shared = plan.shared_with_ranks;
    let jobs = if shared && ranks.rank != 0 {
        ranks.agreed(Ok(()))?;
        super::prepare::all(plan, force)
    } else {
        let jobs = super::prepare::all(plan, force);
        if shared {
            ranks.agreed(jobs.as_ref().map(|_| ()).map_err(|e| anyhow::anyhow!("{e:#}")))?;
        }
        jobs
    };
    ranks.agreed(jobs)
}

/// `--mpi-layout shared`: each rank takes its 1/N of every job's region,
/// in whole blocks of the largest transfer.
fn split_regions(plan: &mut Plan, ranks: &Ranks) -> Result<(), UsageError> {
    for (_, spec) in &mut plan.jobs {
        let Some(size) = spec.size_bytes else {
            return Err(UsageError(format!(
                "--mpi-layout shared: job {} has no --size; give the region the ranks split",
                spec.name
            )));
        };
        let unit = spec.bs.max_bytes().max(4096);
        let slice = size / ranks.size as u64 / unit * unit;
        if slice == 0 {
            return Err(UsageError(format!(
                "--mpi-layout shared: job {}'s region of {size} bytes gives {} ranks less than a {unit}-byte block each; give a larger --size",
                spec.name, ranks.size
            )));
        }
        // Reordered, a rank takes the part its neighbour wrote (IOR's -C).
        spec.offset_bytes += ranks.reordered.unwrap_or(ranks.rank) as u64 * slice;
        spec.size_bytes = Some(slice);
    }
    Ok(())
}
