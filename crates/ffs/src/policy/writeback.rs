//! Soft updates' schedule over the buffer cache: buffers that cannot go
//! complete held back, checkpoints (what can go written, then a flush,
//! possibly behind the calls on a flusher thread, one in flight at most,
//! and again for what that flush let go), and freed directory blocks
//! written once more in batches before their buffers go. The cache calls
//! these hooks at its flushes, write-backs and evictions; under the other
//! policies each is nothing.

use std::sync::Arc;

use device::DeviceError;

use crate::cache::{write_runs, Cache, EVICT_BATCH_BLOCKS};
use crate::commits::Commits;
use crate::policy::checkpoint::{Behind, CallerFlush, CallerFlushes, Checkpoints, ROUNDS_MAX};
use crate::policy::{Ordering, Waiting};

impl Ordering {
    fn io(&self) -> Option<&Checkpoints> {
        match self {
            Ordering::Softdep(s) => Some(&s.io),
            _ => None,
        }
    }

    fn io_mut(&mut self) -> Option<&mut Checkpoints> {
        match self {
            Ordering::Softdep(s) => Some(&mut s.io),
            _ => None,
        }
    }

    /// Who issues a checkpoint's flushes (by default the caller, at once).
    pub fn set_flushes_by(&mut self, by: Commits) {
        if let Some(io) = self.io_mut() {
            io.flushes_by = by;
        }
    }

    /// `block`'s buffer left the cache.
    pub fn forget(&mut self, block: u64) {
        if let Some(io) = self.io_mut() {
            io.forget(block);
        }
    }

    /// Whether an eviction passes `block` over (held back until a flush).
    pub fn passes_over(&self, block: u64) -> bool {
        self.io().is_some_and(|io| io.rolled.contains(&block))
    }

    /// A write-back left `held` unwritten (held back, or their safe copy
    /// is what their last write carried).
    pub fn held_back(&mut self, held: &[u64]) {
        if let Some(io) = self.io_mut() {
            io.rolled.extend(held);
        }
    }

    /// A buffer was evicted.
    pub fn evicted(&mut self, block: u64) {
        if let Some(io) = self.io_mut() {
            io.retired.remove(&block);
        }
    }

    /// What an eviction does with a block that cannot go complete: held
    /// back for a checkpoint's flush behind the calls; when the caller
    /// flushes (a modeled disk), rolled back as the syncer would have it
    /// (held back, it waits for the syncer's pass of blocks 30 s dirty:
    /// softdep's modeled tar took 5:54.29 so, 5:27.21 rolled back).
    pub fn evicting(&self) -> Waiting {
        match self.io().map(|io| io.flushes_by) {
            Some(Commits::Thread | Commits::Deferred) => Waiting::HoldBack,
            Some(Commits::Caller) | None => Waiting::RollBack,
        }
    }

    /// A freed block whose buffer is to be written once more, as memory
    /// holds it, before it is dropped (`retired`); one that is clean, or
    /// any under another policy, is dropped at once.
    pub fn retire(&mut self, cache: &mut Cache, block: u64) -> device::Result<()> {
        let dirty = cache.is_dirty_meta(block);
        let Some(io) = self.io_mut().filter(|_| dirty) else {
            cache.discard(self, block);
            return Ok(());
        };
        io.retired.insert(block);
        if io.retired.len() >= EVICT_BATCH_BLOCKS {
            self.write_retired(cache)?;
        }
        Ok(())
    }

    /// Writes the retired buffers, sorted and coalesced, and drops them.
    fn write_retired(&mut self, cache: &mut Cache) -> device::Result<()> {
        let Some(io) = self.io_mut() else { return Ok(()) };
        // One written since (by an eviction) and dropped needs nothing more.
        io.retired.retain(|&b| cache.is_dirty_meta(b));
        let mut batch: Vec<u64> = io.retired.iter().copied().collect();
        batch.sort_unstable();
        if io.flushes_by == Commits::Thread {
            batch = self.write_retired_behind(cache, batch)?;
        }
        cache.write_blocks(self, &batch, Waiting::RollBack)?;
        for block in batch {
            if !cache.is_dirty(block) {
                cache.discard(self, block);
            }
        }
        Ok(())
    }

    /// Beside a flusher thread: the retired buffers that can go as memory
    /// holds them leave the cache and are written by a thread of their
    /// own while the calls go on (the writes are issued now as far as the
    /// dependencies are concerned: the next flush waits for that thread
    /// before it is issued; nothing reads a freed block meanwhile).
    /// Returns the others (an update in them rolled back), to be written
    /// here.
    fn write_retired_behind(&mut self, cache: &mut Cache, batch: Vec<u64>) -> device::Result<Vec<u64>> {
        self.await_retiring(cache)?;
        let (whole, rest): (Vec<u64>, Vec<u64>) =
            batch.into_iter().partition(|&b| self.goes_as_memory(cache, b, cache.data(b)));
        let mut writes = Vec::with_capacity(whole.len());
        for &block in &whole {
            self.assert_rules(cache, block, cache.data(block));
        }
        for block in whole {
            self.written(block, false, None);
            if let Some(data) = cache.take_data(block) {
                self.forget(block);
                writes.push((block, data));
            }
        }
        if writes.is_empty() {
            return Ok(rest);
        }
        let run_max = cache.run_max();
        let requests: usize =
            writes.chunk_by(|a, b| b.0 == a.0 + 1).map(|run| run.len().div_ceil(run_max)).sum();
        cache.count_written(writes.len(), requests);
        let (send, receive) = std::sync::mpsc::channel();
        let dev = Arc::clone(cache.device());
        let thread = std::thread::Builder::new()
            .name("ffs-retired".into())
            .spawn(move || receive.recv().map_or(Ok(()), |writes| write_runs(dev.as_ref(), writes, run_max)));
        match thread {
            Ok(thread) => {
                if let Some(io) = self.io_mut() {
                    io.retiring = Some(thread);
                }
                send.send(writes).expect("the thread waits for its writes");
            }
            // No thread to be had: written here.
            Err(_) => write_runs(cache.device().as_ref(), writes, run_max)?,
        }
        Ok(rest)
    }

    /// Waits for the retired buffers being written behind the calls.
    fn await_retiring(&mut self, cache: &Cache) -> device::Result<()> {
        let Some(thread) = self.io_mut().and_then(|io| io.retiring.take()) else { return Ok(()) };
        thread.join().unwrap_or_else(|_| {
            Err(DeviceError::Flush {
                device: cache.device().name().to_string(),
                source: std::io::Error::other("the thread writing retired buffers panicked"),
            })
        })
    }

    /// Before a flush: a checkpoint's rounds end, and the flush in flight
    /// is waited for (and what waited on it run).
    pub fn before_flush(&mut self, cache: &mut Cache) -> device::Result<()> {
        let Some(io) = self.io_mut() else { return Ok(()) };
        io.rounds = 0;
        self.await_behind(cache)
    }

    /// After a flush: every write so far is durable, and the work that
    /// waited on them runs.
    pub fn after_flush(&mut self, cache: &Cache) {
        if self.io().is_none() {
            return;
        }
        self.seal();
        self.sealed_done(cache);
    }

    /// The flush issued at the last seal returned, with no checkpoint's
    /// rounds to go on with: what waited on the writes before it runs.
    fn sealed_done(&mut self, cache: &Cache) {
        let Some(io) = self.io_mut() else { return };
        io.rolled.clear();
        self.sealed_flushed(cache);
        self.rounds_done(cache.capacity_blocks());
    }

    /// After a full write-back: the retired buffers it wrote dropped.
    pub fn written_back(&mut self, cache: &mut Cache) {
        let Some(io) = self.io_mut() else { return };
        let retired: Vec<u64> = io.retired.iter().copied().filter(|&b| !cache.is_dirty(b)).collect();
        for block in retired {
            cache.discard(self, block);
        }
    }

    /// A checkpoint made at once (a sync's first pass): every dirty
    /// buffer that can go complete written (file data, bitmaps, metadata
    /// whose dependencies are on the disk), then a flush, and again for
    /// those held back until none is left or a round lets none go
    /// (`next_round`).
    pub fn checkpoint(&mut self, cache: &mut Cache) -> device::Result<()> {
        let Some(io) = self.io_mut() else { return Ok(()) };
        io.rounds = 0;
        self.await_behind(cache)?;
        self.write_ready(cache)?;
        if self.io().is_some_and(|io| !io.rolled.is_empty()) {
            self.start_rounds(cache, Commits::Caller)?;
        }
        Ok(())
    }

    /// A checkpoint's rounds, each flush issued `by`: the first now.
    fn start_rounds(&mut self, cache: &mut Cache, by: Commits) -> device::Result<()> {
        let Some(io) = self.io_mut() else { return Ok(()) };
        io.rounds = ROUNDS_MAX;
        io.rounds_by = by;
        self.flush_behind(cache, by)
    }

    /// Every dirty buffer that can go complete, written.
    fn write_ready(&mut self, cache: &mut Cache) -> device::Result<()> {
        cache.write_blocks(self, &cache.dirty_data_list(), Waiting::HoldBack)?;
        if self.io().is_some_and(|io| !io.retired.is_empty()) {
            self.write_retired(cache)?;
        }
        let meta: Vec<u64> = cache.dirty_meta_list().into_iter().filter(|&b| !self.passes_over(b)).collect();
        cache.write_blocks(self, &meta, Waiting::HoldBack)
    }

    /// Issues a flush of the writes so far (`by`: by the caller, what
    /// waited on it run at once; on a thread while the calls go on; or by
    /// the caller, what waited on it run by the next call that needs it
    /// done). One is in flight at most: the last is waited for first.
    fn flush_behind(&mut self, cache: &mut Cache, by: Commits) -> device::Result<()> {
        self.await_behind(cache)?;
        self.seal();
        cache.stats.flushes += 1;
        let thread = match by {
            Commits::Thread => {
                let dev = Arc::clone(cache.device());
                std::thread::Builder::new().name("ffs-flusher".into()).spawn(move || dev.flush()).ok()
            }
            Commits::Caller | Commits::Deferred => None,
        };
        let behind = match (thread, by) {
            (Some(thread), _) => Behind::Thread(thread),
            (None, Commits::Deferred) => {
                cache.device().flush()?;
                Behind::Deferred
            }
            // The caller's (or no thread to be had): done at once.
            (None, _) => {
                cache.device().flush()?;
                return self.behind_flushed(cache);
            }
        };
        if let Some(io) = self.io_mut() {
            io.behind = behind;
        }
        Ok(())
    }

    /// Waits for the flush in flight, then runs what waited on it.
    fn await_behind(&mut self, cache: &mut Cache) -> device::Result<()> {
        self.await_retiring(cache)?;
        let Some(io) = self.io_mut() else { return Ok(()) };
        match std::mem::replace(&mut io.behind, Behind::Idle) {
            Behind::Idle => return Ok(()),
            Behind::Thread(thread) => thread.join().unwrap_or_else(|_| {
                Err(DeviceError::Flush {
                    device: cache.device().name().to_string(),
                    source: std::io::Error::other("the flusher thread panicked"),
                })
            })?,
            Behind::Deferred => {}
            // The caller flushing has not returned: a flush now covers its
            // writes as well.
            Behind::Caller(_) => {
                cache.stats.flushes += 1;
                cache.device().flush()?
            }
        }
        self.behind_flushed(cache)
    }

    /// The seal that will cover a write made now (the next).
    pub fn next_seal(&self) -> u64 {
        self.io().map_or(0, |io| io.seals + 1)
    }

    /// Where the flush stands that writes covered by seal `need` wait
    /// for ([`Ordering::next_seal`] when they were made).
    pub fn caller_flush(&self, need: u64) -> CallerFlush {
        let Some(io) = self.io() else { return CallerFlush::Done };
        if io.seals_flushed >= need {
            return CallerFlush::Done;
        }
        match io.behind {
            Behind::Idle => CallerFlush::Needed,
            Behind::Caller(seal) => CallerFlush::InFlight(seal, Arc::clone(&io.caller_flushes)),
            Behind::Thread(_) | Behind::Deferred => CallerFlush::Behind,
        }
    }

    /// Before a flush its caller issues with the mount's lock let go: the
    /// flush in flight done with, and the writes so far sealed apart from
    /// those the other calls make meanwhile. Returns the seal's number
    /// for [`Ordering::caller_flushed`] and whom to tell when the flush
    /// returns. Under the other policies, 0 and no one.
    pub fn seal_for_caller(
        &mut self,
        cache: &mut Cache,
    ) -> device::Result<(u64, Option<Arc<CallerFlushes>>)> {
        self.before_flush(cache)?;
        self.seal();
        let Some(io) = self.io_mut() else { return Ok((0, None)) };
        let seal = io.seals;
        io.behind = Behind::Caller(seal);
        cache.stats.flushes += 1;
        Ok((seal, Some(Arc::clone(&io.caller_flushes))))
    }

    /// The flush issued after seal `seal` returned: what waited on the
    /// writes before the seal runs, as after any flush, unless a call
    /// did so already.
    pub fn caller_flushed(&mut self, cache: &mut Cache, seal: u64) {
        let Some(io) = self.io_mut() else { return };
        if !matches!(io.behind, Behind::Caller(s) if s == seal) {
            return;
        }
        io.behind = Behind::Idle;
        self.sealed_done(cache);
    }

    /// The flush in flight, if one is and it returned, done with (what
    /// waited on it run, the checkpoint gone on). Called at each eviction,
    /// and by the file system at each call.
    pub fn poll_behind(&mut self, cache: &mut Cache) -> device::Result<()> {
        match self.io().map(|io| &io.behind) {
            Some(Behind::Thread(thread)) if thread.is_finished() => self.await_behind(cache),
            _ => Ok(()),
        }
    }

    /// A flush issued at the last seal returned: the work that waited on
    /// the writes before it runs, and a checkpoint goes on.
    fn behind_flushed(&mut self, cache: &mut Cache) -> device::Result<()> {
        let Some(io) = self.io_mut() else { return Ok(()) };
        let waiting: Vec<u64> = io.rolled.drain().collect();
        self.sealed_flushed(cache);
        if self.io().is_some_and(|io| io.rounds > 0) {
            self.next_round(cache, waiting)?;
        }
        Ok(())
    }

    /// A checkpoint's next round: the buffers held back written if they
    /// can go now, and if some did and some still wait, another flush
    /// behind them. What still waits once a round lets none go, or the
    /// rounds are done, is written with its updates rolled back, so that
    /// the first write-back after the next flush finds it ready.
    fn next_round(&mut self, cache: &mut Cache, mut waiting: Vec<u64>) -> device::Result<()> {
        let Some(io) = self.io_mut() else { return Ok(()) };
        io.rounds -= 1;
        waiting.sort_unstable();
        waiting.retain(|&b| cache.is_dirty_meta(b));
        cache.write_blocks(self, &waiting, Waiting::HoldBack)?;
        let Some(io) = self.io_mut() else { return Ok(()) };
        let capacity = cache.capacity_blocks();
        if io.rolled.is_empty() {
            self.rounds_done(capacity);
        } else if io.rounds == 0 || io.rolled.len() == waiting.len() {
            let mut left: Vec<u64> = io.rolled.drain().collect();
            self.rounds_done(capacity);
            left.sort_unstable();
            cache.write_blocks(self, &left, Waiting::RollBack)?;
        } else {
            let by = io.rounds_by;
            self.flush_behind(cache, by)?;
        }
        Ok(())
    }

    /// A checkpoint's rounds are over: the next comes when held-back
    /// buffers fill half the cache again, or the shadows of changed
    /// metadata grow by a quarter of it past what this one left (or past
    /// half of it), whichever is first.
    fn rounds_done(&mut self, capacity: usize) {
        let shadows = self.shadows();
        let Some(io) = self.io_mut() else { return };
        io.rounds = 0;
        io.shadow_mark = (capacity / 2).max(shadows + capacity / 4);
    }

    /// Before an eviction makes room: retired buffers written once the
    /// cache is full, a flush behind the calls done with, and a
    /// checkpoint started once held-back buffers fill half the cache or
    /// the shadows pass their mark (a removal writes little and changes
    /// much); the flush in flight waited for rather than the cache (or
    /// the memory) overrun.
    pub fn before_room(&mut self, cache: &mut Cache) -> device::Result<()> {
        let Some(io) = self.io() else { return Ok(()) };
        let capacity = cache.capacity_blocks();
        let full = cache.buffers() >= capacity;
        if full && !io.retired.is_empty() {
            self.write_retired(cache)?;
        }
        self.poll_behind(cache)?;
        let shadows = self.shadows();
        let Some(io) = self.io() else { return Ok(()) };
        let held_full = cache.buffers() >= capacity && io.rolled.len() > capacity / 2;
        if matches!(io.behind, Behind::Idle) {
            if held_full || shadows > io.shadow_mark {
                let by = io.flushes_by;
                self.write_ready(cache)?;
                self.start_rounds(cache, by)?;
            }
        } else if (held_full && io.rolled.len() > capacity * 3 / 4) || shadows > io.shadow_mark + capacity / 2
        {
            self.await_behind(cache)?;
        }
        Ok(())
    }
}
