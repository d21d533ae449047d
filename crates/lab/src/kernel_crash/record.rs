//! The recording: mkfs on an image file, the image served through FUSE
//! from a recording device, a loop device on the served file, the kernel
//! file system mounted on it and the mix run inside; everything undone in
//! reverse order on every way out.

use std::io::Read;
use std::path::Path;
use std::sync::{mpsc, Arc};

use anyhow::{bail, Context};
use device::{Device, Event, MemDevice, Recording, RecordingDevice};
use fsapi::FileSystem;
use workloads::kernel_mix::{run_archive_on, run_mix_on, Fsynced};

use super::image::{ImageFs, IMAGE_NAME};
use super::spec::{default_size, KernelCrash};
use crate::sweep_policies::kernel::{LoopDevice, Mounted};
use crate::sweep_policies::programs::run;
use crate::UsageError;

/// What the recording leaves: the image as mkfs made it, the history
/// after it, and what the fsyncs made durable.
pub struct Recorded {
    pub initial: MemDevice,
    pub events: Vec<Event>,
    pub fsynced: Fsynced,
    pub direct_io: bool,
    pub mkfs: String,
}

/// Makes the file system and records the mix on it (see the module).
pub fn record(crash: &KernelCrash, dir: &Path) -> anyhow::Result<Recorded> {
    let made = dir.join("made.img");
    let mkfs = make(crash, &made)?;
    let initial = load(&made, crash.size_bytes, crash.sector_bytes)?;
    let live = load(&made, crash.size_bytes, crash.sector_bytes)?;
    std::fs::remove_file(&made)?;
    let recording = Recording::new();
    let dev: Arc<dyn Device> = Arc::new(RecordingDevice::new(Arc::new(live), 0, Arc::clone(&recording)));
    let image: Arc<dyn FileSystem> = Arc::new(ImageFs::new(dev, crash.drop_flushes));
    let front = dir.join("front");
    let mnt = dir.join("mnt");
    std::fs::create_dir(&front)?;
    std::fs::create_dir(&mnt)?;
    let serving = fusefront::Serving {
        threads: 2,
        writeback_cache: false,
        transport: fusefront::Transport::Dev,
        allow_other: false,
        direct_io_below_bytes: None,
    };
    let (mounted, served) = mpsc::channel();
    let (ran, server) = std::thread::scope(|s| {
        let server = s.spawn(|| {
            fusefront::serve(image, &front, serving, move || {
                let _ = mounted.send(());
            })
        });
        // No message: the session ended before the mount (its error below).
        let ran = match served.recv() {
            Ok(()) => {
                // Unmounted however this ends (a panic too), so that the
                // server's thread ends and the scope with it.
                let _front = FrontMount(&front);
                Some(run_in_mount(crash, &front.join(IMAGE_NAME), &mnt, &recording))
            }
            Err(_) => None,
        };
        (ran, server.join())
    });
    let served = server.map_err(|_| anyhow::anyhow!("the FUSE server of the image panicked"))?;
    let (fsynced, direct_io) = match ran {
        Some(ran) => ran?,
        None => {
            served.context("serving the image through FUSE")?;
            bail!("the FUSE session of the image ended before it was mounted");
        }
    };
    served.context("serving the image through FUSE")?;
    Ok(Recorded { initial, events: recording.events(), fsynced, direct_io, mkfs })
}

/// The image's FUSE mount, unmounted when dropped.
struct FrontMount<'a>(&'a Path);

impl Drop for FrontMount<'_> {
    fn drop(&mut self) {
        if let Err(e) = fusefront::unmount(self.0) {
            crate::say::warning(format!("cannot unmount {}: {e}", self.0.display()));
        }
    }
}

/// The loop device on the served image, the file system mounted, the mix
/// run, all undone; returns what the fsyncs made durable and whether the
/// loop device does direct I/O.
fn run_in_mount(
    crash: &KernelCrash,
    image: &Path,
    mnt: &Path,
    recording: &Arc<Recording>,
) -> anyhow::Result<(Fsynced, bool)> {
    let (lo, direct) = LoopDevice::attach_with(image, Some(crash.sector_bytes))?;
    let mounted = mount(crash, &lo.device, mnt)?;
    let host = fsapi::HostFs::new(mnt).with_context(|| format!("cannot open {}", mnt.display()))?;
    let fsynced = match &crash.archive {
        Some(tar) => run_archive_on(&host, recording, tar),
        None => run_mix_on(&host, recording, crash.operations, crash.fsync_every, crash.seed),
    }
    .map_err(|e| anyhow::anyhow!("the workload on {}: {e}", crash.fs.name()))?;
    drop(host);
    mounted.unmount()?;
    drop(lo);
    Ok((fsynced, direct))
}

/// Mounts `device` at `mnt` as `crash` asks; unmounted when the guard drops.
pub(super) fn mount<'a>(crash: &KernelCrash, device: &str, mnt: &'a Path) -> anyhow::Result<Mounted<'a>> {
    let shown = mnt.display().to_string();
    let mut args = vec!["-t", crash.fs.fs_type()];
    let options: Vec<&str> = crash.fs.options().into_iter().chain(crash.mount_options.as_deref()).collect();
    let options = options.join(",");
    if !options.is_empty() {
        args.extend(["-o", &options]);
    }
    args.extend([device, shown.as_str()]);
    run("mount", &args)?;
    Ok(Mounted::new(mnt))
}

/// mkfs on a new image file of the crash's size, through a loop device
/// with the crash's sectors (mkfs sizes its own by them); returns its
/// command line.
fn make(crash: &KernelCrash, image: &Path) -> anyhow::Result<String> {
    let file = std::fs::File::create(image).with_context(|| format!("cannot make {}", image.display()))?;
    file.set_len(crash.size_bytes)?;
    drop(file);
    let (lo, _) = LoopDevice::attach_with(image, Some(crash.sector_bytes))?;
    let (program, args) = crash.fs.mkfs();
    let mut args: Vec<&str> = args.to_vec();
    // Inode tables and the journal written now, not by a thread of the
    // kernel's after the mount, in the middle of the recording.
    if crash.fs.fs_type() == "ext4" {
        args.extend(["-E", "lazy_itable_init=0,lazy_journal_init=0"]);
    }
    let shown = format!("{program} {} DEVICE", args.join(" "));
    args.push(&lo.device);
    run(program, &args).map_err(|e| {
        anyhow::Error::from(UsageError(format!(
            "{e}; a larger --size may be what {} needs (default {} MiB)",
            crash.fs.name(),
            default_size(crash.fs) >> 20
        )))
    })?;
    Ok(shown)
}

/// An image file read into memory (its runs of zeros left as they are).
fn load(path: &Path, size: u64, sector_bytes: u32) -> anyhow::Result<MemDevice> {
    let dev = MemDevice::with_sector(format!("mem:{size}"), size, sector_bytes)?;
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < size {
        let n = (size - at).min(buf.len() as u64) as usize;
        file.read_exact(&mut buf[..n])?;
        if buf[..n].iter().any(|&b| b != 0) {
            dev.write_at(&buf[..n], at)?;
        }
        at += n as u64;
    }
    Ok(dev)
}
