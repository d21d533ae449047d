//! What soft updates keep of the buffer cache's write-back between calls
//! (`Ordering::Softdep`): the buffers held back, the freed directory
//! blocks still to be written once, the flush a checkpoint issued behind
//! the calls and its rounds left. What is done with them is in
//! `writeback.rs`.

use std::sync::{Arc, Condvar, Mutex};

use rustc_hash::FxHashSet as HashSet;

use crate::commits::Commits;

/// Rounds of a checkpoint at most: each lets a level of a new tree go
/// (maps and data, inodes, the entries naming them, ...).
pub const ROUNDS_MAX: usize = 4;

/// The flush a checkpoint issued and the calls go on beside.
pub enum Behind {
    /// None in flight.
    Idle,
    /// A thread flushing the device; what the flush returned.
    Thread(std::thread::JoinHandle<device::Result<()>>),
    /// Issued at once, but what waited on it run only by the next call
    /// that needs it done (`Commits::Deferred`): the calls in between go
    /// on as beside a flusher thread, in an order the same from run to
    /// run, and a crash between finds the flush done.
    Deferred,
    /// Issued by a caller with the mount's lock let go (a softdep fsync's
    /// pass), the seal numbered: the first call to take the lock once it
    /// returned (its issuer, or a call that waited for it,
    /// [`CallerFlushes`]) runs what waited on it, unless a call that
    /// needed it done with the lock held flushed again and ran it (a flush
    /// issued after the seal covers the same writes).
    Caller(u64),
}

/// Where the flush stands that a caller's writes wait for
/// (`Ordering::caller_flush`).
pub enum CallerFlush {
    /// It returned, and what waited on it ran.
    Done,
    /// None covers them yet, and none is in flight: the caller seals and
    /// flushes.
    Needed,
    /// A caller's flush is in flight, issued after the seal numbered (a
    /// call waits for it without the mount's lock, [`CallerFlushes`]).
    InFlight(u64, Arc<CallerFlushes>),
    /// A checkpoint's flush is in flight (waited for with the lock held).
    Behind,
}

/// The flushes callers issue with the mount's lock let go, told to the
/// calls that wait for one without the lock (a softdep fsync whose writes
/// a flush in flight does not cover waits for it, then seals its own and
/// those of every call that wrote meanwhile under one flush: group
/// commit).
#[derive(Default)]
pub struct CallerFlushes {
    /// The last seal whose flush returned, and whether any flush failed.
    done: Mutex<(u64, bool)>,
    returned: Condvar,
}

impl CallerFlushes {
    /// The flush issued after seal `seal` returned (`ok`: without error).
    pub fn returned(&self, seal: u64, ok: bool) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        done.0 = done.0.max(seal);
        done.1 |= !ok;
        self.returned.notify_all();
    }

    /// Waits until the flush issued after seal `seal` returned; whether
    /// every flush so far returned without error (after one that did
    /// not, the file system takes no more changes: its issuer says so).
    pub fn wait(&self, seal: u64) -> bool {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while done.0 < seal && !done.1 {
            done = self.returned.wait(done).unwrap_or_else(|p| p.into_inner());
        }
        !done.1
    }
}

pub struct Checkpoints {
    /// Dirty buffers an eviction held back, or whose last write held an
    /// update back; writing them again is worth it only after a flush.
    pub rolled: HashSet<u64>,
    /// Freed directory blocks still to be written once (a removal in one
    /// waits for the disk's copy to lose its entry), then dropped:
    /// written in batches, so that they neither crowd the live buffers
    /// out nor go one request each.
    pub retired: HashSet<u64>,
    /// With a flusher thread: the thread writing a batch of retired
    /// buffers while the calls go on (`write_retired_behind`); every
    /// flush waits for it first.
    pub retiring: Option<std::thread::JoinHandle<device::Result<()>>>,
    /// Who issues a checkpoint's flushes, the one in flight, and the
    /// checkpoint's rounds left.
    pub flushes_by: Commits,
    pub behind: Behind,
    /// Seals so far (the writes before each apart from those after, for
    /// the flush issued next), and how many of them a returned flush
    /// made durable: one is in flight at most, so all but the last.
    pub seals: u64,
    pub seals_flushed: u64,
    /// Told when a caller's flush returns.
    pub caller_flushes: Arc<CallerFlushes>,
    pub rounds: usize,
    pub rounds_by: Commits,
    /// Shadows past this many start a checkpoint.
    pub shadow_mark: usize,
}

impl Checkpoints {
    /// For a cache of `capacity_blocks` buffers.
    pub fn new(capacity_blocks: usize) -> Checkpoints {
        Checkpoints {
            rolled: HashSet::default(),
            retired: HashSet::default(),
            retiring: None,
            flushes_by: Commits::Caller,
            behind: Behind::Idle,
            seals: 0,
            seals_flushed: 0,
            caller_flushes: Arc::default(),
            rounds: 0,
            rounds_by: Commits::Caller,
            shadow_mark: capacity_blocks / 2,
        }
    }

    /// `block`'s buffer left the cache: nothing of it is held or retired.
    pub fn forget(&mut self, block: u64) {
        self.rolled.remove(&block);
        self.retired.remove(&block);
    }
}

impl Drop for Checkpoints {
    /// Retired buffers being written are waited for: nothing is written
    /// once the mount is gone.
    fn drop(&mut self) {
        if let Some(thread) = self.retiring.take() {
            let _ = thread.join();
        }
    }
}
