//! A simulated disk as an iolab device: the model (`hdd.rs`, `ssd.rs`)
//! decides when each request completes, the store keeps the bytes. Driven
//! two ways: through [`device::VirtualDisk`], by an engine in virtual time
//! with many requests in flight (the model's queue orders them); or by
//! ordinary synchronous calls from any layer above (a volume, the block
//! log, the file system), each arriving at the shared [`VirtualClock`]'s time
//! and moving it on to its completion, one request at a time.

use std::sync::{Arc, Mutex, MutexGuard};

use device::{
    Backend, Checked, DeviceError, Front, Geometry, Medium, MediumKind, Nanos, Op, Result, VData, VOp,
    VirtualClock, VirtualDisk,
};

use crate::hdd::Hdd;
use crate::model::{Advance, Model};
use crate::params::{Data, SimSpec};
use crate::ssd::Ssd;
use crate::store::Store;

struct Inner {
    model: Box<dyn Model>,
    store: Store,
    /// Completions of requests an engine submitted, which the model gave
    /// out while a synchronous call ran it (a journal's compaction in the
    /// middle of a run in virtual time): handed to the engine at its next
    /// [`VirtualDisk::advance`].
    early: Vec<(u64, Nanos)>,
}

/// A simulated disk (`sim:hdd...`, `sim:ssd...`).
pub struct SimDevice {
    front: Front,
    spec: SimSpec,
    clock: Arc<VirtualClock>,
    /// This disk's index in the clock's world.
    index: usize,
    inner: Mutex<Inner>,
}

impl SimDevice {
    /// A simulated disk on `clock` (shared by every disk of a stack),
    /// registered with the clock's world.
    pub fn new(name: impl Into<String>, spec: SimSpec, clock: Arc<VirtualClock>) -> Result<Arc<SimDevice>> {
        let size = spec.size_bytes();
        if size < 1 << 20 || size % 4096 != 0 {
            return Err(DeviceError::Invalid(format!(
                "{spec}: size {size} must be at least 1 MiB and a multiple of 4 KiB; give size= in k, m, g or t"
            )));
        }
        let model: Box<dyn Model> = match &spec {
            SimSpec::Hdd(p) => Box::new(Hdd::new(p.clone())),
            SimSpec::Ssd(p) => Box::new(Ssd::new(p.clone())),
        };
        let store = Store::new(spec.data() == Data::Keep);
        let name = name.into();
        Ok(Arc::new_cyclic(|me: &std::sync::Weak<SimDevice>| {
            let me: std::sync::Weak<dyn VirtualDisk> = me.clone();
            let index = clock.attach(me);
            SimDevice {
                front: Front::new(name, Geometry::new(size, 512)),
                spec,
                clock,
                index,
                inner: Mutex::new(Inner { model, store, early: Vec::new() }),
            }
        }))
    }

    /// From now on, keeps no written data (reads return zeros): for a
    /// job whose data nothing reads back, when it was not asked for.
    pub fn discard_data(&self) {
        self.lock().store = Store::new(false);
    }

    pub fn spec(&self) -> &SimSpec {
        &self.spec
    }

    pub fn clock(&self) -> &Arc<VirtualClock> {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a power cut now would leave: the bytes the medium holds
    /// durably (writes acknowledged from a cache and not destaged, or not
    /// flushed without power-loss protection, are not there).
    pub fn read_durable(&self, buf: &mut [u8], offset: u64) {
        self.lock().store.read_durable(offset, buf);
    }

    /// Every durable page: (offset, bytes).
    pub fn durable_pages(&self) -> Vec<(u64, Vec<u8>)> {
        self.lock().store.durable_pages().map(|(o, b)| (o, b.to_vec())).collect()
    }

    fn apply(inner: &mut Inner, adv: &Advance) {
        for &(offset, len) in &adv.durable {
            inner.store.make_durable(offset, len);
        }
    }

    /// Moves a request's data and hands it to the model, arriving at `at`.
    fn take(&self, at: Nanos, offset: u64, data: VData<'_>, inner: &mut Inner) -> Result<u64> {
        let (op, len) = match &data {
            VData::Write(b) => (VOp::Write, b.len() as u64),
            VData::Read(b) => (VOp::Read, b.len() as u64),
            VData::Flush => (VOp::Flush, 0),
        };
        match data {
            VData::Write(b) => {
                inner.store.write(offset, b).map_err(|why| self.io_error(op, offset, len, why))?
            }
            VData::Read(b) => inner.store.read(offset, b),
            VData::Flush => {}
        }
        Ok(inner.model.submit(at, op, offset, len))
    }

    /// One request through the synchronous path: it arrives at the clock's
    /// time and the clock moves to its completion.
    fn sync(&self, offset: u64, data: VData<'_>) -> Result<()> {
        if self.clock.world_running() {
            // Several threads in one virtual time: the world's advancer
            // moves the clock and hands the completion back.
            self.clock.call(self.index, |at| self.take(at, offset, data, &mut self.lock()))?;
            return Ok(());
        }
        let mut inner = self.lock();
        let at = self.clock.now();
        let id = self.take(at, offset, data, &mut inner)?;
        loop {
            let Some(t) = inner.model.next_event() else {
                return Err(DeviceError::Invalid(format!(
                    "{}: the model stopped before a request completed",
                    self.name()
                )));
            };
            let adv = inner.model.advance(t.max(at));
            SimDevice::apply(&mut inner, &adv);
            let mut mine = None;
            for (done, when) in adv.done {
                if done == id {
                    mine = Some(when);
                } else {
                    // An engine's request: kept for its next advance.
                    inner.early.push((done, when));
                }
            }
            if let Some(when) = mine {
                self.clock.advance_to(when);
                return Ok(());
            }
        }
    }

    fn io_error(&self, op: VOp, offset: u64, len: u64, why: String) -> DeviceError {
        let op = match op {
            VOp::Read => Op::Read,
            VOp::Write => Op::Write,
            VOp::Flush => Op::Flush,
        };
        DeviceError::Io {
            device: self.name().to_string(),
            op,
            offset,
            len,
            source: std::io::Error::other(why),
        }
    }

    fn name(&self) -> &str {
        self.front.name()
    }
}

impl Backend for SimDevice {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        self.sync(offset, VData::Read(buf))
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        self.sync(offset, VData::Write(buf))
    }

    fn flush_raw(&self, _: Checked) -> Result<()> {
        self.sync(0, VData::Flush)
    }

    /// Every byte reads in modeled time, written or not: nothing to lay out.
    fn unwritten_raw(&self, _: u64, _: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        Ok(Some(Vec::new()))
    }

    fn media_raw(&self) -> Vec<Medium> {
        vec![Medium {
            name: VirtualDisk::describe(self),
            kind: MediumKind::Simulated,
            direct: true,
            filesystem: None,
            memory_backed: false,
            cached_bytes: None,
        }]
    }

    fn virtual_disk_raw(&self) -> Option<&dyn VirtualDisk> {
        Some(self)
    }
}

impl VirtualDisk for SimDevice {
    fn submit(&self, at: Nanos, offset: u64, data: VData<'_>) -> Result<u64> {
        let mut inner = self.lock();
        self.clock.advance_to(at);
        self.take(at, offset, data, &mut inner)
    }

    fn next_event(&self) -> Option<Nanos> {
        let inner = self.lock();
        let early = inner.early.iter().map(|&(_, t)| t).min();
        early.into_iter().chain(inner.model.next_event()).min()
    }

    fn advance(&self, t: Nanos) -> Vec<(u64, Nanos)> {
        let mut inner = self.lock();
        let adv = inner.model.advance(t);
        SimDevice::apply(&mut inner, &adv);
        self.clock.advance_to(t);
        let mut done = std::mem::take(&mut inner.early);
        done.extend(adv.done);
        done
    }

    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn power_cut(&self) -> Vec<(u64, Vec<u8>)> {
        let mut pages = self.durable_pages();
        pages.sort_unstable_by_key(|(offset, _)| *offset);
        pages
    }

    fn describe(&self) -> String {
        let spec = self.spec.to_string();
        if self.spec.data() == Data::Keep && !self.lock().store.keeps() {
            return format!("{spec}, data discarded");
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use device::Device;

    fn disk(spec: &str) -> Arc<SimDevice> {
        SimDevice::new("sim", SimSpec::parse(spec).unwrap(), VirtualClock::new()).unwrap()
    }

    #[test]
    fn synchronous_calls_move_the_clock_and_keep_the_data() {
        let d = disk("hdd,wce=off,size=1g");
        d.write_at(&[5u8; 4096], 8192).unwrap();
        let after_write = d.clock().now();
        assert!(after_write > 1_000_000, "a write on the medium takes milliseconds: {after_write}");
        let mut buf = [0u8; 4096];
        d.read_at(&mut buf, 8192).unwrap();
        assert_eq!(buf, [5u8; 4096]);
        assert!(d.clock().now() > after_write);
    }

    #[test]
    fn a_cache_that_lies_loses_acknowledged_writes_at_a_power_cut() {
        let d = disk("hdd,flush=ignore,size=1g");
        d.write_at(&[9u8; 4096], 0).unwrap();
        d.flush().unwrap();
        let mut buf = [0u8; 4096];
        d.read_durable(&mut buf, 0);
        assert_eq!(buf, [0u8; 4096], "acknowledged and flushed, yet only in the cache");
    }

    #[test]
    fn an_honest_cache_has_the_flushed_writes_durable() {
        let d = disk("hdd,size=1g");
        d.write_at(&[9u8; 4096], 0).unwrap();
        d.flush().unwrap();
        let mut buf = [0u8; 4096];
        d.read_durable(&mut buf, 0);
        assert_eq!(buf, [9u8; 4096]);
    }

    #[test]
    fn a_synchronous_call_among_requests_in_flight_keeps_their_completions() {
        let d = disk("ssd,size=1g");
        let ids: Vec<u64> =
            (0..4u64).map(|i| d.submit(0, i * 4096, VData::Write(&[1u8; 4096])).unwrap()).collect();
        d.flush().unwrap();
        let t = d.clock().now();
        assert_eq!(d.next_event().map(|e| e <= t), Some(true), "the kept completions are due");
        let mut done: Vec<u64> = d.advance(t).into_iter().map(|(id, _)| id).collect();
        done.sort_unstable();
        assert_eq!(done, ids);
    }

    #[test]
    fn the_same_requests_give_the_same_times() {
        let run = || {
            let d = disk("hdd,size=1g");
            for i in 0..50u64 {
                d.write_at(&[i as u8; 4096], (i * 7919 % 1000) * 4096).unwrap();
            }
            d.flush().unwrap();
            d.clock().now()
        };
        assert_eq!(run(), run());
    }

    /// `threads` disks on one clock, each read 4 KiB at scattered places
    /// `reads` times: by a thread each in a world, or by one thread, disk
    /// after disk; the virtual time it took.
    fn parallel_reads(threads: usize, reads: u64, world: bool) -> Nanos {
        let clock = VirtualClock::new();
        let disks: Vec<Arc<SimDevice>> = (0..threads)
            .map(|_| {
                SimDevice::new("sim", SimSpec::parse("hdd,wce=off,size=1g").unwrap(), Arc::clone(&clock))
                    .unwrap()
            })
            .collect();
        let reads_of = |i: usize, d: &SimDevice| {
            let mut buf = [0u8; 4096];
            for r in 0..reads {
                let at = (r * 7919 + i as u64 * 104_729) % 200_000 * 4096;
                d.read_at(&mut buf, at).unwrap();
            }
        };
        if !world {
            // One thread, the disks in turn: the synchronous path.
            disks.iter().enumerate().for_each(|(i, d)| reads_of(i, d));
            return clock.now();
        }
        // The threads are announced before they are spawned: one starting
        // late would otherwise find the clock moved on without it.
        clock.expect_participants(threads);
        let run = clock.start_world();
        std::thread::scope(|scope| {
            for (i, d) in disks.iter().enumerate() {
                let clock = Arc::clone(&clock);
                scope.spawn(move || {
                    let _me = clock.participate();
                    reads_of(i, d);
                });
            }
        });
        drop(run);
        clock.now()
    }

    #[test]
    fn in_a_world_threads_on_separate_disks_overlap_in_virtual_time() {
        let alone = parallel_reads(1, 50, true);
        let four = parallel_reads(4, 50, true);
        assert!(four < alone * 13 / 10, "four disks at once {four} ns, one {alone} ns");
    }

    #[test]
    fn one_thread_without_a_world_waits_for_each_call_in_turn() {
        let alone = parallel_reads(1, 50, false);
        let four = parallel_reads(4, 50, false);
        assert!(four > alone * 3, "four disks {four} ns, one {alone} ns");
    }

    #[test]
    fn a_lock_held_across_a_call_does_not_stop_the_world() {
        let clock = VirtualClock::new();
        let d = SimDevice::new("sim", SimSpec::parse("hdd,wce=off,size=1g").unwrap(), Arc::clone(&clock))
            .unwrap();
        let lock = Mutex::new(0u32);
        let _run = clock.start_world();
        std::thread::scope(|scope| {
            for t in 0..3u64 {
                let (clock, d, lock) = (Arc::clone(&clock), &d, &lock);
                scope.spawn(move || {
                    let _me = clock.participate();
                    for r in 0..20 {
                        let mut held = lock.lock().unwrap();
                        d.write_at(&[t as u8; 4096], (r * 3 + t) * 1_000_000 * 4096 % (1 << 30)).unwrap();
                        *held += 1;
                    }
                });
            }
        });
        assert_eq!(*lock.lock().unwrap(), 60);
    }
}
