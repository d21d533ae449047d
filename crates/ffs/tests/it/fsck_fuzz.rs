//! The fsck image fuzzer (issue 43): a small image holding a seeded tree,
//! its metadata corrupted at random (bytes over a metadata block, an
//! inode's fields at their bounds with the checksum resealed, entries
//! pointed at other directories, at the root, at free inodes, `..`
//! pointed elsewhere, records' lengths changed); then `fsck -y` must
//! return, a second `fsck -n` must be clean (it converged), every file
//! fsck kept must be readable through fsapi, `rm -rf` of everything must
//! succeed, and the image must check clean after it.
//!
//! The case count comes from `IOLAB_FSCK_FUZZ_CASES` (bench/fsck_fuzz.py
//! runs tens of thousands); the seed of the run from `IOLAB_FSCK_FUZZ_SEED`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::sync::{Arc, Mutex, OnceLock};

use device::{Device, MemDevice};
use ffs::format::*;
use ffs::fsck::{fsck, Repair};
use ffs::{Ffs, FsError, MountOptions, Policy};
use fsapi::{Errno, FileSystem, FileType, Owner, Whence, XattrFlags, ROOT};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::fuzz::bounded;

/// The image's size: one group, enough room for lost+found to grow.
const IMAGE_BYTES: u64 = 8 << 20;
/// Tree shapes: each seeded differently, built once per run.
const SHAPES: u64 = 6;
/// Cases when the environment does not say (≲60 s in a debug build).
const DEFAULT_CASES: u32 = 500;

/// One inode of the seeded tree.
#[derive(Clone, Debug)]
struct Node {
    ino: u32,
    kind: FileType,
    /// The directory holding its first name (the root's: itself).
    parent: u32,
}

/// A built image and what is in it.
struct Base {
    bytes: Vec<u8>,
    sb: Superblock,
    nodes: Vec<Node>,
}

/// SplitMix64: the generator the corruptions and shapes draw from.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> Option<T> {
        if from.is_empty() {
            None
        } else {
            Some(from[self.below(from.len() as u64) as usize].clone())
        }
    }
}

/// The image of shape `shape`, built once.
fn base(shape: u64) -> Arc<Base> {
    static BASES: OnceLock<Mutex<HashMap<u64, Arc<Base>>>> = OnceLock::new();
    let bases = BASES.get_or_init(Default::default);
    if let Some(b) = bases.lock().unwrap().get(&shape) {
        return Arc::clone(b);
    }
    let built = Arc::new(build(shape));
    bases.lock().unwrap().insert(shape, Arc::clone(&built));
    built
}

/// Builds the seeded tree of `shape` under `async`: nested directories,
/// small and large files (the large through the single indirect block),
/// a short and a long symlink, a hard link, a FIFO, an attribute.
fn build(shape: u64) -> Base {
    let mut rng = Mix(shape.wrapping_mul(7919).wrapping_add(1));
    let dev = crate::common::fresh(IMAGE_BYTES);
    let fs = crate::common::mount(&dev, Policy::Async);
    let own = |perm| Owner::root(perm);
    let mut nodes = vec![Node { ino: ROOT_INO, kind: FileType::Dir, parent: ROOT_INO }];
    let lf = fs.lookup(ROOT, OsStr::new("lost+found")).unwrap().ino as u32;
    nodes.push(Node { ino: lf, kind: FileType::Dir, parent: ROOT_INO });
    let mut dirs = vec![ROOT_INO];
    for i in 0..(3 + rng.below(4)) {
        let parent = rng.pick(&dirs).unwrap();
        let d = fs.mkdir(u64::from(parent), OsStr::new(&format!("d{i}")), own(0o755)).unwrap().ino as u32;
        nodes.push(Node { ino: d, kind: FileType::Dir, parent });
        dirs.push(d);
    }
    let mut files = Vec::new();
    for i in 0..(3 + rng.below(4)) {
        let parent = rng.pick(&dirs).unwrap();
        let f = fs.create(u64::from(parent), OsStr::new(&format!("f{i}")), own(0o644)).unwrap().ino;
        let len = match i {
            0 => 100 << 10, // past the twelve direct blocks
            1 => 0,
            _ => [1usize, 4096, 10_000, 60 << 10][rng.below(4) as usize],
        };
        let fill: Vec<u8> = (0..len).map(|j| (j as u64 ^ f) as u8).collect();
        fs.write(f, 0, &fill).unwrap();
        nodes.push(Node { ino: f as u32, kind: FileType::File, parent });
        files.push((f, parent));
    }
    let (f0, _) = files[0];
    fs.setxattr(f0, OsStr::new("user.fuzz"), &[5u8; 300], XattrFlags::ANY).unwrap();
    let at = rng.pick(&dirs).unwrap();
    fs.link(f0, u64::from(at), OsStr::new("hard")).unwrap();
    let short = fs.symlink(u64::from(at), OsStr::new("s"), OsStr::new("f0"), own(0o777)).unwrap().ino;
    nodes.push(Node { ino: short as u32, kind: FileType::Symlink, parent: at });
    let target = "x/".repeat(150);
    let long = fs.symlink(u64::from(at), OsStr::new("l"), OsStr::new(&target), own(0o777)).unwrap().ino;
    nodes.push(Node { ino: long as u32, kind: FileType::Symlink, parent: at });
    let p = fs.mknod(u64::from(at), OsStr::new("p"), FileType::Fifo, 0, own(0o644)).unwrap().ino;
    nodes.push(Node { ino: p as u32, kind: FileType::Fifo, parent: at });
    if shape % 2 == 0 {
        // A directory of two blocks.
        let parent = rng.pick(&dirs).unwrap();
        let big = fs.mkdir(u64::from(parent), OsStr::new("big"), own(0o755)).unwrap().ino;
        nodes.push(Node { ino: big as u32, kind: FileType::Dir, parent });
        for i in 0..170 {
            let name = format!("entry-with-a-long-name-{i:04}");
            let e = fs.create(big, OsStr::new(&name), own(0o644)).unwrap().ino;
            nodes.push(Node { ino: e as u32, kind: FileType::File, parent: big as u32 });
        }
    }
    fs.unmount().unwrap();
    let mut bytes = vec![0u8; IMAGE_BYTES as usize];
    dev.read_at(&mut bytes, 0).unwrap();
    let sb = ffs::read_superblock(&dev).unwrap();
    Base { bytes, sb, nodes }
}

/// An image being corrupted, with what was done to it.
struct Image<'a> {
    bytes: Vec<u8>,
    sb: &'a Superblock,
    nodes: &'a [Node],
    done: Vec<String>,
}

impl Image<'_> {
    fn block(&self, b: u64) -> &[u8] {
        &self.bytes[b as usize * BLOCK_BYTES..(b as usize + 1) * BLOCK_BYTES]
    }

    fn block_mut(&mut self, b: u64) -> &mut [u8] {
        &mut self.bytes[b as usize * BLOCK_BYTES..(b as usize + 1) * BLOCK_BYTES]
    }

    fn inode(&self, ino: u32) -> Option<DiskInode> {
        if ino == 0 || u64::from(ino) > self.sb.total_inodes() {
            return None;
        }
        let (block, at) = self.sb.inode_place(ino);
        match DiskInode::decode(ino, &self.block(block)[at..at + INODE_BYTES]) {
            InodeSlot::Used(inode) => Some(inode),
            _ => None,
        }
    }

    fn put_inode(&mut self, ino: u32, inode: &DiskInode) {
        let (block, at) = self.sb.inode_place(ino);
        inode.encode(ino, &mut self.block_mut(block)[at..at + INODE_BYTES]);
    }

    /// The blocks an inode's pointers name, data and indirect apart,
    /// pointers that point nowhere sensible left out.
    fn blocks_of(&self, ino: u32) -> (Vec<u32>, Vec<u32>) {
        let Some(inode) = self.inode(ino) else { return (Vec::new(), Vec::new()) };
        let ok = |b: u32| b != 0 && self.sb.is_data(u64::from(b));
        let mut data: Vec<u32> = inode.direct.iter().copied().filter(|&b| ok(b)).collect();
        let mut meta = Vec::new();
        if ok(inode.single) {
            meta.push(inode.single);
            let block = self.block(u64::from(inode.single));
            data.extend((0..POINTERS_PER_BLOCK as usize).map(|i| pointer_at(block, i)).filter(|&b| ok(b)));
        }
        if ok(inode.double) {
            meta.push(inode.double);
        }
        if ok(inode.xattr) {
            meta.push(inode.xattr);
        }
        (data, meta)
    }

    fn dirs(&self) -> Vec<u32> {
        self.nodes.iter().filter(|n| n.kind == FileType::Dir).map(|n| n.ino).collect()
    }

    /// Directory `dir`'s blocks (the data blocks of a directory inode).
    fn dir_blocks(&self, dir: u32) -> Vec<u32> {
        match self.inode(dir) {
            Some(i) if i.kind_bits() == S_IFDIR => self.blocks_of(dir).0,
            _ => Vec::new(),
        }
    }

    /// Every readable record of directory `dir`: (block, offset, record).
    fn records(&self, dir: u32) -> Vec<(u32, usize, DirRecord)> {
        let mut out = Vec::new();
        for b in self.dir_blocks(dir) {
            let bytes = self.block(u64::from(b));
            let mut at = 0;
            while at < BLOCK_BYTES {
                match DirRecord::read(bytes, at) {
                    Some(rec) => {
                        let len = rec.reclen as usize;
                        if rec.ino != 0 {
                            out.push((b, at, rec));
                        }
                        at += len;
                    }
                    None => at = (at / DIR_CHUNK_BYTES + 1) * DIR_CHUNK_BYTES,
                }
            }
        }
        out
    }

    /// The metadata blocks of the image, the superblock slots and the log
    /// region left out: group headers, bitmaps, inode table blocks in use,
    /// directory blocks, indirect and attribute blocks.
    fn metadata_blocks(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for g in 0..self.sb.groups {
            let start = self.sb.group_start(g);
            out.extend([start, start + 1, start + 2]);
        }
        let mut seen = HashSet::new();
        for n in self.nodes {
            let (block, _) = self.sb.inode_place(n.ino);
            if seen.insert(block) {
                out.push(block);
            }
            let (data, meta) = self.blocks_of(n.ino);
            out.extend(meta.iter().map(|&b| u64::from(b)));
            if n.kind == FileType::Dir {
                out.extend(data.iter().map(|&b| u64::from(b)));
            }
        }
        out
    }

    /// A free inode number: past every inode the tree holds.
    fn free_ino(&self, rng: &mut Mix) -> u32 {
        let top = self.nodes.iter().map(|n| n.ino).max().unwrap_or(2);
        let total = self.sb.total_inodes() as u32;
        (top + 1 + rng.below(8) as u32).min(total)
    }

    /// A block pointer value for inode `ino`'s damage: another file's
    /// block, an indirect or directory block, a metadata block, one
    /// outside the device, zero, or anything.
    fn pointer_value(&self, ino: u32, rng: &mut Mix) -> (u32, String) {
        let others: Vec<u32> = self.nodes.iter().map(|n| n.ino).filter(|&i| i != ino).collect();
        let other = rng.pick(&others).unwrap_or(ROOT_INO);
        let (data, meta) = self.blocks_of(other);
        let start = self.sb.group_start(0) as u32;
        let choice = rng.below(9);
        let value = match choice {
            0 | 1 => rng.pick(&data).unwrap_or(0),
            2 => rng.pick(&meta).unwrap_or(0),
            3 => start + rng.below(3) as u32,
            4 => start + 3 + rng.below(u64::from(self.sb.inode_table_blocks())) as u32,
            5 => [self.sb.blocks as u32, self.sb.blocks as u32 - 1, u32::MAX][rng.below(3) as usize],
            6 => [0u32, 1, self.sb.log_start_block as u32][rng.below(3) as usize],
            // A block no file holds (the tree is far smaller).
            7 if self.sb.is_data(u64::from(start) + 200) => start + 200,
            _ => rng.next() as u32,
        };
        (value, format!("{value} (choice {choice}, inode {other}'s)"))
    }

    /// Random bytes over part of a metadata block (the root's inode among
    /// them: `-y` makes a lost root again).
    fn corrupt_bytes(&mut self, rng: &mut Mix) {
        let blocks = self.metadata_blocks();
        let Some(block) = rng.pick(&blocks) else { return };
        let len = [1usize, 4, 16, 64, 512, 4096][rng.below(6) as usize];
        let at = rng.below((BLOCK_BYTES - len + 1) as u64) as usize;
        let zero = rng.below(4) == 0;
        for i in at..at + len {
            let v = if zero { 0 } else { rng.next() as u8 };
            self.block_mut(block)[i] = v;
        }
        self.done.push(format!(
            "bytes {at}..{} of block {block} {}",
            at + len,
            if zero { "zeroed" } else { "random" }
        ));
    }

    /// A field of an inode in use set to an edge or random value, the
    /// checksum resealed.
    fn corrupt_field(&mut self, rng: &mut Mix) {
        let Some(node) = rng.pick(self.nodes) else { return };
        let ino = node.ino;
        let Some(mut inode) = self.inode(ino) else { return };
        let field = rng.below(8);
        let what = match field {
            0 => {
                let kinds =
                    [S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFCHR, S_IFSOCK, 0, (rng.next() as u16) & S_IFMT];
                let kind = kinds[rng.below(kinds.len() as u64) as usize];
                inode.mode = (inode.mode & !S_IFMT) | kind;
                format!("mode {:o}", inode.mode)
            }
            1 => {
                inode.nlink = [0u16, 1, 2, 3, u16::MAX, rng.next() as u16][rng.below(6) as usize];
                format!("nlink {}", inode.nlink)
            }
            2 => {
                let values = [
                    0u64,
                    1,
                    100,
                    4095,
                    4096,
                    4097,
                    48 << 10,
                    1 << 32,
                    FILE_BYTES_MAX,
                    FILE_BYTES_MAX + 1,
                    u64::MAX,
                    rng.next() % (1 << 24),
                ];
                inode.size = values[rng.below(values.len() as u64) as usize];
                format!("size {}", inode.size)
            }
            3 => {
                inode.blocks_512 = [0u64, 8, 1 << 40, u64::MAX, rng.next()][rng.below(5) as usize];
                format!("blocks_512 {}", inode.blocks_512)
            }
            4 | 5 => {
                let i = rng.below(DIRECT_POINTERS as u64) as usize;
                let i = if rng.below(2) == 0 { 0 } else { i };
                let (v, why) = self.pointer_value(ino, rng);
                inode.direct[i] = v;
                format!("direct[{i}] {why}")
            }
            6 => {
                let (v, why) = self.pointer_value(ino, rng);
                if rng.below(2) == 0 {
                    inode.single = v;
                    format!("single {why}")
                } else {
                    inode.double = v;
                    format!("double {why}")
                }
            }
            _ => {
                let (v, why) = self.pointer_value(ino, rng);
                inode.xattr = v;
                format!("xattr {why}")
            }
        };
        self.put_inode(ino, &inode);
        self.done.push(format!("inode {ino}: {what}"));
    }

    /// An inode number an entry is pointed at: an ancestor of `dir` (a
    /// cycle), another directory (a hard-linked directory), the root, the
    /// directory itself, a free inode, a file, or anything.
    fn entry_target(&self, dir: u32, rng: &mut Mix) -> (u32, &'static str) {
        let parent_of: HashMap<u32, u32> = self.nodes.iter().map(|n| (n.ino, n.parent)).collect();
        let mut ancestors = Vec::new();
        let mut at = dir;
        while let Some(&p) = parent_of.get(&at) {
            if p == at || ancestors.len() > 32 {
                break;
            }
            ancestors.push(p);
            at = p;
        }
        match rng.below(7) {
            0 => (rng.pick(&ancestors).unwrap_or(ROOT_INO), "an ancestor"),
            1 => (rng.pick(&self.dirs()).unwrap_or(ROOT_INO), "a directory"),
            2 => (ROOT_INO, "the root"),
            3 => (dir, "the directory itself"),
            4 => (self.free_ino(&mut Mix(rng.next())), "a free inode"),
            5 => (rng.pick(self.nodes).map(|n| n.ino).unwrap_or(ROOT_INO), "an inode of the tree"),
            _ => (rng.next() as u32, "anything"),
        }
    }

    /// A record's inode number (a name's, or `..`'s) pointed elsewhere.
    fn corrupt_entry(&mut self, rng: &mut Mix, dotdot: bool) {
        let Some(dir) = rng.pick(&self.dirs()) else { return };
        let records: Vec<_> = (self.records(dir).into_iter())
            .filter(|(_, _, r)| if dotdot { r.name == b".." } else { r.name != b"." && r.name != b".." })
            .collect();
        let Some((block, at, rec)) = rng.pick(&records) else { return };
        let (to, what) = self.entry_target(dir, rng);
        self.block_mut(u64::from(block))[at..at + 4].copy_from_slice(&to.to_le_bytes());
        let name = String::from_utf8_lossy(&rec.name).into_owned();
        self.done.push(format!("entry '{name}' of directory {dir} ({}) now names {to}, {what}", rec.ino));
    }

    /// A record's length or name length bytes changed.
    fn corrupt_record(&mut self, rng: &mut Mix) {
        let Some(dir) = rng.pick(&self.dirs()) else { return };
        let records = self.records(dir);
        let Some((block, at, rec)) = rng.pick(&records) else { return };
        let b = self.block_mut(u64::from(block));
        let what = if rng.below(2) == 0 {
            let values = [
                0u16,
                4,
                8,
                10,
                rec.reclen + 4,
                rec.reclen.saturating_sub(4),
                512,
                513,
                4096,
                rng.next() as u16,
            ];
            let v = values[rng.below(values.len() as u64) as usize];
            b[at + 4..at + 6].copy_from_slice(&v.to_le_bytes());
            format!("reclen {v}")
        } else {
            let v = [0u8, 1, 255, rec.name.len() as u8 + 1, rng.next() as u8][rng.below(5) as usize];
            b[at + 6] = v;
            format!("name length {v}")
        };
        let name = String::from_utf8_lossy(&rec.name).into_owned();
        self.done.push(format!("record '{name}' of directory {dir} at {block}+{at}: {what}"));
    }

    fn corrupt(&mut self, kind: u8, seed: u64) {
        let mut rng = Mix(seed);
        match kind % 6 {
            0 => self.corrupt_bytes(&mut rng),
            1 | 2 => self.corrupt_field(&mut rng),
            3 => self.corrupt_entry(&mut rng, false),
            4 => self.corrupt_entry(&mut rng, true),
            _ => self.corrupt_record(&mut rng),
        }
    }
}

/// A device holding `bytes`.
fn device(bytes: &[u8]) -> Arc<dyn Device> {
    let dev = MemDevice::new(bytes.len() as u64).unwrap();
    dev.write_at(bytes, 0).unwrap();
    Arc::new(dev)
}

/// Reads a regular file through: every byte when it is small, else every
/// data extent `SEEK_DATA`/`SEEK_HOLE` name and its last byte.
fn read_file(fs: &Ffs, ino: u64, size: u64) -> Result<(), String> {
    let mut buf = vec![0u8; 64 << 10];
    let mut read_range = |from: u64, to: u64| -> Result<(), String> {
        let mut at = from;
        while at < to {
            let want = (to - at).min(buf.len() as u64) as usize;
            let n = fs.read(ino, at, &mut buf[..want]).map_err(|e| format!("read {ino} at {at}: {e:?}"))?;
            if n == 0 {
                return Err(format!("read {ino} at {at}: 0 bytes before its size {size}"));
            }
            at += n as u64;
        }
        Ok(())
    };
    if size <= 1 << 20 {
        return read_range(0, size);
    }
    let mut at = 0;
    while at < size {
        let data = match fs.lseek(ino, at, Whence::Data) {
            Ok(d) => d,
            Err(Errno::NXIO) => break,
            Err(e) => return Err(format!("lseek data {ino} at {at}: {e:?}")),
        };
        let hole = fs.lseek(ino, data, Whence::Hole).map_err(|e| format!("lseek hole {ino}: {e:?}"))?;
        read_range(data, hole.min(size))?;
        at = hole.max(data + 1);
    }
    read_range(size - 1, size)
}

/// Walks the whole tree from the root: every entry looked up, every file
/// read, every symlink read, every attribute listed and read; each
/// directory reached once. Returns the directories, parents first.
fn walk(fs: &Ffs) -> Result<Vec<(u64, u64, Vec<u8>)>, String> {
    let mut stack = vec![(ROOT, ROOT, Vec::new())];
    let mut seen = HashSet::new();
    let mut dirs = Vec::new();
    while let Some((dir, parent, name)) = stack.pop() {
        if !seen.insert(dir) {
            return Err(format!(
                "directory {dir} reached twice (again as '{}')",
                String::from_utf8_lossy(&name)
            ));
        }
        dirs.push((dir, parent, name));
        let mut entries = Vec::new();
        fs.readdir(dir, 0, &mut |e| {
            entries.push(e);
            true
        })
        .map_err(|e| format!("readdir {dir}: {e:?}"))?;
        for e in entries {
            let what = format!("'{}' in {dir}", String::from_utf8_lossy(&e.name));
            let attr = fs
                .lookup(dir, OsStr::from_encoded_bytes_unchecked_safe(&e.name))
                .map_err(|x| format!("lookup {what}: {x:?}"))?;
            fs.forget(attr.ino, 1);
            if attr.ino != e.ino || attr.kind != e.kind {
                return Err(format!(
                    "{what}: readdir says {} {:?}, lookup {} {:?}",
                    e.ino, e.kind, attr.ino, attr.kind
                ));
            }
            match attr.kind {
                FileType::File => read_file(fs, attr.ino, attr.size).map_err(|x| format!("{what}: {x}"))?,
                FileType::Symlink => {
                    fs.readlink(attr.ino).map_err(|x| format!("readlink {what}: {x:?}"))?;
                }
                FileType::Dir => stack.push((attr.ino, dir, e.name.clone())),
                _ => {}
            }
            // Every attribute listed reads (fsck drops `user.` ones from
            // a kind that cannot hold them, which getxattr refuses).
            let list = fs.listxattr(attr.ino).map_err(|x| format!("listxattr {what}: {x:?}"))?;
            for n in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
                let n = OsStr::from_encoded_bytes_unchecked_safe(n);
                fs.getxattr(attr.ino, n).map_err(|x| format!("getxattr {what} {n:?}: {x:?}"))?;
            }
        }
    }
    Ok(dirs)
}

/// `rm -rf` of everything but lost+found itself: the directories found
/// by the walk emptied deepest first (each file unlinked), then removed.
fn remove_all(fs: &Ffs, dirs: &[(u64, u64, Vec<u8>)]) -> Result<(), String> {
    for (dir, parent, name) in dirs.iter().rev() {
        let mut entries = Vec::new();
        fs.readdir(*dir, 0, &mut |e| {
            entries.push(e);
            true
        })
        .map_err(|e| format!("readdir {dir}: {e:?}"))?;
        for e in entries.iter().filter(|e| e.kind != FileType::Dir) {
            fs.unlink(*dir, OsStr::from_encoded_bytes_unchecked_safe(&e.name))
                .map_err(|x| format!("unlink '{}' in {dir}: {x:?}", String::from_utf8_lossy(&e.name)))?;
        }
        let keep = *dir == ROOT || (*parent == ROOT && name == b"lost+found");
        if !keep {
            fs.rmdir(*parent, OsStr::from_encoded_bytes_unchecked_safe(name))
                .map_err(|x| format!("rmdir '{}' in {parent}: {x:?}", String::from_utf8_lossy(name)))?;
        }
    }
    Ok(())
}

/// `OsStr` from a name's bytes (names on disk are any bytes but `/`).
trait FromBytes {
    fn from_encoded_bytes_unchecked_safe(b: &[u8]) -> &OsStr;
}

impl FromBytes for OsStr {
    fn from_encoded_bytes_unchecked_safe(b: &[u8]) -> &OsStr {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(b)
    }
}

/// The oracle on a corrupted image: Err(what failed).
fn check(bytes: Vec<u8>) -> Result<(), String> {
    let dev = device(&bytes);
    let yes = match fsck(&dev, Repair::Yes) {
        Ok(r) => r,
        Err(FsError::Superblock { .. }) => return Ok(()),
        Err(e) => return Err(format!("fsck -y: {e}")),
    };
    let no = fsck(&dev, Repair::No).map_err(|e| format!("fsck -n after -y: {e}"))?;
    if !no.clean() {
        return Err(format!("fsck -n after -y found {:?}\n  (-y found {:?})", no.findings, yes.findings));
    }
    let fs = Ffs::mount(Arc::clone(&dev), &MountOptions::default()).map_err(|e| format!("mount: {e}"))?;
    let dirs = walk(&fs).map_err(|e| format!("walk: {e}\n  (-y found {:?})", yes.findings))?;
    remove_all(&fs, &dirs).map_err(|e| format!("rm -rf: {e}\n  (-y found {:?})", yes.findings))?;
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let last = fsck(&dev, Repair::No).map_err(|e| format!("fsck -n after rm -rf: {e}"))?;
    if !last.clean() {
        return Err(format!(
            "fsck -n after rm -rf found {:?}\n  (-y found {:?})",
            last.findings, yes.findings
        ));
    }
    Ok(())
}

/// One case: the shape, and up to four corruptions (kind, seed).
fn case() -> impl Strategy<Value = (u64, Vec<(u8, u64)>)> {
    (0..SHAPES, prop::collection::vec((0u8..6, any::<u64>()), 1..=4))
}

/// Runs the case: corrupts the shape's image and checks it.
fn run_case(shape: u64, corruptions: &[(u8, u64)]) -> Result<(), String> {
    let base = base(shape);
    let mut image = Image { bytes: base.bytes.clone(), sb: &base.sb, nodes: &base.nodes, done: Vec::new() };
    for &(kind, seed) in corruptions {
        image.corrupt(kind, seed);
    }
    let done = image.done.clone();
    let bytes = image.bytes;
    bounded(move || check(bytes)).map_err(|e| format!("{e}\n  corruptions: {done:#?}"))
}

fn cases() -> u32 {
    std::env::var("IOLAB_FSCK_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES)
}

/// The fuzzer: every case converges under `-y`, keeps readable files and
/// removes cleanly. With `IOLAB_FSCK_FUZZ_KEEP_GOING` set, every failing
/// case is printed and counted instead of stopping at the first (what
/// bench/fsck_fuzz.py runs).
#[test]
fn fsck_fuzz_every_repaired_image_converges_reads_and_removes() {
    let seed: u64 = std::env::var("IOLAB_FSCK_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(43);
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases: cases(), failure_persistence: None, ..Config::default() };
    let keep_going = std::env::var_os("IOLAB_FSCK_FUZZ_KEEP_GOING").is_some();
    if keep_going {
        let mut runner =
            TestRunner::new_with_rng(config.clone(), TestRng::from_seed(RngAlgorithm::ChaCha, &key));
        let strategy = case();
        let (mut ran, mut failed) = (0u32, 0u32);
        for _ in 0..config.cases {
            let (shape, corruptions) = strategy.new_tree(&mut runner).unwrap().current();
            ran += 1;
            let outcome = std::panic::catch_unwind(|| run_case(shape, &corruptions))
                .unwrap_or_else(|p| Err(format!("panicked: {p:?}")));
            if let Err(e) = outcome {
                failed += 1;
                println!("FAILURE shape {shape} {corruptions:?}: {e}");
            }
        }
        println!("fsck fuzz: {ran} cases, {failed} failures (seed {seed})");
        assert_eq!(failed, 0, "{failed} of {ran} cases failed");
        return;
    }
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    runner
        .run(&case(), |(shape, corruptions)| run_case(shape, &corruptions).map_err(TestCaseError::fail))
        .unwrap();
}
