//! The lab: what iolab's commands do, below their flags and above the
//! layers. A command's flags become a call here; what it finds comes back
//! as values for `report` and the binary to show. Nothing here prints:
//! what the lab has to say on the way goes through [`say`].
//!
//! - [`stack`]: the stack a command runs on (a base, a volume, the block
//!   log, a scratch view), opened bottom-up and closed top-down.
//! - [`assemble`]: a Vinum-style volume set assembled from drive paths,
//!   locked as the command's access needs, stripe logs replayed.
//! - [`bonnie`]: bonnie's phases on a target, bonnie++'s on a directory.
//! - [`crash`]: the block stacks `iolab crash` builds and checks;
//!   [`kernel_crash`]: the kernel's file systems crashed from user space.
//! - [`fs`]: iolab's file system on a target: opened (behind its block
//!   log), made, served through FUSE, mounted in-process for timed work.
//! - [`host`]: the machine and command behind a run, for every document.
//! - [`job`]: jobs from flags, iolab's TOML job files and fio's, checked
//!   into job specs.
//! - [`log_repair`]: a block log's damaged commits dropped.
//! - [`mounts`]: which mount a path is on.
//! - [`mpi`]: this process as one of MPI's ranks (MPI itself with the
//!   `mpi` feature only).
//! - [`volume_create`]: a volume set created from its configuration.
//! - [`sweep_journal`]: the validation journal's cost, arm by arm, and
//!   power cuts on simulated disks ([`power_cut`]).
//! - [`validate`]: a run's journal and target opened for `iolab validate`.
//! - [`sweep_stripes`]: the stripe table: layouts over the same drives.
//! - [`sweep_policies`]: the metadata policies' table, from a checked plan.

pub mod assemble;
pub mod bonnie;
pub mod crash;
mod errors;
pub mod fs;
pub mod host;
pub mod job;
pub mod kernel_crash;
pub mod layout;
pub mod log_repair;
pub mod mounts;
pub mod mpi;
pub mod power_cut;
pub mod say;
pub mod stack;
pub mod sweep_journal;
pub mod sweep_policies;
pub mod sweep_stripes;
pub mod validate;
pub mod volume_create;

pub use errors::{message, Interrupted, UsageError};
