//! The buffer cache: 4 KiB blocks of the device kept in memory, written
//! back later (the policies decide which writes cannot wait). Bounded:
//! past its capacity the least recently used buffer goes, written first
//! if dirty. Write-back is sorted by block number and coalesces runs of
//! neighbours into one request, as a disk wants it.
//!
//! Dirty buffers are file data or metadata. A full write-back writes the
//! data first, then the metadata; under the `log` policy data goes in
//! place outside the log (`Device::write_unlogged`) and metadata joins the
//! open transaction, which the flush after it commits.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;
use std::time::Duration;

use device::{AlignedBuf, Clock, Device, DeviceError};

use crate::commits::Commits;
use crate::format::BLOCK_BYTES;
use crate::policy::{Ordering, Plan, Waiting};
use crate::softdep::Blocks;

/// Dirty buffers written together when an eviction finds a dirty one.
const EVICT_BATCH_BLOCKS: usize = 1024;

/// Blocks a write-back request carries at most (1 MiB).
const RUN_BLOCKS_MAX: usize = 256;

/// Under `softdep`, rounds of a checkpoint at most: each lets a level of
/// a new tree go (maps and data, inodes, the entries naming them, ...).
const ROUNDS_MAX: usize = 4;

/// Under `softdep`, the flush a checkpoint issued and the calls go on
/// beside.
enum Behind {
    /// None in flight.
    Idle,
    /// A thread flushing the device; what the flush returned.
    Thread(std::thread::JoinHandle<device::Result<()>>),
    /// Issued at once, but what waited on it run only by the next call
    /// that needs it done (`Commits::Deferred`): the calls in between go
    /// on as beside a flusher thread, in an order the same from run to
    /// run, and a crash between finds the flush done.
    Deferred,
}

struct Buf {
    data: AlignedBuf,
    /// When it was first dirtied since it was last written; None: clean.
    dirtied: Option<Duration>,
    tick: u64,
}

/// Counters, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Blocks written back (delayed writes), in how many requests.
    pub blocks_written: u64,
    pub write_requests: u64,
    /// Synchronous writes: a block written and the device flushed at once.
    pub sync_writes: u64,
    pub flushes: u64,
    pub evictions: u64,
}

pub struct Cache {
    dev: Arc<dyn Device>,
    bufs: HashMap<u64, Buf>,
    /// tick -> block: the least recently used first.
    lru: BTreeMap<u64, u64>,
    /// Dirty metadata and dirty file data, by block.
    dirty: BTreeSet<u64>,
    dirty_data: BTreeSet<u64>,
    tick: u64,
    capacity_blocks: usize,
    /// File data goes outside the device's log (the `log` policy).
    unlogged_data: bool,
    /// Metadata blocks written since the last flush: what the open
    /// transaction of a log holds at most.
    pub meta_since_flush: usize,
    pub stats: CacheStats,
    /// Under `softdep`: dirty buffers an eviction held back, or whose last
    /// write held an update back; writing them again is worth it only
    /// after a flush.
    rolled: HashSet<u64>,
    /// Under `softdep`: freed directory blocks still to be written once (a
    /// removal in one waits for the disk's copy to lose its entry), then
    /// dropped: written in batches, so that they neither crowd the live
    /// buffers out nor go one request each.
    retired: HashSet<u64>,
    /// Under `softdep` with a flusher thread: the thread writing a batch
    /// of retired buffers while the calls go on (`write_retired_behind`);
    /// every flush waits for it first.
    retiring: Option<std::thread::JoinHandle<device::Result<()>>>,
    /// Where buffers' ages are read: the wall clock, or a simulated disk's.
    clock: Clock,
    /// Where a run of neighbours is gathered to go in one request: made
    /// once, not a megabyte made, zeroed and unmapped per request.
    staging: AlignedBuf,
    /// Under `softdep`: who issues a checkpoint's flushes, the one in
    /// flight, and the checkpoint's rounds left.
    flushes_by: Commits,
    behind: Behind,
    rounds: usize,
    rounds_by: Commits,
    /// Under `softdep`: shadows past this many start a checkpoint.
    shadow_mark: usize,
    /// Under `softdep`: blocks with no buffer that a rule looked at
    /// (`Blocks::memory`: a directory's inode block, say, which the
    /// rules look at on every pass over its entries), kept so that the
    /// next look, or the load that gives it a buffer, reads nothing.
    /// Only blocks with no buffer are here: one leaves when it gets one
    /// (`load`), so a copy here is what both the disk and memory hold.
    peeked: RefCell<HashMap<u64, AlignedBuf>>,
}

/// A buffer used again is moved to the head of the LRU only if it is
/// not among the last capacity / this many moved there.
const PROMOTED_WITHIN: u64 = 8;

/// At most this many blocks are kept looked at (`Cache::peeked`); past
/// them the list starts again.
const PEEKED_MAX: usize = 1024;

impl Blocks for Cache {
    fn memory(&self, block: u64) -> Option<Cow<'_, [u8]>> {
        if let Some(buf) = self.bufs.get(&block) {
            return Some(Cow::Borrowed(&buf.data[..]));
        }
        let mut peeked = self.peeked.borrow_mut();
        if let Some(data) = peeked.get(&block) {
            return Some(Cow::Owned(data.to_vec()));
        }
        let mut data = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(self.dev.buffer_align()));
        self.dev.read_at(&mut data, block * BLOCK_BYTES as u64).ok()?;
        let bytes = data.to_vec();
        keep_peeked(&mut peeked, block, data);
        Some(Cow::Owned(bytes))
    }

    fn cached(&self, block: u64) -> Option<&[u8]> {
        self.bufs.get(&block).map(|b| &b.data[..])
    }

    fn dirty(&self, block: u64) -> bool {
        self.is_dirty(&block)
    }
}

impl Drop for Cache {
    /// Retired buffers being written are waited for: nothing is written
    /// once the cache is gone.
    fn drop(&mut self) {
        let _ = self.await_retiring();
    }
}

impl Cache {
    /// A cache of `capacity_bytes` over `dev`; `unlogged_data`: file data
    /// is written with `write_unlogged` (the `log` policy); buffers' ages
    /// on `clock`.
    pub fn new(dev: Arc<dyn Device>, capacity_bytes: u64, unlogged_data: bool, clock: Clock) -> Cache {
        let capacity_blocks = (capacity_bytes / BLOCK_BYTES as u64).max(64) as usize;
        let staging = AlignedBuf::zeroed(RUN_BLOCKS_MAX * BLOCK_BYTES, BLOCK_BYTES.max(dev.buffer_align()));
        Cache {
            dev,
            bufs: HashMap::default(),
            lru: BTreeMap::new(),
            dirty: BTreeSet::new(),
            dirty_data: BTreeSet::new(),
            tick: 0,
            capacity_blocks,
            unlogged_data,
            meta_since_flush: 0,
            stats: CacheStats::default(),
            rolled: HashSet::default(),
            retired: HashSet::default(),
            retiring: None,
            clock,
            staging,
            flushes_by: Commits::Caller,
            behind: Behind::Idle,
            rounds: 0,
            rounds_by: Commits::Caller,
            shadow_mark: capacity_blocks / 2,
            peeked: RefCell::new(HashMap::default()),
        }
    }

    /// Under `softdep`: who issues a checkpoint's flushes (by default the
    /// caller, at once).
    pub fn set_flushes_by(&mut self, by: Commits) {
        self.flushes_by = by;
    }

    /// The time on the mount's clock.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Dirty metadata buffers.
    pub fn dirty_meta(&self) -> usize {
        self.dirty.len()
    }

    /// Dirty file-data buffers.
    pub fn dirty_data(&self) -> usize {
        self.dirty_data.len()
    }

    fn is_dirty(&self, block: &u64) -> bool {
        self.dirty.contains(block) || self.dirty_data.contains(block)
    }

    fn touch(&mut self, block: u64) {
        let recent = self.tick.saturating_sub(self.capacity_blocks as u64 / PROMOTED_WITHIN);
        let Some(buf) = self.bufs.get_mut(&block) else { return };
        if buf.tick > recent {
            // Among the most recently used already: left where it is (a
            // block worked on is touched again and again, and moving it
            // costs two changes to the ordered map).
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        {
            self.lru.remove(&buf.tick);
            buf.tick = tick;
            self.lru.insert(tick, block);
        }
    }

    /// Brings `block` in (reading it unless `fresh`, which zeroes it).
    fn load(&mut self, order: &mut Ordering, block: u64, fresh: bool) -> device::Result<()> {
        if self.bufs.contains_key(&block) {
            self.stats.hits += 1;
            if fresh {
                let buf = self.bufs.get_mut(&block).map(|b| &mut b.data[..]);
                buf.into_iter().for_each(|d| d.fill(0));
            }
            self.touch(block);
            return Ok(());
        }
        self.make_room(order)?;
        // A copy a rule looked at is what the disk holds: no read.
        let (mut data, read) = match self.peeked.get_mut().remove(&block) {
            Some(data) if !fresh => (data, false),
            _ => (AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(self.dev.buffer_align())), !fresh),
        };
        if !fresh {
            self.stats.misses += 1;
        }
        if read {
            self.dev.read_at(&mut data, block * BLOCK_BYTES as u64)?;
        }
        self.tick += 1;
        self.bufs.insert(block, Buf { data, dirtied: None, tick: self.tick });
        self.lru.insert(self.tick, block);
        Ok(())
    }

    /// The bytes of `block`.
    pub fn read(&mut self, order: &mut Ordering, block: u64) -> device::Result<&[u8]> {
        self.load(order, block, false)?;
        Ok(&self.bufs[&block].data)
    }

    /// The bytes of `block`, to change: the buffer becomes dirty.
    pub fn modify(&mut self, order: &mut Ordering, block: u64) -> device::Result<&mut [u8]> {
        self.load(order, block, false)?;
        order.before_change(block, &self.bufs[&block].data);
        Ok(self.dirty_buf(block))
    }

    /// A newly allocated block: zeroed without reading, dirty.
    pub fn fresh(&mut self, order: &mut Ordering, block: u64) -> device::Result<&mut [u8]> {
        if let Some(buf) = self.bufs.get(&block) {
            // Whatever a write of it not yet flushed carried.
            order.before_change(block, &buf.data);
        }
        self.load(order, block, true)?;
        order.fresh(block);
        Ok(self.dirty_buf(block))
    }

    /// The bytes of file data `block`, to change: dirty, and written as
    /// file data.
    pub fn modify_data(&mut self, order: &mut Ordering, block: u64) -> device::Result<&mut [u8]> {
        self.load(order, block, false)?;
        order.data(block);
        self.dirty.remove(&block);
        self.dirty_data.insert(block);
        Ok(self.mark(block))
    }

    fn dirty_buf(&mut self, block: u64) -> &mut [u8] {
        self.dirty_data.remove(&block);
        self.dirty.insert(block);
        self.mark(block)
    }

    fn mark(&mut self, block: u64) -> &mut [u8] {
        let clock = &self.clock;
        let buf = self.bufs.get_mut(&block).expect("loaded just before");
        buf.dirtied.get_or_insert_with(|| clock.now());
        &mut buf.data
    }

    /// A freed block: its buffer dropped unwritten (whatever it held is
    /// no longer anybody's).
    pub fn discard(&mut self, block: u64) {
        // Freed: whatever it holds next is no longer what a rule saw.
        let peeked = self.peeked.get_mut();
        if !peeked.is_empty() {
            peeked.remove(&block);
        }
        self.take(block);
    }

    /// `block`'s buffer, out of the cache (dirty or not).
    fn take(&mut self, block: u64) -> Option<Buf> {
        // Held back, retired and dirty buffers are all in `bufs`: a block
        // without a buffer (a freed block of file data, mostly) is in none.
        let buf = self.bufs.remove(&block)?;
        self.rolled.remove(&block);
        self.retired.remove(&block);
        self.lru.remove(&buf.tick);
        self.dirty.remove(&block);
        self.dirty_data.remove(&block);
        Some(buf)
    }

    /// A freed block whose buffer is to be written once more, as memory
    /// holds it, before it is dropped (`retired`); one that is clean is
    /// dropped at once.
    pub fn retire(&mut self, order: &mut Ordering, block: u64) -> device::Result<()> {
        if !self.dirty.contains(&block) {
            self.discard(block);
            return Ok(());
        }
        self.retired.insert(block);
        if self.retired.len() >= EVICT_BATCH_BLOCKS {
            self.write_retired(order)?;
        }
        Ok(())
    }

    /// Writes the retired buffers, sorted and coalesced, and drops them.
    fn write_retired(&mut self, order: &mut Ordering) -> device::Result<()> {
        // One written since (by an eviction) and dropped needs nothing more.
        self.retired.retain(|b| self.dirty.contains(b));
        let mut batch: Vec<u64> = self.retired.iter().copied().collect();
        batch.sort_unstable();
        if self.flushes_by == Commits::Thread {
            batch = self.write_retired_behind(order, batch)?;
        }
        self.write_blocks(order, &batch, Waiting::RollBack)?;
        for block in batch {
            if !self.is_dirty(&block) {
                self.discard(block);
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
    fn write_retired_behind(&mut self, order: &mut Ordering, batch: Vec<u64>) -> device::Result<Vec<u64>> {
        self.await_retiring()?;
        if !order.holds_back() {
            return Ok(batch);
        }
        let (whole, rest): (Vec<u64>, Vec<u64>) =
            batch.into_iter().partition(|b| order.goes_as_memory(self, *b, &self.bufs[b].data));
        let mut writes = Vec::with_capacity(whole.len());
        for &block in &whole {
            order.assert_rules(self, block, &self.bufs[&block].data);
        }
        for block in whole {
            order.written(block, false, None);
            if let Some(buf) = self.take(block) {
                writes.push((block, buf.data));
            }
        }
        if writes.is_empty() {
            return Ok(rest);
        }
        let run_max = self.run_max();
        let requests: usize =
            writes.chunk_by(|a, b| b.0 == a.0 + 1).map(|run| run.len().div_ceil(run_max)).sum();
        self.meta_since_flush += writes.len();
        self.stats.blocks_written += writes.len() as u64;
        self.stats.write_requests += requests as u64;
        let (send, receive) = std::sync::mpsc::channel();
        let dev = Arc::clone(&self.dev);
        let thread = std::thread::Builder::new()
            .name("ffs-retired".into())
            .spawn(move || receive.recv().map_or(Ok(()), |writes| write_runs(dev.as_ref(), writes, run_max)));
        match thread {
            Ok(thread) => {
                self.retiring = Some(thread);
                send.send(writes).expect("the thread waits for its writes");
            }
            // No thread to be had: written here.
            Err(_) => write_runs(self.dev.as_ref(), writes, run_max)?,
        }
        Ok(rest)
    }

    /// Waits for the retired buffers being written behind the calls.
    fn await_retiring(&mut self) -> device::Result<()> {
        let Some(thread) = self.retiring.take() else { return Ok(()) };
        thread.join().unwrap_or_else(|_| {
            Err(DeviceError::Flush {
                device: self.dev.name().to_string(),
                source: std::io::Error::other("the thread writing retired buffers panicked"),
            })
        })
    }

    /// Blocks a request carries at most.
    fn run_max(&self) -> usize {
        RUN_BLOCKS_MAX.min((self.dev.max_request_bytes() / BLOCK_BYTES as u64).max(1) as usize)
    }

    /// Writes `block` now and makes it durable (a synchronous write: the
    /// policies' ordering points).
    pub fn write_now(&mut self, order: &mut Ordering, block: u64) -> device::Result<()> {
        if self.is_dirty(&block) {
            self.write_blocks(order, &[block], Waiting::RollBack)?;
            self.stats.blocks_written -= 1;
            self.stats.write_requests -= 1;
        }
        self.flush(order)?;
        self.stats.sync_writes += 1;
        Ok(())
    }

    /// The device the cache reads and writes.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.dev
    }

    /// The alignment the device asks of buffers.
    pub fn buffer_align(&self) -> usize {
        self.dev.buffer_align()
    }

    /// Writes a superblock (`buf`, at byte `at`) past the cache and makes
    /// it and every write before it durable (a synchronous write).
    pub fn write_superblock_now(&mut self, order: &mut Ordering, buf: &[u8], at: u64) -> device::Result<()> {
        self.dev.write_at(buf, at)?;
        self.flush(order)?;
        self.stats.sync_writes += 1;
        Ok(())
    }

    /// Makes every write so far durable (under `log`, commits); under
    /// `softdep`, then runs the work that waited on those writes.
    pub fn flush(&mut self, order: &mut Ordering) -> device::Result<()> {
        self.rounds = 0;
        self.await_behind(order)?;
        self.dev.flush()?;
        self.stats.flushes += 1;
        self.meta_since_flush = 0;
        self.rolled.clear();
        order.flushed(self);
        self.rounds_done(order);
        Ok(())
    }

    /// Writes every dirty buffer, the file data first, each kind in block
    /// order with neighbours together; `flush`: then makes them durable
    /// (under the `log` policy, commits the metadata).
    pub fn write_back(&mut self, order: &mut Ordering, flush: bool) -> device::Result<()> {
        let data: Vec<u64> = self.dirty_data.iter().copied().collect();
        self.write_blocks(order, &data, Waiting::RollBack)?;
        let meta: Vec<u64> = self.dirty.iter().copied().collect();
        self.write_blocks(order, &meta, Waiting::RollBack)?;
        let retired: Vec<u64> = self.retired.iter().copied().filter(|b| !self.is_dirty(b)).collect();
        for block in retired {
            self.discard(block);
        }
        if flush {
            self.flush(order)?;
        }
        Ok(())
    }

    /// Writes those of `blocks` that are dirty, the file data first, each
    /// kind in block order with neighbours together (one file's share of
    /// a write-back: an fsync's); no flush. Returns the blocks written.
    pub fn write_listed(&mut self, order: &mut Ordering, blocks: &[u64]) -> device::Result<usize> {
        let of = |set: &BTreeSet<u64>| -> Vec<u64> {
            let mut listed: Vec<u64> = blocks.iter().copied().filter(|b| set.contains(b)).collect();
            listed.sort_unstable();
            listed.dedup();
            listed
        };
        let (data, meta) = (of(&self.dirty_data), of(&self.dirty));
        self.write_blocks(order, &data, Waiting::RollBack)?;
        self.write_blocks(order, &meta, Waiting::RollBack)?;
        debug_assert!(data.iter().all(|b| !self.dirty_data.contains(b)), "file data is never held back");
        Ok(data.len() + meta.len())
    }

    /// Under `log`: the dirty metadata into the open transaction, the
    /// file data left dirty (the commit writes it, and flushes it, before
    /// the records that point at it).
    pub fn write_back_meta(&mut self, order: &mut Ordering) -> device::Result<()> {
        let meta: Vec<u64> = self.dirty.iter().copied().collect();
        self.write_blocks(order, &meta, Waiting::RollBack)
    }

    /// Writes the buffers dirty for longer than `age` (the syncer's pass).
    pub fn write_back_older(&mut self, order: &mut Ordering, age: Duration) -> device::Result<usize> {
        let now = self.clock.now();
        let old = |set: &BTreeSet<u64>| -> Vec<u64> {
            (set.iter())
                .filter(|b| self.bufs[b].dirtied.is_some_and(|t| now.saturating_sub(t) >= age))
                .copied()
                .collect()
        };
        let (data, meta) = (old(&self.dirty_data), old(&self.dirty));
        self.write_blocks(order, &data, Waiting::RollBack)?;
        self.write_blocks(order, &meta, Waiting::RollBack)?;
        Ok(data.len() + meta.len())
    }

    /// Writes `blocks` (sorted, dirty) in runs of neighbours of one kind.
    /// A run carries at most 1 MiB, and no more than the device takes in
    /// one request (a block log's transaction limit).
    ///
    /// Under `softdep` a metadata block goes out as its dependencies allow
    /// (`waiting`: updates rolled back in the copy written, or the block
    /// held back); one rolled back or held back stays dirty.
    fn write_blocks(&mut self, order: &mut Ordering, blocks: &[u64], waiting: Waiting) -> device::Result<()> {
        let run_max = self.run_max();
        let mut images: HashMap<u64, AlignedBuf> = HashMap::default();
        // Blocks not written now: held back, or whose safe copy is what
        // their last write carried already (they wait on something else:
        // writing them again changes nothing).
        let mut held: Vec<u64> = Vec::new();
        if order.holds_back() {
            for &b in blocks.iter().filter(|b| self.dirty.contains(b)) {
                match order.plan(self, b, &self.bufs[&b].data, waiting) {
                    Plan::AsMemory => {}
                    Plan::Hold => held.push(b),
                    Plan::Image(image) => {
                        images.insert(b, image);
                    }
                }
            }
        }
        let kept;
        let blocks = if held.is_empty() {
            blocks
        } else {
            self.rolled.extend(&held);
            let skip: HashSet<u64> = held.iter().copied().collect();
            kept = (blocks.iter()).filter(|b| !skip.contains(b)).copied().collect::<Vec<u64>>();
            &kept[..]
        };
        if cfg!(debug_assertions) && order.holds_back() {
            for &b in blocks.iter().filter(|b| self.dirty.contains(b)) {
                let image = images.get(&b).map_or(&self.bufs[&b].data[..], |i| &i[..]);
                order.assert_rules(self, b, image);
            }
        }
        let mut i = 0;
        while i < blocks.len() {
            let first = blocks[i];
            let data = self.dirty_data.contains(&first);
            let mut run = 1;
            while i + run < blocks.len()
                && blocks[i + run] == first + run as u64
                && run < run_max
                && self.dirty_data.contains(&blocks[i + run]) == data
            {
                run += 1;
            }
            let unlogged = data && self.unlogged_data;
            let offset = first * BLOCK_BYTES as u64;
            let write = |dev: &dyn Device, buf: &[u8]| {
                if unlogged {
                    dev.write_unlogged(buf, offset)
                } else {
                    dev.write_at(buf, offset)
                }
            };
            if run == 1 && !images.contains_key(&first) {
                write(self.dev.as_ref(), &self.bufs[&first].data)?;
            } else {
                let staged = &mut self.staging[..run * BLOCK_BYTES];
                for (k, chunk) in staged.chunks_mut(BLOCK_BYTES).enumerate() {
                    let b = first + k as u64;
                    match images.get(&b) {
                        Some(image) => chunk.copy_from_slice(image),
                        None => chunk.copy_from_slice(&self.bufs[&b].data),
                    }
                }
                write(self.dev.as_ref(), staged)?;
            }
            for &b in &blocks[i..i + run] {
                let image = images.remove(&b);
                let rolled_back = image.is_some();
                if order.holds_back() {
                    order.written(b, data, image);
                    if rolled_back {
                        // Written without some update: it goes again.
                        self.rolled.insert(b);
                        continue;
                    }
                    self.rolled.remove(&b);
                }
                if let Some(buf) = self.bufs.get_mut(&b) {
                    buf.dirtied = None;
                }
                self.dirty.remove(&b);
                self.dirty_data.remove(&b);
            }
            if !data {
                self.meta_since_flush += run;
            }
            self.stats.blocks_written += run as u64;
            self.stats.write_requests += 1;
            i += run;
        }
        Ok(())
    }

    /// Under `softdep`, a checkpoint made at once (a sync's first pass):
    /// every dirty buffer that can go complete written (file data,
    /// bitmaps, metadata whose dependencies are on the disk), then a
    /// flush, and again for those held back until none is left or a round
    /// lets none go (`next_round`).
    pub fn checkpoint(&mut self, order: &mut Ordering) -> device::Result<()> {
        self.rounds = 0;
        self.await_behind(order)?;
        self.write_ready(order)?;
        if !self.rolled.is_empty() {
            self.start_rounds(order, Commits::Caller)?;
        }
        Ok(())
    }

    /// A checkpoint's rounds, each flush issued `by`: the first now.
    fn start_rounds(&mut self, order: &mut Ordering, by: Commits) -> device::Result<()> {
        self.rounds = ROUNDS_MAX;
        self.rounds_by = by;
        self.flush_behind(order, by)
    }

    /// Every dirty buffer that can go complete, written.
    fn write_ready(&mut self, order: &mut Ordering) -> device::Result<()> {
        let data: Vec<u64> = self.dirty_data.iter().copied().collect();
        self.write_blocks(order, &data, Waiting::HoldBack)?;
        if !self.retired.is_empty() {
            self.write_retired(order)?;
        }
        let meta: Vec<u64> = (self.dirty.iter()).filter(|b| !self.rolled.contains(b)).copied().collect();
        self.write_blocks(order, &meta, Waiting::HoldBack)
    }

    /// Issues a flush of the writes so far (`by`: by the caller, what
    /// waited on it run at once; on a thread while the calls go on; or by
    /// the caller, what waited on it run by the next call that needs it
    /// done). One is in flight at most: the last is waited for first.
    fn flush_behind(&mut self, order: &mut Ordering, by: Commits) -> device::Result<()> {
        self.await_behind(order)?;
        order.seal();
        self.stats.flushes += 1;
        let thread = match by {
            Commits::Thread => {
                let dev = Arc::clone(&self.dev);
                std::thread::Builder::new().name("ffs-flusher".into()).spawn(move || dev.flush()).ok()
            }
            Commits::Caller | Commits::Deferred => None,
        };
        self.behind = match (thread, by) {
            (Some(thread), _) => Behind::Thread(thread),
            (None, Commits::Deferred) => {
                self.dev.flush()?;
                Behind::Deferred
            }
            // The caller's (or no thread to be had): done at once.
            (None, _) => {
                self.dev.flush()?;
                return self.behind_flushed(order);
            }
        };
        Ok(())
    }

    /// Waits for the flush in flight, then runs what waited on it.
    fn await_behind(&mut self, order: &mut Ordering) -> device::Result<()> {
        self.await_retiring()?;
        match std::mem::replace(&mut self.behind, Behind::Idle) {
            Behind::Idle => return Ok(()),
            Behind::Thread(thread) => thread.join().unwrap_or_else(|_| {
                Err(DeviceError::Flush {
                    device: self.dev.name().to_string(),
                    source: std::io::Error::other("the flusher thread panicked"),
                })
            })?,
            Behind::Deferred => {}
        }
        self.behind_flushed(order)
    }

    /// The flush in flight, if one is and it returned, done with (what
    /// waited on it run, the checkpoint gone on). Called at each eviction,
    /// and by the file system at each call.
    pub fn poll_behind(&mut self, order: &mut Ordering) -> device::Result<()> {
        match &self.behind {
            Behind::Thread(thread) if thread.is_finished() => self.await_behind(order),
            _ => Ok(()),
        }
    }

    /// A flush issued at the last seal returned: the work that waited on
    /// the writes before it runs, and a checkpoint goes on.
    fn behind_flushed(&mut self, order: &mut Ordering) -> device::Result<()> {
        let waiting: Vec<u64> = self.rolled.drain().collect();
        order.sealed_flushed(self);
        if self.rounds > 0 {
            self.next_round(order, waiting)?;
        }
        Ok(())
    }

    /// A checkpoint's next round: the buffers held back written if they
    /// can go now, and if some did and some still wait, another flush
    /// behind them. What still waits once a round lets none go, or the
    /// rounds are done, is written with its updates rolled back, so that
    /// the first write-back after the next flush finds it ready.
    fn next_round(&mut self, order: &mut Ordering, mut waiting: Vec<u64>) -> device::Result<()> {
        self.rounds -= 1;
        waiting.sort_unstable();
        waiting.retain(|b| self.dirty.contains(b));
        self.write_blocks(order, &waiting, Waiting::HoldBack)?;
        if self.rolled.is_empty() {
            self.rounds_done(order);
        } else if self.rounds == 0 || self.rolled.len() == waiting.len() {
            self.rounds_done(order);
            let mut left: Vec<u64> = self.rolled.drain().collect();
            left.sort_unstable();
            self.write_blocks(order, &left, Waiting::RollBack)?;
        } else {
            self.flush_behind(order, self.rounds_by)?;
        }
        Ok(())
    }

    /// What an eviction does with a block that cannot go complete: held
    /// back for a checkpoint's flush behind the calls; when the caller
    /// flushes (a modeled disk), rolled back as the syncer would have it
    /// (held back, it waits for the syncer's pass of blocks 30 s dirty:
    /// softdep's modeled tar took 5:54.29 so, 5:27.21 rolled back).
    fn evicting(&self) -> Waiting {
        match self.flushes_by {
            Commits::Caller => Waiting::RollBack,
            Commits::Thread | Commits::Deferred => Waiting::HoldBack,
        }
    }

    /// A checkpoint's rounds are over: the next comes when held-back
    /// buffers fill half the cache again, or the shadows of changed
    /// metadata grow by a quarter of it past what this one left (or past
    /// half of it), whichever is first.
    fn rounds_done(&mut self, order: &mut Ordering) {
        self.rounds = 0;
        let shadows = order.shadows();
        self.shadow_mark = (self.capacity_blocks / 2).max(shadows + self.capacity_blocks / 4);
    }

    /// Keeps the cache within its capacity: the least recently used
    /// buffers go, the dirty ones written first.
    /// Under `softdep`, a buffer that cannot go complete is held back
    /// (dirty, passed over) until a checkpoint lets it go (the syncer's
    /// flush, or one here once such buffers fill half the cache).
    fn make_room(&mut self, order: &mut Ordering) -> device::Result<()> {
        if self.bufs.len() >= self.capacity_blocks && !self.retired.is_empty() {
            self.write_retired(order)?;
        }
        if order.holds_back() {
            self.poll_behind(order)?;
            let full =
                self.bufs.len() >= self.capacity_blocks && self.rolled.len() > self.capacity_blocks / 2;
            let shadows = order.shadows();
            if matches!(self.behind, Behind::Idle) {
                if full || shadows > self.shadow_mark {
                    // A checkpoint: what can go complete is written, and a
                    // flush goes behind it while the calls go on. Held-back
                    // buffers filling the cache, or shadows the memory
                    // (a removal writes little and changes much).
                    self.write_ready(order)?;
                    self.start_rounds(order, self.flushes_by)?;
                }
            } else if (full && self.rolled.len() > self.capacity_blocks * 3 / 4)
                || shadows > self.shadow_mark + self.capacity_blocks / 2
            {
                // The flush in flight is waited for rather than the cache
                // (or the memory) overrun.
                self.await_behind(order)?;
            }
        }
        let mut passed = 0;
        while self.bufs.len() >= self.capacity_blocks {
            let Some((&tick, &block)) = self.lru.iter().next() else { break };
            if self.rolled.contains(&block) {
                self.touch(block);
                passed += 1;
                if passed > self.bufs.len() {
                    break;
                }
                continue;
            }
            if self.is_dirty(&block) {
                // Write a batch of the oldest dirty buffers, sorted and
                // coalesced, rather than one block per eviction.
                let mut batch: Vec<u64> = self
                    .lru
                    .values()
                    .filter(|b| self.is_dirty(b) && !self.rolled.contains(b))
                    .take(EVICT_BATCH_BLOCKS)
                    .copied()
                    .collect();
                batch.sort_unstable();
                self.write_blocks(order, &batch, self.evicting())?;
                if self.is_dirty(&block) {
                    continue;
                }
            }
            self.lru.remove(&tick);
            let buf = self.bufs.remove(&block);
            self.retired.remove(&block);
            self.stats.evictions += 1;
            // One the disk's copy of is still shadowed (its write not yet
            // flushed) is what the rules look at next: kept looked at.
            if let Some(buf) = buf.filter(|_| order.shadowed(block)) {
                keep_peeked(self.peeked.get_mut(), block, buf.data);
            }
        }
        Ok(())
    }
}

/// Keeps `data`, what both the disk and memory hold for `block` (which
/// has no buffer), looked at (`Cache::peeked`).
fn keep_peeked(peeked: &mut HashMap<u64, AlignedBuf>, block: u64, data: AlignedBuf) {
    if peeked.len() >= PEEKED_MAX {
        peeked.clear();
    }
    peeked.insert(block, data);
}

/// Writes `blocks` (sorted), neighbours together in requests of at most
/// `run_max` blocks.
fn write_runs(dev: &dyn Device, blocks: Vec<(u64, AlignedBuf)>, run_max: usize) -> device::Result<()> {
    let mut staging: Option<AlignedBuf> = None;
    for run in blocks.chunk_by(|a, b| b.0 == a.0 + 1) {
        for piece in run.chunks(run_max) {
            let offset = piece[0].0 * BLOCK_BYTES as u64;
            if let [(_, data)] = piece {
                dev.write_at(data, offset)?;
                continue;
            }
            let staged = staging.get_or_insert_with(|| {
                AlignedBuf::zeroed(run_max * BLOCK_BYTES, BLOCK_BYTES.max(dev.buffer_align()))
            });
            let staged = &mut staged[..piece.len() * BLOCK_BYTES];
            for (chunk, (_, data)) in staged.chunks_mut(BLOCK_BYTES).zip(piece) {
                chunk.copy_from_slice(data);
            }
            dev.write_at(staged, offset)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use device::MemDevice;

    use super::*;

    /// A block with no buffer that a rule looks at is read from the device
    /// once: the next look, and the load that gives it a buffer, use the
    /// copy. (The device's copy is changed underneath after the first
    /// look, which only a second read would see.)
    #[test]
    fn a_block_a_rule_looked_at_is_read_once() {
        let mem = Arc::new(MemDevice::new(1 << 20).unwrap());
        let dev: Arc<dyn Device> = mem.clone();
        let at = 5 * BLOCK_BYTES as u64;
        let block = |byte: u8| {
            let mut buf = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES);
            buf.fill(byte);
            buf
        };
        dev.write_at(&block(1), at).unwrap();
        let mut cache = Cache::new(Arc::clone(&dev), 1 << 20, false, Clock::Wall);
        assert_eq!(cache.memory(5).unwrap()[0], 1);
        dev.write_at(&block(2), at).unwrap();
        assert_eq!(cache.memory(5).unwrap()[0], 1, "looked at again without a read");
        assert_eq!(cache.read(&mut Ordering::Async, 5).unwrap()[0], 1, "loaded without a read");
        assert!(cache.peeked.get_mut().is_empty(), "a block with a buffer is not kept looked at");
    }

    /// The least recently used buffer goes first: one used again since
    /// it was loaded stays, though a buffer among the most recent is not
    /// moved on every use.
    #[test]
    fn a_buffer_used_again_outlives_the_ones_loaded_after_it() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
        let mut cache = Cache::new(dev, 64 * BLOCK_BYTES as u64, false, Clock::Wall);
        for b in 0..64 {
            cache.read(&mut Ordering::Async, b).unwrap();
        }
        cache.read(&mut Ordering::Async, 0).unwrap();
        cache.read(&mut Ordering::Async, 63).unwrap();
        cache.read(&mut Ordering::Async, 64).unwrap();
        assert!(cache.cached(0).is_some(), "used again: kept");
        assert!(cache.cached(1).is_none(), "the least recently used: evicted");
        assert!(cache.cached(63).is_some(), "among the most recent: kept");
    }
}
