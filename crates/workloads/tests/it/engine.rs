//! The engines stop exactly where asked, count what they did and reach the
//! device as requested.

use std::sync::Arc;
use std::time::Duration;

use device::{Device, FileDevice, FileOptions, MemDevice};
use workloads::{run_job, BlockSizes, Engine, JobSpec, Progress, Rw};

fn mem(size: u64) -> Arc<dyn Device> {
    Arc::new(MemDevice::new(size).unwrap())
}

fn file(dir: &tempfile::TempDir, size: u64) -> Arc<dyn Device> {
    let options = FileOptions { create_bytes: Some(size), ..Default::default() };
    Arc::new(FileDevice::open(dir.path().join("t"), &options).unwrap())
}

fn randrw(ios: u64) -> JobSpec {
    JobSpec { rw: Rw::RandRw, read_pct: 50, ios: Some(ios), ..JobSpec::default() }
}

#[test]
fn ios_limit_issues_exactly_that_many_requests() {
    let dev = mem(8 << 20);
    let result = run_job(&randrw(1001), dev.clone(), &Progress::default()).unwrap();
    assert_eq!(result.read.ios + result.write.ios, 1001);
    let s = dev.stats().snapshot();
    assert_eq!(s.reads + s.writes, 1001);
}

#[test]
fn ios_limit_is_exact_across_threads() {
    let job = JobSpec { threads: 3, ..randrw(1000) };
    let result = run_job(&job, mem(8 << 20), &Progress::default()).unwrap();
    assert_eq!(result.read.ios + result.write.ios, 1000);
}

#[test]
fn io_size_limit_stops_after_that_many_bytes() {
    let job =
        JobSpec { ios: None, io_bytes: Some(1 << 20), rw: Rw::Write, read_pct: 0, ..JobSpec::default() };
    let result = run_job(&job, mem(8 << 20), &Progress::default()).unwrap();
    assert_eq!(result.write.bytes, 1 << 20);
}

#[test]
fn without_an_end_condition_one_pass_over_the_region_is_made() {
    let job = JobSpec {
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        bs: BlockSizes::Fixed(65536),
        ..JobSpec::default()
    };
    let result = run_job(&job, mem(4 << 20), &Progress::default()).unwrap();
    assert_eq!(result.write.bytes, 4 << 20);
}

#[test]
fn flush_every_n_writes_flushes_the_device() {
    let job = JobSpec { rw: Rw::Write, read_pct: 0, flush_every: 10, ios: Some(100), ..JobSpec::default() };
    let dev = mem(8 << 20);
    let result = run_job(&job, dev.clone(), &Progress::default()).unwrap();
    assert_eq!(result.flushes, 10);
    assert_eq!(dev.stats().snapshot().flushes, 10);
}

#[test]
fn sequential_write_pass_writes_the_pattern_everywhere() {
    let job = JobSpec {
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        bs: BlockSizes::Fixed(4096),
        ..JobSpec::default()
    };
    let dev = Arc::new(MemDevice::new(1 << 20).unwrap());
    run_job(&job, dev.clone(), &Progress::default()).unwrap();
    let image = dev.to_vec();
    assert!(image.chunks(4096).all(|c| c.iter().any(|&b| b != 0)), "every block was written");
}

#[test]
fn uring_engine_issues_exactly_the_requested_ios() {
    let dir = tempfile::tempdir().unwrap();
    let dev = file(&dir, 8 << 20);
    let job = JobSpec { engine: Engine::Uring, iodepth: 8, ..randrw(777) };
    let result = run_job(&job, dev.clone(), &Progress::default()).unwrap();
    assert_eq!(result.read.ios + result.write.ios, 777);
    let s = dev.stats().snapshot();
    assert_eq!(s.reads + s.writes, 777);
}

#[test]
fn uring_engine_writes_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let dev = file(&dir, 1 << 20);
    let job = JobSpec {
        engine: Engine::Uring,
        iodepth: 4,
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        bs: BlockSizes::Fixed(8192),
        end_flush: true,
        ..JobSpec::default()
    };
    run_job(&job, dev, &Progress::default()).unwrap();
    let bytes = std::fs::read(dir.path().join("t")).unwrap();
    assert!(bytes.chunks(8192).all(|c| c.iter().any(|&b| b != 0)));
}

#[test]
fn uring_engine_flushes_every_n_writes() {
    let dir = tempfile::tempdir().unwrap();
    let dev = file(&dir, 4 << 20);
    let job = JobSpec {
        engine: Engine::Uring,
        iodepth: 4,
        rw: Rw::RandWrite,
        read_pct: 0,
        flush_every: 25,
        ..randrw(100)
    };
    let result = run_job(&job, dev.clone(), &Progress::default()).unwrap();
    assert_eq!(result.flushes, 4);
    assert_eq!(dev.stats().snapshot().flushes, 4);
}

#[test]
fn uring_engine_on_memory_is_a_clear_error() {
    let job = JobSpec { engine: Engine::Uring, iodepth: 4, ..randrw(10) };
    let err = run_job(&job, mem(1 << 20), &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("--engine: uring needs a file or block device"), "{err}");
}

#[test]
fn device_error_stops_the_job_with_that_error() {
    use device::{Fault, FaultyDevice, Op};
    let dev = Arc::new(FaultyDevice::new(mem(1 << 20), vec![Fault::Nth { op: Op::Write, n: 5 }]));
    let job = JobSpec { rw: Rw::Write, read_pct: 0, ..randrw(100) };
    let err = run_job(&job, dev, &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("injected on write #5"), "{err}");
}

#[test]
fn warm_up_requests_are_neither_measured_nor_counted_against_the_quota() {
    let job = JobSpec { ramp: Duration::from_millis(20), ..randrw(50) };
    let dev = mem(1 << 20);
    let result = run_job(&job, dev.clone(), &Progress::default()).unwrap();
    assert_eq!(result.read.ios + result.write.ios, 50);
    let s = dev.stats().snapshot();
    assert!(s.reads + s.writes >= 50);
}

#[test]
fn per_second_series_adds_up_to_the_totals() {
    let result = run_job(&randrw(2000), mem(8 << 20), &Progress::default()).unwrap();
    let ios: u64 = result.per_second.iter().map(|s| s.read_ios + s.write_ios).sum();
    assert_eq!(ios, 2000);
}

#[test]
fn uring_engine_with_batched_submission_issues_exactly_the_requested_ios() {
    let dir = tempfile::tempdir().unwrap();
    let dev = file(&dir, 8 << 20);
    let job = JobSpec { engine: Engine::Uring, iodepth: 8, submit_batch: 8, ..randrw(333) };
    let result = run_job(&job, dev, &Progress::default()).unwrap();
    assert_eq!(result.read.ios + result.write.ios, 333);
}

#[test]
fn stop_request_ends_a_time_based_job() {
    let progress = Progress::default();
    progress.request_stop();
    let job = JobSpec { runtime: Some(Duration::from_secs(3600)), ..JobSpec::default() };
    let result = run_job(&job, mem(1 << 20), &progress).unwrap();
    assert_eq!(result.read.ios + result.write.ios, 0);
}

#[test]
fn a_uring_job_on_a_poisoned_device_writes_nothing() {
    use std::sync::Arc;
    if !workloads::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = device::FileOptions { create_bytes: Some(1 << 20), ..Default::default() };
    let dev = Arc::new(device::FileDevice::open(dir.path().join("t"), &options).unwrap());
    device::Device::poison(dev.as_ref(), "an earlier fdatasync failed".into());
    let job = workloads::JobSpec {
        rw: workloads::Rw::RandWrite,
        read_pct: 0,
        engine: workloads::Engine::Uring,
        iodepth: 4,
        ios: Some(10),
        ..workloads::JobSpec::default()
    };
    let err = workloads::run_job(&job, dev.clone(), &workloads::Progress::default()).unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    assert_eq!(device::Device::stats(dev.as_ref()).snapshot().bytes_written, 0);
}

/// The device's 512-byte sectors after a sequential write of all of it
/// (64 KiB requests, so every request reuses the thread's buffer 16
/// times over), and how many distinct ones there are.
fn sectors_after_writing(
    dev: Arc<dyn Device>,
    engine: Engine,
    pattern: workloads::Pattern,
) -> (Vec<Vec<u8>>, usize) {
    written(dev, engine, pattern, None, 512)
}

/// The target's `unit`-byte units after a sequential write of it all,
/// and how many distinct ones there are.
fn written(
    dev: Arc<dyn Device>,
    engine: Engine,
    pattern: workloads::Pattern,
    dedupe: Option<workloads::Dedupe>,
    unit: usize,
) -> (Vec<Vec<u8>>, usize) {
    let size = dev.size_bytes();
    let job = JobSpec {
        dedupe,
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        bs: BlockSizes::Fixed(64 << 10),
        engine,
        pattern,
        iodepth: if engine == Engine::Uring { 4 } else { 1 },
        ..JobSpec::default()
    };
    run_job(&job, Arc::clone(&dev), &Progress::default()).unwrap();
    let mut data = vec![0u8; size as usize];
    dev.read_at(&mut data, 0).unwrap();
    let units: Vec<Vec<u8>> = data.chunks(unit).map(<[u8]>::to_vec).collect();
    let distinct = units.iter().collect::<std::collections::HashSet<_>>().len();
    (units, distinct)
}

/// Units written for each distinct one, after a sequential write of a
/// 16 MiB target under `--dedupe-ratio ratio` in 4 KiB units.
fn dedupe_ratio_written(engine: Engine, dev: Arc<dyn Device>, ratio: f64) -> f64 {
    let dedupe = workloads::Dedupe { ratio, unit_bytes: 4096 };
    let (units, distinct) = written(dev, engine, workloads::Pattern::Random, Some(dedupe), 4096);
    units.len() as f64 / distinct as f64
}

#[test]
fn a_dedupe_ratio_is_the_ratio_of_units_written_to_distinct_ones() {
    for ratio in [1.0, 2.0, 3.0, 5.0] {
        let got = dedupe_ratio_written(Engine::Sync, mem(16 << 20), ratio);
        assert!((got / ratio - 1.0).abs() < 0.05, "asked {ratio}:1, wrote {got:.3}:1");
    }
}

#[test]
fn a_dedupe_ratio_holds_through_io_uring() {
    if !workloads::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let got = dedupe_ratio_written(Engine::Uring, file(&dir, 16 << 20), 4.0);
    assert!((got / 4.0 - 1.0).abs() < 0.05, "asked 4:1, wrote {got:.3}:1");
}

#[test]
fn duplicates_are_the_same_units_in_every_thread() {
    // Two threads each writing half: the shared units are one set.
    let dev = mem(16 << 20);
    let job = JobSpec {
        rw: Rw::Write,
        read_pct: 0,
        seek_pct: 0,
        threads: 2,
        bs: BlockSizes::Fixed(64 << 10),
        dedupe: Some(workloads::Dedupe { ratio: 1e9, unit_bytes: 4096 }),
        ..JobSpec::default()
    };
    run_job(&job, Arc::clone(&dev), &Progress::default()).unwrap();
    let mut data = vec![0u8; 16 << 20];
    dev.read_at(&mut data, 0).unwrap();
    let distinct = data.chunks(4096).collect::<std::collections::HashSet<_>>().len();
    assert!(distinct <= workloads::DEDUPE_SETS, "{distinct} distinct units");
}

#[test]
fn random_data_differs_in_every_sector_written_so_deduplication_finds_nothing() {
    let (sectors, distinct) = sectors_after_writing(mem(1 << 20), Engine::Sync, workloads::Pattern::Random);
    assert_eq!(distinct, sectors.len());
}

#[test]
fn random_data_through_io_uring_differs_in_every_sector_written() {
    if !workloads::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (sectors, distinct) =
        sectors_after_writing(file(&dir, 1 << 20), Engine::Uring, workloads::Pattern::Random);
    assert_eq!(distinct, sectors.len());
}

#[test]
fn compressible_data_keeps_its_zeros_and_zeros_stay_zeros() {
    let (sectors, _) =
        sectors_after_writing(mem(1 << 20), Engine::Sync, workloads::Pattern::Compressible { pct: 25 });
    // Each 4 KiB: the first quarter random (two sectors), the rest zeros.
    for (i, s) in sectors.iter().enumerate() {
        assert_eq!(s.iter().all(|&b| b == 0), i % 8 >= 2, "sector {i}");
    }
    let (sectors, _) = sectors_after_writing(mem(1 << 20), Engine::Sync, workloads::Pattern::Zeros);
    assert!(sectors.iter().all(|s| s.iter().all(|&b| b == 0)));
}
