//! The crash enumerator's checker: silent on a stack that keeps the
//! promise, and each kind of broken promise reported with its class.

use std::sync::Arc;

use device::{Device, Fault, FaultyDevice};
use workloads::crash::{enumerate, BuildStack, CrashReport, CrashSpec, ReopenStack, Views, ViolationClass};

fn spec(block_bytes: u64, max_blocks: u32, sync_every: u64) -> CrashSpec {
    CrashSpec {
        transactions: 60,
        max_blocks,
        block_bytes,
        region_blocks: 64,
        sync_every,
        sampled_states: 300,
        seed: 7,
        only_state: None,
    }
}

/// The raw device itself as the stack, optionally behind faults.
fn plain(spec: &CrashSpec, faults: Vec<Fault>) -> CrashReport {
    let build = move |raw: Vec<Arc<dyn Device>>| -> Result<Arc<dyn Device>, String> {
        Ok(Arc::new(FaultyDevice::new(Arc::clone(&raw[0]), faults.clone())))
    };
    let reopen = |images: Vec<Arc<dyn Device>>| -> Result<Views, String> {
        Ok(vec![(String::new(), Arc::clone(&images[0]))])
    };
    let (build, reopen): (&BuildStack<'_>, &ReopenStack<'_>) = (&build, &reopen);
    enumerate(spec, &[spec.region_blocks * spec.block_bytes], build, reopen).unwrap()
}

#[test]
fn one_sector_transactions_flushed_each_time_keep_the_promise() {
    let report = plain(&spec(512, 1, 1), vec![]);
    assert_eq!(report.violations, 0, "{report:?}");
    assert!(report.states_checked > 300);
}

#[test]
fn multi_block_transactions_without_a_log_are_found_torn() {
    let report = plain(&spec(512, 4, 4), vec![]);
    assert!(report.torn_transactions > 0, "{report:?}");
}

#[test]
fn multi_sector_blocks_without_a_log_are_found_torn_by_a_torn_write() {
    let report = plain(&spec(4096, 1, 1), vec![]);
    assert!(report.torn_writes > 0, "{report:?}");
}

#[test]
fn a_lost_write_is_reported_as_lost() {
    let report = plain(&spec(512, 1, 1), vec![Fault::LoseWrite { n: 10 }]);
    assert!(report.lost > 0, "{report:?}");
    assert_eq!(report.first_violation.unwrap().class, ViolationClass::Lost);
}

#[test]
fn a_flipped_bit_is_reported_as_corrupt() {
    let report = plain(&spec(512, 1, 1), vec![Fault::FlipBit { n: 10, byte: 100 }]);
    assert_eq!(report.first_violation.unwrap().class, ViolationClass::Corrupt);
}

#[test]
fn a_misdirected_write_is_reported_as_corrupt() {
    let report = plain(&spec(512, 1, 1), vec![Fault::MisdirectWrite { n: 10, to_offset: 63 * 512 }]);
    let first = report.first_violation.unwrap();
    assert_eq!(first.class, ViolationClass::Corrupt, "{}", first.detail);
}

#[test]
fn the_same_seed_gives_the_same_report_and_one_state_can_be_rechecked() {
    let s = spec(512, 4, 4);
    let (a, b) = (plain(&s, vec![]), plain(&s, vec![]));
    assert_eq!(a.violations, b.violations);
    let first = a.first_violation.unwrap();
    let again = plain(&CrashSpec { only_state: Some(first.state), ..s }, vec![]);
    assert_eq!(again.states_checked, 1);
    assert_eq!(again.first_violation.unwrap().detail, first.detail);
}
