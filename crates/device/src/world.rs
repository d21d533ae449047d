//! Virtual time: the [`VirtualClock`] simulated disks share, the [`Clock`]
//! a layer reads ages from, and several threads in one virtual time (the
//! clock's world).
//!
//! Layers call their devices synchronously (a volume, the block log, the
//! file system, the validation journal), and hold locks across those
//! calls; several threads through them on simulated disks must still see
//! one virtual time. While a world runs, a thread's synchronous call to a
//! simulated disk submits its request at the clock's time and waits; the
//! world's advancer moves the clock on only when no participant can do
//! anything more at this instant: each is waiting in a simulated disk (or a
//! virtual sleep), or is asleep in the kernel (on a lock, a condition
//! variable: what only another participant can end; read from
//! /proc/self/task/TID/stat). It then runs every disk's model to its next
//! event and hands the completions out. A thread the world does not know
//! (the main thread at the end of a job) may call too: it waits like the
//! others, and never holds the clock back.
//!
//! Threads run truly in parallel between two instants, so which of two
//! threads takes a lock first is the machine's choice: figures of several
//! threads through layers may differ slightly from run to run (a direct
//! job on one simulated disk, validated or not, runs on the engine in
//! virtual time instead, which is exact).

use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::vtime::{Nanos, VirtualDisk};
use crate::{DeviceError, Result};

/// The virtual time simulated disks share: every simulated disk of a stack
/// on one clock, so a volume's members and the layers above see one time.
/// Synchronous calls arrive at its time and move it to their completion.
#[derive(Debug, Default)]
pub struct VirtualClock {
    now: AtomicU64,
    /// Several threads in this time.
    world: World,
}

impl VirtualClock {
    pub fn new() -> Arc<VirtualClock> {
        Arc::new(VirtualClock::default())
    }

    pub fn now(&self) -> Nanos {
        self.now.load(Ordering::Relaxed)
    }

    /// Moves the clock to `t` if that is later.
    pub fn advance_to(&self, t: Nanos) {
        self.now.fetch_max(t, Ordering::Relaxed);
    }
}

/// Where a layer reads the time for what it does by age (a file system's
/// write-back of buffers dirty for 30 s, a commit a second after the
/// last): the wall clock, or the virtual clock of the simulated disks it
/// sits on, so that its timing is modeled with theirs.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    #[default]
    Wall,
    Virtual(Arc<VirtualClock>),
}

impl Clock {
    /// Time since an epoch fixed for the clock (the process's first
    /// reading of the wall clock; 0 of the virtual one).
    pub fn now(&self) -> Duration {
        match self {
            Clock::Wall => {
                static EPOCH: OnceLock<Instant> = OnceLock::new();
                EPOCH.get_or_init(Instant::now).elapsed()
            }
            Clock::Virtual(clock) => Duration::from_nanos(clock.now()),
        }
    }
}

/// Work run at an instant of virtual time ([`VirtualClock::at`]).
type Hook = Box<dyn FnOnce(Nanos) + Send>;

/// What a waiting thread waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Wait {
    /// Request `id` of disk `disk`.
    Request { disk: usize, id: u64 },
    /// A virtual sleep.
    Timer(u64),
}

#[derive(Default)]
struct World {
    state: Mutex<State>,
    /// Wakes the advancer: a thread began to wait, or left.
    changed: Condvar,
    /// Threads between deciding to submit and waiting (the advancer holds
    /// off: their request belongs to this instant).
    entering: AtomicUsize,
    running: AtomicBool,
}

#[derive(Default)]
struct State {
    disks: Vec<Weak<dyn VirtualDisk>>,
    /// Participants, by thread id.
    participants: Vec<i32>,
    /// Threads waiting (by thread id), by what they wait for; each is
    /// unparked when that is handed out.
    waiters: HashMap<Wait, (i32, std::thread::Thread)>,
    /// Completions handed out and not yet taken: when each came.
    done: HashMap<Wait, Nanos>,
    timers: BinaryHeap<std::cmp::Reverse<(Nanos, u64)>>,
    /// Work to run when the clock reaches an instant, every thread then
    /// waiting (a power cut's images taken), in time order.
    hooks: Vec<(Nanos, Hook)>,
    /// Work to run this long after the next run starts
    /// ([`VirtualClock::after_start`]).
    after_start: Vec<(Nanos, Hook)>,
    /// Participants announced and not yet joined: the clock waits for
    /// them (a thread being spawned has not said what it will do).
    expected: usize,
    next_timer: u64,
    /// Bumped at every change of who waits, so a check of the threads'
    /// states made without the lock can tell it is still valid.
    generation: u64,
    failed: Option<String>,
}

/// The advancer's view of the participants' kernel states: each one's
/// stat file kept open, read again at each look.
#[derive(Default)]
struct ThreadStates {
    files: HashMap<i32, std::fs::File>,
}

impl ThreadStates {
    /// Whether thread `tid` of this process is asleep in the kernel
    /// (interruptible sleep: a futex, a condition variable, a timed wait).
    fn asleep(&mut self, tid: i32) -> bool {
        use std::os::unix::fs::FileExt;
        let file = match self.files.entry(tid) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                match std::fs::File::open(format!("/proc/self/task/{tid}/stat")) {
                    Ok(f) => v.insert(f),
                    // Gone: it cannot act any more.
                    Err(_) => return true,
                }
            }
        };
        let mut buf = [0u8; 512];
        let Ok(n) = file.read_at(&mut buf, 0) else {
            self.files.remove(&tid);
            return true;
        };
        let stat = &buf[..n];
        let Some(close) = stat.iter().rposition(|&b| b == b')') else { return false };
        stat[close + 1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'S')
    }
}

/// Takes the hooks due by `t`, in time order.
fn due_hooks(st: &mut State, t: Nanos) -> Vec<(Nanos, Hook)> {
    let due = st.hooks.partition_point(|(at, _)| *at <= t);
    st.hooks.drain(..due).collect()
}

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World").field("running", &self.is_running()).finish_non_exhaustive()
    }
}

impl World {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn attach(&self, disk: Weak<dyn VirtualDisk>) -> usize {
        let mut st = self.lock();
        st.disks.push(disk);
        st.disks.len() - 1
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Submits through `submit` at the clock's time and waits for the
    /// request's completion; its time.
    pub(crate) fn call(
        &self,
        clock: &VirtualClock,
        disk: usize,
        submit: impl FnOnce(Nanos) -> Result<u64>,
    ) -> Result<Nanos> {
        self.entering.fetch_add(1, Ordering::AcqRel);
        let st = self.lock();
        let submitted = submit(clock.now());
        let id = match submitted {
            Ok(id) => id,
            Err(e) => {
                self.entering.fetch_sub(1, Ordering::AcqRel);
                return Err(e);
            }
        };
        self.wait_for(st, Wait::Request { disk, id })
    }

    /// Waits until the clock reaches `t` (a virtual sleep).
    pub(crate) fn sleep_until(&self, clock: &VirtualClock, t: Nanos) -> Result<()> {
        self.entering.fetch_add(1, Ordering::AcqRel);
        let mut st = self.lock();
        if t <= clock.now() {
            self.entering.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        }
        st.next_timer += 1;
        let timer = st.next_timer;
        st.timers.push(std::cmp::Reverse((t, timer)));
        self.wait_for(st, Wait::Timer(timer)).map(|_| ())
    }

    fn wait_for<'a>(&'a self, mut st: MutexGuard<'a, State>, what: Wait) -> Result<Nanos> {
        let me = tid();
        st.waiters.insert(what, (me, std::thread::current()));
        st.generation += 1;
        self.entering.fetch_sub(1, Ordering::AcqRel);
        self.changed.notify_one();
        loop {
            if let Some(t) = st.done.remove(&what) {
                return Ok(t);
            }
            if let Some(why) = st.failed.clone() {
                st.waiters.remove(&what);
                return Err(DeviceError::Invalid(why));
            }
            drop(st);
            std::thread::park();
            st = self.lock();
        }
    }

    pub(crate) fn join(&self) {
        let mut st = self.lock();
        st.participants.push(tid());
        st.expected = st.expected.saturating_sub(1);
        st.generation += 1;
    }

    pub(crate) fn expect(&self, n: usize) {
        self.lock().expected += n;
    }

    pub(crate) fn leave(&self) {
        let mut st = self.lock();
        let me = tid();
        st.participants.retain(|&t| t != me);
        st.generation += 1;
        drop(st);
        self.changed.notify_all();
    }

    /// The advancer's loop, until the world stops.
    pub(crate) fn advance_loop(&self, clock: &VirtualClock) {
        let mut stats = ThreadStates::default();
        while self.is_running() {
            if self.try_advance(clock, &mut stats) {
                continue;
            }
            // Nothing to do yet: wait for a thread to begin waiting, or a
            // little while (a thread going to sleep on a lock says nothing).
            let st = self.lock();
            let _ = self.changed.wait_timeout(st, Duration::from_micros(50));
        }
    }

    /// Moves the clock on if no participant can act at this instant.
    fn try_advance(&self, clock: &VirtualClock, states: &mut ThreadStates) -> bool {
        let st = self.lock();
        if self.entering.load(Ordering::Acquire) > 0
            || st.waiters.is_empty()
            || st.failed.is_some()
            || st.expected > 0
        {
            return false;
        }
        let waiting: Vec<i32> = st.waiters.values().map(|(tid, _)| *tid).collect();
        let awake: Vec<i32> = st.participants.iter().copied().filter(|t| !waiting.contains(t)).collect();
        if !awake.is_empty() {
            let generation = st.generation;
            drop(st);
            if !awake.iter().all(|&t| states.asleep(t)) {
                return false;
            }
            let st = self.lock();
            if st.generation != generation || self.entering.load(Ordering::Acquire) > 0 {
                return false;
            }
            return self.advance(clock, st);
        }
        self.advance(clock, st)
    }

    /// Runs every disk to the next event and hands out what completed.
    fn advance(&self, clock: &VirtualClock, mut st: MutexGuard<'_, State>) -> bool {
        let disks: Vec<Arc<dyn VirtualDisk>> = st.disks.iter().filter_map(Weak::upgrade).collect();
        let next_disk = disks.iter().filter_map(|d| d.next_event()).min();
        let next_timer = st.timers.peek().map(|std::cmp::Reverse((t, _))| *t);
        let next_hook = st.hooks.first().map(|(t, _)| *t);
        let Some(next) = next_disk.into_iter().chain(next_timer).chain(next_hook).min() else {
            st.failed = Some(format!(
                "the simulated disks have nothing to do while {} thread(s) wait for them",
                st.waiters.len()
            ));
            let waiters: Vec<std::thread::Thread> = st.waiters.values().map(|(_, t)| t.clone()).collect();
            drop(st);
            waiters.iter().for_each(std::thread::Thread::unpark);
            return true;
        };
        let t = next.max(clock.now());
        clock.advance_to(t);
        let indexed: Vec<(usize, Arc<dyn VirtualDisk>)> =
            st.disks.iter().enumerate().filter_map(|(i, d)| d.upgrade().map(|d| (i, d))).collect();
        let mut delivered = Vec::new();
        for (disk, d) in indexed {
            for (id, at) in d.advance(t) {
                delivered.push((Wait::Request { disk, id }, at));
            }
        }
        while let Some(&std::cmp::Reverse((at, timer))) = st.timers.peek() {
            if at > t {
                break;
            }
            st.timers.pop();
            delivered.push((Wait::Timer(timer), at));
        }
        // Every thread waits and the disks are at `t`: the hooks due run
        // now, before anyone goes on.
        for (at, hook) in due_hooks(&mut st, t) {
            hook(at);
        }
        let mut wake = Vec::new();
        for (what, at) in delivered {
            // A waiter handed its completion is awake again: the clock
            // waits for it before it moves on.
            if let Some((_, thread)) = st.waiters.remove(&what) {
                wake.push(thread);
            }
            st.done.insert(what, at);
        }
        st.generation += 1;
        drop(st);
        wake.iter().for_each(std::thread::Thread::unpark);
        true
    }

    pub(crate) fn set_running(&self, running: bool) {
        if !running {
            self.lock().expected = 0;
        }
        self.running.store(running, Ordering::Release);
        if !running {
            self.changed.notify_all();
        }
    }
}

/// A running world ([`VirtualClock::start_world`]): its advancer thread,
/// stopped when this is dropped.
pub struct WorldRun {
    clock: Arc<VirtualClock>,
    advancer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for WorldRun {
    fn drop(&mut self) {
        self.clock.world.set_running(false);
        if let Some(a) = self.advancer.take() {
            let _ = a.join();
        }
    }
}

/// A thread taking part in a world ([`VirtualClock::participate`]): the
/// clock does not move while it is awake. Leaves when dropped.
pub struct Participant {
    clock: Arc<VirtualClock>,
}

impl Drop for Participant {
    fn drop(&mut self) {
        self.clock.world.leave();
    }
}

impl VirtualClock {
    /// Starts this clock's world: from now until the returned guard is
    /// dropped, synchronous calls to its disks wait for its advancer.
    pub fn start_world(self: &Arc<Self>) -> WorldRun {
        self.world.set_running(true);
        let clock = Arc::clone(self);
        let advancer = std::thread::Builder::new()
            .name("iolab-virtual-time".into())
            .spawn(move || clock.world.advance_loop(&clock))
            .ok();
        WorldRun { clock: Arc::clone(self), advancer }
    }

    /// Announces `n` participants about to join (threads being spawned):
    /// the clock does not move until they have.
    pub fn expect_participants(&self, n: usize) {
        self.world.expect(n);
    }

    /// Makes the calling thread a participant of the world.
    pub fn participate(self: &Arc<Self>) -> Participant {
        self.world.join();
        Participant { clock: Arc::clone(self) }
    }

    /// Whether a world runs on this clock.
    pub fn world_running(&self) -> bool {
        self.world.is_running()
    }

    /// Registers a simulated disk with the world; its index for
    /// [`VirtualClock::call`].
    pub fn attach(&self, disk: Weak<dyn VirtualDisk>) -> usize {
        self.world.attach(disk)
    }

    /// In a running world: submits a request to disk `disk` at the clock's
    /// time (`submit` gives its id) and waits for its completion time.
    pub fn call(&self, disk: usize, submit: impl FnOnce(Nanos) -> Result<u64>) -> Result<Nanos> {
        self.world.call(self, disk, submit)
    }

    /// In a running world: waits until the clock reaches `t`.
    pub fn sleep_until(&self, t: Nanos) -> Result<()> {
        self.world.sleep_until(self, t)
    }

    /// Runs `hook` when a running world's clock reaches `t`, every thread
    /// of it then waiting and every disk's model run up to `t` (a power
    /// cut's images are taken there). Given the instant it ran at.
    pub fn at(&self, t: Nanos, hook: impl FnOnce(Nanos) + Send + 'static) {
        let mut st = self.world.lock();
        let i = st.hooks.partition_point(|(at, _)| *at <= t);
        st.hooks.insert(i, (t, Box::new(hook)));
    }

    /// Runs `hook` `after` the start of the next run on this clock (when
    /// [`VirtualClock::start_run`] is called: an engine calls it once its
    /// set-up, a journal's creation say, is done), as [`VirtualClock::at`].
    pub fn after_start(&self, after: Nanos, hook: impl FnOnce(Nanos) + Send + 'static) {
        self.world.lock().after_start.push((after, Box::new(hook)));
    }

    /// A run starts now: the hooks set with [`VirtualClock::after_start`]
    /// become due their time from now.
    pub fn start_run(&self) {
        let now = self.now();
        let pending = std::mem::take(&mut self.world.lock().after_start);
        for (after, hook) in pending {
            self.at(now + after, hook);
        }
    }

    /// When the next hook set with [`VirtualClock::at`] is due, if any.
    pub fn next_hook(&self) -> Option<Nanos> {
        self.world.lock().hooks.first().map(|(t, _)| *t)
    }

    /// Runs the hooks due by `t`: for an engine that drives its disks in
    /// virtual time itself, which calls it with every disk's model at `t`
    /// and before anything more is submitted, as a world's advancer does.
    pub fn run_hooks(&self, t: Nanos) {
        let due = due_hooks(&mut self.world.lock(), t);
        for (at, hook) in due {
            hook(at);
        }
    }
}
