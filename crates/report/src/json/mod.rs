//! The JSON documents iolab writes, as their own plain structs: the wire
//! types. Internal types (a job's result, a verdict, a volume's report)
//! are free to change; a document changes only when a file here does, and
//! then its version says so (docs/json.md describes each). ripgrep keeps
//! its JSON output types apart from its internal ones for the same reason.
//!
//! Each document is built from internal values by explicit conversions
//! (`From` impls and constructors), enums by exhaustive `match`, so a new
//! internal variant or field is a decision here, never a silent change.
//! A type two documents share (a run, a finding, a journal's counters, a
//! volume) is part of both: changing it changes both, and both versions.
//! Every document carries one `host` object (`host.rs`): the machine
//! and command line behind it, as the cli gathered them.
//! The goldens in `tests/it/golden/json/` pin every document's bytes.

pub mod bonnie;
pub mod crash;
pub mod fsck;
pub mod host;
pub mod mpi;
pub mod run;
pub mod sweep_journal;
pub mod sweep_policies;
pub mod sweep_stripes;
pub mod validate;
pub mod validation;
pub mod volume;

pub use bonnie::BonnieDocument;
pub use crash::{CrashDocument, CrashTableDocument, FsCrashDocument, KernelCrashDocument};
pub use fsck::FsckDocument;
pub use host::Host;
pub use mpi::MpiRunDocument;
pub use run::error_log;
pub use run::RunDocument;
pub use sweep_journal::SweepJournalDocument;
pub use sweep_policies::SweepPoliciesDocument;
pub use sweep_stripes::SweepStripesDocument;
pub use validate::ValidateDocument;
pub use volume::VolumeListDocument;

/// A document as iolab prints it: indented by two spaces, no newline at
/// the end.
fn pretty<T: serde::Serialize>(doc: &T) -> String {
    // Invariant: wire types hold only numbers, strings, booleans, options
    // and vectors of them, which serde_json always serialises (a
    // non-finite float becomes null).
    serde_json::to_string_pretty(doc).expect("serialisable document")
}
