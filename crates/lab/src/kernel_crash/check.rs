//! Each crash state of a recorded kernel file system checked as an
//! administrator would after the crash. With a journal (ext4, xfs,
//! btrfs): mounted, which replays it; every file fsync'd before the crash
//! read back; unmounted; and the file system's own checker, read-only,
//! must find nothing. Without one (ext4-nojournal): `e2fsck -p` first, as
//! at boot, which must leave nothing for `e2fsck -fn`; then mounted and
//! the fsync'd files read back.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use anyhow::Context;
use device::{Device, Event, Overlay, Replayer};
use workloads::crash::crash_points_of;
use workloads::fscrash::{FsCrashReport, FsViolationClass};
use workloads::kernel_mix::Fsynced;

use super::record::{mount, Recorded};
use super::spec::{KernelCrash, KEPT_IMAGES};
use crate::sweep_policies::kernel::KernelFs;
use crate::sweep_policies::kernel::LoopDevice;
use crate::sweep_policies::programs::find_program;

/// The unit a state's image file is written in: what mkfs or the history
/// wrote, the rest left a hole.
const BLOCK: u64 = 4096;

/// The largest write of a run of blocks to the image file.
const RUN_BYTES: u64 = 1 << 20;

/// How much of a checker's output a violation quotes.
const QUOTED_BYTES: usize = 400;

type Verdict = Option<(FsViolationClass, String)>;

/// Every crash state of the recording checked (or `only_state`).
pub fn check_states(
    crash: &KernelCrash,
    recorded: Recorded,
    dir: &Path,
    progress: &dyn Fn(u64, u64),
) -> anyhow::Result<FsCrashReport> {
    let Recorded { initial, events, fsynced, .. } = recorded;
    let points = crash_points_of(&events, 0, crash.sampled_states, crash.seed);
    let mut report = FsCrashReport {
        operations: crash.operations,
        writers: 1,
        fsyncs: fsynced.fsyncs(),
        events: events.len(),
        writes: events.iter().filter(|e| matches!(e, Event::Write { .. })).count(),
        flushes: events.iter().filter(|e| matches!(e, Event::Flush { .. })).count(),
        ..FsCrashReport::default()
    };
    let mut blocks = nonzero_blocks(&initial)?;
    let mut replayer = Replayer::new(events, vec![initial]);
    let mut scanned = 0;
    let total = points.len() as u64;
    let file = dir.join("state.img");
    let mnt = dir.join("mnt");
    for (state, (point, sampled)) in points.into_iter().enumerate() {
        let state = state as u64;
        for event in &replayer.events()[scanned..point.after_events] {
            if let Event::Write { offset, data, .. } = event {
                blocks.extend(offset / BLOCK..(offset + data.len() as u64).div_ceil(BLOCK));
            }
        }
        scanned = point.after_events;
        if crash.stop.is_some_and(|stop| stop.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(crate::Interrupted(format!(
                "interrupted after {} states checked ({} violations); nothing is left mounted or attached",
                report.states_checked, report.violations
            ))
            .into());
        }
        let image = replayer.images_at(point)?.remove(0);
        write_image(&image, &blocks, &file)?;
        let kept = crash.keep_images.as_ref().filter(|_| report.violations < KEPT_IMAGES);
        let kept = match kept {
            Some(dir) => {
                let keep = dir.join(format!("state-{state}.img"));
                std::fs::copy(&file, &keep).with_context(|| format!("cannot write {}", keep.display()))?;
                Some(keep)
            }
            None => None,
        };
        let verdict = check_one(crash, &file, &mnt, &fsynced, point.after_events, &mut report)?;
        // A state that kept its promise leaves no image behind.
        if let (Some(keep), None) = (kept, &verdict) {
            std::fs::remove_file(&keep).with_context(|| format!("cannot remove {}", keep.display()))?;
        }
        report.tally(state, &point, sampled, verdict);
        progress(report.states_checked, total);
    }
    // A run that checked nothing passes nothing.
    if report.states_checked == 0 {
        return Err(crate::UsageError(
            "no crash state was checked: the history holds no flush and --states is 0; give --states N"
                .into(),
        )
        .into());
    }
    Ok(report)
}

/// The blocks of `dev` that hold anything but zeros.
fn nonzero_blocks(dev: &dyn Device) -> anyhow::Result<BTreeSet<u64>> {
    let mut found = BTreeSet::new();
    let mut buf = vec![0u8; RUN_BYTES as usize];
    let size = dev.size_bytes();
    let mut at = 0;
    while at < size {
        let n = (size - at).min(RUN_BYTES) as usize;
        dev.read_at(&mut buf[..n], at)?;
        for (i, block) in buf[..n].chunks(BLOCK as usize).enumerate() {
            if block.iter().any(|&b| b != 0) {
                found.insert(at / BLOCK + i as u64);
            }
        }
        at += n as u64;
    }
    Ok(found)
}

/// A new image file holding `image`'s `blocks` (the rest holes, zeros).
fn write_image(image: &Overlay, blocks: &BTreeSet<u64>, file: &Path) -> anyhow::Result<()> {
    let size = image.size_bytes();
    let out = std::fs::File::create(file).with_context(|| format!("cannot make {}", file.display()))?;
    out.set_len(size)?;
    let mut buf = vec![0u8; RUN_BYTES as usize];
    let mut blocks = blocks.iter().copied().filter(|&b| b * BLOCK < size).peekable();
    while let Some(first) = blocks.next() {
        let mut last = first;
        while (last + 1 - first) * BLOCK < RUN_BYTES && blocks.peek() == Some(&(last + 1)) {
            last += 1;
            blocks.next();
        }
        let (at, end) = (first * BLOCK, ((last + 1) * BLOCK).min(size));
        let n = (end - at) as usize;
        image.read_at(&mut buf[..n], at)?;
        out.write_all_at(&buf[..n], at)?;
    }
    Ok(())
}

/// One state's image checked against the promise of `crash.fs`.
fn check_one(
    crash: &KernelCrash,
    file: &Path,
    mnt: &Path,
    fsynced: &Fsynced,
    after_events: usize,
    report: &mut FsCrashReport,
) -> anyhow::Result<Verdict> {
    if crash.fs == KernelFs::Ext4NoJournal {
        let path = file.display().to_string();
        let (status, said) = checker("e2fsck", &["-p", &path])?;
        let said = said.replace(&path, "IMAGE");
        if status >= 4 {
            return Ok(Some((FsViolationClass::DamageLeft, format!("e2fsck -p (exit {status}): {said}"))));
        }
        if status != 0 {
            report.needed_repair += 1;
        }
        if let Some(left) = read_only_check(crash.fs, file)? {
            return Ok(Some((FsViolationClass::DamageLeft, format!("after e2fsck -p, {left}"))));
        }
        return durable_check(crash, file, mnt, fsynced, after_events);
    }
    if let Some(violation) = durable_check(crash, file, mnt, fsynced, after_events)? {
        return Ok(Some(violation));
    }
    Ok(read_only_check(crash.fs, file)?.map(|found| (FsViolationClass::NotClean, found)))
}

/// Mounts the state (a journal is replayed here) and reads back every
/// file fsync'd before the crash; unmounts.
fn durable_check(
    crash: &KernelCrash,
    file: &Path,
    mnt: &Path,
    fsynced: &Fsynced,
    after_events: usize,
) -> anyhow::Result<Verdict> {
    let (lo, _) = LoopDevice::attach_with(file, Some(crash.sector_bytes))?;
    let mounted = match mount(crash, &lo.device, mnt) {
        Ok(m) => m,
        Err(e) => return Ok(Some((FsViolationClass::Unreadable, format!("the state does not mount: {e}")))),
    };
    let host = fsapi::HostFs::new(mnt).with_context(|| format!("cannot open {}", mnt.display()))?;
    let lost = fsynced.lost(&host, after_events);
    drop(host);
    mounted.unmount()?;
    drop(lo);
    Ok(lost.map(|lost| (FsViolationClass::FsyncLost, lost)))
}

/// The file system's own checker, changing nothing: what it found, if
/// anything.
fn read_only_check(fs: KernelFs, file: &Path) -> anyhow::Result<Option<String>> {
    let path = file.display().to_string();
    let (program, args): (&str, Vec<&str>) = match fs {
        KernelFs::Xfs => ("xfs_repair", vec!["-n", "-f", &path]),
        KernelFs::Btrfs => ("btrfs", vec!["check", "--readonly", &path]),
        _ => ("e2fsck", vec!["-fn", &path]),
    };
    let (status, said) = checker(program, &args)?;
    let said = said.replace(&path, "IMAGE");
    Ok((status != 0)
        .then(|| format!("{program} {} (exit {status}): {said}", args[..args.len() - 1].join(" "))))
}

/// Runs a checker; its exit status and what it said (both streams, the
/// first lines).
fn checker(program: &str, args: &[&str]) -> anyhow::Result<(i32, String)> {
    let path = find_program(program).unwrap_or_else(|| program.into());
    let out = Command::new(&path).args(args).output().with_context(|| format!("cannot run {program}"))?;
    let mut said = Vec::new();
    said.write_all(&out.stdout)?;
    said.write_all(&out.stderr)?;
    let said = String::from_utf8_lossy(&said);
    let mut quoted: String =
        said.split('\n').filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(" / ");
    if quoted.len() > QUOTED_BYTES {
        let cut = (0..=QUOTED_BYTES).rev().find(|&i| quoted.is_char_boundary(i)).unwrap_or(0);
        quoted.truncate(cut);
        quoted.push_str(" ...");
    }
    Ok((out.status.code().unwrap_or(-1), quoted))
}
