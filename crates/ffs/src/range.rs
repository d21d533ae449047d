//! A file's bytes over a range: written, zeroed or allocated block by
//! block (`Core::fill`, which `write` and fallocate share), blocks freed
//! in each policy's order (truncation and punched holes), and holes
//! found for SEEK_DATA and SEEK_HOLE.
//!
//! Blocks fallocate allocates are marked unwritten in their pointers
//! (`format::UNWRITTEN`): nothing is written to them, they read as zeros,
//! and a write's first touch clears the mark and makes the block a new
//! one, whose contents every policy orders before its pointer as for a
//! block a write allocates (softdep's rule 1, log's data before the
//! commit). docs/fs.md, "fallocate".

use fsapi::{Errno, Fallocate, Result, Whence};

use crate::bmap::Want;
use crate::core::{io_failed, Core};
use crate::format::{DiskInode, BLOCK_BYTES, FILE_BYTES_MAX};
use crate::softdep::{FreedFrom, Wait};

const B: u64 = BLOCK_BYTES as u64;

/// Under `log`, a fill checks at every this many file blocks (4 MiB)
/// whether the transaction is full and commits what it did so far.
const FILL_CHUNK_BLOCKS: u64 = 1024;

/// What [`Core::fill`] puts in each block of a range.
#[derive(Clone, Copy)]
enum What<'a> {
    /// These bytes (a write).
    Data(&'a [u8]),
    /// Zeros, every block allocated.
    Zeros,
}

/// A fill in progress: what it puts, and how far it got.
pub struct Fill<'a> {
    what: What<'a>,
    /// Bytes of the range covered so far.
    pub done: u64,
}

impl<'a> Fill<'a> {
    /// A write of `data`: the size follows it.
    pub fn data(data: &'a [u8]) -> Fill<'a> {
        Fill { what: What::Data(data), done: 0 }
    }

    fn of(what: What<'a>) -> Fill<'a> {
        Fill { what, done: 0 }
    }

    fn grows(&self) -> bool {
        matches!(self.what, What::Data(_))
    }
}

impl Core {
    /// Puts `fill` over `len` bytes at `offset` of inode `ino`, block by
    /// block, allocating holes; `fill.done` counts what it covered (a
    /// write's size follows it, the caller sets any other's).
    pub fn fill(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        offset: u64,
        len: u64,
        fill: &mut Fill,
    ) -> Result<()> {
        while fill.done < len {
            let at = offset + fill.done;
            let (n, within) = (at / B, (at % B) as usize);
            if fill.done > 0 && n % FILL_CHUNK_BLOCKS == 0 && self.commit_due() {
                // A long fill under `log`: what is done so far becomes a
                // state of its own (a write's size covering it), committed
                // before it goes on, so that the transaction stays whole.
                if fill.grows() {
                    inode.size = inode.size.max(at);
                }
                self.put_inode(ino, inode)?;
                if let Err(e) = self.commit_behind() {
                    return Err(io_failed(self, e));
                }
            }
            let part = (B - within as u64).min(len - fill.done) as usize;
            let want = match fill.what {
                What::Data(_) => Want::Written,
                // Every block of the range is allocated by now (`allocate`):
                // None is an unwritten block, zeros already.
                What::Zeros => Want::Read,
            };
            let mapped = self.map(ino, inode, n, want)?;
            match (fill.what, mapped) {
                (What::Data(data), Some((block, _))) => {
                    // A new block is zeroed already.
                    match self.cache.modify_data(&mut self.order, u64::from(block)) {
                        Ok(bytes) => {
                            bytes[within..within + part].copy_from_slice(&data[fill.done as usize..][..part])
                        }
                        Err(e) => return Err(io_failed(self, e)),
                    }
                }
                (What::Zeros, Some((block, _))) => {
                    match self.cache.modify_data(&mut self.order, u64::from(block)) {
                        Ok(bytes) => bytes[within..within + part].fill(0),
                        Err(e) => return Err(io_failed(self, e)),
                    }
                }
                (What::Data(_), None) => return Err(Errno::IO),
                (What::Zeros, None) => {}
            }
            fill.done += part as u64;
        }
        Ok(())
    }

    /// Zeroes the bytes `start..end`, within one block of the file, if
    /// that block is allocated (a hole reads as zeros already).
    fn zero_within(&mut self, ino: u32, inode: &mut DiskInode, start: u64, end: u64) -> Result<()> {
        debug_assert!(start < end && start / B == (end - 1) / B, "within one block");
        let Some((block, _)) = self.bmap(ino, inode, start / B, false)? else { return Ok(()) };
        match self.cache.modify_data(&mut self.order, u64::from(block)) {
            Ok(bytes) => bytes[(start % B) as usize..][..(end - start) as usize].fill(0),
            Err(e) => return Err(io_failed(self, e)),
        }
        Ok(())
    }

    /// Frees the file's blocks `first..end`, their pointers gone from
    /// inode `ino` (written back by the caller's `put_inode` here): under
    /// `sync` the inode and the indirect blocks that lost pointers are
    /// written first, under `softdep` the blocks are held until no copy
    /// on the disk points to them, under `log` they wait for the commit.
    /// Truncation's order, a punched hole's too. Under `log`, a large
    /// range is shed a chunk at a time first (`Core::shed_in_chunks`),
    /// by the caller, before it changes anything else.
    pub fn release_blocks(&mut self, ino: u32, inode: &mut DiskInode, first: u64, end: u64) -> Result<()> {
        let freed = self.free_range(inode, first, end)?;
        let block = self.put_inode(ino, inode)?;
        self.ordered(block)?;
        for &changed in &freed.changed {
            self.ordered(changed)?;
        }
        let waits =
            std::iter::once(Wait::Inode(ino)).chain(freed.changed.into_iter().map(Wait::Indirect)).collect();
        self.free_blocks(freed.blocks, FreedFrom::File { pointers: freed.pointers }, waits)
    }

    /// fallocate(2) in `mode` over `offset..end` of regular file `ino`
    /// (the range checked by `fsapi::fallocate_end`). The inode is stored
    /// before it returns, failed or not; its times are the caller's.
    pub fn fallocate(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        mode: Fallocate,
        offset: u64,
        end: u64,
    ) -> Result<()> {
        // Past the last block bmap maps: bmap's own EFBIG, before anything
        // changes.
        if end > FILE_BYTES_MAX {
            return Err(Errno::FBIG);
        }
        match mode {
            Fallocate::PunchHole => self.punch(ino, inode, offset, end),
            Fallocate::Allocate { keep_size } => self.allocate(ino, inode, offset, end, keep_size, false),
            Fallocate::ZeroRange { keep_size } => self.allocate(ino, inode, offset, end, keep_size, true),
        }
    }

    /// Allocates the holes of `offset..end` (zeroed), then, when `zero`,
    /// zeroes the rest of the range; the size grows to `end` unless
    /// `keep_size`. ENOSPC leaves the file as it was: refused before
    /// anything is allocated when the holes outnumber the free blocks,
    /// and should the maps run out all the same (an indirect block more,
    /// counts a crash left off), the blocks this call allocated are given
    /// back before anything was zeroed (an indirect block it added stays,
    /// empty, unless the blocks given back spanned all of it).
    fn allocate(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        offset: u64,
        end: u64,
        keep_size: bool,
        zero: bool,
    ) -> Result<()> {
        let (first, last) = (offset / B, end.div_ceil(B));
        self.ensure_room(inode, first, last)?;
        let mut new = Vec::new();
        if let Err(e) = self.fill_holes(ino, inode, first, last, &mut new) {
            for run in new.chunk_by(|a, b| b == &(a + 1)) {
                self.shed_in_chunks(ino, inode, run[0], run[run.len() - 1] + 1)?;
                self.release_blocks(ino, inode, run[0], run[run.len() - 1] + 1)?;
            }
            self.put_inode(ino, inode)?;
            return Err(e);
        }
        if zero {
            // Every block is allocated now: nothing to fail for want of room.
            self.fill(ino, inode, offset, end - offset, &mut Fill::of(What::Zeros))?;
        }
        if !keep_size {
            inode.size = inode.size.max(end);
        }
        self.put_inode(ino, inode)?;
        Ok(())
    }

    /// Gives each hole among file blocks `first..end` a block marked
    /// unwritten, a holder's run at a time; pushes to `new` the file
    /// blocks it allocated. Under `log`, between runs, a full transaction
    /// is committed before it goes on (so that it stays whole).
    fn fill_holes(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        first: u64,
        end: u64,
        new: &mut Vec<u64>,
    ) -> Result<()> {
        let mut n = first;
        while n < end {
            if n > first && self.commit_due() {
                self.put_inode(ino, inode)?;
                if let Err(e) = self.commit_behind() {
                    return Err(io_failed(self, e));
                }
            }
            n = self.allocate_unwritten(ino, inode, n, end, new)?;
        }
        Ok(())
    }

    /// ENOSPC when the holes of blocks `first..end` outnumber the free
    /// blocks (under `softdep`, once the blocks it holds back are
    /// released).
    fn ensure_room(&mut self, inode: &DiskInode, first: u64, end: u64) -> Result<()> {
        let holes = self.holes(inode, first, end)?;
        if holes > self.sb.free_blocks && self.order.waiting() {
            self.softdep_sync()?;
        }
        if holes > self.sb.free_blocks {
            return Err(Errno::NOSPC);
        }
        Ok(())
    }

    /// Frees the blocks wholly inside `offset..end` and zeroes the range's
    /// bytes in the blocks at its edges, which stay; the size stays.
    fn punch(&mut self, ino: u32, inode: &mut DiskInode, offset: u64, end: u64) -> Result<()> {
        let (first, last) = (offset.div_ceil(B), end / B);
        if first < last {
            self.shed_in_chunks(ino, inode, first, last)?;
        }
        let mut edges = vec![offset / B, (end - 1) / B];
        edges.dedup();
        for n in edges {
            let (start, stop) = (offset.max(n * B), end.min((n + 1) * B));
            if stop - start < B {
                self.zero_within(ino, inode, start, stop)?;
            }
        }
        if first < last {
            return self.release_blocks(ino, inode, first, last);
        }
        self.put_inode(ino, inode)?;
        Ok(())
    }

    /// SEEK_DATA or SEEK_HOLE from `offset` in `inode`: data is an
    /// allocated block below the size, a hole an unallocated one or the
    /// end.
    pub fn seek(&mut self, inode: &DiskInode, offset: u64, whence: Whence) -> Result<u64> {
        fsapi::seek(inode.size, offset, whence, B, |from, end, data| self.next_block(inode, from, end, data))
    }
}
