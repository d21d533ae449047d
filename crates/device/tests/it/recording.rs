//! Recorded histories rebuilt into crash images.

use std::sync::Arc;

use device::{CrashPoint, CrashPolicy, Device, MemDevice, Recording, RecordingDevice, Replayer};

fn history() -> Vec<device::Event> {
    let recording = Recording::new();
    let a: Arc<dyn Device> = Arc::new(MemDevice::new(4096).unwrap());
    let b: Arc<dyn Device> = Arc::new(MemDevice::new(4096).unwrap());
    let (ra, rb) =
        (RecordingDevice::new(a, 0, recording.clone()), RecordingDevice::new(b, 1, recording.clone()));
    ra.write_at(&[1; 512], 0).unwrap(); // event 0
    rb.write_at(&[2; 512], 0).unwrap(); // 1
    ra.flush().unwrap(); // 2: only device 0's write is durable
    recording.mark(7); // 3
    ra.write_at(&[3; 512], 512).unwrap(); // 4
    recording.events()
}

fn byte_at(dev: &dyn Device, offset: u64) -> u8 {
    let mut buf = [0u8; 512];
    dev.read_at(&mut buf, offset).unwrap();
    buf[0]
}

fn replayer(events: Vec<device::Event>) -> Replayer {
    Replayer::new(events, vec![MemDevice::new(4096).unwrap(), MemDevice::new(4096).unwrap()])
}

#[test]
fn a_flush_makes_only_its_own_devices_writes_durable() {
    let events = history();
    assert_eq!(events.len(), 5);
    let point = CrashPoint { after_events: 3, policy: CrashPolicy::DropUnflushed, seed: 0 };
    let images = replayer(events).images_at(point).unwrap();
    assert_eq!((byte_at(&images[0], 0), byte_at(&images[1], 0)), (1, 0));
}

#[test]
fn keep_all_keeps_every_pending_write_of_every_device() {
    let events = history();
    let point = CrashPoint { after_events: 5, policy: CrashPolicy::KeepAll, seed: 0 };
    let images = replayer(events).images_at(point).unwrap();
    assert_eq!((byte_at(&images[0], 512), byte_at(&images[1], 0)), (3, 2));
}

#[test]
fn images_at_successive_points_share_the_walk() {
    let events = history();
    let mut r = replayer(events);
    let early = r.images_at(CrashPoint { after_events: 1, policy: CrashPolicy::KeepAll, seed: 0 }).unwrap();
    assert_eq!(byte_at(&early[0], 0), 1);
    drop(early);
    let late =
        r.images_at(CrashPoint { after_events: 5, policy: CrashPolicy::DropUnflushed, seed: 0 }).unwrap();
    assert_eq!((byte_at(&late[0], 0), byte_at(&late[0], 512)), (1, 0));
}

#[test]
fn an_overlay_never_writes_its_base() {
    let base = Arc::new(MemDevice::new(4096).unwrap());
    let overlay = device::Overlay::new(base.clone());
    overlay.write_at(&[9; 1024], 512).unwrap();
    assert_eq!((byte_at(&overlay, 512), byte_at(&overlay, 1024), byte_at(base.as_ref(), 512)), (9, 9, 0));
}

#[test]
fn an_overlay_over_a_read_only_file_reads_its_own_writes_and_keeps_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, [5u8; 4096]).unwrap();
    let options = device::FileOptions { read_only: true, ..Default::default() };
    let file: Arc<dyn Device> = Arc::new(device::FileDevice::open(&path, &options).unwrap());
    let overlay = device::Overlay::over(file);
    overlay.write_at(&[9; 512], 512).unwrap();
    assert_eq!((byte_at(&overlay, 0), byte_at(&overlay, 512)), (5, 9));
    assert_eq!(std::fs::read(&path).unwrap(), vec![5u8; 4096]);
    assert_eq!(overlay.name(), path.display().to_string());
}
