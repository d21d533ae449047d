//! Pass 2: every directory's records, `.` and `..`, names, types, and
//! directories linked once.

use super::*;

impl Checker {
    // Pass 2: every directory's records; `.` and `..`.
    pub(super) fn pass2_entries(&mut self) -> Result<(), FsError> {
        let mut dirs: Vec<u32> = self.inodes.iter().filter(|(_, s)| s.is_dir()).map(|(i, _)| *i).collect();
        dirs.sort_unstable();
        self.will_need_directories();
        for dir in dirs {
            self.report.directories += 1;
            self.read_directory(dir)?;
        }
        self.check_duplicate_names()?;
        // Filtered in place: the entries are the check's largest list.
        let mut entries = std::mem::take(&mut self.entries);
        let mut failed: Result<(), FsError> = Ok(());
        let types = self.entry_types();
        entries.retain(|e| {
            if *e.name == *b"." || *e.name == *b".." || type_of(&types, e.ino) != 0 || failed.is_err() {
                return true;
            }
            let name = String::from_utf8_lossy(&e.name).into_owned();
            let detail = format!(
                "entry '{name}' in directory {} names inode {}, which is free or uninitialised",
                e.dir, e.ino
            );
            if self.found(Class::EntryNamingFreeInode, detail) {
                let mut inode = self.dir_copy(e.dir);
                failed =
                    self.core.dir_remove(e.dir, &mut inode, &e.name, e.offset).map(drop).map_err(Self::errno);
            }
            false
        });
        failed?;
        self.entries = entries;
        self.check_entry_types()?;
        self.check_directory_links()?;
        for e in &self.entries {
            if *e.name == *b"." {
                continue;
            }
            if *e.name == *b".." {
                self.dotdot.insert(e.dir, e.ino);
            }
        }
        for e in &self.entries {
            if *e.name != *b"." && *e.name != *b".." {
                if let Some(seen) = self.inodes.get_mut(&e.ino) {
                    seen.names += 1;
                }
            }
        }
        self.check_dots()?;
        Ok(())
    }

    /// One entry of each name in a directory, as e2fsck's "duplicate
    /// entry" holds it: a lookup finds one of them, a listing both, and a
    /// second `..` is the one a lookup takes in a large directory. Each
    /// later one is removed (what it named may then be unattached, and
    /// pass 3 reconnects it).
    pub(super) fn check_duplicate_names(&mut self) -> Result<(), FsError> {
        let mut seen: HashSet<(u32, &[u8])> = HashSet::default();
        let mut duplicates = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if !seen.insert((e.dir, e.name.as_slice())) {
                duplicates.push(i);
            }
        }
        let mut removed = HashSet::default();
        for i in duplicates {
            let e = &self.entries[i];
            let detail = format!(
                "directory {} has a second entry '{}' (inode {})",
                e.dir,
                String::from_utf8_lossy(&e.name),
                e.ino
            );
            let (dir, name, offset) = (e.dir, e.name.clone(), e.offset);
            if self.found(Class::BadDirectoryBlock, detail) {
                let mut inode = self.dir_copy(dir);
                self.core.dir_remove(dir, &mut inode, &name, offset).map_err(Self::errno)?;
                self.core.drop_index(dir);
                removed.insert(i);
            }
        }
        let entries = std::mem::take(&mut self.entries);
        self.entries =
            entries.into_iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, e)| e).collect();
        Ok(())
    }

    /// Every directory named by one entry, as fsck_ffs and e2fsck hold
    /// it: an entry naming the root or its own directory is removed, of
    /// several naming one directory the one its `..` names is kept, and
    /// then a walk from the root (and from each directory it does not
    /// reach: those no entry names first, then loops, cut where the
    /// lowest-numbered directory is) keeps the first entry that reaches
    /// each directory and removes the rest.
    pub(super) fn check_directory_links(&mut self) -> Result<(), FsError> {
        let types = self.entry_types();
        let mut dotdot: HashMap<u32, u32> = HashMap::default();
        for e in self.entries.iter().filter(|e| *e.name == *b"..") {
            dotdot.entry(e.dir).or_insert(e.ino);
        }
        let mut drop: BTreeMap<usize, &'static str> = BTreeMap::new();
        let mut namers: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if *e.name == *b"." || *e.name == *b".." || type_of(&types, e.ino) != DT_DIR {
                continue;
            }
            if e.ino == ROOT_INO {
                drop.insert(i, "the root");
            } else if e.ino == e.dir {
                drop.insert(i, "the directory holding it");
            } else {
                namers.entry(e.ino).or_default().push(i);
            }
        }
        for (d, list) in &namers {
            let parent = dotdot.get(d);
            if let Some(&keep) = list.iter().find(|&&i| Some(&self.entries[i].dir) == parent) {
                for &i in list.iter().filter(|&&i| i != keep) {
                    drop.insert(i, "a directory another entry names");
                }
            }
        }
        self.walk_from_roots(&namers, &mut drop);
        if drop.is_empty() {
            return Ok(());
        }
        self.remove_directory_links(&drop)
    }

    /// The walk from the root, then from each directory it does not
    /// reach (those no entry names first, then loops, cut where the
    /// lowest-numbered directory is): the first entry to reach a
    /// directory is kept, every other one goes into `drop`.
    fn walk_from_roots(&self, namers: &BTreeMap<u32, Vec<usize>>, drop: &mut BTreeMap<usize, &'static str>) {
        let is_dir = |c: &Self, i: u32| c.inodes.get(&i).is_some_and(|s| s.is_dir());
        let mut children: HashMap<u32, Vec<usize>> = HashMap::default();
        for list in namers.values() {
            for &i in list.iter().filter(|i| !drop.contains_key(i)) {
                children.entry(self.entries[i].dir).or_default().push(i);
            }
        }
        for list in children.values_mut() {
            list.sort_unstable();
        }
        let named: HashSet<u32> =
            namers.iter().filter(|(_, l)| l.iter().any(|i| !drop.contains_key(i))).map(|(d, _)| *d).collect();
        let mut dirs: Vec<u32> = self.inodes.keys().copied().filter(|&i| is_dir(self, i)).collect();
        dirs.sort_unstable();
        let starts = std::iter::once(ROOT_INO)
            .chain(dirs.iter().copied().filter(|d| !named.contains(d)))
            .chain(dirs.iter().copied().filter(|d| named.contains(d)));
        let mut reached: HashSet<u32> = HashSet::default();
        for start in starts.collect::<Vec<_>>() {
            if !reached.insert(start) {
                continue;
            }
            let mut queue = std::collections::VecDeque::from([start]);
            while let Some(d) = queue.pop_front() {
                for &i in children.get(&d).into_iter().flatten() {
                    let t = self.entries[i].ino;
                    if reached.insert(t) {
                        queue.push_back(t);
                    } else {
                        drop.insert(i, "a directory another entry names");
                    }
                }
            }
        }
    }

    /// The entries in `drop` removed from their directories, each as a
    /// finding with why.
    fn remove_directory_links(&mut self, drop: &BTreeMap<usize, &'static str>) -> Result<(), FsError> {
        let mut removed = HashSet::default();
        for (&i, why) in drop {
            let e = &self.entries[i];
            let detail = format!(
                "entry '{}' in directory {} names directory {}, {why}",
                String::from_utf8_lossy(&e.name),
                e.dir,
                e.ino
            );
            let (dir, name, offset) = (e.dir, e.name.clone(), e.offset);
            if self.found(Class::DirectoryLinkedTwice, detail) {
                let mut inode = self.dir_copy(dir);
                self.core.dir_remove(dir, &mut inode, &name, offset).map_err(Self::errno)?;
                removed.insert(i);
            }
        }
        let entries = std::mem::take(&mut self.entries);
        self.entries =
            entries.into_iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, e)| e).collect();
        Ok(())
    }

    /// Adds the entry `name -> target` to directory `dir` (grown first
    /// when it has no room), recorded in `entries`. Whether it could.
    pub(super) fn add_entry(&mut self, dir: u32, name: &[u8], target: u32, dt: u8) -> Result<bool, FsError> {
        if !self.room_in(dir, name.len())? {
            return Ok(false);
        }
        let mut inode = self.core.inode(dir).map_err(Self::errno)?;
        self.core.dir_add(dir, &mut inode, name, target, dt).map_err(Self::errno)?;
        self.core.put_inode(dir, &inode).map_err(Self::errno)?;
        let found = self.core.dir_lookup(dir, &mut inode, name).map_err(Self::errno)?;
        let offset = found.map(|f| f.offset).ok_or_else(|| Self::errno(fsapi::Errno::IO))?;
        if let Some(seen) = self.inodes.get_mut(&dir) {
            seen.set(inode);
        }
        self.entries.push(Entry { dir, name: name.into(), ino: target, kind: dt, offset });
        Ok(true)
    }

    /// Each entry's type byte against the kind of the inode it names (a
    /// listing trusts the byte, as readdir does everywhere); a repair
    /// rewrites the byte.
    pub(super) fn check_entry_types(&mut self) -> Result<(), FsError> {
        let mut wrong = Vec::new();
        let types = self.entry_types();
        for (i, e) in self.entries.iter().enumerate() {
            let dt = type_of(&types, e.ino);
            if dt != 0 && dt != ANY_TYPE && dt != e.kind {
                wrong.push((i, dt));
            }
        }
        for (i, dt) in wrong {
            let e = &self.entries[i];
            let (dir, offset, ino) = (e.dir, e.offset, e.ino);
            let detail = format!(
                "entry '{}' in directory {} says type {}, but inode {} is a {} (type {dt})",
                String::from_utf8_lossy(&e.name),
                e.dir,
                e.kind,
                e.ino,
                kind_name(self.inodes[&e.ino].mode)
            );
            if self.found(Class::WrongEntryType, detail) {
                let mut inode = self.dir_copy(dir);
                self.core.dir_retarget(dir, &mut inode, offset, ino, dt).map_err(Self::errno)?;
                self.entries[i].kind = dt;
            }
        }
        Ok(())
    }

    /// Reads directory `dir`'s records into `entries`; a block whose
    /// records do not tile it is reported (and, repaired, its bad chunks
    /// emptied). A size that is not the blocks the directory maps (past
    /// its last block, short of it, or not a whole block) is set to them,
    /// as fsck_ffs adjusts a directory's length: a hole inside is filled
    /// with an empty directory block, never grown into a size that maps
    /// nothing. An entry whose name no lookup can take (empty, `/` or NUL
    /// in it) is removed: what it named is then unattached, and pass 3
    /// reconnects it.
    /// Asks for every block the directories claim (pass 1's claims) at
    /// once, in block order and in runs, before the walk reads them one
    /// directory at a time (e2fsck sorts its directory blocks the same
    /// way): on a cold buffered image the reads then find them in memory.
    fn will_need_directories(&mut self) {
        let mut blocks: Vec<u64> = self
            .claims
            .iter()
            .filter(|(_, owner)| self.inodes.get(owner).is_some_and(Seen::is_dir))
            .map(|(block, _)| block)
            .collect();
        blocks.sort_unstable();
        // A gap of a few blocks costs less read in than another request.
        const GAP_BLOCKS: u64 = 8;
        let mut run: Option<(u64, u64)> = None;
        for block in blocks {
            run = match run {
                Some((first, end)) if block <= end + GAP_BLOCKS => Some((first, block + 1)),
                Some((first, end)) => {
                    self.will_need(first, end - first);
                    Some((block, block + 1))
                }
                None => Some((block, block + 1)),
            };
        }
        if let Some((first, end)) = run {
            self.will_need(first, end - first);
        }
    }

    pub(super) fn read_directory(&mut self, dir: u32) -> Result<(), FsError> {
        let mut inode = self.dir_copy(dir);
        let mapped = self.mapped_blocks(&inode)?;
        if inode.size != mapped * BLOCK_BYTES as u64 {
            let detail = format!(
                "directory {dir} is {} bytes long and maps {mapped} blocks: its length is set to them",
                inode.size
            );
            if self.found(Class::BadDirectoryBlock, detail) {
                inode.size = mapped * BLOCK_BYTES as u64;
                self.core.put_inode(dir, &inode).map_err(Self::errno)?;
                self.core.drop_index(dir);
                if let Some(seen) = self.inodes.get_mut(&dir) {
                    seen.set(inode.clone());
                }
            }
        }
        for n in 0..mapped {
            let Some((block, _)) = self.core.bmap(dir, &mut inode, n, false).map_err(Self::errno)? else {
                let detail = format!("directory {dir} has a hole at block {n}");
                if self.found(Class::BadDirectoryBlock, detail) && !self.fill_dir_block(dir, &mut inode, n)? {
                    if let Some(last) = self.report.findings.last_mut() {
                        last.repaired = false;
                    }
                }
                continue;
            };
            self.read_directory_block(dir, &mut inode, n, block)?;
        }
        Ok(())
    }

    /// Block `n` (at `block`) of directory `dir`: each record read into
    /// `entries`; a malformed record mended (the rest of its chunk joins
    /// the record before it, as fsck_ffs's dircheck does), an entry whose
    /// name no lookup takes removed.
    fn read_directory_block(
        &mut self,
        dir: u32,
        inode: &mut DiskInode,
        n: u64,
        block: u32,
    ) -> Result<(), FsError> {
        let bytes = self.read(u64::from(block))?;
        let mut at = 0usize;
        // The last good record of the chunk `at` is in.
        let mut previous: Option<usize> = None;
        while at < BLOCK_BYTES {
            if at % DIR_CHUNK_BYTES == 0 {
                previous = None;
            }
            let Some(rec) = DirRecord::read(&bytes, at) else {
                let detail = format!("directory {dir}, block {n}: a malformed record at byte {at}");
                let chunk_end = (at / DIR_CHUNK_BYTES + 1) * DIR_CHUNK_BYTES;
                if self.found(Class::BadDirectoryBlock, detail) {
                    // The rest of the chunk joins the record before it
                    // (as fsck_ffs's dircheck mends), or, first in its
                    // chunk, becomes one empty record: never a record
                    // too short for its own header.
                    let out = self.core.cache.modify(&mut self.core.order, u64::from(block))?;
                    match previous {
                        Some(p) => out[p + 4..p + 6].copy_from_slice(&((chunk_end - p) as u16).to_le_bytes()),
                        None => {
                            let reclen = (chunk_end - at) as u16;
                            DirRecord { ino: 0, reclen, kind: 0, name: Vec::new() }.write(out, at)
                        }
                    }
                }
                at = chunk_end;
                continue;
            };
            let offset = n * BLOCK_BYTES as u64 + at as u64;
            if rec.ino == 0 || at % DIR_CHUNK_BYTES == 0 || !bad_name(&rec.name) {
                // A removed entry joins the record before it.
                previous = Some(at);
            }
            at += rec.reclen as usize;
            if rec.ino == 0 {
                continue;
            }
            if bad_name(&rec.name) {
                let detail = format!(
                    "directory {dir}, block {n}: the entry '{}' (inode {}) has a name no lookup takes",
                    String::from_utf8_lossy(&rec.name),
                    rec.ino
                );
                if self.found(Class::BadDirectoryBlock, detail) {
                    self.core.dir_remove(dir, inode, &rec.name, offset).map_err(Self::errno)?;
                    continue;
                }
            }
            let (name, ino, kind) = (rec.name, rec.ino, rec.kind);
            self.entries.push(Entry { dir, name: name.into(), ino, kind, offset });
        }
        Ok(())
    }

    /// The blocks directory `inode` maps: up to its last pointer (its
    /// pointers as pass 1 left them).
    pub(super) fn mapped_blocks(&mut self, inode: &DiskInode) -> Result<u64, FsError> {
        let mut end = 0u64;
        for (i, &p) in inode.direct.iter().enumerate() {
            if p != 0 {
                end = i as u64 + 1;
            }
        }
        let last_in =
            |bytes: &[u8]| (0..POINTERS_PER_BLOCK as usize).rev().find(|&i| pointer_at(bytes, i) != 0);
        if inode.single != 0 && self.is_data(u64::from(inode.single)) {
            let bytes = self.read(u64::from(inode.single))?;
            if let Some(i) = last_in(&bytes) {
                end = DIRECT_POINTERS as u64 + i as u64 + 1;
            }
        }
        if inode.double != 0 && self.is_data(u64::from(inode.double)) {
            let bytes = self.read(u64::from(inode.double))?;
            let mut last = None;
            for i in (0..POINTERS_PER_BLOCK as usize).rev() {
                let p = pointer_at(&bytes, i);
                if p == 0 || !self.is_data(u64::from(p)) {
                    continue;
                }
                let single = self.read(u64::from(p))?;
                if let Some(j) = last_in(&single) {
                    last = Some(i as u64 * POINTERS_PER_BLOCK + j as u64);
                    break;
                }
            }
            if let Some(k) = last {
                end = DIRECT_POINTERS as u64 + POINTERS_PER_BLOCK + k + 1;
            }
        }
        Ok(end)
    }

    /// `.` must name the directory, and `..` the directory that names it
    /// (the root's, itself); a repair rewrites the entry, so a second
    /// check finds nothing. A directory no entry names is not held to its
    /// `..`: pass 3 puts it in lost+found and points its `..` there, as
    /// fsck_ffs's linkup does (soft updates writes a new directory before
    /// its parent's count, even before a new parent itself: until its
    /// entry is on the disk, its `..` is not a link). A directory named
    /// from more than one directory may name any of them.
    pub(super) fn check_dots(&mut self) -> Result<(), FsError> {
        let mut dirs: Vec<u32> = self.inodes.iter().filter(|(_, s)| s.is_dir()).map(|(i, _)| *i).collect();
        dirs.sort_unstable();
        // One pass over the entries: who names each directory, and where
        // each directory's `.` and `..` are.
        let mut namers: HashMap<u32, Vec<u32>> = HashMap::default();
        let mut dots: HashMap<u32, (Option<usize>, Option<usize>)> = HashMap::default();
        let types = self.entry_types();
        for (i, e) in self.entries.iter().enumerate() {
            match e.name.as_slice() {
                b"." => dots.entry(e.dir).or_default().0.get_or_insert(i),
                b".." => dots.entry(e.dir).or_default().1.get_or_insert(i),
                // Only a directory's namers are asked for: a map of every
                // file's would be the check's largest.
                _ if e.dir != e.ino && type_of(&types, e.ino) == DT_DIR => {
                    namers.entry(e.ino).or_default().push(e.dir);
                    continue;
                }
                _ => continue,
            };
        }
        for dir in dirs {
            let (dot, dotdot) = dots.get(&dir).copied().unwrap_or_default();
            let named = dir == ROOT_INO || self.inodes[&dir].names > 0;
            let expected =
                if dir == ROOT_INO { vec![ROOT_INO] } else { namers.get(&dir).cloned().unwrap_or_default() };
            let dot_ok = dot.is_some_and(|i| self.entries[i].ino == dir);
            let parent = dotdot.map(|i| self.entries[i].ino);
            let parent_ok = !named || parent.is_some_and(|p| expected.contains(&p));
            if dot_ok && parent_ok {
                continue;
            }
            let detail = format!(
                "directory {dir}: '.' names {:?}, '..' names {parent:?} (named from {expected:?})",
                dot.map(|i| self.entries[i].ino)
            );
            // Only `..` naming a directory, another than its namer's:
            // a crash inside a rename, which preen mends.
            let is_dir = |p: u32| self.inodes.get(&p).is_some_and(|s| s.is_dir());
            let class =
                if dot_ok && parent.is_some_and(is_dir) { Class::DotDotMismatch } else { Class::BadDotDot };
            if !self.found(class, detail) {
                continue;
            }
            let mut fixes = Vec::new();
            if !dot_ok {
                fixes.push((dot, dir, &b"."[..]));
            }
            if !parent_ok {
                fixes.push((dotdot, expected[0], &b".."[..]));
            }
            self.fix_dots(dir, fixes)?;
        }
        Ok(())
    }

    /// Directory `dir`'s `.` or `..` entries made to name `target`: each
    /// wrong entry (at its index in `entries`) rewritten where it is, a
    /// missing one added (with room made for it); the finding is left
    /// unrepaired when one cannot be added.
    fn fix_dots(&mut self, dir: u32, fixes: Vec<(Option<usize>, u32, &[u8])>) -> Result<(), FsError> {
        let mut inode = self.dir_copy(dir);
        let mut whole = true;
        for (at, target, name) in fixes {
            let Some(i) = at else {
                // Missing: added (with room made for it).
                whole &= self.add_entry(dir, name, target, DT_DIR)?;
                if name == b".." {
                    self.dotdot.insert(dir, target);
                }
                continue;
            };
            let offset = self.entries[i].offset;
            self.core.dir_retarget(dir, &mut inode, offset, target, DT_DIR).map_err(Self::errno)?;
            self.entries[i].ino = target;
            if *self.entries[i].name == *b".." {
                self.dotdot.insert(dir, target);
            }
        }
        if !whole {
            if let Some(last) = self.report.findings.last_mut() {
                last.repaired = false;
            }
        }
        Ok(())
    }
}
