//! File-system workloads over [`fsapi::FileSystem`]: extracting an
//! archive as GNU tar does, removing a tree as `rm -rf` does, mdtest's
//! metadata phases, and bonnie++'s file tests. They run
//! unchanged on iolab's file system in-process, on the reference model,
//! or on a directory of any kernel file system ([`fsapi::HostFs`]).

mod archive;
mod files;
mod generate;
mod mdtest;
mod rm;
mod tar;

use std::fmt;

use fsapi::Errno;

pub use self::archive::{archive_size, load_archive, Compression, LoadedArchive};
pub use self::files::{run_file_tests, FilePhase, FileTestSpec, FileTests, FILE_PHASES};
pub use self::generate::{source_archive, tree_archive, TreeShape, LARGE_FILES_MAX};
pub use self::mdtest::{run_mdtest, MdtestPhase, MdtestSpec, MDTEST_PHASES};
pub use self::rm::{remove_tree, remove_tree_observed, Removed};
pub use self::tar::{extract, extract_observed, Extracted, RECORD_BYTES};

/// Why a tree workload stopped.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The archive could not be read or is not a tar archive.
    #[error("{path}: {reason}")]
    Archive { path: String, reason: String },
    /// A file-system call failed.
    #[error("{path}: {call} failed: {errno}")]
    Call { path: String, call: &'static str, errno: Errno },
}

impl TreeError {
    fn call(path: impl fmt::Display, call: &'static str, errno: Errno) -> TreeError {
        TreeError::Call { path: path.to_string(), call, errno }
    }
}
