//! The workload engine: runs a [`JobSpec`] against a [`device::Device`]
//! with worker threads (positional calls, or io_uring with many requests in
//! flight), and measures it.
//!
//! The file-system workloads ([`tree`]: tar extraction, `rm -rf`) run on
//! the `fsapi::FileSystem` interface, and [`fscrash`] checks iolab's file
//! system's crash promise over a recording device.
//!
//! This crate never prints; progress is published through [`Progress`] for
//! the caller to display. It knows nothing of volumes or logs: it sees a
//! `Device` or a `FileSystem`.

pub mod bonnie;
mod busy;
mod choice;
pub mod crash;
mod engine;
mod error;
pub mod fscrash;
pub mod gen;
pub mod journal;
pub mod kernel_mix;
mod kind;
pub mod layout;
pub mod recover;
pub mod replay;
pub mod spec;
mod stats;
pub mod tree;
pub mod validate;

pub use choice::{Committer, EngineChoice};
pub use engine::{data_buffer, run_job, uring_available, JobResult, Progress, ProgressSnapshot};
pub use error::WorkloadError;
pub use replay::ReplaySpec;
pub use spec::{
    BlockSizes, Dedupe, Engine, JobSpec, KeyMapSpec, Pattern, Region, Rw, Skew, SpecError, ValidateSpec,
    DEDUPE_SETS,
};
pub use stats::{CpuUsage, LatBuckets, Latency, OpSummary, SecondSample};
pub use validate::{ValidationError, ValidationSummary};
