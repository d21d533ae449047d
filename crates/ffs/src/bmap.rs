//! A file's blocks: twelve direct pointers, then a single indirect block
//! of 1024, then a double indirect of 1024 singles. Mapping, allocating
//! on write, freeing a range (truncation, a punched hole), and finding
//! holes.

use fsapi::Errno;

use crate::core::{io_failed, Core};
use crate::delayed::Owner;
use crate::format::{
    block_of, is_unwritten, pointer_at, set_pointer, DiskInode, DIRECT_POINTERS, POINTERS_PER_BLOCK, S_IFREG,
    UNWRITTEN,
};

const DIRECT: u64 = DIRECT_POINTERS as u64;
const SINGLE_END: u64 = DIRECT + POINTERS_PER_BLOCK;
const DOUBLE_END: u64 = SINGLE_END + POINTERS_PER_BLOCK * POINTERS_PER_BLOCK;
/// 512-byte units in a block, for `blocks_512`.
const UNITS: u64 = 8;

/// A file block's device block and whether this call allocated it (or
/// cleared its unwritten mark); None: a hole, or unwritten to a reader.
type BlockOf = Option<(u32, bool)>;

/// What a mapping of a file block asks for ([`Core::map`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Want {
    /// The block to read: a hole or an unwritten block is None.
    Read,
    /// A block to write: a hole gets a new block and an unwritten block
    /// loses its mark, each zeroed in the cache.
    Written,
    /// A block allocated (fallocate): a hole gets a block marked
    /// unwritten, which no write touches; any other block is left as it
    /// is.
    Unwritten,
}

/// What a truncation leaves to do once the pointers to the freed blocks
/// are gone from the inode and its indirect blocks.
#[derive(Default)]
pub struct Freed {
    /// Blocks to return to the free maps.
    pub blocks: Vec<u32>,
    /// The metadata among `blocks` (indirect blocks, and the extended
    /// attribute block of an inode freed whole); the rest hold the file's
    /// contents.
    pub pointers: Vec<u32>,
    /// Indirect blocks that lost pointers (to write before the frees,
    /// when the policy orders writes).
    pub changed: Vec<u64>,
}

impl Core {
    fn pointer(&mut self, block: u32, index: u64) -> Result<u32, Errno> {
        match self.cache.read(&mut self.order, u64::from(block)) {
            Ok(bytes) => Ok(pointer_at(bytes, index as usize)),
            Err(e) => Err(io_failed(self, e)),
        }
    }

    /// The pointers of indirect block `block` from `from` on, read once.
    fn pointers(&mut self, block: u32, from: u64) -> Result<Vec<u32>, Errno> {
        match self.cache.read(&mut self.order, u64::from(block)) {
            Ok(bytes) => {
                Ok((from as usize..POINTERS_PER_BLOCK as usize).map(|i| pointer_at(bytes, i)).collect())
            }
            Err(e) => Err(io_failed(self, e)),
        }
    }

    fn set(&mut self, block: u32, index: u64, value: u32) -> Result<(), Errno> {
        self.order.set_kind(u64::from(block), crate::softdep::Kind::Indirect);
        match self.cache.modify(&mut self.order, u64::from(block)) {
            Ok(bytes) => {
                set_pointer(bytes, index as usize, value);
                Ok(())
            }
            Err(e) => Err(io_failed(self, e)),
        }
    }

    /// A new block near `hint`, zeroed in the cache.
    fn new_block(&mut self, inode: &mut DiskInode, hint: u64) -> Result<u32, Errno> {
        let block = self.alloc_block(hint)?;
        if let Err(e) = self.cache.fresh(&mut self.order, u64::from(block)) {
            return Err(io_failed(self, e));
        }
        inode.blocks_512 += UNITS;
        Ok(block)
    }

    /// A new indirect block near `hint`, zeroed. Under `sync` its zeros
    /// are written at once, before anything can point at it: the block
    /// may have held anything before (a freed file's data), and an inode
    /// or indirect block naming it written first would leave pointers to
    /// garbage after a crash (fsck's bad block pointers and blocks claimed
    /// twice), as FFS's own block allocation writes a new indirect block
    /// before its parent.
    fn new_indirect(&mut self, inode: &mut DiskInode, hint: u64) -> Result<u32, Errno> {
        let block = self.new_block(inode, hint)?;
        self.ordered(u64::from(block))?;
        Ok(block)
    }

    /// The pointer in indirect block `holder` at `index` to another
    /// indirect block, allocating one (zeroed, when `alloc`) if it is a
    /// hole.
    fn through(
        &mut self,
        inode: &mut DiskInode,
        holder: u32,
        index: u64,
        alloc: bool,
        hint: u64,
    ) -> Result<Option<u32>, Errno> {
        let p = self.pointer(holder, index)?;
        if p != 0 || !alloc {
            return Ok((p != 0).then_some(p));
        }
        let block = self.new_indirect(inode, hint)?;
        self.set(holder, index, block)?;
        Ok(Some(block))
    }

    /// What data pointer `p` (0: a hole) becomes for `want`, allocating
    /// near `hint`: the pointer to store (None: unchanged) and what the
    /// caller gets. `delay`: the owner of a new block that is to stay
    /// marked unwritten until its data is written back (under `log`, a
    /// regular file's: `delayed.rs`).
    fn data_pointer(
        &mut self,
        inode: &mut DiskInode,
        p: u32,
        want: Want,
        hint: u64,
        delay: Option<Owner>,
    ) -> Result<(Option<u32>, BlockOf), Errno> {
        let delayed =
            |core: &Core, p: u32| is_unwritten(p) && core.cache.delayed.contains(u64::from(block_of(p)));
        Ok(match (p, want) {
            (0, Want::Read) => (None, None),
            (0, Want::Written) => {
                let block = self.new_block(inode, hint)?;
                match delay {
                    Some(owner) => {
                        self.cache.delayed.delay(u64::from(block), owner);
                        (Some(block | UNWRITTEN), Some((block, true)))
                    }
                    None => (Some(block), Some((block, true))),
                }
            }
            // Its data is in the cache, or written and not yet settled.
            (p, Want::Read | Want::Written) if delayed(self, p) => (None, Some((block_of(p), false))),
            (0, Want::Unwritten) => {
                let block = self.alloc_block(hint)?;
                self.order.allocated_unwritten(block);
                inode.blocks_512 += UNITS;
                (Some(block | UNWRITTEN), Some((block, true)))
            }
            (p, Want::Read) if is_unwritten(p) => (None, None),
            (p, Want::Written) if is_unwritten(p) => {
                // Its first write: zeros in the cache, without a read, and
                // from here on a new block's (each policy orders its
                // contents before the pointer without the mark).
                let block = block_of(p);
                if let Err(e) = self.cache.fresh(&mut self.order, u64::from(block)) {
                    return Err(io_failed(self, e));
                }
                if let Some(owner) = delay {
                    // The mark stays until the data is written back.
                    self.cache.delayed.delay(u64::from(block), owner);
                    return Ok((None, Some((block, true))));
                }
                self.order.converted(block);
                (Some(block), Some((block, true)))
            }
            (p, Want::Unwritten) => (None, Some((block_of(p), false))),
            (p, _) => (None, Some((p, false))),
        })
    }

    /// Clears the unwritten mark of file block `n` if it points to
    /// `block` marked (a delayed block whose data is written back:
    /// `Core::settle_delayed`); true when the change is in `inode` itself
    /// (a direct pointer), for the caller to put back.
    pub fn clear_mark(&mut self, inode: &mut DiskInode, n: u64, block: u32) -> Result<bool, Errno> {
        let marked = block | UNWRITTEN;
        if n < DIRECT {
            let p = &mut inode.direct[n as usize];
            let mine = *p == marked;
            if mine {
                *p = block;
            }
            return Ok(mine);
        }
        let (holder, index) = if n < SINGLE_END {
            (inode.single, n - DIRECT)
        } else if inode.double == 0 {
            return Ok(false);
        } else {
            let m = n - SINGLE_END;
            (self.pointer(inode.double, m / POINTERS_PER_BLOCK)?, m % POINTERS_PER_BLOCK)
        };
        if holder != 0 && self.pointer(holder, index)? == marked {
            self.set(holder, index, block)?;
        }
        Ok(false)
    }

    /// The device block of file block `n` of inode `ino` for `want`
    /// (see [`Want`]), and whether it was allocated (or, for
    /// `Want::Written`, its unwritten mark cleared) by this call. None: a
    /// hole, or for `Want::Read` an unwritten block, left as it is.
    pub fn map(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        n: u64,
        want: Want,
    ) -> Result<Option<(u32, bool)>, Errno> {
        if n >= DOUBLE_END {
            return Err(Errno::FBIG);
        }
        let hint = self.hint(ino, inode, n)?;
        let alloc = want != Want::Read;
        let delay = (self.order.is_logged() && inode.kind_bits() == S_IFREG).then_some(Owner { ino, n });
        if n < DIRECT {
            let (store, got) = self.data_pointer(inode, inode.direct[n as usize], want, hint, delay)?;
            if let Some(p) = store {
                inode.direct[n as usize] = p;
            }
            return Ok(got);
        }
        let (holder, index) = if n < SINGLE_END {
            if inode.single == 0 && alloc {
                inode.single = self.new_indirect(inode, hint)?;
            }
            (inode.single, n - DIRECT)
        } else {
            if inode.double == 0 && alloc {
                inode.double = self.new_indirect(inode, hint)?;
            }
            if inode.double == 0 {
                return Ok(None);
            }
            let m = n - SINGLE_END;
            let Some(single) = self.through(inode, inode.double, m / POINTERS_PER_BLOCK, alloc, hint)? else {
                return Ok(None);
            };
            (single, m % POINTERS_PER_BLOCK)
        };
        if holder == 0 {
            return Ok(None);
        }
        let p = self.pointer(holder, index)?;
        let (store, got) = self.data_pointer(inode, p, want, hint, delay)?;
        if let Some(p) = store {
            self.set(holder, index, p)?;
        }
        Ok(got)
    }

    /// Allocates, marked unwritten, the holes among file blocks `n..end`
    /// that share `n`'s holder (the direct pointers, or one single
    /// indirect block, made first if it is missing), the blocks taken a
    /// run at a time and the holder changed once; pushes each file block
    /// it allocated to `new` (so that a failure part way leaves them to be
    /// given back) and returns the first block past the run.
    pub fn allocate_unwritten(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        n: u64,
        end: u64,
        new: &mut Vec<u64>,
    ) -> Result<u64, Errno> {
        if n >= DOUBLE_END {
            return Err(Errno::FBIG);
        }
        if n < DIRECT {
            let stop = end.min(DIRECT);
            for k in n..stop {
                if let Some((_, true)) = self.map(ino, inode, k, Want::Unwritten)? {
                    new.push(k);
                }
            }
            return Ok(stop);
        }
        let hint = self.hint(ino, inode, n)?;
        let (holder, base, span_end) = if n < SINGLE_END {
            if inode.single == 0 {
                inode.single = self.new_indirect(inode, hint)?;
            }
            (inode.single, DIRECT, SINGLE_END)
        } else {
            if inode.double == 0 {
                inode.double = self.new_indirect(inode, hint)?;
            }
            let outer = (n - SINGLE_END) / POINTERS_PER_BLOCK;
            let single = self.through(inode, inode.double, outer, true, hint)?.ok_or(Errno::IO)?;
            let base = SINGLE_END + outer * POINTERS_PER_BLOCK;
            (single, base, base + POINTERS_PER_BLOCK)
        };
        let stop = end.min(span_end);
        let pointers = self.pointers(holder, n - base)?;
        let holes: Vec<u64> = (n..stop).filter(|&k| pointers[(k - n) as usize] == 0).collect();
        // Next to the block before the first hole, when it has one.
        let before =
            holes.first().and_then(|&k| k.checked_sub(n + 1)).map(|i| block_of(pointers[i as usize]));
        let near = before.filter(|&b| b != 0).map_or(hint, |b| u64::from(b) + 1);
        let (blocks, failed) = self.take_unwritten(near, holes.len());
        let taken: Vec<(u64, u32)> = holes.into_iter().zip(blocks).collect();
        if !taken.is_empty() {
            self.order.set_kind(u64::from(holder), crate::softdep::Kind::Indirect);
            let bytes = match self.cache.modify(&mut self.order, u64::from(holder)) {
                Ok(bytes) => bytes,
                Err(e) => return Err(io_failed(self, e)),
            };
            for &(k, block) in &taken {
                set_pointer(bytes, (k - base) as usize, block | UNWRITTEN);
            }
            inode.blocks_512 += UNITS * taken.len() as u64;
            new.extend(taken.iter().map(|&(k, _)| k));
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(stop),
        }
    }

    /// Up to `count` blocks near `near`, a run at a time, each to be
    /// pointed to marked unwritten; with the error that stopped it short.
    fn take_unwritten(&mut self, mut near: u64, count: usize) -> (Vec<u32>, Option<Errno>) {
        let mut taken = Vec::with_capacity(count);
        while taken.len() < count {
            match self.alloc_blocks(near, count - taken.len()) {
                Ok(blocks) => {
                    near = u64::from(blocks[blocks.len() - 1]) + 1;
                    for &block in &blocks {
                        self.order.allocated_unwritten(block);
                    }
                    taken.extend(blocks);
                }
                Err(e) => return (taken, Some(e)),
            }
        }
        (taken, None)
    }

    /// The device block of file block `n` of inode `ino`; with `alloc`, a
    /// hole is filled with a new zeroed block, and an unwritten block
    /// becomes a written one holding zeros (either returned as new).
    /// None: a hole (or, without `alloc`, an unwritten block: it reads as
    /// zeros) left as it is.
    pub fn bmap(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        n: u64,
        alloc: bool,
    ) -> Result<Option<(u32, bool)>, Errno> {
        self.map(ino, inode, n, if alloc { Want::Written } else { Want::Read })
    }

    /// Where block `n` of a file should go: after block `n - 1`, else at
    /// the start of its inode's group's data.
    fn hint(&mut self, ino: u32, inode: &mut DiskInode, n: u64) -> Result<u64, Errno> {
        if n > 0 && n <= DIRECT {
            let previous = block_of(inode.direct[(n - 1) as usize]);
            if previous != 0 {
                return Ok(u64::from(previous) + 1);
            }
        }
        Ok(self.inode_group_data(ino))
    }

    /// Drops every block of the file from block `keep` on: clears their
    /// pointers (and indirect blocks left empty) and returns what to free.
    pub fn truncate_blocks(&mut self, inode: &mut DiskInode, keep: u64) -> Result<Freed, Errno> {
        self.free_range(inode, keep, DOUBLE_END)
    }

    /// Drops the file's blocks `first..end`: clears their pointers, frees
    /// the indirect blocks whose whole span is inside, and returns what to
    /// free.
    pub fn free_range(&mut self, inode: &mut DiskInode, first: u64, end: u64) -> Result<Freed, Errno> {
        let mut freed = Freed::default();
        for i in first.min(DIRECT)..end.min(DIRECT) {
            let p = std::mem::take(&mut inode.direct[i as usize]);
            if p != 0 {
                freed.blocks.push(block_of(p));
            }
        }
        if inode.single != 0 && first < SINGLE_END && end > DIRECT {
            let (from, to) = (first.saturating_sub(DIRECT), end.min(SINGLE_END) - DIRECT);
            if self.clear_indirect(inode.single, 1, from, to, &mut freed)? {
                freed.pointers.push(inode.single);
                freed.blocks.push(std::mem::take(&mut inode.single));
            }
        }
        if inode.double != 0 && end > SINGLE_END {
            let (from, to) = (first.saturating_sub(SINGLE_END), end.min(DOUBLE_END) - SINGLE_END);
            if self.clear_indirect(inode.double, 2, from, to, &mut freed)? {
                freed.pointers.push(inode.double);
                freed.blocks.push(std::mem::take(&mut inode.double));
            }
        }
        inode.blocks_512 = inode.blocks_512.saturating_sub(UNITS * freed.blocks.len() as u64);
        Ok(freed)
    }

    /// Clears the pointers of indirect block `block` (of `level` 1 or 2)
    /// covering file blocks `first..end` (relative to it). Returns whether
    /// the range covers the block's whole span (it is then to be freed
    /// too, its pointers left as they are).
    fn clear_indirect(
        &mut self,
        block: u32,
        level: u32,
        first: u64,
        end: u64,
        freed: &mut Freed,
    ) -> Result<bool, Errno> {
        let span = if level == 1 { 1 } else { POINTERS_PER_BLOCK };
        let whole = first == 0 && end >= span * POINTERS_PER_BLOCK;
        let (lo, hi) = (first / span, end.div_ceil(span).min(POINTERS_PER_BLOCK));
        let mut changed = false;
        // Read once (not once a pointer): only this loop changes them, each
        // after it is read.
        let pointers = self.pointers(block, lo)?;
        for (i, p) in (lo..hi).zip(pointers) {
            if p == 0 {
                continue;
            }
            let empty = level == 1 || {
                // The child's part of the range: `i * span < end`, as `i < hi`.
                let (from, to) = (first.saturating_sub(i * span), (end - i * span).min(span));
                self.clear_indirect(p, 1, from, to, freed)?
            };
            if empty {
                freed.blocks.push(block_of(p));
                if level == 2 {
                    freed.pointers.push(p);
                }
                // Freed whole, this block keeps its pointers: nothing
                // reaches it once its own pointer goes, and it is zeroed
                // when handed out again (`new_block`).
                if !whole {
                    self.set(block, i, 0)?;
                    changed = true;
                }
            }
        }
        if whole {
            return Ok(true);
        }
        if changed {
            freed.changed.push(u64::from(block));
        }
        Ok(false)
    }

    /// Whether file block `n` is allocated, and the next block worth
    /// asking about: past a missing indirect block, every block it would
    /// map is a hole too.
    fn mapped(&mut self, inode: &DiskInode, n: u64) -> Result<(bool, u64), Errno> {
        if n < DIRECT {
            return Ok((inode.direct[n as usize] != 0, n + 1));
        }
        if n < SINGLE_END {
            if inode.single == 0 {
                return Ok((false, SINGLE_END));
            }
            return Ok((self.pointer(inode.single, n - DIRECT)? != 0, n + 1));
        }
        if n >= DOUBLE_END || inode.double == 0 {
            return Ok((false, u64::MAX));
        }
        let m = n - SINGLE_END;
        let single = self.pointer(inode.double, m / POINTERS_PER_BLOCK)?;
        if single == 0 {
            return Ok((false, SINGLE_END + (m / POINTERS_PER_BLOCK + 1) * POINTERS_PER_BLOCK));
        }
        Ok((self.pointer(single, m % POINTERS_PER_BLOCK)? != 0, n + 1))
    }

    /// The first block in `from..end` that is allocated (`data`) or a
    /// hole; None if there is none.
    pub fn next_block(
        &mut self,
        inode: &DiskInode,
        from: u64,
        end: u64,
        data: bool,
    ) -> Result<Option<u64>, Errno> {
        let mut n = from;
        while n < end {
            let (allocated, next) = self.mapped(inode, n)?;
            if allocated == data {
                return Ok(Some(n));
            }
            n = next;
        }
        Ok(None)
    }

    /// How many of the blocks `first..end` are holes.
    pub fn holes(&mut self, inode: &DiskInode, first: u64, end: u64) -> Result<u64, Errno> {
        let (mut n, mut holes) = (first, 0);
        while n < end {
            let (allocated, next) = self.mapped(inode, n)?;
            let next = next.min(end);
            if !allocated {
                holes += next - n;
            }
            n = next;
        }
        Ok(holes)
    }

    /// A block past the file's last allocated one (not always the first:
    /// a single indirect block under the double counts whole), read from
    /// the inode and its top indirect blocks only.
    pub fn allocated_end(&mut self, inode: &DiskInode) -> Result<u64, Errno> {
        let last = |pointers: &[u32]| pointers.iter().rposition(|&p| p != 0).map(|i| i as u64 + 1);
        if inode.double != 0 {
            if let Some(singles) = last(&self.pointers(inode.double, 0)?) {
                return Ok(SINGLE_END + singles * POINTERS_PER_BLOCK);
            }
        }
        if inode.single != 0 {
            if let Some(n) = last(&self.pointers(inode.single, 0)?) {
                return Ok(DIRECT + n);
            }
        }
        Ok(last(&inode.direct).unwrap_or(0))
    }
}

/// The blocks a file's block map reaches, as an fsync looks for what of
/// the file is dirty.
#[derive(Default)]
pub struct Mapped {
    /// The file's contents (a directory's entries, a symlink's target).
    pub contents: Vec<u64>,
    /// Its indirect blocks: the single, the double and the singles under
    /// the double.
    pub pointers: Vec<u64>,
}

impl Core {
    /// Every block `inode` maps, without allocating. Every pointer is
    /// followed, not only those below the size: a block past it is the
    /// file's too, and costs no more to look at than the indirect block
    /// holding its pointer, which is read anyway.
    pub fn mapped_blocks(&mut self, inode: &DiskInode) -> Result<Mapped, Errno> {
        let mut mapped = Mapped::default();
        // An unwritten block has no buffer to look for (nothing wrote it),
        // unless it is delayed: its data is in the cache.
        let delayed = &self.cache.delayed;
        let written = |p: &u32| *p != 0 && (!is_unwritten(*p) || delayed.contains(u64::from(block_of(*p))));
        mapped.contents.extend(inode.direct.iter().filter(|p| written(p)).map(|&p| u64::from(block_of(p))));
        if inode.single != 0 {
            self.mapped_under(inode.single, &mut mapped)?;
        }
        if inode.double != 0 {
            mapped.pointers.push(u64::from(inode.double));
            for single in self.pointers(inode.double, 0)?.into_iter().filter(|&p| p != 0) {
                self.mapped_under(single, &mut mapped)?;
            }
        }
        debug_assert!(
            mapped.pointers.len() as u64 <= 2 + POINTERS_PER_BLOCK,
            "one single, one double, its singles"
        );
        Ok(mapped)
    }

    /// Single indirect block `single` and the blocks it points to.
    fn mapped_under(&mut self, single: u32, mapped: &mut Mapped) -> Result<(), Errno> {
        mapped.pointers.push(u64::from(single));
        let pointers = self.pointers(single, 0)?;
        let delayed = &self.cache.delayed;
        let written = |p: &u32| *p != 0 && (!is_unwritten(*p) || delayed.contains(u64::from(block_of(*p))));
        mapped.contents.extend(pointers.into_iter().filter(written).map(|p| u64::from(block_of(p))));
        Ok(())
    }
}
