//! Validation inside a job: a clean run finds nothing, and each injected
//! fault is reported with its class.

use std::sync::Arc;

use device::{Device, Fault, FaultyDevice, MemDevice};
use workloads::{run_job, BlockSizes, JobSpec, KeyMapSpec, Progress, Rw, ValidateSpec, ValidationSummary};

const VALIDATE: ValidateSpec = ValidateSpec {
    preread: true,
    reread: false,
    verify: false,
    max_errors: 50,
    run_id: 4242,
    journal: None,
    key_map: KeyMapSpec::AUTO,
};

/// A small region (16 blocks of 4 KiB) so blocks are rewritten and reread
/// many times in a few hundred requests.
fn job(ios: u64) -> JobSpec {
    JobSpec {
        rw: Rw::RandRw,
        read_pct: 50,
        size_bytes: Some(64 << 10),
        bs: BlockSizes::Fixed(4096),
        ios: Some(ios),
        validate: Some(VALIDATE.clone()),
        ..JobSpec::default()
    }
}

fn run(dev: Arc<dyn Device>, job: &JobSpec) -> ValidationSummary {
    run_job(job, dev, &Progress::default()).unwrap().validation.expect("validation summary")
}

fn faulty(fault: Fault) -> Arc<dyn Device> {
    Arc::new(FaultyDevice::new(Arc::new(MemDevice::new(1 << 20).unwrap()), vec![fault]))
}

fn classes(summary: &ValidationSummary) -> Vec<&'static str> {
    summary.error_list.iter().map(|e| e.class).collect()
}

#[test]
fn clean_run_checks_blocks_and_finds_nothing() {
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &job(500));
    assert_eq!(summary.errors, 0, "{:?}", summary.error_list);
    assert!(summary.blocks_written > 0 && summary.blocks_checked > 0);
}

/// Eight workers with a group journal on four key blocks: requests whose
/// blocks are busy are parked while later ones are prepared, and every
/// one of them is still issued once, with no overlap (an overlap would
/// show as errors).
#[test]
fn busy_blocks_park_requests_without_losing_one() {
    let dir = tempfile::tempdir().unwrap();
    let journal = workloads::journal::JournalSpec {
        mode: workloads::journal::JournalMode::Group,
        place: workloads::journal::JournalPlace::Dir(dir.path().join("j")),
        ring: false,
    };
    let j = JobSpec {
        rw: Rw::RandWrite,
        read_pct: 0,
        threads: 8,
        size_bytes: Some(16 << 10),
        validate: Some(ValidateSpec { journal: Some(journal), ..VALIDATE.clone() }),
        ..job(3000)
    };
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &j);
    assert_eq!(summary.errors, 0, "{:?}", summary.error_list.first());
    assert_eq!(summary.blocks_written, 3000);
}

#[test]
fn clean_run_with_mixed_sizes_and_threads_finds_nothing() {
    let j = JobSpec {
        bs: BlockSizes::parse("fs").unwrap(),
        threads: 3,
        size_bytes: Some(256 << 10),
        ..job(3000)
    };
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &j);
    assert_eq!(summary.errors, 0, "{:?}", summary.error_list.first());
    assert_eq!(summary.key_block_bytes, 512);
}

#[test]
fn lost_write_is_reported_as_lost() {
    let summary = run(faulty(Fault::LoseWrite { n: 20 }), &job(500));
    assert!(classes(&summary).contains(&"lost_write"), "{:?}", summary.error_list);
}

#[test]
fn misdirected_write_is_reported_as_misdirected() {
    let summary = run(faulty(Fault::MisdirectWrite { n: 20, to_offset: 8192 }), &job(500));
    assert!(classes(&summary).contains(&"misdirected"), "{:?}", summary.error_list);
}

#[test]
fn flipped_bit_is_reported_as_corruption() {
    let summary = run(faulty(Fault::FlipBit { n: 20, byte: 1000 }), &job(500));
    assert_eq!(classes(&summary).first(), Some(&"corrupt"), "{:?}", summary.error_list);
}

#[test]
fn torn_write_is_reported_as_torn() {
    let summary = run(faulty(Fault::TearWrite { n: 20, keep_bytes: 1024 }), &job(500));
    assert!(classes(&summary).contains(&"torn"), "{:?}", summary.error_list);
}

/// One pass of sequential writes over 16 blocks: the pre-reads find only
/// blocks never written, so only the verify phase can check anything.
fn one_pass(verify: bool) -> JobSpec {
    JobSpec {
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        validate: Some(ValidateSpec { verify, ..VALIDATE.clone() }),
        ..job(16)
    }
}

#[test]
fn the_verify_phase_reads_back_every_block_the_run_wrote() {
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &one_pass(true));
    assert_eq!((summary.blocks_checked, summary.blocks_verified, summary.errors), (16, Some(16), 0));
}

#[test]
fn the_verify_phase_finds_a_write_the_device_lost() {
    let summary = run(faulty(Fault::LoseWrite { n: 5 }), &one_pass(true));
    assert_eq!(classes(&summary), ["unexpected_zeros"], "{:?}", summary.error_list);
    assert_eq!(summary.error_list[0].checked_by, workloads::validate::CheckedBy::Verify);
}

#[test]
fn without_the_verify_phase_a_write_only_pass_checks_nothing() {
    let summary = run(faulty(Fault::LoseWrite { n: 5 }), &one_pass(false));
    assert_eq!((summary.blocks_checked, summary.blocks_verified, summary.errors), (0, None, 0));
}

#[test]
fn error_cap_stops_the_job() {
    let j = JobSpec { validate: Some(ValidateSpec { max_errors: 1, ..VALIDATE.clone() }), ..job(100_000) };
    let dev = faulty(Fault::FlipBit { n: 3, byte: 7 });
    let result = run_job(&j, dev, &Progress::default()).unwrap();
    assert!(result.read.ios + result.write.ios < 100_000, "the job stopped early");
    assert!(result.validation.unwrap().errors >= 1);
}

#[test]
fn transfer_sizes_not_multiples_of_the_key_block_are_refused() {
    let j = JobSpec { bs: BlockSizes::parse("4k/50:6k/50").unwrap(), ..job(10) };
    let err = run_job(&j, Arc::new(MemDevice::new(1 << 20).unwrap()), &Progress::default()).unwrap_err();
    assert!(err.to_string().starts_with("--validate:"), "{err}");
}

mod uring {
    //! The same faults on the uring engine. The engine writes through the
    //! file descriptor, past any wrapping device, so the faults are done
    //! to the file itself, at target flushes (a sync journal flushes the
    //! target after every write).

    use std::os::unix::fs::FileExt;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use device::{Backend, Device, FileDevice, FileOptions, Front, Geometry};
    use workloads::journal::{JournalMode, JournalPlace, JournalSpec};
    use workloads::{run_job, BlockSizes, Engine, JobSpec, Progress, Rw, ValidationSummary};

    use super::{classes, VALIDATE};

    const BLOCK_BYTES: u64 = 4096;
    const REGION_BYTES: u64 = 64 * BLOCK_BYTES;

    #[derive(Clone, Copy)]
    enum Tamper {
        /// At the 5th flush, flip a byte in every block written so far.
        FlipByte,
        /// Snapshot the file at the 30th flush; at the 60th, put back every
        /// written block that changed since (their writes are lost).
        RollBack,
        Nothing,
    }

    /// A file target that damages itself at chosen flushes.
    struct Tampered {
        front: Front,
        inner: FileDevice,
        path: PathBuf,
        tamper: Tamper,
        flushes: AtomicU64,
        snapshot: Mutex<Vec<u8>>,
    }

    impl Tampered {
        fn damage(&self, flush: u64) {
            let file = std::fs::OpenOptions::new().read(true).write(true).open(&self.path).unwrap();
            let image = std::fs::read(&self.path).unwrap();
            let blocks = image[..REGION_BYTES as usize].chunks(BLOCK_BYTES as usize).enumerate();
            match (self.tamper, flush) {
                (Tamper::FlipByte, 5) => {
                    for (i, block) in blocks.filter(|(_, b)| b.iter().any(|&x| x != 0)) {
                        let at = i * BLOCK_BYTES as usize + 2000;
                        file.write_all_at(&[block[2000] ^ 0x10], at as u64).unwrap();
                    }
                }
                (Tamper::RollBack, 30) => *self.snapshot.lock().unwrap() = image,
                (Tamper::RollBack, 60) => {
                    let old = self.snapshot.lock().unwrap();
                    for (i, block) in blocks {
                        let before = &old[i * BLOCK_BYTES as usize..][..BLOCK_BYTES as usize];
                        if before.iter().any(|&x| x != 0) && before != block {
                            file.write_all_at(before, i as u64 * BLOCK_BYTES).unwrap();
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Requests go to the file; its descriptor is offered to the ring as
    /// the file's own, so the uring engine writes the file directly.
    impl Backend for Tampered {
        fn front(&self) -> &Front {
            &self.front
        }
        fn read_raw(&self, buf: &mut [u8], offset: u64, _: device::Checked) -> device::Result<()> {
            self.inner.read_at(buf, offset)
        }
        fn write_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
            self.inner.write_at(buf, offset)
        }
        fn flush_raw(&self, _: device::Checked) -> device::Result<()> {
            self.inner.flush()?;
            self.damage(self.flushes.fetch_add(1, Ordering::Relaxed) + 1);
            Ok(())
        }
    }

    fn target(dir: &tempfile::TempDir, tamper: Tamper) -> Arc<dyn Device> {
        let path = dir.path().join("t");
        let options = FileOptions { create_bytes: Some(1 << 20), ..Default::default() };
        let inner = FileDevice::open(&path, &options).unwrap();
        let fd = inner.raw_fd().expect("a file offers its descriptor");
        Arc::new(Tampered {
            front: Front::new(inner.name(), Geometry::of(&inner)).with_fd(fd),
            inner,
            path,
            tamper,
            flushes: AtomicU64::new(0),
            snapshot: Mutex::new(Vec::new()),
        })
    }

    use std::sync::Arc;

    fn job(dir: &tempfile::TempDir, ios: u64, mode: JournalMode) -> JobSpec {
        let journal = JournalSpec { mode, place: JournalPlace::Dir(dir.path().join("j")), ring: false };
        JobSpec {
            engine: Engine::Uring,
            iodepth: 8,
            rw: Rw::RandRw,
            read_pct: 50,
            size_bytes: Some(REGION_BYTES),
            bs: BlockSizes::Fixed(BLOCK_BYTES),
            ios: Some(ios),
            validate: Some(ValidateSpec { journal: Some(journal), ..VALIDATE.clone() }),
            ..JobSpec::default()
        }
    }

    use workloads::ValidateSpec;

    fn run(dev: Arc<dyn Device>, job: &JobSpec) -> ValidationSummary {
        run_job(job, dev, &Progress::default()).unwrap().validation.expect("validation summary")
    }

    #[test]
    fn clean_run_checks_blocks_and_finds_nothing() {
        for mode in [JournalMode::Group, JournalMode::Sync, JournalMode::Async] {
            let dir = tempfile::tempdir().unwrap();
            let summary = run(target(&dir, Tamper::Nothing), &job(&dir, 2000, mode));
            assert_eq!(summary.errors, 0, "{mode:?}: {:?}", summary.error_list.first());
            assert!(summary.blocks_written > 0 && summary.blocks_checked > 0, "{mode:?}");
        }
    }

    #[test]
    fn flipped_byte_is_reported_as_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let summary = run(target(&dir, Tamper::FlipByte), &job(&dir, 2000, JournalMode::Sync));
        assert!(summary.errors > 0);
        assert!(classes(&summary).iter().all(|c| *c == "corrupt"), "{:?}", classes(&summary));
    }

    #[test]
    fn rolled_back_writes_are_reported_as_lost() {
        let dir = tempfile::tempdir().unwrap();
        let summary = run(target(&dir, Tamper::RollBack), &job(&dir, 2000, JournalMode::Sync));
        assert!(classes(&summary).contains(&"lost_write"), "{:?}", classes(&summary));
    }

    #[test]
    fn requests_on_one_block_never_overlap_in_flight() {
        // Every request of 32 in flight hits the same key block: a read
        // racing a write, or two writes stamping the same next key, would
        // be found as errors.
        let dir = tempfile::tempdir().unwrap();
        let j = JobSpec { iodepth: 32, size_bytes: Some(BLOCK_BYTES), ..job(&dir, 3000, JournalMode::Group) };
        let summary = run(target(&dir, Tamper::Nothing), &j);
        assert_eq!(summary.errors, 0, "{:?}", summary.error_list.first());
        assert!(summary.blocks_written > 100 && summary.blocks_checked > 100);
    }

    #[test]
    fn without_preread_writes_are_not_checked_before_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ValidateSpec { preread: false, ..VALIDATE.clone() };
        let j = JobSpec {
            rw: Rw::RandWrite,
            read_pct: 0,
            validate: Some(spec),
            ..job(&dir, 1000, JournalMode::Group)
        };
        let summary = run(target(&dir, Tamper::Nothing), &j);
        assert_eq!((summary.blocks_written, summary.blocks_checked), (1000, 0));
    }
}

mod uring_journal {
    //! A data write goes to the kernel only once its `before` record is
    //! durable: when the journal's first commit fails, nothing reaches the
    //! target.

    use std::sync::Arc;

    use device::{Device, Fault, FaultyDevice, FileDevice, FileOptions, Op};
    use workloads::journal::{create_file, journal_record_bytes, JournalMode, JournalPlace, JournalSpec};
    use workloads::{run_job, BlockSizes, Engine, JobSpec, Progress, Rw, ValidateSpec};

    use super::VALIDATE;

    #[test]
    fn failed_first_commit_lets_no_data_write_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let options = FileOptions { create_bytes: Some(1 << 20), ..Default::default() };
        let target: Arc<dyn Device> = Arc::new(FileDevice::open(&path, &options).unwrap());
        let blocks = (256 << 10) / 4096;
        let file = create_file(dir.path(), blocks, journal_record_bytes(blocks)).unwrap();
        // Flush 1 makes the journal's start durable; flush 2 is the first commit.
        let journal: Arc<dyn Device> =
            Arc::new(FaultyDevice::new(Arc::new(file), vec![Fault::Nth { op: Op::Flush, n: 2 }]));
        let spec =
            JournalSpec { mode: JournalMode::Group, place: JournalPlace::Device(journal), ring: false };
        let job = JobSpec {
            engine: Engine::Uring,
            iodepth: 32,
            rw: Rw::RandWrite,
            read_pct: 0,
            size_bytes: Some(256 << 10),
            bs: BlockSizes::Fixed(4096),
            ios: Some(500),
            validate: Some(ValidateSpec { preread: false, journal: Some(spec), ..VALIDATE.clone() }),
            ..JobSpec::default()
        };
        assert!(run_job(&job, target, &Progress::default()).is_err());
        let image = std::fs::read(&path).unwrap();
        assert!(image.iter().all(|&b| b == 0), "a data write went out before its record was durable");
    }
}

#[test]
fn a_journal_being_written_is_reported_in_use_not_left_from_an_earlier_run() {
    use workloads::journal::{create_file, journal_record_bytes};
    let dir = tempfile::tempdir().unwrap();
    let _held = create_file(dir.path(), 64, journal_record_bytes(64)).unwrap();
    let err = create_file(dir.path(), 64, journal_record_bytes(64)).err().unwrap().to_string();
    assert!(err.contains("in use by this process"), "{err}");
}

mod flush_every {
    //! `--flush-every N` under validation: the target is flushed after
    //! every N writes on every engine and in every journal mode, and the
    //! flushes are counted (they were once dropped).

    use std::sync::Arc;

    use device::{Device, FileDevice, FileOptions, MemDevice};
    use workloads::journal::{JournalMode, JournalPlace, JournalSpec};
    use workloads::{run_job, Engine, JobSpec, Progress, Rw, ValidateSpec};

    use super::VALIDATE;

    /// 400 random 4 KiB writes over 256 KiB, a flush every 10, under
    /// `journal` (none without) on `engine`.
    fn job(engine: Engine, journal: Option<JournalSpec>) -> JobSpec {
        JobSpec {
            engine,
            iodepth: if engine == Engine::Uring { 4 } else { 1 },
            rw: Rw::RandWrite,
            read_pct: 0,
            size_bytes: Some(256 << 10),
            ios: Some(400),
            flush_every: 10,
            validate: Some(ValidateSpec { journal, ..VALIDATE.clone() }),
            ..super::job(400)
        }
    }

    fn journal(dir: &tempfile::TempDir, mode: JournalMode) -> JournalSpec {
        let place = JournalPlace::Dir(dir.path().join(format!("j-{mode:?}")));
        JournalSpec { mode, place, ring: false }
    }

    fn flushes(engine: Engine, target: Arc<dyn Device>, journal: Option<JournalSpec>) -> u64 {
        let result = run_job(&job(engine, journal), target, &Progress::default()).unwrap();
        assert_eq!(result.validation.unwrap().errors, 0);
        result.flushes
    }

    #[test]
    fn the_sync_engine_flushes_every_ten_writes_in_every_journal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let mut modes = vec![None];
        modes.extend(
            [JournalMode::Sync, JournalMode::Async, JournalMode::Group].map(|m| Some(journal(&dir, m))),
        );
        for spec in modes {
            let target = Arc::new(MemDevice::new(1 << 20).unwrap());
            assert_eq!(flushes(Engine::Sync, target, spec.clone()), 40, "{spec:?}");
        }
    }

    #[test]
    fn the_uring_engine_flushes_every_ten_writes_under_validation() {
        let dir = tempfile::tempdir().unwrap();
        for spec in [None, Some(journal(&dir, JournalMode::Group))] {
            let path = dir.path().join(format!("t-{}", spec.is_some()));
            let options = FileOptions { create_bytes: Some(1 << 20), ..Default::default() };
            let target = Arc::new(FileDevice::open(&path, &options).unwrap());
            assert_eq!(flushes(Engine::Uring, target, spec.clone()), 40, "{spec:?}");
        }
    }

    #[test]
    fn the_engine_in_virtual_time_flushes_every_ten_writes_under_validation() {
        let clock = sim::VirtualClock::new();
        let spec = sim::SimSpec::parse("ssd,size=1g").unwrap();
        let target = sim::SimDevice::new("sim", spec, Arc::clone(&clock)).unwrap();
        assert_eq!(flushes(Engine::Virtual, target, None), 40);
    }
}

#[test]
fn a_region_starting_between_transfers_validates_in_smaller_key_blocks() {
    // fio's cross-stripe verify: 16 KiB writes from 120 KiB, 112 KiB apart.
    let j = JobSpec {
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        offset_bytes: 120 << 10,
        size_bytes: Some(512 << 10),
        skip_bytes: 112 << 10,
        bs: BlockSizes::Fixed(16 << 10),
        align_bytes: Some(8 << 10),
        ios: Some(40),
        validate: Some(VALIDATE.clone()),
        ..JobSpec::default()
    };
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &j);
    assert_eq!(summary.key_block_bytes, 8 << 10);
    assert_eq!(summary.errors, 0, "{:?}", summary.error_list);
    assert!(summary.blocks_checked > 0);
}

/// [`job`] whose writes are duplicates at `ratio`:1 in 4 KiB units.
fn deduped(ios: u64, ratio: f64) -> JobSpec {
    JobSpec { dedupe: Some(workloads::Dedupe { ratio, unit_bytes: 4096 }), ..job(ios) }
}

#[test]
fn a_clean_run_with_duplicates_finds_nothing() {
    let j = JobSpec { threads: 3, ..deduped(3000, 2.0) };
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &j);
    assert_eq!(summary.errors, 0, "{:?}", summary.error_list.first());
    assert!(summary.blocks_checked > 1000, "{} checked", summary.blocks_checked);
}

#[test]
fn a_lost_write_under_duplicates_is_reported_as_lost() {
    // At 16:1 nearly every unit is a copy: the write lost is one, and so
    // is what it left in place; only the version tells them apart.
    let summary = run(faulty(Fault::LoseWrite { n: 20 }), &deduped(500, 16.0));
    assert!(classes(&summary).contains(&"lost_write"), "{:?}", summary.error_list);
}

#[test]
fn a_misdirected_duplicate_is_found() {
    // At 16:1 nearly every unit is a copy: the write sent astray is one,
    // and where it lands is not what that block should hold.
    let summary = run(faulty(Fault::MisdirectWrite { n: 20, to_offset: 8192 }), &deduped(500, 16.0));
    assert!(summary.errors > 0, "nothing found");
}

#[test]
fn under_duplicates_the_key_block_is_the_unit() {
    let j = JobSpec {
        bs: BlockSizes::Fixed(16384),
        dedupe: Some(workloads::Dedupe { ratio: 2.0, unit_bytes: 8192 }),
        ..job(200)
    };
    let summary = run(Arc::new(MemDevice::new(1 << 20).unwrap()), &j);
    assert_eq!((summary.key_block_bytes, summary.errors), (8192, 0));
}

#[test]
fn offsets_finer_than_the_dedupe_unit_are_refused_under_validation() {
    let j = JobSpec {
        bs: BlockSizes::Fixed(8192),
        align_bytes: Some(4096),
        dedupe: Some(workloads::Dedupe { ratio: 2.0, unit_bytes: 8192 }),
        ..job(10)
    };
    let err = run_job(&j, Arc::new(MemDevice::new(1 << 20).unwrap()), &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("a key block is a dedupe unit (8192 bytes)"), "{err}");
}

#[test]
fn a_dedupe_unit_smaller_than_the_targets_sector_is_refused_under_validation() {
    let j = JobSpec {
        bs: BlockSizes::Fixed(8192),
        dedupe: Some(workloads::Dedupe { ratio: 2.0, unit_bytes: 512 }),
        ..job(10)
    };
    let dev = Arc::new(MemDevice::with_sector("m", 1 << 20, 4096).unwrap());
    let err = run_job(&j, dev, &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("the target's sectors are 4096 bytes"), "{err}");
}
