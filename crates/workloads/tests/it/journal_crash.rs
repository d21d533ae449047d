//! Crash tests of validation with its journal: the target and the journal
//! each sit on a crash-injecting device; the workload is stopped at many
//! points (every device request passes one gate), and while it is held
//! stopped, with no request in flight, crash images of both devices are
//! taken: the same instant. Recovery (the code `iolab validate` runs) must
//! find no error in any pair of images in group and sync mode.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use device::{Backend, CrashDevice, CrashPolicy, Device, Front, Geometry, MemDevice};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use validation::journal::start_bytes;
use validation::{KeyBytes, KeyMapChoice};
use workloads::journal::{JournalMode, JournalPlace, JournalSpec, JournalWriteError};
use workloads::recover::{recover, RecoverError, Verdict};
use workloads::{run_job, BlockSizes, JobSpec, KeyMapSpec, Progress, Rw, ValidateSpec};

const KEY_BLOCK_BYTES: u64 = 4096;
/// 16 key blocks: blocks are rewritten often in a few hundred writes.
const TARGET_BYTES: u64 = 64 << 10;
/// Room for records in each of the journal's two slots: enough for a run
/// without compaction, and small enough to compact every few commits.
const JOURNAL_RECORD_BYTES: u64 = 64 << 10;
const JOURNAL_RECORD_BYTES_COMPACTING: u64 = 4 << 10;

/// A journal device with two slots of `record_bytes` of records each.
fn journal_device(record_bytes: u64) -> Arc<CrashDevice> {
    crash_device(2 * (start_bytes(TARGET_BYTES / KEY_BLOCK_BYTES) + record_bytes))
}

#[derive(Default)]
struct GateState {
    /// Requests that passed the gate.
    ops: u64,
    /// Pause when `ops` reaches this.
    pause_at: u64,
    paused: bool,
    /// Requests inside a device now.
    inside: usize,
    /// The job returned.
    finished: bool,
}

/// Every request on both devices passes here; at `pause_at` the gate
/// closes and every later request waits until it reopens.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap()
    }

    fn enter(&self) {
        let mut s = self.lock();
        s.ops += 1;
        if s.ops == s.pause_at && !s.finished {
            s.paused = true;
            self.changed.notify_all();
        }
        while s.paused {
            s = self.changed.wait(s).unwrap();
        }
        s.inside += 1;
    }

    fn exit(&self) {
        self.lock().inside -= 1;
        self.changed.notify_all();
    }

    /// Waits until the workload is held with nothing in flight (true) or
    /// the job has returned (false).
    fn wait_stopped(&self) -> bool {
        let mut s = self.lock();
        loop {
            if s.paused && s.inside == 0 {
                return true;
            }
            if s.finished {
                return false;
            }
            s = self.changed.wait(s).unwrap();
        }
    }

    fn resume(&self, pause_after: u64) {
        let mut s = self.lock();
        s.pause_at = s.ops + pause_after;
        s.paused = false;
        self.changed.notify_all();
    }

    fn finish(&self) {
        let mut s = self.lock();
        s.finished = true;
        s.paused = false;
        self.changed.notify_all();
    }
}

/// Opens the gate for good when dropped, so a failed assertion in the test
/// thread does not leave the workload waiting forever.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// A crash device whose requests pass the gate.
struct Gated {
    front: Front,
    inner: Arc<CrashDevice>,
    gate: Arc<Gate>,
}

impl Gated {
    fn new(inner: Arc<CrashDevice>, gate: Arc<Gate>) -> Gated {
        Gated { front: Front::new(inner.name(), Geometry::of(inner.as_ref())), inner, gate }
    }

    fn through<T>(&self, f: impl FnOnce() -> T) -> T {
        self.gate.enter();
        let out = f();
        self.gate.exit();
        out
    }
}

impl Backend for Gated {
    fn front(&self) -> &Front {
        &self.front
    }
    fn read_raw(&self, buf: &mut [u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.through(|| self.inner.read_at(buf, offset))
    }
    fn write_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.through(|| self.inner.write_at(buf, offset))
    }
    fn flush_raw(&self, _: device::Checked) -> device::Result<()> {
        self.through(|| self.inner.flush())
    }
}

fn zeros(blocks: u64) -> KeyBytes {
    KeyBytes::from(vec![0; blocks as usize])
}

fn crash_device(bytes: u64) -> Arc<CrashDevice> {
    Arc::new(CrashDevice::new(Arc::new(MemDevice::new(bytes).unwrap())).unwrap())
}

fn job(mode: JournalMode, journal: Arc<dyn Device>, seed: u64) -> JobSpec {
    JobSpec {
        rw: Rw::RandRw,
        read_pct: 30,
        size_bytes: Some(TARGET_BYTES),
        bs: BlockSizes::Fixed(KEY_BLOCK_BYTES),
        align_bytes: Some(KEY_BLOCK_BYTES),
        threads: 4,
        ios: Some(300),
        seed,
        validate: Some(ValidateSpec {
            preread: true,
            reread: false,
            verify: false,
            max_errors: 50,
            run_id: 77,
            journal: Some(JournalSpec { mode, place: JournalPlace::Device(journal), ring: false }),
            key_map: KeyMapSpec::AUTO,
        }),
        ..JobSpec::default()
    }
}

/// Power-cut images of both devices at one instant under these policies.
fn recover_images(
    target: &CrashDevice,
    journal: &CrashDevice,
    (tp, jp): (CrashPolicy, CrashPolicy),
    seed: u64,
) -> Verdict {
    let t = target.crash(tp, seed).unwrap();
    let j = journal.crash(jp, seed ^ 0x5eed).unwrap();
    match recover(&t.image, &j.image, tp == CrashPolicy::TornWrite, &KeyMapSpec::AUTO) {
        // A crash while the journal was being created: nothing was written
        // to the target yet, so there is nothing to check.
        Err(RecoverError::Journal { .. }) if target.stats().snapshot().writes == 0 => Verdict::default(),
        other => other.unwrap(),
    }
}

fn policies(
    rng: &mut Xoshiro256PlusPlus,
    target: &CrashDevice,
    journal: &CrashDevice,
) -> Vec<(CrashPolicy, CrashPolicy)> {
    use CrashPolicy::*;
    let prefix_t = Prefix(rng.random_range(0..=target.pending_writes()));
    let prefix_j = Prefix(rng.random_range(0..=journal.pending_writes()));
    vec![
        (DropUnflushed, DropUnflushed),
        (KeepAll, KeepAll),
        (DropUnflushed, KeepAll),
        (KeepAll, DropUnflushed),
        (KeepSubset, KeepSubset),
        (TornWrite, TornWrite),
        (prefix_t, prefix_j),
    ]
}

/// Runs the job [`job`] makes, changed by `shape`, stopping it every few
/// requests; at each stop recovers every pair of crash images. Returns
/// the verdicts with what made them.
fn crash_everywhere_with(
    mode: JournalMode,
    seed: u64,
    record_bytes: u64,
    shape: impl FnOnce(JobSpec) -> JobSpec,
) -> Vec<(u64, (CrashPolicy, CrashPolicy), Verdict)> {
    let target = crash_device(TARGET_BYTES);
    let journal = journal_device(record_bytes);
    let gate = Arc::new(Gate::default());
    let gated_target: Arc<dyn Device> = Arc::new(Gated::new(target.clone(), gate.clone()));
    let gated_journal: Arc<dyn Device> = Arc::new(Gated::new(journal.clone(), gate.clone()));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    gate.resume(rng.random_range(1..20));
    let mut verdicts = Vec::new();
    std::thread::scope(|scope| {
        let spec = shape(job(mode, gated_journal, seed));
        let gate_done = gate.clone();
        let runner = scope.spawn(move || {
            let result = run_job(&spec, gated_target, &Progress::default());
            gate_done.finish();
            result
        });
        let _open = OpenOnDrop(gate.clone());
        let mut stop = 0;
        while gate.wait_stopped() {
            for pair in policies(&mut rng, &target, &journal) {
                verdicts.push((stop, pair, recover_images(&target, &journal, pair, rng.random())));
            }
            stop += 1;
            gate.resume(rng.random_range(1..20));
        }
        let summary = runner.join().unwrap().unwrap().validation.unwrap();
        assert_eq!(summary.errors, 0, "the live run found errors: {:?}", summary.error_list);
    });
    // And after the run, when everything is durable.
    let pair = (CrashPolicy::DropUnflushed, CrashPolicy::DropUnflushed);
    verdicts.push((u64::MAX, pair, recover_images(&target, &journal, pair, 0)));
    verdicts
}

fn assert_no_errors(mode: JournalMode, record_bytes: u64) {
    assert_no_errors_in(mode, record_bytes, |job| job)
}

fn assert_no_errors_in(mode: JournalMode, record_bytes: u64, shape: impl Fn(JobSpec) -> JobSpec) {
    for seed in 1..=3 {
        let verdicts = crash_everywhere_with(mode, seed, record_bytes, &shape);
        assert!(verdicts.len() > 50, "too few crash points: {}", verdicts.len());
        for (stop, pair, v) in &verdicts {
            assert_eq!(
                (v.errors(), v.journal_damaged_ranges),
                (0, 0),
                "seed {seed}, stop {stop}, policies {pair:?}: {v:?}"
            );
        }
        let last = &verdicts.last().unwrap().2;
        assert!(last.verified > 0 && last.pending_old + last.pending_new == 0, "after the run: {last:?}");
    }
}

#[test]
fn group_mode_recovers_every_crash_image_without_errors() {
    assert_no_errors(JournalMode::Group, JOURNAL_RECORD_BYTES);
}

#[test]
fn sync_mode_recovers_every_crash_image_without_errors() {
    assert_no_errors(JournalMode::Sync, JOURNAL_RECORD_BYTES);
}

/// Duplicates at 4:1 (most blocks copies of 16 shared units, whose
/// versions tell a rewrite from the write before): every crash image of
/// both host-crash-safe modes recovers without an error.
#[test]
fn duplicates_recover_every_crash_image_without_errors() {
    let deduped = |job| JobSpec { dedupe: Some(workloads::Dedupe { ratio: 4.0, unit_bytes: 4096 }), ..job };
    for mode in [JournalMode::Group, JournalMode::Sync] {
        assert_no_errors_in(mode, JOURNAL_RECORD_BYTES, deduped);
    }
}

/// With room for a few commits per slot the journal compacts again and
/// again, and every crash image still recovers with no error: at every
/// instant the old or the new slot is complete.
#[test]
fn compacting_journal_recovers_every_crash_image_without_errors() {
    assert_no_errors(JournalMode::Group, JOURNAL_RECORD_BYTES_COMPACTING);
    assert_no_errors(JournalMode::Sync, JOURNAL_RECORD_BYTES_COMPACTING);
}

/// A run whose key maps (the live one, the journal writer's copy, and
/// replay's) are mapped files writes and replays the same journal as one
/// whose maps are in memory, compacting on the way.
#[test]
fn file_backed_key_maps_journal_and_replay_as_memory_ones() {
    let dir = tempfile::tempdir().unwrap();
    let run = |key_map: KeyMapSpec| {
        let journal = journal_device(JOURNAL_RECORD_BYTES_COMPACTING);
        let target = crash_device(TARGET_BYTES);
        // One thread: the same requests in the same order, so the same
        // records (how the committer batches them, and so when the journal
        // compacts, may differ).
        let mut spec = JobSpec { threads: 1, ..job(JournalMode::Group, journal.clone(), 1) };
        spec.validate.as_mut().unwrap().key_map = key_map.clone();
        run_job(&spec, target.clone(), &Progress::default()).unwrap();
        let replayed =
            validation::journal::replay(&workloads::recover::read_journal(journal.as_ref()).unwrap());
        let replayed = replayed.unwrap();
        let verdict = recover(target.as_ref(), journal.as_ref(), false, &key_map).unwrap();
        (replayed.header.generation, replayed.keys.to_vec(), verdict.verified, verdict.errors())
    };
    let file = run(KeyMapSpec { choice: KeyMapChoice::File, dir: Some(dir.path().into()) });
    let memory = run(KeyMapSpec { choice: KeyMapChoice::Memory, dir: None });
    assert!(
        file.0 >= 2 && memory.0 >= 2 && file.2 > 0,
        "compactions {} and {}, verified {}",
        file.0,
        memory.0,
        file.2
    );
    assert_eq!((&file.1, file.2, file.3), (&memory.1, memory.2, memory.3));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "scratch files left behind");
}

/// Recovery reads the target in spans of the blocks it checks. On a target
/// of several read runs, written sparsely (some gaps wider than a span
/// reads through), every written block is checked against its own bytes,
/// and a damaged block is named at its own offset.
#[test]
fn recovery_checks_sparse_blocks_at_their_own_offsets() {
    const BYTES: u64 = 8 << 20;
    let blocks = BYTES / KEY_BLOCK_BYTES;
    let journal = crash_device(2 * (start_bytes(blocks) + JOURNAL_RECORD_BYTES));
    let target = crash_device(BYTES);
    let spec = JobSpec {
        rw: Rw::RandWrite,
        size_bytes: Some(BYTES),
        ios: Some(60),
        threads: 1,
        ..job(JournalMode::Group, journal.clone(), 3)
    };
    run_job(&spec, target.clone(), &Progress::default()).unwrap();
    let replayed =
        validation::journal::replay(&workloads::recover::read_journal(journal.as_ref()).unwrap()).unwrap();
    let written: Vec<u64> = (0..blocks).filter(|&b| replayed.keys[b as usize] != 0).collect();
    let gaps = || written.windows(2).map(|w| (w[1] - w[0] - 1) * KEY_BLOCK_BYTES);
    assert!(gaps().any(|g| g > 128 << 10) && gaps().any(|g| g <= 128 << 10), "{written:?}");
    let verdict = recover(target.as_ref(), journal.as_ref(), false, &KeyMapSpec::AUTO).unwrap();
    assert_eq!((verdict.verified, verdict.errors()), (written.len() as u64, 0), "{verdict:?}");
    // A bit flipped in the second sector of the first and the last block.
    let damaged = [written[0] * KEY_BLOCK_BYTES, written[written.len() - 1] * KEY_BLOCK_BYTES];
    for at in damaged {
        let mut sector = vec![0u8; 512];
        target.read_at(&mut sector, at + 512).unwrap();
        sector[100] ^= 1;
        target.write_at(&sector, at + 512).unwrap();
    }
    let verdict = recover(target.as_ref(), journal.as_ref(), false, &KeyMapSpec::AUTO).unwrap();
    let bad: Vec<u64> = verdict.bad.iter().map(|b| b.offset).collect();
    assert_eq!((bad, verdict.corrupt), (damaged.to_vec(), 2), "{verdict:?}");
}

/// Recovery says how far it is: at its end, every key block of the
/// journal's region is counted as checked through.
#[test]
fn recovery_progress_ends_at_the_region_s_blocks() {
    use workloads::recover::{recover_watched, RecoverProgress};
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let target = crash_device(TARGET_BYTES);
    run_job(&job(JournalMode::Group, journal.clone(), 5), target.clone(), &Progress::default()).unwrap();
    let progress = RecoverProgress::default();
    recover_watched(target.as_ref(), journal.as_ref(), false, &KeyMapSpec::AUTO, &progress).unwrap();
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let counted = (progress.blocks.into_inner(), progress.checked.into_inner());
    assert_eq!(counted, (blocks, blocks));
}

/// A target that fails a read while recovery checks it: recovery returns
/// the device's error (its reader thread stops), with no verdict.
#[test]
fn a_failed_read_during_recovery_is_an_error() {
    use device::{Fault, FaultyDevice, Op};
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let target = crash_device(TARGET_BYTES);
    let spec = JobSpec { rw: Rw::RandWrite, ..job(JournalMode::Group, journal.clone(), 4) };
    run_job(&spec, target.clone(), &Progress::default()).unwrap();
    let failing = FaultyDevice::new(target, vec![Fault::Nth { op: Op::Read, n: 1 }]);
    match recover(&failing, journal.as_ref(), false, &KeyMapSpec::AUTO) {
        Err(RecoverError::Device(_)) => {}
        other => panic!("expected the read error, got {other:?}"),
    }
}

#[test]
fn a_small_journal_compacts_instead_of_filling_up() {
    let journal = journal_device(JOURNAL_RECORD_BYTES_COMPACTING);
    let target: Arc<dyn Device> = crash_device(TARGET_BYTES);
    let spec = job(JournalMode::Group, journal.clone(), 1);
    run_job(&spec, target, &Progress::default()).unwrap();
    let bytes = workloads::recover::read_journal(journal.as_ref()).unwrap();
    let generation = validation::journal::replay(&bytes).unwrap().header.generation;
    assert!(generation >= 2, "compacted {generation} times");
}

/// Runs an async-journal job until its 200th request, crashes the host
/// there (the target keeps all it was given, the journal what was flushed)
/// and hands the images to `check`, with the target's writes so far.
fn async_host_crash(check: impl FnOnce(&dyn Device, &dyn Device, u64)) {
    let target = crash_device(TARGET_BYTES);
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let gate = Arc::new(Gate::default());
    let gated_target: Arc<dyn Device> = Arc::new(Gated::new(target.clone(), gate.clone()));
    let gated_journal: Arc<dyn Device> = Arc::new(Gated::new(journal.clone(), gate.clone()));
    gate.resume(200);
    std::thread::scope(|scope| {
        let spec = job(JournalMode::Async, gated_journal, 1);
        let gate_done = gate.clone();
        let runner = scope.spawn(move || {
            let result = run_job(&spec, gated_target, &Progress::default());
            gate_done.finish();
            result
        });
        let _open = OpenOnDrop(gate.clone());
        assert!(gate.wait_stopped(), "the job ended before the crash point");
        let written = target.stats().snapshot().writes;
        let t = target.crash(CrashPolicy::KeepAll, 0).unwrap();
        let j = journal.crash(CrashPolicy::DropUnflushed, 0).unwrap();
        check(&t.image, &j.image, written);
        gate.finish();
        runner.join().unwrap().unwrap();
    });
}

/// Async mode writes its records without flushes (Vdbench's `-jn`): after
/// a host crash the journal may hold nothing past its start, so recovery
/// knows of no write and checks no block, though the target kept them.
#[test]
fn async_mode_after_a_host_crash_has_lost_its_history_and_checks_no_block() {
    async_host_crash(|target, journal, written| {
        let v = recover(target, journal, false, &KeyMapSpec::AUTO).unwrap();
        assert!(written > 0, "no data write before the crash point");
        let looked_at = v.verified + v.pending_old + v.pending_new + v.errors();
        assert_eq!((v.journal_mode, v.records, looked_at), (Some(JournalMode::Async), 0, 0), "{v:?}");
    });
}

/// The same crash, checked block by block (`recover_every_block`): every
/// write the target kept is found, ahead of the journal that lost it.
#[test]
fn reading_every_block_finds_the_writes_a_journal_lost_all_record_of() {
    async_host_crash(|target, journal, _| {
        let v = workloads::recover::recover_every_block(target, journal, false, &KeyMapSpec::AUTO).unwrap();
        assert!(v.ahead > 0 && v.errors() == 0, "{v:?}");
    });
}

/// Async mode killed (a process crash: what was written survives, the
/// records still queued in memory do not): the target holds writes newer
/// than the journal knows of. Recovery counts them ahead of the journal,
/// never as lost writes, at every stop. 16 blocks rewritten ~100 times
/// each: keys wrap past 255, so "newer" must be by write id, not by key.
#[test]
fn async_mode_killed_recovers_blocks_ahead_of_the_journal_never_lost() {
    let (stops, ahead_seen, _) = async_kills(|job| job);
    assert!(stops > 10 && ahead_seen > 0, "{stops} stops, {ahead_seen} blocks ahead");
}

/// The same with duplicates at 4:1: a shared unit's copy newer than the
/// journal carries no write id to say so, and is unverifiable, never lost.
#[test]
fn async_mode_killed_with_duplicates_finds_no_lost_write() {
    let (stops, ahead_seen, unverifiable) = async_kills(|job| JobSpec {
        dedupe: Some(workloads::Dedupe { ratio: 4.0, unit_bytes: 4096 }),
        ..job
    });
    assert!(stops > 10 && ahead_seen + unverifiable > 0, "{stops} stops, {ahead_seen} ahead, {unverifiable}");
}

/// Runs a 6000-write async job shaped by `shape`, killing it at random
/// stops; at each, recovery of what the target and journal were given
/// finds no error. Returns the stops, and the blocks found ahead and
/// unverifiable over all of them.
fn async_kills(shape: impl FnOnce(JobSpec) -> JobSpec) -> (u64, u64, u64) {
    let target = crash_device(TARGET_BYTES);
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let gate = Arc::new(Gate::default());
    let gated_target: Arc<dyn Device> = Arc::new(Gated::new(target.clone(), gate.clone()));
    let gated_journal: Arc<dyn Device> = Arc::new(Gated::new(journal.clone(), gate.clone()));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    gate.resume(rng.random_range(1..400));
    let (mut stops, mut ahead_seen, mut unverifiable) = (0, 0, 0);
    std::thread::scope(|scope| {
        let spec = shape(JobSpec {
            rw: Rw::RandWrite,
            ios: Some(6000),
            ..job(JournalMode::Async, gated_journal, 5)
        });
        let gate_done = gate.clone();
        let runner = scope.spawn(move || {
            let result = run_job(&spec, gated_target, &Progress::default());
            gate_done.finish();
            result
        });
        let _open = OpenOnDrop(gate.clone());
        while gate.wait_stopped() {
            let v = recover_images(&target, &journal, (CrashPolicy::KeepAll, CrashPolicy::KeepAll), 0);
            assert_eq!((v.errors(), v.journal_damaged_ranges), (0, 0), "stop {stops}: {v:?}");
            ahead_seen += v.ahead;
            unverifiable += v.unverifiable;
            stops += 1;
            gate.resume(rng.random_range(1..400));
        }
        runner.join().unwrap().unwrap();
    });
    (stops, ahead_seen, unverifiable)
}

/// A failed journal flush poisons the journal: the next record is refused
/// without touching the device again (a failed flush is never retried).
#[test]
fn failed_journal_flush_poisons_the_journal() {
    use device::{Fault, FaultyDevice, Op};
    use workloads::journal::{JournalWriteError, JournalWriter};
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let mem: Arc<dyn Device> =
        Arc::new(MemDevice::new(2 * (start_bytes(blocks) + JOURNAL_RECORD_BYTES)).unwrap());
    // Flush 1 makes the start durable; flush 2, the first commit, fails.
    let journal = Arc::new(FaultyDevice::new(mem, vec![Fault::Nth { op: Op::Flush, n: 2 }]));
    let target: Arc<dyn Device> = Arc::new(MemDevice::new(TARGET_BYTES).unwrap());
    let header = group_header(blocks);
    let writer = JournalWriter::create(journal.clone(), target, &header, zeros(blocks)).unwrap();
    assert!(matches!(writer.before(&[(1, 1)]), Err(JournalWriteError::Device { .. })));
    let writes = journal.stats().snapshot().writes;
    assert!(matches!(writer.before(&[(2, 1)]), Err(JournalWriteError::Poisoned { .. })));
    assert_eq!(journal.stats().snapshot().writes, writes, "a poisoned journal wrote again");
}

#[test]
fn a_journal_device_too_small_for_its_start_is_refused() {
    use workloads::journal::{JournalWriteError, JournalWriter};
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let journal: Arc<dyn Device> = Arc::new(MemDevice::new(start_bytes(blocks)).unwrap());
    let target: Arc<dyn Device> = Arc::new(MemDevice::new(TARGET_BYTES).unwrap());
    let header = group_header(blocks);
    let created = JournalWriter::create(journal, target, &header, zeros(blocks));
    assert!(matches!(created, Err(JournalWriteError::Full { .. })));
}

/// Writes of one to four key blocks: a `before` record lists several
/// blocks, a torn write may tear between them, and a worker's lookahead
/// often finds a block its own prepared request holds.
#[test]
fn multi_block_writes_recover_every_crash_image_without_errors() {
    for seed in 1..=2 {
        let bs = BlockSizes::parse("4k/40:8k/30:16k/30").unwrap();
        let shape = |job| JobSpec { bs, ..job };
        for (stop, pair, v) in crash_everywhere_with(JournalMode::Group, seed, JOURNAL_RECORD_BYTES, shape) {
            assert_eq!(
                (v.errors(), v.journal_damaged_ranges),
                (0, 0),
                "seed {seed}, stop {stop}, policies {pair:?}: {v:?}"
            );
        }
    }
}

/// The header of a group-mode journal over `blocks` key blocks of target "t".
fn group_header(blocks: u64) -> validation::journal::JournalHeader {
    validation::journal::JournalHeader {
        run_id: 1,
        region_start: 0,
        key_block_bytes: KEY_BLOCK_BYTES,
        blocks,
        sector_bytes: 512,
        target: "t".into(),
        mode: JournalMode::Group,
        generation: 0,
        write_ids_end: 0,
        created_ns: 0,
        duplicates: None,
    }
}

/// Group mode's lazy `after` records: a block rewritten before any target
/// flush forms a chain. The earlier write, acknowledged but never flushed,
/// is lost with the target's cache, and recovery accepts the old contents
/// instead of calling them a lost write; no target flush was needed.
#[test]
fn a_rewrite_before_a_target_flush_recovers_with_the_first_write_lost() {
    use workloads::journal::JournalWriter;
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let target = crash_device(TARGET_BYTES);
    let header = group_header(blocks);
    let writer = JournalWriter::create(journal.clone(), target.clone(), &header, zeros(blocks)).unwrap();
    let mut block = device::AlignedBuf::zeroed(KEY_BLOCK_BYTES as usize, 4096);
    validation::fill_block(&mut block, 512, 0, 1, 0, 0, header.run_id);
    writer.before(&[(0, 1)]).unwrap();
    target.write_at(&block, 0).unwrap();
    writer.after(0, [0]).unwrap();
    writer.before(&[(0, 2)]).unwrap();
    assert_eq!(target.stats().snapshot().flushes, 0, "a rewrite flushed the target");
    let pair = (CrashPolicy::DropUnflushed, CrashPolicy::DropUnflushed);
    let v = recover_images(&target, &journal, pair, 0);
    assert_eq!((v.errors(), v.pending_old), (0, 1), "{v:?}");
}

/// A first write in flight at the crash, alone in a target whose keys are
/// all zero: its block is still checked, so zeros pass as its old
/// contents and a damaged stamp of its new one is found.
#[test]
fn a_lone_first_write_in_flight_is_checked() {
    use workloads::journal::JournalWriter;
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let target = crash_device(TARGET_BYTES);
    let writer = JournalWriter::create(journal.clone(), target.clone(), &group_header(blocks), zeros(blocks));
    writer.unwrap().before(&[(blocks - 1, 1)]).unwrap();
    let verdict = recover(target.as_ref(), journal.as_ref(), false, &KeyMapSpec::AUTO).unwrap();
    assert_eq!((verdict.pending_old, verdict.errors()), (1, 0), "{verdict:?}");
    let at = (blocks - 1) * KEY_BLOCK_BYTES;
    let mut block = device::AlignedBuf::zeroed(KEY_BLOCK_BYTES as usize, 4096);
    validation::fill_block(&mut block, 512, at, 1, 0, 0, group_header(blocks).run_id);
    block[100] ^= 1;
    target.write_at(&block, at).unwrap();
    let verdict = recover(target.as_ref(), journal.as_ref(), false, &KeyMapSpec::AUTO).unwrap();
    assert_eq!(verdict.corrupt, 1, "{verdict:?}");
}

/// A kicked record is made durable by the committer thread: the worker
/// that kicked it never waits.
#[test]
fn the_committer_makes_a_kicked_record_durable_without_a_wait() {
    use workloads::journal::JournalWriter;
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let target: Arc<dyn Device> = Arc::new(MemDevice::new(TARGET_BYTES).unwrap());
    let writer =
        JournalWriter::create(journal.clone(), target, &group_header(blocks), zeros(blocks)).unwrap();
    std::thread::scope(|scope| {
        let committer = scope.spawn(|| writer.run_committer());
        let ticket = writer.queue_before(&[(3, 1)]).unwrap().ticket;
        writer.kick(ticket);
        writer.stop_committer();
        committer.join().unwrap();
    });
    let stats = writer.stats();
    assert_eq!((stats.commits, stats.waits), (1, 0));
    let image = journal.crash(CrashPolicy::DropUnflushed, 0).unwrap().image;
    let bytes = workloads::recover::read_journal(&image).unwrap();
    assert_eq!(validation::journal::replay(&bytes).unwrap().pending.len(), 1);
}

/// A chain never grows past `CHAIN_MAX` rewrites: the next `before` on the
/// block flushes the target and makes the chain's `after` records durable.
#[test]
fn a_long_chain_of_rewrites_flushes_the_target() {
    use workloads::journal::{JournalWriter, CHAIN_MAX};
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let journal = journal_device(JOURNAL_RECORD_BYTES);
    let target: Arc<dyn Device> = Arc::new(MemDevice::new(TARGET_BYTES).unwrap());
    let writer = JournalWriter::create(journal, target, &group_header(blocks), zeros(blocks)).unwrap();
    let mut key = 0;
    for _ in 0..CHAIN_MAX {
        key = validation::next_key(key);
        let id = writer.before(&[(0, key)]).unwrap();
        writer.after(id, [0]).unwrap();
    }
    assert_eq!(writer.stats().target_flushes, 0);
    writer.before(&[(0, validation::next_key(key))]).unwrap();
    assert_eq!(writer.stats().target_flushes, 1);
}

/// The uring engine on a real file, with a group journal on a crash device.
/// The ring needs a descriptor, so the target cannot be a crash device:
/// each crash keeps every write the file took, and the journal's image is
/// cut while the journal is held (nothing new becomes durable, so no write
/// it does not cover may reach the file). A data write sent before its
/// `before` record was durable would show as a block holding a key the
/// journal never heard of: none may, at any stop, under any policy.
#[test]
fn uring_engine_never_writes_ahead_of_its_journal() {
    use device::{FileDevice, FileOptions};
    use workloads::Engine;
    for seed in 1..=3 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.img");
        let options = FileOptions { create_bytes: Some(TARGET_BYTES), ..FileOptions::default() };
        let target: Arc<dyn Device> = Arc::new(FileDevice::open(&path, &options).unwrap());
        let journal = journal_device(JOURNAL_RECORD_BYTES);
        let gate = Arc::new(Gate::default());
        let gated_journal: Arc<dyn Device> = Arc::new(Gated::new(journal.clone(), gate.clone()));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        gate.resume(rng.random_range(1..20));
        let mut stops = 0;
        std::thread::scope(|scope| {
            let spec = JobSpec {
                engine: Engine::Uring,
                iodepth: 8,
                threads: 2,
                ios: Some(600),
                ..job(JournalMode::Group, gated_journal, seed)
            };
            let gate_done = gate.clone();
            let runner = scope.spawn(move || {
                let result = run_job(&spec, target, &Progress::default());
                gate_done.finish();
                result
            });
            let _open = OpenOnDrop(gate.clone());
            while gate.wait_stopped() {
                // With the journal held, the writes it covers drain out: a
                // copy read twice alike holds no sector caught mid-write.
                let bytes = loop {
                    let first = std::fs::read(&path).unwrap();
                    if std::fs::read(&path).unwrap() == first {
                        break first;
                    }
                };
                let image = MemDevice::from_bytes("t.img", &bytes, 512).unwrap();
                for policy in [CrashPolicy::DropUnflushed, CrashPolicy::KeepAll, CrashPolicy::KeepSubset] {
                    let j = journal.crash(policy, rng.random()).unwrap();
                    // Writes in flight may be read half done: torn is fine.
                    match recover(&image, &j.image, true, &KeyMapSpec::AUTO) {
                        Ok(v) => assert_eq!(
                            (v.errors(), v.journal_damaged_ranges),
                            (0, 0),
                            "seed {seed}, stop {stops}, {policy:?}: {v:?}"
                        ),
                        // Held while the journal was being created: no data
                        // write may have gone out yet.
                        Err(RecoverError::Journal { .. }) => {
                            assert!(std::fs::read(&path).unwrap().iter().all(|&b| b == 0), "seed {seed}")
                        }
                        Err(e) => panic!("seed {seed}, stop {stops}: {e}"),
                    }
                }
                stops += 1;
                gate.resume(rng.random_range(1..20));
            }
            let summary = runner.join().unwrap().unwrap().validation.unwrap();
            assert_eq!(summary.errors, 0, "the live run found errors: {:?}", summary.error_list);
        });
        assert!(stops > 20, "too few stops: {stops}");
    }
}

/// A group journal in a file whose records go through the ring file
/// (O_DIRECT, O_DSYNC), over a target in memory.
fn ring_writer(
    dir: &std::path::Path,
    record_bytes: u64,
) -> (workloads::journal::JournalWriter, Arc<dyn Device>, std::path::PathBuf) {
    use workloads::journal::{create_file, JournalWriter, JOURNAL_FILE};
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let journal = Arc::new(create_file(dir, blocks, record_bytes).unwrap());
    let target: Arc<dyn Device> = Arc::new(MemDevice::new(TARGET_BYTES).unwrap());
    let mut writer =
        JournalWriter::create(journal, target.clone(), &group_header(blocks), zeros(blocks)).unwrap();
    let path = dir.join(JOURNAL_FILE);
    assert!(writer.open_ring_file(&path), "the temporary directory takes no O_DIRECT");
    (writer, target, path)
}

/// Commits through the ring file, written here as a worker's ring writes
/// them, across many compactions: a record is durable only once its
/// write is done; after each commit the file replays and holds the write
/// in flight; at the end it holds every write's keys.
#[test]
fn ring_commits_replay_as_the_writer_wrote_them() {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let (writer, target, path) = ring_writer(dir.path(), JOURNAL_RECORD_BYTES_COMPACTING);
    // SAFETY: the descriptor stays open in the writer; ManuallyDrop never
    // closes it.
    let ring = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(writer.ring_fd().unwrap()) });
    let blocks = TARGET_BYTES / KEY_BLOCK_BYTES;
    let mut keys = vec![0u8; blocks as usize];
    // Writes issued (their `before` queued), with their tickets.
    let mut inflight: Vec<(u64, u64, u64)> = Vec::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut ring_commits = 0;
    for id in 0..1500u64 {
        let block = loop {
            let b = rng.random_range(0..blocks);
            if inflight.iter().all(|&(_, x, _)| x != b) {
                break b;
            }
        };
        keys[block as usize] = validation::next_key(keys[block as usize]);
        let queued = writer.queue_before(&[(block, keys[block as usize])]).unwrap();
        let ticket = queued.ticket;
        assert_eq!(queued.write_id, id, "the writer gives ids in order");
        inflight.push((id, block, ticket));
        // Commits come every few writes, and always before half the
        // blocks are in flight (a free one is always found above).
        if rng.random_bool(0.3) || inflight.len() >= 8 {
            if let Some(commit) = writer.begin_ring_commit().unwrap() {
                assert!(!writer.is_durable(ticket), "durable before its write");
                if commit.flush_target {
                    target.flush().unwrap();
                }
                ring.write_all_at(&commit.buf, commit.offset).unwrap();
                writer.end_ring_commit(commit, Ok(())).unwrap();
                ring_commits += 1;
            }
            assert!(writer.is_durable(ticket));
            let replay = validation::journal::replay(&std::fs::read(&path).unwrap()).unwrap();
            assert!(replay.pending.iter().any(|p| p.write_id == id), "write {id} is not in the journal");
        }
        // A write completes (and gets its `after`) only once its `before`
        // is durable, as in the engines.
        while inflight.len() > 3 && writer.is_durable(inflight[0].2) {
            let (done, b, _) = inflight.remove(0);
            writer.after(done, [b]).unwrap();
        }
    }
    for (done, b, ticket) in inflight {
        writer.wait(ticket).unwrap();
        writer.after(done, [b]).unwrap();
    }
    writer.finish().unwrap();
    let stats = writer.stats();
    assert!(stats.compactions > 3 && ring_commits > 100, "{stats:?}");
    assert_eq!(stats.ring_commits, ring_commits);
    let replay = validation::journal::replay(&std::fs::read(&path).unwrap()).unwrap();
    let pending: Vec<u64> = replay.pending.iter().map(|p| p.write_id).collect();
    assert!(pending.is_empty(), "{pending:?}");
    assert_eq!(&replay.keys[..], &keys[..]);
}

/// A ring commit whose write failed leaves its record not durable and
/// poisons the journal.
#[test]
fn a_failed_ring_commit_poisons_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _target, _path) = ring_writer(dir.path(), JOURNAL_RECORD_BYTES);
    let ticket = writer.queue_before(&[(1, 1)]).unwrap().ticket;
    let commit = writer.begin_ring_commit().unwrap().unwrap();
    let failed = std::io::Error::from_raw_os_error(libc::EIO);
    assert!(writer.end_ring_commit(commit, Err(("cannot write", failed))).is_err());
    assert!(!writer.is_durable(ticket));
    assert!(matches!(writer.queue_before(&[(2, 1)]), Err(JournalWriteError::Poisoned { .. })));
}

/// The uring engine with its journal in a directory commits through its
/// ring (no committer thread), and the run validates clean.
#[test]
fn uring_engine_commits_a_file_journal_through_its_ring() {
    use device::{FileDevice, FileOptions};
    use workloads::Engine;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.img");
    let options = FileOptions { create_bytes: Some(TARGET_BYTES), ..FileOptions::default() };
    let target = Arc::new(FileDevice::open(&path, &options).unwrap());
    let journal_dir = dir.path().join("journal");
    let mut spec = JobSpec {
        engine: Engine::Uring,
        iodepth: 8,
        threads: 2,
        ios: Some(2000),
        ..job(JournalMode::Group, target.clone(), 5)
    };
    spec.validate.as_mut().unwrap().journal = Some(JournalSpec {
        mode: JournalMode::Group,
        place: JournalPlace::Dir(journal_dir.clone()),
        ring: true,
    });
    let result = run_job(&spec, target.clone(), &Progress::default()).unwrap();
    let stats = result.validation.unwrap().journal.unwrap();
    assert!(stats.ring_commits > stats.commits / 2, "{stats:?}");
    let journal =
        FileDevice::open(journal_dir.join(workloads::journal::JOURNAL_FILE), &FileOptions::default())
            .unwrap();
    let verdict = recover(target.as_ref(), &journal, false, &KeyMapSpec::AUTO).unwrap();
    assert_eq!(verdict.errors(), 0, "{verdict:?}");
}

/// 256 key blocks: rewritten often in 20,000 requests, yet too few times
/// for their keys to wrap.
const LIVE_TARGET_BYTES: u64 = 1 << 20;

/// Reads of the live files after which the run is stopped.
const LIVE_READS: u32 = 100;

/// A uring run committing through its own ring has no journal device to
/// hold, so its order is checked on the live files instead: again and
/// again while it runs, the target is read and then the journal. A target
/// block may hold no key newer than the journal read after it knows (that
/// would be a data write sent before its `before` record was durable), nor
/// one older than a journal read before it says was written for good (a
/// lost write). Keys stay below 255 here, so they compare as numbers; a
/// journal knows no less than one read before it, so a journal is replayed
/// only when the target holds a key the last replay does not know, and
/// every few reads. A read sees a journal write once it reached the file,
/// before the flush that makes it durable: this catches a data write sent
/// before its commit's write, not one sent between that write and its
/// flush (which `ring_commits_replay_as_the_writer_wrote_them` covers at
/// the writer).
#[test]
fn ring_commits_never_let_a_data_write_ahead_of_its_journal() {
    use device::{AlignedBuf, FileDevice, FileOptions};
    use validation::journal::{replay, Replay};
    use workloads::Engine;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.img");
    let options = FileOptions { create_bytes: Some(LIVE_TARGET_BYTES), ..FileOptions::default() };
    let target: Arc<dyn Device> = Arc::new(FileDevice::open(&path, &options).unwrap());
    let direct = FileOptions { direct: true, read_only: true, ..FileOptions::default() };
    let reader = FileDevice::open(&path, &direct).unwrap();
    let journal_dir = dir.path().join("journal");
    let journal_path = journal_dir.join(workloads::journal::JOURNAL_FILE);
    let mut spec = JobSpec {
        engine: Engine::Uring,
        iodepth: 8,
        threads: 2,
        ios: Some(20_000),
        size_bytes: Some(LIVE_TARGET_BYTES),
        ..job(JournalMode::Group, target.clone(), 9)
    };
    spec.validate.as_mut().unwrap().journal =
        Some(JournalSpec { mode: JournalMode::Group, place: JournalPlace::Dir(journal_dir), ring: true });
    let blocks = (LIVE_TARGET_BYTES / KEY_BLOCK_BYTES) as usize;
    // Per block, the newest key a journal knows, and the oldest one the
    // block may still hold.
    let bounds = |j: &Replay| -> Vec<(u8, u8)> {
        let mut b: Vec<(u8, u8)> = j.keys[..blocks].iter().map(|&k| (k, k)).collect();
        for &(block, old, new) in j.pending.iter().flat_map(|p| &p.blocks) {
            let (newest, oldest) = &mut b[block as usize];
            (*newest, *oldest) = ((*newest).max(new), (*oldest).min(old));
        }
        b
    };
    let mut buf = AlignedBuf::zeroed(LIVE_TARGET_BYTES as usize, 4096);
    let (mut reads, mut mid_write, mut last_keys) = (0u32, 0u32, Vec::new());
    let progress = Progress::default();
    std::thread::scope(|scope| {
        let runner = scope.spawn(|| run_job(&spec, target.clone(), &progress));
        let mut known: Option<Vec<(u8, u8)>> = None;
        while !runner.is_finished() && reads < LIVE_READS {
            let Some(earlier) = known.take() else {
                known = std::fs::read(&journal_path).ok().and_then(|j| replay(&j).ok()).map(|j| bounds(&j));
                continue;
            };
            reader.read_at(&mut buf, 0).unwrap();
            let journal = std::fs::read(&journal_path).unwrap();
            reads += 1;
            let mut keys = Vec::with_capacity(blocks);
            let mut torn = false;
            for (b, block) in buf.chunks(KEY_BLOCK_BYTES as usize).enumerate() {
                for sector in block.chunks(512) {
                    match validation::read_stamp(sector) {
                        Ok(stamp) => keys.push((b, stamp.key)),
                        Err(validation::StampError::Zeros) => keys.push((b, 0)),
                        // Read while its write was under way.
                        Err(_) => torn = true,
                    }
                }
            }
            mid_write += u32::from(torn);
            for &(b, key) in &keys {
                assert!(key >= earlier[b].1, "block {b}: key {key}, older than a completed write");
            }
            known = Some(if keys.iter().any(|&(b, key)| key > earlier[b].0) || reads % 8 == 0 {
                let later = bounds(&replay(&journal).expect("a journal that replayed replays from then on"));
                for &(b, key) in &keys {
                    assert!(key <= later[b].0, "block {b}: key {key} written ahead of the journal");
                }
                later
            } else {
                earlier
            });
        }
        progress.request_stop();
        let summary = runner.join().unwrap().unwrap().validation.unwrap();
        assert_eq!(summary.errors, 0, "{:?}", summary.error_list);
        assert!(summary.journal.unwrap().ring_commits > 0);
        last_keys = replay(&std::fs::read(&journal_path).unwrap()).unwrap().keys[..blocks].to_vec();
    });
    assert!(last_keys.iter().all(|&k| k < 250), "keys wrapped: the comparisons above are wrong");
    assert!(
        reads > 10 && mid_write < reads / 2,
        "{reads} reads of the target, {mid_write} of them caught a write under way"
    );
}
