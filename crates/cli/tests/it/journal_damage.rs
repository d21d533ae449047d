//! A damaged validation journal, as `iolab validate` meets it: damage in
//! the middle is its own verdict (exit 4) and validation goes on past it;
//! a damaged snapshot is named as such; a header whose fields are out of
//! bounds is refused by name, never a panic or a hang.

use crate::cli::{iolab, stderr, stdout};

/// 1 MiB target, 256 key blocks of 4 KiB: the journal's records start at
/// byte 8192 of its first slot (a 4 KiB header, a 4 KiB snapshot).
const RECORDS_AT: usize = 8192;

/// `ios` random 4 KiB writes on a 1 MiB target under a group journal;
/// the target, the journal directory and the journal file.
fn journaled(dir: &tempfile::TempDir, ios: &str) -> (String, String, std::path::PathBuf) {
    let (target, journal, _) = crate::validate::journaled_randwrite(dir, ios, &[]);
    let file = dir.path().join("j").join("iolab.journal");
    (target, journal, file)
}

fn validate(target: &str, journal: &str) -> std::process::Output {
    iolab(&["validate", "--target", target, "--journal", journal])
}

/// Where the records of the journal's first slot end (its last non-zero
/// byte, plus one).
fn records_end(journal: &[u8]) -> usize {
    let slot = journal.len() / 2 / 4096 * 4096;
    journal[..slot].iter().rposition(|&b| b != 0).unwrap() + 1
}

#[test]
fn a_byte_flipped_in_the_middle_of_the_records_is_journal_damage_and_checking_goes_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal, file) = journaled(&dir, "3000");
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = (RECORDS_AT + records_end(&bytes)) / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&file, &bytes).unwrap();
    let out = validate(&target, &journal);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}{}", stderr(&out));
    assert!(text.contains("the journal is damaged"), "{text}");
    assert!(text.contains("journal: damaged at byte"), "{text}");
    // Nearly every block was written after the damage and is checked.
    let verified: u64 = text.split(" verified").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(verified > 200, "{text}");
}

#[test]
fn a_byte_flipped_in_the_snapshot_is_named_as_snapshot_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (target, journal, file) = journaled(&dir, "600");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[4096 + 100] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let out = validate(&target, &journal);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}{}", stderr(&out));
    assert!(text.contains("key-map snapshot"), "{text}");
}

/// The journal's first header with the u64 at `at` set to `value`, its
/// checksum made right: damage no checksum catches.
fn craft_header(file: &std::path::Path, at: usize, value: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    codec::Frame::zeroed(12).seal(&[], &mut bytes[..4096]);
    std::fs::write(file, &bytes).unwrap();
}

#[test]
fn a_header_whose_key_block_is_out_of_bounds_is_refused_naming_the_field() {
    for value in [0, 1, 1 << 63] {
        let dir = tempfile::tempdir().unwrap();
        let (target, journal, file) = journaled(&dir, "100");
        craft_header(&file, 32, value);
        let out = validate(&target, &journal);
        assert_eq!(out.status.code(), Some(1), "{value}: {}{}", stdout(&out), stderr(&out));
        assert!(stderr(&out).contains("key_block_bytes (byte 32) is"), "{value}: {}", stderr(&out));
    }
}
