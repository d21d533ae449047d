//! What a write made durable: the shadows moved on after a flush, and the
//! work that waited on them (rules 4 and 5: counts lowered, freed blocks
//! and inodes released).

use super::*;

impl Softdep {
    /// Whether the last write of `block` carried the disk's image, made
    /// durable since (no write of it since the last flush).
    pub fn last_written_is_durable(&self, block: u64) -> bool {
        self.durable.contains_key(&block) && self.last_write(block).is_none()
    }

    /// What the last write of `block` not yet durable carried: None when
    /// none is; Some(None) when it was memory, unchanged since.
    pub(super) fn last_write(&self, block: u64) -> Option<Option<&[u8]>> {
        self.open.last_write(block).or_else(|| self.sealed.as_ref()?.last_write(block))
    }

    /// Whether the last write of `block` (flushed or not) carried `image`.
    pub fn last_written_is(&self, block: u64, image: &[u8]) -> bool {
        let last = match self.last_write(block) {
            Some(None) => return false,
            Some(Some(last)) => Some(last),
            None => self.durable.get(&block).map(Shadow::bytes),
        };
        last == Some(image)
    }

    /// Metadata `block` was written: with `rolled_back`, a copy holding
    /// some update back; without, what memory holds.
    pub fn written(&mut self, block: u64, rolled_back: Option<AlignedBuf>) {
        let at = self.tick();
        if self.is_group_map(block) {
            self.open.bitmaps.push((block, at));
        }
        self.fresh_written(block, at);
        self.open.written.insert(block);
        let digest = match rolled_back {
            Some(image) => {
                self.stats.rollbacks += 1;
                self.open.as_memory.remove(&block);
                let digest = u64::from(crc32c::crc32c(&image));
                self.open.inflight.insert(block, image);
                digest
            }
            None => {
                // What memory holds: copied only if memory changes before
                // the flush (`before_change`).
                self.open.inflight.remove(&block);
                self.open.as_memory.insert(block);
                1
            }
        };
        self.written_digest =
            self.written_digest.wrapping_mul(31).wrapping_add(digest ^ block.rotate_left(32));
    }

    /// File data `block` was written (its contents, for rule 1).
    pub fn written_data(&mut self, block: u64) {
        if self.fresh_blocks.get(block).is_some() {
            let at = self.tick();
            self.fresh_written(block, at);
        }
    }

    /// A flush is issued: the writes so far are what it makes durable
    /// (`sealed_flushed` once it returns). One is in flight at most.
    /// Returns whether it sealed.
    pub fn seal(&mut self) -> bool {
        debug_assert!(self.sealed.is_none(), "one flush in flight at most");
        // Never so: the cache waits for one before it issues the next.
        // Were it so, the writes since stay open: they count as durable
        // only after a later seal's flush, never too early.
        if self.sealed.is_some() {
            return false;
        }
        self.sealed = Some(std::mem::take(&mut self.open));
        true
    }

    /// The flush issued at the last `seal` returned: what the writes
    /// before it put there is on the disk (not what the writes after it
    /// did), and the work that waited on them runs.
    pub fn sealed_flushed(&mut self, blocks: &dyn Blocks) {
        let Some(mut sealed) = self.sealed.take() else { return };
        let mut bitmaps: Vec<u64> = Vec::with_capacity(sealed.bitmaps.len());
        for (block, at) in sealed.bitmaps.drain(..) {
            if self.last_durable.get(block).is_none_or(|d| d < at) {
                self.last_durable.insert(block, at);
            }
            bitmaps.push(block);
        }
        for &block in &sealed.written {
            match sealed.inflight.remove(&block) {
                // A copy: what the disk holds now, while memory differs or
                // a write since may not have reached it.
                Some(image) if blocks.dirty(block) || self.open.last_write(block).is_some() => {
                    self.durable.insert(block, Shadow::Bytes(image));
                }
                // Memory, unchanged since (a change would have kept a
                // copy; so the block is clean, and any write since carried
                // memory too), or a clean block not written since: the
                // disk holds what memory does.
                _ => {
                    self.durable.remove(&block);
                }
            }
        }
        let mut written: Vec<u64> = Vec::with_capacity(sealed.fresh.len());
        for (block, at) in sealed.fresh.drain(..) {
            if let Some(fresh) = self.fresh_blocks.get_mut(block) {
                if fresh.allocated < at && fresh.durable < at {
                    fresh.durable = at;
                }
            }
            written.push(block);
        }
        self.settle_fresh(&mut bitmaps, &written);
        self.run_worklist(blocks, Some(&sealed.written));
        if self.names.len() > self.names_mark {
            self.prune_names();
        }
    }

    /// The fresh blocks and inodes this flush may have settled, and only
    /// those (a scan of every fresh one at every flush cost a tar of many
    /// files a quadratic share of its time): a block whose contents
    /// (`written`) or whose group's block map (`bitmaps`) the flush made
    /// durable; an inode whose group's inode map it did. Nothing else
    /// moves a fresh one on.
    fn settle_fresh(&mut self, bitmaps: &mut Vec<u64>, written: &[u64]) {
        let mut fresh_blocks = std::mem::take(&mut self.fresh_blocks);
        for &block in written {
            if fresh_blocks.get(block).is_some_and(|fresh| self.fresh_settled(block as u32, &fresh)) {
                fresh_blocks.remove(block);
            }
        }
        let mut fresh_inodes = std::mem::take(&mut self.fresh_inodes);
        bitmaps.sort_unstable();
        bitmaps.dedup();
        for &bitmap in bitmaps.iter() {
            let Some(within) = self.within_group(bitmap) else { continue };
            let g = ((bitmap - self.sb.first_group_block) / u64::from(self.sb.blocks_per_group)) as u32;
            match within {
                1 => {
                    let start = self.sb.group_start(g);
                    let blocks = start..start + u64::from(self.sb.group_blocks(g));
                    fresh_blocks
                        .remove_where_in(blocks, |block, fresh| self.fresh_settled(block as u32, fresh));
                }
                0 | 2 => {
                    // A header settles inodes only when it ends a raise's
                    // wait (most of its writes carry counts alone).
                    if within == 0 {
                        if !self.raised.get(&g).is_some_and(|&(_, at)| self.durable_after(bitmap, at)) {
                            continue;
                        }
                        self.raised.remove(&g);
                    }
                    let per_group = u64::from(self.sb.inodes_per_group);
                    let inodes = u64::from(g) * per_group + 1..u64::from(g + 1) * per_group + 1;
                    fresh_inodes.remove_where_in(inodes, |ino, &at| self.inode_maps_durable(ino as u32, at));
                }
                _ => {}
            }
        }
        self.fresh_blocks = fresh_blocks;
        self.fresh_inodes = fresh_inodes;
        #[cfg(debug_assertions)]
        {
            let left = self.fresh_blocks.find(|block, fresh| self.fresh_settled(block as u32, fresh));
            assert!(left.is_none(), "soft updates: fresh block {left:?} settled but not looked at");
            let left = self.fresh_inodes.find(|ino, &at| self.inode_maps_durable(ino as u32, at));
            assert!(left.is_none(), "soft updates: fresh inode {left:?} settled but not looked at");
        }
    }

    /// Looks at all the work that waits, not only at what waits on the
    /// blocks a flush made durable: what a write could not have changed
    /// (a wait on a block never written again, since the disk's copy was
    /// already right) is settled here. For a sync whose pass moved
    /// nothing on.
    pub fn rescan(&mut self, blocks: &dyn Blocks) {
        self.run_worklist(blocks, None);
    }

    pub(super) fn gone(&self, removal: &Removal, released: &HashSet<u64>) -> bool {
        let Gone { block, at, names } = removal.gone;
        let Some(disk) = self.durable.get(&block) else {
            // No shadow: the disk holds what memory does, which no longer
            // names the inode there (naming it again would have cancelled
            // the removal, `added`).
            return true;
        };
        released.contains(&block) || record_at(disk.bytes(), at).is_none_or(|r| r.ino != names)
    }

    /// Removals on the disk lower the counts written from now on. Only
    /// those watching a block in `changed` are looked at (all of them
    /// when None): a copy on the disk changes only when a write of it is
    /// made durable, or when the block is released.
    pub(super) fn settle_removals(&mut self, released: &HashSet<u64>, changed: Option<&HashSet<u64>>) {
        let watched: Vec<u64> = match changed {
            None => self.removals.keys().copied().collect(),
            Some(c) => {
                (c.iter().chain(released)).filter(|b| self.removals.contains_key(b)).copied().collect()
            }
        };
        for block in watched {
            let Some(removals) = self.removals.remove(&block) else { continue };
            let mut left = Vec::new();
            for removal in removals {
                if self.gone(&removal, released) {
                    self.unpend(&removal);
                    self.removal_count -= 1;
                } else {
                    left.push(removal);
                }
            }
            if !left.is_empty() {
                self.removals.insert(block, left);
            }
        }
    }

    /// The work that waited on the disk's copies of the blocks in
    /// `changed` (of every block, when None).
    pub(super) fn run_worklist(&mut self, blocks: &dyn Blocks, changed: Option<&HashSet<u64>>) {
        self.settle_removals(&HashSet::default(), changed);
        // Directory blocks released (the removals watching them end) and
        // indirect blocks released that groups wait on (those waits end:
        // it is unreachable, and so is what it points to).
        let mut dirs_released: HashSet<u64> = HashSet::default();
        let mut released: HashSet<u64> = HashSet::default();
        // Freed inodes whose slots are free on the disk, with the blocks
        // they held.
        let inode_blocks: Vec<u64> = match changed {
            None => self.held_inodes.keys().copied().collect(),
            Some(c) => c.iter().filter(|b| self.held_inodes.contains_key(b)).copied().collect(),
        };
        for block in inode_blocks {
            let Some(held) = self.held_inodes.remove(&block) else { continue };
            // The disk's copy read once for the block's inodes.
            let (gone, left): (Vec<HeldInode>, Vec<HeldInode>) = match self.on_disk(blocks, block) {
                Some(disk) => held.into_iter().partition(|h| {
                    let at = self.sb.inode_place(h.ino).1;
                    slot_is_free(&disk[at..at + INODE_BYTES])
                }),
                None => (Vec::new(), held),
            };
            self.stats.released_inodes += gone.len() as u64;
            self.held_inode_count -= gone.len();
            for h in gone {
                self.released_inodes.push((h.ino, h.dir));
                self.release_blocks(&h.blocks, h.meta, &mut dirs_released, &mut released);
            }
            if !left.is_empty() {
                self.held_inodes.insert(block, left);
            }
        }
        // Freed blocks whose pointers are gone from the disk.
        let mut look = self.held.waiting_on(changed);
        look.extend(self.held.cut(&released));
        look.sort_unstable();
        look.dedup();
        while !look.is_empty() {
            let mut released: HashSet<u64> = HashSet::default();
            for slot in look {
                let Some(h) = self.held.get(slot) else { continue };
                if h.waits.iter().any(|w| self.points_into(blocks, *w, &h.blocks)) {
                    continue;
                }
                let Some(h) = self.held.release(slot) else { continue };
                self.release_blocks(&h.blocks, h.meta, &mut dirs_released, &mut released);
            }
            // A group whose waits were cut is looked at again whatever
            // was flushed.
            look = self.held.cut(&released);
        }
        // Entries in directory blocks just released are gone with them.
        if !dirs_released.is_empty() {
            self.settle_removals(&dirs_released, Some(&HashSet::default()));
        }
    }

    /// Freed `blocks` (`meta` among them) nothing on the disk points to:
    /// given back, and what they end noted (`Softdep::run_worklist`).
    pub(super) fn release_blocks(
        &mut self,
        blocks: &[u32],
        meta: Vec<u32>,
        dirs_released: &mut HashSet<u64>,
        released: &mut HashSet<u64>,
    ) {
        self.stats.released_blocks += blocks.len() as u64;
        self.released_blocks.extend(blocks);
        self.released_meta.extend(&meta);
        // File data is in no map.
        for b in meta.into_iter().map(u64::from) {
            if self.removals.contains_key(&b) {
                dirs_released.insert(b);
            }
            if self.held.waited_on(b) {
                released.insert(b);
            }
            self.forget(b);
        }
    }

    /// An entry naming `ino` put at byte `at` of directory block `block`:
    /// the removals still waiting for that entry to go (its inode's, and
    /// for a directory its parent's) cancel (the disk's entry is right
    /// again).
    pub fn added(&mut self, block: u64, at: usize, ino: u32) {
        let Some(removals) = self.removals.remove(&block) else { return };
        let (cancelled, left): (Vec<Removal>, Vec<Removal>) =
            removals.into_iter().partition(|r| r.gone == Gone { block, at, names: ino });
        if !left.is_empty() {
            self.removals.insert(block, left);
        }
        for removal in cancelled {
            self.removal_count -= 1;
            self.unpend(&removal);
        }
    }

    /// A removal no longer waits: its inode's count may drop on the disk.
    pub(super) fn unpend(&mut self, removal: &Removal) {
        let left = self.pending(removal.ino).saturating_sub(removal.weight);
        let ino = u64::from(removal.ino);
        if left == 0 {
            self.pending.remove(ino);
        } else {
            self.pending.insert(ino, left);
        }
    }

    /// Whether the disk's copy of `holder` still points into `set` (a copy
    /// that cannot be read counts as pointing).
    pub(super) fn points_into(&self, blocks: &dyn Blocks, holder: Wait, sorted: &[u32]) -> bool {
        let contains = |p: &u32| *p != 0 && sorted.binary_search(p).is_ok();
        match holder {
            Wait::Inode(ino) => {
                let (block, at) = self.sb.inode_place(ino);
                let Some(disk) = self.on_disk(blocks, block) else { return true };
                let slot = &disk[at..at + INODE_BYTES];
                links(slot).is_some() && DiskInode::pointers_in(slot).any(|p| contains(&p))
            }
            Wait::Indirect(block) => match self.on_disk(blocks, block) {
                Some(disk) => {
                    (0..POINTERS_PER_BLOCK as usize).any(|k| contains(&block_of(pointer_at(&disk, k))))
                }
                None => true,
            },
        }
    }

    /// A block given back: nothing about it is kept.
    pub(super) fn forget(&mut self, block: u64) {
        self.durable.remove(&block);
        self.open.forget(block);
        if let Some(sealed) = &mut self.sealed {
            sealed.forget(block);
        }
        self.kinds.remove(&block);
    }
}
