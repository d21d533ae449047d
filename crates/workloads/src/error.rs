//! What running a workload can fail with.

use device::DeviceError;

use crate::journal::JournalWriteError;
use crate::spec::SpecError;

/// Everything a job can fail with, each with the context its source gives
/// (the device, the flag, the journal file).
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("{device}: io_uring {what}: {source}")]
    Uring {
        device: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] JournalWriteError),
    #[error(transparent)]
    KeyMap(#[from] validation::KeyMapError),
    #[error("--write-iolog {path}: {message}")]
    Iolog { path: String, message: String },
    #[error("a worker thread panicked: {0}")]
    Panic(String),
}
