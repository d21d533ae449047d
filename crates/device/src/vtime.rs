//! Devices that live in virtual time: simulated disks, whose requests take
//! modeled time on a clock that nothing waits for. Besides the ordinary
//! synchronous calls (which advance a shared clock), such a device offers
//! [`VirtualDisk`]: requests submitted at a virtual instant and completed
//! when the model says, so an engine can keep many in flight and the
//! model's own queue (shortest positioning first, say) orders them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::Result;

/// Virtual time, in nanoseconds from the model's start.
pub type Nanos = u64;

/// What a request to a virtual disk does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VOp {
    Read,
    Write,
    /// Makes every write completed before it durable (as `Device::flush`).
    Flush,
}

/// A request to a virtual disk: whole sectors inside it (the submitter
/// checks, as a direct submitter does: `check_request`).
#[derive(Debug)]
pub enum VData<'a> {
    /// Bytes to store at `offset`.
    Write(&'a [u8]),
    /// A buffer to fill from `offset`.
    Read(&'a mut [u8]),
    Flush,
}

impl VData<'_> {
    pub fn op(&self) -> VOp {
        match self {
            VData::Write(_) => VOp::Write,
            VData::Read(_) => VOp::Read,
            VData::Flush => VOp::Flush,
        }
    }
}

/// A simulated disk driven by an engine in virtual time.
pub trait VirtualDisk: Send + Sync {
    /// Takes a request arriving at `at` (no earlier than what the model
    /// last advanced to); its data moves now (a read sees every write
    /// submitted before it). Returns the request's id, or an error when
    /// the model cannot take it (its memory for data is full).
    fn submit(&self, at: Nanos, offset: u64, data: VData<'_>) -> Result<u64>;

    /// When the model next has something to do (a completion, or a step
    /// of its own such as a destage), if ever.
    fn next_event(&self) -> Option<Nanos>;

    /// Runs the model up to `t`, returning the requests completed by then
    /// with their completion times, in time order.
    fn advance(&self, t: Nanos) -> Vec<(u64, Nanos)>;

    /// The model and its parameters, for reports.
    fn describe(&self) -> String;
}

/// The virtual time simulated disks share: every simulated disk of a stack
/// on one clock, so a volume's members and the layers above see one time.
/// Synchronous calls arrive at its time and move it to their completion.
#[derive(Debug, Default)]
pub struct VirtualClock {
    now: AtomicU64,
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
