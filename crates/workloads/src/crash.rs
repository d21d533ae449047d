//! The crash enumerator behind `iolab crash`: run a transactional,
//! metadata-like workload on a stack built over recording devices, then
//! rebuild the images a power cut could leave at every flush and at
//! sampled points between flushes (with reordered, dropped and torn
//! writes), reopen the stack on each image and check its promise.
//!
//! The promise checked is the one a file system's metadata needs from a
//! logged device: every transaction acknowledged by a flush is present,
//! and the image is exactly the state after some prefix of the issued
//! transactions (none partly present, none out of order). Blocks carry
//! validation stamps whose write sequence is the transaction number, so
//! each block read back says which transaction wrote it.
//!
//! This module knows no stack: the caller builds and reopens it.

use std::sync::Arc;

use device::{CrashPoint, CrashPolicy, Device, Event, MemDevice, Recording, RecordingDevice, Replayer};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use validation::{fill_block, read_stamp, StampError};

/// Mark bit: the transaction number in the mark was acknowledged by a flush.
const ACKED: u64 = 1 << 63;

/// What to run and how many crash states to check.
#[derive(Clone, Debug)]
pub struct CrashSpec {
    pub transactions: u64,
    /// Blocks per transaction: 1 to this many, distinct.
    pub max_blocks: u32,
    pub block_bytes: u64,
    /// Blocks of the stack's device the workload writes (from offset 0).
    pub region_blocks: u64,
    /// A flush after every this many transactions.
    pub sync_every: u64,
    /// Crash states sampled between flushes, besides one after each flush.
    pub sampled_states: u64,
    pub seed: u64,
    /// Check only this state (from the report of an earlier run).
    pub only_state: Option<u64>,
}

/// How a crash state broke the promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationClass {
    /// The stack could not be reopened (replay failed).
    OpenFailed,
    /// A block holds data no transaction wrote there (bad stamp, mixed
    /// sectors, another block's data).
    Corrupt,
    /// A block is older than what a completed flush made durable.
    Lost,
    /// A block's sectors come from different writes (a torn write).
    TornWrite,
    /// No prefix of the transactions matches: one is partly present or a
    /// later one is present without an earlier one.
    TornTransaction,
}

/// The first violation found, with what it takes to check it again.
#[derive(Clone, Debug)]
pub struct Violation {
    pub state: u64,
    pub after_events: usize,
    pub policy: String,
    pub seed: u64,
    pub class: ViolationClass,
    pub detail: String,
}

/// What an enumeration checked and found.
#[derive(Clone, Debug, Default)]
pub struct CrashReport {
    pub transactions: u64,
    pub events: usize,
    pub writes: usize,
    pub flushes: usize,
    pub states_checked: u64,
    pub flush_states: u64,
    pub sampled_states: u64,
    pub violations: u64,
    pub open_failed: u64,
    pub corrupt: u64,
    pub lost: u64,
    pub torn_writes: u64,
    pub torn_transactions: u64,
    pub first_violation: Option<Violation>,
}

#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    #[error("building the stack: {0}")]
    Build(String),
    #[error("the workload failed on the stack before any crash: {0}")]
    Workload(device::DeviceError),
    #[error("{0}")]
    Spec(String),
}

/// Builds a stack on the given (recording) devices; returns its top.
pub type BuildStack<'a> = dyn Fn(Vec<Arc<dyn Device>>) -> Result<Arc<dyn Device>, String> + 'a;

/// Views of a reopened stack to check, each named (one view, or one per
/// failed drive of a redundant stack).
pub type Views = Vec<(String, Arc<dyn Device>)>;

/// Reopens a stack on crash images; returns the views of it to check.
pub type ReopenStack<'a> = dyn Fn(Vec<Arc<dyn Device>>) -> Result<Views, String> + 'a;

/// Runs the workload and checks every crash state.
///
/// `sizes` are the sizes of the stack's raw devices (fresh and zeroed);
/// `build` makes the stack on them, `reopen` opens it again on crash
/// images of them (replaying whatever it must).
pub fn enumerate(
    spec: &CrashSpec,
    sizes: &[u64],
    build: &BuildStack<'_>,
    reopen: &ReopenStack<'_>,
) -> Result<CrashReport, CrashError> {
    check_spec(spec)?;
    let (history, events, built) = record(spec, sizes, build)?;
    let initial = sizes.iter().map(|&s| MemDevice::new(s)).collect::<Result<Vec<_>, _>>()?;
    let bounds = Bounds::of(&events);
    let points = crash_points(spec, &events, built);
    check_only_state(spec, points.len())?;
    let mut report = CrashReport {
        transactions: spec.transactions,
        events: events.len(),
        writes: events.iter().filter(|e| matches!(e, Event::Write { .. })).count(),
        flushes: events.iter().filter(|e| matches!(e, Event::Flush { .. })).count(),
        ..CrashReport::default()
    };
    let mut replayer = Replayer::new(events, initial);
    for (state, (point, sampled)) in points.into_iter().enumerate() {
        let state = state as u64;
        if spec.only_state.is_some_and(|only| only != state) {
            continue;
        }
        let images: Vec<Arc<dyn Device>> =
            replayer.images_at(point)?.into_iter().map(|i| Arc::new(i) as Arc<dyn Device>).collect();
        let (lo, hi) = bounds.at(point.after_events, spec.transactions);
        let verdict = check_views(spec, reopen(images), &history, lo, hi);
        report.tally(state, point.after_events, policy_name(point.policy), point.seed, sampled, verdict);
    }
    Ok(report)
}

/// Builds the stack on recording devices of `sizes` and runs the
/// transactions on it: what each one wrote, the recorded events, and how
/// many of them building took (no crash is checked before the stack is
/// built).
fn record(
    spec: &CrashSpec,
    sizes: &[u64],
    build: &BuildStack<'_>,
) -> Result<(History, Vec<Event>, usize), CrashError> {
    let recording = Recording::new();
    let mut raw: Vec<Arc<dyn Device>> = Vec::with_capacity(sizes.len());
    for (index, &size) in sizes.iter().enumerate() {
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(size)?);
        raw.push(Arc::new(RecordingDevice::new(mem, index, Arc::clone(&recording))));
    }
    let stack = build(raw).map_err(CrashError::Build)?;
    let built = recording.len();
    check_room(spec, stack.as_ref())?;
    let history = run_workload(spec, stack.as_ref(), &mut |m, _| {
        recording.mark(m);
        Ok(())
    })?;
    drop(stack);
    Ok((history, recording.events(), built))
}

/// A stack too small for the workload's region is a usage error.
fn check_room(spec: &CrashSpec, stack: &dyn Device) -> Result<(), CrashError> {
    if stack.size_bytes() < spec.region_blocks * spec.block_bytes {
        return Err(CrashError::Spec(format!(
            "the stack has {} bytes, fewer than the {} blocks of {} bytes the workload writes; use a larger --size",
            stack.size_bytes(),
            spec.region_blocks,
            spec.block_bytes
        )));
    }
    Ok(())
}

/// Runs the workload on a stack built over `disks`, simulated disks
/// (fresh, keeping their data, on one clock), and cuts their power in
/// the model at the end of every transaction and after every flush: what
/// each disk then holds durably (`VirtualDisk::power_cut`, at the
/// instant its last request completed) is reopened and checked, as a
/// recorded state is. The disks decide what survives: a write cache that
/// ignores flushes loses writes they acknowledged; an honest one destages
/// in its own order. States are numbered in that order: after the writes
/// of transaction 1, after its flush (when it has one), and so on.
pub fn enumerate_power_cuts(
    spec: &CrashSpec,
    disks: &[Arc<dyn Device>],
    build: &BuildStack<'_>,
    reopen: &ReopenStack<'_>,
) -> Result<CrashReport, CrashError> {
    check_spec(spec)?;
    if let Some(d) = disks.iter().find(|d| d.virtual_disk().is_none()) {
        return Err(CrashError::Spec(format!("{}: power cuts need simulated disks", d.name())));
    }
    let stack = build(disks.to_vec()).map_err(CrashError::Build)?;
    check_room(spec, stack.as_ref())?;
    let requests = || -> usize {
        disks.iter().map(|d| d.stats().snapshot()).map(|s| (s.writes + s.flushes) as usize).sum()
    };
    let mut report = CrashReport { transactions: spec.transactions, ..CrashReport::default() };
    let (mut state, mut acked) = (0u64, 0u64);
    run_workload(spec, stack.as_ref(), &mut |mark, history| {
        let after_flush = mark & ACKED != 0;
        if after_flush {
            acked = mark & !ACKED;
        }
        let (lo, hi) = (acked, mark & !ACKED);
        let this = state;
        state += 1;
        if spec.only_state.is_some_and(|only| only != this) {
            return Ok(());
        }
        let images = disks.iter().map(|d| power_cut_image(d.as_ref())).collect::<Result<Vec<_>, _>>()?;
        let verdict = check_views(spec, reopen(images), history, lo, hi);
        report.tally(this, requests(), "power-cut".into(), 0, !after_flush, verdict);
        Ok(())
    })?;
    drop(stack);
    check_only_state(spec, state as usize)?;
    let snapshots: Vec<_> = disks.iter().map(|d| d.stats().snapshot()).collect();
    report.writes = snapshots.iter().map(|s| s.writes as usize).sum();
    report.flushes = snapshots.iter().map(|s| s.flushes as usize).sum();
    report.events = report.writes + report.flushes;
    Ok(report)
}

/// What a power cut now leaves on simulated disk `d`: a memory device of
/// its size holding the pages it holds durably.
fn power_cut_image(d: &dyn Device) -> Result<Arc<dyn Device>, CrashError> {
    // Invariant: enumerate_power_cuts checked that every disk is simulated.
    let pages = d.virtual_disk().expect("a simulated disk").power_cut();
    let name = format!("power-cut image of {}", d.name());
    Ok(Arc::new(MemDevice::with_pages(name, d.size_bytes(), d.sector_bytes(), &pages)?))
}

/// Checks the views of a reopened stack (or names the reopen's failure).
fn check_views(
    spec: &CrashSpec,
    views: Result<Views, String>,
    history: &History,
    lo: u64,
    hi: u64,
) -> Option<(ViolationClass, String)> {
    match views {
        Ok(views) => views.iter().find_map(|(name, dev)| {
            let found = check_state(spec, dev.as_ref(), history, lo, hi);
            found.map(|(class, detail)| match name.is_empty() {
                true => (class, detail),
                false => (class, format!("{name}: {detail}")),
            })
        }),
        Err(e) => Some((ViolationClass::OpenFailed, e)),
    }
}

/// `--state N` past the states the flags give is an error: checking
/// nothing would report "0 violations" for a state that does not exist.
fn check_only_state(spec: &CrashSpec, states: usize) -> Result<(), CrashError> {
    let Some(only) = spec.only_state.filter(|&only| only >= states as u64) else { return Ok(()) };
    let has = match states {
        0 => "no crash states".to_string(),
        n => format!("states 0 to {}", n - 1),
    };
    Err(CrashError::Spec(format!("--state {only}: this run has {has} (the same flags give the same states)")))
}

impl CrashReport {
    /// Counts state `state` (a crash after `after_events` events, built
    /// by `policy` with `seed`; `sampled` between flushes) and what it
    /// broke, keeping the first violation.
    fn tally(
        &mut self,
        state: u64,
        after_events: usize,
        policy: String,
        seed: u64,
        sampled: bool,
        verdict: Option<(ViolationClass, String)>,
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
            ViolationClass::OpenFailed => self.open_failed += 1,
            ViolationClass::Corrupt => self.corrupt += 1,
            ViolationClass::Lost => self.lost += 1,
            ViolationClass::TornWrite => self.torn_writes += 1,
            ViolationClass::TornTransaction => self.torn_transactions += 1,
        }
        if self.first_violation.is_none() {
            self.first_violation = Some(Violation { state, after_events, policy, seed, class, detail });
        }
    }
}

fn check_spec(spec: &CrashSpec) -> Result<(), CrashError> {
    let bad = |what: String| Err(CrashError::Spec(what));
    if spec.transactions == 0 || spec.sync_every == 0 || spec.max_blocks == 0 {
        return bad("--transactions, --sync-every and --max-blocks must be at least 1".into());
    }
    if spec.region_blocks < u64::from(spec.max_blocks) {
        return bad(format!(
            "the region holds {} blocks, fewer than a transaction's {}",
            spec.region_blocks, spec.max_blocks
        ));
    }
    if spec.block_bytes == 0 || spec.block_bytes % 512 != 0 {
        return bad(format!("block size {} is not a multiple of 512", spec.block_bytes));
    }
    Ok(())
}

/// The transactions that wrote each block, in order.
type History = Vec<Vec<u64>>;

/// Runs the transactions; marks each issued and each acknowledged one
/// (`mark` is given the mark and what each block was written by so far).
fn run_workload(
    spec: &CrashSpec,
    dev: &dyn Device,
    mark: &mut dyn FnMut(u64, &History) -> Result<(), CrashError>,
) -> Result<History, CrashError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut history: History = vec![Vec::new(); spec.region_blocks as usize];
    let mut keys = vec![0u8; spec.region_blocks as usize];
    let sector = dev.sector_bytes() as usize;
    for t in 1..=spec.transactions {
        let n = rng.random_range(1..=spec.max_blocks) as usize;
        let mut blocks: Vec<u64> = Vec::with_capacity(n);
        while blocks.len() < n {
            let b = rng.random_range(0..spec.region_blocks);
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
        let bufs: Vec<(u64, Vec<u8>)> = blocks
            .iter()
            .map(|&b| {
                let key = validation::next_key(keys[b as usize]);
                keys[b as usize] = key;
                let offset = b * spec.block_bytes;
                let mut buf = vec![0u8; spec.block_bytes as usize];
                fill_block(&mut buf, sector, offset, key, t, 0, spec.seed);
                (offset, buf)
            })
            .collect();
        let writes: Vec<(u64, &[u8])> = bufs.iter().map(|(o, b)| (*o, b.as_slice())).collect();
        dev.write_atomic(&writes).map_err(CrashError::Workload)?;
        for &b in &blocks {
            history[b as usize].push(t);
        }
        mark(t, &history)?;
        if t % spec.sync_every == 0 || t == spec.transactions {
            dev.flush().map_err(CrashError::Workload)?;
            mark(t | ACKED, &history)?;
        }
    }
    Ok(history)
}

/// For every prefix of the history: the last acknowledged and the last
/// issued transaction.
struct Bounds {
    acked: Vec<u64>,
    issued: Vec<u64>,
}

impl Bounds {
    fn of(events: &[Event]) -> Bounds {
        let (mut acked, mut issued) = (vec![0; events.len() + 1], vec![0; events.len() + 1]);
        for (i, event) in events.iter().enumerate() {
            acked[i + 1] = acked[i];
            issued[i + 1] = issued[i];
            if let Event::Mark(m) = event {
                if m & ACKED != 0 {
                    acked[i + 1] = m & !ACKED;
                } else {
                    issued[i + 1] = *m;
                }
            }
        }
        Bounds { acked, issued }
    }

    /// The transactions a crash after `after` events may show: at least
    /// every acknowledged one, at most the one in progress.
    fn at(&self, after: usize, transactions: u64) -> (u64, u64) {
        (self.acked[after], (self.issued[after] + 1).min(transactions))
    }
}

/// One state after each flush, then the sampled ones; sorted by position
/// (the replayer walks the history once). `true` marks a sampled state.
fn crash_points(spec: &CrashSpec, events: &[Event], built: usize) -> Vec<(CrashPoint, bool)> {
    crash_points_of(events, built, spec.sampled_states, spec.seed)
}

/// The crash states of a recorded history: one after every flush from
/// event `built` on (what survives a power cut there), and `sampled` more
/// between flushes with dropped, kept, reordered and torn writes; each
/// with whether it was sampled. In event order.
pub fn crash_points_of(events: &[Event], built: usize, sampled: u64, seed: u64) -> Vec<(CrashPoint, bool)> {
    let mut points: Vec<(CrashPoint, bool)> = events
        .iter()
        .enumerate()
        .filter(|(i, e)| *i >= built && matches!(e, Event::Flush { .. }))
        .map(|(i, _)| {
            (CrashPoint { after_events: i + 1, policy: CrashPolicy::DropUnflushed, seed: 0 }, false)
        })
        .collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed_c4a5);
    for _ in 0..sampled {
        let policy = match rng.random_range(0..5) {
            0 => CrashPolicy::DropUnflushed,
            1 => CrashPolicy::KeepAll,
            2 => CrashPolicy::KeepSubset,
            3 => CrashPolicy::Prefix(rng.random_range(0..8)),
            _ => CrashPolicy::TornWrite,
        };
        let after_events = rng.random_range(built..=events.len());
        points.push((CrashPoint { after_events, policy, seed: rng.random() }, true));
    }
    points.sort_by_key(|(p, _)| p.after_events);
    points
}

pub fn policy_name(policy: CrashPolicy) -> String {
    match policy {
        CrashPolicy::DropUnflushed => "drop-unflushed".into(),
        CrashPolicy::KeepAll => "keep-all".into(),
        CrashPolicy::KeepSubset => "keep-subset".into(),
        CrashPolicy::Prefix(n) => format!("prefix-{n}"),
        CrashPolicy::TornWrite => "torn-write".into(),
    }
}

/// What a block holds: never written, one transaction's write, or junk.
enum Found {
    Zeros,
    Written(u64),
    Torn(String),
    Bad(String),
}

fn read_block(dev: &dyn Device, spec: &CrashSpec, block: u64, buf: &mut [u8]) -> Found {
    let offset = block * spec.block_bytes;
    if let Err(e) = dev.read_at(buf, offset) {
        return Found::Bad(format!("cannot be read: {e}"));
    }
    let sector = dev.sector_bytes() as usize;
    let mut found: Option<Found> = None;
    for (i, bytes) in buf.chunks_exact(sector).enumerate() {
        let this = match read_stamp(bytes) {
            Err(StampError::Zeros) => Found::Zeros,
            Err(e) => return Found::Bad(format!("sector {i} of the block: {e:?}")),
            Ok(stamp) if stamp.address != offset + (i * sector) as u64 => {
                return Found::Bad(format!(
                    "sector {i} of the block holds the stamp of byte {}",
                    stamp.address
                ))
            }
            Ok(stamp) => Found::Written(stamp.sequence),
        };
        found = match (found, this) {
            (None, this) => Some(this),
            (Some(Found::Zeros), Found::Zeros) => Some(Found::Zeros),
            (Some(Found::Written(a)), Found::Written(b)) if a == b => Some(Found::Written(a)),
            _ => {
                return Found::Torn(format!(
                    "its sectors come from different writes (sector {i} of the block differs)"
                ))
            }
        };
    }
    found.unwrap_or(Found::Zeros)
}

/// Checks one reopened image: `Some` names the violation.
fn check_state(
    spec: &CrashSpec,
    dev: &dyn Device,
    history: &History,
    lo: u64,
    hi: u64,
) -> Option<(ViolationClass, String)> {
    let mut buf = vec![0u8; spec.block_bytes as usize];
    // The prefixes k (lo ≤ k ≤ hi) every block agrees with, and the blocks
    // that set the tightest bounds, for the report.
    let (mut from, mut to) = ((lo, None), (hi, None));
    for (block, writes) in history.iter().enumerate() {
        if writes.is_empty() {
            continue;
        }
        let (first, last) = match read_block(dev, spec, block as u64, &mut buf) {
            Found::Bad(why) => return Some((ViolationClass::Corrupt, format!("block {block}: {why}"))),
            Found::Torn(why) => return Some((ViolationClass::TornWrite, format!("block {block}: {why}"))),
            Found::Zeros => (0, writes[0] - 1),
            Found::Written(t) => match writes.iter().position(|&w| w == t) {
                Some(i) => (t, writes.get(i + 1).map_or(u64::MAX, |next| next - 1)),
                None => {
                    return Some((
                        ViolationClass::Corrupt,
                        format!("block {block} holds transaction {t}, which never wrote it"),
                    ))
                }
            },
        };
        if last < lo {
            let found = if first == 0 {
                "was never written".to_string()
            } else {
                format!("holds transaction {first}")
            };
            return Some((
                ViolationClass::Lost,
                format!(
                    "block {block} {found}, but transaction {} rewrote it and a flush acknowledged that",
                    last + 1
                ),
            ));
        }
        if first > from.0 {
            from = (first, Some(block));
        }
        if last < to.0 {
            to = (last, Some(block));
        }
    }
    if from.0 <= to.0 {
        return None;
    }
    let (a, b) = (from.1.unwrap_or(0), to.1.unwrap_or(0));
    Some((
        ViolationClass::TornTransaction,
        format!(
            "no prefix of the transactions matches: block {a} shows transaction {} but block {b} lacks transaction {}'s write",
            from.0,
            to.0 + 1
        ),
    ))
}
