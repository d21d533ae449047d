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

/// A tar archive of `files` files (plus their directories, symlinks and
/// hard links) shaped like a source tree under `src/`, the same for the
/// same seed.
pub fn source_archive(seed: u64, files: u32) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut builder = tar::Builder::new(Vec::new());
    let header = |kind: tar::EntryType, size: u64, mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h.set_mtime(1_660_000_000);
        h
    };
    let dirs_wanted = files.div_ceil(FILES_PER_DIR).max(1) as usize;
    let mut dirs: Vec<(String, usize)> = vec![("src".into(), 0)];
    let append_dir = |b: &mut tar::Builder<Vec<u8>>, path: &str| {
        b.append_data(&mut header(tar::EntryType::Directory, 0, 0o755), path, &[][..])
            .expect("a tar archive in memory takes any entry");
    };
    append_dir(&mut builder, "src");
    while dirs.len() < dirs_wanted {
        let shallow: Vec<usize> = (0..dirs.len()).filter(|&i| dirs[i].1 < DEPTH_MAX).collect();
        let parent = shallow[rng.random_range(0..shallow.len())];
        let path = format!("{}/{}", dirs[parent].0, dir_name(&mut rng, dirs.len()));
        append_dir(&mut builder, &path);
        dirs.push((path, dirs[parent].1 + 1));
    }
    let sizes = LogNormal::new((4096f64).ln(), 1.3).expect("valid parameters");
    let mut made: Vec<String> = Vec::new();
    for n in 0..files {
        let dir = &dirs[rng.random_range(0..dirs.len())].0;
        let path = format!("{dir}/{}", file_name(&mut rng, n));
        let roll = rng.random_range(0..1000u32);
        if roll < 5 && !made.is_empty() {
            let target = &made[rng.random_range(0..made.len())];
            let mut h = header(tar::EntryType::Symlink, 0, 0o777);
            builder.append_link(&mut h, &path, relative(&path, target)).expect("in memory");
        } else if roll == 5 && !made.is_empty() {
            let target = made[rng.random_range(0..made.len())].clone();
            let mut h = header(tar::EntryType::Link, 0, 0o644);
            builder.append_link(&mut h, &path, &target).expect("in memory");
        } else {
            let len = (sizes.sample(&mut rng) as u64).min(SIZE_MAX);
            let mut data = vec![0u8; len as usize];
            rng.fill(&mut data[..]);
            let mode = if path.ends_with(".sh") { 0o755 } else { 0o644 };
            builder
                .append_data(&mut header(tar::EntryType::Regular, len, mode), &path, &data[..])
                .expect("in memory");
            made.push(path);
        }
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
