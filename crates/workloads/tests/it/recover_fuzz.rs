//! `recover` (replay and the check of every block) on a journal fed
//! random damage and crafted headers: a typed error or a verdict, never
//! a panic or a hang. It is where a header's key block of 0 or 2^63 once
//! divided by zero or overflowed.

use std::sync::mpsc;
use std::time::Duration;

use device::MemDevice;
use proptest::prelude::*;
use validation::journal::{
    append_after, append_before, append_mark, encode_start_carrying, JournalHeader, JournalMode,
};
use workloads::recover::recover;
use workloads::KeyMapSpec;

/// A case that has not returned after this long is a hang (a watchdog,
/// not a measure).
const BUDGET: Duration = Duration::from_secs(60);

const BLOCKS: u64 = 64;
const SLOT: usize = 64 << 10;

/// The journal of 40 one-block writes over a 256 KiB target (no stamps on
/// it: every block it names reads back as zeros), with marks.
fn journal() -> Vec<u8> {
    let header = JournalHeader {
        run_id: 7,
        region_start: 0,
        key_block_bytes: 4096,
        blocks: BLOCKS,
        sector_bytes: 512,
        target: "t.img".into(),
        mode: JournalMode::Group,
        generation: 0,
        write_ids_end: 0,
        created_ns: 0,
        duplicates: None,
    };
    let mut d = encode_start_carrying(&header, &[0; BLOCKS as usize], &[]);
    let mut records = Vec::new();
    for id in 0..40 {
        let durable = records.len() as u64;
        append_mark(&mut records, 0, durable);
        append_before(&mut records, 0, id, &[(id % BLOCKS, 1)]);
        append_after(&mut records, 0, id);
    }
    d.extend(records);
    d.resize(2 * SLOT, 0);
    d
}

/// Recovers `journal` against a zeroed 256 KiB target on a thread of its
/// own; fails as a hang past [`BUDGET`].
fn recover_within(journal: Vec<u8>) {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let target = MemDevice::new(256 << 10).unwrap();
        let journal = MemDevice::from_bytes("journal", &journal, 512).unwrap();
        let verdict = recover(&target, &journal, false, &KeyMapSpec::AUTO).map(|v| v.checked());
        let _ = done.send(verdict.is_ok());
    });
    match result.recv_timeout(BUDGET) {
        Ok(_) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("recover ran past {BUDGET:?}: a hang"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("recover panicked"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn recover_over_a_crafted_header_field_returns(
        field in prop_oneof![Just((24usize, 8usize)), Just((32, 8)), Just((40, 8)), Just((48, 4))],
        value in prop_oneof![Just(0u64), Just(1), Just(1 << 63), Just(u64::MAX), (0u32..64).prop_map(|s| 1u64 << s), any::<u64>()],
    ) {
        let (at, len) = field;
        let mut d = journal();
        d[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
        codec::Frame::zeroed(12).seal(&[], &mut d[..4096]);
        recover_within(d);
    }

    #[test]
    fn recover_over_flipped_bits_returns(flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..6)) {
        let mut d = journal();
        for (at, bit) in flips {
            let at = at % d.len();
            d[at] ^= 1 << bit;
        }
        recover_within(d);
    }
}
