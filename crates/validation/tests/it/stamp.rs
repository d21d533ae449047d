use proptest::prelude::*;
use validation::{fill_block, next_key, read_stamp, Stamp, StampError};

#[test]
fn a_stamped_sector_reads_back_its_stamp() {
    let mut buf = vec![0; 1024];
    fill_block(&mut buf, 512, 4096, 7, 42, 1_000, 99);
    let second = read_stamp(&buf[512..]).unwrap();
    assert_eq!(second, Stamp { address: 4608, sequence: 42, time_ns: 1_000, run_id: 99, key: 7 });
}

#[test]
fn zeros_are_told_apart_from_garbage() {
    assert_eq!(read_stamp(&[0; 512]), Err(StampError::Zeros));
    assert_eq!(read_stamp(&[0xaa; 512]), Err(StampError::NoMagic));
}

#[test]
fn data_differs_per_key() {
    let (mut a, mut b) = (vec![0; 512], vec![0; 512]);
    fill_block(&mut a, 512, 0, 1, 0, 0, 5);
    fill_block(&mut b, 512, 0, 2, 0, 0, 5);
    assert_ne!(a[64..], b[64..]);
}

#[test]
fn keys_wrap_past_255_to_1_never_0() {
    assert_eq!(next_key(255), 1);
    assert_eq!(next_key(0), 1);
    assert_eq!(next_key(7), 8);
}

#[test]
fn four_k_sectors_are_stamped_per_sector() {
    let mut buf = vec![0; 8192];
    fill_block(&mut buf, 4096, 0, 3, 1, 1, 1);
    assert_eq!(read_stamp(&buf[4096..]).unwrap().address, 4096);
}

proptest! {
    #[test]
    fn any_flipped_bit_fails_the_checksum(bit in 0usize..512 * 8) {
        let mut buf = vec![0; 512];
        fill_block(&mut buf, 512, 0, 9, 1, 2, 3);
        buf[bit / 8] ^= 1 << (bit % 8);
        // Bits of the magic and the version field may read as "not a stamp" or
        // "unknown version" instead.
        let flipped_magic = bit < 96;
        match read_stamp(&buf) {
            Err(StampError::Checksum { .. }) => {}
            Err(StampError::NoMagic) | Err(StampError::Version(_)) if flipped_magic => {}
            other => prop_assert!(false, "bit {} flipped, read {:?}", bit, other),
        }
    }
}

proptest! {
    /// The data words come out the same whichever build of the filler the
    /// CPU runs (AVX2 or the baseline): the format does not depend on it.
    #[test]
    fn data_is_the_same_on_every_build(seed in any::<u64>(), words in 0usize..80) {
        let (mut fast, mut baseline) = (vec![0u8; words * 8], vec![0u8; words * 8]);
        validation::fill_data(&mut fast, seed);
        validation::fill_data_baseline(&mut baseline, seed);
        prop_assert_eq!(fast, baseline);
    }
}

proptest! {
    /// A stamped block's checksums, computed three sectors at a time, are
    /// the crc32c crate's, one sector at a time, for any number of sectors
    /// of either size.
    #[test]
    fn sector_checksums_are_the_standard_ones(sectors in 1usize..12, big in any::<bool>(), key in 1u8..) {
        let sector = if big { 4096 } else { 512 };
        let mut block = vec![0u8; sectors * sector];
        fill_block(&mut block, sector, 8192, key, 5, 6, 7);
        let mut resealed = block.clone();
        validation::seal_sectors_baseline(&mut resealed, sector);
        prop_assert_eq!(block, resealed);
    }
}
