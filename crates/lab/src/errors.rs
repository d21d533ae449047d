//! The two errors a command's caller treats apart from the rest (a usage
//! error and an interruption: the binary maps them to exit statuses),
//! and one message for an error and its causes.

/// A bad flag value or combination, or a target refused because it holds
/// data (`--force` is the way on): reported with exit status 2, as clap
/// reports the errors it finds itself. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A command stopped by Ctrl-C or SIGTERM, after ending as cleanly as it
/// would have at its end: reported with exit status 130 (128 + SIGINT).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

impl From<workloads::SpecError> for UsageError {
    fn from(e: workloads::SpecError) -> UsageError {
        UsageError(e.to_string())
    }
}

/// The error and its causes, each cause once: library errors often repeat
/// their source in their own message already.
pub fn message(e: &anyhow::Error) -> String {
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
