//! A file-system image whose superblock was crafted behind a right
//! checksum, as `iolab fs fsck` and `iolab fs ls` meet it: a field past
//! its bound in both slots is named (device, slot, byte, field, value)
//! and fsck exits 8, unable to check anything (fsck(8)'s operational
//! error, as e2fsck's with no superblock); in one slot, fsck -n names it,
//! preen rewrites it. Never a panic, an abort or a silent pass.

use std::path::{Path, PathBuf};

use crate::cli::{iolab, stderr, stdout};

/// A new 8 MiB image in `dir`.
fn image(dir: &tempfile::TempDir) -> PathBuf {
    let image = dir.path().join("fs.img");
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "8m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    image
}

/// Sets `value` (little-endian, its length) at byte `at` of the slots
/// given and makes each slot's checksum right again.
fn craft(image: &Path, slots: &[usize], at: usize, value: &[u8]) {
    let mut bytes = std::fs::read(image).unwrap();
    for &slot in slots {
        let start = slot * 4096;
        bytes[start + at..start + at + value.len()].copy_from_slice(value);
        codec::Frame::zeroed(12).seal(&[], &mut bytes[start..start + 512]);
    }
    std::fs::write(image, &bytes).unwrap();
}

/// The slot the reader takes: the higher generation.
fn newest(image: &Path) -> usize {
    let bytes = std::fs::read(image).unwrap();
    let generation =
        |slot: usize| u64::from_le_bytes(bytes[slot * 4096 + 16..slot * 4096 + 24].try_into().unwrap());
    usize::from(generation(1) > generation(0))
}

fn fsck(image: &Path, flags: &[&str]) -> std::process::Output {
    let mut args = vec!["fs", "fsck", image.to_str().unwrap()];
    args.extend_from_slice(flags);
    iolab(&args)
}

#[test]
fn fsck_of_a_superblock_with_a_field_past_its_bound_names_it_and_exits_8() {
    let cases: [(&str, usize, Vec<u8>); 4] = [
        ("block_bytes", 24, 0u32.to_le_bytes().to_vec()),
        ("groups", 56, u32::MAX.to_le_bytes().to_vec()),
        ("log_blocks", 48, (u64::MAX - 1).to_le_bytes().to_vec()),
        ("free_inodes", 88, u64::from(u32::MAX).to_le_bytes().to_vec()),
    ];
    for (field, at, value) in cases {
        let dir = tempfile::tempdir().unwrap();
        let image = image(&dir);
        craft(&image, &[0, 1], at, &value);
        let out = fsck(&image, &[]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(8), "{field}: {}{text}", stdout(&out));
        assert!(text.contains(&format!("superblock slot 0, byte {at} ({field})")), "{field}: {text}");
        assert!(
            text.contains(&format!("superblock slot 1, byte {} ({field})", 4096 + at)),
            "{field}: {text}"
        );
        assert!(text.contains("neither superblock slot can be used"), "{text}");
        let out = iolab(&["fs", "ls", image.to_str().unwrap(), "/"]);
        assert_eq!(out.status.code(), Some(1), "{field}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("({field})")), "{field}: {}", stderr(&out));
    }
}

#[test]
fn fsck_names_a_superblock_slot_passed_over_and_preen_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(&dir);
    let slot = newest(&image);
    craft(&image, &[slot], 24, &0u32.to_le_bytes());
    let out = fsck(&image, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}{}", stderr(&out));
    assert!(text.contains("bad_superblock_slot:"), "{text}");
    assert!(
        text.contains(&format!("superblock slot {slot}, byte {} (block_bytes)", slot * 4096 + 24)),
        "{text}"
    );
    assert!(text.contains(&format!("slot {} (generation", 1 - slot)), "{text}");
    let out = iolab(&["fs", "ls", image.to_str().unwrap(), "/"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("iolab: warning: ") && stderr(&out).contains("is used instead"),
        "{}",
        stderr(&out)
    );
    let out = fsck(&image, &["-p"]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("[repaired]"), "{}", stdout(&out));
    let out = fsck(&image, &[]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

/// fsck's exit statuses as fsck(8)'s: an image cut short (its superblock
/// counts more blocks than the device holds) and a file holding no file
/// system cannot be checked: 8, with the reason; a missing image is a
/// usage error (2) that does not advise a size, since fsck makes nothing.
#[test]
fn fsck_that_cannot_check_exits_8_and_a_missing_image_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let image = image(&dir);
    let file = std::fs::OpenOptions::new().write(true).open(&image).unwrap();
    file.set_len(4 << 20).unwrap();
    let out = fsck(&image, &["-y"]);
    assert_eq!(out.status.code(), Some(8), "cut short: {}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("cut short"), "{}", stderr(&out));
    let other = dir.path().join("zeros.img");
    std::fs::write(&other, vec![0u8; 1 << 20]).unwrap();
    let out = fsck(&other, &[]);
    assert_eq!(out.status.code(), Some(8), "no file system: {}{}", stdout(&out), stderr(&out));
    let out = fsck(&dir.path().join("missing.img"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not exist") && !stderr(&out).contains("--size to create"),
        "{}",
        stderr(&out)
    );
}
