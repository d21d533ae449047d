//! The decoders of the drive header, the configuration copy and the
//! statistics record under damage: random bytes, bit flips (with the checksum left as it was, and
//! made right again so the field checks are reached), truncation, and
//! each field at and past its bounds, every kind its own case. Each
//! decode must give a typed error or a value that re-encodes to the same
//! bytes; never a panic, never a hang (it runs on a thread of its own and
//! must return within `HANG_BUDGET`, a bound on hanging, not a speed
//! figure: a decode takes microseconds). A set whose statistics records
//! were fuzzed behind a right checksum still assembles.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use codec::Frame;
use device::{Device, MemDevice};
use proptest::prelude::*;
use volume::{
    check_config_text, decode_config_copy, decode_drive_header, decode_stats, encode_config_copy,
    encode_drive_header, encode_stats, stats_slot_at, ConfigCopy, Counters, DriveHeader, FaultKind,
    MetadataArea, MetadataFault, ObjectKind, PresentDrive, StatsRecord, TextCheck, CONFIG_COPY_BYTES,
    CONFIG_PREFIX_BYTES, CONFIG_TEXT_BYTES_MAX, GENERATION_MAX, HEADER_BYTES, STATS_BODY_BYTES_MAX,
    STATS_ENTRY_BYTES_MIN, STATS_PREFIX_BYTES, STATS_SEQUENCE_MAX, STATS_SLOT_BYTES,
};

const HANG_BUDGET: Duration = Duration::from_secs(20);
const SET: [u8; 16] = [7; 16];
const DEVICE_BYTES: u64 = 64 << 20;
const FRAME: Frame = Frame::zeroed(12);

/// Runs `decode` on a thread of its own: a panic or a hang fails the case.
fn bounded<T: Send + 'static>(decode: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(decode());
    });
    match rx.recv_timeout(HANG_BUDGET) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the decoder did not return within {HANG_BUDGET:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let why = worker.join().err().map(|e| format!("{e:?}")).unwrap_or_default();
            panic!("the decoder panicked: {why}")
        }
    }
}

/// Bytes of a xorshift stream: random bytes without a strategy per byte.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn flip(bytes: &mut [u8], bits: &[usize]) {
    let len = bytes.len();
    for &bit in bits {
        bytes[(bit / 8) % len] ^= 1 << (bit % 8);
    }
}

fn header() -> DriveHeader {
    DriveHeader { set_id: SET, drive: "d1".into(), drive_bytes: DEVICE_BYTES }
}

fn decode_header(block: Vec<u8>) -> Result<DriveHeader, MetadataFault> {
    bounded(move || decode_drive_header("d1.img", DEVICE_BYTES, &block))
}

/// A header that decodes is the one its bytes encode: every byte was
/// checked, none ignored.
fn assert_header_sound(block: &[u8], decoded: &Result<DriveHeader, MetadataFault>) {
    match decoded {
        Ok(h) => {
            assert_eq!(encode_drive_header(h), block[..HEADER_BYTES as usize], "a decoded header re-encodes")
        }
        Err(fault) => assert!(fault.offset < HEADER_BYTES, "{fault}"),
    }
}

fn reseal(bytes: &mut [u8], covered: usize) {
    FRAME.seal(&[], &mut bytes[..covered]);
}

/// A header with `value` put at `at` (little-endian, `width` bytes) and
/// its checksum made right, so the field's own check decides.
fn header_with(at: usize, width: usize, value: u64) -> Vec<u8> {
    let mut block = encode_drive_header(&header());
    block[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
    reseal(&mut block, HEADER_BYTES as usize);
    block
}

const TEXT: &str = "drive d1 device d1.img\ndrive d2 device d2.img\ndrive d3 device d3.img\nvolume v\n\
plex name v.p0 org raid5 128s layout la\n\
sd name v.p0.s0 drive d1 length 4096s driveoffset 264s\n\
sd name v.p0.s1 drive d2 length 4096s driveoffset 264s\n\
sd name v.p0.s2 drive d3 length 4096s driveoffset 264s\n";

fn copy_bytes(generation: u64, text: &str) -> Vec<u8> {
    encode_config_copy(&SET, generation, text).unwrap()
}

fn decode_copy(slot: u8, bytes: Vec<u8>) -> Result<ConfigCopy, MetadataFault> {
    bounded(move || decode_config_copy("d1.img", slot, &SET, &bytes))
}

fn assert_copy_sound(slot: u8, bytes: &[u8], decoded: &Result<ConfigCopy, MetadataFault>) {
    if let Ok(copy) = decoded {
        assert_eq!(copy.generation % 2, u64::from(slot), "a copy decodes only in its own slot");
        let again = copy_bytes(copy.generation, &copy.text);
        let covered = CONFIG_PREFIX_BYTES + copy.text.len();
        assert_eq!(again[..covered], bytes[..covered], "a decoded copy re-encodes");
    }
}

/// Checks a copy's text against drives d1..d3 of 64 MiB, 512-byte sectors.
fn check_text(text: String) -> Result<(), MetadataFault> {
    bounded(move || {
        let present: HashMap<String, PresentDrive> = ["d1", "d2", "d3"]
            .iter()
            .map(|d| (d.to_string(), PresentDrive { size_bytes: DEVICE_BYTES, sector_bytes: 512 }))
            .collect();
        let check = TextCheck { device: "d1.img", slot: 1, drive: "d1", present: &present };
        check_config_text(&check, &ConfigCopy { generation: 3, text }).map(|_| ())
    })
}

proptest! {
    #[test]
    fn header_random_bytes(len in 0usize..(HEADER_BYTES as usize + 64), seed in any::<u64>()) {
        let block = noise(len, seed);
        let decoded = decode_header(block.clone());
        assert_header_sound(&block, &decoded);
    }

    #[test]
    fn header_bit_flips_fail_the_checksum(bits in prop::collection::vec(0usize..32768, 1..8)) {
        let mut block = encode_drive_header(&header());
        flip(&mut block, &bits);
        let decoded = decode_header(block.clone());
        assert_header_sound(&block, &decoded);
        prop_assert!(decoded.is_err() || block == encode_drive_header(&header()), "a flip got through");
    }

    #[test]
    fn header_bit_flips_behind_a_right_checksum(bits in prop::collection::vec(0usize..32768, 1..8)) {
        let mut block = encode_drive_header(&header());
        flip(&mut block, &bits);
        reseal(&mut block, HEADER_BYTES as usize);
        let decoded = decode_header(block.clone());
        assert_header_sound(&block, &decoded);
    }

    #[test]
    fn header_cut_short(len in 0usize..HEADER_BYTES as usize) {
        let block = encode_drive_header(&header())[..len].to_vec();
        let fault = decode_header(block).unwrap_err();
        prop_assert!(matches!(fault.problem, FaultKind::CutShort { .. }), "{}", fault);
    }

    #[test]
    fn header_drive_bytes_at_and_past_its_bounds(
        value in prop_oneof![
            Just(0u64), Just(volume::DATA_START_BYTES), Just(volume::DATA_START_BYTES + 512),
            Just(DEVICE_BYTES), Just(DEVICE_BYTES + 512), Just(DEVICE_BYTES - 1), Just(u64::MAX),
            any::<u64>(),
        ]
    ) {
        let decoded = decode_header(header_with(96, 8, value));
        let inside = value > volume::DATA_START_BYTES && value <= DEVICE_BYTES && value % 512 == 0;
        prop_assert_eq!(decoded.is_ok(), inside, "{:?}", decoded);
        if let Err(fault) = decoded {
            prop_assert_eq!((fault.offset, fault.field), (96, "drive_bytes"));
        }
    }

    #[test]
    fn header_fixed_fields_at_and_past_their_values(
        field in 0usize..5,
        delta in prop_oneof![Just(0i64), Just(1), Just(-1), any::<i64>()],
    ) {
        // version, then the four layout fields
        let (at, width, value): (usize, usize, u64) =
            [(8, 4, 2), (104, 8, 135_168), (112, 8, 49_152), (120, 8, 16_384), (128, 8, 102_400)][field];
        let mask = if width == 4 { u64::from(u32::MAX) } else { u64::MAX };
        let found = value.wrapping_add(delta as u64) & mask;
        let decoded = decode_header(header_with(at, width, found));
        prop_assert_eq!(decoded.is_ok(), found == value, "{:?}", decoded);
        if let Err(fault) = decoded {
            prop_assert_eq!(fault.offset, at as u64);
        }
    }

    #[test]
    fn header_drive_name_at_and_past_its_bounds(len in 0usize..=64, byte in any::<u8>()) {
        let mut block = encode_drive_header(&header());
        block[32..96].fill(0);
        block[32..32 + len].fill(byte);
        reseal(&mut block, HEADER_BYTES as usize);
        let decoded = decode_header(block.clone());
        assert_header_sound(&block, &decoded);
        let word = byte.is_ascii_graphic() && byte != b'#';
        let expect_ok = (1..=63).contains(&len) && word;
        prop_assert_eq!(decoded.is_ok(), expect_ok, "{:?}", decoded);
    }

    #[test]
    fn copy_random_bytes(len in 0usize..(CONFIG_COPY_BYTES as usize + 64), seed in any::<u64>(), slot in 0u8..2) {
        let bytes = noise(len, seed);
        let decoded = decode_copy(slot, bytes.clone());
        assert_copy_sound(slot, &bytes, &decoded);
    }

    #[test]
    fn copy_bit_flips_fail_the_checksum(bits in prop::collection::vec(0usize..(48 + TEXT.len()) * 8, 1..8)) {
        let mut bytes = copy_bytes(3, TEXT);
        flip(&mut bytes, &bits);
        let decoded = decode_copy(1, bytes.clone());
        assert_copy_sound(1, &bytes, &decoded);
        prop_assert!(decoded.is_err() || bytes == copy_bytes(3, TEXT), "a flip got through");
    }

    #[test]
    fn copy_bit_flips_behind_a_right_checksum(bits in prop::collection::vec(0usize..(48 + TEXT.len()) * 8, 1..8)) {
        let mut bytes = copy_bytes(3, TEXT);
        flip(&mut bytes, &bits);
        // The length field may have moved: seal what it now covers, if it can.
        let covered = u32::from_le_bytes([bytes[40], bytes[41], bytes[42], bytes[43]]) as usize;
        if (1..=CONFIG_TEXT_BYTES_MAX).contains(&covered) {
            reseal(&mut bytes, CONFIG_PREFIX_BYTES + covered);
        }
        let decoded = decode_copy(1, bytes.clone());
        assert_copy_sound(1, &bytes, &decoded);
        if let Ok(copy) = decoded {
            let _ = check_text(copy.text);
        }
    }

    #[test]
    fn copy_cut_short(len in 0usize..CONFIG_COPY_BYTES as usize) {
        let bytes = copy_bytes(3, TEXT)[..len].to_vec();
        let fault = decode_copy(1, bytes).unwrap_err();
        prop_assert!(matches!(fault.problem, FaultKind::CutShort { .. }), "{}", fault);
    }

    #[test]
    fn copy_generation_at_and_past_its_bounds(
        generation in prop_oneof![
            Just(0u64), Just(1), Just(2), Just(GENERATION_MAX - 1), Just(GENERATION_MAX),
            Just(GENERATION_MAX + 1), Just(u64::MAX), any::<u64>(),
        ],
        slot in 0u8..2,
    ) {
        let decoded = decode_copy(slot, copy_bytes(generation, TEXT));
        let inside = (1..=GENERATION_MAX).contains(&generation) && generation % 2 == u64::from(slot);
        prop_assert_eq!(decoded.is_ok(), inside, "{:?}", decoded);
    }

    #[test]
    fn copy_text_bytes_at_and_past_its_bounds(
        text_bytes in prop_oneof![
            Just(0u32), Just(1), Just(TEXT.len() as u32), Just(CONFIG_TEXT_BYTES_MAX as u32),
            Just(CONFIG_TEXT_BYTES_MAX as u32 + 1), Just(u32::MAX), any::<u32>(),
        ],
    ) {
        let mut bytes = copy_bytes(3, TEXT);
        bytes[40..44].copy_from_slice(&text_bytes.to_le_bytes());
        let inside = (1..=CONFIG_TEXT_BYTES_MAX as u32).contains(&text_bytes);
        if inside {
            reseal(&mut bytes, CONFIG_PREFIX_BYTES + text_bytes as usize);
        }
        let decoded = decode_copy(1, bytes);
        prop_assert_eq!(decoded.is_ok(), inside, "{:?}", decoded);
        if let Err(fault) = decoded {
            prop_assert_eq!((fault.offset, fault.field), (HEADER_BYTES + CONFIG_COPY_BYTES + 40, "text_bytes"));
        }
    }

    #[test]
    fn copy_stripe_at_and_past_its_bounds(
        stripe in prop_oneof![Just(0u64), Just(1), Just(1000), Just(4095), Just(4096), Just(4097), 0u64..8192],
    ) {
        // Subdisks of 4096 sectors: a stripe is a whole number of sectors,
        // not 0, at most one subdisk.
        let text = TEXT.replace("raid5 128s", &format!("raid5 {stripe}s"));
        let checked = check_text(text);
        prop_assert_eq!(checked.is_ok(), (1..=4096).contains(&stripe), "{:?}", checked);
    }

    #[test]
    fn copy_subdisk_at_and_past_the_drive(
        sectors in prop_oneof![Just(0u64), Just(1), Just(130_808), Just(130_809), Just(u64::MAX / 512), 0u64..200_000],
    ) {
        // A 64 MiB drive holds 131072 sectors, 264 of metadata.
        let checked = check_text(TEXT.replace("length 4096s", &format!("length {sectors}s")));
        prop_assert_eq!(checked.is_ok(), (128..=130_808).contains(&sectors), "{:?}", checked);
    }

    #[test]
    fn copy_subdisks_on_a_drive_not_present_at_and_past_the_bound(
        sectors in prop_oneof![
            Just(1u64), Just(1u64 << 40), Just((1u64 << 40) - 132), Just((1u64 << 40) - 131), Just(1u64 << 54),
            1u64..(1 << 56),
        ],
    ) {
        // d4 is not present: it is taken as long as its last subdisk, so
        // only the bound on where a subdisk may end (1 PiB) keeps a sum of
        // them from overflowing.
        let second_at = 264 + sectors;
        let text = format!(
            "drive d1 device d1.img\ndrive d4 device d4.img\nvolume c\nplex name c.p0 org concat\n\
             sd name c.p0.s0 drive d4 length {sectors}s driveoffset 264s\n\
             sd name c.p0.s1 drive d4 length {sectors}s driveoffset {second_at}s plexoffset {sectors}s\n"
        );
        let checked = check_text(text);
        let end_bytes = (u128::from(second_at) + u128::from(sectors)) * 512;
        prop_assert_eq!(checked.is_ok(), end_bytes <= u128::from(volume::SUBDISK_END_BYTES_MAX), "{:?}", checked);
    }

    #[test]
    fn copy_text_with_words_replaced(
        at in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        words in prop::collection::vec(word(), 1..4),
    ) {
        let mut tokens: Vec<String> = TEXT.split(' ').map(str::to_string).collect();
        for (index, word) in at.iter().zip(&words) {
            let i = index.index(tokens.len());
            tokens[i] = word.clone();
        }
        let _ = check_text(tokens.join(" ").replace(" NL ", "\n"));
    }

    #[test]
    fn copy_text_of_random_words(words in prop::collection::vec(word(), 0..60)) {
        let text = words.join(" ").replace(" NL ", "\n");
        let _ = check_text(text);
    }
}

/// The words of a configuration, numbers and sizes around their bounds,
/// and the line breaks that make them lines.
fn word() -> impl Strategy<Value = String> {
    let keywords = [
        "drive",
        "volume",
        "plex",
        "sd",
        "name",
        "device",
        "org",
        "concat",
        "striped",
        "raid5",
        "layout",
        "la",
        "ls",
        "length",
        "driveoffset",
        "plexoffset",
        "log",
        "state",
        "up",
        "down",
        "stale",
        "initializing",
        "revived",
        "readpol",
        "prefer",
        "round",
        "d1",
        "d2",
        "d3",
        "v",
        "v.p0",
        "v.p0.s0",
        "NL",
        "NL",
        "NL",
    ];
    prop_oneof![
        prop::sample::select(keywords.to_vec()).prop_map(str::to_string),
        (any::<u64>(), prop::sample::select(vec!["", "s", "k", "m", "g", "b"]))
            .prop_map(|(n, unit)| format!("{n}{unit}")),
        (0u64..300_000).prop_map(|n| format!("{n}s")),
    ]
}

// ---- statistics records ----

/// A record of four objects (a drive, a subdisk, a plex, a volume) with
/// counters at both ends of their range.
fn stats_record() -> StatsRecord {
    let mut record = StatsRecord::default();
    let counters = Counters { reads: 3, bytes_written: u64::MAX, errors: 1, ..Counters::default() };
    for (kind, name) in [
        (ObjectKind::Drive, "d1"),
        (ObjectKind::Subdisk, "v.p0.s0"),
        (ObjectKind::Plex, "v.p0"),
        (ObjectKind::Volume, "v"),
    ] {
        record.objects.insert((kind, name.to_string()), counters);
    }
    record
}

/// Sequence 7: slot 1.
fn stats_bytes() -> Vec<u8> {
    encode_stats(&SET, 7, &stats_record()).unwrap()
}

fn body_of(bytes: &[u8]) -> usize {
    u32::from_le_bytes([bytes[40], bytes[41], bytes[42], bytes[43]]) as usize
}

fn decode_record(slot: u8, bytes: Vec<u8>) -> Result<(u64, StatsRecord), MetadataFault> {
    bounded(move || decode_stats("d1.img", slot, &SET, &bytes))
}

/// A record that decodes is the one its bytes encode, in its own slot,
/// within its bounds; a fault names a byte of the slot read.
fn assert_record_sound(slot: u8, bytes: &[u8], decoded: &Result<(u64, StatsRecord), MetadataFault>) {
    match decoded {
        Ok((sequence, record)) => {
            assert!(
                (1..=STATS_SEQUENCE_MAX).contains(sequence) && sequence % 2 == u64::from(slot),
                "{sequence}"
            );
            let again = encode_stats(&SET, *sequence, record).unwrap();
            let covered = STATS_PREFIX_BYTES + body_of(bytes);
            assert_eq!(again[..covered], bytes[..covered], "a decoded record re-encodes");
        }
        Err(fault) => {
            let start = stats_slot_at(slot);
            assert!((start..start + STATS_SLOT_BYTES).contains(&fault.offset), "{fault}");
            assert_eq!(fault.area, MetadataArea::StatsSlot(slot), "{fault}");
        }
    }
}

/// The record with `value` at `at` (`width` bytes) and its checksum made
/// right over the body its length field now gives, if it can be.
fn record_with(at: usize, width: usize, value: u64) -> Vec<u8> {
    let mut bytes = stats_bytes();
    bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
    let body = body_of(&bytes).min(STATS_BODY_BYTES_MAX);
    reseal(&mut bytes, STATS_PREFIX_BYTES + body);
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn stats_random_bytes(
        len in 0usize..(STATS_SLOT_BYTES as usize + 64),
        seed in any::<u64>(),
        slot in 0u8..2,
        framed in any::<bool>(),
    ) {
        let mut bytes = noise(len, seed);
        // Half of them pass the magic, version, length and checksum, so the
        // sequence and entries are reached.
        if framed && len >= STATS_SLOT_BYTES as usize {
            bytes[..8].copy_from_slice(b"IOLABSTS");
            bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
            bytes[16..32].copy_from_slice(&SET);
            let body = (seed as usize) % (4 * STATS_ENTRY_BYTES_MIN);
            bytes[40..44].copy_from_slice(&(body as u32).to_le_bytes());
            reseal(&mut bytes, STATS_PREFIX_BYTES + body);
        }
        let decoded = decode_record(slot, bytes.clone());
        assert_record_sound(slot, &bytes, &decoded);
    }

    #[test]
    fn stats_bit_flips_fail_the_checksum(bits in prop::collection::vec(0usize..(STATS_PREFIX_BYTES + 4 * 100) * 8, 1..8)) {
        let mut bytes = stats_bytes();
        flip(&mut bytes[..STATS_PREFIX_BYTES + body_of(&stats_bytes())], &bits);
        let decoded = decode_record(1, bytes.clone());
        assert_record_sound(1, &bytes, &decoded);
        prop_assert!(decoded.is_err() || bytes == stats_bytes(), "a flip got through");
    }

    #[test]
    fn stats_bit_flips_behind_a_right_checksum(bits in prop::collection::vec(0usize..(STATS_PREFIX_BYTES + 4 * 100) * 8, 1..8)) {
        let mut bytes = stats_bytes();
        flip(&mut bytes[..STATS_PREFIX_BYTES + body_of(&stats_bytes())], &bits);
        let body = body_of(&bytes);
        if body <= STATS_BODY_BYTES_MAX {
            reseal(&mut bytes, STATS_PREFIX_BYTES + body);
        }
        let decoded = decode_record(1, bytes.clone());
        assert_record_sound(1, &bytes, &decoded);
    }

    #[test]
    fn stats_cut_short(len in 0usize..STATS_SLOT_BYTES as usize) {
        let fault = decode_record(1, stats_bytes()[..len].to_vec()).unwrap_err();
        prop_assert!(matches!(fault.problem, FaultKind::CutShort { .. }), "{}", fault);
    }

    #[test]
    fn stats_sequence_at_and_past_its_bounds(
        sequence in prop_oneof![
            Just(0u64), Just(1), Just(2), Just(STATS_SEQUENCE_MAX - 1), Just(STATS_SEQUENCE_MAX),
            Just(STATS_SEQUENCE_MAX + 1), Just(u64::MAX), any::<u64>(),
        ],
        slot in 0u8..2,
    ) {
        let decoded = decode_record(slot, record_with(32, 8, sequence));
        let inside = (1..=STATS_SEQUENCE_MAX).contains(&sequence) && sequence % 2 == u64::from(slot);
        prop_assert_eq!(decoded.is_ok(), inside, "{:?}", decoded);
        if let Err(fault) = decoded {
            prop_assert_eq!((fault.offset, fault.field), (stats_slot_at(slot) + 32, "sequence"));
        }
    }

    /// The body's length, at and past its bound: past the slot it is
    /// named; inside it, another length breaks the checksum's cover or the
    /// entries' tiling, never anything else.
    #[test]
    fn stats_body_bytes_at_and_past_its_bounds(
        body in prop_oneof![
            Just(0u32), Just(1), Just(STATS_BODY_BYTES_MAX as u32), Just(STATS_BODY_BYTES_MAX as u32 + 1),
            Just(u32::MAX), any::<u32>(),
        ],
    ) {
        let decoded = decode_record(1, record_with(40, 4, u64::from(body)));
        let written = body_of(&stats_bytes()) as u32;
        prop_assert_eq!(decoded.is_ok(), body == written, "{:?}", decoded);
        if let Err(fault) = decoded {
            if body as usize > STATS_BODY_BYTES_MAX {
                prop_assert_eq!(fault.field, "body_bytes");
            }
        }
    }

    #[test]
    fn stats_entries_at_and_past_its_bounds(
        entries in prop_oneof![Just(0u32), Just(3), Just(4), Just(5), Just(u32::MAX), any::<u32>()],
    ) {
        let decoded = decode_record(1, record_with(44, 4, u64::from(entries)));
        prop_assert_eq!(decoded.is_ok(), entries == 4, "{:?}", decoded);
        let most = (body_of(&stats_bytes()) / STATS_ENTRY_BYTES_MIN) as u32;
        if let Err(fault) = decoded {
            if entries > most {
                prop_assert_eq!(fault.field, "entries");
            }
        }
    }

    /// The first entry's kind and name length at and past their bounds.
    #[test]
    fn stats_entry_fields_at_and_past_their_bounds(
        field in 0usize..2,
        value in prop_oneof![Just(0u8), Just(1), Just(2), Just(3), Just(4), Just(5), Just(255), any::<u8>()],
    ) {
        let bytes = record_with(STATS_PREFIX_BYTES + field, 1, u64::from(value));
        let decoded = decode_record(1, bytes.clone());
        assert_record_sound(1, &bytes, &decoded);
        // The first entry is the drive "d1" (kind 1, name length 2), then
        // the subdisk "v.p0.s0": as a subdisk "d1" still comes first.
        match (field, value) {
            (0, 1 | 2) | (1, 2) => prop_assert!(decoded.is_ok(), "{:?}", decoded),
            (0, 0 | 5..) => prop_assert_eq!(decoded.map_err(|f| f.field), Err("entry_kind")),
            (0, _) => prop_assert_eq!(decoded.map_err(|f| f.field), Err("entry_name"), "out of order"),
            (_, 0) => prop_assert_eq!(decoded.map_err(|f| f.field), Err("entry_name_length")),
            _ => {}
        }
    }
}

/// The four drives of a RAID-5 set after a session that wrote to it (its
/// statistics records in both slots), made once: their bytes.
fn set_images() -> &'static [Vec<u8>] {
    static IMAGES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let drives = crate::common::drives_for(4, crate::common::MIB);
        let config = volume::parse(&crate::common::single_plex("raid5 8k", 4, "0")).unwrap();
        volume::create(&config, &drives, &crate::common::fresh).unwrap();
        let set = volume::assemble(&drives_in_order(&drives)).unwrap();
        Device::write_at(set.volume("v").unwrap().as_ref(), &crate::common::pattern(4096, 1), 0).unwrap();
        set.save_stats().unwrap();
        drives_in_order(&drives)
            .iter()
            .map(|d| {
                let mut bytes = vec![0u8; d.size_bytes() as usize];
                d.read_at(&mut bytes, 0).unwrap();
                bytes
            })
            .collect()
    })
}

fn drives_in_order(drives: &HashMap<String, Arc<dyn Device>>) -> Vec<Arc<dyn Device>> {
    let mut names: Vec<&String> = drives.keys().collect();
    names.sort();
    names.into_iter().map(|n| Arc::clone(&drives[n])).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, failure_persistence: None, ..ProptestConfig::default() })]

    /// A statistics record fuzzed behind a right checksum, on one drive or
    /// all, in one slot or both: the set assembles (the record passed over
    /// with a warning, or read within its bounds), and saves again.
    #[test]
    fn a_set_with_fuzzed_statistics_records_assembles(
        bits in prop::collection::vec(0usize..(STATS_PREFIX_BYTES + 400) * 8, 1..6),
        all_drives in any::<bool>(),
        both_slots in any::<bool>(),
    ) {
        let images: Vec<Vec<u8>> = set_images().to_vec();
        let assembled = bounded(move || {
            let devices: Vec<Arc<dyn Device>> = images
                .iter()
                .enumerate()
                .map(|(k, image)| {
                    let mut image = image.clone();
                    for slot in 0..2u8 {
                        if (k == 0 || all_drives) && (slot == 1 || both_slots) {
                            let at = stats_slot_at(slot) as usize;
                            let record = &mut image[at..at + STATS_SLOT_BYTES as usize];
                            let body = body_of(record);
                            flip(&mut record[..STATS_PREFIX_BYTES + body], &bits);
                            reseal(record, STATS_PREFIX_BYTES + body);
                        }
                    }
                    let dev = MemDevice::new(image.len() as u64).unwrap();
                    Device::write_at(&dev, &image, 0).unwrap();
                    Arc::new(dev) as Arc<dyn Device>
                })
                .collect();
            let set = volume::assemble(&devices).map_err(|e| e.to_string())?;
            set.save_stats().map_err(|e| e.to_string())?;
            Ok::<_, String>(set.warnings().len())
        });
        prop_assert!(assembled.is_ok(), "{:?}", assembled);
    }
}
