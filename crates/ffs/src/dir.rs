//! Directories as FFS keeps them: 4 KiB blocks tiled by records; a new
//! entry takes the first record with room, a removed one's space joins
//! the record before it, and no entry ever moves, so an entry's byte
//! offset is a `readdir` cookie that survives removals. Directories over a
//! block get an index in memory (name to offset) on first lookup.

use rustc_hash::FxHashMap as HashMap;

use fsapi::Errno;

use crate::core::{io_failed, Core};
use crate::format::{record_bytes, DirRecord, DiskInode, RecordRef, BLOCK_BYTES, DIR_CHUNK_BYTES, DT_DIR};
use crate::softdep::{Gone, Kind};

const BLOCK: u64 = BLOCK_BYTES as u64;

/// An empty record over a whole chunk.
fn empty_chunk() -> DirRecord {
    DirRecord { ino: 0, reclen: DIR_CHUNK_BYTES as u16, kind: 0, name: Vec::new() }
}

/// A record with room for a new entry.
struct Room {
    n: u64,
    block: u64,
    at: usize,
    rec: DirRecord,
    used: usize,
}

/// A live entry and where it is.
#[derive(Clone, Debug)]
pub struct Found {
    pub ino: u32,
    pub kind: u8,
    /// Byte offset of the record in the directory.
    pub offset: u64,
}

impl Core {
    /// The device block of block `n` of directory `dir`.
    fn dir_block(&mut self, dir: u32, inode: &mut DiskInode, n: u64) -> Result<u64, Errno> {
        match self.bmap(dir, inode, n, false)? {
            Some((block, _)) => Ok(u64::from(block)),
            None => Err(Errno::IO),
        }
    }

    /// The record at byte `at` of directory block `block`, copied out of
    /// the cache.
    fn dir_record(&mut self, block: u64, at: usize) -> Result<DirRecord, Errno> {
        let bytes = match self.cache.read(&mut self.order, block) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        DirRecord::peek(bytes, at).map(RecordRef::to_owned).ok_or(Errno::IO)
    }

    /// Calls `f` with each live record of directory `dir` from byte
    /// `from` on, `.` and `..` included, until it returns false. A record
    /// that does not parse ends its block's walk (fsck reports it).
    pub fn dir_walk(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        from: u64,
        f: &mut dyn FnMut(RecordRef<'_>, u64) -> bool,
    ) -> Result<(), Errno> {
        let blocks = inode.size / BLOCK;
        for n in from / BLOCK..blocks {
            let block = self.dir_block(dir, inode, n)?;
            // Read in place: the walk changes nothing.
            let bytes = match self.cache.read(&mut self.order, block) {
                Ok(b) => b,
                Err(e) => return Err(io_failed(self, e)),
            };
            let mut at = 0usize;
            while at < BLOCK_BYTES {
                let Some(rec) = DirRecord::peek(bytes, at) else {
                    // A chunk that does not parse is skipped (fsck
                    // reports it); the next chunk stands on its own.
                    at = (at / DIR_CHUNK_BYTES + 1) * DIR_CHUNK_BYTES;
                    continue;
                };
                let offset = n * BLOCK + at as u64;
                if rec.ino != 0 && offset >= from && !f(rec, offset) {
                    return Ok(());
                }
                at += rec.reclen as usize;
            }
        }
        Ok(())
    }

    /// The entry `name` of directory `dir`.
    pub fn dir_lookup(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        name: &[u8],
    ) -> Result<Option<Found>, Errno> {
        if inode.size > BLOCK {
            if !self.dir_index.contains_key(&dir) {
                let mut index = HashMap::default();
                self.dir_walk(dir, inode, 0, &mut |rec, offset| {
                    index.insert(rec.name.to_vec(), offset);
                    true
                })?;
                self.dir_index.insert(dir, index);
            }
            let Some(&offset) = self.dir_index.get(&dir).and_then(|i| i.get(name)) else { return Ok(None) };
            let block = self.dir_block(dir, inode, offset / BLOCK)?;
            let rec = self.dir_record(block, (offset % BLOCK) as usize)?;
            return Ok(Some(Found { ino: rec.ino, kind: rec.kind, offset }));
        }
        let mut found = None;
        self.dir_walk(dir, inode, 0, &mut |rec, offset| {
            if rec.name == name {
                found = Some(Found { ino: rec.ino, kind: rec.kind, offset });
            }
            found.is_none()
        })?;
        Ok(found)
    }

    /// The first record of directory `dir` with room for an entry of
    /// `name_len` bytes: (block index, device block, byte in block, the
    /// record, its bytes in use). None: the directory must grow.
    fn find_room(&mut self, dir: u32, inode: &mut DiskInode, name_len: usize) -> Result<Option<Room>, Errno> {
        let need = record_bytes(name_len);
        for n in 0..inode.size / BLOCK {
            let block = self.dir_block(dir, inode, n)?;
            let bytes = match self.cache.read(&mut self.order, block) {
                Ok(b) => b,
                Err(e) => return Err(io_failed(self, e)),
            };
            let mut at = 0usize;
            while at < BLOCK_BYTES {
                let Some(rec) = DirRecord::peek(bytes, at) else {
                    at = (at / DIR_CHUNK_BYTES + 1) * DIR_CHUNK_BYTES;
                    continue;
                };
                let used = if rec.ino == 0 { 0 } else { record_bytes(rec.name.len()) };
                if rec.reclen as usize - used >= need {
                    return Ok(Some(Room { n, block, at, rec: rec.to_owned(), used }));
                }
                at += rec.reclen as usize;
            }
        }
        Ok(None)
    }

    /// Whether directory `dir` can take an entry of `name_len` bytes
    /// without growing (fsck adds to lost+found only so: it must not
    /// allocate from maps it has not rebuilt yet).
    pub fn dir_has_room(&mut self, dir: u32, inode: &mut DiskInode, name_len: usize) -> Result<bool, Errno> {
        Ok(self.find_room(dir, inode, name_len)?.is_some())
    }

    /// Adds `name -> ino` to directory `dir` (the name must not be there).
    /// Returns the device block written, for the policy's ordering.
    pub fn dir_add(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        name: &[u8],
        ino: u32,
        kind: u8,
    ) -> Result<u64, Errno> {
        if let Some(Room { n, block, at, rec, used }) = self.find_room(dir, inode, name.len())? {
            self.place(block, at, &rec, used, name, ino, kind)?;
            self.named(ino, dir, block);
            self.index_insert(dir, name, n * BLOCK + (at + used) as u64);
            return Ok(block);
        }
        let blocks = inode.size / BLOCK;
        // No room: a new block of empty chunks, the entry in the first.
        let (block, _) = self.bmap(dir, inode, blocks, true)?.ok_or(Errno::IO)?;
        inode.size += BLOCK;
        self.dir_empty_block(block)?;
        let rec = DirRecord { ino, reclen: DIR_CHUNK_BYTES as u16, kind, name: name.to_vec() };
        match self.cache.modify(&mut self.order, u64::from(block)) {
            Ok(bytes) => rec.write(bytes, 0),
            Err(e) => return Err(io_failed(self, e)),
        }
        self.added(u64::from(block), 0, ino);
        self.named(ino, dir, u64::from(block));
        self.index_insert(dir, name, blocks * BLOCK);
        Ok(u64::from(block))
    }

    /// Puts the new entry into record `rec` at `at` of `block`: into it
    /// if empty, else into its slack after its `used` bytes.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        block: u64,
        at: usize,
        rec: &DirRecord,
        used: usize,
        name: &[u8],
        ino: u32,
        kind: u8,
    ) -> Result<(), Errno> {
        self.order.set_kind(block, Kind::Dir);
        let bytes = match self.cache.modify(&mut self.order, block) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        if used == 0 {
            DirRecord { ino, reclen: rec.reclen, kind, name: name.to_vec() }.write(bytes, at);
        } else {
            DirRecord { reclen: used as u16, ..rec.clone() }.write(bytes, at);
            let new = DirRecord { ino, reclen: rec.reclen - used as u16, kind, name: name.to_vec() };
            new.write(bytes, at + used);
        }
        self.added(block, at + used, ino);
        Ok(())
    }

    /// Under `softdep`: an entry naming `ino` is at byte `at` of `block`.
    fn added(&mut self, block: u64, at: usize, ino: u32) {
        self.order.added(block, at, ino);
    }

    /// Under `softdep`: a new name of `ino` is in `dir`'s `block` (what
    /// a per-file fsync makes durable with the file).
    fn named(&mut self, ino: u32, dir: u32, block: u64) {
        self.order.named(ino, dir, block);
    }

    /// Under `softdep`: the entry `rec` at byte `at` of `block` goes (a
    /// directory's counts its own `.` too).
    fn entry_gone(&mut self, block: u64, at: usize, rec: &DirRecord) {
        let weight = if rec.kind == DT_DIR && rec.name != b".." { 2 } else { 1 };
        self.order.removed(rec.ino, weight, Gone { block, at, names: rec.ino });
    }

    fn index_insert(&mut self, dir: u32, name: &[u8], offset: u64) {
        if let Some(index) = self.dir_index.get_mut(&dir) {
            index.insert(name.to_vec(), offset);
        }
    }

    /// Removes the entry at byte `offset` of directory `dir`: its space
    /// joins the record before it in the block (or, first in the block, it
    /// becomes an empty record). Returns the device block written.
    pub fn dir_remove(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        name: &[u8],
        offset: u64,
    ) -> Result<u64, Errno> {
        let block = self.dir_block(dir, inode, offset / BLOCK)?;
        let target = (offset % BLOCK) as usize;
        let bytes = match self.cache.read(&mut self.order, block) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        // Its space joins the record before it in its chunk.
        let (mut at, mut previous) = (target - target % DIR_CHUNK_BYTES, None);
        while at < target {
            let rec = DirRecord::peek(bytes, at).ok_or(Errno::IO)?;
            previous = Some((at, rec));
            at += rec.reclen as usize;
        }
        let previous = previous.map(|(at, rec)| (at, rec.to_owned()));
        let rec = DirRecord::peek(bytes, target).map(RecordRef::to_owned).ok_or(Errno::IO)?;
        self.entry_gone(block, target, &rec);
        self.order.set_kind(block, Kind::Dir);
        let out = match self.cache.modify(&mut self.order, block) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        match previous {
            Some((p, prev)) => {
                let merged = DirRecord { reclen: prev.reclen + rec.reclen, ..prev };
                merged.write(out, p);
            }
            None => DirRecord { ino: 0, reclen: rec.reclen, kind: 0, name: Vec::new() }.write(out, target),
        }
        if let Some(index) = self.dir_index.get_mut(&dir) {
            index.remove(name);
        }
        Ok(block)
    }

    /// Rewrites the inode of the entry at `offset` (a rename over an
    /// existing name, `..` of a moved directory). Returns the block.
    pub fn dir_retarget(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        offset: u64,
        ino: u32,
        kind: u8,
    ) -> Result<u64, Errno> {
        let block = self.dir_block(dir, inode, offset / BLOCK)?;
        let at = (offset % BLOCK) as usize;
        let rec = self.dir_record(block, at)?;
        if rec.ino != ino {
            self.entry_gone(block, at, &rec);
        }
        if rec.name != b".." {
            self.named(ino, dir, block);
        }
        self.order.set_kind(block, Kind::Dir);
        match self.cache.modify(&mut self.order, block) {
            Ok(out) => DirRecord { ino, kind, ..rec }.write(out, at),
            Err(e) => return Err(io_failed(self, e)),
        }
        self.added(block, at, ino);
        Ok(block)
    }

    /// Whether directory `dir` holds nothing but `.` and `..`.
    pub fn dir_is_empty(&mut self, dir: u32, inode: &mut DiskInode) -> Result<bool, Errno> {
        let mut empty = true;
        self.dir_walk(dir, inode, 0, &mut |rec, _| {
            empty = rec.name == b"." || rec.name == b"..";
            empty
        })?;
        Ok(empty)
    }

    /// The first block of a new directory: `.` and `..`.
    pub fn dir_init(&mut self, block: u32, ino: u32, parent: u32) -> Result<(), Errno> {
        self.order.set_kind(u64::from(block), Kind::Dir);
        let bytes = match self.cache.fresh(&mut self.order, u64::from(block)) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        let dot = DirRecord { ino, reclen: 12, kind: DT_DIR, name: b".".to_vec() };
        dot.write(bytes, 0);
        let dotdot = DirRecord {
            ino: parent,
            reclen: (DIR_CHUNK_BYTES - 12) as u16,
            kind: DT_DIR,
            name: b"..".to_vec(),
        };
        dotdot.write(bytes, 12);
        for chunk in 1..BLOCK_BYTES / DIR_CHUNK_BYTES {
            empty_chunk().write(bytes, chunk * DIR_CHUNK_BYTES);
        }
        Ok(())
    }

    /// A directory block of empty chunks (a zeroed block is not one: a
    /// record of length zero does not parse).
    pub fn dir_empty_block(&mut self, block: u32) -> Result<(), Errno> {
        self.order.set_kind(u64::from(block), Kind::Dir);
        let bytes = match self.cache.fresh(&mut self.order, u64::from(block)) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        for chunk in 0..BLOCK_BYTES / DIR_CHUNK_BYTES {
            empty_chunk().write(bytes, chunk * DIR_CHUNK_BYTES);
        }
        Ok(())
    }

    /// Forgets the index of a directory that is gone.
    pub fn drop_index(&mut self, dir: u32) {
        self.dir_index.remove(&dir);
    }
}
