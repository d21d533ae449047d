//! The errors every command reports the same way: a usage error (exit
//! status 2), an interrupted command (130), and one message for an error
//! and its causes.

pub use lab::{Interrupted, UsageError};

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

/// The error and its causes, each cause once: library errors often repeat
/// their source in their own message already.
pub(crate) fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}
