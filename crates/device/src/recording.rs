//! Recording every write and flush of a stack's devices in one global
//! order (as dm-log-writes does), and rebuilding afterwards the images a
//! power cut at any point of that history could have left.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{Backend, Checked, CrashPolicy, Device, Front, Geometry, MemDevice, Result};

/// One step of a recorded history.
#[derive(Clone, Debug)]
pub enum Event {
    /// A completed write to device `device` (its index in the recording).
    Write { device: usize, offset: u64, data: Arc<[u8]> },
    /// A completed flush of device `device`.
    Flush { device: usize },
    /// A note from the workload (what it had issued or seen acknowledged
    /// by then), kept in order with the I/O.
    Mark(u64),
}

/// The shared, ordered history of several devices.
#[derive(Default)]
pub struct Recording {
    events: Mutex<Vec<Event>>,
}

impl Recording {
    pub fn new() -> Arc<Recording> {
        Arc::new(Recording::default())
    }

    /// Appends a workload note.
    pub fn mark(&self, note: u64) {
        self.lock().push(Event::Mark(note));
    }

    /// A copy of the history so far.
    pub fn events(&self) -> Vec<Event> {
        self.lock().clone()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        // Pushes are whole; a panic elsewhere cannot leave half an event.
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Passes requests to `inner` and appends each completed write and flush
/// to a [`Recording`]. Meant for single-threaded histories: with several
/// threads the recorded order is one of the orders that could have been.
pub struct RecordingDevice {
    front: Front,
    index: usize,
    inner: Arc<dyn Device>,
    recording: Arc<Recording>,
}

impl RecordingDevice {
    pub fn new(inner: Arc<dyn Device>, index: usize, recording: Arc<Recording>) -> RecordingDevice {
        RecordingDevice {
            front: Front::new(format!("recorded({})", inner.name()), Geometry::of(inner.as_ref())),
            index,
            inner,
            recording,
        }
    }
}

impl Backend for RecordingDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        self.inner.write_at(buf, offset)?;
        self.recording.lock().push(Event::Write { device: self.index, offset, data: Arc::from(buf) });
        Ok(())
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        self.inner.flush()?;
        self.recording.lock().push(Event::Flush { device: self.index });
        Ok(())
    }
}

/// A device that reads through to a shared base image and keeps its own
/// writes in memory, sector by sector: a crash image that costs only what
/// differs from the durable state.
pub struct Overlay {
    front: Front,
    base: Arc<dyn Device>,
    top: Mutex<BTreeMap<u64, Box<[u8]>>>,
}

impl Overlay {
    pub fn new(base: Arc<MemDevice>) -> Overlay {
        let name = format!("overlay({})", base.name());
        Overlay::named(base, name)
    }

    /// A scratch view of any device: reads see the device under whatever
    /// was written here; writes stay in memory (what they hold bounds it)
    /// and never reach the device. It goes by the device's name, since
    /// what it reads is the device's. For a command that must not change
    /// a device but runs code that writes (a log replay before a check).
    pub fn over(base: Arc<dyn Device>) -> Overlay {
        let name = base.name().to_string();
        Overlay::named(base, name)
    }

    fn named(base: Arc<dyn Device>, name: String) -> Overlay {
        let front = Front::new(name, Geometry::of(base.as_ref()));
        Overlay { front, base, top: Mutex::new(BTreeMap::new()) }
    }

    fn top(&self) -> MutexGuard<'_, BTreeMap<u64, Box<[u8]>>> {
        self.top.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Backend for Overlay {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        self.base.read_at(buf, offset)?;
        let sector = u64::from(self.sector_bytes());
        let first = offset / sector;
        let last = first + buf.len() as u64 / sector;
        for (s, data) in self.top().range(first..last) {
            let at = ((s - first) * sector) as usize;
            buf[at..at + sector as usize].copy_from_slice(data);
        }
        Ok(())
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        let sector = self.sector_bytes() as usize;
        let first = offset / sector as u64;
        let mut top = self.top();
        for (i, chunk) in buf.chunks_exact(sector).enumerate() {
            top.insert(first + i as u64, Box::from(chunk));
        }
        Ok(())
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        Ok(())
    }

    /// What is read through the view comes from the base.
    fn will_need_raw(&self, offset: u64, len: u64) {
        self.base.will_need(offset, len);
    }
}

/// A point of a recorded history to crash at, and what the power cut
/// keeps of the writes that were not yet durable there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPoint {
    /// The crash happens after this many events.
    pub after_events: usize,
    pub policy: CrashPolicy,
    pub seed: u64,
}

/// Walks a recorded history once, in order, and builds the crash image of
/// every device at each requested point. The worst-case rule holds: a
/// flush makes durable only the writes of its own device before it.
pub struct Replayer {
    events: Vec<Event>,
    position: usize,
    durable: Vec<Arc<MemDevice>>,
    pending: Vec<Vec<(u64, Arc<[u8]>)>>,
}

impl Replayer {
    /// `initial` are the devices' contents when recording began.
    pub fn new(events: Vec<Event>, initial: Vec<MemDevice>) -> Replayer {
        let pending = initial.iter().map(|_| Vec::new()).collect();
        Replayer { events, position: 0, durable: initial.into_iter().map(Arc::new).collect(), pending }
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The images at `point`, one per device. Points must come in
    /// non-decreasing order of `after_events`.
    pub fn images_at(&mut self, point: CrashPoint) -> Result<Vec<Overlay>> {
        let target = point.after_events.min(self.events.len());
        debug_assert!(target >= self.position, "crash points must come in order");
        while self.position < target {
            match &self.events[self.position] {
                Event::Write { device, offset, data } => {
                    self.pending[*device].push((*offset, Arc::clone(data)))
                }
                Event::Flush { device } => {
                    for (offset, data) in self.pending[*device].drain(..) {
                        self.durable[*device].write_at(&data, offset)?;
                    }
                }
                Event::Mark(_) => {}
            }
            self.position += 1;
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(point.seed);
        let mut images = Vec::with_capacity(self.durable.len());
        for (durable, pending) in self.durable.iter().zip(&self.pending) {
            let image = Overlay::new(Arc::clone(durable));
            apply_policy(&image, pending, point.policy, &mut rng)?;
            images.push(image);
        }
        Ok(images)
    }
}

/// Applies the pending writes a policy keeps (see [`CrashPolicy`]).
fn apply_policy(
    image: &Overlay,
    pending: &[(u64, Arc<[u8]>)],
    policy: CrashPolicy,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<()> {
    let n = pending.len();
    let mut keep: Vec<bool> = match policy {
        CrashPolicy::DropUnflushed => vec![false; n],
        CrashPolicy::KeepAll => vec![true; n],
        CrashPolicy::Prefix(k) => (0..n).map(|i| i < k).collect(),
        CrashPolicy::KeepSubset | CrashPolicy::TornWrite => (0..n).map(|_| rng.random_bool(0.5)).collect(),
    };
    let sector = image.sector_bytes() as usize;
    let mut torn: Option<(usize, Vec<bool>)> = None;
    if policy == CrashPolicy::TornWrite && n > 0 {
        let victim = rng.random_range(0..n);
        keep[victim] = false;
        let sectors = pending[victim].1.len() / sector;
        torn = Some((victim, (0..sectors).map(|_| rng.random_bool(0.5)).collect()));
    }
    for (i, (offset, data)) in pending.iter().enumerate() {
        if keep[i] {
            image.write_at(data, *offset)?;
        } else if let Some((_, mask)) = torn.as_ref().filter(|(victim, _)| *victim == i) {
            for (s, new) in mask.iter().enumerate() {
                if *new {
                    image.write_at(&data[s * sector..(s + 1) * sector], *offset + (s * sector) as u64)?;
                }
            }
        }
    }
    Ok(())
}
