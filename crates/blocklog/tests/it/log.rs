//! The block log on crash-injecting devices: what was committed survives
//! any crash whole, what was not is wholly absent.

use std::sync::Arc;

use blocklog::{HomeWrites, LogError, LoggedDevice, Mode, Placement, AREA_START};
use device::{CrashDevice, CrashPolicy, Device, DeviceError, Fault, FaultyDevice, MemDevice, Op};
use proptest::prelude::*;

const SECTOR: usize = 512;
/// A small log so that commits are forced, the circle wraps and
/// checkpoints happen within a few dozen operations.
pub(crate) const LOG_BYTES: u64 = AREA_START + 256 * 1024;
const DATA_BYTES: u64 = 256 * 1024;

pub(crate) fn crash_stack() -> Arc<CrashDevice> {
    let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    Arc::new(CrashDevice::new(mem).unwrap())
}

pub(crate) fn format(dev: Arc<dyn Device>, mode: Mode) -> LoggedDevice {
    LoggedDevice::format(dev, Placement::Inside { log_bytes: LOG_BYTES }, mode).unwrap()
}

fn reopen(image: MemDevice, mode: Mode) -> LoggedDevice {
    LoggedDevice::open(Arc::new(image), None, mode).unwrap()
}

fn read_all(dev: &dyn Device) -> Vec<u8> {
    let mut buf = vec![0u8; dev.size_bytes() as usize];
    dev.read_at(&mut buf, 0).unwrap();
    buf
}

pub(crate) fn block(byte: u8, sectors: usize) -> Vec<u8> {
    vec![byte; sectors * SECTOR]
}

#[test]
fn reads_see_writes_before_and_after_commit() {
    let dev = format(crash_stack(), Mode::Log);
    dev.write_at(&block(7, 8), 4096).unwrap();
    let mut back = vec![0u8; 4096];
    dev.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, block(7, 8));
    dev.flush().unwrap();
    dev.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, block(7, 8));
}

#[test]
fn a_committed_write_survives_a_crash_before_it_is_home() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(3, 8), 0).unwrap();
    dev.flush().unwrap();
    // The home write of the commit is not flushed: a crash drops it.
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = reopen(image, Mode::Log);
    assert_eq!(back.replay_report().commits, 1);
    assert_eq!(read_all(&back)[..4096], block(3, 8)[..]);
}

/// Sectors that are all zero are logged by their numbers alone: a commit
/// of nothing else writes one record header and the commit header.
#[test]
fn zero_sectors_are_logged_without_their_bytes() {
    let dev = format(crash_stack(), Mode::Log);
    dev.write_at(&block(0, 64), 0).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.log_stats().sectors_logged, 64);
    assert_eq!(dev.log_stats().log_bytes_written, SECTOR as u64 + 4096);
}

/// A commit's zero sectors, among sectors that are not, replace what was
/// durable at home when replayed after a crash.
#[test]
fn zero_sectors_among_others_are_replayed_over_older_home_contents() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(3, 16), 0).unwrap();
    dev.checkpoint().unwrap();
    // Sectors 0, 2, 3, 6..16 zero; 1, 4 and 5 not.
    let mut mixed = block(0, 16);
    for s in [1, 4, 5] {
        mixed[s * SECTOR..(s + 1) * SECTOR].fill(9);
    }
    dev.write_at(&mixed, 0).unwrap();
    dev.flush().unwrap();
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = reopen(image, Mode::Log);
    assert_eq!(back.replay_report().sectors_written_home, 16);
    assert_eq!(read_all(&back)[..16 * SECTOR], mixed[..]);
}

/// A log made in units of a 4 KiB block keeps one entry per block, takes
/// no write smaller than a block, and replays in blocks after a crash.
#[test]
fn a_log_in_units_of_a_block_logs_and_replays_whole_blocks() {
    let crash = crash_stack();
    let placement = Placement::Inside { log_bytes: LOG_BYTES };
    let dev = LoggedDevice::format_in_units(crash.clone(), placement, Mode::Log, 4096).unwrap();
    assert_eq!(dev.header().sector_bytes, 4096);
    dev.write_at(&block(5, 16), 8192).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.log_stats().sectors_logged, 2);
    assert!(dev.write_at(&block(6, 1), 0).is_err(), "a write of less than a block is refused");
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = reopen(image, Mode::Log);
    assert_eq!(back.replay_report().sectors_written_home, 2);
    assert_eq!(read_all(&back)[8192..16384], block(5, 16)[..]);
}

#[test]
fn a_unit_that_is_not_a_power_of_two_is_refused() {
    let placement = Placement::Inside { log_bytes: LOG_BYTES };
    let err = LoggedDevice::format_in_units(crash_stack(), placement, Mode::Log, 3072).err().unwrap();
    assert!(err.to_string().contains("power of two"), "{err}");
}

/// Sectors that are all zero take no room in the log: a transaction of
/// them larger than half the log is not forced to commit.
#[test]
fn a_transaction_of_zeros_larger_than_half_the_log_is_not_forced_to_commit() {
    let dev = format(crash_stack(), Mode::Log);
    for k in 0..(DATA_BYTES / 4096) {
        dev.write_at(&block(0, 8), k * 4096).unwrap();
    }
    assert!(DATA_BYTES > dev.max_txn_bytes());
    assert_eq!(dev.log_stats().forced_commits, 0);
    dev.flush().unwrap();
    assert_eq!(dev.log_stats().commits, 1);
}

/// The open transaction's size counts the sectors that carry data: a
/// block rewritten with zeros, or taken out by an unlogged write, gives
/// its room back.
#[test]
fn the_open_transaction_counts_only_the_sectors_that_carry_data() {
    let dev = format(crash_stack(), Mode::Log);
    let empty = dev.open_bytes();
    dev.write_at(&block(0, 8), 0).unwrap();
    assert_eq!(dev.open_bytes(), empty, "zeros carry no data");
    dev.write_at(&block(4, 8), 4096).unwrap();
    assert_eq!(dev.open_bytes(), empty + 4096);
    dev.write_at(&block(0, 8), 4096).unwrap();
    assert_eq!(dev.open_bytes(), empty, "rewritten with zeros");
    dev.write_at(&block(4, 8), 8192).unwrap();
    dev.write_unlogged(&block(5, 8), 8192).unwrap();
    assert_eq!(dev.open_bytes(), empty, "taken out by an unlogged write");
}

#[test]
fn an_uncommitted_write_is_absent_after_a_crash() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(3, 8), 0).unwrap();
    let image = crash.crash(CrashPolicy::KeepAll, 1).unwrap().image;
    let back = reopen(image, Mode::Log);
    assert_eq!(read_all(&back)[..4096], block(0, 8)[..]);
}

#[test]
fn sync_mode_makes_each_write_durable_and_async_does_not() {
    for (mode, expect) in [(Mode::Sync, 5u8), (Mode::Async, 0u8)] {
        let crash = crash_stack();
        let dev = format(crash.clone(), mode);
        dev.write_at(&block(5, 1), 512).unwrap();
        let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
        let back = reopen(image, mode);
        assert_eq!(read_all(&back)[512..1024], block(expect, 1)[..], "mode {mode}");
    }
}

#[test]
fn a_revoked_block_is_not_replayed_over_a_newer_unlogged_write() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.set_home_writes(HomeWrites::AtCheckpoint).unwrap();
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.flush().unwrap();
    dev.write_unlogged(&block(2, 8), 0).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.header().tail, 0, "the first commit must still be in the log for this test");
    let image = crash.crash(CrashPolicy::KeepAll, 1).unwrap().image;
    let back = reopen(image, Mode::Log);
    assert_eq!(read_all(&back)[..4096], block(2, 8)[..]);
}

#[test]
fn an_unlogged_write_after_switching_to_checkpoints_is_not_replayed_over() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.set_home_writes(HomeWrites::AfterCommit).unwrap();
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.flush().unwrap();
    dev.write_at(&block(3, 8), 8192).unwrap();
    dev.flush().unwrap();
    // The first commit's record is live, though nothing is pending home.
    dev.set_home_writes(HomeWrites::AtCheckpoint).unwrap();
    dev.write_unlogged(&block(2, 8), 0).unwrap();
    dev.flush().unwrap();
    let image = crash.crash(CrashPolicy::KeepAll, 1).unwrap().image;
    let back = reopen(image, Mode::Log);
    assert_eq!(read_all(&back)[..4096], block(2, 8)[..]);
}

#[test]
fn the_tail_follows_two_commits_behind_without_checkpoints() {
    let dev = format(crash_stack(), Mode::Log);
    dev.set_home_writes(HomeWrites::AfterCommit).unwrap();
    for round in 0..40u64 {
        dev.write_at(&block(1, 16), (round % 30) * 8192).unwrap();
        dev.flush().unwrap();
    }
    let header = dev.header();
    assert_eq!(dev.log_stats().checkpoints, 0);
    assert_eq!(header.head - header.tail, 512 + 16 * 512, "the header frees all but the last two commits");
}

#[test]
fn a_transaction_larger_than_half_the_log_is_refused() {
    let dev = format(crash_stack(), Mode::Log);
    let big = vec![1u8; 192 * 1024];
    let err = dev.write_at(&big, 0).unwrap_err();
    assert!(err.to_string().contains("does not fit in half the log"), "{err}");
}

#[test]
fn the_largest_request_the_log_takes_is_told_and_taken_and_one_sector_more_is_refused() {
    let dev = format(crash_stack(), Mode::Log);
    let max = dev.max_request_bytes() as usize;
    assert!(max > 0 && max % 512 == 0, "{max}");
    dev.write_at(&vec![1u8; max], 0).unwrap();
    assert!(dev.write_at(&vec![1u8; max + 512], 0).is_err());
}

#[test]
fn only_log_mode_limits_a_request() {
    for mode in [Mode::Async, Mode::Sync] {
        assert_eq!(format(crash_stack(), mode).max_request_bytes(), u64::MAX, "{mode}");
    }
}

#[test]
fn opening_a_device_without_a_log_says_so() {
    let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    let err = LoggedDevice::open(mem, None, Mode::Log).err().unwrap();
    assert!(matches!(err, LogError::NoLog { .. }), "{err}");
}

#[test]
fn a_corrupt_header_slot_falls_back_to_the_other_and_loses_nothing() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(4, 1), 0).unwrap();
    dev.flush().unwrap(); // generation 1 lands in slot 1
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    image.write_at(&[0xffu8; 512], 4096).unwrap();
    let back = reopen(image, Mode::Log);
    // Slot 0 (generation 0) names an empty log, but the commit's records
    // prove themselves whole and current past its head.
    assert_eq!(back.replay_report().commits, 1);
    assert_eq!(read_all(&back)[0], 4);
}

/// Three commits of one sector each (bytes 1, 2, 3 at sectors 0, 1, 2),
/// their home writes undone; returns the image and each commit's LSN.
pub(crate) fn three_commits() -> (MemDevice, Vec<u64>) {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.set_home_writes(HomeWrites::AtCheckpoint).unwrap();
    let mut lsns = Vec::new();
    for i in 0..3u8 {
        dev.write_at(&block(i + 1, 1), u64::from(i) * 512).unwrap();
        dev.flush().unwrap();
        lsns.push(dev.header().head);
    }
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    image.write_at(&vec![0u8; 1536], LOG_BYTES).unwrap();
    (image, lsns)
}

pub(crate) fn flip_payload_byte(image: &MemDevice, lsn: u64) {
    let at = AREA_START + lsn + 512 + 10;
    let mut sector = vec![0u8; 512];
    image.read_at(&mut sector, at / 512 * 512).unwrap();
    sector[(at % 512) as usize] ^= 1;
    image.write_at(&sector, at / 512 * 512).unwrap();
}

#[test]
fn replay_stops_at_a_corrupt_committed_record_and_says_where() {
    let (image, lsns) = three_commits();
    flip_payload_byte(&image, lsns[1]);
    let image = Arc::new(image);
    let err = LoggedDevice::open(image.clone(), None, Mode::Log).err().expect("damage refuses the open");
    let LogError::Stopped { stop, .. } = &err else { panic!("{err}") };
    assert_eq!((stop.lsn, stop.offset, stop.commit), (lsns[1], AREA_START + lsns[1], Some(2)));
    assert!(stop.reason.contains("checksum"), "{}", stop.reason);
    let data = home_bytes(&image);
    assert_eq!((data[0], data[512], data[1024]), (1, 0, 0), "the first commit replays, no later one");
}

/// The data area of an image whose log lies inside it.
pub(crate) fn home_bytes(image: &MemDevice) -> Vec<u8> {
    image.to_vec()[LOG_BYTES as usize..].to_vec()
}

#[test]
fn a_torn_last_commit_past_the_head_ends_the_log_quietly() {
    let (image, lsns) = three_commits();
    flip_payload_byte(&image, lsns[2]);
    let back = reopen(image, Mode::Log);
    let data = read_all(&back);
    assert_eq!((data[0], data[512], data[1024]), (1, 2, 0));
}

#[test]
fn an_interrupted_replay_is_rerun_cleanly() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.set_home_writes(HomeWrites::AtCheckpoint).unwrap();
    for i in 0..6u8 {
        dev.write_at(&block(i + 1, 8), u64::from(i) * 4096).unwrap();
        dev.flush().unwrap();
    }
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    // Replay on a device whose power is cut after two home writes.
    let second = Arc::new(CrashDevice::new(Arc::new(image)).unwrap());
    let cut = Arc::new(FaultyDevice::new(second.clone(), vec![Fault::PowerCut { after: 2 }]));
    assert!(LoggedDevice::open(cut, None, Mode::Log).is_err());
    let image = second.crash(CrashPolicy::KeepSubset, 7).unwrap().image;
    let back = reopen(image, Mode::Log);
    let data = read_all(&back);
    for i in 0..6usize {
        assert_eq!(data[i * 4096], i as u8 + 1, "block {i}");
    }
}

#[test]
fn the_log_wraps_and_checkpoints() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.set_home_writes(HomeWrites::AtCheckpoint).unwrap();
    for round in 0..40u64 {
        let byte = (round % 250) as u8 + 1;
        dev.write_at(&block(byte, 16), (round % 30) * 8192).unwrap();
        dev.flush().unwrap();
    }
    let stats = dev.log_stats();
    assert!(stats.checkpoints > 0 && dev.header().head > 256 * 1024, "{stats:?}");
    let expect = read_all(&dev);
    let image = crash.crash(CrashPolicy::DropUnflushed, 3).unwrap().image;
    assert_eq!(read_all(&reopen(image, Mode::Log)), expect);
}

#[test]
fn a_separate_log_device_crashed_at_the_same_instant_replays() {
    let data = Arc::new(CrashDevice::new(Arc::new(MemDevice::new(DATA_BYTES).unwrap())).unwrap());
    let log = Arc::new(CrashDevice::new(Arc::new(MemDevice::new(LOG_BYTES).unwrap())).unwrap());
    let dev =
        LoggedDevice::format(data.clone(), Placement::Separate { log: log.clone() }, Mode::Log).unwrap();
    assert_eq!(dev.size_bytes(), DATA_BYTES);
    dev.write_atomic(&[(0, &block(8, 2)), (65536, &block(9, 2))]).unwrap();
    dev.flush().unwrap();
    let data_image = data.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let log_image = log.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = LoggedDevice::open(Arc::new(data_image), Some(Arc::new(log_image)), Mode::Log).unwrap();
    let all = read_all(&back);
    assert_eq!((all[0], all[65536]), (8, 9));
}

#[test]
fn a_failed_flush_poisons_the_log() {
    let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    // Flush 1 is format's; the first commit's record flush is number 2.
    let faulty = Arc::new(FaultyDevice::new(mem, vec![Fault::Nth { op: Op::Flush, n: 2 }]));
    let dev = format(faulty, Mode::Log);
    dev.write_at(&block(1, 1), 0).unwrap();
    assert!(dev.flush().is_err());
    let err = dev.write_at(&block(1, 1), 0).unwrap_err();
    assert!(matches!(err, DeviceError::Poisoned { .. }), "{err}");
    assert!(matches!(dev.flush().unwrap_err(), DeviceError::Poisoned { .. }));
}

/// A write forced to commit (the open transaction reached half the log)
/// whose commit fails poisons the log: the front alone would not, since no
/// flush of the logged device failed, and a later write would join a
/// transaction after records of unknown state.
#[test]
fn a_failed_forced_commit_inside_a_write_poisons_the_log() {
    let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    // Flush 1 is format's; the forced commit's record flush is number 2.
    let faulty = Arc::new(FaultyDevice::new(mem, vec![Fault::Nth { op: Op::Flush, n: 2 }]));
    let dev = format(faulty, Mode::Log);
    let half = block(1, 200);
    dev.write_at(&half, 0).unwrap();
    let err = dev.write_at(&half, 200 * SECTOR as u64).unwrap_err();
    assert!(matches!(err, DeviceError::Flush { .. }), "{err}");
    assert_eq!(dev.log_stats().forced_commits, 1);
    let err = dev.write_at(&block(2, 1), 0).unwrap_err();
    assert!(matches!(err, DeviceError::Poisoned { .. }), "{err}");
    assert!(matches!(dev.write_unlogged(&block(2, 1), 0).unwrap_err(), DeviceError::Poisoned { .. }));
    assert!(matches!(dev.flush().unwrap_err(), DeviceError::Poisoned { .. }));
}

/// A commit the host had no room for (a log inside a sparse image on a
/// full file system) poisons the log like any failed commit, and every
/// refusal after it still says the host was out of space, so a file
/// system above can tell its user ENOSPC, not EIO.
#[test]
fn a_commit_the_host_has_no_room_for_poisons_the_log_and_the_refusals_say_out_of_space() {
    let writes_of_format = {
        let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
        let counting = Arc::new(FaultyDevice::new(mem, vec![]));
        format(counting.clone(), Mode::Log);
        counting.stats().snapshot().writes
    };
    let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    let full = Arc::new(FaultyDevice::new(mem, vec![Fault::NoSpace { after: writes_of_format }]));
    let dev = format(full, Mode::Log);
    dev.write_at(&block(1, 1), 0).unwrap();
    let err = dev.flush().unwrap_err();
    assert!(err.is_out_of_space(), "{err}");
    let err = dev.write_at(&block(1, 1), 0).unwrap_err();
    assert!(matches!(err, DeviceError::Poisoned { .. }) && err.is_out_of_space(), "{err}");
}

/// What a file system's metadata-only policy does, written against the
/// device interface alone: metadata through a transaction, file data in
/// place. It runs unchanged on a plain device and on a logged one.
fn write_file(dev: &dyn Device, metadata: (u64, &[u8]), data: (u64, &[u8])) {
    dev.write_atomic(&[metadata]).unwrap();
    dev.write_unlogged(data.1, data.0).unwrap();
    dev.flush().unwrap();
}

#[test]
fn a_metadata_only_policy_logs_metadata_and_writes_data_in_place_on_any_device() {
    let (metadata, data) = ((0, &block(4, 1)[..]), (65536, &block(5, 16)[..]));
    let plain = MemDevice::new(DATA_BYTES).unwrap();
    write_file(&plain, metadata, data);
    assert_eq!((plain.to_vec()[0], plain.to_vec()[65536]), (4, 5));

    let crash = crash_stack();
    let logged = format(crash.clone(), Mode::Log);
    logged.set_home_writes(HomeWrites::AtCheckpoint).unwrap();
    write_file(&logged, metadata, data);
    let stats = logged.log_stats();
    assert_eq!(stats.sectors_logged, 1, "only the metadata went through the log");
    assert_eq!(stats.revocations, 0, "data no record holds needs no revocation");
    let mut home = vec![0u8; 16 * SECTOR];
    crash.read_at(&mut home, LOG_BYTES + 65536).unwrap();
    assert_eq!(home, block(5, 16), "the data is at home, not waiting for a checkpoint");
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = read_all(&reopen(image, Mode::Log));
    assert_eq!((back[0], back[65536]), (4, 5));
}

// ---- the property: any history, a power cut at any instant ----

#[derive(Clone, Debug)]
enum Step {
    /// One transaction of one to three extents.
    Atomic(Vec<(usize, usize, u8)>),
    Flush,
}

const DATA_SECTORS: usize = (DATA_BYTES as usize) / SECTOR;

fn extent() -> impl Strategy<Value = (usize, usize, u8)> {
    // Zeros among the bytes: they are logged as zero records.
    let byte = prop_oneof![1 => Just(0u8), 3 => 1..=255u8];
    (0..DATA_SECTORS, 1..=64usize, byte)
        .prop_map(|(sector, count, byte)| (sector.min(DATA_SECTORS - count), count, byte))
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => prop::collection::vec(extent(), 1..=3).prop_map(Step::Atomic),
        1 => Just(Step::Flush),
    ]
}

fn policy() -> impl Strategy<Value = CrashPolicy> {
    prop_oneof![
        Just(CrashPolicy::DropUnflushed),
        Just(CrashPolicy::KeepAll),
        Just(CrashPolicy::KeepSubset),
        Just(CrashPolicy::TornWrite),
        (0..8usize).prop_map(CrashPolicy::Prefix),
    ]
}

/// Runs `steps` until the power cut; returns the model after each step
/// that was issued and how many steps a completed flush covers.
fn run(dev: &LoggedDevice, steps: &[Step]) -> (Vec<Vec<u8>>, usize) {
    let mut model = vec![0u8; DATA_BYTES as usize];
    let mut states = vec![model.clone()];
    let mut durable = 0;
    for step in steps {
        match step {
            Step::Atomic(extents) => {
                let bufs: Vec<(u64, Vec<u8>)> =
                    extents.iter().map(|&(s, n, b)| ((s * SECTOR) as u64, vec![b; n * SECTOR])).collect();
                let writes: Vec<(u64, &[u8])> = bufs.iter().map(|(o, b)| (*o, b.as_slice())).collect();
                let result = dev.write_atomic(&writes);
                for (offset, buf) in &bufs {
                    model[*offset as usize..*offset as usize + buf.len()].copy_from_slice(buf);
                }
                states.push(model.clone());
                if result.is_err() {
                    break;
                }
            }
            Step::Flush => {
                if dev.flush().is_err() {
                    break;
                }
                durable = states.len() - 1;
            }
        }
    }
    (states, durable)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn after_any_crash_the_image_is_a_committed_prefix(
        steps in prop::collection::vec(step(), 1..60),
        cut in 0u64..400,
        policy in policy(),
        seed in any::<u64>(),
        after_commit in any::<bool>(),
    ) {
        let crash = crash_stack();
        let cut_dev = Arc::new(FaultyDevice::new(crash.clone(), vec![Fault::PowerCut { after: cut + 3 }]));
        let dev = format(cut_dev, Mode::Log);
        dev.set_home_writes(if after_commit { HomeWrites::AfterCommit } else { HomeWrites::AtCheckpoint }).unwrap();
        let (states, durable) = run(&dev, &steps);
        let image = crash.crash(policy, seed).unwrap().image;
        // A crash state is never damage: the open succeeds.
        let back = LoggedDevice::open(Arc::new(image), None, Mode::Log);
        let back = back.map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = read_all(&back);
        let matches: Vec<usize> = (0..states.len()).filter(|&i| states[i] == got).collect();
        prop_assert!(!matches.is_empty(), "the image is no state the history passed through");
        prop_assert!(
            matches.iter().any(|&i| i >= durable),
            "a flushed step was lost: image matches states {:?}, flush covered {}", matches, durable
        );
    }
}

#[test]
fn a_formatted_log_is_recognised_as_holding_data() {
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    format(mem.clone(), Mode::Log);
    assert_eq!(device::signature::probe(mem.as_ref()).unwrap(), Some("iolab block log"));
}

#[test]
fn an_unlogged_write_is_not_overwritten_by_a_later_checkpoint() {
    let dev = format(crash_stack(), Mode::Log);
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.flush().unwrap();
    dev.write_unlogged(&block(2, 8), 0).unwrap();
    dev.checkpoint().unwrap();
    assert_eq!(read_all(&dev)[..4096], block(2, 8)[..]);
}

#[test]
fn blocks_wait_in_memory_until_a_checkpoint_writes_them_home() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(6, 8), 8192).unwrap();
    dev.flush().unwrap();
    let mut home = vec![0u8; 4096];
    crash.read_at(&mut home, LOG_BYTES + 8192).unwrap();
    assert_eq!(home, block(0, 8), "written home before a checkpoint");
    assert_eq!(read_all(&dev)[8192..12288], block(6, 8)[..], "reads see the committed block");
    dev.checkpoint().unwrap();
    crash.read_at(&mut home, LOG_BYTES + 8192).unwrap();
    assert_eq!(home, block(6, 8));
}

#[test]
fn switching_home_writes_after_commits_keeps_every_committed_block() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.flush().unwrap();
    dev.set_home_writes(HomeWrites::AfterCommit).unwrap();
    for i in 1..4u64 {
        dev.write_at(&block(2, 8), i * 4096).unwrap();
        dev.flush().unwrap();
    }
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    assert_eq!(read_all(&reopen(image, Mode::Log))[..4096], block(1, 8)[..]);
}

#[test]
fn a_separate_log_cut_short_is_refused_with_its_sizes() {
    let data = Arc::new(MemDevice::new(DATA_BYTES).unwrap());
    let log = Arc::new(MemDevice::new(LOG_BYTES).unwrap());
    let dev =
        LoggedDevice::format(data.clone(), Placement::Separate { log: log.clone() }, Mode::Log).unwrap();
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.flush().unwrap();
    let short = MemDevice::from_bytes("short log", &log.to_vec()[..(LOG_BYTES / 2) as usize], 512).unwrap();
    let err = LoggedDevice::open(data, Some(Arc::new(short)), Mode::Log).err().unwrap();
    assert!(err.to_string().contains("the log says it is"), "{err}");
}

#[test]
fn a_sector_held_by_the_log_is_not_unwritten_though_its_home_is_a_hole() {
    let mem = Arc::new(MemDevice::new(3 << 20).unwrap());
    let dev = LoggedDevice::format(mem, Placement::Inside { log_bytes: 1 << 20 }, Mode::Log).unwrap();
    dev.write_at(&block(1, 1), 4096).unwrap();
    dev.flush().unwrap();
    let holes = dev.unwritten(0, 2 << 20).unwrap().unwrap();
    assert_eq!(holes, vec![0..4096, 4096 + SECTOR as u64..2 << 20]);
}

#[test]
fn a_sealed_transaction_commits_without_what_was_written_after_the_seal() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.seal().unwrap();
    dev.write_at(&block(2, 8), 8192).unwrap();
    assert_eq!(read_all(&dev)[..4096], block(1, 8)[..], "reads see a sealed transaction");
    dev.commit_sealed().unwrap();
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    let back = read_all(&reopen(image, Mode::Log));
    assert_eq!((back[0], back[8192]), (1, 0), "the write after the seal waits for the next commit");
}

#[test]
fn an_unlogged_write_over_a_sealed_block_is_not_overwritten_by_its_commit() {
    let crash = crash_stack();
    let dev = format(crash.clone(), Mode::Log);
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.seal().unwrap();
    dev.write_unlogged(&block(2, 8), 0).unwrap();
    dev.commit_sealed().unwrap();
    dev.flush().unwrap();
    assert_eq!(read_all(&dev)[..4096], block(2, 8)[..]);
    let image = crash.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    assert_eq!(read_all(&reopen(image, Mode::Log))[..4096], block(2, 8)[..], "replayed over");
    dev.checkpoint().unwrap();
    assert_eq!(read_all(&dev)[..4096], block(2, 8)[..], "the checkpoint wrote the sealed copy home");
}

#[test]
fn a_sealed_commit_that_fails_poisons_the_log() {
    let mem = Arc::new(MemDevice::new(LOG_BYTES + DATA_BYTES).unwrap());
    // Flush 1 is format's; the sealed commit's record flush is number 2.
    let faulty = Arc::new(FaultyDevice::new(mem, vec![Fault::Nth { op: Op::Flush, n: 2 }]));
    let dev = format(faulty, Mode::Log);
    dev.write_at(&block(1, 8), 0).unwrap();
    dev.seal().unwrap();
    assert!(matches!(dev.commit_sealed().unwrap_err(), DeviceError::Flush { .. }));
    let err = dev.write_at(&block(2, 8), 4096).unwrap_err();
    assert!(matches!(err, DeviceError::Poisoned { .. }), "{err}");
    assert!(matches!(dev.flush().unwrap_err(), DeviceError::Poisoned { .. }), "not retried");
}

/// Ordered data (ext4's data=ordered, WAPBL's rule): a commit whose
/// metadata names file data written in place is never durable before
/// that data, even with the log inside the data device, where one flush
/// would cover both. Power is cut at every point of the commit and each
/// crash keeps a random subset of the writes not yet flushed.
#[test]
fn a_commit_is_never_durable_before_the_unlogged_data_it_names() {
    let mut checked = 0;
    for after in 0..64 {
        let crash = crash_stack();
        let cut: Arc<dyn Device> =
            Arc::new(FaultyDevice::new(crash.clone(), vec![Fault::PowerCut { after }]));
        let Ok(dev) = LoggedDevice::format(cut, Placement::Inside { log_bytes: LOG_BYTES }, Mode::Log) else {
            continue;
        };
        let _ = dev.write_unlogged(&block(5, 8), 65536);
        let _ = dev.write_at(&block(4, 8), 0);
        let _ = dev.flush();
        for seed in 0..16 {
            let image = crash.crash(CrashPolicy::KeepSubset, seed).unwrap().image;
            let back = read_all(&reopen(image, Mode::Log));
            if back[0] == 4 {
                checked += 1;
                assert_eq!(
                    back[65536], 5,
                    "power cut after {after} requests, seed {seed}: the commit without its data"
                );
            }
        }
    }
    assert!(checked > 0, "no crash state held the commit");
}
