//! The errors every command reports the same way: a usage error (exit
//! status 2), an interrupted command (130), and one message for an error
//! and its causes.

pub use lab::{message, Interrupted, UsageError};

pub(crate) fn is_usage_error(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause.is::<workloads::SpecError>()
            || matches!(
                cause.downcast_ref::<workloads::WorkloadError>(),
                Some(workloads::WorkloadError::Spec(_))
            )
    })
}
