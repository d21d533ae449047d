//! Pass 4: each inode's link count against the entries naming it.

use super::*;

impl Checker {
    // Pass 4: each inode's link count against the entries naming it.
    //
    // A directory whose count is 0 was removed while still open (its
    // orphan-list entry may not have reached the disk): its `.` and `..`
    // are no longer links, as the kernel counts them.
    //
    // A directory no entry names (one pass 3 did not reconnect) is not
    // counted by the parent its `..` names: reconnected, it would not be.
    pub(super) fn pass4_link_counts(&mut self) -> Result<(), FsError> {
        // Removed while open: no count and no entry naming it (a named
        // directory whose count is 0 is a count gone wrong, not removed).
        let removed_dirs: HashSet<u32> = (self.inodes.iter())
            .filter(|(&d, s)| d != ROOT_INO && s.nlink == 0 && s.names == 0)
            .map(|(&d, _)| d)
            .collect();
        let removed = |d: &u32| removed_dirs.contains(d);
        let unnamed = |d: &u32| self.inodes.get(d).is_none_or(|s| s.names == 0);
        let counted = |(d, p): &(&u32, &u32)| d != p && !removed(d) && !unnamed(d);
        let subdirs: HashMap<u32, u32> =
            (self.dotdot.iter()).filter(counted).fold(HashMap::default(), |mut m, (_, p)| {
                *m.entry(*p).or_default() += 1;
                m
            });
        let mut inos: Vec<u32> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let seen = &self.inodes[&ino];
            let (nlink, seen_names, dir) = (seen.nlink, seen.names, seen.is_dir());
            // A directory: its entry, its `.`, and each subdirectory's `..`.
            let names = if dir && !removed(&ino) {
                seen_names + 1 + subdirs.get(&ino).copied().unwrap_or(0)
            } else {
                seen_names
            };
            let names = if ino == ROOT_INO { names + 1 } else { names };
            let links = u32::from(nlink);
            // One left unattached keeps its count: zero would clear it.
            if links == names || (names == 0 && self.left_unattached.contains(&ino)) {
                continue;
            }
            let class = if links > names { Class::LinkCountTooHigh } else { Class::LinkCountTooLow };
            if self.found(class, format!("inode {ino} has {links} links, {names} entries name it")) {
                let mut inode = self.inode_now(ino)?;
                inode.nlink = names as u16;
                if names == 0 {
                    self.core.clear_inode(ino).map_err(Self::errno)?;
                    self.inodes.remove(&ino);
                } else {
                    self.core.put_inode(ino, &inode).map_err(Self::errno)?;
                }
            }
        }
        Ok(())
    }
}
