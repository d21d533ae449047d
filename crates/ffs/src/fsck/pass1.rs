//! Pass 1: every inode slot and the blocks each allocated inode claims; then
//! pass 1B, the copies of shared data blocks, and the root made again when
//! it is not a directory.

use super::*;

impl Checker {
    // Pass 1: every inode slot; the blocks allocated inodes claim.
    /// `group(g)` is told as each group's slots begin.
    pub(super) fn pass1_inodes(&mut self, group: &dyn Fn(u64)) -> Result<(), FsError> {
        // Each group's slots as far as its header says inodes were handed
        // out, its table read many blocks to a request past the cache, as
        // e2fsck reads it (each block is read once here; a repair writes
        // through the cache, slot by slot, so the copy stays good for the
        // slots after).
        let align = BLOCK_BYTES.max(self.core.cache.buffer_align());
        let mut chunk = TableChunk {
            first: 0,
            blocks: 0,
            bytes: device::AlignedBuf::zeroed(TABLE_CHUNK_BLOCKS as usize * BLOCK_BYTES, align),
        };
        // Every table read from here on, asked for at once: the kernel
        // reads them in behind the check (a buffered image).
        for g in 0..self.core.sb.groups {
            let blocks = self.core.initialized[g as usize].div_ceil(INODES_PER_BLOCK);
            let first = self.core.sb.inode_place(g * self.core.sb.inodes_per_group + 1).0;
            self.will_need(first, u64::from(blocks));
        }
        for g in 0..self.core.sb.groups {
            group(u64::from(g));
            let slots = self.core.initialized[g as usize];
            let first = self.core.sb.inode_place(g * self.core.sb.inodes_per_group + 1).0;
            let end = first + u64::from(slots.div_ceil(INODES_PER_BLOCK));
            for i in 0..slots {
                self.pass1_slot(g, i, &mut chunk, end)?;
            }
        }
        // A header that failed its checks is rewritten (pass 5) saying as
        // many slots were handed out as the table shows.
        for g in 0..self.core.sb.groups as usize {
            if self.headless[g] {
                self.core.initialized[g] = self.reached[g];
            }
        }
        Ok(())
    }

    /// Slot `i` of group `g`, its table block in `chunk` (read with the
    /// blocks after it, up to `end`, if not).
    fn pass1_slot(&mut self, g: u32, i: u32, chunk: &mut TableChunk, end: u64) -> Result<(), FsError> {
        let ino = g * self.core.sb.inodes_per_group + i + 1;
        let (block, at) = self.core.sb.inode_place(ino);
        if !(chunk.first..chunk.first + chunk.blocks).contains(&block) {
            let blocks = (end - block).min(TABLE_CHUNK_BLOCKS);
            let bytes = &mut chunk.bytes[..blocks as usize * BLOCK_BYTES];
            self.core.cache.device().read_at(bytes, block * BLOCK_BYTES as u64).map_err(FsError::Device)?;
            (chunk.first, chunk.blocks) = (block, blocks);
            self.will_need_indirect(&chunk.bytes[..blocks as usize * BLOCK_BYTES]);
        }
        let from = (block - chunk.first) as usize * BLOCK_BYTES + at;
        let slot = DiskInode::decode_for_check(ino, &chunk.bytes[from..from + INODE_BYTES]);
        if self.headless[g as usize] && slot != InodeSlot::Free {
            // What the rewritten header will say was handed out.
            let top = (i + 1).div_ceil(INODES_PER_BLOCK) * INODES_PER_BLOCK;
            self.reached[g as usize] = self.reached[g as usize].max(top);
        }
        match slot {
            InodeSlot::Free => {}
            InodeSlot::Garbage => {
                if self.found(Class::GarbageInode, format!("inode {ino} is neither free nor valid")) {
                    self.core.clear_inode(ino).map_err(Self::errno)?;
                }
            }
            InodeSlot::Used(inode) if special_kind(inode.mode) => {
                self.report.inodes_checked += 1;
                let inode = self.check_special(ino, inode)?;
                let inode = self.claim_special_xattr(ino, inode)?;
                self.inodes.insert(ino, Seen::new(inode));
            }
            InodeSlot::Used(inode) => {
                self.report.inodes_checked += 1;
                let inode = self.claim_blocks(ino, inode)?;
                let long = inode.size as usize > INLINE_SYMLINK_BYTES;
                if inode.kind_bits() == S_IFLNK && long && inode.direct[0] == 0 {
                    let detail = format!(
                        "inode {ino}, a symlink of {} bytes, has no block to hold its target",
                        inode.size
                    );
                    if self.found(Class::BadSymlink, detail) {
                        self.core.clear_inode(ino).map_err(Self::errno)?;
                        self.claims.retain(|_, owner| *owner != ino);
                        return Ok(());
                    }
                }
                self.inodes.insert(ino, Seen::new(inode));
            }
        }
        Ok(())
    }

    /// The indirect blocks the inodes of table blocks `bytes` point to, asked for together before
    /// they are walked one inode at a time: the kernel reads them at
    /// once rather than one after another.
    /// A hint only: the pointers are taken as they lie, unchecked (pass 1
    /// checks each inode when it comes to it).
    fn will_need_indirect(&self, bytes: &[u8]) {
        let field = |slot: &[u8], at: usize| {
            slot.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        for slot in bytes.chunks_exact(INODE_BYTES) {
            if slot[..2] == [0, 0] {
                continue;
            }
            for pointer in [field(slot, INODE_SINGLE_AT), field(slot, INODE_DOUBLE_AT)] {
                if pointer != 0 && self.is_data(u64::from(pointer)) {
                    self.will_need(u64::from(pointer), 1);
                }
            }
        }
    }

    /// A FIFO, device or socket holds nothing but its inode (any device
    /// number): a size, units or pointers are cleared, its pointers never
    /// claimed (a block a file holds stays the file's). Units counted with
    /// neither a size nor a pointer are a count too high, no more: what
    /// soft updates writes while a new attribute block is not on the disk
    /// yet (the pointer rolled back, the count kept, as for a file's).
    pub(super) fn check_special(&mut self, ino: u32, mut inode: DiskInode) -> Result<DiskInode, FsError> {
        if !inode.holds_data() {
            return Ok(inode);
        }
        let pointers = inode.direct.iter().chain([&inode.single, &inode.double]).filter(|&&p| p != 0).count();
        if inode.size == 0 && pointers == 0 {
            let detail = format!(
                "inode {ino}, a {}, counts {} units allocated and holds {} (its attribute block's)",
                special_name(inode.mode),
                inode.blocks_512,
                inode.xattr_units()
            );
            if self.found(Class::WrongBlockCount, detail) {
                inode.blocks_512 = inode.xattr_units();
                self.core.put_inode(ino, &inode).map_err(Self::errno)?;
            }
            return Ok(inode);
        }
        let detail = format!(
            "inode {ino}, a {}, has {} bytes, {} units allocated and {pointers} block pointers: it holds none",
            special_name(inode.mode),
            inode.size,
            inode.blocks_512
        );
        if self.found(Class::SpecialFileWithData, detail) {
            inode.direct = [0; DIRECT_POINTERS];
            (inode.single, inode.double, inode.size) = (0, 0, 0);
            inode.blocks_512 = inode.xattr_units();
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        }
        Ok(inode)
    }

    /// A special file's extended attribute block, its one block: a bad
    /// one cleared (its units with it).
    pub(super) fn claim_special_xattr(
        &mut self,
        ino: u32,
        mut inode: DiskInode,
    ) -> Result<DiskInode, FsError> {
        let mut claimed = 0;
        if self.claim_xattr(ino, &mut inode, &mut claimed)? && self.repair != Repair::No {
            inode.blocks_512 = inode.xattr_units();
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        }
        self.report.blocks_claimed += claimed;
        Ok(inode)
    }

    /// Claims inode `ino`'s extended attribute block, if it has one, and
    /// checks it; a pointer outside the data area, to a block claimed
    /// already, or to a block that fails its checks is cut (when
    /// repaired). Returns whether it was cut.
    pub(super) fn claim_xattr(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        claimed: &mut u64,
    ) -> Result<bool, FsError> {
        let block = inode.xattr;
        if block == 0 {
            return Ok(false);
        }
        match self.claim(ino, u64::from(block), claimed, false) {
            Pointer::Claimed => {}
            Pointer::Left => return Ok(false),
            Pointer::Cut => {
                inode.xattr = 0;
                return Ok(true);
            }
        }
        let bytes = self.read(u64::from(block))?;
        let fault = match XattrBlock::decode(&bytes, ino, block, &self.device) {
            Ok(attrs) => return self.drop_user_attrs(ino, inode, attrs, claimed),
            Err(fault) => fault,
        };
        let detail = format!("{fault}: its attributes are lost when it is cleared");
        if !self.found(Class::BadXattrBlock, detail) {
            return Ok(false);
        }
        // No longer this inode's: free in the map (pass 5), and the
        // inode's units recounted without it.
        self.claims.remove(&u64::from(block));
        *claimed -= 1;
        inode.xattr = 0;
        Ok(true)
    }

    /// `user.` attributes on an inode whose kind cannot hold them (a
    /// symlink, FIFO, device or socket: the kernel lets only files and
    /// directories have them, and getxattr of one answers ENODATA though
    /// listxattr names it), as damage to a mode leaves them: dropped, the
    /// block rewritten without them, or cleared when nothing is left.
    /// Returns whether the pointer was cut.
    pub(super) fn drop_user_attrs(
        &mut self,
        ino: u32,
        inode: &mut DiskInode,
        mut attrs: XattrBlock,
        claimed: &mut u64,
    ) -> Result<bool, FsError> {
        if matches!(inode.kind_bits(), S_IFREG | S_IFDIR) {
            return Ok(false);
        }
        let user = |n: &fsapi::XattrName| n.namespace == fsapi::xattr::Namespace::User;
        let count = attrs.entries.keys().filter(|n| user(n)).count();
        if count == 0 {
            return Ok(false);
        }
        let detail = format!(
            "inode {ino}, a {}, holds {} the kind cannot hold: {}",
            kind_name(inode.mode),
            if count == 1 { "a user. attribute".to_string() } else { format!("{count} user. attributes") },
            if count == attrs.entries.len() { "its attribute block is cleared" } else { "they are dropped" }
        );
        if !self.found(Class::BadXattrBlock, detail) {
            return Ok(false);
        }
        attrs.entries.retain(|n, _| !user(n));
        let block = inode.xattr;
        if attrs.entries.is_empty() {
            self.claims.remove(&u64::from(block));
            *claimed -= 1;
            inode.xattr = 0;
            return Ok(true);
        }
        attrs.encode(ino, self.core.cache.modify(&mut self.core.order, u64::from(block))?);
        Ok(false)
    }

    /// Walks an inode's pointers, claiming each block; a pointer outside
    /// the data area or to a block already claimed is cut (when repaired).
    pub(super) fn claim_blocks(&mut self, ino: u32, mut inode: DiskInode) -> Result<DiskInode, FsError> {
        let mut claimed = 0u64;
        let mut changed = false;
        // A block claimed twice is for `-y` to settle (`-n` reports it below).
        if inode.kind_bits() == S_IFDIR && self.repair == Repair::Yes {
            for i in 0..DIRECT_POINTERS {
                self.reclaim_dir_block(ino, u64::from(inode.direct[i]))?;
            }
        }
        // A regular file's data pointers may carry the unwritten mark
        // (fallocate's blocks); anywhere else a marked pointer names no
        // block of the device, and is a bad pointer.
        let file = inode.kind_bits() == S_IFREG;
        for i in 0..DIRECT_POINTERS {
            let pointer = u64::from(data_block(inode.direct[i], file));
            if pointer != 0 && self.claim(ino, pointer, &mut claimed, true) == Pointer::Cut {
                inode.direct[i] = 0;
                changed = true;
            }
        }
        for (level, slot) in [(1u32, inode.single), (2, inode.double)] {
            if slot == 0 {
                continue;
            }
            let keep = match self.claim(ino, u64::from(slot), &mut claimed, false) {
                Pointer::Claimed => self.claim_indirect(ino, slot, level, file, &mut claimed)?,
                Pointer::Left => true,
                Pointer::Cut => false,
            };
            if !keep {
                changed = true;
                if level == 1 {
                    inode.single = 0;
                } else {
                    inode.double = 0;
                }
            }
        }
        changed |= self.claim_xattr(ino, &mut inode, &mut claimed)?;
        let units = claimed * BLOCK_UNITS;
        if inode.blocks_512 != units {
            let detail = format!("inode {ino} says {} units allocated, holds {units}", inode.blocks_512);
            if self.found(Class::WrongBlockCount, detail) {
                inode.blocks_512 = units;
                changed = true;
            }
        }
        if changed && self.repair != Repair::No {
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        }
        self.report.blocks_claimed += claimed;
        Ok(inode)
    }

    /// A block directory `ino` points at that a lower-numbered inode
    /// claimed first, while the block's own `.` names `ino`: it is this
    /// directory's, and the other's pointer is the damaged one. The other
    /// inode's pointer is cut (its count with it) and the block is left
    /// for `ino` to claim: the intact owner keeps its data, not the lower
    /// inode number.
    pub(super) fn reclaim_dir_block(&mut self, ino: u32, block: u64) -> Result<(), FsError> {
        let Some(&other) = self.claims.get(&block) else { return Ok(()) };
        if other == ino || !self.is_data(block) {
            return Ok(());
        }
        let bytes = self.read(block)?;
        let names_it = DirRecord::read(&bytes, 0).is_some_and(|r| *r.name == *b"." && r.ino == ino);
        if !self.inodes.contains_key(&other) {
            return Ok(());
        }
        let mut loser = self.inode_now(other)?;
        if !names_it || !self.cut_data_pointer(&mut loser, block)? {
            return Ok(());
        }
        let detail = format!(
            "block {block} is claimed by inode {other} and by inode {ino}, whose directory block it is \
             (its '.' names it): kept for inode {ino}"
        );
        self.found(Class::BlockClaimedTwice, detail);
        loser.blocks_512 = loser.blocks_512.saturating_sub(BLOCK_UNITS);
        self.core.put_inode(other, &loser).map_err(Self::errno)?;
        if let Some(seen) = self.inodes.get_mut(&other) {
            seen.set(loser);
        }
        self.claims.remove(&block);
        self.report.blocks_claimed -= 1;
        Ok(())
    }

    /// Pass 1B, as e2fsck's 1B to 1D: each data block an inode claimed
    /// after another (in inode order) is copied to a block no inode
    /// claims, and that inode's pointer moved to the copy, so both keep
    /// the bytes they had, whichever of them is damaged; before pass 2,
    /// so that a repair of one's directory block leaves the other's copy
    /// alone. With no free block left, its pointer is cut.
    pub(super) fn copy_shared_blocks(&mut self) -> Result<(), FsError> {
        for (block, ino) in std::mem::take(&mut self.shared) {
            let (Some(&owner), true) = (self.claims.get(&block), self.inodes.contains_key(&ino)) else {
                continue;
            };
            let mut inode = self.inode_now(ino)?;
            let copy = self.take_block(ino)?;
            let detail = match copy {
                Some(copy) => format!(
                    "block {block} is claimed by inode {owner} and by inode {ino}: inode {ino} gets a copy \
                     of it, block {copy}"
                ),
                None => format!(
                    "block {block} is claimed by inode {owner} and by inode {ino}: no block is free for a \
                     copy, so inode {ino}'s pointer is cut"
                ),
            };
            self.found(Class::BlockClaimedTwice, detail);
            match copy {
                Some(copy) => {
                    let bytes = self.read(block)?;
                    self.core.cache.modify(&mut self.core.order, copy)?.copy_from_slice(&bytes);
                    self.move_data_pointer(&mut inode, block, copy as u32)?;
                }
                None => {
                    self.move_data_pointer(&mut inode, block, 0)?;
                    inode.blocks_512 = inode.blocks_512.saturating_sub(BLOCK_UNITS);
                    self.report.blocks_claimed -= 1;
                }
            }
            self.core.put_inode(ino, &inode).map_err(Self::errno)?;
            if let Some(seen) = self.inodes.get_mut(&ino) {
                seen.set(inode);
            }
        }
        Ok(())
    }

    /// Cuts `inode`'s data pointer to `block` (a direct one, or one in its
    /// single indirect block or its double's singles). Whether it had one.
    pub(super) fn cut_data_pointer(&mut self, inode: &mut DiskInode, block: u64) -> Result<bool, FsError> {
        self.move_data_pointer(inode, block, 0)
    }

    /// Points `inode`'s first data pointer to `block` at `to` instead (0
    /// cuts it). Whether it had one.
    pub(super) fn move_data_pointer(
        &mut self,
        inode: &mut DiskInode,
        block: u64,
        to: u32,
    ) -> Result<bool, FsError> {
        // An unwritten block keeps its mark where it moves to.
        let moved = |p: u32| if to == 0 { 0 } else { to | (p & UNWRITTEN) };
        if let Some(p) = inode.direct.iter_mut().find(|p| u64::from(block_of(**p)) == block) {
            *p = moved(*p);
            return Ok(true);
        }
        let mut holders = Vec::new();
        if inode.single != 0 && self.is_data(u64::from(inode.single)) {
            holders.push(u64::from(inode.single));
        }
        if inode.double != 0 && self.is_data(u64::from(inode.double)) {
            let bytes = self.read(u64::from(inode.double))?;
            let singles = (0..POINTERS_PER_BLOCK as usize).map(|i| u64::from(pointer_at(&bytes, i)));
            holders.extend(singles.filter(|&b| b != 0 && self.is_data(b)));
        }
        for holder in holders {
            let bytes = self.read(holder)?;
            if let Some(i) = (0..POINTERS_PER_BLOCK as usize)
                .find(|&i| u64::from(block_of(pointer_at(&bytes, i))) == block)
            {
                let p = moved(pointer_at(&bytes, i));
                set_pointer(self.core.cache.modify(&mut self.core.order, holder)?, i, p);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Claims `block` for `ino`; false when the pointer is bad (and was
    /// reported). A file's or directory's data block (`data`) another
    /// inode claimed first is kept under `-y`, to be copied for `ino`
    /// once pass 1 is done (`copy_shared_blocks`).
    pub(super) fn claim(&mut self, ino: u32, block: u64, claimed: &mut u64, data: bool) -> Pointer {
        if !self.is_data(block) {
            let cut = self.found(
                Class::BadBlockPointer,
                format!("inode {ino} points at block {block}, outside the data area"),
            );
            return self.cut_or_left(cut, claimed);
        }
        if let Some(&other) = self.claims.get(&block) {
            if data && other != ino && self.repair == Repair::Yes {
                self.shared.push((block, ino));
                *claimed += 1;
                return Pointer::Claimed;
            }
            let detail = format!("block {block} is claimed by inode {other} and by inode {ino}");
            let cut = self.found(Class::BlockClaimedTwice, detail);
            return self.cut_or_left(cut, claimed);
        }
        self.claims.insert(block, ino);
        *claimed += 1;
        Pointer::Claimed
    }

    /// A damaged pointer: cut when its finding is repaired, and under
    /// `-n` (the report says what `-y` would find after cutting it; nothing
    /// is written). Under `-p` or `-B`, whose classes leave it to `-y`, it
    /// stays as it is, counted as the inode's, so that no count is
    /// "repaired" around it and nothing it points at is changed.
    fn cut_or_left(&self, cut: bool, claimed: &mut u64) -> Pointer {
        if cut || self.repair == Repair::No {
            return Pointer::Cut;
        }
        *claimed += 1;
        Pointer::Left
    }

    pub(super) fn claim_indirect(
        &mut self,
        ino: u32,
        block: u32,
        level: u32,
        file: bool,
        claimed: &mut u64,
    ) -> Result<bool, FsError> {
        let bytes = self.read(u64::from(block))?;
        let mut out = bytes.clone();
        let mut changed = false;
        for i in 0..POINTERS_PER_BLOCK as usize {
            let p = pointer_at(&bytes, i);
            if p == 0 {
                continue;
            }
            let named = if level == 1 { data_block(p, file) } else { p };
            let ok = match self.claim(ino, u64::from(named), claimed, level == 1) {
                Pointer::Claimed => level == 1 || self.claim_indirect(ino, p, 1, file, claimed)?,
                Pointer::Left => true,
                Pointer::Cut => false,
            };
            if !ok {
                set_pointer(&mut out, i, 0);
                changed = true;
            }
        }
        if changed && self.repair != Repair::No {
            self.core.cache.modify(&mut self.core.order, u64::from(block))?.copy_from_slice(&out);
        }
        Ok(true)
    }

    /// The root must be a directory. With `-y` a root that is not (its
    /// inode cleared as garbage, or its mode damaged) is made again
    /// (`recreate_root`); else nothing more can be judged, and the check
    /// stops there. (lost+found may be removed: fsck makes it again when
    /// it needs it.)
    pub(super) fn roots_present(&mut self) -> Result<bool, FsError> {
        if self.inodes.get(&ROOT_INO).is_some_and(Seen::is_dir) {
            return Ok(true);
        }
        let detail = format!("the root directory (inode {ROOT_INO}) is not a directory");
        if !self.found(Class::RootMissing, detail) {
            return Ok(false);
        }
        let made = self.recreate_root()?;
        let Some(last) = self.report.findings.last_mut() else { return Ok(false) };
        match made {
            Some(how) => {
                last.detail.push_str(&format!(": made again, {how}"));
                Ok(true)
            }
            None => {
                last.detail.push_str(": no block to make it again with");
                last.repaired = false;
                Ok(false)
            }
        }
    }

    /// Makes the root directory again (fsck_ffs's "ROOT INODE
    /// UNALLOCATED. ALLOCATE?"): inode 1 a directory whose first block is
    /// the old root's when one is found (a block no other inode claims
    /// whose first records are `.` and `..` naming inode 1: its entries
    /// are kept), else a new empty one. What the old root's other blocks
    /// named comes back through lost+found (pass 3). Says how, or None
    /// when no block can be had.
    pub(super) fn recreate_root(&mut self) -> Result<Option<String>, FsError> {
        // The damaged inode's blocks are no longer a file's: its direct
        // blocks from the first, if that is the old root's, are the new
        // root's (a mode damaged alone loses no entry).
        let damaged = match self.inodes.remove(&ROOT_INO) {
            Some(seen) => seen.dir.map(|d| *d).or_else(|| self.core.inode(ROOT_INO).ok()),
            None => None,
        };
        let mut old: Vec<u64> =
            self.claims.iter().filter(|&(_, owner)| owner == ROOT_INO).map(|(b, _)| b).collect();
        old.sort_unstable();
        self.claims.retain(|_, owner| *owner != ROOT_INO);
        let mut direct = [0u32; DIRECT_POINTERS];
        let how = match self.old_root_block(&old)? {
            Some(first) => {
                let pointers = damaged.filter(|d| u64::from(d.direct[0]) == first).map(|d| d.direct);
                let kept =
                    pointers.into_iter().flatten().take_while(|&p| old.binary_search(&u64::from(p)).is_ok());
                for (n, p) in std::iter::once(first as u32).chain(kept.skip(1)).enumerate() {
                    direct[n] = p;
                    self.claims.insert(u64::from(p), ROOT_INO);
                }
                let n = direct.iter().filter(|&&p| p != 0).count();
                format!("its {} found from block {first}, their entries kept", report_blocks(n))
            }
            None => {
                let Some(block) = self.take_block(ROOT_INO)? else { return Ok(None) };
                direct[0] = u32::try_from(block).map_err(|_| FsError::Invalid(format!("block {block}")))?;
                self.core.dir_init(direct[0], ROOT_INO, ROOT_INO).map_err(Self::errno)?;
                "empty: the old root's first block was not found".to_string()
            }
        };
        let blocks = direct.iter().filter(|&&p| p != 0).count() as u64;
        let t = fsapi::Time::now();
        let inode = DiskInode {
            mode: S_IFDIR | 0o755,
            nlink: 2,
            size: blocks * BLOCK_BYTES as u64,
            blocks_512: blocks * 8,
            times: [(t.secs, t.nanos); 4],
            direct,
            ..DiskInode::default()
        };
        self.core.put_inode(ROOT_INO, &inode).map_err(Self::errno)?;
        self.inodes.insert(ROOT_INO, Seen::new(inode));
        Ok(Some(how))
    }

    /// The old root's first block: among `old` (what the damaged inode 1
    /// pointed at), then among the blocks the maps mark in use that no
    /// inode claims (where an inode cleared as garbage left it), the
    /// first whose records begin with `.` and `..` naming the root.
    pub(super) fn old_root_block(&mut self, old: &[u64]) -> Result<Option<u64>, FsError> {
        let is_root_block = |bytes: &[u8]| {
            let Some(dot) = DirRecord::read(bytes, 0) else { return false };
            let Some(dotdot) = DirRecord::read(bytes, dot.reclen as usize) else { return false };
            (dot.name.as_slice(), dot.ino, dotdot.name.as_slice(), dotdot.ino)
                == (b".", ROOT_INO, b"..", ROOT_INO)
        };
        for &block in old {
            if self.is_data(block) && is_root_block(&self.read(block)?) {
                return Ok(Some(block));
            }
        }
        self.first_unclaimed(true, |c, block| Ok(is_root_block(&c.read(block)?)))
    }

    /// The first data block, in block order, that no inode claims (nor
    /// fsck took), whose group's map marks it in use (`marked`) or free,
    /// and for which `wanted` holds.
    pub(super) fn first_unclaimed(
        &mut self,
        marked: bool,
        mut wanted: impl FnMut(&mut Self, u64) -> Result<bool, FsError>,
    ) -> Result<Option<u64>, FsError> {
        let sb = self.core.sb.clone();
        for g in 0..sb.groups {
            let start = sb.group_start(g);
            let map = self.read(start + 1)?;
            for i in sb.group_overhead_blocks()..sb.group_blocks(g) {
                let block = start + u64::from(i);
                let is_marked = map[(i / 8) as usize] & (1 << (i % 8)) != 0;
                if is_marked != marked
                    || self.claims.contains_key(&block)
                    || self.made_blocks.contains(&block)
                {
                    continue;
                }
                if wanted(self, block)? {
                    return Ok(Some(block));
                }
            }
        }
        Ok(None)
    }
}

/// The block data pointer `p` names: a regular file's (`file`) without
/// its unwritten mark; any other's as it is (a mark there makes it name
/// no block of the device: a bad pointer).
fn data_block(p: u32, file: bool) -> u32 {
    if file {
        block_of(p)
    } else {
        p
    }
}
