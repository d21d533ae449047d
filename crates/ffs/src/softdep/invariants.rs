//! The rules checked again at the moment a metadata block is written,
//! from the bytes going out and the disk's copies, not from the event
//! bookkeeping the rules are decided with (`rules.rs`): a second,
//! simpler reading that catches a write the rules let through wrongly.
//! The buffer cache asks it of every metadata write in debug builds and
//! tests (`Ordering::assert_rules`). What it checks:
//!
//! - rule 1: a block pointer new to the disk (an inode's, an indirect
//!   block's) names a block whose bit is set in the bitmap on the disk;
//! - rule 2: an inode new to the disk has its bit set in the inode bitmap
//!   on the disk, and a new directory's (or long symbolic link's) first
//!   block has its bit set there too; and its slot lies within the ones
//!   its group's header on the disk counts (`inodes_initialized`);
//! - rule 3: an entry new to the disk (other than `.` and `..`) names an
//!   inode the disk holds, with a link count of at least one.
//!
//! Weaker than the rules (a block's first contents on the disk, a count
//! covering every entry, rules 4 and 5, need a record of events or a scan
//! of the disk), never stronger: what it refuses, the rules forbid.

use super::*;

/// Which rule a write would break, and how.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken {
    pub rule: u8,
    pub what: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rule {}: {}", self.rule, self.what)
    }
}

impl Softdep {
    /// Whether writing `image` as metadata block `block` keeps rules 1 to
    /// 3 as this module reads them.
    pub fn rules_hold(&self, blocks: &dyn Blocks, block: u64, image: &[u8]) -> Result<(), Broken> {
        let Some(disk) = self.on_disk(blocks, block) else { return Ok(()) };
        if self.is_inode_block(block) {
            return self.inodes_hold(blocks, block, image, &disk);
        }
        match self.kinds.get(&block) {
            Some(Kind::Dir) => self.entries_hold(blocks, image, &disk),
            Some(Kind::Indirect) => (0..POINTERS_PER_BLOCK as usize)
                .map(|k| (pointer_at(image, k), pointer_at(&disk, k)))
                .try_for_each(|(p, was)| self.pointer_holds(blocks, p, was, block)),
            Some(Kind::Symlink | Kind::Xattr) | None => Ok(()),
        }
    }

    /// Rules 1 and 2 for each slot of inode block `block`.
    fn inodes_hold(&self, blocks: &dyn Blocks, block: u64, image: &[u8], disk: &[u8]) -> Result<(), Broken> {
        let first = self.first_ino(block);
        for k in 0..INODES_PER_BLOCK as usize {
            let range = k * INODE_BYTES..(k + 1) * INODE_BYTES;
            if image[range.clone()] == disk[range.clone()] {
                continue;
            }
            let ino = first + k as u32;
            let Some(w) = used(ino, &image[range.clone()]) else { continue };
            let d = used(ino, &disk[range]);
            if d.is_none() {
                let g = (ino - 1) / self.sb.inodes_per_group;
                let bit = (ino - 1) % self.sb.inodes_per_group;
                if !self.bit_on_disk(blocks, self.inode_bitmap(ino), bit) {
                    let what = format!("inode {ino} written before its bit in group {g}'s inode bitmap");
                    return Err(Broken { rule: 2, what });
                }
                if !self.slot_counted_on_disk(blocks, g, bit) {
                    let what =
                        format!("inode {ino} written past the slots group {g}'s header on the disk counts");
                    return Err(Broken { rule: 2, what });
                }
                let long_link = w.kind_bits() == S_IFLNK && w.size as usize > INLINE_SYMLINK_BYTES;
                if (w.kind_bits() == S_IFDIR || long_link) && !self.block_bit_on_disk(blocks, w.direct[0]) {
                    let what = format!(
                        "inode {ino} written before its first block {}'s bit in its bitmap",
                        w.direct[0]
                    );
                    return Err(Broken { rule: 2, what });
                }
            }
            let was = |f: fn(&DiskInode) -> Vec<u32>| d.as_ref().map(f).unwrap_or_default();
            let pointers = |i: &DiskInode| {
                let mut all = i.direct.to_vec();
                all.extend([i.single, i.double, i.xattr]);
                all
            };
            let before = was(pointers);
            for (k, p) in pointers(&w).into_iter().enumerate() {
                self.pointer_holds(blocks, p, before.get(k).copied().unwrap_or(0), block)?;
            }
        }
        Ok(())
    }

    /// Rule 1 for a pointer `p` in `holder` whose copy on the disk is `was`.
    fn pointer_holds(&self, blocks: &dyn Blocks, p: u32, was: u32, holder: u64) -> Result<(), Broken> {
        if p == 0 || p == was || self.block_bit_on_disk(blocks, p) {
            return Ok(());
        }
        Err(Broken {
            rule: 1,
            what: format!("a pointer to block {p} in block {holder} written before the block's bit"),
        })
    }

    /// Rule 3 for each entry of directory block `image` new to the disk.
    fn entries_hold(&self, blocks: &dyn Blocks, image: &[u8], disk: &[u8]) -> Result<(), Broken> {
        let on_disk = records(disk);
        for (at, rec) in records(image) {
            if rec.name == b"." || rec.name == b".." {
                continue;
            }
            let same = |&&(there, r): &&(usize, RecordRef<'_>)| {
                there == at && r.ino == rec.ino && r.name == rec.name
            };
            if on_disk.iter().any(|r| same(&r)) {
                continue;
            }
            let (inode_block, slot) = self.sb.inode_place(rec.ino);
            let held = self.on_disk(blocks, inode_block).and_then(|b| links(&b[slot..slot + INODE_BYTES]));
            if held.is_none_or(|n| n == 0) {
                let name = String::from_utf8_lossy(rec.name);
                let what = format!("the entry {name:?} written before inode {} is on the disk", rec.ino);
                return Err(Broken { rule: 3, what });
            }
        }
        Ok(())
    }

    fn block_bit_on_disk(&self, blocks: &dyn Blocks, pointer: u32) -> bool {
        let block = block_of(pointer);
        let Some(within) = self.within_group(u64::from(block)) else { return false };
        self.bit_on_disk(blocks, self.block_bitmap(block), within as u32)
    }

    /// Whether bit `bit` of bitmap `map` is set in the disk's copy.
    /// Whether group `g`'s header on the disk counts inode slot `slot` (a
    /// header that fails its checks counts every slot, as fsck reads it).
    fn slot_counted_on_disk(&self, blocks: &dyn Blocks, g: u32, slot: u32) -> bool {
        let Some(b) = self.on_disk(blocks, self.sb.group_start(g)) else { return true };
        crate::format::GroupHeader::decode(&b, g, &self.sb, "").map_or(true, |h| slot < h.inodes_initialized)
    }

    fn bit_on_disk(&self, blocks: &dyn Blocks, map: u64, bit: u32) -> bool {
        self.on_disk(blocks, map).is_some_and(|b| b[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }
}
