use std::sync::{Arc, Mutex, MutexGuard};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{snapshot, Backend, Checked, Device, Front, Geometry, MemDevice, Result};

/// What a power cut keeps of the writes that were not yet durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPolicy {
    /// Every unflushed write is lost: the durable image only.
    DropUnflushed,
    /// Every unflushed write reached the medium (a crash just after a
    /// flush would have completed).
    KeepAll,
    /// Each unflushed write independently reached the medium or not.
    KeepSubset,
    /// The first `n` unflushed writes, in issue order, reached the medium
    /// and none after them (the dm-log-writes replay of a prefix).
    Prefix(usize),
    /// As `KeepSubset`, and one unflushed write is torn: a random proper
    /// subset of its sectors is new, the rest old.
    TornWrite,
}

/// A crash image and how it was made.
#[derive(Debug)]
pub struct CrashOutcome {
    /// The image a power cut could have left behind.
    pub image: MemDevice,
    /// How many writes were not yet durable at the crash.
    pub pending: usize,
    /// Indexes (in issue order among the pending writes) of those kept whole.
    pub kept: Vec<usize>,
    /// The pending write that was torn, and which of its sectors are new.
    pub torn: Option<(usize, Vec<bool>)>,
}

struct PendingWrite {
    offset: u64,
    data: Vec<u8>,
    completed: bool,
}

struct State {
    /// Every write since the last completed flush, in issue order.
    pending: Vec<(u64, PendingWrite)>,
    next_id: u64,
}

/// Wraps a device and remembers what a power cut could undo.
///
/// Reads and writes pass through to the inner device (the live image). The
/// crash device also keeps the durable image, a sparse copy in memory
/// taken when it was wrapped and advanced at each completed flush, and the
/// writes issued since. Following the worst-case rule, a flush makes
/// durable only the writes that had completed when it was issued.
pub struct CrashDevice {
    front: Front,
    inner: Arc<dyn Device>,
    durable: MemDevice,
    state: Mutex<State>,
}

impl CrashDevice {
    /// Wraps `inner`; its current contents are taken as durable.
    pub fn new(inner: Arc<dyn Device>) -> Result<CrashDevice> {
        let durable = snapshot(inner.as_ref())?;
        Ok(CrashDevice {
            front: Front::new(format!("crash({})", inner.name()), Geometry::of(inner.as_ref())),
            inner,
            durable,
            state: Mutex::new(State { pending: Vec::new(), next_id: 0 }),
        })
    }

    /// How many writes are not yet durable.
    pub fn pending_writes(&self) -> usize {
        self.lock().pending.len()
    }

    /// The image a power cut at this instant could leave, chosen by
    /// `policy` and, for the random policies, by `seed` (the same seed and
    /// history give the same image).
    pub fn crash(&self, policy: CrashPolicy, seed: u64) -> Result<CrashOutcome> {
        let state = self.lock();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let pending = state.pending.len();
        let mut keep: Vec<bool> = match policy {
            CrashPolicy::DropUnflushed => vec![false; pending],
            CrashPolicy::KeepAll => vec![true; pending],
            CrashPolicy::Prefix(n) => (0..pending).map(|i| i < n).collect(),
            CrashPolicy::KeepSubset | CrashPolicy::TornWrite => {
                (0..pending).map(|_| rng.random_bool(0.5)).collect()
            }
        };
        let mut torn = None;
        if policy == CrashPolicy::TornWrite && pending > 0 {
            let victim = rng.random_range(0..pending);
            let sectors = state.pending[victim].1.data.len() / self.sector_bytes() as usize;
            keep[victim] = false;
            torn = Some((victim, torn_mask(&mut rng, sectors)));
        }
        let image = self.copy_durable()?;
        let sector = self.sector_bytes() as usize;
        for (index, (_, write)) in state.pending.iter().enumerate() {
            if keep[index] {
                image.write_at(&write.data, write.offset)?;
            } else if let Some((_, mask)) = torn.as_ref().filter(|(victim, _)| *victim == index) {
                for (i, new) in mask.iter().enumerate() {
                    if *new {
                        let bytes = &write.data[i * sector..(i + 1) * sector];
                        image.write_at(bytes, write.offset + (i * sector) as u64)?;
                    }
                }
            }
        }
        image.stats().reset();
        let kept = keep.iter().enumerate().filter(|(_, k)| **k).map(|(i, _)| i).collect();
        Ok(CrashOutcome { image, pending, kept, torn })
    }

    fn copy_durable(&self) -> Result<MemDevice> {
        let image = snapshot(&self.durable)?;
        Ok(image)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic in another thread mid-update of the
        // pending list, which only pushes, marks and drains whole entries.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A random mask of `sectors` booleans with at least one of each value
/// when there are two or more sectors (a one-sector write cannot tear).
fn torn_mask(rng: &mut Xoshiro256PlusPlus, sectors: usize) -> Vec<bool> {
    if sectors < 2 {
        return vec![rng.random_bool(0.5); sectors];
    }
    loop {
        let mask: Vec<bool> = (0..sectors).map(|_| rng.random_bool(0.5)).collect();
        if mask.iter().any(|b| *b) && mask.iter().any(|b| !*b) {
            return mask;
        }
    }
}

impl Backend for CrashDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        let id = {
            let mut state = self.lock();
            let id = state.next_id;
            state.next_id += 1;
            let write = PendingWrite { offset, data: buf.to_vec(), completed: false };
            state.pending.push((id, write));
            id
        };
        let result = self.inner.write_at(buf, offset);
        let mut state = self.lock();
        let position = state.pending.iter().position(|(i, _)| *i == id);
        // Invariant: only flush removes entries, and only completed ones.
        let position = position.expect("an in-flight write stays pending until it completes");
        if result.is_err() {
            state.pending.remove(position);
        } else {
            state.pending[position].1.completed = true;
        }
        result
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        let covered: Vec<u64> =
            self.lock().pending.iter().filter(|(_, w)| w.completed).map(|(id, _)| *id).collect();
        self.inner.flush()?;
        let mut state = self.lock();
        let mut still_pending = Vec::with_capacity(state.pending.len());
        for (id, write) in state.pending.drain(..) {
            if covered.contains(&id) {
                self.durable.write_at(&write.data, write.offset)?;
            } else {
                still_pending.push((id, write));
            }
        }
        state.pending = still_pending;
        Ok(())
    }
}
