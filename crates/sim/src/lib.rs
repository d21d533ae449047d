//! Simulated disks in virtual time: `sim:hdd` (a rotating disk: seeks,
//! rotation, zones, a queue ordered shortest positioning first, read-ahead,
//! a write cache that may ignore flushes) and `sim:ssd` (parallel
//! channels, with or without power-loss protection), as iolab devices.
//! Their requests take modeled time on a clock nothing waits for, so the
//! same requests give the same times on any machine. What a power cut
//! would leave is kept apart from what was written. Parameters and their
//! sources: docs/sim.md.
//!
//! This crate never prints and depends on `device` only.

#![forbid(unsafe_code)]

mod device;
mod hdd;
mod model;
mod params;
mod ssd;
mod store;

pub use crate::device::SimDevice;
pub use crate::params::{Data, HddParams, SimSpec, SsdParams};
pub use ::device::VirtualClock;
