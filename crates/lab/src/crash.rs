//! The block stacks `iolab crash` builds on recording devices (the block
//! log inside its device or on a second one, in each mode; RAID-5 with
//! and without its stripe log), each crash state checked against the
//! stack's promise by `workloads::crash`; on simulated disks, power cuts
//! instead. The file system's stacks are `workloads::fscrash`'s own.

use std::sync::Arc;

use blocklog::{HomeWrites, Mode, Placement, StripeLog};
use device::Device;
use workloads::crash::{
    enumerate, enumerate_power_cuts, BuildStack, CrashError, CrashReport, CrashSpec, ReopenStack, Views,
};

use crate::UsageError;

/// RAID-5 stacks: drives, stripe size.
const RAID5_DRIVES: usize = 4;
const RAID5_STRIPE_BYTES: u64 = 16 * 1024;

/// A block stack to crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockStack {
    /// A device behind the block log in `mode`; `separate`: the log on a
    /// second device, crashed at the same instant.
    Logged { mode: Mode, separate: bool, home: HomeWrites },
    /// A RAID-5 volume of four drives (stripe 16 KiB); `logged`: with a
    /// stripe log on a fifth device.
    Raid5 { logged: bool },
}

/// One crash run of a block stack.
pub struct BlockCrash<'a> {
    pub stack: BlockStack,
    pub spec: CrashSpec,
    /// The data the stack holds, and its log's size.
    pub data_bytes: u64,
    pub log_bytes: u64,
    /// `sim:...`: power cuts on simulated disks of this model instead.
    pub disk: Option<&'a str>,
}

/// Every crash state of `crash`'s stack checked; a spec the enumerator
/// refuses is a usage error.
pub fn crash_block(crash: &BlockCrash<'_>) -> anyhow::Result<CrashReport> {
    let BlockCrash { stack, spec, data_bytes, log_bytes, disk } = crash;
    match *stack {
        BlockStack::Logged { mode, separate, home } => {
            crash_logged(spec, (mode, separate, home), *data_bytes, *log_bytes, *disk)
        }
        BlockStack::Raid5 { logged } => crash_raid5(spec, logged, *data_bytes, *log_bytes, *disk),
    }
    .map_err(usage)
}

/// A crash enumerator's error, a spec it refused told as the usage error
/// it is.
pub fn usage(e: CrashError) -> anyhow::Error {
    match e {
        CrashError::Spec(what) => anyhow::Error::from(UsageError(what)),
        other => anyhow::Error::from(other),
    }
}

fn crash_logged(
    spec: &CrashSpec,
    (mode, separate, home): (Mode, bool, HomeWrites),
    data_bytes: u64,
    log_bytes: u64,
    disk: Option<&str>,
) -> Result<CrashReport, CrashError> {
    let build = move |raw: Vec<Arc<dyn Device>>| -> Result<Arc<dyn Device>, String> {
        let placement = match separate {
            true => Placement::Separate { log: Arc::clone(&raw[1]) },
            false => Placement::Inside { log_bytes },
        };
        Ok(Arc::new(crate::stack::log_over(Arc::clone(&raw[0]), placement, mode, home)?))
    };
    let reopen = move |images: Vec<Arc<dyn Device>>| -> Result<Views, String> {
        let log = separate.then(|| Arc::clone(&images[1]));
        let dev = crate::stack::reopen_log_over(Arc::clone(&images[0]), log, mode)?;
        Ok(vec![(String::new(), Arc::new(dev) as Arc<dyn Device>)])
    };
    let (build, reopen): (&BuildStack<'_>, &ReopenStack<'_>) = (&build, &reopen);
    let sizes = if separate { vec![data_bytes, log_bytes] } else { vec![log_bytes + data_bytes] };
    enumerate_on(spec, &sizes, build, reopen, disk)
}

/// Every crash state of the stack's recorded history on memory devices of
/// `sizes`; with `disk`, the power cuts of the stack on simulated disks of
/// that model instead (each at least 1 MiB, in whole 4 KiB), on a clock
/// of their own.
fn enumerate_on(
    spec: &CrashSpec,
    sizes: &[u64],
    build: &BuildStack<'_>,
    reopen: &ReopenStack<'_>,
    disk: Option<&str>,
) -> Result<CrashReport, CrashError> {
    let Some(model) = disk else { return enumerate(spec, sizes, build, reopen) };
    let clock = sim::VirtualClock::new();
    let disks = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            let kib = size.max(1 << 20).next_multiple_of(4096) / 1024;
            let text = format!("{},size={kib}k", model.strip_prefix("sim:").unwrap_or(model));
            let mut parsed =
                sim::SimSpec::parse(&text).map_err(|e| CrashError::Spec(format!("--disk {model}: {e}")))?;
            parsed.set_data(sim::Data::Keep);
            let dev = sim::SimDevice::new(format!("{model} #{i}"), parsed, Arc::clone(&clock))?;
            Ok(dev as Arc<dyn Device>)
        })
        .collect::<Result<Vec<_>, CrashError>>()?;
    enumerate_power_cuts(spec, &disks, build, reopen)
}

/// Four drives sized for `data_bytes` of volume, and a log device.
fn crash_raid5(
    spec: &CrashSpec,
    logged: bool,
    data_bytes: u64,
    log_bytes: u64,
    disk: Option<&str>,
) -> Result<CrashReport, CrashError> {
    let per_drive = data_bytes.div_ceil(RAID5_DRIVES as u64 - 1).next_multiple_of(RAID5_STRIPE_BYTES);
    let drive_bytes = volume::DATA_START_BYTES + per_drive;
    let mut sizes = vec![drive_bytes; RAID5_DRIVES];
    if logged {
        sizes.push(log_bytes);
    }
    let mut text = String::new();
    for d in 0..RAID5_DRIVES {
        text += &format!("drive d{d} device d{d}\n");
    }
    text += &format!("volume r5\n plex org raid5 {}s\n", RAID5_STRIPE_BYTES / 512);
    for d in 0..RAID5_DRIVES {
        text += &format!("  sd length {}s drive d{d}\n", per_drive / 512);
    }
    let config = volume::parse(&text).map_err(|e| CrashError::Build(e.to_string()))?;
    let build = move |raw: Vec<Arc<dyn Device>>| -> Result<Arc<dyn Device>, String> {
        let devices = (0..RAID5_DRIVES).map(|d| (format!("d{d}"), Arc::clone(&raw[d]))).collect();
        // The crash stacks start on new memory drives: every byte reads zero.
        let set = volume::create(&config, &devices, &|_, _, _| true).map_err(|e| e.to_string())?;
        let vol = Arc::clone(&set.volumes[0]);
        if logged {
            let homes = vol.raid5_homes().ok_or("the volume has no RAID-5 plex")?;
            let wal = StripeLog::format(Arc::clone(&raw[RAID5_DRIVES]), homes).map_err(|e| e.to_string())?;
            vol.set_write_ahead_log(Arc::new(wal)).map_err(|e| e.to_string())?;
        }
        Ok(vol)
    };
    let reopen = move |images: Vec<Arc<dyn Device>>| -> Result<Views, String> {
        let assemble = || -> Result<Arc<volume::Volume>, String> {
            let set = volume::assemble(&images[..RAID5_DRIVES]).map_err(|e| e.to_string())?;
            Ok(Arc::clone(&set.volumes[0]))
        };
        let vol = assemble()?;
        if logged {
            let homes = vol.raid5_homes().ok_or("the volume has no RAID-5 plex")?;
            // A replay that stops at damage is an error: the open fails.
            StripeLog::open(Arc::clone(&images[RAID5_DRIVES]), homes).map_err(|e| e.to_string())?;
        }
        let mut views: Vec<(String, Arc<dyn Device>)> = vec![("all drives up".into(), vol)];
        for d in 0..RAID5_DRIVES {
            let degraded = assemble()?;
            degraded.set_state(&format!("d{d}"), volume::State::Down).map_err(|e| e.to_string())?;
            views.push((format!("drive d{d} failed after the crash"), degraded));
        }
        Ok(views)
    };
    let (build, reopen): (&BuildStack<'_>, &ReopenStack<'_>) = (&build, &reopen);
    enumerate_on(spec, &sizes, build, reopen, disk)
}
