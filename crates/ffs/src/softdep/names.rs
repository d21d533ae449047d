//! New names and moved directories not yet on the disk: what a file's
//! fsync makes durable with it (FreeBSD's `diradd`s), and the moves whose
//! crash the superblock's mark covers (`Core::mark_moving`).

use super::*;

impl Softdep {
    /// An entry naming `ino` made in directory `dir`'s block `block` (a
    /// create, a link, a mkdir, a rename's new name): a file's fsync makes
    /// it durable too.
    pub fn named(&mut self, ino: u32, dir: u32, block: u64) {
        let names = self.names.entry(ino).or_default();
        if !names.contains(&(dir, block)) {
            names.push((dir, block));
        }
    }

    /// The entries made for `ino` that may not be on the disk yet, as
    /// (directory, block); some may no longer name it in memory.
    pub fn names_of(&self, ino: u32) -> &[(u32, u64)] {
        self.names.get(&ino).map_or(&[], |n| &n[..])
    }

    /// Drops the entries whose blocks the disk holds as memory does: on
    /// the disk if memory still names the inode there, gone from memory
    /// otherwise. (A block with no shadow and no write in flight is on
    /// the disk as memory holds it.)
    pub(super) fn prune_names(&mut self) {
        let (durable, open, sealed) = (&self.durable, &self.open, &self.sealed);
        let unsettled = |b: &u64| {
            durable.contains_key(b)
                || open.inflight.contains_key(b)
                || sealed.as_ref().is_some_and(|e| e.inflight.contains_key(b))
        };
        self.names.retain(|_, names| {
            names.retain(|(_, b)| unsettled(b));
            !names.is_empty()
        });
        self.names_mark = (2 * self.names.len()).max(NAMES_MARK_MIN);
    }

    /// A directory moved between directories.
    pub fn moved(&mut self, m: Move) {
        self.moves.push(m);
    }

    /// The blocks that hold the moves waiting (their entries, their
    /// `..`, and the inodes those wait on: the directory's and both
    /// parents').
    pub fn move_blocks(&self) -> Vec<u64> {
        let inode_block = |ino: u32| self.sb.inode_place(ino).0;
        let each = self.moves.iter().flat_map(|m| {
            [m.old.0, m.new, m.dotdot.0, inode_block(m.ino), inode_block(m.from), inode_block(m.to)]
        });
        each.collect()
    }

    /// Whether every directory moved between directories is on the disk
    /// whole (the moves that are, forgotten). Asked right after a flush.
    pub fn moves_settled(&mut self, blocks: &dyn Blocks) -> bool {
        let moves = std::mem::take(&mut self.moves);
        self.moves = moves.into_iter().filter(|m| !self.move_on_disk(blocks, m)).collect();
        self.moves.is_empty()
    }

    /// Whether the disk holds move `m` whole: the old entry gone (or
    /// naming the directory again in memory too), the new one there (if
    /// memory still has it), and `..` as memory has it.
    pub(super) fn move_on_disk(&self, blocks: &dyn Blocks, m: &Move) -> bool {
        let on_disk = |(block, at): (u64, usize)| {
            self.on_disk(blocks, block).and_then(|b| record_at(&b, at).map(|r| r.ino))
        };
        let in_memory =
            |(block, at): (u64, usize)| blocks.memory(block).and_then(|b| record_at(&b, at).map(|r| r.ino));
        let old_gone = on_disk(m.old) != Some(m.ino) || in_memory(m.old) == Some(m.ino);
        let new_there =
            !self.block_names(blocks, m.new, m.ino, false) || self.block_names(blocks, m.new, m.ino, true);
        old_gone && new_there && on_disk(m.dotdot) == in_memory(m.dotdot)
    }

    /// Whether directory block `block` names `ino`, in memory (`disk`
    /// false) or on the disk. Asked of the disk right after a flush, when
    /// no write is in flight.
    pub fn block_names(&self, blocks: &dyn Blocks, block: u64, ino: u32, disk: bool) -> bool {
        let bytes = if disk { self.on_disk(blocks, block) } else { blocks.memory(block) };
        bytes.is_some_and(|b| records(&b).iter().any(|(_, r)| r.ino == ino))
    }

    /// Whether the disk holds inode `ino` as memory does (or both hold
    /// none), a count higher by removals not yet on the disk allowed.
    /// Asked right after a flush, when no write is in flight.
    pub fn inode_on_disk(&self, blocks: &dyn Blocks, ino: u32) -> bool {
        match self.inode_both(blocks, ino) {
            Some((None, None)) => true,
            Some((Some(m), Some(d))) => d.nlink >= m.nlink && DiskInode { nlink: m.nlink, ..d } == m,
            _ => false,
        }
    }

    /// The inodes directory block `block` names in memory where the disk
    /// does not (new entries, rolled back or not yet written), `.` and
    /// `..` aside.
    pub fn entries_new(&self, blocks: &dyn Blocks, block: u64) -> Vec<u32> {
        let (Some(memory), Some(disk)) = (blocks.memory(block), self.on_disk(blocks, block)) else {
            return Vec::new();
        };
        let on_disk = records(&disk);
        let new = records(&memory).into_iter().filter(|(at, r)| {
            r.name != b"." && r.name != b".." && !on_disk.iter().any(|(a, d)| a == at && d.ino == r.ino)
        });
        new.map(|(_, r)| r.ino).collect()
    }
}
