//! Volume sets with a drive damaged or missing, end to end on files: a
//! damaged drive header or a configuration copy that disagrees with the
//! others degrades the set and names the drive instead of stopping it
//! (nothing is written to the drive until `volume start`), and RAID-5 with
//! a stripe log runs degraded too.

use std::path::Path;
use std::sync::Arc;

use device::{Device, FileDevice, FileOptions};

use crate::cli::{iolab, stderr, stdout};
use crate::volume::{run_ok, RAID5};

fn created(dir: &Path, text: &str) -> String {
    let conf = dir.join("r5.conf");
    std::fs::write(&conf, text).unwrap();
    let conf = conf.to_str().unwrap().to_string();
    run_ok(&["volume", "create", &conf, "--drive-size", "8m"]);
    conf
}

/// Flips the low bit of byte `at` of a file.
fn flip(path: &Path, at: usize) {
    let mut image = std::fs::read(path).unwrap();
    image[at] ^= 0x01;
    std::fs::write(path, image).unwrap();
}

fn metadata_area(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()[..volume::DATA_START_BYTES as usize].to_vec()
}

fn random_writes(conf: &str) -> std::process::Output {
    run_ok(&["run", "--target", conf, "--rw", "randwrite", "--bs", "4k", "--ios", "200", "-q"])
}

#[test]
fn one_damaged_byte_in_a_drive_header_runs_degraded_and_names_the_drive() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5);
    flip(&dir.path().join("d3.img"), 200);
    let err = stderr(&random_writes(&conf));
    assert!(err.contains("drive 'd3' is down"), "{err}");
    assert!(err.contains("d3.img: drive header, byte 12 (crc32c): checksum mismatch"), "{err}");
}

#[test]
fn a_drive_with_a_damaged_header_is_left_as_it_is_until_started() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5);
    let d3 = dir.path().join("d3.img");
    flip(&d3, 200);
    let before = metadata_area(&d3);
    random_writes(&conf);
    assert!(metadata_area(&d3) == before, "the damaged drive's metadata was written");
    run_ok(&["volume", "start", "d3", &conf]);
    let list = run_ok(&["volume", "list", &conf]);
    assert!(!stdout(&list).contains("down") && !stdout(&list).contains("stale"), "{}", stdout(&list));
    assert!(!stderr(&list).contains("warning"), "{}", stderr(&list));
    let check = run_ok(&["volume", "checkparity", "raid", &conf]);
    assert!(stdout(&check).contains("0 with wrong parity"), "{}", stdout(&check));
}

#[test]
fn a_drive_whose_magic_is_gone_is_still_known_by_its_copies() {
    let dir = tempfile::tempdir().unwrap();
    created(dir.path(), RAID5);
    let d2 = dir.path().join("d2.img");
    let mut image = std::fs::read(&d2).unwrap();
    image[..8].fill(0);
    std::fs::write(&d2, image).unwrap();
    let drives: Vec<String> =
        (1..=4).map(|i| dir.path().join(format!("d{i}.img")).to_str().unwrap().to_string()).collect();
    let mut args = vec!["volume", "list"];
    args.extend(drives.iter().map(String::as_str));
    let out = run_ok(&args);
    let d2_line = stdout(&out).lines().find(|l| l.starts_with("D d2")).map(str::to_string);
    assert!(d2_line.as_deref().is_some_and(|l| l.contains("down")), "{d2_line:?}");
    assert!(stderr(&out).contains("(magic): reads zeros"), "{}", stderr(&out));
}

#[test]
fn two_damaged_headers_take_the_plex_down_and_io_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5);
    flip(&dir.path().join("d1.img"), 200);
    flip(&dir.path().join("d3.img"), 200);
    let out = iolab(&["run", "--target", &conf, "--rw", "randread", "--bs", "4k", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("plex 'raid.p0' is down"), "{err}");
    assert!(err.contains("no plex can serve it (raid.p0 down)"), "{err}");
}

/// Writes a checksum-valid newer configuration copy to a drive file: its
/// newest copy's text with `from` replaced by `to`, as generation + 1, by
/// the byte layout of docs/formats.md alone (no decoder of the crate).
fn put_newer_copy(path: &Path, from: &str, to: &str) {
    put_edited_copy(path, &|text| text.replace(from, to));
}

/// As [`put_newer_copy`], the text edited by `edit`.
fn put_edited_copy(path: &Path, edit: &dyn Fn(&str) -> String) {
    let mut image = std::fs::read(path).unwrap();
    let slot_at = |slot: u64| (volume::HEADER_BYTES + slot * volume::CONFIG_COPY_BYTES) as usize;
    let u64_at = |image: &[u8], at: usize| u64::from_le_bytes(image[at..at + 8].try_into().unwrap());
    let newest = (0..2).max_by_key(|&slot| u64_at(&image, slot_at(slot) + 32)).unwrap();
    let old = slot_at(newest);
    let text_bytes = u32::from_le_bytes(image[old + 40..old + 44].try_into().unwrap()) as usize;
    let text = edit(std::str::from_utf8(&image[old + 48..old + 48 + text_bytes]).unwrap());
    let generation = u64_at(&image, old + 32) + 1;
    let mut copy = image[old..old + 48].to_vec();
    copy[32..40].copy_from_slice(&generation.to_le_bytes());
    copy[40..44].copy_from_slice(&(text.len() as u32).to_le_bytes());
    copy.extend_from_slice(text.as_bytes());
    codec::Frame::zeroed(12).seal(&[], &mut copy);
    let at = slot_at(generation % 2);
    image[at..at + volume::CONFIG_COPY_BYTES as usize].fill(0);
    image[at..at + copy.len()].copy_from_slice(&copy);
    std::fs::write(path, image).unwrap();
}

#[test]
fn a_newer_configuration_copy_with_a_one_sector_stripe_is_ignored_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5);
    put_newer_copy(&dir.path().join("d3.img"), "raid5 1024s", "raid5 1s");
    let err = stderr(&random_writes(&conf));
    assert!(err.contains("drive 'd3' is down: its configuration copy"), "{err}");
    assert!(err.contains("512-byte stripes where the others have"), "{err}");
    let list = run_ok(&["volume", "list", "-v", &conf]);
    assert!(stdout(&list).contains("Stripe size: 524288 bytes"), "{}", stdout(&list));
    run_ok(&["volume", "start", "d3", &conf]);
    let check = run_ok(&["volume", "checkparity", "raid", &conf]);
    assert!(stdout(&check).contains("0 with wrong parity"), "{}", stdout(&check));
    assert!(!stderr(&check).contains("warning"), "{}", stderr(&check));
}

#[test]
fn a_newer_copy_that_does_not_parse_is_named_by_drive_and_line_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5);
    put_newer_copy(&dir.path().join("d3.img"), "raid5 1024s", "raid5 1000");
    let err = stderr(&random_writes(&conf));
    assert!(err.contains("drive 'd3', "), "{err}");
    assert!(err.contains("(text): the configuration text on disk, line 6: stripe size"), "{err}");
    assert!(err.contains("this copy is ignored"), "{err}");
}

#[test]
fn a_newer_copy_without_volumes_is_ignored_and_never_lists_no_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5);
    let drives_only = |text: &str| text.split("volume raid").next().unwrap_or_default().to_string();
    put_edited_copy(&dir.path().join("d3.img"), &drives_only);
    let out = random_writes(&conf);
    let err = stderr(&out);
    assert!(err.contains("drive 'd3', ") && err.contains("defines no drive or no volume"), "{err}");
    assert!(!err.contains("()"), "{err}");
    assert!(stdout(&out).contains("randwrite on raid"), "{}", stdout(&out));
}

const RAID5_LOGGED: &str = "drive d1 device d1.img
drive d2 device d2.img
drive d3 device d3.img
drive d4 device d4.img
drive j device j.img
volume raid
  plex org raid5 64k log j
    sd length 0 drive d1
    sd length 0 drive d2
    sd length 0 drive d3
    sd length 0 drive d4
";

fn open_files(dir: &Path, names: &[&str]) -> Vec<Arc<dyn Device>> {
    let open = |n: &&str| FileDevice::open(dir.join(format!("{n}.img")), &FileOptions::default()).unwrap();
    names.iter().map(|n| Arc::new(open(n)) as Arc<dyn Device>).collect()
}

/// Writes `writes` (offset, byte) of 4 KiB through the stripe log, then
/// drops the set without a checkpoint: the log still holds them all.
fn write_through_the_log(dir: &Path, writes: &[(u64, u8)]) {
    let devs = open_files(dir, &["d1", "d2", "d3", "d4", "j"]);
    let set = volume::assemble(&devs).unwrap();
    let vol = Arc::clone(&set.volumes[0]);
    let (_, jdev, _) = vol.raid5_log_drive().unwrap();
    let area = (jdev.size_bytes() - volume::DATA_START_BYTES) / 4096 * 4096;
    let log = Arc::new(device::Slice::new(jdev, volume::DATA_START_BYTES, area).unwrap());
    let wal = blocklog::StripeLog::open(log, vol.raid5_homes().unwrap()).unwrap();
    vol.set_write_ahead_log(Arc::new(wal)).unwrap();
    for &(offset, byte) in writes {
        vol.write_at(&[byte; 4096], offset).unwrap();
    }
}

fn read_volume(dir: &Path, drives: &[&str], offset: u64) -> Vec<u8> {
    let set = volume::assemble(&open_files(dir, drives)).unwrap();
    let mut back = vec![0; 4096];
    set.volumes[0].read_at(&mut back, offset).unwrap();
    back
}

#[test]
fn raid5_with_a_stripe_log_and_a_data_drive_missing_replays_runs_degraded_and_revives() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5_LOGGED);
    // Row 0: column 0 on d1, column 2 on d3, parity on d4 (left-asymmetric).
    write_through_the_log(dir.path(), &[(0, 0x5a), (128 * 1024, 0xa5)]);
    // The crash: d1's data and d4's parity never reached the drives.
    let zero_at = |drive: &str| {
        let dev = &open_files(dir.path(), &[drive])[0];
        dev.write_at(&[0; 4096], volume::DATA_START_BYTES).unwrap();
    };
    zero_at("d1");
    zero_at("d4");
    std::fs::rename(dir.path().join("d3.img"), dir.path().join("d3.away")).unwrap();
    let read = run_ok(&["run", "--target", &conf, "--rw", "randread", "--bs", "4k", "--ios", "20", "-q"]);
    let err = stderr(&read);
    assert!(err.contains("replayed 2 row updates"), "{err}");
    assert!(err.contains("sectors of drives that are down were left, to be rebuilt from parity"), "{err}");
    let present = ["d1", "d2", "d4", "j"];
    assert_eq!(read_volume(dir.path(), &present, 0), vec![0x5a; 4096], "d1's data replayed");
    assert_eq!(
        read_volume(dir.path(), &present, 128 * 1024),
        vec![0xa5; 4096],
        "d3's data rebuilt from parity"
    );
    random_writes(&conf);
    std::fs::rename(dir.path().join("d3.away"), dir.path().join("d3.img")).unwrap();
    run_ok(&["volume", "start", "d3", &conf]);
    let check = run_ok(&["volume", "checkparity", "raid", &conf]);
    assert!(stdout(&check).contains("0 with wrong parity"), "{}", stdout(&check));
}

#[test]
fn raid5_with_its_log_drive_missing_takes_reads_only_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path(), RAID5_LOGGED);
    std::fs::rename(dir.path().join("j.img"), dir.path().join("j.away")).unwrap();
    // `--layout never`: a read job otherwise fills the sparse drives' holes first, a write.
    let read = run_ok(&[
        "run", "--target", &conf, "--rw", "randread", "--bs", "4k", "--ios", "20", "--layout", "never", "-q",
    ]);
    assert!(stderr(&read).contains("log drive j is missing"), "{}", stderr(&read));
    let write = iolab(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "4k", "--ios", "20", "-q"]);
    assert_eq!(write.status.code(), Some(1), "{}", stdout(&write));
    let err = stderr(&write);
    assert!(err.contains("the stripe log on drive 'j', which is missing: the plex takes no writes"), "{err}");
    std::fs::rename(dir.path().join("j.away"), dir.path().join("j.img")).unwrap();
    run_ok(&["volume", "start", "j", &conf]);
    random_writes(&conf);
}
