//! Devices that live in virtual time: simulated disks, whose requests take
//! modeled time on a clock that nothing waits for. Besides the ordinary
//! synchronous calls (which advance a shared clock), such a device offers
//! [`VirtualDisk`]: requests submitted at a virtual instant and completed
//! when the model says, so an engine can keep many in flight and the
//! model's own queue (shortest positioning first, say) orders them.

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

    /// The virtual time the disk has reached: a new run of requests
    /// starts there (what it ran before is in its past).
    fn now(&self) -> Nanos;

    /// What a power cut now would leave on the medium: every page the disk
    /// holds durably, (offset, bytes), in offset order. Acknowledged
    /// writes still in a volatile cache are not there.
    fn power_cut(&self) -> Vec<(u64, Vec<u8>)>;
}
