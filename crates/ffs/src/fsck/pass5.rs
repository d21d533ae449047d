//! Pass 5: the bitmaps and counts against what the inodes claim.

use super::*;

impl Checker {
    // Pass 5: bitmaps and counts against what the inodes claim.
    pub(super) fn pass5_maps(&mut self) -> Result<(), FsError> {
        let sb = self.core.sb.clone();
        let mut totals = GroupCounts::default();
        let mut headers = Vec::new();
        // What pass 1 found, as bits: a lookup per block and per inode
        // in a map would cost more than the check itself.
        let claimed = self.claimed_bits();
        let inodes = self.inode_kinds();
        for g in 0..sb.groups {
            let counts = self.check_group_maps(g, &claimed, &inodes)?;
            totals.free_blocks += counts.free_blocks;
            totals.free_inodes += counts.free_inodes;
            totals.dirs += counts.dirs;
            headers.push(counts);
        }
        // What fsck took itself (lost+found) is counted in the true
        // counts; a header right before it took them is no damage, and
        // is rewritten all the same.
        let made = self.made_counts();
        let before = |c: &GroupCounts, m: &GroupCounts| GroupCounts {
            free_blocks: c.free_blocks + m.free_blocks,
            free_inodes: c.free_inodes + m.free_inodes,
            dirs: c.dirs.saturating_sub(m.dirs),
        };
        let (mut wrong, mut stale) = (Vec::new(), Vec::new());
        let mut made_total = GroupCounts::default();
        for (g, counts) in headers.iter().enumerate() {
            let start = sb.group_start(g as u32);
            let bytes = self.read(start)?;
            let stored = GroupHeader::decode(&bytes, g as u32, &sb, &self.device).ok();
            let m = made.get(&(g as u32)).copied().unwrap_or_default();
            made_total.free_blocks += m.free_blocks;
            made_total.free_inodes += m.free_inodes;
            made_total.dirs += m.dirs;
            let expected = before(counts, &m);
            let same = stored.as_ref().is_some_and(|h| {
                (h.free_blocks, h.free_inodes, h.dirs)
                    == (expected.free_blocks, expected.free_inodes, expected.dirs)
            });
            // Slots fsck itself handed out past the header's count (for
            // lost+found) are the repair's own, as the counts are.
            let raised = stored.as_ref().is_some_and(|h| h.inodes_initialized != self.core.initialized[g]);
            if !same {
                wrong.push((g as u32, *counts));
            } else if m != GroupCounts::default() || raised {
                stale.push((g as u32, *counts));
            }
        }
        let expected = before(&totals, &made_total);
        let sb_same = (sb.free_blocks, sb.free_inodes, sb.dirs)
            == (u64::from(expected.free_blocks), u64::from(expected.free_inodes), u64::from(expected.dirs));
        if wrong.is_empty() && sb_same && stale.is_empty() {
            return Ok(());
        }
        if !wrong.is_empty() || !sb_same {
            let detail = format!(
                "{} group headers and {} superblock counts are wrong",
                wrong.len(),
                if sb_same { "no" } else { "the" }
            );
            if !self.found(Class::WrongSummaryCounts, detail) {
                wrong.clear();
                if stale.is_empty() {
                    return Ok(());
                }
            }
        }
        self.write_counts(wrong.into_iter().chain(stale), totals)
    }

    /// Rewrites the headers of `groups` with their true counts, and the
    /// superblock with the totals (in its next slot).
    fn write_counts(
        &mut self,
        groups: impl Iterator<Item = (u32, GroupCounts)>,
        totals: GroupCounts,
    ) -> Result<(), FsError> {
        let sb = self.core.sb.clone();
        for (g, counts) in groups {
            let header = GroupHeader {
                group: g,
                blocks: sb.group_blocks(g),
                free_blocks: counts.free_blocks,
                free_inodes: counts.free_inodes,
                dirs: counts.dirs,
                fs_id: sb.fs_id,
                inodes_initialized: self.core.initialized[g as usize],
            };
            self.core.cache.modify(&mut self.core.order, sb.group_start(g))?[..512]
                .copy_from_slice(&header.encode());
        }
        self.core.sb.free_blocks = u64::from(totals.free_blocks);
        self.core.sb.free_inodes = u64::from(totals.free_inodes);
        self.core.sb.dirs = u64::from(totals.dirs);
        self.core.sb.generation += 1;
        let slot = self.core.sb.generation % 2;
        let bytes = self.core.sb.encode();
        self.core.cache.fresh(&mut self.core.order, slot)?[..bytes.len()].copy_from_slice(&bytes);
        Ok(())
    }

    /// What fsck took itself, by group: blocks and inodes (as counts of
    /// free ones lost), and directories made.
    pub(super) fn made_counts(&self) -> HashMap<u32, GroupCounts> {
        let sb = &self.core.sb;
        let mut made: HashMap<u32, GroupCounts> = HashMap::default();
        for &block in &self.made_blocks {
            let g = ((block - sb.first_group_block) / u64::from(sb.blocks_per_group)) as u32;
            made.entry(g).or_default().free_blocks += 1;
        }
        for &ino in &self.made_inodes {
            let m = made.entry((ino - 1) / sb.inodes_per_group).or_default();
            m.free_inodes += 1;
            m.dirs += u32::from(self.inodes.get(&ino).is_some_and(|s| s.is_dir()));
        }
        made
    }

    /// Group `g`'s maps against the claims; returns its true counts.
    pub(super) fn check_group_maps(
        &mut self,
        g: u32,
        claimed: &[u64],
        inodes: &[u8],
    ) -> Result<GroupCounts, FsError> {
        let free_blocks = self.check_block_map(g, claimed)?;
        let (free_inodes, dirs) = self.check_inode_map(g, inodes)?;
        Ok(GroupCounts { free_blocks, free_inodes, dirs })
    }

    /// The blocks claimed, a bit each, by block number.
    pub(super) fn claimed_bits(&self) -> Vec<u64> {
        let mut bits = vec![0u64; self.core.sb.blocks.div_ceil(64) as usize];
        for (block, _) in self.claims.iter() {
            if let Some(word) = bits.get_mut((block / 64) as usize) {
                *word |= 1 << (block % 64);
            }
        }
        bits
    }

    /// Each inode number's state after pass 4, a byte each (index 0
    /// unused): 0 free, 1 in use, 2 a directory.
    pub(super) fn inode_kinds(&self) -> Vec<u8> {
        let mut kinds = vec![0u8; self.core.sb.total_inodes() as usize + 1];
        for (&ino, seen) in &self.inodes {
            if let Some(kind) = kinds.get_mut(ino as usize) {
                *kind = if seen.is_dir() { 2 } else { 1 };
            }
        }
        kinds
    }

    /// Group `g`'s block bitmap against the claims; returns its free blocks.
    pub(super) fn check_block_map(&mut self, g: u32, claimed: &[u64]) -> Result<u32, FsError> {
        let sb = self.core.sb.clone();
        let start = sb.group_start(g);
        let overhead = sb.group_overhead_blocks();
        let mut map = self.read(start + 1)?;
        let (mut in_use_free, mut leaked, mut free) = (0u32, 0u32, 0u32);
        // A block fsck took is marked with no finding.
        let mut made = false;
        let mut named = Vec::new();
        for i in 0..sb.group_blocks(g) {
            let block = start + u64::from(i);
            let used = i < overhead || claimed[(block / 64) as usize] & (1 << (block % 64)) != 0;
            let (byte, mask) = ((i / 8) as usize, 1u8 << (i % 8));
            match (used, map[byte] & mask != 0) {
                (true, false) if self.made_blocks.contains(&(start + u64::from(i))) => made = true,
                (true, false) => {
                    in_use_free += 1;
                    if named.len() < 4 {
                        let owner = self.claims.get(&(start + u64::from(i))).copied().unwrap_or(0);
                        named.push(format!("{} of inode {owner}", start + u64::from(i)));
                    }
                }
                (false, true) => leaked += 1,
                _ => {}
            }
            if used {
                map[byte] |= mask;
            } else {
                map[byte] &= !mask;
                free += 1;
            }
        }
        let findings = [
            (
                in_use_free,
                Class::BlockInUseButFree,
                format!(
                    "group {g}: {in_use_free} blocks in use are free in the map ({}...)",
                    named.join(", ")
                ),
            ),
            (
                leaked,
                Class::LeakedBlock,
                format!("group {g}: {leaked} blocks marked in use belong to nothing"),
            ),
        ];
        self.settle_map(start + 1, &map, findings, made)?;
        Ok(free)
    }

    /// Group `g`'s inode bitmap against the inodes found; returns its free
    /// inodes and directories.
    pub(super) fn check_inode_map(&mut self, g: u32, inodes: &[u8]) -> Result<(u32, u32), FsError> {
        let sb = self.core.sb.clone();
        let start = sb.group_start(g);
        let mut map = self.read(start + 2)?;
        let (mut in_use_free, mut leaked, mut free, mut dirs) = (0u32, 0u32, 0u32, 0u32);
        // An inode fsck took (lost+found) is marked with no finding.
        let mut made = false;
        let mut named = Vec::new();
        for i in 0..sb.inodes_per_group {
            let kind = inodes[(g * sb.inodes_per_group + i + 1) as usize];
            let (byte, mask) = ((i / 8) as usize, 1u8 << (i % 8));
            match (kind != 0, map[byte] & mask != 0) {
                (true, false) if self.made_inodes.contains(&(g * sb.inodes_per_group + i + 1)) => made = true,
                (true, false) => {
                    in_use_free += 1;
                    if named.len() < 4 {
                        named.push((g * sb.inodes_per_group + i + 1).to_string());
                    }
                }
                (false, true) => leaked += 1,
                _ => {}
            }
            if kind != 0 {
                map[byte] |= mask;
                dirs += u32::from(kind == 2);
            } else {
                map[byte] &= !mask;
                free += 1;
            }
        }
        let findings = [
            (
                in_use_free,
                Class::InodeInUseButFree,
                format!(
                    "group {g}: {in_use_free} inodes in use are free in the map ({}...)",
                    named.join(", ")
                ),
            ),
            (leaked, Class::LeakedInode, format!("group {g}: {leaked} inodes marked in use are free")),
        ];
        self.settle_map(start + 2, &map, findings, made)?;
        Ok((free, dirs))
    }

    /// A bitmap checked: each finding with a count reported, and the map
    /// as the inodes have it written when one is repaired or fsck marked
    /// what it took itself (`made`).
    fn settle_map(
        &mut self,
        block: u64,
        map: &[u8],
        findings: [(u32, Class, String); 2],
        made: bool,
    ) -> Result<(), FsError> {
        let mut fix = false;
        for (count, class, detail) in findings {
            if count > 0 {
                fix |= self.found(class, detail);
            }
        }
        if fix || made {
            self.core.cache.modify(&mut self.core.order, block)?.copy_from_slice(map);
        }
        Ok(())
    }
}
