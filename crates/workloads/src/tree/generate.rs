//! A seeded source-like tree, as a tar archive in memory, so the tree
//! workloads run on a fresh machine with no archive at hand.
//!
//! The shape is fitted to glibc 2.36's source (21,116 entries: 20,281
//! files in 834 directories, 225 MiB, one symlink):
//! - about 24 files per directory; each new directory hangs from a
//!   directory chosen at random among those less than six deep, which
//!   gives a bushy tree a few levels deep;
//! - file sizes log-normal with a median of 4 KiB and sigma 1.3 (mean
//!   about 9 KiB; a few files of hundreds of KiB), capped at 4 MiB;
//! - names as a source tree's (`.c`, `.h`, `.S`, `Makefile`, some long);
//! - one file in 200 a symlink to a file before it, one in 1000 a hard
//!   link to one.
//!
//! Contents are pseudo-random bytes: the file system stores them, it does
//! not compress them.

use rand::distr::Distribution;
use rand::{Rng, SeedableRng};
use rand_distr::LogNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Files per directory, on average.
const FILES_PER_DIR: u32 = 24;
/// Directories deeper than this get no subdirectories.
const DEPTH_MAX: usize = 6;
const SIZE_MAX: u64 = 4 << 20;
const MIB: u64 = 1 << 20;

/// The shapes of generated tree (`--shape`), to hold the policies' goals
/// on more than one tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TreeShape {
    /// glibc's shape, each file in a directory chosen at random, in that
    /// order (the archive visits directories again and again).
    #[default]
    Random,
    /// The same tree in directory order, as tar archives a real tree:
    /// each directory, then its files.
    Ordered,
    /// The random tree with every file 1 KiB.
    Small,
    /// Few large files, 1 to 64 MiB (log-uniform), a directory of them.
    Large,
    /// A deep narrow tree: chains of directories up to 64 deep, four
    /// files in each, names short so paths stay within PATH_MAX.
    Deep,
    /// Every file in one directory.
    Flat,
}

impl TreeShape {
    pub const ALL: [TreeShape; 6] = [
        TreeShape::Random,
        TreeShape::Ordered,
        TreeShape::Small,
        TreeShape::Large,
        TreeShape::Deep,
        TreeShape::Flat,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TreeShape::Random => "random",
            TreeShape::Ordered => "ordered",
            TreeShape::Small => "small",
            TreeShape::Large => "large",
            TreeShape::Deep => "deep",
            TreeShape::Flat => "flat",
        }
    }

    pub fn parse(s: &str) -> Option<TreeShape> {
        TreeShape::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Files a tree of this shape has when not told: 10,000 (ten copies
    /// of them hold more than a 64 MiB cache many times over, and even
    /// async's removal of them takes more than a second), or 8 large
    /// ones (about 120 MiB).
    pub fn default_files(self) -> u32 {
        match self {
            TreeShape::Large => 8,
            _ => 10_000,
        }
    }
}

/// A tar archive of `files` files (plus their directories, symlinks and
/// hard links) shaped like a source tree under `src/`, the same for the
/// same seed.
pub fn source_archive(seed: u64, files: u32) -> Vec<u8> {
    tree_archive(TreeShape::Random, seed, files)
}

/// One entry of a generated tree, before it is archived.
enum Entry {
    Dir,
    /// A file's contents.
    File(Vec<u8>),
    /// A large file: its length, and the random megabyte its contents
    /// repeat (as incompressible to the file system, and quick to make).
    Large(u64, Vec<u8>),
    Symlink(String),
    HardLink(String),
}

/// The most files a tree of shape `large` is made with: each is 1 to 64
/// MiB, and the archive is made in memory.
pub const LARGE_FILES_MAX: u32 = 64;

/// A tar archive of a generated tree of `shape` with `files` files (and
/// links), the same for the same shape, seed and count.
pub fn tree_archive(shape: TreeShape, seed: u64, files: u32) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let dirs = directories(shape, &mut rng, files);
    let sizes = LogNormal::new((4096f64).ln(), 1.3).expect("valid parameters");
    let mut entries: Vec<(usize, String, Entry)> = Vec::new();
    let mut made: Vec<String> = Vec::new();
    for n in 0..files {
        let d = match shape {
            TreeShape::Large | TreeShape::Flat => 0,
            _ => rng.random_range(0..dirs.len()),
        };
        let name = match shape {
            TreeShape::Deep => format!("f{n}.c"),
            _ => file_name(&mut rng, n),
        };
        let path = format!("{}/{name}", dirs[d].0);
        let roll = rng.random_range(0..1000u32);
        let entry = if roll < 5 && !made.is_empty() && shape != TreeShape::Large {
            let target = &made[rng.random_range(0..made.len())];
            Entry::Symlink(relative(&path, target))
        } else if roll == 5 && !made.is_empty() && shape != TreeShape::Large {
            Entry::HardLink(made[rng.random_range(0..made.len())].clone())
        } else {
            made.push(path.clone());
            let len = match shape {
                TreeShape::Small => 1024,
                TreeShape::Large => (MIB as f64 * 64f64.powf(rng.random::<f64>())) as u64,
                _ => (sizes.sample(&mut rng) as u64).min(SIZE_MAX),
            };
            let mut data = vec![0u8; len.min(if shape == TreeShape::Large { MIB } else { len }) as usize];
            rng.fill(&mut data[..]);
            match shape {
                TreeShape::Large => Entry::Large(len, data),
                _ => Entry::File(data),
            }
        };
        entries.push((d, path, entry));
    }
    if shape == TreeShape::Ordered {
        // Each directory, then its files, directories in path order: a
        // hard link still comes after its target's directory is made, and
        // a target made later than its link is as tar allows.
        let mut order: Vec<usize> = (0..dirs.len()).collect();
        order.sort_by(|&a, &b| dirs[a].0.cmp(&dirs[b].0));
        let mut rank = vec![0; dirs.len()];
        for (k, &d) in order.iter().enumerate() {
            rank[d] = k;
        }
        entries.sort_by_key(|(d, ..)| rank[*d]);
        let mut out: Vec<(usize, String, Entry)> = Vec::with_capacity(entries.len() + dirs.len());
        let mut files = entries.into_iter().peekable();
        for &d in &order {
            out.push((d, dirs[d].0.clone(), Entry::Dir));
            while let Some(f) = files.next_if(|(fd, ..)| *fd == d) {
                out.push(f);
            }
        }
        return archive(out);
    }
    let mut all: Vec<(usize, String, Entry)> = dirs.iter().map(|(p, _)| (0, p.clone(), Entry::Dir)).collect();
    all.extend(entries);
    archive(all)
}

/// The directories of a tree of `shape` for `files` files, with their
/// depths, parents before children.
fn directories(shape: TreeShape, rng: &mut impl Rng, files: u32) -> Vec<(String, usize)> {
    const DEEP_MAX: usize = 64;
    let mut dirs: Vec<(String, usize)> = vec![("src".into(), 0)];
    let wanted = match shape {
        TreeShape::Large | TreeShape::Flat => 1,
        TreeShape::Deep => files.div_ceil(4).max(1) as usize,
        _ => files.div_ceil(FILES_PER_DIR).max(1) as usize,
    };
    while dirs.len() < wanted {
        let parent = match shape {
            // A chain: the last directory made, until it is 64 deep; then
            // a new chain from a shallow one.
            TreeShape::Deep if dirs.last().is_some_and(|d| d.1 < DEEP_MAX) => dirs.len() - 1,
            TreeShape::Deep => {
                let shallow: Vec<usize> = (0..dirs.len()).filter(|&i| dirs[i].1 < 4).collect();
                shallow[rng.random_range(0..shallow.len())]
            }
            _ => {
                let shallow: Vec<usize> = (0..dirs.len()).filter(|&i| dirs[i].1 < DEPTH_MAX).collect();
                shallow[rng.random_range(0..shallow.len())]
            }
        };
        let name = match shape {
            TreeShape::Deep => format!("d{}", dirs.len()),
            _ => dir_name(rng, dirs.len()),
        };
        let path = format!("{}/{name}", dirs[parent].0);
        dirs.push((path, dirs[parent].1 + 1));
    }
    dirs
}

/// The entries as a tar archive, file contents pseudo-random.
fn archive(entries: Vec<(usize, String, Entry)>) -> Vec<u8> {
    let header = |kind: tar::EntryType, size: u64, mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h.set_mtime(1_660_000_000);
        h
    };
    let mut builder = tar::Builder::new(Vec::new());
    let mode = |path: &str| if path.ends_with(".sh") { 0o755 } else { 0o644 };
    for (_, path, entry) in entries {
        let appended = match entry {
            Entry::Dir => {
                builder.append_data(&mut header(tar::EntryType::Directory, 0, 0o755), &path, &[][..])
            }
            Entry::Symlink(target) => {
                builder.append_link(&mut header(tar::EntryType::Symlink, 0, 0o777), &path, target)
            }
            Entry::HardLink(target) => {
                builder.append_link(&mut header(tar::EntryType::Link, 0, 0o644), &path, target)
            }
            Entry::File(data) => {
                let mut h = header(tar::EntryType::Regular, data.len() as u64, mode(&path));
                builder.append_data(&mut h, &path, &data[..])
            }
            Entry::Large(len, megabyte) => {
                let data: Vec<u8> = megabyte.iter().copied().cycle().take(len as usize).collect();
                builder.append_data(&mut header(tar::EntryType::Regular, len, mode(&path)), &path, &data[..])
            }
        };
        appended.expect("a tar archive in memory takes any entry");
    }
    builder.into_inner().expect("in memory")
}

fn dir_name(rng: &mut impl Rng, n: usize) -> String {
    const STEMS: [&str; 12] = [
        "sysdeps", "nptl", "string", "stdio", "math", "elf", "posix", "malloc", "locale", "x86_64", "unix",
        "tests",
    ];
    format!("{}{n}", STEMS[rng.random_range(0..STEMS.len())])
}

fn file_name(rng: &mut impl Rng, n: u32) -> String {
    const STEMS: [&str; 8] =
        ["memcpy", "strlen", "printf", "pthread_create", "dl-load", "s_sin", "getopt", "fork"];
    const EXTS: [&str; 6] = [".c", ".c", ".h", ".S", ".sh", ""];
    let stem = STEMS[rng.random_range(0..STEMS.len())];
    if rng.random_range(0..50) == 0 {
        // Some names run long, as generated ones do.
        return format!("{stem}-{n}-{}.c", "variant".repeat(rng.random_range(2..8)));
    }
    if rng.random_range(0..40) == 0 {
        return format!("Makefile{n}");
    }
    format!("{stem}{n}{}", EXTS[rng.random_range(0..EXTS.len())])
}

/// The path from `from`'s directory to `to` (both under the same root).
fn relative(from: &str, to: &str) -> String {
    let up = from.matches('/').count();
    let mut out = "../".repeat(up);
    out.push_str(to);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_archive_and_another_seed_another() {
        assert_eq!(source_archive(7, 300), source_archive(7, 300));
        assert_ne!(source_archive(7, 300), source_archive(8, 300));
    }

    /// (kind, path, size) of every entry, in the archive's order.
    fn entries(tar: &[u8]) -> Vec<(tar::EntryType, String, u64)> {
        let mut archive = tar::Archive::new(tar);
        let entries = archive.entries().unwrap().map(|e| {
            let e = e.unwrap();
            (e.header().entry_type(), e.path().unwrap().display().to_string(), e.header().size().unwrap())
        });
        entries.collect()
    }

    fn parent(path: &str) -> &str {
        path.rsplit_once('/').map_or("", |(dir, _)| dir)
    }

    /// The ordered tree is the random tree's entries, each directory
    /// before its files and a directory's files together.
    #[test]
    fn the_ordered_tree_is_the_random_one_in_directory_order() {
        let random = entries(&tree_archive(TreeShape::Random, 3, 500));
        let ordered = entries(&tree_archive(TreeShape::Ordered, 3, 500));
        let set = |v: &[(tar::EntryType, String, u64)]| {
            let mut paths: Vec<String> = v.iter().map(|e| e.1.clone()).collect();
            paths.sort();
            paths
        };
        assert_eq!(set(&random), set(&ordered));
        let mut finished = std::collections::HashSet::new();
        let mut current = String::new();
        for (kind, path, _) in &ordered {
            if *kind == tar::EntryType::Directory {
                finished.insert(std::mem::replace(&mut current, path.clone()));
                continue;
            }
            assert_eq!(parent(path), current, "{path} comes with its directory's files");
            assert!(!finished.contains(parent(path)));
        }
    }

    /// Each shape has the files asked for, the sizes and the directories
    /// its name says, the same for the same seed.
    #[test]
    fn each_shape_is_what_its_name_says() {
        for shape in TreeShape::ALL {
            // Large files are tens of megabytes each: a few.
            let asked = if shape == TreeShape::Large { 3 } else { 400 };
            assert_eq!(tree_archive(shape, 5, asked), tree_archive(shape, 5, asked), "{shape:?}");
            let all = entries(&tree_archive(shape, 5, asked));
            let dirs = all.iter().filter(|e| e.0 == tar::EntryType::Directory).count();
            let files: Vec<u64> =
                all.iter().filter(|e| e.0 == tar::EntryType::Regular).map(|e| e.2).collect();
            assert_eq!(all.len() - dirs, asked as usize, "{shape:?}: files and links");
            match shape {
                TreeShape::Small => assert!(files.iter().all(|&len| len == 1024)),
                TreeShape::Large => {
                    assert_eq!((dirs, files.len()), (1, 3));
                    assert!(files.iter().all(|&len| (MIB..=64 * MIB).contains(&len)));
                }
                TreeShape::Flat => assert_eq!(dirs, 1),
                TreeShape::Deep => {
                    let deepest = all.iter().map(|e| e.1.matches('/').count()).max().unwrap();
                    assert!(deepest >= 64, "{deepest} deep");
                    assert!(all.iter().all(|e| e.1.len() < 1024), "paths stay short");
                }
                TreeShape::Random | TreeShape::Ordered => assert_eq!(dirs, 17),
            }
        }
    }

    #[test]
    fn each_shape_reads_back_by_its_name() {
        for shape in TreeShape::ALL {
            assert_eq!(TreeShape::parse(shape.name()), Some(shape));
        }
        assert_eq!(TreeShape::parse("bushy"), None);
    }

    #[test]
    fn the_tree_has_the_files_and_the_directories_asked_for() {
        let tar = source_archive(1, 480);
        let mut archive = tar::Archive::new(&tar[..]);
        let (mut files, mut dirs, mut links) = (0, 0, 0);
        for entry in archive.entries().unwrap() {
            match entry.unwrap().header().entry_type() {
                tar::EntryType::Regular => files += 1,
                tar::EntryType::Directory => dirs += 1,
                _ => links += 1,
            }
        }
        assert_eq!((files + links, dirs), (480, 20));
    }
}
