//! Allocation, as FFS does it: a new directory goes to a group with more
//! free inodes than average and the fewest directories; a file to its
//! directory's group; a block next to the block before it. Bitmaps and
//! counts are delayed writes under every policy (fsck rebuilds them).

use fsapi::Errno;

use crate::core::{io_failed, Core};
use crate::softdep::{FreedFrom, Wait};

/// Bitmap blocks of a group: blocks at +1, inodes at +2.
const BLOCK_BITMAP: u64 = 1;
const INODE_BITMAP: u64 = 2;

fn bit(map: &[u8], i: u32) -> bool {
    map[(i / 8) as usize] & (1 << (i % 8)) != 0
}

/// The first clear bit of `map` in `from..limit`, then in `floor..from`
/// (every bit below `floor` is set), passing over those `skip` names.
fn find_clear(map: &[u8], from: u32, limit: u32, floor: u32, skip: impl Fn(u32) -> bool) -> Option<u32> {
    let scan = |lo: u32, hi: u32| {
        let mut i = lo;
        while i < hi {
            if i % 8 == 0 && i + 8 <= hi && map[(i / 8) as usize] == 0xff {
                i += 8;
                continue;
            }
            if !bit(map, i) && !skip(i) {
                return Some(i);
            }
            i += 1;
        }
        None
    };
    let from = from.max(floor).min(limit);
    scan(from, limit).or_else(|| scan(floor.min(from), from))
}

/// Bitmap block `map_block`'s rotor in `rotors`, moved up to the map's
/// first clear bit (below `limit`): every bit under it is set. Moving
/// only up, the walk over taken bits is paid once, not per allocation.
fn rotor_of(rotors: &mut crate::core::Rotors, map_block: u64, map: &[u8], limit: u32) -> u32 {
    let rotor = rotors.entry(map_block).or_insert(0);
    *rotor = find_clear(map, *rotor, limit, *rotor, |_| false).unwrap_or(limit);
    *rotor
}

impl Core {
    /// Sets bit `i` of map `block`; whether it was set already.
    fn set_bit(&mut self, block: u64, i: u32) -> Result<bool, Errno> {
        let map = match self.cache.modify(&mut self.order, block) {
            Ok(m) => m,
            Err(e) => return Err(io_failed(self, e)),
        };
        let (byte, mask) = ((i / 8) as usize, 1u8 << (i % 8));
        let was = map[byte] & mask != 0;
        map[byte] |= mask;
        Ok(was)
    }

    /// Clears bits `bits` of map `block`, the map changed once for all of
    /// them (a free below the rotor pulls it down); `cleared` is called
    /// with the index in `bits` of each bit that was set. Returns how
    /// many were.
    fn clear_bits(&mut self, block: u64, bits: &[u32], mut cleared: impl FnMut(usize)) -> Result<u32, Errno> {
        let map = match self.cache.modify(&mut self.order, block) {
            Ok(m) => m,
            Err(e) => return Err(io_failed(self, e)),
        };
        let (mut count, mut lowest) = (0u32, u32::MAX);
        for (k, &i) in bits.iter().enumerate() {
            let (byte, mask) = ((i / 8) as usize, 1u8 << (i % 8));
            if map[byte] & mask != 0 {
                map[byte] &= !mask;
                count += 1;
                lowest = lowest.min(i);
                cleared(k);
            }
        }
        if let Some(rotor) = self.rotors.get_mut(&block) {
            *rotor = (*rotor).min(lowest);
        }
        Ok(count)
    }

    /// A free block, near `hint` where possible; ENOSPC when none is.
    /// Under `log`, a block freed since the last commit is not taken; when
    /// only such blocks are left, the transaction is committed first.
    /// Under `softdep`, blocks freed but not yet released are waited for
    /// the same way (a full write-back releases them).
    pub fn alloc_block(&mut self, hint: u64) -> Result<u32, Errno> {
        let block = match self.alloc_block_once(hint) {
            Err(Errno::NOSPC) if !self.log.freed.is_empty() => {
                if let Err(e) = self.commit() {
                    return Err(io_failed(self, e));
                }
                self.alloc_block_once(hint)
            }
            Err(Errno::NOSPC) if self.order.waiting() => {
                self.softdep_sync()?;
                self.alloc_block_once(hint)
            }
            other => other,
        }?;
        self.order.allocated_block(block);
        Ok(block)
    }

    fn alloc_block_once(&mut self, hint: u64) -> Result<u32, Errno> {
        self.alloc_run_once(hint, 1)?.pop().ok_or(Errno::NOSPC)
    }

    /// Up to `want` free blocks near `hint`, as many as one group's map
    /// gives from the first free one on (changed once for all of them),
    /// in block order; at least one, else ENOSPC (as [`Core::alloc_block`],
    /// which it falls back to when that group has none to give at once).
    pub fn alloc_blocks(&mut self, hint: u64, want: usize) -> Result<Vec<u32>, Errno> {
        let taken = self.alloc_run_once(hint, want)?;
        if taken.is_empty() {
            return Ok(vec![self.alloc_block(hint)?]);
        }
        for &block in &taken {
            self.order.allocated_block(block);
        }
        Ok(taken)
    }

    /// The free blocks of the first group from `hint`'s on that has any,
    /// up to `want`, taken in its map (none when no free block can be
    /// taken now: the caller's fallback commits or waits as it must).
    /// Under `log`, a block freed since the last durable commit is passed
    /// over.
    fn alloc_run_once(&mut self, hint: u64, want: usize) -> Result<Vec<u32>, Errno> {
        let groups = self.sb.groups;
        let hint = hint.clamp(self.sb.first_group_block, self.sb.blocks - 1);
        let first = ((hint - self.sb.first_group_block) / u64::from(self.sb.blocks_per_group)) as u32;
        // Read once a call, and only when a freed block may be waiting.
        let durable = if self.log.freed.is_empty() { u64::MAX } else { self.log.durable() };
        for k in 0..groups {
            let g = (first + k) % groups;
            if self.groups[g as usize].free_blocks == 0 {
                continue;
            }
            let start = self.sb.group_start(g);
            let from = if k == 0 { (hint - start) as u32 } else { 0 };
            let limit = self.sb.group_blocks(g);
            let map_block = start + BLOCK_BITMAP;
            let found = match self.cache.read(&mut self.order, map_block) {
                Ok(map) => {
                    let floor = rotor_of(&mut self.rotors, map_block, map, limit);
                    let freed = &self.log.freed;
                    find_clear(map, from, limit, floor, |i| {
                        freed.waits((start + u64::from(i)) as u32, durable)
                    })
                    .map(|i| (i, floor))
                }
                Err(e) => return Err(io_failed(self, e)),
            };
            let Some((first_free, floor)) = found else { continue };
            let map = match self.cache.modify(&mut self.order, map_block) {
                Ok(map) => map,
                Err(e) => return Err(io_failed(self, e)),
            };
            let freed = &self.log.freed;
            let skip = |i: u32| freed.waits((start + u64::from(i)) as u32, durable);
            let mut bits = Vec::with_capacity(want);
            let mut next = Some(first_free);
            // Each bit taken is set at once, so the search (which wraps
            // round to the map's start) never finds it again.
            while let Some(i) = next {
                map[(i / 8) as usize] |= 1 << (i % 8);
                bits.push(i);
                if bits.len() == want {
                    break;
                }
                next = find_clear(map, i + 1, limit, floor, skip);
            }
            let taken = bits.len() as u32;
            self.groups[g as usize].free_blocks -= taken;
            self.groups_dirty.insert(g);
            self.sb.free_blocks -= u64::from(taken);
            bits.sort_unstable();
            return Ok(bits.into_iter().map(|i| (start + u64::from(i)) as u32).collect());
        }
        Ok(Vec::new())
    }

    /// Returns `blocks`, no longer pointed to in memory, to the free maps.
    /// Under `softdep` they stay taken until `waits` hold (the pointers
    /// gone from the disk too); the other policies order their own writes.
    pub fn free_blocks(&mut self, blocks: Vec<u32>, from: FreedFrom, waits: Vec<Wait>) -> Result<(), Errno> {
        // Under `softdep` a directory block is written once more before
        // its buffer goes: the removals in it are what the link counts of
        // the inodes it named wait for (it is given back with the rest
        // once nothing on the disk points to it).
        let cache = &mut self.cache;
        match self.order.hold_blocks(blocks, from, waits, &mut |b| cache.drop_buffer(b)) {
            Ok(dirs) => self.retire_all(dirs),
            Err(blocks) => self.free_blocks_now(blocks),
        }
    }

    /// Returns `blocks` to their groups' free maps, each map changed once
    /// for all of its blocks, their buffers dropped.
    pub fn free_blocks_now(&mut self, blocks: Vec<u32>) -> Result<(), Errno> {
        for &block in &blocks {
            self.cache.discard(&mut self.order, u64::from(block));
        }
        self.clear_block_bits(&blocks)
    }

    /// Clears the bits of `blocks` (any order) in their groups' free
    /// maps, each map changed once.
    pub(crate) fn clear_block_bits(&mut self, blocks: &[u32]) -> Result<(), Errno> {
        let (first, per_group) = (self.sb.first_group_block, u64::from(self.sb.blocks_per_group));
        let by_group = by_group(blocks.iter().map(|&b| {
            let within = u64::from(b) - first;
            ((within / per_group) as u32, (within % per_group) as u32)
        }));
        for (g, bits) in by_group {
            let start = self.sb.group_start(g);
            let mut was_set = Vec::new();
            let freed = self.clear_bits(start + BLOCK_BITMAP, &bits, |k| was_set.push(bits[k]))?;
            if self.order.is_logged() {
                for bit in was_set {
                    self.log.freed.freed((start + u64::from(bit)) as u32);
                }
            }
            if freed > 0 {
                self.groups[g as usize].free_blocks += freed;
                self.groups_dirty.insert(g);
                self.sb.free_blocks += u64::from(freed);
            }
        }
        Ok(())
    }

    /// A free inode number for a new inode whose directory is `parent`.
    pub fn alloc_inode(&mut self, parent: u32, dir: bool) -> Result<u32, Errno> {
        let ino = match self.alloc_inode_once(parent, dir) {
            Err(Errno::NOSPC) if self.order.waiting() => {
                self.softdep_sync()?;
                self.alloc_inode_once(parent, dir)
            }
            other => other,
        }?;
        self.order.allocated_inode(ino);
        Ok(ino)
    }

    fn alloc_inode_once(&mut self, parent: u32, dir: bool) -> Result<u32, Errno> {
        let groups = self.sb.groups;
        let parent_group = (parent - 1) / self.sb.inodes_per_group;
        let first = if dir { self.dir_group(parent_group) } else { parent_group };
        for k in 0..groups {
            let g = (first + k) % groups;
            if self.groups[g as usize].free_inodes == 0 {
                continue;
            }
            let map_block = self.sb.group_start(g) + INODE_BITMAP;
            let limit = self.sb.inodes_per_group;
            let found = match self.cache.read(&mut self.order, map_block) {
                Ok(map) => {
                    let floor = rotor_of(&mut self.rotors, map_block, map, limit);
                    find_clear(map, 0, limit, floor, |_| false)
                }
                Err(e) => return Err(io_failed(self, e)),
            };
            if let Some(i) = found {
                self.initialize_through(g, i)?;
                self.set_bit(map_block, i)?;
                self.groups_dirty.insert(g);
                let counts = &mut self.groups[g as usize];
                counts.free_inodes -= 1;
                counts.dirs += u32::from(dir);
                self.sb.free_inodes -= 1;
                self.sb.dirs += u64::from(dir);
                return Ok(g * self.sb.inodes_per_group + i + 1);
            }
        }
        Err(Errno::NOSPC)
    }

    /// Takes inode number `ino` itself (mkfs's root and lost+found).
    pub fn claim_inode(&mut self, ino: u32, dir: bool) -> Result<(), Errno> {
        let g = (ino - 1) / self.sb.inodes_per_group;
        let i = (ino - 1) % self.sb.inodes_per_group;
        self.initialize_through(g, i)?;
        if !self.set_bit(self.sb.group_start(g) + INODE_BITMAP, i)? {
            self.groups_dirty.insert(g);
            let counts = &mut self.groups[g as usize];
            counts.free_inodes -= 1;
            counts.dirs += u32::from(dir);
            self.sb.free_inodes -= 1;
            self.sb.dirs += u64::from(dir);
        }
        Ok(())
    }

    /// FFS's choice for a new directory: among groups with at least the
    /// average free inodes, the one with the fewest directories.
    fn dir_group(&self, fallback: u32) -> u32 {
        let average = self.sb.free_inodes / u64::from(self.sb.groups);
        (0..self.sb.groups)
            .filter(|&g| u64::from(self.groups[g as usize].free_inodes) >= average.max(1))
            .min_by_key(|&g| (self.groups[g as usize].dirs, g))
            .unwrap_or(fallback)
    }

    /// Returns removed inode `ino` and the blocks it held (its slot
    /// cleared in memory) to their groups' free maps; under `softdep`, all
    /// once the slot is free on the disk, the directory blocks among them
    /// written once more before their buffers go (`Core::free_blocks`).
    pub fn free_removed(
        &mut self,
        ino: u32,
        dir: bool,
        blocks: Vec<u32>,
        from: FreedFrom,
    ) -> Result<(), Errno> {
        let cache = &mut self.cache;
        match self.order.hold_removed(ino, dir, blocks, from, &mut |b| cache.drop_buffer(b)) {
            Ok(dirs) => return self.retire_all(dirs),
            Err(blocks) => self.free_blocks_now(blocks)?,
        }
        self.clear_inode_bits(&[(ino, dir)])
    }

    /// Returns inode number `ino` to its group's free map; under
    /// `softdep`, once its slot is free on the disk.
    pub fn free_inode(&mut self, ino: u32, dir: bool) -> Result<(), Errno> {
        if self.order.hold_inode(ino, dir) {
            return Ok(());
        }
        self.clear_inode_bits(&[(ino, dir)])
    }

    /// Returns inode numbers (with whether each was a directory) to their
    /// groups' free maps, each map changed once for all of its inodes.
    pub(crate) fn clear_inode_bits(&mut self, inodes: &[(u32, bool)]) -> Result<(), Errno> {
        let per_group = self.sb.inodes_per_group;
        // A directory's bit carries its flag above the bit's index.
        const DIR: u32 = 1 << 31;
        debug_assert!(per_group < DIR, "an inode's index within its group fits in 31 bits");
        let by_group =
            by_group(inodes.iter().map(|&(ino, dir)| {
                ((ino - 1) / per_group, ((ino - 1) % per_group) | if dir { DIR } else { 0 })
            }));
        for (g, tagged) in by_group {
            let bits: Vec<u32> = tagged.iter().map(|&t| t & !DIR).collect();
            let mut dirs = 0u32;
            let freed = self.clear_bits(self.sb.group_start(g) + INODE_BITMAP, &bits, |k| {
                dirs += u32::from(tagged[k] & DIR != 0)
            })?;
            if freed > 0 {
                self.groups_dirty.insert(g);
                let counts = &mut self.groups[g as usize];
                counts.free_inodes += freed;
                counts.dirs = counts.dirs.saturating_sub(dirs);
                self.sb.free_inodes += u64::from(freed);
                self.sb.dirs = self.sb.dirs.saturating_sub(u64::from(dirs));
            }
        }
        Ok(())
    }

    /// The first data block of the group holding inode `ino`: where a
    /// file's first block goes.
    pub fn inode_group_data(&self, ino: u32) -> u64 {
        let g = (ino - 1) / self.sb.inodes_per_group;
        self.sb.group_start(g) + u64::from(self.sb.group_overhead_blocks())
    }
}

/// `(group, value)` pairs gathered by group, in the order the groups
/// first appear and each group's values in their order: one pass, no sort
/// (a tree's removal releases hundreds of thousands of blocks at once).
fn by_group(pairs: impl Iterator<Item = (u32, u32)>) -> Vec<(u32, Vec<u32>)> {
    /// Past this many groups, they are found through a map.
    const SEARCHED: usize = 16;
    let mut out: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut index: rustc_hash::FxHashMap<u32, usize> = rustc_hash::FxHashMap::default();
    let mut last: Option<(u32, usize)> = None;
    for (g, v) in pairs {
        let found = match last {
            Some((lg, slot)) if lg == g => Some(slot),
            // A change of group is rare (a file's blocks are in one or
            // two): a few groups are searched, more looked up.
            _ if out.len() <= SEARCHED => out.iter().position(|(og, _)| *og == g),
            _ => index.get(&g).copied(),
        };
        let slot = found.unwrap_or_else(|| {
            out.push((g, Vec::new()));
            if out.len() > SEARCHED {
                if index.is_empty() {
                    index.extend(out.iter().enumerate().map(|(slot, (og, _))| (*og, slot)));
                } else {
                    index.insert(g, out.len() - 1);
                }
            }
            out.len() - 1
        });
        last = Some((g, slot));
        out[slot].1.push(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::sync::Arc;

    use device::{Device, MemDevice};
    use fsapi::FileSystem;
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::{mkfs, Ffs, MkfsOptions, MountOptions, Policy};

    /// A bitmap of `len` bits: the first `taken` set, the rest as `bits`.
    fn map_of(taken: usize, bits: &[bool]) -> (Vec<u8>, u32) {
        let len = taken + bits.len();
        let mut map = vec![0u8; len.div_ceil(8)];
        for i in (0..taken).chain((0..bits.len()).filter(|&k| bits[k]).map(|k| taken + k)) {
            map[i / 8] |= 1 << (i % 8);
        }
        (map, len as u32)
    }

    /// Values gathered by group keep their order within it, across more
    /// groups than are searched (the rest are looked up).
    #[test]
    fn values_are_gathered_by_group_in_their_order() {
        let pairs: Vec<(u32, u32)> = (0..200u32).map(|i| ((i * 7) % 40, i)).collect();
        let groups = by_group(pairs.iter().copied());
        assert_eq!(groups.len(), 40, "each group once");
        for (g, values) in &groups {
            let expected: Vec<u32> = pairs.iter().filter(|(pg, _)| pg == g).map(|&(_, v)| v).collect();
            assert_eq!(values, &expected, "group {g}");
        }
    }

    proptest! {
        /// The rotor only skips taken bits: a search from it finds what a
        /// walk from bit 0 finds, skipped bits and wrap-around included.
        #[test]
        fn a_search_from_the_rotor_finds_what_a_walk_from_zero_finds(
            taken in 0usize..200,
            bits in vec(any::<bool>(), 1..200),
            from in 0u32..400,
            skip_every in 2u32..7,
        ) {
            let (map, limit) = map_of(taken, &bits);
            let skip = |i: u32| i % skip_every == 0;
            let walked = find_clear(&map, from, limit, 0, skip);
            let mut rotors = crate::core::Rotors::default();
            let floor = rotor_of(&mut rotors, 9, &map, limit);
            prop_assert!(floor as usize >= taken.min(limit as usize));
            prop_assert_eq!(find_clear(&map, from, limit, floor, skip), walked);
        }
    }

    /// A block freed below the rotor is found again: freeing lowers it.
    #[test]
    fn a_block_freed_below_the_rotor_is_handed_out_again() {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(16 << 20).unwrap());
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let options = MountOptions { policy: Policy::Async, ..Default::default() };
        let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
        let a = fs.create(fsapi::ROOT, OsStr::new("a"), fsapi::Owner::root(0o644)).unwrap();
        let mut core = fs.lock();
        let hint = core.inode_group_data(a.ino as u32);
        let first = core.alloc_block(hint).unwrap();
        let later: Vec<u32> = (0..8).map(|_| core.alloc_block(hint).unwrap()).collect();
        assert!(later.iter().all(|&b| b > first), "taken in order from the hint: {first} then {later:?}");
        core.free_blocks(vec![first], FreedFrom::Other, Vec::new()).unwrap();
        assert_eq!(core.alloc_block(hint).unwrap(), first);
    }

    proptest! {
        /// Blocks from several groups freed together, in any order (each
        /// group's map changed once), are free again, counted once each,
        /// as if freed one by one.
        #[test]
        fn blocks_freed_together_are_free_again(picks in vec(0usize..64, 1..40), order in any::<u64>()) {
            // Three groups of 128 MiB.
            let dev: Arc<dyn Device> = Arc::new(MemDevice::new(320 << 20).unwrap());
            mkfs(&dev, &MkfsOptions::default()).unwrap();
            let options = MountOptions { policy: Policy::Async, ..Default::default() };
            let fs = Ffs::mount(Arc::clone(&dev), &options).unwrap();
            let mut guard = fs.lock();
            let core = &mut *guard;
            let free_before = core.sb.free_blocks;
            let groups_before: Vec<u32> = core.groups.iter().map(|g| g.free_blocks).collect();
            // Blocks spread over the groups: a hint in each.
            let mut taken = Vec::new();
            for g in 0..core.sb.groups.min(4) {
                let hint = core.sb.group_start(g) + u64::from(core.sb.group_overhead_blocks());
                taken.extend((0..16).map(|_| core.alloc_block(hint).unwrap()));
            }
            let mut freed: Vec<u32> = picks.iter().map(|&p| taken[p % taken.len()]).collect();
            freed.sort_unstable();
            freed.dedup();
            // Any order, each block once.
            let n = freed.len();
            for i in 0..n {
                freed.swap(i, (order.rotate_left(i as u32) % n as u64) as usize);
            }
            core.free_blocks(freed.clone(), FreedFrom::Other, Vec::new()).unwrap();
            let kept = taken.len() - n;
            prop_assert_eq!(core.sb.free_blocks, free_before - kept as u64);
            let counted: u32 = core.groups.iter().map(|g| g.free_blocks).sum();
            prop_assert_eq!(u64::from(counted), core.sb.free_blocks);
            prop_assert!(core.groups.iter().zip(&groups_before).all(|(g, b)| g.free_blocks <= *b));
            freed.sort_unstable();
            for &b in &freed {
                let g = ((u64::from(b) - core.sb.first_group_block) / u64::from(core.sb.blocks_per_group)) as u32;
                let start = core.sb.group_start(g);
                let i = (u64::from(b) - start) as usize;
                let map = core.cache.read(&mut core.order, start + BLOCK_BITMAP).unwrap();
                prop_assert_eq!(map[i / 8] & (1 << (i % 8)), 0, "block {} is free in its map", b);
            }
        }
    }
}
