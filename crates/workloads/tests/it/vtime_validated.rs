//! Validation in virtual time: the sync engine's validated workers and
//! their journal as one simulation on simulated disks. The same job gives
//! the same figures and journal counts; every write is journaled and every
//! read checked; a disk that changes what it was given is caught; the
//! clock's hooks (a power cut's) run at their instant.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use device::{Backend, Checked, Device, Front, Geometry, Nanos, VData, VirtualDisk};
use sim::{SimDevice, SimSpec, VirtualClock};
use workloads::journal::{JournalMode, JournalPlace, JournalSpec};
use workloads::{run_job, Engine, JobResult, JobSpec, KeyMapSpec, Progress, Rw, ValidateSpec};

fn disk(spec: &str, clock: &Arc<VirtualClock>) -> Arc<SimDevice> {
    SimDevice::new("sim", SimSpec::parse(spec).unwrap(), Arc::clone(clock)).unwrap()
}

/// A validated job of `threads` threads over the first 64 MiB, its journal
/// in `mode` on `journal` (none without).
fn job(rw: Rw, threads: u32, journal: Option<(JournalMode, Arc<dyn Device>)>) -> JobSpec {
    let journal =
        journal.map(|(mode, dev)| JournalSpec { mode, place: JournalPlace::Device(dev), ring: false });
    JobSpec {
        rw,
        read_pct: rw.default_read_pct(),
        engine: Engine::Virtual,
        threads,
        size_bytes: Some(64 << 20),
        runtime: Some(Duration::from_secs(1)),
        validate: Some(ValidateSpec {
            preread: true,
            reread: false,
            verify: false,
            max_errors: 50,
            run_id: 7,
            journal,
            key_map: KeyMapSpec::AUTO,
        }),
        ..JobSpec::default()
    }
}

/// The second seed's data device: about 17,000 4 KiB writes a second.
const TARGET: &str = "ssd,channels=2,write_us=115,plp=on,size=1g";

/// `job` on a new simulated SSD with its journal (when `mode`) on a new
/// simulated disk `journal`, both on one clock.
fn run(rw: Rw, threads: u32, mode: Option<JournalMode>, journal: &str) -> JobResult {
    let clock = VirtualClock::new();
    let target = disk(TARGET, &clock);
    let journal: Option<(JournalMode, Arc<dyn Device>)> = mode.map(|m| (m, disk(journal, &clock) as _));
    run_job(&job(rw, threads, journal), target, &Progress::default()).unwrap()
}

#[test]
fn the_same_validated_job_gives_the_same_figures_and_journal_counts() {
    let a = run(Rw::RandRw, 8, Some(JournalMode::Group), "hdd,wce=off,size=8g");
    let b = run(Rw::RandRw, 8, Some(JournalMode::Group), "hdd,wce=off,size=8g");
    assert_eq!((a.read, a.write, a.elapsed_s), (b.read, b.write, b.elapsed_s));
    assert_eq!(a.latency, b.latency);
    let (va, vb) = (a.validation.unwrap(), b.validation.unwrap());
    assert_eq!(va.journal, vb.journal);
    assert_eq!((va.blocks_written, va.blocks_checked), (vb.blocks_written, vb.blocks_checked));
}

#[test]
fn every_write_is_journaled_before_and_after_and_every_read_checked() {
    let clock = VirtualClock::new();
    let journal = disk("hdd,wce=off,size=8g", &clock);
    // Sixteen blocks: each is written early, and checked at every read after.
    let j = JobSpec {
        size_bytes: Some(16 * 4096),
        ..job(Rw::RandRw, 4, Some((JournalMode::Sync, journal as _)))
    };
    let r = run_job(&j, disk("ssd,size=1g", &clock), &Progress::default()).unwrap();
    let v = r.validation.unwrap();
    assert_eq!(v.errors, 0, "{:?}", v.error_list.first());
    assert_eq!(v.blocks_written, r.write.ios);
    // Each read, and each write's pre-read, is checked, but for the reads
    // of a block not written yet (a few per block, early on).
    let reads = r.read.ios + r.write.ios;
    assert!(reads > 200, "{reads} reads");
    assert!(
        v.blocks_checked <= reads && v.blocks_checked + 4 * 16 >= reads,
        "{} of {reads}",
        v.blocks_checked
    );
    let journal = v.journal.unwrap();
    assert_eq!(journal.records, 2 * r.write.ios);
    assert!(journal.commits > 0 && journal.commits <= journal.records, "{journal:?}");
}

#[test]
fn a_sync_journal_on_a_disk_without_cache_costs_what_group_commit_saves() {
    let sync = run(Rw::RandWrite, 16, Some(JournalMode::Sync), "hdd,wce=off,size=8g");
    let group = run(Rw::RandWrite, 16, Some(JournalMode::Group), "hdd,wce=off,size=8g");
    let none = run(Rw::RandWrite, 16, None, "");
    assert!(
        sync.write.iops * 4.0 < group.write.iops,
        "sync {:.0}, group {:.0}",
        sync.write.iops,
        group.write.iops
    );
    assert!(
        group.write.iops > 0.9 * none.write.iops,
        "group {:.0}, none {:.0}",
        group.write.iops,
        none.write.iops
    );
}

#[test]
fn depth_beyond_one_is_refused_under_validation() {
    let clock = VirtualClock::new();
    let j = JobSpec { iodepth: 4, ..job(Rw::RandWrite, 1, None) };
    let err = run_job(&j, disk("ssd,size=1g", &clock), &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("--iodepth 1"), "{err}");
}

#[test]
fn a_journal_off_the_simulated_disks_is_refused() {
    let clock = VirtualClock::new();
    let mem: Arc<dyn Device> = Arc::new(device::MemDevice::new(64 << 20).unwrap());
    let j = job(Rw::RandWrite, 1, Some((JournalMode::Group, mem)));
    let err = run_job(&j, disk("ssd,size=1g", &clock), &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("journal on a simulated disk"), "{err}");
}

#[test]
fn a_hook_on_the_clock_runs_at_its_instant_with_the_disks_there() {
    let clock = VirtualClock::new();
    let target = disk("ssd,size=1g", &clock);
    let journal = disk("hdd,wce=off,size=8g", &clock);
    let ran: Arc<Mutex<Option<(Nanos, Nanos)>>> = Arc::default();
    let seen = Arc::clone(&ran);
    let watched = Arc::clone(&target);
    let at = clock.now() + 700_000_000;
    clock.at(at, move |t| *seen.lock().unwrap() = Some((t, VirtualDisk::now(watched.as_ref()))));
    let j = JobSpec {
        clock: device::Clock::Virtual(Arc::clone(&clock)),
        ..job(Rw::RandWrite, 4, Some((JournalMode::Group, journal as _)))
    };
    run_job(&j, target, &Progress::default()).unwrap();
    assert_eq!(*ran.lock().unwrap(), Some((at, at)));
}

/// A simulated disk that adds one to the first byte of every write at
/// `offset`: a disk that changes what it was given.
struct Changing {
    inner: Arc<SimDevice>,
    front: Front,
    offset: u64,
}

impl Backend for Changing {
    fn front(&self) -> &Front {
        &self.front
    }
    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> device::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> device::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush_raw(&self, _: Checked) -> device::Result<()> {
        self.inner.flush()
    }
    fn unwritten_raw(&self, _: u64, _: u64, _: Checked) -> device::Result<Option<Vec<std::ops::Range<u64>>>> {
        Ok(Some(Vec::new()))
    }
    fn virtual_disk_raw(&self) -> Option<&dyn VirtualDisk> {
        Some(self)
    }
}

impl VirtualDisk for Changing {
    fn submit(&self, at: Nanos, offset: u64, data: VData<'_>) -> device::Result<u64> {
        match data {
            VData::Write(buf) if offset == self.offset => {
                let mut changed = buf.to_vec();
                changed[0] = changed[0].wrapping_add(1);
                self.inner.submit(at, offset, VData::Write(&changed))
            }
            data => self.inner.submit(at, offset, data),
        }
    }
    fn next_event(&self) -> Option<Nanos> {
        self.inner.next_event()
    }
    fn advance(&self, t: Nanos) -> Vec<(u64, Nanos)> {
        self.inner.advance(t)
    }
    fn describe(&self) -> String {
        "a disk that changes writes".into()
    }
    fn now(&self) -> Nanos {
        VirtualDisk::now(self.inner.as_ref())
    }
    fn power_cut(&self) -> Vec<(u64, Vec<u8>)> {
        self.inner.power_cut()
    }
}

#[test]
fn a_write_the_disk_changes_is_caught_when_read() {
    let clock = VirtualClock::new();
    let inner = disk("ssd,size=1g", &clock);
    let front = Front::new("changing", Geometry::new(inner.size_bytes(), 512));
    let target: Arc<dyn Device> = Arc::new(Changing { inner, front, offset: 0 });
    // Sixteen blocks, so block 0 is written and read again many times.
    let j = JobSpec { size_bytes: Some(16 * 4096), ..job(Rw::RandRw, 2, None) };
    let result = run_job(&j, target, &Progress::default()).unwrap();
    let v = result.validation.unwrap();
    assert!(v.errors > 0, "the changed block went unseen");
    assert!(v.error_list.iter().all(|e| e.block_offset == 0), "{:?}", v.error_list.first());
}
