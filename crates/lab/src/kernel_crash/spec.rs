//! What a kernel crash run is asked to do.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::sweep_policies::kernel::KernelFs;

/// One crash run of a kernel file system.
#[derive(Clone, Debug)]
pub struct KernelCrash {
    pub fs: KernelFs,
    /// The image's size (mkfs's device).
    pub size_bytes: u64,
    /// Mount options beyond the file system's defaults (`-o`).
    pub mount_options: Option<String>,
    /// The fs-* stacks' mix: operations, a durable file fsync'd every
    /// this many, and the seed (of the mix and of the sampled states).
    pub operations: u64,
    pub fsync_every: u64,
    /// Instead of the mix: this tar archive (uncompressed, in memory)
    /// extracted as GNU tar does, then the file system synced.
    pub archive: Option<std::sync::Arc<Vec<u8>>>,
    pub sampled_states: u64,
    pub seed: u64,
    /// The disk's sector: the unit a torn write tears at, and the loop
    /// device's logical sector (mkfs sees it).
    pub sector_bytes: u32,
    /// Leave the image of each violating state here (`state-N.img`, as
    /// the crash left it, before any check touched it; the first
    /// [`KEPT_IMAGES`]) for a person to inspect: the kernel's history
    /// differs from run to run, so a state's number names nothing later.
    pub keep_images: Option<PathBuf>,
    /// The recorder answers fsync without flushing: every promise is then
    /// kept by luck only, which the check must catch.
    pub drop_flushes: bool,
    /// Set when the user interrupts: the run stops before the next state,
    /// undoing its mounts and loop devices, and ends with
    /// [`crate::Interrupted`].
    pub stop: Option<&'static AtomicBool>,
}

/// The most violating states' images `keep_images` receives.
pub const KEPT_IMAGES: u64 = 10;

/// The image's size when none is given: small, and what mkfs accepts
/// (xfs refuses less than 300 MiB).
pub fn default_size(fs: KernelFs) -> u64 {
    match fs {
        KernelFs::Xfs => 300 << 20,
        KernelFs::Btrfs => 128 << 20,
        _ => 32 << 20,
    }
}
