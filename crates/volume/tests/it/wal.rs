//! RAID-5 row updates through a write-ahead log: logged whole, before
//! anything is written in place.

use std::sync::{Arc, Mutex};

use device::{Device, Result, WriteAheadLog};

use crate::common::{mem_drives, open, single_plex, KIB};

/// Each logged transaction's writes (drive, offset, length) and the drive
/// writes made before it.
type Logged = Vec<(Vec<(u32, u64, usize)>, u64)>;

/// Remembers what was logged, and how many drive writes had happened by then.
struct Spy {
    drives: Vec<Arc<dyn Device>>,
    logged: Mutex<Logged>,
    written: Mutex<Vec<u64>>,
}

impl Spy {
    fn drive_writes(&self) -> u64 {
        self.drives.iter().map(|d| d.stats().snapshot().writes).sum()
    }
}

impl WriteAheadLog for Spy {
    fn log(&self, writes: &[(u32, u64, &[u8])]) -> Result<u64> {
        let mut logged = self.logged.lock().unwrap();
        logged.push((writes.iter().map(|(d, o, b)| (*d, *o, b.len())).collect(), self.drive_writes()));
        Ok(logged.len() as u64)
    }

    fn checkpoint(&self) -> Result<()> {
        Ok(())
    }

    fn written(&self, ticket: u64) {
        self.written.lock().unwrap().push(ticket);
    }
}

fn raid5_with_spy() -> (Arc<volume::Volume>, Arc<Spy>) {
    let drives = mem_drives(&["d0", "d1", "d2", "d3"], 4 << 20);
    let vol = open(&single_plex("raid5 64k", 4, "1m"), &drives);
    let homes = vol.raid5_homes().expect("one RAID-5 plex");
    let spy = Arc::new(Spy { drives: homes, logged: Mutex::default(), written: Mutex::default() });
    vol.set_write_ahead_log(spy.clone()).unwrap();
    (vol, spy)
}

#[test]
fn a_small_write_logs_its_data_and_parity_before_writing_either_in_place() {
    let (vol, spy) = raid5_with_spy();
    let before = spy.drive_writes();
    vol.write_at(&[7u8; 4096], 4 * KIB).unwrap();
    let logged = spy.logged.lock().unwrap();
    assert_eq!(logged.len(), 1);
    let (writes, drive_writes_then) = &logged[0];
    assert_eq!(writes.len(), 2, "data and parity: {writes:?}");
    assert!(writes.iter().all(|(_, _, len)| *len == 4096));
    assert_eq!(*drive_writes_then, before, "nothing was written in place before the log");
    assert_eq!(spy.drive_writes(), before + 2);
}

#[test]
fn every_logged_row_update_is_reported_written() {
    let (vol, spy) = raid5_with_spy();
    vol.write_at(&vec![1u8; 256 * 1024], 0).unwrap();
    let logged = spy.logged.lock().unwrap().len() as u64;
    assert!(logged >= 2, "a 256k write spans rows of 192k");
    assert_eq!(*spy.written.lock().unwrap(), (1..=logged).collect::<Vec<_>>());
}

#[test]
fn a_volume_without_raid5_refuses_a_write_ahead_log() {
    let drives = mem_drives(&["d0", "d1"], 4 << 20);
    let vol = open(&single_plex("striped 64k", 2, "1m"), &drives);
    assert!(vol.raid5_homes().is_none());
    let spy = Arc::new(Spy { drives: vec![], logged: Mutex::default(), written: Mutex::default() });
    assert!(vol.set_write_ahead_log(spy).is_err());
}

const LOGGED: &str = "drive d0 device m0\ndrive d1 device m1\ndrive d2 device m2\ndrive j device mj\n\
volume v\nplex org raid5 64k log j\nsd length 1m drive d0\nsd length 1m drive d1\nsd length 1m drive d2\n";

#[test]
fn a_plex_that_names_a_log_drive_takes_no_writes_without_its_log() {
    let drives = mem_drives(&["d0", "d1", "d2", "j"], 4 << 20);
    let vol = open(LOGGED, &drives);
    let err = vol.write_at(&[1; 4096], 0).unwrap_err();
    assert!(err.to_string().contains("go through the stripe log on drive 'j'"), "{err}");
    vol.read_at(&mut [0; 4096], 0).unwrap();
}

#[test]
fn a_missing_log_drive_is_one_of_the_volume_s_drives_missing_and_down() {
    let drives = mem_drives(&["d0", "d1", "d2", "j"], 4 << 20);
    volume::create(&volume::parse(LOGGED).unwrap(), &drives, &crate::common::fresh).unwrap();
    let present: Vec<Arc<dyn Device>> = ["d0", "d1", "d2"].iter().map(|d| Arc::clone(&drives[*d])).collect();
    let set = volume::assemble(&present).unwrap();
    let vol = set.volume("v").unwrap();
    let j = vol.report().drives.into_iter().find(|d| d.name == "j").expect("the log drive is listed");
    assert!(j.missing && j.state == volume::State::Down, "{j:?}");
    assert!(!vol.raid5_log_drive().unwrap().2, "the log drive is not in service");
}

#[test]
fn the_homes_of_drives_not_up_are_named_for_the_log() {
    let drives = mem_drives(&["d0", "d1", "d2", "j"], 4 << 20);
    let vol = open(LOGGED, &drives);
    vol.set_state("d1", volume::State::Down).unwrap();
    assert_eq!(vol.raid5_homes_down(), [1]);
}
