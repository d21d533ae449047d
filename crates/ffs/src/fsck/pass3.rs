//! Pass 3: directories reachable from the root and inodes nothing names,
//! reconnected to lost+found (made or grown as needed).

use super::*;

impl Checker {
    // Pass 3: directories reachable from the root; inodes nothing names.
    // A directory cut off with what it holds is reconnected at the top of
    // the cut-off tree only (as fsck_ffs walks up to it): what it names
    // comes back with it.
    pub(super) fn pass3_connectivity(&mut self) -> Result<(), FsError> {
        self.reallocate_lost_found()?;
        let mut reachable: HashSet<u32> = HashSet::default();
        let children: HashMap<u32, Vec<u32>> = self
            .entries
            .iter()
            .filter(|e| *e.name != *b"." && *e.name != *b"..")
            .fold(HashMap::default(), |mut m, e| {
                m.entry(e.dir).or_default().push(e.ino);
                m
            });
        let reach = |from: u32, reachable: &mut HashSet<u32>| {
            let mut stack = vec![from];
            while let Some(d) = stack.pop() {
                if reachable.insert(d) {
                    stack.extend(children.get(&d).into_iter().flatten().copied());
                }
            }
        };
        reach(ROOT_INO, &mut reachable);
        if self.rename_lost_found(&reachable)? {
            reach(LOST_FOUND_INO, &mut reachable);
        }
        let named_by: HashMap<u32, u32> = (self.entries.iter())
            .filter(|e| *e.name != *b"." && *e.name != *b".." && e.dir != e.ino)
            .map(|e| (e.ino, e.dir))
            .collect();
        let mut unattached: Vec<u32> = (self.inodes.keys().copied())
            .filter(|i| !reachable.contains(i) && !self.orphans.contains(i))
            .collect();
        unattached.sort_unstable();
        for ino in unattached {
            if reachable.contains(&ino) {
                continue; // came back with the directory above it
            }
            let seen = &self.inodes[&ino];
            if seen.names > 0 && !seen.is_dir() {
                continue; // named from a directory that is itself unattached
            }
            // The top of the cut-off tree this directory is in: up through
            // the directories that name it.
            let mut top = ino;
            for _ in 0..self.inodes.len() {
                let Some(&parent) = named_by.get(&top) else { break };
                if parent == top || reachable.contains(&parent) {
                    break;
                }
                top = parent;
                if top == ino {
                    break; // a loop of directories: reconnect where it began
                }
            }
            let seen = &self.inodes[&top];
            let (size, links) = (seen.size, seen.nlink);
            let detail = format!("inode {top} ({size} bytes, {links} links) is named by no reachable entry");
            if self.found(Class::UnattachedInode, detail) {
                self.reattach(top)?;
            }
            reach(top, &mut reachable);
        }
        Ok(())
    }

    /// lost+found (inode 2, its `..` the root) cut off from the root, its
    /// entry lost while no other lost+found is named: named lost+found in
    /// the root again, rather than put in a new lost+found as `#2`.
    /// Whether it was.
    pub(super) fn rename_lost_found(&mut self, reachable: &HashSet<u32>) -> Result<bool, FsError> {
        let named = self.entries.iter().any(|e| e.dir == ROOT_INO && *e.name == *b"lost+found");
        let cut_off = self.inodes.get(&LOST_FOUND_INO).is_some_and(|s| s.is_dir())
            && !reachable.contains(&LOST_FOUND_INO)
            && self.dotdot.get(&LOST_FOUND_INO) == Some(&ROOT_INO);
        if named || !cut_off {
            return Ok(false);
        }
        let detail = format!("lost+found (inode {LOST_FOUND_INO}) is named by no entry in the root");
        if !self.found(Class::UnattachedInode, detail) {
            return Ok(false);
        }
        if !self.room_in(ROOT_INO, b"lost+found".len())? {
            if let Some(last) = self.report.findings.last_mut() {
                last.repaired = false;
            }
            return Ok(false);
        }
        let mut root = self.core.inode(ROOT_INO).map_err(Self::errno)?;
        self.core.dir_add(ROOT_INO, &mut root, b"lost+found", LOST_FOUND_INO, DT_DIR).map_err(Self::errno)?;
        self.core.put_inode(ROOT_INO, &root).map_err(Self::errno)?;
        let found = self.core.dir_lookup(ROOT_INO, &mut root, b"lost+found").map_err(Self::errno)?;
        let offset = found.map(|f| f.offset).ok_or_else(|| Self::errno(fsapi::Errno::IO))?;
        if let Some(seen) = self.inodes.get_mut(&ROOT_INO) {
            seen.set(root);
        }
        if let Some(seen) = self.inodes.get_mut(&LOST_FOUND_INO) {
            seen.names += 1;
        }
        let name = b"lost+found".to_vec();
        self.entries.push(Entry {
            dir: ROOT_INO,
            name: name.into(),
            ino: LOST_FOUND_INO,
            kind: DT_DIR,
            offset,
        });
        Ok(true)
    }

    /// Puts an unattached inode in lost+found as `#INO`, or frees it when
    /// it holds nothing (an empty file without extended attributes, as
    /// fsck_ffs clears), with any blocks it kept past its end (fallocate's
    /// keep-size), which pass 5 then finds free. lost+found is made when
    /// missing and grown when full (fsck_ffs's "NO lost+found DIRECTORY.
    /// CREATE?" and expanddir): what holds data is never dropped for want
    /// of room while the file system has a free inode and blocks.
    pub(super) fn reattach(&mut self, ino: u32) -> Result<(), FsError> {
        let inode = self.inode_now(ino)?;
        let dir = inode.kind_bits() == S_IFDIR;
        if !dir && inode.size == 0 && inode.xattr == 0 {
            self.core.clear_inode(ino).map_err(Self::errno)?;
            self.inodes.remove(&ino);
            let points = inode.direct.iter().any(|&p| p != 0) || inode.single != 0 || inode.double != 0;
            if points {
                self.claims.retain(|_, owner| *owner != ino);
            }
            return Ok(());
        }
        let lf_ino = match self.lost_found()? {
            Ok(lf_ino) => lf_ino,
            Err(why) => {
                self.stays_unattached(ino, &why);
                return Ok(());
            }
        };
        let name = format!("#{ino}");
        // Pass 1 let only the kinds iolab stores through.
        let dt = dt_of_mode(inode.mode).unwrap_or(DT_FILE);
        if !self.room_in(lf_ino, name.len())? {
            let why = "lost+found is full and cannot grow (no free block, or at its largest)";
            self.stays_unattached(ino, why);
            return Ok(());
        }
        let mut lf = self.core.inode(lf_ino).map_err(Self::errno)?;
        self.core.dir_add(lf_ino, &mut lf, name.as_bytes(), ino, dt).map_err(Self::errno)?;
        if dir {
            lf.nlink += 1;
            let mut moved = inode.clone();
            if let Ok(Some(dotdot)) = self.core.dir_lookup(ino, &mut moved, b"..") {
                self.core
                    .dir_retarget(ino, &mut moved, dotdot.offset, lf_ino, DT_DIR)
                    .map_err(Self::errno)?;
            } else if !self.add_entry(ino, b"..", lf_ino, DT_DIR)? {
                let why = "its '..' is missing and it has no room for one";
                self.found(Class::BadDotDot, format!("directory {ino}: {why}"));
                if let Some(last) = self.report.findings.last_mut() {
                    last.repaired = false;
                }
            }
            self.dotdot.insert(ino, lf_ino);
        }
        self.core.put_inode(lf_ino, &lf).map_err(Self::errno)?;
        if inode.nlink == 0 {
            // A file a crash left unlinked but still allocated (open when
            // it went down, its orphan list not on disk): linked again, it
            // counts its new name, as fsck_ffs's linkup does.
            let mut linked = inode.clone();
            linked.nlink = if dir { 2 } else { 1 };
            self.core.put_inode(ino, &linked).map_err(Self::errno)?;
            if let Some(seen) = self.inodes.get_mut(&ino) {
                seen.set(linked);
            }
        }
        if let Some(seen) = self.inodes.get_mut(&ino) {
            seen.names += 1;
        }
        if let Some(seen) = self.inodes.get_mut(&lf_ino) {
            seen.set(lf);
        }
        Ok(())
    }

    /// Reports that unattached inode `ino` could not be reconnected (not
    /// repaired), and keeps it from pass 4's clearing.
    pub(super) fn stays_unattached(&mut self, ino: u32, why: &str) {
        self.found(Class::UnattachedInode, format!("{why}: inode {ino} stays unattached"));
        if let Some(last) = self.report.findings.last_mut() {
            last.repaired = false;
        }
        self.left_unattached.insert(ino);
    }

    /// The lost+found directory in the root, made if there is none:
    /// Ok(inode), or Err(why) when it is not there and cannot be made.
    pub(super) fn lost_found(&mut self) -> Result<Result<u32, String>, FsError> {
        let entry =
            self.entries.iter().find(|e| e.dir == ROOT_INO && *e.name == *b"lost+found").map(|e| e.ino);
        match entry {
            Some(i) if self.inodes.get(&i).is_some_and(|s| s.is_dir()) => return Ok(Ok(i)),
            Some(i) => {
                return Ok(Err(format!(
                    "lost+found in the root is inode {i}, not a directory (rename it, and fsck makes one)"
                )))
            }
            None => {}
        }
        match self.make_lost_found()? {
            Some(lf_ino) => {
                self.report.findings.push(Finding {
                    class: Class::UnattachedInode,
                    detail: format!("no lost+found in the root: made (inode {lf_ino})"),
                    repaired: true,
                });
                Ok(Ok(lf_ino))
            }
            None => Ok(Err("no lost+found, and no free inode or block to make one".into())),
        }
    }

    /// Makes lost+found in the root: inode 2 if it is free (else the
    /// first free one), one empty block. None when there is no free inode
    /// or block for it, or no room in the root.
    pub(super) fn make_lost_found(&mut self) -> Result<Option<u32>, FsError> {
        let Some(ino) = self.take_inode()? else { return Ok(None) };
        if !self.room_in(ROOT_INO, b"lost+found".len())? {
            self.made_inodes.remove(&ino);
            return Ok(None);
        }
        if !self.new_lost_found_dir(ino)? {
            return Ok(None);
        }
        let mut root = self.core.inode(ROOT_INO).map_err(Self::errno)?;
        self.core.dir_add(ROOT_INO, &mut root, b"lost+found", ino, DT_DIR).map_err(Self::errno)?;
        root.nlink += 1;
        self.core.put_inode(ROOT_INO, &root).map_err(Self::errno)?;
        let found = self.core.dir_lookup(ROOT_INO, &mut root, b"lost+found").map_err(Self::errno)?;
        let offset = found.map(|f| f.offset).ok_or_else(|| Self::errno(fsapi::Errno::IO))?;
        if let Some(seen) = self.inodes.get_mut(&ROOT_INO) {
            seen.set(root);
        }
        if let Some(seen) = self.inodes.get_mut(&ino) {
            seen.names = 1;
        }
        let name = b"lost+found".to_vec();
        self.entries.push(Entry { dir: ROOT_INO, name: name.into(), ino, kind: DT_DIR, offset });
        Ok(Some(ino))
    }

    /// Makes inode `ino` (taken by `take_inode`) an empty lost+found
    /// directory whose `..` is the root, with one block taken as
    /// `take_block` takes them; no entry names it yet. Whether it could
    /// (with no free block, the inode is given back).
    pub(super) fn new_lost_found_dir(&mut self, ino: u32) -> Result<bool, FsError> {
        let Some(block) = self.take_block(ino)? else {
            self.made_inodes.remove(&ino);
            return Ok(false);
        };
        let t = fsapi::Time::now();
        let block32 = u32::try_from(block).map_err(|_| FsError::Invalid(format!("block {block}")))?;
        let mut direct = [0u32; DIRECT_POINTERS];
        direct[0] = block32;
        let inode = DiskInode {
            mode: S_IFDIR | 0o700,
            nlink: 2,
            size: BLOCK_BYTES as u64,
            blocks_512: 8,
            times: [(t.secs, t.nanos); 4],
            direct,
            ..DiskInode::default()
        };
        self.core.dir_init(block32, ino, ROOT_INO).map_err(Self::errno)?;
        self.core.put_inode(ino, &inode).map_err(Self::errno)?;
        self.inodes.insert(ino, Seen::new(inode));
        self.dotdot.insert(ino, ROOT_INO);
        Ok(true)
    }

    /// fsck_ffs's "lost+found IS NOT A DIRECTORY. REALLOCATE" (with `-y`
    /// only, as fsck_ffs will not preen it): when something is cut off
    /// from the root and the root's lost+found names a file (or another
    /// kind), the name is given to a directory, the old lost+found
    /// directory if it is cut off with its `..` at the root, else a new
    /// one; the file it named, named no more, is then reconnected in it
    /// as `#INO` (or cleared, when empty). A file named lost+found with
    /// nothing to reconnect stays as it is.
    pub(super) fn reallocate_lost_found(&mut self) -> Result<(), FsError> {
        let Some(at) = self.entries.iter().position(|e| e.dir == ROOT_INO && *e.name == *b"lost+found")
        else {
            return Ok(());
        };
        let file = self.entries[at].ino;
        let kind = match self.inodes.get(&file) {
            Some(s) if !s.is_dir() => kind_name(s.mode),
            _ => return Ok(()),
        };
        if self.repair != Repair::Yes || !self.anything_unattached() {
            return Ok(());
        }
        let old = self.inodes.get(&LOST_FOUND_INO).is_some_and(|s| s.is_dir() && s.names == 0)
            && self.dotdot.get(&LOST_FOUND_INO) == Some(&ROOT_INO);
        let lf = if old {
            LOST_FOUND_INO
        } else {
            let Some(ino) = self.take_inode()? else { return Ok(()) };
            if !self.new_lost_found_dir(ino)? {
                return Ok(());
            }
            ino
        };
        let mut root = self.core.inode(ROOT_INO).map_err(Self::errno)?;
        let offset = self.entries[at].offset;
        self.core.dir_retarget(ROOT_INO, &mut root, offset, lf, DT_DIR).map_err(Self::errno)?;
        if !old {
            root.nlink += 1;
            self.core.put_inode(ROOT_INO, &root).map_err(Self::errno)?;
        }
        if let Some(seen) = self.inodes.get_mut(&ROOT_INO) {
            seen.set(root);
        }
        (self.entries[at].ino, self.entries[at].kind) = (lf, DT_DIR);
        if let Some(seen) = self.inodes.get_mut(&lf) {
            seen.names += 1;
        }
        if let Some(seen) = self.inodes.get_mut(&file) {
            seen.names = seen.names.saturating_sub(1);
        }
        self.report.findings.push(Finding {
            class: Class::UnattachedInode,
            detail: format!(
                "lost+found in the root is inode {file}, a {kind}: the name is given to a directory \
                 (inode {lf}), and inode {file} is reconnected in it"
            ),
            repaired: true,
        });
        Ok(())
    }

    /// Whether some inode is cut off from the root (and not on the orphan
    /// list): what lost+found is needed for.
    pub(super) fn anything_unattached(&self) -> bool {
        let mut children: HashMap<u32, Vec<u32>> = HashMap::default();
        for e in self.entries.iter().filter(|e| *e.name != *b"." && *e.name != *b"..") {
            children.entry(e.dir).or_default().push(e.ino);
        }
        let mut reachable = HashSet::default();
        let mut stack = vec![ROOT_INO];
        while let Some(d) = stack.pop() {
            if reachable.insert(d) {
                stack.extend(children.get(&d).into_iter().flatten().copied());
            }
        }
        self.inodes.keys().any(|i| !reachable.contains(i) && !self.orphans.contains(i))
    }

    /// Whether directory `dir` has room for an entry of `name_len` bytes,
    /// grown by an empty block first if it has none.
    pub(super) fn room_in(&mut self, dir: u32, name_len: usize) -> Result<bool, FsError> {
        let mut inode = self.core.inode(dir).map_err(Self::errno)?;
        if self.core.dir_has_room(dir, &mut inode, name_len).map_err(Self::errno)? {
            return Ok(true);
        }
        self.grow_dir(dir, inode)
    }

    /// Grows directory `dir` by an empty block (fsck_ffs's expanddir),
    /// taken as `take_block` takes them (with the indirect blocks it
    /// needs). Whether it grew.
    pub(super) fn grow_dir(&mut self, dir: u32, mut inode: DiskInode) -> Result<bool, FsError> {
        let n = inode.size / BLOCK_BYTES as u64;
        if !self.fill_dir_block(dir, &mut inode, n)? {
            return Ok(false);
        }
        inode.size += BLOCK_BYTES as u64;
        self.core.put_inode(dir, &inode).map_err(Self::errno)?;
        self.core.drop_index(dir);
        if let Some(seen) = self.inodes.get_mut(&dir) {
            seen.set(inode);
        }
        Ok(true)
    }

    /// Maps block `n` of directory `dir` (a hole, or its end) to a new
    /// empty directory block, with the single and double indirect blocks
    /// that must hold its pointer, each taken as `take_block` takes them;
    /// the inode is written (its size left as it is). Whether it could.
    pub(super) fn fill_dir_block(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        n: u64,
    ) -> Result<bool, FsError> {
        if n >= FILE_BLOCKS_MAX {
            return Ok(false);
        }
        let as32 = |b: u64| u32::try_from(b).map_err(|_| FsError::Invalid(format!("block {b}")));
        let take = |c: &mut Self, inode: &mut DiskInode| -> Result<Option<u32>, FsError> {
            let Some(b) = c.take_block(dir)? else { return Ok(None) };
            inode.blocks_512 += BLOCK_UNITS;
            Ok(Some(as32(b)?))
        };
        let done = 'map: {
            let Some(block) = take(self, inode)? else { break 'map false };
            self.core.dir_empty_block(block).map_err(Self::errno)?;
            if n < DIRECT_POINTERS as u64 {
                inode.direct[n as usize] = block;
                break 'map true;
            }
            let (holder, index) = if n < DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK {
                if inode.single == 0 {
                    let Some(single) = take(self, inode)? else { break 'map false };
                    inode.single = single;
                }
                (inode.single, n - DIRECT_POINTERS as u64)
            } else {
                let k = n - DIRECT_POINTERS as u64 - POINTERS_PER_BLOCK;
                if inode.double == 0 {
                    let Some(double) = take(self, inode)? else { break 'map false };
                    inode.double = double;
                }
                let outer = (k / POINTERS_PER_BLOCK) as usize;
                let mut single =
                    pointer_at(self.core.cache.read(&mut self.core.order, u64::from(inode.double))?, outer);
                if single == 0 {
                    let Some(s) = take(self, inode)? else { break 'map false };
                    set_pointer(
                        self.core.cache.modify(&mut self.core.order, u64::from(inode.double))?,
                        outer,
                        s,
                    );
                    single = s;
                }
                (single, k % POINTERS_PER_BLOCK)
            };
            set_pointer(
                self.core.cache.modify(&mut self.core.order, u64::from(holder))?,
                index as usize,
                block,
            );
            true
        };
        self.core.put_inode(dir, inode).map_err(Self::errno)?;
        if let Some(seen) = self.inodes.get_mut(&dir) {
            seen.set(inode.clone());
        }
        Ok(done)
    }

    /// A block no inode claims and its group's map marks free, claimed for
    /// `owner` and zeroed in the cache: fsck allocates from what pass 1
    /// found, not from the maps alone, which pass 5 has yet to check.
    pub(super) fn take_block(&mut self, owner: u32) -> Result<Option<u64>, FsError> {
        let Some(block) = self.first_unclaimed(false, |_, _| Ok(true))? else { return Ok(None) };
        self.claims.insert(block, owner);
        self.made_blocks.insert(block);
        self.core.cache.fresh(&mut self.core.order, block)?;
        Ok(Some(block))
    }

    /// An inode number for lost+found: 2, where mkfs puts it, if it is
    /// free; else the first one that no inode holds, its map marks free
    /// and its slot is free.
    pub(super) fn take_inode(&mut self) -> Result<Option<u32>, FsError> {
        let sb = self.core.sb.clone();
        let first = std::iter::once((0, LOST_FOUND_INO - 1..LOST_FOUND_INO));
        let every = (0..sb.groups).map(|g| (g, 0..sb.inodes_per_group));
        for (g, within) in first.chain(every) {
            let map = self.read(sb.group_start(g) + 2)?;
            for i in within {
                let ino = g * sb.inodes_per_group + i + 1;
                let taken = self.inodes.contains_key(&ino)
                    || self.orphans.contains(&ino)
                    || self.made_inodes.contains(&ino)
                    || ino == ROOT_INO;
                if taken || map[(i / 8) as usize] & (1 << (i % 8)) != 0 {
                    continue;
                }
                let (block, at) = sb.inode_place(ino);
                let slot = &self.core.cache.read(&mut self.core.order, block)?[at..at + INODE_BYTES];
                if DiskInode::decode(ino, slot) != InodeSlot::Free {
                    continue;
                }
                // Its group's header (pass 5) says it was handed out.
                let now = self.core.initialized[g as usize];
                if i >= now {
                    self.core.initialized[g as usize] = initialized_for(i, now, sb.inodes_per_group);
                }
                self.made_inodes.insert(ino);
                return Ok(Some(ino));
            }
        }
        Ok(None)
    }
}
