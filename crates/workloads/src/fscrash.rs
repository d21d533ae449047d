//! The crash check of iolab's file system. A seeded mix of creates,
//! mknods (FIFOs, devices, sockets), writes, fallocates (allocations,
//! zeroed ranges, punched holes), copies, mkdirs, renames, links,
//! unlinks, rmdirs, extended attributes set and removed, fsyncs, files
//! unlinked while open and directories removed while looked up runs on
//! the file system over a recording device, by one writer or by several
//! threads at once on the one tree (as FUSE's worker threads call it).
//! Every crash state a power cut could leave (after each flush, and
//! sampled between with dropped, reordered and torn writes) is checked
//! as an administrator would after the crash: `fsck -p`, then `fsck -n`,
//! then the files fsync'd before the crash read back.
//!
//! The promises: under `sync`, preen repairs everything a crash leaves
//! (only its safe classes occur) and every fsync'd file holds what was
//! fsync'd (unless a later write to it had begun); under `softdep`, fsck
//! finds nothing but leaks, which the background fsck (`-B`) repairs, and
//! every fsync'd file holds what was fsync'd; under `log`, the log's
//! replay alone leaves nothing for fsck to find, every fsync'd file is
//! whole and (with one writer, whose every step's tree is taken) the tree
//! is one a commit made; under `async`, nothing is promised, and the
//! check shows the damage found. Under `softdep` and `log` no file may
//! show what its blocks held before it (the free space is filled with
//! [`OLD_DATA`] before the run: a sector of it in a file is a block
//! whose pointer reached the disk before its contents).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use device::{CrashPoint, Device, Event, MemDevice, Recording, RecordingDevice, Replayer};
use ffs::fsck::{fsck, Repair};
use ffs::{Ffs, MkfsOptions, MountOptions, Policy};
use fsapi::testing::{apply, Op};
use fsapi::{FileSystem, Owner, SetAttr, ROOT};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::crash::{crash_points_of, policy_name, CrashError};

/// Files the workload fsyncs and never renames or removes.
const DURABLE_FILES: u64 = 4;

/// Every this many operations, one makes a file, writes it and unlinks
/// it while it is still open.
const ORPHAN_EVERY: u64 = 10;

/// Every this many operations, one makes a directory holding a file and
/// removes both while the directory is still looked up (as `rm -rf`
/// through the kernel does: the kernel forgets it later).
const HELD_DIR_EVERY: u64 = 20;

/// Every this many operations, one grows a file of the mix past its
/// direct blocks, into its single or double indirect block, with no
/// fsync: what a file written for long without fsync does (the `sync`
/// policy once wrote an inode before its new indirect block).
const GROW_EVERY: u64 = 8;

/// Every this many operations, one punches a hole in a file of the mix
/// somewhere in its first 3,200 blocks, up to 2,100 blocks long: across
/// the direct blocks and the single and double indirect ones `grow`
/// makes, freeing some of those whole.
const PUNCH_EVERY: u64 = 8;

/// Every this many operations, one moves a directory of the mix into
/// another directory (the move soft updates must mark, since a crash
/// inside it can leave the directory named from both parents).
const MOVE_DIR_EVERY: u64 = 16;

/// Every this many rewrites of a durable file, one punches a hole in it
/// before its fsync.
const DURABLE_PUNCH_EVERY: u64 = 3;

/// Where the single and the double indirect block of a file begin (12
/// direct blocks, then 1024 through the single, of 4 KiB).
const SINGLE_INDIRECT_AT: u64 = 12 * 4096;
const DOUBLE_INDIRECT_AT: u64 = (12 + 1024) * 4096;

/// What to run and how many crash states to check.
#[derive(Clone, Debug)]
pub struct FsCrashSpec {
    pub policy: Policy,
    /// The promise each state is checked against: the policy's own, or
    /// another's (a policy that does not keep it must be caught).
    pub promise: Policy,
    /// Operations on the tree, fsyncs included: in all, shared among
    /// the writers.
    pub operations: u64,
    /// Every this many operations, one rewrites a durable file and fsyncs it.
    pub fsync_every: u64,
    pub sampled_states: u64,
    pub seed: u64,
    pub only_state: Option<u64>,
    pub device_bytes: u64,
    /// The buffer cache: small, so that evictions write back at any time.
    pub cache_bytes: u64,
    /// Instead of the mix: extract this tar archive (uncompressed, in
    /// memory) as GNU tar does, then sync; the tree is taken after every
    /// member.
    pub archive: Option<Arc<Vec<u8>>>,
    /// OS threads running the workload at once on the one file system
    /// (at least 1). With several, each runs its share of the operations
    /// with a random stream and durable files (`keep{w}_{k}`) of its own,
    /// on the tree they all share, or extracts the archive into `/w{i}`;
    /// the interleaving differs run to run, so no state can be checked
    /// again alone (`only_state` is refused), and under `log` the tree is
    /// not checked against the commits (no step's tree can be taken while
    /// the others run).
    pub writers: u32,
}

/// How a crash state broke the promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsViolationClass {
    /// fsck could not read the file system at all (no superblock).
    Unreadable,
    /// Damage preen does not repair, or left behind.
    DamageLeft,
    /// A file fsync'd before the crash is missing or holds other data.
    FsyncLost,
    /// Under `log`: fsck found anything at all once the log was replayed.
    NotClean,
    /// Under `log`: the tree after the crash is not one a commit made (a
    /// step half there, or a completed commit missing).
    NotCommitted,
    /// Under `softdep`: fsck found damage other than leaks.
    BeyondLeaks,
    /// Under `softdep` and `log`: a file shows what its blocks held
    /// before it ([`OLD_DATA`]): a pointer durable before the contents.
    OldData,
}

/// What every free block holds before a crash run: no write of the mix
/// makes a sector of it (the mix's fills are odd bytes, its patterns
/// vary byte to byte).
pub const OLD_DATA: u8 = 0xee;

impl FsViolationClass {
    pub fn name(self) -> &'static str {
        match self {
            FsViolationClass::Unreadable => "unreadable",
            FsViolationClass::DamageLeft => "damage_left",
            FsViolationClass::FsyncLost => "fsync_lost",
            FsViolationClass::NotClean => "not_clean",
            FsViolationClass::NotCommitted => "not_committed",
            FsViolationClass::BeyondLeaks => "beyond_leaks",
            FsViolationClass::OldData => "old_data",
        }
    }
}

#[derive(Clone, Debug)]
pub struct FsViolation {
    pub state: u64,
    pub after_events: usize,
    pub policy: String,
    pub seed: u64,
    pub class: FsViolationClass,
    pub detail: String,
}

/// What the enumeration checked and found.
#[derive(Clone, Debug, Default)]
pub struct FsCrashReport {
    /// Writers that ran the workload at once (see [`FsCrashSpec::writers`]).
    pub writers: u32,
    pub operations: u64,
    pub fsyncs: u64,
    pub events: usize,
    pub writes: usize,
    pub flushes: usize,
    pub states_checked: u64,
    pub flush_states: u64,
    pub sampled_states: u64,
    pub violations: u64,
    pub unreadable: u64,
    pub damage_left: u64,
    pub fsync_lost: u64,
    pub not_clean: u64,
    pub not_committed: u64,
    pub beyond_leaks: u64,
    /// Under `softdep` and `log`: states where a file showed [`OLD_DATA`].
    pub old_data: u64,
    /// Under `softdep`: states whose superblock said a directory was
    /// moving between directories, which every mount refuses until
    /// `fsck -p` has seen them (held to preen's promise, not leaks only).
    pub marked_for_check: u64,
    /// fsck classes found (before repair), by name: in how many states.
    pub damage_found: BTreeMap<&'static str, u64>,
    /// States the first check found anything in (before any repair):
    /// what needed a repair beyond the mount's replay, violation or not.
    pub needed_repair: u64,
    pub first_violation: Option<FsViolation>,
}

/// One version of a durable file: its bytes, when its write began and
/// when its fsync returned (event counts).
pub(crate) struct Version {
    data: Vec<u8>,
    write_began: usize,
    fsynced: usize,
}

/// The whole tree: path ("" the root) -> (kind, content or target, links,
/// extended attributes).
type Tree = BTreeMap<String, (fsapi::FileType, Vec<u8>, u32, Xattrs)>;

/// An inode's extended attributes, (name, value) in the order listed; a
/// call that fails is kept as its errno under the call's name (a damaged
/// block differs from any tree a step left).
type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// Under `log`: the tree after each step of the workload, with the events
/// recorded by then and the log's commits completed by then. A commit
/// made during step `k` (at the start of a call, or by an fsync) holds the
/// tree as step `k - 1` left it.
struct Step {
    end: usize,
    /// The log's last transaction sealed and last durable after the step.
    sealed: u64,
    durable: u64,
    tree: Tree,
}

/// A durable file (in the root) and the versions its fsyncs made.
pub(crate) struct Durable {
    pub(crate) name: String,
    pub(crate) versions: Vec<Version>,
}

/// What the workload leaves to check against.
struct Ran {
    durable: Vec<Durable>,
    /// Under `log` with one writer: the tree after each step (none taken
    /// with several, see [`run_writers`]).
    steps: Vec<Step>,
}

/// Runs the workload on a fresh file system over a recording device and
/// checks every crash state.
pub fn enumerate(spec: &FsCrashSpec) -> Result<FsCrashReport, CrashError> {
    check_spec(spec)?;
    let recording = Recording::new();
    let initial = old_data_filled(spec.device_bytes)?;
    let mem: Arc<dyn Device> =
        Arc::new(MemDevice::from_bytes("fs", &initial.to_vec(), initial.sector_bytes())?);
    let dev: Arc<dyn Device> = Arc::new(RecordingDevice::new(mem, 0, Arc::clone(&recording)));
    // Under `log`, commits deferred to the next seal: the calls that go on
    // while a sealed commit waits for the committer thread, in an order
    // the same from run to run (the thread itself would change it).
    let options = MountOptions {
        policy: spec.policy,
        cache_bytes: spec.cache_bytes,
        commits: ffs::Commits::Deferred,
        ..Default::default()
    };
    let fs = Ffs::mount(Arc::clone(&dev), &options).map_err(|e| CrashError::Build(e.to_string()))?;
    let built = recording.len();
    let ran = run_workload(spec, &fs, &recording)?;
    drop(fs);
    let events = recording.events();
    let points = crash_points_of(&events, built, spec.sampled_states, spec.seed);
    if let Some(only) = spec.only_state.filter(|&only| only >= points.len() as u64) {
        return Err(CrashError::Spec(format!(
            "--state {only}: this run has states 0 to {}",
            points.len().saturating_sub(1)
        )));
    }
    let mut report = FsCrashReport {
        operations: spec.operations,
        writers: spec.writers,
        fsyncs: ran.durable.iter().map(|d| d.versions.len() as u64).sum(),
        events: events.len(),
        writes: events.iter().filter(|e| matches!(e, Event::Write { .. })).count(),
        flushes: events.iter().filter(|e| matches!(e, Event::Flush { .. })).count(),
        ..FsCrashReport::default()
    };
    let mut replayer = Replayer::new(events, vec![initial]);
    for (state, (point, sampled)) in points.into_iter().enumerate() {
        let state = state as u64;
        if spec.only_state.is_some_and(|only| only != state) {
            continue;
        }
        let image: Arc<dyn Device> = Arc::new(replayer.images_at(point)?.remove(0));
        let found_before: u64 = report.damage_found.values().sum();
        let verdict = check_image(spec, &image, &ran, &replayer, point.after_events, &mut report);
        if report.damage_found.values().sum::<u64>() > found_before {
            report.needed_repair += 1;
        }
        report.tally(state, &point, sampled, verdict);
    }
    Ok(report)
}

/// A new file system of `bytes` whose free blocks all hold
/// [`OLD_DATA`], as a used disk's hold a removed file's data: written
/// through a file filling the free space, then removed.
fn old_data_filled(bytes: u64) -> Result<MemDevice, CrashError> {
    let mem = Arc::new(MemDevice::new(bytes)?);
    let dev: Arc<dyn Device> = mem.clone();
    ffs::mkfs(&dev, &MkfsOptions::default()).map_err(|e| CrashError::Spec(format!("--size: {e}")))?;
    let built = |e: &dyn std::fmt::Display| CrashError::Build(format!("filling the free space: {e}"));
    let fs = Ffs::mount(Arc::clone(&dev), &MountOptions { policy: Policy::Async, ..Default::default() })
        .map_err(|e| built(&e))?;
    let filler = fs.create(ROOT, OsStr::new("filler"), Owner::root(0o644)).map_err(|e| built(&e))?;
    let chunk = vec![OLD_DATA; 1 << 20];
    let mut at = 0;
    // Until the file system is full: the filler's indirect blocks take
    // what the data leaves.
    while fs.write(filler.ino, at, &chunk).is_ok_and(|n| n == chunk.len()) {
        at += chunk.len() as u64;
    }
    // Written before the removal, which drops dirty buffers unwritten.
    fs.fsync(filler.ino, false).map_err(|e| built(&e))?;
    fs.forget(filler.ino, 1);
    fs.unlink(ROOT, OsStr::new("filler")).map_err(|e| built(&e))?;
    fs.unmount().map_err(|e| built(&e))?;
    Ok(MemDevice::from_bytes("initial", &mem.to_vec(), mem.sector_bytes())?)
}

/// The first regular file on `fs` holding a sector of [`OLD_DATA`], and
/// where: a block its pointer names whose contents never reached the
/// disk. Only the file's data is read (holes skipped).
pub(crate) fn old_data_shown(fs: &dyn FileSystem) -> Option<String> {
    for path in regular_files(fs) {
        let Ok(attr) = fsapi::resolve(fs, &path) else { continue };
        let mut at = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        while at < attr.size {
            let Ok(data) = fs.lseek(attr.ino, at, fsapi::Whence::Data) else { break };
            let Ok(n) = fs.read(attr.ino, data, &mut buf) else { break };
            if n == 0 {
                break;
            }
            if let Some(k) = buf[..n].chunks_exact(512).position(|s| s.iter().all(|&b| b == OLD_DATA)) {
                fs.forget(attr.ino, 1);
                return Some(format!(
                    "{path} shows old data (a sector of {OLD_DATA:#04x}) at byte {}",
                    data + k as u64 * 512
                ));
            }
            at = data + n as u64;
        }
        fs.forget(attr.ino, 1);
    }
    None
}

/// The flags a file-system crash run refuses, before anything is made.
fn check_spec(spec: &FsCrashSpec) -> Result<(), CrashError> {
    if spec.operations == 0 || spec.fsync_every == 0 {
        return Err(CrashError::Spec("--transactions and --sync-every must be at least 1".into()));
    }
    if spec.promise == Policy::Log && spec.policy != Policy::Log {
        return Err(CrashError::Spec("the log's promise is checked under the log policy only".into()));
    }
    if spec.writers == 0 {
        return Err(CrashError::Spec("--writers 0: give at least 1 writer".into()));
    }
    if spec.writers > 1 && spec.only_state.is_some() {
        return Err(CrashError::Spec(format!(
            "--state with --writers {}: several writers interleave differently each run, so a state's \
             number names no fixed state; check states one by one with --writers 1, or run the same \
             flags again without --state",
            spec.writers
        )));
    }
    if spec.writers > 1 && spec.archive.is_none() && spec.operations < u64::from(spec.writers) {
        return Err(CrashError::Spec(format!(
            "--transactions {} is fewer than --writers {}: the operations are shared among the writers",
            spec.operations, spec.writers
        )));
    }
    Ok(())
}

/// One crash state's image checked against the promise of `spec`, after
/// `after_events` of the history (`report` counts the states marked for
/// a check and the damage fsck found).
fn check_image(
    spec: &FsCrashSpec,
    image: &Arc<dyn Device>,
    ran: &Ran,
    replayer: &Replayer,
    after_events: usize,
    report: &mut FsCrashReport,
) -> Option<(FsViolationClass, String)> {
    match spec.promise {
        Policy::Log => {
            // With several writers no step's tree was taken: the
            // tree is not checked against the commits.
            let window = (!ran.steps.is_empty())
                .then(|| committed_window(&ran.steps, replayer.events(), after_events));
            check_logged_state(image, ran, window, after_events, &mut report.damage_found)
        }
        // A state whose superblock says a directory was moving between
        // directories is held to preen's promise, which the mount's
        // refusal of it asks for (`Core::mark_moving`).
        Policy::Softdep if marked_for_check(image) => {
            report.marked_for_check += 1;
            check_state(image, Repair::Preen, &ran.durable, after_events, &mut report.damage_found, true)
        }
        Policy::Softdep => check_softdep_state(image, &ran.durable, after_events, &mut report.damage_found),
        _ => check_state(image, Repair::Preen, &ran.durable, after_events, &mut report.damage_found, false),
    }
}

/// Runs the workload, by one writer or several at once (see
/// [`FsCrashSpec::writers`]); returns each durable file's versions and,
/// under `log` with one writer, the tree after every step.
fn run_workload(spec: &FsCrashSpec, fs: &Ffs, recording: &Recording) -> Result<Ran, CrashError> {
    if spec.writers > 1 {
        return run_writers(spec, fs, recording);
    }
    let mut steps = Vec::new();
    let logged = spec.policy == Policy::Log;
    let ffs = fs;
    let mut step = |_: &dyn FileSystem| {
        if logged {
            let tree = shape_of(ffs);
            let fs = ffs;
            let (sealed, durable) = fs.log_ids().unwrap_or_default();
            steps.push(Step { end: recording.len(), sealed, durable, tree });
        }
    };
    step(fs);
    if let Some(archive) = &spec.archive {
        // Every call that changes the tree is a step: a commit may come
        // between two writes of one member.
        let observed = Observed { inner: fs, after: std::sync::Mutex::new(|| step(fs)) };
        crate::tree::extract(&observed, ROOT, archive)
            .map_err(|e| CrashError::Build(format!("extracting the archive: {e}")))?;
        fs.sync().map_err(|e| CrashError::Build(format!("sync after the extraction: {e}")))?;
        return Ok(Ran { durable: Vec::new(), steps });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let durable = run_mix(
        spec.fsync_every,
        fs,
        recording,
        durable_names(1, 0),
        0..spec.operations,
        &mut rng,
        &mut step,
    )?;
    Ok(Ran { durable, steps })
}

/// The names of writer `w`'s durable files: `keep{k}` with one writer (as
/// ever), `keep{w}_{k}` with several, so that each writer owns its own.
pub(crate) fn durable_names(writers: u32, w: u32) -> Vec<String> {
    match writers {
        1 => (0..DURABLE_FILES).map(|k| format!("keep{k}")).collect(),
        _ => (0..DURABLE_FILES).map(|k| format!("keep{w}_{k}")).collect(),
    }
}

/// [`FsCrashSpec::writers`] OS threads on the one file system, started
/// together (a barrier: none begins before all are running). Each runs
/// its share of the mix (operations numbered as one writer numbers them,
/// in a range of its own) with its own random stream (the seed's, jumped
/// once per writer before it) and its own durable files; or, with an
/// archive, extracts it into a directory of its own (`/w{i}`), and one
/// sync follows. No step's tree is taken: while the others run, a tree
/// read is no state the file system was ever in.
fn run_writers(spec: &FsCrashSpec, fs: &Ffs, recording: &Recording) -> Result<Ran, CrashError> {
    let n = spec.writers;
    let start = std::sync::Barrier::new(n as usize);
    let writer = |w: u32| -> Result<Vec<Durable>, CrashError> {
        start.wait();
        if let Some(archive) = &spec.archive {
            let failed = |e: &dyn std::fmt::Display| CrashError::Build(format!("writer {w} extracting: {e}"));
            let dir =
                fs.mkdir(ROOT, OsStr::new(&format!("w{w}")), Owner::root(0o755)).map_err(|e| failed(&e))?;
            crate::tree::extract(fs, dir.ino, archive).map_err(|e| failed(&e))?;
            fs.forget(dir.ino, 1);
            return Ok(Vec::new());
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
        (0..w).for_each(|_| rng.jump());
        let (ops, n) = (spec.operations, u64::from(n));
        let share = ops * u64::from(w) / n..ops * (u64::from(w) + 1) / n;
        run_mix(
            spec.fsync_every,
            fs,
            recording,
            durable_names(spec.writers, w),
            share,
            &mut rng,
            &mut |_: &dyn FileSystem| {},
        )
    };
    let writer = &writer;
    let results: Vec<Result<Vec<Durable>, CrashError>> = std::thread::scope(|s| {
        let running: Vec<_> = (0..n).map(|w| s.spawn(move || writer(w))).collect();
        running.into_iter().map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut durable = Vec::new();
    for result in results {
        durable.extend(result?);
    }
    if spec.archive.is_some() {
        fs.sync().map_err(|e| CrashError::Build(format!("sync after the extractions: {e}")))?;
    }
    Ok(Ran { durable, steps: Vec::new() })
}

/// One of the durable files, picked at random, rewritten (sometimes with
/// a hole punched) and fsync'd: its new version recorded with the
/// history's length before the write and after the fsync.
fn rewrite_durable(
    fs: &dyn FileSystem,
    durable: &mut [Durable],
    recording: &Recording,
    rng: &mut Xoshiro256PlusPlus,
    step: &mut impl FnMut(&dyn FileSystem),
) -> Result<(), CrashError> {
    let k = rng.random_range(0..DURABLE_FILES);
    let len = rng.random_range(1..20_000usize);
    let fill: u8 = rng.random();
    let mut data: Vec<u8> = (0..len).map(|j| (j as u8).wrapping_mul(7) ^ fill).collect();
    let hole = (rng.random_range(0..DURABLE_PUNCH_EVERY) == 0).then(|| {
        let start = rng.random_range(0..len);
        start..rng.random_range(start + 1..=len)
    });
    // Conservative under several writers too: the count read
    // before the write began and after the fsync returned.
    let file = &mut durable[k as usize];
    let write_began = recording.len();
    // One rewrite in four goes into blocks fallocate allocated first
    // (marked unwritten), told from the fill so that the seeded stream
    // of choices stays as it was.
    let preallocate = fill % 4 == 0;
    rewrite(fs, &file.name, &mut data, hole, preallocate, step)
        .map_err(|e| CrashError::Build(format!("rewriting a durable file: {e}")))?;
    file.versions.push(Version { data, write_began, fsynced: recording.len() });
    Ok(())
}

/// One writer's seeded operations, numbered `ops` (the numbers pick the
/// special operations and name their files, so writers' never collide);
/// returns the versions of its durable files, named `names`.
pub(crate) fn run_mix(
    fsync_every: u64,
    fs: &dyn FileSystem,
    recording: &Recording,
    names: Vec<String>,
    ops: std::ops::Range<u64>,
    rng: &mut Xoshiro256PlusPlus,
    step: &mut impl FnMut(&dyn FileSystem),
) -> Result<Vec<Durable>, CrashError> {
    let mut durable: Vec<Durable> =
        names.into_iter().map(|name| Durable { name, versions: Vec::new() }).collect();
    // Files held open after their unlink; the crash finds the last ones open.
    let mut held: Vec<u64> = Vec::new();
    for i in ops {
        if i % fsync_every == fsync_every - 1 {
            rewrite_durable(fs, &mut durable, recording, rng, step)?;
            continue;
        }
        if i % GROW_EVERY == GROW_EVERY / 2 {
            grow(fs, rng);
            step(fs);
            continue;
        }
        if i % PUNCH_EVERY == 0 {
            punch(fs, rng);
            step(fs);
            continue;
        }
        if i % MOVE_DIR_EVERY == 2 {
            move_directory(fs, i, rng);
            step(fs);
            continue;
        }
        let special = if i % HELD_DIR_EVERY == 14 {
            Some(removed_while_looked_up(fs, i, rng, step))
        } else if i % ORPHAN_EVERY == ORPHAN_EVERY / 2 {
            Some(unlinked_while_open(fs, i, rng, step))
        } else {
            None
        };
        if let Some(ino) = special {
            held.extend(ino);
            if held.len() > 2 {
                fs.forget(held.remove(0), 1);
                step(fs);
            }
            continue;
        }
        let op = Op::decode(std::array::from_fn(|_| rng.random()));
        let (d, f) = dirs_and_files(fs);
        // Durable files are never linked, truncated or written by the mix,
        // nor a durable directory (`/keep...`) changed.
        let f: Vec<String> = f.into_iter().filter(|p| !p.starts_with("/keep")).collect();
        let d: Vec<String> = d.into_iter().filter(|p| !p.starts_with("/keep")).collect();
        // Errors (ENOENT, EEXIST, ...) are part of the mix.
        let _ = apply(fs, &op, &d, &f);
        step(fs);
    }
    Ok(durable)
}

/// A regular file of the mix (never a durable one), picked at random,
/// with one reference counted for the caller to forget.
fn a_file_of_the_mix(fs: &dyn FileSystem, rng: &mut Xoshiro256PlusPlus) -> Option<fsapi::Attr> {
    let files: Vec<String> = regular_files(fs).into_iter().filter(|p| !p.starts_with("/keep")).collect();
    if files.is_empty() {
        return None;
    }
    fsapi::resolve(fs, &files[rng.random_range(0..files.len())]).ok()
}

/// Writes one to three blocks of a file of the mix somewhere through its
/// single indirect block, or (one time in three) its double one, making
/// the indirect blocks on the way. Errors (ENOSPC, no file) are part of
/// the mix.
fn grow(fs: &dyn FileSystem, rng: &mut Xoshiro256PlusPlus) {
    let Some(file) = a_file_of_the_mix(fs, rng) else { return };
    let offset = if rng.random_range(0..3) == 0 {
        DOUBLE_INDIRECT_AT + rng.random_range(0..2048) * 4096
    } else {
        SINGLE_INDIRECT_AT + rng.random_range(0..1024) * 4096
    };
    let data = vec![rng.random::<u8>() | 1; rng.random_range(1..3) * 4096];
    let _ = fs.write(file.ino, offset, &data);
    fs.forget(file.ino, 1);
}

/// Moves a directory of the mix (with what it holds) into another
/// directory, never into itself or below it, under a new name; makes one
/// in the root when there is none. Errors (another writer moved or
/// removed one of them) are part of the mix.
fn move_directory(fs: &dyn FileSystem, i: u64, rng: &mut Xoshiro256PlusPlus) {
    let (dirs, _) = dirs_and_files(fs);
    let dirs: Vec<String> = dirs.into_iter().filter(|p| !p.starts_with("/keep")).collect();
    let movable: Vec<&String> = dirs.iter().filter(|d| !d.is_empty()).collect();
    let Some(&src) = movable.get(rng.random_range(0..movable.len().max(1))) else {
        if let Ok(made) = fs.mkdir(ROOT, OsStr::new(&format!("moving{i}")), Owner::root(0o755)) {
            fs.forget(made.ino, 1);
        }
        return;
    };
    let (parent, name) = src.rsplit_once('/').unwrap_or(("", src));
    let below = format!("{src}/");
    let targets: Vec<&String> =
        dirs.iter().filter(|t| *t != src && !t.starts_with(&below) && t.as_str() != parent).collect();
    let Some(&target) = targets.get(rng.random_range(0..targets.len().max(1))) else { return };
    let (from, to) = (fsapi::resolve(fs, parent), fsapi::resolve(fs, target));
    if let (Ok(from), Ok(to)) = (&from, &to) {
        let _ = fs.rename(from.ino, OsStr::new(name), to.ino, OsStr::new(&format!("mv{i}")));
    }
    for attr in [from, to].into_iter().flatten() {
        fs.forget(attr.ino, 1);
    }
}

/// Punches a hole in a file of the mix (see [`PUNCH_EVERY`]), at times
/// not on a block's edge. Errors (no file) are part of the mix.
fn punch(fs: &dyn FileSystem, rng: &mut Xoshiro256PlusPlus) {
    let Some(file) = a_file_of_the_mix(fs, rng) else { return };
    let offset = rng.random_range(0..1100) * 4096 + rng.random_range(0..2) * rng.random_range(0..4096);
    let len = rng.random_range(1..2100) * 4096;
    let _ = fs.fallocate(file.ino, fsapi::Fallocate::PunchHole, offset, len);
    fs.forget(file.ino, 1);
}

/// A directory holding a file, both removed while the directory is still
/// looked up (as `rm -rf` through the kernel, which forgets it later).
fn removed_while_looked_up(
    fs: &dyn FileSystem,
    i: u64,
    rng: &mut Xoshiro256PlusPlus,
    step: &mut impl FnMut(&dyn FileSystem),
) -> Option<u64> {
    let name = format!("held{i}");
    let dir = fs.mkdir(ROOT, OsStr::new(&name), Owner::root(0o755)).ok()?;
    step(fs);
    if let Ok(file) = fs.create(dir.ino, OsStr::new("f"), Owner::root(0o644)) {
        // A commit may come between the create and the write.
        step(fs);
        let _ = fs.write(file.ino, 0, &vec![i as u8; rng.random_range(1..9_000usize)]);
        fs.forget(file.ino, 1);
        step(fs);
        let _ = fs.unlink(dir.ino, OsStr::new("f"));
        step(fs);
    }
    let _ = fs.rmdir(ROOT, OsStr::new(&name));
    step(fs);
    Some(dir.ino)
}

/// A file unlinked while still open (as a program's temporary file): on
/// the orphan list until closed, or a crash.
fn unlinked_while_open(
    fs: &dyn FileSystem,
    i: u64,
    rng: &mut Xoshiro256PlusPlus,
    step: &mut impl FnMut(&dyn FileSystem),
) -> Option<u64> {
    let name = format!("open{i}");
    let file = fs.create(ROOT, OsStr::new(&name), Owner::root(0o600)).ok()?;
    step(fs);
    let _ = fs.write(file.ino, 0, &vec![i as u8; rng.random_range(1..9_000usize)]);
    step(fs);
    let _ = fs.unlink(ROOT, OsStr::new(&name));
    step(fs);
    Some(file.ino)
}

/// A file system that calls `after` once each call that changes the tree
/// has returned.
struct Observed<'a, F: FnMut() + Send> {
    inner: &'a Ffs,
    after: std::sync::Mutex<F>,
}

impl<F: FnMut() + Send> Observed<'_, F> {
    fn changed<T>(&self, result: fsapi::Result<T>) -> fsapi::Result<T> {
        (self.after.lock().unwrap_or_else(|e| e.into_inner()))();
        result
    }
}

impl<F: FnMut() + Send> FileSystem for Observed<'_, F> {
    fn lookup(&self, parent: fsapi::Ino, name: &OsStr) -> fsapi::Result<fsapi::Attr> {
        self.inner.lookup(parent, name)
    }
    fn forget(&self, ino: fsapi::Ino, count: u64) {
        self.inner.forget(ino, count)
    }
    fn getattr(&self, ino: fsapi::Ino) -> fsapi::Result<fsapi::Attr> {
        self.inner.getattr(ino)
    }
    fn setattr(&self, ino: fsapi::Ino, changes: &SetAttr) -> fsapi::Result<fsapi::Attr> {
        self.changed(self.inner.setattr(ino, changes))
    }
    fn create(&self, parent: fsapi::Ino, name: &OsStr, owner: Owner) -> fsapi::Result<fsapi::Attr> {
        self.changed(self.inner.create(parent, name, owner))
    }
    fn mkdir(&self, parent: fsapi::Ino, name: &OsStr, owner: Owner) -> fsapi::Result<fsapi::Attr> {
        self.changed(self.inner.mkdir(parent, name, owner))
    }
    fn mknod(
        &self,
        parent: fsapi::Ino,
        name: &OsStr,
        kind: fsapi::FileType,
        rdev: u32,
        owner: Owner,
    ) -> fsapi::Result<fsapi::Attr> {
        self.changed(self.inner.mknod(parent, name, kind, rdev, owner))
    }
    fn symlink(
        &self,
        parent: fsapi::Ino,
        name: &OsStr,
        target: &OsStr,
        owner: Owner,
    ) -> fsapi::Result<fsapi::Attr> {
        self.changed(self.inner.symlink(parent, name, target, owner))
    }
    fn readlink(&self, ino: fsapi::Ino) -> fsapi::Result<Vec<u8>> {
        self.inner.readlink(ino)
    }
    fn link(&self, ino: fsapi::Ino, new_parent: fsapi::Ino, new_name: &OsStr) -> fsapi::Result<fsapi::Attr> {
        self.changed(self.inner.link(ino, new_parent, new_name))
    }
    fn unlink(&self, parent: fsapi::Ino, name: &OsStr) -> fsapi::Result<()> {
        self.changed(self.inner.unlink(parent, name))
    }
    fn rmdir(&self, parent: fsapi::Ino, name: &OsStr) -> fsapi::Result<()> {
        self.changed(self.inner.rmdir(parent, name))
    }
    fn rename2(
        &self,
        parent: fsapi::Ino,
        name: &OsStr,
        to: fsapi::Ino,
        to_name: &OsStr,
        mode: fsapi::RenameMode,
    ) -> fsapi::Result<()> {
        self.changed(self.inner.rename2(parent, name, to, to_name, mode))
    }
    fn read(&self, ino: fsapi::Ino, offset: u64, buf: &mut [u8]) -> fsapi::Result<usize> {
        self.inner.read(ino, offset, buf)
    }
    fn write(&self, ino: fsapi::Ino, offset: u64, data: &[u8]) -> fsapi::Result<usize> {
        self.changed(self.inner.write(ino, offset, data))
    }
    fn readdir(
        &self,
        ino: fsapi::Ino,
        offset: u64,
        entry: &mut dyn FnMut(fsapi::DirEntry) -> bool,
    ) -> fsapi::Result<()> {
        self.inner.readdir(ino, offset, entry)
    }
    fn fsync(&self, ino: fsapi::Ino, data_only: bool) -> fsapi::Result<()> {
        self.inner.fsync(ino, data_only)
    }
    fn statfs(&self) -> fsapi::Result<fsapi::StatFs> {
        self.inner.statfs()
    }
    fn sync(&self) -> fsapi::Result<()> {
        self.inner.sync()
    }
    fn file_bytes_max(&self) -> u64 {
        self.inner.file_bytes_max()
    }

    fn fallocate(&self, ino: fsapi::Ino, mode: fsapi::Fallocate, offset: u64, len: u64) -> fsapi::Result<()> {
        self.changed(self.inner.fallocate(ino, mode, offset, len))
    }
    fn lseek(&self, ino: fsapi::Ino, offset: u64, whence: fsapi::Whence) -> fsapi::Result<u64> {
        self.inner.lseek(ino, offset, whence)
    }
    fn copy_file_range(
        &self,
        from: fsapi::Ino,
        at: u64,
        to: fsapi::Ino,
        to_at: u64,
        len: u64,
    ) -> fsapi::Result<u64> {
        self.changed(self.inner.copy_file_range(from, at, to, to_at, len))
    }

    fn getxattr(&self, ino: fsapi::Ino, name: &OsStr) -> fsapi::Result<Vec<u8>> {
        self.inner.getxattr(ino, name)
    }
    fn setxattr(
        &self,
        ino: fsapi::Ino,
        name: &OsStr,
        value: &[u8],
        flags: fsapi::XattrFlags,
    ) -> fsapi::Result<()> {
        self.changed(self.inner.setxattr(ino, name, value, flags))
    }
    fn listxattr(&self, ino: fsapi::Ino) -> fsapi::Result<Vec<u8>> {
        self.inner.listxattr(ino)
    }
    fn removexattr(&self, ino: fsapi::Ino, name: &OsStr) -> fsapi::Result<()> {
        self.changed(self.inner.removexattr(ino, name))
    }
}

/// Writes `data` as the whole of the file `name` in the root, punches
/// `hole` in it (zeroed in `data` too) and fsyncs it, calling `step`
/// after each call that changes the tree. With `preallocate`, the file
/// is first emptied and given blocks past `data`'s end with fallocate,
/// which the write then fills.
fn rewrite(
    fs: &dyn FileSystem,
    name: &str,
    data: &mut [u8],
    hole: Option<std::ops::Range<usize>>,
    preallocate: bool,
    step: &mut impl FnMut(&dyn FileSystem),
) -> fsapi::Result<()> {
    let attr = match fs.lookup(ROOT, OsStr::new(name)) {
        Ok(a) => a,
        Err(fsapi::Errno::NOENT) => {
            let made = fs.create(ROOT, OsStr::new(name), Owner::root(0o644))?;
            step(fs);
            made
        }
        Err(e) => return Err(e),
    };
    if preallocate {
        fs.setattr(attr.ino, &SetAttr { size: Some(0), ..SetAttr::default() })?;
        step(fs);
        let grow = fsapi::Fallocate::Allocate { keep_size: false };
        fs.fallocate(attr.ino, grow, 0, data.len() as u64 + 8192)?;
        step(fs);
    }
    fs.write(attr.ino, 0, data)?;
    step(fs);
    fs.setattr(attr.ino, &SetAttr { size: Some(data.len() as u64), ..SetAttr::default() })?;
    step(fs);
    if let Some(hole) = hole {
        let len = (hole.end - hole.start) as u64;
        fs.fallocate(attr.ino, fsapi::Fallocate::PunchHole, hole.start as u64, len)?;
        data[hole].fill(0);
        step(fs);
    }
    fs.fsync(attr.ino, false)?;
    fs.forget(attr.ino, 1);
    Ok(())
}

/// The tree's directories (the root, "", first) and files and special
/// files (what the mix links, writes and truncates, as
/// `fsapi::testing::files` gives them), found without reading the files.
fn dirs_and_files(fs: &dyn FileSystem) -> (Vec<String>, Vec<String>) {
    let mut dirs = vec![String::new()];
    let mut files = Vec::new();
    for (path, (kind, ..)) in shape_of(fs) {
        match kind {
            fsapi::FileType::Dir if path.is_empty() => {}
            fsapi::FileType::Dir => dirs.push(path),
            fsapi::FileType::File
            | fsapi::FileType::Fifo
            | fsapi::FileType::CharDevice
            | fsapi::FileType::BlockDevice
            | fsapi::FileType::Socket => files.push(path),
            fsapi::FileType::Symlink => {}
        }
    }
    (dirs, files)
}

/// The tree's regular files (what `grow` writes into).
fn regular_files(fs: &dyn FileSystem) -> Vec<String> {
    let shape = shape_of(fs).into_iter();
    shape.filter(|(_, (kind, ..))| *kind == fsapi::FileType::File).map(|(path, _)| path).collect()
}

/// The tree without its files' bytes (their sizes kept, as 8 bytes): file
/// data goes in place outside the log (ordered, as WAPBL and ext4's
/// default), so a block a later step rewrote may hold the newer bytes;
/// what the log promises is the metadata (the fsync'd files' bytes are
/// checked apart). Read without reading the files: a sparse file grown
/// into its double indirect block is megabytes of holes.
fn shape_of(fs: &dyn FileSystem) -> Tree {
    let mut out = Tree::new();
    if let Ok(root) = fs.getattr(ROOT) {
        out.insert(String::new(), (root.kind, Vec::new(), root.nlink, xattrs_of(fs, ROOT)));
    }
    let mut dirs = vec![(ROOT, String::new())];
    while let Some((dir, path)) = dirs.pop() {
        let mut entries = Vec::new();
        let _ = fs.readdir(dir, 0, &mut |e| {
            entries.push(e.name);
            true
        });
        // Its entries read: the reference its lookup took is given back.
        fs.forget(dir, 1);
        for name in entries {
            let child = format!("{path}/{}", String::from_utf8_lossy(&name));
            let Ok(attr) = fs.lookup(dir, OsStr::from_bytes(&name)) else { continue };
            let kept = match attr.kind {
                fsapi::FileType::File => attr.size.to_le_bytes().to_vec(),
                fsapi::FileType::Symlink => fs.readlink(attr.ino).unwrap_or_default(),
                fsapi::FileType::Dir => Vec::new(),
                // A special file's inode holds its kind and number only.
                fsapi::FileType::Fifo
                | fsapi::FileType::CharDevice
                | fsapi::FileType::BlockDevice
                | fsapi::FileType::Socket => attr.rdev.to_le_bytes().to_vec(),
            };
            out.insert(child.clone(), (attr.kind, kept, attr.nlink, xattrs_of(fs, attr.ino)));
            if attr.kind == fsapi::FileType::Dir {
                dirs.push((attr.ino, child));
            } else {
                fs.forget(attr.ino, 1);
            }
        }
    }
    out
}

/// The extended attributes of `ino`, as [`Xattrs`] keeps them.
fn xattrs_of(fs: &dyn FileSystem, ino: fsapi::Ino) -> Xattrs {
    let failed = |call: &str, e: fsapi::Errno| (call.as_bytes().to_vec(), e.name().as_bytes().to_vec());
    let list = match fs.listxattr(ino) {
        Ok(list) => list,
        Err(e) => return vec![failed("listxattr", e)],
    };
    let names = list.split(|&b| b == 0).filter(|n| !n.is_empty());
    names
        .map(|name| match fs.getxattr(ino, OsStr::from_bytes(name)) {
            Ok(value) => (name.to_vec(), value),
            Err(e) => failed("getxattr", e),
        })
        .collect()
}

/// The steps whose tree a crash after `after_events` events may leave
/// under `log`: from the one the last durable transaction holds to the one
/// in progress. A transaction is sealed between calls (before the call of
/// the step that seals it: it holds the step before's tree) and is durable
/// at the last flush of the step its commit completed in, which under
/// deferred commits comes steps later; one whose flush had not completed
/// may or may not be there.
fn committed_window(
    steps: &[Step],
    events: &[Event],
    after_events: usize,
) -> std::ops::RangeInclusive<usize> {
    let mut durable = 0;
    for k in 1..steps.len() {
        if steps[k].durable == steps[k - 1].durable {
            continue;
        }
        let last_flush =
            (steps[k - 1].end..steps[k].end).rev().find(|&i| matches!(events[i], Event::Flush { .. }));
        if last_flush.is_some_and(|p| p < after_events) {
            durable = steps[k].durable;
        }
    }
    let lo = match durable {
        0 => 0,
        d => steps.iter().position(|s| s.sealed >= d).map_or(0, |k| k.saturating_sub(1)),
    };
    let hi = steps.iter().position(|s| s.end >= after_events).unwrap_or(steps.len() - 1);
    lo..=hi.max(lo)
}

/// What an administrator does after the crash (`fsck -p`, or `-B` under
/// `softdep`), and what must hold.
fn check_state(
    image: &Arc<dyn Device>,
    repair: Repair,
    durable: &[Durable],
    after_events: usize,
    found: &mut BTreeMap<&'static str, u64>,
    old_data: bool,
) -> Option<(FsViolationClass, String)> {
    let preened = match fsck_counted(image, repair, found) {
        Ok(r) => r,
        Err(violation) => return Some(violation),
    };
    if let Some(left) = preened.findings.iter().find(|f| !f.repaired) {
        return Some((FsViolationClass::DamageLeft, format!("{}: {}", left.class.name(), left.detail)));
    }
    match fsck(image, Repair::No) {
        Ok(again) if again.clean() => {}
        Ok(again) => {
            let f = &again.findings[0];
            return Some((
                FsViolationClass::DamageLeft,
                format!("after preen, {}: {}", f.class.name(), f.detail),
            ));
        }
        Err(e) => return Some((FsViolationClass::Unreadable, e.to_string())),
    }
    check_durable(image, durable, after_events, old_data)
}

/// Whether the superblock of `image` says that only `fsck -p` may see it
/// (under `softdep`, a directory was moving between directories).
fn marked_for_check(image: &Arc<dyn Device>) -> bool {
    ffs::read_superblock(image).is_ok_and(|sb| sb.damage == ffs::format::Damage::Unknown)
}

/// Under `softdep`: fsck -n finds leaks at most; then the background
/// fsck (`-B`, leaks only) repairs them all, and every fsync'd file is
/// there.
fn check_softdep_state(
    image: &Arc<dyn Device>,
    durable: &[Durable],
    after_events: usize,
    found: &mut BTreeMap<&'static str, u64>,
) -> Option<(FsViolationClass, String)> {
    let checked = match fsck_counted(image, Repair::No, found) {
        Ok(r) => r,
        Err(violation) => return Some(violation),
    };
    if let Some(f) = checked.findings.iter().find(|f| !f.class.is_leak()) {
        return Some((FsViolationClass::BeyondLeaks, format!("{}: {}", f.class.name(), f.detail)));
    }
    check_state(image, Repair::Leaks, durable, after_events, &mut BTreeMap::new(), true)
}

/// Under `log` the promise is whole: fsck, which replays the log as a
/// mount does, finds nothing at all, every fsync'd file is there, and
/// the tree is one a step in `window` left (not checked without one: the
/// steps' trees were not taken).
fn check_logged_state(
    image: &Arc<dyn Device>,
    ran: &Ran,
    window: Option<std::ops::RangeInclusive<usize>>,
    after_events: usize,
    found: &mut BTreeMap<&'static str, u64>,
) -> Option<(FsViolationClass, String)> {
    let checked = match fsck_counted(image, Repair::No, found) {
        Ok(r) => r,
        Err(violation) => return Some(violation),
    };
    if let Some(f) = checked.findings.first() {
        return Some((FsViolationClass::NotClean, format!("{}: {}", f.class.name(), f.detail)));
    }
    if let Some(broken) = check_durable(image, &ran.durable, after_events, true) {
        return Some(broken);
    }
    let window = window?;
    let fs = match Ffs::mount(Arc::clone(image), &MountOptions::default()) {
        Ok(fs) => fs,
        Err(e) => return Some((FsViolationClass::Unreadable, e.to_string())),
    };
    let left = shape_of(&fs);
    if ran.steps[window.clone()].iter().any(|s| s.tree == left) {
        return None;
    }
    Some((
        FsViolationClass::NotCommitted,
        format!(
            "the tree is none of those steps {} to {} left (the last commit completed and the one in progress)",
            window.start(),
            window.end()
        ),
    ))
}

/// fsck on the image, the classes it found counted.
fn fsck_counted(
    image: &Arc<dyn Device>,
    repair: Repair,
    found: &mut BTreeMap<&'static str, u64>,
) -> Result<ffs::fsck::Report, (FsViolationClass, String)> {
    let report = fsck(image, repair).map_err(|e| (FsViolationClass::Unreadable, e.to_string()))?;
    count_classes(&report, found);
    Ok(report)
}

/// Counts each class a check found once for this state.
fn count_classes(report: &ffs::fsck::Report, found: &mut BTreeMap<&'static str, u64>) {
    let mut classes: Vec<&'static str> = report.findings.iter().map(|f| f.class.name()).collect();
    classes.sort_unstable();
    classes.dedup();
    for class in classes {
        *found.entry(class).or_default() += 1;
    }
}

/// Every durable file whose fsync returned before the crash holds that
/// version, or a later one, or anything at all once a later write began;
/// with `old_data`, no file shows what its blocks held before it.
fn check_durable(
    image: &Arc<dyn Device>,
    durable: &[Durable],
    after_events: usize,
    old_data: bool,
) -> Option<(FsViolationClass, String)> {
    let lost = |d: String| (FsViolationClass::FsyncLost, d);
    // The checked image mounts as it is: repaired by preen, or (under
    // `log`) replayed, which is its check.
    let fs = match Ffs::mount(Arc::clone(image), &MountOptions::default()) {
        Ok(fs) => fs,
        Err(e) => return Some(lost(format!("the checked image does not mount: {e}"))),
    };
    let broken = durable_lost(&fs, durable, after_events)
        .map(lost)
        .or_else(|| old_data.then(|| old_data_shown(&fs)).flatten().map(|d| (FsViolationClass::OldData, d)));
    // Unmounted, so that what follows finds the image as the check left
    // it: clean (a mount dropped would leave it for fsck).
    if let Err(e) = fs.unmount() {
        return Some(lost(format!("the checked image does not unmount: {e}")));
    }
    broken
}

/// [`check_durable`] on the mounted image.
pub(crate) fn durable_lost(fs: &dyn FileSystem, durable: &[Durable], after_events: usize) -> Option<String> {
    for Durable { name, versions } in durable {
        let Some(last) = versions.iter().rposition(|v| v.fsynced <= after_events) else { continue };
        let attr = match fs.lookup(ROOT, OsStr::new(name)) {
            Ok(a) => a,
            Err(e) => return Some(format!("/{name}, fsync'd, is gone: {e}")),
        };
        if versions[last + 1..].iter().any(|v| v.write_began < after_events) {
            continue; // a later write had begun: its blocks may be mixed in
        }
        let mut buf = vec![0u8; attr.size as usize];
        let read = fs.read(attr.ino, 0, &mut buf).map(|n| buf.truncate(n));
        if read.is_err() || buf != versions[last].data {
            return Some(format!(
                "/{name} holds {} bytes, not the {} its last fsync made durable",
                buf.len(),
                versions[last].data.len()
            ));
        }
    }
    None
}

impl FsCrashReport {
    /// Counts one checked state and its verdict (the first violation kept).
    pub fn tally(
        &mut self,
        state: u64,
        point: &CrashPoint,
        sampled: bool,
        verdict: Option<(FsViolationClass, String)>,
    ) {
        self.states_checked += 1;
        if sampled {
            self.sampled_states += 1;
        } else {
            self.flush_states += 1;
        }
        let Some((class, detail)) = verdict else { return };
        self.violations += 1;
        match class {
            FsViolationClass::Unreadable => self.unreadable += 1,
            FsViolationClass::DamageLeft => self.damage_left += 1,
            FsViolationClass::FsyncLost => self.fsync_lost += 1,
            FsViolationClass::NotClean => self.not_clean += 1,
            FsViolationClass::NotCommitted => self.not_committed += 1,
            FsViolationClass::BeyondLeaks => self.beyond_leaks += 1,
            FsViolationClass::OldData => self.old_data += 1,
        }
        if self.first_violation.is_none() {
            self.first_violation = Some(FsViolation {
                state,
                after_events: point.after_events,
                policy: policy_name(point.policy),
                seed: point.seed,
                class,
                detail,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check of old data catches a file whose pointer names a block
    /// nothing wrote (a fallocate'd block's mark taken off on the disk:
    /// what a pointer written before its block's contents leaves), and
    /// takes neither a written block nor one still marked for old data.
    #[test]
    fn a_block_nothing_wrote_shows_as_old_data() {
        use ffs::format::{DiskInode, InodeSlot, INODE_BYTES, UNWRITTEN};
        let dev: Arc<dyn Device> = Arc::new(old_data_filled(8 << 20).unwrap());
        let options = MountOptions { policy: Policy::Async, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
        fs.fallocate(f, fsapi::Fallocate::Allocate { keep_size: false }, 0, 3 * 4096).unwrap();
        fs.write(f, 0, b"written").unwrap();
        assert_eq!(old_data_shown(&fs), None, "a written block and marked ones");
        fs.forget(f, 1);
        fs.unmount().unwrap();
        let (block, at) = ffs::read_superblock(&dev).unwrap().inode_place(f as u32);
        let mut buf = vec![0u8; 4096];
        dev.read_at(&mut buf, block * 4096).unwrap();
        let InodeSlot::Used(mut inode) = DiskInode::decode(f as u32, &buf[at..at + INODE_BYTES]) else {
            panic!("inode {f} in use")
        };
        inode.direct[2] &= !UNWRITTEN;
        inode.encode(f as u32, &mut buf[at..at + INODE_BYTES]);
        dev.write_at(&buf, block * 4096).unwrap();
        let fs = Ffs::mount(dev, &options).unwrap();
        let shown = old_data_shown(&fs).expect("the block nothing wrote");
        assert!(shown.starts_with("/f shows old data") && shown.ends_with("at byte 8192"), "{shown}");
    }

    /// The mix's tree after a seed's 400 operations under `async`.
    fn mixed_tree() -> Tree {
        let spec = FsCrashSpec {
            policy: Policy::Async,
            promise: Policy::Async,
            operations: 400,
            fsync_every: 25,
            sampled_states: 0,
            seed: 1,
            only_state: None,
            device_bytes: 32 << 20,
            cache_bytes: 1 << 20,
            archive: None,
            writers: 1,
        };
        let recording = Recording::new();
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(spec.device_bytes).unwrap());
        let dev: Arc<dyn Device> = Arc::new(RecordingDevice::new(mem, 0, Arc::clone(&recording)));
        ffs::mkfs(&dev, &MkfsOptions::default()).unwrap();
        let fs = Ffs::mount(dev, &MountOptions { policy: spec.policy, ..Default::default() }).unwrap();
        run_workload(&spec, &fs, &recording).unwrap();
        shape_of(&fs)
    }

    /// The mix makes special files (the operation language's mknods), so
    /// every policy's crash states hold them: a seed's 400 operations
    /// leave several, of more than one kind.
    #[test]
    fn the_mix_makes_fifos_devices_and_sockets() {
        let kinds: std::collections::BTreeSet<String> =
            mixed_tree().values().filter(|(k, ..)| k.is_special()).map(|(k, ..)| format!("{k:?}")).collect();
        assert!(kinds.len() >= 2, "special kinds left by the mix: {kinds:?}");
    }

    /// The mix sets extended attributes (the operation language's), so
    /// the crash states hold attribute blocks, and the trees compared
    /// under `log` hold their names and values.
    #[test]
    fn the_mix_leaves_extended_attributes() {
        let with: Vec<String> =
            mixed_tree().into_iter().filter(|(_, (.., x))| !x.is_empty()).map(|(p, _)| p).collect();
        assert!(with.len() >= 2, "inodes with attributes left by the mix: {with:?}");
    }

    /// Four writers at once under `sync`: each runs its share of the mix
    /// and fsyncs durable files of its own, several times. They all wait
    /// at one barrier before their first operation, which opens only once
    /// all four threads are running: one after another, the run would
    /// never return.
    #[test]
    fn four_writers_run_the_mix_at_once_and_each_fsyncs_its_own_files() {
        let spec = FsCrashSpec {
            policy: Policy::Sync,
            promise: Policy::Sync,
            operations: 240,
            fsync_every: 8,
            sampled_states: 0,
            seed: 1,
            only_state: None,
            device_bytes: 8 << 20,
            cache_bytes: 256 << 10,
            archive: None,
            writers: 4,
        };
        let recording = Recording::new();
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(spec.device_bytes).unwrap());
        let dev: Arc<dyn Device> = Arc::new(RecordingDevice::new(mem, 0, Arc::clone(&recording)));
        ffs::mkfs(&dev, &MkfsOptions::default()).unwrap();
        let fs = Ffs::mount(dev, &MountOptions { policy: spec.policy, ..Default::default() }).unwrap();
        let ran = run_workload(&spec, &fs, &recording).unwrap();
        for w in 0..4 {
            let fsyncs: usize = ran
                .durable
                .iter()
                .filter(|d| d.name.starts_with(&format!("keep{w}_")))
                .map(|d| d.versions.len())
                .sum();
            assert!(fsyncs >= 2, "writer {w}: {fsyncs} fsyncs");
        }
        assert_eq!(ran.durable.len(), 4 * DURABLE_FILES as usize);
        assert!(ran.steps.is_empty(), "no step's tree is taken with several writers");
    }

    fn step(end: usize, sealed: u64, durable: u64) -> Step {
        Step { end, sealed, durable, tree: Tree::new() }
    }

    /// Transaction 1 sealed at the start of step 1's call (so holding
    /// step 0's tree) and committed only during step 3 (deferred), when
    /// transaction 2 is sealed (holding step 2's): a crash after the first
    /// commit's flush may leave step 0's tree; after the second's, step 2's.
    #[test]
    fn a_deferred_commit_holds_the_tree_of_the_step_before_its_seal() {
        let steps = [step(0, 0, 0), step(2, 1, 0), step(3, 1, 0), step(6, 2, 1), step(9, 2, 2)];
        let write = || Event::Write { device: 0, offset: 0, data: Arc::from(vec![0u8; 512]) };
        let flush = || Event::Flush { device: 0 };
        let events = [write(), write(), write(), write(), flush(), write(), write(), flush(), write()];
        assert_eq!(committed_window(&steps, &events, 6), 0..=3);
        assert_eq!(committed_window(&steps, &events, 8), 2..=4);
    }
}
