//! Replaying the validation journal against a model of the writes it
//! recorded.

use proptest::prelude::*;
use validation::journal::{
    encode_after, encode_before, encode_start, encode_start_carrying, replay, JournalError, JournalHeader,
    JournalMode, PendingWrite,
};
use validation::KeyMap;

const BLOCKS: u64 = 16;

fn header() -> JournalHeader {
    crate::common::header(BLOCKS)
}

fn start() -> Vec<u8> {
    let keys = KeyMap::new(BLOCKS, 4096);
    keys.set(3, 9);
    encode_start(&header(), &keys)
}

/// Bytes of one slot of the test journals.
const SLOT: usize = 64 << 10;

/// A journal device: `slot0` in the first slot, the second slot zeros.
fn dev(slot0: &[u8]) -> Vec<u8> {
    let mut d = slot0.to_vec();
    d.resize(2 * SLOT, 0);
    d
}

#[test]
fn header_and_snapshot_come_back() {
    let r = replay(&dev(&start())).unwrap();
    assert_eq!(r.header, header());
    assert_eq!(r.keys[3], 9);
    assert!(r.pending.is_empty() && r.torn_tail.is_none());
}

#[test]
fn completed_write_updates_the_keys() {
    let mut j = start();
    j.extend(encode_before(0, 1, &[(3, 10), (4, 1)]));
    j.extend(encode_after(0, 1));
    let r = replay(&dev(&j)).unwrap();
    assert_eq!((r.keys[3], r.keys[4]), (10, 1));
    assert!(r.pending.is_empty());
}

#[test]
fn write_without_after_record_is_pending_old_or_new() {
    let mut j = start();
    j.extend(encode_before(0, 1, &[(3, 10)]));
    let r = replay(&dev(&j)).unwrap();
    assert_eq!(r.pending, vec![PendingWrite { write_id: 1, blocks: vec![(3, 9, 10)] }]);
    assert_eq!(r.keys[3], 9);
}

#[test]
fn a_later_write_to_a_block_leaves_the_earlier_one_pending() {
    // After records are written lazily: without one, nothing says the
    // earlier write reached stable storage, so both stay pending from the
    // last completed key.
    let mut j = start();
    j.extend(encode_before(0, 1, &[(3, 10)]));
    j.extend(encode_before(0, 2, &[(3, 11)]));
    let r = replay(&dev(&j)).unwrap();
    assert_eq!(
        r.pending,
        vec![
            PendingWrite { write_id: 1, blocks: vec![(3, 9, 10)] },
            PendingWrite { write_id: 2, blocks: vec![(3, 9, 11)] }
        ]
    );
}

#[test]
fn version_2_journal_is_read() {
    let mut j = start();
    j[8..12].copy_from_slice(&2u32.to_le_bytes());
    j[12..16].fill(0);
    let crc = crc32c::crc32c(&j[..4096]);
    j[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(replay(&dev(&j)).unwrap().keys[3], 9);
}

#[test]
fn a_version_5_journal_is_read_without_duplicates_whatever_its_reserved_bytes() {
    let mut j = start();
    j[8..12].copy_from_slice(&5u32.to_le_bytes());
    j[344..352].copy_from_slice(&2.0f64.to_bits().to_le_bytes());
    j[12..16].fill(0);
    let crc = crc32c::crc32c(&j[..4096]);
    j[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(replay(&dev(&j)).unwrap().header.duplicates, None);
}

#[test]
fn truncated_record_ends_the_journal_and_says_where() {
    let mut j = start();
    j.extend(encode_before(0, 1, &[(3, 10)]));
    j.extend(encode_after(0, 1));
    let cut = j.len();
    let second = encode_before(0, 2, &[(5, 1)]);
    j.extend(&second[..second.len() - 3]);
    let r = replay(&dev(&j)).unwrap();
    assert_eq!(r.torn_tail.map(|t| t.0), Some(cut as u64));
    assert_eq!((r.keys[3], r.keys[5]), (10, 0));
    assert!(r.pending.is_empty());
}

#[test]
fn corrupted_record_ends_the_journal() {
    let mut j = start();
    let at = j.len();
    j.extend(encode_before(0, 1, &[(3, 10)]));
    j.extend(encode_after(0, 1));
    j[at + 20] ^= 0x40;
    let r = replay(&dev(&j)).unwrap();
    assert_eq!(r.records, 0);
    assert_eq!(r.keys[3], 9);
    assert!(r.torn_tail.is_some());
}

#[test]
fn zero_padding_after_the_last_record_is_a_clean_end() {
    let mut j = start();
    j.extend(encode_before(0, 1, &[(3, 10)]));
    j.extend([0; 100]);
    assert!(replay(&dev(&j)).unwrap().torn_tail.is_none());
}

/// Slot 0 reused by generation 2: its records, as the writer leaves them
/// (zeros to the end of the sector they end in), over what generation 0
/// wrote there before (many records, never zeroed again). `ours` is the
/// stream of generation-2 records.
fn reused_slot(ours: &[u8]) -> Vec<u8> {
    let h = JournalHeader { generation: 2, ..header() };
    let mut old = Vec::new();
    for id in 0..200 {
        old.extend(encode_before(0, id, &[(id % BLOCKS, 1 + (id % 200) as u8)]));
        old.extend(encode_after(0, id));
    }
    let mut j = encode_start_carrying(&h, &[0; BLOCKS as usize], &[]);
    let records_at = j.len();
    j.extend(&old);
    let padded = ours.len().next_multiple_of(512);
    j[records_at..records_at + padded].fill(0);
    j[records_at..records_at + ours.len()].copy_from_slice(ours);
    j
}

/// Generation-2 records: a write to block 3 done, one to block 5 pending,
/// then `more` writes done, so the stream can end anywhere in a sector.
fn generation_2_records(more: u64) -> Vec<u8> {
    let mut ours = encode_before(2, 1000, &[(3, 10)]);
    ours.extend(encode_after(2, 1000));
    ours.extend(encode_before(2, 1001, &[(5, 1)]));
    for id in 1002..1002 + more {
        ours.extend(encode_before(2, id, &[(7, 1 + (id % 200) as u8)]));
        ours.extend(encode_after(2, id));
    }
    ours
}

#[test]
fn records_ending_in_a_reused_slot_end_cleanly_before_an_older_generation() {
    for more in 0..40 {
        let ours = generation_2_records(more);
        let r = replay(&dev(&reused_slot(&ours))).unwrap();
        assert_eq!(r.torn_tail, None, "{} bytes of records", ours.len());
        assert_eq!((r.records, r.keys[3], r.pending.len()), (3 + 2 * more, 10, 1));
    }
}

#[test]
fn records_ending_on_a_sector_boundary_before_an_older_record_end_cleanly() {
    // Record lengths are multiples of 3: 1536 bytes is the first sector
    // boundary a stream can end on. What follows is generation 0's bytes,
    // mid-record, or (below) a whole generation-0 record.
    let mut ours = generation_2_records(6);
    for id in 0..46 {
        ours.extend(encode_after(2, 3000 + id));
    }
    assert_eq!(ours.len(), 1536);
    let mut j = reused_slot(&ours);
    let r = replay(&dev(&j)).unwrap();
    assert_eq!((r.torn_tail, r.records), (None, 3 + 12 + 46));
    let end = 8192 + ours.len();
    let old = encode_before(0, 7, &[(1, 1)]);
    j[end..end + old.len()].copy_from_slice(&old);
    assert_eq!(replay(&dev(&j)).unwrap().torn_tail, None);
}

#[test]
fn a_cut_record_in_a_reused_slot_is_still_reported() {
    let mut ours = generation_2_records(3);
    let cut = ours.len();
    let torn = encode_before(2, 5000, &[(9, 1)]);
    ours.extend(&torn[..torn.len() - 2]);
    let r = replay(&dev(&reused_slot(&ours))).unwrap();
    assert_eq!(r.torn_tail.map(|t| t.0), Some(8192 + cut as u64));
}

#[test]
fn damaged_header_is_refused() {
    let mut j = start();
    j[20] ^= 1;
    assert_eq!(replay(&dev(&j)).unwrap_err(), JournalError::Header(0));
    assert_eq!(replay(b"something else entirely").unwrap_err(), JournalError::NotAJournal);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Cut the journal after any record: every write whose before record
    /// survived is either completed (its after record survived) or pending
    /// from its blocks' last completed keys to its new keys, in write
    /// order; nothing else changed. As in a real run, writes to one block
    /// complete in order: after one without an after record, no later
    /// write to its blocks has one.
    #[test]
    fn replay_of_any_prefix_matches_the_model(
        writes in prop::collection::vec((prop::collection::btree_set(0..BLOCKS, 1..4), any::<bool>()), 1..20),
        cut in any::<prop::sample::Index>(),
    ) {
        // Encode: each write's before record, then its after record if done.
        let mut records: Vec<(usize, bool, Vec<u8>)> = Vec::new();
        let mut keys = vec![0u8; BLOCKS as usize];
        keys[3] = 9;
        let mut new_keys = Vec::new();
        let mut unfinished = std::collections::HashSet::new();
        for (id, (blocks, done)) in writes.iter().enumerate() {
            let done = *done && blocks.iter().all(|b| !unfinished.contains(b));
            if !done {
                unfinished.extend(blocks.iter().copied());
            }
            let entries: Vec<(u64, u8)> = blocks.iter().map(|b| {
                let k = validation::next_key(keys[*b as usize]);
                keys[*b as usize] = k;
                (*b, k)
            }).collect();
            records.push((id, true, encode_before(0, id as u64, &entries)));
            if done {
                records.push((id, false, encode_after(0, id as u64)));
            }
            new_keys.push(entries);
        }
        let kept = cut.index(records.len() + 1);
        let mut j = start();
        for r in &records[..kept] {
            j.extend(&r.2);
        }
        let replayed = replay(&dev(&j)).unwrap();
        prop_assert!(replayed.torn_tail.is_none());
        // The model: apply every write whose before record was kept.
        let mut expected = vec![0u8; BLOCKS as usize];
        expected[3] = 9;
        for (id, _, _) in records[..kept].iter().filter(|r| r.1) {
            for (b, k) in &new_keys[*id] {
                expected[*b as usize] = *k;
            }
        }
        let mut finished = replayed.keys.to_vec();
        for p in &replayed.pending {
            for (b, old, new) in &p.blocks {
                prop_assert_eq!(replayed.keys[*b as usize], *old);
                finished[*b as usize] = *new;
            }
        }
        prop_assert_eq!(finished, expected);
        // A write is pending only if its after record was cut off.
        for p in &replayed.pending {
            let after_kept = records[..kept].iter().any(|r| r.0 == p.write_id as usize && !r.1);
            prop_assert!(!after_kept, "write {} completed but listed as pending", p.write_id);
        }
    }
}

#[test]
fn journal_mode_comes_back_from_the_header() {
    for mode in [JournalMode::Sync, JournalMode::Async, JournalMode::Group] {
        let h = JournalHeader { mode, ..header() };
        let j = encode_start(&h, &KeyMap::new(BLOCKS, 4096));
        assert_eq!(replay(&dev(&j)).unwrap().header.mode, mode);
    }
}

#[test]
fn version_1_journal_is_refused_naming_its_version() {
    let mut j = start();
    j[8..12].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(replay(&dev(&j)).unwrap_err(), JournalError::Version(1));
}

#[test]
fn start_bytes_is_where_records_begin() {
    assert_eq!(validation::journal::start_bytes(BLOCKS), start().len() as u64);
    assert_eq!(validation::journal::start_bytes(4097), 4096 + 8192);
}

/// A device with a gen-0 journal in slot 0 (block 3 at key 10 done) and a
/// compacted gen-1 start in slot 1 carrying write 2 (block 5) in flight.
fn compacted() -> Vec<u8> {
    let mut old = start();
    old.extend(encode_before(0, 1, &[(3, 10)]));
    old.extend(encode_after(0, 1));
    old.extend(encode_before(0, 2, &[(5, 1)]));
    let mut d = dev(&old);
    let mut keys = vec![0u8; BLOCKS as usize];
    keys[3] = 10;
    let h = JournalHeader { generation: 1, ..header() };
    let new = encode_start_carrying(&h, &keys, &encode_before(1, 2, &[(5, 1)]));
    d[SLOT..SLOT + new.len()].copy_from_slice(&new);
    d
}

#[test]
fn the_newer_generation_holds_the_journal_with_its_carried_writes() {
    let r = replay(&compacted()).unwrap();
    assert_eq!(r.header.generation, 1);
    assert_eq!(r.keys[3], 10);
    assert_eq!(r.pending, vec![PendingWrite { write_id: 2, blocks: vec![(5, 0, 1)] }]);
}

#[test]
fn a_damaged_compacted_start_falls_back_to_the_older_slot() {
    let mut d = compacted();
    d[SLOT + 4096 + 3] ^= 1; // a snapshot byte of the new start
    let r = replay(&d).unwrap();
    assert_eq!((r.header.generation, r.keys[3], r.pending.len()), (0, 10, 1));
}

#[test]
fn records_of_an_older_generation_end_the_journal() {
    let h = JournalHeader { generation: 1, ..header() };
    let mut j = encode_start_carrying(&h, &[0; BLOCKS as usize], &[]);
    j.extend(encode_before(0, 1, &[(3, 10)]));
    let r = replay(&dev(&j)).unwrap();
    assert_eq!(r.records, 0);
    assert!(r.torn_tail.is_some());
}

/// A start produced in pieces of any size is the start produced at once:
/// the pieces cross the end of the keys, the padding and the carried
/// records, and the checksum is the same.
#[test]
fn a_start_in_pieces_is_the_start_in_one_buffer() {
    let keys: Vec<u8> = (0..5000u32).map(|b| (b % 251) as u8).collect();
    let h = JournalHeader { blocks: keys.len() as u64, ..header() };
    let carried = encode_before(0, 4, &[(7, 2), (4999, 3)]);
    let whole = encode_start_carrying(&h, &keys, &carried);
    for piece in [1, 7, 4096, 4097, 1 << 20] {
        let mut stream = validation::journal::StartStream::new(&h, &keys, &carried);
        let mut body = Vec::new();
        let mut buf = vec![0xee; piece];
        loop {
            let filled = stream.fill(&mut buf);
            if filled == 0 {
                break;
            }
            body.extend_from_slice(&buf[..filled]);
        }
        assert_eq!([stream.header(), body].concat(), whole, "pieces of {piece} bytes");
    }
}

/// A snapshot larger than replay's read chunk comes back whole: keys on
/// each side of a chunk boundary, and a record after it.
#[test]
fn a_snapshot_over_several_read_chunks_replays() {
    use validation::journal::SNAPSHOT_CHUNK_BYTES;
    let blocks = 2 * SNAPSHOT_CHUNK_BYTES + 5;
    let mut keys = vec![0u8; blocks];
    let edges = [0, SNAPSHOT_CHUNK_BYTES - 4096 - 1, SNAPSHOT_CHUNK_BYTES - 4096, blocks - 1];
    for (i, &b) in edges.iter().enumerate() {
        keys[b] = i as u8 + 1;
    }
    let h = JournalHeader { blocks: blocks as u64, ..header() };
    let mut j = encode_start_carrying(&h, &keys, &[]);
    j.extend(encode_before(0, 1, &[(blocks as u64 - 1, 9)]));
    j.extend(encode_after(0, 1));
    // A device of two slots, the second one empty.
    j.resize(2 * (j.len() + 4096), 0);
    let r = replay(&j).unwrap();
    keys[blocks - 1] = 9;
    assert_eq!((r.records, &r.keys[..]), (2, &keys[..]));
}

/// Records over more than one read window, with one record longer than a
/// window, replay whole.
#[test]
fn records_over_several_read_windows_replay() {
    use validation::journal::RECORDS_WINDOW_BYTES;
    let blocks = (RECORDS_WINDOW_BYTES / 9 + 100) as u64;
    let h = JournalHeader { blocks, ..header() };
    let mut j = encode_start_carrying(&h, &vec![0; blocks as usize], &[]);
    let mut writes = 0;
    while j.len() < 2 * RECORDS_WINDOW_BYTES {
        j.extend(encode_before(0, writes, &[(writes % blocks, 1)]));
        j.extend(encode_after(0, writes));
        writes += 1;
    }
    let long: Vec<(u64, u8)> = (0..blocks).map(|b| (b, 2)).collect();
    j.extend(encode_before(0, writes, &long));
    j.resize(2 * (j.len() + 4096), 0);
    let r = replay(&j).unwrap();
    assert_eq!((r.records, r.pending.len(), r.torn_tail), (2 * writes + 1, 1, None));
}

/// Version 4: write ids follow the records, so the first id past the
/// highest `before` replayed is the first the journal does not know of.
#[test]
fn ahead_from_is_past_the_highest_write_id_recorded() {
    let mut j = start();
    j.extend(encode_before(0, 0, &[(3, 10)]));
    j.extend(encode_before(0, 1, &[(4, 1)]));
    j.extend(encode_after(0, 0));
    assert_eq!(replay(&dev(&j)).unwrap().ahead_from, Some(2));
    assert_eq!(replay(&dev(&start())).unwrap().ahead_from, Some(0));
}

/// A compaction folds writes into the snapshot: its header says which, so
/// they are not taken for writes the journal never recorded.
#[test]
fn a_compacted_start_keeps_the_write_ids_it_folded_in() {
    let h = JournalHeader { generation: 1, write_ids_end: 500, ..header() };
    let mut j = encode_start_carrying(&h, &[0; BLOCKS as usize], &encode_before(1, 499, &[(5, 1)]));
    assert_eq!(replay(&dev(&j)).unwrap().ahead_from, Some(500));
    j.extend(encode_before(1, 500, &[(6, 1)]));
    let r = replay(&dev(&j)).unwrap();
    assert_eq!((r.ahead_from, r.header.write_ids_end), (Some(501), 500));
}

/// The header's new fields come back, and a version 3 header reads them
/// as unknown: its reserved bytes are zero, and its snapshot after a
/// compaction does not say which writes it holds.
#[test]
fn a_version_3_journal_after_a_compaction_cannot_tell_what_is_ahead() {
    let h = JournalHeader { generation: 1, write_ids_end: 0, created_ns: 0, ..header() };
    let mut j = encode_start_carrying(&h, &[0; BLOCKS as usize], &[]);
    j.extend(encode_before(1, 7, &[(6, 1)]));
    j[8..12].copy_from_slice(&3u32.to_le_bytes());
    j[12..16].fill(0);
    let crc = crc32c::crc32c(&j[..4096]);
    j[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(replay(&dev(&j)).unwrap().ahead_from, None);
    let created = JournalHeader { created_ns: 12345, write_ids_end: 3, ..header() };
    let back = replay(&dev(&encode_start(&created, &KeyMap::new(BLOCKS, 4096)))).unwrap().header;
    assert_eq!((back.created_ns, back.write_ids_end), (12345, 3));
}
