use proptest::prelude::*;
use validation::{fill_block, fill_duplicate, next_key, read_stamp, Duplicates, Stamp, StampError};

#[test]
fn a_stamped_sector_reads_back_its_stamp() {
    let mut buf = vec![0; 1024];
    fill_block(&mut buf, 512, 4096, 7, 42, 1_000, 99);
    let second = read_stamp(&buf[512..]).unwrap();
    assert_eq!(second, Stamp { address: 4608, sequence: 42, time_ns: 1_000, run_id: 99, key: 7, set: 0 });
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

#[test]
fn a_duplicate_units_sectors_read_back_their_set_version_and_place_in_the_unit() {
    let mut buf = vec![0; 4096];
    fill_duplicate(&mut buf, 512, 5, 7, 99);
    let third = read_stamp(&buf[1024..1536]).unwrap();
    assert_eq!(third, Stamp { address: 1024, sequence: 0, time_ns: 0, run_id: 99, key: 2, set: 5 });
}

#[test]
fn a_duplicate_unit_is_the_same_bytes_for_every_key_of_one_version() {
    let (mut a, mut b, mut c) = (vec![0; 4096], vec![0; 4096], vec![0; 4096]);
    fill_duplicate(&mut a, 512, 5, 7, 99);
    fill_duplicate(&mut b, 512, 5, 10, 99);
    fill_duplicate(&mut c, 512, 5, 8, 99);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn a_duplicates_version_changes_at_every_rewrite_across_the_wrap() {
    let mut key = 1u8;
    for _ in 0..300 {
        let next = next_key(key);
        assert_ne!(Duplicates::version(key), Duplicates::version(next), "keys {key} and {next}");
        key = next;
    }
}

#[test]
fn an_own_stamp_is_still_version_1_and_a_duplicate_version_2() {
    let (mut own, mut dup) = (vec![0; 512], vec![0; 512]);
    fill_block(&mut own, 512, 0, 3, 1, 1, 1);
    fill_duplicate(&mut dup, 512, 1, 3, 1);
    assert_eq!((own[8], dup[8]), (1, 2));
}

#[test]
fn a_version_1_stamp_naming_a_set_is_out_of_bounds() {
    let mut buf = vec![0; 512];
    fill_duplicate(&mut buf, 512, 1, 3, 1);
    buf[8] = 1;
    validation::seal_sectors_baseline(&mut buf, 512);
    assert_eq!(read_stamp(&buf), Err(StampError::Field { field: "set", value: 1 }));
}

#[test]
fn a_ratio_of_1_makes_no_duplicates() {
    let d = Duplicates::new(1.0).unwrap();
    assert!((0..10_000u64).all(|i| d.set_of(i * 4096, 1, 7).is_none()));
}

#[test]
fn ratios_below_1_or_not_finite_are_none() {
    assert_eq!(Duplicates::new(0.5), None);
    assert_eq!(Duplicates::new(f64::NAN), None);
}

proptest! {
    /// Over many units, about one in `ratio` is its own, and the copies
    /// spread over every shared unit.
    #[test]
    fn one_unit_in_ratio_is_its_own(ratio in 1.0f64..20.0, run in any::<u64>(), key in 1u8..) {
        let d = Duplicates::new(ratio).unwrap();
        let n = 40_000u64;
        let sets: Vec<Option<u8>> = (0..n).map(|i| d.set_of(i * 4096, key, run)).collect();
        let own = sets.iter().filter(|s| s.is_none()).count() as f64;
        let expected = n as f64 / ratio;
        // Five standard deviations of a binomial count.
        let sd = (n as f64 * (1.0 / ratio) * (1.0 - 1.0 / ratio)).sqrt();
        prop_assert!((own - expected).abs() <= 5.0 * sd + 1.0, "{} own, expected {}", own, expected);
        if ratio >= 2.0 {
            let used = (1..=validation::DUPLICATE_SETS).filter(|s| sets.contains(&Some(*s))).count();
            prop_assert_eq!(used, usize::from(validation::DUPLICATE_SETS));
        }
    }
}
