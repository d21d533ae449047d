//! Validation inside a job: a clean run finds nothing, and each injected
//! fault is reported with its class.

use std::sync::Arc;

use device::{Device, Fault, FaultyDevice, MemDevice};
use workloads::{run_job, BlockSizes, JobSpec, Progress, Rw, ValidateSpec, ValidationSummary};

const VALIDATE: ValidateSpec =
    ValidateSpec { preread: true, reread: false, max_errors: 50, run_id: 4242, journal: None };

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
