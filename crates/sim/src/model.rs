//! What every disk model offers the device around it: requests submitted
//! at virtual instants, events, completions, and which bytes the medium
//! now holds durably.

use device::{Nanos, VOp};

/// What running a model up to an instant produced.
#[derive(Debug, Default)]
pub(crate) struct Advance {
    /// Requests completed, with their completion times, in time order.
    pub done: Vec<(u64, Nanos)>,
    /// Byte ranges now durable on the medium.
    pub durable: Vec<(u64, u64)>,
}

pub(crate) trait Model: Send {
    /// Takes a request arriving at `at` (no earlier than the last
    /// `advance`); its id.
    fn submit(&mut self, at: Nanos, op: VOp, offset: u64, len: u64) -> u64;
    /// When the model next has something to do.
    fn next_event(&self) -> Option<Nanos>;
    /// Runs the model up to `t`.
    fn advance(&mut self, t: Nanos) -> Advance;
}
