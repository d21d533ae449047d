//! A power cut on simulated disks, at an instant of a validated run
//! (`iolab run --power-cut TIME`, `iolab sweep journal --power-cut TIME`):
//! TIME after the run starts (once its journal is made), with every
//! disk's model run up to that instant, the images of what the target and
//! the journal disk hold durably are taken; after the run they are
//! checked as `iolab validate` checks a target after a crash: the journal
//! replayed from its image, every block of the target's image against it.
//! A journal disk whose cache acknowledges flushes it has not done loses
//! acknowledged records: blocks then hold writes the journal has no
//! durable record of ("ahead of the journal").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use device::{Device, MemDevice, Nanos};
use workloads::recover::Verdict;
use workloads::KeyMapSpec;

/// The images a power cut took, and when.
type Images = Arc<Mutex<Option<(Vec<(u64, Vec<u8>)>, Vec<(u64, Vec<u8>)>, Nanos)>>>;

/// A power cut set up on a run's disks.
pub struct PowerCut {
    after: Duration,
    target_bytes: u64,
    images: Images,
}

impl PowerCut {
    /// Sets a cut `after` the start of the next run on the simulated
    /// disks' clock: images of what `target` and `journal` (both
    /// simulated) then hold durably.
    pub fn set(target: Arc<dyn Device>, journal: Arc<dyn Device>, after: Duration) -> PowerCut {
        let target_bytes = target.size_bytes();
        let images: Images = Arc::default();
        let taken = Arc::clone(&images);
        crate::stack::sim_clock().after_start(after.as_nanos() as Nanos, move |t| {
            let image = |d: &Arc<dyn Device>| d.virtual_disk().map(|v| v.power_cut()).unwrap_or_default();
            *taken.lock().unwrap_or_else(|e| e.into_inner()) = Some((image(&target), image(&journal), t));
        });
        PowerCut { after, target_bytes, images }
    }

    /// After the run: what the cut left, checked as `iolab validate`
    /// checks a target after a crash (every block), or `None` when the run
    /// ended before the cut.
    pub fn verdict(self) -> anyhow::Result<Option<Verdict>> {
        let taken = self.images.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some((target_pages, journal_pages, _)) = taken else { return Ok(None) };
        let target =
            MemDevice::with_pages("power-cut image of the target", self.target_bytes, 512, &target_pages)?;
        let journal_bytes =
            journal_pages.last().map_or(4096, |(o, b)| o + b.len() as u64).div_ceil(4096) * 4096;
        let journal =
            MemDevice::with_pages("power-cut image of the journal", journal_bytes, 512, &journal_pages)?;
        // Every block: a write whose every record the cut lost is found too.
        Ok(Some(workloads::recover::recover_every_block(&target, &journal, false, &KeyMapSpec::AUTO)?))
    }

    /// How long after the run's start the cut comes.
    pub fn after(&self) -> Duration {
        self.after
    }
}
