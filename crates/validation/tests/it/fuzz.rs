//! Decoder fuzzers: the journal's header and records, a whole journal
//! device, and the sector stamp, fed random bytes, bit flips, truncation
//! and each header field at and past its bounds. Every case ends in a
//! typed error or a valid value: never a panic, never a hang (each case
//! runs under a watchdog whose budget is generous: it catches a loop,
//! it measures nothing).

use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use validation::journal::{
    append_after, append_before, append_mark, encode_start_carrying, read_header, replay, JournalError,
    JournalHeader, KEY_BLOCK_BYTES_MAX, SECTOR_BYTES_MAX, SECTOR_BYTES_MIN,
};
use validation::{fill_block, read_stamp};

/// A case that has not returned after this long is a hang.
const BUDGET: Duration = Duration::from_secs(60);

/// Runs `f` on a thread of its own and returns what it returns; a case
/// still running after [`BUDGET`] fails the test as a hang.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    match result.recv_timeout(BUDGET) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("a decoder case ran past {BUDGET:?}: a hang"),
        // The thread panicked: resume with its message in the log above.
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("a decoder case panicked"),
    }
}

const BLOCKS: u64 = 64;
const SLOT: usize = 64 << 10;

fn header() -> JournalHeader {
    JournalHeader { region_start: 4096, ..crate::common::header(BLOCKS) }
}

/// A journal device of two slots: slot 0 a start and `writes` commits of
/// one write each, every commit after the first led by its mark.
fn journal(writes: u64) -> Vec<u8> {
    let mut d = encode_start_carrying(&header(), &[0; BLOCKS as usize], &[]);
    let records_at = d.len();
    let mut records = Vec::new();
    for id in 0..writes {
        if id > 0 {
            let durable = records.len() as u64;
            append_mark(&mut records, 0, durable);
        }
        append_before(&mut records, 0, id, &[(id % BLOCKS, 1 + (id / BLOCKS) as u8)]);
        append_after(&mut records, 0, id);
    }
    d.extend(records);
    assert!(d.len() - records_at < SLOT - records_at);
    d.resize(2 * SLOT, 0);
    d
}

/// A header's bytes with its checksum made right again.
fn sealed(mut head: Vec<u8>) -> Vec<u8> {
    head[12..16].fill(0);
    let crc = crc32c::crc32c(&head[..4096]);
    head[12..16].copy_from_slice(&crc.to_le_bytes());
    head
}

/// What a decoded header must satisfy: the bounds docs/formats.md gives.
fn within_bounds(h: &JournalHeader) -> bool {
    let sector = u64::from(h.sector_bytes);
    h.sector_bytes.is_power_of_two()
        && (SECTOR_BYTES_MIN..=SECTOR_BYTES_MAX).contains(&h.sector_bytes)
        && h.key_block_bytes != 0
        && h.key_block_bytes % sector == 0
        && h.key_block_bytes <= KEY_BLOCK_BYTES_MAX
        && h.blocks != 0
        && h.region_start % sector == 0
        && h.blocks.checked_mul(h.key_block_bytes).and_then(|l| l.checked_add(h.region_start)).is_some()
        && h.duplicates.is_none_or(|d| d.ratio().is_finite() && d.ratio() >= 1.0)
}

/// The value of a header field of `len` bytes: near the bounds, at them,
/// past them, or anything.
fn field_value(len: usize) -> impl Strategy<Value = u64> {
    let max = if len == 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
    prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(max),
        Just(max / 2 + 1),
        (0u64..=20).prop_map(move |s| (1u64 << s).min(max)),
        (0u64..=20).prop_map(move |s| ((1u64 << s) + 1).min(max)),
        Just((64u64 << 20).min(max)),
        Just(((64u64 << 20) + 512).min(max)),
        any::<u64>().prop_map(move |v| v & max),
    ]
}

/// (offset, length) of the header's fields with bounds.
const FIELDS: [(usize, usize); 8] = [(8, 4), (24, 8), (32, 8), (40, 8), (48, 4), (52, 2), (310, 1), (344, 8)];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn random_bytes_as_a_header_are_refused_or_within_bounds(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let decoded = within(move || read_header(&bytes));
        if let Ok(h) = decoded {
            prop_assert!(within_bounds(&h));
        }
    }

    #[test]
    fn a_header_with_any_field_at_or_past_its_bounds_is_refused_by_name_or_within_them(
        field in 0..FIELDS.len(),
        value in field_value(8),
    ) {
        let (at, len) = FIELDS[field];
        let mut head = journal(0)[..4096].to_vec();
        head[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
        let head = sealed(head);
        match within(move || read_header(&head)) {
            Ok(h) => prop_assert!(within_bounds(&h)),
            Err(JournalError::Field { offset, .. }) => prop_assert!(FIELDS.iter().any(|(a, _)| *a == offset)),
            Err(JournalError::Version(_)) => prop_assert_eq!(at, 8),
            Err(e) => prop_assert!(false, "unexpected error {e:?}"),
        }
    }

    #[test]
    fn a_truncated_header_is_refused(len in 0usize..4096) {
        let head = journal(0)[..len].to_vec();
        prop_assert!(within(move || read_header(&head)).is_err());
    }

    #[test]
    fn a_journal_with_flipped_bits_replays_or_is_refused(
        writes in 1u64..300,
        flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..8),
    ) {
        let mut d = journal(writes);
        for (at, bit) in flips {
            let at = at % d.len();
            d[at] ^= 1 << bit;
        }
        let replayed = within(move || replay(&d).map(|r| (r.header, r.records, r.damaged_ranges)));
        if let Ok((h, records, _)) = replayed {
            prop_assert!(within_bounds(&h));
            prop_assert!(records <= 2 * writes);
        }
    }

    #[test]
    fn a_journal_with_a_range_overwritten_replays_or_is_refused(
        writes in 1u64..300,
        at in any::<usize>(),
        fill in proptest::collection::vec(any::<u8>(), 1..2000),
    ) {
        let mut d = journal(writes);
        let at = at % d.len();
        let end = (at + fill.len()).min(d.len());
        d[at..end].copy_from_slice(&fill[..end - at]);
        let _ = within(move || replay(&d).map(|r| r.records));
    }

    #[test]
    fn a_journal_cut_short_replays_or_is_refused(writes in 1u64..300, len in 0usize..2 * SLOT) {
        let mut d = journal(writes);
        d.truncate(len);
        let _ = within(move || replay(&d).map(|r| r.records));
    }

    #[test]
    fn a_sealed_header_of_any_geometry_on_a_real_journal_replays_or_is_refused(
        field in 0..FIELDS.len(),
        value in field_value(8),
        writes in 1u64..100,
    ) {
        let (at, len) = FIELDS[field];
        let mut d = journal(writes);
        d[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
        let head = sealed(d[..4096].to_vec());
        d[..4096].copy_from_slice(&head);
        let _ = within(move || replay(&d).map(|r| r.records));
    }

    #[test]
    fn a_stamp_with_flipped_bits_reads_back_or_is_refused(
        flips in proptest::collection::vec((0usize..512, 0u8..8), 0..4),
    ) {
        let mut sector = vec![0u8; 512];
        fill_block(&mut sector, 512, 4096, 7, 3, 11, 1000);
        let clean = flips.is_empty();
        for (at, bit) in flips {
            sector[at] ^= 1 << bit;
        }
        let read = within(move || read_stamp(&sector));
        if clean {
            prop_assert!(read.is_ok());
        }
    }

    #[test]
    fn random_bytes_as_a_stamp_are_refused_or_read(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let _ = within(move || read_stamp(&bytes));
    }
}
