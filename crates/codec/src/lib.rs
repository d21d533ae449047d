//! What iolab's on-disk formats share (docs/formats.md, "Conventions every
//! format follows"), written once: little-endian fields at the offsets a
//! layout gives ([`LeReader`], [`LeWriter`]), records whose crc32c covers
//! them ([`Frame`]), and the random ids that tell one run, log or volume set
//! from another ([`fresh_id`]).
//!
//! Every read is bounds-checked and returns an error instead of panicking:
//! what is read comes from a disk. This crate depends on no other iolab
//! crate, does no I/O and never prints.

#![forbid(unsafe_code)]

mod frame;
#[cfg(any(test, feature = "golden"))]
pub mod golden;
mod id;
mod le;

pub use frame::{CrcField, Frame, FrameError};
pub use id::fresh_id;
pub use le::{LeReader, LeWriter, OutOfBounds};
