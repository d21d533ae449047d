//! A range lock: a request holds a half-open range of units (RAID-5 stripe
//! rows, volume bytes) while it updates them, so overlapping updates run
//! one after the other. It never holds its mutex across I/O.

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Debug, Default)]
pub(crate) struct RangeLock {
    held: Mutex<Vec<(u64, u64)>>,
    released: Condvar,
}

/// Holds a range until dropped.
pub(crate) struct RangeGuard<'a> {
    lock: &'a RangeLock,
    range: (u64, u64),
}

impl RangeLock {
    fn held(&self) -> MutexGuard<'_, Vec<(u64, u64)>> {
        // A poisoned lock only means a panic while pushing or removing an
        // entry; the vector is still a valid list of held ranges.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until no held range overlaps `start..end`, then holds it.
    pub(crate) fn lock(&self, start: u64, end: u64) -> RangeGuard<'_> {
        debug_assert!(start < end, "a locked range is not empty");
        let mut held = self.held();
        while held.iter().any(|&(s, e)| s < end && start < e) {
            held = self.released.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.push((start, end));
        RangeGuard { lock: self, range: (start, end) }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.lock.held();
        if let Some(index) = held.iter().position(|&r| r == self.range) {
            held.swap_remove(index);
        }
        drop(held);
        self.lock.released.notify_all();
    }
}
