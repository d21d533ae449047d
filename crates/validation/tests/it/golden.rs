//! The bytes of every format this crate writes, field by field, as
//! docs/formats.md gives them: an encoder change that moves a byte fails
//! here, not on a user's disk. The values were taken from the encoders
//! before their little-endian and checksum code moved to the codec crate.

use codec::golden::{assert_layout, hex};
use validation::journal::{
    append_mark, encode_after, encode_before, encode_start_carrying, read_header, replay, JournalHeader,
    JournalMode,
};
use validation::{fill_block, fill_duplicate, read_stamp, Stamp};

const RUN_ID: u64 = 0x0102_0304_0506_0708;

#[test]
fn a_stamp_is_byte_for_byte_the_documented_one() {
    let mut sector = vec![0u8; 512];
    fill_block(&mut sector, 512, 0x1000, 7, 0x2a, 0x3e8, RUN_ID);
    assert_layout(
        &sector[..64],
        &[
            (0, "494f4c4142535450"),  // magic "IOLABSTP"
            (8, "01000000"),          // version 1
            (12, "07cbda6c"),         // crc32c of the sector with this field zero
            (16, "0010000000000000"), // address
            (24, "2a00000000000000"), // sequence
            (32, "e803000000000000"), // time_ns
            (40, "0807060504030201"), // run_id
            (48, "07"),               // key
        ],
    );
    assert_eq!(hex(&sector[64..96]), "64bb68e31fdc75fc768d10dd873073e13b4dcd7e2ca98fbf6b5342adba194bfc");
    let stamp = Stamp { address: 0x1000, sequence: 0x2a, time_ns: 0x3e8, run_id: RUN_ID, key: 7, set: 0 };
    assert_eq!(read_stamp(&sector), Ok(stamp));
}

#[test]
fn a_duplicate_units_stamp_is_byte_for_byte_the_documented_one() {
    let mut unit = vec![0u8; 1024];
    fill_duplicate(&mut unit, 512, 5, 7, RUN_ID);
    assert_layout(
        &unit[512..512 + 64],
        &[
            (0, "494f4c4142535450"),  // magic "IOLABSTP"
            (8, "02000000"),          // version 2
            (12, "921a63cc"),         // crc32c of the sector with this field zero
            (16, "0002000000000000"), // address: the sector's offset in its unit
            (24, "0000000000000000"), // sequence: none
            (32, "0000000000000000"), // time_ns: none
            (40, "0807060504030201"), // run_id
            (48, "02"),               // key: the version, 1 + 7 mod 3
            (49, "05"),               // set
        ],
    );
    assert_eq!(
        hex(&unit[512 + 64..512 + 96]),
        "6dae159d8618f5018e30b8d9a9772ff0154163fe7b097fcd8873bc234ddaad37"
    );
    let stamp = Stamp { address: 512, sequence: 0, time_ns: 0, run_id: RUN_ID, key: 2, set: 5 };
    assert_eq!(read_stamp(&unit[512..]), Ok(stamp));
}

fn header() -> JournalHeader {
    JournalHeader {
        run_id: RUN_ID,
        region_start: 0x10_0000,
        key_block_bytes: 4096,
        blocks: 5,
        sector_bytes: 512,
        target: "t.img".into(),
        mode: JournalMode::Group,
        generation: 3,
        write_ids_end: 0x11,
        created_ns: 0x1234,
        duplicates: validation::Duplicates::new(2.0),
    }
}

#[test]
fn a_journal_start_is_byte_for_byte_the_documented_one() {
    let carried = encode_before(3, 0x10, &[(1, 2)]);
    let start = encode_start_carrying(&header(), &[1, 2, 3, 0, 5], &carried);
    assert_eq!(start.len(), 4096 + 4096 + carried.len());
    assert_layout(
        &start[..4096],
        &[
            (0, "494f4c41424a4e4c"),   // magic "IOLABJNL"
            (8, "06000000"),           // version 6
            (12, "3738cdb4"),          // crc32c of the header with this field zero
            (16, "0807060504030201"),  // run_id
            (24, "0000100000000000"),  // region_start
            (32, "0010000000000000"),  // key_block_bytes
            (40, "0500000000000000"),  // blocks
            (48, "00020000"),          // sector_bytes
            (52, "0500"),              // target name length
            (54, "742e696d67"),        // target name "t.img"
            (310, "03"),               // mode: group
            (312, "0300000000000000"), // generation
            (320, "21000000"),         // carried_bytes
            (324, "12143ddf"),         // start_crc
            (328, "1100000000000000"), // write_ids_end
            (336, "3412000000000000"), // created_ns
            (344, "0000000000000040"), // duplicate_ratio: 2.0 as an f64
        ],
    );
    assert_layout(&start[4096..8192], &[(0, "0102030005")]);
    assert_eq!(start[8192..], carried[..]);
    assert_eq!(read_header(&start).unwrap(), header());
}

#[test]
fn journal_records_are_byte_for_byte_the_documented_ones() {
    let before = encode_before(3, 5, &[(2, 9), (4, 1)]);
    assert_layout(
        &before,
        &[
            (0, "4a524543"),          // magic "JREC"
            (4, "2a000000"),          // length: 24 + 2 × 9
            (8, "52ef1d6e"),          // crc32c of the generation, then the record with this field zero
            (12, "01"),               // kind: before
            (16, "0500000000000000"), // write_id
            (24, "0200000000000000"), // entry: block 2
            (32, "09"),               // key 9
            (33, "0400000000000000"), // entry: block 4
            (41, "01"),               // key 1
        ],
    );
    let after = encode_after(3, 6);
    assert_layout(
        &after,
        &[
            (0, "4a524543"),          // magic "JREC"
            (4, "18000000"),          // length
            (8, "74141afc"),          // crc32c
            (12, "02"),               // kind: after
            (16, "0600000000000000"), // write_id
        ],
    );
    let mut mark = Vec::new();
    append_mark(&mut mark, 3, 0x1234);
    assert_layout(
        &mark,
        &[
            (0, "4a524543"),          // magic "JREC"
            (4, "18000000"),          // length
            (8, "11f5389a"),          // crc32c
            (12, "03"),               // kind: mark
            (16, "3412000000000000"), // durable end of the slot's records
        ],
    );
}

#[test]
fn golden_records_replay_as_written() {
    let mut journal = encode_start_carrying(&header(), &[1, 2, 3, 0, 5], &[]);
    journal.extend(encode_before(3, 0x11, &[(2, 9), (4, 1)]));
    journal.extend(encode_after(3, 0x11));
    journal.resize(2 * (64 << 10), 0);
    let replayed = replay(&journal).unwrap();
    assert_eq!(replayed.keys[..], [1, 2, 9, 0, 1]);
    assert!(replayed.pending.is_empty() && replayed.torn_tail.is_none());
}
