//! The stripe log: writes to several homes logged as one transaction.

use std::sync::Arc;

use blocklog::{LogError, StripeLog, AREA_START};
use device::{CrashDevice, CrashPolicy, Device, MemDevice, WriteAheadLog};

fn crashable(bytes: u64) -> Arc<CrashDevice> {
    Arc::new(CrashDevice::new(Arc::new(MemDevice::new(bytes).unwrap())).unwrap())
}

fn homes(devs: &[Arc<CrashDevice>]) -> Vec<Arc<dyn Device>> {
    devs.iter().map(|d| d.clone() as Arc<dyn Device>).collect()
}

fn byte_at(dev: &dyn Device, offset: u64) -> u8 {
    let mut buf = [0u8; 512];
    dev.read_at(&mut buf, offset).unwrap();
    buf[0]
}

#[test]
fn a_logged_update_is_replayed_to_every_home_after_a_crash() {
    let drives = [crashable(1 << 20), crashable(1 << 20)];
    let log = crashable(AREA_START + 256 * 1024);
    let wal = StripeLog::format(log.clone(), homes(&drives)).unwrap();
    let ticket = wal.log(&[(0, 4096, &[5u8; 512]), (1, 8192, &[6u8; 512])]).unwrap();
    // Only the first home write happens before the power is cut.
    drives[0].write_at(&[5u8; 512], 4096).unwrap();
    let images: Vec<Arc<dyn Device>> = drives
        .iter()
        .map(|d| Arc::new(d.crash(CrashPolicy::KeepAll, 1).unwrap().image) as Arc<dyn Device>)
        .collect();
    let log_image = Arc::new(log.crash(CrashPolicy::DropUnflushed, 1).unwrap().image);
    let back = StripeLog::open(log_image, images.clone()).unwrap();
    assert_eq!(back.replay_report().commits, 1);
    assert_eq!((byte_at(images[0].as_ref(), 4096), byte_at(images[1].as_ref(), 8192)), (5, 6));
    let _ = ticket;
}

#[test]
fn a_checkpoint_frees_every_done_transaction() {
    let drives = [crashable(1 << 20)];
    let wal = StripeLog::format(crashable(AREA_START + 256 * 1024), homes(&drives)).unwrap();
    let first = wal.log(&[(0, 0, &[1u8; 4096])]).unwrap();
    let second = wal.log(&[(0, 4096, &[2u8; 4096])]).unwrap();
    wal.written(second);
    wal.written(first);
    assert!(wal.header().head > wal.header().tail);
    wal.checkpoint().unwrap();
    assert_eq!(wal.header().tail, wal.header().head);
}

#[test]
fn a_full_log_is_reused_once_transactions_are_done() {
    let drives = [crashable(4 << 20)];
    let wal = StripeLog::format(crashable(AREA_START + 256 * 1024), homes(&drives)).unwrap();
    for i in 0..200u64 {
        let ticket = wal.log(&[(0, (i % 64) * 8192, &[i as u8; 8192])]).unwrap();
        wal.written(ticket);
    }
    assert!(wal.header().head > 256 * 1024 && wal.stats().checkpoints > 0, "{:?}", wal.stats());
}

#[test]
fn a_device_log_is_not_taken_for_a_stripe_log() {
    let dev = crashable(AREA_START + 256 * 1024 + (1 << 20));
    blocklog::LoggedDevice::format(
        dev.clone(),
        blocklog::Placement::Inside { log_bytes: AREA_START + 256 * 1024 },
        blocklog::Mode::Log,
    )
    .unwrap();
    let err = StripeLog::open(dev.clone(), vec![dev.clone() as Arc<dyn Device>]).err().unwrap();
    assert!(err.to_string().contains("not a stripe log"), "{err}");
}

#[test]
fn an_update_to_a_home_it_does_not_have_is_refused() {
    let drives = [crashable(1 << 20)];
    let wal = StripeLog::format(crashable(AREA_START + 256 * 1024), homes(&drives)).unwrap();
    assert!(wal.log(&[(3, 0, &[1u8; 512])]).is_err());
}

/// Three row updates of one sector each to two drives, none written in
/// place; the log's image with the second update's data damaged.
fn stripe_log_damaged_in_its_second_commit() -> (Arc<MemDevice>, Vec<Arc<dyn Device>>) {
    let drives = [crashable(1 << 20), crashable(1 << 20)];
    let log = crashable(AREA_START + 256 * 1024);
    let wal = StripeLog::format(log.clone(), homes(&drives)).unwrap();
    let mut starts = Vec::new();
    for i in 0..3u8 {
        wal.log(&[(0, u64::from(i) * 512, &[i + 1; 512]), (1, u64::from(i) * 512, &[i + 1; 512])]).unwrap();
        starts.push(wal.header().head);
    }
    let image = log.crash(CrashPolicy::DropUnflushed, 1).unwrap().image;
    // The second commit's record: a 512-byte header, then its data.
    image.write_at(&[0xee; 512], AREA_START + starts[1] + 512).unwrap();
    let drives = drives
        .iter()
        .map(|d| Arc::new(d.crash(CrashPolicy::DropUnflushed, 1).unwrap().image) as Arc<dyn Device>);
    (Arc::new(image), drives.collect())
}

/// Damage in a committed row update stops replay, and the stop outlives
/// the open: the third update is never replayed without the second.
#[test]
fn a_damaged_stripe_log_refuses_every_assembly_until_repaired() {
    let (log, drives) = stripe_log_damaged_in_its_second_commit();
    for _ in 0..2 {
        let err = StripeLog::open(log.clone(), drives.clone()).err().expect("damage refuses the open");
        assert!(matches!(&err, LogError::Stopped { stop, .. } if stop.commit == Some(2)), "{err}");
    }
    assert_eq!((byte_at(drives[0].as_ref(), 0), byte_at(drives[1].as_ref(), 1024)), (1, 0));
    let repaired = blocklog::repair(log.as_ref()).unwrap().expect("a marked log is repaired");
    assert_eq!((repaired.stop.commit, repaired.stop.last_commit), (Some(2), 3));
    let back = StripeLog::open(log, drives.clone()).expect("a repaired stripe log opens");
    assert_eq!(back.replay_report().commits, 0);
}

#[test]
fn a_home_out_of_service_is_left_by_replay_and_its_failing_flush_frees_no_less() {
    let drives = [crashable(1 << 20), crashable(1 << 20)];
    let log = crashable(AREA_START + 256 * 1024);
    let wal = StripeLog::format(log.clone(), homes(&drives)).unwrap();
    wal.log(&[(0, 4096, &[5u8; 512]), (1, 8192, &[6u8; 512])]).unwrap();
    let log_image = Arc::new(log.crash(CrashPolicy::DropUnflushed, 1).unwrap().image);
    let first: Arc<dyn Device> = Arc::new(drives[0].crash(CrashPolicy::KeepAll, 1).unwrap().image);
    // Home 1 is gone: every write and flush to it fails.
    let gone = Arc::new(drives[1].crash(CrashPolicy::KeepAll, 1).unwrap().image);
    let gone: Arc<dyn Device> =
        Arc::new(device::FaultyDevice::new(gone, vec![device::Fault::PowerCut { after: 0 }]));
    let back = StripeLog::open_degraded(log_image, vec![first.clone(), gone], &[1]).unwrap();
    assert_eq!((back.replay_report().commits, back.replay_report().sectors_skipped), (1, 1));
    assert_eq!(byte_at(first.as_ref(), 4096), 5);
    let ticket = back.log(&[(0, 0, &[7u8; 512])]).unwrap();
    back.written(ticket);
    back.checkpoint().unwrap();
    assert_eq!(back.header().tail, back.header().head);
}
