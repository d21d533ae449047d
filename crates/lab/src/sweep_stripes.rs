//! The first seed's stripe table (`iolab sweep stripes`): each layout
//! (the first drive alone, striped volumes of each stripe size, RAID-5)
//! built over the same drives without metadata and measured, bonnie's
//! phases or the `fs` mix, `repeat` times.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use device::Device;
use report::StripesRow;
use workloads::bonnie::{run_bonnie, BonnieSpec};
use workloads::{BlockSizes, Engine, JobSpec, Progress, Rw};

use crate::UsageError;

/// What each layout runs.
#[derive(Clone, Copy, Debug)]
pub enum Workload {
    /// bonnie's six phases (8 KiB transfers), as in the seed.
    Bonnie { seeks: u64 },
    /// Random 70/30 reads and writes with the `fs` transfer mix, this long.
    Fs { runtime: Duration },
}

/// A stripe sweep, every flag checked.
pub struct Plan {
    pub workload: Workload,
    /// Bytes of each layout measured.
    pub size: u64,
    pub repeat: u32,
    /// The drives are simulated disks (one virtual time for all).
    pub simulated: bool,
}

/// Each layout (a name, and the plex's organisation; none: the first
/// drive alone) measured over `drives`, in order.
/// `step(done, label)` is called as each run of a layout begins (`done`
/// of the `layouts.len() * plan.repeat` runs over).
pub fn run(
    plan: &Plan,
    drives: &[Arc<dyn Device>],
    layouts: &[(String, Option<String>)],
    step: &dyn Fn(u64, &str),
) -> anyhow::Result<Vec<StripesRow>> {
    let mut rows = Vec::with_capacity(layouts.len());
    for (k, (name, org)) in layouts.iter().enumerate() {
        let at = |r: u32| {
            let done = k as u64 * u64::from(plan.repeat) + u64::from(r);
            step(done, &format!("sweep: {name} ({}/{})", r + 1, plan.repeat));
        };
        rows.push(measure(plan, drives, name, org.as_deref(), &at)?);
    }
    Ok(rows)
}

/// Builds the layout (without metadata: the sweep's volumes live only for
/// the measurement) and measures it.
fn measure(
    plan: &Plan,
    drives: &[Arc<dyn Device>],
    name: &str,
    org: Option<&str>,
    at: &dyn Fn(u32),
) -> anyhow::Result<StripesRow> {
    let size = plan.size;
    let (target, vol): (Arc<dyn Device>, Option<Arc<volume::Volume>>) = match org {
        None => (Arc::clone(&drives[0]), None),
        Some(org) => {
            let mut text = String::new();
            let mut devices = HashMap::new();
            for (i, d) in drives.iter().enumerate() {
                text.push_str(&format!("drive d{i} device {}\n", d.name()));
                devices.insert(format!("d{i}"), Arc::clone(d));
            }
            text.push_str(&format!("volume {name}\nplex org {org}\n"));
            for i in 0..drives.len() {
                text.push_str(&format!("sd length 0 drive d{i}\n"));
            }
            let config = volume::parse(&text)?;
            let vol = volume::build(&config, &devices)?.remove(0);
            (vol.clone(), Some(vol))
        }
    };
    if size > target.size_bytes() {
        return Err(UsageError(format!(
            "--size: {size} bytes does not fit layout {name} ({} bytes); use a smaller --size or larger drives",
            target.size_bytes()
        ))
        .into());
    }
    let mut row = StripesRow { layout: name.into(), bonnie: Vec::new(), fs: Vec::new(), plex: None };
    for r in 0..plan.repeat {
        at(r);
        if let Some(vol) = &vol {
            vol.reset_stats();
        }
        measure_once(plan, &target, name, &mut row)?;
    }
    row.plex = vol.map(|v| v.report().plexes[0].counters);
    Ok(row)
}

/// One measurement of a layout, added to its row.
fn measure_once(
    plan: &Plan,
    target: &Arc<dyn Device>,
    name: &str,
    row: &mut StripesRow,
) -> anyhow::Result<()> {
    let size = plan.size;
    match plan.workload {
        Workload::Bonnie { seeks } => {
            let spec = BonnieSpec { size_bytes: size - size % 8192, seeks, ..BonnieSpec::default() };
            row.bonnie.push(run_bonnie(target.as_ref(), &spec)?);
        }
        Workload::Fs { runtime } => {
            // On simulated drives: a drive alone runs on the engine in
            // virtual time (four threads, one request each), a volume
            // with the sync engine's four threads in the drives' time.
            let (engine, clock) = match (target.virtual_disk().is_some(), plan.simulated) {
                (true, _) => (Engine::Virtual, device::Clock::Wall),
                (false, true) => (Engine::Sync, device::Clock::Virtual(crate::stack::sim_clock())),
                (false, false) => (Engine::Sync, device::Clock::Wall),
            };
            let job = JobSpec {
                name: name.into(),
                size_bytes: Some(size),
                rw: Rw::RandRw,
                read_pct: 70,
                bs: BlockSizes::parse("fs")?,
                threads: 4,
                engine,
                runtime: Some(runtime),
                clock,
                ..JobSpec::default()
            };
            row.fs.push(workloads::run_job(&job, Arc::clone(target), &Progress::default())?);
        }
    }
    Ok(())
}
