//! What a metadata block's write may carry (rules 1 to 3): the disk's copy of
//! each block against memory's, and the updates rolled back in the copy
//! written while what they depend on is not on the disk.

use super::*;

impl Softdep {
    /// What the disk holds for `block`.
    pub(super) fn on_disk<'a>(&'a self, blocks: &'a dyn Blocks, block: u64) -> Option<Cow<'a, [u8]>> {
        match self.durable.get(&block) {
            Some(shadow) => Some(Cow::Borrowed(shadow.bytes())),
            None => blocks.memory(block),
        }
    }

    /// Inode `ino` in memory and on the disk.
    pub(super) fn inode_both(
        &self,
        blocks: &dyn Blocks,
        ino: u32,
    ) -> Option<(Option<DiskInode>, Option<DiskInode>)> {
        let (block, at) = self.sb.inode_place(ino);
        let memory = blocks.memory(block)?;
        let disk = self.on_disk(blocks, block)?;
        Some((used(ino, &memory[at..at + INODE_BYTES]), used(ino, &disk[at..at + INODE_BYTES])))
    }

    /// Rule 3: inode `ino` is on the disk with a count covering every
    /// entry memory gives it and every removal not yet on the disk.
    pub(super) fn links_on_disk(&self, blocks: &dyn Blocks, ino: u32) -> bool {
        self.links_on_disk_memo(blocks, ino, &mut InodeBlockMemo::default())
    }

    /// [`Softdep::links_on_disk`], reading the inode's block from memory
    /// only when `memo` does not hold it already.
    pub(super) fn links_on_disk_memo<'a>(
        &self,
        blocks: &'a dyn Blocks,
        ino: u32,
        memo: &mut InodeBlockMemo<'a>,
    ) -> bool {
        let (block, at) = self.sb.inode_place(ino);
        let slot = at..at + INODE_BYTES;
        let Some(disk) = self.durable.get(&block) else {
            // No shadow: the disk holds what memory does (a block not in
            // the cache is clean, and an entry memory holds names an inode
            // in use).
            return self.pending(ino) == 0 && blocks.cached(block).is_none_or(|m| links(&m[slot]).is_some());
        };
        if memo.bytes.is_none() || memo.block != block {
            *memo = InodeBlockMemo { block, bytes: blocks.memory(block) };
        }
        let Some(memory) = &memo.bytes else { return false };
        match (links(&memory[slot.clone()]), links(&disk.bytes()[slot])) {
            (Some(memory), Some(disk)) => disk >= memory + self.pending(ino),
            _ => false,
        }
    }

    /// The image to write for metadata block `block` whose memory copy is
    /// `memory`: None when memory can go as it is.
    pub fn image(&self, blocks: &dyn Blocks, block: u64, memory: &[u8]) -> Image {
        let Some(disk) = self.durable.get(&block).map(Shadow::bytes) else { return Image::Memory };
        let rolled = if self.is_inode_block(block) {
            return self.inode_image_or_probe::<false>(blocks, block, memory, disk);
        } else {
            match self.kinds.get(&block) {
                Some(Kind::Dir) => self.dir_image(blocks, memory, disk),
                Some(Kind::Indirect) => self.indirect_image(memory, disk),
                Some(Kind::Symlink | Kind::Xattr) | None => None,
            }
        };
        rolled.map_or(Image::Memory, Image::Rolled)
    }

    /// Whether metadata block `block`, whose memory copy is `memory`, can
    /// go as memory holds it (`image` would say `Image::Memory`). For an
    /// inode block, told without making the image: the look stops at the
    /// first slot that cannot go so (a write held back until it can needs
    /// no more, and the image is made again once it can; a removal holds
    /// back thousands of inode blocks, each a cold copy in memory and on
    /// the disk).
    pub fn goes_as_memory(&self, blocks: &dyn Blocks, block: u64, memory: &[u8]) -> bool {
        match self.durable.get(&block).map(Shadow::bytes) {
            None => true,
            Some(disk) if self.is_inode_block(block) => {
                self.inode_image_or_probe::<true>(blocks, block, memory, disk) == Image::Memory
            }
            Some(_) => self.image(blocks, block, memory) == Image::Memory,
        }
    }

    /// What the disk holds for metadata block `block`, when a shadow says
    /// it differs from memory.
    pub fn durable_bytes(&self, block: u64) -> Option<&[u8]> {
        self.durable.get(&block).map(Shadow::bytes)
    }

    /// An inode block's image. While every slot that may not go as memory
    /// holds it goes as the disk holds it, nothing is copied: a block whose
    /// every change waits (freed inodes whose entries are still on the
    /// disk, new ones whose bits are not) is the disk's own image.
    ///
    /// With `PROBE`, the first slot that cannot go as memory holds it ends
    /// the look, and what it returns means only "not `Image::Memory`"
    /// (`Softdep::goes_as_memory`).
    pub(super) fn inode_image_or_probe<const PROBE: bool>(
        &self,
        blocks: &dyn Blocks,
        block: u64,
        memory: &[u8],
        disk: &[u8],
    ) -> Image {
        let first = self.first_ino(block);
        let mut out: Option<AlignedBuf> = None;
        let mut as_disk = 0u32;
        let mut as_memory = false;
        let mut slot = [0u8; INODE_BYTES];
        const _: () = assert!(INODES_PER_BLOCK <= u32::BITS);
        for k in 0..INODES_PER_BLOCK as usize {
            let ino = first + k as u32;
            let range = k * INODE_BYTES..(k + 1) * INODE_BYTES;
            let same = memory[range.clone()] == disk[range.clone()];
            let pending = self.pending(ino);
            if same && pending == 0 {
                continue;
            }
            let safe = self.inode_slot(
                blocks,
                ino,
                &memory[range.clone()],
                &disk[range.clone()],
                pending,
                &mut slot,
            );
            if *safe == memory[range.clone()] {
                as_memory |= !same;
                continue;
            }
            if PROBE {
                return Image::Durable;
            }
            if out.is_none() && *safe == disk[range.clone()] {
                as_disk |= 1 << k;
                continue;
            }
            let bytes = out.get_or_insert_with(|| with_disk_slots(memory, disk, as_disk));
            bytes[range].copy_from_slice(safe);
        }
        match out {
            Some(bytes) => Image::Rolled(bytes),
            None if as_disk == 0 => Image::Memory,
            // Every slot that differs goes as the disk holds it.
            None if !as_memory => Image::Durable,
            None => Image::Rolled(with_disk_slots(memory, disk, as_disk)),
        }
    }

    /// The copy of inode `ino` the disk may take now: `memory`, `disk`,
    /// or one made in `slot`.
    pub(super) fn inode_slot<'a>(
        &self,
        blocks: &dyn Blocks,
        ino: u32,
        memory: &'a [u8],
        disk: &'a [u8],
        pending: u32,
        slot: &'a mut [u8; INODE_BYTES],
    ) -> &'a [u8] {
        // The commonest wait, told without decoding: a new inode whose
        // bitmap bit is not on the disk yet.
        if let Some(at) = self.fresh_inodes.get(u64::from(ino)) {
            if slot_is_free(disk) && !self.inode_maps_durable(ino, at) {
                return disk;
            }
        }
        let Some(m) = used(ino, memory) else {
            // Freed in memory: the disk keeps it whole while an entry
            // naming it may still be there (rule 4).
            return if pending > 0 && !slot_is_free(disk) { disk } else { memory };
        };
        let d = used(ino, disk);
        let new = d.is_none() || self.fresh_inodes.get(u64::from(ino)).is_some();
        if new && !self.ready(ino, &m) {
            return disk;
        }
        let mut w = m.clone();
        w.nlink = u16::try_from(u32::from(m.nlink) + pending).unwrap_or(u16::MAX);
        let was = |now: u32, then: Option<u32>| now != 0 && then != Some(now) && !self.settled(now);
        for k in 0..DIRECT_POINTERS {
            let then = d.as_ref().map(|d| d.direct[k]);
            if was(m.direct[k], then) {
                w.direct[k] = rolled_back(m.direct[k], then.unwrap_or(0));
            }
        }
        if was(m.single, d.as_ref().map(|d| d.single)) {
            w.single = 0;
        }
        if was(m.double, d.as_ref().map(|d| d.double)) {
            w.double = 0;
        }
        // A new attribute block replaces the one the disk points to (or
        // none): until it is settled, the disk keeps the old one, which
        // is held until no copy on the disk points to it (rule 5).
        if was(m.xattr, d.as_ref().map(|d| d.xattr)) {
            w.xattr = d.as_ref().map_or(0, |d| d.xattr);
        }
        if m.kind_bits() == S_IFDIR {
            w.size = w.size.min(self.mapped_prefix(blocks, &w));
        }
        if w == m {
            return memory;
        }
        w.encode(ino, slot);
        slot
    }

    /// Rule 2 for a new inode.
    pub(super) fn ready(&self, ino: u32, m: &DiskInode) -> bool {
        if let Some(at) = self.fresh_inodes.get(u64::from(ino)) {
            if !self.inode_maps_durable(ino, at) {
                return false;
            }
        }
        let dir = m.kind_bits() == S_IFDIR;
        let long_link = m.kind_bits() == S_IFLNK && m.size as usize > INLINE_SYMLINK_BYTES;
        if (dir || long_link) && (m.direct[0] == 0 || !self.settled(m.direct[0])) {
            return false;
        }
        true
    }

    /// Rule 3 for an entry naming directory `ino`: its `..` names a parent
    /// whose count, raised for that `..`, is on the disk (or itself).
    /// `owner`: the directory holding the entry, when known, which is what
    /// its `..` names in memory (a directory has one entry, and a rename
    /// moves it and changes its `..` together): nothing is read for it.
    pub(super) fn parent_counted(&self, blocks: &dyn Blocks, ino: u32, owner: Option<u32>) -> bool {
        if let Some(parent) = owner {
            return parent == ino || self.links_on_disk(blocks, parent);
        }
        let Some((Some(m), _)) = self.inode_both(blocks, ino) else { return false };
        if m.kind_bits() != S_IFDIR {
            return true;
        }
        let parent = blocks.memory(u64::from(m.direct[0])).and_then(|b| record_at(&b, 12).map(|r| r.ino));
        parent.is_some_and(|p| p == ino || self.links_on_disk(blocks, p))
    }

    /// The bytes of a directory the disk can map without a hole: the
    /// blocks from the first whose pointer is not written.
    pub(super) fn mapped_prefix(&self, blocks: &dyn Blocks, w: &DiskInode) -> u64 {
        let count = w.size / BLOCK_BYTES as u64;
        let single = (w.single != 0).then(|| self.on_disk(blocks, u64::from(w.single))).flatten();
        let mut n = 0u64;
        while n < count {
            let p = if n < DIRECT_POINTERS as u64 {
                w.direct[n as usize]
            } else if n < DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK {
                single.as_ref().map_or(0, |s| pointer_at(s, (n - DIRECT_POINTERS as u64) as usize))
            } else {
                0
            };
            if p == 0 {
                break;
            }
            n += 1;
        }
        n * BLOCK_BYTES as u64
    }

    pub(super) fn dir_image(&self, blocks: &dyn Blocks, memory: &[u8], disk: &[u8]) -> Option<AlignedBuf> {
        let mut out: Option<AlignedBuf> = None;
        let on_disk = records(disk);
        let mut next_on_disk = on_disk.iter().peekable();
        let mut memo = InodeBlockMemo::default();
        // The directory this block belongs to, named by its `.` (in its
        // first block): what every subdirectory named here has as `..`.
        let mut owner = None;
        for (here, rec) in records(memory) {
            if rec.name == b"." {
                owner = Some(rec.ino);
                continue;
            }
            // The disk's record at the same place, if it has one.
            while next_on_disk.next_if(|(at, _)| *at < here).is_some() {}
            let before = next_on_disk.peek().filter(|(at, _)| *at == here).map(|(_, r)| *r);
            if before.is_some_and(|b| b.ino == rec.ino && b.name == rec.name) {
                continue;
            }
            // A new directory's `..`: its entry in the parent waits for the
            // parent's count (rule 3); until then nothing reaches it.
            if rec.name == b".." && before.is_none() {
                continue;
            }
            let directory = rec.kind == DT_DIR && rec.name != b"..";
            if self.links_on_disk_memo(blocks, rec.ino, &mut memo)
                && (!directory || self.parent_counted(blocks, rec.ino, owner))
            {
                continue;
            }
            let bytes = out.get_or_insert_with(|| block_copy(memory));
            let (ino, kind) = match before.filter(|b| b.name == rec.name) {
                Some(b) => (b.ino, b.kind),
                None => (0, 0),
            };
            bytes[here..here + 4].copy_from_slice(&ino.to_le_bytes());
            bytes[here + 7] = kind;
        }
        out
    }

    pub(super) fn indirect_image(&self, memory: &[u8], disk: &[u8]) -> Option<AlignedBuf> {
        let mut out: Option<AlignedBuf> = None;
        for k in 0..POINTERS_PER_BLOCK as usize {
            let p = pointer_at(memory, k);
            let then = pointer_at(disk, k);
            if p != 0 && p != then && !self.settled(p) {
                set_pointer(out.get_or_insert_with(|| block_copy(memory)), k, rolled_back(p, then));
            }
        }
        out
    }
}

/// What a data pointer `now` not yet settled is written as, where the
/// disk holds `then`: the same block still marked unwritten when that is
/// what the disk has (its first write not on the disk yet: the block
/// stays allocated, reading as zeros), else a hole.
fn rolled_back(now: u32, then: u32) -> u32 {
    if then == now | UNWRITTEN {
        then
    } else {
        0
    }
}
