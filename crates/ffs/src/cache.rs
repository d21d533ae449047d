//! The buffer cache: 4 KiB blocks of the device kept in memory, written
//! back later (the policies decide which writes cannot wait). Bounded:
//! past its capacity the least recently used buffer goes, written first
//! if dirty. Write-back is sorted by block number and coalesces runs of
//! neighbours into one request, as a disk wants it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use device::{AlignedBuf, Device};

use crate::format::BLOCK_BYTES;

/// Dirty buffers written together when an eviction finds a dirty one.
const EVICT_BATCH_BLOCKS: usize = 1024;

/// Blocks a write-back request carries at most (1 MiB).
const RUN_BLOCKS_MAX: usize = 256;

struct Buf {
    data: AlignedBuf,
    /// When it was first dirtied since it was last written; None: clean.
    dirtied: Option<Instant>,
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
    dirty: BTreeSet<u64>,
    tick: u64,
    capacity_blocks: usize,
    pub stats: CacheStats,
}

impl Cache {
    pub fn new(dev: Arc<dyn Device>, capacity_bytes: u64) -> Cache {
        let capacity_blocks = (capacity_bytes / BLOCK_BYTES as u64).max(64) as usize;
        Cache {
            dev,
            bufs: HashMap::new(),
            lru: BTreeMap::new(),
            dirty: BTreeSet::new(),
            tick: 0,
            capacity_blocks,
            stats: CacheStats::default(),
        }
    }

    fn touch(&mut self, block: u64) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(buf) = self.bufs.get_mut(&block) {
            self.lru.remove(&buf.tick);
            buf.tick = tick;
            self.lru.insert(tick, block);
        }
    }

    /// Brings `block` in (reading it unless `fresh`, which zeroes it).
    fn load(&mut self, block: u64, fresh: bool) -> device::Result<()> {
        if self.bufs.contains_key(&block) {
            self.stats.hits += 1;
            if fresh {
                let buf = self.bufs.get_mut(&block).map(|b| &mut b.data[..]);
                buf.into_iter().for_each(|d| d.fill(0));
            }
            self.touch(block);
            return Ok(());
        }
        self.make_room()?;
        let mut data = AlignedBuf::zeroed(BLOCK_BYTES, BLOCK_BYTES.max(self.dev.buffer_align()));
        if !fresh {
            self.stats.misses += 1;
            self.dev.read_at(&mut data, block * BLOCK_BYTES as u64)?;
        }
        self.tick += 1;
        self.bufs.insert(block, Buf { data, dirtied: None, tick: self.tick });
        self.lru.insert(self.tick, block);
        Ok(())
    }

    /// The bytes of `block`.
    pub fn read(&mut self, block: u64) -> device::Result<&[u8]> {
        self.load(block, false)?;
        Ok(&self.bufs[&block].data)
    }

    /// The bytes of `block`, to change: the buffer becomes dirty.
    pub fn modify(&mut self, block: u64) -> device::Result<&mut [u8]> {
        self.load(block, false)?;
        Ok(self.dirty_buf(block))
    }

    /// A newly allocated block: zeroed without reading, dirty.
    pub fn fresh(&mut self, block: u64) -> device::Result<&mut [u8]> {
        self.load(block, true)?;
        Ok(self.dirty_buf(block))
    }

    fn dirty_buf(&mut self, block: u64) -> &mut [u8] {
        self.dirty.insert(block);
        let buf = self.bufs.get_mut(&block).expect("loaded just before");
        buf.dirtied.get_or_insert_with(Instant::now);
        &mut buf.data
    }

    /// A freed block: its buffer dropped unwritten (whatever it held is
    /// no longer anybody's).
    pub fn discard(&mut self, block: u64) {
        if let Some(buf) = self.bufs.remove(&block) {
            self.lru.remove(&buf.tick);
            self.dirty.remove(&block);
        }
    }

    /// Writes `block` now and makes it durable (a synchronous write: the
    /// policies' ordering points).
    pub fn write_now(&mut self, block: u64) -> device::Result<()> {
        if let Some(buf) = self.bufs.get_mut(&block) {
            self.dev.write_at(&buf.data, block * BLOCK_BYTES as u64)?;
            buf.dirtied = None;
            self.dirty.remove(&block);
        }
        self.dev.flush()?;
        self.stats.sync_writes += 1;
        self.stats.flushes += 1;
        Ok(())
    }

    /// Writes every dirty buffer, in block order, neighbours together;
    /// `flush`: then makes them durable.
    pub fn write_back(&mut self, flush: bool) -> device::Result<()> {
        let blocks: Vec<u64> = self.dirty.iter().copied().collect();
        self.write_blocks(&blocks)?;
        if flush {
            self.dev.flush()?;
            self.stats.flushes += 1;
        }
        Ok(())
    }

    /// Writes the buffers dirty for longer than `age` (the syncer's pass).
    pub fn write_back_older(&mut self, age: Duration) -> device::Result<usize> {
        let now = Instant::now();
        let old: Vec<u64> = (self.dirty.iter())
            .filter(|b| self.bufs[b].dirtied.is_some_and(|t| now.duration_since(t) >= age))
            .copied()
            .collect();
        self.write_blocks(&old)?;
        Ok(old.len())
    }

    /// Writes `blocks` (sorted, dirty) in runs of neighbours.
    /// A run carries at most 1 MiB, and no more than the device takes in
    /// one request (a block log's transaction limit).
    fn write_blocks(&mut self, blocks: &[u64]) -> device::Result<()> {
        let run_max = RUN_BLOCKS_MAX.min((self.dev.max_request_bytes() / BLOCK_BYTES as u64).max(1) as usize);
        let mut i = 0;
        while i < blocks.len() {
            let mut run = 1;
            while i + run < blocks.len() && blocks[i + run] == blocks[i] + run as u64 && run < run_max {
                run += 1;
            }
            let first = blocks[i];
            if run == 1 {
                self.dev.write_at(&self.bufs[&first].data, first * BLOCK_BYTES as u64)?;
            } else {
                let mut staged =
                    AlignedBuf::zeroed(run * BLOCK_BYTES, BLOCK_BYTES.max(self.dev.buffer_align()));
                for (k, chunk) in staged.chunks_mut(BLOCK_BYTES).enumerate() {
                    chunk.copy_from_slice(&self.bufs[&(first + k as u64)].data);
                }
                self.dev.write_at(&staged, first * BLOCK_BYTES as u64)?;
            }
            for b in &blocks[i..i + run] {
                if let Some(buf) = self.bufs.get_mut(b) {
                    buf.dirtied = None;
                }
                self.dirty.remove(b);
            }
            self.stats.blocks_written += run as u64;
            self.stats.write_requests += 1;
            i += run;
        }
        Ok(())
    }

    /// Keeps the cache within its capacity: the least recently used
    /// buffers go, the dirty ones written first.
    fn make_room(&mut self) -> device::Result<()> {
        while self.bufs.len() >= self.capacity_blocks {
            let Some((&tick, &block)) = self.lru.iter().next() else { break };
            if self.dirty.contains(&block) {
                // Write a batch of the oldest dirty buffers, sorted and
                // coalesced, rather than one block per eviction.
                let mut batch: Vec<u64> = self
                    .lru
                    .values()
                    .filter(|b| self.dirty.contains(b))
                    .take(EVICT_BATCH_BLOCKS)
                    .copied()
                    .collect();
                batch.sort_unstable();
                self.write_blocks(&batch)?;
            }
            self.lru.remove(&tick);
            self.bufs.remove(&block);
            self.stats.evictions += 1;
        }
        Ok(())
    }
}
