//! Mounting and unmounting: the superblock slots read and rewritten, the
//! groups' counts loaded, everything written back at the end.

use std::sync::{Arc, Mutex};

use blocklog::ReplayReport;
use device::{AlignedBuf, Device};

use crate::cache::Cache;
use crate::core::{Core, GroupCounts};
use crate::format::*;
use crate::mkfs::now_ns;
use crate::policy::LogState;
use crate::{wapbl, Dev, Ffs, FieldFault, FsError, MountOptions, Problem};

/// Reads block `n` straight from the device.
pub(crate) fn read_block(dev: &Dev, n: u64) -> Result<AlignedBuf, FsError> {
    let mut buf = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(dev.buffer_align()));
    dev.read_at(&mut buf, n * BLOCK_BYTES as u64)?;
    Ok(buf)
}

/// The superblock a reader takes, the slot it was read from, and the
/// fault of the other slot when that one failed its checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuperblockRead {
    pub superblock: Superblock,
    pub slot: u8,
    /// The other slot's fault: it was passed over. Nothing rewrites it but
    /// the next superblock write (a mount's, or a repairing fsck's), which
    /// goes to it by the slots' alternation; fsck reports it
    /// (`bad_superblock_slot`), a mount says so (`Ffs::passed_over`).
    pub passed_over: Option<FieldFault>,
}

impl SuperblockRead {
    /// What to tell a user of the slot passed over, if one was.
    pub fn passed_over_text(&self) -> Option<String> {
        let fault = self.passed_over.as_ref()?;
        Some(format!(
            "{fault}; slot {} (generation {}) is used instead",
            self.slot, self.superblock.generation
        ))
    }
}

/// The superblock: see [`read_superblock_slots`].
pub fn read_superblock(dev: &Dev) -> Result<Superblock, FsError> {
    read_superblock_slots(dev).map(|read| read.superblock)
}

/// Reads both superblock slots and takes the one that passes every check
/// with the higher generation (docs/formats.md, "Superblock"); a slot
/// that fails (torn, damaged, a field out of bounds) is passed over and
/// named in the result. When neither passes: not a file system if
/// neither has the magic, a version this iolab does not read if that is
/// all that is wrong, else both slots' faults.
pub fn read_superblock_slots(dev: &Dev) -> Result<SuperblockRead, FsError> {
    if dev.size_bytes() < 2 * BLOCK_BYTES as u64 {
        return Err(FsError::NotAFileSystem);
    }
    let decode = |slot: u8| -> Result<Result<Superblock, FieldFault>, FsError> {
        let block = read_block(dev, u64::from(slot))?;
        let from = SlotSource { device: dev.name(), device_bytes: dev.size_bytes(), slot };
        Ok(Superblock::decode(&block, &from))
    };
    let read = |superblock: Superblock, slot: u8, passed_over: Option<FieldFault>| {
        debug_assert_eq!(superblock.generation % 2, u64::from(slot), "a slot holds its parity's generations");
        SuperblockRead { superblock, slot, passed_over }
    };
    match (decode(0)?, decode(1)?) {
        (Ok(a), Ok(b)) if b.generation > a.generation => Ok(read(b, 1, None)),
        (Ok(a), Ok(_)) => Ok(read(a, 0, None)),
        (Ok(a), Err(fault)) => Ok(read(a, 0, Some(fault))),
        (Err(fault), Ok(b)) => Ok(read(b, 1, Some(fault))),
        (Err(first), Err(second)) => Err(neither_slot(first, second)),
    }
}

/// The error when neither slot passes.
fn neither_slot(first: FieldFault, second: FieldFault) -> FsError {
    let with_magic: Vec<&FieldFault> =
        [&first, &second].into_iter().filter(|f| !matches!(f.problem, Problem::Magic { .. })).collect();
    if with_magic.is_empty() {
        return FsError::NotAFileSystem;
    }
    // A format this iolab does not read, in every slot that has the magic:
    // not damage.
    if with_magic.iter().all(|f| matches!(f.problem, Problem::Version { .. })) {
        let found = u32::try_from(with_magic[0].value).unwrap_or(u32::MAX);
        return FsError::Version { found, oldest: VERSION_OLDEST, newest: VERSION };
    }
    FsError::Superblock { first: Box::new(first), second: Box::new(second) }
}

/// What an unmount left: the superblock on disk, and what the cache did
/// over the whole mount.
#[derive(Clone, Debug)]
pub struct Unmounted {
    pub superblock: Superblock,
    pub cache: crate::CacheStats,
    /// Under `log`: the log's counters (commits, bytes written to it).
    pub log: Option<blocklog::LogStats>,
    /// Under `softdep`: the dependencies' counters (rollbacks, releases).
    pub softdep: Option<crate::SoftdepStats>,
}

/// Metadata blocks one call changes at most between two of the `log`
/// policy's checks (a rename replacing a file: two directories, four
/// inodes, the freed file's last chunk of indirect blocks and bitmaps,
/// their groups' headers).
const CALL_BLOCKS_MAX: usize = 32;

/// The superblock of `raw` after its log's committed transactions are
/// replayed home (any policy), every field checked (its size against the
/// device's), and the slot passed over if one was.
pub(crate) fn replayed_superblock(raw: &Dev) -> Result<(SuperblockRead, Option<ReplayReport>), FsError> {
    let (read, replayed) = replayed_or_log_damage(raw)?;
    match replayed {
        Ok(replayed) => Ok((read, replayed)),
        Err(damage) => Err(FsError::DamagedLog(damage.to_string())),
    }
}

/// As [`replayed_superblock`], with damage in the log returned rather
/// than made an error: fsck reports it and checks the image as the
/// replay left it (every commit before the damage home).
pub(crate) fn replayed_or_log_damage(
    raw: &Dev,
) -> Result<(SuperblockRead, Result<Option<ReplayReport>, wapbl::LogDamage>), FsError> {
    let first = read_superblock_slots(raw)?;
    let replayed = wapbl::replay_or_damage(raw, &first.superblock)?;
    let wrote_home = matches!(replayed, Ok(Some(_)) | Err(wapbl::LogDamage::Stopped(_)));
    let read = if wrote_home { read_superblock_slots(raw)? } else { first };
    Ok((read, replayed))
}

/// The log region of the file system on `raw`, as a device of its own:
/// where `iolab log repair` finds the `log` policy's log.
pub fn log_region(raw: &Dev) -> Result<Dev, FsError> {
    wapbl::region(raw, &read_superblock(raw)?)
}

/// Every group's counts, from its header (each checked against its
/// bounds). The superblock's summary counts are set to their sums: they
/// are only a summary of these (fsck compares them), and the allocator
/// keeps the two equal from here on. With them, the inode slots each
/// header says were handed out (`GroupHeader::inodes_initialized`).
fn group_counts(dev: &Dev, sb: &mut Superblock) -> Result<(Vec<GroupCounts>, Vec<u32>), FsError> {
    // Bounded by the device: the decoder checked the groups fit in it.
    let mut groups = Vec::with_capacity(sb.groups as usize);
    let mut initialized = Vec::with_capacity(sb.groups as usize);
    let (mut free_blocks, mut free_inodes, mut dirs) = (0u64, 0u64, 0u64);
    for g in 0..sb.groups {
        let h = GroupHeader::decode(&read_block(dev, sb.group_start(g))?, g, sb, dev.name())?;
        free_blocks += u64::from(h.free_blocks);
        free_inodes += u64::from(h.free_inodes);
        dirs += u64::from(h.dirs);
        groups.push(GroupCounts { free_blocks: h.free_blocks, free_inodes: h.free_inodes, dirs: h.dirs });
        initialized.push(h.inodes_initialized);
    }
    (sb.free_blocks, sb.free_inodes, sb.dirs) = (free_blocks, free_inodes, dirs);
    Ok((groups, initialized))
}

impl Ffs {
    /// The superblock slot this mount passed over because it failed its
    /// checks, and which slot it used instead (the caller tells the user:
    /// the mount's first superblock write replaces that slot).
    pub fn passed_over(&self) -> Option<&str> {
        self.passed_over.as_deref()
    }

    /// The image was not clean and this mount went on all the same (over
    /// leaks only, forced, or on a view that keeps no write): what it
    /// may hold, for the caller to tell ([`crate::UncleanImage::warning`]).
    pub fn unclean(&self) -> Option<&crate::UncleanImage> {
        self.unclean.as_ref()
    }

    /// Mounts the file system on `dev`: replays its log (whatever the
    /// policy), refuses an image that is not clean as `options.unclean`
    /// says (before writing anything else), marks it not clean (so a
    /// crash is known), records the policy, and serves it. Under `log`
    /// every write goes through the log on the file system's log region.
    pub fn mount(raw: Dev, options: &MountOptions) -> Result<Ffs, FsError> {
        let (first, _) = replayed_superblock(&raw)?;
        let unclean = crate::unclean::judge(raw.name(), &first.superblock, options.unclean)
            .map_err(FsError::Unclean)?;
        let (dev, log): (Dev, _) = match options.policy {
            Policy::Log => {
                let (log, _) = wapbl::open(&raw, &first.superblock)?;
                (log.clone(), Some(log))
            }
            _ => (Arc::clone(&raw), None),
        };
        let mut sb = read_superblock(&dev)?;
        let (groups, initialized) = group_counts(&dev, &mut sb)?;
        // From this mount on the image may hold special files, record
        // damage and mark blocks unwritten, which a reader of an older
        // version would take for garbage: it says the version this writes.
        sb.version = VERSION;
        sb.clean = false;
        // What it may hold stays recorded through this mount's unmount:
        // only a check that repairs it clears it.
        sb.damage = sb.damage.max(unclean.as_ref().map_or(Damage::None, |u| u.damage));
        sb.mounts = sb.mounts.saturating_add(1);
        sb.mounted_ns = now_ns();
        sb.policy = options.policy;
        let commit_blocks = match &log {
            // What one transaction may hold, less room for the largest call
            // after the check that commits before it (calls that free or
            // write much commit between chunks of their own).
            Some(log) => {
                let most = (log.max_request_bytes() / BLOCK_BYTES as u64) as usize;
                most.saturating_sub(CALL_BLOCKS_MAX).max(most / 2).max(1)
            }
            None => 0,
        };
        let cache = Cache::new(Arc::clone(&dev), options.cache_bytes, log.is_some(), options.clock.clone());
        let log_state = LogState::new(commit_blocks, options.clock.now());
        let mut core = Core::new(sb, (groups, initialized), cache, options.policy, log_state);
        // Who flushes behind the calls (soft updates' checkpoints).
        core.order.set_flushes_by(options.commits);
        let mut committer = None;
        if let Some(log) = &log {
            core.log.dev = Some(Arc::clone(log));
            core.log.deferred = options.commits == crate::Commits::Deferred;
            if options.commits == crate::Commits::Thread {
                let (wake, woken) = std::sync::mpsc::channel::<()>();
                let log = Arc::clone(log);
                // A failed commit poisons the log; the calls after it see
                // the error and the file system stops taking changes.
                let thread = std::thread::Builder::new()
                    .name("ffs-committer".into())
                    .spawn(move || {
                        while woken.recv().is_ok() {
                            let _ = log.commit_sealed();
                        }
                    })
                    .map_err(|e| FsError::Invalid(format!("cannot start the committer thread: {e}")))?;
                core.log.committer = Some(wake);
                committer = Some(thread);
            }
        }
        let passed_over = first.passed_over_text();
        let fs =
            Ffs { core: Mutex::new(core), dev, log, committer: Mutex::new(committer), passed_over, unclean };
        if fs.lock().sb.orphans != 0 {
            fs.reclaim_orphans()?;
        }
        fs.write_superblock()?;
        Ok(fs)
    }

    /// Writes the superblock into its next slot and makes it durable
    /// (under `log`: commits it, with everything else changed).
    pub(crate) fn write_superblock(&self) -> Result<(), FsError> {
        let mut core = self.lock();
        if core.order.is_logged() {
            return core.commit().map_err(|e| self.failed(core, e));
        }
        let (buf, slot) = core.next_superblock(self.dev.buffer_align());
        drop(core);
        self.dev.write_at(&buf, slot * BLOCK_BYTES as u64)?;
        self.dev.flush()?;
        Ok(())
    }

    /// Records a failed write: the file system takes no more changes.
    pub(crate) fn failed(
        &self,
        mut core: std::sync::MutexGuard<'_, Core>,
        e: device::DeviceError,
    ) -> FsError {
        core.failed.get_or_insert_with(|| crate::Failure::of(&e));
        e.into()
    }

    pub(crate) fn failure_of(&self, core: &Core) -> FsError {
        match &core.failed {
            Some(failure) => FsError::Failed(failure.clone()),
            None => FsError::Invalid("the file system failed, and kept no cause".into()),
        }
    }

    /// Why the file system stopped taking changes, if it did: the first
    /// failed write (its host out of room, or the device failing).
    pub fn failure(&self) -> Option<crate::Failure> {
        self.lock().failed.clone()
    }

    /// Unmounts: frees inodes unlinked while they were open, writes
    /// everything back and marks the file system clean. Returns the
    /// superblock as left on disk and the cache's counters, the final
    /// write-back included.
    pub fn unmount(self) -> Result<Unmounted, FsError> {
        self.release_orphans()?;
        {
            let mut core = self.lock();
            core.check_alive().map_err(|_| self.failure_of(&core))?;
            core.sb.clean = true;
        }
        self.sync_all()?;
        {
            let mut core = self.lock();
            let waiting = core.order.waiting() || core.cache.dirty_meta() > 0;
            if waiting {
                // Soft updates could not finish (it should always): the
                // image is left marked not clean rather than trusted.
                core.sb.clean = false;
                drop(core);
                self.write_superblock()?;
                return Err(FsError::Damaged(
                    "soft updates left dependencies waiting at unmount; the file system is marked not clean"
                        .into(),
                ));
            }
        }
        self.stop_committer();
        if let Some(log) = &self.log {
            // Everything committed goes home and the log is left empty:
            // the image is whole without it.
            log.checkpoint()?;
        }
        let core = self.lock();
        Ok(Unmounted {
            superblock: core.sb.clone(),
            cache: core.cache.stats,
            log: self.log_stats(),
            softdep: core.order.stats(),
        })
    }

    /// Ends the committer thread (its work is done: `sync_all` committed
    /// everything) and waits for it.
    fn stop_committer(&self) {
        self.lock().log.committer = None;
        let thread = self.committer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Under `log`: the number of the last transaction sealed and of the
    /// last durable (a crash check maps commits to the calls they hold).
    pub fn log_ids(&self) -> Option<(u64, u64)> {
        self.log.as_ref().map(|l| (l.sealed_id(), l.durable_id()))
    }

    /// The block log's counters under `log` (commits, bytes written to the
    /// log, checkpoints).
    pub fn log_stats(&self) -> Option<blocklog::LogStats> {
        self.log.as_ref().map(|l| l.log_stats())
    }

    /// The counters of the buffer cache.
    pub fn cache_stats(&self) -> crate::CacheStats {
        self.lock().cache.stats
    }

    /// Soft updates' counters so far (under `softdep`; None otherwise).
    pub fn softdep_stats(&self) -> Option<crate::SoftdepStats> {
        self.lock().order.stats()
    }

    /// The superblock as mounted (counts current).
    pub fn superblock(&self) -> Superblock {
        self.lock().sb.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::sync::Arc;

    use device::{Device, MemDevice};
    use fsapi::FileSystem;

    use crate::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};

    /// A call that panics while it holds the file system's state (as a
    /// bug between soft updates' take and put-back would): every change
    /// after it fails with EIO, and the unmount fails, leaving the image
    /// marked not clean on the disk for fsck, instead of going on in a
    /// state nobody checked.
    #[test]
    fn a_panic_holding_the_state_stops_changes_and_leaves_the_image_unclean() {
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
        mkfs(&mem, &MkfsOptions::default()).unwrap();
        let options = MountOptions { policy: Policy::Softdep, ..Default::default() };
        let fs = Arc::new(Ffs::mount(Arc::clone(&mem), &options).unwrap());
        let held = Arc::clone(&fs);
        let panicked = std::thread::spawn(move || {
            let _core = held.lock();
            panic!("a bug while the state is held");
        })
        .join();
        assert!(panicked.is_err());
        let made = fs.create(fsapi::ROOT, OsStr::new("after"), fsapi::Owner::root(0o644));
        assert_eq!(made.err(), Some(fsapi::Errno::IO));
        let fs = Arc::try_unwrap(fs).ok().unwrap();
        assert!(fs.unmount().is_err());
        assert!(!crate::read_superblock(&mem).unwrap().clean, "left for fsck");
    }

    /// The log a `log` mount makes maps and records whole blocks, the
    /// file system's unit, not the device's 512 B sectors.
    #[test]
    fn a_new_log_is_made_in_blocks() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let options = MountOptions { policy: Policy::Log, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        assert_eq!(fs.log.as_ref().unwrap().header().sector_bytes, crate::format::BLOCK_BYTES as u32);
    }

    /// Removing files clears whole inode blocks, which the log records as
    /// zeros, taking no room: the removal commits for what it logs, not
    /// for the hundreds of blocks it touches.
    #[test]
    fn a_removal_commits_for_what_it_logs_not_for_the_blocks_it_touches() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 20).unwrap());
        // A 1 MiB log: a commit holds fewer blocks than the removal touches.
        mkfs(&dev, &MkfsOptions { log_bytes: Some(1 << 20), ..Default::default() }).unwrap();
        let options =
            MountOptions { policy: Policy::Log, commits: crate::Commits::Caller, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        let names: Vec<String> = (0..3000).map(|k| format!("f{k}")).collect();
        for name in &names {
            let a = fs.create(fsapi::ROOT, OsStr::new(name), fsapi::Owner::root(0o644)).unwrap();
            fs.forget(a.ino, 1);
        }
        fs.sync().unwrap();
        let log = fs.log.clone().unwrap();
        let inode_blocks = 3000 / crate::format::INODES_PER_BLOCK as usize;
        assert!(inode_blocks > fs.lock().log.commit_blocks, "the removal touches more than a commit holds");
        let before = log.log_stats().commits;
        for name in &names {
            fs.unlink(fsapi::ROOT, OsStr::new(name)).unwrap();
        }
        assert_eq!(log.log_stats().commits, before, "no commit during the removal");
        fs.sync().unwrap();
        assert_eq!(log.log_stats().commits, before + 1);
    }

    /// A commit left sealed and not yet durable (its committer never
    /// runs): the blocks it frees are not handed out again until it is.
    #[test]
    fn blocks_a_sealed_commit_frees_are_not_reused_before_it_is_durable() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let options =
            MountOptions { policy: Policy::Log, commits: crate::Commits::Caller, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        let a = fs.create(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o644)).unwrap();
        fs.write(a.ino, 0, &vec![7u8; 64 << 10]).unwrap();
        fs.sync().unwrap();
        fs.unlink(fsapi::ROOT, OsStr::new("a")).unwrap();
        fs.forget(a.ino, 1);
        let log = fs.log.clone().unwrap();
        let mut core = fs.lock();
        let freed: Vec<u32> = core.log.freed.blocks();
        assert!(freed.len() >= 16, "the file's blocks were freed");
        let (wake, _nobody) = std::sync::mpsc::channel();
        core.log.committer = Some(wake);
        core.commit_behind().unwrap();
        assert_eq!(log.sealed_waiting(), 1, "the commit waits for its committer");
        for &block in &freed {
            let got = core.alloc_block(u64::from(block)).unwrap();
            assert!(!freed.contains(&got), "block {got} reused before the commit that frees it is durable");
        }
        log.commit_sealed().unwrap();
        let block = freed[0];
        assert_eq!(core.alloc_block(u64::from(block)).unwrap(), block, "free for good once durable");
    }

    /// The file system up to a sealed commit (a file written)
    /// on `dev`: the mount, the commit sealed with nobody to write it, and
    /// how many flushes `dev` saw from the mount to the seal.
    fn sealed_on(dev: Arc<dyn Device>) -> (Ffs, u64) {
        let before = dev.stats().snapshot().flushes;
        let options =
            MountOptions { policy: Policy::Log, commits: crate::Commits::Caller, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        let a = fs.create(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o644)).unwrap();
        fs.write(a.ino, 0, &vec![7u8; 64 << 10]).unwrap();
        let flushes = dev.stats().snapshot().flushes - before;
        let mut core = fs.lock();
        let (wake, nobody) = std::sync::mpsc::channel();
        std::mem::forget(nobody);
        core.log.committer = Some(wake);
        core.commit_behind().unwrap();
        drop(core);
        (fs, flushes)
    }

    /// A commit the committer thread writes and whose flush fails: the
    /// log is poisoned, so the next sync fails and the file system takes
    /// no more changes, rather than the commit being retried silently.
    #[test]
    fn a_failed_commit_behind_the_lock_stops_the_file_system() {
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
        mkfs(&mem, &MkfsOptions::default()).unwrap();
        let image = device::snapshot(mem.as_ref()).unwrap();
        let (_, flushes) = sealed_on(Arc::clone(&mem));
        let fresh: Arc<dyn Device> = Arc::new(image);
        let faulty: Arc<dyn Device> = Arc::new(device::FaultyDevice::new(
            fresh,
            vec![device::Fault::Nth { op: device::Op::Flush, n: flushes + 1 }],
        ));
        let (fs, _) = sealed_on(faulty);
        let log = fs.log.clone().unwrap();
        assert!(log.commit_sealed().is_err(), "the committer's flush fails");
        assert!(fs.sync().is_err(), "the failure is reported, not retried");
        let err = fs.create(fsapi::ROOT, OsStr::new("b"), fsapi::Owner::root(0o644)).unwrap_err();
        assert_eq!(err, fsapi::Errno::IO);
    }

    /// `Commits::Deferred`: a sealed commit waits for the next seal, which
    /// writes it first; a sync writes whatever waits.
    #[test]
    fn a_deferred_commit_is_written_by_the_next_seal() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let options =
            MountOptions { policy: Policy::Log, commits: crate::Commits::Deferred, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        let log = fs.log.clone().unwrap();
        let make = |name: &str| fs.create(fsapi::ROOT, OsStr::new(name), fsapi::Owner::root(0o644)).unwrap();
        make("a");
        fs.lock().commit_behind().unwrap();
        let first = log.sealed_id();
        assert!(log.durable_id() < first, "sealed, not written");
        make("b");
        fs.lock().commit_behind().unwrap();
        assert_eq!(log.durable_id(), first, "the next seal wrote the first");
        assert_eq!(log.sealed_waiting(), 1);
        fs.sync().unwrap();
        assert_eq!(log.sealed_waiting(), 0, "a sync writes what waits");
    }
}
