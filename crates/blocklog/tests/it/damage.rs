//! Damage is not a tail: a committed record that fails stops replay, the
//! header remembers it, every later open refuses, and only a repair lets
//! the log serve again, without the commits from the damage on. Whatever
//! the damage, no open replays a commit whose predecessor it did not.

use std::sync::Arc;

use blocklog::{repair, LogError, LoggedDevice, Mode, ReplayStop, AREA_START};
use device::{CrashPolicy, Device, MemDevice};
use proptest::prelude::*;

use crate::log::{block, crash_stack, flip_payload_byte, format, home_bytes, three_commits, LOG_BYTES};

/// Opens the log on `image`; the stop when it refuses.
fn open_stop(image: &Arc<MemDevice>) -> Option<ReplayStop> {
    match LoggedDevice::open(image.clone(), None, Mode::Log) {
        Ok(_) => None,
        Err(LogError::Stopped { stop, .. }) => Some(stop),
        Err(e) => panic!("{e}"),
    }
}

/// The case: after replay stopped at a damaged committed record,
/// the next open replayed a later commit without the one before it.
#[test]
fn a_second_open_after_damage_does_not_replay_the_commit_after_it() {
    let (image, lsns) = three_commits();
    flip_payload_byte(&image, lsns[1]);
    let image = Arc::new(image);
    assert!(open_stop(&image).is_some(), "the first open stops at the damage");
    assert!(open_stop(&image).is_some(), "the second open refuses too");
    let data = home_bytes(&image);
    assert_eq!((data[0], data[512], data[1024]), (1, 0, 0), "commit 3 is not replayed without commit 2");
}

#[test]
fn the_stop_persists_across_opens_and_names_the_commit_and_offset() {
    let (image, lsns) = three_commits();
    flip_payload_byte(&image, lsns[1]);
    let image = Arc::new(image);
    let first = open_stop(&image).expect("damage stops replay");
    for _ in 0..3 {
        let again = open_stop(&image).expect("the log stays marked");
        assert_eq!((again.lsn, again.offset, again.commit), (first.lsn, first.offset, first.commit));
    }
    assert_eq!((first.commit, first.last_commit, first.offset), (Some(2), 3, AREA_START + lsns[1]));
    let err = LoggedDevice::open(image.clone(), None, Mode::Log).err().unwrap().to_string();
    assert!(err.contains("commit 2") && err.contains("iolab log repair"), "{err}");
}

#[test]
fn a_repair_drops_the_commits_from_the_damage_and_the_log_opens_and_serves() {
    let (image, lsns) = three_commits();
    flip_payload_byte(&image, lsns[1]);
    let image = Arc::new(image);
    assert!(open_stop(&image).is_some());
    let repaired = repair(image.as_ref()).unwrap().expect("a marked log is repaired");
    assert_eq!((repaired.stop.commit, repaired.stop.last_commit), (Some(2), 3));
    assert_eq!(
        (repaired.found.commits, repaired.found.sectors),
        (1, 1),
        "commit 3's record is still readable"
    );
    let back = LoggedDevice::open(image.clone(), None, Mode::Log).expect("a repaired log opens");
    assert_eq!(back.replay_report().commits, 0);
    back.write_at(&block(9, 1), 2048).unwrap();
    back.flush().unwrap();
    drop(back);
    let again = LoggedDevice::open(image.clone(), None, Mode::Log).unwrap();
    assert_eq!(again.replay_report().commits, 1, "a commit after the repair replays");
    let data = home_bytes(&image);
    assert_eq!((data[0], data[512], data[1024], data[2048]), (1, 0, 0, 9));
    assert_eq!(repair(image.as_ref()).unwrap(), None, "nothing left to repair");
}

/// Rewrites the newest header of `image` with its head moved back to
/// `head` and `commits` commits before it: what the image holds after a
/// crash that kept the records of the commits after, not their headers.
fn move_head_back(image: &MemDevice, head: u64, commits: u64) {
    let mut header = LoggedDevice::probe(image).unwrap().unwrap();
    header.generation += 1;
    header.head = head;
    header.commits = commits;
    image.write_at(&header.encode(), header.slot() * 4096).unwrap();
}

/// Past the head, a failing record followed by a valid record of a later
/// commit is no crash's doing (a commit's records are written once the one
/// before is durable): damage, not the end of the log.
#[test]
fn a_failing_record_past_the_head_followed_by_a_later_commit_is_damage() {
    let (image, lsns) = three_commits();
    move_head_back(&image, lsns[1], 1);
    flip_payload_byte(&image, lsns[1]);
    let image = Arc::new(image);
    let stop = open_stop(&image).expect("commit 3 follows the failing commit 2");
    assert_eq!((stop.lsn, stop.commit, stop.last_commit), (lsns[1], Some(2), 3));
    assert!(open_stop(&image).is_some());
}

/// What a crash leaves in the commit it cut: some of its records, any
/// order of them. Records of the same commit after a failing one are no
/// damage.
#[test]
fn a_failing_record_followed_by_records_of_its_own_commit_is_the_torn_end() {
    let (crash, dev) = big_stack();
    let start = write_two_record_commit(&dev, 7);
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let at = AREA_START + start + 4096 + 10;
    image.write_at(&[0xee; 512], at / 512 * 512).unwrap();
    let back = LoggedDevice::open(Arc::new(image), None, Mode::Log).expect("a torn end is no damage");
    assert_eq!(back.replay_report().commits, 1);
}

/// A log of 1 MiB before 2 MiB of data on a crash-recording device: room
/// for commits of hundreds of scattered sectors.
fn big_stack() -> (Arc<device::CrashDevice>, LoggedDevice) {
    let log_bytes = AREA_START + (1 << 20);
    let mem = Arc::new(MemDevice::new(log_bytes + (2 << 20)).unwrap());
    let crash = Arc::new(device::CrashDevice::new(mem).unwrap());
    let placement = blocklog::Placement::Inside { log_bytes };
    let dev = LoggedDevice::format(crash.clone(), placement, Mode::Log).unwrap();
    dev.write_at(&block(1, 1), 0).unwrap();
    dev.flush().unwrap();
    (crash, dev)
}

/// Writes one commit of 300 scattered sectors (two records: 252 entries,
/// then 48) holding `byte`; returns where it starts.
fn write_two_record_commit(dev: &LoggedDevice, byte: u8) -> u64 {
    let buf = block(byte, 1);
    let writes: Vec<(u64, &[u8])> = (0..300u64).map(|i| ((8 + 2 * i) * 512, &buf[..])).collect();
    dev.write_atomic(&writes).unwrap();
    dev.flush().unwrap();
    // The header written with a commit names it by its start.
    dev.header().head
}

/// A crash left the second record of a commit and not its first; after
/// the reopen, a new commit exactly as long as that first record ends
/// where the leftover starts. The leftover must not join the log as a
/// commit of its own at a later open (it never was one).
#[test]
fn a_leftover_record_of_a_cut_commit_is_never_replayed_after_a_later_commit() {
    let (crash, dev) = big_stack();
    let start = write_two_record_commit(&dev, 7);
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    // The commit's first record never reached the disk.
    image.write_at(&[0u8; 512], AREA_START + start).unwrap();
    let second = Arc::new(device::CrashDevice::new(Arc::new(image)).unwrap());
    let reopened = LoggedDevice::open(second.clone(), None, Mode::Log).unwrap();
    assert_eq!(reopened.header().head, start);
    // 252 scattered sectors: one record as long as the lost one.
    let buf = block(9, 1);
    let writes: Vec<(u64, &[u8])> = (0..252u64).map(|i| ((1000 + 2 * i) * 512, &buf[..])).collect();
    reopened.write_atomic(&writes).unwrap();
    reopened.flush().unwrap();
    let image = second.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = LoggedDevice::open(Arc::new(image), None, Mode::Log).unwrap();
    let data = {
        let mut all = vec![0u8; back.size_bytes() as usize];
        back.read_at(&mut all, 0).unwrap();
        all
    };
    assert_eq!(data[1000 * 512], 9, "the new commit is replayed");
    assert_eq!(data[(8 + 2 * 299) * 512], 0, "the leftover of the cut commit is not");
}

/// As above, but the leftover lies where the next commit's own second
/// record goes, and a torn write left the leftover there: the next commit
/// must not take the cut commit's number, or the leftover would pass for
/// its own record and the commit be replayed with another's data.
#[test]
fn the_next_commit_never_takes_the_number_of_a_commit_a_crash_cut() {
    let (crash, dev) = big_stack();
    let start = write_two_record_commit(&dev, 7);
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    // The cut commit's second record: after 252 entries' header and data.
    let first_bytes = 4096 + 252 * 512;
    let mut leftover = vec![0u8; 1024 + 48 * 512];
    image.read_at(&mut leftover, AREA_START + start + first_bytes).unwrap();
    image.write_at(&[0u8; 512], AREA_START + start).unwrap();
    let second = Arc::new(device::CrashDevice::new(Arc::new(image)).unwrap());
    let reopened = LoggedDevice::open(second.clone(), None, Mode::Log).unwrap();
    // 253 scattered sectors: a first record as long as the cut one's, and a second.
    let buf = block(9, 1);
    let writes: Vec<(u64, &[u8])> = (0..253u64).map(|i| ((1000 + 2 * i) * 512, &buf[..])).collect();
    reopened.write_atomic(&writes).unwrap();
    reopened.flush().unwrap();
    let image = second.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    // A torn write of that commit kept every sector of its first record
    // and none of its second: the leftover shows through.
    image.write_at(&leftover, AREA_START + start + first_bytes).unwrap();
    let back = LoggedDevice::open(Arc::new(image), None, Mode::Log).unwrap();
    let mut data = vec![0u8; back.size_bytes() as usize];
    back.read_at(&mut data, 0).unwrap();
    assert_eq!(data[(8 + 2 * 299) * 512], 0, "the leftover is not replayed");
    assert_eq!(data[1000 * 512], 0, "the torn commit is not replayed either");
}

// ---- the property: any damage, two opens, never out of order ----

const COMMITS: usize = 6;

/// Six commits, commit i writing sector i with byte i + 1, none home yet.
fn six_commits() -> MemDevice {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    for i in 0..COMMITS {
        dev.write_at(&block(i as u8 + 1, 1), i as u64 * 512).unwrap();
        dev.flush().unwrap();
    }
    crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image
}

/// How many commits the data area shows, if it is a prefix of them.
fn prefix(data: &[u8]) -> Option<usize> {
    let k = (0..COMMITS).take_while(|&i| data[i * 512] == i as u8 + 1).count();
    (k..COMMITS).all(|i| data[i * 512] == 0).then_some(k)
}

fn damage() -> impl Strategy<Value = Vec<(u64, Vec<u8>)>> {
    let spot = prop_oneof![
        3 => AREA_START..AREA_START + 16 * 1024,
        1 => 0..AREA_START,
        1 => AREA_START..LOG_BYTES,
    ];
    prop::collection::vec((spot, prop::collection::vec(any::<u8>(), 1..64)), 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any damage to the log region: each open returns (no panic), reads a
    /// bounded amount, and the data is a prefix of the commits, the same
    /// at the second open as at the first.
    #[test]
    fn after_any_damage_every_open_leaves_a_prefix_of_the_commits(spots in damage()) {
        let image = six_commits();
        for (at, bytes) in &spots {
            let len = bytes.len().min((LOG_BYTES - at) as usize);
            let mut sector = vec![0u8; 512 * 2];
            let base = at / 512 * 512;
            let span = (sector.len() as u64).min(LOG_BYTES - base) as usize;
            image.read_at(&mut sector[..span], base).unwrap();
            let off = (at - base) as usize;
            let end = (off + len).min(span);
            sector[off..end].copy_from_slice(&bytes[..end - off]);
            image.write_at(&sector[..span], base).unwrap();
        }
        let image = Arc::new(image);
        let mut seen = Vec::new();
        for _ in 0..2 {
            image.stats().reset();
            let opened = LoggedDevice::open(image.clone(), None, Mode::Log);
            let read = image.stats().snapshot().bytes_read;
            prop_assert!(read <= 64 * LOG_BYTES, "{read} bytes read to open a log of {LOG_BYTES}");
            let stopped = matches!(opened, Err(LogError::Stopped { .. }));
            drop(opened);
            let k = prefix(&home_bytes(&image));
            prop_assert!(k.is_some(), "not a prefix of the commits: {:?}", &home_bytes(&image)[..COMMITS * 512 + 1].iter().step_by(512).collect::<Vec<_>>());
            seen.push((stopped, k));
        }
        prop_assert_eq!(seen[0], seen[1], "the second open does what the first did");
    }
}
