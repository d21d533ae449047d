//! iolab's file system: FFS-shaped (allocation groups with bitmaps, an
//! inode table and data; twelve direct pointers, a single and a double
//! indirect; FFS directories whose entries never move) over any
//! [`device::Device`], served through [`fsapi::FileSystem`]. The format is
//! in docs/formats.md ("File system"); the policies decide which metadata
//! writes go out at once and in what order, every decision in one home,
//! `policy/` (its `Ordering` sits beside the buffer cache, which asks it
//! what each write carries; soft updates' dependencies are in
//! `softdep/`, the `log` policy's log region in `wapbl.rs`); `fsck/`
//! checks an unmounted image and repairs it, a file per pass.
//!
//! This crate depends on `device`, `fsapi`, `codec` (the fields and
//! checksums of its superblock and group headers) and `blocklog` (the
//! `log` policy's transactions, on the file system's own log region)
//! only, never prints, never writes outside the device it was given, and
//! never uses a field of its superblock or a group header before checking
//! it against its bound (`format/superblock.rs`).

#![forbid(unsafe_code)]

mod alloc;
mod bmap;
mod cache;
mod commits;
mod core;
mod delayed;
mod dir;
mod fault;
pub mod format;
pub mod fsck;
mod mkfs;
mod mount;
mod ops;
mod pages;
mod policy;
mod range;
mod softdep;
mod unclean;
mod wapbl;
mod xattr;

use std::sync::Arc;

pub use crate::core::Failure;
pub use cache::CacheStats;
pub use commits::Commits;
pub use fault::{FieldFault, Place, Problem};
pub use format::Policy;
pub use mkfs::{geometry, mkfs, MkfsOptions};
pub use mount::{log_region, read_superblock, read_superblock_slots, SuperblockRead, Unmounted};
pub use ops::{Ffs, MountOptions};
pub use policy::SYNCER_AGE;
pub use softdep::SoftdepStats;
pub use unclean::{Mounted, Unclean, UncleanImage};
pub use wapbl::replay as replay_log;

/// What making, mounting or checking a file system can fail with.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("not an iolab file system (no IOLABFS1 superblock); make one with `iolab fs mkfs`")]
    NotAFileSystem,
    #[error(
        "file system format version {found}; this iolab reads versions {oldest} to {newest}: use the iolab that \
         made it"
    )]
    Version { found: u32, oldest: u32, newest: u32 },
    #[error("the file system is damaged: {0}; run `iolab fs fsck`")]
    Damaged(String),
    /// The `log` policy's log cannot be replayed (a damaged commit, or
    /// both header slots unreadable): only `fsck -y` drops what it held.
    #[error("the file system's log is damaged: {0}; run `iolab fs fsck -y`, which drops what the log held from the damage on")]
    DamagedLog(String),
    /// A field of a structure other than the superblock (a group header)
    /// out of its bounds: fsck rewrites it.
    #[error("the file system is damaged: {0}; run `iolab fs fsck -y`")]
    Field(Box<FieldFault>),
    /// Neither superblock slot passes its checks (docs/formats.md,
    /// "Superblock"): each slot's fault. Nothing says where anything is,
    /// so nothing can be read or repaired.
    #[error(
        "neither superblock slot can be used ({first}; {second}): nothing on the file system can be found \
         without one, and fsck does not rebuild a superblock; restore the image from a copy, or make a new \
         file system with `iolab fs mkfs --force` (what it held is lost)"
    )]
    Superblock { first: Box<FieldFault>, second: Box<FieldFault> },
    /// The image is not clean and may hold damage a mount that writes
    /// would spread (docs/fs.md, "An unclean image"): what its superblock
    /// says, and the check that repairs it.
    #[error("{0}")]
    Unclean(Box<UncleanImage>),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    /// A write failed earlier: the file system takes no more changes and
    /// its image is left not clean.
    #[error(
        "an earlier write failed ({}); nothing more is written until it is mounted again, and the image is \
         left not clean",
        .0.cause
    )]
    Failed(Failure),
}

impl FsError {
    /// True when the error comes down to the device's host having no room
    /// (ENOSPC or EDQUOT from a sparse image's file system).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            FsError::Device(e) => e.is_out_of_space(),
            FsError::Failed(failure) => failure.out_of_space,
            _ => false,
        }
    }
}

/// The device, shared.
pub type Dev = Arc<dyn device::Device>;

impl From<FieldFault> for FsError {
    fn from(fault: FieldFault) -> FsError {
        FsError::Field(Box::new(fault))
    }
}
