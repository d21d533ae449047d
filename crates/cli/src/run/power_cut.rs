//! A power cut on simulated disks in `iolab run --power-cut TIME`
//! (`lab::power_cut` takes the images): set up for the one validated job
//! on a simulated target with its journal on a simulated disk, and what
//! the cut left told as `iolab validate` tells it.

use std::sync::Arc;
use std::time::Duration;

use device::Device;
use lab::power_cut::PowerCut;
use workloads::journal::JournalPlace;

use crate::UsageError;
use lab::job::Prepared;

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
    let journal =
        match job.spec.validate.as_ref().and_then(|v| v.journal.as_ref()).map(|j| &j.place) {
            Some(JournalPlace::Device(dev)) if dev.virtual_disk().is_some() => Arc::clone(dev),
            _ => return Err(UsageError(
                "--power-cut: needs --validate with its journal on a simulated disk (--journal sim:...), to \
                 check what the cut left"
                    .into(),
            )),
        };
    let target: Arc<dyn Device> = base.disk.clone();
    Ok(PowerCut::set(target, journal, after))
}

/// After the run: checks what the cut left; the text to print and the
/// exit status: 0 when every block is as the journal says, 1 when
/// blocks are bad, 3 when the journal misses writes the target holds,
/// 4 when it is damaged (as `iolab validate`).
pub fn check(cut: PowerCut) -> anyhow::Result<(String, u8)> {
    let after = cut.after();
    let Some(verdict) = cut.verdict()? else {
        return Ok((
            format!(
                "power cut at {:.3} s: the run ended before it; nothing to check (give a shorter --power-cut)\n",
                after.as_secs_f64()
            ),
            0,
        ));
    };
    let status = crate::exit::verdict(report::Outcome::of(&verdict));
    let mut text = format!(
        "power cut at {:.3} s of the run: what the target and the journal disk held durably, checked as iolab \
         validate checks a target after a crash\n",
        after.as_secs_f64()
    );
    text.push_str(&report::verdict_text(&verdict, crate::exit::VERDICT_EXITS));
    Ok((text, status))
}
