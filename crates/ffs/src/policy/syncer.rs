//! A full sync and the syncer's periodic pass, as each policy does them:
//! `log` commits, `softdep` writes back in passes until nothing waits,
//! `sync` and `async` write everything back and flush. A mount's syncer
//! thread ([`Ffs::syncer`]: `iolab fs mount`, the in-process runs) calls
//! [`Ffs::tick`] once a second; a run on a virtual clock calls it for
//! each virtual second passed.

use std::sync::atomic::{AtomicBool, Ordering as Atomic};
use std::sync::MutexGuard;
use std::time::Duration;

use crate::core::Core;
use crate::policy::Ordering;
use crate::{Ffs, FsError};

/// The age at which the syncer writes a dirty buffer back (FreeBSD's
/// syncer delay, 30 s).
pub const SYNCER_AGE: Duration = Duration::from_secs(30);

impl Ffs {
    /// A mount's syncer, until `done`: once a second the periodic work
    /// ([`Ffs::tick`] with [`SYNCER_AGE`]); `every` runs ten times a
    /// second (the caller's own polling: an interrupt to act on, say).
    /// The first failure goes to `failed`, once: the file system refuses
    /// every change after it, and every tick would fail again.
    pub fn syncer(&self, done: &AtomicBool, mut every: impl FnMut(), failed: impl FnOnce(FsError)) {
        let mut failed = Some(failed);
        let mut ticks = 0u32;
        while !done.load(Atomic::Relaxed) {
            std::thread::park_timeout(Duration::from_millis(100));
            every();
            ticks += 1;
            if ticks % 10 != 0 {
                continue;
            }
            if let Err(e) = self.tick(SYNCER_AGE) {
                if let Some(failed) = failed.take() {
                    failed(e);
                }
            }
        }
    }

    /// Writes everything back, sorted, then the superblock: all of it
    /// durable when this returns (`sync`, and `fsync` under `log` and
    /// `softdep`). Under `log`, one commit.
    pub fn sync_all(&self) -> Result<(), FsError> {
        let mut core = self.lock();
        core.check_alive().map_err(|_| self.failure_of(&core))?;
        match core.order {
            Ordering::Log => return core.sync_logged().map_err(|_| self.failure_of(&core)),
            Ordering::Softdep(_) => return self.softdep_sync_all(core),
            Ordering::Sync | Ordering::Async => {}
        }
        let written = {
            let core = &mut *core;
            core.stage_group_headers().and_then(|()| core.cache.write_back(&mut core.order, true))
        };
        if let Err(e) = written {
            return Err(self.failed(core, e));
        }
        drop(core);
        self.write_superblock()
    }

    /// [`Ffs::sync_all`] under `softdep`: passes until nothing waits.
    fn softdep_sync_all(&self, mut core: MutexGuard<'_, Core>) -> Result<(), FsError> {
        if core.softdep_sync().is_err() {
            if core.failed.is_none() {
                // Not a device's error: the passes ended with work waiting
                // (`Core::softdep_sync`). The image stays marked not clean
                // on the disk.
                return Err(FsError::Damaged(
                    "soft updates' write-back passes ended with dependencies still waiting".into(),
                ));
            }
            return Err(self.failure_of(&core));
        }
        // Everything is on the disk: a directory's move too.
        core.settle_moving();
        drop(core);
        self.write_superblock()
    }

    /// The syncer's pass: writes buffers dirty for longer than `age`.
    pub fn write_back_older(&self, age: Duration) -> Result<usize, FsError> {
        let mut core = self.lock();
        core.check_alive().map_err(|_| self.failure_of(&core))?;
        let core = &mut *core;
        Ok(core.cache.write_back_older(&mut core.order, age)?)
    }

    /// The periodic work a mount's syncer does about once a second: under
    /// `log`, commits what changed if the last commit is a second old (as
    /// WAPBL's); under every policy, writes back buffers dirty for longer
    /// than `age` (under `softdep`, then flushes, so that what waited on
    /// them can go next).
    pub fn tick(&self, age: Duration) -> Result<(), FsError> {
        let mut core = self.lock();
        core.check_alive().map_err(|_| self.failure_of(&core))?;
        if core.order.is_logged() {
            // File data dirty for `age` goes out (its marks cleared in the
            // transaction), as under `async`; the metadata is committed
            // if the last commit is a second old, as WAPBL's.
            let written = {
                let core = &mut *core;
                core.cache.write_back_older(&mut core.order, age)
            };
            if let Err(e) = written {
                return Err(self.failed(core, e));
            }
            core.settle_delayed().map_err(|_| self.failure_of(&core))?;
            let pending = core.cache.dirty_meta() > 0 || core.cache.meta_since_flush > 0;
            let since_commit = core.cache.now().saturating_sub(core.log.last_commit);
            if pending && since_commit >= Duration::from_secs(1) {
                core.commit_behind().map_err(|e| self.failed(core, e))?;
            }
            return Ok(());
        }
        if core.order.holds_back() {
            // As FreeBSD's syncer under soft updates: buffers go out once
            // they have been dirty for `age` (what is ready complete, the
            // rest rolled back), then a flush lets the work that waited on
            // them run. Nothing is flushed while nothing is old enough.
            let written = {
                let core = &mut *core;
                core.cache.write_back_older(&mut core.order, age)
            };
            let written = written.map_err(|e| self.failed(core, e))?;
            if written > 0 {
                let mut core = self.lock();
                let flushed = {
                    let core = &mut *core;
                    core.cache.flush(&mut core.order)
                };
                if let Err(e) = flushed {
                    return Err(self.failed(core, e));
                }
                core.apply_released().map_err(|_| self.failure_of(&core))?;
            }
            let mut core = self.lock();
            core.write_moves().map_err(|_| self.failure_of(&core))?;
            return Ok(());
        }
        let written = {
            let core = &mut *core;
            core.cache.write_back_older(&mut core.order, age)
        };
        written.map_err(|e| self.failed(core, e))?;
        Ok(())
    }
}
