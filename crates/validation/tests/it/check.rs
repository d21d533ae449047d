//! Every class of fault, injected, is reported as that class.

use validation::{
    check_block, check_block_in, fill_block, fill_duplicate, BlockVerdict, Duplicates, Expect, FindingKind,
    RunContext,
};

const RUN: u64 = 77;

fn block(offset: u64, key: u8) -> Vec<u8> {
    let mut buf = vec![0; 4096];
    fill_block(&mut buf, 512, offset, key, 1, 1, RUN);
    buf
}

fn first_finding(v: BlockVerdict) -> FindingKind {
    match v {
        BlockVerdict::Bad { findings } => findings[0].kind,
        other => panic!("expected findings, got {other:?}"),
    }
}

#[test]
fn intact_block_is_ok() {
    assert_eq!(check_block(&block(8192, 4), 512, 8192, Expect::Key(4), RUN), BlockVerdict::Ok);
}

#[test]
fn lost_write_reads_back_the_older_key() {
    let v = check_block(&block(8192, 3), 512, 8192, Expect::Key(4), RUN);
    assert_eq!(
        first_finding(v),
        FindingKind::LostWrite { expected_key: 4, found_key: 3, found_run_id: None }
    );
}

#[test]
fn misdirected_write_shows_another_address() {
    let v = check_block(&block(0, 4), 512, 8192, Expect::Key(4), RUN);
    assert_eq!(first_finding(v), FindingKind::Misdirected { found_address: 0 });
}

#[test]
fn flipped_bit_is_corruption() {
    let mut buf = block(8192, 4);
    buf[700] ^= 0x10;
    let v = check_block(&buf, 512, 8192, Expect::Key(4), RUN);
    match v {
        BlockVerdict::Bad { findings } => {
            assert_eq!(findings.len(), 1);
            assert_eq!(findings[0].address, 8192 + 512);
            assert_eq!(findings[0].kind, FindingKind::Corrupt { reason: "checksum mismatch" });
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn zeros_where_data_was_written_are_reported() {
    let v = check_block(&[0; 4096], 512, 8192, Expect::Key(4), RUN);
    assert_eq!(first_finding(v), FindingKind::UnexpectedZeros);
}

#[test]
fn stamp_of_another_run_is_reported() {
    let mut buf = vec![0; 4096];
    fill_block(&mut buf, 512, 8192, 4, 1, 1, RUN + 1);
    let v = check_block(&buf, 512, 8192, Expect::Key(4), RUN);
    assert_eq!(first_finding(v), FindingKind::ForeignRun { found_run_id: RUN + 1 });
}

#[test]
fn torn_write_mixes_old_and_new_sectors() {
    let mut buf = block(8192, 5);
    buf[..1024].copy_from_slice(&block(8192, 4)[..1024]);
    let v = check_block(&buf, 512, 8192, Expect::OldOrNew { old: 4, new: 5 }, RUN);
    assert_eq!(v, BlockVerdict::Torn { new_sectors: 6, old_sectors: 2 });
}

#[test]
fn partly_lost_completed_write_is_torn() {
    let mut buf = block(8192, 5);
    buf[..512].copy_from_slice(&block(8192, 4)[..512]);
    let v = check_block(&buf, 512, 8192, Expect::OldOrNew { old: 4, new: 5 }, RUN);
    assert!(matches!(v, BlockVerdict::Torn { .. }));
}

#[test]
fn pending_write_may_be_wholly_old_or_wholly_new() {
    let pending = Expect::OldOrNew { old: 4, new: 5 };
    assert_eq!(check_block(&block(8192, 4), 512, 8192, pending, RUN), BlockVerdict::PendingOld);
    assert_eq!(check_block(&block(8192, 5), 512, 8192, pending, RUN), BlockVerdict::PendingNew);
}

#[test]
fn pending_first_write_accepts_zeros_or_new() {
    let pending = Expect::OldOrNew { old: 0, new: 1 };
    assert_eq!(check_block(&[0; 4096], 512, 8192, pending, RUN), BlockVerdict::PendingOld);
    assert_eq!(check_block(&block(8192, 1), 512, 8192, pending, RUN), BlockVerdict::PendingNew);
    assert!(matches!(check_block(&block(8192, 7), 512, 8192, pending, RUN), BlockVerdict::Bad { .. }));
}

#[test]
fn pending_chain_accepts_any_key_of_the_chain() {
    // Writes of keys 5, 6 and 7 in flight over key 4: the volatile cache
    // may have kept any of them.
    let chain = Expect::OldOrNew { old: 4, new: 7 };
    assert_eq!(check_block(&block(8192, 6), 512, 8192, chain, RUN), BlockVerdict::PendingNew);
}

#[test]
fn pending_chain_refuses_a_key_past_its_end() {
    let chain = Expect::OldOrNew { old: 4, new: 7 };
    let v = check_block(&block(8192, 8), 512, 8192, chain, RUN);
    assert_eq!(
        first_finding(v),
        FindingKind::LostWrite { expected_key: 7, found_key: 8, found_run_id: None }
    );
}

#[test]
fn pending_chain_wraps_past_255() {
    let chain = Expect::OldOrNew { old: 254, new: 2 };
    assert_eq!(check_block(&block(8192, 1), 512, 8192, chain, RUN), BlockVerdict::PendingNew);
}

#[test]
fn sectors_of_two_keys_of_a_chain_are_torn() {
    let mut buf = block(8192, 7);
    buf[..512].copy_from_slice(&block(8192, 6)[..512]);
    let v = check_block(&buf, 512, 8192, Expect::OldOrNew { old: 4, new: 7 }, RUN);
    assert!(matches!(v, BlockVerdict::Torn { .. }));
}

#[test]
fn pending_first_write_accepts_what_the_target_held_before_the_run() {
    let pending = Expect::OldOrNew { old: 0, new: 1 };
    let mut earlier_run = vec![0; 4096];
    fill_block(&mut earlier_run, 512, 8192, 3, 1, 1, RUN + 1);
    assert_eq!(check_block(&earlier_run, 512, 8192, pending, RUN), BlockVerdict::PendingOld);
    assert_eq!(check_block(&[0xa5; 4096], 512, 8192, pending, RUN), BlockVerdict::PendingOld);
}

/// After a crash: the journal knows writes up to id 99 (ahead from 100),
/// and the run began at time 1000.
const AFTER_A_CRASH: RunContext = RunContext {
    run_id: RUN,
    ahead_from: Some(100),
    started_ns: Some(1000),
    lost_ids: None,
    snapshot_lost: false,
    duplicates: None,
    journal_behind: false,
};

/// A block of this run's key `key` written by write `sequence`.
fn written(offset: u64, key: u8, sequence: u64) -> Vec<u8> {
    let mut buf = vec![0; 4096];
    fill_block(&mut buf, 512, offset, key, sequence, 5000, RUN);
    buf
}

#[test]
fn a_write_the_journal_never_recorded_is_ahead_not_lost() {
    let v = check_block_in(&written(8192, 5, 100), 512, 8192, Expect::Key(4), &AFTER_A_CRASH);
    assert_eq!(first_finding(v), FindingKind::Ahead { expected_key: 4, found_key: 5 });
}

#[test]
fn a_write_ahead_across_the_key_wrap_is_ahead() {
    // Key 1 follows 255: "greater" is by write id, not by key.
    let v = check_block_in(&written(8192, 1, 150), 512, 8192, Expect::Key(255), &AFTER_A_CRASH);
    assert_eq!(first_finding(v), FindingKind::Ahead { expected_key: 255, found_key: 1 });
}

#[test]
fn an_older_key_than_a_durable_record_promises_is_lost_though_the_journal_is_short() {
    let v = check_block_in(&written(8192, 3, 99), 512, 8192, Expect::Key(4), &AFTER_A_CRASH);
    assert_eq!(
        first_finding(v),
        FindingKind::LostWrite { expected_key: 4, found_key: 3, found_run_id: None }
    );
}

#[test]
fn a_write_past_a_pending_chain_the_journal_never_recorded_is_ahead() {
    let chain = Expect::OldOrNew { old: 4, new: 6 };
    let v = check_block_in(&written(8192, 7, 120), 512, 8192, chain, &AFTER_A_CRASH);
    assert_eq!(first_finding(v), FindingKind::Ahead { expected_key: 6, found_key: 7 });
}

#[test]
fn an_older_run_s_block_where_this_run_wrote_is_a_lost_write() {
    let mut older = vec![0; 4096];
    fill_block(&mut older, 512, 8192, 9, 1, 999, RUN + 1);
    let v = check_block_in(&older, 512, 8192, Expect::Key(4), &AFTER_A_CRASH);
    let lost = FindingKind::LostWrite { expected_key: 4, found_key: 9, found_run_id: Some(RUN + 1) };
    assert_eq!(first_finding(v), lost);
}

#[test]
fn a_later_run_s_block_is_from_another_run() {
    let mut later = vec![0; 4096];
    fill_block(&mut later, 512, 8192, 9, 1, 2000, RUN + 1);
    let v = check_block_in(&later, 512, 8192, Expect::Key(4), &AFTER_A_CRASH);
    assert_eq!(first_finding(v), FindingKind::ForeignRun { found_run_id: RUN + 1 });
}

#[test]
fn sectors_ahead_of_the_journal_do_not_hide_a_damaged_one() {
    let mut buf = written(8192, 5, 100);
    buf[3000] ^= 1;
    let v = check_block_in(&buf, 512, 8192, Expect::Key(4), &AFTER_A_CRASH);
    let class = v.class_finding().map(|f| (f.address, f.kind));
    assert_eq!(class, Some((8192 + 5 * 512, FindingKind::Corrupt { reason: "checksum mismatch" })));
}

/// A run with duplicates at 2:1 (4 KiB units, the key block).
fn deduped() -> RunContext {
    RunContext { run_id: RUN, duplicates: Duplicates::new(2.0), ..RunContext::default() }
}

/// The key block at `offset` as the run writes it at `key`: a shared
/// unit's copy or its own stamps, as the run's duplicates choose.
fn dedup_block(offset: u64, key: u8) -> Vec<u8> {
    let mut buf = vec![0; 4096];
    match deduped().duplicates.and_then(|d| d.set_of(offset, key, RUN)) {
        Some(set) => fill_duplicate(&mut buf, 512, set, key, RUN),
        None => fill_block(&mut buf, 512, offset, key, 1, 1, RUN),
    }
    buf
}

/// A block offset whose unit is a duplicate at `key` and at the key after.
fn duplicate_twice(key: u8) -> u64 {
    let d = deduped().duplicates.unwrap();
    (0..1000u64)
        .map(|i| i * 4096)
        .find(|&at| d.set_of(at, key, RUN).is_some() && d.set_of(at, key + 1, RUN).is_some())
        .expect("half the units are duplicates")
}

#[test]
fn a_duplicate_unit_at_its_key_checks_ok() {
    let at = duplicate_twice(4);
    let v = check_block_in(&dedup_block(at, 4), 512, at, Expect::Key(4), &deduped());
    assert_eq!(v, BlockVerdict::Ok);
}

#[test]
fn a_lost_rewrite_of_a_duplicate_unit_is_a_lost_write_of_the_key_before() {
    let at = duplicate_twice(4);
    let v = check_block_in(&dedup_block(at, 4), 512, at, Expect::Key(5), &deduped());
    assert_eq!(
        first_finding(v),
        FindingKind::LostWrite { expected_key: 5, found_key: 4, found_run_id: None }
    );
}

#[test]
fn a_duplicate_unit_where_its_own_stamps_belong_is_not_ok() {
    // At key 4 the unit is a copy: the block's own stamps of key 4 were
    // never written there.
    let at = duplicate_twice(4);
    let v = check_block_in(&block(at, 4), 512, at, Expect::Key(4), &deduped());
    assert!(matches!(v, BlockVerdict::Bad { .. }), "{v:?}");
}

#[test]
fn a_duplicate_units_sectors_swapped_are_out_of_place() {
    let at = duplicate_twice(4);
    let mut buf = dedup_block(at, 4);
    let (first, rest) = buf.split_at_mut(512);
    first.swap_with_slice(&mut rest[..512]);
    let v = check_block_in(&buf, 512, at, Expect::Key(4), &deduped());
    assert_eq!(first_finding(v), FindingKind::Corrupt { reason: "duplicate unit's sector out of place" });
}

#[test]
fn a_pending_rewrite_of_a_duplicate_unit_may_hold_either_version_or_a_tear() {
    let at = duplicate_twice(4);
    let pending = Expect::OldOrNew { old: 4, new: 5 };
    let (old, new) = (dedup_block(at, 4), dedup_block(at, 5));
    assert_eq!(check_block_in(&old, 512, at, pending, &deduped()), BlockVerdict::PendingOld);
    assert_eq!(check_block_in(&new, 512, at, pending, &deduped()), BlockVerdict::PendingNew);
    let mut torn = old.clone();
    torn[2048..].copy_from_slice(&new[2048..]);
    let v = check_block_in(&torn, 512, at, pending, &deduped());
    assert_eq!(v, BlockVerdict::Torn { new_sectors: 4, old_sectors: 4 });
}

#[test]
fn a_stale_duplicate_behind_an_async_journal_is_unverifiable() {
    let at = duplicate_twice(4);
    let behind = RunContext { journal_behind: true, ..deduped() };
    let v = check_block_in(&dedup_block(at, 4), 512, at, Expect::Key(5), &behind);
    assert_eq!(first_finding(v), FindingKind::Unverifiable { expected_key: 5, found_key: 4 });
}

#[test]
fn another_runs_duplicate_is_from_another_run_whatever_its_time() {
    let at = duplicate_twice(4);
    let mut buf = vec![0; 4096];
    fill_duplicate(&mut buf, 512, 3, 4, RUN + 1);
    let crashed = RunContext { started_ns: Some(1000), ..deduped() };
    let v = check_block_in(&buf, 512, at, Expect::Key(4), &crashed);
    assert_eq!(first_finding(v), FindingKind::ForeignRun { found_run_id: RUN + 1 });
}

#[test]
fn a_copy_no_older_key_of_the_block_made_is_corrupt_not_lost() {
    // Every unit a copy; find a block and a set and version that no key
    // of it makes (about one block in five has one).
    let run = RunContext { run_id: RUN, duplicates: Duplicates::new(1e9), ..RunContext::default() };
    let d = run.duplicates.unwrap();
    let missing = |at: u64| {
        let made: Vec<(u8, u8)> =
            (1..=255u8).filter_map(|k| d.set_of(at, k, RUN).map(|s| (s, Duplicates::version(k)))).collect();
        (1..=validation::DUPLICATE_SETS)
            .flat_map(|s| [1u8, 2, 3].map(|k| (s, k)))
            .find(|&(s, k)| !made.contains(&(s, Duplicates::version(k))))
            .map(|found| (at, found))
    };
    let (at, (set, key)) = (0..1000u64).find_map(|i| missing(i * 4096)).expect("some block misses one");
    let mut buf = vec![0; 4096];
    fill_duplicate(&mut buf, 512, set, key, RUN);
    let v = check_block_in(&buf, 512, at, Expect::Key(5), &run);
    assert_eq!(
        first_finding(v),
        FindingKind::Corrupt { reason: "a duplicate unit no write of this block made" }
    );
}

/// A copy can be the same bytes at two keys of one pending chain (the
/// same shared unit at the same version, three keys apart): a tear
/// between such a copy and another write of the chain is a tear, each
/// sector counted once (it was counted as old and new both, and the
/// block came out "bad" with no bad sector: corrupt, in a crash test
/// under load one run in twelve).
#[test]
fn a_tear_through_a_copy_that_is_both_the_old_and_a_new_version_is_a_tear() {
    let d = deduped().duplicates.unwrap();
    let same = |at: u64, k: u8| d.set_of(at, k, RUN).is_some_and(|s| d.set_of(at, k + 3, RUN) == Some(s));
    let (at, key) = (0..4000u64)
        .map(|i| i * 4096)
        .find_map(|at| {
            (1..200u8).find(|&k| same(at, k) && d.set_of(at, k + 1, RUN).is_none()).map(|k| (at, k))
        })
        .expect("some block's unit is one copy three keys apart");
    let pending = Expect::OldOrNew { old: key, new: key + 3 };
    // The write of key + 1 (own stamps) torn over the copy of `key`.
    let mut torn = dedup_block(at, key);
    torn[..512].copy_from_slice(&dedup_block(at, key + 1)[..512]);
    let v = check_block_in(&torn, 512, at, pending, &deduped());
    assert_eq!(v, BlockVerdict::Torn { new_sectors: 8, old_sectors: 0 });
}
