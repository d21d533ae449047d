//! Damage is not a tail: a journal whose durable records (a mark further
//! on says they were durable) no longer read is damaged, replay goes on
//! past the damage and says what it may have cost; without such a mark
//! the same bytes are a torn tail, as a crash leaves. Also the header's
//! bounds, each field on its own.

use validation::journal::{
    append_after, append_before, append_mark, encode_start_carrying, replay, DamageKind, JournalError,
    JournalHeader, PendingWrite,
};

const BLOCKS: u64 = 16;
/// Bytes of one slot, and where a slot's records start (header and a
/// 16-block snapshot, padded).
const SLOT: usize = 64 << 10;
const RECORDS_AT: usize = 8192;

fn header() -> JournalHeader {
    crate::common::header(BLOCKS)
}

/// A journal device: a start (block 3 at key 9) and `records` in slot 0,
/// the rest zeros.
fn device(records: &[u8]) -> Vec<u8> {
    let mut keys = vec![0u8; BLOCKS as usize];
    keys[3] = 9;
    let mut d = encode_start_carrying(&header(), &keys, &[]);
    assert_eq!(d.len(), RECORDS_AT);
    d.extend(records);
    d.resize(2 * SLOT, 0);
    d
}

/// Records as a group journal writes them: write 1 (block 3 to key 10)
/// and write 2 (block 5 to key 1) complete in one commit, then, after its
/// flush, a commit that marks it durable and completes write 3 (block 6
/// to key 1). Returns the records and where write 2's `before` is.
fn two_commits() -> (Vec<u8>, usize) {
    let mut r = Vec::new();
    append_before(&mut r, 0, 1, &[(3, 10)]);
    let second = r.len();
    append_before(&mut r, 0, 2, &[(5, 1)]);
    append_after(&mut r, 0, 1);
    append_after(&mut r, 0, 2);
    let durable = r.len() as u64;
    append_mark(&mut r, 0, durable);
    append_before(&mut r, 0, 3, &[(6, 1)]);
    append_after(&mut r, 0, 3);
    (r, second)
}

#[test]
fn a_durable_record_that_no_longer_reads_is_damage_and_replay_goes_past_it() {
    let (records, second) = two_commits();
    let mut d = device(&records);
    d[RECORDS_AT + second + 20] ^= 0x10;
    let r = replay(&d).unwrap();
    assert_eq!(r.damaged_ranges, 1);
    assert_eq!((r.damage[0].at, r.damage[0].kind), ((RECORDS_AT + second) as u64, DamageKind::Records));
    assert_eq!(r.torn_tail, None);
    // Write 3, after the damage, is replayed; write 2's `before` is lost.
    assert_eq!((r.keys[3], r.keys[6]), (10, 1));
    assert_eq!(r.keys[5], 0);
    assert_eq!(r.lost_ids, Some((2, 3)));
}

#[test]
fn the_same_bytes_with_no_mark_after_them_are_a_torn_tail() {
    // Only the first commit, no mark after it: nothing says it was
    // durable (a crash may have kept some of its sectors and not others).
    let (full, second) = two_commits();
    let unmarked = &full[..second + 33 + 2 * 24];
    let mut d = device(unmarked);
    d[RECORDS_AT + second + 20] ^= 0x10;
    let r = replay(&d).unwrap();
    assert_eq!(r.damaged_ranges, 0);
    assert_eq!(r.torn_tail.map(|t| t.0), Some((RECORDS_AT + second) as u64));
    assert_eq!(r.lost_ids, None);
}

#[test]
fn a_block_named_after_the_damage_is_settled_and_one_named_before_it_is_not() {
    let (records, second) = two_commits();
    let mut d = device(&records);
    d[RECORDS_AT + second + 20] ^= 0x10;
    let r = replay(&d).unwrap();
    assert_eq!(r.settled, vec![6]);
    assert!(!r.unsettled(6));
    assert!(r.unsettled(3) && r.unsettled(5));
}

#[test]
fn a_completion_lost_to_damage_leaves_its_write_pending() {
    let (records, _) = two_commits();
    // Write 1's `after` is the third record (after two `before`s of 33).
    let after_1 = 66;
    let mut d = device(&records);
    d[RECORDS_AT + after_1 + 16] ^= 1;
    let r = replay(&d).unwrap();
    assert_eq!(r.damaged_ranges, 1);
    assert_eq!(r.pending, vec![PendingWrite { write_id: 1, blocks: vec![(3, 9, 10)] }]);
    // No `before` record was lost: the next one has the id after the last.
    assert_eq!(r.lost_ids, None);
}

#[test]
fn a_later_write_completed_after_the_damage_ends_an_earlier_one_left_pending() {
    let (mut records, _) = two_commits();
    append_before(&mut records, 0, 4, &[(3, 11)]);
    append_after(&mut records, 0, 4);
    let mut d = device(&records);
    d[RECORDS_AT + 66 + 16] ^= 1; // write 1's `after`
    let r = replay(&d).unwrap();
    assert_eq!(r.keys[3], 11);
    assert!(r.pending.is_empty(), "{:?}", r.pending);
}

#[test]
fn zeroed_durable_records_are_damage_not_a_clean_end() {
    let (records, second) = two_commits();
    let mut d = device(&records);
    d[RECORDS_AT + second..RECORDS_AT + second + 33].fill(0);
    let r = replay(&d).unwrap();
    assert_eq!(r.damaged_ranges, 1);
    assert_eq!(r.keys[6], 1);
}

#[test]
fn a_mark_that_claims_bytes_past_itself_is_no_record() {
    let mut records = Vec::new();
    append_before(&mut records, 0, 1, &[(3, 10)]);
    append_mark(&mut records, 0, 1 << 20);
    let r = replay(&device(&records)).unwrap();
    assert_eq!(r.records, 1);
    assert!(r.torn_tail.is_some());
}

#[test]
fn a_damaged_snapshot_followed_by_records_is_damage_with_every_key_suspect() {
    let (records, _) = two_commits();
    let mut d = device(&records);
    d[4096 + 3] ^= 0x20; // block 3's key
    let r = replay(&d).unwrap();
    assert!(r.snapshot_damaged);
    assert_eq!(r.damage[0].kind, DamageKind::Snapshot);
    assert_eq!((r.keys[3], r.keys[6]), (10, 1));
    assert!(r.unsettled(7));
}

#[test]
fn a_damaged_snapshot_with_no_record_after_it_is_an_error_naming_it() {
    let mut d = device(&[]);
    d[4096 + 3] ^= 0x20;
    assert_eq!(replay(&d).unwrap_err(), JournalError::Snapshot(4096));
}

/// Slot 0 a generation-0 journal (write 1 done); slot 1 a compacted
/// generation-1 start carrying nothing, then `after` records of its own.
fn compacted(records_after: bool) -> Vec<u8> {
    let mut old = Vec::new();
    append_before(&mut old, 0, 1, &[(3, 10)]);
    append_after(&mut old, 0, 1);
    let mut d = device(&old);
    let mut keys = vec![0u8; BLOCKS as usize];
    keys[3] = 10;
    let h = JournalHeader { generation: 1, write_ids_end: 2, ..header() };
    let mut new = encode_start_carrying(&h, &keys, &[]);
    if records_after {
        append_before(&mut new, 1, 2, &[(4, 1)]);
        append_after(&mut new, 1, 2);
    }
    d[SLOT..SLOT + new.len()].copy_from_slice(&new);
    d
}

#[test]
fn a_torn_compaction_falls_back_to_the_older_slot_undamaged() {
    let mut d = compacted(false);
    d[SLOT + 4096 + 3] ^= 1;
    let r = replay(&d).unwrap();
    assert_eq!((r.header.generation, r.keys[3], r.damaged_ranges), (0, 10, 0));
}

#[test]
fn a_damaged_newer_header_whose_records_follow_it_is_damage() {
    let mut d = compacted(true);
    d[SLOT + 20] ^= 1; // the run id, under the header's checksum
    let r = replay(&d).unwrap();
    assert_eq!(r.header.generation, 0);
    assert_eq!(r.damage[0].kind, DamageKind::NewerStart);
    assert_eq!(r.lost_ids, Some((2, u64::MAX)));
}

#[test]
fn a_damaged_newer_header_with_no_records_is_a_torn_compaction() {
    let mut d = compacted(false);
    d[SLOT + 20] ^= 1;
    let r = replay(&d).unwrap();
    assert_eq!((r.header.generation, r.damaged_ranges), (0, 0));
}

#[test]
fn a_damaged_slot_is_named_rather_than_the_empty_one() {
    let mut d = device(&[]);
    d[20] ^= 1;
    assert_eq!(replay(&d).unwrap_err(), JournalError::Header(0));
}

/// The header of `device(&[])` with the field at `at` set to `value`
/// (little-endian, `len` bytes) and its checksum made right again.
fn with_field(at: usize, len: usize, value: u64) -> Vec<u8> {
    let mut d = device(&[]);
    d[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
    d[12..16].fill(0);
    let crc = crc32c::crc32c(&d[..4096]);
    d[12..16].copy_from_slice(&crc.to_le_bytes());
    d
}

/// The field an out-of-bounds header names.
fn refused_field(at: usize, len: usize, value: u64) -> &'static str {
    match replay(&with_field(at, len, value)) {
        Err(JournalError::Field { field, offset, .. }) => {
            assert_eq!(offset, at, "{field}");
            field
        }
        other => panic!("field at {at} = {value}: {other:?}"),
    }
}

#[test]
fn a_key_block_of_zero_bytes_is_refused_by_name() {
    assert_eq!(refused_field(32, 8, 0), "key_block_bytes");
}

#[test]
fn a_key_block_of_2_to_the_63_bytes_is_refused_by_name() {
    assert_eq!(refused_field(32, 8, 1 << 63), "key_block_bytes");
}

#[test]
fn a_key_block_smaller_than_a_sector_is_refused_by_name() {
    assert_eq!(refused_field(32, 8, 1), "key_block_bytes");
}

#[test]
fn a_key_block_that_is_no_whole_number_of_sectors_is_refused_by_name() {
    assert_eq!(refused_field(32, 8, 4096 + 512 + 1), "key_block_bytes");
}

#[test]
fn a_sector_size_that_is_no_power_of_two_or_out_of_range_is_refused_by_name() {
    for bad in [0, 3, 256, 1000, 128 << 10] {
        assert_eq!(refused_field(48, 4, bad), "sector_bytes", "{bad}");
    }
}

#[test]
fn a_region_of_no_blocks_is_refused_by_name() {
    assert_eq!(refused_field(40, 8, 0), "blocks");
}

#[test]
fn a_region_that_ends_past_2_to_the_64_is_refused_by_name() {
    assert_eq!(refused_field(24, 8, u64::MAX - 511), "region_start");
    assert_eq!(refused_field(40, 8, u64::MAX / 4096 + 1), "blocks");
}

#[test]
fn a_region_start_off_a_sector_boundary_is_refused_by_name() {
    assert_eq!(refused_field(24, 8, 100), "region_start");
}

#[test]
fn a_target_name_longer_than_its_field_is_refused_by_name() {
    assert_eq!(refused_field(52, 2, 300), "target_name_length");
}

#[test]
fn an_unknown_mode_is_refused_by_name() {
    assert_eq!(refused_field(310, 1, 9), "mode");
}

#[test]
fn a_duplicate_ratio_below_1_or_not_a_number_is_refused_by_name() {
    for bad in [0.5f64, f64::NAN, f64::INFINITY, -2.0] {
        assert_eq!(refused_field(344, 8, bad.to_bits()), "duplicate_ratio", "{bad}");
    }
}

#[test]
fn a_duplicate_ratio_is_read_back() {
    let d = with_field(344, 8, 3.0f64.to_bits());
    assert_eq!(replay(&d).unwrap().header.duplicates.map(|d| d.ratio()), Some(3.0));
}

#[test]
fn the_largest_key_block_is_accepted() {
    let d = with_field(32, 8, 64 << 20);
    assert_eq!(replay(&d).unwrap().header.key_block_bytes, 64 << 20);
}
