//! `--disk sim:...`: iolab's file system on a simulated disk (docs/sim.md),
//! a new disk per run, the file system on its first bytes as on a
//! partition at the start of the disk. Each phase is timed by the disk's
//! virtual clock: the modeled time of the disk's requests, issued one
//! after another as the in-process work makes them, the CPU's own time not
//! counted. The mount's syncer runs in the same virtual time: whenever the
//! clock passes a second, between two entries of the work, the file
//! system's periodic work runs (its ages on the same clock), so the whole
//! run is one sequence of requests and two runs give the same times.

use std::ffi::OsStr;
use std::sync::Arc;

use device::{Clock, Device, Slice, VirtualClock};
use ffs::{Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::{FileSystem, Owner, ROOT};
use sim::{Data, SimDevice, SimSpec};
use workloads::tree::{extract_observed, remove_tree_observed};

use super::watch;
use crate::UsageError;

/// A simulated disk to make each run's file system on.
pub struct SimDisk {
    spec: SimSpec,
}

impl SimDisk {
    /// `sim:hdd[,...]` or `sim:ssd[,...]`; the data is kept whatever the
    /// spec says (the file system reads back what it wrote).
    pub fn parse(text: &str) -> Result<SimDisk, UsageError> {
        let model = text.strip_prefix("sim:").ok_or_else(|| {
            UsageError(format!(
                "--disk {text}: name a simulated disk, sim:hdd[,...] or sim:ssd[,...] (docs/sim.md)"
            ))
        })?;
        let mut spec = SimSpec::parse(model).map_err(|e| UsageError(format!("--disk {text}: {e}")))?;
        if spec.data() == Data::Discard {
            return Err(UsageError(format!(
                "--disk {text}: the file system reads back what it writes; leave data= out"
            )));
        }
        spec.set_data(Data::Keep);
        Ok(SimDisk { spec })
    }

    pub fn describe(&self) -> String {
        self.spec.to_string()
    }

    /// Checks that a file system of `size` fits on the disk.
    pub fn check_size(&self, size: u64) -> Result<(), UsageError> {
        if size > self.spec.size_bytes() {
            return Err(UsageError(format!(
                "--disk {}: holds {} bytes, less than the file system's {size} (give --size or a larger size=)",
                self.spec,
                self.spec.size_bytes()
            )));
        }
        Ok(())
    }

    /// One run under `policy`: a new disk, mkfs on its first `size`
    /// bytes, the tar phase and the rm phase, each timed in modeled time.
    #[allow(clippy::too_many_arguments)]
    pub fn run_once(
        &self,
        policy: Policy,
        size: u64,
        cache_bytes: u64,
        mkfs: &MkfsOptions,
        tar: &[u8],
        copies: u32,
        phases: &watch::Run,
    ) -> anyhow::Result<(report::PhaseRun, report::PhaseRun)> {
        let clock = VirtualClock::new();
        let disk: Arc<dyn Device> = SimDevice::new("sim", self.spec.clone(), Arc::clone(&clock))?;
        let dev: Arc<dyn Device> = Arc::new(Slice::new(disk, 0, size / 4096 * 4096)?);
        ffs::mkfs(&dev, mkfs)?;
        let mount = MountOptions {
            policy,
            cache_bytes,
            clock: Clock::Virtual(Arc::clone(&clock)),
            commits: ffs::Commits::Caller,
            // A new file system per run: clean.
            unclean: ffs::Unclean::Refuse,
        };
        let tar_run = phase(&dev, &clock, &mount, |fs, tick| {
            let progress = phases.phase("tar");
            for copy in 1..=copies {
                let name = format!("copy-{copy}");
                let dir = fs
                    .mkdir(ROOT, OsStr::new(&name), Owner::root(0o755))
                    .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
                let extracted = extract_observed(fs, dir.ino, tar, &mut || {
                    progress.entry();
                    tick();
                });
                fs.forget(dir.ino, 1);
                extracted?;
                progress.copy_done(copy)?;
            }
            Ok(())
        })?;
        let rm_run = phase(&dev, &clock, &mount, |fs, tick| {
            let progress = phases.phase("rm");
            for copy in 1..=copies {
                let name = format!("copy-{copy}");
                remove_tree_observed(fs, ROOT, OsStr::new(&name), &name, tick)?;
                progress.copy_done(copy)?;
            }
            Ok(())
        })?;
        Ok((tar_run, rm_run))
    }
}

/// Mounts (a cold cache), runs `work` and unmounts, on the virtual clock;
/// `work` calls the tick it is given between entries, which runs the
/// syncer's periodic work for each virtual second passed.
fn phase(
    dev: &Arc<dyn Device>,
    clock: &VirtualClock,
    mount: &MountOptions,
    work: impl FnOnce(&dyn FileSystem, &mut dyn FnMut()) -> anyhow::Result<()>,
) -> anyhow::Result<report::PhaseRun> {
    let start = clock.now();
    let fs = Ffs::mount(Arc::clone(dev), mount)?;
    let mut next_tick = start + 1_000_000_000;
    let mut syncer_failed = None;
    let worked = work(&fs, &mut || {
        while clock.now() >= next_tick && syncer_failed.is_none() {
            next_tick += 1_000_000_000;
            if let Err(e) = fs.tick(ffs::SYNCER_AGE) {
                syncer_failed = Some(e);
            }
        }
    });
    let unmounted = fs.unmount();
    worked?;
    if let Some(e) = syncer_failed {
        return Err(anyhow::anyhow!("the syncer's write-back failed: {e}"));
    }
    let unmounted = unmounted?;
    let c = &unmounted.cache;
    Ok(report::PhaseRun {
        seconds: (clock.now() - start) as f64 / 1e9,
        blocks_written: c.blocks_written,
        write_requests: c.write_requests,
        sync_writes: Some(c.sync_writes),
        flushes: c.flushes,
        log_bytes: Some(unmounted.log.map_or(0, |l| l.log_bytes_written)),
    })
}
