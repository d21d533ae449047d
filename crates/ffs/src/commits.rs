//! Who makes durable what a policy seals while the calls go on.

/// Under `log`, who writes a commit sealed under the lock; under
/// `softdep`, who issues a checkpoint's flush (the writes before it
/// sealed: only they count as durable when it returns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Commits {
    /// The mount's committer thread (under `softdep`, a flusher thread per
    /// flush), while calls go on (the default).
    #[default]
    Thread,
    /// The thread that sealed it, at once: the order of every write is the
    /// same from run to run (modeled disks).
    Caller,
    /// The thread that seals the next one, or a sync, whichever comes
    /// first (under `softdep`, the flush is issued at once, and what
    /// waited on it runs when a later call needs it done): calls go on
    /// between the seal and the commit as they do beside the committer
    /// thread, in an order the same from run to run (crash enumeration
    /// of that interleaving).
    Deferred,
}
