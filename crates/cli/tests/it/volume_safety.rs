//! The volume manager at Vinum's and md's standard, end to end on files:
//! RAID-5 on drives that held data is initialised before use, a set is
//! locked by the process that writes it, a mirror of striped plexes
//! survives a drive, create checks everything first, read-only commands
//! stay read-only.

use std::path::{Path, PathBuf};

use crate::cli::{iolab, stderr, stdout};
use crate::volume::{run_ok, written_with_journal, RAID5};

const DRIVE_BYTES: usize = 8 << 20;

/// Bytes of a xorshift stream: what a reused disk holds.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn paths(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

fn images(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn write_conf(dir: &Path, text: &str) -> String {
    let conf = dir.join("v.conf");
    std::fs::write(&conf, text).unwrap();
    conf.to_str().unwrap().to_string()
}

/// The seed's RAID-5 on four drive files full of noise, created with
/// --force (they hold no known signature, but data all the same).
fn raid5_on_used_drives(dir: &Path) -> String {
    for (i, path) in paths(dir, &["d1.img", "d2.img", "d3.img", "d4.img"]).iter().enumerate() {
        std::fs::write(path, noise(DRIVE_BYTES, 7 + i as u64)).unwrap();
    }
    let conf = write_conf(dir, RAID5);
    let out = run_ok(&["volume", "create", &conf, "--force"]);
    assert!(stdout(&out).contains("raid.p0 is initializing"), "{}", stdout(&out));
    conf
}

#[test]
fn raid5_on_used_drives_is_listed_initializing() {
    let dir = tempfile::tempdir().unwrap();
    let conf = raid5_on_used_drives(dir.path());
    let text = stdout(&run_ok(&["volume", "list", &conf]));
    let plex = text.lines().find(|l| l.starts_with("P raid.p0")).unwrap_or_default();
    assert!(plex.contains("initializing"), "{text}");
}

#[test]
fn raid5_on_used_drives_refuses_writes_naming_init() {
    let dir = tempfile::tempdir().unwrap();
    let conf = raid5_on_used_drives(dir.path());
    let out = iolab(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "4k", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("iolab volume init raid.p0"), "{}", stderr(&out));
}

#[test]
fn init_by_volume_name_makes_the_parity_right() {
    let dir = tempfile::tempdir().unwrap();
    let conf = raid5_on_used_drives(dir.path());
    let before = iolab(&["volume", "checkparity", "raid", &conf]);
    assert_eq!(before.status.code(), Some(1), "the noise's parity is wrong: {}", stdout(&before));
    run_ok(&["volume", "init", "raid", &conf]);
    let after = run_ok(&["volume", "checkparity", "raid", &conf]);
    assert!(stdout(&after).contains("0 with wrong parity"), "{}", stdout(&after));
}

#[test]
fn raid5_on_used_drives_never_loses_an_acknowledged_write_after_a_drive_fails() {
    let dir = tempfile::tempdir().unwrap();
    let conf = raid5_on_used_drives(dir.path());
    run_ok(&["volume", "init", "raid.p0", &conf]);
    let journal = written_with_journal(&dir, &conf);
    std::fs::remove_file(dir.path().join("d3.img")).unwrap();
    let out = run_ok(&["validate", "--target", &conf, "--journal", &journal]);
    let text = stdout(&out);
    assert!(text.contains("0 lost, 0 misdirected, 0 corrupt, 0 zeroed"), "{text}");
    assert!(!text.contains(" 0 verified"), "{text}");
}

/// Holds `path` locked as `kind` while it lives, as another process would.
fn locked(path: &Path, kind: device::LockKind) -> device::FileDevice {
    let dev = device::FileDevice::open(path, &device::FileOptions::default()).unwrap();
    dev.lock(kind).unwrap();
    dev
}

fn created(dir: &Path) -> String {
    let conf = write_conf(dir, RAID5);
    run_ok(&["volume", "create", &conf, "--drive-size", "8m"]);
    conf
}

#[test]
fn a_run_on_a_set_another_process_holds_fails_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path());
    let _held = locked(&dir.path().join("d2.img"), device::LockKind::Exclusive);
    let out = iolab(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "4k", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let holder = format!("in use by process {}", std::process::id());
    assert!(stderr(&out).contains(&holder), "{}", stderr(&out));
}

#[test]
fn a_locked_drive_is_never_assembled_without() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path());
    let held = locked(&dir.path().join("d2.img"), device::LockKind::Exclusive);
    let out = iolab(&["volume", "start", "d2", &conf]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    drop(held);
    let text = stdout(&run_ok(&["volume", "list", &conf]));
    assert!(!text.contains("down") && !text.contains("missing"), "d2 was not recorded down:\n{text}");
}

#[test]
fn list_while_another_process_writes_warns_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path());
    let _held = locked(&dir.path().join("d1.img"), device::LockKind::Exclusive);
    let out = run_ok(&["volume", "list", &conf]);
    assert!(stderr(&out).contains("may be changing"), "{}", stderr(&out));
    assert!(stdout(&out).contains("P raid.p0"), "{}", stdout(&out));
}

#[test]
fn checkparity_while_another_process_writes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path());
    let _held = locked(&dir.path().join("d1.img"), device::LockKind::Exclusive);
    let out = iolab(&["volume", "checkparity", "raid", &conf]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("in use by process"), "{}", stderr(&out));
}

#[test]
fn list_printconfig_and_checkparity_share_the_drives_with_readers() {
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path());
    let _reader = locked(&dir.path().join("d1.img"), device::LockKind::Shared);
    run_ok(&["volume", "list", &conf]);
    run_ok(&["volume", "printconfig", &conf]);
    run_ok(&["volume", "checkparity", "raid", &conf]);
    let write = iolab(&["volume", "setstate", "down", "d4", &conf]);
    assert_eq!(write.status.code(), Some(1), "a command that writes takes the drives alone");
}

#[test]
fn list_and_checkparity_work_on_read_only_drive_files_and_change_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let conf = created(dir.path());
    run_ok(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "4k", "--ios", "50", "-q"]);
    let drives = paths(dir.path(), &["d1.img", "d2.img", "d3.img", "d4.img"]);
    for path in &drives {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    let before = images(&drives);
    run_ok(&["volume", "list", "-s", &conf]);
    run_ok(&["volume", "printconfig", &conf]);
    run_ok(&["volume", "checkparity", "raid", &conf]);
    assert!(images(&drives) == before, "read-only commands wrote a drive");
}

/// Vinum's RAID-10 example: two striped plexes over five drives, the
/// second's subdisks shifted by two drives.
const RAID10: &str = "drive a device a.img\ndrive b device b.img\ndrive c device c.img\n\
                      drive d device d.img\ndrive e device e.img\nvolume raid10\n\
                      plex org striped 64k\nsd length 1m drive a\nsd length 1m drive b\nsd length 1m drive c\n\
                      sd length 1m drive d\nsd length 1m drive e\n\
                      plex org striped 64k\nsd length 1m drive c\nsd length 1m drive d\nsd length 1m drive e\n\
                      sd length 1m drive a\nsd length 1m drive b\n";

/// A striped plex's contents read from its drive files: unit u lies on
/// the u mod 5th of `drives`, row u / 5, from `sd_at` (every subdisk of
/// the plex starts there on its drive).
fn plex_image(dir: &Path, drives: [&str; 5], sd_at: usize) -> Vec<u8> {
    let stripe = 64 << 10;
    let files: Vec<Vec<u8>> =
        drives.iter().map(|d| std::fs::read(dir.join(format!("{d}.img"))).unwrap()).collect();
    let mut image = Vec::new();
    for unit in 0..5 * (1 << 20) / stripe {
        let at = sd_at + unit / 5 * stripe;
        image.extend_from_slice(&files[unit % 5][at..at + stripe]);
    }
    image
}

#[test]
fn raid10_serves_every_block_with_a_drive_down_and_revives_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(dir.path(), RAID10);
    run_ok(&["volume", "create", &conf, "--drive-size", "3m"]);
    let journal = written_with_journal(&dir, &conf);
    run_ok(&["volume", "setstate", "down", "c", &conf]);
    let list = stdout(&run_ok(&["volume", "list", &conf]));
    assert!(list.lines().any(|l| l.starts_with("P raid10.p0") && l.contains("degraded")), "{list}");
    let out = run_ok(&["validate", "--target", &conf, "--journal", &journal]);
    assert!(stdout(&out).contains("0 lost, 0 misdirected, 0 corrupt, 0 zeroed"), "{}", stdout(&out));
    run_ok(&["run", "--target", &conf, "--rw", "randwrite", "--bs", "16k", "--ios", "200", "-q"]);
    run_ok(&["volume", "start", "c", &conf]);
    let list = stdout(&run_ok(&["volume", "list", &conf]));
    assert!(!list.contains("degraded") && !list.contains("stale"), "{list}");
    // Plex 0's subdisks come first on each drive, plex 1's right after.
    let first = plex_image(dir.path(), ["a", "b", "c", "d", "e"], volume::DATA_START_BYTES as usize);
    let second =
        plex_image(dir.path(), ["c", "d", "e", "a", "b"], volume::DATA_START_BYTES as usize + (1 << 20));
    assert!(first == second, "the two plexes hold the same data after the revive");
}

#[test]
fn create_refuses_two_drives_on_one_file_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let drives = paths(dir.path(), &["d1.img", "d2.img", "d3.img"]);
    for (i, path) in drives.iter().enumerate() {
        std::fs::write(path, noise(DRIVE_BYTES, i as u64)).unwrap();
    }
    std::os::unix::fs::symlink(&drives[1], dir.path().join("d4.img")).unwrap();
    let before = images(&drives);
    let conf = write_conf(dir.path(), RAID5);
    let out = iolab(&["volume", "create", &conf, "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("drives 'd2' and 'd4' are one file"), "{}", stderr(&out));
    assert!(images(&drives) == before);
}

#[test]
fn create_refuses_a_comment_only_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(dir.path(), "# drives to come\n\n");
    let out = iolab(&["volume", "create", &conf, "--drive-size", "8m"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing to create"), "{}", stderr(&out));
}

#[test]
fn create_with_a_drive_too_small_changes_nothing_and_makes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let existing = paths(dir.path(), &["d1.img", "d2.img", "d3.img"]);
    for (i, path) in existing.iter().enumerate() {
        std::fs::write(path, noise(DRIVE_BYTES, i as u64)).unwrap();
    }
    let before = images(&existing);
    let conf = write_conf(dir.path(), &RAID5.replace("sd length 0 drive d4", "sd length 16m drive d4"));
    let out = iolab(&["volume", "create", &conf, "--drive-size", "8m", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not fit on drive 'd4'"), "{}", stderr(&out));
    assert!(images(&existing) == before);
    assert!(!dir.path().join("d4.img").exists(), "no drive file is made for a create that fails");
}

#[test]
fn create_refused_by_a_signature_on_its_last_drive_makes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    created(other.path());
    std::fs::copy(other.path().join("d4.img"), dir.path().join("d4.img")).unwrap();
    let before = std::fs::read(dir.path().join("d4.img")).unwrap();
    let conf = write_conf(dir.path(), RAID5);
    let out = iolab(&["volume", "create", &conf, "--drive-size", "8m"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds data (iolab volume)"), "{}", stderr(&out));
    assert!(!dir.path().join("d1.img").exists(), "d1..d3 are not made before d4 is checked");
    assert_eq!(std::fs::read(dir.path().join("d4.img")).unwrap(), before);
}

#[test]
fn a_create_that_fails_removes_the_drive_files_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(dir.path(), &RAID5.replace("device d4.img", "device nodir/d4.img"));
    let out = iolab(&["volume", "create", &conf, "--drive-size", "8m"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for made in ["d1.img", "d2.img", "d3.img"] {
        assert!(!dir.path().join(made).exists(), "{made} is left behind");
    }
}

#[test]
fn a_configuration_with_a_mistake_is_named_not_overwritten_as_a_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.conf");
    let text = "# a RAID-5 set\ndrive a device /nowhere/d1\nvolume raid\n plex org raid5 64k\n  sd drive a\n";
    std::fs::write(&conf, text).unwrap();
    for args in [
        vec!["run", "--target", conf.to_str().unwrap(), "--rw", "write", "--ios", "4"],
        vec!["fs", "mkfs", conf.to_str().unwrap(), "--force"],
    ] {
        let out = iolab(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("reads as a volume configuration, but line 5"), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), text, "the configuration is as it was");
}
