//! The file system's crash promise, state by state: `sync` leaves only
//! what preen repairs and never loses an fsync'd file; `async` is shown
//! to leave worse (the checker catches what matters).

use ffs::Policy;
use workloads::fscrash::{enumerate, FsCrashSpec};

fn spec(policy: Policy, seed: u64) -> FsCrashSpec {
    FsCrashSpec {
        policy,
        operations: 160,
        fsync_every: 8,
        sampled_states: 150,
        seed,
        only_state: None,
        device_bytes: 8 << 20,
        cache_bytes: 256 << 10,
    }
}

#[test]
fn every_crash_state_of_sync_is_repaired_by_preen_and_keeps_fsynced_files() {
    for seed in [1, 2] {
        let report = enumerate(&spec(Policy::Sync, seed)).unwrap();
        assert!(report.states_checked > 150, "{report:?}");
        assert_eq!(report.violations, 0, "seed {seed}: {:?}", report.first_violation);
    }
}

#[test]
fn async_crash_states_hold_damage_preen_does_not_repair() {
    let report = enumerate(&spec(Policy::Async, 1)).unwrap();
    assert!(report.damage_left > 0, "{report:?}");
}

#[test]
fn a_state_past_the_last_is_refused() {
    let mut s = spec(Policy::Sync, 1);
    s.only_state = Some(1_000_000);
    assert!(enumerate(&s).is_err());
}

#[test]
fn every_crash_state_of_log_is_clean_after_replay_and_keeps_fsynced_files() {
    for seed in [1, 2] {
        let report = enumerate(&spec(Policy::Log, seed)).unwrap();
        assert!(report.states_checked > 150, "{report:?}");
        assert_eq!(report.violations, 0, "seed {seed}: {:?}", report.first_violation);
    }
}
