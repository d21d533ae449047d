//! The buffer cache: 4 KiB blocks of the device kept in memory, written
//! back later (the policies decide which writes cannot wait). Bounded:
//! past its capacity the least recently used buffer goes, written first
//! if dirty. Write-back is sorted by block number and coalesces runs of
//! neighbours into one request, as a disk wants it.
//!
//! File data goes first when room is needed, while it holds more than an
//! eighth of the cache: data written once (an extraction's) does not push
//! out the metadata that every call reads and changes again.
//!
//! Dirty buffers are file data or metadata. A full write-back writes the
//! data first, then the metadata; under the `log` policy data goes in
//! place outside the log (`Device::write_unlogged`) and metadata joins the
//! open transaction, which the flush after it commits.
//!
//! The policy is not kept here: every call that may write takes the
//! mount's `&mut Ordering` and asks it (`policy/`) what each metadata
//! write carries, tells it what was written and flushed, and lets it run
//! its own schedule before a flush and an eviction (soft updates'
//! checkpoints and held-back buffers, `policy/writeback.rs`).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;
use std::time::Duration;

use device::{AlignedBuf, Clock, Device};

use crate::delayed::DelayedBlocks;
use crate::format::BLOCK_BYTES;
use crate::policy::{Ordering, Plan, Waiting};
use crate::softdep::Blocks;

/// Dirty buffers written together when an eviction finds a dirty one
/// (and retired buffers, `policy/writeback.rs`).
pub const EVICT_BATCH_BLOCKS: usize = 1024;

/// Blocks a write-back request carries at most (1 MiB).
const RUN_BLOCKS_MAX: usize = 256;

struct Buf {
    data: AlignedBuf,
    /// When it was first dirtied since it was last written; None: clean.
    dirtied: Option<Duration>,
    tick: u64,
    /// Last changed as file data (in `Cache::data_lru` too).
    file_data: bool,
}

/// Counters, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Blocks written back (delayed writes), in how many requests.
    pub blocks_written: u64,
    /// Of those, blocks of file data.
    pub data_blocks_written: u64,
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
    /// The same for the buffers last changed as file data: an eviction
    /// takes them first while they are more than `DATA_KEPT_SHARE` of
    /// the cache, so that file data written once (an extraction's) does
    /// not push out the metadata every call reads and changes again.
    /// FFS writes a full data block behind at once (`bawrite`) for the
    /// same reason.
    data_lru: BTreeMap<u64, u64>,
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
    /// Where buffers' ages are read: the wall clock, or a simulated disk's.
    clock: Clock,
    /// Where a run of neighbours is gathered to go in one request: made
    /// once, not a megabyte made, zeroed and unmapped per request.
    staging: AlignedBuf,
    /// Under `softdep`: blocks with no buffer that a rule looked at
    /// (`Blocks::memory`: a directory's inode block, say, which the
    /// rules look at on every pass over its entries), kept so that the
    /// next look, or the load that gives it a buffer, reads nothing.
    /// Only blocks with no buffer are here: one leaves when it gets one
    /// (`load`), so a copy here is what both the disk and memory hold.
    peeked: RefCell<HashMap<u64, AlignedBuf>>,
    /// Under `log`: file data pointed to marked unwritten until written
    /// back (`delayed.rs`).
    pub delayed: DelayedBlocks,
}

/// File-data buffers go first on eviction while they are more than
/// 1/this of the cache.
const DATA_KEPT_SHARE: usize = 8;

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
        self.is_dirty(block)
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
            data_lru: BTreeMap::new(),
            dirty: BTreeSet::new(),
            dirty_data: BTreeSet::new(),
            tick: 0,
            capacity_blocks,
            unlogged_data,
            meta_since_flush: 0,
            stats: CacheStats::default(),
            clock,
            staging,
            peeked: RefCell::new(HashMap::default()),
            delayed: DelayedBlocks::default(),
        }
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

    pub fn is_dirty(&self, block: u64) -> bool {
        self.dirty.contains(&block) || self.dirty_data.contains(&block)
    }

    pub fn is_dirty_meta(&self, block: u64) -> bool {
        self.dirty.contains(&block)
    }

    /// The dirty file-data blocks, in order.
    pub fn dirty_data_list(&self) -> Vec<u64> {
        self.dirty_data.iter().copied().collect()
    }

    /// The dirty metadata blocks, in order.
    pub fn dirty_meta_list(&self) -> Vec<u64> {
        self.dirty.iter().copied().collect()
    }

    /// Buffers in the cache, and how many it keeps at most.
    pub fn buffers(&self) -> usize {
        self.bufs.len()
    }

    pub fn capacity_blocks(&self) -> usize {
        self.capacity_blocks
    }

    /// The bytes `block`'s buffer holds (it has one).
    pub fn data(&self, block: u64) -> &[u8] {
        &self.bufs[&block].data
    }

    /// `blocks` written past the cache in `requests` (the policy's own
    /// writes of buffers it took out), counted as a write-back's.
    pub fn count_written(&mut self, blocks: usize, requests: usize) {
        self.meta_since_flush += blocks;
        self.stats.blocks_written += blocks as u64;
        self.stats.write_requests += requests as u64;
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
            if buf.file_data {
                self.data_lru.remove(&buf.tick);
                self.data_lru.insert(tick, block);
            }
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
        self.bufs.insert(block, Buf { data, dirtied: None, tick: self.tick, file_data: false });
        self.lru.insert(self.tick, block);
        Ok(())
    }

    /// Gives `block`, which the caller knows holds zeros on the disk, a
    /// clean buffer of zeros without reading it (nothing, if it has a
    /// buffer).
    pub fn load_zeros(&mut self, order: &mut Ordering, block: u64) -> device::Result<()> {
        match self.bufs.contains_key(&block) {
            true => Ok(()),
            false => self.load(order, block, true),
        }
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
        self.set_file_data(block, true);
        Ok(self.mark(block))
    }

    fn dirty_buf(&mut self, block: u64) -> &mut [u8] {
        self.dirty_data.remove(&block);
        self.dirty.insert(block);
        self.set_file_data(block, false);
        self.mark(block)
    }

    /// Whether `block`'s buffer (it has one) is file data's, in
    /// `data_lru` or not.
    fn set_file_data(&mut self, block: u64, file_data: bool) {
        let buf = self.bufs.get_mut(&block).expect("loaded just before");
        if buf.file_data == file_data {
            return;
        }
        buf.file_data = file_data;
        match file_data {
            true => self.data_lru.insert(buf.tick, block),
            false => self.data_lru.remove(&buf.tick),
        };
    }

    fn mark(&mut self, block: u64) -> &mut [u8] {
        let clock = &self.clock;
        let buf = self.bufs.get_mut(&block).expect("loaded just before");
        buf.dirtied.get_or_insert_with(|| clock.now());
        &mut buf.data
    }

    /// A freed block: its buffer dropped unwritten (whatever it held is
    /// no longer anybody's), and the policy told.
    pub fn discard(&mut self, order: &mut Ordering, block: u64) {
        order.forget(block);
        self.drop_buffer(block);
    }

    /// [`Cache::discard`] where the policy is told by the caller (the
    /// policy's own calls).
    pub fn drop_buffer(&mut self, block: u64) {
        // Freed: whatever it holds next is no longer what a rule saw.
        let peeked = self.peeked.get_mut();
        if !peeked.is_empty() {
            peeked.remove(&block);
        }
        self.take(block);
    }

    /// `block`'s buffer, out of the cache (dirty or not).
    fn take(&mut self, block: u64) -> Option<Buf> {
        self.delayed.forget(block);
        // Dirty buffers are all in `bufs`: a block without a buffer (a
        // freed block of file data, mostly) is in no set.
        let buf = self.bufs.remove(&block)?;
        self.lru.remove(&buf.tick);
        self.data_lru.remove(&buf.tick);
        self.dirty.remove(&block);
        self.dirty_data.remove(&block);
        Some(buf)
    }

    /// `block`'s bytes, its buffer taken out of the cache (dirty or not).
    pub fn take_data(&mut self, block: u64) -> Option<AlignedBuf> {
        self.take(block).map(|buf| buf.data)
    }

    /// Blocks a request carries at most.
    pub fn run_max(&self) -> usize {
        RUN_BLOCKS_MAX.min((self.dev.max_request_bytes() / BLOCK_BYTES as u64).max(1) as usize)
    }

    /// Writes `block` now and makes it durable (a synchronous write: the
    /// policies' ordering points).
    pub fn write_now(&mut self, order: &mut Ordering, block: u64) -> device::Result<()> {
        if self.is_dirty(block) {
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
        order.before_flush(self)?;
        self.dev.flush()?;
        self.stats.flushes += 1;
        self.meta_since_flush = 0;
        order.after_flush(self);
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
        order.written_back(self);
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
    /// file data left dirty (a new block's pointer carries the unwritten
    /// mark until its data is written back: `delayed.rs`).
    pub fn write_back_meta(&mut self, order: &mut Ordering) -> device::Result<()> {
        let meta: Vec<u64> = self.dirty.iter().copied().collect();
        self.write_blocks(order, &meta, Waiting::RollBack)
    }

    /// Every dirty file-data buffer, in block order (a sync's first step
    /// under `log`); no flush.
    pub fn write_back_data(&mut self, order: &mut Ordering) -> device::Result<()> {
        let data: Vec<u64> = self.dirty_data.iter().copied().collect();
        self.write_blocks(order, &data, Waiting::RollBack)
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
    ///
    /// Long on purpose: a run is gathered, its images taken under the
    /// ordering rules and written in one pass, so the rules' checks (and
    /// the debug build's assertion of them) see the very bytes each
    /// request carries; split, a helper would hold half a run.
    pub fn write_blocks(
        &mut self,
        order: &mut Ordering,
        blocks: &[u64],
        waiting: Waiting,
    ) -> device::Result<()> {
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
            order.held_back(&held);
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
                        continue;
                    }
                }
                if let Some(buf) = self.bufs.get_mut(&b) {
                    buf.dirtied = None;
                }
                self.dirty.remove(&b);
                self.dirty_data.remove(&b);
            }
            if data {
                for &b in &blocks[i..i + run] {
                    self.delayed.wrote(b);
                }
                self.stats.data_blocks_written += run as u64;
            } else {
                self.meta_since_flush += run;
            }
            self.stats.blocks_written += run as u64;
            self.stats.write_requests += 1;
            i += run;
        }
        Ok(())
    }

    /// Keeps the cache within its capacity: the least recently used
    /// buffers go, the dirty ones written first.
    /// Under `softdep`, a buffer that cannot go complete is held back
    /// (dirty, passed over) until a checkpoint lets it go (the syncer's
    /// flush, or one here once such buffers fill half the cache).
    fn make_room(&mut self, order: &mut Ordering) -> device::Result<()> {
        order.before_room(self)?;
        let mut passed = 0;
        while self.bufs.len() >= self.capacity_blocks {
            let data_first = self.data_lru.len() > self.capacity_blocks / DATA_KEPT_SHARE;
            let lru = if data_first { &self.data_lru } else { &self.lru };
            let Some((&tick, &block)) = lru.iter().next() else { break };
            if order.passes_over(block) {
                self.touch(block);
                passed += 1;
                if passed > self.bufs.len() {
                    break;
                }
                continue;
            }
            if self.is_dirty(block) {
                // Write a batch of the oldest dirty buffers, sorted and
                // coalesced, rather than one block per eviction.
                let lru = if data_first { &self.data_lru } else { &self.lru };
                let mut batch: Vec<u64> = lru
                    .values()
                    .filter(|&&b| self.is_dirty(b) && !order.passes_over(b))
                    .take(EVICT_BATCH_BLOCKS)
                    .copied()
                    .collect();
                batch.sort_unstable();
                let waiting = order.evicting();
                self.write_blocks(order, &batch, waiting)?;
                if self.is_dirty(block) {
                    continue;
                }
            }
            self.lru.remove(&tick);
            self.data_lru.remove(&tick);
            let buf = self.bufs.remove(&block);
            order.evicted(block);
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
pub fn write_runs(dev: &dyn Device, blocks: Vec<(u64, AlignedBuf)>, run_max: usize) -> device::Result<()> {
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

    /// File data written once does not push metadata out: while file
    /// data fills more than an eighth of the cache, an eviction takes it
    /// first, however recently the metadata was used.
    #[test]
    fn file_data_goes_before_metadata_used_longer_ago() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
        let mut cache = Cache::new(dev, 64 * BLOCK_BYTES as u64, false, Clock::Wall);
        let order = &mut Ordering::Async;
        for b in 0..8 {
            cache.modify(order, b).unwrap()[0] = 1;
        }
        for b in 100..200 {
            cache.modify_data(order, b).unwrap()[0] = 2;
        }
        assert!((0..8).all(|b| cache.cached(b).is_some()), "the metadata stays");
        assert!(cache.cached(100).is_none(), "the oldest file data went");
        assert!(cache.cached(199).is_some(), "the newest file data stays");
    }

    /// With file data down to an eighth of the cache, the least recently
    /// used buffer goes again, whatever it holds.
    #[test]
    fn a_cache_of_mostly_metadata_evicts_the_least_recently_used() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
        let mut cache = Cache::new(dev, 64 * BLOCK_BYTES as u64, false, Clock::Wall);
        let order = &mut Ordering::Async;
        cache.modify_data(order, 100).unwrap()[0] = 2;
        for b in 0..64 {
            cache.modify(order, b).unwrap()[0] = 1;
        }
        assert!(cache.cached(100).is_none(), "the least recently used went");
        assert!(cache.cached(0).is_some(), "metadata used after it stays");
    }

    /// A block the caller knows is zeros on the disk gets a clean buffer
    /// of zeros without a read; one with a buffer keeps it as it is.
    #[test]
    fn a_block_known_to_be_zeros_is_not_read() {
        let mem = Arc::new(MemDevice::new(1 << 20).unwrap());
        let dev: Arc<dyn Device> = mem.clone();
        let mut cache = Cache::new(Arc::clone(&dev), 1 << 20, false, Clock::Wall);
        let order = &mut Ordering::Async;
        cache.load_zeros(order, 7).unwrap();
        assert_eq!(dev.stats().snapshot().reads, 0, "no read");
        assert!(cache.read(order, 7).unwrap().iter().all(|&b| b == 0));
        assert!(!cache.is_dirty(7), "clean: nothing to write");
        cache.modify(order, 7).unwrap()[0] = 9;
        cache.load_zeros(order, 7).unwrap();
        assert_eq!(cache.read(order, 7).unwrap()[0], 9, "a buffer is left as it is");
    }
}
