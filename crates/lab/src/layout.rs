//! A sweep's region laid out before it runs.

use anyhow::Context;
use workloads::Pattern;

/// Lays out `range` of a device a sweep reads (and writes anyway) with
/// random data, so that its reads never measure holes; says so.
pub fn lay_out_for_sweep(device: &dyn device::Device, range: std::ops::Range<u64>) -> anyhow::Result<()> {
    let report = workloads::layout::lay_out(device, range, Pattern::Random, 1, true, &|_, _| {})
        .with_context(|| format!("{}: cannot lay out the region the sweep reads", device.name()))?;
    if report.laid_out_bytes > 0 {
        crate::say::info(format!(
            "sweep: laid out {} MiB of holes in {} in {:.1} s, so that reads measure the disk",
            report.laid_out_bytes >> 20,
            device.name(),
            report.seconds
        ));
    }
    Ok(())
}
