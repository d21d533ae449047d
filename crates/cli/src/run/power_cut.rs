//! `iolab run --power-cut TIME`: on simulated disks, what a power cut at
//! an instant of the run leaves. When the virtual clock reaches it (every
//! thread of the run waiting, every disk's model up to it), the images of
//! what the target and the journal disk hold durably are taken; after the
//! run they are checked as `iolab validate` checks a target after a crash:
//! the journal replayed from its image, every block of the target's image
//! against it. A journal disk whose cache acknowledges flushes it has not
//! done loses acknowledged records: blocks then hold writes the journal
//! has no durable record of ("ahead of the journal").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use device::{Device, MemDevice, Nanos};
use workloads::journal::JournalPlace;
use workloads::KeyMapSpec;

use super::prepare::Prepared;
use crate::UsageError;

/// The images a power cut took, and when.
type Images = Arc<Mutex<Option<(Vec<(u64, Vec<u8>)>, Vec<(u64, Vec<u8>)>, Nanos)>>>;

/// A power cut set up on a run's disks.
pub struct PowerCut {
    after: Duration,
    target_bytes: u64,
    images: Images,
}

impl PowerCut {
    /// Sets the cut `after` the start of `job`: one job on a simulated
    /// target, validated, its journal on a simulated disk.
    pub fn arm(jobs: &[Prepared], repeat: u32, after: Duration) -> Result<PowerCut, UsageError> {
        let [job] = jobs else {
            return Err(UsageError("--power-cut: one job at a time".into()));
        };
        if repeat != 1 {
            return Err(UsageError("--power-cut: one run (no --repeat)".into()));
        }
        let Some(base) = job.stack.origin.sim.as_ref().filter(|_| job.stack.log().is_none()) else {
            return Err(UsageError(
                "--power-cut: needs a simulated target (sim:...) with nothing above it; a real disk's power is \
                 cut with iolab crash or by hand"
                    .into(),
            ));
        };
        let journal = match job.spec.validate.as_ref().and_then(|v| v.journal.as_ref()).map(|j| &j.place) {
            Some(JournalPlace::Device(dev)) if dev.virtual_disk().is_some() => Arc::clone(dev),
            _ => return Err(UsageError(
                "--power-cut: needs --validate with its journal on a simulated disk (--journal sim:...), to \
                     check what the cut left"
                    .into(),
            )),
        };
        let target = Arc::clone(&base.disk);
        let clock = crate::stack::sim_clock();
        let images: Images = Arc::default();
        let taken = Arc::clone(&images);
        clock.at(clock.now() + after.as_nanos() as Nanos, move |t| {
            let target_pages = device::VirtualDisk::power_cut(target.as_ref());
            // Invariant: checked above that the journal is simulated.
            let journal_pages = journal.virtual_disk().map(|d| d.power_cut()).unwrap_or_default();
            *taken.lock().unwrap_or_else(|e| e.into_inner()) = Some((target_pages, journal_pages, t));
        });
        Ok(PowerCut { after, target_bytes: base.disk.size_bytes(), images })
    }

    /// After the run: checks what the cut left; the text to print and the
    /// exit status: 0 when every block is as the journal says, 1 when
    /// blocks are bad, 3 when the journal misses writes the target holds.
    pub fn check(self) -> anyhow::Result<(String, u8)> {
        let taken = self.images.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some((target_pages, journal_pages, _)) = taken else {
            return Ok((
                format!(
                    "power cut at {:.3} s: the run ended before it; nothing to check (give a shorter --power-cut)\n",
                    self.after.as_secs_f64()
                ),
                0,
            ));
        };
        let target = image("power-cut image of the target", self.target_bytes, &target_pages)?;
        let journal_bytes =
            journal_pages.last().map_or(4096, |(o, b)| o + b.len() as u64).div_ceil(4096) * 4096;
        let journal = image("power-cut image of the journal", journal_bytes, &journal_pages)?;
        // Every block: a write whose every record the cut lost is found too.
        let verdict = workloads::recover::recover_every_block(&target, &journal, false, &KeyMapSpec::AUTO)?;
        let status = match (verdict.errors() > 0, verdict.journal_incomplete()) {
            (true, _) => 1,
            (false, true) => crate::validate::EXIT_JOURNAL_INCOMPLETE,
            (false, false) => 0,
        };
        let mut text = format!(
            "power cut at {:.3} s of the run: what the target and the journal disk held durably, checked as iolab \
             validate checks a target after a crash\n",
            self.after.as_secs_f64()
        );
        text.push_str(&report::verdict_text(&verdict, crate::validate::EXIT_JOURNAL_INCOMPLETE));
        Ok((text, status))
    }
}

/// A sparse memory device of `bytes` holding `pages`.
fn image(name: &str, bytes: u64, pages: &[(u64, Vec<u8>)]) -> anyhow::Result<MemDevice> {
    let dev = MemDevice::with_sector(name, bytes, 512)?;
    for (offset, data) in pages {
        dev.write_at(data, *offset)?;
    }
    Ok(dev)
}
