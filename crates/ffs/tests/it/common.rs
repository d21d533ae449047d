use std::sync::Arc;

use device::{Device, MemDevice};
use ffs::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};

/// A new file system on a memory device of `bytes`.
pub fn fresh(bytes: u64) -> Arc<dyn Device> {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(bytes).unwrap());
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    dev
}

pub fn mount(dev: &Arc<dyn Device>, policy: Policy) -> Ffs {
    Ffs::mount(Arc::clone(dev), &MountOptions { policy, cache_bytes: 1 << 20, ..Default::default() }).unwrap()
}
